/*
 * wire.h -- the frames between an engine server and its clients
 * (server.c, client.c): a buffer that grows and is written or filled
 * without blocking, frame encoding, and a table of handles.
 *
 * A frame is a u32 length (the whole frame, a multiple of 8), a u32 type,
 * and the payload; arrays in a payload start at multiples of 8 from the
 * frame's start, so that a frame read into an aligned buffer is read in
 * place.  Both ends are the same build (the server is forked from a
 * client), so fixed-size structs travel as their bytes.
 */
#ifndef LLM_WIRE_H
#define LLM_WIRE_H

#include <stddef.h>
#include <stdint.h>

#include "llm.h"

enum {
    LLM_MSG_HELLO = 1,      /* server: u32 version, i32 max_model_len,
                               str device, str device_reason */
    LLM_MSG_SUBMIT,         /* client: u64 handle, u64 leader, f64 arrival,
                               f64 queued,
                               the prompt, the sampling parameters */
    LLM_MSG_CANCEL,         /* client: u64 handle, i32 billed */
    LLM_MSG_PAUSE,          /* client: u64 handle, i32 paused */
    LLM_MSG_OUTPUT,         /* server: u64 handle, one llm_output */
    LLM_MSG_RETIRE          /* server: submit no more; client: none will
                               come (the answer) */
};

#define LLM_WIRE_MAX_FRAME  ((uint32_t) 1 << 30)

typedef struct {
    uint8_t   *p;
    size_t     len;         /* bytes held */
    size_t     off;         /* bytes already written / consumed */
    size_t     cap;
} llm_wbuf;

void llm_wbuf_free(llm_wbuf *b);
void llm_wbuf_put(llm_wbuf *b, const void *p, size_t n);
void llm_wbuf_u32(llm_wbuf *b, uint32_t v);
void llm_wbuf_u64(llm_wbuf *b, uint64_t v);
void llm_wbuf_f64(llm_wbuf *b, double v);
/* pads to the next multiple of 8 from the start of the frame */
void llm_wbuf_align(llm_wbuf *b, size_t frame);
/* an array: u32 count, aligned, count * size bytes */
void llm_wbuf_array(llm_wbuf *b, size_t frame, const void *p, uint32_t n,
    size_t size);
/* a string with its NUL (u32 length + 1), or u32 0 for NULL */
void llm_wbuf_str(llm_wbuf *b, size_t frame, const char *s);
/* a frame: begin returns its start, end fills in the length and pads */
size_t llm_wbuf_begin(llm_wbuf *b, uint32_t type);
void llm_wbuf_end(llm_wbuf *b, size_t frame);

/* 0 all written, 1 the socket is full, -1 error */
int llm_wbuf_write(llm_wbuf *b, int fd);
/* reads what the socket has: 1 read something or nothing to read, 0 EOF,
 * -1 error */
int llm_wbuf_read(llm_wbuf *b, int fd);
/* the next whole frame in b (its type and payload), or NULL */
const uint8_t *llm_wbuf_frame(llm_wbuf *b, uint32_t *type, size_t *len);

/* reading a payload in place; bad is set on a short or malformed one */
typedef struct {
    const uint8_t  *frame;
    const uint8_t  *p;
    const uint8_t  *end;
    int             bad;
} llm_wread;

void llm_wread_init(llm_wread *r, const uint8_t *frame, size_t len);
uint32_t llm_wread_u32(llm_wread *r);
uint64_t llm_wread_u64(llm_wread *r);
double llm_wread_f64(llm_wread *r);
const void *llm_wread_bytes(llm_wread *r, size_t n);
const void *llm_wread_array(llm_wread *r, uint32_t *n, size_t size);
const char *llm_wread_str(llm_wread *r);

/* u64 handle -> pointer, open addressing; handle 0 is never stored */
typedef struct {
    uint64_t  *keys;
    void     **vals;
    size_t     cap;         /* a power of 2, or 0 */
    size_t     n;
} llm_htab;

void llm_htab_free(llm_htab *t);
void llm_htab_put(llm_htab *t, uint64_t k, void *v);
void *llm_htab_get(const llm_htab *t, uint64_t k);
void *llm_htab_del(llm_htab *t, uint64_t k);

/* the sampling parameters (arrays and strings included) after the frame's
 * header fields; llm_wire_get_params() points into the frame and into
 * *strs (malloc'd, free it after use) */
void llm_wire_put_params(llm_wbuf *b, size_t frame,
    const llm_sampling_params *p);
int llm_wire_get_params(llm_wread *r, llm_sampling_params *p,
    const char ***strs);
void llm_wire_put_output(llm_wbuf *b, size_t frame, const llm_output *o);
int llm_wire_get_output(llm_wread *r, llm_output *o);

#endif /* LLM_WIRE_H */
