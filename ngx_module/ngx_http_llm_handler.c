
/*
 * ngx_http_llm_handler.c -- the llm_api content handler and the life of a
 * generation request.
 *
 *   handler        route on the URI's ending, check the method, read body
 *                  (GET and DELETE .../responses/{id} answer at once from
 *                  the store)
 *   body_handler   post the "prepare" task to llm_thread_pool: parse the
 *                  JSON, render the chat template, tokenize (slow work the
 *                  event loop must not do); r->main->blocked keeps the
 *                  request alive until the task returns
 *   start          back on the event loop: answer the task's error, or
 *                  submit to the engine (and send SSE headers)
 *   deliver        called after each drain with new output: write chunks,
 *                  or at the end the whole body; finalize once
 *   cleanup        runs however the request ends (client abort included)
 *                  and cancels the engine's work at once
 *
 * A non-cancelable timer ("guard") is armed from the body's arrival to the
 * end: a worker that quits or reloads gracefully waits for timers, so every
 * stream in flight is finished before the worker exits.
 */


#include "ngx_http_llm_module.h"


#define NGX_HTTP_LLM_GUARD  60000


static ngx_http_llm_route_e ngx_http_llm_route(ngx_http_request_t *r);
static void ngx_http_llm_body_handler(ngx_http_request_t *r);
static void ngx_http_llm_prepare(void *data, ngx_log_t *log);
static void ngx_http_llm_prepared(ngx_event_t *ev);
static void ngx_http_llm_start(ngx_http_request_t *r);
static ngx_int_t ngx_http_llm_set_id(ngx_http_request_t *r,
    ngx_http_llm_ctx_t *ctx);
static ngx_int_t ngx_http_llm_deliver_stream(ngx_http_request_t *r,
    ngx_http_llm_ctx_t *ctx);
static ngx_int_t ngx_http_llm_deliver_body(ngx_http_request_t *r,
    ngx_http_llm_ctx_t *ctx);
static void ngx_http_llm_guard_handler(ngx_event_t *ev);
static void ngx_http_llm_cleanup(void *data);


