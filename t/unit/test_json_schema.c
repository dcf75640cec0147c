/*
 * test_json_schema.c -- structured output's grammar engine
 * (engine/grammar/): JSON Schemas and grammar specs compiled, documents
 * accepted or refused byte by byte, completion, the policies (order,
 * whitespace, numbers), the refusals that name a keyword, and the token
 * mask on the Llama 3 vocabulary (128k tokens) against feeding every token
 * one by one, with its cost per token and the compile time printed.
 *
 * t/json_schema.t drives the second mode against ajv, a validator we did
 * not write:  test_json_schema check FILE  reads one JSON case per line,
 * {"spec": ..., "docs": [...], "samples": N, "seed": S}, and writes one
 * line per case: {"error": ...} or {"docs": [1 complete, 0 prefix, -1
 * refused ...], "samples": [texts], "stuck": n, "unfinished": n}.  A
 * sample walks the automaton, a random allowed byte at a time, until the
 * text may end.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <yajl/yajl_tree.h>

#include "engine_harness.h"
#include "grammar/grammar.h"
#include "grammar/grammar_mask.h"
#include "llm.h"
#include "tap.h"
#include "tokenizer/tokenizer.h"
#include "util/util.h"


static char  err[LLM_ERR_LEN];


static llm_grammar *
compile_schema(const char *schema)
{
    char         *spec = llm_structured_spec("schema", schema, strlen(schema));
    llm_grammar  *g = llm_grammar_compile(spec, strlen(spec), err);

    free(spec);
    return g;
}


/* -1: refused; 0: a prefix, not complete; 1: complete */
static int
verdict(const llm_grammar *g, const char *text)
{
    llm_grammar_state  *s = malloc(sizeof(*s));
    int                 v;

    llm_grammar_init(g, s);
    v = llm_grammar_feed(g, s, text, strlen(text)) != 0 ? -1
        : llm_grammar_complete(g, s);
    free(s);
    return v;
}


static void
expect(const char *schema, const char *text, int want)
{
    llm_grammar  *g = compile_schema(schema);
    int           v;

    if (g == NULL) {
        tap_ok(0, "%s compiles: %s", schema, err);
        return;
    }
    v = verdict(g, text);
    tap_ok(v == want, "%s: %s is %s (got %d)", schema, text,
           want == 1 ? "complete" : want == 0 ? "a prefix" : "refused", v);
    llm_grammar_release(g);
}


static void
refuse(const char *schema, const char *needle)
{
    llm_grammar  *g = compile_schema(schema);

    tap_ok(g == NULL && strstr(err, needle) != NULL,
           "%s refused, naming '%s': %s", schema, needle, g ? "(compiled)" : err);
    llm_grammar_release(g);
}


