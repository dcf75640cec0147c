
/*
 * ngx_http_llm_module.h -- types shared by the files of the llm module.
 *
 * The module is nginx glue around the engine of engine/llm.h: directives,
 * the HTTP/JSON/SSE front end of the OpenAI API, access-log variables, the
 * engine process every worker shares (ngx_http_llm_engine.c), and the
 * bridge between a worker's event loop and it.
 *
 * A request travels through these files, in this order:
 *
 *   ngx_http_llm_handler.c    find the route, check the method, read the
 *                             body, post the parse to the thread pool
 *   ngx_http_llm_routes.c     the table of routes: what each endpoint does
 *   ngx_http_llm_chat.c       (thread pool) parse, render template, tokenize
 *   ngx_http_llm_completions.c            (the same for /completions)
 *   ngx_http_llm_responses_input.c        (the same for /responses)
 *   ngx_http_llm_params.c     (thread pool) sampling fields -> params
 *   ngx_http_llm_job.c        (thread pool) the job they fill
 *   ngx_http_llm_generate.c   submit, then deliver each drain's output
 *   ngx_http_llm_bridge.c     the engine: a request per sequence, sent
 *                             to the engine process; its socket ->
 *                             outputs -> ready queue
 *   ngx_http_llm_tools.c      (chat with tools: the model's tool calls)
 *   ngx_http_llm_chat.c       render chunks / the final body (and
 *                             _completions.c, _responses.c, with
 *                             _chunk.c, _logprobs.c, _usage.c)
 *   ngx_http_llm_sse.c        SSE framing, writes with backpressure
 *   ngx_http_llm_variables.c  $llm_* for the access log
 *
 * and beside the request path: ngx_http_llm_prometheus.c (llm_prometheus,
 * vLLM's /metrics text from one snapshot of the engine's counters),
 * ngx_http_llm_tokenize.c (/tokenize and /detokenize: the thread pool
 * answers, no engine), ngx_http_llm_store.c (finished responses kept for
 * previous_response_id and GET/DELETE .../responses/{id}, in shared
 * memory for every worker), and
 * ngx_http_llm_error_filter.c (a filter module of its own: nginx's error
 * pages as JSON in llm_api locations).
 */


#ifndef _NGX_HTTP_LLM_MODULE_H_INCLUDED_
#define _NGX_HTTP_LLM_MODULE_H_INCLUDED_


#include <ngx_config.h>
#include <ngx_core.h>
#include <ngx_http.h>
#include <ngx_thread_pool.h>

#include <yajl/yajl_tree.h>
#include <llm.h>

#include "ngx_http_llm_inflight.h"
#include "ngx_http_llm_json.h"


#define NGX_HTTP_LLM_SPEC_METRICS_NONE      0
#define NGX_HTTP_LLM_SPEC_METRICS_SUMMARY   1
#define NGX_HTTP_LLM_SPEC_METRICS_DETAILED  2

#define NGX_HTTP_LLM_HANDLER_API            1
#define NGX_HTTP_LLM_HANDLER_HEALTH         2
#define NGX_HTTP_LLM_HANDLER_PROMETHEUS     3

#define NGX_HTTP_LLM_MAX_LOGPROBS           20

/* a stream's billing record for a router: an SSE comment after [DONE] */
#define NGX_HTTP_LLM_BILLING_EVENT          ": llm-billing "

/* llm_router_model's prefix_blocks: the blocks $llm_prefix_key covers */
#define NGX_HTTP_LLM_ROUTER_BLOCKS          16
#define NGX_HTTP_LLM_ROUTER_MAX_BLOCKS      256

/* sequences one request may run (n x prompts): vLLM's VLLM_MAX_N_SEQUENCES
 * is 16384, but every sequence here is an engine request and a KV slot */
#define NGX_HTTP_LLM_MAX_SEQS               256

/*
 * What vLLM leaves unbounded and the engine pays for at every token:
 * stop strings (searched for in the text of each token), bad words
 * (tokenized for every sequence, then matched at each step), stop token
 * ids and logit_bias entries (looked at for each token).  Strings are
 * counted in bytes (docs/api.md, "Request limits").
 */
#define NGX_HTTP_LLM_MAX_STOP               64
#define NGX_HTTP_LLM_MAX_STOP_LEN           1024
#define NGX_HTTP_LLM_MAX_BAD_WORDS          256
#define NGX_HTTP_LLM_MAX_BAD_WORD_LEN       256
#define NGX_HTTP_LLM_MAX_STOP_TOKEN_IDS     1024
#define NGX_HTTP_LLM_MAX_LOGIT_BIAS         1024

/* llm_tool_call_parser auto: the parser the chat template asks for */
#define NGX_HTTP_LLM_TOOL_PARSER_AUTO       100

/* who a stored response belongs to: the SHA-1 of llm_responses_owner's
 * value when the response was made, all zeros without the directive */
#define NGX_HTTP_LLM_OWNER_LEN              20


