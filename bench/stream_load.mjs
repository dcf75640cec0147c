// Serving load for one OpenAI-compatible server (ngx_llm or llama-server):
// C concurrent clients, each sending R streaming /v1/completions requests
// back to back (every prompt different, so no prefix is shared), measured
// on the client side:
//   TTFT      send -> first chunk that carries text (ms)
//   ITL       per request: (last text chunk - first text chunk) / (N - 1),
//             N = usage.completion_tokens (or the text chunks if the
//             server sends no usage), so chunks carrying several tokens
//             count as several tokens (ms)
//   tokens/s  all completion tokens / wall time of the whole load
// Percentiles are over requests (nearest rank).  PREFIX, when given, is put
// before every prompt (a shared prefix); BASE numbers the clients from BASE
// on, so that runs with the same PREFIX still differ after it.
//
// usage: node bench/stream_load.mjs URL CLIENTS REQUESTS MAX_TOKENS [PREFIX [BASE]]
//   -> {"requests", "errors", "tokens", "seconds", "tokens_per_s",
//       "ttft_p50_ms", "ttft_p99_ms", "itl_p50_ms", "itl_p99_ms",
//       "server_ttft_p50_ms", "prompt_tokens", "cached_tokens"}
const [url, clients, requests, maxTokens, prefix = '', base = '0'] =
    process.argv.slice(2);
const words = ['apple', 'river', 'stone', 'cloud', 'green', 'music', 'table',
               'window', 'garden', 'silver', 'paper', 'summer', 'forest',
               'yellow', 'bridge', 'little', 'market', 'winter', 'basket'];

function prompt(c, r) {
    // a different short prompt per request: no two share a 16-token block
    const w = [];
    for (let i = 0; i < 12; i++) {
        w.push(words[(c * 7 + r * 13 + i * 5 + i * i) % words.length]);
    }
    return `${prefix}Request ${c}-${r}: ${w.join(' ')}`;
}

const results = [];
let errors = 0;

async function one(c, r) {
    const t0 = performance.now();
    const res = await fetch(url, {
        method: 'POST',
        headers: { 'Content-Type': 'application/json' },
        body: JSON.stringify({
            prompt: prompt(c, r), max_tokens: Number(maxTokens),
            temperature: 0, ignore_eos: true, stream: true,
            stream_options: { include_usage: true } }),
    });
    if (res.status !== 200) {
        errors++;
        await res.text();
        return;
    }
    const decoder = new TextDecoder();
    let buf = '', first = 0, last = 0, chunks = 0, usage = null, metrics = null;
    for await (const part of res.body) {
        const now = performance.now();
        buf += decoder.decode(part, { stream: true });
        let i;
        while ((i = buf.indexOf('\n\n')) >= 0) {
            const ev = buf.slice(0, i);
            buf = buf.slice(i + 2);
            if (!ev.startsWith('data: ') || ev === 'data: [DONE]') {
                continue;
            }
            const j = JSON.parse(ev.slice(6));
            if (j.usage) {
                usage = j.usage;
            }
            if (j.metrics) {
                metrics = j.metrics;
            }
            const text = j.choices?.[0]?.text;
            if (text) {
                if (!first) {
                    first = now;
                }
                last = now;
                chunks++;
            }
        }
    }
    const n = usage ? usage.completion_tokens : chunks;
    results.push({
        ttft: first - t0, n,
        itl: n > 1 ? (last - first) / (n - 1) : null,
        server_ttft: metrics ? metrics.time_to_first_token_ms : null,
        prompt_tokens: usage ? usage.prompt_tokens : null,
        cached: usage?.prompt_tokens_details?.cached_tokens ?? null,
    });
}

async function client(c) {
    for (let r = 0; r < Number(requests); r++) {
        await one(c, r).catch((e) => { errors++; console.error(String(e)); });
    }
}

function pct(values, p) {
    const v = values.filter((x) => x !== null).sort((a, b) => a - b);
    if (!v.length) {
        return null;
    }
    return v[Math.min(v.length - 1, Math.ceil(p / 100 * v.length) - 1)];
}

const t0 = performance.now();
await Promise.all(Array.from({ length: Number(clients) },
                             (_, c) => client(c + Number(base))));
const seconds = (performance.now() - t0) / 1000;
const tokens = results.reduce((s, r) => s + r.n, 0);
process.stdout.write(JSON.stringify({
    requests: results.length, errors, tokens, seconds,
    tokens_per_s: tokens / seconds,
    ttft_p50_ms: pct(results.map((r) => r.ttft), 50),
    ttft_p99_ms: pct(results.map((r) => r.ttft), 99),
    itl_p50_ms: pct(results.map((r) => r.itl), 50),
    itl_p99_ms: pct(results.map((r) => r.itl), 99),
    server_ttft_p50_ms: pct(results.map((r) => r.server_ttft), 50),
    prompt_tokens: results[0]?.prompt_tokens ?? null,
    cached_tokens: results.map((r) => r.cached),
}) + '\n');
