/*
 * test_tokenizer_hf.c -- the C tokenizer against Hugging Face's Rust
 * tokenizers (npm tokenizers@0.23.2), on the real Llama 3.1, Qwen3,
 * Mistral 7B, Llama 3, Gemma 3 and DeepSeek V3 tokenizer.json files and on
 * variants of them that use the features those files do not
 * (t/tokenizer/reference.js writes them and the golden ids and texts).
 *
 * For every model and every corpus text: ids with and without special
 * tokens, decode with and without skip_special, streaming detokenization
 * fed token by token (each piece valid UTF-8, the pieces adding up to the
 * full decode), and the same encodings from four threads at once.  Load
 * and encode times are printed as diagnostics.
 */
#define _GNU_SOURCE
#include <ftw.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <yajl/yajl_tree.h>

#include "tap.h"
#include "tokenizer/tokenizer.h"
#include "util/util.h"


typedef struct {
    char    *p;
    size_t   len;
} bytes_t;

static bytes_t  *texts;
static size_t    n_texts;


static double
now_s(void)
{
    struct timespec  ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double) ts.tv_sec + ts.tv_nsec / 1e9;
}


/* CPU time of this thread: stable when the machine is shared. */
static double
cpu_s(void)
{
    struct timespec  ts;

    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double) ts.tv_sec + ts.tv_nsec / 1e9;
}


static bytes_t
unhex(const char *h)
{
    bytes_t  b;
    size_t   i, n = strlen(h) / 2;
    unsigned int  x;

    b.p = llm_xmalloc(n + 1);
    for (i = 0; i < n; i++) {
        sscanf(h + 2 * i, "%2x", &x);
        b.p[i] = (char) x;
    }
    b.p[n] = '\0';
    b.len = n;
    return b;
}


/* Strict UTF-8 check, written here independently of the tokenizer's. */
static int
llm_utf8_ok(const char *str, size_t n)
{
    const unsigned char  *s = (const unsigned char *) str;
    size_t                i = 0, k, j;
    uint32_t              cp;

    while (i < n) {
        if (s[i] < 0x80) {
            i++;
            continue;
        }
        if ((s[i] & 0xE0) == 0xC0) {
            k = 2;
            cp = s[i] & 0x1F;
        } else if ((s[i] & 0xF0) == 0xE0) {
            k = 3;
            cp = s[i] & 0x0F;
        } else if ((s[i] & 0xF8) == 0xF0) {
            k = 4;
            cp = s[i] & 0x07;
        } else {
            return 0;
        }
        if (i + k > n) {
            return 0;
        }
        for (j = 1; j < k; j++) {
            if ((s[i + j] & 0xC0) != 0x80) {
                return 0;
            }
            cp = (cp << 6) | (s[i + j] & 0x3F);
        }
        if ((k == 2 && cp < 0x80) || (k == 3 && cp < 0x800)
            || (k == 4 && cp < 0x10000) || cp > 0x10FFFF
            || (cp >= 0xD800 && cp <= 0xDFFF))
        {
            return 0;
        }
        i += k;
    }
    return 1;
}


static yajl_val
get(yajl_val o, const char *k)
{
    const char  *path[] = { k, NULL };

    return yajl_tree_get(o, path, yajl_t_any);
}


static int
ids_equal(const int32_t *ids, int n, yajl_val arr)
{
    size_t  i;

    if (!YAJL_IS_ARRAY(arr) || (size_t) n != arr->u.array.len) {
        return 0;
    }
    for (i = 0; i < (size_t) n; i++) {
        if (ids[i] != YAJL_GET_INTEGER(arr->u.array.values[i])) {
            return 0;
        }
    }
    return 1;
}


static int32_t *
to_ids(yajl_val arr, size_t *n)
{
    int32_t  *ids = llm_xmalloc((arr->u.array.len + 1) * sizeof(int32_t));
    size_t    i;

    for (i = 0; i < arr->u.array.len; i++) {
        ids[i] = (int32_t) YAJL_GET_INTEGER(arr->u.array.values[i]);
    }
    *n = arr->u.array.len;
    return ids;
}


static void
show_text(const char *what, const char *s, size_t n)
{
    size_t  i;

    printf("#   %s (%zu bytes): ", what, n);
    for (i = 0; i < n && i < 120; i++) {
        unsigned char  c = (unsigned char) s[i];

        if (c >= 0x20 && c < 0x7f) {
            putchar(c);
        } else {
            printf("\\x%02x", c);
        }
    }
    printf("%s\n", n > 120 ? "..." : "");
}


