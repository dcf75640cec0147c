/*
 * gguf.h -- read-only access to GGUF files (versions 2 and 3) through mmap.
 *
 * A file is: "GGUF", a version, the tensor and key/value counts; the
 * key/value pairs (typed scalars, strings and arrays of them); one info per
 * tensor (name, dimensions, ggml type, offset); padding to
 * general.alignment (default 32); the data section, which every tensor's
 * offset is relative to.  All numbers are little-endian.
 *
 * llm_gguf_parse() checks every length, count and offset against the
 * buffer before it uses it, so a truncated, corrupt or hostile file gives a
 * message naming the problem and the byte offset, never a read outside the
 * buffer or an allocation larger than the file.  Strings and arrays point
 * into the buffer; nothing is copied.
 */
#ifndef LLM_GGUF_H
#define LLM_GGUF_H

#include <stddef.h>
#include <stdint.h>

#include "dtype.h"


typedef enum {
    LLM_GGUF_U8 = 0, LLM_GGUF_I8, LLM_GGUF_U16, LLM_GGUF_I16, LLM_GGUF_U32,
    LLM_GGUF_I32, LLM_GGUF_F32, LLM_GGUF_BOOL, LLM_GGUF_STRING,
    LLM_GGUF_ARRAY, LLM_GGUF_U64, LLM_GGUF_I64, LLM_GGUF_F64,
    LLM_GGUF_TYPE_COUNT
} llm_gguf_type;

/* a string inside the buffer: not NUL-terminated, may hold any bytes */
typedef struct {
    const char  *p;
    uint64_t     len;
} llm_gguf_str;

typedef struct {
    llm_gguf_str    key;
    llm_gguf_type   type;
    /* scalars: the value, little-endian, at `data` (STRING: *str);
     * ARRAY: `n` elements of `elem` at `data`, strings in str[0..n) */
    llm_gguf_type   elem;
    uint64_t        n;
    const void     *data;
    llm_gguf_str   *str;          /* ARRAY: allocated; STRING: &s */
    llm_gguf_str    s;
} llm_gguf_kv;

#define LLM_GGUF_MAX_DIMS 4

typedef struct {
    llm_gguf_str   name;
    int            n_dims;
    int64_t        ne[LLM_GGUF_MAX_DIMS];   /* ne[0] is the row length */
    uint32_t       ggml_type;
    int            dtype;                   /* an llm_dtype, -1: unsupported */
    const void    *data;                    /* NULL when dtype is -1 */
    size_t         size;                    /* bytes; 0 when dtype is -1 */
} llm_gguf_tensor;

typedef struct {
    char             *path;
    void             *map;          /* the mmap (NULL for a parsed buffer) */
    size_t            map_size;
    uint32_t          version;
    uint32_t          alignment;
    llm_gguf_kv      *kv;
    uint64_t          n_kv;
    llm_gguf_tensor  *tensors;      /* sorted by name */
    uint64_t          n_tensors;
} llm_gguf;

/* Maps PATH read-only and parses it.  NULL and "PATH: problem" in err. */
llm_gguf *llm_gguf_open(const char *path, char *err);
/* Parses buf[0..len) (kept by the caller while the result lives); `name`
 * prefixes messages. */
llm_gguf *llm_gguf_parse(const void *buf, size_t len, const char *name,
    char *err);
void llm_gguf_close(llm_gguf *g);

const llm_gguf_kv *llm_gguf_find(const llm_gguf *g, const char *key);
const llm_gguf_tensor *llm_gguf_find_tensor(const llm_gguf *g,
    const char *name);

/* Typed reads of key KEY: 1 found, 0 absent, -1 present with another type
 * (and a message in err).  get_int accepts every integer type whose value
 * fits; get_float F32 and F64; get_str a STRING (copied, NUL-terminated,
 * for the caller to free; -1 if it holds a NUL byte). */
int llm_gguf_get_int(const llm_gguf *g, const char *key, int64_t *out,
    char *err);
int llm_gguf_get_float(const llm_gguf *g, const char *key, double *out,
    char *err);
int llm_gguf_get_bool(const llm_gguf *g, const char *key, int *out,
    char *err);
int llm_gguf_get_str(const llm_gguf *g, const char *key, char **out,
    char *err);
/* an ARRAY of ELEM */
int llm_gguf_get_arr(const llm_gguf *g, const char *key, llm_gguf_type elem,
    const llm_gguf_kv **out, char *err);

/* ggml's type number of an llm_dtype (the writer's, gguf_write.h) */
uint32_t llm_gguf_ggml_type(llm_dtype t);
/* ggml's name of a tensor type ("Q4_K", "IQ2_XS"), or "type N" */
const char *llm_gguf_type_name(uint32_t ggml_type, char buf[32]);

#endif /* LLM_GGUF_H */
