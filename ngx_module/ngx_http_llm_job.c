
/*
 * ngx_http_llm_job.c -- the "prepare" job's frame: its pool, the
 * request-level fields the endpoints share (model, stream options, what
 * this server refuses), typed field lookups with vLLM-style messages,
 * prompts from text or token ids, and errors.
 *
 * Except ngx_http_llm_job_create() (the event loop, before the task is
 * posted), this runs in a thread of llm_thread_pool: the job's own pool,
 * no nginx request API.
 */


#include "ngx_http_llm_module.h"

#include <math.h>


/*
 * The job's pool: small ones are common (a short chat is a few hundred
 * token ids); a prompt of thousands of tokens is one large allocation.
 */
#define NGX_HTTP_LLM_JOB_POOL_SIZE  4096


static void ngx_http_llm_job_destroy(void *data);
static ngx_http_llm_prompt_t *ngx_http_llm_job_add_prompt(
    ngx_http_llm_job_t *job, int32_t *ids, int n);
static ngx_int_t ngx_http_llm_parse_stream(ngx_http_llm_job_t *job,
    yajl_val root);
static ngx_int_t ngx_http_llm_parse_unsupported(ngx_http_llm_job_t *job,
    yajl_val root);


/*
 * The event loop: a job for the body of r.  Its pool goes with the
 * request's: the cleanups of r->pool run after the request released its
 * engine requests (ngx_http_llm_handler.c), and r->main->blocked keeps
 * r->pool while the task runs.
 */

ngx_http_llm_job_t *
ngx_http_llm_job_create(ngx_http_request_t *r,
    const ngx_http_llm_route_t *route)
{
    ngx_pool_t                *pool;
    ngx_pool_cleanup_t        *cln;
    ngx_http_llm_job_t        *job;
    ngx_http_llm_worker_t     *w = &ngx_http_llm_worker;
    ngx_http_llm_loc_conf_t   *llcf;
    ngx_http_llm_main_conf_t  *lmcf;

    cln = ngx_pool_cleanup_add(r->pool, 0);
    if (cln == NULL) {
        return NULL;
    }

    /* the thread logs allocation failures to the cycle's log, as the
     * thread pool's own messages */
    pool = ngx_create_pool(NGX_HTTP_LLM_JOB_POOL_SIZE, ngx_cycle->log);
    if (pool == NULL) {
        return NULL;
    }

    cln->handler = ngx_http_llm_job_destroy;
    cln->data = pool;

    job = ngx_pcalloc(pool, sizeof(ngx_http_llm_job_t));
    if (job == NULL) {
        return NULL;
    }

    if (ngx_array_init(&job->prompts, pool, 1, sizeof(ngx_http_llm_prompt_t))
        != NGX_OK)
    {
        return NULL;
    }

    llcf = ngx_http_get_module_loc_conf(r, ngx_http_llm_module);
    lmcf = ngx_http_get_module_main_conf(r, ngx_http_llm_module);

    job->pool = pool;
    job->body = r->request_body ? r->request_body->bufs : NULL;
    job->route = route;
    job->served_model_name = lmcf->served_model_name;
    job->model = w->model;
    job->max_model_len = w->max_model_len;
    job->force_include_usage = llcf->force_include_usage;
    job->tool_parser_conf = lmcf->tool_parser;
    job->reasoning_conf = llcf->reasoning_parser;
    llm_sampling_params_init(&job->sp, w->model);

    /* previous_response_id finds only the owner's responses */
    if (ngx_http_llm_store_owner(r, job->owner) != NGX_OK) {
        return NULL;
    }

    return job;
}


static void
ngx_http_llm_job_destroy(void *data)
{
    ngx_pool_t  *pool = data;

    ngx_destroy_pool(pool);
}


void
ngx_http_llm_job_error(ngx_http_llm_job_t *job, ngx_uint_t status,
    const char *param, const char *fmt, ...)
{
    u_char   *p;
    va_list   args;

    if (job->status) {
        return;     /* the first error is the one reported */
    }

    va_start(args, fmt);
    p = ngx_vslprintf((u_char *) job->err,
                      (u_char *) job->err + sizeof(job->err) - 1, fmt, args);
    va_end(args);

    *p = '\0';

    job->status = status;

    if (param) {
        ngx_cpystrn((u_char *) job->err_param, (u_char *) param,
                    sizeof(job->err_param));
    }
}


