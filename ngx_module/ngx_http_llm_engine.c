
/*
 * ngx_http_llm_engine.c -- one engine per nginx instance: the engine
 * process and the control block that every worker shares.
 *
 * The engine runs in a process of its own, forked twice from the worker
 * that starts it (so that it is nobody's child in nginx and outlives the
 * workers across reloads).  It serves the workers over a unix socket in
 * the abstract namespace (engine/ipc: llm_server) and watches the master:
 * when the master is gone, so is the engine.
 *
 * The control block, in the shared memory zone "llm_engine" (kept across
 * reloads: same name, size and tag), says which engine runs: its pid, its
 * generation, the fingerprint of the settings it was started with, its
 * state and why, its socket, the restart back-off, and the engine's stats
 * (written by the engine process under a sequence lock, read by /metrics
 * in any worker).
 *
 *   worker                       control block          engine process
 *   ngx_http_llm_engine_find()   lock; engine alive and
 *                                same settings: its
 *                                socket -> connect
 *                                none: spawn (bind,
 *                                listen, fork, fork)  ->  llm_engine_create()
 *                                                         READY, serve
 *                                other settings:
 *                                RETIRING, wait       ->  closes its listener,
 *                                                         tells each worker
 *                                                         "submit no more"
 *   (llm_client_retiring: new                         <-  exits when each has
 *   requests wait, answers)                               answered and its
 *                                                         requests are done
 */


#include "ngx_http_llm_module.h"

#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <dirent.h>


#define NGX_HTTP_LLM_ENGINE_NONE        0
#define NGX_HTTP_LLM_ENGINE_STARTING    1
#define NGX_HTTP_LLM_ENGINE_READY       2
#define NGX_HTTP_LLM_ENGINE_FAILED      3
#define NGX_HTTP_LLM_ENGINE_RETIRING    4

#define NGX_HTTP_LLM_BACKOFF_MIN        0.5     /* s, doubling */
#define NGX_HTTP_LLM_BACKOFF_MAX        30.0
#define NGX_HTTP_LLM_BACKOFF_RESET      60.0    /* ran this long: a fresh start */
#define NGX_HTTP_LLM_STATS_INTERVAL     0.05
#define NGX_HTTP_LLM_RETIRE_WAIT        10.0    /* s, for the workers'
                                                   answers */


typedef struct {
    ngx_pid_t                   pid;           /* 0: none */
    ngx_uint_t                  generation;
    ngx_uint_t                  newest;        /* the newest configuration
                                                  a worker runs (serial) */
    uint64_t                    newest_model;  /* ... its model and build */
    uint64_t                    fingerprint;
    ngx_uint_t                  state;
    char                        reason[LLM_ERR_LEN];
    int                         max_model_len;
    u_char                      sock[64];      /* abstract: sock[0] = '\0' */
    size_t                      sock_len;

    /* restart back-off */
    ngx_uint_t                  failures;
    double                      spawned;       /* llm_now() */
    double                      ready_at;
    double                      next_spawn;

    /* the engine's stats: odd while the engine process writes them */
    ngx_atomic_t                stats_seq;
    ngx_uint_t                  stats_generation;
    llm_engine_stats            stats;
} ngx_http_llm_engine_sh_t;


static uint64_t ngx_http_llm_engine_fingerprint(
    ngx_http_llm_main_conf_t *lmcf, ngx_uint_t settings);
static ngx_int_t ngx_http_llm_engine_old(ngx_http_llm_main_conf_t *lmcf,
    ngx_http_llm_engine_sh_t *sh, char *err);
static ngx_uint_t ngx_http_llm_engine_alive(ngx_pid_t pid);
static void ngx_http_llm_engine_gone(ngx_http_llm_engine_sh_t *sh, double now,
    ngx_uint_t failed_start, const char *why);
static ngx_int_t ngx_http_llm_engine_spawn(ngx_cycle_t *cycle,
    ngx_http_llm_main_conf_t *lmcf, ngx_http_llm_engine_sh_t *sh,
    uint64_t fp);
static void ngx_http_llm_engine_process(ngx_cycle_t *cycle,
    ngx_http_llm_main_conf_t *lmcf, int lfd, ngx_pid_t master,
    ngx_uint_t generation) __attribute__((noreturn));
