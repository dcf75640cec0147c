/*
 * cmd_generate.c -- `llm generate --model DIR --prompt TEXT [--max-tokens N
 * --temperature T --top-p P --top-k K --seed S --json]`: one request through
 * the real engine (thread, scheduler, sampler, streaming detokenizer), as
 * the nginx module drives it.  Text streams to stdout as it is produced;
 * --json prints one object at the end instead.
 *
 * Also, for tests and benchmarks: --frequency-penalty F, --presence-penalty
 * F, --ignore-eos, --logit-bias ID:V,ID:V..., --spec K [--lookup-min m
 * --lookup-max M] (n-gram speculation, default lookup 1..4), --threads N,
 * --device D, --weights q8_0|q4_0|q4_k (quantize on load).  With --spec, --json adds the speculation counters.
 * --prompt-logprobs N: --json adds "prompt_logprobs", one
 * {"id","logprob","rank","top":[[id,logprob]...]} per prompt token after
 * the first.
 */
#include <semaphore.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <yajl/yajl_gen.h>

#include "cli.h"
#include "llm.h"
#include "tokenizer/tokenizer.h"
#include "util/util.h"


typedef struct {
    int                 json;
    int                 done;
    llm_finish_reason   finish;
    llm_request_stats   stats;
    char               *text;
    size_t              text_len;
    int32_t            *ids;
    int                 n_ids;
    llm_token_logprob  *plp;            /* prompt logprobs */
    int                 n_plp;
} llm_gen_state;


static void
llm_gen_notify(void *data)
{
    sem_post(data);
}


static void
llm_gen_output(llm_request *r, const llm_output *o, void *data)
{
    llm_gen_state  *g = data;

    if (g->json) {
        g->text = llm_xrealloc(g->text, g->text_len + o->text_len + 1);
        memcpy(g->text + g->text_len, o->text, o->text_len);
        g->text_len += o->text_len;
        g->text[g->text_len] = '\0';
    } else {
        fwrite(o->text, 1, o->text_len, stdout);
        fflush(stdout);
    }
    g->ids = llm_xrealloc(g->ids, sizeof(int32_t) * (g->n_ids + o->n_ids + 1));
    memcpy(g->ids + g->n_ids, o->ids, sizeof(int32_t) * o->n_ids);
    g->n_ids += o->n_ids;
    if (o->prompt_logprobs) {
        g->plp = llm_xmalloc(sizeof(llm_token_logprob) * o->n_prompt_logprobs);
        memcpy(g->plp, o->prompt_logprobs,
               sizeof(llm_token_logprob) * o->n_prompt_logprobs);
        g->n_plp = o->n_prompt_logprobs;
    }
    if (o->finish_reason != LLM_FINISH_NONE) {
        g->done = 1;
        g->finish = o->finish_reason;
        g->stats = o->stats;
    }
}


static void
llm_gen_key_num(yajl_gen j, const char *key, int has, double v)
{
    yajl_gen_string(j, (const unsigned char *) key, strlen(key));
    if (has) {
        yajl_gen_double(j, v);
    } else {
        yajl_gen_null(j);
    }
}


static void
llm_gen_key_int(yajl_gen j, const char *key, long long v)
{
    yajl_gen_string(j, (const unsigned char *) key, strlen(key));
    yajl_gen_integer(j, v);
}


static void
llm_gen_ids(yajl_gen j, const char *key, const int32_t *ids, int n)
{
    int  i;

    yajl_gen_string(j, (const unsigned char *) key, strlen(key));
    yajl_gen_array_open(j);
    for (i = 0; i < n; i++) {
        yajl_gen_integer(j, ids[i]);
    }
    yajl_gen_array_close(j);
}


