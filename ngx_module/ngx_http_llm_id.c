
/*
 * ngx_http_llm_id.c -- the ids of responses, their output items and model
 * permissions: a prefix and 32 hex digits, like vLLM's ("chatcmpl-",
 * "cmpl-", "resp_", "msg_", "modelperm-").
 *
 * The 128 bits come from the kernel's CSPRNG (llm_random_hex()), never
 * from ngx_random(): libc's random() is seeded from the worker's pid and
 * start time, so one id would give away the ones before and after it, and
 * a response id is all it takes to read or delete a stored response.
 */


#include "ngx_http_llm_module.h"


#define NGX_HTTP_LLM_ID_BYTES  16


ngx_int_t
ngx_http_llm_random_id(ngx_pool_t *pool, ngx_str_t *id, const char *prefix)
{
    u_char  *p;
    size_t   len;

    len = ngx_strlen(prefix);

    /* and the NUL that llm_random_hex() ends with */
    p = ngx_pnalloc(pool, len + 2 * NGX_HTTP_LLM_ID_BYTES + 1);
    if (p == NULL) {
        return NGX_ERROR;
    }

    id->data = p;
    p = ngx_cpymem(p, prefix, len);
    llm_random_hex((char *) p, NGX_HTTP_LLM_ID_BYTES);

    id->len = len + 2 * NGX_HTTP_LLM_ID_BYTES;

    return NGX_OK;
}
