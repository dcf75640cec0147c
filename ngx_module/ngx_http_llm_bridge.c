
/*
 * ngx_http_llm_bridge.c -- the worker's engine and the bridge between the
 * engine thread and the nginx event loop.
 *
 *   init_process   eventfd registered in the event loop, then a loader
 *                  thread calls llm_engine_create() so that the worker
 *                  serves while a large model loads (generations wait
 *                  for it, /health answers 503 "loading");
 *   engine thread  calls cfg.notify -> writes the eventfd;
 *   event loop     eventfd readable -> llm_engine_drain() copies each
 *                  request's new output into its ctx and queues the ctx;
 *                  then every queued ctx is delivered (JSON or SSE).
 *
 * Delivery happens after llm_engine_drain() returns, never inside its
 * callback, so writing to clients, finalizing requests and the cancel()
 * calls their cleanups make never re-enter the engine during a drain.
 */


#include "ngx_http_llm_module.h"

#include <pthread.h>
#include <signal.h>
#include <sys/eventfd.h>


typedef struct {
    pthread_t                 tid;
    llm_engine_config         cfg;
    llm_engine               *engine;
    char                      err[LLM_ERR_LEN];
    int                       done;          /* atomic: the thread ended */
    unsigned                  running:1;
} ngx_http_llm_loader_t;


static void *ngx_http_llm_loader_thread(void *data);
static void ngx_http_llm_engine_notify(void *data);
static void ngx_http_llm_notify_handler(ngx_event_t *rev);
static void ngx_http_llm_loaded(ngx_log_t *log);
static void ngx_http_llm_drain_output(llm_request *lr, const llm_output *out,
    void *data);
static ngx_int_t ngx_http_llm_seq_create(ngx_http_request_t *r,
    ngx_http_llm_seq_t *seq);
static void ngx_http_llm_ctx_stats(ngx_http_llm_ctx_t *ctx);
static void ngx_http_llm_earliest(double *t, double v);
static ngx_int_t ngx_http_llm_append(ngx_http_llm_seq_t *seq,
    const llm_output *out);
static ngx_int_t ngx_http_llm_append_array(ngx_pool_t *pool, ngx_array_t *a,
    const void *add, ngx_uint_t n, size_t size, ngx_uint_t first);


ngx_http_llm_worker_t         ngx_http_llm_worker;
static ngx_http_llm_loader_t  ngx_http_llm_loader;


