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
#include "model.h"

typedef struct llm_backend llm_backend;

struct llm_backend {
    const char  *name;                  /* "cpu", "cuda:0" */
    int          num_blocks;            /* KV blocks allocated */
    size_t       block_bytes;           /* bytes of one block (all layers, K+V) */

    /* Runs the model on the batch and writes n_logits rows of vocab_size
     * f32 logits.  0 on success, -1 with a message in err. */
    int        (*forward)(llm_backend *b, const llm_batch *batch,
                          float *logits, char *err);
    void       (*free)(llm_backend *b);

    /* Optional (NULL when a backend lacks it; the engine may adopt it for
     * greedy requests): like forward, but writes only the argmax token id
     * of each logits row, computed on the device, so a step copies
     * n_logits ids back instead of n_logits x vocab floats. */
    int        (*forward_greedy)(llm_backend *b, const llm_batch *batch,
                                 int32_t *ids, char *err);
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
