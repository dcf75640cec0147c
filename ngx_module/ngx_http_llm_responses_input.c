
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
    char                       *content;       /* malloc()ed, or NULL */
    size_t                      content_len;
    const char                 *reasoning;
    yajl_val                   *calls;         /* function_call items */
    ngx_uint_t                  n_calls;
    yajl_val                    call_id;       /* function_call_output */
} ngx_http_llm_resp_msg_t;


static const char  *ngx_http_llm_echo_keys[] = {
    "instructions", "metadata", "tool_choice", "tools",
    "previous_response_id", "reasoning", "service_tier", "text", "user"
};


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
    yajl_val root, const char *prev, size_t prev_len, const u_char *now,
    size_t now_len);
static char *ngx_http_llm_gen_text(yajl_gen g, size_t *len);
static void ngx_http_llm_gen_value(yajl_gen g, yajl_val v);
static void ngx_http_llm_gen_cstr(yajl_gen g, const char *s);


void
ngx_http_llm_responses_parse(ngx_http_llm_job_t *job, yajl_val root)
{
    char                      *prev, *now;
    size_t                     prev_len, now_len;
    yajl_gen                   g;
    yajl_val                   input, tools, messages, v;
    ngx_http_llm_responses_t  *resp;

    resp = calloc(1, sizeof(ngx_http_llm_responses_t));
    if (resp == NULL) {
        goto nomem;
    }

    job->responses = resp;

    if (ngx_http_llm_responses_check(job, root) != NGX_OK
        || ngx_http_llm_responses_echo(job, root) != NGX_OK)
    {
        return;
    }

    input = ngx_http_llm_json_get(root, "input");

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

    prev = NULL;
    prev_len = 0;

    v = ngx_http_llm_json_get(root, "previous_response_id");

    if (v && YAJL_IS_STRING(v)) {
        prev = ngx_http_llm_store_get(v->u.string, &prev_len);

        if (prev == NULL) {
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
        free(prev);
        goto nomem;
    }

    yajl_gen_array_open(g);

    if (ngx_http_llm_responses_input(job, input, g) != NGX_OK) {
        yajl_gen_free(g);
        free(prev);
        return;
    }

    yajl_gen_array_close(g);

    now = ngx_http_llm_gen_text(g, &now_len);
    yajl_gen_free(g);

    if (now == NULL) {
        free(prev);
        goto nomem;
    }

    /* the members, without the array's brackets */
    messages = ngx_http_llm_responses_messages(job, root, prev, prev_len,
                                               (u_char *) now + 1,
                                               now_len - 2);
    free(prev);
    free(now);

    if (messages == NULL) {
        return;
    }

    tools = ngx_http_llm_responses_tools(job,
                                         ngx_http_llm_json_get(root, "tools"));

    if (job->status == 0) {
        (void) ngx_http_llm_chat_prompt(job, root, messages, tools);
    }

    yajl_tree_free(messages);
    yajl_tree_free(tools);

    return;

nomem:

    ngx_http_llm_job_error(job, NGX_HTTP_INTERNAL_SERVER_ERROR, NULL,
                           "out of memory");
}


void
ngx_http_llm_responses_free(ngx_http_llm_responses_t *resp)
{
    ngx_uint_t  i;

    for (i = 0; i < NGX_HTTP_LLM_ECHO_N; i++) {
        free(resp->echo[i]);
    }

    free(resp->history);
    free(resp);
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

    v = ngx_http_llm_json_get(root, "prompt");

    if (v && !YAJL_IS_NULL(v)) {
        ngx_http_llm_job_error(job, NGX_HTTP_BAD_REQUEST, "prompt",
                               "prompt template is not supported");
        return NGX_ERROR;
    }

    v = ngx_http_llm_json_get(root, "truncation");

    if (v && !YAJL_IS_NULL(v)
        && !(YAJL_IS_STRING(v) && ngx_strcmp(v->u.string, "disabled") == 0))
    {
        ngx_http_llm_job_error(job, NGX_HTTP_BAD_REQUEST, "truncation",
                               "only `truncation` \"disabled\" is supported: "
                               "a prompt too long for the model is refused, "
                               "not cut");
        return NGX_ERROR;
    }

    v = ngx_http_llm_json_get(ngx_http_llm_json_get(root, "text"), "format");

    if (v && !YAJL_IS_NULL(v)
        && ngx_http_llm_job_format(job, v, "text.format") != NGX_OK)
    {
        return NGX_ERROR;
    }

    v = ngx_http_llm_json_get(root, "previous_response_id");

    if (v && !YAJL_IS_NULL(v) && !YAJL_IS_STRING(v)) {
        ngx_http_llm_job_error(job, NGX_HTTP_BAD_REQUEST,
                               "previous_response_id", "`previous_response_"
                               "id` must be a string, got %s",
                               ngx_http_llm_json_type(v));
        return NGX_ERROR;
    }

    v = ngx_http_llm_json_get(root, "instructions");

    if (v && !YAJL_IS_NULL(v) && !YAJL_IS_STRING(v)) {
        ngx_http_llm_job_error(job, NGX_HTTP_BAD_REQUEST, "instructions",
                               "`instructions` must be a string, got %s",
                               ngx_http_llm_json_type(v));
        return NGX_ERROR;
    }

    return NGX_OK;
}


/* "include": a list of strings; ABSENT unless it holds "what" */

ngx_int_t
ngx_http_llm_responses_include(ngx_http_llm_job_t *job, yajl_val root,
    const char *what)
{
    size_t    i;
    yajl_val  v, e;

    v = ngx_http_llm_json_get(root, "include");

    if (v == NULL || YAJL_IS_NULL(v)) {
        return NGX_HTTP_LLM_FIELD_ABSENT;
    }

    if (!YAJL_IS_ARRAY(v)) {
        ngx_http_llm_job_error(job, NGX_HTTP_BAD_REQUEST, "include",
                               "`include` must be a list of strings, got %s",
                               ngx_http_llm_json_type(v));
        return NGX_HTTP_LLM_FIELD_INVALID;
    }

    for (i = 0; i < v->u.array.len; i++) {
        e = v->u.array.values[i];

        if (!YAJL_IS_STRING(e)) {
            ngx_http_llm_job_error(job, NGX_HTTP_BAD_REQUEST, "include",
                                   "`include` must be a list of strings, "
                                   "got %s in the list",
                                   ngx_http_llm_json_type(e));
            return NGX_HTTP_LLM_FIELD_INVALID;
        }

        if (ngx_strcmp(e->u.string, what) == 0) {
            return NGX_HTTP_LLM_FIELD_PRESENT;
        }
    }

    return NGX_HTTP_LLM_FIELD_ABSENT;
}


static ngx_int_t
ngx_http_llm_responses_echo(ngx_http_llm_job_t *job, yajl_val root)
{
    yajl_gen                   g;
    yajl_val                   v;
    ngx_uint_t                 i;
    ngx_http_llm_responses_t  *resp;

    resp = job->responses;

    for (i = 0; i < NGX_HTTP_LLM_ECHO_N; i++) {
        v = ngx_http_llm_json_get(root, ngx_http_llm_echo_keys[i]);

        if (v == NULL || YAJL_IS_NULL(v)) {
            continue;
        }

        g = yajl_gen_alloc(NULL);
        if (g == NULL) {
            goto nomem;
        }

        ngx_http_llm_gen_value(g, v);
        resp->echo[i] = ngx_http_llm_gen_text(g, &resp->echo_len[i]);
        yajl_gen_free(g);

        if (resp->echo[i] == NULL) {
            goto nomem;
        }
    }

    return NGX_OK;

nomem:

    ngx_http_llm_job_error(job, NGX_HTTP_INTERNAL_SERVER_ERROR, NULL,
                           "out of memory");
    return NGX_ERROR;
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
    ngx_int_t                 rc;
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

    msgs = calloc(input->u.array.len + 1, sizeof(ngx_http_llm_resp_msg_t));
    if (msgs == NULL) {
        ngx_http_llm_job_error(job, NGX_HTTP_INTERNAL_SERVER_ERROR, NULL,
                               "out of memory");
        return NGX_ERROR;
    }

    n = 0;
    rc = NGX_OK;

    for (i = 0; i < input->u.array.len; i++) {
        rc = ngx_http_llm_responses_item(job, input->u.array.values[i], i,
                                         msgs, &n);
        if (rc != NGX_OK) {
            break;
        }
    }

    for (i = 0; i < n; i++) {
        if (rc == NGX_OK) {
            ngx_http_llm_responses_gen_msg(g, &msgs[i]);
        }

        free(msgs[i].content);
        free(msgs[i].calls);
    }

    free(msgs);

    return rc;
}


static ngx_int_t
ngx_http_llm_responses_item(ngx_http_llm_job_t *job, yajl_val item,
    size_t index, ngx_http_llm_resp_msg_t *msgs, ngx_uint_t *n)
{
    const char               *type, *role;
    yajl_val                  v, *calls;
    ngx_http_llm_resp_msg_t  *m, *prev;

    if (!YAJL_IS_OBJECT(item)) {
        ngx_http_llm_job_error(job, NGX_HTTP_BAD_REQUEST, "input",
                               "input[%uz] must be an object, got %s", index,
                               ngx_http_llm_json_type(item));
        return NGX_ERROR;
    }

    v = ngx_http_llm_json_get(item, "type");
    type = YAJL_IS_STRING(v) ? v->u.string : "message";

    v = ngx_http_llm_json_get(item, "role");
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
            && prev->content == NULL)
        {
            m = prev;

        } else {
            m->role = role;
            (*n)++;
        }

        return ngx_http_llm_responses_text(job,
                                           ngx_http_llm_json_get(item,
                                                                 "content"),
                                           index, m);
    }

    if (ngx_strcmp(type, "function_call") == 0) {

        if (!YAJL_IS_STRING(ngx_http_llm_json_get(item, "name"))
            || !YAJL_IS_STRING(ngx_http_llm_json_get(item, "call_id")))
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

        calls = realloc(prev->calls, (prev->n_calls + 1) * sizeof(yajl_val));
        if (calls == NULL) {
            ngx_http_llm_job_error(job, NGX_HTTP_INTERNAL_SERVER_ERROR, NULL,
                                   "out of memory");
            return NGX_ERROR;
        }

        prev->calls = calls;
        prev->calls[prev->n_calls++] = item;

        return NGX_OK;
    }

    if (ngx_strcmp(type, "function_call_output") == 0) {
        v = ngx_http_llm_json_get(item, "output");

        if (!YAJL_IS_STRING(v)
            || !YAJL_IS_STRING(ngx_http_llm_json_get(item, "call_id")))
        {
            ngx_http_llm_job_error(job, NGX_HTTP_BAD_REQUEST, "input",
                                   "input[%uz]: a function_call_output "
                                   "needs \"call_id\" and an \"output\" "
                                   "string", index);
            return NGX_ERROR;
        }

        m->role = "tool";
        m->call_id = ngx_http_llm_json_get(item, "call_id");
        (*n)++;

        return ngx_http_llm_responses_text(job, v, index, m);
    }

    if (ngx_strcmp(type, "reasoning") == 0) {
        v = ngx_http_llm_json_get(item, "content");

        if (!YAJL_IS_ARRAY(v) || v->u.array.len == 0) {
            v = ngx_http_llm_json_get(item, "summary");
        }

        v = YAJL_IS_ARRAY(v) && v->u.array.len
            ? ngx_http_llm_json_get(v->u.array.values[0], "text") : NULL;

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
    size_t      len, bad;
    ngx_int_t   rc;

    static const char  *types[] = { "input_text", "output_text", "text",
                                    NULL };

    if (YAJL_IS_STRING(content)) {
        len = ngx_strlen(content->u.string);

        m->content = malloc(len + 1);
        if (m->content == NULL) {
            goto nomem;
        }

        ngx_memcpy(m->content, content->u.string, len + 1);
        m->content_len = len;

        return NGX_OK;
    }

    if (!YAJL_IS_ARRAY(content)) {
        ngx_http_llm_job_error(job, NGX_HTTP_BAD_REQUEST, "input",
                               "input[%uz].content must be a string or a "
                               "list of content parts, got %s", index,
                               ngx_http_llm_json_type(content));
        return NGX_ERROR;
    }

    rc = ngx_http_llm_json_join_text(content, types, 0, &m->content,
                                     &m->content_len, &bad);

    if (rc == NGX_DECLINED) {
        ngx_http_llm_job_error(job, NGX_HTTP_BAD_REQUEST, "input",
                               "input[%uz].content[%uz]: only "
                               "\"input_text\" and \"output_text\" "
                               "parts are supported", index, bad);
        return NGX_ERROR;
    }

    if (rc == NGX_OK) {
        return NGX_OK;
    }

nomem:

    ngx_http_llm_job_error(job, NGX_HTTP_INTERNAL_SERVER_ERROR, NULL,
                           "out of memory");
    return NGX_ERROR;
}


