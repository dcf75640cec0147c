
/*
 * ngx_http_llm_responses_input.c -- the thread-pool half of POST
 * .../responses: the request made into what the chat path renders.
 *
 * "input" (a string, or a list of items: messages with text parts,
 * earlier output messages, function_call, function_call_output and
 * reasoning items) becomes chat messages the way vLLM builds them
 * (construct_input_messages), after a system message made of
 * "instructions" and the conversation of "previous_response_id"
 * (ngx_http_llm_store.c); function tools become chat tools; then the chat
 * path renders the model's template and tokenizes.  The fields a response
 * echoes are kept as JSON text (yajl_gen), for the event loop to copy: the
 * body's depth limit (LLM_JSON_MAX_DEPTH) keeps them well within
 * yajl_gen's own, metadata is held to OpenAI's limits, and a yajl_gen
 * failure is a 500, never a broken text.
 */


#include "ngx_http_llm_responses.h"

#include <yajl/yajl_gen.h>


/*
 * yajl_gen with its first failure kept: once a call fails the others do
 * nothing, and ngx_http_llm_gen_done() answers the failure, as
 * ngx_http_llm_json_t does for its own writer.
 */
typedef struct {
    yajl_gen                    g;
    yajl_gen_status             status;
} ngx_http_llm_gen_t;


/* a chat message while input items are turned into messages */
typedef struct {
    const char                 *role;
    ngx_str_t                   content;       /* data NULL: none */
    const char                 *reasoning;
    ngx_array_t                 calls;         /* function_call items */
    yajl_val                    call_id;       /* function_call_output */
} ngx_http_llm_resp_msg_t;


static const char  *ngx_http_llm_echo_keys[] = {
    "instructions", "metadata", "tool_choice", "tools",
    "previous_response_id", "reasoning", "service_tier", "text", "user"
};


static ngx_int_t ngx_http_llm_responses_logprobs(ngx_http_llm_job_t *job,
    yajl_val root);
static ngx_int_t ngx_http_llm_responses_include(ngx_http_llm_job_t *job,
    yajl_val root, const char *what);
static ngx_int_t ngx_http_llm_responses_check(ngx_http_llm_job_t *job,
    yajl_val root);
static ngx_int_t ngx_http_llm_responses_metadata(ngx_http_llm_job_t *job,
    yajl_val root);
static ngx_int_t ngx_http_llm_responses_echo(ngx_http_llm_job_t *job,
    yajl_val root);
static void ngx_http_llm_responses_echo_tools(ngx_http_llm_gen_t *gen,
    yajl_val tools);
static ngx_int_t ngx_http_llm_responses_input(ngx_http_llm_job_t *job,
    yajl_val input, ngx_http_llm_gen_t *gen);
static ngx_int_t ngx_http_llm_responses_item(ngx_http_llm_job_t *job,
    yajl_val item, size_t index, ngx_http_llm_resp_msg_t *msgs,
    ngx_uint_t *n);
static ngx_int_t ngx_http_llm_responses_text(ngx_http_llm_job_t *job,
    yajl_val content, size_t index, ngx_http_llm_resp_msg_t *m);
static void ngx_http_llm_responses_gen_msg(ngx_http_llm_gen_t *gen,
    ngx_http_llm_resp_msg_t *m);
static yajl_val ngx_http_llm_responses_tools(ngx_http_llm_job_t *job,
    yajl_val tools);
static ngx_int_t ngx_http_llm_responses_tool_choice(ngx_http_llm_job_t *job,
    yajl_val root, yajl_val messages, yajl_val tools);
static yajl_val ngx_http_llm_responses_messages(ngx_http_llm_job_t *job,
    yajl_val root, ngx_str_t *prev, ngx_str_t *now);
static yajl_val ngx_http_llm_responses_tree(ngx_http_llm_job_t *job,
    ngx_str_t *text, const char *what);
static ngx_int_t ngx_http_llm_gen_init(ngx_http_llm_job_t *job,
    ngx_http_llm_gen_t *gen);
static ngx_int_t ngx_http_llm_gen_done(ngx_http_llm_job_t *job,
    ngx_http_llm_gen_t *gen, ngx_str_t *text);
static void ngx_http_llm_gen_open(ngx_http_llm_gen_t *gen, yajl_type type);
static void ngx_http_llm_gen_close(ngx_http_llm_gen_t *gen, yajl_type type);
static void ngx_http_llm_gen_value(ngx_http_llm_gen_t *gen, yajl_val v);
static void ngx_http_llm_gen_str(ngx_http_llm_gen_t *gen, const u_char *s,
    size_t len);
static void ngx_http_llm_gen_cstr(ngx_http_llm_gen_t *gen, const char *s);


static const ngx_http_llm_params_conf_t  ngx_http_llm_responses_params = {
    "input",                               /* prompt */
    { "max_output_tokens", NULL },
    -1,                                    /* max_tokens_default */
    ngx_http_llm_responses_logprobs,
    0,                                     /* n */
    0,                                     /* stream_options */
    0,                                     /* prompt_logprobs */
    0                                      /* echo */
};


