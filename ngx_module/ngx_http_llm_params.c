
/*
 * ngx_http_llm_params.c -- the sampling fields the generating endpoints
 * share, mapped onto llm_sampling_params with vLLM's validation rules and
 * messages (SamplingParams._verify_args and the request models'
 * validators), and the context-length rules once the prompt is known.
 * Where the endpoints differ, their ngx_http_llm_params_conf_t says how.
 *
 * Runs in a thread of llm_thread_pool: results go into the job, variable
 * parts into the job's pool.
 */


#include "ngx_http_llm_module.h"

#include <math.h>


static ngx_int_t ngx_http_llm_parse_n(ngx_http_llm_job_t *job,
    yajl_val root);
static ngx_int_t ngx_http_llm_parse_sampling(ngx_http_llm_job_t *job,
    yajl_val root);
static ngx_int_t ngx_http_llm_parse_structured(ngx_http_llm_job_t *job,
    yajl_val so);
static ngx_int_t ngx_http_llm_parse_extras(ngx_http_llm_job_t *job,
    yajl_val root);
static ngx_int_t ngx_http_llm_parse_max_tokens(ngx_http_llm_job_t *job,
    yajl_val root);
static ngx_int_t ngx_http_llm_parse_stop(ngx_http_llm_job_t *job,
    yajl_val root);
static ngx_int_t ngx_http_llm_parse_ids(ngx_http_llm_job_t *job,
    yajl_val root, const char *name, size_t max, const int32_t **ids,
    int *n_ids);
static ngx_int_t ngx_http_llm_parse_bias(ngx_http_llm_job_t *job,
    yajl_val root);
static ngx_int_t ngx_http_llm_parse_prompt_logprobs(ngx_http_llm_job_t *job,
    yajl_val root);
static ngx_int_t ngx_http_llm_params_top(ngx_http_llm_job_t *job,
    int64_t *n, const char *param, const char *what);


/* the fields every generating endpoint reads before its own */

ngx_int_t
ngx_http_llm_params_parse(ngx_http_llm_job_t *job, yajl_val root,
    const ngx_http_llm_params_conf_t *pc)
{
    job->params = pc;
    job->logprobs = -1;
    job->sp.prompt_logprobs = -1;

    if (ngx_http_llm_job_request(job, root) != NGX_OK
        || ngx_http_llm_parse_n(job, root) != NGX_OK
        || ngx_http_llm_parse_sampling(job, root) != NGX_OK
        || ngx_http_llm_parse_extras(job, root) != NGX_OK
        || ngx_http_llm_parse_max_tokens(job, root) != NGX_OK
        || ngx_http_llm_parse_stop(job, root) != NGX_OK
        || ngx_http_llm_parse_bias(job, root) != NGX_OK
        || pc->logprobs(job, root) != NGX_OK
        || ngx_http_llm_parse_prompt_logprobs(job, root) != NGX_OK)
    {
        return NGX_ERROR;
    }

    return NGX_OK;
}


/*
 * n: samples per prompt, each an engine request (parallel sampling).
 * best_of went away with vLLM's V1 engine; asking for more samples than
 * are returned is refused rather than silently ignored.
 */

