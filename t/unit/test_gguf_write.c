/*
 * test_gguf_write.c -- engine/model/gguf_write.c: a file written through
 * the writer (every value type, tensors of float and block types streamed
 * in uneven pieces) reads back through gguf.c with the same keys, values,
 * shapes, offsets and bytes; a parsed file's pairs copied with
 * llm_gguf_put_kv() come out the same; mistakes (a key given twice, a row
 * that is not a whole number of blocks, too many or too few bytes) are
 * refused with a message.
 */
#include <stdlib.h>
#include <string.h>

#include "llm.h"
#include "model/gguf.h"
#include "model/gguf_write.h"
#include "tap.h"


/* a: F32 [3, 2]; b: Q8_0 [64, 3] (6 blocks); c: F16 [5] */
static void
add_tensors(llm_gguf_writer *w)
{
    int64_t  a[2] = { 3, 2 }, b[2] = { 64, 3 }, c[1] = { 5 };

    llm_gguf_add_tensor(w, "a", 2, a, LLM_DTYPE_F32);
    llm_gguf_add_tensor(w, "b", 2, b, LLM_DTYPE_Q8_0);
    llm_gguf_add_tensor(w, "c", 1, c, LLM_DTYPE_F16);
}


/* a's 24 bytes, b's 204, c's 10: a counting pattern */
static void
data(unsigned char *d)
{
    int  i;

    for (i = 0; i < 24 + 204 + 10; i++) {
        d[i] = (unsigned char) (i * 7 + 1);
    }
}


static llm_gguf_writer *
full_writer(uint32_t align)
{
    static const llm_gguf_str  strs[2] = { { "", 0 }, { "h\xc3\xa9", 3 } };
    llm_gguf_writer  *w = llm_gguf_writer_new();
    int32_t           ints[3] = { -1, 2, 300000 };
    float             fl[2] = { 0.25f, -3.0f };

    llm_gguf_put_str(w, "general.architecture", "llama", 5);
    llm_gguf_put_u32(w, "x.u32", 4000000000u);
    llm_gguf_put_f32(w, "x.f32", 0.5f);
    llm_gguf_put_bool(w, "x.bool", 1);
    llm_gguf_put_arr(w, "x.ints", LLM_GGUF_I32, ints, 3);
    llm_gguf_put_arr(w, "x.floats", LLM_GGUF_F32, fl, 2);
    llm_gguf_put_str_arr(w, "x.strs", strs, 2);
    if (align) {
        llm_gguf_put_u32(w, "general.alignment", align);
    }
    add_tensors(w);
    return w;
}


/* the writer's file, the data streamed in pieces of `piece` bytes */
static int
write_file(llm_gguf_writer *w, size_t piece, char **buf, size_t *len,
    char *err)
{
    unsigned char  d[238];
    FILE          *f = open_memstream(buf, len);
    size_t         i, n;
    int            rc;

    data(d);
    rc = llm_gguf_writer_begin(w, f, err);
    for (i = 0; rc == 0 && i < sizeof(d); i += n) {
        n = sizeof(d) - i < piece ? sizeof(d) - i : piece;
        rc = llm_gguf_writer_data(w, d + i, n, err);
    }
    if (rc == 0) {
        rc = llm_gguf_writer_end(w, err);
    }
    fclose(f);
    return rc;
}


