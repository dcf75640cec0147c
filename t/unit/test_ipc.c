/*
 * test_ipc.c -- the engine behind a socket (engine/ipc): a real tiny
 * engine served by llm_server on a thread, clients over unix sockets.
 * Greedy outputs through the wire equal the engine's own (text, ids,
 * logprob records, stop strings, prompt logprobs, parallel samples);
 * cancel (billed at what arrived), pause and resume, the death of either
 * end, and a retiring server: a request sent after the server retired but
 * before its client read so is served, and the server stops only once
 * every client has answered.
 */
#define _GNU_SOURCE
#include <math.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/socket.h>
#include <sys/un.h>

#include "llm.h"
#include "tap.h"
#include "engine_harness.h"

#define N_REQ     4
#define MAX_OUT   512

typedef struct {
    int32_t             ids[MAX_OUT];
    int                 n_ids;
    char                text[8192];
    size_t              text_len;
    llm_token_logprob   lp[MAX_OUT];
    int                 n_lp;
    int                 n_plp;
    float               plp0;
    llm_finish_reason   finish;
    char                stop_string[64];
    llm_request_stats   stats;
    int                 n_outputs;
    int                 done;
} result;

static char              model_dir[256];
static char              sock_name[108];
static volatile int      server_stop;
static volatile int      server_retire;     /* retire, stop when retired */
static volatile int      server_retiring;   /* it told its clients */
static volatile int      server_exited;
static pthread_mutex_t   st_mu = PTHREAD_MUTEX_INITIALIZER;
static llm_engine_stats  st_last;
static int               st_published;


static void
add_output(result *res, const llm_output *o)
{
    int  n = o->n_ids;

    if (res->n_ids + n > MAX_OUT) {
        n = MAX_OUT - res->n_ids;
    }
    memcpy(res->ids + res->n_ids, o->ids, sizeof(int32_t) * n);
    if (o->logprobs) {
        memcpy(res->lp + res->n_lp, o->logprobs,
               sizeof(llm_token_logprob) * n);
        res->n_lp += n;
    }
    res->n_ids += n;
    if (res->text_len + o->text_len < sizeof(res->text)) {
        memcpy(res->text + res->text_len, o->text, o->text_len);
        res->text_len += o->text_len;
    }
    if (o->prompt_logprobs) {
        res->n_plp = o->n_prompt_logprobs;
        res->plp0 = o->prompt_logprobs[0].logprob;
    }
    res->stats = o->stats;
    res->n_outputs++;
    if (o->finish_reason != LLM_FINISH_NONE) {
        res->finish = o->finish_reason;
        if (o->stop_string) {
            snprintf(res->stop_string, sizeof(res->stop_string), "%s",
                     o->stop_string);
        }
        res->done = 1;
    }
}


static void
on_direct(llm_request *r, const llm_output *o, void *data)
{
    result  *res = llm_request_data(r);
    waiter  *w = data;

    add_output(res, o);
    if (o->finish_reason != LLM_FINISH_NONE) {
        w->n_done++;
    }
}


static void
on_client(void *req, uint64_t h, const llm_output *o, void *data)
{
    result  *res = req;
    int     *n_done = data;

    add_output(res, o);
    if (o->finish_reason != LLM_FINISH_NONE) {
        (*n_done)++;
    }
}


/* the records' meaningful fields; logprobs up to f32 rounding (a step's
 * prefill batch decides the matmul tiles, and the two runs batch apart) */
static int
same_logprobs(const llm_token_logprob *a, const llm_token_logprob *b, int n)
{
    int  i, k;

    for (i = 0; i < n; i++) {
        if (a[i].id != b[i].id || a[i].n_top != b[i].n_top
            || fabsf(a[i].logprob - b[i].logprob) > 1e-4f)
        {
            return 0;
        }
        for (k = 0; k < a[i].n_top; k++) {
            if (a[i].top_ids[k] != b[i].top_ids[k]
                || fabsf(a[i].top_logprobs[k] - b[i].top_logprobs[k]) > 1e-4f)
            {
                return 0;
            }
        }
    }
    return 1;
}


static void
params_of(int i, const llm_model *m, llm_sampling_params *p)
{
    static const char  *stop[] = { "e" };

    llm_sampling_params_init(p, m);
    p->temperature = 0;
    p->max_tokens = 12 + 5 * i;
    p->ignore_eos = 1;
    if (i == 1) {
        p->logprobs = 2;
        /* structured output crosses the wire as its spec */
        p->structured = "{\"regex\":\"(yes|no|maybe)[.!]\"}";
    }
    if (i == 2) {
        p->stop = stop;
        p->n_stop = 1;
    }
    if (i == 3) {
        p->prompt_logprobs = 1;
    }
}