void
ngx_http_llm_job_nomem(ngx_http_llm_job_t *job)
{
    ngx_http_llm_job_error(job, NGX_HTTP_INTERNAL_SERVER_ERROR, NULL,
                           "out of memory");
}


/* a NUL-terminated copy in the job's pool */

ngx_int_t
ngx_http_llm_job_copy(ngx_http_llm_job_t *job, const char *s, size_t len,
    ngx_str_t *out)
{
    out->data = ngx_pnalloc(job->pool, len + 1);
    if (out->data == NULL) {
        ngx_http_llm_job_nomem(job);
        return NGX_ERROR;
    }

    ngx_memcpy(out->data, s, len);
    out->data[len] = '\0';
    out->len = len;

    return NGX_OK;
}


static ngx_http_llm_prompt_t *
ngx_http_llm_job_add_prompt(ngx_http_llm_job_t *job, int32_t *ids, int n)
{
    ngx_http_llm_prompt_t  *p;

    p = ngx_array_push(&job->prompts);
    if (p == NULL) {
        ngx_http_llm_job_nomem(job);
        return NULL;
    }

    ngx_memzero(p, sizeof(ngx_http_llm_prompt_t));
    p->ids = ids;
    p->n = n;

    return p;
}


/*
 * A prompt of text: tokenized (add_special: with the tokenizer's special
 * tokens, BOS), added to the job's prompts.  NULL with the error set,
 * which names param.
 */

ngx_http_llm_prompt_t *
ngx_http_llm_job_tokenize(ngx_http_llm_job_t *job, const char *text,
    size_t len, ngx_uint_t add_special, const char *param)
{
    int        n;
    char       err[LLM_ERR_LEN];
    int32_t   *ids, *copy;

    err[0] = '\0';
    n = llm_tokenizer_encode(llm_model_tokenizer(job->model), text, len,
                             (int) add_special, &ids, err);
    if (n < 0) {
        ngx_http_llm_job_error(job, NGX_HTTP_BAD_REQUEST, param, "%s",
                               err[0] ? err : "tokenizing the prompt failed");
        return NULL;
    }

    copy = ngx_palloc(job->pool, n * sizeof(int32_t));
    if (copy == NULL) {
        free(ids);
        ngx_http_llm_job_nomem(job);
        return NULL;
    }

    ngx_memcpy(copy, ids, n * sizeof(int32_t));
    free(ids);

    return ngx_http_llm_job_add_prompt(job, copy, n);
}


/*
 * A prompt of token ids (a completions prompt, /detokenize's tokens),
 * added to the job's prompts.  Errors name param, and an id as name[i].
 */

ngx_http_llm_prompt_t *
ngx_http_llm_job_token_ids(ngx_http_llm_job_t *job, yajl_val list,
    const char *param, const char *name)
{
    int        vocab;
    size_t     i, n;
    int32_t   *ids;
    yajl_val   v;

    n = list->u.array.len;
    vocab = llm_model_vocab_size(job->model);

    ids = ngx_palloc(job->pool, n * sizeof(int32_t));
    if (ids == NULL) {
        ngx_http_llm_job_nomem(job);
        return NULL;
    }

    for (i = 0; i < n; i++) {
        v = list->u.array.values[i];

        if (!YAJL_IS_INTEGER(v)) {
            ngx_http_llm_job_error(job, NGX_HTTP_BAD_REQUEST, param,
                                   "%s[%uz] must be a token id, got %s",
                                   name, i, ngx_http_llm_json_type(v));
            return NULL;
        }

        if (YAJL_GET_INTEGER(v) < 0 || YAJL_GET_INTEGER(v) >= vocab) {
            ngx_http_llm_job_error(job, NGX_HTTP_BAD_REQUEST, param,
                                   "Token id %L is out of vocabulary "
                                   "(size %d)", YAJL_GET_INTEGER(v), vocab);
            return NULL;
        }

        ids[i] = (int32_t) YAJL_GET_INTEGER(v);
    }

    return ngx_http_llm_job_add_prompt(job, ids, (int) n);
}


/* the text of token ids (HF decode), a copy in the job's pool */

