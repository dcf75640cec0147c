/*
 * jinja_parser.c -- tokens to an AST, following jinja2/parser.py rule for
 * rule (operator precedence, tuples, tests without parentheses, the
 * statement set of jinja2 plus the loopcontrols extension and
 * transformers' {% generation %}), then a check pass that rejects what
 * jinja2's compiler rejects: unknown filters and tests outside if-blocks
 * and conditional expressions, break/continue outside a loop.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "jinja_lexer.h"


typedef struct {
    jinja_vm      *vm;
    jinja_token   *t;
    size_t         n, i;
    int            depth;
} jinja_parser;

#define JINJA_MAX_PARSE_DEPTH  200


uint32_t
jinja_name_hash(const char *s, size_t len)
{
    uint32_t  h = 2166136261u;
    size_t    i;

    for (i = 0; i < len; i++) {
        h = (h ^ (unsigned char) s[i]) * 16777619u;
    }
    return h;
}


__attribute__((noreturn, format(printf, 2, 3))) static void
parse_fail(jinja_parser *p, const char *fmt, ...)
{
    va_list  ap;
    char     msg[LLM_ERR_LEN];

    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    p->vm->line = p->t[p->i].line;
    jinja_fail(p->vm, "syntax error: %s", msg);
}


static jinja_token *
cur(jinja_parser *p)
{
    return &p->t[p->i];
}


static jinja_token *
look(jinja_parser *p)
{
    return &p->t[p->i + 1 < p->n ? p->i + 1 : p->i];
}


static jinja_token *
next(jinja_parser *p)
{
    jinja_token  *t = &p->t[p->i];

    if (p->i + 1 < p->n) {
        p->i++;
    }
    return t;
}


static int
is_name(const jinja_token *t, const char *name)
{
    return t->type == T_NAME && t->len == strlen(name)
           && memcmp(t->s, name, t->len) == 0;
}


static int
skip_name(jinja_parser *p, const char *name)
{
    if (is_name(cur(p), name)) {
        next(p);
        return 1;
    }
    return 0;
}


static int
skip(jinja_parser *p, int type)
{
    if (cur(p)->type == type) {
        next(p);
        return 1;
    }
    return 0;
}


static const char *
describe(jinja_parser *p, const jinja_token *t, char *buf, size_t size)
{
    return jinja_tok_describe(t, buf, size);
}


static jinja_token *
expect(jinja_parser *p, int type)
{
    char         a[64], b[64];
    jinja_token  want = { 0 };

    if (cur(p)->type != type) {
        want.type = (uint8_t) type;
        if (cur(p)->type == T_EOF) {
            parse_fail(p, "unexpected end of template, expected '%s'",
                       describe(p, &want, a, sizeof(a)));
        }
        parse_fail(p, "expected token '%s', got '%s'",
                   describe(p, &want, a, sizeof(a)),
                   describe(p, cur(p), b, sizeof(b)));
    }
    return next(p);
}


static void
expect_name(jinja_parser *p, const char *name)
{
    char  b[64];

    if (!is_name(cur(p), name)) {
        parse_fail(p, "expected token '%s', got '%s'", name,
                   describe(p, cur(p), b, sizeof(b)));
    }
    next(p);
}


static jinja_node *
node_new(jinja_parser *p, int kind, uint32_t line)
{
    jinja_node  *n;

    n = jinja_alloc(p->vm, sizeof(jinja_node));
    memset(n, 0, sizeof(*n));
    n->kind = (uint8_t) kind;
    n->line = line;
    return n;
}


static void
push(jinja_parser *p, jinja_nodes *l, jinja_node *n)
{
    jinja_node  **v;
    uint32_t      cap;

    if (l->n == l->cap) {
        cap = l->cap ? l->cap * 2 : 4;
        v = jinja_alloc(p->vm, cap * sizeof(jinja_node *));
        if (l->n) {
            memcpy(v, l->v, l->n * sizeof(jinja_node *));
        }
        l->v = v;
        l->cap = cap;
    }
    l->v[l->n++] = n;
}


static void
enter(jinja_parser *p)
{
    if (++p->depth > JINJA_MAX_PARSE_DEPTH) {
        parse_fail(p, "the template is nested too deeply");
    }
}


/* ------------------------------------------------------------------ expressions */

static jinja_node *parse_expression(jinja_parser *p, int with_condexpr);
static jinja_node *parse_or(jinja_parser *p);
static jinja_node *parse_unary(jinja_parser *p, int with_filter);
static jinja_node *parse_primary(jinja_parser *p);
static jinja_node *parse_postfix(jinja_parser *p, jinja_node *node);
static jinja_node *parse_filter(jinja_parser *p, jinja_node *node, int inline_);

enum {
    TUPLE_SIMPLIFIED = 1,   /* names and literals only (assignment targets) */
    TUPLE_NO_CONDEXPR = 2,
    TUPLE_PARENS = 4,       /* inside explicit parentheses: () is a tuple */
    TUPLE_END_IN = 8,       /* "in" ends the tuple (for targets) */
    TUPLE_END_RECURSIVE = 16
};


static int
is_tuple_end(jinja_parser *p, int flags)
{
    int  t = cur(p)->type;

    if (t == T_VAR_END || t == T_BLOCK_END || t == T_RPAREN) {
        return 1;
    }
    if ((flags & TUPLE_END_IN) && is_name(cur(p), "in")) {
        return 1;
    }
    return (flags & TUPLE_END_RECURSIVE) && is_name(cur(p), "recursive");
}


