/*
 * jinja_lexer.c -- splits template source into tokens the way jinja2's
 * Lexer does with trim_blocks and lstrip_blocks on.
 *
 * Whitespace control is decided here, so it is worth stating exactly
 * (jinja2/lexer.py, tokeniter):
 * - newlines are normalised to \n and one trailing newline is dropped
 *   (keep_trailing_newline is off);
 * - "{%-", "{#-", "{{-" strip all whitespace (Python's str.isspace set)
 *   before the tag; "-%}", "-#}", "-}}" strip all whitespace after it;
 * - trim_blocks: "%}" and "#}" swallow one directly following newline;
 * - lstrip_blocks: spaces and tabs between the start of a line and "{%"
 *   or "{#" are dropped, unless the tag starts with "{%+" / "{#+";
 *   "+%}" keeps the newline after a block.
 * - inside {% raw %} nothing is a tag until {% endraw %}.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "jinja_lexer.h"


typedef struct {
    jinja_vm      *vm;
    const char    *src;
    size_t         len;
    size_t         pos;
    uint32_t       line;            /* line of line_pos */
    size_t         line_pos;
    jinja_tokens  *toks;
    int            line_starting;   /* the last match ended with \n */
    char          *balance;         /* expected closing brackets */
    size_t         nbalance, balance_cap;
} jinja_lexer;


static uint32_t
lex_line_at(jinja_lexer *lx, size_t pos)
{
    while (lx->line_pos < pos && lx->line_pos < lx->len) {
        if (lx->src[lx->line_pos] == '\n') {
            lx->line++;
        }
        lx->line_pos++;
    }
    return lx->line;
}


__attribute__((noreturn, format(printf, 3, 4))) static void
lex_fail(jinja_lexer *lx, size_t pos, const char *fmt, ...)
{
    va_list  ap;
    char     msg[LLM_ERR_LEN];

    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    lx->vm->line = lex_line_at(lx, pos);
    jinja_fail(lx->vm, "syntax error: %s", msg);
}


static jinja_token *
lex_emit(jinja_lexer *lx, int type, size_t pos)
{
    jinja_tokens  *t = lx->toks;
    jinja_token   *v;
    size_t         cap;

    if (t->n == t->cap) {
        cap = t->cap ? t->cap * 2 : 256;
        v = jinja_alloc(lx->vm, cap * sizeof(jinja_token));
        if (t->n) {
            memcpy(v, t->v, t->n * sizeof(jinja_token));
        }
        t->v = v;
        t->cap = cap;
    }
    v = &t->v[t->n++];
    memset(v, 0, sizeof(*v));
    v->type = (uint8_t) type;
    v->line = lex_line_at(lx, pos);
    return v;
}


/* Past a run of whitespace (Python's \s) starting at pos. */
static size_t
lex_skip_ws(jinja_lexer *lx, size_t pos)
{
    size_t  i;

    while (pos < lx->len) {
        i = pos;
        if (!ju_isspace((uint32_t) ju_decode(lx->src, lx->len, &i))) {
            break;
        }
        pos = i;
    }
    return pos;
}


/* Length of s[0..len) without its trailing whitespace (str.rstrip()). */
static size_t
lex_rstrip(const char *s, size_t len)
{
    size_t  start, i;

    while (len > 0) {
        start = len - 1;
        while (start > 0 && ((unsigned char) s[start] & 0xc0) == 0x80) {
            start--;
        }
        i = start;
        if (!ju_isspace((uint32_t) ju_decode(s, len, &i))) {
            break;
        }
        len = start;
    }
    return len;
}


static int
lex_at(jinja_lexer *lx, size_t pos, const char *lit)
{
    size_t  n = strlen(lit);

    return pos + n <= lx->len && memcmp(lx->src + pos, lit, n) == 0;
}


/* Emits the text src[start..end) before a tag whose whitespace-control
 * sign is sign ('-', '+' or 0); is_var: the tag is "{{". */
