
/*
 * ngx_http_llm_module.c -- directives, configuration checks that make
 * "nginx -t" fail with an [emerg] naming the directive, and the worker
 * hooks that start and stop the engine.
 */


#include "ngx_http_llm_module.h"


static ngx_int_t ngx_http_llm_postconfiguration(ngx_conf_t *cf);
static void *ngx_http_llm_create_main_conf(ngx_conf_t *cf);
static char *ngx_http_llm_init_main_conf(ngx_conf_t *cf, void *conf);
static void *ngx_http_llm_create_loc_conf(ngx_conf_t *cf);
static char *ngx_http_llm_merge_loc_conf(ngx_conf_t *cf, void *parent,
    void *child);

static char *ngx_http_llm_device(ngx_conf_t *cf, ngx_command_t *cmd,
    void *conf);
static char *ngx_http_llm_weights(ngx_conf_t *cf, ngx_command_t *cmd,
    void *conf);
static char *ngx_http_llm_gpu_memory_utilization(ngx_conf_t *cf,
    ngx_command_t *cmd, void *conf);
static char *ngx_http_llm_speculative(ngx_conf_t *cf, ngx_command_t *cmd,
    void *conf);
static char *ngx_http_llm_responses_store(ngx_conf_t *cf, ngx_command_t *cmd,
    void *conf);
static char *ngx_http_llm_reasoning_parser(ngx_conf_t *cf,
    ngx_command_t *cmd, void *conf);
static char *ngx_http_llm_tool_call_parser(ngx_conf_t *cf,
    ngx_command_t *cmd, void *conf);
static char *ngx_http_llm_handler_set(ngx_conf_t *cf, ngx_command_t *cmd,
    void *conf);

static ngx_int_t ngx_http_llm_struct_zone_init(ngx_shm_zone_t *zone,
    void *data);
static ngx_int_t ngx_http_llm_init_process(ngx_cycle_t *cycle);
static void ngx_http_llm_exit_process(ngx_cycle_t *cycle);


static char *ngx_http_llm_check_min(ngx_conf_t *cf, void *post, void *data);


/* nginx's own bounds check does not name the directive; this one does */

static ngx_conf_num_bounds_t  ngx_http_llm_positive = {
    ngx_http_llm_check_min, 1, -1
};

static ngx_conf_num_bounds_t  ngx_http_llm_non_negative = {
    ngx_http_llm_check_min, 0, -1
};


static ngx_conf_enum_t  ngx_http_llm_spec_metrics[] = {
    { ngx_string("none"), NGX_HTTP_LLM_SPEC_METRICS_NONE },
    { ngx_string("summary"), NGX_HTTP_LLM_SPEC_METRICS_SUMMARY },
    { ngx_string("detailed"), NGX_HTTP_LLM_SPEC_METRICS_DETAILED },
    { ngx_null_string, 0 }
};


