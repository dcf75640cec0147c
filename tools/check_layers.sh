#!/bin/sh
# Checks the engine's one-way dependencies (docs/architecture.md, "Layers"):
# a file may include headers of its own folder and of the folders below its
# own, never of a folder above it or beside it; the nginx module includes
# only the public API, llm.h.  Prints each include that breaks the rule and
# exits 1 if there is one.
#
#   engine/include (llm.h)  the public API: declarations only, any layer
#   engine/util             <- jinja, tokenizer, grammar
#                           <- model <- backend <- cpu, cuda/ <- engine/ (core)
cd "$(dirname "$0")/.." || exit 2

rank() {
    case $1 in
    include)                     echo 0 ;;
    util)                        echo 1 ;;
    jinja|tokenizer|grammar)     echo 2 ;;
    model)                       echo 3 ;;
    backend)                     echo 4 ;;
    cpu|cuda)                    echo 5 ;;
    core)                        echo 6 ;;
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
[ $bad = 0 ] && echo "check-layers: ok"
exit $bad
