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

#include "llm.h"   /* llm_tokenizer and its encode/decode API */

/* Loads DIR/tokenizer.json (and DIR/tokenizer_config.json when present).
 * NULL and a one-line message naming the file and the problem in err
 * (LLM_ERR_LEN bytes) on failure. */
llm_tokenizer *llm_tokenizer_load(const char *dir, char *err);
/* The same from the two files' texts (cfg_json NULL: no config); name and
 * cname prefix messages.  GGUF files describe their tokenizer this way. */
llm_tokenizer *llm_tokenizer_from_json(const char *name, const char *json,
    size_t len, const char *cname, const char *cfg_json, size_t cfg_len,
    char *err);
void llm_tokenizer_free(llm_tokenizer *t);

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
