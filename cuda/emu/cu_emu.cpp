/*
 * cu_emu.cpp -- the emulated CUDA device, runtime and cuBLAS that let
 * cuda/'s sources run on the CPU (see cuda_runtime.h here).
 *
 * Threads of a block are coroutines on one OS thread, run round robin; a
 * thread runs until it reaches a barrier (__syncthreads,
 * __syncwarp, a shuffle, a WMMA step) or ends.  A barrier opens when every
 * live thread of its warp or block has arrived; a thread that ends leaves
 * its barriers (as exited threads do on the hardware).  A round in which no
 * thread arrives anywhere and none ends is a deadlock: some threads wait at
 * a barrier others never reach, and the emulator aborts saying so.
 *
 * Limits are the hardware's: at most 1024 threads per block (a multiple of
 * 32 here), grid y/z up to 65535, more than 48 KiB of dynamic shared
 * memory only after cudaFuncSetAttribute, at most 227 KiB.  Device memory
 * is capped (LLM_EMU_MEM bytes, default 4 GiB) so that out-of-memory paths
 * can be tested; LLM_EMU_SMS sets the multiprocessor count (default 4),
 * LLM_EMU_DEVICES the device count (default 1).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <setjmp.h>
#include <time.h>
#include <ucontext.h>

#include <map>
#include <unordered_map>
#include <vector>

#include "cublas_v2.h"
#include "cuda_runtime.h"
#include "mma.h"

#define EMU_STACK       (256 * 1024)
#define EMU_MAX_THREADS 1024
#define EMU_SMEM_MAX    (227 * 1024)
#define EMU_SMEM_STATIC (48 * 1024)

struct llm_emu_stream {
    int                                  capturing;
    std::vector<std::function<void()>>   ops;
};

struct llm_emu_event {
    double  t;
};

struct llm_emu_graph {
    std::vector<std::function<void()>>   ops;
};

struct llm_emu_blas {
    cudaStream_t  st;
};

namespace {

/* A coroutine per thread of a block, kept across blocks and launches: it
 * runs the launch's body, reports the end and parks until the next block.
 * Switches are _setjmp/_longjmp (no signal-mask system call); a coroutine
 * is entered the first time with setcontext on its own stack. */
struct emu_bar {
    int       expected, arrived;
    unsigned  gen;
};

struct emu_thread {
    jmp_buf     jb;
    ucontext_t  uc;
    char       *stack;
    dim3        idx;
    int         started, done;
    emu_bar    *wait_bar;                  /* closed barrier it waits at */
    unsigned    wait_gen;
};

struct emu_state {
    dim3                          grid, block, bidx;
    int                           n, cur;
    emu_thread                    th[EMU_MAX_THREADS];   /* never moves */
    jmp_buf                       sched;
    emu_bar                       block_bar;
    emu_bar                       warp_bar[EMU_MAX_THREADS / 32];
    uint64_t                      xbuf[EMU_MAX_THREADS / 32][32];
    const std::function<void()>  *body;
    long                          arrivals;
    unsigned char                *dyn;
    size_t                        dyn_size;
    long                          launches, replays;
    cudaError_t                   last_error;
    std::map<const void *, int>   smem_attr;
    std::unordered_map<void *, size_t>  allocs;
    size_t                        allocated;
} E;