static ngx_int_t
ngx_http_llm_parse_n(ngx_http_llm_job_t *job, yajl_val root)
{
    int64_t    n, best_of;
    ngx_int_t  rc;

    job->n = 1;

    if (!job->params->n) {
        return NGX_OK;
    }

    rc = ngx_http_llm_job_int(job, root, "n", &n);
    if (rc == NGX_HTTP_LLM_FIELD_INVALID) {
        return NGX_ERROR;
    }

    if (rc == NGX_HTTP_LLM_FIELD_PRESENT) {
        if (n < 1) {
            ngx_http_llm_job_error(job, NGX_HTTP_BAD_REQUEST, "n",
                                   "n must be at least 1, got %L.", n);
            return NGX_ERROR;
        }

        if (n > NGX_HTTP_LLM_MAX_SEQS) {
            ngx_http_llm_job_error(job, NGX_HTTP_BAD_REQUEST, "n",
                                   "n must be at most %d, got %L.",
                                   NGX_HTTP_LLM_MAX_SEQS, n);
            return NGX_ERROR;
        }

        job->n = (ngx_uint_t) n;
    }

    rc = ngx_http_llm_job_int(job, root, "best_of", &best_of);
    if (rc == NGX_HTTP_LLM_FIELD_INVALID) {
        return NGX_ERROR;
    }

    if (rc == NGX_HTTP_LLM_FIELD_PRESENT && best_of != (int64_t) job->n) {
        ngx_http_llm_job_error(job, NGX_HTTP_BAD_REQUEST, "best_of",
                               "best_of is not supported (as in vLLM's V1 "
                               "engine): use n, every sample is returned; "
                               "got best_of=%L with n=%ui.", best_of, job->n);
        return NGX_ERROR;
    }

    return NGX_OK;
}


static ngx_int_t
ngx_http_llm_parse_sampling(ngx_http_llm_job_t *job, yajl_val root)
{
    double                d;
    int64_t               n;
    ngx_int_t             rc;
    ngx_uint_t            i, flag;
    llm_sampling_params  *sp = &job->sp;

    static const struct {
        const char  *name;
        size_t       offset;
    } doubles[] = {
        { "presence_penalty",
          offsetof(llm_sampling_params, presence_penalty) },
        { "frequency_penalty",
          offsetof(llm_sampling_params, frequency_penalty) },
        { "repetition_penalty",
          offsetof(llm_sampling_params, repetition_penalty) },
        { "temperature", offsetof(llm_sampling_params, temperature) },
        { "top_p", offsetof(llm_sampling_params, top_p) },
        { "min_p", offsetof(llm_sampling_params, min_p) },
    };

    /* vLLM's skip_special_tokens (default true) is kept inverted, so that
     * a zeroed llm_sampling_params has every default */
    static const struct {
        const char  *name;
        size_t       offset;
        ngx_uint_t   inverted;
    } bools[] = {
        { "ignore_eos", offsetof(llm_sampling_params, ignore_eos), 0 },
        { "include_stop_str_in_output",
          offsetof(llm_sampling_params, include_stop_str_in_output), 0 },
        { "skip_special_tokens",
          offsetof(llm_sampling_params, keep_special_tokens), 1 },
    };

    /*
     * Absent or null: the default (the model's generation_config, else
     * vLLM's).  Here only the JSON types are checked; the values' ranges
     * are vLLM's _verify_args(), which llm_sampling_params_validate()
     * applies in ngx_http_llm_params_finish(), quoting the request's own
     * doubles as Python prints them.
     */

    for (i = 0; i < sizeof(doubles) / sizeof(doubles[0]); i++) {
        rc = ngx_http_llm_job_double(job, root, doubles[i].name, &d);
        if (rc == NGX_HTTP_LLM_FIELD_INVALID) {
            return NGX_ERROR;
        }

        if (rc == NGX_HTTP_LLM_FIELD_PRESENT) {
            *(double *) ((char *) sp + doubles[i].offset) = d;
        }
    }

    rc = ngx_http_llm_job_int(job, root, "top_k", &n);
    if (rc == NGX_HTTP_LLM_FIELD_INVALID) {
        return NGX_ERROR;
    }

    if (rc == NGX_HTTP_LLM_FIELD_PRESENT) {
        /* -1 is vLLM's old spelling of "disabled"; below that, an error */
        sp->top_k = n == -1 ? 0 : (int) ngx_max(ngx_min(n, INT32_MAX),
                                                INT32_MIN);
    }

    rc = ngx_http_llm_job_int(job, root, "seed", &n);
    if (rc == NGX_HTTP_LLM_FIELD_INVALID) {
        return NGX_ERROR;
    }

    if (rc == NGX_HTTP_LLM_FIELD_PRESENT && n != -1) {
        sp->has_seed = 1;
        sp->seed = (uint64_t) n;
    }

    rc = ngx_http_llm_job_int(job, root, "min_tokens", &n);
    if (rc == NGX_HTTP_LLM_FIELD_INVALID) {
        return NGX_ERROR;
    }

    if (rc == NGX_HTTP_LLM_FIELD_PRESENT) {
        sp->min_tokens = (int) ngx_max(ngx_min(n, INT32_MAX), INT32_MIN);
    }

    for (i = 0; i < sizeof(bools) / sizeof(bools[0]); i++) {
        rc = ngx_http_llm_job_bool(job, root, bools[i].name, &flag);
        if (rc == NGX_HTTP_LLM_FIELD_INVALID) {
            return NGX_ERROR;
        }

        if (rc == NGX_HTTP_LLM_FIELD_PRESENT) {
            *(int *) ((char *) sp + bools[i].offset) = (int) (flag
                                                       ^ bools[i].inverted);
        }
    }

    return NGX_OK;
}


