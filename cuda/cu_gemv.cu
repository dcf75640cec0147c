/*
 * cu_gemv.cu -- the projections of small decode steps (a few rows), where
 * a GEMM is a matrix-vector product bound by reading the weights once:
 * out[r][row] = sum_k in[r][k] * W[row][k] for r < n <= NR.
 *
 * One warp per weight row: each lane reads 16 bytes (8 T) per chunk, four
 * chunks in flight before any arithmetic, so a multiprocessor keeps tens of
 * kilobytes of loads outstanding (what HBM needs to stream at full rate).
 * The few input rows are re-read from L1/L2.  f32 accumulation, one warp
 * reduction per row at the end: the result equals cuBLAS's to float
 * rounding.  Requires K % 8 == 0 and 16-byte aligned rows (the carving
 * gives 256-byte aligned tensors).
 */
#include "cu_check.cuh"
#include "cu_device.cuh"
#include "cu_kernels.h"

#define LLM_GEMV_WARPS 8
#define LLM_GEMV_UNROLL 4

template <typename T, int NR>
__global__ void __launch_bounds__(32 * LLM_GEMV_WARPS)
llm_k_gemv(const T *__restrict__ x, int n, int K, const T *__restrict__ w,
    int N, float *__restrict__ y)
{
    int           lane = threadIdx.x & 31;
    int           row = blockIdx.x * LLM_GEMV_WARPS + (threadIdx.x >> 5);
    int           k8 = K / 8;
    const T      *wr;
    float         acc[NR], wf[8], xf[8];
    uint4         wv[LLM_GEMV_UNROLL];

    if (row >= N) {
        return;                                 /* the whole warp */
    }
    wr = w + (size_t) row * K;
#pragma unroll
    for (int r = 0; r < NR; r++) {
        acc[r] = 0.0f;
    }
    for (int c = lane; c < k8; c += 32 * LLM_GEMV_UNROLL) {
#pragma unroll
        for (int u = 0; u < LLM_GEMV_UNROLL; u++) {
            if (c + 32 * u < k8) {
                wv[u] = llm_ldg_v<uint4>(wr + 8 * (c + 32 * u));
            }
        }
#pragma unroll
        for (int u = 0; u < LLM_GEMV_UNROLL; u++) {
            int  cc = c + 32 * u;

            if (cc < k8) {
                llm_unpack8<T>(wv[u], wf);
#pragma unroll
                for (int r = 0; r < NR; r++) {
                    if (r < n) {
                        llm_unpack8<T>(llm_ldv<uint4>(x + (size_t) r * K
                                                      + 8 * cc), xf);
#pragma unroll
                        for (int e = 0; e < 8; e++) {
                            acc[r] += wf[e] * xf[e];
                        }
                    }
                }
            }
        }
    }
#pragma unroll
    for (int r = 0; r < NR; r++) {
        acc[r] = llm_warp_sum(acc[r]);
    }
    if (lane == 0) {
#pragma unroll
        for (int r = 0; r < NR; r++) {
            if (r < n) {
                y[(size_t) r * N + row] = acc[r];
            }
        }
    }
}


template <typename T>
static void
llm_gemv_launch(cudaStream_t st, const T *x, int n, int K, const T *w, int N,
    float *y)
{
    unsigned  grid = (unsigned) ((N + LLM_GEMV_WARPS - 1) / LLM_GEMV_WARPS);
    unsigned  threads = 32 * LLM_GEMV_WARPS;

    if (n <= 1) {
        LLM_CU_LAUNCH((llm_k_gemv<T, 1>), grid, threads, 0, st,
                      x, n, K, w, N, y);
    } else if (n <= 2) {
        LLM_CU_LAUNCH((llm_k_gemv<T, 2>), grid, threads, 0, st,
                      x, n, K, w, N, y);
    } else if (n <= 4) {
        LLM_CU_LAUNCH((llm_k_gemv<T, 4>), grid, threads, 0, st,
                      x, n, K, w, N, y);
    } else {
        LLM_CU_LAUNCH((llm_k_gemv<T, 8>), grid, threads, 0, st,
                      x, n, K, w, N, y);
    }
}


extern "C" int
llm_cuk_gemv(cudaStream_t st, int f16, const void *in, int n, int K,
    const void *w, int N, float *out, char *err)
{
    if (n <= 0 || N <= 0) {
        return 0;
    }
    if (n > LLM_CUK_GEMV_MAX || K % 8 != 0) {
        llm_cu_errf(err, "gemv: %d rows or K %d not a multiple of 8", n, K);
        return -1;
    }
    if (f16) {
        llm_gemv_launch(st, (const __half *) in, n, K, (const __half *) w,
                        N, out);
    } else {
        llm_gemv_launch(st, (const __nv_bfloat16 *) in, n, K,
                        (const __nv_bfloat16 *) w, N, out);
    }
    return LLM_CU_LAUNCHED(err) ? -1 : 0;
}
