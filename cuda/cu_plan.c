/*
 * cu_plan.c -- from an engine batch to device steps (see cu_plan.h).
 *
 * A batch is cut into steps of at most cap_tok rows and cap_logits logits
 * rows (a long prefill, or `llm logits` over many ids, runs as several
 * steps: the K/V a later step's rows attend to were written by the earlier
 * steps).  Within a step each sequence's run of rows goes either to the
 * tensor-core prefill kernel, in tiles of 64 rows, or row by row to the
 * split-K decode kernel.  A step of single-row sequences that all want
 * logits is a decode step: it is padded to a graph bucket so that a CUDA
 * graph captured for that size can replay it; padding rows are token 0 at
 * position 0 of a padding sequence whose only block is the backend's
 * private padding block.
 */
#include <stdlib.h>
#include <string.h>

#include "cu_plan.h"
#include "cu_util.h"

/* Decode batch sizes that get a CUDA graph (like vLLM's capture sizes). */
static const int llm_cu_buckets[] = {
    1, 2, 4, 8, 16, 24, 32, 48, 64, 96, 128, 160, 192, 256, 0
};


void
llm_cu_planner_init(llm_cu_planner *p, const llm_cu_plan_cfg *cfg)
{
    memset(p, 0, sizeof(*p));
    p->cfg = *cfg;
    p->logits_idx = llm_cu_xcalloc(cfg->cap_logits > 0 ? cfg->cap_logits : 1,
                                   sizeof(int32_t));
}


void
llm_cu_planner_free(llm_cu_planner *p)
{
    free(p->row_logit);
    free(p->logits_idx);
    memset(p, 0, sizeof(*p));
}


int
llm_cu_graph_bucket(int n, int graph_max)
{
    int  i;

    for (i = 0; llm_cu_buckets[i]; i++) {
        if (llm_cu_buckets[i] >= n) {
            return llm_cu_buckets[i] <= graph_max ? llm_cu_buckets[i] : 0;
        }
    }
    return 0;
}


int
llm_cu_max_splits(int n_split_tok, int nkv, int n_chunks, int n_sm)
{
    long  base = (long) n_split_tok * nkv * n_chunks;
    long  target = 8L * (n_sm > 0 ? n_sm : 1);
    long  ms;

    if (base <= 0) {
        return 1;
    }
    ms = (target + base - 1) / base;
    return ms < 1 ? 1 : ms > LLM_CU_MAX_SPLITS ? LLM_CU_MAX_SPLITS : (int) ms;
}


size_t
llm_cu_part_cap(int cap_tok, int nh, int nkv, int n_chunks, int n_sm)
{
    size_t  best = 0, v;
    int     n;

    for (n = 1; n <= cap_tok; n++) {
        v = (size_t) n * llm_cu_max_splits(n, nkv, n_chunks, n_sm);
        if (v > best) {
            best = v;
        }
    }
    return best * (size_t) nh;
}


size_t
llm_cu_block_bytes(const llm_config *c, size_t tsize)
{
    return (size_t) c->n_layers * 2 * c->n_kv_heads * LLM_BLOCK_SIZE
           * c->head_dim * tsize;
}


int
llm_cu_kv_blocks(size_t free_bytes, size_t reserve, double utilization,
    size_t block_bytes, int min_blocks, int device, int *n_blocks, char *err)
{
    size_t  avail = free_bytes > reserve ? free_bytes - reserve : 0;
    size_t  budget, n;

    if (utilization <= 0.0) {
        utilization = 0.9;
    }
    budget = (size_t) ((double) free_bytes * (utilization < 1.0
                                              ? utilization : 1.0));
    if (budget > avail) {
        budget = avail;
    }
    n = budget / block_bytes;
    if (n < (size_t) min_blocks) {
        if ((size_t) min_blocks * block_bytes > avail) {
            llm_cu_errf(err, "cuda:%d: the KV cache needs %.0f MiB (%d blocks "
                        "of %.2f MiB: one sequence of llm_max_model_len) but "
                        "only %.0f MiB are free after the weights; lower "
                        "llm_max_model_len or use a larger GPU", device,
                        LLM_CU_MIB((size_t) min_blocks * block_bytes),
                        min_blocks, LLM_CU_MIB(block_bytes),
                        LLM_CU_MIB(avail));
            return -1;
        }
        n = (size_t) min_blocks;
    }
    /* slots are int32: block * 16 + offset, and one padding block */
    if (n > (size_t) (INT32_MAX / LLM_BLOCK_SIZE - 1)) {
        n = (size_t) (INT32_MAX / LLM_BLOCK_SIZE - 1);
    }
    if (n == 0) {
        llm_cu_errf(err, "cuda:%d: no memory left for the KV cache (%.0f MiB "
                    "free after the weights)", device, LLM_CU_MIB(avail));
        return -1;
    }
    *n_blocks = (int) n;
    return 0;
}


