/*
 * kv_blocks.h -- the block manager: which KV blocks of the backend's pool
 * are free, who holds the others (reference counts), and the prefix cache.
 *
 * Prefix caching (vLLM's automatic prefix caching): a full block of 16
 * computed tokens is keyed by a hash chained over every token before it, so
 * equal keys mean equal K/V.  A block nobody holds stays in the cache, in
 * least-recently-freed order, until it is allocated for something else.
 */
#ifndef LLM_KV_BLOCKS_H
#define LLM_KV_BLOCKS_H

#include <stdint.h>

#include "backend/batch.h"

typedef struct {
    int        num_blocks;
    int32_t   *ref;                     /* holders of each block */
    /* free blocks, least recently freed first (doubly linked) */
    int32_t   *free_prev, *free_next;
    int32_t    free_head, free_tail;
    int        n_free;
    /* prefix cache: hash -> block, chained per bucket */
    int        caching;
    uint8_t   *cached;                  /* block has a key in the table */
    uint64_t  *hash;
    int32_t   *tokens;                  /* [num_blocks][LLM_BLOCK_SIZE] */
    int32_t   *bucket, *chain;
    uint32_t   bucket_mask;
} llm_block_pool;

void llm_blocks_init(llm_block_pool *p, int num_blocks, int prefix_caching);
void llm_blocks_free_pool(llm_block_pool *p);

/* A free block with one reference (evicting its cache key, if any), or -1
 * when none is left. */
int32_t llm_blocks_alloc(llm_block_pool *p);
/* One more holder of a held block (parallel sampling shares a prompt). */
void llm_blocks_share(llm_block_pool *p, int32_t block);
/* Drops one reference; with none left the block is free (and, when it has
 * a key, still a cache hit until reused). */
void llm_blocks_release(llm_block_pool *p, int32_t block);
int llm_blocks_free_count(const llm_block_pool *p);
/* Blocks held by someone: the KV usage the engine reports. */
int llm_blocks_used_count(const llm_block_pool *p);

/* The key of a full block: parent's key chained with its 16 tokens.  The
 * first block's parent is 0, or the key of the request's cache_salt, so
 * requests with different salts share no block (vLLM's cache_salt). */
uint64_t llm_blocks_key(uint64_t parent, const int32_t *tokens);
uint64_t llm_blocks_salt_key(const char *salt);
/* The cached block with this key and these tokens, taking a reference; -1
 * on a miss. */
int32_t llm_blocks_lookup(llm_block_pool *p, uint64_t key,
    const int32_t *tokens);
/* Publishes a block whose 16 positions are computed (a no-op when another
 * block already has the key). */
void llm_blocks_register(llm_block_pool *p, int32_t block, uint64_t key,
    const int32_t *tokens);

#endif /* LLM_KV_BLOCKS_H */
