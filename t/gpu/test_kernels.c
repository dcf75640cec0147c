/*
 * test_kernels.c -- the CUDA backend's kernels against the host reference
 * (cuda/cu_ref.c, itself checked against the CPU backend by
 * t/unit/test_cuda_ref.c), on random inputs, on a GPU.  Run by t/gpu/run.sh.
 *
 * Per model shape (bf16 and f16, head_dim 16..256, GQA/MHA, biases, q/k
 * norm, sliding window):
 *   - every op alone: the same random inputs (already rounded to T) go to
 *     the GPU op and the reference op; outputs must agree within a
 *     tolerance relative to the largest reference value; outputs are
 *     poisoned with NaN first, so every element the op must write is
 *     checked written, and the attention rows it must not touch stay NaN;
 *   - the attention kernels through three plans (as planned, everything
 *     through the split kernel, everything through the prefill kernel);
 *   - GEMMs through the GEMV kernel and through cuBLAS;
 *   - the whole forward pass over a multi-step scenario (prefill, mixed
 *     steps, graph-replayed decode steps) against the reference and the
 *     CPU backend, with and without CUDA graphs; forward_sample's greedy
 *     ids;
 *   - sampling on the device (cu_sample.cu) against the host sampler
 *     (engine/sampler.c): greedy ids with ties, the logits after penalties,
 *     bias and min_tokens masks bit for bit, the same token for the same
 *     uniform number without top-k/top-p, and a deterministic distribution
 *     test: a grid of u values over the kept set of top-k/top-p/min-p
 *     must give each of the host's candidates its share and nothing else.
 * Output: TAP lines, then "kernel tests: N passed, M failed".
 */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime_api.h>

#include "backend/backend.h"
#include "backend/batch.h"
#include "cu_backend.h"
#include "cu_kernels.h"
#include "cu_plan.h"
#include "cu_ref.h"
#include "cu_testmodel.h"
#include "sampler.h"
#include "sampler_rows.h"
#include "util/util.h"
#include "../unit/logits_cmp.h"

/*
 * Built twice: for the GPU (nvcc present; t/gpu/run.sh runs it) and against
 * the CPU emulator of cuda/emu (-DLLM_CU_EMU; make test runs it as
 * build/t/test_cuda_emu), where every thread of every block is emulated:
 * there the shapes, contexts and steps are smaller so that it takes a
 * minute, and the checks are the same.
 */
#ifdef LLM_CU_EMU
#define TK_SMALL 1
#else
#define TK_SMALL 0
#endif

static int  n_pass, n_fail;

static void
check(int ok, const char *fmt, ...)
{
    va_list  ap;

    if (ok) {
        n_pass++;
    } else {
        n_fail++;
    }
    printf("%s %d - ", ok ? "ok" : "not ok", n_pass + n_fail);
    va_start(ap, fmt);
    vprintf(fmt, ap);
    va_end(ap);
    printf("\n");
    fflush(stdout);
}


static uint64_t  rng = 0x2545f4914f6cdd1dULL;

static float
urand(void)                                 /* uniform [-1, 1) */
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (float) (rng >> 40) / 8388608.0f - 1.0f;
}


static uint32_t
irand(uint32_t n)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (uint32_t) (rng >> 33) % n;
}


/* ---- device I/O: T tensors travel as bf16/f16, the reference keeps floats */

typedef struct {
    llm_backend   *gpu, *ref, *cpu;
    llm_cu_state  *gs, *rs;
    llm_model     *m;
    int            f16;
    char           err[LLM_ERR_LEN];
} env;


static uint16_t
to_t(const env *e, float v)
{
    return e->f16 ? llm_f32_to_f16(v) : llm_f32_to_bf16(v);
}


static float
from_t(const env *e, uint16_t h)
{
    return e->f16 ? llm_f16_to_f32(h) : llm_bf16_to_f32(h);
}


static int
cu_ok(cudaError_t c, const char *what)
{
    if (c != cudaSuccess) {
        printf("# %s: %s\n", what, cudaGetErrorString(c));
        return 0;
    }
    return 1;
}


/* n random values of scale `a`, rounded to T, into the GPU (T) and the
 * reference (float) tensors */
static void
put_t_random(env *e, void *dev, float *host, size_t n, float a)
{
    uint16_t  *h = malloc(2 * n);
    size_t     i;

    for (i = 0; i < n; i++) {
        h[i] = to_t(e, a * urand());
        host[i] = from_t(e, h[i]);
    }
    cu_ok(cudaMemcpy(dev, h, 2 * n, cudaMemcpyHostToDevice), "put T");
    free(h);
}


static void
put_f32_random(void *dev, float *host, size_t n, float a)
{
    size_t  i;

    for (i = 0; i < n; i++) {
        host[i] = a * urand();
    }
    cu_ok(cudaMemcpy(dev, host, 4 * n, cudaMemcpyHostToDevice), "put f32");
}


static float *
get_t(env *e, const void *dev, size_t n)
{
    uint16_t  *h = malloc(2 * n);
    float     *f = malloc(4 * n);
    size_t     i;

    cu_ok(cudaMemcpy(h, dev, 2 * n, cudaMemcpyDeviceToHost), "get T");
    for (i = 0; i < n; i++) {
        f[i] = from_t(e, h[i]);
    }
    free(h);
    return f;
}


static float *
get_f32(const void *dev, size_t n)
{
    float  *f = malloc(4 * n);

    cu_ok(cudaMemcpy(f, dev, 4 * n, cudaMemcpyDeviceToHost), "get f32");
    return f;
}


/* max |a - b| over n, relative to max |b|; NaN anywhere counts as inf */
static double
rel_diff(const float *a, const float *b, size_t n, size_t *nan_count)
{
    double  dmax = 0.0, bmax = 1e-30, d;
    size_t  i;

    *nan_count = 0;
    for (i = 0; i < n; i++) {
        if (isnan(a[i]) || isnan(b[i])) {
            (*nan_count)++;
            continue;
        }
        d = fabs((double) a[i] - b[i]);
        dmax = d > dmax ? d : dmax;
        bmax = fabs(b[i]) > bmax ? fabs(b[i]) : bmax;
    }
    return *nan_count ? INFINITY : dmax / bmax;
}


static int
sync_gpu(env *e)
{
    if (llm_cu_backend_sync(e->gpu, e->err) != 0) {
        printf("# %s\n", e->err);
        return 0;
    }
    return 1;
}


/* ---- the ops one by one ------------------------------------------------------ */

