
/*
 * ngx_http_llm_json.c -- JSON writer and yajl tree lookups.
 */


#include <ngx_config.h>
#include <ngx_core.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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


void
ngx_http_llm_json_str(ngx_http_llm_json_t *j, const u_char *s, size_t len)
{
    u_char       c, *p;
    const u_char *last;

    static u_char  hex[] = "0123456789abcdef";

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


void
ngx_http_llm_json_double(ngx_http_llm_json_t *j, double v)
{
    if (ngx_http_llm_json_grow(j, NGX_HTTP_LLM_DTOA_LEN)) {
        j->pos += ngx_http_llm_dtoa(j->pos, v);
    }
}


/*
 * Python's repr(float): the shortest digit string that reads back to the
 * same double, written in fixed notation when the decimal exponent is in
 * [-4, 16) ("0.0001", "1234.5", "3.0") and as "1e-05" / "1e+16" otherwise.
 * Non-finite values have no JSON form and become null.
 */

size_t
ngx_http_llm_dtoa(u_char *buf, double v)
{
    int      prec, lo, hi, exp, ndig, i;
    char     tmp[40], digits[20], *p, *e;
    u_char  *b;

    if (!isfinite(v)) {
        return ngx_cpymem(buf, "null", 4) - buf;
    }

    /*
     * The shortest precision that reads back the same.  Reading back is
     * monotonic in the precision (17 digits always do), and measured times
     * mostly need 15 to 17 digits: try 15 first, then 16, else 17; only
     * values that fit in 15 digits search below, by bisection.
     */

    lo = 1;
    hi = 17;
    prec = 15;

    while (lo < hi) {
        snprintf(tmp, sizeof(tmp), "%.*e", prec - 1, v);

        if (strtod(tmp, NULL) == v) {
            hi = prec;

        } else {
            lo = prec + 1;
        }

        prec = (lo >= 15) ? lo : (lo + hi) / 2;
    }

    snprintf(tmp, sizeof(tmp), "%.*e", lo - 1, v);

    /* tmp is "-d.ddde+XX": split it into sign, digits and exponent */
    b = buf;
    p = tmp;

    if (*p == '-') {
        *b++ = '-';
        p++;
    }

    e = strchr(p, 'e');
    exp = atoi(e + 1);

    ndig = 0;
    for ( /* void */ ; p < e; p++) {
        if (*p != '.') {
            digits[ndig++] = *p;
        }
    }

    while (ndig > 1 && digits[ndig - 1] == '0') {
        ndig--;
    }

    if (exp < -4 || exp >= 16) {
        *b++ = (u_char) digits[0];

        if (ndig > 1) {
            *b++ = '.';
            b = ngx_cpymem(b, digits + 1, ndig - 1);
        }

        return ngx_sprintf(b, "e%c%02d", exp < 0 ? '-' : '+',
                           exp < 0 ? -exp : exp) - buf;
    }

    if (exp < 0) {
        *b++ = '0';
        *b++ = '.';

        for (i = -1; i > exp; i--) {
            *b++ = '0';
        }

        return ngx_cpymem(b, digits, ndig) - buf;
    }

    for (i = 0; i <= exp; i++) {
        *b++ = (u_char) (i < ndig ? digits[i] : '0');
    }

    *b++ = '.';

    if (ndig > exp + 1) {
        b = ngx_cpymem(b, digits + exp + 1, ndig - exp - 1);

    } else {
        *b++ = '0';
    }

    return b - buf;
}


yajl_val
ngx_http_llm_json_get(yajl_val obj, const char *key)
{
    size_t  i;

    if (obj == NULL || !YAJL_IS_OBJECT(obj)) {
        return NULL;
    }

    /* the last duplicate wins, as in Python's json */
    for (i = obj->u.object.len; i > 0; i--) {
        if (ngx_strcmp(obj->u.object.keys[i - 1], key) == 0) {
            return obj->u.object.values[i - 1];
        }
    }

    return NULL;
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

    type = ngx_http_llm_json_get(part, "type");
    text = ngx_http_llm_json_get(part, "text");

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
    ngx_uint_t bare_strings, char **text, size_t *len, size_t *bad)
{
    char        *p;
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

    *text = malloc(n + 1);
    if (*text == NULL) {
        return NGX_ERROR;
    }

    p = *text;

    for (i = 0; i < parts->u.array.len; i++) {
        t = ngx_http_llm_json_part_text(parts->u.array.values[i], types,
                                        bare_strings);
        if (i) {
            *p++ = '\n';
        }

        p = (char *) ngx_cpymem(p, t, ngx_strlen(t));
    }

    *p = '\0';
    *len = p - *text;

    return NGX_OK;
}


static yajl_val
ngx_http_llm_json_find(yajl_val obj, const char *key, size_t *index)
{
    size_t  k;

    for (k = 0; k < obj->u.object.len; k++) {
        if (ngx_strcmp(obj->u.object.keys[k], key) == 0) {
            *index = k;
            return obj->u.object.values[k];
        }
    }

    return NULL;
}


ngx_int_t
ngx_http_llm_json_order(yajl_val obj, const char **keys,
    const char **defaults)
{
    u_char       *taken;
    size_t        i, k, n, len, nkeys;
    yajl_val      v, *values, added[8];
    const char  **names, *added_names[8];

    len = obj->u.object.len;
    k = 0;

    /* the nodes for missing keys first: on failure obj is untouched */

    n = 0;

    for (nkeys = 0; keys[nkeys] && nkeys < 8; nkeys++) {
        added[nkeys] = NULL;
        added_names[nkeys] = NULL;

        if (ngx_http_llm_json_find(obj, keys[nkeys], &k)) {
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
    taken = calloc(len ? len : 1, 1);

    if (names == NULL || values == NULL || taken == NULL) {
        free((void *) names);
        free(values);
        free(taken);
        goto failed;
    }

    n = 0;

    for (i = 0; i < nkeys; i++) {
        if (added[i]) {
            names[n] = added_names[i];
            values[n++] = added[i];
            continue;
        }

        values[n] = ngx_http_llm_json_find(obj, keys[i], &k);
        names[n++] = obj->u.object.keys[k];
        taken[k] = 1;
    }

    for (k = 0; k < len; k++) {
        if (!taken[k]) {
            names[n] = obj->u.object.keys[k];
            values[n++] = obj->u.object.values[k];
        }
    }

    free(taken);
    free((void *) obj->u.object.keys);
    free(obj->u.object.values);

    obj->u.object.keys = names;
    obj->u.object.values = values;
    obj->u.object.len = n;

    return NGX_OK;

failed:

    for (i = 0; i < nkeys; i++) {
        if (added[i]) {
            yajl_tree_free(added[i]);
        }

        free((void *) added_names[i]);
    }

    return NGX_ERROR;
}
