/*
 * test_tokenizer.c -- the tokenizer on small hand-written tokenizer.json
 * files whose results can be worked out by hand (merge priority, byte
 * fallback, unk fusion, added-token flags, the Llama BOS/EOS rule, the
 * decoder chain, streaming hold-back), the UTF-8 repair rule against the
 * Unicode standard's own example, and the error messages of bad files.
 * Needs nothing but the library (the comparison with Hugging Face itself is
 * test_tokenizer_hf.c).
 */
#define _GNU_SOURCE             /* nftw */
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tap.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/tokenizer_impl.h"
#include "util/util.h"


static char  dir[] = "/tmp/llm_tok_unit_XXXXXX";


static void
write_file(const char *name, const char *text)
{
    char   path[4200];
    FILE  *f;

    snprintf(path, sizeof(path), "%s/%s", dir, name);
    f = fopen(path, "wb");
    fputs(text, f);
    fclose(f);
}


static void
remove_file(const char *name)
{
    char  path[4200];

    snprintf(path, sizeof(path), "%s/%s", dir, name);
    unlink(path);
}


/*
 * A SentencePiece-style tokenizer: normalizer Prepend + Replace, byte
 * fallback, <unk>, a BOS template and the Mistral decoder chain.  The
 * vocabulary: <unk> <s> </s>, the 256 byte tokens (ids 3..258), then
 *   259 "▁"  260 "a"  261 "b"  262 "c"  263 "ab"  264 "bc"  265 "abc"
 *   266 "▁a" 267 "▁abc" 268 "x"
 * merges by rank: "b c", "a b", "a bc", "▁ a", "▁a bc".
 */
static char *
tiny_json(int byte_fallback, int fuse_unk, const char *extra_added,
    const char *pretok)
{
    llm_tok_buf  b = { 0 };
    char         tmp[64];
    int          i;

#define ADD(s) llm_tok_buf_put(&b, s, strlen(s))
    ADD("{\"version\":\"1.0\",\"added_tokens\":[");
    ADD("{\"id\":0,\"content\":\"<unk>\",\"single_word\":false,\"lstrip\":false,"
        "\"rstrip\":false,\"normalized\":false,\"special\":true},"
        "{\"id\":1,\"content\":\"<s>\",\"single_word\":false,\"lstrip\":false,"
        "\"rstrip\":false,\"normalized\":false,\"special\":true},"
        "{\"id\":2,\"content\":\"</s>\",\"single_word\":false,\"lstrip\":false,"
        "\"rstrip\":false,\"normalized\":false,\"special\":true}");
    ADD(extra_added);
    ADD("],\"normalizer\":{\"type\":\"Sequence\",\"normalizers\":["
        "{\"type\":\"Prepend\",\"prepend\":\"\xe2\x96\x81\"},"
        "{\"type\":\"Replace\",\"pattern\":{\"String\":\" \"},"
        "\"content\":\"\xe2\x96\x81\"}]},"
        "\"pre_tokenizer\":");
    ADD(pretok);
    ADD(",\"post_processor\":{\"type\":\"TemplateProcessing\",\"single\":["
        "{\"SpecialToken\":{\"id\":\"<s>\",\"type_id\":0}},"
        "{\"Sequence\":{\"id\":\"A\",\"type_id\":0}}],\"pair\":[],"
        "\"special_tokens\":{\"<s>\":{\"id\":\"<s>\",\"ids\":[1],"
        "\"tokens\":[\"<s>\"]}}},"
        "\"decoder\":{\"type\":\"Sequence\",\"decoders\":["
        "{\"type\":\"Replace\",\"pattern\":{\"String\":\"\xe2\x96\x81\"},"
        "\"content\":\" \"},{\"type\":\"ByteFallback\"},{\"type\":\"Fuse\"},"
        "{\"type\":\"Strip\",\"content\":\" \",\"start\":1,\"stop\":0}]},"
        "\"model\":{\"type\":\"BPE\",\"dropout\":null,\"unk_token\":\"<unk>\","
        "\"continuing_subword_prefix\":null,\"end_of_word_suffix\":null,");
    snprintf(tmp, sizeof(tmp), "\"fuse_unk\":%s,\"byte_fallback\":%s,",
             fuse_unk ? "true" : "false", byte_fallback ? "true" : "false");
    ADD(tmp);
    ADD("\"vocab\":{\"<unk>\":0,\"<s>\":1,\"</s>\":2");
    for (i = 0; i < 256; i++) {
        snprintf(tmp, sizeof(tmp), ",\"<0x%02X>\":%d", i, 3 + i);
        ADD(tmp);
    }
    ADD(",\"\xe2\x96\x81\":259,\"a\":260,\"b\":261,\"c\":262,\"ab\":263,"
        "\"bc\":264,\"abc\":265,\"\xe2\x96\x81" "a\":266,"
        "\"\xe2\x96\x81" "abc\":267,\"x\":268},"
        "\"merges\":[\"b c\",\"a b\",\"a bc\",\"\xe2\x96\x81 a\","
        "\"\xe2\x96\x81" "a bc\"]}}");
#undef ADD
    return b.p;
}


