// One HTTP/2 connection (cleartext, prior knowledge) whose client stops
// reading: a streaming request with a 1 KB stream window is paused once
// its first data arrived (node then sends no WINDOW_UPDATE, so nginx's
// output for it stays unsent); the script waits until the server's
// /metrics shows generation stopped (two readings a second apart agree),
// and 3 s more, then reads the rest of the stream to its end.  The scrapes
// go over the same connection, which the paused stream does not block.
// usage: node t/nginx/h2_stall.mjs ORIGIN PATH BODY
//   -> {"status", "made_before", "paused_at", "after_3s", "running",
//       "body", "error"}
import http2 from 'node:http2';

const [origin, path, body] = process.argv.slice(2);
const out = { status: null, made_before: null, paused_at: null,
              after_3s: null, running: null, body: '', error: null };

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

let session;

// a scrape on the same connection (the port speaks HTTP/2 only)
function metric(name) {
    return new Promise((resolve, reject) => {
        const req = session.request({ ':path': '/metrics' });
        let text = '';
        req.setEncoding('utf8');
        req.on('data', (d) => { text += d; });
        req.on('end', () => {
            const line = text.split('\n').find(
                (l) => l.startsWith(`${name}{`) || l.startsWith(`${name} `));
            resolve(line ? Number(line.split(' ').pop()) : null);
        });
        req.on('error', reject);
        req.end();
    });
}

async function quiet() {
    let prev = -1;
    let now = await metric('vllm:generation_tokens_total');
    for (let i = 0; i < 60 && now !== prev; i++) {
        prev = now;
        await sleep(1000);
        now = await metric('vllm:generation_tokens_total');
    }
    return now === prev ? now : null;
}

async function main() {
    session = http2.connect(origin,
                            { settings: { initialWindowSize: 1024 } });
    session.on('error', (e) => { out.error = String(e); });
    out.made_before = await metric('vllm:generation_tokens_total');
    const req = session.request({ ':method': 'POST', ':path': path,
                                  'content-type': 'application/json' });
    req.setEncoding('utf8');
    const first = new Promise((resolve) => {
        req.once('data', (d) => { out.body += d; req.pause(); resolve(); });
    });
    req.on('response', (h) => { out.status = h[':status']; });
    req.end(body);
    await first;

    out.paused_at = await quiet();
    await sleep(3000);
    out.after_3s = await metric('vllm:generation_tokens_total');
    out.running = await metric('vllm:num_requests_running');

    const done = new Promise((resolve, reject) => {
        req.on('data', (d) => { out.body += d; });
        req.on('end', resolve);
        req.on('error', reject);
    });
    req.resume();
    await done;
    session.close();
}

main().catch((e) => { out.error = String(e); })
      .finally(() => { console.log(JSON.stringify(out)); });
