
/*
 * ngx_http_llm_prometheus.c -- llm_prometheus: vLLM's /metrics, the
 * Prometheus text exposition format (version 0.0.4), from one snapshot of
 * the engine's counters, gauges and histograms (llm_engine_stats_get()).
 *
 * The engine keeps the numbers; this file only formats them the way
 * vLLM's Python client does, so that existing dashboards and alerts work
 * unchanged: vLLM's names, HELP texts and types; counters with "_total";
 * labels engine and model_name (plus finished_reason, reason, source or
 * position; vllm:cache_config_info has the cache's settings), sorted by
 * name; values and bucket bounds printed as Python floats ("1.0",
 * "0.001", "+Inf", "1e+06" from 10^6 up, as prometheus_client's
 * floatToGoString); histograms as cumulative buckets, _sum and _count.
 *
 * The snapshot is a copy taken under the mutex the engine publishes each
 * step's output with, which it holds for microseconds: a scrape never
 * waits for a step.  See docs/prometheus.md.
 */


#include "ngx_http_llm_module.h"

#include <math.h>


#define NGX_HTTP_LLM_PROM_TYPE  "text/plain; version=0.0.4; charset=utf-8"


typedef struct {
    const char                 *name;
    const char                 *help;
    size_t                      offset;       /* its uint64_t in the stats */
} ngx_http_llm_prom_counter_t;


typedef struct {
    const char                 *name;
    const char                 *help;
    llm_hist_id                 id;
} ngx_http_llm_prom_hist_t;


typedef struct {
    const char                 *name;
    llm_finish_reason           id;           /* LLM_FINISH_NONE: never */
} ngx_http_llm_prom_reason_t;


typedef struct {
    ngx_http_llm_json_t         out;
    ngx_str_t                   labels;       /* engine="0",model_name="x" */
    ngx_str_t                   engine;       /* engine="0" */
    ngx_str_t                   model;        /* model_name="x" */
} ngx_http_llm_prom_t;


static ngx_int_t ngx_http_llm_prom_labels(ngx_http_request_t *r,
    ngx_http_llm_prom_t *pm);
static void ngx_http_llm_prom_render(ngx_http_llm_prom_t *pm,
    const llm_engine_stats *st, ngx_uint_t spec_tokens);
static void ngx_http_llm_prom_waiting(ngx_http_llm_prom_t *pm,
    const llm_engine_stats *st);
static void ngx_http_llm_prom_prompt_sources(ngx_http_llm_prom_t *pm,
    const llm_engine_stats *st);
static void ngx_http_llm_prom_spec(ngx_http_llm_prom_t *pm,
    const llm_engine_stats *st, ngx_uint_t spec_tokens);
static void ngx_http_llm_prom_cache_config(ngx_http_llm_prom_t *pm,
    const llm_engine_stats *st);
static void ngx_http_llm_prom_counters(ngx_http_llm_prom_t *pm,
    const ngx_http_llm_prom_counter_t *pc, const llm_engine_stats *st);
static void ngx_http_llm_prom_labelled(ngx_http_llm_prom_t *pm,
    const char *name, const char *label, const char *value, double v);
static void ngx_http_llm_prom_family(ngx_http_llm_prom_t *pm,
    const char *name, const char *help, const char *type);
static void ngx_http_llm_prom_sample(ngx_http_llm_prom_t *pm,
    const char *name, double value);
static void ngx_http_llm_prom_histogram(ngx_http_llm_prom_t *pm,
    const ngx_http_llm_prom_hist_t *ph, const llm_histogram *h);
static void ngx_http_llm_prom_float(ngx_http_llm_json_t *j, double v);


/* vLLM's order (vllm/v1/metrics/loggers.py) and HELP texts */