static llm_tokenizer *
load_tiny_pretok(int byte_fallback, int fuse_unk, const char *extra,
    const char *cfg, const char *pretok)
{
    char           *json = tiny_json(byte_fallback, fuse_unk, extra, pretok);
    char            err[LLM_ERR_LEN];
    llm_tokenizer  *t;

    write_file("tokenizer.json", json);
    free(json);
    if (cfg) {
        write_file("tokenizer_config.json", cfg);
    } else {
        remove_file("tokenizer_config.json");
    }
    t = llm_tokenizer_load(dir, err);
    if (t == NULL) {
        tap_diag("load failed: %s", err);
    }
    return t;
}


static llm_tokenizer *
load_tiny(int byte_fallback, int fuse_unk, const char *extra, const char *cfg)
{
    return load_tiny_pretok(byte_fallback, fuse_unk, extra, cfg, "null");
}


/* Encodes and compares with the expected ids (-1 terminated). */
static void
expect_ids(const llm_tokenizer *t, const char *text, size_t len, int special,
    const int32_t *want, const char *what)
{
    int32_t  *ids;
    char      err[LLM_ERR_LEN];
    int       n, i, ok;

    n = llm_tokenizer_encode(t, text, len, special, &ids, err);
    ok = n >= 0;
    for (i = 0; ok && want[i] >= 0; i++) {
        ok = i < n && ids[i] == want[i];
    }
    ok = ok && i == n;
    tap_ok(ok, "%s", what);
    if (!ok) {
        printf("#   got:");
        for (i = 0; i < n; i++) {
            printf(" %d", ids[i]);
        }
        printf("\n");
    }
    free(ids);
}


static void
expect_decode(const llm_tokenizer *t, const int32_t *ids, size_t n, int skip,
    const char *want, const char *what)
{
    size_t  len;
    char   *s = llm_tokenizer_decode(t, ids, n, skip, &len);

    tap_ok(len == strlen(want) && memcmp(s, want, len) == 0, "%s", what);
    if (len != strlen(want) || memcmp(s, want, len) != 0) {
        tap_diag("  got \"%s\", want \"%s\"", s, want);
    }
    free(s);
}


static void
test_utf8(void)
{
    /* Unicode 15.0, section 3.9, table 3-8: U+FFFD for each maximal
     * subpart of an ill-formed sequence */
    static const char  in[] = "\x61\xF1\x80\x80\xE1\x80\xC2\x62\x80\x63\x80"
                              "\xBF\x64";
    static const char  want[] = "a\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD" "b"
                                "\xEF\xBF\xBD" "c\xEF\xBF\xBD\xEF\xBF\xBD" "d";
    llm_tok_buf        out = { 0 };

    llm_utf8_sanitize(in, sizeof(in) - 1, &out);
    tap_ok(out.len == sizeof(want) - 1 && memcmp(out.p, want, out.len) == 0,
           "invalid UTF-8: one U+FFFD per maximal subpart (Unicode table 3-8)");
    out.len = 0;
    llm_utf8_sanitize("\xED\xA0\x80\xF4\x90\x80\x80", 7, &out);
    tap_ok(out.len == 7 * 3, "surrogates and code points above U+10FFFF: "
           "U+FFFD per byte");
    out.len = 0;
    llm_utf8_sanitize("h\xC3\xA9\xF0\x9F\xA6\x99", 8, &out);
    tap_ok(out.len == 8 && memcmp(out.p, "h\xC3\xA9\xF0\x9F\xA6\x99", 8) == 0,
           "valid UTF-8 passes unchanged");
    llm_tok_buf_free(&out);
}