ngx_int_t
ngx_http_llm_engine_start(ngx_cycle_t *cycle, ngx_http_llm_main_conf_t *lmcf)
{
    int                     err, efd;
    sigset_t                set, old;
    ngx_core_conf_t        *ccf;
    ngx_connection_t       *c;
    llm_engine_config      *cfg;
    ngx_http_llm_worker_t  *w = &ngx_http_llm_worker;
    ngx_http_llm_loader_t  *ld = &ngx_http_llm_loader;

    ngx_queue_init(&w->ready);
    ngx_queue_init(&w->waiting);
    w->efd = -1;
    ngx_cpystrn((u_char *) w->error, (u_char *) "the model is loading",
                sizeof(w->error));

    ccf = (ngx_core_conf_t *) ngx_get_conf(cycle->conf_ctx, ngx_core_module);

    cfg = &ld->cfg;
    cfg->model_dir = (const char *) lmcf->model.data;
    cfg->device = (const char *) lmcf->device.data;

    if (ccf->worker_processes > 1) {

        if (ngx_strncmp(lmcf->device.data, "cuda", 4) == 0) {
            /* worker_processes came after http{}: see postconfiguration */
            ngx_snprintf((u_char *) w->error, sizeof(w->error),
                         "\"llm_device %V\" requires \"worker_processes 1\""
                         ", got %i%Z", &lmcf->device, ccf->worker_processes);
            ngx_log_error(NGX_LOG_EMERG, cycle->log, 0, "llm: %s", w->error);
            return NGX_ERROR;
        }

        /* several engines cannot share one GPU: "auto" means the CPU here */
        cfg->device = "cpu";
    }

    cfg->threads = (int) lmcf->threads;
    cfg->max_model_len = (int) lmcf->max_model_len;
    cfg->max_num_seqs = (int) lmcf->max_num_seqs;
    cfg->max_num_batched_tokens = (int) lmcf->max_num_batched_tokens;
    cfg->kv_cache_bytes = (size_t) lmcf->kv_cache_size;
    cfg->gpu_memory_utilization = lmcf->gpu_util;
    cfg->enable_prefix_caching = (int) lmcf->enable_prefix_caching;
    cfg->spec_tokens = (int) lmcf->spec_tokens;
    cfg->spec_lookup_min = (int) lmcf->spec_lookup_min;
    cfg->spec_lookup_max = (int) lmcf->spec_lookup_max;
    cfg->notify = ngx_http_llm_engine_notify;
    cfg->notify_data = w;

    efd = eventfd(0, EFD_NONBLOCK|EFD_CLOEXEC);
    if (efd == -1) {
        ngx_snprintf((u_char *) w->error, sizeof(w->error),
                     "eventfd() failed: %s%Z", strerror(ngx_errno));
        ngx_log_error(NGX_LOG_EMERG, cycle->log, ngx_errno,
                      "llm: eventfd() failed");
        return NGX_ERROR;
    }

    c = ngx_get_connection(efd, cycle->log);
    if (c == NULL) {
        close(efd);
        ngx_cpystrn((u_char *) w->error,
                    (u_char *) "no free connection for the engine's eventfd",
                    sizeof(w->error));
        return NGX_ERROR;
    }

    c->data = w;
    c->log = cycle->log;
    c->read->handler = ngx_http_llm_notify_handler;
    c->read->log = cycle->log;
    c->write->log = cycle->log;

    /* level-triggered: a missed wakeup cannot strand output */
    if (ngx_add_event(c->read, NGX_READ_EVENT, 0) != NGX_OK) {
        ngx_close_connection(c);
        return NGX_ERROR;
    }

    w->efd = efd;
    w->notify = c;

    /* signals belong to the event loop: the engine thread inherits this */
    sigfillset(&set);
    pthread_sigmask(SIG_BLOCK, &set, &old);

    err = pthread_create(&ld->tid, NULL, ngx_http_llm_loader_thread, ld);

    pthread_sigmask(SIG_SETMASK, &old, NULL);

    if (err) {
        ngx_snprintf((u_char *) w->error, sizeof(w->error),
                     "pthread_create() failed: %s%Z", strerror(err));
        ngx_log_error(NGX_LOG_EMERG, cycle->log, err,
                      "llm: pthread_create() failed");
        return NGX_ERROR;
    }

    ld->running = 1;
    w->loading = 1;

    ngx_log_error(NGX_LOG_NOTICE, cycle->log, 0,
                  "llm: loading \"%V\" on device \"%s\" in worker %P",
                  &lmcf->model, cfg->device, ngx_pid);

    return NGX_OK;
}


static void *
ngx_http_llm_loader_thread(void *data)
{
    ngx_http_llm_loader_t  *ld = data;

    uint64_t  one;

    ld->err[0] = '\0';
    ld->engine = llm_engine_create(&ld->cfg, ld->err);

    __atomic_store_n(&ld->done, 1, __ATOMIC_RELEASE);

    one = 1;
    if (write(ngx_http_llm_worker.efd, &one, sizeof(one)) != sizeof(one)) {
        /* the counter cannot overflow in practice */
    }

    return NULL;
}


/* the engine thread: output is ready for llm_engine_drain() */

static void
ngx_http_llm_engine_notify(void *data)
{
    ngx_http_llm_worker_t  *w = data;

    uint64_t  one;

    one = 1;
    if (write(w->efd, &one, sizeof(one)) != sizeof(one)) {
        /* EAGAIN only when the counter is near 2^64: the fd is readable */
    }
}


static void
ngx_http_llm_notify_handler(ngx_event_t *rev)
{
    uint64_t                count;
    ngx_queue_t            *q;
    ngx_connection_t       *c;
    ngx_http_llm_ctx_t     *ctx;
    ngx_http_llm_worker_t  *w;

    c = rev->data;
    w = c->data;

    while (read(w->efd, &count, sizeof(count)) == sizeof(count)) {
        /* void */
    }

    if (w->loading
        && __atomic_load_n(&ngx_http_llm_loader.done, __ATOMIC_ACQUIRE))
    {
        ngx_http_llm_loaded(c->log);
        ngx_http_llm_wake_waiting();
    }

    if (w->engine == NULL) {
        return;
    }

    llm_engine_drain(w->engine, ngx_http_llm_drain_output, w);

    while (!ngx_queue_empty(&w->ready)) {
        q = ngx_queue_head(&w->ready);
        ngx_queue_remove(q);

        ctx = ngx_queue_data(q, ngx_http_llm_ctx_t, queue);
        ctx->queued = 0;

        ngx_http_llm_deliver(ctx);
    }
}


