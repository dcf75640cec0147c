/*
 * gguf.c -- parse a GGUF file in place (see gguf.h for the layout).
 *
 * One cursor walks the buffer; every read goes through llm_gguf_need(),
 * which compares the length with what is left (never pos + n, which could
 * wrap).  Counts read from the file bound allocations only after they are
 * checked against the bytes that could hold them.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "gguf.h"
#include "util/util.h"


typedef struct {
    const uint8_t  *buf;
    size_t          len;
    size_t          pos;
    const char     *name;
    char           *err;
} llm_gguf_cur;

/* a name from the file in a message: "%.*s", at most 200 bytes of it */
#define LLM_GGUF_SHOW(s)  (int) ((s).len > 200 ? 200 : (s).len), (s).p


/* ggml_type numbers (ggml.h); the gaps are retired types */
static const char *const  llm_ggml_names[] = {
    "F32", "F16", "Q4_0", "Q4_1", NULL, NULL, "Q5_0", "Q5_1", "Q8_0", "Q8_1",
    "Q2_K", "Q3_K", "Q4_K", "Q5_K", "Q6_K", "Q8_K", "IQ2_XXS", "IQ2_XS",
    "IQ3_XXS", "IQ1_S", "IQ4_NL", "IQ3_S", "IQ2_S", "IQ4_XS", "I8", "I16",
    "I32", "I64", "F64", "IQ1_M", "BF16", NULL, NULL, NULL, "TQ1_0", "TQ2_0",
    NULL, NULL, NULL, "MXFP4", "NVFP4", "Q1_0", "Q2_0"
};

/* the ggml types that have an llm_dtype */
static const struct { uint32_t ggml; llm_dtype dtype; }  llm_ggml_dtypes[] = {
    { 0, LLM_DTYPE_F32 }, { 1, LLM_DTYPE_F16 }, { 30, LLM_DTYPE_BF16 },
    { 8, LLM_DTYPE_Q8_0 }, { 2, LLM_DTYPE_Q4_0 }, { 12, LLM_DTYPE_Q4_K },
    { 13, LLM_DTYPE_Q5_K }, { 14, LLM_DTYPE_Q6_K },
};

/* bytes of one scalar of each type (0: STRING and ARRAY) */
static const uint8_t  llm_gguf_sizes[LLM_GGUF_TYPE_COUNT] = {
    1, 1, 2, 2, 4, 4, 4, 1, 0, 0, 8, 8, 8
};


uint32_t
llm_gguf_ggml_type(llm_dtype t)
{
    size_t  i;

    for (i = 0; i < sizeof(llm_ggml_dtypes) / sizeof(llm_ggml_dtypes[0]);
         i++)
    {
        if (llm_ggml_dtypes[i].dtype == t) {
            return llm_ggml_dtypes[i].ggml;
        }
    }
    return 0;                   /* every llm_dtype is in the table */
}


const char *
llm_gguf_type_name(uint32_t t, char buf[32])
{
    if (t < sizeof(llm_ggml_names) / sizeof(llm_ggml_names[0])
        && llm_ggml_names[t] != NULL)
    {
        return llm_ggml_names[t];
    }
    snprintf(buf, 32, "type %u", t);
    return buf;
}


static int
llm_gguf_fail(llm_gguf_cur *c, const char *fmt, ...)
{
    char     msg[LLM_ERR_LEN];
    va_list  ap;

    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    llm_errf(c->err, "%s: %s (at byte %zu)", c->name, msg, c->pos);
    return -1;
}


static const uint8_t *
llm_gguf_need(llm_gguf_cur *c, uint64_t n, const char *what)
{
    const uint8_t  *p;

    if (n > c->len - c->pos) {
        llm_gguf_fail(c, "truncated: %s needs %llu bytes, %zu left", what,
                      (unsigned long long) n, c->len - c->pos);
        return NULL;
    }
    p = c->buf + c->pos;
    c->pos += (size_t) n;
    return p;
}