void
ngx_http_llm_responses_parse(ngx_http_llm_job_t *job, yajl_val root)
{
    yajl_val                   input, tools, messages, v;
    ngx_http_llm_gen_t         gen;
    ngx_int_t                  rc;
    ngx_str_t                  prev, now;
    ngx_http_llm_responses_t  *resp;

    if (ngx_http_llm_params_parse(job, root, &ngx_http_llm_responses_params)
        != NGX_OK)
    {
        return;
    }

    resp = ngx_pcalloc(job->pool, sizeof(ngx_http_llm_responses_t));
    if (resp == NULL) {
        ngx_http_llm_job_nomem(job);
        return;
    }

    job->responses = resp;

    if (ngx_http_llm_responses_check(job, root) != NGX_OK
        || ngx_http_llm_responses_metadata(job, root) != NGX_OK
        || ngx_http_llm_responses_echo(job, root) != NGX_OK)
    {
        return;
    }

    input = llm_json_get(root, "input");

    if (input == NULL
        || !(YAJL_IS_STRING(input) || YAJL_IS_ARRAY(input)))
    {
        ngx_http_llm_job_error(job, NGX_HTTP_BAD_REQUEST, "input",
                               "`input` is required: a string or a list "
                               "of input items, got %s",
                               ngx_http_llm_json_type(input));
        return;
    }

    /* the conversation so far */

    ngx_str_null(&prev);

    v = llm_json_get(root, "previous_response_id");

    if (v && YAJL_IS_STRING(v)) {
        rc = ngx_http_llm_store_messages(v->u.string, job->owner, job->pool,
                                         &prev);

        if (rc == NGX_ERROR) {
            ngx_http_llm_job_nomem(job);
            return;
        }

        if (rc == NGX_DECLINED) {
            job->err_type = "NotFoundError";
            ngx_http_llm_job_error(job, NGX_HTTP_NOT_FOUND,
                                   "previous_response_id", "Response with "
                                   "id '%s' not found.", v->u.string);
            return;
        }
    }

    /* this request's input as messages */

    if (ngx_http_llm_gen_init(job, &gen) != NGX_OK) {
        return;
    }

    ngx_http_llm_gen_open(&gen, yajl_t_array);

    if (ngx_http_llm_responses_input(job, input, &gen) != NGX_OK) {
        yajl_gen_free(gen.g);
        return;
    }

    ngx_http_llm_gen_close(&gen, yajl_t_array);

    if (ngx_http_llm_gen_done(job, &gen, &now) != NGX_OK) {
        return;
    }

    /* the members, without the array's brackets */
    now.data++;
    now.len -= 2;

    messages = ngx_http_llm_responses_messages(job, root, &prev, &now);

    if (messages == NULL) {
        return;
    }

    tools = ngx_http_llm_responses_tools(job, llm_json_get(root, "tools"));

    if (job->status == 0
        && (tools == NULL
            || ngx_http_llm_responses_tool_choice(job, root, messages, tools)
               == NGX_OK)
        && ngx_http_llm_chat_prompt(job, root, messages, tools) == NGX_OK)
    {
        (void) ngx_http_llm_params_finish(job);
    }

    llm_json_free(messages);
    llm_json_free(tools);
}


/* include: ["message.output_text.logprobs"], top_logprobs: N */

static ngx_int_t
ngx_http_llm_responses_logprobs(ngx_http_llm_job_t *job, yajl_val root)
{
    int64_t    n;
    ngx_int_t  rc;

    rc = ngx_http_llm_responses_include(job, root,
                                        "message.output_text.logprobs");
    if (rc == NGX_HTTP_LLM_FIELD_INVALID) {
        return NGX_ERROR;
    }

    if (rc == NGX_HTTP_LLM_FIELD_ABSENT) {
        return NGX_OK;
    }

    rc = ngx_http_llm_job_int(job, root, "top_logprobs", &n);
    if (rc == NGX_HTTP_LLM_FIELD_INVALID) {
        return NGX_ERROR;
    }

    if (rc == NGX_HTTP_LLM_FIELD_ABSENT) {
        n = 0;
    }

    if (n < -1) {
        ngx_http_llm_job_error(job, NGX_HTTP_BAD_REQUEST, "top_logprobs",
                               "logprobs must be non-negative or -1, got "
                               "%L.", n);
        return NGX_ERROR;
    }

    return ngx_http_llm_params_logprobs(job, n, "top_logprobs");
}


/* "include": a list of strings; ABSENT unless it holds "what" */

static ngx_int_t
ngx_http_llm_responses_include(ngx_http_llm_job_t *job, yajl_val root,
    const char *what)
{
    ngx_int_t     rc;
    ngx_uint_t    i;
    ngx_array_t  *include;
    const char  **s;

    rc = ngx_http_llm_job_strings(job, root, "include", 0, 0, 0, &include);
    if (rc != NGX_HTTP_LLM_FIELD_PRESENT) {
        return rc;
    }

    s = include->elts;

    for (i = 0; i < include->nelts; i++) {
        if (ngx_strcmp(s[i], what) == 0) {
            return NGX_HTTP_LLM_FIELD_PRESENT;
        }
    }

    return NGX_HTTP_LLM_FIELD_ABSENT;
}


/* what vLLM refuses, and what this server does not do */

