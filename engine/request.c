/*
 * request.c -- creating, referencing and freeing requests, their output
 * buffers, and lists of them.
 */
#include <stdlib.h>
#include <string.h>

#include "kv_blocks.h"
#include "model/model.h"
#include "params.h"
#include "request.h"
#include "util/util.h"


static void llm_seq_group_unref(llm_seq_group *g);


const char *
llm_finish_reason_str(llm_finish_reason r)
{
    switch (r) {
    case LLM_FINISH_STOP:
        return "stop";
    case LLM_FINISH_LENGTH:
        return "length";
    case LLM_FINISH_ABORT:
        return "abort";
    case LLM_FINISH_ERROR:
        return "error";
    default:
        return NULL;
    }
}


static void *
llm_memdup(const void *p, size_t n)
{
    return n ? memcpy(llm_xmalloc(n), p, n) : NULL;
}


/* Appends one token sequence to the request's bad words. */
static void
llm_request_bad_add(llm_request *r, const int32_t *ids, int n, int *cap)
{
    int  total = 0, i;

    for (i = 0; i < r->n_bad; i++) {
        total += r->bad_lens[i];
    }
    if (total + n > *cap) {
        *cap = (total + n) * 2;
        r->bad_ids = llm_xrealloc(r->bad_ids, sizeof(int32_t) * (size_t) *cap);
    }
    memcpy(r->bad_ids + total, ids, sizeof(int32_t) * (size_t) n);
    r->bad_lens = llm_xrealloc(r->bad_lens,
                               sizeof(int32_t) * (size_t) (r->n_bad + 1));
    r->bad_lens[r->n_bad++] = n;
}


/*
 * vLLM's bad_words as token sequences: each word without its leading
 * blanks as it starts a text, and with one space in front (as it follows
 * another word) when that is a different first token of the same length
 * (SamplingParams.update_from_tokenizer).
 */
static void
llm_request_bad_words(llm_request *r, const llm_tokenizer *t,
    const llm_sampling_params *p)
{
    const char  *w;
    char        *spaced, err[LLM_ERR_LEN];
    int32_t     *a, *b;
    int          i, na, nb, cap = 0;

    for (i = 0; i < p->n_bad_words; i++) {
        for (w = p->bad_words[i]; *w == ' ' || *w == '\t' || *w == '\n'; w++) {
            /* void */
        }
        spaced = llm_xmalloc(strlen(w) + 2);
        spaced[0] = ' ';
        strcpy(spaced + 1, w);
        na = llm_tokenizer_encode(t, w, strlen(w), 0, &a, err);
        nb = llm_tokenizer_encode(t, spaced, strlen(spaced), 0, &b, err);
        if (na > 0) {
            llm_request_bad_add(r, a, na, &cap);
            if (nb == na && b[0] != a[0]) {
                llm_request_bad_add(r, b, nb, &cap);
            }
        }
        if (na >= 0) {
            free(a);
        }
        if (nb >= 0) {
            free(b);
        }
        free(spaced);
    }
    r->params.bad_words = NULL;         /* only the sequences are kept */
    r->params.n_bad_words = 0;
}


int
llm_request_validate(const llm_model *m, int max_model_len,
    const int32_t *prompt, int n_prompt, const llm_sampling_params *p,
    char *err)
{
    const char  *param;

    if (llm_prompt_validate(m, max_model_len, prompt, n_prompt, err) != 0
        || llm_sampling_params_validate(p, m, &param, err) != 0)
    {
        return -1;
    }
    return 0;
}


