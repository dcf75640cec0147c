/*
 * test_gguf.c -- engine/model/gguf.c: a GGUF file written here, byte by
 * byte, reads back (every scalar and array type, alignment, tensor
 * placement); each prefix of it and a list of corruptions give an error
 * naming the problem, never a read outside the buffer (run under ASan by
 * `make asan`).
 */
#define _GNU_SOURCE             /* memmem */
#include <stdlib.h>
#include <string.h>

#include "llm.h"
#include "model/gguf.h"
#include "tap.h"


typedef struct {
    unsigned char  *p;
    size_t          len, cap;
} buf_t;


static void
put(buf_t *b, const void *s, size_t n)
{
    if (b->len + n > b->cap) {
        b->cap = (b->len + n) * 2;
        b->p = realloc(b->p, b->cap);
    }
    memcpy(b->p + b->len, s, n);
    b->len += n;
}

static void put_u32(buf_t *b, uint32_t v) { put(b, &v, 4); }
static void put_u64(buf_t *b, uint64_t v) { put(b, &v, 8); }

static void
put_str(buf_t *b, const char *s)
{
    put_u64(b, strlen(s));
    put(b, s, strlen(s));
}

static void
put_key(buf_t *b, const char *key, uint32_t type)
{
    put_str(b, key);
    put_u32(b, type);
}


/* The file's parts, so that tests can change one. */
typedef struct {
    uint32_t     version;
    uint64_t     n_tensors;
    uint32_t     align;          /* written as general.alignment */
    uint32_t     align_type;
    uint32_t     q8_type;        /* the type of tensor "c" */
    uint64_t     c_offset;       /* 0: where it belongs */
    uint64_t     c_ne0;
    const char  *dup_key;        /* a second key of this name */
    int          dup_tensor;
} spec_t;

static const spec_t  good = { 3, 4, 64, LLM_GGUF_U32, 8, 0, 64, NULL, 0 };


/* tensors: a F32 [4, 2] at 0, b F16 [8] at 64, c Q8_0 [c_ne0, 2] at 128,
 * d IQ4_XS [256] at 256 (a type without an llm_dtype) */
static buf_t
build(const spec_t *s)
{
    static const char  *names[] = { "a", "b", "c", "d" };
    buf_t     b = { NULL, 0, 0 };
    uint64_t  offs[4] = { 0, 64, 128, 256 };
    int32_t   arr[3] = { -1, 2, 300000 };
    float     f = 0.5f;
    double    d = 1e-6;
    uint8_t   u8 = 7, yes = 1;
    int       i, n_kv = 9 + (s->dup_key != NULL);

    if (s->c_offset) {
        offs[2] = s->c_offset;
    }
    put(&b, "GGUF", 4);
    put_u32(&b, s->version);
    put_u64(&b, s->n_tensors);
    put_u64(&b, (uint64_t) n_kv);
    put_key(&b, "general.architecture", LLM_GGUF_STRING);
    put_str(&b, "llama");
    put_key(&b, "general.alignment", s->align_type);
    put_u32(&b, s->align);
    put_key(&b, "x.u8", LLM_GGUF_U8);
    put(&b, &u8, 1);
    put_key(&b, "x.f32", LLM_GGUF_F32);
    put(&b, &f, 4);
    put_key(&b, "x.f64", LLM_GGUF_F64);
    put(&b, &d, 8);
    put_key(&b, "x.bool", LLM_GGUF_BOOL);
    put(&b, &yes, 1);
    put_key(&b, "x.u64", LLM_GGUF_U64);
    put_u64(&b, 1ull << 40);
    put_key(&b, "x.ints", LLM_GGUF_ARRAY);
    put_u32(&b, LLM_GGUF_I32);
    put_u64(&b, 3);
    put(&b, arr, sizeof(arr));
    put_key(&b, "x.strs", LLM_GGUF_ARRAY);
    put_u32(&b, LLM_GGUF_STRING);
    put_u64(&b, 2);
    put_str(&b, "");
    put_str(&b, "h\xc3\xa9");
    if (s->dup_key) {
        put_key(&b, s->dup_key, LLM_GGUF_U8);
        put(&b, &u8, 1);
    }
    for (i = 0; i < (int) s->n_tensors && i < 4; i++) {
        put_str(&b, s->dup_tensor && i == 3 ? "a" : names[i]);
        switch (i) {
        case 0: put_u32(&b, 2); put_u64(&b, 4); put_u64(&b, 2);
                put_u32(&b, 0); break;
        case 1: put_u32(&b, 1); put_u64(&b, 8); put_u32(&b, 1); break;
        case 2: put_u32(&b, 2); put_u64(&b, s->c_ne0); put_u64(&b, 2);
                put_u32(&b, s->q8_type); break;
        case 3: put_u32(&b, 1); put_u64(&b, 256); put_u32(&b, 23); break;
        }
        put_u64(&b, offs[i]);
    }
    while (b.len % s->align) {
        put(&b, "", 1);
    }
    for (i = 0; i < 256 + 136; i++) {            /* the data: its offsets */
        u8 = (uint8_t) i;
        put(&b, &u8, 1);
    }
    return b;
}