static ngx_int_t
ngx_http_llm_responses_check(ngx_http_llm_job_t *job, yajl_val root)
{
    ngx_int_t   rc;
    ngx_uint_t  flag;
    yajl_val    v;

    rc = ngx_http_llm_job_bool(job, root, "background", &flag);
    if (rc == NGX_HTTP_LLM_FIELD_INVALID) {
        return NGX_ERROR;
    }

    if (rc == NGX_HTTP_LLM_FIELD_PRESENT && flag) {
        ngx_http_llm_job_error(job, NGX_HTTP_BAD_REQUEST, "background",
                               "background mode is not supported: the "
                               "response comes with the request");
        return NGX_ERROR;
    }

    rc = ngx_http_llm_job_bool(job, root, "store", &flag);
    if (rc == NGX_HTTP_LLM_FIELD_INVALID) {
        return NGX_ERROR;
    }

    job->responses->store = (rc == NGX_HTTP_LLM_FIELD_ABSENT || flag);

    rc = ngx_http_llm_job_bool(job, root, "parallel_tool_calls", &flag);
    if (rc == NGX_HTTP_LLM_FIELD_INVALID) {
        return NGX_ERROR;
    }

    job->responses->parallel_tool_calls = (rc == NGX_HTTP_LLM_FIELD_ABSENT
                                           || flag);

    v = llm_json_get(root, "prompt");

    if (v && !YAJL_IS_NULL(v)) {
        ngx_http_llm_job_error(job, NGX_HTTP_BAD_REQUEST, "prompt",
                               "prompt template is not supported");
        return NGX_ERROR;
    }

    v = llm_json_get(root, "truncation");

    if (v && !YAJL_IS_NULL(v)
        && !(YAJL_IS_STRING(v) && ngx_strcmp(v->u.string, "disabled") == 0))
    {
        ngx_http_llm_job_error(job, NGX_HTTP_BAD_REQUEST, "truncation",
                               "only `truncation` \"disabled\" is supported: "
                               "a prompt too long for the model is refused, "
                               "not cut");
        return NGX_ERROR;
    }

    v = llm_json_get(llm_json_get(root, "text"), "format");

    if (v && !YAJL_IS_NULL(v)
        && ngx_http_llm_job_format(job, v, "text.format") != NGX_OK)
    {
        return NGX_ERROR;
    }

    v = llm_json_get(root, "previous_response_id");

    if (v && !YAJL_IS_NULL(v) && !YAJL_IS_STRING(v)) {
        ngx_http_llm_job_error(job, NGX_HTTP_BAD_REQUEST,
                               "previous_response_id", "`previous_response_"
                               "id` must be a string, got %s",
                               ngx_http_llm_json_type(v));
        return NGX_ERROR;
    }

    v = llm_json_get(root, "instructions");

    if (v && !YAJL_IS_NULL(v) && !YAJL_IS_STRING(v)) {
        ngx_http_llm_job_error(job, NGX_HTTP_BAD_REQUEST, "instructions",
                               "`instructions` must be a string, got %s",
                               ngx_http_llm_json_type(v));
        return NGX_ERROR;
    }

    return NGX_OK;
}


/*
 * OpenAI's Metadata: at most 16 pairs, keys of at most 64 characters,
 * string values of at most 512, with OpenAI's messages (vLLM takes any
 * dict of strings).  It is echoed in every response object and stored.
 */

static ngx_int_t
ngx_http_llm_responses_metadata(ngx_http_llm_job_t *job, yajl_val root)
{
    size_t       i, n;
    yajl_val     meta, v;
    const char  *key;

    meta = llm_json_get(root, "metadata");

    if (meta == NULL || YAJL_IS_NULL(meta)) {
        return NGX_OK;
    }

    if (!YAJL_IS_OBJECT(meta)) {
        ngx_http_llm_job_error(job, NGX_HTTP_BAD_REQUEST, "metadata",
                               "Invalid type for 'metadata': expected an "
                               "object, but got %s instead.",
                               ngx_http_llm_json_type(meta));
        return NGX_ERROR;
    }

    if (meta->u.object.len > NGX_HTTP_LLM_MAX_METADATA) {
        ngx_http_llm_job_error(job, NGX_HTTP_BAD_REQUEST, "metadata",
                               "Invalid 'metadata': too many properties. "
                               "Expected an object with at most %d "
                               "properties, but got an object with %uz "
                               "properties instead.",
                               NGX_HTTP_LLM_MAX_METADATA,
                               meta->u.object.len);
        return NGX_ERROR;
    }

    for (i = 0; i < meta->u.object.len; i++) {
        key = meta->u.object.keys[i];
        v = meta->u.object.values[i];

        n = ngx_http_llm_json_chars(key);

        if (n > NGX_HTTP_LLM_MAX_METADATA_KEY) {
            ngx_http_llm_job_error(job, NGX_HTTP_BAD_REQUEST, "metadata",
                                   "Invalid 'metadata': key too long. "
                                   "Expected a key with maximum length %d, "
                                   "but got a key with length %uz instead.",
                                   NGX_HTTP_LLM_MAX_METADATA_KEY, n);
            return NGX_ERROR;
        }

        if (!YAJL_IS_STRING(v)) {
            ngx_http_llm_job_error(job, NGX_HTTP_BAD_REQUEST, "metadata",
                                   "Invalid type for 'metadata.%s': "
                                   "expected a string, but got %s instead.",
                                   key, ngx_http_llm_json_type(v));
            return NGX_ERROR;
        }

        n = ngx_http_llm_json_chars(v->u.string);

        if (n > NGX_HTTP_LLM_MAX_METADATA_VALUE) {
            ngx_http_llm_job_error(job, NGX_HTTP_BAD_REQUEST, "metadata",
                                   "Invalid 'metadata.%s': string too long. "
                                   "Expected a string with maximum length "
                                   "%d, but got a string with length %uz "
                                   "instead.", key,
                                   NGX_HTTP_LLM_MAX_METADATA_VALUE, n);
            return NGX_ERROR;
        }
    }

    return NGX_OK;
}


