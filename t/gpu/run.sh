#!/bin/sh
# t/gpu/run.sh -- the CUDA backend's checks and benchmark on a GPU machine,
# in one run of under 10 minutes (docs/cuda.md, docs/performance.md):
#
#   1. builds the engine, the CLI and cuda/ for sm_90a (H100/H200) into
#      build/h200 with make -j;
#   2. kernel tests: every CUDA kernel against the host reference on random
#      inputs, whole forward passes against the CPU backend, and sampling
#      on the device against the host sampler (build/h200/gpu/test_kernels);
#   3. end to end: a small random model from `llm make-model`, greedy
#      generation through the engine on cuda:0 and on the CPU, token by
#      token (build/h200/gpu/e2e), and through `llm generate --device`;
#      seeded sampling on the device against the host sampler on the same
#      logits (LLM_CUDA_SAMPLE=0);
#   4. through nginx, when this machine has nginx and nginx-dev: the module
#      built here and t/api_cuda_workers.t on the real library (one engine
#      process for 4 workers, llm_device cuda:0);
#   5. benchmark on Llama-3.1-8B's shapes with weights generated on the GPU
#      (build/h200/gpu/bench): bandwidth and GEMM rate measured in the same
#      run, single-stream decode, 1k-token prefill (TTFT), 64 streams, and
#      a sampled decode step on the device against the logits path.
# It ends with one summary table.  Logs go to $OUT (the device runner's
# folder) when set, else build/h200/logs.
#
#   usage: t/gpu/run.sh [CUDA_ARCH]     (default: -gencode for sm_90a)
#
# LLM_GPU_EMU=1 tries the script itself without a GPU: the same stages on
# the CPU emulator of cuda/emu (build/gpu-emu, small shapes, meaningless
# speeds), so that a GPU run is not spent on a broken script.
set -u
cd "$(dirname "$0")/../.."
T0=$(date +%s)
DEADLINE=$((T0 + ${LLM_GPU_BUDGET:-570}))
EMU=${LLM_GPU_EMU:-}
if [ -n "$EMU" ]; then
    B=build/gpu-emu
    TARGETS="lib cli unit $B/emu/bench"
    TEST_KERNELS=$B/t/test_cuda_emu
    BENCH="$B/emu/bench --small"
    E2E_SIZE="--layers 2 --hidden 256 --heads 4 --kv-heads 2 --intermediate 512"
    E2E_TOKENS=20
    export LLM_EMU_MEM=$((2 * 1024 * 1024 * 1024))
else
    B=build/h200
    TARGETS="lib cli cuda"
    TEST_KERNELS=$B/gpu/test_kernels
    BENCH="$B/gpu/bench"
    E2E_SIZE="--layers 4 --hidden 512 --heads 8 --kv-heads 2 --intermediate 1024"
    E2E_TOKENS=64
fi
LOG=${OUT:-$B/logs}
mkdir -p "$LOG" "$B"
ARCH=${1:-"-gencode arch=compute_90a,code=sm_90a"}
JOBS=$(nproc 2>/dev/null || echo 8)
SUMMARY=$LOG/summary.txt
: > "$SUMMARY"

row() {                       # row CHECK RESULT
    printf '%-34s %s\n' "$1" "$2" >> "$SUMMARY"
}

left() {                      # seconds left, at most $1
    l=$((DEADLINE - $(date +%s)))
    [ "$l" -gt "$1" ] && l=$1
    [ "$l" -lt 5 ] && l=5
    echo "$l"
}

val() {                       # val KEY: a RESULT line of the bench log
    sed -n "s/^RESULT $1 //p" "$LOG/bench.log" | head -n 1
}

pct() {                       # pct A B: A as a percentage of B
    awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.0f%%", 100 * a / b; else print "?" }'
}

finish() {
    echo
    echo "==================== GPU check summary ${EMU:+(EMULATED ON THE CPU) }===================="
    cat "$SUMMARY"
    echo "total: $(( $(date +%s) - T0 )) s; logs in $LOG"
    exit "$1"
}