static ngx_command_t  ngx_http_llm_commands[] = {

    { ngx_string("llm_model"),
      NGX_HTTP_MAIN_CONF|NGX_CONF_TAKE1,
      ngx_conf_set_str_slot,
      NGX_HTTP_MAIN_CONF_OFFSET,
      offsetof(ngx_http_llm_main_conf_t, model),
      NULL },

    { ngx_string("llm_router_model"),
      NGX_HTTP_MAIN_CONF|NGX_CONF_1MORE,
      ngx_http_llm_router_model,
      NGX_HTTP_MAIN_CONF_OFFSET,
      0,
      NULL },

    { ngx_string("llm_served_model_name"),
      NGX_HTTP_MAIN_CONF|NGX_CONF_TAKE1,
      ngx_conf_set_str_slot,
      NGX_HTTP_MAIN_CONF_OFFSET,
      offsetof(ngx_http_llm_main_conf_t, served_model_name),
      NULL },

    { ngx_string("llm_device"),
      NGX_HTTP_MAIN_CONF|NGX_CONF_TAKE1,
      ngx_http_llm_device,
      NGX_HTTP_MAIN_CONF_OFFSET,
      offsetof(ngx_http_llm_main_conf_t, device),
      NULL },

    { ngx_string("llm_weights"),
      NGX_HTTP_MAIN_CONF|NGX_CONF_TAKE1,
      ngx_http_llm_weights,
      NGX_HTTP_MAIN_CONF_OFFSET,
      offsetof(ngx_http_llm_main_conf_t, weights),
      NULL },

    { ngx_string("llm_threads"),
      NGX_HTTP_MAIN_CONF|NGX_CONF_TAKE1,
      ngx_conf_set_num_slot,
      NGX_HTTP_MAIN_CONF_OFFSET,
      offsetof(ngx_http_llm_main_conf_t, threads),
      &ngx_http_llm_non_negative },

    { ngx_string("llm_max_model_len"),
      NGX_HTTP_MAIN_CONF|NGX_CONF_TAKE1,
      ngx_conf_set_num_slot,
      NGX_HTTP_MAIN_CONF_OFFSET,
      offsetof(ngx_http_llm_main_conf_t, max_model_len),
      &ngx_http_llm_positive },

    { ngx_string("llm_max_num_seqs"),
      NGX_HTTP_MAIN_CONF|NGX_CONF_TAKE1,
      ngx_conf_set_num_slot,
      NGX_HTTP_MAIN_CONF_OFFSET,
      offsetof(ngx_http_llm_main_conf_t, max_num_seqs),
      &ngx_http_llm_positive },

    { ngx_string("llm_max_num_batched_tokens"),
      NGX_HTTP_MAIN_CONF|NGX_CONF_TAKE1,
      ngx_conf_set_num_slot,
      NGX_HTTP_MAIN_CONF_OFFSET,
      offsetof(ngx_http_llm_main_conf_t, max_num_batched_tokens),
      &ngx_http_llm_positive },

    { ngx_string("llm_kv_cache_size"),
      NGX_HTTP_MAIN_CONF|NGX_CONF_TAKE1,
      ngx_conf_set_off_slot,
      NGX_HTTP_MAIN_CONF_OFFSET,
      offsetof(ngx_http_llm_main_conf_t, kv_cache_size),
      NULL },

    { ngx_string("llm_gpu_memory_utilization"),
      NGX_HTTP_MAIN_CONF|NGX_CONF_TAKE1,
      ngx_http_llm_gpu_memory_utilization,
      NGX_HTTP_MAIN_CONF_OFFSET,
      0,
      NULL },

    { ngx_string("llm_enable_prefix_caching"),
      NGX_HTTP_MAIN_CONF|NGX_CONF_FLAG,
      ngx_conf_set_flag_slot,
      NGX_HTTP_MAIN_CONF_OFFSET,
      offsetof(ngx_http_llm_main_conf_t, enable_prefix_caching),
      NULL },

    { ngx_string("llm_log_stats"),
      NGX_HTTP_MAIN_CONF|NGX_CONF_FLAG,
      ngx_conf_set_flag_slot,
      NGX_HTTP_MAIN_CONF_OFFSET,
      offsetof(ngx_http_llm_main_conf_t, log_stats),
      NULL },

    { ngx_string("llm_speculative"),
      NGX_HTTP_MAIN_CONF|NGX_CONF_1MORE,
      ngx_http_llm_speculative,
      NGX_HTTP_MAIN_CONF_OFFSET,
      0,
      NULL },

    { ngx_string("llm_responses_store"),
      NGX_HTTP_MAIN_CONF|NGX_CONF_TAKE12,
      ngx_http_llm_responses_store,
      NGX_HTTP_MAIN_CONF_OFFSET,
      0,
      NULL },

    { ngx_string("llm_thread_pool"),
      NGX_HTTP_MAIN_CONF|NGX_CONF_TAKE1,
      ngx_conf_set_str_slot,
      NGX_HTTP_MAIN_CONF_OFFSET,
      offsetof(ngx_http_llm_main_conf_t, thread_pool_name),
      NULL },

    { ngx_string("llm_tool_call_parser"),
      NGX_HTTP_MAIN_CONF|NGX_CONF_TAKE1,
      ngx_http_llm_tool_call_parser,
      NGX_HTTP_MAIN_CONF_OFFSET,
      0,
      NULL },

    { ngx_string("llm_reasoning_parser"),
      NGX_HTTP_MAIN_CONF|NGX_HTTP_SRV_CONF|NGX_HTTP_LOC_CONF|NGX_CONF_TAKE1,
      ngx_http_llm_reasoning_parser,
      NGX_HTTP_LOC_CONF_OFFSET,
      0,
      NULL },

    { ngx_string("llm_per_request_output_token_metrics"),
      NGX_HTTP_MAIN_CONF|NGX_HTTP_SRV_CONF|NGX_HTTP_LOC_CONF|NGX_CONF_FLAG,
      ngx_conf_set_flag_slot,
      NGX_HTTP_LOC_CONF_OFFSET,
      offsetof(ngx_http_llm_loc_conf_t, output_token_metrics),
      NULL },

    { ngx_string("llm_per_request_metrics"),
      NGX_HTTP_MAIN_CONF|NGX_HTTP_SRV_CONF|NGX_HTTP_LOC_CONF|NGX_CONF_FLAG,
      ngx_conf_set_flag_slot,
      NGX_HTTP_LOC_CONF_OFFSET,
      offsetof(ngx_http_llm_loc_conf_t, per_request_metrics),
      NULL },

    { ngx_string("llm_force_include_usage"),
      NGX_HTTP_MAIN_CONF|NGX_HTTP_SRV_CONF|NGX_HTTP_LOC_CONF|NGX_CONF_FLAG,
      ngx_conf_set_flag_slot,
      NGX_HTTP_LOC_CONF_OFFSET,
      offsetof(ngx_http_llm_loc_conf_t, force_include_usage),
      NULL },

    { ngx_string("llm_per_request_spec_decode_metrics"),
      NGX_HTTP_MAIN_CONF|NGX_HTTP_SRV_CONF|NGX_HTTP_LOC_CONF|NGX_CONF_TAKE1,
      ngx_conf_set_enum_slot,
      NGX_HTTP_LOC_CONF_OFFSET,
      offsetof(ngx_http_llm_loc_conf_t, spec_decode_metrics),
      &ngx_http_llm_spec_metrics },

    { ngx_string("llm_max_unsent_bytes"),
      NGX_HTTP_MAIN_CONF|NGX_HTTP_SRV_CONF|NGX_HTTP_LOC_CONF|NGX_CONF_TAKE1,
      ngx_conf_set_size_slot,
      NGX_HTTP_LOC_CONF_OFFSET,
      offsetof(ngx_http_llm_loc_conf_t, max_unsent),
      NULL },

    { ngx_string("llm_responses_owner"),
      NGX_HTTP_MAIN_CONF|NGX_HTTP_SRV_CONF|NGX_HTTP_LOC_CONF|NGX_CONF_TAKE1,
      ngx_http_set_complex_value_slot,
      NGX_HTTP_LOC_CONF_OFFSET,
      offsetof(ngx_http_llm_loc_conf_t, responses_owner),
      NULL },

    { ngx_string("llm_api"),
      NGX_HTTP_LOC_CONF|NGX_CONF_NOARGS,
      ngx_http_llm_handler_set,
      NGX_HTTP_LOC_CONF_OFFSET,
      NGX_HTTP_LLM_HANDLER_API,
      NULL },

    { ngx_string("llm_health"),
      NGX_HTTP_LOC_CONF|NGX_CONF_NOARGS,
      ngx_http_llm_handler_set,
      NGX_HTTP_LOC_CONF_OFFSET,
      NGX_HTTP_LLM_HANDLER_HEALTH,
      NULL },

    { ngx_string("llm_prometheus"),
      NGX_HTTP_LOC_CONF|NGX_CONF_NOARGS,
      ngx_http_llm_handler_set,
      NGX_HTTP_LOC_CONF_OFFSET,
      NGX_HTTP_LLM_HANDLER_PROMETHEUS,
      NULL },

      ngx_null_command
};


