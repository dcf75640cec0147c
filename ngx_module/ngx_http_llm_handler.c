
/*
 * ngx_http_llm_handler.c -- the llm_api content handler: a request until
 * its route starts it.
 *
 *   handler        find the route (ngx_http_llm_routes.c), check the
 *                  method; a route without a body answers at once
 *   body_handler   post the "prepare" task to llm_thread_pool: parse the
 *                  JSON and hand it to the route's parser (templates,
 *                  tokenizing: slow work the event loop must not do);
 *                  r->main->blocked keeps the request alive until the task
 *                  returns
 *   start          back on the event loop: answer the task's error, or
 *                  the route's start (ngx_http_llm_generate.c generates)
 *   cleanup        runs however the request ends (client abort included)
 *                  and cancels the engine's work at once
 *
 * A request that arrives while the worker still loads the model, or while
 * the engine retires after a reload that changed its settings, waits in
 * the worker's waiting queue for the next engine (ngx_http_llm_wake_waiting);
 * one that was being prepared then waits prepared.
 *
 * A non-cancelable timer ("guard") is armed from the body's arrival to the
 * end: a worker that quits or reloads gracefully waits for timers, so every
 * stream in flight is finished before the worker exits.
 */


#include "ngx_http_llm_module.h"


#define NGX_HTTP_LLM_GUARD  60000


static void ngx_http_llm_body_handler(ngx_http_request_t *r);
static void ngx_http_llm_ctx_init(ngx_http_request_t *r,
    ngx_http_llm_ctx_t *ctx, ngx_http_llm_job_t *job);
static void ngx_http_llm_wait_for_model(ngx_http_request_t *r,
    ngx_http_llm_ctx_t *ctx);
static void ngx_http_llm_wait_cleanup(void *data);
static void ngx_http_llm_prepare(void *data, ngx_log_t *log);
static u_char *ngx_http_llm_read_body(ngx_http_llm_job_t *job, size_t *len);
static void ngx_http_llm_prepared(ngx_event_t *ev);
static void ngx_http_llm_start(ngx_http_request_t *r);
static void ngx_http_llm_guard_start(ngx_http_request_t *r,
    ngx_http_llm_ctx_t *ctx);
static void ngx_http_llm_guard_handler(ngx_event_t *ev);
static void ngx_http_llm_cleanup(void *data);


ngx_int_t
ngx_http_llm_api_handler(ngx_http_request_t *r)
{
    ngx_int_t                    rc;
    ngx_str_t                    id;
    ngx_http_llm_ctx_t          *ctx;
    const ngx_http_llm_route_t  *route;

    /*
     * No answer here has an ETag or a Last-Modified, so nginx's
     * not_modified filter would fail every If-Match and If-Unmodified-Since
     * with a 412, a generation's answer too, once it ran, dropping the
     * module's context and the request's bill; vLLM ignores them too.
     */
    r->disable_not_modified = 1;

    route = ngx_http_llm_route_find(r, &id);

    if (route == NULL || !(r->method & route->methods)
        || route->parse == NULL)
    {
        rc = ngx_http_discard_request_body(r);
        if (rc != NGX_OK) {
            return rc;
        }

        if (route == NULL) {
            return ngx_http_llm_send_error(r, NGX_HTTP_NOT_FOUND, NULL, NULL,
                                           "Not Found: no API endpoint at "
                                           "\"%V\"", &r->uri);
        }

        if (!(r->method & route->methods)) {
            return ngx_http_llm_send_not_allowed(r, route->allow,
                                                 "Method Not Allowed: use "
                                                 "%s for \"%V\"",
                                                 route->use, &r->uri);
        }

        return route->answer(r, &id);
    }

    if (!ngx_http_llm_worker.ready && !ngx_http_llm_worker.loading) {
        if (ngx_http_discard_request_body(r) != NGX_OK) {
            r->keepalive = 0;
        }

        return ngx_http_llm_engine_unavailable(r);
    }

    ctx = ngx_pcalloc(r->pool, sizeof(ngx_http_llm_ctx_t));
    if (ctx == NULL) {
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }

    ctx->request = r;
    ctx->route = route;
    ctx->inflight = -1;
    ngx_http_set_ctx(r, ctx, ngx_http_llm_module);

    rc = ngx_http_read_client_request_body(r, ngx_http_llm_body_handler);

    if (rc >= NGX_HTTP_SPECIAL_RESPONSE) {
        return rc;
    }

    return NGX_DONE;
}