ngx_int_t
ngx_http_llm_job_decode(ngx_http_llm_job_t *job, const int32_t *ids,
    size_t n, ngx_uint_t skip_special, ngx_str_t *text)
{
    char       *s;
    size_t      len;
    ngx_int_t   rc;

    s = llm_tokenizer_decode(llm_model_tokenizer(job->model), ids, n,
                             (int) skip_special, &len);
    if (s == NULL) {
        ngx_http_llm_job_nomem(job);
        return NGX_ERROR;
    }

    rc = ngx_http_llm_job_copy(job, s, len, text);
    free(s);

    return rc;
}


/*
 * A list of strings (stop, bad_words, include), each a copy in the job's
 * pool; with bare a string alone is a list of one.  At most max strings of
 * at most max_len bytes each (0: any).  ABSENT for a missing key or null,
 * INVALID with the error set.
 */

ngx_int_t
ngx_http_llm_job_strings(ngx_http_llm_job_t *job, yajl_val root,
    const char *key, ngx_uint_t bare, size_t max, size_t max_len,
    ngx_array_t **list)
{
    size_t       i, n, len;
    yajl_val     v, e;
    ngx_str_t    s;
    const char  *want, **p;

    v = llm_json_get(root, key);

    if (v == NULL || YAJL_IS_NULL(v)) {
        return NGX_HTTP_LLM_FIELD_ABSENT;
    }

    want = bare ? "a string or a list of strings" : "a list of strings";

    if (YAJL_IS_ARRAY(v)) {
        n = v->u.array.len;

    } else if (bare && YAJL_IS_STRING(v)) {
        n = 1;

    } else {
        ngx_http_llm_job_error(job, NGX_HTTP_BAD_REQUEST, key,
                               "`%s` must be %s, got %s", key, want,
                               ngx_http_llm_json_type(v));
        return NGX_HTTP_LLM_FIELD_INVALID;
    }

    if (max && n > max) {
        ngx_http_llm_job_error(job, NGX_HTTP_BAD_REQUEST, key,
                               "%s must contain at most %uz strings, got "
                               "%uz.", key, max, n);
        return NGX_HTTP_LLM_FIELD_INVALID;
    }

    *list = ngx_array_create(job->pool, ngx_max(n, 1), sizeof(char *));
    if (*list == NULL) {
        ngx_http_llm_job_nomem(job);
        return NGX_HTTP_LLM_FIELD_INVALID;
    }

    p = ngx_array_push_n(*list, n);     /* within its size: no allocation */

    for (i = 0; i < n; i++) {
        e = YAJL_IS_ARRAY(v) ? v->u.array.values[i] : v;

        if (!YAJL_IS_STRING(e)) {
            ngx_http_llm_job_error(job, NGX_HTTP_BAD_REQUEST, key,
                                   "`%s` must be %s, got %s in the list",
                                   key, want, ngx_http_llm_json_type(e));
            return NGX_HTTP_LLM_FIELD_INVALID;
        }

        len = ngx_strlen(e->u.string);

        if (max_len && len > max_len && YAJL_IS_ARRAY(v)) {
            ngx_http_llm_job_error(job, NGX_HTTP_BAD_REQUEST, key,
                                   "%s[%uz] must be at most %uz bytes long, "
                                   "got %uz.", key, i, max_len, len);
            return NGX_HTTP_LLM_FIELD_INVALID;
        }

        if (max_len && len > max_len) {
            ngx_http_llm_job_error(job, NGX_HTTP_BAD_REQUEST, key,
                                   "%s must be at most %uz bytes long, got "
                                   "%uz.", key, max_len, len);
            return NGX_HTTP_LLM_FIELD_INVALID;
        }

        if (ngx_http_llm_job_copy(job, e->u.string, len, &s) != NGX_OK) {
            return NGX_HTTP_LLM_FIELD_INVALID;
        }

        p[i] = (const char *) s.data;
    }

    return NGX_HTTP_LLM_FIELD_PRESENT;
}


/* the fields every generating endpoint reads first */

ngx_int_t
ngx_http_llm_job_request(ngx_http_llm_job_t *job, yajl_val root)
{
    if (ngx_http_llm_job_model(job, root) != NGX_OK
        || ngx_http_llm_parse_stream(job, root) != NGX_OK
        || ngx_http_llm_parse_unsupported(job, root) != NGX_OK)
    {
        return NGX_ERROR;
    }

    return NGX_OK;
}


