/*
 * jinja_globals.c -- the global functions a Hugging Face chat template
 * sees: jinja2's defaults (range limited by the sandbox, dict, namespace,
 * cycler, joiner, lipsum) and the two transformers adds, raise_exception()
 * and strftime_now().
 *
 * strftime_now() formats the current local time like Python's
 * datetime.now().strftime(); when the environment variable
 * LLM_TEMPLATE_DATE is set ("YYYY-MM-DD" or "YYYY-MM-DD HH:MM:SS") that
 * moment is used instead, so tests can compare with a reference renderer.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "jinja.h"


static jv
g_range(jinja_vm *vm, jinja_args *a)
{
    int64_t  start = 0, stop, step = 1, n, i;
    jv       l, r;

    if (a->nkw) {
        jinja_fail(vm, "range() takes no keyword arguments");
    }
    if (a->npos < 1 || a->npos > 3) {
        jinja_fail(vm, "range expected at most 3 arguments, got %zu", a->npos);
    }
    if (a->npos == 1) {
        stop = jinja_arg_int(vm, "range", a->pos[0]);
    } else {
        start = jinja_arg_int(vm, "range", a->pos[0]);
        stop = jinja_arg_int(vm, "range", a->pos[1]);
        if (a->npos == 3) {
            step = jinja_arg_int(vm, "range", a->pos[2]);
        }
    }
    if (step == 0) {
        jinja_fail(vm, "range() arg 3 must not be zero");
    }
    if (step > 0) {
        n = stop > start ? (stop - start - 1) / step + 1 : 0;
    } else {
        n = start > stop ? (start - stop - 1) / (-step) + 1 : 0;
    }
    if (n > JINJA_MAX_RANGE) {
        jinja_fail(vm, "Range too big. The sandbox blocks ranges larger than "
                   "MAX_RANGE (%d).", JINJA_MAX_RANGE);
    }
    l = jv_list_new(vm, (size_t) n);
    for (i = 0; i < n; i++) {
        l.u.list->items[i] = jv_int(start + i * step);
    }
    l.u.list->n = (size_t) n;
    r = jv_iter_new(vm, JI_RANGE, l.u.list);
    r.u.iter->start = start;
    r.u.iter->stop = stop;
    r.u.iter->step = step;
    return r;
}


/* dict(mapping_or_pairs, **kwargs) and namespace(...) share this. */
static jv
build_dict(jinja_vm *vm, jinja_args *a, const char *fname)
{
    jv        d = jv_dict_new(vm, a->nkw);
    jv_list  *l, *pair;
    size_t    i;

    if (a->npos > 1) {
        jinja_fail(vm, "%s expected at most 1 argument, got %zu", fname, a->npos);
    }
    if (a->npos == 1) {
        jv  src = a->pos[0];

        if (src.type == JV_DICT || src.type == JV_NS) {
            for (i = 0; i < src.u.dict->n; i++) {
                jv_dict_set(vm, d, src.u.dict->keys[i], src.u.dict->vals[i]);
            }
        } else {
            l = jv_iterate(vm, src);
            for (i = 0; i < l->n; i++) {
                pair = jv_iterate(vm, l->items[i]);
                if (pair->n != 2) {
                    jinja_fail(vm, "dictionary update sequence element #%zu has "
                               "length %zu; 2 is required", i, pair->n);
                }
                jv_dict_set(vm, d, pair->items[0], pair->items[1]);
            }
        }
    }
    for (i = 0; i < a->nkw; i++) {
        jv_dict_set(vm, d, jv_str(a->kw[i].name, a->kw[i].len), a->kw[i].val);
    }
    return d;
}


static jv
g_dict(jinja_vm *vm, jinja_args *a)
{
    return build_dict(vm, a, "dict");
}


static jv
g_namespace(jinja_vm *vm, jinja_args *a)
{
    jv  d = build_dict(vm, a, "namespace");

    d.type = JV_NS;
    return d;
}


static jv
g_raise_exception(jinja_vm *vm, jinja_args *a)
{
    jv  msg;

    if (a->npos != 1 || a->nkw) {
        jinja_fail(vm, "raise_exception() takes exactly one argument");
    }
    msg = jv_to_str(vm, a->pos[0]);
    snprintf(vm->err, sizeof(vm->err), "%.*s", (int) msg.len, msg.u.s);
    vm->raised = 1;
    longjmp(vm->jmp, 1);
}