static void
ngx_http_llm_body_handler(ngx_http_request_t *r)
{
    ngx_thread_task_t         *task;
    ngx_http_cleanup_t        *cln;
    ngx_http_llm_ctx_t        *ctx;
    ngx_http_llm_job_t        *job;
    ngx_http_llm_main_conf_t  *lmcf;

    lmcf = ngx_http_get_module_main_conf(r, ngx_http_llm_module);
    ctx = ngx_http_get_module_ctx(r, ngx_http_llm_module);

    switch (ngx_http_llm_engine_accepts()) {

    case NGX_AGAIN:
        ngx_http_llm_wait_for_model(r, ctx);
        return;

    case NGX_DECLINED:
        ngx_http_finalize_request(r, ngx_http_llm_engine_unavailable(r));
        return;
    }

    job = ngx_http_llm_job_create(r, ctx->route);
    if (job == NULL) {
        ngx_http_finalize_request(r, NGX_HTTP_INTERNAL_SERVER_ERROR);
        return;
    }

    ngx_http_llm_ctx_init(r, ctx, job);

    cln = ngx_http_cleanup_add(r, 0);
    if (cln == NULL) {
        ngx_http_finalize_request(r, NGX_HTTP_INTERNAL_SERVER_ERROR);
        return;
    }

    cln->handler = ngx_http_llm_cleanup;
    cln->data = ctx;

    ngx_http_llm_guard_start(r, ctx);

    task = ngx_thread_task_alloc(r->pool, sizeof(ngx_http_llm_job_t *));
    if (task == NULL) {
        ngx_http_finalize_request(r, NGX_HTTP_INTERNAL_SERVER_ERROR);
        return;
    }

    *(ngx_http_llm_job_t **) task->ctx = job;
    task->handler = ngx_http_llm_prepare;
    task->event.handler = ngx_http_llm_prepared;
    task->event.data = r;

    if (ngx_thread_task_post(lmcf->thread_pool, task) != NGX_OK) {
        ngx_http_finalize_request(r,
            ngx_http_llm_send_error(r, NGX_HTTP_SERVICE_UNAVAILABLE, NULL,
                                    NULL, "the thread pool \"%V\" is "
                                    "overloaded", &lmcf->thread_pool_name));
        return;
    }

    /* the request and its pool stay until the task is back */
    r->main->blocked++;

    r->read_event_handler = ngx_http_test_reading;     /* client abort */
    r->write_event_handler = ngx_http_llm_start;
}


/* the request's settings, taken when the body is in */

static void
ngx_http_llm_ctx_init(ngx_http_request_t *r, ngx_http_llm_ctx_t *ctx,
    ngx_http_llm_job_t *job)
{
    ngx_http_llm_loc_conf_t   *llcf;
    ngx_http_llm_main_conf_t  *lmcf;

    llcf = ngx_http_get_module_loc_conf(r, ngx_http_llm_module);
    lmcf = ngx_http_get_module_main_conf(r, ngx_http_llm_module);

    ctx->job = job;
    ctx->model = lmcf->served_model_name;
    /* spec metrics come in the same object, with or without the times */
    ctx->timing = llcf->per_request_metrics;
    ctx->spec_metrics = llcf->spec_decode_metrics;
    ctx->metrics = llcf->per_request_metrics
                   || llcf->spec_decode_metrics
                      != NGX_HTTP_LLM_SPEC_METRICS_NONE;
    ctx->prefix_caching = lmcf->enable_prefix_caching;
    ctx->log_stats = lmcf->log_stats;
    ctx->max_unsent = llcf->max_unsent;

    /* Prometheus' TTFT and e2e latency start here: vLLM's arrival
     * (a request that waited for the model arrived before its wait) */
    if (ctx->arrival == 0) {
        ctx->arrival = llm_now();
    }
}


/*
 * A worker still loading the model (its first start, or a reload's new
 * worker while the old ones drain): a generation waits for the load rather
 * than fail, as a vLLM client waits for a server that is not up yet; the
 * wait counts in its end-to-end latency.  /health and /v1/models answer
 * 503 meanwhile, so that a readiness probe sees the truth.
 */

