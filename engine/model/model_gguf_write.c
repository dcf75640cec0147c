/*
 * model_gguf_write.c -- a loaded model as a GGUF file, with what llama.cpp's
 * converter writes (t/ref/hf_to_gguf.py has the facts), so that llama.cpp
 * and this engine load it:
 *
 *   metadata   from a directory: general.architecture ("llama" for Llama
 *              and Mistral, "qwen2", "qwen3"), general.name, the
 *              hyperparameters under <arch>.*, general.file_type and the
 *              tokenizer (gguf_tokenizer_write.c); from a GGUF file: its
 *              own pairs, less the file type, which is the new file's;
 *   tensors    rope_freqs.weight for llama3 rope scaling (per-frequency
 *              divisors, computed as the converter does), token_embd, each
 *              layer's blk.N.* (model.c's table of names), output_norm and
 *              an untied output; the q/k rows of "llama" files permuted so
 *              that RoPE pairs are adjacent (llm_gguf_unpermute() undone).
 *
 * The matrices go out in their dtype in the model -- quantized by
 * llm_model_quantize() beforehand, the rule of quantize on load, which
 * keeps the token embedding as stored -- or all converted to F32, F16 or
 * BF16.  Vectors are F32.  Rows are converted and written one at a time.
 */
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "model.h"
#include "gguf_tokenizer.h"
#include "gguf_write.h"
#include "quant.h"
#include "util/util.h"

/* llama.cpp's llama_ftype numbers (general.file_type) */
static const struct { llm_dtype t; uint32_t ftype; }  llm_ftypes[] = {
    { LLM_DTYPE_F32, 0 }, { LLM_DTYPE_F16, 1 }, { LLM_DTYPE_Q4_0, 2 },
    { LLM_DTYPE_Q8_0, 7 },
    /* pure Q4_K: what llama.cpp's quantizer writes for Q4_K_M with pure */
    { LLM_DTYPE_Q4_K, 15 }, { LLM_DTYPE_Q5_K, 17 }, { LLM_DTYPE_Q6_K, 18 },
    { LLM_DTYPE_BF16, 32 },
};

/* a tensor to write, in file order */
typedef struct {
    char               name[64];
    const llm_tensor  *t;
    const float       *f32;       /* a vector not in the model (rope_freqs) */
    int                n;         /* its length */
    int                permute;   /* heads of a "llama" q/k to permute */
    llm_dtype          out;       /* the type in the file */
} llm_wtensor;


static const char *
llm_gguf_arch_name(llm_arch a)
{
    switch (a) {
    case LLM_ARCH_QWEN2: return "qwen2";
    case LLM_ARCH_QWEN3: return "qwen3";
    default:             return "llama";      /* Llama and Mistral */
    }
}


/* llama3 rope scaling as hf_to_gguf.py's rope_freqs(): the frequencies in
 * float32 (numpy's), the wavelength blend in double, the divisor rounded
 * to float32 */
static void
llm_rope_freq_divisors(const llm_config *c, float *out)
{
    double  lo_wl = c->rope_original_max_pos / (double) c->rope_low_freq_factor;
    double  hi_wl = c->rope_original_max_pos
                    / (double) c->rope_high_freq_factor;
    double  wl, s;
    float   f;
    int     i;

    for (i = 0; i < c->head_dim / 2; i++) {
        f = 1.0f / powf(c->rope_theta, (float) (2 * i) / (float) c->head_dim);
        wl = 2.0 * M_PI / (double) f;
        if (wl < hi_wl) {
            out[i] = 1.0f;
        } else if (wl > lo_wl) {
            out[i] = c->rope_factor;
        } else {
            s = (c->rope_original_max_pos / wl - c->rope_low_freq_factor)
                / ((double) c->rope_high_freq_factor
                   - c->rope_low_freq_factor);
            out[i] = (float) (1.0 / ((1.0 - s) / c->rope_factor + s));
        }
    }
}


