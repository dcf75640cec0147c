/*
 * jinja.h -- the Jinja interpreter behind chat_template.h: lexer, parser to
 * an AST, tree-walking evaluator, Python value semantics.
 *
 * The target is byte identity with Python jinja2 3.1 configured the way
 * Hugging Face transformers configures it: ImmutableSandboxedEnvironment,
 * trim_blocks, lstrip_blocks, loopcontrols, no autoescape, default
 * Undefined, a tojson that calls json.dumps(ensure_ascii=False), and the
 * `generation` tag of transformers' AssistantTracker.  Values therefore
 * follow Python rules: str() and repr() of lists and dicts, float repr,
 * True/False/None, int/float arithmetic, code-point string indexing.
 *
 * Memory: every render allocates from one arena that is freed as a whole,
 * and errors unwind with longjmp to the render entry point, so no code
 * below has to free anything on an error path.  The parsed template (the
 * AST and its constants) lives in its own arena, kept until
 * jinja_template_free().
 *
 * Files: jinja_value.c (arena, values, containers, equality, ordering),
 * jinja_unicode.c (UTF-8 and Python's character classes),
 * jinja_repr.c (str(), repr(), json.dumps, float formatting),
 * jinja_lexer.c, jinja_parser.c, jinja_eval.c (statements, expressions,
 * scopes, calls), jinja_ops.c (operators, attribute and item access),
 * jinja_filters.c (filters and tests), jinja_methods.c (str/dict/list
 * methods, str.format, % formatting), jinja_globals.c (range, namespace,
 * dict, raise_exception, strftime_now, cycler, joiner).
 */
#ifndef LLM_JINJA_H
#define LLM_JINJA_H

#include <setjmp.h>
#include <stddef.h>
#include <stdint.h>

#include "llm.h"


/* ------------------------------------------------------------------ arena */

typedef struct jinja_chunk jinja_chunk;

typedef struct {
    jinja_chunk  *head;
    size_t        total;        /* bytes obtained from malloc */
    size_t        limit;        /* 0 = none; exceeding it is a render error */
} jinja_arena;


/* ------------------------------------------------------------------ values */

typedef enum {
    JV_UNDEF = 0,   /* jinja2 Undefined: prints '', iterates empty, errors on use */
    JV_NONE,
    JV_BOOL,        /* u.i is 0 or 1 */
    JV_INT,         /* u.i */
    JV_FLOAT,       /* u.f */
    JV_STR,         /* u.s + len bytes of UTF-8, not NUL-terminated */
    JV_LIST,        /* u.list */
    JV_TUPLE,       /* u.list, never mutated */
    JV_DICT,        /* u.dict */
    JV_NS,          /* namespace(): u.dict of attributes, mutable */
    JV_ITER,        /* generators, dict views, range, reversed(): u.iter */
    JV_FUNC,        /* macros, builtins, bound methods: u.fn */
    JV_LOOP,        /* the `loop` variable of a for loop: u.loop */
    JV_OBJ          /* cycler() and joiner() objects: u.obj */
} jv_type;

#define JV_SAFE   0x01  /* a markupsafe.Markup string (from |safe) */
#define JV_GROUP  0x02  /* a groupby() result tuple: .grouper and .list */

typedef struct jv_list   jv_list;
typedef struct jv_dict   jv_dict;
typedef struct jv_iter   jv_iter;
typedef struct jv_func   jv_func;
typedef struct jv_loop   jv_loop;
typedef struct jv_obj    jv_obj;
typedef struct jv_undef  jv_undef;
typedef struct jinja_vm  jinja_vm;

typedef struct {
    uint8_t   type;
    uint8_t   flags;
    uint32_t  len;              /* JV_STR: length in bytes */
    union {
        int64_t       i;
        double        f;
        const char   *s;
        jv_list      *list;
        jv_dict      *dict;
        jv_iter      *iter;
        jv_func      *fn;
        jv_loop      *loop;
        jv_obj       *obj;
        jv_undef     *undef;    /* NULL: a plain undefined */
    } u;
} jv;