static jinja_node *
parse_tuple(jinja_parser *p, int flags)
{
    uint32_t     line = cur(p)->line;
    jinja_node  *node, *item;
    jinja_nodes  args = { 0 };
    int          is_tuple = 0;
    char         b[64];

    for (;;) {
        if (args.n) {
            expect(p, T_COMMA);
        }
        if (is_tuple_end(p, flags)) {
            break;
        }
        if (flags & TUPLE_SIMPLIFIED) {
            item = parse_primary(p);
        } else {
            item = parse_expression(p, !(flags & TUPLE_NO_CONDEXPR));
        }
        push(p, &args, item);
        if (cur(p)->type == T_COMMA) {
            is_tuple = 1;
        } else {
            break;
        }
        line = cur(p)->line;
    }
    if (!is_tuple) {
        if (args.n) {
            return args.v[0];
        }
        if (!(flags & TUPLE_PARENS)) {
            parse_fail(p, "expected an expression, got '%s'",
                       describe(p, cur(p), b, sizeof(b)));
        }
    }
    node = node_new(p, N_TUPLE, line);
    node->args = args;
    return node;
}


static jinja_node *
parse_list(jinja_parser *p)
{
    jinja_node  *node = node_new(p, N_LIST, expect(p, T_LBRACKET)->line);

    while (cur(p)->type != T_RBRACKET) {
        if (node->args.n) {
            expect(p, T_COMMA);
        }
        if (cur(p)->type == T_RBRACKET) {
            break;
        }
        push(p, &node->args, parse_expression(p, 1));
    }
    expect(p, T_RBRACKET);
    return node;
}


static jinja_node *
parse_dict(jinja_parser *p)
{
    jinja_node  *node = node_new(p, N_DICT, expect(p, T_LBRACE)->line);

    while (cur(p)->type != T_RBRACE) {
        if (node->args.n) {
            expect(p, T_COMMA);
        }
        if (cur(p)->type == T_RBRACE) {
            break;
        }
        push(p, &node->args, parse_expression(p, 1));
        expect(p, T_COLON);
        push(p, &node->alt, parse_expression(p, 1));
    }
    expect(p, T_RBRACE);
    return node;
}


static jinja_node *
parse_primary(jinja_parser *p)
{
    jinja_token  *t = cur(p);
    jinja_node   *node;
    jinja_buf     buf = { 0 };
    char          b[64];

    enter(p);
    switch (t->type) {
    case T_NAME:
        node = node_new(p, N_CONST, t->line);
        if (is_name(t, "true") || is_name(t, "True")) {
            node->val = jv_bool(1);
        } else if (is_name(t, "false") || is_name(t, "False")) {
            node->val = jv_bool(0);
        } else if (is_name(t, "none") || is_name(t, "None")) {
            node->val = jv_none();
        } else {
            node->kind = N_NAME;
            node->val = jv_str(t->s, t->len);
            node->hash = jinja_name_hash(t->s, t->len);
        }
        next(p);
        break;
    case T_STRING:
        node = node_new(p, N_CONST, t->line);
        next(p);
        if (cur(p)->type != T_STRING) {
            node->val = jv_str(t->s, t->len);
            break;
        }
        /* adjacent literals concatenate */
        jinja_buf_add(p->vm, &buf, t->s, t->len);
        while (cur(p)->type == T_STRING) {
            jinja_buf_add(p->vm, &buf, cur(p)->s, cur(p)->len);
            next(p);
        }
        node->val = jinja_buf_jv(&buf);
        break;
    case T_INT:
        node = node_new(p, N_CONST, t->line);
        node->val = jv_int(t->i);
        next(p);
        break;
    case T_FLOAT:
        node = node_new(p, N_CONST, t->line);
        node->val = jv_float(t->f);
        next(p);
        break;
    case T_LPAREN:
        next(p);
        node = parse_tuple(p, TUPLE_PARENS);
        expect(p, T_RPAREN);
        break;
    case T_LBRACKET:
        node = parse_list(p);
        break;
    case T_LBRACE:
        node = parse_dict(p);
        break;
    default:
        if (t->type == T_EOF) {
            parse_fail(p, "unexpected end of template");
        }
        parse_fail(p, "unexpected '%s'", describe(p, t, b, sizeof(b)));
    }
    p->depth--;
    return node;
}


/* (args, kwargs, *dyn_args, **dyn_kwargs) into node */
static void
parse_call_args(jinja_parser *p, jinja_node *node)
{
    jinja_token  *lp = expect(p, T_LPAREN);
    jinja_node   *kw;
    int           require_comma = 0;

#define ENSURE(e) do { if (!(e)) { p->i = (size_t) (lp - p->t); \
        parse_fail(p, "invalid syntax for function call expression"); } } while (0)

    while (cur(p)->type != T_RPAREN) {
        if (require_comma) {
            expect(p, T_COMMA);
            if (cur(p)->type == T_RPAREN) {
                break;
            }
        }
        if (cur(p)->type == T_MUL) {
            ENSURE(node->c == NULL && node->d == NULL);
            next(p);
            node->c = parse_expression(p, 1);
        } else if (cur(p)->type == T_POW) {
            ENSURE(node->d == NULL);
            next(p);
            node->d = parse_expression(p, 1);
        } else if (cur(p)->type == T_NAME && look(p)->type == T_ASSIGN) {
            ENSURE(node->d == NULL);
            kw = node_new(p, N_KEYWORD, cur(p)->line);
            kw->val = jv_str(cur(p)->s, cur(p)->len);
            next(p);
            next(p);
            kw->a = parse_expression(p, 1);
            push(p, &node->kwargs, kw);
        } else {
            ENSURE(node->c == NULL && node->d == NULL && node->kwargs.n == 0);
            push(p, &node->args, parse_expression(p, 1));
        }
        require_comma = 1;
    }
    expect(p, T_RPAREN);
#undef ENSURE
}


