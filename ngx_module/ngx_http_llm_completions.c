
/*
 * ngx_http_llm_completions.c -- POST .../completions.
 *
 * One prompt per request: a string, a list with one string, a list of
 * token ids, or a list with one list of ids.  Several prompts answer 400
 * until the engine runs them as one request (their metrics would then be
 * null, as in vLLM).  Stream chunks are dumped with every field (vLLM:
 * exclude_unset=False), so they carry "usage": null.
 */


#include "ngx_http_llm_module.h"


static ngx_int_t ngx_http_llm_completions_ids(ngx_http_llm_job_t *job,
    yajl_val list);
static ngx_int_t ngx_http_llm_completions_text(ngx_http_llm_job_t *job,
    yajl_val root, const char *text);
static ngx_int_t ngx_http_llm_completions_echo(ngx_http_llm_job_t *job,
    const char *text, size_t len);
static void ngx_http_llm_completions_text_json(ngx_http_llm_json_t *j,
    ngx_http_llm_ctx_t *ctx);


void
ngx_http_llm_completions_parse(ngx_http_llm_job_t *job, yajl_val root)
{
    char      *text;
    size_t     len;
    yajl_val   prompt, first, v;

    v = ngx_http_llm_json_get(root, "suffix");

    if (v && !YAJL_IS_NULL(v)) {
        ngx_http_llm_job_error(job, NGX_HTTP_BAD_REQUEST, "suffix",
                               "suffix is not currently supported");
        return;
    }

    job->echo_requested = YAJL_IS_TRUE(ngx_http_llm_json_get(root, "echo"));

    if (job->echo_only && !job->echo_requested) {
        ngx_http_llm_job_error(job, NGX_HTTP_BAD_REQUEST, "max_tokens",
                               "max_tokens must be at least 1, got 0.");
        return;
    }

    prompt = ngx_http_llm_json_get(root, "prompt");

    if (prompt == NULL || YAJL_IS_NULL(prompt)
        || (YAJL_IS_STRING(prompt) && prompt->u.string[0] == '\0')
        || (YAJL_IS_ARRAY(prompt) && prompt->u.array.len == 0))
    {
        ngx_http_llm_job_error(job, NGX_HTTP_BAD_REQUEST, "prompt",
                               "Either prompt or prompt_embeds must be "
                               "provided and non-empty.");
        return;
    }

    if (YAJL_IS_STRING(prompt)) {
        (void) ngx_http_llm_completions_text(job, root, prompt->u.string);
        goto done;
    }

    if (!YAJL_IS_ARRAY(prompt)) {
        ngx_http_llm_job_error(job, NGX_HTTP_BAD_REQUEST, "prompt",
                               "`prompt` must be a string, a list of "
                               "strings or a list of token ids, got %s",
                               ngx_http_llm_json_type(prompt));
        return;
    }

    first = prompt->u.array.values[0];

    if (YAJL_IS_NUMBER(first)) {
        (void) ngx_http_llm_completions_ids(job, prompt);
        goto done;
    }

    if (prompt->u.array.len > 1) {
        ngx_http_llm_job_error(job, NGX_HTTP_BAD_REQUEST, "prompt",
                               "%uz prompts in one request: only one prompt "
                               "per request is supported yet",
                               prompt->u.array.len);
        return;
    }

    if (YAJL_IS_STRING(first) && first->u.string[0]) {
        (void) ngx_http_llm_completions_text(job, root, first->u.string);
        goto done;
    }

    if (YAJL_IS_ARRAY(first) && first->u.array.len) {
        (void) ngx_http_llm_completions_ids(job, first);
        goto done;
    }

    ngx_http_llm_job_error(job, NGX_HTTP_BAD_REQUEST, "prompt",
                           "`prompt` must be a non-empty string, a list of "
                           "strings or a list of token ids");
    return;

done:

    if (job->status || !job->echo_requested || job->echo) {
        return;
    }

    /* echo of a token-id prompt: its text */
    text = llm_tokenizer_decode(llm_model_tokenizer(job->model), job->prompt,
                                job->n_prompt, 1, &len);
    if (text) {
        (void) ngx_http_llm_completions_echo(job, text, len);
        free(text);
    }
}


