
/*
 * ngx_http_llm_bridge.c -- the worker's side of the engine, which runs in
 * the engine process (ngx_http_llm_engine.c) and is shared by every worker.
 *
 *   init_process   a loader thread loads the model's metadata (tokenizer,
 *                  chat template, generation config; the weights are only
 *                  mapped) so that the worker serves while it loads -- or,
 *                  after a reload, the worker has it already: the master
 *                  loaded it while it read the new configuration
 *                  (ngx_http_llm_preload()) and the fork gave it a copy;
 *   loaded         ngx_http_llm_engine_find(): the running engine, or one
 *                  this worker starts; connect to its socket (requests
 *                  wait meanwhile, /health answers 503 "loading");
 *   hello          the engine serves: max_model_len, device; the waiting
 *                  requests go on;
 *   event loop     the socket readable -> llm_client_read() copies each
 *                  request's new output into its ctx and queues the ctx;
 *                  then every queued ctx is delivered (JSON or SSE);
 *   EOF            the engine process is gone: every request in flight
 *                  ends with an error, new ones wait, and the worker finds
 *                  (or starts, with a back-off) the next engine.
 *
 * Delivery happens after llm_client_read() returns, never inside its
 * callback, so writing to clients, finalizing requests and the cancels
 * their cleanups send never re-enter the client during a read.  Nothing
 * here blocks: the socket is non-blocking, what it cannot take yet waits
 * in the client's buffer for the write event.
 */


#include "ngx_http_llm_module.h"

#include <pthread.h>
#include <signal.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/un.h>


typedef struct {
    pthread_t                 tid;
    const char               *dir;
    llm_model                *model;
    char                      err[LLM_ERR_LEN];
    int                       done;          /* atomic: the thread ended */
    unsigned                  running:1;
} ngx_http_llm_loader_t;


static void *ngx_http_llm_loader_thread(void *data);
static void ngx_http_llm_notify_handler(ngx_event_t *rev);
static void ngx_http_llm_loaded(ngx_log_t *log);
static void ngx_http_llm_connect(ngx_http_llm_worker_t *w);
static void ngx_http_llm_retry_handler(ngx_event_t *ev);
static void ngx_http_llm_retry(ngx_http_llm_worker_t *w, ngx_msec_t delay);
static void ngx_http_llm_submitted_handler(ngx_event_t *ev);
static void ngx_http_llm_client_read_handler(ngx_event_t *rev);
static void ngx_http_llm_client_write_handler(ngx_event_t *wev);
static void ngx_http_llm_flush(ngx_http_llm_worker_t *w);
static void ngx_http_llm_lost(ngx_http_llm_worker_t *w);
static void ngx_http_llm_close_client(ngx_http_llm_worker_t *w);
static void ngx_http_llm_deliver_ready(ngx_http_llm_worker_t *w);
static void ngx_http_llm_drain_output(void *req, uint64_t h,
    const llm_output *out, void *data);
static ngx_int_t ngx_http_llm_seq_check(ngx_http_request_t *r,
    ngx_http_llm_seq_t *seq, llm_sampling_params *sp);
static void ngx_http_llm_ctx_stats(ngx_http_llm_ctx_t *ctx);
static void ngx_http_llm_earliest(double *t, double v);
static ngx_int_t ngx_http_llm_append(ngx_http_llm_seq_t *seq,
    const llm_output *out);
static ngx_int_t ngx_http_llm_append_array(ngx_pool_t *pool, ngx_array_t *a,
    const void *add, ngx_uint_t n, size_t size, ngx_uint_t first);


ngx_http_llm_worker_t         ngx_http_llm_worker;
static ngx_http_llm_loader_t  ngx_http_llm_loader;

/* the master's copy of the metadata, and the directory it is of */
static llm_model             *ngx_http_llm_preloaded;
static char                  *ngx_http_llm_preloaded_dir;


/*
 * On a reload the master loads the model's metadata as it reads the new
 * configuration (the old workers serve meanwhile), so that the new
 * workers, forked with a copy, serve at once instead of loading it while
 * requests wait.  Not at the first start, in nginx -t or nginx -s (the
 * same code runs there, with ngx_process not yet the master's): the
 * workers load it then, as before.  Only from regular files, which cannot
 * hold the master up; a failure is left to the workers, which report it.
 */

