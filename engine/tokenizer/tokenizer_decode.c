/*
 * tokenizer_decode.c -- ids to text: HF's Tokenizer::decode.
 *
 * The ids become token strings (added tokens by their content, unknown ids
 * dropped, special tokens dropped when skip_special), then the decoder chain
 * rewrites the list of strings step by step, and the list is joined:
 *   ByteLevel     every token's characters back to bytes (a token with a
 *                 character outside the byte table keeps its UTF-8), all
 *                 tokens fused, invalid UTF-8 repaired with U+FFFD;
 *   Metaspace     the replacement character becomes a space, except in the
 *                 first token where it is dropped (unless prepend_scheme is
 *                 "never");
 *   Replace       literal or regex replacement in each token;
 *   ByteFallback  runs of <0xNN> tokens become their bytes when they form
 *                 valid UTF-8, else one U+FFFD per byte;
 *   Fuse          all tokens joined into one;
 *   Strip         up to `start` leading and `stop` trailing `content`
 *                 characters removed from each token;
 *   BPEDecoder    the end-of-word suffix becomes a space (none at the end).
 * Without a decoder the tokens are joined with spaces, as in HF.
 */
#define _GNU_SOURCE             /* memmem */
#include <stdlib.h>
#include <string.h>

#include "tokenizer_impl.h"
#include "util/util.h"


/* A list of strings in one buffer. */
typedef struct {
    llm_tok_buf   buf;
    uint32_t     *off;
    uint32_t     *len;
    size_t        n, cap;
} llm_dec_list;


static void
llm_dec_list_open(llm_dec_list *l)
{
    /* a new string starts at the end of the buffer, which then exists
     * (buf.p + off is used for empty strings too) */
    llm_tok_buf_reserve(&l->buf, 0);
    if (l->n == l->cap) {
        l->cap = l->cap ? l->cap * 2 : 32;
        l->off = llm_xrealloc(l->off, l->cap * sizeof(uint32_t));
        l->len = llm_xrealloc(l->len, l->cap * sizeof(uint32_t));
    }
    l->off[l->n] = (uint32_t) l->buf.len;
    l->len[l->n] = 0;
    l->n++;
}


static void
llm_dec_list_close(llm_dec_list *l)
{
    l->len[l->n - 1] = (uint32_t) (l->buf.len - l->off[l->n - 1]);
}


static void
llm_dec_list_add(llm_dec_list *l, const char *s, size_t n)
{
    llm_dec_list_open(l);
    llm_tok_buf_put(&l->buf, s, n);
    llm_dec_list_close(l);
}


static void
llm_dec_list_free(llm_dec_list *l)
{
    llm_tok_buf_free(&l->buf);
    free(l->off);
    free(l->len);
    memset(l, 0, sizeof(*l));
}


/* ---- parsing ---- */

static int llm_dec_parse_one(llm_tok_dec *d, yajl_val v, char *err);


int
llm_tok_dec_parse(llm_tok_dec **out, yajl_val v, char *err)
{
    llm_tok_dec  *d;

    *out = NULL;
    if (v == NULL || YAJL_IS_NULL(v)) {
        return 0;
    }
    d = llm_xcalloc(1, sizeof(*d));
    if (llm_dec_parse_one(d, v, err) != 0) {
        llm_tok_dec_free(d);
        return -1;
    }
    *out = d;
    return 0;
}


static void
llm_dec_clear(llm_tok_dec *d)
{
    size_t  i;

    for (i = 0; i < d->n_items; i++) {
        llm_dec_clear(&d->items[i]);
    }
    free(d->items);
    free(d->str);
    llm_tok_pattern_free(&d->pat);
}


void
llm_tok_dec_free(llm_tok_dec *d)
{
    if (d) {
        llm_dec_clear(d);
        free(d);
    }
}


static size_t
llm_dec_size(yajl_val v, const char *key)
{
    yajl_val  n = llm_json_get(v, key);

    return (YAJL_IS_INTEGER(n) && YAJL_GET_INTEGER(n) > 0)
           ? (size_t) YAJL_GET_INTEGER(n) : 0;
}


