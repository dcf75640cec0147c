/*
 * tool_parser.c -- tool calls in generated text, as vLLM's parsers find
 * them (llm.h, "Tool calls"), read incrementally: the parser keeps the
 * whole text and a state machine walks it as it grows.
 *
 *   hermes       content<tool_call>\n{"name": "f", "arguments": {...}}\n
 *                </tool_call> ... (Hermes 2 Pro / 3, Qwen2.5, Qwen3); a
 *                last call whose closing tag never came counts when its
 *                JSON is complete
 *   llama3_json  [<|python_tag|>]{"name": "f", "parameters": {...}}; {...}
 *                (Llama 3.1 / 3.2 / 3.3; "arguments" too): the output is
 *                calls only when it starts (after blanks) with one
 *   mistral      content[TOOL_CALLS][{"name": "f", "arguments": {...}},
 *                ...] (tokenizers before v11), or content[TOOL_CALLS]f
 *                [ARGS]{...}[TOOL_CALLS]g{...} (v11 and later; Mistral
 *                Small 3.2: f[CALL_ID]id[ARGS]{...}); the form is told by
 *                what follows [TOOL_CALLS]
 *   named        {...}: the arguments of the function tool_choice names,
 *                the whole output (a grammar forces it, as vLLM's)
 *   json_array   [{"name": "f", "parameters": {...}}, ...]: tool_choice
 *                "required" (a grammar forces it, as vLLM's)
 *
 * As vLLM: content is the text before the first call; text between and
 * after calls is dropped; a call without a "name" (or without arguments,
 * mistral aside, where they default to {}), JSON that does not parse, or
 * markup the sequence ended inside, make the whole text the content and
 * the calls none.  Unlike vLLM the arguments are the bytes the model wrote
 * (vLLM re-serializes them with json.dumps when not streaming): streamed
 * fragments and the final text are the same.
 */
#define _GNU_SOURCE         /* memmem() */

#include <stdlib.h>
#include <string.h>
#include <yajl/yajl_tree.h>

#include "llm.h"
#include "toolcall/tool_scan.h"
#include "util/util.h"


#define TP_MAX_NAME  512        /* a mistral v11 name longer is no name */

enum {
    TP_TEXT = 0,                /* content; looking for the marker */
    TP_BETWEEN,                 /* after a call: dropped; the marker again */
    TP_OPEN,                    /* hermes: the call's '{' */
    TP_JSON,                    /* a call object (or v11 arguments) */
    TP_CLOSE,                   /* hermes: </tool_call> */
    TP_LSTART,                  /* llama: is the output calls? */
    TP_LSEP,                    /* llama: ';' and the next '{' */
    TP_PLAIN,                   /* llama: content only */
    TP_MAFTER,                  /* mistral: after [TOOL_CALLS] */
    TP_MITEM,                   /* mistral: an array element's '{' */
    TP_MSEP,                    /* mistral: ',' or ']' */
    TP_MNAME,                   /* mistral v11: the name, up to '{' */
    TP_NAMED,                   /* named: the arguments' '{' */
    TP_AOPEN,                   /* json_array: the '[' */
    TP_DROP,                    /* the rest is dropped */
    TP_FAILED                   /* the rest is content */
};

typedef struct {
    char          *name;
    size_t         name_len;
    size_t         args_start, args_end;
    size_t         args_sent;   /* reported up to here */
    unsigned       started:1;   /* LLM_TOOL_EV_CALL reported */
    unsigned       args_default:1;      /* none given: "{}" */
} tp_call;

