/*
 * model_quantize.c -- quantize on load (llm_weights q8_0 | q4_0 | q4_k):
 * a model's matrices, read in their stored dtype, rewritten in a block
 * format with ggml's reference quantizers (quant.c), so that a Hugging
 * Face directory gets the bytes per token of a quantized GGUF file.
 *
 * What is quantized follows llama.cpp's pure mixtures (llama_model_quantize
 * with `pure`): every projection of every layer (q, k, v, o, gate, up,
 * down) and an untied lm_head.  The token embedding stays as stored: a
 * token reads one row of it, so its size costs no time per token (llama.cpp
 * quantizes it too; t/quant.t asks its quantizer to keep it, to compare the
 * same bits).  A tied lm_head is the embedding and stays as stored with it.
 * Norms and biases stay f32.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "model.h"
#include "quant.h"
#include "util/util.h"

#define LLM_QUANT_CHUNK  64       /* rows per unit of work */

typedef struct {
    llm_tensor   *t;              /* the tensor, rewritten when all is done */
    const char   *name;
    char         *dst;
} llm_quant_job;

typedef struct {
    llm_quant_job  *jobs;
    int             n_jobs;
    llm_dtype       type;
    atomic_int      next;         /* the next (job, chunk) to take */
    int            *chunk_base;   /* first global chunk of each job */
    int             n_chunks;
} llm_quant_work;


static void *
llm_quant_worker(void *arg)
{
    llm_quant_work  *qw = arg;
    llm_quant_job   *j;
    float           *row = NULL;
    size_t           rb;
    int              c, i, r, r1, cols_max = 0;

    for (i = 0; i < qw->n_jobs; i++) {
        cols_max = qw->jobs[i].t->cols > cols_max ? qw->jobs[i].t->cols
                                                   : cols_max;
    }
    row = llm_xmalloc(sizeof(float) * (size_t) cols_max);
    while ((c = atomic_fetch_add(&qw->next, 1)) < qw->n_chunks) {
        for (i = 0; i + 1 < qw->n_jobs && qw->chunk_base[i + 1] <= c; i++) {
            /* the job holding chunk c */
        }
        j = &qw->jobs[i];
        rb = llm_dtype_row_bytes(qw->type, (size_t) j->t->cols);
        r = (c - qw->chunk_base[i]) * LLM_QUANT_CHUNK;
        r1 = r + LLM_QUANT_CHUNK < j->t->rows ? r + LLM_QUANT_CHUNK
                                              : j->t->rows;
        for (; r < r1; r++) {
            llm_dequantize_row(j->t->dtype, (const char *) j->t->data
                               + (size_t) r * llm_dtype_row_bytes(
                                   j->t->dtype, (size_t) j->t->cols),
                               row, (size_t) j->t->cols);
            llm_quantize_row(qw->type, row, j->dst + (size_t) r * rb,
                             (size_t) j->t->cols);
        }
    }
    free(row);
    return NULL;
}


/* The matrices a token multiplies with: the 7 of each layer, then an
 * untied lm_head; their names in names[] (the layer's part). */
static int
llm_model_matrices(llm_model *m, llm_tensor **out, const char **names)
{
    static const char  *nm[7] = { "self_attn.q_proj", "self_attn.k_proj",
                                  "self_attn.v_proj", "self_attn.o_proj",
                                  "mlp.gate_proj", "mlp.up_proj",
                                  "mlp.down_proj" };
    int                 L, i, n = 0;

    for (L = 0; L < m->config.n_layers; L++) {
        llm_layer_weights  *l = &m->weights.layers[L];
        llm_tensor         *ts[7] = { &l->wq, &l->wk, &l->wv, &l->wo,
                                      &l->w_gate, &l->w_up, &l->w_down };

        for (i = 0; i < 7; i++) {
            names[n] = nm[i];
            out[n++] = ts[i];
        }
    }
    if (!m->config.tie_embeddings) {
        names[n] = "lm_head";
        out[n++] = &m->weights.lm_head;
    }
    return n;
}


llm_dtype
llm_model_block_format(const llm_model *m)
{
    llm_tensor   **ts;
    const char   **names;
    llm_dtype      t = LLM_DTYPE_COUNT;
    int            i, n;

    if (llm_dtype_is_quantized(m->weights.embed.dtype)) {
        return m->weights.embed.dtype;
    }
    ts = llm_xcalloc((size_t) m->config.n_layers * 7 + 1, sizeof(*ts));
    names = llm_xcalloc((size_t) m->config.n_layers * 7 + 1, sizeof(*names));
    n = llm_model_matrices((llm_model *) m, ts, names);
    for (i = 0; i < n && t == LLM_DTYPE_COUNT; i++) {
        if (llm_dtype_is_quantized(ts[i]->dtype)) {
            t = ts[i]->dtype;
        }
    }
    free(ts);
    free(names);
    return t;
}


