/*
 * tokenizer_added.c -- finding added and special tokens in text, as HF's
 * AddedVocabulary::find_matches does.
 *
 * Matches are leftmost-longest and non-overlapping (HF uses an Aho-Corasick
 * automaton in that mode; a byte trie walked from each candidate position
 * gives the same matches, and a first-byte table skips the positions where
 * no token can start).  Then each match honours its token's flags:
 *   single_word  the match is dropped when a word character (\w) touches it;
 *   lstrip       whitespace just before it joins the token (is not encoded);
 *   rstrip       whitespace just after it joins the token.
 * Tokens with normalized: false are matched in the raw text before the
 * normalizer runs, those with normalized: true in the normalized text
 * against their normalized content.
 */
#include <stdlib.h>
#include <string.h>

#include "tokenizer_impl.h"
#include "util/util.h"


static int32_t
llm_trie_node(llm_tok_trie *tr)
{
    if (tr->n == tr->cap) {
        tr->cap = tr->cap ? tr->cap * 2 : 64;
        tr->nodes = llm_xrealloc(tr->nodes, tr->cap * sizeof(*tr->nodes));
    }
    tr->nodes[tr->n].child = -1;
    tr->nodes[tr->n].sibling = -1;
    tr->nodes[tr->n].token = -1;
    tr->nodes[tr->n].byte = 0;
    return (int32_t) tr->n++;
}


static void
llm_trie_insert(llm_tok_trie *tr, const char *s, size_t len, int32_t token)
{
    int32_t  node = 0, ch;
    size_t   i;

    if (tr->n == 0) {
        llm_trie_node(tr);      /* the root */
    }
    tr->first[(unsigned char) s[0]] = 1;
    for (i = 0; i < len; i++) {
        for (ch = tr->nodes[node].child; ch >= 0; ch = tr->nodes[ch].sibling) {
            if (tr->nodes[ch].byte == (uint8_t) s[i]) {
                break;
            }
        }
        if (ch < 0) {
            ch = llm_trie_node(tr);
            tr->nodes[ch].byte = (uint8_t) s[i];
            tr->nodes[ch].sibling = tr->nodes[node].child;
            tr->nodes[node].child = ch;
        }
        node = ch;
    }
    tr->nodes[node].token = token;
}


int
llm_tok_added_build(llm_tokenizer *t, char *err)
{
    size_t          i;
    llm_tok_added  *a;

    for (i = 0; i < t->n_added; i++) {
        a = &t->added[i];
        if (a->normalized) {
            if (a->norm_len > 0) {
                llm_trie_insert(&t->trie_norm, t->arena.p + a->norm_off,
                                a->norm_len, (int32_t) i);
            }
        } else {
            llm_trie_insert(&t->trie_raw, t->arena.p + a->off, a->len,
                            (int32_t) i);
        }
    }
    return 0;
}


void
llm_tok_trie_free(llm_tok_trie *tr)
{
    free(tr->nodes);
    tr->nodes = NULL;
    tr->n = tr->cap = 0;
}


/* The longest token of the trie starting at s[0..n): its length, or 0. */
static size_t
llm_trie_longest(const llm_tok_trie *tr, const char *s, size_t n,
    int32_t *token)
{
    int32_t  node = 0, ch;
    size_t   i, best = 0;

    for (i = 0; i < n; i++) {
        for (ch = tr->nodes[node].child; ch >= 0; ch = tr->nodes[ch].sibling) {
            if (tr->nodes[ch].byte == (uint8_t) s[i]) {
                break;
            }
        }
        if (ch < 0) {
            break;
        }
        node = ch;
        if (tr->nodes[node].token >= 0) {
            best = i + 1;
            *token = tr->nodes[node].token;
        }
    }
    return best;
}


/* The character that ends at s[end] (exclusive), valid UTF-8. */
static uint32_t
llm_char_before(const char *s, size_t end, size_t *start)
{
    size_t    i = end;
    uint32_t  cp;

    do {
        i--;
    } while (i > 0 && ((unsigned char) s[i] & 0xC0) == 0x80);
    llm_utf8_decode(s, i, &cp);
    *start = i;
    return cp;
}


static void
llm_added_split_piece(llm_tok_ctx *c, const llm_tok_trie *tr,
    const llm_tok_piece *p)
{
    const llm_tokenizer  *t = c->t;
    const char           *s = c->text.p + p->off;
    size_t                n = p->len, pos = 0, last = 0, i, mlen, start,
                          stop, k;
    int32_t               token;
    uint32_t              cp;
    const llm_tok_added  *a;

    while (pos < n) {
        /* leftmost match at or after pos */
        mlen = 0;
        for (i = pos; i < n; i++) {
            if (tr->first[(unsigned char) s[i]]
                && (mlen = llm_trie_longest(tr, s + i, n - i, &token)) > 0)
            {
                break;
            }
        }
        if (mlen == 0) {
            break;
        }
        pos = i + mlen;         /* the scan resumes after the raw match */
        a = &t->added[token];
        start = i;
        stop = i + mlen;

        if (a->single_word) {
            if ((start > 0 && llm_uc_is_word(llm_char_before(s, start, &k)))
                || (stop < n
                    && (llm_utf8_decode(s, stop, &cp), llm_uc_is_word(cp))))
            {
                continue;
            }
        }
        if (a->lstrip) {
            while (start > last) {
                cp = llm_char_before(s, start, &k);
                if (!llm_uc_is_whitespace(cp)) {
                    break;
                }
                start = k;
            }
        }
        if (a->rstrip) {
            while (stop < n) {
                k = llm_utf8_decode(s, stop, &cp);
                if (!llm_uc_is_whitespace(cp)) {
                    break;
                }
                stop += k;
            }
        }
        if (start < last) {
            /* a token inside the whitespace an rstrip took: HF emits both
             * tokens with overlapping offsets; same ids here */
            start = last;
        }
        if (stop < start) {
            stop = start;
        }
        if (last < start) {
            llm_tok_pieces_push(&c->next, p->off + (uint32_t) last,
                                (uint32_t) (start - last), -1,
                                p->at_start && last == 0);
        }
        llm_tok_pieces_push(&c->next, p->off + (uint32_t) start,
                            (uint32_t) (stop - start), a->id, 0);
        last = stop;
    }
    if (last < n) {
        llm_tok_pieces_push(&c->next, p->off + (uint32_t) last,
                            (uint32_t) (n - last), -1,
                            p->at_start && last == 0);
    }
}


void
llm_tok_added_split(llm_tok_ctx *c, const llm_tok_trie *tr)
{
    llm_tok_pieces  tmp;
    size_t          i;

    if (tr->n == 0) {
        return;
    }
    c->next.n = 0;
    for (i = 0; i < c->cur.n; i++) {
        if (c->cur.v[i].id >= 0) {
            llm_tok_pieces_push(&c->next, c->cur.v[i].off, c->cur.v[i].len,
                                c->cur.v[i].id, 0);
            continue;
        }
        llm_added_split_piece(c, tr, &c->cur.v[i]);
    }
    tmp = c->cur;
    c->cur = c->next;
    c->next = tmp;
}
