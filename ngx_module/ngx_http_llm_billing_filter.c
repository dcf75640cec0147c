
/*
 * ngx_http_llm_billing_filter.c -- ngx_http_llm_billing_filter_module: at
 * a router (llm_router_model), takes a node's billing record out of a
 * proxied stream.
 *
 * A node asked for it ("LLM-Billing: stream" in the proxied request) ends
 * a stream with an SSE comment after its last event ([DONE], or a
 * Responses stream's response.completed or error),
 * "\n: llm-billing id=... \n\n" (ngx_http_llm_billing.c).  This body
 * filter passes everything before the comment as it comes, holding back
 * only the bytes at a buffer's end that may begin it, keeps the comment
 * and reads it into the request's ctx, so that the front's $llm_*
 * variables are the node's; the client gets exactly the node's stream
 * without it.
 */


#include "ngx_http_llm_module.h"


#define NGX_HTTP_LLM_BILLING_MAX  1024


typedef struct {
    size_t                      matched;       /* bytes of the marker seen */
    ngx_uint_t                  in_record;
    u_char                      record[NGX_HTTP_LLM_BILLING_MAX];
    size_t                      len;
} ngx_http_llm_billing_filter_ctx_t;


static ngx_int_t ngx_http_llm_billing_filter_init(ngx_conf_t *cf);
static ngx_int_t ngx_http_llm_billing_header_filter(ngx_http_request_t *r);
static ngx_int_t ngx_http_llm_billing_body_filter(ngx_http_request_t *r,
    ngx_chain_t *in);
static ngx_int_t ngx_http_llm_billing_scan(ngx_http_request_t *r,
    ngx_http_llm_billing_filter_ctx_t *ctx, ngx_buf_t *b, ngx_chain_t ***ll);
static ngx_int_t ngx_http_llm_billing_out(ngx_http_request_t *r,
    ngx_buf_t *b, size_t n, ngx_chain_t ***ll);


static ngx_http_module_t  ngx_http_llm_billing_filter_module_ctx = {
    NULL,                                  /* preconfiguration */
    ngx_http_llm_billing_filter_init,      /* postconfiguration */

    NULL,                                  /* create main configuration */
    NULL,                                  /* init main configuration */

    NULL,                                  /* create server configuration */
    NULL,                                  /* merge server configuration */

    NULL,                                  /* create location configuration */
    NULL                                   /* merge location configuration */
};


ngx_module_t  ngx_http_llm_billing_filter_module = {
    NGX_MODULE_V1,
    &ngx_http_llm_billing_filter_module_ctx,  /* module context */
    NULL,                                  /* module directives */
    NGX_HTTP_MODULE,                       /* module type */
    NULL,                                  /* init master */
    NULL,                                  /* init module */
    NULL,                                  /* init process */
    NULL,                                  /* init thread */
    NULL,                                  /* exit thread */
    NULL,                                  /* exit process */
    NULL,                                  /* exit master */
    NGX_MODULE_V1_PADDING
};


static ngx_http_output_header_filter_pt  ngx_http_next_header_filter;
static ngx_http_output_body_filter_pt    ngx_http_next_body_filter;

/* the comment's start: a line that begins with it */
static u_char  ngx_http_llm_billing_marker[] = "\n" NGX_HTTP_LLM_BILLING_EVENT;


static ngx_int_t
ngx_http_llm_billing_filter_init(ngx_conf_t *cf)
{
    ngx_http_llm_main_conf_t  *lmcf;

    lmcf = ngx_http_conf_get_module_main_conf(cf, ngx_http_llm_module);

    if (lmcf->router == NULL) {
        return NGX_OK;
    }

    ngx_http_next_header_filter = ngx_http_top_header_filter;
    ngx_http_top_header_filter = ngx_http_llm_billing_header_filter;

    ngx_http_next_body_filter = ngx_http_top_body_filter;
    ngx_http_top_body_filter = ngx_http_llm_billing_body_filter;

    return NGX_OK;
}


/* a node's event stream, proxied */

static ngx_int_t
ngx_http_llm_billing_header_filter(ngx_http_request_t *r)
{
    ngx_http_llm_billing_filter_ctx_t  *ctx;

    if (r->upstream == NULL
        || r != r->main
        || r->headers_out.status != NGX_HTTP_OK
        || r->headers_out.content_type.len < sizeof("text/event-stream") - 1
        || ngx_strncasecmp(r->headers_out.content_type.data,
                           (u_char *) "text/event-stream",
                           sizeof("text/event-stream") - 1) != 0)
    {
        return ngx_http_next_header_filter(r);
    }

    ctx = ngx_pcalloc(r->pool, sizeof(ngx_http_llm_billing_filter_ctx_t));
    if (ctx == NULL) {
        return NGX_ERROR;
    }

    ngx_http_set_ctx(r, ctx, ngx_http_llm_billing_filter_module);

    return ngx_http_next_header_filter(r);
}


