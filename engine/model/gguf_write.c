/*
 * gguf_write.c -- GGUF version 3 out (see gguf_write.h): the pairs are
 * serialized into one growing buffer as they are put, the tensor infos kept
 * as a list whose offsets are fixed by begin(), and the data streamed.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "gguf_write.h"
#include "util/util.h"

#define LLM_GGUF_ALIGN  32

typedef struct {
    char      *name;
    int        n_dims;
    int64_t    ne[LLM_GGUF_MAX_DIMS];
    uint32_t   ggml_type;
    uint64_t   size;              /* bytes */
    uint64_t   offset;            /* in the data section */
} llm_gguf_winfo;

struct llm_gguf_writer {
    char             *kv;         /* the serialized pairs */
    size_t            kv_len, kv_cap;
    char            **keys;       /* to refuse a key given twice */
    uint64_t          n_kv;
    uint32_t          alignment;
    llm_gguf_winfo   *tensors;
    uint64_t          n_tensors;
    char              mistake[LLM_ERR_LEN];     /* the first one */
    FILE             *f;
    uint64_t          cur;        /* the tensor whose bytes come next */
    uint64_t          cur_done;   /* its bytes written so far */
};

/* bytes of one scalar of each value type (0: STRING and ARRAY) */
static const uint8_t  llm_gguf_wsizes[LLM_GGUF_TYPE_COUNT] = {
    1, 1, 2, 2, 4, 4, 4, 1, 0, 0, 8, 8, 8
};


llm_gguf_writer *
llm_gguf_writer_new(void)
{
    llm_gguf_writer  *w = llm_xcalloc(1, sizeof(*w));

    w->alignment = LLM_GGUF_ALIGN;
    return w;
}


void
llm_gguf_writer_free(llm_gguf_writer *w)
{
    uint64_t  i;

    if (w == NULL) {
        return;
    }
    for (i = 0; i < w->n_kv; i++) {
        free(w->keys[i]);
    }
    for (i = 0; i < w->n_tensors; i++) {
        free(w->tensors[i].name);
    }
    free(w->keys);
    free(w->tensors);
    free(w->kv);
    free(w);
}


static void
llm_gguf_w_put(llm_gguf_writer *w, const void *p, size_t n)
{
    if (n > w->kv_cap - w->kv_len) {
        w->kv_cap = (w->kv_len + n) * 2;
        w->kv = llm_xrealloc(w->kv, w->kv_cap);
    }
    memcpy(w->kv + w->kv_len, p, n);
    w->kv_len += n;
}


static void
llm_gguf_w_u32(llm_gguf_writer *w, uint32_t v)
{
    llm_gguf_w_put(w, &v, 4);
}


static void
llm_gguf_w_str(llm_gguf_writer *w, const char *s, uint64_t len)
{
    llm_gguf_w_put(w, &len, 8);
    llm_gguf_w_put(w, s, (size_t) len);
}


static void
llm_gguf_w_mistake(llm_gguf_writer *w, const char *fmt, const char *what)
{
    if (w->mistake[0] == '\0') {
        llm_errf(w->mistake, fmt, what);
    }
}


int
llm_gguf_writer_has(const llm_gguf_writer *w, const char *key)
{
    uint64_t  i;

    for (i = 0; i < w->n_kv; i++) {
        if (strcmp(w->keys[i], key) == 0) {
            return 1;
        }
    }
    return 0;
}


/* The key and its type; 0, or -1 (the mistake kept) for a key given
 * twice. */
static int
llm_gguf_w_key(llm_gguf_writer *w, const char *key, size_t len,
    llm_gguf_type type)
{
    char  *k = llm_xmalloc(len + 1);

    memcpy(k, key, len);
    k[len] = '\0';
    if (strlen(k) != len || llm_gguf_writer_has(w, k)) {
        llm_gguf_w_mistake(w, "GGUF key %.200s given twice or with a NUL "
                           "byte", k);
        free(k);
        return -1;
    }
    w->keys = llm_xrealloc(w->keys, (size_t) (w->n_kv + 1) * sizeof(char *));
    w->keys[w->n_kv++] = k;
    llm_gguf_w_str(w, key, len);
    llm_gguf_w_u32(w, type);
    return 0;
}


/* general.alignment sets the writer's: a u32 power of two, as gguf.c
 * reads it */
static void
llm_gguf_w_alignment(llm_gguf_writer *w, llm_gguf_type type, const void *v)
{
    uint32_t  a = 0;

    if (type == LLM_GGUF_U32) {
        memcpy(&a, v, 4);
    }
    if (a == 0 || (a & (a - 1)) != 0) {
        llm_gguf_w_mistake(w, "%s must be a power of two (u32)",
                           "general.alignment");
    } else {
        w->alignment = a;
    }
}


