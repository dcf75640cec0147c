
/*
 * ngx_http_llm_id.c -- the random ids of responses, their output items and
 * model permissions: a prefix and 32 hex digits, like vLLM's
 * ("chatcmpl-", "cmpl-", "resp_", "msg_", "modelperm-").
 */


#include "ngx_http_llm_module.h"


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
