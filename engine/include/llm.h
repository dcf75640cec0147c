/*
 * llm.h -- the engine's public API: what the nginx module, the CLI and the
 * tests use.  No nginx headers, no model math here.
 *
 * Threads: llm_engine_create() starts one engine thread that owns the model,
 * the KV cache and the backend.  A single client thread (the nginx event loop,
 * or the CLI) submits requests, cancels them and drains their output.  The
 * engine calls cfg.notify() on its own thread when output is ready; the client
 * then calls llm_engine_drain() on its thread.  Nothing blocks for long.
 * With cfg.inline_loop there is no engine thread: the client's loop runs
 * the steps itself (llm_engine_run()), as the engine process's server does.
 */
#ifndef LLM_H
#define LLM_H

#include <stddef.h>
#include <stdint.h>

#define LLM_ERR_LEN 512            /* every `char *err` points to this many bytes */
#define LLM_SPEC_MAX_TOKENS 15     /* most draft tokens per step */

typedef struct llm_engine   llm_engine;
typedef struct llm_request  llm_request;
typedef struct llm_model    llm_model;


typedef struct {
    const char  *model_dir;
    const char  *device;                 /* "auto" | "cpu" | "cuda:N"; NULL = auto */
    const char  *weights;                /* quantize on load: "q8_0" | "q4_0" |
                                            "q4_k"; NULL = as stored */
    int          threads;                /* CPU compute threads; 0 = all cores */
    int          max_model_len;          /* 0 = the model's max_position_embeddings */
    int          max_num_seqs;           /* 0 = 64 */
    int          max_num_batched_tokens; /* 0 = 2048 */
    size_t       kv_cache_bytes;         /* CPU KV pool; 0 = sized for max_num_seqs */
    double       gpu_memory_utilization; /* 0 = 0.9 */
    int          enable_prefix_caching;
    int          spec_tokens;            /* n-gram speculation: 0 = off */
    int          spec_lookup_min;
    int          spec_lookup_max;
    /* called on the engine thread whenever llm_engine_drain() has work */
    void       (*notify)(void *data);
    void        *notify_data;
    /* 1: no engine thread; the client's thread runs the steps with
     * llm_engine_run() (the engine process's one loop) */
    int          inline_loop;
} llm_engine_config;


typedef enum {
    LLM_FINISH_NONE = 0,                 /* still running */
    LLM_FINISH_STOP,                     /* EOS, stop token id or stop string */
    LLM_FINISH_LENGTH,                   /* max_tokens or max_model_len */
    LLM_FINISH_ABORT,                    /* cancelled by the client */
    LLM_FINISH_ERROR
} llm_finish_reason;

const char *llm_finish_reason_str(llm_finish_reason r);  /* "stop", "length", ... */


/* The request's own values as doubles: validation messages quote them as
 * Python prints them, and echoes (the Responses object) return them. */
typedef struct {
    double        temperature;           /* < 1e-5 means greedy */
    double        top_p;                 /* (0, 1] */
    int           top_k;                 /* 0 = off */
    double        min_p;                 /* [0, 1] */
    double        presence_penalty;      /* [-2, 2] */
    double        frequency_penalty;     /* [-2, 2] */
    double        repetition_penalty;    /* > 0, 1 = off */
    int           has_seed;
    uint64_t      seed;
    int           max_tokens;            /* capped to max_model_len - prompt */
    int           min_tokens;
    int           ignore_eos;
    int           logprobs;              /* -1 = none, else top-N alternatives (0..20) */
    int           prompt_logprobs;       /* -1 = none, else each prompt token's
                                          * logprob and top-N (0..20); llm_output */
    const int32_t *stop_token_ids;       /* in addition to the model's EOS ids */
    int           n_stop_token_ids;
    const char  *const *stop;            /* stop strings, never emitted */
    int           n_stop;
    const int32_t *logit_bias_ids;
    const float  *logit_bias_values;
    int           n_logit_bias;
    const int32_t *allowed_token_ids;    /* if any: only these are sampled */
    int           n_allowed_token_ids;
    int           include_stop_str_in_output;  /* and the stop token's text */
    int           keep_special_tokens;   /* vLLM's skip_special_tokens=false */
    const char   *const *bad_words;      /* vLLM's bad_words: never the
                                          * tokens that would complete one */
    int           n_bad_words;
    int           json_object;           /* the output is a JSON object
                                          * (OpenAI's response_format) */
    const char   *structured;            /* or follows this grammar spec
                                          * (JSON text: a schema, a choice,
                                          * a regex ...; llm_structured_check);
                                          * NULL: free */
    const char   *cache_salt;            /* prefix cache shared only with
                                          * the same salt; NULL: no salt */
    int           n;                     /* the API request's n (metrics only) */
    int           seq_index;             /* which of the n this is */
} llm_sampling_params;

