#!/bin/sh
# Builds llama.cpp natively (-DGGML_NATIVE=ON) from the source bundle that
# npm node-llama-cpp ships, for bench/cpu_vs_llamacpp.sh.  The native build is
# the strongest llama.cpp on this machine (the prebuilt npm libraries prefill
# about 2x slower), so it is the peer the engine is measured against.
# About 9 minutes on 2 cores; cached in .deps/llama.cpp (not part of make test).
# usage: bench/build_llamacpp.sh        prints the path of llama-bench
set -eu
cd "$(dirname "$0")/.."
SRC=.deps/llama.cpp
BUNDLE=node_modules/node-llama-cpp/llama/gitRelease.bundle
BIN=$SRC/build/bin/llama-bench

if [ -x "$BIN" ]; then
    echo "$PWD/$BIN"
    exit 0
fi
if [ ! -d "$SRC/.git" ]; then
    [ -f "$BUNDLE" ] || { echo "build_llamacpp: $BUNDLE missing (run tools/install_deps.sh)" >&2; exit 1; }
    mkdir -p .deps
    git clone -q "$BUNDLE" "$SRC" >&2
fi
cmake -S "$SRC" -B "$SRC/build" -DCMAKE_BUILD_TYPE=Release -DGGML_NATIVE=ON \
      -DLLAMA_CURL=OFF -DLLAMA_OPENSSL=OFF -DLLAMA_BUILD_TESTS=OFF \
      -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_SERVER=OFF >&2
cmake --build "$SRC/build" -j"${JOBS:-2}" --target llama-bench >&2
echo "$PWD/$BIN"