static jinja_node *
parse_call(jinja_parser *p, jinja_node *callee)
{
    jinja_node  *node = node_new(p, N_CALL, cur(p)->line);

    node->a = callee;
    parse_call_args(p, node);
    return node;
}


static jinja_node *
parse_subscribed(jinja_parser *p)
{
    uint32_t     line = cur(p)->line;
    jinja_node  *node, *start = NULL;

    if (cur(p)->type == T_COLON) {
        next(p);
    } else {
        start = parse_expression(p, 1);
        if (cur(p)->type != T_COLON) {
            return start;
        }
        next(p);
    }
    node = node_new(p, N_SLICE, line);
    node->a = start;
    if (cur(p)->type != T_COLON && cur(p)->type != T_RBRACKET
        && cur(p)->type != T_COMMA)
    {
        node->b = parse_expression(p, 1);
    }
    if (cur(p)->type == T_COLON) {
        next(p);
        if (cur(p)->type != T_RBRACKET && cur(p)->type != T_COMMA) {
            node->c = parse_expression(p, 1);
        }
    }
    return node;
}


static jinja_node *
parse_subscript(jinja_parser *p, jinja_node *obj)
{
    jinja_token  *t = next(p), *attr;
    jinja_node   *node, *arg;
    jinja_nodes   args = { 0 };

    if (t->type == T_DOT) {
        attr = cur(p);
        next(p);
        if (attr->type == T_NAME) {
            node = node_new(p, N_GETATTR, t->line);
            node->a = obj;
            node->val = jv_str(attr->s, attr->len);
            return node;
        }
        if (attr->type != T_INT) {
            p->i--;
            parse_fail(p, "expected name or number");
        }
        arg = node_new(p, N_CONST, attr->line);
        arg->val = jv_int(attr->i);
        node = node_new(p, N_GETITEM, t->line);
        node->a = obj;
        node->b = arg;
        return node;
    }
    /* '[' */
    while (cur(p)->type != T_RBRACKET) {
        if (args.n) {
            expect(p, T_COMMA);
        }
        push(p, &args, parse_subscribed(p));
    }
    expect(p, T_RBRACKET);
    if (args.n == 1) {
        arg = args.v[0];
    } else {
        arg = node_new(p, N_TUPLE, t->line);
        arg->args = args;
    }
    node = node_new(p, N_GETITEM, t->line);
    node->a = obj;
    node->b = arg;
    return node;
}


static jinja_node *
parse_postfix(jinja_parser *p, jinja_node *node)
{
    for (;;) {
        int  t = cur(p)->type;

        if (t == T_DOT || t == T_LBRACKET) {
            node = parse_subscript(p, node);
        } else if (t == T_LPAREN) {
            node = parse_call(p, node);
        } else {
            return node;
        }
    }
}


/* A dotted filter or test name. */
static jv
parse_dotted_name(jinja_parser *p)
{
    jinja_token  *t = expect(p, T_NAME);
    jinja_buf     b = { 0 };

    if (cur(p)->type != T_DOT) {
        return jv_str(t->s, t->len);
    }
    jinja_buf_add(p->vm, &b, t->s, t->len);
    while (cur(p)->type == T_DOT) {
        next(p);
        t = expect(p, T_NAME);
        jinja_buf_addc(p->vm, &b, '.');
        jinja_buf_add(p->vm, &b, t->s, t->len);
    }
    return jinja_buf_jv(&b);
}


static jinja_node *
parse_filter(jinja_parser *p, jinja_node *node, int inline_)
{
    jinja_node  *f;
    int          known;

    while (cur(p)->type == T_PIPE || inline_) {
        if (!inline_) {
            next(p);
        }
        f = node_new(p, N_FILTER, cur(p)->line);
        f->val = parse_dotted_name(p);
        f->filter = jinja_filter_lookup(f->val.u.s, f->val.len, &known);
        if (!known) {
            f->flags |= 0x100;      /* unknown: checked by the check pass */
        }
        if (cur(p)->type == T_LPAREN) {
            parse_call_args(p, f);
        }
        f->a = node;
        node = f;
        inline_ = 0;
    }
    return node;
}


static jinja_node *
parse_test(jinja_parser *p, jinja_node *node)
{
    jinja_token  *is = next(p);
    jinja_node   *t, *arg, *neg;
    int           negated, known, tt;

    negated = skip_name(p, "not");
    t = node_new(p, N_TEST, is->line);
    t->val = parse_dotted_name(p);
    t->test = jinja_test_lookup(t->val.u.s, t->val.len, &known);
    if (!known) {
        t->flags |= 0x100;
    }
    tt = cur(p)->type;
    if (tt == T_LPAREN) {
        parse_call_args(p, t);
    } else if ((tt == T_NAME || tt == T_STRING || tt == T_INT || tt == T_FLOAT
                || tt == T_LPAREN || tt == T_LBRACKET || tt == T_LBRACE)
               && !is_name(cur(p), "else") && !is_name(cur(p), "or")
               && !is_name(cur(p), "and"))
    {
        if (is_name(cur(p), "is")) {
            parse_fail(p, "You cannot chain multiple tests with is");
        }
        arg = parse_primary(p);
        arg = parse_postfix(p, arg);
        push(p, &t->args, arg);
    }
    t->a = node;
    if (negated) {
        neg = node_new(p, N_UNARY, is->line);
        neg->op = 'n';
        neg->a = t;
        return neg;
    }
    return t;
}


static jinja_node *
parse_filter_expr(jinja_parser *p, jinja_node *node)
{
    for (;;) {
        if (cur(p)->type == T_PIPE) {
            node = parse_filter(p, node, 0);
        } else if (is_name(cur(p), "is")) {
            node = parse_test(p, node);
        } else if (cur(p)->type == T_LPAREN) {
            node = parse_call(p, node);
        } else {
            return node;
        }
    }
}


