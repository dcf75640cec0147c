/*
 * cu_backend.cu -- the CUDA backend: the engine's llm_backend on one GPU.
 *
 * At creation the weights are uploaded once into one allocation (bf16 as
 * stored; f16 models stay f16 and run in f16; f32 models are converted to
 * bf16), the activation buffers for LLM_CUDA_MAX_TOKENS rows are carved
 * from a second one, and the paged KV cache (bf16/f16, the CPU backend's
 * [block][kv head][16][hd] layout per layer) takes llm_gpu_memory_utilization
 * of the memory left, at least min_blocks.  One extra block receives the
 * writes of the rows that pad a decode step to a CUDA-graph size.
 *
 * A forward call plans the batch into steps (cu_plan.c); per step the packed
 * metadata goes to the device in one copy from a pinned buffer (two of
 * them alternate, so planning the next step overlaps the previous copy),
 * the step runs (cu_forward.c over the ops below, or a CUDA graph captured
 * once per decode size), and the logits rows come back through pinned
 * buffers in a pipeline: while chunk i is copied, the host places chunk
 * i - 1 in the caller's array.  forward_sample instead samples the rows
 * on the device (cu_sample.cu) and copies only the ids.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cu_backend.h"
#include "cu_check.cuh"
#include "cu_kernels.h"
#include "cu_plan.h"
#include "cu_weights.h"
#include "model/rope.h"

#define LLM_CU_EXPORT extern "C" __attribute__((visibility("default")))

#define LLM_CU_NPIPE        4                  /* logits copy buffers */
#define LLM_CU_PIPE_BYTES   (8u << 20)
#define LLM_CU_STAGE_BYTES  (64u << 20)        /* dtype conversion chunk */
#define LLM_CU_BLAS_WS      (32u << 20)
#define LLM_CU_RESERVE      ((size_t) 512 << 20) /* cuBLAS, graphs, driver */
#define LLM_CU_MAX_GRAPHS   16

typedef struct {
    cudaGraphExec_t   exec;
    llm_cu_step       sig;                     /* the step it replays */
} llm_cu_graph;

typedef struct {
    llm_backend       base;
    const llm_model  *m;
    int               dev;
    char              name[32];
    llm_cu_info       info;
    int               gemv_max, graph_max;

    llm_cu_state      s;
    void             *wmem, *bmem;
    llm_cu_planner    plan;

    cudaStream_t      stream;
    cublasHandle_t    blas;
    void             *blas_ws;

    int32_t          *md_dev;
    int               md_dev_cap;
    int32_t          *md_host[2];
    int               md_host_cap[2];
    cudaEvent_t       md_ev[2];
    int               md_cur;

    float            *pipe[LLM_CU_NPIPE];
    cudaEvent_t       pipe_ev[LLM_CU_NPIPE];
    int               pipe_rows;
    int32_t          *ids_host;

    /* forward_sample: each step's rows and the modifications, staged in
     * pinned memory and copied in one transfer */
    char             *smp_host, *smp_dev;
    size_t            smp_host_cap, smp_dev_cap;
    /* rows asking for logprobs: their records, and scratch rows to sample
     * in (allocated on first use) */
    llm_token_logprob *lp_dev, *lp_host;
    float            *lp_scratch;
    int               lp_scratch_rows, step_lp;

    llm_cu_graph      graphs[LLM_CU_MAX_GRAPHS];
    int               n_graphs;

    char              err[LLM_ERR_LEN];         /* the ops' messages */

    /* rows whose ids came from forward_sample, rows of logits sent to the
     * host (forward); LLM_CUDA_STATS=1 prints them when the backend is freed */
    unsigned long long  rows_sampled, rows_logits;
} llm_cu_backend;


static int
llm_cu_env_int(const char *name, int def)
{
    const char  *v = getenv(name);
    char        *end;
    long         n;

    if (v == NULL || *v == '\0') {
        return def;
    }
    n = strtol(v, &end, 10);
    return (*end == '\0' && n >= 0 && n <= (1 << 24)) ? (int) n : def;
}


/* ---- the ops on the device --------------------------------------------------- */

static int
llm_gpu_embed(void *ctx, const llm_cu_state *s, const int32_t *tokens, int n)
{
    llm_cu_backend  *b = (llm_cu_backend *) ctx;

    return llm_cuk_embed(b->stream, s->t_f16, s->embed, tokens, n, s->H,
                         s->x, b->err);
}


static int
llm_gpu_rmsnorm(void *ctx, const llm_cu_state *s, float *x,
    const float *delta, const float *w, const int32_t *rows, int n, void *out)
{
    llm_cu_backend  *b = (llm_cu_backend *) ctx;

    return llm_cuk_rmsnorm(b->stream, s->t_f16, x, delta, w, rows, n, s->H,
                           s->c->rms_eps, out, b->err);
}


/* Row-major out[n][nout] = in[n][k] . w[nout][k]^T is, in cuBLAS's
 * column-major terms, out^T (nout x n) = w (k x nout)^T . in^T (k x n). */