static ngx_http_llm_prom_counter_t  ngx_http_llm_prom_engine_counters[] = {
    { "vllm:prefix_cache_queries_total",
      "Prefix cache queries, in terms of number of queried tokens.",
      offsetof(llm_engine_stats, prefix_cache_queries_total) },
    { "vllm:prefix_cache_hits_total",
      "Prefix cache hits, in terms of number of cached tokens.",
      offsetof(llm_engine_stats, prefix_cache_hits_total) },
    { "vllm:num_preemptions_total",
      "Cumulative number of preemption from the engine.",
      offsetof(llm_engine_stats, num_preemptions_total) },
    { "vllm:prompt_tokens_total",
      "Number of prefill tokens processed.",
      offsetof(llm_engine_stats, prompt_tokens_total) },
    { NULL, NULL, 0 }
};


/* after the prompt tokens by source (ngx_http_llm_prom_prompt_sources) */

static ngx_http_llm_prom_counter_t  ngx_http_llm_prom_token_counters[] = {
    { "vllm:generation_tokens_total",
      "Number of generation tokens processed.",
      offsetof(llm_engine_stats, generation_tokens_total) },
    { NULL, NULL, 0 }
};


/* only with llm_speculative, as in vLLM */

static ngx_http_llm_prom_counter_t  ngx_http_llm_prom_spec_counters[] = {
    { "vllm:spec_decode_num_drafts_total",
      "Number of spec decoding drafts.",
      offsetof(llm_engine_stats, spec_num_drafts_total) },
    { "vllm:spec_decode_num_draft_tokens_total",
      "Number of draft tokens.",
      offsetof(llm_engine_stats, spec_num_draft_tokens_total) },
    { "vllm:spec_decode_num_accepted_tokens_total",
      "Number of accepted tokens.",
      offsetof(llm_engine_stats, spec_num_accepted_tokens_total) },
    { NULL, NULL, 0 }
};


static ngx_http_llm_prom_hist_t  ngx_http_llm_prom_hists[] = {
    { "vllm:request_prompt_tokens",
      "Number of prefill tokens processed.", LLM_H_PROMPT_TOKENS },
    { "vllm:request_generation_tokens",
      "Number of generation tokens processed.", LLM_H_GENERATION_TOKENS },
    { "vllm:iteration_tokens_total",
      "Histogram of number of tokens per engine_step.",
      LLM_H_ITERATION_TOKENS },
    { "vllm:request_max_num_generation_tokens",
      "Histogram of maximum number of requested generation tokens.",
      LLM_H_MAX_GENERATION_TOKENS },
    { "vllm:request_params_n",
      "Histogram of the n request parameter.", LLM_H_PARAMS_N },
    { "vllm:request_params_max_tokens",
      "Histogram of the max_tokens request parameter.",
      LLM_H_PARAMS_MAX_TOKENS },
    { "vllm:time_to_first_token_seconds",
      "Histogram of time to first token in seconds.", LLM_H_TTFT },
    { "vllm:inter_token_latency_seconds",
      "Histogram of inter-token latency in seconds.", LLM_H_ITL },
    { "vllm:request_time_per_output_token_seconds",
      "Histogram of time_per_output_token_seconds per request.",
      LLM_H_TPOT },
    { "vllm:e2e_request_latency_seconds",
      "Histogram of e2e request latency in seconds.", LLM_H_E2E },
    { "vllm:request_queue_time_seconds",
      "Histogram of time spent in WAITING phase for request.",
      LLM_H_QUEUE },
    { "vllm:request_inference_time_seconds",
      "Histogram of time spent in RUNNING phase for request.",
      LLM_H_INFERENCE },
    { "vllm:request_prefill_time_seconds",
      "Histogram of time spent in PREFILL phase for request.",
      LLM_H_PREFILL },
    { "vllm:request_decode_time_seconds",
      "Histogram of time spent in DECODE phase for request.",
      LLM_H_DECODE },
    { "vllm:request_prefill_kv_computed_tokens",
      "Histogram of new KV tokens computed during prefill "
      "(excluding cached tokens).", LLM_H_PREFILL_KV_COMPUTED },
    { NULL, NULL, 0 }
};


