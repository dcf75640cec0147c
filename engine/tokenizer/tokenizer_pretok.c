/*
 * tokenizer_pretok.c -- the "pre_tokenizer" of tokenizer.json, and the
 * patterns it splits with.
 *
 * Supported: Sequence, Split (String or Regex pattern, all five
 * SplitDelimiterBehaviors, invert), ByteLevel (add_prefix_space, use_regex
 * with GPT-2's pattern), Metaspace (replacement, prepend_scheme
 * always/first/never, split), Digits, Whitespace, WhitespaceSplit,
 * Punctuation.
 *
 * Regexes are HF's Oniguruma patterns compiled by PCRE2 with UTF and UCP
 * (so \s, \p{L}, \p{N} and (?i) are Unicode-aware), JIT-compiled.  Matching
 * follows the onig crate's find_iter: leftmost matches, and an empty match
 * right where the previous match ended is skipped.
 */
#define _GNU_SOURCE             /* memmem */
#include <stdlib.h>
#include <string.h>

#include "tokenizer_impl.h"
#include "util/util.h"


/* GPT-2's pattern, used by ByteLevel with use_regex: true. */
static const char  llm_gpt2_re[] =
    "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+"
    "|\\s+(?!\\S)|\\s+";

/* HF's Whitespace pre-tokenizer pattern (kept matches, the rest dropped). */
static const char  llm_ws_re[] = "\\w+|[^\\w\\s]+";


/* ---- ByteLevel's byte <-> character table (GPT-2 bytes_to_unicode) ---- */

uint32_t
llm_tok_byte_to_cp(unsigned char b)
{
    /* printable bytes stand for themselves; the 68 others are mapped, in
     * byte order, to U+0100..U+0143 */
    if (b <= 0x20) {
        return 0x100u + b;
    }
    if (b >= 0x7F && b <= 0xA0) {
        return 0x100u + 33 + (b - 0x7Fu);
    }
    if (b == 0xAD) {
        return 0x143;
    }
    return b;
}


int
llm_tok_cp_to_byte(uint32_t cp)
{
    if ((cp >= 0x21 && cp <= 0x7E) || (cp >= 0xA1 && cp <= 0xAC)
        || (cp >= 0xAE && cp <= 0xFF))
    {
        return (int) cp;
    }
    if (cp >= 0x100 && cp <= 0x120) {
        return (int) (cp - 0x100);
    }
    if (cp >= 0x121 && cp <= 0x142) {
        return (int) (0x7F + (cp - 0x121));
    }
    if (cp == 0x143) {
        return 0xAD;
    }
    return -1;
}


/* ---- patterns ---- */

/*
 * PCRE2's \s and \w are not those of Oniguruma and Rust's regex, which HF's
 * patterns were written for: with UCP, PCRE2's \s also matches U+180E and
 * its \w misses combining marks.  So the shorthands are spelled out as the
 * classes HF means: \s is White_Space, \w is letters, marks, decimal
 * digits, letter numbers, connector punctuation and the joiners.  (\S / \W
 * inside a [...] class are left to PCRE2.)
 */
#define LLM_RE_WS  "\\t\\n\\x{0b}\\f\\r\\x{20}\\x{85}\\x{a0}\\x{1680}" \
                   "\\x{2000}-\\x{200a}\\x{2028}\\x{2029}\\x{202f}\\x{205f}" \
                   "\\x{3000}"
#define LLM_RE_W   "\\p{L}\\p{M}\\p{Nd}\\p{Nl}\\p{Pc}\\x{200c}\\x{200d}"