/* "model": the served model's name, or absent (also for /tokenize) */

ngx_int_t
ngx_http_llm_job_model(ngx_http_llm_job_t *job, yajl_val root)
{
    yajl_val  v;

    v = llm_json_get(root, "model");

    if (v == NULL || YAJL_IS_NULL(v) || job->router) {
        return NGX_OK;          /* vLLM serves the default model; a router
                                   leaves the name to the node */
    }

    if (!YAJL_IS_STRING(v)) {
        ngx_http_llm_job_error(job, NGX_HTTP_BAD_REQUEST, "model",
                               "`model` must be a string, got %s",
                               ngx_http_llm_json_type(v));
        return NGX_ERROR;
    }

    if (ngx_strlen(v->u.string) != job->served_model_name.len
        || ngx_strncmp(v->u.string, job->served_model_name.data,
                       job->served_model_name.len) != 0)
    {
        job->err_type = "NotFoundError";
        ngx_http_llm_job_error(job, NGX_HTTP_NOT_FOUND, "model",
                               "The model `%s` does not exist.",
                               v->u.string);
        return NGX_ERROR;
    }

    return NGX_OK;
}


static ngx_int_t
ngx_http_llm_parse_stream(ngx_http_llm_job_t *job, yajl_val root)
{
    yajl_val    opts;
    ngx_int_t   rc;
    ngx_uint_t  stream, include, continuous;

    rc = ngx_http_llm_job_bool(job, root, "stream", &stream);
    if (rc == NGX_HTTP_LLM_FIELD_INVALID) {
        return NGX_ERROR;
    }

    job->stream = (rc == NGX_HTTP_LLM_FIELD_PRESENT && stream);

    if (!job->params->stream_options) {
        return NGX_OK;      /* /responses: usage is in the events */
    }

    opts = llm_json_get(root, "stream_options");

    /* vLLM tests the options' truth: null, and {} without a stream, pass */

    if (opts
        && (YAJL_IS_NULL(opts)
            || (!job->stream && YAJL_IS_OBJECT(opts)
                && opts->u.object.len == 0)))
    {
        opts = NULL;
    }

    if (opts) {

        if (!YAJL_IS_OBJECT(opts)) {
            ngx_http_llm_job_error(job, NGX_HTTP_BAD_REQUEST,
                                   "stream_options", "`stream_options` must "
                                   "be an object, got %s",
                                   ngx_http_llm_json_type(opts));
            return NGX_ERROR;
        }

        if (!job->stream) {
            ngx_http_llm_job_error(job, NGX_HTTP_BAD_REQUEST,
                                   "stream_options", "Stream options can "
                                   "only be defined when `stream=True`.");
            return NGX_ERROR;
        }

        /* StreamOptions: include_usage defaults to true once given */

        rc = ngx_http_llm_job_bool(job, opts, "include_usage", &include);
        if (rc == NGX_HTTP_LLM_FIELD_INVALID) {
            return NGX_ERROR;
        }

        job->include_usage = (rc == NGX_HTTP_LLM_FIELD_ABSENT || include);

        rc = ngx_http_llm_job_bool(job, opts, "continuous_usage_stats",
                                   &continuous);
        if (rc == NGX_HTTP_LLM_FIELD_INVALID) {
            return NGX_ERROR;
        }

        job->continuous_usage = job->include_usage && continuous
                                && rc == NGX_HTTP_LLM_FIELD_PRESENT;
    }

    /* vLLM's --enable-force-include-usage implies continuous usage too */

    if (job->force_include_usage) {
        job->include_usage = 1;
        job->continuous_usage = 1;
    }

    return NGX_OK;
}


/* what vLLM accepts but this server does not do (yet): fail loudly */

