/*
 * jinja_eval.c -- the tree-walking evaluator: statements, expressions,
 * scopes, macros and calls.
 *
 * Scoping follows what jinja2's compiled code does, observed as dynamic
 * scopes: the template's variables form the root scope (top-level
 * {% set %} writes there); each for-loop iteration, macro call, caller
 * body and {% with %} gets a child scope, so assignments inside them do
 * not leak out (hence namespace() in real templates); {% if %} opens no
 * scope.  A macro's scope hangs below the scope it was defined in and
 * names are resolved when it runs.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "jinja.h"


static jv eval(jinja_vm *vm, jinja_scope *s, const jinja_node *n);
static jinja_flow exec_body(jinja_vm *vm, jinja_scope *s, const jinja_nodes *body);


/* ------------------------------------------------------------------ scopes */

jinja_scope *
jinja_scope_new(jinja_vm *vm, jinja_scope *parent)
{
    jinja_scope  *s = jinja_alloc(vm, sizeof(jinja_scope));

    memset(s, 0, sizeof(*s));
    s->parent = parent;
    return s;
}


#define JINJA_SCOPE_LINEAR  8    /* up to this many variables: a linear scan */


static int
var_is(const struct jinja_var *v, const char *name, size_t len, uint32_t hash)
{
    return v->hash == hash && v->len == len && memcmp(v->name, name, len) == 0;
}


/* The variable's index in s, or -1. */
static long
scope_find(const jinja_scope *s, const char *name, size_t len, uint32_t hash)
{
    uint32_t  i, slot;

    if (s->index == NULL) {
        for (i = 0; i < s->n; i++) {
            if (var_is(&s->vars[i], name, len, hash)) {
                return (long) i;
            }
        }
        return -1;
    }
    for (slot = hash & (s->index_cap - 1); s->index[slot];
         slot = (slot + 1) & (s->index_cap - 1))
    {
        i = s->index[slot] - 1;
        if (var_is(&s->vars[i], name, len, hash)) {
            return (long) i;
        }
    }
    return -1;
}


static void
scope_reindex(jinja_vm *vm, jinja_scope *s)
{
    uint32_t  i, slot;

    s->index_cap = s->cap * 2;
    s->index = jinja_alloc(vm, s->index_cap * sizeof(uint32_t));
    memset(s->index, 0, s->index_cap * sizeof(uint32_t));
    for (i = 0; i < s->n; i++) {
        for (slot = s->vars[i].hash & (s->index_cap - 1); s->index[slot];
             slot = (slot + 1) & (s->index_cap - 1))
        {
        }
        s->index[slot] = i + 1;
    }
}


void
jinja_scope_set(jinja_vm *vm, jinja_scope *s, const char *name, size_t len,
    uint32_t hash, jv val)
{
    long               i = scope_find(s, name, len, hash);
    uint32_t           cap;
    struct jinja_var  *v;

    if (i >= 0) {
        s->vars[i].val = val;
        return;
    }
    if (s->n == s->cap) {
        cap = s->cap ? s->cap * 2 : 8;
        v = jinja_alloc(vm, cap * sizeof(*v));
        if (s->n) {
            memcpy(v, s->vars, s->n * sizeof(*v));
        }
        s->vars = v;
        s->cap = cap;
        s->index = NULL;
    }
    v = &s->vars[s->n++];
    v->name = name;
    v->len = (uint32_t) len;
    v->hash = hash;
    v->val = val;
    if (s->index) {
        uint32_t  slot;

        for (slot = hash & (s->index_cap - 1); s->index[slot];
             slot = (slot + 1) & (s->index_cap - 1))
        {
        }
        s->index[slot] = s->n;
    } else if (s->n > JINJA_SCOPE_LINEAR) {
        scope_reindex(vm, s);       /* sized for cap: at most half full */
    }
}


/* Forgets every variable of s (a loop scope between iterations). */
static void
scope_clear(jinja_scope *s)
{
    s->n = 0;
    s->index = NULL;
}


static int
scope_lookup(jinja_scope *s, const char *name, size_t len, uint32_t hash, jv *out)
{
    long  i;

    for (; s; s = s->parent) {
        i = scope_find(s, name, len, hash);
        if (i >= 0) {
            *out = s->vars[i].val;
            return 1;
        }
    }
    return 0;
}


