/*
 * sampler_rows.c -- the host half of sampling on the device: a row's
 * parameters (in sampler.c's float conversions: temperature, min-p, top-k,
 * top-p and its one draw) and its logit modifications (sampler.c's own
 * list), so that the device computes the values the host sampler would.
 */
#include <stdlib.h>
#include <string.h>

#include "sampler_rows.h"
#include "util/util.h"


void
llm_sample_rows_reset(llm_sample_rows *b)
{
    b->n_rows = 0;
    b->mods.n = 0;
}


void
llm_sample_rows_free(llm_sample_rows *b)
{
    free(b->rows);
    llm_sample_mods_free(&b->mods);
    memset(b, 0, sizeof(*b));
}


void
llm_sample_row_make(llm_sampler *s, const llm_sample_ctx *c,
    llm_sample_rows *b)
{
    const llm_sampling_params  *p = c->p;
    llm_sample_row             *row;
    llm_sample_mod_counts       n;

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
    row->mod_off = b->mods.n;
    n = llm_sampler_mods(s, c, &b->mods);
    row->n_rep = n.n_rep;
    row->n_sub = n.n_sub;
    row->n_bias = n.n_bias;
    row->n_mask = n.n_mask;

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
    sp.mods = b->mods.mods;
    sp.n_mods = b->mods.n;
    return sp;
}