/* Defaults: vLLM's, overridden by the model's generation_config.json. */
void llm_sampling_params_init(llm_sampling_params *p, const llm_model *m);

/* vLLM's validation rules: 0, or -1 with the offending parameter's name in
 * *param and vLLM's message in err.  llm_request_create() applies it too. */
int llm_sampling_params_validate(const llm_sampling_params *p,
    const llm_model *m, const char **param, char *err);


/*
 * Per-request record.  Timestamps are seconds on one CLOCK_MONOTONIC clock,
 * stamped by the engine once per step; 0 means unset (vLLM's sentinel).
 */
typedef struct {
    double        arrival;               /* llm_request_create() */
    double        queued;                /* entered the waiting queue */
    double        scheduled;             /* first scheduled; preemption keeps it */
    double        first_token;           /* step that produced the first token */
    double        last_token;            /* step that produced the latest token */
    double        finished;
    int           prompt_tokens;
    int           cached_tokens;         /* prompt tokens served by the prefix cache */
    int           completion_tokens;
    int           num_preemptions;
    int           max_tokens;            /* effective, after capping */
    /* speculative decoding (spec_tokens > 0): steps that verified drafts,
     * drafts proposed, drafts accepted, and how many steps accepted j */
    int           num_spec_tokens;       /* k, as configured */
    int           num_spec_steps;
    int           num_draft_tokens;
    int           num_accepted_tokens;
    int           acceptance_histogram[LLM_SPEC_MAX_TOKENS + 1];
} llm_request_stats;


/*
 * The per-request metrics of vLLM's `metrics` object, from the timestamps
 * above (SPEC section 6).  A field exists only when has_<field> is set; the
 * JSON shows null otherwise.  N is completion_tokens.
 */
typedef struct {
    int           has_ttft, has_generation, has_queue, has_mean_itl, has_tps;
    double        ttft_ms;               /* (first_token - scheduled) * 1000 */
    double        generation_ms;         /* (last_token - first_token) * 1000 */
    double        queue_ms;              /* (scheduled - queued) * 1000 */
    double        mean_itl_ms;           /* generation / (N - 1), N > 1 */
    double        tokens_per_second;     /* N / (last_token - scheduled) */
} llm_metrics;

void llm_metrics_compute(const llm_request_stats *s, llm_metrics *m);


/* One token's logprob record (when llm_sampling_params.logprobs >= 0, and
 * for the prompt with prompt_logprobs >= 0): log-softmax of the raw logits. */
typedef struct {
    int32_t       id;
    float         logprob;
    int           rank;                  /* tokens with a logprob >= id's (vLLM's
                                          * rank: 1 = the most likely) */
    int           n_top;
    int32_t       top_ids[20];
    float         top_logprobs[20];
} llm_token_logprob;


/* What llm_engine_drain() hands over for one request: everything new since
 * the previous drain.  Pointers are valid only during the callback. */
typedef struct {
    const char   *text;                  /* newly final UTF-8 text (stop strings removed) */
    size_t        text_len;
    const int32_t *ids;                  /* new token ids */
    const double  *token_times;          /* each one's step (the clock of
                                          * llm_request_stats) */
    int           n_ids;
    const llm_token_logprob *logprobs;   /* n_ids records, or NULL */
    /* prompt_logprobs >= 0: once, with the output that carries the first
     * token, n_prompt - 1 records; record i is prompt token i + 1 given
     * tokens 0..i (the first token has none).  NULL in every other output
     * (and when the prompt has one token). */
    const llm_token_logprob *prompt_logprobs;
    int           n_prompt_logprobs;
    llm_finish_reason finish_reason;     /* != NONE: this is the last output */
    int32_t       stop_token;            /* stop_reason: the stop_token_ids id that
                                          * stopped; -1 otherwise (also for EOS) */
    const char   *stop_string;           /* or the stop string that matched, or NULL */
    llm_request_stats stats;             /* snapshot at this drain */
    /* with the final output, when speculating: accepted and drafted tokens
     * of each verify step, in order (per_step_* of the spec metrics) */
    const uint8_t *spec_step_accepted;
    const uint8_t *spec_step_drafted;
    int           n_spec_step;
} llm_output;

typedef void (*llm_output_fn)(llm_request *r, const llm_output *out, void *data);