static void
lex_text_before_tag(jinja_lexer *lx, size_t start, size_t end, int sign,
    int is_var)
{
    const char  *text = lx->src + start;
    size_t       len = end - start, l_pos, i, j;
    int          all_ws;

    if (sign == '-') {
        len = lex_rstrip(text, len);
    } else if (sign != '+' && !is_var) {
        /* lstrip_blocks */
        l_pos = 0;
        for (i = len; i > 0; i--) {
            if (text[i - 1] == '\n') {
                l_pos = i;
                break;
            }
        }
        if ((l_pos > 0 || lx->line_starting) && l_pos < len) {
            all_ws = 1;
            j = l_pos;
            while (j < len) {
                if (!ju_isspace((uint32_t) ju_decode(text, len, &j))) {
                    all_ws = 0;
                    break;
                }
            }
            if (all_ws) {
                len = l_pos;
            }
        }
    }
    if (len) {
        jinja_token  *t = lex_emit(lx, T_DATA, start);

        t->s = text;
        t->len = (uint32_t) len;
    }
}


/* "{%" [-+] \s* "raw" \s* ("-%}" \s* | "%}"): the end, or 0. */
static size_t
lex_match_raw_begin(jinja_lexer *lx, size_t pos)
{
    size_t  p = pos + 2;

    if (p < lx->len && (lx->src[p] == '-' || lx->src[p] == '+')) {
        p++;
    }
    p = lex_skip_ws(lx, p);
    if (!lex_at(lx, p, "raw")) {
        return 0;
    }
    p = lex_skip_ws(lx, p + 3);
    if (lex_at(lx, p, "-%}")) {
        return lex_skip_ws(lx, p + 3);
    }
    if (lex_at(lx, p, "%}")) {
        return p + 2;
    }
    return 0;
}


/* The end of a block tag at pos: "+%}" | "-%}" \s* | "%}" \n?; 0 if none. */
static size_t
lex_match_block_end(jinja_lexer *lx, size_t pos)
{
    if (lex_at(lx, pos, "+%}")) {
        return pos + 3;
    }
    if (lex_at(lx, pos, "-%}")) {
        return lex_skip_ws(lx, pos + 3);
    }
    if (lex_at(lx, pos, "%}")) {
        pos += 2;
        if (pos < lx->len && lx->src[pos] == '\n') {
            pos++;
        }
        return pos;
    }
    return 0;
}


static void
lex_raw_body(jinja_lexer *lx)
{
    size_t  k, p, end;
    int     sign;

    for (k = lx->pos; k + 1 < lx->len; k++) {
        if (lx->src[k] != '{' || lx->src[k + 1] != '%') {
            continue;
        }
        p = k + 2;
        sign = 0;
        if (p < lx->len && (lx->src[p] == '-' || lx->src[p] == '+')) {
            sign = lx->src[p++];
        }
        p = lex_skip_ws(lx, p);
        if (!lex_at(lx, p, "endraw")) {
            continue;
        }
        p = lex_skip_ws(lx, p + 6);
        end = lex_match_block_end(lx, p);
        if (end == 0) {
            continue;
        }
        lex_text_before_tag(lx, lx->pos, k, sign, 0);
        lx->line_starting = lx->src[end - 1] == '\n';
        lx->pos = end;
        return;
    }
    lex_fail(lx, lx->pos, "missing end of raw directive");
}


static void
lex_comment(jinja_lexer *lx, size_t body)
{
    size_t  q, end;

    for (q = body; q + 1 < lx->len; q++) {
        if (lx->src[q] == '#' && lx->src[q + 1] == '}') {
            break;
        }
    }
    if (q + 1 >= lx->len) {
        lex_fail(lx, body, "missing end of comment tag");
    }
    end = q + 2;
    if (q > body && lx->src[q - 1] == '-') {
        end = lex_skip_ws(lx, end);
    } else if (q > body && lx->src[q - 1] == '+') {
        /* keep what follows */
    } else if (end < lx->len && lx->src[end] == '\n') {
        end++;
    }
    lx->line_starting = lx->src[end - 1] == '\n';
    lx->pos = end;
}


