/*
 * jinja_filters.c -- jinja2's builtin filters and tests (jinja2/filters.py,
 * jinja2/tests.py), with transformers' tojson in place of jinja2's.
 *
 * Filters that jinja2 implements as generators (map, select, reject,
 * selectattr, rejectattr, unique, batch, slice, items) return a one-pass
 * generator value here too: it is always true, has no length, and is
 * used up by the first loop over it, which is what templates observe.
 * The few filters that make no sense in a chat template (random, urlize,
 * pprint, ...) are known names, so templates parse, but fail if used.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "jinja.h"


#define BIND(fname, nreq, ...) \
    static const char *const names_[] = { __VA_ARGS__ }; \
    jv arg[sizeof(names_) / sizeof(names_[0])]; \
    jinja_bind(vm, fname, a, names_, sizeof(names_) / sizeof(names_[0]), nreq, arg)

#define NO_ARGS(fname) \
    do { if (a->npos || a->nkw) jinja_fail(vm, "%s() takes no arguments", fname); } \
    while (0)


/* jinja2's soft_str(): strings (Markup included) stay, the rest is str(). */
static jv
soft_str(jinja_vm *vm, jv v)
{
    return v.type == JV_STR ? v : jv_to_str(vm, v);
}


static jv
generator(jinja_vm *vm, jv list)
{
    return jv_iter_new(vm, JI_GENERATOR, list.u.list);
}


static int
given_true(jv v)
{
    return jv_given(v) && jv_truthy(v);
}


/* ------------------------------------------------------------------ attribute paths */

/* make_attrgetter(): "a.b.0" looks up a, then b, then item 0. */
static jv
attr_path(jinja_vm *vm, jv item, jv attribute, jv dflt, int lower)
{
    size_t  i, start;
    jv      part;

    if (attribute.type == JV_STR) {
        start = 0;
        for (i = 0; i <= attribute.len; i++) {
            if (i < attribute.len && attribute.u.s[i] != '.') {
                continue;
            }
            part = jv_str(attribute.u.s + start, i - start);
            if (part.len > 0) {
                size_t  k;
                int     digits = 1;

                for (k = 0; k < part.len; k++) {
                    digits &= part.u.s[k] >= '0' && part.u.s[k] <= '9';
                }
                if (digits && part.len < 18) {
                    part = jv_int(strtoll(part.u.s, NULL, 10));
                }
            }
            item = jinja_getitem(vm, item, part);
            if (jv_given(dflt) && dflt.type != JV_NONE && item.type == JV_UNDEF) {
                item = dflt;
            }
            start = i + 1;
        }
    } else if (jv_given(attribute) && attribute.type != JV_NONE) {
        item = jinja_getitem(vm, item, attribute);
        if (jv_given(dflt) && dflt.type != JV_NONE && item.type == JV_UNDEF) {
            item = dflt;
        }
    }
    if (lower && item.type == JV_STR) {
        item = jinja_str_case(vm, item, 'l');
    }
    return item;
}


/* ------------------------------------------------------------------ strings */

static jv
f_upper(jinja_vm *vm, jv v, jinja_args *a)
{
    NO_ARGS("upper");
    return jinja_str_case(vm, soft_str(vm, v), 'u');
}


static jv
f_lower(jinja_vm *vm, jv v, jinja_args *a)
{
    NO_ARGS("lower");
    return jinja_str_case(vm, soft_str(vm, v), 'l');
}


static jv
f_capitalize(jinja_vm *vm, jv v, jinja_args *a)
{
    NO_ARGS("capitalize");
    return jinja_str_case(vm, soft_str(vm, v), 'c');
}


/* do_title: split at runs of [-\s({\[<], upper() the first character and
 * lower() the rest of each piece. */
static jv
f_title(jinja_vm *vm, jv v, jinja_args *a)
{
    jinja_buf  b = { 0 };
    size_t     i = 0, start, j;
    int        cp, delim, prev_delim = -1;
    jv         s, piece;

    NO_ARGS("title");
    s = soft_str(vm, v);
    while (i < s.len) {
        start = i;
        cp = ju_decode(s.u.s, s.len, &i);
        delim = cp == '-' || cp == '(' || cp == '{' || cp == '[' || cp == '<'
                || ju_isspace((uint32_t) cp);
        /* find the end of this run */
        j = i;
        while (j < s.len) {
            size_t  k = j;
            int     c2 = ju_decode(s.u.s, s.len, &k);
            int     d2 = c2 == '-' || c2 == '(' || c2 == '{' || c2 == '['
                         || c2 == '<' || ju_isspace((uint32_t) c2);

            if (d2 != delim) {
                break;
            }
            j = k;
        }
        piece = jv_str(s.u.s + start, j - start);
        if (delim) {
            jinja_buf_add(vm, &b, piece.u.s, piece.len);
        } else {
            jv  first = jv_str(piece.u.s, i - start);
            jv  rest = jv_str(piece.u.s + (i - start), j - i);

            first = jinja_str_case(vm, first, 'u');
            rest = jinja_str_case(vm, rest, 'l');
            jinja_buf_add(vm, &b, first.u.s, first.len);
            jinja_buf_add(vm, &b, rest.u.s, rest.len);
        }
        prev_delim = delim;
        i = j;
    }
    (void) prev_delim;
    return jinja_buf_jv(&b);
}


static jv
f_trim(jinja_vm *vm, jv v, jinja_args *a)
{
    BIND("trim", 0, "chars");
    return jinja_str_strip(vm, soft_str(vm, v), arg[0], 1, 1);
}


static jv
f_replace(jinja_vm *vm, jv v, jinja_args *a)
{
    BIND("replace", 2, "old", "new", "count");
    int64_t  count = -1;

    if (jv_given(arg[2]) && arg[2].type != JV_NONE) {
        count = jinja_arg_int(vm, "replace", arg[2]);
    }
    /* autoescape is off: str(s).replace(str(old), str(new), count) */
    return jinja_str_replace(vm, jv_to_str(vm, v), jv_to_str(vm, arg[0]),
                             jv_to_str(vm, arg[1]), count);
}


static jv
f_string(jinja_vm *vm, jv v, jinja_args *a)
{
    NO_ARGS("string");
    return soft_str(vm, v);
}


static jv
f_safe(jinja_vm *vm, jv v, jinja_args *a)
{
    NO_ARGS("safe");
    v = v.type == JV_STR ? v : jv_to_str(vm, v);
    v.flags |= JV_SAFE;
    return v;
}


static jv
f_escape(jinja_vm *vm, jv v, jinja_args *a)
{
    jinja_buf  b = { 0 };
    jv         s;

    NO_ARGS("escape");
    if (v.type == JV_STR && (v.flags & JV_SAFE)) {
        return v;
    }
    s = jv_to_str(vm, v);
    jinja_escape_html(vm, &b, s.u.s, s.len);
    s = jinja_buf_jv(&b);
    s.flags |= JV_SAFE;
    return s;
}


static jv
f_forceescape(jinja_vm *vm, jv v, jinja_args *a)
{
    jinja_buf  b = { 0 };
    jv         s;

    NO_ARGS("forceescape");
    s = jv_to_str(vm, v);
    jinja_escape_html(vm, &b, s.u.s, s.len);
    s = jinja_buf_jv(&b);
    s.flags |= JV_SAFE;
    return s;
}


