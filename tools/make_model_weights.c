/*
 * make_model_weights.c -- the random weights of `llm make-model`, written as
 * safetensors by hand (an 8-byte little-endian header length, the JSON
 * header padded with spaces to 8 bytes, then the tensors back to back).
 *
 * Scale.  The weights are chosen so that a random model behaves like a
 * trained one where the tests look: the residual stream stays O(1) through
 * the layers (projections have std 1/sqrt(fan_in)), norm weights are 1 with
 * 10% noise, and the logits spread over roughly +-20..60, so the argmax at
 * each position is well separated and greedy generation is not a sequence
 * of near-ties.  Untied: lm_head has std 4/sqrt(hidden), giving logits of
 * std ~4 whose maximum over a 128k vocabulary is ~20.  Tied: the embedding
 * (std 1) is the lm_head, logits have std ~sqrt(hidden).
 *
 * Speed.  A 360M-parameter model must be written in seconds: values come
 * from xoshiro256** and an Irwin-Hall approximation of a normal deviate
 * (the sum of four 16-bit uniforms from one 64-bit draw), no libm calls.
 */
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "make_model.h"
#include "sampler.h"
#include "util/util.h"

typedef enum {
    MM_GAUSS,                    /* std * N(0,1) */
    MM_NORM,                     /* 1 + std * N(0,1) */
} mm_kind;

typedef struct {
    char          name[96];
    int64_t       shape[2];      /* shape[1] == 0: a vector */
    mm_kind       kind;
    float         std;
    int           shard;
    uint64_t      offset;        /* within its shard's data section */
} mm_tensor;

/* Each tensor gets its own stream (the sampler's xoshiro256**), keyed by
 * the seed and its name, so its values do not depend on the order or the
 * sharding of the file. */
static void
mm_rng_init(llm_rng *r, uint64_t seed, const char *name)
{
    uint64_t  h = 0xcbf29ce484222325ULL;     /* FNV-1a */

    for (; *name; name++) {
        h = (h ^ (unsigned char) *name) * 0x100000001b3ULL;
    }
    llm_rng_seed(r, h ^ (seed * 0x9e3779b97f4a7c15ULL));
}


/* Approximately N(0,1): four U(0,1) sum to mean 2, variance 1/3. */
static inline float
mm_rng_gauss(llm_rng *r)
{
    uint64_t  x = llm_rng_next(r);
    uint32_t  sum;

    sum = (uint32_t) (x & 0xffff) + (uint32_t) ((x >> 16) & 0xffff)
          + (uint32_t) ((x >> 32) & 0xffff) + (uint32_t) (x >> 48);
    return ((float) sum * (1.0f / 65536.0f) - 2.0f) * 1.7320508f;
}


const char *
llm_mm_dtype_name(llm_mm_dtype d)
{
    switch (d) {
    case LLM_MM_F16:  return "F16";
    case LLM_MM_F32:  return "F32";
    default:          return "BF16";
    }
}


static size_t
mm_dtype_size(llm_mm_dtype d)
{
    return d == LLM_MM_F32 ? 4 : 2;
}


static void
mm_add(mm_tensor *t, int *n, const char *name, int64_t rows, int64_t cols,
    mm_kind kind, float std)
{
    mm_tensor  *x = &t[(*n)++];

    snprintf(x->name, sizeof(x->name), "%s", name);
    x->shape[0] = rows;
    x->shape[1] = cols;
    x->kind = kind;
    x->std = std;
}


/* The Hugging Face tensor names and shapes of the architecture. */
static int
mm_tensor_list(const llm_mm_spec *s, mm_tensor *t)
{
    int    n = 0, l;
    int64_t qd = (int64_t) s->heads * s->head_dim;
    int64_t kvd = (int64_t) s->kv_heads * s->head_dim;
    char   p[64], name[96];
    float  sh = 1.0f / sqrtf((float) s->hidden);

#define MM_L(suffix, r, c, kind, std)                                        \
    (snprintf(name, sizeof(name), "%s%s", p, suffix),                        \
     mm_add(t, &n, name, r, c, kind, std))

    mm_add(t, &n, "model.embed_tokens.weight", s->vocab, s->hidden,
           MM_GAUSS, 1.0f);
    for (l = 0; l < s->layers; l++) {
        snprintf(p, sizeof(p), "model.layers.%d.", l);
        MM_L("input_layernorm.weight", s->hidden, 0, MM_NORM, 0.1f);
        MM_L("self_attn.q_proj.weight", qd, s->hidden, MM_GAUSS, sh);
        MM_L("self_attn.k_proj.weight", kvd, s->hidden, MM_GAUSS, sh);
        MM_L("self_attn.v_proj.weight", kvd, s->hidden, MM_GAUSS, sh);
        if (s->qkv_bias) {
            /* Qwen2's k bias is large in trained models; 0.5 makes a
             * missing or misplaced bias visible in the logits. */
            MM_L("self_attn.q_proj.bias", qd, 0, MM_GAUSS, 0.5f);
            MM_L("self_attn.k_proj.bias", kvd, 0, MM_GAUSS, 0.5f);
            MM_L("self_attn.v_proj.bias", kvd, 0, MM_GAUSS, 0.5f);
        }
        if (s->qk_norm) {
            MM_L("self_attn.q_norm.weight", s->head_dim, 0, MM_NORM, 0.1f);
            MM_L("self_attn.k_norm.weight", s->head_dim, 0, MM_NORM, 0.1f);
        }
        MM_L("self_attn.o_proj.weight", s->hidden, qd, MM_GAUSS,
             1.0f / sqrtf((float) qd));
        MM_L("post_attention_layernorm.weight", s->hidden, 0, MM_NORM, 0.1f);
        MM_L("mlp.gate_proj.weight", s->intermediate, s->hidden, MM_GAUSS,
             sh);
        MM_L("mlp.up_proj.weight", s->intermediate, s->hidden, MM_GAUSS, sh);
        MM_L("mlp.down_proj.weight", s->hidden, s->intermediate, MM_GAUSS,
             1.0f / sqrtf((float) s->intermediate));
    }
    mm_add(t, &n, "model.norm.weight", s->hidden, 0, MM_NORM, 0.1f);
    if (!s->tie) {
        mm_add(t, &n, "lm_head.weight", s->vocab, s->hidden, MM_GAUSS,
               4.0f * sh);
    }
#undef MM_L
    return n;
}


