/*
 * test_prompt_logprobs.c -- the engine's prompt logprobs (prompt_logprobs,
 * and completions' echo with logprobs) against an independent forward pass:
 * the CPU backend run directly over the whole prompt with logits at every
 * position, log-softmax taken here in double precision.
 *
 * Every way the scheduler can compute a prompt is checked: one step,
 * chunked prefill (a 7-token budget), the per-step cap on logits rows (a
 * prompt longer than the cap), a warm prefix cache (whose blocks have no
 * logits), preemption under a tiny KV pool (records neither lost nor
 * computed twice), parallel sampling (followers share the leader's blocks
 * and take its records), a one-token prompt, delivery exactly once, and
 * cancellation.  Validation messages are vLLM's.
 *
 * The model is made with `llm make-model` ($LLM_BUILD/llm), as in
 * test_engine.c; its vocabulary is Llama 3.1's (128256 ids), so a logits
 * row is 0.5 MB and the engine computes at most 130 prompt rows a step.
 */
#define _GNU_SOURCE
#include <math.h>
#include <semaphore.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/backend.h"
#include "backend/batch.h"
#include "llm.h"
#include "model/model.h"
#include "tap.h"
#include "engine_harness.h"

#define MAX_REQ    16
#define MAX_LEN    256
#define TOP_N      5

typedef struct {
    int                 n_ids;
    int                 n_deliveries;   /* outputs carrying prompt records */
    int                 n_records;
    llm_token_logprob   rec[MAX_LEN];
    llm_finish_reason   finish;
    llm_request_stats   stats;
    int                 done;
} result;

static char  model_dir[256];
static int   vocab;
static int   max_tokens = 4;


static void
on_output(llm_request *r, const llm_output *o, void *data)
{
    result  *res = llm_request_data(r);
    waiter  *w = data;

    if (o->prompt_logprobs) {
        res->n_deliveries++;
        res->n_records = o->n_prompt_logprobs;
        memcpy(res->rec, o->prompt_logprobs,
               sizeof(llm_token_logprob) * o->n_prompt_logprobs);
        if (res->n_ids != 0 || o->n_ids == 0) {
            res->n_deliveries += 100;   /* not with the first token */
        }
    }
    res->n_ids += o->n_ids;
    if (o->finish_reason != LLM_FINISH_NONE) {
        res->finish = o->finish_reason;
        res->stats = o->stats;
        res->done = 1;
        w->n_done++;
    }
}


static llm_engine *
engine(waiter *w, int max_batched, size_t kv_bytes, int caching)
{
    llm_engine_config  cfg = { 0 };

    cfg.model_dir = model_dir;
    cfg.max_num_seqs = 16;
    cfg.max_num_batched_tokens = max_batched;
    cfg.kv_cache_bytes = kv_bytes;
    cfg.max_model_len = MAX_LEN;
    cfg.enable_prefix_caching = caching;
    return harness_engine(w, &cfg);
}


static llm_request *
submit(llm_engine *e, int seed, int len, int prompt_logprobs, result *res,
    llm_request *leader)
{
    llm_sampling_params  p;
    llm_request         *r;
    int32_t              prompt[MAX_LEN];
    char                 err[LLM_ERR_LEN];

    llm_sampling_params_init(&p, llm_engine_model(e));
    p.temperature = 0.0;
    p.max_tokens = max_tokens;
    p.ignore_eos = 1;
    p.prompt_logprobs = prompt_logprobs;
    harness_prompt(seed, prompt, len);
    memset(res, 0, sizeof(*res));
    r = llm_request_create(e, prompt, len, &p, err);
    if (r == NULL) {
        tap_diag("create: %s", err);
        exit(1);
    }
    llm_request_set_data(r, res);
    if (leader) {
        llm_engine_submit_shared(e, r, leader);
    } else {
        llm_engine_submit(e, r);
    }
    return r;
}


/* ---- the independent reference ------------------------------------------ */

#define REF_TOP  32

