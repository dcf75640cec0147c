/*
 * engine_output.c -- what a sampled token does to its request: timestamps,
 * the streaming detokenizer, stop rules (EOS, stop token ids, stop strings,
 * length), and the hand-over of each step's output to the client.
 *
 * Stop strings are never emitted: text that could be the start of one is
 * held back until the next token shows whether it is.
 */
#define _GNU_SOURCE
#include <string.h>

#include "engine_internal.h"
#include "stats.h"
#include "util/util.h"


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
llm_engine_json_advance(llm_engine *e, llm_request *r, int32_t id)
{
    llm_json_state  st = r->json;

    if (id >= 0 && id < e->texts.n && e->texts.len[id] > 0
        && llm_json_feed(&st, e->texts.bytes + e->texts.off[id],
                         (size_t) e->texts.len[id]) == 0)
    {
        r->json = st;
    }
}


void
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
        llm_hist_observe(&e->counters.hist[LLM_H_TTFT],
                         now - r->stats.arrival);
    } else if (now > r->stats.last_token) {
        /* once per step, like vLLM: accepted drafts share their step */
        llm_hist_observe(&e->counters.hist[LLM_H_ITL],
                         now - r->stats.last_token);
    }
    r->stats.last_token = now;
    e->counters.generation_tokens_total++;
    llm_req_out_add_id(&r->stage, id, lp);
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
    if (r->params.json_object && !llm_is_eos(e, id)) {
        llm_engine_json_advance(e, r, id);
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
    r->finish = why;
    r->stats.finished = now;
    llm_stats_observe_finished(&e->counters, &r->stats, &r->params, why);
    llm_sched_remove(e, r);
    llm_mark_changed(e, r);
}


void
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
            llm_req_out_add_id(o, r->stage.ids[j],
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
    e->counters.num_running = e->sched.running.n;
    e->counters.num_waiting = e->sched.n_waiting;
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
