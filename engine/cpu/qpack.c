/*
 * qpack.c -- repacks block-format matrices into the 16-row interleaved
 * layouts of qpack.h.
 */
#include <string.h>

#include "qpack.h"
#include "model/quant.h"


size_t
llm_qpack_bytes(const llm_tensor *w)
{
    size_t  groups = (size_t) w->rows / LLM_QPACK_ROWS;

    if (w->packed || w->rows % LLM_QPACK_ROWS != 0) {
        return 0;
    }
    switch (w->dtype) {
    case LLM_DTYPE_Q8_0:
        return groups * (w->cols / LLM_QK) * sizeof(llm_qpack_q8_0);
    case LLM_DTYPE_Q4_0:
        return groups * (w->cols / LLM_QK) * sizeof(llm_qpack_q4_0);
    case LLM_DTYPE_Q4_K:
        return groups * (w->cols / LLM_QK_K) * sizeof(llm_qpack_q4_K);
    case LLM_DTYPE_Q6_K:
        return groups * (w->cols / LLM_QK_K) * sizeof(llm_qpack_q6_K);
    default:
        return 0;
    }
}


static void
llm_qpack_q8_0_group(const llm_block_q8_0 *src, int nb, llm_qpack_q8_0 *p)
{
    int  b, r, s;

    for (b = 0; b < nb; b++, p++) {
        for (r = 0; r < LLM_QPACK_ROWS; r++) {
            const llm_block_q8_0  *x = src + (size_t) r * nb + b;

            p->d[r] = x->d;
            for (s = 0; s < 8; s++) {
                memcpy(p->qs[s][r], x->qs + 4 * s, 4);
            }
        }
    }
}


static void
llm_qpack_q4_0_group(const llm_block_q4_0 *src, int nb, llm_qpack_q4_0 *p)
{
    int  b, r, s, i;

    for (b = 0; b < nb; b++, p++) {
        for (r = 0; r < LLM_QPACK_ROWS; r++) {
            const llm_block_q4_0  *x = src + (size_t) r * nb + b;

            p->d[r] = x->d;
            /* input e: qs[e] & 15 (e < 16), qs[e - 16] >> 4 */
            for (s = 0; s < 4; s++) {
                for (i = 0; i < 4; i++) {
                    p->qs[s][r][i] = (x->qs[4 * s + i] & 15)
                                     | (x->qs[4 * s + i] >> 4) << 4;
                }
            }
        }
    }
}


/* the 256 quants of a Q4_K block, 0..15, in input order */
static void
llm_q4_K_quants(const llm_block_q4_K *x, uint8_t *q)
{
    int  j, e;

    for (j = 0; j < 8; j++) {
        for (e = 0; e < 32; e++) {
            q[32 * j + e] = j & 1 ? x->qs[32 * (j / 2) + e] >> 4
                                  : x->qs[32 * (j / 2) + e] & 15;
        }
    }
}


/* the 256 quants of a Q6_K block plus 32, 0..63, in input order
 * (ggml's dequantize_row_q6_K) */
static void
llm_q6_K_quants(const llm_block_q6_K *x, uint8_t *q)
{
    int  h, l;

    for (h = 0; h < 2; h++) {
        const uint8_t  *ql = x->ql + 64 * h, *qh = x->qh + 32 * h;
        uint8_t        *y = q + 128 * h;

        for (l = 0; l < 32; l++) {
            y[l] = (ql[l] & 15) | ((qh[l] & 3) << 4);
            y[l + 32] = (ql[l + 32] & 15) | (((qh[l] >> 2) & 3) << 4);
            y[l + 64] = (ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4);
            y[l + 96] = (ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4);
        }
    }
}


/* the low 4 bits of quants q (256, input order) of row r into a K-quant's
 * nibble layout: sub-block j, step s < 4 low, step s + 4 high */
static void
llm_qpack_nibbles(const uint8_t *q, int r, uint8_t nib[8][4][16][4])
{
    int  j, s, i;

    for (j = 0; j < 8; j++) {
        for (s = 0; s < 4; s++) {
            for (i = 0; i < 4; i++) {
                nib[j][s][r][i] = (q[32 * j + 4 * s + i] & 15)
                                  | (q[32 * j + 4 * (s + 4) + i] & 15) << 4;
            }
        }
    }
}


static void
llm_qpack_q4_K_group(const llm_block_q4_K *src, int nb, llm_qpack_q4_K *p)
{
    uint8_t  q[LLM_QK_K];
    int      b, r, j;

    for (b = 0; b < nb; b++, p++) {
        for (r = 0; r < LLM_QPACK_ROWS; r++) {
            const llm_block_q4_K  *x = src + (size_t) r * nb + b;

            p->d[r] = x->d;
            p->dmin[r] = x->dmin;
            for (j = 0; j < 8; j++) {
                llm_q4k_scale_min(j, x->scales, &p->sc[j][r], &p->m[j][r]);
            }
            llm_q4_K_quants(x, q);
            llm_qpack_nibbles(q, r, p->qs);
        }
    }
}


static void
llm_qpack_q6_K_group(const llm_block_q6_K *src, int nb, llm_qpack_q6_K *p)
{
    uint8_t  q[LLM_QK_K];
    int      b, r, j, h, t, u, i;

    for (b = 0; b < nb; b++, p++) {
        memset(p->qh, 0, sizeof(p->qh));
        for (r = 0; r < LLM_QPACK_ROWS; r++) {
            const llm_block_q6_K  *x = src + (size_t) r * nb + b;

            p->d[r] = x->d;
            for (h = 0; h < 16; h++) {
                p->sc[h][r] = x->scales[h];
            }
            llm_q6_K_quants(x, q);
            llm_qpack_nibbles(q, r, p->ql);
            for (j = 0; j < 8; j++) {
                for (t = 0; t < 2; t++) {
                    for (u = 0; u < 4; u++) {
                        for (i = 0; i < 4; i++) {
                            p->qh[j][t][r][i] |=
                                (q[32 * j + 4 * (t + 2 * u) + i] >> 4) << (2 * u);
                        }
                    }
                }
            }
        }
    }
}


void
llm_qpack(const llm_tensor *w, void *dst)
{
    size_t  rb = llm_dtype_row_bytes(w->dtype, (size_t) w->cols);
    int     g, nb = w->cols / llm_dtype_block(w->dtype);

    for (g = 0; g < w->rows / LLM_QPACK_ROWS; g++) {
        const char  *src = (const char *) w->data
                           + (size_t) g * LLM_QPACK_ROWS * rb;

        switch (w->dtype) {
        case LLM_DTYPE_Q8_0:
            llm_qpack_q8_0_group((const llm_block_q8_0 *) src, nb,
                                 (llm_qpack_q8_0 *) dst + (size_t) g * nb);
            break;
        case LLM_DTYPE_Q4_0:
            llm_qpack_q4_0_group((const llm_block_q4_0 *) src, nb,
                                 (llm_qpack_q4_0 *) dst + (size_t) g * nb);
            break;
        case LLM_DTYPE_Q4_K:
            llm_qpack_q4_K_group((const llm_block_q4_K *) src, nb,
                                 (llm_qpack_q4_K *) dst + (size_t) g * nb);
            break;
        case LLM_DTYPE_Q6_K:
            llm_qpack_q6_K_group((const llm_block_q6_K *) src, nb,
                                 (llm_qpack_q6_K *) dst + (size_t) g * nb);
            break;
        default:
            break;
        }
    }
}