typedef struct ngx_http_llm_ctx_s        ngx_http_llm_ctx_t;
typedef struct ngx_http_llm_job_s        ngx_http_llm_job_t;
typedef struct ngx_http_llm_responses_s  ngx_http_llm_responses_t;
typedef struct ngx_http_llm_tools_s      ngx_http_llm_tools_t;
typedef struct ngx_http_llm_resp_items_s  ngx_http_llm_resp_items_t;


/*
 * An endpoint of llm_api, a row of the table in ngx_http_llm_routes.c.
 * A route without "parse" has no body: "answer" replies at once.  The
 * others read the body and parse it in the thread pool; back on the event
 * loop "start" answers or starts the generation, whose output "chunk"
 * (a stream's events) and "body" (the whole response) render.
 */

typedef ngx_int_t (*ngx_http_llm_answer_pt)(ngx_http_request_t *r,
    ngx_str_t *id);
typedef void (*ngx_http_llm_parse_pt)(ngx_http_llm_job_t *job,
    yajl_val root);
typedef ngx_int_t (*ngx_http_llm_start_pt)(ngx_http_request_t *r,
    ngx_http_llm_ctx_t *ctx);
typedef ngx_int_t (*ngx_http_llm_render_pt)(ngx_http_llm_ctx_t *ctx,
    ngx_http_llm_json_t *j);

typedef struct {
    ngx_str_t                   suffix;        /* how the URI ends */
    ngx_str_t                   id_after;      /* with an id: what precedes
                                                  it, "/models/" */
    ngx_uint_t                  id_slashes;    /* the id may hold "/" */
    ngx_uint_t                  methods;
    const char                 *allow;         /* a 405's Allow header */
    const char                 *use;           /* and its advice */
    ngx_http_llm_answer_pt      answer;
    ngx_http_llm_parse_pt       parse;
    ngx_http_llm_start_pt       start;         /* NGX_DONE: it goes on */
    ngx_http_llm_render_pt      chunk;
    ngx_http_llm_render_pt      body;
    const char                 *id_prefix;     /* "chatcmpl-" */
} ngx_http_llm_route_t;


/*
 * What the generating endpoints' request fields differ in: each has one
 * of these beside its parser, for ngx_http_llm_params_parse().
 */
typedef struct {
    const char                 *prompt;        /* the field errors about the
                                                  prompt name */
    const char                 *max_tokens[2]; /* its keys: the first one
                                                  given counts */
    int                         max_tokens_default;  /* -1: what fits */
    /* the endpoint's logprobs fields, ending in ngx_http_llm_params_logprobs */
    ngx_int_t                 (*logprobs)(ngx_http_llm_job_t *job,
                                          yajl_val root);
    unsigned                    n:1;           /* n and best_of */
    unsigned                    stream_options:1;
    unsigned                    prompt_logprobs:1;
    unsigned                    echo:1;        /* max_tokens 0 with echo:
                                                  the prompt only */
} ngx_http_llm_params_conf_t;


/* one prompt of a request (completions may carry several) */
typedef struct {
    int32_t                    *ids;
    int                         n;
    ngx_str_t                   echo;          /* completions: echoed text */
} ngx_http_llm_prompt_t;


/* engine settings: one engine per nginx, so they live in http{} only */
typedef struct {
    ngx_str_t                   model;
    ngx_str_t                   served_model_name;
    ngx_str_t                   device;
    ngx_str_t                   weights;       /* llm_weights; empty: as
                                                  stored */
    ngx_int_t                   threads;
    ngx_int_t                   max_model_len;
    ngx_int_t                   max_num_seqs;
    ngx_int_t                   max_num_batched_tokens;
    off_t                       kv_cache_size;      /* accepts k, m, g */
    ngx_str_t                   gpu_memory_utilization;
    double                      gpu_util;
    ngx_flag_t                  enable_prefix_caching;
    ngx_flag_t                  log_stats;
    ngx_int_t                   store_entries;      /* llm_responses_store */
    size_t                      store_size;
    ngx_int_t                   spec_tokens;
    ngx_int_t                   spec_lookup_min;
    ngx_int_t                   spec_lookup_max;
    ngx_str_t                   thread_pool_name;
    ngx_thread_pool_t          *thread_pool;
    ngx_uint_t                  tool_parser;   /* llm_tool_parser_kind, or
                                                  NGX_HTTP_LLM_TOOL_PARSER_AUTO */

    llm_model                  *router;        /* llm_router_model's */
    ngx_int_t                   router_blocks; /* its prefix_blocks= */

    ngx_uint_t                  serial;        /* this configuration's,
                                                  newer ones higher */

    unsigned                    used:1;        /* a handler uses the engine */
    unsigned                    api:1;         /* an llm_api location */
} ngx_http_llm_main_conf_t;