static jinja_node *
parse_unary(jinja_parser *p, int with_filter)
{
    jinja_token  *t = cur(p);
    jinja_node   *node;

    enter(p);
    if (t->type == T_SUB || t->type == T_ADD) {
        next(p);
        node = node_new(p, N_UNARY, t->line);
        node->op = t->type == T_SUB ? '-' : '+';
        node->a = parse_unary(p, 0);
    } else {
        node = parse_primary(p);
    }
    node = parse_postfix(p, node);
    if (with_filter) {
        node = parse_filter_expr(p, node);
    }
    p->depth--;
    return node;
}


static jinja_node *
binary(jinja_parser *p, int op, jinja_node *a, jinja_node *b, uint32_t line)
{
    jinja_node  *n = node_new(p, N_BINARY, line);

    n->op = (uint8_t) op;
    n->a = a;
    n->b = b;
    return n;
}


static jinja_node *
parse_pow(jinja_parser *p)
{
    uint32_t     line = cur(p)->line;
    jinja_node  *left = parse_unary(p, 1);

    while (cur(p)->type == T_POW) {
        next(p);
        left = binary(p, 'P', left, parse_unary(p, 1), line);
        line = cur(p)->line;
    }
    return left;
}


static jinja_node *
parse_math2(jinja_parser *p)
{
    uint32_t     line = cur(p)->line;
    jinja_node  *left = parse_pow(p);
    int          t, op;

    for (;;) {
        t = cur(p)->type;
        op = t == T_MUL ? '*' : t == T_DIV ? '/' : t == T_FLOORDIV ? 'F'
             : t == T_MOD ? '%' : 0;
        if (!op) {
            return left;
        }
        next(p);
        left = binary(p, op, left, parse_pow(p), line);
        line = cur(p)->line;
    }
}


static jinja_node *
parse_concat(jinja_parser *p)
{
    uint32_t     line = cur(p)->line;
    jinja_node  *first = parse_math2(p), *node;

    if (cur(p)->type != T_TILDE) {
        return first;
    }
    node = node_new(p, N_CONCAT, line);
    push(p, &node->args, first);
    while (cur(p)->type == T_TILDE) {
        next(p);
        push(p, &node->args, parse_math2(p));
    }
    return node;
}


static jinja_node *
parse_math1(jinja_parser *p)
{
    uint32_t     line = cur(p)->line;
    jinja_node  *left = parse_concat(p);
    int          t;

    while ((t = cur(p)->type) == T_ADD || t == T_SUB) {
        next(p);
        left = binary(p, t == T_ADD ? '+' : '-', left, parse_concat(p), line);
        line = cur(p)->line;
    }
    return left;
}


static jinja_node *
parse_compare(jinja_parser *p)
{
    uint32_t     line = cur(p)->line;
    jinja_node  *expr = parse_math1(p), *node = NULL, *operand;
    int          t, op;

    for (;;) {
        t = cur(p)->type;
        op = t == T_EQ ? 'e' : t == T_NE ? 'n' : t == T_LT ? '<'
             : t == T_LTEQ ? 'l' : t == T_GT ? '>' : t == T_GTEQ ? 'g' : 0;
        if (op) {
            next(p);
        } else if (skip_name(p, "in")) {
            op = 'i';
        } else if (is_name(cur(p), "not") && is_name(look(p), "in")) {
            next(p);
            next(p);
            op = 'I';
        } else {
            break;
        }
        if (node == NULL) {
            node = node_new(p, N_COMPARE, line);
            node->a = expr;
        }
        operand = node_new(p, N_OPERAND, cur(p)->line);
        operand->op = (uint8_t) op;
        operand->a = parse_math1(p);
        push(p, &node->args, operand);
    }
    return node ? node : expr;
}


static jinja_node *
parse_not(jinja_parser *p)
{
    jinja_node  *node;

    if (is_name(cur(p), "not")) {
        enter(p);
        node = node_new(p, N_UNARY, next(p)->line);
        node->op = 'n';
        node->a = parse_not(p);
        p->depth--;
        return node;
    }
    return parse_compare(p);
}


static jinja_node *
parse_and(jinja_parser *p)
{
    uint32_t     line = cur(p)->line;
    jinja_node  *left = parse_not(p), *n;

    while (skip_name(p, "and")) {
        n = node_new(p, N_AND, line);
        n->a = left;
        n->b = parse_not(p);
        left = n;
        line = cur(p)->line;
    }
    return left;
}


static jinja_node *
parse_or(jinja_parser *p)
{
    uint32_t     line = cur(p)->line;
    jinja_node  *left = parse_and(p), *n;

    while (skip_name(p, "or")) {
        n = node_new(p, N_OR, line);
        n->a = left;
        n->b = parse_and(p);
        left = n;
        line = cur(p)->line;
    }
    return left;
}


static jinja_node *
parse_condexpr(jinja_parser *p)
{
    uint32_t     line = cur(p)->line;
    jinja_node  *expr1 = parse_or(p), *n;

    while (skip_name(p, "if")) {
        enter(p);
        n = node_new(p, N_CONDEXPR, line);
        n->a = expr1;
        n->b = parse_or(p);
        if (skip_name(p, "else")) {
            n->c = parse_condexpr(p);
        }
        expr1 = n;
        line = cur(p)->line;
        p->depth--;
    }
    return expr1;
}


static jinja_node *
parse_expression(jinja_parser *p, int with_condexpr)
{
    return with_condexpr ? parse_condexpr(p) : parse_or(p);
}


/* ------------------------------------------------------------------ statements */

static jinja_nodes subparse(jinja_parser *p, const char *const *end_tokens);