static void
test_embed_norm_silu(env *e, const char *name)
{
    llm_cu_state  *g = e->gs, *r = e->rs;
    int            n = 37, i, H = g->H, I = g->I;
    int32_t        tok[37], rows[5] = { 3, 0, 36, 17, 9 }, *dtok;
    float         *x, *o, *gu;
    size_t         nan_n;
    double         d;

    cudaMalloc((void **) &dtok, sizeof(tok) + sizeof(rows));
    for (i = 0; i < n; i++) {
        tok[i] = (int32_t) irand((uint32_t) g->V);
    }
    tok[1] = g->V - 1;
    cudaMemcpy(dtok, tok, sizeof(tok), cudaMemcpyHostToDevice);
    cudaMemcpy(dtok + n, rows, sizeof(rows), cudaMemcpyHostToDevice);

    /* embedding: exact */
    cudaMemset(g->x, 0xff, sizeof(float) * n * H);
    llm_cu_gpu_ops.embed(e->gpu, g, dtok, n);
    llm_cu_ref_ops.embed(e->ref, r, tok, n);
    sync_gpu(e);
    x = get_f32(g->x, (size_t) n * H);
    d = rel_diff(x, r->x, (size_t) n * H, &nan_n);
    check(d == 0.0, "%s: embedding (%d rows) exact (rel %.2g, NaN %zu)",
          name, n, d, nan_n);
    free(x);

    /* rmsnorm with the residual add, all rows then a gathered subset */
    put_f32_random(g->x, r->x, (size_t) n * H, 3.0f);
    put_f32_random(g->big, r->big, (size_t) n * H, 1.0f);
    cudaMemset(g->xn, 0xff, 2 * (size_t) n * H);
    llm_cu_gpu_ops.rmsnorm(e->gpu, g, g->x, g->big, g->layers[0].attn_norm,
                           NULL, n, g->xn);
    llm_cu_ref_ops.rmsnorm(e->ref, r, r->x, r->big, r->layers[0].attn_norm,
                           NULL, n, r->xn);
    sync_gpu(e);
    x = get_f32(g->x, (size_t) n * H);
    o = get_t(e, g->xn, (size_t) n * H);
    d = rel_diff(x, r->x, (size_t) n * H, &nan_n);
    check(d < 1e-6, "%s: residual add into x (rel %.2g)", name, d);
    d = rel_diff(o, r->xn, (size_t) n * H, &nan_n);
    check(d < 8e-3 && nan_n == 0, "%s: rmsnorm, %d rows (rel %.2g, NaN %zu)",
          name, n, d, nan_n);
    free(x);
    free(o);

    cudaMemset(g->xl, 0xff, 2 * (size_t) 5 * H);
    llm_cu_gpu_ops.rmsnorm(e->gpu, g, g->x, g->big, g->final_norm, dtok + n,
                           5, g->xl);
    llm_cu_ref_ops.rmsnorm(e->ref, r, r->x, r->big, r->final_norm, rows, 5,
                           r->xl);
    sync_gpu(e);
    x = get_f32(g->x, (size_t) n * H);
    o = get_t(e, g->xl, (size_t) 5 * H);
    d = rel_diff(x, r->x, (size_t) n * H, &nan_n);
    check(d < 1e-6, "%s: gathered residual add touches only its rows (rel "
          "%.2g)", name, d);
    d = rel_diff(o, r->xl, (size_t) 5 * H, &nan_n);
    check(d < 8e-3 && nan_n == 0, "%s: final norm of gathered rows (rel %.2g, "
          "NaN %zu)", name, d, nan_n);
    free(x);
    free(o);

    /* SiLU * up */
    gu = malloc(sizeof(float) * n * 2 * I);
    put_f32_random(g->big, r->big, (size_t) n * 2 * I, 6.0f);
    cudaMemset(g->act, 0xff, 2 * (size_t) n * I);
    llm_cu_gpu_ops.silu_mul(e->gpu, g, g->big, n, g->act);
    llm_cu_ref_ops.silu_mul(e->ref, r, r->big, n, r->act);
    sync_gpu(e);
    o = get_t(e, g->act, (size_t) n * I);
    d = rel_diff(o, r->act, (size_t) n * I, &nan_n);
    check(d < 8e-3 && nan_n == 0, "%s: silu * up (rel %.2g, NaN %zu)", name,
          d, nan_n);
    free(o);
    free(gu);

    cudaFree(dtok);
}


static void
test_gemm(env *e, const char *name)
{
    llm_cu_state  *g = e->gs, *r = e->rs;
    static const int  ns[] = { 1, 3, 4, 8, 37 };
    size_t         k, nan_n;
    int            gm, i, n;
    float         *o;
    double         d;
    const struct { const char *what; int in_k, out_n; int which; } mm[] = {
        { "qkv", g->H, g->qkvd, 0 },
        { "down", g->I, g->H, 1 },
        { "lm_head", g->H, g->V, 2 },
    };

    for (i = 0; i < 3; i++) {
        const void  *wg = mm[i].which == 0 ? g->layers[0].wqkv
                          : mm[i].which == 1 ? g->layers[0].wdown
                          : g->lm_head;
        const void  *wr = mm[i].which == 0 ? r->layers[0].wqkv
                          : mm[i].which == 1 ? r->layers[0].wdown
                          : r->lm_head;

        for (k = 0; k < sizeof(ns) / sizeof(ns[0]); k++) {
            n = ns[k];
            if (mm[i].which == 2 && n > g->cap_logits) {
                continue;
            }
            put_t_random(e, g->act, r->act, (size_t) n * mm[i].in_k, 2.0f);
            llm_cu_ref_ops.gemm(e->ref, r, r->act, n, mm[i].in_k, wr,
                                mm[i].out_n, r->logits);
            for (gm = 0; gm <= 1; gm++) {
                llm_cu_backend_tune(e->gpu, gm ? 8 : 0, 1);
                cudaMemset(g->logits, 0xff,
                           sizeof(float) * n * (size_t) mm[i].out_n);
                llm_cu_gpu_ops.gemm(e->gpu, g, g->act, n, mm[i].in_k, wg,
                                    mm[i].out_n, g->logits);
                if (!sync_gpu(e)) {
                    printf("# %s\n", llm_cu_backend_error(e->gpu));
                }
                o = get_f32(g->logits, (size_t) n * mm[i].out_n);
                d = rel_diff(o, r->logits, (size_t) n * mm[i].out_n, &nan_n);
                check(d < 1e-4 && nan_n == 0, "%s: gemm %s %d x %d x %d via "
                      "%s (rel %.2g, NaN %zu)", name, mm[i].what, n,
                      mm[i].in_k, mm[i].out_n,
                      gm && n <= 8 && mm[i].in_k % 8 == 0 ? "gemv"
                                                          : "cuBLAS",
                      d, nan_n);
                free(o);
            }
        }
    }
    llm_cu_backend_tune(e->gpu, LLM_CU_DEFAULT_GEMV_MAX, 1);
}


/* The attention batch: decode rows at several context lengths, a short run
 * (split kernel), prefill chunks of 130 / 64 / 17 rows after contexts of
 * 200 / 0 / 40.  Tables are disjoint random blocks below 512. */
typedef struct {
    llm_batch_buf   bb;
    int32_t         tables[7][64];
} att_batch;


