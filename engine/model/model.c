/*
 * model.c -- loads a Hugging Face model directory, or a GGUF file
 * (model_gguf.c), into an llm_model.
 *
 * Matrices stay in the mmapped safetensors or GGUF file in their stored
 * dtype (bf16, f16 or f32); norm weights and biases, which are tiny and
 * read often, are converted to f32 once.
 */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <yajl/yajl_tree.h>

#include "model.h"
#include "util/util.h"


typedef struct {
    llm_model  *m;
    size_t      f32_used;
    size_t      f32_cap;
} llm_loader;


/* A tensor of either container, its shape in Hugging Face's order
 * ([rows, cols]; GGUF's ne[] reversed). */
typedef struct {
    int          dtype;               /* an llm_dtype; -1: unsupported */
    uint32_t     ggml_type;
    int          n_dims;
    int64_t      shape[2];
    const void  *data;
} llm_src_tensor;


static int
llm_loader_find(llm_loader *ld, const char *name, llm_src_tensor *out)
{
    const llm_st_tensor    *t;
    const llm_gguf_tensor  *g;
    int                     i;

    if (ld->m->gguf) {
        g = llm_gguf_find_tensor(ld->m->gguf, name);
        if (g == NULL) {
            return 0;
        }
        out->dtype = g->dtype;
        out->ggml_type = g->ggml_type;
        out->n_dims = g->n_dims;
        out->shape[0] = g->n_dims > 1 ? g->ne[1] : g->ne[0];
        out->shape[1] = g->n_dims > 1 ? g->ne[0] : 0;
        out->data = g->data;
        return 1;
    }
    for (i = 0; i < ld->m->n_files; i++) {
        t = llm_safetensors_find(ld->m->files[i], name);
        if (t) {
            out->dtype = (int) t->dtype;
            out->ggml_type = 0;
            out->n_dims = t->n_dims;
            out->shape[0] = t->n_dims > 0 ? t->shape[0] : 0;
            out->shape[1] = t->n_dims > 1 ? t->shape[1] : 0;
            out->data = t->data;
            return 1;
        }
    }
    return 0;
}


/* The element types the kernels run: one place to widen when they grow. */
static int
llm_loader_check_dtype(llm_loader *ld, const char *name,
    const llm_src_tensor *t, char *err)
{
    char  buf[32];

    if (t->dtype < 0) {
        llm_errf(err, "%s: tensor %s has type %s, which is not supported "
                 "(supported: F32, F16, BF16, Q8_0, Q4_0, Q4_K, Q5_K, "
                 "Q6_K)", ld->m->dir, name,
                 llm_gguf_type_name(t->ggml_type, buf));
        return -1;
    }
    return 0;
}


/* A vector of n elements as f32, in the model's f32 store. */
static int
llm_loader_vector(llm_loader *ld, llm_tensor *out, const char *name,
    const llm_src_tensor *t, int n, char *err)
{
    const uint16_t  *h = t->data;
    float           *dst;
    int              i;

    if (t->n_dims != 1 || t->shape[0] != n) {
        llm_errf(err, "%s: tensor %s has the wrong shape (expected [%d])",
                 ld->m->dir, name, n);
        return -1;
    }
    if ((size_t) n > ld->f32_cap - ld->f32_used) {
        llm_errf(err, "%s: internal error: f32 store too small", ld->m->dir);
        return -1;
    }
    dst = ld->m->f32_store + ld->f32_used;
    ld->f32_used += (size_t) n;
    for (i = 0; i < n; i++) {
        switch (t->dtype) {
        case LLM_DTYPE_F32:
            memcpy(&dst[i], (const char *) t->data + 4 * (size_t) i, 4);
            break;
        case LLM_DTYPE_F16:
            dst[i] = llm_f16_to_f32(h[i]);
            break;
        case LLM_DTYPE_BF16:
            dst[i] = llm_bf16_to_f32(h[i]);
            break;
        default:
            llm_errf(err, "%s: tensor %s: a vector must be F32, F16 or BF16, "
                     "not %s", ld->m->dir, name,
                     llm_dtype_name((llm_dtype) t->dtype));
            return -1;
        }
    }
    out->data = dst;
    out->dtype = LLM_DTYPE_F32;
    out->rows = 1;
    out->cols = n;
    return 0;
}


