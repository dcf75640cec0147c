/*
 * cu_attention.cu -- paged attention over the block tables, with GQA and an
 * optional sliding window:
 *
 *   llm_k_attn_split + llm_k_attn_merge: split-K decode.  One block per
 *     (row, KV head, chunk of that group's q heads, split of the key range);
 *     its four warps walk the split's cache blocks with an online softmax,
 *     then merge their states and write one partial (max, sum, unnormalized
 *     output) per head; the merge kernel combines the splits.  The split of
 *     a row is derived on the device from its position
 *     (llm_cu_split_range), so a CUDA graph captured once serves every
 *     context length.  Serves decode rows and short runs of rows.
 *
 *   llm_k_attn_prefill: flash-style prefill with tensor cores (WMMA, bf16 or
 *     f16 in, f32 accumulate).  One block per (64-row query tile of a
 *     sequence, q head); per tile of bk keys it stages K and V in shared
 *     memory, computes S = Q K^T, applies the causal/window mask and the
 *     online softmax row by row, and accumulates O += P V with O kept in
 *     shared memory (the only place WMMA lets a row be rescaled).
 *
 * Both compute what cu_ref.c's attention ops compute: scores scaled by
 * 1/sqrt(hd), keys j0 <= j <= p, softmax in f32, T only for the inputs, P
 * (prefill) and the output.
 */
#include <math.h>
#include <mma.h>

#include "cu_check.cuh"
#include "cu_device.cuh"
#include "cu_kernels.h"

using namespace nvcuda;


/* ---- split-K decode -------------------------------------------------------- */

/*
 * MAXHD in {64, 128, 256} bounds the head dimension (hd <= MAXHD, hd % 16
 * == 0).  HC heads per block (llm_cu_head_chunk).  Thread layout per warp
 * and cache block of 16 keys:
 *   scores:  lane = key (0..15) + 16 * part; part p reads the 8-element
 *            chunks p, p + 2, ... of the key's row; one xor-16 shuffle sums
 *            the two halves, so both lanes of a key hold its full score;
 *   values:  lane = dim chunk (0..15) + 16 * parity; it owns dims
 *            [chunk * MAXHD/16, +MAXHD/16) and the keys of its parity; one
 *            xor-16 shuffle at the end sums the parities.
 */
