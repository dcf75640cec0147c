// One HTTP/2 connection (cleartext, prior knowledge): a streaming request
// that is reset (RST_STREAM CANCEL) once its first content chunk arrived --
// so the engine runs it -- while the connection stays open; then, on the
// same connection, the access-log line of that request is awaited (by its
// id, from the first chunk) and a second, short request is made.
// usage: node t/nginx/h2_reset.mjs ORIGIN PATH BODY ACCESS_LOG
//   -> {"id", "chunks", "log_line", "second_status", "second_done", "error"}
import fs from 'node:fs';
import http2 from 'node:http2';

const [origin, path, body, accessLog] = process.argv.slice(2);
const out = { id: null, chunks: 0, log_line: null, second_status: null,
              second_done: false, error: null };

function request(session, payload, onData) {
    const req = session.request({ ':method': 'POST', ':path': path,
                                  'content-type': 'application/json' });
    req.setEncoding('utf8');
    const res = new Promise((resolve, reject) => {
        let status = null;
        req.on('response', (h) => { status = h[':status']; });
        req.on('data', (d) => onData(d, req));
        req.on('close', () => resolve(status));
        req.on('error', reject);
    });
    req.end(payload);
    return res;
}

async function waitLogLine(id, ms) {
    const deadline = Date.now() + ms;
    while (Date.now() < deadline) {
        const text = fs.existsSync(accessLog) ? fs.readFileSync(accessLog, 'utf8') : '';
        const line = text.split('\n').find((l) => l.includes(` id=${id} `));
        if (line) {
            return line;
        }
        await new Promise((r) => setTimeout(r, 50));
    }
    return null;
}

const session = http2.connect(origin);
try {
    await new Promise((resolve, reject) => {
        session.once('connect', resolve);
        session.once('error', reject);
    });
    let buf = '';
    await request(session, body, (d, req) => {
        if (req.closed) {
            return;
        }
        buf += d;
        const events = buf.split('\n\n');
        buf = events.pop();
        for (const e of events) {
            if (!e.startsWith('data: {')) {
                continue;
            }
            const c = JSON.parse(e.slice(6));
            out.id = out.id ?? c.id;
            if (c.choices?.[0]?.delta?.content) {
                out.chunks++;
            }
        }
        if (out.chunks > 0) {
            req.close(http2.constants.NGHTTP2_CANCEL);
        }
    });
    if (out.id) {
        out.log_line = await waitLogLine(out.id, 30000);
    }
    const short = JSON.parse(body);
    short.max_tokens = 2;
    let text = '';
    out.second_status = await request(session, JSON.stringify(short),
                                      (d) => { text += d; });
    out.second_done = text.endsWith('data: [DONE]\n\n');
} catch (e) {
    out.error = String(e);
}
session.close();
process.stdout.write(JSON.stringify(out) + '\n');
