/*
 * cu_weights.h -- where the CUDA backend's tensors live: one allocation for
 * the weights, one for the activation buffers, carved the same way on the
 * device and in the host reference.  And the list of model tensors to copy
 * into the weights (with q/k/v and gate/up concatenated).
 */
#ifndef LLM_CU_WEIGHTS_H
#define LLM_CU_WEIGHTS_H

#include "cu_state.h"

#ifdef __cplusplus
extern "C" {
#endif

/* One tensor to upload: `rows` x `cols` elements of src (its stored dtype)
 * into dst, a T matrix (vec == 0) or an f32 vector (vec == 1, rows == 1).
 * dst_row is the first row written (for the concatenated matrices). */
typedef struct {
    const llm_tensor  *src;
    void              *dst;
    int                dst_row;
    int                rows, cols;
    int                vec;
} llm_cu_seg;

/* Sets s's dimensions from the model (tsize, t_f16 chosen by the caller
 * before).  0, or -1 with the unsupported feature in err. */
int llm_cu_state_dims(llm_cu_state *s, const llm_model *m, char *err);

/* Carves the weights from base (NULL: just measures) and returns the bytes
 * needed; s->layers must hold n_layers entries. */
size_t llm_cu_weights_carve(llm_cu_state *s, const llm_model *m, char *base);

/* Carves the activation buffers for s->cap_tok / cap_logits / cap_part. */
size_t llm_cu_buffers_carve(llm_cu_state *s, char *base);

/* Fills segs (room for llm_cu_seg_count()) from the model; returns the
 * count.  Absent optional tensors (biases, q/k norms) are skipped. */
int llm_cu_seg_count(const llm_model *m);
int llm_cu_segments(const llm_cu_state *s, const llm_model *m,
    llm_cu_seg *segs);

/* HF's RoPE inverse frequencies, with Llama 3's scaling when configured:
 * the CPU backend's formula, in double, rounded to float. */

#ifdef __cplusplus
}
#endif

#endif /* LLM_CU_WEIGHTS_H */
