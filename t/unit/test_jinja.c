/*
 * test_jinja.c -- unit tests of the chat template engine: Python number and
 * string formatting, parsing errors, rendering with Hugging Face's
 * variables, template selection when loading a model directory, limits,
 * and concurrent renders of one template.  The expected strings were
 * produced with Python jinja2 3.1 set up as transformers sets it up.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <yajl/yajl_tree.h>

#include "jinja/chat_template.h"
#include "jinja/jinja.h"
#include "tap.h"


static yajl_val
json(const char *text)
{
    char      err[256];
    yajl_val  v = yajl_tree_parse(text, err, sizeof(err));

    if (v == NULL) {
        fprintf(stderr, "bad test JSON: %s\n", err);
        exit(2);
    }
    return v;
}


/* Renders src with messages (JSON) and kwargs (JSON or NULL); returns the
 * output or "ERROR: <message>", malloc'd. */
static char *
render(const char *src, const char *messages, const char *tools, int agp,
    const char *kwargs)
{
    char                err[LLM_ERR_LEN], *out, *r;
    size_t              len;
    llm_chat_template  *t;
    yajl_val            m, tl = NULL, kw = NULL;

    t = llm_chat_template_parse(src, strlen(src), "<s>", "</s>", err);
    if (t == NULL) {
        r = malloc(strlen(err) + 16);
        sprintf(r, "ERROR: %s", err);
        return r;
    }
    m = json(messages ? messages : "[]");
    if (tools) {
        tl = json(tools);
    }
    if (kwargs) {
        kw = json(kwargs);
    }
    out = llm_chat_template_render(t, m, tl, NULL, agp, kw, &len, err);
    yajl_tree_free(m);
    yajl_tree_free(tl);
    yajl_tree_free(kw);
    llm_chat_template_free(t);
    if (out == NULL) {
        r = malloc(strlen(err) + 16);
        sprintf(r, "ERROR: %s", err);
        return r;
    }
    if (strlen(out) != len) {
        free(out);
        return strdup("ERROR: length mismatch");
    }
    return out;
}


static void
is_render(const char *src, const char *messages, const char *kwargs,
    const char *want, const char *name)
{
    char  *got = render(src, messages, NULL, 0, kwargs);

    tap_ok(strcmp(got, want) == 0, "%s", name);
    if (strcmp(got, want) != 0) {
        tap_diag("want: %s", want);
        tap_diag("got:  %s", got);
    }
    free(got);
}


static void
starts_with(const char *src, const char *messages, const char *prefix,
    const char *name)
{
    char  *got = render(src, messages, NULL, 0, NULL);

    tap_ok(strncmp(got, prefix, strlen(prefix)) == 0, "%s", name);
    if (strncmp(got, prefix, strlen(prefix)) != 0) {
        tap_diag("want prefix: %s", prefix);
        tap_diag("got:         %s", got);
    }
    free(got);
}


static void
test_float_repr(void)
{
    static const struct { double f; const char *s; } cases[] = {
        { 1.0, "1.0" }, { 0.1, "0.1" }, { 1e16, "1e+16" },
        { 1e15, "1000000000000000.0" }, { 0.0001, "0.0001" },
        { 0.00001, "1e-05" }, { 1.5e-5, "1.5e-05" }, { -0.0, "-0.0" },
        { 123456789.123456789, "123456789.12345679" }, { 1.0 / 3, "0.3333333333333333" },
        { 0.30000000000000004, "0.30000000000000004" }, { 1e22, "1e+22" },
        { 5e-324, "5e-324" }, { 1.7976931348623157e308, "1.7976931348623157e+308" },
        { 2.5, "2.5" }, { 100.0, "100.0" },
    };
    char    buf[64];
    size_t  i;

    for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        llm_pyfloat(buf, cases[i].f);
        tap_ok(strcmp(buf, cases[i].s) == 0, "repr(float) %s", cases[i].s);
        if (strcmp(buf, cases[i].s) != 0) {
            tap_diag("got %s", buf);
        }
    }
}