/* (\d+_)*\d+ : the end of a digit run with single underscores, or 0. */
static size_t
lex_digits(jinja_lexer *lx, size_t p)
{
    const char  *s = lx->src;

    if (p >= lx->len || s[p] < '0' || s[p] > '9') {
        return 0;
    }
    for (;;) {
        while (p < lx->len && s[p] >= '0' && s[p] <= '9') {
            p++;
        }
        if (p + 1 < lx->len && s[p] == '_' && s[p + 1] >= '0' && s[p + 1] <= '9') {
            p++;
            continue;
        }
        return p;
    }
}


/* jinja2's float_re; returns the end or 0. */
static size_t
lex_match_float(jinja_lexer *lx, size_t p)
{
    const char  *s = lx->src;
    size_t       q, f, e;

    if (p > 0 && s[p - 1] == '.') {
        return 0;       /* (?<!\.) */
    }
    q = lex_digits(lx, p);
    if (q == 0) {
        return 0;
    }
    f = 0;
    if (q < lx->len && s[q] == '.') {
        f = lex_digits(lx, q + 1);
    }
    e = f ? f : q;
    if (e < lx->len && (s[e] == 'e' || s[e] == 'E')) {
        size_t  x = e + 1;

        if (x < lx->len && (s[x] == '+' || s[x] == '-')) {
            x++;
        }
        x = lex_digits(lx, x);
        if (x) {
            return x;
        }
    }
    return f;
}


static int
lex_isdigit_base(char c, int base)
{
    if (base == 2) {
        return c == '0' || c == '1';
    }
    if (base == 8) {
        return c >= '0' && c <= '7';
    }
    return (c >= '0' && c <= '9') || ((c | 0x20) >= 'a' && (c | 0x20) <= 'f');
}


/* jinja2's integer_re; returns the end or 0, the base in *base. */
static size_t
lex_match_int(jinja_lexer *lx, size_t p, int *base)
{
    const char  *s = lx->src;
    size_t       q;
    int          b;

    if (p >= lx->len || s[p] < '0' || s[p] > '9') {
        return 0;
    }
    if (s[p] == '0' && p + 1 < lx->len) {
        char  c = (char) (s[p + 1] | 0x20);

        b = c == 'b' ? 2 : c == 'o' ? 8 : c == 'x' ? 16 : 0;
        if (b) {
            q = p + 2;
            for (;;) {
                if (q < lx->len && lex_isdigit_base(s[q], b)) {
                    q++;
                } else if (q + 1 < lx->len && s[q] == '_'
                           && lex_isdigit_base(s[q + 1], b))
                {
                    q += 2;
                } else {
                    break;
                }
            }
            if (q > p + 2) {
                *base = b;
                return q;
            }
        }
    }
    *base = 10;
    if (s[p] == '0') {
        /* 0(_?0)* */
        q = p + 1;
        for (;;) {
            if (q < lx->len && s[q] == '0') {
                q++;
            } else if (q + 1 < lx->len && s[q] == '_' && s[q + 1] == '0') {
                q += 2;
            } else {
                return q;
            }
        }
    }
    return lex_digits(lx, p);
}


static void
lex_number(jinja_lexer *lx, size_t start, size_t end, int is_float, int base)
{
    char          tmp[128];
    size_t        i, n = 0;
    jinja_token  *t;
    char         *e;
    uint64_t      v = 0, d;

    for (i = start; i < end && n < sizeof(tmp) - 1; i++) {
        if (lx->src[i] != '_') {
            tmp[n++] = lx->src[i];
        }
    }
    tmp[n] = '\0';
    if (is_float) {
        t = lex_emit(lx, T_FLOAT, start);
        t->f = strtod(tmp, &e);
        return;
    }
    t = lex_emit(lx, T_INT, start);
    for (i = base == 10 ? 0 : 2; i < n; i++) {
        char  c = (char) (tmp[i] | 0x20);

        d = (uint64_t) (c >= 'a' ? c - 'a' + 10 : c - '0');
        if (v > (UINT64_MAX - d) / (uint64_t) base) {
            lex_fail(lx, start, "integer literal %s is too large", tmp);
        }
        v = v * (uint64_t) base + d;
    }
    if (v > INT64_MAX) {
        lex_fail(lx, start, "integer literal %s is too large", tmp);
    }
    t->i = (int64_t) v;
}