/*
 * vLLM's structured_outputs: exactly one of json (a schema, or its JSON
 * text), regex, choice (strings) and json_object, and not together with a
 * response_format that constrains too (vLLM's "only one kind" rule);
 * grammar, structural_tag and whitespace_pattern are refused by name.
 */

static ngx_int_t
ngx_http_llm_parse_structured(ngx_http_llm_job_t *job, yajl_val so)
{
    static const char *const  kinds[] = {
        "json", "regex", "choice", "json_object", "grammar", "structural_tag",
        NULL
    };
    static const char *const  flags[] = {
        "disable_fallback", "disable_additional_properties",
        "disable_any_whitespace", NULL
    };
    size_t       i, k, len;
    char        *text, *spec, err[LLM_ERR_LEN];
    yajl_val     v, parsed, kind = NULL;
    ngx_uint_t   n = 0, known;
    ngx_int_t    rc;
    const char  *name = NULL;

    if (!YAJL_IS_OBJECT(so)) {
        ngx_http_llm_job_error(job, NGX_HTTP_BAD_REQUEST,
                               "structured_outputs",
                               "`structured_outputs` must be an object, got %s",
                               ngx_http_llm_json_type(so));
        return NGX_ERROR;
    }

    for (i = 0; i < so->u.object.len; i++) {
        v = so->u.object.values[i];
        known = 0;

        for (k = 0; kinds[k]; k++) {
            if (ngx_strcmp(so->u.object.keys[i], kinds[k]) == 0) {
                known = 1;

                if (!YAJL_IS_NULL(v) && !YAJL_IS_FALSE(v)) {
                    n++;
                    kind = v;
                    name = kinds[k];
                }
            }
        }

        for (k = 0; flags[k]; k++) {
            if (ngx_strcmp(so->u.object.keys[i], flags[k]) == 0) {
                known = 1;

                if (!YAJL_IS_NULL(v) && !YAJL_IS_TRUE(v) && !YAJL_IS_FALSE(v))
                {
                    ngx_http_llm_job_error(job, NGX_HTTP_BAD_REQUEST,
                                           "structured_outputs",
                                           "`structured_outputs.%s` must be "
                                           "a boolean", flags[k]);
                    return NGX_ERROR;
                }

                if (k == 2 && YAJL_IS_TRUE(v)) {
                    ngx_http_llm_job_error(job, NGX_HTTP_BAD_REQUEST,
                                           "structured_outputs",
                                           "`structured_outputs."
                                           "disable_any_whitespace` is not "
                                           "supported: the grammar allows "
                                           "bounded whitespace "
                                           "(docs/api.md)");
                    return NGX_ERROR;
                }
            }
        }

        if (!known) {
            ngx_http_llm_job_error(job, NGX_HTTP_BAD_REQUEST,
                                   "structured_outputs",
                                   "`structured_outputs.%s` is not supported "
                                   "(json, regex, choice and json_object are)",
                                   so->u.object.keys[i]);
            return NGX_ERROR;
        }
    }

    if (n == 0) {
        return NGX_OK;
    }

    if (n > 1 || job->sp.json_object || job->sp.structured) {
        ngx_http_llm_job_error(job, NGX_HTTP_BAD_REQUEST,
                               "structured_outputs",
                               "You can only use one kind of structured "
                               "outputs constraint but multiple are "
                               "specified%s",
                               n > 1 ? "" : " (structured_outputs and "
                                            "response_format)");
        return NGX_ERROR;
    }

    if (ngx_strcmp(name, "grammar") == 0
        || ngx_strcmp(name, "structural_tag") == 0)
    {
        ngx_http_llm_job_error(job, NGX_HTTP_BAD_REQUEST,
                               "structured_outputs",
                               "`structured_outputs.%s` is not supported "
                               "(json, regex, choice and json_object are)",
                               name);
        return NGX_ERROR;
    }

    if (ngx_strcmp(name, "json_object") == 0) {
        if (!YAJL_IS_TRUE(kind)) {
            ngx_http_llm_job_error(job, NGX_HTTP_BAD_REQUEST,
                                   "structured_outputs",
                                   "`structured_outputs.json_object` must be "
                                   "a boolean");
            return NGX_ERROR;
        }

        job->sp.json_object = 1;
        return NGX_OK;
    }

    if (ngx_strcmp(name, "json") == 0) {
        if (!YAJL_IS_STRING(kind)) {
            return ngx_http_llm_job_schema(job, kind, "structured_outputs",
                                           "structured_outputs.json");
        }

        /* a schema as JSON text */
        parsed = llm_json_parse(kind->u.string, ngx_strlen(kind->u.string),
                                LLM_JSON_MAX_DEPTH, err);

        if (parsed == NULL) {
            ngx_http_llm_job_error(job, NGX_HTTP_BAD_REQUEST,
                                   "structured_outputs",
                                   "`structured_outputs.json` is not a JSON "
                                   "schema: %s", err);
            return NGX_ERROR;
        }

        rc = ngx_http_llm_job_schema(job, parsed, "structured_outputs",
                                     "structured_outputs.json");
        llm_json_free(parsed);
        return rc;
    }

    if (ngx_strcmp(name, "regex") == 0) {
        if (!YAJL_IS_STRING(kind)) {
            ngx_http_llm_job_error(job, NGX_HTTP_BAD_REQUEST,
                                   "structured_outputs",
                                   "`structured_outputs.regex` must be a "
                                   "string");
            return NGX_ERROR;
        }

    } else {
        /* choice */
        if (!YAJL_IS_ARRAY(kind) || kind->u.array.len == 0) {
            ngx_http_llm_job_error(job, NGX_HTTP_BAD_REQUEST,
                                   "structured_outputs",
                                   "`structured_outputs.choice` must be a "
                                   "non-empty list of strings");
            return NGX_ERROR;
        }

        for (i = 0; i < kind->u.array.len; i++) {
            if (!YAJL_IS_STRING(kind->u.array.values[i])) {
                ngx_http_llm_job_error(job, NGX_HTTP_BAD_REQUEST,
                                       "structured_outputs",
                                       "`structured_outputs.choice[%uz]` "
                                       "must be a string, got %s", i,
                                       ngx_http_llm_json_type(
                                           kind->u.array.values[i]));
                return NGX_ERROR;
            }
        }
    }

    text = llm_json_dump(kind, &len);
    spec = llm_structured_spec(name, text, len);
    free(text);

    return ngx_http_llm_job_spec(job, spec, "structured_outputs",
                                 ngx_strcmp(name, "regex") == 0
                                 ? "structured_outputs.regex"
                                 : "structured_outputs.choice");
}


