/*
 * tool_scan.h -- a byte-at-a-time scanner of one JSON object in generated
 * text, for the tool-call parsers: where the object ends, and in a call
 * object ({"name": ..., "arguments": ...}) where the name's string and the
 * arguments' value lie, while they are still being generated.
 *
 * The scanner knows JSON's structure (strings, escapes, nesting, members
 * at the top level), not its grammar: a finished object is checked by
 * llm_json_parse() before it counts.  Positions are offsets into the
 * caller's buffer, which holds the whole text.
 */
#ifndef LLM_TOOL_SCAN_H
#define LLM_TOOL_SCAN_H

#include <stddef.h>

/* what the object is */
#define LLM_SCAN_CALL   0       /* a call: "name" and "arguments" members */
#define LLM_SCAN_VALUE  1       /* the arguments themselves */

/* which member of a call is being read */
#define LLM_SCAN_KEY_OTHER  0
#define LLM_SCAN_KEY_NAME   1
#define LLM_SCAN_KEY_ARGS   2   /* "arguments" or "parameters" */

typedef struct {
    int       mode;             /* LLM_SCAN_CALL or LLM_SCAN_VALUE */
    int       depth;            /* open containers */
    int       state;            /* where in a top-level member (tool_scan.c) */
    int       key;              /* LLM_SCAN_KEY_* of the member being read */
    int       in_str, esc;
    size_t    key_start;        /* the key's opening quote */
    size_t    value_start;      /* the member's value */

    /* what the caller reads; an end of 0 means "not yet" */
    int       has_name, has_args;
    size_t    name_start, name_end;   /* the name's string token, quotes
                                         included */
    size_t    args_start;       /* the arguments' first byte */
    size_t    args_avail;       /* their bytes known so far end here */
    int       args_done;        /* ... and they are complete */
} llm_tool_scan;

/* start: the offset of the object's '{', whose byte the scanner takes. */
void llm_tool_scan_init(llm_tool_scan *s, int mode, size_t start);

/* Feeds the byte at buf[off] (the bytes after the '{', in order): 0 more
 * is needed, 1 the object is complete, -1 the text is not a call object
 * (a key that is not a string, a name that is not one, a '}' too many). */
int llm_tool_scan_byte(llm_tool_scan *s, const char *buf, size_t off);

#endif /* LLM_TOOL_SCAN_H */
