/*
 * cu_util.h -- the few helpers of the CUDA backend's host code.  The
 * backend is a shared object of its own and does not link libllm.a, so it
 * carries its own message formatting.
 */
#ifndef LLM_CU_UTIL_H
#define LLM_CU_UTIL_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* One line into err (LLM_ERR_LEN bytes); err may be NULL. */
void llm_cu_errf(char *err, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* calloc/realloc that abort with a message: like the engine's llm_x*(). */
void *llm_cu_xcalloc(size_t n, size_t size);
void *llm_cu_xrealloc(void *p, size_t n);

static inline size_t
llm_cu_align(size_t n, size_t a)
{
    return (n + a - 1) / a * a;
}

#define LLM_CU_MIB(n)  ((double) (n) / (1024.0 * 1024.0))

#ifdef __cplusplus
}
#endif

#endif /* LLM_CU_UTIL_H */
