/*
 * gguf_tokenizer_write.c -- a Hugging Face tokenizer as tokenizer.ggml.*
 * (the reverse of gguf_tokenizer.c), with the facts of llama.cpp's
 * converter (t/ref/hf_to_gguf.py shows them):
 *
 *   tokens      one per id of the model: tokenizer.json's vocabulary, its
 *               added tokens over it, "[PAD<id>]" for ids it lacks;
 *   token_type  added tokens CONTROL (special) or USER_DEFINED, <0xNN>
 *               pieces of a byte-fallback tokenizer BYTE, padding UNUSED,
 *               the rest NORMAL;
 *   "gpt2"      byte-level BPE: the merges as "a b", and the pre-tokenizer
 *               named after its split regex (llm_gguf_pre_name());
 *   "llama"     SentencePiece-style BPE (byte_fallback): no merges but a
 *               score per piece, minus the rank of the first merge that
 *               makes it (else minus (distinct merges + id)), so that
 *               merging by score merges in tokenizer.json's order;
 *   the BOS and EOS ids of tokenizer_config.json's bos_token and
 *   eos_token, add_bos_token (its own, else whether the post-processor
 *   puts a special token first), and the chat template
 *   (chat_template.jinja, else tokenizer_config.json's; named templates as
 *   tokenizer.chat_template.<name>, "default" as tokenizer.chat_template).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <yajl/yajl_tree.h>

#include "gguf_tokenizer.h"
#include "tokenizer/tokenizer_impl.h"
#include "util/util.h"


enum {                          /* llama.cpp's token types */
    LLM_TW_NORMAL = 1, LLM_TW_CONTROL = 3, LLM_TW_USER_DEFINED = 4,
    LLM_TW_UNUSED = 5, LLM_TW_BYTE = 6
};

typedef struct {
    const char       *path;     /* tokenizer.json, for messages */
    char             *err;
    yajl_val          root;
    llm_tok_buf       arena;    /* vocabulary keys */
    llm_tok_bpe_src   src;
    llm_tok_buf       pads;     /* "[PAD<id>]" strings */
    llm_gguf_str     *tok;      /* n */
    int32_t          *type;
    int               n;
    int               spm;
} llm_tw;


static int
llm_tw_set(llm_tw *k, int64_t id, const char *p, size_t len, int type)
{
    if (id < 0 || id >= k->n) {
        llm_errf(k->err, "%s: token id %lld is not below the model's "
                 "vocab_size %d", k->path, (long long) id, k->n);
        return -1;
    }
    k->tok[id].p = p;
    k->tok[id].len = len;
    k->type[id] = type;
    return 0;
}


/* the vocabulary, the added tokens over it, padding where none */
static int
llm_tw_tokens(llm_tw *k)
{
    yajl_val   added = llm_json_get(k->root, "added_tokens"), o;
    const llm_tok_vocab_entry  *e;
    const char *s;
    size_t      i;
    int         id, t;

    for (i = 0; i < k->src.n_vocab; i++) {
        e = &k->src.vocab[i];
        s = k->arena.p + e->off;
        t = k->spm && e->len == 6 && memcmp(s, "<0x", 3) == 0 && s[5] == '>'
            ? LLM_TW_BYTE : LLM_TW_NORMAL;
        if (llm_tw_set(k, e->id, s, e->len, t) != 0) {
            return -1;
        }
    }
    for (i = 0; YAJL_IS_ARRAY(added) && i < added->u.array.len; i++) {
        o = added->u.array.values[i];
        s = llm_tok_json_str(o, "content");
        if (s == NULL || !YAJL_IS_INTEGER(llm_json_get(o, "id"))) {
            llm_errf(k->err, "%s: added_tokens[%zu] has no id or content",
                     k->path, i);
            return -1;
        }
        if (llm_tw_set(k, YAJL_GET_INTEGER(llm_json_get(o, "id")), s,
                       strlen(s), llm_tok_json_bool(o, "special", 0)
                                  ? LLM_TW_CONTROL : LLM_TW_USER_DEFINED)
            != 0)
        {
            return -1;
        }
    }
    /* padding: offsets first, pointers once the buffer stops moving */
    for (id = 0; id < k->n; id++) {
        if (k->type[id] == 0) {
            char  pad[32];

            k->tok[id].len = (uint64_t) snprintf(pad, sizeof(pad), "[PAD%d]",
                                                 id);
            k->tok[id].p = (const char *) (uintptr_t) k->pads.len;
            llm_tok_buf_put(&k->pads, pad, (size_t) k->tok[id].len);
            k->type[id] = -LLM_TW_UNUSED;
        }
    }
    for (id = 0; id < k->n; id++) {
        if (k->type[id] == -LLM_TW_UNUSED) {
            k->tok[id].p = k->pads.p + (uintptr_t) k->tok[id].p;
            k->type[id] = LLM_TW_UNUSED;
        }
    }
    return 0;
}