typedef struct {
    ngx_flag_t                  per_request_metrics;
    ngx_flag_t                  force_include_usage;
    ngx_uint_t                  spec_decode_metrics;
    ngx_uint_t                  reasoning_parser;  /* llm_reasoning_parser_kind */
    ngx_flag_t                  output_token_metrics;
    ngx_http_complex_value_t   *responses_owner;   /* NULL: none */
    size_t                      max_unsent;    /* llm_max_unsent_bytes */
    ngx_uint_t                  handler;       /* NGX_HTTP_LLM_HANDLER_* */
} ngx_http_llm_loc_conf_t;


/*
 * What the thread-pool task makes of a request body: everything the event
 * loop needs to submit it, or the error to answer with.  The job has a
 * pool of its own, used by the task's thread while it runs and read by the
 * event loop after it; it is destroyed with the request's pool, after the
 * request let go of its engine requests (the engine copies what it keeps).
 */
struct ngx_http_llm_job_s {
    ngx_pool_t                 *pool;

    /* inputs, set on the event loop before the task is posted */
    ngx_chain_t                *body;
    const ngx_http_llm_route_t *route;
    ngx_str_t                   served_model_name;
    const llm_model            *model;
    int                         max_model_len;
    u_char                      owner[NGX_HTTP_LLM_OWNER_LEN];
    ngx_uint_t                  tool_parser_conf;   /* llm_tool_call_parser */
    ngx_uint_t                  reasoning_conf;     /* llm_reasoning_parser */
    unsigned                    force_include_usage:1;
    unsigned                    router:1;      /* llm_router_model's: the
                                                  node checks the model */

    /* outputs: an error ... */
    ngx_uint_t                  status;        /* 0: no error */
    const char                 *err_type;
    char                        err_param[64];
    char                        err[LLM_ERR_LEN];

    /* ... or the request; sp points into the pool */
    const ngx_http_llm_params_conf_t  *params;
    llm_sampling_params         sp;
    ngx_array_t                 prompts;       /* ngx_http_llm_prompt_t */
    ngx_uint_t                  n;             /* samples per prompt */
    ngx_http_llm_responses_t   *responses;     /* /responses' own fields */
    ngx_str_t                   text;          /* /detokenize: the text */
    int                         logprobs;      /* -1: none, else top-N */
    int                         max_tokens;    /* -1: until max_model_len */
    int                         truncate_prompt_tokens;  /* -1: none */
    llm_tool_parser_kind        tool_parser;   /* chat: parse tool calls */
    ngx_str_t                   tool_name;     /* ... of this function
                                                  (NAMED), NUL-terminated */
    llm_reasoning_parser_kind   reasoning;     /* chat, responses: split
                                                  the output's reasoning */
    llm_reasoning_config        think;         /* ... with these markers */
    unsigned                    stream:1;
    unsigned                    include_usage:1;
    unsigned                    continuous_usage:1;
    unsigned                    echo_only:1;   /* echo with max_tokens 0 */
    unsigned                    add_generation_prompt:1;
    unsigned                    echo_requested:1;
    unsigned                    token_strs:1;  /* return_token_strs */
    unsigned                    return_token_ids:1;
};


/*
 * One generated sequence: a choice of chat or completions (index =
 * prompt * n + sample), the one output of /responses.  Its engine request
 * points back at it (llm_request_set_data).  The arrays grow in r->pool.
 */
typedef struct {
    ngx_http_llm_ctx_t         *ctx;
    uint64_t                    handle;        /* the engine's; 0 once
                                                  released */
    ngx_uint_t                  index;
    ngx_http_llm_prompt_t      *prompt;

    /* output not yet written (stream) or all output (non-stream) */
    ngx_array_t                 text;          /* u_char */
    size_t                      text_sent;     /* responses stream: written */
    ngx_uint_t                  lp_sent;       /* the same for lp */
    ngx_uint_t                  new_ids;       /* ids since the last chunk */

    /* logprob records not yet written, copied from the engine */
    ngx_array_t                 lp;            /* llm_token_logprob */
    size_t                      text_offset;   /* completions text_offset */

    /* token ids not yet written (return_token_ids), as lp */
    ngx_array_t                 ids;           /* int32_t */

    /* chat with a tool-call parser: its state (ngx_http_llm_tools.c) */
    ngx_http_llm_tools_t       *tools;

    /* with a reasoning parser (ngx_http_llm_reasoning.c): its state, and
     * the reasoning text not yet written (stream) or all of it, as text */
    llm_reasoning_parser       *reasoning;
    ngx_array_t                 think;         /* u_char */
    size_t                      think_sent;    /* responses stream */

    /* prompt logprobs: prompt->n - 1 records, token i + 1 in record i */
    llm_token_logprob          *plp;
    ngx_uint_t                  n_plp;

    /* the engine's record, copied at every drain */
    llm_request_stats           stats;
    llm_finish_reason           finish;
    int32_t                     stop_token;
    ngx_str_t                   stop_string;

    unsigned                    leader:1;      /* first sample of its prompt */
    unsigned                    changed:1;     /* output since the last write */
    unsigned                    echoed:1;
    unsigned                    engine_done:1; /* the engine finished it */
    unsigned                    finish_sent:1; /* stream: its last chunk */
    unsigned                    prompt_ids_sent:1;
} ngx_http_llm_seq_t;


