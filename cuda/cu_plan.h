/*
 * cu_plan.h -- host-side planning of the CUDA backend: how an engine batch
 * becomes steps of packed metadata, how the split-K decode attention is
 * sized, which CUDA graph bucket a decode step uses, and how many KV blocks
 * fit in device memory.  Plain C, tested on the CPU (t/unit/test_cuda_ref.c).
 */
#ifndef LLM_CU_PLAN_H
#define LLM_CU_PLAN_H

#include "cu_state.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct {
    int           cap_tok;          /* rows per step (activation buffers) */
    int           cap_logits;       /* logits rows per step */
    int           n_sm;             /* multiprocessors: sizes the split */
    int           prefill_min_q;    /* sequences with at least this many new
                                       rows use the prefill kernel */
    int           graph_max;        /* largest graph bucket; 0: no graphs */
    int           num_blocks;       /* KV blocks the engine may address */
    int           pad_block;        /* the padding rows' block */
    int           window;           /* sliding window, 0: none */
    int           vocab;
    int           nkv;
    int           n_chunks;         /* head chunks per KV group */
} llm_cu_plan_cfg;

typedef struct {
    llm_cu_plan_cfg  cfg;
    /* per batch row: its index in batch->logits_rows, or -1 */
    int32_t         *row_logit;
    int              cap_rows;
    /* per logits row of the current step: its index in the caller's
     * logits output (batch->logits_rows order) */
    int32_t         *logits_idx;
} llm_cu_planner;

void llm_cu_planner_init(llm_cu_planner *p, const llm_cu_plan_cfg *cfg);
void llm_cu_planner_free(llm_cu_planner *p);

/* Checks a whole batch before anything runs on the device (a bad index
 * there is an illegal address that kills the CUDA context): tokens,
 * positions, slots, sequences and the block-table entries attention will
 * read.  0, or -1 with the problem in err. */
int llm_cu_plan_begin(llm_cu_planner *p, const llm_batch *b, char *err);

/* Plans the step that starts at row tok0 into st and packs its metadata
 * into md (md_cap int32s).  Returns 0; or 1 when md is too small, with
 * st->n_md set to what is needed. */
int llm_cu_plan_step(llm_cu_planner *p, const llm_batch *b, int tok0,
    llm_cu_step *st, int32_t *md, int md_cap);

/* The graph bucket for n decode rows (the smallest listed size >= n), or 0
 * when n exceeds graph_max. */
int llm_cu_graph_bucket(int n, int graph_max);

/* Upper bound of the split: enough (token, head chunk, split) blocks to
 * give every multiprocessor several, at most LLM_CU_MAX_SPLITS. */
int llm_cu_max_splits(int n_split_tok, int nkv, int n_chunks, int n_sm);

/* Partials the split attention may need for up to cap_tok rows:
 * nh * max over n of n * max_splits(n). */
size_t llm_cu_part_cap(int cap_tok, int nh, int nkv, int n_chunks, int n_sm);

/* KV blocks for the memory left after weights and buffers: utilization x
 * free_bytes, at least min_blocks, never more than free_bytes - reserve.
 * 0, or -1 with a message naming what was needed and what is free. */
int llm_cu_kv_blocks(size_t free_bytes, size_t reserve, double utilization,
    size_t block_bytes, int min_blocks, int device, int *n_blocks,
    char *err);

/* Sizes of the backend's allocations. */
size_t llm_cu_block_bytes(const llm_config *c, size_t tsize);

#ifdef __cplusplus
}
#endif

#endif /* LLM_CU_PLAN_H */