static void
test_encode(void)
{
    llm_tokenizer  *t = load_tiny(1, 1, "", NULL);
    static const int32_t  abc[] = { 259, 265, -1 };
    static const int32_t  abc_s[] = { 1, 259, 265, -1 };
    static const int32_t  bos[] = { 1, -1 };
    static const int32_t  none[] = { -1 };
    static const int32_t  ab_x[] = { 259, 263, 259, 268, -1 };
    static const int32_t  bytes[] = { 259, 3 + 0xC3, 3 + 0xA9, 3 + 0x7A, -1 };
    static const int32_t  special[] = { 259, 259, 1, 259, 259, 266, 2, -1 };
    static const int32_t  repl[] = { 266, 3 + 0xEF, 3 + 0xBF, 3 + 0xBD, 261,
                                     -1 };

    tap_ok(t != NULL, "tiny SentencePiece-style tokenizer loads");
    if (t == NULL) {
        return;
    }
    tap_ok(llm_tokenizer_vocab_size(t) == 269, "vocab size 269");
    tap_ok(strcmp(llm_tokenizer_token_str(t, 267), "\xe2\x96\x81" "abc") == 0
           && llm_tokenizer_token_str(t, 269) == NULL
           && llm_tokenizer_token_str(t, -1) == NULL, "token_str");
    tap_ok(llm_tokenizer_token_id(t, "abc") == 265
           && llm_tokenizer_token_id(t, "</s>") == 2
           && llm_tokenizer_token_id(t, "nope") == -1, "token_id");
    tap_ok(llm_tokenizer_is_special(t, 1) && !llm_tokenizer_is_special(t, 265),
           "is_special");
    tap_ok(strcmp(llm_tokenizer_bos_str(t), "") == 0,
           "no tokenizer_config.json: bos is \"\"");

    /* "▁abc": b+c (rank 0) first, then a+bc (rank 2); "▁ abc" has no merge */
    expect_ids(t, "abc", 3, 0, abc, "merges apply by rank: abc -> ▁ abc");
    expect_ids(t, "abc", 3, 1, abc_s, "add_special: <s> first");
    expect_ids(t, "", 0, 1, bos, "empty text with special tokens: just <s>");
    expect_ids(t, "", 0, 0, none, "empty text: no ids");
    expect_ids(t, "ab x", 4, 0, ab_x, "▁ ab ▁ x: a+b (rank 1) goes before ▁+a (rank 3)");
    expect_ids(t, "\xC3\xA9z", 3, 0, bytes,
               "unknown characters fall back to <0xNN> byte tokens");
    expect_ids(t, " <s>  a</s>", 11, 0, special,
               "special tokens split the text; each piece is normalized "
               "on its own");
    expect_ids(t, "a\xFF" "b", 3, 0, repl,
               "an invalid byte is encoded as U+FFFD");
    llm_tokenizer_free(t);

    t = load_tiny(0, 1, "", NULL);
    {
        static const int32_t  fused[] = { 259, 0, 260, 0, -1 };

        expect_ids(t, "zzaq", 4, 0, fused, "no byte fallback: unknown "
                   "characters fuse into one <unk>");
    }
    llm_tokenizer_free(t);
    t = load_tiny(0, 0, "", NULL);
    {
        static const int32_t  unfused[] = { 259, 0, 0, 260, -1 };

        expect_ids(t, "zza", 3, 0, unfused, "fuse_unk false: one <unk> per "
                   "character");
    }
    llm_tokenizer_free(t);
}


static void
test_added_flags(void)
{
    /* [L] strips spaces on its left, [R] on its right; "ab" must stand
     * alone as a word */
    static const char  extra[] =
        ",{\"id\":269,\"content\":\"[L]\",\"single_word\":false,\"lstrip\":true,"
        "\"rstrip\":false,\"normalized\":false,\"special\":true}"
        ",{\"id\":270,\"content\":\"[R]\",\"single_word\":false,"
        "\"lstrip\":false,\"rstrip\":true,\"normalized\":false,\"special\":true}"
        ",{\"id\":271,\"content\":\"xab\",\"single_word\":true,"
        "\"lstrip\":false,\"rstrip\":false,\"normalized\":false,"
        "\"special\":false}";
    static const int32_t  l[] = { 266, 269, 259, 259, 259, 261, -1 };
    static const int32_t  r[] = { 266, 259, 270, 259, 261, -1 };
    static const int32_t  word[] = { 271, 259, 259, 268, 268, 263, 259, 271,
                                     -1 };
    llm_tokenizer  *t = load_tiny(1, 1, extra, NULL);

    tap_ok(t && llm_tokenizer_vocab_size(t) == 272, "added tokens get ids "
           "after the vocabulary");
    if (t == NULL) {
        return;
    }
    expect_ids(t, "a   [L]  b", 10, 0, l, "lstrip takes the spaces before");
    expect_ids(t, "a [R]   b", 9, 0, r, "rstrip takes the spaces after");
    expect_ids(t, "xab xxab xab", 12, 0, word,
               "single_word: only a match with no word character around");
    {
        static const int32_t  ids[] = { 266, 269, 270, 261 };

        expect_decode(t, ids, 4, 0, "a[L][R]b", "decode keeps special tokens");
        expect_decode(t, ids, 4, 1, "ab", "decode skip_special drops them");
    }
    llm_tokenizer_free(t);
}


