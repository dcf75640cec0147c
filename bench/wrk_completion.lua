-- wrk script: a 1-token completion per request (the tiny model's fastest
-- request: the server's per-request cost dominates).
-- usage: wrk -t2 -c32 -d10s -s bench/wrk_completion.lua http://127.0.0.1:PORT/on/v1/completions
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
wrk.body = '{"prompt": "Hello", "max_tokens": 1, "temperature": 0}'

local errors = 0

response = function(status, headers, body)
    if status ~= 200 then
        errors = errors + 1
    end
end

done = function(summary, latency, requests)
    io.write(string.format('{"requests": %d, "seconds": %.3f, "non2xx": %d, ' ..
                           '"errors": %d, "p50_ms": %.3f, "p99_ms": %.3f}\n',
                           summary.requests, summary.duration / 1e6,
                           summary.errors.status, summary.errors.connect
                           + summary.errors.read + summary.errors.write
                           + summary.errors.timeout,
                           latency:percentile(50) / 1000,
                           latency:percentile(99) / 1000))
end
