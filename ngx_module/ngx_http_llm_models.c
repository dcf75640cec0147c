
/*
 * ngx_http_llm_models.c -- GET .../models and GET .../models/{id}: the
 * served model as vLLM's ModelList / ModelCard.
 */


#include "ngx_http_llm_module.h"


static ngx_int_t ngx_http_llm_models_send(ngx_http_request_t *r,
    ngx_uint_t list);
static void ngx_http_llm_model_card(ngx_http_request_t *r,
    ngx_http_llm_json_t *j);


ngx_int_t
ngx_http_llm_models_list(ngx_http_request_t *r, ngx_str_t *id)
{
    if (!ngx_http_llm_worker.ready) {
        return ngx_http_llm_engine_unavailable(r);
    }

    return ngx_http_llm_models_send(r, 1);
}


ngx_int_t
ngx_http_llm_models_card(ngx_http_request_t *r, ngx_str_t *id)
{
    ngx_http_llm_main_conf_t  *lmcf;

    if (!ngx_http_llm_worker.ready) {
        return ngx_http_llm_engine_unavailable(r);
    }

    lmcf = ngx_http_get_module_main_conf(r, ngx_http_llm_module);

    if (id->len != lmcf->served_model_name.len
        || ngx_strncmp(id->data, lmcf->served_model_name.data, id->len) != 0)
    {
        return ngx_http_llm_send_error(r, NGX_HTTP_NOT_FOUND,
                                       "NotFoundError", "model",
                                       "The model `%V` does not exist.", id);
    }

    return ngx_http_llm_models_send(r, 0);
}


/* the model list, or the model's card alone */

static ngx_int_t
ngx_http_llm_models_send(ngx_http_request_t *r, ngx_uint_t list)
{
    ngx_http_llm_json_t  j;

    ngx_http_llm_json_init(&j, r->pool, 1024);

    if (list) {
        ngx_http_llm_json_lit(&j, "{\"object\":\"list\",\"data\":[");
        ngx_http_llm_model_card(r, &j);
        ngx_http_llm_json_lit(&j, "]}");

    } else {
        ngx_http_llm_model_card(r, &j);
    }

    return ngx_http_llm_send_json(r, NGX_HTTP_OK, &j);
}


static void
ngx_http_llm_model_card(ngx_http_request_t *r, ngx_http_llm_json_t *j)
{
    ngx_str_t                  perm;
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
    ngx_http_llm_json_lit(j, ",\"permission\":[{\"id\":");

    if (ngx_http_llm_random_id(r->pool, &perm, "modelperm-") != NGX_OK) {
        j->failed = 1;
        return;
    }

    ngx_http_llm_json_str(j, perm.data, perm.len);
    ngx_http_llm_json_lit(j, ",\"object\":\"model_permission\","
                          "\"created\":");
    ngx_http_llm_json_int(j, ngx_time());
    ngx_http_llm_json_lit(j, ",\"allow_create_engine\":false,"
                          "\"allow_sampling\":true,\"allow_logprobs\":true,"
                          "\"allow_search_indices\":false,"
                          "\"allow_view\":true,\"allow_fine_tuning\":false,"
                          "\"organization\":\"*\",\"group\":null,"
                          "\"is_blocking\":false}]}");
}
