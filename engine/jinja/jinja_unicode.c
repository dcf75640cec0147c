/*
 * jinja_unicode.c -- UTF-8 and the character classes and case mappings of
 * Python's str, on top of utf8proc's Unicode tables.
 *
 * Python strings index by code point, so length, slicing and iteration
 * decode UTF-8 here.  Character classes follow CPython's definitions
 * (Objects/unicodectype.c); case mappings add the unconditional
 * multi-character mappings of SpecialCasing.txt that Python applies
 * (str.upper() of "ß" is "SS") and the final-sigma rule of str.lower().
 */
#include <string.h>
#include <utf8proc.h>

#include "jinja.h"


/* Decodes the code point at *i and advances *i.  Invalid bytes decode as
 * themselves (one byte each), so a walk always terminates in bounds; the
 * template source and JSON strings are validated before they get here. */
int
ju_decode(const char *s, size_t len, size_t *i)
{
    const unsigned char  *p = (const unsigned char *) s + *i;
    size_t                left = len - *i;
    uint32_t              c = p[0];

    if (c < 0x80) {
        (*i)++;
        return (int) c;
    }
    if (c >= 0xc2 && c < 0xe0 && left >= 2 && (p[1] & 0xc0) == 0x80) {
        *i += 2;
        return (int) (((c & 0x1f) << 6) | (p[1] & 0x3f));
    }
    if (c >= 0xe0 && c < 0xf0 && left >= 3 && (p[1] & 0xc0) == 0x80
        && (p[2] & 0xc0) == 0x80)
    {
        *i += 3;
        return (int) (((c & 0x0f) << 12) | ((p[1] & 0x3f) << 6) | (p[2] & 0x3f));
    }
    if (c >= 0xf0 && c < 0xf5 && left >= 4 && (p[1] & 0xc0) == 0x80
        && (p[2] & 0xc0) == 0x80 && (p[3] & 0xc0) == 0x80)
    {
        *i += 4;
        return (int) (((c & 0x07) << 18) | ((p[1] & 0x3f) << 12)
                      | ((p[2] & 0x3f) << 6) | (p[3] & 0x3f));
    }
    (*i)++;
    return (int) c;
}


size_t
ju_encode(uint32_t cp, char *out)
{
    unsigned char  *o = (unsigned char *) out;

    if (cp < 0x80) {
        o[0] = (unsigned char) cp;
        return 1;
    }
    if (cp < 0x800) {
        o[0] = (unsigned char) (0xc0 | (cp >> 6));
        o[1] = (unsigned char) (0x80 | (cp & 0x3f));
        return 2;
    }
    if (cp < 0x10000) {
        o[0] = (unsigned char) (0xe0 | (cp >> 12));
        o[1] = (unsigned char) (0x80 | ((cp >> 6) & 0x3f));
        o[2] = (unsigned char) (0x80 | (cp & 0x3f));
        return 3;
    }
    o[0] = (unsigned char) (0xf0 | (cp >> 18));
    o[1] = (unsigned char) (0x80 | ((cp >> 12) & 0x3f));
    o[2] = (unsigned char) (0x80 | ((cp >> 6) & 0x3f));
    o[3] = (unsigned char) (0x80 | (cp & 0x3f));
    return 4;
}


size_t
ju_count(const char *s, size_t len)
{
    size_t  i, n = 0;

    for (i = 0; i < len; i++) {
        /* count every byte that does not continue a sequence */
        n += ((unsigned char) s[i] & 0xc0) != 0x80;
    }
    return n;
}


size_t
ju_offset(const char *s, size_t len, size_t cp_index)
{
    size_t  i = 0;

    while (cp_index > 0 && i < len) {
        ju_decode(s, len, &i);
        cp_index--;
    }
    return i;
}


