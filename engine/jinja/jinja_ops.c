/*
 * jinja_ops.c -- operators and element access with Python semantics, as
 * seen through jinja2's ImmutableSandboxedEnvironment:
 *   x.name   attribute first (methods, loop.*), then x["name"];
 *   x[key]   item first, then the attribute named key;
 *   missing  an Undefined that remembers what was missing;
 *   unsafe   "_"-prefixed attributes and methods that mutate a dict
 *            (or append/insert/... on a list) give an Undefined that
 *            raises SecurityError when called.
 */
#define _GNU_SOURCE         /* memmem() */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "jinja.h"


/* ------------------------------------------------------------------ arguments */

#define JV_NOT_GIVEN  0xff


int
jv_given(jv v)
{
    return !(v.type == JV_UNDEF && v.flags == JV_NOT_GIVEN);
}


void
jinja_bind(jinja_vm *vm, const char *fname, jinja_args *a,
    const char *const *names, size_t nnames, size_t nrequired, jv *out)
{
    size_t  i, k;

    for (i = 0; i < nnames; i++) {
        out[i] = jv_make(JV_UNDEF);
        out[i].flags = JV_NOT_GIVEN;
    }
    if (a->npos > nnames) {
        jinja_fail(vm, "%s() takes at most %zu arguments (%zu given)", fname,
                   nnames, a->npos);
    }
    for (i = 0; i < a->npos; i++) {
        out[i] = a->pos[i];
    }
    for (k = 0; k < a->nkw; k++) {
        for (i = 0; i < nnames; i++) {
            if (strlen(names[i]) == a->kw[k].len
                && memcmp(names[i], a->kw[k].name, a->kw[k].len) == 0)
            {
                break;
            }
        }
        if (i == nnames) {
            jinja_fail(vm, "%s() got an unexpected keyword argument '%.*s'",
                       fname, (int) a->kw[k].len, a->kw[k].name);
        }
        if (jv_given(out[i])) {
            jinja_fail(vm, "%s() got multiple values for argument '%s'",
                       fname, names[i]);
        }
        out[i] = a->kw[k].val;
    }
    for (i = 0; i < nrequired; i++) {
        if (!jv_given(out[i])) {
            jinja_fail(vm, "%s() missing required argument '%s'", fname,
                       names[i]);
        }
    }
}


int64_t
jinja_arg_int(jinja_vm *vm, const char *fname, jv v)
{
    if (v.type == JV_INT || v.type == JV_BOOL) {
        return v.u.i;
    }
    if (v.type == JV_UNDEF) {
        jinja_fail_undefined(vm, v);
    }
    jinja_fail(vm, "%s(): '%s' object cannot be interpreted as an integer",
               fname, jv_type_name(v));
}


/* ------------------------------------------------------------------ attributes */

static int
is_dunder(const char *name, size_t len)
{
    return len >= 4 && name[0] == '_' && name[1] == '_'
           && name[len - 1] == '_' && name[len - 2] == '_';
}


static int
name_is(const char *name, size_t len, const char *lit)
{
    return strlen(lit) == len && memcmp(name, lit, len) == 0;
}