void
llm_gguf_put_u32(llm_gguf_writer *w, const char *key, uint32_t v)
{
    if (llm_gguf_w_key(w, key, strlen(key), LLM_GGUF_U32) == 0) {
        llm_gguf_w_put(w, &v, 4);
        if (strcmp(key, "general.alignment") == 0) {
            llm_gguf_w_alignment(w, LLM_GGUF_U32, &v);
        }
    }
}


void
llm_gguf_put_f32(llm_gguf_writer *w, const char *key, float v)
{
    if (llm_gguf_w_key(w, key, strlen(key), LLM_GGUF_F32) == 0) {
        llm_gguf_w_put(w, &v, 4);
    }
}


void
llm_gguf_put_bool(llm_gguf_writer *w, const char *key, int v)
{
    uint8_t  b = v != 0;

    if (llm_gguf_w_key(w, key, strlen(key), LLM_GGUF_BOOL) == 0) {
        llm_gguf_w_put(w, &b, 1);
    }
}


void
llm_gguf_put_str(llm_gguf_writer *w, const char *key, const char *s,
    size_t len)
{
    if (llm_gguf_w_key(w, key, strlen(key), LLM_GGUF_STRING) == 0) {
        llm_gguf_w_str(w, s, len);
    }
}


void
llm_gguf_put_arr(llm_gguf_writer *w, const char *key, llm_gguf_type elem,
    const void *data, uint64_t n)
{
    if (elem >= LLM_GGUF_TYPE_COUNT || llm_gguf_wsizes[elem] == 0) {
        llm_gguf_w_mistake(w, "GGUF key %.200s: not an array of scalars",
                           key);
        return;
    }
    if (llm_gguf_w_key(w, key, strlen(key), LLM_GGUF_ARRAY) == 0) {
        llm_gguf_w_u32(w, elem);
        llm_gguf_w_put(w, &n, 8);
        llm_gguf_w_put(w, data, (size_t) n * llm_gguf_wsizes[elem]);
    }
}


static void
llm_gguf_w_strs(llm_gguf_writer *w, const llm_gguf_str *s, uint64_t n)
{
    uint64_t  i;

    llm_gguf_w_u32(w, LLM_GGUF_STRING);
    llm_gguf_w_put(w, &n, 8);
    for (i = 0; i < n; i++) {
        llm_gguf_w_str(w, s[i].p, s[i].len);
    }
}


void
llm_gguf_put_str_arr(llm_gguf_writer *w, const char *key,
    const llm_gguf_str *s, uint64_t n)
{
    if (llm_gguf_w_key(w, key, strlen(key), LLM_GGUF_ARRAY) == 0) {
        llm_gguf_w_strs(w, s, n);
    }
}


void
llm_gguf_put_kv(llm_gguf_writer *w, const llm_gguf_kv *kv)
{
    if (llm_gguf_w_key(w, kv->key.p, (size_t) kv->key.len, kv->type) != 0) {
        return;
    }
    if (kv->type == LLM_GGUF_STRING) {
        llm_gguf_w_str(w, kv->s.p, kv->s.len);
    } else if (kv->type != LLM_GGUF_ARRAY) {
        llm_gguf_w_put(w, kv->data, llm_gguf_wsizes[kv->type]);
    } else if (kv->elem == LLM_GGUF_STRING) {
        llm_gguf_w_strs(w, kv->str, kv->n);
    } else {
        llm_gguf_w_u32(w, kv->elem);
        llm_gguf_w_put(w, &kv->n, 8);
        llm_gguf_w_put(w, kv->data, (size_t) kv->n
                                    * llm_gguf_wsizes[kv->elem]);
    }
    if (kv->key.len == 17 && memcmp(kv->key.p, "general.alignment", 17) == 0)
    {
        llm_gguf_w_alignment(w, kv->type, kv->data);
    }
}


void
llm_gguf_add_tensor(llm_gguf_writer *w, const char *name, int n_dims,
    const int64_t *ne, llm_dtype dtype)
{
    llm_gguf_winfo  *t;
    uint64_t         rows = 1;
    int              i;

    if (n_dims < 1 || n_dims > LLM_GGUF_MAX_DIMS || ne[0] < 0
        || ne[0] % llm_dtype_block(dtype) != 0)
    {
        llm_gguf_w_mistake(w, "tensor %.200s: a row is not a whole number "
                           "of blocks", name);
        return;
    }
    w->tensors = llm_xrealloc(w->tensors, (size_t) (w->n_tensors + 1)
                                          * sizeof(*w->tensors));
    t = &w->tensors[w->n_tensors++];
    memset(t, 0, sizeof(*t));
    t->name = llm_xstrdup(name);
    t->n_dims = n_dims;
    for (i = 0; i < n_dims; i++) {
        t->ne[i] = ne[i];
        if (i > 0) {
            rows *= (uint64_t) ne[i];
        }
    }
    t->ggml_type = llm_gguf_ggml_type(dtype);
    t->size = llm_dtype_row_bytes(dtype, (size_t) ne[0]) * rows;
}