static ngx_int_t
ngx_http_llm_responses_echo(ngx_http_llm_job_t *job, yajl_val root)
{
    yajl_val                   v;
    ngx_uint_t                 i;
    ngx_http_llm_gen_t         gen;
    ngx_http_llm_responses_t  *resp;

    resp = job->responses;

    for (i = 0; i < NGX_HTTP_LLM_ECHO_N; i++) {
        v = llm_json_get(root, ngx_http_llm_echo_keys[i]);

        if (v == NULL || YAJL_IS_NULL(v)) {
            continue;
        }

        if (ngx_http_llm_gen_init(job, &gen) != NGX_OK) {
            return NGX_ERROR;
        }

        if (i == NGX_HTTP_LLM_ECHO_TOOLS && YAJL_IS_ARRAY(v)) {
            ngx_http_llm_responses_echo_tools(&gen, v);

        } else {
            ngx_http_llm_gen_value(&gen, v);
        }

        if (ngx_http_llm_gen_done(job, &gen, &resp->echo[i]) != NGX_OK) {
            return NGX_ERROR;
        }
    }

    return NGX_OK;
}


/*
 * The tools as they came, each with the keys OpenAI's FunctionTool always
 * has: "parameters" and "strict" null when the request left them out, as
 * vLLM's echo (a pydantic dump) gives them.
 */

static void
ngx_http_llm_responses_echo_tools(ngx_http_llm_gen_t *gen, yajl_val tools)
{
    size_t       i, k;
    yajl_val     tool;
    const char  *keys[] = { "parameters", "strict" };

    ngx_http_llm_gen_open(gen, yajl_t_array);

    for (i = 0; i < tools->u.array.len; i++) {
        tool = tools->u.array.values[i];

        if (!YAJL_IS_OBJECT(tool)) {
            ngx_http_llm_gen_value(gen, tool);
            continue;
        }

        ngx_http_llm_gen_open(gen, yajl_t_object);

        for (k = 0; k < tool->u.object.len; k++) {
            ngx_http_llm_gen_cstr(gen, tool->u.object.keys[k]);
            ngx_http_llm_gen_value(gen, tool->u.object.values[k]);
        }

        for (k = 0; k < sizeof(keys) / sizeof(keys[0]); k++) {
            if (llm_json_get(tool, keys[k]) == NULL) {
                ngx_http_llm_gen_cstr(gen, keys[k]);
                ngx_http_llm_gen_value(gen, NULL);
            }
        }

        ngx_http_llm_gen_close(gen, yajl_t_object);
    }

    ngx_http_llm_gen_close(gen, yajl_t_array);
}


/*
 * The input as chat messages, into the JSON array open in g:
 * a string is one user message; items follow vLLM's
 * construct_chat_messages_with_tool_call() (an assistant's function calls
 * and reasoning join the assistant message before them).
 */

static ngx_int_t
ngx_http_llm_responses_input(ngx_http_llm_job_t *job, yajl_val input,
    ngx_http_llm_gen_t *gen)
{
    size_t                    i;
    ngx_uint_t                n;
    ngx_http_llm_resp_msg_t  *msgs;

    if (YAJL_IS_STRING(input)) {
        ngx_http_llm_gen_open(gen, yajl_t_object);
        ngx_http_llm_gen_cstr(gen, "role");
        ngx_http_llm_gen_cstr(gen, "user");
        ngx_http_llm_gen_cstr(gen, "content");
        ngx_http_llm_gen_cstr(gen, input->u.string);
        ngx_http_llm_gen_close(gen, yajl_t_object);
        return NGX_OK;
    }

    msgs = ngx_pcalloc(job->pool, (input->u.array.len + 1)
                                  * sizeof(ngx_http_llm_resp_msg_t));
    if (msgs == NULL) {
        ngx_http_llm_job_nomem(job);
        return NGX_ERROR;
    }

    n = 0;

    for (i = 0; i < input->u.array.len; i++) {
        if (ngx_http_llm_responses_item(job, input->u.array.values[i], i,
                                        msgs, &n)
            != NGX_OK)
        {
            return NGX_ERROR;
        }
    }

    for (i = 0; i < n; i++) {
        ngx_http_llm_responses_gen_msg(gen, &msgs[i]);
    }

    return NGX_OK;
}


