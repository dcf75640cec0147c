
/*
 * ngx_http_llm_responses_calls.c -- the Responses API's function calls:
 * when a tool parser reads the answer (llm_tool_call_parser with "auto",
 * or tool_choice "required" or a named function: ngx_http_llm_tools.c),
 * the output is a message item with the content before the calls (when
 * there is some) and one function_call item per call,
 *
 *   {"arguments": "{...}", "call_id": "call_...", "name": "f",
 *    "type": "function_call", "id": "fc_...", "status": "completed"}
 *
 * (vLLM's ResponseFunctionToolCall; call_id is what the next turn's
 * function_call_output names).  Streamed, each item is added when it
 * starts and done when the next starts or the answer ends:
 *
 *   response.output_item.added          (the call: its name, "" arguments)
 *   response.function_call_arguments.delta ...
 *   response.function_call_arguments.done, response.output_item.done
 *
 * and response.completed's response holds the items as they were
 * streamed.  docs/api.md, "Responses API".
 */


#include "ngx_http_llm_responses.h"


static ngx_http_llm_resp_items_t *ngx_http_llm_responses_items(
    ngx_http_llm_ctx_t *ctx);
static ngx_int_t ngx_http_llm_responses_call_added(ngx_http_llm_json_t *j,
    ngx_http_llm_ctx_t *ctx, ngx_http_llm_tool_delta_t *d);
static void ngx_http_llm_responses_call_done(ngx_http_llm_json_t *j,
    ngx_http_llm_ctx_t *ctx, ngx_http_llm_resp_call_t *c);
static void ngx_http_llm_responses_call_item(ngx_http_llm_json_t *j,
    ngx_str_t *id, ngx_str_t *call_id, ngx_str_t *name, u_char *args,
    size_t len, ngx_uint_t done);
static void ngx_http_llm_responses_close(ngx_http_llm_json_t *j,
    ngx_http_llm_ctx_t *ctx);


ngx_int_t
ngx_http_llm_responses_calls_chunk(ngx_http_llm_ctx_t *ctx,
    ngx_http_llm_json_t *j)
{
    u_char                     *p;
    ngx_str_t                   content;
    ngx_uint_t                  i, n;
    ngx_http_llm_seq_t         *seq;
    ngx_http_llm_resp_call_t   *c;
    ngx_http_llm_tool_delta_t  *d;
    ngx_http_llm_resp_items_t  *it;

    seq = &ctx->seqs[0];

    it = ngx_http_llm_responses_items(ctx);
    if (it == NULL || ngx_http_llm_tools_feed(seq, seq->text_sent) != NGX_OK) {
        return NGX_ERROR;
    }

    ngx_http_llm_tools_take(seq, &content, &d, &n);

    /* content after a call: only a parse failure gives it; the stream
     * cannot take the call back, and leaves the text out */

    if (content.len && it->calls.nelts == 0) {
        if (!it->msg_added) {
            it->msg_added = 1;
            it->open = NGX_HTTP_LLM_ITEM_MESSAGE;
            it->msg_index = ctx->reasoning_item + it->n++;
            ctx->item_started = 1;
            ngx_http_llm_responses_msg_added(j, ctx, it->msg_index);
        }

        p = ngx_array_push_n(&it->text, content.len);
        if (p == NULL) {
            return NGX_ERROR;
        }

        ngx_memcpy(p, content.data, content.len);
        ngx_http_llm_responses_msg_delta(j, ctx, it->msg_index,
                                         content.data, content.len);
    }

    for (i = 0; i < n; i++) {
        if (d[i].start) {
            ngx_http_llm_responses_close(j, ctx);

            if (ngx_http_llm_responses_call_added(j, ctx, &d[i]) != NGX_OK) {
                return NGX_ERROR;
            }
        }

        if ((ngx_uint_t) d[i].index >= it->calls.nelts
            || d[i].args.nelts == 0)
        {
            continue;
        }

        c = (ngx_http_llm_resp_call_t *) it->calls.elts + d[i].index;

        p = ngx_array_push_n(&c->args, d[i].args.nelts);
        if (p == NULL) {
            return NGX_ERROR;
        }

        ngx_memcpy(p, d[i].args.elts, d[i].args.nelts);

        ngx_http_llm_responses_event(j, ctx,
                                     "response.function_call_arguments.delta");
        ngx_http_llm_json_lit(j, "{\"delta\":");
        ngx_http_llm_json_str(j, d[i].args.elts, d[i].args.nelts);
        ngx_http_llm_json_lit(j, ",\"item_id\":");
        ngx_http_llm_json_str(j, c->id.data, c->id.len);
        ngx_http_llm_json_lit(j, ",\"output_index\":");
        ngx_http_llm_json_int(j, c->output_index);
        ngx_http_llm_responses_event_end(j, ctx,
                                     "response.function_call_arguments.delta");
    }

    if (ctx->finish != LLM_FINISH_NONE) {
        ngx_http_llm_responses_close(j, ctx);
    }

    return j->failed ? NGX_ERROR : NGX_OK;
}


