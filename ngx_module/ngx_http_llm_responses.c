
/*
 * ngx_http_llm_responses.c -- POST .../responses, OpenAI's Responses API
 * the way vLLM serves it (without built-in tools: one generation turn).
 *
 * The request is parsed in the thread pool (ngx_http_llm_responses_input.c);
 * this file renders, on the event loop: the response object in vLLM's key
 * order (ResponsesResponse.model_dump(), nulls included), "status"
 * "incomplete" with incomplete_details.reason "max_output_tokens" when the
 * output was cut by its length, and usage with input/output token
 * details.  A stream
 * is "event: <type>\ndata: <json>\n\n" events with sequence_number 0, 1,
 * 2 ... and no [DONE]:
 *
 *   response.created, response.in_progress         (at once)
 *   response.output_item.added, response.content_part.added
 *                                                  (with the first text)
 *   response.output_text.delta ...
 *   response.output_text.done, response.content_part.done,
 *   response.output_item.done, response.completed  (at the end)
 *
 * Only response.completed's response carries "metrics" (SPEC section 6);
 * a response without text has no output item (vLLM's rule).  With a tool
 * parser, calls in the answer are function_call items
 * (ngx_http_llm_responses_calls.c).
 */


#include "ngx_http_llm_responses.h"


static void ngx_http_llm_responses_object(ngx_http_llm_json_t *j,
    ngx_http_llm_ctx_t *ctx, ngx_uint_t final);
static void ngx_http_llm_responses_echoed(ngx_http_llm_json_t *j,
    ngx_http_llm_ctx_t *ctx, ngx_uint_t which, const char *dflt);
static void ngx_http_llm_responses_store(ngx_http_llm_ctx_t *ctx,
    ngx_http_llm_json_t *j, size_t start);
static ngx_int_t ngx_http_llm_response_not_found(ngx_http_request_t *r,
    ngx_str_t *id);


/* the route's start: a generation, and a stream's first two events */

ngx_int_t
ngx_http_llm_responses_start(ngx_http_request_t *r, ngx_http_llm_ctx_t *ctx)
{
    ngx_int_t             rc;
    ngx_http_llm_json_t  *j;

    rc = ngx_http_llm_generate(r, ctx);
    if (rc != NGX_DONE) {
        return rc;
    }

    if (ngx_http_llm_random_id(r->pool, &ctx->item_id, "msg_") != NGX_OK) {
        return NGX_ERROR;
    }

    if (!ctx->stream) {
        return NGX_DONE;
    }

    j = &ctx->scratch;
    ngx_http_llm_json_init(j, r->pool, 4096);

    ngx_http_llm_responses_event(j, ctx, "response.created");
    ngx_http_llm_json_lit(j, "{\"response\":");
    ngx_http_llm_responses_object(j, ctx, 0);
    ngx_http_llm_responses_event_end(j, ctx, "response.created");

    ngx_http_llm_responses_event(j, ctx, "response.in_progress");
    ngx_http_llm_json_lit(j, "{\"response\":");
    ngx_http_llm_responses_object(j, ctx, 0);
    ngx_http_llm_responses_event_end(j, ctx, "response.in_progress");

    if (ngx_http_llm_sse_send(r, ctx, j, 0) == NGX_ERROR) {
        return NGX_ERROR;
    }

    return NGX_DONE;
}


