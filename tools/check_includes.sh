#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Dependencies point one way. The layer table is the root CMakeLists.txt's
# `set(GS_LAYER_<layer> <layers it may include>)` rows (the one definition:
# the compiler enforces them, each layer's target seeing only its row's
# folders); this grep reads the same rows, so that an upward #include is
# named by file and line even in a layer this build leaves out (MPI, NCCL,
# CUDA). kernels/ (the CUDA sources and their launch headers, included by
# bare name) is the one layer outside src/; a nested layer's folder is its
# name with "_" read as "/" (algo_prim: src/algo/prim).
# Also refused: #include "../...", which would reach past the include roots
# through the including file's own folder, where the compiler cannot stop it.
#
# usage: check_includes.sh SRC_DIR   (the tree's src/; CMakeLists.txt and
# kernels/ are found beside it). Exit status 0 when every include points down.
set -uo pipefail
src=${1:?usage: check_includes.sh SRC_DIR}
top="$src/.."
table="$top/CMakeLists.txt"
fail=0

declare -A row=()
while read -r layer allowed; do
    row[$layer]=" $allowed "
done < <(sed -n 's/^set(GS_LAYER_\([a-z0-9_]*\) \([^)]*\))$/\1 \2/p' "$table")
if [ ${#row[@]} -eq 0 ]; then
    echo "error: no layer table (set(GS_LAYER_<layer> ...) rows) in $table"
    exit 1
fi

layers=$(printf '%s\n' "${!row[@]}" | sort | paste -sd ' ' -)
# The folder holding a layer's sources.
# A layer's folder is src/ and its name with "_" read as "/" (algo_prim: src/algo/prim).
layer_path() { echo "${1//_//}"; }
layer_dir() { if [ "$1" = kernels ]; then echo "$top/kernels"; else echo "$src/$(layer_path "$1")"; fi; }

for layer in $layers; do
    dir=$(layer_dir "$layer")
    [ -d "$dir" ] || continue
    for other in $layers; do
        case "${row[$layer]}" in *" $other "*) continue ;; esac
        if [ "$other" = kernels ]; then
            # kernels/ headers are included by their bare names.
            for h in "$top"/kernels/*.h; do
                [ -e "$h" ] || continue
                if grep -rnE "^[[:space:]]*#[[:space:]]*include[[:space:]]*\"$(basename "$h")\"" \
                    "$dir"; then
                    echo "error: $layer must not include kernels/ headers"
                    fail=1
                fi
            done
        elif grep -rnE "^[[:space:]]*#[[:space:]]*include[[:space:]]*\"$(layer_path "$other")/" "$dir"; then
            echo "error: $layer must not include $other/ headers"
            fail=1
        fi
    done
done
if grep -rnE '^[[:space:]]*#[[:space:]]*include[[:space:]]*"([^"]*/)?\.\./' "$src" "$top/kernels"; then
    echo "error: no #include \"../...\": name the header from its layer's folder"
    fail=1
fi
[ $fail -eq 0 ] && echo "include direction ok (layers: $layers)"
exit $fail
