/*
 * engine.c -- the engine thread and the client-facing half of llm.h:
 * create/destroy, submit, cancel, drain, stats.
 *
 * One step of the engine thread:
 *   1. take new submissions (stamp `queued`) and cancellations;
 *   2. schedule: build the step's batch (stamp `scheduled` the first time);
 *   3. backend->forward(batch), or forward_sample(batch) when the backend
 *      samples on the device and no request of the step verifies drafts;
 *   4. sample every sequence that reached the end of its tokens (or take
 *      the device's id); apply the token (text, stop rules,
 *      `first_token`/`last_token` = this step's time);
 *   5. publish the step's output to the client and notify once.
 */
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "engine_internal.h"
#include "stats.h"
#include "util/util.h"

#define LLM_DEFAULT_MAX_NUM_SEQS        64
#define LLM_DEFAULT_MAX_BATCHED_TOKENS  2048
#define LLM_DEFAULT_KV_BYTES            ((size_t) 1 << 30)
/* the logits of prompt positions one step may compute (scheduler.c) */
#define LLM_PROMPT_LOGITS_BYTES         ((size_t) 64 << 20)


uint64_t
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
        taken[i]->stats.queued = now;
        if (atomic_load(&taken[i]->cancelled)) {
            llm_engine_finish(e, taken[i], LLM_FINISH_ABORT, now);
        } else {
            llm_sched_enqueue(e, taken[i]);
        }
    }
}


static void
llm_engine_take_cancellations(llm_engine *e, double now)
{
    llm_request  *r, *next;
    int           i;

    for (i = e->sched.running.n - 1; i >= 0; i--) {
        r = e->sched.running.items[i];
        if (atomic_load(&r->cancelled)) {
            llm_engine_finish(e, r, LLM_FINISH_ABORT, now);
        }
    }
    for (r = e->sched.wait_head; r; r = next) {
        next = r->next;
        if (atomic_load(&r->cancelled)) {
            llm_engine_finish(e, r, LLM_FINISH_ABORT, now);
        }
    }
}


/* Structured output's alphabet, at its first use: every token's text, and
 * which of them a JSON string takes as they are. */
static void
llm_engine_json_alphabet(llm_engine *e)
{
    llm_token_texts  *tt = &e->texts;
    int32_t           i;

    llm_tokenizer_token_texts(e->model->tokenizer, tt);
    e->json_plain = llm_xmalloc((size_t) (tt->n ? tt->n : 1));
    for (i = 0; i < tt->n; i++) {
        e->json_plain[i] = tt->len[i] > 0
                           && llm_json_plain(tt->bytes + tt->off[i],
                                             (size_t) tt->len[i]);
    }
}


static void
llm_engine_sample_ctx(llm_engine *e, llm_request *r, int n_output,
    llm_sample_ctx *c)
{
    c->p = &r->params;
    c->prompt = r->tokens;
    c->n_prompt = r->n_prompt;
    c->output = r->tokens + r->n_prompt;
    c->n_output = n_output;
    c->eos_ids = e->model->gen.eos_ids;
    c->n_eos = e->model->gen.n_eos;
    c->rng = &r->rng;
    c->bad_ids = r->bad_ids;
    c->bad_lens = r->bad_lens;
    c->n_bad = r->n_bad;
    c->json = NULL;
    c->texts = NULL;
    c->json_plain = NULL;
    if (r->params.json_object) {
        if (e->texts.len == NULL) {
            llm_engine_json_alphabet(e);
        }
        c->json = &r->json;
        c->texts = &e->texts;
        c->json_plain = e->json_plain;
    }
}


/* Verifies a request's k drafts against logits rows row..row+k and applies
 * the accepted drafts and the bonus token. */
