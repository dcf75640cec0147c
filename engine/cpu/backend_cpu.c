/*
 * backend_cpu.c -- the reference backend: a Llama-family forward pass over a
 * batch of sequences with a paged f32 KV cache, on llm_threads threads.
 *
 * One step, per layer:
 *   xn = rmsnorm(x);  q, k, v = xn Wq, xn Wk, xn Wv  (+ bias: Qwen2)
 *   per-head q/k rmsnorm (Qwen3);  RoPE;  k, v -> cache slots
 *   att = softmax(q K^T / sqrt(d)) V  over each token's own sequence
 *   x += att Wo;  xn = rmsnorm(x);  x += (silu(xn Wg) * xn Wu) Wd
 * then logits = rmsnorm(x) Wlm for the requested rows only.
 *
 * KV cache layout, per layer: [block][kv_head][16 positions][head_dim], so
 * one head's block is contiguous for the attention loop.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "backend/backend.h"
#include "cpu_kernels.h"
#include "model/rope.h"
#include "threadpool.h"
#include "util/util.h"


typedef struct {
    llm_backend             base;
    const llm_model        *m;
    const llm_cpu_kernels  *k;
    llm_threadpool         *tp;
    float                  *kv;         /* layers x {K, V} x layer_elems */
    size_t                  layer_elems;
    float                  *inv_freq;   /* head_dim / 2 */

    int                     cap;        /* token capacity of the buffers */
    float                  *x, *xn, *q, *kk, *vv, *att, *tmp, *gate, *up;
    float                  *rope_cos, *rope_sin;     /* cap x head_dim/2 */
    int                     cap_logits;
    float                  *xl;         /* normed rows that need logits */
    float                 **scratch;    /* per thread: matmul + attention */
    size_t                  scratch_floats;
    llm_weights             w;          /* the model's, with the matrices
                                           the kernels pack in packed */
    char                   *packed;
} llm_cpu_backend;


/* One matmul of a parallel region: y = x W^T over all of W's rows. */
typedef struct {
    const float       *x;
    int                ldx;
    int                M;
    const llm_tensor  *w;
    float             *y;
    int                ldy;
} llm_mm_job;

typedef struct {
    llm_cpu_backend   *b;
    const llm_batch   *batch;
    int                layer;
    llm_mm_job         mm[3];
    int                n_mm;
} llm_cpu_task;


static float *
llm_kcache(llm_cpu_backend *b, int layer)
{
    return b->kv + (size_t) (2 * layer) * b->layer_elems;
}


static float *
llm_vcache(llm_cpu_backend *b, int layer)
{
    return b->kv + (size_t) (2 * layer + 1) * b->layer_elems;
}


size_t
llm_kv_bytes_per_token(const llm_config *c, size_t elem_size)
{
    return (size_t) c->n_layers * 2 * c->n_kv_heads * c->head_dim * elem_size;
}


static void
llm_cpu_reserve_scratch(llm_cpu_backend *b, int n)
{
    const llm_config  *c = &b->m->config;
    size_t             need, attn;
    int                i, kmax, gs = c->n_heads / c->n_kv_heads;

    kmax = c->hidden > c->intermediate ? c->hidden : c->intermediate;
    if (c->n_heads * c->head_dim > kmax) {
        kmax = c->n_heads * c->head_dim;
    }
    need = llm_matmul_scratch_size(kmax, n);
    attn = (size_t) gs * c->head_dim + 2 * gs + LLM_BLOCK_SIZE;
    need = need > attn ? need : attn;
    if (need <= b->scratch_floats) {
        return;
    }
    for (i = 0; i < llm_threadpool_size(b->tp); i++) {
        free(b->scratch[i]);
        b->scratch[i] = llm_xmalloc(sizeof(float) * need);
    }
    b->scratch_floats = need;
}


