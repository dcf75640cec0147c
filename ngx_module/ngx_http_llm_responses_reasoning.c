
/*
 * ngx_http_llm_responses_reasoning.c -- the reasoning of a /responses
 * output (with llm_reasoning_parser) as vLLM gives it: a "reasoning" item
 * with one reasoning_text part, before the message and the calls.  A
 * stream has its events first:
 *
 *   response.output_item.added (reasoning), response.content_part.added
 *   response.reasoning_text.delta ...
 *   response.reasoning_text.done, response.content_part.done,
 *   response.output_item.done          (when the content starts, or at
 *                                       the end)
 *
 * and the message's output_index moves to 1.  No reasoning, no item.
 */


#include "ngx_http_llm_responses.h"


static ngx_int_t ngx_http_llm_responses_reasoning_open(
    ngx_http_llm_json_t *j, ngx_http_llm_ctx_t *ctx);
static void ngx_http_llm_responses_reasoning_close(ngx_http_llm_json_t *j,
    ngx_http_llm_ctx_t *ctx);
static void ngx_http_llm_responses_reasoning_event(ngx_http_llm_json_t *j,
    ngx_http_llm_ctx_t *ctx, const char *type, ngx_uint_t item,
    ngx_uint_t done);
static void ngx_http_llm_responses_reasoning_item(ngx_http_llm_json_t *j,
    ngx_http_llm_ctx_t *ctx, ngx_uint_t done);
static void ngx_http_llm_responses_reasoning_part(ngx_http_llm_json_t *j,
    ngx_http_llm_ctx_t *ctx, ngx_uint_t done);
static void ngx_http_llm_responses_reasoning_ids(ngx_http_llm_json_t *j,
    ngx_http_llm_ctx_t *ctx);
static ngx_int_t ngx_http_llm_responses_reasoning_id(ngx_http_llm_ctx_t *ctx);


ngx_int_t
ngx_http_llm_responses_reasoning_chunk(ngx_http_llm_ctx_t *ctx,
    ngx_http_llm_json_t *j)
{
    ngx_http_llm_seq_t  *seq = &ctx->seqs[0];

    if (seq->think.nelts > seq->think_sent) {
        if (!ctx->reasoning_item
            && ngx_http_llm_responses_reasoning_open(j, ctx) != NGX_OK)
        {
            return NGX_ERROR;
        }

        ngx_http_llm_responses_event(j, ctx, "response.reasoning_text.delta");
        ngx_http_llm_json_lit(j, "{\"content_index\":0,\"delta\":");
        ngx_http_llm_json_str(j, (u_char *) seq->think.elts + seq->think_sent,
                              seq->think.nelts - seq->think_sent);
        ngx_http_llm_responses_reasoning_ids(j, ctx);
        ngx_http_llm_responses_event_end(j, ctx,
                                         "response.reasoning_text.delta");

        seq->think_sent = seq->think.nelts;
    }

    if (ctx->reasoning_open
        && (seq->text.nelts > seq->text_sent
            || ctx->finish != LLM_FINISH_NONE))
    {
        ngx_http_llm_responses_reasoning_close(j, ctx);
    }

    return j->failed ? NGX_ERROR : NGX_OK;
}


static ngx_int_t
ngx_http_llm_responses_reasoning_open(ngx_http_llm_json_t *j,
    ngx_http_llm_ctx_t *ctx)
{
    if (ngx_http_llm_responses_reasoning_id(ctx) != NGX_OK) {
        return NGX_ERROR;
    }

    ctx->reasoning_item = 1;
    ctx->reasoning_open = 1;

    ngx_http_llm_responses_reasoning_event(j, ctx,
                                           "response.output_item.added", 1, 0);
    ngx_http_llm_responses_reasoning_event(j, ctx,
                                           "response.content_part.added", 0, 0);

    return NGX_OK;
}


static void
ngx_http_llm_responses_reasoning_close(ngx_http_llm_json_t *j,
    ngx_http_llm_ctx_t *ctx)
{
    ngx_http_llm_seq_t  *seq = &ctx->seqs[0];

    ctx->reasoning_open = 0;

    ngx_http_llm_responses_event(j, ctx, "response.reasoning_text.done");
    ngx_http_llm_json_lit(j, "{\"content_index\":0");
    ngx_http_llm_responses_reasoning_ids(j, ctx);
    ngx_http_llm_json_lit(j, ",\"text\":");
    ngx_http_llm_json_str(j, seq->think.elts, seq->think.nelts);
    ngx_http_llm_responses_event_end(j, ctx, "response.reasoning_text.done");

    ngx_http_llm_responses_reasoning_event(j, ctx,
                                           "response.content_part.done", 0, 1);
    ngx_http_llm_responses_reasoning_event(j, ctx,
                                           "response.output_item.done", 1, 1);
}


