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
 *     CPU backend, with and without CUDA graphs; forward_greedy's ids.
 * Output: TAP lines, then "kernel tests: N passed, M failed".
 */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime_api.h>

#include "backend.h"
#include "batch.h"
#include "cu_backend.h"
#include "cu_plan.h"
#include "cu_ref.h"
#include "cu_testmodel.h"
#include "util.h"

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
test_embed_norm_silu_argmax(env *e, const char *name)
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

    /* argmax, with planted ties: the first index must win */
    {
        int      nl = 5, V = g->V, j;
        int32_t  ids[5], ref_ids[5];
        float   *lg = malloc(sizeof(float) * nl * V);

        for (i = 0; i < nl * V; i++) {
            lg[i] = urand() * 10.0f;
        }
        lg[0 * V + 7] = lg[0 * V + V - 1] = 50.0f;      /* tie: 7 wins */
        lg[1 * V + V - 1] = 60.0f;                      /* last */
        lg[2 * V + 0] = 70.0f;                          /* first */
        for (j = 0; j < V; j++) {
            lg[3 * V + j] = -1.0f;                      /* all equal: 0 */
        }
        cudaMemcpy(g->logits, lg, sizeof(float) * nl * V,
                   cudaMemcpyHostToDevice);
        memcpy(r->logits, lg, sizeof(float) * nl * V);
        llm_cu_gpu_ops.argmax(e->gpu, g, g->logits, nl, g->ids);
        llm_cu_ref_ops.argmax(e->ref, r, r->logits, nl, ref_ids);
        sync_gpu(e);
        cudaMemcpy(ids, g->ids, sizeof(ids), cudaMemcpyDeviceToHost);
        check(memcmp(ids, ref_ids, sizeof(ids)) == 0 && ids[0] == 7
              && ids[3] == 0, "%s: argmax = first maximum (%d %d %d %d %d)",
              name, ids[0], ids[1], ids[2], ids[3], ids[4]);
        free(lg);
    }
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

typedef struct {
    double  max_rel;
    int     rows, argmax_diff, unexplained, ids_diff;
} cmp;


static float
top2(const float *x, int V, int *best)
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


static void
cmp_rows(cmp *c, const float *a, const float *b, int n, int V)
{
    int     i, j, ba, bb;
    float   amax, dmax, dd, gap;

    for (i = 0; i < n; i++) {
        amax = 1e-30f;
        dmax = 0.0f;
        for (j = 0; j < V; j++) {
            amax = fmaxf(amax, fabsf(a[(size_t) i * V + j]));
            dd = fabsf(a[(size_t) i * V + j] - b[(size_t) i * V + j]);
            dmax = isnan(dd) ? INFINITY : fmaxf(dmax, dd);
        }
        c->max_rel = fmax(c->max_rel, dmax / amax);
        gap = top2(a + (size_t) i * V, V, &ba);
        top2(b + (size_t) i * V, V, &bb);
        if (ba != bb) {
            c->argmax_diff++;
            c->unexplained += gap > 2.0f * dmax;
        }
        c->rows++;
    }
}


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
    cmp              cg = { 0 }, cr = { 0 };
    int              ok = 1;

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
        cmp_rows(&cg, lc, lg, bb.batch.n_logits, V);
        cmp_rows(&cr, lr, lg, bb.batch.n_logits, V);
        if (step >= 2 && step % 4 == 0) {
            /* the ids path on the same step: identical K/V rewrite */
            if (e->gpu->forward_greedy(e->gpu, &bb.batch, ids, e->err) != 0) {
                printf("# greedy: %s\n", e->err);
                ok = 0;
                break;
            }
            for (i = 0; i < bb.batch.n_logits; i++) {
                top2(lg + (size_t) i * V, V, &best);
                cg.ids_diff += ids[i] != best;
            }
        }
        for (s = 0; s < 3; s++) {
            int  row = bb.batch.seqs[s].token_start + n[s] - 1;

            for (i = 0; i < bb.batch.n_logits; i++) {
                if (bb.batch.logits_rows[i] == row) {
                    top2(lc + (size_t) i * V, V, &best);
                    next[s] = best;
                }
            }
        }
    }
    check(ok && cr.max_rel < 2e-2 && cr.unexplained == 0,
          "%s: forward %s = reference (%d rows, rel %.2g, argmax diffs %d, "
          "all near-ties)", name, variant, cr.rows, cr.max_rel,
          cr.argmax_diff);
    check(ok && cg.max_rel < 3e-2 && cg.unexplained == 0 && cg.ids_diff == 0,
          "%s: forward %s ~ CPU backend (%d rows, rel %.2g, argmax diffs %d, "
          "all near-ties; greedy ids diffs %d)", name, variant, cg.rows,
          cg.max_rel, cg.argmax_diff, cg.ids_diff);
    llm_batch_buf_free(&bb);
    free(lc);
    free(lg);
    free(lr);
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
        test_embed_norm_silu_argmax(&e, name);
        test_gemm(&e, name);
        test_qkv_and_attention(&e, name);
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