void
ngx_http_llm_preload(ngx_conf_t *cf, ngx_http_llm_main_conf_t *lmcf)
{
    char             *dir, *tok, err[LLM_ERR_LEN];
    size_t            len;
    llm_model        *m;
    ngx_file_info_t   fi;

    if (ngx_process != NGX_PROCESS_MASTER || ngx_test_config
        || lmcf->model.len == 0)
    {
        return;
    }

    len = lmcf->model.len;

    dir = malloc(len + 1);
    tok = malloc(len + sizeof("/tokenizer.json"));
    if (dir == NULL || tok == NULL) {
        free(dir);
        free(tok);
        return;
    }

    ngx_memcpy(dir, lmcf->model.data, len);
    dir[len] = '\0';
    ngx_sprintf((u_char *) tok, "%s/tokenizer.json%Z", dir);

    m = NULL;
    err[0] = '\0';

    if (ngx_file_info(tok, &fi) == 0 && ngx_is_file(&fi)) {
        m = llm_model_load(dir, err);

        if (m == NULL) {
            ngx_conf_log_error(NGX_LOG_NOTICE, cf, 0,
                               "llm: the master could not load \"%s\" "
                               "(the workers will try): %s", dir, err);
        }
    }

    free(tok);

    if (ngx_http_llm_preloaded) {
        llm_model_free(ngx_http_llm_preloaded);
        free(ngx_http_llm_preloaded_dir);
    }

    ngx_http_llm_preloaded = m;
    ngx_http_llm_preloaded_dir = m ? dir : NULL;

    if (m == NULL) {
        free(dir);
    }
}


ngx_int_t
ngx_http_llm_engine_start(ngx_cycle_t *cycle, ngx_http_llm_main_conf_t *lmcf)
{
    int                     err, efd;
    sigset_t                set, old;
    ngx_connection_t       *c;
    ngx_http_llm_worker_t  *w = &ngx_http_llm_worker;
    ngx_http_llm_loader_t  *ld = &ngx_http_llm_loader;

    ngx_queue_init(&w->ready_q);
    ngx_queue_init(&w->waiting);
    ngx_queue_init(&w->live);
    w->efd = -1;
    w->lmcf = lmcf;
    w->cycle = cycle;
    w->start = llm_now();
    w->retry.handler = ngx_http_llm_retry_handler;
    w->retry.data = w;
    w->retry.log = cycle->log;
    w->retry.cancelable = 1;
    w->submitted.handler = ngx_http_llm_submitted_handler;
    w->submitted.data = w;
    w->submitted.log = cycle->log;
    ngx_cpystrn((u_char *) w->error, (u_char *) "the model is loading",
                sizeof(w->error));

    ld->dir = (const char *) lmcf->model.data;

    if (ngx_http_llm_preloaded
        && ngx_strcmp(ngx_http_llm_preloaded_dir, ld->dir) == 0)
    {
        /* the fork's copy of the master's: this process's to free */
        w->own_model = ngx_http_llm_preloaded;
        w->model = ngx_http_llm_preloaded;
        ngx_http_llm_preloaded = NULL;
        w->loading = 1;

        ngx_log_error(NGX_LOG_NOTICE, cycle->log, 0,
                      "llm: the model's metadata came from the master "
                      "(loaded with the new configuration)");

        ngx_http_llm_connect(w);
        return NGX_OK;
    }

    efd = eventfd(0, EFD_NONBLOCK|EFD_CLOEXEC);
    if (efd == -1) {
        ngx_snprintf((u_char *) w->error, sizeof(w->error),
                     "eventfd() failed: %s%Z", strerror(ngx_errno));
        ngx_log_error(NGX_LOG_EMERG, cycle->log, ngx_errno,
                      "llm: eventfd() failed");
        return NGX_ERROR;
    }

    c = ngx_get_connection(efd, cycle->log);
    if (c == NULL) {
        close(efd);
        ngx_cpystrn((u_char *) w->error,
                    (u_char *) "no free connection for the loader's eventfd",
                    sizeof(w->error));
        return NGX_ERROR;
    }

    c->data = w;
    c->log = cycle->log;
    c->read->handler = ngx_http_llm_notify_handler;
    c->read->log = cycle->log;
    c->write->log = cycle->log;

    if (ngx_add_event(c->read, NGX_READ_EVENT, 0) != NGX_OK) {
        ngx_close_connection(c);
        return NGX_ERROR;
    }

    w->efd = efd;
    w->notify = c;

    /* signals belong to the event loop: the loader inherits this */
    sigfillset(&set);
    pthread_sigmask(SIG_BLOCK, &set, &old);

    err = pthread_create(&ld->tid, NULL, ngx_http_llm_loader_thread, ld);

    pthread_sigmask(SIG_SETMASK, &old, NULL);

    if (err) {
        ngx_snprintf((u_char *) w->error, sizeof(w->error),
                     "pthread_create() failed: %s%Z", strerror(err));
        ngx_log_error(NGX_LOG_EMERG, cycle->log, err,
                      "llm: pthread_create() failed");
        return NGX_ERROR;
    }

    ld->running = 1;
    w->loading = 1;

    return NGX_OK;
}


static void *
ngx_http_llm_loader_thread(void *data)
{
    ngx_http_llm_loader_t  *ld = data;

    uint64_t  one;

    ld->err[0] = '\0';
    ld->model = llm_model_load(ld->dir, ld->err);

    __atomic_store_n(&ld->done, 1, __ATOMIC_RELEASE);

    one = 1;
    if (write(ngx_http_llm_worker.efd, &one, sizeof(one)) != sizeof(one)) {
        /* the counter cannot overflow in practice */
    }

    return NULL;
}