static ngx_int_t
ngx_http_llm_parse_unsupported(ngx_http_llm_job_t *job, yajl_val root)
{
    yajl_val    v;
    ngx_int_t   rc;
    ngx_uint_t  flag;

    rc = ngx_http_llm_job_bool(job, root, "use_beam_search", &flag);
    if (rc == NGX_HTTP_LLM_FIELD_INVALID) {
        return NGX_ERROR;
    }

    if (rc == NGX_HTTP_LLM_FIELD_PRESENT && flag) {
        ngx_http_llm_job_error(job, NGX_HTTP_BAD_REQUEST, "use_beam_search",
                               "beam search is not supported");
        return NGX_ERROR;
    }

    /* chat and completions compute them (ngx_http_llm_params.c) */

    v = llm_json_get(root, "prompt_logprobs");
    if (v && !YAJL_IS_NULL(v) && !job->params->prompt_logprobs) {
        ngx_http_llm_job_error(job, NGX_HTTP_BAD_REQUEST, "prompt_logprobs",
                               "`prompt_logprobs` are not supported by "
                               "/v1/responses: use /v1/completions or "
                               "/v1/chat/completions");
        return NGX_ERROR;
    }

    v = llm_json_get(root, "response_format");

    if (v && !YAJL_IS_NULL(v)) {
        return ngx_http_llm_job_format(job, v, "response_format");
    }

    return NGX_OK;
}


/*
 * Chat's and completions' response_format, /responses' text.format:
 * {"type": "text"}; "json_object" (the output is constrained to a JSON
 * object); "json_schema" with the schema in json_schema.schema (text.format:
 * in schema, next to name and strict), compiled here so that what it
 * cannot honour is a 400 naming the keyword, and sent to the engine as a
 * grammar spec (docs/api.md, "Structured outputs").
 */

ngx_int_t
ngx_http_llm_job_format(ngx_http_llm_job_t *job, yajl_val format,
    const char *param)
{
    yajl_val     type, js, name;
    ngx_uint_t   flat;
    const char  *where;

    type = llm_json_get(format, "type");

    if (type && YAJL_IS_STRING(type)) {
        if (ngx_strcmp(type->u.string, "text") == 0) {
            return NGX_OK;
        }

        if (job->sp.json_object || job->sp.structured) {
            /* structured_outputs came first (/v1/responses) */
            ngx_http_llm_job_error(job, NGX_HTTP_BAD_REQUEST, param,
                                   "You can only use one kind of structured "
                                   "outputs constraint but multiple are "
                                   "specified (structured_outputs and %s)",
                                   param);
            return NGX_ERROR;
        }

        if (ngx_strcmp(type->u.string, "json_object") == 0) {
            job->sp.json_object = 1;
            return NGX_OK;
        }

        if (ngx_strcmp(type->u.string, "json_schema") == 0) {
            flat = ngx_strcmp(param, "text.format") == 0;
            js = flat ? format : llm_json_get(format, "json_schema");
            where = flat ? "text.format" : "response_format.json_schema";

            if (js == NULL || !YAJL_IS_OBJECT(js)) {
                ngx_http_llm_job_error(job, NGX_HTTP_BAD_REQUEST, param,
                                       "`%s` must be an object with the "
                                       "schema's name and schema", where);
                return NGX_ERROR;
            }

            name = llm_json_get(js, "name");

            if (name == NULL || !YAJL_IS_STRING(name)) {
                ngx_http_llm_job_error(job, NGX_HTTP_BAD_REQUEST, param,
                                       "`%s.name` must be a string", where);
                return NGX_ERROR;
            }

            return ngx_http_llm_job_schema(job, llm_json_get(js, "schema"),
                                           param, where);
        }
    }

    ngx_http_llm_job_error(job, NGX_HTTP_BAD_REQUEST, param,
                           "`%s` must be {\"type\": \"text\"}, "
                           "{\"type\": \"json_object\"} or "
                           "{\"type\": \"json_schema\", ...}", param);
    return NGX_ERROR;
}


/* A JSON Schema as the engine's grammar spec: {"schema": SCHEMA}. */

ngx_int_t
ngx_http_llm_job_schema(ngx_http_llm_job_t *job, yajl_val schema,
    const char *param, const char *where)
{
    size_t   len;
    char    *text, *spec;

    if (schema == NULL || !(YAJL_IS_OBJECT(schema) || YAJL_IS_TRUE(schema))) {
        ngx_http_llm_job_error(job, NGX_HTTP_BAD_REQUEST, param,
                               "`%s.schema` must be a JSON Schema object, "
                               "got %s", where,
                               schema ? ngx_http_llm_json_type(schema)
                                      : "nothing");
        return NGX_ERROR;
    }

    text = llm_json_dump(schema, &len);
    spec = llm_structured_spec("schema", text, len);
    free(text);

    return ngx_http_llm_job_spec(job, spec, param, where);
}


