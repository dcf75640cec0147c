
/*
 * ngx_http_llm_json.h -- a small JSON writer over a growing pool buffer, and
 * helpers for yajl trees.
 *
 * The writer produces what Python's json.dumps(..., separators=(",", ":"),
 * ensure_ascii=False) and pydantic produce, so bodies match vLLM's byte for
 * byte where the values do: compact, raw UTF-8 (ill-formed bytes become
 * U+FFFD), floats as Python's repr() writes them (llm_pyfloat()).  Calls
 * after an allocation failure do nothing; check j->failed once at the end.
 * Lookups in the trees are llm_json_get()'s (llm.h): a key given twice
 * counts with its last value.
 */


#ifndef _NGX_HTTP_LLM_JSON_H_INCLUDED_
#define _NGX_HTTP_LLM_JSON_H_INCLUDED_


#include <ngx_config.h>
#include <ngx_core.h>

#include <yajl/yajl_tree.h>


/* room for a float: llm_pyfloat()'s buffer */
#define NGX_HTTP_LLM_FLOAT_LEN  32


typedef struct {
    u_char       *start;
    u_char       *pos;
    u_char       *end;
    ngx_pool_t   *pool;
    ngx_uint_t    failed;
} ngx_http_llm_json_t;


void ngx_http_llm_json_init(ngx_http_llm_json_t *j, ngx_pool_t *pool,
    size_t size);
void ngx_http_llm_json_reset(ngx_http_llm_json_t *j);
void ngx_http_llm_json_raw(ngx_http_llm_json_t *j, const void *s, size_t len);
void ngx_http_llm_json_str(ngx_http_llm_json_t *j, const u_char *s,
    size_t len);
void ngx_http_llm_json_int(ngx_http_llm_json_t *j, int64_t v);
void ngx_http_llm_json_double(ngx_http_llm_json_t *j, double v);

#define ngx_http_llm_json_lit(j, s)                                          \
    ngx_http_llm_json_raw(j, s, sizeof(s) - 1)
#define ngx_http_llm_json_cstr(j, s)                                         \
    ngx_http_llm_json_str(j, (const u_char *) (s), ngx_strlen(s))

/* the JSON type of a value, for messages: "a string", "null" ... */
const char *ngx_http_llm_json_type(yajl_val v);

/* the length of a string of a tree in characters, as Python's len() */
size_t ngx_http_llm_json_chars(const char *s);

/* where llm_json_get(obj, key)'s value is in obj, or NULL */
yajl_val *ngx_http_llm_json_slot(yajl_val obj, const char *key);

/* the "text" of content parts joined with "\n", NUL-terminated in the pool
 * (vLLM's flattening for templates that expect string content); a part is an
 * object of one of the NULL-terminated types with a string "text", or with
 * bare_strings a plain string; NGX_DECLINED names the first other part in
 * *bad, NGX_ERROR is out of memory */
ngx_int_t ngx_http_llm_json_join_text(yajl_val parts, const char **types,
    ngx_uint_t bare_strings, ngx_pool_t *pool, ngx_str_t *text, size_t *bad);

/* moves keys[] to the front of obj, in order, each once with the value
 * llm_json_get() finds (earlier duplicates go, as from a Python dict); a
 * missing key is added with the string defaults[i], or null when that is
 * NULL (malloc: yajl's own allocator, so llm_json_free() releases what is
 * added) */
ngx_int_t ngx_http_llm_json_order(yajl_val obj, const char **keys,
    const char **defaults);


#endif /* _NGX_HTTP_LLM_JSON_H_INCLUDED_ */
