#!/bin/sh
# make test: the CUDA backend is compiled whenever nvcc exists, with no GPU
# needed (docs/cuda.md): libllm_cuda.so exports exactly its entry points,
# the GPU checks of t/gpu/run.sh are built, and without a GPU the CLI fails
# clearly on --device cuda:0 and serves from the CPU on --device auto.
# The host side (planning, the forward pass against the CPU backend,
# backend selection) is t/unit/test_cuda_ref.c.
BUILD=${LLM_BUILD:-build}
NVCC=$(command -v nvcc 2>/dev/null || ls /usr/local/cuda/bin/nvcc 2>/dev/null)
if [ -z "$NVCC" ]; then
    echo "1..0 # SKIP no nvcc: the CUDA backend is not built"
    exit 0
fi
if nm "$BUILD/llm" 2>/dev/null | grep -q __asan_init; then
    echo "1..0 # SKIP sanitizer build: cuda/ is built only without SANITIZE"
    exit 0
fi

tn=0
fails=0
ok() {                          # ok STATUS DESCRIPTION
    tn=$((tn + 1))
    if [ "$1" -eq 0 ]; then
        echo "ok $tn - $2"
    else
        echo "not ok $tn - $2"
        fails=$((fails + 1))
    fi
}

echo "1..7"
SO=$BUILD/libllm_cuda.so
test -f "$SO"
ok $? "make built $SO with $NVCC"

syms=$(nm -D --defined-only "$SO" 2>/dev/null | awk '{ print $3 }' | sort | tr '\n' ' ')
[ "$syms" = "llm_backend_cuda_create llm_backend_cuda_create_random llm_cuda_device_count " ]
ok $? "it exports exactly its entry points: $syms"

CUOBJDUMP=$(command -v cuobjdump 2>/dev/null || ls "$(dirname "$NVCC")/cuobjdump" 2>/dev/null)
if [ -n "$CUOBJDUMP" ]; then
    elfs=$("$CUOBJDUMP" --list-elf "$SO" 2>/dev/null)
    echo "$elfs" | grep -q sm_90a && echo "$elfs" | grep -q sm_80
    ok $? "it carries sm_80 and sm_90a code"
else
    tn=$((tn + 1))
    echo "ok $tn # SKIP no cuobjdump to list the architectures"
fi

test -x "$BUILD/gpu/test_kernels" && test -x "$BUILD/gpu/bench" && test -x "$BUILD/gpu/e2e"
ok $? "the GPU checks are built (test_kernels, bench, e2e)"

# the CLI on this machine: a GPU or not
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/tok"
# the same byte-level tokenizer t/gpu/run.sh writes, so no download is needed
sed -n '/^mini_tokenizer() {/,/^}/p' t/gpu/run.sh > "$tmp/mini.sh"
. "$tmp/mini.sh"
mini_tokenizer "$tmp/tok"
"$BUILD/llm" make-model --tokenizer "$tmp/tok" --out "$tmp/m" --layers 1 \
    --hidden 64 --heads 4 --kv-heads 2 > /dev/null 2>&1
ok $? "make-model with the byte-level test tokenizer"

if nvidia-smi -L 2>/dev/null | grep -q GPU; then
    "$BUILD/llm" generate --model "$tmp/m" --prompt hi --max-tokens 4 \
        --device cuda:0 > /dev/null 2> "$tmp/err"
    ok $? "llm generate --device cuda:0 runs on this machine's GPU"
else
    "$BUILD/llm" generate --model "$tmp/m" --prompt hi --max-tokens 4 \
        --device cuda:0 > /dev/null 2> "$tmp/err"
    rc=$?
    [ $rc -ne 0 ] && grep -q "^llm: llm_device cuda:0: " "$tmp/err"
    ok $? "no GPU: llm generate --device cuda:0 fails clearly: $(cat "$tmp/err")"
fi
"$BUILD/llm" generate --model "$tmp/m" --prompt hi --max-tokens 4 \
    --device auto > /dev/null 2>&1
ok $? "llm generate --device auto runs"
exit $((fails > 0))
