/*
 * test_engine.c -- the engine end to end on a small random model:
 * batch invariance of the backend, continuous batching giving the same
 * greedy tokens as one-at-a-time, chunked prefill, preemption under a tiny
 * KV pool, cancellation returning every block, stop rules, min_tokens,
 * timestamps and queue time, pausing, and request validation.
 *
 * Batch invariance: decode steps of fewer than 16 tokens (8 with AVX2)
 * always take the same arithmetic path, so a sequence's logits are bit-identical whatever
 * else is in the step; larger steps switch the matmuls to outer-product
 * tiles, equal up to f32 rounding.
 *
 * The model is made with `llm make-model` ($LLM_BUILD/llm) in a temporary
 * directory.
 */
#define _GNU_SOURCE
#include <math.h>
#include <semaphore.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "backend/backend.h"
#include "backend/batch.h"
#include "llm.h"
#include "model/model.h"
#include "tap.h"
#include "tokenizer/tokenizer.h"
#include "engine_harness.h"

#define MAX_REQ   32
#define MAX_OUT   256

typedef struct {
    int32_t             ids[MAX_OUT];
    int                 n_ids;
    char                text[4096];
    size_t              text_len;
    llm_finish_reason   finish;
    llm_request_stats   stats;
    char                stop_string[64];
    int                 done;
    int                 n_spec, spec_acc_sum, spec_draft_sum;
} result;

static char  model_dir[256];
static int   prefix_caching;
static int   same_prompts;          /* every request's prompt from seed 0 */
static int   spec_tokens;           /* n-gram speculation, 0 = off */
static float frequency_penalty;


static void
on_output(llm_request *r, const llm_output *o, void *data)
{
    result  *res = llm_request_data(r);
    waiter  *w = data;

    memcpy(res->ids + res->n_ids, o->ids, sizeof(int32_t) * o->n_ids);
    res->n_ids += o->n_ids;
    memcpy(res->text + res->text_len, o->text, o->text_len);
    res->text_len += o->text_len;
    if (o->finish_reason != LLM_FINISH_NONE) {
        res->finish = o->finish_reason;
        res->stats = o->stats;
        snprintf(res->stop_string, sizeof(res->stop_string), "%s",
                 o->stop_string ? o->stop_string : "");
        res->n_spec = o->n_spec_step;
        for (int i = 0; i < o->n_spec_step; i++) {
            res->spec_acc_sum += o->spec_step_accepted[i];
            res->spec_draft_sum += o->spec_step_drafted[i];
        }
        res->done = 1;
        w->n_done++;
    }
}


static llm_engine *
engine(waiter *w, int max_num_seqs, int max_batched, size_t kv_bytes,
    int max_model_len)
{
    llm_engine_config  cfg = { 0 };

    cfg.model_dir = model_dir;
    cfg.max_num_seqs = max_num_seqs;
    cfg.max_num_batched_tokens = max_batched;
    cfg.kv_cache_bytes = kv_bytes;
    cfg.max_model_len = max_model_len;
    cfg.enable_prefix_caching = prefix_caching;
    cfg.spec_tokens = spec_tokens;
    cfg.spec_lookup_min = 1;
    cfg.spec_lookup_max = 4;
    return harness_engine(w, &cfg);
}


/* Runs n greedy requests (prompt lengths lens[i]) with the given engine
 * settings, all submitted at once. */
static void
run_batch(int first, int n, const int *lens, int max_tokens,
    int max_num_seqs, int max_batched, size_t kv, result *res,
    llm_engine_stats *st)
{
    waiter               w;
    llm_engine          *e = engine(&w, max_num_seqs, max_batched, kv, 256);
    llm_request         *r[MAX_REQ];
    llm_sampling_params  p;
    int32_t              prompt[256];
    char                 err[LLM_ERR_LEN];
    int                  i;

    llm_sampling_params_init(&p, llm_engine_model(e));
    p.temperature = 0.0f;
    p.max_tokens = max_tokens;
    p.ignore_eos = 1;
    p.frequency_penalty = frequency_penalty;
    memset(res, 0, sizeof(result) * n);
    for (i = 0; i < n; i++) {
        harness_prompt(same_prompts ? 0 : first + i, prompt, lens[i]);
        r[i] = llm_request_create(e, prompt, lens[i], &p, err);
        llm_request_set_data(r[i], &res[i]);
        llm_engine_submit(e, r[i]);
    }
    harness_wait_all(e, &w, n, on_output);
    if (st) {
        llm_engine_stats_get(e, st);
    }
    for (i = 0; i < n; i++) {
        llm_request_release(r[i]);
    }
    llm_engine_destroy(e);
    sem_destroy(&w.sem);
}


static int
same_tokens(const result *a, const result *b, int n)
{
    int  i;

    for (i = 0; i < n; i++) {
        if (a[i].n_ids != b[i].n_ids
            || memcmp(a[i].ids, b[i].ids, sizeof(int32_t) * a[i].n_ids) != 0
            || a[i].text_len != b[i].text_len
            || memcmp(a[i].text, b[i].text, a[i].text_len) != 0)
        {
            tap_diag("request %d differs", i);
            return 0;
        }
    }
    return 1;
}


