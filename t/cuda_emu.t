#!/bin/sh
# make test: the GPU path end to end on the CPU.  build/emu/libllm_cuda.so
# is the CUDA backend built against the emulator (cuda/emu, docs/cuda.md);
# pointed to by LLM_CUDA_LIBRARY, it is what the engine dlopens for
# --device cuda:0.  The same end-to-end check as t/gpu/run.sh, smaller:
# greedy generation through the engine identical to the CPU backend's,
# teacher-forced logits within tolerance, six seeded requests with
# different sampling parameters in one batch sampled on the device as the
# host sampler samples them (build/gpu/e2e), `llm generate --device cuda:0`
# giving the CPU's ids (sampled on the device: forward_sample, greedy),
# seeded sampling on the device (cuda/cu_sample.cu) reproducible and equal
# to the host sampler's on the same logits where the two walk the same
# order, `llm logits --device cuda:0` close to the CPU's, and out-of-memory
# errors at load that name what was needed.  Which path sampled is not
# inferred from the ids: LLM_CUDA_STATS=1 makes the backend count the rows
# whose ids forward_sample returned and the rows of logits it sent to the
# host, and each run's count is checked (all on the device, or with
# LLM_CUDA_SAMPLE=0 all on the host).
BUILD=${LLM_BUILD:-build}
LIB=$BUILD/emu/libllm_cuda.so
if [ ! -f "$LIB" ] || [ ! -x "$BUILD/gpu/e2e" ]; then
    echo "1..0 # SKIP $LIB or $BUILD/gpu/e2e not built (sanitizer build?)"
    exit 0
fi
export LLM_CUDA_LIBRARY="$LIB"
export LLM_EMU_MEM=$((1024 * 1024 * 1024))

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

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
sed -n '/^mini_tokenizer() {/,/^}/p' t/gpu/run.sh > "$tmp/mini.sh"
. "$tmp/mini.sh"
mini_tokenizer "$tmp/tok"
PROMPT="The quick brown fox jumps over the lazy dog."

echo "1..15"
for dt in f16 bf16; do
    # sampling through the engine (e2e's step 3) once, on f16
    sampling=1
    [ $dt = bf16 ] && sampling=0
    "$BUILD/llm" make-model --tokenizer "$tmp/tok" --out "$tmp/$dt" \
        --layers 2 --hidden 256 --heads 4 --kv-heads 2 --intermediate 512 \
        --rope-llama3 --dtype $dt --seed 7 > /dev/null 2>&1
    "$BUILD/gpu/e2e" --model "$tmp/$dt" --prompt "$PROMPT" --device cuda:0 \
        --tokens 20 --sampling $sampling > "$tmp/e2e-$dt.log" 2>&1
    rc=$?
    [ $rc -ne 0 ] && sed 's/^/# /' "$tmp/e2e-$dt.log"
    ok $rc "$dt: $(grep '^e2e:' "$tmp/e2e-$dt.log" || echo 'e2e failed')"
done

for d in cpu cuda:0; do
    LLM_CUDA_STATS=1 "$BUILD/llm" generate --model "$tmp/f16" --prompt "$PROMPT" \
        --max-tokens 12 --temperature 0 --json --device "$d" \
        > "$tmp/gen-$d.json" 2> "$tmp/gen-$d.err"
    ok $? "llm generate --device $d $(grep -v ' rows sampled on the device, ' "$tmp/gen-$d.err")"
done
# "SAMPLED LOGITS": the rows of a run's LLM_CUDA_STATS line
rows() {
    sed -n 's/^llm cuda:0: \([0-9]*\) rows sampled on the device, \([0-9]*\) rows of logits to the host$/\1 \2/p' "$1"
}
[ "$(rows "$tmp/gen-cuda:0.err")" = "12 0" ]
ok $? "greedy on cuda:0: the 12 ids came from forward_sample, no logits row went to the host ($(rows "$tmp/gen-cuda:0.err"))"
ic=$(sed -n 's/.*"ids":\[\([0-9,]*\)\].*/\1/p' "$tmp/gen-cpu.json")
ig=$(sed -n 's/.*"ids":\[\([0-9,]*\)\].*/\1/p' "$tmp/gen-cuda:0.json")
[ -n "$ic" ] && [ "$ic" = "$ig" ]
ok $? "the same 12 greedy ids on cuda:0 and cpu: [$ig] [$ic]"

# Sampling on the device.  Without top-k/top-p both samplers walk the
# candidates in vocabulary order with the same u from the request's seeded
# generator: on the same logits (LLM_CUDA_SAMPLE=0 sends them to the host
# sampler) the ids are the same, penalties and logit_bias included.
gen_ids() {                     # gen_ids OUT ARGS...: the ids, or FAILED
    out=$1; shift
    LLM_CUDA_STATS=1 "$BUILD/llm" generate --model "$tmp/f16" --prompt "$PROMPT" \
        --max-tokens 16 --json --device cuda:0 "$@" > "$tmp/g.json" \
        2> "$tmp/g.err" || { cat "$tmp/g.err"; echo FAILED; }
    sed -n 's/.*"ids":\[\([0-9,]*\)\].*/\1/p' "$tmp/g.json" > "$out"
    rows "$tmp/g.err" > "$out.rows"
}
pen="--temperature 0.9 --seed 5 --frequency-penalty 0.5 --presence-penalty 0.3 --logit-bias 101:3,32:-2"
gen_ids "$tmp/sd" $pen
LLM_CUDA_SAMPLE=0 gen_ids "$tmp/sh" $pen
[ -s "$tmp/sd" ] && cmp -s "$tmp/sd" "$tmp/sh" \
    && [ "$(cat "$tmp/sd.rows")" = "16 0" ] && [ "$(cat "$tmp/sh.rows")" = "0 16" ]
