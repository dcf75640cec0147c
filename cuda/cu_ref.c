/*
 * cu_ref.c -- the host reference of the CUDA backend (see cu_ref.h).
 *
 * Each op is the plainest loop that computes what its GPU kernel must, in
 * the GPU's data layout and decomposition: the split-K attention really
 * computes per-split partials and merges them, with the split bounds the
 * kernel derives from the position, so a planning mistake shows here.  T
 * tensors are floats, rounded through bf16/f16 unless exact.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cu_backend.h"
#include "cu_ref.h"
#include "cu_util.h"
#include "cu_weights.h"
#include "model/rope.h"
#include "util/util.h"


typedef struct {
    llm_backend      base;
    const llm_model *m;
    llm_cu_ref_opts  opt;
    llm_cu_state     s;
    llm_cu_planner   plan;
    char            *wmem, *bmem;
    int32_t         *md;
    int              md_cap;
    char             err[LLM_ERR_LEN];
} llm_cu_ref;


void
llm_cu_ref_opts_default(llm_cu_ref_opts *o)
{
    o->exact = 0;
    o->cap_tok = LLM_CU_DEFAULT_MAX_TOKENS;
    o->cap_logits = LLM_CU_DEFAULT_MAX_LOGITS;
    o->prefill_min_q = LLM_CU_DEFAULT_PREFILL_MIN_Q;
    o->graph_max = LLM_CU_DEFAULT_GRAPH_MAX;
    o->n_sm = 132;
}


static float
llm_cu_round(const llm_cu_ref *r, float v)
{
    if (r->opt.exact) {
        return v;
    }
    return r->s.t_f16 ? llm_f16_to_f32(llm_f32_to_f16(v))
                      : llm_bf16_to_f32(llm_f32_to_bf16(v));
}


float
llm_cu_ref_round(llm_backend *b, float v)
{
    return llm_cu_round((llm_cu_ref *) b, v);
}


llm_cu_state *
llm_cu_ref_state(llm_backend *b)
{
    return &((llm_cu_ref *) b)->s;
}


/* ---- ops ----------------------------------------------------------------- */


static int
llm_ref_embed(void *ctx, const llm_cu_state *s, const int32_t *tokens, int n)
{
    const float  *e = s->embed;
    int           i;

    for (i = 0; i < n; i++) {
        memcpy(s->x + (size_t) i * s->H, e + (size_t) tokens[i] * s->H,
               sizeof(float) * s->H);
    }
    return 0;
}


static void
llm_ref_norm_row(float *out, const float *x, const float *w, int n,
    float eps)
{
    float  ss = 0.0f, r;
    int    k;

    for (k = 0; k < n; k++) {
        ss += x[k] * x[k];
    }
    r = 1.0f / sqrtf(ss / (float) n + eps);
    for (k = 0; k < n; k++) {
        out[k] = x[k] * r * w[k];
    }
}


static int
llm_ref_rmsnorm(void *ctx, const llm_cu_state *s, float *x, const float *delta,
    const float *w, const int32_t *rows, int n, void *out)
{
    llm_cu_ref  *r = ctx;
    float       *o = out, *xr;
    int          i, k, row;

    for (i = 0; i < n; i++) {
        row = rows ? rows[i] : i;
        xr = x + (size_t) row * s->H;
        if (delta) {
            for (k = 0; k < s->H; k++) {
                xr[k] += delta[(size_t) row * s->H + k];
            }
        }
        llm_ref_norm_row(o + (size_t) i * s->H, xr, w, s->H, s->c->rms_eps);
        for (k = 0; k < s->H; k++) {
            o[(size_t) i * s->H + k] = llm_cu_round(r,
                                                    o[(size_t) i * s->H + k]);
        }
    }
    return 0;
}


