/*
 * grammar_mask.c -- grammar_mask.h: the vocabulary tries and the walk.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "grammar/grammar_mask.h"
#include "util/util.h"

typedef struct {
    uint8_t   byte;
    uint8_t   pad;
    uint16_t  depth;                 /* 1: a first byte */
    int32_t   tok;                   /* a token whose text ends here, or -1 */
    int32_t   end;                   /* the node after this subtree */
} gv_node;

typedef struct {
    gv_node  *nodes;
    int       n;
    int       max_depth;
} gv_trie;

struct llm_gvocab {
    int        vocab;
    gv_trie    full, other;          /* every token; the not plain ones */
    int32_t   *dup;                  /* the next token of the same text */
    uint8_t   *plain;                /* 0, or the characters (1..254) */
    float     *refused;              /* vocab times -INFINITY, to copy */
};


static const llm_gtexts  *gv_sort_tt;


static int
gv_cmp(const void *a, const void *b)
{
    const llm_gtexts  *tt = gv_sort_tt;
    int32_t                 x = *(const int32_t *) a, y = *(const int32_t *) b;
    int                     lx = tt->len[x], ly = tt->len[y], r;

    r = memcmp(tt->bytes + tt->off[x], tt->bytes + tt->off[y],
               (size_t) (lx < ly ? lx : ly));
    if (r != 0) {
        return r;
    }
    if (lx != ly) {
        return lx < ly ? -1 : 1;
    }
    return x < y ? -1 : x > y;
}


/* ids sorted by text: the preorder trie, with their duplicates chained */
static void
gv_build(gv_trie *t, const llm_gtexts *tt, const int32_t *ids, int n,
    int32_t *dup)
{
    int         *stack = NULL, sp = 0, cap_stack = 0, i, l, k, len, cap = 0;
    int32_t      id, prev = -1;
    const char  *s, *ps = NULL;

    t->nodes = NULL;
    t->n = 0;
    t->max_depth = 0;
    for (i = 0; i < n; i++) {
        id = ids[i];
        s = tt->bytes + tt->off[id];
        len = tt->len[id];
        l = 0;
        if (prev >= 0) {
            int  pl = tt->len[prev];

            while (l < len && l < pl && s[l] == ps[l]) {
                l++;
            }
        }
        /* close the nodes below the common prefix */
        while (sp > l) {
            t->nodes[stack[--sp]].end = t->n;
        }
        if (l == len && prev >= 0 && len == tt->len[prev]) {
            /* the same text again */
            dup[id] = dup[prev];
            dup[prev] = id;
            prev = id;
            ps = s;
            continue;
        }
        for (k = l; k < len; k++) {
            if (t->n == cap) {
                cap = cap ? 2 * cap : 4096;
                t->nodes = llm_xrealloc(t->nodes, sizeof(gv_node) * (size_t) cap);
            }
            if (sp == cap_stack) {
                cap_stack = cap_stack ? 2 * cap_stack : 64;
                stack = llm_xrealloc(stack, sizeof(int) * (size_t) cap_stack);
            }
            t->nodes[t->n].byte = (uint8_t) s[k];
            t->nodes[t->n].pad = 0;
            t->nodes[t->n].depth = (uint16_t) (k + 1);
            t->nodes[t->n].tok = -1;
            t->nodes[t->n].end = -1;
            stack[sp++] = t->n++;
        }
        if (len > t->max_depth) {
            t->max_depth = len;
        }
        t->nodes[stack[sp - 1]].tok = id;
        prev = id;
        ps = s;
    }
    while (sp > 0) {
        t->nodes[stack[--sp]].end = t->n;
    }
    free(stack);
}


/* plain: whole UTF-8 characters, none of them '"', '\\' or a control
 * byte; the count of characters, or 0 */
