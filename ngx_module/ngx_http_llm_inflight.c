
/*
 * Billing that survives a worker's death.
 *
 * Every API request that reaches the engine has a slot in a shared memory
 * zone: its id, the worker's pid, its prompt tokens and the completion
 * tokens drained so far.  The slot goes when the request is finalized (its
 * access-log line is the billing record then).  A worker that dies (a
 * crash, kill -9) leaves its slots behind; every worker looks for such
 * slots when it starts and then once a second, and reports each one as a
 * "warn" line in the error log, finish "abort", so that no request goes
 * unbilled:
 *
 *   llm: request "chatcmpl-..." was lost with worker 1234: model "m",
 *   prompt_tokens 12, completion_tokens 7, finish_reason abort, 1.250 s
 */


#include "ngx_http_llm_module.h"
#include "ngx_http_llm_inflight.h"


#define NGX_HTTP_LLM_INFLIGHT_SLOTS     4096
#define NGX_HTTP_LLM_INFLIGHT_ID_LEN    64
#define NGX_HTTP_LLM_INFLIGHT_MODEL_LEN 64
#define NGX_HTTP_LLM_INFLIGHT_SCAN      1000    /* ms */


typedef struct {
    ngx_pid_t                   pid;           /* 0: free */
    ngx_uint_t                  prompt_tokens;
    ngx_uint_t                  completion_tokens;
    ngx_msec_t                  start;         /* ngx_current_msec */
    u_char                      id[NGX_HTTP_LLM_INFLIGHT_ID_LEN];
    u_char                      model[NGX_HTTP_LLM_INFLIGHT_MODEL_LEN];
} ngx_http_llm_inflight_slot_t;


typedef struct {
    ngx_uint_t                  full;          /* requests not tracked */
    ngx_http_llm_inflight_slot_t  slots[NGX_HTTP_LLM_INFLIGHT_SLOTS];
} ngx_http_llm_inflight_sh_t;


static void ngx_http_llm_inflight_scan(ngx_event_t *ev);


static ngx_shm_zone_t              *ngx_http_llm_inflight_zone;
static ngx_http_llm_inflight_sh_t  *ngx_http_llm_inflight_sh;
static ngx_shmtx_t                 *ngx_http_llm_inflight_mutex;
static ngx_event_t                  ngx_http_llm_inflight_timer;


ngx_int_t
ngx_http_llm_inflight_add_zone(ngx_conf_t *cf)
{
    ngx_str_t  name = ngx_string("llm_inflight");

    /* a reload keeps the slots of the running workers */
    ngx_http_llm_inflight_zone = ngx_http_llm_struct_zone_add(cf, &name,
                                       sizeof(ngx_http_llm_inflight_sh_t));

    return ngx_http_llm_inflight_zone ? NGX_OK : NGX_ERROR;
}


void
ngx_http_llm_inflight_init_process(ngx_cycle_t *cycle)
{
    ngx_slab_pool_t  *shpool;

    if (ngx_http_llm_inflight_zone == NULL
        || ngx_http_llm_inflight_zone->data == NULL)
    {
        return;
    }

    shpool = (ngx_slab_pool_t *) ngx_http_llm_inflight_zone->shm.addr;

    ngx_http_llm_inflight_mutex = &shpool->mutex;
    ngx_http_llm_inflight_sh = ngx_http_llm_inflight_zone->data;

    ngx_http_llm_inflight_timer.handler = ngx_http_llm_inflight_scan;
    ngx_http_llm_inflight_timer.log = cycle->log;
    ngx_http_llm_inflight_timer.cancelable = 1;

    ngx_http_llm_inflight_scan(&ngx_http_llm_inflight_timer);
}