static int
lex_hex(int c)
{
    if (c >= '0' && c <= '9') {
        return c - '0';
    }
    c |= 0x20;
    if (c >= 'a' && c <= 'f') {
        return c - 'a' + 10;
    }
    return -1;
}


/* A string literal's value, as jinja2 computes it:
 * value.encode("ascii", "backslashreplace").decode("unicode-escape"). */
static void
lex_string_value(jinja_lexer *lx, size_t start, const char *s, size_t len,
    jinja_token *t)
{
    jinja_buf  a = { 0 }, out = { 0 };
    size_t     i, k;
    int        cp, h, n, digits;
    char       tmp[16], enc[4];
    uint32_t   v;

    /* 1. non-ASCII characters become \xNN, \uNNNN or \UNNNNNNNN */
    i = 0;
    while (i < len) {
        if ((unsigned char) s[i] < 0x80) {
            jinja_buf_addc(lx->vm, &a, s[i++]);
            continue;
        }
        cp = ju_decode(s, len, &i);
        if (cp <= 0xff) {
            n = snprintf(tmp, sizeof(tmp), "\\x%02x", cp);
        } else if (cp <= 0xffff) {
            n = snprintf(tmp, sizeof(tmp), "\\u%04x", cp);
        } else {
            n = snprintf(tmp, sizeof(tmp), "\\U%08x", cp);
        }
        jinja_buf_add(lx->vm, &a, tmp, (size_t) n);
    }

    /* 2. Python's unicode-escape codec */
    for (i = 0; i < a.len; i++) {
        char  c = a.p[i];

        if (c != '\\') {
            jinja_buf_addc(lx->vm, &out, c);
            continue;
        }
        if (++i >= a.len) {
            lex_fail(lx, start, "\\ at end of string");
        }
        c = a.p[i];
        switch (c) {
        case '\n': continue;
        case '\\': jinja_buf_addc(lx->vm, &out, '\\'); continue;
        case '\'': jinja_buf_addc(lx->vm, &out, '\''); continue;
        case '"':  jinja_buf_addc(lx->vm, &out, '"'); continue;
        case 'a':  jinja_buf_addc(lx->vm, &out, '\a'); continue;
        case 'b':  jinja_buf_addc(lx->vm, &out, '\b'); continue;
        case 'f':  jinja_buf_addc(lx->vm, &out, '\f'); continue;
        case 'n':  jinja_buf_addc(lx->vm, &out, '\n'); continue;
        case 'r':  jinja_buf_addc(lx->vm, &out, '\r'); continue;
        case 't':  jinja_buf_addc(lx->vm, &out, '\t'); continue;
        case 'v':  jinja_buf_addc(lx->vm, &out, '\v'); continue;
        default:   break;
        }
        if (c >= '0' && c <= '7') {
            v = 0;
            for (k = 0; k < 3 && i < a.len && a.p[i] >= '0' && a.p[i] <= '7'; k++) {
                v = v * 8 + (uint32_t) (a.p[i++] - '0');
            }
            i--;
        } else if (c == 'x' || c == 'u' || c == 'U') {
            digits = c == 'x' ? 2 : c == 'u' ? 4 : 8;
            v = 0;
            for (k = 0; k < (size_t) digits; k++) {
                h = i + 1 + k < a.len ? lex_hex(a.p[i + 1 + k]) : -1;
                if (h < 0) {
                    lex_fail(lx, start, "truncated \\%cXX escape", c);
                }
                v = v * 16 + (uint32_t) h;
            }
            i += (size_t) digits;
            if (v > 0x10ffff) {
                lex_fail(lx, start, "illegal Unicode character");
            }
        } else if (c == 'N') {
            lex_fail(lx, start, "\\N{...} escapes are not supported");
        } else {
            /* unknown escapes stay as they are */
            jinja_buf_addc(lx->vm, &out, '\\');
            jinja_buf_addc(lx->vm, &out, c);
            continue;
        }
        if (v >= 0xd800 && v <= 0xdfff) {
            v = 0xfffd;     /* a lone surrogate has no UTF-8 form */
        }
        n = (int) ju_encode(v, enc);
        jinja_buf_add(lx->vm, &out, enc, (size_t) n);
    }
    t->s = out.len ? out.p : "";
    t->len = (uint32_t) out.len;
}


