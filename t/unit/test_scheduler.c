/*
 * test_scheduler.c -- the scheduler alone: no engine, no model, no
 * backend.  Requests come from llm_request_new() against a vocabulary
 * size; each test builds a scheduler over its own small block pool, calls
 * llm_sched_schedule() and then plays the engine's part by hand
 * (run_step(): the step's tokens are computed, a request at the end of its
 * tokens gets one more).
 *
 * What is checked: FIFO admission; the step's token budget and chunked
 * prefill; max_num_seqs; a queue head that does not fit holds back those
 * behind it; preemption of the newest running request (itself included)
 * to the front of the queue, and its recompute; prefix-cache hits (the
 * last token always computed, salts kept apart, counters); the
 * prompt-logprob row allowance; parallel sampling's shared blocks; n-gram
 * drafts riding a decode; removing waiting requests; paused requests
 * (not scheduled, their blocks kept, the budget left to others, passed
 * over in the queue, preempted first, not waited for by a follower).
 */
#include <stdlib.h>
#include <string.h>

#include "backend/batch.h"
#include "kv_blocks.h"
#include "llm.h"
#include "model/model.h"
#include "request.h"
#include "scheduler.h"
#include "tap.h"

#define VOCAB    1000
#define MAX_LEN  256

/* all llm_request_new() reads of a model here: the vocabulary size (no
 * bad words, so no tokenizer) */
static llm_model      vocab_only = { .config = { .vocab_size = VOCAB } };

typedef struct {
    llm_block_pool    pool;
    llm_scheduler     s;
    llm_batch_buf     bb;
} fixture;


static void
setup(fixture *f, int num_blocks, int caching, int max_num_seqs,
    int max_num_batched_tokens)
{
    llm_sched_config  cfg = { 0 };

    memset(f, 0, sizeof(*f));
    cfg.max_num_seqs = max_num_seqs;
    cfg.max_num_batched_tokens = max_num_batched_tokens;
    cfg.max_model_len = MAX_LEN;
    cfg.max_prompt_lp_rows = 1000;
    llm_blocks_init(&f->pool, num_blocks, caching);
    llm_sched_init(&f->s, &cfg, &f->pool);
}


/* Takes every request out (as finishing does) and frees the rest. */
static void
teardown(fixture *f)
{
    llm_request  *r;

    while (f->s.running.n > 0) {
        r = f->s.running.items[0];
        llm_sched_remove(&f->s, r);
        llm_request_unref(r);
    }
    while ((r = f->s.wait_head) != NULL) {
        llm_sched_remove(&f->s, r);
        llm_request_unref(r);
    }
    tap_ok(llm_blocks_free_count(&f->pool) == f->pool.num_blocks,
           "every block is free again");
    llm_sched_free(&f->s);
    llm_blocks_free_pool(&f->pool);
    llm_batch_buf_free(&f->bb);
}


/* A request for these prompt ids, with parameters p (NULL: the
 * defaults). */
static llm_request *
request_ids(const int32_t *prompt, int n, const llm_sampling_params *p)
{
    llm_sampling_params  defaults;
    char                 err[LLM_ERR_LEN];
    llm_request         *r;

    if (p == NULL) {
        llm_sampling_params_init(&defaults, NULL);
        p = &defaults;
    }
    r = llm_request_new(&vocab_only, MAX_LEN, prompt, n, p, 1, err);
    if (r == NULL) {
        tap_diag("llm_request_new: %s", err);
        exit(1);
    }
    return r;
}


/* A request whose prompt is base, base + 1, ... (n tokens). */
static llm_request *
request_p(int n, int base, const llm_sampling_params *p)
{
    int32_t  prompt[MAX_LEN];
    int      i;

    for (i = 0; i < n; i++) {
        prompt[i] = (base + i) % VOCAB;
    }
    return request_ids(prompt, n, p);
}


static llm_request *
request(int n, int base)
{
    return request_p(n, base, NULL);
}


/* r joins the back of the waiting queue. */
static llm_request *
join(fixture *f, llm_request *r)
{
    llm_sched_enqueue(&f->s, r);
    return r;
}