static void
att_batch_make(att_batch *a)
{
#if TK_SMALL
    static const int  n[7] = { 1, 1, 1, 3, 70, 32, 17 };
    static const int  p0[7] = { 300, 5, 16, 100, 60, 0, 40 };
#else
    static const int  n[7] = { 1, 1, 1, 3, 130, 64, 17 };
    static const int  p0[7] = { 1000, 5, 16, 300, 200, 0, 40 };
#endif
    int32_t           perm[448], toks[256] = { 0 }, t;
    int               s, i, j;

    for (i = 0; i < 448; i++) {
        perm[i] = i;
    }
    for (i = 447; i > 0; i--) {
        j = (int) irand((uint32_t) i + 1);
        t = perm[i];
        perm[i] = perm[j];
        perm[j] = t;
    }
    memset(&a->bb, 0, sizeof(a->bb));
    for (s = 0; s < 7; s++) {
        memcpy(a->tables[s], perm + 64 * s, sizeof(int32_t) * 64);
        llm_batch_add(&a->bb, toks, n[s], p0[s], a->tables[s], 64,
                      LLM_LOGITS_LAST);
    }
}


static int
plan_md(env *e, const llm_batch *b, int prefill_min_q, llm_cu_step *st,
    int32_t **host, int32_t **dev)
{
    llm_cu_plan_cfg  pc;
    llm_cu_planner   p;
    llm_cu_info      info;
    int              gs = e->gs->nh / e->gs->nkv;
    int              hc = llm_cu_head_chunk(e->gs->hd);

    llm_cu_backend_info(e->gpu, &info);
    memset(&pc, 0, sizeof(pc));
    pc.cap_tok = e->gs->cap_tok;
    pc.cap_logits = e->gs->cap_logits;
    pc.n_sm = info.n_sm;
    pc.prefill_min_q = prefill_min_q;
    pc.graph_max = 0;
    pc.num_blocks = 512;
    pc.pad_block = 512;
    pc.window = e->m->config.sliding_window;
    pc.vocab = e->gs->V;
    pc.nkv = e->gs->nkv;
    pc.n_chunks = (gs + hc - 1) / hc;
    llm_cu_planner_init(&p, &pc);
    if (llm_cu_plan_begin(&p, b, e->err) != 0) {
        printf("# plan: %s\n", e->err);
        llm_cu_planner_free(&p);
        return -1;
    }
    llm_cu_plan_step(&p, b, 0, st, NULL, 0);
    *host = malloc(sizeof(int32_t) * st->n_md);
    llm_cu_plan_step(&p, b, 0, st, *host, st->n_md);
    cudaMalloc((void **) dev, sizeof(int32_t) * st->n_md);
    cudaMemcpy(*dev, *host, sizeof(int32_t) * st->n_md,
               cudaMemcpyHostToDevice);
    llm_cu_planner_free(&p);
    return st->n_tok == b->n_tokens ? 0 : -1;
}


static void
test_qkv_and_attention(env *e, const char *name)
{
    llm_cu_state     *g = e->gs, *r = e->rs;
    att_batch         a;
    llm_cu_step       st;
    llm_cu_md         mdg, mdr;
    int32_t          *mh, *md;
    int               n, i, plan, hd = g->hd, qd = g->qd;
    size_t            kv_elems, nan_n, nan_in;
    float            *o;
    double            d;
    static const int  min_q[3] = { LLM_CU_DEFAULT_PREFILL_MIN_Q, 1 << 30, 1 };
    static const char *plan_name[3] = { "as planned", "all split-K",
                                        "all prefill" };

    att_batch_make(&a);
    n = a.bb.batch.n_tokens;
    if (plan_md(e, &a.bb.batch, min_q[0], &st, &mh, &md) != 0) {
        check(0, "%s: planning the attention batch", name);
        return;
    }
    llm_cu_md_bind(&mdg, &st, md);
    llm_cu_md_bind(&mdr, &st, mh);

    /* q/k/v epilogue: q rows and the K/V written at the slots */
    put_f32_random(g->big, r->big, (size_t) n * g->qkvd, 2.0f);
    cudaMemset(g->q, 0xff, 2 * (size_t) n * qd);
    llm_cu_gpu_ops.qkv_post(e->gpu, g, 0, g->big, &mdg, n,
                            llm_cu_kv_layer(g, 0, 0), llm_cu_kv_layer(g, 0, 1));
    llm_cu_ref_ops.qkv_post(e->ref, r, 0, r->big, &mdr, n,
                            llm_cu_kv_layer(r, 0, 0), llm_cu_kv_layer(r, 0, 1));
    sync_gpu(e);
    o = get_t(e, g->q, (size_t) n * qd);
    d = rel_diff(o, r->q, (size_t) n * qd, &nan_n);
    check(d < 8e-3 && nan_n == 0, "%s: q/k/v epilogue, q (rel %.2g, NaN %zu)",
          name, d, nan_n);
    free(o);
    {
        /* K and V at each row's slot */
        size_t  per = (size_t) g->nkv * 16 * hd, nan_kv = 0;
        double  worst = 0.0;
        int     v;

        for (v = 0; v < 2; v++) {
            float  *kg = get_t(e, llm_cu_kv_layer(g, 0, v), 512 * per);
            float  *kr = llm_cu_kv_layer(r, 0, v);

            for (i = 0; i < n; i++) {
                int     s = a.bb.batch.slots[i], h, j;
                size_t  off;

                for (h = 0; h < g->nkv; h++) {
                    off = (((size_t) (s / 16) * g->nkv + h) * 16 + s % 16)
                          * hd;
                    d = rel_diff(kg + off, kr + off, hd, &nan_n);
                    for (j = 0; j < hd; j++) {
                        nan_kv += isnan(kg[off + j]);
                    }
                    worst = d > worst ? d : worst;
                }
            }
            free(kg);
        }
        check(worst < 8e-3 && nan_kv == 0, "%s: q/k/v epilogue, K/V in the "
              "cache slots (rel %.2g)", name, worst);
    }

    /* attention: random q and a random cache over the 448 blocks used */
    kv_elems = (size_t) 512 * g->nkv * 16 * hd;
    put_t_random(e, llm_cu_kv_layer(g, 0, 0), llm_cu_kv_layer(r, 0, 0),
                 kv_elems, 1.5f);
    put_t_random(e, llm_cu_kv_layer(g, 0, 1), llm_cu_kv_layer(r, 0, 1),
                 kv_elems, 1.0f);
    put_t_random(e, g->q, r->q, (size_t) n * qd, 1.5f);
    for (plan = 0; plan < 3; plan++) {
        if (plan > 0) {
            free(mh);
            cudaFree(md);
            if (plan_md(e, &a.bb.batch, min_q[plan], &st, &mh, &md) != 0) {
                check(0, "%s: planning %s", name, plan_name[plan]);
                return;
            }
            llm_cu_md_bind(&mdg, &st, md);
            llm_cu_md_bind(&mdr, &st, mh);
        }
        cudaMemset(g->att, 0xff, 2 * (size_t) n * qd);
        if (st.n_split
            && llm_cu_gpu_ops.attn_split(e->gpu, g, &mdg, st.n_split,
                                         st.max_splits,
                                         llm_cu_kv_layer(g, 0, 0),
                                         llm_cu_kv_layer(g, 0, 1)) != 0)
        {
            printf("# %s\n", llm_cu_backend_error(e->gpu));
        }
        if (st.n_items
            && llm_cu_gpu_ops.attn_prefill(e->gpu, g, &mdg, st.n_items,
                                           llm_cu_kv_layer(g, 0, 0),
                                           llm_cu_kv_layer(g, 0, 1)) != 0)
        {
            printf("# %s\n", llm_cu_backend_error(e->gpu));
        }
        for (i = 0; i < n * qd; i++) {
            ((float *) r->att)[i] = NAN;
        }
        if (st.n_split) {
            llm_cu_ref_ops.attn_split(e->ref, r, &mdr, st.n_split,
                                      st.max_splits, llm_cu_kv_layer(r, 0, 0),
                                      llm_cu_kv_layer(r, 0, 1));
        }
        if (st.n_items) {
            llm_cu_ref_ops.attn_prefill(e->ref, r, &mdr, st.n_items,
                                        llm_cu_kv_layer(r, 0, 0),
                                        llm_cu_kv_layer(r, 0, 1));
        }
        sync_gpu(e);
        o = get_t(e, g->att, (size_t) n * qd);
        d = rel_diff(o, r->att, (size_t) n * qd, &nan_n);
        nan_in = 0;
        for (i = 0; i < n * qd; i++) {
            nan_in += isnan(o[i]);
        }
        check(d < 1.5e-2 && nan_in == 0, "%s: attention %s (%d split rows, "
              "max_splits %d, %d prefill tiles; rel %.2g, unwritten %zu)",
              name, plan_name[plan], st.n_split, st.max_splits, st.n_items, d,
              nan_in);
        free(o);
    }
    free(mh);
    cudaFree(md);
    llm_batch_buf_free(&a.bb);
}


