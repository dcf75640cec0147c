/*
 * cu_kernels.cu -- the row and elementwise kernels of the forward pass:
 * embedding, RMSNorm fused with the residual add, the q/k/v epilogue (bias,
 * per-head q/k norm, RoPE, cache write), SiLU*up, and the upload helpers
 * (dtype conversion, random fill).  Each mirrors its reference op
 * in cu_ref.c; all arithmetic is f32, T only where a tensor is stored.
 */
#include <float.h>
#include <limits.h>
#include <math.h>

#include "cu_check.cuh"
#include "cu_device.cuh"
#include "cu_kernels.h"
#include "model/safetensors.h"


/* ---- embedding ----------------------------------------------------------- */

template <typename T>
__global__ void
llm_k_embed(const T *__restrict__ e, const int32_t *__restrict__ tokens,
    int H, float *__restrict__ x)
{
    const T  *row = e + (size_t) tokens[blockIdx.x] * H;
    float    *out = x + (size_t) blockIdx.x * H;

    for (int i = threadIdx.x; i < H; i += blockDim.x) {
        out[i] = llm_to_f(row[i]);
    }
}


/* ---- RMSNorm with the residual add --------------------------------------- */

/* Row r = rows ? rows[blockIdx.x] : blockIdx.x:  x[r] += delta[r] (when
 * delta), out[blockIdx.x] = T(x[r] / sqrt(mean(x[r]^2) + eps) * w). */
template <typename T>
__global__ void
llm_k_rmsnorm(float *__restrict__ x, const float *__restrict__ delta,
    const float *__restrict__ w, const int32_t *__restrict__ rows, int H,
    float eps, T *__restrict__ out)
{
    __shared__ float  red[32];
    int               r = rows ? rows[blockIdx.x] : blockIdx.x;
    float            *xr = x + (size_t) r * H;
    T                *o = out + (size_t) blockIdx.x * H;
    float             ss = 0.0f, v, inv;

    for (int i = threadIdx.x; i < H; i += blockDim.x) {
        v = xr[i];
        if (delta) {
            v += delta[(size_t) r * H + i];
            xr[i] = v;
        }
        ss += v * v;
    }
    ss = llm_block_sum(ss, red);
    inv = 1.0f / sqrtf(ss / (float) H + eps);
    for (int i = threadIdx.x; i < H; i += blockDim.x) {
        o[i] = llm_from_f<T>(xr[i] * inv * w[i]);
    }
}


/* ---- q/k/v epilogue ------------------------------------------------------- */

/*
 * One warp per (row, head) of the nh q heads, nkv k heads and nkv v heads
 * of qkv (f32, row stride (nh + 2 nkv) hd).  Lane l holds the RoPE pairs
 * (j, j + hd/2) for j = l, l + 32, ... < hd/2 (hd <= 256: 4 pairs).  Bias,
 * then the per-head RMSNorm (Qwen3), then RoPE (q and k), then q goes to
 * `q` and k/v to the cache at the row's slot, [block][kv head][16][hd].
 */
template <typename T>
__global__ void __launch_bounds__(128)
llm_k_qkv_post(const float *__restrict__ qkv, const float *__restrict__ bias,
    const float *__restrict__ qn, const float *__restrict__ kn,
    const float *__restrict__ inv_freq, const int32_t *__restrict__ pos,
    const int32_t *__restrict__ slot, int nh, int nkv, int hd, float eps,
    T *__restrict__ q, T *__restrict__ kc, T *__restrict__ vc)
{
    int           i = blockIdx.x, lane = threadIdx.x & 31;
    int           h = blockIdx.y * 4 + (threadIdx.x >> 5);
    int           half = hd / 2, j, s, g;
    const float  *src, *b, *w;
    float         lo[4], hi[4], ss = 0.0f, r, a, cs, sn, x1, x2;
    bool          is_q, is_k;
    T            *dst;

    if (h >= nh + 2 * nkv) {
        return;                                 /* the whole warp */
    }
    is_q = h < nh;
    is_k = !is_q && h < nh + nkv;
    src = qkv + (size_t) i * (nh + 2 * nkv) * hd + (size_t) h * hd;
    b = bias ? bias + (size_t) h * hd : NULL;

#pragma unroll
    for (int k = 0; k < 4; k++) {
        j = lane + 32 * k;
        lo[k] = hi[k] = 0.0f;
        if (j < half) {
            lo[k] = src[j] + (b ? b[j] : 0.0f);
            hi[k] = src[j + half] + (b ? b[j + half] : 0.0f);
            ss += lo[k] * lo[k] + hi[k] * hi[k];
        }
    }
    if ((is_q || is_k) && qn != NULL) {         /* uniform over the warp */
        ss = llm_warp_sum(ss);
        r = 1.0f / sqrtf(ss / (float) hd + eps);
        w = is_q ? qn : kn;
#pragma unroll
        for (int k = 0; k < 4; k++) {
            j = lane + 32 * k;
            if (j < half) {
                lo[k] = lo[k] * r * w[j];
                hi[k] = hi[k] * r * w[j + half];
            }
        }
    }
    if (is_q || is_k) {
#pragma unroll
        for (int k = 0; k < 4; k++) {
            j = lane + 32 * k;
            if (j < half) {
                a = (float) pos[i] * inv_freq[j];
                cs = cosf(a);
                sn = sinf(a);
                x1 = lo[k];
                x2 = hi[k];
                lo[k] = x1 * cs - x2 * sn;
                hi[k] = x2 * cs + x1 * sn;
            }
        }
    }
    if (is_q) {
        dst = q + (size_t) i * nh * hd + (size_t) h * hd;
    } else {
        g = (h - nh) % nkv;
        s = slot[i];
        dst = (is_k ? kc : vc)
              + (((size_t) (s / 16) * nkv + g) * 16 + s % 16) * hd;
    }
#pragma unroll
    for (int k = 0; k < 4; k++) {
        j = lane + 32 * k;
        if (j < half) {
            dst[j] = llm_from_f<T>(lo[k]);
            dst[j + half] = llm_from_f<T>(hi[k]);
        }
    }
}