/* vLLM's extra parameters: allowed_token_ids, bad_words, cache_salt,
 * return_token_ids, truncate_prompt_tokens */

static ngx_int_t
ngx_http_llm_parse_extras(ngx_http_llm_job_t *job, yajl_val root)
{
    int64_t               n;
    yajl_val              v;
    ngx_int_t             rc;
    ngx_str_t             salt;
    ngx_uint_t            flag;
    ngx_array_t          *words;
    llm_sampling_params  *sp = &job->sp;

    /* a mask of the vocabulary: a longer list only repeats ids */

    if (ngx_http_llm_parse_ids(job, root, "allowed_token_ids",
                               llm_model_vocab_size(job->model),
                               &sp->allowed_token_ids,
                               &sp->n_allowed_token_ids)
        != NGX_OK)
    {
        return NGX_ERROR;
    }

    /* bad_words: the engine turns them into token sequences */

    rc = ngx_http_llm_job_strings(job, root, "bad_words", 0,
                                  NGX_HTTP_LLM_MAX_BAD_WORDS,
                                  NGX_HTTP_LLM_MAX_BAD_WORD_LEN, &words);
    if (rc == NGX_HTTP_LLM_FIELD_INVALID) {
        return NGX_ERROR;
    }

    if (rc == NGX_HTTP_LLM_FIELD_PRESENT) {
        sp->bad_words = words->elts;
        sp->n_bad_words = (int) words->nelts;
    }

    /* vLLM's cache_salt: the prefix cache is shared only with the same
     * salt (the engine checks that it is not empty) */

    v = llm_json_get(root, "cache_salt");

    if (v && !YAJL_IS_NULL(v)) {
        if (!YAJL_IS_STRING(v)) {
            ngx_http_llm_job_error(job, NGX_HTTP_BAD_REQUEST, "cache_salt",
                                   "Parameter 'cache_salt' must be a "
                                   "non-empty string if provided.");
            return NGX_ERROR;
        }

        if (ngx_http_llm_job_copy(job, v->u.string, ngx_strlen(v->u.string),
                                  &salt)
            != NGX_OK)
        {
            return NGX_ERROR;
        }

        sp->cache_salt = (const char *) salt.data;
    }

    v = llm_json_get(root, "structured_outputs");

    if (v && !YAJL_IS_NULL(v)
        && ngx_http_llm_parse_structured(job, v) != NGX_OK)
    {
        return NGX_ERROR;
    }

    rc = ngx_http_llm_job_bool(job, root, "return_token_ids", &flag);
    if (rc == NGX_HTTP_LLM_FIELD_INVALID) {
        return NGX_ERROR;
    }

    job->return_token_ids = (rc == NGX_HTTP_LLM_FIELD_PRESENT && flag);

    /* vLLM's truncate_prompt_tokens: keep the prompt's last n tokens */

    job->truncate_prompt_tokens = -1;

    rc = ngx_http_llm_job_int(job, root, "truncate_prompt_tokens", &n);
    if (rc == NGX_HTTP_LLM_FIELD_INVALID) {
        return NGX_ERROR;
    }

    if (rc == NGX_HTTP_LLM_FIELD_PRESENT) {
        if (n < -1) {
            ngx_http_llm_job_error(job, NGX_HTTP_BAD_REQUEST,
                                   "truncate_prompt_tokens",
                                   "truncate_prompt_tokens: Input should be "
                                   "greater than or equal to -1, got %L", n);
            return NGX_ERROR;
        }

        if (n > job->max_model_len) {
            ngx_http_llm_job_error(job, NGX_HTTP_BAD_REQUEST,
                                   "truncate_prompt_tokens",
                                   "truncate_prompt_tokens value (%L) is "
                                   "greater than max_model_len (%d). Please, "
                                   "select a smaller truncation size.",
                                   n, job->max_model_len);
            return NGX_ERROR;
        }

        job->truncate_prompt_tokens = (n == -1) ? job->max_model_len : (int) n;
    }

    return NGX_OK;
}


