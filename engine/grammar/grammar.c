/*
 * grammar.c -- the automaton of grammar.h over a compiled grammar
 * (grammar_impl.h), and the cache of compiled grammars.
 *
 * A configuration's top frame takes each byte; a frame that completes is
 * popped and its parent told (a number or a text that could go on learns
 * it has ended from the byte after it, which then goes to the parent); a
 * frame that needs a value pushes the value's node on the first byte of
 * it, forking the configuration for each alternative the node may be.
 * Whitespace (between a JSON value's tokens only, never in fixed text):
 * one space, or a newline and at most LLM_JSON_MAX_INDENT spaces or tabs,
 * as json_grammar.c allows.
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "grammar_impl.h"
#include "llm.h"
#include "util/util.h"


enum { R_FAIL = -1, R_OK = 0, R_DONE, R_REFEED, R_PUSH };

enum { O_OPEN, O_FIRST, O_KEY, O_KEYIN, O_COLON, O_VALUE, O_VALIN, O_AFTER };
enum { A_OPEN, A_FIRST, A_ITEM, A_VALIN, A_AFTER };
enum { S_OPEN, S_CH, S_ESC, S_HEX, S_UTF8 };
enum { N_START, N_MINUS, N_ZERO, N_INT, N_DOT, N_FRAC, N_E, N_ESIGN, N_EXP };
enum { Q_BEFORE, Q_IN };

static const int64_t  g_pow10[19] = {
    1LL, 10LL, 100LL, 1000LL, 10000LL, 100000LL, 1000000LL, 10000000LL,
    100000000LL, 1000000000LL, 10000000000LL, 100000000000LL,
    1000000000000LL, 10000000000000LL, 100000000000000LL,
    1000000000000000LL, 10000000000000000LL, 100000000000000000LL,
    1000000000000000000LL
};


int
g_trie_child(const llm_grammar *g, int node, unsigned char c)
{
    int  t;

    for (t = g->trie[node].child; t >= 0; t = g->trie[t].sibling) {
        if (g->trie[t].byte == c) {
            return t;
        }
    }
    return -1;
}


/* 1: whitespace taken; 0: not whitespace (the gap ends); -1: refused */
static int
g_ws(uint8_t *ws, unsigned char c)
{
    if (c == ' ' || c == '\t') {
        if (*ws == 0 && c == ' ') {
            *ws = 255;
            return 1;
        }
        if (*ws == 0 || *ws > LLM_JSON_MAX_INDENT) {
            return -1;
        }
        (*ws)++;
        return 1;
    }
    if (c == '\n') {
        if (*ws != 0) {
            return -1;
        }
        *ws = 1;
        return 1;
    }
    *ws = 0;
    return 0;
}


static void
g_frame_init(const llm_grammar *g, llm_gframe *f, int node)
{
    const g_node  *nd = &g->nodes[node];

    memset(f, 0, sizeof(*f));
    f->node = (uint16_t) node;
    switch (nd->type) {
    case G_ANY:
        if (nd->object_only) {
            llm_json_init(&f->u.js);
        } else {
            llm_json_init_value(&f->u.js);
        }
        break;
    case G_LITSET:
        f->j = nd->trie;
        break;
    case G_STRING:
    case G_REGEX:
        f->j = nd->dfa >= 0 ? g->dfas[nd->dfa].start : -1;
        break;
    default:
        break;
    }
}


static void
g_cfg_copy(llm_gcfg *dst, const llm_gcfg *src)
{
    memcpy(dst, src, offsetof(llm_gcfg, fr)
                     + sizeof(llm_gframe) * (size_t) src->depth);
}


/* Enters node at the top of out->c[ci]: its first alternative that fits
 * there, the others in forks that enter theirs on the same byte. */
