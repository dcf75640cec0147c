/*
 * tokenizer_encode.c -- text to ids: the pipeline of HF's
 * TokenizerImpl::encode for one sequence, then the post-processor.
 *
 * Invalid UTF-8 has one defined meaning: each maximal ill-formed subpart
 * becomes U+FFFD before anything else runs (what Python's
 * bytes.decode("utf-8", "replace") gives, so the ids equal HF's ids for that
 * decoded string).
 *
 * Every call works in its own llm_tok_ctx: the text of all pieces lives in
 * one append-only buffer (splitting only makes sub-ranges; a step that
 * rewrites text appends the new bytes), so a call allocates a few buffers
 * and frees them at the end, and the tokenizer itself is only read.
 */
#include <stdlib.h>
#include <string.h>

#include "tokenizer_impl.h"
#include "util/util.h"


#define LLM_TOK_MAX_TEXT  ((size_t) 64 << 20)


void
llm_tok_ctx_init(llm_tok_ctx *c, const llm_tokenizer *t, char *err)
{
    memset(c, 0, sizeof(*c));
    c->t = t;
    c->err = err;
    /* the PCRE2 match data is made by the first regex match */
}


void
llm_tok_ctx_free(llm_tok_ctx *c)
{
    llm_tok_buf_free(&c->text);
    llm_tok_buf_free(&c->tmp);
    llm_tok_buf_free(&c->tmp2);
    free(c->cur.v);
    free(c->next.v);
    free(c->spans.v);
    free(c->ids);
    llm_tok_bpe_ctx_free(c);
    if (c->md) {
        pcre2_match_data_free(c->md);
    }
    if (c->mctx) {
        pcre2_match_context_free(c->mctx);
    }
    if (c->jit_stack) {
        pcre2_jit_stack_free(c->jit_stack);
    }
}


void
llm_tok_pieces_push(llm_tok_pieces *ps, uint32_t off, uint32_t len,
    int32_t id, int at_start)
{
    if (ps->n == ps->cap) {
        ps->cap = ps->cap ? ps->cap * 2 : 64;
        ps->v = llm_xrealloc(ps->v, ps->cap * sizeof(*ps->v));
    }
    ps->v[ps->n].off = off;
    ps->v[ps->n].len = len;
    ps->v[ps->n].id = id;
    ps->v[ps->n].at_start = (uint8_t) at_start;
    ps->n++;
}


void
llm_tok_ids_push(llm_tok_ctx *c, int32_t id)
{
    if (c->n_ids == c->cap_ids) {
        c->cap_ids = c->cap_ids ? c->cap_ids * 2 : 64;
        c->ids = llm_xrealloc(c->ids, c->cap_ids * sizeof(int32_t));
    }
    c->ids[c->n_ids++] = id;
}


/* Runs the normalizer over every text piece (the text between added
 * tokens), dropping pieces that become empty. */
static int
llm_tok_normalize_pieces(llm_tok_ctx *c)
{
    const llm_tokenizer  *t = c->t;
    size_t                i, n = 0;
    llm_tok_piece        *p;

    for (i = 0; i < c->cur.n; i++) {
        p = &c->cur.v[i];
        if (p->id < 0) {
            if (llm_tok_norm_apply(t->normalizer, c->text.p + p->off, p->len,
                                   c, &c->tmp) != 0)
            {
                return -1;
            }
            if (c->tmp.len == 0) {
                continue;
            }
            p->off = (uint32_t) c->text.len;
            p->len = (uint32_t) c->tmp.len;
            llm_tok_buf_put(&c->text, c->tmp.p, c->tmp.len);
        }
        c->cur.v[n++] = *p;
    }
    c->cur.n = n;
    return 0;
}


/* The post-processors' templates, in order, around the ids. */
static void
llm_tok_post_process(llm_tok_ctx *c)
{
    const llm_tokenizer      *t = c->t;
    const llm_tok_template   *tp;
    const llm_tok_piece_tpl  *it;
    int32_t                  *seq;
    size_t                    n_seq, i, j, k;

    for (i = 0; i < t->n_post; i++) {
        tp = &t->post[i];
        seq = c->ids;
        n_seq = c->n_ids;
        c->ids = NULL;
        c->n_ids = c->cap_ids = 0;
        for (j = 0; j < tp->n; j++) {
            it = &tp->items[j];
            if (it->is_seq) {
                for (k = 0; k < n_seq; k++) {
                    llm_tok_ids_push(c, seq[k]);
                }
            } else {
                for (k = 0; k < it->n_ids; k++) {
                    llm_tok_ids_push(c, it->ids[k]);
                }
            }
        }
        free(seq);
    }
}


int
llm_tokenizer_encode(const llm_tokenizer *t, const char *text, size_t len,
    int add_special, int32_t **ids, char *err)
{
    llm_tok_ctx     c;
    llm_tok_piece  *p;
    size_t          i;
    int             n;

    *ids = NULL;
    if (len > LLM_TOK_MAX_TEXT) {
        /* piece offsets are 32-bit, and normalizing plus byte mapping can
         * grow the text ~30 times in the worst case */
        llm_errf(err, "tokenize: text of %zu bytes is too long (64 MiB at "
                 "most)", len);
        return -1;
    }
    llm_tok_ctx_init(&c, t, err);
    llm_utf8_sanitize(text, len, &c.text);
    if (c.text.len > 0) {
        llm_tok_pieces_push(&c.cur, 0, (uint32_t) c.text.len, -1, 1);
    }

    llm_tok_added_split(&c, &t->trie_raw);
    if (t->normalizer && llm_tok_normalize_pieces(&c) != 0) {
        goto failed;
    }
    llm_tok_added_split(&c, &t->trie_norm);
    if (t->pretok && llm_tok_pretok_apply(t->pretok, &c) != 0) {
        goto failed;
    }
    for (i = 0; i < c.cur.n; i++) {
        p = &c.cur.v[i];
        if (p->id >= 0) {
            llm_tok_ids_push(&c, p->id);
        } else {
            llm_tok_bpe_encode(&c, c.text.p + p->off, p->len);
        }
    }
    if (add_special) {
        llm_tok_post_process(&c);
    }

    n = (int) c.n_ids;
    *ids = c.ids ? c.ids : llm_xmalloc(sizeof(int32_t));
    c.ids = NULL;
    llm_tok_ctx_free(&c);
    return n;

failed:
    llm_tok_ctx_free(&c);
    return -1;
}
