
/*
 * ngx_http_llm_balance.c -- "llm_balance prefix [load_factor=F] [window=T]"
 * in an upstream{}: consistent hashing of $llm_prefix_key, bounded loads
 * (Mirrokni, Thorup, Zadimoghaddam 2016), a module of its own in the .so,
 * built like nginx's ngx_http_upstream_hash_module.
 *
 * The ring is nginx's "hash ... consistent" ring (160 points per unit of
 * weight, crc32 of "host\0port" chained), so without load the two agree
 * on every key.  A peer's load is its requests in flight (shared by the
 * workers) averaged over a window (window=, 5s), and the bound of a peer
 * is
 *
 *     load_factor * (the usable peers' load + 1) * weight / their weight,
 *
 * the new request counted.  Keys move whole: the zone remembers each
 * key's peer and its own load; a key stays on its peer while that is
 * under the bound, else goes to the least loaded peer with room for it
 * whole (a hot key, more than a peer's share, spills request by request
 * instead).  Counted per request and instantaneously, a burst of
 * a few requests pushed a share of every prefix of a busy peer to
 * others, where none was cached (1.6x round robin's prefix-cache hits
 * against 1.9-3.2x: t/api_router.t).  Peers that are down, failed
 * (max_fails/fail_timeout) or already tried for this request
 * (proxy_next_upstream) are passed over; a failed peer's keys move and
 * come back with it.  The zone "llm_balance" keeps loads and keys across
 * reloads (slots keyed by upstream and peer).
 *
 * Each request counted has a flight in the zone naming the process slot
 * (ngx_process_slot) that counted it.  A worker that dies with requests
 * in flight (a crash, kill -9) never frees them; the master starts its
 * successor in the same slot, which takes them back when it starts, so a
 * peer does not look loaded forever.  Old workers finishing their
 * requests after a reload keep their slots, and their flights, until
 * they exit.
 */


#include <math.h>

#include "ngx_http_llm_module.h"


#define NGX_HTTP_LLM_BALANCE_SLOTS  1024
#define NGX_HTTP_LLM_BALANCE_KEYS   4096
#define NGX_HTTP_LLM_BALANCE_PROBE  8
#define NGX_HTTP_LLM_BALANCE_FLIGHTS  16384
#define NGX_HTTP_LLM_BALANCE_PEERS  (64 * 8 * sizeof(ngx_uint_t))


typedef struct {
    uint32_t                            hash;
    ngx_uint_t                          peer;       /* index */
} ngx_http_llm_balance_point_t;


/* a peer's shared load, keyed by crc32("upstream/peer"); under the
 * zone's mutex */
typedef struct {
    uint32_t                            key;
    ngx_uint_t                          inflight;
    double                              avg;          /* in flight, averaged
                                                         over the window */
    ngx_msec_t                          stamp;        /* avg's time */
} ngx_http_llm_balance_slot_t;


/* a prefix key's peer and its own load, in the same units */
typedef struct {
    ngx_http_llm_balance_slot_t         load;         /* .key: the key's
                                                         hash ^ upstream's */
    ngx_uint_t                          peer;
} ngx_http_llm_balance_key_t;


/* a request counted on a peer (and on its key) by a process */
typedef struct {
    uint32_t                            process;      /* ngx_process_slot
                                                         + 1; 0: free */
    uint32_t                            next;         /* the free list */
    uint32_t                            peer;         /* in peers[] */
    uint32_t                            key;          /* in keys[] + 1;
                                                         0: not counted */
    uint32_t                            key_id;       /* what it held */
} ngx_http_llm_balance_flight_t;


typedef struct {
    ngx_http_llm_balance_slot_t         peers[NGX_HTTP_LLM_BALANCE_SLOTS];
    ngx_http_llm_balance_key_t          keys[NGX_HTTP_LLM_BALANCE_KEYS];
    uint32_t                            free;         /* the first free
                                                         flight */
    ngx_http_llm_balance_flight_t       flights[NGX_HTTP_LLM_BALANCE_FLIGHTS];
} ngx_http_llm_balance_shctx_t;


typedef struct {
    ngx_uint_t                          load_factor;  /* x 100 */
    ngx_msec_t                          window;
    ngx_str_t                           name;         /* the upstream's */
    ngx_http_llm_balance_point_t       *points;
    ngx_uint_t                          npoints;
    ngx_uint_t                          npeers;
    ngx_http_upstream_rr_peer_t       **peer;         /* by index */
    ngx_http_llm_balance_slot_t       **slot;         /* by index, in the
                                                         zone */
    uint32_t                            id;           /* crc32 of the name */
    ngx_slab_pool_t                    *shpool;
    ngx_http_llm_balance_shctx_t       *sh;
    ngx_int_t                           index;        /* $llm_prefix_key */
} ngx_http_llm_balance_srv_conf_t;


typedef struct {
    ngx_array_t                         upstreams;    /* srv confs */
    ngx_shm_zone_t                     *zone;
    ngx_slab_pool_t                    *shpool;
    ngx_http_llm_balance_shctx_t       *sh;
} ngx_http_llm_balance_main_conf_t;


