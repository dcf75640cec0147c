/*
 * test_quant.c -- the block formats: quantize/dequantize round trips, and
 * every kernel set's matmul over each block format against the f32
 * reference (dequantized weights times f32 activations, in double); and
 * the batched bf16 form, whose activations are rounded to bf16 on AMX.
 *
 * Tolerance: the kernels quantize each group of 32 activations (256 for
 * the K-quants) to int8 with d = amax / 127, so each activation moves by
 * at most d / 2; an output can move by at most sum over groups of
 * (d_g / 2) * sum |w_k| in the group, plus f32 rounding (1e-5 of sum |w_k x_k|).  The test checks
 * that bound (exceeding it means a wrong block layout, scale or offset:
 * those are off by whole units of the weights) and also reports the
 * typical error, which is far below it.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "tap.h"
#include "cpu/cpu_kernels.h"
#include "model/quant.h"
#include "util/util.h"


static uint64_t  rng = 88172645463325252ULL;


static uint32_t
rnd(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (uint32_t) (rng >> 11);
}


static float
rndf(void)
{
    return (float) ((rnd() & 0xFFFFFF) / 16777216.0 * 2.0 - 1.0);
}


/* rows x cols of weights in block format t: quantized from random floats
 * where a quantizer exists, else random bytes with sane f16 scales */
static void *
make_weights(llm_dtype t, int rows, int cols)
{
    size_t    rb = llm_dtype_row_bytes(t, (size_t) cols), i;
    uint8_t  *w = malloc(rb * rows);
    float    *x = malloc(sizeof(float) * cols);
    int       r, k;

    for (r = 0; r < rows; r++) {
        if (llm_quantize_supported(t)) {
            for (k = 0; k < cols; k++) {
                x[k] = rndf() * (k % 7 == 0 ? 3.0f : 1.0f);
            }
            llm_quantize_row(t, x, w + r * rb, (size_t) cols);
            continue;
        }
        for (i = 0; i < rb; i++) {
            w[r * rb + i] = (uint8_t) rnd();
        }
        for (i = 0; i < (size_t) cols / LLM_QK_K; i++) {
            uint8_t  *b = w + r * rb + i * llm_dtype_block_bytes(t);
            uint16_t  d = llm_f32_to_f16(0.001f + (rnd() % 1000) * 1e-5f);
            uint16_t  dm = llm_f32_to_f16((rnd() % 1000) * 1e-5f);

            if (t == LLM_DTYPE_Q6_K) {
                memcpy(b + 208, &d, 2);
            } else {
                memcpy(b, &d, 2);
                memcpy(b + 2, &dm, 2);
            }
        }
    }
    free(x);
    return w;
}


static void
check_roundtrip(llm_dtype t, int cols)
{
    float   *x = malloc(sizeof(float) * cols), *y = malloc(sizeof(float) * cols);
    void    *q = malloc(llm_dtype_row_bytes(t, (size_t) cols));
    double   err = 0, amax = 0;
    int      k;

    for (k = 0; k < cols; k++) {
        x[k] = rndf();
        amax = fabs(x[k]) > amax ? fabs(x[k]) : amax;
    }
    llm_quantize_row(t, x, q, (size_t) cols);
    llm_dequantize_row(t, q, y, (size_t) cols);
    for (k = 0; k < cols; k++) {
        err = fabs(x[k] - y[k]) > err ? fabs(x[k] - y[k]) : err;
    }
    /* one step of the coarsest grid: 2 amax / 15 for 4 bits (Q4_K's
     * 6-bit scales can stretch its step by a little) */
    tap_ok(err <= amax * (t == LLM_DTYPE_Q8_0 ? 1.0 / 127 : 2.2 / 15),
           "%s round trip: max |x - dq(q(x))| %.4g (amax %.3g)",
           llm_dtype_name(t), err, amax);
    free(x);
    free(y);
    free(q);
}