static ngx_int_t
ngx_http_llm_responses_item(ngx_http_llm_job_t *job, yajl_val item,
    size_t index, ngx_http_llm_resp_msg_t *msgs, ngx_uint_t *n)
{
    const char               *type, *role;
    yajl_val                  v, *call;
    ngx_http_llm_resp_msg_t  *m, *prev;

    if (!YAJL_IS_OBJECT(item)) {
        ngx_http_llm_job_error(job, NGX_HTTP_BAD_REQUEST, "input",
                               "input[%uz] must be an object, got %s", index,
                               ngx_http_llm_json_type(item));
        return NGX_ERROR;
    }

    v = llm_json_get(item, "type");
    type = YAJL_IS_STRING(v) ? v->u.string : "message";

    v = llm_json_get(item, "role");
    role = YAJL_IS_STRING(v) ? v->u.string : NULL;

    /* the assistant message the item may join */
    prev = (*n && ngx_strcmp(msgs[*n - 1].role, "assistant") == 0)
           ? &msgs[*n - 1] : NULL;

    m = &msgs[*n];

    if (ngx_strcmp(type, "message") == 0) {

        if (role == NULL
            || (ngx_strcmp(role, "user") != 0
                && ngx_strcmp(role, "assistant") != 0
                && ngx_strcmp(role, "system") != 0
                && ngx_strcmp(role, "developer") != 0))
        {
            ngx_http_llm_job_error(job, NGX_HTTP_BAD_REQUEST, "input",
                                   "input[%uz].role must be \"user\", "
                                   "\"assistant\", \"system\" or "
                                   "\"developer\"", index);
            return NGX_ERROR;
        }

        if (ngx_strcmp(role, "assistant") == 0 && prev
            && prev->content.data == NULL)
        {
            m = prev;

        } else {
            m->role = role;
            (*n)++;
        }

        return ngx_http_llm_responses_text(job,
                                           llm_json_get(item,
                                                                 "content"),
                                           index, m);
    }

    if (ngx_strcmp(type, "function_call") == 0) {

        if (!YAJL_IS_STRING(llm_json_get(item, "name"))
            || !YAJL_IS_STRING(llm_json_get(item, "call_id")))
        {
            ngx_http_llm_job_error(job, NGX_HTTP_BAD_REQUEST, "input",
                                   "input[%uz]: a function_call needs "
                                   "\"call_id\" and \"name\"", index);
            return NGX_ERROR;
        }

        if (prev == NULL) {
            m->role = "assistant";
            prev = m;
            (*n)++;
        }

        if (prev->calls.elts == NULL
            && ngx_array_init(&prev->calls, job->pool, 1, sizeof(yajl_val))
               != NGX_OK)
        {
            ngx_http_llm_job_nomem(job);
            return NGX_ERROR;
        }

        call = ngx_array_push(&prev->calls);
        if (call == NULL) {
            ngx_http_llm_job_nomem(job);
            return NGX_ERROR;
        }

        *call = item;

        return NGX_OK;
    }

    if (ngx_strcmp(type, "function_call_output") == 0) {
        v = llm_json_get(item, "output");

        if (!YAJL_IS_STRING(v)
            || !YAJL_IS_STRING(llm_json_get(item, "call_id")))
        {
            ngx_http_llm_job_error(job, NGX_HTTP_BAD_REQUEST, "input",
                                   "input[%uz]: a function_call_output "
                                   "needs \"call_id\" and an \"output\" "
                                   "string", index);
            return NGX_ERROR;
        }

        m->role = "tool";
        m->call_id = llm_json_get(item, "call_id");
        (*n)++;

        return ngx_http_llm_responses_text(job, v, index, m);
    }

    if (ngx_strcmp(type, "reasoning") == 0) {
        v = llm_json_get(item, "content");

        if (!YAJL_IS_ARRAY(v) || v->u.array.len == 0) {
            v = llm_json_get(item, "summary");
        }

        v = YAJL_IS_ARRAY(v) && v->u.array.len
            ? llm_json_get(v->u.array.values[0], "text") : NULL;

        if (prev && prev->reasoning == NULL) {
            m = prev;

        } else {
            m->role = "assistant";
            (*n)++;
        }

        m->reasoning = YAJL_IS_STRING(v) ? v->u.string : "";

        return NGX_OK;
    }

    ngx_http_llm_job_error(job, NGX_HTTP_BAD_REQUEST, "input",
                           "input[%uz]: items of type \"%s\" are not "
                           "supported: use messages, function_call, "
                           "function_call_output or reasoning items",
                           index, type);
    return NGX_ERROR;
}


/* a message's content: a string, or text parts joined with "\n" */

static ngx_int_t
ngx_http_llm_responses_text(ngx_http_llm_job_t *job, yajl_val content,
    size_t index, ngx_http_llm_resp_msg_t *m)
{
    size_t      bad;
    ngx_int_t   rc;

    static const char  *types[] = { "input_text", "output_text", "text",
                                    NULL };

    /* the text stays in the tree until the messages are generated */

    if (YAJL_IS_STRING(content)) {
        m->content.data = (u_char *) content->u.string;
        m->content.len = ngx_strlen(content->u.string);
        return NGX_OK;
    }

    if (!YAJL_IS_ARRAY(content)) {
        ngx_http_llm_job_error(job, NGX_HTTP_BAD_REQUEST, "input",
                               "input[%uz].content must be a string or a "
                               "list of content parts, got %s", index,
                               ngx_http_llm_json_type(content));
        return NGX_ERROR;
    }

    rc = ngx_http_llm_json_join_text(content, types, 0, job->pool,
                                     &m->content, &bad);

    if (rc == NGX_DECLINED) {
        ngx_http_llm_job_error(job, NGX_HTTP_BAD_REQUEST, "input",
                               "input[%uz].content[%uz]: only "
                               "\"input_text\" and \"output_text\" "
                               "parts are supported", index, bad);
        return NGX_ERROR;
    }

    if (rc == NGX_ERROR) {
        ngx_http_llm_job_nomem(job);
        return NGX_ERROR;
    }

    return NGX_OK;
}