static void
ngx_http_llm_responses_gen_msg(yajl_gen g, ngx_http_llm_resp_msg_t *m)
{
    ngx_uint_t  i;
    yajl_val    call, args;

    yajl_gen_map_open(g);
    ngx_http_llm_gen_cstr(g, "role");
    ngx_http_llm_gen_cstr(g, m->role);

    if (m->content) {
        ngx_http_llm_gen_cstr(g, "content");
        yajl_gen_string(g, (u_char *) m->content, m->content_len);
    }

    if (m->reasoning) {
        ngx_http_llm_gen_cstr(g, "reasoning");
        ngx_http_llm_gen_cstr(g, m->reasoning);
    }

    if (m->n_calls) {
        ngx_http_llm_gen_cstr(g, "tool_calls");
        yajl_gen_array_open(g);

        for (i = 0; i < m->n_calls; i++) {
            call = m->calls[i];
            args = ngx_http_llm_json_get(call, "arguments");

            yajl_gen_map_open(g);
            ngx_http_llm_gen_cstr(g, "id");
            ngx_http_llm_gen_value(g, ngx_http_llm_json_get(call, "call_id"));
            ngx_http_llm_gen_cstr(g, "type");
            ngx_http_llm_gen_cstr(g, "function");
            ngx_http_llm_gen_cstr(g, "function");
            yajl_gen_map_open(g);
            ngx_http_llm_gen_cstr(g, "name");
            ngx_http_llm_gen_value(g, ngx_http_llm_json_get(call, "name"));
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
    char      *text, errbuf[128];
    size_t     i, len;
    yajl_gen   g;
    yajl_val   tool, type, tree;

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
        goto nomem;
    }

    yajl_gen_array_open(g);

    for (i = 0; i < tools->u.array.len; i++) {
        tool = tools->u.array.values[i];
        type = ngx_http_llm_json_get(tool, "type");

        if (!YAJL_IS_STRING(type)
            || ngx_strcmp(type->u.string, "function") != 0
            || !YAJL_IS_STRING(ngx_http_llm_json_get(tool, "name")))
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
        ngx_http_llm_gen_value(g, ngx_http_llm_json_get(tool, "name"));
        ngx_http_llm_gen_cstr(g, "description");
        ngx_http_llm_gen_value(g, ngx_http_llm_json_get(tool, "description"));
        ngx_http_llm_gen_cstr(g, "parameters");
        ngx_http_llm_gen_value(g, ngx_http_llm_json_get(tool, "parameters"));
        yajl_gen_map_close(g);
        yajl_gen_map_close(g);
    }

    yajl_gen_array_close(g);

    text = ngx_http_llm_gen_text(g, &len);
    yajl_gen_free(g);

    if (text == NULL) {
        goto nomem;
    }

    tree = yajl_tree_parse(text, errbuf, sizeof(errbuf));
    free(text);

    if (tree == NULL) {
        goto nomem;
    }

    return tree;

nomem:

    ngx_http_llm_job_error(job, NGX_HTTP_INTERNAL_SERVER_ERROR, NULL,
                           "out of memory");
    return NULL;
}


/*
 * All the messages the model sees: the system message of "instructions",
 * the stored conversation (a JSON array), this input (array members).
 * The conversation without the system message is kept for the store.
 * Returns a tree to free, or NULL with the error set.
 */

static yajl_val
ngx_http_llm_responses_messages(ngx_http_llm_job_t *job, yajl_val root,
    const char *prev, size_t prev_len, const u_char *now, size_t now_len)
{
    char                      *text, *sys, errbuf[128];
    u_char                    *p;
    size_t                     len, sys_len;
    yajl_gen                   g;
    yajl_val                   v, tree;
    ngx_http_llm_responses_t  *resp;

    resp = job->responses;

    /* the stored array without its brackets */
    if (prev && prev_len >= 2) {
        prev++;
        prev_len -= 2;
    }

    resp->history = malloc(prev_len + 1 + now_len + 1);
    if (resp->history == NULL) {
        goto nomem;
    }

    p = ngx_cpymem(resp->history, prev, prev_len);

    if (prev_len && now_len) {
        *p++ = ',';
    }

    p = ngx_cpymem(p, now, now_len);
    *p = '\0';
    resp->history_len = p - (u_char *) resp->history;

    sys = NULL;
    sys_len = 0;

    v = ngx_http_llm_json_get(root, "instructions");

    if (v && YAJL_IS_STRING(v)) {
        g = yajl_gen_alloc(NULL);
        if (g == NULL) {
            goto nomem;
        }

        yajl_gen_map_open(g);
        ngx_http_llm_gen_cstr(g, "role");
        ngx_http_llm_gen_cstr(g, "system");
        ngx_http_llm_gen_cstr(g, "content");
        ngx_http_llm_gen_cstr(g, v->u.string);
        yajl_gen_map_close(g);

        sys = ngx_http_llm_gen_text(g, &sys_len);
        yajl_gen_free(g);

        if (sys == NULL) {
            goto nomem;
        }
    }

    if (sys_len + resp->history_len == 0) {
        ngx_http_llm_job_error(job, NGX_HTTP_BAD_REQUEST, "input",
                               "`input` must contain at least one item");
        return NULL;
    }

    len = 1 + sys_len + 1 + resp->history_len + 1;

    text = malloc(len + 1);
    if (text == NULL) {
        free(sys);
        goto nomem;
    }

    p = (u_char *) text;
    *p++ = '[';
    p = ngx_cpymem(p, sys, sys_len);

    if (sys_len && resp->history_len) {
        *p++ = ',';
    }

    p = ngx_cpymem(p, resp->history, resp->history_len);
    *p++ = ']';
    *p = '\0';

    free(sys);

    tree = yajl_tree_parse(text, errbuf, sizeof(errbuf));
    free(text);

    if (tree == NULL) {
        /* only a stored conversation can be broken, and it is ours */
        ngx_http_llm_job_error(job, NGX_HTTP_INTERNAL_SERVER_ERROR, NULL,
                               "the stored conversation cannot be read: "
                               "%s", errbuf);
        return NULL;
    }

    return tree;

nomem:

    ngx_http_llm_job_error(job, NGX_HTTP_INTERNAL_SERVER_ERROR, NULL,
                           "out of memory");
    return NULL;
}


/* yajl_gen helpers: what was generated, as a malloc()ed string */

static char *
ngx_http_llm_gen_text(yajl_gen g, size_t *len)
{
    char                 *text;
    size_t                n;
    const unsigned char  *buf;

    if (yajl_gen_get_buf(g, &buf, &n) != yajl_gen_status_ok) {
        return NULL;
    }

    text = malloc(n + 1);
    if (text == NULL) {
        return NULL;
    }

    ngx_memcpy(text, buf, n);
    text[n] = '\0';
    *len = n;

    return text;
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
