/*
 * test_cuda_ref.c -- the CUDA backend's host side, on the CPU: planning
 * (steps, graph buckets, split-K bounds, KV sizing, batch checks) and the
 * forward pass the GPU runs (cu_forward.c over the plan), computed by the
 * host reference ops (cu_ref.c) and compared with the CPU backend.
 *
 * Exact mode (no bf16 rounding) must equal the CPU backend to 1e-4 of the
 * largest logit over multi-step scenarios (prefill chunks, mixed steps,
 * decode steps padded to graph buckets, paged and shuffled block tables)
 * for every architecture feature and every planning variant (steps cut
 * into pieces, every sequence through the prefill kernel or through the
 * split kernel, few or many splits).  The rounded mode shows what bf16
 * costs: the tolerance the GPU end-to-end check (t/gpu/run.sh) relies on.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tap.h"
#include "backend/backend.h"
#include "backend/batch.h"
#include "../../cuda/cu_plan.h"
#include "../../cuda/cu_ref.h"
#include "../../cuda/cu_testmodel.h"
#include "util/util.h"
#include "logits_cmp.h"


static uint64_t  rng_state = 88172645463325252ULL;

static uint32_t
rnd(void)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return (uint32_t) (rng_state >> 11);
}


/* ---- planning ------------------------------------------------------------ */


static void
test_buckets_and_splits(void)
{
    int     n, ms, prev = LLM_CU_MAX_SPLITS, ok = 1, p, w, msx, lo, per, ns;
    int     b, covered_ok = 1;
    size_t  cap;

    tap_ok(llm_cu_graph_bucket(1, 256) == 1 && llm_cu_graph_bucket(3, 256) == 4
           && llm_cu_graph_bucket(65, 256) == 96
           && llm_cu_graph_bucket(256, 256) == 256
           && llm_cu_graph_bucket(257, 256) == 0
           && llm_cu_graph_bucket(100, 64) == 0
           && llm_cu_graph_bucket(1, 0) == 0,
           "graph buckets: smallest size >= n, none beyond graph_max");

    for (n = 1; n <= 4096; n++) {
        ms = llm_cu_max_splits(n, 8, 1, 132);
        ok &= ms >= 1 && ms <= LLM_CU_MAX_SPLITS && ms <= prev;
        prev = ms;
    }
    tap_ok(ok && llm_cu_max_splits(1, 8, 1, 132) == LLM_CU_MAX_SPLITS
           && llm_cu_max_splits(64, 8, 1, 132) == 3
           && llm_cu_max_splits(2048, 8, 1, 132) == 1,
           "max_splits: within [1, %d], falls as rows grow",
           LLM_CU_MAX_SPLITS);

    cap = llm_cu_part_cap(300, 12, 4, 1, 132);
    ok = 1;
    for (n = 1; n <= 300; n++) {
        ok &= (size_t) n * 12 * llm_cu_max_splits(n, 4, 1, 132) <= cap;
    }
    tap_ok(ok, "partials capacity covers every row count (%zu)", cap);

    /* the splits of [j0, p] tile its blocks, each holding a visible key */
    ok = 1;
    for (p = 0; p < 3000; p += 1 + (int) (rnd() % 37)) {
        for (w = 0; w < 3; w++) {
            int  window = w == 0 ? 0 : w == 1 ? 24 : 1000;
            int  j0 = llm_cu_window_start(p, window);

            for (msx = 1; msx <= LLM_CU_MAX_SPLITS; msx += 7) {
                llm_cu_split_range(p, window, msx, &lo, &per, &ns);
                ok &= ns >= 1 && ns <= msx && per >= LLM_CU_MIN_SPLIT_BLOCKS
                      && lo == j0 / LLM_BLOCK_SIZE;
                for (b = 0; b < ns; b++) {
                    int  first = (lo + b * per) * LLM_BLOCK_SIZE;

                    /* a split's first key is visible or j0 is inside it */
                    covered_ok &= first <= p
                                  && (first >= j0
                                      || first + per * LLM_BLOCK_SIZE > j0);
                }
                covered_ok &= (lo + ns * per) * LLM_BLOCK_SIZE > p
                              && (lo + (ns - 1) * per) * LLM_BLOCK_SIZE <= p;
            }
        }
    }
    tap_ok(ok, "split ranges: 1..max_splits runs of >= %d blocks from the "
           "window's first block", LLM_CU_MIN_SPLIT_BLOCKS);
    tap_ok(covered_ok, "split ranges cover [j0, p] exactly, no empty split");
}


