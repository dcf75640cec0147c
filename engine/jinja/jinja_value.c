/*
 * jinja_value.c -- the render arena and Python value semantics: containers,
 * truthiness, equality, ordering, hashing, iteration and len().
 */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "jinja.h"


/* ------------------------------------------------------------------ arena */

struct jinja_chunk {
    jinja_chunk  *next;
    size_t        size, used;
    /* data follows, 16-byte aligned */
};

#define JINJA_CHUNK_HDR  ((sizeof(jinja_chunk) + 15) & ~(size_t) 15)
#define JINJA_CHUNK_MIN  (64 * 1024)


void
jinja_arena_init(jinja_arena *a, size_t limit)
{
    a->head = NULL;
    a->total = 0;
    a->limit = limit;
}


void
jinja_arena_free(jinja_arena *a)
{
    jinja_chunk  *c, *next;

    for (c = a->head; c; c = next) {
        next = c->next;
        free(c);
    }
    a->head = NULL;
    a->total = 0;
}


void *
jinja_arena_alloc(jinja_arena *a, size_t n)
{
    jinja_chunk  *c;
    size_t        size;
    void         *p;

    n = (n + 15) & ~(size_t) 15;
    if (n == 0) {
        n = 16;
    }
    c = a->head;
    if (c == NULL || c->size - c->used < n) {
        size = n > JINJA_CHUNK_MIN / 2 ? n : JINJA_CHUNK_MIN;
        if (a->limit && a->total + size + JINJA_CHUNK_HDR > a->limit) {
            return NULL;
        }
        c = malloc(JINJA_CHUNK_HDR + size);
        if (c == NULL) {
            return NULL;
        }
        a->total += JINJA_CHUNK_HDR + size;
        c->size = size;
        c->used = 0;
        if (n > JINJA_CHUNK_MIN / 2 && a->head) {
            /* a big block gets its own chunk behind the current one, so
             * the free space of the current chunk is not abandoned */
            c->next = a->head->next;
            a->head->next = c;
        } else {
            c->next = a->head;
            a->head = c;
        }
    }
    p = (char *) c + JINJA_CHUNK_HDR + c->used;
    c->used += n;
    return p;
}


void *
jinja_alloc(jinja_vm *vm, size_t n)
{
    void  *p;

    p = jinja_arena_alloc(&vm->arena, n);
    if (p == NULL) {
        jinja_fail(vm, "the template needs more than %zu MB of memory",
                   vm->arena.limit >> 20);
    }
    return p;
}


char *
jinja_strdup(jinja_vm *vm, const char *s, size_t len)
{
    char  *p;

    p = jinja_alloc(vm, len + 1);
    memcpy(p, s, len);
    p[len] = '\0';
    return p;
}


void
jinja_fail(jinja_vm *vm, const char *fmt, ...)
{
    va_list  ap;
    int      n;

    if (vm->line) {
        n = snprintf(vm->err, sizeof(vm->err), "chat template error (line %u): ",
                     vm->line);
    } else {
        n = snprintf(vm->err, sizeof(vm->err), "chat template error: ");
    }
    va_start(ap, fmt);
    vsnprintf(vm->err + n, sizeof(vm->err) - (size_t) n, fmt, ap);
    va_end(ap);
    longjmp(vm->jmp, 1);
}


/* ------------------------------------------------------------------ undefined */

jv
jv_undef_plain(void)
{
    return jv_make(JV_UNDEF);
}


static jv
jv_undef_new(jinja_vm *vm, jv_undef **u)
{
    jv  v = jv_make(JV_UNDEF);

    *u = jinja_alloc(vm, sizeof(jv_undef));
    memset(*u, 0, sizeof(jv_undef));
    v.u.undef = *u;
    return v;
}


jv
jv_undef_name(jinja_vm *vm, const char *name, size_t len)
{
    jv_undef  *u;
    jv         v = jv_undef_new(vm, &u);

    u->name = name;
    u->name_len = (uint32_t) len;
    return v;
}


/* jinja2's object_type_repr(): "None", "dict object", "str object". */
static const char *
jv_object_type_repr(jinja_vm *vm, jv obj)
{
    const char  *t;
    char        *s;

    if (obj.type == JV_NONE) {
        return "None";
    }
    t = jv_type_name(obj);
    s = jinja_alloc(vm, strlen(t) + 8);
    sprintf(s, "%s object", t);
    return s;
}


