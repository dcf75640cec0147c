/*
 * wire.c -- frames between the engine server and its clients (wire.h).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/socket.h>

#include "wire.h"

#define LLM_WBUF_MIN   4096


static void
llm_wbuf_reserve(llm_wbuf *b, size_t n)
{
    size_t  cap;

    if (b->len + n <= b->cap) {
        return;
    }
    cap = b->cap ? b->cap : LLM_WBUF_MIN;
    while (cap < b->len + n) {
        cap *= 2;
    }
    b->p = realloc(b->p, cap);
    if (b->p == NULL) {
        abort();
    }
    b->cap = cap;
}


/* what was written or consumed goes; only between frames (a frame being
 * built or read keeps its offset) */
static void
llm_wbuf_compact(llm_wbuf *b)
{
    if (b->off == 0) {
        return;
    }
    memmove(b->p, b->p + b->off, b->len - b->off);
    b->len -= b->off;
    b->off = 0;
}


void
llm_wbuf_free(llm_wbuf *b)
{
    free(b->p);
    memset(b, 0, sizeof(*b));
}


void
llm_wbuf_put(llm_wbuf *b, const void *p, size_t n)
{
    if (n == 0) {
        return;
    }
    llm_wbuf_reserve(b, n);
    memcpy(b->p + b->len, p, n);
    b->len += n;
}


void
llm_wbuf_u32(llm_wbuf *b, uint32_t v)
{
    llm_wbuf_put(b, &v, sizeof(v));
}


void
llm_wbuf_u64(llm_wbuf *b, uint64_t v)
{
    llm_wbuf_put(b, &v, sizeof(v));
}


void
llm_wbuf_f64(llm_wbuf *b, double v)
{
    llm_wbuf_put(b, &v, sizeof(v));
}


void
llm_wbuf_align(llm_wbuf *b, size_t frame)
{
    static const uint8_t  zero[8];
    size_t                pad = (8 - (b->len - frame) % 8) % 8;

    llm_wbuf_put(b, zero, pad);
}


void
llm_wbuf_array(llm_wbuf *b, size_t frame, const void *p, uint32_t n,
    size_t size)
{
    llm_wbuf_u32(b, n);
    llm_wbuf_align(b, frame);
    llm_wbuf_put(b, p, (size_t) n * size);
}


void
llm_wbuf_str(llm_wbuf *b, size_t frame, const char *s)
{
    /* NULL: an empty array, padded as llm_wread_array() reads it */
    llm_wbuf_array(b, frame, s, s ? (uint32_t) strlen(s) + 1 : 0, 1);
}


size_t
llm_wbuf_begin(llm_wbuf *b, uint32_t type)
{
    size_t  frame;

    if (b->off > 0 && b->off >= b->len / 2) {
        llm_wbuf_compact(b);
    }
    frame = b->len;
    llm_wbuf_u32(b, 0);
    llm_wbuf_u32(b, type);
    return frame;
}


void
llm_wbuf_end(llm_wbuf *b, size_t frame)
{
    uint32_t  len;

    llm_wbuf_align(b, frame);
    len = (uint32_t) (b->len - frame);
    memcpy(b->p + frame, &len, sizeof(len));
}


int
llm_wbuf_write(llm_wbuf *b, int fd)
{
    ssize_t  n;

    while (b->off < b->len) {
        n = send(fd, b->p + b->off, b->len - b->off, MSG_NOSIGNAL);
        if (n < 0) {
            if (errno == EINTR) {
                continue;
            }
            return errno == EAGAIN || errno == EWOULDBLOCK ? 1 : -1;
        }
        b->off += (size_t) n;
    }
    b->off = 0;
    b->len = 0;
    return 0;
}


int
llm_wbuf_read(llm_wbuf *b, int fd)
{
    ssize_t  n;

    /* consumed frames go; the rest stays 8-aligned (whole frames) */
    llm_wbuf_compact(b);
    for ( ;; ) {
        llm_wbuf_reserve(b, 64 * 1024);
        n = recv(fd, b->p + b->len, b->cap - b->len, 0);
        if (n < 0) {
            if (errno == EINTR) {
                continue;
            }
            return errno == EAGAIN || errno == EWOULDBLOCK ? 1 : -1;
        }
        if (n == 0) {
            return 0;
        }
        b->len += (size_t) n;
        if ((size_t) n < 64 * 1024) {
            return 1;
        }
    }
}