ngx_int_t
ngx_http_llm_responses_chunk(ngx_http_llm_ctx_t *ctx, ngx_http_llm_json_t *j)
{
    size_t               start;
    ngx_http_llm_seq_t  *seq;

    static u_char  msg[] = "Internal server error";

    seq = &ctx->seqs[0];

    if (ctx->finish == LLM_FINISH_ERROR) {
        ngx_http_llm_responses_event(j, ctx, "error");
        ngx_http_llm_json_lit(j, "{\"code\":\"server_error\",\"message\":");
        ngx_http_llm_json_str(j, msg, sizeof(msg) - 1);
        ngx_http_llm_json_lit(j, ",\"param\":null");
        ngx_http_llm_responses_event_end(j, ctx, "error");

        if (ctx->billing) {
            ngx_http_llm_billing_event(j, ctx);
        }

        return j->failed ? NGX_ERROR : NGX_OK;
    }

    if (ctx->job->reasoning
        && ngx_http_llm_responses_reasoning_chunk(ctx, j) != NGX_OK)
    {
        return NGX_ERROR;
    }

    if (ctx->job->tool_parser != LLM_TOOL_PARSER_NONE) {
        if (ngx_http_llm_responses_calls_chunk(ctx, j) != NGX_OK) {
            return NGX_ERROR;
        }

    } else if (seq->text.nelts > seq->text_sent) {
        if (!ctx->item_started) {
            ctx->item_started = 1;
            ngx_http_llm_responses_msg_added(j, ctx, ctx->reasoning_item);
        }

        ngx_http_llm_responses_msg_delta(j, ctx, ctx->reasoning_item,
                                         (u_char *) seq->text.elts
                                         + seq->text_sent,
                                         seq->text.nelts - seq->text_sent);
    }

    seq->text_sent = seq->text.nelts;
    seq->lp_sent = seq->lp.nelts;
    seq->changed = 0;

    if (ctx->finish == LLM_FINISH_NONE) {
        return j->failed ? NGX_ERROR : NGX_OK;
    }

    if (ctx->item_started && ctx->job->tool_parser == LLM_TOOL_PARSER_NONE) {
        ngx_http_llm_responses_msg_done(j, ctx, ctx->reasoning_item);
    }

    ngx_http_llm_responses_event(j, ctx, "response.completed");
    ngx_http_llm_json_lit(j, "{\"response\":");

    /* an offset: j may move as it grows */
    start = j->pos - j->start;
    ngx_http_llm_responses_object(j, ctx, 1);

    if (ctx->finish != LLM_FINISH_ABORT) {
        ngx_http_llm_responses_store(ctx, j, start);
    }

    ngx_http_llm_responses_event_end(j, ctx, "response.completed");

    if (ctx->billing) {
        ngx_http_llm_billing_event(j, ctx);
    }

    return j->failed ? NGX_ERROR : NGX_OK;
}


ngx_int_t
ngx_http_llm_responses_body(ngx_http_llm_ctx_t *ctx, ngx_http_llm_json_t *j)
{
    if (ngx_http_llm_tools_feed(&ctx->seqs[0], 0) != NGX_OK) {
        return NGX_ERROR;
    }

    ngx_http_llm_responses_object(j, ctx, 1);
    ngx_http_llm_responses_store(ctx, j, 0);

    return j->failed ? NGX_ERROR : NGX_OK;
}


/* the message item's events at output_index: added (with its empty
 * part), a text delta, and the done ones */

void
ngx_http_llm_responses_msg_added(ngx_http_llm_json_t *j,
    ngx_http_llm_ctx_t *ctx, ngx_uint_t index)
{
    ngx_http_llm_responses_event(j, ctx, "response.output_item.added");
    ngx_http_llm_json_lit(j, "{\"item\":");
    ngx_http_llm_responses_message(j, ctx, 0);
    ngx_http_llm_json_lit(j, ",\"output_index\":");
    ngx_http_llm_json_int(j, index);
    ngx_http_llm_responses_event_end(j, ctx, "response.output_item.added");

    ngx_http_llm_responses_event(j, ctx, "response.content_part.added");
    ngx_http_llm_json_lit(j, "{\"content_index\":0,\"item_id\":");
    ngx_http_llm_json_str(j, ctx->item_id.data, ctx->item_id.len);
    ngx_http_llm_json_lit(j, ",\"output_index\":");
    ngx_http_llm_json_int(j, index);
    ngx_http_llm_json_lit(j, ",\"part\":");
    ngx_http_llm_responses_part(j, ctx, 1, 1);
    ngx_http_llm_responses_event_end(j, ctx, "response.content_part.added");
}


