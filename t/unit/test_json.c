/*
 * test_json.c -- llm_json_parse() / llm_json_free() (engine/util/json.c):
 * the tree is yajl's, the limits hold, and neither parsing nor freeing
 * recurses (a 300,000-deep tree is built and freed on a 64 KiB stack).
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <yajl/yajl_tree.h>

#include "llm.h"
#include "tap.h"


static yajl_val
parse(const char *s, size_t len, int depth, char *err)
{
    return llm_json_parse(s, len, depth, err);
}


static void
test_tree(void)
{
    static const char  body[] =
        "{\"a\": 1, \"b\": [true, false, null, \"x\\u00e9\"], \"a\": 2.5,"
        " \"n\": -12, \"big\": 99999999999999999999, \"huge\": 1e400}";
    char      err[LLM_ERR_LEN];
    yajl_val  v, a, b;

    v = parse(body, sizeof(body) - 1, 64, err);
    tap_ok(v != NULL && YAJL_IS_OBJECT(v) && v->u.object.len == 6,
           "an object of six members (both \"a\" kept) %s", err);
    if (v == NULL) {
        return;
    }
    a = llm_json_get(v, "a");
    tap_ok(a && YAJL_IS_DOUBLE(a) && !YAJL_IS_INTEGER(a) && a->u.number.d == 2.5,
           "a repeated key: the last one wins");
    b = llm_json_get(v, "b");
    tap_ok(b && YAJL_IS_ARRAY(b) && b->u.array.len == 4
           && YAJL_IS_TRUE(b->u.array.values[0])
           && YAJL_IS_FALSE(b->u.array.values[1])
           && YAJL_IS_NULL(b->u.array.values[2])
           && YAJL_IS_STRING(b->u.array.values[3])
           && strcmp(b->u.array.values[3]->u.string, "x\xc3\xa9") == 0,
           "array elements in order, escapes decoded");
    a = llm_json_get(v, "n");
    tap_ok(a && YAJL_IS_INTEGER(a) && a->u.number.i == -12
           && YAJL_IS_DOUBLE(a), "an integer is also a double, as in yajl");
    a = llm_json_get(v, "big");
    tap_ok(a && !YAJL_IS_INTEGER(a) && YAJL_IS_DOUBLE(a)
           && strcmp(a->u.number.r, "99999999999999999999") == 0,
           "an integer beyond long long: a double, its text kept");
    a = llm_json_get(v, "huge");
    tap_ok(a && YAJL_IS_NUMBER(a) && !YAJL_IS_DOUBLE(a) && !YAJL_IS_INTEGER(a),
           "1e400: a number that is neither (as yajl_tree)");
    tap_ok(llm_json_get(v, "missing") == NULL && llm_json_get(b, "a") == NULL,
           "no such key; not an object");
    llm_json_free(v);
}


static void
test_rejects(void)
{
    static const struct { const char *s; size_t len; const char *what; } bad[] = {
        { "{\"a\":1}\0x", 9, "a NUL byte after the object" },
        { "{\"a\":\"\0\"}", 9, "a NUL byte in a string" },
        { "{\"a\":\"\xc0\xaf\"}", 10, "an overlong encoding" },
        { "{\"a\":\"\xed\xa0\x80\"}", 11, "a surrogate, encoded" },
        { "{\"a\":\"\\ud800\"}", 14, "a lone surrogate, escaped" },
        { "{\"a\":\"\\ud800x\"}", 15, "a high surrogate alone, escaped" },
        { "{\"a\":\"\\udc00\"}", 14, "a low surrogate alone, escaped" },
        { "{\"a\":\"b\\u0000\"}", 15, "\\u0000" },
        { "{\"\xff\":1}", 7, "invalid UTF-8 in a key" },
        { "{\"a\":1} x", 9, "something after the value" },
        { "{\"a\":1 /* c */}", 15, "a comment" },
        { "{\"a\":NaN}", 9, "NaN" },
        { "{\"a\":1,}", 8, "a trailing comma" },
        { "{\"a\":", 5, "a truncated body" },
        { "", 0, "an empty body" },
    };
    char      err[LLM_ERR_LEN];
    yajl_val  v;
    size_t    i;

    for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        v = parse(bad[i].s, bad[i].len, 64, err);
        tap_ok(v == NULL && err[0] != '\0' && strchr(err, '\n') == NULL,
               "rejected with a one-line message: %s (%s)", bad[i].what, err);
        llm_json_free(v);
    }
    v = parse("\"\xf0\x9f\x98\x80 \xe4\xb8\xad\"", 10, 64, err);
    tap_ok(v && YAJL_IS_STRING(v), "4- and 3-byte characters are fine");
    llm_json_free(v);
    v = parse("\"\\ud83d\\ude00 \\\\ud800\"", 22, 64, err);
    tap_ok(v && YAJL_IS_STRING(v)
           && strcmp(v->u.string, "\xf0\x9f\x98\x80 \\ud800") == 0,
           "a surrogate pair; an escaped backslash before 'ud800' %s", err);
    llm_json_free(v);
}


