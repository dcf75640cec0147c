
/*
 * ngx_http_llm_tools.c -- tools in chat completions: what tool_choice asks
 * and whether the request may ask it (thread pool), and the model's tool
 * calls in the output (event loop): each sequence's text goes through the
 * engine's tool-call parser (llm.h, "Tool calls"), whose content and calls
 * the chat body and chunks write.  docs/api.md, "Tool calls".
 */


#include "ngx_http_llm_module.h"


struct ngx_http_llm_tools_s {
    llm_tool_parser            *parser;
    ngx_pool_t                 *pool;
    ngx_array_t                 content;       /* u_char, not yet written */
    ngx_array_t                 deltas;        /* ngx_http_llm_tool_delta_t */
    ngx_array_t                 ids;           /* ngx_str_t, one per call */
    llm_tool_parser_kind        kind;
    unsigned                    responses:1;   /* ids "call_..." */
    unsigned                    finished:1;
    unsigned                    failed:1;      /* out of memory */
};


static ngx_int_t ngx_http_llm_tool_choice(ngx_http_llm_job_t *job,
    yajl_val root, yajl_val tools, yajl_val *choice);
static ngx_int_t ngx_http_llm_tool_named(ngx_http_llm_job_t *job,
    yajl_val choice, yajl_val tools);
static ngx_int_t ngx_http_llm_tools_forced(ngx_http_llm_job_t *job,
    yajl_val choice, yajl_val tools, ngx_uint_t parallel);
static ngx_int_t ngx_http_llm_tool_messages(ngx_http_llm_job_t *job,
    yajl_val messages);
static ngx_http_llm_tools_t *ngx_http_llm_tools_create(
    ngx_http_llm_seq_t *seq);
static void ngx_http_llm_tools_cleanup(void *data);
static void ngx_http_llm_tools_event(const llm_tool_event *ev, void *data);
static ngx_int_t ngx_http_llm_tools_id(ngx_http_llm_tools_t *t,
    ngx_str_t *id);


#define NGX_HTTP_LLM_TOOL_USAGE                                              \
    "Correct usage: `{\"type\": \"function\", \"function\": "                \
    "{\"name\": \"my_function\"}}`"


/*
 * vLLM's check_tool_usage(): tool_choice defaults to "auto" when there are
 * tools; "none" renders them and parses nothing; "auto" parses with
 * llm_tool_call_parser (without one: vLLM's 400); "required" and a named
 * function constrain the output to the tools' schemas (vLLM's way, for any
 * model: ngx_http_llm_tools_grammar.c).  Also parallel_tool_calls (a
 * boolean: false allows one call under "required"; "auto" parses all the
 * model writes, as vLLM) and the order of tool messages.
 */

ngx_int_t
ngx_http_llm_tools_parse(ngx_http_llm_job_t *job, yajl_val root,
    yajl_val messages, yajl_val tools)
{
    yajl_val              choice;
    ngx_int_t             rc;
    ngx_uint_t            flag;
    llm_tool_parser_kind  kind;

    rc = ngx_http_llm_job_bool(job, root, "parallel_tool_calls", &flag);
    if (rc == NGX_HTTP_LLM_FIELD_INVALID) {
        return NGX_ERROR;
    }

    if (tools && YAJL_IS_ARRAY(tools) && tools->u.array.len == 0) {
        ngx_http_llm_job_error(job, NGX_HTTP_BAD_REQUEST, "tools",
                               "`tools` must not be an empty array. Either "
                               "provide at least one tool or omit the field "
                               "entirely.");
        return NGX_ERROR;
    }

    if (ngx_http_llm_tool_messages(job, messages) != NGX_OK
        || ngx_http_llm_tool_choice(job, root, tools, &choice) != NGX_OK)
    {
        return NGX_ERROR;
    }

    if (choice == NULL) {
        return NGX_OK;                          /* "none", or no tools */
    }

    if (YAJL_IS_OBJECT(choice)
        || ngx_strcmp(choice->u.string, "required") == 0)
    {
        return ngx_http_llm_tools_forced(job, choice, tools,
                                         rc == NGX_HTTP_LLM_FIELD_ABSENT
                                         || flag);
    }

    /* "auto" */

    kind = LLM_TOOL_PARSER_NONE;

    if (job->tool_parser_conf == NGX_HTTP_LLM_TOOL_PARSER_AUTO) {
        if (llm_model_chat_template(job->model)) {
            kind = llm_tool_parser_detect(llm_chat_template_source(
                                          llm_model_chat_template(job->model)));
        }

        if (kind == LLM_TOOL_PARSER_NONE) {
            ngx_http_llm_job_error(job, NGX_HTTP_BAD_REQUEST, "tool_choice",
                                   "\"auto\" tool choice requires "
                                   "--enable-auto-tool-choice and "
                                   "--tool-call-parser to be set: "
                                   "\"llm_tool_call_parser auto\" found no "
                                   "parser for this model's chat template; "
                                   "name one (hermes, llama3_json, "
                                   "mistral)");
            return NGX_ERROR;
        }

    } else {
        kind = (llm_tool_parser_kind) job->tool_parser_conf;
    }

    if (kind == LLM_TOOL_PARSER_NONE) {
        ngx_http_llm_job_error(job, NGX_HTTP_BAD_REQUEST, "tool_choice",
                               "\"auto\" tool choice requires "
                               "--enable-auto-tool-choice and "
                               "--tool-call-parser to be set "
                               "(llm_tool_call_parser)");
        return NGX_ERROR;
    }

    /* vLLM: tool markup may be special tokens, which the parser must see */
    job->tool_parser = kind;
    job->sp.keep_special_tokens = 1;

    return NGX_OK;
}


