/*
 * model.h -- a loaded Hugging Face model directory: its configuration, its
 * weights (mmapped safetensors, kept in their stored dtype), its tokenizer
 * and chat template, and generation defaults.  Read-only after load and
 * shared by every request and thread.
 */
#ifndef LLM_MODEL_H
#define LLM_MODEL_H

#include <stdint.h>

#include "llm.h"
#include "gguf.h"
#include "safetensors.h"
#include "tokenizer/tokenizer.h"
#include "jinja/chat_template.h"

typedef enum {
    LLM_ARCH_LLAMA = 0,           /* LlamaForCausalLM (Llama 2, 3, 3.1+) */
    LLM_ARCH_MISTRAL,             /* MistralForCausalLM */
    LLM_ARCH_QWEN2,               /* Qwen2ForCausalLM: q/k/v bias */
    LLM_ARCH_QWEN3                /* Qwen3ForCausalLM: per-head q/k RMSNorm */
} llm_arch;

typedef struct {
    llm_arch   arch;
    int        vocab_size;
    int        hidden;            /* hidden_size */
    int        n_layers;
    int        n_heads;
    int        n_kv_heads;        /* GQA: n_heads % n_kv_heads == 0 */
    int        head_dim;
    int        intermediate;      /* MLP width */
    int        max_position_embeddings;
    float      rms_eps;
    float      rope_theta;
    int        rope_llama3;       /* rope_scaling.rope_type == "llama3" */
    float      rope_factor;
    float      rope_low_freq_factor;
    float      rope_high_freq_factor;
    int        rope_original_max_pos;
    const float *rope_freq_factors; /* GGUF rope_freqs (head_dim / 2):
                                     * inv_freq[i] /= it, how llama.cpp
                                     * stores llama3 scaling; NULL: none */
    int        sliding_window;    /* 0 = none */
    int        tie_embeddings;
    int        qkv_bias;          /* Qwen2 */
    int        qk_norm;           /* Qwen3 */
} llm_config;

/* A weight matrix [rows][cols] in its stored dtype (HF layout: [out][in]),
 * or a vector (rows == 1).  Vectors are converted to f32 at load.  packed:
 * 1 in the CPU backend's copies whose blocks are interleaved for its
 * kernels (cpu/qpack.h), never in a model's own tensors. */
typedef struct {
    const void *data;
    llm_dtype   dtype;
    int         rows;
    int         cols;
    int         packed;
} llm_tensor;

typedef struct {
    llm_tensor  attn_norm;        /* (hidden) f32 */
    llm_tensor  wq;               /* (n_heads * head_dim, hidden) */
    llm_tensor  wk;               /* (n_kv_heads * head_dim, hidden) */
    llm_tensor  wv;               /* (n_kv_heads * head_dim, hidden) */
    llm_tensor  bq, bk, bv;       /* Qwen2 biases, f32; data NULL otherwise */
    llm_tensor  q_norm, k_norm;   /* Qwen3 (head_dim) f32; data NULL otherwise */
    llm_tensor  wo;               /* (hidden, n_heads * head_dim) */
    llm_tensor  ffn_norm;         /* (hidden) f32 */
    llm_tensor  w_gate;           /* (intermediate, hidden) */
    llm_tensor  w_up;             /* (intermediate, hidden) */
    llm_tensor  w_down;           /* (hidden, intermediate) */
} llm_layer_weights;

typedef struct {
    llm_tensor         embed;     /* (vocab, hidden) */
    llm_layer_weights *layers;    /* n_layers */
    llm_tensor         final_norm;/* (hidden) f32 */
    llm_tensor         lm_head;   /* (vocab, hidden); == embed when tied */
} llm_weights;

/* Sampling defaults from generation_config.json. */
typedef struct {
    int32_t   *eos_ids;           /* generation_config eos_token_id (int or list) */
    int        n_eos;
    int32_t    bos_id;            /* -1 if none */
    int        has_temperature, has_top_p, has_top_k, has_min_p,
               has_repetition_penalty;
    double     temperature, top_p, min_p, repetition_penalty;
    int        top_k;
} llm_generation_config;