struct jv_list {
    jv        *items;
    size_t     n, cap;
};

/* Insertion-ordered like a Python dict; a hash index appears past a few
 * entries.  Keys are any hashable value (str, int, float, bool, None,
 * tuple), compared with Python equality (1 == 1.0 == True). */
struct jv_dict {
    jv        *keys;
    jv        *vals;
    size_t     n, cap;
    uint32_t  *index;           /* open addressing: slot -> entry + 1 */
    size_t     index_cap;
};

typedef enum {
    JI_GENERATOR,               /* one pass, no len(), always true, repr <generator ...> */
    JI_REVERSED,                /* reversed(list): one pass, <list_reverseiterator ...> */
    JI_DICT_KEYS,               /* views: re-iterable, sized */
    JI_DICT_VALUES,
    JI_DICT_ITEMS,
    JI_RANGE                    /* re-iterable, sized, indexable, repr range(a, b) */
} jv_iter_kind;

/* The arguments of a call, filter or test, evaluated. */
typedef struct {
    jv                  *pos;
    size_t               npos;
    struct jinja_kwarg  *kw;
    size_t               nkw;
} jinja_args;

typedef jv (*jinja_filter_fn)(jinja_vm *vm, jv value, jinja_args *a);

struct jv_iter {
    uint8_t          kind;
    jv_list         *items;     /* materialised items */
    size_t           pos;       /* one-pass kinds: items consumed so far */
    int64_t          start, stop, step;     /* JI_RANGE */
    /* A generator filter that has not run yet: Python runs a generator's
     * body only when something iterates it, errors included. */
    jinja_filter_fn  lazy_fn;
    jv               lazy_value;
    jinja_args       lazy_args;
};

/* Why a value is undefined, for the error raised when it is used. */
struct jv_undef {
    const char  *hint;          /* complete message, or NULL */
    const char  *name;          /* the missing variable or attribute */
    uint32_t     name_len;
    int          has_obj;       /* name is an attribute of obj_type */
    const char  *obj_type;      /* e.g. "dict object", "None" */
    int          name_is_int;   /* missing element by index */
    int64_t      index;
    int          security;      /* sandbox refusal: calling it raises */
};

/* Callables. */
typedef enum {
    JF_MACRO,                   /* {% macro %}: node + closure scope */
    JF_CALLER,                  /* the body of {% call %}, also a macro */
    JF_BUILTIN,                 /* global function: builtin */
    JF_METHOD,                  /* bound method of self: method */
    JF_LOOP_CYCLE,              /* loop.cycle / loop.changed / loop() */
    JF_LOOP_CHANGED,
    JF_LOOP_RECURSE
} jv_func_kind;

typedef struct jinja_node   jinja_node;
typedef struct jinja_scope  jinja_scope;

/* A keyword argument of a call, after evaluation. */
typedef struct jinja_kwarg {
    const char  *name;
    uint32_t     len;
    jv           val;
} jinja_kwarg;

typedef jv (*jinja_builtin_fn)(jinja_vm *vm, jinja_args *a);
typedef jv (*jinja_method_fn)(jinja_vm *vm, jv self, jinja_args *a);

struct jv_func {
    uint8_t             kind;
    const char         *name;   /* for messages and repr */
    const jinja_node   *node;   /* macro / caller: the definition */
    jinja_scope        *closure;
    jinja_builtin_fn    builtin;
    jinja_method_fn     method;
    jv                  self;   /* bound method receiver, loop for loop.* */
};

struct jv_loop {
    jv_list            *items;  /* the (filtered) sequence */
    size_t              index0;
    int                 depth0;
    const jinja_node   *node;   /* the For node, for recursive loops */
    jinja_scope        *scope;  /* where the For ran */
    jv                  last_changed;
    int                 changed_set;
};

struct jv_obj {
    int                 kind;   /* JO_CYCLER, JO_JOINER */
    jv_list            *items;  /* cycler items */
    size_t              pos;
    jv                  sep;    /* joiner separator */
    int                 used;
};
enum { JO_CYCLER = 1, JO_JOINER };