static void
ngx_http_llm_responses_gen_msg(ngx_http_llm_gen_t *gen,
    ngx_http_llm_resp_msg_t *m)
{
    yajl_val    call, args, *calls;
    ngx_uint_t  i;

    ngx_http_llm_gen_open(gen, yajl_t_object);
    ngx_http_llm_gen_cstr(gen, "role");
    ngx_http_llm_gen_cstr(gen, m->role);

    if (m->content.data) {
        ngx_http_llm_gen_cstr(gen, "content");
        ngx_http_llm_gen_str(gen, m->content.data, m->content.len);
    }

    if (m->reasoning) {
        ngx_http_llm_gen_cstr(gen, "reasoning");
        ngx_http_llm_gen_cstr(gen, m->reasoning);
    }

    if (m->calls.nelts) {
        ngx_http_llm_gen_cstr(gen, "tool_calls");
        ngx_http_llm_gen_open(gen, yajl_t_array);

        calls = m->calls.elts;

        for (i = 0; i < m->calls.nelts; i++) {
            call = calls[i];
            args = llm_json_get(call, "arguments");

            ngx_http_llm_gen_open(gen, yajl_t_object);
            ngx_http_llm_gen_cstr(gen, "id");
            ngx_http_llm_gen_value(gen, llm_json_get(call, "call_id"));
            ngx_http_llm_gen_cstr(gen, "type");
            ngx_http_llm_gen_cstr(gen, "function");
            ngx_http_llm_gen_cstr(gen, "function");
            ngx_http_llm_gen_open(gen, yajl_t_object);
            ngx_http_llm_gen_cstr(gen, "name");
            ngx_http_llm_gen_value(gen, llm_json_get(call, "name"));
            ngx_http_llm_gen_cstr(gen, "arguments");
            ngx_http_llm_gen_cstr(gen, YAJL_IS_STRING(args) ? args->u.string
                                                            : "");
            ngx_http_llm_gen_close(gen, yajl_t_object);
            ngx_http_llm_gen_close(gen, yajl_t_object);
        }

        ngx_http_llm_gen_close(gen, yajl_t_array);
    }

    if (m->call_id) {
        ngx_http_llm_gen_cstr(gen, "tool_call_id");
        ngx_http_llm_gen_value(gen, m->call_id);
    }

    ngx_http_llm_gen_close(gen, yajl_t_object);
}


/*
 * tool_choice as chat's (ngx_http_llm_tools_parse(), on a root made of
 * the chat forms): "none", "auto", "required", {"type": "function",
 * "name": "f"} (chat's {"type": "function", "function": {"name": "f"}}),
 * and parallel_tool_calls.  "auto" (the default) without
 * llm_tool_call_parser leaves the model's answer a message, as before
 * tool calls were parsed here (chat answers vLLM's 400).
 */

static ngx_int_t
ngx_http_llm_responses_tool_choice(ngx_http_llm_job_t *job, yajl_val root,
    yajl_val messages, yajl_val tools)
{
    yajl_val            v, name, type, chat;
    ngx_int_t           rc;
    ngx_str_t           text;
    ngx_http_llm_gen_t  gen;

    v = llm_json_get(root, "tool_choice");

    if ((v == NULL || YAJL_IS_NULL(v)
         || (YAJL_IS_STRING(v) && ngx_strcmp(v->u.string, "auto") == 0))
        && job->tool_parser_conf == LLM_TOOL_PARSER_NONE)
    {
        return NGX_OK;
    }

    if (ngx_http_llm_gen_init(job, &gen) != NGX_OK) {
        return NGX_ERROR;
    }

    ngx_http_llm_gen_open(&gen, yajl_t_object);

    if (v && YAJL_IS_OBJECT(v)) {
        type = llm_json_get(v, "type");
        name = llm_json_get(v, "name");

        if (!YAJL_IS_STRING(type)
            || ngx_strcmp(type->u.string, "function") != 0)
        {
            yajl_gen_free(gen.g);
            ngx_http_llm_job_error(job, NGX_HTTP_BAD_REQUEST, "tool_choice",
                                   "`tool_choice` must be \"none\", "
                                   "\"auto\", \"required\" or "
                                   "{\"type\": \"function\", \"name\": "
                                   "...}");
            return NGX_ERROR;
        }

        ngx_http_llm_gen_cstr(&gen, "tool_choice");
        ngx_http_llm_gen_open(&gen, yajl_t_object);
        ngx_http_llm_gen_cstr(&gen, "type");
        ngx_http_llm_gen_cstr(&gen, "function");
        ngx_http_llm_gen_cstr(&gen, "function");
        ngx_http_llm_gen_open(&gen, yajl_t_object);

        if (name) {
            ngx_http_llm_gen_cstr(&gen, "name");
            ngx_http_llm_gen_value(&gen, name);
        }

        ngx_http_llm_gen_close(&gen, yajl_t_object);
        ngx_http_llm_gen_close(&gen, yajl_t_object);

    } else if (v) {
        ngx_http_llm_gen_cstr(&gen, "tool_choice");
        ngx_http_llm_gen_value(&gen, v);
    }

    v = llm_json_get(root, "parallel_tool_calls");

    if (v) {
        ngx_http_llm_gen_cstr(&gen, "parallel_tool_calls");
        ngx_http_llm_gen_value(&gen, v);
    }

    ngx_http_llm_gen_close(&gen, yajl_t_object);

    if (ngx_http_llm_gen_done(job, &gen, &text) != NGX_OK) {
        return NGX_ERROR;
    }

    chat = ngx_http_llm_responses_tree(job, &text, "tool_choice");
    if (chat == NULL) {
        return NGX_ERROR;
    }

    rc = ngx_http_llm_tools_parse(job, chat, messages, tools);
    llm_json_free(chat);

    return rc;
}