llm_request *
llm_request_new(const llm_model *m, int max_model_len, const int32_t *prompt,
    int n_prompt, const llm_sampling_params *p, uint64_t seed, char *err)
{
    llm_request  *r;
    const char   *param;
    int           i;

    if (llm_prompt_validate(m, max_model_len, prompt, n_prompt, err) != 0
        || llm_sampling_params_validate(p, m, &param, err) != 0)
    {
        return NULL;
    }

    r = llm_xcalloc(1, sizeof(*r));
    atomic_init(&r->refs, 1);
    atomic_init(&r->bill_limit, -1);
    r->params = *p;
    llm_sampling_params_resolve(&r->params, n_prompt, max_model_len);
    r->stop_ids = llm_memdup(p->stop_token_ids,
                             sizeof(int32_t) * p->n_stop_token_ids);
    r->params.stop_token_ids = r->stop_ids;
    r->bias_ids = llm_memdup(p->logit_bias_ids,
                             sizeof(int32_t) * p->n_logit_bias);
    r->bias_values = llm_memdup(p->logit_bias_values,
                                sizeof(float) * p->n_logit_bias);
    r->params.logit_bias_ids = r->bias_ids;
    r->params.logit_bias_values = r->bias_values;
    if (p->json_object || p->structured) {
        const char  *spec = p->structured ? p->structured : "{\"object\":true}";

        r->grammar = llm_grammar_get(spec, strlen(spec), err);
        if (r->grammar == NULL) {
            free(r->stop_ids);
            free(r->bias_ids);
            free(r->bias_values);
            free(r);
            return NULL;
        }
        r->gstate = llm_xmalloc(sizeof(*r->gstate));
        llm_grammar_init(r->grammar, r->gstate);
    }
    r->params.structured = NULL;        /* only the grammar is kept */
    if (p->cache_salt) {
        r->cache_root = llm_blocks_salt_key(p->cache_salt);
        r->params.cache_salt = NULL;    /* only its key is kept */
    }
    llm_request_bad_words(r, m->tokenizer, p);
    r->allowed_ids = llm_memdup(p->allowed_token_ids,
                                sizeof(int32_t) * p->n_allowed_token_ids);
    r->params.allowed_token_ids = r->allowed_ids;
    if (p->n_stop > 0) {
        r->stop = llm_xcalloc(p->n_stop, sizeof(char *));
        for (i = 0; i < p->n_stop; i++) {
            int  len = (int) strlen(p->stop[i]);

            r->stop[i] = llm_xstrdup(p->stop[i]);
            r->max_stop_len = len > r->max_stop_len ? len : r->max_stop_len;
        }
    }
    r->params.stop = (const char *const *) r->stop;

    r->n_prompt = n_prompt;
    r->cap_tokens = n_prompt + 16;
    r->tokens = llm_xmalloc(sizeof(int32_t) * r->cap_tokens);
    memcpy(r->tokens, prompt, sizeof(int32_t) * n_prompt);
    r->n_tokens = n_prompt;
    if (p->prompt_logprobs >= 0 && n_prompt > 1) {
        r->prompt_lp = llm_xmalloc(sizeof(llm_token_logprob)
                                   * (n_prompt - 1));
    }
    r->stop_token = -1;
    llm_rng_seed(&r->rng, seed);
    r->stats.arrival = llm_now();
    r->stats.prompt_tokens = n_prompt;
    r->stats.max_tokens = r->params.max_tokens;
    return r;
}


void
llm_request_set_data(llm_request *r, void *data)
{
    r->data = data;
}


void *
llm_request_data(const llm_request *r)
{
    return r->data;
}


void
llm_request_set_arrival(llm_request *r, double t)
{
    r->stats.arrival = t;
}


void
llm_request_set_queued(llm_request *r, double t)
{
    r->queued_since = t;
}


void
llm_request_release(llm_request *r)
{
    if (r == NULL) {
        return;
    }
    /* a client that lets go no longer wants the tokens */
    atomic_store(&r->client_gone, 1);
    atomic_fetch_or(&r->gate, LLM_GATE_CLOSED);
    atomic_store(&r->cancelled, 1);
    llm_request_unref(r);
}


void
llm_request_unref(llm_request *r)
{
    int  i;

    if (atomic_fetch_sub(&r->refs, 1) != 1) {
        return;
    }
    if (r->share_from) {
        llm_request_unref(r->share_from);
    }
    llm_seq_group_unref(r->group);
    free(r->stop_ids);
    free(r->bias_ids);
    free(r->allowed_ids);
    free(r->bad_ids);
    free(r->bad_lens);
    free(r->bias_values);
    for (i = 0; i < r->params.n_stop; i++) {
        free(r->stop[i]);
    }
    free(r->stop);
    free(r->tokens);
    free(r->prompt_lp);
    free(r->blocks);
    free(r->keys);
    free(r->spec_accepted);
    free(r->spec_drafted);
    free(r->held);
    llm_grammar_release(r->grammar);
    free(r->gstate);
    if (r->detok) {
        llm_detok_free(r->detok);
    }
    llm_req_out_free(&r->stage);
    llm_req_out_free(&r->out);
    llm_req_out_free(&r->deliver);
    free(r);
}


