#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# bench_scale.sh: what a job of N ranks on this host costs to start and to
# hold (docs/scale.md). For each N, shared-memory mode and connection mode it
# runs `gsrun -n N examples/allreduce 16 --report` (init, one tiny
# all-reduce, destroy) ROUNDS times, interleaving the modes, and prints a
# markdown table of medians over the rounds:
#
#   wall       the job's wall time, launch to exit (what `time gsrun` says),
#              less the --hold (below)
#   first, start  launch to the moment the first and the last rank entered main
#              (TSV only)
#   ready      launch to the moment the last rank's gs_comm_init_env returned
#   init       the longest gs_comm_init_env of any rank (each rank times its own)
#   init CPU   the CPU time a rank's init used, all its threads (median over ranks;
#              rank 0's in the TSV too: it also serves the rendezvous)
#   1st AR     from the last rank ready to the last rank done with the all-reduce
#              (in lazy mode this includes connecting the algorithm's peers)
#   fds        open descriptors per rank after init and after the all-reduce
#              (median over ranks; max in the TSV), /proc/self/fd, 3 of them stdio
#   threads    per rank (/proc/self/status Threads:)
#   RSS, peak  VmRSS after the all-reduce and VmHWM (median over ranks)
#   shm        the peak shared memory the job held: Shmem in /proc/meminfo
#              (/dev/shm and the host segment's memfd), sampled every 20 ms,
#              over the value before the run
#
# Each rank measures itself (examples/allreduce.c --report) right after
# init and right after the all-reduce, then waits --hold ms (default 300)
# before gs_comm_destroy, so that no peer's exit has closed sockets yet when
# the others count theirs. A TSV with one row per (N, shm
# mode, connection mode) goes to --tsv (default BUILD/bench_scale.tsv) for
# bench/scale/simulate.py.
#
# Shared-memory modes (--modes):
#   budget  GS_SHM_MAX_BYTES=auto (the default: shared memory on)
#   full    GS_SHM_MAX_BYTES=1T: every pair at GS_SHM_BYTES, as before the budget
#   tcp     GS_SHM=0
# A full mode whose pair rings would not fit half of /dev/shm is skipped.
# Connection modes (--connect), GS_CONNECT:
#   eager   every peer connected at init (the full mesh)
#   lazy    connections on first use (issue 22)
#   -       GS_CONNECT left unset (the library's default)
# A library that does not know GS_CONNECT warns and connects eagerly; the
# table marks such rows "(unknown)" and the TSV's connect_known column is 0.
#
# usage: bench_scale.sh BUILD [--ranks 8,16,32,64,128] [--modes budget,tcp]
#                             [--connect eager,lazy] [--rounds 3] [--tsv FILE]
#                             [--label TEXT] [--hold MS] [--timeout SEC]
set -u

usage="usage: bench_scale.sh BUILD [--ranks LIST] [--modes LIST] [--connect LIST] [--rounds K] [--tsv FILE] [--label TEXT] [--hold MS] [--timeout SEC]"
BUILD=${1:?$usage}
shift
RANKS=8,16,32,64,128
MODES=budget,tcp
CONNECT=eager,lazy
ROUNDS=3
TSV=
LABEL=
TIMEOUT=300
HOLD=300
while [ $# -gt 0 ]; do
    case $1 in
    --ranks) RANKS=$2; shift 2 ;;
    --modes) MODES=$2; shift 2 ;;
    --connect) CONNECT=$2; shift 2 ;;
    --rounds) ROUNDS=$2; shift 2 ;;
    --tsv) TSV=$2; shift 2 ;;
    --label) LABEL=$2; shift 2 ;;
    --timeout) TIMEOUT=$2; shift 2 ;;
    --hold) HOLD=$2; shift 2 ;;
    -h | --help) echo "$usage"; exit 0 ;;
    *) echo "bench_scale.sh: unknown argument $1" >&2; echo "$usage" >&2; exit 2 ;;
    esac
done
GSRUN=$BUILD/tools/gsrun
PROG=$BUILD/examples/allreduce
if [ ! -x "$GSRUN" ] || [ ! -x "$PROG" ]; then
    echo "bench_scale.sh: build $BUILD first (make build)" >&2
    exit 2
fi
[ -n "$TSV" ] || TSV=$BUILD/bench_scale.tsv
if [ -z "$LABEL" ]; then
    # The commit of the source tree BUILD was configured from, "+dirty" when the
    # library (src/, include/) has changes there.
    src=$(sed -n 's/^CMAKE_HOME_DIRECTORY:INTERNAL=//p' "$BUILD/CMakeCache.txt" 2>/dev/null)
    LABEL=$(git -C "${src:-.}" rev-parse --short HEAD 2>/dev/null || echo unknown)
    if [ "$LABEL" != unknown ] && ! git -C "$src" diff --quiet HEAD -- src include 2>/dev/null; then
        LABEL=$LABEL+dirty
    fi
fi
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT

