/*
 * request.h -- the engine's view of one request (llm_request in llm.h).
 *
 * Ownership: the client holds one reference from llm_request_create() until
 * llm_request_release(); the engine holds one from submit until the final
 * output has been drained.  Fields are grouped by who may touch them.
 */
#ifndef LLM_REQUEST_H
#define LLM_REQUEST_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "llm.h"
#include "sampler.h"
#include "tokenizer/tokenizer.h"

#define LLM_GATE_CLOSED  0x80000000u

typedef enum {
    LLM_REQ_NEW = 0,                    /* created, not yet seen by the engine */
    LLM_REQ_WAITING,                    /* in the scheduler's waiting queue */
    LLM_REQ_RUNNING,
    LLM_REQ_FINISHED
} llm_req_state;

/* Output not yet drained, or being drained. */
typedef struct {
    char               *text;
    size_t              text_len, text_cap;
    int32_t            *ids;
    double             *times;           /* each id's step */
    llm_token_logprob  *logprobs;
    int                 n_ids, ids_cap;
    int                 prompt_lp_ready; /* the prompt's records go with it */
} llm_req_out;

#define LLM_TOK_RING  64

/* The n samples of one prompt (parallel sampling), for
 * vllm:request_max_num_generation_tokens: vLLM observes the longest of
 * their generations once, when the last of them finishes.  Joined and
 * counted on the engine thread; freed by whichever member is freed last. */
typedef struct {
    atomic_int          refs;
    int                 unfinished;
    int                 max_generation;
} llm_seq_group;

struct llm_request {
    atomic_int          refs;
    atomic_int          cancelled;
    /* tokens accepted so far, and LLM_GATE_CLOSED once cancelled: a token
     * is only accepted (and counted anywhere) while the gate is open, so
     * the count a cancel returns is final */
    atomic_uint         gate;
    atomic_int          client_gone;
    atomic_int          bill_limit;     /* llm_engine_cancel_billed(): -1 none */
    double              queued_since;   /* llm_request_set_queued(), or 0 */
    atomic_int          pause;          /* llm_engine_set_paused() */
    void               *data;           /* the client's */
    int                 submitted;      /* client thread */
    llm_request        *share_from;     /* parallel sampling: the leader, with a reference */

    /* immutable after create */
    llm_sampling_params params;         /* arrays below are private copies */
    int32_t            *stop_ids;
    char              **stop;
    int32_t            *bias_ids;
    int32_t            *allowed_ids;
    int32_t            *bad_ids;        /* bad_words as token sequences */
    int32_t            *bad_lens;
    int                 n_bad;
    float              *bias_values;
    int                 n_prompt;
    int                 max_stop_len;   /* longest stop string, bytes */

    /* engine thread only */
    llm_req_state       state;
    int                 paused;         /* pause, as taken at the start of
                                         * this step: the scheduler skips
                                         * the request */
    int32_t            *tokens;         /* prompt + output */
    int                 n_tokens, cap_tokens;
    int                 n_computed;     /* tokens whose K/V is cached */
    /* prompt_logprobs >= 0: record i is prompt token i + 1, computed from
     * the logits at position i; the first n_prompt_lp are done.  Always
     * n_prompt_lp >= min(n_computed, n_prompt - 1): positions whose K/V
     * comes from elsewhere (prefix cache, a parallel-sampling leader) have
     * their records already.  Complete, the array is read-only: the client
     * reads it once published (prompt_lp_ready). */
    llm_token_logprob  *prompt_lp;
    int                 n_prompt_lp;
    int                 prompt_lp_sent;
    int32_t            *blocks;         /* block table */
    int                 n_blocks, cap_blocks;
    uint64_t           *keys;           /* prefix-cache keys of full blocks */
    uint64_t            cache_root;     /* the first block's parent key */
    llm_grammar        *grammar;        /* structured output, or NULL */
    llm_grammar_state  *gstate;         /* its state after the output */
    int                 n_keys;
    llm_rng             rng;
    llm_detok          *detok;
    char               *held;           /* text held back for stop strings */
    size_t              held_len, held_cap;
    llm_finish_reason   finish;
    int32_t             stop_token;
    const char         *stop_string;
    llm_request_stats   stats;
    llm_seq_group      *group;          /* its prompt's samples, or NULL */
    /* when each of the latest completion tokens came, by index % ring:
     * what a billed cancel takes back (llm_engine_unbill()) */
    double              tok_time[LLM_TOK_RING];
    llm_request        *next;           /* waiting queue link */
    int                 n_draft;        /* drafts scheduled this step */
    uint8_t            *spec_accepted;  /* per verify step */
    uint8_t            *spec_drafted;
    int                 n_spec_steps, cap_spec_steps;
    llm_req_out         stage;          /* this step's output, before publish */
    int                 changed;        /* on the engine's changed list */

    /* under the engine's output lock */
    llm_req_out         out;            /* appended by the engine */
    llm_req_out         deliver;        /* swapped out by drain */
    llm_finish_reason   out_finish;
    llm_request_stats   out_stats;
    int                 on_ready;
    llm_request        *ready_next;
};

/* Appends a generated token's id (and logprob record) to the output. */
void llm_req_out_add_id(llm_req_out *o, int32_t id, double t,
    const llm_token_logprob *lp);
void llm_req_out_add_text(llm_req_out *o, const char *s, size_t n);
void llm_req_out_clear(llm_req_out *o);
void llm_req_out_free(llm_req_out *o);

/* llm_request_create() without the engine: validates the prompt and the
 * parameters against the model and max_model_len (NULL and vLLM's message
 * in err when they are invalid) and copies them into a request holding one
 * reference, its generator seeded with seed. */
llm_request *llm_request_new(const llm_model *m, int max_model_len,
    const int32_t *prompt, int n_prompt, const llm_sampling_params *p,
    uint64_t seed, char *err);
void llm_request_append_token(llm_request *r, int32_t id);
/* Engine thread, as r is taken: a sample submitted with a leader joins
 * the leader's group (made then), unless the group already ended. */
void llm_request_join_group(llm_request *r);
/* Engine thread, r finished: what its group observes -- the longest
 * generation of its samples once the last finished, r's own without a
 * group -- or -1 while others of the group still run. */
int llm_request_group_finish(llm_request *r);
void llm_request_unref(llm_request *r);

/* A growing list of requests (the engine's queues, the scheduler's). */
typedef struct {
    llm_request  **items;
    int            n, cap;
} llm_req_list;

void llm_req_list_push(llm_req_list *l, llm_request *r);
void llm_req_list_remove(llm_req_list *l, llm_request *r);
void llm_req_list_free(llm_req_list *l);

#endif /* LLM_REQUEST_H */
