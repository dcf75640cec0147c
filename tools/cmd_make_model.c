/*
 * cmd_make_model.c -- `llm make-model`: writes a random-weight model in
 * Hugging Face format, with a real tokenizer, for tests and benchmarks.
 *
 *   llm make-model --tokenizer DIR --out DIR [--arch llama|qwen2|qwen3|mistral]
 *       [--layers N --hidden N --heads N --kv-heads N --head-dim N
 *        --intermediate N --vocab N --dtype bf16|f16|f32 --seed N --tie
 *        --rope-llama3 --rope-theta F --max-position N --shards N
 *        --quantize q8_0|q4_0|q4_k|f32|f16|bf16]
 *
 * config.json carries the fields the real configs of the architecture carry
 * (and only those: Qwen2 configs have no attention_bias or head_dim, Mistral
 * configs no head_dim), so the loader is tested on what users have.  The
 * weights are written by make_model_weights.c; docs/models.md describes the
 * choices.  --quantize T also writes the model as a GGUF file of type T,
 * DIR/model-T.gguf, as `llm quantize` does (cmd_quantize.c).
 */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cli.h"
#include "make_model.h"
#include "util/util.h"

/* The architectures and what their configs look like. */
typedef struct {
    const char  *arch;
    const char  *class_name;     /* config.json "architectures" */
    double       rope_theta;
    double       rms_norm_eps;
    int          max_position;
    int          qkv_bias;
    int          qk_norm;
    int          write_head_dim; /* real configs of this family carry it */
} mm_arch;

static const mm_arch mm_archs[] = {
    { "llama",   "LlamaForCausalLM",   500000.0, 1e-5, 8192,  0, 0, 1 },
    { "mistral", "MistralForCausalLM", 1000000.0, 1e-5, 32768, 0, 0, 0 },
    { "qwen2",   "Qwen2ForCausalLM",   1000000.0, 1e-6, 32768, 1, 0, 0 },
    { "qwen3",   "Qwen3ForCausalLM",   1000000.0, 1e-6, 40960, 0, 1, 1 },
    { NULL, NULL, 0, 0, 0, 0, 0, 0 }
};

static const char *mm_value_opts[] = {
    "--tokenizer", "--out", "--arch", "--layers", "--hidden", "--heads",
    "--kv-heads", "--head-dim", "--intermediate", "--vocab", "--dtype",
    "--seed", "--rope-theta", "--max-position", "--shards", "--quantize",
    NULL
};
static const char *mm_flag_opts[] = { "--tie", "--rope-llama3", NULL };


static int
mm_in_list(const char *s, const char **list)
{
    for (; *list; list++) {
        if (strcmp(s, *list) == 0) {
            return 1;
        }
    }
    return 0;
}


/* Rejects unknown options and options missing their value. */
static int
mm_check_args(int argc, char **argv)
{
    int  i;

    for (i = 1; i < argc; i++) {
        if (mm_in_list(argv[i], mm_value_opts)) {
            if (i + 1 >= argc) {
                return llm_cli_fail("make-model: %s needs a value", argv[i]);
            }
            i++;
        } else if (!mm_in_list(argv[i], mm_flag_opts)) {
            return llm_cli_fail("make-model: unknown option '%s'", argv[i]);
        }
    }
    return 0;
}


/* An integer option in [min, max]; def when absent. */
static int
mm_int_opt(int argc, char **argv, const char *name, long def, long min,
    long max, int *out)
{
    const char  *v = llm_cli_opt(argc, argv, name);
    char        *end;
    long         x;

    if (v == NULL) {
        *out = (int) def;
        return 0;
    }
    errno = 0;
    x = strtol(v, &end, 10);
    if (errno || end == v || *end || x < min || x > max) {
        return llm_cli_fail("make-model: %s '%s': expected an integer in "
                            "[%ld, %ld]", name, v, min, max);
    }
    *out = (int) x;
    return 0;
}


static int
mm_mkdir_p(const char *dir, char *err)
{
    char  buf[PATH_MAX], *p;

    snprintf(buf, sizeof(buf), "%s", dir);
    for (p = buf + 1; ; p++) {
        if (*p == '/' || *p == '\0') {
            char  c = *p;

            *p = '\0';
            if (mkdir(buf, 0755) != 0 && errno != EEXIST) {
                llm_errf(err, "%s: %s", buf, strerror(errno));
                return -1;
            }
            *p = c;
            if (c == '\0') {
                return 0;
            }
        }
    }
}