void
ngx_http_llm_responses_msg_delta(ngx_http_llm_json_t *j,
    ngx_http_llm_ctx_t *ctx, ngx_uint_t index, u_char *text, size_t len)
{
    ngx_http_llm_seq_t  *seq = &ctx->seqs[0];

    ngx_http_llm_responses_event(j, ctx, "response.output_text.delta");
    ngx_http_llm_json_lit(j, "{\"content_index\":0,\"delta\":");
    ngx_http_llm_json_str(j, text, len);
    ngx_http_llm_json_lit(j, ",\"item_id\":");
    ngx_http_llm_json_str(j, ctx->item_id.data, ctx->item_id.len);
    ngx_http_llm_json_lit(j, ",\"logprobs\":");

    if (ctx->job->logprobs >= 0) {
        ngx_http_llm_logprobs_list(j, seq, seq->lp_sent, 0);

    } else {
        ngx_http_llm_json_lit(j, "[]");
    }

    ngx_http_llm_json_lit(j, ",\"output_index\":");
    ngx_http_llm_json_int(j, index);
    ngx_http_llm_responses_event_end(j, ctx, "response.output_text.delta");
}


void
ngx_http_llm_responses_msg_done(ngx_http_llm_json_t *j,
    ngx_http_llm_ctx_t *ctx, ngx_uint_t index)
{
    ngx_str_t            text;
    ngx_uint_t           lp;
    ngx_http_llm_seq_t  *seq = &ctx->seqs[0];

    lp = (ctx->job->logprobs >= 0);
    ngx_http_llm_responses_answer(ctx, &text);

    ngx_http_llm_responses_event(j, ctx, "response.output_text.done");
    ngx_http_llm_json_lit(j, "{\"content_index\":0,\"item_id\":");
    ngx_http_llm_json_str(j, ctx->item_id.data, ctx->item_id.len);
    ngx_http_llm_json_lit(j, ",\"logprobs\":");

    if (lp) {
        ngx_http_llm_logprobs_list(j, seq, 0, 0);

    } else {
        ngx_http_llm_json_lit(j, "[]");
    }

    ngx_http_llm_json_lit(j, ",\"output_index\":");
    ngx_http_llm_json_int(j, index);
    ngx_http_llm_json_lit(j, ",\"text\":");
    ngx_http_llm_json_str(j, text.data, text.len);
    ngx_http_llm_responses_event_end(j, ctx, "response.output_text.done");

    ngx_http_llm_responses_event(j, ctx, "response.content_part.done");
    ngx_http_llm_json_lit(j, "{\"content_index\":0,\"item_id\":");
    ngx_http_llm_json_str(j, ctx->item_id.data, ctx->item_id.len);
    ngx_http_llm_json_lit(j, ",\"output_index\":");
    ngx_http_llm_json_int(j, index);
    ngx_http_llm_json_lit(j, ",\"part\":");
    ngx_http_llm_responses_part(j, ctx, 0, lp);
    ngx_http_llm_responses_event_end(j, ctx, "response.content_part.done");

    ngx_http_llm_responses_event(j, ctx, "response.output_item.done");
    ngx_http_llm_json_lit(j, "{\"item\":");
    ngx_http_llm_responses_message(j, ctx, 1);
    ngx_http_llm_json_lit(j, ",\"output_index\":");
    ngx_http_llm_json_int(j, index);
    ngx_http_llm_responses_event_end(j, ctx, "response.output_item.done");
}


/* the answer's text: the message's (with a tool parser: the content it
 * found, empty when only calls; in a stream, the content streamed) */

void
ngx_http_llm_responses_answer(ngx_http_llm_ctx_t *ctx, ngx_str_t *text)
{
    ngx_http_llm_seq_t  *seq = &ctx->seqs[0];

    if (ctx->items) {
        text->data = ctx->items->text.elts;
        text->len = ctx->items->text.nelts;
        return;
    }

    if (seq->tools) {
        ngx_http_llm_tools_answer(seq, text);
        return;
    }

    text->data = seq->text.elts;
    text->len = seq->text.nelts;
}


/* "event: type\ndata: {" ... "sequence_number":N,"type":"type"}\n\n */

void
ngx_http_llm_responses_event(ngx_http_llm_json_t *j, ngx_http_llm_ctx_t *ctx,
    const char *type)
{
    ngx_http_llm_json_lit(j, "event: ");
    ngx_http_llm_json_raw(j, type, ngx_strlen(type));
    ngx_http_llm_json_lit(j, "\ndata: ");
}


