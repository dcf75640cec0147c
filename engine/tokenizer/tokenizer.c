/*
 * tokenizer.c -- loads a Hugging Face tokenizer.json (+ tokenizer_config.json)
 * into an llm_tokenizer, and the small read-only accessors.
 *
 * The JSON is parsed once with yajl's tree parser (~0.2 s for Qwen3's 11 MB
 * file); the vocabulary and merges are copied into one string arena and two
 * open-addressing hash tables, then the tree is freed.  Each component
 * (normalizer, pre-tokenizer, model, post-processor, decoder) is parsed by
 * the file that runs it; an unsupported component is a load error naming it,
 * never a silent difference from Hugging Face.
 */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tokenizer_impl.h"
#include "util/util.h"


const char *
llm_tok_json_str(yajl_val obj, const char *key)
{
    yajl_val  v = llm_json_get(obj, key);

    return YAJL_IS_STRING(v) ? v->u.string : NULL;
}


int
llm_tok_json_bool(yajl_val obj, const char *key, int dflt)
{
    yajl_val  v = llm_json_get(obj, key);

    if (YAJL_IS_TRUE(v)) {
        return 1;
    }
    if (YAJL_IS_FALSE(v)) {
        return 0;
    }
    return dflt;
}


/* Parses text (NULL: none); with src, the vocabulary and merges are
 * streamed into it (see tokenizer_json.c). */
static yajl_val
llm_tok_parse_json(const char *name, const char *text, size_t len,
    llm_tok_bpe_src *src, char *err)
{
    char      msg[256];
    yajl_val  root;

    if (text == NULL) {
        return NULL;
    }
    msg[0] = '\0';
    root = llm_tok_json_parse(text, len, src, msg, sizeof(msg));
    if (root == NULL) {
        llm_errf(err, "%s: %s", name, msg);
    }
    return root;
}


/* Makes room for ids up to n - 1 in the per-id tables. */
static void
llm_tok_grow_ids(llm_tokenizer *t, int32_t n)
{
    int32_t  i;

    if (n <= t->n_ids) {
        return;
    }
    t->str_off = llm_xrealloc(t->str_off, (size_t) n * sizeof(uint32_t));
    t->str_len = llm_xrealloc(t->str_len, (size_t) n * sizeof(uint32_t));
    t->added_of = llm_xrealloc(t->added_of, (size_t) n * sizeof(int32_t));
    for (i = t->n_ids; i < n; i++) {
        t->str_off[i] = UINT32_MAX;
        t->str_len[i] = UINT32_MAX;
        t->added_of[i] = -1;
    }
    t->n_ids = n;
}


/*
 * added_tokens, the way HF's AddedVocabulary::add_tokens numbers them: a
 * content already known (vocabulary or an earlier added token) keeps that
 * id; a new one gets the next id after the vocabulary (or after the highest
 * added id).  The "id" field is only a hint, as in HF.
 */
static int
llm_tok_load_added(llm_tokenizer *t, yajl_val arr, int32_t vocab_size,
    char *err)
{
    size_t          i;
    int32_t         id, next_id, max_added = -1;
    yajl_val        o;
    const char     *content;
    llm_tok_added  *a;
    uint32_t        off, len;
    int32_t         idx;

    if (arr == NULL || YAJL_IS_NULL(arr)) {
        return 0;
    }
    if (!YAJL_IS_ARRAY(arr)) {
        llm_errf(err, "tokenizer.json: \"added_tokens\" is not an array");
        return -1;
    }
    t->added = llm_xcalloc(arr->u.array.len + 1, sizeof(*t->added));
    llm_tok_map_init(&t->added_map, arr->u.array.len + 1);
    for (i = 0; i < arr->u.array.len; i++) {
        o = arr->u.array.values[i];
        content = llm_tok_json_str(o, "content");
        if (content == NULL) {
            llm_errf(err, "tokenizer.json: added_tokens[%zu] has no content",
                     i);
            return -1;
        }
        len = (uint32_t) strlen(content);
        if (len == 0) {
            continue;           /* HF ignores empty added tokens */
        }
        idx = llm_tok_map_get(&t->added_map, t->arena.p, content, len);
        if (idx >= 0) {
            id = t->added[idx].id;
        } else {
            id = llm_tok_map_get(&t->vocab, t->arena.p, content, len);
        }
        if (id < 0) {
            if (max_added < 0) {
                next_id = vocab_size;
            } else {
                next_id = (max_added >= vocab_size || vocab_size == 0)
                          ? max_added + 1 : vocab_size;
            }
            id = next_id;
        }
        if (id >= (1 << 24)) {
            llm_errf(err, "tokenizer.json: added token id %d is too large", id);
            return -1;
        }
        if (id > max_added) {
            max_added = id;
        }
        off = (uint32_t) t->arena.len;
        llm_tok_buf_put(&t->arena, content, len + 1);

        if (idx < 0) {
            idx = (int32_t) t->n_added++;
        }
        a = &t->added[idx];
        a->id = id;
        a->off = a->norm_off = off;
        a->len = a->norm_len = len;
        a->special = (uint8_t) llm_tok_json_bool(o, "special", 0);
        a->lstrip = (uint8_t) llm_tok_json_bool(o, "lstrip", 0);
        a->rstrip = (uint8_t) llm_tok_json_bool(o, "rstrip", 0);
        a->single_word = (uint8_t) llm_tok_json_bool(o, "single_word", 0);
        a->normalized = (uint8_t) llm_tok_json_bool(o, "normalized",
                                                    !a->special);
        llm_tok_map_put(&t->added_map, t->arena.p, off, len, idx);
        llm_tok_grow_ids(t, id + 1);
        t->added_of[id] = idx;
    }
    return 0;
}


