/*
 * metrics.c -- vLLM's per-request metrics from the four engine timestamps.
 * Every consumer (JSON bodies, streams, nginx variables, the CLI) reads
 * these, so each definition lives here once.  The guards are vLLM's: plain
 * "> 0" tests on the 0 sentinels, no clamping, no rounding.
 */
#include <string.h>

#include "llm.h"


void
llm_metrics_compute(const llm_request_stats *s, llm_metrics *m)
{
    double  q = s->queued, sc = s->scheduled, f = s->first_token;
    double  l = s->last_token, inference_ms;
    int     n = s->completion_tokens;

    memset(m, 0, sizeof(*m));
    if (sc > 0 && f > 0) {
        m->has_ttft = 1;
        m->ttft_ms = (f - sc) * 1000.0;
    }
    if (f > 0 && l > 0) {
        m->has_generation = 1;
        m->generation_ms = (l - f) * 1000.0;
        if (n > 1) {
            m->has_mean_itl = 1;
            m->mean_itl_ms = (l - f) / (n - 1) * 1000.0;
        }
    }
    if (q > 0 && sc > 0) {
        m->has_queue = 1;
        m->queue_ms = (sc - q) * 1000.0;
    }
    if (sc > 0 && l > 0) {
        inference_ms = (l - sc) * 1000.0;
        if (inference_ms > 0) {
            m->has_tps = 1;
            m->tokens_per_second = n / inference_ms * 1000.0;
        }
    }
}


void
llm_token_phase_metrics(const llm_token_phase *ph, double scheduled,
    llm_metrics *m)
{
    double  span = ph->last - ph->first;

    memset(m, 0, sizeof(*m));
    if (ph->tokens == 0)
        return;
    if (scheduled > 0) {
        m->has_ttft = 1;
        m->ttft_ms = (ph->first - scheduled) * 1000.0;
    }
    m->has_generation = 1;
    m->generation_ms = span * 1000.0;
    if (ph->tokens > 1 && span > 0 && !ph->batched) {
        m->has_mean_itl = 1;
        m->mean_itl_ms = span / (ph->tokens - 1) * 1000.0;
        m->has_tps = 1;
        m->tokens_per_second = (ph->tokens - 1) / span;
    }
}