static size_t
lex_match_string(jinja_lexer *lx, size_t p)
{
    char    q = lx->src[p];
    size_t  i;

    for (i = p + 1; i < lx->len; i++) {
        if (lx->src[i] == '\\') {
            i++;
            continue;
        }
        if (lx->src[i] == q) {
            return i + 1;
        }
    }
    return 0;
}


static const struct {
    const char  *op;
    int          type;
} lex_ops[] = {
    { "//", T_FLOORDIV }, { "**", T_POW }, { "==", T_EQ }, { "!=", T_NE },
    { ">=", T_GTEQ }, { "<=", T_LTEQ },
    { "+", T_ADD }, { "-", T_SUB }, { "/", T_DIV }, { "*", T_MUL },
    { "%", T_MOD }, { "~", T_TILDE }, { "[", T_LBRACKET }, { "]", T_RBRACKET },
    { "(", T_LPAREN }, { ")", T_RPAREN }, { "{", T_LBRACE }, { "}", T_RBRACE },
    { ">", T_GT }, { "<", T_LT }, { "=", T_ASSIGN }, { ".", T_DOT },
    { ":", T_COLON }, { "|", T_PIPE }, { ",", T_COMMA }, { ";", T_SEMICOLON },
};


static void
lex_balance(jinja_lexer *lx, size_t pos, char c)
{
    char  want;
    char *b;

    if (c == '{' || c == '(' || c == '[') {
        if (lx->nbalance == lx->balance_cap) {
            lx->balance_cap = lx->balance_cap ? lx->balance_cap * 2 : 32;
            b = jinja_alloc(lx->vm, lx->balance_cap);
            if (lx->nbalance) {
                memcpy(b, lx->balance, lx->nbalance);
            }
            lx->balance = b;
        }
        lx->balance[lx->nbalance++] = c == '{' ? '}' : c == '(' ? ')' : ']';
        return;
    }
    if (c == '}' || c == ')' || c == ']') {
        if (lx->nbalance == 0) {
            lex_fail(lx, pos, "unexpected '%c'", c);
        }
        want = lx->balance[--lx->nbalance];
        if (want != c) {
            lex_fail(lx, pos, "unexpected '%c', expected '%c'", c, want);
        }
    }
}


/* Tokens inside {{ }} or {% %}, up to and including the end tag. */
static void
lex_tag(jinja_lexer *lx, int is_block)
{
    size_t        p, end, i;
    int           base, cp;
    jinja_token  *t;

    lx->nbalance = 0;
    while (lx->pos < lx->len) {
        p = lx->pos;
        if (lx->nbalance == 0) {
            if (is_block) {
                end = lex_match_block_end(lx, p);
            } else if (lex_at(lx, p, "-}}")) {
                end = lex_skip_ws(lx, p + 3);
            } else {
                end = lex_at(lx, p, "}}") ? p + 2 : 0;
            }
            if (end) {
                lex_emit(lx, is_block ? T_BLOCK_END : T_VAR_END, p);
                lx->line_starting = lx->src[end - 1] == '\n';
                lx->pos = end;
                return;
            }
        }
        i = p;
        cp = ju_decode(lx->src, lx->len, &i);
        if (ju_isspace((uint32_t) cp)) {
            lx->pos = lex_skip_ws(lx, p);
            continue;
        }
        if ((end = lex_match_float(lx, p)) != 0) {
            lex_number(lx, p, end, 1, 10);
            lx->pos = end;
            continue;
        }
        if ((end = lex_match_int(lx, p, &base)) != 0) {
            lex_number(lx, p, end, 0, base);
            lx->pos = end;
            continue;
        }
        if (ju_isident_start((uint32_t) cp)) {
            end = i;
            while (end < lx->len) {
                i = end;
                if (!ju_isident_cont((uint32_t) ju_decode(lx->src, lx->len, &i))) {
                    break;
                }
                end = i;
            }
            t = lex_emit(lx, T_NAME, p);
            t->s = lx->src + p;
            t->len = (uint32_t) (end - p);
            lx->pos = end;
            continue;
        }
        if ((cp == '\'' || cp == '"') && (end = lex_match_string(lx, p)) != 0) {
            t = lex_emit(lx, T_STRING, p);
            lex_string_value(lx, p, lx->src + p + 1, end - p - 2, t);
            lx->pos = end;
            continue;
        }
        for (i = 0; i < sizeof(lex_ops) / sizeof(lex_ops[0]); i++) {
            if (lex_at(lx, p, lex_ops[i].op)) {
                break;
            }
        }
        if (i == sizeof(lex_ops) / sizeof(lex_ops[0])) {
            if (cp >= 0x20 && cp < 0x7f) {
                lex_fail(lx, p, "unexpected char '%c'", cp);
            }
            lex_fail(lx, p, "unexpected char U+%04X", (unsigned) cp);
        }
        lex_balance(lx, p, lex_ops[i].op[0]);
        lex_emit(lx, lex_ops[i].type, p);
        lx->pos = p + strlen(lex_ops[i].op);
    }
    /* end of input inside a tag: the parser reports it */
}


