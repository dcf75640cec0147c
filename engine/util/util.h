/*
 * util.h -- small helpers shared by every engine file: error messages,
 * whole-file reads, the monotonic clock, checked allocation.
 */
#ifndef LLM_UTIL_H
#define LLM_UTIL_H

#include <stddef.h>
#include <stdint.h>

#include "llm.h"

/* Formats a one-line message into err (LLM_ERR_LEN bytes); err may be NULL. */
void llm_errf(char *err, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* Reads a whole file, NUL-terminated; NULL and a message naming it in err. */
char *llm_read_file(const char *path, size_t *len, char *err);

/* dir + "/" + name into buf (PATH_MAX bytes). */
const char *llm_path_join(char *buf, const char *dir, const char *name);

int llm_file_exists(const char *path);

/* malloc/calloc/realloc that abort with a message on failure: the engine
 * cannot continue without memory, and every caller would do the same. */
void *llm_xmalloc(size_t n);
void *llm_xcalloc(size_t n, size_t size);
void *llm_xrealloc(void *p, size_t n);
char *llm_xstrdup(const char *s);

/* bf16/f16 <-> f32 conversions (round-to-nearest-even where narrowing). */
static inline float llm_bf16_to_f32(uint16_t h)
{
    union { uint32_t u; float f; } v = { (uint32_t) h << 16 };
    return v.f;
}

static inline uint16_t llm_f32_to_bf16(float f)
{
    union { float f; uint32_t u; } v = { f };
    if ((v.u & 0x7fffffff) > 0x7f800000) {
        return (uint16_t) ((v.u >> 16) | 0x40);     /* quiet NaN */
    }
    return (uint16_t) ((v.u + 0x7fff + ((v.u >> 16) & 1)) >> 16);
}

/* UTF-8 (utf8.c); llm_utf8_valid() is in llm.h. */
#define LLM_UTF8_REPLACEMENT  0xFFFDu

/* Length of the well-formed UTF-8 sequence at s[0..n), or 0 if s does not
 * start with one (Unicode 15, table 3-7). */
size_t llm_utf8_seq_len(const unsigned char *s, size_t n);
/* The maximal subpart at s[0..n) (which does not start a well-formed
 * sequence): how many bytes one U+FFFD replaces. */
size_t llm_utf8_subpart_len(const unsigned char *s, size_t n);
/* Decodes the character at s[i] of a string known to be valid UTF-8;
 * returns its byte length. */
size_t llm_utf8_decode(const char *s, size_t i, uint32_t *cp);
/* Length in bytes of the character starting with lead byte c (valid UTF-8). */
size_t llm_utf8_char_len(unsigned char c);
size_t llm_utf8_encode(uint32_t cp, char out[4]);

float llm_f16_to_f32(uint16_t h);
uint16_t llm_f32_to_f16(float f);

#endif /* LLM_UTIL_H */
