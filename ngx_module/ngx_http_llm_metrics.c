
/*
 * ngx_http_llm_metrics.c -- per-request metrics (vLLM's
 * --enable-per-request-metrics) and usage, from the engine's record.
 *
 * The engine stamps four timestamps per request, once per step, on one
 * monotonic clock (0 = unset).  With N = completion tokens:
 *
 *   time_to_first_token_ms  (first_token - scheduled) * 1000
 *   generation_time_ms      (last_token - first_token) * 1000
 *   queue_time_ms           (scheduled - queued) * 1000
 *   mean_itl_ms             generation_time_ms / (N - 1)
 *   tokens_per_second       N / ((last_token - scheduled) * 1000) * 1000
 *
 * each null unless its timestamps are set (mean_itl_ms also needs N > 1,
 * tokens_per_second an interval > 0).  The operations and their order are
 * vLLM's, so the doubles come out the same; they are not rounded.  The
 * access-log variables use the same function (ngx_http_llm_variables.c).
 */


#include "ngx_http_llm_module.h"


void
ngx_http_llm_metrics_compute(const llm_request_stats *s,
    ngx_http_llm_metrics_t *m)
{
    double  inference_ms;
    int     n;

    n = s->completion_tokens;
    m->set = 0;

    if (s->scheduled > 0 && s->first_token > 0) {
        m->ttft_ms = (s->first_token - s->scheduled) * 1000.0;
        m->set |= NGX_HTTP_LLM_M_TTFT;
    }

    if (s->first_token > 0 && s->last_token > 0) {
        m->generation_ms = (s->last_token - s->first_token) * 1000.0;
        m->set |= NGX_HTTP_LLM_M_GENERATION;

        if (n > 1) {
            m->mean_itl_ms = m->generation_ms / (n - 1);
            m->set |= NGX_HTTP_LLM_M_ITL;
        }
    }

    if (s->queued > 0 && s->scheduled > 0) {
        m->queue_ms = (s->scheduled - s->queued) * 1000.0;
        m->set |= NGX_HTTP_LLM_M_QUEUE;
    }

    if (s->scheduled > 0 && s->last_token > 0) {
        inference_ms = (s->last_token - s->scheduled) * 1000.0;

        if (inference_ms > 0) {
            m->tokens_per_second = n / inference_ms * 1000.0;
            m->set |= NGX_HTTP_LLM_M_TPS;
        }
    }
}


/*
 * The "metrics" object.  drop_nulls: the final usage chunk of a stream,
 * which vLLM serializes with exclude_none ("{}" when all are null).
 */

ngx_int_t
ngx_http_llm_metrics_json(ngx_http_llm_json_t *j, const llm_request_stats *s,
    ngx_uint_t drop_nulls)
{
    ngx_uint_t              i, first;
    ngx_http_llm_metrics_t  m;

    static const struct {
        const char  *key;
        ngx_uint_t   flag;
        size_t       offset;
    } fields[] = {
        { "\"time_to_first_token_ms\":", NGX_HTTP_LLM_M_TTFT,
          offsetof(ngx_http_llm_metrics_t, ttft_ms) },
        { "\"generation_time_ms\":", NGX_HTTP_LLM_M_GENERATION,
          offsetof(ngx_http_llm_metrics_t, generation_ms) },
        { "\"queue_time_ms\":", NGX_HTTP_LLM_M_QUEUE,
          offsetof(ngx_http_llm_metrics_t, queue_ms) },
        { "\"mean_itl_ms\":", NGX_HTTP_LLM_M_ITL,
          offsetof(ngx_http_llm_metrics_t, mean_itl_ms) },
        { "\"tokens_per_second\":", NGX_HTTP_LLM_M_TPS,
          offsetof(ngx_http_llm_metrics_t, tokens_per_second) }
    };

    ngx_http_llm_metrics_compute(s, &m);

    ngx_http_llm_json_lit(j, "{");

    first = 1;

    for (i = 0; i < sizeof(fields) / sizeof(fields[0]); i++) {

        if (!(m.set & fields[i].flag) && drop_nulls) {
            continue;
        }

        if (!first) {
            ngx_http_llm_json_lit(j, ",");
        }

        first = 0;

        ngx_http_llm_json_raw(j, fields[i].key, ngx_strlen(fields[i].key));

        if (m.set & fields[i].flag) {
            ngx_http_llm_json_double(j,
                *(double *) ((u_char *) &m + fields[i].offset));

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