static int
g_enter(const llm_grammar *g, llm_grammar_state *out, int ci, int node)
{
    const g_node  *nd = &g->nodes[node];
    llm_gcfg      *cfg = &out->c[ci], *nc;
    int            k, a, first = -1;

    for (k = 0; k < nd->n_alts; k++) {
        a = g->alt_list[nd->alts + k];
        if (cfg->depth + g->nodes[a].mindepth > LLM_G_MAX_FRAMES) {
            continue;
        }
        if (first < 0) {
            first = a;
            continue;
        }
        if (out->n < LLM_G_MAX_CFGS) {
            nc = &out->c[out->n++];
            g_cfg_copy(nc, cfg);
            nc->pend = a;
        }
    }
    if (first < 0) {
        return -1;
    }
    g_frame_init(g, &cfg->fr[cfg->depth++], first);
    return 0;
}


/* Pops the top frame and tells its parent, up the stack while sequences
 * end. */
static void
g_pop(const llm_grammar *g, llm_gcfg *cfg)
{
    llm_gframe     *p;
    const g_node   *pn;

    for ( ;; ) {
        cfg->depth--;
        if (cfg->depth == 0) {
            cfg->done = 1;
            cfg->ws = 0;
            return;
        }
        p = &cfg->fr[cfg->depth - 1];
        pn = &g->nodes[p->node];
        switch (pn->type) {
        case G_OBJECT:
            p->phase = O_AFTER;
            p->ws = 0;
            return;
        case G_ARRAY:
            p->phase = A_AFTER;
            p->i++;
            p->ws = 0;
            return;
        default:                        /* G_SEQ */
            if (++p->i < pn->n) {
                p->phase = Q_BEFORE;
                return;
            }
            break;                      /* the sequence is done too */
        }
    }
}


/* ---- objects -------------------------------------------------------------- */


static uint64_t
g_from(int i)
{
    return i >= 64 ? 0 : ~(uint64_t) 0 << i;
}


/* The properties that may come next at i: in schema order, up to the
 * first required one, each able to complete within the depth left. */
static uint64_t
g_obj_allowed(const llm_grammar *g, const g_node *nd, int i, int depth)
{
    uint64_t  m = nd->usable & g_from(i), req = nd->required & g_from(i), r;
    int       b;

    if (req) {
        b = __builtin_ctzll(req);
        m &= b == 63 ? ~(uint64_t) 0 : ((uint64_t) 1 << (b + 1)) - 1;
    }
    for (r = m; r; r &= r - 1) {
        b = __builtin_ctzll(r);
        if (depth + g->nodes[g->props[nd->a + b].node].mindepth
            > LLM_G_MAX_FRAMES)
        {
            m &= ~((uint64_t) 1 << b);
        }
    }
    return m;
}


static int
g_obj_extras(const llm_grammar *g, const g_node *nd, int i, int depth)
{
    return nd->item >= 0 && (nd->required & g_from(i)) == 0
           && depth + g->nodes[nd->item].mindepth <= LLM_G_MAX_FRAMES;
}


static int
g_extra_key_byte(unsigned char c)
{
    return c >= 0x20 && c < 0x7f && c != '"' && c != '\\';
}


