
/*
 * ngx_http_llm_error.c -- the OpenAI error object, and a filter that puts it
 * in place of nginx's own HTML error pages inside llm_api locations.
 *
 *   {"error":{"message":"...","type":"BadRequestError","param":null,
 *             "code":400}}
 *
 * Errors the module finds itself are sent with ngx_http_llm_send_error().
 * Errors nginx finds before the module runs (a body over
 * client_max_body_size is answered 413 in the find-config phase, a chunked
 * body in the body filter) go through ngx_http_special_response_handler(),
 * which sends text/html; the header and body filters here replace that
 * page with the JSON object, so clients of an llm_api location never see
 * HTML.  An error_page the user configured still wins: it redirects to its
 * own location first.
 */


#include "ngx_http_llm_module.h"


static ngx_int_t ngx_http_llm_error_header_filter(ngx_http_request_t *r);
static ngx_int_t ngx_http_llm_error_body_filter(ngx_http_request_t *r,
    ngx_chain_t *in);


static ngx_http_output_header_filter_pt  ngx_http_next_header_filter;
static ngx_http_output_body_filter_pt    ngx_http_next_body_filter;


const char *
ngx_http_llm_error_type(ngx_uint_t status)
{
    /*
     * vLLM names errors it raises after their exception classes
     * ("BadRequestError", "NotFoundError") and errors of the HTTP layer
     * after the reason phrase ("Method Not Allowed"); so do we.
     */

    switch (status) {
    case NGX_HTTP_BAD_REQUEST:
        return "BadRequestError";
    case NGX_HTTP_NOT_FOUND:
        return "NotFoundError";
    case NGX_HTTP_NOT_ALLOWED:
        return "Method Not Allowed";
    case NGX_HTTP_REQUEST_TIME_OUT:
        return "Request Timeout";
    case NGX_HTTP_REQUEST_ENTITY_TOO_LARGE:
        return "Request Entity Too Large";
    case NGX_HTTP_REQUEST_URI_TOO_LARGE:
        return "Request-URI Too Large";
    case NGX_HTTP_UNSUPPORTED_MEDIA_TYPE:
        return "Unsupported Media Type";
    case 422:
        return "UnprocessableEntityError";
    case NGX_HTTP_NOT_IMPLEMENTED:
        return "NotImplementedError";
    case NGX_HTTP_SERVICE_UNAVAILABLE:
        return "ServiceUnavailableError";
    case NGX_HTTP_INTERNAL_SERVER_ERROR:
        return "InternalServerError";
    default:
        return status >= 500 ? "InternalServerError" : "BadRequestError";
    }
}


ngx_int_t
ngx_http_llm_error_json(ngx_http_llm_json_t *j, ngx_uint_t status,
    const char *type, const char *param, const u_char *msg, size_t len)
{
    if (type == NULL) {
        type = ngx_http_llm_error_type(status);
    }

    ngx_http_llm_json_lit(j, "{\"error\":{\"message\":");
    ngx_http_llm_json_str(j, msg, len);
    ngx_http_llm_json_lit(j, ",\"type\":");
    ngx_http_llm_json_cstr(j, type);
    ngx_http_llm_json_lit(j, ",\"param\":");

    if (param && param[0]) {
        ngx_http_llm_json_cstr(j, param);

    } else {
        ngx_http_llm_json_lit(j, "null");
    }

    ngx_http_llm_json_lit(j, ",\"code\":");
    ngx_http_llm_json_int(j, status);
    ngx_http_llm_json_lit(j, "}}");

    return j->failed ? NGX_ERROR : NGX_OK;
}


static ngx_int_t ngx_http_llm_error_send(ngx_http_request_t *r,
    ngx_uint_t status, const char *type, const char *param,
    const char *allow, const char *fmt, va_list args);


/*
 * Sends the error object as the whole response.  Returns what the caller
 * passes to ngx_http_finalize_request().  A 405 lists the methods of the
 * POST routes, or of the GET ones when a GET was refused.
 */

ngx_int_t
ngx_http_llm_send_error(ngx_http_request_t *r, ngx_uint_t status,
    const char *type, const char *param, const char *fmt, ...)
{
    ngx_int_t    rc;
    va_list      args;
    const char  *allow;

    allow = (r->method & (NGX_HTTP_GET|NGX_HTTP_HEAD)) ? "POST" : "GET, HEAD";

    va_start(args, fmt);
    rc = ngx_http_llm_error_send(r, status, type, param, allow, fmt, args);
    va_end(args);

    return rc;
}


/* a 405 for a route whose methods are neither of the above */

ngx_int_t
ngx_http_llm_send_not_allowed(ngx_http_request_t *r, const char *allow,
    const char *fmt, ...)
{
    ngx_int_t  rc;
    va_list    args;

    va_start(args, fmt);
    rc = ngx_http_llm_error_send(r, NGX_HTTP_NOT_ALLOWED, NULL, NULL, allow,
                                 fmt, args);
    va_end(args);

    return rc;
}