static jv
f_center(jinja_vm *vm, jv v, jinja_args *a)
{
    BIND("center", 0, "width");
    int64_t    width = jv_given(arg[0]) ? jinja_arg_int(vm, "center", arg[0]) : 80;
    jv         s = soft_str(vm, v);
    int64_t    n = jv_length(vm, s), marg, left, i;
    jinja_buf  b = { 0 };

    if (width <= n) {
        return s;
    }
    marg = width - n;
    left = marg / 2 + (marg & width & 1);
    for (i = 0; i < left; i++) {
        jinja_buf_addc(vm, &b, ' ');
    }
    jinja_buf_add(vm, &b, s.u.s, s.len);
    for (i = left; i < marg; i++) {
        jinja_buf_addc(vm, &b, ' ');
    }
    return jinja_buf_jv(&b);
}


static jv
f_indent(jinja_vm *vm, jv v, jinja_args *a)
{
    BIND("indent", 0, "width", "first", "blank");
    jv          ind, s, lines;
    jinja_buf   b = { 0 }, t = { 0 };
    size_t      i;
    int64_t     w, k;
    jv_list    *l;

    if (v.type == JV_UNDEF) {
        jinja_fail_undefined(vm, v);    /* s += "\n" on an Undefined */
    }
    if (jv_given(arg[0]) && arg[0].type == JV_STR) {
        ind = arg[0];
    } else {
        w = jv_given(arg[0]) ? jinja_arg_int(vm, "indent", arg[0]) : 4;
        for (k = 0; k < w; k++) {
            jinja_buf_addc(vm, &t, ' ');
        }
        ind = jinja_buf_jv(&t);
    }
    if (v.type != JV_STR) {
        jinja_fail(vm, "can only concatenate %s (not \"str\") to %s",
                   jv_type_name(v), jv_type_name(v));
    }
    /* s += "\n" so splitlines() keeps a trailing empty line */
    jinja_buf_add(vm, &t, "", 0);
    {
        jinja_buf  x = { 0 };

        jinja_buf_add(vm, &x, v.u.s, v.len);
        jinja_buf_addc(vm, &x, '\n');
        s = jinja_buf_jv(&x);
    }
    lines = jinja_str_splitlines(vm, s, 0);
    l = lines.u.list;
    if (given_true(arg[2])) {
        for (i = 0; i < l->n; i++) {
            if (i) {
                jinja_buf_addc(vm, &b, '\n');
                jinja_buf_add(vm, &b, ind.u.s, ind.len);
            }
            jinja_buf_add(vm, &b, l->items[i].u.s, l->items[i].len);
        }
    } else {
        for (i = 0; i < l->n; i++) {
            if (i) {
                jinja_buf_addc(vm, &b, '\n');
                if (l->items[i].len) {
                    jinja_buf_add(vm, &b, ind.u.s, ind.len);
                }
            }
            jinja_buf_add(vm, &b, l->items[i].u.s, l->items[i].len);
        }
    }
    if (given_true(arg[1])) {
        jinja_buf  f = { 0 };

        jinja_buf_add(vm, &f, ind.u.s, ind.len);
        jinja_buf_add(vm, &f, b.p, b.len);
        return jinja_buf_jv(&f);
    }
    return jinja_buf_jv(&b);
}


static jv
f_truncate(jinja_vm *vm, jv v, jinja_args *a)
{
    BIND("truncate", 0, "length", "killwords", "end", "leeway");
    int64_t  length = jv_given(arg[0]) ? jinja_arg_int(vm, "truncate", arg[0]) : 255;
    jv       end = jv_given(arg[2]) ? arg[2] : jv_lit("...");
    int64_t  leeway = jv_given(arg[3]) && arg[3].type != JV_NONE
                      ? jinja_arg_int(vm, "truncate", arg[3]) : 5;
    int64_t  n = jv_length(vm, v), endn;
    jv       head, parts;
    jinja_buf b = { 0 };

    if (end.type != JV_STR) {
        jinja_fail(vm, "truncate(): end must be a string");
    }
    endn = jv_length(vm, end);
    if (length < endn) {
        jinja_fail(vm, "expected length >= %lld, got %lld", (long long) endn,
                   (long long) length);
    }
    if (leeway < 0) {
        jinja_fail(vm, "expected leeway >= 0, got %lld", (long long) leeway);
    }
    if (n <= length + leeway) {
        return v;
    }
    if (v.type != JV_STR) {
        jinja_fail(vm, "truncate() needs a string");
    }
    head = jinja_slice(vm, v, jv_int(0), jv_int(length - endn), jv_none());
    if (!given_true(arg[1])) {
        parts = jinja_str_split(vm, head, jv_lit(" "), 1, 1);
        head = parts.u.list->items[0];
    }
    jinja_buf_add(vm, &b, head.u.s, head.len);
    jinja_buf_add(vm, &b, end.u.s, end.len);
    return jinja_buf_jv(&b);
}


static jv
f_wordcount(jinja_vm *vm, jv v, jinja_args *a)
{
    jv       s;
    size_t   i = 0;
    int64_t  n = 0;
    int      in_word = 0, w;

    NO_ARGS("wordcount");
    s = soft_str(vm, v);
    while (i < s.len) {
        w = ju_isword((uint32_t) ju_decode(s.u.s, s.len, &i));
        if (w && !in_word) {
            n++;
        }
        in_word = w;
    }
    return jv_int(n);
}


static jv
f_format(jinja_vm *vm, jv v, jinja_args *a)
{
    jv      args;
    size_t  i;

    if (a->npos && a->nkw) {
        jinja_fail(vm, "can't handle positional and keyword arguments at the "
                   "same time");
    }
    if (a->nkw) {
        args = jv_dict_new(vm, a->nkw);
        for (i = 0; i < a->nkw; i++) {
            jv_dict_set(vm, args, jv_str(a->kw[i].name, a->kw[i].len), a->kw[i].val);
        }
    } else {
        args = jv_tuple_new(vm, a->npos);
        for (i = 0; i < a->npos; i++) {
            jv_list_push(vm, args, a->pos[i]);
        }
    }
    return jinja_percent_format(vm, soft_str(vm, v), args);
}


/* ------------------------------------------------------------------ numbers */

static jv
f_abs(jinja_vm *vm, jv v, jinja_args *a)
{
    NO_ARGS("abs");
    if (v.type == JV_INT || v.type == JV_BOOL) {
        if (v.u.i == INT64_MIN) {
            jinja_fail(vm, "integer overflow in abs()");
        }
        return jv_int(v.u.i < 0 ? -v.u.i : v.u.i);
    }
    if (v.type == JV_FLOAT) {
        return jv_float(fabs(v.u.f));
    }
    jinja_fail(vm, "bad operand type for abs(): '%s'", jv_type_name(v));
}


/* Python's int(str, base): optional sign, underscores between digits,
 * surrounding whitespace, a 0x/0o/0b prefix when base is 0 or matches. */