double
emu_now(void)
{
    struct timespec  ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

size_t
emu_env(const char *name, size_t def)
{
    const char  *v = getenv(name);

    return v && *v ? (size_t) strtoull(v, NULL, 10) : def;
}

void
emu_yield(void)
{
    if (!_setjmp(E.th[E.cur].jb)) {
        _longjmp(E.sched, 1);
    }
}

void
emu_wait(emu_bar &b)
{
    emu_thread  &t = E.th[E.cur];

    E.arrivals++;
    if (++b.arrived == b.expected) {
        b.arrived = 0;
        b.gen++;
        return;
    }
    t.wait_bar = &b;
    t.wait_gen = b.gen;
    emu_yield();
    t.wait_bar = NULL;
}

void
emu_leave(emu_bar &b)
{
    b.expected--;
    if (b.expected > 0 && b.arrived == b.expected) {
        b.arrived = 0;
        b.gen++;
    }
}

void
emu_entry(void)
{
    for ( ;; ) {
        int  me;

        (*E.body)();
        me = E.cur;
        E.th[me].done = 1;
        emu_leave(E.warp_bar[me / 32]);
        emu_leave(E.block_bar);
        emu_yield();                            /* parked until next block */
    }
}

void
emu_resume(int i)
{
    emu_thread  &t = E.th[i];

    E.cur = i;
    if (!_setjmp(E.sched)) {
        if (!t.started) {
            t.started = 1;
            setcontext(&t.uc);
        }
        _longjmp(t.jb, 1);
    }
}

void
emu_run_block(void)
{
    int   i, live = E.n;
    long  before;

    for (i = 0; i < E.n; i++) {
        emu_thread  &t = E.th[i];

        t.idx = dim3(i % E.block.x, (i / E.block.x) % E.block.y,
                     i / (E.block.x * E.block.y));
        t.done = 0;
        t.wait_bar = NULL;
    }
    for (i = 0; i < E.n / 32; i++) {
        E.warp_bar[i].expected = 32;
        E.warp_bar[i].arrived = 0;
    }
    E.block_bar.expected = E.n;
    E.block_bar.arrived = 0;
    memset(E.dyn, 0xff, E.dyn_size);
    while (live > 0) {
        int  ended = 0;

        before = E.arrivals;
        for (i = 0; i < E.n; i++) {
            emu_thread  &t = E.th[i];

            if (t.done || (t.wait_bar && t.wait_bar->gen == t.wait_gen)) {
                continue;
            }
            emu_resume(i);
            ended += t.done;
        }
        live -= ended;
        if (live > 0 && ended == 0 && E.arrivals == before) {
            fprintf(stderr, "cuda emulator: deadlock in block (%u,%u,%u): "
                    "threads wait at a barrier (__syncthreads, __syncwarp, "
                    "a shuffle or a WMMA step) that others never reach\n",
                    E.bidx.x, E.bidx.y, E.bidx.z);
            abort();
        }
    }
}

void
emu_run(dim3 grid, dim3 block, size_t smem, const std::function<void()> &f)
{
    unsigned  x, y, z;

    E.grid = grid;
    E.block = block;
    E.n = (int) (block.x * block.y * block.z);
    for (int i = 0; i < E.n; i++) {
        emu_thread  &t = E.th[i];

        if (t.stack == NULL) {
            t.stack = (char *) malloc(EMU_STACK);
            getcontext(&t.uc);
            t.uc.uc_stack.ss_sp = t.stack;
            t.uc.uc_stack.ss_size = EMU_STACK;
            t.uc.uc_link = NULL;
            makecontext(&t.uc, emu_entry, 0);
            t.started = 0;
        }
    }
    if (E.dyn == NULL) {
        E.dyn = (unsigned char *) aligned_alloc(128, EMU_SMEM_MAX);
    }
    E.dyn_size = smem;
    E.body = &f;
    for (z = 0; z < grid.z; z++) {
        for (y = 0; y < grid.y; y++) {
            for (x = 0; x < grid.x; x++) {
                E.bidx = dim3(x, y, z);
                emu_run_block();
            }
        }
    }
    E.launches++;
}

cudaError_t
emu_err(cudaError_t e)
{
    if (e != cudaSuccess) {
        E.last_error = e;
    }
    return e;
}

}  /* namespace */


/* ---- device side -------------------------------------------------------------- */

const dim3 &llm_emu_thread_idx(void) { return E.th[E.cur].idx; }
const dim3 &llm_emu_block_idx(void) { return E.bidx; }
const dim3 &llm_emu_block_dim(void) { return E.block; }
const dim3 &llm_emu_grid_dim(void) { return E.grid; }

void
llm_emu_syncthreads(void)
{
    emu_wait(E.block_bar);
}

void
llm_emu_syncwarp(void)
{
    emu_wait(E.warp_bar[E.cur / 32]);
}

uint64_t
llm_emu_shfl_xor(uint64_t v, int mask)
{
    int       w = E.cur / 32, lane = E.cur % 32;
    uint64_t  r;

    E.xbuf[w][lane] = v;
    emu_wait(E.warp_bar[w]);
    r = E.xbuf[w][(lane ^ mask) & 31];
    emu_wait(E.warp_bar[w]);
    return r;
}

unsigned char *
llm_emu_dyn_smem(void)
{
    return E.dyn;
}

