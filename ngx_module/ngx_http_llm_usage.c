
/*
 * ngx_http_llm_usage.c -- usage and the per-request metrics (vLLM's
 * --enable-per-request-metrics and --per-request-spec-decode-metrics) as
 * JSON, from the engine's record.
 *
 * The engine stamps four timestamps per request, once per step, on one
 * monotonic clock (0 = unset); llm_metrics_compute() turns them into the
 * five fields with vLLM's formulas and null rules (engine/metrics.c, the
 * one place they are defined; docs/metrics.md).  This file only writes
 * them: in bodies every key, nulls included; in the final usage chunk of
 * a stream without the nulls.  Values are not rounded.
 *
 * With llm_per_request_spec_decode_metrics the same object also carries
 * "speculative_decoding", whether or not the five times are on (they are
 * null then, as in vLLM, which creates an otherwise empty object).
 */


#include "ngx_http_llm_module.h"


static void ngx_http_llm_spec_json(ngx_http_llm_json_t *j,
    ngx_http_llm_ctx_t *ctx, ngx_uint_t drop_nulls);
static void ngx_http_llm_spec_by_length_json(ngx_http_llm_json_t *j,
    ngx_http_llm_ctx_t *ctx);
static void ngx_http_llm_bytes_json(ngx_http_llm_json_t *j, const u_char *v,
    ngx_uint_t n);
static void ngx_http_llm_usage_counts(ngx_http_llm_json_t *j, int64_t prompt,
    int64_t completion);


/* in vLLM's key order; the variables name them too */

const ngx_http_llm_metric_t  ngx_http_llm_metrics[] = {
    { ngx_string("\"time_to_first_token_ms\":"),
      offsetof(llm_metrics, has_ttft), offsetof(llm_metrics, ttft_ms) },
    { ngx_string("\"generation_time_ms\":"),
      offsetof(llm_metrics, has_generation),
      offsetof(llm_metrics, generation_ms) },
    { ngx_string("\"queue_time_ms\":"),
      offsetof(llm_metrics, has_queue), offsetof(llm_metrics, queue_ms) },
    { ngx_string("\"mean_itl_ms\":"),
      offsetof(llm_metrics, has_mean_itl),
      offsetof(llm_metrics, mean_itl_ms) },
    { ngx_string("\"tokens_per_second\":"),
      offsetof(llm_metrics, has_tps),
      offsetof(llm_metrics, tokens_per_second) }
};


/*
 * The "metrics" object.  drop_nulls: the final usage chunk of a stream,
 * which vLLM serializes with exclude_none ("{}" when all are null).
 */

ngx_int_t
ngx_http_llm_metrics_json(ngx_http_llm_json_t *j, ngx_http_llm_ctx_t *ctx,
    ngx_uint_t drop_nulls)
{
    ngx_uint_t   first;
    llm_metrics  m;

    if (ctx->timing) {
        llm_metrics_compute(&ctx->stats, &m);

    } else {
        ngx_memzero(&m, sizeof(llm_metrics));
    }

    ngx_http_llm_json_lit(j, "{");

    first = ngx_http_llm_metrics_fields(j, &m, drop_nulls, 1, 1);

    if (ctx->spec_metrics != NGX_HTTP_LLM_SPEC_METRICS_NONE) {
        if (!first) {
            ngx_http_llm_json_lit(j, ",");
        }

        first = 0;
        ngx_http_llm_json_lit(j, "\"speculative_decoding\":");
        ngx_http_llm_spec_json(j, ctx, drop_nulls);
    }

    if (ctx->phase_metrics) {
        if (!first) {
            ngx_http_llm_json_lit(j, ",");
        }

        ngx_http_llm_reasoning_metrics_json(j, ctx, drop_nulls);
    }

    ngx_http_llm_json_lit(j, "}");

    return j->failed ? NGX_ERROR : NGX_OK;
}


/*
 * The fields of m in vLLM's order, "," before each unless first;
 * queue: with queue_time_ms (output_token_metrics' categories have none).
 * Returns whether it is still first (nothing written).
 */

ngx_uint_t
ngx_http_llm_metrics_fields(ngx_http_llm_json_t *j, const llm_metrics *m,
    ngx_uint_t drop_nulls, ngx_uint_t queue, ngx_uint_t first)
{
    int                           has;
    ngx_uint_t                    i;
    const ngx_http_llm_metric_t  *f;

    for (i = 0; i < NGX_HTTP_LLM_METRIC_N; i++) {
        if (!queue && i == NGX_HTTP_LLM_METRIC_QUEUE) {
            continue;
        }

        f = &ngx_http_llm_metrics[i];
        has = *(int *) ((u_char *) m + f->has);

        if (!has && drop_nulls) {
            continue;
        }

        if (!first) {
            ngx_http_llm_json_lit(j, ",");
        }

        first = 0;

        ngx_http_llm_json_raw(j, f->key.data, f->key.len);

        if (has) {
            ngx_http_llm_json_double(j, *(double *) ((u_char *) m
                                                      + f->value));

        } else {
            ngx_http_llm_json_lit(j, "null");
        }
    }

    return first;
}


