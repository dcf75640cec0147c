/*
 * fuzz_tokenizer.c -- libFuzzer target for the tokenizer: any bytes, as text
 * to encode or as token ids to decode, on the real tokenizers named in
 * LLM_FUZZ_TOKENIZERS (directories separated by ':').
 *
 * Input: byte 0 picks the tokenizer, byte 1 the mode, the rest is the data.
 *   mode bit 0   add_special_tokens for encode
 *   mode bit 1   skip_special_tokens for decode and the stream
 *   mode bit 2   the data are token ids (3 bytes each, modulo the vocabulary)
 *                instead of text
 *   mode bits 3+ where the ids are cut into a prompt and a generation
 *
 * Properties checked (abort() makes a finding, like a sanitizer report):
 *   - every id encode returns is inside the vocabulary;
 *   - JSON mode's token texts add up to the decode (whole text only);
 *   - the streaming detokenizer fed the generation id by id returns only
 *     valid UTF-8, and its pieces add up to decode(prompt + generation)
 *     after decode(prompt), whenever the latter is a prefix of the former
 *     and the text has no U+FFFD (the contract in tokenizer.h, which lets
 *     a long run of invalid bytes be shown before it ends).
 *
 * Built and run by t/fuzz.sh (`make fuzz-tokenizer`, and for a bounded
 * number of inputs by t/tokenizer.t); see docs/tokenizer.md.
 */
#define _GNU_SOURCE                     /* memmem */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tokenizer/tokenizer.h"
#include "tokenizer/tokenizer_impl.h"
#include "util/util.h"


static llm_tokenizer    *toks[16];
static llm_token_texts   texts[16];
static int               n_toks;


int
LLVMFuzzerInitialize(int *argc, char ***argv)
{
    const char  *list = getenv("LLM_FUZZ_TOKENIZERS");
    char        *copy, *dir, *save = NULL, err[LLM_ERR_LEN];

    if (list == NULL || *list == '\0') {
        fprintf(stderr, "fuzz_tokenizer: set LLM_FUZZ_TOKENIZERS\n");
        exit(2);
    }
    copy = strdup(list);
    for (dir = strtok_r(copy, ":", &save); dir && n_toks < 16;
         dir = strtok_r(NULL, ":", &save))
    {
        toks[n_toks] = llm_tokenizer_load(dir, err);
        if (toks[n_toks] == NULL) {
            fprintf(stderr, "fuzz_tokenizer: %s\n", err);
            exit(2);
        }
        llm_tokenizer_token_texts(toks[n_toks], &texts[n_toks]);
        n_toks++;
    }
    free(copy);
    return 0;
}


static void
show(const char *what, const char *s, size_t len, const int32_t *ids, size_t n)
{
    size_t  i;

    fprintf(stderr, "%s:", what);
    for (i = 0; i < len; i++) {
        fprintf(stderr, (unsigned char) s[i] < 0x20 || (unsigned char) s[i] >= 0x7f
                        || s[i] == '\\' ? "\\x%02x" : "%c", (unsigned char) s[i]);
    }
    for (i = 0; i < n; i++) {
        fprintf(stderr, " %d", ids[i]);
    }
    fprintf(stderr, "\n");
}


