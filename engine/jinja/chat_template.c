/*
 * chat_template.c -- a model's chat template, loaded and rendered the way
 * transformers' apply_chat_template() does it.
 *
 * Loading: DIR/chat_template.jinja wins over tokenizer_config.json's
 * "chat_template", which is a string or a list of {"name", "template"}.
 * Of named templates, "tool_use" is picked when tools are given and it
 * exists, else "default" (transformers' get_chat_template()).
 *
 * Rendering passes what transformers passes: messages, tools (None when
 * absent), documents (None when absent), add_generation_prompt, every
 * special token of tokenizer_config.json (bos_token, eos_token, unk_token,
 * pad_token, ..., additional_special_tokens), then the caller's kwargs,
 * which may override special tokens but not the four fixed names.
 */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chat_template.h"
#include "jinja.h"
#include "util/util.h"


#define LLM_MAX_SPECIAL  8

struct llm_chat_template {
    jinja_template  *dflt;          /* may be NULL when only tool_use exists */
    jinja_template  *tool_use;
    int              nspecial;
    char            *special_name[LLM_MAX_SPECIAL];
    char            *special_value[LLM_MAX_SPECIAL];
    char           **additional;    /* additional_special_tokens, or NULL */
    int              nadditional;
    char            *source;        /* the source texts, joined */
};


static const char *const llm_special_names[] = {
    "bos_token", "eos_token", "unk_token", "sep_token", "pad_token",
    "cls_token", "mask_token"
};


/* A token in tokenizer_config.json: "<s>" or {"content": "<s>", ...}. */
static const char *
llm_token_str(yajl_val v)
{
    const char  *path[] = { "content", NULL };
    yajl_val     c;

    if (YAJL_IS_STRING(v)) {
        return YAJL_GET_STRING(v);
    }
    if (YAJL_IS_OBJECT(v)) {
        c = yajl_tree_get(v, path, yajl_t_string);
        return c ? YAJL_GET_STRING(c) : NULL;
    }
    return NULL;
}


static void
llm_add_special(llm_chat_template *t, const char *name, const char *value)
{
    if (value == NULL || t->nspecial == LLM_MAX_SPECIAL) {
        return;
    }
    t->special_name[t->nspecial] = llm_xstrdup(name);
    t->special_value[t->nspecial] = llm_xstrdup(value);
    t->nspecial++;
}


/* keeps the source text of a template (llm_chat_template_source()) */
static void
llm_keep_source(llm_chat_template *t, const char *src, size_t len)
{
    size_t  have = t->source ? strlen(t->source) : 0;

    t->source = llm_xrealloc(t->source, have + len + 2);
    if (have) {
        t->source[have++] = '\n';
    }
    memcpy(t->source + have, src, len);
    t->source[have + len] = '\0';
}


static jinja_template *
llm_parse_named(llm_chat_template *t, const char *src, const char *what,
    char *err)
{
    jinja_template  *tpl;
    char             msg[LLM_ERR_LEN];

    llm_keep_source(t, src, strlen(src));
    tpl = jinja_parse(src, strlen(src), msg);
    if (tpl == NULL) {
        llm_errf(err, "%s: %s", what, msg);
    }
    return tpl;
}


/* "chat_template" of tokenizer_config.json: a string, or named templates. */
static int
llm_chat_template_from_config(llm_chat_template *t, yajl_val ct,
    const char *path, char *err)
{
    const char  *name_path[] = { "name", NULL };
    const char  *tpl_path[] = { "template", NULL };
    yajl_val     name, src;
    size_t       i;
    char         what[PATH_MAX + 64];

    if (YAJL_IS_STRING(ct)) {
        t->dflt = llm_parse_named(t, YAJL_GET_STRING(ct), path, err);
        return t->dflt != NULL;
    }
    if (!YAJL_IS_ARRAY(ct)) {
        llm_errf(err, "%s: \"chat_template\" must be a string or a list of "
                 "{\"name\", \"template\"}", path);
        return 0;
    }
    for (i = 0; i < YAJL_GET_ARRAY(ct)->len; i++) {
        yajl_val  item = YAJL_GET_ARRAY(ct)->values[i];

        name = yajl_tree_get(item, name_path, yajl_t_string);
        src = yajl_tree_get(item, tpl_path, yajl_t_string);
        if (name == NULL || src == NULL) {
            llm_errf(err, "%s: chat_template[%zu] needs \"name\" and "
                     "\"template\" strings", path, i);
            return 0;
        }
        snprintf(what, sizeof(what), "%s (chat template '%s')", path,
                 name->u.string);
        if (strcmp(name->u.string, "default") == 0 && t->dflt == NULL) {
            t->dflt = llm_parse_named(t, src->u.string, what, err);
            if (t->dflt == NULL) {
                return 0;
            }
        } else if (strcmp(name->u.string, "tool_use") == 0
                   && t->tool_use == NULL)
        {
            t->tool_use = llm_parse_named(t, src->u.string, what, err);
            if (t->tool_use == NULL) {
                return 0;
            }
        }
    }
    if (t->dflt == NULL && t->tool_use == NULL) {
        llm_errf(err, "%s: none of the named chat templates is \"default\" or "
                 "\"tool_use\"", path);
        return 0;
    }
    return 1;
}


