/*
 * kv_blocks.c -- a free stack of KV block ids with reference counts.
 */
#include <stdlib.h>

#include "kv_blocks.h"
#include "util.h"


void
llm_blocks_init(llm_block_pool *p, int num_blocks)
{
    int  i;

    p->num_blocks = num_blocks;
    p->ref = llm_xcalloc(num_blocks, sizeof(int32_t));
    p->free_stack = llm_xmalloc(sizeof(int32_t) * (num_blocks ? num_blocks : 1));
    /* low ids on top: a fresh engine touches the start of the pool first */
    for (i = 0; i < num_blocks; i++) {
        p->free_stack[i] = num_blocks - 1 - i;
    }
    p->n_free = num_blocks;
}


void
llm_blocks_free_pool(llm_block_pool *p)
{
    free(p->ref);
    free(p->free_stack);
    p->ref = p->free_stack = NULL;
    p->num_blocks = p->n_free = 0;
}


int32_t
llm_blocks_alloc(llm_block_pool *p)
{
    int32_t  b;

    if (p->n_free == 0) {
        return -1;
    }
    b = p->free_stack[--p->n_free];
    p->ref[b] = 1;
    return b;
}


void
llm_blocks_release(llm_block_pool *p, int32_t block)
{
    if (--p->ref[block] == 0) {
        p->free_stack[p->n_free++] = block;
    }
}


int
llm_blocks_free_count(const llm_block_pool *p)
{
    return p->n_free;
}


int
llm_blocks_used_count(const llm_block_pool *p)
{
    return p->num_blocks - p->n_free;
}
