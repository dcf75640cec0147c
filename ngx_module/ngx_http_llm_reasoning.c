
/*
 * ngx_http_llm_reasoning.c -- llm_reasoning_parser: the reasoning of chat
 * and responses outputs, split from their content by the engine's parser
 * (llm.h, "Reasoning").
 *
 *   parse      (thread pool) whether the request has reasoning and where
 *              the output starts: inside the think block the prompt opened
 *              (the template's generation prompt, or none: vLLM assumes
 *              reasoning first), or after it (a prompt that closed it:
 *              Qwen3's enable_thinking false; a grammar, which constrains
 *              the output from its first token); the markers' token ids
 *   append     (event loop, each drain) the output's text into seq->think
 *              and seq->text, its ids classified with their step's time
 *   writers    usage's reasoning_tokens and metrics.output_token_metrics
 *
 * docs/api.md, "Reasoning"; docs/metrics.md, "output_token_metrics".
 */


#include "ngx_http_llm_module.h"


static ngx_int_t ngx_http_llm_reasoning_start(ngx_http_llm_job_t *job,
    const llm_tokenizer *tok, ngx_http_llm_prompt_t *p, ngx_uint_t thinking);
static void ngx_http_llm_reasoning_tools(ngx_http_llm_job_t *job,
    const llm_tokenizer *tok);
static ngx_int_t ngx_http_llm_reasoning_create(ngx_http_llm_seq_t *seq);
static void ngx_http_llm_reasoning_cleanup(void *data);
static void ngx_http_llm_reasoning_text(int reasoning, const char *text,
    size_t len, void *data);
static void ngx_http_llm_reasoning_phase_json(ngx_http_llm_json_t *j,
    const llm_token_phase *ph, double scheduled, ngx_uint_t drop_nulls);


typedef struct {
    ngx_http_llm_seq_t         *seq;
    ngx_uint_t                  failed;
} ngx_http_llm_reasoning_feed_t;


/* at most this many whitespace tokens after the prompt's marker */
#define NGX_HTTP_LLM_REASONING_TAIL  8


ngx_int_t
ngx_http_llm_reasoning_parse(ngx_http_llm_job_t *job, yajl_val kwargs,
    ngx_http_llm_prompt_t *p)
{
    yajl_val              v;
    ngx_uint_t            thinking;
    const llm_tokenizer  *tok;
    llm_reasoning_config *c;

    if (job->reasoning_conf == LLM_REASONING_PARSER_NONE) {
        return NGX_OK;
    }

    tok = llm_model_tokenizer(job->model);
    c = &job->think;

    c->start = "<think>";
    c->end = "</think>";
    c->start_id = llm_tokenizer_token_id(tok, c->start);
    c->end_id = llm_tokenizer_token_id(tok, c->end);

    /* vLLM refuses to start: "could not locate think start/end tokens" */
    if (c->start_id < 0 || c->end_id < 0) {
        ngx_http_llm_job_error(job, NGX_HTTP_INTERNAL_SERVER_ERROR, NULL,
                               "llm_reasoning_parser %s: the model's "
                               "tokenizer has no <think> and </think> "
                               "tokens",
                               llm_reasoning_parser_kind_name(
                                   job->reasoning_conf));
        return NGX_ERROR;
    }

    /* Qwen3's switch; DeepSeek-R1's templates have none */
    thinking = 1;
    v = kwargs ? llm_json_get(kwargs, "enable_thinking") : NULL;

    if (job->reasoning_conf == LLM_REASONING_PARSER_QWEN3
        && v && YAJL_IS_FALSE(v))
    {
        thinking = 0;
    }

    ngx_http_llm_reasoning_tools(job, tok);

    if (ngx_http_llm_reasoning_start(job, tok, p, thinking) != NGX_OK) {
        return NGX_ERROR;
    }

    /* the markers must be in the text to be split there */
    if (llm_tokenizer_is_special(tok, c->end_id)) {
        job->sp.keep_special_tokens = 1;
    }

    job->reasoning = job->reasoning_conf;

    return NGX_OK;
}


/*
 * Where the output starts.  A grammar (structured outputs, forced tool
 * calls) constrains it from the first token: no think block.  Otherwise
 * the prompt's last tokens, past whitespace: "<think>" opens the block,
 * "</think>" closed it; neither leaves vLLM's assumption (reasoning
 * first) unless Qwen3's thinking is off.
 */