typedef struct {
    /* the round robin data must be first */
    ngx_http_upstream_rr_peer_data_t    rrp;
    ngx_http_llm_balance_srv_conf_t    *conf;
    uint32_t                            hash;
    ngx_uint_t                          has_key;
    ngx_int_t                           chosen;       /* index, or -1 */
    ngx_http_llm_balance_key_t         *key;          /* in the zone */
    uint32_t                            key_id;       /* what it holds */
    ngx_http_llm_balance_key_t         *counted;      /* key, if counted */
    uint32_t                            flight;       /* FLIGHTS: none */
} ngx_http_llm_balance_peer_data_t;


static void *ngx_http_llm_balance_create_main_conf(ngx_conf_t *cf);
static void *ngx_http_llm_balance_create_srv_conf(ngx_conf_t *cf);
static char *ngx_http_llm_balance(ngx_conf_t *cf, ngx_command_t *cmd,
    void *conf);
static ngx_int_t ngx_http_llm_balance_init_zone(ngx_shm_zone_t *shm_zone,
    void *data);
static ngx_int_t ngx_http_llm_balance_init_process(ngx_cycle_t *cycle);
static ngx_int_t ngx_http_llm_balance_init(ngx_conf_t *cf,
    ngx_http_upstream_srv_conf_t *us);
static int ngx_libc_cdecl ngx_http_llm_balance_cmp_points(const void *one,
    const void *two);
static ngx_int_t ngx_http_llm_balance_init_peer(ngx_http_request_t *r,
    ngx_http_upstream_srv_conf_t *us);
static ngx_int_t ngx_http_llm_balance_get_peer(ngx_peer_connection_t *pc,
    void *data);
static ngx_int_t ngx_http_llm_balance_pick(
    ngx_http_llm_balance_peer_data_t *bp);
static ngx_uint_t ngx_http_llm_balance_usable(
    ngx_http_llm_balance_peer_data_t *bp, ngx_uint_t i, time_t now);
static void ngx_http_llm_balance_fold(ngx_http_llm_balance_srv_conf_t *bcf,
    ngx_http_llm_balance_slot_t *slot);
static ngx_http_llm_balance_key_t *ngx_http_llm_balance_key(
    ngx_http_llm_balance_peer_data_t *bp);
static void ngx_http_llm_balance_move(ngx_http_llm_balance_srv_conf_t *bcf,
    ngx_http_llm_balance_key_t *key, ngx_int_t from, ngx_uint_t to);
static void ngx_http_llm_balance_hold(ngx_http_llm_balance_peer_data_t *bp,
    ngx_uint_t i);
static void ngx_http_llm_balance_release(
    ngx_http_llm_balance_peer_data_t *bp);
static void ngx_http_llm_balance_free_peer(ngx_peer_connection_t *pc,
    void *data, ngx_uint_t state);


static ngx_command_t  ngx_http_llm_balance_commands[] = {

    { ngx_string("llm_balance"),
      NGX_HTTP_UPS_CONF|NGX_CONF_TAKE123,
      ngx_http_llm_balance,
      NGX_HTTP_SRV_CONF_OFFSET,
      0,
      NULL },

      ngx_null_command
};


static ngx_http_module_t  ngx_http_llm_balance_module_ctx = {
    NULL,                                  /* preconfiguration */
    NULL,                                  /* postconfiguration */

    ngx_http_llm_balance_create_main_conf, /* create main configuration */
    NULL,                                  /* init main configuration */

    ngx_http_llm_balance_create_srv_conf,  /* create server configuration */
    NULL,                                  /* merge server configuration */

    NULL,                                  /* create location configuration */
    NULL                                   /* merge location configuration */
};


ngx_module_t  ngx_http_llm_balance_module = {
    NGX_MODULE_V1,
    &ngx_http_llm_balance_module_ctx,      /* module context */
    ngx_http_llm_balance_commands,         /* module directives */
    NGX_HTTP_MODULE,                       /* module type */
    NULL,                                  /* init master */
    NULL,                                  /* init module */
    ngx_http_llm_balance_init_process,     /* init process */
    NULL,                                  /* init thread */
    NULL,                                  /* exit thread */
    NULL,                                  /* exit process */
    NULL,                                  /* exit master */
    NGX_MODULE_V1_PADDING
};


static ngx_str_t   ngx_http_llm_balance_zone_name = ngx_string("llm_balance");
static ngx_str_t   ngx_http_llm_balance_var = ngx_string("llm_prefix_key");
static ngx_uint_t  ngx_http_llm_balance_full;   /* said, in this process */


static void *
ngx_http_llm_balance_create_main_conf(ngx_conf_t *cf)
{
    ngx_http_llm_balance_main_conf_t  *bmcf;

    bmcf = ngx_pcalloc(cf->pool, sizeof(ngx_http_llm_balance_main_conf_t));
    if (bmcf == NULL) {
        return NULL;
    }

    if (ngx_array_init(&bmcf->upstreams, cf->pool, 4,
                       sizeof(ngx_http_llm_balance_srv_conf_t *))
        != NGX_OK)
    {
        return NULL;
    }

    return bmcf;
}