static int
llm_gpu_gemm(void *ctx, const llm_cu_state *s, const void *in, int n, int k,
    const void *w, int nout, float *out)
{
    llm_cu_backend  *b = (llm_cu_backend *) ctx;
    cudaDataType_t   dt = s->t_f16 ? CUDA_R_16F : CUDA_R_16BF;
    const float      one = 1.0f, zero = 0.0f;

    if (n <= 0) {
        return 0;
    }
    if (n <= b->gemv_max && n <= LLM_CUK_GEMV_MAX && k % 8 == 0) {
        return llm_cuk_gemv(b->stream, s->t_f16, in, n, k, w, nout, out,
                            b->err);
    }
    if (LLM_CU_TRY(cublasGemmEx(b->blas, CUBLAS_OP_T, CUBLAS_OP_N, nout, n, k,
                                &one, w, dt, k, in, dt, k, &zero, out,
                                CUDA_R_32F, nout, CUBLAS_COMPUTE_32F,
                                CUBLAS_GEMM_DEFAULT), b->err))
    {
        return -1;
    }
    return 0;
}


static int
llm_gpu_qkv_post(void *ctx, const llm_cu_state *s, int layer,
    const float *qkv, const llm_cu_md *md, int n, void *kc, void *vc)
{
    llm_cu_backend  *b = (llm_cu_backend *) ctx;

    return llm_cuk_qkv_post(b->stream, s->t_f16, s, layer, qkv, md->pos,
                            md->slot, n, kc, vc, b->err);
}


static int
llm_gpu_attn_split(void *ctx, const llm_cu_state *s, const llm_cu_md *md,
    int n_split, int max_splits, const void *kc, const void *vc)
{
    llm_cu_backend  *b = (llm_cu_backend *) ctx;

    return llm_cuk_attn_split(b->stream, s->t_f16, s, md, n_split,
                              max_splits, kc, vc, b->err);
}


static int
llm_gpu_attn_prefill(void *ctx, const llm_cu_state *s, const llm_cu_md *md,
    int n_items, const void *kc, const void *vc)
{
    llm_cu_backend  *b = (llm_cu_backend *) ctx;

    return llm_cuk_attn_prefill(b->stream, s->t_f16, s, md, n_items, kc, vc,
                                b->err);
}


static int
llm_gpu_silu_mul(void *ctx, const llm_cu_state *s, const float *gu, int n,
    void *out)
{
    llm_cu_backend  *b = (llm_cu_backend *) ctx;

    return llm_cuk_silu_mul(b->stream, s->t_f16, gu, n, s->I, out, b->err);
}


extern "C" const llm_cu_ops llm_cu_gpu_ops = {
    llm_gpu_embed,
    llm_gpu_rmsnorm,
    llm_gpu_gemm,
    llm_gpu_qkv_post,
    llm_gpu_attn_split,
    llm_gpu_attn_prefill,
    llm_gpu_silu_mul,
};


/* ---- steps ------------------------------------------------------------------ */

static int
llm_cu_grow_md(llm_cu_backend *b, int need, int dev_side, char *err)
{
    int  cap = need + need / 2;

    if (dev_side) {
        /* kernels in flight and captured graphs point at the old buffer */
        if (LLM_CU_TRY(cudaStreamSynchronize(b->stream), err)
            || LLM_CU_TRY(cudaFree(b->md_dev), err))
        {
            return -1;
        }
        for (int i = 0; i < b->n_graphs; i++) {
            cudaGraphExecDestroy(b->graphs[i].exec);
        }
        b->n_graphs = 0;
        b->md_dev = NULL;
        if (LLM_CU_TRY(cudaMalloc(&b->md_dev, sizeof(int32_t) * cap), err)) {
            return -1;
        }
        b->md_dev_cap = cap;
        return 0;
    }
    if (LLM_CU_TRY(cudaFreeHost(b->md_host[b->md_cur]), err)) {
        return -1;
    }
    b->md_host[b->md_cur] = NULL;
    if (LLM_CU_TRY(cudaHostAlloc(&b->md_host[b->md_cur],
                                 sizeof(int32_t) * cap,
                                 cudaHostAllocDefault), err))
    {
        return -1;
    }
    b->md_host_cap[b->md_cur] = cap;
    return 0;
}


static int
llm_cu_same_graph_step(const llm_cu_step *a, const llm_cu_step *b)
{
    return a->n_pad == b->n_pad && a->n_split == b->n_split
           && a->max_splits == b->max_splits && a->n_items == b->n_items
           && a->n_logits_pad == b->n_logits_pad && a->o_bt == b->o_bt
           && a->o_rows == b->o_rows;
}


/* Captures the graph of a decode step of this size (not run now).  A
 * failure turns graphs off for good: the step was already computed eagerly,
 * and eager steps give the same results, only with more launch overhead. */
static void
llm_cu_graph_capture(llm_cu_backend *b, const llm_cu_step *st)
{
    llm_cu_graph  *g = &b->graphs[b->n_graphs];
    cudaGraph_t    graph = NULL;
    cudaError_t    e;
    char           why[LLM_ERR_LEN] = "";
    int            rc;

    if (LLM_CU_TRY(cudaStreamBeginCapture(b->stream,
                       cudaStreamCaptureModeThreadLocal), why))
    {
        goto off;
    }
    rc = llm_cu_forward_step(&llm_cu_gpu_ops, b, &b->s, st, b->md_dev);
    e = cudaStreamEndCapture(b->stream, &graph);
    if (rc != 0) {
        llm_cu_errf(why, "%s", b->err);
        goto off;
    }
    if (llm_cu_check(e, "cudaStreamEndCapture", __FILE__, __LINE__, why)) {
        goto off;
    }
    e = cudaGraphInstantiate(&g->exec, graph, 0);
    cudaGraphDestroy(graph);
    graph = NULL;
    if (llm_cu_check(e, "cudaGraphInstantiate", __FILE__, __LINE__, why)) {
        goto off;
    }
    g->sig = *st;
    b->n_graphs++;
    return;

off:
    if (graph) {
        cudaGraphDestroy(graph);
    }
    cudaGetLastError();
    fprintf(stderr, "llm %s: CUDA graphs turned off: capturing the %d-row "
            "decode step failed: %s\n", b->name, st->n_pad, why);
    b->graph_max = 0;
    b->plan.cfg.graph_max = 0;
    b->info.graphs = 0;
}