/*
 * max_tokens under its endpoint's keys (chat: max_completion_tokens, then
 * max_tokens; /responses: max_output_tokens); -1 means "whatever fits",
 * resolved in ngx_http_llm_params_finish() once the prompt length is known.
 * Completions default to 16 (vLLM's default).
 */

static ngx_int_t
ngx_http_llm_parse_max_tokens(ngx_http_llm_job_t *job, yajl_val root)
{
    int64_t                            n;
    ngx_int_t                          rc;
    ngx_uint_t                         i;
    const char                        *key;
    const ngx_http_llm_params_conf_t  *pc = job->params;

    job->max_tokens = pc->max_tokens_default;

    rc = NGX_HTTP_LLM_FIELD_ABSENT;
    key = NULL;

    for (i = 0; rc == NGX_HTTP_LLM_FIELD_ABSENT && i < 2 && pc->max_tokens[i];
         i++)
    {
        key = pc->max_tokens[i];

        rc = ngx_http_llm_job_int(job, root, key, &n);
        if (rc == NGX_HTTP_LLM_FIELD_INVALID) {
            return NGX_ERROR;
        }
    }

    if (rc == NGX_HTTP_LLM_FIELD_ABSENT) {
        return NGX_OK;
    }

    /* completions: echo with max_tokens 0 returns just the prompt */

    if (n == 0 && pc->echo) {
        job->echo_only = 1;
        n = 1;
    }

    if (n < 1) {
        ngx_http_llm_job_error(job, NGX_HTTP_BAD_REQUEST, key,
                               "%s must be at least 1, got %L.", key, n);
        return NGX_ERROR;
    }

    job->max_tokens = (int) ngx_min(n, INT32_MAX);

    return NGX_OK;
}


