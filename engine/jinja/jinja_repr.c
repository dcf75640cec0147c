/*
 * jinja_repr.c -- turning values into text exactly as Python does:
 * str() (what {{ x }} prints), repr() (items of printed containers),
 * json.dumps() (the tojson filter Hugging Face installs); repr(float) is
 * llm_pyfloat().
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "jinja.h"


/* ------------------------------------------------------------------ buffers */

void
jinja_buf_add(jinja_vm *vm, jinja_buf *b, const char *s, size_t len)
{
    size_t  cap;
    char   *p;

    if (len == 0) {
        return;
    }
    if (b->len + len > b->cap) {
        cap = b->cap ? b->cap * 2 : 256;
        while (cap < b->len + len) {
            cap *= 2;
        }
        if (cap > UINT32_MAX) {
            jinja_fail(vm, "the rendered text is too long");
        }
        p = jinja_alloc(vm, cap);
        if (b->len) {
            memcpy(p, b->p, b->len);
        }
        b->p = p;
        b->cap = cap;
    }
    memcpy(b->p + b->len, s, len);
    b->len += len;
}


void
jinja_buf_addc(jinja_vm *vm, jinja_buf *b, char c)
{
    if (b->len < b->cap) {
        b->p[b->len++] = c;
        return;
    }
    jinja_buf_add(vm, b, &c, 1);
}


void
jinja_buf_adds(jinja_vm *vm, jinja_buf *b, const char *s)
{
    jinja_buf_add(vm, b, s, strlen(s));
}


jv
jinja_buf_jv(jinja_buf *b)
{
    return jv_str(b->len ? b->p : "", b->len);
}


/* ------------------------------------------------------------------ numbers */

/* Lays out decimal digits d[0..ndig) whose decimal point sits after decpt
 * of them, like CPython's format_float_short: fixed notation, or d.ddde+XX
 * when use_exp; add_dot_0 gives integral fixed results a ".0". */
size_t
jinja_format_digits(const char *digits, int ndig, int decpt, int use_exp,
    int add_dot_0, char *out)
{
    char  *o = out;
    int    i, exp;

    if (!use_exp) {
        if (decpt <= 0) {
            *o++ = '0';
            *o++ = '.';
            for (i = 0; i < -decpt; i++) {
                *o++ = '0';
            }
            memcpy(o, digits, (size_t) ndig);
            o += ndig;
        } else if (decpt >= ndig) {
            memcpy(o, digits, (size_t) ndig);
            o += ndig;
            for (i = ndig; i < decpt; i++) {
                *o++ = '0';
            }
            if (add_dot_0) {
                *o++ = '.';
                *o++ = '0';
            }
        } else {
            memcpy(o, digits, (size_t) decpt);
            o += decpt;
            *o++ = '.';
            memcpy(o, digits + decpt, (size_t) (ndig - decpt));
            o += ndig - decpt;
        }
    } else {
        exp = decpt - 1;
        *o++ = digits[0];
        if (ndig > 1) {
            *o++ = '.';
            memcpy(o, digits + 1, (size_t) (ndig - 1));
            o += ndig - 1;
        }
        o += sprintf(o, "e%c%02d", exp < 0 ? '-' : '+', exp < 0 ? -exp : exp);
    }
    *o = '\0';
    return (size_t) (o - out);
}


/* The significant digits of f (> 0) rounded to prec of them (trailing
 * zeros removed unless keep_zeros), and the position of the decimal point. */
int
jinja_float_digits(double f, int prec, int keep_zeros, char *digits, int *decpt)
{
    char   tmp[1100], *e;
    int    i, ndig = 0;

    snprintf(tmp, sizeof(tmp), "%.*e", prec - 1, f);
    for (i = 0; tmp[i] && tmp[i] != 'e'; i++) {
        if (tmp[i] != '.') {
            digits[ndig++] = tmp[i];
        }
    }
    e = strchr(tmp, 'e');
    *decpt = atoi(e + 1) + 1;
    while (!keep_zeros && ndig > 1 && digits[ndig - 1] == '0') {
        ndig--;
    }
    return ndig;
}


static void
jv_write_int(jinja_vm *vm, jinja_buf *b, int64_t i)
{
    char  tmp[24];
    int   n;

    n = snprintf(tmp, sizeof(tmp), "%lld", (long long) i);
    jinja_buf_add(vm, b, tmp, (size_t) n);
}


