/*
 * regex.h -- regular expressions as byte-level DFAs, for structured output:
 * JSON Schema's `pattern` and `format`, and vLLM's `regex`.
 *
 * The syntax is ECMAScript's (what ajv runs with the "u" flag), less what
 * a DFA cannot be: literals (UTF-8), `.`, classes `[...]` with ranges and
 * negation (non-ASCII members only as single characters), the escapes
 * \d \w \s \D \W \S \t \n \r \f \v \0 \xHH \uHHHH and escaped
 * punctuation, groups `(...)` and `(?:...)`, `|`, and the quantifiers
 * `* + ? {n} {n,} {n,m}` (a lazy `?` after them changes nothing a match
 * can be).  `^` may open and `$` close a top-level alternative; without
 * them the pattern matches anywhere in the string (JSON Schema's rule).
 * Refused with a message: look-arounds, back-references, \b, \p{...},
 * named groups, nesting deeper than LLM_RE_MAX_NEST, and automata above
 * LLM_RE_MAX_NFA / LLM_RE_MAX_DFA states.
 *
 * The DFA reads UTF-8 bytes; only states that can still reach a match are
 * kept, so a byte with no transition cannot be part of any match.
 */
#ifndef LLM_REGEX_H
#define LLM_REGEX_H

#include <stddef.h>
#include <stdint.h>

#define LLM_RE_MAX_NEST   32
#define LLM_RE_MAX_NFA    8192
#define LLM_RE_MAX_DFA    2048
#define LLM_RE_MAX_WORK   20000000 /* NFA states visited building the DFA */
#define LLM_RE_MAX_LEN    255      /* length bounds a DFA is checked with */
#define LLM_RE_LEN_WORDS  5        /* bits 0..255 exact, bit 256: >= 256 */

typedef struct {
    int        n;                  /* states */
    int        start;
    int16_t   *next;               /* n * 256: the next state, -1: no match */
    uint8_t   *accept;
    /* after llm_dfa_lengths(): bit k of lens[s], how many more characters
     * (code points) an accepted string can have from s */
    uint64_t  *lens;               /* n * LLM_RE_LEN_WORDS, or NULL */
} llm_dfa;

/* anchored: the whole text must match (vLLM's regex); else JSON Schema's
 * search semantics.  0, or -1 with a message in err (LLM_ERR_LEN). */
int llm_regex_compile(const char *re, size_t len, int anchored, llm_dfa *d,
    char *err);

/* The strings both match. */
int llm_dfa_intersect(const llm_dfa *a, const llm_dfa *b, llm_dfa *out,
    char *err);

void llm_dfa_lengths(llm_dfa *d);

/* Whether an accepted string from state s can have between lo and hi more
 * characters (hi < 0: no upper bound); needs llm_dfa_lengths(). */
int llm_dfa_len_ok(const llm_dfa *d, int s, int lo, int hi);

void llm_dfa_free(llm_dfa *d);

#endif /* LLM_REGEX_H */
