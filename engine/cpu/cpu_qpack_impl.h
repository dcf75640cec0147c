/*
 * cpu_qpack_impl.h -- matmuls over Q8_0, Q4_0, Q4_K and Q6_K matrices in the
 * 16-row interleaved layouts of qpack.h, for the AVX-512 VNNI kernel set
 * (included by cpu_kernels_impl.h; empty for the other sets, which never
 * pack).
 *
 * The activations are quantized as for the row-major kernels
 * (cpu_quant_impl.h: int8 per 32 inputs, one f32 scale per 32 or, for the
 * K-quants, per 256).  For each 32-input (sub-)block, 16 weight rows at a
 * time:
 *
 *   - VNNI (any number of tokens): vpdpbusd multiplies unsigned by signed
 *     bytes: the 4- and 6-bit quants are unsigned already; Q8_0's are
 *     flipped to w + 128 (xor 0x80) and 128 x the activation block's sum is
 *     taken off the result;
 *   - AMX (16 tokens at a time, where the kernel lets the process use the
 *     tiles): one tile product (tdpbssd for Q8_0; tdpbsud of the quants
 *     unpacked to bytes for the others, Q6_K in 16-input halves for its
 *     scales) gives the same 16 x 16 int32 dot products.
 *
 * Both give each sub-block's exact integer dot product.  Integer sub-block
 * scales and offsets (Q4_0's 8, Q4_K's mins, Q6_K's 32) are applied in int32 over a
 * super-block, as ggml does; then, per output and block in order,
 * acc = fma(float(dot), d_w * d_x, acc) (and, for Q4_K's mins,
 * acc = acc - float(mins) * (dmin_w * d_x)).  So a token's result is the
 * same bits on either path and in any batch.
 */

#if defined(__AVX512VNNI__) && defined(__AVX512BW__)

#include <sys/syscall.h>
#include <unistd.h>

#include "qpack.h"

#define LLM_ARCH_REQ_XCOMP_PERM  0x1023
#define LLM_XFEATURE_XTILEDATA   18

#define LLM_QPACK_PF             2   /* super-blocks (Q8_0, Q4_0: x4
                                        blocks) prefetched ahead by decode */

static int  llm_qpack_amx = -1;      /* -1 not asked yet, 0 no, 1 yes */


/* The tiles are usable when the CPU has AMX-INT8 and the kernel grants
 * this process their state; LLM_CPU_AMX=0 turns them off (tests). */
static int
llm_qpack_amx_usable(void)
{
    const char  *env;
    int          yes = __atomic_load_n(&llm_qpack_amx, __ATOMIC_RELAXED);

    /* the compute threads may ask at once: each gets the same answer
     * (the permission is the process's, asking twice is harmless) */
    if (yes < 0) {
        env = getenv("LLM_CPU_AMX");
        __builtin_cpu_init();
        yes = (env == NULL || strcmp(env, "0") != 0)
              && __builtin_cpu_supports("amx-int8")
              && __builtin_cpu_supports("amx-tile")
              && syscall(SYS_arch_prctl, LLM_ARCH_REQ_XCOMP_PERM,
                         LLM_XFEATURE_XTILEDATA) == 0;
        __atomic_store_n(&llm_qpack_amx, yes, __ATOMIC_RELAXED);
    }
    return yes;
}


/* the unsigned quants of steps 0..7 of sub-block j of a K-quant block, or
 * of a Q4_0 block (j 0) */
