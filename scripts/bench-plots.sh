#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# The recorded runs behind docs/bench.md's plots, and the plots themselves.
#
#   scripts/bench-plots.sh                   redraw docs/bench/*.png from the
#                                            recorded data (docs/bench/data)
#   scripts/bench-plots.sh --run BUILD_DIR   take the runs again first (about
#                                            15 minutes on a busy 2-core VM:
#                                            algorithms 2, codecs 10, compare 2),
#                                            then redraw
#
# The runs, all on one host, 4 ranks, f32 sum, in place; every number is a
# median over rounds of gs-bench's (or mpi-bench's, gloo-bench's) median over
# iterations of the slowest rank:
#   algos-shm.json, algos-tcp.json  gs-bench allreduce --algo
#       auto,ring,tree,rd,rabenseifner --rounds R over shared memory and over
#       loopback TCP (GS_SHM=0)
#   codecs-tcp/NAME__rN.json  gs-bench allreduce --codec NAME (lossy codecs
#       biased without it, qsgd, sign, topk and randk, with --ef) and "plain"
#       (no --codec) over loopback TCP, one process per codec, interleaved
#       over R rounds
#   compare-4r/LABEL__rN.csv  bench/compare/compare.sh's CSV files (gradsync,
#       gradsync-tcp, Open MPI default and ob1/tcp, Gloo default)
#   meta.txt  the machine, and per run: when it ended, the commit, the load
#       average at its start and end, the rounds
#
# usage: bench-plots.sh [--run BUILD_DIR] [--only algos|codecs|compare]
#                       [--rounds R] [--quick] [--data DIR] [--img DIR] [--python PY]
#   --only    take one of the three runs (with --run) or draw its plots only
#   --quick   small sizes, 1 round: a smoke test of the script, not results
#   --python  the interpreter with matplotlib (default /usr/bin/python3)
set -u

ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=
ONLY=
ROUNDS=3
QUICK=0
DATA=$ROOT/docs/bench/data
IMG=$ROOT/docs/bench
PY=/usr/bin/python3
NP=4

usage() {
    echo "usage: bench-plots.sh [--run BUILD_DIR] [--only algos|codecs|compare] [--rounds R]" >&2
    echo "         [--quick] [--data DIR] [--img DIR] [--python PY]" >&2
    exit 2
}
while [ $# -gt 0 ]; do
    case "$1" in
    --run) BUILD=${2:?}; shift 2 ;;
    --only) ONLY=${2:?}; shift 2 ;;
    --rounds) ROUNDS=${2:?}; shift 2 ;;
    --quick) QUICK=1; shift ;;
    --data) DATA=${2:?}; shift 2 ;;
    --img) IMG=${2:?}; shift 2 ;;
    --python) PY=${2:?}; shift 2 ;;
    -h|--help) usage ;;
    *) echo "bench-plots.sh: unknown argument '$1'" >&2; usage ;;
    esac
done
case "$ONLY" in ''|algos|codecs|compare) ;; *) usage ;; esac
case "$ROUNDS" in ''|*[!0-9]*|0) echo "bench-plots.sh: --rounds wants a number" >&2; exit 2 ;; esac
want() { [ -z "$ONLY" ] || [ "$ONLY" = "$1" ]; }

# Sizes and iterations: bounded so that each run takes a few minutes on 2 cores.
if [ $QUICK = 1 ]; then
    ROUNDS=1
    ALGO_SZ=(-b 4K -e 256K -f 4 -w 1 -n 3)
    CODEC_SZ=(-b 64K -e 1M -f 4 -w 1 -n 3)
    CMP_SZ=(-b 4K -e 256K -w 1 -i 3)
else
    ALGO_SZ=(-b 4K -e 64M -f 4 -w 3 -n 10)
    CODEC_SZ=(-b 64K -e 64M -f 4 -w 2 -n 5)
    CMP_SZ=(-b 4K -e 64M -w 2 -i 5)
fi
CODECS="plain none fp16 bf16 int8 qsgd:ef sign:ef topk:ef randk:ef"

loadavg() { cut -d' ' -f1 /proc/loadavg; }

# meta.txt: one line per run, "RUN key=value ...", and a "machine" line.
meta_line() { # run load-at-start
    echo "$1 date=$(date -u +%Y-%m-%dT%H:%MZ) commit=$COMMIT load=$2-$(loadavg) rounds=$ROUNDS" \
        "quick=$QUICK"
}
meta_get() { # run key
    awk -v run="$1" -v key="$2" '$1 == run { for (i = 2; i <= NF; i++) if (index($i, key "=") == 1) \
        print substr($i, length(key) + 2) }' "$DATA/meta.txt" 2>/dev/null | tail -1
}

