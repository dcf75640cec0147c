/*
 * safetensors.h -- read-only access to .safetensors files through mmap.
 * A file is an 8-byte little-endian header length, a JSON header naming
 * each tensor's dtype, shape and byte range, then the raw data.
 */
#ifndef LLM_SAFETENSORS_H
#define LLM_SAFETENSORS_H

#include <stddef.h>
#include <stdint.h>

#include "dtype.h"


#define LLM_MAX_DIMS 4

typedef struct {
    char         *name;
    llm_dtype     dtype;
    int           n_dims;
    int64_t       shape[LLM_MAX_DIMS];
    const void   *data;                 /* inside the mapping */
    size_t        size;                 /* bytes */
} llm_st_tensor;

typedef struct {
    char         *path;
    void         *map;
    size_t        map_size;
    llm_st_tensor *tensors;
    int           n_tensors;
} llm_safetensors;

/* Maps and validates a file: every tensor's range lies inside the data
 * section and matches its dtype and shape.  NULL and a message naming the
 * file and the problem in err on failure. */
llm_safetensors *llm_safetensors_open(const char *path, char *err);
void llm_safetensors_close(llm_safetensors *st);

const llm_st_tensor *llm_safetensors_find(const llm_safetensors *st,
    const char *name);

#endif /* LLM_SAFETENSORS_H */