struct llm_tool_parser {
    llm_tool_parser_kind  kind;
    const char           *marker;       /* what starts the calls, or NULL */
    size_t                marker_len;
    char                 *buf;          /* the whole text, NUL-terminated */
    size_t                len, cap;
    size_t                pos;          /* taken by the state machine */
    size_t                sent;         /* content reported up to here */
    size_t                content_end;  /* where the first call's markup
                                           starts */
    size_t                mark;         /* where the current call's does */
    int                   mark_reported;  /* ... and something of it was */
    size_t                obj_start;    /* its JSON's '{' */
    size_t                close;        /* bytes of </tool_call> seen */
    int                   state;
    int                   v11;          /* mistral: name[ARGS]{...}; named:
                                           the object is the arguments */
    char                 *named;        /* named: the function */
    size_t                named_len;
    llm_tool_scan         scan;
    tp_call              *calls;
    int                   n_calls, cap_calls;
    int                   failed, finished;
    llm_tool_event_fn     fn;
    void                 *data;
};

static const char  tp_close_tag[] = "</tool_call>";
static const char  tp_python_tag[] = "<|python_tag|>";


static int
tp_ws(char c)
{
    return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}


int
llm_tool_parser_kind_from_name(const char *name, size_t len)
{
    static const char  *names[] = { "hermes", "llama3_json", "mistral" };
    int                 i;

    for (i = 0; i < 3; i++) {
        if (len == strlen(names[i]) && memcmp(name, names[i], len) == 0) {
            return LLM_TOOL_PARSER_HERMES + i;
        }
    }
    return -1;
}


const char *
llm_tool_parser_kind_name(llm_tool_parser_kind k)
{
    switch (k) {
    case LLM_TOOL_PARSER_HERMES:      return "hermes";
    case LLM_TOOL_PARSER_LLAMA3_JSON: return "llama3_json";
    case LLM_TOOL_PARSER_MISTRAL:     return "mistral";
    case LLM_TOOL_PARSER_NAMED:       return "named";
    case LLM_TOOL_PARSER_JSON_ARRAY:  return "json_array";
    default:                          return "none";
    }
}


/*
 * What the templates of each family teach (docs/api.md): Mistral's write
 * [TOOL_CALLS]; Hermes' and Qwen's <tool_call> around JSON (Qwen3-Coder's
 * <tool_call><function=...> XML is another format, left alone); Llama
 * 3.1's <|python_tag|>, Llama 3.2's JSON with "parameters" in a Llama 3
 * header format.
 */
llm_tool_parser_kind
llm_tool_parser_detect(const char *src)
{
    if (src == NULL) {
        return LLM_TOOL_PARSER_NONE;
    }
    if (strstr(src, "[TOOL_CALLS]")) {
        return LLM_TOOL_PARSER_MISTRAL;
    }
    if (strstr(src, "<tool_call>")) {
        return strstr(src, "<function=") ? LLM_TOOL_PARSER_NONE
                                         : LLM_TOOL_PARSER_HERMES;
    }
    if (strstr(src, "<|start_header_id|>")
        && (strstr(src, "<|python_tag|>")
            || strstr(src, "\"parameters\": dictionary")))
    {
        return LLM_TOOL_PARSER_LLAMA3_JSON;
    }
    return LLM_TOOL_PARSER_NONE;
}


llm_tool_parser *
llm_tool_parser_new(llm_tool_parser_kind kind)
{
    llm_tool_parser  *p;

    p = llm_xcalloc(1, sizeof(*p));
    p->kind = kind;
    p->cap = 256;
    p->buf = llm_xmalloc(p->cap);
    p->buf[0] = '\0';
    switch (kind) {
    case LLM_TOOL_PARSER_HERMES:
        p->marker = "<tool_call>";
        break;
    case LLM_TOOL_PARSER_MISTRAL:
        p->marker = "[TOOL_CALLS]";
        break;
    default:
        break;
    }
    p->marker_len = p->marker ? strlen(p->marker) : 0;
    switch (kind) {
    case LLM_TOOL_PARSER_LLAMA3_JSON:
        p->state = TP_LSTART;
        break;
    case LLM_TOOL_PARSER_JSON_ARRAY:
        p->state = TP_AOPEN;
        break;
    default:
        p->state = TP_TEXT;
        break;
    }
    return p;
}


