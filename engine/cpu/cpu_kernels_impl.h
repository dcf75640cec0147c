/*
 * cpu_kernels_impl.h -- the CPU kernels, written once against a small set of
 * vector macros and included by cpu_kernels_<isa>.c, which defines them:
 *
 *   VEC, VLEN             vector type and its number of f32 lanes
 *   VZERO() VSET1(x)      constants
 *   VLOAD(p) VSTORE(p,v)  unaligned f32 load/store
 *   VFMA(a,b,c)           a * b + c
 *   VADD(a,b) VMUL(a,b)
 *   VHSUM(v)              horizontal sum in one fixed order
 *   VLOAD_BF16(p)         VLEN bf16 values widened to f32
 *   VLOAD_F16(p)          VLEN f16 values widened to f32
 *   MR, NR                the dot-product register tile (x rows by weight rows)
 *   TMV, TNR2             outer-product tiles: at most TMV vectors of tokens;
 *                         weight rows per tile for 2 vectors (1 takes 12,
 *                         3 and 4 take 6)
 *   KSUFFIX(name)         name##_<isa>
 *   KISA                  "<isa>"
 *
 * The matmul has two forms.  Few tokens (decode): every output is one dot
 * product, VLEN lane-wise partial sums over K then VHSUM, streaming the
 * weights once.  Many tokens (prefill): tokens go in the vector lanes and
 * each output is a single FMA chain over k, against weight rows widened to
 * f32 once per block -- no horizontal sums, and the weights are reused from
 * cache for every token.  Within each form the tiling never changes how an
 * output is summed, so a token's result does not depend on which other
 * tokens share its batch, as long as the batch stays in the same form.
 */

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cpu_kernels.h"
#include "util/util.h"

#define LLM_ALWAYS_INLINE  static inline __attribute__((always_inline))

#define LLM_MATMUL_NB      48           /* weight rows widened per block */
#define LLM_MATMUL_MB      64           /* x rows per block */
#define LLM_MATMUL_SMALL_M MR           /* below this: widen on the fly */
#define LLM_MATMUL_OUTER_M VLEN         /* from here: outer-product tiles */
#define LLM_MATMUL_TMB     (TMV * VLEN) /* tokens per outer-product block */
#define LLM_MATMUL_MC_BYTES (512 * 1024) /* token panels kept in L2 */
#define LLM_MATMUL_KC      128          /* inputs per slice: tokens in L1 */

#include "cpu_quant_impl.h"
#include "cpu_qpack_impl.h"
#include "cpu_amx_bf16_impl.h"


LLM_ALWAYS_INLINE VEC
KSUFFIX(loadw)(const int dt, const void *w, size_t i)
{
    switch (dt) {
    case LLM_DTYPE_BF16:
        return VLOAD_BF16((const uint16_t *) w + i);
    case LLM_DTYPE_F16:
        return VLOAD_F16((const uint16_t *) w + i);
    default:
        return VLOAD((const float *) w + i);
    }
}


LLM_ALWAYS_INLINE float
KSUFFIX(scalarw)(const int dt, const void *w, size_t i)
{
    switch (dt) {
    case LLM_DTYPE_BF16:
        return llm_bf16_to_f32(((const uint16_t *) w)[i]);
    case LLM_DTYPE_F16:
        return llm_f16_to_f32(((const uint16_t *) w)[i]);
    default:
        return ((const float *) w)[i];
    }
}