void
ngx_http_llm_responses_event_end(ngx_http_llm_json_t *j,
    ngx_http_llm_ctx_t *ctx, const char *type)
{
    ngx_http_llm_json_lit(j, ",\"sequence_number\":");
    ngx_http_llm_json_int(j, ctx->sequence_number++);
    ngx_http_llm_json_lit(j, ",\"type\":");
    ngx_http_llm_json_cstr(j, type);
    ngx_http_llm_json_lit(j, "}\n\n");
}


/*
 * The response object.  final: 0 gives the one of response.created and
 * response.in_progress (status "in_progress", no output, no usage, no
 * metrics key); 1 the finished one of a body or response.completed.
 */

static void
ngx_http_llm_responses_object(ngx_http_llm_json_t *j, ngx_http_llm_ctx_t *ctx,
    ngx_uint_t final)
{
    double                      top_p;
    ngx_uint_t                  incomplete;
    llm_token_phases            ph;
    ngx_http_llm_job_t         *job;
    const llm_request_stats    *s;
    ngx_http_llm_responses_t   *resp;

    job = ctx->job;
    resp = job->responses;
    s = &ctx->stats;

    incomplete = final && ctx->finish == LLM_FINISH_LENGTH;

    ngx_http_llm_json_lit(j, "{\"id\":");
    ngx_http_llm_json_str(j, ctx->id.data, ctx->id.len);
    ngx_http_llm_json_lit(j, ",\"created_at\":");
    ngx_http_llm_json_int(j, ctx->created);

    /* OpenAI's schema requires "error"; a failure here is an error event */
    ngx_http_llm_json_lit(j, ",\"error\":null,\"incomplete_details\":");

    if (incomplete) {
        ngx_http_llm_json_lit(j, "{\"reason\":\"max_output_tokens\"}");

    } else {
        ngx_http_llm_json_lit(j, "null");
    }

    ngx_http_llm_json_lit(j, ",\"instructions\":");
    ngx_http_llm_responses_echoed(j, ctx, NGX_HTTP_LLM_ECHO_INSTRUCTIONS,
                                  "null");
    ngx_http_llm_json_lit(j, ",\"metadata\":");
    ngx_http_llm_responses_echoed(j, ctx, NGX_HTTP_LLM_ECHO_METADATA, "null");
    ngx_http_llm_json_lit(j, ",\"model\":");
    ngx_http_llm_json_str(j, ctx->model.data, ctx->model.len);
    ngx_http_llm_json_lit(j, ",\"object\":\"response\",\"output\":[");

    if (final) {
        ngx_http_llm_responses_output(j, ctx);
    }

    ngx_http_llm_json_lit(j, "],\"parallel_tool_calls\":");

    if (resp->parallel_tool_calls) {
        ngx_http_llm_json_lit(j, "true");

    } else {
        ngx_http_llm_json_lit(j, "false");
    }

    /* what was sampled with: greedy sampling means top_p 1 (vLLM) */
    top_p = job->sp.temperature < 1e-5 ? 1.0 : job->sp.top_p;

    ngx_http_llm_json_lit(j, ",\"temperature\":");
    ngx_http_llm_json_double(j, job->sp.temperature);
    ngx_http_llm_json_lit(j, ",\"tool_choice\":");
    ngx_http_llm_responses_echoed(j, ctx, NGX_HTTP_LLM_ECHO_TOOL_CHOICE,
                                  "\"auto\"");
    ngx_http_llm_json_lit(j, ",\"tools\":");
    ngx_http_llm_responses_echoed(j, ctx, NGX_HTTP_LLM_ECHO_TOOLS, "[]");
    ngx_http_llm_json_lit(j, ",\"top_p\":");
    ngx_http_llm_json_double(j, top_p);
    ngx_http_llm_json_lit(j, ",\"background\":false,\"max_output_tokens\":");
    ngx_http_llm_json_int(j, job->sp.max_tokens);
    ngx_http_llm_json_lit(j, ",\"max_tool_calls\":null,"
                          "\"previous_response_id\":");
    ngx_http_llm_responses_echoed(j, ctx, NGX_HTTP_LLM_ECHO_PREVIOUS, "null");
    ngx_http_llm_json_lit(j, ",\"prompt\":null,\"reasoning\":");
    ngx_http_llm_responses_echoed(j, ctx, NGX_HTTP_LLM_ECHO_REASONING,
                                  "null");
    ngx_http_llm_json_lit(j, ",\"service_tier\":");
    ngx_http_llm_responses_echoed(j, ctx, NGX_HTTP_LLM_ECHO_SERVICE_TIER,
                                  "\"auto\"");
    ngx_http_llm_json_lit(j, ",\"status\":");

    if (!final) {
        ngx_http_llm_json_lit(j, "\"in_progress\"");

    } else if (incomplete) {
        ngx_http_llm_json_lit(j, "\"incomplete\"");

    } else if (ctx->finish == LLM_FINISH_ABORT) {
        ngx_http_llm_json_lit(j, "\"cancelled\"");

    } else {
        ngx_http_llm_json_lit(j, "\"completed\"");
    }

    ngx_http_llm_json_lit(j, ",\"text\":");
    ngx_http_llm_responses_echoed(j, ctx, NGX_HTTP_LLM_ECHO_TEXT,
                                  "{\"format\":{\"type\":\"text\"}}");
    ngx_http_llm_json_lit(j, ",\"top_logprobs\":");

    if (job->logprobs >= 0) {
        ngx_http_llm_json_int(j, job->logprobs);

    } else {
        ngx_http_llm_json_lit(j, "null");
    }

    ngx_http_llm_json_lit(j, ",\"truncation\":\"disabled\"");

    /* no usage key before the end: OpenAI's ResponseUsage is no null */

    if (final) {
        ngx_http_llm_json_lit(j, ",\"usage\":{\"input_tokens\":");
        ngx_http_llm_json_int(j, s->prompt_tokens);
        ngx_http_llm_json_lit(j, ",\"input_tokens_details\":"
                              "{\"cached_tokens\":");
        ngx_http_llm_json_int(j, s->cached_tokens);
        ngx_http_llm_json_lit(j, ",\"cache_write_tokens\":0},"
                              "\"output_tokens\":");
        ngx_http_llm_json_int(j, s->completion_tokens);
        ngx_http_llm_json_lit(j, ",\"output_tokens_details\":"
                              "{\"reasoning_tokens\":");
        ngx_http_llm_reasoning_phases(ctx, &ph);
        ngx_http_llm_json_int(j, ph.reasoning.tokens);
        ngx_http_llm_json_lit(j, "},\"total_tokens\":");
        ngx_http_llm_json_int(j, (int64_t) s->prompt_tokens
                                 + s->completion_tokens);
        ngx_http_llm_json_lit(j, "}");
    }

    /* "user" is a string or absent in OpenAI's schema, never null */

    if (resp->echo[NGX_HTTP_LLM_ECHO_USER].len) {
        ngx_http_llm_json_lit(j, ",\"user\":");
        ngx_http_llm_responses_echoed(j, ctx, NGX_HTTP_LLM_ECHO_USER, "");
    }

    ngx_http_llm_json_lit(j, ",\"input_messages\":null,"
                          "\"output_messages\":null");

    /* one generation turn: metrics as for chat (SPEC section 6) */

    if (final) {
        ngx_http_llm_json_lit(j, ",\"metrics\":");
        ngx_http_llm_metrics_body(j, ctx);
    }

    ngx_http_llm_json_lit(j, "}");
}