static void *
ngx_http_llm_balance_create_srv_conf(ngx_conf_t *cf)
{
    ngx_http_llm_balance_srv_conf_t  *conf;

    conf = ngx_pcalloc(cf->pool, sizeof(ngx_http_llm_balance_srv_conf_t));
    if (conf == NULL) {
        return NULL;
    }

    /*
     * set by ngx_pcalloc():
     *
     *     conf->load_factor = 0;
     *     conf->points = NULL;
     *     conf->peer = NULL;
     *     conf->slot = NULL;
     */

    return conf;
}


/* llm_balance prefix [load_factor=F] */

static char *
ngx_http_llm_balance(ngx_conf_t *cf, ngx_command_t *cmd, void *conf)
{
    ngx_http_llm_balance_srv_conf_t *bcf = conf;

    ngx_str_t                         *value, s;
    ngx_int_t                          f;
    ngx_uint_t                         i;
    ngx_http_upstream_srv_conf_t      *uscf;
    ngx_http_llm_balance_srv_conf_t  **up;
    ngx_http_llm_balance_main_conf_t  *bmcf;

    if (bcf->load_factor) {
        return "is duplicate";
    }

    value = cf->args->elts;

    if (ngx_strcmp(value[1].data, "prefix") != 0) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                           "\"llm_balance\": invalid method \"%V\", "
                           "the one method is \"prefix\"", &value[1]);
        return NGX_CONF_ERROR;
    }

    bcf->load_factor = 125;
    bcf->window = 5000;

    for (i = 2; i < cf->args->nelts; i++) {

        if (ngx_strncmp(value[i].data, "load_factor=", 12) == 0) {
            s.data = value[i].data + 12;
            s.len = value[i].len - 12;

            /* two decimals, and more than 1: a factor of 1 cannot place
             * a request when every peer has the mean */
            f = ngx_atofp(s.data, s.len, 2);
            if (f == NGX_ERROR || f <= 100) {
                ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                                   "\"llm_balance\": load_factor must be a "
                                   "number above 1 with at most two "
                                   "decimals, got \"%V\"", &s);
                return NGX_CONF_ERROR;
            }

            bcf->load_factor = f;
            continue;
        }

        if (ngx_strncmp(value[i].data, "window=", 7) == 0) {
            s.data = value[i].data + 7;
            s.len = value[i].len - 7;

            bcf->window = ngx_parse_time(&s, 0);
            if (bcf->window == (ngx_msec_t) NGX_ERROR || bcf->window == 0) {
                ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                                   "\"llm_balance\": invalid window "
                                   "\"%V\"", &s);
                return NGX_CONF_ERROR;
            }

            continue;
        }

        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                           "\"llm_balance\": invalid parameter \"%V\"",
                           &value[i]);
        return NGX_CONF_ERROR;
    }

    bcf->index = ngx_http_get_variable_index(cf, &ngx_http_llm_balance_var);
    if (bcf->index == NGX_ERROR) {
        return NGX_CONF_ERROR;
    }

    uscf = ngx_http_conf_get_module_srv_conf(cf, ngx_http_upstream_module);

    if (uscf->peer.init_upstream) {
        ngx_conf_log_error(NGX_LOG_WARN, cf, 0,
                           "load balancing method redefined");
    }

    uscf->peer.init_upstream = ngx_http_llm_balance_init;
    uscf->flags = NGX_HTTP_UPSTREAM_CREATE
                  |NGX_HTTP_UPSTREAM_WEIGHT
                  |NGX_HTTP_UPSTREAM_MAX_CONNS
                  |NGX_HTTP_UPSTREAM_MAX_FAILS
                  |NGX_HTTP_UPSTREAM_FAIL_TIMEOUT
                  |NGX_HTTP_UPSTREAM_DOWN;

    bcf->name = uscf->host;
    bcf->id = ngx_crc32_long(uscf->host.data, uscf->host.len);

    bmcf = ngx_http_conf_get_module_main_conf(cf, ngx_http_llm_balance_module);

    up = ngx_array_push(&bmcf->upstreams);
    if (up == NULL) {
        return NGX_CONF_ERROR;
    }

    *up = bcf;

    if (bmcf->zone == NULL) {
        bmcf->zone = ngx_shared_memory_add(cf, &ngx_http_llm_balance_zone_name,
                                           sizeof(ngx_http_llm_balance_shctx_t)
                                           + 8 * ngx_pagesize,
                                           &ngx_http_llm_balance_module);
        if (bmcf->zone == NULL) {
            return NGX_CONF_ERROR;
        }

        bmcf->zone->init = ngx_http_llm_balance_init_zone;
        bmcf->zone->data = bmcf;
    }

    return NGX_CONF_OK;
}


/*
 * The slots live in the zone's slab pool from its first cycle on; each
 * configuration finds (or takes) its peers' slots by key, so a reload
 * keeps the counts that old workers' requests will still decrement.
 */