/* The ids of a special token named in a post-processor. */
static int
llm_tok_special_ids(llm_tokenizer *t, yajl_val specials, const char *name,
    llm_tok_piece_tpl *p, char *err)
{
    yajl_val  s, ids;
    size_t    i;

    s = llm_json_get(specials, name);
    ids = llm_json_get(s, "ids");
    if (!YAJL_IS_ARRAY(ids)) {
        llm_errf(err, "tokenizer.json: post_processor: special token \"%s\" "
                 "is not in special_tokens", name);
        return -1;
    }
    p->ids = llm_xcalloc(ids->u.array.len + 1, sizeof(int32_t));
    for (i = 0; i < ids->u.array.len; i++) {
        if (!YAJL_IS_INTEGER(ids->u.array.values[i])) {
            llm_errf(err, "tokenizer.json: post_processor: bad id for \"%s\"",
                     name);
            return -1;
        }
        p->ids[p->n_ids++] = (int32_t) YAJL_GET_INTEGER(ids->u.array.values[i]);
    }
    return 0;
}


static llm_tok_template *
llm_tok_add_template(llm_tokenizer *t, size_t n_items)
{
    llm_tok_template  *tp;

    t->post = llm_xrealloc(t->post, (t->n_post + 1) * sizeof(*t->post));
    tp = &t->post[t->n_post++];
    tp->items = llm_xcalloc(n_items + 1, sizeof(*tp->items));
    tp->n = n_items;
    return tp;
}


/* [cls] $A [sep] of BertProcessing / RobertaProcessing: "cls": [str, id]. */
static int
llm_tok_tpl_pair(llm_tok_piece_tpl *p, yajl_val pair, const char *what,
    char *err)
{
    if (!YAJL_IS_ARRAY(pair) || pair->u.array.len != 2
        || !YAJL_IS_INTEGER(pair->u.array.values[1]))
    {
        llm_errf(err, "tokenizer.json: post_processor: bad \"%s\"", what);
        return -1;
    }
    p->ids = llm_xcalloc(1, sizeof(int32_t));
    p->ids[0] = (int32_t) YAJL_GET_INTEGER(pair->u.array.values[1]);
    p->n_ids = 1;
    return 0;
}