static int
parse_int_str(jv s, int base, int64_t *out)
{
    jv       t = s;
    size_t   i = 0, n;
    int      neg = 0, d, any = 0, last_us = 1;
    uint64_t v = 0;

    while (i < t.len && (t.u.s[i] == ' ' || (t.u.s[i] >= 9 && t.u.s[i] <= 13))) {
        i++;
    }
    n = t.len;
    while (n > i && (t.u.s[n - 1] == ' ' || (t.u.s[n - 1] >= 9 && t.u.s[n - 1] <= 13))) {
        n--;
    }
    if (i < n && (t.u.s[i] == '+' || t.u.s[i] == '-')) {
        neg = t.u.s[i++] == '-';
    }
    if (n - i >= 2 && t.u.s[i] == '0') {
        char  c = (char) (t.u.s[i + 1] | 0x20);
        int   pb = c == 'x' ? 16 : c == 'o' ? 8 : c == 'b' ? 2 : 0;

        if (pb && (base == 0 || base == pb)) {
            base = pb;
            i += 2;
            last_us = 0;
        }
    }
    if (base == 0) {
        base = 10;
    }
    for (; i < n; i++) {
        char  c = t.u.s[i];

        if (c == '_') {
            if (last_us) {
                return 0;
            }
            last_us = 1;
            continue;
        }
        d = c >= '0' && c <= '9' ? c - '0' : (c | 0x20) >= 'a' && (c | 0x20) <= 'z'
            ? (c | 0x20) - 'a' + 10 : 99;
        if (d >= base) {
            return 0;
        }
        if (v > (UINT64_MAX - (uint64_t) d) / (uint64_t) base) {
            return 0;
        }
        v = v * (uint64_t) base + (uint64_t) d;
        any = 1;
        last_us = 0;
    }
    if (!any || last_us || v > (uint64_t) INT64_MAX + neg) {
        return 0;
    }
    *out = neg ? (int64_t) (0 - v) : (int64_t) v;
    return 1;
}


/* Python's float(str): strtod plus the inf/nan spellings, whole string. */
static int
parse_float_str(jinja_vm *vm, jv s, double *out)
{
    char   *z, *end, *p;
    size_t  i;

    z = jinja_strdup(vm, s.u.s, s.len);
    for (p = z, i = 0; i < s.len; i++) {
        if (z[i] != '_') {
            *p++ = z[i];
        } else if (i == 0 || i + 1 >= s.len || z[i - 1] < '0' || z[i - 1] > '9'
                   || z[i + 1] < '0' || z[i + 1] > '9')
        {
            return 0;
        }
    }
    *p = '\0';
    p = z;
    while (*p == ' ' || (*p >= 9 && *p <= 13)) {
        p++;
    }
    if (*p == '\0') {
        return 0;
    }
    if ((p[0] == '0' && (p[1] | 0x20) == 'x')
        || ((p[0] == '+' || p[0] == '-') && p[1] == '0' && (p[2] | 0x20) == 'x'))
    {
        return 0;       /* Python's float() takes no hex */
    }
    *out = strtod(p, &end);
    if (end == p) {
        return 0;
    }
    while (*end == ' ' || (*end >= 9 && *end <= 13)) {
        end++;
    }
    return *end == '\0';
}


static jv
f_int(jinja_vm *vm, jv v, jinja_args *a)
{
    BIND("int", 0, "default", "base");
    jv       dflt = jv_given(arg[0]) ? arg[0] : jv_int(0);
    int64_t  base = jv_given(arg[1]) ? jinja_arg_int(vm, "int", arg[1]) : 10, r;
    double   f;

    switch (v.type) {
    case JV_INT:
    case JV_BOOL:
        return jv_int(v.u.i);
    case JV_FLOAT:
        if (!isfinite(v.u.f) || fabs(v.u.f) >= 9.2e18) {
            return dflt;    /* OverflowError is not caught... but inf: ValueError */
        }
        return jv_int((int64_t) v.u.f);
    case JV_STR:
        if (parse_int_str(v, (int) base, &r)) {
            return jv_int(r);
        }
        /* "42.23"|int gives 42 */
        if (parse_float_str(vm, v, &f) && isfinite(f) && fabs(f) < 9.2e18) {
            return jv_int((int64_t) f);
        }
        return dflt;
    case JV_UNDEF:
        jinja_fail_undefined(vm, v);
    default:
        return dflt;
    }
}


static jv
f_float(jinja_vm *vm, jv v, jinja_args *a)
{
    BIND("float", 0, "default");
    jv      dflt = jv_given(arg[0]) ? arg[0] : jv_float(0.0);
    double  f;

    switch (v.type) {
    case JV_INT:
    case JV_BOOL:
        return jv_float((double) v.u.i);
    case JV_FLOAT:
        return v;
    case JV_STR:
        if (parse_float_str(vm, v, &f)) {
            return jv_float(f);
        }
        return dflt;
    case JV_UNDEF:
        jinja_fail_undefined(vm, v);
    default:
        return dflt;
    }
}


/* Python's round(x, n) for floats: the exact binary value rounded half to
 * even at n decimals, which is what printf does too. */
static jv
f_round(jinja_vm *vm, jv v, jinja_args *a)
{
    BIND("round", 0, "precision", "method");
    int64_t  prec = jv_given(arg[0]) ? jinja_arg_int(vm, "round", arg[0]) : 0;
    jv       method = jv_given(arg[1]) ? arg[1] : jv_lit("common");
    double   x, p10, r;
    char     tmp[512];

    if (method.type != JV_STR
        || !((method.len == 6 && memcmp(method.u.s, "common", 6) == 0)
             || (method.len == 4 && memcmp(method.u.s, "ceil", 4) == 0)
             || (method.len == 5 && memcmp(method.u.s, "floor", 5) == 0)))
    {
        jinja_fail(vm, "method must be common, ceil or floor");
    }
    if (v.type != JV_INT && v.type != JV_BOOL && v.type != JV_FLOAT) {
        if (v.type == JV_UNDEF) {
            jinja_fail(vm, "type Undefined doesn't define __round__ method");
        }
        jinja_fail(vm, "type %s doesn't define __round__ method", jv_type_name(v));
    }
    x = v.type == JV_FLOAT ? v.u.f : (double) v.u.i;
    if (method.u.s[0] != 'c' || method.u.s[1] == 'e') {
        /* ceil/floor: func(value * 10**precision) / 10**precision */
        p10 = pow(10.0, (double) prec);
        r = method.u.s[1] == 'e' ? ceil(x * p10) : floor(x * p10);
        return jv_float(r / p10);
    }
    if (v.type != JV_FLOAT) {
        /* round(int, n) stays an int */
        if (prec >= 0) {
            return jv_int(v.u.i);
        }
        p10 = pow(10.0, (double) -prec);
        r = (double) v.u.i / p10;
        r = nearbyint(r) * p10;     /* half-even, as Python does for ints */
        return jv_int((int64_t) r);
    }
    if (!isfinite(x)) {
        return v;
    }
    if (prec > 300) {
        return v;
    }
    if (prec >= 0) {
        snprintf(tmp, sizeof(tmp), "%.*f", (int) prec, x);
        return jv_float(strtod(tmp, NULL));
    }
    p10 = pow(10.0, (double) -prec);
    return jv_float(nearbyint(x / p10) * p10);
}


