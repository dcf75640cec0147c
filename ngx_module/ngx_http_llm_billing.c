
/*
 * ngx_http_llm_billing.c -- billing across a router tier.
 *
 * A node puts its billing record on a non-streamed chat, completions or
 * Responses response, in the header "LLM-Billing": the id, the counts, the finish
 * reason and the four timestamps the metrics come from (seconds on the
 * node's clock, exact as %.17g), the model last.  A router
 * (llm_router_model) reads it back into a ctx of its own request, so its
 * $llm_* variables are the node's, computed by the same functions: the
 * front's and the node's access-log lines of a request join on
 * $llm_request_id and agree on every count and time (not on the
 * reasoning parser's: the record has no phases).  The header reaches the
 * client too; it says what the body's usage and metrics say.
 */


#include "ngx_http_llm_module.h"


static ngx_table_elt_t *ngx_http_llm_billing_find(ngx_list_t *headers);
static double ngx_http_llm_billing_time(u_char *v, u_char *end);


static ngx_str_t  ngx_http_llm_billing_name = ngx_string("LLM-Billing");


/* the record of a finished request: "id=... prompt=... model=..." */

static u_char *
ngx_http_llm_billing_print(ngx_pool_t *pool, ngx_http_llm_ctx_t *ctx,
    size_t *len)
{
    int      n;
    u_char  *p;
    size_t   size;

    size = sizeof("id= prompt= cached= completion= finish= log_stats= "
                  "queued= scheduled= first= last= model=") - 1
           + ctx->id.len + 3 * NGX_INT_T_LEN + 16 + 1 + 4 * 32
           + ctx->model.len + 1;

    p = ngx_pnalloc(pool, size);
    if (p == NULL) {
        return NULL;
    }

    n = snprintf((char *) p, size,
                 "id=%.*s prompt=%d cached=%d completion=%d finish=%s "
                 "log_stats=%d queued=%.17g scheduled=%.17g first=%.17g "
                 "last=%.17g model=%.*s",
                 (int) ctx->id.len, ctx->id.data, ctx->stats.prompt_tokens,
                 ctx->stats.cached_tokens, ctx->stats.completion_tokens,
                 ctx->finish == LLM_FINISH_NONE
                 ? "-" : llm_finish_reason_str(ctx->finish),
                 (int) ctx->log_stats,
                 ctx->stats.queued, ctx->stats.scheduled,
                 ctx->stats.first_token, ctx->stats.last_token,
                 (int) ctx->model.len, ctx->model.data);

    if (n < 0 || (size_t) n >= size) {
        return NULL;
    }

    *len = n;

    return p;
}


/* the node: the record in a header, before a body is sent */

ngx_int_t
ngx_http_llm_billing_header(ngx_http_request_t *r, ngx_http_llm_ctx_t *ctx)
{
    ngx_table_elt_t  *h;

    h = ngx_list_push(&r->headers_out.headers);
    if (h == NULL) {
        return NGX_ERROR;
    }

    h->hash = 1;
    h->key = ngx_http_llm_billing_name;
    h->value.data = ngx_http_llm_billing_print(r->pool, ctx, &h->value.len);

    return h->value.data ? NGX_OK : NGX_ERROR;
}


/* the node: whether the request asks for the record of a stream (a
 * router's "LLM-Billing: stream") */

ngx_uint_t
ngx_http_llm_billing_wanted(ngx_http_request_t *r)
{
    return ngx_http_llm_billing_find(&r->headers_in.headers) != NULL;
}


/* the node: the record as a stream's last event, an SSE comment after
 * [DONE] or a Responses stream's last event (clients ignore comments; a
 * router takes it out) */

void
ngx_http_llm_billing_event(ngx_http_llm_json_t *j, ngx_http_llm_ctx_t *ctx)
{
    u_char  *p;
    size_t   len;

    p = ngx_http_llm_billing_print(j->pool, ctx, &len);
    if (p == NULL) {
        j->failed = 1;
        return;
    }

    ngx_http_llm_json_lit(j, NGX_HTTP_LLM_BILLING_EVENT);
    ngx_http_llm_json_raw(j, p, len);
    ngx_http_llm_json_lit(j, "\n\n");
}


static ngx_table_elt_t *
ngx_http_llm_billing_find(ngx_list_t *headers)
{
    ngx_uint_t        i;
    ngx_list_part_t  *part;
    ngx_table_elt_t  *h;

    part = &headers->part;
    h = part->elts;

    for (i = 0; /* void */; i++) {

        if (i >= part->nelts) {
            if (part->next == NULL) {
                return NULL;
            }

            part = part->next;
            h = part->elts;
            i = 0;
        }

        if (h[i].key.len == ngx_http_llm_billing_name.len
            && ngx_strncasecmp(h[i].key.data, ngx_http_llm_billing_name.data,
                               h[i].key.len) == 0)
        {
            return &h[i];
        }
    }
}


