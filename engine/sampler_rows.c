/*
 * sampler_rows.c -- the host half of sampling on the device: a row's
 * parameters and its sparse logit modifications, in the order and the
 * float conversions of sampler.c (penalties, bias, min_tokens masks; then
 * temperature, min-p, top-k, top-p and one draw), so that the device
 * computes the same values the host sampler would.
 */
#include <stdlib.h>
#include <string.h>

#include "sampler_rows.h"
#include "util.h"


void
llm_sample_rows_reset(llm_sample_rows *b)
{
    b->n_rows = 0;
    b->n_mods = 0;
}


void
llm_sample_rows_free(llm_sample_rows *b)
{
    free(b->rows);
    free(b->mods);
    memset(b, 0, sizeof(*b));
}


static void
llm_sample_mod_push(llm_sample_rows *b, int32_t id, float v)
{
    if (b->n_mods == b->cap_mods) {
        b->cap_mods = b->cap_mods ? 2 * b->cap_mods : 1024;
        b->mods = llm_xrealloc(b->mods, sizeof(*b->mods) * b->cap_mods);
    }
    b->mods[b->n_mods].id = id;
    b->mods[b->n_mods].v = v;
    b->n_mods++;
}


void
llm_sample_row_make(llm_sampler *s, const llm_sample_ctx *c,
    llm_sample_rows *b)
{
    const llm_sampling_params  *p = c->p;
    llm_sample_row             *row;
    int                         i, n0, V = s->vocab;
    int32_t                     t;

    if (b->n_rows == b->cap_rows) {
        b->cap_rows = b->cap_rows ? 2 * b->cap_rows : 64;
        b->rows = llm_xrealloc(b->rows, sizeof(*b->rows) * b->cap_rows);
    }
    row = &b->rows[b->n_rows++];
    memset(row, 0, sizeof(*row));
    row->greedy = p->temperature < 1e-5;
    row->inv_t = (float) (1.0 / (row->greedy ? 1.0 : p->temperature));
    row->min_p = p->min_p;
    row->top_p = p->top_p;
    row->top_k = p->top_k;
    row->logprobs = p->logprobs < 0 ? -1 : p->logprobs > 20 ? 20
                    : p->logprobs;
    row->lp_slot = -1;
    row->mod_off = b->n_mods;

    /* repetition penalty: every distinct token of prompt and output */
    n0 = b->n_mods;
    if (p->repetition_penalty != 1.0f) {
        for (i = 0; i < c->n_prompt + c->n_output; i++) {
            t = i < c->n_prompt ? c->prompt[i] : c->output[i - c->n_prompt];
            if (!s->seen[t]) {
                s->seen[t] = 1;
                llm_sample_mod_push(b, t, (float) p->repetition_penalty);
            }
        }
        for (i = n0; i < b->n_mods; i++) {
            s->seen[b->mods[i].id] = 0;
        }
    }
    row->n_rep = b->n_mods - n0;

    /* frequency and presence: every distinct output token, with its count */
    n0 = b->n_mods;
    if (p->frequency_penalty != 0.0f || p->presence_penalty != 0.0f) {
        for (i = 0; i < c->n_output; i++) {
            s->counts[c->output[i]]++;
        }
        for (i = 0; i < c->n_output; i++) {
            t = c->output[i];
            if (s->counts[t] > 0) {
                llm_sample_mod_push(b, t,
                    (float) (p->frequency_penalty * s->counts[t]
                             + p->presence_penalty));
                s->counts[t] = 0;
            }
        }
    }
    row->n_sub = b->n_mods - n0;

    n0 = b->n_mods;
    for (i = 0; i < p->n_logit_bias; i++) {
        if (p->logit_bias_ids[i] >= 0 && p->logit_bias_ids[i] < V) {
            llm_sample_mod_push(b, p->logit_bias_ids[i],
                                p->logit_bias_values[i]);
        }
    }
    row->n_bias = b->n_mods - n0;

    n0 = b->n_mods;
    if (c->n_output < p->min_tokens) {
        for (i = 0; i < c->n_eos; i++) {
            if (c->eos_ids[i] >= 0 && c->eos_ids[i] < V) {
                llm_sample_mod_push(b, c->eos_ids[i], 0.0f);
            }
        }
        for (i = 0; i < p->n_stop_token_ids; i++) {
            if (p->stop_token_ids[i] >= 0 && p->stop_token_ids[i] < V) {
                llm_sample_mod_push(b, p->stop_token_ids[i], 0.0f);
            }
        }
    }
    row->n_mask = b->n_mods - n0;

    /* the host sampler's one draw (llm_draw); none for greedy rows */
    if (!row->greedy) {
        row->u = llm_rng_uniform(c->rng);
    }
}


llm_sample_spec
llm_sample_rows_spec(const llm_sample_rows *b)
{
    llm_sample_spec  sp;

    sp.rows = b->rows;
    sp.mods = b->mods;
    sp.n_mods = b->n_mods;
    return sp;
}
