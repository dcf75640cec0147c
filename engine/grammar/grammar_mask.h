/*
 * grammar_mask.h -- the token mask of a grammar state: which tokens'
 * texts the automaton takes whole.
 *
 * The vocabulary is a byte trie of the token texts, laid out in preorder
 * with each node's subtree end, and walked with the automaton's state: a
 * byte refused prunes every token under it, so outside strings (keys,
 * punctuation, numbers, literals) only the few live branches are visited.
 * Inside a JSON string that takes any character (no pattern or format),
 * "plain" tokens (whole UTF-8 characters, no quote, backslash or control
 * byte: most of a vocabulary) are taken as they are, within the string's
 * maxLength by their character count, and only the other tokens are walked,
 * in a second trie of their own.
 *
 * The walk's result is kept for the LLM_GMASK_CACHE states seen last (by
 * the state's bytes and the grammar's id): the same schema reaches the same
 * states request after request, and a string without a length stays in one
 * state all along.  What is left per token is one pass over the logits.
 */
#ifndef LLM_GRAMMAR_MASK_H
#define LLM_GRAMMAR_MASK_H

#include <stdint.h>

#include "grammar/grammar.h"

typedef struct llm_gvocab  llm_gvocab;

#define LLM_GMASK_CACHE     256
#define LLM_GMASK_KEY_MAX   4096
#define LLM_GMASK_IDS_MAX   65536

typedef struct {
    uint8_t            *key;
    size_t              key_len;
    int32_t            *ids;
    int                 n_ids;
    uint64_t            used;
} llm_gmask_entry;

typedef struct {
    llm_gmask_entry     cache[LLM_GMASK_CACHE];
    uint64_t            clock;
    uint64_t            hits, misses;
    uint8_t            *key;
    llm_grammar_state  *levels;      /* one per trie depth */
    int                 n_levels;
    int32_t            *ids;
    float              *vals;
    int                 cap;
} llm_gmask_scratch;

/* The texts of tokens 0 .. n-1: bytes + off[id], len[id] bytes (-1: not
 * text, never allowed); vocab >= n ids in all. */
typedef struct {
    const char      *bytes;
    const uint32_t  *off;
    const int32_t   *len;
    int32_t          n;
} llm_gtexts;

llm_gvocab *llm_gvocab_create(const llm_gtexts *tt, int vocab);
void llm_gvocab_free(llm_gvocab *v);

/* Sets the logits of the tokens s refuses to -INFINITY (every token id up
 * to vocab; the EOS ids are the caller's); returns whether a token with a
 * finite logit remains. */
int llm_grammar_mask(const llm_gvocab *v, const llm_grammar *g,
    const llm_grammar_state *s, float *logits, llm_gmask_scratch *w);

void llm_gmask_scratch_free(llm_gmask_scratch *w);

#endif /* LLM_GRAMMAR_MASK_H */