/* Runs a decode step: replays its graph, or the first time runs it eagerly
 * and then captures the graph for the next steps of this size.  The graph
 * reads everything that changes from step to step (tokens, positions,
 * slots, block tables) from the metadata buffer, and each row's split of
 * its keys is derived from its position on the device. */
static int
llm_cu_graph_run(llm_cu_backend *b, const llm_cu_step *st, char *err)
{
    int  i;

    for (i = 0; i < b->n_graphs; i++) {
        if (llm_cu_same_graph_step(&b->graphs[i].sig, st)) {
            return LLM_CU_TRY(cudaGraphLaunch(b->graphs[i].exec, b->stream),
                              err) ? -1 : 0;
        }
    }
    /* eager first: it also loads every kernel the capture will record */
    if (llm_cu_forward_step(&llm_cu_gpu_ops, b, &b->s, st, b->md_dev) != 0)
    {
        llm_cu_errf(err, "%s", b->err);
        return -1;
    }
    if (b->n_graphs < LLM_CU_MAX_GRAPHS) {
        llm_cu_graph_capture(b, st);
    }
    return 0;
}


/* The step's logits rows (or ids) into the caller's arrays, by
 * plan.logits_idx.  Copies of chunk c overlap the host's placing of chunk
 * c - (NPIPE - 1).  A step without logits returns at once. */
static int
llm_cu_copy_out(llm_cu_backend *b, const llm_cu_step *st, float *logits,
    int32_t *ids, char *err)
{
    const int32_t  *idx = b->plan.logits_idx;
    size_t          V = (size_t) b->s.V;
    int             n = st->n_logits, rows = b->pipe_rows;
    int             nch = (n + rows - 1) / rows, c, d, k, r0, nr, slot;

    if (ids != NULL) {
        if (n > 0
            && (LLM_CU_TRY(cudaMemcpyAsync(b->ids_host, b->s.ids,
                               sizeof(int32_t) * n, cudaMemcpyDeviceToHost,
                               b->stream), err)
                || LLM_CU_TRY(cudaStreamSynchronize(b->stream), err)))
        {
            return -1;
        }
        for (k = 0; k < n; k++) {
            ids[idx[k]] = b->ids_host[k];
        }
        return 0;
    }
    for (c = 0; c < nch + LLM_CU_NPIPE - 1; c++) {
        if (c < nch) {
            slot = c % LLM_CU_NPIPE;
            r0 = c * rows;
            nr = n - r0 < rows ? n - r0 : rows;
            if (LLM_CU_TRY(cudaMemcpyAsync(b->pipe[slot],
                               b->s.logits + (size_t) r0 * V,
                               sizeof(float) * V * nr, cudaMemcpyDeviceToHost,
                               b->stream), err)
                || LLM_CU_TRY(cudaEventRecord(b->pipe_ev[slot], b->stream),
                              err))
            {
                return -1;
            }
        }
        d = c - (LLM_CU_NPIPE - 1);
        if (d >= 0 && d < nch) {
            slot = d % LLM_CU_NPIPE;
            r0 = d * rows;
            nr = n - r0 < rows ? n - r0 : rows;
            if (LLM_CU_TRY(cudaEventSynchronize(b->pipe_ev[slot]), err)) {
                return -1;
            }
            for (k = 0; k < nr; k++) {
                memcpy(logits + (size_t) idx[r0 + k] * V,
                       b->pipe[slot] + (size_t) k * V, sizeof(float) * V);
            }
        }
    }
    return 0;
}


/* Scratch rows for n rows with logprobs, and the records of a step's rows
 * (first use).  Nothing in flight uses the old scratch: steps with logits
 * end synchronised. */
static int
llm_cu_grow_lp(llm_cu_backend *b, int n, char *err)
{
    size_t  nl = (size_t) b->s.cap_logits;

    if ((b->lp_dev == NULL
         && LLM_CU_TRY(cudaMalloc(&b->lp_dev, sizeof(llm_token_logprob) * nl),
                       err))
        || (b->lp_host == NULL
            && LLM_CU_TRY(cudaHostAlloc(&b->lp_host,
                                        sizeof(llm_token_logprob) * nl,
                                        cudaHostAllocDefault), err)))
    {
        return -1;
    }
    if (n <= b->lp_scratch_rows) {
        return 0;
    }
    if (b->lp_scratch && LLM_CU_TRY(cudaFree(b->lp_scratch), err)) {
        return -1;
    }
    b->lp_scratch = NULL;
    b->lp_scratch_rows = 0;
    if (LLM_CU_TRY(cudaMalloc(&b->lp_scratch,
                              sizeof(float) * b->s.V * (size_t) n), err))
    {
        return -1;
    }
    b->lp_scratch_rows = n;
    return 0;
}


/* Samples the step's logits rows on the device into s.ids: their rows of
 * the caller's spec (in step order, by plan.logits_idx) and all of its
 * modifications go over in one copy; spec NULL samples greedily.  The
 * staging buffer is free again: the previous step with logits ended with
 * a synchronisation (llm_cu_copy_out). */
