#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# bench_scale.sh: what a job of N ranks on this host costs to start, the
# shared-memory budget (GS_SHM_MAX_BYTES, docs/design.md "Memory that grows
# with the ranks") beside the old full-size pair rings and beside TCP only.
# For each N and mode it runs `gsrun -n N examples/allreduce 16` (init, one
# tiny all-reduce, destroy) ROUNDS times, interleaving the modes, and prints
# a markdown table: the median wall time and the peak shared memory the job
# held (Shmem in /proc/meminfo, which counts /dev/shm and the host segment's
# memfd, sampled every 20 ms, over the value before the run).
#
# Modes:
#   budget  GS_SHM_MAX_BYTES=auto (the default)
#   full    GS_SHM_MAX_BYTES=1T: every pair at GS_SHM_BYTES, as before the budget
#   tcp     GS_SHM=0
# A mode whose full-size rings would not fit half of /dev/shm is skipped.
#
# usage: bench_scale.sh BUILD [--ranks 16,64,128] [--modes budget,full,tcp] [--rounds 3]
set -u

BUILD=${1:?usage: bench_scale.sh BUILD [--ranks LIST] [--modes LIST] [--rounds K]}
shift
RANKS=16,64,128
MODES=budget,full,tcp
ROUNDS=3
while [ $# -gt 0 ]; do
    case $1 in
    --ranks) RANKS=$2; shift 2 ;;
    --modes) MODES=$2; shift 2 ;;
    --rounds) ROUNDS=$2; shift 2 ;;
    *) echo "bench_scale.sh: unknown argument $1" >&2; exit 2 ;;
    esac
done
GSRUN=$BUILD/tools/gsrun
PROG=$BUILD/examples/allreduce
[ -x "$GSRUN" ] && [ -x "$PROG" ] || { echo "bench_scale.sh: build $BUILD first (make build)" >&2; exit 2; }
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT

shmem_kib() { awk '/^Shmem:/ {print $2}' /proc/meminfo; }
shm_total_kib() { df -k --output=size /dev/shm | tail -n 1 | tr -d ' '; }

mode_env() {
    case $1 in
    budget) echo "GS_SHM_MAX_BYTES=auto" ;;
    full) echo "GS_SHM_MAX_BYTES=1T" ;;
    tcp) echo "GS_SHM=0" ;;
    esac
}

# one N MODE: prints "seconds peak_kib rc"
one() {
    local n=$1 mode=$2 base peak t0 t1 pid rc cur
    base=$(shmem_kib)
    peak=$base
    t0=$(date +%s%N)
    env "$(mode_env "$mode")" "$GSRUN" -n "$n" --timeout 300 "$PROG" 16 >"$TMP/run.log" 2>&1 &
    pid=$!
    # Sample until the job ends (bounded by gsrun's own 300 s limit).
    while kill -0 "$pid" 2>/dev/null; do
        cur=$(shmem_kib)
        [ "$cur" -gt "$peak" ] && peak=$cur
        sleep 0.02
    done
    wait "$pid"
    rc=$?
    t1=$(date +%s%N)
    echo "$(((t1 - t0) / 1000000)) $((peak - base)) $rc"
}

median() { sort -n | awk '{a[NR]=$1} END {if (NR == 0) print "-"; else print a[int((NR + 1) / 2)]}'; }

echo "# bench_scale: $(nproc) cores, /dev/shm $(($(shm_total_kib) / 1024)) MiB, $ROUNDS rounds, $(date -u +%FT%TZ)"
echo
echo "| ranks | mode | init + 1 all-reduce (median ms) | peak shared memory (MiB) | failed runs |"
echo "| ---: | --- | ---: | ---: | ---: |"
IFS=, read -r -a ns <<<"$RANKS"
IFS=, read -r -a ms <<<"$MODES"
for n in "${ns[@]}"; do
    for m in "${ms[@]}"; do
        : >"$TMP/$n.$m"
    done
    for ((r = 0; r < ROUNDS; r++)); do
        for m in "${ms[@]}"; do
            # Full rings: 2 MiB + 8 KiB a pair; skip what would not fit half of /dev/shm.
            if [ "$m" = full ] &&
                [ $((n * (n - 1) / 2 * 2056)) -gt $(($(shm_total_kib) / 2)) ]; then
                continue
            fi
            one "$n" "$m" >>"$TMP/$n.$m"
        done
    done
    for m in "${ms[@]}"; do
        if [ ! -s "$TMP/$n.$m" ]; then
            echo "| $n | $m | skipped (needs more than half of /dev/shm) | | |"
            continue
        fi
        ms_med=$(awk '{print $1}' "$TMP/$n.$m" | median)
        kib_med=$(awk '{print $2}' "$TMP/$n.$m" | median)
        bad=$(awk '$3 != 0' "$TMP/$n.$m" | wc -l)
        echo "| $n | $m | $ms_med | $((kib_med / 1024)) | $bad |"
    done
done