static void
llm_special_from_config(llm_chat_template *t, yajl_val cfg)
{
    const char  *path[] = { NULL, NULL };
    yajl_val     v;
    size_t       i, n = 0;

    for (i = 0; i < sizeof(llm_special_names) / sizeof(llm_special_names[0]); i++) {
        path[0] = llm_special_names[i];
        v = yajl_tree_get(cfg, path, yajl_t_any);
        if (v) {
            llm_add_special(t, llm_special_names[i], llm_token_str(v));
        }
    }
    path[0] = "additional_special_tokens";
    v = yajl_tree_get(cfg, path, yajl_t_array);
    if (v && YAJL_GET_ARRAY(v)->len) {
        t->additional = llm_xcalloc(YAJL_GET_ARRAY(v)->len, sizeof(char *));
        for (i = 0; i < YAJL_GET_ARRAY(v)->len; i++) {
            const char  *s = llm_token_str(YAJL_GET_ARRAY(v)->values[i]);

            if (s) {
                t->additional[n++] = llm_xstrdup(s);
            }
        }
        t->nadditional = (int) n;
    }
}


llm_chat_template *
llm_chat_template_load(const char *dir, char *err)
{
    llm_chat_template  *t;
    char                path[PATH_MAX], jpath[PATH_MAX], yerr[256];
    char               *text = NULL, *src;
    yajl_val            cfg = NULL, ct = NULL;
    const char         *ct_path[] = { "chat_template", NULL };
    int                 ok = 1;

    err[0] = '\0';
    t = llm_xcalloc(1, sizeof(*t));
    llm_path_join(path, dir, "tokenizer_config.json");
    if (llm_file_exists(path)) {
        text = llm_read_file(path, NULL, err);
        if (text == NULL) {
            free(t);
            return NULL;
        }
        cfg = yajl_tree_parse(text, yerr, sizeof(yerr));
        free(text);
        if (cfg == NULL) {
            yerr[strcspn(yerr, "\n")] = '\0';     /* yajl adds a context line */
            llm_errf(err, "%s: invalid JSON: %s", path, yerr);
            free(t);
            return NULL;
        }
        llm_special_from_config(t, cfg);
        ct = yajl_tree_get(cfg, ct_path, yajl_t_any);
    }

    llm_path_join(jpath, dir, "chat_template.jinja");
    if (llm_file_exists(jpath)) {
        src = llm_read_file(jpath, NULL, err);
        ok = src != NULL;
        if (ok) {
            t->dflt = llm_parse_named(t, src, jpath, err);
            ok = t->dflt != NULL;
            free(src);
        }
    } else if (ct && !YAJL_IS_NULL(ct)) {
        ok = llm_chat_template_from_config(t, ct, path, err);
    } else {
        ok = 0;         /* no template: err stays empty */
    }
    yajl_tree_free(cfg);
    if (!ok) {
        llm_chat_template_free(t);
        return NULL;
    }
    return t;
}


llm_chat_template *
llm_chat_template_parse(const char *src, size_t len, const char *bos_token,
    const char *eos_token, char *err)
{
    llm_chat_template  *t;

    err[0] = '\0';
    t = llm_xcalloc(1, sizeof(*t));
    llm_keep_source(t, src, len);
    t->dflt = jinja_parse(src, len, err);
    if (t->dflt == NULL) {
        free(t->source);
        free(t);
        return NULL;
    }
    llm_add_special(t, "bos_token", bos_token);
    llm_add_special(t, "eos_token", eos_token);
    return t;
}


