/*
 * safetensors.c -- mmap a .safetensors file and index its tensors.
 *
 * The mapping is private and read-only: weights stay in the page cache and
 * are shared by every process that maps the same file (nginx workers, the
 * old and new generation during a reload).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <yajl/yajl_tree.h>

#include "safetensors.h"
#include "util/util.h"


static int
llm_st_parse_dtype(const char *s, llm_dtype *t)
{
    if (strcmp(s, "F32") == 0) {
        *t = LLM_DTYPE_F32;
    } else if (strcmp(s, "F16") == 0) {
        *t = LLM_DTYPE_F16;
    } else if (strcmp(s, "BF16") == 0) {
        *t = LLM_DTYPE_BF16;
    } else {
        return -1;
    }
    return 0;
}


static int
llm_st_parse_tensor(llm_safetensors *st, const char *name, yajl_val v,
    const uint8_t *data, size_t data_size, llm_st_tensor *t, char *err)
{
    static const char  *dtype_path[] = { "dtype", NULL };
    static const char  *shape_path[] = { "shape", NULL };
    static const char  *offs_path[] = { "data_offsets", NULL };
    yajl_val            dt, shape, offs;
    size_t              i, n;
    int64_t             begin, end;

    dt = yajl_tree_get(v, dtype_path, yajl_t_string);
    shape = yajl_tree_get(v, shape_path, yajl_t_array);
    offs = yajl_tree_get(v, offs_path, yajl_t_array);
    if (dt == NULL || shape == NULL || offs == NULL
        || YAJL_GET_ARRAY(offs)->len != 2)
    {
        llm_errf(err, "%s: tensor \"%s\": header entry needs dtype, shape "
                 "and data_offsets", st->path, name);
        return -1;
    }
    if (llm_st_parse_dtype(YAJL_GET_STRING(dt), &t->dtype) != 0) {
        llm_errf(err, "%s: tensor \"%s\": unsupported dtype %s (supported: "
                 "BF16, F16, F32)", st->path, name, YAJL_GET_STRING(dt));
        return -1;
    }
    t->n_dims = (int) YAJL_GET_ARRAY(shape)->len;
    if (t->n_dims > LLM_MAX_DIMS) {
        llm_errf(err, "%s: tensor \"%s\": %d dimensions", st->path, name,
                 t->n_dims);
        return -1;
    }
    n = 1;
    for (i = 0; i < (size_t) t->n_dims; i++) {
        yajl_val  d = YAJL_GET_ARRAY(shape)->values[i];

        if (!YAJL_IS_INTEGER(d) || YAJL_GET_INTEGER(d) < 0) {
            llm_errf(err, "%s: tensor \"%s\": bad shape", st->path, name);
            return -1;
        }
        t->shape[i] = YAJL_GET_INTEGER(d);
        n *= (size_t) t->shape[i];
    }
    if (!YAJL_IS_INTEGER(YAJL_GET_ARRAY(offs)->values[0])
        || !YAJL_IS_INTEGER(YAJL_GET_ARRAY(offs)->values[1]))
    {
        llm_errf(err, "%s: tensor \"%s\": bad data_offsets", st->path, name);
        return -1;
    }
    begin = YAJL_GET_INTEGER(YAJL_GET_ARRAY(offs)->values[0]);
    end = YAJL_GET_INTEGER(YAJL_GET_ARRAY(offs)->values[1]);
    if (begin < 0 || end < begin || (size_t) end > data_size) {
        llm_errf(err, "%s: tensor \"%s\": data [%lld, %lld) lies outside the "
                 "file's %zu data bytes (truncated file?)", st->path, name,
                 (long long) begin, (long long) end, data_size);
        return -1;
    }
    if ((size_t) (end - begin) != n * llm_dtype_size(t->dtype)) {
        llm_errf(err, "%s: tensor \"%s\": %lld bytes do not match its shape "
                 "and dtype (%zu expected)", st->path, name,
                 (long long) (end - begin), n * llm_dtype_size(t->dtype));
        return -1;
    }
    t->name = llm_xstrdup(name);
    t->data = data + begin;
    t->size = (size_t) (end - begin);
    return 0;
}


llm_safetensors *
llm_safetensors_open(const char *path, char *err)
{
    llm_safetensors  *st;
    struct stat       sb;
    uint64_t          hlen;
    yajl_val          root;
    char             *hdr, ebuf[256];
    size_t            i, n;
    int               fd;

    fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        llm_errf(err, "%s: %s", path, strerror(errno));
        return NULL;
    }
    if (fstat(fd, &sb) != 0) {
        llm_errf(err, "%s: %s", path, strerror(errno));
        close(fd);
        return NULL;
    }
    if (sb.st_size < 8) {
        llm_errf(err, "%s: file too short for a safetensors header "
                 "(%lld bytes)", path, (long long) sb.st_size);
        close(fd);
        return NULL;
    }
    st = llm_xcalloc(1, sizeof(*st));
    st->path = llm_xstrdup(path);
    st->map_size = (size_t) sb.st_size;
    st->map = mmap(NULL, st->map_size, PROT_READ, MAP_PRIVATE, fd, 0);
    close(fd);
    if (st->map == MAP_FAILED) {
        llm_errf(err, "%s: mmap: %s", path, strerror(errno));
        st->map = NULL;
        llm_safetensors_close(st);
        return NULL;
    }

    memcpy(&hlen, st->map, 8);                 /* little-endian host */
    if (hlen > st->map_size - 8 || hlen > 100 * 1024 * 1024) {
        llm_errf(err, "%s: header length %llu exceeds the file size %zu "
                 "(truncated or not a safetensors file)", path,
                 (unsigned long long) hlen, st->map_size);
        llm_safetensors_close(st);
        return NULL;
    }
    hdr = llm_xmalloc(hlen + 1);
    memcpy(hdr, (char *) st->map + 8, hlen);
    hdr[hlen] = '\0';
    root = yajl_tree_parse(hdr, ebuf, sizeof(ebuf));
    free(hdr);
    if (root == NULL || !YAJL_IS_OBJECT(root)) {
        llm_errf(err, "%s: the header is not a JSON object", path);
        yajl_tree_free(root);
        llm_safetensors_close(st);
        return NULL;
    }

    n = YAJL_GET_OBJECT(root)->len;
    st->tensors = llm_xcalloc(n, sizeof(llm_st_tensor));
    for (i = 0; i < n; i++) {
        const char  *name = YAJL_GET_OBJECT(root)->keys[i];
        yajl_val     v = YAJL_GET_OBJECT(root)->values[i];

        if (strcmp(name, "__metadata__") == 0) {
            continue;
        }
        if (!YAJL_IS_OBJECT(v)) {
            llm_errf(err, "%s: tensor \"%s\": header entry is not an object",
                     path, name);
            goto fail;
        }
        if (llm_st_parse_tensor(st, name, v, (uint8_t *) st->map + 8 + hlen,
                                st->map_size - 8 - hlen,
                                &st->tensors[st->n_tensors], err) != 0)
        {
            goto fail;
        }
        st->n_tensors++;
    }
    yajl_tree_free(root);
    return st;

fail:
    yajl_tree_free(root);
    llm_safetensors_close(st);
    return NULL;
}


void
llm_safetensors_close(llm_safetensors *st)
{
    int  i;

    if (st == NULL) {
        return;
    }
    for (i = 0; i < st->n_tensors; i++) {
        free(st->tensors[i].name);
    }
    free(st->tensors);
    if (st->map) {
        munmap(st->map, st->map_size);
    }
    free(st->path);
    free(st);
}


const llm_st_tensor *
llm_safetensors_find(const llm_safetensors *st, const char *name)
{
    int  i;

    for (i = 0; i < st->n_tensors; i++) {
        if (strcmp(st->tensors[i].name, name) == 0) {
            return &st->tensors[i];
        }
    }
    return NULL;
}
