/*
 * cu_sample.cu -- sampling on the device: one block per logits row turns
 * the row into a token id as engine/sampler.c's llm_sample() would, in its
 * order (vLLM's): repetition / frequency / presence penalties, logit bias,
 * min_tokens masks, then the greedy argmax, or temperature, min-p, top-k,
 * top-p and one draw with the uniform number the host drew from the
 * request's seeded generator.  Only the ids (and the logprob records of
 * the rows that ask for them) leave the device.
 *
 * Without sorting the vocabulary:
 *   - p[j] = expf(l[j] / T - max / T) replaces the row in place (0 for
 *     -inf logits and for what min-p removes); the largest p is exactly 1;
 *   - top-k: the k-th largest value t_k is found by a binary search over
 *     the bit patterns of positive floats (monotone in the value) with
 *     block-wide counts of p >= t; top-p: the largest t whose kept mass
 *     p >= t reaches top_p of the top-k set's mass, by the same search on
 *     mass (f64 sums).  Each search is at most 30 passes over the row;
 *   - what is kept is then p > T plus the first Q tokens, in vocabulary
 *     order, whose p equals T (T, Q from the searches).  That is the host
 *     sampler's rule for ties (it sorts by value, then by index): top-k
 *     keeps exactly k tokens, the equal ones of lowest index; top-p keeps
 *     the shortest such prefix whose mass reaches top_p;
 *   - the draw walks the kept tokens in vocabulary order: each thread owns
 *     a contiguous chunk, a block scan of the chunks' masses finds the
 *     chunk where the running mass first exceeds u * total, and its thread
 *     walks it.  Without top-k/top-p the host sampler walks its candidates
 *     in vocabulary order as well, so the same u gives the same token on
 *     both (up to the rounding of the sums at a boundary); with them the
 *     host walks in sorted order: same distribution, other tokens per u.
 *
 * Logprobs (rows with logprobs >= 0) come from the raw logits, as the host
 * sampler takes them: log-sum-exp (f64 sum), the chosen token's logprob,
 * and the top N (<= 20) raw logits by the same kind of threshold search on
 * order-preserving keys of the floats, sorted by value then index.  Such a
 * row is sampled in a scratch copy (its slot in `scratch`), so that the
 * raw logit of the chosen token is still there at the end.
 *
 * Exact f32 as on the host: the products l * (1/T) are __fmul_rn (nvcc
 * would otherwise fuse them with the subtraction into an FMA, which the
 * host's x86-64 code does not).  expf on the GPU is within 2 ulp of the
 * host's, so a kept set or a draw can differ from the host's at an exact
 * boundary; the emulator (host expf) agrees exactly.
 */
#include <float.h>
#include <limits.h>
#include <math.h>
#include <string.h>

#include "cu_check.cuh"
#include "cu_device.cuh"
#include "cu_kernels.h"

#define LLM_SAMPLE_MAX_THREADS  1024
#define LLM_SAMPLE_ONE          0x3f800000u        /* 1.0f */


__device__ __forceinline__ float
llm_bits_float(unsigned b)
{
    float  f;

    memcpy(&f, &b, sizeof(f));
    return f;
}


template <typename V>
__device__ __forceinline__ V
llm_warp_sum_t(V v)
{
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) {
        v += __shfl_xor_sync(LLM_CU_FULL_MASK, v, o);
    }
    return v;
}


/* Count and mass over the block, every thread gets both; the trees are
 * fixed, so the sums are deterministic. */
__device__ __forceinline__ void
llm_block_sum2(int *c, double *m, int *redc, double *redm)
{
    int  lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    int  nw = blockDim.x >> 5;

    *c = llm_warp_sum_t(*c);
    *m = llm_warp_sum_t(*m);
    __syncthreads();
    if (lane == 0) {
        redc[warp] = *c;
        redm[warp] = *m;
    }
    __syncthreads();
    *c = llm_warp_sum_t(lane < nw ? redc[lane] : 0);
    *m = llm_warp_sum_t(lane < nw ? redm[lane] : 0.0);
}


/* Inclusive prefix sum over the threads in thread order (Hillis-Steele in
 * shared memory, buf of blockDim.x). */
template <typename V>
__device__ V
llm_block_scan(V v, V *buf)
{
    int  tid = threadIdx.x;

    __syncthreads();                    /* buf may still be read */
    buf[tid] = v;
    __syncthreads();
    for (int off = 1; off < (int) blockDim.x; off <<= 1) {
        V  add = tid >= off ? buf[tid - off] : (V) 0;

        __syncthreads();
        v += add;
        buf[tid] = v;
        __syncthreads();
    }
    return v;
}