# A byte-level BPE tokenizer of the 256 bytes (GPT-2's byte-to-unicode map)
# plus BOS/EOS, so that make-model needs no downloaded tokenizer.
mini_tokenizer() {
    mkdir -p "$1"
    {
        printf '{"version":"1.0","truncation":null,"padding":null,"added_tokens":['
        printf '{"id":256,"content":"<|begin|>","single_word":false,"lstrip":false,"rstrip":false,"normalized":false,"special":true},'
        printf '{"id":257,"content":"<|end|>","single_word":false,"lstrip":false,"rstrip":false,"normalized":false,"special":true}],'
        printf '"normalizer":null,'
        printf '"pre_tokenizer":{"type":"ByteLevel","add_prefix_space":false,"trim_offsets":true,"use_regex":true},'
        printf '"post_processor":{"type":"TemplateProcessing","single":[{"SpecialToken":{"id":"<|begin|>","type_id":0}},{"Sequence":{"id":"A","type_id":0}}],"pair":[{"SpecialToken":{"id":"<|begin|>","type_id":0}},{"Sequence":{"id":"A","type_id":0}},{"Sequence":{"id":"B","type_id":1}}],"special_tokens":{"<|begin|>":{"id":"<|begin|>","ids":[256],"tokens":["<|begin|>"]}}},'
        printf '"decoder":{"type":"ByteLevel","add_prefix_space":true,"trim_offsets":true,"use_regex":true},'
        printf '"model":{"type":"BPE","dropout":null,"unk_token":null,"continuing_subword_prefix":null,"end_of_word_suffix":null,"fuse_unk":false,"byte_fallback":false,"ignore_merges":false,"vocab":{'
        b=0; n=256; sep=
        while [ $b -lt 256 ]; do
            if { [ $b -ge 33 ] && [ $b -le 126 ]; } \
               || { [ $b -ge 161 ] && [ $b -le 172 ]; } \
               || { [ $b -ge 174 ] && [ $b -le 255 ]; }; then
                cp=$b
            else
                cp=$n; n=$((n + 1))
            fi
            printf '%s"\\u%04x":%d' "$sep" $cp $b
            sep=,
            b=$((b + 1))
        done
        printf '},"merges":[]}}\n'
    } > "$1/tokenizer.json"
    printf '{"bos_token":"<|begin|>","eos_token":"<|end|>","add_bos_token":true}\n' \
        > "$1/tokenizer_config.json"
}

# ---- 0. the machine --------------------------------------------------------
NVCC=$(command -v nvcc 2>/dev/null || ls /usr/local/cuda/bin/nvcc 2>/dev/null)
GPU=$(nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>/dev/null | head -n 1)
row "GPU" "${GPU:-nvidia-smi found no GPU}"
row "nvcc" "$([ -n "$NVCC" ] && "$NVCC" --version | sed -n 's/.*release \([0-9.]*\).*/CUDA \1/p' || echo missing)"
if [ -z "$NVCC" ] && [ -z "$EMU" ]; then
    row "build" "FAILED: no nvcc (put the CUDA toolkit's bin on PATH)"
    finish 1
fi

# the engine's build dependencies (tools/install_deps.sh installs them)
missing=
for h in yajl/yajl_tree.h:libyajl-dev pcre2.h:libpcre2-dev utf8proc.h:libutf8proc-dev; do
    printf '#define PCRE2_CODE_UNIT_WIDTH 8\n#include <%s>\n' "${h%%:*}" \
        | ${CC:-cc} -E - > /dev/null 2>&1 || missing="$missing ${h#*:}"
done
if [ -n "$missing" ]; then
    row "build" "FAILED: missing headers; apt-get install$missing"
    finish 1
fi

