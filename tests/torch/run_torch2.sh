#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# run_torch2.sh: the torch 2.x C++ backend (python/gradsync/torch/csrc) in the virtual
# environment scripts/install-deps.sh makes.
#   run_torch2.sh build LIBGRADSYNC SOURCE_DIR BUILD_DIR
#       configure and build the extension standalone into BUILD_DIR/torch-ext against that
#       torch (about a minute on 2 cores; ninja rebuilds only what changed).
#   run_torch2.sh test BUILD_DIR FILE [pytest args]
#       run tests/torch/FILE under that torch with the extension BUILD_DIR/torch-ext built.
# Exit status: 0 pass, 1 fail, 77 skip (no torch 2.x there), 2 usage.
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
PY="$(bash "$HERE/../../scripts/install-deps.sh" --torch-venv-path)/bin/python"
if ! "$PY" -c 'import sys, torch; sys.exit(int(torch.__version__.split(".")[0]) < 2)' \
    2>/dev/null; then
    echo "SKIPPED: no torch 2.x at $PY (scripts/install-deps.sh test installs it into" \
        "GRADSYNC_TORCH_VENV, default /var/cache/gradsync/torch-venv)"
    exit 77
fi
case "${1:-}" in
build)
    [ $# -eq 4 ] || { echo "usage: run_torch2.sh build LIBGRADSYNC SOURCE_DIR BUILD_DIR" >&2; exit 2; }
    lib=$2 src=$3 out=$4/torch-ext
    gen=()
    command -v ninja >/dev/null 2>&1 && gen=(-G Ninja)
    [ -f "$out/CMakeCache.txt" ] && gen=()
    cmake -S "$src/python/gradsync/torch/csrc" -B "$out" "${gen[@]}" \
        -DCMAKE_BUILD_TYPE=RelWithDebInfo -DGS_TORCH_PYTHON="$PY" \
        -DGRADSYNC_LIBRARY="$lib" -DGRADSYNC_INCLUDE="$src/include" \
        -DGRADSYNC_BUILD_INCLUDE="$4/include" || exit 1
    cmake --build "$out" -j "$(nproc)" || exit 1
    ls "$out"/_C*.so
    ;;
test)
    [ $# -ge 3 ] || { echo "usage: run_torch2.sh test BUILD_DIR FILE [pytest args]" >&2; exit 2; }
    ext=$(ls "$2"/torch-ext/_C*.so 2>/dev/null | head -n 1)
    if [ -z "$ext" ]; then
        echo "FAIL: the extension is not built in $2/torch-ext (the torch2_ext_build test builds it)"
        exit 1
    fi
    file=$3
    shift 3
    GRADSYNC_TORCH_EXTENSION=$ext exec "$PY" "$HERE/run.py" "$file" "$@"
    ;;
*)
    echo "usage: run_torch2.sh build|test ..." >&2
    exit 2
    ;;
esac