static int
g_object(const llm_grammar *g, const g_node *nd, llm_gcfg *cfg,
    llm_gframe *f, unsigned char c, int *push)
{
    uint64_t  allowed;
    int       w, t, p, depth = cfg->depth;

    if (f->phase == O_OPEN) {
        if (c != '{') {
            return R_FAIL;
        }
        f->phase = O_FIRST;
        return R_OK;
    }
    if (f->phase != O_KEYIN) {
        w = g_ws(&f->ws, c);
        if (w != 0) {
            return w > 0 ? R_OK : R_FAIL;
        }
    }
    switch (f->phase) {
    case O_FIRST:
        if (c == '}') {
            return (nd->required & g_from(f->i)) ? R_FAIL : R_DONE;
        }
        /* fall through */
    case O_KEY:
        if (c != '"') {
            return R_FAIL;
        }
        allowed = g_obj_allowed(g, nd, f->i, depth);
        t = g_trie_child(g, nd->trie, '"');
        if ((t < 0 || !(g->trie[t].mask & allowed))
            && !g_obj_extras(g, nd, f->i, depth))
        {
            return R_FAIL;
        }
        f->j = t;
        f->f = 1;                       /* could still be an extra key */
        f->phase = O_KEYIN;
        return R_OK;
    case O_KEYIN:
        allowed = g_obj_allowed(g, nd, f->i, depth);
        t = f->j >= 0 ? g_trie_child(g, f->j, c) : -1;
        /* a '"' ends the key, unless it is an escaped one of a declared
         * name (the trie goes on after it) */
        if (c == '"' && (t < 0 || g->trie[t].term >= 0)) {
            if (t >= 0 && g->trie[t].term >= 0) {
                p = g->trie[t].term;
                if (!((allowed >> p) & 1)) {
                    return R_FAIL;      /* a name declared, not allowed here */
                }
                f->j = p;
                f->i = p + 1;
            } else {
                if (!f->f || !g_obj_extras(g, nd, f->i, depth)) {
                    return R_FAIL;
                }
                f->j = -1;
                f->i = nd->n;
            }
            f->phase = O_COLON;
            f->ws = 0;
            return R_OK;
        }
        if (!g_extra_key_byte(c)) {
            f->f = 0;
        }
        if (!(t >= 0 && (g->trie[t].mask & allowed))
            && !(f->f && g_obj_extras(g, nd, f->i, depth)))
        {
            return R_FAIL;
        }
        f->j = t;
        return R_OK;
    case O_COLON:
        if (c != ':') {
            return R_FAIL;
        }
        f->phase = O_VALUE;
        return R_OK;
    case O_VALUE:
        *push = f->j >= 0 ? g->props[nd->a + f->j].node : nd->item;
        f->phase = O_VALIN;
        return R_PUSH;
    case O_AFTER:
        if (c == ',') {
            if (!g_obj_allowed(g, nd, f->i, depth)
                && !g_obj_extras(g, nd, f->i, depth))
            {
                return R_FAIL;
            }
            f->phase = O_KEY;
            return R_OK;
        }
        if (c == '}') {
            return (nd->required & g_from(f->i)) ? R_FAIL : R_DONE;
        }
        return R_FAIL;
    }
    return R_FAIL;
}


/* ---- arrays --------------------------------------------------------------- */


static int
g_array(const llm_grammar *g, const g_node *nd, llm_gcfg *cfg,
    llm_gframe *f, unsigned char c, int *push)
{
    int  w, fits = cfg->depth + g->nodes[nd->item].mindepth <= LLM_G_MAX_FRAMES;

    if (f->phase == A_OPEN) {
        if (c != '[') {
            return R_FAIL;
        }
        f->phase = A_FIRST;
        return R_OK;
    }
    w = g_ws(&f->ws, c);
    if (w != 0) {
        return w > 0 ? R_OK : R_FAIL;
    }
    switch (f->phase) {
    case A_FIRST:
        if (c == ']') {
            return nd->min == 0 ? R_DONE : R_FAIL;
        }
        if (!fits || nd->max == 0) {
            return R_FAIL;
        }
        /* fall through */
    case A_ITEM:
        *push = nd->item;
        f->phase = A_VALIN;
        return R_PUSH;
    case A_AFTER:
        if (c == ',') {
            if ((nd->max >= 0 && f->i >= nd->max) || !fits) {
                return R_FAIL;
            }
            f->phase = A_ITEM;
            return R_OK;
        }
        if (c == ']') {
            return f->i >= nd->min ? R_DONE : R_FAIL;
        }
        return R_FAIL;
    }
    return R_FAIL;
}


/* ---- strings -------------------------------------------------------------- */


/* One byte of the string's value (decoded); starts: it begins a
 * character. */
static int
g_str_char(const llm_grammar *g, const g_node *nd, llm_gframe *f,
    unsigned char c, int starts)
{
    const llm_dfa  *d;
    int             cnt, t;

    /* characters are counted only for a length: a string without one has
     * the same state all along (and the mask's cache finds it) */
    cnt = f->i + (nd->min > 0 || nd->max >= 0 ? starts : 0);
    if (nd->max >= 0 && cnt > nd->max) {
        return -1;
    }
    if (nd->dfa >= 0) {
        d = &g->dfas[nd->dfa];
        t = d->next[(size_t) f->j * 256 + c];
        if (t < 0) {
            return -1;
        }
        if (d->lens && !llm_dfa_len_ok(d, t, nd->min - cnt,
                                       nd->max < 0 ? -1 : nd->max - cnt))
        {
            return -1;
        }
        f->j = t;
    }
    f->i = cnt;
    return 0;
}