static jv
loop_getattr(jinja_vm *vm, jv obj, const char *name, size_t len)
{
    jv_loop  *l = obj.u.loop;
    int64_t   n = (int64_t) l->items->n, i = (int64_t) l->index0;
    jv        f;

    if (name_is(name, len, "index")) {
        return jv_int(i + 1);
    }
    if (name_is(name, len, "index0")) {
        return jv_int(i);
    }
    if (name_is(name, len, "revindex")) {
        return jv_int(n - i);
    }
    if (name_is(name, len, "revindex0")) {
        return jv_int(n - i - 1);
    }
    if (name_is(name, len, "first")) {
        return jv_bool(i == 0);
    }
    if (name_is(name, len, "last")) {
        return jv_bool(i == n - 1);
    }
    if (name_is(name, len, "length")) {
        return jv_int(n);
    }
    if (name_is(name, len, "depth")) {
        return jv_int(l->depth0 + 1);
    }
    if (name_is(name, len, "depth0")) {
        return jv_int(l->depth0);
    }
    if (name_is(name, len, "previtem")) {
        return i > 0 ? l->items->items[i - 1]
                     : jv_undef_hint(vm, "there is no previous item");
    }
    if (name_is(name, len, "nextitem")) {
        return i + 1 < n ? l->items->items[i + 1]
                         : jv_undef_hint(vm, "there is no next item");
    }
    if (name_is(name, len, "cycle") || name_is(name, len, "changed")) {
        f = jv_func_new(vm, name[0] == 'c' && name[1] == 'y' ? JF_LOOP_CYCLE
                                                              : JF_LOOP_CHANGED,
                        name[1] == 'y' ? "cycle" : "changed");
        f.u.fn->self = obj;
        return f;
    }
    return jv_undef_attr(vm, obj, name, len);
}


static jv
obj_getattr(jinja_vm *vm, jv obj, const char *name, size_t len)
{
    jv_obj  *o = obj.u.obj;
    int      found;
    jv       m;

    if (o->kind == JO_CYCLER && name_is(name, len, "current")) {
        return o->items->items[o->pos];
    }
    m = jinja_method_lookup(vm, obj, name, len, &found);
    if (found) {
        return m;
    }
    return jv_undef_attr(vm, obj, name, len);
}


/* The Python attribute of obj, or *found = 0. */
static jv
py_getattr(jinja_vm *vm, jv obj, const char *name, size_t len, int *found)
{
    jv  v;

    *found = 1;
    switch (obj.type) {
    case JV_NS:
        if (jv_dict_get_str(obj, name, len, &v)) {
            return v;
        }
        break;
    case JV_LOOP:
        v = loop_getattr(vm, obj, name, len);
        if (v.type != JV_UNDEF || v.u.undef == NULL || v.u.undef->hint) {
            return v;
        }
        break;
    case JV_OBJ:
        return obj_getattr(vm, obj, name, len);
    case JV_TUPLE:
        if (obj.flags & JV_GROUP) {
            if (name_is(name, len, "grouper")) {
                return obj.u.list->items[0];
            }
            if (name_is(name, len, "list")) {
                return obj.u.list->items[1];
            }
        }
        /* fall through */
    default:
        v = jinja_method_lookup(vm, obj, name, len, found);
        if (*found) {
            return v;
        }
        if (is_dunder(name, len)) {
            /* every object has dunder attributes; the sandbox hides them */
            return jv_undef_unsafe(vm, obj, name, len);
        }
        break;
    }
    *found = 0;
    return jv_undef_plain();
}


jv
jinja_getattr(jinja_vm *vm, jv obj, const char *name, size_t len)
{
    jv   v;
    int  found;

    if (obj.type == JV_UNDEF) {
        jinja_fail_undefined(vm, obj);
    }
    v = py_getattr(vm, obj, name, len, &found);
    if (found) {
        return v;
    }
    if (obj.type == JV_DICT && jv_dict_get_str(obj, name, len, &v)) {
        return v;
    }
    return jv_undef_attr(vm, obj, name, len);
}


/* ------------------------------------------------------------------ items */

static int
index_of(jv key, int64_t n, int64_t *out)
{
    int64_t  i;

    if (key.type != JV_INT && key.type != JV_BOOL) {
        return 0;
    }
    i = key.u.i;
    if (i < 0) {
        i += n;
    }
    if (i < 0 || i >= n) {
        return 0;
    }
    *out = i;
    return 1;
}


static jv
str_index(jv s, int64_t i)
{
    size_t  start, end;

    if (s.len == ju_count(s.u.s, s.len)) {
        return jv_str(s.u.s + i, 1);        /* ASCII */
    }
    start = ju_offset(s.u.s, s.len, (size_t) i);
    end = start;
    ju_decode(s.u.s, s.len, &end);
    return jv_str(s.u.s + start, end - start);
}


