#!/bin/sh
# The engine's unit tests (sampler, scheduler, engine: batching,
# preemption, prefix cache, speculation, cancellation, prompt logprobs)
# again under AddressSanitizer, from the build/asan tree that `make test`
# builds with `make asan`.
set -u
cd "${LLM_ROOT:-$(dirname "$0")/..}"
ASAN_BUILD=build/asan
if ! make -s BUILD=$ASAN_BUILD SANITIZE=address OPT=-O1 \
        $ASAN_BUILD/t/test_engine $ASAN_BUILD/t/test_sampler \
        $ASAN_BUILD/t/test_scheduler $ASAN_BUILD/t/test_prompt_logprobs \
        $ASAN_BUILD/llm >/dev/null 2>&1; then
    echo "1..1"
    echo "not ok 1 - ASan build of the engine tests"
    exit 1
fi
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=0:halt_on_error=1
export LLM_BUILD="$PWD/$ASAN_BUILD" LLM_ROOT="$PWD"
n=0
fail=0
for t in test_sampler test_scheduler test_engine test_prompt_logprobs; do
    n=$((n + 1))
    out=$($ASAN_BUILD/t/$t 2>&1)
    rc=$?
    if [ $rc -eq 0 ] && ! echo "$out" | grep -q -e "Sanitizer" -e "^not ok"
    then
        echo "ok $n - $t under AddressSanitizer"
    else
        echo "$out" | grep -v "^ok" | sed 's/^/# /' | head -40
        echo "not ok $n - $t under AddressSanitizer (exit $rc)"
        fail=1
    fi
done
echo "1..$n"
exit $fail