static void
test_schemas(void)
{
    const char  *tool = "{\"type\":\"object\",\"properties\":{"
                        "\"city\":{\"type\":\"string\"},"
                        "\"unit\":{\"enum\":[\"c\",\"f\"]},"
                        "\"days\":{\"type\":\"integer\",\"minimum\":1,\"maximum\":14}},"
                        "\"required\":[\"city\",\"days\"],"
                        "\"additionalProperties\":false}";

    /* objects: schema order, optional properties may go, required stay */
    expect(tool, "{\"city\":\"Paris\",\"unit\":\"c\",\"days\":3}", 1);
    expect(tool, "{\"city\":\"Paris\",\"days\":14}", 1);
    expect(tool, "{\"city\": \"Paris\", \"days\": 14}", 1);
    expect(tool, "{\n  \"city\": \"Paris\",\n  \"days\": 2\n}", 1);
    expect(tool, "{\"days\":3,\"city\":\"Paris\"}", -1);
    expect(tool, "{\"city\":\"Paris\"}", -1);
    expect(tool, "{\"city\":\"Paris\",\"days\":15}", -1);
    expect(tool, "{\"city\":\"Paris\",\"days\":0}", -1);
    expect(tool, "{\"city\":\"Paris\",\"days\":1", 0);
    expect(tool, "{\"city\":\"Paris\",\"unit\":\"k\"", -1);
    expect(tool, "{\"city\":\"Paris\",\"extra\":1,\"days\":3}", -1);
    expect(tool, "{\"city\":\"Paris\",\"days\":3}  ", -1);
    expect(tool, "{\"city\":\"Paris\",\"days\":3} ", 1);
    expect(tool, "{  \"city\":1}", -1);

    /* a bare object: any object; additionalProperties true: extras last */
    expect("{\"type\":\"object\"}", "{\"a\":[1,{\"b\":null}],\"c\":\"d\"}", 1);
    expect("{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"integer\"}},"
           "\"additionalProperties\":{\"type\":\"string\"}}",
           "{\"a\":1,\"b\":\"x\",\"c d\":\"y\"}", 1);
    expect("{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"integer\"}},"
           "\"additionalProperties\":{\"type\":\"string\"}}",
           "{\"a\":\"x\"}", -1);
    expect("{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"integer\"}},"
           "\"additionalProperties\":true}", "{\"ab\":[true]}", 1);
    expect("{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"integer\"}}}",
           "{\"b\":1}", -1);

    /* arrays */
    expect("{\"type\":\"array\",\"items\":{\"type\":\"number\"},\"minItems\":1,"
           "\"maxItems\":2}", "[1.5,-2e3]", 1);
    expect("{\"type\":\"array\",\"items\":{\"type\":\"number\"},\"minItems\":1,"
           "\"maxItems\":2}", "[]", -1);
    expect("{\"type\":\"array\",\"items\":{\"type\":\"number\"},\"minItems\":1,"
           "\"maxItems\":2}", "[1,2,3]", -1);

    /* strings */
    expect("{\"type\":\"string\",\"minLength\":2,\"maxLength\":3}", "\"ab\"", 1);
    expect("{\"type\":\"string\",\"minLength\":2,\"maxLength\":3}", "\"a\"", -1);
    expect("{\"type\":\"string\",\"minLength\":2,\"maxLength\":3}", "\"\xc3\xa9\xe4\xbd\xa0\xf0\x9f\xa6\x9e\"", 1);
    expect("{\"type\":\"string\",\"minLength\":2,\"maxLength\":3}", "\"abcd", -1);
    expect("{\"type\":\"string\"}", "\"a\\u00e9\\n\"", 1);
    expect("{\"type\":\"string\",\"maxLength\":5}", "\"a\\u00e9\"", -1);
    expect("{\"type\":\"string\",\"pattern\":\"^[a-z]+-[0-9]{2}$\"}", "\"ab-12\"", 1);
    expect("{\"type\":\"string\",\"pattern\":\"^[a-z]+-[0-9]{2}$\"}", "\"ab-123", -1);
    expect("{\"type\":\"string\",\"pattern\":\"[0-9]\"}", "\"x7y\"", 1);
    expect("{\"type\":\"string\",\"pattern\":\"[0-9]\"}", "\"xy\"", -1);
    expect("{\"type\":\"string\",\"pattern\":\"^a.c$\"}", "\"a\\nc\"", -1);
    expect("{\"type\":\"string\",\"pattern\":\"^a.c$\"}", "\"a\xe4\xbd\xa0" "c\"", 1);
    expect("{\"type\":\"string\",\"pattern\":\"^\\\\d+$\",\"maxLength\":3}", "\"123\"", 1);
    expect("{\"type\":\"string\",\"pattern\":\"^\\\\d+$\",\"maxLength\":3}", "\"1234", -1);
    expect("{\"type\":\"string\",\"format\":\"date\"}", "\"2024-02-29\"", 1);
    expect("{\"type\":\"string\",\"format\":\"date\"}", "\"2023-02-29\"", -1);
    expect("{\"type\":\"string\",\"format\":\"date\"}", "\"2000-02-29\"", 1);
    expect("{\"type\":\"string\",\"format\":\"date\"}", "\"1900-02-29\"", -1);
    expect("{\"type\":\"string\",\"format\":\"date-time\"}",
           "\"2024-05-01T13:45:00.5+02:00\"", 1);
    expect("{\"type\":\"string\",\"format\":\"date-time\"}",
           "\"2024-05-01T24:00:00Z\"", -1);
    expect("{\"type\":\"string\",\"format\":\"email\"}", "\"a.b@ex-ample.org\"", 1);
    expect("{\"type\":\"string\",\"format\":\"email\"}", "\"a..b@x.org\"", -1);
    expect("{\"type\":\"string\",\"format\":\"uuid\"}",
           "\"123e4567-e89b-12d3-a456-426614174000\"", 1);

    /* numbers */
    expect("{\"type\":\"integer\"}", "-0", 1);
    expect("{\"type\":\"integer\"}", "012", -1);
    expect("{\"type\":\"integer\"}", "1.0", -1);
    expect("{\"type\":\"number\",\"exclusiveMinimum\":0,\"maximum\":1}", "0", 0);
    expect("{\"type\":\"number\",\"exclusiveMinimum\":0,\"maximum\":1}", "-", -1);
    expect("{\"type\":\"number\",\"exclusiveMinimum\":0,\"maximum\":1}", "0.0", 0);
    expect("{\"type\":\"number\",\"exclusiveMinimum\":0,\"maximum\":1}", "0.000001", 1);
    expect("{\"type\":\"number\",\"exclusiveMinimum\":0,\"maximum\":1}", "1.000001", -1);
    expect("{\"type\":\"number\",\"exclusiveMinimum\":0,\"maximum\":1}", "1", 1);
    expect("{\"type\":\"number\",\"minimum\":0.1,\"maximum\":0.3}", "0.1", 1);
    expect("{\"type\":\"number\",\"minimum\":0.1,\"maximum\":0.3}", "0.3", 1);
    expect("{\"type\":\"number\",\"minimum\":0.1,\"maximum\":0.3}", "0.30001", -1);
    expect("{\"type\":\"integer\",\"minimum\":100}", "1", 0);
    expect("{\"type\":\"integer\",\"minimum\":100}", "99", 0);
    expect("{\"type\":\"integer\",\"maximum\":-5}", "-4", 0);
    expect("{\"type\":\"integer\",\"maximum\":-5}", "4", -1);
    expect("{\"type\":\"integer\",\"minimum\":5,\"exclusiveMinimum\":true}", "5", 0);
    expect("{\"type\":\"array\",\"items\":{\"type\":\"integer\",\"minimum\":5,"
           "\"exclusiveMinimum\":true}}", "[5]", -1);
    expect("{\"type\":\"array\",\"items\":{\"type\":\"integer\",\"minimum\":5,"
           "\"exclusiveMinimum\":true}}", "[6]", 1);
    expect("{\"type\":\"number\"}", "1.5e+10", 1);

    /* enum, const, anyOf, nullable, type lists, $ref */
    expect("{\"enum\":[1,12,\"a\",null,{\"k\":[true]}]}", "12", 1);
    expect("{\"enum\":[1,12,\"a\",null,{\"k\":[true]}]}", "1", 1);
    expect("{\"enum\":[1,12,\"a\",null,{\"k\":[true]}]}", "{\"k\":[true]}", 1);
    expect("{\"enum\":[1,12,\"a\",null,{\"k\":[true]}]}", "13", -1);
    expect("{\"type\":\"string\",\"enum\":[\"a\",1]}", "1", -1);
    expect("{\"const\":1.5e-7}", "1.5e-7", 1);
    expect("{\"type\":\"string\",\"enum\":[\"ab\",\"abc\",\"x\"],\"maxLength\":2}",
           "\"abc\"", -1);
    expect("{\"type\":\"string\",\"enum\":[\"ab\",\"abc\",\"x\"],\"maxLength\":2}",
           "\"ab\"", 1);
    expect("{\"type\":[\"string\",\"null\"]}", "null", 1);
    expect("{\"type\":\"string\",\"nullable\":true}", "null", 1);
    expect("{\"anyOf\":[{\"type\":\"object\",\"properties\":{\"k\":{\"const\":\"a\"},"
           "\"x\":{\"type\":\"integer\"}},\"required\":[\"k\",\"x\"],"
           "\"additionalProperties\":false},{\"type\":\"object\",\"properties\":"
           "{\"k\":{\"const\":\"b\"},\"y\":{\"type\":\"string\"}},\"required\":"
           "[\"k\",\"y\"],\"additionalProperties\":false}]}",
           "{\"k\":\"b\",\"y\":\"s\"}", 1);
    expect("{\"anyOf\":[{\"type\":\"object\",\"properties\":{\"k\":{\"const\":\"a\"},"
           "\"x\":{\"type\":\"integer\"}},\"required\":[\"k\",\"x\"],"
           "\"additionalProperties\":false},{\"type\":\"object\",\"properties\":"
           "{\"k\":{\"const\":\"b\"},\"y\":{\"type\":\"string\"}},\"required\":"
           "[\"k\",\"y\"],\"additionalProperties\":false}]}",
           "{\"k\":\"b\",\"x\":1}", -1);
    expect("{\"anyOf\":[{\"type\":\"integer\"},{\"type\":\"number\",\"minimum\":5.5}]}",
           "5.7", 1);
    expect("{\"$defs\":{\"node\":{\"type\":\"object\",\"properties\":{\"v\":"
           "{\"type\":\"integer\"},\"kids\":{\"type\":\"array\",\"items\":"
           "{\"$ref\":\"#/$defs/node\"}}},\"required\":[\"v\"],"
           "\"additionalProperties\":false}},\"$ref\":\"#/$defs/node\"}",
           "{\"v\":1,\"kids\":[{\"v\":2},{\"v\":3,\"kids\":[]}]}", 1);
    expect("{\"definitions\":{\"a\":{\"type\":\"boolean\"}},\"type\":\"array\","
           "\"items\":{\"$ref\":\"#/definitions/a\"}}", "[true,false]", 1);
    expect("{}", "[1,\"x\",{\"y\":null}]", 1);
    expect("true", "\"t\"", 1);
    expect("{\"allOf\":[{\"type\":\"null\"}],\"title\":\"t\"}", "null", 1);

    refuse("{\"type\":\"number\",\"multipleOf\":5}", "'multipleOf'");
    refuse("{\"type\":\"object\",\"patternProperties\":{}}", "'patternProperties'");
    refuse("{\"type\":\"string\",\"format\":\"uri\"}", "format 'uri'");
    refuse("{\"type\":\"string\",\"pattern\":\"(?=a)b\"}", "look-around");
    refuse("{\"type\":\"string\",\"pattern\":\"(a)\\\\1\"}", "back-reference");
    refuse("{\"type\":\"widget\"}", "type 'widget'");
    refuse("{\"type\":\"string\",\"pattern\":\"^[ab]*a[ab]{12}$\"}",
           "DFA states");
    refuse("{\"type\":\"string\",\"pattern\":\"(abcdefghij){1000}\"}",
           "NFA states");
    refuse("{\"$ref\":\"http://x/y\"}", "$ref");
    refuse("{\"$ref\":\"#/$defs/missing\"}", "does not resolve");
    refuse("{\"$defs\":{\"a\":{\"$ref\":\"#/$defs/a\"}},\"$ref\":\"#/$defs/a\"}",
           "cycle");
    refuse("{\"type\":\"object\",\"properties\":{\"a\":{\"$ref\":\"#\"}},"
           "\"required\":[\"a\"]}", "never be satisfied");
    refuse("{\"type\":\"integer\",\"minimum\":5,\"maximum\":4}", "never be satisfied");
    refuse("{\"type\":\"object\",\"required\":[\"a\"]}", "'a' is not in");
    refuse("{\"allOf\":[{},{}]}", "allOf");
    refuse("{\"type\":\"array\",\"items\":[{}]}", "tuple");
    refuse("false", "false");
    refuse("[1]", "a schema must be an object");
    refuse("{\"properties\":{\"a\":{\"minimum\":\"x\"}}}",
           "#/properties/a");
}


