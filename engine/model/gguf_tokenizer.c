/*
 * gguf_tokenizer.c -- tokenizer.ggml.* as Hugging Face tokenizer files.
 *
 * GGUF keeps a tokenizer as a model name, the token strings with their
 * types (and scores, merges), a pre-tokenizer name and special ids; the
 * rules behind the names are llama.cpp's (src/llama-vocab.cpp).  Rather
 * than a second tokenizer, this file writes what the tokenizer.json of the
 * original model says for the same rules, and the engine's tokenizer (which
 * is checked against Hugging Face's) loads it:
 *
 *   "gpt2"   byte-level BPE: the vocabulary less the control, unknown and
 *            user-defined tokens, which become added tokens (special but
 *            the user-defined); the merges as stored; the regex
 *            pre-tokenizer the "pre" name stands for; ignore_merges for
 *            Llama 3's.
 *   "llama"  SentencePiece-style BPE with byte fallback: "▁" for spaces
 *            (prepended unless add_space_prefix is false), and the merges
 *            that transformers derives from the scores (every split of a
 *            piece into two pieces, ordered by the piece's score); every
 *            token in the vocabulary, the same added tokens as "gpt2".
 *
 * BOS/EOS come through a tokenizer_config.json whose add_bos_token and
 * add_eos_token are the file's (LlamaTokenizerFast's rule).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gguf_tokenizer.h"
#include "util/util.h"


enum {                          /* llama.cpp's token types */
    LLM_TT_NORMAL = 1, LLM_TT_UNKNOWN, LLM_TT_CONTROL, LLM_TT_USER_DEFINED,
    LLM_TT_UNUSED, LLM_TT_BYTE
};

/* the pre-tokenizer regexes of the originals' tokenizer.json */
static const struct {
    const char  *names;         /* GGUF names, '|'-separated */
    const char  *name;          /* the one llama.cpp's converter writes */
    const char  *regex;
    int          nfc;           /* the normalizer: NFC (Qwen) */
    int          ignore_merges; /* whole words in the vocabulary win */
    int          add_bos;       /* llama.cpp's default */
} llm_gguf_pretoks[] = {
    { "|llama3|llama-v3|llama-bpe|", "llama-bpe",
      "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|"
      "\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|"
      "\\s+", 0, 1, 1 },
    { "|qwen2|deepseek-r1-qwen|", "qwen2",
      "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|"
      "\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|"
      "\\s+", 1, 0, 0 },
};

/* control tokens that end generation (llama.cpp's list, our families') */
static const char *const  llm_gguf_eog_texts[] = {
    "<|eot_id|>", "<|eom_id|>", "<|end_of_text|>", "<|im_end|>",
    "<|endoftext|>", "<|end|>", "<end_of_turn>", NULL
};


const char *
llm_gguf_pre_name(const char *regex, int nfc)
{
    size_t  i;

    for (i = 0; i < sizeof(llm_gguf_pretoks) / sizeof(llm_gguf_pretoks[0]);
         i++)
    {
        if (strcmp(regex, llm_gguf_pretoks[i].regex) == 0
            && nfc == llm_gguf_pretoks[i].nfc)
        {
            return llm_gguf_pretoks[i].name;
        }
    }
    return NULL;
}


typedef struct {
    const llm_gguf       *g;
    const char           *path;
    char                 *err;
    const llm_gguf_str   *tok;          /* n tokens */
    uint64_t              n;
    const int32_t        *type;         /* NULL: all normal */
    const float          *score;        /* NULL: none */
    int                   spm;          /* "llama" */
} llm_gguf_tk;


static void
llm_json_put_str(FILE *f, const char *p, size_t len)
{
    size_t          i;
    unsigned char   ch;

    fputc('"', f);
    for (i = 0; i < len; i++) {
        ch = (unsigned char) p[i];
        if (ch == '"' || ch == '\\') {
            fputc('\\', f);
            fputc(ch, f);
        } else if (ch < 0x20) {
            fprintf(f, "\\u%04x", ch);
        } else {
            fputc(ch, f);
        }
    }
    fputc('"', f);
}


