
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
 * echoes are kept as JSON text (yajl_gen), for the event loop to copy.
 */


#include "ngx_http_llm_responses.h"

#include <yajl/yajl_gen.h>


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
static ngx_int_t ngx_http_llm_responses_echo(ngx_http_llm_job_t *job,
    yajl_val root);
static ngx_int_t ngx_http_llm_responses_input(ngx_http_llm_job_t *job,
    yajl_val input, yajl_gen g);
static ngx_int_t ngx_http_llm_responses_item(ngx_http_llm_job_t *job,
    yajl_val item, size_t index, ngx_http_llm_resp_msg_t *msgs,
    ngx_uint_t *n);
static ngx_int_t ngx_http_llm_responses_text(ngx_http_llm_job_t *job,
    yajl_val content, size_t index, ngx_http_llm_resp_msg_t *m);
static void ngx_http_llm_responses_gen_msg(yajl_gen g,
    ngx_http_llm_resp_msg_t *m);
static yajl_val ngx_http_llm_responses_tools(ngx_http_llm_job_t *job,
    yajl_val tools);
static yajl_val ngx_http_llm_responses_messages(ngx_http_llm_job_t *job,
    yajl_val root, ngx_str_t *prev, ngx_str_t *now);
static ngx_int_t ngx_http_llm_gen_text(ngx_http_llm_job_t *job, yajl_gen g,
    ngx_str_t *text);
static void ngx_http_llm_gen_value(yajl_gen g, yajl_val v);
static void ngx_http_llm_gen_cstr(yajl_gen g, const char *s);


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
    yajl_gen                   g;
    yajl_val                   input, tools, messages, v;
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
        rc = ngx_http_llm_store_messages(v->u.string, job->pool, &prev);

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

    g = yajl_gen_alloc(NULL);
    if (g == NULL) {
        ngx_http_llm_job_nomem(job);
        return;
    }

    yajl_gen_array_open(g);

    if (ngx_http_llm_responses_input(job, input, g) != NGX_OK) {
        yajl_gen_free(g);
        return;
    }

    yajl_gen_array_close(g);

    rc = ngx_http_llm_gen_text(job, g, &now);
    yajl_gen_free(g);

    if (rc != NGX_OK) {
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
        && ngx_http_llm_chat_prompt(job, root, messages, tools) == NGX_OK)
    {
        (void) ngx_http_llm_params_finish(job);
    }

    yajl_tree_free(messages);
    yajl_tree_free(tools);
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

    rc = ngx_http_llm_job_strings(job, root, "include", 0, &include);
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


static ngx_int_t
ngx_http_llm_responses_echo(ngx_http_llm_job_t *job, yajl_val root)
{
    yajl_gen                   g;
    yajl_val                   v;
    ngx_int_t                  rc;
    ngx_uint_t                 i;
    ngx_http_llm_responses_t  *resp;

    resp = job->responses;

    for (i = 0; i < NGX_HTTP_LLM_ECHO_N; i++) {
        v = llm_json_get(root, ngx_http_llm_echo_keys[i]);

        if (v == NULL || YAJL_IS_NULL(v)) {
            continue;
        }

        g = yajl_gen_alloc(NULL);
        if (g == NULL) {
            ngx_http_llm_job_nomem(job);
            return NGX_ERROR;
        }

        ngx_http_llm_gen_value(g, v);
        rc = ngx_http_llm_gen_text(job, g, &resp->echo[i]);
        yajl_gen_free(g);

        if (rc != NGX_OK) {
            return NGX_ERROR;
        }
    }

    return NGX_OK;
}


/*
 * The input as chat messages, into the JSON array open in g:
 * a string is one user message; items follow vLLM's
 * construct_chat_messages_with_tool_call() (an assistant's function calls
 * and reasoning join the assistant message before them).
 */