void
llm_chat_template_free(llm_chat_template *t)
{
    int  i;

    if (t == NULL) {
        return;
    }
    jinja_template_free(t->dflt);
    jinja_template_free(t->tool_use);
    for (i = 0; i < t->nspecial; i++) {
        free(t->special_name[i]);
        free(t->special_value[i]);
    }
    for (i = 0; i < t->nadditional; i++) {
        free(t->additional[i]);
    }
    free(t->additional);
    free(t->source);
    free(t);
}


const char *
llm_chat_template_source(const llm_chat_template *t)
{
    return t->source ? t->source : "";
}


/* ------------------------------------------------------------------ render */

/* A JSON tree as template values; strings point into the tree. */
static jv
llm_json_value(jinja_vm *vm, yajl_val v, int depth)
{
    jv      out;
    size_t  i, n;

    if (v == NULL) {
        return jv_none();
    }
    if (depth > 500) {
        jinja_fail(vm, "the JSON input is nested too deeply");
    }
    switch (v->type) {
    case yajl_t_string:
        /* yajl_tree_parse() has validated the UTF-8 already */
        return jv_str(v->u.string, strlen(v->u.string));
    case yajl_t_number:
        if (YAJL_IS_INTEGER(v)) {
            return jv_int(YAJL_GET_INTEGER(v));
        }
        return jv_float(YAJL_GET_DOUBLE(v));
    case yajl_t_object:
        n = v->u.object.len;
        out = jv_dict_new(vm, n);
        for (i = 0; i < n; i++) {
            const char  *k = v->u.object.keys[i];

            jv_dict_set(vm, out, jv_str(k, strlen(k)),
                        llm_json_value(vm, v->u.object.values[i], depth + 1));
        }
        return out;
    case yajl_t_array:
        n = v->u.array.len;
        out = jv_list_new(vm, n);
        for (i = 0; i < n; i++) {
            out.u.list->items[i] = llm_json_value(vm, v->u.array.values[i], depth + 1);
        }
        out.u.list->n = n;
        return out;
    case yajl_t_true:
        return jv_bool(1);
    case yajl_t_false:
        return jv_bool(0);
    default:
        return jv_none();
    }
}


/* A JSON tree that will be freed before the render ends: strings copied. */
static jv
llm_json_value_copy(jinja_vm *vm, yajl_val v, int depth)
{
    jv      out;
    size_t  i, n;

    if (v == NULL) {
        return jv_none();
    }
    if (depth > 500) {
        jinja_fail(vm, "the JSON input is nested too deeply");
    }
    switch (v->type) {
    case yajl_t_string:
        return jv_str_copy(vm, v->u.string, strlen(v->u.string));
    case yajl_t_object:
        n = v->u.object.len;
        out = jv_dict_new(vm, n);
        for (i = 0; i < n; i++) {
            const char  *k = v->u.object.keys[i];

            jv_dict_set(vm, out, jv_str_copy(vm, k, strlen(k)),
                        llm_json_value_copy(vm, v->u.object.values[i], depth + 1));
        }
        return out;
    case yajl_t_array:
        n = v->u.array.len;
        out = jv_list_new(vm, n);
        for (i = 0; i < n; i++) {
            jv_list_push(vm, out, llm_json_value_copy(vm, v->u.array.values[i], depth + 1));
        }
        return out;
    default:
        return llm_json_value(vm, v, depth);
    }
}


/* LLM_CHAT_TOOL_ARGS_JSON: vLLM's _postprocess_messages(). */
static void
llm_parse_tool_arguments(jinja_vm *vm, jv messages)
{
    size_t    i, k;
    jv        m, role, calls, fn, args;
    yajl_val  tree;
    char      yerr[LLM_ERR_LEN];

    for (i = 0; i < messages.u.list->n; i++) {
        m = messages.u.list->items[i];
        if (m.type != JV_DICT || !jv_dict_get_str(m, "role", 4, &role)
            || role.type != JV_STR || role.len != 9
            || memcmp(role.u.s, "assistant", 9) != 0
            || !jv_dict_get_str(m, "tool_calls", 10, &calls) || calls.type != JV_LIST)
        {
            continue;
        }
        for (k = 0; k < calls.u.list->n; k++) {
            if (calls.u.list->items[k].type != JV_DICT
                || !jv_dict_get_str(calls.u.list->items[k], "function", 8, &fn)
                || fn.type != JV_DICT)
            {
                continue;
            }
            if (!jv_dict_get_str(fn, "arguments", 9, &args) || !jv_truthy(args)) {
                jv_dict_set(vm, fn, jv_lit("arguments"), jv_dict_new(vm, 0));
                continue;
            }
            if (args.type != JV_STR) {
                continue;
            }
            /* a client's JSON: within the depth of the body it came in,
             * which keeps the conversion below its own bound */
            tree = llm_json_parse(args.u.s, args.len, LLM_JSON_MAX_DEPTH, yerr);
            if (tree == NULL) {
                jinja_fail(vm, "messages[%zu].tool_calls[%zu].function.arguments "
                           "is not valid JSON", i, k);
            }
            args = llm_json_value_copy(vm, tree, 0);
            llm_json_free(tree);
            jv_dict_set(vm, fn, jv_lit("arguments"), args);
        }
    }
}


