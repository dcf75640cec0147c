/*
 * ggml_quant_cmp.c -- our block formats against ggml's own code, through
 * node-llama-cpp's prebuilt libggml-base (the quantizer llama_model_quantize
 * calls, ggml_quantize_chunk, and each type's to_float), printing TAP:
 *
 *   - Q8_0, Q4_0, Q4_K: llm_quantize_row gives the bytes ggml_quantize_chunk
 *     gives, on rows of several kinds (normal at three scales, outliers,
 *     all-zero, constant, one nonzero element, positive-only, values on
 *     rounding ties);
 *   - all five formats: llm_dequantize_row gives the floats to_float gives,
 *     bit for bit, on ggml's quantized rows and on blocks of random bytes.
 *
 *   ggml_quant_cmp [ROWS]
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ggml.h"
#include "model/quant.h"
#include "util/util.h"

#define COLS  1024

static uint64_t  rng = 0x9E3779B97F4A7C15ULL;
static int       tap_n, tap_failed;


static uint32_t
rnd(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (uint32_t) (rng >> 11);
}


static float
gauss(void)
{
    double  u = (rnd() + 1.0) / 2097153.0, v = rnd() / 2097152.0;

    return (float) (sqrt(-2.0 * log(u)) * cos(2.0 * M_PI * v));
}


static void
ok(int cond, const char *what, const char *type, int bad, int total)
{
    tap_n++;
    tap_failed += !cond;
    printf("%s %d - %s %s: %d of %d rows differ\n", cond ? "ok" : "not ok",
           tap_n, type, what, bad, total);
}


/* row r of the test input: its kind is r % 10 */
static void
make_row(int r, float *x)
{
    int    k, kind = r % 10;
    float  s = kind == 1 ? 1e-3f : kind == 2 ? 100.0f : 1.0f;

    for (k = 0; k < COLS; k++) {
        switch (kind) {
        case 3:                                     /* outliers */
            x[k] = gauss() * (rnd() % 61 == 0 ? 30.0f : 1.0f);
            break;
        case 4:                                     /* zero blocks */
            x[k] = (k / 256) % 2 ? 0.0f : gauss();
            break;
        case 5:                                     /* constant blocks */
            x[k] = (k / 32) % 3 == 0 ? 0.75f : gauss();
            break;
        case 6:                                     /* one nonzero per block */
            x[k] = k % 32 == 5 ? gauss() : 0.0f;
            break;
        case 7:                                     /* positive only */
            x[k] = fabsf(gauss()) + 0.5f;
            break;
        case 8:                                     /* halves: ties */
            x[k] = (float) ((int) (rnd() % 33) - 16) * 0.5f;
            break;
        default:
            x[k] = gauss() * s;
        }
    }
}


static void
compare_type(enum ggml_type gt, llm_dtype t, int rows)
{
    const struct ggml_type_traits  *tr = ggml_get_type_traits(gt);
    size_t   rb = llm_dtype_row_bytes(t, COLS);
    float   *x = malloc(sizeof(float) * COLS * rows);
    float   *ya = malloc(sizeof(float) * COLS), *yb = malloc(sizeof(float) * COLS);
    char    *qg = malloc(rb * rows), *qo = malloc(rb);
    int      r, bad_q = 0, bad_dq = 0, bad_rand = 0;
    size_t   i, b, bb = llm_dtype_block_bytes(t);
    uint16_t d;

    if (rb != ggml_row_size(gt, COLS)) {
        printf("Bail out! %s: row size %zu, ggml's %zu\n", llm_dtype_name(t),
               rb, ggml_row_size(gt, COLS));
        exit(1);
    }
    for (r = 0; r < rows; r++) {
        make_row(r, x + (size_t) r * COLS);
    }
    ggml_quantize_chunk(gt, x, qg, 0, rows, COLS, NULL);
    for (r = 0; r < rows; r++) {
        if (llm_quantize_supported(t)) {
            llm_quantize_row(t, x + (size_t) r * COLS, qo, COLS);
            bad_q += memcmp(qo, qg + r * rb, rb) != 0;
        }
        llm_dequantize_row(t, qg + r * rb, ya, COLS);
        tr->to_float(qg + r * rb, yb, COLS);
        bad_dq += memcmp(ya, yb, sizeof(float) * COLS) != 0;

        /* random bytes, the f16 scales kept finite */
        for (i = 0; i < rb; i++) {
            qo[i] = (char) rnd();
        }
        for (b = 0; b < rb / bb; b++) {
            d = (uint16_t) (rnd() & 0x3bff);
            if (t == LLM_DTYPE_Q6_K) {
                memcpy(qo + b * bb + 208, &d, 2);
            } else {
                memcpy(qo + b * bb, &d, 2);
                if (t == LLM_DTYPE_Q4_K || t == LLM_DTYPE_Q5_K) {
                    d = (uint16_t) (rnd() & 0x3bff);
                    memcpy(qo + b * bb + 2, &d, 2);
                }
            }
        }
        llm_dequantize_row(t, qo, ya, COLS);
        tr->to_float(qo, yb, COLS);
        bad_rand += memcmp(ya, yb, sizeof(float) * COLS) != 0;
    }
    if (llm_quantize_supported(t)) {
        ok(bad_q == 0, "quantize = ggml_quantize_chunk", llm_dtype_name(t),
           bad_q, rows);
    }
    ok(bad_dq == 0, "dequantize = to_float (ggml's quants)",
       llm_dtype_name(t), bad_dq, rows);
    ok(bad_rand == 0, "dequantize = to_float (random blocks)",
       llm_dtype_name(t), bad_rand, rows);
    free(x);
    free(ya);
    free(yb);
    free(qg);
    free(qo);
}


int
main(int argc, char **argv)
{
    int  rows = argc > 1 ? atoi(argv[1]) : 200;

    compare_type(GGML_TYPE_Q8_0, LLM_DTYPE_Q8_0, rows);
    compare_type(GGML_TYPE_Q4_0, LLM_DTYPE_Q4_0, rows);
    compare_type(GGML_TYPE_Q4_K, LLM_DTYPE_Q4_K, rows);
    compare_type(GGML_TYPE_Q5_K, LLM_DTYPE_Q5_K, rows);
    compare_type(GGML_TYPE_Q6_K, LLM_DTYPE_Q6_K, rows);
    printf("1..%d\n", tap_n);
    return tap_failed != 0;
}
