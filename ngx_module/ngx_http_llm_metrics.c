
/*
 * ngx_http_llm_metrics.c -- per-request metrics (vLLM's
 * --enable-per-request-metrics) and usage, from the engine's record.
 *
 * The engine stamps four timestamps per request, once per step, on one
 * monotonic clock (0 = unset); llm_metrics_compute() turns them into the
 * five fields with vLLM's formulas and null rules (engine/metrics.c, the
 * one place they are defined; docs/metrics.md).  This file only writes
 * them: in bodies every key, nulls included; in the final usage chunk of
 * a stream without the nulls.  Values are not rounded.
 */


#include "ngx_http_llm_module.h"


/*
 * The "metrics" object.  drop_nulls: the final usage chunk of a stream,
 * which vLLM serializes with exclude_none ("{}" when all are null).
 */

ngx_int_t
ngx_http_llm_metrics_json(ngx_http_llm_json_t *j, const llm_request_stats *s,
    ngx_uint_t drop_nulls)
{
    double       value[5];
    ngx_int_t    has[5];
    ngx_uint_t   i, first;
    llm_metrics  m;

    /* vLLM's key order */
    static const char  *keys[] = {
        "\"time_to_first_token_ms\":", "\"generation_time_ms\":",
        "\"queue_time_ms\":", "\"mean_itl_ms\":", "\"tokens_per_second\":"
    };

    llm_metrics_compute(s, &m);

    has[0] = m.has_ttft;        value[0] = m.ttft_ms;
    has[1] = m.has_generation;  value[1] = m.generation_ms;
    has[2] = m.has_queue;       value[2] = m.queue_ms;
    has[3] = m.has_mean_itl;    value[3] = m.mean_itl_ms;
    has[4] = m.has_tps;         value[4] = m.tokens_per_second;

    ngx_http_llm_json_lit(j, "{");

    first = 1;

    for (i = 0; i < 5; i++) {

        if (!has[i] && drop_nulls) {
            continue;
        }

        if (!first) {
            ngx_http_llm_json_lit(j, ",");
        }

        first = 0;

        ngx_http_llm_json_raw(j, keys[i], ngx_strlen(keys[i]));

        if (has[i]) {
            ngx_http_llm_json_double(j, value[i]);

        } else {
            ngx_http_llm_json_lit(j, "null");
        }
    }

    ngx_http_llm_json_lit(j, "}");

    return j->failed ? NGX_ERROR : NGX_OK;
}


/*
 * "usage" in vLLM's field order.  full: non-streaming bodies, which vLLM
 * dumps with every field ("prompt_tokens_details": null); stream chunks
 * carry only the three counts.
 */

ngx_int_t
ngx_http_llm_usage_json(ngx_http_llm_json_t *j, ngx_http_llm_ctx_t *ctx,
    ngx_uint_t full)
{
    int64_t  prompt, completion;

    prompt = ctx->stats.prompt_tokens;
    completion = ctx->stats.completion_tokens;

    ngx_http_llm_json_lit(j, "{\"prompt_tokens\":");
    ngx_http_llm_json_int(j, prompt);
    ngx_http_llm_json_lit(j, ",\"total_tokens\":");
    ngx_http_llm_json_int(j, prompt + completion);
    ngx_http_llm_json_lit(j, ",\"completion_tokens\":");
    ngx_http_llm_json_int(j, completion);

    if (full) {
        ngx_http_llm_json_lit(j, ",\"prompt_tokens_details\":null");
    }

    ngx_http_llm_json_lit(j, "}");

    return j->failed ? NGX_ERROR : NGX_OK;
}
