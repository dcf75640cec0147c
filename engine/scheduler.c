/*
 * scheduler.c -- decides what each engine step computes.
 *
 * Like vLLM's V1 scheduler, every request is just "tokens whose K/V is not
 * cached yet": a decode has one such token, a prefill many.  Each step takes
 * the running requests first, oldest first, then admits waiting requests
 * first-come first-served, until the token budget (max_num_batched_tokens)
 * or max_num_seqs is reached; a prompt longer than the budget is prefilled
 * in chunks over several steps.  When the KV pool runs dry the newest
 * running request is preempted: its blocks are freed, it goes back to the
 * front of the queue, and its tokens are recomputed when it returns (its
 * `scheduled` timestamp stays) -- from the prefix cache, mostly, since its
 * freed blocks keep their keys until they are reused.
 *
 * A paused request (llm_engine_set_paused(): its client cannot keep up)
 * is not scheduled: running, it keeps its blocks and its seat, and
 * neither spends the step's budget nor holds anyone back; waiting, it is
 * passed over by admission.  When the pool runs dry, paused requests are
 * preempted first, newest first: they are the ones not using their K/V.
 *
 * With n-gram speculation, a decoding request carries up to k draft
 * tokens after its decode token when blocks and the budget allow.
 *
 * With prefix caching, a request being admitted first takes every leading
 * full block of its tokens that the cache holds; only the rest is computed.
 * The last token is always computed, since its logits are needed.
 *
 * Prompt logprobs (vLLM's prompt_logprobs, and completions' echo with
 * logprobs) need the logits of every prompt position: such a request takes
 * no cached or shared K/V for positions whose records it lacks (like vLLM,
 * which skips the prefix cache for it), and its prefill chunks ask for
 * logits rows.  One logits row is vocab_size floats (0.5 MB for a 128k
 * vocabulary), so a step computes at most max_prompt_lp_rows of them (the
 * engine allows 64 MiB of logits) and a longer prompt is prefilled in more
 * chunks.  Records survive preemption: the recompute takes cached blocks up
 * to them again and computes no row twice.
 */
#include <stdlib.h>
#include <string.h>

#include "scheduler.h"
#include "util/util.h"


void
llm_sched_init(llm_scheduler *s, const llm_sched_config *cfg,
    llm_block_pool *blocks)
{
    memset(s, 0, sizeof(*s));
    s->cfg = *cfg;
    s->blocks = blocks;
}


void
llm_sched_free(llm_scheduler *s)
{
    llm_req_list_free(&s->running);
    llm_req_list_free(&s->step);
    free(s->step_tokens);
    free(s->step_lp_rows);
    memset(s, 0, sizeof(*s));
}


void
llm_sched_enqueue(llm_scheduler *s, llm_request *r)
{
    r->state = LLM_REQ_WAITING;
    r->next = NULL;
    if (s->wait_tail) {
        s->wait_tail->next = r;
    } else {
        s->wait_head = r;
    }
    s->wait_tail = r;
    s->n_waiting++;
}


static void
llm_sched_push_front(llm_scheduler *s, llm_request *r)
{
    r->state = LLM_REQ_WAITING;
    r->next = s->wait_head;
    s->wait_head = r;
    if (s->wait_tail == NULL) {
        s->wait_tail = r;
    }
    s->n_waiting++;
}


static void
llm_sched_unlink_waiting(llm_scheduler *s, llm_request *r)
{
    llm_request  **pp, *prev = NULL;

    for (pp = &s->wait_head; *pp; prev = *pp, pp = &(*pp)->next) {
        if (*pp == r) {
            *pp = r->next;
            if (s->wait_tail == r) {
                s->wait_tail = prev;
            }
            r->next = NULL;
            s->n_waiting--;
            return;
        }
    }
}


static void
llm_sched_free_blocks(llm_scheduler *s, llm_request *r)
{
    int  i;

    /* last block first: the free list evicts from its head, so a prefix
     * loses its tail before its head, which every later block's key
     * depends on (vLLM frees in the same order) */
    for (i = r->n_blocks - 1; i >= 0; i--) {
        llm_blocks_release(s->blocks, r->blocks[i]);
    }
    r->n_blocks = 0;
    r->n_computed = 0;
    r->n_keys = 0;
}


/* Room in r's block table, and for its blocks' keys, for n blocks. */
static void
llm_sched_table_room(llm_request *r, int n)
{
    if (n > r->cap_blocks) {
        r->cap_blocks = n + 8;
        r->blocks = llm_xrealloc(r->blocks, sizeof(int32_t) * r->cap_blocks);
        r->keys = llm_xrealloc(r->keys, sizeof(uint64_t) * r->cap_blocks);
    }
}


