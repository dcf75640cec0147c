/*
 * tokenizer_json.c -- parses tokenizer.json into a yajl tree (the public
 * struct yajl_val_s, freed with yajl_tree_free), with yajl's event parser.
 *
 * Why not yajl_tree_parse: it grows object and array storage one element
 * per realloc.  glibc usually extends such blocks in place, but not always,
 * and under AddressSanitizer every realloc copies: Llama 3's 128k-entry
 * vocabulary then costs minutes.  Here containers grow by doubling.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <yajl/yajl_parse.h>

#include "tokenizer_impl.h"
#include "util.h"


typedef struct {
    yajl_val  v;
    size_t    cap;
} llm_json_frame;

typedef struct {
    yajl_val         root;
    llm_json_frame  *stack;
    size_t           depth, stack_cap;
    char            *key;       /* pending object key */
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


static int
llm_json_push(llm_json_ctx *c, yajl_type type)
{
    yajl_val  v = llm_json_node(type);

    if (!llm_json_add(c, v)) {
        return 0;
    }
    if (c->depth == c->stack_cap) {
        c->stack_cap = c->stack_cap ? c->stack_cap * 2 : 16;
        c->stack = llm_xrealloc(c->stack, c->stack_cap * sizeof(*c->stack));
    }
    c->stack[c->depth].v = v;
    c->stack[c->depth].cap = 0;
    c->depth++;
    return 1;
}


static int
llm_json_null(void *ctx)
{
    return llm_json_add(ctx, llm_json_node(yajl_t_null));
}


static int
llm_json_bool(void *ctx, int b)
{
    return llm_json_add(ctx, llm_json_node(b ? yajl_t_true : yajl_t_false));
}


static int
llm_json_number(void *ctx, const char *s, size_t len)
{
    yajl_val  v = llm_json_node(yajl_t_number);
    char     *end;

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
    return llm_json_add(ctx, v);
}


static int
llm_json_string(void *ctx, const unsigned char *s, size_t len)
{
    yajl_val  v = llm_json_node(yajl_t_string);

    v->u.string = llm_xmalloc(len + 1);
    memcpy(v->u.string, s, len);
    v->u.string[len] = '\0';
    return llm_json_add(ctx, v);
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

    free(c->key);
    c->key = llm_xmalloc(len + 1);
    memcpy(c->key, s, len);
    c->key[len] = '\0';
    return 1;
}


static int
llm_json_end(void *ctx)
{
    llm_json_ctx  *c = ctx;

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
llm_tok_json_parse(const char *text, size_t len, char *msg, size_t msg_len)
{
    llm_json_ctx    c;
    yajl_handle     h;
    yajl_status     st;
    unsigned char  *e;

    memset(&c, 0, sizeof(c));
    h = yajl_alloc(&llm_json_callbacks, NULL, &c);
    st = yajl_parse(h, (const unsigned char *) text, len);
    if (st == yajl_status_ok) {
        st = yajl_complete_parse(h);
    }
    if (st != yajl_status_ok || c.root == NULL) {
        e = yajl_get_error(h, 0, (const unsigned char *) text, len);
        snprintf(msg, msg_len, "%s", e ? (char *) e : "parse error");
        msg[strcspn(msg, "\n")] = '\0';
        if (e) {
            yajl_free_error(h, e);
        }
        yajl_tree_free(c.root);
        c.root = NULL;
    }
    yajl_free(h);
    free(c.stack);
    free(c.key);
    return c.root;
}
