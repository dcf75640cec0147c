/*
 * model_config.c -- config.json and generation_config.json.
 */
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <yajl/yajl_tree.h>

#include "model.h"
#include "util/util.h"


/* Reads an integer field: 1 found, 0 absent or null, -1 wrong type. */
static int
llm_json_int(yajl_val obj, const char *key, int *out)
{
    yajl_val  v = llm_json_get(obj, key);

    if (v == NULL || YAJL_IS_NULL(v)) {
        return 0;
    }
    if (!YAJL_IS_INTEGER(v) || YAJL_GET_INTEGER(v) < INT_MIN
        || YAJL_GET_INTEGER(v) > INT_MAX)
    {
        return -1;
    }
    *out = (int) YAJL_GET_INTEGER(v);
    return 1;
}


static int
llm_json_double(yajl_val obj, const char *key, double *out)
{
    yajl_val  v = llm_json_get(obj, key);

    if (v == NULL || YAJL_IS_NULL(v)) {
        return 0;
    }
    if (!YAJL_IS_NUMBER(v)) {
        return -1;
    }
    *out = YAJL_GET_DOUBLE(v);
    return 1;
}


static int
llm_json_float(yajl_val obj, const char *key, float *out)
{
    double  d;
    int     rc = llm_json_double(obj, key, &d);

    if (rc == 1) {
        *out = (float) d;
    }
    return rc;
}


static int
llm_json_bool(yajl_val obj, const char *key, int *out)
{
    yajl_val  v = llm_json_get(obj, key);

    if (v == NULL || YAJL_IS_NULL(v)) {
        return 0;
    }
    if (!YAJL_IS_TRUE(v) && !YAJL_IS_FALSE(v)) {
        return -1;
    }
    *out = YAJL_IS_TRUE(v);
    return 1;
}


static yajl_val
llm_json_load(const char *dir, const char *name, int required, char *err)
{
    char      path[PATH_MAX], ebuf[256];
    char     *text;
    yajl_val  root;

    llm_path_join(path, dir, name);
    if (!required && !llm_file_exists(path)) {
        return NULL;
    }
    text = llm_read_file(path, NULL, err);
    if (text == NULL) {
        return NULL;
    }
    root = yajl_tree_parse(text, ebuf, sizeof(ebuf));
    free(text);
    if (root == NULL || !YAJL_IS_OBJECT(root)) {
        char  *nl = strchr(ebuf, '\n');

        if (nl) {
            *nl = '\0';
        }
        llm_errf(err, "%s: not a JSON object%s%s", path, root ? "" : ": ",
                 root ? "" : ebuf);
        yajl_tree_free(root);
        return NULL;
    }
    return root;
}


static int
llm_config_arch(yajl_val root, llm_arch *arch, const char *path, char *err)
{
    static const struct { const char *name; llm_arch arch; } known[] = {
        { "LlamaForCausalLM", LLM_ARCH_LLAMA },
        { "MistralForCausalLM", LLM_ARCH_MISTRAL },
        { "Qwen2ForCausalLM", LLM_ARCH_QWEN2 },
        { "Qwen3ForCausalLM", LLM_ARCH_QWEN3 },
    };
    yajl_val     archs = llm_json_get(root, "architectures");
    const char  *name;
    size_t       i;

    if (archs == NULL || !YAJL_IS_ARRAY(archs)
        || YAJL_GET_ARRAY(archs)->len == 0
        || !YAJL_IS_STRING(YAJL_GET_ARRAY(archs)->values[0]))
    {
        llm_errf(err, "%s: \"architectures\" is missing", path);
        return -1;
    }
    name = YAJL_GET_STRING(YAJL_GET_ARRAY(archs)->values[0]);
    for (i = 0; i < sizeof(known) / sizeof(known[0]); i++) {
        if (strcmp(name, known[i].name) == 0) {
            *arch = known[i].arch;
            return 0;
        }
    }
    llm_errf(err, "%s: unsupported architecture %s (supported: "
             "LlamaForCausalLM, MistralForCausalLM, Qwen2ForCausalLM, "
             "Qwen3ForCausalLM)", path, name);
    return -1;
}


