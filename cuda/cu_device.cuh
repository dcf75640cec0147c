/*
 * cu_device.cuh -- device helpers shared by the kernels: T <-> float
 * conversions (T is __nv_bfloat16 or __half, rounded to nearest even like
 * the host's llm_f32_to_bf16), vector loads of 4/8/16 T elements, warp
 * reductions.
 */
#ifndef LLM_CU_DEVICE_CUH
#define LLM_CU_DEVICE_CUH

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <stdint.h>

#define LLM_CU_FULL_MASK 0xffffffffu

/*
 * Kernel launches: k<<<grid, block, smem, stream>>>(args) on the GPU; in
 * the CPU emulator (cuda/emu, -DLLM_CU_EMU) the arguments are evaluated
 * now, as a launch does, and the kernel runs (or is recorded by a graph
 * capture) through llm_emu_launch.  A kernel name with template arguments
 * holding a comma is written in parentheses.
 */
#ifdef LLM_CU_EMU
#include <functional>

template <typename... P, typename... A>
static inline void
llm_emu_launch_k(void (*k)(P...), dim3 grid, dim3 block, size_t smem,
    cudaStream_t st, A... args)
{
    llm_emu_launch(grid, block, smem, st, (const void *) k,
                   [=] { k(static_cast<P>(args)...); });
}

#define LLM_CU_LAUNCH(k, grid, block, smem, st, ...)                         \
    llm_emu_launch_k(k, dim3(grid), dim3(block), (smem), (st), __VA_ARGS__)
#else
#define LLM_CU_LAUNCH(k, grid, block, smem, st, ...)                         \
    k<<<(grid), (block), (smem), (st)>>>(__VA_ARGS__)
#endif

__device__ __forceinline__ float llm_to_f(__nv_bfloat16 v)
{
    return __bfloat162float(v);
}

__device__ __forceinline__ float llm_to_f(__half v)
{
    return __half2float(v);
}

template <typename T> __device__ __forceinline__ T llm_from_f(float v);

template <> __device__ __forceinline__ __nv_bfloat16 llm_from_f(float v)
{
    return __float2bfloat16_rn(v);
}

template <> __device__ __forceinline__ __half llm_from_f(float v)
{
    return __float2half_rn(v);
}

/* Vector loads and stores (V = uint2, uint4, float4) at addresses that
 * must be sizeof(V)-aligned, as the hardware requires; the emulator checks
 * it (x86 would not fault where the GPU does). */
#ifdef LLM_CU_EMU
void llm_emu_check_align(const void *p, size_t align);
#endif

template <typename V>
__device__ __forceinline__ V llm_ldv(const void *p)
{
#ifdef LLM_CU_EMU
    llm_emu_check_align(p, sizeof(V));
#endif
    return *reinterpret_cast<const V *>(p);
}

template <typename V>
__device__ __forceinline__ V llm_ldg_v(const void *p)
{
#ifdef LLM_CU_EMU
    llm_emu_check_align(p, sizeof(V));
#endif
    return __ldg(reinterpret_cast<const V *>(p));
}

template <typename V>
__device__ __forceinline__ void llm_stv(void *p, V v)
{
#ifdef LLM_CU_EMU
    llm_emu_check_align(p, sizeof(V));
#endif
    *reinterpret_cast<V *>(p) = v;
}

/* two packed T of a 32-bit word to floats */
__device__ __forceinline__ float2 llm_unpack2(uint32_t w, __nv_bfloat16 *)
{
    __nv_bfloat162  h = *reinterpret_cast<__nv_bfloat162 *>(&w);

    return __bfloat1622float2(h);
}

__device__ __forceinline__ float2 llm_unpack2(uint32_t w, __half *)
{
    __half2  h = *reinterpret_cast<__half2 *>(&w);

    return __half22float2(h);
}

/* 8 T elements (16 bytes, 16-byte aligned) to floats */
template <typename T>
__device__ __forceinline__ void llm_unpack8(uint4 v, float *f)
{
    float2  a = llm_unpack2(v.x, (T *) 0), b = llm_unpack2(v.y, (T *) 0);
    float2  c = llm_unpack2(v.z, (T *) 0), d = llm_unpack2(v.w, (T *) 0);

    f[0] = a.x; f[1] = a.y; f[2] = b.x; f[3] = b.y;
    f[4] = c.x; f[5] = c.y; f[6] = d.x; f[7] = d.y;
}

/* N (4, 8 or 16) consecutive T elements at an N*2-byte aligned address */
template <typename T, int N>
__device__ __forceinline__ void llm_load_n(const T *p, float *f)
{
    if (N == 4) {
        uint2   v = llm_ldv<uint2>(p);
        float2  a = llm_unpack2(v.x, (T *) 0), b = llm_unpack2(v.y, (T *) 0);

        f[0] = a.x; f[1] = a.y; f[2] = b.x; f[3] = b.y;
    } else {
#pragma unroll
        for (int i = 0; i < N / 8; i++) {
            llm_unpack8<T>(llm_ldv<uint4>(p + 8 * i), f + 8 * i);
        }
    }
}

__device__ __forceinline__ float llm_warp_sum(float v)
{
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) {
        v += __shfl_xor_sync(LLM_CU_FULL_MASK, v, o);
    }
    return v;
}

/* sum over the block (blockDim.x a multiple of 32, at most 1024); every
 * thread gets the result.  `red` is 32 floats of shared memory. */
__device__ __forceinline__ float llm_block_sum(float v, float *red)
{
    int  lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    int  nw = blockDim.x >> 5;

    v = llm_warp_sum(v);
    __syncthreads();                    /* red may still be read */
    if (lane == 0) {
        red[warp] = v;
    }
    __syncthreads();
    v = lane < nw ? red[lane] : 0.0f;
    return llm_warp_sum(v);
}

#endif /* LLM_CU_DEVICE_CUH */