static void
test_batch_invariance(void)
{
    char                 err[LLM_ERR_LEN];
    llm_model           *m = llm_model_load(model_dir, err);
    llm_backend_config   bc = { 0 };
    llm_backend         *b;
    llm_batch_buf        bb = { 0 };
    int32_t              ta[4] = { 0, 1, 2, 3 }, tb[4] = { 4, 5, 6, 7 };
    int32_t              tc[4] = { 8, 9, 10, 11 }, pa[40], pb[30], pc[5];
    float               *alone, *mixed;
    int                  V = m->config.vocab_size;

    harness_prompt(1, pa, 40);
    harness_prompt(2, pb, 30);
    harness_prompt(3, pc, 5);
    bc.threads = 2;
    bc.min_blocks = 16;
    b = llm_backend_cpu_create(m, &bc, err);
    alone = malloc(sizeof(float) * V * 40);
    mixed = malloc(sizeof(float) * V * 5);     /* A x 4 + C x 1 */

    /* A alone, all positions */
    llm_batch_add(&bb, pa, 40, 0, ta, 4, LLM_LOGITS_ALL);
    b->forward(b, &bb.batch, alone, err);
    /* prefill regime: B's prefill, then A's positions 36..39 recomputed
     * next to B and next to C's prefill, in one 39-token step */
    llm_batch_reset(&bb);
    llm_batch_add(&bb, pb, 30, 0, tb, 4, LLM_LOGITS_NONE);
    llm_batch_add(&bb, pa + 36, 4, 36, ta, 4, LLM_LOGITS_ALL);
    llm_batch_add(&bb, pc, 5, 0, tc, 4, LLM_LOGITS_LAST);
    b->forward(b, &bb.batch, mixed, err);
    {
        /* the 4 + 1 logits rows take the dot-product form, the 40 rows
         * alone the outer-product form: equal up to f32 summation order */
        double  d, worst = 0;
        int     i;

        for (i = 0; i < 4 * V; i++) {
            d = fabs(alone[(size_t) 36 * V + i] - mixed[i])
                / (1.0 + fabs(alone[(size_t) 36 * V + i]));
            worst = d > worst ? d : worst;
        }
        tap_ok(worst < 1e-5, "prefill: a sequence's logits alone and batched "
               "agree to f32 rounding (%.2g)", worst);
    }

    /* decode regime: A's next token alone, then next to B's and C's */
    llm_batch_reset(&bb);
    llm_batch_add(&bb, pa + 39, 1, 40, ta, 4, LLM_LOGITS_LAST);
    b->forward(b, &bb.batch, alone, err);
    llm_batch_reset(&bb);
    llm_batch_add(&bb, pb + 29, 1, 30, tb, 4, LLM_LOGITS_LAST);
    llm_batch_add(&bb, pa + 39, 1, 40, ta, 4, LLM_LOGITS_LAST);
    llm_batch_add(&bb, pc + 4, 1, 5, tc, 4, LLM_LOGITS_LAST);
    b->forward(b, &bb.batch, mixed, err);
    tap_ok(memcmp(alone, mixed + V, sizeof(float) * V) == 0,
           "decode: a sequence's logits are bit-identical alone and batched");

    llm_batch_buf_free(&bb);
    free(alone);
    free(mixed);
    b->free(b);
    llm_model_free(m);
}


static void
test_batching(void)
{
    static const int   lens[16] = { 3, 40, 17, 5, 64, 9, 33, 1, 12, 50, 2, 27,
                                    8, 16, 31, 70 };
    static result      solo[16], batched[16], chunked[16], tight[16];
    llm_engine_stats   st;
    int                i, ok;

    for (i = 0; i < 16; i++) {
        run_batch(i, 1, &lens[i], 12, 1, 2048, 0, &solo[i], NULL);
    }
    run_batch(0, 16, lens, 12, 64, 2048, 0, batched, NULL);
    tap_ok(same_tokens(solo, batched, 16),
           "16 requests batched give the same greedy tokens as one at a time");
    run_batch(0, 16, lens, 12, 64, 24, 0, chunked, NULL);
    tap_ok(same_tokens(solo, chunked, 16),
           "chunked prefill (24-token budget) gives the same tokens");
    /* the smallest pool: 16 blocks (one 256-token sequence) for 16
     * requests that need up to 6 blocks each */
    run_batch(0, 16, lens, 12, 64, 2048, 1, tight, &st);
    tap_ok(same_tokens(solo, tight, 16) && st.num_preemptions_total > 0,
           "a tiny KV pool preempts (%llu times) and changes no output",
           (unsigned long long) st.num_preemptions_total);
    for (i = 0, ok = 1; i < 16; i++) {
        ok &= tight[i].finish == LLM_FINISH_LENGTH && tight[i].n_ids == 12;
    }
    tap_ok(ok, "every preempted request still finishes with all its tokens");
    tap_ok(st.kv_cache_usage == 0.0 && st.num_running == 0
           && st.num_waiting == 0, "the pool is empty again at the end");
    {
        uint64_t  gen = 0, prompt = 0;

        for (i = 0; i < 16; i++) {
            gen += tight[i].stats.completion_tokens;
            prompt += tight[i].stats.prompt_tokens;
        }
        tap_ok(st.request_success_total[LLM_FINISH_LENGTH] == 16
               && st.generation_tokens_total == gen
               && st.prompt_tokens_total == prompt
               && st.hist[LLM_H_GENERATION_TOKENS].total == 16
               && st.hist[LLM_H_GENERATION_TOKENS].sum == (double) gen
               && st.hist[LLM_H_PROMPT_TOKENS].sum == (double) prompt
               && st.hist[LLM_H_TTFT].total == 16
               && st.hist[LLM_H_ITL].total >= 16
               && st.hist[LLM_H_E2E].total == 16,
               "engine counters and histograms equal the per-request sums");
    }
}