static int
llm_gguf_u32(llm_gguf_cur *c, uint32_t *v, const char *what)
{
    const uint8_t  *p = llm_gguf_need(c, 4, what);

    if (p == NULL) {
        return -1;
    }
    memcpy(v, p, 4);
    return 0;
}


static int
llm_gguf_u64(llm_gguf_cur *c, uint64_t *v, const char *what)
{
    const uint8_t  *p = llm_gguf_need(c, 8, what);

    if (p == NULL) {
        return -1;
    }
    memcpy(v, p, 8);
    return 0;
}


static int
llm_gguf_string(llm_gguf_cur *c, llm_gguf_str *s, const char *what)
{
    if (llm_gguf_u64(c, &s->len, what) != 0) {
        return -1;
    }
    s->p = (const char *) llm_gguf_need(c, s->len, what);
    return s->p == NULL ? -1 : 0;
}


/* The value of kv (its type already read). */
static int
llm_gguf_value(llm_gguf_cur *c, llm_gguf_kv *kv)
{
    uint32_t  elem;
    uint64_t  i;

    if (kv->type >= LLM_GGUF_TYPE_COUNT) {
        return llm_gguf_fail(c, "key %.*s: unknown value type %u",
                             LLM_GGUF_SHOW(kv->key), kv->type);
    }
    if (kv->type == LLM_GGUF_STRING) {
        kv->str = &kv->s;
        kv->n = 1;
        return llm_gguf_string(c, kv->str, "a string value");
    }
    if (kv->type != LLM_GGUF_ARRAY) {
        kv->n = 1;
        kv->data = llm_gguf_need(c, llm_gguf_sizes[kv->type], "a value");
        return kv->data == NULL ? -1 : 0;
    }
    if (llm_gguf_u32(c, &elem, "an array type") != 0
        || llm_gguf_u64(c, &kv->n, "an array length") != 0)
    {
        return -1;
    }
    if (elem >= LLM_GGUF_TYPE_COUNT || elem == LLM_GGUF_ARRAY) {
        return llm_gguf_fail(c, "key %.*s: unsupported array element type "
                             "%u", LLM_GGUF_SHOW(kv->key), elem);
    }
    kv->elem = (llm_gguf_type) elem;
    if (elem != LLM_GGUF_STRING) {
        if (kv->n > (c->len - c->pos) / llm_gguf_sizes[elem]) {
            return llm_gguf_fail(c, "key %.*s: truncated: an array of %llu "
                                 "elements", LLM_GGUF_SHOW(kv->key),
                                 (unsigned long long) kv->n);
        }
        kv->data = llm_gguf_need(c, kv->n * llm_gguf_sizes[elem], "array");
        return 0;
    }
    /* each string takes at least its 8-byte length */
    if (kv->n > (c->len - c->pos) / 8) {
        return llm_gguf_fail(c, "key %.*s: truncated: an array of %llu "
                             "strings", LLM_GGUF_SHOW(kv->key),
                             (unsigned long long) kv->n);
    }
    kv->str = llm_xmalloc((size_t) (kv->n ? kv->n : 1)
                          * sizeof(llm_gguf_str));
    for (i = 0; i < kv->n; i++) {
        if (llm_gguf_string(c, &kv->str[i], "an array string") != 0) {
            return -1;
        }
    }
    return 0;
}


static int
llm_gguf_str_cmp(const llm_gguf_str *a, const llm_gguf_str *b)
{
    size_t  n = a->len < b->len ? a->len : b->len;
    int     r = memcmp(a->p, b->p, n);

    if (r != 0) {
        return r;
    }
    return a->len < b->len ? -1 : a->len > b->len;
}


static int
llm_gguf_tensor_cmp(const void *a, const void *b)
{
    return llm_gguf_str_cmp(&((const llm_gguf_tensor *) a)->name,
                            &((const llm_gguf_tensor *) b)->name);
}


static int
llm_gguf_kv_cmp(const void *a, const void *b)
{
    return llm_gguf_str_cmp(&(*(const llm_gguf_kv *const *) a)->key,
                            &(*(const llm_gguf_kv *const *) b)->key);
}


