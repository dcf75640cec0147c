/*
 * tokenizer_json.c -- parses tokenizer.json with yajl's event parser.
 *
 * The big parts, model.vocab (up to 150k entries) and model.merges (up to
 * 280k pairs), go straight into flat arrays (llm_tok_bpe_src): no tree
 * node per entry, so Qwen3's 11 MB file loads in about half the time a
 * yajl_tree_parse takes.  Everything else becomes an ordinary yajl tree
 * (struct yajl_val_s, freed with yajl_tree_free), whose containers grow by
 * doubling: yajl_tree_parse grows them one element per realloc, which
 * under AddressSanitizer (every realloc copies) costs minutes.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <yajl/yajl_parse.h>

#include "tokenizer_impl.h"
#include "util/util.h"


/* What a container is, seen from the root. */
enum {
    LLM_JS_PLAIN,
    LLM_JS_MODEL,       /* root.model */
    LLM_JS_VOCAB,       /* root.model.vocab: streamed */
    LLM_JS_MERGES,      /* root.model.merges: streamed */
    LLM_JS_PAIR         /* one ["a", "b"] merge */
};

typedef struct {
    yajl_val  v;        /* NULL for streamed containers */
    size_t    cap;
    int       kind;
} llm_json_frame;

typedef struct {
    yajl_val          root;
    llm_json_frame   *stack;
    size_t            depth, stack_cap;
    char             *key;          /* pending object key (tree) */
    llm_tok_bpe_src  *src;          /* NULL: no streaming */
    uint32_t          vkey_off, vkey_len;   /* pending vocab key */
    int               vkey_set;
    size_t            pair_n;       /* strings seen in the current pair */
    char              msg[160];     /* our own reason to stop */
} llm_json_ctx;


static yajl_val
llm_json_node(yajl_type type)
{
    yajl_val  v = llm_xcalloc(1, sizeof(*v));

    v->type = type;
    return v;
}


/* Attaches v to the open container (or makes it the root). */
static int
llm_json_add(llm_json_ctx *c, yajl_val v)
{
    llm_json_frame  *f;
    yajl_val         p;

    if (c->depth == 0) {
        c->root = v;
        return 1;
    }
    f = &c->stack[c->depth - 1];
    p = f->v;
    if (YAJL_IS_ARRAY(p)) {
        if (p->u.array.len == f->cap) {
            f->cap = f->cap ? f->cap * 2 : 8;
            p->u.array.values = llm_xrealloc(p->u.array.values,
                                             f->cap * sizeof(yajl_val));
        }
        p->u.array.values[p->u.array.len++] = v;
        return 1;
    }
    if (c->key == NULL) {
        yajl_tree_free(v);
        return 0;
    }
    if (p->u.object.len == f->cap) {
        f->cap = f->cap ? f->cap * 2 : 8;
        p->u.object.keys = llm_xrealloc(p->u.object.keys,
                                        f->cap * sizeof(char *));
        p->u.object.values = llm_xrealloc(p->u.object.values,
                                          f->cap * sizeof(yajl_val));
    }
    p->u.object.keys[p->u.object.len] = c->key;
    p->u.object.values[p->u.object.len++] = v;
    c->key = NULL;
    return 1;
}


static llm_json_frame *
llm_json_top(llm_json_ctx *c)
{
    return c->depth ? &c->stack[c->depth - 1] : NULL;
}


static void
llm_json_frame_push(llm_json_ctx *c, yajl_val v, int kind)
{
    if (c->depth == c->stack_cap) {
        c->stack_cap = c->stack_cap ? c->stack_cap * 2 : 16;
        c->stack = llm_xrealloc(c->stack, c->stack_cap * sizeof(*c->stack));
    }
    c->stack[c->depth].v = v;
    c->stack[c->depth].cap = 0;
    c->stack[c->depth].kind = kind;
    c->depth++;
}


/* A container opens: streamed (vocab, merges, a merge pair) or a node. */
static int
llm_json_push(llm_json_ctx *c, yajl_type type)
{
    llm_json_frame  *f = llm_json_top(c);
    int              kind = LLM_JS_PLAIN;
    yajl_val         v;

    if (f && f->kind == LLM_JS_VOCAB) {
        snprintf(c->msg, sizeof(c->msg), "model.vocab: a token has no "
                 "integer id");
        return 0;
    }
    if (f && (f->kind == LLM_JS_MERGES || f->kind == LLM_JS_PAIR)) {
        if (f->kind == LLM_JS_PAIR || type != yajl_t_array) {
            snprintf(c->msg, sizeof(c->msg), "model.merges[%zu] is not a "
                     "pair of tokens", c->src->n_merges);
            return 0;
        }
        c->pair_n = 0;
        llm_json_frame_push(c, NULL, LLM_JS_PAIR);
        return 1;
    }
    if (c->src && c->depth == 1 && type == yajl_t_object && c->key
        && strcmp(c->key, "model") == 0)
    {
        kind = LLM_JS_MODEL;
    } else if (c->src && f && f->kind == LLM_JS_MODEL && c->key) {
        if (type == yajl_t_object && strcmp(c->key, "vocab") == 0) {
            kind = LLM_JS_VOCAB;
        } else if (type == yajl_t_array && strcmp(c->key, "merges") == 0) {
            kind = LLM_JS_MERGES;
        }
    }
    if (kind == LLM_JS_VOCAB || kind == LLM_JS_MERGES) {
        if (kind == LLM_JS_VOCAB) {
            c->src->have_vocab = 1;
        } else {
            c->src->have_merges = 1;
        }
        free(c->key);
        c->key = NULL;
        llm_json_frame_push(c, NULL, kind);
        return 1;
    }
    v = llm_json_node(type);
    if (!llm_json_add(c, v)) {
        return 0;
    }
    llm_json_frame_push(c, v, kind);
    return 1;
}