static int
llm_cu_sample(llm_cu_backend *b, const llm_cu_step *st,
    const llm_sample_spec *spec, char *err)
{
    const int32_t   *idx = b->plan.logits_idx;
    size_t           rb, need;
    llm_sample_row  *rows;
    int              k;

    b->step_lp = 0;
    if (st->n_logits == 0) {
        return 0;
    }
    if (spec == NULL) {
        return llm_cuk_sample(b->stream, b->s.logits, st->n_logits, b->s.V,
                              NULL, NULL, b->s.ids, NULL, NULL, err);
    }
    rb = sizeof(llm_sample_row) * st->n_logits;
    need = rb + sizeof(llm_sample_mod) * spec->n_mods;
    if (need > b->smp_host_cap) {
        if (b->smp_host && LLM_CU_TRY(cudaFreeHost(b->smp_host), err)) {
            return -1;
        }
        b->smp_host = NULL;
        b->smp_host_cap = 0;
        if (LLM_CU_TRY(cudaHostAlloc(&b->smp_host, need + need / 2,
                                     cudaHostAllocDefault), err))
        {
            return -1;
        }
        b->smp_host_cap = need + need / 2;
    }
    if (need > b->smp_dev_cap) {
        /* nothing in flight reads it: steps with logits end synchronised */
        if (b->smp_dev && LLM_CU_TRY(cudaFree(b->smp_dev), err)) {
            return -1;
        }
        b->smp_dev = NULL;
        b->smp_dev_cap = 0;
        if (LLM_CU_TRY(cudaMalloc(&b->smp_dev, need + need / 2), err)) {
            return -1;
        }
        b->smp_dev_cap = need + need / 2;
    }
    rows = (llm_sample_row *) b->smp_host;
    for (k = 0; k < st->n_logits; k++) {
        rows[k] = spec->rows[idx[k]];
        rows[k].lp_slot = rows[k].logprobs >= 0 ? b->step_lp++ : -1;
    }
    if (b->step_lp > 0 && llm_cu_grow_lp(b, b->step_lp, err) != 0) {
        return -1;
    }
    if (spec->n_mods > 0) {
        memcpy(b->smp_host + rb, spec->mods,
               sizeof(llm_sample_mod) * spec->n_mods);
    }
    if (LLM_CU_TRY(cudaMemcpyAsync(b->smp_dev, b->smp_host, need,
                                   cudaMemcpyHostToDevice, b->stream), err))
    {
        return -1;
    }
    if (llm_cuk_sample(b->stream, b->s.logits, st->n_logits, b->s.V,
                       (const llm_sample_row *) b->smp_dev,
                       (const llm_sample_mod *) (b->smp_dev + rb), b->s.ids,
                       b->lp_scratch, b->lp_dev, err) != 0)
    {
        return -1;
    }
    /* the records come back with the ids (llm_cu_copy_out waits) */
    return b->step_lp > 0
           && LLM_CU_TRY(cudaMemcpyAsync(b->lp_host, b->lp_dev,
                             sizeof(llm_token_logprob) * st->n_logits,
                             cudaMemcpyDeviceToHost, b->stream), err)
           ? -1 : 0;
}


/* The logprob records of the step's rows that asked, by plan.logits_idx
 * (after llm_cu_copy_out synchronised). */
static void
llm_cu_place_lp(llm_cu_backend *b, const llm_cu_step *st,
    const llm_sample_spec *spec, llm_token_logprob *lp)
{
    const int32_t  *idx = b->plan.logits_idx;
    int             k;

    for (k = 0; b->step_lp > 0 && lp != NULL && k < st->n_logits; k++) {
        if (spec->rows[idx[k]].logprobs >= 0) {
            lp[idx[k]] = b->lp_host[k];
        }
    }
}


static int
llm_cu_run(llm_cu_backend *b, const llm_batch *batch, float *logits,
    const llm_sample_spec *spec, int32_t *ids, llm_token_logprob *lp,
    char *err)
{
    llm_cu_step  st;
    int          tok0, rc, cur;

    if (LLM_CU_TRY(cudaSetDevice(b->dev), err)
        || llm_cu_plan_begin(&b->plan, batch, err) != 0)
    {
        return -1;
    }
    for (tok0 = 0; tok0 < batch->n_tokens; tok0 += st.n_tok) {
        cur = b->md_cur;
        /* this staging buffer may still feed the copy of two steps ago */
        if (LLM_CU_TRY(cudaEventSynchronize(b->md_ev[cur]), err)) {
            return -1;
        }
        while ((rc = llm_cu_plan_step(&b->plan, batch, tok0, &st,
                                      b->md_host[cur],
                                      b->md_host_cap[cur])) == 1)
        {
            if (llm_cu_grow_md(b, st.n_md, 0, err) != 0) {
                return -1;
            }
        }
        if (st.n_md > b->md_dev_cap && llm_cu_grow_md(b, st.n_md, 1, err)) {
            return -1;
        }
        if (LLM_CU_TRY(cudaMemcpyAsync(b->md_dev, b->md_host[cur],
                           sizeof(int32_t) * st.n_md, cudaMemcpyHostToDevice,
                           b->stream), err)
            || LLM_CU_TRY(cudaEventRecord(b->md_ev[cur], b->stream), err))
        {
            return -1;
        }
        b->md_cur ^= 1;

        if (st.graph && b->graph_max > 0) {
            rc = llm_cu_graph_run(b, &st, err);
        } else {
            rc = llm_cu_forward_step(&llm_cu_gpu_ops, b, &b->s, &st,
                                     b->md_dev);
            if (rc != 0) {
                llm_cu_errf(err, "%s", b->err);
            }
        }
        if (rc != 0 || (ids != NULL && llm_cu_sample(b, &st, spec, err) != 0)
            || llm_cu_copy_out(b, &st, logits, ids, err) != 0)
        {
            return -1;
        }
        if (ids != NULL && spec != NULL) {
            llm_cu_place_lp(b, &st, spec, lp);
        }
    }
    /* steps without logits were not waited for: the next one was planned
     * while they ran */
    return LLM_CU_TRY(cudaStreamSynchronize(b->stream), err) ? -1 : 0;
}


