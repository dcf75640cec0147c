/*
 * llama_logits.c -- full float32 logits for every position of a token-id
 * sequence, computed by llama.cpp (libllama), for the engine's reference
 * checks.  The KV cache is float32 and flash attention is off, so llama.cpp
 * computes in float32 throughout and agrees with the torch reference to
 * ~1e-5 on f32 GGUFs.
 *
 *   llama_logits MODEL.gguf ID,ID,... OUT.f32 [THREADS [GREEDY]]
 *
 * Writes [n_ids x n_vocab] float32, row-major: the layout of `llm logits`.
 * With GREEDY > 0: then decodes GREEDY tokens greedily (the argmax, the
 * lowest id on a tie) and prints {"steps": [{"id", "gap", "max"}...]} on
 * stdout: each step's gap between its two best logits, and max |logit|.
 * Linked against node-llama-cpp's prebuilt libraries (t/ref/build_llama_logits.sh);
 * their CPU backends are shared objects loaded from $GGML_BACKEND_DIR.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ggml-backend.h"
#include "llama.h"


/* Only errors: llama.cpp's info lines would bury the test's output. */
static void
quiet_log(enum ggml_log_level level, const char *text, void *data)
{
    (void) data;
    if (level == GGML_LOG_LEVEL_ERROR) {
        fputs(text, stderr);
    }
}


static int
parse_ids(char *s, llama_token **out)
{
    int    n = 0, cap = 16;
    char  *tok, *end;
    long   v;

    *out = malloc(sizeof(llama_token) * cap);
    for (tok = strtok(s, ","); tok; tok = strtok(NULL, ",")) {
        v = strtol(tok, &end, 10);
        if (end == tok || *end || v < 0) {
            fprintf(stderr, "llama_logits: bad token id '%s'\n", tok);
            return -1;
        }
        if (n == cap) {
            cap *= 2;
            *out = realloc(*out, sizeof(llama_token) * cap);
        }
        (*out)[n++] = (llama_token) v;
    }
    return n;
}


/* GREEDY steps after a prompt of n tokens whose logits are in ctx */
static int
run_greedy(struct llama_context *ctx, int n, int nv, int greedy)
{
    struct llama_batch   one = llama_batch_init(1, 0, 1);
    const float         *l = llama_get_logits_ith(ctx, n - 1);
    int                  step, v, best, second, rc = 0;
    float                amax;

    printf("{\"steps\": [");
    for (step = 0; step < greedy; step++) {
        best = 0;
        second = 1;
        amax = 0;
        for (v = 0; v < nv; v++) {
            amax = fabsf(l[v]) > amax ? fabsf(l[v]) : amax;
        }
        for (v = 1; v < nv; v++) {
            if (l[v] > l[best]) {
                second = best;
                best = v;
            } else if (v != best && l[v] > l[second]) {
                second = v;
            }
        }
        printf("%s{\"id\": %d, \"gap\": %.9g, \"max\": %.9g}",
               step ? ", " : "", best, (double) (l[best] - l[second]),
               (double) amax);
        one.token[0] = best;
        one.pos[0] = n + step;
        one.n_seq_id[0] = 1;
        one.seq_id[0][0] = 0;
        one.logits[0] = 1;
        one.n_tokens = 1;
        if (llama_decode(ctx, one) != 0) {
            fprintf(stderr, "llama_logits: llama_decode failed\n");
            rc = 1;
            break;
        }
        l = llama_get_logits_ith(ctx, 0);
    }
    printf("]}\n");
    llama_batch_free(one);
    return rc;
}


int
main(int argc, char **argv)
{
    struct llama_model_params    mp;
    struct llama_context_params  cp;
    struct llama_model          *model;
    struct llama_context        *ctx;
    struct llama_batch           b;
    llama_token                 *ids;
    const char                  *dir;
    FILE                        *f;
    int                          n, i, nv, threads, greedy, rc = 1;

    if (argc < 4) {
        fprintf(stderr, "usage: llama_logits MODEL.gguf ID,ID,... OUT.f32 "
                "[THREADS]\n");
        return 2;
    }
    threads = argc > 4 ? atoi(argv[4]) : 2;
    greedy = argc > 5 ? atoi(argv[5]) : 0;
    n = parse_ids(argv[2], &ids);
    if (n <= 0) {
        fprintf(stderr, "llama_logits: no token ids\n");
        return 2;
    }

    llama_log_set(quiet_log, NULL);
    llama_backend_init();
    dir = getenv("GGML_BACKEND_DIR");
    if (dir) {
        ggml_backend_load_all_from_path(dir);
    }
    mp = llama_model_default_params();
    model = llama_model_load_from_file(argv[1], mp);
    if (model == NULL) {
        fprintf(stderr, "llama_logits: cannot load %s\n", argv[1]);
        return 1;
    }
    nv = llama_vocab_n_tokens(llama_model_get_vocab(model));
    for (i = 0; i < n; i++) {
        if (ids[i] >= nv) {
            fprintf(stderr, "llama_logits: id %d >= vocab %d\n", ids[i], nv);
            return 1;
        }
    }

    cp = llama_context_default_params();
    cp.n_ctx = n + greedy + 16;
    cp.n_batch = n;
    cp.n_ubatch = n;
    cp.n_threads = threads;
    cp.n_threads_batch = threads;
    cp.type_k = GGML_TYPE_F32;
    cp.type_v = GGML_TYPE_F32;
    cp.flash_attn_type = LLAMA_FLASH_ATTN_TYPE_DISABLED;
    ctx = llama_init_from_model(model, cp);
    if (ctx == NULL) {
        fprintf(stderr, "llama_logits: cannot create a context\n");
        return 1;
    }

    b = llama_batch_init(n, 0, 1);
    for (i = 0; i < n; i++) {
        b.token[i] = ids[i];
        b.pos[i] = i;
        b.n_seq_id[i] = 1;
        b.seq_id[i][0] = 0;
        b.logits[i] = 1;
    }
    b.n_tokens = n;
    if (llama_decode(ctx, b) != 0) {
        fprintf(stderr, "llama_logits: llama_decode failed\n");
        goto done;
    }

    f = fopen(argv[3], "wb");
    if (f == NULL) {
        perror(argv[3]);
        goto done;
    }
    for (i = 0; i < n; i++) {
        fwrite(llama_get_logits_ith(ctx, i), sizeof(float), (size_t) nv, f);
    }
    if (fclose(f) == 0) {
        rc = greedy > 0 ? run_greedy(ctx, n, nv, greedy) : 0;
    }

done:
    llama_batch_free(b);
    llama_free(ctx);
    llama_model_free(model);
    llama_backend_free();
    free(ids);
    return rc;
}