jv
jinja_getitem(jinja_vm *vm, jv obj, jv key)
{
    jv       v;
    int64_t  i;
    int      found;

    switch (obj.type) {
    case JV_UNDEF:
        jinja_fail_undefined(vm, obj);
    case JV_LIST:
    case JV_TUPLE:
        if (index_of(key, (int64_t) obj.u.list->n, &i)) {
            return obj.u.list->items[i];
        }
        break;
    case JV_STR:
        if (index_of(key, jv_length(vm, obj), &i)) {
            v = str_index(obj, i);
            v.flags = obj.flags & JV_SAFE;
            return v;
        }
        break;
    case JV_DICT:
        if (jv_dict_get(obj, key, &v)) {
            return v;
        }
        break;
    case JV_ITER:
        if (obj.u.iter->kind == JI_RANGE
            && index_of(key, (int64_t) obj.u.iter->items->n, &i))
        {
            return obj.u.iter->items->items[i];
        }
        break;
    default:
        break;
    }
    if (key.type == JV_STR) {
        v = py_getattr(vm, obj, key.u.s, key.len, &found);
        if (found) {
            return v;
        }
        return jv_undef_attr(vm, obj, key.u.s, key.len);
    }
    if (key.type == JV_INT || key.type == JV_BOOL) {
        return jv_undef_index(vm, obj, key.u.i);
    }
    return jv_undef_plain();
}


/* Python's PySlice_AdjustIndices. */
static void
slice_indices(int64_t n, jv start, jv stop, int64_t step, int64_t *s, int64_t *e)
{
    int64_t  lower = step > 0 ? 0 : -1, upper = step > 0 ? n : n - 1;

    if (start.type == JV_NONE) {
        *s = step > 0 ? lower : upper;
    } else {
        *s = start.u.i;
        if (*s < 0) {
            *s += n;
            if (*s < lower) {
                *s = lower;
            }
        } else if (*s > upper) {
            *s = upper;
        }
    }
    if (stop.type == JV_NONE) {
        *e = step > 0 ? upper : lower;
    } else {
        *e = stop.u.i;
        if (*e < 0) {
            *e += n;
            if (*e < lower) {
                *e = lower;
            }
        } else if (*e > upper) {
            *e = upper;
        }
    }
}


static int
slice_arg_ok(jv v)
{
    return v.type == JV_NONE || v.type == JV_INT || v.type == JV_BOOL;
}


