/*
 * cmd_logits.c -- `llm logits --model DIR --ids 1,2,3 --out FILE`: runs the
 * ids through the model as one prefill and writes every position's logits
 * as float32 little-endian, [n_ids x vocab].  The reference checks in
 * t/logits.t compare this file against torch and llama.cpp.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "backend/backend.h"
#include "backend/batch.h"
#include "cli.h"
#include "model/model.h"
#include "util/util.h"


int
llm_cli_parse_ids(const char *s, int32_t **ids)
{
    char   *end;
    long    v;
    int     n = 0, cap = 16;

    *ids = llm_xmalloc(sizeof(int32_t) * cap);
    while (*s) {
        errno = 0;
        v = strtol(s, &end, 10);
        if (end == s || errno != 0 || v < 0 || v > INT32_MAX
            || (*end != ',' && *end != '\0'))
        {
            free(*ids);
            *ids = NULL;
            return -1;
        }
        if (n == cap) {
            cap *= 2;
            *ids = llm_xrealloc(*ids, sizeof(int32_t) * cap);
        }
        (*ids)[n++] = (int32_t) v;
        s = *end ? end + 1 : end;
    }
    return n;
}


int
llm_cli_threads(int argc, char **argv)
{
    const char  *t = llm_cli_opt(argc, argv, "--threads");
    long         n;

    if (t) {
        n = strtol(t, NULL, 10);
        return n > 0 ? (int) n : 1;
    }
    n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? (int) n : 1;
}


int
llm_cmd_logits(int argc, char **argv)
{
    const char          *dir = llm_cli_opt(argc, argv, "--model");
    const char          *ids_s = llm_cli_opt(argc, argv, "--ids");
    const char          *out = llm_cli_opt(argc, argv, "--out");
    const char          *device = llm_cli_opt(argc, argv, "--device");
    char                 err[LLM_ERR_LEN];
    llm_model           *m;
    llm_backend         *b;
    llm_backend_config   bc = { 0 };
    llm_batch_buf        bb = { 0 };
    int32_t             *ids, *table;
    float               *logits;
    FILE                *f;
    int                  n, i, rc = 1;

    if (dir == NULL || ids_s == NULL || out == NULL) {
        return llm_cli_fail("usage: llm logits --model DIR --ids 1,2,3 "
                            "--out FILE [--threads N --device D "
                            "--weights q8_0|q4_0|q4_k]");
    }
    n = llm_cli_parse_ids(ids_s, &ids);
    if (n <= 0) {
        return llm_cli_fail("--ids: expected comma-separated token ids");
    }
    m = llm_model_load(dir, err);
    if (m == NULL) {
        free(ids);
        return llm_cli_fail("%s", err);
    }
    for (i = 0; i < n; i++) {
        if (ids[i] >= m->config.vocab_size) {
            llm_cli_fail("--ids: token id %d is outside the vocabulary (%d)",
                         ids[i], m->config.vocab_size);
            goto done;
        }
    }
    bc.threads = llm_cli_threads(argc, argv);
    if (llm_model_quantize(m, llm_cli_opt(argc, argv, "--weights"),
                           bc.threads, err) != 0)
    {
        llm_cli_fail("%s", err);
        goto done;
    }
    bc.min_blocks = (n + LLM_BLOCK_SIZE - 1) / LLM_BLOCK_SIZE;
    b = llm_backend_open(m, device ? device : "cpu", &bc, NULL, err);
    if (b == NULL) {
        llm_cli_fail("%s", err);
        goto done;
    }
    table = llm_xmalloc(sizeof(int32_t) * bc.min_blocks);
    for (i = 0; i < bc.min_blocks; i++) {
        table[i] = i;
    }
    llm_batch_add(&bb, ids, n, 0, table, bc.min_blocks, LLM_LOGITS_ALL);
    logits = llm_xmalloc(sizeof(float) * (size_t) n * m->config.vocab_size);
    if (b->forward(b, &bb.batch, logits, err) != 0) {
        llm_cli_fail("%s", err);
    } else if ((f = fopen(out, "wb")) == NULL) {
        llm_cli_fail("%s: %s", out, strerror(errno));
    } else {
        if (fwrite(logits, sizeof(float), (size_t) n * m->config.vocab_size,
                   f) != (size_t) n * m->config.vocab_size
            || fclose(f) != 0)
        {
            llm_cli_fail("%s: write failed", out);
        } else {
            rc = 0;
        }
    }
    free(logits);
    free(table);
    llm_batch_buf_free(&bb);
    b->free(b);
done:
    free(ids);
    llm_model_free(m);
    return rc;
}
