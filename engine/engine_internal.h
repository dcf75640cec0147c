/*
 * engine_internal.h -- the engine behind llm.h's llm_engine, shared by
 * engine.c (the engine thread, the queues between it and the client,
 * submit, cancel, drain) and step.c (one step: schedule, forward pass,
 * sampling, and what each token does to its request).  Fields are grouped
 * by the thread that owns them.
 */
#ifndef LLM_ENGINE_INTERNAL_H
#define LLM_ENGINE_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#include "backend/backend.h"
#include "backend/batch.h"
#include "kv_blocks.h"
#include "llm.h"
#include "model/model.h"
#include "request.h"
#include "sampler.h"
#include "sampler_rows.h"
#include "scheduler.h"
#include "tokenizer/tokenizer.h"

struct llm_engine {
    llm_model          *model;
    llm_backend        *backend;
    char                device_reason[LLM_ERR_LEN];
    int                 max_model_len;
    void              (*notify)(void *data);
    void               *notify_data;

    /* engine thread */
    llm_block_pool      blocks;
    llm_scheduler       sched;
    llm_req_list        changed;            /* have output to publish */
    llm_engine_stats    counters;           /* copied to stats on publish */
    int                 idle;               /* the last step computed
                                             * nothing: sleep until woken */
    llm_req_list        taken;              /* submissions being taken */

    /* engine thread: the step's working memory (step.c) */
    llm_sampler         sampler;
    llm_batch_buf       bb;
    float              *logits;
    int                 logits_cap;
    llm_sample_rows     srows;              /* sampling on the device */
    llm_token_texts     texts;              /* structured output's alphabet,
                                             * built at the first use */
    llm_gvocab         *gvocab;             /* its tries (grammar_mask.h) */
    int32_t            *ids;                /* its ids, one per logits row */
    llm_token_logprob  *lps;                /* and logprobs, where asked */
    int                 ids_cap;
    int                 step_rejected;      /* draft tokens rejected this step */

    /* submissions and wakeups, under mu */
    pthread_t           thread;
    int                 thread_started;
    int                 inline_loop;        /* no thread: llm_engine_run() */
    pthread_mutex_t     mu;
    pthread_cond_t      cv;
    llm_req_list        submitted;
    int                 wakeup;             /* a cancel or a resume */
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

#endif /* LLM_ENGINE_INTERNAL_H */
