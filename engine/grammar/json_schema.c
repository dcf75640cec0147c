/*
 * json_schema.c -- grammar specs (grammar.h) and JSON Schemas compiled to
 * grammar_impl.h's nodes.
 *
 * The subset (docs/api.md, "Structured outputs"): type (a name or a list),
 * nullable, enum, const, object (properties, required,
 * additionalProperties), array (items, minItems, maxItems), string
 * (minLength, maxLength, pattern, format date / time / date-time / email /
 * uuid), number and integer (minimum, maximum, exclusiveMinimum,
 * exclusiveMaximum, also draft 4's boolean form), boolean, null, anyOf,
 * oneOf (as anyOf), allOf of one schema, $ref into the same document
 * ($defs, definitions or any JSON pointer), true and {} (any value).
 * Annotations are ignored; any other keyword is refused by name.
 *
 * Policies, the ones xgrammar and OpenAI's strict mode have:
 *   - properties come in the schema's order; optional ones may be left
 *     out; additionalProperties absent means none when `properties` is
 *     given (a bare {"type": "object"} is any object); extra properties
 *     (true or a schema) come after the declared ones, their names
 *     printable ASCII without escapes and no declared name;
 *   - enum and const values are written compactly (JSON.stringify's form);
 *   - strings with a length, pattern or format take no \u escapes; formats
 *     are written in one form (date-time: YYYY-MM-DDThh:mm:ss[.f] then Z or
 *     +hh:mm; no leap seconds);
 *   - numbers: at most 15 integer digits; with a bound, at most 12 integer
 *     and 6 fraction digits and no exponent; without, up to 15 fraction
 *     digits and a 2-digit exponent; integers without fraction or exponent;
 *   - oneOf is anyOf: the output matches at least one alternative.
 *
 * Nothing recurses on the input beyond its JSON depth (llm_json_parse()'s
 * limit) and SC_MAX_DEPTH schemas through $ref; the analyses after it are
 * fixpoint iterations.
 */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <yajl/yajl_tree.h>

#include "grammar_impl.h"
#include "llm.h"
#include "util/util.h"

#define SC_MAX_DEPTH 128

static uint64_t  sc_next_id;

typedef struct {
    llm_grammar  *g;
    yajl_val      doc;              /* the schema $ref resolves in */
    char         *err;
    int           depth;
    char          path[256];
    size_t        path_len;
    struct { yajl_val target; int node; } *refs;
    int           n_refs, cap_refs;
    struct { int litset, check; } *checks;
    int           n_checks, cap_checks;
} sc_ctx;


#define SC_GROW(arr, n, cap, min)                                             \
    do {                                                                      \
        if ((n) == (cap)) {                                                   \
            (cap) = (cap) ? 2 * (cap) : (min);                                \
            (arr) = llm_xrealloc((arr), sizeof(*(arr)) * (size_t) (cap));     \
        }                                                                     \
    } while (0)


static int
sc_fail(sc_ctx *c, const char *fmt, ...)
{
    char     msg[LLM_ERR_LEN];
    va_list  ap;

    if (c->err[0] != '\0') {
        return -1;
    }
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    llm_errf(c->err, "%s (at %s)", msg, c->path_len ? c->path : "#");
    return -1;
}


static size_t
sc_path_push(sc_ctx *c, const char *seg)
{
    size_t  old = c->path_len;
    int     n;

    if (old == 0) {
        c->path[0] = '#';
        c->path_len = old = 1;
        c->path[1] = '\0';
    }
    n = snprintf(c->path + c->path_len, sizeof(c->path) - c->path_len, "/%s",
                 seg);
    if (n > 0) {
        c->path_len += (size_t) n;
        if (c->path_len >= sizeof(c->path)) {
            c->path_len = sizeof(c->path) - 1;
        }
    }
    return old;
}


static void
sc_path_pop(sc_ctx *c, size_t old)
{
    c->path_len = old;
    c->path[old] = '\0';
}


/* ---- the grammar's pools -------------------------------------------------- */


static int
g_node_new(llm_grammar *g, int type)
{
    g_node  *nd;

    SC_GROW(g->nodes, g->n_nodes, g->cap_nodes, 64);
    nd = &g->nodes[g->n_nodes];
    memset(nd, 0, sizeof(*nd));
    nd->type = (uint8_t) type;
    nd->dfa = nd->item = nd->trie = nd->max = -1;
    return g->n_nodes++;
}


static int
g_trie_new(llm_grammar *g, unsigned char byte)
{
    g_trie  *t;

    SC_GROW(g->trie, g->n_trie, g->cap_trie, 64);
    t = &g->trie[g->n_trie];
    t->child = t->sibling = t->term = -1;
    t->byte = byte;
    t->mask = 0;
    return g->n_trie++;
}


/* -1 when the text is already there with another term */
static int
g_trie_insert(llm_grammar *g, int root, const char *s, size_t n, int term,
    uint64_t bit)
{
    int     node = root, t;
    size_t  i;

    g->trie[root].mask |= bit;
    for (i = 0; i < n; i++) {
        t = g_trie_child(g, node, (unsigned char) s[i]);
        if (t < 0) {
            t = g_trie_new(g, (unsigned char) s[i]);
            g->trie[t].sibling = g->trie[node].child;
            g->trie[node].child = t;
        }
        g->trie[t].mask |= bit;
        node = t;
    }
    if (g->trie[node].term >= 0 && g->trie[node].term != term) {
        return bit ? -1 : 0;
    }
    g->trie[node].term = term;
    return 0;
}


static int32_t
g_lit_add(llm_grammar *g, const char *s, size_t n)
{
    int32_t  off = (int32_t) g->n_lits;

    if (g->n_lits + n > g->cap_lits) {
        g->cap_lits = 2 * (g->n_lits + n) + 64;
        g->lits = llm_xrealloc(g->lits, g->cap_lits);
    }
    memcpy(g->lits + g->n_lits, s, n);
    g->n_lits += n;
    return off;
}


static int
g_kids_add(llm_grammar *g, int kid)
{
    SC_GROW(g->kids, g->n_kids, g->cap_kids, 64);
    g->kids[g->n_kids] = kid;
    return g->n_kids++;
}


static int
g_dfa_add(llm_grammar *g, llm_dfa *d)
{
    SC_GROW(g->dfas, g->n_dfas, g->cap_dfas, 8);
    g->dfas[g->n_dfas] = *d;
    return g->n_dfas++;
}


void
llm_grammar_free(llm_grammar *g)
{
    int  i;

    if (g == NULL) {
        return;
    }
    for (i = 0; i < g->n_dfas; i++) {
        llm_dfa_free(&g->dfas[i]);
    }
    free(g->dfas);
    free(g->nodes);
    free(g->kids);
    free(g->props);
    free(g->lits);
    free(g->trie);
    free(g->alt_list);
    free(g->key);
    free(g);
}


/* ---- canonical JSON text (JSON.stringify's) -------------------------------- */


typedef struct {
    char    *s;
    size_t   n, cap;
} sc_buf;


static void
sc_put(sc_buf *b, const char *s, size_t n)
{
    if (b->n + n + 1 > b->cap) {
        b->cap = 2 * (b->n + n) + 64;
        b->s = llm_xrealloc(b->s, b->cap);
    }
    memcpy(b->s + b->n, s, n);
    b->n += n;
    b->s[b->n] = '\0';
}