/* The loaded model's parts the client needs (read-only, thread-safe). */
typedef struct llm_tokenizer      llm_tokenizer;
typedef struct llm_chat_template  llm_chat_template;
const llm_tokenizer *llm_model_tokenizer(const llm_model *m);
/* NULL when the model has no chat template. */
const llm_chat_template *llm_model_chat_template(const llm_model *m);
int llm_model_vocab_size(const llm_model *m);
const char *llm_model_dir(const llm_model *m);
/* 1 if the id is one of generation_config's eos_token_id. */
int llm_model_is_eos(const llm_model *m, int32_t id);


/* The tokenizer (Hugging Face tokenizer.json; thread-safe once loaded). */

/* Highest token id + 1 (vocabulary plus added tokens). */
int llm_tokenizer_vocab_size(const llm_tokenizer *t);

/* HF encode(text, add_special_tokens=add_special): special and added tokens
 * in the text are recognised.  Invalid UTF-8 is handled (defined output, no
 * crash).  Returns the number of ids and a malloc'd array in *ids, or -1
 * (with err filled) on failure. */
int llm_tokenizer_encode(const llm_tokenizer *t, const char *text, size_t len,
    int add_special, int32_t **ids, char *err);

/* HF decode(ids, skip_special_tokens=skip_special).  Returns a malloc'd
 * NUL-terminated string; its length in *len. */
char *llm_tokenizer_decode(const llm_tokenizer *t, const int32_t *ids,
    size_t n, int skip_special, size_t *len);

/* The token's string in the vocabulary (e.g. "Ġhello", "▁hello", "<0x0A>"),
 * or NULL for an id out of range. */
const char *llm_tokenizer_token_str(const llm_tokenizer *t, int32_t id);

/* The id of a token string (vocabulary or added token), or -1. */
int32_t llm_tokenizer_token_id(const llm_tokenizer *t, const char *str);

/* 1 if the id is an added token marked "special": true. */
int llm_tokenizer_is_special(const llm_tokenizer *t, int32_t id);


/* The chat template.  A JSON value is yajl's yajl_val (struct yajl_val_s *). */
struct yajl_val_s;

/* Renders with messages (a JSON array), tools (array or NULL), documents
 * (array or NULL), add_generation_prompt, and extra kwargs (an object whose
 * keys become template variables, e.g. enable_thinking; NULL for none).
 * Returns a malloc'd string (length in *len), or NULL with the reason in err
 * (a raise_exception() message is passed through verbatim). */
char *llm_chat_template_render(const llm_chat_template *t,
    struct yajl_val_s *messages, struct yajl_val_s *tools,
    struct yajl_val_s *documents, int add_generation_prompt,
    struct yajl_val_s *kwargs, size_t *len, char *err);

/* Flags of llm_chat_template_render_flags(). */
#define LLM_CHAT_TOOL_ARGS_JSON  0x01   /* what vLLM does to OpenAI requests
    before rendering: in assistant messages, tool_calls[].function.arguments
    given as a JSON string is parsed into its value (missing, null or ""
    become {}), because chat templates expect objects there; a string that
    is not JSON is an error */

/* llm_chat_template_render() with flags (0 is exactly the function above). */
char *llm_chat_template_render_flags(const llm_chat_template *t,
    struct yajl_val_s *messages, struct yajl_val_s *tools,
    struct yajl_val_s *documents, int add_generation_prompt,
    struct yajl_val_s *kwargs, unsigned flags, size_t *len, char *err);


/* The template's source text (both sources when tokenizer_config.json
 * names a "default" and a "tool_use" template), for what depends on the
 * markup a model family was taught (llm_tool_parser_detect()). */
const char *llm_chat_template_source(const llm_chat_template *t);


/*
 * Tool calls in generated text (engine/toolcall): vLLM's tool-call parsers
 * for the markup each model family's chat template teaches.  A parser is
 * fed the text of one sequence piece by piece, as the engine makes it, and
 * reports what it is, through a callback, as soon as it can tell:
 * content (never markup that parsed), the start of a call (its index and
 * name), and fragments of its arguments: the bytes of the arguments' JSON
 * value as the model wrote them.  After llm_tool_parser_finish() the
 * result: the calls, each with its arguments as one JSON text, and the
 * content -- or, when markup was malformed or unfinished, no calls and the
 * whole text as content (vLLM's rule; a stream that already reported a
 * call cannot take it back).  docs/api.md, "Tool calls".
 */