static void
llm_regex_rewrite(const char *re, size_t len, llm_tok_buf *out)
{
    size_t  i;
    int     in_class = 0, class_start = 0;
    char    c;

    for (i = 0; i < len; i++) {
        c = re[i];
        if (c == '\\' && i + 1 < len) {
            c = re[i + 1];
            i++;
            if (c == 's' || c == 'w') {
                const char  *set = c == 's' ? LLM_RE_WS : LLM_RE_W;

                if (in_class) {
                    llm_tok_buf_put(out, set, strlen(set));
                } else {
                    llm_tok_buf_putc(out, '[');
                    llm_tok_buf_put(out, set, strlen(set));
                    llm_tok_buf_putc(out, ']');
                }
            } else if ((c == 'S' || c == 'W') && !in_class) {
                const char  *set = c == 'S' ? LLM_RE_WS : LLM_RE_W;

                llm_tok_buf_put(out, "[^", 2);
                llm_tok_buf_put(out, set, strlen(set));
                llm_tok_buf_putc(out, ']');
            } else {
                llm_tok_buf_putc(out, '\\');
                llm_tok_buf_putc(out, c);
            }
            class_start = 0;
            continue;
        }
        llm_tok_buf_putc(out, c);
        if (!in_class) {
            if (c == '[') {
                in_class = 1;
                class_start = 1;
                if (i + 1 < len && re[i + 1] == '^') {
                    llm_tok_buf_putc(out, '^');
                    i++;
                }
            }
            continue;
        }
        if (c == '[' && i + 1 < len && re[i + 1] == ':') {
            /* a POSIX class [:name:] inside the class */
            while (++i < len) {
                llm_tok_buf_putc(out, re[i]);
                if (re[i] == ']' && re[i - 1] == ':') {
                    break;
                }
            }
        } else if (c == ']' && !class_start) {
            in_class = 0;
        }
        class_start = 0;
    }
}


int
llm_tok_pattern_regex(llm_tok_pattern *p, const char *re, size_t len,
    const char *what, char *err)
{
    int          code;
    PCRE2_SIZE   off;
    PCRE2_UCHAR  msg[256];
    llm_tok_buf  rw = { 0 };

    llm_regex_rewrite(re, len, &rw);
    p->re = pcre2_compile((PCRE2_SPTR) (rw.p ? rw.p : ""), rw.len,
                          PCRE2_UTF | PCRE2_UCP, &code, &off, NULL);
    llm_tok_buf_free(&rw);
    if (p->re == NULL) {
        pcre2_get_error_message(code, msg, sizeof(msg));
        llm_errf(err, "%s: regex \"%.*s\" does not compile: %s",
                 what, (int) len, re, (char *) msg);
        return -1;
    }
    /* without JIT (e.g. no executable memory) the interpreter runs */
    (void) pcre2_jit_compile(p->re, PCRE2_JIT_COMPLETE);
    return 0;
}


int
llm_tok_pattern_parse(llm_tok_pattern *p, yajl_val v, const char *what,
    char *err)
{
    const char  *s;

    if ((s = llm_tok_json_str(v, "String")) != NULL) {
        p->lit = llm_xstrdup(s);
        p->lit_len = strlen(s);
        return 0;
    }
    if ((s = llm_tok_json_str(v, "Regex")) != NULL) {
        return llm_tok_pattern_regex(p, s, strlen(s), what, err);
    }
    llm_errf(err, "%s: pattern is neither {\"String\": ...} nor "
             "{\"Regex\": ...}", what);
    return -1;
}


void
llm_tok_pattern_free(llm_tok_pattern *p)
{
    free(p->lit);
    p->lit = NULL;
    if (p->re) {
        pcre2_code_free(p->re);
        p->re = NULL;
    }
}


static void
llm_spans_push(llm_tok_spans *sp, size_t start, size_t end, int match)
{
    if (sp->n == sp->cap) {
        sp->cap = sp->cap ? sp->cap * 2 : 32;
        sp->v = llm_xrealloc(sp->v, sp->cap * sizeof(*sp->v));
    }
    sp->v[sp->n].start = (uint32_t) start;
    sp->v[sp->n].end = (uint32_t) end;
    sp->v[sp->n].match = (uint8_t) match;
    sp->n++;
}