/*
 * vLLM's SpeculativeDecodingMetrics, in its field order.  Only verify steps
 * that had drafts count; with none, the mean acceptance length is 1.0 and
 * the rate 0.0 (vLLM's zero-step rule), the histogram is all zeros and the
 * histogram by draft length is empty.  The per-step lists are shown in
 * "detailed" mode; in "summary" they are null in bodies and dropped in
 * streams.
 */

static void
ngx_http_llm_spec_json(ngx_http_llm_json_t *j, ngx_http_llm_ctx_t *ctx,
    ngx_uint_t drop_nulls)
{
    int                       i, k;
    double                    rate;
    const llm_request_stats  *s;

    s = &ctx->stats;
    k = ngx_min(s->num_spec_tokens, LLM_SPEC_MAX_TOKENS);

    rate = s->num_draft_tokens > 0
           ? (double) s->num_accepted_tokens / s->num_draft_tokens : 0.0;

    ngx_http_llm_json_lit(j, "{\"mean_acceptance_length\":");
    ngx_http_llm_json_double(j, ngx_http_llm_spec_acceptance(s));
    ngx_http_llm_json_lit(j, ",\"draft_acceptance_rate\":");
    ngx_http_llm_json_double(j, rate);

    /* dense, k + 1 entries: [i] = steps that accepted exactly i drafts */
    ngx_http_llm_json_lit(j, ",\"acceptance_histogram\":[");

    for (i = 0; i <= k; i++) {
        if (i) {
            ngx_http_llm_json_lit(j, ",");
        }

        ngx_http_llm_json_int(j, s->acceptance_histogram[i]);
    }

    ngx_http_llm_json_lit(j, "],\"acceptance_histogram_by_draft_length\":");
    ngx_http_llm_spec_by_length_json(j, ctx);

    ngx_http_llm_json_lit(j, ",\"num_spec_steps\":");
    ngx_http_llm_json_int(j, s->num_spec_steps);
    ngx_http_llm_json_lit(j, ",\"num_accepted_draft_tokens\":");
    ngx_http_llm_json_int(j, s->num_accepted_tokens);
    ngx_http_llm_json_lit(j, ",\"num_draft_tokens\":");
    ngx_http_llm_json_int(j, s->num_draft_tokens);
    ngx_http_llm_json_lit(j, ",\"num_spec_tokens\":");
    ngx_http_llm_json_int(j, s->num_spec_tokens);

    if (ctx->spec_metrics == NGX_HTTP_LLM_SPEC_METRICS_DETAILED) {
        ngx_http_llm_json_lit(j, ",\"per_step_accepted\":");
        ngx_http_llm_bytes_json(j, ctx->spec_accepted, ctx->n_spec_step);
        ngx_http_llm_json_lit(j, ",\"per_step_drafted\":");
        ngx_http_llm_bytes_json(j, ctx->spec_drafted, ctx->n_spec_step);

    } else if (!drop_nulls) {
        ngx_http_llm_json_lit(j, ",\"per_step_accepted\":null,"
                              "\"per_step_drafted\":null");
    }

    ngx_http_llm_json_lit(j, "}");
}


/*
 * {"k'": [k' + 1 counts], ...}: for each draft length k' that a verify step
 * proposed, ascending, [j] = its steps that accepted exactly j drafts;
 * counted from the per-step lists, which hold every verify step.  A step
 * without drafts verifies nothing and is not one, and no draft is ever
 * invalidated here (structured output does not speculate): no "0" row.
 */