typedef enum {
    LLM_TOOL_PARSER_NONE = 0,
    LLM_TOOL_PARSER_HERMES,              /* <tool_call>{"name", "arguments"}</tool_call> */
    LLM_TOOL_PARSER_LLAMA3_JSON,         /* [<|python_tag|>]{"name", "parameters"}; ... */
    LLM_TOOL_PARSER_MISTRAL,             /* [TOOL_CALLS][{...}, ...] or [TOOL_CALLS]name[ARGS]{...} */
    /* the forms a grammar forces (vLLM's, for any model): */
    LLM_TOOL_PARSER_NAMED,               /* {...}: the arguments of the one
                                          * function tool_choice names */
    LLM_TOOL_PARSER_JSON_ARRAY           /* [{"name", "parameters"}, ...]:
                                          * tool_choice "required" */
} llm_tool_parser_kind;

/* "hermes", "llama3_json", "mistral"; -1 for another name. */
int llm_tool_parser_kind_from_name(const char *name, size_t len);
const char *llm_tool_parser_kind_name(llm_tool_parser_kind k);
/* The parser a chat template's markup asks for, or NONE. */
llm_tool_parser_kind llm_tool_parser_detect(const char *template_source);

typedef enum {
    LLM_TOOL_EV_CONTENT = 0,             /* text: content */
    LLM_TOOL_EV_CALL,                    /* call `index` starts; text: its name */
    LLM_TOOL_EV_ARGS                     /* text: more of call `index`'s arguments */
} llm_tool_event_type;

typedef struct {
    llm_tool_event_type  type;
    int                  index;
    const char          *text;           /* valid during the callback */
    size_t               len;
} llm_tool_event;

typedef void (*llm_tool_event_fn)(const llm_tool_event *ev, void *data);

typedef struct llm_tool_parser  llm_tool_parser;

llm_tool_parser *llm_tool_parser_new(llm_tool_parser_kind kind);
/* NAMED: the text is the arguments of a call of `name`. */
llm_tool_parser *llm_tool_parser_new_named(const char *name, size_t len);
void llm_tool_parser_free(llm_tool_parser *p);
/* fn may be NULL (only the result is wanted). */
void llm_tool_parser_feed(llm_tool_parser *p, const char *text, size_t len,
    llm_tool_event_fn fn, void *data);
/* The end of the sequence: what was held back is reported. */
void llm_tool_parser_finish(llm_tool_parser *p, llm_tool_event_fn fn,
    void *data);
/* After finish: the calls (0: none, the whole text is the content) ... */
int llm_tool_parser_n_calls(const llm_tool_parser *p);
const char *llm_tool_parser_call_name(const llm_tool_parser *p, int i,
    size_t *len);
const char *llm_tool_parser_call_args(const llm_tool_parser *p, int i,
    size_t *len);
/* ... and the content: NULL for none (calls and nothing before them). */
const char *llm_tool_parser_content(const llm_tool_parser *p, size_t *len);


/*
 * Reasoning in generated text (engine/reasoning): vLLM's reasoning parsers
 * of the <think>...</think> family (Qwen3, DeepSeek-R1 and its distills).
 * One parser per sequence splits its text into reasoning and content and
 * classifies its tokens by id -- reasoning, content, or unclassified (the
 * think markers, tool-call markup, the stop token) -- with the timestamp
 * of the step that made them, for vLLM's output_token_metrics.  The text
 * and the ids are two views of one output and are fed separately.  The
 * markers are configured, not looked up: the module reads their ids from
 * the tokenizer (docs/api.md, "Reasoning").
 */
typedef enum {
    LLM_REASONING_PARSER_NONE = 0,
    LLM_REASONING_PARSER_QWEN3,          /* <think>...</think>; the chat
                                          * template's enable_thinking */
    LLM_REASONING_PARSER_DEEPSEEK_R1     /* <think>...</think>, always */
} llm_reasoning_parser_kind;

/* "qwen3", "deepseek_r1"; -1 for another name. */
int llm_reasoning_parser_kind_from_name(const char *name, size_t len);
const char *llm_reasoning_parser_kind_name(llm_reasoning_parser_kind k);

typedef struct {
    const char   *start;                 /* "<think>" */
    const char   *end;                   /* "</think>" */
    int32_t       start_id, end_id;      /* their token ids, or -1 */
    int32_t       tool_open_id;          /* a tool call's markup opens ...*/
    int32_t       tool_close_id;         /* ... and closes (-1: at the end) */
    int           tools_only;            /* after the reasoning every token
                                          * is a tool call's (forced calls) */
    int           in_reasoning;          /* the output starts in the think
                                          * block (the prompt opened it) */
} llm_reasoning_config;

/* One category's tokens: how many, the first and last one's step time,
 * and whether a step gave it more than one token (then its mean ITL and
 * tokens/s have no per-token meaning: vLLM leaves them null). */
