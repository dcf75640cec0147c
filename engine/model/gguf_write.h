/*
 * gguf_write.h -- writes GGUF version 3 files (the layout in gguf.h).
 *
 * The key/value pairs and the tensor infos are collected first (a writer
 * keeps them in memory); llm_gguf_writer_begin() writes the header, the
 * pairs, the infos and the padding, and the tensors' bytes follow through
 * llm_gguf_writer_data() in the order the tensors were added, in pieces of
 * any size, each tensor padded to the alignment.  So a tensor that is
 * converted row by row never needs a buffer of its own.
 *
 * The alignment is 32 (ggml's default, no key written) unless a
 * general.alignment (u32, a power of two) is among the pairs.  A mistake
 * (a key given twice, a row that is not a whole number of blocks) is kept
 * and reported by begin(), so that a caller adds its keys without checking
 * each one.
 */
#ifndef LLM_GGUF_WRITE_H
#define LLM_GGUF_WRITE_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "gguf.h"

typedef struct llm_gguf_writer llm_gguf_writer;

llm_gguf_writer *llm_gguf_writer_new(void);
void llm_gguf_writer_free(llm_gguf_writer *w);

/* key/value pairs, written in the order they are put */
void llm_gguf_put_u32(llm_gguf_writer *w, const char *key, uint32_t v);
void llm_gguf_put_f32(llm_gguf_writer *w, const char *key, float v);
void llm_gguf_put_bool(llm_gguf_writer *w, const char *key, int v);
void llm_gguf_put_str(llm_gguf_writer *w, const char *key, const char *s,
    size_t len);
/* an array of n scalars of type elem (not STRING or ARRAY) at data */
void llm_gguf_put_arr(llm_gguf_writer *w, const char *key,
    llm_gguf_type elem, const void *data, uint64_t n);
void llm_gguf_put_str_arr(llm_gguf_writer *w, const char *key,
    const llm_gguf_str *s, uint64_t n);
/* a pair of a parsed file, as it is */
void llm_gguf_put_kv(llm_gguf_writer *w, const llm_gguf_kv *kv);
/* 1 if the key has been put */
int llm_gguf_writer_has(const llm_gguf_writer *w, const char *key);

/* A tensor of n_dims dimensions, ne[0] the row length (a whole number of
 * the type's blocks), in ggml type ggml_type whose blocks are dtype's. */
void llm_gguf_add_tensor(llm_gguf_writer *w, const char *name, int n_dims,
    const int64_t *ne, llm_dtype dtype);

/* Writes everything before the tensors' bytes to f; -1 and a message in
 * err for a mistake kept since or a failed write. */
int llm_gguf_writer_begin(llm_gguf_writer *w, FILE *f, char *err);
/* The next n bytes of the tensors' data, in order. */
int llm_gguf_writer_data(llm_gguf_writer *w, const void *p, size_t n,
    char *err);
/* Checks that every tensor got its bytes and flushes f. */
int llm_gguf_writer_end(llm_gguf_writer *w, char *err);

#endif /* LLM_GGUF_WRITE_H */