/* ---- the whole forward pass -------------------------------------------------- */

/* Three sequences: prefills of 100 (every logit), 40 and a 300-row chunk
 * without logits; then a decode, a 64-row chunk and the rest of the long
 * prompt; then decode steps (graph-sized), a 5-row step and one more
 * decode (smaller under the emulator). */
#if TK_SMALL
#define TK_STEPS  10
#define TK_N0     40, 12, 70
#define TK_N1     1, 20, 30
#else
#define TK_STEPS  32
#define TK_N0     100, 40, 300
#define TK_N1     1, 64, 140
#endif

/*  gpu, ref and cpu see the same batches; tokens follow the CPU's
 * greedy choices. */
static void
scenario(env *e, const char *name, const char *variant)
{
    int32_t          tables[3][128], next[3], ids[512];
    int              len[3] = { 0, 0, 0 }, s, i, step, best, V = e->gs->V;
    llm_batch_buf    bb = { 0 };
    int32_t          toks[512];
    float           *lc = malloc(sizeof(float) * 512 * V);
    float           *lg = malloc(sizeof(float) * 512 * V);
    float           *lr = malloc(sizeof(float) * 512 * V);
    logits_cmp       cg = { 0 }, cr = { 0 };
    int              lp_rows = 0, lp_diff = 0;
    int              ok = 1;
    llm_sampler      smp;
    llm_sample_row   srow[512];
    llm_token_logprob lps[512], hl;
    llm_sampling_params sp;
    llm_sample_ctx   sc;

    float           *h = malloc(sizeof(float) * V);

    llm_sampler_init(&smp, V);
    memset(&sp, 0, sizeof(sp));
    sp.temperature = 0.0;               /* greedy, with logprobs */
    sp.top_p = 1.0;
    sp.repetition_penalty = 1.0;
    memset(&sc, 0, sizeof(sc));
    sc.p = &sp;

    for (s = 0; s < 3; s++) {
        for (i = 0; i < 128; i++) {
            tables[s][i] = (int32_t) (s + 3 * i);      /* interleaved */
        }
    }
    for (step = 0; step < TK_STEPS && ok; step++) {
        static const int  n0[3] = { TK_N0 }, n1[3] = { TK_N1 };
        static const int  n30[3] = { 1, 5, 1 }, nd[3] = { 1, 1, 1 };
        const int        *n = step == 0 ? n0 : step == 1 ? n1
                              : step == TK_STEPS - 2 ? n30 : nd;
        llm_logits_mode   mode[3];

        llm_batch_reset(&bb);
        for (s = 0; s < 3; s++) {
            mode[s] = step == 0 && s == 0 ? LLM_LOGITS_ALL
                      : step == 0 && s == 2 ? LLM_LOGITS_NONE
                      : LLM_LOGITS_LAST;
            for (i = 0; i < n[s]; i++) {
                toks[i] = step > 1 && i == 0 ? next[s]
                          : (int32_t) irand((uint32_t) V);
            }
            llm_batch_add(&bb, toks, n[s], len[s], tables[s], 128, mode[s]);
            len[s] += n[s];
        }
        if (e->cpu->forward(e->cpu, &bb.batch, lc, e->err) != 0
            || e->ref->forward(e->ref, &bb.batch, lr, e->err) != 0
            || e->gpu->forward(e->gpu, &bb.batch, lg, e->err) != 0)
        {
            printf("# step %d: %s\n", step, e->err);
            ok = 0;
            break;
        }
        logits_cmp_rows(&cg, lc, lg, bb.batch.n_logits, V);
        logits_cmp_rows(&cr, lr, lg, bb.batch.n_logits, V);
        if (step >= 2 && step % 4 == 0) {
            /* the ids path on the same step (an identical K/V rewrite):
             * all greedy (spec NULL), or every eighth step greedy rows with
             * logprobs N = 20, 0, 3 (the backend's staging, scratch rows
             * and records in logits order) */
            llm_sample_spec  spec = { srow, NULL, 0 };
            int              with = step % 8 == 0;

            for (i = 0; with && i < bb.batch.n_logits; i++) {
                memset(&srow[i], 0, sizeof(srow[i]));
                srow[i].greedy = 1;
                srow[i].inv_t = 1.0f;
                srow[i].top_p = 1.0;
                srow[i].logprobs = i % 3 == 0 ? 20 : i % 3 == 1 ? 0 : 3;
                srow[i].lp_slot = -1;
            }
            if (e->gpu->forward_sample(e->gpu, &bb.batch, with ? &spec : NULL,
                                       ids, lps, e->err) != 0)
            {
                printf("# greedy: %s\n", e->err);
                ok = 0;
                break;
            }
            for (i = 0; i < bb.batch.n_logits; i++) {
                logits_top2_gap(lg + (size_t) i * V, V, &best);
                cg.ids_diff += ids[i] != best;
                if (with && srow[i].logprobs >= 0) {
                    int  k, bad;

                    memcpy(h, lg + (size_t) i * V, sizeof(float) * V);
                    sp.logprobs = srow[i].logprobs;
                    llm_sample(&smp, h, &sc, &hl);
                    bad = lps[i].id != ids[i] || lps[i].n_top != hl.n_top
                          || lps[i].rank != hl.rank
                          || fabsf(lps[i].logprob - hl.logprob) > 1e-5f;
                    for (k = 0; !bad && k < hl.n_top; k++) {
                        bad = lps[i].top_ids[k] != hl.top_ids[k]
                              || fabsf(lps[i].top_logprobs[k]
                                       - hl.top_logprobs[k]) > 1e-5f;
                    }
                    lp_rows++;
                    lp_diff += bad;
                }
            }
        }
        for (s = 0; s < 3; s++) {
            int  row = bb.batch.seqs[s].token_start + n[s] - 1;

            for (i = 0; i < bb.batch.n_logits; i++) {
                if (bb.batch.logits_rows[i] == row) {
                    logits_top2_gap(lc + (size_t) i * V, V, &best);
                    next[s] = best;
                }
            }
        }
    }
    check(ok && cr.max_rel < 2e-2 && cr.unexplained == 0,
          "%s: forward %s = reference (%d rows, rel %.2g, argmax diffs %d, "
          "all near-ties)", name, variant, cr.rows, cr.max_rel,
          cr.argmax_diff);
    check(ok && cg.max_rel < 3e-2 && cg.unexplained == 0 && cg.ids_diff == 0
          && lp_rows > 0 && lp_diff == 0,
          "%s: forward %s ~ CPU backend (%d rows, rel %.2g, argmax diffs %d, "
          "all near-ties; greedy ids diffs %d; logprobs of %d rows vs the "
          "host's on the same logits: %d differ)", name, variant, cg.rows,
          cg.max_rel, cg.argmax_diff, cg.ids_diff, lp_rows, lp_diff);
    llm_sampler_free(&smp);
    free(h);
    llm_batch_buf_free(&bb);
    free(lc);
    free(lg);
    free(lr);
}


