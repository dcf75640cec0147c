/*
 * batch.c -- building an llm_batch sequence by sequence.
 */
#include <stdlib.h>
#include <string.h>

#include "batch.h"
#include "util/util.h"


void
llm_batch_reset(llm_batch_buf *bb)
{
    memset(&bb->batch, 0, sizeof(bb->batch));
}


static void
llm_batch_grow(llm_batch_buf *bb, int n_tokens, int n_seqs)
{
    if (n_tokens > bb->cap_tokens) {
        int  cap = n_tokens > 2 * bb->cap_tokens ? n_tokens : 2 * bb->cap_tokens;

        bb->tokens = llm_xrealloc(bb->tokens, sizeof(int32_t) * cap);
        bb->positions = llm_xrealloc(bb->positions, sizeof(int32_t) * cap);
        bb->slots = llm_xrealloc(bb->slots, sizeof(int32_t) * cap);
        bb->seq_of_token = llm_xrealloc(bb->seq_of_token,
                                        sizeof(int32_t) * cap);
        bb->logits_rows = llm_xrealloc(bb->logits_rows,
                                       sizeof(int32_t) * cap);
        bb->cap_tokens = cap;
    }
    if (n_seqs > bb->cap_seqs) {
        int  cap = n_seqs > 2 * bb->cap_seqs ? n_seqs : 2 * bb->cap_seqs;

        bb->seqs = llm_xrealloc(bb->seqs, sizeof(llm_batch_seq) * cap);
        bb->cap_seqs = cap;
    }
}


int
llm_batch_add(llm_batch_buf *bb, const int32_t *tokens, int n, int pos0,
    const int32_t *block_table, int n_blocks, llm_logits_mode logits)
{
    int  from = logits == LLM_LOGITS_ALL ? 0
              : logits == LLM_LOGITS_LAST ? n - 1 : n;

    return llm_batch_add_from(bb, tokens, n, pos0, block_table, n_blocks,
                              from);
}


int
llm_batch_add_from(llm_batch_buf *bb, const int32_t *tokens, int n, int pos0,
    const int32_t *block_table, int n_blocks, int logits_from)
{
    llm_batch      *b = &bb->batch;
    llm_batch_seq  *s;
    int             i, row, pos, si = b->n_seqs;

    llm_batch_grow(bb, b->n_tokens + n, b->n_seqs + 1);
    s = &bb->seqs[si];
    s->token_start = b->n_tokens;
    s->n_tokens = n;
    s->ctx_len = pos0 + n;
    s->block_table = block_table;
    s->n_blocks = n_blocks;
    for (i = 0; i < n; i++) {
        row = b->n_tokens + i;
        pos = pos0 + i;
        bb->tokens[row] = tokens[i];
        bb->positions[row] = pos;
        bb->slots[row] = block_table[pos / LLM_BLOCK_SIZE] * LLM_BLOCK_SIZE
                         + pos % LLM_BLOCK_SIZE;
        bb->seq_of_token[row] = si;
        if (i >= logits_from) {
            bb->logits_rows[b->n_logits++] = row;
        }
    }
    b->n_tokens += n;
    b->n_seqs++;
    b->tokens = bb->tokens;
    b->positions = bb->positions;
    b->slots = bb->slots;
    b->seq_of_token = bb->seq_of_token;
    b->seqs = bb->seqs;
    b->logits_rows = bb->logits_rows;
    return si;
}


void
llm_batch_buf_free(llm_batch_buf *bb)
{
    free(bb->tokens);
    free(bb->positions);
    free(bb->slots);
    free(bb->seq_of_token);
    free(bb->logits_rows);
    free(bb->seqs);
    memset(bb, 0, sizeof(*bb));
}