LLM_ALWAYS_INLINE void
llm_qpack_steps(const int dt, const void *blk, int j, __m512i *u)
{
    const __m512i  lo4 = _mm512_set1_epi8(0x0F), hi2 = _mm512_set1_epi8(0x30);
    const uint8_t (*nib)[16][4] = dt == LLM_DTYPE_Q4_0
                                  ? ((const llm_qpack_q4_0 *) blk)->qs
                                  : dt == LLM_DTYPE_Q4_K
                                  ? ((const llm_qpack_q4_K *) blk)->qs[j]
                                  : ((const llm_qpack_q6_K *) blk)->ql[j];
    __m512i        v, h0, h1;
    int            s;

    for (s = 0; s < 4; s++) {
        v = _mm512_loadu_si512(nib[s]);
        u[s] = _mm512_and_si512(v, lo4);
        u[s + 4] = _mm512_and_si512(_mm512_srli_epi16(v, 4), lo4);
    }
    if (dt == LLM_DTYPE_Q6_K) {
        const llm_qpack_q6_K  *p = blk;

        /* step t + 2u: bits 2u..2u+1 of qh[j][t], moved to bits 4..5 */
        h0 = _mm512_loadu_si512(p->qh[j][0]);
        h1 = _mm512_loadu_si512(p->qh[j][1]);
        u[0] = _mm512_or_si512(u[0], _mm512_and_si512(_mm512_slli_epi16(h0, 4), hi2));
        u[1] = _mm512_or_si512(u[1], _mm512_and_si512(_mm512_slli_epi16(h1, 4), hi2));
        u[2] = _mm512_or_si512(u[2], _mm512_and_si512(_mm512_slli_epi16(h0, 2), hi2));
        u[3] = _mm512_or_si512(u[3], _mm512_and_si512(_mm512_slli_epi16(h1, 2), hi2));
        u[4] = _mm512_or_si512(u[4], _mm512_and_si512(h0, hi2));
        u[5] = _mm512_or_si512(u[5], _mm512_and_si512(h1, hi2));
        u[6] = _mm512_or_si512(u[6], _mm512_and_si512(_mm512_srli_epi16(h0, 2), hi2));
        u[7] = _mm512_or_si512(u[7], _mm512_and_si512(_mm512_srli_epi16(h1, 2), hi2));
    }
}


/* Q6_K's scale of 16-input group h to int32 lanes */
LLM_ALWAYS_INLINE __m512i
llm_qpack_sc16(const void *blk, int h)
{
    return _mm512_cvtepi8_epi32(_mm_loadu_si128(
               (const __m128i *) ((const llm_qpack_q6_K *) blk)->sc[h]));
}


/* sub-block j's scales to int32 lanes: Q4_K's (first), Q6_K's two halves */
LLM_ALWAYS_INLINE __m512i
llm_qpack_sc(const int dt, const void *blk, int j, int half)
{
    if (dt == LLM_DTYPE_Q4_K) {
        return _mm512_cvtepu8_epi32(_mm_loadu_si128(
                   (const __m128i *) ((const llm_qpack_q4_K *) blk)->sc[j]));
    }
    return llm_qpack_sc16(blk, 2 * j + half);
}


/* dot += the sub-block's scaled integer dot, from the dot products of its
 * first (lo) and last (hi) 16 inputs; sca, scb: llm_qpack_sc() */
LLM_ALWAYS_INLINE __m512i
llm_qpack_ksub(const int dt, __m512i sca, __m512i scb, __m512i lo, __m512i hi,
    __m512i dot)
{
    if (dt == LLM_DTYPE_Q4_K) {
        return _mm512_add_epi32(dot, _mm512_mullo_epi32(
                   _mm512_add_epi32(lo, hi), sca));
    }
    dot = _mm512_add_epi32(dot, _mm512_mullo_epi32(lo, sca));
    return _mm512_add_epi32(dot, _mm512_mullo_epi32(hi, scb));
}


/* A super-block's offset weights as int16 pairs for vpdpwssd, 16 rows per
 * vector: Q4_K's mins of sub-blocks 2q and 2q + 1 (4 vectors), Q6_K's
 * scales of the halves of sub-block q (8) */