static int
llm_gguf_read_kvs(llm_gguf_cur *c, llm_gguf *g)
{
    llm_gguf_kv   *kv, **sorted;
    uint32_t       type;
    uint64_t       i;
    int            rc = 0;

    /* a pair takes at least 8 (key length) + 4 (type) + 1 bytes */
    if (g->n_kv > (c->len - c->pos) / 13) {
        return llm_gguf_fail(c, "truncated: %llu key/value pairs cannot fit",
                             (unsigned long long) g->n_kv);
    }
    g->kv = llm_xcalloc(g->n_kv ? g->n_kv : 1, sizeof(llm_gguf_kv));
    for (i = 0; i < g->n_kv; i++) {
        kv = &g->kv[i];
        if (llm_gguf_string(c, &kv->key, "a key") != 0
            || llm_gguf_u32(c, &type, "a value type") != 0)
        {
            g->n_kv = i + 1;
            return -1;
        }
        kv->type = (llm_gguf_type) type;
        if (llm_gguf_value(c, kv) != 0)
        {
            g->n_kv = i + 1;
            return -1;
        }
    }
    /* duplicate keys make lookups ambiguous: refused, as ggml does */
    sorted = llm_xmalloc((g->n_kv ? g->n_kv : 1) * sizeof(*sorted));
    for (i = 0; i < g->n_kv; i++) {
        sorted[i] = &g->kv[i];
    }
    qsort(sorted, g->n_kv, sizeof(*sorted), llm_gguf_kv_cmp);
    for (i = 1; i < g->n_kv; i++) {
        if (llm_gguf_str_cmp(&sorted[i - 1]->key, &sorted[i]->key) == 0) {
            rc = llm_gguf_fail(c, "duplicate key %.*s",
                               LLM_GGUF_SHOW(sorted[i]->key));
            break;
        }
    }
    free(sorted);
    return rc;
}


static int
llm_gguf_read_tensor_info(llm_gguf_cur *c, llm_gguf_tensor *t)
{
    uint32_t  n_dims;
    uint64_t  ne, total = 1;
    int       i;

    if (llm_gguf_string(c, &t->name, "a tensor name") != 0
        || llm_gguf_u32(c, &n_dims, "a tensor's dimension count") != 0)
    {
        return -1;
    }
    if (n_dims == 0 || n_dims > LLM_GGUF_MAX_DIMS) {
        return llm_gguf_fail(c, "tensor %.*s: %u dimensions (1 to %d)",
                             LLM_GGUF_SHOW(t->name), n_dims,
                             LLM_GGUF_MAX_DIMS);
    }
    t->n_dims = (int) n_dims;
    for (i = 0; i < LLM_GGUF_MAX_DIMS; i++) {
        t->ne[i] = 1;
    }
    for (i = 0; i < t->n_dims; i++) {
        if (llm_gguf_u64(c, &ne, "a tensor dimension") != 0) {
            return -1;
        }
        if (ne > (uint64_t) INT64_MAX || (ne != 0 && total > INT64_MAX / ne))
        {
            return llm_gguf_fail(c, "tensor %.*s: dimensions overflow",
                                 LLM_GGUF_SHOW(t->name));
        }
        t->ne[i] = (int64_t) ne;
        total *= ne;
    }
    return llm_gguf_u32(c, &t->ggml_type, "a tensor type");
}


