/*
 * jinja_methods.c -- methods of Python's str, dict and list that templates
 * call ("x".startswith(...), message.get("content"), ids.pop(0)), plus
 * str.format() with the format-spec mini-language and printf-style "%".
 *
 * Methods that would mutate a dict, or append/insert/extend/remove/sort/
 * reverse a list, are refused exactly as ImmutableSandboxedEnvironment
 * refuses them: the attribute is an Undefined that raises a SecurityError
 * when called.  list.pop() and list.clear() are not in jinja2's list of
 * mutating methods, so they work (and mutate) as in jinja2.
 */
#define _GNU_SOURCE         /* memmem() */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "jinja.h"


typedef struct {
    const char       *name;
    jinja_method_fn   fn;           /* NULL: exists in Python, not supported */
    int               unsafe;
} jinja_method_def;


static jv
method_unsupported(jinja_vm *vm, jv self, jinja_args *a)
{
    jinja_fail(vm, "this %s method is not supported in chat templates",
               jv_type_name(self));
}


static jv
arg_str(jinja_vm *vm, const char *fname, jv v)
{
    if (v.type != JV_STR) {
        if (v.type == JV_UNDEF) {
            jinja_fail_undefined(vm, v);
        }
        jinja_fail(vm, "%s() argument must be str, not %s", fname,
                   jv_type_name(v));
    }
    return v;
}


/* ------------------------------------------------------------------ code points */

typedef struct {
    uint32_t  *cp;
    size_t    *off;     /* byte offset of each code point, off[n] = len */
    size_t     n;
} jinja_cps;


static jinja_cps
cps_of(jinja_vm *vm, jv s)
{
    jinja_cps  c;
    size_t     i = 0, k = 0;

    c.cp = jinja_alloc(vm, (s.len + 1) * sizeof(uint32_t));
    c.off = jinja_alloc(vm, (s.len + 1) * sizeof(size_t));
    while (i < s.len) {
        c.off[k] = i;
        c.cp[k++] = (uint32_t) ju_decode(s.u.s, s.len, &i);
    }
    c.off[k] = s.len;
    c.n = k;
    return c;
}


static void
buf_cp(jinja_vm *vm, jinja_buf *b, uint32_t cp)
{
    char    tmp[4];
    size_t  n = ju_encode(cp, tmp);

    jinja_buf_add(vm, b, tmp, n);
}


static jv
keep_safe(jv result, jv from)
{
    result.flags = from.flags & JV_SAFE;
    return result;
}


/* ------------------------------------------------------------------ case */

/* Is cps[i] a capital sigma at the end of a word (Python's final_sigma)? */
static int
final_sigma(jinja_cps *c, size_t i)
{
    size_t  j;

    for (j = i; j > 0; j--) {
        uint32_t  p = c->cp[j - 1];

        if (ju_iscased(p)) {
            break;
        }
        if (!(p == '\'' || p == 0x2019 || p == 0xad || (p >= 0x300 && p < 0x370))) {
            return 0;
        }
    }
    if (j == 0) {
        return 0;
    }
    for (j = i + 1; j < c->n; j++) {
        uint32_t  p = c->cp[j];

        if (ju_iscased(p)) {
            return 0;
        }
        if (!(p == '\'' || p == 0x2019 || p == 0xad || (p >= 0x300 && p < 0x370))) {
            return 1;
        }
    }
    return 1;
}


static void
add_lower(jinja_vm *vm, jinja_buf *b, jinja_cps *c, size_t i)
{
    uint32_t  m[3];
    size_t    k, n;

    if (c->cp[i] == 0x3a3) {
        buf_cp(vm, b, final_sigma(c, i) ? 0x3c2 : 0x3c3);
        return;
    }
    n = ju_lower(c->cp[i], m);
    for (k = 0; k < n; k++) {
        buf_cp(vm, b, m[k]);
    }
}


static void
add_mapped(jinja_vm *vm, jinja_buf *b, uint32_t cp,
    size_t (*map)(uint32_t, uint32_t[3]))
{
    uint32_t  m[3];
    size_t    k, n = map(cp, m);

    for (k = 0; k < n; k++) {
        buf_cp(vm, b, m[k]);
    }
}


/* mode: 'u' upper, 'l' lower, 't' title, 'c' capitalize, 's' swapcase */
jv
jinja_str_case(jinja_vm *vm, jv s, int mode)
{
    jinja_buf  b = { 0 };
    jinja_cps  c;
    size_t     i;
    int        prev_cased = 0, ascii = 1;

    for (i = 0; i < s.len; i++) {
        if ((unsigned char) s.u.s[i] >= 0x80) {
            ascii = 0;
            break;
        }
    }
    if (ascii && (mode == 'u' || mode == 'l')) {
        char  *p = jinja_alloc(vm, s.len ? s.len : 1);

        for (i = 0; i < s.len; i++) {
            char  ch = s.u.s[i];

            if (mode == 'u' && ch >= 'a' && ch <= 'z') {
                ch -= 32;
            } else if (mode == 'l' && ch >= 'A' && ch <= 'Z') {
                ch += 32;
            }
            p[i] = ch;
        }
        return keep_safe(jv_str(p, s.len), s);
    }
    c = cps_of(vm, s);
    for (i = 0; i < c.n; i++) {
        uint32_t  cp = c.cp[i];

        switch (mode) {
        case 'u':
            add_mapped(vm, &b, cp, ju_upper);
            break;
        case 'l':
            add_lower(vm, &b, &c, i);
            break;
        case 't':
            if (prev_cased) {
                add_lower(vm, &b, &c, i);
            } else {
                add_mapped(vm, &b, cp, ju_title);
            }
            prev_cased = ju_iscased(cp);
            break;
        case 'c':
            if (i == 0) {
                add_mapped(vm, &b, cp, ju_title);
            } else {
                add_lower(vm, &b, &c, i);
            }
            break;
        default:
            if (ju_isupper(cp)) {
                add_lower(vm, &b, &c, i);
            } else if (ju_islower(cp)) {
                add_mapped(vm, &b, cp, ju_upper);
            } else {
                buf_cp(vm, &b, cp);
            }
        }
    }
    return keep_safe(jinja_buf_jv(&b), s);
}


/* ------------------------------------------------------------------ strip, split */

static int
in_chars(jinja_cps *chars, uint32_t cp)
{
    size_t  i;

    if (chars == NULL) {
        return ju_isspace(cp);
    }
    for (i = 0; i < chars->n; i++) {
        if (chars->cp[i] == cp) {
            return 1;
        }
    }
    return 0;
}


jv
jinja_str_strip(jinja_vm *vm, jv s, jv chars, int left, int right)
{
    jinja_cps   set, *setp = NULL;
    size_t      start = 0, end = s.len, i, prev;

    if (chars.type == JV_STR) {
        set = cps_of(vm, chars);
        setp = &set;
    } else if (jv_given(chars) && chars.type != JV_NONE) {
        if (chars.type == JV_UNDEF) {
            jinja_fail_undefined(vm, chars);
        }
        jinja_fail(vm, "strip arg must be None or str");
    }
    if (left) {
        while (start < end) {
            i = start;
            if (!in_chars(setp, (uint32_t) ju_decode(s.u.s, s.len, &i))) {
                break;
            }
            start = i;
        }
    }
    if (right) {
        while (end > start) {
            prev = end - 1;
            while (prev > start && ((unsigned char) s.u.s[prev] & 0xc0) == 0x80) {
                prev--;
            }
            i = prev;
            if (!in_chars(setp, (uint32_t) ju_decode(s.u.s, s.len, &i))) {
                break;
            }
            end = prev;
        }
    }
    return keep_safe(jv_str(s.u.s + start, end - start), s);
}


static const char *
find_bytes(const char *h, size_t hlen, const char *n, size_t nlen)
{
    if (nlen == 0) {
        return h;
    }
    return memmem(h, hlen, n, nlen);
}


static const char *
rfind_bytes(const char *h, size_t hlen, const char *n, size_t nlen)
{
    size_t  i;

    if (nlen > hlen) {
        return NULL;
    }
    for (i = hlen - nlen + 1; i > 0; i--) {
        if (memcmp(h + i - 1, n, nlen) == 0) {
            return h + i - 1;
        }
    }
    return NULL;
}


static jv
piece(jv s, size_t start, size_t end)
{
    return keep_safe(jv_str(s.u.s + start, end - start), s);
}