static int
gv_plain(const char *s, int len)
{
    int  i = 0, chars = 0;

    if (len <= 0 || !llm_utf8_valid(s, (size_t) len)) {
        return 0;
    }
    for (i = 0; i < len; i++) {
        unsigned char  c = (unsigned char) s[i];

        if (c == '"' || c == '\\' || c < 0x20) {
            return 0;
        }
        chars += (c & 0xC0) != 0x80;
    }
    return chars > 254 ? 254 : chars;
}


llm_gvocab *
llm_gvocab_create(const llm_gtexts *tt, int vocab)
{
    llm_gvocab  *v = llm_xcalloc(1, sizeof(*v));
    int32_t     *ids, *other;
    int          i, n = 0, m = 0;

    v->vocab = vocab;
    v->plain = llm_xcalloc((size_t) vocab + 1, 1);
    v->dup = llm_xmalloc(sizeof(int32_t) * ((size_t) vocab + 1));
    v->refused = llm_xmalloc(sizeof(float) * ((size_t) vocab + 1));
    for (i = 0; i < vocab; i++) {
        v->refused[i] = -INFINITY;
    }
    ids = llm_xmalloc(sizeof(int32_t) * ((size_t) tt->n + 1));
    other = llm_xmalloc(sizeof(int32_t) * ((size_t) tt->n + 1));
    for (i = 0; i < vocab; i++) {
        v->dup[i] = -1;
    }
    for (i = 0; i < tt->n && i < vocab; i++) {
        if (tt->len[i] <= 0) {
            continue;
        }
        ids[n++] = i;
        v->plain[i] = (uint8_t) gv_plain(tt->bytes + tt->off[i], tt->len[i]);
    }
    gv_sort_tt = tt;
    qsort(ids, (size_t) n, sizeof(int32_t), gv_cmp);
    gv_sort_tt = NULL;
    for (i = 0; i < n; i++) {
        if (!v->plain[ids[i]]) {
            other[m++] = ids[i];
        }
    }
    gv_build(&v->full, tt, ids, n, v->dup);
    /* the second trie shares the chains: a duplicate text is plain or not
     * as its first is */
    {
        int32_t  *dup2 = llm_xmalloc(sizeof(int32_t) * ((size_t) vocab + 1));

        for (i = 0; i < vocab; i++) {
            dup2[i] = -1;
        }
        gv_build(&v->other, tt, other, m, dup2);
        free(dup2);
    }
    free(ids);
    free(other);
    return v;
}


void
llm_gvocab_free(llm_gvocab *v)
{
    if (v == NULL) {
        return;
    }
    free(v->full.nodes);
    free(v->other.nodes);
    free(v->dup);
    free(v->plain);
    free(v->refused);
    free(v);
}


void
llm_gmask_scratch_free(llm_gmask_scratch *w)
{
    int  i;

    for (i = 0; i < LLM_GMASK_CACHE; i++) {
        free(w->cache[i].key);
        free(w->cache[i].ids);
    }
    free(w->key);
    free(w->levels);
    free(w->ids);
    free(w->vals);
    memset(w, 0, sizeof(*w));
}


static void
gm_reserve(llm_gmask_scratch *w, const llm_gvocab *v)
{
    int  depth = v->full.max_depth + 1;

    if (w->n_levels < depth) {
        free(w->levels);
        w->levels = llm_xmalloc(sizeof(llm_grammar_state) * (size_t) depth);
        w->n_levels = depth;
    }
    if (w->key == NULL) {
        w->key = llm_xmalloc(LLM_GMASK_KEY_MAX);
    }
    if (w->cap < v->vocab) {
        free(w->ids);
        free(w->vals);
        w->ids = llm_xmalloc(sizeof(int32_t) * (size_t) v->vocab);
        w->vals = llm_xmalloc(sizeof(float) * (size_t) v->vocab);
        w->cap = v->vocab;
    }
}