static void
test_rendering(void)
{
    const char *chat =
        "[{\"role\":\"system\",\"content\":\" Be brief. \"},"
        "{\"role\":\"user\",\"content\":\"Hi \\u00e9 \\ud83e\\udd99\"}]";

    is_render("{% for m in messages %}<|{{ m.role }}|>{{ m.content|trim }}\n"
              "{% endfor %}", chat, NULL,
              "<|system|>Be brief.\n<|user|>Hi \xc3\xa9 \xf0\x9f\xa6\x99\n",
              "loop over messages, trim, trim_blocks");
    is_render("{{ bos_token }}x{{ eos_token }}", "[]", NULL, "<s>x</s>",
              "bos_token and eos_token");
    is_render("{{ messages|tojson }}", chat, NULL,
              "[{\"role\": \"system\", \"content\": \" Be brief. \"}, "
              "{\"role\": \"user\", \"content\": \"Hi \xc3\xa9 \xf0\x9f\xa6\x99\"}]",
              "tojson keeps non-ASCII (ensure_ascii=False) and Python's separators");
    is_render("{{ {'a': [1, {'b': none}]}|tojson(indent=2) }}", "[]", NULL,
              "{\n  \"a\": [\n    1,\n    {\n      \"b\": null\n    }\n  ]\n}",
              "tojson indent");
    is_render("{{ [1, 2.0, 'x', none, true, (1,)] }}|{{ {'k': 'it\\'s'} }}", "[]", NULL,
              "[1, 2.0, 'x', None, True, (1,)]|{'k': \"it's\"}",
              "printing lists and dicts uses Python repr");
    is_render("{{ 7 / 2 }} {{ 7 // 2 }} {{ -7 % 3 }} {{ 2 ** 10 }} {{ 'ab' * 2 }}",
              "[]", NULL, "3.5 3 2 1024 abab", "Python arithmetic");
    is_render("{% if enable_thinking is defined and not enable_thinking %}off"
              "{% else %}on{% endif %}", "[]", "{\"enable_thinking\": false}", "off",
              "kwargs become variables");
    is_render("{{ add_generation_prompt }} {{ tools }} {{ documents }}", "[]", NULL,
              "False None None", "tools and documents default to None");
    is_render("{{ messages[::-1]|map(attribute='role')|join(',') }}", chat, NULL,
              "user,system", "reverse slice, map, join");
    is_render("x\n    {% if true %}\n    A\n    {%- endif %}\ny", "[]", NULL,
              "x\n    Ay", "lstrip_blocks and whitespace control");
    is_render("{% set ns = namespace(n=0) %}{% for m in messages %}"
              "{% set ns.n = ns.n + 1 %}{% endfor %}{{ ns.n }}", chat, NULL, "2",
              "namespace survives the loop scope");
    is_render("{% macro m(a, b='d') %}{{ a }}{{ b }}{% endmacro %}{{ m(1) }}{{ m(2, b=3) }}",
              "[]", NULL, "1d23", "macros with defaults");
    is_render("{{ raise_exception('Roles must alternate') }}", "[]", NULL,
              "ERROR: Roles must alternate", "raise_exception passes its message verbatim");
    is_render("{{ x.y }}", "[]", NULL,
              "ERROR: chat template error (line 1): 'x' is undefined",
              "attribute of an undefined value fails with jinja2's message");
    is_render("a\n{{ 1 +\n 'x' }}", "[]", NULL,
              "ERROR: chat template error (line 2): unsupported operand type(s) for +: "
              "'int' and 'str'", "runtime errors name the line");
    is_render("{{ 'a' }}{% foo %}", "[]", NULL,
              "ERROR: chat template error (line 1): syntax error: encountered "
              "unknown tag 'foo'", "unknown tags are syntax errors");
    is_render("{{ x|nosuchfilter }}", "[]", NULL,
              "ERROR: chat template error (line 1): no filter named 'nosuchfilter'",
              "unknown filters are rejected at parse time");
    is_render("{% if false %}{{ x|nosuchfilter }}{% endif %}ok", "[]", NULL, "ok",
              "... but only when run inside an if, like jinja2");
    is_render("{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}"
              "{% endfor %}", "[]", NULL,
              "ERROR: chat template error (line 1): the template did not finish within "
              "50000000 steps", "a runaway loop is stopped");
    is_render("{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}", "[]", NULL,
              "ERROR: chat template error (line 1): maximum recursion depth exceeded "
              "in macro 'f'", "unbounded recursion is stopped");
    is_render("{{ range(100001)|length }}", "[]", NULL,
              "ERROR: chat template error (line 1): Range too big. The sandbox blocks "
              "ranges larger than MAX_RANGE (100000).", "sandbox range limit");
    is_render("{{ [].append(1) }}", "[]", NULL,
              "ERROR: chat template error (line 1): access to attribute 'append' of "
              "'list' object is unsafe.", "the immutable sandbox refuses list.append");
    starts_with("{{ messages }}", "[]", "[]", "empty messages");
    is_render("{{ messages }}", "[]", "{\"messages\": 1}",
              "ERROR: chat template kwargs may not set 'messages'",
              "kwargs cannot replace messages");
    is_render("{{ x }}", "{}", NULL, "ERROR: messages must be a JSON array",
              "messages must be an array");
}