static void
llm_cpu_reserve(llm_cpu_backend *b, int n, int n_logits)
{
    const llm_config  *c = &b->m->config;
    int                qd = c->n_heads * c->head_dim;
    int                kvd = c->n_kv_heads * c->head_dim;

    if (n > b->cap) {
        free(b->x);
        b->x = llm_xmalloc(sizeof(float) * (size_t) n
                           * (3 * c->hidden + 2 * qd + 2 * kvd
                              + 2 * c->intermediate + c->head_dim));
        b->xn = b->x + (size_t) n * c->hidden;
        b->tmp = b->xn + (size_t) n * c->hidden;
        b->q = b->tmp + (size_t) n * c->hidden;
        b->att = b->q + (size_t) n * qd;
        b->kk = b->att + (size_t) n * qd;
        b->vv = b->kk + (size_t) n * kvd;
        b->gate = b->vv + (size_t) n * kvd;
        b->up = b->gate + (size_t) n * c->intermediate;
        b->rope_cos = b->up + (size_t) n * c->intermediate;
        b->rope_sin = b->rope_cos + (size_t) n * (c->head_dim / 2);
        b->cap = n;
    }
    if (n_logits > b->cap_logits) {
        free(b->xl);
        b->xl = llm_xmalloc(sizeof(float) * (size_t) n_logits * c->hidden);
        b->cap_logits = n_logits;
    }
    llm_cpu_reserve_scratch(b, n > n_logits ? n : n_logits);
}


/* ---- parallel regions ---------------------------------------------------- */


static void
llm_task_matmuls(void *arg, int ith, int nth)
{
    llm_cpu_task  *t = arg;
    int            i, lo, hi;

    for (i = 0; i < t->n_mm; i++) {
        llm_mm_job  *j = &t->mm[i];

        llm_split(j->w->rows, 16, ith, nth, &lo, &hi);
        if (lo < hi) {
            t->b->k->matmul(j->x, j->ldx, j->M, j->w, lo, hi, j->y, j->ldy,
                            t->b->scratch[ith]);
        }
    }
}


static void
llm_cpu_matmuls(llm_cpu_backend *b, llm_mm_job *jobs, int n)
{
    llm_cpu_task  t = { b, NULL, 0, { { 0 } }, n };

    memcpy(t.mm, jobs, sizeof(llm_mm_job) * n);
    llm_threadpool_run(b->tp, llm_task_matmuls, &t);
}


static void
llm_task_embed(void *arg, int ith, int nth)
{
    llm_cpu_task       *t = arg;
    llm_cpu_backend    *b = t->b;
    const llm_config   *c = &b->m->config;
    int                 i, j, lo, hi, half = c->head_dim / 2;

    llm_split(t->batch->n_tokens, 1, ith, nth, &lo, &hi);
    for (i = lo; i < hi; i++) {
        float  pos = (float) t->batch->positions[i];

        b->k->row_to_f32(b->x + (size_t) i * c->hidden, &b->w.embed,
                         t->batch->tokens[i]);
        for (j = 0; j < half; j++) {
            float  a = pos * b->inv_freq[j];

            b->rope_cos[(size_t) i * half + j] = cosf(a);
            b->rope_sin[(size_t) i * half + j] = sinf(a);
        }
    }
}


static void
llm_task_norm(void *arg, int ith, int nth)
{
    llm_cpu_task             *t = arg;
    llm_cpu_backend          *b = t->b;
    const llm_config         *c = &b->m->config;
    const llm_layer_weights  *l = &b->w.layers[t->layer];
    int                       i, lo, hi;

    llm_split(t->batch->n_tokens, 1, ith, nth, &lo, &hi);
    for (i = lo; i < hi; i++) {
        b->k->rmsnorm(b->xn + (size_t) i * c->hidden,
                      b->x + (size_t) i * c->hidden, l->attn_norm.data,
                      c->hidden, c->rms_eps);
    }
}


static void
llm_rope_apply(float *v, const float *cs, const float *sn, int hd)
{
    int  i, half = hd / 2;

    for (i = 0; i < half; i++) {
        float  x1 = v[i], x2 = v[i + half];

        v[i] = x1 * cs[i] - x2 * sn[i];
        v[i + half] = x2 * cs[i] + x1 * sn[i];
    }
}


