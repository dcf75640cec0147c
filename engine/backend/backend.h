/*
 * backend.h -- the interface every compute backend implements (CPU here in
 * engine/, CUDA in cuda/).  The scheduler and the sampler never know which
 * one runs.  A backend owns the weights' working copies (if any) and the
 * paged KV cache; the engine addresses the cache only by block ids.
 */
#ifndef LLM_BACKEND_H
#define LLM_BACKEND_H

#include <stddef.h>

#include "batch.h"
#include "llm.h"
#include "model/model.h"

typedef struct llm_backend llm_backend;

/* One logit modification: a token id and an amount. */
typedef struct {
    int32_t      id;
    float        v;                     /* rep: the penalty; sub, bias: the amount */
} llm_sample_mod;

/*
 * What forward_sample needs to sample one logits row as engine/sampler.c's
 * llm_sample() would (its order, vLLM's): the row's logit modifications,
 * then greedy argmax, or temperature -> min-p -> top-k -> top-p -> a draw.
 * The numbers are the host sampler's own, converted as it converts them,
 * so that the device computes the same float values.
 */
typedef struct {
    double       u;                     /* uniform [0, 1) from the request's rng */
    double       min_p;                 /* 0: off */
    double       top_p;                 /* 1: off */
    float        inv_t;                 /* (float) (1 / temperature) */
    int32_t      greedy;                /* temperature < 1e-5: argmax */
    int32_t      top_k;                 /* <= 0: off */
    /* the row's modifications: mods[mod_off ..], n_rep repetition
     * penalties (distinct ids), then n_sub frequency/presence subtractions
     * (distinct ids), then n_bias logit_bias additions (in order, ids may
     * repeat), then n_mask ids set to -inf (min_tokens) */
    int32_t      mod_off, n_rep, n_sub, n_bias, n_mask;
    int32_t      logprobs;              /* -1, or top-N alternatives (0..20) */
    int32_t      lp_slot;               /* the backend's: its scratch row */
} llm_sample_row;

typedef struct {
    const llm_sample_row  *rows;        /* one per logits row, batch order */
    const llm_sample_mod  *mods;
    int                    n_mods;
} llm_sample_spec;

struct llm_backend {
    const char  *name;                  /* "cpu", "cuda:0" */
    int          num_blocks;            /* KV blocks allocated */
    size_t       block_bytes;           /* bytes of one block (all layers, K+V) */

    /* Runs the model on the batch and writes n_logits rows of vocab_size
     * f32 logits.  0 on success, -1 with a message in err. */
    int        (*forward)(llm_backend *b, const llm_batch *batch,
                          float *logits, char *err);
    void       (*free)(llm_backend *b);

    /* Optional (NULL when a backend lacks it, as the CPU's does): like
     * forward, but samples every logits row on the device and writes only
     * the token ids, ids[i] for logits row i, so a step copies n_logits
     * ids back instead of n_logits x vocab floats; and lp[i] for the rows
     * whose logprobs >= 0 (lp may be NULL when none does), from the raw
     * logits as llm_sample() computes them.  spec == NULL samples every
     * row greedily.  The engine uses it for steps without speculative
     * verification rows; see docs/cuda.md. */
    int        (*forward_sample)(llm_backend *b, const llm_batch *batch,
                                 const llm_sample_spec *spec, int32_t *ids,
                                 llm_token_logprob *lp, char *err);
};

typedef struct {
    int          threads;               /* CPU: compute threads */
    size_t       kv_bytes;              /* KV pool size */
    int          min_blocks;            /* never fewer blocks than this */
    int          device;                /* CUDA: device index */
    double       gpu_memory_utilization;
} llm_backend_config;

llm_backend *llm_backend_cpu_create(const llm_model *m,
    const llm_backend_config *cfg, char *err);

/* The backend for llm_device ("auto", "cpu", "cuda:N"): auto takes the GPU
 * when libllm_cuda.so loads and finds one, else the CPU.  `reason` (may be
 * NULL) says which was chosen and why, for the log.  NULL + err on failure.
 * libllm_cuda.so exports llm_backend_cuda_create() (same signature as the
 * CPU's) and `int llm_cuda_device_count(char *err)` (-1 + err on failure). */
llm_backend *llm_backend_open(const llm_model *m, const char *device,
    const llm_backend_config *cfg, char *reason, char *err);

/* KV bytes per token of this model (all layers, K and V, f32 on the CPU). */
size_t llm_kv_bytes_per_token(const llm_config *c, size_t elem_size);

#endif /* LLM_BACKEND_H */