static void ngx_http_llm_engine_close_fds(ngx_cycle_t *cycle, int keep);
static void ngx_http_llm_engine_publish(const llm_engine_stats *st,
    void *data);


static ngx_shm_zone_t  *ngx_http_llm_engine_zone;


ngx_int_t
ngx_http_llm_engine_add_zone(ngx_conf_t *cf)
{
    ngx_str_t  name = ngx_string("llm_engine");

    /* a reload keeps the running engine's block */
    ngx_http_llm_engine_zone = ngx_http_llm_struct_zone_add(cf, &name,
                                       sizeof(ngx_http_llm_engine_sh_t));

    return ngx_http_llm_engine_zone ? NGX_OK : NGX_ERROR;
}


static ngx_shmtx_t *
ngx_http_llm_engine_mutex(void)
{
    return &((ngx_slab_pool_t *) ngx_http_llm_engine_zone->shm.addr)->mutex;
}


/*
 * Where this worker's engine is.  NGX_OK: connect to *where (the running
 * engine, or one just spawned); NGX_AGAIN: not yet (an engine with other
 * settings retires, or the back-off), ask again in *delay ms; NGX_DECLINED:
 * the engine failed (the reason in err), ask again in *delay ms; NGX_BUSY:
 * a reload made this worker's configuration old and changed its model: no
 * engine will serve it (the reason in err).
 */

ngx_int_t
ngx_http_llm_engine_find(ngx_cycle_t *cycle, ngx_http_llm_main_conf_t *lmcf,
    ngx_http_llm_engine_where_t *where, ngx_msec_t *delay, char *err)
{
    double                     now;
    uint64_t                   fp;
    ngx_int_t                  rc;
    ngx_http_llm_engine_sh_t  *sh;

    if (ngx_http_llm_engine_zone == NULL
        || ngx_http_llm_engine_zone->data == NULL)
    {
        ngx_cpystrn((u_char *) err, (u_char *) "no engine zone", LLM_ERR_LEN);
        *delay = 1000;
        return NGX_DECLINED;
    }

    sh = ngx_http_llm_engine_zone->data;
    fp = ngx_http_llm_engine_fingerprint(lmcf, 1);
    now = llm_now();
    *delay = 100;

    ngx_shmtx_lock(ngx_http_llm_engine_mutex());

    if (lmcf->serial > sh->newest) {
        sh->newest = lmcf->serial;
        sh->newest_model = ngx_http_llm_engine_fingerprint(lmcf, 0);
    }

    if (sh->pid && !ngx_http_llm_engine_alive(sh->pid)) {
        ngx_log_error(NGX_LOG_WARN, cycle->log, 0,
                      "llm: the engine process %P is gone", sh->pid);
        /* died while loading: a start that failed (503 with the reason
         * until one works); died serving: a crash (requests wait) */
        ngx_http_llm_engine_gone(sh, now,
                                 sh->state == NGX_HTTP_LLM_ENGINE_STARTING,
                                 sh->state == NGX_HTTP_LLM_ENGINE_STARTING
                                 ? "the engine process exited while it "
                                   "loaded the model"
                                 : "the engine process exited");
    }

    if (lmcf->serial < sh->newest
        && (sh->pid == 0 || sh->fingerprint != fp))
    {
        rc = ngx_http_llm_engine_old(lmcf, sh, err);

        if (rc == NGX_OK) {
            goto found;
        }

        ngx_shmtx_unlock(ngx_http_llm_engine_mutex());
        return rc;
    }

    if (sh->pid) {

        if (sh->state == NGX_HTTP_LLM_ENGINE_RETIRING) {
            rc = NGX_AGAIN;

        } else if (sh->fingerprint != fp) {
            /* other settings: the old engine goes first, so that a device
             * never holds two KV pools */
            sh->state = NGX_HTTP_LLM_ENGINE_RETIRING;
            ngx_log_error(NGX_LOG_NOTICE, cycle->log, 0,
                          "llm: the engine settings changed: the engine "
                          "process %P retires when its requests are done, "
                          "then a new one starts", sh->pid);
            rc = NGX_AGAIN;

        } else {
            goto found;
        }

        ngx_shmtx_unlock(ngx_http_llm_engine_mutex());
        return rc;
    }

    if (now < sh->next_spawn) {
        /* the back-off after a failure */
        *delay = (ngx_msec_t) ((sh->next_spawn - now) * 1000) + 1;
        rc = NGX_AGAIN;

        if (sh->state == NGX_HTTP_LLM_ENGINE_FAILED) {
            ngx_cpystrn((u_char *) err, (u_char *) sh->reason, LLM_ERR_LEN);
            rc = NGX_DECLINED;
        }

        ngx_shmtx_unlock(ngx_http_llm_engine_mutex());
        return rc;
    }

    rc = ngx_http_llm_engine_spawn(cycle, lmcf, sh, fp);

    if (rc == NGX_OK) {
        where->generation = sh->generation;
        where->pid = sh->pid;
        where->spawned = 1;
        where->started = sh->spawned;
        where->sock_len = sh->sock_len;
        ngx_memcpy(where->sock, sh->sock, sh->sock_len);

    } else {
        ngx_cpystrn((u_char *) err, (u_char *) sh->reason, LLM_ERR_LEN);
        *delay = 1000;
        rc = NGX_DECLINED;
    }

    ngx_shmtx_unlock(ngx_http_llm_engine_mutex());

    return rc;

found:

    where->generation = sh->generation;
    where->spawned = 0;
    where->started = sh->spawned;
    where->pid = sh->pid;
    where->sock_len = sh->sock_len;
    ngx_memcpy(where->sock, sh->sock, sh->sock_len);

    ngx_shmtx_unlock(ngx_http_llm_engine_mutex());

    return NGX_OK;
}