/* Block-wide min (or max) of an int; every thread gets it. */
__device__ __forceinline__ int
llm_block_minmax(int v, int want_max, int *red)
{
    int  lane = threadIdx.x & 31, warp = threadIdx.x >> 5, o;
    int  nw = blockDim.x >> 5;

    for (int s = 16; s > 0; s >>= 1) {
        o = __shfl_xor_sync(LLM_CU_FULL_MASK, v, s);
        v = want_max ? (o > v ? o : v) : (o < v ? o : v);
    }
    __syncthreads();
    if (lane == 0) {
        red[warp] = v;
    }
    __syncthreads();
    v = lane < nw ? red[lane] : (want_max ? INT_MIN : INT_MAX);
    for (int s = 16; s > 0; s >>= 1) {
        o = __shfl_xor_sync(LLM_CU_FULL_MASK, v, s);
        v = want_max ? (o > v ? o : v) : (o < v ? o : v);
    }
    return v;
}


/* The first index of the row's maximum (the sampler's llm_argmax rule);
 * every thread gets it and the value. */
__device__ __forceinline__ int
llm_block_argmax(const float *x, int V, float *best_out, float *bv, int *bi)
{
    float  best = -INFINITY, ov;
    int    idx = INT_MAX, oi, lane = threadIdx.x & 31;
    int    nw = blockDim.x >> 5;

    for (int j = threadIdx.x; j < V; j += blockDim.x) {
        if (x[j] > best || (idx == INT_MAX && x[j] == best)) {
            best = x[j];
            idx = j;
        }
    }
    for (int o = 16; o > 0; o >>= 1) {
        ov = __shfl_xor_sync(LLM_CU_FULL_MASK, best, o);
        oi = __shfl_xor_sync(LLM_CU_FULL_MASK, idx, o);
        if (ov > best || (ov == best && oi < idx)) {
            best = ov;
            idx = oi;
        }
    }
    __syncthreads();
    if (lane == 0) {
        bv[threadIdx.x >> 5] = best;
        bi[threadIdx.x >> 5] = idx;
    }
    __syncthreads();
    best = lane < nw ? bv[lane] : -INFINITY;
    idx = lane < nw ? bi[lane] : INT_MAX;
    for (int o = 16; o > 0; o >>= 1) {
        ov = __shfl_xor_sync(LLM_CU_FULL_MASK, best, o);
        oi = __shfl_xor_sync(LLM_CU_FULL_MASK, idx, o);
        if (ov > best || (ov == best && oi < idx)) {
            best = ov;
            idx = oi;
        }
    }
    *best_out = best;
    return idx == INT_MAX ? 0 : idx;
}


/* An unsigned key with the order of the floats (sign flipped, negatives
 * reversed). */
__device__ __forceinline__ unsigned
llm_float_key(float f)
{
    unsigned  b;

    memcpy(&b, &f, sizeof(b));
    return (b & 0x80000000u) ? ~b : (b | 0x80000000u);
}


/* The top n (<= 20, <= V) raw logits into lp, sorted by value descending
 * then index ascending (llm_fill_logprobs' order), as logprobs. */
