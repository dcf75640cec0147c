/*
 * threadpool.c -- spin-then-sleep worker threads for the CPU backend.
 */
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>

#include "threadpool.h"
#include "util/util.h"

/* A worker spins this long for the next region before it sleeps; after
 * LLM_SPIN_PAUSES it yields the CPU on every turn, so a spinning thread
 * costs little when the machine is oversubscribed (other processes, or
 * more threads than cores). */
#define LLM_SPIN_SECONDS  0.002
#define LLM_SPIN_PAUSES   2000

struct llm_threadpool {
    int               n;
    pthread_t        *threads;
    llm_task_fn       fn;
    void             *arg;
    atomic_uint       generation;       /* bumped once per run */
    atomic_int        pending;          /* workers still in this run */
    atomic_int        sleepers;
    atomic_int        stop;
    pthread_mutex_t   mu;
    pthread_cond_t    cv;
};

typedef struct {
    llm_threadpool   *tp;
    int               ith;
} llm_worker_arg;


static inline void
llm_cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
}


static void *
llm_worker_main(void *p)
{
    llm_worker_arg   *wa = p;
    llm_threadpool   *tp = wa->tp;
    int               ith = wa->ith;
    unsigned          seen = 0;
    sigset_t          all;
    long              spins;
    double            deadline = 0;

    free(wa);
    /* signals belong to the host's event loop thread */
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, NULL);

    for ( ;; ) {
        for (spins = 0; atomic_load_explicit(&tp->generation,
                                              memory_order_acquire) == seen;
             spins++)
        {
            if (atomic_load(&tp->stop)) {
                return NULL;
            }
            if (spins < LLM_SPIN_PAUSES) {
                llm_cpu_relax();
                continue;
            }
            if (spins == LLM_SPIN_PAUSES) {
                deadline = llm_now() + LLM_SPIN_SECONDS;
            }
            if ((spins & 63) != 0 || llm_now() < deadline) {
                sched_yield();
                continue;
            }
            pthread_mutex_lock(&tp->mu);
            atomic_fetch_add(&tp->sleepers, 1);
            while (atomic_load(&tp->generation) == seen
                   && !atomic_load(&tp->stop))
            {
                pthread_cond_wait(&tp->cv, &tp->mu);
            }
            atomic_fetch_sub(&tp->sleepers, 1);
            pthread_mutex_unlock(&tp->mu);
        }
        seen = atomic_load_explicit(&tp->generation, memory_order_acquire);
        if (atomic_load(&tp->stop)) {
            return NULL;
        }
        tp->fn(tp->arg, ith, tp->n);
        atomic_fetch_sub_explicit(&tp->pending, 1, memory_order_release);
    }
}


llm_threadpool *
llm_threadpool_create(int n_threads)
{
    llm_threadpool  *tp;
    int              i;

    if (n_threads < 1) {
        n_threads = 1;
    }
    tp = llm_xcalloc(1, sizeof(*tp));
    tp->n = n_threads;
    tp->threads = llm_xcalloc(n_threads, sizeof(pthread_t));
    pthread_mutex_init(&tp->mu, NULL);
    pthread_cond_init(&tp->cv, NULL);
    for (i = 1; i < n_threads; i++) {
        llm_worker_arg  *wa = llm_xmalloc(sizeof(*wa));

        wa->tp = tp;
        wa->ith = i;
        if (pthread_create(&tp->threads[i], NULL, llm_worker_main, wa) != 0) {
            free(wa);
            tp->n = i;                  /* run with the threads we got */
            break;
        }
    }
    return tp;
}


void
llm_threadpool_run(llm_threadpool *tp, llm_task_fn fn, void *arg)
{
    long  spins;

    if (tp->n == 1) {
        fn(arg, 0, 1);
        return;
    }
    tp->fn = fn;
    tp->arg = arg;
    atomic_store_explicit(&tp->pending, tp->n - 1, memory_order_relaxed);
    atomic_fetch_add(&tp->generation, 1);     /* seq_cst: pairs with sleepers */
    if (atomic_load(&tp->sleepers) > 0) {
        pthread_mutex_lock(&tp->mu);
        pthread_cond_broadcast(&tp->cv);
        pthread_mutex_unlock(&tp->mu);
    }
    fn(arg, 0, tp->n);
    for (spins = 0;
         atomic_load_explicit(&tp->pending, memory_order_acquire) > 0;
         spins++)
    {
        if (spins < LLM_SPIN_PAUSES) {
            llm_cpu_relax();
        } else {
            sched_yield();
        }
    }
}


int
llm_threadpool_size(const llm_threadpool *tp)
{
    return tp->n;
}


void
llm_threadpool_free(llm_threadpool *tp)
{
    int  i;

    if (tp == NULL) {
        return;
    }
    atomic_store(&tp->stop, 1);
    pthread_mutex_lock(&tp->mu);
    pthread_cond_broadcast(&tp->cv);
    pthread_mutex_unlock(&tp->mu);
    for (i = 1; i < tp->n; i++) {
        pthread_join(tp->threads[i], NULL);
    }
    pthread_mutex_destroy(&tp->mu);
    pthread_cond_destroy(&tp->cv);
    free(tp->threads);
    free(tp);
}


void
llm_split(int n, int align, int ith, int nth, int *lo, int *hi)
{
    int  units = (n + align - 1) / align;
    int  per = units / nth, rem = units % nth;
    int  u0 = ith * per + (ith < rem ? ith : rem);
    int  u1 = u0 + per + (ith < rem);

    *lo = u0 * align < n ? u0 * align : n;
    *hi = u1 * align < n ? u1 * align : n;
}