static int
llm_cu_forward(llm_backend *base, const llm_batch *batch, float *logits,
    char *err)
{
    llm_cu_backend  *b = (llm_cu_backend *) base;
    int              rc = llm_cu_run(b, batch, logits, NULL, NULL, NULL, err);

    b->rows_logits += rc == 0 ? batch->n_logits : 0;
    return rc;
}


static int
llm_cu_forward_sample(llm_backend *base, const llm_batch *batch,
    const llm_sample_spec *spec, int32_t *ids, llm_token_logprob *lp,
    char *err)
{
    llm_cu_backend  *b = (llm_cu_backend *) base;
    int              rc = llm_cu_run(b, batch, NULL, spec, ids, lp, err);

    b->rows_sampled += rc == 0 ? batch->n_logits : 0;
    return rc;
}


/* ---- creation ----------------------------------------------------------------- */

static int
llm_cu_alloc(llm_cu_backend *b, void **p, size_t bytes, const char *what,
    char *err)
{
    size_t       fr = 0, total = 0;
    cudaError_t  e = cudaMalloc(p, bytes);

    if (e == cudaSuccess) {
        return 0;
    }
    cudaGetLastError();                         /* clear it */
    cudaMemGetInfo(&fr, &total);
    llm_cu_errf(err, "%s: cannot allocate %.0f MiB for %s: %s (%.0f of "
                "%.0f MiB free)", b->name, LLM_CU_MIB(bytes), what,
                cudaGetErrorString(e), LLM_CU_MIB(fr), LLM_CU_MIB(total));
    *p = NULL;
    return -1;
}


static int
llm_cu_upload(llm_cu_backend *b, char *err)
{
    const llm_model  *m = b->m;
    llm_cu_seg       *segs;
    void             *stage = NULL;
    int               n, i, rc = -1;
    int               tdt = b->s.t_f16 ? LLM_DTYPE_F16 : LLM_DTYPE_BF16;

    segs = (llm_cu_seg *) llm_cu_xcalloc(llm_cu_seg_count(m),
                                         sizeof(llm_cu_seg));
    n = llm_cu_segments(&b->s, m, segs);
    for (i = 0; i < n; i++) {
        const llm_cu_seg  *g = &segs[i];
        size_t             cnt = (size_t) g->rows * g->cols, es, off, chunk;
        char              *dst;

        if (g->vec) {
            dst = (char *) g->dst + sizeof(float) * g->dst_row;
            if (LLM_CU_TRY(cudaMemcpy(dst, g->src->data, sizeof(float) * cnt,
                                      cudaMemcpyHostToDevice), err))
            {
                goto done;
            }
            continue;
        }
        dst = (char *) g->dst + b->s.tsize * (size_t) g->dst_row * g->cols;
        if ((int) g->src->dtype == tdt) {
            if (LLM_CU_TRY(cudaMemcpy(dst, g->src->data, b->s.tsize * cnt,
                                      cudaMemcpyHostToDevice), err))
            {
                goto done;
            }
            continue;
        }
        /* another dtype: through a staging buffer, converted on the device */
        if (stage == NULL
            && llm_cu_alloc(b, &stage, LLM_CU_STAGE_BYTES, "upload staging",
                            err) != 0)
        {
            goto done;
        }
        es = g->src->dtype == LLM_DTYPE_F32 ? 4 : 2;
        for (off = 0; off < cnt; off += chunk) {
            chunk = LLM_CU_STAGE_BYTES / es;
            if (chunk > cnt - off) {
                chunk = cnt - off;
            }
            if (LLM_CU_TRY(cudaMemcpy(stage,
                               (const char *) g->src->data + off * es,
                               chunk * es, cudaMemcpyHostToDevice), err)
                || llm_cuk_convert(b->stream, b->s.t_f16, stage,
                                   g->src->dtype, chunk,
                                   dst + off * b->s.tsize, err) != 0
                || LLM_CU_TRY(cudaStreamSynchronize(b->stream), err))
            {
                goto done;
            }
        }
    }
    rc = 0;
done:
    if (stage) {
        cudaFree(stage);
    }
    free(segs);
    return rc;
}


/* Random weights for benchmarks: matrices uniform with std ~ 1/sqrt(3 fan
 * in), norms 1, biases 0 (from the zeroed allocation). */
