#!/bin/bash
# Builds build/ngx_http_llm_module.so, the way Debian builds its own nginx
# modules (dh nginx_mod): nginx's configure with Debian's flags from
# nginx-dev, then "make modules".  With NGINX_SRC=/path/to/nginx (a source
# tree of the same version as the nginx that loads the module) that tree is
# used instead.  Reconfigures only when config, this script or the flags
# change, so an unchanged tree rebuilds in well under a second.
#
# usage: tools/build_module.sh [BUILD_DIR=build] [SANITIZE]
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
BUILD=$(realpath -m "${1:-build}")
SANITIZE=${2:-}
OUT=$BUILD/nginx-module
LLM_LIB=$(realpath -m "${LLM_LIB:-$BUILD/libllm.a}")
export LLM_LIB

if [ -n "${NGINX_SRC:-}" ]; then
    SRC=$(realpath "$NGINX_SRC")
    CONFIGURE=./configure
    [ -x "$SRC/configure" ] || CONFIGURE=auto/configure
    CC_OPT="-g -O2 -fPIC"
    LD_OPT="-fPIC"
    FLAGS=(--with-compat --with-threads --with-http_v2_module)
else
    SRC=/usr/share/nginx/src
    if [ ! -f "$SRC/conf_flags" ]; then
        echo "build_module: $SRC/conf_flags is missing:" \
             "apt-get install nginx-dev, or set NGINX_SRC=" >&2
        exit 1
    fi
    CONFIGURE=./configure
    # shellcheck disable=SC1091
    . "$SRC/conf_flags"
    CC_OPT="$(dpkg-buildflags --get CFLAGS) -fPIC"
    CC_OPT="$CC_OPT $(dpkg-buildflags --get CPPFLAGS)"
    LD_OPT="$(dpkg-buildflags --get LDFLAGS) -fPIC"
    FLAGS=("${NGX_CONF_FLAGS[@]}")
fi

if [ -n "$SANITIZE" ]; then
    # -O1 keeps stacks readable; _FORTIFY_SOURCE does not mix with ASan
    CC_OPT="-g -O1 -fPIC -fno-omit-frame-pointer -fsanitize=$SANITIZE"
    LD_OPT="-fPIC -fsanitize=$SANITIZE"
fi

mkdir -p "$OUT"

# one build at a time in this directory (make test and make run may race)
exec 9> "$OUT/.lock"
flock 9

stamp="$OUT/.configured"
want=$(cat config tools/build_module.sh | md5sum | cut -d' ' -f1)
want="$want $SRC $CC_OPT $LD_OPT $LLM_LIB"

if [ ! -f "$OUT/Makefile" ] || [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]
then
    echo "build_module: configuring nginx in $OUT"
    (cd "$SRC" && $CONFIGURE --with-cc-opt="$CC_OPT" --with-ld-opt="$LD_OPT" \
        "${FLAGS[@]}" --add-dynamic-module="$ROOT" --builddir="$OUT") \
        > "$OUT/configure.log" 2>&1 || {
        tail -20 "$OUT/configure.log" >&2
        exit 1
    }
    echo "$want" > "$stamp"
fi

# the module's own Makefile does not know about the engine library
if [ -f "$OUT/ngx_http_llm_module.so" ] \
   && [ "$LLM_LIB" -nt "$OUT/ngx_http_llm_module.so" ]; then
    rm -f "$OUT/ngx_http_llm_module.so"
fi

make -s -f "$OUT/Makefile" -C "$SRC" modules

cp "$OUT/ngx_http_llm_module.so" "$BUILD/ngx_http_llm_module.so.tmp"
mv -f "$BUILD/ngx_http_llm_module.so.tmp" "$BUILD/ngx_http_llm_module.so"