static void
ngx_http_llm_loaded(ngx_log_t *log)
{
    ngx_http_llm_worker_t  *w = &ngx_http_llm_worker;
    ngx_http_llm_loader_t  *ld = &ngx_http_llm_loader;

    (void) pthread_join(ld->tid, NULL);

    ld->running = 0;
    w->loading = 0;

    if (ld->engine == NULL) {
        ngx_cpystrn((u_char *) w->error,
                    (u_char *) (ld->err[0] ? ld->err : "unknown error"),
                    sizeof(w->error));
        ngx_log_error(NGX_LOG_ERR, log, 0,
                      "llm: the model failed to load, the API answers 503: "
                      "%s", w->error);
        return;
    }

    w->engine = ld->engine;
    w->model = llm_engine_model(w->engine);
    w->max_model_len = llm_engine_max_model_len(w->engine);
    w->error[0] = '\0';

    /* which device llm_device chose, and why: "auto" on a machine
     * without a usable GPU says so here */
    ngx_log_error(NGX_LOG_NOTICE, log, 0,
                  "llm: engine ready on %s (%s), max_model_len %d",
                  llm_engine_device(w->engine),
                  llm_engine_device_reason(w->engine), w->max_model_len);
}


void
ngx_http_llm_engine_stop(ngx_cycle_t *cycle)
{
    ngx_http_llm_worker_t  *w = &ngx_http_llm_worker;
    ngx_http_llm_loader_t  *ld = &ngx_http_llm_loader;

    if (ld->running) {
        /* exiting while the model still loads: wait for the loader */
        (void) pthread_join(ld->tid, NULL);
        ld->running = 0;
        w->engine = ld->engine;
    }

    if (w->engine) {
        llm_engine_destroy(w->engine);
        w->engine = NULL;
        w->model = NULL;
    }

    /* otherwise nginx alerts "open socket #N left in connection" */
    if (w->notify) {
        ngx_close_connection(w->notify);
        w->notify = NULL;
        w->efd = -1;
    }
}


/*
 * The answer while the engine does not serve: 503 with the reason.  Returns
 * what the handler passes to ngx_http_finalize_request().
 */

ngx_int_t
ngx_http_llm_engine_unavailable(ngx_http_request_t *r)
{
    ngx_http_llm_worker_t  *w = &ngx_http_llm_worker;

    if (w->error[0] == '\0') {
        return ngx_http_llm_send_error(r, NGX_HTTP_SERVICE_UNAVAILABLE, NULL,
                                       NULL, "the engine is not running");
    }

    return ngx_http_llm_send_error(r, NGX_HTTP_SERVICE_UNAVAILABLE, NULL,
                                   NULL, "%s%s",
                                   w->loading ? "" : "model not loaded: ",
                                   w->error);
}


