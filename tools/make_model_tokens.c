/*
 * make_model_tokens.c -- what `llm make-model` needs from a tokenizer:
 * the vocabulary size, BOS, and the ids that end generation.
 *
 * tokenizer.json is 9-11 MB with 150k vocabulary entries.  It is scanned
 * with yajl's streaming parser instead of yajl_tree: the tree grows every
 * object one element per realloc, which is quadratic wherever realloc moves
 * the block (always, under AddressSanitizer: minutes for a Qwen vocab).
 * The scan keeps a stack of the keys on the path and looks at two places
 * only: model.vocab {token: id} and added_tokens [{id, content}].
 */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <yajl/yajl_parse.h>
#include <yajl/yajl_tree.h>

#include "make_model.h"
#include "util/util.h"

#define MM_DEPTH    16           /* deeper levels are counted, not recorded */
#define MM_KEY      256          /* longer keys never match a wanted token */
#define MM_WANT     12

typedef struct {
    int          depth;          /* 1 = inside the top-level object */
    char         key[MM_DEPTH + 1][MM_KEY];
    int          is_map[MM_DEPTH + 1];
    /* the added_tokens entry being read */
    long long    entry_id;
    char         entry_content[MM_KEY];
    /* results */
    long long    max_id;
    int          n_want;
    const char  *want[MM_WANT];
    long long    want_added[MM_WANT];    /* id among added_tokens, or -1 */
    long long    want_vocab[MM_WANT];    /* id in model.vocab, or -1 */
} mm_scan;


static void
mm_scan_set(char *dst, const unsigned char *s, size_t len)
{
    if (len >= MM_KEY) {
        dst[0] = '\x01';             /* matches no token we look for */
        dst[1] = '\0';
        return;
    }
    memcpy(dst, s, len);
    dst[len] = '\0';
}


static const char *
mm_scan_key(const mm_scan *s, int depth)
{
    return depth <= MM_DEPTH ? s->key[depth] : "";
}


/* In model.vocab, at an entry: depth 3 under "model" -> "vocab". */
static int
mm_in_vocab(const mm_scan *s)
{
    return s->depth == 3 && s->is_map[2] && s->is_map[3]
           && strcmp(mm_scan_key(s, 1), "model") == 0
           && strcmp(mm_scan_key(s, 2), "vocab") == 0;
}


/* Inside one object of the added_tokens array. */
static int
mm_in_added(const mm_scan *s)
{
    return s->depth == 3 && !s->is_map[2] && s->is_map[3]
           && strcmp(mm_scan_key(s, 1), "added_tokens") == 0;
}


static void
mm_scan_found(mm_scan *s, const char *token, long long id, int added)
{
    int  i;

    if (id > s->max_id) {
        s->max_id = id;
    }
    for (i = 0; i < s->n_want; i++) {
        if (strcmp(s->want[i], token) == 0) {
            if (added) {
                s->want_added[i] = id;
            } else {
                s->want_vocab[i] = id;
            }
        }
    }
}


static int
mm_cb_start(mm_scan *s, int is_map)
{
    s->depth++;
    if (s->depth <= MM_DEPTH) {
        s->is_map[s->depth] = is_map;
        s->key[s->depth][0] = '\0';
    }
    if (mm_in_added(s)) {
        s->entry_id = -1;
        s->entry_content[0] = '\0';
    }
    return 1;
}


static int
mm_cb_start_map(void *ctx)
{
    return mm_cb_start(ctx, 1);
}


static int
mm_cb_start_array(void *ctx)
{
    return mm_cb_start(ctx, 0);
}


static int
mm_cb_end_map(void *ctx)
{
    mm_scan  *s = ctx;

    if (mm_in_added(s) && s->entry_id >= 0) {
        mm_scan_found(s, s->entry_content, s->entry_id, 1);
    }
    s->depth--;
    return 1;
}


static int
mm_cb_end_array(void *ctx)
{
    ((mm_scan *) ctx)->depth--;
    return 1;
}


static int
mm_cb_map_key(void *ctx, const unsigned char *key, size_t len)
{
    mm_scan  *s = ctx;

    if (s->depth <= MM_DEPTH) {
        mm_scan_set(s->key[s->depth], key, len);
    }
    return 1;
}


static int
mm_cb_integer(void *ctx, long long v)
{
    mm_scan  *s = ctx;

    if (mm_in_vocab(s)) {
        mm_scan_found(s, s->key[3], v, 0);
    } else if (mm_in_added(s) && strcmp(s->key[3], "id") == 0) {
        s->entry_id = v;
    }
    return 1;
}


static int
mm_cb_string(void *ctx, const unsigned char *str, size_t len)
{
    mm_scan  *s = ctx;

    if (mm_in_added(s) && strcmp(s->key[3], "content") == 0) {
        mm_scan_set(s->entry_content, str, len);
    }
    return 1;
}


static int
mm_cb_scalar(void *ctx)
{
    return 1;
}


static int
mm_cb_boolean(void *ctx, int v)
{
    return 1;
}


static int
mm_cb_double(void *ctx, double v)
{
    return 1;
}


static const yajl_callbacks mm_scan_callbacks = {
    mm_cb_scalar,                /* null */
    mm_cb_boolean,
    mm_cb_integer,
    mm_cb_double,
    NULL,                        /* number: integers and doubles above */
    mm_cb_string,
    mm_cb_start_map,
    mm_cb_map_key,
    mm_cb_end_map,
    mm_cb_start_array,
    mm_cb_end_array
};