/* ---- sampling on the device ------------------------------------------------ */

/* The kernel is shape-independent: it runs once, on the first model's
 * backend (its stream), with its own vocabulary size. */
#if TK_SMALL
#define TS_V     1000
#define TS_GRID  512
#else
#define TS_V     32000
#define TS_GRID  2048
#endif

typedef struct {
    llm_sampling_params  p;
    int32_t              prompt[48], output[32], eos[2], stop[1];
    int32_t              bias_id[3];
    float                bias_v[3];
    int                  n_prompt, n_output;
    llm_rng              rng;
} ts_req;


/* A request: plain (temperature t), or with every logit modification:
 * repetition (rp), frequency and presence penalties over a prompt and an
 * output with repeats, a logit_bias with a repeated id, and min_tokens
 * masking EOS ids 1, 2 and stop id 3. */
static void
ts_req_init(ts_req *q, double t, int mods, uint64_t seed)
{
    int  i;

    memset(q, 0, sizeof(*q));
    q->p.temperature = t;
    q->p.top_p = 1.0;
    q->p.repetition_penalty = 1.0;
    q->p.logprobs = -1;
    q->n_prompt = 48;
    q->n_output = 32;
    for (i = 0; i < 48; i++) {
        q->prompt[i] = (int32_t) irand(60);
    }
    for (i = 0; i < 32; i++) {
        q->output[i] = (int32_t) irand(40);
    }
    q->eos[0] = 1;
    q->eos[1] = 2;
    q->stop[0] = 3;
    if (mods) {
        q->p.repetition_penalty = seed % 2 ? 1.3 : 0.8;
        q->p.frequency_penalty = 0.4;
        q->p.presence_penalty = 0.25;
        q->bias_id[0] = 5;
        q->bias_v[0] = 2.0f;
        q->bias_id[1] = 9;
        q->bias_v[1] = -100.0f;
        q->bias_id[2] = 5;                  /* again: added in order */
        q->bias_v[2] = 1.5f;
        q->p.logit_bias_ids = q->bias_id;
        q->p.logit_bias_values = q->bias_v;
        q->p.n_logit_bias = 3;
        q->p.min_tokens = 50;               /* > 32 outputs: masks apply */
        q->p.stop_token_ids = q->stop;
        q->p.n_stop_token_ids = 1;
    }
    llm_rng_seed(&q->rng, seed);
}


static void
ts_ctx(ts_req *q, llm_sample_ctx *c)
{
    *c = (llm_sample_ctx) { 0 };        /* no bad words, no grammar */
    c->p = &q->p;
    c->prompt = q->prompt;
    c->n_prompt = q->n_prompt;
    c->output = q->output;
    c->n_output = q->n_output;
    c->eos_ids = q->eos;
    c->n_eos = 2;
    c->rng = &q->rng;
}


/* The kernel on n rows of V logits (sr NULL: all greedy); ids out, the
 * rows as the kernel left them in out (when not NULL), and the logprob
 * records of rows that ask in lp (scratch rows assigned here, as the
 * backend does). */
static int
ts_run(env *e, const float *lg, int n, int V, const llm_sample_rows *sr,
    int32_t *ids, float *out, llm_token_logprob *lp)
{
    float              *dl = NULL, *scratch = NULL;
    char               *dsr = NULL;
    int32_t            *dids = NULL;
    llm_token_logprob  *dlp = NULL;
    size_t              rb = sr ? sizeof(llm_sample_row) * sr->n_rows : 0;
    size_t              mb = sr ? sizeof(llm_sample_mod) * sr->mods.n : 0;
    int                 ok, i, n_lp = 0;

    for (i = 0; sr && i < sr->n_rows; i++) {
        sr->rows[i].lp_slot = sr->rows[i].logprobs >= 0 ? n_lp++ : -1;
    }
    ok = cu_ok(cudaMalloc((void **) &dl, sizeof(float) * n * V), "malloc")
         && cu_ok(cudaMalloc((void **) &dsr, rb + mb + 8), "malloc")
         && cu_ok(cudaMalloc((void **) &dids, sizeof(int32_t) * n), "malloc")
         && (n_lp == 0
             || (cu_ok(cudaMalloc((void **) &scratch,
                                  sizeof(float) * n_lp * V), "malloc")
                 && cu_ok(cudaMalloc((void **) &dlp,
                                     sizeof(llm_token_logprob) * n),
                          "malloc")))
         && cu_ok(cudaMemcpy(dl, lg, sizeof(float) * n * V,
                             cudaMemcpyHostToDevice), "copy");
    if (ok && sr) {
        ok = cu_ok(cudaMemcpy(dsr, sr->rows, rb, cudaMemcpyHostToDevice),
                   "copy")
             && (mb == 0 || cu_ok(cudaMemcpy(dsr + rb, sr->mods.mods, mb,
                                             cudaMemcpyHostToDevice), "copy"));
    }
    if (ok && llm_cuk_sample((cudaStream_t) llm_cu_backend_stream(e->gpu),
                             dl, n, V,
                             sr ? (const llm_sample_row *) dsr : NULL,
                             sr ? (const llm_sample_mod *) (dsr + rb) : NULL,
                             dids, scratch, dlp, e->err) != 0)
    {
        printf("# sample: %s\n", e->err);
        ok = 0;
    }
    ok = ok && sync_gpu(e)
         && cu_ok(cudaMemcpy(ids, dids, sizeof(int32_t) * n,
                             cudaMemcpyDeviceToHost), "copy")
         && (out == NULL || cu_ok(cudaMemcpy(out, dl, sizeof(float) * n * V,
                                             cudaMemcpyDeviceToHost), "copy"))
         && (lp == NULL || n_lp == 0
             || cu_ok(cudaMemcpy(lp, dlp, sizeof(llm_token_logprob) * n,
                                 cudaMemcpyDeviceToHost), "copy"));
    cudaFree(dl);
    cudaFree(dsr);
    cudaFree(dids);
    cudaFree(scratch);
    cudaFree(dlp);
    return ok;
}


