/*
 * engine.c -- the engine thread and the client-facing half of llm.h:
 * create/destroy, submit, cancel, drain, stats.
 *
 * One turn of the engine thread:
 *   1. take new submissions (stamp `queued`), cancellations and pauses;
 *   2. run one step (step.c): schedule, forward pass, sampling, and what
 *      each new token does to its request;
 *   3. publish the step's output to the client and notify once.
 * A step that computed nothing (no requests, or all of them paused or
 * unable to run) puts the thread to sleep until a submission, a
 * cancellation or a resume wakes it.
 */
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "backend/backend.h"
#include "engine_internal.h"
#include "kv_blocks.h"
#include "model/model.h"
#include "request.h"
#include "scheduler.h"
#include "stats.h"
#include "step.h"
#include "util/util.h"

#define LLM_DEFAULT_MAX_NUM_SEQS        64
#define LLM_DEFAULT_MAX_BATCHED_TOKENS  2048
#define LLM_DEFAULT_KV_BYTES            ((size_t) 1 << 30)
/* the logits of prompt positions one step may compute (scheduler.c) */
#define LLM_PROMPT_LOGITS_BYTES         ((size_t) 64 << 20)


/* A 64-bit seed for requests without one. */
static uint64_t
llm_engine_entropy(llm_engine *e)
{
    uint64_t  z = atomic_fetch_add(&e->entropy, 0x9e3779b97f4a7c15ULL);

    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}


/* ---- the engine thread --------------------------------------------------- */


static void
llm_engine_take_submissions(llm_engine *e, llm_request **taken, int n,
    double now)
{
    int  i;

    for (i = 0; i < n; i++) {
        taken[i]->stats.queued = taken[i]->queued_since > 0
                                 && taken[i]->queued_since < now
                                 ? taken[i]->queued_since : now;
        llm_request_join_group(taken[i]);
        if (atomic_load(&taken[i]->cancelled)) {
            llm_engine_finish(e, taken[i], LLM_FINISH_ABORT, now);
        } else {
            llm_sched_enqueue(&e->sched, taken[i]);
        }
    }
}


/* What the client asked of its requests since the last step: a cancel
 * finishes a request, a pause holds for this whole step. */
static void
llm_engine_take_flags(llm_engine *e, double now)
{
    llm_request  *r, *next;
    int           i;

    for (i = e->sched.running.n - 1; i >= 0; i--) {
        r = e->sched.running.items[i];
        if (atomic_load(&r->cancelled)) {
            llm_engine_finish(e, r, LLM_FINISH_ABORT, now);
        } else {
            r->paused = atomic_load(&r->pause);
        }
    }
    for (r = e->sched.wait_head; r; r = next) {
        next = r->next;
        if (atomic_load(&r->cancelled)) {
            llm_engine_finish(e, r, LLM_FINISH_ABORT, now);
        } else {
            r->paused = atomic_load(&r->pause);
        }
    }
}


/* Hands the staged output of every changed request to the client, with the
 * engine's numbers, under the lock drain takes; notifies the client when
 * its ready list was empty. */
