/*
 * cuda_bf16.h (emulation) -- bf16 and f16 storage types with CUDA's
 * conversion functions (round to nearest even), for the emulated kernels.
 */
#ifndef LLM_EMU_CUDA_BF16_H
#define LLM_EMU_CUDA_BF16_H

#include <stdint.h>
#include <string.h>

struct __nv_bfloat16 { uint16_t x; };
struct __half { uint16_t x; };
struct __nv_bfloat162 { __nv_bfloat16 x, y; };
struct __half2 { __half x, y; };
struct float2 { float x, y; };
struct __attribute__((aligned(16))) float4 { float x, y, z, w; };
struct __attribute__((aligned(8))) uint2 { unsigned x, y; };
struct __attribute__((aligned(16))) uint4 { unsigned x, y, z, w; };

static inline uint4 make_uint4(unsigned a, unsigned b, unsigned c,
    unsigned d)
{
    uint4  v = { a, b, c, d };
    return v;
}

static inline float __bfloat162float(__nv_bfloat16 h)
{
    uint32_t  u = (uint32_t) h.x << 16;
    float     f;

    memcpy(&f, &u, 4);
    return f;
}

static inline __nv_bfloat16 __float2bfloat16_rn(float f)
{
    uint32_t       u;
    __nv_bfloat16  h;

    memcpy(&u, &f, 4);
    if ((u & 0x7fffffff) > 0x7f800000) {
        h.x = (uint16_t) ((u >> 16) | 0x40);
    } else {
        h.x = (uint16_t) ((u + 0x7fff + ((u >> 16) & 1)) >> 16);
    }
    return h;
}

static inline float __half2float(__half h)
{
    uint32_t  s = (uint32_t) (h.x & 0x8000) << 16, e = (h.x >> 10) & 0x1f;
    uint32_t  m = h.x & 0x3ff, u;
    float     f;

    if (e == 0) {
        f = (float) m * (1.0f / 16777216.0f);       /* 2^-24 */
        memcpy(&u, &f, 4);
        u |= s;
    } else if (e == 31) {
        u = s | 0x7f800000 | (m << 13);
    } else {
        u = s | ((e + 112) << 23) | (m << 13);
    }
    memcpy(&f, &u, 4);
    return f;
}

static inline __half __float2half_rn(float f)
{
    uint32_t  u, s, m;
    int       e;
    __half    h;

    memcpy(&u, &f, 4);
    s = (u >> 16) & 0x8000;
    if ((u & 0x7fffffff) > 0x7f800000) {
        h.x = (uint16_t) (s | 0x7e00);
        return h;
    }
    e = (int) ((u >> 23) & 0xff) - 127 + 15;
    m = u & 0x7fffff;
    if (e >= 31) {
        h.x = (uint16_t) (s | 0x7c00);
    } else if (e <= 0) {
        /* subnormal: shift in the implicit bit, round to nearest even */
        uint32_t  mm, shift, half, r;

        if (e < -10) {
            h.x = (uint16_t) s;
            return h;
        }
        mm = m | 0x800000;
        shift = (uint32_t) (14 - e);
        half = 1u << (shift - 1);
        r = mm >> shift;
        if ((mm & ((1u << shift) - 1)) > half
            || ((mm & ((1u << shift) - 1)) == half && (r & 1)))
        {
            r++;
        }
        h.x = (uint16_t) (s | r);
    } else {
        uint32_t  r = ((uint32_t) e << 10) | (m >> 13);

        if ((m & 0x1fff) > 0x1000 || ((m & 0x1fff) == 0x1000 && (r & 1))) {
            r++;
        }
        h.x = (uint16_t) (s | r);
    }
    return h;
}

static inline float2 __bfloat1622float2(__nv_bfloat162 v)
{
    float2  f = { __bfloat162float(v.x), __bfloat162float(v.y) };
    return f;
}

static inline float2 __half22float2(__half2 v)
{
    float2  f = { __half2float(v.x), __half2float(v.y) };
    return f;
}

#endif /* LLM_EMU_CUDA_BF16_H */