static void
jv_write_float(jinja_vm *vm, jinja_buf *b, double f)
{
    char  tmp[32];

    llm_pyfloat(tmp, f);
    jinja_buf_add(vm, b, tmp, strlen(tmp));
}


/* ------------------------------------------------------------------ repr */

static void
jv_write_str_repr(jinja_vm *vm, jinja_buf *b, const char *s, size_t len)
{
    char    quote = '\'', tmp[16];
    size_t  i, start;
    int     has_sq = 0, has_dq = 0;
    int     cp;

    for (i = 0; i < len; i++) {
        has_sq |= s[i] == '\'';
        has_dq |= s[i] == '"';
    }
    if (has_sq && !has_dq) {
        quote = '"';
    }
    jinja_buf_addc(vm, b, quote);
    i = 0;
    while (i < len) {
        start = i;
        cp = ju_decode(s, len, &i);
        if (cp == quote || cp == '\\') {
            jinja_buf_addc(vm, b, '\\');
            jinja_buf_addc(vm, b, (char) cp);
        } else if (cp == '\t') {
            jinja_buf_add(vm, b, "\\t", 2);
        } else if (cp == '\n') {
            jinja_buf_add(vm, b, "\\n", 2);
        } else if (cp == '\r') {
            jinja_buf_add(vm, b, "\\r", 2);
        } else if (cp < ' ' || cp == 0x7f) {
            snprintf(tmp, sizeof(tmp), "\\x%02x", cp);
            jinja_buf_add(vm, b, tmp, 4);
        } else if (cp < 0x7f || ju_isprintable((uint32_t) cp)) {
            jinja_buf_add(vm, b, s + start, i - start);
        } else if (cp <= 0xff) {
            snprintf(tmp, sizeof(tmp), "\\x%02x", cp);
            jinja_buf_adds(vm, b, tmp);
        } else if (cp <= 0xffff) {
            snprintf(tmp, sizeof(tmp), "\\u%04x", cp);
            jinja_buf_adds(vm, b, tmp);
        } else {
            snprintf(tmp, sizeof(tmp), "\\U%08x", cp);
            jinja_buf_adds(vm, b, tmp);
        }
    }
    jinja_buf_addc(vm, b, quote);
}


static void jv_write_repr_level(jinja_vm *vm, jinja_buf *b, jv v, int level);


static void
jv_write_items_repr(jinja_vm *vm, jinja_buf *b, jv_list *l, int level)
{
    size_t  i;

    for (i = 0; i < l->n; i++) {
        if (i) {
            jinja_buf_add(vm, b, ", ", 2);
        }
        jv_write_repr_level(vm, b, l->items[i], level + 1);
    }
}


static void
jv_write_dict_repr(jinja_vm *vm, jinja_buf *b, jv_dict *d, int level)
{
    size_t  i;

    jinja_buf_addc(vm, b, '{');
    for (i = 0; i < d->n; i++) {
        if (i) {
            jinja_buf_add(vm, b, ", ", 2);
        }
        jv_write_repr_level(vm, b, d->keys[i], level + 1);
        jinja_buf_add(vm, b, ": ", 2);
        jv_write_repr_level(vm, b, d->vals[i], level + 1);
    }
    jinja_buf_addc(vm, b, '}');
}


static void
jv_write_func_repr(jinja_vm *vm, jinja_buf *b, jv v)
{
    jv_func  *f = v.u.fn;
    char      tmp[256];

    switch (f->kind) {
    case JF_MACRO:
        snprintf(tmp, sizeof(tmp), "<Macro '%s'>", f->name);
        break;
    case JF_CALLER:
        snprintf(tmp, sizeof(tmp), "<Macro 'caller'>");
        break;
    case JF_METHOD:
        snprintf(tmp, sizeof(tmp), "<built-in method %s of %s object at 0x0>",
                 f->name, jv_type_name(f->self));
        break;
    case JF_BUILTIN:
        if (strcmp(f->name, "dict") == 0) {
            snprintf(tmp, sizeof(tmp), "<class 'dict'>");
        } else if (strcmp(f->name, "namespace") == 0) {
            snprintf(tmp, sizeof(tmp), "<class 'jinja2.utils.Namespace'>");
        } else if (strcmp(f->name, "cycler") == 0 || strcmp(f->name, "joiner") == 0) {
            snprintf(tmp, sizeof(tmp), "<class 'jinja2.utils.%c%s'>",
                     f->name[0] - 32, f->name + 1);
        } else {
            snprintf(tmp, sizeof(tmp), "<function %s at 0x0>",
                     strcmp(f->name, "range") == 0 ? "safe_range" : f->name);
        }
        break;
    default:
        snprintf(tmp, sizeof(tmp), "<bound method LoopContext.%s of <LoopContext>>",
                 f->kind == JF_LOOP_CYCLE ? "cycle" : "changed");
        break;
    }
    jinja_buf_adds(vm, b, tmp);
}


