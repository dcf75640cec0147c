/*
 * cu_kernels.h -- launchers of the CUDA backend's kernels.  Each enqueues
 * on `st` and returns 0, or -1 with the launch error in err; `f16` selects
 * the __half instantiation of T (else __nv_bfloat16).  Shapes and layouts
 * are those of the ops in cu_state.h, which the kernels implement.
 */
#ifndef LLM_CU_KERNELS_H
#define LLM_CU_KERNELS_H

#include <cuda_runtime_api.h>
#include <stdint.h>

#include "backend/backend.h"
#include "cu_state.h"

#ifdef __cplusplus
extern "C" {
#endif

/* cu_kernels.cu: elementwise and row kernels */
int llm_cuk_embed(cudaStream_t st, int f16, const void *embed,
    const int32_t *tokens, int n, int H, float *x, char *err);
int llm_cuk_rmsnorm(cudaStream_t st, int f16, float *x, const float *delta,
    const float *w, const int32_t *rows, int n, int H, float eps, void *out,
    char *err);
int llm_cuk_qkv_post(cudaStream_t st, int f16, const llm_cu_state *s,
    int layer, const float *qkv, const int32_t *pos, const int32_t *slot,
    int n, void *kc, void *vc, char *err);
int llm_cuk_silu_mul(cudaStream_t st, int f16, const float *gu, int n, int I,
    void *out, char *err);
/* dst (T) = src (dtype) for n elements */
int llm_cuk_convert(cudaStream_t st, int f16, const void *src, int dtype,
    size_t n, void *dst, char *err);
/* dst (T) = uniform(-scale, scale) from (seed, index) */
int llm_cuk_fill_random(cudaStream_t st, int f16, void *dst, size_t n,
    uint64_t seed, float scale, char *err);
int llm_cuk_fill_f32(cudaStream_t st, float *dst, size_t n, float v,
    char *err);

/* cu_sample.cu: samples logits rows 0..n (modified in place) into ids[];
 * rows[i] is row i's sampling (NULL: all greedy), mods its modifications.
 * A row with logprobs >= 0 fills lp[i] from its raw logits and is sampled
 * in scratch row rows[i].lp_slot (V floats each) instead, so it keeps
 * them. */
int llm_cuk_sample(cudaStream_t st, float *logits, int n, int V,
    const llm_sample_row *rows, const llm_sample_mod *mods, int32_t *ids,
    float *scratch, llm_token_logprob *lp, char *err);

/* cu_gemv.cu: out[n][N] = in[n][K] . W[N][K]^T for n <= LLM_CUK_GEMV_MAX
 * rows and K % 8 == 0, reading each weight once */
#define LLM_CUK_GEMV_MAX 8
int llm_cuk_gemv(cudaStream_t st, int f16, const void *in, int n, int K,
    const void *w, int N, float *out, char *err);

/* cu_attention.cu */
int llm_cuk_attn_init(int f16, int hd, int device, char *err);
int llm_cuk_attn_split(cudaStream_t st, int f16, const llm_cu_state *s,
    const llm_cu_md *md, int n_split, int max_splits, const void *kc,
    const void *vc, char *err);
int llm_cuk_attn_prefill(cudaStream_t st, int f16, const llm_cu_state *s,
    const llm_cu_md *md, int n_items, const void *kc, const void *vc,
    char *err);

#ifdef __cplusplus
}
#endif

#endif /* LLM_CU_KERNELS_H */