template <typename T, int MAXHD>
__global__ void __launch_bounds__(128)
llm_k_attn_split(const T *__restrict__ q, const T *__restrict__ kc,
    const T *__restrict__ vc, const int32_t *__restrict__ split_tok,
    const int32_t *__restrict__ pos, const int32_t *__restrict__ tok_seq,
    const int32_t *__restrict__ bt_off, const int32_t *__restrict__ bt,
    int nh, int nkv, int hd, int window, int max_splits, int n_chunks,
    float scale, float *__restrict__ part_ml, float *__restrict__ part_acc)
{
    constexpr int   HC = MAXHD > 128 ? 4 : 8;
    constexpr int   DQ = MAXHD / 16;
    __shared__ __align__(16) float qs[HC][MAXHD];
    __shared__ float pw[4][HC][16];
    __shared__ float red_acc[4][HC][MAXHD];
    __shared__ float red_m[4][HC], red_l[4][HC];

    int   item = blockIdx.x, sp = blockIdx.y;
    int   c = item % n_chunks;
    int   g = (item / n_chunks) % nkv;
    int   ti = item / n_chunks / nkv;
    int   t = split_tok[ti], p = pos[t], gs = nh / nkv;
    int   lo, per, ns, j0, h0, nhc, b_begin, b_end;
    int   warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    int   key = lane & 15, part = lane >> 4, dc = lane & 15;
    float m[HC], l[HC], acc[HC][DQ], sc[HC];
    const int32_t *tab;

    llm_cu_split_range(p, window, max_splits, &lo, &per, &ns);
    if (sp >= ns) {
        return;                                 /* the whole block */
    }
    j0 = llm_cu_window_start(p, window);
    h0 = g * gs + c * HC;
    nhc = gs - c * HC < HC ? gs - c * HC : HC;
    b_begin = lo + sp * per;
    b_end = lo + (sp + 1) * per < p / 16 + 1 ? lo + (sp + 1) * per
                                             : p / 16 + 1;
    tab = bt + bt_off[tok_seq[t]];

    for (int i = threadIdx.x; i < HC * MAXHD; i += blockDim.x) {
        int  hh = i / MAXHD, d = i % MAXHD;

        qs[hh][d] = hh < nhc && d < hd
                    ? llm_to_f(q[(size_t) t * nh * hd + (size_t) (h0 + hh) * hd
                                 + d]) * scale
                    : 0.0f;
    }
    __syncthreads();

#pragma unroll
    for (int hh = 0; hh < HC; hh++) {
        m[hh] = -INFINITY;
        l[hh] = 0.0f;
#pragma unroll
        for (int e = 0; e < DQ; e++) {
            acc[hh][e] = 0.0f;
        }
    }

    for (int b = b_begin + warp; b < b_end; b += 4) {
        size_t    boff = ((size_t) tab[b] * nkv + g) * 16 * hd;
        const T  *kb = kc + boff, *vb = vc + boff;
        int       j = b * 16 + key;
        bool      valid = j >= j0 && j <= p;

        /* scores of this lane's key, half the dims each */
#pragma unroll
        for (int hh = 0; hh < HC; hh++) {
            sc[hh] = 0.0f;
        }
#pragma unroll
        for (int cc = 0; cc < MAXHD / 16; cc++) {
            int    ci = 2 * cc + part;
            float  kf[8];

            if (ci * 8 < hd) {
                llm_unpack8<T>(llm_ldv<uint4>(kb + key * hd + ci * 8), kf);
#pragma unroll
                for (int hh = 0; hh < HC; hh++) {
                    if (hh < nhc) {
                        float4  a = llm_ldv<float4>(&qs[hh][ci * 8]);
                        float4  bq = llm_ldv<float4>(&qs[hh][ci * 8 + 4]);

                        sc[hh] += a.x * kf[0] + a.y * kf[1] + a.z * kf[2]
                                  + a.w * kf[3] + bq.x * kf[4] + bq.y * kf[5]
                                  + bq.z * kf[6] + bq.w * kf[7];
                    }
                }
            }
        }

        /* online softmax over the block's 16 keys, per head */
#pragma unroll
        for (int hh = 0; hh < HC; hh++) {
            float  s, bm, nm, alpha, pj, ps;

            s = sc[hh] + __shfl_xor_sync(LLM_CU_FULL_MASK, sc[hh], 16);
            s = valid ? s : -INFINITY;
            bm = s;
            for (int o = 8; o > 0; o >>= 1) {
                bm = fmaxf(bm, __shfl_xor_sync(LLM_CU_FULL_MASK, bm, o));
            }
            /* every block of the range holds a visible key: bm is finite */
            nm = fmaxf(m[hh], bm);
            alpha = expf(m[hh] - nm);
            pj = valid ? expf(s - nm) : 0.0f;
            ps = pj;
            for (int o = 8; o > 0; o >>= 1) {
                ps += __shfl_xor_sync(LLM_CU_FULL_MASK, ps, o);
            }
            l[hh] = l[hh] * alpha + ps;
            m[hh] = nm;
#pragma unroll
            for (int e = 0; e < DQ; e++) {
                acc[hh][e] *= alpha;
            }
            if (part == 0) {
                pw[warp][hh][key] = pj;
            }
        }
        __syncwarp();

        /* acc += p * V over this lane's keys (parity part) and dims */
        if (dc * DQ < hd) {
#pragma unroll 2
            for (int jj = 0; jj < 8; jj++) {
                int    k2 = 2 * jj + part, jv = b * 16 + k2;
                float  vf[DQ];

                if (jv < j0 || jv > p) {
                    continue;                   /* unwritten or masked */
                }
                llm_load_n<T, DQ>(vb + k2 * hd + dc * DQ, vf);
#pragma unroll
                for (int hh = 0; hh < HC; hh++) {
                    if (hh < nhc) {
                        float  pv = pw[warp][hh][k2];

#pragma unroll
                        for (int e = 0; e < DQ; e++) {
                            acc[hh][e] += pv * vf[e];
                        }
                    }
                }
            }
        }
        __syncwarp();                           /* pw is rewritten next */
    }

    /* the two key parities of each dim chunk */
#pragma unroll
    for (int hh = 0; hh < HC; hh++) {
#pragma unroll
        for (int e = 0; e < DQ; e++) {
            acc[hh][e] += __shfl_xor_sync(LLM_CU_FULL_MASK, acc[hh][e], 16);
        }
    }
    /* merge the four warps (a warp without blocks has m = -inf, l = 0) */
    if (lane < 16 && dc * DQ < hd) {
#pragma unroll
        for (int hh = 0; hh < HC; hh++) {
#pragma unroll
            for (int e = 0; e < DQ; e++) {
                red_acc[warp][hh][dc * DQ + e] = acc[hh][e];
            }
        }
    }
    if (lane == 0) {
#pragma unroll
        for (int hh = 0; hh < HC; hh++) {
            red_m[warp][hh] = m[hh];
            red_l[warp][hh] = l[hh];
        }
    }
    __syncthreads();
    for (int i = threadIdx.x; i < nhc * hd; i += blockDim.x) {
        int     hh = i / hd, d = i % hd;
        float   M = -INFINITY, L = 0.0f, o = 0.0f, f;
        size_t  pi;

        for (int w = 0; w < 4; w++) {
            M = fmaxf(M, red_m[w][hh]);
        }
        for (int w = 0; w < 4; w++) {
            f = expf(red_m[w][hh] - M);         /* 0 for an idle warp */
            L += f * red_l[w][hh];
            o += f * red_acc[w][hh][d];
        }
        pi = ((size_t) ti * nh + h0 + hh) * max_splits + sp;
        part_acc[pi * hd + d] = o;
        if (d == 0) {
            part_ml[2 * pi] = M;
            part_ml[2 * pi + 1] = L;
        }
    }
}


