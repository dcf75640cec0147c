
/*
 * ngx_http_llm_error_filter.c -- ngx_http_llm_error_filter_module, the
 * second module of the .so: nginx's own error pages as the OpenAI error
 * object (ngx_http_llm_error.c) inside llm_api locations.
 *
 * Errors nginx finds before the llm module runs (a 401 of auth_basic or
 * auth_request, a 403 of deny, a 429 or 503 of limit_req or limit_conn,
 * a body over client_max_body_size answered 413 in the find-config phase,
 * a bad chunked body, a "return 4xx") go through
 * ngx_http_special_response_handler(), which sends a text/html page, or
 * no body for a status nginx has no page for; the header and body filters
 * here replace it with the JSON object, typed after the status, so
 * clients of an llm_api location never see HTML.  The headers nginx set
 * stay (WWW-Authenticate, add_header ... always).  An error_page the user
 * configured still wins: it redirects to its own location first, and a
 * page it sends is not replaced.  The filters join the chain only when
 * the configuration has an llm_api location, or is a router's
 * (llm_router_model): there every location is the API's front, and the
 * client sees the 413, 502 or 504 of the front as a node's error.
 */


#include "ngx_http_llm_module.h"


/* the JSON page of a request whose HTML page is replaced */
typedef struct {
    ngx_http_llm_json_t         page;
    ngx_uint_t                  sent;
} ngx_http_llm_error_page_t;


static ngx_int_t ngx_http_llm_error_filter_init(ngx_conf_t *cf);
static ngx_int_t ngx_http_llm_error_header_filter(ngx_http_request_t *r);
static const char *ngx_http_llm_error_message(ngx_http_request_t *r,
    ngx_uint_t status);
static ngx_uint_t ngx_http_llm_error_rejected(ngx_http_request_t *r,
    ngx_str_t *var);
static ngx_int_t ngx_http_llm_error_body_filter(ngx_http_request_t *r,
    ngx_chain_t *in);


static ngx_http_module_t  ngx_http_llm_error_filter_module_ctx = {
    NULL,                                  /* preconfiguration */
    ngx_http_llm_error_filter_init,        /* postconfiguration */

    NULL,                                  /* create main configuration */
    NULL,                                  /* init main configuration */

    NULL,                                  /* create server configuration */
    NULL,                                  /* merge server configuration */

    NULL,                                  /* create location configuration */
    NULL                                   /* merge location configuration */
};


