/*
 * tap.h -- minimal Test Anything Protocol output for the C unit tests
 * (run by `prove --exec ''`).  Header-only: each test is one .c file.
 */
#ifndef LLM_TAP_H
#define LLM_TAP_H

#include <stdarg.h>
#include <stdio.h>

static int  tap_n, tap_failed;

#define TAP_UNUSED  __attribute__((unused))

TAP_UNUSED static void
tap_ok(int cond, const char *fmt, ...)
{
    va_list  ap;

    tap_n++;
    if (!cond) {
        tap_failed++;
    }
    printf("%s %d - ", cond ? "ok" : "not ok", tap_n);
    va_start(ap, fmt);
    vprintf(fmt, ap);
    va_end(ap);
    printf("\n");
    fflush(stdout);
}

TAP_UNUSED static void
tap_diag(const char *fmt, ...)
{
    va_list  ap;

    printf("# ");
    va_start(ap, fmt);
    vprintf(fmt, ap);
    va_end(ap);
    printf("\n");
}

TAP_UNUSED static int
tap_done(void)
{
    printf("1..%d\n", tap_n);
    return tap_failed ? 1 : 0;
}

#endif /* LLM_TAP_H */