static ngx_int_t
ngx_http_llm_balance_init_zone(ngx_shm_zone_t *shm_zone, void *data)
{
    ngx_http_llm_balance_main_conf_t *bmcf = shm_zone->data;

    uint32_t                          key;
    ngx_uint_t                        i, j, k, h;
    ngx_slab_pool_t                  *shpool;
    ngx_http_llm_balance_flight_t    *f;
    ngx_http_llm_balance_slot_t      *slots;
    ngx_http_llm_balance_shctx_t     *sh;
    ngx_http_llm_balance_srv_conf_t **up, *bcf;

    shpool = (ngx_slab_pool_t *) shm_zone->shm.addr;

    if (shpool->data == NULL) {
        sh = ngx_slab_calloc(shpool, sizeof(ngx_http_llm_balance_shctx_t));
        if (sh == NULL) {
            return NGX_ERROR;
        }

        for (i = 0; i < NGX_HTTP_LLM_BALANCE_FLIGHTS; i++) {
            f = &sh->flights[i];
            f->next = i + 1;
        }

        sh->free = 0;
        shpool->data = sh;
    }

    sh = shpool->data;
    bmcf->shpool = shpool;
    bmcf->sh = sh;
    slots = sh->peers;
    up = bmcf->upstreams.elts;

    for (i = 0; i < bmcf->upstreams.nelts; i++) {
        bcf = up[i];

        for (j = 0; j < bcf->npeers; j++) {
            ngx_crc32_init(key);
            ngx_crc32_update(&key, bcf->name.data, bcf->name.len);
            ngx_crc32_update(&key, (u_char *) "/", 1);
            ngx_crc32_update(&key, bcf->peer[j]->name.data,
                             bcf->peer[j]->name.len);
            ngx_crc32_final(key);
            key = key ? key : 1;        /* 0 marks a free slot */

            /* open addressing, never deleted: a fleet's peers over its
             * reloads are far fewer than the slots */
            for (k = 0; k < NGX_HTTP_LLM_BALANCE_SLOTS; k++) {
                h = (key + k) % NGX_HTTP_LLM_BALANCE_SLOTS;

                if (slots[h].key == key || slots[h].key == 0) {
                    slots[h].key = key;
                    break;
                }
            }

            if (k == NGX_HTTP_LLM_BALANCE_SLOTS) {
                ngx_log_error(NGX_LOG_EMERG, shm_zone->shm.log, 0,
                              "llm_balance: more than %d peers",
                              NGX_HTTP_LLM_BALANCE_SLOTS);
                return NGX_ERROR;
            }

            bcf->slot[j] = &slots[h];
        }

        bcf->shpool = shpool;
        bcf->sh = sh;
    }

    return NGX_OK;
}


/*
 * A worker: the requests its process slot's previous holder left in
 * flight (it died: the master starts a worker in the slot of one that
 * exited abnormally) are no longer counted.  They are not folded into
 * the averages, which thus drop from the last change on: the requests
 * ended with their process.
 */

static ngx_int_t
ngx_http_llm_balance_init_process(ngx_cycle_t *cycle)
{
    uint32_t                           process;
    ngx_uint_t                         i, j, n, total;
    ngx_http_llm_balance_key_t        *key;
    ngx_http_llm_balance_slot_t       *slot;
    ngx_http_llm_balance_shctx_t      *sh;
    ngx_http_llm_balance_flight_t     *f;
    ngx_http_llm_balance_srv_conf_t  **up, *bcf;
    ngx_http_llm_balance_main_conf_t  *bmcf;
    static ngx_uint_t                  left[NGX_HTTP_LLM_BALANCE_SLOTS];

    bmcf = ngx_http_cycle_get_module_main_conf(cycle,
                                               ngx_http_llm_balance_module);

    if (bmcf == NULL || bmcf->sh == NULL) {
        return NGX_OK;
    }

    sh = bmcf->sh;
    process = (uint32_t) ngx_process_slot + 1;
    total = 0;

    ngx_memzero(left, sizeof(left));

    ngx_shmtx_lock(&bmcf->shpool->mutex);

    for (n = 0; n < NGX_HTTP_LLM_BALANCE_FLIGHTS; n++) {
        f = &sh->flights[n];

        if (f->process != process) {
            continue;
        }

        slot = &sh->peers[f->peer];

        if (slot->inflight) {
            slot->inflight--;
        }

        if (f->key) {
            key = &sh->keys[f->key - 1];

            if (key->load.key == f->key_id && key->load.inflight) {
                key->load.inflight--;
            }
        }

        f->process = 0;
        f->next = sh->free;
        sh->free = n;

        left[f->peer]++;
        total++;
    }

    ngx_shmtx_unlock(&bmcf->shpool->mutex);

    if (total == 0) {
        return NGX_OK;
    }

    up = bmcf->upstreams.elts;

    for (i = 0; i < bmcf->upstreams.nelts; i++) {
        bcf = up[i];

        for (j = 0; j < bcf->npeers; j++) {
            n = left[bcf->slot[j] - sh->peers];

            if (n) {
                ngx_log_error(NGX_LOG_WARN, cycle->log, 0,
                              "llm_balance: %ui requests to \"%V\" in "
                              "upstream \"%V\" were left in flight by the "
                              "process that died in slot %i, no longer "
                              "counted", n, &bcf->peer[j]->name, &bcf->name,
                              ngx_process_slot);
            }
        }
    }

    return NGX_OK;
}


