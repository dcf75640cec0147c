/*
 * engine_internal.h -- the engine object shared by engine.c (thread, queues,
 * drain), scheduler.c (what runs each step) and engine_output.c (what a new
 * token does to a request: text, stop rules, timestamps).
 */
#ifndef LLM_ENGINE_INTERNAL_H
#define LLM_ENGINE_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>

#include "backend/backend.h"
#include "backend/batch.h"
#include "kv_blocks.h"
#include "llm.h"
#include "model/model.h"
#include "request.h"
#include "sampler.h"
#include "sampler_rows.h"

typedef struct {
    llm_request  **items;
    int            n, cap;
} llm_req_list;

void llm_req_list_push(llm_req_list *l, llm_request *r);
void llm_req_list_remove(llm_req_list *l, llm_request *r);
void llm_req_list_free(llm_req_list *l);

/* Scheduler state: engine thread only. */
typedef struct {
    llm_request   *wait_head, *wait_tail;   /* FIFO; preempted go to the front */
    int            n_waiting;
    llm_req_list   running;                 /* in admission order */
    llm_req_list   step;                    /* scheduled this step, batch order */
    int           *step_tokens;             /* new tokens of each, this step */
    int           *step_lp_rows;            /* its prompt-logprob rows */
    int            step_cap;
} llm_scheduler;

struct llm_engine {
    llm_model          *model;
    llm_backend        *backend;
    char                device_reason[LLM_ERR_LEN];
    llm_block_pool      blocks;
    int                 max_model_len;
    int                 max_num_seqs;
    int                 max_num_batched_tokens;
    int                 max_prompt_lp_rows;   /* prompt-logprob rows per step */
    int                 spec_k, spec_min, spec_max;   /* n-gram speculation */
    void              (*notify)(void *data);
    void               *notify_data;

    /* engine thread */
    llm_scheduler       sched;
    llm_sampler         sampler;
    llm_batch_buf       bb;
    float              *logits;
    int                 logits_cap;
    llm_sample_rows     srows;              /* sampling on the device */
    llm_token_texts     texts;              /* structured output's alphabet,
                                             * built at the first use */
    uint8_t            *json_plain;         /* llm_json_plain() of each */
    int32_t            *ids;                /* its ids, one per logits row */
    llm_token_logprob  *lps;                /* and logprobs, where asked */
    int                 ids_cap;
    llm_req_list        changed;            /* have output to publish */
    llm_engine_stats    counters;           /* copied to stats on publish */
    int                 step_rejected;      /* draft tokens rejected this step */

    /* submissions and wakeups, under mu */
    pthread_t           thread;
    int                 thread_started;
    pthread_mutex_t     mu;
    pthread_cond_t      cv;
    llm_req_list        submitted;
    int                 wakeup;
    int                 stop;

    /* output to the client, under out_mu */
    pthread_mutex_t     out_mu;
    llm_req_list        ready;
    llm_engine_stats    stats;

    /* client thread */
    llm_output         *draining;
    llm_request       **draining_req;
    int                 draining_cap;

    atomic_ullong       entropy;
};

/* A 64-bit seed for requests without one. */
uint64_t llm_engine_entropy(llm_engine *e);

/* scheduler.c */
void llm_sched_init(llm_scheduler *s);
void llm_sched_free(llm_scheduler *s);
void llm_sched_enqueue(llm_engine *e, llm_request *r);
/* Builds this step's batch in e->bb; returns the number of sequences. */
int llm_sched_schedule(llm_engine *e, double now);
/* Publishes the request's newly computed full blocks to the prefix cache. */
void llm_sched_register_blocks(llm_engine *e, llm_request *r);
/* Takes a finished request out of the queues and frees its blocks. */
void llm_sched_remove(llm_engine *e, llm_request *r);

/* spec_decode.c */
/* Up to kmax draft tokens into draft[]; returns how many. */
int llm_spec_propose(const int32_t *toks, int L, int kmax, int nmin,
    int nmax, int32_t *draft);
/* Proposes drafts for a decoding request into its token buffer past
 * n_tokens; returns k (0: none). */
int llm_spec_schedule_drafts(llm_engine *e, llm_request *r, int budget);
/* Accounts one verify step. */
void llm_spec_record(llm_engine *e, llm_request *r, int drafted,
    int accepted);

/* engine_output.c */
/* Applies a sampled token: text, stop rules, stats. */
void llm_engine_accept_token(llm_engine *e, llm_request *r, int32_t id,
    const llm_token_logprob *lp, double now);
/* Ends a request (flushing held text unless a stop string ended it). */
void llm_engine_finish(llm_engine *e, llm_request *r, llm_finish_reason why,
    double now);
/* Hands staged output of every changed request to the client. */
void llm_engine_publish(llm_engine *e);

#endif /* LLM_ENGINE_INTERNAL_H */
