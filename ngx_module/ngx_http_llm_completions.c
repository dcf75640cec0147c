
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


static ngx_int_t ngx_http_llm_completions_logprobs(ngx_http_llm_job_t *job,
    yajl_val root);
static ngx_int_t ngx_http_llm_completions_prompts(ngx_http_llm_job_t *job,
    yajl_val root);
static ngx_int_t ngx_http_llm_completions_prompt(ngx_http_llm_job_t *job,
    yajl_val root, yajl_val v, ngx_uint_t index, ngx_uint_t list);
static void ngx_http_llm_completions_choice(ngx_http_llm_json_t *j,
    ngx_http_llm_seq_t *seq, ngx_uint_t stream);
static void ngx_http_llm_completions_text_json(ngx_http_llm_json_t *j,
    ngx_http_llm_seq_t *seq);


static const ngx_http_llm_params_conf_t  ngx_http_llm_completions_params = {
    "prompt",                              /* prompt */
    { "max_tokens", NULL },
    16,                                    /* max_tokens_default */
    ngx_http_llm_completions_logprobs,
    1,                                     /* n */
    1,                                     /* stream_options */
    1,                                     /* prompt_logprobs */
    1                                      /* echo */
};


void
ngx_http_llm_completions_parse(ngx_http_llm_job_t *job, yajl_val root)
{
    yajl_val  v;

    if (ngx_http_llm_params_parse(job, root, &ngx_http_llm_completions_params)
        != NGX_OK)
    {
        return;
    }

    v = llm_json_get(root, "suffix");

    if (v && !YAJL_IS_NULL(v)) {
        ngx_http_llm_job_error(job, NGX_HTTP_BAD_REQUEST, "suffix",
                               "suffix is not currently supported");
        return;
    }

    job->echo_requested = YAJL_IS_TRUE(llm_json_get(root, "echo"));

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

    if (ngx_http_llm_completions_prompts(job, root) != NGX_OK) {
        return;
    }

    (void) ngx_http_llm_params_finish(job);
}


/* "logprobs": how many alternatives */

static ngx_int_t
ngx_http_llm_completions_logprobs(ngx_http_llm_job_t *job, yajl_val root)
{
    int64_t    n;
    ngx_int_t  rc;

    rc = ngx_http_llm_job_int(job, root, "logprobs", &n);
    if (rc == NGX_HTTP_LLM_FIELD_INVALID) {
        return NGX_ERROR;
    }

    if (rc == NGX_HTTP_LLM_FIELD_ABSENT) {
        return NGX_OK;
    }

    if (n < 0) {
        ngx_http_llm_job_error(job, NGX_HTTP_BAD_REQUEST, "logprobs",
                               "`logprobs` must be a positive value.");
        return NGX_ERROR;
    }

    return ngx_http_llm_params_logprobs(job, n, "logprobs");
}


/* the prompt or the prompts, and the text each one echoes */

static ngx_int_t
ngx_http_llm_completions_prompts(ngx_http_llm_job_t *job, yajl_val root)
{
    size_t                  i;
    yajl_val                prompt, first;
    ngx_http_llm_prompt_t  *p;

    prompt = llm_json_get(root, "prompt");

    if (prompt == NULL || YAJL_IS_NULL(prompt)
        || (YAJL_IS_STRING(prompt) && prompt->u.string[0] == '\0')
        || (YAJL_IS_ARRAY(prompt) && prompt->u.array.len == 0))
    {
        ngx_http_llm_job_error(job, NGX_HTTP_BAD_REQUEST, "prompt",
                               "Either prompt or prompt_embeds must be "
                               "provided and non-empty.");
        return NGX_ERROR;
    }

    if (!YAJL_IS_STRING(prompt) && !YAJL_IS_ARRAY(prompt)) {
        ngx_http_llm_job_error(job, NGX_HTTP_BAD_REQUEST, "prompt",
                               "`prompt` must be a string, a list of "
                               "strings, a list of token ids or a list of "
                               "lists of token ids, got %s",
                               ngx_http_llm_json_type(prompt));
        return NGX_ERROR;
    }

    first = YAJL_IS_ARRAY(prompt) ? prompt->u.array.values[0] : NULL;

    if (YAJL_IS_STRING(prompt) || YAJL_IS_NUMBER(first)) {
        /* one prompt: a string, or a list of token ids */
        if (ngx_http_llm_completions_prompt(job, root, prompt, 0, 0)
            != NGX_OK)
        {
            return NGX_ERROR;
        }

    } else {
        for (i = 0; i < prompt->u.array.len; i++) {
            if (ngx_http_llm_completions_prompt(job, root,
                                                prompt->u.array.values[i], i,
                                                1)
                != NGX_OK)
            {
                return NGX_ERROR;
            }
        }
    }

    if (!job->echo_requested) {
        return NGX_OK;
    }

    /* echo of a token-id prompt: its text */

    p = job->prompts.elts;

    for (i = 0; i < job->prompts.nelts; i++) {
        if (p[i].echo.data == NULL
            && ngx_http_llm_job_decode(job, p[i].ids, p[i].n, 1, &p[i].echo)
               != NGX_OK)
        {
            return NGX_ERROR;
        }
    }

    return NGX_OK;
}


