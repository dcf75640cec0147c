// Streams for t/api_engine_shared.t (node's fetch): N concurrent greedy
// chat streams, each reported (status, text, error event, [DONE]).
// usage: node t/nginx/shared_streams.mjs URL N MAX_TOKENS PROMPT [SECONDS]
//   without SECONDS: one stream each
//     -> {"results": [{"status", "text", "error", "done", "finish"}...]}
//   with SECONDS: each of the N clients streams again and again until
//   SECONDS have passed (or the file URL.stop... see STOP_FILE)
//     -> {"ok": n, "failed": n, "failures": [...]}
import { existsSync } from 'node:fs';

const [url, n, maxTokens, prompt, seconds] = process.argv.slice(2);
const stopFile = process.env.STOP_FILE;
const offset = Number(process.env.OFFSET ?? 0);    // the first stream's i

async function one(i) {
    const r = { status: 0, text: '', error: null, done: false, finish: null };
    try {
        const res = await fetch(url, {
            method: 'POST',
            // a connection per stream: a keep-alive connection that an old
            // worker closes on a reload just as the next request goes out
            // fails that request whatever the engine does (nginx's
            // graceful shutdown closes idle connections)
            headers: { 'Content-Type': 'application/json',
                       'Connection': 'close' },
            body: JSON.stringify({
                messages: [{ role: 'user', content: `${prompt} ${offset + i}` }],
                max_tokens: Number(maxTokens), stream: true,
                temperature: 0, ignore_eos: true }),
        });
        r.status = res.status;
        const body = await res.text();
        for (const e of body.split('\n\n').filter((e) => e.length)) {
            if (e === 'data: [DONE]') {
                r.done = true;
                continue;
            }
            if (!e.startsWith('data: ')) {
                r.error = `not an SSE event: ${e.slice(0, 100)}`;
                continue;
            }
            const c = JSON.parse(e.slice(6));
            if (c.error) {
                r.error = c.error.message ?? 'error';
                continue;
            }
            const ch = c.choices?.[0];
            if (ch?.delta?.content) {
                r.text += ch.delta.content;
            }
            if (ch?.finish_reason) {
                r.finish = ch.finish_reason;
            }
        }
    } catch (e) {
        r.error = `fetch: ${e}`;
    }
    return r;
}

if (seconds === undefined) {
    const results = await Promise.all(
        Array.from({ length: Number(n) }, (_, i) => one(i)));
    process.stdout.write(JSON.stringify({ results }) + '\n');
} else {
    const end = Date.now() + Number(seconds) * 1000;
    let ok = 0, failed = 0;
    const failures = [];
    await Promise.all(Array.from({ length: Number(n) }, async (_, i) => {
        while (Date.now() < end && !(stopFile && existsSync(stopFile))) {
            const r = await one(i);
            if (r.status === 200 && r.done && !r.error
                && r.finish === 'length') {
                ok++;
            } else {
                failed++;
                failures.push(JSON.stringify(r).slice(0, 300));
            }
        }
    }));
    process.stdout.write(JSON.stringify({ ok, failed, failures }) + '\n');
}