ngx_int_t
ngx_http_llm_inflight_add(ngx_str_t *id, ngx_str_t *model,
    ngx_uint_t prompt_tokens)
{
    ngx_uint_t                     i;
    ngx_http_llm_inflight_sh_t    *sh;
    ngx_http_llm_inflight_slot_t  *s;

    sh = ngx_http_llm_inflight_sh;

    if (sh == NULL) {
        return NGX_ERROR;
    }

    ngx_shmtx_lock(ngx_http_llm_inflight_mutex);

    for (i = 0; i < NGX_HTTP_LLM_INFLIGHT_SLOTS; i++) {
        if (sh->slots[i].pid == 0) {
            break;
        }
    }

    if (i == NGX_HTTP_LLM_INFLIGHT_SLOTS) {
        sh->full++;
        ngx_shmtx_unlock(ngx_http_llm_inflight_mutex);
        return NGX_ERROR;
    }

    s = &sh->slots[i];
    s->pid = ngx_pid;
    s->prompt_tokens = prompt_tokens;
    s->completion_tokens = 0;
    s->start = ngx_current_msec;
    ngx_cpystrn(s->id, id->data,
                ngx_min(id->len + 1, NGX_HTTP_LLM_INFLIGHT_ID_LEN));
    ngx_cpystrn(s->model, model->data,
                ngx_min(model->len + 1, NGX_HTTP_LLM_INFLIGHT_MODEL_LEN));

    ngx_shmtx_unlock(ngx_http_llm_inflight_mutex);

    return (ngx_int_t) i;
}


void
ngx_http_llm_inflight_update(ngx_int_t slot, ngx_uint_t completion_tokens)
{
    /* the owner's own slot: one word, read by others only after its death */

    if (slot >= 0 && ngx_http_llm_inflight_sh) {
        ngx_http_llm_inflight_sh->slots[slot].completion_tokens =
                                                          completion_tokens;
    }
}


void
ngx_http_llm_inflight_remove(ngx_int_t slot)
{
    if (slot < 0 || ngx_http_llm_inflight_sh == NULL) {
        return;
    }

    ngx_shmtx_lock(ngx_http_llm_inflight_mutex);
    ngx_http_llm_inflight_sh->slots[slot].pid = 0;
    ngx_shmtx_unlock(ngx_http_llm_inflight_mutex);
}


/* reports and frees the slots of workers that no longer exist */

static void
ngx_http_llm_inflight_scan(ngx_event_t *ev)
{
    ngx_uint_t                     i, n;
    ngx_http_llm_inflight_sh_t    *sh;
    ngx_http_llm_inflight_slot_t   lost, *s;

    sh = ngx_http_llm_inflight_sh;

    for (i = 0; i < NGX_HTTP_LLM_INFLIGHT_SLOTS; i++) {
        s = &sh->slots[i];

        if (s->pid == 0 || s->pid == ngx_pid
            || kill(s->pid, 0) == 0 || ngx_errno != NGX_ESRCH)
        {
            continue;
        }

        ngx_shmtx_lock(ngx_http_llm_inflight_mutex);

        /* another worker may have taken it first */
        n = s->pid != 0 && s->pid != ngx_pid && kill(s->pid, 0) == -1
            && ngx_errno == NGX_ESRCH;

        if (n) {
            lost = *s;
            s->pid = 0;
        }

        ngx_shmtx_unlock(ngx_http_llm_inflight_mutex);

        if (!n) {
            continue;
        }

        ngx_log_error(NGX_LOG_WARN, ev->log, 0,
                      "llm: request \"%s\" was lost with worker %P: "
                      "model \"%s\", prompt_tokens %ui, "
                      "completion_tokens %ui, finish_reason abort, %.3f s",
                      lost.id, lost.pid, lost.model, lost.prompt_tokens,
                      lost.completion_tokens,
                      (double) (ngx_current_msec - lost.start) / 1000);
    }

    if (!ngx_exiting && !ngx_quit && !ngx_terminate) {
        ngx_add_timer(ev, NGX_HTTP_LLM_INFLIGHT_SCAN);
    }
}


void
ngx_http_llm_inflight_exit_process(void)
{
    if (ngx_http_llm_inflight_timer.timer_set) {
        ngx_del_timer(&ngx_http_llm_inflight_timer);
    }
}