/* vLLM's FINISH_REASON_STRINGS; "repetition" is never reached here */

static ngx_http_llm_prom_reason_t  ngx_http_llm_prom_reasons[] = {
    { "stop", LLM_FINISH_STOP },
    { "length", LLM_FINISH_LENGTH },
    { "abort", LLM_FINISH_ABORT },
    { "error", LLM_FINISH_ERROR },
    { "repetition", LLM_FINISH_NONE },
    { NULL, 0 }
};


ngx_int_t
ngx_http_llm_prometheus_handler(ngx_http_request_t *r)
{
    ngx_int_t                  rc;
    ngx_str_t                  type;
    llm_engine_stats          *st;
    ngx_http_llm_prom_t        pm;
    ngx_http_llm_main_conf_t  *lmcf;

    rc = ngx_http_llm_get_ready(r);
    if (rc != NGX_DECLINED) {
        return rc;
    }

    lmcf = ngx_http_get_module_main_conf(r, ngx_http_llm_module);

    /* about 6 KB: from the pool, not the worker's stack */
    st = ngx_palloc(r->pool, sizeof(llm_engine_stats));
    if (st == NULL) {
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }

    /* the engine process's last snapshot, the same from every worker */
    if (ngx_http_llm_engine_stats(st) != NGX_OK) {
        ngx_memzero(st, sizeof(llm_engine_stats));
    }

    if (ngx_http_llm_prom_labels(r, &pm) != NGX_OK) {
        return NGX_HTTP_INTERNAL_SERVER_ERROR;
    }

    /* the whole text is 28 to 34 KB (the spec-decode counters, 1-2-5
     * buckets up to a long llm_max_model_len): one buffer, never grown */
    ngx_http_llm_json_init(&pm.out, r->pool, 40 * 1024);

    ngx_http_llm_prom_render(&pm, st, lmcf->spec_tokens);

    ngx_str_set(&type, NGX_HTTP_LLM_PROM_TYPE);

    return ngx_http_llm_send_body(r, NGX_HTTP_OK, &type, &pm.out);
}


/*
 * The labels every series carries.  "engine" names the engine: one per
 * nginx instance, shared by every worker, so it is "0" (vLLM numbers its
 * data-parallel engines the same way).
 */

static ngx_int_t
ngx_http_llm_prom_labels(ngx_http_request_t *r, ngx_http_llm_prom_t *pm)
{
    u_char                    *p, *start;
    ngx_uint_t                 i;
    ngx_str_t                 *name;
    ngx_http_llm_main_conf_t  *lmcf;

    lmcf = ngx_http_get_module_main_conf(r, ngx_http_llm_module);
    name = &lmcf->served_model_name;

    /* engine="N",model_name="..." with \, " and newline escaped */
    start = ngx_pnalloc(r->pool, sizeof("engine=\"\",model_name=\"\"")
                                 + NGX_INT_T_LEN + 2 * name->len);
    if (start == NULL) {
        return NGX_ERROR;
    }

    p = ngx_sprintf(start, "engine=\"0\"");
    pm->engine.data = start;
    pm->engine.len = p - start;

    *p++ = ',';
    pm->model.data = p;

    p = ngx_cpymem(p, "model_name=\"", sizeof("model_name=\"") - 1);

    for (i = 0; i < name->len; i++) {
        switch (name->data[i]) {

        case '\\':
        case '"':
            *p++ = '\\';
            *p++ = name->data[i];
            break;

        case '\n':
            *p++ = '\\';
            *p++ = 'n';
            break;

        default:
            *p++ = name->data[i];
        }
    }

    *p++ = '"';

    pm->model.len = p - pm->model.data;
    pm->labels.data = start;
    pm->labels.len = p - start;

    return NGX_OK;
}