static void
scope_set_lit(jinja_vm *vm, jinja_scope *s, const char *name, jv val)
{
    size_t  len = strlen(name);

    jinja_scope_set(vm, s, name, len, jinja_name_hash(name, len), val);
}


static jv
lookup_name(jinja_vm *vm, jinja_scope *s, const jinja_node *n)
{
    jv  v;

    if (scope_lookup(s, n->val.u.s, n->val.len, n->hash, &v)) {
        return v;
    }
    v = jinja_global_lookup(n->val.u.s, n->val.len);
    if (v.type != JV_UNDEF) {
        return v;
    }
    return jv_undef_name(vm, n->val.u.s, n->val.len);
}


/* ------------------------------------------------------------------ output capture */

static void
tick(jinja_vm *vm)
{
    if (++vm->steps > vm->max_steps) {
        jinja_fail(vm, "the template did not finish within %llu steps",
                   (unsigned long long) vm->max_steps);
    }
}


/* Renders body into a string of its own. */
static jv
capture(jinja_vm *vm, jinja_scope *s, const jinja_nodes *body)
{
    jinja_buf   buf = { 0 };
    jinja_buf  *saved = vm->out;

    vm->out = &buf;
    exec_body(vm, s, body);
    vm->out = saved;
    return jinja_buf_jv(&buf);
}


/* ------------------------------------------------------------------ assignment */

static void
assign(jinja_vm *vm, jinja_scope *s, const jinja_node *target, jv val)
{
    jv_list  *items;
    jv        ns;
    uint32_t  i;

    switch (target->kind) {
    case N_NAME:
        jinja_scope_set(vm, s, target->val.u.s, target->val.len, target->hash, val);
        return;
    case N_NSREF:
        ns = lookup_name(vm, s, target->a);
        if (ns.type != JV_NS) {
            jinja_fail(vm, "cannot assign attribute on non-namespace object");
        }
        jv_dict_set(vm, ns, target->val, val);
        return;
    case N_TUPLE:
        items = jv_iterate(vm, val);
        if (items->n < target->args.n) {
            jinja_fail(vm, "not enough values to unpack (expected %u, got %zu)",
                       target->args.n, items->n);
        }
        if (items->n > target->args.n) {
            jinja_fail(vm, "too many values to unpack (expected %u)",
                       target->args.n);
        }
        for (i = 0; i < target->args.n; i++) {
            assign(vm, s, target->args.v[i], items->items[i]);
        }
        return;
    default:
        jinja_fail(vm, "cannot assign to this expression");
    }
}


/* ------------------------------------------------------------------ calls */

/* Evaluates the arguments of a call, filter or test node. */
static void
eval_args(jinja_vm *vm, jinja_scope *s, const jinja_node *n, jinja_args *a,
    size_t extra_kw)
{
    size_t    npos = n->args.n, nkw = n->kwargs.n + extra_kw, i, k;
    jv        dyn = jv_undef_plain(), dynkw = jv_undef_plain();
    jv_list  *dl = NULL;

    if (n->c) {
        dyn = eval(vm, s, n->c);
        dl = jv_iterate(vm, dyn);
        npos += dl->n;
    }
    if (n->d) {
        dynkw = eval(vm, s, n->d);
        if (dynkw.type != JV_DICT) {
            jinja_fail(vm, "argument after ** must be a mapping, not %s",
                       jv_type_name(dynkw));
        }
        nkw += dynkw.u.dict->n;
    }
    a->pos = npos ? jinja_alloc(vm, npos * sizeof(jv)) : NULL;
    a->kw = nkw ? jinja_alloc(vm, nkw * sizeof(jinja_kwarg)) : NULL;
    a->npos = 0;
    a->nkw = 0;
    for (i = 0; i < n->args.n; i++) {
        a->pos[a->npos++] = eval(vm, s, n->args.v[i]);
    }
    if (dl) {
        for (i = 0; i < dl->n; i++) {
            a->pos[a->npos++] = dl->items[i];
        }
    }
    for (i = 0; i < n->kwargs.n; i++) {
        const jinja_node  *kw = n->kwargs.v[i];

        for (k = 0; k < a->nkw; k++) {
            if (a->kw[k].len == kw->val.len
                && memcmp(a->kw[k].name, kw->val.u.s, kw->val.len) == 0)
            {
                jinja_fail(vm, "keyword argument repeated: %.*s",
                           (int) kw->val.len, kw->val.u.s);
            }
        }
        a->kw[a->nkw].name = kw->val.u.s;
        a->kw[a->nkw].len = kw->val.len;
        a->kw[a->nkw].val = eval(vm, s, kw->a);
        a->nkw++;
    }
    if (n->d) {
        for (i = 0; i < dynkw.u.dict->n; i++) {
            jv  key = dynkw.u.dict->keys[i];

            if (key.type != JV_STR) {
                jinja_fail(vm, "keywords must be strings");
            }
            a->kw[a->nkw].name = key.u.s;
            a->kw[a->nkw].len = key.len;
            a->kw[a->nkw].val = dynkw.u.dict->vals[i];
            a->nkw++;
        }
    }
}


