/*
 * json.c -- JSON from clients, as yajl trees (struct yajl_val_s, read with
 * YAJL_IS_* and llm_json_get), built and freed without recursion and within
 * limits, so that no body can drive a thread down its stack:
 *
 *   llm_json_parse()  yajl's event parser (iterative) with a frame stack of
 *                     our own; a depth limit, strict UTF-8, no comments,
 *                     no \u0000
 *   llm_json_free()   an explicit stack instead of yajl_tree_free()'s
 *                     recursion; frees yajl_tree_parse() trees as well
 *   llm_json_get()    the one key lookup (the last duplicate wins)
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <yajl/yajl_parse.h>
#include <yajl/yajl_tree.h>

#include "llm.h"
#include "util.h"


typedef struct {
    yajl_val   node;            /* the open array or object */
    size_t     cap;             /* room in its keys / values */
    char      *key;             /* object: the key whose value comes next */
} json_frame;

typedef struct {
    json_frame  *frames;
    int          depth, max_depth;
    yajl_val     root;
    char        *err;           /* LLM_ERR_LEN; set when a callback stops */
} json_parse_ctx;


static yajl_val
json_node(yajl_type type)
{
    yajl_val  v = llm_xcalloc(1, sizeof(*v));

    v->type = type;
    return v;
}


/* Puts a finished value where it belongs: the root, the next element of the
 * open array, or the value of the open object's pending key. */
static int
json_add(json_parse_ctx *c, yajl_val v)
{
    json_frame  *f;
    yajl_val     n;
    size_t       len;

    if (c->depth == 0) {
        c->root = v;
        return 1;
    }
    f = &c->frames[c->depth - 1];
    n = f->node;
    len = n->type == yajl_t_object ? n->u.object.len : n->u.array.len;
    if (len == f->cap) {
        f->cap = f->cap ? 2 * f->cap : 4;
        if (n->type == yajl_t_object) {
            n->u.object.keys = llm_xrealloc((void *) n->u.object.keys,
                                            f->cap * sizeof(char *));
            n->u.object.values = llm_xrealloc(n->u.object.values,
                                              f->cap * sizeof(yajl_val));
        } else {
            n->u.array.values = llm_xrealloc(n->u.array.values,
                                             f->cap * sizeof(yajl_val));
        }
    }
    if (n->type == yajl_t_object) {
        n->u.object.keys[len] = f->key;
        n->u.object.values[len] = v;
        n->u.object.len++;
        f->key = NULL;
    } else {
        n->u.array.values[len] = v;
        n->u.array.len++;
    }
    return 1;
}


static int
json_open(json_parse_ctx *c, yajl_type type)
{
    yajl_val  v;

    if (c->depth == c->max_depth) {
        llm_errf(c->err, "the request body is nested deeper than %d levels",
                 c->max_depth);
        return 0;
    }
    v = json_node(type);
    /* linked in at once, so that a failed parse frees it with the tree */
    json_add(c, v);
    c->frames[c->depth].node = v;
    c->frames[c->depth].cap = 0;
    c->frames[c->depth].key = NULL;
    c->depth++;
    return 1;
}


static int
json_close(void *ctx)
{
    ((json_parse_ctx *) ctx)->depth--;
    return 1;
}


static int
json_start_map(void *ctx)
{
    return json_open(ctx, yajl_t_object);
}


static int
json_start_array(void *ctx)
{
    return json_open(ctx, yajl_t_array);
}


static char *
json_text(json_parse_ctx *c, const unsigned char *s, size_t len)
{
    char  *t;

    if (!llm_utf8_valid((const char *) s, len)) {
        llm_errf(c->err, "the request body is not valid UTF-8");
        return NULL;
    }
    t = llm_xmalloc(len + 1);
    memcpy(t, s, len);
    t[len] = '\0';
    return t;
}


static int
json_map_key(void *ctx, const unsigned char *s, size_t len)
{
    json_parse_ctx  *c = ctx;
    json_frame      *f = &c->frames[c->depth - 1];

    f->key = json_text(c, s, len);
    return f->key != NULL;
}


static int
json_string(void *ctx, const unsigned char *s, size_t len)
{
    json_parse_ctx  *c = ctx;
    yajl_val         v;
    char            *t;

    if ((t = json_text(c, s, len)) == NULL) {
        return 0;
    }
    v = json_node(yajl_t_string);
    v->u.string = t;
    return json_add(c, v);
}