static void
ngx_http_llm_notify_handler(ngx_event_t *rev)
{
    uint64_t                count;
    ngx_connection_t       *c;
    ngx_http_llm_worker_t  *w;

    c = rev->data;
    w = c->data;

    while (read(w->efd, &count, sizeof(count)) == sizeof(count)) {
        /* void */
    }

    if (ngx_http_llm_loader.running
        && __atomic_load_n(&ngx_http_llm_loader.done, __ATOMIC_ACQUIRE))
    {
        ngx_http_llm_loaded(c->log);
    }
}


static void
ngx_http_llm_loaded(ngx_log_t *log)
{
    ngx_http_llm_worker_t  *w = &ngx_http_llm_worker;
    ngx_http_llm_loader_t  *ld = &ngx_http_llm_loader;

    (void) pthread_join(ld->tid, NULL);

    ld->running = 0;

    if (ld->model == NULL) {
        w->loading = 0;
        ngx_cpystrn((u_char *) w->error,
                    (u_char *) (ld->err[0] ? ld->err : "unknown error"),
                    sizeof(w->error));
        ngx_log_error(NGX_LOG_ERR, log, 0,
                      "llm: the model failed to load, the API answers 503: "
                      "%s", w->error);
        ngx_http_llm_wake_waiting();
        return;
    }

    w->own_model = ld->model;
    w->model = ld->model;

    ngx_http_llm_connect(w);
}


/*
 * The engine of this nginx: the running one, or one this worker starts;
 * connected, the worker waits for its hello.
 */

static void
ngx_http_llm_connect(ngx_http_llm_worker_t *w)
{
    int                     fd, cfd;
    char                    err[LLM_ERR_LEN];
    ngx_int_t               rc;
    ngx_msec_t              delay;
    socklen_t               len;
    ngx_connection_t       *c;
    struct sockaddr_un      sa;
    ngx_http_llm_engine_where_t  *where;

    /* also while exiting: the requests it accepted still wait for it */
    if (w->client || ngx_terminate) {
        return;
    }

    where = &w->where;
    err[0] = '\0';

    rc = ngx_http_llm_engine_find(w->cycle, w->lmcf, where, &delay, err);

    if (rc == NGX_AGAIN) {
        ngx_http_llm_retry(w, delay);
        return;
    }

    if (rc == NGX_BUSY) {
        /* an old worker: what waits for an engine gets the 503 */
        if (w->loading) {
            ngx_log_error(NGX_LOG_NOTICE, w->cycle->log, 0, "llm: %s", err);
        }

        w->loading = 0;
        ngx_cpystrn((u_char *) w->error, (u_char *) err, sizeof(w->error));
        ngx_http_llm_wake_waiting();
        ngx_http_llm_retry(w, delay);
        return;
    }

    if (rc == NGX_DECLINED) {
        /* the engine failed: 503 with the reason until a restart works */
        if (w->loading || ngx_strcmp(w->error, err) != 0) {
            ngx_log_error(NGX_LOG_ERR, w->cycle->log, 0,
                          "llm: the engine failed, the API answers 503: %s",
                          err);
        }

        w->loading = 0;
        ngx_cpystrn((u_char *) w->error, (u_char *) err, sizeof(w->error));
        ngx_http_llm_wake_waiting();
        ngx_http_llm_retry(w, delay);
        return;
    }

    ngx_memzero(&sa, sizeof(sa));
    sa.sun_family = AF_UNIX;
    ngx_memcpy(sa.sun_path, where->sock, where->sock_len);
    len = offsetof(struct sockaddr_un, sun_path) + where->sock_len;

    fd = socket(AF_UNIX, SOCK_STREAM|SOCK_NONBLOCK|SOCK_CLOEXEC, 0);
    if (fd == -1) {
        ngx_log_error(NGX_LOG_ALERT, w->cycle->log, ngx_errno,
                      "llm: socket() failed");
        ngx_http_llm_retry(w, 1000);
        return;
    }

    if (connect(fd, (struct sockaddr *) &sa, len) == -1) {
        /* gone meanwhile, or its backlog is full: find it again */
        ngx_log_error(NGX_LOG_INFO, w->cycle->log, ngx_errno,
                      "llm: connect() to the engine process %P failed",
                      where->pid);
        close(fd);
        ngx_http_llm_retry(w, 50);
        return;
    }

    /* the client writes and reads its own descriptor; nginx's event loop
     * watches this one (closed after the client's) */
    cfd = dup(fd);
    if (cfd == -1) {
        close(fd);
        ngx_http_llm_retry(w, 1000);
        return;
    }

    c = ngx_get_connection(fd, w->cycle->log);
    if (c == NULL) {
        close(fd);
        close(cfd);
        ngx_http_llm_retry(w, 1000);
        return;
    }

    w->client = llm_client_new(cfd);
    if (w->client == NULL) {
        close(cfd);
        ngx_close_connection(c);
        ngx_http_llm_retry(w, 1000);
        return;
    }

    c->data = w;
    c->log = w->cycle->log;
    c->read->handler = ngx_http_llm_client_read_handler;
    c->read->log = w->cycle->log;
    c->write->handler = ngx_http_llm_client_write_handler;
    c->write->log = w->cycle->log;

    w->conn = c;

    /* level-triggered: output never waits for another event */
    if (ngx_add_event(c->read, NGX_READ_EVENT, 0) != NGX_OK) {
        ngx_http_llm_close_client(w);
        ngx_http_llm_retry(w, 1000);
        return;
    }
}


