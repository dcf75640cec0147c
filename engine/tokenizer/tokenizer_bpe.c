/*
 * tokenizer_bpe.c -- the BPE model of tokenizer.json: vocabulary, merge
 * ranks, and the merge loop of HF's models/bpe (word.rs merge_all).
 *
 * A word starts as one symbol per character (byte fallback to <0xNN>
 * tokens, or <unk>, for characters the vocabulary lacks); then the pair of
 * adjacent symbols with the lowest merge rank is merged until no pair has a
 * rank.  Candidates sit in a binary min-heap ordered by (rank, position), and
 * symbols in a doubly linked list, so a word of n characters costs
 * O(n log n) however long it is (SentencePiece-style models have no
 * pre-tokenizer, so a whole paragraph can be one word).  Nothing is cached
 * between calls: the tokenizer stays read-only and memory stays bounded.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tokenizer_impl.h"
#include "util/util.h"


typedef struct {
    int32_t   id;
    int32_t   prev;
    int32_t   next;
    uint32_t  len;      /* bytes of the word it covers; 0 once merged away */
} llm_bpe_sym;

typedef struct {
    uint32_t  rank;
    uint32_t  pos;
    int32_t   new_id;
} llm_bpe_cand;


/* ---- merge table: open addressing on the pair of ids ---- */

static uint64_t
llm_bpe_mix(uint64_t k)
{
    k ^= k >> 33;
    k *= 0xff51afd7ed558ccdull;
    k ^= k >> 33;
    k *= 0xc4ceb9fe1a85ec53ull;
    k ^= k >> 33;
    return k;
}


static int
llm_bpe_merge_get(const llm_tokenizer *t, int32_t a, int32_t b,
    uint32_t *rank, int32_t *new_id)
{
    uint64_t  key = ((uint64_t) (uint32_t) a << 32) | (uint32_t) b;
    uint64_t  j;

    if (t->merge_key == NULL) {
        return 0;
    }
    for (j = llm_bpe_mix(key) & t->merge_mask; t->merge_key[j] != UINT64_MAX;
         j = (j + 1) & t->merge_mask)
    {
        if (t->merge_key[j] == key) {
            *rank = t->merge_rank[j];
            *new_id = t->merge_new[j];
            return 1;
        }
    }
    return 0;
}


static void
llm_bpe_merge_put(llm_tokenizer *t, int32_t a, int32_t b, uint32_t rank,
    int32_t new_id)
{
    uint64_t  key = ((uint64_t) (uint32_t) a << 32) | (uint32_t) b;
    uint64_t  j;

    for (j = llm_bpe_mix(key) & t->merge_mask; t->merge_key[j] != UINT64_MAX;
         j = (j + 1) & t->merge_mask)
    {
        if (t->merge_key[j] == key) {
            break;              /* a repeated pair: the later rank wins, as
                                   in HF's HashMap collect */
        }
    }
    t->merge_key[j] = key;
    t->merge_rank[j] = rank;
    t->merge_new[j] = new_id;
}


/* ---- loading ---- */

static char *
llm_bpe_opt_str(yajl_val model, const char *key)
{
    const char  *s = llm_tok_json_str(model, key);

    return (s && s[0]) ? llm_xstrdup(s) : NULL;
}


static int
llm_bpe_load_vocab(llm_tokenizer *t, const llm_tok_bpe_src *src, char *err)
{
    size_t                      i;
    int32_t                     id, max_id = -1;
    const llm_tok_vocab_entry  *e;

    if (!src->have_vocab) {
        llm_errf(err, "model has no \"vocab\" object");
        return -1;
    }
    llm_tok_map_init(&t->vocab, src->n_vocab);
    for (i = 0; i < src->n_vocab; i++) {
        e = &src->vocab[i];
        llm_tok_map_put(&t->vocab, t->arena.p, e->off, e->len, e->id);
        if (e->id > max_id) {
            max_id = e->id;
        }
    }
    t->n_ids = max_id + 1;
    t->str_off = llm_xmalloc(((size_t) t->n_ids + 1) * sizeof(uint32_t));
    t->str_len = llm_xmalloc(((size_t) t->n_ids + 1) * sizeof(uint32_t));
    t->added_of = llm_xmalloc(((size_t) t->n_ids + 1) * sizeof(int32_t));
    for (id = 0; id < t->n_ids; id++) {
        t->str_off[id] = UINT32_MAX;
        t->str_len[id] = UINT32_MAX;
        t->added_of[id] = -1;
    }
    for (i = 0; i < src->n_vocab; i++) {
        /* a repeated key: the map and the id table both keep the last */
        e = &src->vocab[i];
        t->str_off[e->id] = e->off;
        t->str_len[e->id] = e->len;
    }
    return 0;
}