static void
ngx_http_llm_prom_render(ngx_http_llm_prom_t *pm, const llm_engine_stats *st,
    ngx_uint_t spec_tokens)
{
    ngx_http_llm_json_t         *j;
    ngx_http_llm_prom_hist_t    *ph;
    ngx_http_llm_prom_reason_t  *pr;

    j = &pm->out;

    /* gauges */

    ngx_http_llm_prom_family(pm, "vllm:num_requests_running",
        "Number of requests in model execution batches.", "gauge");
    ngx_http_llm_prom_sample(pm, "vllm:num_requests_running",
                             st->num_running);

    ngx_http_llm_prom_family(pm, "vllm:num_requests_waiting",
        "Number of requests waiting to be processed.", "gauge");
    ngx_http_llm_prom_sample(pm, "vllm:num_requests_waiting",
                             st->num_waiting);

    ngx_http_llm_prom_waiting(pm, st);

    ngx_http_llm_prom_family(pm, "vllm:kv_cache_usage_perc",
        "KV-cache usage. 1 means 100 percent usage.", "gauge");
    ngx_http_llm_prom_sample(pm, "vllm:kv_cache_usage_perc",
                             st->kv_cache_usage);

    /* counters */

    ngx_http_llm_prom_counters(pm, ngx_http_llm_prom_engine_counters, st);
    ngx_http_llm_prom_prompt_sources(pm, st);
    ngx_http_llm_prom_counters(pm, ngx_http_llm_prom_token_counters, st);

    /* one series per reason, zeros included, as vLLM pre-creates them */

    ngx_http_llm_prom_family(pm, "vllm:request_success_total",
        "Count of successfully processed requests.", "counter");

    for (pr = ngx_http_llm_prom_reasons; pr->name; pr++) {
        ngx_http_llm_json_lit(j, "vllm:request_success_total{");
        ngx_http_llm_json_raw(j, pm->engine.data, pm->engine.len);
        ngx_http_llm_json_lit(j, ",finished_reason=\"");
        ngx_http_llm_json_raw(j, pr->name, ngx_strlen(pr->name));
        ngx_http_llm_json_lit(j, "\",");
        ngx_http_llm_json_raw(j, pm->model.data, pm->model.len);
        ngx_http_llm_json_lit(j, "} ");
        ngx_http_llm_prom_float(j, pr->id == LLM_FINISH_NONE
                                   ? 0.0
                                   : st->request_success_total[pr->id]);
        ngx_http_llm_json_lit(j, "\n");
    }

    /* histograms */

    for (ph = ngx_http_llm_prom_hists; ph->name; ph++) {
        ngx_http_llm_prom_histogram(pm, ph, &st->hist[ph->id]);
    }

    ngx_http_llm_prom_spec(pm, st, spec_tokens);

    /* last, as vLLM registers it once the engine is up */
    ngx_http_llm_prom_cache_config(pm, st);
}


/*
 * vLLM's two reasons, both always present, summing to
 * vllm:num_requests_waiting: "deferred" is what vLLM's scheduler sets
 * aside whatever its capacity (blocked on a KV transfer, a grammar, the
 * LoRA budget); here the paused requests, which admission passes over
 * until their client drains.  Every other waiting request waits for
 * capacity: a seat (llm_max_num_seqs), the step's token budget, KV
 * blocks, or the request ahead of it.  One snapshot: the sum is exact.
 */

static void
ngx_http_llm_prom_waiting(ngx_http_llm_prom_t *pm, const llm_engine_stats *st)
{
    static const char  name[] = "vllm:num_requests_waiting_by_reason";

    ngx_http_llm_prom_family(pm, name,
        "Number of waiting requests by reason. "
        "Reason labels: 'capacity' = waiting for scheduling capacity; "
        "'deferred' = deferred by transient constraints "
        "(LoRA budget, KV transfer, blocked status). "
        "Sum of all reasons equals vllm:num_requests_waiting.", "gauge");

    ngx_http_llm_prom_labelled(pm, name, "reason", "capacity",
                               st->num_waiting - st->num_waiting_deferred);
    ngx_http_llm_prom_labelled(pm, name, "reason", "deferred",
                               st->num_waiting_deferred);
}