/*
 * A worker of an old configuration (a newer one's worker has asked) whose
 * engine retires or is gone: after a reload that changed the engine
 * settings, in the moments before the master tells it to quit.  It neither
 * retires nor starts an engine -- one with its old settings would make the
 * new workers retire it in turn -- but, the model being the same, its
 * requests are served by the new workers' engine (NGX_OK once it runs,
 * NGX_AGAIN meanwhile); a new model cannot serve them (NGX_BUSY).
 * Under the lock.
 */

static ngx_int_t
ngx_http_llm_engine_old(ngx_http_llm_main_conf_t *lmcf,
    ngx_http_llm_engine_sh_t *sh, char *err)
{
    if (ngx_http_llm_engine_fingerprint(lmcf, 0) != sh->newest_model) {
        ngx_cpystrn((u_char *) err,
                    (u_char *) "a reload changed the model: this worker of "
                    "the old configuration exits, the new ones serve",
                    LLM_ERR_LEN);
        return NGX_BUSY;
    }

    if (sh->pid == 0 || sh->state != NGX_HTTP_LLM_ENGINE_READY) {
        return NGX_AGAIN;
    }

    return NGX_OK;
}


/*
 * Whether the engine of a generation retires (a reload changed its
 * settings): it takes no new requests, which wait for the next one.
 */

ngx_uint_t
ngx_http_llm_engine_retiring(ngx_uint_t generation)
{
    ngx_uint_t                 retiring;
    ngx_http_llm_engine_sh_t  *sh;

    if (ngx_http_llm_engine_zone == NULL
        || ngx_http_llm_engine_zone->data == NULL)
    {
        return 0;
    }

    sh = ngx_http_llm_engine_zone->data;

    ngx_shmtx_lock(ngx_http_llm_engine_mutex());

    retiring = sh->generation == generation
               && sh->state == NGX_HTTP_LLM_ENGINE_RETIRING;

    ngx_shmtx_unlock(ngx_http_llm_engine_mutex());

    return retiring;
}


/* why the engine of a generation is not there (after its socket closed) */

void
ngx_http_llm_engine_reason(ngx_uint_t generation, char *err)
{
    ngx_http_llm_engine_sh_t  *sh;

    sh = ngx_http_llm_engine_zone->data;

    ngx_shmtx_lock(ngx_http_llm_engine_mutex());

    if (sh->generation == generation && sh->pid == 0
        && sh->reason[0] != '\0')
    {
        ngx_cpystrn((u_char *) err, (u_char *) sh->reason, LLM_ERR_LEN);

    } else {
        ngx_cpystrn((u_char *) err, (u_char *) "the engine process exited",
                    LLM_ERR_LEN);
    }

    ngx_shmtx_unlock(ngx_http_llm_engine_mutex());
}