typedef struct {
    double   v;                         /* the prompt token's logprob */
    int      lo, hi;                    /* its rank, up to ties within TOL */
    int32_t  ids[REF_TOP];              /* the most likely, descending */
    double   vals[REF_TOP];
} ref_pos;

typedef struct {
    int      len;
    ref_pos  pos[MAX_LEN];              /* record i: token i + 1 */
} reference;

#define TOL  1e-4


static void
reference_make(int seed, int len, reference *ref)
{
    char                 err[LLM_ERR_LEN];
    llm_model           *m = llm_model_load(model_dir, err);
    llm_backend_config   bc = { 0 };
    llm_backend         *b;
    llm_batch_buf        bb = { 0 };
    int32_t              prompt[MAX_LEN], table[MAX_LEN / 16];
    float               *logits;
    double              *y, mx, sum;
    int                  i, j, k;

    harness_prompt(seed, prompt, len);
    for (i = 0; i < MAX_LEN / 16; i++) {
        table[i] = i;
    }
    bc.threads = 2;
    bc.min_blocks = MAX_LEN / 16;
    b = llm_backend_cpu_create(m, &bc, err);
    logits = malloc(sizeof(float) * vocab * len);
    y = malloc(sizeof(double) * vocab);
    llm_batch_add(&bb, prompt, len, 0, table, MAX_LEN / 16, LLM_LOGITS_ALL);
    if (b->forward(b, &bb.batch, logits, err) != 0) {
        tap_diag("forward: %s", err);
        exit(1);
    }
    ref->len = len;
    for (i = 0; i < len - 1; i++) {
        const float  *x = logits + (size_t) i * vocab;
        ref_pos      *rp = &ref->pos[i];

        for (j = 0, mx = -INFINITY; j < vocab; j++) {
            mx = x[j] > mx ? x[j] : mx;
        }
        for (j = 0, sum = 0; j < vocab; j++) {
            sum += exp((double) x[j] - mx);
        }
        for (j = 0; j < vocab; j++) {
            y[j] = x[j] - mx - log(sum);
        }
        rp->v = y[prompt[i + 1]];
        rp->lo = rp->hi = 0;
        for (k = 0; k < REF_TOP; k++) {
            rp->vals[k] = -INFINITY;
            rp->ids[k] = -1;
        }
        for (j = 0; j < vocab; j++) {
            rp->lo += y[j] >= rp->v + TOL;
            rp->hi += y[j] >= rp->v - TOL;
            if (y[j] <= rp->vals[REF_TOP - 1]) {
                continue;
            }
            for (k = REF_TOP - 1; k > 0 && rp->vals[k - 1] < y[j]; k--) {
                rp->vals[k] = rp->vals[k - 1];
                rp->ids[k] = rp->ids[k - 1];
            }
            rp->vals[k] = y[j];
            rp->ids[k] = j;
        }
    }
    llm_batch_buf_free(&bb);
    free(logits);
    free(y);
    b->free(b);
    llm_model_free(m);
}


/* The records equal the reference: logprobs within TOL, ranks and the
 * top-N ids exact up to ties within TOL. */
static int
records_match(const result *res, int seed, const reference *ref, int n_top)
{
    int32_t  prompt[MAX_LEN];
    int      i, k, j, ok = 1;

    harness_prompt(seed, prompt, ref->len);
    if (res->n_records != ref->len - 1 || res->n_deliveries != 1) {
        tap_diag("%d records in %d deliveries, want %d in 1", res->n_records,
                 res->n_deliveries, ref->len - 1);
        return 0;
    }
    for (i = 0; i < ref->len - 1 && ok; i++) {
        const ref_pos            *rp = &ref->pos[i];
        const llm_token_logprob  *r = &res->rec[i];

        if (r->id != prompt[i + 1] || fabs(r->logprob - rp->v) > TOL
            || r->rank < rp->lo || r->rank > rp->hi || r->n_top != n_top)
        {
            tap_diag("record %d: id %d logprob %.6f rank %d n_top %d; want "
                     "id %d logprob %.6f rank %d..%d n_top %d", i, r->id,
                     r->logprob, r->rank, r->n_top, prompt[i + 1], rp->v,
                     rp->lo, rp->hi, n_top);
            ok = 0;
        }
        for (k = 0; k < r->n_top && ok; k++) {
            /* the k-th id is the reference's k-th, or ties with it */
            for (j = 0; j < REF_TOP && rp->ids[j] != r->top_ids[k]; j++) {
                /* find it */
            }
            if (fabs(r->top_logprobs[k] - rp->vals[k]) > TOL || j == REF_TOP
                || fabs(rp->vals[j] - rp->vals[k]) > TOL)
            {
                tap_diag("record %d top %d: id %d %.6f, want id %d %.6f", i,
                         k, r->top_ids[k], r->top_logprobs[k], rp->ids[k],
                         rp->vals[k]);
                ok = 0;
            }
        }
    }
    return ok;
}