# ---- 1. build ---------------------------------------------------------------
t=$(date +%s)
if timeout "$(left 240)" make -j"$JOBS" BUILD=$B NVCC="$NVCC" CUDA_ARCH="$ARCH" \
       $TARGETS > "$LOG/build.log" 2>&1; then
    what=$ARCH
    [ -n "$EMU" ] && what="the emulator"
    row "build (make -j$JOBS, $what)" "ok ($(( $(date +%s) - t )) s)"
else
    row "build" "FAILED, see build.log:"
    grep -E 'error|Error' "$LOG/build.log" | head -n 8 >> "$SUMMARY"
    finish 1
fi
export LLM_CUDA_LIBRARY="$PWD/$B/${EMU:+emu/}libllm_cuda.so"
STATUS=0

# ---- 2. kernel tests ----------------------------------------------------------
timeout "$(left 200)" $TEST_KERNELS > "$LOG/test_kernels.log" 2>&1
rc=$?
line=$(grep '^# kernel tests:' "$LOG/test_kernels.log" | tail -n 1)
if [ $rc -eq 0 ] && [ -n "$line" ]; then
    row "kernel tests vs reference/CPU" "ok: ${line#\# kernel tests: }"
    row "sampling on the device vs host" \
        "ok: $(grep -c '^ok .* sampling: ' "$LOG/test_kernels.log") checks (greedy, penalties, same u, logprobs, u grids)"
else
    STATUS=1
    row "kernel tests vs reference/CPU" "FAILED (rc $rc): ${line:-no summary line}"
    grep -E '^not ok|^# ' "$LOG/test_kernels.log" | head -n 12 | cut -c1-240 \
        >> "$SUMMARY"
fi

# ---- 3. end to end ------------------------------------------------------------
# Two 4-layer Llamas from make-model: f16 (the GPU runs it in f16, so greedy
# ties are rare) and bf16.
rm -rf "$B/e2e-tok"
mini_tokenizer "$B/e2e-tok"
PROMPT="The quick brown fox jumps over the lazy dog, then rests by the river bank until the sun goes down."
: > "$LOG/e2e.log"
for dt in f16 bf16; do
    M=$B/e2e-$dt
    rm -rf "$M"
    if ! "$B/llm" make-model --tokenizer "$B/e2e-tok" --out "$M" $E2E_SIZE \
           --rope-llama3 --dtype $dt --seed 7 >> "$LOG/e2e.log" 2>&1; then
        STATUS=1
        row "e2e ($dt)" "FAILED: make-model: $(tail -n 1 "$LOG/e2e.log")"
        continue
    fi
    echo "== e2e $dt" >> "$LOG/e2e.log"
    timeout "$(left 120)" "$B/gpu/e2e" --model "$M" --prompt "$PROMPT" \
        --device cuda:0 --tokens $E2E_TOKENS >> "$LOG/e2e.log" 2>&1
    rc=$?
    line=$(grep '^e2e:' "$LOG/e2e.log" | tail -n 1)
    if [ $rc -eq 0 ]; then
        row "e2e greedy, engine API ($dt)" "ok: ${line#e2e: }"
    else
        STATUS=1
        row "e2e greedy, engine API ($dt)" "FAILED (rc $rc): ${line:-no summary line}"
        sed -n "/^== e2e $dt/,\$p" "$LOG/e2e.log" | grep -E '^not ok|^# ' \
            | head -n 6 >> "$SUMMARY"
    fi
done
M=$B/e2e-f16
for d in cpu cuda:0; do
    timeout "$(left 60)" "$B/llm" generate --model "$M" --prompt "$PROMPT" \
        --max-tokens 32 --temperature 0 --json --device "$d" \
        > "$LOG/generate-$d.json" 2>> "$LOG/e2e.log"
done
ic=$(sed -n 's/.*"ids":\[\([0-9,]*\)\].*/\1/p' "$LOG/generate-cpu.json")
ig=$(sed -n 's/.*"ids":\[\([0-9,]*\)\].*/\1/p' "$LOG/generate-cuda:0.json")
if [ -n "$ic" ] && [ "$ic" = "$ig" ]; then
    row "e2e llm generate --device cuda:0" "ok: 32/32 ids = --device cpu (f16)"