void
llm_emu_check_align(const void *p, size_t align)
{
    if ((uintptr_t) p % align != 0) {
        fprintf(stderr, "cuda emulator: misaligned %zu-byte vector access at "
                "%p (block (%u,%u,%u), thread %d): the GPU faults here\n",
                align, p, E.bidx.x, E.bidx.y, E.bidx.z, E.cur);
        abort();
    }
}

void nvcuda::wmma::
llm_emu_wmma_check(const void *p, unsigned ldm, unsigned esize)
{
    if ((uintptr_t) p % 32 != 0 || ldm % (16 / esize) != 0) {
        fprintf(stderr, "cuda emulator: WMMA tile at %p with ldm %u: the "
                "pointer must be 32-byte aligned and ldm a multiple of %u\n",
                p, ldm, 16 / esize);
        abort();
    }
}

void
llm_emu_enqueue(cudaStream_t st, std::function<void()> op)
{
    if (st != NULL && st->capturing) {
        st->ops.push_back(std::move(op));
    } else {
        op();
    }
}

void
llm_emu_launch(dim3 grid, dim3 block, size_t smem, cudaStream_t st,
    const void *func, std::function<void()> body)
{
    unsigned  threads = block.x * block.y * block.z;
    int       allowed = EMU_SMEM_STATIC;

    if (func && E.smem_attr.count(func)) {
        allowed = E.smem_attr[func];
    }
    if (threads == 0 || threads > EMU_MAX_THREADS || threads % 32 != 0
        || grid.x == 0 || grid.y == 0 || grid.z == 0 || grid.y > 65535
        || grid.z > 65535)
    {
        emu_err(cudaErrorInvalidConfiguration);
        return;
    }
    if (smem > (size_t) allowed || smem > EMU_SMEM_MAX) {
        emu_err(cudaErrorInvalidValue);
        return;
    }
    llm_emu_enqueue(st, [grid, block, smem, body] {
        emu_run(grid, block, smem, body);
    });
}

cudaError_t
llm_emu_func_set_attribute(const void *func, enum cudaFuncAttribute a, int v)
{
    if (a != cudaFuncAttributeMaxDynamicSharedMemorySize || v < 0
        || v > EMU_SMEM_MAX)
    {
        return emu_err(cudaErrorInvalidValue);
    }
    E.smem_attr[func] = v;
    return cudaSuccess;
}


/* ---- runtime API ------------------------------------------------------------------ */

