/*
 * cpu_qpack_impl.h -- matmuls over Q8_0 matrices in the 16-row interleaved
 * layout of qpack.h, for the AVX-512 VNNI kernel set (included by
 * cpu_kernels_impl.h; empty for the other sets, which never pack).
 *
 * The activations are quantized as for the row-major kernels
 * (cpu_quant_impl.h: int8 per 32 inputs with an f32 scale).  For each
 * block, 16 weight rows at a time:
 *
 *   - VNNI (any number of tokens): vpdpbusd multiplies unsigned by signed
 *     bytes, so the weights are flipped to w + 128 (xor 0x80) and 128 x
 *     the activation block's sum is taken off the int32 result;
 *   - AMX (16 tokens at a time, where the kernel lets the process use the
 *     tiles): one tdpbssd of a 16 x 32 activation tile by the 8 x 64 weight
 *     tile gives the same 16 x 16 int32 dot products.
 *
 * Both give every block's exact integer dot product q_w . q_x; then, per
 * output, acc = fma(float(dot), d_w * d_x, acc) over the blocks in order.
 * So a token's result is the same bits on either path and in any batch.
 */

#if defined(__AVX512VNNI__) && defined(__AVX512BW__)

#include <sys/syscall.h>
#include <unistd.h>

#include "qpack.h"

#define LLM_ARCH_REQ_XCOMP_PERM  0x1023
#define LLM_XFEATURE_XTILEDATA   18

static int  llm_qpack_amx = -1;      /* -1 not asked yet, 0 no, 1 yes */


/* The tiles are usable when the CPU has AMX-INT8 and the kernel grants
 * this process their state; LLM_CPU_AMX=0 turns them off (tests). */
static int
llm_qpack_amx_usable(void)
{
    const char  *env;

    if (llm_qpack_amx < 0) {
        env = getenv("LLM_CPU_AMX");
        __builtin_cpu_init();
        llm_qpack_amx = (env == NULL || strcmp(env, "0") != 0)
                        && __builtin_cpu_supports("amx-int8")
                        && __builtin_cpu_supports("amx-tile")
                        && syscall(SYS_arch_prctl, LLM_ARCH_REQ_XCOMP_PERM,
                                   LLM_XFEATURE_XTILEDATA) == 0;
    }
    return llm_qpack_amx;
}


/* nx (1..4) tokens against the 16 rows of group p (nb blocks); two
 * integer chains per token (even and odd 4-byte steps) so that the
 * dot products of a block do not wait on each other */
LLM_ALWAYS_INLINE void
llm_qpack_rows_vnni(const int nx, const llm_qpack_q8_0 *p, int nb,
    const llm_q8_act *const *a, float *y, int ldy)
{
    __m512   acc[4];
    __m512i  dot[4][2], wv[2], flip = _mm512_set1_epi8((char) 0x80);
    __m512   dw;
    int      b, j, i, h;

    for (i = 0; i < nx; i++) {
        acc[i] = _mm512_setzero_ps();
    }
    for (b = 0; b < nb; b++, p++) {
        for (i = 0; i < nx; i++) {
            dot[i][0] = _mm512_setzero_si512();
            dot[i][1] = _mm512_setzero_si512();
        }
        for (j = 0; j < 8; j += 2) {
            wv[0] = _mm512_xor_si512(_mm512_loadu_si512(p->qs[j]), flip);
            wv[1] = _mm512_xor_si512(_mm512_loadu_si512(p->qs[j + 1]), flip);
            for (i = 0; i < nx; i++) {
                for (h = 0; h < 2; h++) {
                    int32_t  q4;

                    memcpy(&q4, a[i][b].qs + 4 * (j + h), 4);
                    dot[i][h] = _mm512_dpbusd_epi32(dot[i][h], wv[h],
                                                    _mm512_set1_epi32(q4));
                }
            }
        }
        dw = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *) p->d));
        for (i = 0; i < nx; i++) {
            dot[i][0] = _mm512_sub_epi32(
                            _mm512_add_epi32(dot[i][0], dot[i][1]),
                            _mm512_set1_epi32(128 * (a[i][b].sum[0]
                                                     + a[i][b].sum[1])));
            acc[i] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(dot[i][0]),
                         _mm512_mul_ps(dw, _mm512_set1_ps(a[i][b].d)), acc[i]);
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