static void
test_specs(void)
{
    const char  *wrap = "{\"any_of\":[{\"sequence\":[{\"literal\":\"<tool_call>"
                        "{\\\"name\\\": \\\"f\\\", \\\"arguments\\\": \"},{\"schema\":"
                        "{\"type\":\"object\",\"properties\":{\"x\":{\"type\":"
                        "\"integer\"}},\"required\":[\"x\"],"
                        "\"additionalProperties\":false}},{\"literal\":\"}"
                        "</tool_call>\"}]},{\"sequence\":[{\"literal\":\"<tool_call>"
                        "{\\\"name\\\": \\\"g\\\", \\\"arguments\\\": \"},{\"schema\":"
                        "{\"type\":\"object\",\"properties\":{},"
                        "\"additionalProperties\":false}},{\"literal\":\"}"
                        "</tool_call>\"}]}]}";
    llm_grammar  *g;
    struct { const char *spec, *text; int want; } cases[] = {
        { "{\"choice\":[\"yes\",\"yes please\",\"no\"]}", "yes", 1 },
        { "{\"choice\":[\"yes\",\"yes please\",\"no\"]}", "yes please", 1 },
        { "{\"choice\":[\"yes\",\"yes please\",\"no\"]}", "yes ", 0 },
        { "{\"choice\":[\"yes\",\"yes please\",\"no\"]}", "yes!", -1 },
        { "{\"regex\":\"[0-9]{3}-[a-z]+\"}", "123-ab", 1 },
        { "{\"regex\":\"[0-9]{3}-[a-z]+\"}", "123-", 0 },
        { "{\"regex\":\"[0-9]{3}-[a-z]+\"}", "12-ab", -1 },
        { "{\"object\":true}", "{\"a\": [1]}", 1 },
        { "{\"object\":true}", "[1]", -1 },
        { "{\"literal\":\"abc\"}", "abc", 1 },
        { wrap, "<tool_call>{\"name\": \"f\", \"arguments\": {\"x\":3}}</tool_call>", 1 },
        { wrap, "<tool_call>{\"name\": \"g\", \"arguments\": {}}</tool_call>", 1 },
        { wrap, "<tool_call>{\"name\": \"g\", \"arguments\": {\"x\":3}}", -1 },
        { wrap, "<tool_call>{\"name\": \"h\"", -1 },
        { wrap, "<tool_call>{\"name\": \"f\", \"arguments\": {\"x\":3}}</tool_call> ", -1 },
    };
    size_t  i;

    for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        g = llm_grammar_compile(cases[i].spec, strlen(cases[i].spec), err);
        if (g == NULL) {
            tap_ok(0, "spec %zu compiles: %s", i, err);
            continue;
        }
        tap_ok(verdict(g, cases[i].text) == cases[i].want, "spec %zu: '%s' -> %d",
               i, cases[i].text, cases[i].want);
        llm_grammar_release(g);
    }
    g = llm_grammar_compile("{\"regex\":\"a{2,1}\"}", 18, err);
    tap_ok(g == NULL && strstr(err, "{n,m}"), "a bad regex: %s", err);
    g = llm_grammar_compile("{\"choice\":[]}", 13, err);
    tap_ok(g == NULL && strstr(err, "choice"), "an empty choice: %s", err);
    g = llm_grammar_compile("{\"grammar\":\"x\"}", 15, err);
    tap_ok(g == NULL && strstr(err, "grammar"), "an unknown spec: %s", err);

    /* the cache: the same text, the same grammar */
    {
        const char   *s = "{\"choice\":[\"a\"]}";
        llm_grammar  *a = llm_grammar_get(s, strlen(s), err);
        llm_grammar  *b = llm_grammar_get(s, strlen(s), err);

        tap_ok(a != NULL && a == b, "the cache returns the compiled grammar");
        llm_grammar_release(a);
        llm_grammar_release(b);
    }
}