static int
kw_take(jinja_args *a, const char *name, size_t len, jv *out)
{
    size_t  i;

    for (i = 0; i < a->nkw; i++) {
        if (a->kw[i].len == len && memcmp(a->kw[i].name, name, len) == 0) {
            *out = a->kw[i].val;
            a->kw[i] = a->kw[--a->nkw];
            return 1;
        }
    }
    return 0;
}


/* Calls a macro or a caller body, binding arguments as runtime.Macro does. */
static jv
call_macro(jinja_vm *vm, jv_func *f, jinja_args *in)
{
    const jinja_node  *m = f->node;
    jinja_scope       *s;
    jinja_args         a = *in;
    jinja_kwarg       *kw;
    uint32_t           nparams = m->args.n, ndef = m->alt.n, i;
    size_t             npos, k;
    jv                *vals, v, caller;
    char              *given;
    int                found_caller = 0, explicit_caller = 0;
    const char        *mname = f->kind == JF_MACRO ? f->name : "caller";
    jv                 rv;

    /* own copy of the kwargs: binding removes them */
    kw = a.nkw ? jinja_alloc(vm, a.nkw * sizeof(jinja_kwarg)) : NULL;
    if (a.nkw) {
        memcpy(kw, a.kw, a.nkw * sizeof(jinja_kwarg));
    }
    a.kw = kw;

    vals = jinja_alloc(vm, (nparams + 1) * sizeof(jv));
    given = jinja_alloc(vm, nparams + 1);
    memset(given, 0, nparams + 1);
    npos = a.npos < nparams ? a.npos : nparams;
    for (i = 0; i < npos; i++) {
        vals[i] = a.pos[i];
        given[i] = 1;
    }
    for (i = 0; i < nparams; i++) {
        const jv  *pn = &m->args.v[i]->val;

        if (pn->len == 6 && memcmp(pn->u.s, "caller", 6) == 0) {
            explicit_caller = 1;
        }
    }
    if (npos != nparams) {
        for (i = (uint32_t) npos; i < nparams; i++) {
            const jv  *pn = &m->args.v[i]->val;

            if (kw_take(&a, pn->u.s, pn->len, &vals[i])) {
                given[i] = 1;
            }
            if (pn->len == 6 && memcmp(pn->u.s, "caller", 6) == 0) {
                found_caller = 1;
            }
        }
    } else {
        found_caller = explicit_caller;
    }

    s = jinja_scope_new(vm, f->closure);
    if ((m->flags & NF_USES_CALLER) && !found_caller) {
        if (!kw_take(&a, "caller", 6, &caller)) {
            caller = jv_undef_hint(vm, "No caller defined");
        }
        scope_set_lit(vm, s, "caller", caller);
    }
    if (m->flags & NF_USES_KWARGS) {
        v = jv_dict_new(vm, a.nkw);
        for (k = 0; k < a.nkw; k++) {
            jv_dict_set(vm, v, jv_str(a.kw[k].name, a.kw[k].len), a.kw[k].val);
        }
        scope_set_lit(vm, s, "kwargs", v);
    } else if (a.nkw) {
        for (k = 0; k < a.nkw; k++) {
            if (a.kw[k].len == 6 && memcmp(a.kw[k].name, "caller", 6) == 0) {
                jinja_fail(vm, "macro '%s' was invoked with two values for the "
                           "special caller argument", mname);
            }
        }
        jinja_fail(vm, "macro '%s' takes no keyword argument '%.*s'", mname,
                   (int) a.kw[0].len, a.kw[0].name);
    }
    if (m->flags & NF_USES_VARARGS) {
        v = jv_tuple_new(vm, a.npos > nparams ? a.npos - nparams : 0);
        for (k = nparams; k < a.npos; k++) {
            jv_list_push(vm, v, a.pos[k]);
        }
        scope_set_lit(vm, s, "varargs", v);
    } else if (a.npos > nparams) {
        jinja_fail(vm, "macro '%s' takes not more than %u argument(s)", mname,
                   nparams);
    }
    /* parameters, then defaults evaluated in the macro's own scope */
    for (i = 0; i < nparams; i++) {
        const jinja_node  *pn = m->args.v[i];

        if (given[i]) {
            jinja_scope_set(vm, s, pn->val.u.s, pn->val.len, pn->hash, vals[i]);
        }
    }
    for (i = 0; i < nparams; i++) {
        const jinja_node  *pn = m->args.v[i];

        if (given[i]) {
            continue;
        }
        if (i >= nparams - ndef) {
            v = eval(vm, s, m->alt.v[i - (nparams - ndef)]);
        } else {
            char  *hint = jinja_alloc(vm, pn->val.len + 40);

            sprintf(hint, "parameter '%.*s' was not provided", (int) pn->val.len,
                    pn->val.u.s);
            v = jv_undef_hint(vm, hint);
        }
        jinja_scope_set(vm, s, pn->val.u.s, pn->val.len, pn->hash, v);
    }

    if (++vm->depth > vm->max_depth) {
        jinja_fail(vm, "maximum recursion depth exceeded in macro '%s'", mname);
    }
    rv = capture(vm, s, &m->body);
    vm->depth--;
    return rv;
}