/* the round robin peers, then the ring over them, as the hash module */

static ngx_int_t
ngx_http_llm_balance_init(ngx_conf_t *cf, ngx_http_upstream_srv_conf_t *us)
{
    u_char                           *host, *port, c;
    size_t                            host_len, port_len, size;
    uint32_t                          hash, base_hash;
    ngx_uint_t                        i, j, n, w;
    ngx_http_upstream_rr_peer_t      *peer;
    ngx_http_upstream_rr_peers_t     *peers;
    ngx_http_llm_balance_point_t     *points;
    ngx_http_llm_main_conf_t         *lmcf;
    ngx_http_llm_balance_srv_conf_t  *bcf;
    union {
        uint32_t                      value;
        u_char                        byte[4];
    } prev_hash;

    bcf = ngx_http_conf_upstream_srv_conf(us, ngx_http_llm_balance_module);
    lmcf = ngx_http_conf_get_module_main_conf(cf, ngx_http_llm_module);

    /* without a router model no request has a key: round robin it'd be */
    if (lmcf->router == NULL) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                           "\"llm_balance\" in upstream \"%V\" requires "
                           "\"llm_router_model\" in the http block",
                           &bcf->name);
        return NGX_ERROR;
    }

    if (ngx_http_upstream_init_round_robin(cf, us) != NGX_OK) {
        return NGX_ERROR;
    }

    us->peer.init = ngx_http_llm_balance_init_peer;

    peers = us->peer.data;

    bcf->npeers = peers->number;

    if (bcf->npeers > NGX_HTTP_LLM_BALANCE_PEERS) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                           "\"llm_balance\": more than %uz servers in "
                           "upstream \"%V\"", NGX_HTTP_LLM_BALANCE_PEERS,
                           &bcf->name);
        return NGX_ERROR;
    }
    bcf->peer = ngx_pcalloc(cf->pool, peers->number * sizeof(void *));
    bcf->slot = ngx_pcalloc(cf->pool, peers->number * sizeof(void *));
    if (bcf->peer == NULL || bcf->slot == NULL) {
        return NGX_ERROR;
    }

    w = 0;
    for (peer = peers->peer, i = 0; peer; peer = peer->next, i++) {
        bcf->peer[i] = peer;
        w += (ngx_uint_t) peer->weight;
    }

    size = w * 160 * sizeof(ngx_http_llm_balance_point_t);

    points = ngx_palloc(cf->pool, size);
    if (points == NULL) {
        return NGX_ERROR;
    }

    n = 0;

    for (i = 0; i < bcf->npeers; i++) {
        peer = bcf->peer[i];

        /* crc32(HOST \0 PORT PREV_HASH), Cache::Memcached::Fast's, as the
         * hash module; over the peer's address, one per peer */

        host = peer->name.data;
        host_len = peer->name.len;
        port = NULL;
        port_len = 0;

        for (j = 0; j < peer->name.len; j++) {
            c = peer->name.data[peer->name.len - j - 1];

            if (c == ':') {
                host_len = peer->name.len - j - 1;
                port = peer->name.data + peer->name.len - j;
                port_len = j;
                break;
            }
        }

        ngx_crc32_init(base_hash);
        ngx_crc32_update(&base_hash, host, host_len);
        ngx_crc32_update(&base_hash, (u_char *) "", 1);
        ngx_crc32_update(&base_hash, port, port_len);

        prev_hash.value = 0;

        for (j = 0; j < (ngx_uint_t) peer->weight * 160; j++) {
            hash = base_hash;

            ngx_crc32_update(&hash, prev_hash.byte, 4);
            ngx_crc32_final(hash);

            points[n].hash = hash;
            points[n].peer = i;
            n++;

#if (NGX_HAVE_LITTLE_ENDIAN)
            prev_hash.value = hash;
#else
            prev_hash.byte[0] = (u_char) (hash & 0xff);
            prev_hash.byte[1] = (u_char) ((hash >> 8) & 0xff);
            prev_hash.byte[2] = (u_char) ((hash >> 16) & 0xff);
            prev_hash.byte[3] = (u_char) ((hash >> 24) & 0xff);
#endif
        }
    }

    ngx_qsort(points, n, sizeof(ngx_http_llm_balance_point_t),
              ngx_http_llm_balance_cmp_points);

    for (i = 0, j = 1; j < n; j++) {
        if (points[i].hash != points[j].hash) {
            points[++i] = points[j];
        }
    }

    bcf->points = points;
    bcf->npoints = n ? i + 1 : 0;

    return NGX_OK;
}


static int ngx_libc_cdecl
ngx_http_llm_balance_cmp_points(const void *one, const void *two)
{
    const ngx_http_llm_balance_point_t  *first = one;
    const ngx_http_llm_balance_point_t  *second = two;

    if (first->hash < second->hash) {
        return -1;

    } else if (first->hash > second->hash) {
        return 1;

    } else {
        return 0;
    }
}