static void
test_kv_blocks(void)
{
    char    err[LLM_ERR_LEN] = "";
    int     n = 0, rc;
    size_t  mib = 1 << 20;

    rc = llm_cu_kv_blocks(1000 * mib, 100 * mib, 0.5, mib, 10, 0, &n, err);
    tap_ok(rc == 0 && n == 500, "KV blocks: utilization x free (%d)", n);
    rc = llm_cu_kv_blocks(1000 * mib, 100 * mib, 0.0, mib, 10, 0, &n, err);
    tap_ok(rc == 0 && n == 900, "KV blocks: utilization 0 means 0.9 (%d)", n);
    rc = llm_cu_kv_blocks(1000 * mib, 100 * mib, 1.0, mib, 10, 0, &n, err);
    tap_ok(rc == 0 && n == 900, "KV blocks: never the reserve (%d)", n);
    rc = llm_cu_kv_blocks(1000 * mib, 100 * mib, 0.01, mib, 300, 0, &n, err);
    tap_ok(rc == 0 && n == 300, "KV blocks: at least min_blocks (%d)", n);
    err[0] = '\0';
    rc = llm_cu_kv_blocks(1000 * mib, 100 * mib, 0.9, mib, 901, 3, &n, err);
    tap_ok(rc == -1 && strstr(err, "cuda:3") && strstr(err, "901 MiB")
           && strstr(err, "900 MiB") && strstr(err, "llm_max_model_len"),
           "KV blocks: too little memory says how much was needed: %s", err);
}


/* A batch over `ns` sequences with n[i] new rows from position pos0[i]. */
typedef struct {
    llm_batch_buf   bb;
    int32_t         tables[4][64];
    int32_t         toks[512];
} test_batch;


static void
test_batch_make(test_batch *t, int ns, const int *n, const int *pos0,
    const llm_logits_mode *mode, int vocab)
{
    int  s, i, k = 0;

    llm_batch_reset(&t->bb);
    for (s = 0; s < ns; s++) {
        for (i = 0; i < n[s]; i++) {
            t->toks[k + i] = (int32_t) (rnd() % (uint32_t) vocab);
        }
        llm_batch_add(&t->bb, t->toks + k, n[s], pos0[s], t->tables[s], 64,
                      mode[s]);
        k += n[s];
    }
}


static llm_cu_plan_cfg
test_plan_cfg(int cap_tok, int cap_logits, int prefill_min_q, int graph_max)
{
    llm_cu_plan_cfg  pc;

    memset(&pc, 0, sizeof(pc));
    pc.cap_tok = cap_tok;
    pc.cap_logits = cap_logits;
    pc.n_sm = 132;
    pc.prefill_min_q = prefill_min_q;
    pc.graph_max = graph_max;
    pc.num_blocks = 256;
    pc.pad_block = 256;
    pc.vocab = 1000;
    pc.nkv = 2;
    pc.n_chunks = 1;
    return pc;
}


/* Plans a batch in steps and checks that the packed metadata says what the
 * batch says, every row once and every logits row once. */