/*
 * Responses' function tools ({"type": "function", "name", "description",
 * "parameters"}) as chat tools for the template, as vLLM converts them;
 * other tool types (web search, MCP, ...) run on the server in OpenAI's
 * API and are refused here.  Returns a tree to free, or NULL.
 */

static yajl_val
ngx_http_llm_responses_tools(ngx_http_llm_job_t *job, yajl_val tools)
{
    size_t              i;
    yajl_val            tool, type;
    ngx_str_t           text;
    ngx_http_llm_gen_t  gen;

    if (job->status || tools == NULL || YAJL_IS_NULL(tools)) {
        return NULL;
    }

    if (!YAJL_IS_ARRAY(tools)) {
        ngx_http_llm_job_error(job, NGX_HTTP_BAD_REQUEST, "tools",
                               "`tools` must be a list of tools, got %s",
                               ngx_http_llm_json_type(tools));
        return NULL;
    }

    if (tools->u.array.len == 0) {
        return NULL;
    }

    if (ngx_http_llm_gen_init(job, &gen) != NGX_OK) {
        return NULL;
    }

    ngx_http_llm_gen_open(&gen, yajl_t_array);

    for (i = 0; i < tools->u.array.len; i++) {
        tool = tools->u.array.values[i];
        type = llm_json_get(tool, "type");

        if (!YAJL_IS_STRING(type)
            || ngx_strcmp(type->u.string, "function") != 0
            || !YAJL_IS_STRING(llm_json_get(tool, "name")))
        {
            yajl_gen_free(gen.g);
            ngx_http_llm_job_error(job, NGX_HTTP_BAD_REQUEST, "tools",
                                   "tools[%uz]: only function tools "
                                   "({\"type\": \"function\", \"name\": "
                                   "...}) are supported", i);
            return NULL;
        }

        ngx_http_llm_gen_open(&gen, yajl_t_object);
        ngx_http_llm_gen_cstr(&gen, "type");
        ngx_http_llm_gen_cstr(&gen, "function");
        ngx_http_llm_gen_cstr(&gen, "function");
        ngx_http_llm_gen_open(&gen, yajl_t_object);
        ngx_http_llm_gen_cstr(&gen, "name");
        ngx_http_llm_gen_value(&gen, llm_json_get(tool, "name"));
        ngx_http_llm_gen_cstr(&gen, "description");
        ngx_http_llm_gen_value(&gen, llm_json_get(tool, "description"));
        ngx_http_llm_gen_cstr(&gen, "parameters");
        ngx_http_llm_gen_value(&gen, llm_json_get(tool, "parameters"));
        ngx_http_llm_gen_close(&gen, yajl_t_object);
        ngx_http_llm_gen_close(&gen, yajl_t_object);
    }

    ngx_http_llm_gen_close(&gen, yajl_t_array);

    if (ngx_http_llm_gen_done(job, &gen, &text) != NGX_OK) {
        return NULL;
    }

    return ngx_http_llm_responses_tree(job, &text, "tools");
}


/*
 * All the messages the model sees: the system message of "instructions",
 * the stored conversation (a JSON array), this input (array members).
 * The conversation without the system message is kept for the store.
 * Returns a tree to free, or NULL with the error set.
 */

static yajl_val
ngx_http_llm_responses_messages(ngx_http_llm_job_t *job, yajl_val root,
    ngx_str_t *prev, ngx_str_t *now)
{
    u_char                    *p;
    yajl_val                   v;
    ngx_str_t                  sys, text, *history;
    ngx_http_llm_gen_t         gen;
    ngx_http_llm_responses_t  *resp;

    resp = job->responses;
    history = &resp->history;

    /* the stored array without its brackets */
    if (prev->len >= 2) {
        prev->data++;
        prev->len -= 2;
    }

    history->data = ngx_pnalloc(job->pool, prev->len + 1 + now->len + 1);
    if (history->data == NULL) {
        ngx_http_llm_job_nomem(job);
        return NULL;
    }

    p = ngx_cpymem(history->data, prev->data, prev->len);

    if (prev->len && now->len) {
        *p++ = ',';
    }

    p = ngx_cpymem(p, now->data, now->len);
    *p = '\0';
    history->len = p - history->data;

    ngx_str_null(&sys);

    v = llm_json_get(root, "instructions");

    if (v && YAJL_IS_STRING(v)) {
        if (ngx_http_llm_gen_init(job, &gen) != NGX_OK) {
            return NULL;
        }

        ngx_http_llm_gen_open(&gen, yajl_t_object);
        ngx_http_llm_gen_cstr(&gen, "role");
        ngx_http_llm_gen_cstr(&gen, "system");
        ngx_http_llm_gen_cstr(&gen, "content");
        ngx_http_llm_gen_cstr(&gen, v->u.string);
        ngx_http_llm_gen_close(&gen, yajl_t_object);

        if (ngx_http_llm_gen_done(job, &gen, &sys) != NGX_OK) {
            return NULL;
        }
    }

    if (sys.len + history->len == 0) {
        ngx_http_llm_job_error(job, NGX_HTTP_BAD_REQUEST, "input",
                               "`input` must contain at least one item");
        return NULL;
    }

    text.data = ngx_pnalloc(job->pool, 1 + sys.len + 1 + history->len + 1);
    if (text.data == NULL) {
        ngx_http_llm_job_nomem(job);
        return NULL;
    }

    p = text.data;
    *p++ = '[';
    p = ngx_cpymem(p, sys.data, sys.len);

    if (sys.len && history->len) {
        *p++ = ',';
    }

    p = ngx_cpymem(p, history->data, history->len);
    *p++ = ']';
    text.len = p - text.data;

    return ngx_http_llm_responses_tree(job, &text, "conversation");
}


