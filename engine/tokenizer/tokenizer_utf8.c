/*
 * tokenizer_utf8.c -- the small pieces every tokenizer step stands on:
 * a growable byte buffer, UTF-8 validation and repair, the Unicode character
 * classes HF's Rust code uses, and a string -> id hash map.
 */
#include <stdlib.h>
#include <string.h>

#include <utf8proc.h>

#include "tokenizer_impl.h"
#include "util/util.h"


void
llm_tok_buf_reserve(llm_tok_buf *b, size_t extra)
{
    size_t  cap;

    if (b->len + extra + 1 <= b->cap) {
        return;
    }
    cap = b->cap ? b->cap : 64;
    while (cap < b->len + extra + 1) {
        cap *= 2;
    }
    b->p = llm_xrealloc(b->p, cap);
    b->cap = cap;
}


void
llm_tok_buf_put(llm_tok_buf *b, const void *s, size_t n)
{
    llm_tok_buf_reserve(b, n);
    if (n) {
        memcpy(b->p + b->len, s, n);
    }
    b->len += n;
    b->p[b->len] = '\0';
}


void
llm_tok_buf_putc(llm_tok_buf *b, char c)
{
    llm_tok_buf_reserve(b, 1);
    b->p[b->len++] = c;
    b->p[b->len] = '\0';
}


void
llm_tok_buf_put_cp(llm_tok_buf *b, uint32_t cp)
{
    char    tmp[4];
    size_t  n;

    n = llm_utf8_encode(cp, tmp);
    llm_tok_buf_put(b, tmp, n);
}


void
llm_tok_buf_free(llm_tok_buf *b)
{
    free(b->p);
    b->p = NULL;
    b->len = b->cap = 0;
}


/* ---- UTF-8 (validation and decoding: util/utf8.c) ---- */


void
llm_utf8_sanitize(const char *str, size_t n, llm_tok_buf *out)
{
    const unsigned char  *s = (const unsigned char *) str;
    size_t                i = 0, run = 0, k;

    llm_tok_buf_reserve(out, n);
    while (i < n) {
        if (s[i] < 0x80) {
            i++;
            continue;
        }
        k = llm_utf8_seq_len(s + i, n - i);
        if (k) {
            i += k;
            continue;
        }
        /* flush the valid run, then one U+FFFD for the maximal subpart */
        llm_tok_buf_put(out, s + run, i - run);
        llm_tok_buf_put_cp(out, LLM_UTF8_REPLACEMENT);
        i += llm_utf8_subpart_len(s + i, n - i);
        run = i;
    }
    llm_tok_buf_put(out, s + run, n - run);
}


/* ---- Unicode classes ---- */

int
llm_uc_is_whitespace(uint32_t cp)
{
    /* the White_Space property, which Rust's char::is_whitespace and the
     * regex crate's \s use */
    return (cp >= 0x09 && cp <= 0x0D) || cp == 0x20 || cp == 0x85
           || cp == 0xA0 || cp == 0x1680 || (cp >= 0x2000 && cp <= 0x200A)
           || cp == 0x2028 || cp == 0x2029 || cp == 0x202F || cp == 0x205F
           || cp == 0x3000;
}


int
llm_uc_is_word(uint32_t cp)
{
    utf8proc_category_t  cat;

    if (cp < 0x80) {
        return (cp >= '0' && cp <= '9') || (cp >= 'a' && cp <= 'z')
               || (cp >= 'A' && cp <= 'Z') || cp == '_';
    }
    if (cp == 0x200C || cp == 0x200D) {
        return 1;       /* Join_Control */
    }
    cat = utf8proc_category((utf8proc_int32_t) cp);
    switch (cat) {
    case UTF8PROC_CATEGORY_LU: case UTF8PROC_CATEGORY_LL:
    case UTF8PROC_CATEGORY_LT: case UTF8PROC_CATEGORY_LM:
    case UTF8PROC_CATEGORY_LO: case UTF8PROC_CATEGORY_MN:
    case UTF8PROC_CATEGORY_MC: case UTF8PROC_CATEGORY_ME:
    case UTF8PROC_CATEGORY_ND: case UTF8PROC_CATEGORY_NL:
    case UTF8PROC_CATEGORY_PC:
        return 1;
    default:
        return 0;
    }
}


