/*
 * quant.c -- dequantization and quantization of ggml's block formats
 * (quant.h).  The arithmetic follows ggml's reference code operation by
 * operation (the same float expressions in the same order, no fused
 * multiply-adds: this file is compiled without -mfma), which is what makes
 * the results bit-identical to ggml's.
 */
#include <math.h>
#include <string.h>

#include "quant.h"
#include "util/util.h"


/* ggml's nearest_int: round to nearest, ties to even, |x| < 2^22 */
static inline int
llm_nearest_int(float x)
{
    float  v = x + 12582912.f;
    int    i;

    memcpy(&i, &v, sizeof(i));
    return (i & 0x007fffff) - 0x00400000;
}


static void
llm_dequantize_q8_0(const llm_block_q8_0 *x, float *y, size_t nb)
{
    size_t  i;
    int     j;
    float   d;

    for (i = 0; i < nb; i++) {
        d = llm_f16_to_f32(x[i].d);
        for (j = 0; j < LLM_QK; j++) {
            *y++ = x[i].qs[j] * d;
        }
    }
}


static void
llm_dequantize_q4_0(const llm_block_q4_0 *x, float *y, size_t nb)
{
    size_t  i;
    int     j;
    float   d;

    for (i = 0; i < nb; i++) {
        d = llm_f16_to_f32(x[i].d);
        for (j = 0; j < LLM_QK / 2; j++) {
            y[j] = ((x[i].qs[j] & 0x0F) - 8) * d;
            y[j + LLM_QK / 2] = ((x[i].qs[j] >> 4) - 8) * d;
        }
        y += LLM_QK;
    }
}


/* Q4_K and Q5_K (qh NULL for Q4_K): 4 groups of 64 elements, the first 32
 * from the low nibbles and the next 32 from the high ones */
static void
llm_dequantize_qk_minmax(const uint8_t *scales, const uint8_t *qs,
    const uint8_t *qh, uint16_t d16, uint16_t dmin16, float *y)
{
    float    d = llm_f16_to_f32(d16), min = llm_f16_to_f32(dmin16);
    float    d1, m1, d2, m2;
    uint8_t  sc, m, u1 = 1, u2 = 2;
    int      j, l, is = 0;

    for (j = 0; j < LLM_QK_K; j += 64) {
        llm_q4k_scale_min(is, scales, &sc, &m);
        d1 = d * sc;
        m1 = min * m;
        llm_q4k_scale_min(is + 1, scales, &sc, &m);
        d2 = d * sc;
        m2 = min * m;
        for (l = 0; l < 32; l++) {
            *y++ = d1 * ((qs[l] & 0xF) + (qh && (qh[l] & u1) ? 16 : 0)) - m1;
        }
        for (l = 0; l < 32; l++) {
            *y++ = d2 * ((qs[l] >> 4) + (qh && (qh[l] & u2) ? 16 : 0)) - m2;
        }
        qs += 32;
        is += 2;
        u1 <<= 2;
        u2 <<= 2;
    }
}


static void
llm_dequantize_q6_K(const llm_block_q6_K *x, float *y, size_t nb)
{
    const uint8_t  *ql, *qh;
    const int8_t   *sc;
    size_t          i;
    int             n, l, is;
    float           d;

    for (i = 0; i < nb; i++) {
        d = llm_f16_to_f32(x[i].d);
        ql = x[i].ql;
        qh = x[i].qh;
        sc = x[i].scales;
        for (n = 0; n < LLM_QK_K; n += 128) {
            for (l = 0; l < 32; l++) {
                is = l / 16;
                y[l] = d * sc[is]
                       * (int8_t) (((ql[l] & 0xF) | ((qh[l] & 3) << 4)) - 32);
                y[l + 32] = d * sc[is + 2]
                       * (int8_t) (((ql[l + 32] & 0xF)
                                    | (((qh[l] >> 2) & 3) << 4)) - 32);
                y[l + 64] = d * sc[is + 4]
                       * (int8_t) (((ql[l] >> 4)
                                    | (((qh[l] >> 4) & 3) << 4)) - 32);
                y[l + 96] = d * sc[is + 6]
                       * (int8_t) (((ql[l + 32] >> 4)
                                    | (((qh[l] >> 6) & 3) << 4)) - 32);
            }
            y += 128;
            ql += 64;
            qh += 32;
            sc += 8;
        }
    }
}