static void
llm_gen_print_json(const llm_gen_state *g, const int32_t *prompt,
    int n_prompt)
{
    yajl_gen              j = yajl_gen_alloc(NULL);
    llm_metrics           m;
    const unsigned char  *buf;
    size_t                len;
    const char           *fr = llm_finish_reason_str(g->finish);

    llm_metrics_compute(&g->stats, &m);
    yajl_gen_map_open(j);
    llm_gen_ids(j, "prompt_ids", prompt, n_prompt);
    llm_gen_ids(j, "ids", g->ids, g->n_ids);
    yajl_gen_string(j, (const unsigned char *) "text", 4);
    yajl_gen_string(j, (const unsigned char *) (g->text ? g->text : ""),
                    g->text_len);
    yajl_gen_string(j, (const unsigned char *) "finish_reason", 13);
    yajl_gen_string(j, (const unsigned char *) fr, strlen(fr));
    yajl_gen_string(j, (const unsigned char *) "timings", 7);
    yajl_gen_map_open(j);
    llm_gen_key_num(j, "queue_ms", m.has_queue, m.queue_ms);
    llm_gen_key_num(j, "ttft_ms", m.has_ttft, m.ttft_ms);
    llm_gen_key_num(j, "generation_ms", m.has_generation, m.generation_ms);
    llm_gen_key_num(j, "tokens_per_second", m.has_tps, m.tokens_per_second);
    yajl_gen_map_close(j);
    if (g->plp) {
        int  i, k;

        yajl_gen_string(j, (const unsigned char *) "prompt_logprobs", 15);
        yajl_gen_array_open(j);
        for (i = 0; i < g->n_plp; i++) {
            yajl_gen_map_open(j);
            llm_gen_key_int(j, "id", g->plp[i].id);
            llm_gen_key_num(j, "logprob", 1, g->plp[i].logprob);
            llm_gen_key_int(j, "rank", g->plp[i].rank);
            yajl_gen_string(j, (const unsigned char *) "top", 3);
            yajl_gen_array_open(j);
            for (k = 0; k < g->plp[i].n_top; k++) {
                yajl_gen_array_open(j);
                yajl_gen_integer(j, g->plp[i].top_ids[k]);
                yajl_gen_double(j, g->plp[i].top_logprobs[k]);
                yajl_gen_array_close(j);
            }
            yajl_gen_array_close(j);
            yajl_gen_map_close(j);
        }
        yajl_gen_array_close(j);
    }
    if (g->stats.num_spec_tokens > 0) {
        yajl_gen_string(j, (const unsigned char *) "speculation", 11);
        yajl_gen_map_open(j);
        llm_gen_key_int(j, "num_spec_steps", g->stats.num_spec_steps);
        llm_gen_key_int(j, "num_draft_tokens", g->stats.num_draft_tokens);
        llm_gen_key_int(j, "num_accepted_tokens",
                        g->stats.num_accepted_tokens);
        yajl_gen_map_close(j);
    }
    yajl_gen_map_close(j);
    yajl_gen_get_buf(j, &buf, &len);
    fwrite(buf, 1, len, stdout);
    fputc('\n', stdout);
    yajl_gen_free(j);
}


/* Reads a numeric option into *v; 0 when absent, -1 when malformed. */
static int
llm_gen_num_opt(int argc, char **argv, const char *name, double *v)
{
    const char  *s = llm_cli_opt(argc, argv, name);
    char        *end;

    if (s == NULL) {
        return 0;
    }
    *v = strtod(s, &end);
    return (end == s || *end != '\0') ? -1 : 1;
}


/* "id:value,id:value" -> logit bias arrays; -1 when malformed. */
static int
llm_gen_parse_bias(const char *s, int32_t **ids, float **vals)
{
    int    n = 0, cap = 8;
    long   id;
    float  v;
    char  *end;

    *ids = llm_xmalloc(sizeof(int32_t) * cap);
    *vals = llm_xmalloc(sizeof(float) * cap);
    while (*s) {
        id = strtol(s, &end, 10);
        if (end == s || *end != ':' || id < 0 || id > INT32_MAX) {
            return -1;
        }
        s = end + 1;
        v = strtof(s, &end);
        if (end == s || (*end != ',' && *end != '\0')) {
            return -1;
        }
        if (n == cap) {
            cap *= 2;
            *ids = llm_xrealloc(*ids, sizeof(int32_t) * cap);
            *vals = llm_xrealloc(*vals, sizeof(float) * cap);
        }
        (*ids)[n] = (int32_t) id;
        (*vals)[n++] = v;
        s = *end ? end + 1 : end;
    }
    return n;
}


