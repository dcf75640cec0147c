/*
 * cmd_tokenize.c -- `llm tokenize` and `llm detokenize`: the tokenizer of a
 * model directory, without the rest of the engine.
 *
 *   llm tokenize --model DIR [--special] TEXT      -> [id,...] on stdout
 *   llm tokenize --model DIR [--special] --file F  (F's bytes; - for stdin)
 *   llm tokenize --model DIR [--special] --hex-lines F
 *                              (a text per line, as hex -> an id list a line)
 *   llm detokenize --model DIR [--skip-special] ID...  -> the text, exactly
 *
 * IDs may also be given as one list: "1,2,3" or "[1, 2, 3]".
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "llm.h"
#include "model/model.h"
#include "tokenizer/tokenizer.h"
#include "util/util.h"


static char *
llm_tokenize_read_all(FILE *f, size_t *len)
{
    char    *buf = NULL;
    size_t   cap = 0, n = 0, got;

    for (;;) {
        if (n + 4096 > cap) {
            cap = cap ? cap * 2 : 65536;
            buf = llm_xrealloc(buf, cap);
        }
        got = fread(buf + n, 1, cap - n, f);
        n += got;
        if (got == 0) {
            break;
        }
    }
    *len = n;
    return buf;
}


/* [id,id,...] and a newline */
static void
llm_tokenize_print(const int32_t *ids, int n)
{
    int  i;

    putchar('[');
    for (i = 0; i < n; i++) {
        printf(i ? ",%d" : "%d", ids[i]);
    }
    puts("]");
}


/* One id list per line of hex-encoded text: many texts, one load. */
static int
llm_tokenize_hex_lines(const llm_tokenizer *t, char *data, size_t len,
    int special)
{
    char     *line, *end, err[LLM_ERR_LEN];
    char     *text;
    size_t    i, n;
    int       n_ids;
    int32_t  *ids;
    unsigned  byte;

    data[len] = '\0';
    for (line = data; *line; line = end + 1) {
        end = strchr(line, '\n');
        if (end == NULL) {
            end = line + strlen(line) - 1;   /* the last line, unterminated */
        } else {
            *end = '\0';
        }
        n = strlen(line) / 2;
        text = llm_xmalloc(n + 1);
        for (i = 0; i < n; i++) {
            if (sscanf(line + 2 * i, "%2x", &byte) != 1) {
                free(text);
                return llm_cli_fail("tokenize: --hex-lines: not hex: %.40s",
                                    line);
            }
            text[i] = (char) byte;
        }
        n_ids = llm_tokenizer_encode(t, text, n, special, &ids, err);
        free(text);
        if (n_ids < 0) {
            return llm_cli_fail("tokenize: %s", err);
        }
        llm_tokenize_print(ids, n_ids);
        free(ids);
    }
    return 0;
}


