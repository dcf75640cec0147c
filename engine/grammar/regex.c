/*
 * regex.c -- regex.h: a recursive-descent parser (its depth bounded by
 * LLM_RE_MAX_NEST) to a small syntax tree, Thompson's construction over
 * bytes (character classes as code-point ranges, written as UTF-8 byte
 * ranges the way RE2 does), then the subset construction over classes of
 * equivalent bytes.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "llm.h"
#include "regex.h"
#include "util/util.h"


/* ---- syntax tree ---------------------------------------------------------- */


enum { RN_CLASS, RN_CAT, RN_ALT, RN_REP };

typedef struct {
    int       type;
    int       first, next;             /* children, siblings (-1: none) */
    int       min, max;                /* RN_REP; max -1: unbounded */
    int       r0, nr;                  /* RN_CLASS: code-point ranges */
} re_node;

typedef struct {
    uint32_t  lo, hi;
} re_range;

typedef struct {
    const char  *s;
    size_t       len, pos;
    int          nest;
    re_node     *nodes;
    int          n_nodes, cap_nodes;
    re_range    *ranges;
    int          n_ranges, cap_ranges;
    char        *err;
} re_parser;


static int
re_fail(re_parser *p, const char *msg)
{
    if (p->err[0] == '\0') {
        llm_errf(p->err, "%s (at offset %zu)", msg, p->pos);
    }
    return -1;
}


static int
re_node_new(re_parser *p, int type)
{
    re_node  *n;

    if (p->n_nodes == p->cap_nodes) {
        p->cap_nodes = p->cap_nodes ? 2 * p->cap_nodes : 64;
        p->nodes = llm_xrealloc(p->nodes, sizeof(re_node) * p->cap_nodes);
    }
    n = &p->nodes[p->n_nodes];
    memset(n, 0, sizeof(*n));
    n->type = type;
    n->first = n->next = -1;
    return p->n_nodes++;
}


static void
re_add_child(re_parser *p, int parent, int child, int *last)
{
    if (*last < 0) {
        p->nodes[parent].first = child;
    } else {
        p->nodes[*last].next = child;
    }
    *last = child;
}


static void
re_range_push(re_parser *p, uint32_t lo, uint32_t hi)
{
    if (p->n_ranges == p->cap_ranges) {
        p->cap_ranges = p->cap_ranges ? 2 * p->cap_ranges : 64;
        p->ranges = llm_xrealloc(p->ranges, sizeof(re_range) * p->cap_ranges);
    }
    p->ranges[p->n_ranges].lo = lo;
    p->ranges[p->n_ranges].hi = hi;
    p->n_ranges++;
}


static int
re_range_cmp(const void *a, const void *b)
{
    const re_range  *x = a, *y = b;

    return x->lo < y->lo ? -1 : x->lo > y->lo;
}


/* Sorts and merges the ranges from r0 on, complements them within Unicode
 * when negate, and makes them a class node. */
static int
re_class_node(re_parser *p, int r0, int negate)
{
    int       i, n = p->n_ranges - r0, m = 0, id;
    uint32_t  next;
    re_range *r = p->ranges + r0;

    qsort(r, (size_t) n, sizeof(re_range), re_range_cmp);
    for (i = 0; i < n; i++) {
        if (m > 0 && r[i].lo <= r[m - 1].hi + 1) {
            if (r[i].hi > r[m - 1].hi) {
                r[m - 1].hi = r[i].hi;
            }
        } else {
            r[m++] = r[i];
        }
    }
    p->n_ranges = r0 + m;
    if (negate) {
        re_range  *copy = llm_xmalloc(sizeof(re_range) * ((size_t) m + 1));

        memcpy(copy, r, sizeof(re_range) * (size_t) m);

        p->n_ranges = r0;
        next = 0;
        for (i = 0; i < m; i++) {
            if (copy[i].lo > next) {
                re_range_push(p, next, copy[i].lo - 1);
            }
            next = copy[i].hi + 1;
        }
        if (next <= 0x10FFFF) {
            re_range_push(p, next, 0x10FFFF);
        }
        free(copy);
    }
    id = re_node_new(p, RN_CLASS);
    p->nodes[id].r0 = r0;
    p->nodes[id].nr = p->n_ranges - r0;
    return id;
}


/* ECMAScript's \s */
static void
re_space_ranges(re_parser *p)
{
    static const uint32_t  sp[][2] = {
        { 0x09, 0x0D }, { 0x20, 0x20 }, { 0xA0, 0xA0 }, { 0x1680, 0x1680 },
        { 0x2000, 0x200A }, { 0x2028, 0x2029 }, { 0x202F, 0x202F },
        { 0x205F, 0x205F }, { 0x3000, 0x3000 }, { 0xFEFF, 0xFEFF }
    };
    size_t  i;

    for (i = 0; i < sizeof(sp) / sizeof(sp[0]); i++) {
        re_range_push(p, sp[i][0], sp[i][1]);
    }
}


static int
re_hex(re_parser *p, int digits, uint32_t *out)
{
    int   i;
    char  c;

    *out = 0;
    for (i = 0; i < digits; i++) {
        if (p->pos >= p->len) {
            return re_fail(p, "pattern: a hex escape is cut short");
        }
        c = p->s[p->pos++];
        *out <<= 4;
        if (c >= '0' && c <= '9') {
            *out |= (uint32_t) (c - '0');
        } else if ((c | 0x20) >= 'a' && (c | 0x20) <= 'f') {
            *out |= (uint32_t) ((c | 0x20) - 'a' + 10);
        } else {
            return re_fail(p, "pattern: a bad hex escape");
        }
    }
    return 0;
}