jv
jv_undef_attr(jinja_vm *vm, jv obj, const char *name, size_t len)
{
    jv_undef  *u;
    jv         v = jv_undef_new(vm, &u);

    u->name = name;
    u->name_len = (uint32_t) len;
    u->has_obj = 1;
    u->obj_type = jv_object_type_repr(vm, obj);
    return v;
}


jv
jv_undef_index(jinja_vm *vm, jv obj, int64_t index)
{
    jv_undef  *u;
    jv         v = jv_undef_new(vm, &u);

    u->has_obj = 1;
    u->obj_type = jv_object_type_repr(vm, obj);
    u->name_is_int = 1;
    u->index = index;
    return v;
}


jv
jv_undef_hint(jinja_vm *vm, const char *hint)
{
    jv_undef  *u;
    jv         v = jv_undef_new(vm, &u);

    u->hint = hint;
    return v;
}


jv
jv_undef_unsafe(jinja_vm *vm, jv obj, const char *name, size_t len)
{
    jv_undef  *u;
    jv         v = jv_undef_new(vm, &u);
    char      *hint;
    const char *t = jv_type_name(obj);

    hint = jinja_alloc(vm, len + strlen(t) + 64);
    sprintf(hint, "access to attribute '%.*s' of '%s' object is unsafe.",
            (int) len, name, t);
    u->hint = hint;
    u->security = 1;
    return v;
}


void
jinja_fail_undefined(jinja_vm *vm, jv v)
{
    jv_undef  *u = v.u.undef;

    if (u == NULL) {
        jinja_fail(vm, "a value is undefined");
    }
    if (u->hint) {
        jinja_fail(vm, "%s", u->hint);
    }
    if (!u->has_obj) {
        jinja_fail(vm, "'%.*s' is undefined", (int) u->name_len, u->name);
    }
    if (u->name_is_int) {
        jinja_fail(vm, "%s has no element %lld", u->obj_type,
                   (long long) u->index);
    }
    jinja_fail(vm, "'%s' has no attribute '%.*s'", u->obj_type,
               (int) u->name_len, u->name);
}


/* ------------------------------------------------------------------ containers */

jv
jv_str_copy(jinja_vm *vm, const char *s, size_t len)
{
    char  *p;

    if (len > UINT32_MAX - 1) {
        jinja_fail(vm, "string too long");
    }
    p = jinja_alloc(vm, len ? len : 1);
    memcpy(p, s, len);
    return jv_str(p, len);
}


static jv_list *
jv_list_alloc(jinja_vm *vm, size_t cap)
{
    jv_list  *l;

    l = jinja_alloc(vm, sizeof(jv_list));
    l->n = 0;
    l->cap = cap;
    l->items = cap ? jinja_alloc(vm, cap * sizeof(jv)) : NULL;
    return l;
}


jv
jv_list_new(jinja_vm *vm, size_t cap)
{
    jv  v = jv_make(JV_LIST);

    v.u.list = jv_list_alloc(vm, cap);
    return v;
}


jv
jv_tuple_new(jinja_vm *vm, size_t cap)
{
    jv  v = jv_make(JV_TUPLE);

    v.u.list = jv_list_alloc(vm, cap);
    return v;
}


void
jv_list_push(jinja_vm *vm, jv list, jv item)
{
    jv_list  *l = list.u.list;
    jv       *items;
    size_t    cap;

    if (l->n == l->cap) {
        cap = l->cap ? l->cap * 2 : 8;
        items = jinja_alloc(vm, cap * sizeof(jv));
        if (l->n) {
            memcpy(items, l->items, l->n * sizeof(jv));
        }
        l->items = items;
        l->cap = cap;
    }
    l->items[l->n++] = item;
}


jv
jv_dict_new(jinja_vm *vm, size_t cap)
{
    jv        v = jv_make(JV_DICT);
    jv_dict  *d;

    d = jinja_alloc(vm, sizeof(jv_dict));
    memset(d, 0, sizeof(*d));
    if (cap) {
        d->cap = cap;
        d->keys = jinja_alloc(vm, cap * sizeof(jv));
        d->vals = jinja_alloc(vm, cap * sizeof(jv));
    }
    v.u.dict = d;
    return v;
}


#define JV_DICT_LINEAR  8   /* below this many entries, no hash index */