/* merge i's two halves */
static void
llm_tw_merge(const llm_tw *k, size_t i, llm_gguf_str *a, llm_gguf_str *b)
{
    const uint32_t  *m = &k->src.merges[i * 4];

    a->p = k->src.mbuf.p + m[0];
    a->len = m[1];
    b->p = k->src.mbuf.p + m[2];
    b->len = m[3];
}


static void
llm_tw_put_merges(llm_gguf_writer *w, const llm_tw *k)
{
    llm_gguf_str  *s, a, b;
    llm_tok_buf    buf = { NULL, 0, 0 };
    size_t         i, *off;

    s = llm_xcalloc(k->src.n_merges + 1, sizeof(*s));
    off = llm_xcalloc(k->src.n_merges + 1, sizeof(*off));
    for (i = 0; i < k->src.n_merges; i++) {
        llm_tw_merge(k, i, &a, &b);
        off[i] = buf.len;
        llm_tok_buf_put(&buf, a.p, (size_t) a.len);
        llm_tok_buf_putc(&buf, ' ');
        llm_tok_buf_put(&buf, b.p, (size_t) b.len);
        s[i].len = a.len + 1 + b.len;
    }
    for (i = 0; i < k->src.n_merges; i++) {
        s[i].p = buf.p + off[i];
    }
    llm_gguf_put_str_arr(w, "tokenizer.ggml.merges", s, k->src.n_merges);
    llm_tok_buf_free(&buf);
    free(off);
    free(s);
}


/* ---- SentencePiece scores: the first merge that makes each piece ---- */

typedef struct {
    const char  *p;             /* a + b, in buf */
    size_t       len;
    int64_t      rank;          /* -1: empty slot */
} llm_tw_slot;


static llm_tw_slot *
llm_tw_find(llm_tw_slot *tab, uint64_t mask, const char *p, size_t len)
{
    uint64_t  i = llm_gguf_hash(p, len) & mask;

    while (tab[i].rank >= 0
           && (tab[i].len != len || memcmp(tab[i].p, p, len) != 0))
    {
        i = (i + 1) & mask;
    }
    return &tab[i];
}


static void
llm_tw_put_scores(llm_gguf_writer *w, const llm_tw *k)
{
    llm_tw_slot   *tab, *sl;
    llm_tok_buf    buf = { NULL, 0, 0 };
    llm_gguf_str   a, b;
    uint64_t       size = 16, distinct = 0;
    size_t         i, *off;
    float         *score;
    int            id;

    while (size < 2 * (k->src.n_merges + 1)) {
        size *= 2;
    }
    off = llm_xcalloc(k->src.n_merges + 1, sizeof(*off));
    for (i = 0; i < k->src.n_merges; i++) {
        llm_tw_merge(k, i, &a, &b);
        off[i] = buf.len;
        llm_tok_buf_put(&buf, a.p, (size_t) a.len);
        llm_tok_buf_put(&buf, b.p, (size_t) b.len);
    }
    tab = llm_xmalloc(size * sizeof(*tab));
    for (i = 0; i < size; i++) {
        tab[i].rank = -1;
    }
    for (i = 0; i < k->src.n_merges; i++) {
        llm_tw_merge(k, i, &a, &b);
        sl = llm_tw_find(tab, size - 1, buf.p + off[i],
                         (size_t) (a.len + b.len));
        if (sl->rank < 0) {
            sl->p = buf.p + off[i];
            sl->len = (size_t) (a.len + b.len);
            sl->rank = (int64_t) i;
            distinct++;
        }
    }
    score = llm_xmalloc((size_t) k->n * sizeof(float));
    for (id = 0; id < k->n; id++) {
        sl = llm_tw_find(tab, size - 1, k->tok[id].p, (size_t) k->tok[id].len);
        score[id] = -(float) (sl->rank >= 0 ? (uint64_t) sl->rank
                                            : distinct + (uint64_t) id);
    }
    llm_gguf_put_arr(w, "tokenizer.ggml.scores", LLM_GGUF_F32, score,
                     (uint64_t) k->n);
    free(score);
    free(tab);
    free(off);
    llm_tok_buf_free(&buf);
}