static void
llm_gguf_put_hparams(llm_gguf_writer *w, const llm_model *m, uint32_t ftype)
{
    const llm_config  *c = &m->config;
    const char        *arch = llm_gguf_arch_name(c->arch), *base;
    char               key[96];
    size_t             n = strlen(m->dir);

    while (n > 1 && m->dir[n - 1] == '/') {
        n--;
    }
    for (base = m->dir + n; base > m->dir && base[-1] != '/'; base--) {
        /* the directory's own name */
    }
#define LLM_KEY(k)  (snprintf(key, sizeof(key), "%s.%s", arch, k), key)
    llm_gguf_put_str(w, "general.architecture", arch, strlen(arch));
    llm_gguf_put_str(w, "general.name", base, (size_t) (m->dir + n - base));
    llm_gguf_put_u32(w, LLM_KEY("context_length"),
                     (uint32_t) c->max_position_embeddings);
    llm_gguf_put_u32(w, LLM_KEY("embedding_length"), (uint32_t) c->hidden);
    llm_gguf_put_u32(w, LLM_KEY("block_count"), (uint32_t) c->n_layers);
    llm_gguf_put_u32(w, LLM_KEY("feed_forward_length"),
                     (uint32_t) c->intermediate);
    llm_gguf_put_u32(w, LLM_KEY("attention.head_count"),
                     (uint32_t) c->n_heads);
    llm_gguf_put_u32(w, LLM_KEY("attention.head_count_kv"),
                     (uint32_t) c->n_kv_heads);
    llm_gguf_put_f32(w, LLM_KEY("rope.freq_base"), c->rope_theta);
    llm_gguf_put_f32(w, LLM_KEY("attention.layer_norm_rms_epsilon"),
                     c->rms_eps);
    llm_gguf_put_u32(w, LLM_KEY("rope.dimension_count"),
                     (uint32_t) c->head_dim);
    llm_gguf_put_u32(w, LLM_KEY("attention.key_length"),
                     (uint32_t) c->head_dim);
    llm_gguf_put_u32(w, LLM_KEY("attention.value_length"),
                     (uint32_t) c->head_dim);
    llm_gguf_put_u32(w, LLM_KEY("vocab_size"), (uint32_t) c->vocab_size);
#undef LLM_KEY
    llm_gguf_put_u32(w, "general.file_type", ftype);
}


/* a GGUF source's pairs, less those that describe the old file's layout
 * (general.quantization_version stays, as llama.cpp's quantizer keeps
 * it) */
static void
llm_gguf_put_source_kvs(llm_gguf_writer *w, const llm_gguf *g,
    uint32_t ftype)
{
    static const char *const  drop[] = {
        "general.file_type", "general.alignment", NULL
    };
    uint64_t  i;
    int       d;

    for (i = 0; i < g->n_kv; i++) {
        for (d = 0; drop[d]; d++) {
            if (g->kv[i].key.len == strlen(drop[d])
                && memcmp(g->kv[i].key.p, drop[d], g->kv[i].key.len) == 0)
            {
                break;
            }
        }
        if (drop[d] == NULL) {
            llm_gguf_put_kv(w, &g->kv[i]);
        }
    }
    llm_gguf_put_u32(w, "general.file_type", ftype);
}


static void
llm_wt_add(llm_wtensor *v, int *n, const char *name, const llm_tensor *t,
    int permute, llm_dtype ftype)
{
    llm_wtensor  *x = &v[(*n)++];

    memset(x, 0, sizeof(*x));
    snprintf(x->name, sizeof(x->name), "%s", name);
    x->t = t;
    x->permute = permute;
    /* vectors F32; matrices converted to a float ftype, else as they are */
    x->out = t->rows == 1 ? LLM_DTYPE_F32
             : ftype != LLM_DTYPE_COUNT && !llm_dtype_is_quantized(ftype)
             ? ftype : t->dtype;
}