ngx_int_t
ngx_http_llm_engine_submit(ngx_http_request_t *r, ngx_http_llm_ctx_t *ctx)
{
    ngx_int_t               rc;
    ngx_uint_t              i, k;
    ngx_http_llm_job_t     *job;
    ngx_http_llm_seq_t     *seq;
    ngx_http_llm_prompt_t  *prompts;

    job = ctx->job;
    prompts = job->prompts.elts;

    ctx->n_seqs = job->prompts.nelts * job->n;
    ctx->seqs = ngx_pcalloc(r->pool,
                            ctx->n_seqs * sizeof(ngx_http_llm_seq_t));
    if (ctx->seqs == NULL) {
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }

    for (i = 0; i < ctx->n_seqs; i++) {
        seq = &ctx->seqs[i];
        seq->ctx = ctx;
        seq->index = i;
        seq->prompt = &prompts[i / job->n];
        seq->leader = (i % job->n == 0);
        seq->stop_token = -1;
        seq->stats.prompt_tokens = seq->prompt->n;
    }

    /* every sequence is created (and so validated) before any runs */

    for (i = 0; i < ctx->n_seqs; i++) {
        rc = ngx_http_llm_seq_create(r, &ctx->seqs[i]);
        if (rc != NGX_OK) {
            ngx_http_llm_engine_release(ctx);
            ctx->n_seqs = 0;
            return rc;
        }
    }

    /*
     * Parallel sampling: the other samples of a prompt follow its first,
     * which computes the prompt's blocks once for all of them.
     */

    ctx->submitted = 1;

    for (i = 0; i < ctx->n_seqs; i++) {
        seq = &ctx->seqs[i];
        k = i - i % job->n;

        if (seq->leader) {
            rc = llm_engine_submit(ngx_http_llm_worker.engine, seq->lreq);

        } else {
            rc = llm_engine_submit_shared(ngx_http_llm_worker.engine,
                                          seq->lreq, ctx->seqs[k].lreq);
        }

        if (rc != 0) {
            ngx_http_llm_engine_release(ctx);
            ctx->submitted = 0;
            ctx->n_seqs = 0;
            return ngx_http_llm_send_error(r, NGX_HTTP_SERVICE_UNAVAILABLE,
                                           NULL, NULL, "the engine refused "
                                           "the request");
        }
    }

    ngx_http_llm_ctx_stats(ctx);

    ctx->inflight = ngx_http_llm_inflight_add(&ctx->id, &ctx->model,
                                              ctx->stats.prompt_tokens);

    return NGX_OK;
}


/*
 * The engine request of one sequence: its prompt, and the request's
 * parameters with vLLM's per-sample seed (seed + sample index, so that
 * seeded samples differ and repeat) and its place among the n.
 */

static ngx_int_t
ngx_http_llm_seq_create(ngx_http_request_t *r, ngx_http_llm_seq_t *seq)
{
    char                  err[LLM_ERR_LEN];
    ngx_uint_t            sample;
    llm_request          *lr;
    ngx_http_llm_job_t   *job;
    llm_sampling_params   sp;

    job = seq->ctx->job;
    sample = seq->index % job->n;

    sp = job->sp;
    sp.n = (int) job->n;
    sp.seq_index = (int) sample;
    sp.seed += sample;

    /* the engine caps it to what fits each prompt */
    sp.max_tokens = job->max_tokens < 0 ? 0 : job->max_tokens;

    err[0] = '\0';
    lr = llm_request_create(ngx_http_llm_worker.engine, seq->prompt->ids,
                            seq->prompt->n, &sp, err);
    if (lr == NULL) {
        return ngx_http_llm_send_error(r, NGX_HTTP_BAD_REQUEST, NULL, NULL,
                                       "%s", err[0] ? err : "invalid request");
    }

    llm_request_set_data(lr, seq);
    llm_request_set_arrival(lr, seq->ctx->arrival);
    seq->lreq = lr;

    return NGX_OK;
}


/*
 * The request is done with the engine: finished, failed, or its client went
 * away.  Sequences the engine still runs are cancelled, which frees their
 * KV cache at the engine's next step.
 */

void
ngx_http_llm_engine_release(ngx_http_llm_ctx_t *ctx)
{
    ngx_uint_t              i;
    ngx_http_llm_seq_t     *seq;
    ngx_http_llm_worker_t  *w = &ngx_http_llm_worker;

    if (ctx->queued) {
        ngx_queue_remove(&ctx->queue);
        ctx->queued = 0;
    }

    for (i = 0; i < ctx->n_seqs; i++) {
        seq = &ctx->seqs[i];

        if (seq->lreq == NULL) {
            continue;
        }

        llm_request_set_data(seq->lreq, NULL);

        if (!seq->engine_done && ctx->submitted) {
            /* bill every token the engine generated, also the ones still
             * on their way here: no more come after the cancel */
            seq->stats.completion_tokens = llm_engine_cancel(w->engine,
                                                             seq->lreq);
        }

        if (seq->finish == LLM_FINISH_NONE && ctx->submitted) {
            /* the access log bills what was generated until now */
            seq->finish = LLM_FINISH_ABORT;
        }

        llm_request_release(seq->lreq);
        seq->lreq = NULL;
    }

    if (ctx->submitted && ctx->finish == LLM_FINISH_NONE) {
        ngx_http_llm_ctx_stats(ctx);
        ctx->finish = LLM_FINISH_ABORT;
    }

    /* from here on the access log line bills it */
    ngx_http_llm_inflight_remove(ctx->inflight);
    ctx->inflight = -1;
}


