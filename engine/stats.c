/*
 * stats.c -- histograms for Prometheus, with vLLM's buckets
 * (vllm/v1/metrics/loggers.py), so existing dashboards work unchanged.
 */
#include <string.h>

#include "stats.h"

static const double  llm_ttft_le[] = {
    0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0,
    2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0, 160.0, 640.0, 2560.0
};

static const double  llm_itl_le[] = {
    0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5,
    5.0, 7.5, 10.0, 20.0, 40.0, 80.0
};

static const double  llm_request_le[] = {
    0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0,
    50.0, 60.0, 120.0, 240.0, 480.0, 960.0, 1920.0, 7680.0
};

static const double  llm_n_le[] = { 1, 2, 5, 10, 20 };

static const double  llm_iteration_le[] = {
    1, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384
};


static void
llm_hist_init(llm_histogram *h, const double *le, int n)
{
    memset(h, 0, sizeof(*h));
    h->n = n;
    memcpy(h->le, le, sizeof(double) * n);
}


/* 1, 2, 5, 10, 20, 50, ... up to max (vLLM's build_1_2_5_buckets). */
static void
llm_hist_init_125(llm_histogram *h, double max)
{
    static const int  mant[3] = { 1, 2, 5 };
    double            scale = 1;
    int               i;

    memset(h, 0, sizeof(*h));
    for ( ;; scale *= 10) {
        for (i = 0; i < 3; i++) {
            if (mant[i] * scale > max || h->n == LLM_HIST_MAX) {
                return;
            }
            h->le[h->n++] = mant[i] * scale;
        }
    }
}


void
llm_stats_init(llm_engine_stats *s, int max_model_len)
{
    memset(s, 0, sizeof(*s));
#define N(a)  ((int) (sizeof(a) / sizeof(a[0])))
    llm_hist_init(&s->hist[LLM_H_TTFT], llm_ttft_le, N(llm_ttft_le));
    llm_hist_init(&s->hist[LLM_H_ITL], llm_itl_le, N(llm_itl_le));
    llm_hist_init(&s->hist[LLM_H_TPOT], llm_itl_le, N(llm_itl_le));
    llm_hist_init(&s->hist[LLM_H_E2E], llm_request_le, N(llm_request_le));
    llm_hist_init(&s->hist[LLM_H_QUEUE], llm_request_le, N(llm_request_le));
    llm_hist_init(&s->hist[LLM_H_PREFILL], llm_request_le,
                  N(llm_request_le));
    llm_hist_init(&s->hist[LLM_H_DECODE], llm_request_le, N(llm_request_le));
    llm_hist_init(&s->hist[LLM_H_INFERENCE], llm_request_le,
                  N(llm_request_le));
    llm_hist_init_125(&s->hist[LLM_H_PROMPT_TOKENS], max_model_len);
    llm_hist_init_125(&s->hist[LLM_H_GENERATION_TOKENS], max_model_len);
    llm_hist_init(&s->hist[LLM_H_PARAMS_N], llm_n_le, N(llm_n_le));
    llm_hist_init_125(&s->hist[LLM_H_PARAMS_MAX_TOKENS], max_model_len);
    llm_hist_init(&s->hist[LLM_H_ITERATION_TOKENS], llm_iteration_le,
                  N(llm_iteration_le));
    llm_hist_init_125(&s->hist[LLM_H_PREFILL_KV_COMPUTED], max_model_len);
    llm_hist_init_125(&s->hist[LLM_H_MAX_GENERATION_TOKENS], max_model_len);
#undef N
}


void
llm_hist_observe(llm_histogram *h, double v)
{
    int  i = 0;

    while (i < h->n && v > h->le[i]) {
        i++;
    }
    h->count[i]++;
    h->sum += v;
    h->total++;
}


void
llm_hist_unobserve(llm_histogram *h, double v)
{
    int  i = 0;

    while (i < h->n && v > h->le[i]) {
        i++;
    }
    if (h->count[i] > 0 && h->total > 0) {
        h->count[i]--;
        h->sum -= v;
        h->total--;
    }
}


void
llm_stats_observe_finished(llm_engine_stats *s, const llm_request_stats *st,
    const llm_sampling_params *p, llm_finish_reason why)
{
    double  q = st->queued, sc = st->scheduled, f = st->first_token;
    double  l = st->last_token;
    int     n = st->completion_tokens;

    s->request_success_total[why]++;
    if (st->arrival > 0 && st->finished > 0) {
        llm_hist_observe(&s->hist[LLM_H_E2E], st->finished - st->arrival);
    }
    if (q > 0 && sc > 0) {
        llm_hist_observe(&s->hist[LLM_H_QUEUE], sc - q);
    }
    if (sc > 0 && f > 0) {
        llm_hist_observe(&s->hist[LLM_H_PREFILL], f - sc);
    }
    if (f > 0 && l > 0) {
        llm_hist_observe(&s->hist[LLM_H_DECODE], l - f);
        llm_hist_observe(&s->hist[LLM_H_TPOT], n > 1 ? (l - f) / (n - 1) : 0);
    }
    if (sc > 0 && l > 0) {
        llm_hist_observe(&s->hist[LLM_H_INFERENCE], l - sc);
    }
    llm_hist_observe(&s->hist[LLM_H_PROMPT_TOKENS], st->prompt_tokens);
    /* the prompt tokens the request computed itself: vLLM's
     * num_prompt_tokens - num_cached_tokens */
    llm_hist_observe(&s->hist[LLM_H_PREFILL_KV_COMPUTED],
                     st->prompt_tokens - st->cached_tokens);
    llm_hist_observe(&s->hist[LLM_H_GENERATION_TOKENS], n);
    if (p->seq_index == 0) {
        llm_hist_observe(&s->hist[LLM_H_PARAMS_N], p->n > 0 ? p->n : 1);
    }
    llm_hist_observe(&s->hist[LLM_H_PARAMS_MAX_TOKENS], st->max_tokens);
}
