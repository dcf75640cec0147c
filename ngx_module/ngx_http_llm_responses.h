
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


#endif /* _NGX_HTTP_LLM_RESPONSES_H_INCLUDED_ */
