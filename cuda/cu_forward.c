/*
 * cu_forward.c -- the forward pass of the CUDA backend as a sequence of ops,
 * run by the GPU (cu_backend.cu, also under CUDA-graph capture) and by the
 * host reference (cu_ref.c) alike.
 *
 * Per layer, with x the f32 residual stream and `big` the f32 GEMM output
 * buffer that every projection reuses:
 *   xn = T(norm(x += big))           (big: the previous layer's MLP output)
 *   big = xn . Wqkv^T;  q, K/V cache = rope(norm(big + bias))
 *   att = attention(q, cache)        (split-K rows and prefill tiles)
 *   big = att . Wo^T;  xn = T(norm(x += big))
 *   big = xn . Wgu^T;  act = T(silu(gate) * up);  big = act . Wdown^T
 * then for the logits rows only: xl = T(norm(x += big)), logits = xl . Wlm^T.
 * Adding each residual inside the next norm saves a pass over x per layer.
 */
#include "cu_state.h"

#define LLM_CU_OP(call)                                                      \
    do {                                                                     \
        if ((call) != 0) {                                                   \
            return -1;                                                       \
        }                                                                    \
    } while (0)


void *
llm_cu_kv_layer(const llm_cu_state *s, int layer, int v)
{
    return (char *) s->kv
           + (size_t) (2 * layer + v) * s->kv_layer_elems * s->tsize;
}


int
llm_cu_forward_step(const llm_cu_ops *o, void *ctx, const llm_cu_state *s,
    const llm_cu_step *st, const int32_t *md_base)
{
    llm_cu_md  md;
    int        L, n = st->n_pad;

    llm_cu_md_bind(&md, st, md_base);
    LLM_CU_OP(o->embed(ctx, s, md.tokens, n));
    for (L = 0; L < s->n_layers; L++) {
        const llm_cu_layer  *l = &s->layers[L];
        void                *kc = llm_cu_kv_layer(s, L, 0);
        void                *vc = llm_cu_kv_layer(s, L, 1);

        LLM_CU_OP(o->rmsnorm(ctx, s, s->x, L > 0 ? s->big : NULL,
                             l->attn_norm, NULL, n, s->xn));
        LLM_CU_OP(o->gemm(ctx, s, s->xn, n, s->H, l->wqkv, s->qkvd, s->big));
        LLM_CU_OP(o->qkv_post(ctx, s, L, s->big, &md, n, kc, vc));
        if (st->n_split > 0) {
            LLM_CU_OP(o->attn_split(ctx, s, &md, st->n_split, st->max_splits,
                                    kc, vc));
        }
        if (st->n_items > 0) {
            LLM_CU_OP(o->attn_prefill(ctx, s, &md, st->n_items, kc, vc));
        }
        LLM_CU_OP(o->gemm(ctx, s, s->att, n, s->qd, l->wo, s->H, s->big));
        LLM_CU_OP(o->rmsnorm(ctx, s, s->x, s->big, l->ffn_norm, NULL, n,
                             s->xn));
        LLM_CU_OP(o->gemm(ctx, s, s->xn, n, s->H, l->wgu, 2 * s->I,
                          s->big));
        LLM_CU_OP(o->silu_mul(ctx, s, s->big, n, s->act));
        LLM_CU_OP(o->gemm(ctx, s, s->act, n, s->I, l->wdown, s->H, s->big));
    }
    if (st->n_logits_pad > 0) {
        LLM_CU_OP(o->rmsnorm(ctx, s, s->x, s->big, s->final_norm, md.rows,
                             st->n_logits_pad, s->xl));
        LLM_CU_OP(o->gemm(ctx, s, s->xl, st->n_logits_pad, s->H, s->lm_head,
                          s->V, s->logits));
    }
    return 0;
}