ngx_int_t
ngx_http_llm_api_handler(ngx_http_request_t *r)
{
    ngx_int_t              rc;
    ngx_http_llm_ctx_t    *ctx;
    ngx_http_llm_route_e   route;

    route = ngx_http_llm_route(r);

    if (route == NGX_HTTP_LLM_ROUTE_NONE
        || route == NGX_HTTP_LLM_ROUTE_MODELS
        || route == NGX_HTTP_LLM_ROUTE_MODEL)
    {
        rc = ngx_http_discard_request_body(r);
        if (rc != NGX_OK) {
            return rc;
        }

        if (route == NGX_HTTP_LLM_ROUTE_NONE) {
            return ngx_http_llm_send_error(r, NGX_HTTP_NOT_FOUND, NULL, NULL,
                                           "Not Found: no API endpoint at "
                                           "\"%V\"", &r->uri);
        }

        if (!(r->method & (NGX_HTTP_GET|NGX_HTTP_HEAD))) {
            return ngx_http_llm_send_error(r, NGX_HTTP_NOT_ALLOWED, NULL,
                                           NULL, "Method Not Allowed: use "
                                           "GET for \"%V\"", &r->uri);
        }

        return ngx_http_llm_models_handler(r, route);
    }

    if (route == NGX_HTTP_LLM_ROUTE_RESPONSE) {
        rc = ngx_http_discard_request_body(r);
        if (rc != NGX_OK) {
            return rc;
        }

        if (!(r->method & (NGX_HTTP_GET|NGX_HTTP_HEAD|NGX_HTTP_DELETE))) {
            return ngx_http_llm_send_not_allowed(r, "GET, HEAD, DELETE",
                                                 "Method Not Allowed: use "
                                                 "GET or DELETE for \"%V\"",
                                                 &r->uri);
        }

        return ngx_http_llm_response_handler(r);
    }

    if (route == NGX_HTTP_LLM_ROUTE_RESPONSE_CANCEL) {
        rc = ngx_http_discard_request_body(r);
        if (rc != NGX_OK) {
            return rc;
        }

        if (r->method != NGX_HTTP_POST) {
            return ngx_http_llm_send_not_allowed(r, "POST",
                                                 "Method Not Allowed: use "
                                                 "POST for \"%V\"", &r->uri);
        }

        return ngx_http_llm_response_handler(r);
    }

    if (r->method != NGX_HTTP_POST) {
        rc = ngx_http_discard_request_body(r);
        if (rc != NGX_OK) {
            return rc;
        }

        return ngx_http_llm_send_error(r, NGX_HTTP_NOT_ALLOWED, NULL, NULL,
                                       "Method Not Allowed: use POST for "
                                       "\"%V\"", &r->uri);
    }

    if (ngx_http_llm_worker.engine == NULL) {
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
    ngx_http_set_ctx(r, ctx, ngx_http_llm_module);

    rc = ngx_http_read_client_request_body(r, ngx_http_llm_body_handler);

    if (rc >= NGX_HTTP_SPECIAL_RESPONSE) {
        return rc;
    }

    return NGX_DONE;
}


/*
 * The endpoint is chosen by how the URI ends, so "location /v1/" and
 * "location = /completions" both work.  "/chat/completions" is tested
 * before "/completions", "/detokenize" before "/tokenize".
 */

static ngx_http_llm_route_e
ngx_http_llm_route(ngx_http_request_t *r)
{
    u_char     *p, *last;
    ngx_str_t  *uri;

    uri = &r->uri;
    last = uri->data + uri->len;

#define ngx_http_llm_ends_with(s)                                            \
    (uri->len >= sizeof(s) - 1                                               \
     && ngx_strncmp(last - (sizeof(s) - 1), s, sizeof(s) - 1) == 0)

    if (ngx_http_llm_ends_with("/chat/completions")) {
        return NGX_HTTP_LLM_ROUTE_CHAT;
    }

    if (ngx_http_llm_ends_with("/completions")) {
        return NGX_HTTP_LLM_ROUTE_COMPLETIONS;
    }

    if (ngx_http_llm_ends_with("/responses")) {
        return NGX_HTTP_LLM_ROUTE_RESPONSES;
    }

    if (ngx_http_llm_ends_with("/detokenize")) {
        return NGX_HTTP_LLM_ROUTE_DETOKENIZE;
    }

    if (ngx_http_llm_ends_with("/tokenize")) {
        return NGX_HTTP_LLM_ROUTE_TOKENIZE;
    }

    if (ngx_http_llm_ends_with("/models")) {
        return NGX_HTTP_LLM_ROUTE_MODELS;
    }

#undef ngx_http_llm_ends_with

    /* "/models/{id}": ids may hold slashes ("org/name") */
    p = ngx_strlcasestrn(uri->data, last, (u_char *) "/models/", 8 - 1);

    if (p && p + 8 < last) {
        return NGX_HTTP_LLM_ROUTE_MODEL;
    }

    /*
     * "/responses/{id}" and "/responses/{id}/cancel": the id is one
     * segment ("resp_..."); others (OpenAI's ".../input_items") are not
     * served
     */
    p = ngx_strlcasestrn(uri->data, last, (u_char *) "/responses/", 11 - 1);

    if (p && p + 11 < last) {
        p = ngx_strlchr(p + 11, last, '/');

        if (p == NULL) {
            return NGX_HTTP_LLM_ROUTE_RESPONSE;
        }

        if (last - p == 7 && ngx_strncmp(p, "/cancel", 7) == 0
            && p > uri->data && p[-1] != '/')
        {
            return NGX_HTTP_LLM_ROUTE_RESPONSE_CANCEL;
        }
    }

    return NGX_HTTP_LLM_ROUTE_NONE;
}


static void
ngx_http_llm_body_handler(ngx_http_request_t *r)
{
    ngx_thread_task_t         *task;
    ngx_pool_cleanup_t        *cln;
    ngx_http_cleanup_t        *hcln;
    ngx_http_llm_ctx_t        *ctx;
    ngx_http_llm_job_t        *job;
    ngx_http_llm_worker_t     *w = &ngx_http_llm_worker;
    ngx_http_llm_loc_conf_t   *llcf;
    ngx_http_llm_main_conf_t  *lmcf;

    ctx = ngx_http_get_module_ctx(r, ngx_http_llm_module);
    llcf = ngx_http_get_module_loc_conf(r, ngx_http_llm_module);
    lmcf = ngx_http_get_module_main_conf(r, ngx_http_llm_module);

    job = ngx_pcalloc(r->pool, sizeof(ngx_http_llm_job_t));
    if (job == NULL) {
        ngx_http_finalize_request(r, NGX_HTTP_INTERNAL_SERVER_ERROR);
        return;
    }

    /* the task's malloc()ed results are freed with the request's pool */
    cln = ngx_pool_cleanup_add(r->pool, 0);
    if (cln == NULL) {
        ngx_http_finalize_request(r, NGX_HTTP_INTERNAL_SERVER_ERROR);
        return;
    }

    cln->handler = ngx_http_llm_job_free;
    cln->data = job;

    job->body = r->request_body ? r->request_body->bufs : NULL;
    job->route = ctx->route;
    job->served_model_name = lmcf->served_model_name;
    job->model = w->model;
    job->max_model_len = w->max_model_len;
    job->force_include_usage = llcf->force_include_usage;
    llm_sampling_params_init(&job->sp, w->model);

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

    /* Prometheus' TTFT and e2e latency start here: vLLM's arrival */
    ctx->arrival = llm_now();

    hcln = ngx_http_cleanup_add(r, 0);
    if (hcln == NULL) {
        ngx_http_finalize_request(r, NGX_HTTP_INTERNAL_SERVER_ERROR);
        return;
    }

    hcln->handler = ngx_http_llm_cleanup;
    hcln->data = ctx;

    ctx->guard.handler = ngx_http_llm_guard_handler;
    ctx->guard.data = ctx;
    ctx->guard.log = r->connection->log;
    ngx_add_timer(&ctx->guard, NGX_HTTP_LLM_GUARD);

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


/* runs in a thread of llm_thread_pool: no pools, no nginx request API */

static void
ngx_http_llm_prepare(void *data, ngx_log_t *log)
{
    ngx_http_llm_job_t  *job = *(ngx_http_llm_job_t **) data;

    u_char       *body, *p;
    size_t        len;
    ssize_t       n;
    yajl_val      root;
    ngx_buf_t    *b;
    ngx_chain_t  *cl;
    char          errbuf[256];

    len = 0;
    for (cl = job->body; cl; cl = cl->next) {
        if (!ngx_buf_special(cl->buf)) {
            len += ngx_buf_size(cl->buf);
        }
    }

    body = malloc(len + 1);
    if (body == NULL) {
        ngx_http_llm_job_error(job, NGX_HTTP_INTERNAL_SERVER_ERROR, NULL,
                               "out of memory for a %uz byte body", len);
        return;
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
                free(body);
                ngx_http_llm_job_error(job, NGX_HTTP_INTERNAL_SERVER_ERROR,
                                       NULL, "reading the request body "
                                       "from \"%V\" failed", &b->file->name);
                return;
            }

            p += n;

        } else {
            p = ngx_cpymem(p, b->pos, b->last - b->pos);
        }
    }

    *p = '\0';

    errbuf[0] = '\0';
    root = yajl_tree_parse((const char *) body, errbuf, sizeof(errbuf));
    free(body);

    if (root == NULL) {
        /* yajl appends the input and a caret on further lines */
        p = (u_char *) ngx_strchr(errbuf, '\n');
        if (p) {
            *p = '\0';
        }

        ngx_http_llm_job_error(job, NGX_HTTP_BAD_REQUEST, NULL,
                               "the request body is not valid JSON: %s",
                               errbuf[0] ? errbuf : "empty body");
        return;
    }

    if (!YAJL_IS_OBJECT(root)) {
        ngx_http_llm_job_error(job, NGX_HTTP_BAD_REQUEST, NULL,
                               "the request body must be a JSON object, "
                               "got %s", ngx_http_llm_json_type(root));

    } else if (job->route == NGX_HTTP_LLM_ROUTE_TOKENIZE
               || job->route == NGX_HTTP_LLM_ROUTE_DETOKENIZE)
    {
        ngx_http_llm_tokenize_parse(job, root);

    } else if (ngx_http_llm_params_parse(job, root) == NGX_OK) {

        switch (job->route) {

        case NGX_HTTP_LLM_ROUTE_CHAT:
            ngx_http_llm_chat_parse(job, root);
            break;

        case NGX_HTTP_LLM_ROUTE_RESPONSES:
            ngx_http_llm_responses_parse(job, root);
            break;

        default: /* NGX_HTTP_LLM_ROUTE_COMPLETIONS */
            ngx_http_llm_completions_parse(job, root);
            break;
        }

        if (job->status == 0) {
            (void) ngx_http_llm_params_finish(job);
        }
    }

    yajl_tree_free(root);
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
        ngx_http_finalize_request(r,
            ngx_http_llm_send_error(r, job->status, job->err_type,
                                    job->err_param, "%s", job->err));
        return;
    }

    if (ctx->route == NGX_HTTP_LLM_ROUTE_TOKENIZE
        || ctx->route == NGX_HTTP_LLM_ROUTE_DETOKENIZE)
    {
        ngx_http_finalize_request(r, ngx_http_llm_tokenize_send(r, ctx));
        return;
    }

    ctx->stream = job->stream;
    ctx->include_usage = job->include_usage;
    ctx->continuous_usage = job->continuous_usage;
    ctx->created = ngx_time();

    if (ngx_http_llm_set_id(r, ctx) != NGX_OK) {
        ngx_http_finalize_request(r, NGX_HTTP_INTERNAL_SERVER_ERROR);
        return;
    }

    rc = ngx_http_llm_engine_submit(r, ctx);
    if (rc != NGX_OK) {
        ngx_http_finalize_request(r, rc);
        return;
    }

    if (ctx->stream) {
        rc = ngx_http_llm_sse_start(r);

        if (rc == NGX_ERROR || rc > NGX_OK || r->header_only) {
            ngx_http_finalize_request(r, rc);
            return;
        }

        r->write_event_handler = ngx_http_llm_writer;
    }

    /* a stream's response.created and response.in_progress come at once */

    if (ctx->route == NGX_HTTP_LLM_ROUTE_RESPONSES
        && ngx_http_llm_responses_start(ctx) == NGX_ERROR)
    {
        ngx_http_finalize_request(r, NGX_ERROR);
        return;
    }
}


