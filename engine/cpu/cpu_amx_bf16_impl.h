/*
 * cpu_amx_bf16_impl.h -- the batched form (16 tokens or more) of matmuls
 * over bf16 weights on AMX tiles, for the AVX-512 kernel set where the CPU
 * has AMX-BF16 and AVX512-BF16 and the kernel grants the tiles (included by
 * cpu_kernels_impl.h; the other sets and CPUs keep matmul_outer).
 *
 * A tile of 16 weight rows x 32 inputs is read straight from the row-major
 * matrix; the tokens are converted once per call to bf16 (rounded to the
 * nearest even, as llama.cpp does for a bf16 model's activations) in AMX's
 * pair layout, 16 tokens x 32 inputs per tile.  tdpbf16ps multiplies pairs
 * exactly and accumulates in f32 over all K; each output is one token's row
 * against one weight row, so a token's result does not depend on what else
 * is in the batch (within this form, as for the other forms).
 *
 * Numerics: against f32 activations, each activation moves by at most
 * 2^-9 of itself; t/unit/test_kernels.c checks that bound.
 */

#if defined(__AMX_BF16__) && defined(__AVX512BF16__)

static int  llm_amx_bf16 = -1;      /* -1 not asked yet, 0 no, 1 yes */


static int
llm_amx_bf16_usable(void)
{
    if (llm_amx_bf16 < 0) {
        __builtin_cpu_init();
        llm_amx_bf16 = __builtin_cpu_supports("amx-bf16")
                       && __builtin_cpu_supports("avx512bf16")
                       && llm_qpack_amx_usable();
    }
    return llm_amx_bf16;
}


/* all eight tiles 16 x 64 bytes: 0, 1 weights; 2, 3 tokens; 4-7 results */
static void
llm_amx_bf16_tiles_on(void)
{
    llm_tilecfg  cfg;
    int          t;

    memset(&cfg, 0, sizeof(cfg));
    cfg.palette = 1;
    for (t = 0; t < 8; t++) {
        cfg.rows[t] = 16;
        cfg.colsb[t] = 64;
    }
    _tile_loadconfig(&cfg);
}


/* M tokens of x (K inputs, K % 32 == 0) into xp: per 16-token tile and
 * 32-input chunk, 16 pair rows x 16 tokens x 2 bf16; tokens past M are 0 */
static void
llm_amx_bf16_tokens(const float *x, int ldx, int M, int K, uint32_t *xp)
{
    const __m512i  rows = _mm512_setr_epi32(0, 16, 32, 48, 64, 80, 96, 112,
                                            128, 144, 160, 176, 192, 208,
                                            224, 240);
    int            m, kb, nkb = K / 32, mt = (M + 15) / 16;

    memset(xp + (size_t) (mt - 1) * nkb * 256, 0,
           sizeof(uint32_t) * (size_t) nkb * 256);
    for (m = 0; m < M; m++) {
        const float  *xm = x + (size_t) m * ldx;
        uint32_t     *tile = xp + (size_t) (m / 16) * nkb * 256 + m % 16;

        for (kb = 0; kb < nkb; kb++, tile += 256) {
            __m512bh  v = _mm512_cvtne2ps_pbh(_mm512_loadu_ps(xm + 32 * kb + 16),
                                              _mm512_loadu_ps(xm + 32 * kb));

            _mm512_i32scatter_epi32(tile, rows, (__m512i) v, 4);
        }
    }
}


/* ng (1, 2) groups of 16 weight rows (wa, rows lda bf16 apart) against nt
 * (1, 2) token tiles of xp (xt: the first); c: the int tiles' results */
LLM_ALWAYS_INLINE void
llm_amx_bf16_block(const int ng, const int nt, const uint16_t *wa,
    size_t lda, const uint32_t *xt, int nkb, float c[2][2][16][16])
{
    int  kb, sa = (int) (lda * 2);

    _tile_zero(4);
    if (nt == 2) {
        _tile_zero(5);
    }
    if (ng == 2) {
        _tile_zero(6);
        if (nt == 2) {
            _tile_zero(7);
        }
    }
    for (kb = 0; kb < nkb; kb++) {
        _tile_loadd(0, wa + 32 * kb, sa);
        _tile_loadd(2, xt + (size_t) kb * 256, 64);
        _tile_dpbf16ps(4, 0, 2);
        if (nt == 2) {
            _tile_loadd(3, xt + (size_t) (nkb + kb) * 256, 64);
            _tile_dpbf16ps(5, 0, 3);
        }
        if (ng == 2) {
            _tile_loadd(1, wa + 16 * lda + 32 * kb, sa);
            _tile_dpbf16ps(6, 1, 2);
            if (nt == 2) {
                _tile_dpbf16ps(7, 1, 3);
            }
        }
    }
    _tile_stored(4, c[0][0], 64);
    if (nt == 2) {
        _tile_stored(5, c[0][1], 64);
    }
    if (ng == 2) {
        _tile_stored(6, c[1][0], 64);
        if (nt == 2) {
            _tile_stored(7, c[1][1], 64);
        }
    }
}


/* y = x W^T for rows [n0, n1) of a bf16 W, M >= 16 tokens, K % 32 == 0 */
static void
KSUFFIX(matmul_amx_bf16)(const float *x, int ldx, int M, const llm_tensor *w,
    int n0, int n1, float *y, int ldy, float *scratch)
{
    int              K = w->cols, nkb = K / 32, mt = (M + 15) / 16;
    int              n, t, g, tt, i, j, ng, nt, nrow, ntok;
    uint32_t        *xp = (uint32_t *) scratch;
    uint16_t        *pad = (uint16_t *) (xp + (size_t) mt * nkb * 256);
    const uint16_t  *wa;
    float            c[2][2][16][16] __attribute__((aligned(64)));

    llm_amx_bf16_tokens(x, ldx, M, K, xp);
    llm_amx_bf16_tiles_on();
    for (n = n0; n < n1; n += 32) {
        ng = n1 - n > 16 ? 2 : 1;
        wa = (const uint16_t *) w->data + (size_t) n * K;
        if (n + 16 * ng > n1) {
            /* the matrix's last rows: a copy padded with zero rows */
            memset(pad, 0, sizeof(uint16_t) * 16 * ng * (size_t) K);
            memcpy(pad, wa, sizeof(uint16_t) * (size_t) (n1 - n) * K);
            wa = pad;
        }
        for (t = 0; t < mt; t += 2) {
            nt = mt - t > 1 ? 2 : 1;
            const uint32_t  *xt = xp + (size_t) t * nkb * 256;

            if (ng == 2 && nt == 2) {
                llm_amx_bf16_block(2, 2, wa, K, xt, nkb, c);
            } else if (ng == 2) {
                llm_amx_bf16_block(2, 1, wa, K, xt, nkb, c);
            } else if (nt == 2) {
                llm_amx_bf16_block(1, 2, wa, K, xt, nkb, c);
            } else {
                llm_amx_bf16_block(1, 1, wa, K, xt, nkb, c);
            }
            /* c[group][tile][weight row][token] -> y[token][row] */
            for (g = 0; g < ng; g++) {
                nrow = n1 - n - 16 * g < 16 ? n1 - n - 16 * g : 16;
                for (tt = 0; tt < nt; tt++) {
                    ntok = M - 16 * (t + tt) < 16 ? M - 16 * (t + tt) : 16;
                    for (j = 0; j < ntok; j++) {
                        float  *yj = y + (size_t) (16 * (t + tt) + j) * ldy
                                     + n + 16 * g;

                        for (i = 0; i < nrow; i++) {
                            yj[i] = c[g][tt][i][j];
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
