
/*
 * ngx_http_llm_completions.c -- POST .../completions.
 *
 * The prompt is a string, a list of strings, a list of token ids or a list
 * of lists of ids: one prompt or several.  Each prompt runs n sequences;
 * choice i of prompt p has index p * n + i (vLLM's numbering), usage counts
 * every prompt once and every sequence's tokens, and the metrics object is
 * null unless there is exactly one sequence.  Stream chunks are dumped with
 * every field (vLLM: exclude_unset=False), so they carry "usage": null.
 */


#include "ngx_http_llm_module.h"


static ngx_int_t ngx_http_llm_completions_prompt(ngx_http_llm_job_t *job,
    yajl_val root, yajl_val v, ngx_uint_t index, ngx_uint_t list);
static ngx_int_t ngx_http_llm_completions_ids(ngx_http_llm_job_t *job,
    yajl_val list, ngx_uint_t index, ngx_uint_t nested);
static ngx_int_t ngx_http_llm_completions_text(ngx_http_llm_job_t *job,
    yajl_val root, const char *text);
static ngx_int_t ngx_http_llm_completions_echo(ngx_http_llm_job_t *job,
    ngx_http_llm_prompt_t *p, const char *text, size_t len);
static void ngx_http_llm_completions_choice(ngx_http_llm_json_t *j,
    ngx_http_llm_seq_t *seq, ngx_uint_t stream);
static void ngx_http_llm_completions_text_json(ngx_http_llm_json_t *j,
    ngx_http_llm_seq_t *seq);