static int
can_assign(const jinja_node *n)
{
    uint32_t  i;

    if (n->kind == N_NAME || n->kind == N_NSREF) {
        return 1;
    }
    if (n->kind == N_TUPLE) {
        for (i = 0; i < n->args.n; i++) {
            if (!can_assign(n->args.v[i])) {
                return 0;
            }
        }
        return 1;
    }
    return 0;
}


static const char *
node_class_name(const jinja_node *n)
{
    switch (n->kind) {
    case N_CONST:   return "const";
    case N_LIST:    return "list";
    case N_DICT:    return "dict";
    case N_GETATTR: return "getattr";
    case N_GETITEM: return "getitem";
    case N_CALL:    return "call";
    case N_FILTER:  return "filter";
    default:        return "expression";
    }
}


static jinja_node *
parse_assign_target(jinja_parser *p, int name_only, int with_namespace,
    int extra_end_in)
{
    jinja_node  *target;
    jinja_token *t;

    if (with_namespace && look(p)->type == T_DOT) {
        t = expect(p, T_NAME);
        target = node_new(p, N_NSREF, t->line);
        target->a = node_new(p, N_NAME, t->line);
        target->a->val = jv_str(t->s, t->len);
        target->a->hash = jinja_name_hash(t->s, t->len);
        next(p);
        t = expect(p, T_NAME);
        target->val = jv_str(t->s, t->len);
        return target;
    }
    if (name_only) {
        t = expect(p, T_NAME);
        target = node_new(p, N_NAME, t->line);
        target->val = jv_str(t->s, t->len);
        target->hash = jinja_name_hash(t->s, t->len);
        return target;
    }
    target = parse_tuple(p, TUPLE_SIMPLIFIED | (extra_end_in ? TUPLE_END_IN : 0));
    if (!can_assign(target)) {
        parse_fail(p, "can't assign to '%s'", node_class_name(target));
    }
    return target;
}


/* After a statement's header: ":"?, "%}", the body up to one of
 * end_tokens, which is left current (or consumed with drop_needle). */
static jinja_nodes
parse_statements(jinja_parser *p, const char *const *end_tokens, int drop_needle)
{
    jinja_nodes  body;
    char         want[128];
    size_t       i, off = 0;

    skip(p, T_COLON);
    expect(p, T_BLOCK_END);
    body = subparse(p, end_tokens);
    if (cur(p)->type == T_EOF) {
        want[0] = '\0';
        for (i = 0; end_tokens[i]; i++) {
            off += (size_t) snprintf(want + off, sizeof(want) - off, "%s'%s'",
                                     i ? " or " : "", end_tokens[i]);
            if (off >= sizeof(want)) {
                break;
            }
        }
        parse_fail(p, "unexpected end of template; jinja was looking for "
                   "the following tags: %s", want);
    }
    if (drop_needle) {
        next(p);
    }
    return body;
}


static void
parse_signature(jinja_parser *p, jinja_node *node)
{
    jinja_node  *arg;

    expect(p, T_LPAREN);
    while (cur(p)->type != T_RPAREN) {
        if (node->args.n) {
            expect(p, T_COMMA);
        }
        arg = parse_assign_target(p, 1, 0, 0);
        if (skip(p, T_ASSIGN)) {
            push(p, &node->alt, parse_expression(p, 1));
        } else if (node->alt.n) {
            parse_fail(p, "non-default argument follows default argument");
        }
        push(p, &node->args, arg);
    }
    expect(p, T_RPAREN);
}


static const char *const END_FOR[] = { "endfor", "else", NULL };
static const char *const END_FOR_ONLY[] = { "endfor", NULL };
static const char *const END_IF[] = { "elif", "else", "endif", NULL };
static const char *const END_IF_ONLY[] = { "endif", NULL };
static const char *const END_SET[] = { "endset", NULL };
static const char *const END_MACRO[] = { "endmacro", NULL };
static const char *const END_CALL[] = { "endcall", NULL };
static const char *const END_FILTER[] = { "endfilter", NULL };
static const char *const END_WITH[] = { "endwith", NULL };
static const char *const END_GENERATION[] = { "endgeneration", NULL };


static jinja_node *
parse_for(jinja_parser *p)
{
    jinja_node  *node = node_new(p, N_FOR, next(p)->line);

    node->a = parse_assign_target(p, 0, 0, 1);
    expect_name(p, "in");
    node->b = parse_tuple(p, TUPLE_NO_CONDEXPR | TUPLE_END_RECURSIVE);
    if (skip_name(p, "if")) {
        node->c = parse_expression(p, 1);
    }
    if (skip_name(p, "recursive")) {
        node->flags |= NF_RECURSIVE;
    }
    node->body = parse_statements(p, END_FOR, 0);
    if (is_name(next(p), "else")) {
        node->alt = parse_statements(p, END_FOR_ONLY, 1);
    }
    return node;
}


static jinja_node *
parse_if(jinja_parser *p)
{
    jinja_node   *result, *node, *elif;
    jinja_token  *t;

    result = node = node_new(p, N_IF, next(p)->line);
    for (;;) {
        node->a = parse_tuple(p, TUPLE_NO_CONDEXPR);
        node->body = parse_statements(p, END_IF, 0);
        t = next(p);
        if (is_name(t, "elif")) {
            elif = node_new(p, N_IF, cur(p)->line);
            push(p, &node->alt, elif);
            node = elif;
            continue;
        }
        if (is_name(t, "else")) {
            node->alt = parse_statements(p, END_IF_ONLY, 1);
        }
        return result;
    }
}


static jinja_node *
parse_set(jinja_parser *p)
{
    uint32_t     line = next(p)->line;
    jinja_node  *target = parse_assign_target(p, 0, 1, 0), *node;

    if (skip(p, T_ASSIGN)) {
        node = node_new(p, N_SET, line);
        node->a = target;
        node->b = parse_tuple(p, 0);
        return node;
    }
    node = node_new(p, N_SET_BLOCK, line);
    node->a = target;
    node->c = parse_filter(p, NULL, 0);
    node->body = parse_statements(p, END_SET, 1);
    return node;
}


