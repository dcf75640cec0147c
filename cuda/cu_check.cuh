/*
 * cu_check.cuh -- every CUDA and cuBLAS call of the backend goes through
 * LLM_CU_TRY, which turns a failure into a message with the call, the file
 * and the line:  if (LLM_CU_TRY(cudaMalloc(&p, n), err)) goto fail;
 * Kernel launches are checked with LLM_CU_LAUNCHED(err) right after.
 */
#ifndef LLM_CU_CHECK_CUH
#define LLM_CU_CHECK_CUH

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include "cu_util.h"

static inline int
llm_cu_check(cudaError_t e, const char *call, const char *file, int line,
    char *err)
{
    if (e == cudaSuccess) {
        return 0;
    }
    llm_cu_errf(err, "%s:%d: %s: %s (%s)", file, line, call,
                cudaGetErrorString(e), cudaGetErrorName(e));
    return -1;
}

static inline int
llm_cu_check(cublasStatus_t e, const char *call, const char *file, int line,
    char *err)
{
    if (e == CUBLAS_STATUS_SUCCESS) {
        return 0;
    }
    llm_cu_errf(err, "%s:%d: %s: %s (%s)", file, line, call,
                cublasGetStatusString(e), cublasGetStatusName(e));
    return -1;
}

#define LLM_CU_TRY(call, err)                                                \
    (llm_cu_check((call), #call, __FILE__, __LINE__, (err)) != 0)

#define LLM_CU_LAUNCHED(err)                                                 \
    (llm_cu_check(cudaGetLastError(), "kernel launch", __FILE__, __LINE__,   \
                  (err)) != 0)

#endif /* LLM_CU_CHECK_CUH */