int
ju_valid(const char *s, size_t len)
{
    const unsigned char  *p = (const unsigned char *) s;
    size_t                i = 0;
    uint32_t              c;

    while (i < len) {
        c = p[i];
        if (c < 0x80) {
            i++;
            continue;
        }
        if (c >= 0xc2 && c < 0xe0) {
            if (i + 1 >= len || (p[i + 1] & 0xc0) != 0x80) {
                return 0;
            }
            i += 2;
        } else if (c >= 0xe0 && c < 0xf0) {
            if (i + 2 >= len || (p[i + 1] & 0xc0) != 0x80
                || (p[i + 2] & 0xc0) != 0x80
                || (c == 0xe0 && p[i + 1] < 0xa0)      /* overlong */
                || (c == 0xed && p[i + 1] >= 0xa0))    /* surrogate */
            {
                return 0;
            }
            i += 3;
        } else if (c >= 0xf0 && c < 0xf5) {
            if (i + 3 >= len || (p[i + 1] & 0xc0) != 0x80
                || (p[i + 2] & 0xc0) != 0x80 || (p[i + 3] & 0xc0) != 0x80
                || (c == 0xf0 && p[i + 1] < 0x90)
                || (c == 0xf4 && p[i + 1] >= 0x90))
            {
                return 0;
            }
            i += 4;
        } else {
            return 0;
        }
    }
    return 1;
}


/* ------------------------------------------------------------------ classes */

static int
ju_cat(uint32_t cp)
{
    return utf8proc_category((utf8proc_int32_t) cp);
}


int
ju_isspace(uint32_t cp)
{
    if (cp < 128) {
        return cp == ' ' || (cp >= 0x09 && cp <= 0x0d) || (cp >= 0x1c && cp <= 0x1f);
    }
    return cp == 0x85 || cp == 0xa0 || cp == 0x1680
           || (cp >= 0x2000 && cp <= 0x200a) || cp == 0x2028 || cp == 0x2029
           || cp == 0x202f || cp == 0x205f || cp == 0x3000;
}


int
ju_isprintable(uint32_t cp)
{
    int  c;

    if (cp == ' ') {
        return 1;
    }
    if (cp < 0x20 || cp == 0x7f) {
        return 0;
    }
    if (cp < 0x7f) {
        return 1;
    }
    c = ju_cat(cp);
    return !(c == UTF8PROC_CATEGORY_CC || c == UTF8PROC_CATEGORY_CF
             || c == UTF8PROC_CATEGORY_CS || c == UTF8PROC_CATEGORY_CO
             || c == UTF8PROC_CATEGORY_CN || c == UTF8PROC_CATEGORY_ZL
             || c == UTF8PROC_CATEGORY_ZP || c == UTF8PROC_CATEGORY_ZS);
}


int
ju_isalpha(uint32_t cp)
{
    int  c;

    if (cp < 128) {
        return (cp | 0x20) >= 'a' && (cp | 0x20) <= 'z';
    }
    c = ju_cat(cp);
    return c == UTF8PROC_CATEGORY_LU || c == UTF8PROC_CATEGORY_LL
           || c == UTF8PROC_CATEGORY_LT || c == UTF8PROC_CATEGORY_LM
           || c == UTF8PROC_CATEGORY_LO;
}


int
ju_isdecimal(uint32_t cp)
{
    if (cp < 128) {
        return cp >= '0' && cp <= '9';
    }
    return ju_cat(cp) == UTF8PROC_CATEGORY_ND;
}


int
ju_isdigit(uint32_t cp)
{
    if (ju_isdecimal(cp)) {
        return 1;
    }
    /* Numeric_Type=Digit: superscripts, subscripts, circled digits */
    return cp == 0xb2 || cp == 0xb3 || cp == 0xb9
           || (cp >= 0x2070 && cp <= 0x2079 && cp != 0x2071 && cp != 0x2072
               && cp != 0x2073)
           || (cp >= 0x2080 && cp <= 0x2089)
           || (cp >= 0x2460 && cp <= 0x2468) || (cp >= 0x2474 && cp <= 0x247c)
           || (cp >= 0x2488 && cp <= 0x2490) || cp == 0x24ea
           || (cp >= 0x24f5 && cp <= 0x24fd) || cp == 0x24ff
           || (cp >= 0x2776 && cp <= 0x277e) || (cp >= 0x2780 && cp <= 0x2788)
           || (cp >= 0x278a && cp <= 0x2792);
}