int
llm_tok_regex_match(llm_tok_ctx *c, const pcre2_code *re, const char *s,
    size_t len, size_t start, size_t *mstart, size_t *mend)
{
    int          rc;
    PCRE2_SIZE  *ov;

    if (c->md == NULL) {
        /* one pair: only the whole match is needed */
        c->md = pcre2_match_data_create(1, NULL);
        if (c->md == NULL) {
            llm_errf(c->err, "tokenizer regex: out of memory");
            return -1;
        }
    }
    rc = pcre2_match(re, (PCRE2_SPTR) s, len, start, PCRE2_NO_UTF_CHECK,
                     c->md, c->mctx);
    if (rc == PCRE2_ERROR_JIT_STACKLIMIT) {
        /* a long run the 32 KiB default JIT stack cannot hold: a bigger
         * stack for this call, then the interpreter as the last resort */
        if (c->jit_stack == NULL) {
            c->jit_stack = pcre2_jit_stack_create(256 * 1024,
                                                  64 * 1024 * 1024, NULL);
            if (c->mctx == NULL) {
                c->mctx = pcre2_match_context_create(NULL);
            }
            if (c->jit_stack && c->mctx) {
                pcre2_jit_stack_assign(c->mctx, NULL, c->jit_stack);
            }
        }
        rc = pcre2_match(re, (PCRE2_SPTR) s, len, start, PCRE2_NO_UTF_CHECK,
                         c->md, c->mctx);
        if (rc == PCRE2_ERROR_JIT_STACKLIMIT) {
            rc = pcre2_match(re, (PCRE2_SPTR) s, len, start,
                             PCRE2_NO_UTF_CHECK | PCRE2_NO_JIT, c->md,
                             c->mctx);
        }
    }
    if (rc == PCRE2_ERROR_NOMATCH) {
        return 0;
    }
    if (rc < 0) {
        PCRE2_UCHAR  msg[128];

        pcre2_get_error_message(rc, msg, sizeof(msg));
        llm_errf(c->err, "tokenizer regex: %s", (char *) msg);
        return -1;
    }
    /* rc == 0 only says the ovector (one pair) is too small for the groups:
     * the whole match is still there */
    ov = pcre2_get_ovector_pointer(c->md);
    *mstart = ov[0];
    *mend = ov[1];
    return 1;
}


int
llm_tok_pattern_spans(const llm_tok_pattern *p, const char *s, size_t len,
    llm_tok_ctx *c, llm_tok_spans *out)
{
    size_t       prev = 0, pos = 0, ms, me, last_end = (size_t) -1;
    const char  *hit;
    int          rc;

    out->n = 0;
    if (len == 0) {
        llm_spans_push(out, 0, 0, 0);
        return 0;
    }
    if (p->re == NULL) {
        while (p->lit_len > 0 && pos + p->lit_len <= len
               && (hit = memmem(s + pos, len - pos, p->lit, p->lit_len)))
        {
            ms = (size_t) (hit - s);
            if (prev != ms) {
                llm_spans_push(out, prev, ms, 0);
            }
            llm_spans_push(out, ms, ms + p->lit_len, 1);
            prev = pos = ms + p->lit_len;
        }
    } else {
        while (pos <= len) {
            rc = llm_tok_regex_match(c, p->re, s, len, pos, &ms, &me);
            if (rc < 0) {
                return -1;
            }
            if (rc == 0) {
                break;
            }
            if (ms == me && me == last_end) {
                /* onig crate: no empty match right after the last match */
                if (pos >= len) {
                    break;
                }
                pos += llm_utf8_char_len((unsigned char) s[pos]);
                continue;
            }
            if (prev != ms) {
                llm_spans_push(out, prev, ms, 0);
            }
            llm_spans_push(out, ms, me, 1);
            prev = me;
            pos = last_end = me;
        }
    }
    if (prev != len) {
        llm_spans_push(out, prev, len, 0);
    }
    return 0;
}


/* HF's Pattern for Fn(char) -> bool: every matching character is a match
 * of its own. */
typedef int (*llm_char_pred)(uint32_t cp, uint32_t arg);

