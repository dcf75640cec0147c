/*
 * qpack.h -- block-format matrices repacked for the AVX-512 kernels
 * (cpu_qpack_impl.h).  Sixteen weight rows are interleaved so that one
 * 64-byte vector holds four consecutive quants of each of the 16 rows:
 * the operand layout of VNNI's vpdpbusd (16 int32 lanes, 4 bytes each) and
 * of an AMX B tile (K/4 rows of 64 bytes).  The row-major layout needs
 * ~10 instructions per 32-element block and row; this one needs ~1 per
 * 64 bytes, so decode reads weights at the memory's speed and batched
 * steps run on AMX where the CPU has it.
 *
 * For rows 16g..16g+15, one struct per block (Q8_0: 32 inputs) or
 * super-block (K-quants: 256 inputs, sub-block j = inputs 32j..32j+31);
 * the blocks of a group follow each other, then the next group.  "Step s"
 * of a sub-block is its inputs 4s..4s+3.
 *
 *   Q8_0: qs[s][r][i] = the quant of row r, input 4s+i.  544 bytes.
 *   Q4_0: qs[s][r][i]: low nibble step s, high nibble step s+4 (s < 4).
 *         288 bytes, as 16 row blocks.
 *   Q4_K: qs[j][s][r][i]: low nibble step s, high nibble step s+4 (s < 4);
 *         sc and m, the 6-bit scales and mins, one byte each.  2368 bytes
 *         (16 row blocks: 2304).
 *   Q6_K: ql as Q4_K's qs (the low 4 bits); qh[j][t][r][i], bits 2u..2u+1:
 *         the high 2 bits of step t + 2u; sc[h][r]: the scale of inputs
 *         16h..16h+15.  3360 bytes, as 16 row blocks.
 *
 * The scales are the blocks' own; the quants are the blocks' (Q6_K's
 * q + 32, unsigned).  The CPU backend packs a copy of each matrix the kernel
 * set can pack (rows a multiple of 16) at start; llm_tensor.packed marks
 * the copy.
 */
#ifndef LLM_QPACK_H
#define LLM_QPACK_H

#include <stddef.h>
#include <stdint.h>

#include "model/model.h"

#define LLM_QPACK_ROWS  16

typedef struct {
    uint16_t  d[16];
    int8_t    qs[8][16][4];
} llm_qpack_q8_0;

typedef struct {
    uint16_t  d[16];
    uint8_t   qs[4][16][4];
} llm_qpack_q4_0;

typedef struct {
    uint16_t  d[16], dmin[16];
    uint8_t   sc[8][16], m[8][16];
    uint8_t   qs[8][4][16][4];
} llm_qpack_q4_K;

typedef struct {
    uint16_t  d[16];
    int8_t    sc[16][16];
    uint8_t   ql[8][4][16][4];
    uint8_t   qh[8][2][16][4];
} llm_qpack_q6_K;

/* bytes of w packed; 0 when w has no packed form (Q8_0, Q4_0, Q4_K, Q6_K
 * with rows a multiple of 16) */
size_t llm_qpack_bytes(const llm_tensor *w);
/* w packed into dst (llm_qpack_bytes(w) bytes) */
void llm_qpack(const llm_tensor *w, void *dst);

#endif /* LLM_QPACK_H */