static jinja_node *
parse_macro(jinja_parser *p)
{
    jinja_node  *node = node_new(p, N_MACRO, next(p)->line), *name;

    name = parse_assign_target(p, 1, 0, 0);
    node->val = name->val;
    node->hash = name->hash;
    parse_signature(p, node);
    node->body = parse_statements(p, END_MACRO, 1);
    return node;
}


static jinja_node *
parse_call_block(jinja_parser *p)
{
    jinja_node  *node = node_new(p, N_CALL_BLOCK, next(p)->line);

    if (cur(p)->type == T_LPAREN) {
        parse_signature(p, node);
    }
    node->a = parse_expression(p, 1);
    if (node->a->kind != N_CALL) {
        parse_fail(p, "expected call");
    }
    node->body = parse_statements(p, END_CALL, 1);
    return node;
}


static jinja_node *
parse_filter_block(jinja_parser *p)
{
    jinja_node  *node = node_new(p, N_FILTER_BLOCK, next(p)->line);

    node->c = parse_filter(p, NULL, 1);
    node->body = parse_statements(p, END_FILTER, 1);
    return node;
}


static jinja_node *
parse_with(jinja_parser *p)
{
    jinja_node  *node = node_new(p, N_WITH, next(p)->line);

    while (cur(p)->type != T_BLOCK_END) {
        if (node->args.n) {
            expect(p, T_COMMA);
        }
        push(p, &node->args, parse_assign_target(p, 0, 0, 0));
        expect(p, T_ASSIGN);
        push(p, &node->alt, parse_expression(p, 1));
    }
    node->body = parse_statements(p, END_WITH, 1);
    return node;
}


static jinja_node *
parse_print(jinja_parser *p)
{
    jinja_node  *node = node_new(p, N_OUTPUT, next(p)->line), *t;

    /* {% print a, b %} prints each expression; kept as a tuple of outputs */
    t = node_new(p, N_TUPLE, node->line);
    while (cur(p)->type != T_BLOCK_END) {
        if (t->args.n) {
            expect(p, T_COMMA);
        }
        push(p, &t->args, parse_expression(p, 1));
    }
    node->a = t;
    node->flags |= 0x200;       /* print each item of a */
    return node;
}


static jinja_node *
parse_statement(jinja_parser *p)
{
    jinja_token  *t = cur(p);
    jinja_node   *node;
    char          b[64];

    if (t->type != T_NAME) {
        parse_fail(p, "tag name expected");
    }
    enter(p);
    if (is_name(t, "for")) {
        node = parse_for(p);
    } else if (is_name(t, "if")) {
        node = parse_if(p);
    } else if (is_name(t, "set")) {
        node = parse_set(p);
    } else if (is_name(t, "macro")) {
        node = parse_macro(p);
    } else if (is_name(t, "call")) {
        node = parse_call_block(p);
    } else if (is_name(t, "filter")) {
        node = parse_filter_block(p);
    } else if (is_name(t, "with")) {
        node = parse_with(p);
    } else if (is_name(t, "print")) {
        node = parse_print(p);
    } else if (is_name(t, "break") || is_name(t, "continue")) {
        node = node_new(p, is_name(t, "break") ? N_BREAK : N_CONTINUE, t->line);
        next(p);
    } else if (is_name(t, "generation")) {
        node = node_new(p, N_GENERATION, next(p)->line);
        node->body = parse_statements(p, END_GENERATION, 1);
    } else if (is_name(t, "block") || is_name(t, "extends")
               || is_name(t, "include") || is_name(t, "import")
               || is_name(t, "from") || is_name(t, "autoescape"))
    {
        parse_fail(p, "the '%.*s' tag is not supported in chat templates",
                   (int) t->len, t->s);
    } else {
        parse_fail(p, "encountered unknown tag '%s'",
                   describe(p, t, b, sizeof(b)));
    }
    p->depth--;
    return node;
}


static int
is_end_token(jinja_parser *p, const char *const *end_tokens)
{
    size_t  i;

    for (i = 0; end_tokens && end_tokens[i]; i++) {
        if (is_name(cur(p), end_tokens[i])) {
            return 1;
        }
    }
    return 0;
}


static jinja_nodes
subparse(jinja_parser *p, const char *const *end_tokens)
{
    jinja_nodes   body = { 0 };
    jinja_node   *node;
    jinja_token  *t;
    char          b[64];

    enter(p);
    for (;;) {
        t = cur(p);
        switch (t->type) {
        case T_DATA:
            node = node_new(p, N_DATA, t->line);
            node->val = jv_str(t->s, t->len);
            push(p, &body, node);
            next(p);
            break;
        case T_VAR_BEGIN:
            next(p);
            node = node_new(p, N_OUTPUT, t->line);
            node->a = parse_tuple(p, 0);
            push(p, &body, node);
            expect(p, T_VAR_END);
            break;
        case T_BLOCK_BEGIN:
            next(p);
            if (end_tokens && is_end_token(p, end_tokens)) {
                p->depth--;
                return body;
            }
            push(p, &body, parse_statement(p));
            expect(p, T_BLOCK_END);
            break;
        case T_EOF:
            p->depth--;
            return body;
        default:
            parse_fail(p, "unexpected '%s'", describe(p, t, b, sizeof(b)));
        }
    }
}


/* ------------------------------------------------------------------ constants */