static void
test_llama_rule(void)
{
    /* transformers' LlamaTokenizerFast builds BOS/EOS from the config */
    static const char  cfg[] =
        "{\"tokenizer_class\":\"LlamaTokenizer\",\"bos_token\":\"<s>\","
        "\"eos_token\":{\"content\":\"</s>\",\"special\":true},"
        "\"add_bos_token\":false,\"add_eos_token\":true}";
    static const int32_t  want[] = { 259, 265, 2, -1 };
    llm_tokenizer  *t = load_tiny(1, 1, "", cfg);

    if (t == NULL) {
        tap_ok(0, "loads with tokenizer_config.json");
        return;
    }
    tap_ok(strcmp(llm_tokenizer_bos_str(t), "<s>") == 0
           && strcmp(llm_tokenizer_eos_str(t), "</s>") == 0,
           "bos/eos from tokenizer_config.json (string and AddedToken forms)");
    expect_ids(t, "abc", 3, 1, want, "LlamaTokenizer with add_bos_token "
               "false, add_eos_token true: no <s>, </s> at the end");
    llm_tokenizer_free(t);
}


static void
test_decode(void)
{
    llm_tokenizer  *t = load_tiny(1, 1, "", NULL);
    static const int32_t  euro[] = { 259, 3 + 0xE2, 3 + 0x82, 3 + 0xAC, 260 };
    static const int32_t  bad[] = { 259, 3 + 0xE2, 3 + 0x82, 260 };
    static const int32_t  lead[] = { 259, 259, 260 };

    if (t == NULL) {
        tap_ok(0, "tokenizer for the decode tests loads");
        return;
    }
    expect_decode(t, euro, 5, 0, "\xE2\x82\xAC" "a",
                  "byte tokens forming UTF-8 decode to the character");
    expect_decode(t, bad, 4, 0, "\xEF\xBF\xBD\xEF\xBF\xBD" "a",
                  "an invalid byte run: one U+FFFD per byte (ByteFallback)");
    expect_decode(t, lead, 3, 0, " a", "Strip removes one leading space");
    expect_decode(t, lead, 0, 0, "", "no ids: empty text");
    {
        static const int32_t  oob[] = { 260, 99999, -5, 261 };

        expect_decode(t, oob, 4, 0, "ab", "unknown ids are skipped");
    }
    llm_tokenizer_free(t);
}


/* Feeds ids one by one; returns the concatenation, checks each piece. */
static char *
stream(const llm_tokenizer *t, const int32_t *prompt, size_t np,
    const int32_t *gen, size_t ng, int skip, const char **pieces)
{
    llm_detok   *d = llm_detok_create(t, prompt, np, skip);
    llm_tok_buf  all = { 0 };
    const char  *p;
    size_t       i, len;
    int          ok = 1;

    llm_tok_buf_put(&all, "", 0);
    for (i = 0; i <= ng; i++) {
        p = i < ng ? llm_detok_push(d, gen[i], &len) : llm_detok_flush(d, &len);
        if (pieces && (len != strlen(pieces[i])
                       || memcmp(p, pieces[i], len) != 0))
        {
            tap_diag("  step %zu: got \"%.*s\", want \"%s\"", i, (int) len, p,
                     pieces[i]);
            ok = 0;
        }
        llm_tok_buf_put(&all, p, len);
    }
    llm_detok_free(d);
    if (!ok) {
        all.p[0] = '\x01';      /* marks a step mismatch */
    }
    return all.p;
}