static int
llm_gguf_tk_type(const llm_gguf_tk *k, uint64_t id)
{
    int32_t  t;

    if (k->type == NULL) {
        return LLM_TT_NORMAL;
    }
    memcpy(&t, &k->type[id], sizeof(t));
    return t;
}


/* the tokens matched in the text before the model runs (llama.cpp's
 * special-token cache): HF's added tokens */
static int
llm_gguf_tk_added(const llm_gguf_tk *k, uint64_t id)
{
    int  t = llm_gguf_tk_type(k, id);

    return t == LLM_TT_CONTROL || t == LLM_TT_USER_DEFINED
           || t == LLM_TT_UNKNOWN;
}


/* ---- a string -> id table for the merges of "llama" files ---- */

typedef struct {
    const llm_gguf_tk  *k;
    int32_t            *slot;           /* -1: empty */
    uint64_t            mask;
} llm_gguf_ids;


uint64_t
llm_gguf_hash(const char *p, size_t n)
{
    uint64_t  h = 1469598103934665603ull;

    while (n--) {
        h = (h ^ (unsigned char) *p++) * 1099511628211ull;
    }
    return h;
}


static int32_t
llm_gguf_ids_get(const llm_gguf_ids *m, const char *p, size_t n)
{
    uint64_t  i = llm_gguf_hash(p, n) & m->mask;
    int32_t   id;

    while ((id = m->slot[i]) >= 0) {
        if (m->k->tok[id].len == n && memcmp(m->k->tok[id].p, p, n) == 0) {
            return id;
        }
        i = (i + 1) & m->mask;
    }
    return -1;
}


static void
llm_gguf_ids_init(llm_gguf_ids *m, const llm_gguf_tk *k)
{
    uint64_t  size = 16, id, i;

    while (size < 2 * k->n) {
        size *= 2;
    }
    m->k = k;
    m->mask = size - 1;
    m->slot = llm_xmalloc(size * sizeof(int32_t));
    memset(m->slot, 0xff, size * sizeof(int32_t));
    for (id = 0; id < k->n; id++) {
        if (llm_gguf_tk_type(k, id) != LLM_TT_NORMAL
            || llm_gguf_ids_get(m, k->tok[id].p, k->tok[id].len) >= 0)
        {
            continue;           /* the first of duplicates, as a dict has */
        }
        i = llm_gguf_hash(k->tok[id].p, k->tok[id].len) & m->mask;
        while (m->slot[i] >= 0) {
            i = (i + 1) & m->mask;
        }
        m->slot[i] = (int32_t) id;
    }
}


typedef struct {
    float     score;
    int32_t   id, left, right;
    uint32_t  split;
} llm_gguf_merge;


static int
llm_gguf_merge_cmp(const void *a, const void *b)
{
    const llm_gguf_merge  *x = a, *y = b;

    if (x->score != y->score) {
        return x->score > y->score ? -1 : 1;
    }
    if (x->id != y->id) {
        return x->id < y->id ? -1 : 1;
    }
    if (x->left != y->left) {
        return x->left < y->left ? -1 : 1;
    }
    return (x->right > y->right) - (x->right < y->right);
}


/* transformers' SentencePieceExtractor: every piece split in two pieces
 * (at character boundaries), by the piece's score, then the halves' ids */