static int
g_unescape(unsigned char c)
{
    switch (c) {
    case '"': return '"';
    case '\\': return '\\';
    case '/': return '/';
    case 'b': return '\b';
    case 'f': return '\f';
    case 'n': return '\n';
    case 'r': return '\r';
    case 't': return '\t';
    default: return -1;
    }
}


static int
g_string(const llm_grammar *g, const g_node *nd, llm_gframe *f,
    unsigned char c)
{
    static const char  escs[] = "\"\\/bfnrt";
    llm_gframe         tmp;
    int                k, u;

    switch (f->phase) {
    case S_OPEN:
        if (c != '"') {
            return R_FAIL;
        }
        f->phase = S_CH;
        return R_OK;
    case S_CH:
        if (c == '"') {
            if (f->i < nd->min
                || (nd->dfa >= 0 && !g->dfas[nd->dfa].accept[f->j]))
            {
                return R_FAIL;
            }
            return R_DONE;
        }
        if (c == '\\') {
            /* only when some escape can follow */
            for (k = 0; escs[k]; k++) {
                tmp = *f;
                if (g_str_char(g, nd, &tmp, (unsigned char) g_unescape(escs[k]),
                               1) == 0)
                {
                    break;
                }
            }
            if (!escs[k] && nd->strict) {
                return R_FAIL;
            }
            f->phase = S_ESC;
            return R_OK;
        }
        if (c < 0x20) {
            return R_FAIL;
        }
        if (c < 0x80) {
            return g_str_char(g, nd, f, c, 1) == 0 ? R_OK : R_FAIL;
        }
        f->u.s.lo = 0x80;
        f->u.s.hi = 0xBF;
        if (c >= 0xC2 && c <= 0xDF) {
            f->u.s.left = 1;
        } else if (c >= 0xE0 && c <= 0xEF) {
            f->u.s.left = 2;
            f->u.s.lo = c == 0xE0 ? 0xA0 : 0x80;
            f->u.s.hi = c == 0xED ? 0x9F : 0xBF;
        } else if (c >= 0xF0 && c <= 0xF4) {
            f->u.s.left = 3;
            f->u.s.lo = c == 0xF0 ? 0x90 : 0x80;
            f->u.s.hi = c == 0xF4 ? 0x8F : 0xBF;
        } else {
            return R_FAIL;
        }
        if (g_str_char(g, nd, f, c, 1) != 0) {
            return R_FAIL;
        }
        f->phase = S_UTF8;
        return R_OK;
    case S_ESC:
        if (c == 'u' && !nd->strict) {
            f->phase = S_HEX;
            f->u.s.left = 4;
            return R_OK;
        }
        u = g_unescape(c);
        if (u < 0 || g_str_char(g, nd, f, (unsigned char) u, 1) != 0) {
            return R_FAIL;
        }
        f->phase = S_CH;
        return R_OK;
    case S_HEX:
        if (!((c >= '0' && c <= '9') || ((c | 0x20) >= 'a' && (c | 0x20) <= 'f'))) {
            return R_FAIL;
        }
        if (--f->u.s.left == 0) {
            f->phase = S_CH;
        }
        return R_OK;
    case S_UTF8:
        if (c < f->u.s.lo || c > f->u.s.hi
            || g_str_char(g, nd, f, c, 0) != 0)
        {
            return R_FAIL;
        }
        f->u.s.lo = 0x80;
        f->u.s.hi = 0xBF;
        if (--f->u.s.left == 0) {
            f->phase = S_CH;
        }
        return R_OK;
    }
    return R_FAIL;
}


/* ---- numbers -------------------------------------------------------------- */


static int
g_num_meets(const g_node *nd, int neg, int64_t lo, int64_t hi)
{
    int64_t  a = neg ? -hi : lo, b = neg ? -lo : hi;

    return (a > nd->L ? a : nd->L) <= (b < nd->H ? b : nd->H);
}