static jv
f_filesizeformat(jinja_vm *vm, jv v, jinja_args *a)
{
    BIND("filesizeformat", 0, "binary");
    static const char *const dec[] = { "kB", "MB", "GB", "TB", "PB", "EB", "ZB", "YB" };
    static const char *const bin[] = { "KiB", "MiB", "GiB", "TiB", "PiB", "EiB", "ZiB", "YiB" };
    int      binary = given_true(arg[0]), i;
    double   bytes, base = binary ? 1024 : 1000, unit = base;
    char     tmp[64];

    if (v.type == JV_STR) {
        if (!parse_float_str(vm, v, &bytes)) {
            jinja_fail(vm, "could not convert string to float");
        }
    } else if (v.type == JV_INT || v.type == JV_BOOL || v.type == JV_FLOAT) {
        bytes = v.type == JV_FLOAT ? v.u.f : (double) v.u.i;
    } else {
        jinja_fail(vm, "float() argument must be a string or a real number");
    }
    if (bytes == 1) {
        return jv_lit("1 Byte");
    }
    if (bytes < base) {
        snprintf(tmp, sizeof(tmp), "%lld Bytes", (long long) bytes);
        return jv_str_copy(vm, tmp, strlen(tmp));
    }
    for (i = 0; i < 8; i++) {
        unit = pow(base, i + 2);
        if (bytes < unit) {
            break;
        }
    }
    if (i == 8) {
        i = 7;
    }
    snprintf(tmp, sizeof(tmp), "%.1f %s", base * bytes / unit, binary ? bin[i] : dec[i]);
    return jv_str_copy(vm, tmp, strlen(tmp));
}


/* ------------------------------------------------------------------ sequences */

static jv
f_length(jinja_vm *vm, jv v, jinja_args *a)
{
    NO_ARGS("length");
    return jv_int(jv_length(vm, v));
}


static jv
f_list(jinja_vm *vm, jv v, jinja_args *a)
{
    jv_list  *l;
    jv        out;

    NO_ARGS("list");
    l = jv_iterate(vm, v);
    out = jv_list_new(vm, l->n);
    if (l->n) {
        memcpy(out.u.list->items, l->items, l->n * sizeof(jv));
    }
    out.u.list->n = l->n;
    return out;
}


static jv
f_first(jinja_vm *vm, jv v, jinja_args *a)
{
    jv_list  *l;

    NO_ARGS("first");
    if (v.type == JV_ITER && (v.u.iter->kind == JI_GENERATOR
                              || v.u.iter->kind == JI_REVERSED))
    {
        /* next(iter(gen)) takes one item only */
        jv_iter_force(vm, v.u.iter);
        if (v.u.iter->pos < v.u.iter->items->n) {
            return v.u.iter->items->items[v.u.iter->pos++];
        }
        return jv_undef_hint(vm, "No first item, sequence was empty.");
    }
    l = jv_iterate(vm, v);
    if (l->n == 0) {
        return jv_undef_hint(vm, "No first item, sequence was empty.");
    }
    return l->items[0];
}


static jv
f_last(jinja_vm *vm, jv v, jinja_args *a)
{
    jv_list  *l;

    NO_ARGS("last");
    switch (v.type) {
    case JV_LIST:
    case JV_TUPLE:
    case JV_STR:
    case JV_DICT:
    case JV_UNDEF:
        break;
    case JV_ITER:
        if (v.u.iter->kind == JI_GENERATOR || v.u.iter->kind == JI_REVERSED) {
            jinja_fail(vm, "'%s' object is not reversible", jv_type_name(v));
        }
        break;
    default:
        jinja_fail(vm, "'%s' object is not reversible", jv_type_name(v));
    }
    l = jv_iterate(vm, v);
    if (l->n == 0) {
        return jv_undef_hint(vm, "No last item, sequence was empty.");
    }
    return l->items[l->n - 1];
}


static jv
f_join(jinja_vm *vm, jv v, jinja_args *a)
{
    BIND("join", 0, "d", "attribute");
    jv_list   *l = jv_iterate(vm, v);
    jv         d = jv_given(arg[0]) ? jv_to_str(vm, arg[0]) : jv_lit("");
    jinja_buf  b = { 0 };
    size_t     i;

    for (i = 0; i < l->n; i++) {
        jv  item = l->items[i];

        if (jv_given(arg[1]) && arg[1].type != JV_NONE) {
            item = attr_path(vm, item, arg[1], jv_undef_plain(), 0);
        }
        if (i) {
            jinja_buf_add(vm, &b, d.u.s, d.len);
        }
        jv_write_str(vm, &b, item);
    }
    return jinja_buf_jv(&b);
}


static jv
f_reverse(jinja_vm *vm, jv v, jinja_args *a)
{
    jv_list  *l;
    jv        out;
    size_t    i;

    NO_ARGS("reverse");
    if (v.type == JV_STR) {
        return jinja_slice(vm, v, jv_none(), jv_none(), jv_int(-1));
    }
    if (v.type == JV_ITER && (v.u.iter->kind == JI_GENERATOR
                              || v.u.iter->kind == JI_DICT_VALUES))
    {
        /* not reversible: list(value) reversed */
        l = jv_iterate(vm, v);
        out = jv_list_new(vm, l->n);
        for (i = l->n; i > 0; i--) {
            jv_list_push(vm, out, l->items[i - 1]);
        }
        return out;
    }
    l = jv_iterate(vm, v);
    out = jv_list_new(vm, l->n);
    for (i = l->n; i > 0; i--) {
        jv_list_push(vm, out, l->items[i - 1]);
    }
    if (v.type == JV_DICT || v.type == JV_NS || v.type == JV_LOOP) {
        return out;
    }
    return jv_iter_new(vm, JI_REVERSED, out.u.list);
}


static jv
f_items_run(jinja_vm *vm, jv v, jinja_args *a)
{
    jv      l, t;
    size_t  i;

    NO_ARGS("items");
    if (v.type == JV_UNDEF) {
        return generator(vm, jv_list_new(vm, 0));
    }
    if (v.type != JV_DICT) {
        jinja_fail(vm, "Can only get item pairs from a mapping.");
    }
    l = jv_list_new(vm, v.u.dict->n);
    for (i = 0; i < v.u.dict->n; i++) {
        t = jv_tuple_new(vm, 2);
        jv_list_push(vm, t, v.u.dict->keys[i]);
        jv_list_push(vm, t, v.u.dict->vals[i]);
        jv_list_push(vm, l, t);
    }
    return generator(vm, l);
}


typedef struct {
    int     pos;            /* dictsort: 0 key, 1 value */
    int     lower;
    int     reverse;
    jv      attribute;
    jv     *keys;           /* sort: precomputed keys, parallel to items */
} sort_ctx;


static jv
sort_key(jinja_vm *vm, jv v, int lower)
{
    return lower && v.type == JV_STR ? jinja_str_case(vm, v, 'l') : v;
}


static int
cmp_records(jinja_vm *vm, const jv *x, const jv *y, void *ctx)
{
    sort_ctx  *c = ctx;
    int        r;

    /* records are (key, value): compare the key */
    r = jv_compare(vm, x[0], y[0], "<");
    if (r == 2) {
        r = 0;
    }
    return c->reverse ? -r : r;
}