/* bias, q/k norm, RoPE, and the K/V writes into the cache slots */
static void
llm_task_qkv_post(void *arg, int ith, int nth)
{
    llm_cpu_task             *t = arg;
    llm_cpu_backend          *b = t->b;
    const llm_config         *c = &b->m->config;
    const llm_layer_weights  *l = &b->w.layers[t->layer];
    int                       i, h, lo, hi, hd = c->head_dim, half = hd / 2;
    int                       qd = c->n_heads * hd, kvd = c->n_kv_heads * hd;
    float                    *q, *k, *v, *kc, *vc;
    const float              *cs, *sn;
    size_t                    slot, off;

    kc = llm_kcache(b, t->layer);
    vc = llm_vcache(b, t->layer);
    llm_split(t->batch->n_tokens, 1, ith, nth, &lo, &hi);
    for (i = lo; i < hi; i++) {
        q = b->q + (size_t) i * qd;
        k = b->kk + (size_t) i * kvd;
        v = b->vv + (size_t) i * kvd;
        if (c->qkv_bias) {
            b->k->add(q, l->bq.data, qd);
            b->k->add(k, l->bk.data, kvd);
            b->k->add(v, l->bv.data, kvd);
        }
        cs = b->rope_cos + (size_t) i * half;
        sn = b->rope_sin + (size_t) i * half;
        for (h = 0; h < c->n_heads; h++) {
            if (c->qk_norm) {
                b->k->rmsnorm(q + h * hd, q + h * hd, l->q_norm.data, hd,
                              c->rms_eps);
            }
            llm_rope_apply(q + h * hd, cs, sn, hd);
        }
        slot = (size_t) t->batch->slots[i];
        for (h = 0; h < c->n_kv_heads; h++) {
            if (c->qk_norm) {
                b->k->rmsnorm(k + h * hd, k + h * hd, l->k_norm.data, hd,
                              c->rms_eps);
            }
            llm_rope_apply(k + h * hd, cs, sn, hd);
            off = (((slot / LLM_BLOCK_SIZE) * c->n_kv_heads + h)
                   * LLM_BLOCK_SIZE + slot % LLM_BLOCK_SIZE) * hd;
            memcpy(kc + off, k + h * hd, sizeof(float) * hd);
            memcpy(vc + off, v + h * hd, sizeof(float) * hd);
        }
    }
}


/*
 * Attention for one (token, kv head) item: the group's q heads walk the
 * sequence's blocks with an online softmax, one rescale per block.
 */
