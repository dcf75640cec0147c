
/*
 * ngx_http_llm_chat.c -- POST .../chat/completions.
 *
 * Parsing (thread pool): the messages are normalized the way vLLM hands
 * them to the template (text parts joined into one string, tool-call
 * arguments parsed into objects, tools with every field of vLLM's model),
 * rendered with the model's own chat template and tokenized.
 *
 * Rendering (event loop): chat.completion and chat.completion.chunk in
 * vLLM's key order, one choice per sequence (n > 1: index 0 .. n-1); with
 * a tool-call parser (ngx_http_llm_tools.c) its content and calls.
 * Chunks follow vLLM's exclude_unset rules: the first one of each choice
 * carries the role and "prompt_token_ids": null (all of them before any
 * content, as vLLM sends them), content chunks have no stop_reason, the
 * finishing chunk of a choice has one.
 */


#include "ngx_http_llm_module.h"


static ngx_int_t ngx_http_llm_chat_logprobs(ngx_http_llm_job_t *job,
    yajl_val root);
static ngx_int_t ngx_http_llm_chat_messages(ngx_http_llm_job_t *job,
    yajl_val messages);
static ngx_int_t ngx_http_llm_chat_content(ngx_http_llm_job_t *job,
    yajl_val msg, size_t index);
static ngx_int_t ngx_http_llm_chat_tools(ngx_http_llm_job_t *job,
    yajl_val tools);
static ngx_uint_t ngx_http_llm_chat_news(ngx_http_llm_seq_t *seq);
static void ngx_http_llm_chat_delta(ngx_http_llm_json_t *j,
    ngx_http_llm_seq_t *seq);
static void ngx_http_llm_chat_reasoning(ngx_http_llm_json_t *j,
    ngx_http_llm_seq_t *seq);
static ngx_int_t ngx_http_llm_chat_render(ngx_http_llm_job_t *job,
    yajl_val root, yajl_val messages, yajl_val tools);


static const ngx_http_llm_params_conf_t  ngx_http_llm_chat_params = {
    "messages",                            /* prompt */
    { "max_completion_tokens", "max_tokens" },
    -1,                                    /* max_tokens_default */
    ngx_http_llm_chat_logprobs,
    1,                                     /* n */
    1,                                     /* stream_options */
    1,                                     /* prompt_logprobs */
    0                                      /* echo */
};


void
ngx_http_llm_chat_parse(ngx_http_llm_job_t *job, yajl_val root)
{
    yajl_val  messages, tools, v;

    if (ngx_http_llm_params_parse(job, root, &ngx_http_llm_chat_params)
        != NGX_OK)
    {
        return;
    }

    messages = llm_json_get(root, "messages");

    if (messages == NULL || !YAJL_IS_ARRAY(messages)) {
        ngx_http_llm_job_error(job, NGX_HTTP_BAD_REQUEST, "messages",
                               "`messages` is required and must be a list "
                               "of messages, got %s",
                               ngx_http_llm_json_type(messages));
        return;
    }

    if (messages->u.array.len == 0) {
        ngx_http_llm_job_error(job, NGX_HTTP_BAD_REQUEST, "messages",
                               "`messages` must contain at least one "
                               "message");
        return;
    }

    v = llm_json_get(root, "echo");

    if (YAJL_IS_TRUE(v)) {
        ngx_http_llm_job_error(job, NGX_HTTP_BAD_REQUEST, "echo",
                               "`echo` is not supported for chat "
                               "completions");
        return;
    }

    /* the tools' shape first, then what tool_choice asks of them */
    if (ngx_http_llm_chat_options(job, root, &tools) != NGX_OK
        || ngx_http_llm_chat_messages(job, messages) != NGX_OK
        || (tools && ngx_http_llm_chat_tools(job, tools) != NGX_OK)
        || ngx_http_llm_tools_parse(job, root, messages, tools) != NGX_OK
        || ngx_http_llm_chat_render(job, root, messages, tools) != NGX_OK)
    {
        return;
    }

    (void) ngx_http_llm_params_finish(job);
}


/* "logprobs": a boolean, "top_logprobs": how many alternatives */