static ngx_http_module_t  ngx_http_llm_module_ctx = {
    ngx_http_llm_add_variables,            /* preconfiguration */
    ngx_http_llm_postconfiguration,        /* postconfiguration */

    ngx_http_llm_create_main_conf,         /* create main configuration */
    ngx_http_llm_init_main_conf,           /* init main configuration */

    NULL,                                  /* create server configuration */
    NULL,                                  /* merge server configuration */

    ngx_http_llm_create_loc_conf,          /* create location configuration */
    ngx_http_llm_merge_loc_conf            /* merge location configuration */
};


ngx_module_t  ngx_http_llm_module = {
    NGX_MODULE_V1,
    &ngx_http_llm_module_ctx,              /* module context */
    ngx_http_llm_commands,                 /* module directives */
    NGX_HTTP_MODULE,                       /* module type */
    NULL,                                  /* init master */
    NULL,                                  /* init module */
    ngx_http_llm_init_process,             /* init process */
    NULL,                                  /* init thread */
    NULL,                                  /* exit thread */
    ngx_http_llm_exit_process,             /* exit process */
    NULL,                                  /* exit master */
    NGX_MODULE_V1_PADDING
};


static void *
ngx_http_llm_create_main_conf(ngx_conf_t *cf)
{
    ngx_http_llm_main_conf_t  *lmcf;

    lmcf = ngx_pcalloc(cf->pool, sizeof(ngx_http_llm_main_conf_t));
    if (lmcf == NULL) {
        return NULL;
    }

    /*
     * set by ngx_pcalloc():
     *
     *     lmcf->model = { 0, NULL };
     *     lmcf->served_model_name = { 0, NULL };
     *     lmcf->device = { 0, NULL };
     *     lmcf->weights = { 0, NULL };
     *     lmcf->gpu_memory_utilization = { 0, NULL };
     *     lmcf->gpu_util = 0;
     *     lmcf->spec_tokens = 0;
     *     lmcf->spec_lookup_min = 0;
     *     lmcf->spec_lookup_max = 0;
     *     lmcf->thread_pool_name = { 0, NULL };
     *     lmcf->thread_pool = NULL;
     *     lmcf->router = NULL;
     *     lmcf->used = 0;
     *     lmcf->api = 0;
     */

    lmcf->threads = NGX_CONF_UNSET;
    lmcf->max_model_len = NGX_CONF_UNSET;
    lmcf->max_num_seqs = NGX_CONF_UNSET;
    lmcf->max_num_batched_tokens = NGX_CONF_UNSET;
    lmcf->kv_cache_size = NGX_CONF_UNSET;
    lmcf->enable_prefix_caching = NGX_CONF_UNSET;
    lmcf->log_stats = NGX_CONF_UNSET;
    lmcf->store_entries = NGX_CONF_UNSET;
    lmcf->store_size = NGX_CONF_UNSET_SIZE;
    lmcf->tool_parser = NGX_CONF_UNSET_UINT;
    lmcf->router_blocks = NGX_CONF_UNSET;

    return lmcf;
}