static ngx_int_t
ngx_http_llm_parse_stop(ngx_http_llm_job_t *job, yajl_val root)
{
    ngx_int_t     rc;
    ngx_uint_t    i;
    ngx_array_t  *stop;
    const char  **s;

    rc = ngx_http_llm_job_strings(job, root, "stop", 1, NGX_HTTP_LLM_MAX_STOP,
                                  NGX_HTTP_LLM_MAX_STOP_LEN, &stop);
    if (rc == NGX_HTTP_LLM_FIELD_INVALID) {
        return NGX_ERROR;
    }

    if (rc == NGX_HTTP_LLM_FIELD_PRESENT) {
        s = stop->elts;

        for (i = 0; i < stop->nelts; i++) {
            if (s[i][0] == '\0') {
                ngx_http_llm_job_error(job, NGX_HTTP_BAD_REQUEST, "stop",
                                       "stop cannot contain an empty "
                                       "string.");
                return NGX_ERROR;
            }
        }

        job->sp.stop = s;
        job->sp.n_stop = (int) stop->nelts;
    }

    return ngx_http_llm_parse_ids(job, root, "stop_token_ids",
                                  NGX_HTTP_LLM_MAX_STOP_TOKEN_IDS,
                                  &job->sp.stop_token_ids,
                                  &job->sp.n_stop_token_ids);
}


/* a list of at most max token ids (stop_token_ids, allowed_token_ids); the
 * vocabulary check is the engine's, with vLLM's message */

static ngx_int_t
ngx_http_llm_parse_ids(ngx_http_llm_job_t *job, yajl_val root,
    const char *name, size_t max, const int32_t **ids, int *n_ids)
{
    size_t     i, n;
    int32_t   *p;
    yajl_val   v, e;

    v = llm_json_get(root, name);

    if (v == NULL || YAJL_IS_NULL(v)) {
        return NGX_OK;
    }

    if (!YAJL_IS_ARRAY(v)) {
        ngx_http_llm_job_error(job, NGX_HTTP_BAD_REQUEST, name,
                               "`%s` must be a list of integers, got %s",
                               name, ngx_http_llm_json_type(v));
        return NGX_ERROR;
    }

    n = v->u.array.len;

    if (n > max) {
        ngx_http_llm_job_error(job, NGX_HTTP_BAD_REQUEST, name,
                               "%s must contain at most %uz ids, got %uz.",
                               name, max, n);
        return NGX_ERROR;
    }

    p = ngx_palloc(job->pool, n * sizeof(int32_t));
    if (p == NULL) {
        ngx_http_llm_job_nomem(job);
        return NGX_ERROR;
    }

    for (i = 0; i < n; i++) {
        e = v->u.array.values[i];

        if (!YAJL_IS_INTEGER(e) || YAJL_GET_INTEGER(e) < 0
            || YAJL_GET_INTEGER(e) > INT32_MAX)
        {
            ngx_http_llm_job_error(job, NGX_HTTP_BAD_REQUEST, name,
                                   "`%s` must be a list of token ids", name);
            return NGX_ERROR;
        }

        p[i] = (int32_t) YAJL_GET_INTEGER(e);
    }

    *ids = p;
    *n_ids = (int) n;

    return NGX_OK;
}