static void
llm_engine_publish(llm_engine *e)
{
    llm_request  *r;
    llm_req_out  *o;
    int           i, j, notify;

    pthread_mutex_lock(&e->out_mu);
    notify = e->ready.n == 0 && e->changed.n > 0;
    for (i = 0; i < e->changed.n; i++) {
        r = e->changed.items[i];
        o = &r->out;
        llm_req_out_add_text(o, r->stage.text, r->stage.text_len);
        for (j = 0; j < r->stage.n_ids; j++) {
            llm_req_out_add_id(o, r->stage.ids[j], r->stage.times[j],
                               r->stage.logprobs ? &r->stage.logprobs[j]
                                                 : NULL);
        }
        if (r->prompt_lp && !r->prompt_lp_sent
            && r->n_prompt_lp == r->n_prompt - 1)
        {
            o->prompt_lp_ready = 1;     /* once: with the first token */
            r->prompt_lp_sent = 1;
        }
        r->out_stats = r->stats;
        r->out_finish = r->finish;
        if (!r->on_ready) {
            r->on_ready = 1;
            llm_req_list_push(&e->ready, r);
        }
    }
    e->counters.num_preemptions_total = e->sched.num_preemptions;
    e->counters.prefix_cache_queries_total = e->sched.prefix_cache_queries;
    e->counters.prefix_cache_hits_total = e->sched.prefix_cache_hits;
    e->counters.num_running = e->sched.running.n;
    e->counters.num_waiting = e->sched.n_waiting;
    e->counters.num_waiting_deferred = llm_sched_num_deferred(&e->sched);
    e->counters.kv_cache_usage = e->blocks.num_blocks
        ? (double) llm_blocks_used_count(&e->blocks) / e->blocks.num_blocks
        : 0.0;
    e->stats = e->counters;
    pthread_mutex_unlock(&e->out_mu);

    for (i = 0; i < e->changed.n; i++) {
        r = e->changed.items[i];
        llm_req_out_clear(&r->stage);
        r->changed = 0;
    }
    e->changed.n = 0;
    if (notify && e->notify) {
        e->notify(e->notify_data);
    }
}


/* Whether a turn has something to do; under mu. */
static int
llm_engine_has_work(const llm_engine *e)
{
    return e->submitted.n > 0 || e->wakeup || !e->idle;
}


/* One turn: the submissions so far, cancels and pauses, one step, its
 * output published.  Called with mu held; returns with it released. */
static void
llm_engine_turn(llm_engine *e)
{
    llm_req_list  t = e->taken;
    double        now;

    /* swap the submission list out: the client keeps appending */
    e->taken = e->submitted;
    e->submitted = t;
    e->submitted.n = 0;
    e->wakeup = 0;
    pthread_mutex_unlock(&e->mu);

    llm_engine_take_submissions(e, e->taken.items, e->taken.n, llm_now());
    e->taken.n = 0;
    now = llm_now();
    llm_engine_take_flags(e, now);
    e->idle = !llm_engine_step(e, now);
    llm_engine_publish(e);
}


static void *
llm_engine_main(void *arg)
{
    llm_engine    *e = arg;
    sigset_t       all;

    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, NULL);

    for ( ;; ) {
        pthread_mutex_lock(&e->mu);
        while (!e->stop && !llm_engine_has_work(e)) {
            pthread_cond_wait(&e->cv, &e->mu);
        }
        if (e->stop) {
            pthread_mutex_unlock(&e->mu);
            break;
        }
        llm_engine_turn(e);
    }
    return NULL;
}


int
llm_engine_run(llm_engine *e)
{
    int  more;

    if (!e->inline_loop) {
        return 0;
    }
    pthread_mutex_lock(&e->mu);
    if (llm_engine_has_work(e)) {
        llm_engine_turn(e);
        pthread_mutex_lock(&e->mu);
    }
    more = llm_engine_has_work(e);
    pthread_mutex_unlock(&e->mu);
    return more;
}


/* ---- the client side ----------------------------------------------------- */


/* The scheduler's limits from the configuration (0 means the default);
 * -1 with a message when the speculation settings are out of range. */
static int
llm_engine_sched_config(const llm_engine_config *cfg, const llm_config *c,
    int max_model_len, llm_sched_config *sc, char *err)
{
    memset(sc, 0, sizeof(*sc));
    sc->max_model_len = max_model_len;
    sc->max_num_seqs = cfg->max_num_seqs > 0 ? cfg->max_num_seqs
                                             : LLM_DEFAULT_MAX_NUM_SEQS;
    sc->max_num_batched_tokens = cfg->max_num_batched_tokens > 0
                                 ? cfg->max_num_batched_tokens
                                 : LLM_DEFAULT_MAX_BATCHED_TOKENS;
    sc->max_prompt_lp_rows = (int) (LLM_PROMPT_LOGITS_BYTES
                                    / (sizeof(float) * c->vocab_size));
    if (sc->max_prompt_lp_rows < 1) {
        sc->max_prompt_lp_rows = 1;
    }
    if (cfg->spec_tokens > 0) {
        if (cfg->spec_tokens > LLM_SPEC_MAX_TOKENS || cfg->spec_lookup_min < 1
            || cfg->spec_lookup_max < cfg->spec_lookup_min)
        {
            llm_errf(err, "llm_speculative: tokens must be 1..%d and "
                     "1 <= lookup_min <= lookup_max", LLM_SPEC_MAX_TOKENS);
            return -1;
        }
        sc->spec.k = cfg->spec_tokens;
        sc->spec.lookup_min = cfg->spec_lookup_min;
        sc->spec.lookup_max = cfg->spec_lookup_max;
    }
    return 0;
}