/* One block per (row, head): combines the row's splits into att. */
template <typename T>
__global__ void
llm_k_attn_merge(const int32_t *__restrict__ split_tok,
    const int32_t *__restrict__ pos, int nh, int hd, int window,
    int max_splits, const float *__restrict__ part_ml,
    const float *__restrict__ part_acc, T *__restrict__ att)
{
    int     ti = blockIdx.x, h = blockIdx.y, t = split_tok[ti];
    int     lo, per, ns;
    size_t  pi = ((size_t) ti * nh + h) * max_splits;
    float   M = -INFINITY, L, o, w;

    llm_cu_split_range(pos[t], window, max_splits, &lo, &per, &ns);
    for (int s = 0; s < ns; s++) {
        M = fmaxf(M, part_ml[2 * (pi + s)]);
    }
    for (int d = threadIdx.x; d < hd; d += blockDim.x) {
        L = 0.0f;
        o = 0.0f;
        for (int s = 0; s < ns; s++) {
            w = expf(part_ml[2 * (pi + s)] - M);
            L += w * part_ml[2 * (pi + s) + 1];
            o += w * part_acc[(pi + s) * hd + d];
        }
        att[(size_t) t * nh * hd + (size_t) h * hd + d] = llm_from_f<T>(o / L);
    }
}


/* ---- flash-style prefill ---------------------------------------------------- */

#define LLM_PF_BQ LLM_CU_PREFILL_BQ            /* 64 rows: 4 warps x 16 */

static int
llm_pf_bk(int hd)
{
    return hd > 128 ? 32 : 64;
}


/* Shared memory of one block, in bytes; the row strides are padded (by 8
 * T or 4 floats) against bank conflicts, and every WMMA tile pointer stays
 * 32-byte aligned because tiles start on 16-row and 16-column boundaries. */
static size_t
llm_pf_smem(int hd, int tsize)
{
    int  bk = llm_pf_bk(hd), ldt = hd + 8, lds = bk + 4, ldp = bk + 8;
    int  ldo = hd + 4;

    return (size_t) (LLM_PF_BQ + 2 * bk) * ldt * tsize
           + (size_t) LLM_PF_BQ * lds * sizeof(float)
           + (size_t) LLM_PF_BQ * ldp * tsize
           + (size_t) LLM_PF_BQ * ldo * sizeof(float);
}


