/*
 * cu_backend.h -- the entry points of libllm_cuda.so (the only symbols it
 * exports, see exports.map) and the hooks the GPU checks use when they link
 * the backend's objects directly (t/gpu/test_kernels.c, t/gpu/bench.c).
 */
#ifndef LLM_CU_BACKEND_H
#define LLM_CU_BACKEND_H

#include <stdint.h>

#include "backend/backend.h"
#include "cu_state.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Defaults of the backend's knobs; each can be overridden by the
 * environment variable named after it (docs/cuda.md). */
#define LLM_CU_DEFAULT_MAX_TOKENS     2048   /* LLM_CUDA_MAX_TOKENS */
#define LLM_CU_DEFAULT_MAX_LOGITS     256    /* LLM_CUDA_MAX_LOGITS */
#define LLM_CU_DEFAULT_PREFILL_MIN_Q  8      /* LLM_CUDA_PREFILL_MIN_Q */
#define LLM_CU_DEFAULT_GEMV_MAX       4      /* LLM_CUDA_GEMV_MAX */
#define LLM_CU_DEFAULT_GRAPH_MAX      256    /* LLM_CUDA_GRAPHS=0: none */

/* What llm_backend_open() looks up (engine/backend.h). */
llm_backend *llm_backend_cuda_create(const llm_model *m,
    const llm_backend_config *cfg, char *err);
int llm_cuda_device_count(char *err);

/* A backend whose weights are generated on the device (uniform, scaled by
 * 1/sqrt(fan in), norms 1) instead of read from m: only m->config and
 * m->weights.layers (n_layers zeroed entries) are needed.  For benchmarks
 * of real shapes without their files. */
llm_backend *llm_backend_cuda_create_random(const llm_model *m,
    const llm_backend_config *cfg, uint64_t seed, char *err);

/* ---- hooks for the GPU checks (not exported by the shared object) ---- */

typedef struct {
    char     device[256];               /* "NVIDIA H200" */
    int      n_sm;
    double   weights_mib, buffers_mib, kv_mib;
    int      kv_blocks;
    int      graphs;                    /* CUDA graphs on */
    int      gemv_max;
    int      cap_tok;
} llm_cu_info;

void llm_cu_backend_info(llm_backend *b, llm_cu_info *info);
llm_cu_state *llm_cu_backend_state(llm_backend *b);
/* the GPU ops; their ctx is the backend */
extern const llm_cu_ops llm_cu_gpu_ops;
/* the message of the last failed op */
const char *llm_cu_backend_error(llm_backend *b);
/* waits for the backend's stream */
int llm_cu_backend_sync(llm_backend *b, char *err);
/* rows up to which projections use the GEMV kernel; graphs on or off */
void llm_cu_backend_tune(llm_backend *b, int gemv_max, int graphs);
/* the backend's stream (a cudaStream_t) */
void *llm_cu_backend_stream(llm_backend *b);

#ifdef __cplusplus
}
#endif

#endif /* LLM_CU_BACKEND_H */