/* y[i * ldy + j] = dot(x row i, w row j) for an mr x nr tile. */
LLM_ALWAYS_INLINE void
KSUFFIX(tile)(const int mr, const int nr, const int dt, const float *x,
    int ldx, const void *w, size_t ldw, int K, float *y, int ldy,
    const void *next)
{
    VEC          acc[mr][nr], xv[mr], wv;
    int          i, j, k, kv = K - K % VLEN;
    size_t       esz = dt == LLM_DTYPE_F32 ? 4 : 2;
    const char  *pf = next;
    float        s;

    for (i = 0; i < mr; i++) {
        for (j = 0; j < nr; j++) {
            acc[i][j] = VZERO();
        }
    }
    for (k = 0; k < kv; k += VLEN) {
        /* streaming weights: fetch the next tile's rows while this one
         * runs (short rows defeat the hardware prefetcher) */
        if (pf != NULL && (k * esz) % 64 == 0) {
            for (j = 0; j < nr; j++) {
                __builtin_prefetch(pf + ((size_t) j * ldw + k) * esz, 0, 3);
            }
        }
        for (i = 0; i < mr; i++) {
            xv[i] = VLOAD(x + (size_t) i * ldx + k);
        }
        for (j = 0; j < nr; j++) {
            wv = KSUFFIX(loadw)(dt, w, (size_t) j * ldw + k);
            for (i = 0; i < mr; i++) {
                acc[i][j] = VFMA(xv[i], wv, acc[i][j]);
            }
        }
    }
    for (i = 0; i < mr; i++) {
        for (j = 0; j < nr; j++) {
            s = VHSUM(acc[i][j]);
            for (k = kv; k < K; k++) {
                s += x[(size_t) i * ldx + k]
                     * KSUFFIX(scalarw)(dt, w, (size_t) j * ldw + k);
            }
            y[(size_t) i * ldy + j] = s;
        }
    }
}


/* Few x rows (decode): stream the weights once, widening on the fly. */
LLM_ALWAYS_INLINE void
KSUFFIX(matmul_small)(const int dt, const float *x, int ldx, int M,
    const llm_tensor *w, int n0, int n1, float *y, int ldy)
{
    int          n, K = w->cols;
    size_t       esz = dt == LLM_DTYPE_F32 ? 4 : 2;
    const char  *base = w->data;

#define LLM_SMALL_CASE(m)                                                     \
    case m:                                                                   \
        for (n = n0; n + 4 <= n1; n += 4) {                                   \
            KSUFFIX(tile)(m, 4, dt, x, ldx, base + (size_t) n * K * esz, K,   \
                          K, y + n, ldy,                                      \
                          n + 8 <= n1 ? base + (size_t) (n + 4) * K * esz     \
                                      : NULL);                                \
        }                                                                     \
        for (; n < n1; n++) {                                                 \
            KSUFFIX(tile)(m, 1, dt, x, ldx, base + (size_t) n * K * esz, K,   \
                          K, y + n, ldy, NULL);                               \
        }                                                                     \
        break;

    switch (M) {
    LLM_SMALL_CASE(1)
    LLM_SMALL_CASE(2)
    LLM_SMALL_CASE(3)
#if MR > 4
    LLM_SMALL_CASE(4)
    LLM_SMALL_CASE(5)
#endif
    }
#undef LLM_SMALL_CASE
}


/* Many x rows (prefill, large batches): widen a block of weight rows to f32
 * once, then run register tiles over it for every block of x rows. */
LLM_ALWAYS_INLINE void
KSUFFIX(matmul_blocked)(const int dt, const float *x, int ldx, int M,
    const llm_tensor *w, int n0, int n1, float *y, int ldy, float *scratch)
{
    int          mb, nb, m, n, r, k, mlen, nlen, K = w->cols;
    size_t       esz = dt == LLM_DTYPE_F32 ? 4 : 2;
    const char  *base = w->data;
    const float *wf, *xb;
    float       *yb;
    int          kv = K - K % VLEN;

    for (nb = n0; nb < n1; nb += LLM_MATMUL_NB) {
        nlen = n1 - nb < LLM_MATMUL_NB ? n1 - nb : LLM_MATMUL_NB;
        if (dt == LLM_DTYPE_F32) {
            wf = (const float *) base + (size_t) nb * K;
        } else {
            for (r = 0; r < nlen; r++) {
                const char  *src = base + (size_t) (nb + r) * K * esz;
                float       *dst = scratch + (size_t) r * K;

                for (k = 0; k < kv; k += VLEN) {
                    VSTORE(dst + k, KSUFFIX(loadw)(dt, src, k));
                }
                for (; k < K; k++) {
                    dst[k] = KSUFFIX(scalarw)(dt, src, k);
                }
            }
            wf = scratch;
        }
        for (mb = 0; mb < M; mb += LLM_MATMUL_MB) {
            mlen = M - mb < LLM_MATMUL_MB ? M - mb : LLM_MATMUL_MB;
            xb = x + (size_t) mb * ldx;
            yb = y + (size_t) mb * ldy + nb;
            for (m = 0; m + MR <= mlen; m += MR) {
                for (n = 0; n + NR <= nlen; n += NR) {
                    KSUFFIX(tile)(MR, NR, LLM_DTYPE_F32, xb + (size_t) m * ldx,
                                  ldx, wf + (size_t) n * K, K, K,
                                  yb + (size_t) m * ldy + n, ldy, NULL);
                }
                for (; n < nlen; n++) {
                    KSUFFIX(tile)(MR, 1, LLM_DTYPE_F32, xb + (size_t) m * ldx,
                                  ldx, wf + (size_t) n * K, K, K,
                                  yb + (size_t) m * ldy + n, ldy, NULL);
                }
            }
            for (; m < mlen; m++) {
                for (n = 0; n + NR <= nlen; n += NR) {
                    KSUFFIX(tile)(1, NR, LLM_DTYPE_F32, xb + (size_t) m * ldx,
                                  ldx, wf + (size_t) n * K, K, K,
                                  yb + (size_t) m * ldy + n, ldy, NULL);
                }
                for (; n < nlen; n++) {
                    KSUFFIX(tile)(1, 1, LLM_DTYPE_F32, xb + (size_t) m * ldx,
                                  ldx, wf + (size_t) n * K, K, K,
                                  yb + (size_t) m * ldy + n, ldy, NULL);
                }
            }
        }
    }
}


