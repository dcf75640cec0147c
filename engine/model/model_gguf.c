/*
 * model_gguf.c -- a GGUF file as a model: the configuration from the
 * `<arch>.*` keys, generation defaults from `tokenizer.ggml.*` and
 * `general.sampling.*`, and the q/k rows of "llama" files put back in
 * Hugging Face's order.  The tensors are bound by model.c, the tokenizer
 * described by gguf_tokenizer.c.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model.h"
#include "gguf_tokenizer.h"
#include "util/util.h"


/* memory freed with the model */
static void
llm_model_own(llm_model *m, void *p)
{
    m->owned = llm_xrealloc(m->owned, (size_t) (m->n_owned + 1)
                                      * sizeof(void *));
    m->owned[m->n_owned++] = p;
}


int
llm_model_path_is_gguf(const char *path)
{
    size_t  n = strlen(path);

    return n > 5 && strcmp(path + n - 5, ".gguf") == 0;
}


/* <arch>.<key> as an int: 1 found, 0 absent, -1 bad (message in err) */
static int
llm_gguf_arch_int(llm_model *m, const char *arch, const char *key, int *out,
    int required, char *err)
{
    char     name[128], sub[LLM_ERR_LEN];
    int64_t  v;
    int      rc;

    snprintf(name, sizeof(name), "%s.%s", arch, key);
    rc = llm_gguf_get_int(m->gguf, name, &v, sub);
    if (rc < 0) {
        llm_errf(err, "%s: %s", m->dir, sub);
        return -1;
    }
    if (rc == 0) {
        if (required) {
            llm_errf(err, "%s: the metadata has no %s", m->dir, name);
            return -1;
        }
        return 0;
    }
    if (v <= 0 || v > 1 << 30) {
        llm_errf(err, "%s: %s is %lld (must be 1 to 2^30)", m->dir, name,
                 (long long) v);
        return -1;
    }
    *out = (int) v;
    return 1;
}


static int
llm_gguf_arch_float(llm_model *m, const char *arch, const char *key,
    float *out, char *err)
{
    char    name[128], sub[LLM_ERR_LEN];
    double  v;
    int     rc;

    snprintf(name, sizeof(name), "%s.%s", arch, key);
    rc = llm_gguf_get_float(m->gguf, name, &v, sub);
    if (rc < 0) {
        llm_errf(err, "%s: %s", m->dir, sub);
        return -1;
    }
    if (rc == 1) {
        if (!(v > 0)) {
            llm_errf(err, "%s: %s must be positive", m->dir, name);
            return -1;
        }
        *out = (float) v;
    }
    return 0;
}


static int
llm_gguf_arch(llm_model *m, char *arch, size_t size, char *err)
{
    static const struct { const char *name; llm_arch arch; } known[] = {
        { "llama", LLM_ARCH_LLAMA },
        { "qwen2", LLM_ARCH_QWEN2 },
        { "qwen3", LLM_ARCH_QWEN3 },
    };
    char    *s = NULL, sub[LLM_ERR_LEN];
    size_t   i;

    if (llm_gguf_get_str(m->gguf, "general.architecture", &s, sub) != 1) {
        llm_errf(err, "%s: general.architecture is missing or not a string",
                 m->dir);
        free(s);
        return -1;
    }
    for (i = 0; i < sizeof(known) / sizeof(known[0]); i++) {
        if (strcmp(s, known[i].name) == 0) {
            m->config.arch = known[i].arch;
            snprintf(arch, size, "%s", s);
            free(s);
            return 0;
        }
    }
    llm_errf(err, "%s: unsupported architecture \"%.64s\" (supported: llama "
             "(also Mistral), qwen2, qwen3)", m->dir, s);
    free(s);
    return -1;
}


/* Linear, YaRN and the like are keys; llama3's scaling is the tensor
 * rope_freqs.weight (bound by the caller). */
static int
llm_gguf_rope_scaling(llm_model *m, const char *arch, char *err)
{
    char   name[128], sub[LLM_ERR_LEN];
    char  *type = NULL;
    int    rc;

    snprintf(name, sizeof(name), "%s.rope.scaling.type", arch);
    rc = llm_gguf_get_str(m->gguf, name, &type, sub);
    if (rc < 0) {
        llm_errf(err, "%s: %s", m->dir, sub);
        return -1;
    }
    if (rc == 1 && strcmp(type, "none") != 0) {
        llm_errf(err, "%s: %s \"%.32s\" is not supported (supported: none, "
                 "and llama3's rope_freqs)", m->dir, name, type);
        free(type);
        return -1;
    }
    free(type);
    return 0;
}