/* jinja2 compiles a template after folding its constant expressions
 * (optimizer.py): every expression whose as_const() succeeds becomes a
 * literal when Python can write the value back as one, and a whole
 * {{ ... }} of constants becomes text.  This mostly saves work, but it
 * is observable: folding reads items through the sandbox's forgiving
 * getitem(), so [1, 2]['a':] prints '' where a variable would raise.
 * So we fold the same way, while parsing. */

typedef struct jinja_check jinja_check;
static int try_const(jinja_check *c, const jinja_node *n, jv *out);


static int
is_foldable(const jinja_node *n)
{
    switch (n->kind) {
    case N_LIST: case N_TUPLE: case N_DICT: case N_GETATTR: case N_GETITEM:
    case N_BINARY: case N_UNARY: case N_AND: case N_OR: case N_CONCAT:
    case N_COMPARE: case N_CONDEXPR: case N_TEST:
        return 1;
    case N_FILTER:
        return n->a != NULL;
    default:
        return 0;
    }
}


static void
make_const(jinja_node *n, jv v)
{
    n->kind = N_CONST;
    n->val = v;
    n->flags = (v.type == JV_LIST || v.type == JV_TUPLE || v.type == JV_DICT)
               ? NF_CONST_COPY : 0;
    n->a = n->b = n->c = n->d = NULL;
    memset(&n->args, 0, sizeof(n->args));
    memset(&n->kwargs, 0, sizeof(n->kwargs));
    memset(&n->body, 0, sizeof(n->body));
    memset(&n->alt, 0, sizeof(n->alt));
}


/* Folds the expression n bottom-up, as jinja2's Optimizer does. */
static void
fold(jinja_check *c, jinja_node *n)
{
    uint32_t  i;
    jv        v;

    if (n == NULL) {
        return;
    }
    fold(c, n->a);
    fold(c, n->b);
    fold(c, n->c);
    fold(c, n->d);
    for (i = 0; i < n->args.n; i++) {
        fold(c, n->args.v[i]);
    }
    for (i = 0; i < n->kwargs.n; i++) {
        fold(c, n->kwargs.v[i]);
    }
    for (i = 0; i < n->alt.n; i++) {
        fold(c, n->alt.v[i]);
    }
    if (is_foldable(n) && try_const(c, n, &v) && jv_safe_repr(v)) {
        make_const(n, v);
    }
}


/* {{ expr }}: a constant expression is printed at compile time, whatever
 * its value (Undefined prints ''). */
static void
fold_output(jinja_check *c, jinja_node *n)
{
    jv  v;

    fold(c, n);
    if (n->kind != N_CONST && try_const(c, n, &v)) {
        make_const(n, jv_make(JV_STR));
        n->val = v;     /* printed with str() like any value */
    }
}


/* ------------------------------------------------------------------ check pass *//* ------------------------------------------------------------------ check pass */

struct jinja_check {
    jinja_vm  *vm;
    int        soft;        /* inside an if or a conditional expression */
    int        in_loop;     /* break/continue allowed */
    jinja_node *macro;      /* innermost macro, for varargs/kwargs/caller */
};


/* Node.as_const(): evaluates n with no variables; any failure means
 * "Impossible".  Bounded, so folding cannot stall the parser. */
static int
try_const(jinja_check *c, const jinja_node *n, jv *out)
{
    jinja_vm  *vm = c->vm;
    jmp_buf    saved;
    size_t     limit = vm->arena.limit;
    uint32_t   line = vm->line;
    int        ok = 0;

    memcpy(saved, vm->jmp, sizeof(jmp_buf));
    vm->arena.limit = vm->arena.total + ((size_t) 16 << 20);
    vm->steps = 0;
    vm->max_steps = 1000000;
    if (setjmp(vm->jmp) == 0) {
        *out = jinja_eval_const(vm, n);
        ok = 1;
    }
    vm->const_mode = 0;
    vm->depth = 0;
    vm->line = line;
    vm->arena.limit = limit;
    memcpy(vm->jmp, saved, sizeof(jmp_buf));
    return ok;
}


static void check_node(jinja_check *c, jinja_node *n);


static void
check_list(jinja_check *c, jinja_nodes *l)
{
    uint32_t  i;

    for (i = 0; i < l->n; i++) {
        check_node(c, l->v[i]);
    }
}


static void
check_name_use(jinja_check *c, jinja_node *n)
{
    jinja_node  *m = c->macro;

    if (m == NULL) {
        return;
    }
    if (n->val.len == 7 && memcmp(n->val.u.s, "varargs", 7) == 0) {
        m->flags |= NF_USES_VARARGS;
    } else if (n->val.len == 6 && memcmp(n->val.u.s, "kwargs", 6) == 0) {
        m->flags |= NF_USES_KWARGS;
    } else if (n->val.len == 6 && memcmp(n->val.u.s, "caller", 6) == 0) {
        m->flags |= NF_USES_CALLER;
    }
}


/* The body of a macro, call block or generation block: a new function in
 * jinja2's generated code, so not soft and not inside any loop. */
static void
check_function_body(jinja_check *c, jinja_node *n)
{
    jinja_check  inner = *c;

    inner.soft = 0;
    inner.in_loop = 0;
    inner.macro = n;
    check_list(&inner, &n->alt);        /* defaults */
    check_list(&inner, &n->body);
}


static int
tuple_has_loop(const jinja_node *t)
{
    uint32_t  i;

    for (i = 0; i < t->args.n; i++) {
        const jinja_node  *x = t->args.v[i];

        if ((x->kind == N_NAME && x->val.len == 4 && memcmp(x->val.u.s, "loop", 4) == 0)
            || (x->kind == N_TUPLE && tuple_has_loop(x)))
        {
            return 1;
        }
    }
    return 0;
}