static jv run_for(jinja_vm *vm, jinja_scope *s, const jinja_node *n, jv iterable,
    int depth0);


jv
jinja_call(jinja_vm *vm, jv callee, jinja_args *a)
{
    jv_func  *f;
    jv_loop  *l;
    jv        t;
    size_t    i;

    switch (callee.type) {
    case JV_FUNC:
        break;
    case JV_UNDEF:
        jinja_fail_undefined(vm, callee);
    case JV_LOOP:
        if (!(callee.u.loop->node->flags & NF_RECURSIVE)) {
            jinja_fail(vm, "The loop must have the 'recursive' marker to be "
                       "called recursively.");
        }
        if (a->npos != 1 || a->nkw) {
            jinja_fail(vm, "loop() takes exactly one argument");
        }
        l = callee.u.loop;
        if (++vm->depth > vm->max_depth) {
            jinja_fail(vm, "maximum recursion depth exceeded in a recursive loop");
        }
        {
            jinja_buf   buf = { 0 };
            jinja_buf  *saved = vm->out;

            vm->out = &buf;
            run_for(vm, l->scope, l->node, a->pos[0], l->depth0 + 1);
            vm->out = saved;
            vm->depth--;
            return jinja_buf_jv(&buf);
        }
    case JV_OBJ:
        if (callee.u.obj->kind == JO_JOINER) {
            if (a->npos || a->nkw) {
                jinja_fail(vm, "joiner() takes no arguments");
            }
            if (!callee.u.obj->used) {
                callee.u.obj->used = 1;
                return jv_lit("");
            }
            return callee.u.obj->sep;
        }
        /* fall through */
    default:
        jinja_fail(vm, "'%s' object is not callable", jv_type_name(callee));
    }
    f = callee.u.fn;
    switch (f->kind) {
    case JF_MACRO:
    case JF_CALLER:
        return call_macro(vm, f, a);
    case JF_BUILTIN:
        return f->builtin(vm, a);
    case JF_METHOD:
        return f->method(vm, f->self, a);
    case JF_LOOP_CYCLE:
        if (a->nkw) {
            jinja_fail(vm, "cycle() takes no keyword arguments");
        }
        if (a->npos == 0) {
            jinja_fail(vm, "no items for cycling given");
        }
        return a->pos[f->self.u.loop->index0 % a->npos];
    case JF_LOOP_CHANGED:
        l = f->self.u.loop;
        t = jv_tuple_new(vm, a->npos);
        for (i = 0; i < a->npos; i++) {
            jv_list_push(vm, t, a->pos[i]);
        }
        if (l->changed_set && jv_equal(vm, l->last_changed, t)) {
            return jv_bool(0);
        }
        l->changed_set = 1;
        l->last_changed = t;
        return jv_bool(1);
    default:
        jinja_fail(vm, "this object is not callable");
    }
}