static int
llm_tok_load_post(llm_tokenizer *t, yajl_val v, char *err)
{
    const char        *type, *name, *colon;
    yajl_val           single, specials, item, inner, list;
    llm_tok_template  *tp;
    size_t             i;
    char               buf[256];

    if (v == NULL || YAJL_IS_NULL(v)) {
        return 0;
    }
    type = llm_tok_json_str(v, "type");
    if (type == NULL) {
        llm_errf(err, "tokenizer.json: post_processor has no type");
        return -1;
    }
    if (strcmp(type, "ByteLevel") == 0) {
        return 0;               /* offsets only; ids are unchanged */
    }
    if (strcmp(type, "Sequence") == 0) {
        list = llm_json_get(v, "processors");
        if (!YAJL_IS_ARRAY(list)) {
            llm_errf(err, "tokenizer.json: post_processor Sequence has no "
                     "processors");
            return -1;
        }
        for (i = 0; i < list->u.array.len; i++) {
            if (llm_tok_load_post(t, list->u.array.values[i], err) != 0) {
                return -1;
            }
        }
        return 0;
    }
    if (strcmp(type, "BertProcessing") == 0
        || strcmp(type, "RobertaProcessing") == 0)
    {
        tp = llm_tok_add_template(t, 3);
        tp->items[1].is_seq = 1;
        if (llm_tok_tpl_pair(&tp->items[0], llm_json_get(v, "cls"), "cls",
                             err) != 0
            || llm_tok_tpl_pair(&tp->items[2], llm_json_get(v, "sep"),
                                "sep", err) != 0)
        {
            return -1;
        }
        return 0;
    }
    if (strcmp(type, "TemplateProcessing") != 0) {
        llm_errf(err, "tokenizer.json: post_processor type \"%s\" is not "
                 "supported", type);
        return -1;
    }
    single = llm_json_get(v, "single");
    specials = llm_json_get(v, "special_tokens");
    if (!YAJL_IS_ARRAY(single)) {
        llm_errf(err, "tokenizer.json: TemplateProcessing has no \"single\"");
        return -1;
    }
    tp = llm_tok_add_template(t, single->u.array.len);
    for (i = 0; i < single->u.array.len; i++) {
        item = single->u.array.values[i];
        if (YAJL_IS_STRING(item)) {
            /* the short form: "$A", "$0", "[CLS]" or "[CLS]:1" */
            name = item->u.string;
            if (name[0] == '$') {
                tp->items[i].is_seq = 1;
                continue;
            }
            colon = strrchr(name, ':');
            snprintf(buf, sizeof(buf), "%.*s",
                     (int) (colon ? (size_t) (colon - name) : strlen(name)),
                     name);
            if (llm_tok_special_ids(t, specials, buf, &tp->items[i], err)) {
                return -1;
            }
            continue;
        }
        if ((inner = llm_json_get(item, "Sequence")) != NULL) {
            tp->items[i].is_seq = 1;
            continue;
        }
        inner = llm_json_get(item, "SpecialToken");
        name = llm_tok_json_str(inner, "id");
        if (name == NULL) {
            llm_errf(err, "tokenizer.json: TemplateProcessing: bad item %zu",
                     i);
            return -1;
        }
        if (llm_tok_special_ids(t, specials, name, &tp->items[i], err) != 0) {
            return -1;
        }
    }
    return 0;
}


/* bos_token / eos_token of tokenizer_config.json: a string or an AddedToken
 * object; "" when absent or null. */
static char *
llm_tok_config_token(yajl_val cfg, const char *key)
{
    yajl_val     v = llm_json_get(cfg, key);
    const char  *s = NULL;

    if (YAJL_IS_STRING(v)) {
        s = v->u.string;
    } else if (YAJL_IS_OBJECT(v)) {
        s = llm_tok_json_str(v, "content");
    }
    return llm_xstrdup(s ? s : "");
}


/*
 * transformers' LlamaTokenizerFast (and CodeLlama's, Gemma's) replace the
 * post-processor of tokenizer.json with one built from add_bos_token /
 * add_eos_token (defaults true / false) in tokenizer_config.json.  vLLM
 * tokenizes through transformers, so we do the same for those classes.
 */
static void
llm_tok_llama_override(llm_tokenizer *t, yajl_val cfg)
{
    static const char  *classes[] = {
        "LlamaTokenizer", "LlamaTokenizerFast", "CodeLlamaTokenizer",
        "CodeLlamaTokenizerFast", "GemmaTokenizer", "GemmaTokenizerFast", NULL
    };
    const char         *cls = llm_tok_json_str(cfg, "tokenizer_class");
    int                 add_bos, add_eos, i, n;
    int32_t             bos, eos;
    llm_tok_template   *tp;

    if (cls == NULL) {
        return;
    }
    for (i = 0; classes[i]; i++) {
        if (strcmp(cls, classes[i]) == 0) {
            break;
        }
    }
    if (classes[i] == NULL) {
        return;
    }
    add_bos = llm_tok_json_bool(cfg, "add_bos_token", 1);
    add_eos = llm_tok_json_bool(cfg, "add_eos_token", 0);
    bos = llm_tokenizer_token_id(t, t->bos_str);
    eos = llm_tokenizer_token_id(t, t->eos_str);
    if ((add_bos && bos < 0) || (add_eos && eos < 0)) {
        return;                 /* transformers would refuse; keep the file's */
    }
    for (i = 0; i < (int) t->n_post; i++) {
        for (n = 0; n < (int) t->post[i].n; n++) {
            free(t->post[i].items[n].ids);
        }
        free(t->post[i].items);
    }
    t->n_post = 0;
    tp = llm_tok_add_template(t, (size_t) (1 + add_bos + add_eos));
    n = 0;
    if (add_bos) {
        tp->items[n].ids = llm_xcalloc(1, sizeof(int32_t));
        tp->items[n].ids[0] = bos;
        tp->items[n++].n_ids = 1;
    }
    tp->items[n++].is_seq = 1;
    if (add_eos) {
        tp->items[n].ids = llm_xcalloc(1, sizeof(int32_t));
        tp->items[n].ids[0] = eos;
        tp->items[n].n_ids = 1;
    }
}