/* One UTF-8 character of the pattern itself. */
static int
re_utf8(re_parser *p, uint32_t *cp)
{
    const unsigned char  *s = (const unsigned char *) p->s + p->pos;
    size_t                n = 1, left = p->len - p->pos, i;

    if (s[0] < 0x80) {
        *cp = s[0];
    } else {
        n = s[0] >= 0xF0 ? 4 : s[0] >= 0xE0 ? 3 : 2;
        if (n > left || !llm_utf8_valid((const char *) s, n)) {
            return re_fail(p, "pattern: not UTF-8");
        }
        *cp = s[0] & (0x3F >> (n - 1));
        for (i = 1; i < n; i++) {
            *cp = (*cp << 6) | (s[i] & 0x3F);
        }
    }
    p->pos += n;
    return 0;
}


/* After a backslash: a class escape (ranges pushed, *cp = -1) or one
 * character in *cp. */
static int
re_escape(re_parser *p, int in_class, int64_t *cp)
{
    char      c;
    uint32_t  u, lo;
    int       r0;

    if (p->pos >= p->len) {
        return re_fail(p, "pattern: a '\\' at the end");
    }
    c = p->s[p->pos++];
    *cp = -1;
    switch (c) {
    case 'd':
    case 'D':
    case 'w':
    case 'W':
    case 's':
    case 'S':
        r0 = p->n_ranges;
        if (c == 'd' || c == 'D') {
            re_range_push(p, '0', '9');
        } else if (c == 'w' || c == 'W') {
            re_range_push(p, '0', '9');
            re_range_push(p, 'A', 'Z');
            re_range_push(p, '_', '_');
            re_range_push(p, 'a', 'z');
        } else {
            re_space_ranges(p);
        }
        if (c == 'D' || c == 'W' || c == 'S') {
            int  id = re_class_node(p, r0, 1);

            /* the complement is in place: drop the node, keep the ranges */
            p->n_nodes--;
            (void) id;
        }
        return 0;
    case 't': *cp = '\t'; return 0;
    case 'n': *cp = '\n'; return 0;
    case 'v': *cp = '\v'; return 0;
    case 'f': *cp = '\f'; return 0;
    case 'r': *cp = '\r'; return 0;
    case '0':
        if (p->pos < p->len && p->s[p->pos] >= '0' && p->s[p->pos] <= '9') {
            return re_fail(p, "pattern: octal escapes are not supported");
        }
        *cp = 0;
        return 0;
    case 'x':
        if (re_hex(p, 2, &u) != 0) {
            return -1;
        }
        *cp = u;
        return 0;
    case 'u':
        if (p->pos < p->len && p->s[p->pos] == '{') {
            p->pos++;
            u = 0;
            while (p->pos < p->len && p->s[p->pos] != '}') {
                uint32_t  d;

                if (re_hex(p, 1, &d) != 0 || u > 0x10FFFF) {
                    return re_fail(p, "pattern: a bad \\u{...} escape");
                }
                u = (u << 4) | d;
            }
            if (p->pos >= p->len || u > 0x10FFFF) {
                return re_fail(p, "pattern: a bad \\u{...} escape");
            }
            p->pos++;
        } else {
            if (re_hex(p, 4, &u) != 0) {
                return -1;
            }
            if (u >= 0xD800 && u <= 0xDBFF && p->pos + 6 <= p->len
                && p->s[p->pos] == '\\' && p->s[p->pos + 1] == 'u')
            {
                p->pos += 2;
                if (re_hex(p, 4, &lo) != 0 || lo < 0xDC00 || lo > 0xDFFF) {
                    return re_fail(p, "pattern: half a surrogate pair");
                }
                u = 0x10000 + ((u - 0xD800) << 10) + (lo - 0xDC00);
            }
        }
        if (u >= 0xD800 && u <= 0xDFFF) {
            return re_fail(p, "pattern: half a surrogate pair");
        }
        *cp = u;
        return 0;
    case 'b':
        if (in_class) {
            *cp = '\b';
            return 0;
        }
        return re_fail(p, "pattern: \\b (a word boundary) is not supported");
    case '-':
        if (in_class) {
            *cp = '-';
            return 0;
        }
        break;
    case 'B':
        return re_fail(p, "pattern: \\B is not supported");
    case 'p':
    case 'P':
        return re_fail(p, "pattern: \\p{...} classes are not supported");
    case 'k':
        return re_fail(p, "pattern: named back-references are not supported");
    default:
        if (c >= '1' && c <= '9') {
            return re_fail(p, "pattern: back-references are not supported");
        }
        if (strchr("^$\\.*+?()[]{}|/", c) != NULL) {
            *cp = (unsigned char) c;
            return 0;
        }
        break;
    }
    return re_fail(p, "pattern: an unknown escape");
}