static ngx_int_t
ngx_http_llm_completions_ids(ngx_http_llm_job_t *job, yajl_val list)
{
    int        vocab;
    size_t     i, n;
    yajl_val   v;

    n = list->u.array.len;
    vocab = llm_model_vocab_size(job->model);

    job->prompt = malloc(n * sizeof(int32_t));
    if (job->prompt == NULL) {
        ngx_http_llm_job_error(job, NGX_HTTP_INTERNAL_SERVER_ERROR, NULL,
                               "out of memory");
        return NGX_ERROR;
    }

    for (i = 0; i < n; i++) {
        v = list->u.array.values[i];

        if (!YAJL_IS_INTEGER(v)) {
            ngx_http_llm_job_error(job, NGX_HTTP_BAD_REQUEST, "prompt",
                                   "prompt[%uz] must be a token id, got %s",
                                   i, ngx_http_llm_json_type(v));
            return NGX_ERROR;
        }

        if (YAJL_GET_INTEGER(v) < 0 || YAJL_GET_INTEGER(v) >= vocab) {
            ngx_http_llm_job_error(job, NGX_HTTP_BAD_REQUEST, "prompt",
                                   "Token id %L is out of vocabulary "
                                   "(size %d)", YAJL_GET_INTEGER(v), vocab);
            return NGX_ERROR;
        }

        job->prompt[i] = (int32_t) YAJL_GET_INTEGER(v);
    }

    job->n_prompt = (int) n;

    return NGX_OK;
}


static ngx_int_t
ngx_http_llm_completions_text(ngx_http_llm_job_t *job, yajl_val root,
    const char *text)
{
    int         n;
    char        err[LLM_ERR_LEN];
    size_t      len;
    yajl_val    v;
    int32_t    *ids;

    len = ngx_strlen(text);

    /* completions add BOS unless add_special_tokens is false */
    v = ngx_http_llm_json_get(root, "add_special_tokens");

    err[0] = '\0';
    n = llm_tokenizer_encode(llm_model_tokenizer(job->model), text, len,
                             !YAJL_IS_FALSE(v), &ids, err);
    if (n < 0) {
        ngx_http_llm_job_error(job, NGX_HTTP_BAD_REQUEST, "prompt", "%s",
                               err[0] ? err : "tokenizing the prompt failed");
        return NGX_ERROR;
    }

    job->prompt = ids;
    job->n_prompt = n;

    if (job->echo_requested) {
        return ngx_http_llm_completions_echo(job, text, len);
    }

    return NGX_OK;
}


static ngx_int_t
ngx_http_llm_completions_echo(ngx_http_llm_job_t *job, const char *text,
    size_t len)
{
    job->echo = malloc(len + 1);
    if (job->echo == NULL) {
        ngx_http_llm_job_error(job, NGX_HTTP_INTERNAL_SERVER_ERROR, NULL,
                               "out of memory");
        return NGX_ERROR;
    }

    ngx_memcpy(job->echo, text, len);
    job->echo[len] = '\0';
    job->echo_len = len;

    return NGX_OK;
}


/* rendering, on the event loop */

