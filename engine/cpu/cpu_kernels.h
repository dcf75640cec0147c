/*
 * cpu_kernels.h -- the CPU backend's hot loops, compiled once per
 * instruction set (cpu_kernels_avx512.c, _avx2.c, _generic.c, all from the
 * same cpu_kernels_impl.h) and picked at run time from what the CPU has.
 *
 * Numerics: activations and accumulation are f32; weights are widened from
 * their stored dtype as they are read.  Every matmul output is one dot
 * product accumulated lane-wise in the same chunk order and reduced by the
 * same horizontal sum whatever the batch size or tiling, so a token's
 * result does not depend on what else is in the batch.
 */
#ifndef LLM_CPU_KERNELS_H
#define LLM_CPU_KERNELS_H

#include "model/model.h"

typedef struct {
    const char  *name;

    /* y[m * ldy + n] = sum_k x[m * ldx + k] * W[n][k]
     * for m in [0, M), n in [n0, n1).  scratch: llm_matmul_scratch_size(K,
     * M) floats, private to the calling thread. */
    void   (*matmul)(const float *x, int ldx, int M, const llm_tensor *w,
                     int n0, int n1, float *y, int ldy, float *scratch);

    float  (*dot)(const float *a, const float *b, int n);
    /* y += a * x */
    void   (*axpy)(float *y, float a, const float *x, int n);
    void   (*scale)(float *y, float a, int n);
    /* out = x / sqrt(mean(x^2) + eps) * w */
    void   (*rmsnorm)(float *out, const float *x, const float *w, int n,
                      float eps);
    /* out[i] = silu(g[i]) * u[i] */
    void   (*silu_mul)(float *out, const float *g, const float *u, int n);
    /* y[i] += x[i] */
    void   (*add)(float *y, const float *x, int n);
    /* row of a weight matrix to f32 (embedding lookup) */
    void   (*row_to_f32)(float *out, const llm_tensor *w, int row);
    /* NULL, or: the bytes of w in a layout this set's matmul reads faster
     * (qpack.h), 0 when it has none; with dst (that many bytes), *out = w
     * in that layout at dst */
    size_t (*pack)(const llm_tensor *w, llm_tensor *out, void *dst);
} llm_cpu_kernels;

const llm_cpu_kernels *llm_cpu_kernels_select(void);

/* floats of scratch one thread needs for a matmul of M tokens over K inputs */
size_t llm_matmul_scratch_size(int K, int M);

extern const llm_cpu_kernels llm_cpu_kernels_avx512;
extern const llm_cpu_kernels llm_cpu_kernels_avx2;
extern const llm_cpu_kernels llm_cpu_kernels_generic;

#endif /* LLM_CPU_KERNELS_H */