/* Weight rows per outer-product tile for mv token vectors: enough
 * independent FMA chains to hide the latency, few enough registers. */
#define LLM_OUTER_ROWS(mv)   ((mv) == 1 ? 12 : (mv) == 2 ? TNR2 : 6)
#define LLM_OUTER_MAX_ROWS   12


/*
 * Outer-product tile, one slice [k0, k1) of K: nr weight rows widened to
 * f32 (row stride K) times mv vectors of tokens from the packed token panel
 * ([K][mv * VLEN]).  The accumulators live in cb between slices, so every
 * output is still one FMA chain over k in order.
 */
LLM_ALWAYS_INLINE void
KSUFFIX(tile_outer)(const int nr, const int mv, const float *wp, int K,
    const float *xp, int k0, int k1, float *cb)
{
    VEC           acc[nr][mv], b;
    const float  *r[nr];
    int           i, j, k;

    for (i = 0; i < nr; i++) {
        for (j = 0; j < mv; j++) {
            acc[i][j] = VLOAD(cb + (i * mv + j) * VLEN);
        }
        r[i] = wp + (size_t) i * K;
    }
    xp += (size_t) k0 * mv * VLEN;
    for (k = k0; k < k1; k++) {
        for (i = 0; i < nr; i++) {
            b = VSET1(r[i][k]);
            for (j = 0; j < mv; j++) {
                acc[i][j] = VFMA(b, VLOAD(xp + j * VLEN), acc[i][j]);
            }
        }
        xp += mv * VLEN;
    }
    for (i = 0; i < nr; i++) {
        for (j = 0; j < mv; j++) {
            VSTORE(cb + (i * mv + j) * VLEN, acc[i][j]);
        }
    }
}


/* Widens weight rows [nb, nb + nlen) to f32 rows, zero rows up to a
 * multiple of LLM_OUTER_MAX_ROWS. */
LLM_ALWAYS_INLINE void
KSUFFIX(pack_weights)(const int dt, const llm_tensor *w, int nb, int nlen,
    float *wp)
{
    int          r, k, K = w->cols, kv = K - K % VLEN;
    size_t       esz = dt == LLM_DTYPE_F32 ? 4 : 2;
    const char  *src;
    float       *dst;

    for (r = 0; r < nlen; r++) {
        src = (const char *) w->data + (size_t) (nb + r) * K * esz;
        dst = wp + (size_t) r * K;
        for (k = 0; k < kv; k += VLEN) {
            VSTORE(dst + k, KSUFFIX(loadw)(dt, src, k));
        }
        for (; k < K; k++) {
            dst[k] = KSUFFIX(scalarw)(dt, src, k);
        }
    }
    for ( ; r % LLM_OUTER_MAX_ROWS != 0; r++) {
        memset(wp + (size_t) r * K, 0, sizeof(float) * K);
    }
}


