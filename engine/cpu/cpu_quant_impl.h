/*
 * cpu_quant_impl.h -- matmuls over weights in ggml's block formats (Q8_0,
 * Q4_0, Q4_K, Q5_K, Q6_K), included by cpu_kernels_impl.h once per
 * instruction set.
 *
 * Numerics, as ggml's dot products: the activations are quantized to int8
 * (d = amax / 127 kept as f32, q = round(x / d), plus the sums of each
 * 16 q's), per 32 for Q8_0/Q4_0 and per 256 for the K-quants; each
 * 32-element block of a weight row gives an integer dot product of its
 * quants with the activation's.  Q8_0/Q4_0 scale it by the two blocks'
 * scales and accumulate in f32; the K-quants apply their integer
 * sub-block scales in int32 and convert once per super-block.  The offsets
 * (Q4_0's 8, Q6_K's 32, the K-quants' mins) are subtracted through the
 * activation sums.  Against the dequantized weights times the f32
 * activations this differs by the activation rounding alone: at most half
 * a step per activation, ~1e-3 relative on a random dot product
 * (t/unit/test_quant.c states the bound).
 *
 * Instruction sets: with AVX2 the integer dot of 32 unsigned by 32 signed
 * bytes is vpmaddubsw + vpmaddwd, or one vpdpbusd with AVX-512 VNNI
 * (256-bit, EVEX); the generic build does it in scalar C.  The sum of a
 * row is the same on every path up to the order of the f32 accumulation.
 */

#include "model/quant.h"

/* activations: one per 32 inputs */
typedef struct {
    float    d;
    int16_t  sum[2];              /* sums of qs[0..16) and qs[16..32) */
    int8_t   qs[32];
} llm_q8_act;

#define LLM_QROWS  4              /* activation rows per pass over a weight row */
#define LLM_QPF    1024           /* weight bytes prefetched ahead */


/* K inputs of x as K / 32 activation blocks, with one scale per group of
 * 32 (Q8_0, Q4_0) or 256 (the K-quants: their sub-block scales are
 * integers, so a super-block's products add up in int32).  q = x / d
 * rounded to the nearest, ties to even (lrintf's and vcvtps2dq's default
 * mode), so the vector version gives the scalar one's bits. */
#if defined(__AVX512F__) && defined(__AVX512BW__)

static void
KSUFFIX(quantize_act)(const float *x, int K, int group, llm_q8_act *a)
{
    int      b, j;
    float    amax = 0.0f, id = 0.0f;
    __m512   m, sid;
    __m512i  q0, q1, lo = _mm512_set1_epi32(-127), hi = _mm512_set1_epi32(127);

    for (b = 0; b < K / 32; b++, x += 32, a++) {
        if (b % (group / 32) == 0) {
            m = _mm512_setzero_ps();
            for (j = 0; j < group; j += 16) {
                m = _mm512_max_ps(_mm512_abs_ps(_mm512_loadu_ps(x + j)), m);
            }
            amax = _mm512_reduce_max_ps(m);
            id = amax > 0.0f ? 127.0f / amax : 0.0f;
        }
        a->d = amax / 127.0f;
        sid = _mm512_set1_ps(id);
        q0 = _mm512_cvtps_epi32(_mm512_mul_ps(_mm512_loadu_ps(x), sid));
        q1 = _mm512_cvtps_epi32(_mm512_mul_ps(_mm512_loadu_ps(x + 16), sid));
        q0 = _mm512_min_epi32(_mm512_max_epi32(q0, lo), hi);
        q1 = _mm512_min_epi32(_mm512_max_epi32(q1, lo), hi);
        _mm_storeu_si128((__m128i *) a->qs, _mm512_cvtepi32_epi8(q0));
        _mm_storeu_si128((__m128i *) (a->qs + 16), _mm512_cvtepi32_epi8(q1));
        a->sum[0] = (int16_t) _mm512_reduce_add_epi32(q0);
        a->sum[1] = (int16_t) _mm512_reduce_add_epi32(q1);
    }
}

#else

