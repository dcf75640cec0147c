/*
 * dtype.c -- sizes and names of the stored element types (dtype.h).
 */
#include <assert.h>

#include "dtype.h"


static const struct {
    const char  *name;
    int          block;
    size_t       block_bytes;
} llm_dtypes[LLM_DTYPE_COUNT] = {
    [LLM_DTYPE_F32]  = { "F32",  1,   4 },
    [LLM_DTYPE_F16]  = { "F16",  1,   2 },
    [LLM_DTYPE_BF16] = { "BF16", 1,   2 },
    [LLM_DTYPE_Q8_0] = { "Q8_0", 32,  2 + 32 },
    [LLM_DTYPE_Q4_0] = { "Q4_0", 32,  2 + 16 },
    [LLM_DTYPE_Q4_K] = { "Q4_K", 256, 2 + 2 + 12 + 128 },
    [LLM_DTYPE_Q5_K] = { "Q5_K", 256, 2 + 2 + 12 + 32 + 128 },
    [LLM_DTYPE_Q6_K] = { "Q6_K", 256, 128 + 64 + 16 + 2 },
};


int
llm_dtype_block(llm_dtype t)
{
    return llm_dtypes[t].block;
}


size_t
llm_dtype_block_bytes(llm_dtype t)
{
    return llm_dtypes[t].block_bytes;
}


size_t
llm_dtype_row_bytes(llm_dtype t, size_t cols)
{
    return cols / (size_t) llm_dtypes[t].block * llm_dtypes[t].block_bytes;
}


size_t
llm_dtype_size(llm_dtype t)
{
    assert(llm_dtypes[t].block == 1);
    return llm_dtypes[t].block_bytes;
}


const char *
llm_dtype_name(llm_dtype t)
{
    return t >= 0 && t < LLM_DTYPE_COUNT ? llm_dtypes[t].name : "?";
}


int
llm_dtype_is_quantized(llm_dtype t)
{
    return llm_dtypes[t].block > 1;
}