/* The tensor's dtype, and its bytes inside data[0..len) at offset off. */
static int
llm_gguf_place_tensor(llm_gguf_cur *c, llm_gguf *g, llm_gguf_tensor *t,
    uint64_t off, const uint8_t *data, size_t len)
{
    size_t    i, rows = 1, row;
    int       block;
    llm_dtype dt;

    t->dtype = -1;
    for (i = 0; i < sizeof(llm_ggml_dtypes) / sizeof(llm_ggml_dtypes[0]);
         i++)
    {
        if (llm_ggml_dtypes[i].ggml == t->ggml_type) {
            t->dtype = (int) llm_ggml_dtypes[i].dtype;
        }
    }
    if (t->dtype < 0) {
        return 0;               /* the loader names it if it needs it */
    }
    dt = (llm_dtype) t->dtype;
    block = llm_dtype_block(dt);
    if (t->ne[0] % block != 0) {
        return llm_gguf_fail(c, "tensor %.*s: a row of %lld elements is not "
                             "a whole number of %s blocks (%d)",
                             LLM_GGUF_SHOW(t->name), (long long) t->ne[0],
                             llm_dtype_name(dt), block);
    }
    if ((uint64_t) t->ne[0] / (uint64_t) block
        > SIZE_MAX / llm_dtype_block_bytes(dt))
    {
        return llm_gguf_fail(c, "tensor %.*s: a row of %lld elements is too "
                             "long", LLM_GGUF_SHOW(t->name),
                             (long long) t->ne[0]);
    }
    row = llm_dtype_row_bytes(dt, (size_t) t->ne[0]);
    for (i = 1; i < (size_t) t->n_dims; i++) {
        rows *= (size_t) t->ne[i];
    }
    if (off % g->alignment != 0) {
        return llm_gguf_fail(c, "tensor %.*s: offset %llu is not a multiple "
                             "of the alignment %u", LLM_GGUF_SHOW(t->name),
                             (unsigned long long) off, g->alignment);
    }
    if ((row != 0 && rows > SIZE_MAX / row) || off > len
        || rows * row > len - off)
    {
        return llm_gguf_fail(c, "tensor %.*s: its data (%lld x %lld %s at "
                             "offset %llu) lies beyond the end of the file",
                             LLM_GGUF_SHOW(t->name), (long long) t->ne[0],
                             (long long) rows, llm_dtype_name(dt),
                             (unsigned long long) off);
    }
    t->data = data + off;
    t->size = rows * row;
    return 0;
}


static int
llm_gguf_read_tensors(llm_gguf_cur *c, llm_gguf *g)
{
    uint64_t  *offs, i;
    size_t     start;
    int        rc = -1;

    /* an info takes at least 8 + 4 + 8 + 4 + 8 bytes */
    if (g->n_tensors > (c->len - c->pos) / 32) {
        return llm_gguf_fail(c, "truncated: %llu tensor infos cannot fit",
                             (unsigned long long) g->n_tensors);
    }
    g->tensors = llm_xcalloc(g->n_tensors ? g->n_tensors : 1,
                             sizeof(llm_gguf_tensor));
    offs = llm_xmalloc((g->n_tensors ? g->n_tensors : 1) * sizeof(uint64_t));
    for (i = 0; i < g->n_tensors; i++) {
        if (llm_gguf_read_tensor_info(c, &g->tensors[i]) != 0
            || llm_gguf_u64(c, &offs[i], "a tensor offset") != 0)
        {
            goto done;
        }
    }
    /* the data section starts at the next multiple of the alignment */
    start = c->pos + (g->alignment - c->pos % g->alignment) % g->alignment;
    if (g->n_tensors > 0 && start > c->len) {
        c->pos = c->len;
        llm_gguf_fail(c, "truncated: the data section is missing");
        goto done;
    }
    c->pos = start > c->len ? c->len : start;
    for (i = 0; i < g->n_tensors; i++) {
        if (llm_gguf_place_tensor(c, g, &g->tensors[i], offs[i],
                                  c->buf + c->pos, c->len - c->pos) != 0)
        {
            goto done;
        }
    }
    qsort(g->tensors, g->n_tensors, sizeof(llm_gguf_tensor),
          llm_gguf_tensor_cmp);
    for (i = 1; i < g->n_tensors; i++) {
        if (llm_gguf_str_cmp(&g->tensors[i - 1].name, &g->tensors[i].name)
            == 0)
        {
            llm_gguf_fail(c, "duplicate tensor %.*s",
                          LLM_GGUF_SHOW(g->tensors[i].name));
            goto done;
        }
    }
    rc = 0;
done:
    free(offs);
    return rc;
}


