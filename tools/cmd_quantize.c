/*
 * cmd_quantize.c -- `llm quantize --model DIR|FILE.gguf --type T --out
 * FILE.gguf [--threads N]`: a model written as a GGUF file that this engine
 * and llama.cpp load.
 *
 * T q8_0, q4_0 or q4_k quantizes as `llm_weights` does on load (the same
 * code, model_quantize.c: every layer matrix and an untied lm_head in the
 * block format, the token embedding as stored); f32, f16 or bf16 converts
 * every matrix, the embedding too.  The writer is model_gguf_write.c.
 */
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "cli.h"
#include "model/model.h"
#include "util/util.h"

static const struct {
    const char  *name;
    llm_dtype    dtype;
} llm_quant_types[] = {
    { "q8_0", LLM_DTYPE_Q8_0 }, { "q4_0", LLM_DTYPE_Q4_0 },
    { "q4_k", LLM_DTYPE_Q4_K }, { "f32", LLM_DTYPE_F32 },
    { "f16", LLM_DTYPE_F16 }, { "bf16", LLM_DTYPE_BF16 },
};

static const char *const  llm_quant_opts[] = {
    "--model", "--type", "--out", "--threads", NULL
};


int
llm_cli_quantize(const char *model, const char *type, const char *out,
    int threads)
{
    char         err[LLM_ERR_LEN];
    llm_model   *m;
    llm_dtype    t = LLM_DTYPE_COUNT;
    struct stat  st;
    size_t       i, n = strlen(out);
    int          rc;

    for (i = 0; i < sizeof(llm_quant_types) / sizeof(llm_quant_types[0]);
         i++)
    {
        if (strcmp(type, llm_quant_types[i].name) == 0) {
            t = llm_quant_types[i].dtype;
        }
    }
    if (t == LLM_DTYPE_COUNT) {
        return llm_cli_fail("quantize: --type '%s': expected q8_0, q4_0, "
                            "q4_k, f32, f16 or bf16", type);
    }
    /* the engine tells a GGUF file from a model directory by its name */
    if (n <= 5 || strcmp(out + n - 5, ".gguf") != 0) {
        return llm_cli_fail("quantize: --out '%s': the file name must end "
                            "in .gguf", out);
    }
    m = llm_model_load(model, err);
    if (m == NULL) {
        return llm_cli_fail("quantize: %s", err);
    }
    if (llm_dtype_is_quantized(t)
        && llm_model_quantize(m, type, threads, err) != 0)
    {
        llm_model_free(m);
        return llm_cli_fail("quantize: %s: %s", model, err);
    }
    rc = llm_model_write_gguf(m, out, llm_dtype_is_quantized(t)
                                      ? LLM_DTYPE_COUNT : t, err);
    llm_model_free(m);
    if (rc != 0) {
        return llm_cli_fail("quantize: %s", err);
    }
    printf("wrote %s: %s, %.1f MB\n", out, llm_dtype_name(t),
           stat(out, &st) == 0 ? (double) st.st_size / 1e6 : 0.0);
    return 0;
}


int
llm_cmd_quantize(int argc, char **argv)
{
    const char  *model = llm_cli_opt(argc, argv, "--model");
    const char  *type = llm_cli_opt(argc, argv, "--type");
    const char  *out = llm_cli_opt(argc, argv, "--out");
    int          i, k;

    for (i = 1; i < argc; i += 2) {
        for (k = 0; llm_quant_opts[k] && strcmp(argv[i], llm_quant_opts[k]);
             k++)
        {
            /* void */
        }
        if (llm_quant_opts[k] == NULL || i + 1 >= argc) {
            return llm_cli_fail("quantize: %s '%s'", llm_quant_opts[k]
                                ? "no value for" : "unknown option", argv[i]);
        }
    }
    if (model == NULL || type == NULL || out == NULL) {
        return llm_cli_fail("usage: llm quantize --model DIR|FILE.gguf "
                            "--type q8_0|q4_0|q4_k|f32|f16|bf16 --out "
                            "FILE.gguf [--threads N]");
    }
    return llm_cli_quantize(model, type, out, llm_cli_threads(argc, argv));
}
