
/*
 * ngx_http_llm_error.c -- the OpenAI error object, and sending it as the
 * whole response:
 *
 *   {"error":{"message":"...","type":"BadRequestError","param":null,
 *             "code":400}}
 *
 * Errors the module finds itself are sent with ngx_http_llm_send_error();
 * those nginx finds before the module runs are turned into the same object
 * by ngx_http_llm_error_filter.c.
 */


#include "ngx_http_llm_module.h"


static ngx_int_t ngx_http_llm_error_send(ngx_http_request_t *r,
    ngx_uint_t status, const char *type, const char *param,
    const char *allow, const char *fmt, va_list args);


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


/*
 * Sends the error object as the whole response.  Returns what the caller
 * passes to ngx_http_finalize_request().
 */

ngx_int_t
ngx_http_llm_send_error(ngx_http_request_t *r, ngx_uint_t status,
    const char *type, const char *param, const char *fmt, ...)
{
    ngx_int_t  rc;
    va_list    args;

    va_start(args, fmt);
    rc = ngx_http_llm_error_send(r, status, type, param, NULL, fmt, args);
    va_end(args);

    return rc;
}


/* a 405, with the methods the resource allows */

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
    ngx_table_elt_t      *h;
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

    if (allow) {
        /* RFC 9110: a 405 lists the methods the resource allows */
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