static void
show_ids(const char *what, const int32_t *ids, int n)
{
    int  i;

    printf("#   %s:", what);
    for (i = 0; i < n && i < 40; i++) {
        printf(" %d", ids[i]);
    }
    printf("%s\n", n > 40 ? " ..." : "");
}


/* The token texts constrained decoding works with add up to the decoded
 * text (HF's decode is checked above): for every corpus text whose decode
 * has no U+FFFD, the texts of its ids concatenated, but for the spaces a
 * Strip decoder takes off the front of a text. */
static void
check_token_texts(const llm_tokenizer *t, const char *name)
{
    llm_token_texts  tt;
    size_t           i, len, cat_len, bad = 0, checked = 0;
    int              n, k, text;
    int32_t         *ids;
    char            *dec, *cat, err[LLM_ERR_LEN];

    llm_tokenizer_token_texts(t, &tt);
    for (i = 0; i < n_texts; i++) {
        n = llm_tokenizer_encode(t, texts[i].p, texts[i].len, 0, &ids, err);
        dec = llm_tokenizer_decode(t, ids, n > 0 ? (size_t) n : 0, 0, &len);
        cat = llm_xmalloc(1);
        cat_len = 0;
        for (k = 0, text = 1; k < n; k++) {
            if (tt.len[ids[k]] < 0) {
                text = 0;
                break;
            }
            cat = llm_xrealloc(cat, cat_len + (size_t) tt.len[ids[k]] + 1);
            memcpy(cat + cat_len, tt.bytes + tt.off[ids[k]], (size_t) tt.len[ids[k]]);
            cat_len += (size_t) tt.len[ids[k]];
        }
        if (text && memmem(dec, len, "\xEF\xBF\xBD", 3) == NULL) {
            size_t  skip = 0;

            while (cat_len - skip > len && cat[skip] == ' ') {
                skip++;
            }

            checked++;
            if (cat_len - skip != len || memcmp(cat + skip, dec, len) != 0) {
                if (bad++ < 3) {
                    printf("# %s: text %zu: token texts differ from decode\n", name, i);
                    show_text("cat", cat, cat_len);
                    show_text("dec", dec, len);
                }
            }
        }
        free(cat);
        free(dec);
        free(ids);
    }
    llm_token_texts_free(&tt);
    tap_ok(bad == 0 && checked > 0, "%s: token texts add up to decode for "
           "%zu/%zu texts", name, checked - bad, checked);
}


static void
check_encode(const llm_tokenizer *t, const char *name, yajl_val cases)
{
    size_t    i, bad[4] = { 0 }, shown = 0;
    int       n, special, ok;
    int32_t  *ids;
    char     *dec, err[LLM_ERR_LEN];
    size_t    len;
    bytes_t   want;
    yajl_val  c;

    for (i = 0; i < cases->u.array.len; i++) {
        c = cases->u.array.values[i];
        for (special = 0; special < 2; special++) {
            n = llm_tokenizer_encode(t, texts[i].p, texts[i].len, special,
                                     &ids, err);
            ok = n >= 0 && ids_equal(ids, n, c->u.array.values[special]);
            if (!ok) {
                bad[special]++;
                if (shown++ < 3) {
                    printf("# %s: text %zu, special=%d differs\n", name, i,
                           special);
                    show_text("text", texts[i].p, texts[i].len);
                    show_ids("ours", ids, n);
                    size_t  m;
                    int32_t  *w = to_ids(c->u.array.values[special], &m);
                    show_ids("HF  ", w, (int) m);
                    free(w);
                }
            }
            free(ids);
        }
        /* decode the special-token encoding both ways */
        {
            size_t    m;
            int32_t  *w = to_ids(c->u.array.values[1], &m);
            int       skip;

            for (skip = 0; skip < 2; skip++) {
                dec = llm_tokenizer_decode(t, w, m, skip, &len);
                want = unhex(c->u.array.values[2 + skip]->u.string);
                if (len != want.len || memcmp(dec, want.p, len) != 0) {
                    bad[2 + skip]++;
                    if (shown++ < 3) {
                        printf("# %s: decode of text %zu, skip=%d differs\n",
                               name, i, skip);
                        show_text("ours", dec, len);
                        show_text("HF  ", want.p, want.len);
                    }
                }
                free(want.p);
                free(dec);
            }
            free(w);
        }
    }
    n = (int) cases->u.array.len;
    tap_ok(bad[0] == 0, "%s: encode = HF for %zu/%d texts", name,
           n - bad[0], n);
    tap_ok(bad[1] == 0, "%s: encode with special tokens = HF for %zu/%d "
           "texts", name, n - bad[1], n);
    tap_ok(bad[2] == 0, "%s: decode = HF for %zu/%d", name, n - bad[2], n);
    tap_ok(bad[3] == 0, "%s: decode skip_special = HF for %zu/%d", name,
           n - bad[3], n);
}