/* As yajl_tree: the raw text, an integer when it is one that fits in a
 * long long, a double when strtod reads it all without overflow. */
static int
json_number(void *ctx, const char *s, size_t len)
{
    yajl_val   v = json_node(yajl_t_number);
    char      *end;

    v->u.number.r = llm_xmalloc(len + 1);
    memcpy(v->u.number.r, s, len);
    v->u.number.r[len] = '\0';
    if (strpbrk(v->u.number.r, ".eE") == NULL) {
        errno = 0;
        v->u.number.i = strtoll(v->u.number.r, &end, 10);
        if (errno == 0 && *end == '\0') {
            v->u.number.flags |= YAJL_NUMBER_INT_VALID;
        }
    }
    errno = 0;
    v->u.number.d = strtod(v->u.number.r, &end);
    if (errno == 0 && *end == '\0') {
        v->u.number.flags |= YAJL_NUMBER_DOUBLE_VALID;
    }
    return json_add(ctx, v);
}


static int
json_boolean(void *ctx, int b)
{
    return json_add(ctx, json_node(b ? yajl_t_true : yajl_t_false));
}


static int
json_null(void *ctx)
{
    return json_add(ctx, json_node(yajl_t_null));
}


/* What yajl lets through in escapes: \u0000 (a C string would end there)
 * and a lone high surrogate (yajl makes it a '?'; a lone low one it encodes,
 * and json_text() rejects that).  The text is valid JSON already, so every
 * backslash starts an escape inside a string. */
static int
json_check_escapes(const char *t, size_t len, char *err)
{
    size_t    i;
    unsigned  u, lo;

    for (i = 0; i + 1 < len; i++) {
        if (t[i] != '\\') {
            continue;
        }
        if (t[i + 1] != 'u') {
            i++;
            continue;
        }
        sscanf(t + i + 2, "%4x", &u);
        if (u == 0) {
            llm_errf(err, "the request body has a \\u0000 in a string");
            return 0;
        }
        if (u >= 0xD800 && u <= 0xDBFF) {
            if (i + 11 >= len || t[i + 6] != '\\' || t[i + 7] != 'u'
                || sscanf(t + i + 8, "%4x", &lo) != 1
                || lo < 0xDC00 || lo > 0xDFFF)
            {
                llm_errf(err, "the request body is not valid UTF-8: "
                         "\\u%04x is half of a surrogate pair", u);
                return 0;
            }
            i += 6;
        }
        i += 5;
    }
    return 1;
}


static const yajl_callbacks  json_callbacks = {
    json_null, json_boolean, NULL, NULL, json_number, json_string,
    json_start_map, json_map_key, json_close, json_start_array, json_close
};


yajl_val
llm_json_parse(const char *text, size_t len, int max_depth, char *err)
{
    json_parse_ctx   c = { 0 };
    yajl_handle      h;
    yajl_status      st;
    unsigned char   *msg;
    char            *nl;
    int              i;

    err[0] = '\0';
    c.max_depth = max_depth;
    c.frames = llm_xcalloc((size_t) max_depth + 1, sizeof(json_frame));
    c.err = err;
    h = yajl_alloc(&json_callbacks, NULL, &c);
    if (h == NULL) {
        abort();
    }
    st = yajl_parse(h, (const unsigned char *) text, len);
    if (st == yajl_status_ok) {
        st = yajl_complete_parse(h);
    }
    if (st != yajl_status_ok && err[0] == '\0') {
        /* yajl's first line; further lines quote the input */
        msg = yajl_get_error(h, 0, (const unsigned char *) text, len);
        llm_errf(err, "the request body is not valid JSON: %s",
                 (const char *) msg);
        yajl_free_error(h, msg);
        if ((nl = strchr(err, '\n')) != NULL) {
            *nl = '\0';
        }
    }
    yajl_free(h);
    if (st == yajl_status_ok && memchr(text, '\\', len) != NULL
        && !json_check_escapes(text, len, err))
    {
        st = yajl_status_error;
    }
    for (i = 0; i < c.depth; i++) {
        free(c.frames[i].key);          /* a key still waiting for a value */
    }
    free(c.frames);
    if (st != yajl_status_ok) {
        llm_json_free(c.root);
        return NULL;
    }
    return c.root;
}


