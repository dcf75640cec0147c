
/*
 * ngx_http_llm_logprobs.c -- the per-choice fields that depend on token
 * ids: logprobs (the chat, completions and responses shapes), vLLM's
 * prompt_logprobs and stop_reason.
 *
 * Token strings are what tokenizer.decode([id]) gives, the text vLLM shows
 * for a token; a logprob of -inf is clamped to -9999.0 as vLLM does.
 */


#include "ngx_http_llm_module.h"


static ngx_str_t ngx_http_llm_token_str(ngx_pool_t *pool, int32_t id);
static void ngx_http_llm_logprob(ngx_http_llm_json_t *j, float lp);
static void ngx_http_llm_token_bytes(ngx_http_llm_json_t *j, ngx_str_t *s);
static size_t ngx_http_llm_utf8_chars(ngx_str_t *s);
static void ngx_http_llm_top_dict(ngx_http_llm_json_t *j, ngx_pool_t *pool,
    llm_token_logprob *lp, int n_top);
static int32_t ngx_http_llm_token_at(ngx_http_llm_seq_t *seq,
    ngx_uint_t n_echo, ngx_uint_t i);
static llm_token_logprob *ngx_http_llm_lp_at(ngx_http_llm_seq_t *seq,
    ngx_uint_t n_echo, ngx_uint_t i);


/*
 * {"content":[{"token","logprob","bytes","top_logprobs":[...]}],
 * "refusal":null}: OpenAI's schema wants both keys (vLLM writes no refusal)
 */

void
ngx_http_llm_logprobs_chat(ngx_http_llm_json_t *j, ngx_http_llm_seq_t *seq)
{
    ngx_http_llm_json_lit(j, "{\"content\":");
    ngx_http_llm_logprobs_list(j, seq, 0, 1);
    ngx_http_llm_json_lit(j, ",\"refusal\":null}");
}


/*
 * [{"token","logprob","bytes","top_logprobs":[{"token","logprob",
 * "bytes"}]}] of the records from "from" on: chat's content list and
 * /responses' output_text logprobs; bytes: 0 gives the shape of
 * /responses' stream deltas, which have no "bytes" keys.
 */

void
ngx_http_llm_logprobs_list(ngx_http_llm_json_t *j, ngx_http_llm_seq_t *seq,
    ngx_uint_t from, ngx_uint_t bytes)
{
    int                 k, n_top;
    ngx_str_t           s;
    ngx_uint_t          i;
    ngx_pool_t         *pool;
    llm_token_logprob  *lp;

    n_top = seq->ctx->job->logprobs;
    pool = seq->ctx->request->pool;

    ngx_http_llm_json_lit(j, "[");

    for (i = from; i < seq->lp.nelts; i++) {
        lp = (llm_token_logprob *) seq->lp.elts + i;

        if (i > from) {
            ngx_http_llm_json_lit(j, ",");
        }

        s = ngx_http_llm_token_str(pool, lp->id);

        ngx_http_llm_json_lit(j, "{\"token\":");
        ngx_http_llm_json_str(j, s.data, s.len);
        ngx_http_llm_json_lit(j, ",\"logprob\":");
        ngx_http_llm_logprob(j, lp->logprob);

        if (bytes) {
            ngx_http_llm_json_lit(j, ",\"bytes\":");
            ngx_http_llm_token_bytes(j, &s);
        }

        ngx_http_llm_json_lit(j, ",\"top_logprobs\":[");

        for (k = 0; k < lp->n_top && k < n_top; k++) {
            if (k) {
                ngx_http_llm_json_lit(j, ",");
            }

            s = ngx_http_llm_token_str(pool, lp->top_ids[k]);

            ngx_http_llm_json_lit(j, "{\"token\":");
            ngx_http_llm_json_str(j, s.data, s.len);
            ngx_http_llm_json_lit(j, ",\"logprob\":");
            ngx_http_llm_logprob(j, lp->top_logprobs[k]);

            if (bytes) {
                ngx_http_llm_json_lit(j, ",\"bytes\":");
                ngx_http_llm_token_bytes(j, &s);
            }

            ngx_http_llm_json_lit(j, "}");
        }

        ngx_http_llm_json_lit(j, "]}");
    }

    ngx_http_llm_json_lit(j, "]");
}