static void
llm_pred_spans(const char *s, size_t len, llm_char_pred pred, uint32_t arg,
    llm_tok_spans *out)
{
    size_t    i, k, last = 0;
    uint32_t  cp;

    out->n = 0;
    if (len == 0) {
        llm_spans_push(out, 0, 0, 0);
        return;
    }
    for (i = 0; i < len; i += k) {
        k = llm_utf8_decode(s, i, &cp);
        if (pred(cp, arg)) {
            if (last < i) {
                llm_spans_push(out, last, i, 0);
            }
            llm_spans_push(out, i, i + k, 1);
            last = i + k;
        }
    }
    if (len > last) {
        llm_spans_push(out, last, len, 0);
    }
}


static int
llm_pred_numeric(uint32_t cp, uint32_t arg)
{
    return llm_uc_is_numeric(cp);
}


static int
llm_pred_whitespace(uint32_t cp, uint32_t arg)
{
    return llm_uc_is_whitespace(cp);
}


static int
llm_pred_punct(uint32_t cp, uint32_t arg)
{
    return llm_uc_is_punctuation(cp);
}


static int
llm_pred_equal(uint32_t cp, uint32_t arg)
{
    return cp == arg;
}


/* ---- parsing ---- */

static int
llm_pretok_behavior(yajl_val v, int *out, char *err)
{
    static const char  *names[] = {
        "Removed", "Isolated", "MergedWithPrevious", "MergedWithNext",
        "Contiguous", NULL
    };
    const char         *s = llm_tok_json_str(v, "behavior");
    int                 i;

    if (s == NULL) {
        return 1;               /* absent: the caller's default */
    }
    for (i = 0; names[i]; i++) {
        if (strcmp(s, names[i]) == 0) {
            *out = i;           /* same order as the LLM_SPLIT_ enum */
            return 0;
        }
    }
    llm_errf(err, "pre_tokenizer: unknown split behavior \"%s\"", s);
    return -1;
}


static int llm_pretok_parse_one(llm_tok_pretok *p, yajl_val v, char *err);


int
llm_tok_pretok_parse(llm_tok_pretok **out, yajl_val v, char *err)
{
    llm_tok_pretok  *p;

    *out = NULL;
    if (v == NULL || YAJL_IS_NULL(v)) {
        return 0;
    }
    p = llm_xcalloc(1, sizeof(*p));
    if (llm_pretok_parse_one(p, v, err) != 0) {
        llm_tok_pretok_free(p);
        return -1;
    }
    *out = p;
    return 0;
}


static void
llm_pretok_clear(llm_tok_pretok *p)
{
    size_t  i;

    for (i = 0; i < p->n_items; i++) {
        llm_pretok_clear(&p->items[i]);
    }
    free(p->items);
    llm_tok_pattern_free(&p->pat);
}


void
llm_tok_pretok_free(llm_tok_pretok *p)
{
    if (p) {
        llm_pretok_clear(p);
        free(p);
    }
}


static int
llm_pretok_parse_metaspace(llm_tok_pretok *p, yajl_val v, char *err)
{
    const char  *r = llm_tok_json_str(v, "replacement");
    const char  *scheme = llm_tok_json_str(v, "prepend_scheme");

    p->type = LLM_PRETOK_METASPACE;
    p->replacement = 0x2581;
    if (r != NULL && r[0] != '\0') {
        llm_utf8_decode(r, 0, &p->replacement);
    }
    p->split = llm_tok_json_bool(v, "split", 1);
    p->prepend_scheme = LLM_PREPEND_ALWAYS;
    if (scheme != NULL) {
        if (strcmp(scheme, "first") == 0) {
            p->prepend_scheme = LLM_PREPEND_FIRST;
        } else if (strcmp(scheme, "never") == 0) {
            p->prepend_scheme = LLM_PREPEND_NEVER;
        } else if (strcmp(scheme, "always") != 0) {
            llm_errf(err, "Metaspace: unknown prepend_scheme \"%s\"", scheme);
            return -1;
        }
    }
    /* older files: add_prefix_space false means never */
    if (llm_tok_json_bool(v, "add_prefix_space", 1) == 0) {
        p->prepend_scheme = LLM_PREPEND_NEVER;
    }
    return 0;
}


