/*
 * gguf_tokenizer.h -- the tokenizer a GGUF file carries (tokenizer.ggml.*),
 * written out as the tokenizer.json and tokenizer_config.json that Hugging
 * Face has for the same tokenizer and loaded by the engine's tokenizer.
 */
#ifndef LLM_GGUF_TOKENIZER_H
#define LLM_GGUF_TOKENIZER_H

#include <stdint.h>

#include "gguf.h"
#include "gguf_write.h"
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

/* The tokenizer.ggml.pre name of a byte-level BPE tokenizer.json's split
 * regex and normalizer (NFC or none): "llama-bpe", "qwen2"; NULL for one
 * this reader does not know. */
const char *llm_gguf_pre_name(const char *regex, int nfc);

/* FNV-1a of a token's bytes: the tables of merges, read and written. */
uint64_t llm_gguf_hash(const char *p, size_t n);

/* The tokenizer of Hugging Face directory DIR (tokenizer.json,
 * tokenizer_config.json, chat_template.jinja) as the tokenizer.ggml.* and
 * tokenizer.chat_template keys llama.cpp's converter writes, for a model
 * of n_vocab ids (gguf_tokenizer_write.c). */
int llm_gguf_put_tokenizer(llm_gguf_writer *w, const char *dir,
    int n_vocab, char *err);

#endif /* LLM_GGUF_TOKENIZER_H */