static void
jv_write_iter_repr(jinja_vm *vm, jinja_buf *b, jv v, int level)
{
    jv_iter  *it = v.u.iter;
    char      tmp[96];
    size_t    i;

    switch (it->kind) {
    case JI_RANGE:
        if (it->step == 1) {
            snprintf(tmp, sizeof(tmp), "range(%lld, %lld)",
                     (long long) it->start, (long long) it->stop);
        } else {
            snprintf(tmp, sizeof(tmp), "range(%lld, %lld, %lld)",
                     (long long) it->start, (long long) it->stop,
                     (long long) it->step);
        }
        jinja_buf_adds(vm, b, tmp);
        return;
    case JI_DICT_KEYS:
    case JI_DICT_VALUES:
    case JI_DICT_ITEMS:
        jinja_buf_adds(vm, b, jv_type_name(v));
        jinja_buf_add(vm, b, "([", 2);
        for (i = 0; i < it->items->n; i++) {
            if (i) {
                jinja_buf_add(vm, b, ", ", 2);
            }
            jv_write_repr_level(vm, b, it->items->items[i], level + 1);
        }
        jinja_buf_add(vm, b, "])", 2);
        return;
    case JI_REVERSED:
        jinja_buf_adds(vm, b, "<list_reverseiterator object at 0x0>");
        return;
    default:
        jinja_buf_adds(vm, b, "<generator object at 0x0>");
        return;
    }
}


static void
jv_check_depth(jinja_vm *vm, int level)
{
    if (level > 200) {
        jinja_fail(vm, "a value is nested too deeply to be printed");
    }
}


static void
jv_write_repr_level(jinja_vm *vm, jinja_buf *b, jv v, int level)
{
    char  tmp[64];

    jv_check_depth(vm, level);
    switch (v.type) {
    case JV_UNDEF:
        jinja_buf_add(vm, b, "Undefined", 9);
        return;
    case JV_NONE:
        jinja_buf_add(vm, b, "None", 4);
        return;
    case JV_BOOL:
        jinja_buf_adds(vm, b, v.u.i ? "True" : "False");
        return;
    case JV_INT:
        jv_write_int(vm, b, v.u.i);
        return;
    case JV_FLOAT:
        jv_write_float(vm, b, v.u.f);
        return;
    case JV_STR:
        if (v.flags & JV_SAFE) {
            jinja_buf_add(vm, b, "Markup(", 7);
            jv_write_str_repr(vm, b, v.u.s, v.len);
            jinja_buf_addc(vm, b, ')');
            return;
        }
        jv_write_str_repr(vm, b, v.u.s, v.len);
        return;
    case JV_LIST:
        jinja_buf_addc(vm, b, '[');
        jv_write_items_repr(vm, b, v.u.list, level);
        jinja_buf_addc(vm, b, ']');
        return;
    case JV_TUPLE:
        jinja_buf_addc(vm, b, '(');
        jv_write_items_repr(vm, b, v.u.list, level);
        if (v.u.list->n == 1) {
            jinja_buf_addc(vm, b, ',');
        }
        jinja_buf_addc(vm, b, ')');
        return;
    case JV_DICT:
        jv_write_dict_repr(vm, b, v.u.dict, level);
        return;
    case JV_NS:
        jinja_buf_add(vm, b, "<Namespace ", 11);
        jv_write_dict_repr(vm, b, v.u.dict, level);
        jinja_buf_addc(vm, b, '>');
        return;
    case JV_ITER:
        jv_write_iter_repr(vm, b, v, level);
        return;
    case JV_FUNC:
        jv_write_func_repr(vm, b, v);
        return;
    case JV_LOOP:
        snprintf(tmp, sizeof(tmp), "<LoopContext %zu/%zu>",
                 v.u.loop->index0 + 1, v.u.loop->items->n);
        jinja_buf_adds(vm, b, tmp);
        return;
    case JV_OBJ:
        jinja_buf_adds(vm, b, v.u.obj->kind == JO_CYCLER
                       ? "<jinja2.utils.Cycler object at 0x0>"
                       : "<jinja2.utils.Joiner object at 0x0>");
        return;
    }
}