/* What the engine does after a step's forward pass, without the sampling:
 * the scheduled tokens are computed (drafts: all accepted), full blocks
 * go to the prefix cache, prompt-logprob records are taken, and a request
 * at the end of its tokens gets a new one (token 7). */
static void
run_step(fixture *f)
{
    llm_scheduler  *s = &f->s;
    llm_request    *r;
    int             i, from;

    for (i = 0; i < s->step.n; i++) {
        r = s->step.items[i];
        if (s->step_lp_rows[i] > 0) {
            from = r->n_computed > r->n_prompt_lp ? r->n_computed
                                                  : r->n_prompt_lp;
            r->n_prompt_lp = from + s->step_lp_rows[i];
        }
        if (r->n_draft > 0) {
            r->n_tokens += r->n_draft;  /* accepted: they are tokens now */
            r->n_draft = 0;
        }
        r->n_computed += s->step_tokens[i];
        llm_sched_register_blocks(s, r);
        if (r->n_computed == r->n_tokens) {
            llm_request_append_token(r, 7);
        }
    }
}


static void
finish(fixture *f, llm_request *r)
{
    llm_sched_remove(&f->s, r);
    llm_request_unref(r);
}


/* Which requests the step holds, in batch order, with their new tokens. */
static int
step_is(const llm_scheduler *s, int n, llm_request **reqs, const int *tokens)
{
    int  i;

    if (s->step.n != n) {
        tap_diag("step has %d sequences, expected %d", s->step.n, n);
        return 0;
    }
    for (i = 0; i < n; i++) {
        if (s->step.items[i] != reqs[i] || s->step_tokens[i] != tokens[i]) {
            tap_diag("step[%d]: %d tokens%s, expected %d", i,
                     s->step_tokens[i],
                     s->step.items[i] != reqs[i] ? " of another request" : "",
                     tokens[i]);
            return 0;
        }
    }
    return 1;
}


static void
test_fifo_budget(void)
{
    fixture       f;
    llm_request  *a, *b, *c;
    int           n;

    setup(&f, 64, 0, 8, 32);
    a = join(&f, request(20, 100));
    b = join(&f, request(20, 200));
    c = join(&f, request(5, 300));
    tap_ok(f.s.n_waiting == 3 && a->state == LLM_REQ_WAITING,
           "enqueued requests wait");

    n = llm_sched_schedule(&f.s, &f.bb, 1.0);
    tap_ok(n == 2 && step_is(&f.s, 2, (llm_request *[]) { a, b },
                             (int []) { 20, 12 }),
           "first come first served: a's 20 tokens, then b's first 12 "
           "(chunked prefill at the 32-token budget)");
    tap_ok(f.bb.batch.n_tokens == 32 && f.bb.batch.n_seqs == 2,
           "the batch holds the step's 32 tokens in 2 sequences");
    tap_ok(f.bb.batch.n_logits == 1 && f.bb.batch.logits_rows[0] == 19,
           "logits only for a's last token; b's chunk samples nothing");
    tap_ok(f.bb.batch.seqs[1].token_start == 20
           && f.bb.batch.positions[20] == 0
           && f.bb.batch.seqs[1].ctx_len == 12
           && f.bb.batch.seqs[1].block_table == b->blocks
           && b->n_blocks == 1,
           "b's chunk: positions from 0, one block for 12 tokens");
    tap_ok(a->state == LLM_REQ_RUNNING && b->state == LLM_REQ_RUNNING
           && c->state == LLM_REQ_WAITING && f.s.wait_head == c
           && f.s.n_waiting == 1 && f.s.running.n == 2,
           "a and b run; c waits: the budget is spent");
    tap_ok(a->stats.scheduled == 1.0 && b->stats.scheduled == 1.0
           && c->stats.scheduled == 0, "`scheduled` stamped at admission");

    run_step(&f);
    n = llm_sched_schedule(&f.s, &f.bb, 2.0);
    tap_ok(n == 3 && step_is(&f.s, 3, (llm_request *[]) { a, b, c },
                             (int []) { 1, 8, 5 }),
           "running first (a's decode, b's last 8), then c is admitted");
    tap_ok(f.bb.batch.n_tokens == 14 && f.bb.batch.n_logits == 3,
           "14 tokens, a logits row for each sequence at its end");
    tap_ok(a->stats.scheduled == 1.0 && c->stats.scheduled == 2.0,
           "`scheduled` is stamped once");
    teardown(&f);
}