int
llm_uc_is_numeric(uint32_t cp)
{
    utf8proc_category_t  cat;

    if (cp < 0x80) {
        return cp >= '0' && cp <= '9';
    }
    cat = utf8proc_category((utf8proc_int32_t) cp);
    return cat == UTF8PROC_CATEGORY_ND || cat == UTF8PROC_CATEGORY_NL
           || cat == UTF8PROC_CATEGORY_NO;
}


int
llm_uc_is_punctuation(uint32_t cp)
{
    utf8proc_category_t  cat;

    if (cp < 0x80) {
        return (cp >= 0x21 && cp <= 0x2F) || (cp >= 0x3A && cp <= 0x40)
               || (cp >= 0x5B && cp <= 0x60) || (cp >= 0x7B && cp <= 0x7E);
    }
    cat = utf8proc_category((utf8proc_int32_t) cp);
    return cat >= UTF8PROC_CATEGORY_PC && cat <= UTF8PROC_CATEGORY_PO;
}


int
llm_uc_is_mark(uint32_t cp)
{
    utf8proc_category_t  cat;

    if (cp < 0x300) {
        return 0;
    }
    cat = utf8proc_category((utf8proc_int32_t) cp);
    return cat == UTF8PROC_CATEGORY_MN || cat == UTF8PROC_CATEGORY_MC
           || cat == UTF8PROC_CATEGORY_ME;
}


/* ---- string -> id map: open addressing, linear probing ---- */

static uint32_t
llm_tok_hash(const char *s, size_t n)
{
    uint64_t  h = 0xcbf29ce484222325ull;    /* FNV-1a, folded to 32 bits */
    size_t    i;

    for (i = 0; i < n; i++) {
        h ^= (unsigned char) s[i];
        h *= 0x100000001b3ull;
    }
    return (uint32_t) (h ^ (h >> 32));
}


void
llm_tok_map_init(llm_tok_map *m, size_t expected)
{
    size_t  cap = 16, i;

    while (cap < expected * 2) {
        cap *= 2;
    }
    m->slots = llm_xmalloc(cap * sizeof(*m->slots));
    for (i = 0; i < cap; i++) {
        m->slots[i].val = -1;
    }
    m->mask = (uint32_t) (cap - 1);
    m->count = 0;
}


static void
llm_tok_map_grow(llm_tok_map *m)
{
    llm_tok_slot  *old = m->slots;
    size_t         cap = (size_t) m->mask + 1, i, j;

    m->slots = llm_xmalloc(cap * 2 * sizeof(*m->slots));
    for (i = 0; i < cap * 2; i++) {
        m->slots[i].val = -1;
    }
    m->mask = (uint32_t) (cap * 2 - 1);
    for (i = 0; i < cap; i++) {
        if (old[i].val < 0) {
            continue;
        }
        for (j = old[i].hash & m->mask; m->slots[j].val >= 0;
             j = (j + 1) & m->mask)
        {
            /* probe */
        }
        m->slots[j] = old[i];
    }
    free(old);
}


void
llm_tok_map_put(llm_tok_map *m, const char *base, uint32_t off, uint32_t len,
    int32_t val)
{
    uint32_t  h = llm_tok_hash(base + off, len), j;

    if ((m->count + 1) * 2 > m->mask + 1) {
        llm_tok_map_grow(m);
    }
    for (j = h & m->mask; m->slots[j].val >= 0; j = (j + 1) & m->mask) {
        if (m->slots[j].hash == h && m->slots[j].len == len
            && memcmp(base + m->slots[j].off, base + off, len) == 0)
        {
            m->slots[j].val = val;
            return;
        }
    }
    m->slots[j].off = off;
    m->slots[j].len = len;
    m->slots[j].hash = h;
    m->slots[j].val = val;
    m->count++;
}


int32_t
llm_tok_map_get(const llm_tok_map *m, const char *base, const char *key,
    size_t len)
{
    uint32_t  h, j;

    if (m->slots == NULL) {
        return -1;
    }
    h = llm_tok_hash(key, len);
    for (j = h & m->mask; m->slots[j].val >= 0; j = (j + 1) & m->mask) {
        if (m->slots[j].hash == h && m->slots[j].len == len
            && memcmp(base + m->slots[j].off, key, len) == 0)
        {
            return m->slots[j].val;
        }
    }
    return -1;
}


void
llm_tok_map_free(llm_tok_map *m)
{
    free(m->slots);
    m->slots = NULL;
}
