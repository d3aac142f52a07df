#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# Side-by-side all-reduce comparison: gradsync (gs-bench via gsrun), Open MPI
# (mpi-bench, with the default BTL selection and with ob1 over tcp,self) and
# Gloo (gloo-bench via gsrun), all f32 sum, in place, same sizes, warm-up,
# iterations and timing rule (median over iterations of the slowest rank).
# Runs are interleaved (A B C D A B C D ...) for R rounds so that drift in
# machine load hits every library alike; then bench/compare/table.py prints
# one markdown table per size with each library's median busbw over rounds
# and the ratio gradsync/peer (> 1: gradsync is faster). Every run is bounded
# by timeout(1); a run that fails or times out is reported and left out.
#
# usage: compare.sh BUILD_DIR [-n RANKS] [-b MIN] [-e MAX] [--rounds R]
#                   [-w WARMUP] [-i ITERS] [--timeout SECONDS] [--out DIR]
#                   [--gloo-algos default,ring_chunked,halving_doubling] [--no-check]
set -u

usage() {
    echo "usage: compare.sh BUILD_DIR [-n RANKS] [-b MIN] [-e MAX] [--rounds R] [-w WARMUP]" >&2
    echo "         [-i ITERS] [--timeout SECONDS] [--out DIR] [--gloo-algos LIST] [--no-check]" >&2
    exit 2
}

[ $# -ge 1 ] || usage
case "$1" in -h|--help) usage ;; esac
BUILD=$1
shift
NRANKS=4
MINB=1K
MAXB=16M
ROUNDS=3
WARMUP=3
ITERS=10
TIMEOUT=600
OUTDIR=
GLOO_ALGOS=default
CHECK=(--check)

while [ $# -gt 0 ]; do
    case "$1" in
    -n) NRANKS=$2; shift 2 ;;
    -b) MINB=$2; shift 2 ;;
    -e) MAXB=$2; shift 2 ;;
    --rounds) ROUNDS=$2; shift 2 ;;
    -w) WARMUP=$2; shift 2 ;;
    -i) ITERS=$2; shift 2 ;;
    --timeout) TIMEOUT=$2; shift 2 ;;
    --out) OUTDIR=$2; shift 2 ;;
    --gloo-algos) GLOO_ALGOS=$2; shift 2 ;;
    --no-check) CHECK=(--no-check); shift ;;
    -h|--help) usage ;;
    *) echo "compare.sh: unknown argument '$1'" >&2; usage ;;
    esac
done
for v in "$NRANKS" "$ROUNDS" "$WARMUP" "$ITERS" "$TIMEOUT"; do
    case "$v" in ''|*[!0-9]*) echo "compare.sh: '$v' is not a number" >&2; exit 2 ;; esac
done

HERE=$(cd "$(dirname "$0")" && pwd)
GSRUN=$BUILD/tools/gsrun
GSBENCH=$BUILD/bench/gs-bench
MPIBENCH=$BUILD/bench/mpi-bench
GLOOBENCH=$BUILD/bench/gloo-bench
if [ ! -x "$GSRUN" ] || [ ! -x "$GSBENCH" ]; then
    echo "compare.sh: $GSRUN or $GSBENCH missing; build first" >&2
    exit 2
fi
if [ -z "$OUTDIR" ]; then
    OUTDIR=$(mktemp -d "${TMPDIR:-/tmp}/gs-compare.XXXXXX")
fi
mkdir -p "$OUTDIR"

COMMON=(-b "$MINB" -e "$MAXB" -f 2 -w "$WARMUP" -n "$ITERS" --inplace --csv)

# Each entry: label|kind. Labels become file names and table columns.
# gradsync-tcp: the same with GS_SHM=0 (its TCP path between local ranks).
RUNS=("gradsync|gs" "gradsync-tcp|gstcp")
if [ -x "$MPIBENCH" ] && command -v mpirun >/dev/null 2>&1; then
    RUNS+=("mpi-default|mpi" "mpi-ob1-tcp|mpitcp")
else
    echo "compare.sh: mpi-bench or mpirun not found; MPI left out" >&2
fi
if [ -x "$GLOOBENCH" ]; then
    IFS=, read -r -a algos <<< "$GLOO_ALGOS"
    for a in "${algos[@]}"; do
        RUNS+=("gloo-$a|gloo:$a")
    done
else
    echo "compare.sh: gloo-bench not built; Gloo left out" >&2
fi

run_one() { # label kind round
    local label=$1 kind=$2 round=$3
    local csv=$OUTDIR/${label}__r${round}.csv log=$OUTDIR/${label}__r${round}.log
    local -a cmd
    case "$kind" in
    gs)
        cmd=("$GSRUN" -n "$NRANKS" "$GSBENCH" allreduce "${COMMON[@]}" "${CHECK[@]}" --out "$csv") ;;
    gstcp)
        cmd=(env GS_SHM=0 "$GSRUN" -n "$NRANKS" "$GSBENCH" allreduce "${COMMON[@]}" "${CHECK[@]}"
             --out "$csv") ;;
    mpi)
        cmd=(mpirun --allow-run-as-root --oversubscribe -np "$NRANKS"
             "$MPIBENCH" "${COMMON[@]}" -o "$csv") ;;
    mpitcp)
        # shellcheck disable=SC2054 # "tcp,self" is one argument
        cmd=(mpirun --allow-run-as-root --oversubscribe -np "$NRANKS"
             --mca pml ob1 --mca btl tcp,self "$MPIBENCH" "${COMMON[@]}" -o "$csv") ;;
    gloo:*)
        local store=$OUTDIR/store_${label}_r${round}
        cmd=("$GSRUN" -n "$NRANKS" "$GLOOBENCH" --algo "${kind#gloo:}" "${COMMON[@]}"
             --store "$store" -o "$csv") ;;
    esac
    echo "$ ${cmd[*]}" > "$log"
    local t0=$SECONDS rc=0
    timeout -k 10 "$TIMEOUT" "${cmd[@]}" >> "$log" 2>&1 || rc=$?
    if [ $rc -ne 0 ]; then
        echo "compare.sh: round $round $label failed (exit $rc; 124 = timeout), see $log" >&2
        mv -f "$csv" "$csv.failed" 2>/dev/null
    else
        echo "round $round $label: $((SECONDS - t0)) s" >&2
    fi
}

echo "compare.sh: $NRANKS ranks, sizes $MINB..$MAXB, $ROUNDS rounds, results in $OUTDIR" >&2
for ((r = 1; r <= ROUNDS; r++)); do
    for entry in "${RUNS[@]}"; do
        run_one "${entry%%|*}" "${entry#*|}" "$r"
    done
done

python3 "$HERE/table.py" "$OUTDIR"