/* ------------------------------------------------------------------ AST */

typedef enum {
    /* expressions */
    N_CONST,        /* val */
    N_NAME,         /* val = name (str); hash */
    N_LIST,         /* args = items */
    N_TUPLE,        /* args = items */
    N_DICT,         /* args = keys, alt = values */
    N_GETATTR,      /* a.val */
    N_GETITEM,      /* a[b] */
    N_SLICE,        /* a, b, c = start, stop, step (each may be NULL) */
    N_CALL,         /* a(args, kwargs, *c, **d) */
    N_FILTER,       /* a|val(args, kwargs, *c, **d); a NULL in filter blocks */
    N_TEST,         /* a is val(args, kwargs, *c, **d) */
    N_KEYWORD,      /* val = name, a = value (in kwargs lists) */
    N_UNARY,        /* op a: '-', '+', 'n' (not) */
    N_BINARY,       /* a op b: + - * / F(//) % P(**) */
    N_AND,          /* a and b */
    N_OR,           /* a or b */
    N_CONCAT,       /* args joined with ~ */
    N_COMPARE,      /* a, then args = operands (N_OPERAND: op, a) */
    N_OPERAND,
    N_CONDEXPR,     /* a if b else c (c may be NULL) */
    N_NSREF,        /* assignment target ns.attr: a = N_NAME, val = attr */

    /* statements */
    N_DATA,         /* val = literal template text */
    N_OUTPUT,       /* {{ a }} */
    N_IF,           /* if a: body, else alt (an elif is an N_IF alone in alt) */
    N_FOR,          /* for a in b if c: body, else alt; flags & NF_RECURSIVE */
    N_SET,          /* a = b */
    N_SET_BLOCK,    /* a = captured body, filtered by c (an N_FILTER chain) */
    N_MACRO,        /* val = name, args = params (N_NAME), alt = defaults */
    N_CALL_BLOCK,   /* a = the call, args/alt = caller params/defaults, body */
    N_FILTER_BLOCK, /* c = N_FILTER chain applied to the captured body */
    N_WITH,         /* args = targets, alt = values, body */
    N_GENERATION,   /* transformers' {% generation %}: body */
    N_BREAK,
    N_CONTINUE
} jinja_node_kind;

#define NF_RECURSIVE     0x01   /* for ... recursive */
#define NF_USES_VARARGS  0x02   /* macro body mentions varargs */
#define NF_USES_KWARGS   0x04   /* ... kwargs */
#define NF_USES_CALLER   0x08   /* ... caller */
#define NF_CONST_COPY    0x10   /* N_CONST folded from a list or dict literal:
                                 * each evaluation gets its own copy */

typedef struct {
    jinja_node  **v;
    uint32_t      n, cap;
} jinja_nodes;

typedef int (*jinja_test_fn)(jinja_vm *vm, jv value, jinja_args *a);

struct jinja_node {
    uint8_t          kind;
    uint8_t          op;
    uint16_t         flags;
    uint32_t         line;
    uint32_t         hash;          /* N_NAME, N_NSREF: hash of the name */
    jv               val;
    jinja_node      *a, *b, *c, *d;
    jinja_nodes      args, kwargs, body, alt;
    jinja_filter_fn  filter;        /* N_FILTER; NULL: unknown, fails when run */
    jinja_test_fn    test;          /* N_TEST; likewise */
};

typedef struct {
    jinja_arena   arena;
    jinja_nodes   body;
} jinja_template;


/* ------------------------------------------------------------------ VM */

typedef struct {
    char         *p;
    size_t        len, cap;
} jinja_buf;

struct jinja_scope {
    jinja_scope   *parent;
    struct jinja_var {
        const char  *name;
        uint32_t     len;
        uint32_t     hash;
        jv           val;
    }             *vars;
    uint32_t       n, cap;
    uint32_t      *index;       /* past a few variables: hash -> var + 1 */
    uint32_t       index_cap;
};

typedef enum { JINJA_OK = 0, JINJA_BREAK, JINJA_CONTINUE } jinja_flow;