/* the server: its engine, a listening socket, then turns until told */

static void
on_stats(const llm_engine_stats *st, void *data)
{
    pthread_mutex_lock(&st_mu);
    st_last = *st;
    st_published++;
    pthread_mutex_unlock(&st_mu);
}


static void *
server_main(void *arg)
{
    char                 err[LLM_ERR_LEN];
    llm_server          *s;
    llm_engine          *e;
    llm_engine_config    cfg = { 0 };
    int                  lfd = *(int *) arg;

    s = llm_server_new(err);
    cfg.model_dir = model_dir;
    cfg.device = "cpu";
    cfg.threads = 2;
    cfg.max_model_len = 256;
    cfg.inline_loop = 1;        /* as the engine process runs it */
    e = llm_engine_create(&cfg, err);
    if (s == NULL || e == NULL) {
        tap_diag("server: %s", err);
        exit(1);
    }
    llm_server_on_stats(s, 0.05, on_stats, NULL);
    llm_server_attach(s, e, lfd);
    while (!server_stop) {
        llm_server_poll(s, 20, -1);
        if (server_retire) {
            llm_server_retire(s);
            server_retiring = 1;
            if (llm_server_retired(s)) {
                break;
            }
        }
    }
    server_exited = 1;
    llm_server_free(s);
    llm_engine_destroy(e);
    return NULL;
}


/* a server thread on the abstract socket sock_name */
static void
start_server(pthread_t *tid, int *lfd)
{
    struct sockaddr_un  sa;
    socklen_t           sl;

    *lfd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    memset(&sa, 0, sizeof(sa));
    sa.sun_family = AF_UNIX;
    memcpy(sa.sun_path, sock_name, sizeof(sa.sun_path));
    sl = offsetof(struct sockaddr_un, sun_path) + 1 + strlen(sock_name + 1);
    if (bind(*lfd, (struct sockaddr *) &sa, sl) != 0
        || listen(*lfd, 16) != 0)
    {
        perror("bind");
        exit(1);
    }
    server_stop = 0;
    server_retire = 0;
    server_retiring = 0;
    server_exited = 0;
    pthread_create(tid, NULL, server_main, lfd);
}


static llm_client *
connect_client(void)
{
    struct sockaddr_un  sa;
    socklen_t           len;
    int                 fd;

    fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    memset(&sa, 0, sizeof(sa));
    sa.sun_family = AF_UNIX;
    memcpy(sa.sun_path, sock_name, sizeof(sa.sun_path));
    len = offsetof(struct sockaddr_un, sun_path) + 1 + strlen(sock_name + 1);
    if (connect(fd, (struct sockaddr *) &sa, len) != 0) {
        perror("connect");
        exit(1);
    }
    return llm_client_new(fd);
}


/* one turn of the client: flush, wait at most ms, read; -1: server gone */
static int
client_turn(llm_client *c, int ms, int *n_done)
{
    struct pollfd  p;

    p.fd = llm_client_fd(c);
    p.events = POLLIN | (llm_client_flush(c) == 1 ? POLLOUT : 0);
    if (poll(&p, 1, ms) > 0 && (p.revents & (POLLIN | POLLHUP | POLLERR))) {
        return llm_client_read(c, on_client, n_done);
    }
    return 0;
}


static void
stats_now(llm_engine_stats *st)
{
    pthread_mutex_lock(&st_mu);
    *st = st_last;
    pthread_mutex_unlock(&st_mu);
}


static uint64_t
finished_total(const llm_engine_stats *st)
{
    uint64_t  n = 0;
    int       i;

    for (i = 0; i <= LLM_FINISH_ERROR; i++) {
        n += st->request_success_total[i];
    }
    return n;
}


/* waits up to 5 s for the published stats to show nothing running and at
 * least n_finished requests finished */
static int
wait_idle(llm_client *c, int *n_done, uint64_t n_finished)
{
    llm_engine_stats  st;
    int               i;

    for (i = 0; i < 250; i++) {
        if (c) {
            client_turn(c, 20, n_done);
        } else {
            usleep(20000);
        }
        stats_now(&st);
        if (st.num_running == 0 && st.num_waiting == 0
            && st.kv_cache_usage == 0 && finished_total(&st) >= n_finished)
        {
            return 1;
        }
    }
    return 0;
}