/*
 * vLLM's three sources, pre-created: local_compute + local_cache_hit is
 * vllm:prompt_tokens_total (each request's prompt, counted at its first
 * token, split by its cached_tokens); no KV connector here, so
 * external_kv_transfer stays 0.  vllm:prompt_tokens_cached is "local +
 * external" hits: local_cache_hit.  (vLLM's newest scheduler also moves
 * one token from local_compute to local_cache_hit when all but the last
 * prompt token were cached, a token it says it recomputed; here the last
 * token is always computed and never counted as cached.)
 */

static void
ngx_http_llm_prom_prompt_sources(ngx_http_llm_prom_t *pm,
    const llm_engine_stats *st)
{
    double             cached, computed;
    static const char  name[] = "vllm:prompt_tokens_by_source_total";

    cached = (double) st->prompt_tokens_cached_total;
    computed = (double) (st->prompt_tokens_total
                         - st->prompt_tokens_cached_total);

    ngx_http_llm_prom_family(pm, name, "Number of prompt tokens by source.",
                             "counter");
    ngx_http_llm_prom_labelled(pm, name, "source", "local_compute", computed);
    ngx_http_llm_prom_labelled(pm, name, "source", "local_cache_hit", cached);
    ngx_http_llm_prom_labelled(pm, name, "source", "external_kv_transfer", 0);

    ngx_http_llm_prom_family(pm, "vllm:prompt_tokens_cached_total",
        "Number of cached prompt tokens (local + external).", "counter");
    ngx_http_llm_prom_sample(pm, "vllm:prompt_tokens_cached_total", cached);
}


/* speculative decoding: only with llm_speculative, as in vLLM */

static void
ngx_http_llm_prom_spec(ngx_http_llm_prom_t *pm, const llm_engine_stats *st,
    ngx_uint_t spec_tokens)
{
    u_char             pos[NGX_INT_T_LEN + 1];
    ngx_uint_t         i;
    static const char  name[] =
                           "vllm:spec_decode_num_accepted_tokens_per_pos_total";

    if (spec_tokens == 0) {
        return;
    }

    ngx_http_llm_prom_counters(pm, ngx_http_llm_prom_spec_counters, st);

    ngx_http_llm_prom_family(pm, name, "Accepted tokens per draft position.",
                             "counter");

    for (i = 0; i < spec_tokens && i < LLM_SPEC_MAX_TOKENS; i++) {
        *ngx_sprintf(pos, "%ui", i) = '\0';
        ngx_http_llm_prom_labelled(pm, name, "position", (char *) pos,
                                   (double) st->spec_accepted_per_pos_total[i]);
    }
}


/*
 * vLLM's info gauge (always 1) with its CacheConfig as labels, values as
 * Python's str() writes them.  The Gateway API Inference Extension reads
 * block_size and num_gpu_blocks: the engine's, whatever the device.  Of
 * vLLM's other fields, those that describe this engine; cache_dtype is
 * vLLM's default, "auto" (the model's type on the GPU; f32 on the CPU).
 * vLLM labels it without model_name; here it has model_name as every
 * other series.
 */

