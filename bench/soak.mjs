// The soak load of bench/soak.sh: CLIENTS concurrent streaming clients
// (node:http, one connection a request, the SSE parsed and checked here) for SECONDS against one
// nginx, mixed requests: chat/completions 50 %, completions 30 %,
// responses 20 %; max_tokens uniform in 1..256; prompts of 1..300 words;
// 5 % of the requests aborted by the client after a random number of
// events; `nginx -s reload` every RELOAD seconds.  Every other request must
// end as its API says: 200, every data: line JSON, for chat and completions
// one finish_reason per choice, the usage chunk, then data: [DONE] and
// nothing after it; for responses the last event response.completed.
// Anything else is an error (the first ones are printed; a client waits
// 500 ms after one).
//
// The workers' RSS and open fds (summed over the master's children, from
// /proc) are sampled at the start of the load, in the middle, at the end
// of the load and once it is idle again.
//
// usage: node bench/soak.mjs BASE_URL CLIENTS SECONDS RELOAD_S MASTER_PID
//                            NGINX_ARGS_JSON [SEED]
//   -> a JSON summary on stdout; progress on stderr
import { execFileSync } from 'node:child_process';
import http from 'node:http';
import { readFileSync, readdirSync } from 'node:fs';

const [base, clientsArg, secondsArg, reloadArg, masterArg, nginxArgs,
       seedArg = '1'] = process.argv.slice(2);
const CLIENTS = Number(clientsArg);
const SECONDS = Number(secondsArg);
const RELOAD = Number(reloadArg);
const MASTER = Number(masterArg);
const NGINX = JSON.parse(nginxArgs);      // [binary, args...] for -s reload