/* per-request state, from r->pool */
struct ngx_http_llm_ctx_s {
    ngx_http_request_t         *request;
    const ngx_http_llm_route_t *route;
    ngx_http_llm_job_t         *job;
    ngx_queue_t                 queue;         /* in the ready queue */
    ngx_queue_t                 live;          /* in the worker's live
                                                  queue: submitted */
    ngx_queue_t                 wait;          /* in the worker's waiting
                                                  queue: the model loads */

    ngx_http_llm_seq_t         *seqs;          /* in choice order */
    ngx_uint_t                  n_seqs;
    ngx_uint_t                  n_done;        /* sequences finished */

    ngx_str_t                   id;            /* "chatcmpl-..." */
    ngx_int_t                   inflight;      /* its slot, or -1 */
    ngx_str_t                   model;         /* served model name */
    time_t                      created;
    double                      arrival;       /* llm_now(): body read */
    double                      waited;        /* since when it waited for
                                                  the engine, or 0 */

    /*
     * The whole request: with one sequence its record; with several the
     * sum of their tokens (prompt tokens once per prompt) and the span of
     * their timestamps (earliest queued, scheduled and first token, latest
     * last token).  finish is set once every sequence finished: the worst
     * of theirs (error, abort, length, stop).  Variables read these.
     */
    llm_request_stats           stats;
    llm_finish_reason           finish;

    ngx_uint_t                  sequence_number;  /* responses events */
    ngx_str_t                   item_id;          /* responses: "msg_..." */
    ngx_str_t                   reasoning_id;     /* ... and "rs_..." */
    ngx_http_llm_resp_items_t  *items;            /* responses stream with
                                                     a tool parser */

    /* speculative decoding: per verify step, one sequence only */
    u_char                     *spec_accepted;
    u_char                     *spec_drafted;
    ngx_uint_t                  n_spec_step;
    ngx_uint_t                  spec_metrics;  /* NGX_HTTP_LLM_SPEC_METRICS_* */

    ngx_http_llm_json_t         scratch;       /* stream events render here */
    ngx_chain_t                *free;
    ngx_chain_t                *busy;          /* not taken by the socket */
    size_t                      max_unsent;    /* more in busy: pause */
    ngx_event_t                 guard;         /* keeps graceful exit waiting */

    unsigned                    stream:1;
    unsigned                    include_usage:1;
    unsigned                    continuous_usage:1;
    unsigned                    metrics:1;     /* the metrics object */
    unsigned                    timing:1;      /* its five times */
    unsigned                    phase_metrics:1;  /* output_token_metrics */
    unsigned                    prefix_caching:1;
    unsigned                    log_stats:1;
    unsigned                    queued:1;      /* in the ready queue */
    unsigned                    waiting:1;     /* in the waiting queue */
    unsigned                    submitted:1;   /* the engine saw it */
    unsigned                    role_sent:1;
    unsigned                    item_started:1;   /* responses stream */
    unsigned                    reasoning_item:1; /* ... its output[0] is
                                                     the reasoning */
    unsigned                    reasoning_open:1; /* ... still streaming */
    unsigned                    failed:1;      /* out of memory on drain */
    unsigned                    engine_lost:1; /* the engine process
                                                  stopped under it */
    unsigned                    paused:1;      /* the engine holds it back:
                                                  the client is behind */
    unsigned                    done:1;        /* final output written */
    unsigned                    billing:1;     /* a router asks for the
                                                  stream's record */
};


/* where the engine process listens (ngx_http_llm_engine.c) */
typedef struct {
    ngx_uint_t                  generation;
    ngx_pid_t                   pid;
    ngx_uint_t                  spawned;       /* by this worker */
    double                      started;       /* its spawn, llm_now() */
    u_char                      sock[64];
    size_t                      sock_len;
} ngx_http_llm_engine_where_t;


/*
 * This worker's side of the engine: the model's metadata (tokenizer,
 * template; loaded here), and the connection to the engine process.
 * ready: connected, and the engine's hello arrived.
 */
typedef struct {
    const llm_model            *model;
    llm_model                  *own_model;
    llm_client                 *client;
    ngx_connection_t           *conn;          /* the engine's socket */
    ngx_connection_t           *notify;        /* the loader's eventfd */
    int                         efd;
    ngx_queue_t                 ready_q;       /* ctxs with new output */
    ngx_queue_t                 waiting;       /* requests for an engine
                                                  that is not ready */
    ngx_queue_t                 live;          /* submitted ctxs */
    ngx_event_t                 retry;         /* find the engine again */
    ngx_event_t                 submitted;     /* posted: flush the
                                                  submissions of this turn
                                                  in one write */
    ngx_http_llm_engine_where_t where;
    ngx_http_llm_main_conf_t   *lmcf;
    ngx_cycle_t                *cycle;
    int                         max_model_len;
    double                      start;         /* this worker's, llm_now() */
    unsigned                    loading:1;     /* requests wait */
    unsigned                    ready:1;
    unsigned                    kept:1;        /* logged once */
    char                        error[LLM_ERR_LEN];
} ngx_http_llm_worker_t;