void
ngx_http_llm_completions_parse(ngx_http_llm_job_t *job, yajl_val root)
{
    char       *text;
    size_t      i, len;
    yajl_val    prompt, first, v;

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

    /*
     * vLLM: echo with logprobs shows the prompt's tokens too, with the
     * logprobs of prompt_logprobs, or of `logprobs` when that is unset.
     */

    if (job->echo_requested && job->logprobs >= 0
        && job->sp.prompt_logprobs < 0)
    {
        job->sp.prompt_logprobs = job->logprobs;
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

    if (!YAJL_IS_STRING(prompt) && !YAJL_IS_ARRAY(prompt)) {
        ngx_http_llm_job_error(job, NGX_HTTP_BAD_REQUEST, "prompt",
                               "`prompt` must be a string, a list of "
                               "strings, a list of token ids or a list of "
                               "lists of token ids, got %s",
                               ngx_http_llm_json_type(prompt));
        return;
    }

    first = YAJL_IS_ARRAY(prompt) ? prompt->u.array.values[0] : NULL;

    if (YAJL_IS_STRING(prompt) || YAJL_IS_NUMBER(first)) {
        /* one prompt: a string, or a list of token ids */
        if (ngx_http_llm_completions_prompt(job, root, prompt, 0, 0)
            != NGX_OK)
        {
            return;
        }

    } else {
        for (i = 0; i < prompt->u.array.len; i++) {
            if (ngx_http_llm_completions_prompt(job, root,
                                                prompt->u.array.values[i], i,
                                                1)
                != NGX_OK)
            {
                return;
            }
        }
    }

    if (!job->echo_requested) {
        return;
    }

    /* echo of a token-id prompt: its text */

    for (i = 0; i < job->n_prompts; i++) {
        if (job->prompts[i].echo) {
            continue;
        }

        text = llm_tokenizer_decode(llm_model_tokenizer(job->model),
                                    job->prompts[i].ids,
                                    job->prompts[i].n, 1, &len);
        if (text == NULL) {
            ngx_http_llm_job_error(job, NGX_HTTP_INTERNAL_SERVER_ERROR, NULL,
                                   "out of memory");
            return;
        }

        (void) ngx_http_llm_completions_echo(job, &job->prompts[i], text,
                                             len);
        free(text);
    }
}


/* one prompt; list: it is an element of the list of prompts */

static ngx_int_t
ngx_http_llm_completions_prompt(ngx_http_llm_job_t *job, yajl_val root,
    yajl_val v, ngx_uint_t index, ngx_uint_t list)
{
    if (YAJL_IS_STRING(v)) {
        if (v->u.string[0] == '\0') {
            ngx_http_llm_job_error(job, NGX_HTTP_BAD_REQUEST, "prompt",
                                   "prompt[%ui] is empty: every prompt "
                                   "needs at least one character", index);
            return NGX_ERROR;
        }

        return ngx_http_llm_completions_text(job, root, v->u.string);
    }

    if (YAJL_IS_ARRAY(v) && v->u.array.len) {
        return ngx_http_llm_completions_ids(job, v, index, list);
    }

    ngx_http_llm_job_error(job, NGX_HTTP_BAD_REQUEST, "prompt",
                           "prompt[%ui] must be a non-empty string or a "
                           "non-empty list of token ids, got %s", index,
                           YAJL_IS_ARRAY(v) ? "an empty list"
                                            : ngx_http_llm_json_type(v));
    return NGX_ERROR;
}


static ngx_int_t
ngx_http_llm_completions_ids(ngx_http_llm_job_t *job, yajl_val list,
    ngx_uint_t index, ngx_uint_t nested)
{
    int        vocab;
    size_t     i, n;
    int32_t   *ids;
    yajl_val   v;

    n = list->u.array.len;
    vocab = llm_model_vocab_size(job->model);

    ids = malloc(n * sizeof(int32_t));
    if (ids == NULL) {
        ngx_http_llm_job_error(job, NGX_HTTP_INTERNAL_SERVER_ERROR, NULL,
                               "out of memory");
        return NGX_ERROR;
    }

    for (i = 0; i < n; i++) {
        v = list->u.array.values[i];

        if (!YAJL_IS_INTEGER(v)) {
            free(ids);

            if (nested) {
                ngx_http_llm_job_error(job, NGX_HTTP_BAD_REQUEST, "prompt",
                                       "prompt[%ui][%uz] must be a token id, "
                                       "got %s", index, i,
                                       ngx_http_llm_json_type(v));
            } else {
                ngx_http_llm_job_error(job, NGX_HTTP_BAD_REQUEST, "prompt",
                                       "prompt[%uz] must be a token id, got "
                                       "%s", i, ngx_http_llm_json_type(v));
            }

            return NGX_ERROR;
        }

        if (YAJL_GET_INTEGER(v) < 0 || YAJL_GET_INTEGER(v) >= vocab) {
            free(ids);
            ngx_http_llm_job_error(job, NGX_HTTP_BAD_REQUEST, "prompt",
                                   "Token id %L is out of vocabulary "
                                   "(size %d)", YAJL_GET_INTEGER(v), vocab);
            return NGX_ERROR;
        }

        ids[i] = (int32_t) YAJL_GET_INTEGER(v);
    }

    return ngx_http_llm_job_add_prompt(job, ids, (int) n) ? NGX_OK
                                                          : NGX_ERROR;
}


static ngx_int_t
ngx_http_llm_completions_text(ngx_http_llm_job_t *job, yajl_val root,
    const char *text)
{
    int                     n;
    char                    err[LLM_ERR_LEN];
    size_t                  len;
    int32_t                *ids;
    yajl_val                v;
    ngx_http_llm_prompt_t  *p;

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

    p = ngx_http_llm_job_add_prompt(job, ids, n);
    if (p == NULL) {
        return NGX_ERROR;
    }

    if (job->echo_requested) {
        return ngx_http_llm_completions_echo(job, p, text, len);
    }

    return NGX_OK;
}


static ngx_int_t
ngx_http_llm_completions_echo(ngx_http_llm_job_t *job,
    ngx_http_llm_prompt_t *p, const char *text, size_t len)
{
    p->echo = malloc(len + 1);
    if (p->echo == NULL) {
        ngx_http_llm_job_error(job, NGX_HTTP_INTERNAL_SERVER_ERROR, NULL,
                               "out of memory");
        return NGX_ERROR;
    }

    ngx_memcpy(p->echo, text, len);
    p->echo[len] = '\0';
    p->echo_len = len;

    return NGX_OK;
}


/* rendering, on the event loop */

ngx_int_t
ngx_http_llm_completions_chunk(ngx_http_llm_ctx_t *ctx,
    ngx_http_llm_json_t *j)
{
    ngx_uint_t           i;
    ngx_http_llm_seq_t  *seq;

    static const char  object[] = "text_completion";

    for (i = 0; ctx->finish != LLM_FINISH_ERROR && i < ctx->n_seqs; i++) {
        seq = &ctx->seqs[i];

        if (!seq->changed || seq->finish_sent) {
            continue;
        }

        ngx_http_llm_json_lit(j, "data: ");
        ngx_http_llm_chunk_head(j, ctx, object);
        ngx_http_llm_json_lit(j, ",\"choices\":[");
        ngx_http_llm_completions_choice(j, seq, 1);
        ngx_http_llm_json_lit(j, "],\"usage\":");

        if (ctx->continuous_usage) {
            ngx_http_llm_usage_seq_json(j, seq);

        } else {
            ngx_http_llm_json_lit(j, "null");
        }

        ngx_http_llm_json_lit(j, "}\n\n");

        ngx_http_llm_seq_written(seq);
    }

    if (ctx->finish != LLM_FINISH_NONE) {
        return ngx_http_llm_sse_tail(j, ctx, object);
    }

    return j->failed ? NGX_ERROR : NGX_OK;
}


ngx_int_t
ngx_http_llm_completions_body(ngx_http_llm_ctx_t *ctx, ngx_http_llm_json_t *j)
{
    ngx_uint_t  i;

    ngx_http_llm_chunk_head(j, ctx, "text_completion");
    ngx_http_llm_json_lit(j, ",\"choices\":[");

    for (i = 0; i < ctx->n_seqs; i++) {
        if (i) {
            ngx_http_llm_json_lit(j, ",");
        }

        ngx_http_llm_completions_choice(j, &ctx->seqs[i], 0);
    }

    ngx_http_llm_json_lit(j, "],\"service_tier\":null,"
                          "\"system_fingerprint\":null,\"usage\":");
    (void) ngx_http_llm_usage_json(j, ctx, NGX_HTTP_LLM_USAGE_BODY);
    ngx_http_llm_json_lit(j, ",\"kv_transfer_params\":null,\"metrics\":");
    ngx_http_llm_metrics_body(j, ctx);
    ngx_http_llm_json_lit(j, "}");

    return j->failed ? NGX_ERROR : NGX_OK;
}


/* a choice in vLLM's key order: chunks and bodies order them differently */

static void
ngx_http_llm_completions_choice(ngx_http_llm_json_t *j,
    ngx_http_llm_seq_t *seq, ngx_uint_t stream)
{
    ngx_uint_t           echo;
    ngx_http_llm_job_t  *job;

    /* the choice's first text echoes the prompt: so do its logprobs */
    echo = (seq->prompt->echo != NULL && !seq->echoed);

    ngx_http_llm_json_lit(j, "{\"index\":");
    ngx_http_llm_json_int(j, seq->index);
    ngx_http_llm_json_lit(j, ",\"text\":");
    ngx_http_llm_completions_text_json(j, seq);
    ngx_http_llm_json_lit(j, ",\"logprobs\":");

    if (seq->ctx->job->logprobs >= 0) {
        ngx_http_llm_logprobs_completions(j, seq, echo);

    } else {
        ngx_http_llm_json_lit(j, "null");
    }

    ngx_http_llm_json_lit(j, ",\"finish_reason\":");

    if (seq->finish == LLM_FINISH_NONE) {
        ngx_http_llm_json_lit(j, "null");

    } else {
        ngx_http_llm_json_cstr(j, llm_finish_reason_str(seq->finish));
    }

    ngx_http_llm_json_lit(j, ",\"stop_reason\":");
    ngx_http_llm_stop_reason(j, seq);

    job = seq->ctx->job;

    if (stream) {
        /* vLLM: the prompt's ids in the choice's first chunk only */
        ngx_http_llm_json_lit(j, ",\"prompt_token_ids\":");

        if (seq->prompt_ids_sent) {
            ngx_http_llm_json_lit(j, "null");

        } else {
            ngx_http_llm_token_ids(j, job, seq->prompt->ids, seq->prompt->n);
            seq->prompt_ids_sent = 1;
        }

        ngx_http_llm_json_lit(j, ",\"token_ids\":");
        ngx_http_llm_token_ids(j, job, seq->ids, seq->n_ids);
        ngx_http_llm_json_lit(j, "}");
        return;
    }

    ngx_http_llm_json_lit(j, ",\"token_ids\":");
    ngx_http_llm_token_ids(j, job, seq->ids, seq->n_ids);
    ngx_http_llm_json_lit(j, ",\"prompt_logprobs\":");

    if (seq->ctx->job->sp.prompt_logprobs >= 0) {
        ngx_http_llm_prompt_logprobs(j, seq);

    } else {
        ngx_http_llm_json_lit(j, "null");
    }

    ngx_http_llm_json_lit(j, ",\"prompt_token_ids\":");
    ngx_http_llm_token_ids(j, job, seq->prompt->ids, seq->prompt->n);
    ngx_http_llm_json_lit(j, "}");
}


/*
 * The choice's text: the echoed prompt goes in front of the first text
 * (vLLM: "echo the prompt and first token"); with max_tokens 0 only the
 * prompt is returned.
 */

static void
ngx_http_llm_completions_text_json(ngx_http_llm_json_t *j,
    ngx_http_llm_seq_t *seq)
{
    u_char                 *p;
    size_t                  len;
    ngx_http_llm_prompt_t  *prompt;

    prompt = seq->prompt;
    len = seq->ctx->job->echo_only ? 0 : seq->text_len;

    if (prompt->echo == NULL || seq->echoed) {
        ngx_http_llm_json_str(j, seq->text, len);
        return;
    }

    seq->echoed = 1;

    p = ngx_pnalloc(seq->ctx->request->pool, prompt->echo_len + len);
    if (p == NULL) {
        j->failed = 1;
        return;
    }

    ngx_memcpy(p, prompt->echo, prompt->echo_len);
    ngx_memcpy(p + prompt->echo_len, seq->text, len);

    ngx_http_llm_json_str(j, p, prompt->echo_len + len);
}