static void
sc_put_str(sc_buf *b, const char *s)
{
    char  esc[8];

    sc_put(b, "\"", 1);
    for ( ; *s; s++) {
        unsigned char  c = (unsigned char) *s;

        switch (c) {
        case '"': sc_put(b, "\\\"", 2); break;
        case '\\': sc_put(b, "\\\\", 2); break;
        case '\b': sc_put(b, "\\b", 2); break;
        case '\f': sc_put(b, "\\f", 2); break;
        case '\n': sc_put(b, "\\n", 2); break;
        case '\r': sc_put(b, "\\r", 2); break;
        case '\t': sc_put(b, "\\t", 2); break;
        default:
            if (c < 0x20) {
                snprintf(esc, sizeof(esc), "\\u%04x", c);
                sc_put(b, esc, 6);
            } else {
                sc_put(b, (const char *) &c, 1);
            }
        }
    }
    sc_put(b, "\"", 1);
}


/* A double as JavaScript's Number.prototype.toString() writes it: the
 * shortest digits that read back, laid out by ECMA-262's rules. */
static void
sc_put_number(sc_buf *b, double d)
{
    char  tmp[64], digits[32], out[64];
    int   prec, k = 0, n, i, e;
    char *p;

    if (d == 0) {
        sc_put(b, "0", 1);
        return;
    }
    if (d < 0) {
        sc_put(b, "-", 1);
        d = -d;
    }
    for (prec = 1; prec <= 17; prec++) {
        snprintf(tmp, sizeof(tmp), "%.*e", prec - 1, d);
        if (strtod(tmp, NULL) == d) {
            break;
        }
    }
    /* tmp: D.DDDDe[+-]XX */
    for (p = tmp; *p && *p != 'e'; p++) {
        if (*p >= '0' && *p <= '9') {
            digits[k++] = *p;
        }
    }
    while (k > 1 && digits[k - 1] == '0') {
        k--;
    }
    digits[k] = '\0';
    e = atoi(p + 1);
    n = e + 1;                          /* the decimal point's position */
    i = 0;
    if (k <= n && n <= 21) {
        i = snprintf(out, sizeof(out), "%s%0*d", digits, n - k, 0);
        if (n - k == 0) {
            out[k] = '\0';
            i = k;
        }
    } else if (0 < n && n <= 21) {
        i = snprintf(out, sizeof(out), "%.*s.%s", n, digits, digits + n);
    } else if (-6 < n && n <= 0) {
        i = snprintf(out, sizeof(out), "0.%0*d%s", -n, 0, digits);
        if (n == 0) {
            i = snprintf(out, sizeof(out), "0.%s", digits);
        }
    } else {
        i = snprintf(out, sizeof(out), "%c%s%s%se%c%d", digits[0],
                     k > 1 ? "." : "", digits + 1, "", e >= 0 ? '+' : '-',
                     e >= 0 ? e : -e);
    }
    sc_put(b, out, (size_t) i);
}


/* depth: bounded by the tree's (llm_json_parse()'s limit) */
static void
sc_put_value(sc_buf *b, yajl_val v)
{
    size_t  i;

    switch (v->type) {
    case yajl_t_string:
        sc_put_str(b, v->u.string);
        break;
    case yajl_t_number:
        sc_put_number(b, v->u.number.d);
        break;
    case yajl_t_true:
        sc_put(b, "true", 4);
        break;
    case yajl_t_false:
        sc_put(b, "false", 5);
        break;
    case yajl_t_null:
        sc_put(b, "null", 4);
        break;
    case yajl_t_array:
        sc_put(b, "[", 1);
        for (i = 0; i < v->u.array.len; i++) {
            if (i) {
                sc_put(b, ",", 1);
            }
            sc_put_value(b, v->u.array.values[i]);
        }
        sc_put(b, "]", 1);
        break;
    default:
        sc_put(b, "{", 1);
        for (i = 0; i < v->u.object.len; i++) {
            if (i) {
                sc_put(b, ",", 1);
            }
            sc_put_str(b, v->u.object.keys[i]);
            sc_put(b, ":", 1);
            sc_put_value(b, v->u.object.values[i]);
        }
        sc_put(b, "}", 1);
        break;
    }
}


/* ---- keywords --------------------------------------------------------------- */


static const char *const  sc_annotations[] = {
    "title", "description", "default", "examples", "$schema", "$id",
    "$comment", "deprecated", "readOnly", "writeOnly", "$defs",
    "definitions", "discriminator", NULL
};

static const char *const  sc_constraints[] = {
    "type", "nullable", "enum", "const", "properties", "required",
    "additionalProperties", "items", "minItems", "maxItems", "minLength",
    "maxLength", "pattern", "format", "minimum", "maximum",
    "exclusiveMinimum", "exclusiveMaximum", "anyOf", "oneOf", "allOf",
    "$ref", NULL
};

enum {
    T_NULL = 1, T_BOOL = 2, T_OBJECT = 4, T_ARRAY = 8, T_NUMBER = 16,
    T_INTEGER = 32, T_STRING = 64
};


static int
sc_in(const char *const *list, const char *k)
{
    for ( ; *list; list++) {
        if (strcmp(*list, k) == 0) {
            return 1;
        }
    }
    return 0;
}


/* The keyword of s other than those allowed (NULL-terminated) that
 * constrains, or NULL. */
static const char *
sc_other_constraint(yajl_val s, const char *const *allowed)
{
    size_t  i;

    for (i = 0; i < s->u.object.len; i++) {
        if (sc_in(sc_constraints, s->u.object.keys[i])
            && !sc_in(allowed, s->u.object.keys[i]))
        {
            return s->u.object.keys[i];
        }
    }
    return NULL;
}


static int
sc_count(sc_ctx *c, yajl_val s, const char *key, int *out)
{
    yajl_val  v = llm_json_get(s, key);

    if (v == NULL) {
        return 0;
    }
    if (!YAJL_IS_NUMBER(v) || v->u.number.d < 0
        || v->u.number.d != floor(v->u.number.d) || v->u.number.d > 1e9)
    {
        return sc_fail(c, "'%s' must be a non-negative integer", key);
    }
    *out = (int) v->u.number.d;
    return 1;
}


static int sc_schema(sc_ctx *c, yajl_val s);


static int
sc_sub(sc_ctx *c, yajl_val s, const char *seg)
{
    size_t  old = sc_path_push(c, seg);
    int     id = sc_schema(c, s);

    sc_path_pop(c, old);
    return id;
}


/* ---- strings ---------------------------------------------------------------- */


