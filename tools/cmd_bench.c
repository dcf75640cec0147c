/*
 * cmd_bench.c -- `llm bench --model DIR [--prompt-len P --gen-len G
 * --batch B --threads T --reps R] [--json]`: prefill and decode speed of
 * the backend itself (no scheduler, greedy argmax), like llama-bench's pp
 * and tg tests.
 *   prefill: one sequence of P tokens in one step, logits for the last;
 *   decode:  B sequences, each after a P-token prompt, G steps of one token
 *            each (B tokens per step, B logits rows).
 * The median of R repetitions is reported.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/backend.h"
#include "backend/batch.h"
#include "cli.h"
#include "model/model.h"
#include "util/util.h"


static int
llm_bench_int(int argc, char **argv, const char *name, int def)
{
    const char  *s = llm_cli_opt(argc, argv, name);
    int          v = s ? atoi(s) : def;

    return v > 0 ? v : def;
}


static int
llm_cmp_double(const void *a, const void *b)
{
    double  x = *(const double *) a, y = *(const double *) b;

    return x < y ? -1 : x > y;
}


static int32_t
llm_bench_argmax(const float *x, int n)
{
    int  i, best = 0;

    for (i = 1; i < n; i++) {
        if (x[i] > x[best]) {
            best = i;
        }
    }
    return best;
}


/* One repetition: returns prefill and decode tokens/s. */
static int
llm_bench_once(llm_backend *b, const llm_model *m, int P, int G, int B,
    int32_t *tables, int per_seq, double *pp, double *tg, char *err)
{
    llm_batch_buf   bb = { 0 };
    int32_t        *prompt, *next;
    float          *logits;
    double          t0;
    int             s, g, i, V = m->config.vocab_size, rc = -1;

    prompt = llm_xmalloc(sizeof(int32_t) * P);
    next = llm_xmalloc(sizeof(int32_t) * B);
    logits = llm_xmalloc(sizeof(float) * (size_t) V * B);
    for (i = 0; i < P; i++) {
        prompt[i] = (int32_t) ((i * 7919 + 13) % V);
    }

    /* prefill of sequence 0 is timed; the others fill their caches */
    for (s = 0; s < B; s++) {
        llm_batch_reset(&bb);
        llm_batch_add(&bb, prompt, P, 0, tables + s * per_seq, per_seq,
                      LLM_LOGITS_LAST);
        t0 = llm_now();
        if (b->forward(b, &bb.batch, logits, err) != 0) {
            goto done;
        }
        if (s == 0) {
            *pp = P / (llm_now() - t0);
        }
        next[s] = llm_bench_argmax(logits, V);
    }

    t0 = llm_now();
    for (g = 0; g < G; g++) {
        llm_batch_reset(&bb);
        for (s = 0; s < B; s++) {
            llm_batch_add(&bb, &next[s], 1, P + g, tables + s * per_seq,
                          per_seq, LLM_LOGITS_LAST);
        }
        if (b->forward(b, &bb.batch, logits, err) != 0) {
            goto done;
        }
        for (s = 0; s < B; s++) {
            next[s] = llm_bench_argmax(logits + (size_t) s * V, V);
        }
    }
    *tg = (double) B * G / (llm_now() - t0);
    rc = 0;
done:
    llm_batch_buf_free(&bb);
    free(prompt);
    free(next);
    free(logits);
    return rc;
}


int
llm_cmd_bench(int argc, char **argv)
{
    const char          *dir = llm_cli_opt(argc, argv, "--model");
    const char          *device;
    int                  P = llm_bench_int(argc, argv, "--prompt-len", 128);
    int                  G = llm_bench_int(argc, argv, "--gen-len", 32);
    int                  B = llm_bench_int(argc, argv, "--batch", 1);
    int                  R = llm_bench_int(argc, argv, "--reps", 3);
    int                  threads = llm_cli_threads(argc, argv);
    int                  per_seq, i, rc = 1;
    char                 err[LLM_ERR_LEN];
    llm_model           *m;
    llm_backend         *b;
    llm_backend_config   bc = { 0 };
    int32_t             *tables;
    double              *pp, *tg;

    if (dir == NULL) {
        return llm_cli_fail("usage: llm bench --model DIR [--prompt-len P "
                            "--gen-len G --batch B --threads T --reps R "
                            "--device D --weights q8_0|q4_0|q4_k] [--json]");
    }
    m = llm_model_load(dir, err);
    if (m == NULL) {
        return llm_cli_fail("%s", err);
    }
    if (llm_model_quantize(m, llm_cli_opt(argc, argv, "--weights"), threads,
                           err) != 0)
    {
        llm_model_free(m);
        return llm_cli_fail("%s", err);
    }
    per_seq = (P + G + LLM_BLOCK_SIZE - 1) / LLM_BLOCK_SIZE;
    bc.threads = threads;
    bc.min_blocks = per_seq * B;
    device = llm_cli_opt(argc, argv, "--device");
    b = llm_backend_open(m, device ? device : "cpu", &bc, NULL, err);
    if (b == NULL) {
        llm_model_free(m);
        return llm_cli_fail("%s", err);
    }
    tables = llm_xmalloc(sizeof(int32_t) * per_seq * B);
    for (i = 0; i < per_seq * B; i++) {
        tables[i] = i;
    }
    pp = llm_xcalloc(R + 1, sizeof(double));
    tg = llm_xcalloc(R + 1, sizeof(double));
    /* repetition 0 warms caches and page tables and is not counted */
    for (i = 0; i <= R; i++) {
        if (llm_bench_once(b, m, P, G, B, tables, per_seq, &pp[i], &tg[i],
                           err) != 0)
        {
            llm_cli_fail("%s", err);
            goto done;
        }
    }
    qsort(pp + 1, R, sizeof(double), llm_cmp_double);
    qsort(tg + 1, R, sizeof(double), llm_cmp_double);
    if (llm_cli_flag(argc, argv, "--json")) {
        printf("{\"prompt_len\":%d,\"gen_len\":%d,\"batch\":%d,\"threads\":%d,"
               "\"prefill_tokens_per_s\":%.2f,\"decode_tokens_per_s\":%.2f}\n",
               P, G, B, threads, pp[1 + R / 2], tg[1 + R / 2]);
    } else {
        printf("prefill %d tokens: %.2f tokens/s\n", P, pp[1 + R / 2]);
        printf("decode %d x %d tokens: %.2f tokens/s\n", B, G, tg[1 + R / 2]);
    }
    rc = 0;
done:
    free(pp);
    free(tg);
    free(tables);
    b->free(b);
    llm_model_free(m);
    return rc;
}
