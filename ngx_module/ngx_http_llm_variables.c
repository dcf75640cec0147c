
/*
 * ngx_http_llm_variables.c -- $llm_* variables for log_format, map and
 * add_header: the access log becomes a billing and SLA record.
 *
 * Values come from the request's ctx (r->pool), which holds a copy of the
 * engine's record made at every drain and at abort: r->cleanup handlers
 * run before the access log is written, so nothing here may point into the
 * engine.  They are filled for every request the engine saw, aborted
 * streams included (tokens so far, finish reason "abort"), whether or not
 * llm_per_request_metrics is on.  Times print with three decimals, in the
 * units of the JSON metrics; "-" where a value does not exist, and for all
 * timing variables when llm_log_stats is off.  Token counts, model, id and
 * finish reason stay: they are billing data.
 */


#include "ngx_http_llm_module.h"


enum {
    NGX_HTTP_LLM_VAR_REQUEST_ID = 0,
    NGX_HTTP_LLM_VAR_MODEL,
    NGX_HTTP_LLM_VAR_PROMPT_TOKENS,
    NGX_HTTP_LLM_VAR_COMPLETION_TOKENS,
    NGX_HTTP_LLM_VAR_TOTAL_TOKENS,
    NGX_HTTP_LLM_VAR_CACHED_TOKENS,
    NGX_HTTP_LLM_VAR_FINISH_REASON,
    NGX_HTTP_LLM_VAR_SPEC_ACCEPTANCE,
    NGX_HTTP_LLM_VAR_TTFT,
    NGX_HTTP_LLM_VAR_QUEUE,
    NGX_HTTP_LLM_VAR_GENERATION,
    NGX_HTTP_LLM_VAR_ITL,
    NGX_HTTP_LLM_VAR_TPS
};


static ngx_int_t ngx_http_llm_variable(ngx_http_request_t *r,
    ngx_http_variable_value_t *v, uintptr_t data);
static ngx_int_t ngx_http_llm_variable_str(ngx_http_request_t *r,
    ngx_http_variable_value_t *v, ngx_str_t *s);


static ngx_http_variable_t  ngx_http_llm_vars[] = {

    { ngx_string("llm_request_id"), NULL, ngx_http_llm_variable,
      NGX_HTTP_LLM_VAR_REQUEST_ID, NGX_HTTP_VAR_NOCACHEABLE, 0 },

    { ngx_string("llm_model"), NULL, ngx_http_llm_variable,
      NGX_HTTP_LLM_VAR_MODEL, NGX_HTTP_VAR_NOCACHEABLE, 0 },

    { ngx_string("llm_prompt_tokens"), NULL, ngx_http_llm_variable,
      NGX_HTTP_LLM_VAR_PROMPT_TOKENS, NGX_HTTP_VAR_NOCACHEABLE, 0 },

    { ngx_string("llm_completion_tokens"), NULL, ngx_http_llm_variable,
      NGX_HTTP_LLM_VAR_COMPLETION_TOKENS, NGX_HTTP_VAR_NOCACHEABLE, 0 },

    { ngx_string("llm_total_tokens"), NULL, ngx_http_llm_variable,
      NGX_HTTP_LLM_VAR_TOTAL_TOKENS, NGX_HTTP_VAR_NOCACHEABLE, 0 },

    { ngx_string("llm_cached_tokens"), NULL, ngx_http_llm_variable,
      NGX_HTTP_LLM_VAR_CACHED_TOKENS, NGX_HTTP_VAR_NOCACHEABLE, 0 },

    { ngx_string("llm_finish_reason"), NULL, ngx_http_llm_variable,
      NGX_HTTP_LLM_VAR_FINISH_REASON, NGX_HTTP_VAR_NOCACHEABLE, 0 },

    { ngx_string("llm_spec_acceptance_length"), NULL, ngx_http_llm_variable,
      NGX_HTTP_LLM_VAR_SPEC_ACCEPTANCE, NGX_HTTP_VAR_NOCACHEABLE, 0 },

    { ngx_string("llm_ttft_ms"), NULL, ngx_http_llm_variable,
      NGX_HTTP_LLM_VAR_TTFT, NGX_HTTP_VAR_NOCACHEABLE, 0 },

    { ngx_string("llm_queue_time_ms"), NULL, ngx_http_llm_variable,
      NGX_HTTP_LLM_VAR_QUEUE, NGX_HTTP_VAR_NOCACHEABLE, 0 },

    { ngx_string("llm_generation_time_ms"), NULL, ngx_http_llm_variable,
      NGX_HTTP_LLM_VAR_GENERATION, NGX_HTTP_VAR_NOCACHEABLE, 0 },

    { ngx_string("llm_mean_itl_ms"), NULL, ngx_http_llm_variable,
      NGX_HTTP_LLM_VAR_ITL, NGX_HTTP_VAR_NOCACHEABLE, 0 },

    { ngx_string("llm_tokens_per_second"), NULL, ngx_http_llm_variable,
      NGX_HTTP_LLM_VAR_TPS, NGX_HTTP_VAR_NOCACHEABLE, 0 },

      ngx_http_null_variable
};