/* Whether the number so far can still end within the bounds. */
static int
g_num_feasible(const g_node *nd, const llm_gframe *f, int dot)
{
    int64_t  G = g_pow10[nd->F], P = f->u.num.p, base, span;
    int      k = f->u.num.k, n = f->u.num.n, e;

    if (!nd->bounded) {
        return 1;
    }
    if (k == 0) {
        return g_num_meets(nd, f->f, 0, g_pow10[nd->I] * G - 1);
    }
    if (dot) {
        span = g_pow10[nd->F - n];
        base = P * G + (int64_t) f->u.num.q * span;
        return g_num_meets(nd, f->f, base, base + span - 1);
    }
    if (P == 0) {
        return g_num_meets(nd, f->f, 0, G - 1);
    }
    for (e = 0; k + e <= nd->I; e++) {
        if (g_num_meets(nd, f->f, P * g_pow10[e] * G,
                        (P + 1) * g_pow10[e] * G - 1))
        {
            return 1;
        }
    }
    return 0;
}


static int
g_num_can_end(const g_node *nd, const llm_gframe *f)
{
    int64_t  v;

    switch (f->phase) {
    case N_ZERO:
    case N_INT:
    case N_FRAC:
    case N_EXP:
        break;
    default:
        return 0;
    }
    if (!nd->bounded) {
        return 1;
    }
    v = f->u.num.p * g_pow10[nd->F]
        + (f->phase == N_FRAC
           ? (int64_t) f->u.num.q * g_pow10[nd->F - f->u.num.n] : 0);
    if (f->f) {
        v = -v;
    }
    return v >= nd->L && v <= nd->H;
}


static int
g_number(const g_node *nd, llm_gframe *f, unsigned char c)
{
    llm_gframe  t = *f;
    int         digit = c >= '0' && c <= '9', d = c - '0';

    switch (f->phase) {
    case N_START:
        if (c == '-') {
            t.f = 1;
            t.phase = N_MINUS;
            if (!g_num_feasible(nd, &t, 0)) {
                return R_FAIL;
            }
            *f = t;
            return R_OK;
        }
        /* fall through */
    case N_MINUS:
        if (!digit) {
            return R_FAIL;
        }
        t.u.num.p = d;
        t.u.num.k = 1;
        t.phase = d == 0 ? N_ZERO : N_INT;
        break;
    case N_INT:
        if (digit) {
            if (t.u.num.k >= nd->I) {
                return R_FAIL;
            }
            t.u.num.p = t.u.num.p * 10 + d;
            t.u.num.k++;
            break;
        }
        /* fall through */
    case N_ZERO:
        if (c == '.' && !nd->integer) {
            t.phase = N_DOT;
            if (!g_num_feasible(nd, &t, 1)) {
                return R_FAIL;
            }
            *f = t;
            return R_OK;
        }
        if ((c == 'e' || c == 'E') && nd->exp) {
            f->phase = N_E;
            return R_OK;
        }
        return g_num_can_end(nd, f) ? R_REFEED : R_FAIL;
    case N_DOT:
    case N_FRAC:
        if (digit && t.u.num.n < nd->F) {
            t.u.num.q = nd->bounded ? t.u.num.q * 10 + d : 0;
            t.u.num.n++;
            t.phase = N_FRAC;
            if (!g_num_feasible(nd, &t, 1)) {
                return R_FAIL;
            }
            *f = t;
            return R_OK;
        }
        if (f->phase == N_DOT) {
            return R_FAIL;
        }
        if ((c == 'e' || c == 'E') && nd->exp) {
            f->phase = N_E;
            return R_OK;
        }
        return g_num_can_end(nd, f) ? R_REFEED : R_FAIL;
    case N_E:
        if (c == '+' || c == '-') {
            f->phase = N_ESIGN;
            return R_OK;
        }
        /* fall through */
    case N_ESIGN:
        if (!digit) {
            return R_FAIL;
        }
        f->phase = N_EXP;
        f->u.num.k = 1;
        return R_OK;
    case N_EXP:
        if (digit && f->u.num.k < 2) {
            f->u.num.k++;
            return R_OK;
        }
        return R_REFEED;
    default:
        return R_FAIL;
    }
    if (!g_num_feasible(nd, &t, 0)) {
        return R_FAIL;
    }
    *f = t;
    return R_OK;
}