static int
llm_bpe_load_merges(llm_tokenizer *t, const llm_tok_bpe_src *src, char *err)
{
    size_t           i, cap = 16, plen, alen, blen;
    const char      *a, *b;
    const uint32_t  *m;
    int32_t          ida, idb, idn;
    llm_tok_buf      tmp = { 0 };

    while (cap < src->n_merges * 2) {
        cap *= 2;
    }
    t->merge_key = llm_xmalloc(cap * sizeof(uint64_t));
    t->merge_rank = llm_xmalloc(cap * sizeof(uint32_t));
    t->merge_new = llm_xmalloc(cap * sizeof(int32_t));
    memset(t->merge_key, 0xff, cap * sizeof(uint64_t));
    t->merge_mask = (uint32_t) (cap - 1);
    plen = t->cont_prefix ? strlen(t->cont_prefix) : 0;

    for (i = 0; i < src->n_merges; i++) {
        m = &src->merges[i * 4];
        a = src->mbuf.p + m[0];
        alen = m[1];
        b = src->mbuf.p + m[2];
        blen = m[3];
        ida = llm_tok_map_get(&t->vocab, t->arena.p, a, alen);
        idb = llm_tok_map_get(&t->vocab, t->arena.p, b, blen);
        if (ida < 0 || idb < 0) {
            llm_errf(err, "model.merges[%zu]: \"%.*s\" is not in the "
                     "vocabulary", i, (int) (ida < 0 ? alen : blen),
                     ida < 0 ? a : b);
            goto failed;
        }
        /* the merged token is a + b without b's continuing-subword prefix */
        tmp.len = 0;
        llm_tok_buf_put(&tmp, a, alen);
        if (blen >= plen) {
            llm_tok_buf_put(&tmp, b + plen, blen - plen);
        }
        idn = llm_tok_map_get(&t->vocab, t->arena.p, tmp.p, tmp.len);
        if (idn < 0) {
            llm_errf(err, "model.merges[%zu]: the merged token \"%s\" is not "
                     "in the vocabulary", i, tmp.p);
            goto failed;
        }
        llm_bpe_merge_put(t, ida, idb, (uint32_t) i, idn);
    }
    llm_tok_buf_free(&tmp);
    return 0;

failed:
    llm_tok_buf_free(&tmp);
    return -1;
}


int
llm_tok_bpe_load(llm_tokenizer *t, yajl_val model,
    const llm_tok_bpe_src *src, char *err)
{
    const char  *unk;
    char         name[8];
    int          b;

    t->ignore_merges = llm_tok_json_bool(model, "ignore_merges", 0);
    t->byte_fallback = llm_tok_json_bool(model, "byte_fallback", 0);
    t->fuse_unk = llm_tok_json_bool(model, "fuse_unk", 0);
    t->cont_prefix = llm_bpe_opt_str(model, "continuing_subword_prefix");
    t->end_suffix = llm_bpe_opt_str(model, "end_of_word_suffix");

    if (llm_bpe_load_vocab(t, src, err) != 0
        || llm_bpe_load_merges(t, src, err) != 0)
    {
        return -1;
    }
    unk = llm_tok_json_str(model, "unk_token");
    if (unk != NULL) {
        /* an unk_token missing from the vocabulary is an error in HF only
         * when it is needed; we then drop the character, as without unk */
        t->unk_id = llm_tok_map_get(&t->vocab, t->arena.p, unk, strlen(unk));
    }
    for (b = 0; b < 256; b++) {
        snprintf(name, sizeof(name), "<0x%02X>", b);
        t->byte_ids[b] = llm_tok_map_get(&t->vocab, t->arena.p, name, 6);
    }
    for (b = 0; b < 0x800; b++) {
        t->char_ids[b] = llm_tok_map_get(&t->vocab, t->arena.p, name,
                                         llm_utf8_encode((uint32_t) b, name));
    }
    return 0;
}


void
llm_tok_bpe_free(llm_tokenizer *t)
{
    llm_tok_map_free(&t->vocab);
    free(t->merge_key);
    free(t->merge_rank);
    free(t->merge_new);
    free(t->cont_prefix);
    free(t->end_suffix);
}


