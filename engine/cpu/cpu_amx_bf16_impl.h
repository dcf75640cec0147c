/*
 * cpu_amx_bf16_impl.h -- the batched form (16 tokens or more) of matmuls
 * over bf16 weights on AMX tiles, for the AVX-512 kernel set where the CPU
 * has AMX-BF16 and AVX512-BF16 and the kernel grants the tiles (included by
 * cpu_kernels_impl.h; the other sets and CPUs keep matmul_outer).
 *
 * A tile of 16 weight rows x 32 inputs is read straight from the row-major
 * matrix.  The tiles multiply bf16 by bf16, so each f32 activation is split
 * into three bf16, x = hi + mid + lo + e (hi = bf16(x), mid = bf16(x - hi),
 * lo = bf16(x - hi - mid), |e| <= 2^-27 |x|), converted 256 tokens at a
 * time into AMX's pair layout (16 tokens x 32 inputs per tile).
 * tdpbf16ps multiplies pairs exactly (bf16 x bf16 fits f32) and
 * accumulates in f32 over all K, W.hi, W.mid, W.lo per 32 inputs: the f32
 * activations' result up to f32 rounding.  Rounding the activations to bf16
 * (llama.cpp's way) would move it by up to 2e-3 of sum |w x|, two parts by
 * 4e-6: either keeps the batched form from agreeing with the decode forms
 * (t/unit/test_engine.c), so a third tile product buys f32 semantics.
 * Each output is one token's row against one weight row, so a token's
 * result does not depend on what else is in the batch (within this form,
 * as for the other forms).  t/unit/test_quant.c checks the bound.
 */

#if defined(__AMX_BF16__) && defined(__AVX512BF16__)

#define LLM_AMX_MC  256           /* tokens converted at a time: their 3 x
                                     bf16 stay in L2, scratch stays small */

static int  llm_amx_bf16 = -1;      /* -1 not asked yet, 0 no, 1 yes */


static int
llm_amx_bf16_usable(void)
{
    int  yes = __atomic_load_n(&llm_amx_bf16, __ATOMIC_RELAXED);

    if (yes < 0) {                  /* as llm_qpack_amx_usable() */
        __builtin_cpu_init();
        yes = __builtin_cpu_supports("amx-bf16")
              && __builtin_cpu_supports("avx512bf16")
              && llm_qpack_amx_usable();
        __atomic_store_n(&llm_amx_bf16, yes, __ATOMIC_RELAXED);
    }
    return yes;
}


/* M tokens of x (K inputs, K % 32 == 0) into xp: per 16-token tile and
 * 32-input chunk, three tiles (hi, mid, lo) of 16 pair rows x 16 tokens x 2
 * bf16; tokens past M are 0 */
static void
llm_amx_bf16_tokens(const float *x, int ldx, int M, int K, uint32_t *xp)
{
    const __m512i  rows = _mm512_setr_epi32(0, 16, 32, 48, 64, 80, 96, 112,
                                            128, 144, 160, 176, 192, 208,
                                            224, 240);
    int            m, kb, part, nkb = K / 32, mt = (M + 15) / 16;
    __m512         a, b;
    __m512bh       hi;

    memset(xp + (size_t) (mt - 1) * nkb * 768, 0,
           sizeof(uint32_t) * (size_t) nkb * 768);
    for (m = 0; m < M; m++) {
        const float  *xm = x + (size_t) m * ldx;
        uint32_t     *tile = xp + (size_t) (m / 16) * nkb * 768 + m % 16;

        for (kb = 0; kb < nkb; kb++, tile += 768) {
            a = _mm512_loadu_ps(xm + 32 * kb);
            b = _mm512_loadu_ps(xm + 32 * kb + 16);
            for (part = 0; part < 3; part++) {
                hi = _mm512_cvtne2ps_pbh(b, a);
                _mm512_i32scatter_epi32(tile + 256 * part, rows, (__m512i) hi,
                                        4);
                /* what is left: x minus the part, widened back to f32 */
                a = _mm512_sub_ps(a, _mm512_castsi512_ps(_mm512_slli_epi32(
                        _mm512_cvtepu16_epi32(_mm512_castsi512_si256(
                            (__m512i) hi)), 16)));
                b = _mm512_sub_ps(b, _mm512_castsi512_ps(_mm512_slli_epi32(
                        _mm512_cvtepu16_epi32(_mm512_extracti64x4_epi64(
                            (__m512i) hi, 1)), 16)));
            }
        }
    }
}


