/*
 * step.c -- one step of the engine thread, and what each token it produces
 * does to its request.
 *
 *   1. schedule: build the step's batch (stamp `scheduled` the first time);
 *   2. backend->forward(batch), or forward_sample(batch) when the backend
 *      samples on the device and no request of the step needs the logits
 *      on the host;
 *   3. sample every sequence that reached the end of its tokens (or take
 *      the device's id), verify drafts, record prompt logprobs;
 *   4. apply each token: `first_token`/`last_token` = this step's time,
 *      the streaming detokenizer, stop rules (EOS, stop token ids, stop
 *      strings, length), the output staged for engine.c to publish.
 *
 * Stop strings are never emitted: text that could be the start of one is
 * held back until the next token shows whether it is.
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/backend.h"
#include "engine_internal.h"
#include "grammar/grammar.h"
#include "grammar/grammar_mask.h"
#include "request.h"
#include "sampler.h"
#include "sampler_rows.h"
#include "scheduler.h"
#include "spec_decode.h"
#include "stats.h"
#include "step.h"
#include "tokenizer/tokenizer.h"
#include "util/util.h"


/* ---- what a token does to its request ------------------------------------ */


static void
llm_mark_changed(llm_engine *e, llm_request *r)
{
    if (!r->changed) {
        r->changed = 1;
        llm_req_list_push(&e->changed, r);
    }
}


static int
llm_is_eos(const llm_engine *e, int32_t id)
{
    int  i;

    for (i = 0; i < e->model->gen.n_eos; i++) {
        if (e->model->gen.eos_ids[i] == id) {
            return 1;
        }
    }
    return 0;
}


static int
llm_is_stop_token(const llm_request *r, int32_t id)
{
    int  i;

    for (i = 0; i < r->params.n_stop_token_ids; i++) {
        if (r->params.stop_token_ids[i] == id) {
            return 1;
        }
    }
    return 0;
}


/* Passes new text through the stop-string filter into the stage; returns 1
 * when a stop string matched (the text before it is emitted). */
static int
llm_emit_text(llm_request *r, const char *s, size_t n)
{
    size_t       start, keep, emit, best = (size_t) -1;
    const char  *hit, *which = NULL;
    int          i;

    if (r->params.n_stop == 0) {
        llm_req_out_add_text(&r->stage, s, n);
        return 0;
    }
    if (r->held_len + n > r->held_cap) {
        r->held_cap = (r->held_len + n) * 2 + 16;
        r->held = llm_xrealloc(r->held, r->held_cap);
    }
    keep = (size_t) r->max_stop_len - 1;
    start = r->held_len > keep ? r->held_len - keep : 0;
    memcpy(r->held + r->held_len, s, n);
    r->held_len += n;

    for (i = 0; i < r->params.n_stop; i++) {
        hit = memmem(r->held + start, r->held_len - start, r->stop[i],
                     strlen(r->stop[i]));
        if (hit && (size_t) (hit - r->held) < best) {
            best = (size_t) (hit - r->held);
            which = r->stop[i];
        }
    }
    if (which) {
        if (r->params.include_stop_str_in_output) {
            best += strlen(which);
        }
        llm_req_out_add_text(&r->stage, r->held, best);
        r->held_len = 0;
        r->stop_string = which;
        return 1;
    }
    if (r->held_len > keep) {
        emit = r->held_len - keep;
        /* never split a UTF-8 sequence between emitted and held text */
        while (emit > 0 && ((unsigned char) r->held[emit] & 0xc0) == 0x80) {
            emit--;
        }
        llm_req_out_add_text(&r->stage, r->held, emit);
        memmove(r->held, r->held + emit, r->held_len - emit);
        r->held_len -= emit;
    }
    return 0;
}


/* Structured output: the grammar takes the accepted token's text.  The
 * sampler offered only tokens it takes, so this cannot fail (a token past
 * the texts, or one refused, leaves the state as it was). */
static void
llm_engine_grammar_advance(llm_engine *e, llm_request *r, int32_t id)
{
    llm_grammar_state  *st;

    if (id < 0 || id >= e->texts.n || e->texts.len[id] <= 0) {
        return;
    }
    st = llm_xmalloc(sizeof(*st));
    llm_grammar_state_copy(st, r->gstate);
    if (llm_grammar_feed(r->grammar, st, e->texts.bytes + e->texts.off[id],
                         (size_t) e->texts.len[id]) == 0)
    {
        llm_grammar_state_copy(r->gstate, st);
    }
    free(st);
}


/* A cancel billed at fewer tokens than the engine made
 * (llm_engine_cancel_billed()): the others were never delivered, so they
 * are neither the request's nor the counters'. */