void
llm_json_free(yajl_val root)
{
    yajl_val  *stack, v;
    size_t     n = 0, cap = 16, i, len;

    if (root == NULL) {
        return;
    }
    stack = llm_xmalloc(cap * sizeof(yajl_val));
    stack[n++] = root;
    while (n > 0) {
        v = stack[--n];
        if (v == NULL) {
            continue;
        }
        len = v->type == yajl_t_object ? v->u.object.len
              : v->type == yajl_t_array ? v->u.array.len : 0;
        if (n + len > cap) {
            while (n + len > cap) {
                cap *= 2;
            }
            stack = llm_xrealloc(stack, cap * sizeof(yajl_val));
        }
        switch (v->type) {
        case yajl_t_string:
            free(v->u.string);
            break;
        case yajl_t_number:
            free(v->u.number.r);
            break;
        case yajl_t_object:
            for (i = 0; i < len; i++) {
                free((void *) v->u.object.keys[i]);
                stack[n++] = v->u.object.values[i];
            }
            free((void *) v->u.object.keys);
            free(v->u.object.values);
            break;
        case yajl_t_array:
            for (i = 0; i < len; i++) {
                stack[n++] = v->u.array.values[i];
            }
            free(v->u.array.values);
            break;
        default:
            break;
        }
        free(v);
    }
    free(stack);
}


yajl_val
llm_json_get(yajl_val obj, const char *key)
{
    size_t  i;

    if (obj == NULL || !YAJL_IS_OBJECT(obj)) {
        return NULL;
    }
    /* a key given twice: the last one wins, as in Python's json */
    for (i = obj->u.object.len; i > 0; i--) {
        if (strcmp(obj->u.object.keys[i - 1], key) == 0) {
            return obj->u.object.values[i - 1];
        }
    }
    return NULL;
}


/* ---- writing ------------------------------------------------------------- */


typedef struct {
    char    *s;
    size_t   n, cap;
} json_out;


static void
json_out_put(json_out *o, const char *s, size_t n)
{
    if (o->n + n + 1 > o->cap) {
        o->cap = 2 * (o->n + n) + 256;
        o->s = llm_xrealloc(o->s, o->cap);
    }
    memcpy(o->s + o->n, s, n);
    o->n += n;
    o->s[o->n] = '\0';
}


static void
json_out_str(json_out *o, const char *s)
{
    char  esc[8];

    json_out_put(o, "\"", 1);
    for ( ; *s; s++) {
        unsigned char  c = (unsigned char) *s;

        if (c == '"' || c == '\\') {
            esc[0] = '\\';
            esc[1] = (char) c;
            json_out_put(o, esc, 2);
        } else if (c < 0x20) {
            snprintf(esc, sizeof(esc), "\\u%04x", c);
            json_out_put(o, esc, 6);
        } else {
            json_out_put(o, (const char *) &c, 1);
        }
    }
    json_out_put(o, "\"", 1);
}


static void
json_out_value(json_out *o, yajl_val v)
{
    size_t  i;

    switch (v->type) {
    case yajl_t_string:
        json_out_str(o, v->u.string);
        break;
    case yajl_t_number:
        json_out_put(o, v->u.number.r, strlen(v->u.number.r));
        break;
    case yajl_t_true:
        json_out_put(o, "true", 4);
        break;
    case yajl_t_false:
        json_out_put(o, "false", 5);
        break;
    case yajl_t_null:
        json_out_put(o, "null", 4);
        break;
    case yajl_t_array:
        json_out_put(o, "[", 1);
        for (i = 0; i < v->u.array.len; i++) {
            if (i) {
                json_out_put(o, ",", 1);
            }
            json_out_value(o, v->u.array.values[i]);
        }
        json_out_put(o, "]", 1);
        break;
    default:
        json_out_put(o, "{", 1);
        for (i = 0; i < v->u.object.len; i++) {
            if (i) {
                json_out_put(o, ",", 1);
            }
            json_out_str(o, v->u.object.keys[i]);
            json_out_put(o, ":", 1);
            json_out_value(o, v->u.object.values[i]);
        }
        json_out_put(o, "}", 1);
        break;
    }
}


char *
llm_json_dump(yajl_val v, size_t *len)
{
    json_out  o = { 0 };

    json_out_put(&o, "", 0);
    json_out_value(&o, v);
    *len = o.n;
    return o.s;
}
