
/*
 * ngx_http_llm_models.c -- GET .../models and GET .../models/{id}: the
 * served model as vLLM's ModelList / ModelCard.
 */


#include "ngx_http_llm_module.h"


static void ngx_http_llm_model_card(ngx_http_request_t *r,
    ngx_http_llm_json_t *j);


ngx_int_t
ngx_http_llm_models_handler(ngx_http_request_t *r, ngx_http_llm_route_e route)
{
    u_char                    *p, *last;
    ngx_str_t                  id;
    ngx_http_llm_json_t        j;
    ngx_http_llm_main_conf_t  *lmcf;

    if (ngx_http_llm_worker.engine == NULL) {
        return ngx_http_llm_engine_unavailable(r);
    }

    lmcf = ngx_http_get_module_main_conf(r, ngx_http_llm_module);

    ngx_http_llm_json_init(&j, r->pool, 1024);

    if (route == NGX_HTTP_LLM_ROUTE_MODEL) {
        last = r->uri.data + r->uri.len;
        p = ngx_strlcasestrn(r->uri.data, last, (u_char *) "/models/", 8 - 1);

        id.data = p + 8;
        id.len = last - id.data;

        if (id.len != lmcf->served_model_name.len
            || ngx_strncmp(id.data, lmcf->served_model_name.data, id.len)
               != 0)
        {
            return ngx_http_llm_send_error(r, NGX_HTTP_NOT_FOUND,
                                           "NotFoundError", "model",
                                           "The model `%V` does not exist.",
                                           &id);
        }

        ngx_http_llm_model_card(r, &j);

    } else {
        ngx_http_llm_json_lit(&j, "{\"object\":\"list\",\"data\":[");
        ngx_http_llm_model_card(r, &j);
        ngx_http_llm_json_lit(&j, "]}");
    }

    return ngx_http_llm_send_json(r, NGX_HTTP_OK, &j);
}


static void
ngx_http_llm_model_card(ngx_http_request_t *r, ngx_http_llm_json_t *j)
{
    ngx_uint_t                 i;
    ngx_http_llm_main_conf_t  *lmcf;

    lmcf = ngx_http_get_module_main_conf(r, ngx_http_llm_module);

    ngx_http_llm_json_lit(j, "{\"id\":");
    ngx_http_llm_json_str(j, lmcf->served_model_name.data,
                          lmcf->served_model_name.len);
    ngx_http_llm_json_lit(j, ",\"object\":\"model\",\"created\":");
    ngx_http_llm_json_int(j, ngx_time());

    /* "vllm": clients written against vLLM may look for it */
    ngx_http_llm_json_lit(j, ",\"owned_by\":\"vllm\",\"root\":");
    ngx_http_llm_json_str(j, lmcf->model.data, lmcf->model.len);
    ngx_http_llm_json_lit(j, ",\"parent\":null,\"max_model_len\":");
    ngx_http_llm_json_int(j, ngx_http_llm_worker.max_model_len);
    ngx_http_llm_json_lit(j, ",\"permission\":[{\"id\":\"modelperm-");

    for (i = 0; i < 4; i++) {
        if (j->failed || j->end - j->pos < 8) {
            ngx_http_llm_json_raw(j, "00000000", 8);
            continue;
        }

        j->pos = ngx_sprintf(j->pos, "%08xD",
                             (uint32_t) (ngx_random() ^ (ngx_random() << 16)));
    }

    ngx_http_llm_json_lit(j, "\",\"object\":\"model_permission\","
                          "\"created\":");
    ngx_http_llm_json_int(j, ngx_time());
    ngx_http_llm_json_lit(j, ",\"allow_create_engine\":false,"
                          "\"allow_sampling\":true,\"allow_logprobs\":true,"
                          "\"allow_search_indices\":false,"
                          "\"allow_view\":true,\"allow_fine_tuning\":false,"
                          "\"organization\":\"*\",\"group\":null,"
                          "\"is_blocking\":false}]}");
}