/* Scans tokenizer.json for the max id and the ids of s->want[]. */
static int
mm_scan_tokenizer(const char *path, mm_scan *s, char *err)
{
    yajl_handle     h;
    yajl_status     st;
    unsigned char  *msg;
    char           *text;
    size_t          len;

    text = llm_read_file(path, &len, err);
    if (text == NULL) {
        return -1;
    }
    h = yajl_alloc(&mm_scan_callbacks, NULL, s);
    st = yajl_parse(h, (const unsigned char *) text, len);
    if (st == yajl_status_ok) {
        st = yajl_complete_parse(h);
    }
    if (st != yajl_status_ok) {
        msg = yajl_get_error(h, 0, (const unsigned char *) text, len);
        llm_errf(err, "%s: invalid JSON: %.*s", path,
                 (int) strcspn((const char *) msg, "\n"), (const char *) msg);
        yajl_free_error(h, msg);
    }
    yajl_free(h);
    free(text);
    return st == yajl_status_ok ? 0 : -1;
}


static long long
mm_want_id(const mm_scan *s, const char *token)
{
    int  i;

    for (i = 0; token && i < s->n_want; i++) {
        if (strcmp(s->want[i], token) == 0) {
            return s->want_added[i] >= 0 ? s->want_added[i] : s->want_vocab[i];
        }
    }
    return -1;
}


static void
mm_want(mm_scan *s, const char *token)
{
    if (token && s->n_want < MM_WANT) {
        s->want[s->n_want] = token;
        s->want_added[s->n_want] = -1;
        s->want_vocab[s->n_want] = -1;
        s->n_want++;
    }
}


/* tokenizer_config's "bos_token"/"eos_token": a string or {"content": ...}. */
static const char *
mm_config_token(yajl_val cfg, const char *key)
{
    const char         *path[] = { key, NULL };
    static const char  *content[] = { "content", NULL };
    yajl_val            v = yajl_tree_get(cfg, path, yajl_t_any);

    if (v && YAJL_IS_OBJECT(v)) {
        v = yajl_tree_get(v, content, yajl_t_string);
    }
    return v && YAJL_IS_STRING(v) ? YAJL_GET_STRING(v) : NULL;
}


static void
mm_eos_add(llm_mm_tokens *t, long long id)
{
    int  i, j;

    if (id < 0 || t->n_eos_all == LLM_MM_MAX_EOS) {
        return;
    }
    for (i = 0; i < t->n_eos_all && t->eos_all[i] < id; i++) { }
    if (i < t->n_eos_all && t->eos_all[i] == id) {
        return;
    }
    for (j = t->n_eos_all; j > i; j--) {
        t->eos_all[j] = t->eos_all[j - 1];
    }
    t->eos_all[i] = (int) id;
    t->n_eos_all++;
}


int
llm_mm_read_tokens(const char *dir, int llama31, llm_mm_tokens *out,
    char *err)
{
    static const char *ends[] = { "<|end_of_text|>", "<|eom_id|>",
        "<|eot_id|>", "<|endoftext|>", "<|im_end|>", NULL };
    char       path[PATH_MAX], *text, perr[256];
    yajl_val   cfg;
    mm_scan   *s;
    int        i, rc = -1;

    text = llm_read_file(llm_path_join(path, dir, "tokenizer_config.json"),
                         NULL, err);
    if (text == NULL) {
        return -1;
    }
    perr[0] = '\0';
    cfg = yajl_tree_parse(text, perr, sizeof(perr));
    free(text);
    if (cfg == NULL) {
        llm_errf(err, "%s: invalid JSON: %.200s", path, perr);
        return -1;
    }

    s = llm_xcalloc(1, sizeof(*s));
    s->max_id = -1;
    mm_want(s, mm_config_token(cfg, "bos_token"));
    mm_want(s, mm_config_token(cfg, "eos_token"));
    for (i = 0; ends[i]; i++) {
        mm_want(s, ends[i]);
    }
    if (mm_scan_tokenizer(llm_path_join(path, dir, "tokenizer.json"), s, err)
        != 0)
    {
        goto done;
    }
    if (s->max_id < 0) {
        llm_errf(err, "%s: no model.vocab or added_tokens ids", path);
        goto done;
    }
    out->vocab = (int) s->max_id + 1;

    out->bos = (int) mm_want_id(s, mm_config_token(cfg, "bos_token"));
    if (out->bos < 0) {
        /* Qwen configs name <|endoftext|> as bos_token_id. */
        out->bos = (int) mm_want_id(s, "<|endoftext|>");
    }
    out->eos = (int) mm_want_id(s, mm_config_token(cfg, "eos_token"));
    out->n_eos_all = 0;
    mm_eos_add(out, out->eos);
    for (i = 0; ends[i]; i++) {
        mm_eos_add(out, mm_want_id(s, ends[i]));
    }
    /* Llama 3.1 also stops on <|eom_id|>, id 128008, which lenml's Llama 3
     * tokenizer file still calls <|reserved_special_token_4|>. */
    if (llama31 && mm_want_id(s, "<|eot_id|>") == 128009) {
        mm_eos_add(out, 128008);
    }
    if (out->eos < 0 && out->n_eos_all > 0) {
        out->eos = out->eos_all[0];
    }
    if (out->eos < 0) {
        llm_errf(err, "%s/tokenizer_config.json: no eos_token found in "
                 "tokenizer.json", dir);
        goto done;
    }
    rc = 0;
done:
    free(s);
    yajl_tree_free(cfg);
    return rc;
}