LLM_ALWAYS_INLINE void
llm_qpack_kpairs(const int dt, const void *blk, __m512i *pw)
{
    int  q;

    if (dt == LLM_DTYPE_Q4_K) {
        const llm_qpack_q4_K  *p = blk;

        for (q = 0; q < 4; q++) {
            pw[q] = _mm512_or_si512(
                        _mm512_cvtepu8_epi32(_mm_loadu_si128(
                            (const __m128i *) p->m[2 * q])),
                        _mm512_slli_epi32(_mm512_cvtepu8_epi32(_mm_loadu_si128(
                            (const __m128i *) p->m[2 * q + 1])), 16));
        }
        return;
    }
    for (q = 0; q < 8; q++) {
        pw[q] = _mm512_or_si512(
                    _mm512_and_si512(llm_qpack_sc16(blk, 2 * q),
                                     _mm512_set1_epi32(0xFFFF)),
                    _mm512_slli_epi32(llm_qpack_sc16(blk, 2 * q + 1), 16));
    }
}


/* what the offsets take off a super-block's dot for one token (ab: its 8
 * activation blocks): Q4_K's mins . the sub-blocks' sums, Q6_K's 32 x
 * scales . the halves' sums; exact in int32 */
LLM_ALWAYS_INLINE __m512i
llm_qpack_koff(const int dt, const __m512i *pw, const llm_q8_act *ab)
{
    __m512i  off = _mm512_setzero_si512();
    int32_t  pair;
    int      q;

    if (dt == LLM_DTYPE_Q4_K) {
        for (q = 0; q < 4; q++) {
            pair = (int32_t) ((uint32_t) (uint16_t) (ab[2 * q].sum[0]
                                                     + ab[2 * q].sum[1])
                              | (uint32_t) (ab[2 * q + 1].sum[0]
                                            + ab[2 * q + 1].sum[1]) << 16);
            off = _mm512_dpwssd_epi32(off, pw[q], _mm512_set1_epi32(pair));
        }
        return off;
    }
    for (q = 0; q < 8; q++) {
        memcpy(&pair, ab[q].sum, 4);
        off = _mm512_dpwssd_epi32(off, pw[q], _mm512_set1_epi32(pair));
    }
    return _mm512_slli_epi32(off, 5);
}


/* acc + a super-block's integer sums for one token, scaled (ab: its 8
 * activation blocks, one scale; pw: llm_qpack_kpairs()) */
LLM_ALWAYS_INLINE __m512
llm_qpack_kfinish(const int dt, const void *blk, const __m512i *pw,
    const llm_q8_act *ab, __m512i dot, __m512 acc)
{
    const uint16_t  *d = dt == LLM_DTYPE_Q4_K
                         ? ((const llm_qpack_q4_K *) blk)->d
                         : ((const llm_qpack_q6_K *) blk)->d;
    __m512           da = _mm512_set1_ps(ab[0].d);
    __m512i          off = llm_qpack_koff(dt, pw, ab);

    if (dt == LLM_DTYPE_Q6_K) {
        dot = _mm512_sub_epi32(dot, off);
    }
    acc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(dot), _mm512_mul_ps(
              _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *) d)), da),
              acc);
    if (dt == LLM_DTYPE_Q4_K) {
        const llm_qpack_q4_K  *p = blk;

        acc = _mm512_fnmadd_ps(_mm512_cvtepi32_ps(off),
                  _mm512_mul_ps(_mm512_cvtph_ps(_mm256_loadu_si256(
                      (const __m256i *) p->dmin)), da), acc);
    }
    return acc;
}


/* nx (1..4) tokens against the 16 rows of a Q8_0 or Q4_0 group (nb blocks
 * of bytes each); two integer chains per token (even and odd steps) so
 * that the dot products of a block do not wait on each other.  Q8_0's
 * quants are flipped to w + 128, Q4_0's are q = w + 8: the activation
 * block's sum times that offset is taken off. */
