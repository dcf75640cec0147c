/*
 * dtype.h -- how a tensor's elements are stored: plain floats (f32, f16,
 * bf16: safetensors and GGUF) and GGUF's block formats (ggml's Q8_0, Q4_0,
 * Q4_K, Q5_K, Q6_K), where a row of `cols` elements is cols / block()
 * blocks of block_bytes() bytes each and `cols` is a multiple of block().
 */
#ifndef LLM_DTYPE_H
#define LLM_DTYPE_H

#include <stddef.h>

typedef enum {
    LLM_DTYPE_F32 = 0,
    LLM_DTYPE_F16,
    LLM_DTYPE_BF16,
    LLM_DTYPE_Q8_0,               /* 32 elements: f16 scale, 32 x int8 */
    LLM_DTYPE_Q4_0,               /* 32 elements: f16 scale, 16 bytes of nibbles */
    LLM_DTYPE_Q4_K,               /* 256 elements, 144 bytes */
    LLM_DTYPE_Q5_K,               /* 256 elements, 176 bytes */
    LLM_DTYPE_Q6_K,               /* 256 elements, 210 bytes */
    LLM_DTYPE_COUNT
} llm_dtype;

/* elements per block (1 for the float types) */
int llm_dtype_block(llm_dtype t);
/* bytes per block (the element size for the float types) */
size_t llm_dtype_block_bytes(llm_dtype t);
/* bytes of a row of cols elements; cols must be a multiple of block() */
size_t llm_dtype_row_bytes(llm_dtype t, size_t cols);
/* bytes of one element: the float types only (asserts otherwise) */
size_t llm_dtype_size(llm_dtype t);
/* "F32", "F16", "BF16", "Q8_0", "Q4_0", "Q4_K", "Q5_K", "Q6_K" */
const char *llm_dtype_name(llm_dtype t);
/* 1 for Q8_0 .. Q6_K */
int llm_dtype_is_quantized(llm_dtype t);

#endif /* LLM_DTYPE_H */