static int
llm_ref_gemm(void *ctx, const llm_cu_state *s, const void *in, int n, int k,
    const void *w, int nout, float *out)
{
    const float  *x = in, *wt = w;
    int           i, j, kk;
    float         acc;

    for (i = 0; i < n; i++) {
        for (j = 0; j < nout; j++) {
            acc = 0.0f;
            for (kk = 0; kk < k; kk++) {
                acc += x[(size_t) i * k + kk] * wt[(size_t) j * k + kk];
            }
            out[(size_t) i * nout + j] = acc;
        }
    }
    return 0;
}


static void
llm_ref_rope(float *v, int p, const float *inv_freq, int hd)
{
    int    i, half = hd / 2;
    float  a, cs, sn, x1, x2;

    for (i = 0; i < half; i++) {
        a = (float) p * inv_freq[i];
        cs = cosf(a);
        sn = sinf(a);
        x1 = v[i];
        x2 = v[i + half];
        v[i] = x1 * cs - x2 * sn;
        v[i + half] = x2 * cs + x1 * sn;
    }
}


static int
llm_ref_qkv_post(void *ctx, const llm_cu_state *s, int layer,
    const float *qkv, const llm_cu_md *md, int n, void *kc, void *vc)
{
    llm_cu_ref          *r = ctx;
    const llm_cu_layer  *l = &s->layers[layer];
    float                head[LLM_CU_MAX_HEAD_DIM], *q = s->q, *att = s->att;
    float               *kcache = kc, *vcache = vc;
    int                  i, h, d, hd = s->hd, p, slot;
    size_t               off;

    /* every attention row must be written by one of the two kernels */
    for (i = 0; i < n * s->qd; i++) {
        att[i] = NAN;
    }
    for (i = 0; i < n; i++) {
        const float  *row = qkv + (size_t) i * s->qkvd;

        p = md->pos[i];
        slot = md->slot[i];
        for (h = 0; h < s->nh + 2 * s->nkv; h++) {
            for (d = 0; d < hd; d++) {
                head[d] = row[h * hd + d] + (l->bqkv ? l->bqkv[h * hd + d]
                                                     : 0.0f);
            }
            if (h < s->nh + s->nkv && l->q_norm) {
                llm_ref_norm_row(head, head, h < s->nh ? l->q_norm : l->k_norm,
                                 hd, s->c->rms_eps);
            }
            if (h < s->nh + s->nkv) {
                llm_ref_rope(head, p, s->inv_freq, hd);
            }
            if (h < s->nh) {
                for (d = 0; d < hd; d++) {
                    q[(size_t) i * s->qd + h * hd + d] = llm_cu_round(r,
                                                                   head[d]);
                }
                continue;
            }
            off = ((size_t) (slot / LLM_BLOCK_SIZE) * s->nkv
                   + (h - s->nh) % s->nkv) * LLM_BLOCK_SIZE
                  + slot % LLM_BLOCK_SIZE;
            for (d = 0; d < hd; d++) {
                (h < s->nh + s->nkv ? kcache : vcache)[off * hd + d]
                    = llm_cu_round(r, head[d]);
            }
        }
    }
    return 0;
}


/* Online softmax of query q (already scaled) over keys [lo, hi) of one
 * cache block run: updates max m, sum l and the unnormalized acc. */
static void
llm_ref_attend_keys(const llm_cu_state *s, const float *q, const float *kc,
    const float *vc, const int32_t *bt, int g, int lo, int hi, float *m,
    float *l, float *acc)
{
    int           j, d, hd = s->hd;
    float         sc, nm, e;
    const float  *k, *v;
    size_t        off;

    for (j = lo; j < hi; j++) {
        off = (((size_t) bt[j / LLM_BLOCK_SIZE] * s->nkv + g) * LLM_BLOCK_SIZE
               + j % LLM_BLOCK_SIZE) * hd;
        k = kc + off;
        v = vc + off;
        sc = 0.0f;
        for (d = 0; d < hd; d++) {
            sc += q[d] * k[d];
        }
        nm = sc > *m ? sc : *m;
        e = expf(*m - nm);                  /* 0 for the first key */
        *l = *l * e + expf(sc - nm);
        for (d = 0; d < hd; d++) {
            acc[d] = acc[d] * e + expf(sc - nm) * v[d];
        }
        *m = nm;
    }
}