static void
ngx_http_llm_wait_for_model(ngx_http_request_t *r, ngx_http_llm_ctx_t *ctx)
{
    ngx_http_cleanup_t  *cln;

    cln = ngx_http_cleanup_add(r, 0);
    if (cln == NULL) {
        ngx_http_finalize_request(r, NGX_HTTP_INTERNAL_SERVER_ERROR);
        return;
    }

    cln->handler = ngx_http_llm_wait_cleanup;
    cln->data = ctx;

    /* its queue time starts at its first wait */
    if (ctx->waited == 0) {
        ctx->waited = llm_now();
    }

    if (ctx->arrival == 0) {
        ctx->arrival = ctx->waited;
    }

    ctx->waiting = 1;
    ngx_queue_insert_tail(&ngx_http_llm_worker.waiting, &ctx->wait);

    /* a graceful exit waits for the load and for this request */
    ngx_http_llm_guard_start(r, ctx);

    r->read_event_handler = ngx_http_test_reading;     /* client abort */
    r->write_event_handler = ngx_http_request_empty_handler;
}


static void
ngx_http_llm_wait_cleanup(void *data)
{
    ngx_http_llm_ctx_t  *ctx = data;

    if (ctx->waiting) {
        ngx_queue_remove(&ctx->wait);
        ctx->waiting = 0;
    }

    if (ctx->guard.timer_set) {
        ngx_del_timer(&ctx->guard);
    }
}


/* the load ended (ngx_http_llm_bridge.c): every waiting request goes on */

void
ngx_http_llm_wake_waiting(void)
{
    ngx_queue_t          woken, *q;
    ngx_connection_t    *c;
    ngx_http_request_t  *r;
    ngx_http_llm_ctx_t  *ctx;

    if (ngx_queue_empty(&ngx_http_llm_worker.waiting)) {
        return;
    }

    /* those waiting now: one that must wait again (the engine retires
     * already) waits for the next wake */
    ngx_queue_init(&woken);
    ngx_queue_add(&woken, &ngx_http_llm_worker.waiting);
    ngx_queue_init(&ngx_http_llm_worker.waiting);

    while (!ngx_queue_empty(&woken)) {
        q = ngx_queue_head(&woken);
        ngx_queue_remove(q);

        ctx = ngx_queue_data(q, ngx_http_llm_ctx_t, wait);
        ctx->waiting = 0;

        r = ctx->request;
        c = r->connection;
        ngx_http_set_log_request(c->log, r);

        /* the engine, or the reason why the load failed; a request
         * prepared before it waited goes on prepared */
        if (ctx->job) {
            ngx_http_llm_start(r);

        } else {
            ngx_http_llm_body_handler(r);
        }

        ngx_http_run_posted_requests(c);
    }
}


/*
 * Runs in a thread of llm_thread_pool: the job's pool, no nginx request.
 * The body is parsed strictly (llm_json_parse: UTF-8, no NUL, nothing
 * after the value) and at most LLM_JSON_MAX_DEPTH deep, without recursion
 * in parsing or freeing, so no body can exhaust the thread's stack.
 */

static void
ngx_http_llm_prepare(void *data, ngx_log_t *log)
{
    ngx_http_llm_parse(*(ngx_http_llm_job_t **) data);
}


/* the job's body through its route's parser (a router's too) */

void
ngx_http_llm_parse(ngx_http_llm_job_t *job)
{
    u_char    *body;
    size_t     len;
    yajl_val   root;
    char       err[LLM_ERR_LEN];

    body = ngx_http_llm_read_body(job, &len);
    if (body == NULL) {
        return;
    }

    root = llm_json_parse((const char *) body, len, LLM_JSON_MAX_DEPTH, err);
    ngx_pfree(job->pool, body);

    if (root == NULL) {
        ngx_http_llm_job_error(job, NGX_HTTP_BAD_REQUEST, NULL, "%s", err);
        return;
    }

    if (!YAJL_IS_OBJECT(root)) {
        ngx_http_llm_job_error(job, NGX_HTTP_BAD_REQUEST, NULL,
                               "the request body must be a JSON object, "
                               "got %s", ngx_http_llm_json_type(root));

    } else {
        job->route->parse(job, root);
    }

    llm_json_free(root);
}


