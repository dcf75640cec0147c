/*
 * kv_blocks.h -- the block manager: which KV blocks of the backend's pool
 * are free, and who holds the others (reference counts, so blocks can later
 * be shared by sequences with a common prefix).
 */
#ifndef LLM_KV_BLOCKS_H
#define LLM_KV_BLOCKS_H

#include <stdint.h>

typedef struct {
    int        num_blocks;
    int32_t   *ref;                     /* holders of each block */
    int32_t   *free_stack;
    int        n_free;
} llm_block_pool;

void llm_blocks_init(llm_block_pool *p, int num_blocks);
void llm_blocks_free_pool(llm_block_pool *p);

/* A free block with one reference, or -1 when none is left. */
int32_t llm_blocks_alloc(llm_block_pool *p);
/* Drops one reference; the block is free again when none remain. */
void llm_blocks_release(llm_block_pool *p, int32_t block);
int llm_blocks_free_count(const llm_block_pool *p);
int llm_blocks_used_count(const llm_block_pool *p);

#endif /* LLM_KV_BLOCKS_H */
