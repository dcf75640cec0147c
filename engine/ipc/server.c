/*
 * server.c -- the engine behind a socket (llm.h, "The engine in a process
 * of its own").  One thread: poll() on the engine's eventfd, the
 * listening socket and every client; a client's frames become engine
 * calls, the engine's outputs become frames to the client that submitted
 * them.  An engine made with inline_loop has no thread of its own: its
 * steps run here, between polls that do not wait while it has work, so a
 * submission reaches the step and an output its socket without a thread
 * hop.  A client that goes away has all its requests cancelled at once,
 * so their KV blocks are free at the engine's next step.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/eventfd.h>
#include <sys/socket.h>

#include "wire.h"

typedef struct llm_sconn  llm_sconn;

typedef struct {
    uint64_t     handle;
    llm_request *r;
    llm_sconn   *c;
} llm_sreq;

struct llm_sconn {
    int          fd;
    llm_wbuf     in;
    llm_wbuf     out;
    llm_htab     reqs;          /* handle -> llm_sreq */
    int          hello;         /* the hello is queued */
    int          retire;        /* 1: told to submit no more, 2: answered */
    int          dead;
};

static void llm_server_stats(llm_server *s);

struct llm_server {
    llm_engine  *e;
    int          efd;           /* the engine's notify */
    int          lfd;           /* -1: none */
    llm_sconn  **conns;
    int          n_conns;
    int          cap_conns;
    int          n_reqs;
    int          finished;      /* this drain finished a request */
    int          busy;          /* an inline engine has more to do */
    int          changed;       /* output since the stats went out */
    double       stats_at;
    double       stats_interval;
    void       (*stats_fn)(const llm_engine_stats *st, void *data);
    void        *stats_data;
    llm_engine_stats  *st;
    struct pollfd     *pfd;
    int                cap_pfd;
};


llm_server *
llm_server_new(char *err)
{
    llm_server  *s;

    s = calloc(1, sizeof(*s));
    if (s == NULL) {
        snprintf(err, LLM_ERR_LEN, "out of memory");
        return NULL;
    }
    s->efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (s->efd < 0) {
        snprintf(err, LLM_ERR_LEN, "eventfd(): %s", strerror(errno));
        free(s);
        return NULL;
    }
    s->lfd = -1;
    return s;
}


void
llm_server_notify(void *server)
{
    llm_server  *s = server;
    uint64_t     one = 1;

    if (write(s->efd, &one, sizeof(one)) != sizeof(one)) {
        /* EAGAIN only near 2^64: the fd is readable anyway */
    }
}


static void
llm_server_hello(llm_server *s, llm_sconn *c)
{
    size_t  f;

    if (s->e == NULL || c->hello) {
        return;
    }
    c->hello = 1;
    f = llm_wbuf_begin(&c->out, LLM_MSG_HELLO);
    llm_wbuf_u32(&c->out, LLM_WIRE_VERSION);
    llm_wbuf_u32(&c->out, (uint32_t) llm_engine_max_model_len(s->e));
    llm_wbuf_u64(&c->out, sizeof(llm_sampling_params) * 1000003ULL
                          + sizeof(llm_output) * 1009ULL
                          + sizeof(llm_request_stats));
    llm_wbuf_str(&c->out, f, llm_engine_device(s->e));
    llm_wbuf_str(&c->out, f, llm_engine_device_reason(s->e));
    llm_wbuf_end(&c->out, f);
}


void
llm_server_attach(llm_server *s, llm_engine *e, int listen_fd)
{
    int  i;

    s->e = e;
    s->lfd = listen_fd;
    if (listen_fd >= 0) {
        fcntl(listen_fd, F_SETFL, fcntl(listen_fd, F_GETFL) | O_NONBLOCK);
    }
    /* the stats first: a client that got the hello finds them */
    llm_server_stats(s);
    for (i = 0; i < s->n_conns; i++) {
        llm_server_hello(s, s->conns[i]);
    }
}


