/*
 * params.c -- what a request may ask for, by vLLM's rules: the default
 * sampling parameters, their validation with vLLM's messages (the nginx
 * module shows them to the client as they are), the prompt's limits, and
 * the values a request actually runs with.
 */
#include <math.h>
#include <string.h>

#include "model/model.h"
#include "params.h"
#include "util/util.h"


void
llm_sampling_params_init(llm_sampling_params *p, const llm_model *m)
{
    memset(p, 0, sizeof(*p));
    p->temperature = 1.0;
    p->top_p = 1.0;
    p->repetition_penalty = 1.0;
    p->logprobs = -1;
    p->prompt_logprobs = -1;
    if (m == NULL) {
        return;
    }
    if (m->gen.has_temperature) {
        p->temperature = m->gen.temperature;
    }
    if (m->gen.has_top_p) {
        p->top_p = m->gen.top_p;
    }
    if (m->gen.has_top_k) {
        p->top_k = m->gen.top_k > 0 ? m->gen.top_k : 0;
    }
    if (m->gen.has_min_p) {
        p->min_p = m->gen.min_p;
    }
    if (m->gen.has_repetition_penalty) {
        p->repetition_penalty = m->gen.repetition_penalty;
    }
}


/* vLLM's SamplingParams._verify_args(), in its order. */
int
llm_sampling_params_validate(const llm_sampling_params *p,
    const llm_model *m, const char **param, char *err)
{
    char  f[32];
    int   i;

#define LLM_BAD(name, ...)                                                    \
    do {                                                                      \
        *param = name;                                                        \
        llm_errf(err, __VA_ARGS__);                                           \
        return -1;                                                            \
    } while (0)

    if (!(p->presence_penalty >= -2 && p->presence_penalty <= 2)) {
        LLM_BAD("presence_penalty", "presence_penalty must be in [-2, 2], "
                "got %s.", llm_pyfloat(f, p->presence_penalty));
    }
    if (!(p->frequency_penalty >= -2 && p->frequency_penalty <= 2)) {
        LLM_BAD("frequency_penalty", "frequency_penalty must be in [-2, 2], "
                "got %s.", llm_pyfloat(f, p->frequency_penalty));
    }
    if (!isfinite(p->repetition_penalty)) {
        LLM_BAD("repetition_penalty", "repetition_penalty must be a finite "
                "number");
    }
    if (p->repetition_penalty <= 0) {
        LLM_BAD("repetition_penalty", "repetition_penalty must be greater "
                "than zero, got %s.", llm_pyfloat(f, p->repetition_penalty));
    }
    if (!isfinite(p->temperature)) {
        LLM_BAD("temperature", "temperature must be a finite number");
    }
    if (p->temperature < 0) {
        LLM_BAD("temperature", "temperature must be non-negative, got %s.",
                llm_pyfloat(f, p->temperature));
    }
    if (!(p->top_p > 0 && p->top_p <= 1)) {
        LLM_BAD("top_p", "top_p must be in (0, 1], got %s.",
                llm_pyfloat(f, p->top_p));
    }
    if (p->top_k < 0) {
        LLM_BAD("top_k", "top_k must be 0 (disable), or at least 1, got %d.",
                p->top_k);
    }
    if (!(p->min_p >= 0 && p->min_p <= 1)) {
        LLM_BAD("min_p", "min_p must be in [0, 1], got %s.",
                llm_pyfloat(f, p->min_p));
    }
    if (p->min_tokens < 0) {
        LLM_BAD("min_tokens", "min_tokens must be greater than or equal to "
                "0, got %d.", p->min_tokens);
    }
    if (p->max_tokens > 0 && p->min_tokens > p->max_tokens) {
        LLM_BAD("min_tokens", "min_tokens must be less than or equal to "
                "max_tokens=%d, got %d.", p->max_tokens, p->min_tokens);
    }
    if (p->logprobs > 20) {
        LLM_BAD("logprobs", "Requested sample logprobs of %d, which is "
                "greater than max allowed: 20", p->logprobs);
    }
    if (p->prompt_logprobs < -1) {
        LLM_BAD("prompt_logprobs", "prompt_logprobs must be non-negative or "
                "-1, got %d.", p->prompt_logprobs);
    }
    if (p->prompt_logprobs > 20) {
        LLM_BAD("prompt_logprobs", "Requested prompt logprobs of %d, which "
                "is greater than max allowed: 20", p->prompt_logprobs);
    }
    for (i = 0; i < p->n_stop; i++) {
        if (p->stop[i] == NULL || p->stop[i][0] == '\0') {
            LLM_BAD("stop", "stop cannot contain an empty string.");
        }
    }
    for (i = 0; m && i < p->n_logit_bias; i++) {
        if (p->logit_bias_ids[i] < 0
            || p->logit_bias_ids[i] >= m->config.vocab_size)
        {
            LLM_BAD("logit_bias", "token_id(s) [%d] in logit_bias contain "
                    "out-of-vocab token ids. Vocabulary size: %d",
                    p->logit_bias_ids[i], m->config.vocab_size);
        }
    }
    if (p->structured != NULL && llm_structured_check(p->structured, err) != 0)
    {
        *param = "response_format";
        return -1;
    }
    if (p->cache_salt != NULL && p->cache_salt[0] == '\0') {
        LLM_BAD("cache_salt", "Parameter 'cache_salt' must be a non-empty "
                "string if provided.");
    }
    if (p->allowed_token_ids != NULL && p->n_allowed_token_ids == 0) {
        LLM_BAD("allowed_token_ids", "allowed_token_ids is not None and "
                "empty!");
    }
    for (i = 0; m && i < p->n_allowed_token_ids; i++) {
        if (p->allowed_token_ids[i] < 0
            || p->allowed_token_ids[i] >= m->config.vocab_size)
        {
            LLM_BAD("allowed_token_ids", "allowed_token_ids contains "
                    "out-of-vocab token id!");
        }
    }
    for (i = 0; m && i < p->n_stop_token_ids; i++) {
        if (p->stop_token_ids[i] < 0
            || p->stop_token_ids[i] >= m->config.vocab_size)
        {
            LLM_BAD("stop_token_ids", "stop_token_ids contain out-of-vocab "
                    "token id %d.", p->stop_token_ids[i]);
        }
    }
#undef LLM_BAD
    return 0;
}


