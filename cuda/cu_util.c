/*
 * cu_util.c -- message formatting and checked allocation for cuda/.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#include "llm.h"
#include "cu_util.h"


void
llm_cu_errf(char *err, const char *fmt, ...)
{
    va_list  ap;

    if (err == NULL) {
        return;
    }
    va_start(ap, fmt);
    vsnprintf(err, LLM_ERR_LEN, fmt, ap);
    va_end(ap);
}


static void
llm_cu_oom(size_t n)
{
    fprintf(stderr, "llm cuda: out of host memory (%zu bytes)\n", n);
    abort();
}


void *
llm_cu_xcalloc(size_t n, size_t size)
{
    void  *p = calloc(n ? n : 1, size ? size : 1);

    if (p == NULL) {
        llm_cu_oom(n * size);
    }
    return p;
}


void *
llm_cu_xrealloc(void *p, size_t n)
{
    p = realloc(p, n ? n : 1);
    if (p == NULL) {
        llm_cu_oom(n);
    }
    return p;
}