llm_engine *
llm_engine_create(const llm_engine_config *cfg, char *err)
{
    llm_engine          *e;
    llm_backend_config   bc = { 0 };
    llm_sched_config     sc;
    const llm_config    *c;
    size_t               per_token;
    long                 ncpu;

    if (cfg->model_dir == NULL) {
        llm_errf(err, "no model directory given");
        return NULL;
    }
    e = llm_xcalloc(1, sizeof(*e));
    pthread_mutex_init(&e->mu, NULL);
    pthread_cond_init(&e->cv, NULL);
    pthread_mutex_init(&e->out_mu, NULL);
    atomic_init(&e->entropy, (uint64_t) time(NULL) * 6364136223846793005ULL
                             ^ (uint64_t) getpid() ^ (uintptr_t) e);
    e->notify = cfg->notify;
    e->notify_data = cfg->notify_data;
    e->idle = 1;

    e->model = llm_model_load(cfg->model_dir, err);
    if (e->model == NULL) {
        goto fail;
    }
    ncpu = sysconf(_SC_NPROCESSORS_ONLN);
    bc.threads = cfg->threads > 0 ? cfg->threads : (ncpu > 0 ? (int) ncpu : 1);
    if (llm_model_quantize(e->model, cfg->weights, bc.threads, err) != 0) {
        goto fail;
    }
    c = &e->model->config;
    e->max_model_len = cfg->max_model_len > 0 ? cfg->max_model_len
                                              : c->max_position_embeddings;
    if (e->max_model_len > c->max_position_embeddings) {
        llm_errf(err, "llm_max_model_len %d exceeds the model's "
                 "max_position_embeddings (%d)", e->max_model_len,
                 c->max_position_embeddings);
        goto fail;
    }
    if (llm_engine_sched_config(cfg, c, e->max_model_len, &sc, err) != 0) {
        goto fail;
    }

    /* The pool always holds one full-length sequence, so a lone request
     * can never be starved; by default it is sized for max_num_seqs of
     * them, up to 1 GiB (pages are touched only as the cache fills). */
    per_token = llm_kv_bytes_per_token(c, sizeof(float));
    bc.min_blocks = (e->max_model_len + LLM_BLOCK_SIZE - 1) / LLM_BLOCK_SIZE;
    bc.kv_bytes = cfg->kv_cache_bytes;
    if (bc.kv_bytes == 0) {
        bc.kv_bytes = (size_t) sc.max_num_seqs * e->max_model_len * per_token;
        if (bc.kv_bytes > LLM_DEFAULT_KV_BYTES) {
            bc.kv_bytes = LLM_DEFAULT_KV_BYTES;
        }
    }
    bc.gpu_memory_utilization = cfg->gpu_memory_utilization > 0
                                ? cfg->gpu_memory_utilization : 0.9;
    e->backend = llm_backend_open(e->model, cfg->device, &bc,
                                  e->device_reason, err);
    if (e->backend == NULL) {
        goto fail;
    }
    llm_stats_init(&e->counters, e->max_model_len);
    e->counters.block_size = LLM_BLOCK_SIZE;
    e->counters.num_blocks = e->backend->num_blocks;
    e->counters.enable_prefix_caching = cfg->enable_prefix_caching != 0;
    e->counters.gpu_memory_utilization = bc.gpu_memory_utilization;
    e->stats = e->counters;
    llm_blocks_init(&e->blocks, e->backend->num_blocks,
                    cfg->enable_prefix_caching);
    llm_sched_init(&e->sched, &sc, &e->blocks);
    llm_sampler_init(&e->sampler, c->vocab_size);

    if (cfg->inline_loop) {
        e->inline_loop = 1;
        return e;
    }
    if (pthread_create(&e->thread, NULL, llm_engine_main, e) != 0) {
        llm_errf(err, "cannot start the engine thread");
        goto fail;
    }
    e->thread_started = 1;
    return e;

fail:
    llm_engine_destroy(e);
    return NULL;
}