/* the split regex of a byte-level pre-tokenizer (Split, or in a
 * Sequence) */
static const char *
llm_tw_split_regex(yajl_val pre)
{
    yajl_val     list = llm_json_get(pre, "pretokenizers"), v;
    const char  *type;
    size_t       i, n = YAJL_IS_ARRAY(list) ? list->u.array.len : 0;

    for (i = 0; i < (n ? n : 1); i++) {
        v = n ? list->u.array.values[i] : pre;
        type = llm_tok_json_str(v, "type");
        if (type && strcmp(type, "Split") == 0) {
            return llm_tok_json_str(llm_json_get(v, "pattern"), "Regex");
        }
    }
    return NULL;
}


static int
llm_tw_put_model(llm_gguf_writer *w, llm_tw *k)
{
    const char  *regex, *pre, *norm;
    yajl_val     nv;

    if (k->spm) {
        llm_gguf_put_str(w, "tokenizer.ggml.model", "llama", 5);
        llm_gguf_put_str(w, "tokenizer.ggml.pre", "default", 7);
        llm_gguf_put_str_arr(w, "tokenizer.ggml.tokens", k->tok,
                             (uint64_t) k->n);
        llm_tw_put_scores(w, k);
        llm_gguf_put_arr(w, "tokenizer.ggml.token_type", LLM_GGUF_I32,
                         k->type, (uint64_t) k->n);
        return 0;
    }
    nv = llm_json_get(k->root, "normalizer");
    norm = llm_tok_json_str(nv, "type");
    regex = llm_tw_split_regex(llm_json_get(k->root, "pre_tokenizer"));
    pre = regex ? llm_gguf_pre_name(regex, norm && strcmp(norm, "NFC") == 0)
                : NULL;
    if (pre == NULL || (norm && strcmp(norm, "NFC") != 0)) {
        llm_errf(k->err, "%s: a byte-level BPE tokenizer whose "
                 "pre-tokenizer has no tokenizer.ggml.pre name here "
                 "(known: Llama 3's, llama-bpe; Qwen2's, qwen2)", k->path);
        return -1;
    }
    llm_gguf_put_str(w, "tokenizer.ggml.model", "gpt2", 4);
    llm_gguf_put_str(w, "tokenizer.ggml.pre", pre, strlen(pre));
    llm_gguf_put_str_arr(w, "tokenizer.ggml.tokens", k->tok, (uint64_t) k->n);
    llm_gguf_put_arr(w, "tokenizer.ggml.token_type", LLM_GGUF_I32, k->type,
                     (uint64_t) k->n);
    llm_tw_put_merges(w, k);
    return 0;
}


/* the id of a tokenizer_config.json token (a string or {"content"}):
 * an added token's, else the vocabulary's; -1 if none */
static int
llm_tw_id(const llm_tw *k, yajl_val v)
{
    const char  *s = YAJL_IS_STRING(v) ? v->u.string
                                       : llm_tok_json_str(v, "content");
    size_t       len;
    int          id, pass;

    if (s == NULL) {
        return -1;
    }
    len = strlen(s);
    for (pass = 0; pass < 2; pass++) {
        for (id = 0; id < k->n; id++) {
            if ((pass == 0) == (k->type[id] == LLM_TW_CONTROL
                                || k->type[id] == LLM_TW_USER_DEFINED)
                && k->tok[id].len == len
                && memcmp(k->tok[id].p, s, len) == 0)
            {
                return id;
            }
        }
    }
    return -1;
}


/* no add_bos_token in the config: does the post-processor put a special
 * token first (Llama 3's TemplateProcessing)? */
static int
llm_tw_post_bos(yajl_val pp)
{
    yajl_val  list = llm_json_get(pp, "processors"), single;
    size_t    i, n = YAJL_IS_ARRAY(list) ? list->u.array.len : 0;

    for (i = 0; i < (n ? n : 1); i++) {
        single = llm_json_get(n ? list->u.array.values[i] : pp, "single");
        if (YAJL_IS_ARRAY(single) && single->u.array.len > 0
            && llm_json_get(single->u.array.values[0], "SpecialToken"))
        {
            return 1;
        }
    }
    return 0;
}