static int
re_class(re_parser *p)
{
    int      negate = 0, r0 = p->n_ranges;
    int64_t  lo, hi;
    uint32_t u;

    if (p->pos < p->len && p->s[p->pos] == '^') {
        negate = 1;
        p->pos++;
    }
    for ( ;; ) {
        if (p->pos >= p->len) {
            return re_fail(p, "pattern: a '[' without its ']'");
        }
        if (p->s[p->pos] == ']') {
            p->pos++;
            break;
        }
        if (p->s[p->pos] == '\\') {
            p->pos++;
            if (re_escape(p, 1, &lo) != 0) {
                return -1;
            }
            if (lo < 0) {
                continue;               /* \d and the like */
            }
        } else {
            if (re_utf8(p, &u) != 0) {
                return -1;
            }
            lo = u;
        }
        hi = lo;
        if (p->pos + 1 < p->len && p->s[p->pos] == '-'
            && p->s[p->pos + 1] != ']')
        {
            p->pos++;
            if (p->s[p->pos] == '\\') {
                p->pos++;
                if (re_escape(p, 1, &hi) != 0) {
                    return -1;
                }
                if (hi < 0) {
                    return re_fail(p, "pattern: a class escape ends a range");
                }
            } else {
                if (re_utf8(p, &u) != 0) {
                    return -1;
                }
                hi = u;
            }
            if (hi < lo) {
                return re_fail(p, "pattern: a range out of order");
            }
        }
        re_range_push(p, (uint32_t) lo, (uint32_t) hi);
    }
    return re_class_node(p, r0, negate);
}


static int re_alt(re_parser *p, int top);


static int
re_atom(re_parser *p)
{
    int64_t   cp;
    uint32_t  u;
    int       r0, id;
    char      c = p->s[p->pos];

    switch (c) {
    case '(':
        p->pos++;
        if (p->pos < p->len && p->s[p->pos] == '?') {
            if (p->pos + 1 < p->len && p->s[p->pos + 1] == ':') {
                p->pos += 2;
            } else {
                return re_fail(p, "pattern: look-arounds and named groups "
                               "are not supported");
            }
        }
        if (++p->nest > LLM_RE_MAX_NEST) {
            return re_fail(p, "pattern: groups nested too deep");
        }
        id = re_alt(p, 0);
        p->nest--;
        if (id < 0) {
            return -1;
        }
        if (p->pos >= p->len || p->s[p->pos] != ')') {
            return re_fail(p, "pattern: a '(' without its ')'");
        }
        p->pos++;
        return id;
    case '[':
        p->pos++;
        return re_class(p);
    case '.':
        p->pos++;
        r0 = p->n_ranges;
        re_range_push(p, '\n', '\n');
        re_range_push(p, '\r', '\r');
        re_range_push(p, 0x2028, 0x2029);
        return re_class_node(p, r0, 1);
    case '\\':
        p->pos++;
        r0 = p->n_ranges;
        if (re_escape(p, 0, &cp) != 0) {
            return -1;
        }
        if (cp >= 0) {
            re_range_push(p, (uint32_t) cp, (uint32_t) cp);
        }
        return re_class_node(p, r0, 0);
    case '*':
    case '+':
    case '?':
    case '{':
        return re_fail(p, "pattern: nothing to repeat");
    case ')':
        return re_fail(p, "pattern: a ')' without its '('");
    case ']':
    case '}':
        return re_fail(p, "pattern: a lone ']' or '}'");
    case '^':
    case '$':
        return re_fail(p, "pattern: '^' and '$' only at the start and the "
                       "end of the pattern");
    default:
        r0 = p->n_ranges;
        if (re_utf8(p, &u) != 0) {
            return -1;
        }
        re_range_push(p, u, u);
        return re_class_node(p, r0, 0);
    }
}


static int
re_number(re_parser *p, int *out)
{
    size_t  start = p->pos;
    long    v = 0;

    while (p->pos < p->len && p->s[p->pos] >= '0' && p->s[p->pos] <= '9') {
        v = v * 10 + (p->s[p->pos++] - '0');
        if (v > 1000) {
            return re_fail(p, "pattern: a repetition count above 1000");
        }
    }
    *out = (int) v;
    return p->pos > start ? 0 : -1;
}


static int
re_quant(re_parser *p)
{
    int  atom, rep, min, max;

    atom = re_atom(p);
    if (atom < 0 || p->pos >= p->len) {
        return atom;
    }
    switch (p->s[p->pos]) {
    case '*': min = 0; max = -1; p->pos++; break;
    case '+': min = 1; max = -1; p->pos++; break;
    case '?': min = 0; max = 1; p->pos++; break;
    case '{':
        p->pos++;
        if (re_number(p, &min) != 0) {
            return re_fail(p, "pattern: a bad {n,m}");
        }
        max = min;
        if (p->pos < p->len && p->s[p->pos] == ',') {
            p->pos++;
            max = -1;
            if (p->pos < p->len && p->s[p->pos] != '}'
                && re_number(p, &max) != 0)
            {
                return re_fail(p, "pattern: a bad {n,m}");
            }
        }
        if (p->pos >= p->len || p->s[p->pos] != '}'
            || (max >= 0 && max < min))
        {
            return re_fail(p, "pattern: a bad {n,m}");
        }
        p->pos++;
        break;
    default:
        return atom;
    }
    if (p->pos < p->len && p->s[p->pos] == '?') {
        p->pos++;                       /* lazy: the same strings match */
    }
    if (p->pos < p->len && strchr("*+?{", p->s[p->pos]) != NULL) {
        return re_fail(p, "pattern: nothing to repeat");
    }
    rep = re_node_new(p, RN_REP);
    p->nodes[rep].first = atom;
    p->nodes[rep].min = min;
    p->nodes[rep].max = max;
    return rep;
}


/* top: a top-level alternative may open with '^' and close with '$';
 * without them its match is wrapped in "anything" on that side */
