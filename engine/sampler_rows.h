/*
 * sampler_rows.h -- describes a request's next-token sampling for a
 * backend that samples on the device (llm_backend.forward_sample): the
 * row's parameters and its sparse logit modifications, built from what
 * engine/sampler.c would apply to the logits on the host.
 */
#ifndef LLM_SAMPLER_ROWS_H
#define LLM_SAMPLER_ROWS_H

#include "backend/backend.h"
#include "sampler.h"

/* A step's rows and modifications, reused across steps. */
typedef struct {
    llm_sample_row  *rows;
    int              n_rows, cap_rows;
    llm_sample_mods  mods;
} llm_sample_rows;

void llm_sample_rows_reset(llm_sample_rows *b);
void llm_sample_rows_free(llm_sample_rows *b);

/* Appends the row of a request: its parameters (logprobs included), the
 * uniform number the host sampler would draw for it (consumed from c->rng
 * only when the row is not greedy, as llm_sample() does), and its
 * modifications, llm_sampler_mods()'s (the host sampler's own list).  s
 * provides the scratch (seen, counts) of the sampler. */
void llm_sample_row_make(llm_sampler *s, const llm_sample_ctx *c,
    llm_sample_rows *b);

/* The spec forward_sample takes. */
llm_sample_spec llm_sample_rows_spec(const llm_sample_rows *b);

#endif /* LLM_SAMPLER_ROWS_H */