LLM_ALWAYS_INLINE void
llm_qpack_rows_vnni(const int dt, const int nx, const char *p, size_t bytes,
    int nb, const llm_q8_act *const *a, float *y, int ldy)
{
    const int  off = dt == LLM_DTYPE_Q8_0 ? 128 : 8;
    __m512     acc[4];
    __m512i    dot[4][2], u[8], flip = _mm512_set1_epi8((char) 0x80);
    __m512     dw;
    int        b, j, i, h;

    for (i = 0; i < nx; i++) {
        acc[i] = _mm512_setzero_ps();
    }
    for (b = 0; b < nb; b++, p += bytes) {
        for (j = 0; j < (int) bytes; j += 64) {
            _mm_prefetch(p + 4 * LLM_QPACK_PF * bytes + j, _MM_HINT_T0);
        }
        for (i = 0; i < nx; i++) {
            dot[i][0] = _mm512_setzero_si512();
            dot[i][1] = _mm512_setzero_si512();
        }
        if (dt == LLM_DTYPE_Q8_0) {
            for (j = 0; j < 8; j++) {
                u[j] = _mm512_xor_si512(_mm512_loadu_si512(
                           ((const llm_qpack_q8_0 *) p)->qs[j]), flip);
            }
        } else {
            llm_qpack_steps(dt, p, 0, u);
        }
        for (j = 0; j < 8; j += 2) {
            for (i = 0; i < nx; i++) {
                for (h = 0; h < 2; h++) {
                    int32_t  q4;

                    memcpy(&q4, a[i][b].qs + 4 * (j + h), 4);
                    dot[i][h] = _mm512_dpbusd_epi32(dot[i][h], u[j + h],
                                                    _mm512_set1_epi32(q4));
                }
            }
        }
        /* d: the first field of both layouts */
        dw = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *) p));
        for (i = 0; i < nx; i++) {
            dot[i][0] = _mm512_sub_epi32(
                            _mm512_add_epi32(dot[i][0], dot[i][1]),
                            _mm512_set1_epi32(off * (a[i][b].sum[0]
                                                     + a[i][b].sum[1])));
            acc[i] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(dot[i][0]),
                         _mm512_mul_ps(dw, _mm512_set1_ps(a[i][b].d)), acc[i]);
        }
    }
    for (i = 0; i < nx; i++) {
        _mm512_storeu_ps(y + (size_t) i * ldy, acc[i]);
    }
}


/* nx (1..4) tokens against the 16 rows of a K-quant group (nb
 * super-blocks of bytes each) */
LLM_ALWAYS_INLINE void
llm_qpack_krows_vnni(const int dt, const int nx, const char *p, size_t bytes,
    int nb, const llm_q8_act *const *a, float *y, int ldy)
{
    __m512   acc[4];
    __m512i  dot[4], lo, hi, u[8], sca, scb, pw[8];
    int      b, j, i, s;

    for (i = 0; i < nx; i++) {
        acc[i] = _mm512_setzero_ps();
    }
    for (b = 0; b < nb; b++, p += bytes) {
        for (i = 0; i < nx; i++) {
            dot[i] = _mm512_setzero_si512();
        }
        for (j = 0; j < 8; j++) {
            for (s = 0; s < (int) bytes / 8; s += 64) {
                _mm_prefetch(p + LLM_QPACK_PF * bytes + j * bytes / 8 + s,
                             _MM_HINT_T0);
            }
            llm_qpack_steps(dt, p, j, u);
            sca = llm_qpack_sc(dt, p, j, 0);
            scb = dt == LLM_DTYPE_Q6_K ? llm_qpack_sc(dt, p, j, 1) : sca;
            for (i = 0; i < nx; i++) {
                const llm_q8_act  *ab = &a[i][b * 8 + j];

                lo = _mm512_setzero_si512();
                hi = _mm512_setzero_si512();
                for (s = 0; s < 4; s++) {
                    int32_t  q0, q1;

                    memcpy(&q0, ab->qs + 4 * s, 4);
                    memcpy(&q1, ab->qs + 16 + 4 * s, 4);
                    lo = _mm512_dpbusd_epi32(lo, u[s], _mm512_set1_epi32(q0));
                    hi = _mm512_dpbusd_epi32(hi, u[s + 4], _mm512_set1_epi32(q1));
                }
                dot[i] = llm_qpack_ksub(dt, sca, scb, lo, hi, dot[i]);
            }
        }
        llm_qpack_kpairs(dt, p, pw);
        for (i = 0; i < nx; i++) {
            acc[i] = llm_qpack_kfinish(dt, p, pw, &a[i][b * 8], dot[i],
                                       acc[i]);
        }
    }
    for (i = 0; i < nx; i++) {
        _mm512_storeu_ps(y + (size_t) i * ldy, acc[i]);
    }
}