static void
ngx_http_llm_retry(ngx_http_llm_worker_t *w, ngx_msec_t delay)
{
    if (ngx_terminate) {
        return;
    }

    if (w->retry.timer_set) {
        ngx_del_timer(&w->retry);
    }

    ngx_add_timer(&w->retry, delay ? delay : 1);
}


static void
ngx_http_llm_retry_handler(ngx_event_t *ev)
{
    ngx_http_llm_connect(ev->data);
}


static void
ngx_http_llm_client_read_handler(ngx_event_t *rev)
{
    ngx_int_t               rc;
    ngx_connection_t       *c;
    ngx_http_llm_worker_t  *w;

    c = rev->data;
    w = c->data;

    rc = llm_client_read(w->client, ngx_http_llm_drain_output, w);

    if (!w->ready && llm_client_ready(w->client)) {
        w->ready = 1;
        w->loading = 0;
        w->error[0] = '\0';
        w->max_model_len = llm_client_max_model_len(w->client);

        if (w->where.spawned) {
            ngx_log_error(NGX_LOG_NOTICE, c->log, 0,
                          "llm: worker %P uses the engine process %P it "
                          "started: %s, max_model_len %d", ngx_pid,
                          w->where.pid, llm_client_device(w->client),
                          w->max_model_len);

        } else if (w->where.started < w->start) {
            /* a reload's new worker (or one nginx restarted) */
            ngx_log_error(NGX_LOG_NOTICE, c->log, 0,
                          "llm: worker %P uses the running engine process "
                          "%P (kept: same settings, no model load): %s, "
                          "max_model_len %d", ngx_pid, w->where.pid,
                          llm_client_device(w->client), w->max_model_len);

        } else {
            ngx_log_error(NGX_LOG_NOTICE, c->log, 0,
                          "llm: worker %P uses the engine process %P "
                          "another worker started: %s, max_model_len %d",
                          ngx_pid, w->where.pid,
                          llm_client_device(w->client), w->max_model_len);
        }

        ngx_http_llm_wake_waiting();
    }

    ngx_http_llm_deliver_ready(w);

    if (rc != 0 && w->client) {
        ngx_http_llm_lost(w);
        return;
    }

    /* the answer to a retirement, if one came */
    ngx_http_llm_flush(w);
}


static void
ngx_http_llm_submitted_handler(ngx_event_t *ev)
{
    ngx_http_llm_flush(ev->data);
}


static void
ngx_http_llm_client_write_handler(ngx_event_t *wev)
{
    ngx_connection_t       *c;
    ngx_http_llm_worker_t  *w;

    c = wev->data;
    w = c->data;

    ngx_http_llm_flush(w);
}


/* what the client queued goes out, or waits for the socket */

static void
ngx_http_llm_flush(ngx_http_llm_worker_t *w)
{
    ngx_int_t          rc;
    ngx_connection_t  *c;

    if (w->client == NULL) {
        return;
    }

    c = w->conn;
    rc = llm_client_flush(w->client);

    if (rc == 1) {
        if (!c->write->active) {
            (void) ngx_add_event(c->write, NGX_WRITE_EVENT, 0);
        }

        return;
    }

    if (c->write->active) {
        (void) ngx_del_event(c->write, NGX_WRITE_EVENT, 0);
    }

    if (rc == -1) {
        /* the read handler sees the end and cleans up, out of this call */
        ngx_post_event(c->read, &ngx_posted_events);
    }
}


static void
ngx_http_llm_deliver_ready(ngx_http_llm_worker_t *w)
{
    ngx_queue_t         *q;
    ngx_http_llm_ctx_t  *ctx;

    while (!ngx_queue_empty(&w->ready_q)) {
        q = ngx_queue_head(&w->ready_q);
        ngx_queue_remove(q);

        ctx = ngx_queue_data(q, ngx_http_llm_ctx_t, queue);
        ctx->queued = 0;

        ngx_http_llm_deliver(ctx);
    }

    ngx_http_llm_flush(w);
}


static void
ngx_http_llm_close_client(ngx_http_llm_worker_t *w)
{
    if (w->client) {
        llm_client_free(w->client);
        w->client = NULL;
    }

    if (w->conn) {
        ngx_close_connection(w->conn);
        w->conn = NULL;
    }

    w->ready = 0;
}