/* the output message item; final: 0 gives the empty one of .added */

void
ngx_http_llm_responses_message(ngx_http_llm_json_t *j,
    ngx_http_llm_ctx_t *ctx, ngx_uint_t final)
{
    ngx_http_llm_json_lit(j, "{\"id\":");
    ngx_http_llm_json_str(j, ctx->item_id.data, ctx->item_id.len);
    ngx_http_llm_json_lit(j, ",\"content\":[");

    if (final) {
        ngx_http_llm_responses_part(j, ctx, 0, ctx->job->logprobs >= 0);
    }

    ngx_http_llm_json_lit(j, "],\"role\":\"assistant\",\"status\":");

    if (final) {
        ngx_http_llm_json_lit(j, "\"completed\"");

    } else {
        ngx_http_llm_json_lit(j, "\"in_progress\"");
    }

    ngx_http_llm_json_lit(j, ",\"type\":\"message\"}");
}


/*
 * An output_text part.  empty: the part of content_part.added, text "".
 * logprobs: all of them, with bytes, when requested; else [] (OpenAI's
 * schema wants a list: vLLM's null in the done events is not one).
 */

void
ngx_http_llm_responses_part(ngx_http_llm_json_t *j, ngx_http_llm_ctx_t *ctx,
    ngx_uint_t empty, ngx_uint_t logprobs)
{
    ngx_str_t            text;
    ngx_http_llm_seq_t  *seq;

    seq = &ctx->seqs[0];

    ngx_http_llm_json_lit(j, "{\"annotations\":[],\"text\":");

    if (empty) {
        ngx_http_llm_json_lit(j, "\"\"");

    } else {
        ngx_http_llm_responses_answer(ctx, &text);
        ngx_http_llm_json_str(j, text.data, text.len);
    }

    ngx_http_llm_json_lit(j, ",\"type\":\"output_text\",\"logprobs\":");

    if (!empty && logprobs) {
        ngx_http_llm_logprobs_list(j, seq, 0, 1);

    } else {
        ngx_http_llm_json_lit(j, "[]");
    }

    ngx_http_llm_json_lit(j, "}");
}


