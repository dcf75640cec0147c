/*
 * test_util.c -- engine/util's small primitives: llm_random_hex() (ids),
 * llm_utf8_valid() (strict UTF-8), llm_utf8_repair() (U+FFFD for what is
 * not), llm_pyfloat() at its edges.
 */
#include <stdlib.h>
#include <string.h>

#include "llm.h"
#include "tap.h"


static int
cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *) a, *(char *const *) b);
}


static void
test_random_hex(void)
{
    enum { N = 2000 };
    char   *ids[N], big[2 * 200 + 1];
    int     i, dup = 0, bad = 0, bits[128] = { 0 }, skew = 0;
    size_t  j;

    for (i = 0; i < N; i++) {
        ids[i] = malloc(33);
        llm_random_hex(ids[i], 16);
        bad += strlen(ids[i]) != 32 || strspn(ids[i], "0123456789abcdef") != 32;
        for (j = 0; j < 128; j++) {
            int  d = ids[i][j / 4] <= '9' ? ids[i][j / 4] - '0'
                                           : ids[i][j / 4] - 'a' + 10;
            bits[j] += (d >> (3 - j % 4)) & 1;
        }
    }
    qsort(ids, N, sizeof(ids[0]), cmp_str);
    for (i = 1; i < N; i++) {
        dup += strcmp(ids[i - 1], ids[i]) == 0;
    }
    /* each bit set in about half the ids: 1000 +- 5 sigma (sigma 22) */
    for (j = 0; j < 128; j++) {
        skew += bits[j] < 1000 - 112 || bits[j] > 1000 + 112;
    }
    tap_ok(bad == 0, "32 lowercase hex digits for 16 bytes");
    tap_ok(dup == 0, "2000 ids, all different");
    tap_ok(skew == 0, "every one of the 128 bits is set in about half");
    for (i = 0; i < N; i++) {
        free(ids[i]);
    }
    llm_random_hex(big, 200);
    tap_ok(strlen(big) == 400, "more than one block of bytes");
}


static void
test_utf8(void)
{
    static const struct { const char *s; int ok; } cases[] = {
        { "plain", 1 }, { "\xc3\xa9", 1 }, { "\xe4\xb8\xad", 1 },
        { "\xf0\x9f\x98\x80", 1 }, { "\xf4\x8f\xbf\xbf", 1 },
        { "\xc0\xaf", 0 }, { "\xe0\x80\xaf", 0 }, { "\xed\xa0\x80", 0 },
        { "\xf4\x90\x80\x80", 0 }, { "\xc3", 0 }, { "\x80", 0 },
        { "\xff", 0 },
    };
    size_t  i;

    for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        tap_ok(llm_utf8_valid(cases[i].s, strlen(cases[i].s)) == cases[i].ok,
               "utf8 case %zu is %s", i, cases[i].ok ? "valid" : "invalid");
    }
}


/* Python's bytes.decode("utf-8", "replace") of the same bytes */
static void
test_utf8_repair(void)
{
    static const struct { const char *in, *out; } cases[] = {
        { "plain", "plain" },
        { "caf\xc3\xa9", "caf\xc3\xa9" },
        { "bad\xc0\xaf!", "bad\xef\xbf\xbd\xef\xbf\xbd!" },
        { "\xe2\x82", "\xef\xbf\xbd" },                /* one subpart */
        { "\xe2\x82x", "\xef\xbf\xbdx" },
        { "\xed\xa0\x80", "\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd" },
        { "\xf0\x9f\x98", "\xef\xbf\xbd" },
        { "\xf0\x9f\x98\x80\xff", "\xf0\x9f\x98\x80\xef\xbf\xbd" },
        { "\xff\xfe", "\xef\xbf\xbd\xef\xbf\xbd" },
        { "\x80\x80", "\xef\xbf\xbd\xef\xbf\xbd" },
    };
    char    out[64];
    size_t  i, n, len;

    for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        n = strlen(cases[i].in);
        len = llm_utf8_repair(cases[i].in, n, out);
        tap_ok(len == strlen(cases[i].out)
               && memcmp(out, cases[i].out, len) == 0
               && llm_utf8_valid(out, len) && len <= 3 * n,
               "repair case %zu as Python's errors=\"replace\"", i);
    }
}


int
main(void)
{
    test_random_hex();
    test_utf8();
    test_utf8_repair();
    return tap_done();
}