void
llm_tok_bpe_ctx_free(llm_tok_ctx *c)
{
    free(c->bpe_sym);
    free(c->bpe_heap);
    c->bpe_sym = c->bpe_heap = NULL;
    c->bpe_sym_cap = c->bpe_heap_cap = 0;
}


/* ---- encoding one word ---- */

typedef struct {
    llm_tok_ctx   *c;
    llm_bpe_sym   *sym;
    size_t         n;
    llm_bpe_cand  *heap;
    size_t         hn;
} llm_bpe_word;


static void
llm_bpe_add(llm_bpe_word *w, int32_t id, uint32_t len)
{
    llm_tok_ctx  *c = w->c;

    if (w->n == c->bpe_sym_cap) {
        c->bpe_sym_cap = c->bpe_sym_cap ? c->bpe_sym_cap * 2 : 64;
        c->bpe_sym = llm_xrealloc(c->bpe_sym,
                                  c->bpe_sym_cap * sizeof(llm_bpe_sym));
        w->sym = c->bpe_sym;
    }
    w->sym[w->n].id = id;
    w->sym[w->n].prev = (int32_t) w->n - 1;
    w->sym[w->n].next = -1;
    w->sym[w->n].len = len;
    if (w->n > 0) {
        w->sym[w->n - 1].next = (int32_t) w->n;
    }
    w->n++;
}


static int
llm_bpe_less(const llm_bpe_cand *x, const llm_bpe_cand *y)
{
    return x->rank < y->rank || (x->rank == y->rank && x->pos < y->pos);
}


static void
llm_bpe_push(llm_bpe_word *w, uint32_t rank, uint32_t pos, int32_t new_id)
{
    llm_tok_ctx   *c = w->c;
    llm_bpe_cand   x = { rank, pos, new_id }, tmp;
    size_t         i, p;

    if (w->hn == c->bpe_heap_cap) {
        c->bpe_heap_cap = c->bpe_heap_cap ? c->bpe_heap_cap * 2 : 64;
        c->bpe_heap = llm_xrealloc(c->bpe_heap,
                                   c->bpe_heap_cap * sizeof(llm_bpe_cand));
        w->heap = c->bpe_heap;
    }
    i = w->hn++;
    w->heap[i] = x;
    while (i > 0) {
        p = (i - 1) / 2;
        if (!llm_bpe_less(&w->heap[i], &w->heap[p])) {
            break;
        }
        tmp = w->heap[i];
        w->heap[i] = w->heap[p];
        w->heap[p] = tmp;
        i = p;
    }
}


static llm_bpe_cand
llm_bpe_pop(llm_bpe_word *w)
{
    llm_bpe_cand  top = w->heap[0], tmp;
    size_t        i = 0, l, r, m;

    w->heap[0] = w->heap[--w->hn];
    for (;;) {
        l = 2 * i + 1;
        r = l + 1;
        m = i;
        if (l < w->hn && llm_bpe_less(&w->heap[l], &w->heap[m])) {
            m = l;
        }
        if (r < w->hn && llm_bpe_less(&w->heap[r], &w->heap[m])) {
            m = r;
        }
        if (m == i) {
            break;
        }
        tmp = w->heap[i];
        w->heap[i] = w->heap[m];
        w->heap[m] = tmp;
        i = m;
    }
    return top;
}


/* HF Word::merge_all without dropout. */
static void
llm_bpe_merge_all(llm_bpe_word *w)
{
    const llm_tokenizer  *t = w->c->t;
    llm_bpe_cand          top;
    llm_bpe_sym          *s, *right;
    uint32_t              rank;
    int32_t               new_id;
    size_t                i;

    for (i = 0; i + 1 < w->n; i++) {
        if (llm_bpe_merge_get(t, w->sym[i].id, w->sym[i + 1].id, &rank,
                              &new_id))
        {
            llm_bpe_push(w, rank, (uint32_t) i, new_id);
        }
    }
    while (w->hn > 0) {
        top = llm_bpe_pop(w);
        s = &w->sym[top.pos];
        if (s->len == 0 || s->next == -1) {
            continue;
        }
        right = &w->sym[s->next];
        /* a stale candidate: the pair changed since it was queued */
        if (!llm_bpe_merge_get(t, s->id, right->id, &rank, &new_id)
            || new_id != top.new_id)
        {
            continue;
        }
        s->id = top.new_id;
        s->len += right->len;
        s->next = right->next;
        right->len = 0;
        if (s->next >= 0) {
            w->sym[s->next].prev = (int32_t) top.pos;
        }
        if (s->prev >= 0
            && llm_bpe_merge_get(t, w->sym[s->prev].id, s->id, &rank,
                                 &new_id))
        {
            llm_bpe_push(w, rank, (uint32_t) s->prev, new_id);
        }
        if (s->next >= 0
            && llm_bpe_merge_get(t, s->id, w->sym[s->next].id, &rank,
                                 &new_id))
        {
            llm_bpe_push(w, rank, top.pos, new_id);
        }
    }
}


