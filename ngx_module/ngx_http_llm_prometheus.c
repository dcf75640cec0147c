
/*
 * ngx_http_llm_prometheus.c -- llm_prometheus: vLLM's /metrics, the
 * Prometheus text exposition format (version 0.0.4), from one snapshot of
 * the engine's counters, gauges and histograms (llm_engine_stats_get()).
 *
 * The engine keeps the numbers; this file only formats them the way
 * vLLM's Python client does, so that existing dashboards and alerts work
 * unchanged: vLLM's names, HELP texts and types; counters with "_total";
 * labels engine and model_name (plus finished_reason or position), sorted
 * by name; values and bucket bounds printed as Python floats ("1.0",
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
static void ngx_http_llm_prom_counters(ngx_http_llm_prom_t *pm,
    const ngx_http_llm_prom_counter_t *pc, const llm_engine_stats *st);
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

    /* the whole text is about 25 KB with the spec-decode counters */
    ngx_http_llm_json_init(&pm.out, r->pool, 32 * 1024);

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
    ngx_uint_t                   i;
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

    ngx_http_llm_prom_family(pm, "vllm:kv_cache_usage_perc",
        "KV-cache usage. 1 means 100 percent usage.", "gauge");
    ngx_http_llm_prom_sample(pm, "vllm:kv_cache_usage_perc",
                             st->kv_cache_usage);

    /* counters */

    ngx_http_llm_prom_counters(pm, ngx_http_llm_prom_engine_counters, st);

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

    /* speculative decoding: only with llm_speculative, as in vLLM */

    if (spec_tokens == 0) {
        return;
    }

    ngx_http_llm_prom_counters(pm, ngx_http_llm_prom_spec_counters, st);

    ngx_http_llm_prom_family(pm,
        "vllm:spec_decode_num_accepted_tokens_per_pos_total",
        "Accepted tokens per draft position.", "counter");

    for (i = 0; i < spec_tokens && i < LLM_SPEC_MAX_TOKENS; i++) {
        ngx_http_llm_json_lit(j,
            "vllm:spec_decode_num_accepted_tokens_per_pos_total{");
        ngx_http_llm_json_raw(j, pm->labels.data, pm->labels.len);
        ngx_http_llm_json_lit(j, ",position=\"");
        ngx_http_llm_json_int(j, (int64_t) i);
        ngx_http_llm_json_lit(j, "\"} ");
        ngx_http_llm_prom_float(j,
                                (double) st->spec_accepted_per_pos_total[i]);
        ngx_http_llm_json_lit(j, "\n");
    }
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