/* Whitespace split, from the left or the right. */
static jv
split_ws(jinja_vm *vm, jv s, int64_t maxsplit, int right)
{
    jv          out = jv_list_new(vm, 0), tmp;
    jinja_cps   c = cps_of(vm, s);
    size_t      i, j, n = c.n;
    int64_t     splits = 0;

    if (!right) {
        i = 0;
        for (;;) {
            while (i < n && ju_isspace(c.cp[i])) {
                i++;
            }
            if (i >= n) {
                break;
            }
            if (maxsplit >= 0 && splits == maxsplit) {
                /* the rest, with trailing whitespace kept */
                jv_list_push(vm, out, piece(s, c.off[i], c.off[n]));
                break;
            }
            j = i;
            while (j < n && !ju_isspace(c.cp[j])) {
                j++;
            }
            jv_list_push(vm, out, piece(s, c.off[i], c.off[j]));
            splits++;
            i = j;
        }
        return out;
    }
    i = n;
    for (;;) {
        while (i > 0 && ju_isspace(c.cp[i - 1])) {
            i--;
        }
        if (i == 0) {
            break;
        }
        if (maxsplit >= 0 && splits == maxsplit) {
            jv_list_push(vm, out, piece(s, c.off[0], c.off[i]));
            break;
        }
        j = i;
        while (j > 0 && !ju_isspace(c.cp[j - 1])) {
            j--;
        }
        jv_list_push(vm, out, piece(s, c.off[j], c.off[i]));
        splits++;
        i = j;
    }
    /* reverse into order */
    tmp = jv_list_new(vm, out.u.list->n);
    for (i = out.u.list->n; i > 0; i--) {
        jv_list_push(vm, tmp, out.u.list->items[i - 1]);
    }
    return tmp;
}


jv
jinja_str_split(jinja_vm *vm, jv s, jv sep, int64_t maxsplit, int right)
{
    jv           out, tmp;
    const char  *p, *end = s.u.s + s.len, *hit;
    size_t       i, hlen;
    int64_t      splits = 0;

    if (!jv_given(sep) || sep.type == JV_NONE) {
        return split_ws(vm, s, maxsplit, right);
    }
    sep = arg_str(vm, "split", sep);
    if (sep.len == 0) {
        jinja_fail(vm, "empty separator");
    }
    out = jv_list_new(vm, 0);
    if (!right) {
        p = s.u.s;
        while ((maxsplit < 0 || splits < maxsplit)
               && (hit = find_bytes(p, (size_t) (end - p), sep.u.s, sep.len)))
        {
            jv_list_push(vm, out, keep_safe(jv_str(p, (size_t) (hit - p)), s));
            p = hit + sep.len;
            splits++;
        }
        jv_list_push(vm, out, keep_safe(jv_str(p, (size_t) (end - p)), s));
        return out;
    }
    hlen = s.len;
    while ((maxsplit < 0 || splits < maxsplit)
           && (hit = rfind_bytes(s.u.s, hlen, sep.u.s, sep.len)))
    {
        jv_list_push(vm, out, keep_safe(jv_str(hit + sep.len,
                        hlen - (size_t) (hit - s.u.s) - sep.len), s));
        hlen = (size_t) (hit - s.u.s);
        splits++;
    }
    jv_list_push(vm, out, keep_safe(jv_str(s.u.s, hlen), s));
    tmp = jv_list_new(vm, out.u.list->n);
    for (i = out.u.list->n; i > 0; i--) {
        jv_list_push(vm, tmp, out.u.list->items[i - 1]);
    }
    return tmp;
}


jv
jinja_str_splitlines(jinja_vm *vm, jv s, int keepends)
{
    jv          out = jv_list_new(vm, 0);
    jinja_cps   c = cps_of(vm, s);
    size_t      i = 0, start = 0, eol;

    while (i < c.n) {
        if (!ju_islinebreak(c.cp[i])) {
            i++;
            continue;
        }
        eol = i;
        if (c.cp[i] == '\r' && i + 1 < c.n && c.cp[i + 1] == '\n') {
            i += 2;
        } else {
            i++;
        }
        jv_list_push(vm, out, piece(s, c.off[start], c.off[keepends ? i : eol]));
        start = i;
    }
    if (start < c.n) {
        jv_list_push(vm, out, piece(s, c.off[start], c.off[c.n]));
    }
    return out;
}


jv
jinja_str_replace(jinja_vm *vm, jv s, jv old, jv new_, int64_t count)
{
    jinja_buf    b = { 0 };
    const char  *p = s.u.s, *end = s.u.s + s.len, *hit;
    size_t       i;
    int64_t      done = 0;

    if (old.len == 0) {
        /* insert between characters, and at both ends */
        i = 0;
        while (count < 0 || done < count) {
            jinja_buf_add(vm, &b, new_.u.s, new_.len);
            done++;
            if (i >= s.len) {
                break;
            }
            {
                size_t  j = i;

                ju_decode(s.u.s, s.len, &j);
                jinja_buf_add(vm, &b, s.u.s + i, j - i);
                i = j;
            }
        }
        jinja_buf_add(vm, &b, s.u.s + i, s.len - i);
        return jinja_buf_jv(&b);
    }
    while ((count < 0 || done < count)
           && (hit = find_bytes(p, (size_t) (end - p), old.u.s, old.len)))
    {
        jinja_buf_add(vm, &b, p, (size_t) (hit - p));
        jinja_buf_add(vm, &b, new_.u.s, new_.len);
        p = hit + old.len;
        done++;
    }
    if (done == 0) {
        return jv_str(s.u.s, s.len);
    }
    jinja_buf_add(vm, &b, p, (size_t) (end - p));
    return jinja_buf_jv(&b);
}


/* ------------------------------------------------------------------ str methods */

#define BIND(fname, ...) \
    static const char *const names_[] = { __VA_ARGS__ }; \
    jv arg[sizeof(names_) / sizeof(names_[0])]; \
    jinja_bind(vm, fname, a, names_, sizeof(names_) / sizeof(names_[0]), 0, arg)

#define BIND_REQ(fname, nreq, ...) \
    static const char *const names_[] = { __VA_ARGS__ }; \
    jv arg[sizeof(names_) / sizeof(names_[0])]; \
    jinja_bind(vm, fname, a, names_, sizeof(names_) / sizeof(names_[0]), nreq, arg)

static void
no_args(jinja_vm *vm, const char *fname, jinja_args *a)
{
    if (a->npos || a->nkw) {
        jinja_fail(vm, "%s() takes no arguments", fname);
    }
}


static jv m_upper(jinja_vm *vm, jv s, jinja_args *a)
{ no_args(vm, "upper", a); return jinja_str_case(vm, s, 'u'); }
static jv m_lower(jinja_vm *vm, jv s, jinja_args *a)
{ no_args(vm, "lower", a); return jinja_str_case(vm, s, 'l'); }
static jv m_title(jinja_vm *vm, jv s, jinja_args *a)
{ no_args(vm, "title", a); return jinja_str_case(vm, s, 't'); }
static jv m_capitalize(jinja_vm *vm, jv s, jinja_args *a)
{ no_args(vm, "capitalize", a); return jinja_str_case(vm, s, 'c'); }
static jv m_swapcase(jinja_vm *vm, jv s, jinja_args *a)
{ no_args(vm, "swapcase", a); return jinja_str_case(vm, s, 's'); }


static jv
m_strip(jinja_vm *vm, jv s, jinja_args *a)
{
    BIND("strip", "chars");
    return jinja_str_strip(vm, s, arg[0], 1, 1);
}


static jv
m_lstrip(jinja_vm *vm, jv s, jinja_args *a)
{
    BIND("lstrip", "chars");
    return jinja_str_strip(vm, s, arg[0], 1, 0);
}


static jv
m_rstrip(jinja_vm *vm, jv s, jinja_args *a)
{
    BIND("rstrip", "chars");
    return jinja_str_strip(vm, s, arg[0], 0, 1);
}


static jv
m_split(jinja_vm *vm, jv s, jinja_args *a)
{
    BIND("split", "sep", "maxsplit");
    return jinja_str_split(vm, s, arg[0],
                           jv_given(arg[1]) ? jinja_arg_int(vm, "split", arg[1]) : -1,
                           0);
}


static jv
m_rsplit(jinja_vm *vm, jv s, jinja_args *a)
{
    BIND("rsplit", "sep", "maxsplit");
    return jinja_str_split(vm, s, arg[0],
                           jv_given(arg[1]) ? jinja_arg_int(vm, "rsplit", arg[1]) : -1,
                           1);
}


static jv
m_splitlines(jinja_vm *vm, jv s, jinja_args *a)
{
    BIND("splitlines", "keepends");
    return jinja_str_splitlines(vm, s, jv_given(arg[0]) && jv_truthy(arg[0]));
}


static jv
m_replace(jinja_vm *vm, jv s, jinja_args *a)
{
    BIND_REQ("replace", 2, "old", "new", "count");
    arg_str(vm, "replace", arg[0]);
    arg_str(vm, "replace", arg[1]);
    return jinja_str_replace(vm, s, arg[0], arg[1],
                             jv_given(arg[2]) ? jinja_arg_int(vm, "replace", arg[2])
                                              : -1);
}