shmem_kib() {
    local k v _
    while read -r k v _; do
        [ "$k" = Shmem: ] && { echo "$v"; return; }
    done </proc/meminfo
    echo 0
}
shm_total_kib() { df -k --output=size /dev/shm | tail -n 1 | tr -d ' '; }

shm_env() {
    case $1 in
    budget) echo "GS_SHM_MAX_BYTES=auto" ;;
    full) echo "GS_SHM_MAX_BYTES=1T" ;;
    tcp) echo "GS_SHM=0" ;;
    *) echo "bench_scale.sh: unknown mode $1 (budget, full, tcp)" >&2; exit 2 ;;
    esac
}

conn_env() {
    case $1 in
    eager | lazy) echo "GS_CONNECT=$1" ;;
    # env needs an assignment: this one sets no GS_ variable, so GS_CONNECT is left unset
    -) echo "BENCH_SCALE_CONNECT=unset" ;;
    *) echo "bench_scale.sh: unknown connection mode $1 (eager, lazy, -)" >&2; exit 2 ;;
    esac
}

# one N MODE CONN: appends one line of per-run numbers to $TMP/N.MODE.CONN:
# wall_ms ready_ms init_ms_max init_ms_med ar_ms fds_init fds fds_max threads rss_kib hwm_kib
# shm_mib rc nreports connect_known start_ms first_ms cpu_med cpu_rank0
one() {
    local n=$1 mode=$2 conn=$3 base peak t0 t1 pid rc cur log=$TMP/run.log
    base=$(shmem_kib)
    peak=$base
    t0=$(date +%s%N)
    env "$(shm_env "$mode")" "$(conn_env "$conn")" \
        "$GSRUN" -n "$n" --timeout "$TIMEOUT" "$PROG" 16 --report --hold "$HOLD" >"$log" 2>&1 &
    pid=$!
    # Sample until the job ends (bounded by gsrun's own --timeout).
    while kill -0 "$pid" 2>/dev/null; do
        cur=$(shmem_kib)
        [ "$cur" -gt "$peak" ] && peak=$cur
        sleep 0.02
    done
    wait "$pid"
    rc=$?
    t1=$(date +%s%N)
    known=1
    grep -q "unknown environment variable GS_CONNECT" "$log" && known=0
    [ "$conn" = - ] && known=1
    # Ranks' "scale:" lines (gsrun prefixes "[rank] ") to one line of numbers.
    reports=$(grep -c 'scale: ' "$log")
    if [ "$rc" != 0 ] || [ "$reports" != "$n" ]; then
        # Say why on stderr, with the last lines of the job's output.
        echo "bench_scale.sh: $n ranks, $mode, $conn: exit $rc, $reports of $n ranks reported:" >&2
        grep -v 'scale: \|averaged' "$log" | tail -n 5 | sed 's/^/    /' >&2
    fi
    grep -o 'scale: .*' "$log" | awk -v t0="$t0" -v t1="$t1" -v rc="$rc" \
        -v shm=$(((peak - base) / 1024)) -v known="$known" -v hold="$HOLD" '
        function med(a, k,   i, j, t) {
            for (i = 2; i <= k; i++) { t = a[i]; for (j = i - 1; j >= 1 && a[j] > t; j--) a[j + 1] = a[j]; a[j + 1] = t }
            return a[int((k + 1) / 2)]
        }
        {
            for (i = 2; i <= NF; i++) { split($i, kv, "="); v[kv[1]] = kv[2] }
            k++
            im[k] = v["init_ms"]; cp[k] = v["init_cpu_ms"]; fi[k] = v["fds_init"]; fd[k] = v["fds"]; th[k] = v["threads"]
            rs[k] = v["rss_kib"]; hw[k] = v["hwm_kib"]
            if (v["init_ms"] > imax) imax = v["init_ms"]
            if (v["rank"] == 0) cpu0 = v["init_cpu_ms"]
            if (v["fds"] > fmax) fmax = v["fds"]
            if (v["init_done_ns"] > ready) ready = v["init_done_ns"]
            if (v["start_ns"] > start) start = v["start_ns"]
            if (first == "" || v["start_ns"] < first) first = v["start_ns"]
            if (v["allreduce_done_ns"] > done) done = v["allreduce_done_ns"]
        }
        END {
            wall = (t1 - t0) / 1e6 - hold
            if (k == 0) { printf "%d - - - - - - - - - - %d %d 0 %d - - - -\n", wall, shm, rc, known; exit }
            printf "%d %.1f %.1f %.1f %.2f %d %d %d %d %d %d %d %d %d %d %.1f %.1f %.2f %.2f\n", wall,
                (ready - t0) / 1e6, imax, med(im, k), (done - ready) / 1e6, med(fi, k), med(fd, k),
                fmax, med(th, k), med(rs, k), med(hw, k), shm, rc, k, known, (start - t0) / 1e6,
                (first - t0) / 1e6, med(cp, k), cpu0
        }' >>"$TMP/$n.$mode.$conn"
}