template <typename T>
__global__ void __launch_bounds__(128)
llm_k_attn_prefill(const T *__restrict__ q, const T *__restrict__ kc,
    const T *__restrict__ vc, const int32_t *__restrict__ items,
    const int32_t *__restrict__ seq_start, const int32_t *__restrict__ seq_nq,
    const int32_t *__restrict__ pos, const int32_t *__restrict__ bt_off,
    const int32_t *__restrict__ bt, int nh, int nkv, int hd, int window,
    float scale, int bk, T *__restrict__ att)
{
#ifdef LLM_CU_EMU
    unsigned char *llm_pf_mem = llm_emu_dyn_smem();
#else
    extern __shared__ __align__(128) unsigned char llm_pf_mem[];
#endif
    const int  ldt = hd + 8, lds = bk + 4, ldp = bk + 8, ldo = hd + 4;
    T         *Qs = reinterpret_cast<T *>(llm_pf_mem);
    T         *Ks = Qs + LLM_PF_BQ * ldt;
    T         *Vs = Ks + bk * ldt;
    float     *Ss = reinterpret_cast<float *>(Vs + bk * ldt);
    T         *Ps = reinterpret_cast<T *>(Ss + LLM_PF_BQ * lds);
    float     *Os = reinterpret_cast<float *>(Ps + LLM_PF_BQ * ldp);

    int   it = blockIdx.x, h = blockIdx.y;
    int   seq = items[2 * it], q0 = items[2 * it + 1];
    int   nq = seq_nq[seq] - q0 < LLM_PF_BQ ? seq_nq[seq] - q0 : LLM_PF_BQ;
    int   r0 = seq_start[seq] + q0;
    int   p0 = pos[r0], pmax = p0 + nq - 1;
    int   g = h / (nh / nkv), hd8 = hd / 8;
    int   warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    int   row = warp * 16 + (lane >> 1), half = lane & 1;
    int   p_r = p0 + row, ws_r = llm_cu_window_start(p0 + row, window);
    bool  row_valid = row < nq;
    int   jmin = llm_cu_window_start(p0, window);
    float m_r = -INFINITY, l_r = 0.0f;
    const int32_t *tab = bt + bt_off[seq];

    /* Q tile (rows past the sequence's run are zero) and O = 0 */
    for (int i = threadIdx.x; i < LLM_PF_BQ * hd8; i += blockDim.x) {
        int    r = i / hd8, c = i % hd8;
        uint4  v = make_uint4(0, 0, 0, 0);

        if (r < nq) {
            v = llm_ldv<uint4>(q + (size_t) (r0 + r) * nh * hd
                               + (size_t) h * hd + c * 8);
        }
        llm_stv(Qs + r * ldt + c * 8, v);
    }
    for (int i = threadIdx.x; i < LLM_PF_BQ * ldo; i += blockDim.x) {
        Os[i] = 0.0f;
    }
    __syncthreads();

    for (int kt = jmin / bk * bk; kt <= pmax; kt += bk) {
        /* K and V tiles; keys outside [jmin, pmax] are zero */
        for (int i = threadIdx.x; i < bk * hd8; i += blockDim.x) {
            int    kr = i / hd8, c = i % hd8, j = kt + kr;
            uint4  kv = make_uint4(0, 0, 0, 0), vv = kv;

            if (j >= jmin && j <= pmax) {
                size_t  off = (((size_t) tab[j >> 4] * nkv + g) * 16
                               + (j & 15)) * hd + c * 8;

                kv = llm_ldv<uint4>(kc + off);
                vv = llm_ldv<uint4>(vc + off);
            }
            llm_stv(Ks + kr * ldt + c * 8, kv);
            llm_stv(Vs + kr * ldt + c * 8, vv);
        }
        __syncthreads();

        /* S = Q K^T for this warp's 16 rows */
        for (int nt = 0; nt < bk / 16; nt++) {
            wmma::fragment<wmma::accumulator, 16, 16, 16, float>  sf;

            wmma::fill_fragment(sf, 0.0f);
            for (int kk = 0; kk < hd / 16; kk++) {
                wmma::fragment<wmma::matrix_a, 16, 16, 16, T,
                               wmma::row_major>  af;
                wmma::fragment<wmma::matrix_b, 16, 16, 16, T,
                               wmma::col_major>  bf;

                wmma::load_matrix_sync(af, Qs + warp * 16 * ldt + kk * 16,
                                       ldt);
                wmma::load_matrix_sync(bf, Ks + nt * 16 * ldt + kk * 16, ldt);
                wmma::mma_sync(sf, af, bf, sf);
            }
            wmma::store_matrix_sync(Ss + warp * 16 * lds + nt * 16, sf, lds,
                                    wmma::mem_row_major);
        }
        __syncwarp();

        /* mask and online softmax: two lanes per row, half the keys each */
        {
            float  *srow = Ss + row * lds, *orow = Os + row * ldo;
            T      *prow = Ps + row * ldp;
            int     cb = half * (bk / 2);
            float   tmax = -INFINITY, nm, alpha, psum = 0.0f, sv;

            for (int cc = cb; cc < cb + bk / 2; cc++) {
                int  j = kt + cc;

                sv = row_valid && j <= p_r && j >= ws_r ? srow[cc] * scale
                                                        : -INFINITY;
                srow[cc] = sv;
                tmax = fmaxf(tmax, sv);
            }
            tmax = fmaxf(tmax, __shfl_xor_sync(LLM_CU_FULL_MASK, tmax, 1));
            nm = fmaxf(m_r, tmax);
            if (nm == -INFINITY) {
                /* nothing visible to this row yet */
                alpha = 1.0f;
                for (int cc = cb; cc < cb + bk / 2; cc++) {
                    prow[cc] = llm_from_f<T>(0.0f);
                }
            } else {
                alpha = expf(m_r - nm);
                for (int cc = cb; cc < cb + bk / 2; cc++) {
                    float  pv = expf(srow[cc] - nm);

                    psum += pv;
                    prow[cc] = llm_from_f<T>(pv);
                }
            }
            psum += __shfl_xor_sync(LLM_CU_FULL_MASK, psum, 1);
            l_r = l_r * alpha + psum;
            m_r = nm;
            for (int d = half * (hd / 2); d < (half + 1) * (hd / 2); d++) {
                orow[d] *= alpha;
            }
        }
        __syncwarp();

        /* O += P V */
        for (int dt = 0; dt < hd / 16; dt++) {
            wmma::fragment<wmma::accumulator, 16, 16, 16, float>  of;

            wmma::load_matrix_sync(of, Os + warp * 16 * ldo + dt * 16, ldo,
                                   wmma::mem_row_major);
            for (int kk = 0; kk < bk / 16; kk++) {
                wmma::fragment<wmma::matrix_a, 16, 16, 16, T,
                               wmma::row_major>  pf;
                wmma::fragment<wmma::matrix_b, 16, 16, 16, T,
                               wmma::row_major>  vf;

                wmma::load_matrix_sync(pf, Ps + warp * 16 * ldp + kk * 16,
                                       ldp);
                wmma::load_matrix_sync(vf, Vs + kk * 16 * ldt + dt * 16, ldt);
                wmma::mma_sync(of, pf, vf, of);
            }
            wmma::store_matrix_sync(Os + warp * 16 * ldo + dt * 16, of, ldo,
                                    wmma::mem_row_major);
        }
        __syncthreads();                        /* K/V tiles are reloaded */
    }

    if (row_valid) {
        float  *orow = Os + row * ldo;
        T      *out = att + (size_t) (r0 + row) * nh * hd + (size_t) h * hd;

        for (int d = half * (hd / 2); d < (half + 1) * (hd / 2); d++) {
            out[d] = llm_from_f<T>(orow[d] / l_r);
        }
    }
}