static int
llm_cu_fill_random(llm_cu_backend *b, uint64_t seed, char *err)
{
    llm_cu_state  *s = &b->s;
    cudaStream_t   st = b->stream;
    int            f = s->t_f16, L;
    uint64_t       k = seed * 0x100000001b3ULL;

#define LLM_RND(p, rows, cols)                                               \
    llm_cuk_fill_random(st, f, (p), (size_t) (rows) * (cols), k++,           \
                        1.0f / sqrtf((float) (cols)), err)

    if (LLM_RND(s->embed, s->V, s->H)
        || (s->lm_head != s->embed && LLM_RND(s->lm_head, s->V, s->H))
        || llm_cuk_fill_f32(st, s->final_norm, s->H, 1.0f, err))
    {
        return -1;
    }
    for (L = 0; L < s->n_layers; L++) {
        llm_cu_layer  *l = &s->layers[L];

        if (LLM_RND(l->wqkv, s->qkvd, s->H) || LLM_RND(l->wo, s->H, s->qd)
            || LLM_RND(l->wgu, 2 * s->I, s->H)
            || LLM_RND(l->wdown, s->H, s->I)
            || llm_cuk_fill_f32(st, l->attn_norm, s->H, 1.0f, err)
            || llm_cuk_fill_f32(st, l->ffn_norm, s->H, 1.0f, err)
            || (l->q_norm && llm_cuk_fill_f32(st, l->q_norm, s->hd, 1.0f, err))
            || (l->k_norm && llm_cuk_fill_f32(st, l->k_norm, s->hd, 1.0f, err)))
        {
            return -1;
        }
    }
#undef LLM_RND
    return LLM_CU_TRY(cudaStreamSynchronize(st), err) ? -1 : 0;
}


static int
llm_cu_check_free(llm_cu_backend *b, size_t need, const char *what,
    char *err)
{
    size_t  fr = 0, total = 0;

    if (LLM_CU_TRY(cudaMemGetInfo(&fr, &total), err)) {
        return -1;
    }
    if (need + LLM_CU_RESERVE > fr) {
        llm_cu_errf(err, "%s (%s): %s need %.0f MiB (+%.0f MiB working "
                    "space) but only %.0f of %.0f MiB are free", b->name,
                    b->info.device, what, LLM_CU_MIB(need),
                    LLM_CU_MIB(LLM_CU_RESERVE), LLM_CU_MIB(fr),
                    LLM_CU_MIB(total));
        return -1;
    }
    return 0;
}


static int
llm_cu_init_kv(llm_cu_backend *b, const llm_backend_config *cfg, char *err)
{
    llm_cu_state  *s = &b->s;
    size_t         fr = 0, total = 0, bb;
    int            n_blocks;
    void          *kv;

    bb = llm_cu_block_bytes(&b->m->config, s->tsize);
    if (LLM_CU_TRY(cudaMemGetInfo(&fr, &total), err)
        || llm_cu_kv_blocks(fr, LLM_CU_RESERVE, cfg->gpu_memory_utilization,
                            bb, cfg->min_blocks, b->dev, &n_blocks, err) != 0)
    {
        return -1;
    }
    /* + the padding block */
    if (llm_cu_alloc(b, &kv, bb * (n_blocks + 1), "the KV cache", err) != 0
        || LLM_CU_TRY(cudaMemset(kv, 0, bb * (n_blocks + 1)), err))
    {
        return -1;
    }
    s->kv = kv;
    s->n_blocks = n_blocks + 1;
    s->kv_layer_elems = (size_t) s->n_blocks * s->nkv * LLM_BLOCK_SIZE
                        * s->hd;
    b->base.num_blocks = n_blocks;
    b->base.block_bytes = bb;
    b->info.kv_blocks = n_blocks;
    b->info.kv_mib = LLM_CU_MIB(bb * (n_blocks + 1));
    return 0;
}


static int
llm_cu_init_io(llm_cu_backend *b, char *err)
{
    int  i, cap = 16 * b->s.cap_tok + 65536;

    b->pipe_rows = (int) (LLM_CU_PIPE_BYTES / (sizeof(float) * b->s.V));
    if (b->pipe_rows < 1) {
        b->pipe_rows = 1;
    }
    if (LLM_CU_TRY(cudaMalloc(&b->md_dev, sizeof(int32_t) * cap), err)) {
        return -1;
    }
    b->md_dev_cap = cap;
    for (i = 0; i < 2; i++) {
        if (LLM_CU_TRY(cudaHostAlloc(&b->md_host[i], sizeof(int32_t) * cap,
                                     cudaHostAllocDefault), err)
            || LLM_CU_TRY(cudaEventCreateWithFlags(&b->md_ev[i],
                                                   cudaEventDisableTiming),
                          err))
        {
            return -1;
        }
        b->md_host_cap[i] = cap;
    }
    for (i = 0; i < LLM_CU_NPIPE; i++) {
        if (LLM_CU_TRY(cudaHostAlloc(&b->pipe[i], sizeof(float) * b->s.V
                                     * (size_t) b->pipe_rows,
                                     cudaHostAllocDefault), err)
            || LLM_CU_TRY(cudaEventCreateWithFlags(&b->pipe_ev[i],
                                                   cudaEventDisableTiming),
                          err))
        {
            return -1;
        }
    }
    return LLM_CU_TRY(cudaHostAlloc(&b->ids_host,
                                    sizeof(int32_t) * b->s.cap_logits,
                                    cudaHostAllocDefault), err) ? -1 : 0;
}


