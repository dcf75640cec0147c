
/*
 * ngx_http_llm_tools_grammar.c -- tool_choice "required" and a named
 * function as vLLM enforces them, for any model and without a tool-call
 * parser: the output is constrained by a JSON Schema built from the tools
 * (engine/grammar), and read back by the engine's NAMED and JSON_ARRAY
 * parsers.
 *
 *   named       the function's parameters schema: the output is the
 *               arguments, {"city": "Paris"}
 *   "required"  an array of at least one call (one when
 *               parallel_tool_calls is false):
 *               [{"name": "f", "parameters": {...}}, ...], each item one
 *               of the tools, {"name": {"const": "f"}, "parameters": P}
 *
 * A tool without parameters takes {} (vLLM's default).  The tools' $defs
 * (and draft 7's definitions) move to the array schema's root, where the
 * tools' "#/$defs/..." references resolve; two tools that define one name
 * differently are a 400, as in vLLM.  docs/api.md, "Tool calls".
 */


#include "ngx_http_llm_module.h"


#define NGX_HTTP_LLM_NO_PARAMETERS  "{\"type\":\"object\",\"properties\":{}}"


typedef struct {
    u_char      *data;
    size_t       len;
    size_t       cap;
    ngx_uint_t   failed;
} ngx_http_llm_text_t;

/* a definition moved to the root: its section, name and schema's text */
typedef struct {
    const char  *section;
    const char  *name;
    char        *text;
    size_t       len;
} ngx_http_llm_def_t;


static const char  *ngx_http_llm_def_sections[] = { "$defs", "definitions" };


#define ngx_http_llm_text_lit(t, s)                                          \
    ngx_http_llm_text_add(t, s, sizeof(s) - 1)


static void ngx_http_llm_text_add(ngx_http_llm_text_t *t, const void *s,
    size_t len);
static void ngx_http_llm_text_json(ngx_http_llm_text_t *t, yajl_val v);
static ngx_int_t ngx_http_llm_tools_defs(ngx_http_llm_job_t *job,
    yajl_val tools, ngx_array_t *defs);
static void ngx_http_llm_tools_defs_free(ngx_array_t *defs);


ngx_int_t
ngx_http_llm_tools_grammar(ngx_http_llm_job_t *job, yajl_val tools,
    const char *named, ngx_uint_t parallel)
{
    char                 *spec;
    size_t                i, k;
    yajl_val              fn, name, params;
    ngx_array_t           defs;
    ngx_uint_t            first;
    ngx_http_llm_def_t   *d;
    ngx_http_llm_text_t   t;

    ngx_memzero(&t, sizeof(ngx_http_llm_text_t));

    if (named) {
        params = NULL;

        /* the first tool of that name: vLLM's */
        for (i = 0; i < tools->u.array.len; i++) {
            fn = llm_json_get(tools->u.array.values[i], "function");
            name = llm_json_get(fn, "name");

            if (ngx_strcmp(name->u.string, named) == 0) {
                params = llm_json_get(fn, "parameters");
                break;
            }
        }

        if (params && !YAJL_IS_NULL(params)) {
            ngx_http_llm_text_json(&t, params);

        } else {
            ngx_http_llm_text_add(&t, NGX_HTTP_LLM_NO_PARAMETERS,
                                  sizeof(NGX_HTTP_LLM_NO_PARAMETERS) - 1);
        }

        goto done;
    }

    if (ngx_array_init(&defs, job->pool, 4, sizeof(ngx_http_llm_def_t))
        != NGX_OK)
    {
        ngx_http_llm_job_nomem(job);
        return NGX_ERROR;
    }

    if (ngx_http_llm_tools_defs(job, tools, &defs) != NGX_OK) {
        ngx_http_llm_tools_defs_free(&defs);
        return NGX_ERROR;
    }

    ngx_http_llm_text_lit(&t, "{\"type\":\"array\",\"minItems\":1,");

    if (!parallel) {
        ngx_http_llm_text_lit(&t, "\"maxItems\":1,");
    }

    ngx_http_llm_text_lit(&t, "\"items\":{\"anyOf\":[");

    for (i = 0; i < tools->u.array.len; i++) {
        fn = llm_json_get(tools->u.array.values[i], "function");
        params = llm_json_get(fn, "parameters");

        ngx_http_llm_text_add(&t, i ? "," : "", i ? 1 : 0);
        ngx_http_llm_text_lit(&t, "{\"type\":\"object\",\"properties\":"
                              "{\"name\":{\"const\":");
        ngx_http_llm_text_json(&t, llm_json_get(fn, "name"));
        ngx_http_llm_text_lit(&t, "},\"parameters\":");

        if (params && !YAJL_IS_NULL(params)) {
            ngx_http_llm_text_json(&t, params);

        } else {
            ngx_http_llm_text_add(&t, NGX_HTTP_LLM_NO_PARAMETERS,
                                  sizeof(NGX_HTTP_LLM_NO_PARAMETERS) - 1);
        }

        ngx_http_llm_text_lit(&t, "},\"required\":[\"name\",\"parameters\"],"
                              "\"additionalProperties\":false}");
    }

    ngx_http_llm_text_lit(&t, "]}");

    /* the definitions, a section at a time */

    d = defs.elts;

    for (k = 0; k < 2; k++) {
        first = 1;

        for (i = 0; i < defs.nelts; i++) {
            if (d[i].section != ngx_http_llm_def_sections[k]) {
                continue;
            }

            ngx_http_llm_text_lit(&t, ",\"");

            if (first) {
                ngx_http_llm_text_add(&t, d[i].section,
                                      ngx_strlen(d[i].section));
                ngx_http_llm_text_lit(&t, "\":{\"");
            }

            first = 0;
            ngx_http_llm_text_add(&t, d[i].name, ngx_strlen(d[i].name));
            ngx_http_llm_text_lit(&t, "\":");
            ngx_http_llm_text_add(&t, d[i].text, d[i].len);
        }

        if (!first) {
            ngx_http_llm_text_lit(&t, "}");
        }
    }

    ngx_http_llm_text_lit(&t, "}");
    ngx_http_llm_tools_defs_free(&defs);

done:

    if (t.failed) {
        free(t.data);
        ngx_http_llm_job_nomem(job);
        return NGX_ERROR;
    }

    spec = llm_structured_spec("schema", (char *) t.data, t.len);
    free(t.data);

    return ngx_http_llm_job_spec(job, spec, "tools",
                                 named ? "the named tool's parameters"
                                       : "the tools' parameters");
}