typedef struct {
    int           tokens;
    double        first, last;
    int           batched;
} llm_token_phase;

typedef struct {
    llm_token_phase  reasoning, content;
    int              unclassified;
} llm_token_phases;

typedef struct llm_reasoning_parser  llm_reasoning_parser;

/* fn gets each piece of text: reasoning (1) or content (0). */
typedef void (*llm_reasoning_text_fn)(int reasoning, const char *text,
    size_t len, void *data);

llm_reasoning_parser *llm_reasoning_parser_new(const llm_reasoning_config *c);
void llm_reasoning_parser_free(llm_reasoning_parser *p);
/* More text of the sequence; what may be the start of a marker is held
 * back until the next piece or llm_reasoning_parser_finish(). */
void llm_reasoning_parser_text(llm_reasoning_parser *p, const char *text,
    size_t len, llm_reasoning_text_fn fn, void *data);
void llm_reasoning_parser_finish(llm_reasoning_parser *p,
    llm_reasoning_text_fn fn, void *data);
/* More ids, each with its step's time (llm_output.token_times); stop: the
 * last of them is the token that stopped the sequence (EOS or a stop token
 * id). */
void llm_reasoning_parser_tokens(llm_reasoning_parser *p, const int32_t *ids,
    const double *times, int n, int stop);
const llm_token_phases *llm_reasoning_parser_phases(
    const llm_reasoning_parser *p);
/* Whether the output is still inside the think block. */
int llm_reasoning_parser_in_reasoning(const llm_reasoning_parser *p);

/* A category's metrics (engine/metrics.c): time_to_first_token_ms from
 * `scheduled`, generation_time_ms between its first and last step,
 * mean_itl_ms = generation / (tokens - 1) and tokens_per_second its
 * reciprocal (tokens > 1, a positive interval, one token a step); all
 * unset for no tokens.  has_queue is never set. */
void llm_token_phase_metrics(const llm_token_phase *ph, double scheduled,
    llm_metrics *m);


/* Small primitives the module and the engine share. */

/* Parses JSON from a client into yajl's tree: RFC 8259 as Python's
 * json.loads reads it (no comments, nothing after the value, a NUL byte is
 * an error), strings and keys in strict UTF-8, arrays and objects nested at
 * most max_depth deep.  Neither parsing nor llm_json_free() recurses, so no
 * input can exhaust a thread's stack.  NULL with a one-line message in err
 * (LLM_ERR_LEN bytes). */
struct yajl_val_s *llm_json_parse(const char *text, size_t len, int max_depth,
    char *err);

/* The depth the nginx module parses request bodies with (and the chat
 * template tool-call arguments): far deeper than any real request (a tool's
 * JSON schema rarely passes 10), and well within the 128 levels of yajl_gen,
 * which writes some of it back (the Responses API echoes fields). */
#define LLM_JSON_MAX_DEPTH 64

/* A tree as compact JSON text (numbers as they were written), malloc'd and
 * NUL-terminated, its length in *len.  Recursion: the tree's depth, which
 * llm_json_parse() bounds. */
char *llm_json_dump(struct yajl_val_s *v, size_t *len);

/* Structured output (engine/grammar/grammar.h has the spec's forms): 0
 * when the spec compiles (once per text: the engine's compiled grammars
 * are cached by it), -1 with a message in err that names what cannot be
 * honoured (a JSON Schema keyword, a bad regex ...). */
int llm_structured_check(const char *spec, char *err);

/* The spec {"KIND": JSON} (malloc'd, NUL-terminated) around JSON text
 * already written: KIND "schema" with a JSON Schema, "choice" with an
 * array of strings, "regex" with a string ... */
char *llm_structured_spec(const char *kind, const char *json, size_t len);

/* Frees a tree from llm_json_parse() or yajl_tree_parse() (and nodes added
 * to it with malloc), iteratively: use it instead of yajl_tree_free(). */
void llm_json_free(struct yajl_val_s *root);

/* The value of KEY in a JSON object; when the key repeats, the last one
 * (Python's json).  NULL when absent or when OBJ is not an object. */
struct yajl_val_s *llm_json_get(struct yajl_val_s *obj, const char *key);

/* 1 if s[0..n) is UTF-8 in the strict sense (no overlong forms, no
 * surrogates, nothing above U+10FFFF). */
int llm_utf8_valid(const char *s, size_t n);

/* s[0..n) into out (room for 3 * n bytes) with every ill-formed sequence
 * replaced by U+FFFD, one for each maximal subpart (what Python's
 * decode(errors="replace") does); returns the length written. */
size_t llm_utf8_repair(const char *s, size_t n, char *out);