static int
llm_gguf_config(llm_model *m, char *err)
{
    llm_config             *c = &m->config;
    const llm_gguf_tensor  *embd;
    char                    arch[32];
    int                     v = 0;

    memset(c, 0, sizeof(*c));
    if (llm_gguf_arch(m, arch, sizeof(arch), err) != 0
        || llm_gguf_arch_int(m, arch, "embedding_length", &c->hidden, 1,
                             err) != 1
        || llm_gguf_arch_int(m, arch, "block_count", &c->n_layers, 1,
                             err) != 1
        || llm_gguf_arch_int(m, arch, "feed_forward_length",
                             &c->intermediate, 1, err) != 1
        || llm_gguf_arch_int(m, arch, "attention.head_count", &c->n_heads, 1,
                             err) != 1)
    {
        return -1;
    }
    c->n_kv_heads = c->n_heads;
    c->head_dim = c->hidden / c->n_heads;
    c->max_position_embeddings = 2048;
    c->rms_eps = 1e-5f;
    c->rope_theta = 10000.0f;
    if (llm_gguf_arch_int(m, arch, "attention.head_count_kv", &c->n_kv_heads,
                          0, err) < 0
        || llm_gguf_arch_int(m, arch, "attention.key_length", &c->head_dim, 0,
                             err) < 0
        || llm_gguf_arch_int(m, arch, "context_length",
                             &c->max_position_embeddings, 0, err) < 0
        || llm_gguf_arch_float(m, arch, "rope.freq_base", &c->rope_theta,
                               err) < 0
        || llm_gguf_arch_float(m, arch, "attention.layer_norm_rms_epsilon",
                               &c->rms_eps, err) < 0
        || llm_gguf_rope_scaling(m, arch, err) != 0)
    {
        return -1;
    }
    /* the kernels rotate whole heads and read V with K's width */
    if ((llm_gguf_arch_int(m, arch, "rope.dimension_count", &v, 0, err) == 1
         && v != c->head_dim)
        || (llm_gguf_arch_int(m, arch, "attention.value_length", &v, 0, err)
            == 1 && v != c->head_dim))
    {
        llm_errf(err, "%s: rope.dimension_count or attention.value_length "
                 "%d differs from the head size %d: not supported", m->dir,
                 v, c->head_dim);
        return -1;
    }
    if (err[0] != '\0' || llm_config_check(c, m->dir, err) != 0) {
        return -1;
    }
    /* vocab_size is optional in GGUF; the embedding has a row per id */
    embd = llm_gguf_find_tensor(m->gguf, "token_embd.weight");
    if (embd == NULL || embd->n_dims != 2 || embd->ne[1] <= 0
        || embd->ne[1] > 1 << 24)
    {
        llm_errf(err, "%s: token_embd.weight is missing or not a matrix",
                 m->dir);
        return -1;
    }
    c->vocab_size = (int) embd->ne[1];
    c->tie_embeddings = llm_gguf_find_tensor(m->gguf, "output.weight")
                        == NULL;
    c->qkv_bias = c->arch == LLM_ARCH_QWEN2;
    c->qk_norm = c->arch == LLM_ARCH_QWEN3;
    return 0;
}


/* rope_freqs.weight: head_dim / 2 float32 divisors, copied (the file's
 * alignment may be 1) */
static int
llm_gguf_rope_freqs(llm_model *m, char *err)
{
    const llm_gguf_tensor  *t;
    float                  *f;
    int                     i, n = m->config.head_dim / 2;

    t = llm_gguf_find_tensor(m->gguf, "rope_freqs.weight");
    if (t == NULL) {
        return 0;
    }
    if (t->dtype != LLM_DTYPE_F32 || t->n_dims != 1 || t->ne[0] != n) {
        llm_errf(err, "%s: rope_freqs.weight must be %d F32 values", m->dir,
                 n);
        return -1;
    }
    f = llm_xmalloc((size_t) n * sizeof(float));
    memcpy(f, t->data, (size_t) n * sizeof(float));
    llm_model_own(m, f);
    for (i = 0; i < n; i++) {
        if (!(f[i] > 0 && f[i] < INFINITY)) {
            llm_errf(err, "%s: rope_freqs.weight[%d] is %g (must be "
                     "positive)", m->dir, i, (double) f[i]);
            return -1;
        }
    }
    m->config.rope_freq_factors = f;
    return 0;
}