/* "chatcmpl-", "cmpl-" or "resp_" and 32 hex digits, like vLLM's ids */

static ngx_int_t
ngx_http_llm_set_id(ngx_http_request_t *r, ngx_http_llm_ctx_t *ctx)
{
    const char  *prefix;

    switch (ctx->route) {
    case NGX_HTTP_LLM_ROUTE_CHAT:
        prefix = "chatcmpl-";
        break;
    case NGX_HTTP_LLM_ROUTE_RESPONSES:
        prefix = "resp_";
        break;
    default:
        prefix = "cmpl-";
    }

    return ngx_http_llm_random_id(r->pool, &ctx->id, prefix);
}


ngx_int_t
ngx_http_llm_random_id(ngx_pool_t *pool, ngx_str_t *id, const char *prefix)
{
    u_char      *p;
    size_t       len;
    ngx_uint_t   i;

    len = ngx_strlen(prefix);

    p = ngx_pnalloc(pool, len + 32);
    if (p == NULL) {
        return NGX_ERROR;
    }

    id->data = p;
    p = ngx_cpymem(p, prefix, len);

    for (i = 0; i < 4; i++) {
        /* random() gives 31 bits */
        p = ngx_sprintf(p, "%08xD",
                        (uint32_t) (ngx_random() ^ (ngx_random() << 16)));
    }

    id->len = p - id->data;

    return NGX_OK;
}