/*
 * Backpressure (ngx_http_llm_sse.c): the client is behind by more than
 * llm_max_unsent_bytes, or has caught up.  All sequences pause and resume
 * together, so that no choice runs ahead of the others; a paused sequence
 * keeps its KV cache and is still cancelled when the request ends.
 */

void
ngx_http_llm_engine_pause(ngx_http_llm_ctx_t *ctx, ngx_uint_t paused)
{
    ngx_uint_t              i;
    ngx_http_llm_seq_t     *seq;
    ngx_http_llm_worker_t  *w = &ngx_http_llm_worker;

    ctx->paused = paused;

    for (i = 0; i < ctx->n_seqs; i++) {
        seq = &ctx->seqs[i];

        if (seq->lreq && !seq->engine_done) {
            llm_engine_set_paused(w->engine, seq->lreq, (int) paused);
        }
    }
}


/* llm_engine_drain() callback: copy, never write to the client here */

static void
ngx_http_llm_drain_output(llm_request *lr, const llm_output *out, void *data)
{
    ngx_http_llm_worker_t  *w = data;

    ngx_http_llm_ctx_t  *ctx;
    ngx_http_llm_seq_t  *seq;

    seq = llm_request_data(lr);

    if (seq == NULL) {
        return;     /* the request is gone; the engine finishes it as abort */
    }

    ctx = seq->ctx;

    if (ngx_http_llm_append(seq, out) != NGX_OK) {
        /* out of memory: delivery ends the request with an error */
        ctx->failed = 1;
    }

    seq->stats = out->stats;
    seq->changed = 1;

    if (out->finish_reason != LLM_FINISH_NONE && !seq->engine_done) {
        seq->finish = out->finish_reason;
        seq->engine_done = 1;
        ctx->n_done++;
    }

    ngx_http_llm_ctx_stats(ctx);
    ngx_http_llm_inflight_update(ctx->inflight, ctx->stats.completion_tokens);

    if (seq->finish == LLM_FINISH_ERROR) {
        ctx->finish = LLM_FINISH_ERROR;     /* the whole request fails */
    }

    if (!ctx->queued) {
        ngx_queue_insert_tail(&w->ready, &ctx->queue);
        ctx->queued = 1;
    }
}


/*
 * ctx->stats and ctx->finish from the sequences (module.h): one sequence's
 * record as it is; several summed, prompt tokens once per prompt, the
 * timestamps spanning them all.  The request finishes with its last
 * sequence, with the worst reason: error, abort, length, stop.
 */

static void
ngx_http_llm_ctx_stats(ngx_http_llm_ctx_t *ctx)
{
    ngx_uint_t                i;
    llm_finish_reason         finish;
    llm_request_stats        *t;
    const llm_request_stats  *s;

    static const ngx_uint_t  worse[] = {
        0,          /* LLM_FINISH_NONE */
        1,          /* LLM_FINISH_STOP */
        2,          /* LLM_FINISH_LENGTH */
        3,          /* LLM_FINISH_ABORT */
        4           /* LLM_FINISH_ERROR */
    };

    t = &ctx->stats;

    if (ctx->n_seqs == 1) {
        *t = ctx->seqs[0].stats;

    } else {
        ngx_memzero(t, sizeof(llm_request_stats));

        for (i = 0; i < ctx->n_seqs; i++) {
            s = &ctx->seqs[i].stats;

            if (ctx->seqs[i].leader) {
                t->prompt_tokens += s->prompt_tokens;
                t->cached_tokens += s->cached_tokens;
            }

            t->completion_tokens += s->completion_tokens;
            t->num_preemptions += s->num_preemptions;
            t->max_tokens += s->max_tokens;
            t->num_spec_tokens = s->num_spec_tokens;
            t->num_spec_steps += s->num_spec_steps;
            t->num_draft_tokens += s->num_draft_tokens;
            t->num_accepted_tokens += s->num_accepted_tokens;

            ngx_http_llm_earliest(&t->arrival, s->arrival);
            ngx_http_llm_earliest(&t->queued, s->queued);
            ngx_http_llm_earliest(&t->scheduled, s->scheduled);
            ngx_http_llm_earliest(&t->first_token, s->first_token);
            t->last_token = ngx_max(t->last_token, s->last_token);
            t->finished = ngx_max(t->finished, s->finished);
        }
    }

    if (ctx->n_done < ctx->n_seqs) {
        return;
    }

    finish = LLM_FINISH_NONE;

    for (i = 0; i < ctx->n_seqs; i++) {
        if (worse[ctx->seqs[i].finish] > worse[finish]) {
            finish = ctx->seqs[i].finish;
        }
    }

    ctx->finish = finish;
}