/*
 * "required" or a named function: the grammar, and the parser that reads
 * what it forces.  Another constraint on the same output cannot be
 * honoured with it: a 400 (vLLM lets response_format win, silently).
 */

static ngx_int_t
ngx_http_llm_tools_forced(ngx_http_llm_job_t *job, yajl_val choice,
    yajl_val tools, ngx_uint_t parallel)
{
    yajl_val   name;
    ngx_str_t  copy;

    if (job->sp.json_object || job->sp.structured) {
        ngx_http_llm_job_error(job, NGX_HTTP_BAD_REQUEST, "tool_choice",
                               "`tool_choice` %s constrains the output to "
                               "the tools' parameters; it cannot be "
                               "combined with response_format or "
                               "structured_outputs",
                               YAJL_IS_OBJECT(choice) ? "naming a function"
                                                      : "\"required\"");
        return NGX_ERROR;
    }

    if (!YAJL_IS_OBJECT(choice)) {
        job->tool_parser = LLM_TOOL_PARSER_JSON_ARRAY;
        return ngx_http_llm_tools_grammar(job, tools, NULL, parallel);
    }

    name = llm_json_get(llm_json_get(choice, "function"), "name");

    if (ngx_http_llm_job_copy(job, name->u.string, ngx_strlen(name->u.string),
                              &copy)
        != NGX_OK)
    {
        return NGX_ERROR;
    }

    job->tool_parser = LLM_TOOL_PARSER_NAMED;
    job->tool_name = copy;

    return ngx_http_llm_tools_grammar(job, tools, (const char *) copy.data,
                                      parallel);
}


/* *choice: the "auto", "required" or named-function value; NULL: none */

static ngx_int_t
ngx_http_llm_tool_choice(ngx_http_llm_job_t *job, yajl_val root,
    yajl_val tools, yajl_val *choice)
{
    u_char    *p;
    yajl_val   v;

    /* the default with tools: a constant node, never freed */
    static struct yajl_val_s  auto_choice = {
        yajl_t_string, { .string = (char *) "auto" }
    };

    v = llm_json_get(root, "tool_choice");
    *choice = NULL;

    if (v == NULL || YAJL_IS_NULL(v)) {
        if (tools) {
            *choice = &auto_choice;
        }

        return NGX_OK;
    }

    if (YAJL_IS_STRING(v) && ngx_strcmp(v->u.string, "none") == 0) {
        return NGX_OK;
    }

    if (tools == NULL) {
        ngx_http_llm_job_error(job, NGX_HTTP_BAD_REQUEST, "tool_choice",
                               "When using `tool_choice`, `tools` must be "
                               "set.");
        return NGX_ERROR;
    }

    if (YAJL_IS_STRING(v)) {
        if (ngx_strcmp(v->u.string, "auto") != 0
            && ngx_strcmp(v->u.string, "required") != 0)
        {
            p = (u_char *) v->u.string;
            ngx_http_llm_job_error(job, NGX_HTTP_BAD_REQUEST, "tool_choice",
                                   "Invalid value for `tool_choice`: %s! "
                                   "Only named tools, \"none\", \"auto\" or "
                                   "\"required\" are supported.", p);
            return NGX_ERROR;
        }

        *choice = v;
        return NGX_OK;
    }

    if (!YAJL_IS_OBJECT(v)) {
        ngx_http_llm_job_error(job, NGX_HTTP_BAD_REQUEST, "tool_choice",
                               "Invalid value for `tool_choice`: a %s! Only "
                               "named tools, \"none\", \"auto\" or "
                               "\"required\" are supported.",
                               ngx_http_llm_json_type(v));
        return NGX_ERROR;
    }

    if (ngx_http_llm_tool_named(job, v, tools) != NGX_OK) {
        return NGX_ERROR;
    }

    *choice = v;
    return NGX_OK;
}