/* Gives r blocks for its first n_tokens positions; -1 when the pool is dry
 * (blocks obtained so far stay with r). */
static int
llm_sched_reserve(llm_scheduler *s, llm_request *r, int n_tokens)
{
    int      need = (n_tokens + LLM_BLOCK_SIZE - 1) / LLM_BLOCK_SIZE;
    int32_t  b;

    llm_sched_table_room(r, need);
    while (r->n_blocks < need) {
        b = llm_blocks_alloc(s->blocks);
        if (b < 0) {
            return -1;
        }
        r->blocks[r->n_blocks++] = b;
    }
    return 0;
}


/* The request still lacks some of its prompt logprobs. */
static int
llm_sched_lp_pending(const llm_request *r)
{
    return r->prompt_lp != NULL && r->n_prompt_lp < r->n_prompt - 1;
}


/* Shortens a chunk of n new tokens so that its prompt-logprob rows fit the
 * step's remaining allowance; 0 when not even one does. */
static int
llm_sched_lp_fit(const llm_request *r, int n, int allowance)
{
    int  done;

    if (!llm_sched_lp_pending(r)) {
        return n;
    }
    /* positions below n_prompt_lp (recomputed after a preemption) need
     * no row */
    done = r->n_prompt_lp - r->n_computed;
    done = done > 0 ? done : 0;
    return n < done + allowance ? n : done + allowance;
}


/*
 * Parallel sampling: a request submitted with a leader takes references on
 * the leader's full prompt blocks once the leader has computed them.
 * Returns the tokens taken, 0 when there is nothing to share (the leader
 * finished, was preempted or never ran), or -1 while the leader's prefill
 * is still under way and the request should wait for it.
 */
static int
llm_sched_share(llm_scheduler *s, llm_request *r)
{
    llm_request  *l = r->share_from;
    int           i, ready, n = (r->n_prompt - 1) / LLM_BLOCK_SIZE;

    if (l == NULL) {
        return 0;
    }
    ready = l->state == LLM_REQ_RUNNING && l->n_computed >= n * LLM_BLOCK_SIZE;
    /* a leader still prefilling, or not admitted yet (it is ahead), is
     * waited for; a paused one is not: r computes its prompt itself */
    if (!ready && !l->paused
        && (l->state == LLM_REQ_RUNNING
            || (l->state == LLM_REQ_WAITING && l->stats.scheduled == 0)))
    {
        return -1;
    }
    r->share_from = NULL;
    if (!ready || n == 0
        || (r->prompt_lp && (l->prompt_lp == NULL
            || l->params.prompt_logprobs < r->params.prompt_logprobs)))
    {
        llm_request_unref(l);
        return 0;
    }
    /* the leader has the records of what it computed: r takes them with
     * the blocks (cut to r's number of alternatives) */
    for (i = 0; r->prompt_lp && i < n * LLM_BLOCK_SIZE; i++) {
        r->prompt_lp[i] = l->prompt_lp[i];
        if (r->prompt_lp[i].n_top > r->params.prompt_logprobs) {
            r->prompt_lp[i].n_top = r->params.prompt_logprobs;
        }
    }
    if (r->prompt_lp && r->n_prompt_lp < n * LLM_BLOCK_SIZE) {
        r->n_prompt_lp = n * LLM_BLOCK_SIZE;
    }
    llm_sched_table_room(r, n);
    for (i = 0; i < n; i++) {
        r->blocks[i] = l->blocks[i];
        llm_blocks_share(s->blocks, l->blocks[i]);
        if (i < l->n_keys) {
            r->keys[i] = l->keys[i];
        }
    }
    r->n_blocks = n;
    r->n_keys = l->n_keys < n ? l->n_keys : n;
    r->n_computed = n * LLM_BLOCK_SIZE;
    llm_request_unref(l);
    return r->n_computed;
}


/* Takes the cached leading blocks of a request being admitted; returns the
 * number of tokens they cover. */