/* the engine's stats as its process last published them */

ngx_int_t
ngx_http_llm_engine_stats(llm_engine_stats *st)
{
    ngx_atomic_uint_t          s1, s2;
    ngx_http_llm_engine_sh_t  *sh;

    if (ngx_http_llm_engine_zone == NULL
        || ngx_http_llm_engine_zone->data == NULL)
    {
        return NGX_DECLINED;
    }

    sh = ngx_http_llm_engine_zone->data;

    for ( ;; ) {
        s1 = __atomic_load_n(&sh->stats_seq, __ATOMIC_ACQUIRE);

        if (s1 & 1) {
            ngx_cpu_pause();
            continue;
        }

        ngx_memcpy(st, &sh->stats, sizeof(llm_engine_stats));

        __atomic_thread_fence(__ATOMIC_ACQUIRE);
        s2 = __atomic_load_n(&sh->stats_seq, __ATOMIC_RELAXED);

        if (s1 == s2) {
            return s1 ? NGX_OK : NGX_DECLINED;
        }
    }
}


/* the engine process: the only writer */

static void
ngx_http_llm_engine_publish(const llm_engine_stats *st, void *data)
{
    ngx_http_llm_engine_sh_t  *sh = data;

    __atomic_store_n(&sh->stats_seq, sh->stats_seq + 1, __ATOMIC_RELAXED);
    __atomic_thread_fence(__ATOMIC_RELEASE);

    ngx_memcpy(&sh->stats, st, sizeof(llm_engine_stats));

    __atomic_store_n(&sh->stats_seq, sh->stats_seq + 1, __ATOMIC_RELEASE);
}


/* FNV-1a over every setting the engine is created with */

static uint64_t
ngx_http_llm_engine_fingerprint(ngx_http_llm_main_conf_t *lmcf,
    ngx_uint_t settings)
{
    u_char     *p;
    uint64_t    h;
    size_t      i;
    u_char      buf[1024];

    /* the model and the build; settings: and every engine setting */

    p = ngx_snprintf(buf, sizeof(buf), "%V|%d|%uz|%uz|%uz", &lmcf->model,
                     LLM_WIRE_VERSION, sizeof(llm_sampling_params),
                     sizeof(llm_output), sizeof(llm_engine_stats));

    if (settings) {
        p = ngx_snprintf(p, buf + sizeof(buf) - p,
                         "|%V|%V|%i|%i|%i|%i|%O|%V|%i|%i|%i|%i",
                         &lmcf->device, &lmcf->weights, lmcf->threads,
                         lmcf->max_model_len, lmcf->max_num_seqs,
                         lmcf->max_num_batched_tokens, lmcf->kv_cache_size,
                         &lmcf->gpu_memory_utilization,
                         lmcf->enable_prefix_caching, lmcf->spec_tokens,
                         lmcf->spec_lookup_min, lmcf->spec_lookup_max);
    }

    h = 0xcbf29ce484222325ULL;

    for (i = 0; i < (size_t) (p - buf); i++) {
        h ^= buf[i];
        h *= 0x100000001b3ULL;
    }

    return h;
}


/* alive: the pid exists and is not a zombie nobody reaped */

static ngx_uint_t
ngx_http_llm_engine_alive(ngx_pid_t pid)
{
    int      fd;
    char    *s;
    ssize_t  n;
    char     path[64], buf[256];

    if (kill(pid, 0) == -1 && ngx_errno == ESRCH) {
        return 0;
    }

    ngx_sprintf((u_char *) path, "/proc/%P/stat%Z", pid);

    fd = open(path, O_RDONLY);
    if (fd == -1) {
        return 1;
    }

    n = read(fd, buf, sizeof(buf) - 1);
    close(fd);

    if (n <= 0) {
        return 1;
    }

    buf[n] = '\0';

    /* "pid (comm) S ...": the state after the last ')' */
    s = strrchr(buf, ')');

    return !(s && s[1] == ' ' && (s[2] == 'Z' || s[2] == 'X'));
}


/*
 * The engine is gone (under the lock): a crash or a failed start counts
 * for the back-off, 0.5 s doubling up to 30 s since its start; an engine
 * that ran a minute starts afresh.  After a failed start the API answers
 * 503 with the reason until a start works; after a crash requests wait
 * for the next engine.
 */