static int
llm_json_streamed(llm_json_ctx *c)
{
    llm_json_frame  *f = llm_json_top(c);

    return f && f->v == NULL;
}


static int
llm_json_bad_value(llm_json_ctx *c)
{
    llm_json_frame  *f = llm_json_top(c);

    if (f->kind == LLM_JS_VOCAB) {
        snprintf(c->msg, sizeof(c->msg), "model.vocab: a token has no "
                 "integer id");
    } else {
        snprintf(c->msg, sizeof(c->msg), "model.merges[%zu] is not a pair "
                 "of tokens", c->src->n_merges);
    }
    return 0;
}


static int
llm_json_null(void *ctx)
{
    llm_json_ctx  *c = ctx;

    if (llm_json_streamed(c)) {
        return llm_json_bad_value(c);
    }
    return llm_json_add(c, llm_json_node(yajl_t_null));
}


static int
llm_json_bool(void *ctx, int b)
{
    llm_json_ctx  *c = ctx;

    if (llm_json_streamed(c)) {
        return llm_json_bad_value(c);
    }
    return llm_json_add(c, llm_json_node(b ? yajl_t_true : yajl_t_false));
}


static void
llm_json_vocab_entry(llm_json_ctx *c, int64_t id)
{
    llm_tok_bpe_src  *s = c->src;

    if (s->n_vocab == s->vocab_cap) {
        s->vocab_cap = s->vocab_cap ? s->vocab_cap * 2 : 1024;
        s->vocab = llm_xrealloc(s->vocab, s->vocab_cap * sizeof(*s->vocab));
    }
    s->vocab[s->n_vocab].off = c->vkey_off;
    s->vocab[s->n_vocab].len = c->vkey_len;
    s->vocab[s->n_vocab].id = (int32_t) id;
    s->n_vocab++;
    c->vkey_set = 0;
}


static int
llm_json_number(void *ctx, const char *s, size_t len)
{
    llm_json_ctx  *c = ctx;
    yajl_val       v;
    char          *end, buf[32];
    long long      id;

    if (llm_json_streamed(c)) {
        if (llm_json_top(c)->kind != LLM_JS_VOCAB || len >= sizeof(buf)) {
            return llm_json_bad_value(c);
        }
        memcpy(buf, s, len);
        buf[len] = '\0';
        id = strtoll(buf, &end, 10);
        if (*end != '\0' || id < 0 || id >= (1 << 24) || !c->vkey_set) {
            snprintf(c->msg, sizeof(c->msg), "model.vocab: \"%.40s\" has no "
                     "valid id", c->src->arena->p + c->vkey_off);
            return 0;
        }
        llm_json_vocab_entry(c, id);
        return 1;
    }
    v = llm_json_node(yajl_t_number);
    v->u.number.r = llm_xmalloc(len + 1);
    memcpy(v->u.number.r, s, len);
    v->u.number.r[len] = '\0';
    v->u.number.i = strtoll(v->u.number.r, &end, 10);
    if (*end == '\0') {
        v->u.number.flags |= YAJL_NUMBER_INT_VALID;
    }
    v->u.number.d = strtod(v->u.number.r, &end);
    if (*end == '\0') {
        v->u.number.flags |= YAJL_NUMBER_DOUBLE_VALID;
    }
    return llm_json_add(c, v);
}