/* Is the stream decode(prompt + gen) after decode(prompt)? */
static int
stream_is_decode(const llm_tokenizer *t, const int32_t *ids, size_t np,
    size_t ng, int skip)
{
    char    *s = stream(t, ids, np, ids + np, ng, skip, NULL);
    char    *full, *ptext;
    size_t   full_len, ptext_len;
    int      ok;

    full = llm_tokenizer_decode(t, ids, np + ng, skip, &full_len);
    ptext = llm_tokenizer_decode(t, ids, np, skip, &ptext_len);
    ok = ptext_len <= full_len && strlen(s) == full_len - ptext_len
         && memcmp(s, full + ptext_len, full_len - ptext_len) == 0;
    if (!ok) {
        tap_diag("  stream \"%s\", decode \"%s\" after \"%s\"", s, full, ptext);
    }
    free(s);
    free(full);
    free(ptext);
    return ok;
}


/* The cases t/tokenizer/fuzz_tokenizer.c found, on the tiny tokenizer
 * (ids 3 + b are the byte tokens <0xbb>, 259 is "▁", 260 "a", 261 "b"). */
static void
test_detok_found_by_fuzzing(const llm_tokenizer *t)
{
#define B(x)  (3 + (x))
    /* <s> 你好 | 世 a: the last five prompt tokens start inside 你 */
    static const int32_t  mid[] = { 1, B(0xE4), B(0xBD), B(0xA0), B(0xE5),
                                    B(0xA5), B(0xBD), B(0xE4), B(0xB8),
                                    B(0x96), 260 };
    int32_t               ids[200];
    size_t                i, n;

    tap_ok(stream_is_decode(t, mid, 7, 4, 1), "stream: a prompt context that "
           "would start inside a character starts at its first byte");

    /* <s> | 你 x 40 a: a valid byte run longer than the hold limit */
    n = 0;
    ids[n++] = 1;
    for (i = 0; i < 40; i++) {
        ids[n++] = B(0xE4);
        ids[n++] = B(0xBD);
        ids[n++] = B(0xA0);
    }
    ids[n++] = 260;
    tap_ok(stream_is_decode(t, ids, 1, n - 1, 1), "stream: a valid byte run "
           "of 120 tokens is shown at character boundaries, as decoded");

    /* <s> a | <s> x 40 ▁b: skipped tokens beyond the hold limit keep the
     * context, so the space before b stays */
    n = 0;
    ids[n++] = 1;
    ids[n++] = 260;
    for (i = 0; i < 40; i++) {
        ids[n++] = 1;
    }
    ids[n++] = 259;
    ids[n++] = 261;
    tap_ok(stream_is_decode(t, ids, 2, n - 2, 1), "stream: 40 skipped special "
           "tokens change nothing, the next space stays");
    /* a prompt that ends in skipped tokens only */
    tap_ok(stream_is_decode(t, ids, 12, n - 12, 1), "stream: a prompt ending "
           "in ten skipped tokens keeps the text before them as context");
#undef B
}


static void
test_detok(void)
{
    llm_tokenizer  *t = load_tiny(1, 1, "", NULL);
    static const int32_t  bos[] = { 1 };
    static const int32_t  gen[] = { 259, 3 + 0xC3, 3 + 0xA9, 260, 259, 261 };
    static const char    *pieces[] = { "", "", "", "\xC3\xA9" "a", " ", "b",
                                       "" };
    static const char    *pieces_keep[] = { " ", "", "", "\xC3\xA9" "a", " ",
                                            "b", "" };
    static const int32_t  bad[] = { 3 + 0xE2, 3 + 0x82, 260 };
    static const char    *bad_pieces[] = { "", "", "\xEF\xBF\xBD\xEF\xBF\xBD"
                                           "a", "" };
    static const int32_t  tail[] = { 3 + 0xE2, 3 + 0x82 };
    static const char    *tail_pieces[] = { "", "",
                                            "\xEF\xBF\xBD\xEF\xBF\xBD" };
    char                 *s;

    if (t == NULL) {
        tap_ok(0, "tokenizer for the streaming tests loads");
        return;
    }
    s = stream(t, bos, 1, gen, 6, 1, pieces);
    tap_ok(strcmp(s, "\xC3\xA9" "a b") == 0, "stream: a byte run is held "
           "until it is closed; the first space is stripped as in decode");
    free(s);
    s = stream(t, bos, 1, gen, 6, 0, pieces_keep);
    tap_ok(strcmp(s, " \xC3\xA9" "a b") == 0, "stream with <s> shown: the "
           "space after <s> stays, as in decode");
    free(s);
    s = stream(t, bos, 1, bad, 3, 1, bad_pieces);
    tap_ok(strcmp(s, "\xEF\xBF\xBD\xEF\xBF\xBD" "a") == 0,
           "stream: an invalid byte run becomes U+FFFDs once closed");
    free(s);
    s = stream(t, NULL, 0, tail, 2, 1, tail_pieces);
    tap_ok(strcmp(s, "\xEF\xBF\xBD\xEF\xBF\xBD") == 0,
           "flush shows an unfinished byte run as decode does");
    free(s);
    test_detok_found_by_fuzzing(t);
    llm_tokenizer_free(t);
}