/* The formats, as regexes in our subset of what ajv-formats accepts. */
static const char *
sc_format_re(const char *name)
{
#define SC_Y     "[0-9]{4}"
#define SC_LEAP  "([0-9]{2}(0[48]|[2468][048]|[13579][26])" \
                 "|(0[48]|[2468][048]|[13579][26])00|0000)"
#define SC_DATE  "(" SC_Y "-(0[13578]|1[02])-(0[1-9]|[12][0-9]|3[01])" \
                 "|" SC_Y "-(0[469]|11)-(0[1-9]|[12][0-9]|30)" \
                 "|" SC_Y "-02-(0[1-9]|1[0-9]|2[0-8])" \
                 "|" SC_LEAP "-02-29)"
#define SC_TIME  "([01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9](\\.[0-9]{1,9})?" \
                 "(Z|[+-]([01][0-9]|2[0-3]):[0-5][0-9])"
#define SC_EC    "[a-zA-Z0-9!#$%&'*+/=?^_`{|}~-]"
#define SC_AN    "[a-zA-Z0-9]"
    if (strcmp(name, "date") == 0) {
        return SC_DATE;
    }
    if (strcmp(name, "time") == 0) {
        return SC_TIME;
    }
    if (strcmp(name, "date-time") == 0) {
        return SC_DATE "T" SC_TIME;
    }
    if (strcmp(name, "email") == 0) {
        return SC_EC "+(\\." SC_EC "+)*@(" SC_AN "([a-zA-Z0-9-]*" SC_AN ")?\\.)+"
               SC_AN "([a-zA-Z0-9-]*" SC_AN ")?";
    }
    if (strcmp(name, "uuid") == 0) {
        return "[0-9a-fA-F]{8}-([0-9a-fA-F]{4}-){3}[0-9a-fA-F]{12}";
    }
    return NULL;
}


static int
sc_string(sc_ctx *c, yajl_val s)
{
    llm_grammar  *g = c->g;
    yajl_val      pat = llm_json_get(s, "pattern"), fmt = llm_json_get(s, "format");
    llm_dfa       a, b, both;
    const char   *re;
    int           id, min = 0, max = -1, have_a = 0, have_b = 0;
    g_node       *nd;

    if (sc_count(c, s, "minLength", &min) < 0
        || sc_count(c, s, "maxLength", &max) < 0)
    {
        return -1;
    }
    if (pat) {
        if (!YAJL_IS_STRING(pat)) {
            return sc_fail(c, "'pattern' must be a string");
        }
        if (llm_regex_compile(pat->u.string, strlen(pat->u.string), 0, &a,
                              c->err) != 0)
        {
            return -1;
        }
        have_a = 1;
    }
    if (fmt) {
        if (!YAJL_IS_STRING(fmt)) {
            return sc_fail(c, "'format' must be a string");
        }
        re = sc_format_re(fmt->u.string);
        if (re == NULL) {
            if (have_a) {
                llm_dfa_free(&a);
            }
            return sc_fail(c, "format '%s' is not supported (date, time, "
                           "date-time, email and uuid are)", fmt->u.string);
        }
        if (llm_regex_compile(re, strlen(re), 1, &b, c->err) != 0) {
            if (have_a) {
                llm_dfa_free(&a);
            }
            return -1;
        }
        have_b = 1;
    }
    if (have_a && have_b) {
        int  rc = llm_dfa_intersect(&a, &b, &both, c->err);

        llm_dfa_free(&a);
        llm_dfa_free(&b);
        if (rc != 0) {
            return -1;
        }
        a = both;
    } else if (have_b) {
        a = b;
        have_a = 1;
    }
    if (have_a && (min > LLM_RE_MAX_LEN || max > LLM_RE_MAX_LEN)) {
        llm_dfa_free(&a);
        return sc_fail(c, "minLength and maxLength above %d together with "
                       "a pattern or format are not supported",
                       LLM_RE_MAX_LEN);
    }
    if (have_a && (min > 0 || max >= 0)) {
        llm_dfa_lengths(&a);
    }
    id = g_node_new(g, G_STRING);
    nd = &g->nodes[id];
    nd->min = min;
    nd->max = max;
    nd->dfa = have_a || have_b ? g_dfa_add(g, &a) : -1;
    nd->strict = nd->dfa >= 0 || min > 0 || max >= 0;
    return id;
}


/* ---- numbers ---------------------------------------------------------------- */


/* The grid value g (units of 10^-F) as the double its decimal text reads
 * as: what JSON.parse() gives ajv. */
static double
sc_grid_value(int64_t v, int F)
{
    char      buf[320];
    uint64_t  m = v < 0 ? (uint64_t) -v : (uint64_t) v;
    uint64_t  G = 1;
    int       i;

    for (i = 0; i < F; i++) {
        G *= 10;
    }
    snprintf(buf, sizeof(buf), "%s%llu.%0*llu", v < 0 ? "-" : "",
             (unsigned long long) (m / G), (F > 0 ? F : 1) & 31,
             (unsigned long long) (F > 0 ? m % G : 0));
    return strtod(buf, NULL);
}


static int
sc_sat_lo(int64_t g, int F, double lo, int excl)
{
    double  v = sc_grid_value(g, F);

    return excl ? v > lo : v >= lo;
}


static int
sc_sat_hi(int64_t g, int F, double hi, int excl)
{
    double  v = sc_grid_value(g, F);

    return excl ? v < hi : v <= hi;
}


static int
sc_bound(sc_ctx *c, yajl_val s, const char *key, const char *excl_key,
    double *out, int *excl)
{
    yajl_val  v = llm_json_get(s, key), e = llm_json_get(s, excl_key);
    int       have = 0;

    *excl = 0;
    if (v) {
        if (!YAJL_IS_NUMBER(v)) {
            return sc_fail(c, "'%s' must be a number", key);
        }
        *out = v->u.number.d;
        have = 1;
    }
    if (e) {
        if (YAJL_IS_TRUE(e) || YAJL_IS_FALSE(e)) {
            /* draft 4: a flag on minimum / maximum */
            if (YAJL_IS_TRUE(e) && !v) {
                return sc_fail(c, "'%s': true needs '%s'", excl_key, key);
            }
            *excl = YAJL_IS_TRUE(e);
        } else if (YAJL_IS_NUMBER(e)) {
            /* both: the tighter one */
            if (!have || (key[1] == 'i' ? e->u.number.d >= *out
                                        : e->u.number.d <= *out))
            {
                *out = e->u.number.d;
                *excl = 1;
            }
            have = 1;
        } else {
            return sc_fail(c, "'%s' must be a number", excl_key);
        }
    }
    return have;
}


static int
sc_number(sc_ctx *c, yajl_val s, int integer)
{
    llm_grammar  *g = c->g;
    double        lo = 0, hi = 0, scale;
    int           has_lo, has_hi, elo, ehi, id;
    int64_t       M, L, H;
    g_node       *nd;

    has_lo = sc_bound(c, s, "minimum", "exclusiveMinimum", &lo, &elo);
    has_hi = sc_bound(c, s, "maximum", "exclusiveMaximum", &hi, &ehi);
    if (has_lo < 0 || has_hi < 0) {
        return -1;
    }
    id = g_node_new(g, G_NUMBER);
    nd = &g->nodes[id];
    nd->integer = (uint8_t) integer;
    nd->bounded = has_lo || has_hi;
    nd->F = (uint8_t) (integer ? 0 : nd->bounded ? 6 : 15);
    nd->I = (uint8_t) (integer ? 15 : nd->bounded ? 12 : 15);
    nd->exp = !integer && !nd->bounded;
    if (!nd->bounded) {
        return id;
    }
    scale = pow(10, nd->F);
    M = 1;
    for (int i = 0; i < nd->I + nd->F; i++) {
        M *= 10;
    }
    M -= 1;
    L = -M;
    H = M;
    if (has_lo) {
        if (lo * scale > (double) M) {
            L = M + 1;
        } else if (lo * scale >= (double) -M) {
            L = (int64_t) ceill((long double) lo * scale);
            while (L > -M && sc_sat_lo(L - 1, nd->F, lo, elo)) {
                L--;
            }
            while (L <= M && !sc_sat_lo(L, nd->F, lo, elo)) {
                L++;
            }
        }
    }
    if (has_hi) {
        if (hi * scale < (double) -M) {
            H = -M - 1;
        } else if (hi * scale <= (double) M) {
            H = (int64_t) floorl((long double) hi * scale);
            while (H < M && sc_sat_hi(H + 1, nd->F, hi, ehi)) {
                H++;
            }
            while (H >= -M && !sc_sat_hi(H, nd->F, hi, ehi)) {
                H--;
            }
        }
    }
    nd = &g->nodes[id];
    nd->L = L;
    nd->H = H;
    return id;
}