/* pack: through the set's packed layout (qpack.h), when it has one */
static void
check_matmul(const llm_cpu_kernels *kset, llm_dtype t, int N, int K, int M,
    int pack)
{
    void        *wq = make_weights(t, N, K);
    void        *wp = NULL;
    float       *wf = malloc(sizeof(float) * N * K);
    float       *x = malloc(sizeof(float) * M * K);
    float       *y = malloc(sizeof(float) * M * N);
    float       *y1 = malloc(sizeof(float) * N);
    float       *scratch = malloc(sizeof(float) * llm_matmul_scratch_size(K, M));
    llm_tensor   w = { wq, t, N, K };
    double       ref, bound, absum, wsum, amax, worst = 0, typical = 0;
    int          n, m, k, b, bad = 0, same = 1;
    /* the activations' quantization groups: 256 for the K-quants */
    int          group = llm_dtype_block(t) == LLM_QK_K ? LLM_QK_K : LLM_QK;

    for (n = 0; n < N; n++) {
        llm_dequantize_row(t, (char *) wq + n * llm_dtype_row_bytes(t, K),
                           wf + (size_t) n * K, (size_t) K);
    }
    for (k = 0; k < M * K; k++) {
        x[k] = rndf() * (k % 13 == 0 ? 4.0f : 1.0f);
    }
    if (pack) {
        wp = malloc(kset->pack(&w, NULL, NULL));
        kset->pack(&w, &w, wp);
    }
    kset->matmul(x, K, M, &w, 0, N, y, N, scratch);
    for (m = 0; m < M; m++) {
        for (n = 0; n < N; n++) {
            ref = 0;
            absum = 0;
            bound = 0;
            for (b = 0; b < K / group; b++) {
                amax = 0;
                wsum = 0;
                for (k = b * group; k < b * group + group; k++) {
                    ref += (double) wf[(size_t) n * K + k] * x[m * K + k];
                    absum += fabs((double) wf[(size_t) n * K + k]
                                  * x[m * K + k]);
                    wsum += fabs(wf[(size_t) n * K + k]);
                    amax = fabs(x[m * K + k]) > amax ? fabs(x[m * K + k])
                                                     : amax;
                }
                bound += amax / 127 / 2 * wsum;
            }
            bound += 1e-5 * absum;
            if (fabs(y[m * N + n] - ref) > bound) {
                bad++;
            }
            worst = fabs(y[m * N + n] - ref) / bound > worst
                    ? fabs(y[m * N + n] - ref) / bound : worst;
            typical += fabs(y[m * N + n] - ref) / (absum + 1e-30);
        }
    }
    /* a token's result does not depend on the batch: each row alone
     * (packed: rows in AMX tiles of 16, the rest and a row alone on VNNI) */
    for (m = 0; m < M; m++) {
        kset->matmul(x + (size_t) m * K, K, 1, &w, 0, N, y1, N, scratch);
        for (n = 0; n < N; n++) {
            same &= y1[n] == y[(size_t) m * N + n];
        }
    }
    tap_ok(bad == 0, "%s %s%s N=%d K=%d M=%d: %d outputs beyond the bound "
           "(worst %.2f of it, mean |err| / sum|wx| %.2g)", kset->name,
           llm_dtype_name(t), pack ? " packed" : "", N, K, M, bad, worst,
           typical / (M * N));
    tap_ok(same, "%s %s%s M=%d: each row alone gives the same bits",
           kset->name, llm_dtype_name(t), pack ? " packed" : "", M);
    free(wq);
    free(wp);
    free(wf);
    free(x);
    free(y);
    free(y1);
    free(scratch);
}


/* bf16 weights, M >= 16 tokens: within 1e-5 sum |w x| of the exact sum, f32
 * rounding (AMX: activations split into three bf16, 2^-27 of each); a
 * token's row the same bits whatever else is in the batch */