static void
jv_dict_reindex(jinja_vm *vm, jv_dict *d)
{
    size_t    i, cap, slot;
    uint32_t  h;

    cap = 16;
    while (cap < d->cap * 2) {
        cap *= 2;
    }
    d->index = jinja_alloc(vm, cap * sizeof(uint32_t));
    memset(d->index, 0, cap * sizeof(uint32_t));
    d->index_cap = cap;
    for (i = 0; i < d->n; i++) {
        h = jv_hash(vm, d->keys[i]);
        for (slot = h & (cap - 1); d->index[slot]; slot = (slot + 1) & (cap - 1)) {
        }
        d->index[slot] = (uint32_t) i + 1;
    }
}


/* Returns the entry index of key, or -1.  vm may be NULL only for keys
 * that cannot fail to hash (strings). */
static long
jv_dict_find(jinja_vm *vm, jv_dict *d, jv key)
{
    size_t    i, slot;
    uint32_t  h;

    if (d->index == NULL) {
        for (i = 0; i < d->n; i++) {
            if (jv_equal(vm, d->keys[i], key)) {
                return (long) i;
            }
        }
        return -1;
    }
    h = jv_hash(vm, key);
    for (slot = h & (d->index_cap - 1); d->index[slot];
         slot = (slot + 1) & (d->index_cap - 1))
    {
        i = d->index[slot] - 1;
        if (jv_equal(vm, d->keys[i], key)) {
            return (long) i;
        }
    }
    return -1;
}


void
jv_dict_set(jinja_vm *vm, jv dict, jv key, jv val)
{
    jv_dict  *d = dict.u.dict;
    long      i;
    size_t    cap;
    jv       *keys, *vals;

    if (!jv_is_hashable(key)) {
        jinja_fail(vm, "unhashable type: '%s'", jv_type_name(key));
    }
    i = jv_dict_find(vm, d, key);
    if (i >= 0) {
        d->vals[i] = val;
        return;
    }
    if (d->n == d->cap) {
        cap = d->cap ? d->cap * 2 : 8;
        keys = jinja_alloc(vm, cap * sizeof(jv));
        vals = jinja_alloc(vm, cap * sizeof(jv));
        if (d->n) {
            memcpy(keys, d->keys, d->n * sizeof(jv));
            memcpy(vals, d->vals, d->n * sizeof(jv));
        }
        d->keys = keys;
        d->vals = vals;
        d->cap = cap;
        d->index = NULL;
    }
    d->keys[d->n] = key;
    d->vals[d->n] = val;
    d->n++;
    if (d->n > JV_DICT_LINEAR) {
        if (d->index == NULL) {
            jv_dict_reindex(vm, d);
        } else {
            size_t    slot;
            uint32_t  h = jv_hash(vm, key);

            for (slot = h & (d->index_cap - 1); d->index[slot];
                 slot = (slot + 1) & (d->index_cap - 1))
            {
            }
            d->index[slot] = (uint32_t) d->n;
        }
    }
}


int
jv_dict_get(jv dict, jv key, jv *val)
{
    long  i;

    if (!jv_is_hashable(key)) {
        return 0;
    }
    i = jv_dict_find(NULL, dict.u.dict, key);
    if (i < 0) {
        return 0;
    }
    *val = dict.u.dict->vals[i];
    return 1;
}


int
jv_dict_get_str(jv dict, const char *key, size_t len, jv *val)
{
    return jv_dict_get(dict, jv_str(key, len), val);
}


jv
jv_iter_new(jinja_vm *vm, int kind, jv_list *items)
{
    jv        v = jv_make(JV_ITER);
    jv_iter  *it;

    it = jinja_alloc(vm, sizeof(jv_iter));
    memset(it, 0, sizeof(*it));
    it->kind = (uint8_t) kind;
    it->items = items;
    v.u.iter = it;
    return v;
}


jv
jv_lazy_new(jinja_vm *vm, jinja_filter_fn fn, jv value, jinja_args *a)
{
    jv  v = jv_iter_new(vm, JI_GENERATOR, NULL);

    v.u.iter->lazy_fn = fn;
    v.u.iter->lazy_value = value;
    v.u.iter->lazy_args = *a;
    return v;
}


void
jv_iter_force(jinja_vm *vm, jv_iter *it)
{
    jinja_filter_fn  fn = it->lazy_fn;
    jv               r;

    if (fn == NULL) {
        return;
    }
    it->lazy_fn = NULL;
    r = fn(vm, it->lazy_value, &it->lazy_args);
    it->items = r.u.iter->items;
    it->pos = r.u.iter->pos;
}


