/*
 * bench.c -- the CUDA backend's speed on Llama-3.1-8B's shapes, with random
 * weights generated on the device (llm_backend_cuda_create_random: no
 * 16 GB download), each number next to the hardware limit measured in the
 * same run.  Run by t/gpu/run.sh; prints "RESULT key value" lines.
 *
 *   bandwidth:  a 4 GiB device-to-device copy (bytes read + written / s);
 *   GEMM rate:  cuBLAS bf16 x bf16 -> f32, 8192^3, as the backend calls it;
 *   decode:     one sequence, 128-token prompt, 256 greedy steps through
 *               forward() (logits to the host) and through
 *               forward_sample() (ids only); the bound is
 *               bandwidth / (weights streamed + KV read) per step;
 *   sampling:   decode steps at 1 and 64 rows sampled with temperature
 *               0.8, top-k 50, top-p 0.9: on the device (forward_sample,
 *               ids only) against the logits path (forward() + the host
 *               sampler, llm_sample, on every row);
 *   prefill:    one 1024-token prompt in one step (= TTFT without the HTTP
 *               side); the bound is the GEMM rate over its FLOPs;
 *   batch 64:   64 sequences with 512-token prompts, 128 decode steps of 64
 *               rows (a graph bucket); aggregate output tokens/s;
 *   GEMV:       the decode projections at 1 and 4 rows through the GEMV
 *               kernel and through cuBLAS (GB/s of weights).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include "backend/backend.h"
#include "backend/batch.h"
#include "cu_backend.h"
#include "sampler.h"
#include "sampler_rows.h"

#define CK(call)                                                             \
    do {                                                                     \
        cudaError_t e_ = (call);                                             \
        if (e_ != cudaSuccess) {                                             \
            fprintf(stderr, "bench: %s:%d: %s: %s\n", __FILE__, __LINE__,    \
                    #call, cudaGetErrorString(e_));                          \
            exit(1);                                                         \
        }                                                                    \
    } while (0)


static double
now(void)
{
    struct timespec  ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}


static void
result(const char *key, double v, const char *what)
{
    printf("RESULT %s %.4g\n", key, v);
    printf("# %-22s %12.4g  %s\n", key, v, what);
    fflush(stdout);
}


/* ---- the hardware ------------------------------------------------------------ */

static double
measure_bandwidth(size_t n)
{
    void         *a, *b;
    cudaEvent_t   e0, e1;
    float         ms;
    int           i, reps = 10;

    CK(cudaMalloc(&a, n));
    CK(cudaMalloc(&b, n));
    CK(cudaMemset(a, 1, n));
    CK(cudaEventCreate(&e0));
    CK(cudaEventCreate(&e1));
    CK(cudaMemcpy(b, a, n, cudaMemcpyDeviceToDevice));
    CK(cudaEventRecord(e0, 0));
    for (i = 0; i < reps; i++) {
        CK(cudaMemcpyAsync(b, a, n, cudaMemcpyDeviceToDevice, 0));
    }
    CK(cudaEventRecord(e1, 0));
    CK(cudaEventSynchronize(e1));
    CK(cudaEventElapsedTime(&ms, e0, e1));
    CK(cudaFree(a));
    CK(cudaFree(b));
    return 2.0 * n * reps / (ms * 1e-3) / 1e9;          /* GB/s */
}


static double
measure_gemm(int n)
{
    int             i, reps = 20;
    void           *a, *b, *c;
    cublasHandle_t  h;
    cudaEvent_t     e0, e1;
    float           ms, one = 1.0f, zero = 0.0f;

    CK(cudaMalloc(&a, (size_t) n * n * 2));
    CK(cudaMalloc(&b, (size_t) n * n * 2));
    CK(cudaMalloc(&c, (size_t) n * n * 4));
    CK(cudaMemset(a, 0, (size_t) n * n * 2));
    CK(cudaMemset(b, 0, (size_t) n * n * 2));
    if (cublasCreate(&h) != CUBLAS_STATUS_SUCCESS) {
        fprintf(stderr, "bench: cublasCreate failed\n");
        exit(1);
    }
    CK(cudaEventCreate(&e0));
    CK(cudaEventCreate(&e1));
    for (i = -2; i < reps; i++) {
        if (i == 0) {
            CK(cudaEventRecord(e0, 0));
        }
        if (cublasGemmEx(h, CUBLAS_OP_T, CUBLAS_OP_N, n, n, n, &one, a,
                         CUDA_R_16BF, n, b, CUDA_R_16BF, n, &zero, c,
                         CUDA_R_32F, n, CUBLAS_COMPUTE_32F,
                         CUBLAS_GEMM_DEFAULT) != CUBLAS_STATUS_SUCCESS)
        {
            fprintf(stderr, "bench: cublasGemmEx failed\n");
            exit(1);
        }
    }
    CK(cudaEventRecord(e1, 0));
    CK(cudaEventSynchronize(e1));
    CK(cudaEventElapsedTime(&ms, e0, e1));
    cublasDestroy(h);
    CK(cudaFree(a));
    CK(cudaFree(b));
    CK(cudaFree(c));
    return 2.0 * n * n * (double) n * reps / (ms * 1e-3) / 1e12;   /* TFLOP/s */
}