/* Packs tokens transposed: block b of TMB tokens is [K][mv * VLEN]. */
static void
KSUFFIX(pack_tokens)(const float *x, int ldx, int M, int K, float *xp)
{
    int     mb, mlen, mv, m, k;
    float  *row;

    for (mb = 0; mb < M; mb += LLM_MATMUL_TMB) {
        mlen = M - mb < LLM_MATMUL_TMB ? M - mb : LLM_MATMUL_TMB;
        mv = (mlen + VLEN - 1) / VLEN;
        for (k = 0; k < K; k++) {
            row = xp + (size_t) mb * K + (size_t) k * mv * VLEN;
            for (m = 0; m < mv * VLEN; m++) {
                row[m] = m < mlen ? x[(size_t) (mb + m) * ldx + k] : 0.0f;
            }
        }
    }
}


/*
 * Many tokens: pack them once; for each chunk of LLM_MATMUL_MC tokens (kept
 * in L2) widen each block of weight rows once and run outer-product tiles
 * of every token block over it, a slice of LLM_MATMUL_KC inputs at a time
 * so that the tokens' slice stays in L1 while every weight panel passes.
 */
LLM_ALWAYS_INLINE void
KSUFFIX(matmul_outer)(const int dt, const float *x, int ldx, int M,
    const llm_tensor *w, int n0, int n1, float *y, int ldy, float *scratch)
{
    int          mc, mcl, mb, nb, p, i, j, l, k0, k1, mlen, nlen, mv, nr;
    int          K = w->cols, pf_lines;
    size_t       esz = dt == LLM_DTYPE_F32 ? 4 : 2;
    const char  *pf, *pf_end;
    float       *xp = scratch;
    float       *wp = xp + (size_t) (M + LLM_MATMUL_TMB) * K;
    float       *cb = wp + (size_t) (LLM_MATMUL_NB + LLM_OUTER_MAX_ROWS) * K;
    float       *c;

    /* as many whole token blocks as fit the L2 budget, at least one */
    mcl = (int) (LLM_MATMUL_MC_BYTES / (sizeof(float) * K))
          / LLM_MATMUL_TMB * LLM_MATMUL_TMB;
    mcl = mcl > LLM_MATMUL_TMB ? mcl : LLM_MATMUL_TMB;
    KSUFFIX(pack_tokens)(x, ldx, M, K, xp);
    for (mc = 0; mc < M; mc += mcl) {
        for (nb = n0; nb < n1; nb += LLM_MATMUL_NB) {
            nlen = n1 - nb < LLM_MATMUL_NB ? n1 - nb : LLM_MATMUL_NB;
            KSUFFIX(pack_weights)(dt, w, nb, nlen, wp);
            if (nb + LLM_MATMUL_NB < n1) {
                pf = (const char *) w->data + (size_t) (nb + nlen) * K * esz;
                pf_end = pf + (size_t) (n1 - nb - nlen < LLM_MATMUL_NB
                                        ? n1 - nb - nlen : LLM_MATMUL_NB)
                              * K * esz;
            } else {
                pf = pf_end = NULL;
            }
            /* spread over this block's tile calls (first token block) */
            pf_lines = (int) ((pf_end - pf) / 64
                              / ((nlen + 5) / 6
                                 * ((K + LLM_MATMUL_KC - 1) / LLM_MATMUL_KC))
                              + 1);
            for (mb = mc; mb < M && mb < mc + mcl;
                 mb += LLM_MATMUL_TMB)
            {
                const float  *xb = xp + (size_t) mb * K;

                mlen = M - mb < LLM_MATMUL_TMB ? M - mb : LLM_MATMUL_TMB;
                mv = (mlen + VLEN - 1) / VLEN;
                nr = LLM_OUTER_ROWS(mv);
                memset(cb, 0, sizeof(float) * (size_t) (nlen + nr) * mv * VLEN);
                for (k0 = 0; k0 < K; k0 = k1) {
                    k1 = K - k0 < LLM_MATMUL_KC ? K : k0 + LLM_MATMUL_KC;
                    for (p = 0; p < nlen; p += nr) {
                        const float  *wb = wp + (size_t) p * K;

                        /* pull the next weight block towards L2 while this
                         * one computes, so reading and FMAs overlap */
                        for (l = 0; l < pf_lines && pf < pf_end; l++) {
                            __builtin_prefetch(pf, 0, 2);
                            pf += 64;
                        }

                        c = cb + (size_t) p * mv * VLEN;
                        switch (mv) {
                        case 1:
                            KSUFFIX(tile_outer)(LLM_OUTER_ROWS(1), 1, wb, K, xb, k0,
                                                k1, c);
                            break;
#if TMV >= 2
                        case 2:
                            KSUFFIX(tile_outer)(LLM_OUTER_ROWS(2), 2, wb, K, xb, k0,
                                                k1, c);
                            break;
#endif
#if TMV >= 4
                        case 3:
                            KSUFFIX(tile_outer)(LLM_OUTER_ROWS(3), 3, wb, K, xb, k0,
                                                k1, c);
                            break;
                        case 4:
                            KSUFFIX(tile_outer)(LLM_OUTER_ROWS(4), 4, wb, K, xb, k0,
                                                k1, c);
                            break;
#endif
                        }
                    }
                }
                /* cb holds [row][token vectors]: write the real ones */
                for (i = 0; i < nlen; i++) {
                    for (j = 0; j < mv; j++) {
                        for (l = 0; l < VLEN && j * VLEN + l < mlen; l++) {
                            y[(size_t) (mb + j * VLEN + l) * ldy + nb + i] =
                                cb[((size_t) i * mv + j) * VLEN + l];
                        }
                    }
                }
            }
        }
    }
}