#if defined(__AMX_INT8__) && defined(__AMX_TILE__)

typedef struct {
    uint8_t   palette;
    uint8_t   start_row;
    uint8_t   reserved[14];
    uint16_t  colsb[16];
    uint8_t   rows[16];
} __attribute__((packed)) llm_tilecfg;


/*
 * Two tile sets, so that a sub-block's product runs while the previous one's
 * result is scaled: set 0 is tiles 0 (16 tokens x 32 bytes), 1 (the
 * weights, 8 x 64) and 2 (16 x 16 int32), set 1 tiles 3, 4, 5.  Q6_K's
 * 16-input halves: tiles 0 and 4 (16 x 16 bytes), 1 and 5 (4 x 64), and
 * 2, 3 (set 0) and 6, 7 (set 1) for the two halves' int32 results.
 */
static void
llm_qpack_tiles_on(int dt)
{
    llm_tilecfg  cfg;
    int          t;

    memset(&cfg, 0, sizeof(cfg));
    cfg.palette = 1;
    for (t = 0; t < 8; t++) {
        cfg.rows[t] = 16;
        cfg.colsb[t] = 64;
    }
    if (dt == LLM_DTYPE_Q6_K) {
        cfg.colsb[0] = cfg.colsb[4] = 16;
        cfg.rows[1] = cfg.rows[5] = 4;
    } else if (dt != LLM_DTYPE_BF16) {      /* bf16 (cpu_amx_bf16_impl.h):
                                               all 16 x 64 */
        cfg.colsb[0] = cfg.colsb[3] = 32;
        cfg.rows[1] = cfg.rows[4] = 8;
    }
    _tile_loadconfig(&cfg);
}


/* sub-block k's product into tile set k % 2: activations at a (rows sb
 * bytes apart), weights at w (bytes; K-quants: unpacked tiles) */
LLM_ALWAYS_INLINE void
llm_qpack_amx_issue(const int dt, int k, const int8_t *a, int sb,
    const void *w)
{
    if (dt == LLM_DTYPE_Q6_K) {
        if (k & 1) {
            _tile_zero(6);
            _tile_zero(7);
            _tile_loadd(4, a, sb);
            _tile_loadd(5, w, 64);
            _tile_dpbsud(6, 4, 5);
            _tile_loadd(4, a + 16, sb);
            _tile_loadd(5, (const char *) w + 256, 64);
            _tile_dpbsud(7, 4, 5);
        } else {
            _tile_zero(2);
            _tile_zero(3);
            _tile_loadd(0, a, sb);
            _tile_loadd(1, w, 64);
            _tile_dpbsud(2, 0, 1);
            _tile_loadd(0, a + 16, sb);
            _tile_loadd(1, (const char *) w + 256, 64);
            _tile_dpbsud(3, 0, 1);
        }
    } else if (k & 1) {
        _tile_zero(5);
        _tile_loadd(3, a, sb);
        _tile_loadd(4, w, 64);
        if (dt == LLM_DTYPE_Q8_0) {
            _tile_dpbssd(5, 3, 4);
        } else {
            _tile_dpbsud(5, 3, 4);
        }
    } else {
        _tile_zero(2);
        _tile_loadd(0, a, sb);
        _tile_loadd(1, w, 64);
        if (dt == LLM_DTYPE_Q8_0) {
            _tile_dpbssd(2, 0, 1);
        } else {
            _tile_dpbsud(2, 0, 1);
        }
    }
}


