/*
 * quant.h -- ggml's block formats (dtype.h): their layouts, dequantization
 * of a row to f32 and quantization of an f32 row, written from ggml's
 * ggml-quants.c reference code so that both give the same bits as ggml's
 * (dequantize_row_*, quantize_row_*_ref; checked in t/quant.t).
 *
 * A block covers 32 (Q8_0, Q4_0) or 256 (K-quants) consecutive elements of
 * a row.  In the K-quants a 256-element super-block has an f16 scale (and
 * min) for 6- or 8-bit sub-block scales.
 */
#ifndef LLM_QUANT_H
#define LLM_QUANT_H

#include <stddef.h>
#include <stdint.h>

#include "dtype.h"

#define LLM_QK      32            /* elements of a Q8_0 / Q4_0 block */
#define LLM_QK_K    256           /* elements of a K-quant super-block */

typedef struct {
    uint16_t  d;                  /* f16 scale */
    int8_t    qs[32];             /* x = d * q */
} llm_block_q8_0;

typedef struct {
    uint16_t  d;                  /* f16 scale */
    uint8_t   qs[16];             /* x[j] = d * ((qs[j] & 15) - 8),
                                     x[j + 16] = d * ((qs[j] >> 4) - 8) */
} llm_block_q4_0;

typedef struct {
    uint16_t  d, dmin;            /* f16 scales of the sub-block scales/mins */
    uint8_t   scales[12];         /* 8 x (6-bit scale, 6-bit min) */
    uint8_t   qs[128];            /* 4-bit quants: 64 elements per 32 bytes,
                                     low nibbles first */
} llm_block_q4_K;

typedef struct {
    uint16_t  d, dmin;
    uint8_t   scales[12];
    uint8_t   qh[32];             /* the fifth bit of each quant */
    uint8_t   qs[128];
} llm_block_q5_K;

typedef struct {
    uint8_t   ql[128];            /* low 4 bits */
    uint8_t   qh[64];             /* high 2 bits */
    int8_t    scales[16];         /* 16 x 8-bit sub-block scales */
    uint16_t  d;                  /* f16 */
} llm_block_q6_K;

/* the 6-bit scale and min of sub-block j (0..7) of a Q4_K/Q5_K block */
static inline void
llm_q4k_scale_min(int j, const uint8_t *q, uint8_t *sc, uint8_t *m)
{
    if (j < 4) {
        *sc = q[j] & 63;
        *m = q[j + 4] & 63;
    } else {
        *sc = (q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4);
        *m = (q[j + 4] >> 4) | ((q[j] >> 6) << 4);
    }
}

/* y[0..k) = the k elements of the row at x; k a multiple of the block */
void llm_dequantize_row(llm_dtype t, const void *x, float *y, size_t k);

/* the k elements of x into blocks of type t (Q8_0, Q4_0, Q4_K); returns
 * -1 for a type without a quantizer */
int llm_quantize_row(llm_dtype t, const float *x, void *y, size_t k);

/* 1 when t can be produced by llm_quantize_row */
int llm_quantize_supported(llm_dtype t);

#endif /* LLM_QUANT_H */