/* the earliest of two timestamps, 0 meaning unset */

static void
ngx_http_llm_earliest(double *t, double v)
{
    if (v > 0 && (*t == 0 || v < *t)) {
        *t = v;
    }
}


/*
 * A drain's output joins what the sequence has not written yet: text, and
 * the token ids and logprob records when asked for; the records of the
 * prompt and of the verify steps come once, with the final output.
 */

static ngx_int_t
ngx_http_llm_append(ngx_http_llm_seq_t *seq, const llm_output *out)
{
    size_t               size;
    u_char              *p;
    ngx_pool_t          *pool;
    ngx_http_llm_ctx_t  *ctx;

    ctx = seq->ctx;
    pool = ctx->request->pool;

    if (ngx_http_llm_append_array(pool, &seq->text, out->text, out->text_len,
                                  1, 256)
        != NGX_OK)
    {
        return NGX_ERROR;
    }

    seq->new_ids += out->n_ids;

    if (ctx->job->return_token_ids
        && ngx_http_llm_append_array(pool, &seq->ids, out->ids, out->n_ids,
                                     sizeof(int32_t), 16)
           != NGX_OK)
    {
        return NGX_ERROR;
    }

    if (out->logprobs
        && ngx_http_llm_append_array(pool, &seq->lp, out->logprobs,
                                     out->n_ids, sizeof(llm_token_logprob),
                                     16)
           != NGX_OK)
    {
        return NGX_ERROR;
    }

    if (out->prompt_logprobs && out->n_prompt_logprobs) {
        size = out->n_prompt_logprobs * sizeof(llm_token_logprob);

        seq->plp = ngx_palloc(pool, size);
        if (seq->plp == NULL) {
            return NGX_ERROR;
        }

        ngx_memcpy(seq->plp, out->prompt_logprobs, size);
        seq->n_plp = out->n_prompt_logprobs;
    }

    if (out->finish_reason != LLM_FINISH_NONE) {
        seq->stop_token = out->stop_token;

        if (out->stop_string) {
            size = ngx_strlen(out->stop_string);

            p = ngx_pnalloc(pool, size);
            if (p == NULL) {
                return NGX_ERROR;
            }

            ngx_memcpy(p, out->stop_string, size);
            seq->stop_string.data = p;
            seq->stop_string.len = size;
        }

        if (ctx->spec_metrics == NGX_HTTP_LLM_SPEC_METRICS_DETAILED
            && out->n_spec_step > 0 && ctx->n_seqs == 1)
        {
            size = out->n_spec_step;

            p = ngx_pnalloc(pool, 2 * size);
            if (p == NULL) {
                return NGX_ERROR;
            }

            ctx->spec_accepted = ngx_cpymem(p, out->spec_step_accepted, size)
                                 - size;
            ctx->spec_drafted = ngx_cpymem(p + size, out->spec_step_drafted,
                                           size) - size;
            ctx->n_spec_step = size;
        }
    }

    return NGX_OK;
}


/* n elements of an array in the pool, which starts with room for "first" */

static ngx_int_t
ngx_http_llm_append_array(ngx_pool_t *pool, ngx_array_t *a, const void *add,
    ngx_uint_t n, size_t size, ngx_uint_t first)
{
    void  *p;

    if (a->elts == NULL
        && ngx_array_init(a, pool, ngx_max(n, first), size) != NGX_OK)
    {
        return NGX_ERROR;
    }

    if (n == 0) {
        return NGX_OK;
    }

    p = ngx_array_push_n(a, n);
    if (p == NULL) {
        return NGX_ERROR;
    }

    ngx_memcpy(p, add, n * size);

    return NGX_OK;
}