static void
ngx_http_llm_engine_gone(ngx_http_llm_engine_sh_t *sh, double now,
    ngx_uint_t failed_start, const char *why)
{
    double  backoff;

    if (sh->state == NGX_HTTP_LLM_ENGINE_RETIRING) {
        /* it finished its requests and left: no failure */
        sh->pid = 0;
        sh->state = NGX_HTTP_LLM_ENGINE_NONE;
        sh->failures = 0;
        sh->next_spawn = 0;
        return;
    }

    if (sh->ready_at > 0 && now - sh->ready_at >= NGX_HTTP_LLM_BACKOFF_RESET)
    {
        sh->failures = 0;
    }

    sh->failures++;

    backoff = NGX_HTTP_LLM_BACKOFF_MIN;

    while (backoff < NGX_HTTP_LLM_BACKOFF_MAX
           && (ngx_uint_t) (backoff / NGX_HTTP_LLM_BACKOFF_MIN)
              < (1u << ngx_min(sh->failures - 1, 16)))
    {
        backoff *= 2;
    }

    backoff = ngx_min(backoff, NGX_HTTP_LLM_BACKOFF_MAX);

    sh->next_spawn = sh->spawned + backoff;
    sh->pid = 0;

    if (why != sh->reason) {
        ngx_cpystrn((u_char *) sh->reason, (u_char *) why, LLM_ERR_LEN);
    }

    sh->state = failed_start ? NGX_HTTP_LLM_ENGINE_FAILED
                             : NGX_HTTP_LLM_ENGINE_NONE;
}


/*
 * Under the lock: a listening socket, then a double fork; the grandchild
 * is the engine process, whose pid the child writes into the control
 * block before it exits.
 */

static ngx_int_t
ngx_http_llm_engine_spawn(ngx_cycle_t *cycle, ngx_http_llm_main_conf_t *lmcf,
    ngx_http_llm_engine_sh_t *sh, uint64_t fp)
{
    int                  lfd;
    pid_t                pid, child;
    u_char              *p;
    sigset_t             set, old;
    socklen_t            len;
    ngx_pid_t            master;
    ngx_uint_t           generation;
    struct sockaddr_un   sa;

    master = ngx_process == NGX_PROCESS_SINGLE ? ngx_pid : getppid();
    generation = sh->generation + 1;

    ngx_memzero(&sa, sizeof(sa));
    sa.sun_family = AF_UNIX;
    p = ngx_snprintf((u_char *) sa.sun_path + 1, sizeof(sa.sun_path) - 1,
                     "ngx_llm.%P.%ui", master, generation);
    len = offsetof(struct sockaddr_un, sun_path) + (p - (u_char *) sa.sun_path);

    lfd = socket(AF_UNIX, SOCK_STREAM|SOCK_CLOEXEC, 0);
    if (lfd == -1) {
        ngx_snprintf((u_char *) sh->reason, LLM_ERR_LEN,
                     "socket() failed: %s%Z", strerror(ngx_errno));
        return NGX_ERROR;
    }

    if (bind(lfd, (struct sockaddr *) &sa, len) == -1
        || listen(lfd, 511) == -1)
    {
        ngx_snprintf((u_char *) sh->reason, LLM_ERR_LEN,
                     "bind() or listen() of the engine's socket failed: "
                     "%s%Z", strerror(ngx_errno));
        close(lfd);
        return NGX_ERROR;
    }

    sh->generation = generation;
    sh->fingerprint = fp;
    sh->state = NGX_HTTP_LLM_ENGINE_STARTING;
    sh->reason[0] = '\0';
    sh->spawned = llm_now();
    sh->ready_at = 0;
    sh->max_model_len = 0;
    sh->sock_len = p - (u_char *) sa.sun_path;
    ngx_memcpy(sh->sock, sa.sun_path, sh->sock_len);
    sh->pid = 0;

    /* the child is reaped here, not by nginx's SIGCHLD handler */
    sigemptyset(&set);
    sigaddset(&set, SIGCHLD);
    sigprocmask(SIG_BLOCK, &set, &old);

    child = fork();

    if (child == 0) {
        pid = fork();

        if (pid == 0) {
            ngx_http_llm_engine_process(cycle, lmcf, lfd, master, generation);
        }

        sh->pid = pid > 0 ? pid : 0;
        _exit(0);
    }

    if (child > 0) {
        while (waitpid(child, NULL, 0) == -1 && ngx_errno == NGX_EINTR) {
            /* void */
        }
    }

    sigprocmask(SIG_SETMASK, &old, NULL);
    close(lfd);

    if (child == -1 || sh->pid == 0) {
        ngx_snprintf((u_char *) sh->reason, LLM_ERR_LEN,
                     "fork() failed: %s%Z", strerror(ngx_errno));
        sh->state = NGX_HTTP_LLM_ENGINE_FAILED;
        return NGX_ERROR;
    }

    ngx_log_error(NGX_LOG_NOTICE, cycle->log, 0,
                  "llm: worker %P started the engine process %P "
                  "(generation %ui)", ngx_pid, sh->pid, generation);

    return NGX_OK;
}