static uint64_t
mm_tensor_bytes(const mm_tensor *t, llm_mm_dtype d)
{
    return (uint64_t) t->shape[0] * (uint64_t) (t->shape[1] ? t->shape[1] : 1)
           * mm_dtype_size(d);
}


/*
 * Splits the tensors, in order, into `shards` files of about equal bytes;
 * no file is left empty (the embedding alone can outweigh all layers of a
 * tiny model, so a purely byte-based cut would leave gaps).
 */
static void
mm_assign_shards(mm_tensor *t, int n, int shards, llm_mm_dtype d)
{
    uint64_t  total = 0, start = 0;
    int       i, s, prev = 0;

    for (i = 0; i < n; i++) {
        total += mm_tensor_bytes(&t[i], d);
    }
    for (i = 0; i < n; i++) {
        s = (int) ((double) start * shards / (double) total);
        if (s < prev) {
            s = prev;
        }
        if (s > prev + 1) {
            s = prev + 1;
        }
        if (s < shards - (n - i)) {
            s = shards - (n - i);
        }
        if (i == 0) {
            s = 0;
        }
        t[i].shard = s;
        prev = s;
        start += mm_tensor_bytes(&t[i], d);
    }
}


/* Appends to a growing string; the header of a big model is a few KiB. */
typedef struct {
    char    *buf;
    size_t   len;
    size_t   cap;
} mm_str;