static ngx_http_llm_resp_items_t *
ngx_http_llm_responses_items(ngx_http_llm_ctx_t *ctx)
{
    ngx_pool_t                 *pool;
    ngx_http_llm_resp_items_t  *it;

    if (ctx->items) {
        return ctx->items;
    }

    pool = ctx->request->pool;

    it = ngx_pcalloc(pool, sizeof(ngx_http_llm_resp_items_t));
    if (it == NULL
        || ngx_array_init(&it->calls, pool, 2,
                          sizeof(ngx_http_llm_resp_call_t))
           != NGX_OK
        || ngx_array_init(&it->text, pool, 64, 1) != NGX_OK)
    {
        return NULL;
    }

    ctx->items = it;

    return it;
}


/* the open item is done: the message, or the last call */

static void
ngx_http_llm_responses_close(ngx_http_llm_json_t *j, ngx_http_llm_ctx_t *ctx)
{
    ngx_http_llm_resp_items_t  *it = ctx->items;

    if (it->open == NGX_HTTP_LLM_ITEM_MESSAGE) {
        ngx_http_llm_responses_msg_done(j, ctx, it->msg_index);

    } else if (it->open == NGX_HTTP_LLM_ITEM_CALL) {
        ngx_http_llm_responses_call_done(j, ctx,
                                         (ngx_http_llm_resp_call_t *)
                                         it->calls.elts + it->calls.nelts - 1);
    }

    it->open = NGX_HTTP_LLM_ITEM_NONE;
}


static ngx_int_t
ngx_http_llm_responses_call_added(ngx_http_llm_json_t *j,
    ngx_http_llm_ctx_t *ctx, ngx_http_llm_tool_delta_t *d)
{
    ngx_pool_t                 *pool;
    ngx_http_llm_resp_call_t   *c;
    ngx_http_llm_resp_items_t  *it = ctx->items;

    pool = ctx->request->pool;

    c = ngx_array_push(&it->calls);
    if (c == NULL
        || ngx_http_llm_random_id(pool, &c->id, "fc_") != NGX_OK
        || ngx_array_init(&c->args, pool, 64, 1) != NGX_OK)
    {
        return NGX_ERROR;
    }

    c->name = d->name;
    c->output_index = ctx->reasoning_item + it->n++;
    it->open = NGX_HTTP_LLM_ITEM_CALL;

    ngx_http_llm_responses_event(j, ctx, "response.output_item.added");
    ngx_http_llm_json_lit(j, "{\"item\":");
    ngx_http_llm_responses_call_item(j, &c->id,
                                     ngx_http_llm_tools_call_id(&ctx->seqs[0],
                                                                d->index),
                                     &c->name, NULL, 0, 0);
    ngx_http_llm_json_lit(j, ",\"output_index\":");
    ngx_http_llm_json_int(j, c->output_index);
    ngx_http_llm_responses_event_end(j, ctx, "response.output_item.added");

    return NGX_OK;
}


static void
ngx_http_llm_responses_call_done(ngx_http_llm_json_t *j,
    ngx_http_llm_ctx_t *ctx, ngx_http_llm_resp_call_t *c)
{
    ngx_uint_t  i;

    i = c - (ngx_http_llm_resp_call_t *) ctx->items->calls.elts;

    ngx_http_llm_responses_event(j, ctx,
                                 "response.function_call_arguments.done");
    ngx_http_llm_json_lit(j, "{\"arguments\":");
    ngx_http_llm_json_str(j, c->args.elts, c->args.nelts);
    ngx_http_llm_json_lit(j, ",\"item_id\":");
    ngx_http_llm_json_str(j, c->id.data, c->id.len);
    ngx_http_llm_json_lit(j, ",\"name\":");
    ngx_http_llm_json_str(j, c->name.data, c->name.len);
    ngx_http_llm_json_lit(j, ",\"output_index\":");
    ngx_http_llm_json_int(j, c->output_index);
    ngx_http_llm_responses_event_end(j, ctx,
                                     "response.function_call_arguments.done");

    ngx_http_llm_responses_event(j, ctx, "response.output_item.done");
    ngx_http_llm_json_lit(j, "{\"item\":");
    ngx_http_llm_responses_call_item(j, &c->id,
                                     ngx_http_llm_tools_call_id(&ctx->seqs[0],
                                                                i),
                                     &c->name, c->args.elts, c->args.nelts, 1);
    ngx_http_llm_json_lit(j, ",\"output_index\":");
    ngx_http_llm_json_int(j, c->output_index);
    ngx_http_llm_responses_event_end(j, ctx, "response.output_item.done");
}