static void
ngx_http_llm_prom_cache_config(ngx_http_llm_prom_t *pm,
    const llm_engine_stats *st)
{
    char                  util[NGX_HTTP_LLM_FLOAT_LEN];
    ngx_http_llm_json_t  *j = &pm->out;

    ngx_http_llm_prom_family(pm, "vllm:cache_config_info",
        "Information of the LLMEngine CacheConfig", "gauge");

    ngx_http_llm_json_lit(j, "vllm:cache_config_info{block_size=\"");
    ngx_http_llm_json_int(j, st->block_size);
    ngx_http_llm_json_lit(j, "\",cache_dtype=\"auto\","
                             "enable_prefix_caching=\"");

    if (st->enable_prefix_caching) {
        ngx_http_llm_json_lit(j, "True");

    } else {
        ngx_http_llm_json_lit(j, "False");
    }

    ngx_http_llm_json_lit(j, "\",");
    ngx_http_llm_json_raw(j, pm->engine.data, pm->engine.len);
    ngx_http_llm_json_lit(j, ",gpu_memory_utilization=\"");
    llm_pyfloat(util, st->gpu_memory_utilization);
    ngx_http_llm_json_raw(j, util, ngx_strlen(util));
    ngx_http_llm_json_lit(j, "\",");
    ngx_http_llm_json_raw(j, pm->model.data, pm->model.len);
    ngx_http_llm_json_lit(j, ",num_gpu_blocks=\"");
    ngx_http_llm_json_int(j, st->num_blocks);
    ngx_http_llm_json_lit(j, "\"} 1.0\n");
}


static void
ngx_http_llm_prom_counters(ngx_http_llm_prom_t *pm,
    const ngx_http_llm_prom_counter_t *pc, const llm_engine_stats *st)
{
    for ( /* void */ ; pc->name; pc++) {
        ngx_http_llm_prom_family(pm, pc->name, pc->help, "counter");
        ngx_http_llm_prom_sample(pm, pc->name,
                                 (double) *(uint64_t *) ((u_char *) st
                                                         + pc->offset));
    }
}


/* HELP texts are constants without "\" or newlines: nothing to escape */

static void
ngx_http_llm_prom_family(ngx_http_llm_prom_t *pm, const char *name,
    const char *help, const char *type)
{
    ngx_http_llm_json_t  *j = &pm->out;

    ngx_http_llm_json_lit(j, "# HELP ");
    ngx_http_llm_json_raw(j, name, ngx_strlen(name));
    ngx_http_llm_json_lit(j, " ");
    ngx_http_llm_json_raw(j, help, ngx_strlen(help));
    ngx_http_llm_json_lit(j, "\n# TYPE ");
    ngx_http_llm_json_raw(j, name, ngx_strlen(name));
    ngx_http_llm_json_lit(j, " ");
    ngx_http_llm_json_raw(j, type, ngx_strlen(type));
    ngx_http_llm_json_lit(j, "\n");
}


static void
ngx_http_llm_prom_sample(ngx_http_llm_prom_t *pm, const char *name,
    double value)
{
    ngx_http_llm_json_t  *j = &pm->out;

    ngx_http_llm_json_raw(j, name, ngx_strlen(name));
    ngx_http_llm_json_lit(j, "{");
    ngx_http_llm_json_raw(j, pm->labels.data, pm->labels.len);
    ngx_http_llm_json_lit(j, "} ");
    ngx_http_llm_prom_float(j, value);
    ngx_http_llm_json_lit(j, "\n");
}


/* a series with one label more, which sorts after model_name */

static void
ngx_http_llm_prom_labelled(ngx_http_llm_prom_t *pm, const char *name,
    const char *label, const char *value, double v)
{
    ngx_http_llm_json_t  *j = &pm->out;

    ngx_http_llm_json_raw(j, name, ngx_strlen(name));
    ngx_http_llm_json_lit(j, "{");
    ngx_http_llm_json_raw(j, pm->labels.data, pm->labels.len);
    ngx_http_llm_json_lit(j, ",");
    ngx_http_llm_json_raw(j, label, ngx_strlen(label));
    ngx_http_llm_json_lit(j, "=\"");
    ngx_http_llm_json_raw(j, value, ngx_strlen(value));
    ngx_http_llm_json_lit(j, "\"} ");
    ngx_http_llm_prom_float(j, v);
    ngx_http_llm_json_lit(j, "\n");
}


/*
 * The engine counts per bucket; Prometheus wants cumulative counts, the
 * "+Inf" bucket equal to _count.
 */