/* The code-point range [start, end) of optional slice-like arguments. */
static void
sub_range(jinja_vm *vm, jv s, jv start, jv end, size_t *bs, size_t *be,
    int64_t *cs)
{
    int64_t  n = jv_length(vm, s), st = 0, en = n;

    if (jv_given(start) && start.type != JV_NONE) {
        st = jinja_arg_int(vm, "slice", start);
        if (st < 0) {
            st = st + n < 0 ? 0 : st + n;
        }
    }
    if (jv_given(end) && end.type != JV_NONE) {
        en = jinja_arg_int(vm, "slice", end);
        if (en < 0) {
            en = en + n < 0 ? 0 : en + n;
        }
    }
    if (en > n) {
        en = n;
    }
    if (st > n) {
        st = n + 1;     /* empty, and not even "" matches */
    }
    *cs = st;
    if (st > en) {
        *bs = *be = (size_t) -1;
        return;
    }
    *bs = ju_offset(s.u.s, s.len, (size_t) st);
    *be = ju_offset(s.u.s, s.len, (size_t) en);
}


static jv
affix(jinja_vm *vm, jv s, jinja_args *a, int end_)
{
    BIND_REQ(end_ ? "endswith" : "startswith", 1, "prefix", "start", "end");
    size_t   bs, be, i, n;
    int64_t  cs;
    jv      *cands = &arg[0];

    sub_range(vm, s, arg[1], arg[2], &bs, &be, &cs);
    n = 1;
    if (arg[0].type == JV_TUPLE) {
        cands = arg[0].u.list->items;
        n = arg[0].u.list->n;
    }
    for (i = 0; i < n; i++) {
        jv  p = cands[i];

        if (p.type != JV_STR) {
            if (p.type == JV_UNDEF) {
                jinja_fail_undefined(vm, p);
            }
            jinja_fail(vm, "%s first arg must be str or a tuple of str, not %s",
                       end_ ? "endswith" : "startswith", jv_type_name(p));
        }
        if (bs == (size_t) -1 || p.len > be - bs) {
            continue;
        }
        if (memcmp(end_ ? s.u.s + be - p.len : s.u.s + bs, p.u.s, p.len) == 0) {
            return jv_bool(1);
        }
    }
    return jv_bool(0);
}


static jv m_startswith(jinja_vm *vm, jv s, jinja_args *a) { return affix(vm, s, a, 0); }
static jv m_endswith(jinja_vm *vm, jv s, jinja_args *a) { return affix(vm, s, a, 1); }


/* find/rfind/index/rindex/count */
static jv
search(jinja_vm *vm, jv s, jinja_args *a, const char *fname, int rev, int raise,
    int count)
{
    BIND_REQ(fname, 1, "sub", "start", "end");
    size_t       bs, be;
    int64_t      cs, n = 0;
    const char  *hit, *p;
    jv           sub = arg_str(vm, fname, arg[0]);

    sub_range(vm, s, arg[1], arg[2], &bs, &be, &cs);
    if (count) {
        if (bs == (size_t) -1) {
            return jv_int(0);
        }
        if (sub.len == 0) {
            return jv_int((int64_t) ju_count(s.u.s + bs, be - bs) + 1);
        }
        p = s.u.s + bs;
        while ((hit = find_bytes(p, (size_t) (s.u.s + be - p), sub.u.s, sub.len))) {
            n++;
            p = hit + sub.len;
        }
        return jv_int(n);
    }
    hit = NULL;
    if (bs != (size_t) -1) {
        hit = rev ? rfind_bytes(s.u.s + bs, be - bs, sub.u.s, sub.len)
                  : find_bytes(s.u.s + bs, be - bs, sub.u.s, sub.len);
    }
    if (hit == NULL) {
        if (raise) {
            jinja_fail(vm, "substring not found");
        }
        return jv_int(-1);
    }
    return jv_int((int64_t) ju_count(s.u.s, (size_t) (hit - s.u.s)));
}


static jv m_find(jinja_vm *vm, jv s, jinja_args *a) { return search(vm, s, a, "find", 0, 0, 0); }
static jv m_rfind(jinja_vm *vm, jv s, jinja_args *a) { return search(vm, s, a, "rfind", 1, 0, 0); }
static jv m_index(jinja_vm *vm, jv s, jinja_args *a) { return search(vm, s, a, "index", 0, 1, 0); }
static jv m_rindex(jinja_vm *vm, jv s, jinja_args *a) { return search(vm, s, a, "rindex", 1, 1, 0); }
static jv m_count(jinja_vm *vm, jv s, jinja_args *a) { return search(vm, s, a, "count", 0, 0, 1); }


static jv
m_join(jinja_vm *vm, jv s, jinja_args *a)
{
    BIND_REQ("join", 1, "iterable");
    jv_list    *l = jv_iterate(vm, arg[0]);
    jinja_buf   b = { 0 };
    size_t      i;

    for (i = 0; i < l->n; i++) {
        if (l->items[i].type != JV_STR) {
            jinja_fail(vm, "sequence item %zu: expected str instance, %s found",
                       i, jv_type_name(l->items[i]));
        }
        if (i) {
            jinja_buf_add(vm, &b, s.u.s, s.len);
        }
        jinja_buf_add(vm, &b, l->items[i].u.s, l->items[i].len);
    }
    return jinja_buf_jv(&b);
}


static jv
pad(jinja_vm *vm, jv s, jinja_args *a, const char *fname, int how)
{
    BIND_REQ(fname, 1, "width", "fillchar");
    int64_t    width = jinja_arg_int(vm, fname, arg[0]), n, marg, left, i;
    jv         fill = jv_lit(" ");
    jinja_buf  b = { 0 };

    if (jv_given(arg[1])) {
        fill = arg_str(vm, fname, arg[1]);
        if (ju_count(fill.u.s, fill.len) != 1) {
            jinja_fail(vm, "The fill character must be exactly one character long");
        }
    }
    n = jv_length(vm, s);
    if (width <= n) {
        return s;
    }
    marg = width - n;
    if (how == 'c') {
        left = marg / 2 + (marg & width & 1);
    } else {
        left = how == 'r' ? marg : 0;
    }
    for (i = 0; i < left; i++) {
        jinja_buf_add(vm, &b, fill.u.s, fill.len);
    }
    jinja_buf_add(vm, &b, s.u.s, s.len);
    for (i = left; i < marg; i++) {
        jinja_buf_add(vm, &b, fill.u.s, fill.len);
    }
    return keep_safe(jinja_buf_jv(&b), s);
}


static jv m_center(jinja_vm *vm, jv s, jinja_args *a) { return pad(vm, s, a, "center", 'c'); }
static jv m_ljust(jinja_vm *vm, jv s, jinja_args *a) { return pad(vm, s, a, "ljust", 'l'); }
static jv m_rjust(jinja_vm *vm, jv s, jinja_args *a) { return pad(vm, s, a, "rjust", 'r'); }


static jv
m_zfill(jinja_vm *vm, jv s, jinja_args *a)
{
    BIND_REQ("zfill", 1, "width");
    int64_t    width = jinja_arg_int(vm, "zfill", arg[0]), n = jv_length(vm, s), i;
    jinja_buf  b = { 0 };
    size_t     start = 0;

    if (width <= n) {
        return s;
    }
    if (s.len && (s.u.s[0] == '+' || s.u.s[0] == '-')) {
        jinja_buf_addc(vm, &b, s.u.s[0]);
        start = 1;
    }
    for (i = 0; i < width - n; i++) {
        jinja_buf_addc(vm, &b, '0');
    }
    jinja_buf_add(vm, &b, s.u.s + start, s.len - start);
    return jinja_buf_jv(&b);
}


static jv
partition(jinja_vm *vm, jv s, jinja_args *a, int rev)
{
    BIND_REQ(rev ? "rpartition" : "partition", 1, "sep");
    jv           sep = arg_str(vm, "partition", arg[0]), t = jv_tuple_new(vm, 3);
    const char  *hit;

    if (sep.len == 0) {
        jinja_fail(vm, "empty separator");
    }
    hit = rev ? rfind_bytes(s.u.s, s.len, sep.u.s, sep.len)
              : find_bytes(s.u.s, s.len, sep.u.s, sep.len);
    if (hit == NULL) {
        jv_list_push(vm, t, rev ? jv_lit("") : s);
        jv_list_push(vm, t, jv_lit(""));
        jv_list_push(vm, t, rev ? s : jv_lit(""));
        return t;
    }
    jv_list_push(vm, t, jv_str(s.u.s, (size_t) (hit - s.u.s)));
    jv_list_push(vm, t, sep);
    jv_list_push(vm, t, jv_str(hit + sep.len, s.len - (size_t) (hit - s.u.s) - sep.len));
    return t;
}


static jv m_partition(jinja_vm *vm, jv s, jinja_args *a) { return partition(vm, s, a, 0); }
static jv m_rpartition(jinja_vm *vm, jv s, jinja_args *a) { return partition(vm, s, a, 1); }