/* ---- the mask on a real vocabulary -------------------------------------------- */


static int
cmp_double(const void *a, const void *b)
{
    double  x = *(const double *) a, y = *(const double *) b;

    return x < y ? -1 : x > y;
}


static double
now_ms(void)
{
    struct timespec  ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}


/* the median time of 50 masks in the state after text (cached after the
 * first) */
static double
mask_median(llm_gvocab *v, llm_grammar *g, llm_grammar_state *s,
    const char *text, float *logits, llm_gmask_scratch *w)
{
    double  times[50], t0;
    int     k;

    llm_grammar_init(g, s);
    llm_grammar_feed(g, s, text, strlen(text));
    for (k = 0; k < 50; k++) {
        t0 = now_ms();
        llm_grammar_mask(v, g, s, logits, w);
        times[k] = now_ms() - t0;
    }
    qsort(times, 50, sizeof(double), cmp_double);
    return times[25];
}


static void
test_mask(void)
{
    const char  *tool = "{\"type\":\"object\",\"properties\":{"
                        "\"location\":{\"type\":\"string\",\"description\":\"City\"},"
                        "\"unit\":{\"type\":\"string\",\"enum\":[\"celsius\",\"fahrenheit\"]},"
                        "\"days\":{\"type\":\"integer\",\"minimum\":1,\"maximum\":14},"
                        "\"include_hourly\":{\"type\":\"boolean\"},"
                        "\"notes\":{\"type\":[\"string\",\"null\"],\"maxLength\":200}},"
                        "\"required\":[\"location\",\"unit\",\"days\",\"include_hourly\","
                        "\"notes\"],\"additionalProperties\":false}";
    const char  *doc = "{\"location\": \"San Francisco, CA\", \"unit\": \"celsius\", "
                       "\"days\": 7, \"include_hourly\": false, \"notes\": "
                       "\"Bring an umbrella \\\"just in case\\\"\"}";
    char                 dir[] = "/tmp/llm-test-schema-XXXXXX", path[300];
    char                 big[8192];
    llm_token_texts      tt = { 0 };
    llm_tokenizer       *tok;
    llm_gvocab          *v;
    llm_gmask_scratch    w = { 0 };
    llm_grammar         *g;
    llm_grammar_state   *s, *t;
    float               *logits;
    double               times[256], t0, ct[20];
    int                  V, i, k, n_t = 0, bad = 0, round;
    size_t               pos = 0;

    if (mkdtemp(dir) == NULL) {
        tap_ok(0, "a temporary directory");
        return;
    }
    snprintf(path, sizeof(path), "%s/model", dir);
    if (harness_make_model(path, "") != 0) {
        tap_ok(0, "a test model with the Llama 3 tokenizer");
        return;
    }
    tok = llm_tokenizer_load(path, err);
    if (tok == NULL) {
        tap_ok(0, "its tokenizer loads: %s", err);
        return;
    }
    llm_tokenizer_token_texts(tok, &tt);
    V = tt.n;
    {
        llm_gtexts  gt = { tt.bytes, tt.off, tt.len, tt.n };

        v = llm_gvocab_create(&gt, V);
    }
    g = compile_schema(tool);
    tap_ok(g != NULL && V > 128000, "a 5-field tool schema, %d tokens", V);
    if (g == NULL) {
        return;
    }
    s = malloc(sizeof(*s));
    t = malloc(sizeof(*t));
    logits = malloc(sizeof(float) * (size_t) V);
    /* the document's tokens, greedily by the longest allowed token text
     * that continues it: at each step the mask must equal feeding every
     * token by itself; twice, the second time from the mask's cache (as
     * the next request with the same schema) */
    for (round = 0; round < 2; round++) {
        llm_grammar_init(g, s);
        pos = 0;
        n_t = 0;
        bad = 0;
        while (doc[pos] != '\0' && n_t < 256) {
            int  best = -1, best_len = 0;

            for (i = 0; i < V; i++) {
                logits[i] = 0;
            }
            t0 = now_ms();
            llm_grammar_mask(v, g, s, logits, &w);
            times[n_t++] = now_ms() - t0;
            for (i = 0; i < V; i++) {
                int  ok = tt.len[i] > 0;

                if (ok) {
                    llm_grammar_state_copy(t, s);
                    ok = llm_grammar_feed(g, t, tt.bytes + tt.off[i],
                                          (size_t) tt.len[i]) == 0;
                }
                if (ok != (logits[i] != -INFINITY)) {
                    if (bad++ < 5) {
                        tap_diag("at %zu, token %d '%.*s': fed %d, mask %d",
                                 pos, i, tt.len[i], tt.bytes + tt.off[i], ok,
                                 logits[i] != -INFINITY);
                    }
                }
                if (ok && tt.len[i] > best_len
                    && strncmp(doc + pos, tt.bytes + tt.off[i],
                               (size_t) tt.len[i]) == 0)
                {
                    best = i;
                    best_len = tt.len[i];
                }
            }
            if (best < 0) {
                tap_diag("no token continues the document at %zu", pos);
                bad++;
                break;
            }
            llm_grammar_feed(g, s, tt.bytes + tt.off[best], (size_t) best_len);
            pos += (size_t) best_len;
        }
        tap_ok(bad == 0 && doc[pos] == '\0' && llm_grammar_complete(g, s),
               "%s: the mask equals every token fed alone, at each of %d "
               "steps of a document", round ? "cached" : "first walk", n_t);
        qsort(times, (size_t) n_t, sizeof(double), cmp_double);
        tap_diag("mask at %d tokens, 5-field tool schema, %s: median %.3f ms, "
                 "p90 %.3f ms, max %.3f ms per token (%d tokens; a shared, "
                 "busy machine)", V, round ? "states seen before (cache)"
                 : "first visit of each state", times[n_t / 2],
                 times[n_t * 9 / 10], times[n_t - 1], n_t);
    }
    tap_diag("mask cache: %llu hits, %llu misses",
             (unsigned long long) w.hits, (unsigned long long) w.misses);
    llm_grammar_release(g);

    /* json_object's grammar through the same mask */
    {
        llm_grammar  *o = llm_grammar_compile("{\"object\":true}", 15, err);

        tap_diag("mask inside a JSON string (json_object): median %.3f ms",
                 mask_median(v, o, s, "{\"a\": \"x", logits, &w));
        tap_diag("mask between values (json_object): median %.3f ms",
                 mask_median(v, o, s, "{\"a\": [1, ", logits, &w));
        llm_grammar_release(o);
    }

    /* compile time of a 20-field schema, uncached */
    for (k = 0; k < 20; k++) {
        int  m = snprintf(big, sizeof(big), "{\"schema\":{\"type\":\"object\","
                          "\"properties\":{");

        for (i = 0; i < 20; i++) {
            static const char  *types[] = {
                "{\"type\":\"string\",\"maxLength\":40}",
                "{\"type\":\"integer\",\"minimum\":0,\"maximum\":1000}",
                "{\"type\":\"string\",\"enum\":[\"red\",\"green\",\"blue\"]}",
                "{\"type\":\"string\",\"format\":\"date\"}",
                "{\"type\":\"array\",\"items\":{\"type\":\"number\"},\"maxItems\":5}"
            };

            m += snprintf(big + m, sizeof(big) - (size_t) m, "%s\"field_%d_%d\":%s",
                          i ? "," : "", i, k, types[i % 5]);
        }
        m += snprintf(big + m, sizeof(big) - (size_t) m, "},\"additionalProperties\""
                      ":false}}");
        t0 = now_ms();
        g = llm_grammar_compile(big, (size_t) m, err);
        ct[k] = now_ms() - t0;
        if (g == NULL) {
            tap_diag("%s", err);
            break;
        }
        llm_grammar_release(g);
    }
    tap_ok(k == 20, "20-field schemas compile");
    qsort(ct, (size_t) k, sizeof(double), cmp_double);
    tap_diag("compile of a 20-field schema (4 with a date format): median "
             "%.3f ms", ct[k / 2]);

    free(s);
    free(t);
    free(logits);
    llm_gmask_scratch_free(&w);
    llm_gvocab_free(v);
    llm_token_texts_free(&tt);
    llm_tokenizer_free(tok);
    snprintf(big, sizeof(big), "rm -rf %s", dir);
    if (system(big) != 0) {
        tap_diag("could not remove %s", dir);
    }
}