static ngx_int_t
ngx_http_llm_reasoning_start(ngx_http_llm_job_t *job, const llm_tokenizer *tok,
    ngx_http_llm_prompt_t *p, ngx_uint_t thinking)
{
    int                    i, last;
    char                  *s;
    size_t                 len, k;
    llm_reasoning_config  *c;

    c = &job->think;

    if (job->sp.structured || job->sp.json_object) {
        c->in_reasoning = 0;
        return NGX_OK;
    }

    c->in_reasoning = (int) thinking;

    last = ngx_max(0, p->n - NGX_HTTP_LLM_REASONING_TAIL);

    for (i = p->n - 1; i >= last; i--) {
        if (p->ids[i] == c->start_id) {
            c->in_reasoning = 1;
            return NGX_OK;
        }

        if (p->ids[i] == c->end_id) {
            c->in_reasoning = 0;
            return NGX_OK;
        }

        s = llm_tokenizer_decode(tok, &p->ids[i], 1, 0, &len);
        if (s == NULL) {
            ngx_http_llm_job_error(job, NGX_HTTP_INTERNAL_SERVER_ERROR, NULL,
                                   "out of memory");
            return NGX_ERROR;
        }

        for (k = 0; k < len; k++) {
            if (s[k] != ' ' && s[k] != '\n' && s[k] != '\t'
                && s[k] != '\r')
            {
                break;
            }
        }

        free(s);

        if (k < len || len == 0) {
            break;
        }
    }

    return NGX_OK;
}


/* tool-call markup is neither reasoning nor content (vLLM: unclassified) */

static void
ngx_http_llm_reasoning_tools(ngx_http_llm_job_t *job, const llm_tokenizer *tok)
{
    llm_reasoning_config  *c = &job->think;

    c->tool_open_id = -1;
    c->tool_close_id = -1;
    c->tools_only = 0;

    switch (job->tool_parser) {

    case LLM_TOOL_PARSER_HERMES:
        c->tool_open_id = llm_tokenizer_token_id(tok, "<tool_call>");
        c->tool_close_id = llm_tokenizer_token_id(tok, "</tool_call>");
        break;

    case LLM_TOOL_PARSER_LLAMA3_JSON:
        c->tool_open_id = llm_tokenizer_token_id(tok, "<|python_tag|>");
        break;

    case LLM_TOOL_PARSER_MISTRAL:
        c->tool_open_id = llm_tokenizer_token_id(tok, "[TOOL_CALLS]");
        break;

    case LLM_TOOL_PARSER_NAMED:
    case LLM_TOOL_PARSER_JSON_ARRAY:
        c->tools_only = 1;
        break;

    default:
        break;
    }
}


/*
 * A drain's output with a reasoning parser: its text split into seq->think
 * and seq->text, its ids classified with their step's time.  The token that stopped the sequence (EOS, a stop token
 * id) is control output.
 */

ngx_int_t
ngx_http_llm_reasoning_append(ngx_http_llm_seq_t *seq, const llm_output *out)
{
    int                             stop;
    int32_t                         last;
    ngx_http_llm_reasoning_feed_t   feed;

    if (seq->reasoning == NULL
        && ngx_http_llm_reasoning_create(seq) != NGX_OK)
    {
        return NGX_ERROR;
    }

    feed.seq = seq;
    feed.failed = 0;

    llm_reasoning_parser_text(seq->reasoning, out->text, out->text_len,
                              ngx_http_llm_reasoning_text, &feed);

    if (out->finish_reason != LLM_FINISH_NONE) {
        llm_reasoning_parser_finish(seq->reasoning,
                                    ngx_http_llm_reasoning_text, &feed);
    }

    stop = 0;

    if (out->n_ids && out->finish_reason == LLM_FINISH_STOP
        && out->stop_string == NULL)
    {
        last = out->ids[out->n_ids - 1];
        stop = (last == out->stop_token
                || llm_model_is_eos(seq->ctx->job->model, last));
    }

    llm_reasoning_parser_tokens(seq->reasoning, out->ids, out->token_times,
                                out->n_ids, stop);

    return feed.failed ? NGX_ERROR : NGX_OK;
}


static ngx_int_t
ngx_http_llm_reasoning_create(ngx_http_llm_seq_t *seq)
{
    ngx_pool_t          *pool;
    ngx_pool_cleanup_t  *cln;

    pool = seq->ctx->request->pool;

    if (ngx_array_init(&seq->think, pool, 256, 1) != NGX_OK
        || (seq->text.elts == NULL
            && ngx_array_init(&seq->text, pool, 256, 1) != NGX_OK))
    {
        return NGX_ERROR;
    }

    cln = ngx_pool_cleanup_add(pool, 0);
    if (cln == NULL) {
        return NGX_ERROR;
    }

    seq->reasoning = llm_reasoning_parser_new(&seq->ctx->job->think);
    if (seq->reasoning == NULL) {
        return NGX_ERROR;
    }

    cln->handler = ngx_http_llm_reasoning_cleanup;
    cln->data = seq->reasoning;

    return NGX_OK;
}


