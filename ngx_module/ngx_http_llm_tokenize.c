
/*
 * ngx_http_llm_tokenize.c -- POST .../tokenize and .../detokenize, the way
 * vLLM offers them (useful to check a bill: the count is what usage
 * counts).
 *
 *   tokenize     {"prompt": text} (add_special_tokens, default true), or
 *                {"messages": [...]} rendered with the chat template as a
 *                chat request renders it (add_generation_prompt default
 *                true, add_special_tokens default false, tools,
 *                chat_template_kwargs); "return_token_strs": true adds the
 *                vocabulary strings.  Answers {"count","max_model_len",
 *                "tokens","token_strs"}.
 *   detokenize   {"tokens": [ids]} -> {"prompt": text}, special tokens
 *                included (Hugging Face decode, skip_special_tokens=False).
 *
 * Tokenizing and decoding run in the thread pool like a generation
 * request's parsing; the event loop only writes the ids as JSON.  The
 * engine is not involved: no usage, no metrics, "-" in the $llm_*
 * variables.  A text longer than llm_max_model_len is counted all the
 * same (counting long texts is what the endpoint is for).
 */


#include "ngx_http_llm_module.h"


static void ngx_http_llm_tokenize_prompt(ngx_http_llm_job_t *job,
    yajl_val root, yajl_val prompt);


/* the thread pool */

void
ngx_http_llm_tokenize_parse(ngx_http_llm_job_t *job, yajl_val root)
{
    ngx_int_t   rc;
    ngx_uint_t  flag;
    yajl_val    messages, prompt, tools;

    if (ngx_http_llm_job_model(job, root) != NGX_OK) {
        return;
    }

    rc = ngx_http_llm_job_bool(job, root, "return_token_strs", &flag);
    if (rc == NGX_HTTP_LLM_FIELD_INVALID) {
        return;
    }

    job->token_strs = (rc == NGX_HTTP_LLM_FIELD_PRESENT && flag);

    messages = llm_json_get(root, "messages");
    prompt = llm_json_get(root, "prompt");

    if (messages == NULL || YAJL_IS_NULL(messages)) {
        ngx_http_llm_tokenize_prompt(job, root, prompt);
        return;
    }

    if (!YAJL_IS_ARRAY(messages) || messages->u.array.len == 0) {
        ngx_http_llm_job_error(job, NGX_HTTP_BAD_REQUEST, "messages",
                               "`messages` must be a non-empty list of "
                               "messages, got %s",
                               YAJL_IS_ARRAY(messages)
                               ? "an empty list"
                               : ngx_http_llm_json_type(messages));
        return;
    }

    if (ngx_http_llm_chat_options(job, root, &tools) != NGX_OK) {
        return;
    }

    (void) ngx_http_llm_chat_prompt(job, root, messages, tools);
}


static void
ngx_http_llm_tokenize_prompt(ngx_http_llm_job_t *job, yajl_val root,
    yajl_val prompt)
{
    if (prompt == NULL || !YAJL_IS_STRING(prompt)) {
        ngx_http_llm_job_error(job, NGX_HTTP_BAD_REQUEST, "prompt",
                               "`prompt` (a string) or `messages` (a list "
                               "of messages) is required, got %s for "
                               "`prompt`", ngx_http_llm_json_type(prompt));
        return;
    }

    /* as a completions prompt: BOS unless add_special_tokens is false */

    (void) ngx_http_llm_job_tokenize(job, prompt->u.string,
                                     ngx_strlen(prompt->u.string),
                                     !YAJL_IS_FALSE(llm_json_get(root,
                                                    "add_special_tokens")),
                                     "prompt");
}


void
ngx_http_llm_detokenize_parse(ngx_http_llm_job_t *job, yajl_val root)
{
    yajl_val                tokens;
    ngx_http_llm_prompt_t  *p;

    if (ngx_http_llm_job_model(job, root) != NGX_OK) {
        return;
    }

    tokens = llm_json_get(root, "tokens");

    if (tokens == NULL || !YAJL_IS_ARRAY(tokens)) {
        ngx_http_llm_job_error(job, NGX_HTTP_BAD_REQUEST, "tokens",
                               "`tokens` is required and must be a list of "
                               "token ids, got %s",
                               ngx_http_llm_json_type(tokens));
        return;
    }

    p = ngx_http_llm_job_token_ids(job, tokens, "tokens", "tokens");

    if (p != NULL) {
        (void) ngx_http_llm_job_decode(job, p->ids, p->n, 0, &job->text);
    }
}


/* the event loop: the answers */

ngx_int_t
ngx_http_llm_tokenize_send(ngx_http_request_t *r, ngx_http_llm_ctx_t *ctx)
{
    int                     i;
    const char             *s;
    ngx_http_llm_job_t     *job;
    ngx_http_llm_json_t     j;
    ngx_http_llm_prompt_t  *p;
    const llm_tokenizer    *tok;

    job = ctx->job;
    p = job->prompts.elts;
    tok = llm_model_tokenizer(ngx_http_llm_worker.model);

    ngx_http_llm_json_init(&j, r->pool,
                           128 + p->n * (job->token_strs ? 32 : 8));

    ngx_http_llm_json_lit(&j, "{\"count\":");
    ngx_http_llm_json_int(&j, p->n);
    ngx_http_llm_json_lit(&j, ",\"max_model_len\":");
    ngx_http_llm_json_int(&j, ngx_http_llm_worker.max_model_len);
    ngx_http_llm_json_lit(&j, ",\"tokens\":[");

    for (i = 0; i < p->n; i++) {
        if (i) {
            ngx_http_llm_json_lit(&j, ",");
        }

        ngx_http_llm_json_int(&j, p->ids[i]);
    }

    ngx_http_llm_json_lit(&j, "],\"token_strs\":");

    if (job->token_strs) {
        ngx_http_llm_json_lit(&j, "[");

        for (i = 0; i < p->n; i++) {
            if (i) {
                ngx_http_llm_json_lit(&j, ",");
            }

            /* convert_ids_to_tokens(): the vocabulary's own string */
            s = llm_tokenizer_token_str(tok, p->ids[i]);
            ngx_http_llm_json_cstr(&j, s ? s : "");
        }

        ngx_http_llm_json_lit(&j, "]");

    } else {
        ngx_http_llm_json_lit(&j, "null");
    }

    ngx_http_llm_json_lit(&j, "}");

    return ngx_http_llm_send_json(r, NGX_HTTP_OK, &j);
}


ngx_int_t
ngx_http_llm_detokenize_send(ngx_http_request_t *r, ngx_http_llm_ctx_t *ctx)
{
    ngx_str_t            *text;
    ngx_http_llm_json_t   j;

    text = &ctx->job->text;

    ngx_http_llm_json_init(&j, r->pool, 64 + text->len * 2);
    ngx_http_llm_json_lit(&j, "{\"prompt\":");
    ngx_http_llm_json_str(&j, text->data, text->len);
    ngx_http_llm_json_lit(&j, "}");

    return ngx_http_llm_send_json(r, NGX_HTTP_OK, &j);
}