static void
llm_tw_put_template(llm_gguf_writer *w, yajl_val ct, const char *jinja)
{
    const char  *name, *src;
    char         key[128];
    size_t       i;

    if (jinja) {
        llm_gguf_put_str(w, "tokenizer.chat_template", jinja, strlen(jinja));
        return;
    }
    if (YAJL_IS_STRING(ct)) {
        llm_gguf_put_str(w, "tokenizer.chat_template", ct->u.string,
                         strlen(ct->u.string));
        return;
    }
    for (i = 0; YAJL_IS_ARRAY(ct) && i < ct->u.array.len; i++) {
        name = llm_tok_json_str(ct->u.array.values[i], "name");
        src = llm_tok_json_str(ct->u.array.values[i], "template");
        if (name == NULL || src == NULL) {
            continue;
        }
        if (strcmp(name, "default") == 0) {
            snprintf(key, sizeof(key), "tokenizer.chat_template");
        } else {
            snprintf(key, sizeof(key), "tokenizer.chat_template.%.80s", name);
        }
        llm_gguf_put_str(w, key, src, strlen(src));
    }
}


static int
llm_tw_put_special(llm_gguf_writer *w, llm_tw *k, const char *dir)
{
    char      path[4096], *text, *jinja = NULL, ebuf[256];
    yajl_val  cfg = NULL, add;
    int       bos, eos, add_bos;

    llm_path_join(path, dir, "tokenizer_config.json");
    if (llm_file_exists(path)) {
        text = llm_read_file(path, NULL, k->err);
        if (text == NULL) {
            return -1;
        }
        cfg = yajl_tree_parse(text, ebuf, sizeof(ebuf));
        free(text);
        if (cfg == NULL) {
            ebuf[strcspn(ebuf, "\n")] = '\0';
            llm_errf(k->err, "%s: invalid JSON: %s", path, ebuf);
            return -1;
        }
    }
    llm_path_join(path, dir, "chat_template.jinja");
    if (llm_file_exists(path)
        && (jinja = llm_read_file(path, NULL, k->err)) == NULL)
    {
        yajl_tree_free(cfg);
        return -1;
    }
    bos = llm_tw_id(k, llm_json_get(cfg, "bos_token"));
    eos = llm_tw_id(k, llm_json_get(cfg, "eos_token"));
    if (bos >= 0) {
        llm_gguf_put_u32(w, "tokenizer.ggml.bos_token_id", (uint32_t) bos);
    }
    if (eos >= 0) {
        llm_gguf_put_u32(w, "tokenizer.ggml.eos_token_id", (uint32_t) eos);
    }
    llm_tw_put_template(w, llm_json_get(cfg, "chat_template"), jinja);
    add = llm_json_get(cfg, "add_bos_token");
    add_bos = YAJL_IS_TRUE(add) || YAJL_IS_FALSE(add)
              ? YAJL_IS_TRUE(add)
              : llm_tw_post_bos(llm_json_get(k->root, "post_processor"));
    llm_gguf_put_bool(w, "tokenizer.ggml.add_bos_token", add_bos);
    free(jinja);
    yajl_tree_free(cfg);
    return 0;
}


int
llm_gguf_put_tokenizer(llm_gguf_writer *w, const char *dir, int n_vocab,
    char *err)
{
    llm_tw   k;
    char     path[4096], msg[200], *text;
    size_t   len;
    int      rc = -1;

    memset(&k, 0, sizeof(k));
    k.path = llm_path_join(path, dir, "tokenizer.json");
    k.err = err;
    k.n = n_vocab;
    text = llm_read_file(path, &len, err);
    if (text == NULL) {
        return -1;
    }
    k.src.arena = &k.arena;
    k.root = llm_tok_json_parse(text, len, &k.src, msg, sizeof(msg));
    free(text);
    if (k.root == NULL) {
        llm_errf(err, "%s: %s", path, msg);
        goto done;
    }
    k.spm = llm_tok_json_bool(llm_json_get(k.root, "model"), "byte_fallback",
                              0);
    k.tok = llm_xcalloc((size_t) n_vocab, sizeof(*k.tok));
    k.type = llm_xcalloc((size_t) n_vocab, sizeof(*k.type));
    if (llm_tw_tokens(&k) == 0 && llm_tw_put_model(w, &k) == 0
        && llm_tw_put_special(w, &k, dir) == 0)
    {
        rc = 0;
    }
done:
    yajl_tree_free(k.root);
    llm_tok_bpe_src_free(&k.src);
    llm_tok_buf_free(&k.arena);
    llm_tok_buf_free(&k.pads);
    free(k.tok);
    free(k.type);
    return rc;
}