/*
 * The engine process is gone (a crash, kill -9, a retiring engine): every
 * request in flight ends with an error now, new ones wait for the next
 * engine, which this worker or another finds or starts.
 */

static void
ngx_http_llm_lost(ngx_http_llm_worker_t *w)
{
    char                 reason[LLM_ERR_LEN];
    ngx_uint_t           i, n, retired;
    ngx_queue_t         *q;
    ngx_http_llm_ctx_t  *ctx;
    ngx_http_llm_seq_t  *seq;

    retired = llm_client_retiring(w->client);

    ngx_http_llm_close_client(w);

    ngx_http_llm_engine_reason(w->where.generation, reason);

    n = 0;

    for (q = ngx_queue_head(&w->live);
         q != ngx_queue_sentinel(&w->live);
         q = ngx_queue_next(q))
    {
        ctx = ngx_queue_data(q, ngx_http_llm_ctx_t, live);

        for (i = 0; i < ctx->n_seqs; i++) {
            seq = &ctx->seqs[i];

            if (!seq->engine_done) {
                seq->finish = LLM_FINISH_ERROR;
                seq->engine_done = 1;
                seq->changed = 1;
                ctx->n_done++;
            }
        }

        ngx_http_llm_ctx_stats(ctx);
        ctx->finish = LLM_FINISH_ERROR;
        ctx->engine_lost = 1;
        n++;

        if (!ctx->queued) {
            ngx_queue_insert_tail(&w->ready_q, &ctx->queue);
            ctx->queued = 1;
        }
    }

    if (retired && n == 0) {
        ngx_log_error(NGX_LOG_NOTICE, w->cycle->log, 0,
                      "llm: the engine process %P retired: new requests "
                      "go to the next one", w->where.pid);

    } else if (ngx_exiting || ngx_terminate || ngx_quit) {
        ngx_log_error(NGX_LOG_NOTICE, w->cycle->log, 0,
                      "llm: the engine process %P closed the connection "
                      "(%s), %ui requests in flight end", w->where.pid,
                      reason, n);

    } else {
        ngx_log_error(NGX_LOG_ERR, w->cycle->log, 0,
                      "llm: the engine process %P stopped (%s): %ui "
                      "requests in flight end with an error, new ones wait "
                      "for the next engine", w->where.pid, reason, n);
    }

    w->loading = 1;
    ngx_snprintf((u_char *) w->error, sizeof(w->error),
                 "the engine is restarting: %s%Z", reason);

    ngx_http_llm_deliver_ready(w);

    ngx_http_llm_retry(w, 1);
}


void
ngx_http_llm_engine_stop(ngx_cycle_t *cycle)
{
    ngx_http_llm_worker_t  *w = &ngx_http_llm_worker;
    ngx_http_llm_loader_t  *ld = &ngx_http_llm_loader;

    if (ld->running) {
        /* exiting while the model still loads: wait for the loader */
        (void) pthread_join(ld->tid, NULL);
        ld->running = 0;
        w->own_model = ld->model;
    }

    if (w->retry.timer_set) {
        ngx_del_timer(&w->retry);
    }

    if (w->submitted.posted) {
        ngx_delete_posted_event(&w->submitted);
    }

    /* the engine cancels what this worker still runs */
    ngx_http_llm_close_client(w);

    if (w->own_model) {
        llm_model_free(w->own_model);
        w->own_model = NULL;
        w->model = NULL;
    }

    /* otherwise nginx alerts "open socket #N left in connection" */
    if (w->notify) {
        ngx_close_connection(w->notify);
        w->notify = NULL;
        w->efd = -1;
    }
}


/*
 * Whether a request goes to the engine now: NGX_OK; NGX_AGAIN: it waits
 * for the next engine (this worker's loads, or the engine retires after a
 * reload that changed its settings -- it would exit with the request);
 * NGX_DECLINED: none will serve it (503 with the reason).
 */

ngx_int_t
ngx_http_llm_engine_accepts(void)
{
    ngx_http_llm_worker_t  *w = &ngx_http_llm_worker;

    if (w->ready
        && !llm_client_retiring(w->client)
        && !ngx_http_llm_engine_retiring(w->where.generation))
    {
        return NGX_OK;
    }

    return (w->loading || w->ready) ? NGX_AGAIN : NGX_DECLINED;
}


/*
 * The answer while the engine does not serve: 503 with the reason.  Returns
 * what the handler passes to ngx_http_finalize_request().
 */

ngx_int_t
ngx_http_llm_engine_unavailable(ngx_http_request_t *r)
{
    ngx_http_llm_worker_t  *w = &ngx_http_llm_worker;

    if (w->error[0] == '\0') {
        return ngx_http_llm_send_error(r, NGX_HTTP_SERVICE_UNAVAILABLE, NULL,
                                       NULL, "the engine is not running");
    }

    return ngx_http_llm_send_error(r, NGX_HTTP_SERVICE_UNAVAILABLE, NULL,
                                   NULL, "%s%s",
                                   w->loading ? "" : "model not loaded: ",
                                   w->error);
}