/* {"type": "function", "function": {"name": "f"}}, f one of the tools */

static ngx_int_t
ngx_http_llm_tool_named(ngx_http_llm_job_t *job, yajl_val choice,
    yajl_val tools)
{
    size_t    i;
    yajl_val  fn, name, tname;

    fn = llm_json_get(choice, "function");

    if (fn == NULL || !YAJL_IS_OBJECT(fn)) {
        ngx_http_llm_job_error(job, NGX_HTTP_BAD_REQUEST, "tool_choice",
                               "Invalid value for `function`: `%s` in "
                               "`tool_choice`! " NGX_HTTP_LLM_TOOL_USAGE,
                               fn ? ngx_http_llm_json_type(fn) : "None");
        return NGX_ERROR;
    }

    name = llm_json_get(fn, "name");

    if (name == NULL) {
        ngx_http_llm_job_error(job, NGX_HTTP_BAD_REQUEST, "tool_choice",
                               "Expected field `name` in `function` in "
                               "`tool_choice`! " NGX_HTTP_LLM_TOOL_USAGE);
        return NGX_ERROR;
    }

    if (!YAJL_IS_STRING(name) || name->u.string[0] == '\0') {
        ngx_http_llm_job_error(job, NGX_HTTP_BAD_REQUEST, "tool_choice",
                               "Invalid `name` in `function`: `%s` in "
                               "`tool_choice`! " NGX_HTTP_LLM_TOOL_USAGE,
                               YAJL_IS_STRING(name)
                               ? "" : ngx_http_llm_json_type(name));
        return NGX_ERROR;
    }

    for (i = 0; YAJL_IS_ARRAY(tools) && i < tools->u.array.len; i++) {
        tname = llm_json_get(llm_json_get(tools->u.array.values[i],
                                          "function"), "name");

        if (tname && YAJL_IS_STRING(tname)
            && ngx_strcmp(tname->u.string, name->u.string) == 0)
        {
            return NGX_OK;
        }
    }

    ngx_http_llm_job_error(job, NGX_HTTP_BAD_REQUEST, "tool_choice",
                           "The tool specified in `tool_choice` does not "
                           "match any of the specified `tools`");
    return NGX_ERROR;
}


/*
 * A tool message answers a call of the assistant message before it (or
 * before the tool messages in between), as OpenAI requires, with OpenAI's
 * messages and params; vLLM leaves it to the template, which renders the
 * orphan or raises.
 */

static ngx_int_t
ngx_http_llm_tool_messages(ngx_http_llm_job_t *job, yajl_val messages)
{
    char      param[64];
    size_t    i, k;
    yajl_val  msg, role, calls, id, cid;

    calls = NULL;

    for (i = 0; messages && YAJL_IS_ARRAY(messages)
                && i < messages->u.array.len; i++)
    {
        msg = messages->u.array.values[i];
        role = llm_json_get(msg, "role");

        if (role == NULL || !YAJL_IS_STRING(role)) {
            continue;               /* ngx_http_llm_chat_messages() says */
        }

        if (ngx_strcmp(role->u.string, "tool") != 0) {
            calls = NULL;

            if (ngx_strcmp(role->u.string, "assistant") == 0) {
                calls = llm_json_get(msg, "tool_calls");

                if (calls && (!YAJL_IS_ARRAY(calls)
                              || calls->u.array.len == 0))
                {
                    calls = NULL;
                }
            }

            continue;
        }

        if (calls == NULL) {
            ngx_snprintf((u_char *) param, sizeof(param),
                         "messages.[%uz].role%Z", i);
            ngx_http_llm_job_error(job, NGX_HTTP_BAD_REQUEST, param,
                                   "Invalid parameter: messages with role "
                                   "'tool' must be a response to a "
                                   "preceeding message with 'tool_calls'.");
            return NGX_ERROR;
        }

        id = llm_json_get(msg, "tool_call_id");

        if (id == NULL || !YAJL_IS_STRING(id)) {
            continue;               /* the template decides */
        }

        for (k = 0; k < calls->u.array.len; k++) {
            cid = llm_json_get(calls->u.array.values[k], "id");

            if (cid == NULL || !YAJL_IS_STRING(cid)
                || ngx_strcmp(cid->u.string, id->u.string) == 0)
            {
                break;              /* ids not given, or this one */
            }
        }

        if (k == calls->u.array.len) {
            ngx_snprintf((u_char *) param, sizeof(param),
                         "messages.[%uz].tool_call_id%Z", i);
            ngx_http_llm_job_error(job, NGX_HTTP_BAD_REQUEST, param,
                                   "Invalid parameter: 'tool_call_id' of "
                                   "'%s' not found in 'tool_calls' of "
                                   "previous message.", id->u.string);
            return NGX_ERROR;
        }
    }

    return NGX_OK;
}