/* ---- objects and arrays ----------------------------------------------------- */


static int
sc_object(sc_ctx *c, yajl_val s)
{
    llm_grammar  *g = c->g;
    yajl_val      props = llm_json_get(s, "properties");
    yajl_val      req = llm_json_get(s, "required");
    yajl_val      add = llm_json_get(s, "additionalProperties");
    sc_buf        name = { 0 };
    size_t        i, k, n = 0, old;
    int           id, trie, a, node, item = -1;
    uint64_t      required = 0;

    if (props && !YAJL_IS_OBJECT(props)) {
        return sc_fail(c, "'properties' must be an object");
    }
    if (req && !YAJL_IS_ARRAY(req)) {
        return sc_fail(c, "'required' must be an array of strings");
    }
    n = props ? props->u.object.len : 0;
    if (n > LLM_G_MAX_PROPS) {
        return sc_fail(c, "more than %d properties in one object",
                       LLM_G_MAX_PROPS);
    }
    trie = g_trie_new(g, 0);
    a = g->n_props;
    for (i = 0; i < n; i++) {
        SC_GROW(g->props, g->n_props, g->cap_props, 16);
        g->n_props++;
    }
    old = sc_path_push(c, "properties");
    for (i = 0; i < n; i++) {
        name.n = 0;
        sc_put_str(&name, props->u.object.keys[i]);
        if (g_trie_insert(g, trie, name.s, name.n, (int) i,
                          (uint64_t) 1 << i) != 0)
        {
            free(name.s);
            sc_path_pop(c, old);
            return sc_fail(c, "property '%s' is declared twice",
                           props->u.object.keys[i]);
        }
        node = sc_sub(c, props->u.object.values[i], props->u.object.keys[i]);
        if (node < 0) {
            free(name.s);
            sc_path_pop(c, old);
            return -1;
        }
        g->props[a + i].node = node;
        g->props[a + i].required = 0;
    }
    sc_path_pop(c, old);
    free(name.s);
    for (k = 0; req && k < req->u.array.len; k++) {
        yajl_val  r = req->u.array.values[k];

        if (!YAJL_IS_STRING(r)) {
            return sc_fail(c, "'required' must be an array of strings");
        }
        for (i = 0; i < n; i++) {
            if (strcmp(props->u.object.keys[i], r->u.string) == 0) {
                break;
            }
        }
        if (i == n) {
            return sc_fail(c, "required property '%s' is not in "
                           "'properties'", r->u.string);
        }
        g->props[a + i].required = 1;
        required |= (uint64_t) 1 << i;
    }
    if (add == NULL) {
        if (props == NULL) {
            item = g_node_new(g, G_ANY);
        }
    } else if (YAJL_IS_TRUE(add) || YAJL_IS_OBJECT(add)) {
        item = sc_sub(c, add, "additionalProperties");
        if (item < 0) {
            return -1;
        }
    } else if (!YAJL_IS_FALSE(add)) {
        return sc_fail(c, "'additionalProperties' must be a boolean or a "
                       "schema");
    }
    id = g_node_new(g, G_OBJECT);
    g->nodes[id].a = a;
    g->nodes[id].n = (int32_t) n;
    g->nodes[id].trie = trie;
    g->nodes[id].item = item;
    g->nodes[id].required = required;
    g->nodes[id].usable = n == 64 ? ~(uint64_t) 0 : ((uint64_t) 1 << n) - 1;
    return id;
}


static int
sc_array(sc_ctx *c, yajl_val s)
{
    llm_grammar  *g = c->g;
    yajl_val      items = llm_json_get(s, "items");
    int           id, item, min = 0, max = -1;

    if (sc_count(c, s, "minItems", &min) < 0
        || sc_count(c, s, "maxItems", &max) < 0)
    {
        return -1;
    }
    if (items == NULL) {
        item = g_node_new(g, G_ANY);
    } else if (YAJL_IS_ARRAY(items)) {
        return sc_fail(c, "'items' as an array (a tuple) is not supported");
    } else {
        item = sc_sub(c, items, "items");
        if (item < 0) {
            return -1;
        }
    }
    id = g_node_new(g, G_ARRAY);
    g->nodes[id].item = item;
    g->nodes[id].min = min;
    g->nodes[id].max = max;
    return id;
}


/* ---- enum, const, choices ----------------------------------------------------- */


static int
sc_value_type(yajl_val v)
{
    switch (v->type) {
    case yajl_t_null: return T_NULL;
    case yajl_t_true:
    case yajl_t_false: return T_BOOL;
    case yajl_t_object: return T_OBJECT;
    case yajl_t_array: return T_ARRAY;
    case yajl_t_string: return T_STRING;
    default:
        return v->u.number.d == floor(v->u.number.d) && isfinite(v->u.number.d)
               ? T_INTEGER | T_NUMBER : T_NUMBER;
    }
}


/* vals: the enum's values (or const's one); types: 0 or the allowed types */
static int
sc_litset(sc_ctx *c, yajl_val *vals, size_t n, int types)
{
    llm_grammar  *g = c->g;
    sc_buf        b = { 0 };
    size_t        i;
    int           id, trie = g_trie_new(g, 0), kept = 0;

    for (i = 0; i < n; i++) {
        if (types && !(sc_value_type(vals[i]) & types)) {
            continue;
        }
        b.n = 0;
        sc_put_value(&b, vals[i]);
        g_trie_insert(g, trie, b.s, b.n, (int) i, 0);
        kept++;
    }
    free(b.s);
    id = g_node_new(g, G_LITSET);
    g->nodes[id].trie = trie;
    return id;
}


/* ---- schemas ------------------------------------------------------------------ */