/* a request whose engine process stopped under it */

ngx_int_t
ngx_http_llm_engine_lost_error(ngx_http_request_t *r)
{
    return ngx_http_llm_send_error(r, NGX_HTTP_SERVICE_UNAVAILABLE, NULL,
                                   NULL, "the engine stopped before the "
                                   "request completed (%s); retry it",
                                   ngx_http_llm_worker.error);
}


ngx_int_t
ngx_http_llm_engine_submit(ngx_http_request_t *r, ngx_http_llm_ctx_t *ctx)
{
    ngx_int_t               rc;
    ngx_uint_t              i, k;
    ngx_http_llm_job_t     *job;
    ngx_http_llm_seq_t     *seq;
    llm_sampling_params    *sps;
    ngx_http_llm_prompt_t  *prompts;
    ngx_http_llm_worker_t  *w = &ngx_http_llm_worker;

    job = ctx->job;
    prompts = job->prompts.elts;

    if (!w->ready || llm_client_retiring(w->client)) {
        /* ngx_http_llm_start() asked just before: never */
        return ngx_http_llm_engine_unavailable(r);
    }

    ctx->n_seqs = job->prompts.nelts * job->n;
    ctx->seqs = ngx_pcalloc(r->pool,
                            ctx->n_seqs * sizeof(ngx_http_llm_seq_t));
    sps = ngx_palloc(r->pool, ctx->n_seqs * sizeof(llm_sampling_params));
    if (ctx->seqs == NULL || sps == NULL) {
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }

    for (i = 0; i < ctx->n_seqs; i++) {
        seq = &ctx->seqs[i];
        seq->ctx = ctx;
        seq->index = i;
        seq->prompt = &prompts[i / job->n];
        seq->leader = (i % job->n == 0);
        seq->stop_token = -1;
        seq->stats.prompt_tokens = seq->prompt->n;
    }

    /* every sequence is validated before any runs */

    for (i = 0; i < ctx->n_seqs; i++) {
        rc = ngx_http_llm_seq_check(r, &ctx->seqs[i], &sps[i]);
        if (rc != NGX_OK) {
            ctx->n_seqs = 0;
            return rc;
        }
    }

    /*
     * Parallel sampling: the other samples of a prompt follow its first,
     * which computes the prompt's blocks once for all of them.
     */

    ctx->submitted = 1;

    for (i = 0; i < ctx->n_seqs; i++) {
        seq = &ctx->seqs[i];
        k = i - i % job->n;

        seq->handle = llm_client_submit(w->client, seq->prompt->ids,
                                        seq->prompt->n, &sps[i],
                                        ctx->arrival, ctx->waited,
                                        seq->leader ? 0 : ctx->seqs[k].handle,
                                        seq);
    }

    ngx_queue_insert_tail(&w->live, &ctx->live);

    /* written after the other events of this turn: the requests that
     * were prepared together reach the engine together, in one write,
     * and are batched into one step */
    if (!w->submitted.posted) {
        ngx_post_event(&w->submitted, &ngx_posted_events);
    }

    ngx_http_llm_ctx_stats(ctx);

    ctx->inflight = ngx_http_llm_inflight_add(&ctx->id, &ctx->model,
                                              ctx->stats.prompt_tokens);

    return NGX_OK;
}


/*
 * The engine request of one sequence: its prompt, and the request's
 * parameters with vLLM's per-sample seed (seed + sample index, so that
 * seeded samples differ and repeat) and its place among the n; checked
 * here as the engine checks it, so that errors stay 400s.
 */

static ngx_int_t
ngx_http_llm_seq_check(ngx_http_request_t *r, ngx_http_llm_seq_t *seq,
    llm_sampling_params *sp)
{
    char                  err[LLM_ERR_LEN];
    ngx_uint_t            sample;
    ngx_http_llm_job_t   *job;

    job = seq->ctx->job;
    sample = seq->index % job->n;

    *sp = job->sp;
    sp->n = (int) job->n;
    sp->seq_index = (int) sample;
    sp->seed += sample;

    /* the engine caps it to what fits each prompt */
    sp->max_tokens = job->max_tokens < 0 ? 0 : job->max_tokens;

    err[0] = '\0';

    if (llm_request_validate(ngx_http_llm_worker.model,
                             ngx_http_llm_worker.max_model_len,
                             seq->prompt->ids, seq->prompt->n, sp, err)
        != 0)
    {
        return ngx_http_llm_send_error(r, NGX_HTTP_BAD_REQUEST, NULL, NULL,
                                       "%s", err[0] ? err : "invalid request");
    }

    return NGX_OK;
}


/*
 * The request is done with the engine: finished, failed, or its client went
 * away.  Sequences the engine still runs are cancelled, which frees their
 * KV cache at the engine's next step; they are billed what arrived here
 * (the engine counts no more than that either).
 */