static jv
eval_call(jinja_vm *vm, jinja_scope *s, const jinja_node *n, jv caller)
{
    jv          callee = eval(vm, s, n->a);
    jinja_args  a;

    eval_args(vm, s, n, &a, caller.type == JV_FUNC);
    if (caller.type == JV_FUNC) {
        a.kw[a.nkw].name = "caller";
        a.kw[a.nkw].len = 6;
        a.kw[a.nkw].val = caller;
        a.nkw++;
    }
    return jinja_call(vm, callee, &a);
}


/* Applies the filter of node n to value. */
static jv
apply_filter(jinja_vm *vm, jinja_scope *s, const jinja_node *n, jv value)
{
    jinja_args  a;

    eval_args(vm, s, n, &a, 0);
    if (n->filter == NULL) {
        jinja_fail(vm, "no filter named '%.*s'", (int) n->val.len, n->val.u.s);
    }
    return n->filter(vm, value, &a);
}


/* The filters of {% filter %} and {% set x | f %}: a chain whose
 * innermost node has no subject; value goes in there. */
static jv
apply_filter_chain(jinja_vm *vm, jinja_scope *s, const jinja_node *n, jv value)
{
    if (n->a) {
        value = apply_filter_chain(vm, s, n->a, value);
    }
    return apply_filter(vm, s, n, value);
}


/* ------------------------------------------------------------------ expressions */

static jv
eval_compare(jinja_vm *vm, jinja_scope *s, const jinja_node *n)
{
    jv        left = eval(vm, s, n->a), right;
    uint32_t  i;
    int       r = 1, c;

    for (i = 0; i < n->args.n; i++) {
        const jinja_node  *op = n->args.v[i];

        right = eval(vm, s, op->a);
        switch (op->op) {
        case 'e': r = jv_equal(vm, left, right); break;
        case 'n': r = !jv_equal(vm, left, right); break;
        case 'i': r = jinja_contains(vm, right, left); break;
        case 'I': r = !jinja_contains(vm, right, left); break;
        default:
            {
                static const char *const sym[] = { "<", "<=", ">", ">=" };
                int  k = op->op == '<' ? 0 : op->op == 'l' ? 1 : op->op == '>' ? 2 : 3;

                c = jv_compare(vm, left, right, sym[k]);
                if (c == 2) {
                    r = 0;      /* NaN */
                } else {
                    r = k == 0 ? c < 0 : k == 1 ? c <= 0 : k == 2 ? c > 0 : c >= 0;
                }
            }
        }
        if (!r) {
            return jv_bool(0);
        }
        left = right;
    }
    return jv_bool(1);
}


/* Python values that jinja2's optimizer can write back as literals
 * (compiler.has_safe_repr): only those constants get folded. */
int
jv_safe_repr(jv v)
{
    size_t  i;

    switch (v.type) {
    case JV_NONE: case JV_BOOL: case JV_INT: case JV_FLOAT: case JV_STR:
        return 1;
    case JV_LIST:
    case JV_TUPLE:
        if (v.flags & JV_GROUP) {
            return 0;       /* groupby()'s namedtuple is not a plain tuple */
        }
        for (i = 0; i < v.u.list->n; i++) {
            if (!jv_safe_repr(v.u.list->items[i])) {
                return 0;
            }
        }
        return 1;
    case JV_DICT:
        for (i = 0; i < v.u.dict->n; i++) {
            if (!jv_safe_repr(v.u.dict->keys[i]) || !jv_safe_repr(v.u.dict->vals[i])) {
                return 0;
            }
        }
        return 1;
    case JV_ITER:
        return v.u.iter->kind == JI_RANGE;
    default:
        return 0;
    }
}


