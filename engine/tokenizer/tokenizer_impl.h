/*
 * tokenizer_impl.h -- the inside of llm_tokenizer, shared by the tokenizer_*.c
 * files and nobody else.
 *
 * The pipeline follows Hugging Face `tokenizers` step by step, so each step
 * can be compared with its Rust counterpart:
 *
 *   text --sanitize--> valid UTF-8 (tokenizer_utf8.c)
 *        --added tokens, raw--> segments          (tokenizer_added.c)
 *        --normalizer--> normalized segments       (tokenizer_normalize.c)
 *        --added tokens, normalized--> segments    (tokenizer_added.c)
 *        --pre-tokenizer--> pieces                 (tokenizer_pretok.c)
 *        --BPE--> ids                              (tokenizer_bpe.c)
 *        --post-processor--> ids with BOS/EOS      (tokenizer_encode.c)
 *
 *   ids --> token strings --decoder chain--> text   (tokenizer_decode.c)
 *       --> text as it becomes final, one id at a time (tokenizer_detok.c)
 *
 * After llm_tokenizer_load() returns, nothing in llm_tokenizer is written
 * again: every encode/decode call keeps its scratch state in its own context,
 * so any number of threads may share one tokenizer.
 */
#ifndef LLM_TOKENIZER_IMPL_H
#define LLM_TOKENIZER_IMPL_H

#include <stddef.h>
#include <stdint.h>

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>
#include <yajl/yajl_tree.h>

#include "tokenizer.h"
#include "util/util.h"


/* ---- growable byte buffer (tokenizer_utf8.c) ---- */

typedef struct {
    char    *p;
    size_t   len;
    size_t   cap;
} llm_tok_buf;

void llm_tok_buf_reserve(llm_tok_buf *b, size_t extra);
void llm_tok_buf_put(llm_tok_buf *b, const void *s, size_t n);
void llm_tok_buf_putc(llm_tok_buf *b, char c);
void llm_tok_buf_put_cp(llm_tok_buf *b, uint32_t cp);   /* as UTF-8 */
void llm_tok_buf_free(llm_tok_buf *b);


/* ---- UTF-8 (tokenizer_utf8.c) ---- */

/* llm_utf8_seq_len() and the other decoding primitives: util/util.h */
/* Appends s to out with every maximal ill-formed subpart replaced by U+FFFD
 * (Unicode "substitution of maximal subparts", as Python's
 * decode(errors="replace"), Rust's from_utf8_lossy and WHATWG do). */
void llm_utf8_sanitize(const char *s, size_t n, llm_tok_buf *out);

/* Unicode character classes used by the tokenizers. */
int llm_uc_is_whitespace(uint32_t cp);    /* White_Space (Rust char/\s) */
int llm_uc_is_word(uint32_t cp);          /* Rust regex \w */
int llm_uc_is_numeric(uint32_t cp);       /* Rust char::is_numeric */
int llm_uc_is_punctuation(uint32_t cp);   /* ASCII punct or category P* */
int llm_uc_is_mark(uint32_t cp);          /* category M* */


/* ---- string -> id hash map (tokenizer_utf8.c) ---- */

typedef struct {
    uint32_t   off;     /* key bytes at base + off (the owner's arena) */
    uint32_t   len;
    uint32_t   hash;
    int32_t    val;     /* -1: empty slot */
} llm_tok_slot;

typedef struct {
    llm_tok_slot  *slots;
    uint32_t       mask;
    uint32_t       count;
} llm_tok_map;

void llm_tok_map_init(llm_tok_map *m, size_t expected);
/* Inserts or overwrites; the key lives at base + off. */
void llm_tok_map_put(llm_tok_map *m, const char *base, uint32_t off,
    uint32_t len, int32_t val);
int32_t llm_tok_map_get(const llm_tok_map *m, const char *base,
    const char *key, size_t len);
void llm_tok_map_free(llm_tok_map *m);


/* ---- patterns: a literal string or a PCRE2 regex (tokenizer_pretok.c) ---- */

typedef struct {
    char         *lit;        /* literal pattern (NULL for a regex) */
    size_t        lit_len;
    pcre2_code   *re;         /* compiled with UTF|UCP, JIT where possible */
} llm_tok_pattern;

/* Parses a {"String": s} or {"Regex": r} object. */
int llm_tok_pattern_parse(llm_tok_pattern *p, yajl_val v, const char *what,
    char *err);
