
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
 *
 * One handler per kind of value; "data" says which field.
 */


#include "ngx_http_llm_module.h"


static ngx_http_llm_ctx_t *ngx_http_llm_variable_ctx(ngx_http_request_t *r,
    ngx_http_variable_value_t *v);
static ngx_int_t ngx_http_llm_variable_str(ngx_http_request_t *r,
    ngx_http_variable_value_t *v, uintptr_t data);
static ngx_int_t ngx_http_llm_variable_count(ngx_http_request_t *r,
    ngx_http_variable_value_t *v, uintptr_t data);
static ngx_int_t ngx_http_llm_variable_total(ngx_http_request_t *r,
    ngx_http_variable_value_t *v, uintptr_t data);
static ngx_int_t ngx_http_llm_variable_finish(ngx_http_request_t *r,
    ngx_http_variable_value_t *v, uintptr_t data);
static ngx_int_t ngx_http_llm_variable_spec(ngx_http_request_t *r,
    ngx_http_variable_value_t *v, uintptr_t data);
static ngx_int_t ngx_http_llm_variable_metric(ngx_http_request_t *r,
    ngx_http_variable_value_t *v, uintptr_t data);
static ngx_int_t ngx_http_llm_variable_phase(ngx_http_request_t *r,
    ngx_http_variable_value_t *v, uintptr_t data);
static ngx_int_t ngx_http_llm_variable_content_ttft(ngx_http_request_t *r,
    ngx_http_variable_value_t *v, uintptr_t data);
static ngx_int_t ngx_http_llm_variable_int(ngx_http_request_t *r,
    ngx_http_variable_value_t *v, int64_t value);
static ngx_int_t ngx_http_llm_variable_fraction(ngx_http_request_t *r,
    ngx_http_variable_value_t *v, double value);
static ngx_int_t ngx_http_llm_variable_value(ngx_http_variable_value_t *v,
    u_char *data, size_t len);


