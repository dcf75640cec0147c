-- wrk script: streaming chat completions, every request a different
-- prompt, every response checked: status 200, an SSE body whose last
-- event is "data: [DONE]", a usage chunk, no error event.  Prints one JSON
-- line at the end (t/api_load_wrk.t reads it).
-- With TARGET and DIR, a thread stops once it has TARGET good streams and
-- says so with a file DIR/thread-ID; the caller interrupts wrk (SIGINT)
-- when every thread did, so the run ends by its count, not by its clock
-- (-d is only the bound).
-- usage: wrk -t2 -c200 -d20s -s t/nginx/wrk_stream.lua URL [MAX_TOKENS [TARGET DIR]]

local threads = {}
local counter = 0

function setup(thread)
    thread:set("id", counter)
    counter = counter + 1
    table.insert(threads, thread)
end

function init(args)
    max_tokens = tonumber(args[1] or "16")
    target = tonumber(args[2] or "0")
    done_dir = args[3]
    n = 0
    good = 0
    bad = 0
    last_bad = ""
end

function request()
    n = n + 1
    local body = string.format(
        '{"messages":[{"role":"user","content":"client %d request %d"}],'
        .. '"max_tokens":%d,"stream":true,'
        .. '"stream_options":{"include_usage":true}}', id, n, max_tokens)
    return wrk.format("POST", nil,
                      { ["Content-Type"] = "application/json" }, body)
end

function response(status, headers, body)
    if status == 200 and body:find('data: %[DONE%]\n\n$')
       and body:find('"usage":{"prompt_tokens":', 1, true)
       and not body:find('"error":', 1, true)
    then
        good = good + 1
        if target > 0 and good == target then
            local f = io.open(done_dir .. "/thread-" .. id, "w")
            f:close()
            wrk.thread:stop()
        end
    else
        bad = bad + 1
        last_bad = status .. " " .. body:sub(-200)
    end
end

function done(summary, latency, requests)
    local g, b, lb = 0, 0, ""
    for _, t in ipairs(threads) do
        g = g + t:get("good")
        b = b + t:get("bad")
        if t:get("last_bad") ~= "" then lb = t:get("last_bad") end
    end
    local e = summary.errors
    io.write(string.format(
        '{"requests": %d, "good": %d, "bad": %d, "non2xx": %d, '
        .. '"connect": %d, "read": %d, "write": %d, "timeout": %d, '
        .. '"seconds": %.3f, "p50_ms": %.3f, "p99_ms": %.3f, '
        .. '"last_bad": "%s"}\n',
        summary.requests, g, b, e.status, e.connect, e.read, e.write,
        e.timeout, summary.duration / 1e6, latency:percentile(50) / 1000,
        latency:percentile(99) / 1000,
        lb:gsub('[%c"\\]', '?')))
end
