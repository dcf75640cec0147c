/*
 * utf8.c -- UTF-8 in the strict sense (Unicode 15, table 3-7: no overlong
 * forms, no surrogates, nothing above U+10FFFF): what every layer that reads
 * text from a client or a file stands on.
 */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "util.h"


size_t
llm_utf8_seq_len(const unsigned char *s, size_t n)
{
    unsigned char  c = s[0], lo = 0x80, hi = 0xBF;
    size_t         need, i;

    if (c < 0x80) {
        return 1;
    }
    if (c >= 0xC2 && c <= 0xDF) {
        need = 2;
    } else if (c >= 0xE0 && c <= 0xEF) {
        need = 3;
        if (c == 0xE0) {
            lo = 0xA0;
        } else if (c == 0xED) {
            hi = 0x9F;          /* no surrogates */
        }
    } else if (c >= 0xF0 && c <= 0xF4) {
        need = 4;
        if (c == 0xF0) {
            lo = 0x90;
        } else if (c == 0xF4) {
            hi = 0x8F;          /* nothing above U+10FFFF */
        }
    } else {
        return 0;
    }
    for (i = 1; i < need; i++) {
        if (i >= n) {
            return 0;
        }
        if (s[i] < lo || s[i] > hi) {
            return 0;
        }
        lo = 0x80;
        hi = 0xBF;
    }
    return need;
}


size_t
llm_utf8_decode(const char *str, size_t i, uint32_t *cp)
{
    const unsigned char  *s = (const unsigned char *) str + i;

    if (s[0] < 0x80) {
        *cp = s[0];
        return 1;
    }
    if (s[0] < 0xE0) {
        *cp = ((uint32_t) (s[0] & 0x1F) << 6) | (s[1] & 0x3F);
        return 2;
    }
    if (s[0] < 0xF0) {
        *cp = ((uint32_t) (s[0] & 0x0F) << 12)
              | ((uint32_t) (s[1] & 0x3F) << 6) | (s[2] & 0x3F);
        return 3;
    }
    *cp = ((uint32_t) (s[0] & 0x07) << 18) | ((uint32_t) (s[1] & 0x3F) << 12)
          | ((uint32_t) (s[2] & 0x3F) << 6) | (s[3] & 0x3F);
    return 4;
}


size_t
llm_utf8_char_len(unsigned char c)
{
    if (c < 0x80) {
        return 1;
    }
    if (c < 0xE0) {
        return 2;
    }
    if (c < 0xF0) {
        return 3;
    }
    return 4;
}


size_t
llm_utf8_encode(uint32_t cp, char out[4])
{
    if (cp < 0x80) {
        out[0] = (char) cp;
        return 1;
    }
    if (cp < 0x800) {
        out[0] = (char) (0xC0 | (cp >> 6));
        out[1] = (char) (0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        out[0] = (char) (0xE0 | (cp >> 12));
        out[1] = (char) (0x80 | ((cp >> 6) & 0x3F));
        out[2] = (char) (0x80 | (cp & 0x3F));
        return 3;
    }
    out[0] = (char) (0xF0 | (cp >> 18));
    out[1] = (char) (0x80 | ((cp >> 12) & 0x3F));
    out[2] = (char) (0x80 | ((cp >> 6) & 0x3F));
    out[3] = (char) (0x80 | (cp & 0x3F));
    return 4;
}


int
llm_utf8_valid(const char *str, size_t n)
{
    const unsigned char  *s = (const unsigned char *) str;
    size_t                i = 0, k;

    while (i < n) {
        if (s[i] < 0x80) {
            i++;
            continue;
        }
        k = llm_utf8_seq_len(s + i, n - i);
        if (k == 0) {
            return 0;
        }
        i += k;
    }
    return 1;
}


/*
 * The maximal subpart at s: how many bytes one U+FFFD replaces.  It is the
 * longest prefix of a well-formed sequence (at least one byte), the rule of
 * Unicode 15 section 3.9 that Python, Rust and browsers follow.
 */
size_t
llm_utf8_subpart_len(const unsigned char *s, size_t n)
{
    unsigned char  c = s[0], lo = 0x80, hi = 0xBF;
    size_t         need, i;

    if (c >= 0xC2 && c <= 0xDF) {
        need = 2;
    } else if (c >= 0xE0 && c <= 0xEF) {
        need = 3;
        lo = (c == 0xE0) ? 0xA0 : 0x80;
        hi = (c == 0xED) ? 0x9F : 0xBF;
    } else if (c >= 0xF0 && c <= 0xF4) {
        need = 4;
        lo = (c == 0xF0) ? 0x90 : 0x80;
        hi = (c == 0xF4) ? 0x8F : 0xBF;
    } else {
        return 1;
    }
    for (i = 1; i < need && i < n; i++) {
        if (s[i] < lo || s[i] > hi) {
            break;
        }
        lo = 0x80;
        hi = 0xBF;
    }
    return i;
}


size_t
llm_utf8_repair(const char *str, size_t n, char *out)
{
    const unsigned char  *s = (const unsigned char *) str;
    size_t                i = 0, k, len = 0;

    while (i < n) {
        k = s[i] < 0x80 ? 1 : llm_utf8_seq_len(s + i, n - i);
        if (k) {
            memcpy(out + len, s + i, k);
            len += k;
            i += k;
            continue;
        }
        len += llm_utf8_encode(LLM_UTF8_REPLACEMENT, out + len);
        i += llm_utf8_subpart_len(s + i, n - i);
    }
    return len;
}