static void
check_stream(const llm_tokenizer *t, const int32_t *ids, size_t n, size_t cut,
    int skip)
{
    llm_detok   *d = llm_detok_create(t, ids, cut, skip);
    const char  *piece;
    char        *acc = NULL, *full, *ptext;
    size_t       i, len, acc_len = 0, full_len, ptext_len;

    for (i = cut; i <= n; i++) {
        piece = i < n ? llm_detok_push(d, ids[i], &len) : llm_detok_flush(d, &len);
        if (!llm_utf8_valid(piece, len)) {
            fprintf(stderr, "detok piece at id %zu is not valid UTF-8\n", i);
            abort();
        }
        acc = realloc(acc, acc_len + len + 1);
        memcpy(acc + acc_len, piece, len);
        acc_len += len;
    }
    llm_detok_free(d);

    full = llm_tokenizer_decode(t, ids, n, skip, &full_len);
    ptext = llm_tokenizer_decode(t, ids, cut, skip, &ptext_len);
    if (ptext_len <= full_len && memcmp(ptext, full, ptext_len) == 0
        && memmem(full, full_len, "\xEF\xBF\xBD", 3) == NULL
        && (acc_len != full_len - ptext_len
            || memcmp(acc, full + ptext_len, acc_len) != 0))
    {
        fprintf(stderr, "stream of %zu ids after %zu differs from decode\n",
                n - cut, cut);
        show("ids", NULL, 0, ids, n);
        show("stream", acc, acc_len, NULL, 0);
        show("decode", full + ptext_len, full_len - ptext_len, NULL, 0);
        abort();
    }
    free(full);
    free(ptext);
    free(acc);
}


/* JSON mode's token texts add up to the decode, but for the spaces a Strip
 * decoder takes off the front (when the decode is whole text: no U+FFFD, no
 * special token). */
static void
check_texts(const llm_tokenizer *t, const llm_token_texts *tt,
    const int32_t *ids, size_t n)
{
    char    *cat, *dec;
    size_t   i, len, cat_len = 0, skip = 0;

    for (i = 0; i < n; i++) {
        if (tt->len[ids[i]] < 0) {
            return;
        }
    }
    dec = llm_tokenizer_decode(t, ids, n, 0, &len);
    if (memmem(dec, len, "\xEF\xBF\xBD", 3) != NULL) {
        free(dec);
        return;
    }
    cat = malloc(1);
    for (i = 0; i < n; i++) {
        cat = realloc(cat, cat_len + (size_t) tt->len[ids[i]] + 1);
        memcpy(cat + cat_len, tt->bytes + tt->off[ids[i]], (size_t) tt->len[ids[i]]);
        cat_len += (size_t) tt->len[ids[i]];
    }
    while (cat_len - skip > len && cat[skip] == ' ') {
        skip++;
    }
    if (cat_len - skip != len || memcmp(cat + skip, dec, len) != 0) {
        fprintf(stderr, "token texts differ from the decode\n");
        show("ids", NULL, 0, ids, n);
        show("texts", cat, cat_len, NULL, 0);
        show("decode", dec, len, NULL, 0);
        abort();
    }
    free(cat);
    free(dec);
}


int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const llm_tokenizer  *t;
    const llm_token_texts  *tt;
    int32_t              *ids;
    size_t                i, n, cut;
    int                   mode, vocab;
    char                  err[LLM_ERR_LEN];

    if (size < 2) {
        return 0;
    }
    tt = &texts[data[0] % n_toks];
    t = toks[data[0] % n_toks];
    mode = data[1];
    data += 2;
    size -= 2;
    vocab = llm_tokenizer_vocab_size(t);

    if (mode & 4) {
        n = size / 3;
        ids = malloc((n ? n : 1) * sizeof(*ids));
        for (i = 0; i < n; i++) {
            ids[i] = (int32_t) (((uint32_t) data[3 * i] << 16 | data[3 * i + 1] << 8
                                 | data[3 * i + 2]) % (uint32_t) vocab);
        }
    } else {
        int  k = llm_tokenizer_encode(t, (const char *) data, size, mode & 1, &ids, err);

        if (k < 0) {
            fprintf(stderr, "encode failed: %s\n", err);
            abort();
        }
        n = (size_t) k;
        for (i = 0; i < n; i++) {
            if (ids[i] < 0 || ids[i] >= vocab) {
                fprintf(stderr, "encode returned id %d outside [0, %d)\n", ids[i], vocab);
                abort();
            }
        }
    }
    cut = (size_t) (mode >> 3) % (n + 1);
    check_stream(t, ids, n, cut, (mode >> 1) & 1);
    check_texts(t, tt, ids, n);
    free(ids);
    return 0;
}