/* ---- one byte ------------------------------------------------------------- */


static int
g_frame_byte(const llm_grammar *g, llm_gcfg *cfg, llm_gframe *f,
    unsigned char c, int *push)
{
    const g_node    *nd = &g->nodes[f->node];
    const llm_dfa   *d;
    llm_json_state   st;
    int              t;

    switch (nd->type) {
    case G_ANY:
        if (llm_json_value_may_end(&f->u.js) && !nd->object_only) {
            st = f->u.js;
            if (llm_json_feed(&st, (const char *) &c, 1) == 0
                && !llm_json_complete(&st))
            {
                f->u.js = st;
                return R_OK;
            }
            return R_REFEED;
        }
        if (llm_json_feed(&f->u.js, (const char *) &c, 1) != 0) {
            return R_FAIL;
        }
        return llm_json_complete(&f->u.js) ? R_DONE : R_OK;
    case G_LIT:
        if ((unsigned char) g->lits[nd->a + f->i] != c) {
            return R_FAIL;
        }
        return ++f->i == nd->n ? R_DONE : R_OK;
    case G_LITSET:
        t = g_trie_child(g, f->j, c);
        if (t >= 0) {
            f->j = t;
            return g->trie[t].term >= 0 && g->trie[t].child < 0
                   ? R_DONE : R_OK;
        }
        return g->trie[f->j].term >= 0 ? R_REFEED : R_FAIL;
    case G_STRING:
        return g_string(g, nd, f, c);
    case G_NUMBER:
        return g_number(nd, f, c);
    case G_OBJECT:
        return g_object(g, nd, cfg, f, c, push);
    case G_ARRAY:
        return g_array(g, nd, cfg, f, c, push);
    case G_SEQ:
        if (f->phase != Q_BEFORE) {
            return R_FAIL;
        }
        f->phase = Q_IN;
        *push = g->kids[nd->a + f->i];
        return R_PUSH;
    case G_REGEX:
        d = &g->dfas[nd->dfa];
        t = d->next[(size_t) f->j * 256 + c];
        if (t >= 0) {
            f->j = t;
            return R_OK;
        }
        return d->accept[f->j] ? R_REFEED : R_FAIL;
    }
    return R_FAIL;
}


/* json_grammar's J_DONE at depth 0 also counts as complete for a value */
static int
g_cfg_byte(const llm_grammar *g, llm_grammar_state *out, int ci,
    unsigned char c)
{
    llm_gcfg  *cfg = &out->c[ci];
    int        r, push = -1;

    if (cfg->pend >= 0) {
        g_frame_init(g, &cfg->fr[cfg->depth++], cfg->pend);
        cfg->pend = -1;
    }
    for ( ;; ) {
        if (cfg->depth == 0) {
            return g->trail_ws && g_ws(&cfg->ws, c) == 1 ? 0 : -1;
        }
        r = g_frame_byte(g, cfg, &cfg->fr[cfg->depth - 1], c, &push);
        switch (r) {
        case R_OK:
            return 0;
        case R_DONE:
            g_pop(g, cfg);
            return 0;
        case R_REFEED:
            g_pop(g, cfg);
            continue;
        case R_PUSH:
            if (g_enter(g, out, ci, push) != 0) {
                return -1;
            }
            cfg = &out->c[ci];
            continue;
        default:
            return -1;
        }
    }
}


static int
g_cfg_eq(const llm_gcfg *a, const llm_gcfg *b)
{
    return a->depth == b->depth && a->done == b->done && a->ws == b->ws
           && memcmp(a->fr, b->fr, sizeof(llm_gframe) * a->depth) == 0;
}


