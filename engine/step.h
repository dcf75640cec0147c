/*
 * step.h -- one step of the engine thread (step.c): what the engine loop
 * in engine.c calls between taking submissions and publishing output.
 */
#ifndef LLM_STEP_H
#define LLM_STEP_H

#include "llm.h"

/* Schedules a step at time now, runs the backend on it and applies every
 * token it produced to its request (a failed forward pass finishes the
 * step's requests with LLM_FINISH_ERROR); returns 0 when it had nothing
 * to do: no requests, or all paused or waiting for the seats and blocks
 * of paused ones. */
int llm_engine_step(llm_engine *e, double now);

/* Ends a request (flushing held text unless a stop string ended it): out
 * of the scheduler, its finish counted, its last output staged. */
void llm_engine_finish(llm_engine *e, llm_request *r, llm_finish_reason why,
    double now);

#endif /* LLM_STEP_H */