run_all() {
    local gsrun=$BUILD/tools/gsrun bench=$BUILD/bench/gs-bench
    if [ ! -x "$gsrun" ] || [ ! -x "$bench" ]; then
        echo "bench-plots.sh: $gsrun or $bench missing; build first" >&2
        exit 2
    fi
    mkdir -p "$DATA"
    COMMIT=$(git -C "$ROOT" describe --always --dirty 2>/dev/null || echo unknown)
    local meta=$DATA/meta.txt
    echo "machine cpus=$(nproc) model=$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 |
        sed 's/^ *//; s/ /_/g')" > "$meta.new"
    local l0 t shm
    if want algos; then
        for t in shm tcp; do
            l0=$(loadavg)
            shm=1
            [ $t = tcp ] && shm=0
            echo "bench-plots.sh: algorithms over $t" >&2
            env GS_SHM=$shm "$gsrun" -n $NP --timeout 900 \
                "$bench" allreduce "${ALGO_SZ[@]}" --inplace \
                --algo auto,ring,tree,rd,rabenseifner --rounds "$ROUNDS" --json \
                --out "$DATA/algos-$t.json" || { echo "bench-plots.sh: algos $t failed" >&2; exit 1; }
            meta_line "algos_$t" "$l0" >> "$meta.new"
        done
    fi
    if want codecs; then
        rm -rf "$DATA/codecs-tcp"
        mkdir -p "$DATA/codecs-tcp"
        l0=$(loadavg)
        local r c name
        local -a opt
        for ((r = 1; r <= ROUNDS; r++)); do
            for c in $CODECS; do
                name=${c%%:*}
                opt=()
                [ "$name" = plain ] || opt=(--codec "$name")
                [ "$c" = "${c%:ef}" ] || { opt+=(--ef); name=$name+ef; }
                echo "bench-plots.sh: round $r codec $name" >&2
                env GS_SHM=0 "$gsrun" -n $NP --timeout 300 "$bench" allreduce "${CODEC_SZ[@]}" \
                    --inplace "${opt[@]}" --json --out "$DATA/codecs-tcp/${name}__r$r.json" ||
                    { echo "bench-plots.sh: codec $name failed" >&2; exit 1; }
            done
        done
        meta_line codecs_tcp "$l0" >> "$meta.new"
    fi
    if want compare; then
        local tmp
        tmp=$(mktemp -d "${TMPDIR:-/tmp}/gs-bench-plots.XXXXXX")
        l0=$(loadavg)
        bash "$ROOT/bench/compare/compare.sh" "$BUILD" -n $NP "${CMP_SZ[@]}" --rounds "$ROUNDS" \
            --gloo-algos default --out "$tmp" || echo "bench-plots.sh: compare.sh exit $?" >&2
        rm -rf "$DATA/compare-4r"
        mkdir -p "$DATA/compare-4r"
        cp "$tmp"/*__r*.csv "$DATA/compare-4r/" ||
            { echo "bench-plots.sh: no compare results in $tmp" >&2; exit 1; }
        rm -rf "$tmp"
        meta_line compare "$l0" >> "$meta.new"
    fi
    # Keep the lines of the runs not taken this time.
    if [ -f "$meta" ]; then
        local line
        while IFS= read -r line; do
            grep -q "^${line%% *} " "$meta.new" || echo "$line" >> "$meta.new"
        done < "$meta"
    fi
    mv "$meta.new" "$meta"
}

note() { # run -> the caption line under its plots
    local cpus over=""
    cpus=$(meta_get machine cpus)
    [ "${cpus:-0}" -lt $NP ] && over=" (oversubscribed)"
    echo "$NP ranks on $cpus vCPUs$over, loopback, load average" \
         "$(meta_get "$1" load) (shared VM), commit $(meta_get "$1" commit); median over" \
         "$(meta_get "$1" rounds) rounds of the median over iterations of the slowest rank"
}

plot_all() {
    local plot=$ROOT/scripts/plot-bench
    [ -f "$DATA/meta.txt" ] || { echo "bench-plots.sh: no $DATA/meta.txt: take the runs first (--run BUILD_DIR)" >&2; return 1; }
    mkdir -p "$IMG"
    if want algos; then
        local t what
        for t in shm tcp; do
            what="shared memory"
            [ $t = tcp ] && what="loopback TCP"
            "$PY" "$plot" -o "$IMG/algos-$t.png" --dpi 90 --note "$(note "algos_$t")" \
                --title "all-reduce, $NP ranks, $what: busbw per algorithm (auto's pick labelled)" \
                "$DATA/algos-$t.json" || return 1
        done
        "$PY" "$plot" -o "$IMG/algos-auto-ratio.png" --dpi 90 \
            --note "$(note algos_shm) (TCP run: load average $(meta_get algos_tcp load))" \
            --title "all-reduce, $NP ranks: auto's busbw over the fastest forced algorithm's" \
            --ratio "shm gradsync auto/best:shm" --ratio "tcp gradsync auto/best:tcp" \
            "$DATA/algos-shm.json=shm" "$DATA/algos-tcp.json=tcp" || return 1
    fi
    if want codecs; then
        local -a in=()
        local f n
        for f in "$DATA"/codecs-tcp/*__r*.json; do
            n=$(basename "$f")
            n=${n%%__r*}
            [ "$n" = plain ] && n="no --codec"
            in+=("$f=$n")
        done
        "$PY" "$plot" -o "$IMG/codecs-tcp.png" --dpi 90 --note "$(note codecs_tcp)" \
            --title "all-reduce, $NP ranks, loopback TCP: effective busbw per codec (+ef: error feedback)" \
            "${in[@]}" || return 1
    fi
    if want compare; then
        "$PY" "$plot" -o "$IMG/compare-4r.png" --dpi 90 --note "$(note compare)" \
            --title "all-reduce, $NP ranks: gradsync, Open MPI and Gloo (bench/compare)" \
            "$DATA/compare-4r" || return 1
        "$PY" "$plot" -o "$IMG/compare-4r-ratio.png" --dpi 90 --note "$(note compare)" \
            --title "all-reduce, $NP ranks: gradsync / peer busbw (> 1: gradsync faster)" \
            --ratio gradsync/mpi-default --ratio gradsync/gloo-default \
            --ratio gradsync-tcp/mpi-ob1-tcp --ratio gradsync-tcp/gloo-default \
            "$DATA/compare-4r" || return 1
    fi
}

[ -z "$BUILD" ] || run_all
plot_all || exit 1