/* ---- the output, on the event loop -------------------------------------- */


/*
 * Feeds the sequence's new text (seq->text from offset from on: chat
 * empties it after each chunk, /responses keeps it) to its parser, and at the end
 * of the sequence finishes it: the content and calls it finds wait in
 * seq->tools for the chunk or the body.  No-op for a chat without tools.
 */

ngx_int_t
ngx_http_llm_tools_feed(ngx_http_llm_seq_t *seq, size_t from)
{
    ngx_http_llm_tools_t  *t;

    if (seq->ctx->job->tool_parser == LLM_TOOL_PARSER_NONE) {
        return NGX_OK;
    }

    t = seq->tools;

    if (t == NULL) {
        t = ngx_http_llm_tools_create(seq);
        if (t == NULL) {
            return NGX_ERROR;
        }
    }

    if (t->finished) {
        return NGX_OK;
    }

    llm_tool_parser_feed(t->parser, (char *) seq->text.elts + from,
                         seq->text.nelts - from, ngx_http_llm_tools_event, t);

    if (seq->finish != LLM_FINISH_NONE) {
        llm_tool_parser_finish(t->parser, ngx_http_llm_tools_event, t);
        t->finished = 1;
    }

    return t->failed ? NGX_ERROR : NGX_OK;
}


static ngx_http_llm_tools_t *
ngx_http_llm_tools_create(ngx_http_llm_seq_t *seq)
{
    ngx_pool_t            *pool;
    ngx_pool_cleanup_t    *cln;
    ngx_http_llm_tools_t  *t;

    pool = seq->ctx->request->pool;

    t = ngx_pcalloc(pool, sizeof(ngx_http_llm_tools_t));
    if (t == NULL) {
        return NULL;
    }

    if (ngx_array_init(&t->content, pool, 64, 1) != NGX_OK
        || ngx_array_init(&t->deltas, pool, 2,
                          sizeof(ngx_http_llm_tool_delta_t))
           != NGX_OK
        || ngx_array_init(&t->ids, pool, 1, sizeof(ngx_str_t)) != NGX_OK)
    {
        return NULL;
    }

    cln = ngx_pool_cleanup_add(pool, 0);
    if (cln == NULL) {
        return NULL;
    }

    t->pool = pool;
    t->kind = seq->ctx->job->tool_parser;
    t->responses = (seq->ctx->job->responses != NULL);
    t->parser = t->kind == LLM_TOOL_PARSER_NAMED
                ? llm_tool_parser_new_named(
                      (const char *) seq->ctx->job->tool_name.data,
                      seq->ctx->job->tool_name.len)
                : llm_tool_parser_new(t->kind);

    cln->handler = ngx_http_llm_tools_cleanup;
    cln->data = t;

    seq->tools = t;

    return t;
}


static void
ngx_http_llm_tools_cleanup(void *data)
{
    ngx_http_llm_tools_t  *t = data;

    llm_tool_parser_free(t->parser);
}


/* the parser's callback: content and deltas wait for the next write */

