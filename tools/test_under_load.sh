#!/bin/sh
# Runs the tests (tools/run_tests.sh: the unit tests, then t/*.t) while
# busy loops occupy every core, as on a busy CI machine: a test that passes
# only on a quiet machine fails here.  The loops end with the script,
# however it ends.
# usage: tools/test_under_load.sh [BUILD_DIR] [TEST...]
set -eu
cd "$(dirname "$0")/.."
BUILD=${1:-build}
[ $# -gt 0 ] && shift
n=$(nproc)
pids=""
trap 'kill $pids 2>/dev/null || true' EXIT INT TERM
i=0
while [ $i -lt "$n" ]; do
    sh -c 'while :; do :; done' &
    pids="$pids $!"
    i=$((i + 1))
done
echo "test-under-load: $n busy loops ($pids)"
tools/run_tests.sh "$BUILD" "$@"