static int
llm_pretok_parse_one(llm_tok_pretok *p, yajl_val v, char *err)
{
    const char  *type = llm_tok_json_str(v, "type");
    yajl_val     list;
    size_t       i;
    int          rc;

    if (type == NULL) {
        llm_errf(err, "pre_tokenizer has no type");
        return -1;
    }
    if (strcmp(type, "Sequence") == 0) {
        p->type = LLM_PRETOK_SEQUENCE;
        list = llm_json_get(v, "pretokenizers");
        if (!YAJL_IS_ARRAY(list)) {
            llm_errf(err, "pre_tokenizer Sequence has no \"pretokenizers\"");
            return -1;
        }
        p->items = llm_xcalloc(list->u.array.len + 1, sizeof(*p->items));
        for (i = 0; i < list->u.array.len; i++) {
            p->n_items++;
            if (llm_pretok_parse_one(&p->items[i], list->u.array.values[i],
                                     err) != 0)
            {
                return -1;
            }
        }
        return 0;
    }
    if (strcmp(type, "Split") == 0) {
        p->type = LLM_PRETOK_SPLIT;
        p->invert = llm_tok_json_bool(v, "invert", 0);
        rc = llm_pretok_behavior(v, &p->behavior, err);
        if (rc != 0) {
            if (rc > 0) {
                llm_errf(err, "pre_tokenizer Split has no behavior");
            }
            return -1;
        }
        return llm_tok_pattern_parse(&p->pat, llm_json_get(v, "pattern"),
                                     "pre_tokenizer Split", err);
    }
    if (strcmp(type, "ByteLevel") == 0) {
        p->type = LLM_PRETOK_BYTE_LEVEL;
        p->add_prefix_space = llm_tok_json_bool(v, "add_prefix_space", 1);
        p->use_regex = llm_tok_json_bool(v, "use_regex", 1);
        if (p->use_regex) {
            return llm_tok_pattern_regex(&p->pat, llm_gpt2_re,
                                         sizeof(llm_gpt2_re) - 1,
                                         "pre_tokenizer ByteLevel", err);
        }
        return 0;
    }
    if (strcmp(type, "Metaspace") == 0) {
        return llm_pretok_parse_metaspace(p, v, err);
    }
    if (strcmp(type, "Digits") == 0) {
        p->type = LLM_PRETOK_DIGITS;
        p->individual_digits = llm_tok_json_bool(v, "individual_digits", 0);
        return 0;
    }
    if (strcmp(type, "Whitespace") == 0) {
        p->type = LLM_PRETOK_WHITESPACE;
        return llm_tok_pattern_regex(&p->pat, llm_ws_re, sizeof(llm_ws_re) - 1,
                                     "pre_tokenizer Whitespace", err);
    }
    if (strcmp(type, "WhitespaceSplit") == 0) {
        p->type = LLM_PRETOK_WHITESPACE_SPLIT;
        return 0;
    }
    if (strcmp(type, "Punctuation") == 0) {
        p->type = LLM_PRETOK_PUNCTUATION;
        p->behavior = LLM_SPLIT_ISOLATED;
        return llm_pretok_behavior(v, &p->behavior, err) < 0 ? -1 : 0;
    }
    llm_errf(err, "pre_tokenizer type \"%s\" is not supported", type);
    return -1;
}


/* ---- applying ---- */

/*
 * Cuts piece p along the spans the way HF NormalizedString::split does for
 * the behavior, pushing the non-empty parts to c->next.
 */