/* ---- checking a batch ---------------------------------------------------- */


static int
llm_cu_check_seq(const llm_cu_plan_cfg *cfg, const llm_batch *b, int s,
    char *err)
{
    const llm_batch_seq  *q = &b->seqs[s];
    int                   r, pmax = -1, j, need;

    if (q->token_start < 0 || q->n_tokens < 1
        || q->token_start + q->n_tokens > b->n_tokens)
    {
        llm_cu_errf(err, "cuda backend: sequence %d has rows [%d, %d) "
                    "outside the batch of %d", s, q->token_start,
                    q->token_start + q->n_tokens, b->n_tokens);
        return -1;
    }
    for (r = q->token_start; r < q->token_start + q->n_tokens; r++) {
        if (b->seq_of_token[r] != s) {
            llm_cu_errf(err, "cuda backend: row %d is in sequence %d's rows "
                        "but belongs to %d", r, s, b->seq_of_token[r]);
            return -1;
        }
        if (b->positions[r] < 0) {
            llm_cu_errf(err, "cuda backend: row %d has position %d", r,
                        b->positions[r]);
            return -1;
        }
        if (b->positions[r] > pmax) {
            pmax = b->positions[r];
        }
    }
    /* attention reads the table up to the last position's block */
    need = pmax / LLM_BLOCK_SIZE + 1;
    if (q->block_table == NULL || q->n_blocks < need) {
        llm_cu_errf(err, "cuda backend: sequence %d reaches position %d but "
                    "its block table has %d blocks", s, pmax, q->n_blocks);
        return -1;
    }
    for (j = 0; j < need; j++) {
        if (q->block_table[j] < 0 || q->block_table[j] >= cfg->num_blocks) {
            llm_cu_errf(err, "cuda backend: sequence %d's block %d is %d, "
                        "outside the %d KV blocks", s, j, q->block_table[j],
                        cfg->num_blocks);
            return -1;
        }
    }
    return 0;
}


int
llm_cu_plan_begin(llm_cu_planner *p, const llm_batch *b, char *err)
{
    const llm_cu_plan_cfg  *cfg = &p->cfg;
    int                     i, r, s;

    if (b->n_tokens < 0 || b->n_seqs < 0 || b->n_logits < 0
        || b->n_logits > b->n_tokens)
    {
        llm_cu_errf(err, "cuda backend: malformed batch (%d rows, %d "
                    "sequences, %d logits rows)", b->n_tokens, b->n_seqs,
                    b->n_logits);
        return -1;
    }
    if (b->n_tokens > p->cap_rows) {
        p->row_logit = llm_cu_xrealloc(p->row_logit,
                                       sizeof(int32_t) * b->n_tokens);
        p->cap_rows = b->n_tokens;
    }
    for (r = 0; r < b->n_tokens; r++) {
        p->row_logit[r] = -1;
    }
    for (i = 0; i < b->n_logits; i++) {
        r = b->logits_rows[i];
        if (r < 0 || r >= b->n_tokens || p->row_logit[r] >= 0) {
            llm_cu_errf(err, "cuda backend: logits row %d is outside the "
                        "batch or listed twice", r);
            return -1;
        }
        p->row_logit[r] = i;
    }
    for (r = 0; r < b->n_tokens; r++) {
        s = b->seq_of_token[r];
        if (s < 0 || s >= b->n_seqs || r < b->seqs[s].token_start
            || r >= b->seqs[s].token_start + b->seqs[s].n_tokens)
        {
            llm_cu_errf(err, "cuda backend: row %d names sequence %d, which "
                        "does not hold it", r, s);
            return -1;
        }
        if (b->tokens[r] < 0 || b->tokens[r] >= cfg->vocab) {
            llm_cu_errf(err, "cuda backend: token %d is outside the "
                        "vocabulary (%d)", b->tokens[r], cfg->vocab);
            return -1;
        }
        if (b->slots[r] < 0
            || b->slots[r] >= cfg->num_blocks * LLM_BLOCK_SIZE)
        {
            llm_cu_errf(err, "cuda backend: slot %d is outside the %d KV "
                        "blocks", b->slots[r], cfg->num_blocks);
            return -1;
        }
    }
    for (s = 0; s < b->n_seqs; s++) {
        if (llm_cu_check_seq(cfg, b, s, err) != 0) {
            return -1;
        }
    }
    return 0;
}