int llm_tok_pattern_regex(llm_tok_pattern *p, const char *re, size_t len,
    const char *what, char *err);
void llm_tok_pattern_free(llm_tok_pattern *p);

/* One span of a string split by a pattern: matched or not. */
typedef struct {
    uint32_t  start;
    uint32_t  end;
    uint8_t   match;
} llm_tok_span;

typedef struct {
    llm_tok_span  *v;
    size_t         n;
    size_t         cap;
} llm_tok_spans;

struct llm_tok_ctx;
/* Finds every non-overlapping match of p in s[0..len), HF's find_matches:
 * the string is covered by alternating unmatched and matched spans. */
int llm_tok_pattern_spans(const llm_tok_pattern *p, const char *s, size_t len,
    struct llm_tok_ctx *c, llm_tok_spans *out);


/* ---- normalizers (tokenizer_normalize.c) ---- */

enum {
    LLM_NORM_SEQUENCE,
    LLM_NORM_NFC,
    LLM_NORM_NFD,
    LLM_NORM_NFKC,
    LLM_NORM_NFKD,
    LLM_NORM_LOWERCASE,
    LLM_NORM_PREPEND,
    LLM_NORM_REPLACE,
    LLM_NORM_STRIP,
    LLM_NORM_STRIP_ACCENTS,
    LLM_NORM_BYTE_LEVEL
};

typedef struct llm_tok_norm {
    int                    type;
    char                  *str;          /* Prepend text, Replace content */
    size_t                 str_len;
    llm_tok_pattern        pat;          /* Replace */
    int                    left, right;  /* Strip */
    struct llm_tok_norm   *items;        /* Sequence */
    size_t                 n_items;
} llm_tok_norm;

/* NULL (JSON null) gives *out == NULL: no normalizer. */
int llm_tok_norm_parse(llm_tok_norm **out, yajl_val v, char *err);
void llm_tok_norm_free(llm_tok_norm *n);
/* Normalizes s[0..len) (valid UTF-8) into out (cleared first). */
int llm_tok_norm_apply(const llm_tok_norm *n, const char *s, size_t len,
    struct llm_tok_ctx *c, llm_tok_buf *out);


/* ---- pre-tokenizers (tokenizer_pretok.c) ---- */

enum {
    LLM_PRETOK_SEQUENCE,
    LLM_PRETOK_SPLIT,
    LLM_PRETOK_BYTE_LEVEL,
    LLM_PRETOK_METASPACE,
    LLM_PRETOK_DIGITS,
    LLM_PRETOK_WHITESPACE,
    LLM_PRETOK_WHITESPACE_SPLIT,
    LLM_PRETOK_PUNCTUATION
};

/* SplitDelimiterBehavior */
enum {
    LLM_SPLIT_REMOVED,
    LLM_SPLIT_ISOLATED,
    LLM_SPLIT_MERGED_PREV,
    LLM_SPLIT_MERGED_NEXT,
    LLM_SPLIT_CONTIGUOUS
};

enum { LLM_PREPEND_ALWAYS, LLM_PREPEND_FIRST, LLM_PREPEND_NEVER };

typedef struct llm_tok_pretok {
    int                      type;
    llm_tok_pattern          pat;           /* Split; ByteLevel's regex */
    int                      behavior;
    int                      invert;
    int                      add_prefix_space;  /* ByteLevel */
    int                      use_regex;         /* ByteLevel */
    uint32_t                 replacement;       /* Metaspace */
    int                      prepend_scheme;    /* Metaspace */
    int                      split;             /* Metaspace */
    int                      individual_digits; /* Digits */
    struct llm_tok_pretok   *items;             /* Sequence */
    size_t                   n_items;
} llm_tok_pretok;

int llm_tok_pretok_parse(llm_tok_pretok **out, yajl_val v, char *err);
void llm_tok_pretok_free(llm_tok_pretok *p);


/* ---- decoders (tokenizer_decode.c) ---- */

enum {
    LLM_DEC_SEQUENCE,
    LLM_DEC_BYTE_LEVEL,
    LLM_DEC_METASPACE,
    LLM_DEC_REPLACE,
    LLM_DEC_BYTE_FALLBACK,
    LLM_DEC_FUSE,
    LLM_DEC_STRIP,
    LLM_DEC_BPE
};