const uint8_t *
llm_wbuf_frame(llm_wbuf *b, uint32_t *type, size_t *len)
{
    const uint8_t  *f;
    uint32_t        n;

    if (b->len - b->off < 8) {
        if (b->off == b->len) {
            b->off = 0;
            b->len = 0;
        }
        return NULL;
    }
    f = b->p + b->off;
    memcpy(&n, f, sizeof(n));
    if (n < 8 || n % 8 != 0 || n > LLM_WIRE_MAX_FRAME) {
        *type = 0;              /* malformed: the caller drops the peer */
        *len = 0;
        return f;
    }
    if (b->len - b->off < n) {
        return NULL;
    }
    memcpy(type, f + 4, sizeof(*type));
    *len = n;
    b->off += n;
    return f;
}


void
llm_wread_init(llm_wread *r, const uint8_t *frame, size_t len)
{
    r->frame = frame;
    r->p = frame + 8;
    r->end = frame + len;
    r->bad = 0;
}


const void *
llm_wread_bytes(llm_wread *r, size_t n)
{
    const uint8_t  *p = r->p;

    if (r->bad || (size_t) (r->end - r->p) < n) {
        r->bad = 1;
        return NULL;
    }
    r->p += n;
    return p;
}


/* n bytes into v, left as they are (zero) when the frame is short */
static void
llm_wread_copy(llm_wread *r, void *v, size_t n)
{
    const void  *p = llm_wread_bytes(r, n);

    if (p) {
        memcpy(v, p, n);
    }
}


uint32_t
llm_wread_u32(llm_wread *r)
{
    uint32_t     v = 0;

    llm_wread_copy(r, &v, sizeof(v));
    return v;
}


uint64_t
llm_wread_u64(llm_wread *r)
{
    uint64_t     v = 0;

    llm_wread_copy(r, &v, sizeof(v));
    return v;
}


double
llm_wread_f64(llm_wread *r)
{
    double       v = 0;

    llm_wread_copy(r, &v, sizeof(v));
    return v;
}


const void *
llm_wread_array(llm_wread *r, uint32_t *n, size_t size)
{
    size_t  pad;

    *n = llm_wread_u32(r);
    pad = (8 - (size_t) (r->p - r->frame) % 8) % 8;
    if (llm_wread_bytes(r, pad) == NULL && pad) {
        return NULL;
    }
    if (size && *n > (size_t) (r->end - r->p) / size) {
        r->bad = 1;
        return NULL;
    }
    if (*n == 0) {
        return NULL;            /* as the sender had it: no array */
    }
    return llm_wread_bytes(r, (size_t) *n * size);
}


const char *
llm_wread_str(llm_wread *r)
{
    uint32_t     n;
    const char  *s;

    s = llm_wread_array(r, &n, 1);
    if (s == NULL) {
        return NULL;
    }
    if (s[n - 1] != '\0') {
        r->bad = 1;
        return NULL;
    }
    return s;
}


/* ---- handles ------------------------------------------------------------- */


static size_t
llm_htab_slot(uint64_t k, size_t cap)
{
    k ^= k >> 33;
    k *= 0xff51afd7ed558ccdULL;
    k ^= k >> 33;
    return (size_t) k & (cap - 1);
}


void
llm_htab_free(llm_htab *t)
{
    free(t->keys);
    free(t->vals);
    memset(t, 0, sizeof(*t));
}


void
llm_htab_put(llm_htab *t, uint64_t k, void *v)
{
    llm_htab  old = *t;
    size_t    i;

    if ((t->n + 1) * 2 > t->cap) {
        t->cap = t->cap ? t->cap * 2 : 64;
        t->keys = calloc(t->cap, sizeof(uint64_t));
        t->vals = calloc(t->cap, sizeof(void *));
        if (t->keys == NULL || t->vals == NULL) {
            abort();
        }
        t->n = 0;
        for (i = 0; i < old.cap; i++) {
            if (old.keys[i]) {
                llm_htab_put(t, old.keys[i], old.vals[i]);
            }
        }
        free(old.keys);
        free(old.vals);
    }
    for (i = llm_htab_slot(k, t->cap); t->keys[i]; i = (i + 1) & (t->cap - 1))
    {
        if (t->keys[i] == k) {
            t->vals[i] = v;
            return;
        }
    }
    t->keys[i] = k;
    t->vals[i] = v;
    t->n++;
}