static void
llm_pretok_emit(llm_tok_ctx *c, const llm_tok_piece *p, llm_tok_spans *sp,
    int behavior, int invert)
{
    size_t         i, n = 0;
    llm_tok_span  *v = sp->v, *o;
    int            prev_match = 0, m;

    if (invert) {
        for (i = 0; i < sp->n; i++) {
            v[i].match = !v[i].match;
        }
    }
    /* merge in place: o[0..n) are the parts, .match = "remove" */
    o = v;
    switch (behavior) {
    case LLM_SPLIT_REMOVED:
        n = sp->n;
        break;
    case LLM_SPLIT_ISOLATED:
        for (i = 0; i < sp->n; i++) {
            v[i].match = 0;
        }
        n = sp->n;
        break;
    case LLM_SPLIT_CONTIGUOUS:
        for (i = 0; i < sp->n; i++) {
            m = v[i].match;
            if (m == prev_match && n > 0) {
                o[n - 1].end = v[i].end;
            } else {
                o[n] = v[i];
                o[n++].match = 0;
            }
            prev_match = m;
        }
        break;
    case LLM_SPLIT_MERGED_PREV:
        for (i = 0; i < sp->n; i++) {
            m = v[i].match;
            if (m && !prev_match && n > 0) {
                o[n - 1].end = v[i].end;
            } else {
                o[n] = v[i];
                o[n++].match = 0;
            }
            prev_match = m;
        }
        break;
    case LLM_SPLIT_MERGED_NEXT:
        /* right to left, then the parts are in reverse order */
        for (i = sp->n; i-- > 0;) {
            m = v[i].match;
            if (m && !prev_match && n > 0) {
                o[sp->n - n].start = v[i].start;
            } else {
                o[sp->n - 1 - n] = v[i];
                o[sp->n - 1 - n].match = 0;
                n++;
            }
            prev_match = m;
        }
        o = v + (sp->n - n);
        break;
    }
    for (i = 0; i < n; i++) {
        if (o[i].match || o[i].end == o[i].start) {
            continue;
        }
        llm_tok_pieces_push(&c->next, p->off + o[i].start,
                            o[i].end - o[i].start, -1,
                            p->at_start && o[i].start == 0);
    }
}


/* ByteLevel: the optional prefix space, GPT-2 splitting, then every byte
 * becomes its table character. */
static int
llm_pretok_byte_level(const llm_tok_pretok *pt, llm_tok_ctx *c,
    const llm_tok_piece *p)
{
    llm_tok_piece  src = *p, part;
    size_t         first = c->next.n, i, j;
    uint32_t       off;

    if (pt->add_prefix_space && c->text.p[p->off] != ' ') {
        /* reserve first: the source lives in the buffer that grows */
        llm_tok_buf_reserve(&c->text, (size_t) p->len + 1);
        off = (uint32_t) c->text.len;
        llm_tok_buf_putc(&c->text, ' ');
        llm_tok_buf_put(&c->text, c->text.p + p->off, p->len);
        src.off = off;
        src.len = p->len + 1;
    }
    if (pt->use_regex) {
        if (llm_tok_pattern_spans(&pt->pat, c->text.p + src.off, src.len, c,
                                  &c->spans) != 0)
        {
            return -1;
        }
        llm_pretok_emit(c, &src, &c->spans, LLM_SPLIT_ISOLATED, 0);
    } else {
        llm_tok_pieces_push(&c->next, src.off, src.len, -1, src.at_start);
    }
    for (i = first; i < c->next.n; i++) {
        part = c->next.v[i];
        off = (uint32_t) c->text.len;
        llm_tok_buf_reserve(&c->text, (size_t) part.len * 2);
        for (j = 0; j < part.len; j++) {
            llm_tok_buf_put_cp(&c->text, llm_tok_byte_to_cp(
                                   (unsigned char) c->text.p[part.off + j]));
        }
        c->next.v[i].off = off;
        c->next.v[i].len = (uint32_t) (c->text.len - off);
    }
    return 0;
}