static void
test_round_trip(uint32_t align, size_t piece)
{
    llm_gguf_writer        *w = full_writer(align);
    const llm_gguf_tensor  *t;
    const llm_gguf_kv      *kv;
    unsigned char           d[238];
    char                    err[LLM_ERR_LEN] = "", *buf = NULL, *s = NULL;
    size_t                  len = 0;
    llm_gguf               *g;
    int64_t                 i64;
    double                  dv;
    int                     bv, rc;

    data(d);
    rc = write_file(w, piece, &buf, &len, err);
    llm_gguf_writer_free(w);
    g = rc == 0 ? llm_gguf_parse(buf, len, "w.gguf", err) : NULL;
    tap_ok(g != NULL, "alignment %u, data in pieces of %zu: written and "
           "parsed%s%s", align ? align : 32, piece, g ? "" : ": ", err);
    if (g == NULL) {
        free(buf);
        return;
    }
    tap_ok(g->version == 3 && g->alignment == (align ? align : 32)
           && g->n_kv == 7u + (align != 0) && g->n_tensors == 3,
           "  version 3, the alignment, the counts");
    tap_ok(llm_gguf_get_str(g, "general.architecture", &s, err) == 1
           && strcmp(s, "llama") == 0
           && llm_gguf_get_int(g, "x.u32", &i64, err) == 1
           && i64 == 4000000000ll
           && llm_gguf_get_float(g, "x.f32", &dv, err) == 1 && dv == 0.5
           && llm_gguf_get_bool(g, "x.bool", &bv, err) == 1 && bv == 1,
           "  string, u32, f32, bool");
    free(s);
    tap_ok(llm_gguf_get_arr(g, "x.ints", LLM_GGUF_I32, &kv, err) == 1
           && kv->n == 3 && memcmp((const char *) kv->data + 8,
                                   "\xe0\x93\x04\x00", 4) == 0
           && llm_gguf_get_arr(g, "x.floats", LLM_GGUF_F32, &kv, err) == 1
           && kv->n == 2
           && llm_gguf_get_arr(g, "x.strs", LLM_GGUF_STRING, &kv, err) == 1
           && kv->n == 2 && kv->str[0].len == 0 && kv->str[1].len == 3
           && memcmp(kv->str[1].p, "h\xc3\xa9", 3) == 0,
           "  i32, f32 and string arrays");
    t = llm_gguf_find_tensor(g, "a");
    tap_ok(t && t->dtype == LLM_DTYPE_F32 && t->n_dims == 2 && t->ne[0] == 3
           && t->ne[1] == 2 && t->size == 24 && memcmp(t->data, d, 24) == 0,
           "  F32 [3, 2]: shape and bytes");
    t = llm_gguf_find_tensor(g, "b");
    tap_ok(t && t->dtype == LLM_DTYPE_Q8_0 && t->ne[0] == 64 && t->ne[1] == 3
           && t->size == 204 && memcmp(t->data, d + 24, 204) == 0
           && ((const char *) t->data - buf) % g->alignment == 0,
           "  Q8_0 [64, 3]: 6 blocks, aligned");
    t = llm_gguf_find_tensor(g, "c");
    tap_ok(t && t->dtype == LLM_DTYPE_F16 && t->n_dims == 1 && t->size == 10
           && memcmp(t->data, d + 228, 10) == 0
           && len % g->alignment == 0, "  F16 [5], the file padded whole");

    /* a parsed file's pairs, copied, are the same bytes */
    {
        llm_gguf_writer  *c = llm_gguf_writer_new();
        char             *buf2 = NULL;
        size_t            len2 = 0;
        uint64_t          i;

        for (i = 0; i < g->n_kv; i++) {
            llm_gguf_put_kv(c, &g->kv[i]);
        }
        add_tensors(c);
        rc = write_file(c, 1000, &buf2, &len2, err);
        tap_ok(rc == 0 && len2 == len && memcmp(buf, buf2, len) == 0,
               "  its pairs copied with llm_gguf_put_kv(): the same file%s",
               rc ? err : "");
        llm_gguf_writer_free(c);
        free(buf2);
    }
    llm_gguf_close(g);
    free(buf);
}


static void
test_mistakes(void)
{
    llm_gguf_writer  *w;
    char              err[LLM_ERR_LEN] = "", *buf = NULL;
    size_t            len = 0;
    int64_t           ne[2] = { 48, 2 };
    FILE             *f;
    unsigned char     d[300] = { 0 };

    w = full_writer(0);
    llm_gguf_put_u32(w, "x.u32", 1);
    f = open_memstream(&buf, &len);
    tap_ok(llm_gguf_writer_begin(w, f, err) == -1
           && strstr(err, "x.u32 given twice") != NULL,
           "a key given twice: %s", err);
    fclose(f);
    free(buf);
    llm_gguf_writer_free(w);

    w = llm_gguf_writer_new();
    llm_gguf_add_tensor(w, "q", 2, ne, LLM_DTYPE_Q4_K);
    f = open_memstream(&buf, &len);
    tap_ok(llm_gguf_writer_begin(w, f, err) == -1
           && strstr(err, "tensor q: a row is not a whole number of blocks"),
           "a row of 48 in Q4_K: %s", err);
    fclose(f);
    free(buf);
    llm_gguf_writer_free(w);

    w = llm_gguf_writer_new();
    llm_gguf_put_u32(w, "general.alignment", 48);
    f = open_memstream(&buf, &len);
    tap_ok(llm_gguf_writer_begin(w, f, err) == -1
           && strstr(err, "general.alignment must be a power of two"),
           "an alignment of 48: %s", err);
    fclose(f);
    free(buf);
    llm_gguf_writer_free(w);

    w = full_writer(0);
    f = open_memstream(&buf, &len);
    tap_ok(llm_gguf_writer_begin(w, f, err) == 0
           && llm_gguf_writer_data(w, d, 239, err) == -1
           && strstr(err, "more bytes than the tensors hold"),
           "one byte too many: %s", err);
    fclose(f);
    free(buf);
    llm_gguf_writer_free(w);

    w = full_writer(0);
    f = open_memstream(&buf, &len);
    tap_ok(llm_gguf_writer_begin(w, f, err) == 0
           && llm_gguf_writer_data(w, d, 100, err) == 0
           && llm_gguf_writer_end(w, err) == -1
           && strstr(err, "tensor b is missing bytes"),
           "too few bytes: %s", err);
    fclose(f);
    free(buf);
    llm_gguf_writer_free(w);
}


int
main(void)
{
    test_round_trip(0, 238);
    test_round_trip(0, 1);
    test_round_trip(64, 7);
    test_mistakes();
    return tap_done();
}