/* the int32 results of sub-block k's product: c[0] (Q6_K: halves c[0], c[1]) */
LLM_ALWAYS_INLINE void
llm_qpack_amx_store(const int dt, int k, int32_t c[2][16][16])
{
    if (dt == LLM_DTYPE_Q6_K) {
        if (k & 1) {
            _tile_stored(6, c[0], 64);
            _tile_stored(7, c[1], 64);
        } else {
            _tile_stored(2, c[0], 64);
            _tile_stored(3, c[1], 64);
        }
    } else if (k & 1) {
        _tile_stored(5, c[0], 64);
    } else {
        _tile_stored(2, c[0], 64);
    }
}


/* 16 tokens (a: their first activation row, rows lda activation blocks
 * apart) against the 16 rows of a Q8_0 group p (its quants signed, as
 * they are) or Q4_0 group (unpacked to tiles, q = w + 8); one tile set:
 * overlapping two measured slower here */
LLM_ALWAYS_INLINE void
llm_qpack_rows_amx(const int dt, const char *p, size_t bytes, int nb,
    const uint8_t *tiles, const llm_q8_act *a, int lda, float *y, int ldy)
{
    __m512   acc[16], dw;
    int32_t  c[2][16][16] __attribute__((aligned(64)));
    int      b, i, sb = lda * (int) sizeof(llm_q8_act);

    for (i = 0; i < 16; i++) {
        acc[i] = _mm512_setzero_ps();
    }
    for (b = 0; b < nb; b++, p += bytes) {
        llm_qpack_amx_issue(dt, 0, a[b].qs, sb,
                            dt == LLM_DTYPE_Q8_0
                            ? (const void *) ((const llm_qpack_q8_0 *) p)->qs
                            : (const void *) (tiles + (size_t) b * 512));
        llm_qpack_amx_store(dt, 0, c);
        dw = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *) p));
        for (i = 0; i < 16; i++) {
            const llm_q8_act  *ab = &a[(size_t) i * lda + b];
            __m512i            dot = _mm512_load_si512(c[0][i]);

            if (dt == LLM_DTYPE_Q4_0) {
                dot = _mm512_sub_epi32(dot, _mm512_set1_epi32(
                          8 * (ab->sum[0] + ab->sum[1])));
            }
            acc[i] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(dot),
                         _mm512_mul_ps(dw, _mm512_set1_ps(ab->d)), acc[i]);
        }
    }
    for (i = 0; i < 16; i++) {
        _mm512_storeu_ps(y + (size_t) i * ldy, acc[i]);
    }
}


/* a K-quant or Q4_0 group's quants as bytes, each (sub-)block an 8 x 64 B
 * tile */
LLM_ALWAYS_INLINE void
llm_qpack_kunpack(const int dt, const char *p, size_t bytes, int nb,
    uint8_t *tiles)
{
    __m512i  u[8];
    int      b, j, s;

    for (b = 0; b < nb; b++, p += bytes) {
        for (j = 0; j < (dt == LLM_DTYPE_Q4_0 ? 1 : 8); j++) {
            llm_qpack_steps(dt, p, j, u);
            for (s = 0; s < 8; s++, tiles += 64) {
                _mm512_store_si512(tiles, u[s]);
            }
        }
    }
}


