/*
 * client.c -- a client of the engine server (llm.h): the nginx worker's
 * end of the socket.  Submissions, cancels and pauses are queued as
 * frames and written when the socket takes them (llm_client_flush());
 * what arrives is read in place and handed over as llm_output.
 */
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "wire.h"

struct llm_client {
    int          fd;
    llm_wbuf     in;
    llm_wbuf     out;
    llm_htab     reqs;          /* handle -> the caller's data */
    uint64_t     next;          /* the last handle given */
    int          ready;
    int          retiring;      /* the server said so; answered */
    int          max_model_len;
    char        *device;
    char        *device_reason;
};


llm_client *
llm_client_new(int fd)
{
    llm_client  *c;

    c = calloc(1, sizeof(*c));
    if (c == NULL) {
        return NULL;
    }
    fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
    c->fd = fd;
    return c;
}


void
llm_client_free(llm_client *c)
{
    if (c == NULL) {
        return;
    }
    close(c->fd);
    llm_wbuf_free(&c->in);
    llm_wbuf_free(&c->out);
    llm_htab_free(&c->reqs);
    free(c->device);
    free(c->device_reason);
    free(c);
}


int
llm_client_fd(const llm_client *c)
{
    return c->fd;
}


int
llm_client_ready(const llm_client *c)
{
    return c->ready;
}


int
llm_client_retiring(const llm_client *c)
{
    return c->retiring;
}


int
llm_client_max_model_len(const llm_client *c)
{
    return c->max_model_len;
}


const char *
llm_client_device(const llm_client *c)
{
    return c->device ? c->device : "";
}


const char *
llm_client_device_reason(const llm_client *c)
{
    return c->device_reason ? c->device_reason : "";
}


uint64_t
llm_client_submit(llm_client *c, const int32_t *prompt, int n_prompt,
    const llm_sampling_params *p, double arrival, double queued,
    uint64_t leader, void *req_data)
{
    size_t    f;
    uint64_t  h = ++c->next;

    f = llm_wbuf_begin(&c->out, LLM_MSG_SUBMIT);
    llm_wbuf_u64(&c->out, h);
    llm_wbuf_u64(&c->out, leader);
    llm_wbuf_f64(&c->out, arrival);
    llm_wbuf_f64(&c->out, queued);
    llm_wbuf_array(&c->out, f, prompt, (uint32_t) n_prompt, sizeof(int32_t));
    llm_wire_put_params(&c->out, f, p);
    llm_wbuf_end(&c->out, f);
    llm_htab_put(&c->reqs, h, req_data);
    return h;
}


void
llm_client_cancel(llm_client *c, uint64_t h, int n_billed)
{
    size_t  f;

    if (llm_htab_del(&c->reqs, h) == NULL) {
        return;                 /* finished, or never sent */
    }
    f = llm_wbuf_begin(&c->out, LLM_MSG_CANCEL);
    llm_wbuf_u64(&c->out, h);
    llm_wbuf_u32(&c->out, (uint32_t) n_billed);
    llm_wbuf_end(&c->out, f);
}


void
llm_client_set_paused(llm_client *c, uint64_t h, int paused)
{
    size_t  f;

    if (llm_htab_get(&c->reqs, h) == NULL) {
        return;
    }
    f = llm_wbuf_begin(&c->out, LLM_MSG_PAUSE);
    llm_wbuf_u64(&c->out, h);
    llm_wbuf_u32(&c->out, (uint32_t) (paused != 0));
    llm_wbuf_end(&c->out, f);
}


void
llm_client_forget(llm_client *c, uint64_t h)
{
    (void) llm_htab_del(&c->reqs, h);
}


int
llm_client_flush(llm_client *c)
{
    if (c->out.off == c->out.len) {
        return 0;
    }
    return llm_wbuf_write(&c->out, c->fd);
}


static int
llm_client_hello(llm_client *c, llm_wread *r)
{
    const char  *s;
    uint64_t     abi;

    if (llm_wread_u32(r) != LLM_WIRE_VERSION) {
        return -1;
    }
    c->max_model_len = (int) llm_wread_u32(r);
    abi = llm_wread_u64(r);
    if (abi != sizeof(llm_sampling_params) * 1000003ULL
               + sizeof(llm_output) * 1009ULL + sizeof(llm_request_stats))
    {
        return -1;              /* another build of the engine */
    }
    s = llm_wread_str(r);
    c->device = strdup(s ? s : "");
    s = llm_wread_str(r);
    c->device_reason = strdup(s ? s : "");
    if (r->bad || c->device == NULL || c->device_reason == NULL) {
        return -1;
    }
    c->ready = 1;
    return 0;
}


int
llm_client_read(llm_client *c, llm_client_fn fn, void *data)
{
    const uint8_t  *f;
    uint32_t        type;
    size_t          len;
    uint64_t        h;
    void           *req;
    llm_wread       r;
    llm_output      o;
    int             rc;

    rc = llm_wbuf_read(&c->in, c->fd);
    while ((f = llm_wbuf_frame(&c->in, &type, &len)) != NULL) {
        llm_wread_init(&r, f, len);
        switch (type) {
        case LLM_MSG_HELLO:
            if (llm_client_hello(c, &r) != 0) {
                return -1;
            }
            break;
        case LLM_MSG_RETIRE:
            if (!c->retiring) {
                /* after everything submitted so far: the server sees the
                 * answer behind them */
                c->retiring = 1;
                llm_wbuf_end(&c->out, llm_wbuf_begin(&c->out,
                                                     LLM_MSG_RETIRE));
            }
            break;
        case LLM_MSG_OUTPUT:
            h = llm_wread_u64(&r);
            if (llm_wire_get_output(&r, &o) != 0) {
                return -1;
            }
            req = llm_htab_get(&c->reqs, h);
            if (req == NULL) {
                break;          /* cancelled or forgotten */
            }
            if (o.finish_reason != LLM_FINISH_NONE) {
                llm_htab_del(&c->reqs, h);
            }
            fn(req, h, &o, data);
            break;
        default:
            return -1;
        }
    }
    return rc == 1 ? 0 : -1;
}
