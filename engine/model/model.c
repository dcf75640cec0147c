/*
 * model.c -- loads a Hugging Face model directory into an llm_model.
 *
 * Matrices stay in the mmapped safetensors in their stored dtype (bf16, f16
 * or f32); norm weights and biases, which are tiny and read often, are
 * converted to f32 once.
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


static const llm_st_tensor *
llm_loader_find(llm_loader *ld, const char *name)
{
    const llm_st_tensor  *t;
    int                   i;

    for (i = 0; i < ld->m->n_files; i++) {
        t = llm_safetensors_find(ld->m->files[i], name);
        if (t) {
            return t;
        }
    }
    return NULL;
}


/* Binds tensor `name` with the expected shape; cols == 0 means a vector of
 * `rows` elements, converted to f32. */
static int
llm_loader_bind(llm_loader *ld, llm_tensor *out, const char *name, int rows,
    int cols, int optional, char *err)
{
    const llm_st_tensor  *t = llm_loader_find(ld, name);
    size_t                i, n;
    float                *dst;

    if (t == NULL) {
        if (optional) {
            memset(out, 0, sizeof(*out));
            return 0;
        }
        llm_errf(err, "%s: tensor %s is missing from the safetensors files",
                 ld->m->dir, name);
        return -1;
    }
    if (cols == 0) {
        if (t->n_dims != 1 || t->shape[0] != rows) {
            llm_errf(err, "%s: tensor %s has the wrong shape (expected [%d])",
                     ld->m->dir, name, rows);
            return -1;
        }
        n = (size_t) rows;
        if (ld->f32_used + n > ld->f32_cap) {
            llm_errf(err, "%s: internal error: f32 store too small",
                     ld->m->dir);
            return -1;
        }
        dst = ld->m->f32_store + ld->f32_used;
        ld->f32_used += n;
        for (i = 0; i < n; i++) {
            const uint16_t  *h = t->data;

            switch (t->dtype) {
            case LLM_DTYPE_F32:
                memcpy(&dst[i], (const char *) t->data + 4 * i, 4);
                break;
            case LLM_DTYPE_F16:
                dst[i] = llm_f16_to_f32(h[i]);
                break;
            case LLM_DTYPE_BF16:
                dst[i] = llm_bf16_to_f32(h[i]);
                break;
            default:            /* safetensors holds float types only */
                abort();
            }
        }
        out->data = dst;
        out->dtype = LLM_DTYPE_F32;
        out->rows = 1;
        out->cols = rows;
        return 0;
    }
    if (t->n_dims != 2 || t->shape[0] != rows || t->shape[1] != cols) {
        llm_errf(err, "%s: tensor %s has the wrong shape [%lld, %lld] "
                 "(expected [%d, %d] from config.json)", ld->m->dir, name,
                 (long long) t->shape[0],
                 (long long) (t->n_dims > 1 ? t->shape[1] : 0), rows, cols);
        return -1;
    }
    out->data = t->data;
    out->dtype = t->dtype;
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


static int
llm_model_bind(llm_model *m, char *err)
{
    llm_config         *c = &m->config;
    llm_loader          ld = { m, 0, 0 };
    llm_layer_weights  *l;
    char                name[128];
    int                 i, q = c->n_heads * c->head_dim;
    int                 kv = c->n_kv_heads * c->head_dim;

    /* norms + biases + q/k norms, all as f32 */
    ld.f32_cap = (size_t) c->hidden
                 + (size_t) c->n_layers * (2 * c->hidden + q + 2 * kv
                                           + 2 * c->head_dim);
    m->f32_store = llm_xmalloc(ld.f32_cap * sizeof(float));
    m->weights.layers = llm_xcalloc(c->n_layers, sizeof(llm_layer_weights));

#define BIND(field, fmt, rows, cols, opt)                                     \
    snprintf(name, sizeof(name), fmt, i);                                     \
    if (llm_loader_bind(&ld, field, name, rows, cols, opt, err) != 0) {       \
        return -1;                                                            \
    }

    for (i = 0; i < c->n_layers; i++) {
        l = &m->weights.layers[i];
        BIND(&l->attn_norm, "model.layers.%d.input_layernorm.weight",
             c->hidden, 0, 0);
        BIND(&l->wq, "model.layers.%d.self_attn.q_proj.weight", q, c->hidden,
             0);
        BIND(&l->wk, "model.layers.%d.self_attn.k_proj.weight", kv,
             c->hidden, 0);
        BIND(&l->wv, "model.layers.%d.self_attn.v_proj.weight", kv,
             c->hidden, 0);
        BIND(&l->wo, "model.layers.%d.self_attn.o_proj.weight", c->hidden, q,
             0);
        if (c->qkv_bias) {
            BIND(&l->bq, "model.layers.%d.self_attn.q_proj.bias", q, 0, 0);
            BIND(&l->bk, "model.layers.%d.self_attn.k_proj.bias", kv, 0, 0);
            BIND(&l->bv, "model.layers.%d.self_attn.v_proj.bias", kv, 0, 0);
        }
        if (c->qk_norm) {
            BIND(&l->q_norm, "model.layers.%d.self_attn.q_norm.weight",
                 c->head_dim, 0, 0);
            BIND(&l->k_norm, "model.layers.%d.self_attn.k_norm.weight",
                 c->head_dim, 0, 0);
        }
        BIND(&l->ffn_norm, "model.layers.%d.post_attention_layernorm.weight",
             c->hidden, 0, 0);
        BIND(&l->w_gate, "model.layers.%d.mlp.gate_proj.weight",
             c->intermediate, c->hidden, 0);
        BIND(&l->w_up, "model.layers.%d.mlp.up_proj.weight",
             c->intermediate, c->hidden, 0);
        BIND(&l->w_down, "model.layers.%d.mlp.down_proj.weight", c->hidden,
             c->intermediate, 0);
    }
#undef BIND

    if (llm_loader_bind(&ld, &m->weights.embed, "model.embed_tokens.weight",
                        c->vocab_size, c->hidden, 0, err) != 0
        || llm_loader_bind(&ld, &m->weights.final_norm, "model.norm.weight",
                           c->hidden, 0, 0, err) != 0)
    {
        return -1;
    }
    if (c->tie_embeddings) {
        m->weights.lm_head = m->weights.embed;
    } else if (llm_loader_bind(&ld, &m->weights.lm_head, "lm_head.weight",
                               c->vocab_size, c->hidden, 0, err) != 0)
    {
        return -1;
    }
    return 0;
}


llm_model *
llm_model_load(const char *dir, char *err)
{
    llm_model  *m;
    int         vocab;

    m = llm_xcalloc(1, sizeof(*m));
    m->dir = llm_xstrdup(dir);
    if (llm_config_load(dir, &m->config, err) != 0
        || llm_generation_config_load(dir, &m->gen, err) != 0
        || llm_model_open_files(m, err) != 0
        || llm_model_bind(m, err) != 0)
    {
        goto fail;
    }
    m->tokenizer = llm_tokenizer_load(dir, err);
    if (m->tokenizer == NULL) {
        goto fail;
    }
    vocab = llm_tokenizer_vocab_size(m->tokenizer);
    if (vocab > m->config.vocab_size) {
        llm_errf(err, "%s: the tokenizer has %d tokens but config.json's "
                 "vocab_size is %d", dir, vocab, m->config.vocab_size);
        goto fail;
    }
    err[0] = '\0';
    m->chat_template = llm_chat_template_load(dir, err);
    if (m->chat_template == NULL && err[0] != '\0') {
        goto fail;
    }
    return m;

fail:
    llm_model_free(m);
    return NULL;
}


/* the router's model: what templates and tokenizes a prompt, nothing of
 * the network (config.json zero, no files mapped) */
llm_model *
llm_model_load_tokenizer(const char *dir, char *err)
{
    llm_model  *m;

    m = llm_xcalloc(1, sizeof(*m));
    m->dir = llm_xstrdup(dir);
    m->tokenizer = llm_tokenizer_load(dir, err);
    if (m->tokenizer == NULL) {
        goto fail;
    }
    m->config.vocab_size = llm_tokenizer_vocab_size(m->tokenizer);
    err[0] = '\0';
    m->chat_template = llm_chat_template_load(dir, err);
    if (m->chat_template == NULL && err[0] != '\0') {
        goto fail;
    }
    return m;

fail:
    llm_model_free(m);
    return NULL;
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
    free(m->weights.layers);
    free(m->f32_store);
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