/* Binds tensor `name` with the expected shape; cols == 0 means a vector of
 * `rows` elements, converted to f32. */
static int
llm_loader_bind(llm_loader *ld, llm_tensor *out, const char *name, int rows,
    int cols, int optional, char *err)
{
    llm_src_tensor  t;

    if (!llm_loader_find(ld, name, &t)) {
        if (optional) {
            memset(out, 0, sizeof(*out));
            return 0;
        }
        llm_errf(err, "%s: tensor %s is missing from the %s", ld->m->dir,
                 name, ld->m->gguf ? "file" : "safetensors files");
        return -1;
    }
    if (llm_loader_check_dtype(ld, name, &t, err) != 0) {
        return -1;
    }
    if (cols == 0) {
        return llm_loader_vector(ld, out, name, &t, rows, err);
    }
    if (t.n_dims != 2 || t.shape[0] != rows || t.shape[1] != cols) {
        llm_errf(err, "%s: tensor %s has the wrong shape [%lld, %lld] "
                 "(expected [%d, %d] from %s)", ld->m->dir, name,
                 (long long) t.shape[0], (long long) t.shape[1], rows, cols,
                 ld->m->gguf ? "the metadata" : "config.json");
        return -1;
    }
    out->data = t.data;
    out->dtype = (llm_dtype) t.dtype;
    out->rows = rows;
    out->cols = cols;
    return 0;
}


static int
llm_model_open_files(llm_model *m, char *err)
{
    char       path[PATH_MAX], ebuf[256];
    char      *text, **names = NULL;
    yajl_val   root, map;
    size_t     i, j, n = 0;
    int        rc = -1;
    const char *wm[] = { "weight_map", NULL };

    llm_path_join(path, m->dir, "model.safetensors");
    if (llm_file_exists(path)) {
        m->files = llm_xcalloc(1, sizeof(llm_safetensors *));
        m->files[0] = llm_safetensors_open(path, err);
        if (m->files[0] == NULL) {
            return -1;
        }
        m->n_files = 1;
        return 0;
    }
    llm_path_join(path, m->dir, "model.safetensors.index.json");
    if (!llm_file_exists(path)) {
        llm_errf(err, "%s: no model.safetensors or "
                 "model.safetensors.index.json", m->dir);
        return -1;
    }
    text = llm_read_file(path, NULL, err);
    if (text == NULL) {
        return -1;
    }
    root = yajl_tree_parse(text, ebuf, sizeof(ebuf));
    free(text);
    map = yajl_tree_get(root, wm, yajl_t_object);
    if (map == NULL) {
        llm_errf(err, "%s: no \"weight_map\" object", path);
        goto done;
    }
    /* the distinct shard names, in order of first appearance */
    names = llm_xcalloc(YAJL_GET_OBJECT(map)->len + 1, sizeof(char *));
    for (i = 0; i < YAJL_GET_OBJECT(map)->len; i++) {
        yajl_val  v = YAJL_GET_OBJECT(map)->values[i];

        if (!YAJL_IS_STRING(v) || strchr(v->u.string, '/')) {
            llm_errf(err, "%s: weight_map values must be file names", path);
            goto done;
        }
        for (j = 0; j < n; j++) {
            if (strcmp(names[j], v->u.string) == 0) {
                break;
            }
        }
        if (j == n) {
            names[n++] = v->u.string;
        }
    }
    m->files = llm_xcalloc(n + 1, sizeof(llm_safetensors *));
    for (j = 0; j < n; j++) {
        llm_path_join(path, m->dir, names[j]);
        m->files[j] = llm_safetensors_open(path, err);
        if (m->files[j] == NULL) {
            goto done;
        }
        m->n_files++;
    }
    rc = 0;
done:
    free(names);
    yajl_tree_free(root);
    return rc;
}


