
/*
 * ngx_http_llm_store.c -- finished /responses kept for the whole nginx
 * instance: for a later request that continues one with
 * "previous_response_id", and for GET and DELETE .../responses/{id}.
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
 * The store is a shared memory zone, "llm_responses", a slab pool that
 * every worker maps: a response stored by one worker is continued, read,
 * deleted or cancelled through any other.  Entries are found by id in a
 * red-black tree (the CRC32 of the id, then the id) and kept in a queue
 * by age.  The zone is bounded by llm_responses_store (by default 1024
 * responses and 64 MB of both texts together, the weight of an entry);
 * the oldest go first, as many as it takes for a new one to fit, and an
 * entry heavier than the whole store is refused.  The zone is sized so
 * that the bounds fit whatever the slab's rounding (the bytes, plus a page
 * and a header per entry); should the slab still run out (its free pages
 * in pieces too small for a large entry), the oldest go until it fits.
 * vLLM's own store (VLLM_ENABLE_RESPONSES_API_STORE) is unbounded and off
 * by default, and each of its API servers has its own.
 *
 * Across "nginx -s reload" nginx hands the zone of the same name, size
 * and tag to the new configuration, and the entries carry over (the old
 * workers that still finish responses store them there too); a reload
 * that changes llm_responses_store changes the size, and the new
 * configuration starts with an empty store.  The store is lost when nginx
 * stops.
 *
 * With llm_responses_owner, an entry belongs to the value that directive
 * had for the request that made it (a user, an API key), kept as its
 * SHA-1: another owner's lookups miss it exactly as they miss an unknown
 * id, so a leaked id alone reads nothing.  Without the directive every
 * owner is the same (all zeros), as in vLLM.
 *
 * Entries are written and deleted on the event loops of the workers, read
 * by the thread-pool task that parses a request (the conversation) and by
 * the event loops (the response object).  The slab pool's mutex, shared
 * by the processes (ngx_shmtx_t; nginx's master frees it when a worker
 * dies holding it), guards the zone; readers get a copy.  Every holder
 * keeps it for a copy or a lookup, never across a syscall: a reader
 * allocates its copy with the lock released, and the slab pool does not
 * log a failed allocation.
 *
 * Nothing in the store is in progress: there are no background responses
 * (background: true is refused), a response is stored when it finishes,
 * and a cancel answers from the store alone, the same from every worker.
 */


#include "ngx_http_llm_module.h"

#include <ngx_sha1.h>


typedef struct {
    ngx_str_node_t              sn;            /* key: CRC32, str: the id */
    ngx_queue_t                 queue;         /* by age, newest first */
    size_t                      messages_len;
    size_t                      response_len;
    u_char                      owner[NGX_HTTP_LLM_OWNER_LEN];
    u_char                      data[1];       /* id, messages, response */
} ngx_http_llm_stored_t;


/* in the zone */

typedef struct {
    ngx_rbtree_t                rbtree;
    ngx_rbtree_node_t           sentinel;
    ngx_queue_t                 queue;
    ngx_uint_t                  entries;
    size_t                      bytes;
} ngx_http_llm_store_sh_t;


/* in the configuration's pool: the zone's data, and its bounds */

typedef struct {
    ngx_http_llm_store_sh_t    *sh;
    ngx_slab_pool_t            *shpool;
    ngx_uint_t                  max_entries;
    size_t                      max_bytes;
} ngx_http_llm_store_t;


static ngx_int_t ngx_http_llm_store_init_zone(ngx_shm_zone_t *zone,
    void *data);
static void ngx_http_llm_store_trim(ngx_http_llm_store_t *st,
    ngx_uint_t entries, size_t bytes);
static ngx_int_t ngx_http_llm_store_copy(const u_char *id, size_t len,
    const u_char *owner, ngx_pool_t *pool, ngx_uint_t response,
    ngx_str_t *out);
static ngx_http_llm_stored_t *ngx_http_llm_store_find(
    ngx_http_llm_store_t *st, const u_char *id, size_t len,
    const u_char *owner);
static void ngx_http_llm_store_unlink(ngx_http_llm_store_t *st,
    ngx_http_llm_stored_t *e);


static ngx_str_t              ngx_http_llm_store_name =
    ngx_string("llm_responses");

/* the worker's store: NULL when llm_responses_store keeps nothing */
static ngx_http_llm_store_t  *ngx_http_llm_store;


/*
 * At configuration: the zone, sized for both bounds.  An entry takes its
 * bytes, its header and id, and less than a page more (the slab rounds a
 * small one up to a power of two, a large one to whole pages, and one
 * small entry may keep a page of its size class alone); the slab's own
 * page table takes 24 bytes a page.  No zone when nothing is kept.
 */