/* Drops the engine's references: requests still queued or running, and
 * finished ones whose final output was never drained. */
static void
llm_engine_release_all(llm_engine *e)
{
    llm_request  *r, *next;
    int           i;

    /* first the ready list: an unfinished request on it is also queued or
     * running, and its reference is dropped below -- possibly the last */
    for (i = 0; i < e->ready.n; i++) {
        if (e->ready.items[i]->out_finish != LLM_FINISH_NONE) {
            llm_request_unref(e->ready.items[i]);
        }
    }
    for (i = 0; i < e->submitted.n; i++) {
        llm_request_unref(e->submitted.items[i]);
    }
    for (i = 0; i < e->sched.running.n; i++) {
        llm_request_unref(e->sched.running.items[i]);
    }
    for (r = e->sched.wait_head; r; r = next) {
        next = r->next;
        llm_request_unref(r);
    }
}


void
llm_engine_destroy(llm_engine *e)
{
    if (e == NULL) {
        return;
    }
    if (e->thread_started) {
        pthread_mutex_lock(&e->mu);
        e->stop = 1;
        pthread_cond_signal(&e->cv);
        pthread_mutex_unlock(&e->mu);
        pthread_join(e->thread, NULL);
    }
    if (e->thread_started || e->inline_loop) {
        llm_engine_release_all(e);
    }
    if (e->backend) {
        e->backend->free(e->backend);
    }
    llm_blocks_free_pool(&e->blocks);
    llm_sampler_free(&e->sampler);
    llm_batch_buf_free(&e->bb);
    llm_sched_free(&e->sched);
    llm_req_list_free(&e->changed);
    llm_req_list_free(&e->submitted);
    llm_req_list_free(&e->taken);
    llm_req_list_free(&e->ready);
    free(e->draining);
    free(e->draining_req);
    free(e->logits);
    free(e->ids);
    free(e->lps);
    llm_sample_rows_free(&e->srows);
    llm_token_texts_free(&e->texts);
    llm_gvocab_free(e->gvocab);
    llm_model_free(e->model);
    pthread_mutex_destroy(&e->mu);
    pthread_cond_destroy(&e->cv);
    pthread_mutex_destroy(&e->out_mu);
    free(e);
}


const llm_model *
llm_engine_model(const llm_engine *e)
{
    return e->model;
}


const char *
llm_engine_device(const llm_engine *e)
{
    return e->backend->name;
}


const char *
llm_engine_device_reason(const llm_engine *e)
{
    return e->device_reason;
}


int
llm_engine_max_model_len(const llm_engine *e)
{
    return e->max_model_len;
}


llm_request *
llm_request_create(llm_engine *e, const int32_t *prompt, int n_prompt,
    const llm_sampling_params *p, char *err)
{
    llm_request  *r;

    r = llm_request_new(e->model, e->max_model_len, prompt, n_prompt, p,
                        p->has_seed ? p->seed : llm_engine_entropy(e), err);
    if (r != NULL) {
        r->stats.num_spec_tokens = e->sched.cfg.spec.k;
    }
    return r;
}


int
llm_engine_submit(llm_engine *e, llm_request *r)
{
    if (r->submitted) {
        return -1;
    }
    r->submitted = 1;
    atomic_fetch_add(&r->refs, 1);      /* the engine's reference */
    pthread_mutex_lock(&e->mu);
    llm_req_list_push(&e->submitted, r);
    pthread_cond_signal(&e->cv);
    pthread_mutex_unlock(&e->mu);
    return 0;
}


