/*
 * tokenizer_detok.c -- streaming detokenization: text for each generated id
 * as soon as it is final, never a broken UTF-8 sequence.
 *
 * Decoding one token alone is wrong in general (a character split over
 * byte tokens, a SentencePiece space stripped at the start of a string), so
 * we keep a small window of ids, as vLLM and HF's DecodeStream do:
 *
 *   window = ids[p..n), the first `read` of them already shown;
 *   prefix = decode(ids[p..p+read))
 *   push(id): text = decode(window + id); if it is final, show
 *             text[len(prefix):], then slide: p += read, read = window size,
 *             prefix = decode(new window).
 *
 * Both decodes start at the same token, so whatever the decoder does to a
 * first token (Strip, Metaspace) cancels out, and the difference is exactly
 * what the full decode gains.  Text is held back (not final) while
 *   - it ends in U+FFFD: an incomplete UTF-8 sequence that more bytes may
 *     complete;
 *   - the last token shown to the decoder is a <0xNN> byte token and the
 *     decoder has ByteFallback: HF decodes a run of byte tokens as one
 *     group, and one more invalid byte turns the whole group into U+FFFDs;
 *   - it is not longer than the prefix (e.g. a skipped special token).
 * With these rules the concatenated output equals
 * decode(prompt + generated)[len(decode(prompt)):].  Only after 32 held
 * tokens (a model emitting garbage bytes) is the text shown as it stands,
 * which bounds the work per token.
 */
#include <stdlib.h>
#include <string.h>

#include "tokenizer_impl.h"
#include "util.h"


#define LLM_DETOK_CONTEXT   5       /* prompt ids kept as context (vLLM) */
#define LLM_DETOK_MAX_HELD  32


struct llm_detok {
    const llm_tokenizer  *t;
    int                   skip_special;
    int                   byte_fallback;
    int32_t              *ids;          /* the window */
    size_t                n, cap;
    size_t                read;         /* ids[0..read) are in prefix */
    llm_tok_buf           prefix;       /* decode(ids[0..read)) */
    llm_tok_buf           text;
    llm_tok_buf           out;
};


static void
llm_detok_append(llm_detok *d, int32_t id)
{
    if (d->n == d->cap) {
        d->cap = d->cap ? d->cap * 2 : 16;
        d->ids = llm_xrealloc(d->ids, d->cap * sizeof(int32_t));
    }
    d->ids[d->n++] = id;
}


llm_detok *
llm_detok_create(const llm_tokenizer *t, const int32_t *prompt,
    size_t n_prompt, int skip_special)
{
    llm_detok  *d = llm_xcalloc(1, sizeof(*d));
    size_t      i;

    d->t = t;
    d->skip_special = skip_special;
    d->byte_fallback = llm_tok_dec_has_byte_fallback(t->decoder);
    i = n_prompt > LLM_DETOK_CONTEXT ? n_prompt - LLM_DETOK_CONTEXT : 0;
    for (; i < n_prompt; i++) {
        llm_detok_append(d, prompt[i]);
    }
    d->read = d->n;
    llm_tok_decode_into(t, d->ids, d->n, skip_special, &d->prefix);
    llm_tok_buf_reserve(&d->out, 0);
    return d;
}


/* Is the last token the decoder sees an open byte-fallback group? */
static int
llm_detok_open_bytes(const llm_detok *d)
{
    const char  *s;
    size_t       i, len;

    for (i = d->n; i-- > 0;) {
        s = llm_tok_decode_str(d->t, d->ids[i], &len);
        if (s == NULL
            || (d->skip_special && llm_tok_skipped(d->t, d->ids[i])))
        {
            continue;           /* invisible to the decoder */
        }
        return len == 6 && memcmp(s, "<0x", 3) == 0 && s[5] == '>';
    }
    return 0;
}


static int
llm_detok_final(const llm_detok *d)
{
    const llm_tok_buf  *x = &d->text;

    if (x->len <= d->prefix.len) {
        return 0;
    }
    if (x->len >= 3 && memcmp(x->p + x->len - 3, "\xEF\xBF\xBD", 3) == 0) {
        return 0;
    }
    if (d->byte_fallback && llm_detok_open_bytes(d)) {
        return 0;
    }
    return 1;
}


/* Puts text[len(prefix):] in out.  If the decoder was not prefix-stable
 * (text does not start with prefix), start at the first character boundary
 * at or after len(prefix), so the output stays valid UTF-8. */
static void
llm_detok_emit(llm_detok *d)
{
    size_t  from = d->prefix.len;

    d->out.len = 0;
    d->out.p[0] = '\0';
    if (d->text.len <= from) {
        return;
    }
    while (from < d->text.len
           && ((unsigned char) d->text.p[from] & 0xC0) == 0x80)
    {
        from++;
    }
    llm_tok_buf_put(&d->out, d->text.p + from, d->text.len - from);
}


const char *
llm_detok_push(llm_detok *d, int32_t id, size_t *len)
{
    size_t  keep;

    llm_detok_append(d, id);
    llm_tok_decode_into(d->t, d->ids, d->n, d->skip_special, &d->text);
    d->out.len = 0;
    d->out.p[0] = '\0';
    if (!llm_detok_final(d) && d->n - d->read < LLM_DETOK_MAX_HELD) {
        *len = 0;
        return d->out.p;
    }
    llm_detok_emit(d);

    /* slide: the shown tokens stay as the next window's context */
    keep = d->n - d->read;
    memmove(d->ids, d->ids + d->read, keep * sizeof(int32_t));
    d->n = keep;
    d->read = keep;
    llm_tok_decode_into(d->t, d->ids, d->n, d->skip_special, &d->prefix);
    *len = d->out.len;
    return d->out.p;
}


const char *
llm_detok_flush(llm_detok *d, size_t *len)
{
    llm_tok_decode_into(d->t, d->ids, d->n, d->skip_special, &d->text);
    llm_detok_emit(d);
    /* everything is shown; what comes next (if anything) has this context */
    d->read = d->n;
    d->prefix.len = 0;
    llm_tok_buf_put(&d->prefix, d->text.p, d->text.len);
    *len = d->out.len;
    return d->out.p;
}


void
llm_detok_free(llm_detok *d)
{
    if (d == NULL) {
        return;
    }
    free(d->ids);
    llm_tok_buf_free(&d->prefix);
    llm_tok_buf_free(&d->text);
    llm_tok_buf_free(&d->out);
    free(d);
}