static void
llm_attend(llm_cpu_backend *b, const llm_batch *batch, int layer, int tok,
    int g, float *scratch)
{
    const llm_config     *c = &b->m->config;
    const llm_batch_seq  *s = &batch->seqs[batch->seq_of_token[tok]];
    int                   hd = c->head_dim, gs = c->n_heads / c->n_kv_heads;
    int                   p = batch->positions[tok], j0 = 0, j, jb, h, n;
    float                 scale = 1.0f / sqrtf((float) hd);
    float                *acc = scratch;                 /* gs x hd */
    float                *mx = acc + gs * hd;            /* gs */
    float                *sum = mx + gs;                 /* gs */
    float                *sc = sum + gs;                 /* LLM_BLOCK_SIZE */
    const float          *q, *kb, *vb;
    const float          *kc = llm_kcache(b, layer), *vc = llm_vcache(b, layer);
    float                *out;
    float                 bm, nm, r;
    size_t                boff;

    if (c->sliding_window > 0 && p - c->sliding_window + 1 > 0) {
        j0 = p - c->sliding_window + 1;
    }
    memset(acc, 0, sizeof(float) * gs * hd);
    for (h = 0; h < gs; h++) {
        mx[h] = -INFINITY;
        sum[h] = 0.0f;
    }
    for (jb = j0 / LLM_BLOCK_SIZE * LLM_BLOCK_SIZE; jb <= p;
         jb += LLM_BLOCK_SIZE)
    {
        int  lo = jb < j0 ? j0 - jb : 0;
        int  hi = p - jb + 1 < LLM_BLOCK_SIZE ? p - jb + 1 : LLM_BLOCK_SIZE;

        if (lo >= hi) {
            continue;
        }

        boff = ((size_t) s->block_table[jb / LLM_BLOCK_SIZE] * c->n_kv_heads
                + g) * LLM_BLOCK_SIZE * hd;
        kb = kc + boff;
        vb = vc + boff;
        for (h = 0; h < gs; h++) {
            q = b->q + (size_t) tok * c->n_heads * hd + (size_t) (g * gs + h)
                * hd;
            bm = -INFINITY;
            for (j = lo; j < hi; j++) {
                sc[j] = b->k->dot(q, kb + (size_t) j * hd, hd) * scale;
                bm = sc[j] > bm ? sc[j] : bm;
            }
            nm = mx[h] > bm ? mx[h] : bm;
            r = expf(mx[h] - nm);                /* 0 on the first block */
            if (r != 1.0f) {
                b->k->scale(acc + h * hd, r, hd);
                sum[h] *= r;
            }
            mx[h] = nm;
            for (j = lo; j < hi; j++) {
                float  e = expf(sc[j] - nm);

                sum[h] += e;
                b->k->axpy(acc + h * hd, e, vb + (size_t) j * hd, hd);
            }
        }
    }
    out = b->att + (size_t) tok * c->n_heads * hd + (size_t) g * gs * hd;
    for (h = 0; h < gs; h++) {
        for (n = 0; n < hd; n++) {
            out[h * hd + n] = acc[h * hd + n] / sum[h];
        }
    }
}


static void
llm_task_attention(void *arg, int ith, int nth)
{
    llm_cpu_task     *t = arg;
    llm_cpu_backend  *b = t->b;
    int               nkv = b->m->config.n_kv_heads, i;

    /* round robin: a prompt's later tokens attend to more keys, so equal
     * ranges would leave the first threads idle */
    for (i = ith; i < t->batch->n_tokens * nkv; i += nth) {
        llm_attend(b, t->batch, t->layer, i / nkv, i % nkv,
                   b->scratch[ith]);
    }
}


/* x += tmp (attention output); xn = rmsnorm(x) for the MLP */
static void
llm_task_residual_norm(void *arg, int ith, int nth)
{
    llm_cpu_task             *t = arg;
    llm_cpu_backend          *b = t->b;
    const llm_config         *c = &b->m->config;
    const llm_layer_weights  *l = &b->w.layers[t->layer];
    int                       i, lo, hi;
    size_t                    o;

    llm_split(t->batch->n_tokens, 1, ith, nth, &lo, &hi);
    for (i = lo; i < hi; i++) {
        o = (size_t) i * c->hidden;
        b->k->add(b->x + o, b->tmp + o, c->hidden);
        b->k->rmsnorm(b->xn + o, b->x + o, l->ffn_norm.data, c->hidden,
                      c->rms_eps);
    }
}


static void
llm_task_silu(void *arg, int ith, int nth)
{
    llm_cpu_task     *t = arg;
    llm_cpu_backend  *b = t->b;
    int               I = b->m->config.intermediate, i, lo, hi;

    llm_split(t->batch->n_tokens, 1, ith, nth, &lo, &hi);
    for (i = lo; i < hi; i++) {
        b->k->silu_mul(b->gate + (size_t) i * I, b->gate + (size_t) i * I,
                       b->up + (size_t) i * I, I);
    }
}


static void
llm_task_residual(void *arg, int ith, int nth)
{
    llm_cpu_task     *t = arg;
    llm_cpu_backend  *b = t->b;
    int               H = b->m->config.hidden, i, lo, hi;

    llm_split(t->batch->n_tokens, 1, ith, nth, &lo, &hi);
    for (i = lo; i < hi; i++) {
        b->k->add(b->x + (size_t) i * H, b->tmp + (size_t) i * H, H);
    }
}