static void
test_cancel_and_stats(void)
{
    waiter               w;
    llm_engine          *e = engine(&w, 1, 2048, 0, 256);
    llm_sampling_params  p;
    llm_request         *r1, *r2;
    result               a = { 0 }, b = { 0 };
    llm_engine_stats     st;
    llm_metrics          m;
    int32_t              prompt[20];
    char                 err[LLM_ERR_LEN];
    int                  n_cancel;

    llm_sampling_params_init(&p, llm_engine_model(e));
    p.temperature = 0.0f;
    p.ignore_eos = 1;
    p.max_tokens = 200;
    harness_prompt(5, prompt, 20);
    r1 = llm_request_create(e, prompt, 20, &p, err);
    r2 = llm_request_create(e, prompt, 20, &p, err);
    llm_request_set_data(r1, &a);
    llm_request_set_data(r2, &b);
    llm_engine_submit(e, r1);
    llm_engine_submit(e, r2);           /* waits: max_num_seqs 1 */
    while (a.n_ids < 3) {
        sem_wait(&w.sem);
        llm_engine_drain(e, on_output, &w);
    }
    llm_engine_stats_get(e, &st);
    tap_ok(st.num_waiting == 1 && st.num_waiting_deferred == 0,
           "the one behind waits for capacity, not deferred");
    n_cancel = llm_engine_cancel(e, r1);
    harness_wait_all(e, &w, 1, on_output);
    tap_ok(a.finish == LLM_FINISH_ABORT && a.n_ids < 200,
           "cancel finishes a running request with abort (%d tokens)",
           a.n_ids);
    tap_ok(n_cancel == a.stats.completion_tokens && n_cancel == a.n_ids,
           "cancel returns the final token count (%d), all of them delivered",
           n_cancel);
    llm_engine_cancel(e, r2);
    harness_wait_all(e, &w, 2, on_output);
    llm_engine_stats_get(e, &st);
    tap_ok(st.kv_cache_usage == 0.0 && st.num_running == 0,
           "cancellation returns every KV block");
    tap_ok(b.finish == LLM_FINISH_ABORT,
           "the request queued behind it can be cancelled too");
    /* the second may have run a step between the two cancels */
    tap_ok(st.prompt_tokens_total == (b.n_ids > 0 ? 40u : 20u)
           && st.prompt_tokens_cached_total == 0
           && st.hist[LLM_H_PREFILL_KV_COMPUTED].total == 2
           && st.hist[LLM_H_PREFILL_KV_COMPUTED].sum == 40.0
           && st.hist[LLM_H_MAX_GENERATION_TOKENS].total == 2
           && st.hist[LLM_H_MAX_GENERATION_TOKENS].sum
              == (double) (a.n_ids + b.n_ids),
           "aborted: both observe their 20 computed prompt tokens and their "
           "generations (%d and %d); a prompt counts once it has a token",
           a.n_ids, b.n_ids);
    llm_metrics_compute(&a.stats, &m);
    tap_ok(a.stats.queued > 0 && a.stats.scheduled >= a.stats.queued
           && a.stats.first_token > a.stats.scheduled
           && a.stats.last_token >= a.stats.first_token
           && m.has_ttft && m.has_queue && m.has_generation,
           "timestamps are ordered queued <= scheduled < first <= last");
    tap_ok(fabs(m.tokens_per_second
                - a.stats.completion_tokens
                  / (a.stats.last_token - a.stats.scheduled)) < 1e-6,
           "tokens_per_second = N / (last - scheduled)");
    llm_request_release(r1);
    llm_request_release(r2);
    llm_engine_destroy(e);
    sem_destroy(&w.sem);
}


static void
test_queue_time(void)
{
    static const int  lens[2] = { 30, 30 };
    result            res[2];

    run_batch(0, 2, lens, 20, 1, 2048, 0, res, NULL);
    tap_ok(res[1].stats.scheduled >= res[0].stats.last_token
           && (res[1].stats.scheduled - res[1].stats.queued)
              > (res[0].stats.scheduled - res[0].stats.queued),
           "with max_num_seqs 1 the second request queues behind the first");
}