/* 2 * n_bytes lowercase hex digits and a NUL: n_bytes from the kernel's
 * CSPRNG (getrandom), for ids that must not be predictable (16 bytes give
 * the 128 bits of an OpenAI id). */
void llm_random_hex(char *out, size_t n_bytes);

/* n characters of [A-Za-z0-9], uniform, from the kernel's CSPRNG, and a
 * NUL (Mistral's 9-character tool-call ids). */
void llm_random_alnum(char *out, size_t n);

/* A double as Python's repr() writes it ("1.0", "0.1", "1e-05", "1e+16"):
 * the shortest digits that read back exactly.  buf: 32 bytes. */
const char *llm_pyfloat(char *buf, double v);

/* Engine life cycle. */
llm_engine *llm_engine_create(const llm_engine_config *cfg, char *err);
void llm_engine_destroy(llm_engine *e);
const llm_model *llm_engine_model(const llm_engine *e);
const char *llm_engine_device(const llm_engine *e);   /* "cpu", "cuda:0" */
/* Which device llm_device "auto" chose and why, for the log. */
const char *llm_engine_device_reason(const llm_engine *e);
int llm_engine_max_model_len(const llm_engine *e);

/*
 * Requests.  create() copies the prompt and the parameters, validates them
 * against the model (NULL and a message in err when invalid, e.g. a prompt
 * longer than max_model_len) and returns a request holding one reference for
 * the caller.  submit() hands it to the engine, which takes its own reference.
 * cancel() is safe at any time; the request then finishes with ABORT and
 * returns the final number of completion tokens.
 * release() drops the caller's reference; the engine drops its own after the
 * final output was drained.
 */
llm_request *llm_request_create(llm_engine *e, const int32_t *prompt,
    int n_prompt, const llm_sampling_params *p, char *err);
void llm_request_set_data(llm_request *r, void *data);
/* When the API request really arrived (llm_now() clock), for Prometheus'
 * TTFT and end-to-end latency; default: llm_request_create() time. */
void llm_request_set_arrival(llm_request *r, double t);
void *llm_request_data(const llm_request *r);
/* The request has waited since t (llm_now() clock) for an engine to take
 * it (a client held it while the engine started): its queue time counts
 * from t.  0, the default: from when the engine takes it. */
void llm_request_set_queued(llm_request *r, double t);
int llm_engine_submit(llm_engine *e, llm_request *r);
/* Parallel sampling (n > 1): submits r, whose prompt equals leader's, so
 * that it starts from the leader's computed prompt blocks instead of
 * computing them again (it waits for the leader's prefill to get them).
 * -1 if the prompts differ or r was already submitted. */
int llm_engine_submit_shared(llm_engine *e, llm_request *r,
    llm_request *leader);
/* Cancels r; returns its completion tokens, which no longer change: the
 * engine keeps and counts no token after the cancel (exact abort billing). */
int llm_engine_cancel(llm_engine *e, llm_request *r);
/* Pauses (paused = 1) or resumes (0) r's generation, at any time, from the
 * client's thread: from the engine's next step on, a paused request gets
 * no tokens and costs no compute; it keeps its place and its KV blocks
 * (unless the pool runs dry: paused requests are preempted first) and
 * can still be cancelled.  Resumed, it goes on where it stopped, with the
 * output it would have had without the pause.  For a client that cannot
 * take output as fast as the engine makes it (backpressure). */
void llm_engine_set_paused(llm_engine *e, llm_request *r, int paused);
void llm_request_release(llm_request *r);

/* An engine with inline_loop: takes what was submitted, cancelled or
 * paused, runs one step and publishes its output (drain it next); returns
 * 1 while there is more to do (call again without waiting), 0 when idle
 * until the next submission, cancel or resume.  0 at once for an engine
 * with its own thread. */
int llm_engine_run(llm_engine *e);

/* Calls fn for every request with new output; call after notify(). */
void llm_engine_drain(llm_engine *e, llm_output_fn fn, void *data);

/* llm_engine_cancel() for a client that received only the first n_billed
 * tokens of r (a client in another process, engine/ipc): the tokens the
 * engine made beyond them were never delivered, so r finishes with
 * n_billed completion tokens and the engine's counters leave the others
 * out; the access log and Prometheus agree. */
int llm_engine_cancel_billed(llm_engine *e, llm_request *r, int n_billed);

/* What llm_request_create() checks, without an engine: the prompt against
 * the model and max_model_len, then llm_sampling_params_validate().  0, or
 * -1 with the message in err (a client that validates before it sends). */