static void
llm_gguf_spm_merges(const llm_gguf_tk *k, FILE *f)
{
    llm_gguf_ids     ids;
    llm_gguf_merge  *v = NULL;
    size_t           n = 0, cap = 0, i, s;
    uint64_t         id;
    const char      *p;
    int32_t          l, r;

    llm_gguf_ids_init(&ids, k);
    for (id = 0; id < k->n; id++) {
        if (llm_gguf_tk_type(k, id) != LLM_TT_NORMAL
            || llm_gguf_ids_get(&ids, k->tok[id].p, k->tok[id].len)
               != (int32_t) id)
        {
            continue;
        }
        p = k->tok[id].p;
        for (s = 1; s < k->tok[id].len; s++) {
            if (((unsigned char) p[s] & 0xc0) == 0x80) {
                continue;       /* inside a character */
            }
            l = llm_gguf_ids_get(&ids, p, s);
            r = llm_gguf_ids_get(&ids, p + s, k->tok[id].len - s);
            if (l < 0 || r < 0) {
                continue;
            }
            if (n == cap) {
                cap = cap ? 2 * cap : 1024;
                v = llm_xrealloc(v, cap * sizeof(*v));
            }
            memcpy(&v[n].score, &k->score[id], sizeof(float));
            v[n].id = (int32_t) id;
            v[n].left = l;
            v[n].right = r;
            v[n].split = (uint32_t) s;
            n++;
        }
    }
    if (n > 0) {
        qsort(v, n, sizeof(*v), llm_gguf_merge_cmp);
    }
    for (i = 0; i < n; i++) {
        fputs(i ? ",[" : "[", f);
        llm_json_put_str(f, k->tok[v[i].id].p, v[i].split);
        fputc(',', f);
        llm_json_put_str(f, k->tok[v[i].id].p + v[i].split,
                         k->tok[v[i].id].len - v[i].split);
        fputc(']', f);
    }
    free(v);
    free(ids.slot);
}


static void
llm_gguf_write_vocab(const llm_gguf_tk *k, FILE *f)
{
    uint64_t  id;
    int       first = 1, t;

    fputs("{", f);
    for (id = 0; id < k->n; id++) {
        t = llm_gguf_tk_type(k, id);
        if (t == LLM_TT_UNUSED || (!k->spm && llm_gguf_tk_added(k, id))) {
            continue;
        }
        if (!first) {
            fputc(',', f);
        }
        first = 0;
        llm_json_put_str(f, k->tok[id].p, k->tok[id].len);
        fprintf(f, ":%llu", (unsigned long long) id);
    }
    fputs("}", f);
}


static void
llm_gguf_write_added(const llm_gguf_tk *k, FILE *f)
{
    uint64_t  id;
    int       first = 1;

    fputs("[", f);
    for (id = 0; id < k->n; id++) {
        if (!llm_gguf_tk_added(k, id)) {
            continue;
        }
        fprintf(f, "%s{\"id\":%llu,\"content\":", first ? "" : ",",
                (unsigned long long) id);
        llm_json_put_str(f, k->tok[id].p, k->tok[id].len);
        fprintf(f, ",\"single_word\":false,\"lstrip\":false,"
                "\"rstrip\":false,\"normalized\":false,\"special\":%s}",
                llm_gguf_tk_type(k, id) != LLM_TT_USER_DEFINED ? "true"
                                                               : "false");
        first = 0;
    }
    fputs("]", f);
}


/* An optional id key: -1 when absent; 0 when valid; -1 and err if not. */
static int
llm_gguf_tk_id(const llm_gguf_tk *k, const char *key, int32_t *id)
{
    char     sub[LLM_ERR_LEN];
    int64_t  v;
    int      rc = llm_gguf_get_int(k->g, key, &v, sub);

    *id = -1;
    if (rc < 0 || (rc == 1 && (v < 0 || (uint64_t) v >= k->n))) {
        llm_errf(k->err, "%s: %s is not a token id", k->path, key);
        return -1;
    }
    if (rc == 1) {
        *id = (int32_t) v;
    }
    return 0;
}


