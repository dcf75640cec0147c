/*
 * tool_scan.c -- the structure of one JSON object, a byte at a time
 * (tool_scan.h).  A call object's members at the top level are followed
 * through these states; inside nested values only strings and brackets
 * matter.
 */
#include <string.h>

#include "toolcall/tool_scan.h"


enum {
    ST_MEMBER = 0,              /* a key or the end of the object */
    ST_KEY,                     /* in the key's string */
    ST_COLON,
    ST_VALUE,                   /* the value's first byte */
    ST_STRING,                  /* in a string value */
    ST_SCALAR,                  /* in a number or a literal */
    ST_NESTED,                  /* in an object or array value */
    ST_AFTER                    /* a ',' or the end */
};


static int
scan_ws(char c)
{
    return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}


void
llm_tool_scan_init(llm_tool_scan *s, int mode, size_t start)
{
    memset(s, 0, sizeof(*s));
    s->mode = mode;
    s->depth = 1;
    s->state = ST_MEMBER;
    if (mode == LLM_SCAN_VALUE) {
        s->has_args = 1;
        s->args_start = start;
        s->args_avail = start + 1;
    }
}


static int
scan_key(const char *k, size_t n)
{
    if (n == 4 && memcmp(k, "name", 4) == 0) {
        return LLM_SCAN_KEY_NAME;
    }
    if ((n == 9 && memcmp(k, "arguments", 9) == 0)
        || (n == 10 && memcmp(k, "parameters", 10) == 0))
    {
        return LLM_SCAN_KEY_ARGS;
    }
    return LLM_SCAN_KEY_OTHER;
}


/* a byte of the current member's value at off */
static void
scan_value_byte(llm_tool_scan *s, size_t off)
{
    if (s->key == LLM_SCAN_KEY_ARGS) {
        s->args_avail = off + 1;
    }
}


/* the current member's value ended before end */
static void
scan_value_end(llm_tool_scan *s, size_t end)
{
    if (s->key == LLM_SCAN_KEY_NAME) {
        s->has_name = 1;
        s->name_start = s->value_start;
        s->name_end = end;
    } else if (s->key == LLM_SCAN_KEY_ARGS) {
        s->args_avail = end;
        s->args_done = 1;
    }
    s->state = ST_AFTER;
}


/* the arguments object itself: its bytes are all arguments */
static int
scan_value_mode(llm_tool_scan *s, char c, size_t off)
{
    s->args_avail = off + 1;
    if (s->in_str) {
        if (s->esc) {
            s->esc = 0;
        } else if (c == '\\') {
            s->esc = 1;
        } else if (c == '"') {
            s->in_str = 0;
        }
        return 0;
    }
    if (c == '"') {
        s->in_str = 1;
    } else if (c == '{' || c == '[') {
        s->depth++;
    } else if (c == '}' || c == ']') {
        if (--s->depth == 0) {
            s->args_done = 1;
            return 1;
        }
    }
    return 0;
}


int
llm_tool_scan_byte(llm_tool_scan *s, const char *buf, size_t off)
{
    char  c = buf[off];

    if (s->mode == LLM_SCAN_VALUE) {
        return scan_value_mode(s, c, off);
    }

    if (s->in_str) {
        if (s->esc) {
            s->esc = 0;
        } else if (c == '\\') {
            s->esc = 1;
        } else if (c == '"') {
            s->in_str = 0;
            if (s->state == ST_KEY) {
                s->key = scan_key(buf + s->key_start + 1,
                                  off - s->key_start - 1);
                /* the first of a repeated key counts */
                if ((s->key == LLM_SCAN_KEY_NAME && s->has_name)
                    || (s->key == LLM_SCAN_KEY_ARGS && s->has_args))
                {
                    s->key = LLM_SCAN_KEY_OTHER;
                }
                s->state = ST_COLON;
                return 0;
            }
            scan_value_byte(s, off);
            if (s->state == ST_STRING) {
                scan_value_end(s, off + 1);
            }
            return 0;
        }
        if (s->state != ST_KEY) {
            scan_value_byte(s, off);
        }
        return 0;
    }

    switch (s->state) {

    case ST_MEMBER:
        if (scan_ws(c)) {
            return 0;
        }
        if (c == '"') {
            s->in_str = 1;
            s->key_start = off;
            s->state = ST_KEY;
            return 0;
        }
        if (c == '}') {
            s->depth = 0;
            return 1;
        }
        return -1;

    case ST_COLON:
        if (scan_ws(c)) {
            return 0;
        }
        if (c == ':') {
            s->state = ST_VALUE;
            return 0;
        }
        return -1;

    case ST_VALUE:
        if (scan_ws(c)) {
            return 0;
        }
        if (c == '}' || c == ']' || c == ',' || c == ':'
            || (s->key == LLM_SCAN_KEY_NAME && c != '"'))
        {
            return -1;
        }
        s->value_start = off;
        if (s->key == LLM_SCAN_KEY_ARGS) {
            s->has_args = 1;
            s->args_start = off;
        }
        scan_value_byte(s, off);
        if (c == '"') {
            s->in_str = 1;
            s->state = ST_STRING;
        } else if (c == '{' || c == '[') {
            s->depth = 2;
            s->state = ST_NESTED;
        } else {
            s->state = ST_SCALAR;
        }
        return 0;

    case ST_SCALAR:
        if (!scan_ws(c) && c != ',' && c != '}') {
            scan_value_byte(s, off);
            return 0;
        }
        /* the byte that ended it comes after the value */
        scan_value_end(s, off);
        /* fall through */

    case ST_AFTER:
        if (scan_ws(c)) {
            return 0;
        }
        if (c == ',') {
            s->state = ST_MEMBER;
            s->key = LLM_SCAN_KEY_OTHER;
            return 0;
        }
        if (c == '}') {
            s->depth = 0;
            return 1;
        }
        return -1;

    case ST_NESTED:
        scan_value_byte(s, off);
        if (c == '"') {
            s->in_str = 1;
        } else if (c == '{' || c == '[') {
            s->depth++;
        } else if (c == '}' || c == ']') {
            if (--s->depth == 1) {
                scan_value_end(s, off + 1);
            }
        }
        return 0;
    }

    return -1;
}