static int
llm_ref_attn_split(void *ctx, const llm_cu_state *s, const llm_cu_md *md,
    int n_split, int max_splits, const void *kc, const void *vc)
{
    llm_cu_ref  *r = ctx;
    const float *qall = s->q;
    float       *att = s->att, q[LLM_CU_MAX_HEAD_DIM], *acc, *ml;
    float        scale = 1.0f / sqrtf((float) s->hd), M, L, w;
    int          ti, t, h, d, sp, p, j0, lo, per, ns, blo, bhi, hd = s->hd;
    int          gs = s->nh / s->nkv, window = s->c->sliding_window;
    size_t       pi;
    const int32_t *bt;

    if ((size_t) n_split * s->nh * max_splits > s->cap_part) {
        llm_cu_errf(r->err, "reference: %d split rows x %d splits exceed "
                    "the partials buffer", n_split, max_splits);
        return -1;
    }
    for (ti = 0; ti < n_split; ti++) {
        t = md->split_tok[ti];
        p = md->pos[t];
        bt = md->bt + md->bt_off[md->tok_seq[t]];
        j0 = llm_cu_window_start(p, window);
        llm_cu_split_range(p, window, max_splits, &lo, &per, &ns);
        for (h = 0; h < s->nh; h++) {
            for (d = 0; d < hd; d++) {
                q[d] = qall[(size_t) t * s->qd + h * hd + d] * scale;
            }
            for (sp = 0; sp < ns; sp++) {
                pi = ((size_t) ti * s->nh + h) * max_splits + sp;
                ml = s->part_ml + 2 * pi;
                acc = s->part_acc + pi * hd;
                ml[0] = -INFINITY;
                ml[1] = 0.0f;
                memset(acc, 0, sizeof(float) * hd);
                blo = (lo + sp * per) * LLM_BLOCK_SIZE;
                bhi = (lo + (sp + 1) * per) * LLM_BLOCK_SIZE;
                llm_ref_attend_keys(s, q, kc, vc, bt, h / gs,
                                    blo > j0 ? blo : j0,
                                    bhi < p + 1 ? bhi : p + 1,
                                    &ml[0], &ml[1], acc);
            }
            /* merge */
            pi = ((size_t) ti * s->nh + h) * max_splits;
            M = -INFINITY;
            for (sp = 0; sp < ns; sp++) {
                M = fmaxf(M, s->part_ml[2 * (pi + sp)]);
            }
            for (d = 0; d < hd; d++) {
                float  o = 0.0f;

                L = 0.0f;
                for (sp = 0; sp < ns; sp++) {
                    w = expf(s->part_ml[2 * (pi + sp)] - M);
                    L += w * s->part_ml[2 * (pi + sp) + 1];
                    o += w * s->part_acc[(pi + sp) * hd + d];
                }
                att[(size_t) t * s->qd + h * hd + d] = llm_cu_round(r, o / L);
            }
        }
    }
    return 0;
}