/* 16 tokens against the 16 rows of a K-quant group unpacked to tiles */
LLM_ALWAYS_INLINE void
llm_qpack_krows_amx(const int dt, const char *p, size_t bytes, int nb,
    const uint8_t *tiles, const llm_q8_act *a, int lda, float *y, int ldy)
{
    int32_t      c[2][16][16] __attribute__((aligned(64)));
    __m512i      dot[16], sca, scb, pw[8];
    int          k, j, i, sb = lda * (int) sizeof(llm_q8_act);
    const char  *blk;

    for (i = 0; i < 16; i++) {
        _mm512_storeu_ps(y + (size_t) i * ldy, _mm512_setzero_ps());
    }
    /* k: sub-block, 8 per super-block */
    llm_qpack_amx_issue(dt, 0, a[0].qs, sb, tiles);
    for (k = 0; k < 8 * nb; k++) {
        blk = p + (size_t) (k / 8) * bytes;
        j = k % 8;
        if (j == 0) {
            for (i = 0; i < 16; i++) {
                dot[i] = _mm512_setzero_si512();
            }
        }
        llm_qpack_amx_store(dt, k, c);
        if (k + 1 < 8 * nb) {
            llm_qpack_amx_issue(dt, k + 1, a[k + 1].qs, sb,
                                tiles + (size_t) (k + 1) * 512);
        }
        sca = llm_qpack_sc(dt, blk, j, 0);
        scb = dt == LLM_DTYPE_Q6_K ? llm_qpack_sc(dt, blk, j, 1) : sca;
        for (i = 0; i < 16; i++) {
            dot[i] = llm_qpack_ksub(dt, sca, scb, _mm512_load_si512(c[0][i]),
                         dt == LLM_DTYPE_Q6_K ? _mm512_load_si512(c[1][i])
                                              : _mm512_setzero_si512(),
                         dot[i]);
        }
        if (j == 7) {
            llm_qpack_kpairs(dt, blk, pw);
            for (i = 0; i < 16; i++) {
                float  *yi = y + (size_t) i * ldy;

                _mm512_storeu_ps(yi, llm_qpack_kfinish(dt, blk, pw,
                                         &a[(size_t) i * lda + k - 7], dot[i],
                                         _mm512_loadu_ps(yi)));
            }
        }
    }
}

#endif


/* one group's tokens [m0, M), up to 4 at a time, on VNNI */
LLM_ALWAYS_INLINE void
llm_qpack_group_vnni(const int dt, const char *p, size_t bytes, int nb,
    const llm_q8_act *act, int nba, int m0, int M, float *y, int ldy)
{
    const llm_q8_act  *a[4];
    int                m, i, nx;

    for (m = m0; m < M; m += nx) {
        nx = M - m < 4 ? M - m : 4;
        for (i = 0; i < nx; i++) {
            a[i] = act + (size_t) (m + i) * nba;
        }
#define LLM_QPACK_NX(n)                                                       \
        if (dt == LLM_DTYPE_Q8_0 || dt == LLM_DTYPE_Q4_0) {                   \
            llm_qpack_rows_vnni(dt, n, p, bytes, nb, a,                       \
                                y + (size_t) m * ldy, ldy);                   \
        } else {                                                              \
            llm_qpack_krows_vnni(dt, n, p, bytes, nb, a,                      \
                                 y + (size_t) m * ldy, ldy);                  \
        }
        switch (nx) {
        case 1:
            LLM_QPACK_NX(1)
            break;
        case 2:
            LLM_QPACK_NX(2)
            break;
        case 3:
            LLM_QPACK_NX(3)
            break;
        default:
            LLM_QPACK_NX(4)
            break;
        }
#undef LLM_QPACK_NX
    }
}