static int
re_cat(re_parser *p, int top, int *anchored_start, int *anchored_end)
{
    int  cat = re_node_new(p, RN_CAT), last = -1, q;

    if (top && p->pos < p->len && p->s[p->pos] == '^') {
        p->pos++;
        *anchored_start = 1;
    }
    while (p->pos < p->len && p->s[p->pos] != '|' && p->s[p->pos] != ')') {
        if (top && p->s[p->pos] == '$'
            && (p->pos + 1 == p->len || p->s[p->pos + 1] == '|'))
        {
            p->pos++;
            *anchored_end = 1;
            break;
        }
        q = re_quant(p);
        if (q < 0) {
            return -1;
        }
        re_add_child(p, cat, q, &last);
    }
    return cat;
}


static int
re_any_star(re_parser *p)
{
    int  r0 = p->n_ranges, cls, rep;

    re_range_push(p, 0, 0x10FFFF);
    cls = re_class_node(p, r0, 0);
    rep = re_node_new(p, RN_REP);
    p->nodes[rep].first = cls;
    p->nodes[rep].min = 0;
    p->nodes[rep].max = -1;
    return rep;
}


/* top < 0: the whole must match (no anchors); top 1: JSON Schema's search */
static int
re_alt(re_parser *p, int top)
{
    int  alt = re_node_new(p, RN_ALT), last = -1, cat, as, ae, wrap, l2;

    for ( ;; ) {
        as = ae = 0;
        cat = re_cat(p, top > 0, &as, &ae);
        if (cat < 0) {
            return -1;
        }
        if (top > 0 && (!as || !ae)) {
            /* anything before and after: a new CAT of [.*] P [.*] */
            wrap = re_node_new(p, RN_CAT);
            l2 = -1;
            if (!as) {
                re_add_child(p, wrap, re_any_star(p), &l2);
            }
            re_add_child(p, wrap, cat, &l2);
            if (!ae) {
                re_add_child(p, wrap, re_any_star(p), &l2);
            }
            cat = wrap;
        }
        re_add_child(p, alt, cat, &last);
        if (p->pos >= p->len || p->s[p->pos] != '|') {
            break;
        }
        p->pos++;
    }
    return alt;
}


/* ---- NFA ------------------------------------------------------------------ */


typedef struct {
    uint64_t  set[4];                  /* kind 1: the bytes it takes */
    int       out, out1;               /* kind 0: epsilon moves (-1 none) */
    uint8_t   kind;                    /* 0 epsilon, 1 byte set, 2 match */
} nfa_state;

typedef struct {
    nfa_state  *st;
    int         n, cap;
    int         over;
} nfa;

typedef struct {
    int  s, e;                         /* e: an epsilon state, out unset */
} frag;


static int
nfa_new(nfa *a, int kind)
{
    if (a->n == a->cap) {
        a->cap = a->cap ? 2 * a->cap : 256;
        a->st = llm_xrealloc(a->st, sizeof(nfa_state) * a->cap);
    }
    memset(&a->st[a->n], 0, sizeof(nfa_state));
    a->st[a->n].kind = (uint8_t) kind;
    a->st[a->n].out = a->st[a->n].out1 = -1;
    if (a->n >= LLM_RE_MAX_NFA) {
        a->over = 1;
    }
    return a->n++;
}


static frag
frag_empty(nfa *a)
{
    frag  f;

    f.s = nfa_new(a, 0);
    f.e = nfa_new(a, 0);
    a->st[f.s].out = f.e;
    return f;
}


static void
frag_cat(nfa *a, frag *f, frag g)
{
    a->st[f->e].out = g.s;
    f->e = g.e;
}


static frag
frag_alt(nfa *a, frag *alts, int n)
{
    frag  f;
    int   i, s, prev;

    f.e = nfa_new(a, 0);
    f.s = prev = nfa_new(a, 0);
    for (i = 0; i < n; i++) {
        a->st[alts[i].e].out = f.e;
        if (i == n - 1) {
            a->st[prev].out = alts[i].s;
        } else {
            s = nfa_new(a, 0);
            a->st[prev].out = alts[i].s;
            a->st[prev].out1 = s;
            prev = s;
        }
    }
    if (n == 0) {
        a->st[f.s].out = f.e;
    }
    return f;
}


/* A chain of byte ranges. */
static frag
frag_bytes(nfa *a, const uint8_t *lo, const uint8_t *hi, int n)
{
    frag  f = frag_empty(a), g;
    int   i, b;

    for (i = 0; i < n; i++) {
        g.s = nfa_new(a, 1);
        g.e = nfa_new(a, 0);
        a->st[g.s].out = g.e;
        for (b = lo[i]; b <= hi[i]; b++) {
            a->st[g.s].set[b >> 6] |= (uint64_t) 1 << (b & 63);
        }
        frag_cat(a, &f, g);
    }
    return f;
}