static int
llm_config_rope_scaling(yajl_val root, llm_config *c, const char *path,
    char *err)
{
    yajl_val     rs = llm_json_get(root, "rope_scaling");
    yajl_val     type;
    const char  *t;

    if (rs == NULL || YAJL_IS_NULL(rs)) {
        return 0;
    }
    type = llm_json_get(rs, "rope_type");
    if (type == NULL) {
        type = llm_json_get(rs, "type");
    }
    t = (type && YAJL_IS_STRING(type)) ? YAJL_GET_STRING(type) : "";
    if (strcmp(t, "default") == 0) {
        return 0;
    }
    if (strcmp(t, "llama3") != 0) {
        llm_errf(err, "%s: rope_scaling type \"%s\" is not supported "
                 "(supported: llama3)", path, t);
        return -1;
    }
    c->rope_llama3 = 1;
    c->rope_factor = 8.0f;
    c->rope_low_freq_factor = 1.0f;
    c->rope_high_freq_factor = 4.0f;
    c->rope_original_max_pos = 8192;
    if (llm_json_float(rs, "factor", &c->rope_factor) < 0
        || llm_json_float(rs, "low_freq_factor", &c->rope_low_freq_factor) < 0
        || llm_json_float(rs, "high_freq_factor",
                          &c->rope_high_freq_factor) < 0
        || llm_json_int(rs, "original_max_position_embeddings",
                        &c->rope_original_max_pos) < 0
        || c->rope_factor <= 0 || c->rope_original_max_pos <= 0
        || c->rope_high_freq_factor <= c->rope_low_freq_factor)
    {
        llm_errf(err, "%s: invalid llama3 rope_scaling parameters", path);
        return -1;
    }
    return 0;
}


int
llm_config_check(const llm_config *c, const char *path, char *err)
{
    if (c->n_kv_heads <= 0 || c->n_heads % c->n_kv_heads != 0
        || c->head_dim <= 0 || c->head_dim % 2 != 0 || c->head_dim > 512)
    {
        llm_errf(err, "%s: unsupported head layout (%d heads, %d kv heads, "
                 "head_dim %d)", path, c->n_heads, c->n_kv_heads,
                 c->head_dim);
        return -1;
    }
    return 0;
}


int
llm_config_load(const char *dir, llm_config *c, char *err)
{
    static const struct { const char *key; size_t off; } ints[] = {
        { "hidden_size", offsetof(llm_config, hidden) },
        { "num_hidden_layers", offsetof(llm_config, n_layers) },
        { "num_attention_heads", offsetof(llm_config, n_heads) },
        { "intermediate_size", offsetof(llm_config, intermediate) },
        { "vocab_size", offsetof(llm_config, vocab_size) },
    };
    char      path[PATH_MAX];
    yajl_val  root;
    size_t    i;
    int       sw = 0, use_sw = 0;

    llm_path_join(path, dir, "config.json");
    if (!llm_file_exists(path)) {
        llm_errf(err, "%s: no config.json in this directory (is it a "
                 "Hugging Face model directory?)", path);
        return -1;
    }
    root = llm_json_load(dir, "config.json", 1, err);
    if (root == NULL) {
        return -1;
    }
    memset(c, 0, sizeof(*c));
    if (llm_config_arch(root, &c->arch, path, err) != 0) {
        goto fail;
    }
    for (i = 0; i < sizeof(ints) / sizeof(ints[0]); i++) {
        int  *field = (int *) ((char *) c + ints[i].off);

        if (llm_json_int(root, ints[i].key, field) != 1 || *field <= 0) {
            llm_errf(err, "%s: \"%s\" must be a positive integer", path,
                     ints[i].key);
            goto fail;
        }
    }
    c->n_kv_heads = c->n_heads;
    c->head_dim = c->hidden / c->n_heads;
    c->max_position_embeddings = 2048;
    c->rms_eps = 1e-6f;
    c->rope_theta = 10000.0f;
    if (llm_json_int(root, "num_key_value_heads", &c->n_kv_heads) < 0
        || llm_json_int(root, "head_dim", &c->head_dim) < 0
        || llm_json_int(root, "max_position_embeddings",
                        &c->max_position_embeddings) < 0
        || llm_json_float(root, "rms_norm_eps", &c->rms_eps) < 0
        || llm_json_float(root, "rope_theta", &c->rope_theta) < 0
        || llm_json_bool(root, "tie_word_embeddings", &c->tie_embeddings) < 0
        || llm_json_int(root, "sliding_window", &sw) < 0
        || llm_json_bool(root, "use_sliding_window", &use_sw) < 0)
    {
        llm_errf(err, "%s: a field has the wrong type", path);
        goto fail;
    }
    if (llm_config_check(c, path, err) != 0) {
        goto fail;
    }
    if (llm_config_rope_scaling(root, c, path, err) != 0) {
        goto fail;
    }
    /* Mistral applies its sliding_window when set; Qwen configs carry one
     * that is off unless use_sliding_window is true (never in released
     * Qwen2.5/Qwen3 models, and then only for some layers: not supported). */
    if (c->arch == LLM_ARCH_MISTRAL) {
        c->sliding_window = sw > 0 ? sw : 0;
    } else if ((c->arch == LLM_ARCH_QWEN2 || c->arch == LLM_ARCH_QWEN3)
               && llm_json_get(root, "use_sliding_window") != NULL && use_sw)
    {
        llm_errf(err, "%s: use_sliding_window true is not supported", path);
        goto fail;
    }
    c->qkv_bias = c->arch == LLM_ARCH_QWEN2;
    c->qk_norm = c->arch == LLM_ARCH_QWEN3;
    yajl_tree_free(root);
    return 0;

fail:
    yajl_tree_free(root);
    return -1;
}