void *
llm_htab_get(const llm_htab *t, uint64_t k)
{
    size_t  i;

    if (t->cap == 0 || k == 0) {
        return NULL;
    }
    for (i = llm_htab_slot(k, t->cap); t->keys[i]; i = (i + 1) & (t->cap - 1))
    {
        if (t->keys[i] == k) {
            return t->vals[i];
        }
    }
    return NULL;
}


void *
llm_htab_del(llm_htab *t, uint64_t k)
{
    size_t   i, j, h;
    void    *v;

    if (t->cap == 0 || k == 0) {
        return NULL;
    }
    for (i = llm_htab_slot(k, t->cap); t->keys[i]; i = (i + 1) & (t->cap - 1))
    {
        if (t->keys[i] == k) {
            break;
        }
    }
    if (t->keys[i] == 0) {
        return NULL;
    }
    v = t->vals[i];
    t->keys[i] = 0;
    t->n--;
    /* backward shift: the entries after it that probed past i move up */
    for (j = (i + 1) & (t->cap - 1); t->keys[j]; j = (j + 1) & (t->cap - 1)) {
        h = llm_htab_slot(t->keys[j], t->cap);
        if ((j > i && (h <= i || h > j)) || (j < i && (h <= i && h > j))) {
            t->keys[i] = t->keys[j];
            t->vals[i] = t->vals[j];
            t->keys[j] = 0;
            i = j;
        }
    }
    return v;
}


/* ---- sampling parameters and outputs ------------------------------------- */


static void
llm_wire_put_strs(llm_wbuf *b, size_t frame, const char *const *s, int n)
{
    int  i;

    for (i = 0; i < n; i++) {
        llm_wbuf_str(b, frame, s[i]);
    }
}


void
llm_wire_put_params(llm_wbuf *b, size_t frame, const llm_sampling_params *p)
{
    llm_sampling_params  flat = *p;

    /* the scalars as they are; the arrays follow, their pointers do not */
    flat.stop_token_ids = NULL;
    flat.stop = NULL;
    flat.logit_bias_ids = NULL;
    flat.logit_bias_values = NULL;
    flat.allowed_token_ids = NULL;
    flat.bad_words = NULL;
    flat.cache_salt = NULL;
    flat.structured = NULL;
    llm_wbuf_array(b, frame, &flat, 1, sizeof(flat));
    llm_wbuf_array(b, frame, p->stop_token_ids, (uint32_t) p->n_stop_token_ids,
                   sizeof(int32_t));
    llm_wbuf_array(b, frame, p->logit_bias_ids, (uint32_t) p->n_logit_bias,
                   sizeof(int32_t));
    llm_wbuf_array(b, frame, p->logit_bias_values, (uint32_t) p->n_logit_bias,
                   sizeof(float));
    llm_wbuf_array(b, frame, p->allowed_token_ids,
                   (uint32_t) p->n_allowed_token_ids, sizeof(int32_t));
    llm_wire_put_strs(b, frame, p->stop, p->n_stop);
    llm_wire_put_strs(b, frame, p->bad_words, p->n_bad_words);
    llm_wbuf_str(b, frame, p->cache_salt);
    llm_wbuf_str(b, frame, p->structured);
}


int
llm_wire_get_params(llm_wread *r, llm_sampling_params *p, const char ***strs)
{
    const llm_sampling_params  *flat;
    const char                **s;
    uint32_t                    n, m;
    int                         i;

    *strs = NULL;
    flat = llm_wread_array(r, &n, sizeof(*flat));
    if (flat == NULL || n != 1) {
        return -1;
    }
    *p = *flat;
    p->stop_token_ids = llm_wread_array(r, &n, sizeof(int32_t));
    if (n != (uint32_t) p->n_stop_token_ids) {
        return -1;
    }
    p->logit_bias_ids = llm_wread_array(r, &n, sizeof(int32_t));
    p->logit_bias_values = llm_wread_array(r, &m, sizeof(float));
    if (n != (uint32_t) p->n_logit_bias || m != n) {
        return -1;
    }
    p->allowed_token_ids = llm_wread_array(r, &n, sizeof(int32_t));
    if (n != (uint32_t) p->n_allowed_token_ids || p->n_stop < 0
        || p->n_bad_words < 0 || r->bad)
    {
        return -1;
    }
    s = calloc((size_t) p->n_stop + p->n_bad_words + 1, sizeof(char *));
    if (s == NULL) {
        return -1;
    }
    *strs = s;
    for (i = 0; i < p->n_stop + p->n_bad_words; i++) {
        s[i] = llm_wread_str(r);
        if (s[i] == NULL) {
            return -1;
        }
    }
    p->stop = p->n_stop ? s : NULL;
    p->bad_words = p->n_bad_words ? s + p->n_stop : NULL;
    p->cache_salt = llm_wread_str(r);
    p->structured = llm_wread_str(r);
    return r->bad ? -1 : 0;
}


