/*
 * kv_blocks.c -- reference-counted KV blocks, an LRU free list, and the
 * prefix cache's hash table.
 */
#include <stdlib.h>
#include <string.h>

#include "kv_blocks.h"
#include "util/util.h"


static void
llm_free_push_tail(llm_block_pool *p, int32_t b)
{
    p->free_prev[b] = p->free_tail;
    p->free_next[b] = -1;
    if (p->free_tail >= 0) {
        p->free_next[p->free_tail] = b;
    } else {
        p->free_head = b;
    }
    p->free_tail = b;
    p->n_free++;
}


static void
llm_free_unlink(llm_block_pool *p, int32_t b)
{
    if (p->free_prev[b] >= 0) {
        p->free_next[p->free_prev[b]] = p->free_next[b];
    } else {
        p->free_head = p->free_next[b];
    }
    if (p->free_next[b] >= 0) {
        p->free_prev[p->free_next[b]] = p->free_prev[b];
    } else {
        p->free_tail = p->free_prev[b];
    }
    p->n_free--;
}


void
llm_blocks_init(llm_block_pool *p, int num_blocks, int prefix_caching)
{
    int  i, n = num_blocks ? num_blocks : 1;

    memset(p, 0, sizeof(*p));
    p->num_blocks = num_blocks;
    p->ref = llm_xcalloc(n, sizeof(int32_t));
    p->free_prev = llm_xmalloc(sizeof(int32_t) * n);
    p->free_next = llm_xmalloc(sizeof(int32_t) * n);
    p->free_head = p->free_tail = -1;
    for (i = 0; i < num_blocks; i++) {
        llm_free_push_tail(p, i);
    }
    p->caching = prefix_caching;
    if (prefix_caching) {
        p->cached = llm_xcalloc(n, 1);
        p->hash = llm_xcalloc(n, sizeof(uint64_t));
        p->tokens = llm_xmalloc(sizeof(int32_t) * n * LLM_BLOCK_SIZE);
        p->chain = llm_xmalloc(sizeof(int32_t) * n);
        for (p->bucket_mask = 1; p->bucket_mask < (uint32_t) n * 2; ) {
            p->bucket_mask <<= 1;
        }
        p->bucket = llm_xmalloc(sizeof(int32_t) * p->bucket_mask);
        memset(p->bucket, 0xff, sizeof(int32_t) * p->bucket_mask);
        p->bucket_mask--;
    }
}


void
llm_blocks_free_pool(llm_block_pool *p)
{
    free(p->ref);
    free(p->free_prev);
    free(p->free_next);
    free(p->cached);
    free(p->hash);
    free(p->tokens);
    free(p->bucket);
    free(p->chain);
    memset(p, 0, sizeof(*p));
}


static void
llm_cache_remove(llm_block_pool *p, int32_t b)
{
    int32_t  *pp = &p->bucket[p->hash[b] & p->bucket_mask];

    while (*pp >= 0 && *pp != b) {
        pp = &p->chain[*pp];
    }
    if (*pp == b) {
        *pp = p->chain[b];
    }
    p->cached[b] = 0;
}


int32_t
llm_blocks_alloc(llm_block_pool *p)
{
    int32_t  b = p->free_head;

    if (b < 0) {
        return -1;
    }
    llm_free_unlink(p, b);
    if (p->caching && p->cached[b]) {
        llm_cache_remove(p, b);         /* evict the least recently freed */
    }
    p->ref[b] = 1;
    return b;
}


void
llm_blocks_share(llm_block_pool *p, int32_t block)
{
    p->ref[block]++;
}


void
llm_blocks_release(llm_block_pool *p, int32_t block)
{
    if (--p->ref[block] == 0) {
        llm_free_push_tail(p, block);
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


uint64_t
llm_blocks_key(uint64_t parent, const int32_t *tokens)
{
    /* FNV-1a over the parent key and the token ids, then a final mix;
     * lookups compare the tokens too, so a collision costs a miss only */
    uint64_t  h = 0xcbf29ce484222325ULL ^ parent;
    int       i, j;

    for (i = 0; i < LLM_BLOCK_SIZE; i++) {
        uint32_t  t = (uint32_t) tokens[i];

        for (j = 0; j < 4; j++) {
            h ^= (t >> (8 * j)) & 0xff;
            h *= 0x100000001b3ULL;
        }
    }
    h ^= h >> 33;
    h *= 0xff51afd7ed558ccdULL;
    h ^= h >> 33;
    return h;
}


/* FNV-1a over the salt's bytes and the same final mix; never 0, the key
 * of no salt.  Not a cryptographic hash: it separates tenants that keep
 * their salts to themselves, as vLLM's does. */
uint64_t
llm_blocks_salt_key(const char *salt)
{
    uint64_t  h = 0x84222325cbf29ce4ULL;

    for ( /* void */ ; *salt; salt++) {
        h ^= (unsigned char) *salt;
        h *= 0x100000001b3ULL;
    }
    h ^= h >> 33;
    h *= 0xff51afd7ed558ccdULL;
    h ^= h >> 33;
    return h ? h : 1;
}


_Static_assert(LLM_BLOCK_SIZE == LLM_PREFIX_BLOCK_SIZE,
               "the router's blocks are the cache's");


/* the keys llm_sched_prefix_hits() looks up, for a router (llm.h) */
int
llm_prefix_keys(const int32_t *prompt, int n_prompt, const char *salt,
    uint64_t *keys, int max)
{
    int       i, n = n_prompt > 0 ? (n_prompt - 1) / LLM_BLOCK_SIZE : 0;
    uint64_t  parent = salt ? llm_blocks_salt_key(salt) : 0;

    for (i = 0; i < n && i < max; i++) {
        keys[i] = llm_blocks_key(parent, prompt + (size_t) i * LLM_BLOCK_SIZE);
        parent = keys[i];
    }
    return i;
}


int32_t
llm_blocks_lookup(llm_block_pool *p, uint64_t key, const int32_t *tokens)
{
    int32_t  b;

    if (!p->caching) {
        return -1;
    }
    for (b = p->bucket[key & p->bucket_mask]; b >= 0; b = p->chain[b]) {
        if (p->hash[b] == key
            && memcmp(p->tokens + (size_t) b * LLM_BLOCK_SIZE, tokens,
                      sizeof(int32_t) * LLM_BLOCK_SIZE) == 0)
        {
            if (p->ref[b]++ == 0) {
                llm_free_unlink(p, b);
            }
            return b;
        }
    }
    return -1;
}


void
llm_blocks_register(llm_block_pool *p, int32_t block, uint64_t key,
    const int32_t *tokens)
{
    int32_t  b, *head;

    if (!p->caching || p->cached[block]) {
        return;
    }
    head = &p->bucket[key & p->bucket_mask];
    for (b = *head; b >= 0; b = p->chain[b]) {
        if (p->hash[b] == key) {
            return;                     /* an equal block is already cached */
        }
    }
    p->hash[block] = key;
    memcpy(p->tokens + (size_t) block * LLM_BLOCK_SIZE, tokens,
           sizeof(int32_t) * LLM_BLOCK_SIZE);
    p->cached[block] = 1;
    p->chain[block] = *head;
    *head = block;
}