static void
test_max_num_seqs(void)
{
    fixture       f;
    llm_request  *a, *b, *c;

    setup(&f, 64, 0, 2, 1000);
    a = join(&f, request(10, 100));
    b = join(&f, request(10, 200));
    c = join(&f, request(10, 300));
    llm_sched_schedule(&f.s, &f.bb, 1.0);
    tap_ok(step_is(&f.s, 2, (llm_request *[]) { a, b }, (int []) { 10, 10 })
           && f.s.wait_head == c && c->state == LLM_REQ_WAITING,
           "max_num_seqs 2: the third request waits despite the budget");
    run_step(&f);
    finish(&f, a);
    tap_ok(f.s.running.n == 1 && f.s.n_waiting == 1,
           "a finished: b runs, c still waits");
    llm_sched_schedule(&f.s, &f.bb, 2.0);
    tap_ok(step_is(&f.s, 2, (llm_request *[]) { b, c }, (int []) { 1, 10 }),
           "a's seat goes to c, after b's decode");
    teardown(&f);
}


static void
test_head_blocks_queue(void)
{
    fixture       f;
    llm_request  *a, *b, *c;

    setup(&f, 4, 0, 8, 1000);
    a = join(&f, request(40, 100));     /* 3 blocks */
    b = join(&f, request(40, 200));     /* 3 blocks */
    c = join(&f, request(10, 300));     /* 1 block */
    llm_sched_schedule(&f.s, &f.bb, 1.0);
    tap_ok(step_is(&f.s, 1, (llm_request *[]) { a }, (int []) { 40 }),
           "only a fits the 4-block pool");
    tap_ok(f.s.wait_head == b && b->next == c && f.s.n_waiting == 2
           && b->n_blocks == 0,
           "b does not fit and keeps its place; no block stays with it");
    tap_ok(llm_blocks_free_count(&f.pool) == 1 && c->n_blocks == 0,
           "c, which would fit the free block, is not admitted past b");
    teardown(&f);
}


static void
test_preemption(void)
{
    fixture       f;
    llm_request  *a, *b, *c;

    setup(&f, 4, 0, 8, 1000);
    a = join(&f, request(32, 100));     /* 2 full blocks */
    b = join(&f, request(32, 200));
    llm_sched_schedule(&f.s, &f.bb, 1.0);
    tap_ok(step_is(&f.s, 2, (llm_request *[]) { a, b }, (int []) { 32, 32 })
           && llm_blocks_free_count(&f.pool) == 0,
           "a and b fill the pool");
    run_step(&f);
    /* a's token 33 needs a third block: the newest, b, gives up its two */
    c = join(&f, request(10, 300));
    llm_sched_schedule(&f.s, &f.bb, 2.0);
    tap_ok(step_is(&f.s, 1, (llm_request *[]) { a }, (int []) { 1 })
           && a->n_blocks == 3, "a decodes into a block taken from b");
    tap_ok(b->state == LLM_REQ_WAITING && f.s.wait_head == b
           && b->next == c && f.s.wait_tail == c && f.s.n_waiting == 2,
           "b is back in the queue, in front of c");
    tap_ok(b->n_blocks == 0 && b->n_computed == 0 && f.s.running.n == 1,
           "b holds no block and no computed token");
    tap_ok(b->stats.num_preemptions == 1 && f.s.num_preemptions == 1,
           "the preemption is counted on b and in the scheduler");
    tap_ok(llm_blocks_free_count(&f.pool) == 1,
           "b (33 tokens, 3 blocks) does not fit the one block left");

    run_step(&f);
    finish(&f, a);
    llm_sched_schedule(&f.s, &f.bb, 3.0);
    tap_ok(step_is(&f.s, 2, (llm_request *[]) { b, c }, (int []) { 33, 10 }),
           "with a gone, b returns first and recomputes its prompt and "
           "output; c follows");
    tap_ok(b->stats.scheduled == 1.0 && c->stats.scheduled == 3.0,
           "a preempted request keeps its first `scheduled`");
    tap_ok(f.bb.batch.n_logits == 2 && f.bb.batch.logits_rows[0] == 32,
           "b's recompute samples from its last token");
    teardown(&f);
}


