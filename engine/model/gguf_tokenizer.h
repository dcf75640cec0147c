/*
 * gguf_tokenizer.h -- the tokenizer a GGUF file carries (tokenizer.ggml.*),
 * written out as the tokenizer.json and tokenizer_config.json that Hugging
 * Face has for the same tokenizer and loaded by the engine's tokenizer.
 */
#ifndef LLM_GGUF_TOKENIZER_H
#define LLM_GGUF_TOKENIZER_H

#include <stdint.h>

#include "gguf.h"
#include "tokenizer/tokenizer.h"

typedef struct {
    int32_t   bos_id;             /* -1: none */
    int32_t  *eog_ids;            /* ids that end generation (malloc) */
    int       n_eog;
    char     *chat_template;      /* tokenizer.chat_template (malloc), NULL */
} llm_gguf_vocab;

/* The tokenizer of G (PATH names it in messages), and what generation
 * needs of the vocabulary. */
int llm_gguf_tokenizer(const llm_gguf *g, const char *path,
    llm_tokenizer **out, llm_gguf_vocab *v, char *err);

#endif /* LLM_GGUF_TOKENIZER_H */
