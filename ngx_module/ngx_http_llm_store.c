
/*
 * ngx_http_llm_store.c -- finished /responses kept in memory so that a
 * later request can continue them with "previous_response_id".
 *
 * What is kept is the conversation, not the response object: the messages
 * the model saw (without the system message made of "instructions", which
 * does not carry over, as in OpenAI's API and vLLM) followed by the
 * assistant's answer, as the text of a JSON array.  A continuation parses
 * it and appends its own input.
 *
 * The store belongs to the worker process (each worker has its own
 * engine, and its own store): with several workers a continuation must
 * reach the worker that answered, or it is answered 404 as an unknown id.
 * It is bounded: at most NGX_HTTP_LLM_STORE_ENTRIES responses and
 * NGX_HTTP_LLM_STORE_BYTES bytes; the oldest go first.  vLLM's own store
 * (VLLM_ENABLE_RESPONSES_API_STORE) is unbounded and off by default.
 *
 * Entries are written on the event loop when a response finishes and read
 * by the thread-pool task that parses a request, so a mutex guards the
 * list; readers get a malloc()ed copy.  Both hold it for a copy or a
 * short scan, never across a syscall.
 */


#include "ngx_http_llm_module.h"

#include <pthread.h>


#define NGX_HTTP_LLM_STORE_ENTRIES  1024
#define NGX_HTTP_LLM_STORE_BYTES    (64 * 1024 * 1024)


typedef struct ngx_http_llm_stored_s  ngx_http_llm_stored_t;

struct ngx_http_llm_stored_s {
    ngx_http_llm_stored_t      *next;          /* newer */
    size_t                      len;
    char                        id[48];
    u_char                      messages[1];   /* len bytes follow */
};


typedef struct {
    pthread_mutex_t             lock;
    ngx_http_llm_stored_t      *oldest;
    ngx_http_llm_stored_t      *newest;
    ngx_uint_t                  entries;
    size_t                      bytes;
} ngx_http_llm_store_t;


static ngx_http_llm_store_t  ngx_http_llm_store = {
    PTHREAD_MUTEX_INITIALIZER, NULL, NULL, 0, 0
};


/* the event loop: keeps a copy; NGX_DECLINED when it is too large */

ngx_int_t
ngx_http_llm_store_put(ngx_str_t *id, const u_char *messages, size_t len)
{
    ngx_http_llm_store_t   *st = &ngx_http_llm_store;
    ngx_http_llm_stored_t  *e, *old;

    if (len > NGX_HTTP_LLM_STORE_BYTES || id->len >= sizeof(e->id)) {
        return NGX_DECLINED;
    }

    e = malloc(sizeof(ngx_http_llm_stored_t) + len);
    if (e == NULL) {
        return NGX_ERROR;
    }

    e->next = NULL;
    e->len = len;
    ngx_memcpy(e->id, id->data, id->len);
    e->id[id->len] = '\0';
    ngx_memcpy(e->messages, messages, len);

    pthread_mutex_lock(&st->lock);

    if (st->newest) {
        st->newest->next = e;

    } else {
        st->oldest = e;
    }

    st->newest = e;
    st->entries++;
    st->bytes += len;

    while (st->entries > NGX_HTTP_LLM_STORE_ENTRIES
           || st->bytes > NGX_HTTP_LLM_STORE_BYTES)
    {
        old = st->oldest;
        st->oldest = old->next;

        if (st->oldest == NULL) {
            st->newest = NULL;
        }

        st->entries--;
        st->bytes -= old->len;
        free(old);
    }

    pthread_mutex_unlock(&st->lock);

    return NGX_OK;
}


/* the thread pool: a malloc()ed, NUL-terminated copy, or NULL */

char *
ngx_http_llm_store_get(const char *id, size_t *len)
{
    char                   *copy;
    ngx_http_llm_store_t   *st = &ngx_http_llm_store;
    ngx_http_llm_stored_t  *e;

    copy = NULL;

    pthread_mutex_lock(&st->lock);

    for (e = st->oldest; e; e = e->next) {
        if (ngx_strcmp(e->id, id) != 0) {
            continue;
        }

        copy = malloc(e->len + 1);

        if (copy) {
            ngx_memcpy(copy, e->messages, e->len);
            copy[e->len] = '\0';
            *len = e->len;
        }

        break;
    }

    pthread_mutex_unlock(&st->lock);

    return copy;
}