static int
llm_dec_parse_one(llm_tok_dec *d, yajl_val v, char *err)
{
    const char  *type = llm_tok_json_str(v, "type"), *s;
    yajl_val     list;
    size_t       i;

    if (type == NULL) {
        llm_errf(err, "decoder has no type");
        return -1;
    }
    if (strcmp(type, "Sequence") == 0) {
        d->type = LLM_DEC_SEQUENCE;
        list = llm_json_get(v, "decoders");
        if (!YAJL_IS_ARRAY(list)) {
            llm_errf(err, "decoder Sequence has no \"decoders\" list");
            return -1;
        }
        d->items = llm_xcalloc(list->u.array.len + 1, sizeof(*d->items));
        for (i = 0; i < list->u.array.len; i++) {
            d->n_items++;
            if (llm_dec_parse_one(&d->items[i], list->u.array.values[i], err)
                != 0)
            {
                return -1;
            }
        }
        return 0;
    }
    if (strcmp(type, "ByteLevel") == 0) {
        d->type = LLM_DEC_BYTE_LEVEL;
    } else if (strcmp(type, "ByteFallback") == 0) {
        d->type = LLM_DEC_BYTE_FALLBACK;
    } else if (strcmp(type, "Fuse") == 0) {
        d->type = LLM_DEC_FUSE;
    } else if (strcmp(type, "Metaspace") == 0) {
        d->type = LLM_DEC_METASPACE;
        d->ch = 0x2581;
        s = llm_tok_json_str(v, "replacement");
        if (s && s[0]) {
            llm_utf8_decode(s, 0, &d->ch);
        }
        d->prepend_scheme = LLM_PREPEND_ALWAYS;
        s = llm_tok_json_str(v, "prepend_scheme");
        if (s && strcmp(s, "never") == 0) {
            d->prepend_scheme = LLM_PREPEND_NEVER;
        } else if (s && strcmp(s, "first") == 0) {
            d->prepend_scheme = LLM_PREPEND_FIRST;
        }
        if (llm_tok_json_bool(v, "add_prefix_space", 1) == 0) {
            d->prepend_scheme = LLM_PREPEND_NEVER;
        }
    } else if (strcmp(type, "Replace") == 0) {
        d->type = LLM_DEC_REPLACE;
        s = llm_tok_json_str(v, "content");
        if (s == NULL) {
            llm_errf(err, "decoder Replace has no \"content\" string");
            return -1;
        }
        d->str = llm_xstrdup(s);
        d->str_len = strlen(s);
        return llm_tok_pattern_parse(&d->pat, llm_json_get(v, "pattern"),
                                     "decoder Replace", err);
    } else if (strcmp(type, "Strip") == 0) {
        d->type = LLM_DEC_STRIP;
        s = llm_tok_json_str(v, "content");
        d->ch = ' ';
        if (s && s[0]) {
            llm_utf8_decode(s, 0, &d->ch);
        }
        d->start = llm_dec_size(v, "start");
        d->stop = llm_dec_size(v, "stop");
    } else if (strcmp(type, "BPEDecoder") == 0) {
        d->type = LLM_DEC_BPE;
        s = llm_tok_json_str(v, "suffix");
        d->str = llm_xstrdup(s ? s : "</w>");
        d->str_len = strlen(d->str);
    } else {
        llm_errf(err, "decoder type \"%s\" is not supported", type);
        return -1;
    }
    return 0;
}


int
llm_tok_dec_has(const llm_tok_dec *d, int type)
{
    size_t  i;

    if (d == NULL) {
        return 0;
    }
    if ((int) d->type == type) {
        return 1;
    }
    for (i = 0; i < d->n_items; i++) {
        if (llm_tok_dec_has(&d->items[i], type)) {
            return 1;
        }
    }
    return 0;
}


/* ---- the decoders ---- */

static void
llm_dec_byte_level(const llm_dec_list *in, llm_dec_list *out)
{
    llm_tok_buf   raw = { 0 };
    const char   *s;
    size_t        i, j, k, mark;
    uint32_t      cp;
    int           b;

    for (i = 0; i < in->n; i++) {
        s = in->buf.p + in->off[i];
        mark = raw.len;
        for (j = 0; j < in->len[i]; j += k) {
            k = llm_utf8_decode(s, j, &cp);
            b = llm_tok_cp_to_byte(cp);
            if (b < 0) {
                /* not a byte-level token (e.g. "<|eot_id|> " with a
                 * space): its own UTF-8 */
                raw.len = mark;
                llm_tok_buf_put(&raw, s, in->len[i]);
                break;
            }
            llm_tok_buf_putc(&raw, (char) b);
        }
    }
    llm_dec_list_open(out);
    llm_utf8_sanitize(raw.p ? raw.p : "", raw.len, &out->buf);
    llm_dec_list_close(out);
    llm_tok_buf_free(&raw);
}