static void
ngx_http_llm_tools_event(const llm_tool_event *ev, void *data)
{
    ngx_http_llm_tools_t  *t = data;

    u_char                     *p;
    ngx_str_t                  *id;
    ngx_http_llm_tool_delta_t  *d;

    if (t->failed) {
        return;
    }

    if (ev->type == LLM_TOOL_EV_CONTENT) {
        p = ngx_array_push_n(&t->content, ev->len);
        if (p == NULL) {
            t->failed = 1;
            return;
        }

        ngx_memcpy(p, ev->text, ev->len);
        return;
    }

    d = t->deltas.nelts ? (ngx_http_llm_tool_delta_t *) t->deltas.elts
                          + t->deltas.nelts - 1
                        : NULL;

    if (ev->type == LLM_TOOL_EV_ARGS && d && d->index == ev->index) {
        goto args;
    }

    d = ngx_array_push(&t->deltas);
    if (d == NULL
        || ngx_array_init(&d->args, t->pool, 16, 1) != NGX_OK)
    {
        t->failed = 1;
        return;
    }

    d->index = ev->index;
    d->start = 0;
    ngx_str_null(&d->name);

    if (ev->type == LLM_TOOL_EV_CALL) {
        id = ngx_array_push(&t->ids);
        if (id == NULL || ngx_http_llm_tools_id(t, id) != NGX_OK) {
            t->failed = 1;
            return;
        }

        d->start = 1;
        d->name.data = ngx_pnalloc(t->pool, ev->len);
        if (d->name.data == NULL) {
            t->failed = 1;
            return;
        }

        d->name.len = ev->len;
        ngx_memcpy(d->name.data, ev->text, ev->len);
        return;
    }

args:

    p = ngx_array_push_n(&d->args, ev->len);
    if (p == NULL) {
        t->failed = 1;
        return;
    }

    ngx_memcpy(p, ev->text, ev->len);
}


/* vLLM's ids: "chatcmpl-tool-" (Responses: "call_") and 32 hex digits;
 * Mistral's 9 characters */

static ngx_int_t
ngx_http_llm_tools_id(ngx_http_llm_tools_t *t, ngx_str_t *id)
{
    if (t->kind != LLM_TOOL_PARSER_MISTRAL) {
        return ngx_http_llm_random_id(t->pool, id, t->responses
                                                   ? "call_"
                                                   : "chatcmpl-tool-");
    }

    id->data = ngx_pnalloc(t->pool, 10);
    if (id->data == NULL) {
        return NGX_ERROR;
    }

    llm_random_alnum((char *) id->data, 9);
    id->len = 9;

    return NGX_OK;
}


/* whether a chunk has something to say: content or tool-call deltas */

ngx_uint_t
ngx_http_llm_tools_pending(ngx_http_llm_seq_t *seq)
{
    ngx_http_llm_tools_t  *t = seq->tools;

    return t == NULL || t->content.nelts || t->deltas.nelts;
}


/*
 * What the parser found since the last take: the content and the calls'
 * deltas (index, start, name, argument bytes), left for the caller to
 * write; the next feed starts afresh.
 */

void
ngx_http_llm_tools_take(ngx_http_llm_seq_t *seq, ngx_str_t *content,
    ngx_http_llm_tool_delta_t **deltas, ngx_uint_t *n)
{
    ngx_http_llm_tools_t  *t = seq->tools;

    content->data = t->content.elts;
    content->len = t->content.nelts;
    *deltas = t->deltas.elts;
    *n = t->deltas.nelts;

    t->content.nelts = 0;
    t->deltas.nelts = 0;
}


/* call i's id */

ngx_str_t *
ngx_http_llm_tools_call_id(ngx_http_llm_seq_t *seq, ngx_uint_t i)
{
    return (ngx_str_t *) seq->tools->ids.elts + i;
}


/*
 * A chunk's delta (without braces): "content" when there is some (or
 * nothing else), then "tool_calls" as OpenAI streams them: a call's first
 * entry has its index, id, type and name and the arguments so far (""
 * when none yet), later ones the index and more arguments.
 */

void
ngx_http_llm_tools_delta(ngx_http_llm_json_t *j, ngx_http_llm_seq_t *seq)
{
    ngx_str_t                   content, *id;
    ngx_uint_t                  i, n;
    ngx_http_llm_tool_delta_t  *d;

    ngx_http_llm_tools_take(seq, &content, &d, &n);

    if (content.len || n == 0) {
        ngx_http_llm_json_lit(j, "\"content\":");
        ngx_http_llm_json_str(j, content.data, content.len);

        if (n) {
            ngx_http_llm_json_lit(j, ",");
        }
    }

    if (n == 0) {
        return;
    }

    ngx_http_llm_json_lit(j, "\"tool_calls\":[");

    for (i = 0; i < n; i++) {
        if (i) {
            ngx_http_llm_json_lit(j, ",");
        }

        ngx_http_llm_json_lit(j, "{\"index\":");
        ngx_http_llm_json_int(j, d[i].index);

        if (d[i].start) {
            id = ngx_http_llm_tools_call_id(seq, d[i].index);
            ngx_http_llm_json_lit(j, ",\"id\":");
            ngx_http_llm_json_str(j, id->data, id->len);
            ngx_http_llm_json_lit(j, ",\"type\":\"function\","
                                  "\"function\":{\"name\":");
            ngx_http_llm_json_str(j, d[i].name.data, d[i].name.len);
            ngx_http_llm_json_lit(j, ",");

        } else {
            ngx_http_llm_json_lit(j, ",\"function\":{");
        }

        ngx_http_llm_json_lit(j, "\"arguments\":");
        ngx_http_llm_json_str(j, d[i].args.elts, d[i].args.nelts);
        ngx_http_llm_json_lit(j, "}}");
    }

    ngx_http_llm_json_lit(j, "]");
}