static void
KSUFFIX(quantize_act)(const float *x, int K, int group, llm_q8_act *a)
{
    int    b, j, q, s0, s1;
    float  amax = 0.0f, id = 0.0f;

    for (b = 0; b < K / 32; b++, x += 32, a++) {
        if (b % (group / 32) == 0) {
            amax = 0.0f;
            for (j = 0; j < group; j++) {
                amax = fabsf(x[j]) > amax ? fabsf(x[j]) : amax;
            }
            id = amax > 0.0f ? 127.0f / amax : 0.0f;
        }
        a->d = amax / 127.0f;
        s0 = s1 = 0;
        for (j = 0; j < 32; j++) {
            q = (int) lrintf(x[j] * id);
            q = q > 127 ? 127 : q < -127 ? -127 : q;
            a->qs[j] = (int8_t) q;
            if (j < 16) {
                s0 += q;
            } else {
                s1 += q;
            }
        }
        a->sum[0] = (int16_t) s0;
        a->sum[1] = (int16_t) s1;
    }
}

#endif


#if defined(__AVX2__)

typedef __m256i  llm_qi;          /* 8 int32 partial sums of a block */
typedef __m256   llm_qf;

#define QF_ZERO()           _mm256_setzero_ps()
#define QF_HSUM(v)          llm_q_hsum(v)
#define Q_F16(h)            _cvtsh_ss(h)


static inline float
llm_q_hsum(__m256 v)
{
    __m128  s = _mm_add_ps(_mm256_castps256_ps128(v),
                           _mm256_extractf128_ps(v, 1));

    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}


/* 32 unsigned bytes (< 128) times 32 signed bytes */
static inline __m256i
llm_q_dot_us(__m256i u, __m256i s)
{
#if defined(__AVX512VNNI__) && defined(__AVX512VL__)
    return _mm256_dpbusd_epi32(_mm256_setzero_si256(), u, s);
#else
    return _mm256_madd_epi16(_mm256_maddubs_epi16(u, s),
                             _mm256_set1_epi16(1));
#endif
}


/* acc += the block's integer dot (u . activation) * scale */
#define QF_ACC(acc, u, act, scale)                                            \
    (acc) = _mm256_fmadd_ps(_mm256_cvtepi32_ps(llm_q_dot_us((u),              \
                _mm256_loadu_si256((const __m256i *) (act)->qs))),            \
                _mm256_set1_ps(scale), (acc))

/* integer accumulation over a K-quant super-block: isum += (u . act) * sc,
 * through 16-bit pair sums (u < 64, so vpmaddubsw cannot saturate) and
 * vpmaddwd (vpdpwssd with VNNI) with the sub-block's scale */
typedef __m256i  llm_qi;

#define QI_ZERO()           _mm256_setzero_si256()
#define QF_FROM_QI(acc, isum, scale)                                          \
    (acc) = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum),                         \
                            _mm256_set1_ps(scale), (acc))


static inline __m256i
llm_q_madd_scaled(__m256i isum, __m256i u, const int8_t *act, __m256i sc16)
{
    __m256i  p = _mm256_maddubs_epi16(u, _mm256_loadu_si256(
                                            (const __m256i *) act));

#if defined(__AVX512VNNI__) && defined(__AVX512VL__)
    return _mm256_dpwssd_epi32(isum, p, sc16);
#else
    return _mm256_add_epi32(isum, _mm256_madd_epi16(p, sc16));
#endif
}

#define QI_ACC(isum, u, act, sc)                                              \
    (isum) = llm_q_madd_scaled((isum), (u), (act)->qs,                        \
                               _mm256_set1_epi16((short) (sc)))
#define QI_ACC2(isum, u, act, sa, sb)                                         \
    (isum) = llm_q_madd_scaled((isum), (u), (act)->qs,                        \
                 _mm256_setr_epi16(sa, sa, sa, sa, sa, sa, sa, sa,            \
                                   sb, sb, sb, sb, sb, sb, sb, sb))

typedef __m256i  llm_qu;          /* 32 unsigned quants of a block */


/* 16 bytes -> 32 quants: the low nibbles, then the high ones */
static inline __m256i
llm_q_nibbles16(const uint8_t *p)
{
    __m128i  b = _mm_loadu_si128((const __m128i *) p);
    __m128i  m = _mm_set1_epi8(0x0F);

    return _mm256_set_m128i(_mm_and_si128(_mm_srli_epi16(b, 4), m),
                            _mm_and_si128(b, m));
}


/* 32 bytes -> the low (hi 0) or high (hi 1) nibbles */
static inline __m256i
llm_q_nibbles32(const uint8_t *p, int hi)
{
    __m256i  b = _mm256_loadu_si256((const __m256i *) p);

    return _mm256_and_si256(hi ? _mm256_srli_epi16(b, 4) : b,
                            _mm256_set1_epi8(0x0F));
}