static ngx_int_t
ngx_http_llm_chat_logprobs(ngx_http_llm_job_t *job, yajl_val root)
{
    int64_t     n;
    ngx_int_t   rc;
    ngx_uint_t  flag;

    rc = ngx_http_llm_job_bool(job, root, "logprobs", &flag);
    if (rc == NGX_HTTP_LLM_FIELD_INVALID) {
        return NGX_ERROR;
    }

    flag = (rc == NGX_HTTP_LLM_FIELD_PRESENT && flag);

    rc = ngx_http_llm_job_int(job, root, "top_logprobs", &n);
    if (rc == NGX_HTTP_LLM_FIELD_INVALID) {
        return NGX_ERROR;
    }

    if (rc == NGX_HTTP_LLM_FIELD_ABSENT) {
        n = 0;
    }

    if (n < -1) {
        ngx_http_llm_job_error(job, NGX_HTTP_BAD_REQUEST, "top_logprobs",
                               "`top_logprobs` must be a positive value "
                               "or -1.");
        return NGX_ERROR;
    }

    if (n != 0 && !flag) {
        ngx_http_llm_job_error(job, NGX_HTTP_BAD_REQUEST, "top_logprobs",
                               "when using `top_logprobs`, `logprobs` "
                               "must be set to true.");
        return NGX_ERROR;
    }

    if (!flag) {
        return NGX_OK;
    }

    return ngx_http_llm_params_logprobs(job, n, "top_logprobs");
}


/*
 * What a chat request and /tokenize's messages share besides messages: a
 * "chat_template" is refused (only the model's own is trusted, as vLLM
 * does by default), and "tools" null means none.
 */

ngx_int_t
ngx_http_llm_chat_options(ngx_http_llm_job_t *job, yajl_val root,
    yajl_val *tools)
{
    yajl_val  v;

    v = llm_json_get(root, "chat_template");

    if (v && !YAJL_IS_NULL(v)) {
        ngx_http_llm_job_error(job, NGX_HTTP_BAD_REQUEST, "chat_template",
                               "Chat template is passed with request, but "
                               "this server does not trust request chat "
                               "templates. Refused request with untrusted "
                               "chat template.");
        return NGX_ERROR;
    }

    *tools = llm_json_get(root, "tools");

    if (*tools && YAJL_IS_NULL(*tools)) {
        *tools = NULL;
    }

    return NGX_OK;
}


/*
 * The prompt of a list of messages (and tools): normalized, rendered with
 * the model's template and tokenized, added to the job's prompts.  Also
 * for /responses (its input made into messages) and /tokenize.
 */

ngx_int_t
ngx_http_llm_chat_prompt(ngx_http_llm_job_t *job, yajl_val root,
    yajl_val messages, yajl_val tools)
{
    if (ngx_http_llm_chat_messages(job, messages) != NGX_OK
        || (tools && ngx_http_llm_chat_tools(job, tools) != NGX_OK))
    {
        return NGX_ERROR;
    }

    return ngx_http_llm_chat_render(job, root, messages, tools);
}


static ngx_int_t
ngx_http_llm_chat_messages(ngx_http_llm_job_t *job, yajl_val messages)
{
    size_t    i;
    yajl_val  msg, role;

    for (i = 0; i < messages->u.array.len; i++) {
        msg = messages->u.array.values[i];

        if (!YAJL_IS_OBJECT(msg)) {
            ngx_http_llm_job_error(job, NGX_HTTP_BAD_REQUEST, "messages",
                                   "messages[%uz] must be an object, got %s",
                                   i, ngx_http_llm_json_type(msg));
            return NGX_ERROR;
        }

        role = llm_json_get(msg, "role");

        if (role == NULL || !YAJL_IS_STRING(role)) {
            ngx_http_llm_job_error(job, NGX_HTTP_BAD_REQUEST, "messages",
                                   "messages[%uz].role must be a string, "
                                   "got %s", i, ngx_http_llm_json_type(role));
            return NGX_ERROR;
        }

        if (ngx_http_llm_chat_content(job, msg, i) != NGX_OK) {
            return NGX_ERROR;
        }
    }

    return NGX_OK;
}