struct jinja_vm {
    jmp_buf          jmp;
    char             err[LLM_ERR_LEN];
    int              raised;        /* err holds a raise_exception() message */
    uint32_t         line;          /* current template line */
    jinja_arena      arena;
    jinja_buf       *out;           /* where output goes (captures swap it) */
    jinja_scope     *root;          /* template variables */
    uint64_t         steps, max_steps;
    int              depth, max_depth;
    int              const_mode;    /* folding constants while parsing: names
                                     * and calls are "impossible", slices
                                     * forgive like the sandbox's getitem() */
    const char      *date;          /* pinned "YYYY-MM-DD[ HH:MM:SS]" or NULL */
};

/* Limits of one render: past them the render fails with a message, so a
 * hostile or broken template cannot hang or exhaust a worker. */
#define JINJA_MAX_STEPS      50000000ULL
#define JINJA_MAX_DEPTH      400
#define JINJA_MAX_MEMORY     ((size_t) 1 << 30)
#define JINJA_MAX_RANGE      100000      /* jinja2's sandbox MAX_RANGE */


/* jinja_value.c */
void  jinja_arena_init(jinja_arena *a, size_t limit);
void  jinja_arena_free(jinja_arena *a);
void *jinja_arena_alloc(jinja_arena *a, size_t n);      /* NULL past limit */
void *jinja_alloc(jinja_vm *vm, size_t n);              /* fails the render */
char *jinja_strdup(jinja_vm *vm, const char *s, size_t len);

__attribute__((noreturn, format(printf, 2, 3)))
void  jinja_fail(jinja_vm *vm, const char *fmt, ...);
__attribute__((noreturn))
void  jinja_fail_undefined(jinja_vm *vm, jv u);

static inline jv jv_make(int type) { jv v = { 0 }; v.type = (uint8_t) type; return v; }
static inline jv jv_none(void) { return jv_make(JV_NONE); }
static inline jv jv_bool(int b) { jv v = jv_make(JV_BOOL); v.u.i = b != 0; return v; }
static inline jv jv_int(int64_t i) { jv v = jv_make(JV_INT); v.u.i = i; return v; }
static inline jv jv_float(double f) { jv v = jv_make(JV_FLOAT); v.u.f = f; return v; }
static inline jv jv_str(const char *s, size_t len)
{
    jv v = jv_make(JV_STR); v.u.s = s; v.len = (uint32_t) len; return v;
}
#define jv_lit(s) jv_str(s, sizeof(s) - 1)

jv    jv_undef_plain(void);
jv    jv_undef_name(jinja_vm *vm, const char *name, size_t len);
jv    jv_undef_attr(jinja_vm *vm, jv obj, const char *name, size_t len);
jv    jv_undef_index(jinja_vm *vm, jv obj, int64_t index);
jv    jv_undef_hint(jinja_vm *vm, const char *hint);
jv    jv_undef_unsafe(jinja_vm *vm, jv obj, const char *name, size_t len);

jv    jv_str_copy(jinja_vm *vm, const char *s, size_t len);
jv    jv_list_new(jinja_vm *vm, size_t cap);
jv    jv_tuple_new(jinja_vm *vm, size_t cap);
void  jv_list_push(jinja_vm *vm, jv list, jv item);
jv    jv_dict_new(jinja_vm *vm, size_t cap);
void  jv_dict_set(jinja_vm *vm, jv dict, jv key, jv val);
int   jv_dict_get(jv dict, jv key, jv *val);           /* 1 if found */
int   jv_dict_get_str(jv dict, const char *key, size_t len, jv *val);
jv    jv_iter_new(jinja_vm *vm, int kind, jv_list *items);
jv    jv_lazy_new(jinja_vm *vm, jinja_filter_fn fn, jv value, jinja_args *a);
void  jv_iter_force(jinja_vm *vm, jv_iter *it);
jv    jv_func_new(jinja_vm *vm, int kind, const char *name);

