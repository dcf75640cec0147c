/*
 * grammar.h -- structured output's one grammar engine: a compiled
 * constraint (a JSON Schema, a JSON object, a choice of texts, a regex, or
 * a composition of them) and a byte-level pushdown automaton that says,
 * at each step, which bytes may come next.  The engine derives the token
 * mask from it (grammar_mask.c).
 *
 * A grammar is compiled from a spec, JSON text (what crosses the engine's
 * wire in llm_sampling_params.structured):
 *
 *   {"schema": S}          a JSON value valid under JSON Schema S
 *                          (json_schema.c has the subset and policies)
 *   {"object": true}       any JSON object (OpenAI's json_object)
 *   {"literal": "text"}    exactly that text
 *   {"choice": ["a", ...]} exactly one of the texts (vLLM's choice)
 *   {"regex": "re"}        a text the regex matches whole (vLLM's regex)
 *   {"sequence": [G, ...]} each spec's text, one after the other
 *   {"any_of": [G, ...]}   one of the specs' texts
 *
 * so a caller wraps a schema in fixed text, e.g. a forced tool call:
 *   {"any_of": [{"sequence": [{"literal": "<tool_call>\n{\"name\": \"f\",
 *    \"arguments\": "}, {"schema": {...}}, {"literal": "}\n</tool_call>"}]},
 *    ...]}
 * llm_grammar_spec_* build such texts.
 *
 * Compiled grammars are immutable and shared: llm_grammar_get() compiles
 * a spec once per process and keeps the LLM_GRAMMAR_CACHE most recent by
 * text; each holder releases its reference with llm_grammar_release().
 *
 * The automaton's state is a small set of configurations (an `anyOf`
 * whose alternatives begin alike is followed in all of them at once), each
 * a stack of at most LLM_G_MAX_FRAMES frames.
 */
#ifndef LLM_GRAMMAR_H
#define LLM_GRAMMAR_H

#include <stddef.h>
#include <stdint.h>

#include "grammar/json_grammar.h"

#define LLM_G_MAX_FRAMES  32         /* nesting of a schema's values */
#define LLM_G_MAX_CFGS    64         /* alternatives followed at once: e.g.
                                      * the tools of tool_choice "required"
                                      * whose names begin alike */
#define LLM_G_MAX_PROPS   64         /* properties of one object schema */
#define LLM_G_MAX_NODES   65536
#define LLM_GRAMMAR_CACHE 64

typedef struct llm_grammar  llm_grammar;

typedef struct {
    uint16_t  node;
    uint8_t   phase;
    uint8_t   ws;                    /* whitespace in this gap (as json_grammar) */
    uint8_t   f;                     /* number: negative */
    uint8_t   pad[3];
    int32_t   i, j;
    union {
        llm_json_state  js;          /* any JSON value */
        struct {
            int64_t     p;           /* integer part */
            int32_t     q;           /* fraction digits' value */
            int16_t     k, n;        /* integer and fraction digits */
        } num;
        struct {
            uint8_t     left, lo, hi;  /* UTF-8 bytes to come, next range */
        } s;
    } u;
} llm_gframe;

typedef struct {
    uint8_t     depth;
    uint8_t     done;                /* the whole text is complete */
    uint8_t     ws;                  /* whitespace after it */
    uint8_t     pad;
    int32_t     pend;                /* a fork: the node to enter, or -1 */
    llm_gframe  fr[LLM_G_MAX_FRAMES];
} llm_gcfg;

typedef struct {
    int         n;
    llm_gcfg    c[LLM_G_MAX_CFGS];
} llm_grammar_state;

/* Compiles a spec; NULL with a message in err (LLM_ERR_LEN) that names the
 * keyword a schema uses and the compiler cannot honour. */
llm_grammar *llm_grammar_compile(const char *spec, size_t len, char *err);

/* The cache: a compiled grammar for the spec, with a reference taken. */
llm_grammar *llm_grammar_get(const char *spec, size_t len, char *err);
void llm_grammar_release(llm_grammar *g);

void llm_grammar_init(const llm_grammar *g, llm_grammar_state *s);

/* One byte: out is in's successor; 0, or -1 when no configuration takes
 * it (out undefined). */
int llm_grammar_step(const llm_grammar *g, const llm_grammar_state *in,
    unsigned char c, llm_grammar_state *out);

/* Bytes in place: 0, or -1 (s undefined). */
int llm_grammar_feed(const llm_grammar *g, llm_grammar_state *s,
    const char *bytes, size_t n);

/* Whether the text so far is complete: the sequence may end here. */
int llm_grammar_complete(const llm_grammar *g, const llm_grammar_state *s);

/* The string fast path of the mask: room >= 0 when the only configuration
 * is between characters of a JSON string that takes any character not
 * needing an escape (no pattern or format), room being how many more it
 * takes (255: no limit); -1 otherwise. */
int llm_grammar_string_room(const llm_grammar *g, const llm_grammar_state *s);

/* The state (and which grammar it is of) as bytes to compare, in buf:
 * their length, or 0 when they do not fit in cap. */
size_t llm_grammar_state_key(const llm_grammar *g,
    const llm_grammar_state *s, void *buf, size_t cap);

/* Copies a state's used part. */
void llm_grammar_state_copy(llm_grammar_state *dst,
    const llm_grammar_state *src);

/* llm_structured_spec() (llm.h) builds {"KIND": JSON} texts. */

#endif /* LLM_GRAMMAR_H */