int
llm_engine_submit_shared(llm_engine *e, llm_request *r, llm_request *leader)
{
    if (r->submitted || leader == r || r->n_prompt != leader->n_prompt
        || r->cache_root != leader->cache_root
        || memcmp(r->tokens, leader->tokens,
                  sizeof(int32_t) * r->n_prompt) != 0)
    {
        return -1;
    }
    /* the leader's tokens and blocks are read on the engine thread only */
    atomic_fetch_add(&leader->refs, 1);
    r->share_from = leader;
    return llm_engine_submit(e, r);
}


int
llm_engine_cancel(llm_engine *e, llm_request *r)
{
    unsigned  v;

    v = atomic_fetch_or(&r->gate, LLM_GATE_CLOSED);
    atomic_store(&r->cancelled, 1);
    pthread_mutex_lock(&e->mu);
    e->wakeup = 1;
    pthread_cond_signal(&e->cv);
    pthread_mutex_unlock(&e->mu);
    return (int) (v & ~LLM_GATE_CLOSED);
}


int
llm_engine_cancel_billed(llm_engine *e, llm_request *r, int n_billed)
{
    int  n;

    atomic_store(&r->bill_limit, n_billed < 0 ? 0 : n_billed);
    n = llm_engine_cancel(e, r);
    return n < n_billed ? n : n_billed;
}


void
llm_engine_set_paused(llm_engine *e, llm_request *r, int paused)
{
    atomic_store(&r->pause, paused != 0);
    if (paused) {
        return;                         /* the next step sees it */
    }
    pthread_mutex_lock(&e->mu);
    e->wakeup = 1;
    pthread_cond_signal(&e->cv);
    pthread_mutex_unlock(&e->mu);
}


void
llm_engine_drain(llm_engine *e, llm_output_fn fn, void *data)
{
    llm_request  *r;
    llm_req_out   t;
    llm_output   *o;
    int           i, n;

    pthread_mutex_lock(&e->out_mu);
    n = e->ready.n;
    if (n > e->draining_cap) {
        e->draining_cap = n * 2;
        e->draining = llm_xrealloc(e->draining,
                                   sizeof(llm_output) * e->draining_cap);
        e->draining_req = llm_xrealloc(e->draining_req,
                                       sizeof(llm_request *)
                                       * e->draining_cap);
    }
    for (i = 0; i < n; i++) {
        r = e->ready.items[i];
        r->on_ready = 0;
        /* swap: the engine appends to a cleared buffer from now on */
        t = r->deliver;
        r->deliver = r->out;
        r->out = t;
        o = &e->draining[i];
        o->finish_reason = r->out_finish;
        o->stats = r->out_stats;
        e->draining_req[i] = r;
    }
    e->ready.n = 0;
    pthread_mutex_unlock(&e->out_mu);

    for (i = 0; i < n; i++) {
        r = e->draining_req[i];
        o = &e->draining[i];
        o->text = r->deliver.text ? r->deliver.text : "";
        o->text_len = r->deliver.text_len;
        o->ids = r->deliver.ids;
        o->token_times = r->deliver.times;
        o->n_ids = r->deliver.n_ids;
        o->logprobs = r->deliver.logprobs;
        /* complete, hence no longer written by the engine */
        o->prompt_logprobs = r->deliver.prompt_lp_ready ? r->prompt_lp : NULL;
        o->n_prompt_logprobs = o->prompt_logprobs ? r->n_prompt - 1 : 0;
        o->stop_token = o->finish_reason ? r->stop_token : -1;
        o->stop_string = o->finish_reason ? r->stop_string : NULL;
        /* written by the engine before the final publish, never after */
        o->spec_step_accepted = o->finish_reason ? r->spec_accepted : NULL;
        o->spec_step_drafted = o->finish_reason ? r->spec_drafted : NULL;
        o->n_spec_step = o->finish_reason ? r->n_spec_steps : 0;
        if (!atomic_load(&r->client_gone)) {
            fn(r, o, data);
        }
        llm_req_out_clear(&r->deliver);
        if (o->finish_reason != LLM_FINISH_NONE) {
            llm_request_unref(r);       /* the engine's reference */
        }
    }
}


void
llm_engine_stats_get(llm_engine *e, llm_engine_stats *out)
{
    pthread_mutex_lock(&e->out_mu);
    *out = e->stats;
    pthread_mutex_unlock(&e->out_mu);
}