int   jv_truthy(jv v);
int   jv_equal(jinja_vm *vm, jv a, jv b);
int   jv_compare(jinja_vm *vm, jv a, jv b, const char *op);   /* <0, 0, >0 */
uint32_t jv_hash(jinja_vm *vm, jv v);
const char *jv_type_name(jv v);                 /* Python type name: "str", "dict" */
int   jv_is_hashable(jv v);

/* Stable merge sort (Python's sorted() is stable) of n records of width
 * values each, ordered by cmp on the records. */
typedef int (*jinja_cmp_fn)(jinja_vm *vm, const jv *a, const jv *b, void *ctx);
void  jinja_sort(jinja_vm *vm, jv *items, size_t n, size_t width,
          jinja_cmp_fn cmp, void *ctx);

/* Iteration: the items of anything iterable (list, tuple, dict keys,
 * string characters, views, generators -- consuming them), or a TypeError. */
jv_list *jv_iterate(jinja_vm *vm, jv v);
/* len(); fails for things without a length, like Python. */
int64_t  jv_length(jinja_vm *vm, jv v);

/* jinja_unicode.c */
int      ju_decode(const char *s, size_t len, size_t *i);     /* next code point */
size_t   ju_encode(uint32_t cp, char *out);                   /* 1..4 bytes */
size_t   ju_count(const char *s, size_t len);                 /* code points */
size_t   ju_offset(const char *s, size_t len, size_t cp_index);  /* byte offset */
int      ju_valid(const char *s, size_t len);
int      ju_isspace(uint32_t cp);                /* str.isspace() */
int      ju_isprintable(uint32_t cp);            /* str.isprintable() */
int      ju_isalnum(uint32_t cp);
int      ju_isalpha(uint32_t cp);
int      ju_isdigit(uint32_t cp);
int      ju_isdecimal(uint32_t cp);
int      ju_isnumeric(uint32_t cp);
int      ju_isupper(uint32_t cp);
int      ju_islower(uint32_t cp);
int      ju_iscased(uint32_t cp);
int      ju_istitle_char(uint32_t cp);
int      ju_isident_start(uint32_t cp);
int      ju_isident_cont(uint32_t cp);
int      ju_isword(uint32_t cp);                 /* re's \w */
int      ju_islinebreak(uint32_t cp);            /* str.splitlines() boundaries */
/* Case mappings with Python's full (multi-character) results. */
size_t   ju_upper(uint32_t cp, uint32_t out[3]);
size_t   ju_lower(uint32_t cp, uint32_t out[3]);
size_t   ju_title(uint32_t cp, uint32_t out[3]);

/* jinja_repr.c */
void  jinja_buf_add(jinja_vm *vm, jinja_buf *b, const char *s, size_t len);
void  jinja_buf_addc(jinja_vm *vm, jinja_buf *b, char c);
void  jinja_buf_adds(jinja_vm *vm, jinja_buf *b, const char *s);
jv    jinja_buf_jv(jinja_buf *b);
void  jv_write_str(jinja_vm *vm, jinja_buf *b, jv v);   /* Python str(v) */
void  jv_write_repr(jinja_vm *vm, jinja_buf *b, jv v);  /* Python repr(v) */
jv    jv_to_str(jinja_vm *vm, jv v);                     /* str(v) as a value */
size_t jinja_format_digits(const char *digits, int ndig, int decpt, int use_exp,
          int add_dot_0, char *out);
int    jinja_float_digits(double f, int prec, int keep_zeros, char *digits,
          int *decpt);
typedef struct {
    const char  *indent;        /* NULL: no indent */
    size_t       indent_len;
    const char  *item_sep, *key_sep;
    size_t       item_sep_len, key_sep_len;
    int          ensure_ascii;
    int          sort_keys;
} jinja_json_opts;
void  jv_write_json(jinja_vm *vm, jinja_buf *b, jv v, const jinja_json_opts *o,
          int level);
void  jinja_escape_html(jinja_vm *vm, jinja_buf *b, const char *s, size_t len);