/* The pieces of the tokenizer.json for "gpt2" */
static int
llm_gguf_write_gpt2(const llm_gguf_tk *k, FILE *f, int *add_bos)
{
    const llm_gguf_kv  *merges;
    char               *pre = NULL, sub[LLM_ERR_LEN], key[80];
    size_t              i;
    uint64_t            m;

    if (llm_gguf_get_arr(k->g, "tokenizer.ggml.merges", LLM_GGUF_STRING,
                         &merges, sub) != 1
        || llm_gguf_get_str(k->g, "tokenizer.ggml.pre", &pre, sub) != 1)
    {
        llm_errf(k->err, "%s: a \"gpt2\" tokenizer needs tokenizer.ggml."
                 "merges (strings) and tokenizer.ggml.pre", k->path);
        free(pre);
        return -1;
    }
    snprintf(key, sizeof(key), "|%.64s|", pre);
    for (i = 0; i < sizeof(llm_gguf_pretoks) / sizeof(llm_gguf_pretoks[0]);
         i++)
    {
        if (strstr(llm_gguf_pretoks[i].names, key) != NULL) {
            break;
        }
    }
    if (i == sizeof(llm_gguf_pretoks) / sizeof(llm_gguf_pretoks[0])) {
        llm_errf(k->err, "%s: tokenizer.ggml.pre \"%.64s\" is not supported "
                 "(supported: llama-bpe, llama3, llama-v3, qwen2, "
                 "deepseek-r1-qwen)", k->path, pre);
        free(pre);
        return -1;
    }
    free(pre);
    *add_bos = llm_gguf_pretoks[i].add_bos;
    fprintf(f, "\"normalizer\":%s,", llm_gguf_pretoks[i].nfc
                                     ? "{\"type\":\"NFC\"}" : "null");
    fputs("\"pre_tokenizer\":{\"type\":\"Sequence\",\"pretokenizers\":["
          "{\"type\":\"Split\",\"pattern\":{\"Regex\":", f);
    llm_json_put_str(f, llm_gguf_pretoks[i].regex,
                     strlen(llm_gguf_pretoks[i].regex));
    fputs("},\"behavior\":\"Isolated\",\"invert\":false},"
          "{\"type\":\"ByteLevel\",\"add_prefix_space\":false,"
          "\"trim_offsets\":false,\"use_regex\":false}]},"
          "\"decoder\":{\"type\":\"ByteLevel\",\"add_prefix_space\":false,"
          "\"trim_offsets\":false,\"use_regex\":false},", f);
    fprintf(f, "\"model\":{\"type\":\"BPE\",\"ignore_merges\":%s,"
            "\"vocab\":", llm_gguf_pretoks[i].ignore_merges ? "true"
                                                            : "false");
    llm_gguf_write_vocab(k, f);
    fputs(",\"merges\":[", f);
    for (m = 0; m < merges->n; m++) {
        if (m) {
            fputc(',', f);
        }
        llm_json_put_str(f, merges->str[m].p, merges->str[m].len);
    }
    fputs("]}", f);
    return 0;
}


/* The pieces of the tokenizer.json for "llama" (SentencePiece) */
static int
llm_gguf_write_spm(llm_gguf_tk *k, FILE *f)
{
    const llm_gguf_kv  *scores;
    char                sub[LLM_ERR_LEN];
    int                 prefix = 1;
    int32_t             unk;

    if (llm_gguf_get_arr(k->g, "tokenizer.ggml.scores", LLM_GGUF_F32,
                         &scores, sub) != 1 || scores->n != k->n)
    {
        llm_errf(k->err, "%s: a \"llama\" tokenizer needs tokenizer.ggml."
                 "scores (f32, one per token)", k->path);
        return -1;
    }
    k->score = scores->data;
    if (llm_gguf_get_bool(k->g, "tokenizer.ggml.add_space_prefix", &prefix,
                          sub) < 0
        || llm_gguf_tk_id(k, "tokenizer.ggml.unknown_token_id", &unk) != 0)
    {
        if (k->err[0] == '\0') {
            llm_errf(k->err, "%s: %s", k->path, sub);
        }
        return -1;
    }
    fprintf(f, "\"normalizer\":{\"type\":\"Sequence\",\"normalizers\":[%s"
            "{\"type\":\"Replace\",\"pattern\":{\"String\":\" \"},"
            "\"content\":\"\xe2\x96\x81\"}]},\"pre_tokenizer\":null,",
            prefix ? "{\"type\":\"Prepend\",\"prepend\":\"\xe2\x96\x81\"},"
                   : "");
    fprintf(f, "\"decoder\":{\"type\":\"Sequence\",\"decoders\":["
            "{\"type\":\"Replace\",\"pattern\":{\"String\":\"\xe2\x96\x81\"},"
            "\"content\":\" \"},{\"type\":\"ByteFallback\"},"
            "{\"type\":\"Fuse\"}%s]},",
            prefix ? ",{\"type\":\"Strip\",\"content\":\" \",\"start\":1,"
                     "\"stop\":0}" : "");
    fputs("\"model\":{\"type\":\"BPE\",\"byte_fallback\":true,"
          "\"fuse_unk\":true,\"unk_token\":", f);
    if (unk >= 0) {
        llm_json_put_str(f, k->tok[unk].p, k->tok[unk].len);
    } else {
        fputs("null", f);
    }
    fputs(",\"vocab\":", f);
    llm_gguf_write_vocab(k, f);
    fputs(",\"merges\":[", f);
    llm_gguf_spm_merges(k, f);
    fputs("]}", f);
    return 0;
}