/* new output after a drain (ngx_http_llm_bridge.c) */

void
ngx_http_llm_deliver(ngx_http_llm_ctx_t *ctx)
{
    ngx_int_t            rc;
    ngx_connection_t    *c;
    ngx_http_request_t  *r;

    r = ctx->request;
    c = r->connection;

    ngx_http_set_log_request(c->log, r);

    if (ctx->stream) {
        rc = ngx_http_llm_deliver_stream(r, ctx);

    } else {
        rc = ngx_http_llm_deliver_body(r, ctx);
    }

    if (rc != NGX_AGAIN || ctx->done) {
        ngx_http_finalize_request(r, rc);
    }

    ngx_http_run_posted_requests(c);
}


/*
 * Returns NGX_AGAIN while the stream goes on (whatever the socket said:
 * unsent data waits in ctx->busy for ngx_http_llm_writer), or the code to
 * finalize with.
 */

static ngx_int_t
ngx_http_llm_deliver_stream(ngx_http_request_t *r, ngx_http_llm_ctx_t *ctx)
{
    ngx_int_t             rc;
    ngx_uint_t            last;
    ngx_http_llm_json_t  *j;

    last = ctx->finish != LLM_FINISH_NONE || ctx->failed;

    if (ctx->failed) {
        ctx->finish = LLM_FINISH_ERROR;
    }

    j = &ctx->scratch;

    if (j->start == NULL) {
        ngx_http_llm_json_init(j, r->pool, 1024);

    } else {
        ngx_http_llm_json_reset(j);
    }

    switch (ctx->route) {

    case NGX_HTTP_LLM_ROUTE_CHAT:
        rc = ngx_http_llm_chat_chunk(ctx, j);
        break;

    case NGX_HTTP_LLM_ROUTE_RESPONSES:
        rc = ngx_http_llm_responses_chunk(ctx, j);
        break;

    default: /* NGX_HTTP_LLM_ROUTE_COMPLETIONS */
        rc = ngx_http_llm_completions_chunk(ctx, j);
        break;
    }

    if (rc != NGX_OK) {
        return NGX_ERROR;
    }

    if (last) {
        ngx_http_llm_engine_release(ctx);
        ctx->done = 1;
    }

    if (j->pos == j->start && !last) {
        return NGX_AGAIN;
    }

    rc = ngx_http_llm_sse_send(r, ctx, j, last);

    if (rc == NGX_ERROR || last) {
        return rc;
    }

    return NGX_AGAIN;
}


