/*
 * util.c -- error formatting, file reading, clock, checked allocation.
 */
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "util.h"


void
llm_errf(char *err, const char *fmt, ...)
{
    va_list  ap;

    if (err == NULL) {
        return;
    }
    va_start(ap, fmt);
    vsnprintf(err, LLM_ERR_LEN, fmt, ap);
    va_end(ap);
}


char *
llm_read_file(const char *path, size_t *len, char *err)
{
    FILE    *f;
    char    *buf;
    long     size;
    size_t   got;

    f = fopen(path, "rb");
    if (f == NULL) {
        llm_errf(err, "%s: %s", path, strerror(errno));
        return NULL;
    }
    if (fseek(f, 0, SEEK_END) != 0 || (size = ftell(f)) < 0
        || fseek(f, 0, SEEK_SET) != 0)
    {
        llm_errf(err, "%s: cannot determine the size: %s", path,
                 strerror(errno));
        fclose(f);
        return NULL;
    }
    buf = malloc((size_t) size + 1);
    if (buf == NULL) {
        llm_errf(err, "%s: out of memory reading %ld bytes", path, size);
        fclose(f);
        return NULL;
    }
    got = fread(buf, 1, (size_t) size, f);
    fclose(f);
    if (got != (size_t) size) {
        llm_errf(err, "%s: short read", path);
        free(buf);
        return NULL;
    }
    buf[size] = '\0';
    if (len) {
        *len = (size_t) size;
    }
    return buf;
}


const char *
llm_path_join(char *buf, const char *dir, const char *name)
{
    snprintf(buf, PATH_MAX, "%s/%s", dir, name);
    return buf;
}


int
llm_file_exists(const char *path)
{
    struct stat  st;

    return stat(path, &st) == 0 && S_ISREG(st.st_mode);
}


double
llm_now(void)
{
    struct timespec  ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double) ts.tv_sec + (double) ts.tv_nsec * 1e-9;
}


static void
llm_oom(size_t n)
{
    fprintf(stderr, "llm: out of memory allocating %zu bytes\n", n);
    abort();
}


void *
llm_xmalloc(size_t n)
{
    void  *p = malloc(n ? n : 1);

    if (p == NULL) {
        llm_oom(n);
    }
    return p;
}


void *
llm_xcalloc(size_t n, size_t size)
{
    void  *p = calloc(n ? n : 1, size ? size : 1);

    if (p == NULL) {
        llm_oom(n * size);
    }
    return p;
}


void *
llm_xrealloc(void *p, size_t n)
{
    p = realloc(p, n ? n : 1);
    if (p == NULL) {
        llm_oom(n);
    }
    return p;
}


char *
llm_xstrdup(const char *s)
{
    size_t  n = strlen(s) + 1;

    return memcpy(llm_xmalloc(n), s, n);
}


float
llm_f16_to_f32(uint16_t h)
{
    uint32_t  sign = (uint32_t) (h & 0x8000) << 16;
    uint32_t  exp = (h >> 10) & 0x1f;
    uint32_t  mant = h & 0x3ff;
    union { uint32_t u; float f; } v;

    if (exp == 0) {
        if (mant == 0) {
            v.u = sign;
            return v.f;
        }
        /* subnormal: value = mant * 2^-24 */
        v.f = (float) mant * (1.0f / 16777216.0f);
        v.u |= sign;
        return v.f;
    }
    if (exp == 31) {
        v.u = sign | 0x7f800000 | (mant << 13);
        return v.f;
    }
    v.u = sign | ((exp + 112) << 23) | (mant << 13);
    return v.f;
}


uint16_t
llm_f32_to_f16(float f)
{
    union { float f; uint32_t u; } v = { f };
    uint32_t  sign = (v.u >> 16) & 0x8000;
    uint32_t  abs = v.u & 0x7fffffff;
    uint32_t  exp, mant, r;

    if (abs > 0x7f800000) {
        return (uint16_t) (sign | 0x7e00);
    }
    if (abs >= 0x477ff000) {                    /* >= 65520 rounds to inf */
        return (uint16_t) (sign | 0x7c00);
    }
    if (abs < 0x38800000) {                     /* subnormal or zero */
        union { uint32_t u; float f; } a = { abs };
        r = (uint32_t) rintf(a.f * 16777216.0f);   /* ties to even */
        return (uint16_t) (sign | r);
    }
    exp = (abs >> 23) - 112;
    mant = abs & 0x7fffff;
    r = (exp << 10) | (mant >> 13);
    /* round to nearest even on the 13 dropped bits */
    if ((mant & 0x1fff) > 0x1000 || ((mant & 0x1fff) == 0x1000 && (r & 1))) {
        r++;
    }
    return (uint16_t) (sign | r);
}


const char *
llm_pyfloat(char *buf, double v)
{
    char  digits[32], out[64], *e, *dot;
    int   p, lo, hi, exp10, n, i;

    if (isnan(v)) {
        return strcpy(buf, "nan");
    }
    if (isinf(v)) {
        return strcpy(buf, v < 0 ? "-inf" : "inf");
    }
    /* the shortest mantissa that reads back exactly: reading back is
     * monotonic in the digits (17 always do), and most values (measured
     * times, logprobs) need 15 to 17, so 15 is tried first, then 16, else
     * 17; only values of 15 digits or fewer search below, by bisection */
    lo = 1;
    hi = 17;
    p = 15;
    while (lo < hi) {
        snprintf(digits, sizeof(digits), "%.*e", p - 1, v);
        if (strtod(digits, NULL) == v) {
            hi = p;
        } else {
            lo = p + 1;
        }
        p = lo >= 15 ? lo : (lo + hi) / 2;
    }
    p = lo;
    snprintf(digits, sizeof(digits), "%.*e", p - 1, v);
    e = strchr(digits, 'e');
    exp10 = atoi(e + 1);
    if (exp10 < -4 || exp10 >= 16) {
        /* Python: mantissa without trailing zeros, exponent >= 2 digits */
        *e = '\0';
        if ((dot = strchr(digits, '.')) != NULL) {
            n = (int) strlen(digits);
            while (n > 0 && digits[n - 1] == '0') {
                digits[--n] = '\0';
            }
            if (digits[n - 1] == '.') {
                digits[n - 1] = '\0';
            }
        }
        snprintf(out, sizeof(out), "%se%c%02d", digits,
                 exp10 < 0 ? '-' : '+', exp10 < 0 ? -exp10 : exp10);
        n = (int) strlen(out);          /* at most 24: 17 digits, e+308 */
        memcpy(buf, out, n + 1);
        return buf;
    }
    i = p - 1 - exp10;                  /* decimals needed */
    snprintf(buf, 32, "%.*f", i > 0 ? i : 0, v);
    if (strchr(buf, '.') == NULL) {
        strcat(buf, ".0");
    }
    return buf;
}