void
llm_dequantize_row(llm_dtype t, const void *x, float *y, size_t k)
{
    size_t  i, nb = k / (size_t) llm_dtype_block(t);

    switch (t) {
    case LLM_DTYPE_Q8_0:
        llm_dequantize_q8_0(x, y, nb);
        break;
    case LLM_DTYPE_Q4_0:
        llm_dequantize_q4_0(x, y, nb);
        break;
    case LLM_DTYPE_Q4_K:
        for (i = 0; i < nb; i++) {
            const llm_block_q4_K  *b = (const llm_block_q4_K *) x + i;

            llm_dequantize_qk_minmax(b->scales, b->qs, NULL, b->d, b->dmin,
                                     y + i * LLM_QK_K);
        }
        break;
    case LLM_DTYPE_Q5_K:
        for (i = 0; i < nb; i++) {
            const llm_block_q5_K  *b = (const llm_block_q5_K *) x + i;

            llm_dequantize_qk_minmax(b->scales, b->qs, b->qh, b->d, b->dmin,
                                     y + i * LLM_QK_K);
        }
        break;
    case LLM_DTYPE_Q6_K:
        llm_dequantize_q6_K(x, y, nb);
        break;
    case LLM_DTYPE_F32:
        memcpy(y, x, k * sizeof(float));
        break;
    case LLM_DTYPE_F16:
        for (i = 0; i < k; i++) {
            y[i] = llm_f16_to_f32(((const uint16_t *) x)[i]);
        }
        break;
    case LLM_DTYPE_BF16:
        for (i = 0; i < k; i++) {
            y[i] = llm_bf16_to_f32(((const uint16_t *) x)[i]);
        }
        break;
    default:
        break;
    }
}


/* quantize_row_q8_0_ref: d = amax / 127, q = round(x / d) */
static void
llm_quantize_q8_0(const float *x, llm_block_q8_0 *y, size_t nb)
{
    size_t  i;
    int     j;
    float   amax, d, id;

    for (i = 0; i < nb; i++, x += LLM_QK) {
        amax = 0.0f;
        for (j = 0; j < LLM_QK; j++) {
            amax = amax > fabsf(x[j]) ? amax : fabsf(x[j]);
        }
        d = amax / 127;
        id = d ? 1.0f / d : 0.0f;
        y[i].d = llm_f32_to_f16(d);
        for (j = 0; j < LLM_QK; j++) {
            y[i].qs[j] = (int8_t) roundf(x[j] * id);
        }
    }
}


/* quantize_row_q4_0_ref: d = (the value of largest magnitude) / -8,
 * q = min(15, (int) (x / d + 8.5)) */
static void
llm_quantize_q4_0(const float *x, llm_block_q4_0 *y, size_t nb)
{
    size_t   i;
    int      j;
    float    amax, max, d, id;
    int      q0, q1;

    for (i = 0; i < nb; i++, x += LLM_QK) {
        amax = 0.0f;
        max = 0.0f;
        for (j = 0; j < LLM_QK; j++) {
            if (amax < fabsf(x[j])) {
                amax = fabsf(x[j]);
                max = x[j];
            }
        }
        d = max / -8;
        id = d ? 1.0f / d : 0.0f;
        y[i].d = llm_f32_to_f16(d);
        for (j = 0; j < LLM_QK / 2; j++) {
            q0 = (int8_t) (x[j] * id + 8.5f);
            q1 = (int8_t) (x[j + LLM_QK / 2] * id + 8.5f);
            q0 = q0 < 15 ? q0 : 15;
            q1 = q1 < 15 ? q1 : 15;
            y[i].qs[j] = (uint8_t) (q0 | (q1 << 4));
        }
    }
}


/*
 * make_qkx2_quants (use_mad false) for the 8 sub-blocks of 32 elements of a
 * Q4_K block at once, one sub-block per vector lane: levels L in [0, nmax]
 * with x ~ scale * L - min, the scale and min chosen by weighted least
 * squares over nstep + 1 trial inverse scales.  Every lane performs ggml's
 * scalar operations in ggml's order (the branches become selects), so the
 * results are its bits; the lanes only take the latency of the sums'
 * dependency chains in parallel (8x faster than one sub-block at a time).
 * x and w are [32][8] (element, sub-block); out: the scales, the (positive)
 * mins, L [8][32].
 */