int
llm_grammar_step(const llm_grammar *g, const llm_grammar_state *in,
    unsigned char c, llm_grammar_state *out)
{
    uint8_t  dead[LLM_G_MAX_CFGS];
    int      k, x, w, y, dup;

    out->n = 0;
    for (k = 0; k < in->n; k++) {
        x = out->n++;
        g_cfg_copy(&out->c[x], &in->c[k]);
        for ( ; x < out->n; x++) {
            dead[x] = g_cfg_byte(g, out, x, c) != 0;
        }
    }
    /* the live ones, each once */
    for (w = 0, x = 0; x < out->n; x++) {
        if (dead[x]) {
            continue;
        }
        for (dup = 0, y = 0; y < w && !dup; y++) {
            dup = g_cfg_eq(&out->c[y], &out->c[x]);
        }
        if (dup) {
            continue;
        }
        if (w != x) {
            g_cfg_copy(&out->c[w], &out->c[x]);
        }
        w++;
    }
    out->n = w;
    return w > 0 ? 0 : -1;
}


void
llm_grammar_state_copy(llm_grammar_state *dst, const llm_grammar_state *src)
{
    int  k;

    dst->n = src->n;
    for (k = 0; k < src->n; k++) {
        g_cfg_copy(&dst->c[k], &src->c[k]);
    }
}


int
llm_grammar_feed(const llm_grammar *g, llm_grammar_state *s,
    const char *bytes, size_t n)
{
    llm_grammar_state  *tmp;
    size_t              i;
    int                 rc = 0;

    if (n == 0) {
        return 0;
    }
    tmp = llm_xmalloc(sizeof(*tmp));
    for (i = 0; i < n && rc == 0; i++) {
        rc = llm_grammar_step(g, s, (unsigned char) bytes[i], tmp);
        if (rc == 0) {
            llm_grammar_state_copy(s, tmp);
        }
    }
    free(tmp);
    return rc;
}


void
llm_grammar_init(const llm_grammar *g, llm_grammar_state *s)
{
    int  x;

    s->n = 1;
    memset(&s->c[0], 0, offsetof(llm_gcfg, fr));
    s->c[0].pend = -1;
    if (g_enter(g, s, 0, g->root) != 0) {
        s->n = 0;
        return;
    }
    /* the forks enter their alternatives now */
    for (x = 1; x < s->n; x++) {
        g_frame_init(g, &s->c[x].fr[s->c[x].depth++], s->c[x].pend);
        s->c[x].pend = -1;
    }
}


static int
g_rest_nullable(const llm_grammar *g, const g_node *nd, int from)
{
    int  k;

    for (k = from; k < nd->n; k++) {
        if (!g->nodes[g->kids[nd->a + k]].nullable) {
            return 0;
        }
    }
    return 1;
}


static int
g_cfg_can_end(const llm_grammar *g, const llm_gcfg *cfg)
{
    const llm_gframe  *f;
    const g_node      *nd;
    int                d, ok;

    if (cfg->done) {
        return 1;
    }
    if (cfg->depth == 0) {
        return 0;
    }
    f = &cfg->fr[cfg->depth - 1];
    nd = &g->nodes[f->node];
    switch (nd->type) {
    case G_ANY:
        ok = !nd->object_only && llm_json_value_may_end(&f->u.js);
        break;
    case G_NUMBER:
        ok = g_num_can_end(nd, f);
        break;
    case G_LITSET:
        ok = g->trie[f->j].term >= 0;
        break;
    case G_REGEX:
        ok = g->dfas[nd->dfa].accept[f->j];
        break;
    case G_SEQ:
        ok = f->phase == Q_BEFORE && g_rest_nullable(g, nd, f->i);
        break;
    default:
        ok = 0;
    }
    for (d = cfg->depth - 2; ok && d >= 0; d--) {
        nd = &g->nodes[cfg->fr[d].node];
        ok = nd->type == G_SEQ && g_rest_nullable(g, nd, cfg->fr[d].i + 1);
    }
    return ok;
}


int
llm_grammar_complete(const llm_grammar *g, const llm_grammar_state *s)
{
    int  k;

    for (k = 0; k < s->n; k++) {
        if (g_cfg_can_end(g, &s->c[k])) {
            return 1;
        }
    }
    return 0;
}