static int
llm_json_int_list(yajl_val v, int32_t **out, int *n)
{
    size_t  i;

    if (v == NULL || YAJL_IS_NULL(v)) {
        return 0;
    }
    if (YAJL_IS_INTEGER(v)) {
        *out = llm_xmalloc(sizeof(int32_t));
        (*out)[0] = (int32_t) YAJL_GET_INTEGER(v);
        *n = 1;
        return 1;
    }
    if (!YAJL_IS_ARRAY(v)) {
        return -1;
    }
    *out = llm_xmalloc(sizeof(int32_t) * (YAJL_GET_ARRAY(v)->len + 1));
    *n = 0;
    for (i = 0; i < YAJL_GET_ARRAY(v)->len; i++) {
        yajl_val  e = YAJL_GET_ARRAY(v)->values[i];

        if (!YAJL_IS_INTEGER(e)) {
            free(*out);
            *out = NULL;
            *n = 0;
            return -1;
        }
        (*out)[(*n)++] = (int32_t) YAJL_GET_INTEGER(e);
    }
    return 1;
}


int
llm_generation_config_load(const char *dir, llm_generation_config *g,
    char *err)
{
    char      path[PATH_MAX];
    yajl_val  root, cfg;
    int       bos = -1;

    memset(g, 0, sizeof(*g));
    g->bos_id = -1;

    /* config.json's ids are the fallback when generation_config.json is
     * absent or silent. */
    cfg = llm_json_load(dir, "config.json", 1, err);
    if (cfg == NULL) {
        return -1;
    }
    root = llm_json_load(dir, "generation_config.json", 0, err);
    llm_path_join(path, dir, "generation_config.json");
    if (root == NULL && llm_file_exists(path)) {
        yajl_tree_free(cfg);
        return -1;
    }
    if (root) {
        if (llm_json_int_list(llm_json_get(root, "eos_token_id"),
                              &g->eos_ids, &g->n_eos) < 0
            || llm_json_int(root, "bos_token_id", &bos) < 0)
        {
            llm_errf(err, "%s: eos_token_id/bos_token_id must be integers",
                     path);
            goto fail;
        }
        g->has_temperature = llm_json_double(root, "temperature",
                                             &g->temperature) == 1;
        g->has_top_p = llm_json_double(root, "top_p", &g->top_p) == 1;
        g->has_top_k = llm_json_int(root, "top_k", &g->top_k) == 1;
        g->has_min_p = llm_json_double(root, "min_p", &g->min_p) == 1;
        g->has_repetition_penalty = llm_json_double(root,
            "repetition_penalty", &g->repetition_penalty) == 1;
    }
    if (g->n_eos == 0
        && llm_json_int_list(llm_json_get(cfg, "eos_token_id"), &g->eos_ids,
                             &g->n_eos) < 0)
    {
        llm_errf(err, "%s/config.json: eos_token_id must be integers", dir);
        goto fail;
    }
    if (bos < 0 && llm_json_int(cfg, "bos_token_id", &bos) < 0) {
        bos = -1;
    }
    g->bos_id = bos;
    yajl_tree_free(root);
    yajl_tree_free(cfg);
    return 0;

fail:
    yajl_tree_free(root);
    yajl_tree_free(cfg);
    return -1;
}