elif [ -z "$ic" ] || [ -z "$ig" ]; then
    STATUS=1
    row "e2e llm generate --device cuda:0" \
        "FAILED: $(grep '^llm:' "$LOG/e2e.log" | tail -n 1 | cut -c1-200)"
else
    n=0
    for x in $(echo "$ic" | tr , ' '); do
        [ "$(echo "$ig" | cut -d, -f$((n + 1)))" = "$x" ] || break
        n=$((n + 1))
    done
    row "e2e llm generate --device cuda:0" \
        "$n/32 ids = --device cpu, then differs (near-tie? see the f16 row above)"
fi

# Seeded sampling (no top-k/top-p: both samplers walk the vocabulary in
# order) on the device and, from the same logits, on the host: the same ids
# unless a draw falls within the rounding of a boundary (GPU expf is within
# 2 ulp of the host's).  LLM_CUDA_STATS=1: the backend's count of rows
# sampled on the device and of logits rows sent to the host shows which
# path each run took (32 0, then 0 32).
for v in 1 0; do
    LLM_CUDA_STATS=1 LLM_CUDA_SAMPLE=$v timeout "$(left 60)" "$B/llm" generate \
        --model "$M" --prompt "$PROMPT" --max-tokens 32 --temperature 0.9 \
        --seed 5 --frequency-penalty 0.5 --presence-penalty 0.3 --json \
        --device cuda:0 > "$LOG/sample-$v.json" 2> "$LOG/sample-$v.err"
    cat "$LOG/sample-$v.err" >> "$LOG/e2e.log"
done
sd=$(sed -n 's/.*"ids":\[\([0-9,]*\)\].*/\1/p' "$LOG/sample-1.json")
sh=$(sed -n 's/.*"ids":\[\([0-9,]*\)\].*/\1/p' "$LOG/sample-0.json")
rows_of() {
    sed -n 's/^llm cuda:0: \([0-9]*\) rows sampled on the device, \([0-9]*\) rows of logits to the host$/\1 \2/p' "$1"
}
rd=$(rows_of "$LOG/sample-1.err")
rh=$(rows_of "$LOG/sample-0.err")
if [ -n "$sd" ] && [ "$sd" = "$sh" ] && [ "$rd" = "32 0" ] && [ "$rh" = "0 32" ]; then
    row "e2e seeded sampling on cuda:0" "ok: 32/32 ids sampled on the device ($rd) = the host sampler's on the same logits ($rh)"
else
    STATUS=1
    row "e2e seeded sampling on cuda:0" "FAILED: device [$sd] ($rd) host [$sh] ($rh)"
fi

# ---- 4. through nginx: llm_device cuda:0 with worker_processes 4 ------------
# t/api_cuda_workers.t on the real library (issue 13): one engine process
# opens the GPU once and serves every worker.  It needs Debian's nginx and
# nginx-dev on this machine (the module is built against them); without them
# the row says so and the status is unchanged (nothing here can install them).
NGINX_BIN=${TEST_NGINX_BINARY:-/usr/sbin/nginx}
if [ ! -x "$NGINX_BIN" ] \
   || { [ ! -f /usr/share/nginx/src/conf_flags ] && [ -z "${NGINX_SRC:-}" ]; }; then
    row "nginx, 4 workers on cuda:0" "not run: no nginx + nginx-dev on this machine"
elif ! timeout "$(left 90)" make BUILD=$B module \
         >> "$LOG/build.log" 2>&1; then
    STATUS=1
    row "nginx, 4 workers on cuda:0" "FAILED: the module does not build, see build.log"