void
ngx_http_llm_engine_release(ngx_http_llm_ctx_t *ctx)
{
    ngx_uint_t              i;
    ngx_http_llm_seq_t     *seq;
    ngx_http_llm_worker_t  *w = &ngx_http_llm_worker;

    if (ctx->queued) {
        ngx_queue_remove(&ctx->queue);
        ctx->queued = 0;
    }

    if (ctx->submitted && ctx->live.next) {
        ngx_queue_remove(&ctx->live);
        ctx->live.next = NULL;
    }

    for (i = 0; i < ctx->n_seqs; i++) {
        seq = &ctx->seqs[i];

        if (seq->handle == 0) {
            continue;
        }

        if (w->client) {
            if (!seq->engine_done && ctx->submitted) {
                llm_client_cancel(w->client, seq->handle,
                                  seq->stats.completion_tokens);

            } else {
                llm_client_forget(w->client, seq->handle);
            }
        }

        if (seq->finish == LLM_FINISH_NONE && ctx->submitted) {
            /* the access log bills what was generated until now */
            seq->finish = LLM_FINISH_ABORT;
        }

        seq->handle = 0;
    }

    ngx_http_llm_flush(w);

    if (ctx->submitted && ctx->finish == LLM_FINISH_NONE) {
        ngx_http_llm_ctx_stats(ctx);
        ctx->finish = LLM_FINISH_ABORT;
    }

    /* from here on the access log line bills it */
    ngx_http_llm_inflight_remove(ctx->inflight);
    ctx->inflight = -1;
}


/*
 * Backpressure (ngx_http_llm_sse.c): the client is behind by more than
 * llm_max_unsent_bytes, or has caught up.  All sequences pause and resume
 * together, so that no choice runs ahead of the others; a paused sequence
 * keeps its KV cache and is still cancelled when the request ends.
 */

void
ngx_http_llm_engine_pause(ngx_http_llm_ctx_t *ctx, ngx_uint_t paused)
{
    ngx_uint_t              i;
    ngx_http_llm_seq_t     *seq;
    ngx_http_llm_worker_t  *w = &ngx_http_llm_worker;

    ctx->paused = paused;

    if (w->client == NULL) {
        return;
    }

    for (i = 0; i < ctx->n_seqs; i++) {
        seq = &ctx->seqs[i];

        if (seq->handle && !seq->engine_done) {
            llm_client_set_paused(w->client, seq->handle, (int) paused);
        }
    }

    ngx_http_llm_flush(w);
}


/* llm_client_read() callback: copy, never write to the client here */

static void
ngx_http_llm_drain_output(void *req, uint64_t h, const llm_output *out,
    void *data)
{
    ngx_http_llm_worker_t  *w = data;

    ngx_http_llm_ctx_t  *ctx;
    ngx_http_llm_seq_t  *seq;

    seq = req;
    ctx = seq->ctx;

    if (ngx_http_llm_append(seq, out) != NGX_OK) {
        /* out of memory: delivery ends the request with an error */
        ctx->failed = 1;
    }

    seq->stats = out->stats;
    seq->changed = 1;

    if (out->finish_reason != LLM_FINISH_NONE && !seq->engine_done) {
        seq->finish = out->finish_reason;
        seq->engine_done = 1;
        ctx->n_done++;
    }

    ngx_http_llm_ctx_stats(ctx);
    ngx_http_llm_inflight_update(ctx->inflight, ctx->stats.completion_tokens);

    if (seq->finish == LLM_FINISH_ERROR) {
        ctx->finish = LLM_FINISH_ERROR;     /* the whole request fails */
    }

    if (!ctx->queued) {
        ngx_queue_insert_tail(&w->ready_q, &ctx->queue);
        ctx->queued = 1;
    }
}


/*
 * ctx->stats and ctx->finish from the sequences (module.h): one sequence's
 * record as it is; several summed, prompt tokens once per prompt, the
 * timestamps spanning them all.  The request finishes with its last
 * sequence, with the worst reason: error, abort, length, stop.
 */

static void
ngx_http_llm_ctx_stats(ngx_http_llm_ctx_t *ctx)
{
    ngx_uint_t                i;
    llm_finish_reason         finish;
    llm_request_stats        *t;
    const llm_request_stats  *s;

    static const ngx_uint_t  worse[] = {
        0,          /* LLM_FINISH_NONE */
        1,          /* LLM_FINISH_STOP */
        2,          /* LLM_FINISH_LENGTH */
        3,          /* LLM_FINISH_ABORT */
        4           /* LLM_FINISH_ERROR */
    };

    t = &ctx->stats;

    if (ctx->n_seqs == 1) {
        *t = ctx->seqs[0].stats;

    } else {
        ngx_memzero(t, sizeof(llm_request_stats));

        for (i = 0; i < ctx->n_seqs; i++) {
            s = &ctx->seqs[i].stats;

            if (ctx->seqs[i].leader) {
                t->prompt_tokens += s->prompt_tokens;
                t->cached_tokens += s->cached_tokens;
            }

            t->completion_tokens += s->completion_tokens;
            t->num_preemptions += s->num_preemptions;
            t->max_tokens += s->max_tokens;
            t->num_spec_tokens = s->num_spec_tokens;
            t->num_spec_steps += s->num_spec_steps;
            t->num_draft_tokens += s->num_draft_tokens;
            t->num_accepted_tokens += s->num_accepted_tokens;

            ngx_http_llm_earliest(&t->arrival, s->arrival);
            ngx_http_llm_earliest(&t->queued, s->queued);
            ngx_http_llm_earliest(&t->scheduled, s->scheduled);
            ngx_http_llm_earliest(&t->first_token, s->first_token);
            t->last_token = ngx_max(t->last_token, s->last_token);
            t->finished = ngx_max(t->finished, s->finished);
        }
    }

    if (ctx->n_done < ctx->n_seqs) {
        return;
    }

    finish = LLM_FINISH_NONE;

    for (i = 0; i < ctx->n_seqs; i++) {
        if (worse[ctx->seqs[i].finish] > worse[finish]) {
            finish = ctx->seqs[i].finish;
        }
    }

    ctx->finish = finish;
}


