/*
 * tokenizer.h -- Hugging Face tokenizer.json in C: byte-level BPE with the
 * model's regex pre-tokenizer (Llama 3, Qwen) and SentencePiece-style BPE with
 * byte fallback (Mistral, Llama 2), normalizers, added/special tokens,
 * post-processor BOS rules, decoders, and streaming detokenization.
 *
 * Every function is thread-safe on a loaded tokenizer (read-only after load).
 */
#ifndef LLM_TOKENIZER_H
#define LLM_TOKENIZER_H

#include <stddef.h>
#include <stdint.h>

typedef struct llm_tokenizer llm_tokenizer;

/* Loads DIR/tokenizer.json (and DIR/tokenizer_config.json when present).
 * NULL and a one-line message naming the file and the problem in err
 * (LLM_ERR_LEN bytes) on failure. */
llm_tokenizer *llm_tokenizer_load(const char *dir, char *err);
void llm_tokenizer_free(llm_tokenizer *t);

/* Highest token id + 1 (vocabulary plus added tokens). */
int llm_tokenizer_vocab_size(const llm_tokenizer *t);

/* HF encode(text, add_special_tokens=add_special): special and added tokens
 * in the text are recognised.  Invalid UTF-8 is handled (defined output, no
 * crash).  Returns the number of ids and a malloc'd array in *ids, or -1
 * (with err filled) on failure. */
int llm_tokenizer_encode(const llm_tokenizer *t, const char *text, size_t len,
    int add_special, int32_t **ids, char *err);

/* HF decode(ids, skip_special_tokens=skip_special).  Returns a malloc'd
 * NUL-terminated string; its length in *len. */
char *llm_tokenizer_decode(const llm_tokenizer *t, const int32_t *ids,
    size_t n, int skip_special, size_t *len);

/* The token's string in the vocabulary (e.g. "Ġhello", "▁hello", "<0x0A>"),
 * or NULL for an id out of range. */
const char *llm_tokenizer_token_str(const llm_tokenizer *t, int32_t id);

/* The id of a token string (vocabulary or added token), or -1. */
int32_t llm_tokenizer_token_id(const llm_tokenizer *t, const char *str);

/* 1 if the id is an added token marked "special": true. */
int llm_tokenizer_is_special(const llm_tokenizer *t, int32_t id);

/* The BOS / EOS strings from tokenizer_config.json (bos_token, eos_token;
 * either a string or an AddedToken object), "" when absent. */
const char *llm_tokenizer_bos_str(const llm_tokenizer *t);
const char *llm_tokenizer_eos_str(const llm_tokenizer *t);


/*
 * Streaming detokenizer.  Fed one generated id at a time, it returns only
 * text that is final: never a broken UTF-8 sequence, and the concatenation of
 * everything returned (plus llm_detok_flush()) equals
 *   decode(prompt + generated)[len(decode(prompt)):]
 * which is what vLLM streams.  The prompt ids give the context (e.g. so the
 * first generated SentencePiece token keeps its leading space).
 */
/*
 * Every token's bytes in decoded text, for constrained decoding: a
 * byte-level or <0xNN> token gives its raw bytes (part of a character,
 * perhaps), a SentencePiece token its text with the space it stands for.
 * len[id] is -1 for a token that is not text: a special token, an id with
 * no string.
 */
typedef struct {
    char      *bytes;
    uint32_t  *off;
    int32_t   *len;
    int32_t    n;
} llm_token_texts;

void llm_tokenizer_token_texts(const llm_tokenizer *t, llm_token_texts *out);
void llm_token_texts_free(llm_token_texts *tt);

typedef struct llm_detok llm_detok;

llm_detok *llm_detok_create(const llm_tokenizer *t, const int32_t *prompt,
    size_t n_prompt, int skip_special);
/* Returns the newly final bytes (valid until the next call) in *len. */
const char *llm_detok_push(llm_detok *d, int32_t id, size_t *len);
/* At the end: whatever is still held back (incomplete UTF-8 becomes U+FFFD,
 * as HF decode does). */
const char *llm_detok_flush(llm_detok *d, size_t *len);
void llm_detok_free(llm_detok *d);

#endif /* LLM_TOKENIZER_H */