/* The vocabulary id of one character of the word, with the continuing
 * prefix / end suffix decoration of HF merge_word; the decorated string in
 * *str / *slen (byte fallback works on its bytes). */
static int32_t
llm_bpe_char_id(llm_tok_ctx *c, const char *ch, size_t n, int first, int last,
    const char **str, size_t *slen)
{
    const llm_tokenizer  *t = c->t;

    uint32_t              cp;

    if ((first || t->cont_prefix == NULL) && (!last || t->end_suffix == NULL))
    {
        *str = ch;
        *slen = n;
        if (n <= 2) {
            /* byte-level words are made of these: a table, not a hash */
            llm_utf8_decode(ch, 0, &cp);
            return t->char_ids[cp];
        }
        return llm_tok_map_get(&t->vocab, t->arena.p, ch, n);
    }
    c->tmp2.len = 0;
    if (!first && t->cont_prefix) {
        llm_tok_buf_put(&c->tmp2, t->cont_prefix, strlen(t->cont_prefix));
    }
    llm_tok_buf_put(&c->tmp2, ch, n);
    if (last && t->end_suffix) {
        llm_tok_buf_put(&c->tmp2, t->end_suffix, strlen(t->end_suffix));
    }
    *str = c->tmp2.p;
    *slen = c->tmp2.len;
    return llm_tok_map_get(&t->vocab, t->arena.p, c->tmp2.p, c->tmp2.len);
}


void
llm_tok_bpe_encode(llm_tok_ctx *c, const char *s, size_t len)
{
    const llm_tokenizer  *t = c->t;
    llm_bpe_word          w;
    size_t                i, n, k, dlen;
    const char           *d;
    int32_t               id, unk_id = -1;
    uint32_t              unk_len = 0;
    int                   all_bytes;

    if (len == 0) {
        return;
    }
    if (t->ignore_merges) {
        /* Llama 3: a pre-token that is itself in the vocabulary is one
         * token, whatever the merges would have made of it */
        id = llm_tok_map_get(&t->vocab, t->arena.p, s, len);
        if (id >= 0) {
            llm_tok_ids_push(c, id);
            return;
        }
    }

    w.c = c;
    w.sym = c->bpe_sym;
    w.n = 0;
    w.heap = c->bpe_heap;
    w.hn = 0;
    for (i = 0; i < len; i += n) {
        n = llm_utf8_char_len((unsigned char) s[i]);
        if (i + n > len) {
            n = len - i;
        }
        id = llm_bpe_char_id(c, s + i, n, i == 0, i + n == len, &d, &dlen);
        if (id >= 0) {
            if (unk_id >= 0) {
                llm_bpe_add(&w, unk_id, unk_len);
                unk_id = -1;
            }
            llm_bpe_add(&w, id, (uint32_t) n);
            continue;
        }
        if (t->byte_fallback) {
            all_bytes = 1;
            for (k = 0; k < dlen; k++) {
                if (t->byte_ids[(unsigned char) d[k]] < 0) {
                    all_bytes = 0;
                }
            }
            if (all_bytes) {
                /* unlike a found character, this does not flush a pending
                 * unk first: HF's order, kept */
                for (k = 0; k < dlen; k++) {
                    llm_bpe_add(&w, t->byte_ids[(unsigned char) d[k]], 1);
                }
                continue;
            }
        }
        if (t->unk_id >= 0) {
            if (unk_id >= 0 && t->fuse_unk) {
                unk_len += (uint32_t) n;
            } else {
                if (unk_id >= 0) {
                    llm_bpe_add(&w, unk_id, unk_len);
                }
                unk_id = t->unk_id;
                unk_len = (uint32_t) n;
            }
        }
        /* no byte fallback and no unk: HF drops the character */
    }
    if (unk_id >= 0) {
        llm_bpe_add(&w, unk_id, unk_len);
    }

    llm_bpe_merge_all(&w);
    for (i = 0; i < w.n; i++) {
        if (w.sym[i].len != 0) {
            llm_tok_ids_push(c, w.sym[i].id);
        }
    }
}