static int
utf8_encode(uint32_t cp, uint8_t *b)
{
    if (cp < 0x80) {
        b[0] = (uint8_t) cp;
        return 1;
    }
    if (cp < 0x800) {
        b[0] = (uint8_t) (0xC0 | (cp >> 6));
        b[1] = (uint8_t) (0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        b[0] = (uint8_t) (0xE0 | (cp >> 12));
        b[1] = (uint8_t) (0x80 | ((cp >> 6) & 0x3F));
        b[2] = (uint8_t) (0x80 | (cp & 0x3F));
        return 3;
    }
    b[0] = (uint8_t) (0xF0 | (cp >> 18));
    b[1] = (uint8_t) (0x80 | ((cp >> 12) & 0x3F));
    b[2] = (uint8_t) (0x80 | ((cp >> 6) & 0x3F));
    b[3] = (uint8_t) (0x80 | (cp & 0x3F));
    return 4;
}


/* Code points lo..hi (surrogates skipped) as byte-range chains, RE2's
 * way: split until every byte position ranges independently.  The splits
 * halve the range's digits each time: at most a few dozen chains. */
static void
utf8_ranges(nfa *a, uint32_t lo, uint32_t hi, frag *out, int *n, int cap)
{
    static const uint32_t  lim[] = { 0x7F, 0x7FF, 0xFFFF, 0x10FFFF };
    uint8_t                 bl[4], bh[4];
    uint32_t                m;
    int                     i, k, len;

    if (lo > hi) {
        return;
    }
    if (lo <= 0xDFFF && hi >= 0xD800) {
        if (lo < 0xD800) {
            utf8_ranges(a, lo, 0xD7FF, out, n, cap);
        }
        if (hi > 0xDFFF) {
            utf8_ranges(a, 0xE000, hi, out, n, cap);
        }
        return;
    }
    for (i = 0; i < 3; i++) {
        if (lo <= lim[i] && hi > lim[i]) {
            utf8_ranges(a, lo, lim[i], out, n, cap);
            utf8_ranges(a, lim[i] + 1, hi, out, n, cap);
            return;
        }
    }
    len = utf8_encode(lo, bl);
    for (k = 1; k < len; k++) {
        m = ((uint32_t) 1 << (6 * k)) - 1;
        if ((lo & ~m) != (hi & ~m)) {
            if ((lo & m) != 0) {
                utf8_ranges(a, lo, lo | m, out, n, cap);
                utf8_ranges(a, (lo | m) + 1, hi, out, n, cap);
                return;
            }
            if ((hi & m) != m) {
                utf8_ranges(a, lo, (hi & ~m) - 1, out, n, cap);
                utf8_ranges(a, hi & ~m, hi, out, n, cap);
                return;
            }
        }
    }
    utf8_encode(hi, bh);
    if (*n < cap) {
        out[(*n)++] = frag_bytes(a, bl, bh, len);
    }
}


static frag
nfa_class(nfa *a, const re_range *r, int nr)
{
    frag      alts[512];
    int       n = 0, i, b, ascii;
    frag      f;

    /* the ASCII part in one byte set */
    ascii = nfa_new(a, 1);
    for (i = 0; i < nr; i++) {
        for (b = (int) r[i].lo; b <= (int) r[i].hi && b < 0x80; b++) {
            a->st[ascii].set[b >> 6] |= (uint64_t) 1 << (b & 63);
        }
    }
    f.s = ascii;
    f.e = nfa_new(a, 0);
    a->st[ascii].out = f.e;
    alts[n++] = f;
    for (i = 0; i < nr; i++) {
        if (r[i].hi >= 0x80) {
            utf8_ranges(a, r[i].lo < 0x80 ? 0x80 : r[i].lo, r[i].hi, alts, &n,
                        (int) (sizeof(alts) / sizeof(alts[0])));
        }
    }
    return frag_alt(a, alts, n);
}


/* Depth: the tree's, bounded by LLM_RE_MAX_NEST groups. */
static frag
nfa_build(nfa *a, const re_parser *p, int id)
{
    const re_node  *nd = &p->nodes[id];
    frag            f, g, alts[64], *many = alts;
    int             c, n, i;

    if (a->over) {
        return frag_empty(a);
    }
    switch (nd->type) {
    case RN_CLASS:
        return nfa_class(a, p->ranges + nd->r0, nd->nr);
    case RN_CAT:
        f = frag_empty(a);
        for (c = nd->first; c >= 0 && !a->over; c = p->nodes[c].next) {
            frag_cat(a, &f, nfa_build(a, p, c));
        }
        return f;
    case RN_ALT:
        for (n = 0, c = nd->first; c >= 0; c = p->nodes[c].next) {
            n++;
        }
        if (n > 64) {
            many = llm_xmalloc(sizeof(frag) * (size_t) n);
        }
        for (i = 0, c = nd->first; c >= 0; c = p->nodes[c].next) {
            many[i++] = nfa_build(a, p, c);
        }
        f = frag_alt(a, many, n);
        if (many != alts) {
            free(many);
        }
        return f;
    default:                            /* RN_REP */
        f = frag_empty(a);
        for (i = 0; i < nd->min && !a->over; i++) {
            frag_cat(a, &f, nfa_build(a, p, nd->first));
        }
        if (nd->max < 0) {
            g = nfa_build(a, p, nd->first);
            /* loop: s -> g -> s, s -> e */
            {
                int  s = nfa_new(a, 0), e = nfa_new(a, 0);

                a->st[s].out = g.s;
                a->st[s].out1 = e;
                a->st[g.e].out = s;
                g.s = s;
                g.e = e;
            }
            frag_cat(a, &f, g);
            return f;
        }
        for (i = nd->min; i < nd->max && !a->over; i++) {
            int  s = nfa_new(a, 0);

            g = nfa_build(a, p, nd->first);
            a->st[s].out = g.s;
            a->st[s].out1 = g.e;
            g.s = s;
            frag_cat(a, &f, g);
        }
        return f;
    }
}


/* ---- DFA ------------------------------------------------------------------ */


typedef struct {
    int       *items;                  /* all sets, one after the other */
    int        n_items, cap_items;
    int       *off, *len;              /* per DFA state */
    int        n, cap;
    int       *hash;                   /* open addressing: state + 1 */
    int        hcap;
} dfa_sets;


static uint32_t
set_hash(const int *s, int n)
{
    uint32_t  h = 2166136261u;
    int       i;

    for (i = 0; i < n; i++) {
        h = (h ^ (uint32_t) s[i]) * 16777619u;
    }
    return h;
}


static void
sets_rehash(dfa_sets *d)
{
    int       i;
    uint32_t  h;

    free(d->hash);
    d->hcap = d->hcap ? 2 * d->hcap : 1024;
    d->hash = llm_xcalloc((size_t) d->hcap, sizeof(int));
    for (i = 0; i < d->n; i++) {
        h = set_hash(d->items + d->off[i], d->len[i]) & (uint32_t) (d->hcap - 1);
        while (d->hash[h]) {
            h = (h + 1) & (uint32_t) (d->hcap - 1);
        }
        d->hash[h] = i + 1;
    }
}


/* The state of set s[0..n) (sorted), added when new (*added). */
static int
sets_find(dfa_sets *d, const int *s, int n, int *added)
{
    uint32_t  h;
    int       id;

    *added = 0;
    if (2 * (d->n + 1) > d->hcap) {
        sets_rehash(d);
    }
    h = set_hash(s, n) & (uint32_t) (d->hcap - 1);
    while ((id = d->hash[h]) != 0) {
        id--;
        if (d->len[id] == n && memcmp(d->items + d->off[id], s,
                                      sizeof(int) * (size_t) n) == 0)
        {
            return id;
        }
        h = (h + 1) & (uint32_t) (d->hcap - 1);
    }
    if (d->n == d->cap) {
        d->cap = d->cap ? 2 * d->cap : 64;
        d->off = llm_xrealloc(d->off, sizeof(int) * d->cap);
        d->len = llm_xrealloc(d->len, sizeof(int) * d->cap);
    }
    if (d->n_items + n > d->cap_items) {
        d->cap_items = 2 * (d->n_items + n) + 256;
        d->items = llm_xrealloc(d->items, sizeof(int) * d->cap_items);
    }
    memcpy(d->items + d->n_items, s, sizeof(int) * (size_t) n);
    d->off[d->n] = d->n_items;
    d->len[d->n] = n;
    d->n_items += n;
    d->hash[h] = d->n + 1;
    *added = 1;
    return d->n++;
}


static int
int_cmp(const void *a, const void *b)
{
    return *(const int *) a - *(const int *) b;
}


/* The epsilon closure of seeds (kept: byte-set and match states), sorted,
 * into out; stack has room for every state, mark is scratch, all zero
 * before and after (the visited states are listed in seen to clear). */
static int
nfa_closure(const nfa *a, int *stack, int ns, uint8_t *mark, int *seen,
    int *out)
{
    int  n = 0, i, s, n_seen = 0;

    for (i = 0; i < ns; i++) {
        mark[stack[i]] = 1;
        seen[n_seen++] = stack[i];
    }
    while (ns > 0) {
        s = stack[--ns];
        if (a->st[s].kind != 0) {
            out[n++] = s;
            continue;
        }
        if (a->st[s].out >= 0 && !mark[a->st[s].out]) {
            mark[a->st[s].out] = 1;
            seen[n_seen++] = a->st[s].out;
            stack[ns++] = a->st[s].out;
        }
        if (a->st[s].out1 >= 0 && !mark[a->st[s].out1]) {
            mark[a->st[s].out1] = 1;
            seen[n_seen++] = a->st[s].out1;
            stack[ns++] = a->st[s].out1;
        }
    }
    for (i = 0; i < n_seen; i++) {
        mark[seen[i]] = 0;
    }
    qsort(out, (size_t) n, sizeof(int), int_cmp);
    return n;
}


/* Only states that can reach an accepting one stay; the rest become -1
 * and the states are renumbered. */
static void
dfa_prune(llm_dfa *d)
{
    uint8_t  *live = llm_xcalloc((size_t) d->n + 1, 1);
    int      *map = llm_xmalloc(sizeof(int) * ((size_t) d->n + 1));
    int       i, b, t, changed = 1, m = 0;
    int16_t  *next;
    uint8_t  *acc;

    for (i = 0; i < d->n; i++) {
        live[i] = d->accept[i];
    }
    while (changed) {
        changed = 0;
        for (i = 0; i < d->n; i++) {
            if (live[i]) {
                continue;
            }
            for (b = 0; b < 256; b++) {
                t = d->next[(size_t) i * 256 + b];
                if (t >= 0 && live[t]) {
                    live[i] = 1;
                    changed = 1;
                    break;
                }
            }
        }
    }
    for (i = 0; i < d->n; i++) {
        map[i] = live[i] ? m++ : -1;
    }
    next = llm_xmalloc(sizeof(int16_t) * 256 * ((size_t) m + 1));
    acc = llm_xcalloc((size_t) m + 1, 1);
    for (i = 0; i < d->n; i++) {
        if (map[i] < 0) {
            continue;
        }
        acc[map[i]] = d->accept[i];
        for (b = 0; b < 256; b++) {
            t = d->next[(size_t) i * 256 + b];
            next[(size_t) map[i] * 256 + b] = (int16_t) (t >= 0 ? map[t] : -1);
        }
    }
    d->start = d->start >= 0 ? map[d->start] : -1;
    free(d->next);
    free(d->accept);
    d->next = next;
    d->accept = acc;
    d->n = m;
    free(live);
    free(map);
}


static int
dfa_from_nfa(const nfa *a, int start, llm_dfa *d, char *err)
{
    dfa_sets   sets = { 0 };
    uint8_t   *mark;
    int        cls[256], rep[256], n_cls = 0, i, b, k, s, ns, added, id;
    int       *seeds, *out, *seen;
    int        cur, cap = 256;
    int        split[512];
    long       work = 0;

    /* bytes no set tells apart share a class; continuation bytes apart */
    memset(cls, 0, sizeof(cls));
    for (b = 0x80; b < 0xC0; b++) {
        cls[b] = 1;
    }
    n_cls = 2;
    for (s = 0; s < a->n; s++) {
        if (a->st[s].kind != 1) {
            continue;
        }
        for (i = 0; i < 2 * n_cls; i++) {
            split[i] = -1;
        }
        k = n_cls;
        for (b = 0; b < 256; b++) {
            int  in = (int) ((a->st[s].set[b >> 6] >> (b & 63)) & 1);
            int  key = cls[b] * 2 + in;

            if (split[key] < 0) {
                /* the first part keeps the class's id */
                split[key] = (split[cls[b] * 2 + !in] < 0) ? cls[b] : k++;
            }
            cls[b] = split[key];
        }
        n_cls = k;
    }
    for (i = 0; i < n_cls; i++) {
        rep[i] = -1;
    }
    for (b = 0; b < 256; b++) {
        if (rep[cls[b]] < 0) {
            rep[cls[b]] = b;
        }
    }

    mark = llm_xcalloc((size_t) a->n, 1);
    seeds = llm_xmalloc(sizeof(int) * ((size_t) a->n + 1));
    out = llm_xmalloc(sizeof(int) * ((size_t) a->n + 1));
    seen = llm_xmalloc(sizeof(int) * ((size_t) a->n + 1));
    d->n = 0;
    d->next = llm_xmalloc(sizeof(int16_t) * 256 * (size_t) cap);
    d->accept = llm_xmalloc((size_t) cap);
    d->lens = NULL;

    seeds[0] = start;
    ns = nfa_closure(a, seeds, 1, mark, seen, out);
    sets_find(&sets, out, ns, &added);
    for (cur = 0; cur < sets.n; cur++) {
        if (sets.n > LLM_RE_MAX_DFA) {
            llm_errf(err, "pattern: more than %d DFA states", LLM_RE_MAX_DFA);
            goto fail;
        }
        if (cur >= cap) {
            cap *= 2;
            d->next = llm_xrealloc(d->next, sizeof(int16_t) * 256 * (size_t) cap);
            d->accept = llm_xrealloc(d->accept, (size_t) cap);
        }
        d->accept[cur] = 0;
        for (i = 0; i < sets.len[cur]; i++) {
            if (a->st[sets.items[sets.off[cur] + i]].kind == 2) {
                d->accept[cur] = 1;
            }
        }
        for (k = 0; k < n_cls; k++) {
            b = rep[k];
            ns = 0;
            for (i = 0; i < sets.len[cur]; i++) {
                s = sets.items[sets.off[cur] + i];
                if (a->st[s].kind == 1
                    && ((a->st[s].set[b >> 6] >> (b & 63)) & 1))
                {
                    seeds[ns++] = a->st[s].out;
                }
            }
            id = -1;
            work += ns + sets.len[cur];
            if (work > LLM_RE_MAX_WORK) {
                llm_errf(err, "pattern: too complex to compile (more than "
                         "%d steps)", LLM_RE_MAX_WORK);
                goto fail;
            }
            if (ns > 0) {
                /* seeds may repeat: closure marks them once */
                int  j, m = 0;

                for (j = 0; j < ns; j++) {
                    if (!mark[seeds[j]]) {
                        mark[seeds[j]] = 1;
                        seeds[m++] = seeds[j];
                    }
                }
                for (j = 0; j < m; j++) {
                    mark[seeds[j]] = 0;
                }
                ns = nfa_closure(a, seeds, m, mark, seen, out);
                id = ns > 0 ? sets_find(&sets, out, ns, &added) : -1;
            }
            for (b = 0; b < 256; b++) {
                if (cls[b] == k) {
                    d->next[(size_t) cur * 256 + b] = (int16_t) id;
                }
            }
        }
    }
    d->n = sets.n;
    d->start = 0;
    free(sets.items);
    free(sets.off);
    free(sets.len);
    free(sets.hash);
    free(mark);
    free(seeds);
    free(out);
    free(seen);
    dfa_prune(d);
    return 0;

fail:
    free(sets.items);
    free(sets.off);
    free(sets.len);
    free(sets.hash);
    free(mark);
    free(seeds);
    free(out);
    free(seen);
    llm_dfa_free(d);
    return -1;
}


int
llm_regex_compile(const char *re, size_t len, int anchored, llm_dfa *d,
    char *err)
{
    re_parser  p = { 0 };
    nfa        a = { 0 };
    frag       f;
    int        root, match, rc = -1;

    memset(d, 0, sizeof(*d));
    err[0] = '\0';
    p.s = re;
    p.len = len;
    p.err = err;
    root = re_alt(&p, anchored ? -1 : 1);
    if (root >= 0 && p.pos < p.len) {
        root = re_fail(&p, "pattern: a ')' without its '('");
    }
    if (root < 0) {
        goto done;
    }
    f = nfa_build(&a, &p, root);
    if (a.over) {
        llm_errf(err, "pattern: more than %d NFA states", LLM_RE_MAX_NFA);
        goto done;
    }
    match = nfa_new(&a, 2);
    a.st[f.e].out = match;
    rc = dfa_from_nfa(&a, f.s, d, err);

done:
    free(p.nodes);
    free(p.ranges);
    free(a.st);
    return rc;
}


int
llm_dfa_intersect(const llm_dfa *x, const llm_dfa *y, llm_dfa *d, char *err)
{
    int     *map, *queue, n = 0, head = 0, cap = 64, s, t, b, tx, ty;
    size_t   pairs = (size_t) x->n * (size_t) y->n;

    memset(d, 0, sizeof(*d));
    if (x->start < 0 || y->start < 0 || pairs == 0) {
        d->start = -1;
        d->next = llm_xmalloc(256 * sizeof(int16_t));
        d->accept = llm_xcalloc(1, 1);
        return 0;
    }
    map = llm_xmalloc(sizeof(int) * pairs);
    memset(map, 0xff, sizeof(int) * pairs);
    queue = llm_xmalloc(sizeof(int) * pairs);
    d->next = llm_xmalloc(sizeof(int16_t) * 256 * (size_t) cap);
    d->accept = llm_xmalloc((size_t) cap);
    map[(size_t) x->start * y->n + y->start] = n;
    queue[n++] = x->start * y->n + y->start;
    while (head < n) {
        if (n > LLM_RE_MAX_DFA) {
            free(map);
            free(queue);
            llm_dfa_free(d);
            llm_errf(err, "pattern and format together: more than %d DFA "
                     "states", LLM_RE_MAX_DFA);
            return -1;
        }
        s = queue[head];
        if (head >= cap || n >= cap) {
            cap = 2 * (n > head ? n : head) + 64;
            d->next = llm_xrealloc(d->next, sizeof(int16_t) * 256 * (size_t) cap);
            d->accept = llm_xrealloc(d->accept, (size_t) cap);
        }
        d->accept[head] = x->accept[s / y->n] && y->accept[s % y->n];
        for (b = 0; b < 256; b++) {
            tx = x->next[(size_t) (s / y->n) * 256 + b];
            ty = y->next[(size_t) (s % y->n) * 256 + b];
            if (tx < 0 || ty < 0) {
                d->next[(size_t) head * 256 + b] = -1;
                continue;
            }
            t = tx * y->n + ty;
            if (map[t] < 0) {
                map[t] = n;
                queue[n++] = t;
            }
            d->next[(size_t) head * 256 + b] = (int16_t) map[t];
        }
        head++;
    }
    d->n = n;
    d->start = 0;
    free(map);
    free(queue);
    dfa_prune(d);
    return 0;
}


/* bit operations on LLM_RE_LEN_WORDS words: lengths 0..255, 256 = more */

static void
lens_shift1(const uint64_t *in, uint64_t *out)
{
    int  w;

    for (w = LLM_RE_LEN_WORDS - 1; w >= 0; w--) {
        out[w] = (in[w] << 1) | (w > 0 ? in[w - 1] >> 63 : 0);
    }
    /* 255 -> 256 and 256 stays */
    out[4] = (out[4] & 1) | (in[4] & 1) | ((in[3] >> 63) & 1);
}


void
llm_dfa_lengths(llm_dfa *d)
{
    uint64_t  *L, tmp[LLM_RE_LEN_WORDS];
    int        s, b, t, w, changed = 1;

    if (d->lens || d->n == 0) {
        return;
    }
    L = llm_xcalloc((size_t) d->n * LLM_RE_LEN_WORDS, sizeof(uint64_t));
    for (s = 0; s < d->n; s++) {
        if (d->accept[s]) {
            L[(size_t) s * LLM_RE_LEN_WORDS] = 1;
        }
    }
    /* lens[s] = {0 if accepting} | lens[t] + cost(b); continuation bytes
     * cost nothing, every other byte starts a character */
    while (changed) {
        changed = 0;
        for (s = 0; s < d->n; s++) {
            uint64_t  *ls = L + (size_t) s * LLM_RE_LEN_WORDS;

            for (b = 0; b < 256; b++) {
                t = d->next[(size_t) s * 256 + b];
                if (t < 0) {
                    continue;
                }
                if (b >= 0x80 && b < 0xC0) {
                    memcpy(tmp, L + (size_t) t * LLM_RE_LEN_WORDS, sizeof(tmp));
                } else {
                    lens_shift1(L + (size_t) t * LLM_RE_LEN_WORDS, tmp);
                }
                for (w = 0; w < LLM_RE_LEN_WORDS; w++) {
                    if ((ls[w] | tmp[w]) != ls[w]) {
                        ls[w] |= tmp[w];
                        changed = 1;
                    }
                }
            }
        }
    }
    d->lens = L;
}


int
llm_dfa_len_ok(const llm_dfa *d, int s, int lo, int hi)
{
    const uint64_t  *L = d->lens + (size_t) s * LLM_RE_LEN_WORDS;
    int              k;

    if (lo < 0) {
        lo = 0;
    }
    if (hi >= 0 && hi < lo) {
        return 0;
    }
    if (hi < 0 || hi > 256) {
        hi = 256;
    }
    for (k = lo; k <= hi && k <= 256; k++) {
        if ((L[k >> 6] >> (k & 63)) & 1) {
            return 1;
        }
    }
    return 0;
}


void
llm_dfa_free(llm_dfa *d)
{
    free(d->next);
    free(d->accept);
    free(d->lens);
    memset(d, 0, sizeof(*d));
    d->start = -1;
}