/* One half of a merge, or a whole "a b" merge. */
static int
llm_json_merge_string(llm_json_ctx *c, const char *s, size_t len)
{
    llm_tok_bpe_src  *src = c->src;
    llm_json_frame   *f = llm_json_top(c);
    const char       *sp = NULL;
    uint32_t         *m;

    if (f->kind == LLM_JS_MERGES) {
        /* "a b": exactly one space, as HF requires */
        sp = memchr(s, ' ', len);
        if (sp == NULL || memchr(sp + 1, ' ', len - (size_t) (sp - s) - 1)) {
            return llm_json_bad_value(c);
        }
    }
    if (f->kind == LLM_JS_PAIR && c->pair_n >= 2) {
        return llm_json_bad_value(c);
    }
    if (f->kind == LLM_JS_MERGES || c->pair_n == 0) {
        if (src->n_merges == src->merge_cap) {
            src->merge_cap = src->merge_cap ? src->merge_cap * 2 : 1024;
            src->merges = llm_xrealloc(src->merges,
                                       src->merge_cap * 4 * sizeof(uint32_t));
        }
        src->n_merges++;
    }
    m = &src->merges[(src->n_merges - 1) * 4];
    if (f->kind == LLM_JS_MERGES) {
        m[0] = (uint32_t) src->mbuf.len;
        m[1] = (uint32_t) (sp - s);
        m[2] = m[0] + m[1] + 1;
        m[3] = (uint32_t) (len - m[1] - 1);
        llm_tok_buf_put(&src->mbuf, s, len);
        return 1;
    }
    m[c->pair_n * 2] = (uint32_t) src->mbuf.len;
    m[c->pair_n * 2 + 1] = (uint32_t) len;
    llm_tok_buf_put(&src->mbuf, s, len);
    c->pair_n++;
    return 1;
}


static int
llm_json_string(void *ctx, const unsigned char *s, size_t len)
{
    llm_json_ctx  *c = ctx;
    yajl_val       v;

    if (llm_json_streamed(c)) {
        if (llm_json_top(c)->kind == LLM_JS_VOCAB) {
            return llm_json_bad_value(c);
        }
        return llm_json_merge_string(c, (const char *) s, len);
    }
    v = llm_json_node(yajl_t_string);
    v->u.string = llm_xmalloc(len + 1);
    memcpy(v->u.string, s, len);
    v->u.string[len] = '\0';
    return llm_json_add(c, v);
}


static int
llm_json_start_map(void *ctx)
{
    return llm_json_push(ctx, yajl_t_object);
}


static int
llm_json_key(void *ctx, const unsigned char *s, size_t len)
{
    llm_json_ctx  *c = ctx;

    if (llm_json_streamed(c)) {
        /* a vocabulary entry: the key goes to the tokenizer's arena */
        if (c->vkey_set) {
            return llm_json_bad_value(c);
        }
        c->vkey_off = (uint32_t) c->src->arena->len;
        c->vkey_len = (uint32_t) len;
        llm_tok_buf_put(c->src->arena, s, len);
        llm_tok_buf_putc(c->src->arena, '\0');
        c->vkey_set = 1;
        return 1;
    }
    free(c->key);
    c->key = llm_xmalloc(len + 1);
    memcpy(c->key, s, len);
    c->key[len] = '\0';
    return 1;
}


static int
llm_json_end(void *ctx)
{
    llm_json_ctx    *c = ctx;
    llm_json_frame  *f = llm_json_top(c);

    if (f->kind == LLM_JS_PAIR && c->pair_n != 2) {
        snprintf(c->msg, sizeof(c->msg), "model.merges[%zu] is not a pair "
                 "of tokens", c->src->n_merges ? c->src->n_merges - 1 : 0);
        return 0;
    }
    c->depth--;
    return 1;
}


static int
llm_json_start_array(void *ctx)
{
    return llm_json_push(ctx, yajl_t_array);
}


static const yajl_callbacks  llm_json_callbacks = {
    llm_json_null, llm_json_bool, NULL, NULL, llm_json_number,
    llm_json_string, llm_json_start_map, llm_json_key, llm_json_end,
    llm_json_start_array, llm_json_end
};


yajl_val
llm_tok_json_parse(const char *text, size_t len, llm_tok_bpe_src *src,
    char *msg, size_t msg_len)
{
    llm_json_ctx    c;
    yajl_handle     h;
    yajl_status     st;
    unsigned char  *e;

    memset(&c, 0, sizeof(c));
    c.src = src;
    h = yajl_alloc(&llm_json_callbacks, NULL, &c);
    st = yajl_parse(h, (const unsigned char *) text, len);
    if (st == yajl_status_ok) {
        st = yajl_complete_parse(h);
    }
    if (st != yajl_status_ok || c.root == NULL) {
        if (c.msg[0]) {
            snprintf(msg, msg_len, "%s", c.msg);
        } else {
            e = yajl_get_error(h, 0, (const unsigned char *) text, len);
            snprintf(msg, msg_len, "invalid JSON: %s",
                     e ? (char *) e : "parse error");
            msg[strcspn(msg, "\n")] = '\0';
            if (e) {
                yajl_free_error(h, e);
            }
        }
        yajl_tree_free(c.root);
        c.root = NULL;
    }
    yajl_free(h);
    free(c.stack);
    free(c.key);
    return c.root;
}


void
llm_tok_bpe_src_free(llm_tok_bpe_src *s)
{
    free(s->vocab);
    free(s->merges);
    llm_tok_buf_free(&s->mbuf);
    memset(s, 0, sizeof(*s));
}