__device__ void
llm_sample_top_n(const float *x, int V, int n, float lse,
    llm_token_logprob *lp, int *redc, double *redm, int *scan_c, float *tv,
    int *ti)
{
    unsigned long long  lo = 0, hi = 1ull << 32, mid;
    unsigned            t, k;
    int                 tid = threadIdx.x, nt = blockDim.x, j, j0, j1;
    int                 cnt, c_hi = 0, quota, neq, rank, sel, pos;
    double              none;

    /* the largest key t with count(key >= t) >= n */
    while (hi - lo > 1) {
        mid = lo + (hi - lo) / 2;
        cnt = 0;
        for (j = tid; j < V; j += nt) {
            cnt += llm_float_key(x[j]) >= mid;
        }
        none = 0.0;
        llm_block_sum2(&cnt, &none, redc, redm);
        if (cnt >= n) {
            lo = mid;
        } else {
            hi = mid;
            c_hi = cnt;
        }
    }
    t = (unsigned) lo;
    quota = n - c_hi;                   /* of the keys equal to t */

    /* gather them in vocabulary order: keys above t, and the first
     * `quota` equal to it */
    j0 = (int) (((long long) V * tid) / nt);
    j1 = (int) (((long long) V * (tid + 1)) / nt);
    neq = 0;
    for (j = j0; j < j1; j++) {
        neq += llm_float_key(x[j]) == t;
    }
    rank = llm_block_scan(neq, scan_c) - neq;
    sel = 0;
    for (j = j0, cnt = rank; j < j1; j++) {
        k = llm_float_key(x[j]);
        sel += k > t || (k == t && cnt++ < quota);
    }
    pos = llm_block_scan(sel, scan_c) - sel;
    for (j = j0, cnt = rank; j < j1; j++) {
        k = llm_float_key(x[j]);
        if (k > t || (k == t && cnt++ < quota)) {
            tv[pos] = x[j];
            ti[pos] = j;
            pos++;
        }
    }
    __syncthreads();
    if (tid == 0) {
        for (j = 1; j < n; j++) {       /* insertion sort of n <= 20 */
            float  v = tv[j];
            int    id = ti[j], i = j - 1;

            while (i >= 0 && (tv[i] < v || (tv[i] == v && ti[i] > id))) {
                tv[i + 1] = tv[i];
                ti[i + 1] = ti[i];
                i--;
            }
            tv[i + 1] = v;
            ti[i + 1] = id;
        }
        lp->n_top = n;
        for (j = 0; j < n; j++) {
            lp->top_ids[j] = ti[j];
            lp->top_logprobs[j] = tv[j] - lse;
        }
    }
    __syncthreads();
}


/* How many p >= t and their mass. */
__device__ __forceinline__ void
llm_sample_above(const float *p, int V, float t, int *c, double *m,
    int *redc, double *redm)
{
    int     cnt = 0;
    double  mass = 0.0;
    float   v;

    for (int j = threadIdx.x; j < V; j += blockDim.x) {
        v = p[j];
        if (v >= t) {
            cnt++;
            mass += v;
        }
    }
    llm_block_sum2(&cnt, &mass, redc, redm);
    *c = cnt;
    *m = mass;
}


/* The row's logit modifications (llm_sampler_mods(), applied as
 * llm_sampler_mods_apply() does on the host); within a
 * kind the ids are distinct (bias entries, which may repeat, are added in
 * order by one thread). */
__device__ __forceinline__ void
llm_sample_apply_mods(float *x, const llm_sample_row *r,
    const llm_sample_mod *md)
{
    int    i, t;
    float  l;

    for (i = threadIdx.x; i < r->n_rep; i += blockDim.x) {
        t = md[i].id;
        l = x[t];
        x[t] = l > 0.0f ? l / md[i].v : l * md[i].v;
    }
    __syncthreads();
    md += r->n_rep;
    for (i = threadIdx.x; i < r->n_sub; i += blockDim.x) {
        x[md[i].id] -= md[i].v;
    }
    __syncthreads();
    md += r->n_sub;
    if (threadIdx.x == 0) {
        for (i = 0; i < r->n_bias; i++) {
            x[md[i].id] += md[i].v;
        }
    }
    __syncthreads();
    md += r->n_bias;
    for (i = threadIdx.x; i < r->n_mask; i += blockDim.x) {
        x[md[i].id] = -INFINITY;
    }
    __syncthreads();
}


/* The row's token, and its logprob record when it asks for one, with
 * vLLM's rank (how many raw logits are >= the token's, as the host's
 * llm_sampler_logprobs counts).  Every thread of the block calls it. */
__device__ __forceinline__ void
llm_sample_emit(int32_t *ids, llm_token_logprob *lp, const float *raw,
    int V, float lse, int id, int *redc, double *redm)
{
    int     j, rank = 0;
    double  none = 0.0;

    if (lp != NULL) {
        for (j = threadIdx.x; j < V; j += blockDim.x) {
            rank += raw[j] >= raw[id];
        }
        llm_block_sum2(&rank, &none, redc, redm);
    }
    if (threadIdx.x == 0) {
        ids[blockIdx.x] = id;
        if (lp != NULL) {
            lp->id = id;
            lp->logprob = raw[id] - lse;
            lp->rank = rank;
        }
    }
}


/* One block per row.  rows == NULL: every row greedy.  Rows with
 * logprobs >= 0 get their record in lp_out[row] and are sampled in
 * scratch row lp_slot. */
