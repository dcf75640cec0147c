/*
 * spec_decode.c -- n-gram speculative decoding (prompt lookup).
 *
 * Proposal: the longest suffix of the sequence, from lookup_max down to
 * lookup_min tokens, that occurred earlier in the sequence (prompt or
 * output); the tokens after its first occurrence are the draft (like
 * vLLM: the first occurrence leaves the most tokens after it, which also
 * lets a run of repeats draft k tokens at once).
 * Verification: the draft rides the request's decode step (1 + k tokens,
 * logits for each); the longest matching prefix is accepted and the
 * target's own token at the first mismatch (or after the last draft) is
 * the bonus.  Rejected drafts' K/V was written past the accepted length,
 * so it is simply overwritten later.
 */
#include <string.h>

#include "spec_decode.h"
#include "util/util.h"


int
llm_spec_propose(const int32_t *toks, int L, int kmax, int nmin, int nmax,
    int32_t *draft)
{
    int  n, i, k;

    if (kmax <= 0 || L < 2) {
        return 0;
    }
    for (n = nmax < L - 1 ? nmax : L - 1; n >= nmin && n >= 1; n--) {
        const int32_t  *suffix = toks + L - n;

        /* an earlier occurrence ends before the suffix's last token */
        for (i = 0; i < L - n; i++) {
            if (toks[i + n - 1] == suffix[n - 1]
                && memcmp(toks + i, suffix, sizeof(int32_t) * n) == 0)
            {
                k = L - (i + n);
                k = k < kmax ? k : kmax;
                memcpy(draft, toks + i + n, sizeof(int32_t) * k);
                return k;
            }
        }
    }
    return 0;
}


int
llm_spec_schedule_drafts(const llm_spec_config *c, llm_request *r,
    int max_model_len, int budget)
{
    int  kmax = c->k, left;

    /* never draft past max_model_len, nor further than the request may
     * still produce (the bonus token takes one of those) */
    left = max_model_len - r->n_tokens;
    kmax = left < kmax ? left : kmax;
    left = r->params.max_tokens - r->stats.completion_tokens - 1;
    kmax = left < kmax ? left : kmax;
    kmax = budget - 1 < kmax ? budget - 1 : kmax;
    if (kmax <= 0) {
        return 0;
    }
    if (r->n_tokens + kmax > r->cap_tokens) {
        r->cap_tokens = r->n_tokens + kmax + 16;
        r->tokens = llm_xrealloc(r->tokens, sizeof(int32_t) * r->cap_tokens);
    }
    /* drafts wait just past the sequence's tokens until verified */
    return llm_spec_propose(r->tokens, r->n_tokens, kmax, c->lookup_min,
                            c->lookup_max, r->tokens + r->n_tokens);
}


void
llm_spec_record(llm_engine_stats *counters, llm_request *r, int drafted,
    int accepted)
{
    int  i;

    r->stats.num_spec_steps++;
    r->stats.num_draft_tokens += drafted;
    r->stats.num_accepted_tokens += accepted;
    r->stats.acceptance_histogram[accepted]++;
    if (r->n_spec_steps == r->cap_spec_steps) {
        r->cap_spec_steps = r->cap_spec_steps ? 2 * r->cap_spec_steps : 32;
        r->spec_accepted = llm_xrealloc(r->spec_accepted, r->cap_spec_steps);
        r->spec_drafted = llm_xrealloc(r->spec_drafted, r->cap_spec_steps);
    }
    r->spec_accepted[r->n_spec_steps] = (uint8_t) accepted;
    r->spec_drafted[r->n_spec_steps] = (uint8_t) drafted;
    r->n_spec_steps++;
    counters->spec_num_drafts_total++;
    counters->spec_num_draft_tokens_total += (uint64_t) drafted;
    counters->spec_num_accepted_tokens_total += (uint64_t) accepted;
    for (i = 0; i < accepted; i++) {
        counters->spec_accepted_per_pos_total[i]++;
    }
}