struct llm_model {
    char                  *dir;
    llm_config             config;
    llm_weights            weights;
    llm_generation_config  gen;
    llm_tokenizer         *tokenizer;
    llm_chat_template     *chat_template;    /* NULL: none */
    llm_safetensors      **files;
    int                    n_files;
    llm_gguf              *gguf;             /* a GGUF file instead */
    float                 *f32_store;        /* converted vectors */
    void                 **owned;            /* GGUF: un-permuted q/k, ... */
    int                    n_owned;
    char                  *quant_store;      /* llm_model_quantize()'s
                                                matrices; NULL: none */
};

/* Loads DIR: config.json, model.safetensors or model.safetensors.index.json
 * (sharded), tokenizer.json, tokenizer_config.json, generation_config.json;
 * or a GGUF file (a path ending in .gguf, model_gguf.c).
 * One clear message naming the file and the problem on failure. */
llm_model *llm_model_load(const char *dir, char *err);
void llm_model_free(llm_model *m);

/* Quantize on load (model_quantize.c): weights "q8_0", "q4_0" or "q4_k"
 * rewrites the layers' matrices and an untied lm_head in that block
 * format with `threads` threads; NULL or "" keeps them as stored. */
int llm_model_quantize(llm_model *m, const char *weights, int threads,
    char *err);
/* the block format of the model's first quantized matrix, or
 * LLM_DTYPE_COUNT when every matrix is f32, f16 or bf16 */
llm_dtype llm_model_block_format(const llm_model *m);

/* A layer's tensors as a GGUF file names them (blk.L.attn_q.weight ...),
 * those the model has, in the order llama.cpp's converter writes them: n
 * into out (room for LLM_LAYER_TENSORS). */
#define LLM_LAYER_TENSORS 14
typedef struct {
    char               name[64];
    const llm_tensor  *t;
} llm_named_tensor;
int llm_model_layer_tensors(const llm_model *m, int layer,
    llm_named_tensor *out);

/* Writes the model as a GGUF file at path (model_gguf_write.c): what
 * llama.cpp's converter writes, so that llama.cpp and this engine load it.
 * Each matrix in its dtype in m (the block format after
 * llm_model_quantize()), or, with ftype F32, F16 or BF16, every matrix
 * converted to it; vectors F32.  ftype LLM_DTYPE_COUNT: none. */
int llm_model_write_gguf(const llm_model *m, const char *path,
    llm_dtype ftype, char *err);

/* config.json -> llm_config (model_config.c). */
int llm_config_load(const char *dir, llm_config *c, char *err);
/* the head layout the kernels support; path names the source */
int llm_config_check(const llm_config *c, const char *path, char *err);
/* generation_config.json (optional) -> defaults. */
int llm_generation_config_load(const char *dir, llm_generation_config *g,
    char *err);

/* model_gguf.c: a path ending in ".gguf" */
int llm_model_path_is_gguf(const char *path);
/* opens m->dir as GGUF: m->gguf, m->config, m->gen */
int llm_model_gguf_open(llm_model *m, char *err);
/* the tokenizer and chat template embedded in the file */
int llm_model_gguf_tokenizer(llm_model *m, char *err);
/* The tokenizer (tok not NULL) and the chat template (tmpl not NULL) of a
 * model directory or GGUF file, without its weights; *tmpl NULL with err ""
 * when it has none.  For `llm tokenize` and `llm template`. */
int llm_model_text_load(const char *path, llm_tokenizer **tok,
    llm_chat_template **tmpl, char *err);
/* Undoes the converter's row permutation of a "llama" GGUF's q/k weights:
 * they rotate adjacent pairs (x[2i], x[2i+1]), Hugging Face rotate_half
 * pairs (x[i], x[i + d/2]).  The rows are copied (m->owned). */
void llm_gguf_unpermute(llm_model *m, llm_tensor *t, int n_head);

#endif /* LLM_MODEL_H */