/* The ids that end generation: the eos/eot/eom keys and the control tokens
 * llama.cpp recognises by their text. */
static int
llm_gguf_eog(const llm_gguf_tk *k, llm_gguf_vocab *v)
{
    static const char *const  keys[] = {
        "tokenizer.ggml.eos_token_id", "tokenizer.ggml.eot_token_id",
        "tokenizer.ggml.eom_token_id", NULL
    };
    int32_t   id;
    uint64_t  t;
    int       i, j;

    v->eog_ids = llm_xmalloc(sizeof(int32_t) * 16);
    for (i = 0; keys[i]; i++) {
        if (llm_gguf_tk_id(k, keys[i], &id) != 0) {
            return -1;
        }
        if (id >= 0) {
            v->eog_ids[v->n_eog++] = id;
        }
    }
    for (t = 0; t < k->n; t++) {
        if (llm_gguf_tk_type(k, t) != LLM_TT_CONTROL) {
            continue;
        }
        for (i = 0; llm_gguf_eog_texts[i]; i++) {
            if (k->tok[t].len == strlen(llm_gguf_eog_texts[i])
                && memcmp(k->tok[t].p, llm_gguf_eog_texts[i],
                          k->tok[t].len) == 0)
            {
                break;
            }
        }
        for (j = 0; j < v->n_eog && v->eog_ids[j] != (int32_t) t; j++) {
            /* void */
        }
        if (llm_gguf_eog_texts[i] && j == v->n_eog && v->n_eog < 16) {
            v->eog_ids[v->n_eog++] = (int32_t) t;
        }
    }
    return 0;
}


/* tokenizer_config.json: the BOS/EOS strings and when to add them */
static int
llm_gguf_write_config(const llm_gguf_tk *k, FILE *f, int add_bos,
    llm_gguf_vocab *v)
{
    char     sub[LLM_ERR_LEN];
    int32_t  eos;
    int      add_eos = 0;

    if (llm_gguf_tk_id(k, "tokenizer.ggml.bos_token_id", &v->bos_id) != 0
        || llm_gguf_tk_id(k, "tokenizer.ggml.eos_token_id", &eos) != 0)
    {
        return -1;
    }
    if (llm_gguf_get_bool(k->g, "tokenizer.ggml.add_bos_token", &add_bos,
                          sub) < 0
        || llm_gguf_get_bool(k->g, "tokenizer.ggml.add_eos_token", &add_eos,
                             sub) < 0)
    {
        llm_errf(k->err, "%s: %s", k->path, sub);
        return -1;
    }
    fprintf(f, "{\"tokenizer_class\":\"LlamaTokenizerFast\","
            "\"add_bos_token\":%s,\"add_eos_token\":%s",
            add_bos && v->bos_id >= 0 ? "true" : "false",
            add_eos && eos >= 0 ? "true" : "false");
    if (v->bos_id >= 0) {
        fputs(",\"bos_token\":", f);
        llm_json_put_str(f, k->tok[v->bos_id].p, k->tok[v->bos_id].len);
    }
    if (eos >= 0) {
        fputs(",\"eos_token\":", f);
        llm_json_put_str(f, k->tok[eos].p, k->tok[eos].len);
    }
    fputs("}", f);
    return 0;
}