/* the earliest of two timestamps, 0 meaning unset */

static void
ngx_http_llm_earliest(double *t, double v)
{
    if (v > 0 && (*t == 0 || v < *t)) {
        *t = v;
    }
}


/*
 * A drain's output joins what the sequence has not written yet: text, and
 * the token ids and logprob records when asked for; the records of the
 * prompt and of the verify steps come once, with the final output.
 */

static ngx_int_t
ngx_http_llm_append(ngx_http_llm_seq_t *seq, const llm_output *out)
{
    size_t               size;
    u_char              *p;
    ngx_pool_t          *pool;
    ngx_http_llm_ctx_t  *ctx;

    ctx = seq->ctx;
    pool = ctx->request->pool;

    if (ctx->job->reasoning) {
        if (ngx_http_llm_reasoning_append(seq, out) != NGX_OK) {
            return NGX_ERROR;
        }

    } else if (ngx_http_llm_append_array(pool, &seq->text, out->text,
                                         out->text_len, 1, 256)
               != NGX_OK)
    {
        return NGX_ERROR;
    }

    seq->new_ids += out->n_ids;

    if (ctx->job->return_token_ids
        && ngx_http_llm_append_array(pool, &seq->ids, out->ids, out->n_ids,
                                     sizeof(int32_t), 16)
           != NGX_OK)
    {
        return NGX_ERROR;
    }

    if (out->logprobs
        && ngx_http_llm_append_array(pool, &seq->lp, out->logprobs,
                                     out->n_ids, sizeof(llm_token_logprob),
                                     16)
           != NGX_OK)
    {
        return NGX_ERROR;
    }

    if (out->prompt_logprobs && out->n_prompt_logprobs) {
        size = out->n_prompt_logprobs * sizeof(llm_token_logprob);

        seq->plp = ngx_palloc(pool, size);
        if (seq->plp == NULL) {
            return NGX_ERROR;
        }

        ngx_memcpy(seq->plp, out->prompt_logprobs, size);
        seq->n_plp = out->n_prompt_logprobs;
    }

    if (out->finish_reason != LLM_FINISH_NONE) {
        seq->stop_token = out->stop_token;

        if (out->stop_string) {
            size = ngx_strlen(out->stop_string);

            p = ngx_pnalloc(pool, size);
            if (p == NULL) {
                return NGX_ERROR;
            }

            ngx_memcpy(p, out->stop_string, size);
            seq->stop_string.data = p;
            seq->stop_string.len = size;
        }

        /* detailed shows them; summary counts its histogram by draft
         * length from them */
        if (ctx->spec_metrics != NGX_HTTP_LLM_SPEC_METRICS_NONE
            && out->n_spec_step > 0 && ctx->n_seqs == 1)
        {
            size = out->n_spec_step;

            p = ngx_pnalloc(pool, 2 * size);
            if (p == NULL) {
                return NGX_ERROR;
            }

            ctx->spec_accepted = ngx_cpymem(p, out->spec_step_accepted, size)
                                 - size;
            ctx->spec_drafted = ngx_cpymem(p + size, out->spec_step_drafted,
                                           size) - size;
            ctx->n_spec_step = size;
        }
    }

    return NGX_OK;
}


/* n elements of an array in the pool, which starts with room for "first" */

static ngx_int_t
ngx_http_llm_append_array(ngx_pool_t *pool, ngx_array_t *a, const void *add,
    ngx_uint_t n, size_t size, ngx_uint_t first)
{
    void  *p;

    if (a->elts == NULL
        && ngx_array_init(a, pool, ngx_max(n, first), size) != NGX_OK)
    {
        return NGX_ERROR;
    }

    if (n == 0) {
        return NGX_OK;
    }

    p = ngx_array_push_n(a, n);
    if (p == NULL) {
        return NGX_ERROR;
    }

    ngx_memcpy(p, add, n * size);

    return NGX_OK;
}
