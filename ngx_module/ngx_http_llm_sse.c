
/*
 * ngx_http_llm_sse.c -- the write path: whole JSON bodies, and SSE
 * streams ("data: {json}\n\n" events, "data: [DONE]" at the end) with
 * backpressure.
 *
 * An event is rendered into the request's scratch buffer, then copied into
 * a buffer from ctx->free: buffers come back to ctx->free once the socket
 * took them, so a long stream uses a few buffers, not one per token.  Every
 * buffer has flush set, or postpone_output would hold small events back.
 * When the socket is full, ngx_http_output_filter() keeps the rest in
 * ctx->busy and ngx_http_llm_writer() pushes it on write events.
 *
 * Backpressure: a slow client does not slow the engine down (vLLM's does
 * not either) until its unsent output passes llm_max_unsent_bytes; then
 * the engine pauses the request, which costs no compute and no more memory
 * from then on, and resumes it when the client has read half of it.  While
 * output waits, send_timeout runs from the last write the socket took
 * bytes of (nginx's rule: the time between two successive writes), so a
 * client that reads nothing is dropped: the request is finalized with 408
 * ("client timed out" in the error log), its cleanup cancels it in the
 * engine, and the access log bills an abort with the tokens made until
 * then.
 */


#include "ngx_http_llm_module.h"


static ngx_int_t ngx_http_llm_sse_flow(ngx_http_request_t *r,
    ngx_http_llm_ctx_t *ctx, off_t sent);


ngx_int_t
ngx_http_llm_send_json(ngx_http_request_t *r, ngx_uint_t status,
    ngx_http_llm_json_t *j)
{
    ngx_str_t  type = ngx_string("application/json");

    return ngx_http_llm_send_body(r, status, &type, j);
}


/* the whole body rendered in j, with its length and content type */

ngx_int_t
ngx_http_llm_send_body(ngx_http_request_t *r, ngx_uint_t status,
    ngx_str_t *type, ngx_http_llm_json_t *j)
{
    ngx_int_t     rc;
    ngx_buf_t    *b;
    ngx_chain_t   out;

    if (j->failed) {
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }

    b = ngx_calloc_buf(r->pool);
    if (b == NULL) {
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }

    b->pos = j->start;
    b->last = j->pos;
    b->memory = 1;
    b->last_buf = (r == r->main);
    b->last_in_chain = 1;

    r->headers_out.status = status;
    r->headers_out.content_length_n = b->last - b->pos;
    r->headers_out.content_type = *type;
    r->headers_out.content_type_len = r->headers_out.content_type.len;
    r->headers_out.content_type_lowcase = NULL;

    rc = ngx_http_send_header(r);

    if (rc == NGX_ERROR || rc > NGX_OK || r->header_only) {
        return rc;
    }

    out.buf = b;
    out.next = NULL;

    return ngx_http_output_filter(r, &out);
}


ngx_int_t
ngx_http_llm_sse_start(ngx_http_request_t *r)
{
    ngx_table_elt_t  *h;

    r->headers_out.status = NGX_HTTP_OK;
    r->headers_out.content_length_n = -1;   /* chunked, or HTTP/2 frames */

    /* "text/event-stream; charset=utf-8", as vLLM's StreamingResponse */
    ngx_str_set(&r->headers_out.content_type, "text/event-stream");
    r->headers_out.content_type_len = r->headers_out.content_type.len;
    r->headers_out.content_type_lowcase = NULL;
    ngx_str_set(&r->headers_out.charset, "utf-8");

    h = ngx_list_push(&r->headers_out.headers);
    if (h == NULL) {
        return NGX_ERROR;
    }

    h->hash = 1;
    ngx_str_set(&h->key, "Cache-Control");
    ngx_str_set(&h->value, "no-cache");

    /* a proxying nginx in front must not buffer the stream */
    h = ngx_list_push(&r->headers_out.headers);
    if (h == NULL) {
        return NGX_ERROR;
    }

    h->hash = 1;
    ngx_str_set(&h->key, "X-Accel-Buffering");
    ngx_str_set(&h->value, "no");

    return ngx_http_send_header(r);
}