static void
test_good(void)
{
    buf_t               b = build(&good);
    char                err[LLM_ERR_LEN], *s = NULL;
    llm_gguf           *g = llm_gguf_parse(b.p, b.len, "t.gguf", err);
    const llm_gguf_kv  *kv;
    const llm_gguf_tensor *t;
    int64_t             i64;
    double              dv;
    int                 bv;

    tap_ok(g != NULL, "a well-formed file parses%s%s", g ? "" : ": ",
           g ? "" : err);
    if (g == NULL) {
        free(b.p);
        return;
    }
    tap_ok(g->version == 3 && g->alignment == 64 && g->n_kv == 9
           && g->n_tensors == 4, "header: version, alignment, counts");
    tap_ok(llm_gguf_get_str(g, "general.architecture", &s, err) == 1
           && strcmp(s, "llama") == 0, "a string value");
    free(s);
    tap_ok(llm_gguf_get_int(g, "x.u8", &i64, err) == 1 && i64 == 7
           && llm_gguf_get_int(g, "x.u64", &i64, err) == 1
           && i64 == 1ll << 40, "integers of two widths");
    tap_ok(llm_gguf_get_float(g, "x.f32", &dv, err) == 1 && dv == 0.5
           && llm_gguf_get_float(g, "x.f64", &dv, err) == 1 && dv == 1e-6,
           "f32 and f64");
    tap_ok(llm_gguf_get_bool(g, "x.bool", &bv, err) == 1 && bv == 1, "bool");
    tap_ok(llm_gguf_get_int(g, "x.missing", &i64, err) == 0, "absent key: 0");
    tap_ok(llm_gguf_get_int(g, "x.f32", &i64, err) == -1
           && strstr(err, "x.f32: expected an integer, found f32") != NULL,
           "wrong type: -1 and a message (%s)", err);
    tap_ok(llm_gguf_get_arr(g, "x.ints", LLM_GGUF_I32, &kv, err) == 1
           && kv->n == 3 && memcmp(kv->data, "\xff\xff\xff\xff", 4) == 0,
           "an i32 array in place");
    tap_ok(llm_gguf_get_arr(g, "x.strs", LLM_GGUF_STRING, &kv, err) == 1
           && kv->n == 2 && kv->str[0].len == 0 && kv->str[1].len == 3
           && memcmp(kv->str[1].p, "h\xc3\xa9", 3) == 0, "a string array");
    tap_ok(llm_gguf_get_arr(g, "x.strs", LLM_GGUF_I32, &kv, err) == -1,
           "an array of the wrong element type is refused");
    t = llm_gguf_find_tensor(g, "a");
    tap_ok(t && t->dtype == LLM_DTYPE_F32 && t->n_dims == 2 && t->ne[0] == 4
           && t->ne[1] == 2 && t->size == 32
           && t->data == b.p + b.len - 392, "F32 [4, 2] at the data start");
    t = llm_gguf_find_tensor(g, "b");
    tap_ok(t && t->dtype == LLM_DTYPE_F16 && t->size == 16
           && ((const unsigned char *) t->data)[0] == 64, "F16 at offset 64");
    t = llm_gguf_find_tensor(g, "c");
    tap_ok(t && t->dtype == LLM_DTYPE_Q8_0 && t->size == 2 * 2 * 34
           && ((const unsigned char *) t->data)[0] == 128,
           "Q8_0 [64, 2]: 4 blocks of 34 bytes at offset 128");
    t = llm_gguf_find_tensor(g, "d");
    tap_ok(t && t->dtype == -1 && t->data == NULL && t->ggml_type == 23,
           "IQ4_XS: listed, without an llm_dtype");
    tap_ok(llm_gguf_find_tensor(g, "e") == NULL, "an absent tensor");
    llm_gguf_close(g);

    /* every prefix that cuts tensor c's data or anything before fails with
     * a message, never reads past its end (d's type has no size known) */
    {
        size_t  n, bad = 0, end = b.len - 392 + 128 + 136;
        char    first[LLM_ERR_LEN] = "";

        for (n = 0; n < end; n++) {
            unsigned char  *copy = malloc(n ? n : 1);

            memcpy(copy, b.p, n);
            err[0] = '\0';
            g = llm_gguf_parse(copy, n, "t.gguf", err);
            if (g != NULL || strncmp(err, "t.gguf: ", 8) != 0) {
                bad++;
            }
            if (n == 100) {
                snprintf(first, sizeof(first), "%s", err);
            }
            llm_gguf_close(g);
            free(copy);
        }
        tap_ok(bad == 0, "each of the %zu prefixes is refused with a "
               "message (at 100 bytes: %s)", end, first);
    }
    free(b.p);
}


