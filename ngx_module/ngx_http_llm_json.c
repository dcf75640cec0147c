
/*
 * ngx_http_llm_json.c -- JSON writer and yajl tree helpers.
 */


#include <ngx_config.h>
#include <ngx_core.h>

#include <math.h>
#include <llm.h>

#include "ngx_http_llm_json.h"


static ngx_uint_t ngx_http_llm_json_grow(ngx_http_llm_json_t *j, size_t need);


void
ngx_http_llm_json_init(ngx_http_llm_json_t *j, ngx_pool_t *pool, size_t size)
{
    j->pool = pool;
    j->failed = 0;
    j->start = ngx_pnalloc(pool, size);

    if (j->start == NULL) {
        j->failed = 1;
        j->pos = NULL;
        j->end = NULL;
        return;
    }

    j->pos = j->start;
    j->end = j->start + size;
}


/* empties a buffer for reuse */

void
ngx_http_llm_json_reset(ngx_http_llm_json_t *j)
{
    j->pos = j->start;
    j->failed = (j->start == NULL);
}


static ngx_uint_t
ngx_http_llm_json_grow(ngx_http_llm_json_t *j, size_t need)
{
    u_char  *p;
    size_t   size, used;

    if (j->failed) {
        return 0;
    }

    if ((size_t) (j->end - j->pos) >= need) {
        return 1;
    }

    /* doubling keeps a body of n bytes at O(n) copying in total */
    used = j->pos - j->start;
    size = ngx_max((size_t) (j->end - j->start) * 2, used + need);

    p = ngx_pnalloc(j->pool, size);
    if (p == NULL) {
        j->failed = 1;
        return 0;
    }

    ngx_memcpy(p, j->start, used);
    ngx_pfree(j->pool, j->start);

    j->start = p;
    j->pos = p + used;
    j->end = p + size;

    return 1;
}


void
ngx_http_llm_json_raw(ngx_http_llm_json_t *j, const void *s, size_t len)
{
    if (ngx_http_llm_json_grow(j, len)) {
        j->pos = ngx_cpymem(j->pos, s, len);
    }
}


/*
 * A JSON string.  What the server writes is valid UTF-8 whatever it is
 * given: request bodies are strict UTF-8 already (llm_json_parse), the
 * engine's text is too; bytes from elsewhere (the URI, a configured path,
 * a message cut at its buffer's end) are repaired, every ill-formed
 * sequence becoming U+FFFD as Python's decode(errors="replace") does.
 */

void
ngx_http_llm_json_str(ngx_http_llm_json_t *j, const u_char *s, size_t len)
{
    u_char       c, *p, *fixed;
    const u_char *last;

    static u_char  hex[] = "0123456789abcdef";

    if (!llm_utf8_valid((const char *) s, len)) {
        fixed = ngx_pnalloc(j->pool, len * 3);
        if (fixed == NULL) {
            j->failed = 1;
            return;
        }

        len = llm_utf8_repair((const char *) s, len, (char *) fixed);
        s = fixed;
    }

    /* the worst case: every byte becomes \u00XX */
    if (!ngx_http_llm_json_grow(j, len * 6 + 2)) {
        return;
    }

    p = j->pos;
    *p++ = '"';

    for (last = s + len; s < last; s++) {
        c = *s;

        if (c >= 0x20 && c != '"' && c != '\\') {
            *p++ = c;
            continue;
        }

        *p++ = '\\';

        switch (c) {
        case '"':
            *p++ = '"';
            break;
        case '\\':
            *p++ = '\\';
            break;
        case '\n':
            *p++ = 'n';
            break;
        case '\r':
            *p++ = 'r';
            break;
        case '\t':
            *p++ = 't';
            break;
        case '\b':
            *p++ = 'b';
            break;
        case '\f':
            *p++ = 'f';
            break;
        default:
            *p++ = 'u';
            *p++ = '0';
            *p++ = '0';
            *p++ = hex[c >> 4];
            *p++ = hex[c & 0xf];
        }
    }

    *p++ = '"';
    j->pos = p;
}


void
ngx_http_llm_json_int(ngx_http_llm_json_t *j, int64_t v)
{
    if (ngx_http_llm_json_grow(j, NGX_INT64_LEN)) {
        j->pos = ngx_sprintf(j->pos, "%L", v);
    }
}


/* Python's repr() of a float; non-finite values have no JSON form: null */

void
ngx_http_llm_json_double(ngx_http_llm_json_t *j, double v)
{
    if (!isfinite(v)) {
        ngx_http_llm_json_lit(j, "null");
        return;
    }

    if (ngx_http_llm_json_grow(j, NGX_HTTP_LLM_FLOAT_LEN)) {
        j->pos += ngx_strlen(llm_pyfloat((char *) j->pos, v));
    }
}


const char *
ngx_http_llm_json_type(yajl_val v)
{
    if (v == NULL || YAJL_IS_NULL(v)) {
        return "null";
    }

    if (YAJL_IS_STRING(v)) {
        return "a string";
    }

    if (YAJL_IS_NUMBER(v)) {
        return "a number";
    }

    if (YAJL_IS_OBJECT(v)) {
        return "an object";
    }

    if (YAJL_IS_ARRAY(v)) {
        return "an array";
    }

    return "a boolean";
}