jv
jv_func_new(jinja_vm *vm, int kind, const char *name)
{
    jv        v = jv_make(JV_FUNC);
    jv_func  *f;

    f = jinja_alloc(vm, sizeof(jv_func));
    memset(f, 0, sizeof(*f));
    f->kind = (uint8_t) kind;
    f->name = name;
    v.u.fn = f;
    return v;
}


/* ------------------------------------------------------------------ semantics */

const char *
jv_type_name(jv v)
{
    switch (v.type) {
    case JV_UNDEF:  return "Undefined";
    case JV_NONE:   return "NoneType";
    case JV_BOOL:   return "bool";
    case JV_INT:    return "int";
    case JV_FLOAT:  return "float";
    case JV_STR:    return (v.flags & JV_SAFE) ? "Markup" : "str";
    case JV_LIST:   return "list";
    case JV_TUPLE:  return "tuple";
    case JV_DICT:   return "dict";
    case JV_NS:     return "Namespace";
    case JV_ITER:
        switch (v.u.iter->kind) {
        case JI_DICT_KEYS:   return "dict_keys";
        case JI_DICT_VALUES: return "dict_values";
        case JI_DICT_ITEMS:  return "dict_items";
        case JI_RANGE:       return "range";
        case JI_REVERSED:    return "list_reverseiterator";
        default:             return "generator";
        }
    case JV_FUNC:
        switch (v.u.fn->kind) {
        case JF_MACRO:
        case JF_CALLER:   return "Macro";
        case JF_METHOD:   return "builtin_function_or_method";
        default:          return "function";
        }
    case JV_LOOP:   return "LoopContext";
    case JV_OBJ:    return v.u.obj->kind == JO_CYCLER ? "Cycler" : "Joiner";
    }
    return "object";
}


int
jv_truthy(jv v)
{
    switch (v.type) {
    case JV_UNDEF:
    case JV_NONE:
        return 0;
    case JV_BOOL:
    case JV_INT:
        return v.u.i != 0;
    case JV_FLOAT:
        return v.u.f != 0.0;
    case JV_STR:
        return v.len != 0;
    case JV_LIST:
    case JV_TUPLE:
        return v.u.list->n != 0;
    case JV_DICT:
        return v.u.dict->n != 0;
    case JV_ITER:
        if (v.u.iter->kind == JI_GENERATOR || v.u.iter->kind == JI_REVERSED) {
            return 1;       /* iterators have no __len__ or __bool__ */
        }
        return v.u.iter->items->n != 0;
    default:
        return 1;
    }
}


static int
jv_is_number(jv v)
{
    return v.type == JV_BOOL || v.type == JV_INT || v.type == JV_FLOAT;
}


/* Python numeric equality between int/bool/float. */
static int
jv_num_equal(jv a, jv b)
{
    if (a.type == JV_FLOAT || b.type == JV_FLOAT) {
        double x = a.type == JV_FLOAT ? a.u.f : (double) a.u.i;
        double y = b.type == JV_FLOAT ? b.u.f : (double) b.u.i;

        if (a.type != JV_FLOAT || b.type != JV_FLOAT) {
            /* an int compares exactly with a float; through double is
             * exact for |i| < 2^53, which is all JSON can carry anyway */
        }
        return x == y;
    }
    return a.u.i == b.u.i;
}


int
jv_equal(jinja_vm *vm, jv a, jv b)
{
    size_t  i;
    jv      bv;

    if (jv_is_number(a) && jv_is_number(b)) {
        return jv_num_equal(a, b);
    }
    switch (a.type) {
    case JV_UNDEF:
        return b.type == JV_UNDEF;
    case JV_NONE:
        return b.type == JV_NONE;
    case JV_STR:
        return b.type == JV_STR && a.len == b.len
               && memcmp(a.u.s, b.u.s, a.len) == 0;
    case JV_LIST:
    case JV_TUPLE:
        if (b.type != a.type) {
            return 0;
        }
        if (a.u.list == b.u.list) {
            return 1;
        }
        if (a.u.list->n != b.u.list->n) {
            return 0;
        }
        for (i = 0; i < a.u.list->n; i++) {
            if (!jv_equal(vm, a.u.list->items[i], b.u.list->items[i])) {
                return 0;
            }
        }
        return 1;
    case JV_DICT:
        if (b.type != JV_DICT) {
            return 0;
        }
        if (a.u.dict->n != b.u.dict->n) {
            return 0;
        }
        for (i = 0; i < a.u.dict->n; i++) {
            if (!jv_dict_get(b, a.u.dict->keys[i], &bv)
                || !jv_equal(vm, a.u.dict->vals[i], bv))
            {
                return 0;
            }
        }
        return 1;
    case JV_ITER:
        if (b.type != JV_ITER) {
            return 0;
        }
        if (a.u.iter->kind == JI_RANGE && b.u.iter->kind == JI_RANGE) {
            jv  x = jv_make(JV_LIST), y = jv_make(JV_LIST);

            x.u.list = a.u.iter->items;
            y.u.list = b.u.iter->items;
            return jv_equal(vm, x, y);
        }
        return a.u.iter == b.u.iter;
    case JV_NS:
        return b.type == JV_NS && a.u.dict == b.u.dict;
    case JV_FUNC:
        return b.type == JV_FUNC && a.u.fn == b.u.fn;
    case JV_LOOP:
        return b.type == JV_LOOP && a.u.loop == b.u.loop;
    case JV_OBJ:
        return b.type == JV_OBJ && a.u.obj == b.u.obj;
    default:
        return 0;
    }
}