static void
test_strftime(void)
{
    setenv("LLM_TEMPLATE_DATE", "2024-07-26", 1);
    is_render("{{ strftime_now('%Y-%m-%d|%d %b %Y|%A|%B %d, %Y|%H:%M') }}", "[]", NULL,
              "2024-07-26|26 Jul 2024|Friday|July 26, 2024|00:00",
              "strftime_now with LLM_TEMPLATE_DATE");
    setenv("LLM_TEMPLATE_DATE", "2025-01-02 13:14:15", 1);
    is_render("{{ strftime_now('%d %b %Y %H:%M:%S') }}", "[]", NULL,
              "02 Jan 2025 13:14:15", "LLM_TEMPLATE_DATE with a time");
    setenv("LLM_TEMPLATE_DATE", "tomorrow", 1);
    is_render("{{ strftime_now('%Y') }}", "[]", NULL,
              "ERROR: chat template error (line 1): LLM_TEMPLATE_DATE must look like "
              "2024-07-26, not 'tomorrow'", "a bad LLM_TEMPLATE_DATE is reported");
    unsetenv("LLM_TEMPLATE_DATE");
}


static void
write_file(const char *dir, const char *name, const char *text)
{
    char   path[512];
    FILE  *f;

    snprintf(path, sizeof(path), "%s/%s", dir, name);
    f = fopen(path, "w");
    if (f == NULL) {
        perror(path);
        exit(2);
    }
    fputs(text, f);
    fclose(f);
}