static char *
ngx_http_llm_init_main_conf(ngx_conf_t *cf, void *conf)
{
    ngx_http_llm_main_conf_t *lmcf = conf;

    u_char  *p, *last;

    /* 0 leaves the choice to the engine (llm.h documents its defaults) */
    ngx_conf_init_value(lmcf->threads, 0);
    ngx_conf_init_value(lmcf->max_model_len, 0);
    ngx_conf_init_value(lmcf->max_num_seqs, 0);
    ngx_conf_init_value(lmcf->max_num_batched_tokens, 0);
    ngx_conf_init_value(lmcf->kv_cache_size, 0);
    ngx_conf_init_value(lmcf->enable_prefix_caching, 1);
    ngx_conf_init_value(lmcf->log_stats, 1);
    ngx_conf_init_value(lmcf->store_entries, 1024);
    ngx_conf_init_size_value(lmcf->store_size, 64 * 1024 * 1024);
    ngx_conf_init_uint_value(lmcf->tool_parser, LLM_TOOL_PARSER_NONE);
    ngx_conf_init_value(lmcf->router_blocks, NGX_HTTP_LLM_ROUTER_BLOCKS);

    if (lmcf->device.len == 0) {
        ngx_str_set(&lmcf->device, "auto");
    }

    if (lmcf->thread_pool_name.len == 0) {
        ngx_str_set(&lmcf->thread_pool_name, "default");
    }

    /* a relative model path is relative to the prefix, like nginx's own */
    if (lmcf->model.len
        && ngx_conf_full_name(cf->cycle, &lmcf->model, 0) != NGX_OK)
    {
        return NGX_CONF_ERROR;
    }

    if (lmcf->model.len && lmcf->served_model_name.len == 0) {

        /*
         * vLLM's default: the model argument; ours: the directory's name,
         * or a GGUF file's name without ".gguf"
         */

        last = lmcf->model.data + lmcf->model.len;

        while (last > lmcf->model.data + 1 && last[-1] == '/') {
            last--;
        }

        for (p = last; p > lmcf->model.data && p[-1] != '/'; p--) {
            /* void */
        }

        if (last - p > 5 && ngx_strncmp(last - 5, ".gguf", 5) == 0) {
            last -= 5;
        }

        lmcf->served_model_name.data = p;
        lmcf->served_model_name.len = last - p;
    }

    return NGX_CONF_OK;
}


static void *
ngx_http_llm_create_loc_conf(ngx_conf_t *cf)
{
    ngx_http_llm_loc_conf_t  *conf;

    conf = ngx_pcalloc(cf->pool, sizeof(ngx_http_llm_loc_conf_t));
    if (conf == NULL) {
        return NULL;
    }

    /*
     * set by ngx_pcalloc():
     *
     *     conf->handler = 0;
     */

    conf->per_request_metrics = NGX_CONF_UNSET;
    conf->force_include_usage = NGX_CONF_UNSET;
    conf->spec_decode_metrics = NGX_CONF_UNSET_UINT;
    conf->reasoning_parser = NGX_CONF_UNSET_UINT;
    conf->output_token_metrics = NGX_CONF_UNSET;
    conf->responses_owner = NGX_CONF_UNSET_PTR;
    conf->max_unsent = NGX_CONF_UNSET_SIZE;

    return conf;
}