/*
 * The tools' $defs and definitions, each name once.  A definition's name
 * is a key of the request (yajl's string, valid as the request is); it is
 * written back as it came, an escape-free key being the only kind a
 * "#/$defs/NAME" reference can reach without its own escapes: others are
 * refused.
 */

static ngx_int_t
ngx_http_llm_tools_defs(ngx_http_llm_job_t *job, yajl_val tools,
    ngx_array_t *defs)
{
    char                *text;
    size_t               i, j, k, len;
    yajl_val             params, section;
    const char          *key;
    ngx_http_llm_def_t  *d, *all;

    for (i = 0; i < tools->u.array.len; i++) {
        params = llm_json_get(llm_json_get(tools->u.array.values[i],
                                           "function"), "parameters");

        for (k = 0; k < 2; k++) {
            section = llm_json_get(params, ngx_http_llm_def_sections[k]);

            if (section == NULL || !YAJL_IS_OBJECT(section)) {
                continue;
            }

            for (j = 0; j < section->u.object.len; j++) {
                key = section->u.object.keys[j];

                if (strpbrk(key, "\"\\/~") || key[0] == '\0') {
                    ngx_http_llm_job_error(job, NGX_HTTP_BAD_REQUEST, "tools",
                                           "tools[%uz]: the definition name "
                                           "'%s' is not supported with "
                                           "`tool_choice` \"required\"",
                                           i, key);
                    return NGX_ERROR;
                }

                text = llm_json_dump(section->u.object.values[j], &len);

                all = defs->elts;

                for (d = all; d < all + defs->nelts; d++) {
                    if (d->section == ngx_http_llm_def_sections[k]
                        && ngx_strcmp(d->name, key) == 0)
                    {
                        break;
                    }
                }

                if (d < all + defs->nelts) {
                    if (d->len == len && ngx_memcmp(d->text, text, len) == 0) {
                        free(text);
                        continue;
                    }

                    free(text);
                    ngx_http_llm_job_error(job, NGX_HTTP_BAD_REQUEST, "tools",
                                           "Tool definition '%s' has "
                                           "multiple schemas, which is not "
                                           "supported.", key);
                    return NGX_ERROR;
                }

                d = ngx_array_push(defs);
                if (d == NULL) {
                    free(text);
                    ngx_http_llm_job_nomem(job);
                    return NGX_ERROR;
                }

                d->section = ngx_http_llm_def_sections[k];
                d->name = key;
                d->text = text;
                d->len = len;
            }
        }
    }

    return NGX_OK;
}


static void
ngx_http_llm_tools_defs_free(ngx_array_t *defs)
{
    ngx_uint_t           i;
    ngx_http_llm_def_t  *d = defs->elts;

    for (i = 0; i < defs->nelts; i++) {
        free(d[i].text);
    }

    defs->nelts = 0;
}


static void
ngx_http_llm_text_add(ngx_http_llm_text_t *t, const void *s, size_t len)
{
    u_char  *p;
    size_t   cap;

    if (t->failed || len == 0) {
        return;
    }

    if (t->len + len > t->cap) {
        cap = t->cap ? t->cap : 256;

        while (cap < t->len + len) {
            cap *= 2;
        }

        p = realloc(t->data, cap);
        if (p == NULL) {
            t->failed = 1;
            return;
        }

        t->data = p;
        t->cap = cap;
    }

    ngx_memcpy(t->data + t->len, s, len);
    t->len += len;
}


/* a tree as compact JSON text */

static void
ngx_http_llm_text_json(ngx_http_llm_text_t *t, yajl_val v)
{
    char    *s;
    size_t   len;

    s = llm_json_dump(v, &len);
    ngx_http_llm_text_add(t, s, len);
    free(s);
}