static void
test_self_preemption(void)
{
    fixture       f;
    llm_request  *a, *b;

    setup(&f, 4, 0, 8, 1000);
    a = join(&f, request(32, 100));     /* 2 blocks, then a third */
    b = join(&f, request(16, 200));     /* 1 block, then a second */
    llm_sched_schedule(&f.s, &f.bb, 1.0);
    run_step(&f);
    llm_sched_schedule(&f.s, &f.bb, 2.0);
    tap_ok(step_is(&f.s, 1, (llm_request *[]) { a }, (int []) { 1 }),
           "a takes the last block; b, the newest, preempts itself");
    tap_ok(b->state == LLM_REQ_WAITING && f.s.wait_head == b
           && b->n_blocks == 0 && b->stats.num_preemptions == 1
           && a->stats.num_preemptions == 0,
           "b waits in front with its blocks released; a is untouched");
    tap_ok(llm_blocks_free_count(&f.pool) == 1,
           "b's block is free (b needs two)");
    teardown(&f);
}


static void
test_prefix_cache(void)
{
    fixture              f;
    llm_request         *a, *b, *c, *d;
    llm_sampling_params  p;
    int32_t              a_blocks[2];
    uint64_t             keys[8], a_keys[2];

    setup(&f, 16, 1, 8, 1000);
    a = join(&f, request(40, 100));
    llm_sched_schedule(&f.s, &f.bb, 1.0);
    tap_ok(a->stats.cached_tokens == 0 && f.s.prefix_cache_queries == 40
           && f.s.prefix_cache_hits == 0, "a cold cache: 40 queried, 0 hit");
    run_step(&f);
    tap_ok(a->n_keys == 2, "a's two full blocks are in the cache");
    tap_ok(llm_prefix_keys(a->tokens, 40, NULL, keys, 8) == 2
           && keys[0] == a->keys[0] && keys[1] == a->keys[1]
           && llm_prefix_keys(a->tokens, 40, NULL, keys, 1) == 1
           && llm_prefix_keys(a->tokens, 32, NULL, keys, 8) == 1
           && llm_prefix_keys(a->tokens, 16, NULL, keys, 8) == 0,
           "a router's keys (llm_prefix_keys) are the cache's, for the "
           "blocks before the last token");
    a_blocks[0] = a->blocks[0];
    a_blocks[1] = a->blocks[1];
    a_keys[0] = a->keys[0];
    a_keys[1] = a->keys[1];
    finish(&f, a);

    b = join(&f, request(41, 100));    /* a's prompt and one more token */
    llm_sched_schedule(&f.s, &f.bb, 2.0);
    tap_ok(step_is(&f.s, 1, (llm_request *[]) { b }, (int []) { 9 })
           && b->n_computed == 32 && b->stats.cached_tokens == 32,
           "b takes a's two cached blocks and computes the other 9 tokens");
    tap_ok(b->blocks[0] == a_blocks[0] && b->blocks[1] == a_blocks[1]
           && f.bb.batch.positions[0] == 32,
           "b's block table starts with a's blocks; its step at 32");
    tap_ok(f.s.prefix_cache_queries == 81 && f.s.prefix_cache_hits == 32,
           "counters: 41 more queried, 32 hit");
    run_step(&f);
    finish(&f, b);

    c = join(&f, request(32, 100));    /* exactly a's first two blocks */
    llm_sched_schedule(&f.s, &f.bb, 3.0);
    tap_ok(step_is(&f.s, 1, (llm_request *[]) { c }, (int []) { 16 })
           && c->stats.cached_tokens == 16,
           "c hits one block only: its last token is always computed");
    run_step(&f);
    finish(&f, c);

    llm_sampling_params_init(&p, NULL);
    p.cache_salt = "tenant";
    d = join(&f, request_p(40, 100, &p));
    llm_sched_schedule(&f.s, &f.bb, 4.0);
    tap_ok(step_is(&f.s, 1, (llm_request *[]) { d }, (int []) { 40 })
           && d->stats.cached_tokens == 0,
           "a salted request shares no block with unsalted ones");
    run_step(&f);
    tap_ok(llm_prefix_keys(d->tokens, 40, "tenant", keys, 8) == 2
           && keys[0] == d->keys[0] && keys[1] == d->keys[1]
           && keys[1] != a_keys[1],
           "a router's keys of a salted prompt are the cache's");
    teardown(&f);

    setup(&f, 16, 0, 8, 1000);
    a = join(&f, request(40, 100));
    llm_sched_schedule(&f.s, &f.bb, 1.0);
    run_step(&f);
    finish(&f, a);
    b = join(&f, request(41, 100));
    llm_sched_schedule(&f.s, &f.bb, 2.0);
    tap_ok(step_is(&f.s, 1, (llm_request *[]) { b }, (int []) { 41 })
           && f.s.prefix_cache_queries == 0 && b->n_keys == 0,
           "without prefix caching: no hit, nothing counted");
    teardown(&f);
}


