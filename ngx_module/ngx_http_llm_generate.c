
/*
 * ngx_http_llm_generate.c -- a parsed request that generates: submitted to
 * the engine, then its output delivered after each drain.
 *
 *   generate       the route's start (chat, completions; /responses adds
 *                  its first events): the response id, the engine requests
 *                  (ngx_http_llm_bridge.c), the SSE headers of a stream
 *   deliver        called after each drain with new output: the route's
 *                  chunk renders a stream's new events, its body renders
 *                  the whole response at the end; finalize once
 */


#include "ngx_http_llm_module.h"


static ngx_int_t ngx_http_llm_deliver_stream(ngx_http_request_t *r,
    ngx_http_llm_ctx_t *ctx);
static ngx_int_t ngx_http_llm_deliver_body(ngx_http_request_t *r,
    ngx_http_llm_ctx_t *ctx);


/* NGX_DONE while the generation runs, else the code to finalize with */

ngx_int_t
ngx_http_llm_generate(ngx_http_request_t *r, ngx_http_llm_ctx_t *ctx)
{
    ngx_int_t                 rc;
    ngx_http_llm_job_t       *job;
    ngx_http_llm_loc_conf_t  *llcf;

    job = ctx->job;
    llcf = ngx_http_get_module_loc_conf(r, ngx_http_llm_module);

    /* output_token_metrics implies the times (vLLM); only chat and
     * responses have a reasoning parser */
    if (llcf->output_token_metrics && job->reasoning) {
        ctx->phase_metrics = 1;
        ctx->timing = 1;
        ctx->metrics = 1;
    }

    ctx->stream = job->stream;
    ctx->billing = job->stream && ngx_http_llm_billing_wanted(r);
    ctx->include_usage = job->include_usage;
    ctx->continuous_usage = job->continuous_usage;
    ctx->created = ngx_time();

    /* "chatcmpl-", "cmpl-" or "resp_" and 32 hex digits, like vLLM's ids */
    if (ngx_http_llm_random_id(r->pool, &ctx->id, ctx->route->id_prefix)
        != NGX_OK)
    {
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }

    rc = ngx_http_llm_engine_submit(r, ctx);

    if (rc != NGX_OK || !ctx->submitted) {
        return rc;      /* the error is sent */
    }

    if (ctx->stream) {
        rc = ngx_http_llm_sse_start(r);

        if (rc == NGX_ERROR || rc > NGX_OK || r->header_only) {
            return rc;
        }

        r->write_event_handler = ngx_http_llm_writer;
    }

    return NGX_DONE;
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

    if (ctx->route->chunk(ctx, j) != NGX_OK) {
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
    ngx_uint_t           i;
    ngx_http_llm_json_t  j;

    if (ctx->finish == LLM_FINISH_NONE && !ctx->failed) {
        return NGX_AGAIN;       /* the text accumulates in the sequences */
    }

    ngx_http_llm_engine_release(ctx);
    ctx->done = 1;

    if (ctx->engine_lost) {
        return ngx_http_llm_engine_lost_error(r);
    }

    if (ctx->failed || ctx->finish == LLM_FINISH_ERROR) {
        return ngx_http_llm_send_error(r, NGX_HTTP_INTERNAL_SERVER_ERROR,
                                       NULL, NULL, "Internal server error");
    }

    size = 1024;

    for (i = 0; i < ctx->n_seqs; i++) {
        size += 512 + ctx->seqs[i].text.nelts * 2;
    }

    ngx_http_llm_json_init(&j, r->pool, size);

    if (ctx->route->body(ctx, &j) != NGX_OK
        || ngx_http_llm_billing_header(r, ctx) != NGX_OK)
    {
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }

    return ngx_http_llm_send_json(r, NGX_HTTP_OK, &j);
}