/* The normalized form of added tokens with normalized: true, used both to
 * match them in normalized text and to decode them (HF normalized_cache). */
static int
llm_tok_normalize_added(llm_tokenizer *t, char *err)
{
    llm_tok_ctx     c;
    llm_tok_buf     out = { 0 };
    llm_tok_added  *a;
    size_t          i;
    int             rc = 0;

    if (t->normalizer == NULL) {
        return 0;
    }
    llm_tok_ctx_init(&c, t, err);
    for (i = 0; i < t->n_added && rc == 0; i++) {
        a = &t->added[i];
        if (!a->normalized) {
            continue;
        }
        rc = llm_tok_norm_apply(t->normalizer, t->arena.p + a->off, a->len,
                                &c, &out);
        if (rc == 0 && (out.len != a->len
                        || memcmp(out.p, t->arena.p + a->off, a->len) != 0))
        {
            a->norm_off = (uint32_t) t->arena.len;
            a->norm_len = (uint32_t) out.len;
            llm_tok_buf_put(&t->arena, out.p, out.len);
            llm_tok_buf_putc(&t->arena, '\0');
        }
    }
    llm_tok_buf_free(&out);
    llm_tok_ctx_free(&c);
    return rc;
}


llm_tokenizer *
llm_tokenizer_load(const char *dir, char *err)
{
    char            path[PATH_MAX], cpath[PATH_MAX];
    char           *text, *ctext = NULL;
    size_t          len, clen = 0;
    llm_tokenizer  *t;

    llm_path_join(path, dir, "tokenizer.json");
    llm_path_join(cpath, dir, "tokenizer_config.json");
    if (llm_file_exists(cpath)) {
        ctext = llm_read_file(cpath, &clen, err);
        if (ctext == NULL) {
            return NULL;
        }
    }
    text = llm_read_file(path, &len, err);
    if (text == NULL) {
        free(ctext);
        return NULL;
    }
    t = llm_tokenizer_from_json(path, text, len, cpath, ctext, clen, err);
    free(text);
    free(ctext);
    return t;
}


llm_tokenizer *
llm_tokenizer_from_json(const char *name, const char *json, size_t len,
    const char *cname, const char *cfg_json, size_t cfg_len, char *err)
{
    char            sub[LLM_ERR_LEN];
    yajl_val        root = NULL, cfg = NULL, model;
    llm_tokenizer  *t;
    const char     *type;
    int32_t         vocab_size;
    int             rc;
    llm_tok_bpe_src  src;

    memset(&src, 0, sizeof(src));
    sub[0] = '\0';
    cfg = llm_tok_parse_json(cname, cfg_json, cfg_len, NULL, sub);
    if (cfg == NULL && sub[0]) {
        llm_errf(err, "%s", sub);
        return NULL;
    }
    t = llm_xcalloc(1, sizeof(*t));
    t->unk_id = -1;
    src.arena = &t->arena;
    root = llm_tok_parse_json(name, json, len, &src, err);
    if (root == NULL) {
        llm_tok_bpe_src_free(&src);
        llm_tokenizer_free(t);
        if (cfg) {
            yajl_tree_free(cfg);
        }
        return NULL;
    }

    model = llm_json_get(root, "model");
    type = llm_tok_json_str(model, "type");
    if (model == NULL) {
        llm_errf(sub, "no \"model\" object");
        goto failed;
    }
    if (type != NULL && strcmp(type, "BPE") != 0) {
        llm_errf(sub, "model type \"%s\" is not supported (only BPE: "
                 "byte-level or SentencePiece-style)", type);
        goto failed;
    }
    rc = llm_tok_bpe_load(t, model, &src, sub);
    llm_tok_bpe_src_free(&src);
    if (rc != 0) {
        goto failed;
    }
    vocab_size = (int32_t) t->vocab.count;
    if (llm_tok_load_added(t, llm_json_get(root, "added_tokens"),
                           vocab_size, sub) != 0
        || llm_tok_norm_parse(&t->normalizer,
                              llm_json_get(root, "normalizer"), sub) != 0
        || llm_tok_pretok_parse(&t->pretok,
                                llm_json_get(root, "pre_tokenizer"),
                                sub) != 0
        || llm_tok_dec_parse(&t->decoder, llm_json_get(root, "decoder"),
                             sub) != 0
        || llm_tok_load_post(t, llm_json_get(root, "post_processor"),
                             sub) != 0
        || llm_tok_normalize_added(t, sub) != 0
        || llm_tok_added_build(t, sub) != 0)
    {
        goto failed;
    }

    t->bos_str = llm_tok_config_token(cfg, "bos_token");
    t->eos_str = llm_tok_config_token(cfg, "eos_token");
    if (cfg) {
        llm_tok_llama_override(t, cfg);
        yajl_tree_free(cfg);
    }
    yajl_tree_free(root);
    return t;

failed:
    llm_tok_bpe_src_free(&src);
    /* messages from the parts name the problem; prefix the file */
    if (strncmp(sub, "tokenizer.json: ", 16) == 0) {
        llm_errf(err, "%s: %s", name, sub + 16);
    } else {
        llm_errf(err, "%s: %s", name, sub);
    }
    if (cfg) {
        yajl_tree_free(cfg);
    }
    yajl_tree_free(root);
    llm_tokenizer_free(t);
    return NULL;
}


