/*
 * cu_testmodel.c -- random in-memory models (see cu_testmodel.h).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cu_testmodel.h"
#include "util/util.h"


typedef struct {
    uint64_t  s;
    char     *arena;
    size_t    used;
} llm_tm;


static uint64_t
llm_tm_next(llm_tm *g)
{
    uint64_t  z = (g->s += 0x9e3779b97f4a7c15ULL);

    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}


/* an approximately normal deviate: Irwin-Hall of four 16-bit uniforms */
static float
llm_tm_gauss(llm_tm *g)
{
    uint64_t  r = llm_tm_next(g);
    float     u = 0.0f;
    int       i;

    for (i = 0; i < 4; i++) {
        u += (float) ((r >> (16 * i)) & 0xffff) / 65536.0f;
    }
    return (u - 2.0f) * 1.7320508f;
}


static void *
llm_tm_alloc(llm_tm *g, size_t bytes)
{
    void  *p = g->arena ? g->arena + g->used : NULL;

    g->used += (bytes + 63) / 64 * 64;
    return p;
}


/* A matrix (cols > 0) of std `std`, or a vector of 1 + std noise (norm
 * weights, f32) or of std noise (bias = 1). */
static void
llm_tm_tensor(llm_tm *g, llm_tensor *t, int rows, int cols, llm_dtype dt,
    float std, int vec, int bias)
{
    size_t  n = (size_t) rows * cols, i;
    float   v;

    t->rows = rows;
    t->cols = cols;
    t->dtype = vec ? LLM_DTYPE_F32 : dt;
    t->data = llm_tm_alloc(g, n * llm_dtype_size(t->dtype));
    if (t->data == NULL) {
        return;
    }
    for (i = 0; i < n; i++) {
        v = std * llm_tm_gauss(g) + (vec && !bias ? 1.0f : 0.0f);
        switch (t->dtype) {
        case LLM_DTYPE_BF16:
            ((uint16_t *) t->data)[i] = llm_f32_to_bf16(v);
            break;
        case LLM_DTYPE_F16:
            ((uint16_t *) t->data)[i] = llm_f32_to_f16(v);
            break;
        default:
            ((float *) t->data)[i] = v;
        }
    }
}


static void
llm_tm_weights(llm_tm *g, llm_model *m, llm_dtype dt)
{
    const llm_config  *c = &m->config;
    llm_weights       *w = &m->weights;
    int                L, H = c->hidden, qd = c->n_heads * c->head_dim;
    int                kvd = c->n_kv_heads * c->head_dim;
    float              sh = 1.0f / sqrtf((float) H);

    llm_tm_tensor(g, &w->embed, c->vocab_size, H, dt, 1.0f, 0, 0);
    if (c->tie_embeddings) {
        w->lm_head = w->embed;
    } else {
        llm_tm_tensor(g, &w->lm_head, c->vocab_size, H, dt, 4.0f * sh, 0, 0);
    }
    llm_tm_tensor(g, &w->final_norm, 1, H, dt, 0.1f, 1, 0);
    for (L = 0; L < c->n_layers; L++) {
        llm_layer_weights  *l = &w->layers[L];

        llm_tm_tensor(g, &l->attn_norm, 1, H, dt, 0.1f, 1, 0);
        llm_tm_tensor(g, &l->wq, qd, H, dt, sh, 0, 0);
        llm_tm_tensor(g, &l->wk, kvd, H, dt, sh, 0, 0);
        llm_tm_tensor(g, &l->wv, kvd, H, dt, sh, 0, 0);
        if (c->qkv_bias) {
            llm_tm_tensor(g, &l->bq, 1, qd, dt, 0.1f, 1, 1);
            llm_tm_tensor(g, &l->bk, 1, kvd, dt, 0.1f, 1, 1);
            llm_tm_tensor(g, &l->bv, 1, kvd, dt, 0.1f, 1, 1);
        }
        if (c->qk_norm) {
            llm_tm_tensor(g, &l->q_norm, 1, c->head_dim, dt, 0.1f, 1, 0);
            llm_tm_tensor(g, &l->k_norm, 1, c->head_dim, dt, 0.1f, 1, 0);
        }
        llm_tm_tensor(g, &l->wo, H, qd, dt, 1.0f / sqrtf((float) qd), 0, 0);
        llm_tm_tensor(g, &l->ffn_norm, 1, H, dt, 0.1f, 1, 0);
        llm_tm_tensor(g, &l->w_gate, c->intermediate, H, dt, sh, 0, 0);
        llm_tm_tensor(g, &l->w_up, c->intermediate, H, dt, sh, 0, 0);
        llm_tm_tensor(g, &l->w_down, H, c->intermediate, dt,
                      1.0f / sqrtf((float) c->intermediate), 0, 0);
    }
}


llm_model *
llm_cu_test_model(const llm_cu_test_spec *sp)
{
    llm_model   *m = llm_xcalloc(1, sizeof(*m));
    llm_config  *c = &m->config;
    llm_tm       g = { 0 };

    c->arch = sp->arch;
    c->vocab_size = sp->vocab;
    c->hidden = sp->hidden;
    c->n_layers = sp->layers;
    c->n_heads = sp->heads;
    c->n_kv_heads = sp->kv_heads;
    c->head_dim = sp->head_dim;
    c->intermediate = sp->intermediate;
    c->max_position_embeddings = 4096;
    c->rms_eps = sp->arch == LLM_ARCH_QWEN2 || sp->arch == LLM_ARCH_QWEN3
                 ? 1e-6f : 1e-5f;
    c->rope_theta = sp->rope_llama3 ? 500000.0f : 10000.0f;
    c->rope_llama3 = sp->rope_llama3;
    c->rope_factor = 8.0f;
    c->rope_low_freq_factor = 1.0f;
    c->rope_high_freq_factor = 4.0f;
    c->rope_original_max_pos = 8192;
    c->sliding_window = sp->window;
    c->tie_embeddings = sp->tie;
    c->qkv_bias = sp->arch == LLM_ARCH_QWEN2;
    c->qk_norm = sp->arch == LLM_ARCH_QWEN3;
    m->gen.bos_id = -1;
    m->weights.layers = llm_xcalloc(sp->layers, sizeof(llm_layer_weights));

    /* measure, allocate, fill */
    g.s = sp->seed;
    llm_tm_weights(&g, m, sp->dtype);
    g.arena = llm_xmalloc(g.used);
    g.used = 0;
    g.s = sp->seed;
    llm_tm_weights(&g, m, sp->dtype);
    m->f32_store = (float *) g.arena;
    return m;
}


void
llm_cu_test_model_free(llm_model *m)
{
    if (m) {
        free(m->f32_store);
        free(m->weights.layers);
        free(m);
    }
}