/* Each layer's tensors under both containers' names, with their shapes, in
 * the order llama.cpp's converter writes them (llm_model_layer_tensors()). */
enum { LLM_D_HIDDEN, LLM_D_Q, LLM_D_KV, LLM_D_HEAD, LLM_D_FFN, LLM_D_VEC };
enum { LLM_T_ALWAYS, LLM_T_BIAS, LLM_T_QK_NORM };

static const struct {
    size_t       off;
    const char  *hf;
    const char  *gguf;
    int          rows, cols, when;
} llm_layer_tensors[] = {
#define L(f) offsetof(llm_layer_weights, f)
    { L(attn_norm), "model.layers.%d.input_layernorm.weight",
      "blk.%d.attn_norm.weight", LLM_D_HIDDEN, LLM_D_VEC, LLM_T_ALWAYS },
    { L(wq), "model.layers.%d.self_attn.q_proj.weight",
      "blk.%d.attn_q.weight", LLM_D_Q, LLM_D_HIDDEN, LLM_T_ALWAYS },
    { L(wk), "model.layers.%d.self_attn.k_proj.weight",
      "blk.%d.attn_k.weight", LLM_D_KV, LLM_D_HIDDEN, LLM_T_ALWAYS },
    { L(wv), "model.layers.%d.self_attn.v_proj.weight",
      "blk.%d.attn_v.weight", LLM_D_KV, LLM_D_HIDDEN, LLM_T_ALWAYS },
    { L(bq), "model.layers.%d.self_attn.q_proj.bias",
      "blk.%d.attn_q.bias", LLM_D_Q, LLM_D_VEC, LLM_T_BIAS },
    { L(bk), "model.layers.%d.self_attn.k_proj.bias",
      "blk.%d.attn_k.bias", LLM_D_KV, LLM_D_VEC, LLM_T_BIAS },
    { L(bv), "model.layers.%d.self_attn.v_proj.bias",
      "blk.%d.attn_v.bias", LLM_D_KV, LLM_D_VEC, LLM_T_BIAS },
    { L(q_norm), "model.layers.%d.self_attn.q_norm.weight",
      "blk.%d.attn_q_norm.weight", LLM_D_HEAD, LLM_D_VEC, LLM_T_QK_NORM },
    { L(k_norm), "model.layers.%d.self_attn.k_norm.weight",
      "blk.%d.attn_k_norm.weight", LLM_D_HEAD, LLM_D_VEC, LLM_T_QK_NORM },
    { L(wo), "model.layers.%d.self_attn.o_proj.weight",
      "blk.%d.attn_output.weight", LLM_D_HIDDEN, LLM_D_Q, LLM_T_ALWAYS },
    { L(ffn_norm), "model.layers.%d.post_attention_layernorm.weight",
      "blk.%d.ffn_norm.weight", LLM_D_HIDDEN, LLM_D_VEC, LLM_T_ALWAYS },
    { L(w_gate), "model.layers.%d.mlp.gate_proj.weight",
      "blk.%d.ffn_gate.weight", LLM_D_FFN, LLM_D_HIDDEN, LLM_T_ALWAYS },
    { L(w_up), "model.layers.%d.mlp.up_proj.weight",
      "blk.%d.ffn_up.weight", LLM_D_FFN, LLM_D_HIDDEN, LLM_T_ALWAYS },
    { L(w_down), "model.layers.%d.mlp.down_proj.weight",
      "blk.%d.ffn_down.weight", LLM_D_HIDDEN, LLM_D_FFN, LLM_T_ALWAYS },
#undef L
};


static int
llm_model_dim(const llm_config *c, int d)
{
    switch (d) {
    case LLM_D_HIDDEN: return c->hidden;
    case LLM_D_Q:      return c->n_heads * c->head_dim;
    case LLM_D_KV:     return c->n_kv_heads * c->head_dim;
    case LLM_D_HEAD:   return c->head_dim;
    case LLM_D_FFN:    return c->intermediate;
    default:           return 0;
    }
}