static int
sc_ref(sc_ctx *c, const char *ref)
{
    llm_grammar  *g = c->g;
    yajl_val      v = c->doc;
    char          seg[256];
    const char   *p = ref + 1, *q;
    size_t        n, i, k;
    int           alias, t;
    char         *end;
    long          idx;

    if (ref[0] != '#' || (ref[1] != '\0' && ref[1] != '/')) {
        return sc_fail(c, "$ref '%s': only references into the same schema "
                       "(\"#/...\") are supported", ref);
    }
    while (*p == '/' && v) {
        p++;
        q = strchr(p, '/');
        n = q ? (size_t) (q - p) : strlen(p);
        for (i = 0, k = 0; i < n && k < sizeof(seg) - 1; i++) {
            if (p[i] == '~' && i + 1 < n && (p[i + 1] == '0' || p[i + 1] == '1')) {
                seg[k++] = p[i + 1] == '0' ? '~' : '/';
                i++;
            } else {
                seg[k++] = p[i];
            }
        }
        seg[k] = '\0';
        if (YAJL_IS_OBJECT(v)) {
            v = llm_json_get(v, seg);
        } else if (YAJL_IS_ARRAY(v)) {
            idx = strtol(seg, &end, 10);
            v = (*end == '\0' && idx >= 0 && (size_t) idx < v->u.array.len)
                ? v->u.array.values[idx] : NULL;
        } else {
            v = NULL;
        }
        p += n;
    }
    if (v == NULL) {
        return sc_fail(c, "$ref '%s' does not resolve", ref);
    }
    for (i = 0; i < (size_t) c->n_refs; i++) {
        if (c->refs[i].target == v) {
            return c->refs[i].node;
        }
    }
    alias = g_node_new(g, G_ALIAS);
    SC_GROW(c->refs, c->n_refs, c->cap_refs, 8);
    c->refs[c->n_refs].target = v;
    c->refs[c->n_refs].node = alias;
    c->n_refs++;
    t = sc_schema(c, v);
    if (t < 0) {
        return -1;
    }
    c->g->nodes[alias].item = t;
    return alias;
}


static int
sc_choice(sc_ctx *c, yajl_val list, const char *key)
{
    llm_grammar  *g = c->g;
    int           id, k, *kid;
    size_t        i, old;
    char          seg[64];

    if (!YAJL_IS_ARRAY(list) || list->u.array.len == 0) {
        return sc_fail(c, "'%s' must be a non-empty array of schemas", key);
    }
    kid = llm_xmalloc(sizeof(int) * list->u.array.len);
    for (i = 0; i < list->u.array.len; i++) {
        snprintf(seg, sizeof(seg), "%s/%zu", key, i);
        old = sc_path_push(c, seg);
        kid[i] = sc_schema(c, list->u.array.values[i]);
        sc_path_pop(c, old);
        if (kid[i] < 0) {
            free(kid);
            return -1;
        }
    }
    id = g_node_new(g, G_CHOICE);
    g->nodes[id].a = g->n_kids;
    g->nodes[id].n = (int32_t) list->u.array.len;
    for (k = 0; k < (int) list->u.array.len; k++) {
        g_kids_add(g, kid[k]);
    }
    free(kid);
    return id;
}


static int
sc_types(sc_ctx *c, yajl_val s, int *types)
{
    static const struct { const char *name; int bit; } names[] = {
        { "null", T_NULL }, { "boolean", T_BOOL }, { "object", T_OBJECT },
        { "array", T_ARRAY }, { "number", T_NUMBER }, { "integer", T_INTEGER },
        { "string", T_STRING }
    };
    yajl_val  t = llm_json_get(s, "type"), one;
    size_t    i, k, n;

    *types = 0;
    if (t == NULL) {
        return 0;
    }
    n = YAJL_IS_ARRAY(t) ? t->u.array.len : 1;
    for (i = 0; i < n; i++) {
        one = YAJL_IS_ARRAY(t) ? t->u.array.values[i] : t;
        if (!YAJL_IS_STRING(one)) {
            return sc_fail(c, "'type' must be a type name or a list of them");
        }
        for (k = 0; k < sizeof(names) / sizeof(names[0]); k++) {
            if (strcmp(names[k].name, one->u.string) == 0) {
                *types |= names[k].bit;
                break;
            }
        }
        if (k == sizeof(names) / sizeof(names[0])) {
            return sc_fail(c, "type '%s' is unknown", one->u.string);
        }
    }
    if (*types == 0) {
        return sc_fail(c, "'type' must name at least one type");
    }
    return 1;
}


static int
sc_has_any(yajl_val s, const char *const *keys)
{
    for ( ; *keys; keys++) {
        if (llm_json_get(s, *keys)) {
            return 1;
        }
    }
    return 0;
}