/* ---- the cases ------------------------------------------------------------ */

static reference  ref40, ref200, refs[MAX_REQ];


static void
test_one_step_and_chunked(void)
{
    static result  res;
    waiter         w;
    llm_engine    *e;
    llm_request   *r;
    llm_engine_stats  st;
    int            budget[3] = { 2048, 7, 16 }, i;

    for (i = 0; i < 3; i++) {
        e = engine(&w, budget[i], 0, 0);
        r = submit(e, 1, 40, TOP_N, &res, NULL);
        harness_wait_all(e, &w, 1, on_output);
        llm_engine_stats_get(e, &st);
        tap_ok(records_match(&res, 1, &ref40, TOP_N)
               && res.n_ids == 4 && res.finish == LLM_FINISH_LENGTH,
               "budget %d: 39 prompt records equal log-softmax of an "
               "independent forward pass (%llu steps)", budget[i],
               (unsigned long long) st.hist[LLM_H_ITERATION_TOKENS].total);
        llm_request_release(r);
        llm_engine_destroy(e);
        sem_destroy(&w.sem);
    }
}


static void
test_row_cap(void)
{
    static result     res, plain;
    waiter            w;
    llm_engine       *e;
    llm_request      *r;
    llm_engine_stats  st;
    uint64_t          steps;

    /* 199 rows of 0.5 MB: more than the 64 MiB (130 rows) of one step */
    e = engine(&w, 2048, 0, 0);
    r = submit(e, 2, 200, 0, &res, NULL);
    harness_wait_all(e, &w, 1, on_output);
    llm_engine_stats_get(e, &st);
    steps = st.hist[LLM_H_ITERATION_TOKENS].total;
    tap_ok(records_match(&res, 2, &ref200, 0),
           "a 200-token prompt's records are right with prompt_logprobs 0");
    tap_ok(steps == 4 + 1,
           "its prefill took two steps under the logits cap (%llu steps "
           "for 4 tokens)", (unsigned long long) steps);
    tap_ok(st.prompt_tokens_total == 200 && st.generation_tokens_total == 4,
           "token counters are unchanged by prompt logprobs");
    llm_request_release(r);
    llm_engine_destroy(e);
    sem_destroy(&w.sem);

    e = engine(&w, 2048, 0, 0);
    r = submit(e, 2, 200, -1, &plain, NULL);
    harness_wait_all(e, &w, 1, on_output);
    llm_engine_stats_get(e, &st);
    tap_ok(st.hist[LLM_H_ITERATION_TOKENS].total == 4
           && plain.n_deliveries == 0,
           "without prompt logprobs: one prefill step, no records");
    llm_request_release(r);
    llm_engine_destroy(e);
    sem_destroy(&w.sem);
}


