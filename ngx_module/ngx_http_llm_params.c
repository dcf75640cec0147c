
/*
 * ngx_http_llm_params.c -- the request fields chat and completions share:
 * model, stream options and the sampling fields, mapped onto
 * llm_sampling_params with vLLM's validation rules and messages
 * (SamplingParams._verify_args and the request models' validators).
 *
 * Runs in a thread of llm_thread_pool: results go into the job, variable
 * parts are malloc()ed and freed by ngx_http_llm_job_free().
 */


#include "ngx_http_llm_module.h"

#include <math.h>


#define NGX_HTTP_LLM_ABSENT   0
#define NGX_HTTP_LLM_PRESENT  1
#define NGX_HTTP_LLM_INVALID  -1


static ngx_int_t ngx_http_llm_get_double(ngx_http_llm_job_t *job,
    yajl_val root, const char *key, double *out);
static ngx_int_t ngx_http_llm_get_int(ngx_http_llm_job_t *job,
    yajl_val root, const char *key, int64_t *out);
static ngx_int_t ngx_http_llm_get_bool(ngx_http_llm_job_t *job,
    yajl_val root, const char *key, ngx_uint_t *out);
static ngx_int_t ngx_http_llm_parse_model(ngx_http_llm_job_t *job,
    yajl_val root);
static ngx_int_t ngx_http_llm_parse_stream(ngx_http_llm_job_t *job,
    yajl_val root);
static ngx_int_t ngx_http_llm_parse_sampling(ngx_http_llm_job_t *job,
    yajl_val root);
static ngx_int_t ngx_http_llm_parse_stop(ngx_http_llm_job_t *job,
    yajl_val root);
static ngx_int_t ngx_http_llm_parse_bias(ngx_http_llm_job_t *job,
    yajl_val root);
static ngx_int_t ngx_http_llm_parse_logprobs(ngx_http_llm_job_t *job,
    yajl_val root);
static ngx_int_t ngx_http_llm_parse_unsupported(ngx_http_llm_job_t *job,
    yajl_val root);
static const char *ngx_http_llm_fmt(u_char *buf, double v);


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

    int  i;

    if (job->stop) {
        for (i = 0; i < job->sp.n_stop; i++) {
            free(job->stop[i]);
        }

        free(job->stop);
    }

    free(job->prompt);
    free(job->stop_ids);
    free(job->bias_ids);
    free(job->bias_values);
    free(job->echo);
}


/* the fields both endpoints read before their own */