static void
llm_pretok_metaspace(const llm_tok_pretok *pt, llm_tok_ctx *c,
    const llm_tok_piece *p)
{
    char           rep[4];
    size_t         rlen = llm_utf8_encode(pt->replacement, rep), i;
    uint32_t       off = (uint32_t) c->text.len, cp;
    llm_tok_piece  np;
    int            prepend;

    /* spaces become the replacement; the string starts with one when the
     * scheme asks and it does not already */
    prepend = pt->prepend_scheme == LLM_PREPEND_ALWAYS
              || (pt->prepend_scheme == LLM_PREPEND_FIRST && p->at_start);
    if (prepend) {
        if (c->text.p[p->off] == ' ') {
            prepend = 0;        /* the space becomes the replacement */
        } else {
            llm_utf8_decode(c->text.p, p->off, &cp);
            prepend = cp != pt->replacement;
        }
    }
    if (prepend) {
        llm_tok_buf_put(&c->text, rep, rlen);
    }
    for (i = 0; i < p->len; i++) {
        if (c->text.p[p->off + i] == ' ') {
            llm_tok_buf_put(&c->text, rep, rlen);
        } else {
            llm_tok_buf_putc(&c->text, c->text.p[p->off + i]);
        }
    }
    np.off = off;
    np.len = (uint32_t) (c->text.len - off);
    np.id = -1;
    np.at_start = p->at_start;
    if (!pt->split) {
        llm_tok_pieces_push(&c->next, np.off, np.len, -1, np.at_start);
        return;
    }
    llm_pred_spans(c->text.p + np.off, np.len, llm_pred_equal,
                   pt->replacement, &c->spans);
    llm_pretok_emit(c, &np, &c->spans, LLM_SPLIT_MERGED_NEXT, 0);
}


static int
llm_pretok_piece(const llm_tok_pretok *pt, llm_tok_ctx *c,
    const llm_tok_piece *p)
{
    const char  *s = c->text.p + p->off;

    switch (pt->type) {
    case LLM_PRETOK_SPLIT:
        if (llm_tok_pattern_spans(&pt->pat, s, p->len, c, &c->spans) != 0) {
            return -1;
        }
        llm_pretok_emit(c, p, &c->spans, pt->behavior, pt->invert);
        return 0;
    case LLM_PRETOK_BYTE_LEVEL:
        return llm_pretok_byte_level(pt, c, p);
    case LLM_PRETOK_METASPACE:
        llm_pretok_metaspace(pt, c, p);
        return 0;
    case LLM_PRETOK_DIGITS:
        llm_pred_spans(s, p->len, llm_pred_numeric, 0, &c->spans);
        llm_pretok_emit(c, p, &c->spans, pt->individual_digits
                        ? LLM_SPLIT_ISOLATED : LLM_SPLIT_CONTIGUOUS, 0);
        return 0;
    case LLM_PRETOK_WHITESPACE:
        if (llm_tok_pattern_spans(&pt->pat, s, p->len, c, &c->spans) != 0) {
            return -1;
        }
        llm_pretok_emit(c, p, &c->spans, LLM_SPLIT_REMOVED, 1);
        return 0;
    case LLM_PRETOK_WHITESPACE_SPLIT:
        llm_pred_spans(s, p->len, llm_pred_whitespace, 0, &c->spans);
        llm_pretok_emit(c, p, &c->spans, LLM_SPLIT_REMOVED, 0);
        return 0;
    case LLM_PRETOK_PUNCTUATION:
        llm_pred_spans(s, p->len, llm_pred_punct, 0, &c->spans);
        llm_pretok_emit(c, p, &c->spans, pt->behavior, 0);
        return 0;
    }
    return 0;
}


int
llm_tok_pretok_apply(const llm_tok_pretok *pt, llm_tok_ctx *c)
{
    llm_tok_pieces  tmp;
    size_t          i;

    if (pt->type == LLM_PRETOK_SEQUENCE) {
        for (i = 0; i < pt->n_items; i++) {
            if (llm_tok_pretok_apply(&pt->items[i], c) != 0) {
                return -1;
            }
        }
        return 0;
    }
    c->next.n = 0;
    for (i = 0; i < c->cur.n; i++) {
        if (c->cur.v[i].id >= 0 || c->cur.v[i].len == 0) {
            if (c->cur.v[i].id >= 0) {
                llm_tok_pieces_push(&c->next, c->cur.v[i].off,
                                    c->cur.v[i].len, c->cur.v[i].id, 0);
            }
            continue;
        }
        if (llm_pretok_piece(pt, c, &c->cur.v[i]) != 0) {
            return -1;
        }
    }
    tmp = c->cur;
    c->cur = c->next;
    c->next = tmp;
    return 0;
}
