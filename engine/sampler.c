/*
 * sampler.c -- logits to token ids.
 *
 * Order, as vLLM applies it: repetition / frequency / presence penalties,
 * logit bias, min_tokens (EOS and stop ids masked), then greedy argmax, or
 * temperature, min-p, top-k, top-p and a draw from what remains.  Logprobs
 * are taken from the raw logits, before any of that (vLLM's default
 * "raw_logprobs" mode).
 */
#define _GNU_SOURCE
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "sampler.h"
#include "util/util.h"


/* ---- random numbers ------------------------------------------------------ */


static uint64_t
llm_splitmix64(uint64_t *x)
{
    uint64_t  z = (*x += 0x9e3779b97f4a7c15ULL);

    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}


void
llm_rng_seed(llm_rng *r, uint64_t seed)
{
    int  i;

    for (i = 0; i < 4; i++) {
        r->s[i] = llm_splitmix64(&seed);
    }
}


static inline uint64_t
llm_rotl(uint64_t x, int k)
{
    return (x << k) | (x >> (64 - k));
}


uint64_t
llm_rng_next(llm_rng *r)
{
    uint64_t  *s = r->s;
    uint64_t   result = llm_rotl(s[1] * 5, 7) * 9;
    uint64_t   t = s[1] << 17;

    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = llm_rotl(s[3], 45);
    return result;
}


double
llm_rng_uniform(llm_rng *r)
{
    return (double) (llm_rng_next(r) >> 11) * (1.0 / 9007199254740992.0);
}


/* ---- working memory ------------------------------------------------------ */


void
llm_sampler_init(llm_sampler *s, int vocab)
{
    memset(s, 0, sizeof(*s));
    s->vocab = vocab;
    s->probs = llm_xmalloc(sizeof(float) * vocab);
    s->idx = llm_xmalloc(sizeof(int32_t) * vocab);
    s->seen = llm_xcalloc(vocab, 1);
    s->counts = llm_xcalloc(vocab, sizeof(int32_t));
}


void
llm_sampler_free(llm_sampler *s)
{
    free(s->probs);
    free(s->idx);
    free(s->seen);
    free(s->counts);
    llm_sample_mods_free(&s->mods);
    llm_gmask_scratch_free(&s->gmask);
    memset(s, 0, sizeof(*s));
}


/* ---- logits processing --------------------------------------------------- */


static void
llm_sample_mod_push(llm_sample_mods *m, int32_t id, float v)
{
    if (m->n == m->cap) {
        m->cap = m->cap ? 2 * m->cap : 1024;
        m->mods = llm_xrealloc(m->mods, sizeof(*m->mods) * m->cap);
    }
    m->mods[m->n].id = id;
    m->mods[m->n].v = v;
    m->n++;
}


void
llm_sample_mods_free(llm_sample_mods *m)
{
    free(m->mods);
    memset(m, 0, sizeof(*m));
}


/* bad_words (vLLM's rule): a word's last token is masked when the output
 * ends with the tokens before it (a one-token word: always) */
static void
llm_sampler_bad_words(const llm_sample_ctx *c, llm_sample_mods *m, int V)
{
    const int32_t  *w = c->bad_ids;
    int             i, len;

    for (i = 0; i < c->n_bad; w += c->bad_lens[i], i++) {
        len = c->bad_lens[i];
        if (len - 1 <= c->n_output && w[len - 1] >= 0 && w[len - 1] < V
            && memcmp(c->output + c->n_output - (len - 1), w,
                      sizeof(int32_t) * (size_t) (len - 1)) == 0)
        {
            llm_sample_mod_push(m, w[len - 1], 0.0f);
        }
    }
}


