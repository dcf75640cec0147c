#!/bin/sh
# Prepares the llama.cpp side of the reference checks, without compiling
# llama.cpp: the source (for gguf-py and the headers) is checked out of the
# git bundle that npm node-llama-cpp ships, and t/ref/llama_logits.c is linked
# against node-llama-cpp's prebuilt CPU libraries.
#
# usage: t/ref/setup_llamacpp.sh [OUTDIR]      (default build/ref)
# Prints four shell assignments: LLAMA_SRC, LLAMA_LOGITS, LLAMA_QUANTIZE,
# GGML_BACKEND_DIR.
set -eu
cd "$(dirname "$0")/../.."
OUT=${1:-build/ref}
BUNDLE=node_modules/node-llama-cpp/llama/gitRelease.bundle
LIBS=$PWD/node_modules/@node-llama-cpp/linux-x64/bins/linux-x64

for f in "$BUNDLE" "$LIBS/libllama.v0.4.0.so"; do
    [ -e "$f" ] || { echo "setup_llamacpp: $f missing (run tools/install_deps.sh)" >&2; exit 1; }
done
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
SRC=$OUT/llama.cpp
if [ ! -f "$SRC/gguf-py/gguf/__init__.py" ]; then
    rm -rf "$SRC"
    git clone -q --no-checkout "$BUNDLE" "$SRC" 2>/dev/null
    # only the parts we use: 4 MB instead of the whole tree
    git -C "$SRC" checkout -q HEAD -- include ggml/include gguf-py
fi
# the two tools linked against the prebuilt libraries: logits (and greedy
# steps) of a GGUF, and llama.cpp's own quantizer
for tool in llama_logits llama_quantize; do
    BIN=$OUT/$tool
    if [ ! -x "$BIN" ] || [ t/ref/$tool.c -nt "$BIN" ]; then
        ${CC:-gcc} -O2 -o "$BIN" t/ref/$tool.c -I"$SRC/include" \
            -I"$SRC/ggml/include" -L"$LIBS" -l:libllama.v0.4.0.so \
            -l:libggml.v0.4.0.so -l:libggml-base.so -Wl,-rpath,"$LIBS"
    fi
done
echo "LLAMA_SRC=$SRC"
echo "LLAMA_LOGITS=$OUT/llama_logits"
echo "LLAMA_QUANTIZE=$OUT/llama_quantize"
echo "GGML_BACKEND_DIR=$LIBS"