size_t
llm_grammar_state_key(const llm_grammar *g, const llm_grammar_state *s,
    void *buf, size_t cap)
{
    size_t  n = sizeof(uint64_t) + sizeof(int), k, len;
    char   *p = buf;

    if (n > cap) {
        return 0;
    }
    memcpy(p, &g->id, sizeof(uint64_t));
    memcpy(p + sizeof(uint64_t), &s->n, sizeof(int));
    for (k = 0; k < (size_t) s->n; k++) {
        len = offsetof(llm_gcfg, fr) + sizeof(llm_gframe) * s->c[k].depth;
        if (n + len > cap) {
            return 0;
        }
        memcpy(p + n, &s->c[k], len);
        n += len;
    }
    return n;
}


int
llm_grammar_string_room(const llm_grammar *g, const llm_grammar_state *s)
{
    const llm_gframe  *f;
    const g_node      *nd;
    int                room;

    if (s->n != 1 || s->c[0].depth == 0) {
        return -1;
    }
    f = &s->c[0].fr[s->c[0].depth - 1];
    nd = &g->nodes[f->node];
    if (nd->type == G_ANY) {
        return llm_json_in_string(&f->u.js) ? 255 : -1;
    }
    if (nd->type != G_STRING || f->phase != S_CH || nd->dfa >= 0) {
        return -1;
    }
    if (nd->max < 0) {
        return 255;
    }
    room = nd->max - f->i;
    return room > 254 ? 254 : room;
}


/* ---- the cache ------------------------------------------------------------ */


static pthread_mutex_t  g_cache_lock = PTHREAD_MUTEX_INITIALIZER;
static llm_grammar     *g_cache[LLM_GRAMMAR_CACHE];
static uint64_t         g_cache_used[LLM_GRAMMAR_CACHE], g_cache_clock;


llm_grammar *
llm_grammar_get(const char *spec, size_t len, char *err)
{
    llm_grammar  *g;
    int           i, victim = 0;

    pthread_mutex_lock(&g_cache_lock);
    for (i = 0; i < LLM_GRAMMAR_CACHE; i++) {
        g = g_cache[i];
        if (g && g->key_len == len && memcmp(g->key, spec, len) == 0) {
            g->refs++;
            g_cache_used[i] = ++g_cache_clock;
            pthread_mutex_unlock(&g_cache_lock);
            return g;
        }
    }
    pthread_mutex_unlock(&g_cache_lock);

    g = llm_grammar_compile(spec, len, err);
    if (g == NULL) {
        return NULL;
    }
    g->key = llm_xmalloc(len + 1);
    memcpy(g->key, spec, len);
    g->key[len] = '\0';
    g->key_len = len;
    g->refs = 2;                        /* the caller's and the cache's */

    pthread_mutex_lock(&g_cache_lock);
    for (i = 0; i < LLM_GRAMMAR_CACHE; i++) {
        if (g_cache[i] == NULL) {
            victim = i;
            break;
        }
        if (g_cache_used[i] < g_cache_used[victim]) {
            victim = i;
        }
    }
    if (g_cache[victim] && --g_cache[victim]->refs == 0) {
        llm_grammar_free(g_cache[victim]);
    }
    g_cache[victim] = g;
    g_cache_used[victim] = ++g_cache_clock;
    pthread_mutex_unlock(&g_cache_lock);
    return g;
}


void
llm_grammar_release(llm_grammar *g)
{
    int  last;

    if (g == NULL) {
        return;
    }
    pthread_mutex_lock(&g_cache_lock);
    last = --g->refs == 0;
    pthread_mutex_unlock(&g_cache_lock);
    if (last) {
        llm_grammar_free(g);
    }
}


char *
llm_structured_spec(const char *kind, const char *json, size_t len)
{
    size_t  k = strlen(kind);
    char   *s = llm_xmalloc(k + len + 6);

    s[0] = '{';
    s[1] = '"';
    memcpy(s + 2, kind, k);
    s[k + 2] = '"';
    s[k + 3] = ':';
    memcpy(s + k + 4, json, len);
    s[k + 4 + len] = '}';
    s[k + 5 + len] = '\0';
    return s;
}


int
llm_structured_check(const char *spec, char *err)
{
    llm_grammar  *g = llm_grammar_get(spec, strlen(spec), err);

    if (g == NULL) {
        return -1;
    }
    llm_grammar_release(g);
    return 0;
}