static void
llm_dec_metaspace(const llm_tok_dec *d, const llm_dec_list *in,
    llm_dec_list *out)
{
    const char  *s;
    size_t       i, j, k;
    uint32_t     cp;

    for (i = 0; i < in->n; i++) {
        s = in->buf.p + in->off[i];
        llm_dec_list_open(out);
        for (j = 0; j < in->len[i]; j += k) {
            k = llm_utf8_decode(s, j, &cp);
            if (cp != d->ch) {
                llm_tok_buf_put(&out->buf, s + j, k);
            } else if (i != 0 || d->prepend_scheme == LLM_PREPEND_NEVER) {
                llm_tok_buf_putc(&out->buf, ' ');
            }
        }
        llm_dec_list_close(out);
    }
}


static int
llm_dec_replace(const llm_tok_dec *d, const llm_dec_list *in,
    llm_dec_list *out, llm_tok_ctx *c)
{
    const char  *s;
    size_t       i, j;

    for (i = 0; i < in->n; i++) {
        s = in->buf.p + in->off[i];
        if (llm_tok_pattern_spans(&d->pat, s, in->len[i], c, &c->spans) != 0) {
            return -1;
        }
        llm_dec_list_open(out);
        for (j = 0; j < c->spans.n; j++) {
            if (c->spans.v[j].match) {
                llm_tok_buf_put(&out->buf, d->str, d->str_len);
            } else {
                llm_tok_buf_put(&out->buf, s + c->spans.v[j].start,
                                c->spans.v[j].end - c->spans.v[j].start);
            }
        }
        llm_dec_list_close(out);
    }
    return 0;
}


static int
llm_hex(char c)
{
    if (c >= '0' && c <= '9') {
        return c - '0';
    }
    if (c >= 'a' && c <= 'f') {
        return c - 'a' + 10;
    }
    if (c >= 'A' && c <= 'F') {
        return c - 'A' + 10;
    }
    return -1;
}


/* The byte of a "<0xNN>" token, or -1. */
int
llm_tok_byte_token(const char *s, size_t n)
{
    if (n != 6 || memcmp(s, "<0x", 3) != 0 || s[5] != '>'
        || llm_hex(s[3]) < 0 || llm_hex(s[4]) < 0)
    {
        return -1;
    }
    return llm_hex(s[3]) * 16 + llm_hex(s[4]);
}


static void
llm_dec_flush_bytes(llm_tok_buf *bytes, llm_dec_list *out)
{
    size_t  i;

    if (bytes->len == 0) {
        return;
    }
    if (llm_utf8_valid(bytes->p, bytes->len)) {
        llm_dec_list_add(out, bytes->p, bytes->len);
    } else {
        for (i = 0; i < bytes->len; i++) {
            llm_dec_list_add(out, "\xEF\xBF\xBD", 3);
        }
    }
    bytes->len = 0;
}


static void
llm_dec_byte_fallback(const llm_dec_list *in, llm_dec_list *out)
{
    llm_tok_buf  bytes = { 0 };
    size_t       i;
    int          b;

    for (i = 0; i < in->n; i++) {
        b = llm_tok_byte_token(in->buf.p + in->off[i], in->len[i]);
        if (b >= 0) {
            llm_tok_buf_putc(&bytes, (char) b);
            continue;
        }
        llm_dec_flush_bytes(&bytes, out);
        llm_dec_list_add(out, in->buf.p + in->off[i], in->len[i]);
    }
    llm_dec_flush_bytes(&bytes, out);
    llm_tok_buf_free(&bytes);
}


static void
llm_dec_strip(const llm_tok_dec *d, const llm_dec_list *in, llm_dec_list *out)
{
    const char  *s;
    size_t       i, b, e, k, n, start;
    uint32_t     cp;

    for (i = 0; i < in->n; i++) {
        s = in->buf.p + in->off[i];
        b = 0;
        e = in->len[i];
        for (n = 0; n < d->start && b < e; n++) {
            k = llm_utf8_decode(s, b, &cp);
            if (cp != d->ch) {
                break;
            }
            b += k;
        }
        for (n = 0; n < d->stop && e > b; n++) {
            start = e - 1;
            while (start > b && ((unsigned char) s[start] & 0xC0) == 0x80) {
                start--;
            }
            llm_utf8_decode(s, start, &cp);
            if (cp != d->ch) {
                break;
            }
            e = start;
        }
        llm_dec_list_add(out, s + b, e - b);
    }
}


static void
llm_dec_bpe(const llm_tok_dec *d, const llm_dec_list *in, llm_dec_list *out)
{
    const char  *s, *hit;
    size_t       i, pos;

    for (i = 0; i < in->n; i++) {
        s = in->buf.p + in->off[i];
        llm_dec_list_open(out);
        pos = 0;
        while (d->str_len > 0 && pos < in->len[i]
               && (hit = memmem(s + pos, in->len[i] - pos, d->str,
                                d->str_len)))
        {
            llm_tok_buf_put(&out->buf, s + pos, (size_t) (hit - s) - pos);
            if (i + 1 < in->n) {
                llm_tok_buf_putc(&out->buf, ' ');
            }
            pos = (size_t) (hit - s) + d->str_len;
        }
        llm_tok_buf_put(&out->buf, s + pos, in->len[i] - pos);
        llm_dec_list_close(out);
    }
}


