/*
 * cu_state.h -- what the CUDA backend's forward pass works on, shared by the
 * GPU build and the host reference (cu_ref.c).
 *
 * One forward pass is written once, in cu_forward.c, as a sequence of ops
 * (embedding, norms, GEMMs, attention, ...) over the buffers of an
 * llm_cu_state.  Two implementations of the ops exist:
 *   - the GPU's (cu_backend.cu): kernels and cuBLAS on device buffers whose
 *     "T" tensors (weights, normed activations, q, attention output, the KV
 *     cache) are bf16 (f16 for f16 models);
 *   - the host reference's (cu_ref.c): plain loops on float buffers, with
 *     every T tensor rounded to bf16/f16 where the GPU stores one (or not at
 *     all: the exact mode, which must equal the CPU backend).
 * The planning (cu_plan.c) and the orchestration are therefore tested on any
 * machine against the CPU backend, and each GPU kernel only has to match its
 * reference op (t/gpu/test_kernels.c).
 *
 * This header is C and compiles with gcc and nvcc alike.
 */
#ifndef LLM_CU_STATE_H
#define LLM_CU_STATE_H

#include <stddef.h>
#include <stdint.h>

#include "backend/batch.h"
#include "model/model.h"

#ifdef __CUDACC__
#define LLM_CU_HD __host__ __device__
#else
#define LLM_CU_HD
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* Head dimensions the kernels support: multiples of 16 up to 256 (every
 * Llama, Mistral and Qwen model; the tensor-core prefill kernel works in
 * 16-wide tiles). */
#define LLM_CU_MAX_HEAD_DIM     256

/* Split-K decode attention: a token's key range is cut into at most
 * max_splits pieces of at least LLM_CU_MIN_SPLIT_BLOCKS cache blocks. */
#define LLM_CU_MAX_SPLITS       32
#define LLM_CU_MIN_SPLIT_BLOCKS 4

/* Prefill attention: query rows per tile (4 warps x 16 rows). */
#define LLM_CU_PREFILL_BQ       64


/* Heads of one KV group handled by one decode-attention block: the kernel
 * keeps heads x head_dim/16 accumulators per thread, at most 64. */
LLM_CU_HD static inline int
llm_cu_head_chunk(int head_dim)
{
    return head_dim > 128 ? 4 : 8;
}


/* First key a query at position p may attend to. */
LLM_CU_HD static inline int
llm_cu_window_start(int p, int window)
{
    return (window > 0 && p - window + 1 > 0) ? p - window + 1 : 0;
}


/* The split of token at position p's key range [j0, p] (j0 from the sliding
 * window): cache blocks b_lo .. p / 16, cut into n_split runs of `per`
 * blocks (the last may be shorter).  Every run holds at least one key the
 * token may attend to, so no split's softmax is empty.  Computed on the
 * device from the position, so a captured CUDA graph stays valid for any
 * context length. */
LLM_CU_HD static inline void
llm_cu_split_range(int p, int window, int max_splits, int *b_lo, int *per,
    int *n_split)
{
    int  lo = llm_cu_window_start(p, window) / LLM_BLOCK_SIZE;
    int  nb = p / LLM_BLOCK_SIZE - lo + 1;
    int  pr = (nb + max_splits - 1) / max_splits;

    if (pr < LLM_CU_MIN_SPLIT_BLOCKS) {
        pr = LLM_CU_MIN_SPLIT_BLOCKS;
    }
    *b_lo = lo;
    *per = pr;
    *n_split = (nb + pr - 1) / pr;
}


/* One layer's weights.  T matrices keep HF's [out][in] layout; q/k/v and
 * gate/up are concatenated so that each pair or triple is one GEMM:
 * wqkv = [wq; wk; wv] (qd + 2 kvd rows), wgu = [w_gate; w_up] (2 I rows). */
typedef struct {
    void         *wqkv;             /* T (qd + 2 kvd, H) */
    void         *wo;               /* T (H, qd) */
    void         *wgu;              /* T (2 I, H) */
    void         *wdown;            /* T (H, I) */
    float        *attn_norm;        /* (H) */
    float        *ffn_norm;         /* (H) */
    float        *bqkv;             /* (qd + 2 kvd) Qwen2 biases, else NULL */
    float        *q_norm, *k_norm;  /* (hd) Qwen3, else NULL */
} llm_cu_layer;


/*
 * Buffers of one backend.  Pointers are device pointers on the GPU, host
 * pointers in the reference; `tsize` is the size of a T element there (2 on
 * the GPU, 4 in the reference, which keeps T tensors as floats).
 */