/* tile 0: 16 tokens x 32 bytes; 1: the weights' 8 x 64; 2: 16 x 16 int32 */
static void
llm_qpack_tiles_on(void)
{
    llm_tilecfg  cfg;

    memset(&cfg, 0, sizeof(cfg));
    cfg.palette = 1;
    cfg.rows[0] = 16;
    cfg.colsb[0] = 32;
    cfg.rows[1] = 8;
    cfg.colsb[1] = 64;
    cfg.rows[2] = 16;
    cfg.colsb[2] = 64;
    _tile_loadconfig(&cfg);
}


/* 16 tokens (a: their first activation row, rows lda activation blocks
 * apart) against the 16 rows of group p */
static void
llm_qpack_rows_amx(const llm_qpack_q8_0 *p, int nb, const llm_q8_act *a,
    int lda, float *y, int ldy)
{
    __m512   acc[16], dw;
    int32_t  c[16][16] __attribute__((aligned(64)));
    int      b, i;

    for (i = 0; i < 16; i++) {
        acc[i] = _mm512_setzero_ps();
    }
    for (b = 0; b < nb; b++, p++) {
        _tile_zero(2);
        _tile_loadd(0, a[b].qs, lda * (int) sizeof(llm_q8_act));
        _tile_loadd(1, p->qs, 64);
        _tile_dpbssd(2, 0, 1);
        _tile_stored(2, c, 64);
        dw = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *) p->d));
        for (i = 0; i < 16; i++) {
            acc[i] = _mm512_fmadd_ps(
                         _mm512_cvtepi32_ps(_mm512_load_si512(c[i])),
                         _mm512_mul_ps(dw, _mm512_set1_ps(a[(size_t) i * lda
                                                            + b].d)),
                         acc[i]);
        }
    }
    for (i = 0; i < 16; i++) {
        _mm512_storeu_ps(y + (size_t) i * ldy, acc[i]);
    }
}

#endif


/* y = x W^T for rows [n0, n1) (multiples of 16) of a packed Q8_0 W */
static void
KSUFFIX(matmul_qpack)(const float *x, int ldx, int M, const llm_tensor *w,
    int n0, int n1, float *y, int ldy, float *scratch)
{
    llm_q8_act         *act = (llm_q8_act *) scratch;
    const llm_q8_act   *a[4];
    int                 K = w->cols, nb = K / LLM_QK, m, n, i, nx, m_amx = 0;
    const llm_qpack_q8_0 *p;

    for (m = 0; m < M; m++) {
        KSUFFIX(quantize_act)(x + (size_t) m * ldx, K, LLM_QK,
                              act + (size_t) m * nb);
    }
#if defined(__AMX_INT8__) && defined(__AMX_TILE__)
    if (M >= 16 && llm_qpack_amx_usable()) {
        m_amx = M - M % 16;
        llm_qpack_tiles_on();
        for (n = n0; n < n1; n += 16) {
            p = (const llm_qpack_q8_0 *) w->data + (size_t) (n / 16) * nb;
            for (m = 0; m < m_amx; m += 16) {
                llm_qpack_rows_amx(p, nb, act + (size_t) m * nb, nb,
                                   y + (size_t) m * ldy + n, ldy);
            }
        }
        _tile_release();
    }
#endif
    for (n = n0; n < n1; n += 16) {
        p = (const llm_qpack_q8_0 *) w->data + (size_t) (n / 16) * nb;
        for (m = m_amx; m < M; m += nx) {
            nx = M - m < 4 ? M - m : 4;
            for (i = 0; i < nx; i++) {
                a[i] = act + (size_t) (m + i) * nb;
            }
            switch (nx) {
            case 1:
                llm_qpack_rows_vnni(1, p, nb, a, y + (size_t) m * ldy + n, ldy);
                break;
            case 2:
                llm_qpack_rows_vnni(2, p, nb, a, y + (size_t) m * ldy + n, ldy);
                break;
            case 3:
                llm_qpack_rows_vnni(3, p, nb, a, y + (size_t) m * ldy + n, ldy);
                break;
            default:
                llm_qpack_rows_vnni(4, p, nb, a, y + (size_t) m * ldy + n, ldy);
                break;
            }
        }
    }
}


static int
KSUFFIX(pack)(const llm_tensor *w, llm_tensor *out, void *dst)
{
    if (!llm_qpack_supported(w)) {
        return 0;
    }
    if (dst == NULL) {
        return 1;
    }
    llm_qpack(w, dst);
    *out = *w;
    out->data = dst;
    out->packed = 1;
    return 1;
}

#define LLM_QPACK_SET  KSUFFIX(pack)

#else

#define LLM_QPACK_SET  NULL

#endif