static char *
ngx_http_llm_merge_loc_conf(ngx_conf_t *cf, void *parent, void *child)
{
    ngx_http_llm_loc_conf_t *prev = parent;
    ngx_http_llm_loc_conf_t *conf = child;

    ngx_http_llm_main_conf_t  *lmcf;

    ngx_conf_merge_value(conf->per_request_metrics,
                         prev->per_request_metrics, 0);
    ngx_conf_merge_value(conf->force_include_usage,
                         prev->force_include_usage, 0);
    ngx_conf_merge_uint_value(conf->spec_decode_metrics,
                              prev->spec_decode_metrics,
                              NGX_HTTP_LLM_SPEC_METRICS_NONE);
    ngx_conf_merge_uint_value(conf->reasoning_parser, prev->reasoning_parser,
                              LLM_REASONING_PARSER_NONE);
    ngx_conf_merge_value(conf->output_token_metrics,
                         prev->output_token_metrics, 0);
    ngx_conf_merge_ptr_value(conf->responses_owner, prev->responses_owner,
                             NULL);
    ngx_conf_merge_size_value(conf->max_unsent, prev->max_unsent,
                              1024 * 1024);

    lmcf = ngx_http_conf_get_module_main_conf(cf, ngx_http_llm_module);

    /* vLLM refuses --enable-per-request-metrics with --disable-log-stats */

    if (conf->per_request_metrics && !lmcf->log_stats) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                           "\"llm_per_request_metrics on\" requires "
                           "\"llm_log_stats on\": the metrics come from "
                           "the timestamps that llm_log_stats enables");
        return NGX_CONF_ERROR;
    }

    /* vLLM refuses --enable-per-request-output-token-metrics without a
     * reasoning parser to classify the tokens, and with
     * --disable-log-stats, whose timestamps it needs */

    if (conf->output_token_metrics
        && conf->reasoning_parser == LLM_REASONING_PARSER_NONE)
    {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                           "\"llm_per_request_output_token_metrics on\" "
                           "requires \"llm_reasoning_parser\": the tokens "
                           "are told apart by the reasoning parser");
        return NGX_CONF_ERROR;
    }

    if (conf->output_token_metrics && !lmcf->log_stats) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                           "\"llm_per_request_output_token_metrics on\" "
                           "requires \"llm_log_stats on\": the metrics come "
                           "from the timestamps that llm_log_stats enables");
        return NGX_CONF_ERROR;
    }

    if (conf->spec_decode_metrics != NGX_HTTP_LLM_SPEC_METRICS_NONE
        && lmcf->spec_tokens == 0)
    {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                           "\"llm_per_request_spec_decode_metrics\" other "
                           "than \"none\" requires \"llm_speculative\"");
        return NGX_CONF_ERROR;
    }

    if (conf->handler && lmcf->model.len == 0) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                           "\"%s\" requires \"llm_model\" in the http block",
                           conf->handler == NGX_HTTP_LLM_HANDLER_API
                           ? "llm_api"
                           : conf->handler == NGX_HTTP_LLM_HANDLER_HEALTH
                           ? "llm_health" : "llm_prometheus");
        return NGX_CONF_ERROR;
    }

    return NGX_CONF_OK;
}


/* the configurations this process has read (the master: each reload) */
static ngx_uint_t  ngx_http_llm_serial;


static ngx_int_t
ngx_http_llm_postconfiguration(ngx_conf_t *cf)
{
    ngx_http_llm_main_conf_t  *lmcf;

    lmcf = ngx_http_conf_get_module_main_conf(cf, ngx_http_llm_module);

    if (!lmcf->used) {
        return NGX_OK;
    }

    lmcf->thread_pool = ngx_thread_pool_add(cf, &lmcf->thread_pool_name);
    if (lmcf->thread_pool == NULL) {
        return NGX_ERROR;
    }

    /* one engine per nginx, whatever worker_processes says */
    if (ngx_http_llm_engine_add_zone(cf) != NGX_OK) {
        return NGX_ERROR;
    }

    if (ngx_http_llm_store_add_zone(cf, lmcf->store_entries,
                                    lmcf->store_size)
        != NGX_OK)
    {
        return NGX_ERROR;
    }

    /* which configuration is newer (ngx_http_llm_engine_find()) */
    lmcf->serial = ++ngx_http_llm_serial;

    ngx_http_llm_preload(cf, lmcf);

    return ngx_http_llm_inflight_add_zone(cf);
}


