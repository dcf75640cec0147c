/*
 * grammar_impl.h -- the compiled form of a grammar, shared by the compiler
 * (json_schema.c) and the automaton (grammar.c).
 */
#ifndef LLM_GRAMMAR_IMPL_H
#define LLM_GRAMMAR_IMPL_H

#include "grammar/grammar.h"
#include "grammar/regex.h"

enum {
    G_ANY,          /* any JSON value (json_grammar.c); object_only */
    G_LIT,          /* exact bytes: lits[a .. a + n) */
    G_LITSET,       /* one of several texts: the trie from `trie` */
    G_STRING,       /* a JSON string: length min..max, dfa */
    G_NUMBER,       /* a JSON number or integer within L..H */
    G_OBJECT,       /* props[a .. a + n), additional `item` (-1: none) */
    G_ARRAY,        /* items `item`, min..max of them */
    G_SEQ,          /* kids[a .. a + n) one after the other */
    G_CHOICE,       /* one of kids[a .. a + n) */
    G_ALIAS,        /* `item` ($ref, filled in once compiled) */
    G_REGEX         /* raw text the dfa matches */
};

typedef struct {
    uint8_t   type;
    uint8_t   object_only;       /* G_ANY */
    uint8_t   integer;           /* G_NUMBER: no fraction */
    uint8_t   bounded;           /* G_NUMBER: L, H hold */
    uint8_t   exp;               /* G_NUMBER: an exponent may follow */
    uint8_t   strict;            /* G_STRING: no \u escapes */
    uint8_t   sat;               /* some text matches */
    uint8_t   nullable;          /* the empty text matches */
    uint8_t   F, I;              /* G_NUMBER: fraction, integer digits */
    int32_t   a, n;
    int32_t   dfa;               /* index in dfas, or -1 */
    int32_t   min, max;          /* max -1: none */
    int32_t   item;
    int32_t   trie;
    int32_t   alts, n_alts;      /* the leaves it may be: alt_list */
    int32_t   mindepth;          /* frames needed to complete it */
    int32_t   bound;             /* configurations it may fork into */
    uint64_t  usable;            /* G_OBJECT: properties that can match */
    uint64_t  required;          /* G_OBJECT */
    int64_t   L, H;              /* G_NUMBER, in units of 10^-F */
} g_node;

typedef struct {
    int32_t   node;
    uint8_t   required;
} g_prop;

typedef struct {
    int32_t   child, sibling;    /* -1: none */
    int32_t   term;              /* the text that ends here, or -1 */
    uint8_t   byte;
    uint64_t  mask;              /* object keys: properties below */
} g_trie;

struct llm_grammar {
    g_node    *nodes;
    int        n_nodes, cap_nodes;
    int32_t   *kids;
    int        n_kids, cap_kids;
    g_prop    *props;
    int        n_props, cap_props;
    char      *lits;
    size_t     n_lits, cap_lits;
    g_trie    *trie;
    int        n_trie, cap_trie;
    llm_dfa   *dfas;
    int        n_dfas, cap_dfas;
    int32_t   *alt_list;
    int        n_alt_list, cap_alt_list;
    int        root;
    int        trail_ws;           /* whitespace may follow the text (JSON) */
    uint64_t   id;                 /* unique in the process (mask caches) */
    /* the cache's */
    int        refs;
    char      *key;
    size_t     key_len;
};

#define G_INF_DEPTH  1000000

int g_trie_child(const llm_grammar *g, int node, unsigned char c);
void llm_grammar_free(llm_grammar *g);

#endif /* LLM_GRAMMAR_IMPL_H */