/* (bits >> shift) & mask of 32 bytes, moved left by up */
static inline __m256i
llm_q_bits32(const uint8_t *p, int shift, int mask, int up)
{
    __m256i  b = _mm256_loadu_si256((const __m256i *) p);

    b = _mm256_and_si256(_mm256_srl_epi16(b, _mm_cvtsi32_si128(shift)),
                         _mm256_set1_epi8((char) mask));
    return _mm256_sll_epi16(b, _mm_cvtsi32_si128(up));
}

#define QU_OR(a, b)         _mm256_or_si256(a, b)
#define QU_NIB16(p)         llm_q_nibbles16(p)
#define QU_NIB32(p, hi)     llm_q_nibbles32(p, hi)
#define QU_BITS32(p, s, m, u)  llm_q_bits32(p, s, m, u)


/* Q8_0 . activation: |w| times the activation with w's sign */
static inline void
llm_q_acc_q8_0(llm_qf *acc, const int8_t *w, const llm_q8_act *a,
    float scale)
{
    __m256i  wv = _mm256_loadu_si256((const __m256i *) w);
    __m256i  av = _mm256_loadu_si256((const __m256i *) a->qs);

    *acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(llm_q_dot_us(
               _mm256_sign_epi8(wv, wv), _mm256_sign_epi8(av, wv))),
               _mm256_set1_ps(scale), *acc);
}

#else  /* portable C */

typedef float    llm_qf;
typedef struct { uint8_t b[32]; } llm_qu;

#define QF_ZERO()           0.0f
#define QF_HSUM(v)          (v)
#define Q_F16(h)            llm_f16_to_f32(h)


static inline int
llm_q_dot_us(const llm_qu *u, const int8_t *s, int from, int to)
{
    int  j, sum = 0;

    for (j = from; j < to; j++) {
        sum += u->b[j] * s[j];
    }
    return sum;
}

#define QF_ACC(acc, u, act, scale)                                            \
    (acc) += (float) llm_q_dot_us(&(u), (act)->qs, 0, 32) * (scale)
typedef int32_t  llm_qi;

#define QI_ZERO()           0
#define QF_FROM_QI(acc, isum, scale)   (acc) += (float) (isum) * (scale)
#define QI_ACC(isum, u, act, sc)                                              \
    (isum) += (sc) * llm_q_dot_us(&(u), (act)->qs, 0, 32)
#define QI_ACC2(isum, u, act, sa, sb)                                         \
    (isum) += (sa) * llm_q_dot_us(&(u), (act)->qs, 0, 16)                     \
              + (sb) * llm_q_dot_us(&(u), (act)->qs, 16, 32)


static inline llm_qu
llm_q_nibbles16(const uint8_t *p)
{
    llm_qu  u;
    int     j;

    for (j = 0; j < 16; j++) {
        u.b[j] = p[j] & 0x0F;
        u.b[j + 16] = p[j] >> 4;
    }
    return u;
}


static inline llm_qu
llm_q_nibbles32(const uint8_t *p, int hi)
{
    llm_qu  u;
    int     j;

    for (j = 0; j < 32; j++) {
        u.b[j] = hi ? p[j] >> 4 : p[j] & 0x0F;
    }
    return u;
}


static inline llm_qu
llm_q_bits32(const uint8_t *p, int shift, int mask, int up)
{
    llm_qu  u;
    int     j;

    for (j = 0; j < 32; j++) {
        u.b[j] = (uint8_t) (((p[j] >> shift) & mask) << up);
    }
    return u;
}


static inline llm_qu
llm_q_or(llm_qu a, llm_qu b)
{
    int  j;

    for (j = 0; j < 32; j++) {
        a.b[j] |= b.b[j];
    }
    return a;
}

#define QU_OR(a, b)         llm_q_or(a, b)
#define QU_NIB16(p)         llm_q_nibbles16(p)
#define QU_NIB32(p, hi)     llm_q_nibbles32(p, hi)
#define QU_BITS32(p, s, m, u)  llm_q_bits32(p, s, m, u)


static inline void
llm_q_acc_q8_0(llm_qf *acc, const int8_t *w, const llm_q8_act *a,
    float scale)
{
    int  j, sum = 0;

    for (j = 0; j < 32; j++) {
        sum += w[j] * a->qs[j];
    }
    *acc += (float) sum * scale;
}

#endif