/* A grid of u = (i + 0.5) / N over one row: every token's count must be
 * its share of the kept set's mass within 1 (no randomness: N points
 * spread evenly over [0, 1) put floor or ceil of N q in an interval of
 * length q), and only the expected tokens may be drawn.  The expected
 * set: the host sampler's candidates (exp_ids NULL), else exp_ids with
 * probabilities exp_p. */
static void
ts_grid(env *e, llm_sampler *s, ts_req *q, const float *row, int V,
    const int32_t *exp_ids, const double *exp_p, int n_exp, const char *what)
{
    llm_sample_rows  sr = { 0 };
    llm_sample_ctx   c;
    int              N = TS_GRID, i, k, bad = 0, drawn = 0;
    float           *lg = malloc(sizeof(float) * (size_t) N * V);
    float           *h = malloc(sizeof(float) * V);
    int32_t         *ids = malloc(sizeof(int32_t) * N);
    int             *cnt = calloc(V, sizeof(int));
    double          *want = calloc(V, sizeof(double)), total = 0.0, dev = 0.0;

    ts_ctx(q, &c);
    for (i = 0; i < N; i++) {
        llm_sample_row_make(s, &c, &sr);
        sr.rows[i].u = (i + 0.5) / N;
        memcpy(lg + (size_t) i * V, row, sizeof(float) * V);
    }
    if (exp_ids == NULL) {
        memcpy(h, row, sizeof(float) * V);
        n_exp = llm_sample_candidates(s, h, &c, &total);
        for (k = 0; k < n_exp; k++) {
            want[s->idx[k]] = s->probs[s->idx[k]] / total;
        }
    } else {
        for (k = 0; k < n_exp; k++) {
            total += exp_p[k];
        }
        for (k = 0; k < n_exp; k++) {
            want[exp_ids[k]] = exp_p[k] / total;
        }
    }
    if (!ts_run(e, lg, N, V, &sr, ids, NULL, NULL)) {
        check(0, "sampling: %s: the kernel ran", what);
        goto done;
    }
    for (i = 0; i < N; i++) {
        cnt[ids[i]]++;
    }
    for (i = 0; i < V; i++) {
        double  d = fabs(cnt[i] - N * want[i]);

        drawn += cnt[i] > 0;
        if ((want[i] == 0.0 && cnt[i] > 0) || d > 1.0 + 1e-6) {
            if (bad++ < 3) {
                printf("# %s: token %d drawn %d times, expected %.2f\n",
                       what, i, cnt[i], N * want[i]);
            }
        }
        dev = d > dev ? d : dev;
    }
    /* a token with N q >= 1 is drawn, so the kept sets agree down to
     * shares of 1/N */
    check(bad == 0 && drawn > 1, "sampling: %s: %d u values on a grid: "
          "each of the %d expected tokens drawn N q +- 1 times, no other "
          "(%d drawn, max off %.2f)", what, N, n_exp, drawn, dev);
done:
    llm_sample_rows_free(&sr);
    free(lg);
    free(h);
    free(ids);
    free(cnt);
    free(want);
}


