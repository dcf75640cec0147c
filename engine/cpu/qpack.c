/*
 * qpack.c -- repacks block-format matrices into the 16-row interleaved
 * layout of qpack.h.
 */
#include <string.h>

#include "qpack.h"
#include "model/quant.h"


int
llm_qpack_supported(const llm_tensor *w)
{
    return w->dtype == LLM_DTYPE_Q8_0 && !w->packed
           && w->rows % LLM_QPACK_ROWS == 0 && w->cols % LLM_QK == 0;
}


void
llm_qpack(const llm_tensor *w, void *dst)
{
    const llm_block_q8_0  *src = w->data;
    llm_qpack_q8_0        *p = dst;
    int                    nb = w->cols / LLM_QK, g, b, r, j;

    for (g = 0; g < w->rows / LLM_QPACK_ROWS; g++) {
        for (b = 0; b < nb; b++, p++) {
            for (r = 0; r < LLM_QPACK_ROWS; r++) {
                const llm_block_q8_0  *s = src + (size_t) (16 * g + r) * nb + b;

                p->d[r] = s->d;
                for (j = 0; j < 8; j++) {
                    memcpy(p->qs[j][r], s->qs + 4 * j, 4);
                }
            }
        }
    }
}