static jv
m_removeprefix(jinja_vm *vm, jv s, jinja_args *a)
{
    BIND_REQ("removeprefix", 1, "prefix");
    jv  p = arg_str(vm, "removeprefix", arg[0]);

    if (p.len <= s.len && memcmp(s.u.s, p.u.s, p.len) == 0) {
        return keep_safe(jv_str(s.u.s + p.len, s.len - p.len), s);
    }
    return s;
}


static jv
m_removesuffix(jinja_vm *vm, jv s, jinja_args *a)
{
    BIND_REQ("removesuffix", 1, "suffix");
    jv  p = arg_str(vm, "removesuffix", arg[0]);

    if (p.len && p.len <= s.len && memcmp(s.u.s + s.len - p.len, p.u.s, p.len) == 0) {
        return keep_safe(jv_str(s.u.s, s.len - p.len), s);
    }
    return s;
}


/* is*() predicates: every character passes and there is at least one. */
static jv
all_chars(jinja_vm *vm, jv s, jinja_args *a, const char *fname,
    int (*pred)(uint32_t))
{
    size_t  i = 0;

    no_args(vm, fname, a);
    if (s.len == 0) {
        return jv_bool(0);
    }
    while (i < s.len) {
        if (!pred((uint32_t) ju_decode(s.u.s, s.len, &i))) {
            return jv_bool(0);
        }
    }
    return jv_bool(1);
}


static int is_ascii_cp(uint32_t c) { return c < 128; }

static jv m_isalnum(jinja_vm *vm, jv s, jinja_args *a) { return all_chars(vm, s, a, "isalnum", ju_isalnum); }
static jv m_isalpha(jinja_vm *vm, jv s, jinja_args *a) { return all_chars(vm, s, a, "isalpha", ju_isalpha); }
static jv m_isdecimal(jinja_vm *vm, jv s, jinja_args *a) { return all_chars(vm, s, a, "isdecimal", ju_isdecimal); }
static jv m_isdigit(jinja_vm *vm, jv s, jinja_args *a) { return all_chars(vm, s, a, "isdigit", ju_isdigit); }
static jv m_isnumeric(jinja_vm *vm, jv s, jinja_args *a) { return all_chars(vm, s, a, "isnumeric", ju_isnumeric); }
static jv m_isspace(jinja_vm *vm, jv s, jinja_args *a) { return all_chars(vm, s, a, "isspace", ju_isspace); }


static jv
m_isascii(jinja_vm *vm, jv s, jinja_args *a)
{
    size_t  i = 0;

    no_args(vm, "isascii", a);
    while (i < s.len) {
        if (!is_ascii_cp((uint32_t) ju_decode(s.u.s, s.len, &i))) {
            return jv_bool(0);
        }
    }
    return jv_bool(1);
}


static jv
m_isprintable(jinja_vm *vm, jv s, jinja_args *a)
{
    size_t  i = 0;

    no_args(vm, "isprintable", a);
    while (i < s.len) {
        if (!ju_isprintable((uint32_t) ju_decode(s.u.s, s.len, &i))) {
            return jv_bool(0);
        }
    }
    return jv_bool(1);
}


/* islower/isupper: no cased character of the other kind, at least one cased. */
static jv
case_test(jinja_vm *vm, jv s, jinja_args *a, int upper)
{
    size_t    i = 0;
    int       cased = 0;
    uint32_t  c;

    no_args(vm, upper ? "isupper" : "islower", a);
    while (i < s.len) {
        c = (uint32_t) ju_decode(s.u.s, s.len, &i);
        if ((upper && (ju_islower(c) || ju_istitle_char(c)))
            || (!upper && (ju_isupper(c) || ju_istitle_char(c))))
        {
            return jv_bool(0);
        }
        cased |= upper ? ju_isupper(c) : ju_islower(c);
    }
    return jv_bool(cased);
}


static jv m_islower(jinja_vm *vm, jv s, jinja_args *a) { return case_test(vm, s, a, 0); }
static jv m_isupper(jinja_vm *vm, jv s, jinja_args *a) { return case_test(vm, s, a, 1); }


static jv
m_istitle(jinja_vm *vm, jv s, jinja_args *a)
{
    size_t    i = 0;
    int       prev_cased = 0, cased = 0;
    uint32_t  c;

    no_args(vm, "istitle", a);
    while (i < s.len) {
        c = (uint32_t) ju_decode(s.u.s, s.len, &i);
        if (ju_isupper(c) || ju_istitle_char(c)) {
            if (prev_cased) {
                return jv_bool(0);
            }
            prev_cased = cased = 1;
        } else if (ju_islower(c)) {
            if (!prev_cased) {
                return jv_bool(0);
            }
            prev_cased = cased = 1;
        } else {
            prev_cased = 0;
        }
    }
    return jv_bool(cased);
}


static jv
m_isidentifier(jinja_vm *vm, jv s, jinja_args *a)
{
    size_t  i = 0;

    no_args(vm, "isidentifier", a);
    if (s.len == 0) {
        return jv_bool(0);
    }
    if (!ju_isident_start((uint32_t) ju_decode(s.u.s, s.len, &i))) {
        return jv_bool(0);
    }
    while (i < s.len) {
        if (!ju_isident_cont((uint32_t) ju_decode(s.u.s, s.len, &i))) {
            return jv_bool(0);
        }
    }
    return jv_bool(1);
}


static jv
m_format(jinja_vm *vm, jv s, jinja_args *a)
{
    return jinja_str_format(vm, s, a);
}


static const jinja_method_def str_methods[] = {
    { "capitalize", m_capitalize, 0 }, { "casefold", m_lower, 0 },
    { "center", m_center, 0 }, { "count", m_count, 0 },
    { "encode", NULL, 0 }, { "endswith", m_endswith, 0 },
    { "expandtabs", NULL, 0 }, { "find", m_find, 0 },
    { "format", m_format, 0 }, { "format_map", NULL, 0 },
    { "index", m_index, 0 }, { "isalnum", m_isalnum, 0 },
    { "isalpha", m_isalpha, 0 }, { "isascii", m_isascii, 0 },
    { "isdecimal", m_isdecimal, 0 }, { "isdigit", m_isdigit, 0 },
    { "isidentifier", m_isidentifier, 0 }, { "islower", m_islower, 0 },
    { "isnumeric", m_isnumeric, 0 }, { "isprintable", m_isprintable, 0 },
    { "isspace", m_isspace, 0 }, { "istitle", m_istitle, 0 },
    { "isupper", m_isupper, 0 }, { "join", m_join, 0 },
    { "ljust", m_ljust, 0 }, { "lower", m_lower, 0 },
    { "lstrip", m_lstrip, 0 }, { "maketrans", NULL, 0 },
    { "partition", m_partition, 0 }, { "removeprefix", m_removeprefix, 0 },
    { "removesuffix", m_removesuffix, 0 }, { "replace", m_replace, 0 },
    { "rfind", m_rfind, 0 }, { "rindex", m_rindex, 0 },
    { "rjust", m_rjust, 0 }, { "rpartition", m_rpartition, 0 },
    { "rsplit", m_rsplit, 0 }, { "rstrip", m_rstrip, 0 },
    { "split", m_split, 0 }, { "splitlines", m_splitlines, 0 },
    { "startswith", m_startswith, 0 }, { "strip", m_strip, 0 },
    { "swapcase", m_swapcase, 0 }, { "title", m_title, 0 },
    { "translate", NULL, 0 }, { "upper", m_upper, 0 },
    { "zfill", m_zfill, 0 },
    { NULL, NULL, 0 }
};


/* ------------------------------------------------------------------ dict, list */

static jv
d_get(jinja_vm *vm, jv d, jinja_args *a)
{
    BIND_REQ("get", 1, "key", "default");
    jv  v;

    if (!jv_is_hashable(arg[0])) {
        jinja_fail(vm, "unhashable type: '%s'", jv_type_name(arg[0]));
    }
    if (jv_dict_get(d, arg[0], &v)) {
        return v;
    }
    return jv_given(arg[1]) ? arg[1] : jv_none();
}


static jv
dict_view(jinja_vm *vm, jv d, int kind)
{
    jv_dict  *dd = d.u.dict;
    jv        l = jv_list_new(vm, dd->n), t;
    size_t    i;

    for (i = 0; i < dd->n; i++) {
        if (kind == JI_DICT_KEYS) {
            jv_list_push(vm, l, dd->keys[i]);
        } else if (kind == JI_DICT_VALUES) {
            jv_list_push(vm, l, dd->vals[i]);
        } else {
            t = jv_tuple_new(vm, 2);
            jv_list_push(vm, t, dd->keys[i]);
            jv_list_push(vm, t, dd->vals[i]);
            jv_list_push(vm, l, t);
        }
    }
    return jv_iter_new(vm, kind, l.u.list);
}