static ngx_int_t
ngx_http_llm_deliver_body(ngx_http_request_t *r, ngx_http_llm_ctx_t *ctx)
{
    size_t               size;
    ngx_int_t            rc;
    ngx_uint_t           i;
    ngx_http_llm_json_t  j;

    if (ctx->finish == LLM_FINISH_NONE && !ctx->failed) {
        return NGX_AGAIN;       /* the text accumulates in the sequences */
    }

    ngx_http_llm_engine_release(ctx);
    ctx->done = 1;

    if (ctx->failed || ctx->finish == LLM_FINISH_ERROR) {
        return ngx_http_llm_send_error(r, NGX_HTTP_INTERNAL_SERVER_ERROR,
                                       NULL, NULL, "Internal server error");
    }

    size = 1024;

    for (i = 0; i < ctx->n_seqs; i++) {
        size += 512 + ctx->seqs[i].text_len * 2;
    }

    ngx_http_llm_json_init(&j, r->pool, size);

    switch (ctx->route) {

    case NGX_HTTP_LLM_ROUTE_CHAT:
        rc = ngx_http_llm_chat_body(ctx, &j);
        break;

    case NGX_HTTP_LLM_ROUTE_RESPONSES:
        rc = ngx_http_llm_responses_body(ctx, &j);
        break;

    default: /* NGX_HTTP_LLM_ROUTE_COMPLETIONS */
        rc = ngx_http_llm_completions_body(ctx, &j);
        break;
    }

    if (rc != NGX_OK) {
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }

    return ngx_http_llm_send_json(r, NGX_HTTP_OK, &j);
}


/*
 * A stream wrote a sequence's new output: its buffers start over (the
 * responses stream keeps its text: the final events repeat all of it).
 */

void
ngx_http_llm_seq_written(ngx_http_llm_seq_t *seq)
{
    if (seq->ctx->route == NGX_HTTP_LLM_ROUTE_RESPONSES) {
        seq->text_sent = seq->text_len;
        seq->lp_sent = seq->n_lp;

    } else {
        seq->text_len = 0;
        seq->n_lp = 0;
        seq->n_ids = 0;
    }

    seq->new_ids = 0;
    seq->changed = 0;

    if (seq->finish != LLM_FINISH_NONE) {
        seq->finish_sent = 1;
    }
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

    ctx->terminated = 1;

    if (ctx->guard.timer_set) {
        ngx_del_timer(&ctx->guard);
    }

    ngx_http_llm_engine_release(ctx);
}