static int
sc_schema_body(sc_ctx *c, yajl_val s)
{
    static const char *const  k_ref[] = { "$ref", NULL };
    static const char *const  k_any[] = { "anyOf", NULL };
    static const char *const  k_one[] = { "oneOf", NULL };
    static const char *const  k_all[] = { "allOf", NULL };
    static const char *const  k_obj[] = { "properties", "required",
                                          "additionalProperties", NULL };
    static const char *const  k_arr[] = { "items", "minItems", "maxItems", NULL };
    static const char *const  k_str[] = { "minLength", "maxLength", "pattern",
                                          "format", NULL };
    static const char *const  k_num[] = { "minimum", "maximum",
                                          "exclusiveMinimum",
                                          "exclusiveMaximum", NULL };
    static const char *const  k_lit[] = { "type", "nullable", "enum", "const",
                                          NULL };
    llm_grammar  *g = c->g;
    yajl_val      v, e, *vals;
    const char   *other;
    size_t        i, n_vals;
    int           types, bit, id, kid[8], n = 0, k, nullable = 0, check;

    if (YAJL_IS_TRUE(s)) {
        return g_node_new(g, G_ANY);
    }
    if (YAJL_IS_FALSE(s)) {
        return sc_fail(c, "the schema false allows no value");
    }
    if (!YAJL_IS_OBJECT(s)) {
        return sc_fail(c, "a schema must be an object or a boolean");
    }
    for (i = 0; i < s->u.object.len; i++) {
        if (!sc_in(sc_annotations, s->u.object.keys[i])
            && !sc_in(sc_constraints, s->u.object.keys[i]))
        {
            return sc_fail(c, "the JSON Schema keyword '%s' is not supported",
                           s->u.object.keys[i]);
        }
    }

    if ((v = llm_json_get(s, "$ref")) != NULL) {
        if ((other = sc_other_constraint(s, k_ref)) != NULL) {
            return sc_fail(c, "'%s' next to '$ref' is not supported", other);
        }
        if (!YAJL_IS_STRING(v)) {
            return sc_fail(c, "'$ref' must be a string");
        }
        return sc_ref(c, v->u.string);
    }
    if ((v = llm_json_get(s, "allOf")) != NULL) {
        if ((other = sc_other_constraint(s, k_all)) != NULL) {
            return sc_fail(c, "'%s' next to 'allOf' is not supported", other);
        }
        if (!YAJL_IS_ARRAY(v) || v->u.array.len != 1) {
            return sc_fail(c, "'allOf' is supported with one schema only");
        }
        return sc_sub(c, v->u.array.values[0], "allOf/0");
    }
    if ((v = llm_json_get(s, "anyOf")) != NULL
        || (v = llm_json_get(s, "oneOf")) != NULL)
    {
        int  any = llm_json_get(s, "anyOf") != NULL;

        if ((other = sc_other_constraint(s, any ? k_any : k_one)) != NULL) {
            return sc_fail(c, "'%s' next to '%s' is not supported", other,
                           any ? "anyOf" : "oneOf");
        }
        return sc_choice(c, v, any ? "anyOf" : "oneOf");
    }

    if (sc_types(c, s, &types) < 0) {
        return -1;
    }
    v = llm_json_get(s, "nullable");
    if (v && !YAJL_IS_TRUE(v) && !YAJL_IS_FALSE(v)) {
        return sc_fail(c, "'nullable' must be a boolean");
    }
    nullable = v && YAJL_IS_TRUE(v);

    e = llm_json_get(s, "enum");
    v = llm_json_get(s, "const");
    if (e || v) {
        if (e && (!YAJL_IS_ARRAY(e) || e->u.array.len == 0)) {
            return sc_fail(c, "'enum' must be a non-empty array");
        }
        if (e && v) {
            return sc_fail(c, "'enum' and 'const' together are not supported");
        }
        vals = e ? e->u.array.values : &v;
        n_vals = e ? e->u.array.len : 1;
        if (types && nullable) {
            types |= T_NULL;
        }
        id = sc_litset(c, vals, n_vals, types);
        if (sc_other_constraint(s, k_lit) != NULL) {
            /* the other keywords: each value is checked against them once
             * the grammar is analysed */
            yajl_val  rest = llm_xcalloc(1, sizeof(*rest));
            size_t    m = 0;

            rest->type = yajl_t_object;
            rest->u.object.keys = llm_xmalloc(sizeof(char *) * s->u.object.len);
            rest->u.object.values = llm_xmalloc(sizeof(yajl_val)
                                                * s->u.object.len);
            for (i = 0; i < s->u.object.len; i++) {
                if (strcmp(s->u.object.keys[i], "enum") != 0
                    && strcmp(s->u.object.keys[i], "const") != 0)
                {
                    rest->u.object.keys[m] = s->u.object.keys[i];
                    rest->u.object.values[m++] = s->u.object.values[i];
                }
            }
            rest->u.object.len = m;
            check = sc_schema(c, rest);
            free(rest->u.object.keys);
            free(rest->u.object.values);
            free(rest);
            if (check < 0) {
                return -1;
            }
            SC_GROW(c->checks, c->n_checks, c->cap_checks, 4);
            c->checks[c->n_checks].litset = id;
            c->checks[c->n_checks].check = check;
            c->n_checks++;
        }
        return id;
    }

    if (types == 0) {
        types |= sc_has_any(s, k_obj) ? T_OBJECT : 0;
        types |= sc_has_any(s, k_arr) ? T_ARRAY : 0;
        types |= sc_has_any(s, k_str) ? T_STRING : 0;
        types |= sc_has_any(s, k_num) ? T_NUMBER : 0;
        if (types == 0) {
            return g_node_new(g, G_ANY);
        }
    }
    if (nullable) {
        types |= T_NULL;
    }
    if (types & T_NUMBER) {
        types &= ~T_INTEGER;
    }
    for (bit = 1; bit <= T_STRING; bit <<= 1) {
        if (!(types & bit)) {
            continue;
        }
        switch (bit) {
        case T_NULL:
            id = g_node_new(g, G_LIT);
            g->nodes[id].a = g_lit_add(g, "null", 4);
            g->nodes[id].n = 4;
            break;
        case T_BOOL:
            id = g_node_new(g, G_LITSET);
            g->nodes[id].trie = g_trie_new(g, 0);
            g_trie_insert(g, g->nodes[id].trie, "true", 4, 0, 0);
            g_trie_insert(g, g->nodes[id].trie, "false", 5, 1, 0);
            break;
        case T_OBJECT:
            id = sc_object(c, s);
            break;
        case T_ARRAY:
            id = sc_array(c, s);
            break;
        case T_NUMBER:
        case T_INTEGER:
            id = sc_number(c, s, bit == T_INTEGER);
            break;
        default:
            id = sc_string(c, s);
            break;
        }
        if (id < 0) {
            return -1;
        }
        kid[n++] = id;
    }
    if (n == 1) {
        return kid[0];
    }
    id = g_node_new(g, G_CHOICE);
    g->nodes[id].a = g->n_kids;
    g->nodes[id].n = n;
    for (k = 0; k < n; k++) {
        g_kids_add(g, kid[k]);
    }
    return id;
}


static int
sc_schema(sc_ctx *c, yajl_val s)
{
    int  id;

    if (++c->depth > SC_MAX_DEPTH) {
        return sc_fail(c, "the schema nests deeper than %d levels",
                       SC_MAX_DEPTH);
    }
    id = sc_schema_body(c, s);
    c->depth--;
    if (id >= LLM_G_MAX_NODES) {
        return sc_fail(c, "the schema is too large (more than %d nodes)",
                       LLM_G_MAX_NODES);
    }
    return id;
}


/* ---- specs -------------------------------------------------------------------- */


static int
sc_spec(sc_ctx *c, yajl_val v)
{
    llm_grammar  *g = c->g;
    yajl_val      x;
    const char   *key;
    llm_dfa       d;
    size_t        i;
    int           id, type, *kid;

    if (!YAJL_IS_OBJECT(v) || v->u.object.len != 1) {
        return sc_fail(c, "a grammar spec is an object with one key");
    }
    key = v->u.object.keys[0];
    x = v->u.object.values[0];
    if (strcmp(key, "schema") == 0) {
        c->doc = x;
        return sc_schema(c, x);
    }
    if (strcmp(key, "object") == 0) {
        id = g_node_new(g, G_ANY);
        g->nodes[id].object_only = 1;
        return id;
    }
    if (strcmp(key, "literal") == 0) {
        if (!YAJL_IS_STRING(x) || x->u.string[0] == '\0') {
            return sc_fail(c, "'literal' must be a non-empty string");
        }
        id = g_node_new(g, G_LIT);
        g->nodes[id].n = (int32_t) strlen(x->u.string);
        g->nodes[id].a = g_lit_add(g, x->u.string, strlen(x->u.string));
        return id;
    }
    if (strcmp(key, "choice") == 0) {
        if (!YAJL_IS_ARRAY(x) || x->u.array.len == 0) {
            return sc_fail(c, "'choice' must be a non-empty array of strings");
        }
        id = g_node_new(g, G_LITSET);
        g->nodes[id].trie = g_trie_new(g, 0);
        for (i = 0; i < x->u.array.len; i++) {
            yajl_val  s = x->u.array.values[i];

            if (!YAJL_IS_STRING(s) || s->u.string[0] == '\0') {
                return sc_fail(c, "'choice' must be a non-empty array of "
                               "non-empty strings");
            }
            g_trie_insert(g, g->nodes[id].trie, s->u.string,
                          strlen(s->u.string), (int) i, 0);
        }
        return id;
    }
    if (strcmp(key, "regex") == 0) {
        if (!YAJL_IS_STRING(x)) {
            return sc_fail(c, "'regex' must be a string");
        }
        if (llm_regex_compile(x->u.string, strlen(x->u.string), 1, &d,
                              c->err) != 0)
        {
            return -1;
        }
        id = g_node_new(g, G_REGEX);
        g->nodes[id].dfa = g_dfa_add(g, &d);
        return id;
    }
    if (strcmp(key, "sequence") == 0 || strcmp(key, "any_of") == 0) {
        type = key[0] == 's' ? G_SEQ : G_CHOICE;
        if (!YAJL_IS_ARRAY(x) || x->u.array.len == 0) {
            return sc_fail(c, "'%s' must be a non-empty array of specs", key);
        }
        kid = llm_xmalloc(sizeof(int) * x->u.array.len);
        for (i = 0; i < x->u.array.len; i++) {
            kid[i] = sc_spec(c, x->u.array.values[i]);
            if (kid[i] < 0) {
                free(kid);
                return -1;
            }
        }
        id = g_node_new(g, type);
        g->nodes[id].a = g->n_kids;
        g->nodes[id].n = (int32_t) x->u.array.len;
        for (i = 0; i < x->u.array.len; i++) {
            g_kids_add(g, kid[i]);
        }
        free(kid);
        return id;
    }
    return sc_fail(c, "unknown grammar spec '%s'", key);
}