static jv d_items(jinja_vm *vm, jv d, jinja_args *a)
{ no_args(vm, "items", a); return dict_view(vm, d, JI_DICT_ITEMS); }
static jv d_keys(jinja_vm *vm, jv d, jinja_args *a)
{ no_args(vm, "keys", a); return dict_view(vm, d, JI_DICT_KEYS); }
static jv d_values(jinja_vm *vm, jv d, jinja_args *a)
{ no_args(vm, "values", a); return dict_view(vm, d, JI_DICT_VALUES); }


static jv
d_copy(jinja_vm *vm, jv d, jinja_args *a)
{
    jv      c = jv_dict_new(vm, d.u.dict->n);
    size_t  i;

    no_args(vm, "copy", a);
    for (i = 0; i < d.u.dict->n; i++) {
        jv_dict_set(vm, c, d.u.dict->keys[i], d.u.dict->vals[i]);
    }
    return c;
}


static const jinja_method_def dict_methods[] = {
    { "clear", NULL, 1 }, { "copy", d_copy, 0 }, { "fromkeys", NULL, 0 },
    { "get", d_get, 0 }, { "items", d_items, 0 }, { "keys", d_keys, 0 },
    { "pop", NULL, 1 }, { "popitem", NULL, 1 }, { "setdefault", NULL, 1 },
    { "update", NULL, 1 }, { "values", d_values, 0 },
    { NULL, NULL, 0 }
};


static jv
l_pop(jinja_vm *vm, jv l, jinja_args *a)
{
    BIND("pop", "index");
    jv_list  *ll = l.u.list;
    int64_t   i = -1, n = (int64_t) ll->n;
    jv        v;

    if (jv_given(arg[0])) {
        i = jinja_arg_int(vm, "pop", arg[0]);
    }
    if (n == 0) {
        jinja_fail(vm, "pop from empty list");
    }
    if (i < 0) {
        i += n;
    }
    if (i < 0 || i >= n) {
        jinja_fail(vm, "pop index out of range");
    }
    v = ll->items[i];
    memmove(ll->items + i, ll->items + i + 1, (size_t) (n - i - 1) * sizeof(jv));
    ll->n--;
    return v;
}


static jv
l_clear(jinja_vm *vm, jv l, jinja_args *a)
{
    no_args(vm, "clear", a);
    l.u.list->n = 0;
    return jv_none();
}


static jv
l_copy(jinja_vm *vm, jv l, jinja_args *a)
{
    jv  c = jv_list_new(vm, l.u.list->n);

    no_args(vm, "copy", a);
    if (l.u.list->n) {
        memcpy(c.u.list->items, l.u.list->items, l.u.list->n * sizeof(jv));
    }
    c.u.list->n = l.u.list->n;
    return c;
}


static jv
l_count(jinja_vm *vm, jv l, jinja_args *a)
{
    BIND_REQ("count", 1, "value");
    size_t   i;
    int64_t  n = 0;

    for (i = 0; i < l.u.list->n; i++) {
        n += jv_equal(vm, l.u.list->items[i], arg[0]);
    }
    return jv_int(n);
}


static jv
l_index(jinja_vm *vm, jv l, jinja_args *a)
{
    BIND_REQ("index", 1, "value", "start", "stop");
    int64_t  n = (int64_t) l.u.list->n, st = 0, en = n, i;

    if (jv_given(arg[1])) {
        st = jinja_arg_int(vm, "index", arg[1]);
        if (st < 0 && (st += n) < 0) {
            st = 0;
        }
    }
    if (jv_given(arg[2])) {
        en = jinja_arg_int(vm, "index", arg[2]);
        if (en < 0 && (en += n) < 0) {
            en = 0;
        }
    }
    for (i = st; i < en && i < n; i++) {
        if (jv_equal(vm, l.u.list->items[i], arg[0])) {
            return jv_int(i);
        }
    }
    jinja_fail(vm, "value is not in %s", jv_type_name(l));
}


static const jinja_method_def list_methods[] = {
    { "append", NULL, 1 }, { "clear", l_clear, 0 }, { "copy", l_copy, 0 },
    { "count", l_count, 0 }, { "extend", NULL, 1 }, { "index", l_index, 0 },
    { "insert", NULL, 1 }, { "pop", l_pop, 0 }, { "remove", NULL, 1 },
    { "reverse", NULL, 1 }, { "sort", NULL, 1 },
    { NULL, NULL, 0 }
};

static jv
r_as_list(jv r)
{
    jv  l = jv_make(JV_LIST);

    l.u.list = r.u.iter->items;
    return l;
}


static jv r_count(jinja_vm *vm, jv r, jinja_args *a) { return l_count(vm, r_as_list(r), a); }


static jv
r_index(jinja_vm *vm, jv r, jinja_args *a)
{
    size_t  i;

    if (a->npos != 1 || a->nkw) {
        jinja_fail(vm, "index() takes exactly one argument");
    }
    for (i = 0; i < r.u.iter->items->n; i++) {
        if (jv_equal(vm, r.u.iter->items->items[i], a->pos[0])) {
            return jv_int((int64_t) i);
        }
    }
    jinja_fail(vm, "value is not in range");
}


static const jinja_method_def range_methods[] = {
    { "count", r_count, 0 }, { "index", r_index, 0 },
    { NULL, NULL, 0 }
};

static const jinja_method_def tuple_methods[] = {
    { "count", l_count, 0 }, { "index", l_index, 0 },
    { NULL, NULL, 0 }
};


/* ------------------------------------------------------------------ numbers, objects */

static jv
n_is_integer(jinja_vm *vm, jv f, jinja_args *a)
{
    no_args(vm, "is_integer", a);
    return jv_bool(isfinite(f.u.f) && floor(f.u.f) == f.u.f);
}


static jv
n_conjugate(jinja_vm *vm, jv v, jinja_args *a)
{
    no_args(vm, "conjugate", a);
    return v.type == JV_BOOL ? jv_int(v.u.i) : v;
}


static jv
n_bit_length(jinja_vm *vm, jv v, jinja_args *a)
{
    uint64_t  x = v.u.i < 0 ? (uint64_t) -(v.u.i + 1) + 1 : (uint64_t) v.u.i;
    int64_t   n = 0;

    no_args(vm, "bit_length", a);
    while (x) {
        n++;
        x >>= 1;
    }
    return jv_int(n);
}


static const jinja_method_def int_methods[] = {
    { "as_integer_ratio", NULL, 0 }, { "bit_count", NULL, 0 },
    { "bit_length", n_bit_length, 0 }, { "conjugate", n_conjugate, 0 },
    { "from_bytes", NULL, 0 }, { "to_bytes", NULL, 0 },
    { NULL, NULL, 0 }
};

static const jinja_method_def float_methods[] = {
    { "as_integer_ratio", NULL, 0 }, { "conjugate", n_conjugate, 0 },
    { "fromhex", NULL, 0 }, { "hex", NULL, 0 },
    { "is_integer", n_is_integer, 0 },
    { NULL, NULL, 0 }
};


static jv
o_next(jinja_vm *vm, jv o, jinja_args *a)
{
    jv_obj  *c = o.u.obj;
    jv       v = c->items->items[c->pos];

    no_args(vm, "next", a);
    c->pos = (c->pos + 1) % c->items->n;
    return v;
}


static jv
o_reset(jinja_vm *vm, jv o, jinja_args *a)
{
    no_args(vm, "reset", a);
    o.u.obj->pos = 0;
    return jv_none();
}


static const jinja_method_def cycler_methods[] = {
    { "next", o_next, 0 }, { "reset", o_reset, 0 },
    { NULL, NULL, 0 }
};


jv
jinja_method_lookup(jinja_vm *vm, jv self, const char *name, size_t len,
    int *found)
{
    const jinja_method_def  *t;
    jv                       f;

    *found = 0;
    switch (self.type) {
    case JV_STR:   t = str_methods; break;
    case JV_DICT:  t = dict_methods; break;
    case JV_LIST:  t = list_methods; break;
    case JV_TUPLE: t = tuple_methods; break;
    case JV_ITER:
        if (self.u.iter->kind != JI_RANGE) {
            return jv_undef_plain();
        }
        if (len == 5 && memcmp(name, "start", 5) == 0) {
            *found = 1;
            return jv_int(self.u.iter->start);
        }
        if (len == 4 && (memcmp(name, "stop", 4) == 0 || memcmp(name, "step", 4) == 0)) {
            *found = 1;
            return jv_int(name[3] == 'p' && name[2] == 'o' ? self.u.iter->stop
                                                           : self.u.iter->step);
        }
        t = range_methods;
        break;
    case JV_BOOL:
    case JV_INT:
        if ((len == 4 && (memcmp(name, "real", 4) == 0))
            || (len == 9 && memcmp(name, "numerator", 9) == 0))
        {
            *found = 1;
            return jv_int(self.u.i);
        }
        if ((len == 4 && memcmp(name, "imag", 4) == 0)) {
            *found = 1;
            return jv_int(0);
        }
        if (len == 11 && memcmp(name, "denominator", 11) == 0) {
            *found = 1;
            return jv_int(1);
        }
        t = int_methods;
        break;
    case JV_FLOAT:
        if (len == 4 && (memcmp(name, "real", 4) == 0 || memcmp(name, "imag", 4) == 0)) {
            *found = 1;
            return jv_float(name[0] == 'r' ? self.u.f : 0.0);
        }
        t = float_methods;
        break;
    case JV_OBJ:
        if (self.u.obj->kind != JO_CYCLER) {
            return jv_undef_plain();
        }
        t = cycler_methods;
        break;
    default:
        return jv_undef_plain();
    }
    for (; t->name; t++) {
        if (strlen(t->name) == len && memcmp(t->name, name, len) == 0) {
            *found = 1;
            if (t->unsafe) {
                return jv_undef_unsafe(vm, self, name, len);
            }
            f = jv_func_new(vm, JF_METHOD, t->name);
            f.u.fn->self = self;
            f.u.fn->method = t->fn ? t->fn : method_unsupported;
            return f;
        }
    }
    return jv_undef_plain();
}