static void
test_stop_rules(void)
{
    waiter               w;
    llm_engine          *e = engine(&w, 8, 2048, 0, 256);
    const llm_model     *m = llm_engine_model(e);
    llm_sampling_params  p;
    llm_request         *r;
    result               base = { 0 }, a = { 0 }, c = { 0 };
    int32_t              prompt[12], eos = m->gen.eos_ids[0];
    float                big = 100.0f;
    char                 err[LLM_ERR_LEN], stop[16];
    const char          *stops[1];
    size_t               cut;

    harness_prompt(9, prompt, 12);
    llm_sampling_params_init(&p, m);
    p.temperature = 0.0f;
    p.ignore_eos = 1;
    p.max_tokens = 24;
    r = llm_request_create(e, prompt, 12, &p, err);
    llm_request_set_data(r, &base);
    llm_engine_submit(e, r);
    harness_wait_all(e, &w, 1, on_output);
    llm_request_release(r);
    tap_ok(base.finish == LLM_FINISH_LENGTH && base.n_ids == 24,
           "max_tokens ends with length");

    /* a stop string taken from the middle of the text, crossing tokens */
    cut = base.text_len / 2;
    while (cut > 0 && ((unsigned char) base.text[cut] & 0xc0) == 0x80) {
        cut--;
    }
    snprintf(stop, sizeof(stop), "%.*s", 6, base.text + cut);
    stops[0] = stop;
    p.stop = stops;
    p.n_stop = 1;
    r = llm_request_create(e, prompt, 12, &p, err);
    llm_request_set_data(r, &a);
    llm_engine_submit(e, r);
    harness_wait_all(e, &w, 2, on_output);
    llm_request_release(r);
    tap_ok(a.finish == LLM_FINISH_STOP && strcmp(a.stop_string, stop) == 0
           && memmem(a.text, a.text_len, stop, strlen(stop)) == NULL
           && a.text_len <= cut
           && memcmp(a.text, base.text, a.text_len) == 0,
           "a stop string ends the text before it and is never emitted");
    p.n_stop = 0;

    /* EOS forced by a bias, held off by min_tokens */
    p.ignore_eos = 0;
    p.logit_bias_ids = &eos;
    p.logit_bias_values = &big;
    p.n_logit_bias = 1;
    p.min_tokens = 5;
    r = llm_request_create(e, prompt, 12, &p, err);
    llm_request_set_data(r, &c);
    llm_engine_submit(e, r);
    harness_wait_all(e, &w, 3, on_output);
    llm_request_release(r);
    tap_ok(c.finish == LLM_FINISH_STOP && c.n_ids == 6 && c.ids[5] == eos,
           "min_tokens 5 holds EOS off for 5 tokens, then it stops");

    p.n_logit_bias = 0;
    p.min_tokens = 0;
    p.top_p = 0.0f;
    tap_ok(llm_request_create(e, prompt, 12, &p, err) == NULL
           && strstr(err, "top_p") != NULL, "invalid top_p is refused: %s",
           err);
    p.top_p = 1.0f;
    {
        int32_t  longp[300];

        harness_prompt(1, longp, 300);
        tap_ok(llm_request_create(e, longp, 300, &p, err) == NULL
               && strstr(err, "maximum context length is 256") != NULL,
               "a prompt longer than max_model_len is refused: %s", err);
    }
    tap_ok(llm_request_create(e, prompt, 0, &p, err) == NULL,
           "an empty prompt is refused");
    llm_engine_destroy(e);
    sem_destroy(&w.sem);
}