/* ---- analyses ----------------------------------------------------------------- */


/* The leaves a choice or alias may be; a cycle of them is an error. */
static int
an_flatten(sc_ctx *c, int id, uint8_t *state, int depth, int *out, int *n,
    int cap)
{
    llm_grammar  *g = c->g;
    g_node       *nd = &g->nodes[id];
    int           k, i;

    if (nd->type != G_CHOICE && nd->type != G_ALIAS) {
        for (i = 0; i < *n; i++) {
            if (out[i] == id) {
                return 0;
            }
        }
        if (*n == cap) {
            return sc_fail(c, "anyOf/oneOf: more than %d alternatives", cap);
        }
        out[(*n)++] = id;
        return 0;
    }
    if (state[id] == 1 || depth > 64) {
        return sc_fail(c, "a $ref or anyOf cycle that nests no value");
    }
    state[id] = 1;
    if (nd->type == G_ALIAS) {
        if (an_flatten(c, nd->item, state, depth + 1, out, n, cap) != 0) {
            return -1;
        }
    } else {
        for (k = 0; k < nd->n; k++) {
            if (an_flatten(c, g->kids[nd->a + k], state, depth + 1, out, n,
                           cap) != 0)
            {
                return -1;
            }
        }
    }
    state[id] = 0;
    return 0;
}


static void
an_mindepth(llm_grammar *g)
{
    int      i, k, changed = 1, rounds = 0, m, v;
    g_node  *nd;

    for (i = 0; i < g->n_nodes; i++) {
        g->nodes[i].mindepth = G_INF_DEPTH;
    }
    while (changed && rounds++ <= g->n_nodes + 1) {
        changed = 0;
        for (i = 0; i < g->n_nodes; i++) {
            nd = &g->nodes[i];
            switch (nd->type) {
            case G_OBJECT:
                m = 0;
                for (k = 0; k < nd->n; k++) {
                    if ((nd->required >> k) & 1) {
                        v = g->nodes[g->props[nd->a + k].node].mindepth;
                        m = v > m ? v : m;
                    }
                }
                v = m >= G_INF_DEPTH ? G_INF_DEPTH : 1 + m;
                break;
            case G_ARRAY:
                m = nd->min > 0 ? g->nodes[nd->item].mindepth : 0;
                v = m >= G_INF_DEPTH ? G_INF_DEPTH : 1 + m;
                break;
            case G_SEQ:
                m = 0;
                for (k = 0; k < nd->n; k++) {
                    v = g->nodes[g->kids[nd->a + k]].mindepth;
                    m = v > m ? v : m;
                }
                v = m >= G_INF_DEPTH ? G_INF_DEPTH : 1 + m;
                break;
            case G_CHOICE:
            case G_ALIAS:
                v = G_INF_DEPTH;
                for (k = 0; k < nd->n_alts; k++) {
                    m = g->nodes[g->alt_list[nd->alts + k]].mindepth;
                    v = m < v ? m : v;
                }
                break;
            default:
                v = 1;
            }
            if (v != nd->mindepth) {
                nd->mindepth = v;
                changed = 1;
            }
        }
    }
}


/* Unlinks the branches of the tries from `root` on where no text ends
 * any more: a child is always made after its parent, so one pass from the
 * last node back finds what is live. */
static void
an_trie_prune(llm_grammar *g, int root)
{
    uint8_t  *live = llm_xcalloc((size_t) g->n_trie, 1);
    int       t, k, *link;

    for (t = g->n_trie - 1; t >= root; t--) {
        live[t] = g->trie[t].term >= 0;
        for (k = g->trie[t].child; k >= 0 && !live[t]; k = g->trie[k].sibling) {
            live[t] = live[k];
        }
    }
    for (t = root; t < g->n_trie; t++) {
        link = &g->trie[t].child;
        while ((k = *link) >= 0) {
            if (live[k]) {
                link = &g->trie[k].sibling;
            } else {
                *link = g->trie[k].sibling;
            }
        }
    }
    free(live);
}


/* enum values checked against the rest of their schema */
static void
an_checks(sc_ctx *c)
{
    llm_grammar        *g = c->g;
    llm_grammar_state  *st = llm_xmalloc(sizeof(*st));
    int                 i, root = g->root, *stack, sp, t, d;
    char               *text;
    int                 cap = 256;

    stack = llm_xmalloc(sizeof(int) * (size_t) g->n_trie);
    text = llm_xmalloc((size_t) cap);
    for (i = 0; i < c->n_checks; i++) {
        /* depth-first over the trie, the text of each terminal node */
        int   *len = llm_xcalloc((size_t) g->n_trie, sizeof(int));

        sp = 0;
        stack[sp++] = g->nodes[c->checks[i].litset].trie;
        while (sp > 0) {
            t = stack[--sp];
            d = len[t];
            if (t != g->nodes[c->checks[i].litset].trie) {
                if (d > cap) {
                    cap = 2 * d;
                    text = llm_xrealloc(text, (size_t) cap);
                }
                text[d - 1] = (char) g->trie[t].byte;
            }
            if (g->trie[t].term >= 0) {
                g->root = c->checks[i].check;
                llm_grammar_init(g, st);
                if (st->n == 0 || llm_grammar_feed(g, st, text, (size_t) d) != 0
                    || !llm_grammar_complete(g, st))
                {
                    g->trie[t].term = -1;
                }
            }
            for (int k = g->trie[t].child; k >= 0; k = g->trie[k].sibling) {
                len[k] = d + 1;
                stack[sp++] = k;
            }
        }
        free(len);
        an_trie_prune(g, g->nodes[c->checks[i].litset].trie);
    }
    g->root = root;
    free(stack);
    free(text);
    free(st);
}