static void
llm_task_final_norm(void *arg, int ith, int nth)
{
    llm_cpu_task     *t = arg;
    llm_cpu_backend  *b = t->b;
    int               H = b->m->config.hidden, i, lo, hi;

    llm_split(t->batch->n_logits, 1, ith, nth, &lo, &hi);
    for (i = lo; i < hi; i++) {
        b->k->rmsnorm(b->xl + (size_t) i * H,
                      b->x + (size_t) t->batch->logits_rows[i] * H,
                      b->w.final_norm.data, H, b->m->config.rms_eps);
    }
}


/* ---- the forward pass ---------------------------------------------------- */


static int
llm_cpu_forward(llm_backend *base, const llm_batch *batch, float *logits,
    char *err)
{
    llm_cpu_backend          *b = (llm_cpu_backend *) base;
    const llm_config         *c = &b->m->config;
    const llm_layer_weights  *l;
    llm_cpu_task              t = { b, batch, 0, { { 0 } }, 0 };
    int                       T = batch->n_tokens, L;
    int                       qd = c->n_heads * c->head_dim;
    int                       kvd = c->n_kv_heads * c->head_dim;
    int                       i;

    for (i = 0; i < T; i++) {
        if (batch->tokens[i] < 0 || batch->tokens[i] >= c->vocab_size
            || batch->slots[i] < 0
            || batch->slots[i] >= b->base.num_blocks * LLM_BLOCK_SIZE)
        {
            llm_errf(err, "cpu backend: token %d or slot %d out of range",
                     batch->tokens[i], batch->slots[i]);
            return -1;
        }
    }
    llm_cpu_reserve(b, T, batch->n_logits);
    llm_threadpool_run(b->tp, llm_task_embed, &t);

    for (L = 0; L < c->n_layers; L++) {
        l = &b->w.layers[L];
        t.layer = L;
        llm_threadpool_run(b->tp, llm_task_norm, &t);
        {
            llm_mm_job  mm[3] = {
                { b->xn, c->hidden, T, &l->wq, b->q, qd },
                { b->xn, c->hidden, T, &l->wk, b->kk, kvd },
                { b->xn, c->hidden, T, &l->wv, b->vv, kvd },
            };
            llm_cpu_matmuls(b, mm, 3);
        }
        llm_threadpool_run(b->tp, llm_task_qkv_post, &t);
        llm_threadpool_run(b->tp, llm_task_attention, &t);
        {
            llm_mm_job  mm = { b->att, qd, T, &l->wo, b->tmp, c->hidden };
            llm_cpu_matmuls(b, &mm, 1);
        }
        llm_threadpool_run(b->tp, llm_task_residual_norm, &t);
        {
            llm_mm_job  mm[2] = {
                { b->xn, c->hidden, T, &l->w_gate, b->gate, c->intermediate },
                { b->xn, c->hidden, T, &l->w_up, b->up, c->intermediate },
            };
            llm_cpu_matmuls(b, mm, 2);
        }
        llm_threadpool_run(b->tp, llm_task_silu, &t);
        {
            llm_mm_job  mm = { b->gate, c->intermediate, T, &l->w_down,
                               b->tmp, c->hidden };
            llm_cpu_matmuls(b, &mm, 1);
        }
        llm_threadpool_run(b->tp, llm_task_residual, &t);
    }

    if (batch->n_logits > 0) {
        llm_threadpool_run(b->tp, llm_task_final_norm, &t);
        {
            llm_mm_job  mm = { b->xl, c->hidden, batch->n_logits,
                               &b->w.lm_head, logits,
                               c->vocab_size };
            llm_cpu_matmuls(b, &mm, 1);
        }
    }
    return 0;
}


static void
llm_cpu_free(llm_backend *base)
{
    llm_cpu_backend  *b = (llm_cpu_backend *) base;
    int               i;

    if (b == NULL) {
        return;
    }
    if (b->tp) {
        for (i = 0; i < llm_threadpool_size(b->tp); i++) {
            free(b->scratch[i]);
        }
        llm_threadpool_free(b->tp);
    }
    free(b->scratch);
    free(b->kv);
    free(b->inv_freq);
    free(b->x);
    free(b->xl);
    free(b->w.layers);
    free(b->packed);
    free(b);
}