static int
llm_gguf_w_write(llm_gguf_writer *w, const void *p, size_t n, char *err)
{
    if (n > 0 && fwrite(p, 1, n, w->f) != n) {
        llm_errf(err, "write: %s", strerror(errno ? errno : EIO));
        return -1;
    }
    return 0;
}


static int
llm_gguf_w_pad(llm_gguf_writer *w, uint64_t pos, char *err)
{
    static const char  zeros[256];
    size_t             n = (size_t) ((w->alignment - pos % w->alignment)
                                     % w->alignment);

    while (n > 0) {
        size_t  k = n < sizeof(zeros) ? n : sizeof(zeros);

        if (llm_gguf_w_write(w, zeros, k, err) != 0) {
            return -1;
        }
        n -= k;
    }
    return 0;
}


int
llm_gguf_writer_begin(llm_gguf_writer *w, FILE *f, char *err)
{
    llm_gguf_winfo  *t;
    uint64_t         i, off = 0, pos;
    uint32_t         version = 3;
    int              d;
    char            *hdr = NULL;
    size_t           hlen = 0;
    FILE            *h;

    if (w->mistake[0] != '\0') {
        llm_errf(err, "%s", w->mistake);
        return -1;
    }
    w->f = f;
    h = open_memstream(&hdr, &hlen);
    if (h == NULL) {
        llm_errf(err, "out of memory");
        return -1;
    }
    fwrite("GGUF", 1, 4, h);
    fwrite(&version, 4, 1, h);
    fwrite(&w->n_tensors, 8, 1, h);
    fwrite(&w->n_kv, 8, 1, h);
    fwrite(w->kv, 1, w->kv_len, h);
    for (i = 0; i < w->n_tensors; i++) {
        t = &w->tensors[i];
        t->offset = off;
        off += t->size + (w->alignment - t->size % w->alignment)
                         % w->alignment;
        pos = strlen(t->name);
        fwrite(&pos, 8, 1, h);
        fwrite(t->name, 1, (size_t) pos, h);
        fwrite(&t->n_dims, 4, 1, h);
        for (d = 0; d < t->n_dims; d++) {
            fwrite(&t->ne[d], 8, 1, h);
        }
        fwrite(&t->ggml_type, 4, 1, h);
        fwrite(&t->offset, 8, 1, h);
    }
    fclose(h);
    w->cur = 0;
    w->cur_done = 0;
    if (llm_gguf_w_write(w, hdr, hlen, err) != 0
        || llm_gguf_w_pad(w, hlen, err) != 0)
    {
        free(hdr);
        return -1;
    }
    free(hdr);
    return 0;
}


/* past every tensor that has all its bytes, padding each */
static int
llm_gguf_w_advance(llm_gguf_writer *w, char *err)
{
    while (w->cur < w->n_tensors
           && w->cur_done == w->tensors[w->cur].size)
    {
        if (llm_gguf_w_pad(w, w->cur_done, err) != 0) {
            return -1;
        }
        w->cur++;
        w->cur_done = 0;
    }
    return 0;
}


int
llm_gguf_writer_data(llm_gguf_writer *w, const void *p, size_t n, char *err)
{
    const char  *s = p;
    uint64_t     k;

    while (n > 0) {
        if (llm_gguf_w_advance(w, err) != 0) {
            return -1;
        }
        if (w->cur == w->n_tensors) {
            llm_errf(err, "internal error: more bytes than the tensors "
                     "hold");
            return -1;
        }
        k = w->tensors[w->cur].size - w->cur_done;
        k = k < n ? k : n;
        if (llm_gguf_w_write(w, s, (size_t) k, err) != 0) {
            return -1;
        }
        w->cur_done += k;
        s += k;
        n -= (size_t) k;
    }
    return llm_gguf_w_advance(w, err);
}


int
llm_gguf_writer_end(llm_gguf_writer *w, char *err)
{
    if (llm_gguf_w_advance(w, err) != 0) {
        return -1;
    }
    if (w->cur != w->n_tensors) {
        llm_errf(err, "internal error: tensor %s is missing bytes",
                 w->tensors[w->cur].name);
        return -1;
    }
    if (fflush(w->f) != 0 || ferror(w->f)) {
        llm_errf(err, "write: %s", strerror(errno ? errno : EIO));
        return -1;
    }
    return 0;
}
