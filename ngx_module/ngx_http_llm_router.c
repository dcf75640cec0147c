
/*
 * ngx_http_llm_router.c -- router mode: llm_router_model and
 * $llm_prefix_key.
 *
 * A front nginx that proxies to ngx_llm nodes loads only the model's
 * tokenizer and chat template.  $llm_prefix_key renders and tokenizes the
 * (buffered) request body exactly as a node's llm_api does, and names the
 * prompt's prefix by the node's own prefix-cache key of its first full
 * blocks (llm_prefix_keys()), so that a balancer keyed by it sends equal
 * prefixes to the node that has them cached.  The body is only read: the
 * proxied request is the client's.
 */


#include "ngx_http_llm_module.h"


static void ngx_http_llm_router_cleanup(void *data);


/* llm_router_model DIR [prefix_blocks=N] */

char *
ngx_http_llm_router_model(ngx_conf_t *cf, ngx_command_t *cmd, void *conf)
{
    ngx_http_llm_main_conf_t *lmcf = conf;

    ngx_str_t           *value, dir;
    ngx_int_t            n;
    ngx_uint_t           i;
    ngx_pool_cleanup_t  *cln;
    char                 err[LLM_ERR_LEN];

    if (lmcf->router != NULL) {
        return "is duplicate";
    }

    value = cf->args->elts;

    for (i = 2; i < cf->args->nelts; i++) {

        if (ngx_strncmp(value[i].data, "prefix_blocks=", 14) == 0) {
            n = ngx_atoi(value[i].data + 14, value[i].len - 14);
            if (n == NGX_ERROR || n < 1 || n > NGX_HTTP_LLM_ROUTER_MAX_BLOCKS) {
                ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                                   "\"llm_router_model\": prefix_blocks "
                                   "must be 1 to %d, got \"%V\"",
                                   NGX_HTTP_LLM_ROUTER_MAX_BLOCKS, &value[i]);
                return NGX_CONF_ERROR;
            }
            lmcf->router_blocks = n;
            continue;
        }

        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                           "\"llm_router_model\": invalid parameter \"%V\"",
                           &value[i]);
        return NGX_CONF_ERROR;
    }

    dir = value[1];

    if (ngx_conf_full_name(cf->cycle, &dir, 0) != NGX_OK) {
        return NGX_CONF_ERROR;
    }

    cln = ngx_pool_cleanup_add(cf->pool, 0);
    if (cln == NULL) {
        return NGX_CONF_ERROR;
    }

    /* the tokenizer and the template only: a fraction of a second, in
     * the master, so that every worker has them and nginx -t checks them */
    lmcf->router = llm_model_load_tokenizer((char *) dir.data, err);
    if (lmcf->router == NULL) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0, "\"llm_router_model\": %s",
                           err);
        return NGX_CONF_ERROR;
    }

    cln->handler = ngx_http_llm_router_cleanup;
    cln->data = lmcf->router;

    return NGX_CONF_OK;
}


static void
ngx_http_llm_router_cleanup(void *data)
{
    llm_model_free(data);
}


/*
 * $llm_prefix_key: the prefix-cache key (16 hex digits) of the prompt's
 * first min(full blocks, prefix_blocks) blocks; not found without a
 * router model, a read body, a chat, completions or Responses route, or a
 * prompt of one full block, and for a body a node would refuse (the node
 * answers it).  A Responses request's prompt is its instructions and
 * input as the node renders them (ngx_http_llm_responses_input.c, the
 * route's own parser, through the chat template); one that continues a
 * stored response (previous_response_id) has none here: the conversation
 * it continues is only in the node's store.  Cacheable: a retry on
 * another peer asks again.
 */

ngx_int_t
ngx_http_llm_router_prefix_key(ngx_http_request_t *r,
    ngx_http_variable_value_t *v, uintptr_t data)
{
    int                         n;
    uint64_t                    keys[NGX_HTTP_LLM_ROUTER_MAX_BLOCKS];
    ngx_str_t                   id;
    ngx_http_llm_job_t         *job;
    ngx_http_llm_prompt_t      *prompt;
    const ngx_http_llm_route_t *route;
    ngx_http_llm_main_conf_t   *lmcf;

    v->not_found = 1;

    lmcf = ngx_http_get_module_main_conf(r, ngx_http_llm_module);

    if (lmcf->router == NULL
        || r->request_body == NULL
        || r->request_body->bufs == NULL)
    {
        return NGX_OK;
    }

    route = ngx_http_llm_route_find(r, &id);

    /* the generating routes, those that render output: chat, completions
     * and Responses, whose parsers make the prompt a node would run */
    if (route == NULL || route->chunk == NULL) {
        return NGX_OK;
    }

    job = ngx_http_llm_job_create(r, route);
    if (job == NULL) {
        return NGX_ERROR;
    }

    /* the node checks the model's name and the prompt's length */
    job->router = 1;
    job->model = lmcf->router;
    job->max_model_len = NGX_MAX_INT32_VALUE;
    llm_sampling_params_init(&job->sp, lmcf->router);

    ngx_http_llm_parse(job);

    if (job->status || job->prompts.nelts == 0) {
        return NGX_OK;
    }

    prompt = job->prompts.elts;

    n = llm_prefix_keys(prompt->ids, prompt->n, job->sp.cache_salt, keys,
                        lmcf->router_blocks);
    if (n == 0) {
        return NGX_OK;
    }

    v->data = ngx_pnalloc(r->pool, 16);
    if (v->data == NULL) {
        return NGX_ERROR;
    }

    v->len = ngx_sprintf(v->data, "%016uxL", keys[n - 1]) - v->data;
    v->valid = 1;
    v->no_cacheable = 0;
    v->not_found = 0;

    return NGX_OK;
}