int llm_request_validate(const llm_model *m, int max_model_len,
    const int32_t *prompt, int n_prompt, const llm_sampling_params *p,
    char *err);

/* The model's metadata without an engine: config, generation config,
 * tokenizer and chat template; the weights are only mapped, never read
 * (a client that templates and tokenizes for an engine elsewhere). */
llm_model *llm_model_load(const char *dir, char *err);
/* Less still, for a router in front of engines elsewhere: the tokenizer
 * and the chat template only, of a directory (no config.json, no weights
 * needed) or of a GGUF file (its metadata). */
llm_model *llm_model_load_tokenizer(const char *path, char *err);
void llm_model_free(llm_model *m);


/*
 * The prefix cache's keys (engine/kv_blocks.c), for a router that sends
 * requests with equal prefixes to the same engine: keys[i] is the key of
 * the prompt's block i (LLM_PREFIX_BLOCK_SIZE tokens), chained over every
 * token before it, exactly as the engine's cache keys it.  Only the blocks
 * the engine may take from its cache count: those before the prompt's
 * last token.  salt: the request's cache_salt, or NULL.  Returns the
 * number of keys written, at most max.
 */
#define LLM_PREFIX_BLOCK_SIZE 16

int llm_prefix_keys(const int32_t *prompt, int n_prompt, const char *salt,
    uint64_t *keys, int max);


/*
 * Engine-wide counters, gauges and histograms: everything Prometheus
 * /metrics shows (vLLM's names and buckets; the nginx side only formats).
 * Histograms observe every finished request, aborted ones included.
 */
#define LLM_HIST_MAX 24

typedef struct {
    int           n;                     /* finite upper bounds in le[] */
    double        le[LLM_HIST_MAX];
    uint64_t      count[LLM_HIST_MAX + 1];   /* per bucket; [n] = above all */
    double        sum;
    uint64_t      total;
} llm_histogram;

typedef enum {
    LLM_H_TTFT = 0,                      /* time_to_first_token_seconds */
    LLM_H_ITL,                           /* inter_token_latency_seconds */
    LLM_H_TPOT,                          /* request_time_per_output_token_seconds */
    LLM_H_E2E,                           /* e2e_request_latency_seconds */
    LLM_H_QUEUE,                         /* request_queue_time_seconds */
    LLM_H_PREFILL,                       /* request_prefill_time_seconds */
    LLM_H_DECODE,                        /* request_decode_time_seconds */
    LLM_H_INFERENCE,                     /* request_inference_time_seconds */
    LLM_H_PROMPT_TOKENS,                 /* request_prompt_tokens */
    LLM_H_GENERATION_TOKENS,             /* request_generation_tokens */
    LLM_H_PARAMS_N,                      /* request_params_n */
    LLM_H_PARAMS_MAX_TOKENS,             /* request_params_max_tokens */
    LLM_H_ITERATION_TOKENS,              /* iteration_tokens_total */
    LLM_H_PREFILL_KV_COMPUTED,           /* request_prefill_kv_computed_tokens */
    LLM_H_MAX_GENERATION_TOKENS,         /* request_max_num_generation_tokens */
    LLM_H_COUNT
} llm_hist_id;

typedef struct {
    int           num_running;
    int           num_waiting;
    int           num_waiting_deferred;  /* of those, paused: admission passes
                                          * them over whatever the capacity */
    double        kv_cache_usage;        /* 0..1, blocks held by running requests */
    uint64_t      prompt_tokens_total;
    uint64_t      prompt_tokens_cached_total;   /* of those, not computed:
                                          * each request's cached_tokens */
    uint64_t      generation_tokens_total;
    uint64_t      num_preemptions_total;
    uint64_t      prefix_cache_queries_total;
    uint64_t      prefix_cache_hits_total;
    uint64_t      request_success_total[LLM_FINISH_ERROR + 1];  /* by reason */
    uint64_t      spec_num_drafts_total;
    uint64_t      spec_num_draft_tokens_total;
    uint64_t      spec_num_accepted_tokens_total;
    uint64_t      spec_accepted_per_pos_total[LLM_SPEC_MAX_TOKENS];
    llm_histogram hist[LLM_H_COUNT];
    /* the KV cache as the engine runs it (vllm:cache_config_info) */
    int           block_size;            /* tokens per block */
    int           num_blocks;            /* vLLM's num_gpu_blocks, on any device */
    int           enable_prefix_caching;
    double        gpu_memory_utilization;   /* effective: 0.9 when unset */
} llm_engine_stats;

void llm_engine_stats_get(llm_engine *e, llm_engine_stats *out);

double llm_now(void);                    /* CLOCK_MONOTONIC seconds */


