/*
 * cpu_kernels_avx512.c -- the CPU kernels for AVX-512 (16 f32 lanes).
 */
#include <immintrin.h>
#include <stdint.h>

#define VEC                 __m512
#define VLEN                16
#define VZERO()             _mm512_setzero_ps()
#define VSET1(x)            _mm512_set1_ps(x)
#define VLOAD(p)            _mm512_loadu_ps(p)
#define VSTORE(p, v)        _mm512_storeu_ps(p, v)
#define VFMA(a, b, c)       _mm512_fmadd_ps(a, b, c)
#define VADD(a, b)          _mm512_add_ps(a, b)
#define VMUL(a, b)          _mm512_mul_ps(a, b)
#define VHSUM(v)            _mm512_reduce_add_ps(v)
#define VLOAD_BF16(p)                                                         \
    _mm512_castsi512_ps(_mm512_slli_epi32(                                    \
        _mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i *) (p))), 16))
#define VLOAD_F16(p)                                                          \
    _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *) (p)))
#define MR                  4
#define NR                  6
#define TNR2                8
#define TMV                 4
#define KSUFFIX(name)       name##_avx512
#define KISA                "avx512"

#include "cpu_kernels_impl.h"