/*
 * Content as a list of parts becomes one string, the parts' texts joined
 * with "\n": what vLLM does for templates that expect string content.
 */

static ngx_int_t
ngx_http_llm_chat_content(ngx_http_llm_job_t *job, yajl_val msg,
    size_t index)
{
    char       *s;
    size_t      bad;
    yajl_val   *content, node;
    ngx_int_t   rc;
    ngx_str_t   text;

    static const char  *types[] = { "text", NULL };

    content = ngx_http_llm_json_slot(msg, "content");

    if (content == NULL || YAJL_IS_NULL(*content)
        || YAJL_IS_STRING(*content))
    {
        return NGX_OK;
    }

    if (!YAJL_IS_ARRAY(*content)) {
        ngx_http_llm_job_error(job, NGX_HTTP_BAD_REQUEST, "messages",
                               "messages[%uz].content must be a string or a "
                               "list of content parts, got %s", index,
                               ngx_http_llm_json_type(*content));
        return NGX_ERROR;
    }

    rc = ngx_http_llm_json_join_text(*content, types, 1, job->pool, &text,
                                     &bad);

    if (rc == NGX_DECLINED) {
        ngx_http_llm_job_error(job, NGX_HTTP_BAD_REQUEST, "messages",
                               "messages[%uz].content[%uz]: only "
                               "{\"type\": \"text\", \"text\": ...} "
                               "parts are supported", index, bad);
        return NGX_ERROR;
    }

    if (rc == NGX_ERROR) {
        ngx_http_llm_job_nomem(job);
        return NGX_ERROR;
    }

    /* the new node goes into the tree: yajl's allocator */

    node = calloc(1, sizeof(struct yajl_val_s));
    s = strdup((char *) text.data);

    if (node == NULL || s == NULL) {
        free(node);
        free(s);
        ngx_http_llm_job_nomem(job);
        return NGX_ERROR;
    }

    node->type = yajl_t_string;
    node->u.string = s;

    /* the tree owns the new node; llm_json_free() releases both */
    llm_json_free(*content);
    *content = node;

    return NGX_OK;
}


/*
 * vLLM passes tools to the template as tool.model_dump(): "type" and
 * "function" first, the function's "name", "description", "parameters"
 * first and null when absent, other keys after them.  Templates print
 * tools with tojson, so the bytes depend on this order.
 */

static ngx_int_t
ngx_http_llm_chat_tools(ngx_http_llm_job_t *job, yajl_val tools)
{
    size_t    i;
    yajl_val  tool, fn;

    static const char  *tool_keys[] = { "type", "function", NULL };
    static const char  *tool_defaults[] = { "function", NULL };
    static const char  *fn_keys[] = { "name", "description", "parameters",
                                      NULL };
    static const char  *fn_defaults[] = { NULL, NULL, NULL };

    if (!YAJL_IS_ARRAY(tools)) {
        ngx_http_llm_job_error(job, NGX_HTTP_BAD_REQUEST, "tools",
                               "`tools` must be a list of tools, got %s",
                               ngx_http_llm_json_type(tools));
        return NGX_ERROR;
    }

    for (i = 0; i < tools->u.array.len; i++) {
        tool = tools->u.array.values[i];
        fn = llm_json_get(tool, "function");

        if (fn == NULL || !YAJL_IS_OBJECT(fn)
            || llm_json_get(fn, "name") == NULL
            || !YAJL_IS_STRING(llm_json_get(fn, "name")))
        {
            ngx_http_llm_job_error(job, NGX_HTTP_BAD_REQUEST, "tools",
                                   "tools[%uz] must be {\"type\": "
                                   "\"function\", \"function\": {\"name\": "
                                   "...}}", i);
            return NGX_ERROR;
        }

        if (ngx_http_llm_json_order(tool, tool_keys, tool_defaults)
            != NGX_OK
            || ngx_http_llm_json_order(fn, fn_keys, fn_defaults) != NGX_OK)
        {
            ngx_http_llm_job_nomem(job);
            return NGX_ERROR;
        }
    }

    return NGX_OK;
}


