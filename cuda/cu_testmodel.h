/*
 * cu_testmodel.h -- a random-weight llm_model built in memory, for the tests
 * of the CUDA backend's reference (on the CPU) and of its kernels (on a
 * GPU): no files, no tokenizer, any shape.  The weights follow make-model's
 * scaling (docs/models.md): projections of std 1/sqrt(fan_in), norms 1 with
 * 10% noise, so activations stay O(1) and the logits are well spread.
 */
#ifndef LLM_CU_TESTMODEL_H
#define LLM_CU_TESTMODEL_H

#include <stdint.h>

#include "model/model.h"

typedef struct {
    llm_arch     arch;
    int          layers, hidden, heads, kv_heads, head_dim, intermediate;
    int          vocab;
    llm_dtype    dtype;
    int          tie;
    int          rope_llama3;
    int          window;            /* sliding window (Mistral), 0: none */
    uint64_t     seed;
} llm_cu_test_spec;

llm_model *llm_cu_test_model(const llm_cu_test_spec *sp);
void llm_cu_test_model_free(llm_model *m);

#endif /* LLM_CU_TESTMODEL_H */