static void
KSUFFIX(matmul)(const float *x, int ldx, int M, const llm_tensor *w, int n0,
    int n1, float *y, int ldy, float *scratch)
{
#if defined(__AVX512VNNI__) && defined(__AVX512BW__)
    if (w->packed) {
        KSUFFIX(matmul_qpack)(x, ldx, M, w, n0, n1, y, ldy, scratch);
        return;
    }
#endif
    if (llm_dtype_is_quantized(w->dtype)) {
        KSUFFIX(matmul_quant)(x, ldx, M, w, n0, n1, y, ldy, scratch);
        return;
    }
    if (M < LLM_MATMUL_SMALL_M) {
        switch (w->dtype) {
        case LLM_DTYPE_BF16:
            KSUFFIX(matmul_small)(LLM_DTYPE_BF16, x, ldx, M, w, n0, n1, y,
                                  ldy);
            break;
        case LLM_DTYPE_F16:
            KSUFFIX(matmul_small)(LLM_DTYPE_F16, x, ldx, M, w, n0, n1, y,
                                  ldy);
            break;
        case LLM_DTYPE_F32:
            KSUFFIX(matmul_small)(LLM_DTYPE_F32, x, ldx, M, w, n0, n1, y,
                                  ldy);
            break;
        default:
            abort();
        }
        return;
    }
#if defined(LLM_AMX_BF16)
    if (M >= LLM_MATMUL_OUTER_M && w->dtype == LLM_DTYPE_BF16
        && w->cols % 32 == 0 && llm_amx_bf16_usable())
    {
        KSUFFIX(matmul_amx_bf16)(x, ldx, M, w, n0, n1, y, ldy, scratch);
        return;
    }
#endif
    if (M >= LLM_MATMUL_OUTER_M) {
        switch (w->dtype) {
        case LLM_DTYPE_BF16:
            KSUFFIX(matmul_outer)(LLM_DTYPE_BF16, x, ldx, M, w, n0, n1, y,
                                  ldy, scratch);
            break;
        case LLM_DTYPE_F16:
            KSUFFIX(matmul_outer)(LLM_DTYPE_F16, x, ldx, M, w, n0, n1, y,
                                  ldy, scratch);
            break;
        case LLM_DTYPE_F32:
            KSUFFIX(matmul_outer)(LLM_DTYPE_F32, x, ldx, M, w, n0, n1, y,
                                  ldy, scratch);
            break;
        default:
            abort();
        }
        return;
    }
    switch (w->dtype) {
    case LLM_DTYPE_BF16:
        KSUFFIX(matmul_blocked)(LLM_DTYPE_BF16, x, ldx, M, w, n0, n1, y, ldy,
                                scratch);
        break;
    case LLM_DTYPE_F16:
        KSUFFIX(matmul_blocked)(LLM_DTYPE_F16, x, ldx, M, w, n0, n1, y, ldy,
                                scratch);
        break;
    case LLM_DTYPE_F32:
        KSUFFIX(matmul_blocked)(LLM_DTYPE_F32, x, ldx, M, w, n0, n1, y, ldy,
                                scratch);
        break;
    default:
        abort();
    }
}