/* the tensors in the order llama.cpp's converter writes them */
static int
llm_wt_list(const llm_model *m, llm_wtensor *v, const float *rope,
    llm_dtype ftype)
{
    const llm_config  *c = &m->config;
    llm_named_tensor   lt[LLM_LAYER_TENSORS];
    int                n = 0, L, i, k, permute;

    if (rope) {
        memset(&v[n], 0, sizeof(v[n]));
        snprintf(v[n].name, sizeof(v[n].name), "rope_freqs.weight");
        v[n].f32 = rope;
        v[n].n = c->head_dim / 2;
        v[n++].out = LLM_DTYPE_F32;
    }
    llm_wt_add(v, &n, "token_embd.weight", &m->weights.embed, 0, ftype);
    permute = c->arch != LLM_ARCH_QWEN2 && c->arch != LLM_ARCH_QWEN3;
    for (L = 0; L < c->n_layers; L++) {
        k = llm_model_layer_tensors(m, L, lt);
        for (i = 0; i < k; i++) {
            llm_wt_add(v, &n, lt[i].name, lt[i].t,
                       !permute ? 0
                       : lt[i].t == &m->weights.layers[L].wq ? c->n_heads
                       : lt[i].t == &m->weights.layers[L].wk ? c->n_kv_heads
                       : 0, ftype);
        }
    }
    llm_wt_add(v, &n, "output_norm.weight", &m->weights.final_norm, 0, ftype);
    if (!c->tie_embeddings) {
        llm_wt_add(v, &n, "output.weight", &m->weights.lm_head, 0, ftype);
    }
    return n;
}


/* HF row of GGUF row r of a permuted q/k (llm_gguf_unpermute()'s map) */
static int
llm_wt_src_row(const llm_wtensor *x, int r)
{
    int  d, h, i;

    if (x->permute == 0) {
        return r;
    }
    d = x->t->rows / x->permute;
    h = r / d;
    i = r % d;
    return h * d + (i % 2) * (d / 2) + i / 2;
}


static void
llm_wt_encode(llm_dtype t, const float *x, void *y, int n)
{
    uint16_t  *h = y;
    int        i;

    switch (t) {
    case LLM_DTYPE_F32:
        memcpy(y, x, (size_t) n * sizeof(float));
        break;
    case LLM_DTYPE_F16:
        for (i = 0; i < n; i++) {
            h[i] = llm_f32_to_f16(x[i]);
        }
        break;
    default:                        /* BF16 */
        for (i = 0; i < n; i++) {
            h[i] = llm_f32_to_bf16(x[i]);
        }
    }
}


static int
llm_wt_data(llm_gguf_writer *w, const llm_wtensor *x, float *row, char *buf,
    char *err)
{
    size_t       in, out;
    const char  *src;
    int          r;

    if (x->f32) {
        return llm_gguf_writer_data(w, x->f32, (size_t) x->n * sizeof(float),
                                    err);
    }
    in = llm_dtype_row_bytes(x->t->dtype, (size_t) x->t->cols);
    out = llm_dtype_row_bytes(x->out, (size_t) x->t->cols);
    for (r = 0; r < x->t->rows; r++) {
        src = (const char *) x->t->data + in * (size_t) llm_wt_src_row(x, r);
        if (x->out != x->t->dtype) {
            llm_dequantize_row(x->t->dtype, src, row, (size_t) x->t->cols);
            llm_wt_encode(x->out, row, buf, x->t->cols);
            src = buf;
        }
        if (llm_gguf_writer_data(w, src, out, err) != 0) {
            return -1;
        }
    }
    return 0;
}


/* the file's type: the float type converted to, else the matrices'
 * block format, else their stored type */
static llm_dtype
llm_gguf_file_dtype(const llm_model *m, llm_dtype ftype)
{
    llm_dtype  t = llm_model_block_format(m);

    if (ftype != LLM_DTYPE_COUNT && !llm_dtype_is_quantized(ftype)) {
        return ftype;
    }
    return t != LLM_DTYPE_COUNT ? t : m->weights.layers[0].wq.dtype;
}


static uint32_t
llm_gguf_ftype(llm_dtype t)
{
    size_t  i;

    for (i = 0; i < sizeof(llm_ftypes) / sizeof(llm_ftypes[0]); i++) {
        if (llm_ftypes[i].t == t) {
            return llm_ftypes[i].ftype;
        }
    }
    return 0;
}