static int
llm_sched_prefix_hits(llm_scheduler *s, llm_request *r)
{
    int       i, max = (r->n_tokens - 1) / LLM_BLOCK_SIZE;
    uint64_t  key, parent = r->cache_root;
    int32_t   b;

    if (!s->blocks->caching) {
        return 0;
    }
    if (llm_sched_lp_pending(r) && max > r->n_prompt_lp / LLM_BLOCK_SIZE) {
        max = r->n_prompt_lp / LLM_BLOCK_SIZE;
    }
    llm_sched_table_room(r, max);
    for (i = 0; i < max; i++) {
        key = llm_blocks_key(parent,
                             r->tokens + (size_t) i * LLM_BLOCK_SIZE);
        b = llm_blocks_lookup(s->blocks, key,
                              r->tokens + (size_t) i * LLM_BLOCK_SIZE);
        if (b < 0) {
            break;
        }
        r->blocks[r->n_blocks++] = b;
        r->keys[r->n_keys++] = key;
        parent = key;
    }
    r->n_computed = i * LLM_BLOCK_SIZE;
    return r->n_computed;
}


void
llm_sched_register_blocks(llm_scheduler *s, llm_request *r)
{
    uint64_t  key;
    int       i;

    if (!s->blocks->caching) {
        return;
    }
    for (i = r->n_keys; i < r->n_computed / LLM_BLOCK_SIZE; i++) {
        key = llm_blocks_key(i ? r->keys[i - 1] : r->cache_root,
                             r->tokens + (size_t) i * LLM_BLOCK_SIZE);
        llm_blocks_register(s->blocks, r->blocks[i], key,
                            r->tokens + (size_t) i * LLM_BLOCK_SIZE);
        r->keys[i] = key;
    }
    r->n_keys = i > r->n_keys ? i : r->n_keys;
}


static void
llm_sched_preempt(llm_scheduler *s, llm_request *r)
{
    llm_sched_free_blocks(s, r);
    llm_req_list_remove(&s->running, r);
    llm_sched_push_front(s, r);
    r->stats.num_preemptions++;
    s->num_preemptions++;
}


/* The running request to preempt when the pool is dry: the newest paused
 * one, else the newest. */
static int
llm_sched_victim(const llm_scheduler *s)
{
    int  i;

    for (i = s->running.n - 1; i >= 0; i--) {
        if (s->running.items[i]->paused) {
            return i;
        }
    }
    return s->running.n - 1;
}


/* Adds r's next n tokens to the step; returns its prompt-logprob rows. */
static int
llm_sched_add_to_step(llm_scheduler *s, llm_batch_buf *bb, llm_request *r,
    int n)
{
    int  from, first, last, lp_rows = 0;

    if (r->n_draft > 0) {
        from = 0;                       /* the decode token and each draft */
    } else if (r->n_computed + n == r->n_tokens) {
        from = n - 1;                   /* the last: a token is sampled */
    } else {
        from = n;                       /* a prefill chunk: none */
    }
    if (llm_sched_lp_pending(r)) {
        /* rows of positions first..last-1 give the records of tokens
         * first+1..last; a chunk that ends the prompt adds the sampling
         * row after them */
        first = r->n_computed > r->n_prompt_lp ? r->n_computed
                                               : r->n_prompt_lp;
        last = r->n_computed + n < r->n_prompt - 1 ? r->n_computed + n
                                                   : r->n_prompt - 1;
        if (last > first) {
            lp_rows = last - first;
            from = first - r->n_computed;
        }
    }
    llm_batch_add_from(bb, r->tokens + r->n_computed, n, r->n_computed,
                       r->blocks, r->n_blocks, from);
    if (s->step.n == s->step_cap) {
        s->step_cap = s->step_cap ? 2 * s->step_cap : 16;
        s->step_tokens = llm_xrealloc(s->step_tokens,
                                      sizeof(int) * s->step_cap);
        s->step_lp_rows = llm_xrealloc(s->step_lp_rows,
                                       sizeof(int) * s->step_cap);
    }
    s->step_tokens[s->step.n] = n;
    s->step_lp_rows[s->step.n] = lp_rows;
    llm_req_list_push(&s->step, r);
    return lp_rows;
}


/* What is left of a step's allowances. */
typedef struct {
    int  tokens;                        /* of max_num_batched_tokens */
    int  lp_rows;                       /* of max_prompt_lp_rows */
} llm_sched_budget;


/* Running requests first, oldest first, paused ones aside: a decode token
 * (with drafts when speculating) or the next chunk of an unfinished
 * prompt.  When blocks run out, a victim is preempted (llm_sched_victim). */