typedef struct llm_tok_dec {
    int                   type;
    llm_tok_pattern       pat;           /* Replace */
    char                 *str;           /* Replace content, BPE suffix */
    size_t                str_len;
    uint32_t              ch;            /* Metaspace replacement, Strip */
    int                   prepend_scheme;
    size_t                start, stop;   /* Strip */
    struct llm_tok_dec   *items;
    size_t                n_items;
} llm_tok_dec;

int llm_tok_dec_parse(llm_tok_dec **out, yajl_val v, char *err);
void llm_tok_dec_free(llm_tok_dec *d);
/* 1 if the chain contains ByteFallback (then runs of <0xNN> tokens are
 * decoded as one group, which the streaming detokenizer must respect). */
/* The byte of a "<0xNN>" byte-fallback token string, or -1. */
int llm_tok_byte_token(const char *s, size_t n);
/* Whether the decoder, or one in its sequence, is of this type. */
int llm_tok_dec_has(const llm_tok_dec *d, int type);


/* ---- added tokens (tokenizer_added.c) ---- */

typedef struct {
    int32_t   id;
    uint32_t  off, len;          /* content in t->arena */
    uint32_t  norm_off, norm_len;  /* normalized content (= content if not
                                      normalized or unchanged) */
    uint8_t   special, lstrip, rstrip, single_word, normalized;
} llm_tok_added;

/* Byte trie over added-token contents, for leftmost-longest matching. */
typedef struct {
    int32_t   child;     /* first child node, -1 */
    int32_t   sibling;   /* next sibling, -1 */
    int32_t   token;     /* index in t->added ending here, -1 */
    uint8_t   byte;
} llm_tok_trie_node;

typedef struct {
    llm_tok_trie_node  *nodes;
    size_t              n, cap;
    uint8_t             first[256];   /* bytes that start some token */
} llm_tok_trie;


/* ---- post-processor ---- */

typedef struct {
    int        is_seq;     /* 1: the input sequence ($A) */
    int32_t   *ids;        /* special token ids */
    size_t     n_ids;
} llm_tok_piece_tpl;

typedef struct {
    llm_tok_piece_tpl  *items;
    size_t              n;
} llm_tok_template;


/* ---- the tokenizer ---- */

struct llm_tokenizer {
    llm_tok_buf       arena;        /* every token string, NUL-terminated */

    /* ids: vocabulary and added tokens */
    int32_t           n_ids;        /* highest id + 1 */
    uint32_t         *str_off;      /* [n_ids] model vocab string, or */
    uint32_t         *str_len;      /* UINT32_MAX when not in the vocab */
    int32_t          *added_of;     /* [n_ids] index in added[], -1 */
    llm_tok_map       vocab;        /* model vocab: string -> id */

    /* BPE model */
    uint64_t         *merge_key;    /* open addressing: (a << 32 | b) */
    uint32_t         *merge_rank;
    int32_t          *merge_new;
    uint32_t          merge_mask;
    int               ignore_merges;
    int               byte_fallback;
    int               fuse_unk;
    int32_t           unk_id;       /* -1: none */
    char             *cont_prefix;  /* continuing_subword_prefix or NULL */
    char             *end_suffix;   /* end_of_word_suffix or NULL */
    int32_t           byte_ids[256];  /* <0xNN> tokens, -1 when absent */
    int32_t           char_ids[0x800];  /* the one-character tokens below
                                           U+0800 (all of byte-level's), -1 */

    /* added tokens */
    llm_tok_added    *added;
    size_t            n_added;
    llm_tok_map       added_map;    /* content -> index in added[] */
    llm_tok_trie      trie_raw;     /* normalized == false */
    llm_tok_trie      trie_norm;    /* normalized == true */

    llm_tok_norm     *normalizer;
    llm_tok_pretok   *pretok;
    llm_tok_dec      *decoder;
    llm_tok_template *post;         /* templates applied in order */
    size_t            n_post;

    char             *bos_str;
    char             *eos_str;
};


/* ---- per-call encode context (tokenizer_encode.c) ---- */

typedef struct {
    uint32_t  off, len;     /* bytes in ctx->text */
    int32_t   id;           /* >= 0: an added token already decided */
    uint8_t   at_start;     /* starts at offset 0 of the original text */
} llm_tok_piece;

typedef struct {
    llm_tok_piece  *v;
    size_t          n, cap;
} llm_tok_pieces;