static char *
nested(int depth, size_t *len)
{
    char  *s = malloc(2 * (size_t) depth + 1);

    memset(s, '[', depth);
    memset(s + depth, ']', depth);
    s[2 * depth] = '\0';
    *len = 2 * (size_t) depth;
    return s;
}


static void
test_depth(void)
{
    char      err[LLM_ERR_LEN];
    yajl_val  v;
    size_t    len;
    char     *s;

    s = nested(64, &len);
    v = parse(s, len, 64, err);
    tap_ok(v != NULL, "64 levels at a limit of 64");
    llm_json_free(v);
    free(s);
    s = nested(65, &len);
    v = parse(s, len, 64, err);
    tap_ok(v == NULL && strcmp(err, "the request body is nested deeper than "
                               "64 levels") == 0, "65 levels: %s", err);
    free(s);
    s = malloc(64);
    strcpy(s, "{\"a\":{\"b\":{\"c\":[1]}}}");
    v = parse(s, strlen(s), 3, err);
    tap_ok(v == NULL && strstr(err, "deeper than 3") != NULL,
           "objects count as levels too");
    free(s);
}


/* The deep cases on a thread with a 64 KiB stack: a recursive parse or free
 * would overflow it at a few thousand levels. */
static void *
deep(void *arg)
{
    char      err[LLM_ERR_LEN];
    yajl_val  v;
    size_t    len;
    char     *s = nested(300000, &len);
    int      *ok = arg;

    v = parse(s, len, 64, err);
    ok[0] = v == NULL && strstr(err, "deeper than 64") != NULL;
    v = parse(s, len, 1000000, err);
    ok[1] = v != NULL && YAJL_IS_ARRAY(v);
    llm_json_free(v);
    free(s);
    return NULL;
}


static void
test_no_recursion(void)
{
    pthread_attr_t  a;
    pthread_t       t;
    int             ok[2] = { 0, 0 };

    pthread_attr_init(&a);
    pthread_attr_setstacksize(&a, 64 * 1024);
    tap_ok(pthread_create(&t, &a, deep, ok) == 0, "a thread with 64 KiB");
    pthread_join(t, NULL);
    tap_ok(ok[0], "300,000 levels stop at the limit of 64");
    tap_ok(ok[1], "300,000 levels parsed and freed without recursion");
}


static void
test_frees_yajl_trees(void)
{
    char      err[200];
    yajl_val  v = yajl_tree_parse("{\"a\":[1,{\"b\":\"c\"}],\"d\":2.5}", err,
                                  sizeof(err));

    tap_ok(v != NULL, "yajl_tree_parse()'s tree");
    llm_json_free(v);   /* LeakSanitizer (make asan) checks it all went */
}


int
main(void)
{
    test_tree();
    test_rejects();
    test_depth();
    test_no_recursion();
    test_frees_yajl_trees();
    return tap_done();
}