static ngx_int_t
ngx_http_llm_chat_render(ngx_http_llm_job_t *job, yajl_val root,
    yajl_val messages, yajl_val tools)
{
    char                      *text, err[LLM_ERR_LEN];
    size_t                     len;
    yajl_val                   docs, kwargs, v;
    ngx_http_llm_prompt_t     *p;
    const llm_chat_template   *tmpl;

    v = llm_json_get(root, "add_generation_prompt");
    job->add_generation_prompt = !YAJL_IS_FALSE(v);

    if (YAJL_IS_TRUE(llm_json_get(root, "continue_final_message")))
    {
        if (job->add_generation_prompt) {
            ngx_http_llm_job_error(job, NGX_HTTP_BAD_REQUEST,
                                   "continue_final_message", "Cannot set "
                                   "both `continue_final_message` and "
                                   "`add_generation_prompt` to True.");

        } else {
            ngx_http_llm_job_error(job, NGX_HTTP_BAD_REQUEST,
                                   "continue_final_message",
                                   "`continue_final_message` is not "
                                   "supported yet");
        }

        return NGX_ERROR;
    }

    docs = llm_json_get(root, "documents");
    if (docs && !YAJL_IS_ARRAY(docs)) {
        docs = NULL;
    }

    kwargs = llm_json_get(root, "chat_template_kwargs");

    if (kwargs && !YAJL_IS_NULL(kwargs) && !YAJL_IS_OBJECT(kwargs)) {
        ngx_http_llm_job_error(job, NGX_HTTP_BAD_REQUEST,
                               "chat_template_kwargs", "`chat_template_"
                               "kwargs` must be an object, got %s",
                               ngx_http_llm_json_type(kwargs));
        return NGX_ERROR;
    }

    if (kwargs && YAJL_IS_NULL(kwargs)) {
        kwargs = NULL;
    }

    tmpl = llm_model_chat_template(job->model);

    if (tmpl == NULL) {
        ngx_http_llm_job_error(job, NGX_HTTP_BAD_REQUEST, NULL,
                               "As of transformers v4.44, default chat "
                               "template is no longer allowed, so you must "
                               "provide a chat template if the tokenizer "
                               "does not define one.");
        return NGX_ERROR;
    }

    /* function.arguments: OpenAI clients send a JSON string, templates
     * expect the object (vLLM parses it) */
    err[0] = '\0';
    text = llm_chat_template_render_flags(tmpl, messages, tools, docs,
                                          job->add_generation_prompt, kwargs,
                                          LLM_CHAT_TOOL_ARGS_JSON, &len, err);
    if (text == NULL) {
        ngx_http_llm_job_error(job, NGX_HTTP_BAD_REQUEST, NULL, "%s",
                               err[0] ? err : "the chat template failed");
        return NGX_ERROR;
    }

    /* templates add BOS themselves: add_special_tokens is false by default */
    v = llm_json_get(root, "add_special_tokens");

    p = ngx_http_llm_job_tokenize(job, text, len, YAJL_IS_TRUE(v),
                                  "messages");
    free(text);

    if (p == NULL) {
        return NGX_ERROR;
    }

    return ngx_http_llm_reasoning_parse(job, kwargs, p);
}


/* rendering, on the event loop */