/* A fresh copy of a folded list or dict constant: jinja2 writes folded
 * constants into the generated code as literals, so every evaluation
 * builds a new object (and list.pop() cannot change the template). */
static jv
copy_const(jinja_vm *vm, jv v)
{
    jv      c;
    size_t  i;

    switch (v.type) {
    case JV_LIST:
    case JV_TUPLE:
        c = v.type == JV_LIST ? jv_list_new(vm, v.u.list->n) : jv_tuple_new(vm, v.u.list->n);
        for (i = 0; i < v.u.list->n; i++) {
            c.u.list->items[i] = copy_const(vm, v.u.list->items[i]);
        }
        c.u.list->n = v.u.list->n;
        c.flags = v.flags;
        return c;
    case JV_DICT:
        c = jv_dict_new(vm, v.u.dict->n);
        for (i = 0; i < v.u.dict->n; i++) {
            jv_dict_set(vm, c, v.u.dict->keys[i], copy_const(vm, v.u.dict->vals[i]));
        }
        return c;
    default:
        return v;
    }
}


/* Node.as_const() of jinja2: the value of n computed while parsing, or a
 * failure (longjmp) when n needs the render context. */
jv
jinja_eval_const(jinja_vm *vm, const jinja_node *n)
{
    vm->const_mode = 1;
    return eval(vm, NULL, n);
}


static jv
eval(jinja_vm *vm, jinja_scope *s, const jinja_node *n)
{
    jv          v, w;
    jinja_args  a;
    uint32_t    i;
    char       *hint;

    tick(vm);
    switch (n->kind) {
    case N_CONST:
        return (n->flags & NF_CONST_COPY) ? copy_const(vm, n->val) : n->val;
    case N_NAME:
        if (vm->const_mode) {
            jinja_fail(vm, "not a constant");
        }
        return lookup_name(vm, s, n);
    case N_LIST:
    case N_TUPLE:
        v = n->kind == N_LIST ? jv_list_new(vm, n->args.n) : jv_tuple_new(vm, n->args.n);
        for (i = 0; i < n->args.n; i++) {
            v.u.list->items[i] = eval(vm, s, n->args.v[i]);
        }
        v.u.list->n = n->args.n;
        return v;
    case N_DICT:
        v = jv_dict_new(vm, n->args.n);
        for (i = 0; i < n->args.n; i++) {
            w = eval(vm, s, n->args.v[i]);
            jv_dict_set(vm, v, w, eval(vm, s, n->alt.v[i]));
        }
        return v;
    case N_GETATTR:
        v = eval(vm, s, n->a);
        return jinja_getattr(vm, v, n->val.u.s, n->val.len);
    case N_GETITEM:
        v = eval(vm, s, n->a);
        if (n->b->kind == N_SLICE) {
            const jinja_node  *sl = n->b;
            jv  st = sl->a ? eval(vm, s, sl->a) : jv_none();
            jv  en = sl->b ? eval(vm, s, sl->b) : jv_none();
            jv  sp = sl->c ? eval(vm, s, sl->c) : jv_none();

            if (vm->const_mode) {
                return jinja_slice(vm, v, st, en, sp);   /* sandbox getitem() */
            }
            return jinja_slice_strict(vm, v, st, en, sp);
        }
        return jinja_getitem(vm, v, eval(vm, s, n->b));
    case N_SLICE:
        jinja_fail(vm, "a slice is only valid inside []");
    case N_CALL:
        if (vm->const_mode) {
            jinja_fail(vm, "not a constant");
        }
        return eval_call(vm, s, n, jv_undef_plain());
    case N_FILTER:
        if (vm->const_mode && jinja_filter_needs_context(n->filter)) {
            jinja_fail(vm, "not a constant");
        }
        return apply_filter(vm, s, n, eval(vm, s, n->a));
    case N_TEST:
        v = eval(vm, s, n->a);
        eval_args(vm, s, n, &a, 0);
        if (n->test == NULL) {
            jinja_fail(vm, "no test named '%.*s'", (int) n->val.len, n->val.u.s);
        }
        return jv_bool(n->test(vm, v, &a));
    case N_UNARY:
        v = eval(vm, s, n->a);
        if (n->op == 'n') {
            return jv_bool(!jv_truthy(v));
        }
        return jinja_negate(vm, v, n->op == '+');
    case N_BINARY:
        v = eval(vm, s, n->a);
        return jinja_binop(vm, n->op, v, eval(vm, s, n->b));
    case N_AND:
        v = eval(vm, s, n->a);
        return jv_truthy(v) ? eval(vm, s, n->b) : v;
    case N_OR:
        v = eval(vm, s, n->a);
        return jv_truthy(v) ? v : eval(vm, s, n->b);
    case N_CONCAT:
        {
            jv  *parts = jinja_alloc(vm, n->args.n * sizeof(jv));

            for (i = 0; i < n->args.n; i++) {
                parts[i] = eval(vm, s, n->args.v[i]);
            }
            return jinja_concat_str(vm, parts, n->args.n);
        }
    case N_COMPARE:
        return eval_compare(vm, s, n);
    case N_CONDEXPR:
        if (jv_truthy(eval(vm, s, n->b))) {
            return eval(vm, s, n->a);
        }
        if (n->c) {
            return eval(vm, s, n->c);
        }
        if (vm->const_mode) {
            jinja_fail(vm, "not a constant");
        }
        hint = jinja_alloc(vm, 128);
        snprintf(hint, 128, "the inline if-expression on line %u evaluated to "
                 "false and no else section was defined.", n->line);
        return jv_undef_hint(vm, hint);
    default:
        jinja_fail(vm, "internal error: node %d is not an expression", n->kind);
    }
}