jv
jinja_slice(jinja_vm *vm, jv obj, jv start, jv stop, jv step)
{
    int64_t  n, st, s, e, i;
    jv       out;
    size_t   *offs, k, pos;
    int      ascii;

    if (obj.type == JV_UNDEF) {
        jinja_fail_undefined(vm, obj);
    }
    if (obj.type != JV_LIST && obj.type != JV_TUPLE && obj.type != JV_STR
        && !(obj.type == JV_ITER && obj.u.iter->kind == JI_RANGE))
    {
        return jv_undef_plain();    /* TypeError, swallowed by getitem */
    }
    if (!slice_arg_ok(start) || !slice_arg_ok(stop) || !slice_arg_ok(step)) {
        return jv_undef_plain();
    }
    st = step.type == JV_NONE ? 1 : step.u.i;
    if (st == 0) {
        jinja_fail(vm, "slice step cannot be zero");
    }
    if (obj.type == JV_STR) {
        n = jv_length(vm, obj);
        slice_indices(n, start, stop, st, &s, &e);
        ascii = n == (int64_t) obj.len;
        if (st == 1) {
            if (e <= s) {
                return jv_lit("");
            }
            if (ascii) {
                out = jv_str(obj.u.s + s, (size_t) (e - s));
            } else {
                size_t  a = ju_offset(obj.u.s, obj.len, (size_t) s);
                size_t  b = a + ju_offset(obj.u.s + a, obj.len - a, (size_t) (e - s));

                out = jv_str(obj.u.s + a, b - a);
            }
            out.flags = obj.flags & JV_SAFE;
            return out;
        }
        /* general step: byte offsets of every code point first */
        offs = jinja_alloc(vm, ((size_t) n + 1) * sizeof(size_t));
        for (k = 0, pos = 0; k < (size_t) n; k++) {
            offs[k] = pos;
            ju_decode(obj.u.s, obj.len, &pos);
        }
        offs[n] = obj.len;
        {
            jinja_buf  b = { 0 };

            for (i = s; st > 0 ? i < e : i > e; i += st) {
                jinja_buf_add(vm, &b, obj.u.s + offs[i], offs[i + 1] - offs[i]);
            }
            out = jinja_buf_jv(&b);
        }
        out.flags = obj.flags & JV_SAFE;
        return out;
    }
    {
        jv_list  *l = obj.type == JV_ITER ? obj.u.iter->items : obj.u.list;

        n = (int64_t) l->n;
        slice_indices(n, start, stop, st, &s, &e);
        if (obj.type == JV_ITER) {
            /* range(a, b, c)[i:j:k] is range(a + i*c, a + j*c, c*k) */
            jv_iter  *r = obj.u.iter;

            out = jv_list_new(vm, 0);
            for (i = s; st > 0 ? i < e : i > e; i += st) {
                jv_list_push(vm, out, l->items[i]);
            }
            out = jv_iter_new(vm, JI_RANGE, out.u.list);
            out.u.iter->start = r->start + s * r->step;
            out.u.iter->stop = r->start + e * r->step;
            out.u.iter->step = r->step * st;
            return out;
        }
        out = obj.type == JV_TUPLE ? jv_tuple_new(vm, 0) : jv_list_new(vm, 0);
        if (st == 1) {
            if (e > s) {
                /* share the items: lists are copied before mutation */
                out = obj.type == JV_TUPLE ? jv_tuple_new(vm, (size_t) (e - s))
                                           : jv_list_new(vm, (size_t) (e - s));
                memcpy(out.u.list->items, l->items + s, (size_t) (e - s) * sizeof(jv));
                out.u.list->n = (size_t) (e - s);
            }
            return out;
        }
        for (i = s; st > 0 ? i < e : i > e; i += st) {
            jv_list_push(vm, out, l->items[i]);
        }
        return out;
    }
}


/* obj[a:b:c] as Python does it: jinja2 compiles slices to a plain
 * subscript, outside the sandbox's forgiving getitem(). */
jv
jinja_slice_strict(jinja_vm *vm, jv obj, jv start, jv stop, jv step)
{
    switch (obj.type) {
    case JV_UNDEF:
        jinja_fail_undefined(vm, obj);
    case JV_LIST:
    case JV_TUPLE:
    case JV_STR:
        break;
    case JV_DICT:
        jinja_fail(vm, "unhashable type: 'slice'");
    case JV_ITER:
        if (obj.u.iter->kind == JI_RANGE) {
            break;
        }
        /* fall through */
    default:
        jinja_fail(vm, "'%s' object is not subscriptable", jv_type_name(obj));
    }
    if (!slice_arg_ok(start) || !slice_arg_ok(stop) || !slice_arg_ok(step)) {
        jv  bad = !slice_arg_ok(start) ? start : !slice_arg_ok(stop) ? stop : step;

        if (bad.type == JV_UNDEF) {
            jinja_fail(vm, "slice indices must be integers or None or have an "
                       "__index__ method");
        }
        jinja_fail(vm, "slice indices must be integers or None or have an "
                   "__index__ method");
    }
    return jinja_slice(vm, obj, start, stop, step);
}


/* ------------------------------------------------------------------ arithmetic */

