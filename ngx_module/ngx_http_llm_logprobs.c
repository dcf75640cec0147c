
/*
 * ngx_http_llm_logprobs.c -- the per-choice fields that depend on token
 * ids: logprobs (chat and completions shapes) and stop_reason.
 *
 * Token strings are what tokenizer.decode([id]) gives, the text vLLM shows
 * for a token; a logprob of -inf is clamped to -9999.0 as vLLM does.
 */


#include "ngx_http_llm_module.h"


static ngx_str_t ngx_http_llm_token_str(ngx_http_llm_ctx_t *ctx, int32_t id);
static void ngx_http_llm_logprob(ngx_http_llm_json_t *j, float lp);
static void ngx_http_llm_token_bytes(ngx_http_llm_json_t *j, ngx_str_t *s);
static size_t ngx_http_llm_utf8_chars(ngx_str_t *s);


/* {"content":[{"token","logprob","bytes","top_logprobs":[...]}]} */

void
ngx_http_llm_logprobs_chat(ngx_http_llm_json_t *j, ngx_http_llm_ctx_t *ctx)
{
    int                 k, n_top;
    ngx_str_t           s;
    ngx_uint_t          i;
    llm_token_logprob  *lp;

    n_top = ctx->job->logprobs;

    ngx_http_llm_json_lit(j, "{\"content\":[");

    for (i = 0; i < ctx->n_lp; i++) {
        lp = &ctx->lp[i];

        if (i) {
            ngx_http_llm_json_lit(j, ",");
        }

        s = ngx_http_llm_token_str(ctx, lp->id);

        ngx_http_llm_json_lit(j, "{\"token\":");
        ngx_http_llm_json_str(j, s.data, s.len);
        ngx_http_llm_json_lit(j, ",\"logprob\":");
        ngx_http_llm_logprob(j, lp->logprob);
        ngx_http_llm_json_lit(j, ",\"bytes\":");
        ngx_http_llm_token_bytes(j, &s);
        ngx_http_llm_json_lit(j, ",\"top_logprobs\":[");

        for (k = 0; k < lp->n_top && k < n_top; k++) {
            if (k) {
                ngx_http_llm_json_lit(j, ",");
            }

            s = ngx_http_llm_token_str(ctx, lp->top_ids[k]);

            ngx_http_llm_json_lit(j, "{\"token\":");
            ngx_http_llm_json_str(j, s.data, s.len);
            ngx_http_llm_json_lit(j, ",\"logprob\":");
            ngx_http_llm_logprob(j, lp->top_logprobs[k]);
            ngx_http_llm_json_lit(j, ",\"bytes\":");
            ngx_http_llm_token_bytes(j, &s);
            ngx_http_llm_json_lit(j, "}");
        }

        ngx_http_llm_json_lit(j, "]}");
    }

    ngx_http_llm_json_lit(j, "]}");
}


/*
 * {"text_offset":[...],"token_logprobs":[...],"tokens":[...],
 *  "top_logprobs":[{"token":logprob,...},...]}; offsets count characters
 * of the text returned so far, as Python's len() does.
 */

void
ngx_http_llm_logprobs_completions(ngx_http_llm_json_t *j,
    ngx_http_llm_ctx_t *ctx)
{
    int                 k;
    size_t              offset;
    ngx_str_t           s;
    ngx_uint_t          i;
    llm_token_logprob  *lp;

    ngx_http_llm_json_lit(j, "{\"text_offset\":[");

    offset = ctx->text_offset;

    for (i = 0; i < ctx->n_lp; i++) {
        if (i) {
            ngx_http_llm_json_lit(j, ",");
        }

        ngx_http_llm_json_int(j, offset);

        s = ngx_http_llm_token_str(ctx, ctx->lp[i].id);
        offset += ngx_http_llm_utf8_chars(&s);
    }

    ctx->text_offset = offset;

    ngx_http_llm_json_lit(j, "],\"token_logprobs\":[");

    for (i = 0; i < ctx->n_lp; i++) {
        if (i) {
            ngx_http_llm_json_lit(j, ",");
        }

        ngx_http_llm_logprob(j, ctx->lp[i].logprob);
    }

    ngx_http_llm_json_lit(j, "],\"tokens\":[");

    for (i = 0; i < ctx->n_lp; i++) {
        if (i) {
            ngx_http_llm_json_lit(j, ",");
        }

        s = ngx_http_llm_token_str(ctx, ctx->lp[i].id);
        ngx_http_llm_json_str(j, s.data, s.len);
    }

    ngx_http_llm_json_lit(j, "],\"top_logprobs\":[");

    for (i = 0; i < ctx->n_lp; i++) {
        lp = &ctx->lp[i];

        if (i) {
            ngx_http_llm_json_lit(j, ",");
        }

        ngx_http_llm_json_lit(j, "{");

        for (k = 0; k < lp->n_top && k < ctx->job->logprobs; k++) {
            if (k) {
                ngx_http_llm_json_lit(j, ",");
            }

            s = ngx_http_llm_token_str(ctx, lp->top_ids[k]);
            ngx_http_llm_json_str(j, s.data, s.len);
            ngx_http_llm_json_lit(j, ":");
            ngx_http_llm_logprob(j, lp->top_logprobs[k]);
        }

        ngx_http_llm_json_lit(j, "}");
    }

    ngx_http_llm_json_lit(j, "]}");
}


/*
 * vLLM's stop_reason: the stop string that matched, or the id from the
 * request's stop_token_ids; null for EOS, length and abort.
 */

void
ngx_http_llm_stop_reason(ngx_http_llm_json_t *j, ngx_http_llm_ctx_t *ctx)
{
    int  i;

    if (ctx->finish == LLM_FINISH_STOP && ctx->stop_string.len) {
        ngx_http_llm_json_str(j, ctx->stop_string.data, ctx->stop_string.len);
        return;
    }

    if (ctx->finish == LLM_FINISH_STOP && ctx->stop_token >= 0) {
        for (i = 0; i < ctx->job->sp.n_stop_token_ids; i++) {
            if (ctx->job->stop_ids[i] == ctx->stop_token) {
                ngx_http_llm_json_int(j, ctx->stop_token);
                return;
            }
        }
    }

    ngx_http_llm_json_lit(j, "null");
}


static ngx_str_t
ngx_http_llm_token_str(ngx_http_llm_ctx_t *ctx, int32_t id)
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

    s.data = ngx_pnalloc(ctx->request->pool, len);

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