int
ju_isnumeric(uint32_t cp)
{
    int  c;

    if (ju_isdigit(cp)) {
        return 1;
    }
    c = ju_cat(cp);
    return c == UTF8PROC_CATEGORY_NL || c == UTF8PROC_CATEGORY_NO;
}


int
ju_isalnum(uint32_t cp)
{
    return ju_isalpha(cp) || ju_isnumeric(cp);
}


int
ju_isupper(uint32_t cp)
{
    if (cp < 128) {
        return cp >= 'A' && cp <= 'Z';
    }
    return utf8proc_isupper((utf8proc_int32_t) cp);
}


int
ju_islower(uint32_t cp)
{
    if (cp < 128) {
        return cp >= 'a' && cp <= 'z';
    }
    return utf8proc_islower((utf8proc_int32_t) cp);
}


int
ju_istitle_char(uint32_t cp)
{
    return cp >= 128 && ju_cat(cp) == UTF8PROC_CATEGORY_LT;
}


int
ju_iscased(uint32_t cp)
{
    return ju_isupper(cp) || ju_islower(cp) || ju_istitle_char(cp);
}


int
ju_isident_start(uint32_t cp)
{
    int  c;

    if (cp < 128) {
        return cp == '_' || ((cp | 0x20) >= 'a' && (cp | 0x20) <= 'z');
    }
    c = ju_cat(cp);
    return c == UTF8PROC_CATEGORY_LU || c == UTF8PROC_CATEGORY_LL
           || c == UTF8PROC_CATEGORY_LT || c == UTF8PROC_CATEGORY_LM
           || c == UTF8PROC_CATEGORY_LO || c == UTF8PROC_CATEGORY_NL;
}


int
ju_isident_cont(uint32_t cp)
{
    int  c;

    if (cp < 128) {
        return ju_isident_start(cp) || (cp >= '0' && cp <= '9');
    }
    if (ju_isident_start(cp)) {
        return 1;
    }
    c = ju_cat(cp);
    return c == UTF8PROC_CATEGORY_MN || c == UTF8PROC_CATEGORY_MC
           || c == UTF8PROC_CATEGORY_ND || c == UTF8PROC_CATEGORY_PC;
}


int
ju_isword(uint32_t cp)
{
    return cp == '_' || ju_isalnum(cp);
}


int
ju_islinebreak(uint32_t cp)
{
    return cp == '\n' || cp == '\r' || cp == 0x0b || cp == 0x0c
           || cp == 0x1c || cp == 0x1d || cp == 0x1e || cp == 0x85
           || cp == 0x2028 || cp == 0x2029;
}


/* ------------------------------------------------------------------ case */

/* Unconditional multi-character mappings of SpecialCasing.txt:
 * code point, lower, title, upper (0-terminated, up to 3 each). */
