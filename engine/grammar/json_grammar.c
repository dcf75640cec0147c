/*
 * json_grammar.c -- the JSON recognizer of json_grammar.h: a pushdown
 * automaton over bytes, the stack one bit per open container.
 */
#include "json_grammar.h"

enum {
    J_START,                /* before the top-level object */
    J_VALUE,                /* a value must come (after ':' or ',' in []) */
    J_ARR_FIRST,            /* after '[': a value or ']' */
    J_OBJ_FIRST,            /* after '{': a key or '}' */
    J_OBJ_KEY,              /* after ',' in {}: a key */
    J_COLON,                /* after a key */
    J_AFTER,                /* after a value in a container: ',' or the close */
    J_DONE,                 /* the top-level object is complete */
    J_STR,                  /* in a string */
    J_ESC,                  /* after '\' */
    J_HEX,                  /* in \uXXXX: aux digits left */
    J_UTF8,                 /* in a multi-byte character: aux bytes left */
    J_LIT,                  /* in true/false/null: aux bytes matched */
    J_NUM_MINUS,            /* '-' */
    J_NUM_ZERO,             /* a leading 0 */
    J_NUM_INT,              /* integer digits */
    J_NUM_DOT,              /* '.' */
    J_NUM_FRAC,             /* fraction digits */
    J_NUM_E,                /* 'e' or 'E' */
    J_NUM_ESIGN,            /* the exponent's sign */
    J_NUM_EXP               /* exponent digits */
};

static const char *const llm_json_lits[] = { "true", "false", "null" };


void
llm_json_init(llm_json_state *s)
{
    *s = (llm_json_state) { 0 };
    s->state = J_START;
}


void
llm_json_init_value(llm_json_state *s)
{
    *s = (llm_json_state) { 0 };
    s->state = J_VALUE;
}


int
llm_json_value_may_end(const llm_json_state *s)
{
    return s->state == J_DONE
           || (s->depth == 0
               && (s->state == J_NUM_ZERO || s->state == J_NUM_INT
                   || s->state == J_NUM_FRAC || s->state == J_NUM_EXP));
}


int
llm_json_complete(const llm_json_state *s)
{
    return s->state == J_DONE;
}


int
llm_json_in_string(const llm_json_state *s)
{
    return s->state == J_STR;
}


int
llm_json_plain(const char *bytes, size_t n)
{
    llm_json_state  s;

    llm_json_init(&s);
    s.state = J_STR;
    s.depth = 1;
    return llm_json_feed(&s, bytes, n) == 0 && s.state == J_STR;
}


static int
llm_json_push(llm_json_state *s, int object)
{
    if (s->depth == LLM_JSON_MAX_DEPTH) {
        return -1;
    }
    if (object) {
        s->objects |= (uint64_t) 1 << s->depth;
    } else {
        s->objects &= ~((uint64_t) 1 << s->depth);
    }
    s->depth++;
    s->state = object ? J_OBJ_FIRST : J_ARR_FIRST;
    return 0;
}


static int
llm_json_top_is_object(const llm_json_state *s)
{
    return (int) ((s->objects >> (s->depth - 1)) & 1);
}


static void
llm_json_value_done(llm_json_state *s)
{
    s->state = s->depth ? J_AFTER : J_DONE;
}


static int
llm_json_value_start(llm_json_state *s, unsigned char c)
{
    switch (c) {
    case '{':
        return llm_json_push(s, 1);
    case '[':
        return llm_json_push(s, 0);
    case '"':
        s->key = 0;
        s->state = J_STR;
        return 0;
    case '-':
        s->state = J_NUM_MINUS;
        return 0;
    case '0':
        s->state = J_NUM_ZERO;
        return 0;
    case 't':
    case 'f':
    case 'n':
        s->lit = c == 't' ? 0 : c == 'f' ? 1 : 2;
        s->aux = 1;
        s->state = J_LIT;
        return 0;
    default:
        if (c >= '1' && c <= '9') {
            s->state = J_NUM_INT;
            return 0;
        }
        return -1;
    }
}


/* The first byte of a multi-byte UTF-8 character: how many follow and the
 * range of the next one (RFC 3629's table: no overlong forms, surrogates
 * or code points above U+10FFFF). */
static int
llm_json_utf8_lead(llm_json_state *s, unsigned char c)
{
    s->lo = 0x80;
    s->hi = 0xBF;
    if (c >= 0xC2 && c <= 0xDF) {
        s->aux = 1;
    } else if (c >= 0xE0 && c <= 0xEF) {
        s->aux = 2;
        s->lo = c == 0xE0 ? 0xA0 : 0x80;
        s->hi = c == 0xED ? 0x9F : 0xBF;
    } else if (c >= 0xF0 && c <= 0xF4) {
        s->aux = 3;
        s->lo = c == 0xF0 ? 0x90 : 0x80;
        s->hi = c == 0xF4 ? 0x8F : 0xBF;
    } else {
        return -1;
    }
    s->state = J_UTF8;
    return 0;
}