int
llm_cmd_generate(int argc, char **argv)
{
    enum { MAXT, TEMP, TOPP, TOPK, SEED, SPEC, LMIN, LMAX, FREQ, PRES, PLP,
           NOPT };
    static const char    *nums[NOPT] = {
        "--max-tokens", "--temperature", "--top-p", "--top-k", "--seed",
        "--spec", "--lookup-min", "--lookup-max", "--frequency-penalty",
        "--presence-penalty", "--prompt-logprobs"
    };
    const char           *dir = llm_cli_opt(argc, argv, "--model");
    const char           *prompt = llm_cli_opt(argc, argv, "--prompt");
    const char           *bias = llm_cli_opt(argc, argv, "--logit-bias");
    double                v[NOPT];
    int                   have[NOPT], i, n_prompt, rc = 1;
    char                  err[LLM_ERR_LEN];
    llm_engine_config     cfg = { 0 };
    llm_sampling_params   p;
    llm_gen_state         g = { 0 };
    llm_engine           *e;
    llm_request          *r;
    int32_t              *ids = NULL, *bias_ids = NULL;
    float                *bias_vals = NULL;
    sem_t                 sem;

    if (dir == NULL || prompt == NULL) {
        return llm_cli_fail("usage: llm generate --model DIR --prompt TEXT "
                            "[--max-tokens N --temperature T --top-p P "
                            "--top-k K --seed S --threads N --device D "
                            "--weights q8_0|q4_0|q4_k --json]");
    }
    for (i = 0; i < NOPT; i++) {
        have[i] = llm_gen_num_opt(argc, argv, nums[i], &v[i]);
        if (have[i] < 0) {
            return llm_cli_fail("%s: expected a number", nums[i]);
        }
    }
    g.json = llm_cli_flag(argc, argv, "--json");
    sem_init(&sem, 0, 0);
    cfg.model_dir = dir;
    cfg.device = llm_cli_opt(argc, argv, "--device");
    cfg.weights = llm_cli_opt(argc, argv, "--weights");
    if (cfg.device == NULL) {
        cfg.device = "cpu";
    }
    cfg.threads = llm_cli_threads(argc, argv);
    cfg.max_num_seqs = 1;
    cfg.notify = llm_gen_notify;
    cfg.notify_data = &sem;
    if (have[SPEC]) {
        cfg.spec_tokens = (int) v[SPEC];
        cfg.spec_lookup_min = have[LMIN] ? (int) v[LMIN] : 1;
        cfg.spec_lookup_max = have[LMAX] ? (int) v[LMAX] : 4;
    }
    e = llm_engine_create(&cfg, err);
    if (e == NULL) {
        sem_destroy(&sem);
        return llm_cli_fail("%s", err);
    }
    n_prompt = llm_tokenizer_encode(llm_model_tokenizer(llm_engine_model(e)),
                                    prompt, strlen(prompt), 1, &ids, err);
    if (n_prompt < 0) {
        llm_cli_fail("%s", err);
        goto done;
    }
    llm_sampling_params_init(&p, llm_engine_model(e));
    p.max_tokens = have[MAXT] ? (int) v[MAXT] : 16;
    if (have[TEMP]) {
        p.temperature = v[TEMP];
    }
    if (have[TOPP]) {
        p.top_p = v[TOPP];
    }
    if (have[TOPK]) {
        p.top_k = (int) v[TOPK];
    }
    if (have[SEED]) {
        p.has_seed = 1;
        p.seed = (uint64_t) (int64_t) v[SEED];
    }
    if (have[FREQ]) {
        p.frequency_penalty = v[FREQ];
    }
    if (have[PRES]) {
        p.presence_penalty = v[PRES];
    }
    if (have[PLP]) {
        p.prompt_logprobs = (int) v[PLP];
    }
    p.ignore_eos = llm_cli_flag(argc, argv, "--ignore-eos");
    if (bias) {
        p.n_logit_bias = llm_gen_parse_bias(bias, &bias_ids, &bias_vals);
        if (p.n_logit_bias < 0) {
            llm_cli_fail("--logit-bias: expected ID:VALUE,ID:VALUE...");
            goto done;
        }
        p.logit_bias_ids = bias_ids;
        p.logit_bias_values = bias_vals;
    }
    r = llm_request_create(e, ids, n_prompt, &p, err);
    if (r == NULL) {
        llm_cli_fail("%s", err);
        goto done;
    }
    llm_engine_submit(e, r);
    while (!g.done) {
        sem_wait(&sem);
        llm_engine_drain(e, llm_gen_output, &g);
    }
    llm_request_release(r);
    if (g.json) {
        llm_gen_print_json(&g, ids, n_prompt);
    } else {
        fputc('\n', stdout);
    }
    rc = g.finish == LLM_FINISH_ERROR;

done:
    free(ids);
    free(bias_ids);
    free(bias_vals);
    free(g.text);
    free(g.ids);
    free(g.plp);
    llm_engine_destroy(e);
    sem_destroy(&sem);
    return rc;
}