/* ------------------------------------------------------------------ statements */

static jv
run_for(jinja_vm *vm, jinja_scope *s, const jinja_node *n, jv iterable, int depth0)
{
    jv_list      *items;
    jinja_scope  *body;
    jv_loop      *loop;
    jv            lv, filtered;
    size_t        i;
    jinja_flow    flow;
    int           completed = 0;
    uint32_t      loop_hash = jinja_name_hash("loop", 4);

    items = jv_iterate(vm, iterable);
    if (n->c) {
        /* for x in xs if cond: filter first, so loop.length is right */
        body = jinja_scope_new(vm, s);
        filtered = jv_list_new(vm, items->n);
        for (i = 0; i < items->n; i++) {
            scope_clear(body);
            assign(vm, body, n->a, items->items[i]);
            if (jv_truthy(eval(vm, body, n->c))) {
                jv_list_push(vm, filtered, items->items[i]);
            }
        }
        items = filtered.u.list;
    } else if (iterable.type == JV_LIST) {
        /* a snapshot: the body may pop() from the list it walks */
        jv  copy = jv_list_new(vm, items->n);

        if (items->n) {
            memcpy(copy.u.list->items, items->items, items->n * sizeof(jv));
        }
        copy.u.list->n = items->n;
        items = copy.u.list;
    }
    loop = jinja_alloc(vm, sizeof(jv_loop));
    memset(loop, 0, sizeof(*loop));
    loop->items = items;
    loop->depth0 = depth0;
    loop->node = n;
    loop->scope = s;
    lv = jv_make(JV_LOOP);
    lv.u.loop = loop;

    body = jinja_scope_new(vm, s);
    for (i = 0; i < items->n; i++) {
        tick(vm);
        scope_clear(body);
        loop->index0 = i;
        jinja_scope_set(vm, body, "loop", 4, loop_hash, lv);
        assign(vm, body, n->a, items->items[i]);
        flow = exec_body(vm, body, &n->body);
        if (flow == JINJA_BREAK) {
            break;
        }
        if (flow == JINJA_OK) {
            completed = 1;
        }
    }
    /* jinja2 clears its "no iteration" flag at the end of the body, so a
     * loop whose every pass ended in break or continue runs its else */
    if (!completed && n->alt.n) {
        exec_body(vm, jinja_scope_new(vm, s), &n->alt);
    }
    return jv_none();
}