int
llm_server_add_client(llm_server *s, int fd)
{
    llm_sconn  *c;

    if (s->n_conns == s->cap_conns) {
        s->cap_conns = s->cap_conns ? s->cap_conns * 2 : 8;
        s->conns = realloc(s->conns, sizeof(llm_sconn *) * s->cap_conns);
        if (s->conns == NULL) {
            abort();
        }
    }
    c = calloc(1, sizeof(*c));
    if (c == NULL) {
        return -1;
    }
    fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
    c->fd = fd;
    s->conns[s->n_conns++] = c;
    llm_server_hello(s, c);
    return 0;
}


void
llm_server_on_stats(llm_server *s, double interval,
    void (*fn)(const llm_engine_stats *st, void *data), void *data)
{
    s->stats_interval = interval;
    s->stats_fn = fn;
    s->stats_data = data;
    if (s->st == NULL) {
        s->st = malloc(sizeof(llm_engine_stats));
    }
}


static void
llm_server_stats(llm_server *s)
{
    if (s->stats_fn == NULL || s->e == NULL || s->st == NULL) {
        return;
    }
    llm_engine_stats_get(s->e, s->st);
    s->stats_fn(s->st, s->stats_data);
    s->stats_at = llm_now();
    s->changed = 0;
}


void
llm_server_close_listener(llm_server *s)
{
    if (s->lfd >= 0) {
        close(s->lfd);
        s->lfd = -1;
    }
}


void
llm_server_retire(llm_server *s)
{
    llm_sconn  *c;
    size_t      f;
    int         i;

    llm_server_close_listener(s);
    for (i = 0; i < s->n_conns; i++) {
        c = s->conns[i];
        if (c->retire == 0) {
            c->retire = 1;
            f = llm_wbuf_begin(&c->out, LLM_MSG_RETIRE);
            llm_wbuf_end(&c->out, f);
        }
    }
}


int
llm_server_retired(const llm_server *s)
{
    int  i;

    if (s->n_reqs > 0) {
        return 0;
    }
    for (i = 0; i < s->n_conns; i++) {
        if (s->conns[i]->retire != 2) {
            return 0;
        }
    }
    return 1;
}


int
llm_server_clients(const llm_server *s)
{
    return s->n_conns;
}


int
llm_server_requests(const llm_server *s)
{
    return s->n_reqs;
}


static void
llm_sreq_free(llm_server *s, llm_sreq *q)
{
    llm_htab_del(&q->c->reqs, q->handle);
    llm_request_set_data(q->r, NULL);
    llm_request_release(q->r);
    s->n_reqs--;
    free(q);
}


/* The client is gone: its requests end now (KV freed at the next step). */
static void
llm_sconn_close(llm_server *s, llm_sconn *c)
{
    size_t     i;
    llm_sreq  *q;

    for (i = 0; i < c->reqs.cap; i++) {
        if (c->reqs.keys[i] == 0) {
            continue;
        }
        q = c->reqs.vals[i];
        llm_engine_cancel(s->e, q->r);
        llm_request_set_data(q->r, NULL);
        llm_request_release(q->r);
        s->n_reqs--;
        free(q);
    }
    llm_htab_free(&c->reqs);
    llm_wbuf_free(&c->in);
    llm_wbuf_free(&c->out);
    close(c->fd);
    free(c);
}


/* A request the engine cannot take: its one output says why. */
static void
llm_server_refuse(llm_sconn *c, uint64_t handle, int n_prompt)
{
    llm_output  o;
    size_t      f;

    memset(&o, 0, sizeof(o));
    o.finish_reason = LLM_FINISH_ERROR;
    o.stop_token = -1;
    o.stats.prompt_tokens = n_prompt;
    o.stats.finished = llm_now();
    f = llm_wbuf_begin(&c->out, LLM_MSG_OUTPUT);
    llm_wbuf_u64(&c->out, handle);
    llm_wire_put_output(&c->out, f, &o);
    llm_wbuf_end(&c->out, f);
}