int
llm_cmd_tokenize(int argc, char **argv)
{
    const char     *model = NULL, *text = NULL, *file = NULL;
    char           *data = NULL, err[LLM_ERR_LEN];
    size_t          len = 0;
    int             i, n, special = 0, done = 0, hex = 0;
    int32_t        *ids;
    llm_tokenizer  *t;

    for (i = 1; i < argc; i++) {
        if (!done && strcmp(argv[i], "--") == 0) {
            done = 1;           /* the text may start with "--" */
        } else if (!done && strcmp(argv[i], "--model") == 0 && i + 1 < argc) {
            model = argv[++i];
        } else if (!done && strcmp(argv[i], "--file") == 0 && i + 1 < argc) {
            file = argv[++i];
        } else if (!done && strcmp(argv[i], "--hex-lines") == 0
                   && i + 1 < argc)
        {
            file = argv[++i];
            hex = 1;
        } else if (!done && strcmp(argv[i], "--special") == 0) {
            special = 1;
        } else if (text == NULL) {
            text = argv[i];
        } else {
            return llm_cli_fail("tokenize: unexpected argument '%s' (usage: "
                                "llm tokenize --model DIR [--special] TEXT)",
                                argv[i]);
        }
    }
    if (model == NULL) {
        return llm_cli_fail("tokenize: --model DIR is required");
    }
    if ((text == NULL) == (file == NULL)) {
        return llm_cli_fail("tokenize: give the text as one argument, or "
                            "--file PATH");
    }
    if (file) {
        if (strcmp(file, "-") == 0) {
            data = llm_tokenize_read_all(stdin, &len);
        } else {
            data = llm_read_file(file, &len, err);
            if (data == NULL) {
                return llm_cli_fail("tokenize: %s", err);
            }
        }
    } else {
        len = strlen(text);
    }

    if (llm_model_text_load(model, &t, NULL, err) != 0) {
        free(data);
        return llm_cli_fail("%s", err);
    }
    if (hex) {
        data = llm_xrealloc(data, len + 1);
        n = llm_tokenize_hex_lines(t, data, len, special);
        free(data);
        llm_tokenizer_free(t);
        return n;
    }
    n = llm_tokenizer_encode(t, data ? data : text, len, special, &ids, err);
    free(data);
    if (n < 0) {
        llm_tokenizer_free(t);
        return llm_cli_fail("tokenize: %s", err);
    }
    llm_tokenize_print(ids, n);
    free(ids);
    llm_tokenizer_free(t);
    return 0;
}


/* Appends the ids in s ("5", "1,2,3", "[1, 2]") to *ids; -1 on junk. */
static int
llm_detok_parse_ids(const char *s, int32_t **ids, size_t *n, size_t *cap)
{
    char  *end;
    long   v;

    while (*s) {
        if (strchr(" \t\n,[]", *s)) {
            s++;
            continue;
        }
        errno = 0;
        v = strtol(s, &end, 10);
        if (end == s || errno || v < 0 || v > INT32_MAX) {
            return -1;
        }
        if (*n == *cap) {
            *cap = *cap ? *cap * 2 : 64;
            *ids = llm_xrealloc(*ids, *cap * sizeof(int32_t));
        }
        (*ids)[(*n)++] = (int32_t) v;
        s = end;
    }
    return 0;
}


int
llm_cmd_detokenize(int argc, char **argv)
{
    const char     *model = NULL;
    char           *text, err[LLM_ERR_LEN];
    int32_t        *ids = NULL;
    size_t          n = 0, cap = 0, len;
    int             i, skip = 0, vocab;
    llm_tokenizer  *t;

    for (i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--model") == 0 && i + 1 < argc) {
            model = argv[++i];
        } else if (strcmp(argv[i], "--skip-special") == 0) {
            skip = 1;
        } else if (llm_detok_parse_ids(argv[i], &ids, &n, &cap) != 0) {
            free(ids);
            return llm_cli_fail("detokenize: '%s' is not a token id "
                                "(usage: llm detokenize --model DIR ID...)",
                                argv[i]);
        }
    }
    if (model == NULL) {
        free(ids);
        return llm_cli_fail("detokenize: --model DIR is required");
    }
    if (llm_model_text_load(model, &t, NULL, err) != 0) {
        free(ids);
        return llm_cli_fail("%s", err);
    }
    vocab = llm_tokenizer_vocab_size(t);
    for (i = 0; i < (int) n; i++) {
        if (ids[i] >= vocab) {
            llm_cli_fail("detokenize: id %d is out of range (the "
                         "vocabulary has %d ids)", ids[i], vocab);
            llm_tokenizer_free(t);
            free(ids);
            return 1;
        }
    }
    text = llm_tokenizer_decode(t, ids, n, skip, &len);
    fwrite(text, 1, len, stdout);
    free(text);
    free(ids);
    llm_tokenizer_free(t);
    return fflush(stdout) == 0 ? 0 : 1;
}