static float
KSUFFIX(dot)(const float *a, const float *b, int n)
{
    VEC    acc = VZERO();
    int    k, kv = n - n % VLEN;
    float  s;

    for (k = 0; k < kv; k += VLEN) {
        acc = VFMA(VLOAD(a + k), VLOAD(b + k), acc);
    }
    s = VHSUM(acc);
    for (; k < n; k++) {
        s += a[k] * b[k];
    }
    return s;
}


static void
KSUFFIX(axpy)(float *y, float a, const float *x, int n)
{
    VEC  av = VSET1(a);
    int  k, kv = n - n % VLEN;

    for (k = 0; k < kv; k += VLEN) {
        VSTORE(y + k, VFMA(av, VLOAD(x + k), VLOAD(y + k)));
    }
    for (; k < n; k++) {
        y[k] += a * x[k];
    }
}


static void
KSUFFIX(scale)(float *y, float a, int n)
{
    VEC  av = VSET1(a);
    int  k, kv = n - n % VLEN;

    for (k = 0; k < kv; k += VLEN) {
        VSTORE(y + k, VMUL(av, VLOAD(y + k)));
    }
    for (; k < n; k++) {
        y[k] *= a;
    }
}


static void
KSUFFIX(rmsnorm)(float *out, const float *x, const float *w, int n,
    float eps)
{
    float  r = 1.0f / sqrtf(KSUFFIX(dot)(x, x, n) / (float) n + eps);
    VEC    rv = VSET1(r);
    int    k, kv = n - n % VLEN;

    for (k = 0; k < kv; k += VLEN) {
        VSTORE(out + k, VMUL(VMUL(VLOAD(x + k), rv), VLOAD(w + k)));
    }
    for (; k < n; k++) {
        out[k] = x[k] * r * w[k];
    }
}


static void
KSUFFIX(silu_mul)(float *out, const float *g, const float *u, int n)
{
    int  k;

    for (k = 0; k < n; k++) {
        out[k] = g[k] / (1.0f + expf(-g[k])) * u[k];
    }
}


static void
KSUFFIX(add)(float *y, const float *x, int n)
{
    int  k, kv = n - n % VLEN;

    for (k = 0; k < kv; k += VLEN) {
        VSTORE(y + k, VADD(VLOAD(y + k), VLOAD(x + k)));
    }
    for (; k < n; k++) {
        y[k] += x[k];
    }
}


static void
KSUFFIX(row_to_f32)(float *out, const llm_tensor *w, int row)
{
    size_t  off = (size_t) row * w->cols;
    int     k, kv = w->cols - w->cols % VLEN;

#define LLM_ROW_CASE(dt)                                                      \
    case dt:                                                                  \
        for (k = 0; k < kv; k += VLEN) {                                      \
            VSTORE(out + k, KSUFFIX(loadw)(dt, w->data, off + k));            \
        }                                                                     \
        for (; k < w->cols; k++) {                                            \
            out[k] = KSUFFIX(scalarw)(dt, w->data, off + k);                  \
        }                                                                     \
        break;

    switch (w->dtype) {
    LLM_ROW_CASE(LLM_DTYPE_BF16)
    LLM_ROW_CASE(LLM_DTYPE_F16)
    LLM_ROW_CASE(LLM_DTYPE_F32)
    default:
        llm_dequantize_row(w->dtype, (const char *) w->data
                           + (size_t) row * llm_dtype_row_bytes(w->dtype,
                                                                w->cols),
                           out, (size_t) w->cols);
        break;
    }
#undef LLM_ROW_CASE
}


const llm_cpu_kernels KSUFFIX(llm_cpu_kernels) = {
    KISA,
    KSUFFIX(matmul),
    KSUFFIX(dot),
    KSUFFIX(axpy),
    KSUFFIX(scale),
    KSUFFIX(rmsnorm),
    KSUFFIX(silu_mul),
    KSUFFIX(add),
    KSUFFIX(row_to_f32),
    LLM_QPACK_SET,
};