/* ---- launchers ------------------------------------------------------------- */

template <typename T>
static void
llm_split_launch(cudaStream_t st, const llm_cu_state *s, const llm_cu_md *md,
    int n_split, int max_splits, const void *kc, const void *vc)
{
    int    hc = llm_cu_head_chunk(s->hd), gs = s->nh / s->nkv;
    int    n_chunks = (gs + hc - 1) / hc;
    dim3   grid((unsigned) n_split * s->nkv * n_chunks, max_splits);
    float  scale = 1.0f / sqrtf((float) s->hd);
    int    win = s->c->sliding_window;

#define LLM_SPLIT_ARGS                                                       \
    (const T *) s->q, (const T *) kc, (const T *) vc, md->split_tok,         \
    md->pos, md->tok_seq, md->bt_off, md->bt, s->nh, s->nkv, s->hd, win,     \
    max_splits, n_chunks, scale, s->part_ml, s->part_acc

    if (s->hd <= 64) {
        LLM_CU_LAUNCH((llm_k_attn_split<T, 64>), grid, 128, 0, st,
                      LLM_SPLIT_ARGS);
    } else if (s->hd <= 128) {
        LLM_CU_LAUNCH((llm_k_attn_split<T, 128>), grid, 128, 0, st,
                      LLM_SPLIT_ARGS);
    } else {
        LLM_CU_LAUNCH((llm_k_attn_split<T, 256>), grid, 128, 0, st,
                      LLM_SPLIT_ARGS);
    }
#undef LLM_SPLIT_ARGS
    LLM_CU_LAUNCH(llm_k_attn_merge<T>, dim3(n_split, s->nh),
                  s->hd <= 128 ? 128 : 256, 0, st, md->split_tok, md->pos,
                  s->nh, s->hd, win, max_splits, s->part_ml, s->part_acc,
                  (T *) s->att);
}