/*
 * {"text_offset":[...],"token_logprobs":[...],"tokens":[...],
 *  "top_logprobs":[{"token":logprob,...},...]}; offsets count characters
 * of the text returned so far, as Python's len() does.
 *
 * echo: the choice's first text starts with the prompt, and so do these
 * lists (vLLM): its first token has null for its logprob and its dict,
 * the others their prompt logprobs; with max_tokens 0 there is nothing
 * after them.  Offsets run on over the prompt's tokens into the output's,
 * in a stream too (vLLM's later chunks restart without the prompt).
 */

void
ngx_http_llm_logprobs_completions(ngx_http_llm_json_t *j,
    ngx_http_llm_seq_t *seq, ngx_uint_t echo)
{
    size_t              offset;
    ngx_str_t           s;
    ngx_uint_t          i, n, n_echo;
    ngx_pool_t         *pool;
    llm_token_logprob  *lp;

    pool = seq->ctx->request->pool;

    n_echo = echo ? (ngx_uint_t) seq->prompt->n : 0;
    n = n_echo + (seq->ctx->job->echo_only ? 0 : seq->lp.nelts);

    ngx_http_llm_json_lit(j, "{\"text_offset\":[");

    offset = seq->text_offset;

    for (i = 0; i < n; i++) {
        if (i) {
            ngx_http_llm_json_lit(j, ",");
        }

        ngx_http_llm_json_int(j, offset);

        s = ngx_http_llm_token_str(pool,
                                   ngx_http_llm_token_at(seq, n_echo, i));
        offset += ngx_http_llm_utf8_chars(&s);
    }

    seq->text_offset = offset;

    ngx_http_llm_json_lit(j, "],\"token_logprobs\":[");

    for (i = 0; i < n; i++) {
        if (i) {
            ngx_http_llm_json_lit(j, ",");
        }

        lp = ngx_http_llm_lp_at(seq, n_echo, i);

        if (lp == NULL) {
            ngx_http_llm_json_lit(j, "null");

        } else {
            ngx_http_llm_logprob(j, lp->logprob);
        }
    }

    ngx_http_llm_json_lit(j, "],\"tokens\":[");

    for (i = 0; i < n; i++) {
        if (i) {
            ngx_http_llm_json_lit(j, ",");
        }

        s = ngx_http_llm_token_str(pool,
                                   ngx_http_llm_token_at(seq, n_echo, i));
        ngx_http_llm_json_str(j, s.data, s.len);
    }

    ngx_http_llm_json_lit(j, "],\"top_logprobs\":[");

    for (i = 0; i < n; i++) {
        if (i) {
            ngx_http_llm_json_lit(j, ",");
        }

        lp = ngx_http_llm_lp_at(seq, n_echo, i);

        if (lp == NULL) {
            ngx_http_llm_json_lit(j, "null");

        } else {
            ngx_http_llm_top_dict(j, pool, lp, seq->ctx->job->logprobs);
        }
    }

    ngx_http_llm_json_lit(j, "]}");
}


/* entry i of the echoed prompt's n_echo tokens and then the output's */

static int32_t
ngx_http_llm_token_at(ngx_http_llm_seq_t *seq, ngx_uint_t n_echo,
    ngx_uint_t i)
{
    llm_token_logprob  *lp;

    lp = seq->lp.elts;

    return (i < n_echo) ? seq->prompt->ids[i] : lp[i - n_echo].id;
}


