/*
 * test_reasoning_parser.c -- the <think> reasoning parser (engine/reasoning):
 * the text split (fed whole, in two pieces split at every byte offset, and
 * one byte at a time, each way the same reasoning and content, vLLM's
 * extract_reasoning() results), the token classification by id with step
 * timestamps, and the per-category metrics' formulas and null rules.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "llm.h"
#include "tap.h"

typedef struct {
    char    r[512], c[512];
    size_t  nr, nc;
    int     mixed;              /* content came before reasoning */
} split_t;

static void
on_text(int reasoning, const char *s, size_t len, void *data)
{
    split_t *o = data;

    if (reasoning) {
        if (o->nc)
            o->mixed = 1;
        memcpy(o->r + o->nr, s, len);
        o->nr += len;
    } else {
        memcpy(o->c + o->nc, s, len);
        o->nc += len;
    }
}

typedef struct {
    const char *what;
    int         in_reasoning;
    const char *text;
    const char *reasoning;
    const char *content;
} tcase;

static const tcase cases[] = {
    { "qwen3: think opened by the template", 1,
      "Let me think.\n</think>\n\nThe answer is 4.",
      "Let me think.\n", "\n\nThe answer is 4." },
    { "the model opens the block itself", 1,
      "<think>\nhmm</think>ok", "\nhmm", "ok" },
    { "no end marker: all reasoning (cut by length)", 1,
      "still thinking <thi", "still thinking <thi", "" },
    { "end right at the end: no content", 1,
      "done</think>", "done", "" },
    { "only the end marker", 1, "</think>answer", "", "answer" },
    { "thinking disabled: all content, markers kept", 0,
      "plain </think> answer", "", "plain </think> answer" },
    { "a second start marker stays reasoning text", 1,
      "<think>a<think>b</think>c", "a<think>b", "c" },
    { "a near-marker is text", 1, "x </thin k> y</think>z",
      "x </thin k> y", "z" },
    { "a second end marker is content", 1, "r</think>c</think>d",
      "r", "c</think>d" },
    { "multi-byte UTF-8 around the marker", 1,
      "\xe6\x80\x9d\xe8\x80\x83</think>\xe7\xad\x94", "\xe6\x80\x9d\xe8\x80\x83",
      "\xe7\xad\x94" },
};

static llm_reasoning_config
config(int in_reasoning)
{
    llm_reasoning_config c = {
        .start = "<think>", .end = "</think>", .start_id = 10, .end_id = 11,
        .tool_open_id = 20, .tool_close_id = 21, .tools_only = 0,
        .in_reasoning = in_reasoning };
    return c;
}

static int
run_split(const tcase *t, size_t cut, int bytewise, split_t *o)
{
    llm_reasoning_config  c = config(t->in_reasoning);
    llm_reasoning_parser *p = llm_reasoning_parser_new(&c);
    size_t                len = strlen(t->text);

    memset(o, 0, sizeof(*o));
    if (bytewise) {
        for (size_t i = 0; i < len; i++)
            llm_reasoning_parser_text(p, t->text + i, 1, on_text, o);
    } else {
        llm_reasoning_parser_text(p, t->text, cut, on_text, o);
        llm_reasoning_parser_text(p, t->text + cut, len - cut, on_text, o);
    }
    llm_reasoning_parser_finish(p, on_text, o);
    llm_reasoning_parser_free(p);
    return o->nr == strlen(t->reasoning) && memcmp(o->r, t->reasoning, o->nr) == 0
           && o->nc == strlen(t->content) && memcmp(o->c, t->content, o->nc) == 0
           && !o->mixed;
}

static void
test_split(void)
{
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        const tcase *t = &cases[i];
        split_t      o;
        int          ok = run_split(t, strlen(t->text), 0, &o);
        size_t       bad = (size_t) -1;

        tap_ok(ok, "%s: whole", t->what);
        if (!ok)
            tap_diag("reasoning [%.*s] content [%.*s]", (int) o.nr, o.r,
                     (int) o.nc, o.c);
        for (size_t cut = 0; cut <= strlen(t->text); cut++) {
            if (!run_split(t, cut, 0, &o) && bad == (size_t) -1)
                bad = cut;
        }
        tap_ok(bad == (size_t) -1, "%s: split at every offset (first bad: %zd)",
               t->what, (ssize_t) bad);
        tap_ok(run_split(t, 0, 1, &o), "%s: byte by byte", t->what);
    }
}

/* the ids of one engine step: they share its time */
static void
step(llm_reasoning_parser *p, const int32_t *ids, int n, double t, int stop)
{
    double times[8];

    for (int i = 0; i < n; i++)
        times[i] = t;
    llm_reasoning_parser_tokens(p, ids, times, n, stop);
}