// a small deterministic generator (mulberry32): the same mix every run
let state = Number(seedArg) >>> 0;
function rand() {
    state = (state + 0x6D2B79F5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
}
const int = (lo, hi) => lo + Math.floor(rand() * (hi - lo + 1));

const WORDS = ('time year people way day man thing woman life child world '
    + 'school state family student group country problem hand part place '
    + 'case week company system program question work government number '
    + 'night point home water room mother area money story fact month lot '
    + 'right study book eye job word business issue side kind head house '
    + 'service friend father power hour game line end member law car city '
    + 'community name').split(' ');

function prompt() {
    const n = int(1, 300);
    const w = [];
    for (let i = 0; i < n; i++) {
        w.push(WORDS[int(0, WORDS.length - 1)]);
    }
    return w.join(' ');
}

const stats = { requests: 0, complete: 0, aborted: 0, errors: 0,
                tokens: 0, by_api: {}, reloads: 0, reload_errors: 0 };
const firstErrors = [];

const errorKinds = {};
function fail(what) {
    stats.errors++;
    // what went wrong, without the particulars
    const kind = what.replace(/^Error: /, '').replace(/(status \d+: \{"error":\{"message":"[^"]*").*/, '$1')
                     .slice(0, 120);
    const t = Math.round((Date.now() - t0) / 100) / 10;
    const k = errorKinds[kind] ??= { n: 0, first_s: t, last_s: t };
    k.n++;
    k.last_s = t;
    if (firstErrors.length < 10) {
        firstErrors.push(what);
        console.error(`error: ${what}`);
    }
}

function request() {
    const r = rand();
    const max = int(1, 256);
    const text = prompt();
    const abortAfter = rand() < 0.05 ? int(1, Math.max(1, max)) : 0;
    if (r < 0.5) {
        return { api: 'chat', path: '/v1/chat/completions', abortAfter, max,
                 body: { messages: [{ role: 'user', content: text }],
                         max_tokens: max, temperature: 0.8, stream: true,
                         stream_options: { include_usage: true } } };
    }
    if (r < 0.8) {
        return { api: 'completions', path: '/v1/completions', abortAfter, max,
                 body: { prompt: text, max_tokens: max, temperature: 0.8,
                         stream: true,
                         stream_options: { include_usage: true } } };
    }
    return { api: 'responses', path: '/v1/responses', abortAfter, max,
             body: { input: text, max_output_tokens: max, temperature: 0.8,
                     stream: true, store: false } };
}

// one request on its own connection (Connection: close: a keep-alive
// connection that nginx closes at a reload while a request is being sent
// on it is HTTP/1.1's race, not the server's failure): 'complete',
// 'aborted', or throws what went wrong
function one(q) {
    return new Promise((resolve, reject) => {
        const body = JSON.stringify(q.body);
        const url = new URL(base + q.path);
        const req = http.request({
            host: url.hostname, port: url.port, path: url.pathname,
            method: 'POST', agent: false,
            headers: { 'Content-Type': 'application/json',
                       'Content-Length': Buffer.byteLength(body),
                       Connection: 'close' } });
        let settled = false;
        const end = (err, v) => {
            if (!settled) {
                settled = true;
                if (err) {
                    reject(err);
                } else {
                    resolve(v);
                }
            }
        };
        req.on('error', (e) => end(new Error(`${q.api}: ${e.message}`)));
        req.on('response', (res) => {
            if (res.statusCode !== 200) {
                let t = '';
                res.on('data', (d) => { t += d; });
                res.on('end', () => end(new Error(
                    `${q.api}: status ${res.statusCode}: ${t.slice(0, 200)}`)));
                return;
            }
            const decoder = new TextDecoder('utf-8', { fatal: true });
            let buf = '', events = 0, done = false, finishes = 0;
            let usage = null, last = null;
            const check = () => {
                let i;
                while ((i = buf.indexOf('\n\n')) >= 0) {
                    const ev = buf.slice(0, i);
                    buf = buf.slice(i + 2);
                    if (done) {
                        throw new Error(`${q.api}: an event after [DONE]`);
                    }
                    const line = ev.split('\n')
                                   .find((l) => l.startsWith('data: '));
                    if (line === undefined) {
                        throw new Error(`${q.api}: an event without data: `
                                        + ev.slice(0, 100));
                    }
                    const data = line.slice(6);
                    events++;
                    if (data === '[DONE]') {
                        done = true;
                        continue;
                    }
                    const j = JSON.parse(data);
                    if (j.error) {
                        throw new Error(`${q.api}: error event ${data.slice(0, 200)}`);
                    }
                    if (q.api === 'responses') {
                        last = j.type;
                        usage = j.response?.usage ?? usage;
                    } else {
                        if (j.choices?.[0]?.finish_reason) {
                            finishes++;
                        }
                        usage = j.usage ?? usage;
                    }
                    if (q.abortAfter && events >= q.abortAfter) {
                        req.destroy();
                        return true;
                    }
                }
                return false;
            };
            res.on('data', (d) => {
                if (settled) {
                    return;
                }
                try {
                    buf += decoder.decode(d, { stream: true });
                    if (check()) {
                        end(null, 'aborted');
                    }
                } catch (e) {
                    req.destroy();
                    end(e);
                }
            });
            res.on('error', (e) => end(new Error(`${q.api}: ${e.message}`)));
            res.on('aborted', () => end(new Error(`${q.api}: the server `
                                                  + 'cut the stream')));
            res.on('end', () => {
                if (settled) {
                    return;
                }
                if (buf.length) {
                    return end(new Error(`${q.api}: bytes after the last `
                                         + `event: ${buf.slice(0, 100)}`));
                }
                if (q.api === 'responses') {
                    if (last !== 'response.completed' || !usage) {
                        return end(new Error(`responses: ended with ${last}, `
                                             + `usage ${!!usage}`));
                    }
                    stats.tokens += usage.output_tokens;
                } else {
                    if (!done || finishes !== 1 || !usage) {
                        return end(new Error(`${q.api}: [DONE] ${done}, `
                            + `finish_reasons ${finishes}, usage ${!!usage}`));
                    }
                    stats.tokens += usage.completion_tokens;
                }
                end(null, 'complete');
            });
        });
        req.end(body);
    });
}

const t0 = Date.now();
const deadline = t0 + SECONDS * 1000;

async function client() {
    while (Date.now() < deadline) {
        const q = request();
        stats.requests++;
        stats.by_api[q.api] = (stats.by_api[q.api] ?? 0) + 1;
        try {
            const r = await one(q);
            stats[r === 'aborted' ? 'aborted' : 'complete']++;
        } catch (e) {
            fail(String(e));
            // as a client would back off before it tries again: an error
            // counts the requests that met it, not how fast 64 loops spin
            await new Promise((r) => setTimeout(r, 500));
        }
    }
}

// the workers: the master's children, from /proc
function workers() {
    const out = [];
    for (const d of readdirSync('/proc')) {
        if (!/^\d+$/.test(d)) {
            continue;
        }
        try {
            const st = readFileSync(`/proc/${d}/stat`, 'utf8');
            const ppid = Number(st.slice(st.lastIndexOf(')') + 2).split(' ')[1]);
            if (ppid !== MASTER) {
                continue;
            }
            const status = readFileSync(`/proc/${d}/status`, 'utf8');
            const rss = Number(/VmRSS:\s+(\d+)/.exec(status)?.[1] ?? 0);
            const fds = readdirSync(`/proc/${d}/fd`).length;
            const cmd = readFileSync(`/proc/${d}/cmdline`, 'utf8')
                .replace(/\0/g, ' ').trim();
            out.push({ pid: Number(d), rss_kb: rss, fds, cmd });
        } catch {
            // gone meanwhile
        }
    }
    return out;
}

function proc(pid) {
    try {
        const status = readFileSync(`/proc/${pid}/status`, 'utf8');
        return { rss_kb: Number(/VmRSS:\s+(\d+)/.exec(status)?.[1] ?? 0),
                 fds: readdirSync(`/proc/${pid}/fd`).length };
    } catch {
        return { rss_kb: 0, fds: 0 };
    }
}

const samples = {};
function sample(name) {
    const w = workers().filter((p) => /worker process/.test(p.cmd));
    const m = proc(MASTER);
    samples[name] = {
        t_s: Math.round((Date.now() - t0) / 1000),
        workers: w.length,
        shutting_down: w.filter((p) => /shutting down/.test(p.cmd)).length,
        rss_mb: Math.round(w.reduce((s, p) => s + p.rss_kb, 0) / 102.4) / 10,
        fds: w.reduce((s, p) => s + p.fds, 0),
        master_rss_mb: Math.round(m.rss_kb / 102.4) / 10,
        master_fds: m.fds,
    };
    console.error(`${name}: ${JSON.stringify(samples[name])}`);
}

function reload() {
    try {
        execFileSync(NGINX[0], [...NGINX.slice(1), '-s', 'reload'],
                     { stdio: 'ignore' });
        stats.reloads++;
    } catch (e) {
        stats.reload_errors++;
        fail(`nginx -s reload: ${e}`);
    }
}

const timers = [];
timers.push(setTimeout(() => sample('start'), Math.min(10, SECONDS / 10) * 1000));
timers.push(setTimeout(() => sample('middle'), SECONDS * 500 - 2000));
timers.push(setTimeout(() => sample('end'), SECONDS * 1000 - 1000));
for (let s = RELOAD, n = 1; s < SECONDS; s += RELOAD, n++) {
    timers.push(setTimeout(() => {
        sample(`before_reload_${n}`);
        reload();
    }, s * 1000));
}
const progress = setInterval(() => {
    console.error(`${Math.round((Date.now() - t0) / 1000)} s: `
                  + `${stats.requests} requests, ${stats.errors} errors, `
                  + `${stats.tokens} tokens`);
}, 15000);

sample('before');
await Promise.all(Array.from({ length: CLIENTS }, () => client()));
const seconds = (Date.now() - t0) / 1000;
clearInterval(progress);
timers.forEach(clearTimeout);
await new Promise((r) => setTimeout(r, 3000));
sample('idle_after');

process.stdout.write(JSON.stringify({
    clients: CLIENTS, seconds, ...stats,
    tokens_per_s: stats.tokens / seconds,
    requests_per_s: stats.requests / seconds,
    samples, error_kinds: errorKinds, first_errors: firstErrors,
}) + '\n');
