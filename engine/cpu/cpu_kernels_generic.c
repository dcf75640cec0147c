/*
 * cpu_kernels_generic.c -- the CPU kernels in portable C, using GCC's
 * vector extensions (4 f32 lanes: SSE, NEON, or scalar code).
 */
#include <stdint.h>
#include <string.h>

#include "util/util.h"

typedef float llm_v4 __attribute__((vector_size(16)));


static inline llm_v4
llm_v4_load(const float *p)
{
    llm_v4  v;

    memcpy(&v, p, sizeof(v));
    return v;
}


static inline void
llm_v4_store(float *p, llm_v4 v)
{
    memcpy(p, &v, sizeof(v));
}


static inline llm_v4
llm_v4_bf16(const uint16_t *p)
{
    llm_v4  v = { llm_bf16_to_f32(p[0]), llm_bf16_to_f32(p[1]),
                  llm_bf16_to_f32(p[2]), llm_bf16_to_f32(p[3]) };

    return v;
}


static inline llm_v4
llm_v4_f16(const uint16_t *p)
{
    llm_v4  v = { llm_f16_to_f32(p[0]), llm_f16_to_f32(p[1]),
                  llm_f16_to_f32(p[2]), llm_f16_to_f32(p[3]) };

    return v;
}

#define VEC                 llm_v4
#define VLEN                4
#define VZERO()             ((llm_v4) { 0, 0, 0, 0 })
#define VSET1(x)            ((llm_v4) { (x), (x), (x), (x) })
#define VLOAD(p)            llm_v4_load(p)
#define VSTORE(p, v)        llm_v4_store(p, v)
#define VFMA(a, b, c)       ((a) * (b) + (c))
#define VADD(a, b)          ((a) + (b))
#define VMUL(a, b)          ((a) * (b))
#define VHSUM(v)            (((v)[0] + (v)[2]) + ((v)[1] + (v)[3]))
#define VLOAD_BF16(p)       llm_v4_bf16(p)
#define VLOAD_F16(p)        llm_v4_f16(p)
#define MR                  2
#define NR                  4
#define TNR2                6
#define TMV                 2
#define KSUFFIX(name)       name##_generic
#define KISA                "generic"

#include "cpu_kernels_impl.h"