/* logit_bias: {"token id": bias}, biases clamped to [-100, 100] */

static ngx_int_t
ngx_http_llm_parse_bias(ngx_http_llm_job_t *job, yajl_val root)
{
    int          vocab;
    char        *end;
    float       *values;
    size_t       i, n;
    double       d;
    int32_t     *ids;
    yajl_val     v, e;
    long long    id;

    v = llm_json_get(root, "logit_bias");

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

    if (n > NGX_HTTP_LLM_MAX_LOGIT_BIAS) {
        ngx_http_llm_job_error(job, NGX_HTTP_BAD_REQUEST, "logit_bias",
                               "logit_bias must contain at most %d entries, "
                               "got %uz.", NGX_HTTP_LLM_MAX_LOGIT_BIAS, n);
        return NGX_ERROR;
    }

    ids = ngx_palloc(job->pool, n * sizeof(int32_t));
    values = ngx_palloc(job->pool, n * sizeof(float));

    if (ids == NULL || values == NULL) {
        ngx_http_llm_job_nomem(job);
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

        ids[i] = (int32_t) id;
        values[i] = (float) d;
    }

    job->sp.logit_bias_ids = ids;
    job->sp.logit_bias_values = values;
    job->sp.n_logit_bias = (int) n;

    return NGX_OK;
}


/*
 * The end of every endpoint's logprobs field (its ngx_http_llm_params_conf_t
 * parses the shape): -1 asks for the whole vocabulary; the engine keeps at
 * most 20 alternatives, vLLM's default --max-logprobs.
 */

ngx_int_t
ngx_http_llm_params_logprobs(ngx_http_llm_job_t *job, int64_t n,
    const char *param)
{
    if (ngx_http_llm_params_top(job, &n, param, "sample") != NGX_OK) {
        return NGX_ERROR;
    }

    job->logprobs = (int) n;
    job->sp.logprobs = (int) n;

    return NGX_OK;
}


static ngx_int_t
ngx_http_llm_params_top(ngx_http_llm_job_t *job, int64_t *n,
    const char *param, const char *what)
{
    if (*n == -1) {
        *n = llm_model_vocab_size(job->model);  /* "all": too many */
    }

    if (*n > NGX_HTTP_LLM_MAX_LOGPROBS) {
        ngx_http_llm_job_error(job, NGX_HTTP_BAD_REQUEST, param,
                               "Requested %s logprobs of %L, which is "
                               "greater than max allowed: %d", what, *n,
                               NGX_HTTP_LLM_MAX_LOGPROBS);
        return NGX_ERROR;
    }

    return NGX_OK;
}


/*
 * prompt_logprobs (vLLM's extension of chat and completions): N gives
 * every prompt token after the first its logprob, rank and the N most
 * likely tokens.  vLLM's request validator first (stream, then the sign),
 * then its sampling check (-1 is the whole vocabulary: over the maximum of
 * 20).  /responses has no such field: job.c refuses it there.
 */

