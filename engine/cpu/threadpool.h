/*
 * threadpool.h -- the CPU backend's compute threads.
 *
 * llm_threadpool_run(fn) runs fn(arg, ith, nth) on every thread (the caller
 * is thread 0) and returns when all are done.  A forward pass is a few dozen
 * such regions, so workers spin briefly between them instead of sleeping;
 * after ~1 ms without work they sleep on a condition variable.
 */
#ifndef LLM_THREADPOOL_H
#define LLM_THREADPOOL_H

typedef struct llm_threadpool llm_threadpool;
typedef void (*llm_task_fn)(void *arg, int ith, int nth);

llm_threadpool *llm_threadpool_create(int n_threads);
void llm_threadpool_run(llm_threadpool *tp, llm_task_fn fn, void *arg);
int llm_threadpool_size(const llm_threadpool *tp);
void llm_threadpool_free(llm_threadpool *tp);

/* Splits [0, n) into nth parts aligned to `align`; part ith is [*lo, *hi). */
void llm_split(int n, int align, int ith, int nth, int *lo, int *hi);

#endif /* LLM_THREADPOOL_H */