static ngx_int_t
ngx_http_llm_billing_body_filter(ngx_http_request_t *r, ngx_chain_t *in)
{
    ngx_chain_t                        *out, **ll, *cl;
    ngx_http_llm_billing_filter_ctx_t  *ctx;

    ctx = ngx_http_get_module_ctx(r, ngx_http_llm_billing_filter_module);

    if (ctx == NULL || in == NULL) {
        return ngx_http_next_body_filter(r, in);
    }

    out = NULL;
    ll = &out;

    for (cl = in; cl; cl = cl->next) {
        if (ngx_http_llm_billing_scan(r, ctx, cl->buf, &ll) != NGX_OK) {
            return NGX_ERROR;
        }

        if (cl->buf->last_buf && ctx->in_record) {
            while (ctx->len && ctx->record[ctx->len - 1] == '\n') {
                ctx->len--;
            }

            (void) ngx_http_llm_billing_parse(r, ctx->record, ctx->len);
        }
    }

    return ngx_http_next_body_filter(r, out);
}


/*
 * One buffer: the bytes before the marker go on (the buffer itself,
 * shortened); bytes that may begin it are held back (they are the
 * marker's own, so only their number is kept) and sent ahead of the next
 * buffer if it does not go on with them, or of the last one; the marker's
 * first byte, the newline that ends the event before it, goes on; what
 * follows the marker goes into the record.  The buffer keeps its flags
 * (last_buf, flush).
 */

static ngx_int_t
ngx_http_llm_billing_scan(ngx_http_request_t *r,
    ngx_http_llm_billing_filter_ctx_t *ctx, ngx_buf_t *b, ngx_chain_t ***ll)
{
    u_char     *p, *last;
    size_t      held, mlen;
    ngx_buf_t  *nb;

    mlen = sizeof(ngx_http_llm_billing_marker) - 1;

    if (!ngx_buf_in_memory(b)) {

        /* not scanned: what was held back goes out before it */
        if (!ctx->in_record && ctx->matched) {
            if (ngx_http_llm_billing_out(r, NULL, ctx->matched, ll)
                != NGX_OK)
            {
                return NGX_ERROR;
            }

            ctx->matched = 0;
        }

        return ngx_http_llm_billing_out(r, b, 0, ll);
    }

    held = ctx->matched;
    last = ctx->in_record ? b->pos : b->last;

    for (p = b->pos; p < b->last; p++) {

        if (ctx->in_record) {
            if (ctx->len < NGX_HTTP_LLM_BILLING_MAX) {
                ctx->record[ctx->len++] = *p;
            }

            continue;
        }

        if (*p == ngx_http_llm_billing_marker[ctx->matched]) {

            if (++ctx->matched < mlen) {
                continue;
            }

            /* the marker: what precedes it and its newline go on */
            ctx->in_record = 1;

            if (held) {
                last = b->pos;
                if (ngx_http_llm_billing_out(r, NULL, 1, ll) != NGX_OK) {
                    return NGX_ERROR;
                }

            } else {
                last = p + 1 - mlen + 1;
            }

            continue;
        }

        /* no marker: what was held back goes out first */
        if (held) {
            if (ngx_http_llm_billing_out(r, NULL, held, ll) != NGX_OK) {
                return NGX_ERROR;
            }

            held = 0;
        }

        ctx->matched = (*p == '\n') ? 1 : 0;
    }

    if (!ctx->in_record && b->last_buf) {

        /* the end of a stream without a record (a Responses stream, one
         * not asked for): the bytes held back were the node's */
        if (held && ngx_http_llm_billing_out(r, NULL, held, ll) != NGX_OK) {
            return NGX_ERROR;
        }

        ctx->matched = 0;

    } else if (!ctx->in_record && ctx->matched > held) {
        /* this buffer's bytes that may begin the marker */
        last = b->last - (ctx->matched - held);
    }

    b->last = last;

    if (b->pos < b->last) {
        return ngx_http_llm_billing_out(r, b, 0, ll);
    }

    /* nothing left of it: taken (the proxy reuses it), its flags go on
     * in a buffer of no memory (nginx refuses empty memory buffers) */

    if (!b->last_buf && !b->flush && !b->last_in_chain) {
        return NGX_OK;
    }

    nb = ngx_calloc_buf(r->pool);
    if (nb == NULL) {
        return NGX_ERROR;
    }

    nb->last_buf = b->last_buf;
    nb->last_in_chain = b->last_in_chain;
    nb->flush = b->flush;
    nb->sync = !b->last_buf && !b->flush;

    return ngx_http_llm_billing_out(r, nb, 0, ll);
}


/* b onto the output, or (b NULL) the marker's first n bytes held back */

static ngx_int_t
ngx_http_llm_billing_out(ngx_http_request_t *r, ngx_buf_t *b, size_t n,
    ngx_chain_t ***ll)
{
    ngx_chain_t  *cl;

    if (b == NULL) {
        b = ngx_calloc_buf(r->pool);
        if (b == NULL) {
            return NGX_ERROR;
        }

        b->pos = ngx_http_llm_billing_marker;
        b->last = b->pos + n;
        b->memory = 1;
    }

    cl = ngx_alloc_chain_link(r->pool);
    if (cl == NULL) {
        return NGX_ERROR;
    }

    cl->buf = b;
    cl->next = NULL;
    **ll = cl;
    *ll = &cl->next;

    return NGX_OK;
}
