/*
 * fuzz_gguf.c -- libFuzzer target for the GGUF reader: any bytes as a GGUF
 * file (engine/model/gguf.c), and when they parse, every key read through
 * the typed getters and the embedded tokenizer built from the metadata
 * (engine/model/gguf_tokenizer.c) and run once.
 *
 * Properties: no crash, sanitizer report or leak; a file that does not
 * parse or has no usable tokenizer gives a message; every tensor the
 * parser accepts lies inside the buffer; a file that parses, written back
 * by the writer (engine/model/gguf_write.c: its pairs copied, its tensors
 * of known types), parses to the same pairs and tensor bytes, and writing
 * that again gives the same file.
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
#include "model/gguf_write.h"
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


/* g written back (the tensors of known types); NULL when the writer
 * refuses it, which it must explain */
static char *
llm_fuzz_write(const llm_gguf *g, size_t *len)
{
    llm_gguf_writer  *w = llm_gguf_writer_new();
    char              err[LLM_ERR_LEN] = "", *buf = NULL;
    uint64_t          i;
    FILE             *f;
    int               rc;

    for (i = 0; i < g->n_kv; i++) {
        llm_gguf_put_kv(w, &g->kv[i]);
    }
    for (i = 0; i < g->n_tensors; i++) {
        if (g->tensors[i].dtype >= 0) {
            char  name[300];

            snprintf(name, sizeof(name), "%.*s",
                     (int) g->tensors[i].name.len, g->tensors[i].name.p);
            llm_gguf_add_tensor(w, name, g->tensors[i].n_dims,
                                g->tensors[i].ne,
                                (llm_dtype) g->tensors[i].dtype);
        }
    }
    f = open_memstream(&buf, len);
    rc = llm_gguf_writer_begin(w, f, err);
    for (i = 0; rc == 0 && i < g->n_tensors; i++) {
        if (g->tensors[i].dtype >= 0) {
            rc = llm_gguf_writer_data(w, g->tensors[i].data,
                                      g->tensors[i].size, err);
        }
    }
    if (rc == 0) {
        rc = llm_gguf_writer_end(w, err);
    }
    fclose(f);
    llm_gguf_writer_free(w);
    if (rc != 0) {
        if (err[0] == '\0') {
            abort();
        }
        free(buf);
        return NULL;
    }
    return buf;
}


static void
llm_fuzz_round_trip(const llm_gguf *g)
{
    char       err[LLM_ERR_LEN], name[300], *a, *b;
    size_t     alen, blen;
    llm_gguf  *h;
    uint64_t   i;
    const llm_gguf_tensor  *t, *o;

    for (i = 0; i < g->n_tensors; i++) {
        t = &g->tensors[i];
        if (t->dtype >= 0 && (t->name.len >= sizeof(name)
                              || memchr(t->name.p, '\0', t->name.len)))
        {
            return;             /* a name the writer's C strings cannot hold */
        }
    }
    a = llm_fuzz_write(g, &alen);
    if (a == NULL) {
        return;
    }
    h = llm_gguf_parse(a, alen, "written.gguf", err);
    if (h == NULL || h->n_kv != g->n_kv) {
        abort();
    }
    for (i = 0; i < h->n_tensors; i++) {
        t = &h->tensors[i];
        snprintf(name, sizeof(name), "%.*s", (int) t->name.len, t->name.p);
        o = llm_gguf_find_tensor(g, name);
        if (o == NULL || o->dtype != t->dtype || o->size != t->size
            || memcmp(o->data, t->data, t->size) != 0)
        {
            abort();
        }
    }
    b = llm_fuzz_write(h, &blen);
    if (b == NULL || blen != alen || memcmp(a, b, alen) != 0) {
        abort();
    }
    free(b);
    llm_gguf_close(h);
    free(a);
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
    llm_fuzz_round_trip(g);
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