llm_tool_parser *
llm_tool_parser_new_named(const char *name, size_t len)
{
    llm_tool_parser  *p;

    p = llm_tool_parser_new(LLM_TOOL_PARSER_NAMED);
    p->named = llm_xmalloc(len + 1);
    memcpy(p->named, name, len);
    p->named[len] = '\0';
    p->named_len = len;
    p->state = TP_NAMED;
    return p;
}


void
llm_tool_parser_free(llm_tool_parser *p)
{
    int  i;

    if (p == NULL) {
        return;
    }
    for (i = 0; i < p->n_calls; i++) {
        free(p->calls[i].name);
    }
    free(p->calls);
    free(p->named);
    free(p->buf);
    free(p);
}


/* ---- events -------------------------------------------------------------- */


static void
tp_event(llm_tool_parser *p, llm_tool_event_type type, int index,
    const char *text, size_t len)
{
    llm_tool_event  ev;

    if (p->fn == NULL || (type != LLM_TOOL_EV_CALL && len == 0)) {
        return;
    }
    ev.type = type;
    ev.index = index;
    ev.text = text;
    ev.len = len;
    p->fn(&ev, p->data);
}


static void
tp_content(llm_tool_parser *p, size_t to)
{
    if (to > p->sent) {
        tp_event(p, LLM_TOOL_EV_CONTENT, 0, p->buf + p->sent, to - p->sent);
        p->sent = to;
    }
}


/* The markup cannot be a call: the rest of the text is content, from the
 * current call's markup on when nothing of it was reported. */
static void
tp_fail(llm_tool_parser *p)
{
    size_t  from;

    p->failed = 1;
    p->state = TP_FAILED;
    from = p->mark_reported ? p->pos : p->mark;
    if (p->sent < from) {
        p->sent = from;
    }
    tp_content(p, p->len);
}


static tp_call *
tp_call_new(llm_tool_parser *p)
{
    tp_call  *c;

    if (p->n_calls == p->cap_calls) {
        p->cap_calls = p->cap_calls ? 2 * p->cap_calls : 4;
        p->calls = llm_xrealloc(p->calls, p->cap_calls * sizeof(tp_call));
    }
    c = &p->calls[p->n_calls++];
    memset(c, 0, sizeof(*c));
    return c;
}


/* The name is known: the call starts. */
static void
tp_call_start(llm_tool_parser *p, tp_call *c, const char *name, size_t len)
{
    c->name = llm_xmalloc(len + 1);
    memcpy(c->name, name, len);
    c->name[len] = '\0';
    c->name_len = len;
    c->started = 1;
    p->mark_reported = 1;
    tp_event(p, LLM_TOOL_EV_CALL, p->n_calls - 1, c->name, len);
}


/* A call object's name token, decoded: 0, or -1 when it is no string. */
static int
tp_name_token(llm_tool_parser *p, tp_call *c)
{
    char      err[LLM_ERR_LEN];
    yajl_val  v;

    v = llm_json_parse(p->buf + p->scan.name_start,
                       p->scan.name_end - p->scan.name_start, 4, err);
    if (v == NULL || !YAJL_IS_STRING(v) || v->u.string[0] == '\0') {
        llm_json_free(v);
        return -1;
    }
    tp_call_start(p, c, v->u.string, strlen(v->u.string));
    llm_json_free(v);
    return 0;
}


/* Reports what the scanner found of the current call since last time. */
static int
tp_progress(llm_tool_parser *p)
{
    tp_call  *c = &p->calls[p->n_calls - 1];

    if (!c->started) {
        if (!p->scan.has_name) {
            return 0;
        }
        if (tp_name_token(p, c) != 0) {
            return -1;
        }
    }
    if (p->scan.has_args) {
        if (c->args_sent < p->scan.args_start) {
            c->args_start = c->args_sent = p->scan.args_start;
        }
        if (p->scan.args_avail > c->args_sent) {
            tp_event(p, LLM_TOOL_EV_ARGS, p->n_calls - 1,
                     p->buf + c->args_sent, p->scan.args_avail - c->args_sent);
            c->args_sent = p->scan.args_avail;
        }
    }
    return 0;
}