static void
llm_engine_unbill(llm_engine *e, llm_request *r)
{
    int     limit = atomic_load(&r->bill_limit);
    int     n = r->stats.completion_tokens, j;
    double  t, prev;

    if (limit < 0 || limit >= n) {
        return;
    }
    e->counters.generation_tokens_total -= (uint64_t) (n - limit);
    if (n - limit < LLM_TOK_RING) {
        /* the latency observations of the tokens taken back, as
         * llm_engine_accept_token() made them */
        for (j = n; j > limit; j--) {
            t = r->tok_time[j % LLM_TOK_RING];
            if (j == 1) {
                llm_hist_unobserve(&e->counters.hist[LLM_H_TTFT],
                                   t - r->stats.arrival);
                continue;
            }
            prev = r->tok_time[(j - 1) % LLM_TOK_RING];
            if (t > prev) {
                llm_hist_unobserve(&e->counters.hist[LLM_H_ITL], t - prev);
            }
        }
        r->stats.last_token = limit > 0 ? r->tok_time[limit % LLM_TOK_RING]
                                        : 0;
    }
    r->stats.completion_tokens = limit;
    if (limit == 0) {
        e->counters.prompt_tokens_total -= (uint64_t) r->n_prompt;
        e->counters.prompt_tokens_cached_total -=
            (uint64_t) r->stats.cached_tokens;
        r->stats.first_token = 0;
        r->stats.last_token = 0;
    }
}


/* Applies a sampled token: text, stop rules, timestamps and counters; not
 * a token of a cancelled request, which finishes instead. */
static void
llm_engine_accept_token(llm_engine *e, llm_request *r, int32_t id,
    const llm_token_logprob *lp, double now)
{
    const char  *piece;
    size_t       len;
    int          n_out, checks, stop;
    unsigned     gate = atomic_load(&r->gate);

    do {
        if (gate & LLM_GATE_CLOSED) {
            /* cancelled: the token is neither kept nor counted */
            llm_engine_finish(e, r, LLM_FINISH_ABORT, now);
            return;
        }
    } while (!atomic_compare_exchange_weak(&r->gate, &gate, gate + 1));

    llm_request_append_token(r, id);
    n_out = ++r->stats.completion_tokens;
    if (r->stats.first_token == 0) {
        r->stats.first_token = now;
        e->counters.prompt_tokens_total += (uint64_t) r->n_prompt;
        e->counters.prompt_tokens_cached_total +=
            (uint64_t) r->stats.cached_tokens;
        llm_hist_observe(&e->counters.hist[LLM_H_TTFT],
                         now - r->stats.arrival);
    } else if (now > r->stats.last_token) {
        /* once per step, like vLLM: accepted drafts share their step */
        llm_hist_observe(&e->counters.hist[LLM_H_ITL],
                         now - r->stats.last_token);
    }
    r->stats.last_token = now;
    r->tok_time[n_out % LLM_TOK_RING] = now;
    e->counters.generation_tokens_total++;
    llm_req_out_add_id(&r->stage, id, now, lp);
    llm_mark_changed(e, r);

    /* vLLM checks no stop condition before min_tokens; the text of the
     * EOS or stop token that ends the sequence is shown only with
     * include_stop_str_in_output (and an EOS only with its special tokens
     * kept) */
    checks = n_out >= r->params.min_tokens;
    stop = checks && ((!r->params.ignore_eos && llm_is_eos(e, id))
                      || llm_is_stop_token(r, id));
    if (stop && llm_is_stop_token(r, id)
        && (r->params.ignore_eos || !llm_is_eos(e, id)))
    {
        r->stop_token = id;
    }
    if (stop && !r->params.include_stop_str_in_output) {
        llm_engine_finish(e, r, LLM_FINISH_STOP, now);
        return;
    }
    if (r->grammar && !llm_is_eos(e, id)) {
        llm_engine_grammar_advance(e, r, id);
    }
    if (r->detok == NULL) {
        r->detok = llm_detok_create(e->model->tokenizer, r->tokens,
                                    (size_t) r->n_prompt,
                                    !r->params.keep_special_tokens);
    }
    piece = llm_detok_push(r->detok, id, &len);
    if (checks) {
        if (llm_emit_text(r, piece, len) || stop) {
            if (r->stop_string) {
                r->stop_token = -1;
            }
            llm_engine_finish(e, r, LLM_FINISH_STOP, now);
            return;
        }
    } else {
        llm_req_out_add_text(&r->stage, piece, len);
    }
    if (n_out >= r->params.max_tokens || r->n_tokens >= e->max_model_len) {
        llm_engine_finish(e, r, LLM_FINISH_LENGTH, now);
    }
}