static void
test_prompt_logprob_rows(void)
{
    fixture              f;
    llm_request         *a, *b, *c;
    llm_sampling_params  p;

    setup(&f, 16, 1, 8, 1000);
    f.s.cfg.max_prompt_lp_rows = 10;
    llm_sampling_params_init(&p, NULL);
    p.prompt_logprobs = 0;
    a = join(&f, request_p(30, 100, &p));
    b = join(&f, request_p(30, 500, &p));
    llm_sched_schedule(&f.s, &f.bb, 1.0);
    tap_ok(step_is(&f.s, 1, (llm_request *[]) { a }, (int []) { 10 })
           && f.s.step_lp_rows[0] == 10 && f.bb.batch.n_logits == 10,
           "prompt logprobs: a 10-row allowance cuts a's chunk to 10");
    tap_ok(f.s.wait_head == b, "b waits: no row is left this step");
    run_step(&f);
    llm_sched_schedule(&f.s, &f.bb, 2.0);
    tap_ok(step_is(&f.s, 1, (llm_request *[]) { a }, (int []) { 10 })
           && f.bb.batch.logits_rows[0] == 0, "a's second chunk of 10");
    run_step(&f);
    llm_sched_schedule(&f.s, &f.bb, 3.0);
    tap_ok(step_is(&f.s, 2, (llm_request *[]) { a, b }, (int []) { 10, 1 })
           && f.s.step_lp_rows[0] == 9 && f.s.step_lp_rows[1] == 1
           && f.bb.batch.n_logits == 11,
           "a's last chunk: 9 records and its sampling row; b gets 1 row");
    run_step(&f);
    tap_ok(a->n_prompt_lp == 29 && a->n_computed == 30,
           "a has all 29 records");
    finish(&f, a);

    /* a's prompt is cached now, but c lacks the records of it */
    c = join(&f, request_p(30, 100, &p));
    llm_sched_remove(&f.s, b);
    llm_request_unref(b);
    llm_sched_schedule(&f.s, &f.bb, 4.0);
    tap_ok(step_is(&f.s, 1, (llm_request *[]) { c }, (int []) { 10 })
           && c->stats.cached_tokens == 0 && f.s.prefix_cache_hits == 0,
           "a prompt-logprobs request takes no cached block it lacks "
           "records for");
    tap_ok(f.s.prefix_cache_queries == 0,
           "and its admission is not counted as a query");
    teardown(&f);
}