__attribute__((noreturn)) static void
jv_compare_fail(jinja_vm *vm, jv a, jv b, const char *op)
{
    if (a.type == JV_UNDEF) {
        jinja_fail_undefined(vm, a);
    }
    if (b.type == JV_UNDEF) {
        jinja_fail_undefined(vm, b);
    }
    jinja_fail(vm, "'%s' not supported between instances of '%s' and '%s'",
               op, jv_type_name(a), jv_type_name(b));
}


int
jv_compare(jinja_vm *vm, jv a, jv b, const char *op)
{
    size_t  i, n;
    int     c;

    if (jv_is_number(a) && jv_is_number(b)) {
        if (a.type == JV_FLOAT || b.type == JV_FLOAT) {
            double x = a.type == JV_FLOAT ? a.u.f : (double) a.u.i;
            double y = b.type == JV_FLOAT ? b.u.f : (double) b.u.i;

            if (x != x || y != y) {
                return 2;   /* NaN: every ordering is false */
            }
            return x < y ? -1 : x > y;
        }
        return a.u.i < b.u.i ? -1 : a.u.i > b.u.i;
    }
    if (a.type == JV_STR && b.type == JV_STR) {
        /* UTF-8 byte order is code point order */
        n = a.len < b.len ? a.len : b.len;
        c = memcmp(a.u.s, b.u.s, n);
        if (c) {
            return c < 0 ? -1 : 1;
        }
        return a.len < b.len ? -1 : a.len > b.len;
    }
    if ((a.type == JV_LIST || a.type == JV_TUPLE) && b.type == a.type) {
        n = a.u.list->n < b.u.list->n ? a.u.list->n : b.u.list->n;
        for (i = 0; i < n; i++) {
            if (!jv_equal(vm, a.u.list->items[i], b.u.list->items[i])) {
                return jv_compare(vm, a.u.list->items[i], b.u.list->items[i],
                                  op);
            }
        }
        return a.u.list->n < b.u.list->n ? -1 : a.u.list->n > b.u.list->n;
    }
    jv_compare_fail(vm, a, b, op);
}


int
jv_is_hashable(jv v)
{
    size_t  i;

    switch (v.type) {
    case JV_LIST:
    case JV_DICT:
        return 0;
    case JV_TUPLE:
        for (i = 0; i < v.u.list->n; i++) {
            if (!jv_is_hashable(v.u.list->items[i])) {
                return 0;
            }
        }
        return 1;
    case JV_ITER:
        return v.u.iter->kind != JI_DICT_KEYS && v.u.iter->kind != JI_DICT_ITEMS
               && v.u.iter->kind != JI_DICT_VALUES;
    default:
        return 1;
    }
}


uint32_t
jv_hash(jinja_vm *vm, jv v)
{
    uint32_t  h;
    size_t    i;
    double    ip;

    switch (v.type) {
    case JV_BOOL:
    case JV_INT:
        return (uint32_t) ((uint64_t) v.u.i * 0x9E3779B97F4A7C15ULL >> 32);
    case JV_FLOAT:
        /* equal numbers must hash equally: integral floats hash as ints */
        if (modf(v.u.f, &ip) == 0.0 && fabs(v.u.f) < 9.2e18) {
            return jv_hash(vm, jv_int((int64_t) v.u.f));
        }
        {
            uint64_t  bits;

            memcpy(&bits, &v.u.f, sizeof(bits));
            return (uint32_t) (bits * 0x9E3779B97F4A7C15ULL >> 32);
        }
    case JV_STR:
        return jinja_name_hash(v.u.s, v.len);
    case JV_TUPLE:
        h = 0x345678;
        for (i = 0; i < v.u.list->n; i++) {
            h = (h ^ jv_hash(vm, v.u.list->items[i])) * 1000003u;
        }
        return h;
    case JV_NONE:
        return 0x5bd1e995;
    default:
        return (uint32_t) ((uintptr_t) v.u.s >> 4);
    }
}