/* the body in one piece, its length in *len; NULL with the error set */

static u_char *
ngx_http_llm_read_body(ngx_http_llm_job_t *job, size_t *len)
{
    u_char       *body, *p;
    ssize_t       n;
    ngx_buf_t    *b;
    ngx_chain_t  *cl;

    *len = 0;
    for (cl = job->body; cl; cl = cl->next) {
        if (!ngx_buf_special(cl->buf)) {
            *len += ngx_buf_size(cl->buf);
        }
    }

    /* one byte more: an empty body is not a NULL pointer */
    body = ngx_pnalloc(job->pool, *len + 1);
    if (body == NULL) {
        ngx_http_llm_job_error(job, NGX_HTTP_INTERNAL_SERVER_ERROR, NULL,
                               "out of memory for a %uz byte body", *len);
        return NULL;
    }

    /* a body larger than client_body_buffer_size is in a temp file */
    p = body;
    for (cl = job->body; cl; cl = cl->next) {
        b = cl->buf;

        if (ngx_buf_special(b)) {
            continue;       /* e.g. the last_buf of an empty body */
        }

        if (!ngx_buf_in_memory(b)) {
            n = pread(b->file->fd, p, b->file_last - b->file_pos,
                      b->file_pos);
            if (n != b->file_last - b->file_pos) {
                ngx_http_llm_job_error(job, NGX_HTTP_INTERNAL_SERVER_ERROR,
                                       NULL, "reading the request body "
                                       "from \"%V\" failed", &b->file->name);
                return NULL;
            }

            p += n;

        } else {
            p = ngx_cpymem(p, b->pos, b->last - b->pos);
        }
    }

    return body;
}


/* the task is back on the event loop */

static void
ngx_http_llm_prepared(ngx_event_t *ev)
{
    ngx_connection_t    *c;
    ngx_http_request_t  *r;

    r = ev->data;
    c = r->connection;

    ngx_http_set_log_request(c->log, r);

    r->main->blocked--;

    /* ngx_http_llm_start(), or nginx's finalizer if the client left */
    r->write_event_handler(r);

    ngx_http_run_posted_requests(c);
}


static void
ngx_http_llm_start(ngx_http_request_t *r)
{
    ngx_int_t            rc;
    ngx_http_llm_ctx_t  *ctx;
    ngx_http_llm_job_t  *job;

    if (r->main->blocked) {
        return;     /* a write event while the task still runs */
    }

    r->write_event_handler = ngx_http_request_empty_handler;

    ctx = ngx_http_get_module_ctx(r, ngx_http_llm_module);
    job = ctx->job;

    if (job->status) {
        rc = ngx_http_llm_send_error(r, job->status, job->err_type,
                                     job->err_param, "%s", job->err);

    } else {
        /* the engine may have begun to retire (or stopped) while the
         * request was prepared: it waits, prepared, for the next one */
        switch (ngx_http_llm_engine_accepts()) {

        case NGX_AGAIN:
            ngx_http_llm_wait_for_model(r, ctx);
            return;

        case NGX_DECLINED:
            rc = ngx_http_llm_engine_unavailable(r);
            break;

        default:
            rc = ctx->route->start(r, ctx);
        }
    }

    if (rc != NGX_DONE) {
        ngx_http_finalize_request(r, rc);
    }
}


static void
ngx_http_llm_guard_start(ngx_http_request_t *r, ngx_http_llm_ctx_t *ctx)
{
    ctx->guard.handler = ngx_http_llm_guard_handler;
    ctx->guard.data = ctx;
    ctx->guard.log = r->connection->log;
    ngx_add_timer(&ctx->guard, NGX_HTTP_LLM_GUARD);
}


static void
ngx_http_llm_guard_handler(ngx_event_t *ev)
{
    /* nothing to do but to exist: see the comment at the top */
    ngx_add_timer(ev, NGX_HTTP_LLM_GUARD);
}


static void
ngx_http_llm_cleanup(void *data)
{
    ngx_http_llm_ctx_t  *ctx = data;

    if (ctx->guard.timer_set) {
        ngx_del_timer(&ctx->guard);
    }

    ngx_http_llm_engine_release(ctx);
}