/* one prompt; list: it is an element of the list of prompts */

static ngx_int_t
ngx_http_llm_completions_prompt(ngx_http_llm_job_t *job, yajl_val root,
    yajl_val v, ngx_uint_t index, ngx_uint_t list)
{
    u_char                 *last;
    size_t                  len;
    ngx_http_llm_prompt_t  *p;
    u_char                  name[NGX_INT_T_LEN + sizeof("prompt[]")];

    if (YAJL_IS_STRING(v)) {
        if (v->u.string[0] == '\0') {
            ngx_http_llm_job_error(job, NGX_HTTP_BAD_REQUEST, "prompt",
                                   "prompt[%ui] is empty: every prompt "
                                   "needs at least one character", index);
            return NGX_ERROR;
        }

        /* completions add BOS unless add_special_tokens is false */

        len = ngx_strlen(v->u.string);
        p = ngx_http_llm_job_tokenize(job, v->u.string, len,
                                      !YAJL_IS_FALSE(llm_json_get(root,
                                                     "add_special_tokens")),
                                      "prompt");
        if (p == NULL) {
            return NGX_ERROR;
        }

        if (job->echo_requested) {
            return ngx_http_llm_job_copy(job, v->u.string, len, &p->echo);
        }

        return NGX_OK;
    }

    if (YAJL_IS_ARRAY(v) && v->u.array.len) {
        if (list) {
            last = ngx_sprintf(name, "prompt[%ui]", index);

        } else {
            last = ngx_cpymem(name, "prompt", sizeof("prompt") - 1);
        }

        *last = '\0';

        p = ngx_http_llm_job_token_ids(job, v, "prompt", (char *) name);

        return p ? NGX_OK : NGX_ERROR;
    }

    ngx_http_llm_job_error(job, NGX_HTTP_BAD_REQUEST, "prompt",
                           "prompt[%ui] must be a non-empty string or a "
                           "non-empty list of token ids, got %s", index,
                           YAJL_IS_ARRAY(v) ? "an empty list"
                                            : ngx_http_llm_json_type(v));
    return NGX_ERROR;
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

        ngx_http_llm_chunk_written(seq);
    }

    return ngx_http_llm_chunk_end(j, ctx, object);
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

    ngx_http_llm_json_lit(j, "],\"service_tier\":null,\"usage\":");
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
    echo = (seq->prompt->echo.data != NULL && !seq->echoed);

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
        ngx_http_llm_token_ids(j, job, seq->ids.elts, seq->ids.nelts);
        ngx_http_llm_json_lit(j, "}");
        return;
    }

    ngx_http_llm_json_lit(j, ",\"token_ids\":");
    ngx_http_llm_token_ids(j, job, seq->ids.elts, seq->ids.nelts);
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
    u_char     *p;
    size_t      len;
    ngx_str_t  *echo;

    echo = &seq->prompt->echo;
    len = seq->ctx->job->echo_only ? 0 : seq->text.nelts;

    if (echo->data == NULL || seq->echoed) {
        ngx_http_llm_json_str(j, seq->text.elts, len);
        return;
    }

    seq->echoed = 1;

    p = ngx_pnalloc(seq->ctx->request->pool, echo->len + len);
    if (p == NULL) {
        j->failed = 1;
        return;
    }

    ngx_memcpy(p, echo->data, echo->len);
    ngx_memcpy(p + echo->len, seq->text.elts, len);

    ngx_http_llm_json_str(j, p, echo->len + len);
}