extern ngx_module_t           ngx_http_llm_module;
extern ngx_http_llm_worker_t  ngx_http_llm_worker;


/* ngx_http_llm_bridge.c */
void ngx_http_llm_preload(ngx_conf_t *cf, ngx_http_llm_main_conf_t *lmcf);
ngx_int_t ngx_http_llm_engine_start(ngx_cycle_t *cycle,
    ngx_http_llm_main_conf_t *lmcf);
void ngx_http_llm_engine_stop(ngx_cycle_t *cycle);
ngx_int_t ngx_http_llm_engine_accepts(void);
ngx_int_t ngx_http_llm_engine_unavailable(ngx_http_request_t *r);
ngx_int_t ngx_http_llm_engine_lost_error(ngx_http_request_t *r);
ngx_int_t ngx_http_llm_engine_submit(ngx_http_request_t *r,
    ngx_http_llm_ctx_t *ctx);
void ngx_http_llm_engine_release(ngx_http_llm_ctx_t *ctx);
void ngx_http_llm_engine_pause(ngx_http_llm_ctx_t *ctx, ngx_uint_t paused);

/* ngx_http_llm_module.c */
ngx_shm_zone_t *ngx_http_llm_struct_zone_add(ngx_conf_t *cf, ngx_str_t *name,
    size_t size);

/* ngx_http_llm_engine.c */
ngx_int_t ngx_http_llm_engine_add_zone(ngx_conf_t *cf);
ngx_int_t ngx_http_llm_engine_find(ngx_cycle_t *cycle,
    ngx_http_llm_main_conf_t *lmcf, ngx_http_llm_engine_where_t *where,
    ngx_msec_t *delay, char *err);
void ngx_http_llm_engine_reason(ngx_uint_t generation, char *err);
ngx_uint_t ngx_http_llm_engine_retiring(ngx_uint_t generation);
ngx_int_t ngx_http_llm_engine_stats(llm_engine_stats *st);

/* ngx_http_llm_handler.c */
ngx_int_t ngx_http_llm_api_handler(ngx_http_request_t *r);
void ngx_http_llm_parse(ngx_http_llm_job_t *job);

/* ngx_http_llm_billing.c */
ngx_int_t ngx_http_llm_billing_header(ngx_http_request_t *r,
    ngx_http_llm_ctx_t *ctx);
ngx_uint_t ngx_http_llm_billing_wanted(ngx_http_request_t *r);
void ngx_http_llm_billing_event(ngx_http_llm_json_t *j,
    ngx_http_llm_ctx_t *ctx);
ngx_http_llm_ctx_t *ngx_http_llm_billing_ctx(ngx_http_request_t *r);
ngx_http_llm_ctx_t *ngx_http_llm_billing_parse(ngx_http_request_t *r,
    u_char *s, size_t len);

/* ngx_http_llm_router.c */
char *ngx_http_llm_router_model(ngx_conf_t *cf, ngx_command_t *cmd,
    void *conf);
ngx_int_t ngx_http_llm_router_prefix_key(ngx_http_request_t *r,
    ngx_http_variable_value_t *v, uintptr_t data);
void ngx_http_llm_wake_waiting(void);

/* ngx_http_llm_routes.c */
const ngx_http_llm_route_t *ngx_http_llm_route_find(ngx_http_request_t *r,
    ngx_str_t *id);

/* ngx_http_llm_generate.c */
ngx_int_t ngx_http_llm_generate(ngx_http_request_t *r,
    ngx_http_llm_ctx_t *ctx);
void ngx_http_llm_deliver(ngx_http_llm_ctx_t *ctx);

/* ngx_http_llm_id.c */
ngx_int_t ngx_http_llm_random_id(ngx_pool_t *pool, ngx_str_t *id,
    const char *prefix);

/* ngx_http_llm_chat.c */
void ngx_http_llm_chat_parse(ngx_http_llm_job_t *job, yajl_val root);
ngx_int_t ngx_http_llm_chat_options(ngx_http_llm_job_t *job, yajl_val root,
    yajl_val *tools);
ngx_int_t ngx_http_llm_chat_prompt(ngx_http_llm_job_t *job, yajl_val root,
    yajl_val messages, yajl_val tools);
ngx_int_t ngx_http_llm_chat_chunk(ngx_http_llm_ctx_t *ctx,
    ngx_http_llm_json_t *j);
ngx_int_t ngx_http_llm_chat_body(ngx_http_llm_ctx_t *ctx,
    ngx_http_llm_json_t *j);

