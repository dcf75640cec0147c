
/*
 * ngx_http_llm_health.c -- llm_health: 200 with an empty body when the
 * engine serves (vLLM's /health), 503 with the reason while the model
 * loads or after it failed to load.
 */


#include "ngx_http_llm_module.h"


/*
 * What /health and /metrics both ask first: a GET (or HEAD) to a worker
 * whose engine is loaded.  NGX_DECLINED when it is (the handler goes on),
 * else what the handler returns: the answer sent, 405, or 503 with the
 * reason while loading or after a failed load, like the API.
 */

ngx_int_t
ngx_http_llm_get_ready(ngx_http_request_t *r)
{
    ngx_int_t  rc;

    rc = ngx_http_discard_request_body(r);
    if (rc != NGX_OK) {
        return rc;
    }

    if (!(r->method & (NGX_HTTP_GET|NGX_HTTP_HEAD))) {
        return ngx_http_llm_send_not_allowed(r, "GET, HEAD",
                                             "Method Not Allowed: use GET "
                                             "for \"%V\"", &r->uri);
    }

    if (!ngx_http_llm_worker.ready) {
        return ngx_http_llm_engine_unavailable(r);
    }

    return NGX_DECLINED;
}


ngx_int_t
ngx_http_llm_health_handler(ngx_http_request_t *r)
{
    ngx_int_t  rc;

    rc = ngx_http_llm_get_ready(r);
    if (rc != NGX_DECLINED) {
        return rc;
    }

    r->headers_out.status = NGX_HTTP_OK;
    r->headers_out.content_length_n = 0;

    rc = ngx_http_send_header(r);

    if (rc == NGX_ERROR || rc > NGX_OK || r->header_only) {
        return rc;
    }

    return ngx_http_send_special(r, NGX_HTTP_LAST);
}