/*
 * The router: a ctx made from the node's record in its response header,
 * once per request (the variables ask for it); NULL where there is none
 * (no router model, no response from a node, an error).
 */

ngx_http_llm_ctx_t *
ngx_http_llm_billing_ctx(ngx_http_request_t *r)
{
    ngx_table_elt_t           *h;
    ngx_http_llm_main_conf_t  *lmcf;

    lmcf = ngx_http_get_module_main_conf(r, ngx_http_llm_module);

    if (lmcf->router == NULL || r->upstream == NULL) {
        return NULL;
    }

    h = ngx_http_llm_billing_find(&r->upstream->headers_in.headers);
    if (h == NULL) {
        return NULL;
    }

    return ngx_http_llm_billing_parse(r, h->value.data, h->value.len);
}


/* the record "key=value ..." (model= is the rest) into the request's ctx */

ngx_http_llm_ctx_t *
ngx_http_llm_billing_parse(ngx_http_request_t *r, u_char *s, size_t len)
{
    u_char              *v, *end, *last;
    size_t               klen;
    ngx_uint_t           f;
    ngx_http_llm_ctx_t  *ctx;

    ctx = ngx_pcalloc(r->pool, sizeof(ngx_http_llm_ctx_t));
    if (ctx == NULL) {
        return NULL;
    }

    /* no reasoning parser: the record has no phases */
    ctx->job = ngx_pcalloc(r->pool, sizeof(ngx_http_llm_job_t));
    if (ctx->job == NULL) {
        return NULL;
    }

    last = s + len;

    while (s < last) {
        v = ngx_strlchr(s, last, '=');
        if (v == NULL) {
            return NULL;
        }

        klen = v++ - s;

        if (klen == 5 && ngx_strncmp(s, "model", 5) == 0) {
            ctx->model.data = v;
            ctx->model.len = last - v;
            break;
        }

        end = ngx_strlchr(v, last, ' ');
        end = end ? end : last;

#define NGX_HTTP_LLM_FIELD(name)                                              \
        (klen == sizeof(name) - 1 && ngx_strncmp(s, name, klen) == 0)

        if (NGX_HTTP_LLM_FIELD("id")) {
            ctx->id.data = v;
            ctx->id.len = end - v;

        } else if (NGX_HTTP_LLM_FIELD("prompt")) {
            ctx->stats.prompt_tokens = ngx_atoi(v, end - v);

        } else if (NGX_HTTP_LLM_FIELD("cached")) {
            ctx->stats.cached_tokens = ngx_atoi(v, end - v);

        } else if (NGX_HTTP_LLM_FIELD("completion")) {
            ctx->stats.completion_tokens = ngx_atoi(v, end - v);

        } else if (NGX_HTTP_LLM_FIELD("log_stats")) {
            ctx->log_stats = (*v == '1');

        } else if (NGX_HTTP_LLM_FIELD("finish")) {
            for (f = LLM_FINISH_STOP; f <= LLM_FINISH_ERROR; f++) {
                if (ngx_strncmp(v, llm_finish_reason_str(f), end - v) == 0
                    && llm_finish_reason_str(f)[end - v] == '\0')
                {
                    ctx->finish = f;
                }
            }

        } else if (NGX_HTTP_LLM_FIELD("queued")) {
            ctx->stats.queued = ngx_http_llm_billing_time(v, end);

        } else if (NGX_HTTP_LLM_FIELD("scheduled")) {
            ctx->stats.scheduled = ngx_http_llm_billing_time(v, end);

        } else if (NGX_HTTP_LLM_FIELD("first")) {
            ctx->stats.first_token = ngx_http_llm_billing_time(v, end);

        } else if (NGX_HTTP_LLM_FIELD("last")) {
            ctx->stats.last_token = ngx_http_llm_billing_time(v, end);
        }

#undef NGX_HTTP_LLM_FIELD

        s = end + 1;
    }

    if (ctx->id.len == 0
        || ctx->stats.prompt_tokens < 0
        || ctx->stats.cached_tokens < 0
        || ctx->stats.completion_tokens < 0)
    {
        return NULL;
    }

    ctx->request = r;
    ctx->submitted = 1;

    ngx_http_set_ctx(r, ctx, ngx_http_llm_module);

    return ctx;
}


/* a time of the record; the text is not NUL-terminated in a stream */

static double
ngx_http_llm_billing_time(u_char *v, u_char *end)
{
    u_char  buf[64];

    if (end - v >= (ssize_t) sizeof(buf)) {
        return 0;
    }

    *ngx_cpymem(buf, v, end - v) = '\0';

    return strtod((char *) buf, NULL);
}