static int
llm_gguf_tk_read(llm_gguf_tk *k)
{
    const llm_gguf_kv  *tokens, *types;
    char               *model = NULL, sub[LLM_ERR_LEN];
    int                 rc;

    rc = llm_gguf_get_str(k->g, "tokenizer.ggml.model", &model, sub);
    if (rc != 1) {
        llm_errf(k->err, "%s: no tokenizer in the file "
                 "(tokenizer.ggml.model)", k->path);
        free(model);
        return -1;
    }
    k->spm = strcmp(model, "llama") == 0;
    if (!k->spm && strcmp(model, "gpt2") != 0) {
        llm_errf(k->err, "%s: tokenizer.ggml.model \"%.64s\" is not "
                 "supported (supported: gpt2, llama)", k->path, model);
        free(model);
        return -1;
    }
    free(model);
    if (llm_gguf_get_arr(k->g, "tokenizer.ggml.tokens", LLM_GGUF_STRING,
                         &tokens, sub) != 1
        || tokens->n == 0 || tokens->n > 1 << 24)
    {
        llm_errf(k->err, "%s: tokenizer.ggml.tokens must be a list of 1 to "
                 "2^24 strings", k->path);
        return -1;
    }
    k->tok = tokens->str;
    k->n = tokens->n;
    rc = llm_gguf_get_arr(k->g, "tokenizer.ggml.token_type", LLM_GGUF_I32,
                          &types, sub);
    if (rc < 0 || (rc == 1 && types->n != k->n)) {
        llm_errf(k->err, "%s: tokenizer.ggml.token_type must be one i32 per "
                 "token", k->path);
        return -1;
    }
    k->type = rc == 1 ? types->data : NULL;
    return 0;
}


int
llm_gguf_tokenizer(const llm_gguf *g, const char *path, llm_tokenizer **out,
    llm_gguf_vocab *v, char *err)
{
    llm_gguf_tk  k = { g, path, err, NULL, 0, NULL, NULL, 0 };
    char        *json = NULL, *cfg = NULL, sub[LLM_ERR_LEN], name[300];
    size_t       len = 0, clen = 0;
    FILE        *f, *cf;
    int          rc, add_bos = 1;

    *out = NULL;
    memset(v, 0, sizeof(*v));
    v->bos_id = -1;
    err[0] = '\0';
    if (llm_gguf_tk_read(&k) != 0) {
        return -1;
    }
    f = open_memstream(&json, &len);
    cf = open_memstream(&cfg, &clen);
    if (f == NULL || cf == NULL) {
        if (f) {
            fclose(f);
        }
        if (cf) {
            fclose(cf);
        }
        free(json);
        free(cfg);
        llm_errf(err, "%s: out of memory", path);
        return -1;
    }
    fputs("{\"added_tokens\":", f);
    llm_gguf_write_added(&k, f);
    fputc(',', f);
    rc = k.spm ? llm_gguf_write_spm(&k, f)
               : llm_gguf_write_gpt2(&k, f, &add_bos);
    fputs("}", f);
    if (rc == 0) {
        rc = llm_gguf_write_config(&k, cf, add_bos, v);
    }
    fclose(f);
    fclose(cf);
    if (rc == 0) {
        rc = llm_gguf_eog(&k, v);
    }
    if (rc == 0) {
        snprintf(name, sizeof(name), "%.256s (tokenizer.ggml.*)", path);
        *out = llm_tokenizer_from_json(name, json, len, name, cfg, clen,
                                       err);
        rc = *out ? 0 : -1;
    }
    free(json);
    free(cfg);
    if (rc == 0 && llm_gguf_get_str(g, "tokenizer.chat_template",
                                    &v->chat_template, sub) < 0)
    {
        llm_errf(err, "%s: %s", path, sub);
        rc = -1;
    }
    if (rc != 0) {
        free(v->eog_ids);
        v->eog_ids = NULL;
    }
    return rc;
}