extern "C" int
llm_cuk_attn_split(cudaStream_t st, int f16, const llm_cu_state *s,
    const llm_cu_md *md, int n_split, int max_splits, const void *kc,
    const void *vc, char *err)
{
    if (n_split <= 0) {
        return 0;
    }
    if ((size_t) n_split * s->nh * max_splits > s->cap_part) {
        llm_cu_errf(err, "attention: %d rows x %d splits exceed the partials "
                    "buffer", n_split, max_splits);
        return -1;
    }
    if (f16) {
        llm_split_launch<__half>(st, s, md, n_split, max_splits, kc, vc);
    } else {
        llm_split_launch<__nv_bfloat16>(st, s, md, n_split, max_splits, kc,
                                        vc);
    }
    return LLM_CU_LAUNCHED(err) ? -1 : 0;
}


/* The prefill kernel needs more than the default 48 KiB of shared memory:
 * opt in once per instantiation, and fail early if the device lacks it. */
extern "C" int
llm_cuk_attn_init(int f16, int hd, int device, char *err)
{
    size_t  need = llm_pf_smem(hd, 2);
    int     optin = 0;

    if (LLM_CU_TRY(cudaDeviceGetAttribute(&optin,
                       cudaDevAttrMaxSharedMemoryPerBlockOptin, device), err))
    {
        return -1;
    }
    if ((size_t) optin < need) {
        llm_cu_errf(err, "cuda:%d: the prefill attention kernel needs %zu "
                    "bytes of shared memory per block for head_dim %d; the "
                    "device allows %d", device, need, hd, optin);
        return -1;
    }
    if (f16) {
        if (LLM_CU_TRY(cudaFuncSetAttribute(llm_k_attn_prefill<__half>,
                           cudaFuncAttributeMaxDynamicSharedMemorySize,
                           (int) need), err))
        {
            return -1;
        }
    } else if (LLM_CU_TRY(cudaFuncSetAttribute(
                              llm_k_attn_prefill<__nv_bfloat16>,
                              cudaFuncAttributeMaxDynamicSharedMemorySize,
                              (int) need), err))
    {
        return -1;
    }
    return 0;
}


extern "C" int
llm_cuk_attn_prefill(cudaStream_t st, int f16, const llm_cu_state *s,
    const llm_cu_md *md, int n_items, const void *kc, const void *vc,
    char *err)
{
    dim3    grid(n_items, s->nh);
    size_t  smem = llm_pf_smem(s->hd, 2);
    float   scale = 1.0f / sqrtf((float) s->hd);
    int     bk = llm_pf_bk(s->hd), win = s->c->sliding_window;

    if (n_items <= 0) {
        return 0;
    }
    if (f16) {
        LLM_CU_LAUNCH(llm_k_attn_prefill<__half>, grid, 128, smem, st,
            (const __half *) s->q, (const __half *) kc, (const __half *) vc,
            md->items, md->seq_start, md->seq_nq, md->pos, md->bt_off, md->bt,
            s->nh, s->nkv, s->hd, win, scale, bk, (__half *) s->att);
    } else {
        LLM_CU_LAUNCH(llm_k_attn_prefill<__nv_bfloat16>, grid, 128, smem,
            st, (const __nv_bfloat16 *) s->q, (const __nv_bfloat16 *) kc,
            (const __nv_bfloat16 *) vc, md->items, md->seq_start, md->seq_nq,
            md->pos, md->bt_off, md->bt, s->nh, s->nkv, s->hd, win, scale, bk,
            (__nv_bfloat16 *) s->att);
    }
    return LLM_CU_LAUNCHED(err) ? -1 : 0;
}