static void
llm_cu_free(llm_backend *base)
{
    llm_cu_backend  *b = (llm_cu_backend *) base;
    int              i;

    if (b == NULL) {
        return;
    }
    if (llm_cu_env_int("LLM_CUDA_STATS", 0)) {
        fprintf(stderr, "llm %s: %llu rows sampled on the device, %llu rows "
                "of logits to the host\n", b->name, b->rows_sampled,
                b->rows_logits);
    }
    cudaSetDevice(b->dev);
    if (b->stream) {
        cudaStreamSynchronize(b->stream);
    }
    for (i = 0; i < b->n_graphs; i++) {
        cudaGraphExecDestroy(b->graphs[i].exec);
    }
    for (i = 0; i < 2; i++) {
        if (b->md_host[i]) {
            cudaFreeHost(b->md_host[i]);
        }
        if (b->md_ev[i]) {
            cudaEventDestroy(b->md_ev[i]);
        }
    }
    for (i = 0; i < LLM_CU_NPIPE; i++) {
        if (b->pipe[i]) {
            cudaFreeHost(b->pipe[i]);
        }
        if (b->pipe_ev[i]) {
            cudaEventDestroy(b->pipe_ev[i]);
        }
    }
    if (b->ids_host) {
        cudaFreeHost(b->ids_host);
    }
    if (b->smp_host) {
        cudaFreeHost(b->smp_host);
    }
    if (b->lp_host) {
        cudaFreeHost(b->lp_host);
    }
    cudaFree(b->smp_dev);
    cudaFree(b->lp_dev);
    cudaFree(b->lp_scratch);
    cudaFree(b->md_dev);
    cudaFree(b->s.kv);
    cudaFree(b->bmem);
    cudaFree(b->wmem);
    cudaFree(b->blas_ws);
    if (b->blas) {
        cublasDestroy(b->blas);
    }
    if (b->stream) {
        cudaStreamDestroy(b->stream);
    }
    llm_cu_planner_free(&b->plan);
    free(b->s.layers);
    free(b);
}


static llm_backend *
llm_cu_create(const llm_model *m, const llm_backend_config *cfg, int random,
    uint64_t seed, char *err)
{
    llm_cu_backend   *b;
    llm_cu_state     *s;
    llm_cu_plan_cfg   pc;
    cudaDeviceProp    prop;
    size_t            wbytes, bbytes;
    float            *inv_freq = NULL;
    int               gs, hc, n_dev = 0;

    b = (llm_cu_backend *) llm_cu_xcalloc(1, sizeof(*b));
    s = &b->s;
    b->m = m;
    b->dev = cfg->device;
    snprintf(b->name, sizeof(b->name), "cuda:%d", cfg->device);
    b->base.name = b->name;
    b->base.forward = llm_cu_forward;
    /* LLM_CUDA_SAMPLE=0: the engine samples on the host from the logits */
    b->base.forward_sample = llm_cu_env_int("LLM_CUDA_SAMPLE", 1)
                             ? llm_cu_forward_sample : NULL;
    b->base.free = llm_cu_free;

    if (LLM_CU_TRY(cudaGetDeviceCount(&n_dev), err)) {
        free(b);
        return NULL;
    }
    if (cfg->device < 0 || cfg->device >= n_dev) {
        llm_cu_errf(err, "cuda:%d: no such device (%d found)", cfg->device,
                    n_dev);
        free(b);
        return NULL;
    }
    if (LLM_CU_TRY(cudaSetDevice(b->dev), err)
        || LLM_CU_TRY(cudaGetDeviceProperties(&prop, b->dev), err))
    {
        free(b);
        return NULL;
    }
    snprintf(b->info.device, sizeof(b->info.device), "%s", prop.name);
    b->info.n_sm = prop.multiProcessorCount;
    if (prop.major < 8) {
        llm_cu_errf(err, "%s (%s): compute capability %d.%d; the CUDA "
                    "backend needs 8.0 or newer (bf16 tensor cores)", b->name,
                    prop.name, prop.major, prop.minor);
        free(b);
        return NULL;
    }

    /* activations in the weights' half type: f16 models stay f16 */
    s->tsize = 2;
    s->t_f16 = m->weights.embed.dtype == LLM_DTYPE_F16;
    if (llm_cu_state_dims(s, m, err) != 0) {
        free(b);
        return NULL;
    }
    s->layers = (llm_cu_layer *) llm_cu_xcalloc(s->n_layers,
                                                sizeof(llm_cu_layer));
    s->cap_tok = llm_cu_env_int("LLM_CUDA_MAX_TOKENS",
                                LLM_CU_DEFAULT_MAX_TOKENS);
    s->cap_logits = llm_cu_env_int("LLM_CUDA_MAX_LOGITS",
                                   LLM_CU_DEFAULT_MAX_LOGITS);
    if (s->cap_tok < 1) {
        s->cap_tok = 1;
    }
    if (s->cap_logits < 1) {
        s->cap_logits = 1;
    }
    b->gemv_max = llm_cu_env_int("LLM_CUDA_GEMV_MAX",
                                 LLM_CU_DEFAULT_GEMV_MAX);
    b->graph_max = llm_cu_env_int("LLM_CUDA_GRAPHS", 1)
                   ? LLM_CU_DEFAULT_GRAPH_MAX : 0;
    gs = s->nh / s->nkv;
    hc = llm_cu_head_chunk(s->hd);

    if (LLM_CU_TRY(cudaStreamCreateWithFlags(&b->stream,
                                             cudaStreamNonBlocking), err)
        || LLM_CU_TRY(cublasCreate(&b->blas), err)
        || LLM_CU_TRY(cublasSetStream(b->blas, b->stream), err)
        || llm_cu_alloc(b, &b->blas_ws, LLM_CU_BLAS_WS, "cuBLAS", err) != 0
        || LLM_CU_TRY(cublasSetWorkspace(b->blas, b->blas_ws, LLM_CU_BLAS_WS),
                      err)
        || llm_cuk_attn_init(s->t_f16, s->hd, b->dev, err) != 0)
    {
        goto fail;
    }

    /* weights, once */
    wbytes = llm_cu_weights_carve(s, m, NULL);
    if (llm_cu_check_free(b, wbytes, "the weights", err) != 0
        || llm_cu_alloc(b, &b->wmem, wbytes, "the weights", err) != 0
        || LLM_CU_TRY(cudaMemset(b->wmem, 0, wbytes), err))
    {
        goto fail;
    }
    llm_cu_weights_carve(s, m, (char *) b->wmem);
    if (random ? llm_cu_fill_random(b, seed, err) : llm_cu_upload(b, err)) {
        goto fail;
    }
    inv_freq = (float *) llm_cu_xcalloc(s->hd / 2, sizeof(float));
    llm_rope_inv_freq(&m->config, inv_freq);
    if (LLM_CU_TRY(cudaMemcpy(s->inv_freq, inv_freq,
                              sizeof(float) * (s->hd / 2),
                              cudaMemcpyHostToDevice), err))
    {
        goto fail;
    }
    b->info.weights_mib = LLM_CU_MIB(wbytes);

    /* activations for cap_tok rows per step */
    s->cap_part = llm_cu_part_cap(s->cap_tok, s->nh, s->nkv,
                                  (gs + hc - 1) / hc, b->info.n_sm);
    bbytes = llm_cu_buffers_carve(s, NULL);
    if (llm_cu_check_free(b, bbytes, "the activation buffers (lower "
                          "LLM_CUDA_MAX_TOKENS)", err) != 0
        || llm_cu_alloc(b, &b->bmem, bbytes, "the activation buffers", err)
        || LLM_CU_TRY(cudaMemset(b->bmem, 0, bbytes), err))
    {
        goto fail;
    }
    llm_cu_buffers_carve(s, (char *) b->bmem);
    b->info.buffers_mib = LLM_CU_MIB(bbytes);

    if (llm_cu_init_io(b, err) != 0 || llm_cu_init_kv(b, cfg, err) != 0) {
        goto fail;
    }

    memset(&pc, 0, sizeof(pc));
    pc.cap_tok = s->cap_tok;
    pc.cap_logits = s->cap_logits;
    pc.n_sm = b->info.n_sm;
    pc.prefill_min_q = llm_cu_env_int("LLM_CUDA_PREFILL_MIN_Q",
                                      LLM_CU_DEFAULT_PREFILL_MIN_Q);
    pc.graph_max = b->graph_max;
    pc.num_blocks = s->n_blocks - 1;
    pc.pad_block = s->n_blocks - 1;
    pc.window = m->config.sliding_window;
    pc.vocab = s->V;
    pc.nkv = s->nkv;
    pc.n_chunks = (gs + hc - 1) / hc;
    llm_cu_planner_init(&b->plan, &pc);

    b->info.graphs = b->graph_max > 0;
    b->info.gemv_max = b->gemv_max;
    b->info.cap_tok = s->cap_tok;
    if (LLM_CU_TRY(cudaDeviceSynchronize(), err)) {
        goto fail;
    }
    free(inv_freq);
    return &b->base;

fail:
    free(inv_freq);
    llm_cu_free(&b->base);
    return NULL;
}