static void
test_sampling(env *e)
{
    llm_sampler       s;
    llm_sample_rows   sr = { 0 };
    llm_sample_ctx    c;
    ts_req            q[8], one, *rq;
    int               V = TS_V, i, j, n, same, rng_same;
    int32_t           ids[256], hid;
    float            *lg = malloc(sizeof(float) * 256 * V);
    float            *h = malloc(sizeof(float) * 256 * V);
    float            *out = malloc(sizeof(float) * 256 * V);
    float            *row = malloc(sizeof(float) * V);

    llm_sampler_init(&s, V);

    /* greedy, all rows (no spec): the first maximum, as llm_argmax */
    for (i = 0; i < 5 * V; i++) {
        lg[i] = urand() * 10.0f;
    }
    lg[0 * V + 7] = lg[0 * V + V - 1] = 50.0f;          /* tie: 7 wins */
    lg[1 * V + V - 1] = 60.0f;                          /* last */
    lg[2 * V + 0] = 70.0f;                              /* first */
    for (j = 0; j < V; j++) {
        lg[3 * V + j] = -1.0f;                          /* all equal: 0 */
        lg[4 * V + j] = -INFINITY;                      /* nothing finite */
    }
    ts_req_init(&one, 0.0, 0, 1);
    ts_ctx(&one, &c);
    same = ts_run(e, lg, 5, V, NULL, ids, NULL, NULL);
    for (i = 0; i < 5 && same; i++) {
        memcpy(h, lg + (size_t) i * V, sizeof(float) * V);
        same = ids[i] == llm_sample(&s, h, &c, NULL);
    }
    check(same && ids[0] == 7 && ids[1] == V - 1 && ids[3] == 0
          && ids[4] == 0, "sampling: greedy = the host's argmax, first of "
          "equal maxima (%d %d %d %d %d)", ids[0], ids[1], ids[2], ids[3],
          ids[4]);

    /* greedy with every modification: the same ids, and the logits after
     * penalties, bias and masks bit for bit */
    n = 8;
    llm_sample_rows_reset(&sr);
    for (i = 0; i < n; i++) {
        ts_req_init(&q[i], 0.0, 1, (uint64_t) i + 1);
        for (j = 0; j < V; j++) {
            lg[(size_t) i * V + j] = urand() * 3.0f;
        }
        lg[(size_t) i * V + 1] = 20.0f;                 /* EOS: masked */
        lg[(size_t) i * V + 9] = 19.0f;                 /* biased away */
        ts_ctx(&q[i], &c);
        llm_sample_row_make(&s, &c, &sr);
    }
    same = ts_run(e, lg, n, V, &sr, ids, out, NULL);
    j = 0;
    for (i = 0; i < n && same; i++) {
        float  *hr = h + (size_t) i * V;

        memcpy(hr, lg + (size_t) i * V, sizeof(float) * V);
        ts_ctx(&q[i], &c);
        hid = llm_sample(&s, hr, &c, NULL);
        same = hid == ids[i] && hid != 1 && hid != 9;
        j += memcmp(hr, out + (size_t) i * V, sizeof(float) * V) == 0;
    }
    check(same && j == n, "sampling: penalties, logit_bias, min_tokens "
          "masks: %d greedy rows, ids and modified logits identical to the "
          "host's (%d of %d rows, %d modifications)", n, j, n, sr.mods.n);

    /* without top-k/top-p both samplers walk the candidates in vocabulary
     * order: the same u gives the same token, and the request's generator
     * advances the same way */
    n = 256;
    rq = malloc(sizeof(ts_req) * 2 * n);
    llm_sample_rows_reset(&sr);
    for (i = 0; i < n; i++) {
        static const double  temps[4] = { 0.5, 0.8, 1.0, 1.7 };
        static const double  minp[3] = { 0.0, 0.02, 0.1 };

        ts_req_init(&rq[i], temps[i % 4], i % 2, (uint64_t) i + 100);
        rq[i].p.min_p = minp[i % 3];
        rq[n + i] = rq[i];              /* the host's copy, same generator */
        for (j = 0; j < V; j++) {
            lg[(size_t) i * V + j] = urand() * 4.0f;
        }
        ts_ctx(&rq[i], &c);
        llm_sample_row_make(&s, &c, &sr);
    }
    same = ts_run(e, lg, n, V, &sr, ids, NULL, NULL);
    j = 0;
    rng_same = 0;
    for (i = 0; i < n && same; i++) {
        memcpy(h, lg + (size_t) i * V, sizeof(float) * V);
        ts_ctx(&rq[n + i], &c);
        j += llm_sample(&s, h, &c, NULL) == ids[i];
        rng_same += memcmp(&rq[i].rng, &rq[n + i].rng, sizeof(llm_rng)) == 0;
    }
    free(rq);
    check(same && j == n && rng_same == n, "sampling: no top-k/top-p "
          "(temperature, min-p, penalties): the device's token = the "
          "host's for the same u in %d of %d rows; generators advanced "
          "alike in %d", j, n, rng_same);

    /* logprobs of the raw logits (llm_fill_logprobs): greedy and sampled
     * rows with modifications, N = 0, 1, 5, 20, between rows without;
     * the rows that ask keep their raw logits (sampled in scratch) */
    {
        llm_token_logprob  *lpd = malloc(sizeof(llm_token_logprob) * 16);
        llm_token_logprob   hl;
        int                 good = 0, raw_kept = 0, n_lp = 0, k, ok;
        float               worst = 0.0f, d;

        n = 16;
        rq = malloc(sizeof(ts_req) * 2 * n);
        llm_sample_rows_reset(&sr);
        for (i = 0; i < n; i++) {
            static const int  nlp[4] = { 0, 1, 5, 20 };

            ts_req_init(&rq[i], i % 4 == 3 ? 0.0 : 0.8, i % 2,
                        (uint64_t) i + 500);
            rq[i].p.logprobs = i % 3 == 2 ? -1 : nlp[i % 4];
            rq[n + i] = rq[i];
            for (j = 0; j < V; j++) {
                lg[(size_t) i * V + j] = urand() * 5.0f;
            }
            ts_ctx(&rq[i], &c);
            llm_sample_row_make(&s, &c, &sr);
        }
        same = ts_run(e, lg, n, V, &sr, ids, out, lpd);
        for (i = 0; i < n && same; i++) {
            int  want = rq[i].p.logprobs >= 0;

            memcpy(h, lg + (size_t) i * V, sizeof(float) * V);
            ts_ctx(&rq[n + i], &c);
            hid = llm_sample(&s, h, &c, want ? &hl : NULL);
            ok = hid == ids[i];
            if (want) {
                n_lp++;
                raw_kept += memcmp(out + (size_t) i * V, lg + (size_t) i * V,
                                   sizeof(float) * V) == 0;
                ok = ok && lpd[i].id == hid && lpd[i].n_top == hl.n_top
                     && lpd[i].rank == hl.rank;
                d = fabsf(lpd[i].logprob - hl.logprob);
                worst = d > worst ? d : worst;
                ok = ok && d <= 1e-5f;
                for (k = 0; ok && k < hl.n_top; k++) {
                    d = fabsf(lpd[i].top_logprobs[k] - hl.top_logprobs[k]);
                    worst = d > worst ? d : worst;
                    ok = lpd[i].top_ids[k] == hl.top_ids[k] && d <= 1e-5f;
                }
            }
            good += ok;
        }
        free(rq);
        free(lpd);
        check(same && good == n && raw_kept == n_lp && n_lp > 8,
              "sampling: logprobs from the raw logits: %d of %d rows (%d "
              "with logprobs, N up to 20) give the host's token, logprob and "
              "top-N ids (max |diff| %.2g); raw rows kept %d", good, n, n_lp,
              worst, raw_kept);
    }

    /* kept sets and shares: a grid of u over one row per case */
    for (j = 0; j < V; j++) {
        row[j] = urand() * 3.0f;
    }
    for (j = 0; j < 40; j++) {
        row[irand((uint32_t) V)] = 4.0f + urand();      /* a head */
    }
    ts_req_init(&one, 1.0, 0, 7);
    one.p.top_k = 20;
    ts_grid(e, &s, &one, row, V, NULL, NULL, 0, "top-k 20");
    ts_req_init(&one, 0.7, 0, 8);
    one.p.top_p = 0.8;
    for (j = 0; j < V; j++) {
        row[j] = urand() * 2.0f - 6.0f;
    }
    for (j = 0; j < 30; j++) {
        row[irand((uint32_t) V)] = urand() * 2.0f;
    }
    ts_grid(e, &s, &one, row, V, NULL, NULL, 0, "top-p 0.8");
    ts_req_init(&one, 1.0, 0, 9);
    one.p.min_p = 0.1;
    ts_grid(e, &s, &one, row, V, NULL, NULL, 0, "min-p 0.1");
    ts_req_init(&one, 1.3, 1, 10);
    one.p.top_k = 50;
    one.p.top_p = 0.9;
    one.p.min_p = 0.02;
    ts_grid(e, &s, &one, row, V, NULL, NULL, 0,
            "penalties, bias, masks, min-p 0.02, top-k 50, top-p 0.9");

    /* ties at the top-p boundary: the host sorts equal values by index,
     * the device keeps the lowest indices: 10, then 5 of 5, 20, 900 */
    for (j = 0; j < V; j++) {
        row[j] = -30.0f;
    }
    row[10] = 3.0f;
    row[20] = row[5] = row[900 % V] = 2.0f;
    ts_req_init(&one, 1.0, 0, 11);
    one.p.top_p = 0.6;
    ts_grid(e, &s, &one, row, V, NULL, NULL, 0, "ties at the top-p "
            "threshold");

    /* ties at the top-k threshold: exactly k kept, the equal ones of
     * lowest index (the host's quickselect may keep others, so the
     * expectation is written out) */
    {
        static const int32_t  want[5] = { 100, 200, 300, 50, 400 };
        double                wp[5];

        for (j = 0; j < V; j++) {
            row[j] = 0.0f;
        }
        row[100] = row[200] = row[300] = 5.0f;
        row[700] = row[50] = row[999] = row[400] = 4.0f;
        for (j = 0; j < 5; j++) {
            wp[j] = j < 3 ? 1.0 : (double) expf(4.0f - 5.0f);
        }
        ts_req_init(&one, 1.0, 0, 12);
        one.p.top_k = 5;
        ts_grid(e, &s, &one, row, V, want, wp, 5, "ties at the top-k "
                "threshold keep the lowest indices");
    }

    llm_sample_rows_free(&sr);
    llm_sampler_free(&s);
    free(lg);
    free(h);
    free(out);
    free(row);
}


typedef struct {
    const char       *name;
    llm_cu_test_spec  sp;
} model_case;