static char *
ngx_http_llm_check_min(ngx_conf_t *cf, void *post, void *data)
{
    ngx_conf_num_bounds_t  *bounds = post;
    ngx_int_t              *np = data;

    ngx_str_t  *value;

    if (*np >= bounds->low) {
        return NGX_CONF_OK;
    }

    value = cf->args->elts;

    ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                       "\"%V\" must be at least %i, got %i",
                       &value[0], bounds->low, *np);

    return NGX_CONF_ERROR;
}


static char *
ngx_http_llm_device(ngx_conf_t *cf, ngx_command_t *cmd, void *conf)
{
    ngx_str_t  *value, *device;
    u_char     *p;

    device = (ngx_str_t *) ((char *) conf + cmd->offset);

    if (device->data) {
        return "is duplicate";
    }

    value = cf->args->elts;
    *device = value[1];

    if (ngx_strcmp(device->data, "auto") == 0
        || ngx_strcmp(device->data, "cpu") == 0
        || ngx_strcmp(device->data, "cuda") == 0)
    {
        return NGX_CONF_OK;
    }

    if (ngx_strncmp(device->data, "cuda:", 5) == 0 && device->len > 5) {
        for (p = device->data + 5; *p; p++) {
            if (*p < '0' || *p > '9') {
                break;
            }
        }

        if (*p == '\0') {
            return NGX_CONF_OK;
        }
    }

    ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                       "\"llm_device\": invalid value \"%V\", use auto, "
                       "cpu or cuda:N", device);
    return NGX_CONF_ERROR;
}


/* quantize on load; unset keeps the weights as stored */
static char *
ngx_http_llm_weights(ngx_conf_t *cf, ngx_command_t *cmd, void *conf)
{
    ngx_str_t  *value, *weights;

    weights = (ngx_str_t *) ((char *) conf + cmd->offset);

    if (weights->data) {
        return "is duplicate";
    }

    value = cf->args->elts;

    if (ngx_strcmp(value[1].data, "q8_0") != 0
        && ngx_strcmp(value[1].data, "q4_0") != 0
        && ngx_strcmp(value[1].data, "q4_k") != 0)
    {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                           "\"llm_weights\": invalid value \"%V\", use "
                           "q8_0, q4_0 or q4_k", &value[1]);
        return NGX_CONF_ERROR;
    }

    *weights = value[1];

    return NGX_CONF_OK;
}


static char *
ngx_http_llm_gpu_memory_utilization(ngx_conf_t *cf, ngx_command_t *cmd,
    void *conf)
{
    ngx_http_llm_main_conf_t *lmcf = conf;

    char       *end;
    double      v;
    ngx_str_t  *value;

    if (lmcf->gpu_memory_utilization.data) {
        return "is duplicate";
    }

    value = cf->args->elts;
    lmcf->gpu_memory_utilization = value[1];

    v = strtod((char *) value[1].data, &end);

    if (end == (char *) value[1].data || *end != '\0' || !(v > 0 && v <= 1))
    {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                           "\"llm_gpu_memory_utilization\": invalid value "
                           "\"%V\", must be a fraction in (0, 1], e.g. 0.9",
                           &value[1]);
        return NGX_CONF_ERROR;
    }

    lmcf->gpu_util = v;

    return NGX_CONF_OK;
}


/* llm_speculative ngram tokens=4 lookup_min=1 lookup_max=4 */

static char *
ngx_http_llm_speculative(ngx_conf_t *cf, ngx_command_t *cmd, void *conf)
{
    ngx_http_llm_main_conf_t *lmcf = conf;

    ngx_int_t    n, max, *slot;
    ngx_str_t   *value, v;
    ngx_uint_t   i;

    if (lmcf->spec_tokens) {
        return "is duplicate";
    }

    value = cf->args->elts;

    if (ngx_strcmp(value[1].data, "ngram") != 0) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                           "\"llm_speculative\": unknown method \"%V\", "
                           "only \"ngram\" is supported", &value[1]);
        return NGX_CONF_ERROR;
    }

    /* vLLM's defaults for the n-gram proposer */
    lmcf->spec_tokens = 4;
    lmcf->spec_lookup_min = 1;
    lmcf->spec_lookup_max = 4;

    for (i = 2; i < cf->args->nelts; i++) {

        if (ngx_strncmp(value[i].data, "tokens=", 7) == 0) {
            slot = &lmcf->spec_tokens;
            v.data = value[i].data + 7;

        } else if (ngx_strncmp(value[i].data, "lookup_min=", 11) == 0) {
            slot = &lmcf->spec_lookup_min;
            v.data = value[i].data + 11;

        } else if (ngx_strncmp(value[i].data, "lookup_max=", 11) == 0) {
            slot = &lmcf->spec_lookup_max;
            v.data = value[i].data + 11;

        } else {
            ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                               "\"llm_speculative\": invalid parameter "
                               "\"%V\", use tokens=, lookup_min= or "
                               "lookup_max=", &value[i]);
            return NGX_CONF_ERROR;
        }

        v.len = value[i].data + value[i].len - v.data;
        n = ngx_atoi(v.data, v.len);

        /* the engine verifies at most LLM_SPEC_MAX_TOKENS drafts a step */
        max = (slot == &lmcf->spec_tokens) ? LLM_SPEC_MAX_TOKENS : 64;

        if (n == NGX_ERROR || n < 1 || n > max) {
            ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                               "\"llm_speculative\": invalid value in "
                               "\"%V\", must be an integer from 1 to %i",
                               &value[i], max);
            return NGX_CONF_ERROR;
        }

        *slot = n;
    }

    if (lmcf->spec_lookup_min > lmcf->spec_lookup_max) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                           "\"llm_speculative\": lookup_min=%i is greater "
                           "than lookup_max=%i",
                           lmcf->spec_lookup_min, lmcf->spec_lookup_max);
        return NGX_CONF_ERROR;
    }

    return NGX_CONF_OK;
}