static void
ngx_http_llm_responses_echoed(ngx_http_llm_json_t *j, ngx_http_llm_ctx_t *ctx,
    ngx_uint_t which, const char *dflt)
{
    ngx_http_llm_responses_t  *resp;

    resp = ctx->job->responses;

    if (resp->echo[which].len) {
        ngx_http_llm_json_raw(j, resp->echo[which].data,
                              resp->echo[which].len);

    } else {
        ngx_http_llm_json_raw(j, dflt, ngx_strlen(dflt));
    }
}


/*
 * A finished response with "store" (the default) is kept for
 * previous_response_id and GET .../responses/{id}: the conversation and
 * the answer (without text, no assistant message, as vLLM adds none), and
 * the response object just rendered in j from offset start on.
 */

static void
ngx_http_llm_responses_store(ngx_http_llm_ctx_t *ctx, ngx_http_llm_json_t *j,
    size_t start)
{
    ngx_int_t                  rc;
    ngx_str_t                  text;
    ngx_uint_t                 calls;
    ngx_http_llm_json_t        m;
    ngx_http_llm_seq_t        *seq;
    ngx_http_llm_responses_t  *resp;

    resp = ctx->job->responses;
    seq = &ctx->seqs[0];

    if (!resp->store
        || (ctx->finish != LLM_FINISH_STOP
            && ctx->finish != LLM_FINISH_LENGTH)
        || j->failed)
    {
        return;
    }

    ngx_http_llm_json_init(&m, ctx->request->pool,
                           resp->history.len + seq->text.nelts * 2 + 64);

    ngx_http_llm_json_lit(&m, "[");
    ngx_http_llm_json_raw(&m, resp->history.data, resp->history.len);

    ngx_http_llm_responses_answer(ctx, &text);
    calls = ngx_http_llm_responses_n_calls(ctx);

    if (text.len || calls) {
        if (resp->history.len) {
            ngx_http_llm_json_lit(&m, ",");
        }

        ngx_http_llm_json_lit(&m, "{\"role\":\"assistant\",\"content\":");

        if (text.len || !calls) {
            ngx_http_llm_json_str(&m, text.data, text.len);

        } else {
            ngx_http_llm_json_lit(&m, "null");
        }

        if (calls) {
            ngx_http_llm_json_lit(&m, ",\"tool_calls\":");
            ngx_http_llm_tools_calls(&m, seq);
        }

        ngx_http_llm_json_lit(&m, "}");
    }

    ngx_http_llm_json_lit(&m, "]");

    if (m.failed) {
        rc = NGX_ERROR;

    } else {
        rc = ngx_http_llm_store_put(&ctx->id, ctx->job->owner, m.start,
                                    m.pos - m.start,
                                    j->start + start,
                                    j->pos - j->start - start);
    }

    if (rc == NGX_ERROR) {
        ngx_log_error(NGX_LOG_ERR, ctx->request->connection->log, 0,
                      "llm: out of memory storing response \"%V\"",
                      &ctx->id);

    } else if (rc == NGX_DECLINED) {
        ngx_log_error(NGX_LOG_WARN, ctx->request->connection->log, 0,
                      "llm: response \"%V\" not stored: larger than "
                      "llm_responses_store's size", &ctx->id);
    }
}