static llm_token_logprob *
ngx_http_llm_lp_at(ngx_http_llm_seq_t *seq, ngx_uint_t n_echo, ngx_uint_t i)
{
    if (i >= n_echo) {
        return (llm_token_logprob *) seq->lp.elts + i - n_echo;
    }

    /* the first prompt token has none */
    return (i > 0 && i - 1 < seq->n_plp) ? &seq->plp[i - 1] : NULL;
}


/*
 * vLLM's prompt_logprobs: [null, {"id": {"logprob", "rank",
 * "decoded_token"}, ...}, ...], a dict for every prompt token after the
 * first: the prompt token with its rank, then the N most likely with ranks
 * 1..N.  Keys are token ids, so a prompt token among the N keeps its first
 * place and takes the later value, as in the Python dict vLLM builds.
 */

void
ngx_http_llm_prompt_logprobs(ngx_http_llm_json_t *j, ngx_http_llm_seq_t *seq)
{
    int                 d, k, m, n_top;
    int                 rank[NGX_HTTP_LLM_MAX_LOGPROBS + 1];
    int32_t             id[NGX_HTTP_LLM_MAX_LOGPROBS + 1];
    float               value[NGX_HTTP_LLM_MAX_LOGPROBS + 1];
    ngx_str_t           s;
    ngx_uint_t          i;
    ngx_pool_t         *pool;
    llm_token_logprob  *lp;

    pool = seq->ctx->request->pool;
    n_top = seq->ctx->job->sp.prompt_logprobs;

    ngx_http_llm_json_lit(j, "[null");

    for (i = 0; i < seq->n_plp; i++) {
        lp = &seq->plp[i];

        id[0] = lp->id;
        value[0] = lp->logprob;
        rank[0] = lp->rank;
        m = 1;

        for (k = 0; k < lp->n_top && k < n_top; k++) {
            for (d = 0; d < m && id[d] != lp->top_ids[k]; d++) {
                /* void */
            }

            if (d == m) {
                id[m] = lp->top_ids[k];
                m++;
            }

            value[d] = lp->top_logprobs[k];
            rank[d] = k + 1;
        }

        ngx_http_llm_json_lit(j, ",{");

        for (k = 0; k < m; k++) {
            if (k) {
                ngx_http_llm_json_lit(j, ",");
            }

            ngx_http_llm_json_lit(j, "\"");
            ngx_http_llm_json_int(j, id[k]);
            ngx_http_llm_json_lit(j, "\":{\"logprob\":");
            ngx_http_llm_logprob(j, value[k]);
            ngx_http_llm_json_lit(j, ",\"rank\":");
            ngx_http_llm_json_int(j, rank[k]);
            ngx_http_llm_json_lit(j, ",\"decoded_token\":");

            s = ngx_http_llm_token_str(pool, id[k]);
            ngx_http_llm_json_str(j, s.data, s.len);
            ngx_http_llm_json_lit(j, "}");
        }

        ngx_http_llm_json_lit(j, "}");
    }

    ngx_http_llm_json_lit(j, "]");
}


/*
 * One position's {"token": logprob, ...}: the sampled token and the N
 * most likely, up to N + 1 entries (OpenAI: "the API will always return
 * the logprob of the sampled token"; vLLM puts it first).  Keys are token
 * strings, and two ids may decode alike (a lone byte of a UTF-8 sequence
 * is U+FFFD): as in the Python dict vLLM builds, the first key keeps its
 * place and the last value wins.
 */

static void
ngx_http_llm_top_dict(ngx_http_llm_json_t *j, ngx_pool_t *pool,
    llm_token_logprob *lp, int n_top)
{
    int         i, k, n;
    float       value[NGX_HTTP_LLM_MAX_LOGPROBS + 1];
    ngx_str_t   key[NGX_HTTP_LLM_MAX_LOGPROBS + 1], s;

    key[0] = ngx_http_llm_token_str(pool, lp->id);
    value[0] = lp->logprob;
    n = 1;

    for (i = 0; i < lp->n_top && i < n_top; i++) {
        s = ngx_http_llm_token_str(pool, lp->top_ids[i]);

        for (k = 0; k < n; k++) {
            if (key[k].len == s.len
                && ngx_memcmp(key[k].data, s.data, s.len) == 0)
            {
                break;
            }
        }

        if (k == n) {
            key[n] = s;
            n++;
        }

        value[k] = lp->top_logprobs[i];
    }

    ngx_http_llm_json_lit(j, "{");

    for (k = 0; k < n; k++) {
        if (k) {
            ngx_http_llm_json_lit(j, ",");
        }

        ngx_http_llm_json_str(j, key[k].data, key[k].len);
        ngx_http_llm_json_lit(j, ":");
        ngx_http_llm_logprob(j, value[k]);
    }

    ngx_http_llm_json_lit(j, "}");
}


