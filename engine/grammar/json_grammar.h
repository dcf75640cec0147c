/*
 * json_grammar.h -- a byte-at-a-time recognizer of JSON text (RFC 8259),
 * for structured output: the engine feeds it each candidate token's bytes
 * to know which tokens keep the output a prefix of a JSON object.
 *
 * The state is a small value: copy it to try bytes without committing.
 * Beyond the RFC, for a model that writes JSON token by token:
 *   - the top-level value must be an object (OpenAI's json_object), and
 *     the text starts with its '{';
 *   - at most LLM_JSON_MAX_DEPTH nested containers;
 *   - whitespace between tokens is one space, or a newline and at most
 *     LLM_JSON_MAX_INDENT spaces or tabs (as llama.cpp's JSON grammar), so
 *     a model cannot spend its tokens on blanks; after the object only
 *     such whitespace follows (and, in the engine, the end of the
 *     sequence);
 *   - strings must be valid UTF-8 (no overlong forms, no surrogates).
 */
#ifndef LLM_JSON_GRAMMAR_H
#define LLM_JSON_GRAMMAR_H

#include <stddef.h>
#include <stdint.h>

#define LLM_JSON_MAX_DEPTH  64
#define LLM_JSON_MAX_INDENT 20

typedef struct {
    uint64_t  objects;      /* bit d: container d is an object (else array) */
    uint8_t   depth;        /* open containers */
    uint8_t   state;        /* where in the grammar (json_grammar.c) */
    uint8_t   aux;          /* literal position, hex digits, UTF-8 bytes left */
    uint8_t   lo, hi;       /* the next UTF-8 byte's range */
    uint8_t   ws;           /* whitespace in this gap: 0 none, 255 one
                             * space, else 1 + indentation after '\n' */
    uint8_t   key;          /* the string being read is an object key */
    uint8_t   lit;          /* which literal: 0 true, 1 false, 2 null */
} llm_json_state;

void llm_json_init(llm_json_state *s);

/* Any JSON value, not only an object (the grammar engine's "any value"
 * inside a schema): depth 0 is the value's own level. */
void llm_json_init_value(llm_json_state *s);

/* Whether a value started with llm_json_init_value() may end here: a
 * number at depth 0 that a further digit could still extend. */
int llm_json_value_may_end(const llm_json_state *s);

/* Feeds bytes; 0 when they continue a JSON prefix, -1 (s undefined) when
 * they cannot. */
int llm_json_feed(llm_json_state *s, const char *bytes, size_t n);

/* Whether the text so far is a complete JSON object (whitespace after it
 * allowed): the sequence may end here. */
int llm_json_complete(const llm_json_state *s);

/* Inside a string, between characters: where llm_json_plain() text is
 * taken without changing the state. */
int llm_json_in_string(const llm_json_state *s);

/* Whether a string, between characters, takes the bytes and is again
 * between characters: whole UTF-8 characters and escapes, no '"' or
 * control character (most of a vocabulary). */
int llm_json_plain(const char *bytes, size_t n);

#endif /* LLM_JSON_GRAMMAR_H */
