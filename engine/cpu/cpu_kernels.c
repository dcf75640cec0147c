/*
 * cpu_kernels.c -- picks the kernel set the CPU supports.  LLM_CPU_KERNELS
 * (avx512, avx2, generic) restricts the choice, for tests and benchmarks.
 * The AVX-512 set also uses VNNI (the int8 dot products of the block
 * formats), so a CPU with AVX-512 but no VNNI (Skylake-X) gets the AVX2 set.
 */
#include <stdlib.h>
#include <string.h>

#include "cpu_kernels.h"


const llm_cpu_kernels *
llm_cpu_kernels_select(void)
{
    const char  *want = getenv("LLM_CPU_KERNELS");

    if (want && strcmp(want, "generic") == 0) {
        return &llm_cpu_kernels_generic;
    }
#if defined(__x86_64__)
    __builtin_cpu_init();
    if ((want == NULL || strcmp(want, "avx512") == 0)
        && __builtin_cpu_supports("avx512f")
        && __builtin_cpu_supports("avx512bw")
        && __builtin_cpu_supports("avx512vl")
        && __builtin_cpu_supports("avx512dq")
        && __builtin_cpu_supports("avx512vnni"))
    {
        return &llm_cpu_kernels_avx512;
    }
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")
        && __builtin_cpu_supports("f16c"))
    {
        return &llm_cpu_kernels_avx2;
    }
#endif
    return &llm_cpu_kernels_generic;
}


size_t
llm_matmul_scratch_size(int K, int M)
{
    /* LLM_MATMUL_NB widened weight rows, the M tokens packed in blocks of
     * up to 64 (LLM_MATMUL_TMB on the widest ISA), and the accumulators of
     * one weight block by one token block (plus a padded panel); or AMX's
     * 256 tokens as 3 x bf16 and 32 padded bf16 weight rows */
    size_t  tiles = ((size_t) 3 * 256 / 2 + 32 / 2) * (size_t) K;
    size_t  outer = ((size_t) 48 + 12 + (size_t) M + 64) * (size_t) K
                    + (48 + 12) * 64;

    return outer > tiles ? outer : tiles;
}