/* ------------------------------------------------------------------ format specs */

typedef struct {
    uint32_t  fill;
    int       align;        /* '<' '>' '^' '=' or 0 */
    int       sign;         /* '+' '-' ' ' or 0 */
    int       alt;          /* '#' */
    int       zero;
    int64_t   width;        /* -1: none */
    int       grouping;     /* ',' '_' or 0 */
    int64_t   precision;    /* -1: none */
    int       type;         /* 0 or the type character */
} jinja_spec;


static void
parse_spec(jinja_vm *vm, const char *s, size_t len, jinja_spec *sp)
{
    size_t    i = 0, j;
    uint32_t  c;

    memset(sp, 0, sizeof(*sp));
    sp->fill = ' ';
    sp->width = sp->precision = -1;
    if (len == 0) {
        return;
    }
    j = 0;
    c = (uint32_t) ju_decode(s, len, &j);
    if (j < len && strchr("<>^=", s[j])) {
        sp->fill = c;
        sp->align = s[j];
        i = j + 1;
    } else if (strchr("<>^=", s[0])) {
        sp->align = s[0];
        i = 1;
    }
    if (i < len && (s[i] == '+' || s[i] == '-' || s[i] == ' ')) {
        sp->sign = s[i++];
    }
    if (i < len && s[i] == 'z') {
        i++;
    }
    if (i < len && s[i] == '#') {
        sp->alt = 1;
        i++;
    }
    if (i < len && s[i] == '0') {
        sp->zero = 1;
        if (!sp->align) {
            sp->fill = '0';
            sp->align = '=';
        }
        i++;
    }
    if (i < len && s[i] >= '0' && s[i] <= '9') {
        sp->width = 0;
        while (i < len && s[i] >= '0' && s[i] <= '9') {
            sp->width = sp->width * 10 + (s[i++] - '0');
            if (sp->width > 100000) {
                jinja_fail(vm, "format width too large");
            }
        }
    }
    if (i < len && (s[i] == ',' || s[i] == '_')) {
        sp->grouping = s[i++];
    }
    if (i < len && s[i] == '.') {
        i++;
        if (i >= len || s[i] < '0' || s[i] > '9') {
            jinja_fail(vm, "Format specifier missing precision");
        }
        sp->precision = 0;
        while (i < len && s[i] >= '0' && s[i] <= '9') {
            sp->precision = sp->precision * 10 + (s[i++] - '0');
            if (sp->precision > 1000) {
                jinja_fail(vm, "format precision too large");
            }
        }
    }
    if (i < len) {
        sp->type = s[i++];
    }
    if (i < len) {
        jinja_fail(vm, "Invalid format specifier '%.*s'", (int) len, s);
    }
}


/* Pads body (already with its sign) to the spec's width. */
static jv
apply_width(jinja_vm *vm, const jinja_spec *sp, const char *body, size_t blen,
    int numeric, int default_align)
{
    jinja_buf  b = { 0 };
    int64_t    n = (int64_t) ju_count(body, blen), marg, left, i;
    int        align = sp->align ? sp->align : default_align;
    char       fill[4];
    size_t     flen = ju_encode(sp->fill, fill), sign_len = 0;

    if (sp->width <= n) {
        return jv_str_copy(vm, body, blen);
    }
    marg = sp->width - n;
    if (align == '=' && numeric) {
        if (blen && (body[0] == '-' || body[0] == '+' || body[0] == ' ')) {
            sign_len = 1;
        }
        jinja_buf_add(vm, &b, body, sign_len);
        for (i = 0; i < marg; i++) {
            jinja_buf_add(vm, &b, fill, flen);
        }
        jinja_buf_add(vm, &b, body + sign_len, blen - sign_len);
        return jinja_buf_jv(&b);
    }
    left = align == '>' ? marg : align == '^' ? marg / 2 : 0;
    for (i = 0; i < left; i++) {
        jinja_buf_add(vm, &b, fill, flen);
    }
    jinja_buf_add(vm, &b, body, blen);
    for (i = left; i < marg; i++) {
        jinja_buf_add(vm, &b, fill, flen);
    }
    return jinja_buf_jv(&b);
}


/* Inserts thousands separators into the integer digits of num. */
static void
group_digits(jinja_vm *vm, jinja_buf *b, const char *num, size_t len, int sep)
{
    size_t  ndig = 0, i;

    while (ndig < len && num[ndig] >= '0' && num[ndig] <= '9') {
        ndig++;
    }
    for (i = 0; i < ndig; i++) {
        if (i && (ndig - i) % 3 == 0) {
            jinja_buf_addc(vm, b, (char) sep);
        }
        jinja_buf_addc(vm, b, num[i]);
    }
    jinja_buf_add(vm, b, num + ndig, len - ndig);
}


/* The code point of a 'c' conversion; strings here are UTF-8, so no surrogates. */
static uint32_t
format_char(jinja_vm *vm, int64_t i)
{
    if (i < 0 || i > 0x10ffff) {
        jinja_fail(vm, "%%c arg not in range(0x110000)");
    }
    if (i >= 0xd800 && i <= 0xdfff) {
        jinja_fail(vm, "%%c arg is a surrogate, which UTF-8 cannot encode");
    }
    return (uint32_t) i;
}


static jv
format_number(jinja_vm *vm, jv v, const jinja_spec *sp)
{
    char       tmp[1400];   /* '%.1000f' of DBL_MAX: 309 + 1 + 1000 */
    jinja_buf  b = { 0 };
    int        type = sp->type, neg;
    double     f;
    uint64_t   u;
    int        n = 0, prec;

    if (v.type == JV_FLOAT || strchr("eEfFgG%", type ? type : 'd')
        || (type == 0 && v.type == JV_FLOAT))
    {
        if (type == 'n') {
            type = 'g';             /* no locale: 'n' is 'g' for a float */
        } else if (type != 0 && strchr("eEfFgG%", type) == NULL) {
            jinja_fail(vm, "Unknown format code '%c' for object of type '%s'",
                       type, jv_type_name(v));
        }
        f = v.type == JV_FLOAT ? v.u.f : (double) v.u.i;
        neg = signbit(f) && !isnan(f);
        f = fabs(f);
        prec = sp->precision < 0 ? 6 : (int) sp->precision;
        switch (type) {
        case 0:
            if (sp->precision < 0) {
                n = (int) strlen(llm_pyfloat(tmp, f));
            } else if (f == 0.0 || !isfinite(f)) {
                n = snprintf(tmp, sizeof(tmp), "%s", f == 0.0 ? "0.0" : "inf");
            } else {
                /* like 'g', but a fixed result keeps a ".0" */
                char  digits[1100];
                int   decpt, ndig, p1 = prec ? prec : 1;

                ndig = jinja_float_digits(f, p1, sp->alt, digits, &decpt);
                n = (int) jinja_format_digits(digits, ndig, decpt,
                                              decpt <= -4 || decpt > p1 - 1, 1, tmp);
            }
            break;
        case '%':
            n = snprintf(tmp, sizeof(tmp), sp->alt ? "%#.*f%%" : "%.*f%%", prec, f * 100);
            break;
        default:
            {
                char  fmt[16];

                snprintf(fmt, sizeof(fmt), "%%%s.*%c", sp->alt ? "#" : "", type);
                n = snprintf(tmp, sizeof(tmp), fmt, prec, f);
            }
        }
        if (isnan(f) || isinf(f)) {
            n = snprintf(tmp, sizeof(tmp), "%s",
                         isnan(f) ? (type >= 'A' && type <= 'Z' ? "NAN" : "nan")
                                  : (type >= 'A' && type <= 'Z' ? "INF" : "inf"));
        }
    } else {
        if (sp->precision >= 0) {
            jinja_fail(vm, "Precision not allowed in integer format specifier");
        }
        neg = v.u.i < 0;
        u = neg ? (uint64_t) -(v.u.i + 1) + 1 : (uint64_t) v.u.i;
        switch (type) {
        case 0:
        case 'd':
        case 'n':
            n = snprintf(tmp, sizeof(tmp), "%llu", (unsigned long long) u);
            break;
        case 'x':
        case 'X':
        case 'o':
            n = snprintf(tmp, sizeof(tmp), type == 'x' ? "%s%llx" : type == 'X'
                         ? "%s%llX" : "%s%llo",
                         sp->alt ? (type == 'o' ? "0o" : type == 'x' ? "0x" : "0X") : "",
                         (unsigned long long) u);
            break;
        case 'b':
            {
                char  bits[65];
                int   k = 64;

                bits[k] = '\0';
                do {
                    bits[--k] = (char) ('0' + (u & 1));
                    u >>= 1;
                } while (u);
                n = snprintf(tmp, sizeof(tmp), "%s%s", sp->alt ? "0b" : "", bits + k);
            }
            break;
        case 'c':
            n = (int) ju_encode(format_char(vm, v.u.i), tmp);
            tmp[n] = '\0';
            break;
        default:
            jinja_fail(vm, "Unknown format code '%c' for object of type '%s'",
                       type, jv_type_name(v));
        }
    }
    if (neg) {
        jinja_buf_addc(vm, &b, '-');
    } else if (sp->sign == '+' || sp->sign == ' ') {
        jinja_buf_addc(vm, &b, (char) sp->sign);
    }
    if (sp->grouping) {
        group_digits(vm, &b, tmp, (size_t) n, sp->grouping);
    } else {
        jinja_buf_add(vm, &b, tmp, (size_t) n);
    }
    return apply_width(vm, sp, b.p, b.len, 1, '>');
}