/* The call's JSON ended at p->pos: it counts if it parses. */
static int
tp_call_done(llm_tool_parser *p)
{
    tp_call   *c = &p->calls[p->n_calls - 1];
    yajl_val   v;
    char       err[LLM_ERR_LEN];
    size_t     from = p->v11 ? p->scan.args_start : p->obj_start;

    v = llm_json_parse(p->buf + from, p->pos + 1 - from, LLM_JSON_MAX_DEPTH,
                       err);
    if (v == NULL) {
        return -1;
    }
    llm_json_free(v);
    if (!c->started || tp_progress(p) != 0) {
        return -1;
    }
    if (!p->scan.has_args) {
        if (p->kind != LLM_TOOL_PARSER_MISTRAL) {
            return -1;              /* vLLM: a KeyError */
        }
        c->args_default = 1;
        tp_event(p, LLM_TOOL_EV_ARGS, p->n_calls - 1, "{}", 2);
    }
    c->args_end = c->args_sent;
    return 0;
}


/* A '{' at p->pos starts a call object. */
static void
tp_object(llm_tool_parser *p, int mode)
{
    p->obj_start = p->pos;
    llm_tool_scan_init(&p->scan, mode, p->pos);
    p->state = TP_JSON;
}


/* ---- the state machine --------------------------------------------------- */


/* The marker at or after p->pos: its offset, or -1 with p->pos moved past
 * what cannot begin one (a tail that begins one stays). */
static long
tp_find_marker(llm_tool_parser *p)
{
    const char  *hit;
    size_t       k, n;

    hit = memmem(p->buf + p->pos, p->len - p->pos, p->marker, p->marker_len);
    if (hit) {
        return hit - p->buf;
    }
    n = p->len - p->pos;
    for (k = n < p->marker_len - 1 ? n : p->marker_len - 1; k > 0; k--) {
        if (memcmp(p->buf + p->len - k, p->marker, k) == 0) {
            break;
        }
    }
    p->pos = p->len - k;
    return -1;
}


/* After a marker: the state that reads a call. */
static void
tp_after_marker(llm_tool_parser *p, size_t at)
{
    if (p->n_calls == 0) {
        p->content_end = at;
    }
    p->mark = at;
    p->mark_reported = 0;
    p->pos = at + p->marker_len;
    p->state = p->kind == LLM_TOOL_PARSER_HERMES ? TP_OPEN : TP_MAFTER;
}


/* llama: the start of the output decides; 0 when it cannot yet */
static int
tp_llama_start(llm_tool_parser *p)
{
    size_t  n, k = sizeof(tp_python_tag) - 1;

    while (p->pos < p->len && tp_ws(p->buf[p->pos])) {
        p->pos++;
    }
    n = p->len - p->pos;
    if (n == 0) {
        return 0;
    }
    if (n >= k && memcmp(p->buf + p->pos, tp_python_tag, k) == 0) {
        p->pos += k;
        p->state = TP_LSEP;
        return 1;
    }
    if (n < k && memcmp(p->buf + p->pos, tp_python_tag, n) == 0) {
        return 0;
    }
    if (p->buf[p->pos] == '{') {
        tp_call_new(p);
        tp_object(p, LLM_SCAN_CALL);
        p->pos++;
        return 1;
    }
    p->state = TP_PLAIN;
    return 1;
}