static void
expect(const spec_t *s, const char *what, const char *msg)
{
    buf_t      b = build(s);
    char       err[LLM_ERR_LEN] = "";
    llm_gguf  *g = llm_gguf_parse(b.p, b.len, "t.gguf", err);

    tap_ok(g == NULL && strstr(err, msg) != NULL, "%s: %s", what, err);
    llm_gguf_close(g);
    free(b.p);
}


static void
test_corrupt(void)
{
    spec_t  s;
    buf_t   b;
    char    err[LLM_ERR_LEN];
    size_t  at;

    s = good; s.version = 1;
    expect(&s, "version 1", "GGUF version 1 is not supported");
    s = good; s.align = 48;
    expect(&s, "alignment 48", "general.alignment must be a power of two");
    s = good; s.align_type = LLM_GGUF_I32;
    expect(&s, "alignment as i32", "general.alignment must be a power of two");
    s = good; s.c_offset = 130;
    expect(&s, "a misaligned offset", "offset 130 is not a multiple of the "
           "alignment 64");
    s = good; s.c_offset = 1 << 20;
    expect(&s, "an offset past the end", "lies beyond the end of the file");
    s = good; s.c_ne0 = 1ull << 61;
    expect(&s, "rows too long for the file", "lies beyond the end");
    s = good; s.c_ne0 = 48;
    expect(&s, "a Q8_0 row of 48", "not a whole number of Q8_0 blocks (32)");
    s = good; s.dup_key = "x.u8";
    expect(&s, "a duplicate key", "duplicate key x.u8");
    s = good; s.dup_tensor = 1;
    expect(&s, "a duplicate tensor", "duplicate tensor a");
    s = good; s.n_tensors = 1ull << 40;
    expect(&s, "2^40 tensors", "tensor infos cannot fit");

    /* fields patched in place */
    b = build(&good);
    memcpy(b.p, "GGUG", 4);
    tap_ok(llm_gguf_parse(b.p, b.len, "t.gguf", err) == NULL
           && strstr(err, "not a GGUF file") != NULL, "bad magic: %s", err);
    memcpy(b.p, "GGUF", 4);
    memset(b.p + 16, 0xff, 8);                  /* n_kv */
    tap_ok(llm_gguf_parse(b.p, b.len, "t.gguf", err) == NULL
           && strstr(err, "key/value pairs cannot fit") != NULL,
           "2^64 - 1 keys: %s", err);
    free(b.p);

    b = build(&good);
    at = 24;                                    /* the first key's length */
    memset(b.p + at, 0xee, 8);
    tap_ok(llm_gguf_parse(b.p, b.len, "t.gguf", err) == NULL
           && strstr(err, "truncated: a key needs") != NULL,
           "a huge key length: %s", err);
    free(b.p);

    b = build(&good);
    at = 24 + 8 + strlen("general.architecture");   /* its value type */
    b.p[at] = 13;
    tap_ok(llm_gguf_parse(b.p, b.len, "t.gguf", err) == NULL
           && strstr(err, "unknown value type 13") != NULL,
           "value type 13: %s", err);
    free(b.p);

    /* x.ints: its element type, then its count */
    b = build(&good);
    at = (size_t) ((unsigned char *) memmem(b.p, b.len, "x.ints", 6) - b.p)
         + 6 + 4;
    memset(b.p + at, LLM_GGUF_ARRAY, 1);
    tap_ok(llm_gguf_parse(b.p, b.len, "t.gguf", err) == NULL
           && strstr(err, "unsupported array element type 9") != NULL,
           "an array of arrays: %s", err);
    b.p[at] = LLM_GGUF_I32;
    memset(b.p + at + 4, 0x7f, 8);
    tap_ok(llm_gguf_parse(b.p, b.len, "t.gguf", err) == NULL
           && strstr(err, "truncated: an array of") != NULL,
           "an array count beyond the file: %s", err);
    free(b.p);

    /* tensor "a": 5 dimensions, then dimensions whose product overflows */
    b = build(&good);
    at = (size_t) ((unsigned char *) memmem(b.p, b.len, "\x01\0\0\0\0\0\0\0a",
                                           9) - b.p) + 9;
    b.p[at] = 5;
    tap_ok(llm_gguf_parse(b.p, b.len, "t.gguf", err) == NULL
           && strstr(err, "tensor a: 5 dimensions") != NULL,
           "5 dimensions: %s", err);
    b.p[at] = 2;
    memset(b.p + at + 4, 0xff, 7);
    memset(b.p + at + 12, 0xff, 7);
    tap_ok(llm_gguf_parse(b.p, b.len, "t.gguf", err) == NULL
           && strstr(err, "tensor a: dimensions overflow") != NULL,
           "2^56 x 2^56 elements: %s", err);
    free(b.p);
}


int
main(void)
{
    test_good();
    test_corrupt();
    return tap_done();
}