jv
jinja_format_spec(jinja_vm *vm, jv v, const char *spec, size_t len)
{
    jinja_spec  sp;
    jv          s;
    size_t      cut;

    if (len == 0) {
        return jv_to_str(vm, v);
    }
    parse_spec(vm, spec, len, &sp);
    switch (v.type) {
    case JV_STR:
        if (sp.sign) {
            jinja_fail(vm, "Sign not allowed in string format specifier");
        }
        if (sp.type && sp.type != 's') {
            jinja_fail(vm, "Unknown format code '%c' for object of type 'str'",
                       sp.type);
        }
        s = v;
        if (sp.precision >= 0) {
            cut = ju_offset(s.u.s, s.len, (size_t) sp.precision);
            s = jv_str(s.u.s, cut);
        }
        return apply_width(vm, &sp, s.u.s, s.len, 0, '<');
    case JV_INT:
    case JV_BOOL:
    case JV_FLOAT:
        return format_number(vm, v, &sp);
    default:
        jinja_fail(vm, "unsupported format string passed to %s.__format__",
                   jv_type_name(v));
    }
}


/* ------------------------------------------------------------------ str.format */

static jv
format_arg(jinja_vm *vm, jinja_args *a, const char *name, size_t len,
    int64_t *auto_idx)
{
    size_t   i;
    int64_t  idx = 0;

    if (len == 0) {
        if (*auto_idx < 0) {
            jinja_fail(vm, "cannot switch from manual field specification to "
                       "automatic field numbering");
        }
        idx = (*auto_idx)++;
    } else if (name[0] >= '0' && name[0] <= '9') {
        for (i = 0; i < len; i++) {
            if (name[i] < '0' || name[i] > '9') {
                jinja_fail(vm, "invalid format field name");
            }
            idx = idx * 10 + (name[i] - '0');
            if (idx > 1000000) {
                jinja_fail(vm, "format field index too large");
            }
        }
        if (*auto_idx > 0) {
            jinja_fail(vm, "cannot switch from automatic field numbering to "
                       "manual field specification");
        }
        *auto_idx = -1;
    } else {
        for (i = 0; i < a->nkw; i++) {
            if (a->kw[i].len == len && memcmp(a->kw[i].name, name, len) == 0) {
                return a->kw[i].val;
            }
        }
        jinja_fail(vm, "KeyError: '%.*s'", (int) len, name);
    }
    if (idx >= (int64_t) a->npos) {
        jinja_fail(vm, "Replacement index %lld out of range for positional "
                   "args tuple", (long long) idx);
    }
    return a->pos[idx];
}


/* One replacement field "name[.attr|[key]]...[!conv][:spec]". */
static void
format_field(jinja_vm *vm, jinja_buf *out, jinja_args *a, const char *f,
    size_t len, int64_t *auto_idx, int depth)
{
    size_t     i = 0, start, k;
    jv         v, key;
    int        conv = 0;
    jinja_buf  spec = { 0 };

    while (i < len && f[i] != '.' && f[i] != '[' && f[i] != '!' && f[i] != ':') {
        i++;
    }
    v = format_arg(vm, a, f, i, auto_idx);
    while (i < len && (f[i] == '.' || f[i] == '[')) {
        if (f[i] == '.') {
            start = ++i;
            while (i < len && f[i] != '.' && f[i] != '[' && f[i] != '!' && f[i] != ':') {
                i++;
            }
            v = jinja_getattr(vm, v, f + start, i - start);
        } else {
            start = ++i;
            while (i < len && f[i] != ']') {
                i++;
            }
            if (i >= len) {
                jinja_fail(vm, "Missing ']' in format string");
            }
            key = jv_str(f + start, i - start);
            for (k = start; k < i && f[k] >= '0' && f[k] <= '9'; k++) {
            }
            if (k == i && i > start) {
                key = jv_int(strtoll(f + start, NULL, 10));
            }
            v = jinja_getitem(vm, v, key);
            i++;
        }
    }
    if (i < len && f[i] == '!') {
        if (i + 1 >= len) {
            jinja_fail(vm, "end of string while looking for conversion specifier");
        }
        conv = f[i + 1];
        i += 2;
        if (conv != 'r' && conv != 's' && conv != 'a') {
            jinja_fail(vm, "Unknown conversion specifier %c", conv);
        }
    }
    if (i < len && f[i] == ':') {
        i++;
        /* the spec may itself contain {fields} */
        for (start = i; i < len; i++) {
            if (f[i] == '{') {
                size_t  j = i + 1;
                int     lvl = 1;

                while (j < len && lvl) {
                    lvl += f[j] == '{';
                    lvl -= f[j] == '}';
                    j++;
                }
                if (depth > 1) {
                    jinja_fail(vm, "Max string recursion exceeded");
                }
                format_field(vm, &spec, a, f + i + 1, j - i - 2, auto_idx, depth + 1);
                i = j - 1;
            } else {
                jinja_buf_addc(vm, &spec, f[i]);
            }
        }
    } else if (i < len) {
        jinja_fail(vm, "expected ':' after conversion specifier");
    }
    if (conv == 'r' || conv == 'a') {
        jinja_buf  r = { 0 };

        jv_write_repr(vm, &r, v);
        v = jinja_buf_jv(&r);
    } else if (conv == 's') {
        v = jv_to_str(vm, v);
    }
    v = jinja_format_spec(vm, v, spec.p, spec.len);
    jinja_buf_add(vm, out, v.u.s, v.len);
}


jv
jinja_str_format(jinja_vm *vm, jv fmt, jinja_args *a)
{
    jinja_buf    out = { 0 };
    const char  *s = fmt.u.s;
    size_t       i = 0, n = fmt.len, start;
    int64_t      auto_idx = 0;
    int          lvl;

    while (i < n) {
        if (s[i] == '{') {
            if (i + 1 < n && s[i + 1] == '{') {
                jinja_buf_addc(vm, &out, '{');
                i += 2;
                continue;
            }
            start = ++i;
            lvl = 1;
            while (i < n) {
                if (s[i] == '{') {
                    lvl++;
                } else if (s[i] == '}' && --lvl == 0) {
                    break;
                }
                i++;
            }
            if (i >= n) {
                jinja_fail(vm, "Single '{' encountered in format string");
            }
            format_field(vm, &out, a, s + start, i - start, &auto_idx, 0);
            i++;
        } else if (s[i] == '}') {
            if (i + 1 < n && s[i + 1] == '}') {
                jinja_buf_addc(vm, &out, '}');
                i += 2;
                continue;
            }
            jinja_fail(vm, "Single '}' encountered in format string");
        } else {
            jinja_buf_addc(vm, &out, s[i++]);
        }
    }
    return jinja_buf_jv(&out);
}


/* ------------------------------------------------------------------ printf-style */

static void
buf_fill(jinja_vm *vm, jinja_buf *b, char c, int n)
{
    while (n-- > 0) {
        jinja_buf_addc(vm, b, c);
    }
}


/*
 * One numeric %-conversion as Python does it: the digits of the magnitude
 * (C's printf for e/f/g, our own for the integer codes, whose '#' prefixes
 * and negative values differ from C's), then the sign, then the padding
 * (' ' flag, '+' flag, '-' to the left, '0' between prefix and digits).
 */