static int
test_plan_cover(llm_cu_plan_cfg pc, const llm_batch *b, int *n_steps,
    int *graphs, char *why)
{
    llm_cu_planner  p;
    llm_cu_step     st;
    llm_cu_md       md;
    int32_t        *buf = NULL;
    int             cap = 0, tok0, i, k, seen_logits = 0, rc, ok = 1, it;
    int            *row_seen = calloc(b->n_tokens + 1, sizeof(int));
    int            *logit_seen = calloc(b->n_logits + 1, sizeof(int));
    char            err[LLM_ERR_LEN];

    llm_cu_planner_init(&p, &pc);
    *n_steps = *graphs = 0;
    if (llm_cu_plan_begin(&p, b, err) != 0) {
        snprintf(why, LLM_ERR_LEN + 64, "plan_begin: %s", err);
        ok = 0;
        goto done;
    }
    for (tok0 = 0; tok0 < b->n_tokens && ok; tok0 += st.n_tok) {
        while ((rc = llm_cu_plan_step(&p, b, tok0, &st, buf, cap)) == 1) {
            buf = realloc(buf, sizeof(int32_t) * st.n_md);
            cap = st.n_md;
        }
        (*n_steps)++;
        *graphs += st.graph;
        llm_cu_md_bind(&md, &st, buf);
        if (st.n_tok < 1 || st.n_tok > pc.cap_tok
            || st.n_logits > pc.cap_logits || st.n_pad > pc.cap_tok
            || (st.graph && st.n_split != st.n_pad))
        {
            snprintf(why, LLM_ERR_LEN + 64, "step at %d: bad sizes", tok0);
            ok = 0;
            break;
        }
        for (i = 0; i < st.n_tok; i++) {
            int  r = tok0 + i, q = md.tok_seq[i];

            row_seen[r]++;
            if (md.tokens[i] != b->tokens[r] || md.pos[i] != b->positions[r]
                || md.slot[i] != b->slots[r]
                || md.bt[md.bt_off[q] + md.pos[i] / 16] * 16
                   + md.pos[i] % 16 != b->slots[r]
                || i < md.seq_start[q]
                || i >= md.seq_start[q] + md.seq_nq[q])
            {
                snprintf(why, LLM_ERR_LEN + 64, "row %d packed wrong", r);
                ok = 0;
            }
        }
        /* rows served by attention: split rows + prefill tiles, once each */
        {
            int  *att = calloc(st.n_pad, sizeof(int));

            for (i = 0; i < st.n_split; i++) {
                att[md.split_tok[i]]++;
            }
            for (it = 0; it < st.n_items; it++) {
                int  q = md.items[2 * it], q0 = md.items[2 * it + 1];

                for (k = q0; k < md.seq_nq[q] && k < q0 + LLM_CU_PREFILL_BQ;
                     k++)
                {
                    att[md.seq_start[q] + k]++;
                }
            }
            for (i = 0; i < st.n_pad; i++) {
                if (att[i] != 1) {
                    snprintf(why, LLM_ERR_LEN + 64, "step row %d attended %d times", i,
                             att[i]);
                    ok = 0;
                }
            }
            free(att);
        }
        for (k = 0; k < st.n_logits; k++) {
            int  idx = p.logits_idx[k];

            if (idx < 0 || idx >= b->n_logits
                || b->logits_rows[idx] != tok0 + md.rows[k])
            {
                snprintf(why, LLM_ERR_LEN + 64, "logits row %d maps wrong", k);
                ok = 0;
            } else {
                logit_seen[idx]++;
            }
            seen_logits++;
        }
    }
    for (i = 0; i < b->n_tokens; i++) {
        if (row_seen[i] != 1) {
            snprintf(why, LLM_ERR_LEN + 64, "row %d planned %d times", i, row_seen[i]);
            ok = 0;
        }
    }
    for (i = 0; i < b->n_logits; i++) {
        if (logit_seen[i] != 1) {
            snprintf(why, LLM_ERR_LEN + 64, "logits row %d produced %d times", i,
                     logit_seen[i]);
            ok = 0;
        }
    }
done:
    free(buf);
    free(row_seen);
    free(logit_seen);
    llm_cu_planner_free(&p);
    return ok;
}


