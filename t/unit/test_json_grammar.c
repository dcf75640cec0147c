/*
 * test_json_grammar.c -- the JSON recognizer behind structured output:
 * valid objects are accepted whole and every prefix of them is accepted
 * but not complete; invalid texts are refused at the first impossible
 * byte; the whitespace, depth and UTF-8 rules.  t/api_structured.t checks
 * the model's constrained output with a JSON parser we did not write.
 */
#include <stdio.h>
#include <string.h>

#include "grammar/json_grammar.h"
#include "tap.h"


/* -1: refused; 0: a prefix, not complete; 1: complete */
static int
verdict(const char *text, size_t n)
{
    llm_json_state  s;

    llm_json_init(&s);
    if (llm_json_feed(&s, text, n) != 0) {
        return -1;
    }
    return llm_json_complete(&s);
}


/* Where the text is first refused, or -1. */
static long
refused_at(const char *text)
{
    llm_json_state  s;
    size_t          i;

    llm_json_init(&s);
    for (i = 0; text[i]; i++) {
        if (llm_json_feed(&s, text + i, 1) != 0) {
            return (long) i;
        }
    }
    return -1;
}


/* test_json_grammar FILE: the verdict (-1, 0, 1) of each hex-encoded line,
 * one per line, for t/json_grammar.t's comparison with Python's json. */
static int
verdicts(const char *path)
{
    FILE   *f = fopen(path, "r");
    char    line[65536], text[32768];
    size_t  i, n;
    int     v;

    if (f == NULL) {
        perror(path);
        return 1;
    }
    while (fgets(line, sizeof(line), f)) {
        for (i = n = 0; line[i] && line[i + 1] && line[i] != '\n'; i += 2) {
            sscanf(line + i, "%2hhx", (unsigned char *) &text[n++]);
        }
        v = verdict(text, n);
        printf("%d\n", v);
    }
    fclose(f);
    return 0;
}