static void
percent_number(jinja_vm *vm, jinja_buf *out, const char *flags, int width,
    int prec, int conv, jv v)
{
    char         digits[1400], spec[16];    /* '%.1000f' of DBL_MAX: 1310 */
    const char  *sign, *prefix = "";
    int          neg, n, pad, zeros = 0;

    if (strchr("diuxXo", conv)) {
        uint64_t  u;

        if (v.type == JV_FLOAT) {
            if (conv != 'd' && conv != 'i' && conv != 'u') {
                jinja_fail(vm, "%%%c format: an integer is required, not float", conv);
            }
            if (isnan(v.u.f)) {
                jinja_fail(vm, "cannot convert float NaN to integer");
            }
            if (!(fabs(v.u.f) < 9223372036854775808.0)) {
                jinja_fail(vm, "%%%c format: float out of the 64-bit integer range",
                           conv);
            }
            v = jv_int((int64_t) v.u.f);
        }
        neg = v.u.i < 0;
        u = neg ? (uint64_t) -(v.u.i + 1) + 1 : (uint64_t) v.u.i;
        n = snprintf(digits, sizeof(digits), conv == 'x' ? "%llx" : conv == 'X'
                     ? "%llX" : conv == 'o' ? "%llo" : "%llu", (unsigned long long) u);
        if (prec > n) {
            zeros = prec - n;
        }
        if (strchr(flags, '#') && strchr("xXo", conv)) {
            prefix = conv == 'x' ? "0x" : conv == 'X' ? "0X" : "0o";
        }
    } else {
        double  f = v.type == JV_FLOAT ? v.u.f : (double) v.u.i;

        neg = signbit(f) && !isnan(f);
        snprintf(spec, sizeof(spec), "%%%s.*%c", strchr(flags, '#') ? "#" : "", conv);
        n = snprintf(digits, sizeof(digits), spec, prec < 0 ? 6 : prec, fabs(f));
    }
    sign = neg ? "-" : strchr(flags, '+') ? "+" : strchr(flags, ' ') ? " " : "";
    pad = width - (int) (strlen(sign) + strlen(prefix)) - zeros - n;
    if (pad > 0 && !strchr(flags, '-')) {
        if (strchr(flags, '0')) {
            zeros += pad;
        } else {
            buf_fill(vm, out, ' ', pad);
        }
        pad = 0;
    }
    jinja_buf_add(vm, out, sign, strlen(sign));
    jinja_buf_add(vm, out, prefix, strlen(prefix));
    buf_fill(vm, out, '0', zeros);
    jinja_buf_add(vm, out, digits, (size_t) n);
    if (pad > 0) {
        buf_fill(vm, out, ' ', pad);
    }
}



jv
jinja_percent_format(jinja_vm *vm, jv fmt, jv args)
{
    jinja_buf    out = { 0 };
    const char  *s = fmt.u.s;
    size_t       i = 0, n = fmt.len, argi = 0, nargs;
    jv          *argv, v, key;
    int          is_map = args.type == JV_DICT, used_map = 0;
    char         flags[8], tmp[8];
    int          nf, width, prec, conv, k;
    int64_t      w;

    if (args.type == JV_TUPLE) {
        argv = args.u.list->items;
        nargs = args.u.list->n;
    } else {
        argv = &args;
        nargs = 1;
    }
    while (i < n) {
        if (s[i] != '%') {
            jinja_buf_addc(vm, &out, s[i++]);
            continue;
        }
        if (++i >= n) {
            jinja_fail(vm, "incomplete format");
        }
        v = jv_undef_plain();
        if (s[i] == '(') {
            size_t  start = ++i;
            int     lvl = 1;

            while (i < n && lvl) {
                lvl += s[i] == '(';
                lvl -= s[i] == ')';
                i++;
            }
            if (lvl) {
                jinja_fail(vm, "incomplete format key");
            }
            if (!is_map) {
                jinja_fail(vm, "format requires a mapping");
            }
            key = jv_str(s + start, i - start - 1);
            if (!jv_dict_get(args, key, &v)) {
                jinja_fail(vm, "KeyError: '%.*s'", (int) key.len, key.u.s);
            }
            used_map = 1;
        }
        nf = 0;
        while (i < n && strchr("#0- +", s[i]) && nf < 6) {
            flags[nf++] = s[i++];
        }
        flags[nf] = '\0';
        width = -1;
        if (i < n && s[i] == '*') {
            if (argi >= nargs) {
                jinja_fail(vm, "not enough arguments for format string");
            }
            w = jinja_arg_int(vm, "%", argv[argi++]);
            if (w < -100000 || w > 100000) {
                jinja_fail(vm, "width too big");
            }
            if (w < 0 && nf < 6) {          /* Python: a negative '*' left-justifies */
                flags[nf++] = '-';
                flags[nf] = '\0';
            }
            width = (int) (w < 0 ? -w : w);
            i++;
        } else {
            while (i < n && s[i] >= '0' && s[i] <= '9') {
                width = (width < 0 ? 0 : width) * 10 + (s[i++] - '0');
                if (width > 100000) {
                    jinja_fail(vm, "width too big");
                }
            }
        }
        prec = -1;
        if (i < n && s[i] == '.') {
            i++;
            prec = 0;
            if (i < n && s[i] == '*') {
                if (argi >= nargs) {
                    jinja_fail(vm, "not enough arguments for format string");
                }
                w = jinja_arg_int(vm, "%", argv[argi++]);
                if (w > 1000) {
                    jinja_fail(vm, "precision too big");
                }
                prec = w < 0 ? 0 : (int) w;
                i++;
            } else {
                while (i < n && s[i] >= '0' && s[i] <= '9') {
                    prec = prec * 10 + (s[i++] - '0');
                    if (prec > 1000) {
                        jinja_fail(vm, "precision too big");
                    }
                }
            }
        }
        while (i < n && (s[i] == 'h' || s[i] == 'l' || s[i] == 'L')) {
            i++;
        }
        if (i >= n) {
            jinja_fail(vm, "incomplete format");
        }
        conv = s[i++];
        if (conv == '%') {
            jinja_buf_addc(vm, &out, '%');
            continue;
        }
        if (v.type == JV_UNDEF && !used_map) {
            if (argi >= nargs) {
                jinja_fail(vm, "not enough arguments for format string");
            }
            v = argv[argi++];
        }
        switch (conv) {
        case 's':
        case 'r':
        case 'a':
            {
                jinja_buf  t = { 0 };
                jv         sv;
                size_t     cut;
                int64_t    len, pad;

                if (conv == 's') {
                    jv_write_str(vm, &t, v);
                } else {
                    jv_write_repr(vm, &t, v);
                }
                sv = jinja_buf_jv(&t);
                if (prec >= 0) {
                    cut = ju_offset(sv.u.s, sv.len, (size_t) prec);
                    sv.len = (uint32_t) cut;
                }
                len = (int64_t) ju_count(sv.u.s, sv.len);
                pad = width > len ? width - len : 0;
                if (!strchr(flags, '-')) {
                    for (k = 0; k < pad; k++) {
                        jinja_buf_addc(vm, &out, ' ');
                    }
                }
                jinja_buf_add(vm, &out, sv.u.s, sv.len);
                if (strchr(flags, '-')) {
                    for (k = 0; k < pad; k++) {
                        jinja_buf_addc(vm, &out, ' ');
                    }
                }
            }
            continue;
        case 'c':
            if (v.type == JV_STR && ju_count(v.u.s, v.len) == 1) {
                jinja_buf_add(vm, &out, v.u.s, v.len);
            } else if (v.type == JV_INT) {
                k = (int) ju_encode(format_char(vm, v.u.i), tmp);
                jinja_buf_add(vm, &out, tmp, (size_t) k);
            } else {
                jinja_fail(vm, "%%c requires int or char");
            }
            continue;
        case 'd': case 'i': case 'u': case 'x': case 'X': case 'o':
        case 'e': case 'E': case 'f': case 'F': case 'g': case 'G':
            break;
        default:
            jinja_fail(vm, "unsupported format character '%c'", conv);
        }
        if (v.type != JV_INT && v.type != JV_BOOL && v.type != JV_FLOAT) {
            if (v.type == JV_UNDEF) {
                jinja_fail_undefined(vm, v);
            }
            jinja_fail(vm, "%%%c format: a real number is required, not %s",
                       conv, jv_type_name(v));
        }
        percent_number(vm, &out, flags, width, prec, conv, v);
    }
    /* Python skips this check when the argument supports item access
     * (PyMapping_Check): a dict, but also a lone list */
    if (!used_map && !is_map && args.type != JV_LIST && argi < nargs) {
        jinja_fail(vm, "not all arguments converted during string formatting");
    }
    return jinja_buf_jv(&out);
}