/* Sampling defaults: general.sampling.* (written by newer converters). */
static void
llm_gguf_sampling(llm_model *m)
{
    llm_generation_config  *g = &m->gen;
    char                    sub[LLM_ERR_LEN];
    int64_t                 k;

    g->has_temperature = llm_gguf_get_float(m->gguf, "general.sampling.temp",
                                            &g->temperature, sub) == 1;
    g->has_top_p = llm_gguf_get_float(m->gguf, "general.sampling.top_p",
                                      &g->top_p, sub) == 1;
    g->has_min_p = llm_gguf_get_float(m->gguf, "general.sampling.min_p",
                                      &g->min_p, sub) == 1;
    g->has_repetition_penalty = llm_gguf_get_float(m->gguf,
        "general.sampling.penalty_repeat", &g->repetition_penalty, sub) == 1;
    if (llm_gguf_get_int(m->gguf, "general.sampling.top_k", &k, sub) == 1
        && k >= 0 && k < 1 << 30)
    {
        g->has_top_k = 1;
        g->top_k = (int) k;
    }
}


int
llm_model_gguf_open(llm_model *m, char *err)
{
    m->gguf = llm_gguf_open(m->dir, err);
    if (m->gguf == NULL) {
        return -1;
    }
    err[0] = '\0';
    if (llm_gguf_config(m, err) != 0 || llm_gguf_rope_freqs(m, err) != 0) {
        return -1;
    }
    memset(&m->gen, 0, sizeof(m->gen));
    m->gen.bos_id = -1;
    llm_gguf_sampling(m);
    return 0;
}


/* The tokenizer and chat template (NULL: none) of an open file. */
static int
llm_gguf_text(llm_gguf *g, const char *path, llm_tokenizer **tok,
    llm_chat_template **tmpl, llm_gguf_vocab *v, char *err)
{
    char  sub[LLM_ERR_LEN];

    *tmpl = NULL;
    if (llm_gguf_tokenizer(g, path, tok, v, err) != 0) {
        return -1;
    }
    if (v->chat_template == NULL) {
        return 0;
    }
    *tmpl = llm_chat_template_parse(v->chat_template,
        strlen(v->chat_template), llm_tokenizer_bos_str(*tok),
        llm_tokenizer_eos_str(*tok), sub);
    free(v->chat_template);
    v->chat_template = NULL;
    if (*tmpl == NULL) {
        llm_errf(err, "%s: tokenizer.chat_template: %s", path, sub);
        return -1;
    }
    return 0;
}


int
llm_model_gguf_tokenizer(llm_model *m, char *err)
{
    llm_gguf_vocab  v;

    if (llm_gguf_text(m->gguf, m->dir, &m->tokenizer, &m->chat_template, &v,
                      err) != 0)
    {
        free(v.eog_ids);
        return -1;
    }
    m->gen.bos_id = v.bos_id;
    m->gen.eos_ids = v.eog_ids;
    m->gen.n_eos = v.n_eog;
    return 0;
}


int
llm_model_text_load(const char *path, llm_tokenizer **tok,
    llm_chat_template **tmpl, char *err)
{
    llm_gguf_vocab      v;
    llm_gguf           *g;
    llm_tokenizer      *k = NULL;
    llm_chat_template  *t = NULL;
    int                 rc;

    if (!llm_model_path_is_gguf(path)) {
        if (tok && (*tok = llm_tokenizer_load(path, err)) == NULL) {
            return -1;
        }
        if (tmpl) {
            err[0] = '\0';
            *tmpl = llm_chat_template_load(path, err);
        }
        return 0;
    }
    g = llm_gguf_open(path, err);
    if (g == NULL) {
        return -1;
    }
    rc = llm_gguf_text(g, path, &k, &t, &v, err);
    free(v.eog_ids);
    llm_gguf_close(g);
    if (rc == 0 && tok) {
        *tok = k;
        k = NULL;
    }
    if (rc == 0 && tmpl) {
        *tmpl = t;
        t = NULL;
        err[0] = '\0';
    }
    llm_tokenizer_free(k);
    if (t) {
        llm_chat_template_free(t);
    }
    return rc;
}


/*
 * The converter reorders each head's rows so that pairs rotate adjacently:
 * GGUF row h*d + 2i + j holds Hugging Face row h*d + j*d/2 + i (j = 0, 1;
 * i < d/2).  Running the kernels' rotate_half RoPE on the rows put back is
 * the same model, and keeps one RoPE for every backend; the price is a copy
 * of q and k (a fifth to a quarter of the attention weights).
 */
void
llm_gguf_unpermute(llm_model *m, llm_tensor *t, int n_head)
{
    size_t       row = llm_dtype_row_bytes(t->dtype, (size_t) t->cols);
    int          d = t->rows / n_head, h, i, j;
    const char  *src = t->data;
    char        *dst;

    dst = llm_xmalloc(row * (size_t) t->rows);
    for (h = 0; h < n_head; h++) {
        for (i = 0; i < d / 2; i++) {
            for (j = 0; j < 2; j++) {
                memcpy(dst + row * (size_t) (h * d + j * (d / 2) + i),
                       src + row * (size_t) (h * d + 2 * i + j), row);
            }
        }
    }
    llm_model_own(m, dst);
    t->data = dst;
}