static int
llm_server_submit(llm_server *s, llm_sconn *c, llm_wread *r)
{
    char                  err[LLM_ERR_LEN];
    uint64_t              handle, leader;
    double                arrival, queued;
    const int32_t        *prompt;
    uint32_t              n;
    const char          **strs;
    llm_sampling_params   p;
    llm_sreq             *q, *lq;
    llm_request          *lr;
    int                   rc;

    handle = llm_wread_u64(r);
    leader = llm_wread_u64(r);
    arrival = llm_wread_f64(r);
    queued = llm_wread_f64(r);
    prompt = llm_wread_array(r, &n, sizeof(int32_t));
    if (r->bad || handle == 0 || llm_wire_get_params(r, &p, &strs) != 0) {
        free(strs);
        return -1;
    }
    if (c->retire == 2) {
        /* after its answer to the retirement: a client's mistake */
        free(strs);
        llm_server_refuse(c, handle, (int) n);
        return 0;
    }
    err[0] = '\0';
    lr = llm_request_create(s->e, prompt, (int) n, &p, err);
    free(strs);
    if (lr == NULL || llm_htab_get(&c->reqs, handle) != NULL) {
        llm_request_release(lr);
        llm_server_refuse(c, handle, (int) n);
        return 0;
    }
    q = malloc(sizeof(*q));
    if (q == NULL) {
        abort();
    }
    q->handle = handle;
    q->r = lr;
    q->c = c;
    llm_request_set_data(lr, q);
    llm_request_set_arrival(lr, arrival);
    llm_request_set_queued(lr, queued);
    llm_htab_put(&c->reqs, handle, q);
    s->n_reqs++;

    lq = leader ? llm_htab_get(&c->reqs, leader) : NULL;
    rc = lq ? llm_engine_submit_shared(s->e, lr, lq->r)
            : llm_engine_submit(s->e, lr);
    if (rc != 0) {
        llm_sreq_free(s, q);
        llm_server_refuse(c, handle, (int) n);
    }
    return 0;
}


/* The frames a client sent: -1 when it broke the protocol. */
static int
llm_sconn_frames(llm_server *s, llm_sconn *c)
{
    const uint8_t  *f;
    uint32_t        type;
    size_t          len;
    llm_wread       r;
    llm_sreq       *q;
    uint64_t        h;
    int             v;

    while ((f = llm_wbuf_frame(&c->in, &type, &len)) != NULL) {
        llm_wread_init(&r, f, len);
        switch (type) {
        case LLM_MSG_SUBMIT:
            if (llm_server_submit(s, c, &r) != 0) {
                return -1;
            }
            break;
        case LLM_MSG_CANCEL:
            h = llm_wread_u64(&r);
            v = (int) llm_wread_u32(&r);
            q = llm_htab_get(&c->reqs, h);
            if (q) {
                /* the client wants nothing more of it */
                llm_engine_cancel_billed(s->e, q->r, v);
                llm_sreq_free(s, q);
            }
            break;
        case LLM_MSG_PAUSE:
            h = llm_wread_u64(&r);
            v = (int) llm_wread_u32(&r);
            q = llm_htab_get(&c->reqs, h);
            if (q) {
                llm_engine_set_paused(s->e, q->r, v);
            }
            break;
        case LLM_MSG_RETIRE:
            if (c->retire != 1) {
                return -1;      /* an answer to nothing */
            }
            c->retire = 2;
            break;
        default:
            return -1;
        }
        if (r.bad) {
            return -1;
        }
    }
    return 0;
}


static void
llm_server_output(llm_request *lr, const llm_output *out, void *data)
{
    llm_server  *s = data;
    llm_sreq    *q = llm_request_data(lr);
    llm_sconn   *c;
    size_t       f;

    if (q == NULL) {
        return;
    }
    c = q->c;
    f = llm_wbuf_begin(&c->out, LLM_MSG_OUTPUT);
    llm_wbuf_u64(&c->out, q->handle);
    llm_wire_put_output(&c->out, f, out);
    llm_wbuf_end(&c->out, f);
    s->changed = 1;
    if (out->finish_reason != LLM_FINISH_NONE) {
        s->finished = 1;
        llm_sreq_free(s, q);
    }
}