static int
llm_weights_type(const char *name, llm_dtype *t)
{
    if (name == NULL || name[0] == '\0') {
        *t = LLM_DTYPE_COUNT;
    } else if (strcmp(name, "q8_0") == 0) {
        *t = LLM_DTYPE_Q8_0;
    } else if (strcmp(name, "q4_0") == 0) {
        *t = LLM_DTYPE_Q4_0;
    } else if (strcmp(name, "q4_k") == 0) {
        *t = LLM_DTYPE_Q4_K;
    } else {
        return -1;
    }
    return 0;
}


int
llm_model_quantize(llm_model *m, const char *weights, int threads, char *err)
{
    llm_quant_work   qw = { 0 };
    llm_quant_job   *jobs;
    llm_dtype        type;
    const llm_config *c = &m->config;
    size_t           total = 0, off;
    pthread_t       *tids;
    llm_tensor     **ts;
    const char     **names;
    int              n, i, nth;

    if (llm_weights_type(weights, &type) != 0) {
        llm_errf(err, "llm_weights \"%s\": expected q8_0, q4_0 or q4_k",
                 weights);
        return -1;
    }
    if (type == LLM_DTYPE_COUNT) {
        return 0;
    }
    ts = llm_xcalloc((size_t) c->n_layers * 7 + 1, sizeof(*ts));
    names = llm_xcalloc((size_t) c->n_layers * 7 + 1, sizeof(*names));
    jobs = llm_xcalloc((size_t) c->n_layers * 7 + 1, sizeof(*jobs));
    n = llm_model_matrices(m, ts, names);
    for (i = 0; i < n; i++) {
        jobs[i].t = ts[i];
        jobs[i].name = names[i];
    }
    free(ts);
    free(names);
    for (i = 0; i < n; i++) {
        if (llm_dtype_is_quantized(jobs[i].t->dtype)) {
            llm_errf(err, "llm_weights %s: the model's weights are already "
                     "%s", weights, llm_dtype_name(jobs[i].t->dtype));
            free(jobs);
            return -1;
        }
        if (jobs[i].t->cols % llm_dtype_block(type) != 0) {
            if (i < c->n_layers * 7) {
                llm_errf(err, "llm_weights %s: model.layers.%d.%s.weight has "
                         "%d columns, not a multiple of %s's block of %d",
                         weights, i / 7, jobs[i].name, jobs[i].t->cols,
                         llm_dtype_name(type), llm_dtype_block(type));
            } else {
                llm_errf(err, "llm_weights %s: lm_head.weight has %d "
                         "columns, not a multiple of %s's block of %d",
                         weights, jobs[i].t->cols, llm_dtype_name(type),
                         llm_dtype_block(type));
            }
            free(jobs);
            return -1;
        }
        total += llm_dtype_row_bytes(type, (size_t) jobs[i].t->cols)
                 * (size_t) jobs[i].t->rows;
    }

    m->quant_store = llm_xmalloc(total);
    qw.chunk_base = llm_xcalloc((size_t) n, sizeof(int));
    for (i = 0, off = 0; i < n; i++) {
        jobs[i].dst = m->quant_store + off;
        off += llm_dtype_row_bytes(type, (size_t) jobs[i].t->cols)
               * (size_t) jobs[i].t->rows;
        qw.chunk_base[i] = qw.n_chunks;
        qw.n_chunks += (jobs[i].t->rows + LLM_QUANT_CHUNK - 1)
                       / LLM_QUANT_CHUNK;
    }
    qw.jobs = jobs;
    qw.n_jobs = n;
    qw.type = type;
    atomic_init(&qw.next, 0);
    nth = threads > 0 ? threads : 1;
    tids = llm_xcalloc((size_t) nth, sizeof(*tids));
    for (i = 1; i < nth; i++) {
        if (pthread_create(&tids[i], NULL, llm_quant_worker, &qw) != 0) {
            nth = i;
            break;
        }
    }
    llm_quant_worker(&qw);
    for (i = 1; i < nth; i++) {
        pthread_join(tids[i], NULL);
    }
    for (i = 0; i < n; i++) {
        jobs[i].t->data = jobs[i].dst;
        jobs[i].t->dtype = type;
    }
    free(tids);
    free(qw.chunk_base);
    free(jobs);
    return 0;
}
