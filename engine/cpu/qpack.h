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
 * Q8_0, for rows 16g..16g+15 and block b (32 inputs):
 *
 *     llm_qpack_q8_0 { f16 d[16]; int8 qs[8][16][4]; }   544 bytes,
 *
 * qs[j][r][i] = row 16g+r, input 32b+4j+i; blocks of a group follow each
 * other, groups follow each other.  The bytes are those of the row-major
 * blocks, reordered: the same size, the same numbers.
 *
 * The CPU backend packs a copy of each matrix the kernel set can pack
 * (its rows a multiple of 16) at start; llm_tensor.packed marks the copy.
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

/* 1 when w has a packed form (Q8_0, rows a multiple of 16) */
int llm_qpack_supported(const llm_tensor *w);
/* w packed into dst (llm_dtype_row_bytes() * rows bytes, as w) */
void llm_qpack(const llm_tensor *w, void *dst);

#endif /* LLM_QPACK_H */