static ngx_int_t
ngx_http_llm_balance_init_peer(ngx_http_request_t *r,
    ngx_http_upstream_srv_conf_t *us)
{
    ngx_http_variable_value_t         *key;
    ngx_http_llm_balance_srv_conf_t   *bcf;
    ngx_http_llm_balance_peer_data_t  *bp;

    bp = ngx_palloc(r->pool, sizeof(ngx_http_llm_balance_peer_data_t));
    if (bp == NULL) {
        return NGX_ERROR;
    }

    r->upstream->peer.data = &bp->rrp;

    if (ngx_http_upstream_init_round_robin_peer(r, us) != NGX_OK) {
        return NGX_ERROR;
    }

    r->upstream->peer.get = ngx_http_llm_balance_get_peer;
    r->upstream->peer.free = ngx_http_llm_balance_free_peer;

    bcf = ngx_http_conf_upstream_srv_conf(us, ngx_http_llm_balance_module);

    bp->conf = bcf;
    bp->chosen = -1;
    bp->has_key = 0;
    bp->hash = 0;
    bp->key = NULL;
    bp->key_id = 0;
    bp->counted = NULL;
    bp->flight = NGX_HTTP_LLM_BALANCE_FLIGHTS;

    key = ngx_http_get_indexed_variable(r, bcf->index);

    if (key != NULL && !key->not_found && key->len) {
        bp->hash = ngx_crc32_long(key->data, key->len);
        bp->has_key = 1;
    }

    ngx_log_debug2(NGX_LOG_DEBUG_HTTP, r->connection->log, 0,
                   "llm balance key:\"%v\", hash: %uD", key, bp->hash);

    return NGX_OK;
}


static ngx_int_t
ngx_http_llm_balance_get_peer(ngx_peer_connection_t *pc, void *data)
{
    ngx_http_llm_balance_peer_data_t  *bp = data;

    ngx_int_t                         i, rc;
    time_t                            now;
    uintptr_t                         m;
    ngx_uint_t                        n;
    ngx_http_upstream_rr_peer_t      *best;
    ngx_http_llm_balance_srv_conf_t  *bcf;

    bcf = bp->conf;

    ngx_http_upstream_rr_peers_rlock(bp->rrp.peers);
    ngx_shmtx_lock(&bcf->shpool->mutex);

    i = (bp->has_key && !bp->rrp.peers->single && bcf->npoints)
        ? ngx_http_llm_balance_pick(bp) : -1;

    if (i < 0) {
        ngx_shmtx_unlock(&bcf->shpool->mutex);
        ngx_http_upstream_rr_peers_unlock(bp->rrp.peers);

        /* no key, or no peer left on the ring: round robin decides */
        rc = ngx_http_upstream_get_round_robin_peer(pc, &bp->rrp);

        if (rc == NGX_OK) {
            for (i = 0; i < (ngx_int_t) bcf->npeers; i++) {
                if (bcf->peer[i] == bp->rrp.current) {
                    ngx_shmtx_lock(&bcf->shpool->mutex);
                    ngx_http_llm_balance_hold(bp, i);
                    ngx_shmtx_unlock(&bcf->shpool->mutex);
                    break;
                }
            }
        }

        return rc;
    }

    ngx_http_llm_balance_hold(bp, i);

    ngx_shmtx_unlock(&bcf->shpool->mutex);

    best = bcf->peer[i];
    now = ngx_time();

    pc->connection = NULL;

    ngx_http_upstream_rr_peer_lock(bp->rrp.peers, best);

    bp->rrp.current = best;

    pc->sockaddr = best->sockaddr;
    pc->socklen = best->socklen;
    pc->name = &best->name;

    best->conns++;

    if (now - best->checked > best->fail_timeout) {
        best->checked = now;
    }

    ngx_http_upstream_rr_peer_unlock(bp->rrp.peers, best);
    ngx_http_upstream_rr_peers_unlock(bp->rrp.peers);

    n = i / (8 * sizeof(uintptr_t));
    m = (uintptr_t) 1 << i % (8 * sizeof(uintptr_t));

    bp->rrp.tried[n] |= m;

    return NGX_OK;
}


/*
 * The peer for the key: walking the ring from the key's point, over the
 * usable peers, the first that is
 *
 *   - the key's own peer (where its prefix is cached), under the bound;
 *   - another before it on the ring, under the bound with the key's whole
 *     load added: the key moves back there (its peer came back up, or
 *     the peer it left has room again);
 *
 * else, its own peer being over the bound, the least loaded peer with
 * room for the key whole (with few keys the ring's next peer may be as
 * busy: a busy peer is relieved of one prefix, into the idlest);
 *
 * the bound being
 *
 *     load_factor * (the usable peers' load + 1) * weight / their weight,
 *
 * a load being requests in flight averaged over the window.  A key too
 * hot for any peer stays where it is and its requests spill, one by one,
 * to the first peer under the bound in ring order (then the least
 * loaded).  Keys move whole, and the move is counted at once (the key's
 * load goes with it), so a burst moves one prefix, not a share of every
 * prefix of the busy peer; a moved key does not move back until its old
 * peer could take it whole.  -1: no peer is usable.  Under the peers'
 * read lock and the zone's mutex.
 */