static int
is_num(jv v)
{
    return v.type == JV_INT || v.type == JV_BOOL || v.type == JV_FLOAT;
}


static double
to_double(jv v)
{
    return v.type == JV_FLOAT ? v.u.f : (double) v.u.i;
}


static const char *
op_name(int op)
{
    switch (op) {
    case 'F': return "//";
    case 'P': return "**";
    case '+': return "+";
    case '-': return "-";
    case '*': return "*";
    case '/': return "/";
    default:  return "%";
    }
}


__attribute__((noreturn)) static void
binop_fail(jinja_vm *vm, int op, jv a, jv b)
{
    if (a.type == JV_UNDEF) {
        jinja_fail_undefined(vm, a);
    }
    if (b.type == JV_UNDEF) {
        jinja_fail_undefined(vm, b);
    }
    if (op == '+' && (a.type == JV_STR || a.type == JV_LIST || a.type == JV_TUPLE)
        && !(a.flags & JV_SAFE))
    {
        jinja_fail(vm, "can only concatenate %s (not \"%s\") to %s",
                   jv_type_name(a), jv_type_name(b), jv_type_name(a));
    }
    jinja_fail(vm, "unsupported operand type(s) for %s: '%s' and '%s'",
               op_name(op), jv_type_name(a), jv_type_name(b));
}


static jv
seq_concat(jinja_vm *vm, jv a, jv b)
{
    jv      out;
    size_t  n = a.u.list->n + b.u.list->n;

    out = a.type == JV_TUPLE ? jv_tuple_new(vm, n) : jv_list_new(vm, n);
    if (a.u.list->n) {
        memcpy(out.u.list->items, a.u.list->items, a.u.list->n * sizeof(jv));
    }
    if (b.u.list->n) {
        memcpy(out.u.list->items + a.u.list->n, b.u.list->items,
               b.u.list->n * sizeof(jv));
    }
    out.u.list->n = n;
    return out;
}


/* str + str, with markupsafe's rule: a Markup operand escapes the other. */
static jv
str_concat(jinja_vm *vm, jv a, jv b)
{
    jinja_buf  buf = { 0 };
    jv         r;

    if ((a.flags & JV_SAFE) && !(b.flags & JV_SAFE)) {
        jinja_buf_add(vm, &buf, a.u.s, a.len);
        jinja_escape_html(vm, &buf, b.u.s, b.len);
    } else if (!(a.flags & JV_SAFE) && (b.flags & JV_SAFE)) {
        jinja_escape_html(vm, &buf, a.u.s, a.len);
        jinja_buf_add(vm, &buf, b.u.s, b.len);
    } else {
        jinja_buf_add(vm, &buf, a.u.s, a.len);
        jinja_buf_add(vm, &buf, b.u.s, b.len);
    }
    r = jinja_buf_jv(&buf);
    r.flags = (a.flags | b.flags) & JV_SAFE;
    return r;
}


static jv
repeat(jinja_vm *vm, jv seq, int64_t times)
{
    jinja_buf  buf = { 0 };
    jv         out;
    int64_t    i;

    if (times < 0) {
        times = 0;
    }
    if (seq.type == JV_STR) {
        if (times && (uint64_t) seq.len * (uint64_t) times > UINT32_MAX) {
            jinja_fail(vm, "the repeated string is too long");
        }
        for (i = 0; i < times; i++) {
            jinja_buf_add(vm, &buf, seq.u.s, seq.len);
        }
        out = jinja_buf_jv(&buf);
        out.flags = seq.flags & JV_SAFE;
        return out;
    }
    if (times && seq.u.list->n * (uint64_t) times > 100000000) {
        jinja_fail(vm, "the repeated list is too long");
    }
    out = seq.type == JV_TUPLE ? jv_tuple_new(vm, 0) : jv_list_new(vm, 0);
    for (i = 0; i < times; i++) {
        size_t  k;

        for (k = 0; k < seq.u.list->n; k++) {
            jv_list_push(vm, out, seq.u.list->items[k]);
        }
    }
    return out;
}


