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
 * make_qkx2_quants for a 32-element sub-block: levels L in [0, nmax] with
 * x ~ scale * L - min, the scale and min chosen by weighted least squares
 * over nstep + 1 trial inverse scales.  Returns the scale, *the_min the
 * (positive) min.
 */
static float
llm_qkx2(int n, int nmax, const float *x, const float *w, uint8_t *L,
    float *the_min, uint8_t *Laux, float rmin, float rdelta, int nstep)
{
    float  min = x[0], max = x[0], sum_w = w[0], sum_x = sum_w * x[0];
    float  iscale, scale, best_error, diff, sum_l, sum_l2, sum_xl, D;
    float  this_scale, this_min, cur_error;
    int    i, is, l;

    for (i = 1; i < n; i++) {
        if (x[i] < min) {
            min = x[i];
        }
        if (x[i] > max) {
            max = x[i];
        }
        sum_w += w[i];
        sum_x += w[i] * x[i];
    }
    if (min > 0) {
        min = 0;
    }
    if (max == min) {
        memset(L, 0, (size_t) n);
        *the_min = -min;
        return 0.f;
    }
    iscale = nmax / (max - min);
    scale = 1 / iscale;
    best_error = 0;
    for (i = 0; i < n; i++) {
        l = llm_nearest_int(iscale * (x[i] - min));
        L[i] = (uint8_t) (l < 0 ? 0 : l > nmax ? nmax : l);
        diff = scale * L[i] + min - x[i];
        best_error += w[i] * (diff * diff);
    }
    for (is = 0; is <= nstep; is++) {
        iscale = (rmin + rdelta * is + nmax) / (max - min);
        sum_l = 0;
        sum_l2 = 0;
        sum_xl = 0;
        for (i = 0; i < n; i++) {
            l = llm_nearest_int(iscale * (x[i] - min));
            l = l < 0 ? 0 : l > nmax ? nmax : l;
            Laux[i] = (uint8_t) l;
            sum_l += w[i] * l;
            sum_l2 += w[i] * l * l;
            sum_xl += w[i] * l * x[i];
        }
        D = sum_w * sum_l2 - sum_l * sum_l;
        if (D > 0) {
            this_scale = (sum_w * sum_xl - sum_x * sum_l) / D;
            this_min = (sum_l2 * sum_x - sum_l * sum_xl) / D;
            if (this_min > 0) {
                this_min = 0;
                this_scale = sum_xl / sum_l2;
            }
            cur_error = 0;
            for (i = 0; i < n; i++) {
                diff = this_scale * Laux[i] + this_min - x[i];
                cur_error += w[i] * (diff * diff);
            }
            if (cur_error < best_error) {
                memcpy(L, Laux, (size_t) n);
                best_error = cur_error;
                scale = this_scale;
                min = this_min;
            }
        }
    }
    *the_min = -min;
    return scale;
}


/* quantize_row_q4_K_ref: per 32-element sub-block a scale and a min
 * (llm_qkx2, weights |x| + rms), both quantized to 6 bits against the
 * block's largest, then the levels recomputed with the rounded scales */
static void
llm_quantize_q4_K(const float *x, llm_block_q4_K *y, size_t nb)
{
    uint8_t   L[LLM_QK_K], Laux[32], ls, lm, sc, m, *q;
    float     weights[32], mins[8], scales[8];
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
                weights[l] = av_x + fabsf(x[32 * j + l]);
            }
            scales[j] = llm_qkx2(32, 15, x + 32 * j, weights, L + 32 * j,
                                 &mins[j], Laux, -1.f, 0.1f, 20);
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
