#!/bin/sh
# Runs every test: the C unit tests (TAP binaries) and the t/*.t scripts.
# usage: tools/run_tests.sh [BUILD_DIR] [TEST...]
set -eu
cd "$(dirname "$0")/.."
BUILD=${1:-build}
[ $# -gt 0 ] && shift
export LLM_BUILD="$PWD/$BUILD"
export LLM_ROOT="$PWD"
export NODE_PATH="$PWD/node_modules"
# Debian's python3 has torch/numpy/jinja2; a pyenv python3 on PATH does not.
export LLM_PYTHON=/usr/bin/python3

if [ $# -gt 0 ]; then
    exec prove -v "$@"
fi
status=0
prove --exec '' "$BUILD"/t/* || status=1
prove t/*.t || status=1
exit $status
