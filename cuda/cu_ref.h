/*
 * cu_ref.h -- the host reference of the CUDA backend: the same planning and
 * forward pass (cu_plan.c, cu_forward.c) with every op computed by plain
 * loops on the CPU.  Not part of libllm_cuda.so: the tests link it.
 *
 *   exact = 1: no rounding anywhere; the result must equal the CPU
 *              backend's up to float summation order (t/unit/test_cuda_ref.c);
 *   exact = 0: T tensors are rounded to bf16 (f16 for f16 models) exactly
 *              where the GPU stores them, so each GPU kernel must match its
 *              op here to float accuracy (t/gpu/test_kernels.c).
 */
#ifndef LLM_CU_REF_H
#define LLM_CU_REF_H

#include "backend/backend.h"
#include "cu_plan.h"

typedef struct {
    int    exact;
    int    cap_tok;             /* rows per step */
    int    cap_logits;
    int    prefill_min_q;
    int    graph_max;           /* pad decode steps like the GPU's graphs */
    int    n_sm;
} llm_cu_ref_opts;

/* The defaults of the GPU backend (cu_backend.cu reads the same). */
void llm_cu_ref_opts_default(llm_cu_ref_opts *o);

/* KV blocks: cfg->min_blocks (or cfg->kv_bytes' worth of f32 blocks, if
 * more), plus the padding block. */
llm_backend *llm_cu_ref_create(const llm_model *m,
    const llm_backend_config *cfg, const llm_cu_ref_opts *o, char *err);

llm_cu_state *llm_cu_ref_state(llm_backend *b);

/* The reference ops; their ctx is the backend returned above. */
extern const llm_cu_ops llm_cu_ref_ops;

/* v as the GPU would store it in a T tensor of this backend. */
float llm_cu_ref_round(llm_backend *b, float v);

#endif /* LLM_CU_REF_H */
