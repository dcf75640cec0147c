/*
 * jinja_lexer.h -- tokens of a Jinja template, shared by jinja_lexer.c and
 * jinja_parser.c.
 */
#ifndef LLM_JINJA_LEXER_H
#define LLM_JINJA_LEXER_H

#include "jinja.h"

typedef enum {
    T_EOF = 0,
    T_DATA,             /* template text between tags */
    T_VAR_BEGIN,        /* {{ */
    T_VAR_END,          /* }} */
    T_BLOCK_BEGIN,      /* {% */
    T_BLOCK_END,        /* %} */
    T_NAME,
    T_STRING,           /* s/len: the decoded literal */
    T_INT,              /* i */
    T_FLOAT,            /* f */
    /* operators */
    T_ADD, T_SUB, T_DIV, T_FLOORDIV, T_MUL, T_MOD, T_POW, T_TILDE,
    T_LBRACKET, T_RBRACKET, T_LPAREN, T_RPAREN, T_LBRACE, T_RBRACE,
    T_EQ, T_NE, T_GT, T_GTEQ, T_LT, T_LTEQ, T_ASSIGN, T_DOT, T_COLON,
    T_PIPE, T_COMMA, T_SEMICOLON
} jinja_tok_type;

typedef struct {
    uint8_t      type;
    uint32_t     line;
    const char  *s;         /* name, data or decoded string */
    uint32_t     len;
    int64_t      i;
    double       f;
} jinja_token;

typedef struct {
    jinja_token  *v;
    size_t        n, cap;
} jinja_tokens;

/* Tokenizes src (UTF-8) into toks, allocating from vm's arena; fails the
 * vm with a TemplateSyntaxError-like message. */
void jinja_lex(jinja_vm *vm, const char *src, size_t len, jinja_tokens *toks);

const char *jinja_tok_describe(const jinja_token *t, char *buf, size_t size);

#endif /* LLM_JINJA_LEXER_H */
