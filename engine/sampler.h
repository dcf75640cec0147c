/*
 * sampler.h -- turns one row of logits into a token id for a request:
 * penalties, logit bias, min_tokens, temperature, top-k, top-p, min-p and a
 * seeded random draw; plus the logprobs of the raw logits when asked.
 */
#ifndef LLM_SAMPLER_H
#define LLM_SAMPLER_H

#include <stdint.h>

#include "backend/backend.h"
#include "grammar/grammar.h"
#include "grammar/grammar_mask.h"
#include "llm.h"
#include "tokenizer/tokenizer.h"

/* xoshiro256**: small, fast, and reproducible for a given seed. */
typedef struct {
    uint64_t  s[4];
} llm_rng;

void llm_rng_seed(llm_rng *r, uint64_t seed);
uint64_t llm_rng_next(llm_rng *r);
double llm_rng_uniform(llm_rng *r);              /* [0, 1) */

/* What the sampler needs to know of a request's history. */
typedef struct {
    const llm_sampling_params *p;
    const int32_t  *prompt;
    int             n_prompt;
    const int32_t  *output;
    int             n_output;
    const int32_t  *eos_ids;                     /* the model's EOS ids */
    int             n_eos;
    llm_rng        *rng;
    /* bad_words as token sequences, one after the other */
    const int32_t          *bad_ids;
    const int32_t          *bad_lens;
    int                     n_bad;
    /* structured output: the grammar, its state after the output so far
     * and the vocabulary's tries; NULL when the output is free */
    const llm_grammar        *grammar;
    const llm_grammar_state  *gstate;
    const llm_gvocab         *gvocab;
} llm_sample_ctx;

/* A growing list of modifications (the host's scratch, or a step's rows
 * for a backend that samples on the device). */
typedef struct {
    llm_sample_mod  *mods;
    int              n, cap;
} llm_sample_mods;

/* How many of each kind llm_sampler_mods() appended, in this order. */
typedef struct {
    int32_t      n_rep, n_sub, n_bias, n_mask;
} llm_sample_mod_counts;

/* Per-thread working memory, reused across calls. */
typedef struct {
    int             vocab;
    float          *probs;
    int32_t        *idx;
    uint8_t        *seen;                        /* penalty bookkeeping */
    int32_t        *counts;
    llm_sample_mods mods;
    llm_gmask_scratch gmask;                     /* structured output's */
} llm_sampler;

void llm_sampler_init(llm_sampler *s, int vocab);
void llm_sampler_free(llm_sampler *s);

/* The one definition of what a request's history does to its logits, in
 * vLLM's order: the repetition penalty of every distinct prompt and output
 * token, the frequency/presence penalty of every distinct output token
 * (with its count), logit_bias in order (ids may repeat), and the EOS and
 * stop ids while min_tokens is not reached.  Appended to m; the host
 * sampler applies them with llm_sampler_mods_apply(), the CUDA backend the
 * same list on the device. */
llm_sample_mod_counts llm_sampler_mods(llm_sampler *s,
    const llm_sample_ctx *c, llm_sample_mods *m);
void llm_sampler_mods_apply(float *logits, const llm_sample_mod *mods,
    llm_sample_mod_counts n);
void llm_sample_mods_free(llm_sample_mods *m);

/* Samples a token from logits (modified in place).  When lp is not NULL,
 * fills it with the chosen token's logprob and the top `p->logprobs`
 * alternatives, computed from the raw logits (vLLM's default). */
int32_t llm_sample(llm_sampler *s, float *logits, const llm_sample_ctx *c,
    llm_token_logprob *lp);

/* The logprob record of token `id` in a row of raw logits (not modified):
 * its log-softmax value and rank, and the n_top (<= 20) most likely tokens.
 * llm_sample() uses it for sampled tokens, the engine for prompt tokens. */
void llm_sampler_logprobs(llm_sampler *s, const float *raw, int32_t id,
    int n_top, llm_token_logprob *lp);

/* Speculative decoding's verification of one draft token at this position:
 * returns the token to emit and sets *accepted when it is the draft.
 * Greedy: the target's argmax.  Sampling: rejection sampling, so emitted
 * tokens follow the target distribution exactly. */
int32_t llm_sample_verify(llm_sampler *s, float *logits,
    const llm_sample_ctx *c, int32_t draft, int *accepted,
    llm_token_logprob *lp);

/* What llm_sample() would draw from, for tests of other samplers (the
 * device's): applies penalties, bias and masks to logits, then leaves the
 * candidates after temperature, min-p, top-k and top-p in s->idx[0..k)
 * (in the order the draw walks them) with unnormalised probabilities in
 * s->probs[id] and their sum in *total.  Returns k; 0 for a greedy
 * request or when nothing is finite.  Consumes no random numbers. */
int llm_sample_candidates(llm_sampler *s, float *logits,
    const llm_sample_ctx *c, double *total);

#endif /* LLM_SAMPLER_H */
