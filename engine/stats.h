/*
 * stats.h -- the engine's Prometheus numbers: histograms with vLLM's
 * bucket boundaries, observed on the engine thread from the same request
 * timestamps the per-request metrics use.
 */
#ifndef LLM_STATS_H
#define LLM_STATS_H

#include "llm.h"

void llm_stats_init(llm_engine_stats *s, int max_model_len);
void llm_hist_observe(llm_histogram *h, double v);
/* takes back an observation of v (a billed cancel, engine.c) */
void llm_hist_unobserve(llm_histogram *h, double v);

/* A request finished: success counter by reason and the per-request
 * histograms (intervals only where both timestamps exist). */
void llm_stats_observe_finished(llm_engine_stats *s,
    const llm_request_stats *st, const llm_sampling_params *p,
    llm_finish_reason why);

#endif /* LLM_STATS_H */
