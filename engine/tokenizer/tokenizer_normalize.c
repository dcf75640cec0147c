/*
 * tokenizer_normalize.c -- the "normalizer" of tokenizer.json: NFC, NFD,
 * NFKC, NFKD (through libutf8proc), Lowercase, Prepend, Replace, Strip,
 * StripAccents, ByteLevel and Sequence, with HF's semantics:
 *   Prepend   adds its text in front of a non-empty string only;
 *   Replace   replaces every non-overlapping match of a literal or regex;
 *   Lowercase maps each character on its own (Rust char::to_lowercase:
 *             full mappings, so U+0130 becomes "i" + U+0307; no final-sigma
 *             rule, since HF lowercases character by character).
 * A normalizer runs on each stretch of text between added tokens.
 */
#include <stdlib.h>
#include <string.h>

#include <utf8proc.h>

#include "tokenizer_impl.h"
#include "util/util.h"


static int llm_norm_parse_one(llm_tok_norm *n, yajl_val v, char *err);


int
llm_tok_norm_parse(llm_tok_norm **out, yajl_val v, char *err)
{
    llm_tok_norm  *n;

    *out = NULL;
    if (v == NULL || YAJL_IS_NULL(v)) {
        return 0;
    }
    n = llm_xcalloc(1, sizeof(*n));
    if (llm_norm_parse_one(n, v, err) != 0) {
        llm_tok_norm_free(n);
        return -1;
    }
    *out = n;
    return 0;
}


static void
llm_norm_clear(llm_tok_norm *n)
{
    size_t  i;

    for (i = 0; i < n->n_items; i++) {
        llm_norm_clear(&n->items[i]);
    }
    free(n->items);
    free(n->str);
    llm_tok_pattern_free(&n->pat);
}


void
llm_tok_norm_free(llm_tok_norm *n)
{
    if (n) {
        llm_norm_clear(n);
        free(n);
    }
}


static int
llm_norm_parse_one(llm_tok_norm *n, yajl_val v, char *err)
{
    const char  *type = llm_tok_json_str(v, "type"), *s;
    yajl_val     list;
    size_t       i;

    if (type == NULL) {
        llm_errf(err, "normalizer has no type");
        return -1;
    }
    if (strcmp(type, "Sequence") == 0) {
        n->type = LLM_NORM_SEQUENCE;
        list = llm_json_get(v, "normalizers");
        if (!YAJL_IS_ARRAY(list)) {
            llm_errf(err, "normalizer Sequence has no \"normalizers\" list");
            return -1;
        }
        n->items = llm_xcalloc(list->u.array.len + 1, sizeof(*n->items));
        for (i = 0; i < list->u.array.len; i++) {
            n->n_items++;
            if (llm_norm_parse_one(&n->items[i], list->u.array.values[i],
                                   err) != 0)
            {
                return -1;
            }
        }
        return 0;
    }
    if (strcmp(type, "NFC") == 0) {
        n->type = LLM_NORM_NFC;
    } else if (strcmp(type, "NFD") == 0) {
        n->type = LLM_NORM_NFD;
    } else if (strcmp(type, "NFKC") == 0) {
        n->type = LLM_NORM_NFKC;
    } else if (strcmp(type, "NFKD") == 0) {
        n->type = LLM_NORM_NFKD;
    } else if (strcmp(type, "Lowercase") == 0) {
        n->type = LLM_NORM_LOWERCASE;
    } else if (strcmp(type, "StripAccents") == 0) {
        n->type = LLM_NORM_STRIP_ACCENTS;
    } else if (strcmp(type, "ByteLevel") == 0) {
        n->type = LLM_NORM_BYTE_LEVEL;
    } else if (strcmp(type, "Strip") == 0) {
        n->type = LLM_NORM_STRIP;
        n->left = llm_tok_json_bool(v, "strip_left", 1);
        n->right = llm_tok_json_bool(v, "strip_right", 1);
    } else if (strcmp(type, "Prepend") == 0) {
        n->type = LLM_NORM_PREPEND;
        s = llm_tok_json_str(v, "prepend");
        if (s == NULL) {
            llm_errf(err, "normalizer Prepend has no \"prepend\" string");
            return -1;
        }
        n->str = llm_xstrdup(s);
        n->str_len = strlen(s);
    } else if (strcmp(type, "Replace") == 0) {
        n->type = LLM_NORM_REPLACE;
        s = llm_tok_json_str(v, "content");
        if (s == NULL) {
            llm_errf(err, "normalizer Replace has no \"content\" string");
            return -1;
        }
        n->str = llm_xstrdup(s);
        n->str_len = strlen(s);
        return llm_tok_pattern_parse(&n->pat, llm_json_get(v, "pattern"),
                                     "normalizer Replace", err);
    } else {
        llm_errf(err, "normalizer type \"%s\" is not supported", type);
        return -1;
    }
    return 0;
}


static int
llm_norm_ascii(const char *s, size_t len)
{
    size_t  i;

    for (i = 0; i < len; i++) {
        if ((unsigned char) s[i] >= 0x80) {
            return 0;
        }
    }
    return 1;
}