static void
llm_set_var(jinja_vm *vm, const char *name, jv val)
{
    size_t  len = strlen(name);

    jinja_scope_set(vm, vm->root, name, len, jinja_name_hash(name, len), val);
}


char *
llm_chat_template_render(const llm_chat_template *t, yajl_val messages,
    yajl_val tools, yajl_val documents, int add_generation_prompt,
    yajl_val kwargs, size_t *len, char *err)
{
    return llm_chat_template_render_flags(t, messages, tools, documents,
                                          add_generation_prompt, kwargs, 0,
                                          len, err);
}


char *
llm_chat_template_render_flags(const llm_chat_template *t, yajl_val messages,
    yajl_val tools, yajl_val documents, int add_generation_prompt,
    yajl_val kwargs, unsigned flags, size_t *len, char *err)
{
    static const char *const fixed[] = {
        "messages", "tools", "documents", "add_generation_prompt"
    };
    const jinja_template  *tpl;
    jinja_vm               vm;
    jv                     list;
    char                  *out;
    size_t                 i, k;
    int                    j;

    err[0] = '\0';
    tpl = tools && t->tool_use ? t->tool_use : t->dflt;
    if (tpl == NULL) {
        llm_errf(err, "this model has several chat templates and none is "
                 "named \"default\"");
        return NULL;
    }
    if (messages == NULL || !YAJL_IS_ARRAY(messages)) {
        llm_errf(err, "messages must be a JSON array");
        return NULL;
    }
    if (kwargs && !YAJL_IS_OBJECT(kwargs)) {
        llm_errf(err, "chat template kwargs must be a JSON object");
        return NULL;
    }
    jinja_vm_init(&vm);
    if (setjmp(vm.jmp)) {
        llm_errf(err, "%s", vm.err);
        jinja_vm_free(&vm);
        return NULL;
    }
    vm.root = jinja_scope_new(&vm, NULL);
    for (j = 0; j < t->nspecial; j++) {
        llm_set_var(&vm, t->special_name[j],
                    jv_str(t->special_value[j], strlen(t->special_value[j])));
    }
    if (t->nadditional) {
        list = jv_list_new(&vm, (size_t) t->nadditional);
        for (j = 0; j < t->nadditional; j++) {
            jv_list_push(&vm, list, jv_str(t->additional[j], strlen(t->additional[j])));
        }
        llm_set_var(&vm, "additional_special_tokens", list);
    }
    if (kwargs) {
        for (i = 0; i < kwargs->u.object.len; i++) {
            const char  *key = kwargs->u.object.keys[i];

            for (k = 0; k < sizeof(fixed) / sizeof(fixed[0]); k++) {
                if (strcmp(key, fixed[k]) == 0) {
                    llm_errf(err, "chat template kwargs may not set '%s'", key);
                    jinja_vm_free(&vm);
                    return NULL;
                }
            }
            llm_set_var(&vm, key, llm_json_value(&vm, kwargs->u.object.values[i], 0));
        }
    }
    list = llm_json_value(&vm, messages, 0);
    if (flags & LLM_CHAT_TOOL_ARGS_JSON) {
        llm_parse_tool_arguments(&vm, list);
    }
    llm_set_var(&vm, "messages", list);
    llm_set_var(&vm, "tools", llm_json_value(&vm, tools, 0));
    llm_set_var(&vm, "documents", llm_json_value(&vm, documents, 0));
    llm_set_var(&vm, "add_generation_prompt", jv_bool(add_generation_prompt));

    vm.line = 0;
    out = jinja_render(tpl, &vm, len);
    jinja_vm_free(&vm);
    return out;
}
