#!/bin/sh
# `make run`: trains the demo model under build/ if missing
# (tools/make_demo_model.sh), then runs
# nginx in the foreground with conf/demo.conf and a private prefix
# (build/demo/) on 127.0.0.1:8000.
#
# usage: tools/run_demo.sh [BUILD_DIR=build]
set -eu
cd "$(dirname "$0")/.."
ROOT=$PWD
BUILD=$(realpath -m "${1:-build}")
PREFIX=$BUILD/demo
MODEL=$BUILD/demo-model
NGINX=${NGINX:-/usr/sbin/nginx}

if [ ! -f "$MODEL/training.json" ]; then
    tools/make_demo_model.sh "$MODEL"
fi

mkdir -p "$PREFIX/conf" "$PREFIX/logs" "$PREFIX/temp" "$PREFIX/modules" \
         "$PREFIX/models"
ln -sf "$BUILD/ngx_http_llm_module.so" "$PREFIX/modules/"
# the CUDA backend, when it was built, is found next to the module
if [ -f "$BUILD/libllm_cuda.so" ]; then
    ln -sf "$BUILD/libllm_cuda.so" "$PREFIX/modules/"
fi
ln -sfn "$MODEL" "$PREFIX/models/demo-model"
cp conf/demo.conf "$PREFIX/conf/nginx.conf"

# Started as root, nginx runs its workers as "nobody", who may not be able
# to read a checkout under /root: the demo keeps them as the caller.
USER_DIRECTIVE=""
if [ "$(id -u)" = 0 ]; then
    USER_DIRECTIVE="user root;"
fi

cat <<MSG

ngx_llm serves the demo model on http://127.0.0.1:8000 (Ctrl-C stops it).
Try:

  curl http://127.0.0.1:8000/v1/chat/completions \\
    -H 'Content-Type: application/json' \\
    -d '{"model": "demo", "max_tokens": 40,
         "messages": [{"role": "user", "content": "Tell me something wise."}]}'

MSG

exec "$NGINX" -p "$PREFIX/" -c conf/nginx.conf -e stderr -g "$USER_DIRECTIVE"