static void
check_matmul_bf16(const llm_cpu_kernels *kset, int N, int K, int M)
{
    uint16_t    *wb = malloc(sizeof(uint16_t) * N * K);
    float       *x = malloc(sizeof(float) * M * K);
    float       *y = malloc(sizeof(float) * M * N);
    float       *y16 = malloc(sizeof(float) * 16 * N);
    float       *scratch = malloc(sizeof(float) * llm_matmul_scratch_size(K, M));
    llm_tensor   w = { wb, LLM_DTYPE_BF16, N, K, 0 };
    double       ref, absum, wf, worst = 0;
    int          n, m, k, bad = 0, same = 1;

    for (k = 0; k < N * K; k++) {
        wb[k] = llm_f32_to_bf16(rndf());
    }
    for (k = 0; k < M * K; k++) {
        x[k] = rndf() * (k % 13 == 0 ? 4.0f : 1.0f);
    }
    kset->matmul(x, K, M, &w, 0, N, y, N, scratch);
    for (m = 0; m < M; m++) {
        for (n = 0; n < N; n++) {
            ref = 0;
            absum = 0;
            for (k = 0; k < K; k++) {
                wf = llm_bf16_to_f32(wb[(size_t) n * K + k]);
                ref += wf * x[m * K + k];
                absum += fabs(wf * x[m * K + k]);
            }
            if (fabs(y[m * N + n] - ref) > 1e-5 * absum) {
                bad++;
            }
            worst = fabs(y[m * N + n] - ref) / absum > worst
                    ? fabs(y[m * N + n] - ref) / absum : worst;
        }
    }
    /* the last 16 tokens as a batch of their own */
    kset->matmul(x + (size_t) (M - 16) * K, K, 16, &w, 0, N, y16, N, scratch);
    for (k = 0; k < 16 * N; k++) {
        same &= y16[k] == y[(size_t) (M - 16) * N + k];
    }
    tap_ok(bad == 0, "%s bf16 N=%d K=%d M=%d: %d outputs beyond 1e-5 sum|wx| "
           "(worst %.2g of sum|wx|)", kset->name, N, K, M, bad, worst);
    tap_ok(same, "%s bf16 M=%d: the last 16 tokens alone give the same bits",
           kset->name, M);
    free(wb);
    free(x);
    free(y);
    free(y16);
    free(scratch);
}


static void
check_row_to_f32(const llm_cpu_kernels *kset, llm_dtype t)
{
    int          N = 3, K = 512;
    void        *wq = make_weights(t, N, K);
    float        a[512], b[512];
    llm_tensor   w = { wq, t, N, K };

    kset->row_to_f32(a, &w, 2);
    llm_dequantize_row(t, (char *) wq + 2 * llm_dtype_row_bytes(t, K), b,
                       (size_t) K);
    tap_ok(memcmp(a, b, sizeof(a)) == 0, "%s %s row_to_f32 = dequantize",
           kset->name, llm_dtype_name(t));
    free(wq);
}


int
main(void)
{
    static const llm_dtype  types[] = { LLM_DTYPE_Q8_0, LLM_DTYPE_Q4_0,
                                        LLM_DTYPE_Q4_K, LLM_DTYPE_Q5_K,
                                        LLM_DTYPE_Q6_K };
    static const int        Ms[] = { 1, 2, 3, 5, 9, 33 };
    static const int        Mp[] = { 1, 4, 16, 21, 48 };
    const llm_cpu_kernels  *sets[3];
    int                     ns = 0, s, i, j;

    sets[ns++] = &llm_cpu_kernels_generic;
#if defined(__x86_64__)
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) {
        sets[ns++] = &llm_cpu_kernels_avx2;
    }
    if (llm_cpu_kernels_select() == &llm_cpu_kernels_avx512) {
        sets[ns++] = &llm_cpu_kernels_avx512;
    } else {
        tap_diag("no AVX-512 VNNI here: its kernels are not run");
    }
#endif
    check_roundtrip(LLM_DTYPE_Q8_0, 1024);
    check_roundtrip(LLM_DTYPE_Q4_0, 1024);
    check_roundtrip(LLM_DTYPE_Q4_K, 1024);
    for (s = 0; s < ns; s++) {
        for (i = 0; i < 5; i++) {
            check_row_to_f32(sets[s], types[i]);
            for (j = 0; j < 6; j++) {
                check_matmul(sets[s], types[i], 19, 512, Ms[j], 0);
            }
            if (sets[s]->pack == NULL) {
                continue;
            }
            {
                llm_tensor  w = { NULL, types[i], 48, 512, 0 };

                if (!sets[s]->pack(&w, NULL, NULL)) {
                    continue;
                }
            }
            for (j = 0; j < 5; j++) {
                check_matmul(sets[s], types[i], 48, 512, Mp[j], 1);
            }
        }
        check_matmul_bf16(sets[s], 37, 96, 16);
        check_matmul_bf16(sets[s], 53, 512, 37);
        check_matmul_bf16(sets[s], 40, 64, 300);
    }
    printf("1..%d\n", tap_n);
    return tap_failed != 0;
}