/* ---- planning a step ----------------------------------------------------- */


/* One sequence's run of rows [r, end) inside the step. */
typedef struct {
    int  s, r, end, pmax, contiguous;
} llm_cu_run;


static void
llm_cu_run_at(const llm_batch *b, int r, int step_end, llm_cu_run *u)
{
    const llm_batch_seq  *q = &b->seqs[b->seq_of_token[r]];
    int                   j;

    u->s = b->seq_of_token[r];
    u->r = r;
    u->end = q->token_start + q->n_tokens < step_end
             ? q->token_start + q->n_tokens : step_end;
    u->pmax = b->positions[r];
    u->contiguous = 1;
    for (j = r + 1; j < u->end; j++) {
        if (b->positions[j] != b->positions[r] + (j - r)) {
            u->contiguous = 0;
        }
        if (b->positions[j] > u->pmax) {
            u->pmax = b->positions[j];
        }
    }
}


static void
llm_cu_step_layout(llm_cu_step *st, int bt_total)
{
    int  n = st->n_pad;

    st->o_tokens = 0;
    st->o_pos = n;
    st->o_slot = 2 * n;
    st->o_tok_seq = 3 * n;
    st->o_seq_start = 4 * n;
    st->o_seq_nq = 5 * n;
    st->o_bt_off = 6 * n;
    st->o_split_tok = 7 * n;
    st->o_rows = 8 * n;
    st->o_items = 9 * n;
    st->o_bt = 9 * n + 2 * st->n_items;
    st->n_md = st->o_bt + bt_total;
}


