/*
 * cpu_kernels_avx2.c -- the CPU kernels for AVX2 + FMA + F16C (8 f32 lanes).
 */
#include <immintrin.h>
#include <stdint.h>


static inline float
llm_hsum256(__m256 v)
{
    __m128  s = _mm_add_ps(_mm256_castps256_ps128(v),
                           _mm256_extractf128_ps(v, 1));

    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

#define VEC                 __m256
#define VLEN                8
#define VZERO()             _mm256_setzero_ps()
#define VSET1(x)            _mm256_set1_ps(x)
#define VLOAD(p)            _mm256_loadu_ps(p)
#define VSTORE(p, v)        _mm256_storeu_ps(p, v)
#define VFMA(a, b, c)       _mm256_fmadd_ps(a, b, c)
#define VADD(a, b)          _mm256_add_ps(a, b)
#define VMUL(a, b)          _mm256_mul_ps(a, b)
#define VHSUM(v)            llm_hsum256(v)
#define VLOAD_BF16(p)                                                         \
    _mm256_castsi256_ps(_mm256_slli_epi32(                                    \
        _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *) (p))), 16))
#define VLOAD_F16(p)                                                          \
    _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *) (p)))
#define MR                  2
#define NR                  5
#define TNR2                6
#define TMV                 2
#define KSUFFIX(name)       name##_avx2
#define KISA                "avx2"

#include "cpu_kernels_impl.h"
