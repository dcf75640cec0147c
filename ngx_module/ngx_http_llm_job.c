
/*
 * ngx_http_llm_job.c -- the "prepare" job's frame: the request-level
 * fields the endpoints share (model, stream options, what this server
 * refuses), typed field lookups with vLLM-style messages, errors, and
 * freeing what the job malloc()ed.
 *
 * Runs in a thread of llm_thread_pool (except ngx_http_llm_job_free(), a
 * cleanup of r->pool): no pools, no nginx request API here.
 */


#include "ngx_http_llm_module.h"

#include <math.h>


static ngx_int_t ngx_http_llm_parse_model(ngx_http_llm_job_t *job,
    yajl_val root);
static ngx_int_t ngx_http_llm_parse_stream(ngx_http_llm_job_t *job,
    yajl_val root);
static ngx_int_t ngx_http_llm_parse_unsupported(ngx_http_llm_job_t *job,
    yajl_val root);


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
ngx_http_llm_job_free(void *data)
{
    ngx_http_llm_job_t  *job = data;

    ngx_uint_t  i;

    if (job->prompts) {
        for (i = 0; i < job->n_prompts; i++) {
            free(job->prompts[i].ids);
            free(job->prompts[i].echo);
        }

        free(job->prompts);
    }

    if (job->stop) {
        for (i = 0; i < (ngx_uint_t) job->sp.n_stop; i++) {
            free(job->stop[i]);
        }

        free(job->stop);
    }

    free(job->stop_ids);
    free(job->allowed_ids);
    free(job->cache_salt);

    if (job->bad_words) {
        for (i = 0; i < (ngx_uint_t) job->sp.n_bad_words; i++) {
            free(job->bad_words[i]);
        }

        free(job->bad_words);
    }
    free(job->bias_ids);
    free(job->bias_values);
    free(job->text);

    if (job->responses) {
        ngx_http_llm_responses_free(job->responses);
    }
}


/*
 * Adds a prompt of n token ids (malloc()ed; the job owns them from now
 * on, also when this fails) and returns it, or NULL with the error set.
 */

ngx_http_llm_prompt_t *
ngx_http_llm_job_add_prompt(ngx_http_llm_job_t *job, int32_t *ids, int n)
{
    ngx_http_llm_prompt_t  *p;

    p = realloc(job->prompts,
                (job->n_prompts + 1) * sizeof(ngx_http_llm_prompt_t));
    if (p == NULL) {
        free(ids);
        ngx_http_llm_job_error(job, NGX_HTTP_INTERNAL_SERVER_ERROR, NULL,
                               "out of memory");
        return NULL;
    }

    job->prompts = p;

    p = &job->prompts[job->n_prompts++];
    ngx_memzero(p, sizeof(ngx_http_llm_prompt_t));
    p->ids = ids;
    p->n = n;

    return p;
}


/* the fields every endpoint reads first (/tokenize: only "model") */

ngx_int_t
ngx_http_llm_job_request(ngx_http_llm_job_t *job, yajl_val root)
{
    if (ngx_http_llm_parse_model(job, root) != NGX_OK) {
        return NGX_ERROR;
    }

    if (job->route == NGX_HTTP_LLM_ROUTE_TOKENIZE
        || job->route == NGX_HTTP_LLM_ROUTE_DETOKENIZE)
    {
        return NGX_OK;
    }

    if (ngx_http_llm_parse_stream(job, root) != NGX_OK
        || ngx_http_llm_parse_unsupported(job, root) != NGX_OK)
    {
        return NGX_ERROR;
    }

    return NGX_OK;
}


static ngx_int_t
ngx_http_llm_parse_model(ngx_http_llm_job_t *job, yajl_val root)
{
    yajl_val  v;

    v = ngx_http_llm_json_get(root, "model");

    if (v == NULL || YAJL_IS_NULL(v)) {
        return NGX_OK;          /* vLLM serves the default model */
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

    if (job->route == NGX_HTTP_LLM_ROUTE_RESPONSES) {
        return NGX_OK;      /* no stream_options: usage is in the events */
    }

    opts = ngx_http_llm_json_get(root, "stream_options");

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

    v = ngx_http_llm_json_get(root, "prompt_logprobs");
    if (v && !YAJL_IS_NULL(v) && job->route == NGX_HTTP_LLM_ROUTE_RESPONSES) {
        ngx_http_llm_job_error(job, NGX_HTTP_BAD_REQUEST, "prompt_logprobs",
                               "`prompt_logprobs` are not supported by "
                               "/v1/responses: use /v1/completions or "
                               "/v1/chat/completions");
        return NGX_ERROR;
    }

    v = ngx_http_llm_json_get(root, "response_format");

    if (v && !YAJL_IS_NULL(v)) {
        return ngx_http_llm_job_format(job, v, "response_format");
    }

    return NGX_OK;
}


/*
 * Chat's and completions' response_format, /responses' text.format:
 * {"type": "text"}, or "json_object" (the output is constrained to a JSON
 * object, docs/api.md); JSON schemas are refused.
 */

ngx_int_t
ngx_http_llm_job_format(ngx_http_llm_job_t *job, yajl_val format,
    const char *param)
{
    yajl_val  type;

    type = ngx_http_llm_json_get(format, "type");

    if (type && YAJL_IS_STRING(type)) {
        if (ngx_strcmp(type->u.string, "text") == 0) {
            return NGX_OK;
        }

        if (ngx_strcmp(type->u.string, "json_object") == 0) {
            job->sp.json_object = 1;
            return NGX_OK;
        }
    }

    ngx_http_llm_job_error(job, NGX_HTTP_BAD_REQUEST, param,
                           "`%s` must be {\"type\": \"text\"} or "
                           "{\"type\": \"json_object\"}: JSON schemas are "
                           "not supported", param);
    return NGX_ERROR;
}


/* typed lookups: ABSENT for a missing key or null, INVALID with an error */

ngx_int_t
ngx_http_llm_job_double(ngx_http_llm_job_t *job, yajl_val root,
    const char *key, double *out)
{
    yajl_val  v;

    v = ngx_http_llm_json_get(root, key);

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

    v = ngx_http_llm_json_get(root, key);

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

    v = ngx_http_llm_json_get(root, key);

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
