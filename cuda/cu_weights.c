/*
 * cu_weights.c -- the layout of the CUDA backend's allocations (see
 * cu_weights.h).  Every carved tensor starts on a 256-byte boundary, which
 * the vector loads and tensor-core tiles of the kernels rely on.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "cu_plan.h"
#include "cu_util.h"
#include "cu_weights.h"

#define LLM_CU_ALIGN 256


static void *
llm_cu_carve(char *base, size_t *off, size_t bytes)
{
    void  *p = base ? base + *off : NULL;

    *off = llm_cu_align(*off + bytes, LLM_CU_ALIGN);
    return p;
}


/* The kernels read f32, f16 and bf16 weights only: a model with matrices
 * in a block format (llm_weights, a quantized GGUF) is refused, naming the
 * first such tensor, until the backend has kernels for them.  (This
 * library does not link the engine, so the names are spelled here.) */
static int
llm_cu_refuse_blocks(const llm_model *m, char *err)
{
    static const char  *names[] = { "q_proj", "k_proj", "v_proj", "o_proj",
                                    "gate_proj", "up_proj", "down_proj" };
    static const char  *types[] = { "Q8_0", "Q4_0", "Q4_K", "Q5_K", "Q6_K" };
    const llm_tensor   *t = NULL;
    char                what[64];
    int                 L, i;

    if (m->weights.embed.dtype > LLM_DTYPE_BF16) {
        t = &m->weights.embed;
        snprintf(what, sizeof(what), "the token embedding");
    } else if (m->weights.lm_head.dtype > LLM_DTYPE_BF16) {
        t = &m->weights.lm_head;
        snprintf(what, sizeof(what), "lm_head");
    }
    for (L = 0; t == NULL && L < m->config.n_layers; L++) {
        const llm_layer_weights  *l = &m->weights.layers[L];
        const llm_tensor         *ts[7] = { &l->wq, &l->wk, &l->wv, &l->wo,
                                            &l->w_gate, &l->w_up,
                                            &l->w_down };

        for (i = 0; i < 7 && t == NULL; i++) {
            if (ts[i]->dtype > LLM_DTYPE_BF16) {
                t = ts[i];
                snprintf(what, sizeof(what), "layer %d's %s", L, names[i]);
            }
        }
    }
    if (t == NULL) {
        return 0;
    }
    llm_cu_errf(err, "cuda backend: quantized weights are not supported "
                "(%s is %s); use llm_device cpu, or keep the weights as "
                "stored (no llm_weights)", what,
                t->dtype - LLM_DTYPE_Q8_0 < 5
                ? types[t->dtype - LLM_DTYPE_Q8_0] : "a block format");
    return -1;
}


int
llm_cu_state_dims(llm_cu_state *s, const llm_model *m, char *err)
{
    const llm_config  *c = &m->config;

    if (llm_cu_refuse_blocks(m, err) != 0) {
        return -1;
    }

    s->c = c;
    s->H = c->hidden;
    s->I = c->intermediate;
    s->V = c->vocab_size;
    s->hd = c->head_dim;
    s->nh = c->n_heads;
    s->nkv = c->n_kv_heads;
    s->qd = c->n_heads * c->head_dim;
    s->kvd = c->n_kv_heads * c->head_dim;
    s->qkvd = s->qd + 2 * s->kvd;
    s->n_layers = c->n_layers;
    if (c->head_dim % 16 != 0 || c->head_dim > LLM_CU_MAX_HEAD_DIM
        || c->head_dim <= 0)
    {
        llm_cu_errf(err, "cuda backend: head_dim %d is not supported (a "
                    "multiple of 16 up to %d is)", c->head_dim,
                    LLM_CU_MAX_HEAD_DIM);
        return -1;
    }
    if (c->n_kv_heads <= 0 || c->n_heads % c->n_kv_heads != 0) {
        llm_cu_errf(err, "cuda backend: %d heads are not a multiple of %d KV "
                    "heads", c->n_heads, c->n_kv_heads);
        return -1;
    }
    return 0;
}


size_t
llm_cu_weights_carve(llm_cu_state *s, const llm_model *m, char *base)
{
    const llm_config  *c = &m->config;
    size_t             off = 0, ts = s->tsize;
    int                L;

    s->embed = llm_cu_carve(base, &off, (size_t) s->V * s->H * ts);
    s->lm_head = c->tie_embeddings
                 ? s->embed
                 : llm_cu_carve(base, &off, (size_t) s->V * s->H * ts);
    s->final_norm = llm_cu_carve(base, &off, sizeof(float) * s->H);
    s->inv_freq = llm_cu_carve(base, &off, sizeof(float) * (s->hd / 2));
    for (L = 0; L < s->n_layers; L++) {
        llm_cu_layer  *l = &s->layers[L];

        l->wqkv = llm_cu_carve(base, &off, (size_t) s->qkvd * s->H * ts);
        l->wo = llm_cu_carve(base, &off, (size_t) s->H * s->qd * ts);
        l->wgu = llm_cu_carve(base, &off, (size_t) 2 * s->I * s->H * ts);
        l->wdown = llm_cu_carve(base, &off, (size_t) s->H * s->I * ts);
        l->attn_norm = llm_cu_carve(base, &off, sizeof(float) * s->H);
        l->ffn_norm = llm_cu_carve(base, &off, sizeof(float) * s->H);
        l->bqkv = c->qkv_bias
                  ? llm_cu_carve(base, &off, sizeof(float) * s->qkvd) : NULL;
        l->q_norm = c->qk_norm
                    ? llm_cu_carve(base, &off, sizeof(float) * s->hd) : NULL;
        l->k_norm = c->qk_norm
                    ? llm_cu_carve(base, &off, sizeof(float) * s->hd) : NULL;
    }
    return off;
}