/* CPython's float_divmod. */
static void
float_divmod(double vx, double wx, double *floordiv, double *mod)
{
    double  div, m, fd;

    m = fmod(vx, wx);
    div = (vx - m) / wx;
    if (m != 0.0) {
        if ((wx < 0) != (m < 0)) {
            m += wx;
            div -= 1.0;
        }
    } else {
        m = copysign(0.0, wx);
    }
    if (div != 0.0) {
        fd = floor(div);
        if (div - fd > 0.5) {
            fd += 1.0;
        }
    } else {
        fd = copysign(0.0, vx / wx);
    }
    *floordiv = fd;
    *mod = m;
}


static jv
int_pow(jinja_vm *vm, int64_t base, int64_t exp)
{
    int64_t  r = 1;

    if (exp < 0) {
        if (base == 0) {
            jinja_fail(vm, "0.0 cannot be raised to a negative power");
        }
        return jv_float(pow((double) base, (double) exp));
    }
    while (exp > 0) {
        if (exp & 1) {
            if (__builtin_mul_overflow(r, base, &r)) {
                jinja_fail(vm, "integer overflow in **");
            }
        }
        exp >>= 1;
        if (exp && __builtin_mul_overflow(base, base, &base)) {
            jinja_fail(vm, "integer overflow in **");
        }
    }
    return jv_int(r);
}


jv
jinja_binop(jinja_vm *vm, int op, jv a, jv b)
{
    int64_t  r;
    double   x, y, fd, m;

    if (is_num(a) && is_num(b)) {
        if (op == '/') {
            y = to_double(b);
            if (y == 0.0) {
                jinja_fail(vm, "division by zero");
            }
            return jv_float(to_double(a) / y);
        }
        if (a.type == JV_FLOAT || b.type == JV_FLOAT) {
            x = to_double(a);
            y = to_double(b);
            switch (op) {
            case '+': return jv_float(x + y);
            case '-': return jv_float(x - y);
            case '*': return jv_float(x * y);
            case 'F':
            case '%':
                if (y == 0.0) {
                    jinja_fail(vm, op == 'F' ? "float floor division by zero"
                                             : "float modulo");
                }
                float_divmod(x, y, &fd, &m);
                return jv_float(op == 'F' ? fd : m);
            case 'P':
                if (x == 0.0 && y < 0) {
                    jinja_fail(vm, "0.0 cannot be raised to a negative power");
                }
                return jv_float(pow(x, y));
            }
        }
        switch (op) {
        case '+':
            if (__builtin_add_overflow(a.u.i, b.u.i, &r)) {
                jinja_fail(vm, "integer overflow in +");
            }
            return jv_int(r);
        case '-':
            if (__builtin_sub_overflow(a.u.i, b.u.i, &r)) {
                jinja_fail(vm, "integer overflow in -");
            }
            return jv_int(r);
        case '*':
            if (__builtin_mul_overflow(a.u.i, b.u.i, &r)) {
                jinja_fail(vm, "integer overflow in *");
            }
            return jv_int(r);
        case 'F':
        case '%':
            if (b.u.i == 0) {
                jinja_fail(vm, "integer division or modulo by zero");
            }
            if (a.u.i == INT64_MIN && b.u.i == -1) {
                jinja_fail(vm, "integer overflow in //");
            }
            r = a.u.i / b.u.i;
            m = (double) 0;
            {
                int64_t  rem = a.u.i % b.u.i;

                if (rem != 0 && ((rem < 0) != (b.u.i < 0))) {
                    r -= 1;
                    rem += b.u.i;
                }
                return op == 'F' ? jv_int(r) : jv_int(rem);
            }
        case 'P':
            return int_pow(vm, a.u.i, b.u.i);
        }
    }
    if (op == '+') {
        if (a.type == JV_STR && b.type == JV_STR) {
            return str_concat(vm, a, b);
        }
        if ((a.type == JV_LIST || a.type == JV_TUPLE) && b.type == a.type) {
            return seq_concat(vm, a, b);
        }
    }
    if (op == '*') {
        if ((a.type == JV_STR || a.type == JV_LIST || a.type == JV_TUPLE)
            && (b.type == JV_INT || b.type == JV_BOOL))
        {
            return repeat(vm, a, b.u.i);
        }
        if ((b.type == JV_STR || b.type == JV_LIST || b.type == JV_TUPLE)
            && (a.type == JV_INT || a.type == JV_BOOL))
        {
            return repeat(vm, b, a.u.i);
        }
    }
    if (op == '%' && a.type == JV_STR) {
        return jinja_percent_format(vm, a, b);
    }
    binop_fail(vm, op, a, b);
}


