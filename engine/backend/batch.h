/*
 * batch.h -- what one engine step computes, flattened the way vLLM does it.
 *
 * A step carries several sequences; each contributes a run of new tokens
 * (a prefill chunk, one decode token, or a token plus its draft tokens).
 * Their K/V go into the paged cache at `slots`; attention for a new token at
 * position p reads positions 0..p of its sequence through the sequence's
 * block table.  Logits are produced only for the rows in `logits_rows`.
 */
#ifndef LLM_BATCH_H
#define LLM_BATCH_H

#include <stdint.h>

#define LLM_BLOCK_SIZE 16               /* tokens per KV block */

typedef struct {
    int            token_start;         /* first row of this sequence in the batch */
    int            n_tokens;            /* its new tokens this step */
    int            ctx_len;             /* tokens in its cache after this step */
    const int32_t *block_table;         /* physical block of each 16 positions */
    int            n_blocks;
} llm_batch_seq;

typedef struct {
    int            n_tokens;
    const int32_t *tokens;              /* [n_tokens] */
    const int32_t *positions;           /* [n_tokens] position within its sequence */
    const int32_t *slots;               /* [n_tokens] block * 16 + offset */
    const int32_t *seq_of_token;        /* [n_tokens] index into seqs */
    int            n_seqs;
    const llm_batch_seq *seqs;
    int            n_logits;
    const int32_t *logits_rows;         /* [n_logits] batch rows that need logits */
} llm_batch;


/* A growable batch the scheduler (or a tool) fills sequence by sequence. */
typedef enum {
    LLM_LOGITS_NONE = 0,
    LLM_LOGITS_LAST,                    /* the last new token */
    LLM_LOGITS_ALL                      /* every new token */
} llm_logits_mode;

typedef struct {
    llm_batch      batch;
    int            cap_tokens, cap_seqs;
    int32_t       *tokens, *positions, *slots, *seq_of_token, *logits_rows;
    llm_batch_seq *seqs;
} llm_batch_buf;

void llm_batch_reset(llm_batch_buf *bb);
/* Adds n new tokens of a sequence at positions pos0..pos0+n-1, whose K/V go
 * to the slots its block table gives; returns the sequence's index. */
int llm_batch_add(llm_batch_buf *bb, const int32_t *tokens, int n, int pos0,
    const int32_t *block_table, int n_blocks, llm_logits_mode logits);
/* The same with logits for its new tokens logits_from..n-1 (a prefill
 * chunk whose prompt logprobs are wanted). */
int llm_batch_add_from(llm_batch_buf *bb, const int32_t *tokens, int n,
    int pos0, const int32_t *block_table, int n_blocks, int logits_from);
void llm_batch_buf_free(llm_batch_buf *bb);

#endif /* LLM_BATCH_H */
