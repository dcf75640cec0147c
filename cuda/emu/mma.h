/*
 * mma.h (emulation) -- nvcuda::wmma for 16x16x16 tiles.  Every lane holds
 * the whole tile (the hardware spreads it over the warp; the kernels never
 * look inside a fragment), and every operation is a warp-wide step: the
 * lanes meet before it, as they execute it together on the hardware.
 * Loads check what the hardware requires: 32-byte aligned pointers and a
 * leading dimension that is a multiple of 8 (16-bit) or 4 (f32) elements.
 */
#ifndef LLM_EMU_MMA_H
#define LLM_EMU_MMA_H

#include <stdio.h>
#include <stdlib.h>

#include <type_traits>

#include "cuda_runtime.h"

namespace nvcuda {
namespace wmma {

struct row_major {};
struct col_major {};
struct matrix_a {};
struct matrix_b {};
struct accumulator {};
enum layout_t { mem_row_major, mem_col_major };

template <typename Use, int M, int N, int K, typename T, typename L = void>
struct fragment {
    float  v[16][16];
};

void llm_emu_wmma_check(const void *p, unsigned ldm, unsigned esize);

static inline float llm_emu_f(__nv_bfloat16 h) { return __bfloat162float(h); }
static inline float llm_emu_f(__half h) { return __half2float(h); }
static inline float llm_emu_f(float h) { return h; }

template <typename Use, typename T, typename L>
static inline void
load_matrix_sync(fragment<Use, 16, 16, 16, T, L> &f, const T *p,
    unsigned ldm)
{
    bool  col = std::is_same<L, col_major>::value;

    llm_emu_syncwarp();
    llm_emu_wmma_check(p, ldm, sizeof(T));
    for (int r = 0; r < 16; r++) {
        for (int c = 0; c < 16; c++) {
            f.v[r][c] = llm_emu_f(col ? p[(size_t) c * ldm + r]
                                      : p[(size_t) r * ldm + c]);
        }
    }
}

static inline void
load_matrix_sync(fragment<accumulator, 16, 16, 16, float> &f, const float *p,
    unsigned ldm, layout_t l)
{
    llm_emu_syncwarp();
    llm_emu_wmma_check(p, ldm, 4);
    for (int r = 0; r < 16; r++) {
        for (int c = 0; c < 16; c++) {
            f.v[r][c] = l == mem_col_major ? p[(size_t) c * ldm + r]
                                           : p[(size_t) r * ldm + c];
        }
    }
}

static inline void
store_matrix_sync(float *p, const fragment<accumulator, 16, 16, 16, float> &f,
    unsigned ldm, layout_t l)
{
    llm_emu_syncwarp();
    llm_emu_wmma_check(p, ldm, 4);
    for (int r = 0; r < 16; r++) {
        for (int c = 0; c < 16; c++) {
            if (l == mem_col_major) {
                p[(size_t) c * ldm + r] = f.v[r][c];
            } else {
                p[(size_t) r * ldm + c] = f.v[r][c];
            }
        }
    }
}

static inline void
fill_fragment(fragment<accumulator, 16, 16, 16, float> &f, float v)
{
    llm_emu_syncwarp();
    for (int r = 0; r < 16; r++) {
        for (int c = 0; c < 16; c++) {
            f.v[r][c] = v;
        }
    }
}

template <typename T, typename LA, typename LB>
static inline void
mma_sync(fragment<accumulator, 16, 16, 16, float> &d,
    const fragment<matrix_a, 16, 16, 16, T, LA> &a,
    const fragment<matrix_b, 16, 16, 16, T, LB> &b,
    const fragment<accumulator, 16, 16, 16, float> &c)
{
    float  out[16][16];

    llm_emu_syncwarp();
    for (int i = 0; i < 16; i++) {
        for (int j = 0; j < 16; j++) {
            float  s = c.v[i][j];

            for (int k = 0; k < 16; k++) {
                s += a.v[i][k] * b.v[k][j];
            }
            out[i][j] = s;
        }
    }
    memcpy(d.v, out, sizeof(out));
}

}  /* namespace wmma */
}  /* namespace nvcuda */

#endif /* LLM_EMU_MMA_H */