/*
 * vLLM's stop_reason: the stop string that matched, or the id from the
 * request's stop_token_ids; null for EOS, length and abort.
 */

void
ngx_http_llm_stop_reason(ngx_http_llm_json_t *j, ngx_http_llm_seq_t *seq)
{
    int                  i;
    ngx_http_llm_job_t  *job;

    job = seq->ctx->job;

    if (seq->finish == LLM_FINISH_STOP && seq->stop_string.len) {
        ngx_http_llm_json_str(j, seq->stop_string.data, seq->stop_string.len);
        return;
    }

    if (seq->finish == LLM_FINISH_STOP && seq->stop_token >= 0) {
        for (i = 0; i < job->sp.n_stop_token_ids; i++) {
            if (job->sp.stop_token_ids[i] == seq->stop_token) {
                ngx_http_llm_json_int(j, seq->stop_token);
                return;
            }
        }
    }

    ngx_http_llm_json_lit(j, "null");
}


static ngx_str_t
ngx_http_llm_token_str(ngx_pool_t *pool, int32_t id)
{
    char       *text;
    size_t      len;
    ngx_str_t   s;

    /* a few microseconds per token: cheap enough for the event loop */
    text = llm_tokenizer_decode(llm_model_tokenizer(ngx_http_llm_worker.model),
                                &id, 1, 0, &len);

    s.len = 0;
    s.data = (u_char *) "";

    if (text == NULL) {
        return s;
    }

    s.data = ngx_pnalloc(pool, len);

    if (s.data == NULL) {
        s.data = (u_char *) "";

    } else {
        ngx_memcpy(s.data, text, len);
        s.len = len;
    }

    free(text);

    return s;
}


static void
ngx_http_llm_logprob(ngx_http_llm_json_t *j, float lp)
{
    ngx_http_llm_json_double(j, lp < -9999.0f ? -9999.0 : (double) lp);
}


static void
ngx_http_llm_token_bytes(ngx_http_llm_json_t *j, ngx_str_t *s)
{
    size_t  i;

    ngx_http_llm_json_lit(j, "[");

    for (i = 0; i < s->len; i++) {
        if (i) {
            ngx_http_llm_json_lit(j, ",");
        }

        ngx_http_llm_json_int(j, s->data[i]);
    }

    ngx_http_llm_json_lit(j, "]");
}


static size_t
ngx_http_llm_utf8_chars(ngx_str_t *s)
{
    size_t  i, n;

    n = 0;

    for (i = 0; i < s->len; i++) {
        n += (s->data[i] & 0xc0) != 0x80;
    }

    return n;
}


/* vLLM's return_token_ids: the ids as a list, else null */

void
ngx_http_llm_token_ids(ngx_http_llm_json_t *j, ngx_http_llm_job_t *job,
    const int32_t *ids, ngx_uint_t n)
{
    ngx_uint_t  i;

    if (!job->return_token_ids) {
        ngx_http_llm_json_lit(j, "null");
        return;
    }

    ngx_http_llm_json_lit(j, "[");

    for (i = 0; i < n; i++) {
        if (i) {
            ngx_http_llm_json_lit(j, ",");
        }

        ngx_http_llm_json_int(j, ids[i]);
    }

    ngx_http_llm_json_lit(j, "]");
}