ngx_int_t
ngx_http_llm_store_add_zone(ngx_conf_t *cf, ngx_uint_t entries, size_t bytes)
{
    size_t                 size, per;
    ngx_shm_zone_t        *zone;
    ngx_http_llm_store_t  *st;

    if (entries == 0 || bytes == 0) {
        return NGX_OK;
    }

    per = sizeof(ngx_http_llm_stored_t) + 64 + ngx_pagesize;

    if (entries > (NGX_MAX_SIZE_T_VALUE / 4 - bytes) / per) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                           "\"llm_responses_store\": %ui responses and %uz "
                           "bytes do not fit in shared memory",
                           entries, bytes);
        return NGX_ERROR;
    }

    size = bytes + entries * per;
    size += size / 128 + 16 * ngx_pagesize;

    st = ngx_pcalloc(cf->pool, sizeof(ngx_http_llm_store_t));
    if (st == NULL) {
        return NGX_ERROR;
    }

    st->max_entries = entries;
    st->max_bytes = bytes;

    zone = ngx_shared_memory_add(cf, &ngx_http_llm_store_name, size,
                                 &ngx_http_llm_module);
    if (zone == NULL) {
        return NGX_ERROR;
    }

    zone->init = ngx_http_llm_store_init_zone;
    zone->data = st;

    return NGX_OK;
}


/*
 * The master, for a new configuration: a zone that nginx kept from the
 * previous one (same name, size and tag) keeps its entries, within the
 * new bounds; a new zone starts empty.
 */

static ngx_int_t
ngx_http_llm_store_init_zone(ngx_shm_zone_t *zone, void *data)
{
    ngx_http_llm_store_t  *ost = data;

    size_t                 len;
    ngx_slab_pool_t       *shpool;
    ngx_http_llm_store_t  *st;

    st = zone->data;

    if (ost) {
        st->sh = ost->sh;
        st->shpool = ost->shpool;

        ngx_shmtx_lock(&st->shpool->mutex);
        ngx_http_llm_store_trim(st, 0, 0);
        ngx_shmtx_unlock(&st->shpool->mutex);

        return NGX_OK;
    }

    shpool = (ngx_slab_pool_t *) zone->shm.addr;
    st->shpool = shpool;

    if (zone->shm.exists) {
        st->sh = shpool->data;
        return NGX_OK;
    }

    st->sh = ngx_slab_alloc(shpool, sizeof(ngx_http_llm_store_sh_t));
    if (st->sh == NULL) {
        return NGX_ERROR;
    }

    shpool->data = st->sh;

    ngx_rbtree_init(&st->sh->rbtree, &st->sh->sentinel,
                    ngx_str_rbtree_insert_value);
    ngx_queue_init(&st->sh->queue);
    st->sh->entries = 0;
    st->sh->bytes = 0;

    len = sizeof(" in zone \"\"") + zone->shm.name.len;

    shpool->log_ctx = ngx_slab_alloc(shpool, len);
    if (shpool->log_ctx == NULL) {
        return NGX_ERROR;
    }

    ngx_sprintf(shpool->log_ctx, " in zone \"%V\"%Z", &zone->shm.name);

    /* an allocation that fails makes room instead: no log line, which
     * would be a write with the lock held */
    shpool->log_nomem = 0;

    return NGX_OK;
}


/* the worker's start, before any request: its configuration's zone */

void
ngx_http_llm_store_init(ngx_cycle_t *cycle)
{
    ngx_uint_t        i;
    ngx_list_part_t  *part;
    ngx_shm_zone_t   *zone;

    ngx_http_llm_store = NULL;

    part = &cycle->shared_memory.part;
    zone = part->elts;

    for (i = 0; /* void */ ; i++) {

        if (i >= part->nelts) {
            if (part->next == NULL) {
                return;
            }

            part = part->next;
            zone = part->elts;
            i = 0;
        }

        if (zone[i].tag == &ngx_http_llm_module
            && zone[i].shm.name.len == ngx_http_llm_store_name.len
            && ngx_strncmp(zone[i].shm.name.data,
                           ngx_http_llm_store_name.data,
                           ngx_http_llm_store_name.len) == 0)
        {
            ngx_http_llm_store = zone[i].data;
            return;
        }
    }
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
    u_char                 *p;
    size_t                  len, size;
    ngx_http_llm_store_t   *st = ngx_http_llm_store;
    ngx_http_llm_stored_t  *e;

    if (st == NULL) {
        return NGX_OK;
    }

    len = messages_len + response_len;

    if (len > st->max_bytes || id->len > 64) {
        return NGX_DECLINED;
    }

    ngx_shmtx_lock(&st->shpool->mutex);

    /* room within the bounds: the oldest go */
    ngx_http_llm_store_trim(st, 1, len);

    /* and within the slab, should its free pages be in pieces */

    size = offsetof(ngx_http_llm_stored_t, data) + id->len + len;

    for ( ;; ) {
        e = ngx_slab_alloc_locked(st->shpool, size);
        if (e) {
            break;
        }

        if (ngx_queue_empty(&st->sh->queue)) {
            /* not with the zone sized for one entry of max_bytes */
            ngx_shmtx_unlock(&st->shpool->mutex);
            return NGX_ERROR;
        }

        ngx_http_llm_store_unlink(st, ngx_queue_data(
                                      ngx_queue_last(&st->sh->queue),
                                      ngx_http_llm_stored_t, queue));
    }

    e->messages_len = messages_len;
    e->response_len = response_len;
    ngx_memcpy(e->owner, owner, NGX_HTTP_LLM_OWNER_LEN);

    p = ngx_cpymem(e->data, id->data, id->len);
    p = ngx_cpymem(p, messages, messages_len);
    ngx_memcpy(p, response, response_len);

    e->sn.str.data = e->data;
    e->sn.str.len = id->len;
    e->sn.node.key = ngx_crc32_short(id->data, id->len);

    ngx_rbtree_insert(&st->sh->rbtree, &e->sn.node);
    ngx_queue_insert_head(&st->sh->queue, &e->queue);

    st->sh->entries++;
    st->sh->bytes += len;

    ngx_shmtx_unlock(&st->shpool->mutex);

    return NGX_OK;
}