static jv
f_dictsort(jinja_vm *vm, jv v, jinja_args *a)
{
    BIND("dictsort", 0, "case_sensitive", "by", "reverse");
    sort_ctx  c = { 0 };
    jv       *rec, out, t;
    size_t    i, n;

    if (jv_given(arg[1]) && !(arg[1].type == JV_STR && arg[1].len == 3
                              && memcmp(arg[1].u.s, "key", 3) == 0))
    {
        if (arg[1].type == JV_STR && arg[1].len == 5
            && memcmp(arg[1].u.s, "value", 5) == 0)
        {
            c.pos = 1;
        } else {
            jinja_fail(vm, "You can only sort by either \"key\" or \"value\"");
        }
    }
    c.lower = !given_true(arg[0]);
    c.reverse = given_true(arg[2]);
    if (v.type == JV_UNDEF) {
        jinja_fail_undefined(vm, v);
    }
    if (v.type != JV_DICT) {
        jinja_fail(vm, "'%s' object has no attribute 'items'", jv_type_name(v));
    }
    n = v.u.dict->n;
    rec = jinja_alloc(vm, (n ? n : 1) * 2 * sizeof(jv));
    for (i = 0; i < n; i++) {
        t = jv_tuple_new(vm, 2);
        jv_list_push(vm, t, v.u.dict->keys[i]);
        jv_list_push(vm, t, v.u.dict->vals[i]);
        rec[2 * i] = sort_key(vm, c.pos ? v.u.dict->vals[i] : v.u.dict->keys[i],
                              c.lower);
        rec[2 * i + 1] = t;
    }
    jinja_sort(vm, rec, n, 2, cmp_records, &c);
    out = jv_list_new(vm, n);
    for (i = 0; i < n; i++) {
        jv_list_push(vm, out, rec[2 * i + 1]);
    }
    return out;
}


/* The attribute list "a,b" of sort(attribute=...) as a key tuple. */
static jv
multi_key(jinja_vm *vm, jv item, jv attribute, int lower)
{
    jv      t;
    size_t  i, start;

    if (!jv_given(attribute) || attribute.type == JV_NONE) {
        t = jv_list_new(vm, 1);
        jv_list_push(vm, t, sort_key(vm, item, lower));
        return t;
    }
    t = jv_list_new(vm, 2);
    if (attribute.type != JV_STR) {
        jv_list_push(vm, t, attr_path(vm, item, attribute, jv_undef_plain(), lower));
        return t;
    }
    start = 0;
    for (i = 0; i <= attribute.len; i++) {
        if (i == attribute.len || attribute.u.s[i] == ',') {
            jv  part = jv_str(attribute.u.s + start, i - start);

            jv_list_push(vm, t, attr_path(vm, item, part, jv_undef_plain(), lower));
            start = i + 1;
        }
    }
    return t;
}


static jv
f_sort(jinja_vm *vm, jv v, jinja_args *a)
{
    BIND("sort", 0, "reverse", "case_sensitive", "attribute");
    sort_ctx   c = { 0 };
    jv_list   *l = jv_iterate(vm, v);
    jv        *rec, out;
    size_t     i;

    c.reverse = given_true(arg[0]);
    c.lower = !given_true(arg[1]);
    rec = jinja_alloc(vm, (l->n ? l->n : 1) * 2 * sizeof(jv));
    for (i = 0; i < l->n; i++) {
        rec[2 * i] = multi_key(vm, l->items[i], arg[2], c.lower);
        rec[2 * i + 1] = l->items[i];
    }
    jinja_sort(vm, rec, l->n, 2, cmp_records, &c);
    out = jv_list_new(vm, l->n);
    for (i = 0; i < l->n; i++) {
        jv_list_push(vm, out, rec[2 * i + 1]);
    }
    return out;
}


static jv
f_unique_run(jinja_vm *vm, jv v, jinja_args *a)
{
    BIND("unique", 0, "case_sensitive", "attribute");
    jv_list  *l = jv_iterate(vm, v);
    jv        out = jv_list_new(vm, l->n), seen = jv_dict_new(vm, l->n), key, dummy;
    size_t    i;
    int       lower = !given_true(arg[0]);

    for (i = 0; i < l->n; i++) {
        key = attr_path(vm, l->items[i], arg[1], jv_undef_plain(), lower);
        if (!jv_is_hashable(key)) {
            jinja_fail(vm, "unhashable type: '%s'", jv_type_name(key));
        }
        if (!jv_dict_get(seen, key, &dummy)) {
            jv_dict_set(vm, seen, key, jv_none());
            jv_list_push(vm, out, l->items[i]);
        }
    }
    return generator(vm, out);
}


static jv
min_max(jinja_vm *vm, jv v, jinja_args *a, const char *fname, int want_max)
{
    BIND(fname, 0, "case_sensitive", "attribute");
    jv_list  *l = jv_iterate(vm, v);
    size_t    i, best = 0;
    jv        bk, k;
    int       lower = !given_true(arg[0]), c;

    if (l->n == 0) {
        return jv_undef_hint(vm, "No aggregated item, sequence was empty.");
    }
    bk = attr_path(vm, l->items[0], arg[1], jv_undef_plain(), lower);
    for (i = 1; i < l->n; i++) {
        k = attr_path(vm, l->items[i], arg[1], jv_undef_plain(), lower);
        /* max keeps the first of equal items: replace only when strictly better */
        c = want_max ? jv_compare(vm, bk, k, "<") : jv_compare(vm, k, bk, "<");
        if (c == -1) {
            best = i;
            bk = k;
        }
    }
    return l->items[best];
}


static jv f_min(jinja_vm *vm, jv v, jinja_args *a) { return min_max(vm, v, a, "min", 0); }
static jv f_max(jinja_vm *vm, jv v, jinja_args *a) { return min_max(vm, v, a, "max", 1); }


static jv
f_sum(jinja_vm *vm, jv v, jinja_args *a)
{
    BIND("sum", 0, "attribute", "start");
    jv_list  *l = jv_iterate(vm, v);
    jv        total = jv_given(arg[1]) ? arg[1] : jv_int(0), item;
    size_t    i;

    for (i = 0; i < l->n; i++) {
        item = l->items[i];
        if (jv_given(arg[0]) && arg[0].type != JV_NONE) {
            item = attr_path(vm, item, arg[0], jv_undef_plain(), 0);
        }
        if (total.type == JV_STR) {
            jinja_fail(vm, "sum() can't sum strings [use ''.join(seq) instead]");
        }
        total = jinja_binop(vm, '+', total, item);
    }
    return total;
}


static jv
f_batch_run(jinja_vm *vm, jv v, jinja_args *a)
{
    BIND("batch", 1, "linecount", "fill_with");
    jv_list  *l = jv_iterate(vm, v);
    int64_t   count = jinja_arg_int(vm, "batch", arg[0]);
    jv        out = jv_list_new(vm, 0), cur = jv_list_new(vm, 0);
    size_t    i;

    for (i = 0; i < l->n; i++) {
        if ((int64_t) cur.u.list->n == count) {
            jv_list_push(vm, out, cur);
            cur = jv_list_new(vm, 0);
        }
        jv_list_push(vm, cur, l->items[i]);
    }
    if (cur.u.list->n) {
        if (jv_given(arg[1]) && arg[1].type != JV_NONE) {
            while ((int64_t) cur.u.list->n < count) {
                jv_list_push(vm, cur, arg[1]);
            }
        }
        jv_list_push(vm, out, cur);
    }
    return generator(vm, out);
}


static jv
f_slice_run(jinja_vm *vm, jv v, jinja_args *a)
{
    BIND("slice", 1, "slices", "fill_with");
    jv_list  *l = jv_iterate(vm, v);
    int64_t   slices = jinja_arg_int(vm, "slice", arg[0]), per, extra, offset = 0;
    int64_t   k, start, end, j, n = (int64_t) l->n;
    jv        out = jv_list_new(vm, 0), tmp;

    if (slices <= 0) {
        if (slices == 0) {
            jinja_fail(vm, "integer division or modulo by zero");
        }
        return generator(vm, out);
    }
    per = n / slices;
    extra = n % slices;
    for (k = 0; k < slices; k++) {
        start = offset + k * per;
        if (k < extra) {
            offset++;
        }
        end = offset + (k + 1) * per;
        tmp = jv_list_new(vm, 0);
        for (j = start; j < end; j++) {
            jv_list_push(vm, tmp, l->items[j]);
        }
        if (jv_given(arg[1]) && arg[1].type != JV_NONE && k >= extra) {
            jv_list_push(vm, tmp, arg[1]);
        }
        jv_list_push(vm, out, tmp);
    }
    return generator(vm, out);
}