llm_sample_mod_counts
llm_sampler_mods(llm_sampler *s, const llm_sample_ctx *c, llm_sample_mods *m)
{
    const llm_sampling_params  *p = c->p;
    llm_sample_mod_counts       n;
    int                         i, n0, V = s->vocab;
    int32_t                     t;

    /* repetition penalty: every distinct token of prompt and output */
    n0 = m->n;
    if (p->repetition_penalty != 1.0) {
        for (i = 0; i < c->n_prompt + c->n_output; i++) {
            t = i < c->n_prompt ? c->prompt[i] : c->output[i - c->n_prompt];
            if (!s->seen[t]) {
                s->seen[t] = 1;
                llm_sample_mod_push(m, t, (float) p->repetition_penalty);
            }
        }
        for (i = n0; i < m->n; i++) {
            s->seen[m->mods[i].id] = 0;
        }
    }
    n.n_rep = m->n - n0;

    /* frequency and presence: every distinct output token, with its count */
    n0 = m->n;
    if (p->frequency_penalty != 0.0 || p->presence_penalty != 0.0) {
        for (i = 0; i < c->n_output; i++) {
            s->counts[c->output[i]]++;
        }
        for (i = 0; i < c->n_output; i++) {
            t = c->output[i];
            if (s->counts[t] > 0) {
                llm_sample_mod_push(m, t,
                    (float) (p->frequency_penalty * s->counts[t]
                             + p->presence_penalty));
                s->counts[t] = 0;       /* once per distinct token, and reset */
            }
        }
    }
    n.n_sub = m->n - n0;

    n0 = m->n;
    for (i = 0; i < p->n_logit_bias; i++) {
        if (p->logit_bias_ids[i] >= 0 && p->logit_bias_ids[i] < V) {
            llm_sample_mod_push(m, p->logit_bias_ids[i],
                                p->logit_bias_values[i]);
        }
    }
    n.n_bias = m->n - n0;

    n0 = m->n;
    if (c->n_output < p->min_tokens) {
        for (i = 0; i < c->n_eos; i++) {
            if (c->eos_ids[i] >= 0 && c->eos_ids[i] < V) {
                llm_sample_mod_push(m, c->eos_ids[i], 0.0f);
            }
        }
        for (i = 0; i < p->n_stop_token_ids; i++) {
            if (p->stop_token_ids[i] >= 0 && p->stop_token_ids[i] < V) {
                llm_sample_mod_push(m, p->stop_token_ids[i], 0.0f);
            }
        }
    }
    llm_sampler_bad_words(c, m, V);
    n.n_mask = m->n - n0;
    return n;
}


void
llm_sampler_mods_apply(float *logits, const llm_sample_mod *mods,
    llm_sample_mod_counts n)
{
    const llm_sample_mod  *md = mods;
    int                    i;
    float                  x;

    for (i = 0; i < n.n_rep; i++, md++) {
        x = logits[md->id];
        logits[md->id] = x > 0 ? x / md->v : x * md->v;
    }
    for (i = 0; i < n.n_sub; i++, md++) {
        logits[md->id] -= md->v;
    }
    for (i = 0; i < n.n_bias; i++, md++) {
        logits[md->id] += md->v;
    }
    for (i = 0; i < n.n_mask; i++, md++) {
        logits[md->id] = -INFINITY;
    }
}


static int
llm_in_vocab(const llm_sampler *s, int32_t id)
{
    return id >= 0 && id < s->vocab;
}


/* allowed_token_ids: every other token is masked */
static void
llm_apply_allowed(llm_sampler *s, float *logits, const llm_sampling_params *p)
{
    int  i;

    for (i = 0; i < p->n_allowed_token_ids; i++) {
        if (llm_in_vocab(s, p->allowed_token_ids[i])) {
            s->seen[p->allowed_token_ids[i]] = 1;
        }
    }
    for (i = 0; i < s->vocab; i++) {
        if (!s->seen[i]) {
            logits[i] = -INFINITY;
        }
    }
    for (i = 0; i < p->n_allowed_token_ids; i++) {
        if (llm_in_vocab(s, p->allowed_token_ids[i])) {
            s->seen[p->allowed_token_ids[i]] = 0;
        }
    }
}


/* structured output: a token stays if the grammar takes its text, an EOS
 * only once the text is complete */
static void
llm_apply_grammar(llm_sampler *s, float *logits, const llm_sample_ctx *c)
{
    float  eos[16];
    int    i, n_eos = c->n_eos < 16 ? c->n_eos : 16, any;
    int    complete = llm_grammar_complete(c->grammar, c->gstate);

    for (i = 0; i < n_eos; i++) {
        eos[i] = c->eos_ids[i] >= 0 && c->eos_ids[i] < s->vocab
                 ? logits[c->eos_ids[i]] : -INFINITY;
    }
    any = llm_grammar_mask(c->gvocab, c->grammar, c->gstate, logits,
                           &s->gmask);
    for (i = 0; i < n_eos; i++) {
        if (c->eos_ids[i] >= 0 && c->eos_ids[i] < s->vocab) {
            logits[c->eos_ids[i]] = complete ? eos[i] : -INFINITY;
            any |= complete && eos[i] != -INFINITY;
        }
    }
    /* nothing left (min_tokens holds back the EOS after a complete text,
     * allowed_token_ids leave no way on): an EOS, rather than a token that
     * breaks the grammar; before min_tokens it does not end the sequence */
    if (!any && n_eos > 0 && c->eos_ids[0] >= 0 && c->eos_ids[0] < s->vocab) {
        logits[c->eos_ids[0]] = 0.0f;
    }
}


/* penalties, bias and min_tokens masks, allowed_token_ids and structured
 * output, on the host (the device path takes no request with the last
 * two) */