ngx_int_t
ngx_http_llm_completions_chunk(ngx_http_llm_ctx_t *ctx,
    ngx_http_llm_json_t *j)
{
    static const char  object[] = "text_completion";

    if (ctx->finish != LLM_FINISH_ERROR
        && (ctx->text_len || ctx->new_ids || ctx->finish != LLM_FINISH_NONE))
    {
        ngx_http_llm_json_lit(j, "data: ");
        ngx_http_llm_chunk_head(j, ctx, object);
        ngx_http_llm_json_lit(j, ",\"choices\":[{\"index\":0,\"text\":");
        ngx_http_llm_completions_text_json(j, ctx);
        ngx_http_llm_json_lit(j, ",\"logprobs\":");

        if (ctx->job->logprobs >= 0) {
            ngx_http_llm_logprobs_completions(j, ctx);

        } else {
            ngx_http_llm_json_lit(j, "null");
        }

        ngx_http_llm_json_lit(j, ",\"finish_reason\":");

        if (ctx->finish == LLM_FINISH_NONE) {
            ngx_http_llm_json_lit(j, "null");

        } else {
            ngx_http_llm_json_cstr(j, llm_finish_reason_str(ctx->finish));
        }

        ngx_http_llm_json_lit(j, ",\"stop_reason\":");
        ngx_http_llm_stop_reason(j, ctx);
        ngx_http_llm_json_lit(j, ",\"prompt_token_ids\":null,"
                              "\"token_ids\":null}],\"usage\":");

        if (ctx->continuous_usage) {
            (void) ngx_http_llm_usage_json(j, ctx, 0);

        } else {
            ngx_http_llm_json_lit(j, "null");
        }

        ngx_http_llm_json_lit(j, "}\n\n");
    }

    if (ctx->finish != LLM_FINISH_NONE) {
        return ngx_http_llm_sse_tail(j, ctx, object);
    }

    return j->failed ? NGX_ERROR : NGX_OK;
}


ngx_int_t
ngx_http_llm_completions_body(ngx_http_llm_ctx_t *ctx, ngx_http_llm_json_t *j)
{
    ngx_http_llm_chunk_head(j, ctx, "text_completion");

    ngx_http_llm_json_lit(j, ",\"choices\":[{\"index\":0,\"text\":");
    ngx_http_llm_completions_text_json(j, ctx);
    ngx_http_llm_json_lit(j, ",\"logprobs\":");

    if (ctx->job->logprobs >= 0) {
        ngx_http_llm_logprobs_completions(j, ctx);

    } else {
        ngx_http_llm_json_lit(j, "null");
    }

    ngx_http_llm_json_lit(j, ",\"finish_reason\":");
    ngx_http_llm_json_cstr(j, llm_finish_reason_str(ctx->finish));
    ngx_http_llm_json_lit(j, ",\"stop_reason\":");
    ngx_http_llm_stop_reason(j, ctx);
    ngx_http_llm_json_lit(j, ",\"token_ids\":null,\"prompt_logprobs\":null,"
                          "\"prompt_token_ids\":null}],"
                          "\"service_tier\":null,"
                          "\"system_fingerprint\":null,\"usage\":");
    (void) ngx_http_llm_usage_json(j, ctx, 1);
    ngx_http_llm_json_lit(j, ",\"kv_transfer_params\":null,\"metrics\":");

    if (ctx->metrics) {
        (void) ngx_http_llm_metrics_json(j, &ctx->stats, 0);

    } else {
        ngx_http_llm_json_lit(j, "null");
    }

    ngx_http_llm_json_lit(j, "}");

    return j->failed ? NGX_ERROR : NGX_OK;
}


/*
 * The choice's text: the echoed prompt goes in front of the first text
 * (vLLM: "echo the prompt and first token"); with max_tokens 0 only the
 * prompt is returned.
 */

static void
ngx_http_llm_completions_text_json(ngx_http_llm_json_t *j,
    ngx_http_llm_ctx_t *ctx)
{
    u_char              *p;
    size_t               len;
    ngx_http_llm_job_t  *job;

    job = ctx->job;
    len = job->echo_only ? 0 : ctx->text_len;

    if (job->echo == NULL || ctx->echoed) {
        ngx_http_llm_json_str(j, ctx->text, len);
        return;
    }

    ctx->echoed = 1;

    p = ngx_pnalloc(ctx->request->pool, job->echo_len + len);
    if (p == NULL) {
        j->failed = 1;
        return;
    }

    ngx_memcpy(p, job->echo, job->echo_len);
    ngx_memcpy(p + job->echo_len, ctx->text, len);

    ngx_http_llm_json_str(j, p, job->echo_len + len);
}