static void
mm_str_addf(mm_str *s, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static void
mm_str_addf(mm_str *s, const char *fmt, ...)
{
    va_list  ap;
    int      need;

    for ( ;; ) {
        va_start(ap, fmt);
        need = vsnprintf(s->buf + s->len, s->cap - s->len, fmt, ap);
        va_end(ap);
        if ((size_t) need < s->cap - s->len) {
            s->len += (size_t) need;
            return;
        }
        s->cap = (s->cap + (size_t) need + 1) * 2;
        s->buf = llm_xrealloc(s->buf, s->cap);
    }
}


/* Streams one tensor's values, converted to the file's dtype. */
static int
mm_write_tensor(FILE *f, const mm_tensor *t, const llm_mm_spec *s)
{
    enum { CHUNK = 16384 };
    union {
        float     f32[CHUNK];
        uint16_t  u16[CHUNK];
    } buf;
    llm_rng   rng;
    uint64_t  left, i, k;
    float     v;

    mm_rng_init(&rng, s->seed, t->name);
    left = (uint64_t) t->shape[0] * (uint64_t) (t->shape[1] ? t->shape[1] : 1);
    while (left > 0) {
        k = left < CHUNK ? left : CHUNK;
        for (i = 0; i < k; i++) {
            v = t->std * mm_rng_gauss(&rng);
            if (t->kind == MM_NORM) {
                v += 1.0f;
            }
            switch (s->dtype) {
            case LLM_MM_F32:
                buf.f32[i] = v;
                break;
            case LLM_MM_F16:
                buf.u16[i] = llm_f32_to_f16(v);
                break;
            default:
                buf.u16[i] = llm_f32_to_bf16(v);
            }
        }
        if (fwrite(&buf, mm_dtype_size(s->dtype), k, f) != k) {
            return -1;
        }
        left -= k;
    }
    return 0;
}


static void
mm_shard_name(char *buf, size_t size, int shard, int shards)
{
    if (shards == 1) {
        snprintf(buf, size, "model.safetensors");
    } else {
        snprintf(buf, size, "model-%05d-of-%05d.safetensors", shard + 1,
                 shards);
    }
}


static int
mm_write_shard(const mm_tensor *t, int n, int shard, const llm_mm_spec *s,
    const char *dir, char *err)
{
    char      fname[64], path[PATH_MAX];
    mm_str    hdr = { NULL, 0, 0 };
    uint64_t  off = 0, hlen, b;
    FILE     *f;
    int       i, rc = -1;
    char     *iobuf;

    mm_shard_name(fname, sizeof(fname), shard, s->shards);
    llm_path_join(path, dir, fname);

    mm_str_addf(&hdr, "{\"__metadata__\":{\"format\":\"pt\"}");
    for (i = 0; i < n; i++) {
        if (t[i].shard != shard) {
            continue;
        }
        b = mm_tensor_bytes(&t[i], s->dtype);
        mm_str_addf(&hdr, ",\"%s\":{\"dtype\":\"%s\",\"shape\":[%lld",
                    t[i].name, llm_mm_dtype_name(s->dtype),
                    (long long) t[i].shape[0]);
        if (t[i].shape[1]) {
            mm_str_addf(&hdr, ",%lld", (long long) t[i].shape[1]);
        }
        mm_str_addf(&hdr, "],\"data_offsets\":[%llu,%llu]}",
                    (unsigned long long) off, (unsigned long long) (off + b));
        off += b;
    }
    mm_str_addf(&hdr, "}");
    while (hdr.len % 8) {                    /* keep tensor data aligned */
        mm_str_addf(&hdr, " ");
    }

    f = fopen(path, "wb");
    if (f == NULL) {
        llm_errf(err, "%s: %s", path, strerror(errno));
        free(hdr.buf);
        return -1;
    }
    iobuf = llm_xmalloc(1 << 20);
    setvbuf(f, iobuf, _IOFBF, 1 << 20);
    hlen = hdr.len;
    for (i = 0; i < 8; i++) {
        fputc((int) ((hlen >> (8 * i)) & 0xff), f);
    }
    if (fwrite(hdr.buf, 1, hdr.len, f) != hdr.len) {
        goto done;
    }
    for (i = 0; i < n; i++) {
        if (t[i].shard == shard && mm_write_tensor(f, &t[i], s) != 0) {
            goto done;
        }
    }
    rc = 0;
done:
    if (fclose(f) != 0) {
        rc = -1;
    }
    if (rc != 0) {
        llm_errf(err, "%s: write failed: %s", path, strerror(errno));
    }
    free(iobuf);
    free(hdr.buf);
    return rc;
}


static int
mm_write_index(const mm_tensor *t, int n, const llm_mm_spec *s,
    uint64_t total, const char *dir, char *err)
{
    char   path[PATH_MAX], fname[64];
    FILE  *f;
    int    i;

    llm_path_join(path, dir, "model.safetensors.index.json");
    f = fopen(path, "w");
    if (f == NULL) {
        llm_errf(err, "%s: %s", path, strerror(errno));
        return -1;
    }
    fprintf(f, "{\n  \"metadata\": {\n    \"total_size\": %llu\n  },\n"
            "  \"weight_map\": {\n", (unsigned long long) total);
    for (i = 0; i < n; i++) {
        mm_shard_name(fname, sizeof(fname), t[i].shard, s->shards);
        fprintf(f, "    \"%s\": \"%s\"%s\n", t[i].name, fname,
                i + 1 < n ? "," : "");
    }
    fprintf(f, "  }\n}\n");
    if (fclose(f) != 0) {
        llm_errf(err, "%s: write failed: %s", path, strerror(errno));
        return -1;
    }
    return 0;
}


uint64_t
llm_mm_write_weights(const llm_mm_spec *s, const char *dir, char *err)
{
    mm_tensor  *t;
    int         n, i, shard;
    uint64_t    total = 0;
    char        path[PATH_MAX];

    t = llm_xcalloc((size_t) s->layers * 16 + 4, sizeof(mm_tensor));
    n = mm_tensor_list(s, t);
    if (s->shards > n) {
        llm_errf(err, "--shards %d: the model has only %d tensors", s->shards,
                 n);
        free(t);
        return 0;
    }
    mm_assign_shards(t, n, s->shards, s->dtype);
    for (i = 0; i < n; i++) {
        total += mm_tensor_bytes(&t[i], s->dtype);
    }
    for (shard = 0; shard < s->shards; shard++) {
        if (mm_write_shard(t, n, shard, s, dir, err) != 0) {
            free(t);
            return 0;
        }
    }
    /* Leave exactly one layout in dir, so a loader cannot pick up a file
     * from an earlier run with other options. */
    if (s->shards > 1) {
        if (mm_write_index(t, n, s, total, dir, err) != 0) {
            free(t);
            return 0;
        }
        unlink(llm_path_join(path, dir, "model.safetensors"));
    } else {
        unlink(llm_path_join(path, dir, "model.safetensors.index.json"));
    }
    free(t);
    return total;
}