void
jv_write_repr(jinja_vm *vm, jinja_buf *b, jv v)
{
    jv_write_repr_level(vm, b, v, 0);
}


void
jv_write_str(jinja_vm *vm, jinja_buf *b, jv v)
{
    switch (v.type) {
    case JV_UNDEF:
        return;
    case JV_STR:
        jinja_buf_add(vm, b, v.u.s, v.len);
        return;
    default:
        jv_write_repr(vm, b, v);
    }
}


jv
jv_to_str(jinja_vm *vm, jv v)
{
    jinja_buf  b = { 0 };

    if (v.type == JV_STR) {
        v.flags = 0;
        return v;
    }
    if (v.type == JV_UNDEF) {
        return jv_lit("");
    }
    jv_write_str(vm, &b, v);
    return jinja_buf_jv(&b);
}


/* ------------------------------------------------------------------ json */

static void
jv_write_json_str(jinja_vm *vm, jinja_buf *b, const char *s, size_t len,
    int ensure_ascii)
{
    size_t          i, run;
    unsigned char   c;
    char            tmp[16];
    int             cp;

    jinja_buf_addc(vm, b, '"');
    i = 0;
    while (i < len) {
        /* copy runs that need no escaping in one go */
        run = i;
        while (run < len) {
            c = (unsigned char) s[run];
            if (c < 0x20 || c == '"' || c == '\\' || (ensure_ascii && c >= 0x80)) {
                break;
            }
            run++;
        }
        jinja_buf_add(vm, b, s + i, run - i);
        i = run;
        if (i >= len) {
            break;
        }
        c = (unsigned char) s[i];
        switch (c) {
        case '"':  jinja_buf_add(vm, b, "\\\"", 2); i++; continue;
        case '\\': jinja_buf_add(vm, b, "\\\\", 2); i++; continue;
        case '\n': jinja_buf_add(vm, b, "\\n", 2); i++; continue;
        case '\r': jinja_buf_add(vm, b, "\\r", 2); i++; continue;
        case '\t': jinja_buf_add(vm, b, "\\t", 2); i++; continue;
        case '\b': jinja_buf_add(vm, b, "\\b", 2); i++; continue;
        case '\f': jinja_buf_add(vm, b, "\\f", 2); i++; continue;
        default:
            break;
        }
        if (c < 0x20) {
            snprintf(tmp, sizeof(tmp), "\\u%04x", c);
            jinja_buf_add(vm, b, tmp, 6);
            i++;
            continue;
        }
        /* ensure_ascii: \uXXXX, astral planes as a surrogate pair */
        cp = ju_decode(s, len, &i);
        if (cp >= 0x10000) {
            cp -= 0x10000;
            snprintf(tmp, sizeof(tmp), "\\u%04x\\u%04x", 0xd800 | (cp >> 10),
                     0xdc00 | (cp & 0x3ff));
        } else {
            snprintf(tmp, sizeof(tmp), "\\u%04x", cp);
        }
        jinja_buf_adds(vm, b, tmp);
    }
    jinja_buf_addc(vm, b, '"');
}


static void
jv_write_json_float(jinja_vm *vm, jinja_buf *b, double f)
{
    if (isnan(f)) {
        jinja_buf_add(vm, b, "NaN", 3);
    } else if (isinf(f)) {
        jinja_buf_adds(vm, b, f < 0 ? "-Infinity" : "Infinity");
    } else {
        jv_write_float(vm, b, f);
    }
}


static void
jv_json_newline(jinja_vm *vm, jinja_buf *b, const jinja_json_opts *o, int level)
{
    int  i;

    jinja_buf_addc(vm, b, '\n');
    for (i = 0; i < level; i++) {
        jinja_buf_add(vm, b, o->indent, o->indent_len);
    }
}