/* One decoder: in -> out (out starts empty; in is left as it was). */
static int
llm_dec_run(const llm_tok_dec *d, const llm_dec_list *in, llm_dec_list *out,
    llm_tok_ctx *c)
{
    llm_dec_list         cur = { 0 }, next;
    const llm_dec_list  *src = in;
    size_t               i;

    switch (d->type) {
    case LLM_DEC_SEQUENCE:
        for (i = 0; i < d->n_items; i++) {
            memset(&next, 0, sizeof(next));
            if (llm_dec_run(&d->items[i], src, &next, c) != 0) {
                llm_dec_list_free(&next);
                llm_dec_list_free(&cur);
                return -1;
            }
            llm_dec_list_free(&cur);
            cur = next;
            src = &cur;
        }
        for (i = 0; i < src->n; i++) {
            llm_dec_list_add(out, src->buf.p + src->off[i], src->len[i]);
        }
        llm_dec_list_free(&cur);
        return 0;
    case LLM_DEC_BYTE_LEVEL:
        llm_dec_byte_level(in, out);
        return 0;
    case LLM_DEC_METASPACE:
        llm_dec_metaspace(d, in, out);
        return 0;
    case LLM_DEC_REPLACE:
        return llm_dec_replace(d, in, out, c);
    case LLM_DEC_BYTE_FALLBACK:
        llm_dec_byte_fallback(in, out);
        return 0;
    case LLM_DEC_FUSE:
        llm_dec_list_open(out);
        for (i = 0; i < in->n; i++) {
            llm_tok_buf_put(&out->buf, in->buf.p + in->off[i], in->len[i]);
        }
        llm_dec_list_close(out);
        return 0;
    case LLM_DEC_STRIP:
        llm_dec_strip(d, in, out);
        return 0;
    case LLM_DEC_BPE:
        llm_dec_bpe(d, in, out);
        return 0;
    }
    return 0;
}


int
llm_tok_skipped(const llm_tokenizer *t, int32_t id)
{
    const llm_tok_added  *a;

    if (id < 0 || id >= t->n_ids || t->added_of[id] < 0) {
        return 0;
    }
    a = &t->added[t->added_of[id]];
    return a->special && a->norm_off == a->off;
}


int
llm_tok_decode_into(const llm_tokenizer *t, const int32_t *ids, size_t n,
    int skip_special, llm_tok_buf *out)
{
    llm_dec_list   in = { 0 }, res = { 0 };
    llm_tok_ctx    c;
    const char    *s;
    size_t         i, len;
    int            rc = 0;
    char           err[LLM_ERR_LEN];

    out->len = 0;
    llm_tok_buf_reserve(out, 0);
    out->p[0] = '\0';
    for (i = 0; i < n; i++) {
        s = llm_tok_decode_str(t, ids[i], &len);
        if (s == NULL || (skip_special && llm_tok_skipped(t, ids[i])))
        {
            continue;
        }
        llm_dec_list_add(&in, s, len);
    }
    if (t->decoder == NULL) {
        for (i = 0; i < in.n; i++) {
            if (i > 0) {
                llm_tok_buf_putc(out, ' ');
            }
            llm_tok_buf_put(out, in.buf.p + in.off[i], in.len[i]);
        }
        llm_dec_list_free(&in);
        return 0;
    }
    llm_tok_ctx_init(&c, t, err);
    if (llm_dec_run(t->decoder, &in, &res, &c) != 0) {
        rc = -1;
    } else {
        for (i = 0; i < res.n; i++) {
            llm_tok_buf_put(out, res.buf.p + res.off[i], res.len[i]);
        }
    }
    llm_tok_ctx_free(&c);
    llm_dec_list_free(&in);
    llm_dec_list_free(&res);
    return rc;
}


char *
llm_tokenizer_decode(const llm_tokenizer *t, const int32_t *ids, size_t n,
    int skip_special, size_t *len)
{
    llm_tok_buf  out = { 0 };

    /* a regex error in a Replace decoder leaves what was decoded so far;
     * decode has no error channel, and the patterns are simple literals in
     * practice */
    (void) llm_tok_decode_into(t, ids, n, skip_special, &out);
    if (len) {
        *len = out.len;
    }
    return out.p;
}