int
llm_prompt_validate(const llm_model *m, int max_model_len,
    const int32_t *prompt, int n_prompt, char *err)
{
    int  i;

    if (n_prompt <= 0) {
        llm_errf(err, "The prompt is empty: at least one token is needed.");
        return -1;
    }
    for (i = 0; i < n_prompt; i++) {
        if (prompt[i] < 0 || prompt[i] >= m->config.vocab_size) {
            llm_errf(err, "Token id %d is out of vocabulary (size %d).",
                     prompt[i], m->config.vocab_size);
            return -1;
        }
    }
    if (n_prompt >= max_model_len) {
        llm_errf(err, "This model's maximum context length is %d tokens. "
                 "However, your request has %d input tokens. Please reduce "
                 "the length of the input.", max_model_len, n_prompt);
        return -1;
    }
    return 0;
}


void
llm_sampling_params_resolve(llm_sampling_params *p, int n_prompt,
    int max_model_len)
{
    int  room = max_model_len - n_prompt;

    /* vLLM: tiny positive temperatures are raised to 0.01 */
    if (p->temperature >= 1e-5 && p->temperature < 0.01) {
        p->temperature = 0.01;
    }
    if (p->max_tokens <= 0 || p->max_tokens > room) {
        p->max_tokens = room;
    }
    if (p->min_tokens > p->max_tokens) {
        p->min_tokens = p->max_tokens;
    }
}