static void
check_streams(const llm_tokenizer *t, const char *name, yajl_val streams)
{
    size_t       i, j, np, ng, len, bad = 0, badutf = 0, exact = 0;
    int32_t     *prompt, *gen;
    llm_detok   *d;
    const char  *piece;
    char        *acc;
    size_t       acc_len;
    bytes_t      full, ptext;
    yajl_val     s;

    for (i = 0; i < streams->u.array.len; i++) {
        s = streams->u.array.values[i];
        prompt = to_ids(get(s, "prompt"), &np);
        gen = to_ids(get(s, "gen"), &ng);
        full = unhex(get(s, "full")->u.string);
        ptext = unhex(get(s, "prompt_text")->u.string);
        d = llm_detok_create(t, prompt, np,
                             (int) YAJL_GET_INTEGER(get(s, "skip")));
        acc = llm_xmalloc(1);
        acc_len = 0;
        for (j = 0; j <= ng; j++) {
            piece = j < ng ? llm_detok_push(d, gen[j], &len)
                           : llm_detok_flush(d, &len);
            if (!llm_utf8_ok(piece, len)) {
                badutf++;
            }
            acc = llm_xrealloc(acc, acc_len + len + 1);
            memcpy(acc + acc_len, piece, len);
            acc_len += len;
        }
        llm_detok_free(d);
        /* the expectation exists when decode(prompt) is a prefix of
         * decode(prompt + gen) (a prompt ending inside a character is not) */
        if (ptext.len <= full.len
            && memcmp(ptext.p, full.p, ptext.len) == 0)
        {
            exact++;
            if (acc_len != full.len - ptext.len
                || memcmp(acc, full.p + ptext.len, acc_len) != 0)
            {
                if (bad++ < 3) {
                    printf("# %s: stream %zu (skip=%d) differs\n", name, i,
                           (int) YAJL_GET_INTEGER(get(s, "skip")));
                    show_ids("prompt", prompt, (int) np);
                    show_ids("gen", gen, (int) ng);
                    show_text("ours", acc, acc_len);
                    show_text("HF  ", full.p + ptext.len,
                              full.len - ptext.len);
                }
            }
        }
        free(acc);
        free(full.p);
        free(ptext.p);
        free(prompt);
        free(gen);
    }
    tap_ok(badutf == 0, "%s: streaming emits valid UTF-8 at every step "
           "(%zu streams)", name, streams->u.array.len);
    tap_ok(bad == 0, "%s: streamed text = HF decode for %zu/%zu streams",
           name, exact - bad, exact);
}


/* ---- several threads on one tokenizer ---- */

typedef struct {
    const llm_tokenizer  *t;
    yajl_val              cases;
    int                   bad;
} thread_arg;


static void *
thread_main(void *p)
{
    thread_arg  *a = p;
    size_t       i;
    int          n;
    int32_t     *ids;
    char         err[LLM_ERR_LEN];

    for (i = 0; i < a->cases->u.array.len; i++) {
        n = llm_tokenizer_encode(a->t, texts[i].p, texts[i].len, 1, &ids,
                                 err);
        if (n < 0 || !ids_equal(ids, n,
                                a->cases->u.array.values[i]->u.array.values[1]))
        {
            a->bad++;
        }
        free(ids);
    }
    return NULL;
}


static void
check_threads(const llm_tokenizer *t, const char *name, yajl_val cases)
{
    pthread_t   th[4];
    thread_arg  a[4];
    int         i, bad = 0;

    for (i = 0; i < 4; i++) {
        a[i].t = t;
        a[i].cases = cases;
        a[i].bad = 0;
        pthread_create(&th[i], NULL, thread_main, &a[i]);
    }
    for (i = 0; i < 4; i++) {
        pthread_join(th[i], NULL);
        bad += a[i].bad;
    }
    tap_ok(bad == 0, "%s: 4 threads encoding at once agree with HF", name);
}