static ngx_int_t
ngx_http_llm_balance_pick(ngx_http_llm_balance_peer_data_t *bp)
{
    double                            total, load, bound, kload, least_load;
    double                            room_load;
    time_t                            now;
    uint32_t                          hash;
    ngx_int_t                         least, spill, own, room;
    ngx_uint_t                        i, k, n, m, lo, hi, seen, weight, passed;
    ngx_uint_t                        visited[64];
    ngx_http_llm_balance_key_t       *key;
    ngx_http_llm_balance_srv_conf_t  *bcf;

    bcf = bp->conf;
    now = ngx_time();

    /* the load and the weight of the usable peers */

    total = 0;
    weight = 0;

    for (i = 0; i < bcf->npeers; i++) {
        if (!ngx_http_llm_balance_usable(bp, i, now)) {
            continue;
        }

        ngx_http_llm_balance_fold(bcf, bcf->slot[i]);
        total += bcf->slot[i]->avg;
        weight += bcf->peer[i]->weight;
    }

    if (weight == 0) {
        return -1;
    }

    key = ngx_http_llm_balance_key(bp);
    own = -1;
    kload = 0;

    if (key->load.key == bp->key_id && key->peer < bcf->npeers) {
        ngx_http_llm_balance_fold(bcf, &key->load);
        own = key->peer;
        kload = key->load.avg;

    } else {
        ngx_memzero(key, sizeof(ngx_http_llm_balance_key_t));
        key->load.key = bp->key_id;
        key->load.stamp = ngx_current_msec;
    }

    bp->key = key;

    /* the first point at or after the key's hash (binary search) */

    hash = bp->hash;
    lo = 0;
    hi = bcf->npoints;

    while (lo < hi) {
        k = (lo + hi) / 2;

        if (hash > bcf->points[k].hash) {
            lo = k + 1;

        } else {
            hi = k;
        }
    }

    ngx_memzero(visited, sizeof(visited));

    least = -1;
    least_load = 0;
    room = -1;
    room_load = 0;
    spill = -1;
    passed = 0;
    seen = 0;

    for (k = 0; k < bcf->npoints && seen < bcf->npeers; k++) {
        i = bcf->points[(lo + k) % bcf->npoints].peer;

        n = i / (8 * sizeof(ngx_uint_t));
        m = (ngx_uint_t) 1 << i % (8 * sizeof(ngx_uint_t));

        if (visited[n] & m) {
            continue;
        }

        visited[n] |= m;
        seen++;

        if (!ngx_http_llm_balance_usable(bp, i, now)) {
            continue;
        }

        load = bcf->slot[i]->avg;
        bound = bcf->load_factor / 100.0 * (total + 1)
                * bcf->peer[i]->weight / weight;

        if ((ngx_int_t) i == own) {
            if (load < bound) {
                return i;
            }

            passed = 1;

        } else if (load + kload < bound) {

            /* before its peer on the ring: back towards its own place;
             * past its busy peer: the least loaded with room */

            if (!passed) {
                ngx_http_llm_balance_move(bcf, key, own, i);
                return i;
            }

            if (room < 0 || load < room_load) {
                room = i;
                room_load = load;
            }
        }

        if (spill < 0 && load < bound) {
            spill = i;
        }

        if (least < 0 || load < least_load) {
            least = i;
            least_load = load;
        }
    }

    if (room >= 0) {
        ngx_http_llm_balance_move(bcf, key, own, room);
        return room;
    }

    i = spill >= 0 ? spill : least;

    /* no peer has room for the key whole: a key of less than a peer's
     * share moves all the same (better one peer with its prefix than two
     * peers without), a hot one spills request by request */
    if (own < 0 || kload * weight < (total + 1) * bcf->peer[i]->weight) {
        ngx_http_llm_balance_move(bcf, key, own, i);
    }

    return i;
}


/* the key's entry: its own, a free one, or the least recently used of
 * the few it may take */

static ngx_http_llm_balance_key_t *
ngx_http_llm_balance_key(ngx_http_llm_balance_peer_data_t *bp)
{
    ngx_uint_t                   k, h;
    ngx_http_llm_balance_key_t  *e, *old;

    bp->key_id = bp->hash ^ bp->conf->id;
    bp->key_id = bp->key_id ? bp->key_id : 1;

    old = NULL;

    for (k = 0; k < NGX_HTTP_LLM_BALANCE_PROBE; k++) {
        h = (bp->key_id + k) % NGX_HTTP_LLM_BALANCE_KEYS;
        e = &bp->conf->sh->keys[h];

        if (e->load.key == bp->key_id || e->load.key == 0) {
            return e;
        }

        if (old == NULL
            || (ngx_msec_int_t) (e->load.stamp - old->load.stamp) < 0)
        {
            old = e;
        }
    }

    return old;
}


/* the key and its load go to another peer */

static void
ngx_http_llm_balance_move(ngx_http_llm_balance_srv_conf_t *bcf,
    ngx_http_llm_balance_key_t *key, ngx_int_t from, ngx_uint_t to)
{
    ngx_http_llm_balance_slot_t  *f;

    if (from >= 0) {
        f = bcf->slot[from];
        f->avg = f->avg > key->load.avg ? f->avg - key->load.avg : 0;
        bcf->slot[to]->avg += key->load.avg;
    }

    key->peer = to;
}