/* A dict key as json.dumps converts it. */
static void
jv_write_json_key(jinja_vm *vm, jinja_buf *b, jv k, const jinja_json_opts *o)
{
    jinja_buf  t = { 0 };

    switch (k.type) {
    case JV_STR:
        jv_write_json_str(vm, b, k.u.s, k.len, o->ensure_ascii);
        return;
    case JV_FLOAT:
        jv_write_json_float(vm, &t, k.u.f);
        break;
    case JV_BOOL:
        jinja_buf_adds(vm, &t, k.u.i ? "true" : "false");
        break;
    case JV_NONE:
        jinja_buf_adds(vm, &t, "null");
        break;
    case JV_INT:
        jv_write_int(vm, &t, k.u.i);
        break;
    default:
        jinja_fail(vm, "keys must be str, int, float, bool or None, not %s",
                   jv_type_name(k));
    }
    jv_write_json_str(vm, b, t.p, t.len, o->ensure_ascii);
}


static int
jv_json_key_cmp(jinja_vm *vm, const jv *x, const jv *y, void *ctx)
{
    return jv_compare(vm, x[0], y[0], "<");
}


static void
jv_write_json_dict(jinja_vm *vm, jinja_buf *b, jv_dict *d,
    const jinja_json_opts *o, int level)
{
    size_t  i;
    jv     *pairs;

    if (d->n == 0) {
        jinja_buf_add(vm, b, "{}", 2);
        return;
    }
    pairs = jinja_alloc(vm, d->n * 2 * sizeof(jv));
    for (i = 0; i < d->n; i++) {
        pairs[2 * i] = d->keys[i];
        pairs[2 * i + 1] = d->vals[i];
    }
    if (o->sort_keys) {
        jinja_sort(vm, pairs, d->n, 2, jv_json_key_cmp, NULL);
    }
    jinja_buf_addc(vm, b, '{');
    for (i = 0; i < d->n; i++) {
        if (i) {
            jinja_buf_add(vm, b, o->item_sep, o->item_sep_len);
        }
        if (o->indent) {
            jv_json_newline(vm, b, o, level + 1);
        }
        jv_write_json_key(vm, b, pairs[2 * i], o);
        jinja_buf_add(vm, b, o->key_sep, o->key_sep_len);
        jv_write_json(vm, b, pairs[2 * i + 1], o, level + 1);
    }
    if (o->indent) {
        jv_json_newline(vm, b, o, level);
    }
    jinja_buf_addc(vm, b, '}');
}


void
jv_write_json(jinja_vm *vm, jinja_buf *b, jv v, const jinja_json_opts *o,
    int level)
{
    size_t  i;

    jv_check_depth(vm, level);
    switch (v.type) {
    case JV_NONE:
        jinja_buf_add(vm, b, "null", 4);
        return;
    case JV_BOOL:
        jinja_buf_adds(vm, b, v.u.i ? "true" : "false");
        return;
    case JV_INT:
        jv_write_int(vm, b, v.u.i);
        return;
    case JV_FLOAT:
        jv_write_json_float(vm, b, v.u.f);
        return;
    case JV_STR:
        jv_write_json_str(vm, b, v.u.s, v.len, o->ensure_ascii);
        return;
    case JV_LIST:
    case JV_TUPLE:
        if (v.u.list->n == 0) {
            jinja_buf_add(vm, b, "[]", 2);
            return;
        }
        jinja_buf_addc(vm, b, '[');
        for (i = 0; i < v.u.list->n; i++) {
            if (i) {
                jinja_buf_add(vm, b, o->item_sep, o->item_sep_len);
            }
            if (o->indent) {
                jv_json_newline(vm, b, o, level + 1);
            }
            jv_write_json(vm, b, v.u.list->items[i], o, level + 1);
        }
        if (o->indent) {
            jv_json_newline(vm, b, o, level);
        }
        jinja_buf_addc(vm, b, ']');
        return;
    case JV_DICT:
        jv_write_json_dict(vm, b, v.u.dict, o, level);
        return;
    default:
        jinja_fail(vm, "Object of type %s is not JSON serializable",
                   jv_type_name(v));
    }
}


/* markupsafe.escape() */
void
jinja_escape_html(jinja_vm *vm, jinja_buf *b, const char *s, size_t len)
{
    size_t  i, start = 0;

    for (i = 0; i < len; i++) {
        const char  *rep;

        switch (s[i]) {
        case '&':  rep = "&amp;"; break;
        case '<':  rep = "&lt;"; break;
        case '>':  rep = "&gt;"; break;
        case '"':  rep = "&#34;"; break;
        case '\'': rep = "&#39;"; break;
        default:   continue;
        }
        jinja_buf_add(vm, b, s + start, i - start);
        jinja_buf_adds(vm, b, rep);
        start = i + 1;
    }
    jinja_buf_add(vm, b, s + start, len - start);
}
