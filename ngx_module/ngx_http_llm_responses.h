
/*
 * ngx_http_llm_responses.h -- what the two halves of /responses share:
 * ngx_http_llm_responses_input.c (thread pool: the request made into chat
 * messages) and ngx_http_llm_responses.c (event loop: the response object
 * and its events).
 */


#ifndef _NGX_HTTP_LLM_RESPONSES_H_INCLUDED_
#define _NGX_HTTP_LLM_RESPONSES_H_INCLUDED_


#include "ngx_http_llm_module.h"


/* OpenAI's Metadata: pairs, and characters in a key and in a value */
#define NGX_HTTP_LLM_MAX_METADATA        16
#define NGX_HTTP_LLM_MAX_METADATA_KEY    64
#define NGX_HTTP_LLM_MAX_METADATA_VALUE  512


enum {
    NGX_HTTP_LLM_ECHO_INSTRUCTIONS = 0,
    NGX_HTTP_LLM_ECHO_METADATA,
    NGX_HTTP_LLM_ECHO_TOOL_CHOICE,
    NGX_HTTP_LLM_ECHO_TOOLS,
    NGX_HTTP_LLM_ECHO_PREVIOUS,
    NGX_HTTP_LLM_ECHO_REASONING,
    NGX_HTTP_LLM_ECHO_SERVICE_TIER,
    NGX_HTTP_LLM_ECHO_TEXT,
    NGX_HTTP_LLM_ECHO_USER,
    NGX_HTTP_LLM_ECHO_N
};


/* the request fields a response shows, as JSON text (empty: the default),
 * in the job's pool */
struct ngx_http_llm_responses_s {
    ngx_str_t                   echo[NGX_HTTP_LLM_ECHO_N];

    /* the conversation without the system message: JSON array members */
    ngx_str_t                   history;

    unsigned                    store:1;
    unsigned                    parallel_tool_calls:1;
};


/* a function_call output item of a stream (ngx_http_llm_responses_calls.c) */
typedef struct {
    ngx_str_t                   id;            /* "fc_..." */
    ngx_str_t                   name;
    ngx_array_t                 args;          /* u_char, streamed so far */
    ngx_uint_t                  output_index;
} ngx_http_llm_resp_call_t;

#define NGX_HTTP_LLM_ITEM_NONE     0
#define NGX_HTTP_LLM_ITEM_MESSAGE  1
#define NGX_HTTP_LLM_ITEM_CALL     2

/* a stream's output items when a tool parser reads the answer */
struct ngx_http_llm_resp_items_s {
    ngx_array_t                 calls;         /* ngx_http_llm_resp_call_t */
    ngx_array_t                 text;          /* u_char: the message's */
    ngx_uint_t                  n;             /* items added */
    ngx_uint_t                  msg_index;
    ngx_uint_t                  open;          /* NGX_HTTP_LLM_ITEM_*: the
                                                  one added, not done */
    unsigned                    msg_added:1;
};


/* ngx_http_llm_responses.c: the events and items the calls share */
void ngx_http_llm_responses_event(ngx_http_llm_json_t *j,
    ngx_http_llm_ctx_t *ctx, const char *type);
void ngx_http_llm_responses_event_end(ngx_http_llm_json_t *j,
    ngx_http_llm_ctx_t *ctx, const char *type);
void ngx_http_llm_responses_message(ngx_http_llm_json_t *j,
    ngx_http_llm_ctx_t *ctx, ngx_uint_t final);
void ngx_http_llm_responses_part(ngx_http_llm_json_t *j,
    ngx_http_llm_ctx_t *ctx, ngx_uint_t empty, ngx_uint_t logprobs);
void ngx_http_llm_responses_msg_added(ngx_http_llm_json_t *j,
    ngx_http_llm_ctx_t *ctx, ngx_uint_t index);
void ngx_http_llm_responses_msg_delta(ngx_http_llm_json_t *j,
    ngx_http_llm_ctx_t *ctx, ngx_uint_t index, u_char *text, size_t len);
void ngx_http_llm_responses_msg_done(ngx_http_llm_json_t *j,
    ngx_http_llm_ctx_t *ctx, ngx_uint_t index);
void ngx_http_llm_responses_answer(ngx_http_llm_ctx_t *ctx, ngx_str_t *text);

/* ngx_http_llm_responses_calls.c: function_call items */
ngx_int_t ngx_http_llm_responses_calls_chunk(ngx_http_llm_ctx_t *ctx,
    ngx_http_llm_json_t *j);
void ngx_http_llm_responses_output(ngx_http_llm_json_t *j,
    ngx_http_llm_ctx_t *ctx);
ngx_uint_t ngx_http_llm_responses_n_calls(ngx_http_llm_ctx_t *ctx);

/* ngx_http_llm_responses_reasoning.c */
ngx_int_t ngx_http_llm_responses_reasoning_chunk(ngx_http_llm_ctx_t *ctx,
    ngx_http_llm_json_t *j);
ngx_uint_t ngx_http_llm_responses_reasoning_output(ngx_http_llm_json_t *j,
    ngx_http_llm_ctx_t *ctx);


#endif /* _NGX_HTTP_LLM_RESPONSES_H_INCLUDED_ */