ngx_int_t
ngx_http_llm_chat_chunk(ngx_http_llm_ctx_t *ctx, ngx_http_llm_json_t *j)
{
    ngx_uint_t           i;
    ngx_http_llm_seq_t  *seq;

    static const char  object[] = "chat.completion.chunk";

    /* vLLM sends the role of every choice first, in one go */

    for (i = 0;
         !ctx->role_sent && ctx->finish != LLM_FINISH_ERROR && i < ctx->n_seqs;
         i++)
    {
        ngx_http_llm_json_lit(j, "data: ");
        ngx_http_llm_chunk_head(j, ctx, object);
        ngx_http_llm_json_lit(j, ",\"choices\":[{\"index\":");
        ngx_http_llm_json_int(j, i);
        ngx_http_llm_json_lit(j, ",\"delta\":{\"role\":\"assistant\","
                              "\"content\":\"\"},\"logprobs\":null,"
                              "\"finish_reason\":null}]");

        if (ctx->continuous_usage) {
            ngx_http_llm_json_lit(j, ",\"usage\":{\"prompt_tokens\":");
            ngx_http_llm_json_int(j, ctx->seqs[i].prompt->n);
            ngx_http_llm_json_lit(j, ",\"total_tokens\":");
            ngx_http_llm_json_int(j, ctx->seqs[i].prompt->n);
            ngx_http_llm_json_lit(j, ",\"completion_tokens\":0}");
        }

        ngx_http_llm_json_lit(j, ",\"prompt_token_ids\":");
        ngx_http_llm_token_ids(j, ctx->job, ctx->seqs[i].prompt->ids,
                               ctx->seqs[i].prompt->n);
        ngx_http_llm_json_lit(j, "}\n\n");
    }

    ctx->role_sent = 1;

    for (i = 0; ctx->finish != LLM_FINISH_ERROR && i < ctx->n_seqs; i++) {
        seq = &ctx->seqs[i];

        if (!seq->changed || seq->finish_sent) {
            continue;
        }

        /* tool calls: what the parser held back waits for a later chunk */
        if (ngx_http_llm_tools_feed(seq, 0) != NGX_OK) {
            return NGX_ERROR;
        }

        if (!ngx_http_llm_chat_news(seq) && seq->finish == LLM_FINISH_NONE) {
            seq->text.nelts = 0;
            seq->changed = 0;
            continue;
        }

        ngx_http_llm_json_lit(j, "data: ");
        ngx_http_llm_chunk_head(j, ctx, object);
        ngx_http_llm_json_lit(j, ",\"choices\":[{\"index\":");
        ngx_http_llm_json_int(j, seq->index);
        ngx_http_llm_json_lit(j, ",\"delta\":{");

        ngx_http_llm_chat_delta(j, seq);

        ngx_http_llm_json_lit(j, "},\"logprobs\":");

        if (ctx->job->logprobs >= 0) {
            ngx_http_llm_logprobs_chat(j, seq);

        } else {
            ngx_http_llm_json_lit(j, "null");
        }

        ngx_http_llm_json_lit(j, ",\"finish_reason\":");

        if (seq->finish == LLM_FINISH_NONE) {
            ngx_http_llm_json_lit(j, "null");

        } else {
            ngx_http_llm_json_cstr(j, ngx_http_llm_tools_finish_reason(seq));
            ngx_http_llm_json_lit(j, ",\"stop_reason\":");
            ngx_http_llm_stop_reason(j, seq);
        }

        ngx_http_llm_json_lit(j, ",\"token_ids\":");
        ngx_http_llm_token_ids(j, ctx->job, seq->ids.elts, seq->ids.nelts);
        ngx_http_llm_json_lit(j, "}]");

        if (ctx->continuous_usage) {
            ngx_http_llm_json_lit(j, ",\"usage\":");
            ngx_http_llm_usage_seq_json(j, seq);
        }

        ngx_http_llm_json_lit(j, "}\n\n");

        ngx_http_llm_chunk_written(seq);
    }

    return ngx_http_llm_chunk_end(j, ctx, object);
}