static int
llm_norm_unicode(int type, const char *s, size_t len, llm_tok_buf *out,
    llm_tok_ctx *c)
{
    utf8proc_uint8_t  *dst = NULL;
    utf8proc_ssize_t   n;
    int                opt = UTF8PROC_STABLE;

    if (llm_norm_ascii(s, len)) {
        llm_tok_buf_put(out, s, len);   /* every form of ASCII is itself */
        return 0;
    }
    switch (type) {
    case LLM_NORM_NFC:  opt |= UTF8PROC_COMPOSE; break;
    case LLM_NORM_NFD:  opt |= UTF8PROC_DECOMPOSE; break;
    case LLM_NORM_NFKC: opt |= UTF8PROC_COMPOSE | UTF8PROC_COMPAT; break;
    default:            opt |= UTF8PROC_DECOMPOSE | UTF8PROC_COMPAT; break;
    }
    n = utf8proc_map((const utf8proc_uint8_t *) s, (utf8proc_ssize_t) len,
                     &dst, (utf8proc_option_t) opt);
    if (n < 0) {
        llm_errf(c->err, "normalizer: %s", utf8proc_errmsg(n));
        return -1;
    }
    llm_tok_buf_put(out, dst, (size_t) n);
    free(dst);
    return 0;
}


static void
llm_norm_lowercase(const char *s, size_t len, llm_tok_buf *out)
{
    size_t    i, k;
    uint32_t  cp;

    llm_tok_buf_reserve(out, len);
    for (i = 0; i < len; i += k) {
        k = llm_utf8_decode(s, i, &cp);
        if (cp < 0x80) {
            llm_tok_buf_putc(out, (char) ((cp >= 'A' && cp <= 'Z')
                                          ? cp + 32 : cp));
        } else if (cp == 0x130) {
            /* the one unconditional multi-character lowercase mapping */
            llm_tok_buf_put_cp(out, 'i');
            llm_tok_buf_put_cp(out, 0x307);
        } else {
            llm_tok_buf_put_cp(out,
                (uint32_t) utf8proc_tolower((utf8proc_int32_t) cp));
        }
    }
}


static void
llm_norm_strip(const llm_tok_norm *n, const char *s, size_t len,
    llm_tok_buf *out)
{
    size_t    b = 0, e = len, k, start;
    uint32_t  cp;

    if (n->left) {
        while (b < e) {
            k = llm_utf8_decode(s, b, &cp);
            if (!llm_uc_is_whitespace(cp)) {
                break;
            }
            b += k;
        }
    }
    if (n->right) {
        while (e > b) {
            start = e - 1;
            while (start > b && ((unsigned char) s[start] & 0xC0) == 0x80) {
                start--;
            }
            llm_utf8_decode(s, start, &cp);
            if (!llm_uc_is_whitespace(cp)) {
                break;
            }
            e = start;
        }
    }
    llm_tok_buf_put(out, s + b, e - b);
}


static int
llm_norm_replace(const llm_tok_norm *n, const char *s, size_t len,
    llm_tok_ctx *c, llm_tok_buf *out)
{
    llm_tok_spans  spans = { 0 };
    size_t         i;

    if (llm_tok_pattern_spans(&n->pat, s, len, c, &spans) != 0) {
        free(spans.v);
        return -1;
    }
    for (i = 0; i < spans.n; i++) {
        if (spans.v[i].match) {
            llm_tok_buf_put(out, n->str, n->str_len);
        } else {
            llm_tok_buf_put(out, s + spans.v[i].start,
                            spans.v[i].end - spans.v[i].start);
        }
    }
    free(spans.v);
    return 0;
}


static int
llm_norm_one(const llm_tok_norm *n, const char *s, size_t len, llm_tok_ctx *c,
    llm_tok_buf *out)
{
    size_t       i, k;
    uint32_t     cp;
    llm_tok_buf  a = { 0 }, b = { 0 }, tmp;
    int          rc = 0;

    switch (n->type) {
    case LLM_NORM_SEQUENCE:
        llm_tok_buf_put(&a, s, len);
        for (i = 0; i < n->n_items && rc == 0; i++) {
            b.len = 0;
            llm_tok_buf_reserve(&b, 0);
            rc = llm_norm_one(&n->items[i], a.p, a.len, c, &b);
            tmp = a;
            a = b;
            b = tmp;
        }
        if (rc == 0) {
            llm_tok_buf_put(out, a.p, a.len);
        }
        llm_tok_buf_free(&a);
        llm_tok_buf_free(&b);
        return rc;

    case LLM_NORM_NFC:
    case LLM_NORM_NFD:
    case LLM_NORM_NFKC:
    case LLM_NORM_NFKD:
        return llm_norm_unicode(n->type, s, len, out, c);

    case LLM_NORM_LOWERCASE:
        llm_norm_lowercase(s, len, out);
        return 0;

    case LLM_NORM_PREPEND:
        if (len > 0) {
            llm_tok_buf_put(out, n->str, n->str_len);
        }
        llm_tok_buf_put(out, s, len);
        return 0;

    case LLM_NORM_REPLACE:
        return llm_norm_replace(n, s, len, c, out);

    case LLM_NORM_STRIP:
        llm_norm_strip(n, s, len, out);
        return 0;

    case LLM_NORM_STRIP_ACCENTS:
        for (i = 0; i < len; i += k) {
            k = llm_utf8_decode(s, i, &cp);
            if (!llm_uc_is_mark(cp)) {
                llm_tok_buf_put(out, s + i, k);
            }
        }
        return 0;

    case LLM_NORM_BYTE_LEVEL:
        for (i = 0; i < len; i++) {
            llm_tok_buf_put_cp(out, llm_tok_byte_to_cp((unsigned char) s[i]));
        }
        return 0;
    }
    return 0;
}


int
llm_tok_norm_apply(const llm_tok_norm *n, const char *s, size_t len,
    llm_tok_ctx *c, llm_tok_buf *out)
{
    out->len = 0;
    llm_tok_buf_reserve(out, len);
    out->p[0] = '\0';
    return llm_norm_one(n, s, len, c, out);
}