/* the item's event (item: output_item.*) or its part's (content_part.*);
 * done: with the whole text, else empty */

static void
ngx_http_llm_responses_reasoning_event(ngx_http_llm_json_t *j,
    ngx_http_llm_ctx_t *ctx, const char *type, ngx_uint_t item,
    ngx_uint_t done)
{
    ngx_http_llm_responses_event(j, ctx, type);

    if (item) {
        ngx_http_llm_json_lit(j, "{\"item\":");
        ngx_http_llm_responses_reasoning_item(j, ctx, done);
        ngx_http_llm_json_lit(j, ",\"output_index\":0");

    } else {
        ngx_http_llm_json_lit(j, "{\"content_index\":0");
        ngx_http_llm_responses_reasoning_ids(j, ctx);
        ngx_http_llm_json_lit(j, ",\"part\":");
        ngx_http_llm_responses_reasoning_part(j, ctx, done);
    }

    ngx_http_llm_responses_event_end(j, ctx, type);
}


/*
 * The finished output's reasoning item (a body, response.completed):
 * 1 when there is one, so the caller separates what follows.
 */

ngx_uint_t
ngx_http_llm_responses_reasoning_output(ngx_http_llm_json_t *j,
    ngx_http_llm_ctx_t *ctx)
{
    if (ctx->seqs[0].think.nelts == 0) {
        return 0;
    }

    if (ngx_http_llm_responses_reasoning_id(ctx) != NGX_OK) {
        j->failed = 1;
        return 0;
    }

    ngx_http_llm_responses_reasoning_item(j, ctx, 1);

    return 1;
}


/* vLLM's ResponseReasoningItem; done: 0 gives the empty one of .added */

static void
ngx_http_llm_responses_reasoning_item(ngx_http_llm_json_t *j,
    ngx_http_llm_ctx_t *ctx, ngx_uint_t done)
{
    ngx_http_llm_json_lit(j, "{\"id\":");
    ngx_http_llm_json_str(j, ctx->reasoning_id.data, ctx->reasoning_id.len);
    ngx_http_llm_json_lit(j, ",\"summary\":[],\"type\":\"reasoning\","
                          "\"content\":[");

    if (done) {
        ngx_http_llm_responses_reasoning_part(j, ctx, 1);
    }

    ngx_http_llm_json_lit(j, "],\"encrypted_content\":null,\"status\":");

    if (done) {
        ngx_http_llm_json_lit(j, "\"completed\"}");

    } else {
        ngx_http_llm_json_lit(j, "\"in_progress\"}");
    }
}


static void
ngx_http_llm_responses_reasoning_part(ngx_http_llm_json_t *j,
    ngx_http_llm_ctx_t *ctx, ngx_uint_t done)
{
    ngx_http_llm_seq_t  *seq = &ctx->seqs[0];

    ngx_http_llm_json_lit(j, "{\"text\":");

    if (done) {
        ngx_http_llm_json_str(j, seq->think.elts, seq->think.nelts);

    } else {
        ngx_http_llm_json_lit(j, "\"\"");
    }

    ngx_http_llm_json_lit(j, ",\"type\":\"reasoning_text\"}");
}


/* ,"item_id":...,"output_index":0 */

static void
ngx_http_llm_responses_reasoning_ids(ngx_http_llm_json_t *j,
    ngx_http_llm_ctx_t *ctx)
{
    ngx_http_llm_json_lit(j, ",\"item_id\":");
    ngx_http_llm_json_str(j, ctx->reasoning_id.data, ctx->reasoning_id.len);
    ngx_http_llm_json_lit(j, ",\"output_index\":0");
}


/* the item's "rs_..." id, made once */

static ngx_int_t
ngx_http_llm_responses_reasoning_id(ngx_http_llm_ctx_t *ctx)
{
    if (ctx->reasoning_id.len) {
        return NGX_OK;
    }

    return ngx_http_llm_random_id(ctx->request->pool, &ctx->reasoning_id,
                                  "rs_");
}