static void
llm_apply_mods(llm_sampler *s, float *logits, const llm_sample_ctx *c)
{
    llm_sample_mod_counts  n;

    s->mods.n = 0;
    n = llm_sampler_mods(s, c, &s->mods);
    llm_sampler_mods_apply(logits, s->mods.mods, n);
    if (c->p->n_allowed_token_ids > 0) {
        llm_apply_allowed(s, logits, c->p);
    }
    if (c->grammar) {
        llm_apply_grammar(s, logits, c);
    }
}


static int32_t
llm_argmax(const float *x, int n)
{
    int    i, best = 0;
    float  m = x[0];

    for (i = 1; i < n; i++) {
        if (x[i] > m) {
            m = x[i];
            best = i;
        }
    }
    return best;
}


static int
llm_cmp_desc(const void *a, const void *b, void *arg)
{
    const float  *v = arg;
    float         x = v[*(const int32_t *) a], y = v[*(const int32_t *) b];

    if (x != y) {
        return x > y ? -1 : 1;
    }
    return *(const int32_t *) a - *(const int32_t *) b;
}


/* Moves the k largest values' indices (by v) to idx[0..k), unordered. */
static void
llm_select_top(int32_t *idx, int n, int k, const float *v)
{
    int      lo = 0, hi = n - 1, i, j;
    int32_t  tmp;
    float    pivot;

    while (lo < hi) {
        pivot = v[idx[(lo + hi) / 2]];
        i = lo;
        j = hi;
        while (i <= j) {
            while (v[idx[i]] > pivot) {
                i++;
            }
            while (v[idx[j]] < pivot) {
                j--;
            }
            if (i <= j) {
                tmp = idx[i];
                idx[i] = idx[j];
                idx[j] = tmp;
                i++;
                j--;
            }
        }
        if (k - 1 <= j) {
            hi = j;
        } else if (k - 1 >= i) {
            lo = i;
        } else {
            break;
        }
    }
}


/* Sorts the top `k` of idx[0..n) descending; returns how many are sorted. */
static int
llm_sort_top(int32_t *idx, int n, int k, const float *v)
{
    if (k > n) {
        k = n;
    }
    if (k < n) {
        llm_select_top(idx, n, k, v);
    }
    qsort_r(idx, k, sizeof(int32_t), llm_cmp_desc, (void *) v);
    return k;
}


/* One definition of a logprob record, for sampled tokens and prompt
 * tokens alike: log-softmax of the raw row, the token's rank, and the n_top
 * most likely tokens (ranks 1..n_top, ties by lower id).  Two passes over
 * the row, no sort: prompt logprobs run it for every prompt position. */
void
llm_sampler_logprobs(llm_sampler *s, const float *raw, int32_t id,
    int n_top, llm_token_logprob *lp)
{
    int     i, k, n = 0, rank = 0, V = s->vocab;
    double  sum = 0.0;
    float   m[4] = { raw[0], raw[0], raw[0], raw[0] }, lse, x, mine = raw[id];

    /* the maximum in four independent lanes: 4x faster than one */
    for (i = 0; i + 4 <= V; i += 4) {
        for (k = 0; k < 4; k++) {
            m[k] = raw[i + k] > m[k] ? raw[i + k] : m[k];
        }
    }
    for ( ; i < V; i++) {
        m[0] = raw[i] > m[0] ? raw[i] : m[0];
    }
    for (k = 1; k < 4; k++) {
        m[0] = m[k] > m[0] ? m[k] : m[0];
    }

    if (n_top > 20) {
        n_top = 20;
    }
    for (i = 0; i < V; i++) {
        x = raw[i];
        sum += expf(x - m[0]);
        rank += x >= mine;
        /* the n_top largest so far, descending: most fail the first test */
        if (n_top > 0 && (n < n_top || x > lp->top_logprobs[n - 1])) {
            k = n < n_top ? n++ : n - 1;
            for ( ; k > 0 && lp->top_logprobs[k - 1] < x; k--) {
                lp->top_logprobs[k] = lp->top_logprobs[k - 1];
                lp->top_ids[k] = lp->top_ids[k - 1];
            }
            lp->top_logprobs[k] = x;
            lp->top_ids[k] = i;
        }
    }
    lse = m[0] + (float) log(sum);
    lp->id = id;
    lp->logprob = mine - lse;
    lp->rank = rank;
    lp->n_top = n;
    for (k = 0; k < n; k++) {
        lp->top_logprobs[k] -= lse;
    }
}


/* Temperature, min-p, top-k and top-p: leaves the candidates in
 * s->idx[0..k) with unnormalised probabilities in s->probs, their total in
 * *total; returns k (0 when every logit is -inf). */