/* The characters of a string, one string value each. */
static jv_list *
jv_str_chars(jinja_vm *vm, jv s)
{
    jv       l = jv_list_new(vm, s.len);
    size_t   i = 0, start;

    while (i < s.len) {
        start = i;
        ju_decode(s.u.s, s.len, &i);
        jv_list_push(vm, l, jv_str(s.u.s + start, i - start));
    }
    return l.u.list;
}


jv_list *
jv_iterate(jinja_vm *vm, jv v)
{
    jv_list  *l;
    jv        t;
    size_t    i;

    switch (v.type) {
    case JV_UNDEF:
        return jv_list_new(vm, 0).u.list;
    case JV_LIST:
    case JV_TUPLE:
        return v.u.list;
    case JV_DICT:
        t = jv_list_new(vm, v.u.dict->n);
        for (i = 0; i < v.u.dict->n; i++) {
            jv_list_push(vm, t, v.u.dict->keys[i]);
        }
        return t.u.list;
    case JV_STR:
        return jv_str_chars(vm, v);
    case JV_ITER:
        if (v.u.iter->kind == JI_GENERATOR || v.u.iter->kind == JI_REVERSED) {
            jv_iter_force(vm, v.u.iter);
            l = v.u.iter->items;
            t = jv_list_new(vm, 0);
            if (l->n > v.u.iter->pos) {
                t.u.list->items = l->items + v.u.iter->pos;
                t.u.list->n = t.u.list->cap = l->n - v.u.iter->pos;
            }
            v.u.iter->pos = l->n;       /* consumed */
            return t.u.list;
        }
        return v.u.iter->items;
    case JV_LOOP:
        return v.u.loop->items;
    default:
        jinja_fail(vm, "'%s' object is not iterable", jv_type_name(v));
    }
}


int64_t
jv_length(jinja_vm *vm, jv v)
{
    switch (v.type) {
    case JV_UNDEF:
        return 0;
    case JV_STR:
        return (int64_t) ju_count(v.u.s, v.len);
    case JV_LIST:
    case JV_TUPLE:
        return (int64_t) v.u.list->n;
    case JV_DICT:
        return (int64_t) v.u.dict->n;
    case JV_ITER:
        if (v.u.iter->kind != JI_GENERATOR && v.u.iter->kind != JI_REVERSED) {
            return (int64_t) v.u.iter->items->n;
        }
        break;
    case JV_LOOP:
        return (int64_t) v.u.loop->items->n;
    default:
        break;
    }
    jinja_fail(vm, "object of type '%s' has no len()", jv_type_name(v));
}


void
jinja_sort(jinja_vm *vm, jv *items, size_t n, size_t width, jinja_cmp_fn cmp,
    void *ctx)
{
    jv      *tmp, *src, *dst, *t;
    size_t   run, lo, mid, hi, i, j, k, rec = width * sizeof(jv);

    if (n < 2) {
        return;
    }
    tmp = jinja_alloc(vm, n * rec);
    src = items;
    dst = tmp;
    for (run = 1; run < n; run *= 2) {
        for (lo = 0; lo < n; lo += 2 * run) {
            mid = lo + run < n ? lo + run : n;
            hi = lo + 2 * run < n ? lo + 2 * run : n;
            i = lo;
            j = mid;
            k = lo;
            while (i < mid && j < hi) {
                /* take from the right only when strictly smaller: stable */
                if (cmp(vm, src + j * width, src + i * width, ctx) < 0) {
                    memcpy(dst + k++ * width, src + j++ * width, rec);
                } else {
                    memcpy(dst + k++ * width, src + i++ * width, rec);
                }
            }
            while (i < mid) {
                memcpy(dst + k++ * width, src + i++ * width, rec);
            }
            while (j < hi) {
                memcpy(dst + k++ * width, src + j++ * width, rec);
            }
        }
        t = src;
        src = dst;
        dst = t;
    }
    if (src != items) {
        memcpy(items, src, n * rec);
    }
}