/* ---- exports and hooks ------------------------------------------------------------ */

LLM_CU_EXPORT llm_backend *
llm_backend_cuda_create(const llm_model *m, const llm_backend_config *cfg,
    char *err)
{
    return llm_cu_create(m, cfg, 0, 0, err);
}


LLM_CU_EXPORT llm_backend *
llm_backend_cuda_create_random(const llm_model *m,
    const llm_backend_config *cfg, uint64_t seed, char *err)
{
    return llm_cu_create(m, cfg, 1, seed, err);
}


LLM_CU_EXPORT int
llm_cuda_device_count(char *err)
{
    int          n = 0;
    cudaError_t  e = cudaGetDeviceCount(&n);

    if (e == cudaErrorNoDevice) {
        cudaGetLastError();
        return 0;
    }
    if (llm_cu_check(e, "cudaGetDeviceCount", __FILE__, __LINE__, err)) {
        return -1;
    }
    return n;
}


extern "C" void
llm_cu_backend_info(llm_backend *b, llm_cu_info *info)
{
    *info = ((llm_cu_backend *) b)->info;
}


extern "C" llm_cu_state *
llm_cu_backend_state(llm_backend *b)
{
    return &((llm_cu_backend *) b)->s;
}


extern "C" const char *
llm_cu_backend_error(llm_backend *b)
{
    return ((llm_cu_backend *) b)->err;
}


extern "C" int
llm_cu_backend_sync(llm_backend *base, char *err)
{
    llm_cu_backend  *b = (llm_cu_backend *) base;

    return LLM_CU_TRY(cudaStreamSynchronize(b->stream), err) ? -1 : 0;
}


extern "C" void
llm_cu_backend_tune(llm_backend *base, int gemv_max, int graphs)
{
    llm_cu_backend  *b = (llm_cu_backend *) base;

    b->gemv_max = gemv_max;
    b->info.gemv_max = gemv_max;
    /* graphs captured with the old GEMV choice are dropped */
    cudaStreamSynchronize(b->stream);
    for (int i = 0; i < b->n_graphs; i++) {
        cudaGraphExecDestroy(b->graphs[i].exec);
    }
    b->n_graphs = 0;
    b->graph_max = graphs ? LLM_CU_DEFAULT_GRAPH_MAX : 0;
    b->plan.cfg.graph_max = b->graph_max;
    b->info.graphs = graphs;
}


extern "C" void *
llm_cu_backend_stream(llm_backend *b)
{
    return ((llm_cu_backend *) b)->stream;
}