ngx_int_t
ngx_http_llm_sse_send(ngx_http_request_t *r, ngx_http_llm_ctx_t *ctx,
    ngx_http_llm_json_t *j, ngx_uint_t last)
{
    off_t         sent;
    size_t        len, size;
    ngx_int_t     rc;
    ngx_buf_t    *b;
    ngx_chain_t  *cl;

    if (j->failed) {
        return NGX_ERROR;
    }

    len = j->pos - j->start;

    cl = ngx_chain_get_free_buf(r->pool, &ctx->free);
    if (cl == NULL) {
        return NGX_ERROR;
    }

    b = cl->buf;

    if (b->start == NULL || (size_t) (b->end - b->start) < len) {
        size = ngx_max(len, 512);

        /* a large one goes back to the heap: the stream is long */
        if (b->start) {
            ngx_pfree(r->pool, b->start);
        }

        b->start = ngx_palloc(r->pool, size);
        if (b->start == NULL) {
            return NGX_ERROR;
        }

        b->end = b->start + size;
    }

    b->pos = b->start;
    b->last = ngx_cpymem(b->start, j->start, len);
    b->temporary = 1;
    b->flush = 1;
    b->last_buf = (last && r == r->main);
    b->last_in_chain = last;
    b->tag = (ngx_buf_tag_t) &ngx_http_llm_module;

    sent = r->connection->sent;

    rc = ngx_http_output_filter(r, cl);

    /* "out" must point to a chain pointer: NULL crashes under pressure */
    ngx_chain_update_chains(r->pool, &ctx->free, &ctx->busy, &cl,
                            (ngx_buf_tag_t) &ngx_http_llm_module);

    if (rc != NGX_ERROR && ngx_http_llm_sse_flow(r, ctx, sent) != NGX_OK) {
        return NGX_ERROR;
    }

    return rc;
}


/* write events while a stream runs: push what the socket did not take */

void
ngx_http_llm_writer(ngx_http_request_t *r)
{
    off_t                sent;
    ngx_int_t            rc;
    ngx_chain_t         *out;
    ngx_event_t         *wev;
    ngx_connection_t    *c;
    ngx_http_llm_ctx_t  *ctx;

    c = r->connection;
    wev = c->write;
    ctx = ngx_http_get_module_ctx(r, ngx_http_llm_module);

    if (wev->timedout) {
        /* the cleanup cancels the request: billed as an abort */
        c->timedout = 1;
        ngx_connection_error(c, NGX_ETIMEDOUT, "client timed out");
        ngx_http_finalize_request(r, NGX_HTTP_REQUEST_TIME_OUT);
        return;
    }

    sent = c->sent;

    rc = ngx_http_output_filter(r, NULL);

    if (rc == NGX_ERROR) {
        ngx_http_finalize_request(r, NGX_ERROR);
        return;
    }

    out = NULL;
    ngx_chain_update_chains(r->pool, &ctx->free, &ctx->busy, &out,
                            (ngx_buf_tag_t) &ngx_http_llm_module);

    if (ngx_http_llm_sse_flow(r, ctx, sent) != NGX_OK) {
        ngx_http_finalize_request(r, NGX_ERROR);
    }
}


/*
 * After every write of a stream, "sent" being c->sent before it.  While
 * output waits, the write event is armed (epoll learns of it only here:
 * without it the rest would wait for the next token, forever once the
 * engine pauses) and so is send_timeout, restarted by every write the
 * socket took bytes of (a write event alone is no progress).  The engine
 * pauses the request past llm_max_unsent_bytes and resumes it at half of
 * it.  Unsent is what ctx->busy holds: the drains' output is rendered
 * into events at once, nothing else waits.
 */

static ngx_int_t
ngx_http_llm_sse_flow(ngx_http_request_t *r, ngx_http_llm_ctx_t *ctx,
    off_t sent)
{
    size_t                     unsent;
    ngx_chain_t               *cl;
    ngx_event_t               *wev;
    ngx_connection_t          *c;
    ngx_http_core_loc_conf_t  *clcf;

    c = r->connection;
    wev = c->write;
    clcf = ngx_http_get_module_loc_conf(r, ngx_http_core_module);

    /* a delayed write (limit_rate) has a timer of its own */

    if (ctx->busy == NULL && !c->buffered) {
        if (wev->timer_set && !wev->delayed) {
            ngx_del_timer(wev);
        }

    } else {
        if (ngx_handle_write_event(wev, clcf->send_lowat) != NGX_OK) {
            return NGX_ERROR;
        }

        if (!wev->delayed && (!wev->timer_set || c->sent != sent)) {
            ngx_add_timer(wev, clcf->send_timeout);
        }
    }

    if (ctx->done) {
        return NGX_OK;      /* the engine is done with it */
    }

    unsent = 0;

    for (cl = ctx->busy; cl; cl = cl->next) {
        unsent += ngx_buf_size(cl->buf);
    }

    if (!ctx->paused && unsent > ctx->max_unsent) {
        ngx_log_debug1(NGX_LOG_DEBUG_HTTP, c->log, 0,
                       "llm paused, %uz bytes unsent", unsent);
        ngx_http_llm_engine_pause(ctx, 1);

    } else if (ctx->paused && unsent <= ctx->max_unsent / 2) {
        ngx_log_debug1(NGX_LOG_DEBUG_HTTP, c->log, 0,
                       "llm resumed, %uz bytes unsent", unsent);
        ngx_http_llm_engine_pause(ctx, 0);
    }

    return NGX_OK;
}