static jinja_flow
exec_node(jinja_vm *vm, jinja_scope *s, const jinja_node *n)
{
    jv           v, f;
    uint32_t     i;
    jinja_scope *inner;

    vm->line = n->line;
    switch (n->kind) {
    case N_DATA:
        jinja_buf_add(vm, vm->out, n->val.u.s, n->val.len);
        return JINJA_OK;
    case N_OUTPUT:
        if (n->flags & 0x200) {
            for (i = 0; i < n->a->args.n; i++) {
                jv_write_str(vm, vm->out, eval(vm, s, n->a->args.v[i]));
            }
        } else {
            jv_write_str(vm, vm->out, eval(vm, s, n->a));
        }
        return JINJA_OK;
    case N_IF:
        if (jv_truthy(eval(vm, s, n->a))) {
            return exec_body(vm, s, &n->body);
        }
        return exec_body(vm, s, &n->alt);
    case N_FOR:
        run_for(vm, s, n, eval(vm, s, n->b), 0);
        return JINJA_OK;
    case N_SET:
        assign(vm, s, n->a, eval(vm, s, n->b));
        return JINJA_OK;
    case N_SET_BLOCK:
        v = capture(vm, jinja_scope_new(vm, s), &n->body);
        if (n->c) {
            v = apply_filter_chain(vm, s, n->c, v);
        }
        assign(vm, s, n->a, v);
        return JINJA_OK;
    case N_MACRO:
        f = jv_func_new(vm, JF_MACRO, jinja_strdup(vm, n->val.u.s, n->val.len));
        f.u.fn->node = n;
        f.u.fn->closure = s;
        jinja_scope_set(vm, s, n->val.u.s, n->val.len, n->hash, f);
        return JINJA_OK;
    case N_CALL_BLOCK:
        f = jv_func_new(vm, JF_CALLER, "caller");
        f.u.fn->node = n;
        f.u.fn->closure = s;
        jv_write_str(vm, vm->out, eval_call(vm, s, n->a, f));
        return JINJA_OK;
    case N_FILTER_BLOCK:
        v = capture(vm, jinja_scope_new(vm, s), &n->body);
        jv_write_str(vm, vm->out, apply_filter_chain(vm, s, n->c, v));
        return JINJA_OK;
    case N_WITH:
        inner = jinja_scope_new(vm, s);
        for (i = 0; i < n->args.n; i++) {
            assign(vm, inner, n->args.v[i], eval(vm, s, n->alt.v[i]));
        }
        return exec_body(vm, inner, &n->body);
    case N_GENERATION:
        /* transformers' AssistantTracker: the body, rendered as a caller */
        exec_body(vm, jinja_scope_new(vm, s), &n->body);
        return JINJA_OK;
    case N_BREAK:
        return JINJA_BREAK;
    case N_CONTINUE:
        return JINJA_CONTINUE;
    default:
        jinja_fail(vm, "internal error: node %d is not a statement", n->kind);
    }
}


static jinja_flow
exec_body(jinja_vm *vm, jinja_scope *s, const jinja_nodes *body)
{
    uint32_t    i;
    jinja_flow  flow;

    for (i = 0; i < body->n; i++) {
        flow = exec_node(vm, s, body->v[i]);
        if (flow != JINJA_OK) {
            return flow;
        }
    }
    return JINJA_OK;
}


/* ------------------------------------------------------------------ entry */

void
jinja_vm_init(jinja_vm *vm)
{
    memset(vm, 0, sizeof(*vm));
    jinja_arena_init(&vm->arena, JINJA_MAX_MEMORY);
    vm->max_steps = JINJA_MAX_STEPS;
    vm->max_depth = JINJA_MAX_DEPTH;
}


void
jinja_vm_free(jinja_vm *vm)
{
    jinja_arena_free(&vm->arena);
}


char *
jinja_render(const jinja_template *t, jinja_vm *vm, size_t *len)
{
    jinja_buf   out = { 0 };
    char       *res;

    vm->out = &out;
    if (vm->root == NULL) {
        vm->root = jinja_scope_new(vm, NULL);
    }
    exec_body(vm, vm->root, &t->body);
    res = malloc(out.len + 1);
    if (res == NULL) {
        jinja_fail(vm, "out of memory");
    }
    if (out.len) {
        memcpy(res, out.p, out.len);
    }
    res[out.len] = '\0';
    *len = out.len;
    return res;
}