static void
llm_engine_verify(llm_engine *e, llm_request *r, const float *logits,
    double now)
{
    llm_sample_ctx      c;
    llm_token_logprob   lp[LLM_SPEC_MAX_TOKENS + 1];
    int32_t             out[LLM_SPEC_MAX_TOKENS + 1], *drafts;
    int                 i, j, k = r->n_draft, ok, want_lp;
    int                 V = e->model->config.vocab_size;

    want_lp = r->params.logprobs >= 0;
    drafts = r->tokens + r->n_tokens;
    for (j = 0; j <= k; j++) {
        /* the history of row j includes the drafts accepted before it */
        llm_engine_sample_ctx(e, r, r->n_tokens - r->n_prompt + j, &c);
        out[j] = llm_sample_verify(&e->sampler,
                                   (float *) logits + (size_t) j * V, &c,
                                   j < k ? drafts[j] : -1, &ok,
                                   want_lp ? &lp[j] : NULL);
        if (j == k || !ok) {
            break;
        }
    }
    /* j drafts accepted; K/V is valid for the decode token and them */
    r->n_computed += 1 + j;
    e->step_rejected += k - j;
    r->n_draft = 0;
    llm_sched_register_blocks(e, r);
    llm_spec_record(e, r, k, j);
    for (i = 0; i <= j && r->state != LLM_REQ_FINISHED; i++) {
        llm_engine_accept_token(e, r, out[i], want_lp ? &lp[i] : NULL, now);
    }
}


/* Records the prompt logprobs of rows computed for positions
 * max(n_computed, n_prompt_lp) on (before n_computed moves). */
static void
llm_engine_prompt_logprobs(llm_engine *e, llm_request *r,
    const float *logits, int n_rows)
{
    int  i, pos, V = e->model->config.vocab_size;

    pos = r->n_computed > r->n_prompt_lp ? r->n_computed : r->n_prompt_lp;
    for (i = 0; i < n_rows; i++, pos++) {
        llm_sampler_logprobs(&e->sampler, logits + (size_t) i * V,
                             r->tokens[pos + 1], r->params.prompt_logprobs,
                             &r->prompt_lp[pos]);
    }
    r->n_prompt_lp = pos;
}


/* Whether this step samples on the device: the backend has
 * forward_sample, no request verifies drafts (rejection sampling needs the
 * logits on the host), none takes prompt logprobs (their rows are logits
 * rows that sample nothing) and none has allowed_token_ids or structured
 * output (masks of the whole vocabulary, not short lists of changes).  If
 * so, builds the rows in llm_engine_sample_step's order; each sampling row
 * draws its uniform number from its request's generator, as llm_sample()
 * would. */
static int
llm_engine_sample_plan(llm_engine *e)
{
    llm_scheduler   *s = &e->sched;
    llm_request     *r;
    llm_sample_ctx   c;
    int              i, n = 0;

    if (e->backend->forward_sample == NULL) {
        return 0;
    }
    for (i = 0; i < s->step.n; i++) {
        r = s->step.items[i];
        if (r->n_draft > 0 || s->step_lp_rows[i] > 0
            || r->params.n_allowed_token_ids > 0 || r->params.json_object)
        {
            return 0;
        }
        n += r->n_computed + s->step_tokens[i] >= r->n_tokens;
    }
    if (n != e->bb.batch.n_logits) {
        return 0;
    }
    llm_sample_rows_reset(&e->srows);
    for (i = 0; i < s->step.n; i++) {
        r = s->step.items[i];
        if (r->n_computed + s->step_tokens[i] < r->n_tokens) {
            continue;                   /* a prefill chunk: no logits */
        }
        llm_engine_sample_ctx(e, r, r->n_tokens - r->n_prompt, &c);
        llm_sample_row_make(&e->sampler, &c, &e->srows);
    }
    return 1;
}


/* ids: the device's choices, one per logits row, and their logprobs
 * (NULL: sample here). */