jv
jinja_negate(jinja_vm *vm, jv a, int plus)
{
    if (a.type == JV_INT || a.type == JV_BOOL) {
        if (plus) {
            return jv_int(a.u.i);
        }
        if (a.u.i == INT64_MIN) {
            jinja_fail(vm, "integer overflow in unary -");
        }
        return jv_int(-a.u.i);
    }
    if (a.type == JV_FLOAT) {
        return jv_float(plus ? a.u.f : -a.u.f);
    }
    if (a.type == JV_UNDEF) {
        jinja_fail_undefined(vm, a);
    }
    jinja_fail(vm, "bad operand type for unary %c: '%s'", plus ? '+' : '-',
               jv_type_name(a));
}


int
jinja_contains(jinja_vm *vm, jv c, jv item)
{
    jv_list  *l;
    size_t    i, j;
    jv        v;

    switch (c.type) {
    case JV_STR:
        if (item.type != JV_STR) {
            jinja_fail(vm, "'in <string>' requires string as left operand, "
                       "not %s", jv_type_name(item));
        }
        if (item.len == 0) {
            return 1;
        }
        return memmem(c.u.s, c.len, item.u.s, item.len) != NULL;
    case JV_DICT:
        if (!jv_is_hashable(item)) {
            jinja_fail(vm, "unhashable type: '%s'", jv_type_name(item));
        }
        return jv_dict_get(c, item, &v);
    case JV_ITER:
        if (c.u.iter->kind == JI_DICT_KEYS && !jv_is_hashable(item)) {
            jinja_fail(vm, "unhashable type: '%s'", jv_type_name(item));
        }
        if (c.u.iter->kind == JI_GENERATOR || c.u.iter->kind == JI_REVERSED) {
            /* consumes up to and including the match, like Python */
            jv_iter_force(vm, c.u.iter);
            l = c.u.iter->items;
            for (j = c.u.iter->pos; j < l->n; j++) {
                if (jv_equal(vm, l->items[j], item)) {
                    c.u.iter->pos = j + 1;
                    return 1;
                }
            }
            c.u.iter->pos = l->n;
            return 0;
        }
        l = c.u.iter->items;
        break;
    case JV_UNDEF:
        return 0;
    case JV_LIST:
    case JV_TUPLE:
        l = c.u.list;
        break;
    case JV_LOOP:
        l = c.u.loop->items;
        break;
    default:
        jinja_fail(vm, "argument of type '%s' is not iterable", jv_type_name(c));
    }
    for (i = 0; i < l->n; i++) {
        if (jv_equal(vm, l->items[i], item)) {
            return 1;
        }
    }
    return 0;
}


jv
jinja_concat_str(jinja_vm *vm, jv *parts, size_t n)
{
    jinja_buf  b = { 0 };
    size_t     i;

    for (i = 0; i < n; i++) {
        jv_write_str(vm, &b, parts[i]);
    }
    return jinja_buf_jv(&b);
}