/* ngx_http_llm_tools.c: tool_choice and tool calls in chat output */

/* a call's delta: what came of call `index` since the last take */
typedef struct {
    ngx_int_t                   index;
    ngx_uint_t                  start;         /* the call's first: its
                                                  name with it */
    ngx_str_t                   name;
    ngx_array_t                 args;          /* u_char */
} ngx_http_llm_tool_delta_t;

ngx_int_t ngx_http_llm_tools_parse(ngx_http_llm_job_t *job, yajl_val root,
    yajl_val messages, yajl_val tools);
ngx_int_t ngx_http_llm_tools_feed(ngx_http_llm_seq_t *seq, size_t from);
ngx_uint_t ngx_http_llm_tools_pending(ngx_http_llm_seq_t *seq);
void ngx_http_llm_tools_delta(ngx_http_llm_json_t *j, ngx_http_llm_seq_t *seq);
void ngx_http_llm_tools_take(ngx_http_llm_seq_t *seq, ngx_str_t *content,
    ngx_http_llm_tool_delta_t **deltas, ngx_uint_t *n);
ngx_str_t *ngx_http_llm_tools_call_id(ngx_http_llm_seq_t *seq, ngx_uint_t i);
void ngx_http_llm_tools_content(ngx_http_llm_json_t *j,
    ngx_http_llm_seq_t *seq);
void ngx_http_llm_tools_calls(ngx_http_llm_json_t *j, ngx_http_llm_seq_t *seq);
void ngx_http_llm_tools_answer(ngx_http_llm_seq_t *seq, ngx_str_t *text);
ngx_uint_t ngx_http_llm_tools_n_calls(ngx_http_llm_seq_t *seq);
void ngx_http_llm_tools_call(ngx_http_llm_seq_t *seq, ngx_uint_t i,
    ngx_str_t *name, ngx_str_t *args);
const char *ngx_http_llm_tools_finish_reason(ngx_http_llm_seq_t *seq);

/* ngx_http_llm_reasoning.c */
ngx_int_t ngx_http_llm_reasoning_parse(ngx_http_llm_job_t *job,
    yajl_val kwargs, ngx_http_llm_prompt_t *p);
ngx_int_t ngx_http_llm_reasoning_append(ngx_http_llm_seq_t *seq,
    const llm_output *out);
void ngx_http_llm_reasoning_phases(ngx_http_llm_ctx_t *ctx,
    llm_token_phases *sum);
void ngx_http_llm_reasoning_usage(ngx_http_llm_json_t *j,
    ngx_http_llm_ctx_t *ctx);
void ngx_http_llm_reasoning_metrics_json(ngx_http_llm_json_t *j,
    ngx_http_llm_ctx_t *ctx, ngx_uint_t drop_nulls);
ngx_uint_t ngx_http_llm_reasoning_content_ttft(ngx_http_llm_ctx_t *ctx,
    double *ms);

/* ngx_http_llm_tools_grammar.c: tool_choice "required" and named (NULL:
 * "required") as a grammar */
ngx_int_t ngx_http_llm_tools_grammar(ngx_http_llm_job_t *job, yajl_val tools,
    const char *named, ngx_uint_t parallel);

/* ngx_http_llm_completions.c */
void ngx_http_llm_completions_parse(ngx_http_llm_job_t *job, yajl_val root);
ngx_int_t ngx_http_llm_completions_chunk(ngx_http_llm_ctx_t *ctx,
    ngx_http_llm_json_t *j);
ngx_int_t ngx_http_llm_completions_body(ngx_http_llm_ctx_t *ctx,
    ngx_http_llm_json_t *j);

/* ngx_http_llm_responses_input.c */
void ngx_http_llm_responses_parse(ngx_http_llm_job_t *job, yajl_val root);

/* ngx_http_llm_responses.c */
ngx_int_t ngx_http_llm_responses_start(ngx_http_request_t *r,
    ngx_http_llm_ctx_t *ctx);
ngx_int_t ngx_http_llm_responses_chunk(ngx_http_llm_ctx_t *ctx,
    ngx_http_llm_json_t *j);
ngx_int_t ngx_http_llm_responses_body(ngx_http_llm_ctx_t *ctx,
    ngx_http_llm_json_t *j);
ngx_int_t ngx_http_llm_response_get(ngx_http_request_t *r, ngx_str_t *id);
ngx_int_t ngx_http_llm_response_cancel(ngx_http_request_t *r,
    ngx_str_t *id);

/* ngx_http_llm_store.c: finished responses for previous_response_id
 * and GET/DELETE .../responses/{id}, each of its owner, in a shared
 * memory zone for every worker */
ngx_int_t ngx_http_llm_store_add_zone(ngx_conf_t *cf, ngx_uint_t entries,
    size_t bytes);