/* ---- the driver of t/json_schema.t ----------------------------------------------- */


static void
put_json_str(FILE *out, const char *s, size_t n)
{
    size_t  i;

    fputc('"', out);
    for (i = 0; i < n; i++) {
        unsigned char  c = (unsigned char) s[i];

        if (c == '"' || c == '\\') {
            fprintf(out, "\\%c", c);
        } else if (c < 0x20) {
            fprintf(out, "\\u%04x", c);
        } else {
            fputc(c, out);
        }
    }
    fputc('"', out);
}


static uint64_t  rng_state;

static uint32_t
rnd(void)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return (uint32_t) (rng_state >> 11);
}


/* A random walk: one allowed byte after another until the text may end
 * (then it stops with probability 1/3, or at once past 400 bytes). Past
 * 300 bytes it prefers the bytes that close things. */
static int
sample(const llm_grammar *g, char *out, size_t cap, size_t *len)
{
    llm_grammar_state  *s = malloc(sizeof(*s)), *t = malloc(sizeof(*t));
    unsigned char       ok[256], pref[256];
    int                 n_ok, n_pref, b, rc = 0;
    size_t              n = 0;

    llm_grammar_init(g, s);
    for ( ;; ) {
        if (llm_grammar_complete(g, s) && (n > 400 || rnd() % 3 == 0)) {
            break;
        }
        n_ok = n_pref = 0;
        for (b = 0; b < 256; b++) {
            if (llm_grammar_step(g, s, (unsigned char) b, t) == 0) {
                ok[n_ok++] = (unsigned char) b;
                if (b == '"' || b == '}' || b == ']' || b == ',') {
                    pref[n_pref++] = (unsigned char) b;
                }
            }
        }
        if (n_ok == 0) {
            rc = llm_grammar_complete(g, s) ? 0 : -1;      /* -1: stuck */
            break;
        }
        if (n + 1 >= cap) {
            rc = 1;                                         /* unfinished */
            break;
        }
        b = n > 300 && n_pref > 0 && rnd() % 4 != 0 ? pref[rnd() % n_pref]
                                                    : ok[rnd() % n_ok];
        out[n++] = (char) b;
        llm_grammar_step(g, s, (unsigned char) b, t);
        llm_grammar_state_copy(s, t);
    }
    *len = n;
    free(s);
    free(t);
    return rc;
}