/* jinja_lexer.c + jinja_parser.c */
jinja_template *jinja_parse(const char *src, size_t len, char *err);
void            jinja_template_free(jinja_template *t);
jinja_filter_fn jinja_filter_lookup(const char *name, size_t len, int *known);
int             jinja_filter_needs_context(jinja_filter_fn f);
jinja_test_fn   jinja_test_lookup(const char *name, size_t len, int *known);
uint32_t        jinja_name_hash(const char *s, size_t len);

/* jinja_eval.c */
/* A VM with the default limits; the caller sets vm->jmp with setjmp(),
 * fills vm->root with the template's variables, then renders.  Every
 * failure longjmps there with the reason in vm->err (and vm->raised set
 * for a raise_exception() message, which is copied verbatim). */
void  jinja_vm_init(jinja_vm *vm);
void  jinja_vm_free(jinja_vm *vm);
/* Renders t: the output, malloc'd, *len bytes plus a NUL. */
char *jinja_render(const jinja_template *t, jinja_vm *vm, size_t *len);
jv    jinja_eval_const(jinja_vm *vm, const jinja_node *n);
int   jv_safe_repr(jv v);
jv    jinja_call(jinja_vm *vm, jv callee, jinja_args *a);
jv    jinja_call_filter(jinja_vm *vm, const char *name, size_t len, jv value,
          jinja_args *a);
int   jinja_call_test(jinja_vm *vm, const char *name, size_t len, jv value,
          jinja_args *a);
jinja_scope *jinja_scope_new(jinja_vm *vm, jinja_scope *parent);
void  jinja_scope_set(jinja_vm *vm, jinja_scope *s, const char *name,
          size_t len, uint32_t hash, jv val);

/* jinja_ops.c */
jv    jinja_getattr(jinja_vm *vm, jv obj, const char *name, size_t len);
jv    jinja_getitem(jinja_vm *vm, jv obj, jv key);
jv    jinja_slice(jinja_vm *vm, jv obj, jv start, jv stop, jv step);
jv    jinja_slice_strict(jinja_vm *vm, jv obj, jv start, jv stop, jv step);
jv    jinja_binop(jinja_vm *vm, int op, jv a, jv b);
jv    jinja_negate(jinja_vm *vm, jv a, int plus);
int   jinja_contains(jinja_vm *vm, jv container, jv item);
jv    jinja_concat_str(jinja_vm *vm, jv *parts, size_t n);

/* Argument binding for builtins: maps positional and keyword arguments on
 * the parameter names of a Python-style signature, failing like Python
 * does on unknown, duplicate or missing ones.  Missing optional ones are
 * JV_UNDEF with u.undef == NULL and flags 0xff ("not given"). */
void  jinja_bind(jinja_vm *vm, const char *fname, jinja_args *a,
          const char *const *names, size_t nnames, size_t nrequired, jv *out);
int   jv_given(jv v);
int64_t jinja_arg_int(jinja_vm *vm, const char *fname, jv v);

/* jinja_methods.c */
jv    jinja_method_lookup(jinja_vm *vm, jv self, const char *name, size_t len,
          int *found);
jv    jinja_str_format(jinja_vm *vm, jv fmt, jinja_args *a);
jv    jinja_percent_format(jinja_vm *vm, jv fmt, jv args);
/* Python string helpers shared with filters */
jv    jinja_str_strip(jinja_vm *vm, jv s, jv chars, int left, int right);
jv    jinja_str_case(jinja_vm *vm, jv s, int mode);   /* 'u','l','t','c','s' */
jv    jinja_str_replace(jinja_vm *vm, jv s, jv old, jv new_, int64_t count);
jv    jinja_str_split(jinja_vm *vm, jv s, jv sep, int64_t maxsplit, int right);
jv    jinja_str_splitlines(jinja_vm *vm, jv s, int keepends);
jv    jinja_format_spec(jinja_vm *vm, jv value, const char *spec, size_t len);

/* jinja_globals.c */
jv    jinja_global_lookup(const char *name, size_t len);
void  jinja_strftime_now(jinja_vm *vm, jinja_buf *b, jv fmt);

#endif /* LLM_JINJA_H */