/* ---- SiLU * up ------------------------------------------------------------ */

template <typename T>
__global__ void
llm_k_silu_mul(const float *__restrict__ gu, size_t total, int I,
    T *__restrict__ out)
{
    size_t  idx, i, j;
    float   g, u;

    for (idx = (size_t) blockIdx.x * blockDim.x + threadIdx.x; idx < total;
         idx += (size_t) gridDim.x * blockDim.x)
    {
        i = idx / I;
        j = idx % I;
        g = gu[i * 2 * I + j];
        u = gu[i * 2 * I + I + j];
        out[idx] = llm_from_f<T>(g / (1.0f + expf(-g)) * u);
    }
}


/* ---- upload helpers -------------------------------------------------------- */

template <typename T>
__global__ void
llm_k_convert(const void *__restrict__ src, int dtype, size_t n,
    T *__restrict__ dst)
{
    size_t  i;
    float   v;

    for (i = (size_t) blockIdx.x * blockDim.x + threadIdx.x; i < n;
         i += (size_t) gridDim.x * blockDim.x)
    {
        if (dtype == LLM_DTYPE_F32) {
            v = ((const float *) src)[i];
        } else if (dtype == LLM_DTYPE_F16) {
            v = __half2float(((const __half *) src)[i]);
        } else {
            v = __bfloat162float(((const __nv_bfloat16 *) src)[i]);
        }
        dst[i] = llm_from_f<T>(v);
    }
}


__device__ __forceinline__ uint64_t
llm_mix64(uint64_t z)
{
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}


template <typename T>
__global__ void
llm_k_fill_random(T *__restrict__ dst, size_t n, uint64_t seed, float scale)
{
    size_t  i;
    float   u;

    for (i = (size_t) blockIdx.x * blockDim.x + threadIdx.x; i < n;
         i += (size_t) gridDim.x * blockDim.x)
    {
        u = (float) (llm_mix64(seed + 0x9e3779b97f4a7c15ULL * (i + 1)) >> 40)
            * (1.0f / 16777216.0f);
        dst[i] = llm_from_f<T>((2.0f * u - 1.0f) * scale);
    }
}


__global__ void
llm_k_fill_f32(float *__restrict__ dst, size_t n, float v)
{
    size_t  i;

    for (i = (size_t) blockIdx.x * blockDim.x + threadIdx.x; i < n;
         i += (size_t) gridDim.x * blockDim.x)
    {
        dst[i] = v;
    }
}


/* ---- launchers ------------------------------------------------------------- */

static unsigned
llm_grid_for(size_t n, int threads)
{
    size_t  g = (n + threads - 1) / threads;

    return (unsigned) (g < 1 ? 1 : g > 65536 ? 65536 : g);
}


extern "C" int
llm_cuk_embed(cudaStream_t st, int f16, const void *embed,
    const int32_t *tokens, int n, int H, float *x, char *err)
{
    if (n <= 0) {
        return 0;
    }
    if (f16) {
        LLM_CU_LAUNCH(llm_k_embed<__half>, n, 256, 0, st,
            (const __half *) embed, tokens, H, x);
    } else {
        LLM_CU_LAUNCH(llm_k_embed<__nv_bfloat16>, n, 256, 0, st,
            (const __nv_bfloat16 *) embed, tokens, H, x);
    }
    return LLM_CU_LAUNCHED(err) ? -1 : 0;
}