static const model_case cases[] = {
#if TK_SMALL
    { "llama bf16 hd128 8/2 llama3-rope",
      { LLM_ARCH_LLAMA, 1, 128, 8, 2, 128, 256, 400, LLM_DTYPE_BF16, 0, 1, 0,
        11 } },
    { "llama f16 hd64 4/4 tied",
      { LLM_ARCH_LLAMA, 1, 128, 4, 4, 64, 256, 400, LLM_DTYPE_F16, 1, 0, 0,
        12 } },
    { "qwen2 bf16 hd64 14/2 bias",
      { LLM_ARCH_QWEN2, 1, 64, 14, 2, 64, 128, 400, LLM_DTYPE_BF16, 0, 0, 0,
        13 } },
    { "qwen3 bf16 hd128 4/2 qk-norm",
      { LLM_ARCH_QWEN3, 1, 128, 4, 2, 128, 256, 400, LLM_DTYPE_BF16, 1, 0, 0,
        14 } },
    { "mistral bf16 hd64 window 40",
      { LLM_ARCH_MISTRAL, 1, 128, 4, 2, 64, 256, 400, LLM_DTYPE_BF16, 0, 0,
        40, 15 } },
    { "llama bf16 hd256 8/1",
      { LLM_ARCH_LLAMA, 1, 64, 8, 1, 256, 128, 400, LLM_DTYPE_BF16, 0, 0, 0,
        16 } },
    { "llama bf16 hd16 4/2 (make-model's default)",
      { LLM_ARCH_LLAMA, 1, 64, 4, 2, 16, 128, 400, LLM_DTYPE_BF16, 0, 0, 0,
        17 } },
    { "llama f32->bf16 hd96 6/2",
      { LLM_ARCH_LLAMA, 1, 96, 6, 2, 96, 192, 400, LLM_DTYPE_F32, 0, 0, 0,
        18 } },
#else
    { "llama bf16 hd128 8/2 llama3-rope",
      { LLM_ARCH_LLAMA, 2, 256, 8, 2, 128, 512, 1000, LLM_DTYPE_BF16, 0, 1, 0,
        11 } },
    { "llama f16 hd64 4/4 tied",
      { LLM_ARCH_LLAMA, 2, 256, 4, 4, 64, 384, 1000, LLM_DTYPE_F16, 1, 0, 0,
        12 } },
    { "qwen2 bf16 hd64 14/2 bias",
      { LLM_ARCH_QWEN2, 2, 128, 14, 2, 64, 256, 1000, LLM_DTYPE_BF16, 0, 0, 0,
        13 } },
    { "qwen3 bf16 hd128 16/8 qk-norm",
      { LLM_ARCH_QWEN3, 2, 256, 16, 8, 128, 512, 1000, LLM_DTYPE_BF16, 1, 0, 0,
        14 } },
    { "mistral bf16 hd128 window 100",
      { LLM_ARCH_MISTRAL, 2, 256, 8, 2, 128, 512, 1000, LLM_DTYPE_BF16, 0, 0,
        100, 15 } },
    { "llama bf16 hd256 8/1",
      { LLM_ARCH_LLAMA, 2, 256, 8, 1, 256, 512, 1000, LLM_DTYPE_BF16, 0, 0, 0,
        16 } },
    { "llama bf16 hd16 4/2 (make-model's default)",
      { LLM_ARCH_LLAMA, 2, 64, 4, 2, 16, 128, 1000, LLM_DTYPE_BF16, 0, 0, 0,
        17 } },
    { "llama f32->bf16 hd96 6/2",
      { LLM_ARCH_LLAMA, 2, 192, 6, 2, 96, 384, 1000, LLM_DTYPE_F32, 0, 0, 0,
        18 } },
#endif
};


int
main(int argc, char **argv)
{
    llm_backend_config  bc = { 0 };
    llm_cu_ref_opts     ro;
    llm_cu_info         info;
    size_t              ci;
    int                 dev = argc > 2 && strcmp(argv[1], "--device") == 0
                              ? atoi(argv[2]) : 0;
    env                 e;

    bc.threads = 8;
    bc.min_blocks = 512;
    bc.device = dev;
    bc.gpu_memory_utilization = 0.02;
    for (ci = 0; ci < sizeof(cases) / sizeof(cases[0]); ci++) {
        const char  *name = cases[ci].name;

        memset(&e, 0, sizeof(e));
        e.m = llm_cu_test_model(&cases[ci].sp);
        e.gpu = llm_backend_cuda_create(e.m, &bc, e.err);
        if (e.gpu == NULL) {
            check(0, "%s: create: %s", name, e.err);
            llm_cu_test_model_free(e.m);
            continue;
        }
        llm_cu_backend_info(e.gpu, &info);
        llm_cu_ref_opts_default(&ro);
        ro.n_sm = info.n_sm;
        ro.cap_tok = info.cap_tok;
        e.ref = llm_cu_ref_create(e.m, &bc, &ro, e.err);
        e.cpu = llm_backend_cpu_create(e.m, &bc, e.err);
        e.gs = llm_cu_backend_state(e.gpu);
        e.rs = llm_cu_ref_state(e.ref);
        e.f16 = e.gs->t_f16;
        if (ci == 0) {
            printf("# %s, %d multiprocessors\n", info.device, info.n_sm);
        }
        test_embed_norm_silu(&e, name);
        test_gemm(&e, name);
        test_qkv_and_attention(&e, name);
        if (ci == 0) {
            test_sampling(&e);
        }
        e.gpu->free(e.gpu);
        e.ref->free(e.ref);
        e.cpu->free(e.cpu);

        /* fresh caches for the forward scenarios */
        e.gpu = llm_backend_cuda_create(e.m, &bc, e.err);
        e.ref = llm_cu_ref_create(e.m, &bc, &ro, e.err);
        e.cpu = llm_backend_cpu_create(e.m, &bc, e.err);
        if (e.gpu == NULL || e.ref == NULL || e.cpu == NULL) {
            check(0, "%s: create: %s", name, e.err);
        } else {
            e.gs = llm_cu_backend_state(e.gpu);
            e.rs = llm_cu_ref_state(e.ref);
            scenario(&e, name, "with graphs");
        }
        if (e.gpu) {
            e.gpu->free(e.gpu);
        }
        if (e.ref) {
            e.ref->free(e.ref);
        }
        if (e.cpu) {
            e.cpu->free(e.cpu);
        }
        if (ci == 0 || ci == 4) {
            e.gpu = llm_backend_cuda_create(e.m, &bc, e.err);
            e.ref = llm_cu_ref_create(e.m, &bc, &ro, e.err);
            e.cpu = llm_backend_cpu_create(e.m, &bc, e.err);
            if (e.gpu && e.ref && e.cpu) {
                llm_cu_backend_tune(e.gpu, 0, 0);
                e.gs = llm_cu_backend_state(e.gpu);
                e.rs = llm_cu_ref_state(e.ref);
                scenario(&e, name, "eager, cuBLAS only");
            }
            if (e.gpu) {
                e.gpu->free(e.gpu);
            }
            if (e.ref) {
                e.ref->free(e.ref);
            }
            if (e.cpu) {
                e.cpu->free(e.cpu);
            }
        }
        llm_cu_test_model_free(e.m);
    }
    printf("1..%d\n", n_pass + n_fail);
    printf("# kernel tests: %d passed, %d failed\n", n_pass, n_fail);
    return n_fail ? 1 : 0;
}