static void
test_prefix_cache(void)
{
    static const int   lens[16] = { 100, 100, 40, 100, 17, 100, 64, 100, 9,
                                    100, 33, 100, 70, 100, 5, 100 };
    static result      solo[2], cached[16], plain[16];
    waiter             w;
    llm_engine        *e;
    llm_engine_stats   st;
    llm_sampling_params p;
    llm_request       *r;
    int32_t            prompt[100];
    char               err[LLM_ERR_LEN];
    int                i, ok;

    prefix_caching = 1;
    e = engine(&w, 4, 2048, 0, 256);
    llm_sampling_params_init(&p, llm_engine_model(e));
    p.temperature = 0.0f;
    p.ignore_eos = 1;
    p.max_tokens = 10;
    harness_prompt(42, prompt, 100);
    for (i = 0; i < 2; i++) {
        memset(&solo[i], 0, sizeof(result));
        r = llm_request_create(e, prompt, 100, &p, err);
        llm_request_set_data(r, &solo[i]);
        llm_engine_submit(e, r);
        harness_wait_all(e, &w, i + 1, on_output);
        llm_request_release(r);
    }
    llm_engine_stats_get(e, &st);
    tap_ok(solo[0].stats.cached_tokens == 0
           && solo[1].stats.cached_tokens == 96,
           "the same 100-token prompt again hits 6 cached blocks (%d tokens)",
           solo[1].stats.cached_tokens);
    tap_ok(same_tokens(&solo[0], &solo[1], 1),
           "a prefix-cache hit gives the same output");
    tap_ok(st.prefix_cache_queries_total == 200
           && st.prefix_cache_hits_total == 96,
           "prefix cache counters: %llu queried, %llu hit",
           (unsigned long long) st.prefix_cache_queries_total,
           (unsigned long long) st.prefix_cache_hits_total);
    tap_ok(st.prompt_tokens_total == 200
           && st.prompt_tokens_cached_total == 96
           && st.hist[LLM_H_PREFILL_KV_COMPUTED].total == 2
           && st.hist[LLM_H_PREFILL_KV_COMPUTED].sum == 100.0 + 4.0,
           "of 200 prompt tokens 96 were cached; the requests computed 100 "
           "and 4 (%.0f)", st.hist[LLM_H_PREFILL_KV_COMPUTED].sum);
    tap_ok(st.enable_prefix_caching == 1 && st.block_size == 16,
           "the snapshot has the cache's settings");
    tap_ok(st.kv_cache_usage == 0.0,
           "cached blocks nobody holds count as free");
    llm_engine_destroy(e);
    sem_destroy(&w.sem);

    /* many requests sharing prompts under a tiny pool, with and without
     * the cache: same tokens */
    same_prompts = 1;
    prefix_caching = 0;
    run_batch(0, 16, lens, 8, 64, 2048, 1, plain, NULL);
    prefix_caching = 1;
    run_batch(0, 16, lens, 8, 64, 2048, 1, cached, &st);
    same_prompts = 0;
    tap_ok(same_tokens(plain, cached, 16),
           "with preemption and shared prefixes the cache changes no output");
    for (i = 0, ok = 1; i < 16; i++) {
        ok &= cached[i].n_ids == 8;
    }
    tap_ok(ok && st.prefix_cache_hits_total > 0 && st.kv_cache_usage == 0.0,
           "all finish, %llu tokens came from the cache, nothing held",
           (unsigned long long) st.prefix_cache_hits_total);
    prefix_caching = 0;
}


/* On the untied model the output rarely repeats, so drafts are rare; on a
 * tied one (logits = hidden state x embeddings) greedy decoding repeats its
 * input token, so drafts are accepted; with a frequency penalty on top the
 * repeats break off, so some drafts are rejected and their K/V discarded.
 * Each must give exactly the plain output. */
static void
test_speculation(const char *what, int want_drafts, int want_rejects)
{
    static const int   lens[12] = { 40, 64, 33, 90, 17, 50, 25, 70, 12, 45,
                                    81, 8 };
    static result      plain[12], spec[12], solo[12];
    llm_engine_stats   st;
    uint64_t           acc = 0, drafted = 0, steps = 0;
    int                i, j, ok, hsum, hacc;

    run_batch(100, 12, lens, 24, 64, 2048, 0, plain, NULL);
    spec_tokens = 4;
    run_batch(100, 12, lens, 24, 64, 2048, 0, spec, &st);
    for (i = 0; i < 12; i++) {
        run_batch(100 + i, 1, &lens[i], 24, 1, 2048, 0, &solo[i], NULL);
    }
    spec_tokens = 0;
    tap_ok(same_tokens(plain, spec, 12),
           "%s: greedy with speculation, batched, equals greedy without it",
           what);
    tap_ok(same_tokens(plain, solo, 12),
           "%s: greedy with speculation, one at a time, equals it too", what);
    for (i = 0, ok = 1; i < 12; i++) {
        hsum = hacc = 0;
        for (j = 0; j <= 4; j++) {
            hsum += spec[i].stats.acceptance_histogram[j];
            hacc += j * spec[i].stats.acceptance_histogram[j];
        }
        ok &= hsum == spec[i].stats.num_spec_steps
              && hacc == spec[i].stats.num_accepted_tokens
              && spec[i].n_spec == spec[i].stats.num_spec_steps
              && spec[i].spec_acc_sum == spec[i].stats.num_accepted_tokens
              && spec[i].spec_draft_sum == spec[i].stats.num_draft_tokens
              && spec[i].stats.num_spec_tokens == 4;
        acc += spec[i].stats.num_accepted_tokens;
        drafted += spec[i].stats.num_draft_tokens;
        steps += spec[i].stats.num_spec_steps;
    }
    tap_ok(ok, "%s: histogram sums to the steps, per-step lists sum to the "
           "totals", what);
    tap_ok(st.spec_num_drafts_total == steps
           && st.spec_num_draft_tokens_total == drafted
           && st.spec_num_accepted_tokens_total == acc
           && (!want_drafts || steps > 0) && (!want_rejects || acc < drafted),
           "%s: engine counters equal the per-request sums (%llu of %llu "
           "drafts accepted in %llu steps)", what, (unsigned long long) acc,
           (unsigned long long) drafted, (unsigned long long) steps);
    tap_ok(st.spec_accepted_per_pos_total[0] >= st.spec_accepted_per_pos_total[1]
           && st.spec_accepted_per_pos_total[0] + st.spec_accepted_per_pos_total[1]
              + st.spec_accepted_per_pos_total[2]
              + st.spec_accepted_per_pos_total[3] == acc,
           "%s: accepted tokens per draft position sum to the accepted total",
           what);
}