static int
llm_layer_tensor_present(const llm_config *c, int k)
{
    int  when = llm_layer_tensors[k].when;

    return !(when == LLM_T_BIAS && !c->qkv_bias)
           && !(when == LLM_T_QK_NORM && !c->qk_norm);
}


int
llm_model_layer_tensors(const llm_model *m, int layer, llm_named_tensor *out)
{
    const llm_layer_weights  *l = &m->weights.layers[layer];
    size_t                    k;
    int                       n = 0;

    for (k = 0; k < sizeof(llm_layer_tensors) / sizeof(llm_layer_tensors[0]);
         k++)
    {
        if (llm_layer_tensor_present(&m->config, (int) k)) {
            snprintf(out[n].name, sizeof(out[n].name),
                     llm_layer_tensors[k].gguf, layer);
            out[n].t = (const llm_tensor *) ((const char *) l
                                             + llm_layer_tensors[k].off);
            n++;
        }
    }
    return n;
}


static int
llm_model_bind_layer(llm_loader *ld, int i, char *err)
{
    const llm_config   *c = &ld->m->config;
    llm_layer_weights  *l = &ld->m->weights.layers[i];
    llm_tensor         *t;
    char                name[128];
    size_t              k;

    for (k = 0; k < sizeof(llm_layer_tensors) / sizeof(llm_layer_tensors[0]);
         k++)
    {
        if (!llm_layer_tensor_present(c, (int) k)) {
            continue;
        }
        t = (llm_tensor *) ((char *) l + llm_layer_tensors[k].off);
        snprintf(name, sizeof(name), ld->m->gguf ? llm_layer_tensors[k].gguf
                                                 : llm_layer_tensors[k].hf, i);
        if (llm_loader_bind(ld, t, name,
                            llm_model_dim(c, llm_layer_tensors[k].rows),
                            llm_model_dim(c, llm_layer_tensors[k].cols), 0,
                            err) != 0)
        {
            return -1;
        }
    }
    /* GGUF "llama" rotates adjacent pairs; see llm_gguf_unpermute() */
    if (ld->m->gguf && c->arch != LLM_ARCH_QWEN2 && c->arch != LLM_ARCH_QWEN3)
    {
        llm_gguf_unpermute(ld->m, &l->wq, c->n_heads);
        llm_gguf_unpermute(ld->m, &l->wk, c->n_kv_heads);
    }
    return 0;
}


static int
llm_model_bind(llm_model *m, char *err)
{
    llm_config  *c = &m->config;
    llm_loader   ld = { m, 0, 0 };
    int          i, gguf = m->gguf != NULL;
    int          q = c->n_heads * c->head_dim;
    int          kv = c->n_kv_heads * c->head_dim;

    /* norms + biases + q/k norms, all as f32 */
    ld.f32_cap = (size_t) c->hidden
                 + (size_t) c->n_layers * (2 * c->hidden + q + 2 * kv
                                           + 2 * c->head_dim);
    m->f32_store = llm_xmalloc(ld.f32_cap * sizeof(float));
    m->weights.layers = llm_xcalloc(c->n_layers, sizeof(llm_layer_weights));
    for (i = 0; i < c->n_layers; i++) {
        if (llm_model_bind_layer(&ld, i, err) != 0) {
            return -1;
        }
    }
    if (llm_loader_bind(&ld, &m->weights.embed,
                        gguf ? "token_embd.weight"
                             : "model.embed_tokens.weight",
                        c->vocab_size, c->hidden, 0, err) != 0
        || llm_loader_bind(&ld, &m->weights.final_norm,
                           gguf ? "output_norm.weight" : "model.norm.weight",
                           c->hidden, 0, 0, err) != 0)
    {
        return -1;
    }
    if (c->tie_embeddings) {
        m->weights.lm_head = m->weights.embed;
    } else if (llm_loader_bind(&ld, &m->weights.lm_head,
                               gguf ? "output.weight" : "lm_head.weight",
                               c->vocab_size, c->hidden, 0, err) != 0)
    {
        return -1;
    }
    return 0;
}