ngx_int_t
ngx_http_llm_add_variables(ngx_conf_t *cf)
{
    ngx_http_variable_t  *var, *v;

    for (v = ngx_http_llm_vars; v->name.len; v++) {
        var = ngx_http_add_variable(cf, &v->name, v->flags);
        if (var == NULL) {
            return NGX_ERROR;
        }

        var->get_handler = v->get_handler;
        var->data = v->data;
    }

    return NGX_OK;
}


static ngx_int_t
ngx_http_llm_variable(ngx_http_request_t *r, ngx_http_variable_value_t *v,
    uintptr_t data)
{
    u_char                   *p;
    int                       has;
    double                    value;
    int64_t                   count;
    ngx_str_t                 s;
    llm_metrics               m;
    ngx_http_llm_ctx_t       *ctx;
    const llm_request_stats  *st;

    ctx = ngx_http_get_module_ctx(r, ngx_http_llm_module);

    if (ctx == NULL || !ctx->submitted) {
        v->not_found = 1;
        return NGX_OK;
    }

    st = &ctx->stats;

    switch (data) {

    case NGX_HTTP_LLM_VAR_REQUEST_ID:
        return ngx_http_llm_variable_str(r, v, &ctx->id);

    case NGX_HTTP_LLM_VAR_MODEL:
        return ngx_http_llm_variable_str(r, v, &ctx->model);

    case NGX_HTTP_LLM_VAR_FINISH_REASON:
        if (ctx->finish == LLM_FINISH_NONE) {
            v->not_found = 1;
            return NGX_OK;
        }

        s.data = (u_char *) llm_finish_reason_str(ctx->finish);
        s.len = ngx_strlen(s.data);
        return ngx_http_llm_variable_str(r, v, &s);

    case NGX_HTTP_LLM_VAR_PROMPT_TOKENS:
        count = st->prompt_tokens;
        goto integer;

    case NGX_HTTP_LLM_VAR_COMPLETION_TOKENS:
        count = st->completion_tokens;
        goto integer;

    case NGX_HTTP_LLM_VAR_TOTAL_TOKENS:
        count = (int64_t) st->prompt_tokens + st->completion_tokens;
        goto integer;

    case NGX_HTTP_LLM_VAR_CACHED_TOKENS:
        count = st->cached_tokens;
        goto integer;

    case NGX_HTTP_LLM_VAR_SPEC_ACCEPTANCE:
        if (st->num_spec_tokens <= 0) {
            v->not_found = 1;       /* no llm_speculative */
            return NGX_OK;
        }

        /* mean_acceptance_length: 1.0 when nothing was drafted */
        value = st->num_spec_steps > 0
                ? 1.0 + (double) st->num_accepted_tokens / st->num_spec_steps
                : 1.0;
        goto fraction;

    default:
        break;
    }

    /* the timing variables */

    if (!ctx->log_stats) {
        v->not_found = 1;
        return NGX_OK;
    }

    llm_metrics_compute(st, &m);

    switch (data) {

    case NGX_HTTP_LLM_VAR_TTFT:
        has = m.has_ttft;
        value = m.ttft_ms;
        break;

    case NGX_HTTP_LLM_VAR_QUEUE:
        has = m.has_queue;
        value = m.queue_ms;
        break;

    case NGX_HTTP_LLM_VAR_GENERATION:
        has = m.has_generation;
        value = m.generation_ms;
        break;

    case NGX_HTTP_LLM_VAR_ITL:
        has = m.has_mean_itl;
        value = m.mean_itl_ms;
        break;

    default: /* NGX_HTTP_LLM_VAR_TPS */
        has = m.has_tps;
        value = m.tokens_per_second;
        break;
    }

    if (!has) {
        v->not_found = 1;
        return NGX_OK;
    }

fraction:

    p = ngx_pnalloc(r->pool, NGX_INT64_LEN + 5);
    if (p == NULL) {
        return NGX_ERROR;
    }

    v->len = ngx_sprintf(p, "%.3f", value) - p;
    goto done;

integer:

    p = ngx_pnalloc(r->pool, NGX_INT64_LEN);
    if (p == NULL) {
        return NGX_ERROR;
    }

    v->len = ngx_sprintf(p, "%L", count) - p;

done:

    v->data = p;
    v->valid = 1;
    v->no_cacheable = 0;
    v->not_found = 0;

    return NGX_OK;
}


static ngx_int_t
ngx_http_llm_variable_str(ngx_http_request_t *r, ngx_http_variable_value_t *v,
    ngx_str_t *s)
{
    if (s->len == 0) {
        v->not_found = 1;
        return NGX_OK;
    }

    v->data = s->data;
    v->len = s->len;
    v->valid = 1;
    v->no_cacheable = 0;
    v->not_found = 0;

    return NGX_OK;
}