/* Drains until the request behind res has at least n tokens. */
static void
wait_tokens(llm_engine *e, waiter *w, const result *res, int n)
{
    while (res->n_ids < n) {
        sem_wait(&w->sem);
        llm_engine_drain(e, on_output, w);
    }
}


/*
 * Pausing.  Nothing here races a clock: output of steps before a pause
 * may still be on its way, so a request submitted after the pause marks
 * the time from which the paused one may get nothing more (the step that
 * admits it sees the pause) -- and it has a one-token prompt, so that its
 * steps stay in the bit-identical decode regime of the others.
 */
static void
test_pause(void)
{
    static const int     lens[2] = { 20, 24 };
    waiter               w;
    llm_engine          *e;
    llm_engine_stats     st;
    llm_sampling_params  p;
    llm_request         *r[3];
    result               ref[2], res[5];
    int32_t              prompt[24];
    char                 err[LLM_ERR_LEN];
    int                  i, paused_at, n_cancel;

    run_batch(7, 2, lens, 60, 4, 2048, 0, ref, NULL);

    e = engine(&w, 4, 2048, 0, 256);
    llm_sampling_params_init(&p, llm_engine_model(e));
    p.temperature = 0.0f;
    p.ignore_eos = 1;
    memset(res, 0, sizeof(res));
    for (i = 0; i < 3; i++) {
        p.max_tokens = i < 2 ? 60 : 20;
        harness_prompt(7 + i, prompt, i < 2 ? lens[i] : 1);
        r[i] = llm_request_create(e, prompt, i < 2 ? lens[i] : 1, &p, err);
        llm_request_set_data(r[i], &res[i]);
    }
    llm_engine_submit(e, r[0]);
    llm_engine_submit(e, r[1]);
    wait_tokens(e, &w, &res[0], 3);
    llm_engine_set_paused(e, r[0], 1);
    llm_engine_submit(e, r[2]);         /* the marker */
    wait_tokens(e, &w, &res[2], 1);
    paused_at = res[0].n_ids;
    harness_wait_all(e, &w, 2, on_output);
    llm_engine_stats_get(e, &st);
    tap_ok(res[2].n_ids == 20 && res[1].n_ids == 60
           && res[0].n_ids == paused_at && !res[0].done,
           "paused after %d tokens, a request gets none while the others "
           "run to their ends", paused_at);
    tap_ok(st.num_running == 1 && st.kv_cache_usage > 0,
           "it still counts as running, and keeps its blocks");
    llm_engine_set_paused(e, r[0], 0);
    harness_wait_all(e, &w, 3, on_output);
    tap_ok(same_tokens(ref, res, 2) && res[0].finish == LLM_FINISH_LENGTH
           && res[0].n_ids == 60,
           "resumed, it finishes with the greedy tokens of an unpaused run "
           "(and so does the other)");

    /* a paused request, running or waiting, can still be cancelled */
    for (i = 0; i < 3; i++) {
        llm_request_release(r[i]);
        p.max_tokens = i < 2 ? 200 : 10;
        harness_prompt(9, prompt, i < 2 ? 20 : 1);
        r[i] = llm_request_create(e, prompt, i < 2 ? 20 : 1, &p, err);
        llm_request_set_data(r[i], &res[2 + i]);
    }
    memset(&res[2], 0, sizeof(result) * 3);
    llm_engine_submit(e, r[0]);         /* runs, then is paused */
    wait_tokens(e, &w, &res[2], 2);
    llm_engine_set_paused(e, r[0], 1);
    llm_engine_set_paused(e, r[1], 1);
    llm_engine_submit(e, r[1]);         /* paused before it ran */
    llm_engine_submit(e, r[2]);         /* the marker, queued behind it */
    wait_tokens(e, &w, &res[4], 1);
    llm_engine_stats_get(e, &st);
    tap_ok(st.num_waiting == 1 && st.num_waiting_deferred == 1,
           "the paused one waiting is deferred (of %d waiting, %d)",
           st.num_waiting, st.num_waiting_deferred);
    paused_at = res[2].n_ids;
    harness_wait_all(e, &w, 4, on_output);
    tap_ok(res[4].finish == LLM_FINISH_LENGTH && res[4].n_ids == 10
           && res[2].n_ids == paused_at && res[3].n_ids == 0,
           "a request queued behind a paused one runs to its end; the "
           "paused one is passed over");
    n_cancel = llm_engine_cancel(e, r[0]);
    llm_engine_cancel(e, r[1]);
    harness_wait_all(e, &w, 6, on_output);
    llm_engine_stats_get(e, &st);
    tap_ok(res[2].finish == LLM_FINISH_ABORT && res[2].n_ids == paused_at
           && n_cancel == paused_at && res[3].finish == LLM_FINISH_ABORT
           && res[3].n_ids == 0,
           "paused requests are cancelled (%d and 0 tokens)", n_cancel);
    tap_ok(st.kv_cache_usage == 0.0 && st.num_running == 0
           && st.num_waiting == 0, "and their blocks are returned");
    for (i = 0; i < 3; i++) {
        llm_request_release(r[i]);
    }
    llm_engine_destroy(e);
    sem_destroy(&w.sem);
}