/* ---- the model ---------------------------------------------------------------- */

/* What one run measures: the real sizes, or --small ones that let the
 * script be tried on the CPU emulator (LLM_GPU_EMU=1 t/gpu/run.sh). */
typedef struct {
    size_t  copy_bytes;
    int     gemm_n;
    int     pp;                         /* the TTFT prompt */
    int     p1, g1;                     /* single stream: prompt, steps */
    int     B, P, G;                    /* many streams */
} sizes;

static const sizes  full = { (size_t) 4 << 30, 8192, 1024, 128, 256,
                             64, 512, 128 };
static const sizes  small = { (size_t) 64 << 20, 256, 96, 32, 12, 4, 32, 6 };


static void
tiny_model(llm_model *m)
{
    llm_config  *c = &m->config;

    memset(m, 0, sizeof(*m));
    c->arch = LLM_ARCH_LLAMA;
    c->vocab_size = 1000;
    c->hidden = 256;
    c->n_layers = 2;
    c->n_heads = 4;
    c->n_kv_heads = 2;
    c->head_dim = 64;
    c->intermediate = 512;
    c->max_position_embeddings = 4096;
    c->rms_eps = 1e-5f;
    c->rope_theta = 10000.0f;
    m->weights.layers = calloc(c->n_layers, sizeof(llm_layer_weights));
    m->weights.embed.dtype = LLM_DTYPE_BF16;
}


static void
llama31_8b(llm_model *m)
{
    llm_config  *c = &m->config;

    memset(m, 0, sizeof(*m));
    c->arch = LLM_ARCH_LLAMA;
    c->vocab_size = 128256;
    c->hidden = 4096;
    c->n_layers = 32;
    c->n_heads = 32;
    c->n_kv_heads = 8;
    c->head_dim = 128;
    c->intermediate = 14336;
    c->max_position_embeddings = 131072;
    c->rms_eps = 1e-5f;
    c->rope_theta = 500000.0f;
    c->rope_llama3 = 1;
    c->rope_factor = 8.0f;
    c->rope_low_freq_factor = 1.0f;
    c->rope_high_freq_factor = 4.0f;
    c->rope_original_max_pos = 8192;
    m->weights.layers = calloc(c->n_layers, sizeof(llm_layer_weights));
    m->weights.embed.dtype = LLM_DTYPE_BF16;
}


/* bytes a decode step streams: every matrix but the embedding, and the
 * norms */
static double
step_weight_bytes(const llm_config *c)
{
    double  qd = c->n_heads * c->head_dim, kvd = c->n_kv_heads * c->head_dim;
    double  layer = (double) c->hidden * (qd + 2 * kvd) + c->hidden * qd
                    + 3.0 * c->hidden * c->intermediate;

    return 2.0 * (c->n_layers * layer + (double) c->vocab_size * c->hidden);
}


static double
kv_bytes_per_token(const llm_config *c)
{
    return 2.0 * c->n_layers * 2 * c->n_kv_heads * c->head_dim;
}


typedef struct {
    llm_backend    *b;
    llm_batch_buf   bb;
    int32_t        *tables;
    int             per_seq;
    float          *logits;
    int32_t        *ids;
    int             V;
    char            err[LLM_ERR_LEN];
    /* sampled modes: every row temperature 0.8, top-k 50, top-p 0.9 */
    llm_sampling_params  sp;
    llm_rng         rng;
    llm_sampler     sampler;
    llm_sample_rows rows;
} bench;

enum { FWD_LOGITS, FWD_GREEDY, FWD_SAMPLE_DEVICE, FWD_SAMPLE_HOST };


/* One step: logits to the host; greedy ids on the device; sampled ids on
 * the device; or logits to the host, each row sampled there. */
