/*
 * llama_prebuilt_bench.c -- prefill and decode speed of llama.cpp through
 * node-llama-cpp's prebuilt CPU libraries (the peer issue 2 names), measured
 * the way llama-bench measures: prefill = one batch of P tokens into an empty
 * cache; decode = G single-token steps after a P-token context (llama-bench
 * -n G -d P).  Context defaults as llama-bench's (f16 KV cache, flash
 * attention auto).  A warm-up repetition is not counted; the median of R is
 * printed as JSON.
 *
 *   llama_prebuilt_bench MODEL.gguf P G THREADS R
 *
 * Built by bench/cpu_vs_llamacpp.sh; CPU backends load from
 * $GGML_BACKEND_DIR.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ggml-backend.h"
#include "llama.h"


static double
now(void)
{
    struct timespec  ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}


static void
quiet_log(enum ggml_log_level level, const char *text, void *data)
{
    (void) data;
    if (level == GGML_LOG_LEVEL_ERROR) {
        fputs(text, stderr);
    }
}


static int
cmp_double(const void *a, const void *b)
{
    double  x = *(const double *) a, y = *(const double *) b;

    return x < y ? -1 : x > y;
}


/* Decodes n tokens starting at pos as one batch. */
static int
decode(struct llama_context *ctx, struct llama_batch *b, const llama_token *t,
    int n, int pos)
{
    int  i;

    for (i = 0; i < n; i++) {
        b->token[i] = t[i];
        b->pos[i] = pos + i;
        b->n_seq_id[i] = 1;
        b->seq_id[i][0] = 0;
        b->logits[i] = i == n - 1;
    }
    b->n_tokens = n;
    if (llama_decode(ctx, *b) != 0) {
        return -1;
    }
    llama_synchronize(ctx);
    return 0;
}


int
main(int argc, char **argv)
{
    struct llama_model_params    mp;
    struct llama_context_params  cp;
    struct llama_model          *model;
    struct llama_context        *ctx;
    struct llama_batch           b;
    llama_token                 *toks;
    double                      *pp, *tg, t0;
    int                          P, G, T, R, r, i, nv;

    if (argc < 6) {
        fprintf(stderr, "usage: llama_prebuilt_bench MODEL.gguf P G THREADS "
                "REPS\n");
        return 2;
    }
    P = atoi(argv[2]);
    G = atoi(argv[3]);
    T = atoi(argv[4]);
    R = atoi(argv[5]);
    if (P < 1 || G < 1 || T < 1 || R < 1) {
        fprintf(stderr, "llama_prebuilt_bench: P, G, THREADS, REPS must be "
                "positive\n");
        return 2;
    }

    llama_log_set(quiet_log, NULL);
    llama_backend_init();
    if (getenv("GGML_BACKEND_DIR")) {
        ggml_backend_load_all_from_path(getenv("GGML_BACKEND_DIR"));
    }
    mp = llama_model_default_params();
    model = llama_model_load_from_file(argv[1], mp);
    if (model == NULL) {
        fprintf(stderr, "llama_prebuilt_bench: cannot load %s\n", argv[1]);
        return 1;
    }
    cp = llama_context_default_params();
    cp.n_ctx = P + G + 16;
    cp.n_batch = P;
    cp.n_ubatch = P < 512 ? P : 512;
    cp.n_threads = T;
    cp.n_threads_batch = T;
    ctx = llama_init_from_model(model, cp);
    if (ctx == NULL) {
        fprintf(stderr, "llama_prebuilt_bench: cannot create a context\n");
        return 1;
    }

    /* random ids, as llama-bench uses */
    nv = llama_vocab_n_tokens(llama_model_get_vocab(model));
    toks = malloc(sizeof(llama_token) * (P + G));
    srand(1);
    for (i = 0; i < P + G; i++) {
        toks[i] = rand() % nv;
    }
    b = llama_batch_init(P, 0, 1);
    pp = malloc(sizeof(double) * R);
    tg = malloc(sizeof(double) * R);

    for (r = -1; r < R; r++) {             /* r = -1: warm-up */
        llama_memory_clear(llama_get_memory(ctx), true);
        t0 = now();
        if (decode(ctx, &b, toks, P, 0) != 0) {
            fprintf(stderr, "llama_prebuilt_bench: prefill failed\n");
            return 1;
        }
        if (r >= 0) {
            pp[r] = P / (now() - t0);
        }
        t0 = now();
        for (i = 0; i < G; i++) {
            if (decode(ctx, &b, &toks[P + i], 1, P + i) != 0) {
                fprintf(stderr, "llama_prebuilt_bench: decode failed\n");
                return 1;
            }
        }
        if (r >= 0) {
            tg[r] = G / (now() - t0);
        }
    }
    qsort(pp, R, sizeof(double), cmp_double);
    qsort(tg, R, sizeof(double), cmp_double);
    printf("{\"prompt_len\":%d,\"gen_len\":%d,\"threads\":%d,"
           "\"prefill_tokens_per_s\":%.2f,\"decode_tokens_per_s\":%.2f}\n",
           P, G, T, pp[R / 2], tg[R / 2]);

    llama_batch_free(b);
    llama_free(ctx);
    llama_model_free(model);
    llama_backend_free();
    free(toks);
    free(pp);
    free(tg);
    return 0;
}