ngx_int_t
ngx_http_llm_params_parse(ngx_http_llm_job_t *job, yajl_val root)
{
    if (ngx_http_llm_parse_model(job, root) != NGX_OK
        || ngx_http_llm_parse_stream(job, root) != NGX_OK
        || ngx_http_llm_parse_unsupported(job, root) != NGX_OK
        || ngx_http_llm_parse_sampling(job, root) != NGX_OK
        || ngx_http_llm_parse_stop(job, root) != NGX_OK
        || ngx_http_llm_parse_bias(job, root) != NGX_OK
        || ngx_http_llm_parse_logprobs(job, root) != NGX_OK)
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

    rc = ngx_http_llm_get_bool(job, root, "stream", &stream);
    if (rc == NGX_HTTP_LLM_INVALID) {
        return NGX_ERROR;
    }

    job->stream = (rc == NGX_HTTP_LLM_PRESENT && stream);

    opts = ngx_http_llm_json_get(root, "stream_options");

    if (opts && !YAJL_IS_NULL(opts)) {

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

        rc = ngx_http_llm_get_bool(job, opts, "include_usage", &include);
        if (rc == NGX_HTTP_LLM_INVALID) {
            return NGX_ERROR;
        }

        job->include_usage = (rc == NGX_HTTP_LLM_ABSENT || include);

        rc = ngx_http_llm_get_bool(job, opts, "continuous_usage_stats",
                                   &continuous);
        if (rc == NGX_HTTP_LLM_INVALID) {
            return NGX_ERROR;
        }

        job->continuous_usage = job->include_usage
                                && rc == NGX_HTTP_LLM_PRESENT && continuous;
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
    int64_t     n;
    ngx_int_t   rc;
    ngx_uint_t  flag;

    rc = ngx_http_llm_get_int(job, root, "n", &n);
    if (rc == NGX_HTTP_LLM_INVALID) {
        return NGX_ERROR;
    }

    if (rc == NGX_HTTP_LLM_PRESENT) {
        if (n < 1) {
            ngx_http_llm_job_error(job, NGX_HTTP_BAD_REQUEST, "n",
                                   "n must be at least 1, got %L.", n);
            return NGX_ERROR;
        }

        if (n > 1) {
            ngx_http_llm_job_error(job, NGX_HTTP_BAD_REQUEST, "n",
                                   "n must be 1: several choices per "
                                   "request are not supported yet, got %L.",
                                   n);
            return NGX_ERROR;
        }
    }

    rc = ngx_http_llm_get_bool(job, root, "use_beam_search", &flag);
    if (rc == NGX_HTTP_LLM_INVALID) {
        return NGX_ERROR;
    }

    if (rc == NGX_HTTP_LLM_PRESENT && flag) {
        ngx_http_llm_job_error(job, NGX_HTTP_BAD_REQUEST, "use_beam_search",
                               "beam search is not supported");
        return NGX_ERROR;
    }

    v = ngx_http_llm_json_get(root, "prompt_logprobs");
    if (v && !YAJL_IS_NULL(v)) {
        ngx_http_llm_job_error(job, NGX_HTTP_BAD_REQUEST, "prompt_logprobs",
                               "`prompt_logprobs` are not supported");
        return NGX_ERROR;
    }

    v = ngx_http_llm_json_get(root, "response_format");

    if (v && !YAJL_IS_NULL(v)) {
        v = ngx_http_llm_json_get(v, "type");

        if (v == NULL || !YAJL_IS_STRING(v)
            || ngx_strcmp(v->u.string, "text") != 0)
        {
            ngx_http_llm_job_error(job, NGX_HTTP_BAD_REQUEST,
                                   "response_format", "only "
                                   "`response_format` {\"type\": \"text\"} "
                                   "is supported: structured output is not");
            return NGX_ERROR;
        }
    }

    return NGX_OK;
}


static ngx_int_t
ngx_http_llm_parse_sampling(ngx_http_llm_job_t *job, yajl_val root)
{
    u_char                buf[NGX_HTTP_LLM_DTOA_LEN];
    double                d;
    int64_t               n;
    ngx_int_t             rc;
    ngx_uint_t            flag;
    llm_sampling_params  *sp = &job->sp;

    /*
     * Absent or null: the default (the model's generation_config, else
     * vLLM's).  Checks follow the order of vLLM's _verify_args().
     */

    rc = ngx_http_llm_get_double(job, root, "presence_penalty", &d);
    if (rc == NGX_HTTP_LLM_INVALID) {
        return NGX_ERROR;
    }

    if (rc == NGX_HTTP_LLM_PRESENT) {
        if (!(d >= -2 && d <= 2)) {
            ngx_http_llm_job_error(job, NGX_HTTP_BAD_REQUEST,
                                   "presence_penalty", "presence_penalty "
                                   "must be in [-2, 2], got %s.",
                                   ngx_http_llm_fmt(buf, d));
            return NGX_ERROR;
        }

        sp->presence_penalty = (float) d;
    }

    rc = ngx_http_llm_get_double(job, root, "frequency_penalty", &d);
    if (rc == NGX_HTTP_LLM_INVALID) {
        return NGX_ERROR;
    }

    if (rc == NGX_HTTP_LLM_PRESENT) {
        if (!(d >= -2 && d <= 2)) {
            ngx_http_llm_job_error(job, NGX_HTTP_BAD_REQUEST,
                                   "frequency_penalty", "frequency_penalty "
                                   "must be in [-2, 2], got %s.",
                                   ngx_http_llm_fmt(buf, d));
            return NGX_ERROR;
        }

        sp->frequency_penalty = (float) d;
    }

    rc = ngx_http_llm_get_double(job, root, "repetition_penalty", &d);
    if (rc == NGX_HTTP_LLM_INVALID) {
        return NGX_ERROR;
    }

    if (rc == NGX_HTTP_LLM_PRESENT) {
        if (!(d > 0)) {
            ngx_http_llm_job_error(job, NGX_HTTP_BAD_REQUEST,
                                   "repetition_penalty", "repetition_penalty "
                                   "must be greater than zero, got %s.",
                                   ngx_http_llm_fmt(buf, d));
            return NGX_ERROR;
        }

        sp->repetition_penalty = (float) d;
    }

    rc = ngx_http_llm_get_double(job, root, "temperature", &d);
    if (rc == NGX_HTTP_LLM_INVALID) {
        return NGX_ERROR;
    }

    if (rc == NGX_HTTP_LLM_PRESENT) {
        if (d < 0) {
            ngx_http_llm_job_error(job, NGX_HTTP_BAD_REQUEST, "temperature",
                                   "temperature must be non-negative, "
                                   "got %s.", ngx_http_llm_fmt(buf, d));
            return NGX_ERROR;
        }

        sp->temperature = (float) d;
    }

    rc = ngx_http_llm_get_double(job, root, "top_p", &d);
    if (rc == NGX_HTTP_LLM_INVALID) {
        return NGX_ERROR;
    }

    if (rc == NGX_HTTP_LLM_PRESENT) {
        if (!(d > 0 && d <= 1)) {
            ngx_http_llm_job_error(job, NGX_HTTP_BAD_REQUEST, "top_p",
                                   "top_p must be in (0, 1], got %s.",
                                   ngx_http_llm_fmt(buf, d));
            return NGX_ERROR;
        }

        sp->top_p = (float) d;
    }

    rc = ngx_http_llm_get_int(job, root, "top_k", &n);
    if (rc == NGX_HTTP_LLM_INVALID) {
        return NGX_ERROR;
    }

    if (rc == NGX_HTTP_LLM_PRESENT) {
        if (n < -1) {
            ngx_http_llm_job_error(job, NGX_HTTP_BAD_REQUEST, "top_k",
                                   "top_k must be 0 (disable), or at least "
                                   "1, got %L.", n);
            return NGX_ERROR;
        }

        /* -1 is vLLM's old spelling of "disabled" */
        sp->top_k = (n == -1 || n > INT32_MAX) ? 0 : (int) n;
    }

    rc = ngx_http_llm_get_double(job, root, "min_p", &d);
    if (rc == NGX_HTTP_LLM_INVALID) {
        return NGX_ERROR;
    }

    if (rc == NGX_HTTP_LLM_PRESENT) {
        if (!(d >= 0 && d <= 1)) {
            ngx_http_llm_job_error(job, NGX_HTTP_BAD_REQUEST, "min_p",
                                   "min_p must be in [0, 1], got %s.",
                                   ngx_http_llm_fmt(buf, d));
            return NGX_ERROR;
        }

        sp->min_p = (float) d;
    }

    rc = ngx_http_llm_get_int(job, root, "seed", &n);
    if (rc == NGX_HTTP_LLM_INVALID) {
        return NGX_ERROR;
    }

    if (rc == NGX_HTTP_LLM_PRESENT && n != -1) {
        sp->has_seed = 1;
        sp->seed = (uint64_t) n;
    }

    rc = ngx_http_llm_get_int(job, root, "min_tokens", &n);
    if (rc == NGX_HTTP_LLM_INVALID) {
        return NGX_ERROR;
    }

    if (rc == NGX_HTTP_LLM_PRESENT) {
        if (n < 0 || n > INT32_MAX) {
            ngx_http_llm_job_error(job, NGX_HTTP_BAD_REQUEST, "min_tokens",
                                   "min_tokens must be greater than or equal "
                                   "to 0, got %L.", n);
            return NGX_ERROR;
        }

        sp->min_tokens = (int) n;
    }

    rc = ngx_http_llm_get_bool(job, root, "ignore_eos", &flag);
    if (rc == NGX_HTTP_LLM_INVALID) {
        return NGX_ERROR;
    }

    if (rc == NGX_HTTP_LLM_PRESENT) {
        sp->ignore_eos = (int) flag;
    }

    /*
     * max_tokens: chat prefers max_completion_tokens; -1 means "whatever
     * fits", resolved in ngx_http_llm_params_finish() once the prompt
     * length is known.  Completions default to 16 (vLLM's default).
     */

    job->max_tokens = (job->route == NGX_HTTP_LLM_ROUTE_COMPLETIONS) ? 16 : -1;

    rc = NGX_HTTP_LLM_ABSENT;

    if (job->route == NGX_HTTP_LLM_ROUTE_CHAT) {
        rc = ngx_http_llm_get_int(job, root, "max_completion_tokens", &n);
        if (rc == NGX_HTTP_LLM_INVALID) {
            return NGX_ERROR;
        }
    }

    if (rc == NGX_HTTP_LLM_PRESENT) {
        if (n < 1) {
            ngx_http_llm_job_error(job, NGX_HTTP_BAD_REQUEST,
                                   "max_completion_tokens",
                                   "max_completion_tokens must be at least 1"
                                   ", got %L.", n);
            return NGX_ERROR;
        }

    } else {
        rc = ngx_http_llm_get_int(job, root, "max_tokens", &n);
        if (rc == NGX_HTTP_LLM_INVALID) {
            return NGX_ERROR;
        }

        /* completions: echo with max_tokens 0 returns just the prompt */

        if (rc == NGX_HTTP_LLM_PRESENT && n == 0
            && job->route == NGX_HTTP_LLM_ROUTE_COMPLETIONS)
        {
            job->echo_only = 1;
            n = 1;
        }

        if (rc == NGX_HTTP_LLM_PRESENT && n < 1) {
            ngx_http_llm_job_error(job, NGX_HTTP_BAD_REQUEST, "max_tokens",
                                   "max_tokens must be at least 1, got %L.",
                                   n);
            return NGX_ERROR;
        }
    }

    if (rc == NGX_HTTP_LLM_PRESENT) {
        job->max_tokens = (int) ngx_min(n, INT32_MAX);
    }

    return NGX_OK;
}


static ngx_int_t
ngx_http_llm_parse_stop(ngx_http_llm_job_t *job, yajl_val root)
{
    size_t    i, n;
    yajl_val  v, e;

    v = ngx_http_llm_json_get(root, "stop");

    if (v && !YAJL_IS_NULL(v)) {

        if (YAJL_IS_STRING(v)) {
            n = 1;

        } else if (YAJL_IS_ARRAY(v)) {
            n = v->u.array.len;

        } else {
            ngx_http_llm_job_error(job, NGX_HTTP_BAD_REQUEST, "stop",
                                   "`stop` must be a string or a list of "
                                   "strings, got %s",
                                   ngx_http_llm_json_type(v));
            return NGX_ERROR;
        }

        job->stop = calloc(n ? n : 1, sizeof(char *));
        if (job->stop == NULL) {
            goto nomem;
        }

        for (i = 0; i < n; i++) {
            e = YAJL_IS_STRING(v) ? v : v->u.array.values[i];

            if (!YAJL_IS_STRING(e)) {
                ngx_http_llm_job_error(job, NGX_HTTP_BAD_REQUEST, "stop",
                                       "`stop` must be a string or a list "
                                       "of strings, got %s in the list",
                                       ngx_http_llm_json_type(e));
                return NGX_ERROR;
            }

            if (e->u.string[0] == '\0') {
                ngx_http_llm_job_error(job, NGX_HTTP_BAD_REQUEST, "stop",
                                       "stop cannot contain an empty "
                                       "string.");
                return NGX_ERROR;
            }

            job->stop[i] = strdup(e->u.string);
            if (job->stop[i] == NULL) {
                goto nomem;
            }

            job->sp.n_stop = (int) i + 1;
        }

        job->sp.stop = (const char *const *) job->stop;
    }

    v = ngx_http_llm_json_get(root, "stop_token_ids");

    if (v && !YAJL_IS_NULL(v)) {

        if (!YAJL_IS_ARRAY(v)) {
            ngx_http_llm_job_error(job, NGX_HTTP_BAD_REQUEST,
                                   "stop_token_ids", "`stop_token_ids` must "
                                   "be a list of integers, got %s",
                                   ngx_http_llm_json_type(v));
            return NGX_ERROR;
        }

        n = v->u.array.len;

        job->stop_ids = malloc((n ? n : 1) * sizeof(int32_t));
        if (job->stop_ids == NULL) {
            goto nomem;
        }

        for (i = 0; i < n; i++) {
            e = v->u.array.values[i];

            if (!YAJL_IS_INTEGER(e) || YAJL_GET_INTEGER(e) < 0
                || YAJL_GET_INTEGER(e) > INT32_MAX)
            {
                ngx_http_llm_job_error(job, NGX_HTTP_BAD_REQUEST,
                                       "stop_token_ids", "`stop_token_ids` "
                                       "must be a list of token ids");
                return NGX_ERROR;
            }

            job->stop_ids[i] = (int32_t) YAJL_GET_INTEGER(e);
        }

        job->sp.stop_token_ids = job->stop_ids;
        job->sp.n_stop_token_ids = (int) n;
    }

    return NGX_OK;

nomem:

    ngx_http_llm_job_error(job, NGX_HTTP_INTERNAL_SERVER_ERROR, NULL,
                           "out of memory");
    return NGX_ERROR;
}


/* logit_bias: {"token id": bias}, biases clamped to [-100, 100] */

static ngx_int_t
ngx_http_llm_parse_bias(ngx_http_llm_job_t *job, yajl_val root)
{
    int          vocab;
    char        *end;
    size_t       i, n;
    double       d;
    yajl_val     v, e;
    long long    id;

    v = ngx_http_llm_json_get(root, "logit_bias");

    if (v == NULL || YAJL_IS_NULL(v)) {
        return NGX_OK;
    }

    if (!YAJL_IS_OBJECT(v)) {
        ngx_http_llm_job_error(job, NGX_HTTP_BAD_REQUEST, "logit_bias",
                               "`logit_bias` must be an object mapping token "
                               "ids to biases, got %s",
                               ngx_http_llm_json_type(v));
        return NGX_ERROR;
    }

    n = v->u.object.len;
    vocab = llm_model_vocab_size(job->model);

    job->bias_ids = malloc((n ? n : 1) * sizeof(int32_t));
    job->bias_values = malloc((n ? n : 1) * sizeof(float));

    if (job->bias_ids == NULL || job->bias_values == NULL) {
        ngx_http_llm_job_error(job, NGX_HTTP_INTERNAL_SERVER_ERROR, NULL,
                               "out of memory");
        return NGX_ERROR;
    }

    for (i = 0; i < n; i++) {
        e = v->u.object.values[i];

        id = strtoll(v->u.object.keys[i], &end, 10);

        if (end == v->u.object.keys[i] || *end != '\0') {
            ngx_http_llm_job_error(job, NGX_HTTP_BAD_REQUEST, "logit_bias",
                                   "logit_bias keys must be token ids, got "
                                   "\"%s\"", v->u.object.keys[i]);
            return NGX_ERROR;
        }

        if (id < 0 || id >= vocab) {
            ngx_http_llm_job_error(job, NGX_HTTP_BAD_REQUEST, "logit_bias",
                                   "token_id(s) [%s] in logit_bias contain "
                                   "out-of-vocab token ids. Vocabulary size: "
                                   "%d", v->u.object.keys[i], vocab);
            return NGX_ERROR;
        }

        if (!YAJL_IS_DOUBLE(e) || !isfinite(YAJL_GET_DOUBLE(e))) {
            ngx_http_llm_job_error(job, NGX_HTTP_BAD_REQUEST, "logit_bias",
                                   "logit_bias values must be numbers, got "
                                   "%s", ngx_http_llm_json_type(e));
            return NGX_ERROR;
        }

        d = YAJL_GET_DOUBLE(e);
        d = ngx_max(-100.0, ngx_min(100.0, d));

        job->bias_ids[i] = (int32_t) id;
        job->bias_values[i] = (float) d;
    }

    job->sp.logit_bias_ids = job->bias_ids;
    job->sp.logit_bias_values = job->bias_values;
    job->sp.n_logit_bias = (int) n;

    return NGX_OK;
}


/*
 * chat: "logprobs": bool, "top_logprobs": N;
 * completions: "logprobs": N.  The engine keeps at most 20 alternatives,
 * vLLM's default --max-logprobs.
 */

static ngx_int_t
ngx_http_llm_parse_logprobs(ngx_http_llm_job_t *job, yajl_val root)
{
    int64_t     n;
    ngx_int_t   rc;
    ngx_uint_t  flag;

    job->logprobs = -1;

    if (job->route == NGX_HTTP_LLM_ROUTE_CHAT) {
        rc = ngx_http_llm_get_bool(job, root, "logprobs", &flag);
        if (rc == NGX_HTTP_LLM_INVALID) {
            return NGX_ERROR;
        }

        flag = (rc == NGX_HTTP_LLM_PRESENT && flag);

        rc = ngx_http_llm_get_int(job, root, "top_logprobs", &n);
        if (rc == NGX_HTTP_LLM_INVALID) {
            return NGX_ERROR;
        }

        if (rc == NGX_HTTP_LLM_ABSENT) {
            n = 0;
        }

        if (n < -1) {
            ngx_http_llm_job_error(job, NGX_HTTP_BAD_REQUEST, "top_logprobs",
                                   "`top_logprobs` must be a positive value "
                                   "or -1.");
            return NGX_ERROR;
        }

        if (n != 0 && !flag) {
            ngx_http_llm_job_error(job, NGX_HTTP_BAD_REQUEST, "top_logprobs",
                                   "when using `top_logprobs`, `logprobs` "
                                   "must be set to true.");
            return NGX_ERROR;
        }

        if (!flag) {
            return NGX_OK;
        }

    } else {
        rc = ngx_http_llm_get_int(job, root, "logprobs", &n);
        if (rc == NGX_HTTP_LLM_INVALID) {
            return NGX_ERROR;
        }

        if (rc == NGX_HTTP_LLM_ABSENT) {
            return NGX_OK;
        }

        if (n < 0) {
            ngx_http_llm_job_error(job, NGX_HTTP_BAD_REQUEST, "logprobs",
                                   "`logprobs` must be a positive value.");
            return NGX_ERROR;
        }
    }

    if (n == -1) {
        n = llm_model_vocab_size(job->model);   /* "all": too many */
    }

    if (n > NGX_HTTP_LLM_MAX_LOGPROBS) {
        ngx_http_llm_job_error(job, NGX_HTTP_BAD_REQUEST,
                               job->route == NGX_HTTP_LLM_ROUTE_CHAT
                               ? "top_logprobs" : "logprobs",
                               "Requested sample logprobs of %L, which is "
                               "greater than max allowed: %d", n,
                               NGX_HTTP_LLM_MAX_LOGPROBS);
        return NGX_ERROR;
    }

    job->logprobs = (int) n;
    job->sp.logprobs = (int) n;

    return NGX_OK;
}


/*
 * After the endpoint set job->prompt: the context-length rules.  A prompt
 * that alone fills max_model_len is refused; max_tokens larger than what
 * is left is capped (the request then finishes with "length").
 */

ngx_int_t
ngx_http_llm_params_finish(ngx_http_llm_job_t *job)
{
    int          room;
    char         err[LLM_ERR_LEN];
    const char  *param;

    param = job->route == NGX_HTTP_LLM_ROUTE_CHAT ? "messages" : "prompt";

    if (job->n_prompt >= job->max_model_len) {
        ngx_http_llm_job_error(job, NGX_HTTP_BAD_REQUEST, param,
                               "This model's maximum context length is %d "
                               "tokens. However, your request has %d input "
                               "tokens. Please reduce the length of the "
                               "input.", job->max_model_len, job->n_prompt);
        return NGX_ERROR;
    }

    room = job->max_model_len - job->n_prompt;

    if (job->max_tokens < 0 || job->max_tokens > room) {
        job->sp.max_tokens = room;

    } else {
        job->sp.max_tokens = job->max_tokens;
    }

    if (job->sp.min_tokens > job->sp.max_tokens) {
        ngx_http_llm_job_error(job, NGX_HTTP_BAD_REQUEST, "min_tokens",
                               "min_tokens must be less than or equal to "
                               "max_tokens=%d, got %d.", job->sp.max_tokens,
                               job->sp.min_tokens);
        return NGX_ERROR;
    }

    /* the engine's own rules have the last word */
    err[0] = '\0';
    param = NULL;

    if (llm_sampling_params_validate(&job->sp, job->model, &param, err) != 0)
    {
        ngx_http_llm_job_error(job, NGX_HTTP_BAD_REQUEST, param, "%s", err);
        return NGX_ERROR;
    }

    return NGX_OK;
}


/* typed lookups: ABSENT for a missing key or null, INVALID with an error */

static ngx_int_t
ngx_http_llm_get_double(ngx_http_llm_job_t *job, yajl_val root,
    const char *key, double *out)
{
    yajl_val  v;

    v = ngx_http_llm_json_get(root, key);

    if (v == NULL || YAJL_IS_NULL(v)) {
        return NGX_HTTP_LLM_ABSENT;
    }

    if (!YAJL_IS_DOUBLE(v) || !isfinite(YAJL_GET_DOUBLE(v))) {
        ngx_http_llm_job_error(job, NGX_HTTP_BAD_REQUEST, key,
                               "`%s` must be a number, got %s", key,
                               ngx_http_llm_json_type(v));
        return NGX_HTTP_LLM_INVALID;
    }

    *out = YAJL_GET_DOUBLE(v);

    return NGX_HTTP_LLM_PRESENT;
}


static ngx_int_t
ngx_http_llm_get_int(ngx_http_llm_job_t *job, yajl_val root,
    const char *key, int64_t *out)
{
    double    d;
    yajl_val  v;

    v = ngx_http_llm_json_get(root, key);

    if (v == NULL || YAJL_IS_NULL(v)) {
        return NGX_HTTP_LLM_ABSENT;
    }

    if (YAJL_IS_INTEGER(v)) {
        *out = YAJL_GET_INTEGER(v);
        return NGX_HTTP_LLM_PRESENT;
    }

    /* like pydantic, an integral float (2.0) is an integer */

    if (YAJL_IS_DOUBLE(v)) {
        d = YAJL_GET_DOUBLE(v);

        if (d == floor(d) && d >= -9.2e18 && d <= 9.2e18) {
            *out = (int64_t) d;
            return NGX_HTTP_LLM_PRESENT;
        }
    }

    ngx_http_llm_job_error(job, NGX_HTTP_BAD_REQUEST, key,
                           "`%s` must be an integer, got %s", key,
                           YAJL_IS_NUMBER(v) ? "a fraction or a number out "
                           "of range" : ngx_http_llm_json_type(v));

    return NGX_HTTP_LLM_INVALID;
}


static ngx_int_t
ngx_http_llm_get_bool(ngx_http_llm_job_t *job, yajl_val root,
    const char *key, ngx_uint_t *out)
{
    yajl_val  v;

    v = ngx_http_llm_json_get(root, key);

    if (v == NULL || YAJL_IS_NULL(v)) {
        return NGX_HTTP_LLM_ABSENT;
    }

    if (YAJL_IS_TRUE(v) || YAJL_IS_FALSE(v)) {
        *out = YAJL_IS_TRUE(v);
        return NGX_HTTP_LLM_PRESENT;
    }

    ngx_http_llm_job_error(job, NGX_HTTP_BAD_REQUEST, key,
                           "`%s` must be a boolean, got %s", key,
                           ngx_http_llm_json_type(v));

    return NGX_HTTP_LLM_INVALID;
}


/* a float the way Python prints it in vLLM's messages: "got 2.5." */

static const char *
ngx_http_llm_fmt(u_char *buf, double v)
{
    buf[ngx_http_llm_dtoa(buf, v)] = '\0';
    return (const char *) buf;
}
