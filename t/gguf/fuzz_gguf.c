/*
 * fuzz_gguf.c -- libFuzzer target for the GGUF reader: any bytes as a GGUF
 * file (engine/model/gguf.c), and when they parse, every key read through
 * the typed getters and the embedded tokenizer built from the metadata
 * (engine/model/gguf_tokenizer.c) and run once.
 *
 * Properties: no crash, sanitizer report or leak; a file that does not
 * parse or has no usable tokenizer gives a message; every tensor the
 * parser accepts lies inside the buffer.
 *
 * Built and run by t/fuzz.sh (`make fuzz-gguf`, and for a bounded number
 * of inputs by t/gguf.t), seeded by t/gguf/seeds.py.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/gguf.h"
#include "model/gguf_tokenizer.h"
#include "util/util.h"


static void
llm_fuzz_getters(const llm_gguf *g)
{
    const llm_gguf_kv  *kv;
    char                key[256], err[LLM_ERR_LEN], *s;
    int64_t             i;
    double              d;
    int                 b;
    uint64_t            k;

    for (k = 0; k < g->n_kv; k++) {
        if (g->kv[k].key.len >= sizeof(key)
            || memchr(g->kv[k].key.p, '\0', g->kv[k].key.len))
        {
            continue;
        }
        memcpy(key, g->kv[k].key.p, g->kv[k].key.len);
        key[g->kv[k].key.len] = '\0';
        (void) llm_gguf_get_int(g, key, &i, err);
        (void) llm_gguf_get_float(g, key, &d, err);
        (void) llm_gguf_get_bool(g, key, &b, err);
        (void) llm_gguf_get_arr(g, key, LLM_GGUF_STRING, &kv, err);
        s = NULL;
        if (llm_gguf_get_str(g, key, &s, err) == 1) {
            free(s);
        }
    }
}


int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char             err[LLM_ERR_LEN];
    llm_gguf        *g;
    llm_gguf_vocab   v;
    llm_tokenizer   *t = NULL;
    int32_t         *ids;
    uint64_t         k;
    const uint8_t   *p;

    err[0] = '\0';
    g = llm_gguf_parse(data, size, "fuzz.gguf", err);
    if (g == NULL) {
        if (err[0] == '\0') {
            abort();                    /* a failure without a message */
        }
        return 0;
    }
    for (k = 0; k < g->n_tensors; k++) {
        p = g->tensors[k].data;
        if (p && (p < data || g->tensors[k].size > size
                  || (size_t) (p - data) > size - g->tensors[k].size))
        {
            abort();
        }
    }
    llm_fuzz_getters(g);
    err[0] = '\0';
    if (llm_gguf_tokenizer(g, "fuzz.gguf", &t, &v, err) == 0) {
        if (llm_tokenizer_encode(t, "Hello world, 1234 <s>", 21, 1, &ids,
                                 err) >= 0)
        {
            free(ids);
        }
        free(v.eog_ids);
        free(v.chat_template);
    } else if (err[0] == '\0') {
        abort();
    }
    llm_tokenizer_free(t);
    llm_gguf_close(g);
    return 0;
}