void
llm_wire_put_output(llm_wbuf *b, size_t frame, const llm_output *o)
{
    llm_wbuf_u32(b, (uint32_t) o->finish_reason);
    llm_wbuf_u32(b, (uint32_t) o->stop_token);
    llm_wbuf_array(b, frame, &o->stats, 1, sizeof(o->stats));
    llm_wbuf_array(b, frame, o->text, (uint32_t) o->text_len, 1);
    llm_wbuf_array(b, frame, o->ids, (uint32_t) o->n_ids, sizeof(int32_t));
    llm_wbuf_array(b, frame, o->token_times, (uint32_t) o->n_ids,
                   sizeof(double));
    llm_wbuf_array(b, frame, o->logprobs, o->logprobs ? (uint32_t) o->n_ids : 0,
                   sizeof(llm_token_logprob));
    llm_wbuf_u32(b, o->logprobs != NULL);
    llm_wbuf_array(b, frame, o->prompt_logprobs,
                   o->prompt_logprobs ? (uint32_t) o->n_prompt_logprobs : 0,
                   sizeof(llm_token_logprob));
    llm_wbuf_u32(b, o->prompt_logprobs != NULL);
    llm_wbuf_str(b, frame, o->stop_string);
    llm_wbuf_array(b, frame, o->spec_step_accepted, (uint32_t) o->n_spec_step,
                   1);
    llm_wbuf_array(b, frame, o->spec_step_drafted, (uint32_t) o->n_spec_step,
                   1);
    llm_wbuf_u32(b, o->spec_step_accepted != NULL);
}


int
llm_wire_get_output(llm_wread *r, llm_output *o)
{
    const llm_request_stats  *st;
    uint32_t                  n, m;

    memset(o, 0, sizeof(*o));
    o->finish_reason = (llm_finish_reason) llm_wread_u32(r);
    o->stop_token = (int32_t) llm_wread_u32(r);
    st = llm_wread_array(r, &n, sizeof(*st));
    if (st == NULL || n != 1 || o->finish_reason > LLM_FINISH_ERROR) {
        return -1;
    }
    o->stats = *st;
    o->text = llm_wread_array(r, &n, 1);
    o->text_len = n;
    if (o->text == NULL) {
        o->text = "";
    }
    o->ids = llm_wread_array(r, &n, sizeof(int32_t));
    o->n_ids = (int) n;
    o->token_times = llm_wread_array(r, &m, sizeof(double));
    if (m != n) {
        return -1;
    }
    o->logprobs = llm_wread_array(r, &m, sizeof(llm_token_logprob));
    if (!llm_wread_u32(r)) {
        o->logprobs = NULL;
    } else if (m != n) {
        return -1;
    }
    o->prompt_logprobs = llm_wread_array(r, &n, sizeof(llm_token_logprob));
    o->n_prompt_logprobs = (int) n;
    if (!llm_wread_u32(r)) {
        o->prompt_logprobs = NULL;
        o->n_prompt_logprobs = 0;
    }
    o->stop_string = llm_wread_str(r);
    o->spec_step_accepted = llm_wread_array(r, &n, 1);
    o->spec_step_drafted = llm_wread_array(r, &m, 1);
    o->n_spec_step = (int) n;
    if (!llm_wread_u32(r)) {
        o->spec_step_accepted = NULL;
        o->spec_step_drafted = NULL;
        o->n_spec_step = 0;
    } else if (m != n) {
        return -1;
    }
    return r->bad ? -1 : 0;
}