static ngx_int_t
ngx_http_llm_responses_input(ngx_http_llm_job_t *job, yajl_val input,
    yajl_gen g)
{
    size_t                    i;
    ngx_uint_t                n;
    ngx_http_llm_resp_msg_t  *msgs;

    if (YAJL_IS_STRING(input)) {
        yajl_gen_map_open(g);
        ngx_http_llm_gen_cstr(g, "role");
        ngx_http_llm_gen_cstr(g, "user");
        ngx_http_llm_gen_cstr(g, "content");
        ngx_http_llm_gen_cstr(g, input->u.string);
        yajl_gen_map_close(g);
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
        ngx_http_llm_responses_gen_msg(g, &msgs[i]);
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
ngx_http_llm_responses_gen_msg(yajl_gen g, ngx_http_llm_resp_msg_t *m)
{
    yajl_val    call, args, *calls;
    ngx_uint_t  i;

    yajl_gen_map_open(g);
    ngx_http_llm_gen_cstr(g, "role");
    ngx_http_llm_gen_cstr(g, m->role);

    if (m->content.data) {
        ngx_http_llm_gen_cstr(g, "content");
        yajl_gen_string(g, m->content.data, m->content.len);
    }

    if (m->reasoning) {
        ngx_http_llm_gen_cstr(g, "reasoning");
        ngx_http_llm_gen_cstr(g, m->reasoning);
    }

    if (m->calls.nelts) {
        ngx_http_llm_gen_cstr(g, "tool_calls");
        yajl_gen_array_open(g);

        calls = m->calls.elts;

        for (i = 0; i < m->calls.nelts; i++) {
            call = calls[i];
            args = llm_json_get(call, "arguments");

            yajl_gen_map_open(g);
            ngx_http_llm_gen_cstr(g, "id");
            ngx_http_llm_gen_value(g, llm_json_get(call, "call_id"));
            ngx_http_llm_gen_cstr(g, "type");
            ngx_http_llm_gen_cstr(g, "function");
            ngx_http_llm_gen_cstr(g, "function");
            yajl_gen_map_open(g);
            ngx_http_llm_gen_cstr(g, "name");
            ngx_http_llm_gen_value(g, llm_json_get(call, "name"));
            ngx_http_llm_gen_cstr(g, "arguments");
            ngx_http_llm_gen_cstr(g, YAJL_IS_STRING(args) ? args->u.string
                                                          : "");
            yajl_gen_map_close(g);
            yajl_gen_map_close(g);
        }

        yajl_gen_array_close(g);
    }

    if (m->call_id) {
        ngx_http_llm_gen_cstr(g, "tool_call_id");
        ngx_http_llm_gen_value(g, m->call_id);
    }

    yajl_gen_map_close(g);
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
    char       errbuf[128];
    size_t     i;
    yajl_gen   g;
    yajl_val   tool, type, tree;
    ngx_int_t  rc;
    ngx_str_t  text;

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

    g = yajl_gen_alloc(NULL);
    if (g == NULL) {
        ngx_http_llm_job_nomem(job);
        return NULL;
    }

    yajl_gen_array_open(g);

    for (i = 0; i < tools->u.array.len; i++) {
        tool = tools->u.array.values[i];
        type = llm_json_get(tool, "type");

        if (!YAJL_IS_STRING(type)
            || ngx_strcmp(type->u.string, "function") != 0
            || !YAJL_IS_STRING(llm_json_get(tool, "name")))
        {
            yajl_gen_free(g);
            ngx_http_llm_job_error(job, NGX_HTTP_BAD_REQUEST, "tools",
                                   "tools[%uz]: only function tools "
                                   "({\"type\": \"function\", \"name\": "
                                   "...}) are supported", i);
            return NULL;
        }

        yajl_gen_map_open(g);
        ngx_http_llm_gen_cstr(g, "type");
        ngx_http_llm_gen_cstr(g, "function");
        ngx_http_llm_gen_cstr(g, "function");
        yajl_gen_map_open(g);
        ngx_http_llm_gen_cstr(g, "name");
        ngx_http_llm_gen_value(g, llm_json_get(tool, "name"));
        ngx_http_llm_gen_cstr(g, "description");
        ngx_http_llm_gen_value(g, llm_json_get(tool, "description"));
        ngx_http_llm_gen_cstr(g, "parameters");
        ngx_http_llm_gen_value(g, llm_json_get(tool, "parameters"));
        yajl_gen_map_close(g);
        yajl_gen_map_close(g);
    }

    yajl_gen_array_close(g);

    rc = ngx_http_llm_gen_text(job, g, &text);
    yajl_gen_free(g);

    if (rc != NGX_OK) {
        return NULL;
    }

    /* what yajl generated parses: only memory can run out */
    tree = yajl_tree_parse((char *) text.data, errbuf, sizeof(errbuf));

    if (tree == NULL) {
        ngx_http_llm_job_nomem(job);
    }

    return tree;
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
    char                       errbuf[128];
    u_char                    *p, *text;
    yajl_gen                   g;
    yajl_val                   v, tree;
    ngx_str_t                  sys, *history;
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
        g = yajl_gen_alloc(NULL);
        if (g == NULL) {
            ngx_http_llm_job_nomem(job);
            return NULL;
        }

        yajl_gen_map_open(g);
        ngx_http_llm_gen_cstr(g, "role");
        ngx_http_llm_gen_cstr(g, "system");
        ngx_http_llm_gen_cstr(g, "content");
        ngx_http_llm_gen_cstr(g, v->u.string);
        yajl_gen_map_close(g);

        if (ngx_http_llm_gen_text(job, g, &sys) != NGX_OK) {
            yajl_gen_free(g);
            return NULL;
        }

        yajl_gen_free(g);
    }

    if (sys.len + history->len == 0) {
        ngx_http_llm_job_error(job, NGX_HTTP_BAD_REQUEST, "input",
                               "`input` must contain at least one item");
        return NULL;
    }

    text = ngx_pnalloc(job->pool, 1 + sys.len + 1 + history->len + 2);
    if (text == NULL) {
        ngx_http_llm_job_nomem(job);
        return NULL;
    }

    p = text;
    *p++ = '[';
    p = ngx_cpymem(p, sys.data, sys.len);

    if (sys.len && history->len) {
        *p++ = ',';
    }

    p = ngx_cpymem(p, history->data, history->len);
    *p++ = ']';
    *p = '\0';

    tree = yajl_tree_parse((char *) text, errbuf, sizeof(errbuf));

    if (tree == NULL) {
        /* only a stored conversation can be broken, and it is ours */
        ngx_http_llm_job_error(job, NGX_HTTP_INTERNAL_SERVER_ERROR, NULL,
                               "the stored conversation cannot be read: "
                               "%s", errbuf);
        return NULL;
    }

    return tree;
}


/* yajl_gen helpers: what was generated, NUL-terminated in the pool */

static ngx_int_t
ngx_http_llm_gen_text(ngx_http_llm_job_t *job, yajl_gen g, ngx_str_t *text)
{
    size_t                n;
    const unsigned char  *buf;

    if (yajl_gen_get_buf(g, &buf, &n) != yajl_gen_status_ok) {
        ngx_http_llm_job_nomem(job);
        return NGX_ERROR;
    }

    return ngx_http_llm_job_copy(job, (const char *) buf, n, text);
}


/* a value of a parsed tree, numbers in their original spelling */

static void
ngx_http_llm_gen_value(yajl_gen g, yajl_val v)
{
    size_t  i;

    if (v == NULL) {
        yajl_gen_null(g);
        return;
    }

    switch (v->type) {

    case yajl_t_string:
        ngx_http_llm_gen_cstr(g, v->u.string);
        break;

    case yajl_t_number:
        yajl_gen_number(g, v->u.number.r, ngx_strlen(v->u.number.r));
        break;

    case yajl_t_object:
        yajl_gen_map_open(g);

        for (i = 0; i < v->u.object.len; i++) {
            ngx_http_llm_gen_cstr(g, v->u.object.keys[i]);
            ngx_http_llm_gen_value(g, v->u.object.values[i]);
        }

        yajl_gen_map_close(g);
        break;

    case yajl_t_array:
        yajl_gen_array_open(g);

        for (i = 0; i < v->u.array.len; i++) {
            ngx_http_llm_gen_value(g, v->u.array.values[i]);
        }

        yajl_gen_array_close(g);
        break;

    case yajl_t_true:
        yajl_gen_bool(g, 1);
        break;

    case yajl_t_false:
        yajl_gen_bool(g, 0);
        break;

    default:
        yajl_gen_null(g);
        break;
    }
}


static void
ngx_http_llm_gen_cstr(yajl_gen g, const char *s)
{
    yajl_gen_string(g, (const u_char *) s, ngx_strlen(s));
}