/* ng (1, 2) groups of 16 weight rows (wa, rows lda bf16 apart) against a
 * token tile's three parts (xt) */
LLM_ALWAYS_INLINE void
llm_amx_bf16_block(const int ng, const uint16_t *wa, size_t lda,
    const uint32_t *xt, int nkb, float c[2][16][16])
{
    int  kb, sa = (int) (lda * 2);

    _tile_zero(4);
    if (ng == 2) {
        _tile_zero(5);
    }
    for (kb = 0; kb < nkb; kb++) {
        _tile_loadd(0, wa + 32 * kb, sa);
        _tile_loadd(2, xt + (size_t) kb * 768, 64);
        _tile_loadd(3, xt + (size_t) kb * 768 + 256, 64);
        _tile_loadd(6, xt + (size_t) kb * 768 + 512, 64);
        _tile_dpbf16ps(4, 0, 2);
        _tile_dpbf16ps(4, 0, 3);
        _tile_dpbf16ps(4, 0, 6);
        if (ng == 2) {
            _tile_loadd(1, wa + 16 * lda + 32 * kb, sa);
            _tile_dpbf16ps(5, 1, 2);
            _tile_dpbf16ps(5, 1, 3);
            _tile_dpbf16ps(5, 1, 6);
        }
    }
    _tile_stored(4, c[0], 64);
    if (ng == 2) {
        _tile_stored(5, c[1], 64);
    }
}


/* y = x W^T for rows [n0, n1) of a bf16 W, M >= 16 tokens, K % 32 == 0;
 * scratch: 1.5 x 256 x K + 16 x K floats */
static void
KSUFFIX(matmul_amx_bf16)(const float *x, int ldx, int M, const llm_tensor *w,
    int n0, int n1, float *y, int ldy, float *scratch)
{
    int              K = w->cols, nkb = K / 32, mc, mlen, mt;
    int              n, t, g, i, j, ng, nrow, ntok;
    uint32_t        *xp = (uint32_t *) scratch;
    uint16_t        *pad = (uint16_t *) (xp + (size_t) LLM_AMX_MC / 16 * nkb
                                              * 768);
    const uint16_t  *wa;
    float            c[2][16][16] __attribute__((aligned(64)));

    llm_qpack_tiles_on(LLM_DTYPE_BF16);     /* all 16 x 64 bytes: tiles 0, 1
                                               weights; 2, 3, 6 tokens (hi,
                                               mid, lo); 4, 5 results */
    for (mc = 0; mc < M; mc += LLM_AMX_MC) {
        mlen = M - mc < LLM_AMX_MC ? M - mc : LLM_AMX_MC;
        mt = (mlen + 15) / 16;
        llm_amx_bf16_tokens(x + (size_t) mc * ldx, ldx, mlen, K, xp);
        for (n = n0; n < n1; n += 32) {
            ng = n1 - n > 16 ? 2 : 1;
            wa = (const uint16_t *) w->data + (size_t) n * K;
            if (n + 16 * ng > n1) {
                /* the matrix's last rows: a copy padded with zero rows */
                memset(pad, 0, sizeof(uint16_t) * 16 * ng * (size_t) K);
                memcpy(pad, wa, sizeof(uint16_t) * (size_t) (n1 - n) * K);
                wa = pad;
            }
            for (t = 0; t < mt; t++) {
                const uint32_t  *xt = xp + (size_t) t * nkb * 768;

                if (ng == 2) {
                    llm_amx_bf16_block(2, wa, K, xt, nkb, c);
                } else {
                    llm_amx_bf16_block(1, wa, K, xt, nkb, c);
                }
                /* c[group][weight row][token] -> y[token][row] */
                ntok = mlen - 16 * t < 16 ? mlen - 16 * t : 16;
                for (g = 0; g < ng; g++) {
                    nrow = n1 - n - 16 * g < 16 ? n1 - n - 16 * g : 16;
                    for (j = 0; j < ntok; j++) {
                        float  *yj = y + (size_t) (mc + 16 * t + j) * ldy + n
                                     + 16 * g;

                        for (i = 0; i < nrow; i++) {
                            yj[i] = c[g][i][j];
                        }
                    }
                }
            }
        }
    }
    _tile_release();
}

#define LLM_AMX_BF16  1

#endif