static void
llm_sched_running(llm_scheduler *s, llm_batch_buf *bb, llm_sched_budget *left)
{
    llm_request  *r, *victim;
    int           i, j, k, n;

    for (i = 0; i < s->running.n && left->tokens > 0; i++) {
        r = s->running.items[i];
        if (r->paused) {
            continue;
        }
        n = r->n_tokens - r->n_computed;
        r->n_draft = 0;
        /* structured output checks each token against the grammar's state
         * after the one before: no drafts */
        if (s->cfg.spec.k > 0 && n == 1 && !r->grammar) {
            k = llm_spec_schedule_drafts(&s->cfg.spec, r,
                                         s->cfg.max_model_len, left->tokens);
            /* drafts never preempt anyone: without blocks, no drafts */
            if (k > 0 && llm_sched_reserve(s, r, r->n_computed + 1 + k) == 0)
            {
                r->n_draft = k;
                n = 1 + k;
            }
        }
        n = n < left->tokens ? n : left->tokens;
        n = llm_sched_lp_fit(r, n, left->lp_rows);
        if (n == 0) {
            continue;                   /* its rows wait for the next step */
        }
        while (llm_sched_reserve(s, r, r->n_computed + n) != 0) {
            j = llm_sched_victim(s);
            victim = s->running.items[j];
            llm_sched_preempt(s, victim);
            if (victim == r) {
                break;
            }
            if (j < i) {
                i--;                    /* a paused one before r: r moved */
            }
        }
        if (r->state != LLM_REQ_RUNNING) {
            break;                      /* r preempted itself: it was newest */
        }
        left->lp_rows -= llm_sched_add_to_step(s, bb, r, n);
        left->tokens -= n;
    }
}


llm_request *
llm_sched_next_waiting(const llm_scheduler *s)
{
    llm_request  *r;

    for (r = s->wait_head; r && r->paused; r = r->next) {
        /* void */
    }
    return r;
}


int
llm_sched_num_deferred(const llm_scheduler *s)
{
    const llm_request  *r;
    int                 n = 0;

    for (r = s->wait_head; r; r = r->next) {
        n += r->paused;
    }
    return n;
}


/* Then waiting requests, first come first served, while the budget,
 * max_num_seqs and the pool allow; each first takes what it can of its
 * leader's blocks (parallel sampling) or of the prefix cache. */
static void
llm_sched_admit(llm_scheduler *s, llm_batch_buf *bb, llm_sched_budget *left,
    double now)
{
    llm_request  *r;
    int           n, hits;

    while (left->tokens > 0 && s->running.n < s->cfg.max_num_seqs
           && (r = llm_sched_next_waiting(s)) != NULL)
    {
        hits = llm_sched_share(s, r);
        if (hits < 0) {
            break;                      /* first come, first served */
        }
        if (hits == 0) {
            hits = llm_sched_prefix_hits(s, r);
        }
        n = r->n_tokens - r->n_computed;
        n = n < left->tokens ? n : left->tokens;
        n = llm_sched_lp_fit(r, n, left->lp_rows);
        if (n == 0 || llm_sched_reserve(s, r, r->n_computed + n) != 0) {
            llm_sched_free_blocks(s, r);
            break;                      /* first come, first served */
        }
        llm_sched_unlink_waiting(s, r);
        r->state = LLM_REQ_RUNNING;
        llm_req_list_push(&s->running, r);
        /* vLLM does not look a prompt-logprobs request up at all */
        if (s->blocks->caching && !llm_sched_lp_pending(r)) {
            s->prefix_cache_queries += (uint64_t) r->n_tokens;
            s->prefix_cache_hits += (uint64_t) hits;
        }
        if (r->stats.scheduled == 0) {
            r->stats.scheduled = now;
            r->stats.cached_tokens = hits;
        }
        left->lp_rows -= llm_sched_add_to_step(s, bb, r, n);
        left->tokens -= n;
    }
}


int
llm_sched_schedule(llm_scheduler *s, llm_batch_buf *bb, double now)
{
    llm_sched_budget  left;

    left.tokens = s->cfg.max_num_batched_tokens;
    left.lp_rows = s->cfg.max_prompt_lp_rows;
    s->step.n = 0;
    llm_batch_reset(bb);
    llm_sched_running(s, bb, &left);
    llm_sched_admit(s, bb, &left, now);
    return s->step.n;
}


void
llm_sched_remove(llm_scheduler *s, llm_request *r)
{
    if (r->state == LLM_REQ_RUNNING) {
        llm_req_list_remove(&s->running, r);
    } else if (r->state == LLM_REQ_WAITING) {
        llm_sched_unlink_waiting(s, r);
    }
    llm_sched_free_blocks(s, r);
    r->state = LLM_REQ_FINISHED;
}