static void
test_plan_steps(void)
{
    test_batch       t = { 0 };
    int              n[3] = { 37, 1, 70 }, pos0[3] = { 0, 40, 16 };
    llm_logits_mode  mode[3] = { LLM_LOGITS_ALL, LLM_LOGITS_LAST,
                                 LLM_LOGITS_NONE };
    int              dn[3] = { 1, 1, 1 }, dpos[3] = { 37, 41, 86 };
    llm_logits_mode  dmode[3] = { LLM_LOGITS_LAST, LLM_LOGITS_LAST,
                                  LLM_LOGITS_LAST };
    int              s, i, steps, graphs, ok;
    char             why[LLM_ERR_LEN + 64] = "";

    for (s = 0; s < 3; s++) {
        for (i = 0; i < 64; i++) {
            t.tables[s][i] = (int32_t) ((s * 64 + i * 7) % 256);
        }
    }
    test_batch_make(&t, 3, n, pos0, mode, 1000);
    ok = test_plan_cover(test_plan_cfg(2048, 256, 8, 256), &t.bb.batch,
                         &steps, &graphs, why);
    tap_ok(ok && steps == 1 && graphs == 0,
           "mixed batch: one step, every row attended once %s", why);
    ok = test_plan_cover(test_plan_cfg(7, 3, 8, 256), &t.bb.batch, &steps,
                         &graphs, why);
    tap_ok(ok && steps >= 108 / 7, "mixed batch cut by 7 rows / 3 logits: "
           "%d steps %s", steps, why);
    ok = test_plan_cover(test_plan_cfg(2048, 256, 1, 0), &t.bb.batch, &steps,
                         &graphs, why);
    tap_ok(ok, "everything through the prefill kernel %s", why);
    ok = test_plan_cover(test_plan_cfg(2048, 256, 1 << 30, 0), &t.bb.batch,
                         &steps, &graphs, why);
    tap_ok(ok, "everything through the split kernel %s", why);

    test_batch_make(&t, 3, dn, dpos, dmode, 1000);
    ok = test_plan_cover(test_plan_cfg(2048, 256, 8, 256), &t.bb.batch,
                         &steps, &graphs, why);
    tap_ok(ok && steps == 1 && graphs == 1,
           "decode batch of 3: one graph step padded to 4 %s", why);
    ok = test_plan_cover(test_plan_cfg(2048, 256, 8, 2), &t.bb.batch,
                         &steps, &graphs, why);
    tap_ok(ok && graphs == 0, "decode batch above graph_max: no graph %s",
           why);
    llm_batch_buf_free(&t.bb);
}


