#!/bin/sh
# Trains the demo model (tools/demo_model.py) into DIR unless DIR/training.json
# says it is there already: `make run` and `make test` train it once per
# machine (the Makefile retrains when the recipe changes).  The result is an
# ordinary Hugging Face model directory; DIR/training.json holds what the run
# measured (steps, tokens, final loss, wall and CPU seconds, load average).
#
# usage: tools/make_demo_model.sh DIR
#   env: DEMO_STEPS (the recipe's default), DEMO_THREADS=2
set -eu
cd "$(dirname "$0")/.."
DIR=$(realpath -m "${1:-build/demo-model}")
FORTUNES=/usr/share/games/fortunes

if [ ! -f "$FORTUNES/wisdom" ]; then
    echo "make_demo_model: $FORTUNES/wisdom is missing (Debian package fortunes;" \
         "tools/install_deps.sh installs it)" >&2
    exit 1
fi

# Debian's torch calls whatever libblas.so.3 the alternatives system points
# at; the reference BLAS runs at ~2 GFLOP/s, OpenBLAS (libopenblas0-pthread)
# at ~60 on 2 cores: use it whatever the alternative says.
OPENBLAS=/usr/lib/x86_64-linux-gnu/openblas-pthread
if [ -f "$OPENBLAS/libblas.so.3" ]; then
    LD_LIBRARY_PATH="$OPENBLAS${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
    export LD_LIBRARY_PATH
fi
# the threads of torch and OpenBLAS sleep instead of spinning while they
# wait: on a busy machine spinning costs more than it saves
export OMP_WAIT_POLICY=PASSIVE

steps=""
[ -n "${DEMO_STEPS:-}" ] && steps="--steps $DEMO_STEPS"
echo "make_demo_model: training the demo model into $DIR (a few minutes on 2 cores;" \
     "load average $(cut -d' ' -f1-3 /proc/loadavg))" >&2
rm -rf "$DIR.tmp"
mkdir -p "$DIR.tmp"
# shellcheck disable=SC2086
/usr/bin/python3 tools/demo_model.py --out "$DIR.tmp" --fortunes "$FORTUNES" \
    --threads "${DEMO_THREADS:-2}" --corpus-out "$DIR.tmp/corpus.txt" $steps \
    > "$DIR.tmp/training.json.part"
mv "$DIR.tmp/training.json.part" "$DIR.tmp/training.json"
rm -rf "$DIR"
mv "$DIR.tmp" "$DIR"
echo "make_demo_model: $(cat "$DIR/training.json")" >&2