static void
bench_encode(const llm_tokenizer *t, const char *name)
{
    char      *big, err[LLM_ERR_LEN];
    size_t     len = 0, cap = 1 << 21, i;
    int32_t   *ids;
    int        n;
    double     t0, dt, c0, dc;

    /* the valid-UTF-8 part of the corpus, repeated to ~1 MB */
    big = llm_xmalloc(cap + 65536);
    while (len < cap) {
        for (i = 0; i < n_texts && len < cap; i++) {
            if (llm_utf8_ok(texts[i].p, texts[i].len)
                && texts[i].len < 4096)
            {
                memcpy(big + len, texts[i].p, texts[i].len);
                len += texts[i].len;
                big[len++] = '\n';
            }
        }
    }
    t0 = now_s();
    c0 = cpu_s();
    n = llm_tokenizer_encode(t, big, len, 0, &ids, err);
    dc = cpu_s() - c0;
    dt = now_s() - t0;
    tap_diag("%s: encode %.1f MB -> %d tokens in %.3f s wall, %.3f s CPU "
             "(%.1f MB/s, %.0f k tokens/s of CPU)", name, len / 1e6, n, dt,
             dc, len / 1e6 / dc, n / dc / 1e3);
    free(ids);
    free(big);
}


static int
rm_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
    return remove(path);
}


int
main(void)
{
    const char  *root = getenv("LLM_ROOT"), *keep = getenv("LLM_TOK_GOLDEN");
    char         tmp[1024] = "/tmp/llm_tok_hf_XXXXXX", cmd[4096], path[4200];
    char         err[LLM_ERR_LEN], *json;
    size_t       i, len;
    yajl_val     golden, models, m, arr;
    llm_tokenizer  *t;
    double       t0, dt, c0, dc;
    const char  *name;

    if (root == NULL) {
        root = ".";
    }
    if (keep != NULL) {
        /* LLM_TOK_GOLDEN=DIR: reuse reference data written before */
        snprintf(tmp, sizeof(tmp), "%s", keep);
    } else {
        if (mkdtemp(tmp) == NULL) {
            perror("mkdtemp");
            return 1;
        }
        snprintf(cmd, sizeof(cmd), "NODE_PATH=\"${NODE_PATH:-%s/node_modules}\" "
                 "node %s/t/tokenizer/reference.js %s", root, root, tmp);
        t0 = now_s();
        tap_ok(system(cmd) == 0, "reference data from HF tokenizers "
               "(node t/tokenizer/reference.js)");
        tap_diag("HF reference data in %.1f s", now_s() - t0);
    }

    snprintf(path, sizeof(path), "%s/golden.json", tmp);
    json = llm_read_file(path, &len, err);
    golden = json ? yajl_tree_parse(json, NULL, 0) : NULL;
    free(json);
    if (golden == NULL) {
        tap_ok(0, "golden.json readable: %s", err);
        if (keep == NULL) {
            nftw(tmp, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
        }
        return tap_done();
    }

    arr = get(golden, "texts");
    n_texts = arr->u.array.len;
    texts = llm_xcalloc(n_texts, sizeof(*texts));
    for (i = 0; i < n_texts; i++) {
        texts[i] = unhex(arr->u.array.values[i]->u.string);
    }

    models = get(golden, "models");
    for (i = 0; i < models->u.array.len; i++) {
        m = models->u.array.values[i];
        name = get(m, "name")->u.string;
        t0 = now_s();
        c0 = cpu_s();
        t = llm_tokenizer_load(get(m, "dir")->u.string, err);
        dc = cpu_s() - c0;
        dt = now_s() - t0;
        tap_ok(t != NULL, "%s: loads%s%s", name, t ? "" : ": ", t ? "" : err);
        if (t == NULL) {
            continue;
        }
        tap_diag("%s: load %.3f s wall, %.3f s CPU", name, dt, dc);
        tap_ok(llm_tokenizer_vocab_size(t)
               == (int) YAJL_GET_INTEGER(get(m, "vocab_size")),
               "%s: vocab size %d = HF's", name, llm_tokenizer_vocab_size(t));
        check_encode(t, name, get(m, "cases"));
        check_token_texts(t, name);
        if (get(m, "streams")->u.array.len > 0) {
            check_streams(t, name, get(m, "streams"));
        }
        if (i < 3) {
            /* the three real tokenizers */
            check_threads(t, name, get(m, "cases"));
            bench_encode(t, name);
        }
        llm_tokenizer_free(t);
    }

    for (i = 0; i < n_texts; i++) {
        free(texts[i].p);
    }
    free(texts);
    yajl_tree_free(golden);
    if (keep == NULL) {
        nftw(tmp, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
    }
    return tap_done();
}