/* the metadata and the tensor infos */
static int
llm_gguf_describe(llm_gguf_writer *w, const llm_model *m, llm_wtensor *v,
    int n, llm_dtype ftype, char *err)
{
    llm_dtype  t = llm_gguf_file_dtype(m, ftype);
    uint32_t   ft = llm_gguf_ftype(t);
    int64_t    ne[2];
    int        i;

    if (m->gguf) {
        llm_gguf_put_source_kvs(w, m->gguf, ft);
    } else {
        llm_gguf_put_hparams(w, m, ft);
        if (llm_gguf_put_tokenizer(w, m->dir, m->config.vocab_size, err)
            != 0)
        {
            return -1;
        }
    }
    if (llm_dtype_is_quantized(t)
        && !llm_gguf_writer_has(w, "general.quantization_version"))
    {
        llm_gguf_put_u32(w, "general.quantization_version", 2);
    }
    for (i = 0; i < n; i++) {
        if (v[i].f32) {
            ne[0] = v[i].n;
            llm_gguf_add_tensor(w, v[i].name, 1, ne, LLM_DTYPE_F32);
        } else if (v[i].t->rows == 1) {
            ne[0] = v[i].t->cols;
            llm_gguf_add_tensor(w, v[i].name, 1, ne, LLM_DTYPE_F32);
        } else {
            ne[0] = v[i].t->cols;
            ne[1] = v[i].t->rows;
            llm_gguf_add_tensor(w, v[i].name, 2, ne, v[i].out);
        }
    }
    return 0;
}


static int
llm_gguf_write_all(llm_gguf_writer *w, FILE *f, llm_wtensor *v, int n,
    int max_cols, char *err)
{
    float  *row = llm_xmalloc((size_t) max_cols * sizeof(float));
    char   *buf = llm_xmalloc((size_t) max_cols * sizeof(float));
    int     i, rc = llm_gguf_writer_begin(w, f, err);

    for (i = 0; rc == 0 && i < n; i++) {
        rc = llm_wt_data(w, &v[i], row, buf, err);
    }
    if (rc == 0) {
        rc = llm_gguf_writer_end(w, err);
    }
    free(row);
    free(buf);
    return rc;
}


int
llm_model_write_gguf(const llm_model *m, const char *path, llm_dtype ftype,
    char *err)
{
    const llm_config  *c = &m->config;
    llm_gguf_writer   *w;
    llm_wtensor       *v;
    float             *rope = NULL;
    char               sub[LLM_ERR_LEN], tmp[PATH_MAX];
    FILE              *f;
    int                n, rc = -1, max_cols;

    sub[0] = '\0';
    if (c->rope_freq_factors) {
        rope = llm_xmalloc((size_t) (c->head_dim / 2) * sizeof(float));
        memcpy(rope, c->rope_freq_factors,
               (size_t) (c->head_dim / 2) * sizeof(float));
    } else if (c->rope_llama3) {
        rope = llm_xmalloc((size_t) (c->head_dim / 2) * sizeof(float));
        llm_rope_freq_divisors(c, rope);
    }
    v = llm_xcalloc((size_t) c->n_layers * LLM_LAYER_TENSORS + 4,
                    sizeof(*v));
    n = llm_wt_list(m, v, rope, ftype);
    max_cols = c->hidden > c->intermediate ? c->hidden : c->intermediate;
    max_cols = max_cols > c->n_heads * c->head_dim ? max_cols
                                                   : c->n_heads * c->head_dim;
    w = llm_gguf_writer_new();
    if (llm_gguf_describe(w, m, v, n, ftype, sub) != 0) {
        llm_errf(err, "%s", sub);
        goto done;
    }
    /* written beside, renamed when whole: a failed write leaves no file
     * that looks like a model */
    if (snprintf(tmp, sizeof(tmp), "%s.partial", path) >= (int) sizeof(tmp)) {
        llm_errf(err, "%s: path too long", path);
        goto done;
    }
    f = fopen(tmp, "wb");
    if (f == NULL) {
        llm_errf(err, "%s: %s", tmp, strerror(errno));
        goto done;
    }
    rc = llm_gguf_write_all(w, f, v, n, max_cols, sub);
    if (fclose(f) != 0 && rc == 0) {
        llm_errf(sub, "write: %s", strerror(errno));
        rc = -1;
    }
    if (rc == 0 && rename(tmp, path) != 0) {
        llm_errf(sub, "rename from %s: %s", tmp, strerror(errno));
        rc = -1;
    }
    if (rc != 0) {
        unlink(tmp);
        llm_errf(err, "%s: %s", path, sub);
    }
done:
    llm_gguf_writer_free(w);
    free(v);
    free(rope);
    return rc;
}