static void
fwd(bench *x, int mode)
{
    llm_sample_ctx   c = { 0 };
    llm_sample_spec  spec;
    int              rc, i, n = x->bb.batch.n_logits;

    c.p = &x->sp;
    c.rng = &x->rng;
    if (mode == FWD_SAMPLE_DEVICE) {
        llm_sample_rows_reset(&x->rows);
        for (i = 0; i < n; i++) {
            llm_sample_row_make(&x->sampler, &c, &x->rows);
        }
        spec = llm_sample_rows_spec(&x->rows);
    }
    rc = mode == FWD_GREEDY
         ? x->b->forward_sample(x->b, &x->bb.batch, NULL, x->ids, NULL,
                                x->err)
         : mode == FWD_SAMPLE_DEVICE
         ? x->b->forward_sample(x->b, &x->bb.batch, &spec, x->ids, NULL,
                                x->err)
         : x->b->forward(x->b, &x->bb.batch, x->logits, x->err);
    if (rc != 0) {
        fprintf(stderr, "bench: forward: %s\n", x->err);
        exit(1);
    }
    if (mode == FWD_SAMPLE_HOST) {
        for (i = 0; i < n; i++) {
            x->ids[i] = llm_sample(&x->sampler, x->logits + (size_t) i * x->V,
                                   &c, NULL);
        }
    }
}


/* Prefills sequences [0, B) with P tokens each, as steps of at most
 * `chunk` rows; returns the seconds of the whole prefill. */
static double
prefill(bench *x, int B, int P, int chunk)
{
    int32_t  *toks = malloc(sizeof(int32_t) * P);
    int       s, i, done;
    double    t0 = now();

    for (i = 0; i < P; i++) {
        toks[i] = (int32_t) ((i * 7919 + 13) % x->V);
    }
    llm_batch_reset(&x->bb);
    for (s = 0; s < B; s++) {
        for (done = 0; done < P; ) {
            int  n = P - done;

            if (x->bb.batch.n_tokens + n > chunk) {
                n = chunk - x->bb.batch.n_tokens;
            }
            llm_batch_add(&x->bb, toks + done, n, done,
                          x->tables + (size_t) s * x->per_seq, x->per_seq,
                          done + n == P ? LLM_LOGITS_LAST : LLM_LOGITS_NONE);
            done += n;
            if (x->bb.batch.n_tokens == chunk) {
                fwd(x, 1);
                llm_batch_reset(&x->bb);
            }
        }
    }
    if (x->bb.batch.n_tokens > 0) {
        fwd(x, 1);
        llm_batch_reset(&x->bb);
    }
    free(toks);
    return now() - t0;
}


/* G decode steps of B rows after P-token prompts; tokens/s */
static double
decode(bench *x, int B, int P, int G, int mode)
{
    int32_t  *next = malloc(sizeof(int32_t) * B);
    int       s, g;
    double    t0;

    for (s = 0; s < B; s++) {
        next[s] = (int32_t) (s + 1);
    }
    t0 = now();
    for (g = 0; g < G; g++) {
        llm_batch_reset(&x->bb);
        for (s = 0; s < B; s++) {
            llm_batch_add(&x->bb, &next[s], 1, P + g,
                          x->tables + (size_t) s * x->per_seq, x->per_seq,
                          LLM_LOGITS_LAST);
        }
        fwd(x, mode);
        for (s = 0; s < B; s++) {
            next[s] = mode != FWD_LOGITS ? x->ids[s]
                      : (int32_t) ((next[s] * 31 + 7) % x->V);
        }
    }
    free(next);
    return (double) B * G / (now() - t0);
}


/* the decode projections of layer 0 and the lm_head at n rows, GB/s */
static double
gemv_rate(bench *x, int n, int gemv)
{
    llm_cu_state  *s = llm_cu_backend_state(x->b);
    cudaStream_t   st = (cudaStream_t) llm_cu_backend_stream(x->b);
    cudaEvent_t    e0, e1;
    float          ms;
    double         bytes;
    int            r, reps = 20;
    const llm_cu_layer  *l = &s->layers[0];

    llm_cu_backend_tune(x->b, gemv ? 8 : 0, 1);
    CK(cudaEventCreate(&e0));
    CK(cudaEventCreate(&e1));
    bytes = 2.0 * ((double) s->qkvd * s->H + (double) s->H * s->qd
                   + 2.0 * s->I * s->H + (double) s->H * s->I
                   + (double) s->V * s->H);
    for (r = -2; r < reps; r++) {
        if (r == 0) {
            CK(cudaEventRecord(e0, st));
        }
        if (llm_cu_gpu_ops.gemm(x->b, s, s->xn, n, s->H, l->wqkv, s->qkvd,
                                s->big)
            || llm_cu_gpu_ops.gemm(x->b, s, s->att, n, s->qd, l->wo, s->H,
                                   s->big)
            || llm_cu_gpu_ops.gemm(x->b, s, s->xn, n, s->H, l->wgu, 2 * s->I,
                                   s->big)
            || llm_cu_gpu_ops.gemm(x->b, s, s->act, n, s->I, l->wdown, s->H,
                                   s->big)
            || llm_cu_gpu_ops.gemm(x->b, s, s->xl, n, s->H, s->lm_head, s->V,
                                   s->logits))
        {
            fprintf(stderr, "bench: gemm: %s\n", llm_cu_backend_error(x->b));
            exit(1);
        }
    }
    CK(cudaEventRecord(e1, st));
    CK(cudaEventSynchronize(e1));
    CK(cudaEventElapsedTime(&ms, e0, e1));
    llm_cu_backend_tune(x->b, LLM_CU_DEFAULT_GEMV_MAX, 1);
    return bytes * reps / (ms * 1e-3) / 1e9;
}