static int
mm_copy_file(const char *from_dir, const char *to_dir, const char *name,
    char *err)
{
    char    from[PATH_MAX], to[PATH_MAX];
    char   *data;
    size_t  len;
    FILE   *f;

    data = llm_read_file(llm_path_join(from, from_dir, name), &len, err);
    if (data == NULL) {
        return -1;
    }
    f = fopen(llm_path_join(to, to_dir, name), "wb");
    if (f == NULL || fwrite(data, 1, len, f) != len) {
        llm_errf(err, "%s: %s", to, strerror(errno));
        if (f) {
            fclose(f);
        }
        free(data);
        return -1;
    }
    free(data);
    if (fclose(f) != 0) {
        llm_errf(err, "%s: %s", to, strerror(errno));
        return -1;
    }
    return 0;
}


static void
mm_print_ids(FILE *f, const int *ids, int n)
{
    int  i;

    if (n == 1) {
        fprintf(f, "%d", ids[0]);
        return;
    }
    fputc('[', f);
    for (i = 0; i < n; i++) {
        fprintf(f, "%s%d", i ? ", " : "", ids[i]);
    }
    fputc(']', f);
}


static void
mm_print_id(FILE *f, int id)
{
    if (id < 0) {
        fputs("null", f);
    } else {
        fprintf(f, "%d", id);
    }
}


static const char *
mm_torch_dtype(llm_mm_dtype d)
{
    switch (d) {
    case LLM_MM_F16:  return "float16";
    case LLM_MM_F32:  return "float32";
    default:          return "bfloat16";
    }
}


static int
mm_write_config(const char *dir, const llm_mm_spec *s, const mm_arch *a,
    const llm_mm_tokens *tk, double theta, int max_pos, int llama3_rope,
    char *err)
{
    char   path[PATH_MAX];
    FILE  *f;
    int    is_qwen = a->qkv_bias || a->qk_norm;

    f = fopen(llm_path_join(path, dir, "config.json"), "w");
    if (f == NULL) {
        llm_errf(err, "%s: %s", path, strerror(errno));
        return -1;
    }
    fprintf(f, "{\n  \"architectures\": [\"%s\"],\n", a->class_name);
    if (!a->qkv_bias) {
        fprintf(f, "  \"attention_bias\": false,\n");
    }
    fprintf(f, "  \"attention_dropout\": 0.0,\n  \"bos_token_id\": ");
    mm_print_id(f, tk->bos);
    fprintf(f, ",\n  \"eos_token_id\": ");
    /* Llama 3.1 configs list every end id; Qwen and Mistral give one. */
    if (strcmp(a->arch, "llama") == 0) {
        mm_print_ids(f, tk->eos_all, tk->n_eos_all);
    } else {
        fprintf(f, "%d", tk->eos);
    }
    fprintf(f, ",\n");
    if (a->write_head_dim || s->head_dim * s->heads != s->hidden) {
        fprintf(f, "  \"head_dim\": %d,\n", s->head_dim);
    }
    fprintf(f, "  \"hidden_act\": \"silu\",\n"
            "  \"hidden_size\": %d,\n"
            "  \"initializer_range\": 0.02,\n"
            "  \"intermediate_size\": %d,\n"
            "  \"max_position_embeddings\": %d,\n",
            s->hidden, s->intermediate, max_pos);
    if (is_qwen) {
        fprintf(f, "  \"max_window_layers\": %d,\n", s->layers);
    }
    if (strcmp(a->arch, "llama") == 0) {
        fprintf(f, "  \"mlp_bias\": false,\n");
    }
    fprintf(f, "  \"model_type\": \"%s\",\n"
            "  \"num_attention_heads\": %d,\n"
            "  \"num_hidden_layers\": %d,\n"
            "  \"num_key_value_heads\": %d,\n",
            a->arch, s->heads, s->layers, s->kv_heads);
    if (strcmp(a->arch, "llama") == 0) {
        fprintf(f, "  \"pretraining_tp\": 1,\n");
    }
    fprintf(f, "  \"rms_norm_eps\": %g,\n", a->rms_norm_eps);
    if (llama3_rope) {
        fprintf(f, "  \"rope_scaling\": {\n"
                "    \"factor\": 8.0,\n"
                "    \"high_freq_factor\": 4.0,\n"
                "    \"low_freq_factor\": 1.0,\n"
                "    \"original_max_position_embeddings\": 8192,\n"
                "    \"rope_type\": \"llama3\"\n  },\n");
    } else {
        fprintf(f, "  \"rope_scaling\": null,\n");
    }
    fprintf(f, "  \"rope_theta\": %.1f,\n", theta);
    if (is_qwen || strcmp(a->arch, "mistral") == 0) {
        fprintf(f, "  \"sliding_window\": null,\n");
    }
    fprintf(f, "  \"tie_word_embeddings\": %s,\n"
            "  \"torch_dtype\": \"%s\",\n"
            "  \"transformers_version\": \"4.51.0\",\n"
            "  \"use_cache\": true,\n",
            s->tie ? "true" : "false", mm_torch_dtype(s->dtype));
    if (is_qwen) {
        fprintf(f, "  \"use_sliding_window\": false,\n");
    }
    fprintf(f, "  \"vocab_size\": %d\n}\n", s->vocab);
    if (fclose(f) != 0) {
        llm_errf(err, "%s: %s", path, strerror(errno));
        return -1;
    }

    f = fopen(llm_path_join(path, dir, "generation_config.json"), "w");
    if (f == NULL) {
        llm_errf(err, "%s: %s", path, strerror(errno));
        return -1;
    }
    fprintf(f, "{\n  \"bos_token_id\": ");
    mm_print_id(f, tk->bos);
    fprintf(f, ",\n  \"eos_token_id\": ");
    mm_print_ids(f, tk->eos_all, tk->n_eos_all);
    fprintf(f, ",\n  \"transformers_version\": \"4.51.0\"\n}\n");
    if (fclose(f) != 0) {
        llm_errf(err, "%s: %s", path, strerror(errno));
        return -1;
    }
    return 0;
}