void
llm_tokenizer_free(llm_tokenizer *t)
{
    size_t  i, n;

    if (t == NULL) {
        return;
    }
    llm_tok_bpe_free(t);
    llm_tok_map_free(&t->added_map);
    free(t->added);
    llm_tok_trie_free(&t->trie_raw);
    llm_tok_trie_free(&t->trie_norm);
    llm_tok_norm_free(t->normalizer);
    llm_tok_pretok_free(t->pretok);
    llm_tok_dec_free(t->decoder);
    for (i = 0; i < t->n_post; i++) {
        for (n = 0; n < t->post[i].n; n++) {
            free(t->post[i].items[n].ids);
        }
        free(t->post[i].items);
    }
    free(t->post);
    free(t->str_off);
    free(t->str_len);
    free(t->added_of);
    free(t->bos_str);
    free(t->eos_str);
    llm_tok_buf_free(&t->arena);
    free(t);
}


int
llm_tokenizer_vocab_size(const llm_tokenizer *t)
{
    return t->n_ids;
}


const char *
llm_tokenizer_token_str(const llm_tokenizer *t, int32_t id)
{
    if (id < 0 || id >= t->n_ids) {
        return NULL;
    }
    if (t->added_of[id] >= 0) {
        return t->arena.p + t->added[t->added_of[id]].off;
    }
    if (t->str_off[id] == UINT32_MAX) {
        return NULL;
    }
    return t->arena.p + t->str_off[id];
}


const char *
llm_tok_decode_str(const llm_tokenizer *t, int32_t id, size_t *len)
{
    const llm_tok_added  *a;

    if (id < 0 || id >= t->n_ids) {
        return NULL;
    }
    if (t->added_of[id] >= 0) {
        a = &t->added[t->added_of[id]];
        *len = a->norm_len;
        return t->arena.p + a->norm_off;
    }
    if (t->str_off[id] == UINT32_MAX) {
        return NULL;
    }
    *len = t->str_len[id];
    return t->arena.p + t->str_off[id];
}


int32_t
llm_tokenizer_token_id(const llm_tokenizer *t, const char *str)
{
    int32_t  idx;
    size_t   len;

    if (str == NULL) {
        return -1;
    }
    len = strlen(str);
    idx = llm_tok_map_get(&t->added_map, t->arena.p, str, len);
    if (idx >= 0) {
        return t->added[idx].id;
    }
    return llm_tok_map_get(&t->vocab, t->arena.p, str, len);
}


int
llm_tokenizer_is_special(const llm_tokenizer *t, int32_t id)
{
    if (id < 0 || id >= t->n_ids || t->added_of[id] < 0) {
        return 0;
    }
    return t->added[t->added_of[id]].special;
}


const char *
llm_tokenizer_bos_str(const llm_tokenizer *t)
{
    return t->bos_str;
}


const char *
llm_tokenizer_eos_str(const llm_tokenizer *t)
{
    return t->eos_str;
}