int
main(int argc, char **argv)
{
    llm_model           m;
    llm_backend_config  bc = { 0 };
    llm_cu_info         info;
    bench               x;
    double              bw, tf, wb, kvt, t, tps, bound, flops;
    int                 i, dev = 0, is_small = 0;
    const sizes        *z;

    for (i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--device") == 0 && i + 1 < argc) {
            dev = atoi(argv[++i]);
        } else if (strcmp(argv[i], "--small") == 0) {
            is_small = 1;
        }
    }
    z = is_small ? &small : &full;
    CK(cudaSetDevice(dev));
    bw = measure_bandwidth(z->copy_bytes);
    result("bandwidth_gbs", bw, "GB/s, device-to-device copy (read + write)");
    tf = measure_gemm(z->gemm_n);
    result("gemm_tflops", tf, "TFLOP/s, cuBLAS bf16 n^3, f32 out");

    if (is_small) {
        tiny_model(&m);
    } else {
        llama31_8b(&m);
    }
    memset(&x, 0, sizeof(x));
    x.V = m.config.vocab_size;
    x.per_seq = (z->P + z->G + z->pp + z->p1 + z->g1 + 15) / 16;
    bc.device = dev;
    bc.gpu_memory_utilization = 0.9;
    bc.min_blocks = x.per_seq * z->B;
    t = now();
    x.b = llm_backend_cuda_create_random(&m, &bc, 1234, x.err);
    if (x.b == NULL) {
        fprintf(stderr, "bench: %s\n", x.err);
        return 1;
    }
    llm_cu_backend_info(x.b, &info);
    printf("# %s: %d SMs; %s shapes, random bf16 weights %.0f MiB made in "
           "%.2f s; KV cache %.0f MiB (%d blocks); buffers %.0f MiB\n",
           info.device, info.n_sm, is_small ? "tiny" : "Llama-3.1-8B",
           info.weights_mib, now() - t, info.kv_mib, info.kv_blocks,
           info.buffers_mib);
    x.tables = malloc(sizeof(int32_t) * x.per_seq * z->B);
    for (i = 0; i < x.per_seq * z->B; i++) {
        x.tables[i] = i;
    }
    x.logits = malloc(sizeof(float) * (size_t) x.V * 256);
    x.ids = malloc(sizeof(int32_t) * 2048);
    memset(&x.sp, 0, sizeof(x.sp));
    x.sp.temperature = 0.8;
    x.sp.top_k = 50;
    x.sp.top_p = 0.9;
    x.sp.repetition_penalty = 1.0;
    x.sp.logprobs = -1;
    llm_rng_seed(&x.rng, 1234);
    llm_sampler_init(&x.sampler, x.V);
    memset(&x.rows, 0, sizeof(x.rows));
    wb = step_weight_bytes(&m.config);
    kvt = kv_bytes_per_token(&m.config);

    /* GEMV kernel vs cuBLAS on the decode shapes */
    result("gemv_1row_gbs", gemv_rate(&x, 1, 1),
           "GB/s, projections at 1 row, GEMV kernel");
    result("cublas_1row_gbs", gemv_rate(&x, 1, 0),
           "GB/s, projections at 1 row, cuBLAS");
    result("gemv_4row_gbs", gemv_rate(&x, 4, 1),
           "GB/s, projections at 4 rows, GEMV kernel");
    result("cublas_4row_gbs", gemv_rate(&x, 4, 0),
           "GB/s, projections at 4 rows, cuBLAS");

    /* prefill of the TTFT prompt in one step */
    prefill(&x, 1, z->pp, 2048);                        /* warm up */
    {
        double  best = 1e9, n = z->pp;

        for (i = 0; i < 5; i++) {
            t = prefill(&x, 1, z->pp, 2048);
            best = t < best ? t : best;
        }
        /* 2 x params x tokens + causal attention (QK and PV) */
        flops = 2.0 * (wb / 2.0 - (double) x.V * m.config.hidden) * n
                + 2.0 * m.config.hidden * (double) x.V
                + 2.0 * 2.0 * m.config.n_layers * m.config.n_heads
                  * m.config.head_dim * (n * (n + 1) / 2.0);
        result("ttft_1k_ms", best * 1e3, "ms, the prompt in one step");
        result("prefill_1k_tps", n / best, "tokens/s");
        result("prefill_1k_bound_tps", n / (flops / (tf * 1e12)),
               "tokens/s at the measured GEMM rate");
    }

    /* single stream decode */
    prefill(&x, 1, z->p1, 2048);
    decode(&x, 1, z->p1, 16, 0);                        /* graphs captured */
    prefill(&x, 1, z->p1, 2048);
    tps = decode(&x, 1, z->p1, z->g1, 0);
    bound = bw * 1e9 / (wb + kvt * (z->p1 + z->g1));
    result("decode1_tps", tps, "tokens/s, 1 stream, logits to the host");
    result("decode1_bound_tps", bound, "tokens/s, bandwidth / bytes per step");
    prefill(&x, 1, z->p1, 2048);
    result("decode1_greedy_tps", decode(&x, 1, z->p1, z->g1, FWD_GREEDY),
           "tokens/s, 1 stream, greedy ids only (forward_sample)");
    prefill(&x, 1, z->p1, 2048);
    t = 1.0 / decode(&x, 1, z->p1, z->g1, FWD_SAMPLE_DEVICE);
    result("sample1_device_ms", t * 1e3, "ms per step, 1 row sampled on "
           "the device (top-k 50, top-p 0.9)");
    prefill(&x, 1, z->p1, 2048);
    t = 1.0 / decode(&x, 1, z->p1, z->g1, FWD_SAMPLE_HOST);
    result("sample1_host_ms", t * 1e3, "ms per step, 1 row, logits to the "
           "host and sampled there");
    llm_cu_backend_tune(x.b, 0, 1);
    prefill(&x, 1, z->p1, 2048);
    decode(&x, 1, z->p1, 8, 0);
    prefill(&x, 1, z->p1, 2048);
    result("decode1_cublas_tps", decode(&x, 1, z->p1, z->g1, 0),
           "tokens/s, 1 stream, cuBLAS instead of the GEMV kernel");
    llm_cu_backend_tune(x.b, LLM_CU_DEFAULT_GEMV_MAX, 0);
    prefill(&x, 1, z->p1, 2048);
    result("decode1_nograph_tps", decode(&x, 1, z->p1, z->g1 / 2, 0),
           "tokens/s, 1 stream, without CUDA graphs");
    llm_cu_backend_tune(x.b, LLM_CU_DEFAULT_GEMV_MAX, 1);

    /* many streams */
    t = prefill(&x, z->B, z->P, 2048);
    result("prefill_b64_tps", (double) z->B * z->P / t,
           "tokens/s, the streams' prompts in 2048-row steps");
    decode(&x, z->B, z->P, 4, 0);
    tps = decode(&x, z->B, z->P, z->G, 0);
    bound = z->B * bw * 1e9 / (wb + kvt * z->B * (z->P + z->G / 2.0));
    result("decode64_tps", tps, "tokens/s, all streams, logits to the host");
    result("decode64_bound_tps", bound, "tokens/s, bandwidth bound");
    prefill(&x, z->B, z->P, 2048);
    result("decode64_greedy_tps", decode(&x, z->B, z->P, z->G, FWD_GREEDY),
           "tokens/s, all streams, greedy ids only (forward_sample)");
    prefill(&x, z->B, z->P, 2048);
    t = z->B / decode(&x, z->B, z->P, z->G, FWD_SAMPLE_DEVICE);
    result("sample64_device_ms", t * 1e3, "ms per step, 64 rows sampled on "
           "the device (top-k 50, top-p 0.9)");
    prefill(&x, z->B, z->P, 2048);
    t = z->B / decode(&x, z->B, z->P, z->G / 4, FWD_SAMPLE_HOST);
    result("sample64_host_ms", t * 1e3, "ms per step, 64 rows, logits to "
           "the host and sampled there");
    llm_sample_rows_free(&x.rows);
    llm_sampler_free(&x.sampler);

    x.b->free(x.b);
    llm_batch_buf_free(&x.bb);
    free(x.tables);
    free(x.logits);
    free(x.ids);
    free(m.weights.layers);
    return 0;
}