static void
llm_server_accept(llm_server *s)
{
    struct ucred  cred;
    socklen_t     len;
    int           fd;

    for ( ;; ) {
        fd = accept4(s->lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) {
            return;
        }
        len = sizeof(cred);
        if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0
            || cred.uid != geteuid())
        {
            close(fd);          /* not one of ours */
            continue;
        }
        if (llm_server_add_client(s, fd) != 0) {
            close(fd);
        }
    }
}


int
llm_server_poll(llm_server *s, int timeout_ms, int extra_fd)
{
    uint64_t     count;
    llm_sconn   *c;
    int          i, j, n, first_conn, extra = 0;

    n = s->n_conns + 3;
    if (n > s->cap_pfd) {
        s->cap_pfd = n * 2;
        s->pfd = realloc(s->pfd, sizeof(struct pollfd) * s->cap_pfd);
        if (s->pfd == NULL) {
            abort();
        }
    }
    n = 0;
    s->pfd[n].fd = s->efd;
    s->pfd[n++].events = POLLIN;
    s->pfd[n].fd = extra_fd;
    s->pfd[n++].events = POLLIN;
    s->pfd[n].fd = s->e ? s->lfd : -1;
    s->pfd[n++].events = POLLIN;
    first_conn = n;
    for (i = 0; i < s->n_conns; i++) {
        c = s->conns[i];
        s->pfd[n].fd = c->fd;
        /* before the engine exists, clients wait in the socket buffers */
        s->pfd[n].events = (s->e ? POLLIN : 0)
                           | (c->out.off < c->out.len ? POLLOUT : 0);
        n++;
    }
    if (poll(s->pfd, (nfds_t) n, s->busy ? 0 : timeout_ms) < 0
        && errno != EINTR)
    {
        return 0;
    }
    if (s->pfd[1].fd >= 0 && (s->pfd[1].revents & (POLLIN | POLLHUP))) {
        extra = 1;
    }
    if (s->pfd[2].fd >= 0 && (s->pfd[2].revents & POLLIN)) {
        llm_server_accept(s);
    }
    for (i = 0; i < s->n_conns && first_conn + i < n; i++) {
        c = s->conns[i];
        if (s->pfd[first_conn + i].revents & (POLLIN | POLLHUP | POLLERR)) {
            switch (llm_wbuf_read(&c->in, c->fd)) {
            case 1:
                if (llm_sconn_frames(s, c) != 0) {
                    c->dead = 1;
                }
                s->changed = 1;
                break;
            default:
                (void) llm_sconn_frames(s, c);
                c->dead = 1;
            }
        }
    }
    if (s->pfd[0].revents & POLLIN) {
        while (read(s->efd, &count, sizeof(count)) == sizeof(count)) {
            /* void */
        }
        s->changed = 1;
    }
    if (s->e) {
        s->busy = llm_engine_run(s->e);
        s->finished = 0;
        llm_engine_drain(s->e, llm_server_output, s);
        if (s->finished
            || ((s->changed || s->n_reqs > 0)
                && llm_now() - s->stats_at >= s->stats_interval))
        {
            /* before the outputs: a reader of the stats who saw the
             * output finds it counted */
            llm_server_stats(s);
        }
    }
    for (i = 0, j = 0; i < s->n_conns; i++) {
        c = s->conns[i];
        if (!c->dead && c->out.off < c->out.len
            && llm_wbuf_write(&c->out, c->fd) < 0)
        {
            c->dead = 1;
        }
        if (c->dead) {
            llm_sconn_close(s, c);
            s->changed = 1;
            continue;
        }
        s->conns[j++] = c;
    }
    s->n_conns = j;
    return extra;
}


void
llm_server_free(llm_server *s)
{
    int  i;

    if (s == NULL) {
        return;
    }
    for (i = 0; i < s->n_conns; i++) {
        llm_sconn_close(s, s->conns[i]);
    }
    llm_server_close_listener(s);
    close(s->efd);
    free(s->conns);
    free(s->pfd);
    free(s->st);
    free(s);
}