static ngx_int_t
ngx_http_llm_error_send(ngx_http_request_t *r, ngx_uint_t status,
    const char *type, const char *param, const char *allow, const char *fmt,
    va_list args)
{
    u_char               *p, msg[LLM_ERR_LEN];
    ngx_uint_t            level;
    ngx_http_llm_json_t   j;

    p = ngx_vslprintf(msg, msg + sizeof(msg), fmt, args);

    /*
     * Client faults at info, server faults at error; a 503 is at info
     * too: the reason (loading, or why the model failed) is logged once
     * when it happens, not for every request that meets it.
     */
    level = (status >= NGX_HTTP_INTERNAL_SERVER_ERROR
             && status != NGX_HTTP_SERVICE_UNAVAILABLE)
            ? NGX_LOG_ERR : NGX_LOG_INFO;

    ngx_log_error(level, r->connection->log, 0, "llm: %ui %*s", status,
                  (size_t) (p - msg), msg);

    ngx_http_llm_json_init(&j, r->pool, 256 + (p - msg));

    if (ngx_http_llm_error_json(&j, status, type, param, msg, p - msg)
        != NGX_OK)
    {
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }

    if (status == NGX_HTTP_NOT_ALLOWED) {
        /* RFC 9110: a 405 lists the methods the resource allows */
        ngx_table_elt_t  *h;

        h = ngx_list_push(&r->headers_out.headers);
        if (h == NULL) {
            return NGX_HTTP_INTERNAL_SERVER_ERROR;
        }

        h->hash = 1;
        ngx_str_set(&h->key, "Allow");
        h->value.data = (u_char *) allow;
        h->value.len = ngx_strlen(allow);
    }

    return ngx_http_llm_send_json(r, status, &j);
}


/* the filter for nginx's own error pages */

ngx_int_t
ngx_http_llm_error_filter_init(ngx_conf_t *cf)
{
    ngx_http_next_header_filter = ngx_http_top_header_filter;
    ngx_http_top_header_filter = ngx_http_llm_error_header_filter;

    ngx_http_next_body_filter = ngx_http_top_body_filter;
    ngx_http_top_body_filter = ngx_http_llm_error_body_filter;

    return NGX_OK;
}


static ngx_int_t
ngx_http_llm_error_header_filter(ngx_http_request_t *r)
{
    char                     *msg;
    ngx_uint_t                status;
    ngx_http_llm_ctx_t       *ctx;
    ngx_http_llm_loc_conf_t  *llcf;

    status = r->headers_out.status;
    llcf = ngx_http_get_module_loc_conf(r, ngx_http_llm_module);

    /*
     * Only nginx's special responses: they are the only text/html bodies
     * with an error status that an llm_api location produces.
     */

    if (llcf->handler != NGX_HTTP_LLM_HANDLER_API
        || status < NGX_HTTP_BAD_REQUEST
        || r != r->main
        || r->headers_out.content_type.len != sizeof("text/html") - 1
        || ngx_strncmp(r->headers_out.content_type.data, "text/html",
                       sizeof("text/html") - 1) != 0)
    {
        return ngx_http_next_header_filter(r);
    }

    /* nginx clears module contexts before some special responses */
    ctx = ngx_http_get_module_ctx(r, ngx_http_llm_module);

    if (ctx == NULL) {
        ctx = ngx_pcalloc(r->pool, sizeof(ngx_http_llm_ctx_t));
        if (ctx == NULL) {
            return NGX_ERROR;
        }

        ctx->request = r;
        ngx_http_set_ctx(r, ctx, ngx_http_llm_module);
    }

    ctx->error_page = ngx_palloc(r->pool, sizeof(ngx_http_llm_json_t));
    if (ctx->error_page == NULL) {
        return NGX_ERROR;
    }

    msg = (char *) ngx_http_llm_error_type(status);

    if (status == NGX_HTTP_REQUEST_ENTITY_TOO_LARGE) {
        msg = "Request body is larger than client_max_body_size.";
    }

    ngx_http_llm_json_init(ctx->error_page, r->pool, 256);

    if (ngx_http_llm_error_json(ctx->error_page, status, NULL, NULL,
                                (u_char *) msg, ngx_strlen(msg))
        != NGX_OK)
    {
        return NGX_ERROR;
    }

    r->headers_out.content_length_n = ctx->error_page->pos
                                      - ctx->error_page->start;
    ngx_str_set(&r->headers_out.content_type, "application/json");
    r->headers_out.content_type_len = r->headers_out.content_type.len;
    r->headers_out.content_type_lowcase = NULL;

    if (r->headers_out.content_length) {
        r->headers_out.content_length->hash = 0;
        r->headers_out.content_length = NULL;
    }

    return ngx_http_next_header_filter(r);
}


static ngx_int_t
ngx_http_llm_error_body_filter(ngx_http_request_t *r, ngx_chain_t *in)
{
    ngx_buf_t           *b;
    ngx_chain_t          out, *cl;
    ngx_http_llm_ctx_t  *ctx;

    ctx = ngx_http_get_module_ctx(r, ngx_http_llm_module);

    if (ctx == NULL || ctx->error_page == NULL || in == NULL) {
        return ngx_http_next_body_filter(r, in);
    }

    /* the HTML page is dropped: its buffers count as sent */
    for (cl = in; cl; cl = cl->next) {
        cl->buf->pos = cl->buf->last;
    }

    if (ctx->error_page_sent) {
        return NGX_OK;
    }

    ctx->error_page_sent = 1;

    b = ngx_calloc_buf(r->pool);
    if (b == NULL) {
        return NGX_ERROR;
    }

    b->pos = ctx->error_page->start;
    b->last = ctx->error_page->pos;
    b->memory = 1;
    b->last_buf = 1;
    b->last_in_chain = 1;

    out.buf = b;
    out.next = NULL;

    return ngx_http_next_body_filter(r, &out);
}