/* A grammar spec (malloc'd, freed here) checked and kept for the engine. */

ngx_int_t
ngx_http_llm_job_spec(ngx_http_llm_job_t *job, char *spec, const char *param,
    const char *where)
{
    char       err[LLM_ERR_LEN];
    ngx_str_t  copy;
    ngx_int_t  rc;

    if (llm_structured_check(spec, err) != 0) {
        free(spec);
        ngx_http_llm_job_error(job, NGX_HTTP_BAD_REQUEST, param,
                               "`%s`: %s", where, err);
        return NGX_ERROR;
    }

    rc = ngx_http_llm_job_copy(job, spec, ngx_strlen(spec), &copy);
    free(spec);

    if (rc != NGX_OK) {
        return NGX_ERROR;
    }

    job->sp.structured = (const char *) copy.data;

    return NGX_OK;
}


/* typed lookups: ABSENT for a missing key or null, INVALID with an error */

ngx_int_t
ngx_http_llm_job_double(ngx_http_llm_job_t *job, yajl_val root,
    const char *key, double *out)
{
    yajl_val  v;

    v = llm_json_get(root, key);

    if (v == NULL || YAJL_IS_NULL(v)) {
        return NGX_HTTP_LLM_FIELD_ABSENT;
    }

    if (!YAJL_IS_DOUBLE(v) || !isfinite(YAJL_GET_DOUBLE(v))) {
        ngx_http_llm_job_error(job, NGX_HTTP_BAD_REQUEST, key,
                               "`%s` must be a number, got %s", key,
                               ngx_http_llm_json_type(v));
        return NGX_HTTP_LLM_FIELD_INVALID;
    }

    *out = YAJL_GET_DOUBLE(v);

    return NGX_HTTP_LLM_FIELD_PRESENT;
}


ngx_int_t
ngx_http_llm_job_int(ngx_http_llm_job_t *job, yajl_val root,
    const char *key, int64_t *out)
{
    double    d;
    yajl_val  v;

    v = llm_json_get(root, key);

    if (v == NULL || YAJL_IS_NULL(v)) {
        return NGX_HTTP_LLM_FIELD_ABSENT;
    }

    if (YAJL_IS_INTEGER(v)) {
        *out = YAJL_GET_INTEGER(v);
        return NGX_HTTP_LLM_FIELD_PRESENT;
    }

    /* like pydantic, an integral float (2.0) is an integer */

    if (YAJL_IS_DOUBLE(v)) {
        d = YAJL_GET_DOUBLE(v);

        if (d == floor(d) && d >= -9.2e18 && d <= 9.2e18) {
            *out = (int64_t) d;
            return NGX_HTTP_LLM_FIELD_PRESENT;
        }
    }

    ngx_http_llm_job_error(job, NGX_HTTP_BAD_REQUEST, key,
                           "`%s` must be an integer, got %s", key,
                           YAJL_IS_NUMBER(v) ? "a fraction or a number out "
                           "of range" : ngx_http_llm_json_type(v));

    return NGX_HTTP_LLM_FIELD_INVALID;
}


ngx_int_t
ngx_http_llm_job_bool(ngx_http_llm_job_t *job, yajl_val root,
    const char *key, ngx_uint_t *out)
{
    yajl_val  v;

    v = llm_json_get(root, key);

    if (v == NULL || YAJL_IS_NULL(v)) {
        return NGX_HTTP_LLM_FIELD_ABSENT;
    }

    if (YAJL_IS_TRUE(v) || YAJL_IS_FALSE(v)) {
        *out = YAJL_IS_TRUE(v);
        return NGX_HTTP_LLM_FIELD_PRESENT;
    }

    ngx_http_llm_job_error(job, NGX_HTTP_BAD_REQUEST, key,
                           "`%s` must be a boolean, got %s", key,
                           ngx_http_llm_json_type(v));

    return NGX_HTTP_LLM_FIELD_INVALID;
}