static void
llm_engine_sample_step(llm_engine *e, const int32_t *ids,
    const llm_token_logprob *lps, double now)
{
    llm_scheduler      *s = &e->sched;
    llm_request        *r;
    llm_sample_ctx      c;
    llm_token_logprob   lp;
    int                 i, row = 0, V = e->model->config.vocab_size;
    int32_t             id;

    for (i = 0; i < s->step.n; i++) {
        r = s->step.items[i];
        if (r->n_draft > 0) {
            llm_engine_verify(e, r, e->logits + (size_t) row * V, now);
            row += s->step_tokens[i];
            continue;
        }
        if (s->step_lp_rows[i] > 0) {
            llm_engine_prompt_logprobs(e, r, e->logits + (size_t) row * V,
                                       s->step_lp_rows[i]);
            row += s->step_lp_rows[i];
        }
        r->n_computed += s->step_tokens[i];
        llm_sched_register_blocks(e, r);
        if (r->n_computed < r->n_tokens) {
            continue;                   /* a prefill chunk: no token yet */
        }
        if (ids != NULL) {
            id = ids[row];
            if (r->params.logprobs >= 0) {
                lp = lps[row];
            }
        } else {
            llm_engine_sample_ctx(e, r, r->n_tokens - r->n_prompt, &c);
            id = llm_sample(&e->sampler, e->logits + (size_t) row * V, &c,
                            r->params.logprobs >= 0 ? &lp : NULL);
        }
        row++;
        llm_engine_accept_token(e, r, id,
                                r->params.logprobs >= 0 ? &lp : NULL, now);
    }
}


static void
llm_engine_step(llm_engine *e)
{
    llm_scheduler  *s = &e->sched;
    char            err[LLM_ERR_LEN];
    double          now = llm_now();
    size_t          need;
    int             i, rc, on_device;
    llm_sample_spec spec;

    llm_engine_take_cancellations(e, now);
    if (llm_sched_schedule(e, now) == 0) {
        if (s->running.n == 0 && s->wait_head) {
            /* cannot happen with min_blocks >= max_model_len; never spin */
            llm_engine_finish(e, s->wait_head, LLM_FINISH_ERROR, now);
        }
        return;
    }
    on_device = llm_engine_sample_plan(e);
    if (on_device) {
        if (e->bb.batch.n_logits > e->ids_cap) {
            free(e->ids);
            free(e->lps);
            e->ids_cap = e->bb.batch.n_logits + 64;
            e->ids = llm_xmalloc(sizeof(int32_t) * e->ids_cap);
            e->lps = llm_xmalloc(sizeof(llm_token_logprob) * e->ids_cap);
        }
        spec = llm_sample_rows_spec(&e->srows);
        rc = e->backend->forward_sample(e->backend, &e->bb.batch, &spec,
                                        e->ids, e->lps, err);
    } else {
        need = (size_t) e->bb.batch.n_logits * e->model->config.vocab_size;
        if (need > (size_t) e->logits_cap) {
            free(e->logits);
            e->logits = llm_xmalloc(sizeof(float) * need);
            e->logits_cap = (int) need;
        }
        rc = e->backend->forward(e->backend, &e->bb.batch, e->logits, err);
    }
    if (rc != 0) {
        fprintf(stderr, "llm engine: %s\n", err);
        for (i = s->step.n - 1; i >= 0; i--) {
            llm_engine_finish(e, s->step.items[i], LLM_FINISH_ERROR,
                              llm_now());
        }
        return;
    }
    e->step_rejected = 0;
    llm_engine_sample_step(e, on_device ? e->ids : NULL, e->lps, llm_now());
    /* vLLM counts the prompt tokens computed and the tokens generated:
     * drafts that were rejected are neither */
    llm_hist_observe(&e->counters.hist[LLM_H_ITERATION_TOKENS],
                     e->bb.batch.n_tokens - e->step_rejected);
}


static int
llm_engine_idle(llm_engine *e)
{
    return e->sched.running.n == 0 && e->sched.wait_head == NULL;
}


static void *
llm_engine_main(void *arg)
{
    llm_engine    *e = arg;
    llm_req_list   taken = { 0 };
    sigset_t       all;

    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, NULL);

    for ( ;; ) {
        pthread_mutex_lock(&e->mu);
        while (!e->stop && e->submitted.n == 0 && !e->wakeup
               && llm_engine_idle(e))
        {
            pthread_cond_wait(&e->cv, &e->mu);
        }
        if (e->stop) {
            pthread_mutex_unlock(&e->mu);
            break;
        }
        /* swap the submission list out: the client keeps appending */
        {
            llm_req_list  t = taken;

            taken = e->submitted;
            e->submitted = t;
            e->submitted.n = 0;
        }
        e->wakeup = 0;
        pthread_mutex_unlock(&e->mu);

        llm_engine_take_submissions(e, taken.items, taken.n, llm_now());
        taken.n = 0;
        llm_engine_step(e);
        llm_engine_publish(e);
    }
    llm_req_list_free(&taken);
    return NULL;
}