static int
check_file(const char *path)
{
    FILE                *f = fopen(path, "r");
    char                *line = NULL, *spec, text[4096];
    size_t               cap = 0, len, i;
    ssize_t              n;
    struct yajl_val_s   *v, *docs, *spec_v, *d;
    llm_grammar         *g;
    llm_grammar_state   *s = malloc(sizeof(*s));
    int                  k, samples, stuck, unfinished, rc, first;

    if (f == NULL) {
        perror(path);
        return 1;
    }
    while ((n = getline(&line, &cap, f)) > 0) {
        v = llm_json_parse(line, (size_t) n, LLM_JSON_MAX_DEPTH, err);
        if (v == NULL) {
            printf("{\"error\":\"bad case line: %s\"}\n", err);
            continue;
        }
        spec_v = llm_json_get(v, "spec");
        docs = llm_json_get(v, "docs");
        samples = (int) llm_json_get(v, "samples")->u.number.i;
        rng_state = (uint64_t) llm_json_get(v, "seed")->u.number.i * 2654435761u + 1;
        spec = llm_json_dump(spec_v, &len);
        g = llm_grammar_compile(spec, len, err);
        free(spec);
        if (g == NULL) {
            printf("{\"error\":");
            put_json_str(stdout, err, strlen(err));
            printf("}\n");
            llm_json_free(v);
            continue;
        }
        printf("{\"docs\":[");
        for (i = 0; docs && i < docs->u.array.len; i++) {
            d = docs->u.array.values[i];
            llm_grammar_init(g, s);
            k = llm_grammar_feed(g, s, d->u.string, strlen(d->u.string)) != 0
                ? -1 : llm_grammar_complete(g, s);
            printf("%s%d", i ? "," : "", k);
        }
        printf("],\"samples\":[");
        stuck = unfinished = 0;
        first = 1;
        for (k = 0; k < samples; k++) {
            rc = sample(g, text, sizeof(text), &len);
            if (rc < 0) {
                stuck++;
                if (stuck == 1) {
                    fprintf(stderr, "stuck after: %.*s\n", (int) len, text);
                }
                continue;
            }
            if (rc > 0) {
                unfinished++;
                continue;
            }
            printf("%s", first ? "" : ",");
            first = 0;
            put_json_str(stdout, text, len);
        }
        printf("],\"stuck\":%d,\"unfinished\":%d}\n", stuck, unfinished);
        fflush(stdout);
        llm_grammar_release(g);
        llm_json_free(v);
    }
    free(line);
    free(s);
    fclose(f);
    return 0;
}


int
main(int argc, char **argv)
{
    if (argc == 3 && strcmp(argv[1], "check") == 0) {
        return check_file(argv[2]);
    }
    test_schemas();
    test_specs();
    test_mask();
    return tap_done();
}
