/*
 * spec_decode.h -- n-gram speculative decoding (prompt lookup): the
 * scheduler asks for a decoding request's drafts, the step accounts what
 * verification accepted.
 */
#ifndef LLM_SPEC_DECODE_H
#define LLM_SPEC_DECODE_H

#include <stdint.h>

#include "llm.h"
#include "request.h"

typedef struct {
    int  k;                             /* most drafts per step; 0 = off */
    int  lookup_min, lookup_max;        /* suffix lengths tried, longest
                                         * first */
} llm_spec_config;

/* Up to kmax draft tokens into draft[]; returns how many. */
int llm_spec_propose(const int32_t *toks, int L, int kmax, int nmin,
    int nmax, int32_t *draft);

/* Proposes drafts for a decoding request into its token buffer past
 * n_tokens, never past max_model_len, its max_tokens or the step's token
 * budget (the decode token takes one of it); returns k (0: none). */
int llm_spec_schedule_drafts(const llm_spec_config *c, llm_request *r,
    int max_model_len, int budget);

/* Accounts one verify step in the request's stats and the engine's
 * counters. */
void llm_spec_record(llm_engine_stats *counters, llm_request *r, int drafted,
    int accepted);

#endif /* LLM_SPEC_DECODE_H */