/* neither tried for this request, nor down, failed or full */

static ngx_uint_t
ngx_http_llm_balance_usable(ngx_http_llm_balance_peer_data_t *bp,
    ngx_uint_t i, time_t now)
{
    uintptr_t                     m;
    ngx_uint_t                    n;
    ngx_http_upstream_rr_peer_t  *peer;

    peer = bp->conf->peer[i];

    n = i / (8 * sizeof(uintptr_t));
    m = (uintptr_t) 1 << i % (8 * sizeof(uintptr_t));

    return !(bp->rrp.tried[n] & m)
           && !peer->down
           && !(peer->max_fails && peer->fails >= peer->max_fails
                && now - peer->checked <= peer->fail_timeout)
           && !(peer->max_conns && peer->conns >= peer->max_conns);
}


/* the average brought to now: the count held since the last change */

static void
ngx_http_llm_balance_fold(ngx_http_llm_balance_srv_conf_t *bcf,
    ngx_http_llm_balance_slot_t *slot)
{
    double      a;
    ngx_msec_t  now;

    now = ngx_current_msec;

    /* another worker's clock may be a little ahead of this one's */
    if ((ngx_msec_int_t) (now - slot->stamp) <= 0) {
        return;
    }

    a = exp(-(double) (now - slot->stamp) / bcf->window);
    slot->avg = slot->avg * a + slot->inflight * (1 - a);
    slot->stamp = now;
}


/*
 * The request counted on peer i and on its key (unless another key took
 * the key's entry meanwhile), with a flight naming this process, by which
 * its successor takes them back should it die first.  Under the zone's
 * mutex.
 */

static void
ngx_http_llm_balance_hold(ngx_http_llm_balance_peer_data_t *bp, ngx_uint_t i)
{
    uint32_t                          n;
    ngx_http_llm_balance_key_t       *key;
    ngx_http_llm_balance_shctx_t     *sh;
    ngx_http_llm_balance_flight_t    *f;
    ngx_http_llm_balance_srv_conf_t  *bcf;

    bcf = bp->conf;
    sh = bcf->sh;

    ngx_http_llm_balance_fold(bcf, bcf->slot[i]);
    bcf->slot[i]->inflight++;

    key = bp->key;

    if (key && key->load.key == bp->key_id) {
        ngx_http_llm_balance_fold(bcf, &key->load);
        key->load.inflight++;

    } else {
        key = NULL;
    }

    bp->chosen = i;
    bp->counted = key;

    n = sh->free;

    if (n == NGX_HTTP_LLM_BALANCE_FLIGHTS) {

        /* counted all the same, only not taken back if this process dies */
        if (!ngx_http_llm_balance_full) {
            ngx_http_llm_balance_full = 1;
            ngx_log_error(NGX_LOG_WARN, ngx_cycle->log, 0,
                          "llm_balance: more than %d requests in flight, "
                          "those beyond are not taken back if their worker "
                          "dies", NGX_HTTP_LLM_BALANCE_FLIGHTS);
        }

        bp->flight = n;
        return;
    }

    f = &sh->flights[n];
    sh->free = f->next;

    f->process = (uint32_t) ngx_process_slot + 1;
    f->peer = bcf->slot[i] - sh->peers;
    f->key = key ? key - sh->keys + 1 : 0;
    f->key_id = bp->key_id;

    bp->flight = n;
}


static void
ngx_http_llm_balance_release(ngx_http_llm_balance_peer_data_t *bp)
{
    ngx_http_llm_balance_key_t       *key;
    ngx_http_llm_balance_slot_t      *slot;
    ngx_http_llm_balance_shctx_t     *sh;
    ngx_http_llm_balance_flight_t    *f;
    ngx_http_llm_balance_srv_conf_t  *bcf;

    bcf = bp->conf;
    sh = bcf->sh;
    slot = bcf->slot[bp->chosen];
    key = bp->counted;

    ngx_shmtx_lock(&bcf->shpool->mutex);

    ngx_http_llm_balance_fold(bcf, slot);

    if (slot->inflight) {
        slot->inflight--;
    }

    if (key && key->load.key == bp->key_id && key->load.inflight) {
        ngx_http_llm_balance_fold(bcf, &key->load);
        key->load.inflight--;
    }

    if (bp->flight < NGX_HTTP_LLM_BALANCE_FLIGHTS) {
        f = &sh->flights[bp->flight];
        f->process = 0;
        f->next = sh->free;
        sh->free = bp->flight;
    }

    ngx_shmtx_unlock(&bcf->shpool->mutex);

    bp->chosen = -1;
    bp->counted = NULL;
    bp->flight = NGX_HTTP_LLM_BALANCE_FLIGHTS;
}


static void
ngx_http_llm_balance_free_peer(ngx_peer_connection_t *pc, void *data,
    ngx_uint_t state)
{
    ngx_http_llm_balance_peer_data_t  *bp = data;

    if (bp->chosen >= 0) {
        ngx_http_llm_balance_release(bp);
    }

    ngx_http_upstream_free_round_robin_peer(pc, &bp->rrp, state);
}