/* ---- the client side ----------------------------------------------------- */


llm_engine *
llm_engine_create(const llm_engine_config *cfg, char *err)
{
    llm_engine          *e;
    llm_backend_config   bc = { 0 };
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
    llm_sched_init(&e->sched);
    e->notify = cfg->notify;
    e->notify_data = cfg->notify_data;

    e->model = llm_model_load(cfg->model_dir, err);
    if (e->model == NULL) {
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
    e->max_num_seqs = cfg->max_num_seqs > 0 ? cfg->max_num_seqs
                                            : LLM_DEFAULT_MAX_NUM_SEQS;
    e->max_num_batched_tokens = cfg->max_num_batched_tokens > 0
                                ? cfg->max_num_batched_tokens
                                : LLM_DEFAULT_MAX_BATCHED_TOKENS;
    e->max_prompt_lp_rows = (int) (LLM_PROMPT_LOGITS_BYTES
                                   / (sizeof(float) * c->vocab_size));
    if (e->max_prompt_lp_rows < 1) {
        e->max_prompt_lp_rows = 1;
    }
    if (cfg->spec_tokens > 0) {
        if (cfg->spec_tokens > LLM_SPEC_MAX_TOKENS || cfg->spec_lookup_min < 1
            || cfg->spec_lookup_max < cfg->spec_lookup_min)
        {
            llm_errf(err, "llm_speculative: tokens must be 1..%d and "
                     "1 <= lookup_min <= lookup_max", LLM_SPEC_MAX_TOKENS);
            goto fail;
        }
        e->spec_k = cfg->spec_tokens;
        e->spec_min = cfg->spec_lookup_min;
        e->spec_max = cfg->spec_lookup_max;
    }

    /* The pool always holds one full-length sequence, so a lone request
     * can never be starved; by default it is sized for max_num_seqs of
     * them, up to 1 GiB (pages are touched only as the cache fills). */
    per_token = llm_kv_bytes_per_token(c, sizeof(float));
    bc.min_blocks = (e->max_model_len + LLM_BLOCK_SIZE - 1) / LLM_BLOCK_SIZE;
    bc.kv_bytes = cfg->kv_cache_bytes;
    if (bc.kv_bytes == 0) {
        bc.kv_bytes = (size_t) e->max_num_seqs * e->max_model_len * per_token;
        if (bc.kv_bytes > LLM_DEFAULT_KV_BYTES) {
            bc.kv_bytes = LLM_DEFAULT_KV_BYTES;
        }
    }
    bc.gpu_memory_utilization = cfg->gpu_memory_utilization > 0
                                ? cfg->gpu_memory_utilization : 0.9;
    ncpu = sysconf(_SC_NPROCESSORS_ONLN);
    bc.threads = cfg->threads > 0 ? cfg->threads : (ncpu > 0 ? (int) ncpu : 1);
    e->backend = llm_backend_open(e->model, cfg->device, &bc,
                                  e->device_reason, err);
    if (e->backend == NULL) {
        goto fail;
    }
    llm_stats_init(&e->counters, e->max_model_len);
    e->stats = e->counters;
    llm_blocks_init(&e->blocks, e->backend->num_blocks,
                    cfg->enable_prefix_caching);
    llm_sampler_init(&e->sampler, c->vocab_size);

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
    llm_req_list_free(&e->ready);
    free(e->draining);
    free(e->draining_req);
    free(e->logits);
    free(e->ids);
    free(e->lps);
    llm_sample_rows_free(&e->srows);
    llm_token_texts_free(&e->texts);
    free(e->json_plain);
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