static jv
f_groupby(jinja_vm *vm, jv v, jinja_args *a)
{
    BIND("groupby", 1, "attribute", "default", "case_sensitive");
    jv_list  *l = jv_iterate(vm, v);
    int       lower = !given_true(arg[2]);
    sort_ctx  c = { 0 };
    jv       *rec, out, group = jv_undef_plain(), t, key;
    size_t    i;

    rec = jinja_alloc(vm, (l->n ? l->n : 1) * 2 * sizeof(jv));
    for (i = 0; i < l->n; i++) {
        rec[2 * i] = attr_path(vm, l->items[i], arg[0], arg[1], lower);
        rec[2 * i + 1] = l->items[i];
    }
    jinja_sort(vm, rec, l->n, 2, cmp_records, &c);
    out = jv_list_new(vm, 0);
    for (i = 0; i < l->n; i++) {
        if (i == 0 || !jv_equal(vm, rec[2 * i], rec[2 * i - 2])) {
            group = jv_list_new(vm, 0);
            /* the key as written in the first item of the group */
            key = lower ? attr_path(vm, rec[2 * i + 1], arg[0], arg[1], 0) : rec[2 * i];
            t = jv_tuple_new(vm, 2);
            jv_list_push(vm, t, key);
            jv_list_push(vm, t, group);
            t.flags |= JV_GROUP;
            jv_list_push(vm, out, t);
        }
        jv_list_push(vm, group, rec[2 * i + 1]);
    }
    return out;
}


/* ------------------------------------------------------------------ map / select */

static jv
f_map_run(jinja_vm *vm, jv v, jinja_args *a)
{
    jv_list     *l;
    jv           out = jv_list_new(vm, 0), attr = jv_undef_plain(), dflt = jv_undef_plain();
    jinja_args   rest;
    size_t       i, k;
    int          by_attr = 0;

    if (!jv_truthy(v)) {
        return generator(vm, out);      /* "if value:" guards the generator */
    }
    if (a->npos == 0) {
        for (k = 0; k < a->nkw; k++) {
            if (a->kw[k].len == 9 && memcmp(a->kw[k].name, "attribute", 9) == 0) {
                attr = a->kw[k].val;
                by_attr = 1;
            } else if (a->kw[k].len == 7 && memcmp(a->kw[k].name, "default", 7) == 0) {
                dflt = a->kw[k].val;
            } else {
                jinja_fail(vm, "Unexpected keyword argument '%.*s'",
                           (int) a->kw[k].len, a->kw[k].name);
            }
        }
        if (!by_attr) {
            jinja_fail(vm, "map requires a filter argument");
        }
    } else if (a->pos[0].type != JV_STR) {
        jinja_fail(vm, "map requires a filter name");
    }
    l = jv_iterate(vm, v);
    for (i = 0; i < l->n; i++) {
        if (by_attr) {
            jv_list_push(vm, out, attr_path(vm, l->items[i], attr,
                                            jv_given(dflt) ? dflt : jv_undef_plain(), 0));
        } else {
            rest.pos = a->pos + 1;
            rest.npos = a->npos - 1;
            rest.kw = a->kw;
            rest.nkw = a->nkw;
            jv_list_push(vm, out, jinja_call_filter(vm, a->pos[0].u.s, a->pos[0].len,
                                                    l->items[i], &rest));
        }
    }
    return generator(vm, out);
}


static jv
select_reject(jinja_vm *vm, jv v, jinja_args *a, int by_attr, int reject)
{
    jv_list     *l;
    jv           out = jv_list_new(vm, 0), item;
    jinja_args   rest;
    size_t       i, off = by_attr ? 1 : 0;
    int          ok;

    if (!jv_truthy(v)) {
        return generator(vm, out);
    }
    if (by_attr && a->npos < 1) {
        jinja_fail(vm, "Missing parameter for attribute name");
    }
    l = jv_iterate(vm, v);
    for (i = 0; i < l->n; i++) {
        item = l->items[i];
        if (by_attr) {
            item = attr_path(vm, item, a->pos[0], jv_undef_plain(), 0);
        }
        if (a->npos > off) {
            if (a->pos[off].type != JV_STR) {
                jinja_fail(vm, "the test name must be a string");
            }
            rest.pos = a->pos + off + 1;
            rest.npos = a->npos - off - 1;
            rest.kw = a->kw;
            rest.nkw = a->nkw;
            ok = jinja_call_test(vm, a->pos[off].u.s, a->pos[off].len, item, &rest);
        } else {
            ok = jv_truthy(item);
        }
        if (ok != reject) {
            jv_list_push(vm, out, l->items[i]);
        }
    }
    return generator(vm, out);
}


static jv f_select_run(jinja_vm *vm, jv v, jinja_args *a) { return select_reject(vm, v, a, 0, 0); }
static jv f_reject_run(jinja_vm *vm, jv v, jinja_args *a) { return select_reject(vm, v, a, 0, 1); }
static jv f_selectattr_run(jinja_vm *vm, jv v, jinja_args *a) { return select_reject(vm, v, a, 1, 0); }
static jv f_rejectattr_run(jinja_vm *vm, jv v, jinja_args *a) { return select_reject(vm, v, a, 1, 1); }


/* jinja2 writes these filters as generator functions: calling one runs
 * nothing until the result is iterated. */