int
main(void)
{
    char                 err[LLM_ERR_LEN], tmpl[] = "/tmp/llm-test-ipc-XXXXXX";
    char                 cmd[300];
    llm_engine_config    cfg = { 0 };
    llm_engine_stats     st0, st;
    llm_sampling_params  p;
    llm_request         *r[N_REQ + 2];
    llm_model           *m;
    llm_engine          *e;
    llm_client          *c, *c2;
    pthread_t            tid;
    waiter               w;
    uint64_t             hc, lead;
    int32_t              prompt[N_REQ][24];
    static result        direct[N_REQ + 2], wire[N_REQ + 2], res, res2;
    int                  i, ok, lfd, n_done, rc, billed;

    if (mkdtemp(tmpl) == NULL) {
        return 1;
    }
    snprintf(model_dir, sizeof(model_dir), "%s/model", tmpl);
    if (harness_make_model(model_dir, "") != 0) {
        tap_ok(0, "make a test model");
        return tap_done();
    }
    m = llm_model_load(model_dir, err);
    tap_ok(m != NULL, "the model's metadata loads without an engine");

    /* the reference: the engine itself */
    cfg.model_dir = model_dir;
    cfg.max_model_len = 256;
    e = harness_engine(&w, &cfg);
    for (i = 0; i < N_REQ; i++) {
        harness_prompt(i, prompt[i], 8 + i);
        params_of(i, m, &p);
        tap_ok(llm_request_validate(m, 256, prompt[i], 8 + i, &p, err) == 0,
               "request %d validates without an engine", i);
        r[i] = llm_request_create(e, prompt[i], 8 + i, &p, err);
        llm_request_set_data(r[i], &direct[i]);
        llm_engine_submit(e, r[i]);
    }
    /* two samples of one prompt, the second sharing the first's prefill */
    params_of(0, m, &p);
    p.n = 2;
    for (i = N_REQ; i < N_REQ + 2; i++) {
        p.seq_index = i - N_REQ;
        r[i] = llm_request_create(e, prompt[0], 8, &p, err);
        llm_request_set_data(r[i], &direct[i]);
        if (i == N_REQ) {
            llm_engine_submit(e, r[i]);
        } else {
            llm_engine_submit_shared(e, r[i], r[N_REQ]);
        }
    }
    harness_wait_all(e, &w, N_REQ + 2, on_direct);
    tap_ok(direct[1].text_len >= 3 && direct[1].text_len <= 6
           && (strncmp(direct[1].text, "yes", 3) == 0
               || strncmp(direct[1].text, "no", 2) == 0
               || strncmp(direct[1].text, "maybe", 5) == 0)
           && (direct[1].text[direct[1].text_len - 1] == '.'
               || direct[1].text[direct[1].text_len - 1] == '!'),
           "the regex-constrained request wrote '%.*s'",
           (int) direct[1].text_len, direct[1].text);
    for (i = 0; i < N_REQ + 2; i++) {
        llm_request_release(r[i]);
    }
    llm_engine_destroy(e);
    sem_destroy(&w.sem);

    tap_ok(llm_request_validate(m, 256, prompt[0], 0, &p, err) != 0,
           "an empty prompt does not validate: %s", err);
    p.temperature = -1;
    tap_ok(llm_request_validate(m, 256, prompt[0], 8, &p, err) != 0,
           "a negative temperature does not validate: %s", err);

    /* the server on an abstract socket */
    snprintf(sock_name + 1, sizeof(sock_name) - 1, "llm-test-ipc-%d",
             (int) getpid());
    start_server(&tid, &lfd);

    /* a client connects while the model loads and waits for the hello */
    c = connect_client();
    n_done = 0;
    for (i = 0; i < 500 && !llm_client_ready(c); i++) {
        client_turn(c, 20, &n_done);
    }
    tap_ok(llm_client_ready(c) && llm_client_max_model_len(c) == 256
           && strcmp(llm_client_device(c), "cpu") == 0,
           "the hello: max_model_len %d, device %s",
           llm_client_max_model_len(c), llm_client_device(c));

    /* the same requests through the wire, all at once */
    for (i = 0; i < N_REQ; i++) {
        params_of(i, m, &p);
        (void) llm_client_submit(c, prompt[i], 8 + i, &p, llm_now(), 0, 0,
                                 &wire[i]);
    }
    params_of(0, m, &p);
    p.n = 2;
    p.seq_index = 0;
    lead = llm_client_submit(c, prompt[0], 8, &p, llm_now(), 0, 0, &wire[N_REQ]);
    p.seq_index = 1;
    (void) llm_client_submit(c, prompt[0], 8, &p, llm_now(), 0, lead,
                                     &wire[N_REQ + 1]);
    for (i = 0; i < 1000 && n_done < N_REQ + 2; i++) {
        client_turn(c, 20, &n_done);
    }
    tap_ok(n_done == N_REQ + 2, "every request finished through the wire");
    for (i = 0; i < N_REQ + 2; i++) {
        ok = wire[i].n_ids == direct[i].n_ids
             && memcmp(wire[i].ids, direct[i].ids,
                       sizeof(int32_t) * direct[i].n_ids) == 0
             && wire[i].text_len == direct[i].text_len
             && memcmp(wire[i].text, direct[i].text, direct[i].text_len) == 0
             && wire[i].finish == direct[i].finish
             && strcmp(wire[i].stop_string, direct[i].stop_string) == 0
             && wire[i].n_lp == direct[i].n_lp
             && same_logprobs(wire[i].lp, direct[i].lp, direct[i].n_lp)
             && wire[i].n_plp == direct[i].n_plp
             && fabsf(wire[i].plp0 - direct[i].plp0) < 1e-4f
             && wire[i].stats.completion_tokens
                == direct[i].stats.completion_tokens
             && wire[i].stats.prompt_tokens == direct[i].stats.prompt_tokens;
        tap_ok(ok, "request %d: the wire's output equals the engine's "
               "(%d ids, %zu bytes, finish %s%s%s)", i, wire[i].n_ids,
               wire[i].text_len, llm_finish_reason_str(wire[i].finish),
               wire[i].n_lp ? ", logprobs" : "",
               wire[i].n_plp ? ", prompt logprobs" : "");
    }
    tap_ok(wire[N_REQ + 1].stats.cached_tokens
           == direct[N_REQ + 1].stats.cached_tokens,
           "the second sample shared the first's prefill as in the engine "
           "(%d cached)", wire[N_REQ + 1].stats.cached_tokens);
    tap_ok(wait_idle(c, &n_done, N_REQ + 2),
           "the stats went out: %d finished, nothing runs", N_REQ + 2);
    stats_now(&st0);

    /* cancel: billed at what arrived, nothing after it */
    params_of(0, m, &p);
    p.max_tokens = 200;
    memset(&res, 0, sizeof(res));
    n_done = 0;
    hc = llm_client_submit(c, prompt[0], 8, &p, llm_now(), 0, 0, &res);
    for (i = 0; i < 500 && res.n_ids < 3; i++) {
        client_turn(c, 20, &n_done);
    }
    billed = res.n_ids;
    llm_client_cancel(c, hc, billed);
    tap_ok(wait_idle(c, &n_done, finished_total(&st0) + 1),
           "a cancelled request frees its blocks");
    stats_now(&st);
    tap_ok(res.n_ids == billed && n_done == 0,
           "no output after the cancel (%d tokens)", billed);
    tap_ok(st.generation_tokens_total - st0.generation_tokens_total
           == (uint64_t) billed
           && st.request_success_total[LLM_FINISH_ABORT]
              == st0.request_success_total[LLM_FINISH_ABORT] + 1,
           "the engine counts the %d tokens billed (%llu), one abort",
           billed, (unsigned long long) (st.generation_tokens_total
                                         - st0.generation_tokens_total));

    /* pause and resume: the output is the one without a pause */
    params_of(3, m, &p);
    memset(&res, 0, sizeof(res));
    n_done = 0;
    hc = llm_client_submit(c, prompt[3], 11, &p, llm_now(), 0, 0, &res);
    for (i = 0; i < 500 && res.n_ids < 2; i++) {
        client_turn(c, 20, &n_done);
    }
    llm_client_set_paused(c, hc, 1);
    for (i = 0; i < 10; i++) {
        client_turn(c, 20, &n_done);
    }
    billed = res.n_ids;
    for (i = 0; i < 15; i++) {
        client_turn(c, 20, &n_done);
    }
    tap_ok(res.n_ids == billed && !res.done,
           "paused: no tokens for 300 ms (%d so far)", res.n_ids);
    llm_client_set_paused(c, hc, 0);
    for (i = 0; i < 1000 && !res.done; i++) {
        client_turn(c, 20, &n_done);
    }
    tap_ok(res.done && res.n_ids == direct[3].n_ids
           && memcmp(res.ids, direct[3].ids,
                     sizeof(int32_t) * res.n_ids) == 0,
           "resumed: the same %d tokens as without the pause", res.n_ids);

    /* a client that dies mid-request: the engine lets go of its requests */
    c2 = connect_client();
    memset(&res2, 0, sizeof(res2));
    n_done = 0;
    params_of(0, m, &p);
    p.max_tokens = 200;
    for (i = 0; i < 500 && !llm_client_ready(c2); i++) {
        client_turn(c2, 20, &n_done);
    }
    llm_client_submit(c2, prompt[0], 8, &p, llm_now(), 0, 0, &res2);
    llm_client_submit(c2, prompt[1], 9, &p, llm_now(), 0, 0, &res);
    for (i = 0; i < 500 && res2.n_ids < 2; i++) {
        client_turn(c2, 20, &n_done);
    }
    for (i = 0; i < 250; i++) {
        client_turn(c2, 20, &n_done);
        stats_now(&st);
        if (st.num_running == 2) {
            break;
        }
    }
    tap_ok(res2.n_ids >= 2 && st.num_running == 2,
           "a second client runs two requests");
    stats_now(&st0);
    llm_client_free(c2);
    tap_ok(wait_idle(c, &n_done, finished_total(&st0) + 2),
           "its socket closed: the engine cancelled both, every KV block "
           "free");

    /* the other clients go on */
    memset(&res, 0, sizeof(res));
    params_of(2, m, &p);
    llm_client_submit(c, prompt[2], 10, &p, llm_now(), 0, 0, &res);
    for (i = 0; i < 1000 && !res.done; i++) {
        client_turn(c, 20, &n_done);
    }
    tap_ok(res.done && res.text_len == direct[2].text_len
           && memcmp(res.text, direct[2].text, res.text_len) == 0,
           "the first client is still served");

    /* the server dies: the client sees it */
    memset(&res, 0, sizeof(res));
    p.max_tokens = 200;
    llm_client_submit(c, prompt[2], 10, &p, llm_now(), 0, 0, &res);
    for (i = 0; i < 200 && res.n_ids < 1; i++) {
        client_turn(c, 20, &n_done);
    }
    server_stop = 1;
    pthread_join(tid, NULL);
    rc = 0;
    for (i = 0; i < 100 && rc == 0; i++) {
        rc = client_turn(c, 20, &n_done);
    }
    tap_ok(rc == -1 && !res.done, "the server gone: the client reads -1");
    llm_client_free(c);

    /*
     * A retiring server (a reload changed the engine's settings): it tells
     * its clients to submit no more.  A request one sent before it read
     * that is still served, and the server stops only once every client
     * has answered -- so nothing a worker sends is lost with the engine.
     */
    start_server(&tid, &lfd);
    c = connect_client();
    c2 = connect_client();
    for (i = 0; i < 500 && !(llm_client_ready(c) && llm_client_ready(c2));
         i++)
    {
        client_turn(c, 10, &n_done);
        client_turn(c2, 10, &n_done);
    }
    server_retire = 1;
    for (i = 0; i < 500 && !server_retiring; i++) {
        usleep(10000);
    }
    usleep(200000);
    tap_ok(server_retiring && !server_exited && !llm_client_retiring(c),
           "retiring, nothing in flight: the server waits for its clients' "
           "answers");
    memset(&res, 0, sizeof(res));
    params_of(3, m, &p);
    (void) llm_client_submit(c, prompt[3], 11, &p, llm_now(), 0, 0, &res);
    n_done = 0;
    for (i = 0; i < 1000 && !res.done; i++) {
        client_turn(c, 20, &n_done);
    }
    tap_ok(res.done && llm_client_retiring(c)
           && res.n_ids == direct[3].n_ids
           && memcmp(res.ids, direct[3].ids,
                     sizeof(int32_t) * res.n_ids) == 0,
           "a request sent before its client read the retirement is served "
           "(%d tokens), and the client learns it retires", res.n_ids);
    usleep(100000);
    tap_ok(!server_exited, "a client that has not answered keeps the server");
    rc = 0;
    for (i = 0; i < 100 && rc == 0; i++) {
        rc = client_turn(c2, 20, &n_done);
    }
    tap_ok(rc == -1 && llm_client_retiring(c2) && server_exited,
           "its answer sent, the server stops and its clients read -1");
    rc = 0;
    for (i = 0; i < 100 && rc == 0; i++) {
        rc = client_turn(c, 20, &n_done);
    }
    tap_ok(rc == -1, "so does the first client");
    pthread_join(tid, NULL);
    llm_client_free(c);
    llm_client_free(c2);
    tap_ok(st_published > 0, "the server published its stats (%d times)",
           st_published);

    llm_model_free(m);
    snprintf(cmd, sizeof(cmd), "rm -rf %s", tmpl);
    if (system(cmd) != 0) {
        /* a leftover temporary directory */
    }
    return tap_done();
}