static void
check_node(jinja_check *c, jinja_node *n)
{
    jinja_check  saved = *c;

    if (n == NULL) {
        return;
    }
    switch (n->kind) {
    case N_NAME:
        check_name_use(c, n);
        return;

    case N_FILTER:
    case N_TEST:
        if ((n->flags & 0x100) && !c->soft) {
            c->vm->line = n->line;
            jinja_fail(c->vm, "no %s named '%.*s'",
                       n->kind == N_FILTER ? "filter" : "test",
                       (int) n->val.len, n->val.u.s);
        }
        break;
    case N_IF:
    case N_CONDEXPR:
        c->soft = 1;
        break;
    case N_FOR:
        if ((n->a->kind == N_NAME && n->a->val.len == 4
             && memcmp(n->a->val.u.s, "loop", 4) == 0)
            || (n->a->kind == N_TUPLE && tuple_has_loop(n->a)))
        {
            c->vm->line = n->line;
            jinja_fail(c->vm, "syntax error: Can't assign to special loop variable "
                       "in for-loop target");
        }
        check_node(c, n->b);            /* the iterable: the outer frame */
        c->soft = 0;
        check_node(c, n->a);
        check_node(c, n->c);
        check_list(c, &n->alt);         /* else: outside this loop */
        c->in_loop = 1;
        check_list(c, &n->body);
        *c = saved;
        return;
    case N_MACRO:
        check_function_body(c, n);
        return;
    case N_CALL_BLOCK:
        check_node(c, n->a);
        check_function_body(c, n);
        return;
    case N_GENERATION:
        check_function_body(c, n);
        return;
    case N_SET_BLOCK:
    case N_FILTER_BLOCK:
    case N_WITH:
        check_node(c, n->a);
        check_list(c, &n->alt);
        c->soft = 0;
        check_node(c, n->c);
        check_list(c, &n->args);
        check_list(c, &n->body);
        *c = saved;
        return;
    case N_BREAK:
    case N_CONTINUE:
        if (!c->in_loop) {
            c->vm->line = n->line;
            jinja_fail(c->vm, "syntax error: '%s' outside loop",
                       n->kind == N_BREAK ? "break" : "continue");
        }
        return;
    default:
        break;
    }
    check_node(c, n->a);
    check_node(c, n->b);
    check_node(c, n->c);
    check_node(c, n->d);
    check_list(c, &n->args);
    check_list(c, &n->kwargs);
    check_list(c, &n->body);
    check_list(c, &n->alt);
    *c = saved;
}


/* ------------------------------------------------------------------ fold pass */

/* The arguments of a filter chain ({% filter %}, {% set x | f %}). */
static void
fold_chain(jinja_check *c, jinja_node *f)
{
    uint32_t  i;

    for (; f; f = f->a) {
        for (i = 0; i < f->args.n; i++) {
            fold(c, f->args.v[i]);
        }
        for (i = 0; i < f->kwargs.n; i++) {
            fold(c, f->kwargs.v[i]);
        }
        fold(c, f->c);
        fold(c, f->d);
    }
}


static void
fold_body(jinja_check *c, jinja_nodes *body)
{
    uint32_t     i, k;
    jinja_node  *n;

    for (i = 0; i < body->n; i++) {
        n = body->v[i];
        switch (n->kind) {
        case N_OUTPUT:
            if (n->flags & 0x200) {
                for (k = 0; k < n->a->args.n; k++) {
                    fold_output(c, n->a->args.v[k]);
                }
            } else {
                fold_output(c, n->a);
            }
            break;
        case N_IF:
            fold(c, n->a);
            break;
        case N_FOR:
            fold(c, n->b);
            fold(c, n->c);
            break;
        case N_SET:
            fold(c, n->b);
            break;
        case N_SET_BLOCK:
        case N_FILTER_BLOCK:
            fold_chain(c, n->c);
            break;
        case N_MACRO:
            for (k = 0; k < n->alt.n; k++) {
                fold(c, n->alt.v[k]);
            }
            break;
        case N_CALL_BLOCK:
            fold(c, n->a);
            for (k = 0; k < n->alt.n; k++) {
                fold(c, n->alt.v[k]);
            }
            break;
        case N_WITH:
            for (k = 0; k < n->alt.n; k++) {
                fold(c, n->alt.v[k]);
            }
            break;
        default:
            break;
        }
        if (n->kind != N_WITH) {
            fold_body(c, &n->alt);      /* else / elif branches */
        }
        fold_body(c, &n->body);
    }
}


/* ------------------------------------------------------------------ entry */

jinja_template *
jinja_parse(const char *src, size_t len, char *err)
{
    jinja_vm         vm;
    jinja_template  *t;
    jinja_tokens     toks = { 0 };
    jinja_parser     p;
    jinja_check      c;
    jinja_nodes      body;

    if (!ju_valid(src, len)) {
        snprintf(err, LLM_ERR_LEN, "chat template error: the template is not "
                 "valid UTF-8");
        return NULL;
    }
    jinja_vm_init(&vm);
    if (setjmp(vm.jmp)) {
        snprintf(err, LLM_ERR_LEN, "%s", vm.err);
        jinja_vm_free(&vm);
        return NULL;
    }
    jinja_lex(&vm, src, len, &toks);

    memset(&p, 0, sizeof(p));
    p.vm = &vm;
    p.t = toks.v;
    p.n = toks.n;
    body = subparse(&p, NULL);

    memset(&c, 0, sizeof(c));
    c.vm = &vm;
    check_list(&c, &body);
    fold_body(&c, &body);

    t = jinja_alloc(&vm, sizeof(jinja_template));
    t->body = body;
    t->arena = vm.arena;    /* the template keeps the arena */
    return t;
}


void
jinja_template_free(jinja_template *t)
{
    jinja_arena  a;

    if (t) {
        a = t->arena;       /* t itself lives in the arena */
        jinja_arena_free(&a);
    }
}