static void
test_prefix_cache(void)
{
    static result     warm, res;
    waiter            w;
    llm_engine       *e;
    llm_request      *r;
    llm_engine_stats  st;

    e = engine(&w, 2048, 0, 1);
    r = submit(e, 1, 40, -1, &warm, NULL);
    harness_wait_all(e, &w, 1, on_output);
    llm_request_release(r);
    r = submit(e, 1, 40, TOP_N, &res, NULL);
    harness_wait_all(e, &w, 2, on_output);
    tap_ok(records_match(&res, 1, &ref40, TOP_N),
           "warm prefix cache: the records are still complete and right");
    tap_ok(res.stats.cached_tokens == 0,
           "a request with prompt logprobs takes no cached blocks (%d)",
           res.stats.cached_tokens);
    llm_request_release(r);
    r = submit(e, 1, 40, -1, &warm, NULL);
    harness_wait_all(e, &w, 3, on_output);
    tap_ok(warm.stats.cached_tokens == 32,
           "the next request without them still hits the cache (%d)",
           warm.stats.cached_tokens);
    llm_request_release(r);
    llm_engine_stats_get(e, &st);
    tap_ok(st.prefix_cache_queries_total == 80
           && st.prefix_cache_hits_total == 32,
           "like vLLM, it is not a prefix-cache query (%llu queried, %llu "
           "hit)", (unsigned long long) st.prefix_cache_queries_total,
           (unsigned long long) st.prefix_cache_hits_total);
    llm_engine_destroy(e);
    sem_destroy(&w.sem);
}


static void
test_preemption(int caching)
{
    static result     res[MAX_REQ];
    static const int  lens[MAX_REQ] = { 40, 70, 33, 100, 17, 64, 90, 5,
                                        120, 48, 2, 77, 60, 99, 31, 150 };
    waiter            w;
    llm_engine       *e;
    llm_request      *r[MAX_REQ];
    llm_engine_stats  st;
    int               i, ok = 1;

    /* the smallest pool (16 blocks, one 256-token sequence), a 64-token
     * budget: long prompts are chunked and preempted mid-prefill */
    e = engine(&w, 64, 1, caching);
    max_tokens = 16;
    for (i = 0; i < MAX_REQ; i++) {
        r[i] = submit(e, 10 + i, lens[i], i % 3 == 2 ? -1 : TOP_N, &res[i],
                      NULL);
    }
    harness_wait_all(e, &w, MAX_REQ, on_output);
    llm_engine_stats_get(e, &st);
    for (i = 0; i < MAX_REQ; i++) {
        if (i % 3 == 2) {
            ok &= res[i].n_deliveries == 0;
        } else if (!records_match(&res[i], 10 + i, &refs[i], TOP_N)) {
            tap_diag("request %d (%d tokens)", i, lens[i]);
            ok = 0;
        }
        ok &= res[i].n_ids == 16;
        llm_request_release(r[i]);
    }
    max_tokens = 4;
    tap_ok(ok && st.num_preemptions_total > 0,
           "prefix caching %s: %llu preemptions lose and repeat no record",
           caching ? "on" : "off",
           (unsigned long long) st.num_preemptions_total);
    tap_ok(st.kv_cache_usage == 0.0 && st.num_running == 0,
           "every block is free again");
    llm_engine_destroy(e);
    sem_destroy(&w.sem);
}


static void
test_parallel_sampling(void)
{
    static result  res[4];
    waiter         w;
    llm_engine    *e;
    llm_request   *r[4];
    int            i, ok = 1;

    e = engine(&w, 2048, 0, 0);
    r[0] = submit(e, 1, 40, TOP_N, &res[0], NULL);
    for (i = 1; i < 4; i++) {
        r[i] = submit(e, 1, 40, i == 3 ? 2 : TOP_N, &res[i], r[0]);
    }
    harness_wait_all(e, &w, 4, on_output);
    for (i = 0; i < 3; i++) {
        ok &= records_match(&res[i], 1, &ref40, TOP_N);
    }
    tap_ok(ok, "n = 3: every sample has the prompt records");
    tap_ok(records_match(&res[3], 1, &ref40, 2),
           "a follower asking for 2 alternatives gets 2");
    tap_ok(res[1].stats.cached_tokens == 32 && res[1].n_ids == 4,
           "followers share the leader's blocks (their records with them)");
    for (i = 0; i < 4; i++) {
        llm_request_release(r[i]);
    }
    llm_engine_destroy(e);
    sem_destroy(&w.sem);
}