/*
 * One weight row of K inputs against nx activation rows (a[i], K / 32
 * blocks each): out[i] = the dot product.  Each weight block is unpacked
 * once for the nx rows.  corr[i] collects what the offsets subtract.
 */
LLM_ALWAYS_INLINE void
KSUFFIX(qdot_rows)(const int dt, const int nx, const void *wrow, int K,
    const llm_q8_act *const *a, float *out)
{
    llm_qf   acc[LLM_QROWS];
    llm_qi   isum[LLM_QROWS];
    int      imin[LLM_QROWS];
    float    corr[LLM_QROWS], d, dmin, s;
    int      b, i, j, nb;
    llm_qu   u;
    uint8_t  sc, m;

    for (i = 0; i < nx; i++) {
        acc[i] = QF_ZERO();
        corr[i] = 0.0f;
    }
    switch (dt) {
    case LLM_DTYPE_Q8_0:
        for (b = 0; b < K / 32; b++) {
            const llm_block_q8_0  *w = (const llm_block_q8_0 *) wrow + b;

            __builtin_prefetch((const char *) w + LLM_QPF, 0, 0);
            d = Q_F16(w->d);
            for (i = 0; i < nx; i++) {
                llm_q_acc_q8_0(&acc[i], w->qs, &a[i][b], d * a[i][b].d);
            }
        }
        break;

    case LLM_DTYPE_Q4_0:
        for (b = 0; b < K / 32; b++) {
            const llm_block_q4_0  *w = (const llm_block_q4_0 *) wrow + b;

            if (b % 4 == 0) {
                __builtin_prefetch((const char *) w + LLM_QPF, 0, 0);
            }
            d = Q_F16(w->d);
            u = QU_NIB16(w->qs);
            for (i = 0; i < nx; i++) {
                s = d * a[i][b].d;
                QF_ACC(acc[i], u, &a[i][b], s);
                corr[i] += s * (float) (8 * (a[i][b].sum[0]
                                             + a[i][b].sum[1]));
            }
        }
        break;

    case LLM_DTYPE_Q4_K:
    case LLM_DTYPE_Q5_K:
        nb = K / LLM_QK_K;
        for (b = 0; b < nb; b++) {
            const llm_block_q4_K  *w4 = (const llm_block_q4_K *) wrow + b;
            const llm_block_q5_K  *w5 = (const llm_block_q5_K *) wrow + b;
            const uint8_t         *scales = dt == LLM_DTYPE_Q4_K
                                            ? w4->scales : w5->scales;
            const uint8_t         *qs = dt == LLM_DTYPE_Q4_K ? w4->qs
                                                              : w5->qs;

            for (j = 0; j < (int) sizeof(*w5); j += 64) {
                __builtin_prefetch((const char *) w4 + LLM_QPF + j, 0, 0);
            }
            d = Q_F16(dt == LLM_DTYPE_Q4_K ? w4->d : w5->d);
            dmin = Q_F16(dt == LLM_DTYPE_Q4_K ? w4->dmin
                                                        : w5->dmin);
            for (i = 0; i < nx; i++) {
                isum[i] = QI_ZERO();
                imin[i] = 0;
            }
            for (j = 0; j < 8; j++) {
                llm_q4k_scale_min(j, scales, &sc, &m);
                u = QU_NIB32(qs + 32 * (j / 2), j & 1);
                if (dt == LLM_DTYPE_Q5_K) {
                    u = QU_OR(u, QU_BITS32(w5->qh, j, 1, 4));
                }
                for (i = 0; i < nx; i++) {
                    const llm_q8_act  *ab = &a[i][b * 8 + j];

                    QI_ACC(isum[i], u, ab, sc);
                    imin[i] += m * (ab->sum[0] + ab->sum[1]);
                }
            }
            for (i = 0; i < nx; i++) {
                s = a[i][b * 8].d;      /* one scale per super-block */
                QF_FROM_QI(acc[i], isum[i], d * s);
                corr[i] += dmin * s * (float) imin[i];
            }
        }
        break;

    case LLM_DTYPE_Q6_K:
        nb = K / LLM_QK_K;
        for (b = 0; b < nb; b++) {
            const llm_block_q6_K  *w = (const llm_block_q6_K *) wrow + b;

            for (j = 0; j < (int) sizeof(*w); j += 64) {
                __builtin_prefetch((const char *) w + LLM_QPF + j, 0, 0);
            }
            d = Q_F16(w->d);
            for (i = 0; i < nx; i++) {
                isum[i] = QI_ZERO();
                imin[i] = 0;
            }
            for (j = 0; j < 8; j++) {
                /* 32-group j: half h of the block, quarter q within it */
                int             h = j / 4, q = j % 4;
                const uint8_t  *ql = w->ql + 64 * h + 32 * (q & 1);
                int             sa = w->scales[2 * j], sb = w->scales[2 * j + 1];

                u = QU_OR(QU_NIB32(ql, q >> 1),
                          QU_BITS32(w->qh + 32 * h, 2 * q, 3, 4));
                for (i = 0; i < nx; i++) {
                    const llm_q8_act  *ab = &a[i][b * 8 + j];

                    QI_ACC2(isum[i], u, ab, sa, sb);
                    imin[i] += 32 * (sa * ab->sum[0] + sb * ab->sum[1]);
                }
            }
            for (i = 0; i < nx; i++) {
                s = a[i][b * 8].d;
                QF_FROM_QI(acc[i], isum[i], d * s);
                corr[i] += d * s * (float) imin[i];
            }
        }
        break;
    }
    for (i = 0; i < nx; i++) {
        out[i] = QF_HSUM(acc[i]) - corr[i];
    }
}


