
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


typedef struct {
    ngx_uint_t                  status;
    const char                 *type;
    const char                 *reason;
} ngx_http_llm_error_status_t;


static const ngx_http_llm_error_status_t *ngx_http_llm_error_status(
    ngx_uint_t status);
static ngx_int_t ngx_http_llm_error_send(ngx_http_request_t *r,
    ngx_uint_t status, const char *type, const char *param,
    const char *allow, const char *fmt, va_list args);


/*
 * The statuses nginx has a reason phrase for, and vLLM's 422: the type of
 * each and its reason phrase, the message of nginx's own error pages
 * (ngx_http_llm_error_filter.c).  A status the openai SDKs raise a class
 * of their own for (400, 401, 403, 404, 409, 422, 429, 500) is typed with
 * that class's name, as vLLM names the errors it raises; so are 501
 * (vLLM's NotImplementedError) and 503 (not ready, or overloaded).  The
 * others are typed with their reason phrase (type NULL), as vLLM types the
 * errors of its HTTP layer: Python's HTTPStatus phrase, which nginx's
 * status line words differently at times ("405 Not Allowed").
 */

static const ngx_http_llm_error_status_t  ngx_http_llm_error_statuses[] = {
    { NGX_HTTP_BAD_REQUEST, "BadRequestError", "Bad Request" },
    { NGX_HTTP_UNAUTHORIZED, "AuthenticationError", "Unauthorized" },
    { 402, NULL, "Payment Required" },
    { NGX_HTTP_FORBIDDEN, "PermissionDeniedError", "Forbidden" },
    { NGX_HTTP_NOT_FOUND, "NotFoundError", "Not Found" },
    { NGX_HTTP_NOT_ALLOWED, NULL, "Method Not Allowed" },
    { 406, NULL, "Not Acceptable" },
    { NGX_HTTP_REQUEST_TIME_OUT, NULL, "Request Timeout" },
    { NGX_HTTP_CONFLICT, "ConflictError", "Conflict" },
    { 410, NULL, "Gone" },
    { NGX_HTTP_LENGTH_REQUIRED, NULL, "Length Required" },
    { NGX_HTTP_PRECONDITION_FAILED, NULL, "Precondition Failed" },
    { NGX_HTTP_REQUEST_ENTITY_TOO_LARGE, NULL, "Request Entity Too Large" },
    { NGX_HTTP_REQUEST_URI_TOO_LARGE, NULL, "Request-URI Too Long" },
    { NGX_HTTP_UNSUPPORTED_MEDIA_TYPE, NULL, "Unsupported Media Type" },
    { NGX_HTTP_RANGE_NOT_SATISFIABLE, NULL,
      "Requested Range Not Satisfiable" },
    { NGX_HTTP_MISDIRECTED_REQUEST, NULL, "Misdirected Request" },
    { 422, "UnprocessableEntityError", "Unprocessable Entity" },
    { NGX_HTTP_TOO_MANY_REQUESTS, "RateLimitError", "Too Many Requests" },
    { NGX_HTTP_INTERNAL_SERVER_ERROR, "InternalServerError",
      "Internal Server Error" },
    { NGX_HTTP_NOT_IMPLEMENTED, "NotImplementedError", "Not Implemented" },
    { NGX_HTTP_BAD_GATEWAY, NULL, "Bad Gateway" },
    { NGX_HTTP_SERVICE_UNAVAILABLE, "ServiceUnavailableError",
      "Service Unavailable" },
    { NGX_HTTP_GATEWAY_TIME_OUT, NULL, "Gateway Timeout" },
    { NGX_HTTP_VERSION_NOT_SUPPORTED, NULL, "HTTP Version Not Supported" },
    { NGX_HTTP_INSUFFICIENT_STORAGE, NULL, "Insufficient Storage" }
};

/* statuses not in the table: the class of their range (RFC 9110) */
static const ngx_http_llm_error_status_t  ngx_http_llm_error_client =
    { 0, NULL, "Client Error" };

static const ngx_http_llm_error_status_t  ngx_http_llm_error_server =
    { 0, NULL, "Server Error" };


/* the type of an error object: the status's class name, or its phrase */

const char *
ngx_http_llm_error_type(ngx_uint_t status)
{
    const ngx_http_llm_error_status_t  *es;

    es = ngx_http_llm_error_status(status);

    if (es->type) {
        return es->type;
    }

    return es->reason;
}


const char *
ngx_http_llm_error_reason(ngx_uint_t status)
{
    return ngx_http_llm_error_status(status)->reason;
}


static const ngx_http_llm_error_status_t *
ngx_http_llm_error_status(ngx_uint_t status)
{
    ngx_uint_t  i;

    for (i = 0; i < sizeof(ngx_http_llm_error_statuses)
                    / sizeof(ngx_http_llm_error_statuses[0]); i++)
    {
        if (ngx_http_llm_error_statuses[i].status == status) {
            return &ngx_http_llm_error_statuses[i];
        }
    }

    return status >= NGX_HTTP_INTERNAL_SERVER_ERROR
           ? &ngx_http_llm_error_server : &ngx_http_llm_error_client;
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