int
llm_cmd_make_model(int argc, char **argv)
{
    llm_mm_spec     s;
    const mm_arch  *a;
    llm_mm_tokens   tk;
    const char     *tokdir, *out, *arch, *dtype, *v;
    char            err[LLM_ERR_LEN], *end;
    int             hd, vocab, max_pos, llama3_rope;
    long long       seed;
    double          theta;
    uint64_t        bytes, params;

    if (mm_check_args(argc, argv) != 0) {
        return 1;
    }
    tokdir = llm_cli_opt(argc, argv, "--tokenizer");
    out = llm_cli_opt(argc, argv, "--out");
    if (tokdir == NULL || out == NULL) {
        return llm_cli_fail("make-model: --tokenizer DIR and --out DIR are "
                            "required");
    }
    memset(&s, 0, sizeof(s));

    arch = llm_cli_opt(argc, argv, "--arch");
    arch = arch ? arch : "llama";
    for (a = mm_archs; a->arch && strcmp(a->arch, arch) != 0; a++) { }
    if (a->arch == NULL) {
        return llm_cli_fail("make-model: --arch '%s': expected llama, "
                            "mistral, qwen2 or qwen3", arch);
    }
    s.arch = a->arch;
    s.qkv_bias = a->qkv_bias;
    s.qk_norm = a->qk_norm;

    dtype = llm_cli_opt(argc, argv, "--dtype");
    dtype = dtype ? dtype : "bf16";
    if (strcmp(dtype, "bf16") == 0) {
        s.dtype = LLM_MM_BF16;
    } else if (strcmp(dtype, "f16") == 0) {
        s.dtype = LLM_MM_F16;
    } else if (strcmp(dtype, "f32") == 0) {
        s.dtype = LLM_MM_F32;
    } else {
        return llm_cli_fail("make-model: --dtype '%s': expected bf16, f16 "
                            "or f32", dtype);
    }

    if (mm_int_opt(argc, argv, "--layers", 2, 1, 1024, &s.layers)
        || mm_int_opt(argc, argv, "--hidden", 64, 2, 1 << 16, &s.hidden)
        || mm_int_opt(argc, argv, "--heads", 4, 1, 1024, &s.heads)
        || mm_int_opt(argc, argv, "--kv-heads", 2, 1, 1024, &s.kv_heads)
        || mm_int_opt(argc, argv, "--intermediate", 128, 1, 1 << 20,
                      &s.intermediate)
        || mm_int_opt(argc, argv, "--head-dim", 0, 0, 1024, &hd)
        || mm_int_opt(argc, argv, "--vocab", 0, 0, 1 << 24, &vocab)
        || mm_int_opt(argc, argv, "--max-position", 0, 0, 1 << 24, &max_pos)
        || mm_int_opt(argc, argv, "--shards", 1, 1, 99999, &s.shards))
    {
        return 1;
    }
    if (s.heads % s.kv_heads != 0) {
        return llm_cli_fail("make-model: --heads %d is not a multiple of "
                            "--kv-heads %d", s.heads, s.kv_heads);
    }
    if (hd == 0 && s.hidden % s.heads != 0) {
        return llm_cli_fail("make-model: --hidden %d is not a multiple of "
                            "--heads %d (or give --head-dim)", s.hidden,
                            s.heads);
    }
    s.head_dim = hd ? hd : s.hidden / s.heads;
    if (s.head_dim % 2 != 0) {
        return llm_cli_fail("make-model: head_dim %d must be even for RoPE",
                            s.head_dim);
    }

    seed = 1;
    if ((v = llm_cli_opt(argc, argv, "--seed")) != NULL) {
        errno = 0;
        seed = strtoll(v, &end, 10);
        if (errno || end == v || *end) {
            return llm_cli_fail("make-model: --seed '%s': expected an "
                                "integer", v);
        }
    }
    s.seed = (uint64_t) seed;
    theta = a->rope_theta;
    if ((v = llm_cli_opt(argc, argv, "--rope-theta")) != NULL) {
        theta = strtod(v, &end);
        if (end == v || *end || theta <= 1.0) {
            return llm_cli_fail("make-model: --rope-theta '%s': expected a "
                                "number > 1", v);
        }
    }
    s.tie = llm_cli_flag(argc, argv, "--tie");
    llama3_rope = llm_cli_flag(argc, argv, "--rope-llama3");
    if (max_pos == 0) {
        /* Llama 3.1 extends 8192 original positions 16x. */
        max_pos = llama3_rope ? 131072 : a->max_position;
    }

    if (llm_mm_read_tokens(tokdir,
                           llama3_rope && strcmp(s.arch, "llama") == 0, &tk,
                           err) != 0)
    {
        return llm_cli_fail("make-model: %s", err);
    }
    if (vocab != 0 && vocab < tk.vocab) {
        return llm_cli_fail("make-model: --vocab %d is smaller than the "
                            "tokenizer's %d tokens", vocab, tk.vocab);
    }
    /* Larger than the tokenizer: padded rows, as Qwen's 151936. */
    s.vocab = vocab ? vocab : tk.vocab;

    if (mm_mkdir_p(out, err) != 0
        || mm_write_config(out, &s, a, &tk, theta, max_pos, llama3_rope, err)
        || mm_copy_file(tokdir, out, "tokenizer.json", err)
        || mm_copy_file(tokdir, out, "tokenizer_config.json", err))
    {
        return llm_cli_fail("make-model: %s", err);
    }
    bytes = llm_mm_write_weights(&s, out, err);
    if (bytes == 0) {
        return llm_cli_fail("make-model: %s", err);
    }
    params = bytes / (s.dtype == LLM_MM_F32 ? 4 : 2);
    printf("wrote %s: %s, %d layers, hidden %d, heads %d/%d, head_dim %d, "
           "intermediate %d, vocab %d, %s%s, %.1fM parameters, %d file%s\n",
           out, s.arch, s.layers, s.hidden, s.heads, s.kv_heads, s.head_dim,
           s.intermediate, s.vocab, dtype, s.tie ? ", tied" : "",
           (double) params / 1e6, s.shards, s.shards > 1 ? "s" : "");
    if ((v = llm_cli_opt(argc, argv, "--quantize")) != NULL) {
        char  gguf[PATH_MAX];

        if (snprintf(gguf, sizeof(gguf), "%s/model-%s.gguf", out, v)
            >= (int) sizeof(gguf))
        {
            return llm_cli_fail("make-model: --out '%s' is too long", out);
        }
        return llm_cli_quantize(out, v, gguf, llm_cli_threads(argc, argv));
    }
    return 0;
}
