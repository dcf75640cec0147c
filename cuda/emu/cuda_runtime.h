/*
 * cuda_runtime.h (emulation) -- CUDA C++ on the host for cuda/'s kernels:
 * the execution-space keywords, threadIdx/blockIdx/blockDim/gridDim,
 * __syncthreads, __syncwarp, __shfl_xor_sync, __ldg, and kernel launches
 * (LLM_CU_LAUNCH in cu_device.cuh calls llm_emu_launch).
 *
 * A launch runs its blocks one after another; the threads of a block are
 * coroutines (ucontext) switched at every barrier, so each warp really is
 * 32 threads that meet at __syncwarp and at every shuffle, and a block
 * meets at __syncthreads.  __shared__ variables become function statics,
 * which is shared memory when one block runs at a time; dynamic shared
 * memory is a buffer filled with NaN bytes before each block, so a read of
 * anything the block did not write shows.  Shuffles and barriers must be
 * reached by every thread of the warp/block (as the hardware needs):
 * otherwise the emulator reports a deadlock.
 */
#ifndef LLM_EMU_CUDA_RUNTIME_H
#define LLM_EMU_CUDA_RUNTIME_H

#include <math.h>
#include <stdint.h>
#include <string.h>

#include "cuda_bf16.h"
#include "cuda_runtime_api.h"

#ifdef __cplusplus
#include <functional>

#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __launch_bounds__(...)
#define __shared__ static
#define __align__(n) __attribute__((aligned(n)))

struct dim3 {
    unsigned  x, y, z;
    dim3(unsigned a = 1, unsigned b = 1, unsigned c = 1) : x(a), y(b), z(c) {}
};

const dim3 &llm_emu_thread_idx(void);
const dim3 &llm_emu_block_idx(void);
const dim3 &llm_emu_block_dim(void);
const dim3 &llm_emu_grid_dim(void);
#define threadIdx (llm_emu_thread_idx())
#define blockIdx  (llm_emu_block_idx())
#define blockDim  (llm_emu_block_dim())
#define gridDim   (llm_emu_grid_dim())

void llm_emu_syncthreads(void);
void llm_emu_syncwarp(void);
/* lane's 8-byte slot exchange: writes v, returns the slot of lane ^ mask */
uint64_t llm_emu_shfl_xor(uint64_t v, int mask);
unsigned char *llm_emu_dyn_smem(void);

#define __syncthreads() llm_emu_syncthreads()

static inline void __syncwarp(unsigned mask = 0xffffffffu)
{
    (void) mask;
    llm_emu_syncwarp();
}

template <typename T>
static inline T __shfl_xor_sync(unsigned mask, T v, int lane_mask)
{
    uint64_t  u = 0, r;
    T         out;

    (void) mask;
    memcpy(&u, &v, sizeof(T));
    r = llm_emu_shfl_xor(u, lane_mask);
    memcpy(&out, &r, sizeof(T));
    return out;
}

/* round-to-nearest f32 multiply, never fused into an FMA (as on x86-64
 * without -mfma, the host sampler's build) */
static inline float __fmul_rn(float a, float b)
{
    return a * b;
}

template <typename T>
static inline T __ldg(const T *p)
{
    return *p;
}

/* Runs (or, on a capturing stream, records) a launch.  func identifies the
 * kernel for its dynamic shared memory limit (NULL: none requested). */
void llm_emu_launch(dim3 grid, dim3 block, size_t smem, cudaStream_t st,
    const void *func, std::function<void()> body);

/* cudaFuncSetAttribute for any kernel */
cudaError_t llm_emu_func_set_attribute(const void *func,
    enum cudaFuncAttribute a, int v);

template <typename F>
static inline cudaError_t cudaFuncSetAttribute(F *func,
    enum cudaFuncAttribute a, int v)
{
    return llm_emu_func_set_attribute((const void *) func, a, v);
}

/* the runtime's typed overloads */
template <typename T>
static inline cudaError_t cudaMalloc(T **p, size_t n)
{
    return cudaMalloc((void **) p, n);
}

template <typename T>
static inline cudaError_t cudaHostAlloc(T **p, size_t n, unsigned flags)
{
    return cudaHostAlloc((void **) p, n, flags);
}

/* work recorded on a capturing stream, or run now */
void llm_emu_enqueue(cudaStream_t st, std::function<void()> op);

#endif /* __cplusplus */

#endif /* LLM_EMU_CUDA_RUNTIME_H */