/* with the lock held: the oldest go until entries and bytes more fit */

static void
ngx_http_llm_store_trim(ngx_http_llm_store_t *st, ngx_uint_t entries,
    size_t bytes)
{
    ngx_http_llm_store_sh_t  *sh = st->sh;

    while (!ngx_queue_empty(&sh->queue)
           && (sh->entries + entries > st->max_entries
               || sh->bytes + bytes > st->max_bytes))
    {
        ngx_http_llm_store_unlink(st, ngx_queue_data(ngx_queue_last(
                                                         &sh->queue),
                                                     ngx_http_llm_stored_t,
                                                     queue));
    }
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
 * unknown to the owner, NGX_ERROR when the copy cannot be allocated.  The
 * copy is allocated with the lock released (an allocation may be a
 * syscall), then the entry is looked up again: entries never change, so
 * the second lookup finds the same one, or none when it went meanwhile.
 */

static ngx_int_t
ngx_http_llm_store_copy(const u_char *id, size_t len, const u_char *owner,
    ngx_pool_t *pool, ngx_uint_t response, ngx_str_t *out)
{
    u_char                 *text, *buf;
    size_t                  n, size;
    ngx_http_llm_store_t   *st = ngx_http_llm_store;
    ngx_http_llm_stored_t  *e;

    if (st == NULL) {
        return NGX_DECLINED;
    }

    buf = NULL;
    size = 0;

    for ( ;; ) {
        ngx_shmtx_lock(&st->shpool->mutex);

        e = ngx_http_llm_store_find(st, id, len, owner);

        if (e == NULL) {
            ngx_shmtx_unlock(&st->shpool->mutex);
            return NGX_DECLINED;
        }

        text = e->data + e->sn.str.len;
        n = e->messages_len;

        if (response) {
            text += n;
            n = e->response_len;
        }

        if (buf && n <= size) {
            ngx_memcpy(buf, text, n);
            ngx_shmtx_unlock(&st->shpool->mutex);

            out->data = buf;
            out->len = n;

            return NGX_OK;
        }

        ngx_shmtx_unlock(&st->shpool->mutex);

        buf = ngx_pnalloc(pool, n ? n : 1);
        if (buf == NULL) {
            return NGX_ERROR;
        }

        size = n;
    }
}


/* the event loop: NGX_OK when the owner's id was there, NGX_DECLINED if
 * not */

ngx_int_t
ngx_http_llm_store_delete(ngx_str_t *id, const u_char *owner)
{
    ngx_http_llm_store_t   *st = ngx_http_llm_store;
    ngx_http_llm_stored_t  *e;

    if (st == NULL) {
        return NGX_DECLINED;
    }

    ngx_shmtx_lock(&st->shpool->mutex);

    e = ngx_http_llm_store_find(st, id->data, id->len, owner);

    if (e) {
        ngx_http_llm_store_unlink(st, e);
    }

    ngx_shmtx_unlock(&st->shpool->mutex);

    return e ? NGX_OK : NGX_DECLINED;
}


/* with the lock held */

static ngx_http_llm_stored_t *
ngx_http_llm_store_find(ngx_http_llm_store_t *st, const u_char *id,
    size_t len, const u_char *owner)
{
    ngx_str_t               name;
    ngx_str_node_t         *sn;
    ngx_http_llm_stored_t  *e;

    name.data = (u_char *) id;
    name.len = len;

    sn = ngx_str_rbtree_lookup(&st->sh->rbtree, &name,
                               ngx_crc32_short(name.data, name.len));
    if (sn == NULL) {
        return NULL;
    }

    e = (ngx_http_llm_stored_t *) sn;

    /* ids are unique: another owner's is not there for this one */
    return ngx_memcmp(e->owner, owner, NGX_HTTP_LLM_OWNER_LEN) == 0
           ? e : NULL;
}


/* with the lock held: e leaves the tree and the queue, and is freed */

static void
ngx_http_llm_store_unlink(ngx_http_llm_store_t *st, ngx_http_llm_stored_t *e)
{
    ngx_rbtree_delete(&st->sh->rbtree, &e->sn.node);
    ngx_queue_remove(&e->queue);

    st->sh->entries--;
    st->sh->bytes -= e->messages_len + e->response_len;

    ngx_slab_free_locked(st->shpool, e);
}