void ngx_http_llm_store_init(ngx_cycle_t *cycle);
ngx_int_t ngx_http_llm_store_owner(ngx_http_request_t *r, u_char *owner);
ngx_int_t ngx_http_llm_store_put(ngx_str_t *id, const u_char *owner,
    const u_char *messages, size_t messages_len, const u_char *response,
    size_t response_len);
ngx_int_t ngx_http_llm_store_messages(const char *id, const u_char *owner,
    ngx_pool_t *pool, ngx_str_t *out);
ngx_int_t ngx_http_llm_store_response(ngx_str_t *id, const u_char *owner,
    ngx_pool_t *pool, ngx_str_t *out);
ngx_int_t ngx_http_llm_store_delete(ngx_str_t *id, const u_char *owner);

/* ngx_http_llm_tokenize.c */
void ngx_http_llm_tokenize_parse(ngx_http_llm_job_t *job, yajl_val root);
ngx_int_t ngx_http_llm_tokenize_send(ngx_http_request_t *r,
    ngx_http_llm_ctx_t *ctx);
void ngx_http_llm_detokenize_parse(ngx_http_llm_job_t *job, yajl_val root);
ngx_int_t ngx_http_llm_detokenize_send(ngx_http_request_t *r,
    ngx_http_llm_ctx_t *ctx);

/* ngx_http_llm_job.c: ABSENT for a missing key or null, INVALID = error */
#define NGX_HTTP_LLM_FIELD_ABSENT    0
#define NGX_HTTP_LLM_FIELD_PRESENT   1
#define NGX_HTTP_LLM_FIELD_INVALID   -1

ngx_http_llm_job_t *ngx_http_llm_job_create(ngx_http_request_t *r,
    const ngx_http_llm_route_t *route);
ngx_int_t ngx_http_llm_job_model(ngx_http_llm_job_t *job, yajl_val root);
ngx_int_t ngx_http_llm_job_request(ngx_http_llm_job_t *job, yajl_val root);
ngx_int_t ngx_http_llm_job_format(ngx_http_llm_job_t *job, yajl_val format,
    const char *param);
ngx_int_t ngx_http_llm_job_schema(ngx_http_llm_job_t *job, yajl_val schema,
    const char *param, const char *where);
ngx_int_t ngx_http_llm_job_spec(ngx_http_llm_job_t *job, char *spec,
    const char *param, const char *where);
ngx_int_t ngx_http_llm_job_double(ngx_http_llm_job_t *job, yajl_val root,
    const char *key, double *out);
ngx_int_t ngx_http_llm_job_int(ngx_http_llm_job_t *job, yajl_val root,
    const char *key, int64_t *out);
ngx_int_t ngx_http_llm_job_bool(ngx_http_llm_job_t *job, yajl_val root,
    const char *key, ngx_uint_t *out);
ngx_int_t ngx_http_llm_job_strings(ngx_http_llm_job_t *job, yajl_val root,
    const char *key, ngx_uint_t bare, size_t max, size_t max_len,
    ngx_array_t **list);
ngx_http_llm_prompt_t *ngx_http_llm_job_token_ids(ngx_http_llm_job_t *job,
    yajl_val list, const char *param, const char *name);
ngx_http_llm_prompt_t *ngx_http_llm_job_tokenize(ngx_http_llm_job_t *job,
    const char *text, size_t len, ngx_uint_t add_special, const char *param);
ngx_int_t ngx_http_llm_job_decode(ngx_http_llm_job_t *job,
    const int32_t *ids, size_t n, ngx_uint_t skip_special, ngx_str_t *text);
ngx_int_t ngx_http_llm_job_copy(ngx_http_llm_job_t *job, const char *s,
    size_t len, ngx_str_t *out);
void ngx_http_llm_job_error(ngx_http_llm_job_t *job, ngx_uint_t status,
    const char *param, const char *fmt, ...);
void ngx_http_llm_job_nomem(ngx_http_llm_job_t *job);

/* ngx_http_llm_params.c */
ngx_int_t ngx_http_llm_params_parse(ngx_http_llm_job_t *job, yajl_val root,
    const ngx_http_llm_params_conf_t *pc);
ngx_int_t ngx_http_llm_params_logprobs(ngx_http_llm_job_t *job, int64_t n,
    const char *param);
ngx_int_t ngx_http_llm_params_finish(ngx_http_llm_job_t *job);

/* ngx_http_llm_logprobs.c */
void ngx_http_llm_logprobs_chat(ngx_http_llm_json_t *j,
    ngx_http_llm_seq_t *seq);
void ngx_http_llm_logprobs_list(ngx_http_llm_json_t *j,
    ngx_http_llm_seq_t *seq, ngx_uint_t from, ngx_uint_t bytes);
void ngx_http_llm_logprobs_completions(ngx_http_llm_json_t *j,
    ngx_http_llm_seq_t *seq, ngx_uint_t echo);
void ngx_http_llm_prompt_logprobs(ngx_http_llm_json_t *j,
    ngx_http_llm_seq_t *seq);