/* llm_responses_store 1024 64m: the bounds of the store (its zone) */

static char *
ngx_http_llm_responses_store(ngx_conf_t *cf, ngx_command_t *cmd, void *conf)
{
    ngx_http_llm_main_conf_t *lmcf = conf;

    ssize_t     size;
    ngx_int_t   n;
    ngx_str_t  *value;

    if (lmcf->store_entries != NGX_CONF_UNSET) {
        return "is duplicate";
    }

    value = cf->args->elts;

    n = ngx_atoi(value[1].data, value[1].len);

    if (n == NGX_ERROR) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                           "\"llm_responses_store\": invalid number of "
                           "responses \"%V\", must be an integer, 0 keeps "
                           "none", &value[1]);
        return NGX_CONF_ERROR;
    }

    lmcf->store_entries = n;

    if (cf->args->nelts == 3) {
        size = ngx_parse_size(&value[2]);

        if (size == NGX_ERROR) {
            ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                               "\"llm_responses_store\": invalid size "
                               "\"%V\", use bytes or k, m, g", &value[2]);
            return NGX_CONF_ERROR;
        }

        lmcf->store_size = size;
    }

    return NGX_CONF_OK;
}


/* llm_api, llm_health, llm_prometheus: the content handler of a location */

static char *
ngx_http_llm_handler_set(ngx_conf_t *cf, ngx_command_t *cmd, void *conf)
{
    ngx_http_llm_loc_conf_t *llcf = conf;

    ngx_http_core_loc_conf_t  *clcf;
    ngx_http_llm_main_conf_t  *lmcf;

    if (llcf->handler) {
        return "is duplicate";
    }

    llcf->handler = cmd->offset;

    clcf = ngx_http_conf_get_module_loc_conf(cf, ngx_http_core_module);
    lmcf = ngx_http_conf_get_module_main_conf(cf, ngx_http_llm_module);

    switch (llcf->handler) {

    case NGX_HTTP_LLM_HANDLER_API:
        clcf->handler = ngx_http_llm_api_handler;
        lmcf->api = 1;
        break;

    case NGX_HTTP_LLM_HANDLER_HEALTH:
        clcf->handler = ngx_http_llm_health_handler;
        break;

    default: /* NGX_HTTP_LLM_HANDLER_PROMETHEUS */
        clcf->handler = ngx_http_llm_prometheus_handler;
        break;
    }

    lmcf->used = 1;

    return NGX_CONF_OK;
}


static ngx_int_t
ngx_http_llm_init_process(ngx_cycle_t *cycle)
{
    ngx_http_llm_main_conf_t  *lmcf;

    /* not in the cache manager and loader processes */

    if (ngx_process != NGX_PROCESS_WORKER
        && ngx_process != NGX_PROCESS_SINGLE)
    {
        return NGX_OK;
    }

    lmcf = ngx_http_cycle_get_module_main_conf(cycle, ngx_http_llm_module);

    if (lmcf == NULL || !lmcf->used) {
        return NGX_OK;
    }

    ngx_http_llm_store_init(cycle);

    /* what a worker that died left in flight, reported in the error log */
    ngx_http_llm_inflight_init_process(cycle);

    /*
     * A failure here would leave the master without workers ("exited with
     * fatal code 2 and cannot be respawned"); the engine instead records
     * why it is unavailable and the API answers 503 with that reason.
     */

    (void) ngx_http_llm_engine_start(cycle, lmcf);

    return NGX_OK;
}