static void
ngx_http_llm_reasoning_cleanup(void *data)
{
    llm_reasoning_parser_free(data);
}


static void
ngx_http_llm_reasoning_text(int reasoning, const char *text, size_t len,
    void *data)
{
    ngx_http_llm_reasoning_feed_t  *feed = data;

    u_char       *p;
    ngx_array_t  *a;

    a = reasoning ? &feed->seq->think : &feed->seq->text;

    p = ngx_array_push_n(a, len);
    if (p == NULL) {
        feed->failed = 1;
        return;
    }

    ngx_memcpy(p, text, len);
}


/*
 * The request's categories: each sequence's, summed (the earliest first
 * and the latest last step).  All zero without a reasoning parser.
 */

void
ngx_http_llm_reasoning_phases(ngx_http_llm_ctx_t *ctx, llm_token_phases *sum)
{
    ngx_uint_t               i, k;
    llm_token_phase         *to;
    const llm_token_phase   *from;
    const llm_token_phases  *ph;

    ngx_memzero(sum, sizeof(llm_token_phases));

    for (i = 0; i < ctx->n_seqs; i++) {
        if (ctx->seqs[i].reasoning == NULL) {
            continue;
        }

        ph = llm_reasoning_parser_phases(ctx->seqs[i].reasoning);
        sum->unclassified += ph->unclassified;

        for (k = 0; k < 2; k++) {
            from = k ? &ph->content : &ph->reasoning;
            to = k ? &sum->content : &sum->reasoning;

            if (from->tokens == 0) {
                continue;
            }

            if (to->tokens == 0 || from->first < to->first) {
                to->first = from->first;
            }

            if (from->last > to->last) {
                to->last = from->last;
            }

            to->tokens += from->tokens;
            to->batched |= from->batched;
        }
    }
}


/* usage's reasoning tokens: chat's "completion_tokens_details" */

void
ngx_http_llm_reasoning_usage(ngx_http_llm_json_t *j, ngx_http_llm_ctx_t *ctx)
{
    llm_token_phases  ph;

    if (!ctx->job->reasoning) {
        return;
    }

    ngx_http_llm_reasoning_phases(ctx, &ph);

    ngx_http_llm_json_lit(j, ",\"completion_tokens_details\":"
                          "{\"reasoning_tokens\":");
    ngx_http_llm_json_int(j, ph.reasoning.tokens);
    ngx_http_llm_json_lit(j, "}");
}


/*
 * metrics.output_token_metrics (vLLM's
 * --enable-per-request-output-token-metrics): the reasoning and the
 * content, each with its count and its four times, and the tokens that
 * are neither.  A category without tokens keeps its object: token_count
 * 0 and null times (dropped with the nulls in a stream's last chunk).
 */

void
ngx_http_llm_reasoning_metrics_json(ngx_http_llm_json_t *j,
    ngx_http_llm_ctx_t *ctx, ngx_uint_t drop_nulls)
{
    llm_token_phases  ph;

    ngx_http_llm_reasoning_phases(ctx, &ph);

    ngx_http_llm_json_lit(j, "\"output_token_metrics\":{\"reasoning\":");
    ngx_http_llm_reasoning_phase_json(j, &ph.reasoning, ctx->stats.scheduled,
                                      drop_nulls);
    ngx_http_llm_json_lit(j, ",\"content\":");
    ngx_http_llm_reasoning_phase_json(j, &ph.content, ctx->stats.scheduled,
                                      drop_nulls);
    ngx_http_llm_json_lit(j, ",\"unclassified_token_count\":");
    ngx_http_llm_json_int(j, ph.unclassified);
    ngx_http_llm_json_lit(j, "}");
}


static void
ngx_http_llm_reasoning_phase_json(ngx_http_llm_json_t *j,
    const llm_token_phase *ph, double scheduled, ngx_uint_t drop_nulls)
{
    llm_metrics  m;

    llm_token_phase_metrics(ph, scheduled, &m);

    /* the per-request metrics' keys and formulas but the queue's */

    ngx_http_llm_json_lit(j, "{\"token_count\":");
    ngx_http_llm_json_int(j, ph->tokens);
    (void) ngx_http_llm_metrics_fields(j, &m, drop_nulls, 0, 0);
    ngx_http_llm_json_lit(j, "}");
}


/* the content's time to first token, for $llm_content_ttft_ms: 0 for none */

ngx_uint_t
ngx_http_llm_reasoning_content_ttft(ngx_http_llm_ctx_t *ctx, double *ms)
{
    llm_metrics       m;
    llm_token_phases  ph;

    ngx_http_llm_reasoning_phases(ctx, &ph);
    llm_token_phase_metrics(&ph.content, ctx->stats.scheduled, &m);

    *ms = m.ttft_ms;

    return m.has_ttft;
}
