
/*
 * ngx_http_llm_store.c -- finished /responses kept in memory: for a later
 * request that continues one with "previous_response_id", and for GET and
 * DELETE .../responses/{id}.
 *
 * An entry keeps two texts.  The conversation: the messages the model saw
 * (without the system message made of "instructions", which does not
 * carry over, as in OpenAI's API and vLLM) followed by the assistant's
 * answer, as the text of a JSON array; a continuation parses it and
 * appends its own input.  And the response object as it was sent: the
 * body of a plain request, or the "response" of a stream's
 * response.completed event, byte for byte (metrics included), which GET
 * answers again.
 *
 * The store belongs to the worker process (each worker has its own
 * engine, and its own store): with several workers a continuation, a GET
 * or a DELETE must reach the worker that answered, or it is answered 404
 * as an unknown id.  It is bounded (llm_responses_store, by default 1024
 * responses and 64 MB of both texts together); the oldest go first.
 * vLLM's own store (VLLM_ENABLE_RESPONSES_API_STORE) is unbounded and off
 * by default.
 *
 * With llm_responses_owner, an entry belongs to the value that directive
 * had for the request that made it (a user, an API key), kept as its
 * SHA-1: another owner's lookups miss it exactly as they miss an unknown
 * id, so a leaked id alone reads nothing.  Without the directive every
 * owner is the same (all zeros), as in vLLM.
 *
 * Entries are written and deleted on the event loop, read by the
 * thread-pool task that parses a request (the conversation) and by the
 * event loop (the response object), so a mutex guards the list; readers
 * get a copy.  Every holder keeps it for a copy or a short scan of the
 * ids, never across a syscall.
 */


#include "ngx_http_llm_module.h"

#include <ngx_sha1.h>
#include <pthread.h>


typedef struct ngx_http_llm_stored_s  ngx_http_llm_stored_t;

struct ngx_http_llm_stored_s {
    ngx_http_llm_stored_t      *next;          /* newer */
    size_t                      messages_len;
    size_t                      response_len;
    u_char                      owner[NGX_HTTP_LLM_OWNER_LEN];
    char                        id[48];
    u_char                      data[1];       /* messages, then response */
};


typedef struct {
    pthread_mutex_t             lock;
    ngx_http_llm_stored_t      *oldest;
    ngx_http_llm_stored_t      *newest;
    ngx_uint_t                  entries;
    size_t                      bytes;
    ngx_uint_t                  max_entries;
    size_t                      max_bytes;
} ngx_http_llm_store_t;


static ngx_int_t ngx_http_llm_store_copy(const u_char *id, size_t len,
    const u_char *owner, ngx_pool_t *pool, ngx_uint_t response,
    ngx_str_t *out);
static ngx_http_llm_stored_t *ngx_http_llm_store_find(
    ngx_http_llm_store_t *st, const u_char *id, size_t len,
    const u_char *owner);
static void ngx_http_llm_store_unlink(ngx_http_llm_store_t *st,
    ngx_http_llm_stored_t *e);


static ngx_http_llm_store_t  ngx_http_llm_store = {
    PTHREAD_MUTEX_INITIALIZER, NULL, NULL, 0, 0, 0, 0
};


/* the worker's start, before any request: the bounds */

void
ngx_http_llm_store_init(ngx_uint_t entries, size_t bytes)
{
    ngx_http_llm_store.max_entries = entries;
    ngx_http_llm_store.max_bytes = bytes;
}


/* the event loop: the owner that r acts for (NGX_HTTP_LLM_OWNER_LEN bytes) */

ngx_int_t
ngx_http_llm_store_owner(ngx_http_request_t *r, u_char *owner)
{
    ngx_str_t                 value;
    ngx_sha1_t                sha1;
    ngx_http_llm_loc_conf_t  *llcf;

    llcf = ngx_http_get_module_loc_conf(r, ngx_http_llm_module);

    if (llcf->responses_owner == NULL) {
        ngx_memzero(owner, NGX_HTTP_LLM_OWNER_LEN);
        return NGX_OK;
    }

    if (ngx_http_complex_value(r, llcf->responses_owner, &value) != NGX_OK) {
        return NGX_ERROR;
    }

    ngx_sha1_init(&sha1);
    ngx_sha1_update(&sha1, value.data, value.len);
    ngx_sha1_final(owner, &sha1);

    return NGX_OK;
}


/*
 * The event loop: keeps a copy of both, for the owner.  NGX_DECLINED when
 * they are larger than the whole store; a store of no entries or no bytes
 * keeps nothing.
 */

