/*
 * llama_quantize.c -- llama.cpp's own quantizer (llama_model_quantize in
 * node-llama-cpp's prebuilt libllama) as the reference for quantize on
 * load: a pure mixture (every matrix in one type, as llm_weights makes it),
 * with the token embedding kept at the input file's type, as ours is (or
 * given: EMBD_TYPE bf16 rounds an f32 file's embedding back to the bf16 a
 * directory holds, exactly, for files that `llm quantize` writes from it).
 *
 * With f32 it dequantizes a quantized file instead (ggml's to_float): the
 * exact values of the quantized weights, for a reference computed in f32.
 *
 *   llama_quantize IN.gguf OUT.gguf
 *       q8_0|q4_0|q4_k|q4_k_m|q5_k_m|q6_k|f32 [THREADS [EMBD_TYPE]]
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "llama.h"


int
main(int argc, char **argv)
{
    struct llama_model_quantize_params  p;
    enum ggml_type                      t;

    if (argc < 4) {
        fprintf(stderr, "usage: llama_quantize IN.gguf OUT.gguf "
                "q8_0|q4_0|q4_k|q4_k_m|q5_k_m|q6_k|f32 [THREADS "
                "[f32|f16|bf16]]\n");
        return 2;
    }
    p = llama_model_quantize_default_params();
    if (strcmp(argv[3], "q8_0") == 0) {
        p.ftype = LLAMA_FTYPE_MOSTLY_Q8_0;
        t = GGML_TYPE_Q8_0;
    } else if (strcmp(argv[3], "q4_0") == 0) {
        p.ftype = LLAMA_FTYPE_MOSTLY_Q4_0;
        t = GGML_TYPE_Q4_0;
    } else if (strcmp(argv[3], "q4_k") == 0) {
        p.ftype = LLAMA_FTYPE_MOSTLY_Q4_K_M;   /* pure: Q4_K everywhere */
        t = GGML_TYPE_Q4_K;
    } else if (strcmp(argv[3], "q4_k_m") == 0) {
        /* llama.cpp's own mixture (Q6_K for the output and some of
         * attn_v/ffn_down), for benchmarks: not what llm_weights makes */
        p.ftype = LLAMA_FTYPE_MOSTLY_Q4_K_M;
        t = GGML_TYPE_COUNT;
    } else if (strcmp(argv[3], "q5_k_m") == 0) {
        p.ftype = LLAMA_FTYPE_MOSTLY_Q5_K_M;    /* llama.cpp's mixtures */
        t = GGML_TYPE_COUNT;
    } else if (strcmp(argv[3], "q6_k") == 0) {
        p.ftype = LLAMA_FTYPE_MOSTLY_Q6_K;
        t = GGML_TYPE_COUNT;
    } else if (strcmp(argv[3], "f32") == 0) {
        p.ftype = LLAMA_FTYPE_ALL_F32;
        p.allow_requantize = true;
        t = GGML_TYPE_F32;
    } else {
        fprintf(stderr, "llama_quantize: unknown type %s\n", argv[3]);
        return 2;
    }
    if (t != GGML_TYPE_COUNT) {
        p.pure = true;
        p.output_tensor_type = t;
        p.token_embedding_type = GGML_TYPE_F32;
        if (argc > 5 && strcmp(argv[5], "bf16") == 0) {
            p.token_embedding_type = GGML_TYPE_BF16;
        } else if (argc > 5 && strcmp(argv[5], "f16") == 0) {
            p.token_embedding_type = GGML_TYPE_F16;
        }
    }
    p.nthread = argc > 4 ? atoi(argv[4]) : 2;
    llama_backend_init();
    if (llama_model_quantize(argv[1], argv[2], &p) != 0) {
        fprintf(stderr, "llama_quantize: llama_model_quantize failed\n");
        return 1;
    }
    return 0;
}