void
llm_request_append_token(llm_request *r, int32_t id)
{
    if (r->n_tokens == r->cap_tokens) {
        r->cap_tokens *= 2;
        r->tokens = llm_xrealloc(r->tokens, sizeof(int32_t) * r->cap_tokens);
    }
    r->tokens[r->n_tokens++] = id;
}


static void
llm_seq_group_unref(llm_seq_group *g)
{
    if (g != NULL && atomic_fetch_sub(&g->refs, 1) == 1) {
        free(g);
    }
}


void
llm_request_join_group(llm_request *r)
{
    llm_request    *l = r->share_from;
    llm_seq_group  *g;

    if (l == NULL) {
        return;                         /* a leader, or a single sample */
    }
    if (l->group == NULL && l->state != LLM_REQ_FINISHED) {
        g = llm_xcalloc(1, sizeof(*g));
        atomic_init(&g->refs, 1);
        g->unfinished = 1;
        l->group = g;
    }
    g = l->group;
    /* a leader that finished alone was observed alone: so is r */
    if (g == NULL || g->unfinished == 0) {
        return;
    }
    atomic_fetch_add(&g->refs, 1);
    g->unfinished++;
    r->group = g;
}


int
llm_request_group_finish(llm_request *r)
{
    llm_seq_group  *g = r->group;
    int             n = r->stats.completion_tokens;

    if (g == NULL) {
        return n;
    }
    if (n > g->max_generation) {
        g->max_generation = n;
    }
    return --g->unfinished == 0 ? g->max_generation : -1;
}


void
llm_req_out_add_id(llm_req_out *o, int32_t id, double t,
    const llm_token_logprob *lp)
{
    if (o->n_ids == o->ids_cap) {
        o->ids_cap = o->ids_cap ? 2 * o->ids_cap : 16;
        o->ids = llm_xrealloc(o->ids, sizeof(int32_t) * o->ids_cap);
        o->times = llm_xrealloc(o->times, sizeof(double) * o->ids_cap);
        if (lp || o->logprobs) {
            o->logprobs = llm_xrealloc(o->logprobs,
                                       sizeof(llm_token_logprob)
                                       * o->ids_cap);
        }
    }
    if (lp && o->logprobs == NULL) {
        o->logprobs = llm_xmalloc(sizeof(llm_token_logprob) * o->ids_cap);
    }
    if (lp) {
        o->logprobs[o->n_ids] = *lp;
    }
    o->times[o->n_ids] = t;
    o->ids[o->n_ids++] = id;
}


void
llm_req_out_add_text(llm_req_out *o, const char *s, size_t n)
{
    if (n == 0) {
        return;
    }
    if (o->text_len + n + 1 > o->text_cap) {
        o->text_cap = (o->text_len + n + 1) * 2;
        o->text = llm_xrealloc(o->text, o->text_cap);
    }
    memcpy(o->text + o->text_len, s, n);
    o->text_len += n;
    o->text[o->text_len] = '\0';
}


void
llm_req_out_clear(llm_req_out *o)
{
    o->text_len = 0;
    o->n_ids = 0;
    o->prompt_lp_ready = 0;
}


void
llm_req_out_free(llm_req_out *o)
{
    free(o->text);
    free(o->ids);
    free(o->times);
    free(o->logprobs);
    memset(o, 0, sizeof(*o));
}


void
llm_req_list_push(llm_req_list *l, llm_request *r)
{
    if (l->n == l->cap) {
        l->cap = l->cap ? 2 * l->cap : 16;
        l->items = llm_xrealloc(l->items, sizeof(llm_request *) * l->cap);
    }
    l->items[l->n++] = r;
}


void
llm_req_list_remove(llm_req_list *l, llm_request *r)
{
    int  i;

    for (i = 0; i < l->n; i++) {
        if (l->items[i] == r) {
            memmove(&l->items[i], &l->items[i + 1],
                    sizeof(llm_request *) * (l->n - i - 1));
            l->n--;
            return;
        }
    }
}


void
llm_req_list_free(llm_req_list *l)
{
    free(l->items);
    memset(l, 0, sizeof(*l));
}