static void
test_plan_rejects(void)
{
    test_batch       t = { 0 };
    int              n[2] = { 5, 1 }, pos0[2] = { 0, 20 }, s, i;
    llm_logits_mode  mode[2] = { LLM_LOGITS_LAST, LLM_LOGITS_LAST };
    llm_cu_plan_cfg  pc = test_plan_cfg(2048, 256, 8, 256);
    llm_cu_planner   p;
    char             err[LLM_ERR_LEN];
    int32_t          saved;

    for (s = 0; s < 2; s++) {
        for (i = 0; i < 64; i++) {
            t.tables[s][i] = (int32_t) (s * 64 + i);
        }
    }
    llm_cu_planner_init(&p, &pc);
    test_batch_make(&t, 2, n, pos0, mode, 1000);
    tap_ok(llm_cu_plan_begin(&p, &t.bb.batch, err) == 0, "a good batch "
           "passes");

    t.bb.tokens[2] = 1000;
    tap_ok(llm_cu_plan_begin(&p, &t.bb.batch, err) == -1
           && strstr(err, "vocabulary"), "token outside the vocabulary: %s",
           err);
    t.bb.tokens[2] = 1;

    saved = t.bb.slots[5];
    t.bb.slots[5] = 256 * 16;
    tap_ok(llm_cu_plan_begin(&p, &t.bb.batch, err) == -1
           && strstr(err, "slot"), "slot outside the cache: %s", err);
    t.bb.slots[5] = saved;

    t.tables[1][0] = 300;
    tap_ok(llm_cu_plan_begin(&p, &t.bb.batch, err) == -1
           && strstr(err, "block 0 is 300"), "block id outside the cache: %s",
           err);
    t.tables[1][0] = 64;

    t.bb.seqs[1].n_blocks = 1;
    tap_ok(llm_cu_plan_begin(&p, &t.bb.batch, err) == -1
           && strstr(err, "block table"), "table shorter than the position: "
           "%s", err);
    t.bb.seqs[1].n_blocks = 64;

    t.bb.seq_of_token[1] = 1;
    tap_ok(llm_cu_plan_begin(&p, &t.bb.batch, err) == -1,
           "row claimed by the wrong sequence: %s", err);
    t.bb.seq_of_token[1] = 0;

    t.bb.logits_rows[1] = t.bb.logits_rows[0];
    tap_ok(llm_cu_plan_begin(&p, &t.bb.batch, err) == -1
           && strstr(err, "twice"), "logits row listed twice: %s", err);
    llm_cu_planner_free(&p);
    llm_batch_buf_free(&t.bb);
}


/* ---- the forward pass against the CPU backend ----------------------------- */


/*
 * The scenario: three sequences on shuffled blocks.  Step 1 prefills them
 * (37 rows with every logit, 5 rows, a 70-row chunk without logits); step 2
 * mixes a decode, a 20-row chunk and the rest of the long prompt; steps 3-10
 * decode all three (graph-sized steps); step 11 feeds one sequence 3 rows
 * (like draft tokens).  Decoded tokens are a's greedy choices.
 */
static void
test_scenario(llm_backend *a, llm_backend *b, int V, logits_cmp *c)
{
    test_batch       t = { 0 };
    int32_t          perm[192], tmp, next[3];
    int              len[3] = { 0, 0, 0 }, s, i, step, best;
    int              n1[3] = { 37, 5, 70 }, n2[3] = { 1, 20, 30 };
    int              n11[3] = { 3, 1, 1 }, nd[3] = { 1, 1, 1 };
    llm_logits_mode  m1[3] = { LLM_LOGITS_ALL, LLM_LOGITS_LAST,
                               LLM_LOGITS_NONE };
    llm_logits_mode  m2[3] = { LLM_LOGITS_LAST, LLM_LOGITS_ALL,
                               LLM_LOGITS_LAST };
    llm_logits_mode  m11[3] = { LLM_LOGITS_ALL, LLM_LOGITS_LAST,
                                LLM_LOGITS_LAST };
    llm_logits_mode  md[3] = { LLM_LOGITS_LAST, LLM_LOGITS_LAST,
                               LLM_LOGITS_LAST };
    float           *la = malloc(sizeof(float) * 128 * V);
    float           *lb = malloc(sizeof(float) * 128 * V);
    int32_t          ids[128];
    char             err[LLM_ERR_LEN];

    for (i = 0; i < 192; i++) {
        perm[i] = i;
    }
    for (i = 191; i > 0; i--) {
        s = (int) (rnd() % (uint32_t) (i + 1));
        tmp = perm[i];
        perm[i] = perm[s];
        perm[s] = tmp;
    }
    for (s = 0; s < 3; s++) {
        memcpy(t.tables[s], perm + 64 * s, sizeof(int32_t) * 64);
    }

    for (step = 1; step <= 11; step++) {
        const int              *n = step == 1 ? n1 : step == 2 ? n2
                                    : step == 11 ? n11 : nd;
        const llm_logits_mode  *m = step == 1 ? m1 : step == 2 ? m2
                                    : step == 11 ? m11 : md;

        test_batch_make(&t, 3, n, len, m, V);
        if (step > 2) {
            for (s = 0; s < 3; s++) {
                t.bb.tokens[t.bb.seqs[s].token_start] = next[s];
            }
        }
        if (a->forward(a, &t.bb.batch, la, err) != 0
            || b->forward(b, &t.bb.batch, lb, err) != 0)
        {
            tap_diag("forward failed: %s", err);
            c->unexplained = 1 << 20;
            break;
        }
        logits_cmp_rows(c, la, lb, t.bb.batch.n_logits, V);
        if (b->forward_sample) {
            /* the same step again through the ids path: the K/V rewrite
             * is identical, so the cache is unchanged */
            if (b->forward_sample(b, &t.bb.batch, NULL, ids, NULL, err) != 0) {
                tap_diag("forward_sample failed: %s", err);
                c->ids_diff = 1 << 20;
                break;
            }
            for (i = 0; i < t.bb.batch.n_logits; i++) {
                logits_top2_gap(lb + (size_t) i * V, V, &best);
                c->ids_diff += ids[i] != best;
            }
        }
        /* next token of each sequence: a's argmax of its last logits row */
        for (s = 0; s < 3; s++) {
            int  row = t.bb.seqs[s].token_start + t.bb.seqs[s].n_tokens - 1;

            for (i = 0; i < t.bb.batch.n_logits; i++) {
                if (t.bb.batch.logits_rows[i] == row) {
                    logits_top2_gap(la + (size_t) i * V, V, &best);
                    next[s] = best;
                }
            }
            len[s] += n[s];
        }
    }
    free(la);
    free(lb);
    llm_batch_buf_free(&t.bb);
}