/*
 * A tree of what this file wrote (the tools, the conversation with its
 * stored part).  It is written from a tree parsed with the same depth
 * limit and no deeper, so it parses: a failure is this server's.
 */

static yajl_val
ngx_http_llm_responses_tree(ngx_http_llm_job_t *job, ngx_str_t *text,
    const char *what)
{
    char      err[LLM_ERR_LEN];
    yajl_val  tree;

    tree = llm_json_parse((const char *) text->data, text->len,
                          LLM_JSON_MAX_DEPTH, err);

    if (tree == NULL) {
        ngx_http_llm_job_error(job, NGX_HTTP_INTERNAL_SERVER_ERROR, NULL,
                               "the %s cannot be read back: %s", what, err);
    }

    return tree;
}


/* the yajl_gen helpers */

static ngx_int_t
ngx_http_llm_gen_init(ngx_http_llm_job_t *job, ngx_http_llm_gen_t *gen)
{
    gen->g = yajl_gen_alloc(NULL);
    gen->status = yajl_gen_status_ok;

    if (gen->g == NULL) {
        ngx_http_llm_job_nomem(job);
        return NGX_ERROR;
    }

    return NGX_OK;
}


/* what was generated, NUL-terminated in the pool; the generator is freed */

static ngx_int_t
ngx_http_llm_gen_done(ngx_http_llm_job_t *job, ngx_http_llm_gen_t *gen,
    ngx_str_t *text)
{
    size_t                n;
    ngx_int_t             rc;
    const unsigned char  *buf;

    static const char  *errors[] = {
        "", "a key that is not a string", "nesting too deep",
        "a call in the error state", "a value after the end",
        "a number that is not finite", "no buffer", "invalid UTF-8"
    };

    if (gen->status == yajl_gen_status_ok) {
        gen->status = yajl_gen_get_buf(gen->g, &buf, &n);
    }

    if (gen->status != yajl_gen_status_ok) {
        ngx_http_llm_job_error(job, NGX_HTTP_INTERNAL_SERVER_ERROR, NULL,
                               "writing JSON failed: %s (yajl_gen status "
                               "%d)",
                               (size_t) gen->status
                               < sizeof(errors) / sizeof(errors[0])
                               ? errors[gen->status] : "unknown",
                               (int) gen->status);
        rc = NGX_ERROR;

    } else {
        rc = ngx_http_llm_job_copy(job, (const char *) buf, n, text);
    }

    yajl_gen_free(gen->g);

    return rc;
}


static void
ngx_http_llm_gen_open(ngx_http_llm_gen_t *gen, yajl_type type)
{
    if (gen->status == yajl_gen_status_ok) {
        gen->status = (type == yajl_t_object) ? yajl_gen_map_open(gen->g)
                                              : yajl_gen_array_open(gen->g);
    }
}


static void
ngx_http_llm_gen_close(ngx_http_llm_gen_t *gen, yajl_type type)
{
    if (gen->status == yajl_gen_status_ok) {
        gen->status = (type == yajl_t_object) ? yajl_gen_map_close(gen->g)
                                              : yajl_gen_array_close(gen->g);
    }
}


/*
 * A value of a parsed tree, numbers in their original spelling.  It
 * recurses once per level: the tree is at most LLM_JSON_MAX_DEPTH deep.
 */

static void
ngx_http_llm_gen_value(ngx_http_llm_gen_t *gen, yajl_val v)
{
    size_t  i;

    if (gen->status != yajl_gen_status_ok) {
        return;
    }

    if (v == NULL) {
        gen->status = yajl_gen_null(gen->g);
        return;
    }

    switch (v->type) {

    case yajl_t_string:
        ngx_http_llm_gen_cstr(gen, v->u.string);
        break;

    case yajl_t_number:
        gen->status = yajl_gen_number(gen->g, v->u.number.r,
                                      ngx_strlen(v->u.number.r));
        break;

    case yajl_t_object:
        ngx_http_llm_gen_open(gen, yajl_t_object);

        for (i = 0; i < v->u.object.len; i++) {
            ngx_http_llm_gen_cstr(gen, v->u.object.keys[i]);
            ngx_http_llm_gen_value(gen, v->u.object.values[i]);
        }

        ngx_http_llm_gen_close(gen, yajl_t_object);
        break;

    case yajl_t_array:
        ngx_http_llm_gen_open(gen, yajl_t_array);

        for (i = 0; i < v->u.array.len; i++) {
            ngx_http_llm_gen_value(gen, v->u.array.values[i]);
        }

        ngx_http_llm_gen_close(gen, yajl_t_array);
        break;

    case yajl_t_true:
    case yajl_t_false:
        gen->status = yajl_gen_bool(gen->g, v->type == yajl_t_true);
        break;

    default:
        gen->status = yajl_gen_null(gen->g);
        break;
    }
}


static void
ngx_http_llm_gen_str(ngx_http_llm_gen_t *gen, const u_char *s, size_t len)
{
    if (gen->status == yajl_gen_status_ok) {
        gen->status = yajl_gen_string(gen->g, s, len);
    }
}


static void
ngx_http_llm_gen_cstr(ngx_http_llm_gen_t *gen, const char *s)
{
    ngx_http_llm_gen_str(gen, (const u_char *) s, ngx_strlen(s));
}