typedef float    llm_v8f __attribute__((vector_size(32)));
typedef int32_t  llm_v8i __attribute__((vector_size(32)));

#define LLM_V8_SEL(m, a, b)                                                   \
    ((llm_v8f) (((m) & (llm_v8i) (a)) | (~(m) & (llm_v8i) (b))))


/* (float) MAX(0, MIN(nmax, nearest_int(v))): clamping before rounding gives
 * the same level for an integer nmax, and adding and subtracting 1.5 * 2^23
 * rounds to the nearest integer, ties to even, as ggml's nearest_int */
#define LLM_V8_LEVEL(v, nmax)                                                 \
    ((LLM_V8_SEL((v) > (nmax), zero + (nmax),                                 \
                 LLM_V8_SEL((v) < 0, zero, (v))) + 12582912.f) - 12582912.f)


static inline __attribute__((always_inline)) void
llm_qkx2_8(int nmax, const llm_v8f *x, const llm_v8f *w, uint8_t L[8][32],
    llm_v8f *the_scale, llm_v8f *the_min, float rmin, float rdelta,
    int nstep)
{
    llm_v8f  min = x[0], max = x[0], sum_w = w[0], sum_x = sum_w * x[0];
    llm_v8f  iscale, scale, best_error, diff, sum_l, sum_l2, sum_xl, D, lf;
    llm_v8f  this_scale, this_min, cur_error, zero = { 0 };
    llm_v8f  Li[32], Laux[32];
    llm_v8i  flat, better, m;
    float    fmax = (float) nmax;
    int      i, is, k;

    for (i = 1; i < 32; i++) {
        min = LLM_V8_SEL(x[i] < min, x[i], min);
        max = LLM_V8_SEL(x[i] > max, x[i], max);
        sum_w += w[i];
        sum_x += w[i] * x[i];
    }
    min = LLM_V8_SEL(min > 0, zero, min);
    flat = max == min;
    iscale = fmax / (max - min);
    scale = 1 / iscale;
    best_error = zero;
    for (i = 0; i < 32; i++) {
        Li[i] = LLM_V8_LEVEL(iscale * (x[i] - min), fmax);
        diff = scale * Li[i] + min - x[i];
        best_error += w[i] * (diff * diff);
    }
    for (is = 0; is <= nstep; is++) {
        iscale = (rmin + rdelta * is + fmax) / (max - min);
        sum_l = zero;
        sum_l2 = zero;
        sum_xl = zero;
        for (i = 0; i < 32; i++) {
            Laux[i] = LLM_V8_LEVEL(iscale * (x[i] - min), fmax);
            lf = Laux[i];
            sum_l += w[i] * lf;
            sum_l2 += w[i] * lf * lf;
            sum_xl += w[i] * lf * x[i];
        }
        D = sum_w * sum_l2 - sum_l * sum_l;
        this_scale = (sum_w * sum_xl - sum_x * sum_l) / D;
        this_min = (sum_l2 * sum_x - sum_l * sum_xl) / D;
        m = this_min > 0;
        this_min = LLM_V8_SEL(m, zero, this_min);
        this_scale = LLM_V8_SEL(m, sum_xl / sum_l2, this_scale);
        cur_error = zero;
        for (i = 0; i < 32; i++) {
            diff = this_scale * Laux[i] + this_min - x[i];
            cur_error += w[i] * (diff * diff);
        }
        better = (D > 0) & (cur_error < best_error) & ~flat;
        for (i = 0; i < 32; i++) {
            Li[i] = LLM_V8_SEL(better, Laux[i], Li[i]);
        }
        best_error = LLM_V8_SEL(better, cur_error, best_error);
        scale = LLM_V8_SEL(better, this_scale, scale);
        min = LLM_V8_SEL(better, this_min, min);
    }
    for (k = 0; k < 8; k++) {
        for (i = 0; i < 32; i++) {
            L[k][i] = flat[k] ? 0 : (uint8_t) Li[i][k];   /* 0..nmax */
        }
    }
    *the_min = -min;
    *the_scale = LLM_V8_SEL(flat, zero, scale);
}


/* quantize_row_q4_K_ref: per 32-element sub-block a scale and a min
 * (llm_qkx2, weights |x| + rms), both quantized to 6 bits against the
 * block's largest, then the levels recomputed with the rounded scales */
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
/* the lanes in one AVX2 instruction where the CPU has it (ifunc); without
 * FMA, so every operation stays ggml's */