/* a directory's files, or the GGUF file's metadata */
static int
llm_model_open(llm_model *m, char *err)
{
    if (llm_model_path_is_gguf(m->dir)) {
        return llm_model_gguf_open(m, err);
    }
    if (llm_config_load(m->dir, &m->config, err) != 0
        || llm_generation_config_load(m->dir, &m->gen, err) != 0
        || llm_model_open_files(m, err) != 0)
    {
        return -1;
    }
    return 0;
}


static int
llm_model_read_tokenizer(llm_model *m, char *err)
{
    if (m->gguf) {
        return llm_model_gguf_tokenizer(m, err);
    }
    m->tokenizer = llm_tokenizer_load(m->dir, err);
    if (m->tokenizer == NULL) {
        return -1;
    }
    err[0] = '\0';
    m->chat_template = llm_chat_template_load(m->dir, err);
    return m->chat_template == NULL && err[0] != '\0' ? -1 : 0;
}


llm_model *
llm_model_load(const char *dir, char *err)
{
    llm_model  *m;
    int         vocab;

    m = llm_xcalloc(1, sizeof(*m));
    m->dir = llm_xstrdup(dir);
    if (llm_model_open(m, err) != 0
        || llm_model_bind(m, err) != 0
        || llm_model_read_tokenizer(m, err) != 0)
    {
        goto fail;
    }
    vocab = llm_tokenizer_vocab_size(m->tokenizer);
    if (vocab > m->config.vocab_size) {
        llm_errf(err, "%s: the tokenizer has %d tokens but the model's "
                 "vocab_size is %d", dir, vocab, m->config.vocab_size);
        goto fail;
    }
    return m;

fail:
    llm_model_free(m);
    return NULL;
}


/* the router's model: what templates and tokenizes a prompt, nothing of
 * the network (a directory's config.json is not read, no weights mapped;
 * a GGUF file's metadata is) */
llm_model *
llm_model_load_tokenizer(const char *path, char *err)
{
    llm_model  *m;

    m = llm_xcalloc(1, sizeof(*m));
    m->dir = llm_xstrdup(path);
    if ((llm_model_path_is_gguf(path) && llm_model_gguf_open(m, err) != 0)
        || llm_model_read_tokenizer(m, err) != 0)
    {
        llm_model_free(m);
        return NULL;
    }
    if (m->config.vocab_size == 0) {
        m->config.vocab_size = llm_tokenizer_vocab_size(m->tokenizer);
    }
    return m;
}


void
llm_model_free(llm_model *m)
{
    int  i;

    if (m == NULL) {
        return;
    }
    for (i = 0; i < m->n_files; i++) {
        llm_safetensors_close(m->files[i]);
    }
    free(m->files);
    llm_gguf_close(m->gguf);
    for (i = 0; i < m->n_owned; i++) {
        free(m->owned[i]);
    }
    free(m->owned);
    free(m->weights.layers);
    free(m->f32_store);
    free(m->quant_store);
    free(m->gen.eos_ids);
    if (m->tokenizer) {
        llm_tokenizer_free(m->tokenizer);
    }
    if (m->chat_template) {
        llm_chat_template_free(m->chat_template);
    }
    free(m->dir);
    free(m);
}


const struct llm_tokenizer *
llm_model_tokenizer(const llm_model *m)
{
    return m->tokenizer;
}


const struct llm_chat_template *
llm_model_chat_template(const llm_model *m)
{
    return m->chat_template;
}


int
llm_model_vocab_size(const llm_model *m)
{
    return m->config.vocab_size;
}


int
llm_model_is_eos(const llm_model *m, int32_t id)
{
    for (int i = 0; i < m->gen.n_eos; i++) {
        if (m->gen.eos_ids[i] == id)
            return 1;
    }
    return 0;
}


const char *
llm_model_dir(const llm_model *m)
{
    return m->dir;
}