int
llm_cu_plan_step(llm_cu_planner *p, const llm_batch *b, int tok0,
    llm_cu_step *st, int32_t *md, int md_cap)
{
    const llm_cu_plan_cfg  *cfg = &p->cfg;
    llm_cu_run              u;
    int                     e, nl = 0, single = 1, bt_total = 0, prefill;
    int                     r, i, k, ns, it, bt, nbt, bucket = 0;

    memset(st, 0, sizeof(*st));
    for (e = tok0; e < b->n_tokens && e - tok0 < cfg->cap_tok; e++) {
        if (p->row_logit[e] >= 0) {
            if (nl == cfg->cap_logits) {
                break;
            }
            nl++;
        }
    }
    st->tok0 = tok0;
    st->n_tok = e - tok0;
    st->n_logits = nl;

    /* decode step?  then every row goes to the split kernel */
    for (r = tok0; r < e; r = u.end) {
        llm_cu_run_at(b, r, e, &u);
        single &= u.end - u.r == 1;
    }
    if (single && nl == st->n_tok && cfg->graph_max > 0
        && cfg->pad_block >= 0)
    {
        bucket = llm_cu_graph_bucket(st->n_tok, cfg->graph_max);
        if (bucket > cfg->cap_tok || bucket > cfg->cap_logits) {
            bucket = 0;
        }
    }
    st->graph = bucket > 0;
    st->n_pad = bucket > 0 ? bucket : st->n_tok;
    st->n_logits_pad = bucket > 0 ? bucket : nl;

    for (r = tok0; r < e; r = u.end) {
        llm_cu_run_at(b, r, e, &u);
        prefill = !st->graph && u.contiguous
                  && u.end - u.r >= cfg->prefill_min_q;
        if (prefill) {
            st->n_items += (u.end - u.r + LLM_CU_PREFILL_BQ - 1)
                           / LLM_CU_PREFILL_BQ;
        } else {
            st->n_split += u.end - u.r;
        }
        bt_total += u.pmax / LLM_BLOCK_SIZE + 1;
        st->n_seq++;
    }
    if (st->n_pad > st->n_tok) {
        st->n_seq++;
        st->n_split += st->n_pad - st->n_tok;
        bt_total += 1;
    }
    st->max_splits = llm_cu_max_splits(st->n_split, cfg->nkv, cfg->n_chunks,
                                       cfg->n_sm);
    llm_cu_step_layout(st, bt_total);
    if (st->n_md > md_cap) {
        return 1;
    }

    /* pack */
    k = ns = it = bt = 0;
    for (r = tok0; r < e; r = u.end) {
        llm_cu_run_at(b, r, e, &u);
        prefill = !st->graph && u.contiguous
                  && u.end - u.r >= cfg->prefill_min_q;
        nbt = u.pmax / LLM_BLOCK_SIZE + 1;
        md[st->o_seq_start + k] = u.r - tok0;
        md[st->o_seq_nq + k] = u.end - u.r;
        md[st->o_bt_off + k] = bt;
        memcpy(md + st->o_bt + bt, b->seqs[u.s].block_table,
               sizeof(int32_t) * nbt);
        bt += nbt;
        for (i = u.r - tok0; i < u.end - tok0; i++) {
            md[st->o_tokens + i] = b->tokens[tok0 + i];
            md[st->o_pos + i] = b->positions[tok0 + i];
            md[st->o_slot + i] = b->slots[tok0 + i];
            md[st->o_tok_seq + i] = k;
            if (!prefill) {
                md[st->o_split_tok + ns++] = i;
            }
        }
        if (prefill) {
            for (i = 0; i < u.end - u.r; i += LLM_CU_PREFILL_BQ) {
                md[st->o_items + 2 * it] = k;
                md[st->o_items + 2 * it + 1] = i;
                it++;
            }
        }
        k++;
    }
    if (st->n_pad > st->n_tok) {
        md[st->o_seq_start + k] = st->n_tok;
        md[st->o_seq_nq + k] = st->n_pad - st->n_tok;
        md[st->o_bt_off + k] = bt;
        md[st->o_bt + bt++] = cfg->pad_block;
        for (i = st->n_tok; i < st->n_pad; i++) {
            md[st->o_tokens + i] = 0;
            md[st->o_pos + i] = 0;
            md[st->o_slot + i] = cfg->pad_block * LLM_BLOCK_SIZE;
            md[st->o_tok_seq + i] = k;
            md[st->o_split_tok + ns++] = i;
        }
    }

    /* logits rows, in row order; p->logits_idx says where each goes */
    k = 0;
    for (i = 0; i < st->n_tok; i++) {
        if (p->row_logit[tok0 + i] >= 0) {
            if (!st->graph) {
                md[st->o_rows + k] = i;
            }
            p->logits_idx[k++] = p->row_logit[tok0 + i];
        }
    }
    if (st->graph) {
        for (i = 0; i < st->n_pad; i++) {
            md[st->o_rows + i] = i;
        }
    }
    return 0;
}


void
llm_cu_md_bind(llm_cu_md *md, const llm_cu_step *st, const int32_t *base)
{
    md->tokens = base + st->o_tokens;
    md->pos = base + st->o_pos;
    md->slot = base + st->o_slot;
    md->tok_seq = base + st->o_tok_seq;
    md->seq_start = base + st->o_seq_start;
    md->seq_nq = base + st->o_seq_nq;
    md->bt_off = base + st->o_bt_off;
    md->split_tok = base + st->o_split_tok;
    md->rows = base + st->o_rows;
    md->items = base + st->o_items;
    md->bt = base + st->o_bt;
}
