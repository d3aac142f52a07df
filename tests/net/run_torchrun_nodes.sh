#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# run_torchrun_nodes.sh: torchrun across two hosts, as people run it. A lab of 2
# namespaced hosts; on each, `torchrun --nnodes 2 --nproc-per-node 2 --rdzv-backend c10d
# --rdzv-endpoint <host 0>:29400` (torch 2.x from PyPI, the virtual environment
# scripts/install-deps.sh makes). Host 0's agent hosts the TCPStore; every gradsync rank
# bootstraps through it (core/bootstrap_store.c) with nothing else set. Two cases:
#   c       coll_check on the 4 ranks passes, every rank through torchrun's store
#           (the c10d rendezvous).
#   python  docs/python.md's demo (gradsync.Communicator) on the 4 ranks (the static
#           rendezvous: --master-addr, --master-port, --node-rank).
# usage: run_torchrun_nodes.sh PYTHON COLL_CHECK   (PYTHON "venv": install-deps.sh's)
# Exit status: 0 pass, 1 fail, 77 skip (not root, no netns/bridge, no torch 2.x), 2 usage.
# shellcheck source-path=SCRIPTDIR
set -u
[ $# -eq 2 ] || { echo "usage: run_torchrun_nodes.sh PYTHON COLL_CHECK" >&2; exit 2; }
PY=$1
COLL=$2
HERE=$(cd "$(dirname "$0")" && pwd)
[ "$PY" = venv ] && PY="$(bash "$HERE/../../scripts/install-deps.sh" --torch-venv-path)/bin/python"
if ! "$PY" -c 'import sys, torch; sys.exit(int(torch.__version__.split(".")[0]) < 2)' \
    2>/dev/null; then
    echo "SKIPPED: no torch 2.x at $PY (scripts/install-deps.sh test installs it)"
    exit 77
fi
TORCHRUN=$(dirname "$PY")/torchrun
# shellcheck source=lib_lab.sh
. "$HERE/lib_lab.sh"

lab_up 2
MASTER=$(lab_addr 0)
FAILED=0
fail() { echo "FAIL: $*"; FAILED=1; }

# job NAME STYLE PROG ARGS...: one torchrun per host, in the background, then wait for
# both (each under timeout: a hang is a failure, not a stuck test). STYLE c10d: the c10d
# rendezvous at host 0 (the lab's hosts share one host name, from which torchrun would
# otherwise guess which agent hosts the store and the address workers reach it at: is_host
# and --local-addr say so); static: --master-addr,
# --master-port and --node-rank, node 0's agent hosting the store.
job() {
    local name=$1 style=$2 h pids=() rc how
    shift 2
    for h in 0 1; do
        if [ "$style" = c10d ]; then
            how=(--rdzv-backend c10d --rdzv-endpoint "$MASTER:29400" --rdzv-id "$name"
                --rdzv-conf "is_host=$((h == 0))" --local-addr "$(lab_addr "$h")")
        else
            how=(--master-addr "$MASTER" --master-port 29401 --node-rank "$h")
        fi
        ip netns exec "${LAB_PREFIX}h$h" timeout 150 env GS_TIMEOUT_MS=30000 GS_DEBUG=INFO \
            GS_DEBUG_SUBSYS=BOOT OMP_NUM_THREADS=1 \
            "$TORCHRUN" --nnodes 2 --nproc-per-node 2 "${how[@]}" "$@" \
            >"$LAB_TMP/$name.$h.log" 2>&1 </dev/null &
        pids+=("$!")
        LAB_PID+=("$!")
    done
    for h in 0 1; do
        wait "${pids[h]}"
        rc=$?
        [ "$rc" -eq 0 ] || fail "$name: host $h's torchrun exited $rc"
    done
}
show() {
    local f
    for f in "$LAB_TMP/$1".*.log; do
        echo "---- $(basename "$f")"
        grep -v '^W[0-9]\{4\} \|^ *$\|traceback\|error_file' "$f" | head -n 40
    done
}

job c c10d --no-python "$COLL" --colls allreduce,broadcast,allgather --counts 1,1031
nstore=$(cat "$LAB_TMP"/c.*.log | grep -c "GS INFO BOOT bootstrapping through torchrun's store")
grep -q "0 failed" "$LAB_TMP"/c.*.log || fail "c: no rank reported '0 failed'"
[ "$nstore" -eq 4 ] || fail "c: $nstore of 4 ranks bootstrapped through torchrun's store"
if [ "$FAILED" -eq 0 ]; then
    echo "PASS c: 2 hosts x 2 ranks under torchrun's c10d rendezvous, coll_check passed"
else
    show c
    exit 1
fi

job python static "$HERE/../torch/torchrun_demo.py"
n=$(cat "$LAB_TMP"/python.*.log | grep -c "DEMO [0-3] 4 1.5 \[0, 1, 2, 3\]")
[ "$n" -eq 4 ] || fail "python: $n of 4 ranks printed the right result"
if [ "$FAILED" -eq 0 ]; then
    echo "PASS python: 2 hosts x 2 ranks of the Communicator demo under torchrun"
else
    show python
fi
exit "$FAILED"