ok $? "seeded sampling with penalties and logit_bias: the same 16 ids sampled on the device ($(cat "$tmp/sd.rows")) and by the host from its logits ($(cat "$tmp/sh.rows")): [$(cat "$tmp/sd")] [$(cat "$tmp/sh")]"
# With top-k/top-p the host walks the kept tokens in sorted order, the
# device in vocabulary order: the same distribution, other ids for a seed;
# each reproducible.
tk="--temperature 1.0 --top-k 40 --top-p 0.9 --seed 11"
gen_ids "$tmp/k1" $tk
gen_ids "$tmp/k2" $tk
LLM_CUDA_SAMPLE=0 gen_ids "$tmp/kh" $tk
[ -s "$tmp/k1" ] && cmp -s "$tmp/k1" "$tmp/k2"
ok $? "seeded top-k/top-p sampling on the device is reproducible: [$(cat "$tmp/k1")]"
[ "$(cat "$tmp/k1.rows")" = "16 0" ] && [ "$(cat "$tmp/k2.rows")" = "16 0" ] \
    && [ "$(cat "$tmp/kh.rows")" = "0 16" ]
ok $? "... sampled on the device: rows sampled there, rows of logits to the host: $(cat "$tmp/k1.rows"), $(cat "$tmp/k2.rows"); with LLM_CUDA_SAMPLE=0 $(cat "$tmp/kh.rows") (ids [$(cat "$tmp/kh")])"

ids=256,84,104,101,32,113,117,105,99,107,32,98,114,111,119,110
"$BUILD/llm" logits --model "$tmp/bf16" --ids $ids --out "$tmp/l-cpu" \
    --device cpu > /dev/null 2>&1
"$BUILD/llm" logits --model "$tmp/bf16" --ids $ids --out "$tmp/l-gpu" \
    --device cuda:0 > /dev/null 2>&1
ok $? "llm logits --device cuda:0"
# max |gpu - cpu| over max |cpu| of the float32 files, in od + awk
rel=$(od -An -v -f "$tmp/l-cpu" | tr -s ' ' '\n' | grep . > "$tmp/a"
      od -An -v -f "$tmp/l-gpu" | tr -s ' ' '\n' | grep . > "$tmp/b"
      paste "$tmp/a" "$tmp/b" | awk '
          { d = $1 - $2; if (d < 0) d = -d; if (d > dm) dm = d
            a = $1 < 0 ? -$1 : $1; if (a > am) am = a; n++ }
          END { if (n != 16 * 258 || am == 0) print "bad"; else printf "%.3g", dm / am }')
[ "$rel" != bad ] && awk -v r="$rel" 'BEGIN { exit !(r < 3e-2) }'
ok $? "llm logits: 16 x 258 logits on cuda:0 within 3e-2 of the CPU's (rel $rel)"
# out of device memory at load: messages that say how much was needed
LLM_EMU_MEM=$((400 * 1024 * 1024)) "$BUILD/llm" generate --model "$tmp/f16" \
    --prompt hi --max-tokens 2 --device cuda:0 > /dev/null 2> "$tmp/oom1"
[ $? -ne 0 ] && grep -q "the weights need [0-9]* MiB .* but only [0-9]* of 400 MiB are free" "$tmp/oom1"
ok $? "weights that do not fit: $(cat "$tmp/oom1")"
LLM_EMU_MEM=$((600 * 1024 * 1024)) "$BUILD/llm" generate --model "$tmp/f16" \
    --prompt hi --max-tokens 2 --device cuda:0 > /dev/null 2> "$tmp/oom2"
[ $? -ne 0 ] && grep -q "the KV cache needs 128 MiB (8192 blocks.*llm_max_model_len" "$tmp/oom2"
ok $? "a KV cache that does not fit: $(cat "$tmp/oom2")"

# block formats: cuda:0 refuses them by name; auto serves them on the CPU
"$BUILD/llm" generate --model "$tmp/f16" --prompt hi --max-tokens 2 \
    --device cuda:0 --weights q4_k > /dev/null 2> "$tmp/q1"
[ $? -ne 0 ] && grep -q "cuda backend: quantized weights are not supported (lm_head is Q4_K)" "$tmp/q1"
ok $? "llm_weights q4_k on cuda:0: $(cat "$tmp/q1")"
"$BUILD/llm" generate --model "$tmp/f16" --prompt "$PROMPT" --max-tokens 8 \
    --temperature 0 --device auto --weights q8_0 --json > "$tmp/q2" 2>&1 &&
"$BUILD/llm" generate --model "$tmp/f16" --prompt "$PROMPT" --max-tokens 8 \
    --temperature 0 --device cpu --weights q8_0 --json > "$tmp/q3" 2>&1 &&
[ "$(grep -o '"ids":[^]]*' "$tmp/q2")" = "$(grep -o '"ids":[^]]*' "$tmp/q3")" ]
ok $? "llm_weights q8_0 with llm_device auto and a GPU: the CPU's ids"
exit $((fails > 0))
