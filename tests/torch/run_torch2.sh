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
#   run_torch2.sh pip SOURCE_DIR
#       `pip install --no-build-isolation ./python` as a torch user runs it (into a
#       temporary --target, without CUDA for speed), then 2 ranks of
#       init_process_group("gradsync") with nothing set but PYTHONPATH=that target: the
#       extension and libgradsync.so.0 must come from inside the installed package.
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
pip)
    [ $# -eq 2 ] || { echo "usage: run_torch2.sh pip SOURCE_DIR" >&2; exit 2; }
    work=$(mktemp -d "${TMPDIR:-/tmp}/gs-torch-pip.XXXXXX")
    trap 'rm -rf "$work"' EXIT
    unset GRADSYNC_LIBRARY GRADSYNC_TORCH_EXTENSION PYTHONPATH LD_LIBRARY_PATH CMAKE_ARGS
    if ! "$PY" -m pip install -q --disable-pip-version-check --no-build-isolation --no-deps \
        --target "$work/site" --config-settings=cmake.define.GS_WITH_CUDA=OFF \
        "$2/python" </dev/null; then
        echo "FAIL: pip install --no-build-isolation ./python failed"
        exit 1
    fi
    ls "$work"/site/gradsync/torch/_C*.so >/dev/null 2>&1 ||
        { echo "FAIL: the installed package has no gradsync/torch/_C*.so"; exit 1; }
    cat >"$work/two.py" <<'PYEOF'
import os, sys, torch, torch.distributed as dist
import gradsync.torch
from gradsync.torch import _c10d
rank = int(os.environ["RANK"])
dist.init_process_group("gradsync", rank=rank, world_size=2)
site = os.environ["SITE"]
ext = _c10d.extension().__file__
assert ext.startswith(site), "the extension came from %s, not %s" % (ext, site)
x = torch.ones(3) * (rank + 1)
dist.all_reduce(x)
assert torch.all(x == 3), x
dist.destroy_process_group()
print("rank %d: all_reduce through %s" % (rank, os.path.relpath(ext, site)))
PYEOF
    port=$("$PY" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
    pids=()
    for r in 0 1; do
        SITE="$work/site" PYTHONPATH="$work/site" RANK=$r WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 \
            MASTER_PORT=$port GS_TIMEOUT_MS=30000 timeout 120 "$PY" "$work/two.py" &
        pids+=($!)
    done
    rc=0
    for p in "${pids[@]}"; do wait "$p" || rc=1; done
    [ $rc -eq 0 ] || { echo "FAIL: a rank of the installed backend failed"; exit 1; }
    echo "PASS: pip install --no-build-isolation ./python gives the torch 2.x backend"
    ;;
*)
    echo "usage: run_torch2.sh build|test|pip ..." >&2
    exit 2
    ;;
esac