static void
test_load(void)
{
    char                dir[] = "/tmp/llm_jinja_test_XXXXXX", err[LLM_ERR_LEN];
    char                path[512], *out;
    llm_chat_template  *t;
    yajl_val            m = json("[{\"role\":\"user\",\"content\":\"hi\"}]");
    yajl_val            tools = json("[{\"type\":\"function\"}]"), kw;
    size_t              len;

    if (mkdtemp(dir) == NULL) {
        perror("mkdtemp");
        exit(2);
    }
    write_file(dir, "tokenizer_config.json",
               "{\"bos_token\": {\"__type\": \"AddedToken\", \"content\": \"<B>\"},"
               " \"eos_token\": \"<E>\", \"pad_token\": \"<P>\","
               " \"additional_special_tokens\": [\"<x>\", {\"content\": \"<y>\"}],"
               " \"chat_template\": ["
               "  {\"name\": \"default\", \"template\": \"D{{ bos_token }}{{ pad_token }}"
               "{{ additional_special_tokens }}{{ messages[0].content }}\"},"
               "  {\"name\": \"tool_use\", \"template\": \"T{{ tools|length }}{{ eos_token }}\"}]}");
    t = llm_chat_template_load(dir, err);
    tap_ok(t != NULL, "named templates load (%s)", t ? "ok" : err);
    if (t) {
        out = llm_chat_template_render(t, m, NULL, NULL, 0, NULL, &len, err);
        tap_ok(out && strcmp(out, "D<B><P>['<x>', '<y>']hi") == 0,
               "default template without tools, special tokens as HF passes them");
        free(out);
        out = llm_chat_template_render(t, m, tools, NULL, 0, NULL, &len, err);
        tap_ok(out && strcmp(out, "T1<E>") == 0, "tool_use template with tools");
        free(out);
        kw = json("{\"bos_token\": \"<override>\"}");
        out = llm_chat_template_render(t, m, NULL, NULL, 0, kw, &len, err);
        tap_ok(out && strcmp(out, "D<override><P>['<x>', '<y>']hi") == 0,
               "kwargs override special tokens, as in transformers");
        free(out);
        yajl_tree_free(kw);
        llm_chat_template_free(t);
    }

    write_file(dir, "chat_template.jinja", "J{{ eos_token }}\n");
    t = llm_chat_template_load(dir, err);
    out = t ? llm_chat_template_render(t, m, tools, NULL, 0, NULL, &len, err) : NULL;
    tap_ok(out && strcmp(out, "J<E>") == 0,
           "chat_template.jinja wins over tokenizer_config.json");
    free(out);
    llm_chat_template_free(t);

    write_file(dir, "chat_template.jinja", "{% if %}");
    t = llm_chat_template_load(dir, err);
    tap_ok(t == NULL && strstr(err, "chat_template.jinja") && strstr(err, "line 1"),
           "a broken template names the file and the line: %s", err);

    snprintf(path, sizeof(path), "%s/chat_template.jinja", dir);
    unlink(path);
    write_file(dir, "tokenizer_config.json", "{\"eos_token\": \"</s>\"}");
    err[0] = 'x';
    t = llm_chat_template_load(dir, err);
    tap_ok(t == NULL && err[0] == '\0', "no template: NULL with an empty message");

    write_file(dir, "tokenizer_config.json", "{\"chat_template\": ");
    t = llm_chat_template_load(dir, err);
    tap_ok(t == NULL && strstr(err, "tokenizer_config.json") != NULL,
           "invalid JSON is reported: %s", err);

    t = llm_chat_template_parse("\xff{{ x }}", 8, NULL, NULL, err);
    tap_ok(t == NULL && strstr(err, "UTF-8") != NULL, "invalid UTF-8 is refused");

    snprintf(path, sizeof(path), "%s/tokenizer_config.json", dir);
    unlink(path);
    rmdir(dir);
    yajl_tree_free(m);
    yajl_tree_free(tools);
}


/* messages with one tool call whose arguments are an array n deep
 * (malloc'd) */
static char *
deep_arguments(int n)
{
    static const char  head[] = "[{\"role\":\"assistant\",\"tool_calls\":["
                                "{\"function\":{\"name\":\"f\",\"arguments\":\"";
    static const char  tail[] = "\"}}]}]";
    char               *text, *p;

    text = malloc(sizeof(head) + 2 * (size_t) n + sizeof(tail));
    p = text + sprintf(text, "%s", head);
    memset(p, '[', (size_t) n);
    memset(p + n, ']', (size_t) n);
    strcpy(p + 2 * n, tail);
    return text;
}


