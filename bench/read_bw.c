/*
 * read_bw.c -- the machine's memory read bandwidth with N threads: each
 * thread sums its share of a buffer far larger than the caches, 5 passes,
 * the best pass counted.  The decode benchmarks divide the bytes of weights
 * a token reads by this to get the bandwidth limit.
 *
 *   read_bw [THREADS] [MIB]        prints {"threads":N,"read_gb_per_s":X}
 */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static uint64_t  *buf;
static size_t     n_words;
static int        n_threads;
static volatile uint64_t  sink;


static void *
reader(void *arg)
{
    size_t    t = (size_t) (uintptr_t) arg, i;
    size_t    lo = n_words / n_threads * t, hi = lo + n_words / n_threads;
    uint64_t  s0 = 0, s1 = 0, s2 = 0, s3 = 0;

    for (i = lo; i + 4 <= hi; i += 4) {
        s0 += buf[i];
        s1 += buf[i + 1];
        s2 += buf[i + 2];
        s3 += buf[i + 3];
    }
    sink += s0 + s1 + s2 + s3;
    return NULL;
}


static double
now(void)
{
    struct timespec  ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}


int
main(int argc, char **argv)
{
    size_t     mib = argc > 2 ? (size_t) atoi(argv[2]) : 1024;
    pthread_t  tid[64];
    double     t0, best = 0;
    int        pass, i;

    n_threads = argc > 1 ? atoi(argv[1]) : 2;
    if (n_threads < 1 || n_threads > 64) {
        return 2;
    }
    n_words = mib * 1024 * 1024 / 8;
    buf = malloc(n_words * 8);
    memset(buf, 1, n_words * 8);
    for (pass = 0; pass < 5; pass++) {
        t0 = now();
        for (i = 0; i < n_threads; i++) {
            pthread_create(&tid[i], NULL, reader, (void *) (uintptr_t) i);
        }
        for (i = 0; i < n_threads; i++) {
            pthread_join(tid[i], NULL);
        }
        t0 = n_words * 8 / (now() - t0) / 1e9;
        best = t0 > best ? t0 : best;
    }
    printf("{\"threads\":%d,\"read_gb_per_s\":%.2f}\n", n_threads, best);
    return 0;
}