static void
test_shared_prompt(void)
{
    fixture       f;
    llm_request  *l, *r;

    setup(&f, 16, 0, 8, 1000);
    l = join(&f, request(40, 100));
    r = request(40, 100);
    atomic_fetch_add(&l->refs, 1);      /* llm_engine_submit_shared() */
    r->share_from = l;
    join(&f, r);
    llm_sched_schedule(&f.s, &f.bb, 1.0);
    tap_ok(step_is(&f.s, 1, (llm_request *[]) { l }, (int []) { 40 })
           && f.s.wait_head == r && r->share_from == l,
           "a follower waits while its leader prefills");
    run_step(&f);
    llm_sched_schedule(&f.s, &f.bb, 2.0);
    tap_ok(step_is(&f.s, 2, (llm_request *[]) { l, r }, (int []) { 1, 8 })
           && r->n_computed == 32 && r->stats.cached_tokens == 32,
           "then it takes the leader's 2 full prompt blocks, computes 8");
    tap_ok(r->blocks[0] == l->blocks[0] && r->blocks[1] == l->blocks[1]
           && f.pool.ref[l->blocks[0]] == 2 && f.pool.ref[l->blocks[2]] == 1
           && r->blocks[2] != l->blocks[2],
           "the full blocks are shared (2 holders), the last is its own");
    tap_ok(r->share_from == NULL && atomic_load(&l->refs) == 1,
           "the follower let go of its leader");
    teardown(&f);
}


static void
test_drafts(void)
{
    fixture       f;
    llm_request  *a;
    int32_t       prompt[8] = { 1, 2, 3, 1, 2, 3, 1, 2 };

    setup(&f, 16, 0, 8, 1000);
    f.s.cfg.spec = (llm_spec_config) { 3, 1, 2 };
    a = join(&f, request_ids(prompt, 8, NULL));
    llm_sched_schedule(&f.s, &f.bb, 1.0);
    tap_ok(a->n_draft == 0, "no drafts for a prefill");
    run_step(&f);
    a->tokens[8] = 3;                   /* the "sampled" token: 1 2 3 ... 3 */
    llm_sched_schedule(&f.s, &f.bb, 2.0);
    tap_ok(a->n_draft == 3
           && step_is(&f.s, 1, (llm_request *[]) { a }, (int []) { 4 })
           && f.bb.batch.n_logits == 4,
           "a repeating sequence drafts k = 3 tokens: 4 tokens, 4 rows");
    tap_ok(a->tokens[9] == 1 && a->tokens[10] == 2 && a->tokens[11] == 3,
           "the drafts continue the earlier occurrence of \"2 3\"");
    run_step(&f);
    a->tokens[a->n_tokens - 1] = 1;     /* ... 1 2 3 1: "3 1" repeats */
    f.s.cfg.max_num_batched_tokens = 2;
    llm_sched_schedule(&f.s, &f.bb, 3.0);
    tap_ok(a->n_draft == 1
           && step_is(&f.s, 1, (llm_request *[]) { a }, (int []) { 2 }),
           "a 2-token budget leaves room for one draft");
    teardown(&f);
}


static void
test_remove_waiting(void)
{
    fixture       f;
    llm_request  *a, *b, *c, *d;

    setup(&f, 16, 0, 8, 1000);
    a = join(&f, request(5, 100));
    b = join(&f, request(5, 200));
    c = join(&f, request(5, 300));
    finish(&f, c);
    tap_ok(f.s.wait_tail == b && f.s.n_waiting == 2,
           "removing the tail moves the tail back");
    finish(&f, a);
    d = join(&f, request(5, 400));
    tap_ok(f.s.wait_head == b && b->next == d && f.s.wait_tail == d
           && f.s.n_waiting == 2, "removing the head: b, then d");
    llm_sched_schedule(&f.s, &f.bb, 1.0);
    tap_ok(step_is(&f.s, 2, (llm_request *[]) { b, d }, (int []) { 5, 5 }),
           "b and d are admitted in their order");
    teardown(&f);
}