static int
llm_ref_attn_prefill(void *ctx, const llm_cu_state *s, const llm_cu_md *md,
    int n_items, const void *kc, const void *vc)
{
    llm_cu_ref  *r = ctx;
    float        q[LLM_CU_MAX_HEAD_DIM], acc[LLM_CU_MAX_HEAD_DIM], m, l;
    float        scale = 1.0f / sqrtf((float) s->hd);
    int          it, seq, q0, i, t, h, d, p, nq, hd = s->hd;
    int          gs = s->nh / s->nkv;

    for (it = 0; it < n_items; it++) {
        seq = md->items[2 * it];
        q0 = md->items[2 * it + 1];
        nq = md->seq_nq[seq] - q0 < LLM_CU_PREFILL_BQ
             ? md->seq_nq[seq] - q0 : LLM_CU_PREFILL_BQ;
        for (i = 0; i < nq; i++) {
            t = md->seq_start[seq] + q0 + i;
            p = md->pos[t];
            for (h = 0; h < s->nh; h++) {
                const float  *qs = (const float *) s->q
                                   + (size_t) t * s->qd + h * hd;

                for (d = 0; d < hd; d++) {
                    q[d] = qs[d] * scale;
                    acc[d] = 0.0f;
                }
                m = -INFINITY;
                l = 0.0f;
                llm_ref_attend_keys(s, q, kc, vc, md->bt + md->bt_off[seq],
                                    h / gs,
                                    llm_cu_window_start(p,
                                                     s->c->sliding_window),
                                    p + 1, &m, &l, acc);
                for (d = 0; d < hd; d++) {
                    ((float *) s->att)[(size_t) t * s->qd + h * hd + d]
                        = llm_cu_round(r, acc[d] / l);
                }
            }
        }
    }
    return 0;
}


static int
llm_ref_silu_mul(void *ctx, const llm_cu_state *s, const float *gu, int n,
    void *out)
{
    llm_cu_ref  *r = ctx;
    float       *o = out, g, u;
    int          i, j;

    for (i = 0; i < n; i++) {
        for (j = 0; j < s->I; j++) {
            g = gu[(size_t) i * 2 * s->I + j];
            u = gu[(size_t) i * 2 * s->I + s->I + j];
            o[(size_t) i * s->I + j] = llm_cu_round(r, g / (1.0f + expf(-g))
                                                       * u);
        }
    }
    return 0;
}


const llm_cu_ops llm_cu_ref_ops = {
    llm_ref_embed,
    llm_ref_rmsnorm,
    llm_ref_gemm,
    llm_ref_qkv_post,
    llm_ref_attn_split,
    llm_ref_attn_prefill,
    llm_ref_silu_mul,
};


/* ---- the backend ----------------------------------------------------------- */


static float
llm_ref_elem(const llm_tensor *t, size_t i)
{
    switch (t->dtype) {
    case LLM_DTYPE_BF16:
        return llm_bf16_to_f32(((const uint16_t *) t->data)[i]);
    case LLM_DTYPE_F16:
        return llm_f16_to_f32(((const uint16_t *) t->data)[i]);
    default:
        return ((const float *) t->data)[i];
    }
}


static void
llm_ref_upload(llm_cu_ref *r)
{
    llm_cu_seg  *segs = llm_cu_xcalloc(llm_cu_seg_count(r->m),
                                       sizeof(llm_cu_seg));
    int          n = llm_cu_segments(&r->s, r->m, segs), i;
    size_t       e, cnt;

    for (i = 0; i < n; i++) {
        float  *dst = (float *) segs[i].dst
                      + (size_t) segs[i].dst_row * (segs[i].vec ? 1
                                                     : segs[i].cols);

        cnt = (size_t) segs[i].rows * segs[i].cols;
        for (e = 0; e < cnt; e++) {
            dst[e] = segs[i].vec ? ((const float *) segs[i].src->data)[e]
                                 : llm_cu_round(r, llm_ref_elem(segs[i].src,
                                                                e));
        }
    }
    free(segs);
    llm_rope_inv_freq(&r->m->config, r->s.inv_freq);
}


static int
llm_ref_run(llm_cu_ref *r, const llm_batch *b, float *logits, char *err)
{
    llm_cu_step  st;
    int          tok0, k, rc;

    if (llm_cu_plan_begin(&r->plan, b, err) != 0) {
        return -1;
    }
    for (tok0 = 0; tok0 < b->n_tokens; tok0 += st.n_tok) {
        while ((rc = llm_cu_plan_step(&r->plan, b, tok0, &st, r->md,
                                      r->md_cap)) == 1)
        {
            r->md = llm_cu_xrealloc(r->md, sizeof(int32_t) * st.n_md);
            r->md_cap = st.n_md;
        }
        if (llm_cu_forward_step(&llm_cu_ref_ops, r, &r->s, &st, r->md)
            != 0)
        {
            llm_cu_errf(err, "%s", r->err);
            return -1;
        }
        for (k = 0; k < st.n_logits; k++) {
            memcpy(logits + (size_t) r->plan.logits_idx[k] * r->s.V,
                   r->s.logits + (size_t) k * r->s.V, sizeof(float) * r->s.V);
        }
    }
    return 0;
}