typedef struct {
    const llm_config  *c;
    int           H, I, V, hd, nh, nkv, qd, kvd, qkvd, n_layers;
    int           t_f16;            /* T is f16 (f16 models), else bf16 */
    size_t        tsize;

    void         *embed;            /* T (V, H) */
    void         *lm_head;          /* T (V, H); == embed when tied */
    float        *final_norm;       /* (H) */
    float        *inv_freq;         /* (hd / 2) RoPE, llama3-scaled */
    llm_cu_layer *layers;           /* host array of n_layers */

    /* KV cache: per layer K then V, each [block][kv head][16][hd] of T,
     * as the CPU backend lays it out.  Block n_blocks - 1 is the padding
     * block that CUDA-graph padding rows write to; the engine sees
     * n_blocks - 1 blocks. */
    void         *kv;
    int           n_blocks;
    size_t        kv_layer_elems;   /* elements of one layer's K (or V) */

    /* activations, for cap_tok rows per step */
    int           cap_tok, cap_logits;
    float        *x;                /* (cap_tok, H) residual stream, f32 */
    void         *xn;               /* T (cap_tok, H) normed input of a GEMM */
    float        *big;              /* (cap_tok, max(qkvd, 2 I, H)) GEMM outputs */
    void         *q;                /* T (cap_tok, qd) roped queries */
    void         *att;              /* T (cap_tok, qd) attention output */
    void         *act;              /* T (cap_tok, I) silu(gate) * up */
    void         *xl;               /* T (cap_logits, H) normed logits rows */
    float        *logits;           /* (cap_logits, V) */
    int32_t      *ids;              /* (cap_logits) sampled ids */
    float        *part_ml;          /* split attention: (cap_part, 2) max, sum */
    float        *part_acc;         /* (cap_part, hd) */
    size_t        cap_part;         /* (token, head, split) partials */
} llm_cu_state;


/* The metadata of one step, packed in one int32 buffer that is copied to
 * the device in one transfer.  Rows are relative to the step. */
typedef struct {
    const int32_t *tokens;          /* [n_pad] */
    const int32_t *pos;             /* [n_pad] */
    const int32_t *slot;            /* [n_pad] block * 16 + offset */
    const int32_t *tok_seq;         /* [n_pad] sequence of each row */
    const int32_t *seq_start;       /* [n_seq] first row of each sequence */
    const int32_t *seq_nq;          /* [n_seq] its rows */
    const int32_t *bt_off;          /* [n_seq] its block table's offset in bt */
    const int32_t *split_tok;       /* [n_split] rows the split kernel serves */
    const int32_t *rows;            /* [n_logits_pad] rows that need logits */
    const int32_t *items;           /* [2 n_items] prefill tiles: seq, first row */
    const int32_t *bt;              /* block tables, back to back */
} llm_cu_md;


/* One step as planned by cu_plan.c: rows [tok0, tok0 + n_tok) of the
 * caller's batch, padded to n_pad rows for a CUDA graph. */
typedef struct {
    int           tok0, n_tok, n_pad;
    int           n_seq;
    int           n_logits;         /* logits rows the caller asked for */
    int           n_logits_pad;     /* rows the lm_head computes */
    int           n_split, max_splits;
    int           n_items;
    int           graph;            /* a decode step that a graph may replay */
    /* int32 offsets of the llm_cu_md arrays in the packed buffer */
    int           o_tokens, o_pos, o_slot, o_tok_seq, o_seq_start, o_seq_nq,
                  o_bt_off, o_split_tok, o_rows, o_items, o_bt;
    int           n_md;             /* int32s used */
} llm_cu_step;


/* The ops of a forward pass.  Each returns 0, or -1 with a message kept by
 * its implementation (ctx). */
typedef struct {
    int  (*embed)(void *ctx, const llm_cu_state *s, const int32_t *tokens,
                  int n);
    /* for i < n, r = rows ? rows[i] : i:  x[r] += delta[r] (if delta);
     * out[i] = T(x[r] / rms(x[r]) * w) */
    int  (*rmsnorm)(void *ctx, const llm_cu_state *s, float *x,
                    const float *delta, const float *w, const int32_t *rows,
                    int n, void *out);
    /* out[n][nout] (f32) = in[n][k] (T) . w[nout][k]^T (T) */
    int  (*gemm)(void *ctx, const llm_cu_state *s, const void *in, int n,
                 int k, const void *w, int nout, float *out);
    /* qkv (f32, n x qkvd) -> bias, q/k norm, RoPE -> q (T) and K/V written
     * to the cache at slot[i] */
    int  (*qkv_post)(void *ctx, const llm_cu_state *s, int layer,
                     const float *qkv, const llm_cu_md *md, int n, void *kc,
                     void *vc);
    /* attention of rows split_tok[0 .. n_split) into s->att */
    int  (*attn_split)(void *ctx, const llm_cu_state *s, const llm_cu_md *md,
                       int n_split, int max_splits, const void *kc,
                       const void *vc);
    /* attention of the prefill tiles into s->att */
    int  (*attn_prefill)(void *ctx, const llm_cu_state *s,
                         const llm_cu_md *md, int n_items, const void *kc,
                         const void *vc);
    /* out[n][I] (T) = silu(gu[n][0..I)) * gu[n][I..2I) */
    int  (*silu_mul)(void *ctx, const llm_cu_state *s, const float *gu,
                     int n, void *out);
} llm_cu_ops;


/* cu_forward.c: runs one planned step through `ops`, up to the logits
 * rows.  md holds the step's metadata at its device (or host) address. */
int llm_cu_forward_step(const llm_cu_ops *ops, void *ctx,
    const llm_cu_state *s, const llm_cu_step *st, const int32_t *md);

/* Resolves a step's packed offsets against a metadata base address. */
void llm_cu_md_bind(llm_cu_md *md, const llm_cu_step *st,
    const int32_t *base);

/* The pointer to layer L's K (v = 0) or V (v = 1) cache. */
void *llm_cu_kv_layer(const llm_cu_state *s, int layer, int v);

#ifdef __cplusplus
}
#endif

#endif /* LLM_CU_STATE_H */