/*
 * The engine in a process of its own (engine/ipc): a server runs the
 * engine and serves clients over unix stream sockets; a client (an nginx
 * worker) submits, cancels and pauses requests and reads their outputs
 * as the same llm_output the engine drains.  Messages are length-prefixed
 * binary frames (engine/ipc/wire.h); both ends are the same build (the
 * server is forked from a client), which the hello's version checks.
 * Neither end blocks: sockets are non-blocking, what cannot be written
 * yet is buffered.
 */
#define LLM_WIRE_VERSION 3

typedef struct llm_server  llm_server;
typedef struct llm_client  llm_client;

/* The server, before its engine: cfg.notify = llm_server_notify and
 * cfg.notify_data = the server, then llm_server_attach() the engine. */
llm_server *llm_server_new(char *err);
void llm_server_notify(void *server);
/* listen_fd: a listening socket to accept clients on (their uid must be
 * the server's), or -1. */
void llm_server_attach(llm_server *s, llm_engine *e, int listen_fd);
/* A connected client socket (a socketpair's end, in tests). */
int llm_server_add_client(llm_server *s, int fd);
/* One turn: waits at most timeout_ms for the engine, a client or extra_fd
 * (-1: none; a pidfd, say), then does what arrived; with an inline_loop
 * engine, runs its step here (and waits not at all while it has work).
 * Returns 1 when extra_fd is readable, 0 otherwise. */
int llm_server_poll(llm_server *s, int timeout_ms, int extra_fd);
/* Called with the engine's stats after a drain that finished a request,
 * before its outputs are written (so that whoever reads the stats after
 * an output sees the output counted), and otherwise at most every
 * interval seconds while anything changed. */
void llm_server_on_stats(llm_server *s, double interval,
    void (*fn)(const llm_engine_stats *st, void *data), void *data);
/* Stops accepting clients (a retiring engine). */
void llm_server_close_listener(llm_server *s);
/* Retiring: stops accepting clients and tells each one to submit no more;
 * a client answers once it has read that, after whatever it submitted
 * before (the socket keeps the order), so nothing it sent is lost.
 * llm_server_retired(): every client has answered or gone and no request
 * is in flight -- the server may stop. */
void llm_server_retire(llm_server *s);
int llm_server_retired(const llm_server *s);
int llm_server_clients(const llm_server *s);
int llm_server_requests(const llm_server *s);   /* in flight */
/* Closes every client and frees the server (not the engine). */
void llm_server_free(llm_server *s);

/* A client of a server, on a connected socket it owns (made non-blocking). */
llm_client *llm_client_new(int fd);
void llm_client_free(llm_client *c);               /* closes the socket */
int llm_client_fd(const llm_client *c);
/* The server's hello arrived: it serves, with these values. */
int llm_client_ready(const llm_client *c);
int llm_client_max_model_len(const llm_client *c);
const char *llm_client_device(const llm_client *c);
const char *llm_client_device_reason(const llm_client *c);
/* Queues a request (validated by the caller: llm_request_validate());
 * leader: the handle of the first sample of the same prompt (n > 1), or
 * 0; arrival and queued: llm_request_set_arrival() and
 * llm_request_set_queued().  Returns its handle (never 0); its outputs
 * come with req_data. */
uint64_t llm_client_submit(llm_client *c, const int32_t *prompt,
    int n_prompt, const llm_sampling_params *p, double arrival,
    double queued, uint64_t leader, void *req_data);
/* The server retires (llm_server_retire()): submit nothing more to it;
 * what was submitted runs to its end, then the server closes. */
int llm_client_retiring(const llm_client *c);
/* Cancels h, billed n_billed tokens (what arrived); no output comes for
 * it after this call. */
void llm_client_cancel(llm_client *c, uint64_t h, int n_billed);
void llm_client_set_paused(llm_client *c, uint64_t h, int paused);
/* The final output of h arrived or the caller let go: h is forgotten. */
void llm_client_forget(llm_client *c, uint64_t h);
/* Writes what is queued: 0 all of it, 1 the socket is full (wait until
 * it is writable), -1 the connection failed. */
int llm_client_flush(llm_client *c);
typedef void (*llm_client_fn)(void *req_data, uint64_t h,
    const llm_output *out, void *data);
/* Reads what arrived and calls fn for each output of a request not
 * forgotten: 0, or -1 once the server is gone (EOF or an error; every
 * request in flight is lost).  It may queue an answer (to a retirement):
 * flush after it. */
int llm_client_read(llm_client *c, llm_client_fn fn, void *data);

#endif /* LLM_H */