extern "C" {

cudaError_t
cudaGetDeviceCount(int *n)
{
    *n = (int) emu_env("LLM_EMU_DEVICES", 1);
    return *n > 0 ? cudaSuccess : emu_err(cudaErrorNoDevice);
}

cudaError_t
cudaSetDevice(int dev)
{
    return dev == 0 ? cudaSuccess : emu_err(cudaErrorInvalidDevice);
}

cudaError_t
cudaGetDeviceProperties(cudaDeviceProp *p, int dev)
{
    memset(p, 0, sizeof(*p));
    snprintf(p->name, sizeof(p->name), "CUDA emulator (cuda/emu)");
    p->totalGlobalMem = emu_env("LLM_EMU_MEM", (size_t) 4 << 30);
    p->multiProcessorCount = (int) emu_env("LLM_EMU_SMS", 4);
    p->major = 9;
    p->minor = 0;
    return cudaSuccess;
}

cudaError_t
cudaDeviceGetAttribute(int *v, enum cudaDeviceAttr a, int dev)
{
    *v = a == cudaDevAttrMaxSharedMemoryPerBlockOptin ? EMU_SMEM_MAX : 0;
    return cudaSuccess;
}

cudaError_t
cudaDeviceSynchronize(void)
{
    return cudaSuccess;
}

cudaError_t
cudaMalloc(void **p, size_t n)
{
    size_t  cap = emu_env("LLM_EMU_MEM", (size_t) 4 << 30);

    *p = NULL;
    if (E.allocated + n > cap) {
        return emu_err(cudaErrorMemoryAllocation);
    }
    *p = aligned_alloc(256, (n + 255) / 256 * 256);
    if (*p == NULL) {
        return emu_err(cudaErrorMemoryAllocation);
    }
    E.allocs[*p] = n;
    E.allocated += n;
    return cudaSuccess;
}

cudaError_t
cudaFree(void *p)
{
    if (p == NULL) {
        return cudaSuccess;
    }
    if (E.allocs.count(p) == 0) {
        return emu_err(cudaErrorInvalidValue);
    }
    E.allocated -= E.allocs[p];
    E.allocs.erase(p);
    free(p);
    return cudaSuccess;
}

cudaError_t
cudaMemset(void *p, int v, size_t n)
{
    memset(p, v, n);
    return cudaSuccess;
}

cudaError_t
cudaMemcpy(void *dst, const void *src, size_t n, enum cudaMemcpyKind kind)
{
    memmove(dst, src, n);
    return cudaSuccess;
}

cudaError_t
cudaMemcpyAsync(void *dst, const void *src, size_t n,
    enum cudaMemcpyKind kind, cudaStream_t st)
{
    llm_emu_enqueue(st, [dst, src, n] { memmove(dst, src, n); });
    return cudaSuccess;
}

cudaError_t
cudaMemGetInfo(size_t *free_bytes, size_t *total)
{
    *total = emu_env("LLM_EMU_MEM", (size_t) 4 << 30);
    *free_bytes = *total > E.allocated ? *total - E.allocated : 0;
    return cudaSuccess;
}

cudaError_t
cudaHostAlloc(void **p, size_t n, unsigned flags)
{
    *p = malloc(n ? n : 1);
    return *p ? cudaSuccess : emu_err(cudaErrorMemoryAllocation);
}

cudaError_t
cudaFreeHost(void *p)
{
    free(p);
    return cudaSuccess;
}

cudaError_t
cudaStreamCreateWithFlags(cudaStream_t *st, unsigned flags)
{
    *st = new llm_emu_stream();
    (*st)->capturing = 0;
    return cudaSuccess;
}

cudaError_t
cudaStreamDestroy(cudaStream_t st)
{
    delete st;
    return cudaSuccess;
}

cudaError_t
cudaStreamSynchronize(cudaStream_t st)
{
    return st && st->capturing ? emu_err(cudaErrorStreamCaptureInvalidated)
                               : cudaSuccess;
}

cudaError_t
cudaEventCreate(cudaEvent_t *e)
{
    *e = new llm_emu_event();
    (*e)->t = emu_now();
    return cudaSuccess;
}

cudaError_t
cudaEventCreateWithFlags(cudaEvent_t *e, unsigned flags)
{
    return cudaEventCreate(e);
}

cudaError_t
cudaEventDestroy(cudaEvent_t e)
{
    delete e;
    return cudaSuccess;
}

cudaError_t
cudaEventRecord(cudaEvent_t e, cudaStream_t st)
{
    llm_emu_enqueue(st, [e] { e->t = emu_now(); });
    return cudaSuccess;
}

cudaError_t
cudaEventSynchronize(cudaEvent_t e)
{
    return cudaSuccess;
}

cudaError_t
cudaEventElapsedTime(float *ms, cudaEvent_t a, cudaEvent_t b)
{
    *ms = (float) ((b->t - a->t) * 1e3);
    return cudaSuccess;
}

cudaError_t
cudaGetLastError(void)
{
    cudaError_t  e = E.last_error;

    E.last_error = cudaSuccess;
    return e;
}

const char *
cudaGetErrorString(cudaError_t e)
{
    switch (e) {
    case cudaSuccess: return "no error";
    case cudaErrorInvalidValue: return "invalid argument";
    case cudaErrorMemoryAllocation: return "out of memory";
    case cudaErrorInvalidConfiguration: return "invalid configuration "
                                               "argument";
    case cudaErrorInvalidDevice: return "invalid device ordinal";
    case cudaErrorNoDevice: return "no CUDA-capable device is detected";
    case cudaErrorStreamCaptureInvalidated: return "operation failed due to "
                                                   "a previous error during "
                                                   "capture";
    default: return "unknown error";
    }
}

const char *
cudaGetErrorName(cudaError_t e)
{
    switch (e) {
    case cudaSuccess: return "cudaSuccess";
    case cudaErrorInvalidValue: return "cudaErrorInvalidValue";
    case cudaErrorMemoryAllocation: return "cudaErrorMemoryAllocation";
    case cudaErrorInvalidConfiguration: return "cudaErrorInvalidConfiguration";
    case cudaErrorInvalidDevice: return "cudaErrorInvalidDevice";
    case cudaErrorNoDevice: return "cudaErrorNoDevice";
    default: return "cudaErrorUnknown";
    }
}

cudaError_t
cudaStreamBeginCapture(cudaStream_t st, enum cudaStreamCaptureMode mode)
{
    if (st == NULL || st->capturing) {
        return emu_err(cudaErrorInvalidValue);
    }
    st->capturing = 1;
    st->ops.clear();
    return cudaSuccess;
}

cudaError_t
cudaStreamEndCapture(cudaStream_t st, cudaGraph_t *g)
{
    if (st == NULL || !st->capturing) {
        return emu_err(cudaErrorInvalidValue);
    }
    *g = new llm_emu_graph();
    (*g)->ops.swap(st->ops);
    st->capturing = 0;
    return cudaSuccess;
}

cudaError_t
cudaGraphInstantiate(cudaGraphExec_t *x, cudaGraph_t g,
    unsigned long long flags)
{
    *x = new llm_emu_graph();
    (*x)->ops = g->ops;
    return cudaSuccess;
}

cudaError_t
cudaGraphLaunch(cudaGraphExec_t x, cudaStream_t st)
{
    llm_emu_enqueue(st, [x] {
        for (auto &op : x->ops) {
            op();
        }
        E.replays++;
    });
    return cudaSuccess;
}

cudaError_t
cudaGraphExecDestroy(cudaGraphExec_t x)
{
    delete x;
    return cudaSuccess;
}

cudaError_t
cudaGraphDestroy(cudaGraph_t g)
{
    delete g;
    return cudaSuccess;
}

long
llm_emu_launch_count(void)
{
    return E.launches;
}

long
llm_emu_graph_replays(void)
{
    return E.replays;
}


/* ---- cuBLAS ---------------------------------------------------------------------- */

cublasStatus_t
cublasCreate(cublasHandle_t *h)
{
    *h = new llm_emu_blas();
    (*h)->st = NULL;
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t
cublasDestroy(cublasHandle_t h)
{
    delete h;
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t
cublasSetStream(cublasHandle_t h, cudaStream_t st)
{
    h->st = st;
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t
cublasSetWorkspace(cublasHandle_t h, void *ws, size_t n)
{
    return CUBLAS_STATUS_SUCCESS;
}

const char *
cublasGetStatusString(cublasStatus_t s)
{
    return s == CUBLAS_STATUS_SUCCESS ? "success" : "not supported by the "
                                                    "emulator";
}

const char *
cublasGetStatusName(cublasStatus_t s)
{
    return s == CUBLAS_STATUS_SUCCESS ? "CUBLAS_STATUS_SUCCESS"
                                      : "CUBLAS_STATUS_NOT_SUPPORTED";
}

static float
emu_elem(const void *p, cudaDataType_t t, size_t i)
{
    switch (t) {
    case CUDA_R_16BF: return __bfloat162float(((const __nv_bfloat16 *) p)[i]);
    case CUDA_R_16F: return __half2float(((const __half *) p)[i]);
    default: return ((const float *) p)[i];
    }
}

cublasStatus_t
cublasGemmEx(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb,
    int m, int n, int k, const void *alpha, const void *A, cudaDataType_t at,
    int lda, const void *B, cudaDataType_t bt, int ldb, const void *beta,
    void *C, cudaDataType_t ct, int ldc, cublasComputeType_t compute,
    cublasGemmAlgo_t algo)
{
    float  al = *(const float *) alpha, be = *(const float *) beta;

    if (ct != CUDA_R_32F || compute != CUBLAS_COMPUTE_32F
        || lda < (ta == CUBLAS_OP_N ? m : k)
        || ldb < (tb == CUBLAS_OP_N ? k : n) || ldc < m)
    {
        return CUBLAS_STATUS_INVALID_VALUE;
    }
    llm_emu_enqueue(h->st, [=] {
        float  *c = (float *) C;

        for (int j = 0; j < n; j++) {
            for (int i = 0; i < m; i++) {
                float  s = 0.0f;

                for (int l = 0; l < k; l++) {
                    float  a = ta == CUBLAS_OP_N
                               ? emu_elem(A, at, i + (size_t) l * lda)
                               : emu_elem(A, at, l + (size_t) i * lda);
                    float  b = tb == CUBLAS_OP_N
                               ? emu_elem(B, bt, l + (size_t) j * ldb)
                               : emu_elem(B, bt, j + (size_t) l * ldb);

                    s += a * b;
                }
                c[i + (size_t) j * ldc] = al * s
                    + (be != 0.0f ? be * c[i + (size_t) j * ldc] : 0.0f);
            }
        }
    });
    return CUBLAS_STATUS_SUCCESS;
}

}  /* extern "C" */
