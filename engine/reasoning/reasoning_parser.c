/*
 * reasoning_parser.c -- vLLM's reasoning parsers of the <think>...</think>
 * family (llm.h, "Reasoning").  Two small state machines over one output:
 *
 *   text     reasoning until the end marker, content after it; a start
 *            marker the model writes itself (older templates) is dropped
 *            once; a piece that ends with what may begin a marker is held
 *            back until the next piece says.
 *   tokens   by id: reasoning, then content after the end marker's id; the
 *            markers, tool-call markup and the stop token are
 *            "unclassified" (vLLM's name for control and tool output); each
 *            category keeps its first and last token's step time.
 *
 * Both start where the prompt left the output: inside the think block
 * (Qwen3, DeepSeek-R1 templates) or after it (thinking disabled).
 */
#include <stdlib.h>
#include <string.h>

#include "llm.h"

#define MARKER_MAX 32

typedef enum { PHASE_REASONING, PHASE_CONTENT, PHASE_TOOL } phase;

struct llm_reasoning_parser {
    llm_reasoning_config  c;
    char                  start[MARKER_MAX], end[MARKER_MAX];
    size_t                start_len, end_len;
    /* text */
    int                   text_reasoning;  /* still before the end marker */
    int                   start_seen;      /* a start marker was dropped */
    char                  hold[MARKER_MAX];
    size_t                n_hold;
    /* tokens */
    phase                 ph;
    llm_token_phases      phases;
};

static const char *const kind_names[] = { "", "qwen3", "deepseek_r1" };

int
llm_reasoning_parser_kind_from_name(const char *name, size_t len)
{
    for (int k = 1; k < (int) (sizeof(kind_names) / sizeof(kind_names[0]));
         k++) {
        if (strlen(kind_names[k]) == len && memcmp(kind_names[k], name, len) == 0)
            return k;
    }
    return -1;
}

const char *
llm_reasoning_parser_kind_name(llm_reasoning_parser_kind k)
{
    return (unsigned) k < sizeof(kind_names) / sizeof(kind_names[0])
           ? kind_names[k] : "";
}

static size_t
copy_marker(char *dst, const char *src)
{
    size_t n = src ? strlen(src) : 0;

    if (n >= MARKER_MAX)
        n = 0;                  /* no marker that long exists: none */
    memcpy(dst, src ? src : "", n);
    dst[n] = '\0';
    return n;
}

llm_reasoning_parser *
llm_reasoning_parser_new(const llm_reasoning_config *c)
{
    llm_reasoning_parser *p = calloc(1, sizeof(*p));

    if (p == NULL)
        return NULL;
    p->c = *c;
    p->start_len = copy_marker(p->start, c->start);
    p->end_len = copy_marker(p->end, c->end);
    p->text_reasoning = c->in_reasoning;
    p->ph = c->in_reasoning ? PHASE_REASONING : PHASE_CONTENT;
    return p;
}

void
llm_reasoning_parser_free(llm_reasoning_parser *p)
{
    free(p);
}

/* where marker m (length n) first occurs in s[0..len), or -1 */
static long
find(const char *s, size_t len, const char *m, size_t n)
{
    if (n == 0 || len < n)
        return -1;
    for (size_t i = 0; i + n <= len; i++) {
        if (s[i] == m[0] && memcmp(s + i, m, n) == 0)
            return (long) i;
    }
    return -1;
}

/* the length of the longest suffix of s that is a proper prefix of m */
static size_t
partial(const char *s, size_t len, const char *m, size_t n)
{
    size_t k = n ? n - 1 : 0;

    if (k > len)
        k = len;
    for (; k > 0; k--) {
        if (memcmp(s + len - k, m, k) == 0)
            return k;
    }
    return 0;
}

static void
emit(llm_reasoning_text_fn fn, void *data, int reasoning, const char *s,
    size_t len)
{
    if (len)
        fn(reasoning, s, len, data);
}

/* text in the think block: s[0..len) with nothing held back before it */
static void
think_text(llm_reasoning_parser *p, const char *s, size_t len,
    llm_reasoning_text_fn fn, void *data)
{
    while (p->text_reasoning && len) {
        long   e = find(s, len, p->end, p->end_len);
        long   b = p->start_seen ? -1 : find(s, len, p->start, p->start_len);
        size_t keep;

        if (b >= 0 && (e < 0 || b < e)) {
            emit(fn, data, 1, s, (size_t) b);
            p->start_seen = 1;
            s += b + p->start_len;
            len -= b + p->start_len;
            continue;
        }
        if (e >= 0) {
            emit(fn, data, 1, s, (size_t) e);
            p->text_reasoning = 0;
            s += e + p->end_len;
            len -= e + p->end_len;
            break;
        }
        keep = partial(s, len, p->end, p->end_len);
        if (!p->start_seen) {
            size_t k = partial(s, len, p->start, p->start_len);
            if (k > keep)
                keep = k;
        }
        emit(fn, data, 1, s, len - keep);
        memcpy(p->hold, s + len - keep, keep);
        p->n_hold = keep;
        return;
    }
    emit(fn, data, p->text_reasoning, s, len);
}

void
llm_reasoning_parser_text(llm_reasoning_parser *p, const char *text,
    size_t len, llm_reasoning_text_fn fn, void *data)
{
    char   buf[2 * MARKER_MAX];
    size_t n, take;

    /* what was held back goes first, joined with enough new text to tell
     * whether it begins a marker */
    while (p->n_hold && len) {
        n = p->n_hold;
        take = len < MARKER_MAX ? len : MARKER_MAX;
        memcpy(buf, p->hold, n);
        memcpy(buf + n, text, take);
        p->n_hold = 0;
        think_text(p, buf, n + take, fn, data);
        text += take;
        len -= take;
    }
    if (len)
        think_text(p, text, len, fn, data);
}

void
llm_reasoning_parser_finish(llm_reasoning_parser *p, llm_reasoning_text_fn fn,
    void *data)
{
    emit(fn, data, p->text_reasoning, p->hold, p->n_hold);
    p->n_hold = 0;
}

/* a token of category t at time ts: a second one of the same step batches */
static void
count(llm_token_phase *t, double ts)
{
    if (t->tokens == 0)
        t->first = ts;
    else if (ts == t->last)
        t->batched = 1;
    t->last = ts;
    t->tokens++;
}

void
llm_reasoning_parser_tokens(llm_reasoning_parser *p, const int32_t *ids,
    const double *times, int n, int stop)
{
    for (int i = 0; i < n; i++) {
        int32_t id = ids[i];
        int     control = (stop && i == n - 1);

        switch (p->ph) {
        case PHASE_REASONING:
            if (id == p->c.end_id) {
                p->ph = PHASE_CONTENT;
                control = 1;
            } else if (id == p->c.start_id) {
                control = 1;
            }
            if (!control)
                count(&p->phases.reasoning, times[i]);
            break;
        case PHASE_CONTENT:
            if (p->c.tools_only) {
                control = 1;
            } else if (id == p->c.tool_open_id) {
                p->ph = PHASE_TOOL;
                control = 1;
            }
            if (!control)
                count(&p->phases.content, times[i]);
            break;
        case PHASE_TOOL:
            if (id == p->c.tool_close_id)
                p->ph = PHASE_CONTENT;
            control = 1;
            break;
        }
        if (control)
            p->phases.unclassified++;
    }
}

const llm_token_phases *
llm_reasoning_parser_phases(const llm_reasoning_parser *p)
{
    return &p->phases;
}

int
llm_reasoning_parser_in_reasoning(const llm_reasoning_parser *p)
{
    return p->text_reasoning;
}