static void
test_edges(void)
{
    static result        res, many[4];
    waiter               w;
    llm_engine          *e;
    llm_request         *r, *c[4];
    llm_sampling_params  p;
    char                 err[LLM_ERR_LEN];
    const char          *param = NULL;
    int32_t              one = 1234;
    int                  i;

    e = engine(&w, 2048, 0, 0);
    r = submit(e, 3, 1, TOP_N, &res, NULL);
    harness_wait_all(e, &w, 1, on_output);
    tap_ok(res.n_deliveries == 0 && res.n_ids == 4,
           "a one-token prompt has no records (and runs)");
    llm_request_release(r);

    /* cancelled at once, mid-prefill and after: everything is freed
     * (AddressSanitizer checks the leaks) */
    for (i = 0; i < 4; i++) {
        c[i] = submit(e, 20 + i, 200, TOP_N, &many[i], NULL);
    }
    llm_engine_cancel(e, c[0]);
    llm_engine_cancel(e, c[2]);
    harness_wait_all(e, &w, 5, on_output);
    tap_ok(many[0].finish == LLM_FINISH_ABORT
           && many[1].finish == LLM_FINISH_LENGTH
           && many[1].n_deliveries == 1 && many[1].n_records == 199,
           "cancelled requests end as abort, the others get their records");
    for (i = 0; i < 4; i++) {
        llm_request_release(c[i]);
    }

    llm_sampling_params_init(&p, llm_engine_model(e));
    tap_ok(p.prompt_logprobs == -1, "prompt logprobs are off by default");
    p.prompt_logprobs = 21;
    err[0] = '\0';
    tap_ok(llm_sampling_params_validate(&p, llm_engine_model(e), &param, err)
           != 0 && strcmp(param, "prompt_logprobs") == 0
           && strcmp(err, "Requested prompt logprobs of 21, which is greater "
                     "than max allowed: 20") == 0
           && llm_request_create(e, &one, 1, &p, err) == NULL,
           "21 alternatives: vLLM's message (%s)", err);
    p.prompt_logprobs = -2;
    tap_ok(llm_sampling_params_validate(&p, llm_engine_model(e), &param, err)
           != 0 && strcmp(err, "prompt_logprobs must be non-negative or -1, "
                          "got -2.") == 0, "-2: vLLM's message (%s)", err);
    llm_engine_destroy(e);
    sem_destroy(&w.sem);
}


int
main(void)
{
    char         cmd[1024], err[LLM_ERR_LEN], tmpl[] =
                     "/tmp/llm-test-plp-XXXXXX";
    static const int  lens[MAX_REQ] = { 40, 70, 33, 100, 17, 64, 90, 5,
                                        120, 48, 2, 77, 60, 99, 31, 150 };
    llm_model   *m;
    int          i;

    if (mkdtemp(tmpl) == NULL) {
        return 1;
    }
    snprintf(model_dir, sizeof(model_dir), "%s/model", tmpl);
    if (harness_make_model(model_dir, "") != 0) {
        tap_ok(0, "make a test model");
        return tap_done();
    }
    m = llm_model_load(model_dir, err);
    vocab = m->config.vocab_size;
    llm_model_free(m);

    reference_make(1, 40, &ref40);
    reference_make(2, 200, &ref200);
    for (i = 0; i < MAX_REQ; i++) {
        if (i % 3 != 2) {
            reference_make(10 + i, lens[i], &refs[i]);
        }
    }

    test_one_step_and_chunked();
    test_row_cap();
    test_prefix_cache();
    test_preemption(0);
    test_preemption(1);
    test_parallel_sampling();
    test_edges();

    snprintf(cmd, sizeof(cmd), "rm -rf %s", tmpl);
    if (system(cmd) != 0) {
        tap_diag("could not remove %s", tmpl);
    }
    return tap_done();
}
