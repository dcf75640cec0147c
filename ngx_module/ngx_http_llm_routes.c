
/*
 * ngx_http_llm_routes.c -- the endpoints of llm_api, one row each: how the
 * URI ends, the methods, and the functions that answer (module.h).
 *
 * The endpoint is chosen by how the URI ends, so "location /v1/" and
 * "location = /completions" both work.  Rows are tried in order:
 * "/chat/completions" before "/completions", "/detokenize" before
 * "/tokenize", the routes of one name before those with an id.
 */


#include "ngx_http_llm_module.h"


static ngx_uint_t ngx_http_llm_route_match(ngx_http_request_t *r,
    const ngx_http_llm_route_t *rt, ngx_str_t *id);


static const ngx_http_llm_route_t  ngx_http_llm_routes[] = {

    { ngx_string("/chat/completions"), ngx_null_string, 0,
      NGX_HTTP_POST, "POST", "POST",
      NULL, ngx_http_llm_chat_parse, ngx_http_llm_generate,
      ngx_http_llm_chat_chunk, ngx_http_llm_chat_body, "chatcmpl-" },

    { ngx_string("/completions"), ngx_null_string, 0,
      NGX_HTTP_POST, "POST", "POST",
      NULL, ngx_http_llm_completions_parse, ngx_http_llm_generate,
      ngx_http_llm_completions_chunk, ngx_http_llm_completions_body,
      "cmpl-" },

    { ngx_string("/responses"), ngx_null_string, 0,
      NGX_HTTP_POST, "POST", "POST",
      NULL, ngx_http_llm_responses_parse, ngx_http_llm_responses_start,
      ngx_http_llm_responses_chunk, ngx_http_llm_responses_body, "resp_" },

    { ngx_string("/detokenize"), ngx_null_string, 0,
      NGX_HTTP_POST, "POST", "POST",
      NULL, ngx_http_llm_detokenize_parse, ngx_http_llm_detokenize_send,
      NULL, NULL, NULL },

    { ngx_string("/tokenize"), ngx_null_string, 0,
      NGX_HTTP_POST, "POST", "POST",
      NULL, ngx_http_llm_tokenize_parse, ngx_http_llm_tokenize_send,
      NULL, NULL, NULL },

    { ngx_string("/models"), ngx_null_string, 0,
      NGX_HTTP_GET|NGX_HTTP_HEAD, "GET, HEAD", "GET",
      ngx_http_llm_models_list, NULL, NULL, NULL, NULL, NULL },

    /* model ids may hold slashes ("org/name") */
    { ngx_null_string, ngx_string("/models/"), 1,
      NGX_HTTP_GET|NGX_HTTP_HEAD, "GET, HEAD", "GET",
      ngx_http_llm_models_card, NULL, NULL, NULL, NULL, NULL },

    /* response ids are one segment ("resp_..."); OpenAI's
     * ".../input_items" is not served */
    { ngx_null_string, ngx_string("/responses/"), 0,
      NGX_HTTP_GET|NGX_HTTP_HEAD|NGX_HTTP_DELETE, "GET, HEAD, DELETE",
      "GET or DELETE",
      ngx_http_llm_response_get, NULL, NULL, NULL, NULL, NULL },

    { ngx_string("/cancel"), ngx_string("/responses/"), 0,
      NGX_HTTP_POST, "POST", "POST",
      ngx_http_llm_response_cancel, NULL, NULL, NULL, NULL, NULL },
};


/* the route of r, with its id in *id; NULL when none matches */

const ngx_http_llm_route_t *
ngx_http_llm_route_find(ngx_http_request_t *r, ngx_str_t *id)
{
    ngx_uint_t  i;

    for (i = 0; i < sizeof(ngx_http_llm_routes)
                    / sizeof(ngx_http_llm_routes[0]); i++)
    {
        if (ngx_http_llm_route_match(r, &ngx_http_llm_routes[i], id)) {
            return &ngx_http_llm_routes[i];
        }
    }

    return NULL;
}


/*
 * The URI ends with the suffix; with id_after, before the suffix comes
 * the first "id_after" (in any case) and then a non-empty id.
 */

static ngx_uint_t
ngx_http_llm_route_match(ngx_http_request_t *r,
    const ngx_http_llm_route_t *rt, ngx_str_t *id)
{
    u_char  *p, *last;

    if (r->uri.len < rt->suffix.len) {
        return 0;
    }

    last = r->uri.data + r->uri.len - rt->suffix.len;

    if (rt->suffix.len
        && ngx_strncmp(last, rt->suffix.data, rt->suffix.len) != 0)
    {
        return 0;
    }

    if (rt->id_after.len == 0) {
        id->len = 0;
        return 1;
    }

    p = ngx_strlcasestrn(r->uri.data, last, rt->id_after.data,
                         rt->id_after.len - 1);

    if (p == NULL || p + rt->id_after.len >= last) {
        return 0;
    }

    p += rt->id_after.len;

    if (!rt->id_slashes && ngx_strlchr(p, last, '/') != NULL) {
        return 0;
    }

    id->data = p;
    id->len = last - p;

    return 1;
}