static void
an_sat(llm_grammar *g)
{
    int      i, k, changed = 1, v;
    g_node  *nd;
    llm_dfa *d;

    for (i = 0; i < g->n_nodes; i++) {
        g->nodes[i].sat = 0;
        g->nodes[i].nullable = 0;
    }
    while (changed) {
        changed = 0;
        for (i = 0; i < g->n_nodes; i++) {
            nd = &g->nodes[i];
            switch (nd->type) {
            case G_ANY:
            case G_LIT:
                v = 1;
                break;
            case G_LITSET:
                v = g->trie[nd->trie].child >= 0;
                break;
            case G_STRING:
                v = nd->max < 0 || nd->min <= nd->max;
                if (v && nd->dfa >= 0) {
                    d = &g->dfas[nd->dfa];
                    v = d->start >= 0
                        && (!d->lens || llm_dfa_len_ok(d, d->start, nd->min,
                                                       nd->max));
                }
                break;
            case G_NUMBER:
                v = !nd->bounded || nd->L <= nd->H;
                break;
            case G_REGEX:
                v = g->dfas[nd->dfa].start >= 0;
                if (v && g->dfas[nd->dfa].accept[g->dfas[nd->dfa].start]
                    && !nd->nullable)
                {
                    nd->nullable = 1;
                    changed = 1;
                }
                break;
            case G_OBJECT:
                v = 1;
                for (k = 0; k < nd->n; k++) {
                    if (((nd->required >> k) & 1)
                        && !g->nodes[g->props[nd->a + k].node].sat)
                    {
                        v = 0;
                    }
                }
                break;
            case G_ARRAY:
                v = (nd->max < 0 || nd->min <= nd->max)
                    && (nd->min == 0 || g->nodes[nd->item].sat);
                break;
            case G_SEQ:
                v = 1;
                k = 1;
                for (int j = 0; j < nd->n; j++) {
                    v &= g->nodes[g->kids[nd->a + j]].sat;
                    k &= g->nodes[g->kids[nd->a + j]].nullable;
                }
                if (k && !nd->nullable) {
                    nd->nullable = 1;
                    changed = 1;
                }
                break;
            default:                    /* G_CHOICE, G_ALIAS */
                v = 0;
                for (k = 0; k < nd->n_alts; k++) {
                    const g_node  *a = &g->nodes[g->alt_list[nd->alts + k]];

                    v |= a->sat;
                    if (a->nullable && !nd->nullable) {
                        nd->nullable = 1;
                        changed = 1;
                    }
                }
                break;
            }
            if (v != nd->sat) {
                nd->sat = (uint8_t) v;
                changed = 1;
            }
        }
    }
}


/* unsatisfiable alternatives, properties and items are never offered */
static void
an_prune(llm_grammar *g)
{
    int      i, k, m;
    g_node  *nd;

    for (i = 0; i < g->n_nodes; i++) {
        nd = &g->nodes[i];
        for (k = 0, m = 0; k < nd->n_alts; k++) {
            if (g->nodes[g->alt_list[nd->alts + k]].sat) {
                g->alt_list[nd->alts + m++] = g->alt_list[nd->alts + k];
            }
        }
        nd->n_alts = m;
        if (nd->type == G_OBJECT) {
            nd->usable = 0;
            for (k = 0; k < nd->n; k++) {
                if (g->nodes[g->props[nd->a + k].node].sat) {
                    nd->usable |= (uint64_t) 1 << k;
                }
            }
            if (nd->item >= 0 && !g->nodes[nd->item].sat) {
                nd->item = -1;
            }
        }
        if (nd->type == G_ARRAY && !g->nodes[nd->item].sat) {
            nd->max = 0;
        }
    }
}


static void
an_bound(llm_grammar *g)
{
    int      i, k, changed = 1, v, cap = LLM_G_MAX_CFGS + 1;
    g_node  *nd;

    for (i = 0; i < g->n_nodes; i++) {
        g->nodes[i].bound = 1;
    }
    while (changed) {
        changed = 0;
        for (i = 0; i < g->n_nodes; i++) {
            nd = &g->nodes[i];
            v = 1;
            switch (nd->type) {
            case G_OBJECT:
                for (k = 0; k < nd->n; k++) {
                    if ((nd->usable >> k) & 1) {
                        int  b = g->nodes[g->props[nd->a + k].node].bound;

                        v = b > v ? b : v;
                    }
                }
                if (nd->item >= 0 && g->nodes[nd->item].bound > v) {
                    v = g->nodes[nd->item].bound;
                }
                break;
            case G_ARRAY:
                v = g->nodes[nd->item].bound;
                break;
            case G_SEQ:
                for (k = 0; k < nd->n; k++) {
                    int  b = g->nodes[g->kids[nd->a + k]].bound;

                    v = b > v ? b : v;
                }
                break;
            case G_CHOICE:
            case G_ALIAS:
                v = 0;
                for (k = 0; k < nd->n_alts; k++) {
                    v += g->nodes[g->alt_list[nd->alts + k]].bound;
                }
                break;
            }
            v = v > cap ? cap : v;
            if (v > nd->bound) {
                nd->bound = v;
                changed = 1;
            }
        }
    }
}


static int
an_all(sc_ctx *c)
{
    llm_grammar  *g = c->g;
    uint8_t      *state = llm_xcalloc((size_t) g->n_nodes, 1);
    int          *leaves = llm_xmalloc(sizeof(int) * 4096);
    int           i, n, k;

    for (i = 0; i < g->n_nodes; i++) {
        n = 0;
        if (an_flatten(c, i, state, 0, leaves, &n, 4096) != 0) {
            free(state);
            free(leaves);
            return -1;
        }
        g->nodes[i].alts = g->n_alt_list;
        g->nodes[i].n_alts = n;
        for (k = 0; k < n; k++) {
            SC_GROW(g->alt_list, g->n_alt_list, g->cap_alt_list, 64);
            g->alt_list[g->n_alt_list++] = leaves[k];
        }
    }
    free(state);
    free(leaves);
    an_mindepth(g);
    if (c->n_checks) {
        an_checks(c);
    }
    an_sat(g);
    if (!g->nodes[g->root].sat) {
        c->path_len = 0;
        return sc_fail(c, "the schema can never be satisfied (an empty "
                       "range, length or enum, or a required property that "
                       "cannot be)");
    }
    an_prune(g);
    an_mindepth(g);
    if (g->nodes[g->root].mindepth > LLM_G_MAX_FRAMES) {
        c->path_len = 0;
        return sc_fail(c, "the schema requires values nested deeper than "
                       "%d levels", LLM_G_MAX_FRAMES);
    }
    an_bound(g);
    if (g->nodes[g->root].bound > LLM_G_MAX_CFGS) {
        c->path_len = 0;
        return sc_fail(c, "anyOf/oneOf: more than %d alternatives could be "
                       "open at once", LLM_G_MAX_CFGS);
    }
    return 0;
}


llm_grammar *
llm_grammar_compile(const char *spec, size_t len, char *err)
{
    sc_ctx        c;
    yajl_val      v;
    llm_grammar  *g;

    err[0] = '\0';
    v = llm_json_parse(spec, len, LLM_JSON_MAX_DEPTH, err);
    if (v == NULL) {
        return NULL;
    }
    memset(&c, 0, sizeof(c));
    c.g = g = llm_xcalloc(1, sizeof(*g));
    g->id = __atomic_add_fetch(&sc_next_id, 1, __ATOMIC_RELAXED);
    g->refs = 1;                        /* llm_grammar_release() frees it */
    c.err = err;
    g->root = sc_spec(&c, v);
    if (g->root >= 0 && g->n_nodes > LLM_G_MAX_NODES) {
        g->root = sc_fail(&c, "the schema is too large (more than %d nodes)",
                          LLM_G_MAX_NODES);
    }
    /* whitespace after the text: a JSON value's, not fixed text's */
    g->trail_ws = YAJL_IS_OBJECT(v) && v->u.object.len == 1
                  && (strcmp(v->u.object.keys[0], "schema") == 0
                      || strcmp(v->u.object.keys[0], "object") == 0);
    if (g->root >= 0 && an_all(&c) != 0) {
        g->root = -1;
    }
    llm_json_free(v);
    free(c.refs);
    free(c.checks);
    if (g->root < 0) {
        llm_grammar_free(g);
        return NULL;
    }
    return g;
}