void
jinja_strftime_now(jinja_vm *vm, jinja_buf *b, jv fmt)
{
    const char  *pin = vm->date ? vm->date : getenv("LLM_TEMPLATE_DATE");
    struct tm    tm;
    time_t       now;
    char        *f, out[1024];
    size_t       n, i;
    jinja_buf    pf = { 0 };

    memset(&tm, 0, sizeof(tm));
    if (pin && *pin) {
        if (sscanf(pin, "%d-%d-%d %d:%d:%d", &tm.tm_year, &tm.tm_mon, &tm.tm_mday,
                   &tm.tm_hour, &tm.tm_min, &tm.tm_sec) < 3)
        {
            jinja_fail(vm, "LLM_TEMPLATE_DATE must look like 2024-07-26, not '%s'",
                       pin);
        }
        tm.tm_year -= 1900;
        tm.tm_mon -= 1;
        tm.tm_isdst = -1;
        now = timegm(&tm);      /* normalises and fills wday/yday */
        gmtime_r(&now, &tm);
    } else {
        now = time(NULL);
        localtime_r(&now, &tm);
    }
    /* Python's own directives for naive datetimes: %f, %z, %Z */
    for (i = 0; i < fmt.len; i++) {
        if (fmt.u.s[i] == '%' && i + 1 < fmt.len) {
            char  c = fmt.u.s[i + 1];

            if (c == 'f') {
                jinja_buf_add(vm, &pf, "000000", 6);
                i++;
                continue;
            }
            if (c == 'z' || c == 'Z') {
                i++;
                continue;
            }
            jinja_buf_addc(vm, &pf, '%');
            jinja_buf_addc(vm, &pf, c);
            i++;
            continue;
        }
        jinja_buf_addc(vm, &pf, fmt.u.s[i]);
    }
    f = jinja_strdup(vm, pf.p ? pf.p : "", pf.len);
    if (pf.len == 0) {
        return;
    }
    n = strftime(out, sizeof(out), f, &tm);
    jinja_buf_add(vm, b, out, n);
}


static jv
g_strftime_now(jinja_vm *vm, jinja_args *a)
{
    jinja_buf  b = { 0 };

    if (a->npos != 1 || a->nkw) {
        jinja_fail(vm, "strftime_now() takes exactly one argument");
    }
    if (a->pos[0].type != JV_STR) {
        jinja_fail(vm, "strftime() argument 1 must be str, not %s",
                   jv_type_name(a->pos[0]));
    }
    jinja_strftime_now(vm, &b, a->pos[0]);
    return jinja_buf_jv(&b);
}


static jv
g_cycler(jinja_vm *vm, jinja_args *a)
{
    jv       v = jv_make(JV_OBJ);
    jv_obj  *o;
    size_t   i;

    if (a->npos == 0) {
        jinja_fail(vm, "at least one item has to be provided");
    }
    o = jinja_alloc(vm, sizeof(jv_obj));
    memset(o, 0, sizeof(*o));
    o->kind = JO_CYCLER;
    o->items = jv_list_new(vm, a->npos).u.list;
    for (i = 0; i < a->npos; i++) {
        o->items->items[i] = a->pos[i];
    }
    o->items->n = a->npos;
    v.u.obj = o;
    return v;
}


static jv
g_joiner(jinja_vm *vm, jinja_args *a)
{
    static const char *const names[] = { "sep" };
    jv       v = jv_make(JV_OBJ), arg[1];
    jv_obj  *o;

    jinja_bind(vm, "joiner", a, names, 1, 0, arg);
    o = jinja_alloc(vm, sizeof(jv_obj));
    memset(o, 0, sizeof(*o));
    o->kind = JO_JOINER;
    o->sep = jv_given(arg[0]) ? arg[0] : jv_lit(", ");
    v.u.obj = o;
    return v;
}


static jv
g_lipsum(jinja_vm *vm, jinja_args *a)
{
    jinja_fail(vm, "lipsum() is random text and not supported in chat templates");
}


static const jv_func jinja_globals[] = {
    { JF_BUILTIN, "range", NULL, NULL, g_range, NULL, { 0 } },
    { JF_BUILTIN, "dict", NULL, NULL, g_dict, NULL, { 0 } },
    { JF_BUILTIN, "namespace", NULL, NULL, g_namespace, NULL, { 0 } },
    { JF_BUILTIN, "raise_exception", NULL, NULL, g_raise_exception, NULL, { 0 } },
    { JF_BUILTIN, "strftime_now", NULL, NULL, g_strftime_now, NULL, { 0 } },
    { JF_BUILTIN, "cycler", NULL, NULL, g_cycler, NULL, { 0 } },
    { JF_BUILTIN, "joiner", NULL, NULL, g_joiner, NULL, { 0 } },
    { JF_BUILTIN, "lipsum", NULL, NULL, g_lipsum, NULL, { 0 } },
};


jv
jinja_global_lookup(const char *name, size_t len)
{
    size_t  i;
    jv      v;

    for (i = 0; i < sizeof(jinja_globals) / sizeof(jinja_globals[0]); i++) {
        if (strlen(jinja_globals[i].name) == len
            && memcmp(jinja_globals[i].name, name, len) == 0)
        {
            v = jv_make(JV_FUNC);
            v.u.fn = (jv_func *) &jinja_globals[i];
            return v;
        }
    }
    return jv_undef_plain();
}