ngx_int_t
ngx_http_llm_chat_body(ngx_http_llm_ctx_t *ctx, ngx_http_llm_json_t *j)
{
    ngx_uint_t           i;
    ngx_http_llm_seq_t  *seq;

    ngx_http_llm_chunk_head(j, ctx, "chat.completion");
    ngx_http_llm_json_lit(j, ",\"choices\":[");

    for (i = 0; i < ctx->n_seqs; i++) {
        seq = &ctx->seqs[i];

        if (i) {
            ngx_http_llm_json_lit(j, ",");
        }

        if (ngx_http_llm_tools_feed(seq, 0) != NGX_OK) {
            return NGX_ERROR;
        }

        ngx_http_llm_json_lit(j, "{\"index\":");
        ngx_http_llm_json_int(j, seq->index);
        ngx_http_llm_json_lit(j, ",\"message\":{\"role\":\"assistant\","
                              "\"content\":");

        /* vLLM: no content after the reasoning is null */
        if (seq->reasoning && seq->tools == NULL && seq->text.nelts == 0) {
            ngx_http_llm_json_lit(j, "null");

        } else {
            ngx_http_llm_tools_content(j, seq);
        }

        ngx_http_llm_json_lit(j, ",\"refusal\":null,\"annotations\":[],"
                              "\"audio\":null,\"tool_calls\":");
        ngx_http_llm_tools_calls(j, seq);
        ngx_http_llm_json_lit(j, ",\"reasoning\":");
        ngx_http_llm_chat_reasoning(j, seq);
        ngx_http_llm_json_lit(j, "},\"logprobs\":");

        if (ctx->job->logprobs >= 0) {
            ngx_http_llm_logprobs_chat(j, seq);

        } else {
            ngx_http_llm_json_lit(j, "null");
        }

        ngx_http_llm_json_lit(j, ",\"finish_reason\":");
        ngx_http_llm_json_cstr(j, ngx_http_llm_tools_finish_reason(seq));
        ngx_http_llm_json_lit(j, ",\"stop_reason\":");
        ngx_http_llm_stop_reason(j, seq);
        ngx_http_llm_json_lit(j, ",\"token_ids\":");
        ngx_http_llm_token_ids(j, ctx->job, seq->ids.elts, seq->ids.nelts);
        ngx_http_llm_json_lit(j, "}");
    }

    ngx_http_llm_json_lit(j, "],\"service_tier\":null,\"usage\":");
    (void) ngx_http_llm_usage_json(j, ctx, NGX_HTTP_LLM_USAGE_BODY);
    ngx_http_llm_json_lit(j, ",\"prompt_logprobs\":");

    /* one prompt: every choice has the same records */

    if (ctx->job->sp.prompt_logprobs >= 0 && ctx->n_seqs) {
        ngx_http_llm_prompt_logprobs(j, &ctx->seqs[0]);

    } else {
        ngx_http_llm_json_lit(j, "null");
    }

    ngx_http_llm_json_lit(j, ",\"prompt_token_ids\":");
    ngx_http_llm_token_ids(j, ctx->job, ctx->n_seqs ? ctx->seqs[0].prompt->ids
                                                    : NULL,
                           ctx->n_seqs ? ctx->seqs[0].prompt->n : 0);
    ngx_http_llm_json_lit(j, ",\"kv_transfer_params\":null,\"metrics\":");
    ngx_http_llm_metrics_body(j, ctx);
    ngx_http_llm_json_lit(j, "}");

    return j->failed ? NGX_ERROR : NGX_OK;
}


/*
 * Whether a choice has something for a chunk: reasoning, content (without
 * a reasoning parser even none: the chunk of every drain, as before), or
 * what the tool-call parser found.
 */

static ngx_uint_t
ngx_http_llm_chat_news(ngx_http_llm_seq_t *seq)
{
    if (seq->think.nelts) {
        return 1;
    }

    if (seq->tools) {
        return ngx_http_llm_tools_pending(seq);
    }

    return seq->reasoning == NULL || seq->text.nelts;
}


/* a chunk's delta, without braces: "reasoning", then the content and calls
 * when there are some (or nothing else) */

static void
ngx_http_llm_chat_delta(ngx_http_llm_json_t *j, ngx_http_llm_seq_t *seq)
{
    if (seq->think.nelts) {
        ngx_http_llm_json_lit(j, "\"reasoning\":");
        ngx_http_llm_json_str(j, seq->think.elts, seq->think.nelts);

        if (seq->tools ? !ngx_http_llm_tools_pending(seq)
                       : seq->text.nelts == 0)
        {
            return;
        }

        ngx_http_llm_json_lit(j, ",");
    }

    if (seq->tools) {
        ngx_http_llm_tools_delta(j, seq);
        return;
    }

    ngx_http_llm_json_lit(j, "\"content\":");
    ngx_http_llm_json_str(j, seq->text.elts, seq->text.nelts);
}


/* the message's "reasoning": null without a parser or without reasoning */

static void
ngx_http_llm_chat_reasoning(ngx_http_llm_json_t *j, ngx_http_llm_seq_t *seq)
{
    if (seq->think.nelts == 0) {
        ngx_http_llm_json_lit(j, "null");
        return;
    }

    ngx_http_llm_json_str(j, seq->think.elts, seq->think.nelts);
}