/* the message's "content" of a whole body: null when only calls */

void
ngx_http_llm_tools_content(ngx_http_llm_json_t *j, ngx_http_llm_seq_t *seq)
{
    size_t       len;
    const char  *s;

    if (seq->tools == NULL) {
        ngx_http_llm_json_str(j, seq->text.elts, seq->text.nelts);
        return;
    }

    s = llm_tool_parser_content(seq->tools->parser, &len);

    if (s == NULL) {
        ngx_http_llm_json_lit(j, "null");
        return;
    }

    ngx_http_llm_json_str(j, (u_char *) s, len);
}


/* call i's name and arguments, once the sequence ended */

void
ngx_http_llm_tools_call(ngx_http_llm_seq_t *seq, ngx_uint_t i,
    ngx_str_t *name, ngx_str_t *args)
{
    size_t       len;
    const char  *s;

    s = llm_tool_parser_call_name(seq->tools->parser, (int) i, &len);
    name->data = (u_char *) s;
    name->len = len;
    s = llm_tool_parser_call_args(seq->tools->parser, (int) i, &len);
    args->data = (u_char *) s;
    args->len = len;
}


/* the content as text: empty when there is none (Responses) */

void
ngx_http_llm_tools_answer(ngx_http_llm_seq_t *seq, ngx_str_t *text)
{
    size_t       len;
    const char  *s;

    s = llm_tool_parser_content(seq->tools->parser, &len);

    text->data = (u_char *) s;
    text->len = s ? len : 0;
}


/* the calls found, once the sequence ended */

ngx_uint_t
ngx_http_llm_tools_n_calls(ngx_http_llm_seq_t *seq)
{
    ngx_http_llm_tools_t  *t = seq->tools;

    return t && t->finished ? (ngx_uint_t) llm_tool_parser_n_calls(t->parser)
                            : 0;
}


/* the message's "tool_calls": [{"id", "type", "function": {"name",
 * "arguments"}}] as vLLM's ToolCall orders them */

void
ngx_http_llm_tools_calls(ngx_http_llm_json_t *j, ngx_http_llm_seq_t *seq)
{
    int                    i, n;
    size_t                 len;
    ngx_str_t             *ids;
    const char            *s;
    ngx_http_llm_tools_t  *t = seq->tools;

    n = t ? llm_tool_parser_n_calls(t->parser) : 0;

    ngx_http_llm_json_lit(j, "[");

    ids = t ? t->ids.elts : NULL;

    for (i = 0; i < n && (ngx_uint_t) i < t->ids.nelts; i++) {
        if (i) {
            ngx_http_llm_json_lit(j, ",");
        }

        ngx_http_llm_json_lit(j, "{\"id\":");
        ngx_http_llm_json_str(j, ids[i].data, ids[i].len);
        ngx_http_llm_json_lit(j, ",\"type\":\"function\",\"function\":"
                              "{\"name\":");
        s = llm_tool_parser_call_name(t->parser, i, &len);
        ngx_http_llm_json_str(j, (u_char *) s, len);
        ngx_http_llm_json_lit(j, ",\"arguments\":");
        s = llm_tool_parser_call_args(t->parser, i, &len);
        ngx_http_llm_json_str(j, (u_char *) s, len);
        ngx_http_llm_json_lit(j, "}}");
    }

    ngx_http_llm_json_lit(j, "]");
}


/* "tool_calls" once calls were parsed, but for a named function: vLLM's */

const char *
ngx_http_llm_tools_finish_reason(ngx_http_llm_seq_t *seq)
{
    if (ngx_http_llm_tools_n_calls(seq) > 0
        && seq->tools->kind != LLM_TOOL_PARSER_NAMED)
    {
        return "tool_calls";
    }

    return llm_finish_reason_str(seq->finish);
}