mib() { if [ "$1" = - ]; then echo -; else awk -v k="$1" 'BEGIN {printf "%.1f", k / 1024}'; fi; }

# Column C (1-based) of FILE, median over the rounds that reported ("-" if none).
median_col() {
    awk -v c="$2" '$c != "-" {print $c}' "$1" | sort -g |
        awk '{a[NR]=$1} END {if (NR == 0) print "-"; else print a[int((NR + 1) / 2)]}'
}

nsocks=${GS_TCP_NSOCKS:-2}
load0=$(cut -d' ' -f1-3 /proc/loadavg)
echo "# bench_scale: $(nproc) cores, load average $load0, /dev/shm $(($(shm_total_kib) / 1024)) MiB, ulimit -n $(ulimit -n), GS_TCP_NSOCKS=$nsocks, $ROUNDS rounds, build $LABEL, $(date -u +%FT%TZ)"
echo
echo "| ranks | shm | connect | wall (ms) | ready (ms) | init (ms) | init CPU (ms) | 1st AR (ms) | fds after init | fds after AR | threads | RSS (MiB) | peak RSS (MiB) | shm (MiB) | failed |"
echo "| ---: | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"
{
    printf "# bench_scale.sh\tcores=%s\tnsocks=%s\trounds=%s\thold_ms=%s\tbuild=%s\tdate=%s\tload=%s\n" \
        "$(nproc)" "$nsocks" "$ROUNDS" "$HOLD" "$LABEL" "$(date -u +%FT%TZ)" "$load0"
    printf "n\tshm\tconnect\tconnect_known\trounds_ok\twall_ms\tfirst_ms\tstart_ms\tready_ms\tinit_ms_max\tinit_ms_med\tallreduce_ms\tfds_init\tfds\tfds_max\tthreads\trss_kib\thwm_kib\tshm_mib\tfailed\tinit_cpu_ms_med\tinit_cpu_ms_rank0\n"
} >"$TSV"
IFS=, read -r -a ns <<<"$RANKS"
IFS=, read -r -a ms <<<"$MODES"
IFS=, read -r -a cs <<<"$CONNECT"
for m in "${ms[@]}"; do shm_env "$m" >/dev/null || exit 2; done
for c in "${cs[@]}"; do conn_env "$c" >/dev/null || exit 2; done
for n in "${ns[@]}"; do
    for m in "${ms[@]}"; do
        for c in "${cs[@]}"; do
            : >"$TMP/$n.$m.$c"
        done
    done
    for ((r = 0; r < ROUNDS; r++)); do
        for m in "${ms[@]}"; do
            # Full rings: 2 MiB + 8 KiB a pair; skip what would not fit half of /dev/shm.
            if [ "$m" = full ] &&
                [ $((n * (n - 1) * 2056 / 2)) -gt $(($(shm_total_kib) / 2)) ]; then
                continue
            fi
            for c in "${cs[@]}"; do
                one "$n" "$m" "$c"
            done
        done
    done
    for m in "${ms[@]}"; do
        for c in "${cs[@]}"; do
            f=$TMP/$n.$m.$c
            if [ ! -s "$f" ]; then
                echo "| $n | $m | $c | skipped (needs more than half of /dev/shm) | | | | | | | | | | | |"
                continue
            fi
            # Rounds that ran clean: rc 0 and a report from every rank.
            awk -v n="$n" '$13 == 0 && $14 == n' "$f" >"$f.ok"
            ok=$(wc -l <"$f.ok")
            bad=$(($(wc -l <"$f") - ok))
            [ "$ok" -gt 0 ] || cp "$f" "$f.ok" # no clean round: show what the failed ones did
            known=$(median_col "$f" 15)
            label=$c
            [ "$known" = 0 ] && label="$c (unknown)"
            for col in 1 2 3 4 5 6 7 8 9 10 11 12 16 17 18 19; do
                v[col]=$(median_col "$f.ok" "$col")
            done
            echo "| $n | $m | $label | ${v[1]} | ${v[2]} | ${v[3]} | ${v[18]} | ${v[5]} | ${v[6]} | ${v[7]} | ${v[9]} | $(mib "${v[10]}") | $(mib "${v[11]}") | ${v[12]} | $bad |"
            printf "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n" \
                "$n" "$m" "$c" "$known" "$ok" "${v[1]}" "${v[17]}" "${v[16]}" "${v[2]}" "${v[3]}" "${v[4]}" \
                "${v[5]}" "${v[6]}" "${v[7]}" "${v[8]}" "${v[9]}" "${v[10]}" "${v[11]}" "${v[12]}" \
                "$bad" "${v[18]}" "${v[19]}" >>"$TSV"
        done
    done
done
echo
echo "Load average at the end: $(cut -d' ' -f1-3 /proc/loadavg) (at the start: $load0; a busy machine"
echo "inflates every time here). TSV: $TSV (bench/scale/simulate.py --tsv $TSV)"