/* mistral v11: the name ends at '{' (minus "[ARGS]" and blanks) */
static int
tp_mistral_name(llm_tool_parser *p)
{
    char        c = p->buf[p->pos];
    size_t      from = p->mark + p->marker_len, to = p->pos;
    tp_call    *call;
    const char *id;

    if (c != '{') {
        if (c == '\n' || to - from >= TP_MAX_NAME) {
            return -1;
        }
        p->pos++;
        return 0;
    }
    while (from < to && tp_ws(p->buf[from])) {
        from++;
    }
    if (to - from >= 6 && memcmp(p->buf + to - 6, "[ARGS]", 6) == 0) {
        to -= 6;
    }
    /* Mistral Small 3.2 writes name[CALL_ID]id[ARGS]: the id is the
     * model's, and ids are ours to give */
    id = memmem(p->buf + from, to - from, "[CALL_ID]", 9);
    if (id) {
        to = id - p->buf;
    }
    while (to > from && tp_ws(p->buf[to - 1])) {
        to--;
    }
    if (to == from || memchr(p->buf + from, '"', to - from)) {
        return -1;
    }
    p->v11 = 1;
    call = tp_call_new(p);
    tp_call_start(p, call, p->buf + from, to - from);
    tp_object(p, LLM_SCAN_VALUE);
    p->pos++;
    return tp_progress(p);
}


/* One step; 0 when the text so far is taken. */
static int
tp_step(llm_tool_parser *p)
{
    long  at;
    char  c;
    int   rc;

    switch (p->state) {

    case TP_TEXT:
    case TP_BETWEEN:
        at = tp_find_marker(p);
        if (at < 0) {
            if (p->state == TP_TEXT) {
                tp_content(p, p->pos);
            }
            return 0;
        }
        if (p->state == TP_TEXT) {
            tp_content(p, (size_t) at);
        }
        tp_after_marker(p, (size_t) at);
        return 1;

    case TP_LSTART:
        return tp_llama_start(p);

    case TP_PLAIN:
    case TP_FAILED:
        tp_content(p, p->len);
        p->pos = p->len;
        return 0;

    case TP_DROP:
        p->pos = p->len;
        return 0;

    default:
        break;
    }

    if (p->pos >= p->len) {
        return 0;
    }
    c = p->buf[p->pos];

    switch (p->state) {

    case TP_OPEN:
    case TP_MITEM:
    case TP_LSEP:
        if (tp_ws(c) || (c == ';' && p->state == TP_LSEP)) {
            p->pos++;
            return 1;
        }
        if (c != '{') {
            if (p->state == TP_LSEP && p->n_calls > 0) {
                p->state = TP_DROP;
                return 1;
            }
            return -1;
        }
        if (p->state != TP_OPEN && (p->n_calls > 0 || p->state == TP_LSEP)) {
            p->mark = p->n_calls ? p->pos : 0;
            p->mark_reported = 0;
        }
        tp_call_new(p);
        tp_object(p, LLM_SCAN_CALL);
        p->pos++;
        return 1;

    case TP_JSON:
        rc = llm_tool_scan_byte(&p->scan, p->buf, p->pos);
        if (rc < 0) {
            return -1;
        }
        if ((p->scan.has_name && !p->calls[p->n_calls - 1].started)
            || p->pos + 1 == p->len)
        {
            if (tp_progress(p) != 0) {
                return -1;
            }
        }
        if (rc == 0) {
            p->pos++;
            return 1;
        }
        if (tp_call_done(p) != 0) {
            return -1;
        }
        p->pos++;
        switch (p->kind) {
        case LLM_TOOL_PARSER_HERMES:
            p->state = TP_CLOSE;
            p->close = 0;
            break;
        case LLM_TOOL_PARSER_LLAMA3_JSON:
            p->state = TP_LSEP;
            break;
        case LLM_TOOL_PARSER_NAMED:
            p->state = TP_DROP;
            break;
        default:
            p->state = p->v11 ? TP_BETWEEN : TP_MSEP;
            break;
        }
        return 1;

    case TP_CLOSE:
        if (p->close == 0 && tp_ws(c)) {
            p->pos++;
            return 1;
        }
        if (c != tp_close_tag[p->close]) {
            return -1;
        }
        p->pos++;
        if (++p->close == sizeof(tp_close_tag) - 1) {
            p->state = TP_BETWEEN;
        }
        return 1;

    case TP_MAFTER:
        if (tp_ws(c)) {
            p->pos++;
            return 1;
        }
        if (c == '[') {
            p->pos++;
            p->state = TP_MITEM;
            return 1;
        }
        p->state = TP_MNAME;
        return 1;

    case TP_MNAME:
        return tp_mistral_name(p) != 0 ? -1 : 1;

    case TP_NAMED:
        if (tp_ws(c)) {
            p->pos++;
            return 1;
        }
        if (c != '{') {
            return -1;
        }
        p->v11 = 1;
        tp_call_start(p, tp_call_new(p), p->named, p->named_len);
        tp_object(p, LLM_SCAN_VALUE);
        p->pos++;
        return tp_progress(p) != 0 ? -1 : 1;

    case TP_AOPEN:
        if (tp_ws(c)) {
            p->pos++;
            return 1;
        }
        if (c != '[') {
            return -1;
        }
        p->pos++;
        p->state = TP_MITEM;
        return 1;

    case TP_MSEP:
        if (tp_ws(c) || c == ',') {
            p->pos++;
            if (c == ',') {
                p->state = TP_MITEM;
            }
            return 1;
        }
        if (c == ']') {
            p->pos++;
            p->state = p->kind == LLM_TOOL_PARSER_JSON_ARRAY ? TP_DROP
                                                             : TP_BETWEEN;
            return 1;
        }
        return -1;
    }

    return -1;
}