static ngx_http_variable_t  ngx_http_llm_vars[] = {

    /* router mode (ngx_http_llm_router.c): computed once per request */
    { ngx_string("llm_prefix_key"), NULL, ngx_http_llm_router_prefix_key,
      0, 0, 0 },

    { ngx_string("llm_request_id"), NULL, ngx_http_llm_variable_str,
      offsetof(ngx_http_llm_ctx_t, id), NGX_HTTP_VAR_NOCACHEABLE, 0 },

    { ngx_string("llm_model"), NULL, ngx_http_llm_variable_str,
      offsetof(ngx_http_llm_ctx_t, model), NGX_HTTP_VAR_NOCACHEABLE, 0 },

    { ngx_string("llm_prompt_tokens"), NULL, ngx_http_llm_variable_count,
      offsetof(llm_request_stats, prompt_tokens),
      NGX_HTTP_VAR_NOCACHEABLE, 0 },

    { ngx_string("llm_completion_tokens"), NULL, ngx_http_llm_variable_count,
      offsetof(llm_request_stats, completion_tokens),
      NGX_HTTP_VAR_NOCACHEABLE, 0 },

    { ngx_string("llm_total_tokens"), NULL, ngx_http_llm_variable_total,
      0, NGX_HTTP_VAR_NOCACHEABLE, 0 },

    { ngx_string("llm_cached_tokens"), NULL, ngx_http_llm_variable_count,
      offsetof(llm_request_stats, cached_tokens),
      NGX_HTTP_VAR_NOCACHEABLE, 0 },

    { ngx_string("llm_finish_reason"), NULL, ngx_http_llm_variable_finish,
      0, NGX_HTTP_VAR_NOCACHEABLE, 0 },

    { ngx_string("llm_spec_acceptance_length"), NULL,
      ngx_http_llm_variable_spec, 0, NGX_HTTP_VAR_NOCACHEABLE, 0 },

    { ngx_string("llm_ttft_ms"), NULL, ngx_http_llm_variable_metric,
      NGX_HTTP_LLM_METRIC_TTFT, NGX_HTTP_VAR_NOCACHEABLE, 0 },

    { ngx_string("llm_queue_time_ms"), NULL, ngx_http_llm_variable_metric,
      NGX_HTTP_LLM_METRIC_QUEUE, NGX_HTTP_VAR_NOCACHEABLE, 0 },

    { ngx_string("llm_generation_time_ms"), NULL,
      ngx_http_llm_variable_metric, NGX_HTTP_LLM_METRIC_GENERATION,
      NGX_HTTP_VAR_NOCACHEABLE, 0 },

    { ngx_string("llm_mean_itl_ms"), NULL, ngx_http_llm_variable_metric,
      NGX_HTTP_LLM_METRIC_ITL, NGX_HTTP_VAR_NOCACHEABLE, 0 },

    { ngx_string("llm_tokens_per_second"), NULL,
      ngx_http_llm_variable_metric, NGX_HTTP_LLM_METRIC_TPS,
      NGX_HTTP_VAR_NOCACHEABLE, 0 },

    /* with llm_reasoning_parser (chat, responses): the reasoning and the
     * answer apart, and the time to the answer's first token */

    { ngx_string("llm_reasoning_tokens"), NULL, ngx_http_llm_variable_phase,
      offsetof(llm_token_phases, reasoning.tokens),
      NGX_HTTP_VAR_NOCACHEABLE, 0 },

    { ngx_string("llm_content_tokens"), NULL, ngx_http_llm_variable_phase,
      offsetof(llm_token_phases, content.tokens),
      NGX_HTTP_VAR_NOCACHEABLE, 0 },

    { ngx_string("llm_content_ttft_ms"), NULL,
      ngx_http_llm_variable_content_ttft, 0, NGX_HTTP_VAR_NOCACHEABLE, 0 },

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


/* the request's ctx (at a router, the node's record: billing.c), or NULL
 * and "-" when the engine never saw it */

static ngx_http_llm_ctx_t *
ngx_http_llm_variable_ctx(ngx_http_request_t *r, ngx_http_variable_value_t *v)
{
    ngx_http_llm_ctx_t  *ctx;

    ctx = ngx_http_get_module_ctx(r, ngx_http_llm_module);

    if (ctx == NULL) {
        ctx = ngx_http_llm_billing_ctx(r);
    }

    if (ctx == NULL || !ctx->submitted) {
        v->not_found = 1;
        return NULL;
    }

    return ctx;
}


/* data: the offset of an ngx_str_t in the ctx */

static ngx_int_t
ngx_http_llm_variable_str(ngx_http_request_t *r,
    ngx_http_variable_value_t *v, uintptr_t data)
{
    ngx_str_t           *s;
    ngx_http_llm_ctx_t  *ctx;

    ctx = ngx_http_llm_variable_ctx(r, v);
    if (ctx == NULL) {
        return NGX_OK;
    }

    s = (ngx_str_t *) ((u_char *) ctx + data);

    if (s->len == 0) {
        v->not_found = 1;
        return NGX_OK;
    }

    return ngx_http_llm_variable_value(v, s->data, s->len);
}


/* data: the offset of a count in llm_request_stats */

static ngx_int_t
ngx_http_llm_variable_count(ngx_http_request_t *r,
    ngx_http_variable_value_t *v, uintptr_t data)
{
    ngx_http_llm_ctx_t  *ctx;

    ctx = ngx_http_llm_variable_ctx(r, v);
    if (ctx == NULL) {
        return NGX_OK;
    }

    return ngx_http_llm_variable_int(r, v,
                                     *(int *) ((u_char *) &ctx->stats + data));
}


static ngx_int_t
ngx_http_llm_variable_total(ngx_http_request_t *r,
    ngx_http_variable_value_t *v, uintptr_t data)
{
    ngx_http_llm_ctx_t  *ctx;

    ctx = ngx_http_llm_variable_ctx(r, v);
    if (ctx == NULL) {
        return NGX_OK;
    }

    return ngx_http_llm_variable_int(r, v,
                                     (int64_t) ctx->stats.prompt_tokens
                                     + ctx->stats.completion_tokens);
}


static ngx_int_t
ngx_http_llm_variable_finish(ngx_http_request_t *r,
    ngx_http_variable_value_t *v, uintptr_t data)
{
    u_char              *p;
    ngx_http_llm_ctx_t  *ctx;

    ctx = ngx_http_llm_variable_ctx(r, v);
    if (ctx == NULL) {
        return NGX_OK;
    }

    if (ctx->finish == LLM_FINISH_NONE) {
        v->not_found = 1;
        return NGX_OK;
    }

    p = (u_char *) llm_finish_reason_str(ctx->finish);

    return ngx_http_llm_variable_value(v, p, ngx_strlen(p));
}


/* mean_acceptance_length; "-" without llm_speculative */

static ngx_int_t
ngx_http_llm_variable_spec(ngx_http_request_t *r,
    ngx_http_variable_value_t *v, uintptr_t data)
{
    ngx_http_llm_ctx_t  *ctx;

    ctx = ngx_http_llm_variable_ctx(r, v);
    if (ctx == NULL) {
        return NGX_OK;
    }

    if (ctx->stats.num_spec_tokens <= 0) {
        v->not_found = 1;
        return NGX_OK;
    }

    return ngx_http_llm_variable_fraction(r, v,
                               ngx_http_llm_spec_acceptance(&ctx->stats));
}


/* data: NGX_HTTP_LLM_METRIC_*, one of the metrics object's fields */

static ngx_int_t
ngx_http_llm_variable_metric(ngx_http_request_t *r,
    ngx_http_variable_value_t *v, uintptr_t data)
{
    llm_metrics                   m;
    ngx_http_llm_ctx_t           *ctx;
    const ngx_http_llm_metric_t  *f;

    ctx = ngx_http_llm_variable_ctx(r, v);
    if (ctx == NULL) {
        return NGX_OK;
    }

    if (!ctx->log_stats) {
        v->not_found = 1;
        return NGX_OK;
    }

    llm_metrics_compute(&ctx->stats, &m);
    f = &ngx_http_llm_metrics[data];

    if (!*(int *) ((u_char *) &m + f->has)) {
        v->not_found = 1;
        return NGX_OK;
    }

    return ngx_http_llm_variable_fraction(r, v,
                                    *(double *) ((u_char *) &m + f->value));
}


/* data: the offset of a count in llm_token_phases; "-" without a
 * reasoning parser */

static ngx_int_t
ngx_http_llm_variable_phase(ngx_http_request_t *r,
    ngx_http_variable_value_t *v, uintptr_t data)
{
    llm_token_phases     ph;
    ngx_http_llm_ctx_t  *ctx;

    ctx = ngx_http_llm_variable_ctx(r, v);
    if (ctx == NULL) {
        return NGX_OK;
    }

    if (!ctx->job->reasoning) {
        v->not_found = 1;
        return NGX_OK;
    }

    ngx_http_llm_reasoning_phases(ctx, &ph);

    return ngx_http_llm_variable_int(r, v, *(int *) ((u_char *) &ph + data));
}


static ngx_int_t
ngx_http_llm_variable_content_ttft(ngx_http_request_t *r,
    ngx_http_variable_value_t *v, uintptr_t data)
{
    double               ms;
    ngx_http_llm_ctx_t  *ctx;

    ctx = ngx_http_llm_variable_ctx(r, v);
    if (ctx == NULL) {
        return NGX_OK;
    }

    if (!ctx->log_stats || !ctx->job->reasoning
        || !ngx_http_llm_reasoning_content_ttft(ctx, &ms))
    {
        v->not_found = 1;
        return NGX_OK;
    }

    return ngx_http_llm_variable_fraction(r, v, ms);
}


static ngx_int_t
ngx_http_llm_variable_int(ngx_http_request_t *r,
    ngx_http_variable_value_t *v, int64_t value)
{
    u_char  *p;

    p = ngx_pnalloc(r->pool, NGX_INT64_LEN);
    if (p == NULL) {
        return NGX_ERROR;
    }

    return ngx_http_llm_variable_value(v, p, ngx_sprintf(p, "%L", value) - p);
}


/* three decimals */

static ngx_int_t
ngx_http_llm_variable_fraction(ngx_http_request_t *r,
    ngx_http_variable_value_t *v, double value)
{
    u_char  *p;

    p = ngx_pnalloc(r->pool, NGX_INT64_LEN + 5);
    if (p == NULL) {
        return NGX_ERROR;
    }

    return ngx_http_llm_variable_value(v, p,
                                       ngx_sprintf(p, "%.3f", value) - p);
}


static ngx_int_t
ngx_http_llm_variable_value(ngx_http_variable_value_t *v, u_char *data,
    size_t len)
{
    v->data = data;
    v->len = len;
    v->valid = 1;
    v->no_cacheable = 0;
    v->not_found = 0;

    return NGX_OK;
}