/* n > 1: four greedy samples of one prompt, three sharing the first's
 * prompt blocks; the same tokens as alone, fewer tokens computed. */
static void
test_parallel_sampling(void)
{
    waiter               w;
    llm_engine          *e = engine(&w, 8, 2048, 0, 256);
    llm_sampling_params  p;
    llm_request         *r[4];
    result               res[4], solo;
    int32_t              prompt[100];
    char                 err[LLM_ERR_LEN];
    llm_engine_stats     st;
    int                  i, ok = 1;

    harness_prompt(77, prompt, 100);
    llm_sampling_params_init(&p, llm_engine_model(e));
    p.temperature = 0.0f;
    p.ignore_eos = 1;
    p.max_tokens = 8;
    p.n = 4;
    memset(res, 0, sizeof(res));
    for (i = 0; i < 4; i++) {
        p.seq_index = i;
        r[i] = llm_request_create(e, prompt, 100, &p, err);
        llm_request_set_data(r[i], &res[i]);
        if (i == 0) {
            llm_engine_submit(e, r[0]);
        } else {
            ok &= llm_engine_submit_shared(e, r[i], r[0]) == 0;
        }
    }
    harness_wait_all(e, &w, 4, on_output);
    llm_engine_stats_get(e, &st);
    for (i = 0; i < 4; i++) {
        llm_request_release(r[i]);
    }
    llm_engine_destroy(e);
    sem_destroy(&w.sem);
    run_batch(77, 1, (int[]) { 100 }, 8, 1, 2048, 0, &solo, NULL);
    for (i = 0; i < 4; i++) {
        ok &= same_tokens(&solo, &res[i], 1);
    }
    tap_ok(ok, "n = 4 sharing one prompt: every sample equals the solo run");
    tap_ok(res[0].stats.cached_tokens == 0 && res[1].stats.cached_tokens == 96
           && res[3].stats.cached_tokens == 96,
           "followers start from the leader's 6 prompt blocks");
    tap_ok(st.kv_cache_usage == 0.0
           && st.hist[LLM_H_PARAMS_N].total == 1
           && st.hist[LLM_H_PARAMS_N].sum == 4.0,
           "blocks all returned; request_params_n observed once, as 4");
    tap_ok(st.hist[LLM_H_MAX_GENERATION_TOKENS].total == 1
           && st.hist[LLM_H_MAX_GENERATION_TOKENS].sum == 8.0
           && st.hist[LLM_H_GENERATION_TOKENS].total == 4,
           "request_max_num_generation_tokens: once for the 4 samples");
}


/* n = 4: samples of 5, 9 and 3 tokens and one cancelled before it runs;
 * the 3-token one is held (paused) until the others ended, so the last to
 * finish is not the longest: the longest generation, observed once, when
 * the last sample ends. */
static void
test_max_generation(void)
{
    static const int     max_tokens[4] = { 5, 9, 3, 50 };
    waiter               w;
    llm_engine          *e = engine(&w, 8, 2048, 0, 256);
    llm_sampling_params  p;
    llm_request         *r[4];
    result               res[4];
    int32_t              prompt[40];
    char                 err[LLM_ERR_LEN];
    llm_engine_stats     st;
    uint64_t             early;
    int                  i;

    harness_prompt(78, prompt, 40);
    llm_sampling_params_init(&p, llm_engine_model(e));
    p.temperature = 0.0f;
    p.ignore_eos = 1;
    p.n = 4;
    memset(res, 0, sizeof(res));
    for (i = 0; i < 4; i++) {
        p.seq_index = i;
        p.max_tokens = max_tokens[i];
        r[i] = llm_request_create(e, prompt, 40, &p, err);
        llm_request_set_data(r[i], &res[i]);
    }
    llm_engine_set_paused(e, r[2], 1);
    llm_engine_cancel(e, r[3]);
    llm_engine_submit(e, r[0]);
    for (i = 1; i < 4; i++) {
        llm_engine_submit_shared(e, r[i], r[0]);
    }
    harness_wait_all(e, &w, 3, on_output);
    llm_engine_stats_get(e, &st);
    early = st.hist[LLM_H_MAX_GENERATION_TOKENS].total;
    llm_engine_set_paused(e, r[2], 0);
    harness_wait_all(e, &w, 4, on_output);
    llm_engine_stats_get(e, &st);
    tap_ok(res[0].n_ids == 5 && res[1].n_ids == 9 && res[2].n_ids == 3
           && res[3].finish == LLM_FINISH_ABORT && early == 0
           && st.hist[LLM_H_MAX_GENERATION_TOKENS].total == 1
           && st.hist[LLM_H_MAX_GENERATION_TOKENS].sum == 9.0
           && st.hist[LLM_H_GENERATION_TOKENS].sum == 17.0,
           "n = 4 (5, 9, a cancel, then 3 tokens): nothing while one runs, "
           "then max_num_generation_tokens observes 9 once (%llu, %.0f)",
           (unsigned long long) st.hist[LLM_H_MAX_GENERATION_TOKENS].total,
           st.hist[LLM_H_MAX_GENERATION_TOKENS].sum);
    for (i = 0; i < 4; i++) {
        llm_request_release(r[i]);
    }
    llm_engine_destroy(e);
    sem_destroy(&w.sem);
}


