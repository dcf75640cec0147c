/*
 * tokenizer_texts.c -- every token's bytes in decoded text (tokenizer.h),
 * the alphabet of constrained decoding.
 */
#include <stdlib.h>
#include <string.h>

#include "tokenizer_impl.h"
#include "util/util.h"


/* One token's bytes into out; -1 when it is not text. */
static int
llm_token_text(const llm_tokenizer *t, int32_t id, int32_t anchor,
    int byte_level, int byte_fallback, llm_tok_buf *out, llm_tok_buf *tmp)
{
    const char  *s;
    size_t       len, i, k, first;
    uint32_t     cp;
    int          b;
    int32_t      pair[2] = { anchor, id };

    out->len = 0;
    s = llm_tok_decode_str(t, id, &len);
    if (s == NULL || llm_tokenizer_is_special(t, id)) {
        return -1;
    }
    if (byte_fallback && (b = llm_tok_byte_token(s, len)) >= 0) {
        llm_tok_buf_putc(out, (char) b);
        return 0;
    }
    if (byte_level && t->added_of[id] < 0) {
        /* raw bytes, also those of a character split over tokens; behind
         * a ByteLevel decoder that others follow, only those (the others
         * cannot change part of a character) */
        for (i = 0; i < len; i += k) {
            k = llm_utf8_decode(s, i, &cp);
            if ((b = llm_tok_cp_to_byte(cp)) < 0) {
                break;
            }
            llm_tok_buf_putc(out, (char) b);
        }
        if (i == len
            && (byte_level == 1 || !llm_utf8_valid(out->p, out->len)))
        {
            return 0;
        }
        out->len = 0;
    }
    /* otherwise the decoder's text, which treats the first token of a text
     * apart (Strip drops spaces, Metaspace its ▁): the token's own bytes
     * are what it adds after a plain letter */
    llm_tok_decode_into(t, pair, 1, 0, tmp);
    first = tmp->len;
    llm_tok_decode_into(t, pair, 2, 0, out);
    memmove(out->p, out->p + first, out->len - first);
    out->len -= first;
    return 0;
}


void
llm_tokenizer_token_texts(const llm_tokenizer *t, llm_token_texts *out)
{
    llm_tok_buf         all = { 0 }, one = { 0 }, tmp = { 0 };
    const llm_tok_dec  *d = t->decoder;
    int                 byte_level, byte_fallback, n;
    int32_t             id, anchor, *ids;
    char                err[LLM_ERR_LEN];

    /* 1: the decoder is ByteLevel alone (GPT-2 style: Llama 3, Qwen,
     * DeepSeek), raw bytes; 2: ByteLevel among others */
    byte_level = d != NULL && d->type == LLM_DEC_BYTE_LEVEL ? 1
                 : llm_tok_dec_has(d, LLM_DEC_BYTE_LEVEL) ? 2 : 0;
    byte_fallback = llm_tok_dec_has(d, LLM_DEC_BYTE_FALLBACK);

    /* the plain letter: "a" as the tokenizer spells it */
    n = llm_tokenizer_encode(t, "a", 1, 0, &ids, err);
    anchor = n > 0 ? ids[n - 1] : 0;
    if (n >= 0) {
        free(ids);
    }

    out->n = t->n_ids;
    out->off = llm_xcalloc((size_t) out->n, sizeof(uint32_t));
    out->len = llm_xcalloc((size_t) out->n, sizeof(int32_t));
    for (id = 0; id < out->n; id++) {
        out->off[id] = (uint32_t) all.len;
        if (llm_token_text(t, id, anchor, byte_level, byte_fallback, &one,
                           &tmp) != 0)
        {
            out->len[id] = -1;
            continue;
        }
        llm_tok_buf_put(&all, one.p, one.len);
        out->len[id] = (int32_t) one.len;
    }
    llm_tok_buf_reserve(&all, 0);
    out->bytes = all.p;
    llm_tok_buf_free(&one);
    llm_tok_buf_free(&tmp);
}


void
llm_token_texts_free(llm_token_texts *tt)
{
    free(tt->bytes);
    free(tt->off);
    free(tt->len);
    memset(tt, 0, sizeof(*tt));
}