static void
tp_run(llm_tool_parser *p)
{
    int  rc;

    while ((rc = tp_step(p)) > 0) { /* void */ }
    if (rc < 0) {
        tp_fail(p);
    }
}


void
llm_tool_parser_feed(llm_tool_parser *p, const char *text, size_t len,
    llm_tool_event_fn fn, void *data)
{
    if (p->finished || len == 0) {
        return;
    }
    if (p->len + len + 1 > p->cap) {
        while (p->len + len + 1 > p->cap) {
            p->cap *= 2;
        }
        p->buf = llm_xrealloc(p->buf, p->cap);
    }
    memcpy(p->buf + p->len, text, len);
    p->len += len;
    p->buf[p->len] = '\0';

    p->fn = fn;
    p->data = data;
    tp_run(p);
    p->fn = NULL;
}


void
llm_tool_parser_finish(llm_tool_parser *p, llm_tool_event_fn fn, void *data)
{
    if (p->finished) {
        return;
    }
    p->fn = fn;
    p->data = data;

    switch (p->state) {
    case TP_TEXT:
    case TP_LSTART:
        tp_content(p, p->len);      /* a marker's beginning is content */
        break;
    case TP_BETWEEN:
    case TP_CLOSE:                  /* vLLM: <tool_call>(.*) at the end */
    case TP_DROP:
    case TP_PLAIN:
    case TP_FAILED:
        break;
    case TP_LSEP:
        if (p->n_calls == 0) {
            tp_fail(p);
        }
        break;
    default:                        /* the sequence ended inside a call */
        p->pos = p->len;
        tp_fail(p);
        break;
    }

    if (p->n_calls == 0) {
        tp_content(p, p->len);
    }
    p->finished = 1;
    p->fn = NULL;
}


int
llm_tool_parser_n_calls(const llm_tool_parser *p)
{
    return p->finished && !p->failed ? p->n_calls : 0;
}


const char *
llm_tool_parser_call_name(const llm_tool_parser *p, int i, size_t *len)
{
    *len = p->calls[i].name_len;
    return p->calls[i].name;
}


const char *
llm_tool_parser_call_args(const llm_tool_parser *p, int i, size_t *len)
{
    const tp_call  *c = &p->calls[i];

    if (c->args_default) {
        *len = 2;
        return "{}";
    }
    *len = c->args_end - c->args_start;
    return p->buf + c->args_start;
}


const char *
llm_tool_parser_content(const llm_tool_parser *p, size_t *len)
{
    if (llm_tool_parser_n_calls(p) == 0) {
        *len = p->len;
        return p->buf;
    }
    if (p->content_end == 0) {
        *len = 0;
        return NULL;
    }
    *len = p->content_end;
    return p->buf;
}
