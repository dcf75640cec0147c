/*
 * scheduler.h -- what each engine step computes: which requests, how many
 * of their tokens, in which KV blocks (scheduler.c has the policy).
 *
 * The scheduler owns the waiting queue and the running list; the engine
 * thread alone calls it.  It needs no engine and no model: a block pool, a
 * batch to fill and requests (request.h) are all it reads and writes, so a
 * unit test can drive it by hand (t/unit/test_scheduler.c).
 */
#ifndef LLM_SCHEDULER_H
#define LLM_SCHEDULER_H

#include <stdint.h>

#include "backend/batch.h"
#include "kv_blocks.h"
#include "request.h"
#include "spec_decode.h"

typedef struct {
    int              max_num_seqs;      /* running requests at most */
    int              max_num_batched_tokens;   /* tokens per step */
    int              max_model_len;     /* drafts never reach past it */
    int              max_prompt_lp_rows;   /* prompt-logprob logits rows
                                            * per step */
    llm_spec_config  spec;
} llm_sched_config;

typedef struct {
    llm_sched_config  cfg;
    llm_block_pool   *blocks;           /* the backend's KV blocks */

    llm_request      *wait_head, *wait_tail;   /* FIFO; preempted go to
                                                * the front */
    int               n_waiting;
    llm_req_list      running;          /* in admission order */

    /* the step llm_sched_schedule() built, in batch order */
    llm_req_list      step;
    int              *step_tokens;      /* new tokens of each */
    int              *step_lp_rows;     /* its prompt-logprob rows */
    int               step_cap;

    /* counted here, reported by the engine */
    uint64_t          num_preemptions;
    uint64_t          prefix_cache_queries;   /* prompt tokens looked up */
    uint64_t          prefix_cache_hits;      /* and found */
} llm_scheduler;

void llm_sched_init(llm_scheduler *s, const llm_sched_config *cfg,
    llm_block_pool *blocks);
void llm_sched_free(llm_scheduler *s);

/* A new request joins the back of the waiting queue. */
void llm_sched_enqueue(llm_scheduler *s, llm_request *r);

/* Builds this step into s->step and the batch bb (stamping `scheduled` at
 * a request's first admission); returns the number of sequences.  The
 * caller then moves each request's n_computed on by its step_tokens
 * (speculation: by what verification accepted). */
int llm_sched_schedule(llm_scheduler *s, llm_batch_buf *bb, double now);

/* The request admission takes next: the first waiting one not paused, or
 * NULL. */
llm_request *llm_sched_next_waiting(const llm_scheduler *s);

/* The waiting requests admission passes over whatever the capacity: the
 * paused ones (vLLM's "deferred"; the others wait for capacity). */
int llm_sched_num_deferred(const llm_scheduler *s);

/* Publishes the request's newly computed full blocks to the prefix cache. */
void llm_sched_register_blocks(llm_scheduler *s, llm_request *r);

/* Takes a finished request out of the queues and frees its blocks. */
void llm_sched_remove(llm_scheduler *s, llm_request *r);

#endif /* LLM_SCHEDULER_H */