#define LAZY(name) \
    static jv name(jinja_vm *vm, jv v, jinja_args *a) \
    { return jv_lazy_new(vm, name##_run, v, a); }

LAZY(f_items)
LAZY(f_unique)
LAZY(f_batch)
LAZY(f_slice)
LAZY(f_map)
LAZY(f_select)
LAZY(f_reject)
LAZY(f_selectattr)
LAZY(f_rejectattr)


/* ------------------------------------------------------------------ misc */

static jv
f_default(jinja_vm *vm, jv v, jinja_args *a)
{
    BIND("default", 0, "default_value", "boolean");
    jv  dflt = jv_given(arg[0]) ? arg[0] : jv_lit("");

    if (v.type == JV_UNDEF || (given_true(arg[1]) && !jv_truthy(v))) {
        return dflt;
    }
    return v;
}


static jv
f_attr(jinja_vm *vm, jv v, jinja_args *a)
{
    BIND("attr", 1, "name");

    if (v.type == JV_UNDEF) {
        jinja_fail_undefined(vm, v);
    }
    if (arg[0].type != JV_STR) {
        jinja_fail(vm, "attribute name must be string");
    }
    if (v.type == JV_DICT) {
        int  found;
        jv   m = jinja_method_lookup(vm, v, arg[0].u.s, arg[0].len, &found);

        return found ? m : jv_undef_attr(vm, v, arg[0].u.s, arg[0].len);
    }
    return jinja_getattr(vm, v, arg[0].u.s, arg[0].len);
}


/* transformers' tojson: json.dumps(x, ensure_ascii=False, indent=None,
 * separators=None, sort_keys=False), all four overridable. */
static jv
f_tojson(jinja_vm *vm, jv v, jinja_args *a)
{
    BIND("tojson", 0, "ensure_ascii", "indent", "separators", "sort_keys");
    jinja_json_opts  o;
    jinja_buf        b = { 0 }, ind = { 0 };
    int64_t          k;

    memset(&o, 0, sizeof(o));
    o.ensure_ascii = given_true(arg[0]);
    o.sort_keys = given_true(arg[3]);
    if (jv_given(arg[1]) && arg[1].type != JV_NONE) {
        if (arg[1].type == JV_STR) {
            o.indent = arg[1].u.s;
            o.indent_len = arg[1].len;
        } else {
            for (k = jinja_arg_int(vm, "tojson", arg[1]); k > 0; k--) {
                jinja_buf_addc(vm, &ind, ' ');
            }
            o.indent = ind.p ? ind.p : "";
            o.indent_len = ind.len;
        }
    }
    o.item_sep = o.indent ? "," : ", ";
    o.item_sep_len = o.indent ? 1 : 2;
    o.key_sep = ": ";
    o.key_sep_len = 2;
    if (jv_given(arg[2]) && arg[2].type != JV_NONE) {
        jv_list  *sep = jv_iterate(vm, arg[2]);

        if (sep->n != 2 || sep->items[0].type != JV_STR
            || sep->items[1].type != JV_STR)
        {
            jinja_fail(vm, "tojson(): separators must be a pair of strings");
        }
        o.item_sep = sep->items[0].u.s;
        o.item_sep_len = sep->items[0].len;
        o.key_sep = sep->items[1].u.s;
        o.key_sep_len = sep->items[1].len;
    }
    jv_write_json(vm, &b, v, &o, 0);
    return jinja_buf_jv(&b);
}


static jv
f_unsupported(jinja_vm *vm, jv v, jinja_args *a)
{
    jinja_fail(vm, "this filter is not supported in chat templates");
}


static const struct {
    const char       *name;
    jinja_filter_fn   fn;
} jinja_filters[] = {
    { "abs", f_abs }, { "attr", f_attr }, { "batch", f_batch },
    { "capitalize", f_capitalize }, { "center", f_center },
    { "count", f_length }, { "d", f_default }, { "default", f_default },
    { "dictsort", f_dictsort }, { "e", f_escape }, { "escape", f_escape },
    { "filesizeformat", f_filesizeformat }, { "first", f_first },
    { "float", f_float }, { "forceescape", f_forceescape },
    { "format", f_format }, { "groupby", f_groupby }, { "indent", f_indent },
    { "int", f_int }, { "items", f_items }, { "join", f_join },
    { "last", f_last }, { "length", f_length }, { "list", f_list },
    { "lower", f_lower }, { "map", f_map }, { "max", f_max }, { "min", f_min },
    { "pprint", f_unsupported }, { "random", f_unsupported },
    { "reject", f_reject }, { "rejectattr", f_rejectattr },
    { "replace", f_replace }, { "reverse", f_reverse }, { "round", f_round },
    { "safe", f_safe }, { "select", f_select }, { "selectattr", f_selectattr },
    { "slice", f_slice }, { "sort", f_sort }, { "string", f_string },
    { "striptags", f_unsupported }, { "sum", f_sum }, { "title", f_title },
    { "tojson", f_tojson }, { "trim", f_trim }, { "truncate", f_truncate },
    { "unique", f_unique }, { "upper", f_upper },
    { "urlencode", f_unsupported }, { "urlize", f_unsupported },
    { "wordcount", f_wordcount }, { "wordwrap", f_unsupported },
    { "xmlattr", f_unsupported },
};


/* jinja2's @pass_context filters: never folded at compile time. */
int
jinja_filter_needs_context(jinja_filter_fn f)
{
    return f == f_map || f == f_select || f == f_reject || f == f_selectattr
           || f == f_rejectattr || f == f_unsupported;
}


jinja_filter_fn
jinja_filter_lookup(const char *name, size_t len, int *known)
{
    size_t  i;

    for (i = 0; i < sizeof(jinja_filters) / sizeof(jinja_filters[0]); i++) {
        if (strlen(jinja_filters[i].name) == len
            && memcmp(jinja_filters[i].name, name, len) == 0)
        {
            *known = 1;
            return jinja_filters[i].fn;
        }
    }
    *known = 0;
    return NULL;
}


jv
jinja_call_filter(jinja_vm *vm, const char *name, size_t len, jv value,
    jinja_args *a)
{
    int              known;
    jinja_filter_fn  f = jinja_filter_lookup(name, len, &known);

    if (f == NULL) {
        jinja_fail(vm, "No filter named '%.*s'.", (int) len, name);
    }
    return f(vm, value, a);
}


/* ------------------------------------------------------------------ tests */

static jv
one_arg(jinja_vm *vm, jinja_args *a, const char *tname)
{
    if (a->npos + a->nkw != 1) {
        jinja_fail(vm, "test '%s' takes one argument", tname);
    }
    return a->npos ? a->pos[0] : a->kw[0].val;
}


static void
no_test_args(jinja_vm *vm, jinja_args *a, const char *tname)
{
    if (a->npos || a->nkw) {
        jinja_fail(vm, "test '%s' takes no arguments", tname);
    }
}


static int64_t
mod_of(jinja_vm *vm, jv v, jv m)
{
    jv  r = jinja_binop(vm, '%', v, m);

    return r.type == JV_FLOAT ? (r.u.f != 0.0 ? (r.u.f == 1.0 ? 1 : 2) : 0) : r.u.i;
}


static int t_odd(jinja_vm *vm, jv v, jinja_args *a)
{ no_test_args(vm, a, "odd"); return mod_of(vm, v, jv_int(2)) == 1; }
static int t_even(jinja_vm *vm, jv v, jinja_args *a)
{ no_test_args(vm, a, "even"); return mod_of(vm, v, jv_int(2)) == 0; }
static int t_divisibleby(jinja_vm *vm, jv v, jinja_args *a)
{ return mod_of(vm, v, one_arg(vm, a, "divisibleby")) == 0; }
static int t_defined(jinja_vm *vm, jv v, jinja_args *a)
{ no_test_args(vm, a, "defined"); return v.type != JV_UNDEF; }
static int t_undefined(jinja_vm *vm, jv v, jinja_args *a)
{ no_test_args(vm, a, "undefined"); return v.type == JV_UNDEF; }
static int t_none(jinja_vm *vm, jv v, jinja_args *a)
{ no_test_args(vm, a, "none"); return v.type == JV_NONE; }
static int t_boolean(jinja_vm *vm, jv v, jinja_args *a)
{ no_test_args(vm, a, "boolean"); return v.type == JV_BOOL; }
static int t_false(jinja_vm *vm, jv v, jinja_args *a)
{ no_test_args(vm, a, "false"); return v.type == JV_BOOL && !v.u.i; }
static int t_true(jinja_vm *vm, jv v, jinja_args *a)
{ no_test_args(vm, a, "true"); return v.type == JV_BOOL && v.u.i; }
static int t_integer(jinja_vm *vm, jv v, jinja_args *a)
{ no_test_args(vm, a, "integer"); return v.type == JV_INT; }
static int t_float(jinja_vm *vm, jv v, jinja_args *a)
{ no_test_args(vm, a, "float"); return v.type == JV_FLOAT; }
static int t_string(jinja_vm *vm, jv v, jinja_args *a)
{ no_test_args(vm, a, "string"); return v.type == JV_STR; }
static int t_mapping(jinja_vm *vm, jv v, jinja_args *a)
{ no_test_args(vm, a, "mapping"); return v.type == JV_DICT; }
static int t_number(jinja_vm *vm, jv v, jinja_args *a)
{ no_test_args(vm, a, "number");
  return v.type == JV_INT || v.type == JV_FLOAT || v.type == JV_BOOL; }
static int t_escaped(jinja_vm *vm, jv v, jinja_args *a)
{ no_test_args(vm, a, "escaped"); return v.type == JV_STR && (v.flags & JV_SAFE); }


static int
t_sequence(jinja_vm *vm, jv v, jinja_args *a)
{
    no_test_args(vm, a, "sequence");
    switch (v.type) {
    case JV_UNDEF:
    case JV_STR:
    case JV_LIST:
    case JV_TUPLE:
    case JV_DICT:
    case JV_LOOP:
        return 1;
    case JV_ITER:
        return v.u.iter->kind == JI_RANGE;
    default:
        return 0;
    }
}


static int
t_iterable(jinja_vm *vm, jv v, jinja_args *a)
{
    no_test_args(vm, a, "iterable");
    switch (v.type) {
    case JV_UNDEF:
    case JV_STR:
    case JV_LIST:
    case JV_TUPLE:
    case JV_DICT:
    case JV_ITER:
    case JV_LOOP:
        return 1;
    default:
        return 0;
    }
}


static int
t_callable(jinja_vm *vm, jv v, jinja_args *a)
{
    no_test_args(vm, a, "callable");
    return v.type == JV_FUNC || v.type == JV_LOOP
           || (v.type == JV_OBJ && v.u.obj->kind == JO_JOINER)
           || v.type == JV_UNDEF;      /* Undefined defines __call__ (to fail) */
}


static int
t_lower(jinja_vm *vm, jv v, jinja_args *a)
{
    jv          s = jv_to_str(vm, v);
    jinja_args  none = { 0 };
    int         found;
    jv          m;

    no_test_args(vm, a, "lower");
    m = jinja_method_lookup(vm, s, "islower", 7, &found);
    return jv_truthy(jinja_call(vm, m, &none));
}


static int
t_upper(jinja_vm *vm, jv v, jinja_args *a)
{
    jv          s = jv_to_str(vm, v);
    jinja_args  none = { 0 };
    int         found;
    jv          m;

    no_test_args(vm, a, "upper");
    m = jinja_method_lookup(vm, s, "isupper", 7, &found);
    return jv_truthy(jinja_call(vm, m, &none));
}


static int
t_sameas(jinja_vm *vm, jv v, jinja_args *a)
{
    jv  o = one_arg(vm, a, "sameas");

    /* identity: singletons and small ints behave as in CPython */
    if (v.type != o.type) {
        return 0;
    }
    switch (v.type) {
    case JV_NONE:
        return 1;
    case JV_BOOL:
        return v.u.i == o.u.i;
    case JV_INT:
        return v.u.i == o.u.i && v.u.i >= -5 && v.u.i <= 256;
    case JV_STR:
        return v.u.s == o.u.s && v.len == o.len;
    case JV_UNDEF:
        return v.u.undef == o.u.undef && v.u.undef != NULL;
    default:
        return v.u.s == o.u.s;
    }
}


static int
t_in(jinja_vm *vm, jv v, jinja_args *a)
{
    return jinja_contains(vm, one_arg(vm, a, "in"), v);
}


static int
t_filter(jinja_vm *vm, jv v, jinja_args *a)
{
    int  known = 0;

    no_test_args(vm, a, "filter");
    if (v.type == JV_STR) {
        jinja_filter_lookup(v.u.s, v.len, &known);
    }
    return known;
}


static int
t_test(jinja_vm *vm, jv v, jinja_args *a)
{
    int  known = 0;

    no_test_args(vm, a, "test");
    if (v.type == JV_STR) {
        jinja_test_lookup(v.u.s, v.len, &known);
    }
    return known;
}


static int
cmp_test(jinja_vm *vm, jv v, jinja_args *a, int op)
{
    jv   o = one_arg(vm, a, "comparison");
    int  c;

    switch (op) {
    case 'e': return jv_equal(vm, v, o);
    case 'n': return !jv_equal(vm, v, o);
    }
    c = jv_compare(vm, v, o, op == '<' ? "<" : op == 'l' ? "<=" : op == '>' ? ">" : ">=");
    if (c == 2) {
        return 0;
    }
    return op == '<' ? c < 0 : op == 'l' ? c <= 0 : op == '>' ? c > 0 : c >= 0;
}


static int t_eq(jinja_vm *vm, jv v, jinja_args *a) { return cmp_test(vm, v, a, 'e'); }
static int t_ne(jinja_vm *vm, jv v, jinja_args *a) { return cmp_test(vm, v, a, 'n'); }
static int t_lt(jinja_vm *vm, jv v, jinja_args *a) { return cmp_test(vm, v, a, '<'); }
static int t_le(jinja_vm *vm, jv v, jinja_args *a) { return cmp_test(vm, v, a, 'l'); }
static int t_gt(jinja_vm *vm, jv v, jinja_args *a) { return cmp_test(vm, v, a, '>'); }
static int t_ge(jinja_vm *vm, jv v, jinja_args *a) { return cmp_test(vm, v, a, 'g'); }


static const struct {
    const char     *name;
    jinja_test_fn   fn;
} jinja_tests[] = {
    { "odd", t_odd }, { "even", t_even }, { "divisibleby", t_divisibleby },
    { "defined", t_defined }, { "undefined", t_undefined },
    { "filter", t_filter }, { "test", t_test }, { "none", t_none },
    { "boolean", t_boolean }, { "false", t_false }, { "true", t_true },
    { "integer", t_integer }, { "float", t_float }, { "lower", t_lower },
    { "upper", t_upper }, { "string", t_string }, { "mapping", t_mapping },
    { "number", t_number }, { "sequence", t_sequence },
    { "iterable", t_iterable }, { "callable", t_callable },
    { "sameas", t_sameas }, { "escaped", t_escaped }, { "in", t_in },
    { "==", t_eq }, { "eq", t_eq }, { "equalto", t_eq },
    { "!=", t_ne }, { "ne", t_ne },
    { ">", t_gt }, { "gt", t_gt }, { "greaterthan", t_gt },
    { ">=", t_ge }, { "ge", t_ge },
    { "<", t_lt }, { "lt", t_lt }, { "lessthan", t_lt },
    { "<=", t_le }, { "le", t_le },
};


jinja_test_fn
jinja_test_lookup(const char *name, size_t len, int *known)
{
    size_t  i;

    for (i = 0; i < sizeof(jinja_tests) / sizeof(jinja_tests[0]); i++) {
        if (strlen(jinja_tests[i].name) == len
            && memcmp(jinja_tests[i].name, name, len) == 0)
        {
            *known = 1;
            return jinja_tests[i].fn;
        }
    }
    *known = 0;
    return NULL;
}


int
jinja_call_test(jinja_vm *vm, const char *name, size_t len, jv value,
    jinja_args *a)
{
    int            known;
    jinja_test_fn  t = jinja_test_lookup(name, len, &known);

    if (t == NULL) {
        jinja_fail(vm, "No test named '%.*s'.", (int) len, name);
    }
    return t(vm, value, a);
}