void
llm_engine_finish(llm_engine *e, llm_request *r, llm_finish_reason why,
    double now)
{
    const char  *piece;
    size_t       len;
    int          longest;

    if (r->state == LLM_REQ_FINISHED) {
        return;
    }
    if (why != LLM_FINISH_ABORT && r->stop_string == NULL) {
        llm_req_out_add_text(&r->stage, r->held, r->held_len);
        r->held_len = 0;
        if (r->detok) {
            piece = llm_detok_flush(r->detok, &len);
            llm_req_out_add_text(&r->stage, piece, len);
        }
    }
    if (why == LLM_FINISH_ABORT) {
        llm_engine_unbill(e, r);
    }
    r->finish = why;
    r->stats.finished = now;
    llm_stats_observe_finished(&e->counters, &r->stats, &r->params, why);
    /* once per prompt, however many samples (n) it has, as in vLLM */
    longest = llm_request_group_finish(r);
    if (longest >= 0) {
        llm_hist_observe(&e->counters.hist[LLM_H_MAX_GENERATION_TOKENS],
                         longest);
    }
    llm_sched_remove(&e->sched, r);
    llm_mark_changed(e, r);
}


/* ---- sampling ------------------------------------------------------------ */


/* Structured output's alphabet, at its first use: every token's text, in
 * the tries the grammar's mask walks (grammar_mask.h). */
static void
llm_engine_grammar_alphabet(llm_engine *e)
{
    llm_gtexts  gt;

    llm_tokenizer_token_texts(e->model->tokenizer, &e->texts);
    gt.bytes = e->texts.bytes;
    gt.off = e->texts.off;
    gt.len = e->texts.len;
    gt.n = e->texts.n;
    e->gvocab = llm_gvocab_create(&gt, e->model->config.vocab_size);
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
    c->grammar = NULL;
    c->gstate = NULL;
    c->gvocab = NULL;
    if (r->grammar) {
        if (e->gvocab == NULL) {
            llm_engine_grammar_alphabet(e);
        }
        c->grammar = r->grammar;
        c->gstate = r->gstate;
        c->gvocab = e->gvocab;
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
    llm_sched_register_blocks(&e->sched, r);
    llm_spec_record(&e->counters, r, k, j);
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
            || r->params.n_allowed_token_ids > 0 || r->grammar)
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
        llm_sched_register_blocks(s, r);
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


/* ---- the step ------------------------------------------------------------ */


/* Runs the backend on the step's batch: the ids (and logprobs) of its
 * logits rows into e->ids when it samples on the device, else the rows
 * themselves into e->logits. */
static int
llm_engine_forward(llm_engine *e, int on_device, char *err)
{
    llm_sample_spec  spec;
    size_t           need;

    if (on_device) {
        if (e->bb.batch.n_logits > e->ids_cap) {
            free(e->ids);
            free(e->lps);
            e->ids_cap = e->bb.batch.n_logits + 64;
            e->ids = llm_xmalloc(sizeof(int32_t) * e->ids_cap);
            e->lps = llm_xmalloc(sizeof(llm_token_logprob) * e->ids_cap);
        }
        spec = llm_sample_rows_spec(&e->srows);
        return e->backend->forward_sample(e->backend, &e->bb.batch, &spec,
                                          e->ids, e->lps, err);
    }
    need = (size_t) e->bb.batch.n_logits * e->model->config.vocab_size;
    if (need > (size_t) e->logits_cap) {
        free(e->logits);
        e->logits = llm_xmalloc(sizeof(float) * need);
        e->logits_cap = (int) need;
    }
    return e->backend->forward(e->backend, &e->bb.batch, e->logits, err);
}


int
llm_engine_step(llm_engine *e, double now)
{
    llm_scheduler  *s = &e->sched;
    llm_request    *r;
    char            err[LLM_ERR_LEN];
    int             i, n, on_device;

    n = llm_sched_schedule(s, &e->bb, now);
    if (n == 0) {
        r = llm_sched_next_waiting(s);
        if (s->running.n == 0 && r != NULL) {
            /* cannot happen with min_blocks >= max_model_len: with nobody
             * running, the pool is free; never leave it waiting forever */
            llm_engine_finish(e, r, LLM_FINISH_ERROR, now);
            return 1;                   /* the next one is tried too */
        }
        return 0;
    }
    on_device = llm_engine_sample_plan(e);
    if (llm_engine_forward(e, on_device, err) != 0) {
        fprintf(stderr, "llm engine: %s\n", err);
        for (i = s->step.n - 1; i >= 0; i--) {
            llm_engine_finish(e, s->step.items[i], LLM_FINISH_ERROR,
                              llm_now());
        }
        return n;
    }
    e->step_rejected = 0;
    llm_engine_sample_step(e, on_device ? e->ids : NULL, e->lps, llm_now());
    /* vLLM counts the prompt tokens computed and the tokens generated:
     * drafts that were rejected are neither */
    llm_hist_observe(&e->counters.hist[LLM_H_ITERATION_TOKENS],
                     e->bb.batch.n_tokens - e->step_rejected);
    return n;
}
