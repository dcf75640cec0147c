/*
 * params.h -- a request's prompt and parameters checked and resolved by
 * vLLM's rules (llm.h has the public half: llm_sampling_params_init() and
 * llm_sampling_params_validate()).
 */
#ifndef LLM_PARAMS_H
#define LLM_PARAMS_H

#include <stdint.h>

#include "llm.h"

/* 0, or -1 with the message in err: the prompt is empty, holds an id
 * outside the vocabulary, or leaves no room below max_model_len. */
int llm_prompt_validate(const llm_model *m, int max_model_len,
    const int32_t *prompt, int n_prompt, char *err);

/* The values a valid request runs with: tiny positive temperatures raised
 * to 0.01, max_tokens capped to what fits after the prompt (0: all of it),
 * min_tokens to max_tokens. */
void llm_sampling_params_resolve(llm_sampling_params *p, int n_prompt,
    int max_model_len);

#endif /* LLM_PARAMS_H */