/* y = x W^T for rows [n0, n1) (multiples of 16) of a packed W of type dt */
LLM_ALWAYS_INLINE void
KSUFFIX(matmul_qpack_dt)(const int dt, const float *x, int ldx, int M,
    const llm_tensor *w, int n0, int n1, float *y, int ldy, float *scratch)
{
    llm_q8_act  *act = (llm_q8_act *) scratch;
    int          K = w->cols, nba = K / LLM_QK, m, n, m_amx = 0;
    int          kq = dt == LLM_DTYPE_Q4_K || dt == LLM_DTYPE_Q6_K;
    int          nb = kq ? K / LLM_QK_K : nba;
    size_t       bytes = dt == LLM_DTYPE_Q8_0 ? sizeof(llm_qpack_q8_0)
                         : dt == LLM_DTYPE_Q4_0 ? sizeof(llm_qpack_q4_0)
                         : dt == LLM_DTYPE_Q4_K ? sizeof(llm_qpack_q4_K)
                         : sizeof(llm_qpack_q6_K);
    const char  *p;

    for (m = 0; m < M; m++) {
        KSUFFIX(quantize_act)(x + (size_t) m * ldx, K, kq ? LLM_QK_K : LLM_QK,
                              act + (size_t) m * nba);
    }
#if defined(__AMX_INT8__) && defined(__AMX_TILE__)
    if (M >= 16 && llm_qpack_amx_usable()) {
        /* after the activations, 64-byte aligned: a group's tiles */
        uint8_t  *tiles = (uint8_t *) (((uintptr_t) (act + (size_t) M * nba)
                                        + 63) & ~(uintptr_t) 63);

        m_amx = M - M % 16;
        llm_qpack_tiles_on(dt);
        for (n = n0; n < n1; n += 16) {
            p = (const char *) w->data + (size_t) (n / 16) * nb * bytes;
            if (dt != LLM_DTYPE_Q8_0) {
                llm_qpack_kunpack(dt, p, bytes, nb, tiles);
            }
            for (m = 0; m < m_amx; m += 16) {
                if (!kq) {
                    llm_qpack_rows_amx(dt, p, bytes, nb, tiles,
                                       act + (size_t) m * nba, nba,
                                       y + (size_t) m * ldy + n, ldy);
                } else {
                    llm_qpack_krows_amx(dt, p, bytes, nb, tiles,
                                        act + (size_t) m * nba, nba,
                                        y + (size_t) m * ldy + n, ldy);
                }
            }
        }
        _tile_release();
    }
#endif
    for (n = n0; n < n1; n += 16) {
        p = (const char *) w->data + (size_t) (n / 16) * nb * bytes;
        llm_qpack_group_vnni(dt, p, bytes, nb, act, nba, m_amx, M,
                             y + n, ldy);
    }
}


static void
KSUFFIX(matmul_qpack)(const float *x, int ldx, int M, const llm_tensor *w,
    int n0, int n1, float *y, int ldy, float *scratch)
{
    switch (w->dtype) {
    case LLM_DTYPE_Q8_0:
        KSUFFIX(matmul_qpack_dt)(LLM_DTYPE_Q8_0, x, ldx, M, w, n0, n1, y, ldy,
                                 scratch);
        break;
    case LLM_DTYPE_Q4_0:
        KSUFFIX(matmul_qpack_dt)(LLM_DTYPE_Q4_0, x, ldx, M, w, n0, n1, y, ldy,
                                 scratch);
        break;
    case LLM_DTYPE_Q4_K:
        KSUFFIX(matmul_qpack_dt)(LLM_DTYPE_Q4_K, x, ldx, M, w, n0, n1, y, ldy,
                                 scratch);
        break;
    case LLM_DTYPE_Q6_K:
        KSUFFIX(matmul_qpack_dt)(LLM_DTYPE_Q6_K, x, ldx, M, w, n0, n1, y, ldy,
                                 scratch);
        break;
    default:
        abort();
    }
}


static size_t
KSUFFIX(pack)(const llm_tensor *w, llm_tensor *out, void *dst)
{
    size_t  n = llm_qpack_bytes(w);

    if (n == 0 || dst == NULL) {
        return n;
    }
    llm_qpack(w, dst);
    *out = *w;
    out->data = dst;
    out->packed = 1;
    return n;
}

#define LLM_QPACK_SET  KSUFFIX(pack)

#else

#define LLM_QPACK_SET  NULL

#endif
