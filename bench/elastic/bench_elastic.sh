#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# bench_elastic.sh: how long a shrink and a grow take (docs/reliability.md), median of N runs
# of 4 ranks, on loopback and across 4 hosts of the tests/net lab (root; skipped without it).
#   shrink  4 ranks of shrink_check, rank 2 raises SIGKILL mid all-reduce; the time is the
#           slowest survivor's gs_comm_shrink call (agreement, endpoints, new connections).
#   grow    3 ranks of grow_check grow to 4 with a new rank that was started first and waits
#           for rank 0's id; the times are rank 0's gs_comm_grow call (from its id to the
#           new communicator connected) and the new rank's (its hello to connected). Moving
#           the parameters is not in them: grow_check broadcasts 8 KiB afterwards.
# usage: bench_elastic.sh BUILD_DIR [--runs N] [--no-lab]
# Prints one line per measurement and the medians.
set -u
BUILD=${1:?usage: bench_elastic.sh BUILD_DIR [--runs N] [--no-lab]}
shift
RUNS=10
LAB=1
while [ $# -gt 0 ]; do
    case "$1" in
    --runs) RUNS=$2; shift 2 ;;
    --no-lab) LAB=0; shift ;;
    *) echo "bench_elastic.sh: unknown argument $1" >&2; exit 2 ;;
    esac
done
SHRINK=$BUILD/tests/integration/shrink_check
GROW=$BUILD/tests/integration/grow_check
for p in "$SHRINK" "$GROW"; do
    [ -x "$p" ] || { echo "bench_elastic.sh: $p is not built (make build)" >&2; exit 2; }
done
HERE=$(cd "$(dirname "$0")" && pwd)
TMPD=$(mktemp -d "${TMPDIR:-/tmp}/gs_elastic.XXXXXX")
PIDS=()
MODE=loopback
cleanup() {
    local p
    for p in "${PIDS[@]}"; do kill -KILL "$p" 2>/dev/null; done
    [ -n "${KEEP:-}" ] || rm -rf "$TMPD"
}
trap cleanup EXIT

# rank HOST R N PORT LOG PROG ARGS...: one old rank (RANK/WORLD_SIZE/MASTER_*), on loopback
# or in lab host HOST's namespace.
rank() {
    local h=$1 r=$2 n=$3 port=$4 log=$5 master=127.0.0.1 pre=()
    shift 5
    if [ "$MODE" = lab ]; then
        master=$(lab_addr 0)
        pre=(ip netns exec "${LAB_PREFIX}h$h")
    fi
    ${pre[@]+"${pre[@]}"} timeout 120 env RANK="$r" WORLD_SIZE="$n" MASTER_ADDR="$master" \
        MASTER_PORT="$port" GS_TIMEOUT_MS=20000 "$@" >"$log" 2>&1 &
    PIDS+=("$!")
}
joiner() {
    local h=$1 log=$2 pre=()
    shift 2
    [ "$MODE" = lab ] && pre=(ip netns exec "${LAB_PREFIX}h$h")
    ${pre[@]+"${pre[@]}"} timeout 120 env GS_TIMEOUT_MS=20000 "$@" >"$log" 2>&1 &
    PIDS+=("$!")
}
waitall() {
    local p
    for p in "${PIDS[@]}"; do wait "$p" 2>/dev/null; done
    PIDS=()
}
median() { sort -n | awk '{a[NR]=$1} END {if (NR == 0) print "-"; else if (NR % 2) print a[(NR+1)/2]; else print (a[NR/2]+a[NR/2+1])/2}'; }
ms_of() { grep -h "$1" "${@:2}" | sed -n 's/.* ms=\([0-9]*\).*/\1/p'; }

measure() {
    local i r port s g j
    : >"$TMPD/$MODE.shrink"
    : >"$TMPD/$MODE.grow0"
    : >"$TMPD/$MODE.growj"
    for ((i = 0; i < RUNS; i++)); do
        port=$((31000 + (i % 50) * 7 + RANDOM % 5))
        for ((r = 0; r < 4; r++)); do
            rank "$r" "$r" 4 "$port" "$TMPD/s.$r.log" "$SHRINK" --victim 2 --kill-at 3
        done
        waitall
        s=$(ms_of '^SHRINK' "$TMPD"/s.[013].log | sort -n | tail -n 1)
        rm -f "$TMPD/id"
        joiner 3 "$TMPD/g.3.log" "$GROW" --join --rank 3 --new-size 4 --idfile "$TMPD/id"
        for ((r = 0; r < 3; r++)); do
            rank "$r" "$r" 3 "$((port + 1))" "$TMPD/g.$r.log" "$GROW" --new-size 4 \
                --idfile "$TMPD/id"
        done
        waitall
        g=$(ms_of '^GROW rank=0 ' "$TMPD/g.0.log")
        j=$(ms_of '^GROW rank=new ' "$TMPD/g.3.log")
        if [ -z "$s" ] || [ -z "$g" ] || [ -z "$j" ] || grep -q '^FAIL' "$TMPD"/[sg].*.log; then
            echo "$MODE run $i: a rank failed:"
            grep -h '^FAIL\|WARN' "$TMPD"/[sg].*.log | head -n 10
            continue
        fi
        echo "$MODE run $i: shrink ${s} ms, grow ${g} ms (rank 0), ${j} ms (new rank)"
        echo "$s" >>"$TMPD/$MODE.shrink"
        echo "$g" >>"$TMPD/$MODE.grow0"
        echo "$j" >>"$TMPD/$MODE.growj"
    done
    echo "MEDIAN $MODE (4 ranks, $(wc -l <"$TMPD/$MODE.shrink") of $RUNS runs):" \
        "shrink $(median <"$TMPD/$MODE.shrink") ms," \
        "grow $(median <"$TMPD/$MODE.grow0") ms (rank 0), $(median <"$TMPD/$MODE.growj") ms (new rank)"
}

MODE=loopback
measure
if [ "$LAB" -eq 1 ]; then
    # shellcheck source-path=SCRIPTDIR source=../../tests/net/lib_lab.sh
    . "$HERE/../../tests/net/lib_lab.sh"
    trap 'cleanup; lab_cleanup' EXIT
    if bash "$NETLAB" check >/dev/null 2>&1; then
        lab_up 4
        MODE=lab
        measure
    else
        echo "lab: skipped (needs root, network namespaces and a bridge)"
    fi
fi