static const char *
ngx_http_llm_json_part_text(yajl_val part, const char **types,
    ngx_uint_t bare_strings)
{
    yajl_val  type, text;

    if (YAJL_IS_STRING(part)) {
        return bare_strings ? part->u.string : NULL;
    }

    type = llm_json_get(part, "type");
    text = llm_json_get(part, "text");

    if (!YAJL_IS_STRING(type) || !YAJL_IS_STRING(text)) {
        return NULL;
    }

    for ( /* void */ ; *types; types++) {
        if (ngx_strcmp(type->u.string, *types) == 0) {
            return text->u.string;
        }
    }

    return NULL;
}


ngx_int_t
ngx_http_llm_json_join_text(yajl_val parts, const char **types,
    ngx_uint_t bare_strings, ngx_pool_t *pool, ngx_str_t *text, size_t *bad)
{
    u_char      *p;
    size_t       i, n;
    const char  *t;

    n = 0;

    for (i = 0; i < parts->u.array.len; i++) {
        t = ngx_http_llm_json_part_text(parts->u.array.values[i], types,
                                        bare_strings);
        if (t == NULL) {
            *bad = i;
            return NGX_DECLINED;
        }

        n += ngx_strlen(t) + 1;
    }

    text->data = ngx_pnalloc(pool, n + 1);
    if (text->data == NULL) {
        return NGX_ERROR;
    }

    p = text->data;

    for (i = 0; i < parts->u.array.len; i++) {
        t = ngx_http_llm_json_part_text(parts->u.array.values[i], types,
                                        bare_strings);
        if (i) {
            *p++ = '\n';
        }

        p = ngx_cpymem(p, t, ngx_strlen(t));
    }

    *p = '\0';
    text->len = p - text->data;

    return NGX_OK;
}


/* the tree's strings are valid UTF-8: every byte but a continuation byte
 * starts a character */

size_t
ngx_http_llm_json_chars(const char *s)
{
    size_t  n;

    for (n = 0; *s; s++) {
        n += ((u_char) *s & 0xc0) != 0x80;
    }

    return n;
}


/* where llm_json_get(obj, key) is in obj: its value can be replaced */

yajl_val *
ngx_http_llm_json_slot(yajl_val obj, const char *key)
{
    size_t    k;
    yajl_val  v;

    v = llm_json_get(obj, key);

    for (k = 0; v != NULL && k < obj->u.object.len; k++) {
        if (obj->u.object.values[k] == v) {
            return &obj->u.object.values[k];
        }
    }

    return NULL;
}


ngx_int_t
ngx_http_llm_json_order(yajl_val obj, const char **keys,
    const char **defaults)
{
    u_char       *drop;
    size_t        i, k, n, len, nkeys;
    yajl_val      v, *values, found[8], added[8];
    const char  **names, *added_names[8];

    len = obj->u.object.len;

    /* the nodes for missing keys first: on failure obj is untouched */

    n = 0;

    for (nkeys = 0; keys[nkeys] && nkeys < 8; nkeys++) {
        added[nkeys] = NULL;
        added_names[nkeys] = NULL;
        found[nkeys] = llm_json_get(obj, keys[nkeys]);

        if (found[nkeys]) {
            continue;
        }

        v = calloc(1, sizeof(struct yajl_val_s));
        added[nkeys] = v;
        added_names[nkeys] = strdup(keys[nkeys]);

        if (v == NULL || added_names[nkeys] == NULL) {
            nkeys++;
            goto failed;
        }

        v->type = yajl_t_null;

        if (defaults[nkeys]) {
            v->type = yajl_t_string;
            v->u.string = strdup(defaults[nkeys]);

            if (v->u.string == NULL) {
                v->type = yajl_t_null;
                nkeys++;
                goto failed;
            }
        }

        n++;
    }

    names = malloc((len + n) * sizeof(char *));
    values = malloc((len + n) * sizeof(yajl_val));
    drop = calloc(len ? len : 1, 1);

    if (names == NULL || values == NULL || drop == NULL) {
        free((void *) names);
        free(values);
        free(drop);
        goto failed;
    }

    /* every member of a moved key leaves its place: the one that counts
     * goes to the front, earlier duplicates go away */

    for (k = 0; k < len; k++) {
        for (i = 0; i < nkeys; i++) {
            if (ngx_strcmp(obj->u.object.keys[k], keys[i]) == 0) {
                drop[k] = 1;
            }
        }
    }

    n = 0;

    for (i = 0; i < nkeys; i++) {
        if (added[i]) {
            names[n] = added_names[i];
            values[n++] = added[i];
            continue;
        }

        for (k = 0; obj->u.object.values[k] != found[i]; k++) {
            /* void */
        }

        names[n] = obj->u.object.keys[k];
        values[n++] = found[i];
        drop[k] = 2;
    }

    for (k = 0; k < len; k++) {
        if (drop[k] == 0) {
            names[n] = obj->u.object.keys[k];
            values[n++] = obj->u.object.values[k];

        } else if (drop[k] == 1) {
            free((void *) obj->u.object.keys[k]);
            llm_json_free(obj->u.object.values[k]);
        }
    }

    free(drop);
    free((void *) obj->u.object.keys);
    free(obj->u.object.values);

    obj->u.object.keys = names;
    obj->u.object.values = values;
    obj->u.object.len = n;

    return NGX_OK;

failed:

    for (i = 0; i < nkeys; i++) {
        if (added[i]) {
            llm_json_free(added[i]);
        }

        free((void *) added_names[i]);
    }

    return NGX_ERROR;
}
