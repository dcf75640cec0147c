
/*
 * ngx_http_llm_chunk.c -- what the streams of chat.completion.chunk and
 * text_completion share: the keys every chunk (and body) starts with, a
 * choice's buffers once its chunk is written, and the end of the stream
 * (the usage chunk, [DONE]).
 */


#include "ngx_http_llm_module.h"


/* the keys every chunk starts with, without the closing brace */

void
ngx_http_llm_chunk_head(ngx_http_llm_json_t *j, ngx_http_llm_ctx_t *ctx,
    const char *object)
{
    ngx_http_llm_json_lit(j, "{\"id\":");
    ngx_http_llm_json_str(j, ctx->id.data, ctx->id.len);
    ngx_http_llm_json_lit(j, ",\"object\":");
    ngx_http_llm_json_cstr(j, object);
    ngx_http_llm_json_lit(j, ",\"created\":");
    ngx_http_llm_json_int(j, ctx->created);
    ngx_http_llm_json_lit(j, ",\"model\":");
    ngx_http_llm_json_str(j, ctx->model.data, ctx->model.len);
}


/* a choice's new output is in a chunk: its buffers start over */

void
ngx_http_llm_chunk_written(ngx_http_llm_seq_t *seq)
{
    seq->text.nelts = 0;
    seq->think.nelts = 0;
    seq->lp.nelts = 0;
    seq->ids.nelts = 0;
    seq->new_ids = 0;
    seq->changed = 0;

    if (seq->finish != LLM_FINISH_NONE) {
        seq->finish_sent = 1;
    }
}


/*
 * After a drain's chunks, once the request finished, the end of the
 * stream: the usage chunk when include_usage (or llm_force_include_usage)
 * asks for it, with the metrics when they are on and null keys dropped
 * (vLLM: exclude_none), then [DONE].  An engine error is reported as an
 * error event before [DONE], as vLLM does.
 */

ngx_int_t
ngx_http_llm_chunk_end(ngx_http_llm_json_t *j, ngx_http_llm_ctx_t *ctx,
    const char *object)
{
    static u_char  msg[] = "Internal server error";

    if (ctx->finish == LLM_FINISH_NONE) {
        return j->failed ? NGX_ERROR : NGX_OK;
    }

    if (ctx->finish == LLM_FINISH_ERROR) {
        ngx_http_llm_json_lit(j, "data: ");
        (void) ngx_http_llm_error_json(j, NGX_HTTP_INTERNAL_SERVER_ERROR,
                                       NULL, NULL, msg, sizeof(msg) - 1);
        ngx_http_llm_json_lit(j, "\n\n");

    } else if (ctx->include_usage) {
        ngx_http_llm_json_lit(j, "data: ");
        ngx_http_llm_chunk_head(j, ctx, object);
        ngx_http_llm_json_lit(j, ",\"choices\":[],\"usage\":");
        (void) ngx_http_llm_usage_json(j, ctx, NGX_HTTP_LLM_USAGE_FINAL);

        /* vLLM: None for several sequences, which exclude_none drops */
        if (ctx->metrics && ctx->n_seqs == 1) {
            ngx_http_llm_json_lit(j, ",\"metrics\":");
            (void) ngx_http_llm_metrics_json(j, ctx, 1);
        }

        ngx_http_llm_json_lit(j, "}\n\n");
    }

    ngx_http_llm_json_lit(j, "data: [DONE]\n\n");

    if (ctx->billing) {
        ngx_http_llm_billing_event(j, ctx);
    }

    return j->failed ? NGX_ERROR : NGX_OK;
}