extern "C" int
llm_cuk_rmsnorm(cudaStream_t st, int f16, float *x, const float *delta,
    const float *w, const int32_t *rows, int n, int H, float eps, void *out,
    char *err)
{
    int  threads = H >= 4096 ? 1024 : H >= 1024 ? 512 : 256;

    if (n <= 0) {
        return 0;
    }
    if (f16) {
        LLM_CU_LAUNCH(llm_k_rmsnorm<__half>, n, threads, 0, st,
            x, delta, w, rows, H, eps, (__half *) out);
    } else {
        LLM_CU_LAUNCH(llm_k_rmsnorm<__nv_bfloat16>, n, threads, 0, st,
            x, delta, w, rows, H, eps, (__nv_bfloat16 *) out);
    }
    return LLM_CU_LAUNCHED(err) ? -1 : 0;
}


extern "C" int
llm_cuk_qkv_post(cudaStream_t st, int f16, const llm_cu_state *s, int layer,
    const float *qkv, const int32_t *pos, const int32_t *slot, int n,
    void *kc, void *vc, char *err)
{
    const llm_cu_layer  *l = &s->layers[layer];
    dim3                 grid(n, (s->nh + 2 * s->nkv + 3) / 4);

    if (n <= 0) {
        return 0;
    }
    if (f16) {
        LLM_CU_LAUNCH(llm_k_qkv_post<__half>, grid, 128, 0, st,
            qkv, l->bqkv, l->q_norm, l->k_norm, s->inv_freq, pos, slot,
            s->nh, s->nkv, s->hd, s->c->rms_eps, (__half *) s->q,
            (__half *) kc, (__half *) vc);
    } else {
        LLM_CU_LAUNCH(llm_k_qkv_post<__nv_bfloat16>, grid, 128, 0, st,
            qkv, l->bqkv, l->q_norm, l->k_norm, s->inv_freq, pos, slot,
            s->nh, s->nkv, s->hd, s->c->rms_eps, (__nv_bfloat16 *) s->q,
            (__nv_bfloat16 *) kc, (__nv_bfloat16 *) vc);
    }
    return LLM_CU_LAUNCHED(err) ? -1 : 0;
}


extern "C" int
llm_cuk_silu_mul(cudaStream_t st, int f16, const float *gu, int n, int I,
    void *out, char *err)
{
    size_t  total = (size_t) n * I;

    if (n <= 0) {
        return 0;
    }
    if (f16) {
        LLM_CU_LAUNCH(llm_k_silu_mul<__half>,
            llm_grid_for(total, 256), 256, 0, st,
            gu, total, I, (__half *) out);
    } else {
        LLM_CU_LAUNCH(llm_k_silu_mul<__nv_bfloat16>,
            llm_grid_for(total, 256), 256, 0, st,
            gu, total, I, (__nv_bfloat16 *) out);
    }
    return LLM_CU_LAUNCHED(err) ? -1 : 0;
}


extern "C" int
llm_cuk_convert(cudaStream_t st, int f16, const void *src, int dtype,
    size_t n, void *dst, char *err)
{
    if (n == 0) {
        return 0;
    }
    if (f16) {
        LLM_CU_LAUNCH(llm_k_convert<__half>,
            llm_grid_for(n, 256), 256, 0, st,
            src, dtype, n, (__half *) dst);
    } else {
        LLM_CU_LAUNCH(llm_k_convert<__nv_bfloat16>,
            llm_grid_for(n, 256), 256, 0, st,
            src, dtype, n, (__nv_bfloat16 *) dst);
    }
    return LLM_CU_LAUNCHED(err) ? -1 : 0;
}


extern "C" int
llm_cuk_fill_random(cudaStream_t st, int f16, void *dst, size_t n,
    uint64_t seed, float scale, char *err)
{
    if (n == 0) {
        return 0;
    }
    if (f16) {
        LLM_CU_LAUNCH(llm_k_fill_random<__half>,
            llm_grid_for(n, 256), 256, 0, st,
            (__half *) dst, n, seed, scale);
    } else {
        LLM_CU_LAUNCH(llm_k_fill_random<__nv_bfloat16>,
            llm_grid_for(n, 256), 256, 0, st,
            (__nv_bfloat16 *) dst, n, seed, scale);
    }
    return LLM_CU_LAUNCHED(err) ? -1 : 0;
}


extern "C" int
llm_cuk_fill_f32(cudaStream_t st, float *dst, size_t n, float v, char *err)
{
    if (n == 0) {
        return 0;
    }
    LLM_CU_LAUNCH(llm_k_fill_f32, llm_grid_for(n, 256), 256, 0, st,
            dst, n, v);
    return LLM_CU_LAUNCHED(err) ? -1 : 0;
}
