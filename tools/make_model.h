/*
 * make_model.h -- `llm make-model`: random-weight models in Hugging Face
 * format for tests and benchmarks.
 *
 *   cmd_make_model.c        options, config.json and generation_config.json,
 *                           copying the tokenizer files
 *   make_model_tokens.c     vocabulary size, BOS and EOS ids of the tokenizer
 *   make_model_weights.c    the tensor list, the seeded generator and the
 *                           safetensors writer (single file or shards)
 */
#ifndef LLM_MAKE_MODEL_H
#define LLM_MAKE_MODEL_H

#include <stddef.h>
#include <stdint.h>

#include "llm.h"

typedef enum {
    LLM_MM_BF16 = 0,
    LLM_MM_F16,
    LLM_MM_F32
} llm_mm_dtype;

/* The shape of the model to write; every field is filled before use. */
typedef struct {
    const char   *arch;          /* "llama" | "mistral" | "qwen2" | "qwen3" */
    int           layers;
    int           hidden;
    int           heads;
    int           kv_heads;
    int           head_dim;      /* hidden / heads unless given */
    int           intermediate;
    int           vocab;         /* rows of embed_tokens and lm_head */
    llm_mm_dtype  dtype;
    uint64_t      seed;
    int           tie;           /* lm_head shares embed_tokens */
    int           qkv_bias;      /* qwen2: q/k/v projections carry a bias */
    int           qk_norm;       /* qwen3: per-head RMSNorm of q and k */
    int           shards;        /* 1 = model.safetensors */
} llm_mm_spec;

#define LLM_MM_MAX_EOS  8

/* Token facts read from tokenizer.json and tokenizer_config.json. */
typedef struct {
    int           vocab;         /* largest id + 1 */
    int           bos;           /* -1: none */
    int           eos;           /* tokenizer_config's eos_token */
    int           eos_all[LLM_MM_MAX_EOS];   /* every id that ends generation */
    int           n_eos_all;
} llm_mm_tokens;

/*
 * Reads the tokenizer facts of dir.  Generation ends, as in the real
 * generation_config.json files, on: Llama 3 <|end_of_text|> and <|eot_id|>,
 * Llama 3.1 (llama31) also <|eom_id|>; Qwen <|im_end|> and <|endoftext|>;
 * SentencePiece models </s>.  Returns 0, or -1 and a message in err.
 */
int llm_mm_read_tokens(const char *dir, int llama31, llm_mm_tokens *out,
    char *err);

/*
 * Writes the weights of spec into dir: model.safetensors, or with
 * spec->shards > 1 model-0000i-of-0000N.safetensors plus
 * model.safetensors.index.json.  Every tensor's values depend only on the
 * seed and the tensor's name, so a sharded model holds exactly the weights of
 * the single-file model with the same seed.  Returns the bytes of tensor data
 * written, or 0 and a message in err.
 */
uint64_t llm_mm_write_weights(const llm_mm_spec *spec, const char *dir,
    char *err);

const char *llm_mm_dtype_name(llm_mm_dtype d);   /* "BF16", "F16", "F32" */

#endif /* LLM_MAKE_MODEL_H */