void
jinja_lex(jinja_vm *vm, const char *src, size_t len, jinja_tokens *toks)
{
    jinja_lexer  lx;
    jinja_buf    norm = { 0 };
    size_t       i, j, raw_end;
    int          sign, kind;

    /* newlines to \n; drop one trailing newline */
    for (i = 0; i < len; i++) {
        if (src[i] == '\r') {
            jinja_buf_addc(vm, &norm, '\n');
            if (i + 1 < len && src[i + 1] == '\n') {
                i++;
            }
        } else {
            jinja_buf_addc(vm, &norm, src[i]);
        }
    }
    if (norm.len && norm.p[norm.len - 1] == '\n') {
        norm.len--;
    }

    memset(&lx, 0, sizeof(lx));
    lx.vm = vm;
    lx.src = norm.len ? norm.p : "";
    lx.len = norm.len;
    lx.line = 1;
    lx.toks = toks;
    lx.line_starting = 1;

    while (lx.pos < lx.len) {
        for (i = lx.pos; i + 1 < lx.len; i++) {
            if (lx.src[i] == '{' && (lx.src[i + 1] == '{' || lx.src[i + 1] == '%'
                                     || lx.src[i + 1] == '#'))
            {
                break;
            }
        }
        if (i + 1 >= lx.len) {
            lex_text_before_tag(&lx, lx.pos, lx.len, '+', 1);
            break;
        }
        kind = lx.src[i + 1];
        j = i + 2;
        sign = 0;
        if (j < lx.len && (lx.src[j] == '-' || lx.src[j] == '+')) {
            sign = lx.src[j++];
        }
        raw_end = kind == '%' ? lex_match_raw_begin(&lx, i) : 0;
        lex_text_before_tag(&lx, lx.pos, i, sign, kind == '{');
        if (raw_end) {
            lx.line_starting = lx.src[raw_end - 1] == '\n';
            lx.pos = raw_end;
            lex_raw_body(&lx);
        } else if (kind == '#') {
            lx.line_starting = 0;
            lex_comment(&lx, j);
        } else {
            lx.line_starting = 0;
            lex_emit(&lx, kind == '%' ? T_BLOCK_BEGIN : T_VAR_BEGIN, i);
            lx.pos = j;
            lex_tag(&lx, kind == '%');
        }
    }
    lex_emit(&lx, T_EOF, lx.len);
}


const char *
jinja_tok_describe(const jinja_token *t, char *buf, size_t size)
{
    static const char *const names[] = {
        "end of template", "template data / text", "begin of print statement",
        "end of print statement", "begin of statement block",
        "end of statement block", "name", "string", "integer", "float",
        "+", "-", "/", "//", "*", "%", "**", "~", "[", "]", "(", ")", "{", "}",
        "==", "!=", ">", ">=", "<", "<=", "=", ".", ":", "|", ",", ";"
    };

    if (t->type == T_NAME) {
        snprintf(buf, size, "%.*s", (int) t->len, t->s);
        return buf;
    }
    if (t->type < sizeof(names) / sizeof(names[0])) {
        return names[t->type];
    }
    return "token";
}
