// N concurrent SSE streams against a chat/completions URL (node's fetch),
// each checked: 200, chunks that parse, exactly one finish_reason, the
// usage chunk, data: [DONE] at the end and nothing after it.
// usage: node t/nginx/streams.mjs URL N MAX_TOKENS
//   -> {"ok": n, "failures": [...], "seconds": s, "tokens": t}
const [url, n, maxTokens] = process.argv.slice(2);

async function one(i) {
    const res = await fetch(url, {
        method: 'POST',
        headers: { 'Content-Type': 'application/json' },
        body: JSON.stringify({
            messages: [{ role: 'user', content: `Stream number ${i}` }],
            max_tokens: Number(maxTokens), stream: true,
            stream_options: { include_usage: true } }),
    });
    const body = await res.text();
    if (res.status !== 200) {
        throw new Error(`status ${res.status}: ${body.slice(0, 200)}`);
    }
    const events = body.split('\n\n').filter((e) => e.length);
    if (events.at(-1) !== 'data: [DONE]') {
        throw new Error(`no [DONE] at the end: ${body.slice(-200)}`);
    }
    let finishes = 0, usage = null;
    for (const e of events.slice(0, -1)) {
        if (!e.startsWith('data: ')) {
            throw new Error(`not an SSE data event: ${e.slice(0, 100)}`);
        }
        const c = JSON.parse(e.slice(6));
        if (c.error) {
            throw new Error(`error event: ${JSON.stringify(c.error)}`);
        }
        if (c.choices[0]?.finish_reason) {
            finishes++;
        }
        if (c.usage) {
            usage = c.usage;
        }
    }
    if (finishes !== 1 || !usage) {
        throw new Error(`finish_reasons ${finishes}, usage ${!!usage}`);
    }
    return usage.completion_tokens;
}

const t0 = Date.now();
const results = await Promise.allSettled(
    Array.from({ length: Number(n) }, (_, i) => one(i)));
const ok = results.filter((r) => r.status === 'fulfilled');
process.stdout.write(JSON.stringify({
    ok: ok.length,
    failures: results.filter((r) => r.status === 'rejected')
                     .map((r) => String(r.reason)),
    seconds: (Date.now() - t0) / 1000,
    tokens: ok.reduce((s, r) => s + r.value, 0),
}) + '\n');