typedef struct llm_tok_ctx {
    const llm_tokenizer  *t;
    llm_tok_buf           text;     /* append-only: all piece bytes */
    llm_tok_pieces        cur, next;
    llm_tok_spans         spans;
    llm_tok_buf           tmp, tmp2;
    pcre2_match_data     *md;
    pcre2_jit_stack      *jit_stack;
    pcre2_match_context  *mctx;
    int32_t              *ids;
    size_t                n_ids, cap_ids;
    void                 *bpe_sym;  /* BPE scratch (tokenizer_bpe.c) */
    size_t                bpe_sym_cap;
    void                 *bpe_heap;
    size_t                bpe_heap_cap;
    char                 *err;
} llm_tok_ctx;

void llm_tok_pieces_push(llm_tok_pieces *ps, uint32_t off, uint32_t len,
    int32_t id, int at_start);
void llm_tok_ids_push(llm_tok_ctx *c, int32_t id);

/* Splits every text piece of c->cur at added tokens of the trie
 * (HF AddedVocabulary::find_matches), result in c->cur. */
void llm_tok_added_split(llm_tok_ctx *c, const llm_tok_trie *trie);
int llm_tok_added_build(llm_tokenizer *t, char *err);
void llm_tok_trie_free(llm_tok_trie *tr);

/* Runs the pre-tokenizer over c->cur (text pieces only). */
int llm_tok_pretok_apply(const llm_tok_pretok *p, llm_tok_ctx *c);

/* BPE model: loads "model"; encodes one piece, appending ids to c->ids. */
struct llm_tok_bpe_src_s;
int llm_tok_bpe_load(llm_tokenizer *t, yajl_val model,
    const struct llm_tok_bpe_src_s *src, char *err);
void llm_tok_bpe_encode(llm_tok_ctx *c, const char *s, size_t len);
void llm_tok_bpe_free(llm_tokenizer *t);
void llm_tok_bpe_ctx_free(llm_tok_ctx *c);

/* The GPT-2 byte <-> char tables of the ByteLevel components. */
uint32_t llm_tok_byte_to_cp(unsigned char b);
int llm_tok_cp_to_byte(uint32_t cp);     /* -1 when cp is not in the table */

/* Regex matching with the per-call match data and JIT stack. */
int llm_tok_regex_match(llm_tok_ctx *c, const pcre2_code *re, const char *s,
    size_t len, size_t start, size_t *mstart, size_t *mend);
void llm_tok_ctx_init(llm_tok_ctx *c, const llm_tokenizer *t, char *err);
void llm_tok_ctx_free(llm_tok_ctx *c);

/* Token string for decoding: added token (normalized form) or vocab entry;
 * NULL for an unknown id. */
const char *llm_tok_decode_str(const llm_tokenizer *t, int32_t id,
    size_t *len);

/* 1 if decode with skip_special drops the id: HF compares the token's
 * decode string with the special tokens' contents, so a normalized special
 * token whose normalized form differs is kept. */
int llm_tok_skipped(const llm_tokenizer *t, int32_t id);

/* HF decode into out (cleared first); -1 on a regex error. */
int llm_tok_decode_into(const llm_tokenizer *t, const int32_t *ids, size_t n,
    int skip_special, llm_tok_buf *out);

/* model.vocab and model.merges as the parser streams them out of the JSON
 * (tokenizer_json.c), for llm_tok_bpe_load. */
typedef struct {
    uint32_t  off, len;     /* key bytes in the arena */
    int32_t   id;
} llm_tok_vocab_entry;

typedef struct llm_tok_bpe_src_s {
    llm_tok_buf          *arena;    /* where vocabulary keys are stored */
    llm_tok_vocab_entry  *vocab;
    size_t                n_vocab, vocab_cap;
    uint32_t             *merges;   /* per merge: a off, a len, b off, b len
                                       (bytes in mbuf) */
    size_t                n_merges, merge_cap;
    llm_tok_buf           mbuf;
    int                   have_vocab, have_merges;
} llm_tok_bpe_src;

/* Parses JSON into a tree for yajl_tree_free; with src, root.model.vocab
 * and root.model.merges go to src instead of the tree.  NULL and a
 * one-line message in msg on error. */
yajl_val llm_tok_json_parse(const char *text, size_t len,
    llm_tok_bpe_src *src, char *msg, size_t msg_len);
void llm_tok_bpe_src_free(llm_tok_bpe_src *s);

/* JSON helpers (tokenizer.c; the lookup is llm_json_get) */
const char *llm_tok_json_str(yajl_val obj, const char *key);
int llm_tok_json_bool(yajl_val obj, const char *key, int dflt);

#endif /* LLM_TOKENIZER_IMPL_H */