static void
ngx_http_llm_exit_process(ngx_cycle_t *cycle)
{
    ngx_http_llm_inflight_exit_process();
    ngx_http_llm_engine_stop(cycle);
}


/*
 * A shared memory zone that holds one zeroed struct of "size" bytes (its
 * zone->data once initialized), kept across reloads: nginx reuses a zone
 * of the same name, size and tag, and the new cycle gets the old struct.
 */

ngx_shm_zone_t *
ngx_http_llm_struct_zone_add(ngx_conf_t *cf, ngx_str_t *name, size_t size)
{
    size_t          *need;
    ngx_shm_zone_t  *zone;

    need = ngx_palloc(cf->pool, sizeof(size_t));
    if (need == NULL) {
        return NULL;
    }

    *need = size;

    /* the slab pool's own header and page table take about 1/64 */
    zone = ngx_shared_memory_add(cf, name, size + size / 16 + 8 * ngx_pagesize,
                                 &ngx_http_llm_module);
    if (zone == NULL) {
        return NULL;
    }

    zone->init = ngx_http_llm_struct_zone_init;
    zone->data = need;

    return zone;
}


static ngx_int_t
ngx_http_llm_struct_zone_init(ngx_shm_zone_t *zone, void *data)
{
    size_t            size;
    ngx_slab_pool_t  *shpool;

    if (data) {
        /* a reload: the struct carries over */
        zone->data = data;
        return NGX_OK;
    }

    size = *(size_t *) zone->data;
    shpool = (ngx_slab_pool_t *) zone->shm.addr;

    if (zone->shm.exists) {
        zone->data = shpool->data;
        return NGX_OK;
    }

    zone->data = ngx_slab_calloc(shpool, size);
    if (zone->data == NULL) {
        return NGX_ERROR;
    }

    shpool->data = zone->data;

    return NGX_OK;
}


/*
 * llm_tool_call_parser hermes | llama3_json | mistral | auto: vLLM's
 * --enable-auto-tool-choice --tool-call-parser; auto picks the parser the
 * model's chat template asks for, per request (the worker has the model).
 */

static char *
ngx_http_llm_tool_call_parser(ngx_conf_t *cf, ngx_command_t *cmd, void *conf)
{
    ngx_http_llm_main_conf_t *lmcf = conf;

    int         kind;
    ngx_str_t  *value;

    if (lmcf->tool_parser != NGX_CONF_UNSET_UINT) {
        return "is duplicate";
    }

    value = cf->args->elts;

    if (value[1].len == 4 && ngx_strncmp(value[1].data, "auto", 4) == 0) {
        lmcf->tool_parser = NGX_HTTP_LLM_TOOL_PARSER_AUTO;
        return NGX_CONF_OK;
    }

    kind = llm_tool_parser_kind_from_name((char *) value[1].data,
                                          value[1].len);

    if (kind < 0) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                           "\"llm_tool_call_parser\": unknown parser \"%V\", "
                           "use hermes, llama3_json, mistral or auto",
                           &value[1]);
        return NGX_CONF_ERROR;
    }

    lmcf->tool_parser = kind;

    return NGX_CONF_OK;
}


/*
 * llm_reasoning_parser qwen3 | deepseek_r1 | none: vLLM's
 * --reasoning-parser, the <think>...</think> family
 * (ngx_http_llm_reasoning.c); per location, as the split is the module's
 * alone (the engine generates the same tokens either way).
 */

static char *
ngx_http_llm_reasoning_parser(ngx_conf_t *cf, ngx_command_t *cmd, void *conf)
{
    ngx_http_llm_loc_conf_t *llcf = conf;

    int         kind;
    ngx_str_t  *value;

    if (llcf->reasoning_parser != NGX_CONF_UNSET_UINT) {
        return "is duplicate";
    }

    value = cf->args->elts;

    if (value[1].len == 4 && ngx_strncmp(value[1].data, "none", 4) == 0) {
        llcf->reasoning_parser = LLM_REASONING_PARSER_NONE;
        return NGX_CONF_OK;
    }

    kind = llm_reasoning_parser_kind_from_name((char *) value[1].data,
                                               value[1].len);

    if (kind < 0) {
        ngx_conf_log_error(NGX_LOG_EMERG, cf, 0,
                           "\"llm_reasoning_parser\": unknown parser \"%V\", "
                           "use qwen3, deepseek_r1 or none", &value[1]);
        return NGX_CONF_ERROR;
    }

    llcf->reasoning_parser = kind;

    return NGX_CONF_OK;
}