/* vLLM's ResponseFunctionToolCall, its key order */

static void
ngx_http_llm_responses_call_item(ngx_http_llm_json_t *j, ngx_str_t *id,
    ngx_str_t *call_id, ngx_str_t *name, u_char *args, size_t len,
    ngx_uint_t done)
{
    ngx_http_llm_json_lit(j, "{\"arguments\":");
    ngx_http_llm_json_str(j, args, len);
    ngx_http_llm_json_lit(j, ",\"call_id\":");
    ngx_http_llm_json_str(j, call_id->data, call_id->len);
    ngx_http_llm_json_lit(j, ",\"name\":");
    ngx_http_llm_json_str(j, name->data, name->len);
    ngx_http_llm_json_lit(j, ",\"type\":\"function_call\",\"id\":");
    ngx_http_llm_json_str(j, id->data, id->len);
    ngx_http_llm_json_lit(j, ",\"status\":");

    if (done) {
        ngx_http_llm_json_lit(j, "\"completed\"}");

    } else {
        ngx_http_llm_json_lit(j, "\"in_progress\"}");
    }
}


/*
 * The finished response's output: a stream's items as streamed; a body's
 * from the parser's result (the message when there is content, then the
 * calls); without a parser the message when there is text (vLLM's rule).
 */

void
ngx_http_llm_responses_output(ngx_http_llm_json_t *j, ngx_http_llm_ctx_t *ctx)
{
    ngx_str_t                   text, id, name, args;
    ngx_uint_t                  i, n, k;
    ngx_http_llm_seq_t         *seq;
    ngx_http_llm_resp_call_t   *c;
    ngx_http_llm_resp_items_t  *it;

    seq = &ctx->seqs[0];
    it = ctx->items;
    k = ngx_http_llm_responses_reasoning_output(j, ctx);

    if (it) {
        if (it->msg_added) {
            if (k) {
                ngx_http_llm_json_lit(j, ",");
            }

            ngx_http_llm_responses_message(j, ctx, 1);
            k++;
        }

        c = it->calls.elts;

        for (i = 0; i < it->calls.nelts; i++, k++) {
            if (k) {
                ngx_http_llm_json_lit(j, ",");
            }

            ngx_http_llm_responses_call_item(j, &c[i].id,
                                             ngx_http_llm_tools_call_id(seq, i),
                                             &c[i].name, c[i].args.elts,
                                             c[i].args.nelts, 1);
        }

        return;
    }

    ngx_http_llm_responses_answer(ctx, &text);

    if (text.len) {
        if (k) {
            ngx_http_llm_json_lit(j, ",");
        }

        ngx_http_llm_responses_message(j, ctx, 1);
        k++;
    }

    n = seq->tools ? ngx_http_llm_tools_n_calls(seq) : 0;

    for (i = 0; i < n; i++, k++) {
        if (ngx_http_llm_random_id(ctx->request->pool, &id, "fc_") != NGX_OK) {
            j->failed = 1;
            return;
        }

        ngx_http_llm_tools_call(seq, i, &name, &args);
        if (k) {
            ngx_http_llm_json_lit(j, ",");
        }

        ngx_http_llm_responses_call_item(j, &id,
                                         ngx_http_llm_tools_call_id(seq, i),
                                         &name, args.data, args.len, 1);
    }
}


/* the calls of the answer, for the store */

ngx_uint_t
ngx_http_llm_responses_n_calls(ngx_http_llm_ctx_t *ctx)
{
    if (ctx->items) {
        return ctx->items->calls.nelts;
    }

    return ctx->seqs[0].tools ? ngx_http_llm_tools_n_calls(&ctx->seqs[0]) : 0;
}
