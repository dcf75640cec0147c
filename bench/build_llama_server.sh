#!/bin/sh
# Adds llama.cpp's llama-server to the native build of bench/build_llamacpp.sh
# (same source bundle from npm node-llama-cpp, same flags, -DGGML_NATIVE=ON),
# for bench/serving_vs_llama_server.sh.  Reuses the libraries already built;
# a few minutes on 2 cores, cached in .deps/llama.cpp (not part of make test).
# usage: bench/build_llama_server.sh        prints the path of llama-server
set -eu
cd "$(dirname "$0")/.."
SRC=.deps/llama.cpp
BIN=$SRC/build/bin/llama-server

if [ -x "$BIN" ]; then
    echo "$PWD/$BIN"
    exit 0
fi
bench/build_llamacpp.sh > /dev/null
cmake -S "$SRC" -B "$SRC/build" -DLLAMA_BUILD_SERVER=ON -DLLAMA_BUILD_TOOLS=ON >&2
cmake --build "$SRC/build" -j"${JOBS:-2}" --target llama-server >&2
echo "$PWD/$BIN"