else
    LLM_BUILD=$PWD/$B LLM_ROOT=$PWD timeout "$(left 120)" \
        perl t/api_cuda_workers.t > "$LOG/nginx.log" 2>&1
    rc=$?
    fails=$(grep -c '^not ok' "$LOG/nginx.log")
    oks=$(grep -c '^ok' "$LOG/nginx.log")
    if [ $rc -eq 0 ] && [ "$fails" -eq 0 ] && [ "$oks" -gt 0 ]; then
        row "nginx, 4 workers on cuda:0" "ok: $oks checks (one engine, one load, ids = the CPU's)"
    else
        STATUS=1
        row "nginx, 4 workers on cuda:0" "FAILED (rc $rc), $fails of $((oks + fails)) checks:"
        grep -E '^not ok|^# ' "$LOG/nginx.log" | head -n 8 | cut -c1-200 >> "$SUMMARY"
    fi
fi

# ---- 5. benchmark ---------------------------------------------------------------
timeout "$(left 240)" $BENCH > "$LOG/bench.log" 2>&1
rc=$?
if [ $rc -ne 0 ]; then
    STATUS=1
    row "benchmark" "FAILED (rc $rc): $(grep -v '^RESULT\|^#' "$LOG/bench.log" | tail -n 2)"
fi
if grep -q '^RESULT' "$LOG/bench.log"; then
    grep '^# .* SMs; ' "$LOG/bench.log" | head -n 1 | cut -c3- | cut -c1-160 \
        >> "$SUMMARY"
    row "bandwidth (D2D copy)" "$(val bandwidth_gbs) GB/s"
    row "bf16 GEMM rate (cuBLAS 8192^3)" "$(val gemm_tflops) TFLOP/s"
    d1=$(val decode1_tps); b1=$(val decode1_bound_tps)
    [ -n "$d1" ] && row "decode, 1 stream (goal >= 240)" \
        "$d1 tok/s = $(pct "$d1" "$b1") of the $b1 tok/s bandwidth bound"
    [ -n "$(val decode1_greedy_tps)" ] && row "decode, 1 stream, ids only" \
        "$(val decode1_greedy_tps) tok/s"
    [ -n "$(val decode1_cublas_tps)" ] && row "decode, 1 stream, cuBLAS GEMMs" \
        "$(val decode1_cublas_tps) tok/s"
    [ -n "$(val decode1_nograph_tps)" ] && row "decode, 1 stream, no graphs" \
        "$(val decode1_nograph_tps) tok/s"
    [ -n "$(val gemv_1row_gbs)" ] && row "projections at 1 row: GEMV/cuBLAS" \
        "$(val gemv_1row_gbs) / $(val cublas_1row_gbs) GB/s"
    [ -n "$(val gemv_4row_gbs)" ] && row "projections at 4 rows: GEMV/cuBLAS" \
        "$(val gemv_4row_gbs) / $(val cublas_4row_gbs) GB/s"
    tt=$(val ttft_1k_ms); pp=$(val prefill_1k_tps); pb=$(val prefill_1k_bound_tps)
    [ -n "$tt" ] && row "TTFT, 1k prompt (goal < 40 ms)" \
        "$tt ms; $pp tok/s = $(pct "$pp" "$pb") of the GEMM-rate bound $pb"
    [ -n "$(val prefill_b64_tps)" ] && row "prefill, 64 x 512 tokens" \
        "$(val prefill_b64_tps) tok/s"
    d64=$(val decode64_tps); b64=$(val decode64_bound_tps)
    [ -n "$d64" ] && row "decode, 64 streams (goal >= 5000)" \
        "$d64 tok/s = $(pct "$d64" "$b64") of the $b64 tok/s bound"
    [ -n "$(val decode64_greedy_tps)" ] && row "decode, 64 streams, ids only" \
        "$(val decode64_greedy_tps) tok/s"
    [ -n "$(val sample1_device_ms)" ] && row "sampled step, 1 row: device/host" \
        "$(val sample1_device_ms) / $(val sample1_host_ms) ms (top-k 50, top-p 0.9)"
    [ -n "$(val sample64_device_ms)" ] && row "sampled step, 64 rows: device/host" \
        "$(val sample64_device_ms) / $(val sample64_host_ms) ms (top-k 50, top-p 0.9)"
fi
finish $STATUS