/*
 * The engine process: nothing of the worker's but the listening socket,
 * the error log and the shared memory; default signals; its own session.
 * It never returns into nginx's code.
 */

static void
ngx_http_llm_engine_process(ngx_cycle_t *cycle, ngx_http_llm_main_conf_t *lmcf,
    int lfd, ngx_pid_t master, ngx_uint_t generation)
{
    int                        pidfd, i, stop;
    char                       err[LLM_ERR_LEN];
    double                     retired;
    sigset_t                   set;
    llm_server                *s;
    llm_engine                *e;
    llm_engine_config          cfg;
    llm_engine_stats           st;
    ngx_http_llm_engine_sh_t  *sh;

    ngx_pid = ngx_getpid();
    ngx_process = NGX_PROCESS_HELPER;
    sh = ngx_http_llm_engine_zone->data;

    for (i = 1; i < NSIG; i++) {
        (void) signal(i, SIG_DFL);
    }

    (void) signal(SIGPIPE, SIG_IGN);
    (void) signal(SIGHUP, SIG_IGN);

    sigemptyset(&set);
    sigprocmask(SIG_SETMASK, &set, NULL);

    (void) setsid();

    ngx_http_llm_engine_close_fds(cycle, lfd);

    ngx_setproctitle("llm engine process");

    pidfd = (int) syscall(SYS_pidfd_open, master, 0);

    ngx_time_update();     /* nginx's cached time is the fork's */
    ngx_log_error(NGX_LOG_NOTICE, cycle->log, 0,
                  "llm: engine process %P: loading \"%V\" on device \"%V\"",
                  ngx_pid, &lmcf->model, &lmcf->device);

    err[0] = '\0';
    ngx_memzero(&cfg, sizeof(llm_engine_config));

    s = llm_server_new(err);

    cfg.model_dir = (const char *) lmcf->model.data;
    cfg.device = (const char *) lmcf->device.data;
    cfg.weights = (const char *) lmcf->weights.data;
    cfg.threads = (int) lmcf->threads;
    cfg.max_model_len = (int) lmcf->max_model_len;
    cfg.max_num_seqs = (int) lmcf->max_num_seqs;
    cfg.max_num_batched_tokens = (int) lmcf->max_num_batched_tokens;
    cfg.kv_cache_bytes = (size_t) lmcf->kv_cache_size;
    cfg.gpu_memory_utilization = lmcf->gpu_util;
    cfg.enable_prefix_caching = (int) lmcf->enable_prefix_caching;
    cfg.spec_tokens = (int) lmcf->spec_tokens;
    cfg.spec_lookup_min = (int) lmcf->spec_lookup_min;
    cfg.spec_lookup_max = (int) lmcf->spec_lookup_max;
    /* the steps run in the server's loop: no engine thread to wake */
    cfg.inline_loop = 1;

    e = s ? llm_engine_create(&cfg, err) : NULL;

    ngx_shmtx_lock(ngx_http_llm_engine_mutex());

    if (e == NULL) {
        if (sh->generation == generation) {
            sh->state = NGX_HTTP_LLM_ENGINE_FAILED;
            ngx_cpystrn((u_char *) sh->reason,
                        (u_char *) (err[0] ? err : "unknown error"),
                        LLM_ERR_LEN);
            ngx_http_llm_engine_gone(sh, llm_now(), 1, sh->reason);
        }

        ngx_shmtx_unlock(ngx_http_llm_engine_mutex());

        ngx_time_update();
        ngx_log_error(NGX_LOG_ERR, cycle->log, 0,
                      "llm: the model failed to load, the API answers 503: "
                      "%s", err[0] ? err : "unknown error");
        _exit(1);
    }

    if (sh->generation == generation) {
        sh->state = NGX_HTTP_LLM_ENGINE_READY;
        sh->ready_at = llm_now();
        sh->max_model_len = llm_engine_max_model_len(e);
    }

    ngx_shmtx_unlock(ngx_http_llm_engine_mutex());

    /* which device llm_device chose, and why; the KV cache it got (the
     * num_gpu_blocks of vllm:cache_config_info) */
    llm_engine_stats_get(e, &st);

    ngx_time_update();
    ngx_log_error(NGX_LOG_NOTICE, cycle->log, 0,
                  "llm: engine ready on %s (%s), max_model_len %d, "
                  "KV cache %d blocks of %d tokens, in the engine process %P",
                  llm_engine_device(e), llm_engine_device_reason(e),
                  llm_engine_max_model_len(e), st.num_blocks, st.block_size,
                  ngx_pid);

    llm_server_on_stats(s, NGX_HTTP_LLM_STATS_INTERVAL,
                        ngx_http_llm_engine_publish, sh);
    llm_server_attach(s, e, lfd);

    stop = 0;
    retired = 0;

    while (!stop) {
        if (llm_server_poll(s, 50, pidfd)) {
            break;      /* the master exited */
        }

        if (pidfd == -1 && kill(master, 0) == -1 && ngx_errno == ESRCH) {
            break;
        }

        if (sh->generation != generation
            || sh->state == NGX_HTTP_LLM_ENGINE_RETIRING)
        {
            /* retiring: no new clients, every worker told to submit no
             * more; exit once each has answered (whatever it sent before
             * is in) and the requests are done */
            if (retired == 0) {
                retired = llm_now();
                llm_server_retire(s);
            }

            stop = llm_server_retired(s);

            if (!stop && llm_server_requests(s) == 0
                && llm_now() - retired > NGX_HTTP_LLM_RETIRE_WAIT)
            {
                ngx_time_update();
                ngx_log_error(NGX_LOG_WARN, cycle->log, 0,
                              "llm: %d workers did not answer the engine's "
                              "retirement in %d s: it exits anyway",
                              llm_server_clients(s),
                              (int) NGX_HTTP_LLM_RETIRE_WAIT);
                stop = 1;
            }
        }
    }

    ngx_time_update();
    ngx_log_error(NGX_LOG_NOTICE, cycle->log, 0,
                  "llm: engine process %P exits", ngx_pid);

    llm_server_free(s);
    llm_engine_destroy(e);

    ngx_shmtx_lock(ngx_http_llm_engine_mutex());

    if (sh->pid == ngx_pid) {
        sh->pid = 0;
        sh->state = NGX_HTTP_LLM_ENGINE_NONE;
    }

    ngx_shmtx_unlock(ngx_http_llm_engine_mutex());

    _exit(0);
}


/* every inherited descriptor goes but keep, stdio and the error logs */

static void
ngx_http_llm_engine_close_fds(ngx_cycle_t *cycle, int keep)
{
    int             fd, dfd;
    DIR            *dir;
    ngx_log_t      *log;
    struct dirent  *de;
    int             logs[16];
    ngx_uint_t      n, i, keepit;

    n = 0;

    for (log = cycle->log; log && n < 16; log = log->next) {
        if (log->file && log->file->fd != NGX_INVALID_FILE) {
            logs[n++] = log->file->fd;
        }
    }

    dir = opendir("/proc/self/fd");
    if (dir == NULL) {
        return;
    }

    dfd = dirfd(dir);

    while ((de = readdir(dir)) != NULL) {
        if (de->d_name[0] < '0' || de->d_name[0] > '9') {
            continue;
        }

        fd = atoi(de->d_name);

        keepit = (fd <= 2 || fd == keep || fd == dfd);

        for (i = 0; i < n; i++) {
            if (fd == logs[i]) {
                keepit = 1;
            }
        }

        if (!keepit) {
            close(fd);
        }
    }

    closedir(dir);
}