/* The tokens of trie t the grammar takes from s, into w->ids. */
static int
gm_walk(const llm_gvocab *v, const gv_trie *t, const llm_grammar *g,
    const llm_grammar_state *s, llm_gmask_scratch *w)
{
    const gv_node  *nd = t->nodes;
    int             i = 0, n = 0, d;
    int32_t         tok;

    while (i < t->n) {
        d = nd[i].depth;
        if (llm_grammar_step(g, d == 1 ? s : &w->levels[d - 1], nd[i].byte,
                             &w->levels[d]) != 0)
        {
            i = nd[i].end;
            continue;
        }
        for (tok = nd[i].tok; tok >= 0; tok = v->dup[tok]) {
            w->ids[n++] = tok;
        }
        i++;
    }
    return n;
}


/* The walk's ids for s, from the cache or walked (and then cached). */
static const int32_t *
gm_ids(const llm_gvocab *v, const llm_grammar *g, const llm_grammar_state *s,
    int room, llm_gmask_scratch *w, int *n)
{
    llm_gmask_entry  *e, *victim = &w->cache[0];
    size_t            len = llm_grammar_state_key(g, s, w->key,
                                                  LLM_GMASK_KEY_MAX);
    int               i;

    for (i = 0; len && i < LLM_GMASK_CACHE; i++) {
        e = &w->cache[i];
        if (e->key_len == len && memcmp(e->key, w->key, len) == 0) {
            e->used = ++w->clock;
            w->hits++;
            *n = e->n_ids;
            return e->ids;
        }
        if (e->used < victim->used) {
            victim = e;
        }
    }
    w->misses++;
    *n = gm_walk(v, room >= 0 ? &v->other : &v->full, g, s, w);
    if (len == 0 || *n > LLM_GMASK_IDS_MAX) {
        return w->ids;
    }
    free(victim->key);
    free(victim->ids);
    victim->key = llm_xmalloc(len);
    memcpy(victim->key, w->key, len);
    victim->key_len = len;
    victim->ids = llm_xmalloc(sizeof(int32_t) * ((size_t) *n + 1));
    memcpy(victim->ids, w->ids, sizeof(int32_t) * (size_t) *n);
    victim->n_ids = *n;
    victim->used = ++w->clock;
    return victim->ids;
}


int
llm_grammar_mask(const llm_gvocab *v, const llm_grammar *g,
    const llm_grammar_state *s, float *logits, llm_gmask_scratch *w)
{
    const uint8_t  *plain = v->plain;
    const int32_t  *ids;
    int             room, n, k, i, any = 0, V = v->vocab;

    gm_reserve(w, v);
    room = llm_grammar_string_room(g, s);
    ids = gm_ids(v, g, s, room, w, &n);
    for (k = 0; k < n; k++) {
        w->vals[k] = logits[ids[k]];
        any |= w->vals[k] != -INFINITY;
    }
    if (room == 255) {
        /* every plain token stays: eight at a time, skipping the groups
         * without a zero (most of them) */
        const uint64_t  lo = 0x0101010101010101ULL, hi = 0x8080808080808080ULL;
        uint64_t        x;

        for (i = 0; i + 8 <= V; i += 8) {
            memcpy(&x, plain + i, 8);
            if (((x - lo) & ~x & hi) == 0) {
                continue;
            }
            for (k = i; k < i + 8; k++) {
                if (plain[k] == 0) {
                    logits[k] = -INFINITY;
                }
            }
        }
        for ( ; i < V; i++) {
            if (plain[i] == 0) {
                logits[i] = -INFINITY;
            }
        }
        for (i = 0; i < V && !any; i++) {
            any = logits[i] != -INFINITY;
        }
    } else if (room >= 0) {
        /* plain tokens of at most room characters stay */
        uint8_t  r = (uint8_t) room;

        for (i = 0; i < V; i++) {
            if ((uint8_t) (plain[i] - 1) >= r) {
                logits[i] = -INFINITY;
            }
        }
        for (i = 0; i < V && !any; i++) {
            any = logits[i] != -INFINITY;
        }
    } else {
        memcpy(logits, v->refused, sizeof(float) * (size_t) V);
    }
    for (k = 0; k < n; k++) {
        logits[ids[k]] = w->vals[k];
    }
    return any;
}