ngx_module_t  ngx_http_llm_error_filter_module = {
    NGX_MODULE_V1,
    &ngx_http_llm_error_filter_module_ctx, /* module context */
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


static ngx_int_t
ngx_http_llm_error_filter_init(ngx_conf_t *cf)
{
    ngx_http_llm_main_conf_t  *lmcf;

    lmcf = ngx_http_conf_get_module_main_conf(cf, ngx_http_llm_module);

    if (!lmcf->api && lmcf->router == NULL) {
        return NGX_OK;
    }

    ngx_http_next_header_filter = ngx_http_top_header_filter;
    ngx_http_top_header_filter = ngx_http_llm_error_header_filter;

    ngx_http_next_body_filter = ngx_http_top_body_filter;
    ngx_http_top_body_filter = ngx_http_llm_error_body_filter;

    return NGX_OK;
}


static ngx_int_t
ngx_http_llm_error_header_filter(ngx_http_request_t *r)
{
    const char                 *msg;
    ngx_uint_t                  status;
    ngx_http_llm_loc_conf_t    *llcf;
    ngx_http_llm_main_conf_t   *lmcf;
    ngx_http_llm_error_page_t  *ep;

    status = r->headers_out.status;
    llcf = ngx_http_get_module_loc_conf(r, ngx_http_llm_module);
    lmcf = ngx_http_get_module_main_conf(r, ngx_http_llm_module);

    /*
     * Only nginx's special responses (err_status): its HTML page, or the
     * empty body of a status without one.  A body the user wrote
     * ("return 403 text", an error_page) has a type of its own, and the
     * module's own errors are JSON already.
     */

    if ((llcf->handler != NGX_HTTP_LLM_HANDLER_API && lmcf->router == NULL)
        || status < NGX_HTTP_BAD_REQUEST
        || r->err_status == 0
        || r != r->main
        || (r->headers_out.content_type.len != 0
            && (r->headers_out.content_type.len != sizeof("text/html") - 1
                || ngx_strncmp(r->headers_out.content_type.data, "text/html",
                               sizeof("text/html") - 1) != 0)))
    {
        return ngx_http_next_header_filter(r);
    }

    ep = ngx_pcalloc(r->pool, sizeof(ngx_http_llm_error_page_t));
    if (ep == NULL) {
        return NGX_ERROR;
    }

    msg = ngx_http_llm_error_message(r, status);

    ngx_http_llm_json_init(&ep->page, r->pool, 256);

    if (ngx_http_llm_error_json(&ep->page, status, NULL, NULL,
                                (u_char *) msg, ngx_strlen(msg))
        != NGX_OK)
    {
        return NGX_ERROR;
    }

    ngx_http_set_ctx(r, ep, ngx_http_llm_error_filter_module);

    r->headers_out.content_length_n = ep->page.pos - ep->page.start;
    ngx_str_set(&r->headers_out.content_type, "application/json");
    r->headers_out.content_type_len = r->headers_out.content_type.len;
    r->headers_out.content_type_lowcase = NULL;

    if (r->headers_out.content_length) {
        r->headers_out.content_length->hash = 0;
        r->headers_out.content_length = NULL;
    }

    return ngx_http_next_header_filter(r);
}


/*
 * The reason phrase, or what nginx refused the request for when it is
 * known: a rejection by limit_req or limit_conn (at limit_req_status or
 * limit_conn_status, whatever the status), and the 413 nginx makes itself.
 */

static const char *
ngx_http_llm_error_message(ngx_http_request_t *r, ngx_uint_t status)
{
    static ngx_str_t  limit_req = ngx_string("limit_req_status");
    static ngx_str_t  limit_conn = ngx_string("limit_conn_status");

    if (ngx_http_llm_error_rejected(r, &limit_req)) {
        return "Too many requests: over the request rate this server "
               "allows (nginx limit_req).";
    }

    if (ngx_http_llm_error_rejected(r, &limit_conn)) {
        return "Too many requests at once: over the concurrent requests "
               "this server allows (nginx limit_conn).";
    }

    if (status == NGX_HTTP_REQUEST_ENTITY_TOO_LARGE) {
        return "Request body is larger than client_max_body_size.";
    }

    return ngx_http_llm_error_reason(status);
}


/*
 * $limit_req_status and $limit_conn_status are "REJECTED" once the module
 * refused the request; looked up by name, they are simply not found in an
 * nginx built without those modules.
 */

static ngx_uint_t
ngx_http_llm_error_rejected(ngx_http_request_t *r, ngx_str_t *var)
{
    ngx_http_variable_value_t  *vv;

    vv = ngx_http_get_variable(r, var, ngx_hash_key(var->data, var->len));

    return vv != NULL
           && !vv->not_found
           && vv->len == sizeof("REJECTED") - 1
           && ngx_strncmp(vv->data, "REJECTED", sizeof("REJECTED") - 1)
              == 0;
}


static ngx_int_t
ngx_http_llm_error_body_filter(ngx_http_request_t *r, ngx_chain_t *in)
{
    ngx_buf_t                  *b;
    ngx_chain_t                 out, *cl;
    ngx_http_llm_error_page_t  *ep;

    ep = ngx_http_get_module_ctx(r, ngx_http_llm_error_filter_module);

    if (ep == NULL || in == NULL) {
        return ngx_http_next_body_filter(r, in);
    }

    /* the HTML page is dropped: its buffers count as sent */
    for (cl = in; cl; cl = cl->next) {
        cl->buf->pos = cl->buf->last;
    }

    if (ep->sent) {
        return NGX_OK;
    }

    ep->sent = 1;

    b = ngx_calloc_buf(r->pool);
    if (b == NULL) {
        return NGX_ERROR;
    }

    b->pos = ep->page.start;
    b->last = ep->page.pos;
    b->memory = 1;
    b->last_buf = 1;
    b->last_in_chain = 1;

    out.buf = b;
    out.next = NULL;

    return ngx_http_next_body_filter(r, &out);
}