static int
llm_ref_forward(llm_backend *base, const llm_batch *b, float *logits,
    char *err)
{
    return llm_ref_run((llm_cu_ref *) base, b, logits, err);
}


static void
llm_ref_free(llm_backend *base)
{
    llm_cu_ref  *r = (llm_cu_ref *) base;

    if (r == NULL) {
        return;
    }
    llm_cu_planner_free(&r->plan);
    free(r->s.layers);
    free(r->s.kv);
    free(r->wmem);
    free(r->bmem);
    free(r->md);
    free(r);
}


llm_backend *
llm_cu_ref_create(const llm_model *m, const llm_backend_config *cfg,
    const llm_cu_ref_opts *o, char *err)
{
    llm_cu_ref       *r = llm_cu_xcalloc(1, sizeof(*r));
    llm_cu_state     *s = &r->s;
    llm_cu_plan_cfg   pc;
    size_t            n_blocks, block_bytes;
    int               gs;

    r->m = m;
    r->opt = *o;
    s->tsize = sizeof(float);
    s->t_f16 = m->weights.embed.dtype == LLM_DTYPE_F16;
    if (llm_cu_state_dims(s, m, err) != 0) {
        free(r);
        return NULL;
    }
    s->layers = llm_cu_xcalloc(s->n_layers, sizeof(llm_cu_layer));
    r->wmem = llm_cu_xcalloc(1, llm_cu_weights_carve(s, m, NULL));
    llm_cu_weights_carve(s, m, r->wmem);
    llm_ref_upload(r);

    block_bytes = llm_cu_block_bytes(&m->config, sizeof(float));
    n_blocks = cfg->kv_bytes / block_bytes;
    if (n_blocks < (size_t) cfg->min_blocks) {
        n_blocks = (size_t) cfg->min_blocks;
    }
    s->n_blocks = (int) n_blocks + 1;
    s->kv_layer_elems = (size_t) s->n_blocks * s->nkv * LLM_BLOCK_SIZE
                        * s->hd;
    s->kv = llm_cu_xcalloc(2 * (size_t) s->n_layers * s->kv_layer_elems,
                           sizeof(float));

    gs = s->nh / s->nkv;
    pc.cap_tok = o->cap_tok;
    pc.cap_logits = o->cap_logits;
    pc.n_sm = o->n_sm;
    pc.prefill_min_q = o->prefill_min_q;
    pc.graph_max = o->graph_max;
    pc.num_blocks = (int) n_blocks;
    pc.pad_block = (int) n_blocks;
    pc.window = m->config.sliding_window;
    pc.vocab = s->V;
    pc.nkv = s->nkv;
    pc.n_chunks = (gs + llm_cu_head_chunk(s->hd) - 1)
                  / llm_cu_head_chunk(s->hd);
    llm_cu_planner_init(&r->plan, &pc);

    s->cap_tok = o->cap_tok;
    s->cap_logits = o->cap_logits;
    s->cap_part = llm_cu_part_cap(o->cap_tok, s->nh, s->nkv, pc.n_chunks,
                                  o->n_sm);
    r->bmem = llm_cu_xcalloc(1, llm_cu_buffers_carve(s, NULL));
    llm_cu_buffers_carve(s, r->bmem);

    r->base.name = o->exact ? "cuda-ref-exact" : "cuda-ref";
    r->base.num_blocks = (int) n_blocks;
    r->base.block_bytes = block_bytes;
    r->base.forward = llm_ref_forward;
    r->base.free = llm_ref_free;
    return &r->base;
}