/*
 * GET .../responses/{id}: the stored response object, the bytes that were
 * sent; DELETE: it leaves the store, answered as OpenAI answers.  An id
 * that is not in the store for this owner (never stored, store false,
 * evicted, deleted, still generating, or another owner's) is a 404 naming
 * it, as in vLLM.  Retrieving as a stream (?stream=true, OpenAI's
 * replay of the events) is refused.
 */

ngx_int_t
ngx_http_llm_response_get(ngx_http_request_t *r, ngx_str_t *id)
{
    u_char                owner[NGX_HTTP_LLM_OWNER_LEN];
    ngx_int_t             rc;
    ngx_str_t             body, value;
    ngx_http_llm_json_t   j;

    if (ngx_http_llm_store_owner(r, owner) != NGX_OK) {
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }

    if (r->method == NGX_HTTP_DELETE) {
        if (ngx_http_llm_store_delete(id, owner) != NGX_OK) {
            return ngx_http_llm_response_not_found(r, id);
        }

        ngx_http_llm_json_init(&j, r->pool, 128);
        ngx_http_llm_json_lit(&j, "{\"id\":");
        ngx_http_llm_json_str(&j, id->data, id->len);
        ngx_http_llm_json_lit(&j, ",\"object\":\"response\","
                              "\"deleted\":true}");

        return ngx_http_llm_send_json(r, NGX_HTTP_OK, &j);
    }

    if (ngx_http_arg(r, (u_char *) "stream", 6, &value) == NGX_OK
        && value.len == 4
        && ngx_strncasecmp(value.data, (u_char *) "true", 4) == 0)
    {
        return ngx_http_llm_send_error(r, NGX_HTTP_BAD_REQUEST, NULL,
                                       "stream", "streaming a stored "
                                       "response is not supported: "
                                       "retrieve it without stream=true");
    }

    rc = ngx_http_llm_store_response(id, owner, r->pool, &body);

    if (rc == NGX_ERROR) {
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }

    if (rc == NGX_DECLINED) {
        return ngx_http_llm_response_not_found(r, id);
    }

    j.start = body.data;
    j.pos = body.data + body.len;
    j.end = j.pos;
    j.pool = r->pool;
    j.failed = 0;

    return ngx_http_llm_send_json(r, NGX_HTTP_OK, &j);
}


/*
 * POST .../responses/{id}/cancel: vLLM's answer for a response that is not
 * a background one (every stored response here has finished).  The store
 * is every worker's, so the answer is the same from any of them: nothing
 * needs to reach the worker that generates a response.
 */

ngx_int_t
ngx_http_llm_response_cancel(ngx_http_request_t *r, ngx_str_t *id)
{
    u_char     owner[NGX_HTTP_LLM_OWNER_LEN];
    ngx_int_t  rc;
    ngx_str_t  body;

    if (ngx_http_llm_store_owner(r, owner) != NGX_OK) {
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }

    rc = ngx_http_llm_store_response(id, owner, r->pool, &body);

    if (rc == NGX_ERROR) {
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }

    if (rc == NGX_DECLINED) {
        return ngx_http_llm_response_not_found(r, id);
    }

    return ngx_http_llm_send_error(r, NGX_HTTP_BAD_REQUEST,
                                   "invalid_request_error", NULL,
                                   "Cannot cancel a synchronous response.");
}


static ngx_int_t
ngx_http_llm_response_not_found(ngx_http_request_t *r, ngx_str_t *id)
{
    return ngx_http_llm_send_error(r, NGX_HTTP_NOT_FOUND, NULL,
                                   "response_id", "Response with id '%V' "
                                   "not found.", id);
}