__attribute__((target_clones("avx2", "default")))
#endif
static void
llm_quantize_q4_K(const float *x, llm_block_q4_K *y, size_t nb)
{
    uint8_t   L[LLM_QK_K], ls, lm, sc, m, *q;
    llm_v8f   xt[32], wt[32], sv, mv;
    float     mins[8], scales[8];
    float     max_scale, max_min, sum_x2, av_x, inv_scale, inv_min, d, dm;
    size_t    i;
    int       j, l, v;

    for (i = 0; i < nb; i++, x += LLM_QK_K) {
        max_scale = 0;
        max_min = 0;
        for (j = 0; j < 8; j++) {
            sum_x2 = 0;
            for (l = 0; l < 32; l++) {
                sum_x2 += x[32 * j + l] * x[32 * j + l];
            }
            av_x = sqrtf(sum_x2 / 32);
            for (l = 0; l < 32; l++) {
                xt[l][j] = x[32 * j + l];
                wt[l][j] = av_x + fabsf(x[32 * j + l]);
            }
        }
        llm_qkx2_8(15, xt, wt, (uint8_t (*)[32]) L, &sv, &mv, -1.f, 0.1f, 20);
        for (j = 0; j < 8; j++) {
            scales[j] = sv[j];
            mins[j] = mv[j];
            if (scales[j] > max_scale) {
                max_scale = scales[j];
            }
            if (mins[j] > max_min) {
                max_min = mins[j];
            }
        }
        inv_scale = max_scale > 0 ? 63.f / max_scale : 0.f;
        inv_min = max_min > 0 ? 63.f / max_min : 0.f;
        memset(y[i].scales, 0, sizeof(y[i].scales));
        for (j = 0; j < 8; j++) {
            ls = (uint8_t) llm_nearest_int(inv_scale * scales[j]);
            lm = (uint8_t) llm_nearest_int(inv_min * mins[j]);
            ls = ls < 63 ? ls : 63;
            lm = lm < 63 ? lm : 63;
            if (j < 4) {
                y[i].scales[j] = ls;
                y[i].scales[j + 4] = lm;
            } else {
                y[i].scales[j + 4] = (uint8_t) ((ls & 0xF) | ((lm & 0xF) << 4));
                y[i].scales[j - 4] |= (uint8_t) ((ls >> 4) << 6);
                y[i].scales[j] |= (uint8_t) ((lm >> 4) << 6);
            }
        }
        y[i].d = llm_f32_to_f16(max_scale / 63.f);
        y[i].dmin = llm_f32_to_f16(max_min / 63.f);
        for (j = 0; j < 8; j++) {
            llm_q4k_scale_min(j, y[i].scales, &sc, &m);
            d = llm_f16_to_f32(y[i].d) * sc;
            if (!d) {
                continue;
            }
            dm = llm_f16_to_f32(y[i].dmin) * m;
            for (l = 0; l < 32; l++) {
                v = llm_nearest_int((x[32 * j + l] + dm) / d);
                L[32 * j + l] = (uint8_t) (v < 0 ? 0 : v > 15 ? 15 : v);
            }
        }
        q = y[i].qs;
        for (j = 0; j < LLM_QK_K; j += 64) {
            for (l = 0; l < 32; l++) {
                q[l] = (uint8_t) (L[j + l] | (L[j + l + 32] << 4));
            }
            q += 32;
        }
    }
}


int
llm_quantize_supported(llm_dtype t)
{
    return t == LLM_DTYPE_Q8_0 || t == LLM_DTYPE_Q4_0 || t == LLM_DTYPE_Q4_K;
}


int
llm_quantize_row(llm_dtype t, const float *x, void *y, size_t k)
{
    size_t  nb = k / (size_t) llm_dtype_block(t);

    switch (t) {
    case LLM_DTYPE_Q8_0:
        llm_quantize_q8_0(x, y, nb);
        return 0;
    case LLM_DTYPE_Q4_0:
        llm_quantize_q4_0(x, y, nb);
        return 0;
    case LLM_DTYPE_Q4_K:
        llm_quantize_q4_K(x, y, nb);
        return 0;
    default:
        return -1;
    }
}