/* One weight row against nx activation rows, for the row's dtype. */
LLM_ALWAYS_INLINE void
KSUFFIX(qdot_dispatch)(const int nx, const llm_tensor *w, const void *wrow,
    const llm_q8_act *const *a, float *out)
{
    switch (w->dtype) {
    case LLM_DTYPE_Q8_0:
        KSUFFIX(qdot_rows)(LLM_DTYPE_Q8_0, nx, wrow, w->cols, a, out);
        break;
    case LLM_DTYPE_Q4_0:
        KSUFFIX(qdot_rows)(LLM_DTYPE_Q4_0, nx, wrow, w->cols, a, out);
        break;
    case LLM_DTYPE_Q4_K:
        KSUFFIX(qdot_rows)(LLM_DTYPE_Q4_K, nx, wrow, w->cols, a, out);
        break;
    case LLM_DTYPE_Q5_K:
        KSUFFIX(qdot_rows)(LLM_DTYPE_Q5_K, nx, wrow, w->cols, a, out);
        break;
    case LLM_DTYPE_Q6_K:
        KSUFFIX(qdot_rows)(LLM_DTYPE_Q6_K, nx, wrow, w->cols, a, out);
        break;
    default:
        abort();
    }
}


/*
 * y[m * ldy + n] = x row m . W row n over a block-format W: the M rows of
 * x are quantized into the scratch, then every weight row is read once and
 * multiplied with LLM_QROWS activation rows at a time (the row stays in L1
 * while the activation rows pass).  The same integer and float operations
 * give a token's result whatever else is in the batch.
 */
static void
KSUFFIX(matmul_quant)(const float *x, int ldx, int M, const llm_tensor *w,
    int n0, int n1, float *y, int ldy, float *scratch)
{
    llm_q8_act         *act = (llm_q8_act *) scratch;
    const llm_q8_act   *a[LLM_QROWS];
    size_t              rb = llm_dtype_row_bytes(w->dtype, (size_t) w->cols);
    int                 K = w->cols, nbk = K / 32, m, n, i, nx;
    const char         *wrow;
    float               out[LLM_QROWS];

    for (m = 0; m < M; m++) {
        KSUFFIX(quantize_act)(x + (size_t) m * ldx, K,
                              llm_dtype_block(w->dtype) == LLM_QK_K
                              ? LLM_QK_K : LLM_QK, act + (size_t) m * nbk);
    }
    for (n = n0; n < n1; n++) {
        wrow = (const char *) w->data + (size_t) n * rb;

        for (m = 0; m < M; m += nx) {
            nx = M - m < LLM_QROWS ? M - m : LLM_QROWS;
            for (i = 0; i < nx; i++) {
                a[i] = act + (size_t) (m + i) * nbk;
            }
            switch (nx) {
            case 1:
                KSUFFIX(qdot_dispatch)(1, w, wrow, a, out);
                break;
            case 2:
                KSUFFIX(qdot_dispatch)(2, w, wrow, a, out);
                break;
            case 3:
                KSUFFIX(qdot_dispatch)(3, w, wrow, a, out);
                break;
            default:
                KSUFFIX(qdot_dispatch)(4, w, wrow, a, out);
                break;
            }
            for (i = 0; i < nx; i++) {
                y[(size_t) (m + i) * ldy + n] = out[i];
            }
        }
    }
}