ngx_int_t
ngx_http_llm_store_put(ngx_str_t *id, const u_char *owner,
    const u_char *messages, size_t messages_len, const u_char *response,
    size_t response_len)
{
    size_t                  len;
    ngx_http_llm_store_t   *st = &ngx_http_llm_store;
    ngx_http_llm_stored_t  *e;

    if (st->max_entries == 0 || st->max_bytes == 0) {
        return NGX_OK;
    }

    len = messages_len + response_len;

    if (len > st->max_bytes || id->len >= sizeof(e->id)) {
        return NGX_DECLINED;
    }

    e = malloc(sizeof(ngx_http_llm_stored_t) + len);
    if (e == NULL) {
        return NGX_ERROR;
    }

    e->next = NULL;
    e->messages_len = messages_len;
    e->response_len = response_len;
    ngx_memcpy(e->owner, owner, NGX_HTTP_LLM_OWNER_LEN);
    ngx_memcpy(e->id, id->data, id->len);
    e->id[id->len] = '\0';
    ngx_memcpy(e->data, messages, messages_len);
    ngx_memcpy(e->data + messages_len, response, response_len);

    pthread_mutex_lock(&st->lock);

    if (st->newest) {
        st->newest->next = e;

    } else {
        st->oldest = e;
    }

    st->newest = e;
    st->entries++;
    st->bytes += len;

    while (st->entries > st->max_entries || st->bytes > st->max_bytes)
    {
        ngx_http_llm_store_unlink(st, st->oldest);
    }

    pthread_mutex_unlock(&st->lock);

    return NGX_OK;
}


/* the thread pool: the conversation, copied into the job's pool */

ngx_int_t
ngx_http_llm_store_messages(const char *id, const u_char *owner,
    ngx_pool_t *pool, ngx_str_t *out)
{
    return ngx_http_llm_store_copy((const u_char *) id, ngx_strlen(id),
                                   owner, pool, 0, out);
}


/* the event loop: the response object, copied into the request's pool */

ngx_int_t
ngx_http_llm_store_response(ngx_str_t *id, const u_char *owner,
    ngx_pool_t *pool, ngx_str_t *out)
{
    return ngx_http_llm_store_copy(id->data, id->len, owner, pool, 1, out);
}


/*
 * One of an entry's texts copied into the pool.  NGX_DECLINED for an id
 * unknown to the owner, NGX_ERROR when the copy cannot be allocated.
 */

static ngx_int_t
ngx_http_llm_store_copy(const u_char *id, size_t len, const u_char *owner,
    ngx_pool_t *pool, ngx_uint_t response, ngx_str_t *out)
{
    u_char                 *text;
    size_t                  n;
    ngx_int_t               rc;
    ngx_http_llm_store_t   *st = &ngx_http_llm_store;
    ngx_http_llm_stored_t  *e;

    rc = NGX_DECLINED;

    pthread_mutex_lock(&st->lock);

    e = ngx_http_llm_store_find(st, id, len, owner);

    if (e) {
        text = response ? e->data + e->messages_len : e->data;
        n = response ? e->response_len : e->messages_len;

        out->data = ngx_pnalloc(pool, n);

        if (out->data) {
            ngx_memcpy(out->data, text, n);
            out->len = n;
            rc = NGX_OK;

        } else {
            rc = NGX_ERROR;
        }
    }

    pthread_mutex_unlock(&st->lock);

    return rc;
}


/* the event loop: NGX_OK when the owner's id was there, NGX_DECLINED if
 * not */

ngx_int_t
ngx_http_llm_store_delete(ngx_str_t *id, const u_char *owner)
{
    ngx_http_llm_store_t   *st = &ngx_http_llm_store;
    ngx_http_llm_stored_t  *e;

    pthread_mutex_lock(&st->lock);

    e = ngx_http_llm_store_find(st, id->data, id->len, owner);

    if (e) {
        ngx_http_llm_store_unlink(st, e);
    }

    pthread_mutex_unlock(&st->lock);

    return e ? NGX_OK : NGX_DECLINED;
}


/* with the lock held */

static ngx_http_llm_stored_t *
ngx_http_llm_store_find(ngx_http_llm_store_t *st, const u_char *id,
    size_t len, const u_char *owner)
{
    ngx_http_llm_stored_t  *e;

    if (len >= sizeof(e->id)) {
        return NULL;
    }

    for (e = st->oldest; e; e = e->next) {
        if (ngx_strncmp(e->id, id, len) == 0 && e->id[len] == '\0') {
            /* ids are unique: another owner's is not there for this one */
            return ngx_memcmp(e->owner, owner, NGX_HTTP_LLM_OWNER_LEN) == 0
                   ? e : NULL;
        }
    }

    return NULL;
}


/* with the lock held: e leaves the list and is freed (the list is short
 * and singly linked: finding its predecessor is a scan like the lookup) */

static void
ngx_http_llm_store_unlink(ngx_http_llm_store_t *st, ngx_http_llm_stored_t *e)
{
    ngx_http_llm_stored_t  *prev;

    if (st->oldest == e) {
        prev = NULL;
        st->oldest = e->next;

    } else {
        for (prev = st->oldest; prev->next != e; prev = prev->next) {
            /* void */
        }

        prev->next = e->next;
    }

    if (st->newest == e) {
        st->newest = prev;
    }

    st->entries--;
    st->bytes -= e->messages_len + e->response_len;
    free(e);
}