static void
ngx_http_llm_prom_histogram(ngx_http_llm_prom_t *pm,
    const ngx_http_llm_prom_hist_t *ph, const llm_histogram *h)
{
    int                   i;
    size_t                len;
    uint64_t              cum;
    ngx_http_llm_json_t  *j;

    j = &pm->out;
    len = ngx_strlen(ph->name);

    ngx_http_llm_prom_family(pm, ph->name, ph->help, "histogram");

    cum = 0;

    for (i = 0; i <= h->n; i++) {
        cum += h->count[i];

        ngx_http_llm_json_raw(j, ph->name, len);
        ngx_http_llm_json_lit(j, "_bucket{");
        ngx_http_llm_json_raw(j, pm->engine.data, pm->engine.len);
        ngx_http_llm_json_lit(j, ",le=\"");

        if (i < h->n) {
            ngx_http_llm_prom_float(j, h->le[i]);

        } else {
            ngx_http_llm_json_lit(j, "+Inf");
        }

        ngx_http_llm_json_lit(j, "\",");
        ngx_http_llm_json_raw(j, pm->model.data, pm->model.len);
        ngx_http_llm_json_lit(j, "} ");
        ngx_http_llm_prom_float(j, (double) cum);
        ngx_http_llm_json_lit(j, "\n");
    }

    ngx_http_llm_json_raw(j, ph->name, len);
    ngx_http_llm_json_lit(j, "_count{");
    ngx_http_llm_json_raw(j, pm->labels.data, pm->labels.len);
    ngx_http_llm_json_lit(j, "} ");
    ngx_http_llm_prom_float(j, (double) h->total);
    ngx_http_llm_json_lit(j, "\n");

    ngx_http_llm_json_raw(j, ph->name, len);
    ngx_http_llm_json_lit(j, "_sum{");
    ngx_http_llm_json_raw(j, pm->labels.data, pm->labels.len);
    ngx_http_llm_json_lit(j, "} ");
    ngx_http_llm_prom_float(j, h->sum);
    ngx_http_llm_json_lit(j, "\n");
}


/*
 * prometheus_client's floatToGoString(): Python's repr(), except "+Inf",
 * "-Inf", "NaN", and an exponent for positive values from 10^6 up (Go
 * switches sooner than Python): repr "1234567.0" is written "1.234567e+06".
 * The exponent is "e+0" and the digits, as the Python code has it.
 */

static void
ngx_http_llm_prom_float(ngx_http_llm_json_t *j, double v)
{
    u_char  buf[NGX_HTTP_LLM_FLOAT_LEN], out[NGX_HTTP_LLM_FLOAT_LEN + 8];
    u_char *dot, *p, *last;
    size_t  len;

    if (isnan(v)) {
        ngx_http_llm_json_lit(j, "NaN");
        return;
    }

    if (isinf(v)) {
        if (v > 0) {
            ngx_http_llm_json_lit(j, "+Inf");

        } else {
            ngx_http_llm_json_lit(j, "-Inf");
        }

        return;
    }

    len = ngx_strlen(llm_pyfloat((char *) buf, v));

    dot = ngx_strlchr(buf, buf + len, '.');

    if (v <= 0 || dot == NULL || dot - buf <= 6) {
        ngx_http_llm_json_raw(j, buf, len);
        return;
    }

    /* the mantissa: the first digit, ".", the rest; no trailing "0", "." */

    p = out;
    *p++ = buf[0];
    *p++ = '.';
    p = ngx_cpymem(p, buf + 1, dot - buf - 1);
    p = ngx_cpymem(p, dot + 1, buf + len - dot - 1);

    last = p;

    while (last > out && (last[-1] == '0' || last[-1] == '.')) {
        last--;
    }

    last = ngx_sprintf(last, "e+0%d", (int) (dot - buf - 1));

    ngx_http_llm_json_raw(j, out, last - out);
}