void ngx_http_llm_stop_reason(ngx_http_llm_json_t *j,
    ngx_http_llm_seq_t *seq);
void ngx_http_llm_token_ids(ngx_http_llm_json_t *j, ngx_http_llm_job_t *job,
    const int32_t *ids, ngx_uint_t n);

/* ngx_http_llm_models.c */
ngx_int_t ngx_http_llm_models_list(ngx_http_request_t *r, ngx_str_t *id);
ngx_int_t ngx_http_llm_models_card(ngx_http_request_t *r, ngx_str_t *id);

/* ngx_http_llm_health.c */
ngx_int_t ngx_http_llm_get_ready(ngx_http_request_t *r);
ngx_int_t ngx_http_llm_health_handler(ngx_http_request_t *r);

/* ngx_http_llm_sse.c */
ngx_int_t ngx_http_llm_send_json(ngx_http_request_t *r, ngx_uint_t status,
    ngx_http_llm_json_t *j);
ngx_int_t ngx_http_llm_send_body(ngx_http_request_t *r, ngx_uint_t status,
    ngx_str_t *type, ngx_http_llm_json_t *j);
ngx_int_t ngx_http_llm_sse_start(ngx_http_request_t *r);
ngx_int_t ngx_http_llm_sse_send(ngx_http_request_t *r,
    ngx_http_llm_ctx_t *ctx, ngx_http_llm_json_t *j, ngx_uint_t last);
void ngx_http_llm_writer(ngx_http_request_t *r);

/* ngx_http_llm_chunk.c: the frame of chat and completions streams */
void ngx_http_llm_chunk_head(ngx_http_llm_json_t *j, ngx_http_llm_ctx_t *ctx,
    const char *object);
void ngx_http_llm_chunk_written(ngx_http_llm_seq_t *seq);
ngx_int_t ngx_http_llm_chunk_end(ngx_http_llm_json_t *j,
    ngx_http_llm_ctx_t *ctx, const char *object);

/* ngx_http_llm_error.c */
ngx_int_t ngx_http_llm_send_error(ngx_http_request_t *r, ngx_uint_t status,
    const char *type, const char *param, const char *fmt, ...);
ngx_int_t ngx_http_llm_send_not_allowed(ngx_http_request_t *r,
    const char *allow, const char *fmt, ...);
ngx_int_t ngx_http_llm_error_json(ngx_http_llm_json_t *j, ngx_uint_t status,
    const char *type, const char *param, const u_char *msg, size_t len);
const char *ngx_http_llm_error_type(ngx_uint_t status);
const char *ngx_http_llm_error_reason(ngx_uint_t status);

/* ngx_http_llm_usage.c */
#define NGX_HTTP_LLM_USAGE_CHUNK    0     /* running usage of a chunk */
#define NGX_HTTP_LLM_USAGE_BODY     1     /* a whole response body */
#define NGX_HTTP_LLM_USAGE_FINAL    2     /* the final usage chunk */

/* the five fields of the metrics object, in vLLM's key order */
typedef struct {
    ngx_str_t                   key;           /* "\"queue_time_ms\":" */
    size_t                      has;           /* offsets in llm_metrics */
    size_t                      value;
} ngx_http_llm_metric_t;

#define NGX_HTTP_LLM_METRIC_TTFT        0
#define NGX_HTTP_LLM_METRIC_GENERATION  1
#define NGX_HTTP_LLM_METRIC_QUEUE       2
#define NGX_HTTP_LLM_METRIC_ITL         3
#define NGX_HTTP_LLM_METRIC_TPS         4
#define NGX_HTTP_LLM_METRIC_N           5

extern const ngx_http_llm_metric_t  ngx_http_llm_metrics[];

ngx_uint_t ngx_http_llm_metrics_fields(ngx_http_llm_json_t *j,
    const llm_metrics *m, ngx_uint_t drop_nulls, ngx_uint_t queue,
    ngx_uint_t first);
ngx_int_t ngx_http_llm_metrics_json(ngx_http_llm_json_t *j,
    ngx_http_llm_ctx_t *ctx, ngx_uint_t drop_nulls);
void ngx_http_llm_metrics_body(ngx_http_llm_json_t *j,
    ngx_http_llm_ctx_t *ctx);
double ngx_http_llm_spec_acceptance(const llm_request_stats *s);
ngx_int_t ngx_http_llm_usage_json(ngx_http_llm_json_t *j,
    ngx_http_llm_ctx_t *ctx, ngx_uint_t what);
void ngx_http_llm_usage_seq_json(ngx_http_llm_json_t *j,
    ngx_http_llm_seq_t *seq);

/* ngx_http_llm_prometheus.c */
ngx_int_t ngx_http_llm_prometheus_handler(ngx_http_request_t *r);

/* ngx_http_llm_variables.c */
ngx_int_t ngx_http_llm_add_variables(ngx_conf_t *cf);


#endif /* _NGX_HTTP_LLM_MODULE_H_INCLUDED_ */