static void
test_paused(void)
{
    fixture       f;
    llm_request  *a, *b, *c, *d;

    setup(&f, 16, 0, 8, 1000);
    a = join(&f, request(20, 100));
    b = join(&f, request(20, 200));
    llm_sched_schedule(&f.s, &f.bb, 1.0);
    run_step(&f);
    a->paused = 1;
    f.s.cfg.max_num_batched_tokens = 1;
    llm_sched_schedule(&f.s, &f.bb, 2.0);
    tap_ok(step_is(&f.s, 1, (llm_request *[]) { b }, (int []) { 1 }),
           "a paused request is not scheduled: b, behind it, takes the "
           "whole 1-token budget");
    tap_ok(a->state == LLM_REQ_RUNNING && a->n_blocks == 2
           && a->n_computed == 20 && a->n_tokens == 21
           && a->stats.num_preemptions == 0,
           "a keeps its seat, its blocks and its tokens");
    run_step(&f);

    f.s.cfg.max_num_batched_tokens = 1000;
    c = join(&f, request(5, 300));
    c->paused = 1;
    d = join(&f, request(5, 400));
    llm_sched_schedule(&f.s, &f.bb, 3.0);
    tap_ok(step_is(&f.s, 2, (llm_request *[]) { b, d }, (int []) { 1, 5 })
           && f.s.wait_head == c && c->n_blocks == 0
           && c->stats.scheduled == 0,
           "a paused waiting request is passed over: d is admitted, c "
           "keeps its place");
    run_step(&f);

    a->paused = 0;
    c->paused = 0;
    llm_sched_schedule(&f.s, &f.bb, 4.0);
    tap_ok(step_is(&f.s, 4, (llm_request *[]) { a, b, d, c },
                   (int []) { 1, 1, 1, 5 }),
           "resumed: a decodes where it stopped, c is admitted");
    teardown(&f);

    /* a (paused) and b hold 2 blocks each, d 1: the pool of 5 is full */
    setup(&f, 5, 0, 8, 1000);
    a = join(&f, request(32, 100));
    b = join(&f, request(32, 200));
    d = join(&f, request(10, 300));
    llm_sched_schedule(&f.s, &f.bb, 1.0);
    run_step(&f);
    a->paused = 1;
    llm_sched_schedule(&f.s, &f.bb, 2.0);
    tap_ok(step_is(&f.s, 2, (llm_request *[]) { b, d }, (int []) { 1, 1 })
           && b->n_blocks == 3,
           "the pool runs dry: b's third block comes from a, paused, not "
           "from d, the newest; d still decodes");
    tap_ok(a->state == LLM_REQ_WAITING && f.s.wait_head == a
           && a->n_blocks == 0 && a->stats.num_preemptions == 1
           && d->stats.num_preemptions == 0,
           "a is preempted to the front of the queue");
    run_step(&f);
    c = join(&f, request(10, 400));
    llm_sched_schedule(&f.s, &f.bb, 3.0);
    tap_ok(step_is(&f.s, 3, (llm_request *[]) { b, d, c },
                   (int []) { 1, 1, 10 }) && f.s.wait_head == a,
           "a, paused, is not admitted again; c, behind it, is");
    teardown(&f);
}


static void
test_paused_leader(void)
{
    fixture       f;
    llm_request  *l, *r;

    setup(&f, 16, 0, 8, 16);
    l = join(&f, request(40, 100));
    r = request(40, 100);
    atomic_fetch_add(&l->refs, 1);      /* llm_engine_submit_shared() */
    r->share_from = l;
    join(&f, r);
    llm_sched_schedule(&f.s, &f.bb, 1.0);
    tap_ok(step_is(&f.s, 1, (llm_request *[]) { l }, (int []) { 16 })
           && r->share_from == l,
           "the follower waits while its leader prefills in chunks");
    run_step(&f);
    l->paused = 1;
    llm_sched_schedule(&f.s, &f.bb, 2.0);
    tap_ok(step_is(&f.s, 1, (llm_request *[]) { r }, (int []) { 16 })
           && r->share_from == NULL && r->stats.cached_tokens == 0
           && atomic_load(&l->refs) == 1,
           "its leader paused, it no longer waits: it computes its prompt "
           "itself");
    teardown(&f);
}


int
main(void)
{
    test_fifo_budget();
    test_max_num_seqs();
    test_head_blocks_queue();
    test_preemption();
    test_self_preemption();
    test_prefix_cache();
    test_prompt_logprob_rows();
    test_shared_prompt();
    test_drafts();
    test_remove_waiting();
    test_paused();
    test_paused_leader();
    return tap_done();
}