static const struct {
    uint32_t  cp;
    uint32_t  lower[3], title[3], upper[3];
} ju_special[] = {
    { 0x00df, { 0x00df }, { 0x0053, 0x0073 }, { 0x0053, 0x0053 } },
    { 0x0130, { 0x0069, 0x0307 }, { 0x0130 }, { 0x0130 } },
    { 0x0149, { 0x0149 }, { 0x02bc, 0x004e }, { 0x02bc, 0x004e } },
    { 0x01f0, { 0x01f0 }, { 0x004a, 0x030c }, { 0x004a, 0x030c } },
    { 0x0390, { 0x0390 }, { 0x0399, 0x0308, 0x0301 }, { 0x0399, 0x0308, 0x0301 } },
    { 0x03b0, { 0x03b0 }, { 0x03a5, 0x0308, 0x0301 }, { 0x03a5, 0x0308, 0x0301 } },
    { 0x0587, { 0x0587 }, { 0x0535, 0x0582 }, { 0x0535, 0x0552 } },
    { 0x1e96, { 0x1e96 }, { 0x0048, 0x0331 }, { 0x0048, 0x0331 } },
    { 0x1e97, { 0x1e97 }, { 0x0054, 0x0308 }, { 0x0054, 0x0308 } },
    { 0x1e98, { 0x1e98 }, { 0x0057, 0x030a }, { 0x0057, 0x030a } },
    { 0x1e99, { 0x1e99 }, { 0x0059, 0x030a }, { 0x0059, 0x030a } },
    { 0x1e9a, { 0x1e9a }, { 0x0041, 0x02be }, { 0x0041, 0x02be } },
    { 0xfb00, { 0xfb00 }, { 0x0046, 0x0066 }, { 0x0046, 0x0046 } },
    { 0xfb01, { 0xfb01 }, { 0x0046, 0x0069 }, { 0x0046, 0x0049 } },
    { 0xfb02, { 0xfb02 }, { 0x0046, 0x006c }, { 0x0046, 0x004c } },
    { 0xfb03, { 0xfb03 }, { 0x0046, 0x0066, 0x0069 }, { 0x0046, 0x0046, 0x0049 } },
    { 0xfb04, { 0xfb04 }, { 0x0046, 0x0066, 0x006c }, { 0x0046, 0x0046, 0x004c } },
    { 0xfb05, { 0xfb05 }, { 0x0053, 0x0074 }, { 0x0053, 0x0054 } },
    { 0xfb06, { 0xfb06 }, { 0x0053, 0x0074 }, { 0x0053, 0x0054 } },
    { 0xfb13, { 0xfb13 }, { 0x0544, 0x0576 }, { 0x0544, 0x0546 } },
    { 0xfb14, { 0xfb14 }, { 0x0544, 0x0565 }, { 0x0544, 0x0535 } },
    { 0xfb15, { 0xfb15 }, { 0x0544, 0x056b }, { 0x0544, 0x053b } },
    { 0xfb16, { 0xfb16 }, { 0x054e, 0x0576 }, { 0x054e, 0x0546 } },
    { 0xfb17, { 0xfb17 }, { 0x0544, 0x056d }, { 0x0544, 0x053d } },
};


static size_t
ju_special_map(uint32_t cp, int which, uint32_t out[3])
{
    size_t           i, n;
    const uint32_t  *m;

    if (cp < 0xdf) {
        return 0;
    }
    for (i = 0; i < sizeof(ju_special) / sizeof(ju_special[0]); i++) {
        if (ju_special[i].cp == cp) {
            m = which == 0 ? ju_special[i].lower
                : which == 1 ? ju_special[i].title : ju_special[i].upper;
            for (n = 0; n < 3 && m[n]; n++) {
                out[n] = m[n];
            }
            return n;
        }
    }
    return 0;
}


size_t
ju_upper(uint32_t cp, uint32_t out[3])
{
    size_t  n;

    if (cp < 128) {
        out[0] = cp >= 'a' && cp <= 'z' ? cp - 32 : cp;
        return 1;
    }
    n = ju_special_map(cp, 2, out);
    if (n) {
        return n;
    }
    out[0] = (uint32_t) utf8proc_toupper((utf8proc_int32_t) cp);
    return 1;
}


size_t
ju_lower(uint32_t cp, uint32_t out[3])
{
    size_t  n;

    if (cp < 128) {
        out[0] = cp >= 'A' && cp <= 'Z' ? cp + 32 : cp;
        return 1;
    }
    n = ju_special_map(cp, 0, out);
    if (n) {
        return n;
    }
    out[0] = (uint32_t) utf8proc_tolower((utf8proc_int32_t) cp);
    return 1;
}


size_t
ju_title(uint32_t cp, uint32_t out[3])
{
    size_t  n;

    if (cp < 128) {
        return ju_upper(cp, out);
    }
    n = ju_special_map(cp, 1, out);
    if (n) {
        return n;
    }
    out[0] = (uint32_t) utf8proc_totitle((utf8proc_int32_t) cp);
    return 1;
}