static int
llm_json_is_hex(unsigned char c)
{
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f')
           || (c >= 'A' && c <= 'F');
}


static int
llm_json_byte(llm_json_state *s, unsigned char c)
{
    int  digit = c >= '0' && c <= '9';

again:
    if (s->state <= J_DONE && s->state != J_START) {
        /* between tokens of the grammar: one space, or a newline and up
         * to LLM_JSON_MAX_INDENT spaces or tabs (llama.cpp's JSON grammar
         * allows the same) */
        if (c == ' ' || c == '\t') {
            if (s->ws == 0 && c == ' ') {
                s->ws = 255;
                return 0;
            }
            if (s->ws == 0 || s->ws > LLM_JSON_MAX_INDENT) {
                return -1;
            }
            s->ws++;
            return 0;
        }
        if (c == '\n') {
            if (s->ws != 0) {
                return -1;
            }
            s->ws = 1;
            return 0;
        }
        s->ws = 0;
    }
    switch (s->state) {
    case J_START:
        return c == '{' ? llm_json_push(s, 1) : -1;
    case J_VALUE:
        return llm_json_value_start(s, c);
    case J_ARR_FIRST:
        if (c == ']') {
            s->depth--;
            llm_json_value_done(s);
            return 0;
        }
        return llm_json_value_start(s, c);
    case J_OBJ_FIRST:
        if (c == '}') {
            s->depth--;
            llm_json_value_done(s);
            return 0;
        }
        /* fall through */
    case J_OBJ_KEY:
        if (c != '"') {
            return -1;
        }
        s->key = 1;
        s->state = J_STR;
        return 0;
    case J_COLON:
        if (c != ':') {
            return -1;
        }
        s->state = J_VALUE;
        return 0;
    case J_AFTER:
        if (c == ',') {
            s->state = llm_json_top_is_object(s) ? J_OBJ_KEY : J_VALUE;
            return 0;
        }
        if (c != (llm_json_top_is_object(s) ? '}' : ']')) {
            return -1;
        }
        s->depth--;
        llm_json_value_done(s);
        return 0;
    case J_DONE:
        return -1;
    case J_STR:
        if (c == '"') {
            if (s->key) {
                s->state = J_COLON;
            } else {
                llm_json_value_done(s);
            }
            return 0;
        }
        if (c == '\\') {
            s->state = J_ESC;
            return 0;
        }
        if (c < 0x20) {
            return -1;
        }
        return c < 0x80 ? 0 : llm_json_utf8_lead(s, c);
    case J_ESC:
        if (c == 'u') {
            s->aux = 4;
            s->state = J_HEX;
            return 0;
        }
        if (c == '"' || c == '\\' || c == '/' || c == 'b' || c == 'f'
            || c == 'n' || c == 'r' || c == 't')
        {
            s->state = J_STR;
            return 0;
        }
        return -1;
    case J_HEX:
        if (!llm_json_is_hex(c)) {
            return -1;
        }
        if (--s->aux == 0) {
            s->state = J_STR;
        }
        return 0;
    case J_UTF8:
        if (c < s->lo || c > s->hi) {
            return -1;
        }
        s->lo = 0x80;
        s->hi = 0xBF;
        if (--s->aux == 0) {
            s->state = J_STR;
        }
        return 0;
    case J_LIT:
        if (c != (unsigned char) llm_json_lits[s->lit][s->aux]) {
            return -1;
        }
        if (llm_json_lits[s->lit][++s->aux] == '\0') {
            llm_json_value_done(s);
        }
        return 0;
    case J_NUM_MINUS:
        if (!digit) {
            return -1;
        }
        s->state = c == '0' ? J_NUM_ZERO : J_NUM_INT;
        return 0;
    case J_NUM_DOT:
        if (!digit) {
            return -1;
        }
        s->state = J_NUM_FRAC;
        return 0;
    case J_NUM_E:
        if (c == '+' || c == '-') {
            s->state = J_NUM_ESIGN;
            return 0;
        }
        /* fall through */
    case J_NUM_ESIGN:
        if (!digit) {
            return -1;
        }
        s->state = J_NUM_EXP;
        return 0;
    case J_NUM_INT:
    case J_NUM_FRAC:
    case J_NUM_EXP:
        if (digit) {
            return 0;
        }
        /* fall through */
    case J_NUM_ZERO:
        if (c == '.' && (s->state == J_NUM_ZERO || s->state == J_NUM_INT)) {
            s->state = J_NUM_DOT;
            return 0;
        }
        if ((c == 'e' || c == 'E') && s->state != J_NUM_EXP) {
            s->state = J_NUM_E;
            return 0;
        }
        /* the number ended before this byte */
        llm_json_value_done(s);
        goto again;
    }
    return -1;
}


int
llm_json_feed(llm_json_state *s, const char *bytes, size_t n)
{
    size_t  i;

    for (i = 0; i < n; i++) {
        if (llm_json_byte(s, (unsigned char) bytes[i]) != 0) {
            return -1;
        }
    }
    return 0;
}
