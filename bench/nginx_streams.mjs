// Streaming throughput through nginx: C clients, each streaming chat
// completions back to back for SECONDS (a closed loop), with
// stream_options.include_usage so that every stream ends with the usage
// chunk (and, where llm_per_request_metrics is on, the metrics).
// Counts the completion tokens the usage chunks report.
// usage: node bench/nginx_streams.mjs URL CLIENTS SECONDS MAX_TOKENS
//   -> {"streams": n, "tokens": t, "seconds": s, "tokens_per_s": x, "errors": e}
const [url, clients, seconds, maxTokens] = process.argv.slice(2);
const deadline = Date.now() + Number(seconds) * 1000;
let streams = 0, tokens = 0, errors = 0, metrics = 0;

async function one(i) {
    const res = await fetch(url, {
        method: 'POST',
        headers: { 'Content-Type': 'application/json' },
        body: JSON.stringify({
            messages: [{ role: 'user', content: `Client ${i} says hello.` }],
            max_tokens: Number(maxTokens), ignore_eos: true, stream: true,
            stream_options: { include_usage: true } }),
    });
    const body = await res.text();
    const events = body.split('\n\n');
    if (res.status !== 200 || events.at(-2) !== 'data: [DONE]') {
        errors++;
        return;
    }
    const usage = JSON.parse(events.at(-3).slice(6));
    tokens += usage.usage.completion_tokens;
    metrics += usage.metrics ? 1 : 0;
    streams++;
}

async function client(i) {
    while (Date.now() < deadline) {
        await one(i).catch(() => { errors++; });
    }
}

const t0 = Date.now();
await Promise.all(Array.from({ length: Number(clients) }, (_, i) => client(i)));
const s = (Date.now() - t0) / 1000;
process.stdout.write(JSON.stringify({ streams, tokens, seconds: s,
    tokens_per_s: tokens / s, errors, with_metrics: metrics }) + '\n');
