
/*
 * The requests in flight, in shared memory, so that a worker's death does
 * not take their billing with it (ngx_http_llm_inflight.c).
 */


#ifndef _NGX_HTTP_LLM_INFLIGHT_H_INCLUDED_
#define _NGX_HTTP_LLM_INFLIGHT_H_INCLUDED_


#include <ngx_config.h>
#include <ngx_core.h>


/* at configuration: the zone */
ngx_int_t ngx_http_llm_inflight_add_zone(ngx_conf_t *cf);

/* in a worker: reports what dead workers left, then once a second */
void ngx_http_llm_inflight_init_process(ngx_cycle_t *cycle);
void ngx_http_llm_inflight_exit_process(void);

/* a request: its slot (-1 when untracked), its progress, its end */
ngx_int_t ngx_http_llm_inflight_add(ngx_str_t *id, ngx_str_t *model,
    ngx_uint_t prompt_tokens);
void ngx_http_llm_inflight_update(ngx_int_t slot,
    ngx_uint_t completion_tokens);
void ngx_http_llm_inflight_remove(ngx_int_t slot);


#endif /* _NGX_HTTP_LLM_INFLIGHT_H_INCLUDED_ */