/* ids: 10 <think>, 11 </think>, 20 <tool_call>, 21 </tool_call>, 99 EOS */
static void
test_tokens(void)
{
    llm_reasoning_config  c = config(1);
    llm_reasoning_parser *p = llm_reasoning_parser_new(&c);
    const llm_token_phases *ph;
    int32_t               s1[] = { 10, 1 }, s2[] = { 2 }, s3[] = { 3, 11 },
                          s4[] = { 4 }, s5[] = { 20, 5, 21 }, s6[] = { 6, 99 };
    llm_metrics           m;

    step(p, s1, 2, 1.0, 0);
    step(p, s2, 1, 1.1, 0);
    step(p, s3, 2, 1.3, 0);
    step(p, s4, 1, 1.4, 0);
    step(p, s5, 3, 1.5, 0);
    step(p, s6, 2, 1.8, 1);
    ph = llm_reasoning_parser_phases(p);

    tap_ok(ph->reasoning.tokens == 3 && ph->content.tokens == 2
           && ph->unclassified == 6,
           "tokens: 3 reasoning, 2 content, 6 unclassified (got %d %d %d)",
           ph->reasoning.tokens, ph->content.tokens, ph->unclassified);
    tap_ok(ph->reasoning.first == 1.0 && ph->reasoning.last == 1.3
           && ph->content.first == 1.4 && ph->content.last == 1.8,
           "tokens: each category's first and last step");
    tap_ok(!ph->reasoning.batched && !ph->content.batched,
           "tokens: markers in a step do not batch a category");

    llm_token_phase_metrics(&ph->reasoning, 0.5, &m);
    tap_ok(m.has_ttft && m.has_generation && m.has_mean_itl && m.has_tps
           && !m.has_queue && m.ttft_ms > 499.999 && m.ttft_ms < 500.001
           && m.generation_ms > 299.999 && m.generation_ms < 300.001
           && m.mean_itl_ms > 149.999 && m.mean_itl_ms < 150.001
           && m.tokens_per_second > 6.6666 && m.tokens_per_second < 6.6667,
           "metrics: ttft 500, generation 300, itl 150, 6.667 tokens/s "
           "(got %g %g %g %g)", m.ttft_ms, m.generation_ms, m.mean_itl_ms,
           m.tokens_per_second);
    llm_reasoning_parser_free(p);

    /* thinking disabled, two content tokens in one step, a forced call */
    c = config(0);
    p = llm_reasoning_parser_new(&c);
    {
        int32_t a[] = { 7, 8 }, b[] = { 9 };
        step(p, a, 2, 2.0, 0);
        step(p, b, 1, 2.5, 0);
    }
    ph = llm_reasoning_parser_phases(p);
    llm_token_phase_metrics(&ph->content, 1.0, &m);
    tap_ok(ph->reasoning.tokens == 0 && ph->content.tokens == 3
           && ph->content.batched && m.has_ttft && m.has_generation
           && !m.has_mean_itl && !m.has_tps,
           "a category that got two tokens in a step: no ITL, no tokens/s");
    llm_token_phase_metrics(&ph->reasoning, 1.0, &m);
    tap_ok(!m.has_ttft && !m.has_generation && !m.has_mean_itl && !m.has_tps,
           "a category without tokens: every time unset");
    llm_reasoning_parser_free(p);

    c = config(0);
    c.tools_only = 1;
    p = llm_reasoning_parser_new(&c);
    {
        int32_t a[] = { 7, 8, 9 };
        step(p, a, 3, 2.0, 1);
    }
    ph = llm_reasoning_parser_phases(p);
    tap_ok(ph->content.tokens == 0 && ph->unclassified == 3,
           "forced tool calls: every token unclassified");
    llm_reasoning_parser_free(p);

    {
        llm_token_phase one = { 1, 2.0, 2.0, 0 };
        llm_token_phase_metrics(&one, 1.5, &m);
        tap_ok(m.has_ttft && m.ttft_ms > 499.999 && m.ttft_ms < 500.001
               && m.has_generation && m.generation_ms == 0
               && !m.has_mean_itl && !m.has_tps,
               "one token: ttft, generation 0, no ITL, no tokens/s");
    }
}

int
main(void)
{
    tap_ok(llm_reasoning_parser_kind_from_name("qwen3", 5)
           == LLM_REASONING_PARSER_QWEN3
           && llm_reasoning_parser_kind_from_name("deepseek_r1", 11)
           == LLM_REASONING_PARSER_DEEPSEEK_R1
           && llm_reasoning_parser_kind_from_name("granite", 7) == -1,
           "parser names");
    test_split();
    test_tokens();
    return tap_done();
}