static int
llm_candidates(llm_sampler *s, float *logits, const llm_sample_ctx *c,
    double *total)
{
    const llm_sampling_params  *p = c->p;
    int                         i, n = 0, k, V = s->vocab;
    float                       m, inv_t = (float) (1.0 / p->temperature);
    double                      sum = 0.0, cum, target;

    m = logits[llm_argmax(logits, V)] * inv_t;
    if (m == -INFINITY) {
        return 0;
    }
    /* candidates: finite logits that pass min-p (prob >= min_p * max) */
    for (i = 0; i < V; i++) {
        float  e;

        if (logits[i] == -INFINITY) {
            continue;
        }
        e = expf(logits[i] * inv_t - m);
        if (p->min_p > 0.0 && e < p->min_p) {
            continue;
        }
        s->probs[i] = e;
        s->idx[n++] = i;
    }
    k = n;
    if (p->top_k > 0 && p->top_k < n) {
        k = llm_sort_top(s->idx, n, p->top_k, s->probs);
    }
    for (i = 0; i < k; i++) {
        sum += s->probs[s->idx[i]];
    }
    if (p->top_p < 1.0f) {
        /* grow a sorted prefix until it holds top_p of the mass */
        int  sorted = 0, want = 64;

        target = p->top_p * sum;
        for ( ;; ) {
            if (want > k) {
                want = k;
            }
            if (want > sorted) {
                /* idx[0..sorted) hold the largest, in order */
                sorted += llm_sort_top(s->idx + sorted, k - sorted,
                                       want - sorted, s->probs);
            }
            for (i = 0, cum = 0.0; i < sorted; i++) {
                cum += s->probs[s->idx[i]];
                if (cum >= target) {
                    break;
                }
            }
            if (i < sorted) {
                k = i + 1;
                break;
            }
            if (sorted == k) {
                break;
            }
            want *= 4;
        }
        sum = 0.0;
        for (i = 0; i < k; i++) {
            sum += s->probs[s->idx[i]];
        }
    }
    *total = sum;
    return k;
}


/* One draw from the candidates, skipping `skip` (-1: none). */
static int32_t
llm_draw(llm_sampler *s, int k, double total, int32_t skip, llm_rng *rng)
{
    double  u = llm_rng_uniform(rng) * total, cum = 0.0;
    int     i, last = -1;

    for (i = 0; i < k; i++) {
        if (s->idx[i] == skip) {
            continue;
        }
        last = s->idx[i];
        cum += s->probs[last];
        if (u < cum) {
            return last;
        }
    }
    return last;
}


static int32_t
llm_sample_processed(llm_sampler *s, float *logits, const llm_sample_ctx *c,
    int32_t draft, int *accepted)
{
    double   total, pd = 0.0;
    int      i, k;
    int32_t  id;

    if (accepted) {
        *accepted = 0;
    }
    if (c->p->temperature < 1e-5) {
        id = llm_argmax(logits, s->vocab);
        if (accepted) {
            *accepted = id == draft;
        }
        return id;
    }
    k = llm_candidates(s, logits, c, &total);
    if (k == 0) {
        return llm_argmax(logits, s->vocab);
    }
    if (draft < 0) {
        return llm_draw(s, k, total, -1, c->rng);
    }
    /* The n-gram proposal is one token with certainty, so the standard
     * rule min(1, p/q) accepts it with probability p(draft); a rejection
     * draws from the residual max(0, p - q), i.e. p without the draft. */
    for (i = 0; i < k; i++) {
        if (s->idx[i] == draft) {
            pd = s->probs[draft];
            break;
        }
    }
    if (pd > 0.0 && llm_rng_uniform(c->rng) * total < pd) {
        *accepted = 1;
        return draft;
    }
    if (total - pd <= 0.0) {
        return draft;                   /* nothing else has any mass */
    }
    return llm_draw(s, k, total - pd, draft, c->rng);
}


int
llm_sample_candidates(llm_sampler *s, float *logits, const llm_sample_ctx *c,
    double *total)
{
    llm_apply_mods(s, logits, c);
    *total = 0.0;
    if (c->p->temperature < 1e-5) {
        return 0;
    }
    return llm_candidates(s, logits, c, total);
}


int32_t
llm_sample(llm_sampler *s, float *logits, const llm_sample_ctx *c,
    llm_token_logprob *lp)
{
    return llm_sample_verify(s, logits, c, -1, NULL, lp);
}


int32_t
llm_sample_verify(llm_sampler *s, float *logits, const llm_sample_ctx *c,
    int32_t draft, int *accepted, llm_token_logprob *lp)
{
    float    *raw = NULL;
    int32_t   id;

    if (lp) {
        raw = llm_xmalloc(sizeof(float) * s->vocab);
        memcpy(raw, logits, sizeof(float) * s->vocab);
    }
    llm_apply_mods(s, logits, c);
    id = llm_sample_processed(s, logits, c, draft, accepted);
    if (lp) {
        llm_sampler_logprobs(s, raw, id, c->p->logprobs, lp);
        free(raw);
    }
    return id;
}