typedef struct {
    const char       *name;
    llm_cu_test_spec  sp;
} test_model_case;

static const test_model_case model_cases[] = {
    { "llama bf16 gqa2 hd16 llama3-rope",
      { LLM_ARCH_LLAMA, 2, 64, 4, 2, 16, 128, 300, LLM_DTYPE_BF16, 0, 1, 0,
        1 } },
    { "llama f16 mha hd32 tied",
      { LLM_ARCH_LLAMA, 2, 128, 4, 4, 32, 192, 320, LLM_DTYPE_F16, 1, 0, 0,
        2 } },
    { "llama f32 mqa8 hd16",
      { LLM_ARCH_LLAMA, 2, 64, 8, 1, 16, 96, 256, LLM_DTYPE_F32, 0, 0, 0,
        3 } },
    { "qwen2 bf16 bias 20/2 heads (2 head chunks)",
      { LLM_ARCH_QWEN2, 2, 64, 20, 2, 16, 128, 300, LLM_DTYPE_BF16, 0, 0, 0,
        4 } },
    { "qwen3 bf16 qk-norm hd32",
      { LLM_ARCH_QWEN3, 2, 64, 4, 2, 32, 128, 300, LLM_DTYPE_BF16, 1, 0, 0,
        5 } },
    { "mistral bf16 sliding window 24",
      { LLM_ARCH_MISTRAL, 2, 64, 4, 2, 16, 128, 300, LLM_DTYPE_BF16, 0, 0,
        24, 6 } },
    { "llama bf16 hd160 6/1 heads (chunks of 4)",
      { LLM_ARCH_LLAMA, 2, 64, 6, 1, 160, 96, 256, LLM_DTYPE_BF16, 0, 0, 0,
        7 } },
    { "llama bf16 hd256",
      { LLM_ARCH_LLAMA, 1, 64, 2, 1, 256, 96, 256, LLM_DTYPE_BF16, 0, 1, 40,
        8 } },
};

typedef struct {
    const char  *name;
    int          cap_tok, cap_logits, prefill_min_q, graph_max, n_sm;
} test_opt_case;