static void
test_tool_arguments(void)
{
    const char  *src = "{% for m in messages %}{% for c in m.tool_calls|default([]) %}"
                       "{{ c.function.arguments|tojson }};{% endfor %}{% endfor %}";
    const char  *msgs = "[{\"role\":\"assistant\",\"tool_calls\":["
        "{\"function\":{\"name\":\"f\",\"arguments\":\"{\\\"a\\\": [1, \\\"\\u00e9\\\"]}\"}},"
        "{\"function\":{\"name\":\"g\",\"arguments\":\"\"}},"
        "{\"function\":{\"name\":\"h\",\"arguments\":{\"b\":2}}}]},"
        "{\"role\":\"user\",\"tool_calls\":[{\"function\":{\"arguments\":\"{}\"}}]}]";
    char                err[LLM_ERR_LEN], *out, *text;
    size_t              len;
    int                 i, depth;
    llm_chat_template  *t = llm_chat_template_parse(src, strlen(src), NULL, NULL, err);
    yajl_val            m = json(msgs), bad;

    out = llm_chat_template_render_flags(t, m, NULL, NULL, 0, NULL, 0, &len, err);
    tap_ok(out && strcmp(out, "\"{\\\"a\\\": [1, \\\"\xc3\xa9\\\"]}\";\"\";{\"b\": 2};\"{}\";") == 0,
           "without the flag, string arguments stay strings: %s", out ? out : err);
    free(out);
    out = llm_chat_template_render_flags(t, m, NULL, NULL, 0, NULL,
                                         LLM_CHAT_TOOL_ARGS_JSON, &len, err);
    tap_ok(out && strcmp(out, "{\"a\": [1, \"\xc3\xa9\"]};{};{\"b\": 2};\"{}\";") == 0,
           "LLM_CHAT_TOOL_ARGS_JSON parses assistant tool-call arguments like vLLM: %s",
           out ? out : err);
    free(out);
    bad = json("[{\"role\":\"assistant\",\"tool_calls\":[{\"function\":"
               "{\"arguments\":\"{oops\"}}]}]");
    out = llm_chat_template_render_flags(t, bad, NULL, NULL, 0, NULL,
                                         LLM_CHAT_TOOL_ARGS_JSON, &len, err);
    tap_ok(out == NULL && strstr(err, "messages[0].tool_calls[0].function.arguments") != NULL,
           "arguments that are not JSON are an error: %s", err);
    yajl_tree_free(bad);
    for (i = 0; i < 3; i++) {
        depth = i == 2 ? 300000 : LLM_JSON_MAX_DEPTH + i;
        text = deep_arguments(depth);
        bad = json(text);
        out = llm_chat_template_render_flags(t, bad, NULL, NULL, 0, NULL,
                                             LLM_CHAT_TOOL_ARGS_JSON, &len, err);
        tap_ok(i == 0 ? out != NULL
                      : out == NULL && strstr(err, "is not valid JSON") != NULL,
               "arguments nested %d deep: %s", depth,
               i == 0 ? "parsed" : "refused as a request body is, no stack overflow");
        free(out);
        free(text);
        yajl_tree_free(bad);
    }
    yajl_tree_free(m);
    llm_chat_template_free(t);
}


/* The nginx module renders on a thread pool: one template, many threads. */
typedef struct {
    llm_chat_template  *t;
    yajl_val            m;
    const char         *want;
    int                 ok;
} thread_arg;


static void *
render_thread(void *p)
{
    thread_arg  *a = p;
    char         err[LLM_ERR_LEN], *out;
    size_t       len;
    int          i;

    a->ok = 1;
    for (i = 0; i < 300; i++) {
        out = llm_chat_template_render(a->t, a->m, NULL, NULL, 1, NULL, &len, err);
        if (out == NULL || strcmp(out, a->want) != 0) {
            a->ok = 0;
        }
        free(out);
    }
    return NULL;
}


static void
test_threads(void)
{
    const char  *src = "{% for m in messages %}{{ m.role|upper }}:{{ m.content|tojson }}"
                       "{% endfor %}{% if add_generation_prompt %}>{% endif %}";
    char         err[LLM_ERR_LEN];
    pthread_t    th[4];
    thread_arg   a[4];
    int          i, all = 1;
    llm_chat_template  *t = llm_chat_template_parse(src, strlen(src), NULL, NULL, err);
    yajl_val     m = json("[{\"role\":\"user\",\"content\":[1,{\"k\":\"\\u00e9\"}]}]");

    for (i = 0; i < 4; i++) {
        a[i].t = t;
        a[i].m = m;
        a[i].want = "USER:[1, {\"k\": \"\xc3\xa9\"}]>";
        pthread_create(&th[i], NULL, render_thread, &a[i]);
    }
    for (i = 0; i < 4; i++) {
        pthread_join(th[i], NULL);
        all &= a[i].ok;
    }
    tap_ok(all, "4 threads render one template 300 times each, identically");
    llm_chat_template_free(t);
    yajl_tree_free(m);
}


int
main(void)
{
    test_float_repr();
    test_rendering();
    test_strftime();
    test_load();
    test_tool_arguments();
    test_threads();
    return tap_done();
}