static void
ngx_http_llm_spec_by_length_json(ngx_http_llm_json_t *j,
    ngx_http_llm_ctx_t *ctx)
{
    ngx_uint_t  i, k, a, first;
    uint32_t    rows[LLM_SPEC_MAX_TOKENS + 1][LLM_SPEC_MAX_TOKENS + 1];
    uint32_t    seen;

    ngx_memzero(rows, sizeof(rows));
    seen = 0;

    for (i = 0; i < ctx->n_spec_step; i++) {
        k = ctx->spec_drafted[i];
        a = ctx->spec_accepted[i];

        if (k <= LLM_SPEC_MAX_TOKENS && a <= k) {
            rows[k][a]++;
            seen |= 1u << k;
        }
    }

    ngx_http_llm_json_lit(j, "{");

    first = 1;

    for (k = 0; k <= LLM_SPEC_MAX_TOKENS; k++) {
        if (!(seen & (1u << k))) {
            continue;
        }

        if (!first) {
            ngx_http_llm_json_lit(j, ",");
        }

        ngx_http_llm_json_lit(j, "\"");
        ngx_http_llm_json_int(j, k);
        ngx_http_llm_json_lit(j, "\":[");

        for (a = 0; a <= k; a++) {
            if (a) {
                ngx_http_llm_json_lit(j, ",");
            }

            ngx_http_llm_json_int(j, rows[k][a]);
        }

        ngx_http_llm_json_lit(j, "]");
        first = 0;
    }

    ngx_http_llm_json_lit(j, "}");
}


/* mean_acceptance_length: 1.0 when no verify step had drafts */

double
ngx_http_llm_spec_acceptance(const llm_request_stats *s)
{
    return s->num_spec_steps > 0
           ? 1.0 + (double) s->num_accepted_tokens / s->num_spec_steps : 1.0;
}


static void
ngx_http_llm_bytes_json(ngx_http_llm_json_t *j, const u_char *v, ngx_uint_t n)
{
    ngx_uint_t  i;

    ngx_http_llm_json_lit(j, "[");

    for (i = 0; i < n; i++) {
        if (i) {
            ngx_http_llm_json_lit(j, ",");
        }

        ngx_http_llm_json_int(j, v[i]);
    }

    ngx_http_llm_json_lit(j, "]");
}


/*
 * The "metrics" of a body: null when off, and for a request of several
 * sequences (n > 1, several prompts), whose timings would belong to one of
 * them only (vLLM's rule).
 */

void
ngx_http_llm_metrics_body(ngx_http_llm_json_t *j, ngx_http_llm_ctx_t *ctx)
{
    if (ctx->metrics && ctx->n_seqs == 1) {
        (void) ngx_http_llm_metrics_json(j, ctx, 0);

    } else {
        ngx_http_llm_json_lit(j, "null");
    }
}


/*
 * "usage" in vLLM's field order, for the whole request (ctx->stats: every
 * prompt once, every sequence's tokens).  A body (NGX_HTTP_LLM_USAGE_BODY)
 * is dumped by vLLM with every field ("prompt_tokens_details": null);
 * stream chunks carry only the three counts.  With prefix caching on, the
 * body and the final usage chunk have {"cached_tokens": n} instead (vLLM:
 * with --enable-prompt-tokens-details; OpenAI: always), 0 included.
 */

ngx_int_t
ngx_http_llm_usage_json(ngx_http_llm_json_t *j, ngx_http_llm_ctx_t *ctx,
    ngx_uint_t what)
{
    ngx_http_llm_usage_counts(j, ctx->stats.prompt_tokens,
                              ctx->stats.completion_tokens);

    if (what != NGX_HTTP_LLM_USAGE_CHUNK && ctx->prefix_caching) {
        ngx_http_llm_json_lit(j, ",\"prompt_tokens_details\":"
                              "{\"cached_tokens\":");
        ngx_http_llm_json_int(j, ctx->stats.cached_tokens);
        ngx_http_llm_json_lit(j, "}");

    } else if (what == NGX_HTTP_LLM_USAGE_BODY) {
        ngx_http_llm_json_lit(j, ",\"prompt_tokens_details\":null");
    }

    if (what != NGX_HTTP_LLM_USAGE_CHUNK) {
        ngx_http_llm_reasoning_usage(j, ctx);
    }

    ngx_http_llm_json_lit(j, "}");

    return j->failed ? NGX_ERROR : NGX_OK;
}


/*
 * The running usage of one choice in a chunk (continuous_usage_stats):
 * its prompt and its tokens, as vLLM counts per choice.
 */

void
ngx_http_llm_usage_seq_json(ngx_http_llm_json_t *j, ngx_http_llm_seq_t *seq)
{
    ngx_http_llm_usage_counts(j, seq->prompt->n, seq->stats.completion_tokens);
    ngx_http_llm_json_lit(j, "}");
}


/* the three counts, without the closing brace */

static void
ngx_http_llm_usage_counts(ngx_http_llm_json_t *j, int64_t prompt,
    int64_t completion)
{
    ngx_http_llm_json_lit(j, "{\"prompt_tokens\":");
    ngx_http_llm_json_int(j, prompt);
    ngx_http_llm_json_lit(j, ",\"total_tokens\":");
    ngx_http_llm_json_int(j, prompt + completion);
    ngx_http_llm_json_lit(j, ",\"completion_tokens\":");
    ngx_http_llm_json_int(j, completion);
}