/* A match too deep for PCRE2's default JIT stack: the retry with a bigger
 * stack (or the interpreter) must give the same pieces. */
static void
test_deep_regex(void)
{
    llm_tokenizer  *t;
    size_t          n = 200000, i, len;
    char           *text = llm_xmalloc(n), *back, err[LLM_ERR_LEN];
    int32_t        *ids;
    int             k;

    t = load_tiny_pretok(1, 1, "", NULL, "{\"type\":\"Split\",\"pattern\":"
                         "{\"Regex\":\"(?:(a)|(b))+\"},\"behavior\":"
                         "\"Isolated\",\"invert\":false}");
    if (t == NULL) {
        tap_ok(0, "tokenizer with a Split regex loads");
        free(text);
        return;
    }
    for (i = 0; i < n; i++) {
        text[i] = "ab"[i & 1];
    }
    k = llm_tokenizer_encode(t, text, n, 0, &ids, err);
    tap_ok(k > 0, "a 200 kB regex match beyond the JIT stack encodes%s%s",
           k > 0 ? "" : ": ", k > 0 ? "" : err);
    back = llm_tokenizer_decode(t, ids, k > 0 ? (size_t) k : 0, 0, &len);
    tap_ok(len == n && memcmp(back, text, n) == 0,
           "and decodes back to the text");
    free(back);
    free(ids);
    free(text);
    llm_tokenizer_free(t);
}


static void
expect_load_error(const char *json, const char *needle, const char *what)
{
    char            err[LLM_ERR_LEN] = "";
    llm_tokenizer  *t;

    write_file("tokenizer.json", json);
    remove_file("tokenizer_config.json");
    t = llm_tokenizer_load(dir, err);
    tap_ok(t == NULL && strstr(err, needle) != NULL
           && strstr(err, "tokenizer.json") != NULL, "%s", what);
    if (t != NULL || strstr(err, needle) == NULL) {
        tap_diag("  message: %s", err);
    }
    llm_tokenizer_free(t);
}


static void
test_errors(void)
{
    char            err[LLM_ERR_LEN] = "";
    llm_tokenizer  *t;

    t = llm_tokenizer_load("/nonexistent/model", err);
    tap_ok(t == NULL && strstr(err, "/nonexistent/model/tokenizer.json"),
           "a missing directory names the file: %s", err);
    expect_load_error("{\"model\": {", "invalid JSON", "truncated JSON");
    expect_load_error("{\"model\":{\"type\":\"WordPiece\",\"vocab\":{}}}",
                      "WordPiece", "an unsupported model type is named");
    expect_load_error("{\"pre_tokenizer\":{\"type\":\"BertPreTokenizer\"},"
                      "\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":0},"
                      "\"merges\":[]}}", "BertPreTokenizer",
                      "an unsupported pre-tokenizer is named");
    expect_load_error("{\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":0},"
                      "\"merges\":[\"a b\"]}}", "merges[0]",
                      "a merge of unknown tokens is named");
    expect_load_error("{\"pre_tokenizer\":{\"type\":\"Split\",\"pattern\":"
                      "{\"Regex\":\"(\"},\"behavior\":\"Isolated\","
                      "\"invert\":false},\"model\":{\"type\":\"BPE\","
                      "\"vocab\":{\"a\":0},\"merges\":[]}}", "regex",
                      "a regex that does not compile is named");
}


static int
rm_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
    return remove(path);
}


int
main(void)
{
    if (mkdtemp(dir) == NULL) {
        perror("mkdtemp");
        return 1;
    }
    test_utf8();
    test_encode();
    test_added_flags();
    test_llama_rule();
    test_decode();
    test_detok();
    test_deep_regex();
    test_errors();
    nftw(dir, rm_entry, 8, FTW_DEPTH | FTW_PHYS);
    return tap_done();
}