/* The cache's settings in the snapshot: the blocks the backend made of
 * llm_kv_cache_size (at least one max_model_len sequence's worth). */
static void
test_cache_config(void)
{
    waiter              w;
    llm_engine         *e;
    llm_engine_stats    st;
    const llm_config   *c;
    size_t              per_block, kv = 3 << 20;
    int                 want;

    e = engine(&w, 4, 2048, kv, 256);
    llm_engine_stats_get(e, &st);
    c = &llm_engine_model(e)->config;
    per_block = (size_t) c->n_layers * 2 * c->n_kv_heads * c->head_dim
                * sizeof(float) * 16;
    want = (int) (kv / per_block);
    want = want < 256 / 16 ? 256 / 16 : want;
    tap_ok(st.block_size == 16 && st.num_blocks == want
           && st.enable_prefix_caching == 0
           && st.gpu_memory_utilization == 0.9,
           "cache config: %d blocks of %d tokens (%zu bytes each), prefix "
           "caching off, gpu_memory_utilization %.2f", st.num_blocks,
           st.block_size, per_block, st.gpu_memory_utilization);
    llm_engine_destroy(e);
    sem_destroy(&w.sem);
}


/* Destroying the engine with requests queued, running, finished but not
 * drained, and released by the client: every reference is dropped once
 * (the ASan run of this test checks for use-after-free and leaks). */
static void
test_destroy_in_flight(void)
{
    waiter               w;
    llm_engine          *e = engine(&w, 2, 2048, 0, 256);
    llm_sampling_params  p;
    llm_request         *r[6];
    result               res[6];
    int32_t              prompt[20];
    char                 err[LLM_ERR_LEN];
    int                  i;

    llm_sampling_params_init(&p, llm_engine_model(e));
    p.temperature = 0.0f;
    p.ignore_eos = 1;
    memset(res, 0, sizeof(res));
    for (i = 0; i < 6; i++) {
        p.max_tokens = i == 0 ? 1 : 200;
        harness_prompt(i, prompt, 20);
        r[i] = llm_request_create(e, prompt, 20, &p, err);
        llm_request_set_data(r[i], &res[i]);
        llm_engine_submit(e, r[i]);
    }
    while (res[1].n_ids < 2) {
        sem_wait(&w.sem);
        llm_engine_drain(e, on_output, &w);
    }
    /* r[0] finished; r[1], r[2] run; the rest wait.  Let go of some. */
    llm_request_release(r[1]);
    llm_request_release(r[4]);
    llm_engine_destroy(e);
    for (i = 0; i < 6; i++) {
        if (i != 1 && i != 4) {
            llm_request_release(r[i]);
        }
    }
    sem_destroy(&w.sem);
    tap_ok(res[0].done && res[0].n_ids == 1,
           "the engine can be destroyed with requests in every state");
}


int
main(void)
{
    char  cmd[1024], tmpl[] = "/tmp/llm-test-engine-XXXXXX";

    if (mkdtemp(tmpl) == NULL) {
        return 1;
    }
    snprintf(model_dir, sizeof(model_dir), "%s/model", tmpl);
    if (harness_make_model(model_dir, "") != 0) {
        tap_ok(0, "make a test model");
        return tap_done();
    }

    test_batch_invariance();
    test_batching();
    test_cancel_and_stats();
    test_queue_time();
    test_stop_rules();
    test_prefix_cache();
    test_parallel_sampling();
    test_max_generation();
    test_cache_config();
    test_pause();
    test_destroy_in_flight();
    test_speculation("untied", 0, 0);
    snprintf(model_dir, sizeof(model_dir), "%s/tied", tmpl);
    tap_ok(harness_make_model(model_dir, "--tie") == 0, "make a tied model");
    test_speculation("tied", 1, 0);
    frequency_penalty = 0.7f;
    test_speculation("tied, frequency penalty", 1, 1);
    frequency_penalty = 0.0f;

    snprintf(cmd, sizeof(cmd), "rm -rf %s", tmpl);
    if (system(cmd) != 0) {
        tap_diag("could not remove %s", tmpl);
    }
    return tap_done();
}