llm_gguf *
llm_gguf_parse(const void *buf, size_t len, const char *name, char *err)
{
    llm_gguf_cur   c = { buf, len, 0, name, err };
    llm_gguf      *g;
    const uint8_t *magic;
    int64_t        align;

    g = llm_xcalloc(1, sizeof(*g));
    g->alignment = 32;
    magic = llm_gguf_need(&c, 4, "the magic");
    if (magic == NULL) {
        goto fail;
    }
    if (memcmp(magic, "GGUF", 4) != 0) {
        c.pos = 0;
        llm_gguf_fail(&c, "not a GGUF file (no \"GGUF\" magic)");
        goto fail;
    }
    if (llm_gguf_u32(&c, &g->version, "the version") != 0) {
        goto fail;
    }
    if (g->version != 2 && g->version != 3) {
        llm_gguf_fail(&c, "GGUF version %u is not supported (2 and 3 are)",
                      g->version);
        goto fail;
    }
    if (llm_gguf_u64(&c, &g->n_tensors, "the tensor count") != 0
        || llm_gguf_u64(&c, &g->n_kv, "the key/value count") != 0
        || llm_gguf_read_kvs(&c, g) != 0)
    {
        goto fail;
    }
    switch (llm_gguf_get_int(g, "general.alignment", &align, err)) {
    case -1:
        llm_gguf_fail(&c, "general.alignment must be a power of two (u32)");
        goto fail;
    case 1:
        if (llm_gguf_find(g, "general.alignment")->type != LLM_GGUF_U32
            || align == 0 || (align & (align - 1)) != 0)
        {
            llm_gguf_fail(&c, "general.alignment must be a power of two "
                          "(u32), not %lld", (long long) align);
            goto fail;
        }
        g->alignment = (uint32_t) align;
    }
    if (llm_gguf_read_tensors(&c, g) != 0) {
        goto fail;
    }
    return g;

fail:
    llm_gguf_close(g);
    return NULL;
}


llm_gguf *
llm_gguf_open(const char *path, char *err)
{
    struct stat  st;
    void        *map;
    int          fd;
    llm_gguf    *g;

    fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        llm_errf(err, "%s: %s", path, strerror(errno));
        return NULL;
    }
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_size == 0) {
        llm_errf(err, "%s: not a regular, non-empty file", path);
        close(fd);
        return NULL;
    }
    map = mmap(NULL, (size_t) st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
    close(fd);
    if (map == MAP_FAILED) {
        llm_errf(err, "%s: mmap: %s", path, strerror(errno));
        return NULL;
    }
    g = llm_gguf_parse(map, (size_t) st.st_size, path, err);
    if (g == NULL) {
        munmap(map, (size_t) st.st_size);
        return NULL;
    }
    g->map = map;
    g->map_size = (size_t) st.st_size;
    g->path = llm_xstrdup(path);
    return g;
}


void
llm_gguf_close(llm_gguf *g)
{
    uint64_t  i;

    if (g == NULL) {
        return;
    }
    for (i = 0; g->kv != NULL && i < g->n_kv; i++) {
        if (g->kv[i].type == LLM_GGUF_ARRAY) {
            free(g->kv[i].str);
        }
    }
    free(g->kv);
    free(g->tensors);
    if (g->map) {
        munmap(g->map, g->map_size);
    }
    free(g->path);
    free(g);
}


const llm_gguf_kv *
llm_gguf_find(const llm_gguf *g, const char *key)
{
    llm_gguf_str  k = { key, strlen(key) };
    uint64_t      i;

    for (i = 0; i < g->n_kv; i++) {
        if (llm_gguf_str_cmp(&g->kv[i].key, &k) == 0) {
            return &g->kv[i];
        }
    }
    return NULL;
}


const llm_gguf_tensor *
llm_gguf_find_tensor(const llm_gguf *g, const char *name)
{
    llm_gguf_tensor  key;

    key.name.p = name;
    key.name.len = strlen(name);
    return bsearch(&key, g->tensors, g->n_tensors, sizeof(llm_gguf_tensor),
                   llm_gguf_tensor_cmp);
}


static const char *const  llm_gguf_type_names[LLM_GGUF_TYPE_COUNT] = {
    "u8", "i8", "u16", "i16", "u32", "i32", "f32", "bool", "string", "array",
    "u64", "i64", "f64"
};