int
main(int argc, char **argv)
{
    static const char *const valid[] = {
        "{}",
        "{\"a\": 1}",
        "{\n\t\"a\": [\n\t\t1,\n\t\t2\n\t]\n}",
        "{\"a\":[1,2.5,-3e10,0,-0.0,1E+2,2e-3,true,false,null,\"x\"]}",
        "{\n  \"k\": {\"n\": {\"m\": []}},\n  \"s\": \"\\\"\\\\\\/\\b\\f\\n\\r\\t\\u00e9\\uD83D\\uDE00\"\n}\n",
        "{\"caf\xC3\xA9\": \"\xE4\xBD\xA0\xE5\xA5\xBD \xF0\x9F\xA6\x99\"}",
        "{\"\":\"\",\"a\":{},\"b\":[[]],\"c\":[{}]}",
        "{\"n\":[0,1,12,-1,1.0,1.25e+10,0e0,-0E-0]}",
        "{\"t\":\"\xED\x9F\xBF\xEE\x80\x80\xF4\x8F\xBF\xBF\"}",
    };
    static const struct {
        const char  *text;
        long         at;                /* the byte refused; -2: not complete */
    } invalid[] = {
        { "[]", 0 },                    /* the top level must be an object */
        { "\"x\"", 0 },
        { "1", 0 },
        { "{a:1}", 1 },
        { "{\"a\" 1}", 5 },
        { "{\"a\":}", 5 },
        { "{\"a\":1,}", 7 },
        { "{\"a\":[1,]}", 8 },
        { "{\"a\":01}", 6 },
        { "{\"a\":1.}", 7 },
        { "{\"a\":1e}", 7 },
        { "{\"a\":-}", 6 },
        { "{\"a\":+1}", 5 },
        { "{\"a\":.5}", 5 },
        { "{\"a\":tru}", 8 },
        { "{\"a\":nul1}", 8 },
        { "{\"a\":NaN}", 5 },
        { "{\"a\":\"\\x\"}", 7 },
        { "{\"a\":\"\\u12g4\"}", 10 },
        { "{\"a\":\"tab\there\"}", 9 },
        { "{\"a\":1]", 6 },
        { "{\"a\":[1}", 7 },
        { "{}x", 2 },
        { "{}{}", 2 },
        { "{\"a\":\"\xC0\xAF\"}", 6 },       /* overlong */
        { "{\"a\":\"\xED\xA0\x80\"}", 7 },   /* a surrogate */
        { "{\"a\":\"\xF4\x90\x80\x80\"}", 7 },   /* above U+10FFFF */
        { "{\"a\":\"\xE4\xBD\"}", 8 },       /* a character cut short */
        { "{\"a\":\"\x80\"}", 6 },           /* a lone continuation byte */
        { "{\"a\":1", -2 },
        { "{\"a\":\"x", -2 },
        { "", -2 },
    };
    char            buf[4096];
    size_t          i, k, n;
    int             ok;
    llm_json_state  s;

    if (argc > 1) {
        return verdicts(argv[1]);
    }
    for (i = 0; i < sizeof(valid) / sizeof(valid[0]); i++) {
        n = strlen(valid[i]);
        ok = verdict(valid[i], n) == 1;
        for (k = 0; ok && k < n; k++) {
            /* a strict prefix is accepted, and complete only when all
             * that is missing is trailing whitespace */
            int  v = verdict(valid[i], k), rest_ws = 1;
            size_t  j;

            for (j = k; j < n; j++) {
                rest_ws &= valid[i][j] == ' ' || valid[i][j] == '\n';
            }
            ok = v == (rest_ws ? 1 : 0);
        }
        tap_ok(ok, "valid object %zu accepted, each prefix a prefix", i);
    }
    for (i = 0; i < sizeof(invalid) / sizeof(invalid[0]); i++) {
        long  at = refused_at(invalid[i].text);

        if (invalid[i].at == -2) {
            ok = at == -1 && verdict(invalid[i].text, strlen(invalid[i].text)) == 0;
        } else {
            ok = at == invalid[i].at;
        }
        tap_ok(ok, "invalid \"%s\": %s at %ld", invalid[i].text,
               invalid[i].at == -2 ? "not complete" : "refused", at);
    }

    /* whitespace: one space, or a newline and LLM_JSON_MAX_INDENT blanks */
    tap_ok(refused_at(" {}") == 0 && refused_at("\n{}") == 0,
           "the text starts with the object's '{'");
    tap_ok(refused_at("{  }") == 2 && refused_at("{\n\n}") == 2
           && refused_at("{\t}") == 1 && refused_at("{\r\n}") == 1,
           "two spaces, two newlines, a tab or CR without a newline: refused");
    snprintf(buf, sizeof(buf), "{\n%*s}", LLM_JSON_MAX_INDENT, "");
    tap_ok(verdict(buf, strlen(buf)) == 1, "a newline and %d blanks",
           LLM_JSON_MAX_INDENT);
    snprintf(buf, sizeof(buf), "{\n%*s}", LLM_JSON_MAX_INDENT + 1, "");
    tap_ok(refused_at(buf) == LLM_JSON_MAX_INDENT + 2, "one more is refused");
    tap_ok(verdict("{} ", 3) == 1 && verdict("{}\n  ", 5) == 1
           && refused_at("{} \n") == 3,
           "after the object too, so the sequence must end");
    snprintf(buf, sizeof(buf), "{\"a\":\"%*s\"}", 200, "");
    tap_ok(verdict(buf, strlen(buf)) == 1, "blanks inside a string are text");

    /* depth */
    n = 0;
    buf[n++] = '{';
    memcpy(buf + n, "\"a\":", 4);
    n += 4;
    for (i = 1; i < LLM_JSON_MAX_DEPTH; i++) {
        buf[n++] = '[';
    }
    for (i = 1; i < LLM_JSON_MAX_DEPTH; i++) {
        buf[n++] = ']';
    }
    buf[n++] = '}';
    tap_ok(verdict(buf, n) == 1, "%d nested containers", LLM_JSON_MAX_DEPTH);
    llm_json_init(&s);
    tap_ok(llm_json_feed(&s, buf, 5 + LLM_JSON_MAX_DEPTH - 1) == 0
           && llm_json_feed(&s, "[", 1) != 0, "one more is refused");

    /* the mask's shortcut: text a string takes whole */
    tap_ok(llm_json_plain("abc def", 7) && llm_json_plain("\xE4\xBD\xA0!", 4)
           && llm_json_plain("a\\nb", 4) && llm_json_plain("\\u00e9", 6),
           "plain: ASCII, whole characters, whole escapes");
    tap_ok(!llm_json_plain("a\"", 2) && !llm_json_plain("\xE4\xBD", 2)
           && !llm_json_plain("a\\", 2) && !llm_json_plain("\n", 1)
           && !llm_json_plain("\\u00", 4),
           "not plain: a quote, part of a character or escape, a control byte");
    llm_json_init(&s);
    llm_json_feed(&s, "{\"k\":\"v", 6);
    tap_ok(llm_json_in_string(&s) && llm_json_feed(&s, "\\", 1) == 0
           && !llm_json_in_string(&s), "in_string: between characters only");

    /* trying bytes on a copy leaves the state as it was */
    llm_json_init(&s);
    llm_json_feed(&s, "{\"a\":", 5);
    {
        llm_json_state  t = s;

        tap_ok(llm_json_feed(&t, "tru", 3) == 0
               && llm_json_feed(&t, "x", 1) != 0
               && llm_json_feed(&s, "1}", 2) == 0 && llm_json_complete(&s),
               "a copy tries bytes; the original goes on");
    }
    return tap_done();
}