static ngx_int_t
ngx_http_llm_parse_prompt_logprobs(ngx_http_llm_job_t *job, yajl_val root)
{
    int64_t    n;
    ngx_int_t  rc;

    if (!job->params->prompt_logprobs) {
        return NGX_OK;
    }

    rc = ngx_http_llm_job_int(job, root, "prompt_logprobs", &n);
    if (rc == NGX_HTTP_LLM_FIELD_INVALID) {
        return NGX_ERROR;
    }

    if (rc == NGX_HTTP_LLM_FIELD_ABSENT) {
        return NGX_OK;
    }

    if (job->stream && (n > 0 || n == -1)) {
        ngx_http_llm_job_error(job, NGX_HTTP_BAD_REQUEST, "prompt_logprobs",
                               "`prompt_logprobs` are not available when "
                               "`stream=True`.");
        return NGX_ERROR;
    }

    if (n < -1) {
        ngx_http_llm_job_error(job, NGX_HTTP_BAD_REQUEST, "prompt_logprobs",
                               "`prompt_logprobs` must be a positive value "
                               "or -1.");
        return NGX_ERROR;
    }

    if (ngx_http_llm_params_top(job, &n, "prompt_logprobs", "prompt")
        != NGX_OK)
    {
        return NGX_ERROR;
    }

    job->sp.prompt_logprobs = (int) n;

    return NGX_OK;
}


/*
 * After the endpoint set the prompts: the context-length rules, for each
 * prompt.  A prompt that alone fills max_model_len is refused; max_tokens
 * larger than what is left is capped (the request then finishes with
 * "length"), and min_tokens must fit every prompt's capped max_tokens, as
 * vLLM checks them per prompt.  job->sp.max_tokens ends as the first
 * prompt's capped value; submitting caps it for each prompt again.
 */

ngx_int_t
ngx_http_llm_params_finish(ngx_http_llm_job_t *job)
{
    int                     room, max_tokens;
    char                    err[LLM_ERR_LEN];
    ngx_uint_t              i, n_prompts;
    const char             *param;
    ngx_http_llm_prompt_t  *p;

    param = job->params->prompt;
    n_prompts = job->prompts.nelts;

    if (n_prompts * job->n > NGX_HTTP_LLM_MAX_SEQS) {
        ngx_http_llm_job_error(job, NGX_HTTP_BAD_REQUEST, param,
                               "%ui prompts with n=%ui make %ui sequences, "
                               "at most %d are allowed in one request",
                               n_prompts, job->n, n_prompts * job->n,
                               NGX_HTTP_LLM_MAX_SEQS);
        return NGX_ERROR;
    }

    for (i = n_prompts; i > 0; i--) {
        p = (ngx_http_llm_prompt_t *) job->prompts.elts + i - 1;

        if (job->truncate_prompt_tokens >= 0
            && p->n > job->truncate_prompt_tokens)
        {
            ngx_memmove(p->ids, p->ids + p->n - job->truncate_prompt_tokens,
                        job->truncate_prompt_tokens * sizeof(int32_t));
            p->n = job->truncate_prompt_tokens;
        }

        if (p->n >= job->max_model_len) {
            ngx_http_llm_job_error(job, NGX_HTTP_BAD_REQUEST, param,
                                   "This model's maximum context length is "
                                   "%d tokens. However, your request has %d "
                                   "input tokens. Please reduce the length "
                                   "of the input.", job->max_model_len, p->n);
            return NGX_ERROR;
        }

        room = job->max_model_len - p->n;

        if (job->max_tokens < 0 || job->max_tokens > room) {
            max_tokens = room;

        } else {
            max_tokens = job->max_tokens;
        }

        if (job->sp.min_tokens > max_tokens) {
            ngx_http_llm_job_error(job, NGX_HTTP_BAD_REQUEST, "min_tokens",
                                   "min_tokens must be less than or equal to "
                                   "max_tokens=%d, got %d.", max_tokens,
                                   job->sp.min_tokens);
            return NGX_ERROR;
        }

        job->sp.max_tokens = max_tokens;
    }

    /* vLLM: greedy sampling cannot give n different samples */

    if (job->n > 1 && job->sp.temperature < 1e-5f) {
        ngx_http_llm_job_error(job, NGX_HTTP_BAD_REQUEST, "n",
                               "n must be 1 when using greedy sampling, "
                               "got %ui.", job->n);
        return NGX_ERROR;
    }

    job->sp.n = (int) job->n;

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