static int
llm_gguf_wrong(const llm_gguf_kv *kv, const char *key, const char *want,
    char *err)
{
    llm_errf(err, "GGUF key %s: expected %s, found %s", key, want,
             llm_gguf_type_names[kv->type]);
    return -1;
}


int
llm_gguf_get_int(const llm_gguf *g, const char *key, int64_t *out, char *err)
{
    const llm_gguf_kv  *kv = llm_gguf_find(g, key);
    const uint8_t      *p;
    uint64_t            u = 0;
    int64_t             s = 0;

    if (kv == NULL) {
        return 0;
    }
    p = kv->data;
    switch (kv->type) {
    case LLM_GGUF_U8:  *out = p[0]; return 1;
    case LLM_GGUF_I8:  *out = (int8_t) p[0]; return 1;
    case LLM_GGUF_U16: { uint16_t v; memcpy(&v, p, 2); *out = v; return 1; }
    case LLM_GGUF_I16: { int16_t v; memcpy(&v, p, 2); *out = v; return 1; }
    case LLM_GGUF_U32: { uint32_t v; memcpy(&v, p, 4); *out = v; return 1; }
    case LLM_GGUF_I32: { int32_t v; memcpy(&v, p, 4); *out = v; return 1; }
    case LLM_GGUF_I64: memcpy(&s, p, 8); *out = s; return 1;
    case LLM_GGUF_U64:
        memcpy(&u, p, 8);
        if (u > (uint64_t) INT64_MAX) {
            llm_errf(err, "GGUF key %s: %llu is too large", key,
                     (unsigned long long) u);
            return -1;
        }
        *out = (int64_t) u;
        return 1;
    default:
        return llm_gguf_wrong(kv, key, "an integer", err);
    }
}


int
llm_gguf_get_float(const llm_gguf *g, const char *key, double *out, char *err)
{
    const llm_gguf_kv  *kv = llm_gguf_find(g, key);
    float               f;

    if (kv == NULL) {
        return 0;
    }
    if (kv->type == LLM_GGUF_F32) {
        memcpy(&f, kv->data, 4);
        *out = f;
        return 1;
    }
    if (kv->type == LLM_GGUF_F64) {
        memcpy(out, kv->data, 8);
        return 1;
    }
    return llm_gguf_wrong(kv, key, "a float", err);
}


int
llm_gguf_get_bool(const llm_gguf *g, const char *key, int *out, char *err)
{
    const llm_gguf_kv  *kv = llm_gguf_find(g, key);

    if (kv == NULL) {
        return 0;
    }
    if (kv->type != LLM_GGUF_BOOL) {
        return llm_gguf_wrong(kv, key, "a bool", err);
    }
    *out = ((const uint8_t *) kv->data)[0] != 0;
    return 1;
}


int
llm_gguf_get_str(const llm_gguf *g, const char *key, char **out, char *err)
{
    const llm_gguf_kv  *kv = llm_gguf_find(g, key);

    if (kv == NULL) {
        return 0;
    }
    if (kv->type != LLM_GGUF_STRING) {
        return llm_gguf_wrong(kv, key, "a string", err);
    }
    if (memchr(kv->s.p, '\0', kv->s.len) != NULL) {
        llm_errf(err, "GGUF key %s: the string holds a NUL byte", key);
        return -1;
    }
    *out = llm_xmalloc(kv->s.len + 1);
    memcpy(*out, kv->s.p, kv->s.len);
    (*out)[kv->s.len] = '\0';
    return 1;
}


int
llm_gguf_get_arr(const llm_gguf *g, const char *key, llm_gguf_type elem,
    const llm_gguf_kv **out, char *err)
{
    const llm_gguf_kv  *kv = llm_gguf_find(g, key);

    if (kv == NULL) {
        return 0;
    }
    if (kv->type != LLM_GGUF_ARRAY || kv->elem != elem) {
        llm_errf(err, "GGUF key %s: expected an array of %s", key,
                 llm_gguf_type_names[elem]);
        return -1;
    }
    *out = kv;
    return 1;
}
