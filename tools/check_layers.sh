#!/bin/sh
# Checks the engine's one-way dependencies (docs/architecture.md, "Layers"):
# a file may include headers of its own folder and of the folders below its
# own, never of a folder above it or beside it; the nginx module includes
# only the public API, llm.h; and no header of engine/ includes itself back
# through others.  Prints each include that breaks a rule and exits 1 if
# there is one.
#
#   engine/include (llm.h)  the public API: declarations only, any layer
#   engine/util             <- jinja, tokenizer, grammar, toolcall, reasoning
#                           <- model <- backend <- cpu, cuda/ <- engine/ (core)
#                           <- engine/ipc (the engine behind a socket)
cd "$(dirname "$0")/.." || exit 2

rank() {
    case $1 in
    include)                     echo 0 ;;
    util)                        echo 1 ;;
    jinja|tokenizer|grammar|toolcall|reasoning) echo 2 ;;
    model)                       echo 3 ;;
    backend)                     echo 4 ;;
    cpu|cuda)                    echo 5 ;;
    core)                        echo 6 ;;
    ipc)                         echo 7 ;;
    *)                           echo -1 ;;
    esac
}

# the folder a quoted include of FILE names: "dir/x.h" or a header of its own
folder_of() {  # $1 = including file's folder, $2 = included path
    case $2 in
    llm.h)  echo include ;;
    */*)    echo "${2%%/*}" ;;
    *)      if [ -f "engine/$2" ]; then echo core; else echo "$1"; fi ;;
    esac
}

bad=0
for f in $(find engine cuda -name '*.[ch]' -o -name '*.cu' -o -name '*.cuh' \
           | grep -v '^cuda/emu/' | sort); do
    case $f in
    engine/*/*) own=${f#engine/}; own=${own%%/*} ;;
    engine/*)   own=core ;;
    cuda/*)     own=cuda ;;
    esac
    r=$(rank "$own")
    for inc in $(sed -n 's/^[[:space:]]*#[[:space:]]*include[[:space:]]*"\([^"]*\)".*/\1/p' "$f"); do
        case $inc in cu_*|../*) [ "$own" = cuda ] && continue ;; esac
        g=$(folder_of "$own" "$inc")
        [ "$g" = "$own" ] && continue
        gr=$(rank "$g")
        if [ "$gr" -lt 0 ] || [ "$gr" -ge "$r" ]; then
            echo "check-layers: $f includes \"$inc\" ($g is not below $own)"
            bad=1
        fi
    done
done

for f in ngx_module/*.[ch]; do
    for inc in $(sed -n 's/^[[:space:]]*#[[:space:]]*include[[:space:]]*["<]\([^">]*\)[">].*/\1/p' "$f"); do
        case $inc in
        ngx_*|llm.h) ;;
        */*|*.h)
            if [ -e "engine/$inc" ] || find engine -name "$(basename "$inc")" | grep -q .; then
                echo "check-layers: $f includes \"$inc\" (the module sees only llm.h)"
                bad=1
            fi ;;
        esac
    done
done
# No include cycle: for each header of engine/, the headers it includes,
# directly or through others, never include it back.  A quoted include is
# found as the compiler finds it: beside the file, then in engine/include
# and engine/ (the -I options).
edges=$(mktemp) || exit 2
for f in $(find engine -name '*.h' | sort); do
    for inc in $(sed -n 's/^[[:space:]]*#[[:space:]]*include[[:space:]]*"\([^"]*\)".*/\1/p' "$f"); do
        for c in "$(dirname "$f")/$inc" "engine/include/$inc" "engine/$inc"; do
            if [ -f "$c" ]; then
                echo "$f $c"
                break
            fi
        done
    done
done > "$edges"
awk '
function visit(h,    n, i, next_h, to) {
    n = split(out[h], to, " ")
    for (i = 1; i <= n; i++) {
        next_h = to[i]
        if (!(next_h in seen)) {
            seen[next_h] = 1
            visit(next_h)
        }
    }
}
{ out[$1] = out[$1] " " $2 }
END {
    bad = 0
    for (h in out) {
        split("", seen)
        visit(h)
        if (h in seen) {
            print "check-layers: " h " includes itself back"
            bad = 1
        }
    }
    exit bad
}' "$edges" || bad=1
rm -f "$edges"

[ $bad = 0 ] && echo "check-layers: ok"
exit $bad
