/*
 * logits_cmp.h -- how the backend tests compare two backends' logits (the
 * CPU against the CUDA reference, the device against the host): the largest
 * difference relative to the row's largest logit, and the rows whose argmax
 * differs by more than rounding explains.
 */
#ifndef LOGITS_CMP_H
#define LOGITS_CMP_H

#include <math.h>
#include <stddef.h>

typedef struct {
    double  max_rel;        /* max |a - b| / max |a| over all rows */
    int     rows;
    int     argmax_diff;    /* rows whose argmax differs */
    int     unexplained;    /* ... although a's top-2 gap > 2 max |a - b| */
    int     ids_diff;       /* the caller's: sampled ids that are not the
                             * argmax they should be */
} logits_cmp;


/* The argmax of x in *best, and how far it is ahead of the second. */
static inline float
logits_top2_gap(const float *x, int V, int *best)
{
    float  m1 = -INFINITY, m2 = -INFINITY;
    int    j;

    *best = 0;
    for (j = 0; j < V; j++) {
        if (x[j] > m1) {
            m2 = m1;
            m1 = x[j];
            *best = j;
        } else if (x[j] > m2) {
            m2 = x[j];
        }
    }
    return m1 - m2;
}


/* Adds n rows of V logits, a against b, to c. */
static inline void
logits_cmp_rows(logits_cmp *c, const float *a, const float *b, int n, int V)
{
    int     i, j, ba, bb;
    float   amax, dmax, d, gap;

    for (i = 0; i < n; i++) {
        amax = 1e-30f;
        dmax = 0.0f;
        for (j = 0; j < V; j++) {
            amax = fmaxf(amax, fabsf(a[(size_t) i * V + j]));
            d = fabsf(a[(size_t) i * V + j] - b[(size_t) i * V + j]);
            dmax = isnan(d) ? INFINITY : fmaxf(dmax, d);
        }
        c->max_rel = fmax(c->max_rel, dmax / amax);
        gap = logits_top2_gap(a + (size_t) i * V, V, &ba);
        logits_top2_gap(b + (size_t) i * V, V, &bb);
        if (ba != bb) {
            c->argmax_diff++;
            c->unexplained += gap > 2.0f * dmax;
        }
        c->rows++;
    }
}

#endif /* LOGITS_CMP_H */