/* b->w = the model's weights, each matrix the kernel set can pack copied
 * into its layout (qpack.h); LLM_CPU_PACK=0 keeps the stored layout (tests,
 * benchmarks) */
static void
llm_cpu_pack_weights(llm_cpu_backend *b)
{
    const llm_config  *c = &b->m->config;
    const char        *env = getenv("LLM_CPU_PACK");
    llm_tensor       **mats;
    size_t             total = 0, off = 0;
    int                i, L, nm = 0;

    b->w = b->m->weights;
    b->w.layers = llm_xmalloc(sizeof(llm_layer_weights) * c->n_layers);
    memcpy(b->w.layers, b->m->weights.layers,
           sizeof(llm_layer_weights) * c->n_layers);
    if (b->k->pack == NULL || (env && strcmp(env, "0") == 0)) {
        return;
    }
    mats = llm_xmalloc(sizeof(llm_tensor *) * (7 * (size_t) c->n_layers + 1));
    for (L = 0; L < c->n_layers; L++) {
        llm_layer_weights  *l = &b->w.layers[L];

        mats[nm++] = &l->wq;
        mats[nm++] = &l->wk;
        mats[nm++] = &l->wv;
        mats[nm++] = &l->wo;
        mats[nm++] = &l->w_gate;
        mats[nm++] = &l->w_up;
        mats[nm++] = &l->w_down;
    }
    mats[nm++] = &b->w.lm_head;
    for (i = 0; i < nm; i++) {
        total += b->k->pack(mats[i], NULL, NULL);
    }
    b->packed = total ? llm_xmalloc(total) : NULL;
    for (i = 0; total && i < nm; i++) {
        off += b->k->pack(mats[i], mats[i], b->packed + off);
    }
    free(mats);
}


llm_backend *
llm_backend_cpu_create(const llm_model *m, const llm_backend_config *cfg,
    char *err)
{
    llm_cpu_backend   *b;
    const llm_config  *c = &m->config;
    size_t             per_block, n_blocks;
    int                n_threads;

    per_block = llm_kv_bytes_per_token(c, sizeof(float)) * LLM_BLOCK_SIZE;
    n_blocks = cfg->kv_bytes / per_block;
    if (n_blocks < (size_t) cfg->min_blocks) {
        n_blocks = (size_t) cfg->min_blocks;
    }
    if (n_blocks > INT32_MAX / LLM_BLOCK_SIZE) {
        llm_errf(err, "llm_kv_cache_size: too large");
        return NULL;
    }
    b = llm_xcalloc(1, sizeof(*b));
    b->base.name = "cpu";
    b->base.forward = llm_cpu_forward;
    b->base.free = llm_cpu_free;
    b->base.num_blocks = (int) n_blocks;
    b->base.block_bytes = per_block;
    b->m = m;
    b->k = llm_cpu_kernels_select();
    b->layer_elems = n_blocks * LLM_BLOCK_SIZE * c->n_kv_heads * c->head_dim;
    /* calloc: untouched blocks stay unbacked until the cache grows into them */
    b->kv = calloc(2 * (size_t) c->n_layers, b->layer_elems * sizeof(float));
    if (b->kv == NULL) {
        llm_errf(err, "cpu backend: cannot allocate a %zu MiB KV cache",
                 2 * (size_t) c->n_layers * b->layer_elems * sizeof(float)
                 >> 20);
        free(b);
        return NULL;
    }
    b->inv_freq = llm_xmalloc(sizeof(float) * (c->head_dim / 2));
    llm_rope_inv_freq(c, b->inv_freq);
    llm_cpu_pack_weights(b);

    n_threads = cfg->threads > 0 ? cfg->threads : 1;
    b->tp = llm_threadpool_create(n_threads);
    n_threads = llm_threadpool_size(b->tp);
    b->scratch = llm_xcalloc(n_threads, sizeof(float *));
    llm_cpu_reserve_scratch(b, 1);
    return &b->base;
}