__global__ void __launch_bounds__(LLM_SAMPLE_MAX_THREADS)
llm_k_sample(float *__restrict__ logits, int V,
    const llm_sample_row *__restrict__ rows,
    const llm_sample_mod *__restrict__ mods, int32_t *__restrict__ ids,
    float *__restrict__ scratch, llm_token_logprob *__restrict__ lp_out)
{
    __shared__ float   bv[32], top_v[20];
    __shared__ int     bi[32], redc[32], top_i[20];
    __shared__ double  redm[32];
    __shared__ int     scan_c[LLM_SAMPLE_MAX_THREADS];
    __shared__ double  scan_m[LLM_SAMPLE_MAX_THREADS];
    float                 *x = logits + (size_t) blockIdx.x * V, *raw = x;
    const llm_sample_row  *r = rows ? rows + blockIdx.x : NULL;
    llm_token_logprob     *lp = NULL;
    float                  lse = 0.0f;
    int                    tid = threadIdx.x, nt = blockDim.x;
    int                    j, top, nc, cnt, quota, j0, j1, neq, rank;
    int                    last, pick;
    unsigned               tb, lo, hi;
    float                  best, inv_t, mx, tf, v;
    double                 mass, target, cm, excl, incl, total, cum;

    if (r != NULL && r->logprobs >= 0) {
        /* logprobs of the raw logits, as llm_fill_logprobs: lse = m +
         * log(sum of exp(l - m)), the sum in f64 */
        lp = lp_out + blockIdx.x;
        llm_block_argmax(x, V, &best, bv, bi);
        cnt = 0;
        mass = 0.0;
        for (j = tid; j < V; j += nt) {
            mass += exp((double) (x[j] - best));
        }
        llm_block_sum2(&cnt, &mass, redc, redm);
        lse = best + (float) log(mass);
        if (tid == 0) {
            lp->n_top = 0;
        }
        if (r->logprobs > 0) {
            llm_sample_top_n(x, V, r->logprobs < V ? r->logprobs : V, lse,
                             lp, redc, redm, scan_c, top_v, top_i);
        }
        /* sample in a copy: the raw row stays for the chosen logprob */
        x = scratch + (size_t) r->lp_slot * V;
        for (j = tid; j < V; j += nt) {
            x[j] = raw[j];
        }
        __syncthreads();
    }
    if (r != NULL) {
        llm_sample_apply_mods(x, r, mods + r->mod_off);
    }
    top = llm_block_argmax(x, V, &best, bv, bi);
    if (r == NULL || r->greedy || best == -INFINITY) {
        /* the host sampler returns the argmax when nothing is finite */
        llm_sample_emit(ids, lp, raw, V, lse, top, redc, redm);
        return;
    }

    /* probabilities relative to the maximum, in place; min-p removes
     * p < min_p (the maximum's p is 1) */
    inv_t = r->inv_t;
    mx = __fmul_rn(best, inv_t);
    nc = 0;
    for (j = tid; j < V; j += nt) {
        float  l = x[j], e = 0.0f;

        if (l != -INFINITY) {
            e = expf(__fmul_rn(l, inv_t) - mx);
            if (r->min_p > 0.0 && (double) e < r->min_p) {
                e = 0.0f;
            }
        }
        x[j] = e;
        nc += e > 0.0f;
    }
    mass = 0.0;
    llm_block_sum2(&nc, &mass, redc, redm);

    /* kept: p > T, and the first `quota` tokens with p == T */
    tb = 1;                             /* the smallest positive float */
    quota = INT_MAX;
    if (r->top_k > 0 && r->top_k < nc) {
        /* the largest t with count(p >= t) >= k: count(lo) >= k and
         * count(hi) < k throughout */
        int  c_hi = 0;

        lo = 1;
        hi = LLM_SAMPLE_ONE + 1;
        while (hi - lo > 1) {
            unsigned  mid = lo + (hi - lo) / 2;

            llm_sample_above(x, V, llm_bits_float(mid), &cnt, &mass, redc,
                             redm);
            if (cnt >= r->top_k) {
                lo = mid;
            } else {
                hi = mid;
                c_hi = cnt;
            }
        }
        tb = lo;
        quota = r->top_k - c_hi;        /* c_hi tokens are above t_k */
    }
    if (r->top_p < 1.0) {
        int     c_ge, c_gt, avail, c_lo = 0, c_hi = 0;
        double  m_ge, m_gt, m_hi = 0.0, sum1;

        llm_sample_above(x, V, llm_bits_float(tb), &c_ge, &m_ge, redc, redm);
        llm_sample_above(x, V, llm_bits_float(tb + 1), &c_gt, &m_gt, redc,
                         redm);
        tf = llm_bits_float(tb);
        avail = c_ge - c_gt < quota ? c_ge - c_gt : quota;
        sum1 = m_gt + (double) avail * tf;          /* the top-k set's mass */
        target = r->top_p * sum1;
        /* the largest t >= T whose kept mass reaches the target: at T it
         * is sum1 >= target, above 1 it is 0.  At the end hi = lo + 1, so
         * (c_hi, m_hi) are the count and mass of p > lo. */
        lo = tb;
        hi = LLM_SAMPLE_ONE + 1;
        while (hi - lo > 1) {
            unsigned  mid = lo + (hi - lo) / 2;

            llm_sample_above(x, V, llm_bits_float(mid), &cnt, &mass, redc,
                             redm);
            if (mass >= target) {
                lo = mid;
                c_lo = cnt;
            } else {
                hi = mid;
                c_hi = cnt;
                m_hi = mass;
            }
        }
        if (lo != tb) {
            avail = c_lo - c_hi;        /* else T's: the top-k quota's */
        }
        /* the smallest c >= 1 equal tokens with m_hi + c t >= target (the
         * host sampler stops its sorted prefix at the first token whose
         * running mass reaches the target) */
        tf = llm_bits_float(lo);
        quota = (int) ceil((target - m_hi) / (double) tf);
        if (quota < 1) {
            quota = 1;
        }
        if (quota > avail) {
            quota = avail;
        }
        while (quota > 1 && m_hi + (double) (quota - 1) * tf >= target) {
            quota--;
        }
        while (quota < avail && m_hi + (double) quota * tf < target) {
            quota++;
        }
        tb = lo;
    }

    /* the draw: kept tokens in vocabulary order, each thread a chunk */
    tf = llm_bits_float(tb);
    j0 = (int) (((long long) V * tid) / nt);
    j1 = (int) (((long long) V * (tid + 1)) / nt);
    neq = 0;
    for (j = j0; j < j1; j++) {
        neq += x[j] == tf;
    }
    rank = llm_block_scan(neq, scan_c) - neq;    /* equal tokens before */
    cm = 0.0;
    last = -1;
    for (j = j0, cnt = rank; j < j1; j++) {
        v = x[j];
        if (v > tf || (v == tf && cnt++ < quota)) {
            cm += v;
            last = j;
        }
    }
    incl = llm_block_scan(cm, scan_m);
    excl = tid > 0 ? scan_m[tid - 1] : 0.0;
    total = scan_m[nt - 1];
    target = r->u * total;
    pick = INT_MAX;
    if (cm > 0.0 && excl <= target && target < incl) {
        int  lastk = -1;

        cum = excl;
        for (j = j0, cnt = rank; j < j1; j++) {
            v = x[j];
            if (v > tf || (v == tf && cnt++ < quota)) {
                cum += v;
                lastk = j;
                if (target < cum) {
                    pick = j;
                    break;
                }
            }
        }
        if (pick == INT_MAX) {
            pick = lastk;               /* the chunk's own sum rounded up */
        }
    }
    pick = llm_block_minmax(pick, 0, redc);
    last = llm_block_minmax(last, 1, redc);
    /* u * total at or past the total by rounding: the last kept token, as
     * the host sampler returns */
    llm_sample_emit(ids, lp, raw, V, lse, pick != INT_MAX ? pick : last,
                    redc, redm);
}


/* Threads per row: at least 16 elements each (a 32k vocabulary or more
 * gets 1024), at most 1024. */
static int
llm_sample_threads(int V)
{
    int  nt = (V / 16 + 31) & ~31;

    return nt < 32 ? 32 : nt > LLM_SAMPLE_MAX_THREADS
                          ? LLM_SAMPLE_MAX_THREADS : nt;
}


extern "C" int
llm_cuk_sample(cudaStream_t st, float *logits, int n, int V,
    const llm_sample_row *rows, const llm_sample_mod *mods, int32_t *ids,
    float *scratch, llm_token_logprob *lp, char *err)
{
    if (n <= 0) {
        return 0;
    }
    LLM_CU_LAUNCH(llm_k_sample, n, llm_sample_threads(V), 0, st, logits, V,
                  rows, mods, ids, scratch, lp);
    return LLM_CU_LAUNCHED(err) ? -1 : 0;
}