size_t
llm_cu_buffers_carve(llm_cu_state *s, char *base)
{
    size_t  off = 0, ts = s->tsize, n = (size_t) s->cap_tok;
    size_t  nl = (size_t) s->cap_logits;
    size_t  wide = (size_t) s->qkvd;

    if ((size_t) 2 * s->I > wide) {
        wide = (size_t) 2 * s->I;
    }
    if ((size_t) s->H > wide) {
        wide = (size_t) s->H;
    }
    s->x = llm_cu_carve(base, &off, sizeof(float) * n * s->H);
    s->xn = llm_cu_carve(base, &off, ts * n * s->H);
    s->big = llm_cu_carve(base, &off, sizeof(float) * n * wide);
    s->q = llm_cu_carve(base, &off, ts * n * s->qd);
    s->att = llm_cu_carve(base, &off, ts * n * s->qd);
    s->act = llm_cu_carve(base, &off, ts * n * s->I);
    s->xl = llm_cu_carve(base, &off, ts * nl * s->H);
    s->logits = llm_cu_carve(base, &off, sizeof(float) * nl * s->V);
    s->ids = llm_cu_carve(base, &off, sizeof(int32_t) * nl);
    s->part_ml = llm_cu_carve(base, &off, sizeof(float) * 2 * s->cap_part);
    s->part_acc = llm_cu_carve(base, &off,
                               sizeof(float) * s->cap_part * s->hd);
    return off;
}


static void
llm_cu_seg_mat(llm_cu_seg *g, const llm_tensor *t, void *dst, int dst_row)
{
    g->src = t;
    g->dst = dst;
    g->dst_row = dst_row;
    g->rows = t->rows;
    g->cols = t->cols;
    g->vec = 0;
}


/* dst_row of a vector is its element offset in dst */
static int
llm_cu_seg_vec(llm_cu_seg *g, const llm_tensor *t, void *dst, int off,
    int n)
{
    if (t->data == NULL) {
        return 0;
    }
    g->src = t;
    g->dst = dst;
    g->dst_row = off;
    g->rows = 1;
    g->cols = n;
    g->vec = 1;
    return 1;
}


int
llm_cu_seg_count(const llm_model *m)
{
    return 4 + m->config.n_layers * 12;
}


int
llm_cu_segments(const llm_cu_state *s, const llm_model *m, llm_cu_seg *segs)
{
    const llm_weights  *w = &m->weights;
    int                 n = 0, L;

    llm_cu_seg_mat(&segs[n++], &w->embed, s->embed, 0);
    if (!m->config.tie_embeddings) {
        llm_cu_seg_mat(&segs[n++], &w->lm_head, s->lm_head, 0);
    }
    n += llm_cu_seg_vec(&segs[n], &w->final_norm, s->final_norm, 0, s->H);
    for (L = 0; L < s->n_layers; L++) {
        const llm_layer_weights  *l = &w->layers[L];
        const llm_cu_layer       *d = &s->layers[L];

        llm_cu_seg_mat(&segs[n++], &l->wq, d->wqkv, 0);
        llm_cu_seg_mat(&segs[n++], &l->wk, d->wqkv, s->qd);
        llm_cu_seg_mat(&segs[n++], &l->wv, d->wqkv, s->qd + s->kvd);
        llm_cu_seg_mat(&segs[n++], &l->wo, d->wo, 0);
        llm_cu_seg_mat(&segs[n++], &l->w_gate, d->wgu, 0);
        llm_cu_seg_mat(&segs[n++], &l->w_up, d->wgu, s->I);
        llm_cu_seg_mat(&segs[n++], &l->w_down, d->wdown, 0);
        n += llm_cu_seg_vec(&segs[n], &l->attn_norm, d->attn_norm, 0, s->H);
        n += llm_cu_seg_vec(&segs[n], &l->ffn_norm, d->ffn_norm, 0, s->H);
        if (d->bqkv) {
            n += llm_cu_seg_vec(&segs[n], &l->bq, d->bqkv, 0, s->qd);
            n += llm_cu_seg_vec(&segs[n], &l->bk, d->bqkv, s->qd, s->kvd);
            n += llm_cu_seg_vec(&segs[n], &l->bv, d->bqkv, s->qd + s->kvd,
                                s->kvd);
        }
        if (d->q_norm) {
            n += llm_cu_seg_vec(&segs[n], &l->q_norm, d->q_norm, 0, s->hd);
            n += llm_cu_seg_vec(&segs[n], &l->k_norm, d->k_norm, 0, s->hd);
        }
    }
    return n;
}