static const test_opt_case opt_cases[] = {
    { "defaults", 2048, 256, 8, 256, 132 },
    { "steps of 7 rows, 3 logits", 7, 3, 8, 256, 132 },
    { "all prefill kernel", 2048, 256, 1, 0, 132 },
    { "all split kernel", 2048, 256, 1 << 30, 256, 132 },
    { "one multiprocessor (few splits)", 2048, 256, 8, 256, 1 },
    { "no graphs, 5-row prefill threshold", 64, 16, 5, 0, 16 },
};


static void
test_forward(void)
{
    llm_backend_config  bc = { 0 };
    llm_cu_ref_opts     o;
    llm_backend        *cpu, *ref;
    llm_model          *m;
    char                err[LLM_ERR_LEN];
    size_t              mi, oi;
    logits_cmp            c;

    bc.threads = 2;
    bc.min_blocks = 200;
    for (mi = 0; mi < sizeof(model_cases) / sizeof(model_cases[0]); mi++) {
        m = llm_cu_test_model(&model_cases[mi].sp);
        for (oi = 0; oi < sizeof(opt_cases) / sizeof(opt_cases[0]); oi++) {
            llm_cu_ref_opts_default(&o);
            o.exact = 1;
            o.cap_tok = opt_cases[oi].cap_tok;
            o.cap_logits = opt_cases[oi].cap_logits;
            o.prefill_min_q = opt_cases[oi].prefill_min_q;
            o.graph_max = opt_cases[oi].graph_max;
            o.n_sm = opt_cases[oi].n_sm;
            cpu = llm_backend_cpu_create(m, &bc, err);
            ref = llm_cu_ref_create(m, &bc, &o, err);
            if (cpu == NULL || ref == NULL) {
                tap_ok(0, "%s: create: %s", model_cases[mi].name, err);
                continue;
            }
            memset(&c, 0, sizeof(c));
            rng_state = 1234567 + mi;
            test_scenario(cpu, ref, m->config.vocab_size, &c);
            tap_ok(c.rows > 0 && c.max_rel <= 1e-4 && c.argmax_diff == 0
                   && c.ids_diff == 0,
                   "exact reference = CPU backend: %s, %s (%d rows, max "
                   "rel %.2g, argmax diffs %d, greedy ids diffs %d)",
                   model_cases[mi].name, opt_cases[oi].name, c.rows,
                   c.max_rel, c.argmax_diff, c.ids_diff);
            cpu->free(cpu);
            ref->free(ref);
        }
        llm_cu_test_model_free(m);
    }
}


/* What bf16/f16 storage costs against the f32 CPU backend, with the
 * default plan: the tolerance of the GPU checks. */
static void
test_forward_rounded(void)
{
    llm_backend_config  bc = { 0 };
    llm_cu_ref_opts     o;
    llm_backend        *cpu, *ref;
    llm_model          *m;
    char                err[LLM_ERR_LEN];
    size_t              mi;
    logits_cmp            c;

    bc.threads = 2;
    bc.min_blocks = 200;
    llm_cu_ref_opts_default(&o);
    for (mi = 0; mi < sizeof(model_cases) / sizeof(model_cases[0]); mi++) {
        m = llm_cu_test_model(&model_cases[mi].sp);
        cpu = llm_backend_cpu_create(m, &bc, err);
        ref = llm_cu_ref_create(m, &bc, &o, err);
        memset(&c, 0, sizeof(c));
        rng_state = 7654321 + mi;
        test_scenario(cpu, ref, m->config.vocab_size, &c);
        tap_ok(c.rows > 0 && c.max_rel <= 3e-2 && c.unexplained == 0
               && c.ids_diff == 0,
               "rounded reference ~ CPU backend: %s (%d rows, max rel %.2g, "
               "argmax diffs %d, all near-ties)", model_cases[mi].name,
               c.rows, c.max_rel, c.argmax_diff);
        cpu->free(cpu);
        ref->free(ref);
        llm_cu_test_model_free(m);
    }
}


/* ---- backend selection: the CPU path without a GPU ------------------------ */


static void
test_backend_open(void)
{
    llm_cu_test_spec    sp = { LLM_ARCH_LLAMA, 1, 64, 4, 2, 16, 128, 300,
                               LLM_DTYPE_BF16, 0, 0, 0, 9 };
    llm_model          *m = llm_cu_test_model(&sp);
    llm_backend_config  bc = { 0 };
    llm_backend        *b;
    char                err[LLM_ERR_LEN], reason[LLM_ERR_LEN], lib[4096];
    const char         *build = getenv("LLM_BUILD");

    bc.threads = 1;
    bc.min_blocks = 8;

    setenv("LLM_CUDA_LIBRARY", "/nonexistent/libllm_cuda.so", 1);
    reason[0] = err[0] = '\0';
    b = llm_backend_open(m, "auto", &bc, reason, err);
    tap_ok(b && strcmp(b->name, "cpu") == 0 && b->forward_sample == NULL
           && strstr(reason, "no usable GPU")
           && strstr(reason, "not available"),
           "auto without libllm_cuda.so: the CPU, saying why (%s)", reason);
    if (b) {
        b->free(b);
    }
    b = llm_backend_open(m, "cuda:0", &bc, reason, err);
    tap_ok(b == NULL && strstr(err, "llm_device cuda:0")
           && strstr(err, "not available"),
           "cuda:0 without libllm_cuda.so fails clearly (%s)", err);
    b = llm_backend_open(m, "cuda:x", &bc, reason, err);
    tap_ok(b == NULL && strstr(err, "expected cuda:N"), "cuda:x is "
           "rejected (%s)", err);
    b = llm_backend_open(m, "cpu", &bc, reason, err);
    tap_ok(b && strcmp(b->name, "cpu") == 0 && strstr(reason, "llm_device "
           "cpu"), "cpu is the CPU (%s)", reason);
    if (b) {
        b->free(b);
    }

    /* the real library, when make built it (nvcc present) */
    snprintf(lib, sizeof(lib), "%s/libllm_cuda.so", build ? build : "build");
    if (access(lib, R_OK) != 0) {
        tap_ok(1, "# SKIP %s not built (no nvcc)", lib);
        tap_ok(1, "# SKIP %s not built (no nvcc)", lib);
        llm_cu_test_model_free(m);
        return;
    }
    setenv("LLM_CUDA_LIBRARY", lib, 1);
    err[0] = '\0';
    b = llm_backend_open(m, "cuda:0", &bc, reason, err);
    if (b != NULL) {
        /* a machine with a GPU */
        tap_ok(strcmp(b->name, "cuda:0") == 0 && b->forward_sample,
               "cuda:0 with %s: a GPU is there (%s)", lib, reason);
        b->free(b);
    } else {
        tap_ok(strstr(err, "llm_device cuda:0: ") != NULL
               && (strstr(err, "cudaGetDeviceCount")
                   || strstr(err, "CUDA device")),
               "cuda:0 with %s and no GPU fails clearly (%s)", lib, err);
    }
    reason[0] = '\0';
    b = llm_backend_open(m, "auto", &bc, reason, err);
    tap_ok(b != NULL && (strcmp(b->name, "cpu") != 0
                         || strstr(reason, "no usable GPU") != NULL),
           "auto with %s: %s (%s)", lib, b ? b->name : err, reason);
    if (b) {
        b->free(b);
    }
    unsetenv("LLM_CUDA_LIBRARY");
    llm_cu_test_model_free(m);
}


int
main(void)
{
    test_buckets_and_splits();
    test_kv_blocks();
    test_plan_steps();
    test_plan_rejects();
    test_backend_open();
    test_forward();
    test_forward_rounded();
    return tap_done();
}
