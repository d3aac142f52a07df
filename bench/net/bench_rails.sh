#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# bench_rails.sh (`make bench-net-rails`): multi-rail TCP across the shaped
# lab, the full version of tests/net/run_rails.sh (docs/design.md "Several
# rails per peer", issue 23). tests/net/netlab.sh builds H hosts with two
# rails each (--rails 2: nl<I> shaped to RATE0, nm<I> to RATE1, tbf on both
# veth ends); one rank per host (GS_SOCKET_IFNAME=nl<I>,nm<I>, ring
# all-reduce) runs bench/net/rail_run: in-place f32 sum all-reduces of
# BYTES, every result checked, rank 0 printing each one's busbw and the
# rails' shares and rates (gs_comm_peer_stats).
#   1. One TCP stream on each rail alone (tests/net/tcp_stream.py, host 0 to
#      host 1, STREAM_S seconds): S0 and S1, the reference sum.
#   2. Rate-balanced (GS_TCP_RAIL_BALANCE=rate) and equal striping (=equal)
#      runs of ITERS all-reduces, interleaved over ROUNDS rounds: each run's
#      median busbw (first iteration left out) over S0+S1 (the issue: at
#      least 0.85 rate-balanced; equal striping caps near 2*S1/(S0+S1) =
#      0.40) and rail 0's median share beside S0/(S0+S1).
#   3. The tc change, once per mode: PRE all-reduces, then rail 0 of every
#      host goes from RATE0 to NEW_RATE0 (tc qdisc change on both ends,
#      netlab.sh rail-rate), then POST more; the streams measure the new
#      S0' (and S1) after the rate-balanced run; the rates go back before
#      the next run. For each mode: which collective after the change first
#      reached 0.80 x (S0'+S1) (the issue: within 5), and the median from
#      there.
# Results in OUTDIR: every run's rank 0 log (LABEL.log), series.tsv (label,
# t_s since the run's first all-reduce started, iter, ms, busbw_MBps, then
# share, rate and up per rail, of the peer rank 0 sends to), streams.tsv,
# summary.md (the tables printed at the end), and rails_tcchange.png (shares
# and busbw against time across the tc change, both modes; PY with
# matplotlib, default /usr/bin/python3; without it the TSV is written and
# the script says so). MB = 10^6 bytes. Needs root and iproute2 (exit 77
# otherwise). About 6 minutes with the defaults on 2 cores.
#
# usage: bench_rails.sh BUILD_DIR [--hosts H] [--rate0 800mbit] [--rate1 200mbit]
#                       [--new-rate0 100mbit] [--burst 256kb] [--bytes 256M] [-i ITERS]
#                       [--rounds R] [--pre 3] [--post 6] [--stream-s 5] [--timeout S]
#                       [--out DIR] [--python PY]
set -u

HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
NETDIR=$ROOT/tests/net
# shellcheck source-path=SCRIPTDIR/../../tests/net source=../../tests/net/lib_script.sh
. "$NETDIR/lib_script.sh"
BUILD=$(lab_build_dir bench_rails "$@") || exit 2
shift
NH=4
RATE0=800mbit
RATE1=200mbit
NEW_RATE0=100mbit
BURST=256kb
BYTES=256M
ITERS=4
ROUNDS=2
PRE=3
POST=6
STREAM_S=5
LAB_TIMEOUT=600
OUTDIR=
PY=/usr/bin/python3
while [ $# -gt 0 ]; do
    case "$1" in
    --rate0) RATE0=$2; shift 2 ;;
    --rate1) RATE1=$2; shift 2 ;;
    --new-rate0) NEW_RATE0=$2; shift 2 ;;
    --burst) BURST=$2; shift 2 ;;
    --bytes) BYTES=$2; shift 2 ;;
    --pre) PRE=$2; shift 2 ;;
    --post) POST=$2; shift 2 ;;
    --stream-s) STREAM_S=$2; shift 2 ;;
    --python) PY=$2; shift 2 ;;
    *)
        lab_opt "--hosts -i --rounds --timeout --out" "$@" || lab_unknown bench_rails "$1"
        shift 2
        ;;
    esac
done
lab_whole "$NH" "$ITERS" "$ROUNDS" "$PRE" "$POST" "$STREAM_S" "$LAB_TIMEOUT" ||
    { echo "bench_rails: '$LAB_NAN' is not a number" >&2; exit 2; }
[ "$NH" -ge 2 ] || { echo "bench_rails: needs 2 hosts or more" >&2; exit 2; }
if [ "$ITERS" -lt 2 ] || [ "$PRE" -lt 1 ] || [ "$POST" -lt 1 ]; then
    echo "bench_rails: -i must be 2 or more, --pre and --post 1 or more" >&2
    exit 2
fi
RAILRUN=$BUILD/bench/rail_run
[ -x "$RAILRUN" ] || { echo "bench_rails: $RAILRUN missing; build first" >&2; exit 2; }
command -v python3 >/dev/null 2>&1 ||
    { echo "bench_rails: SKIP: no python3 (tcp_stream.py, rail_log.py)" >&2; exit 77; }

# shellcheck source-path=SCRIPTDIR/../../tests/net source=../../tests/net/lib_lab.sh
. "$NETDIR/lib_lab.sh"
if [ -z "$OUTDIR" ]; then
    OUTDIR=$LAB_TMP/results
    KEEP=1 # the results folder lives in the lab's scratch folder
fi
mkdir -p "$OUTDIR"
rlog() { python3 "$NETDIR/rail_log.py" "$@"; }
calc() { awk "BEGIN { printf \"%.4f\", $1 }"; }

lab_up "$NH" --rails 2 --rate "$RATE0" --rate2 "$RATE1" --burst "$BURST"
BASE_ENV=(GS_ALGO=allreduce:ring GS_TUNE=off "GS_TIMEOUT_MS=${GS_TIMEOUT_MS:-120000}")
echo "bench_rails: $NH hosts, rails nl at $RATE0 and nm at $RATE1 (tbf burst $BURST), 1 rank" \
    "per host, $BYTES all-reduces, $ROUNDS round(s) of $ITERS, tc change $RATE0 -> $NEW_RATE0;" \
    "results in $OUTDIR" >&2

# stream RAIL: one TCP stream from host 0 to host 1 on RAIL; sets STREAM (MB/s).
stream() {
    local rail=$1 addr port out sp
    addr=$(lab_addr 1 "$rail")
    port=$((5201 + rail))
    ip netns exec "${LAB_PREFIX}h1" timeout $((STREAM_S + 60)) python3 "$NETDIR/tcp_stream.py" \
        server "$addr" "$port" --timeout 30 >/dev/null 2>&1 &
    sp=$!
    out=$(ip netns exec "${LAB_PREFIX}h0" timeout $((STREAM_S + 60)) python3 \
        "$NETDIR/tcp_stream.py" client "$addr" "$port" --seconds "$STREAM_S" --timeout 30 2>&1)
    wait "$sp"
    STREAM=$(awk 'NR == 1 && $2 == "MB/s" { print $1 }' <<<"$out")
    [ -n "$STREAM" ] || { echo "bench_rails: stream on rail $rail failed: $out" >&2; exit 1; }
    echo "bench_rails: single stream on rail $rail: $out" >&2
}

TSV=$OUTDIR/series.tsv
FAILED=0
printf 'when\trail\tMBps\n' >"$OUTDIR/streams.tsv"
stream 0
S0=$STREAM
stream 1
S1=$STREAM
printf 'before\t0\t%s\nbefore\t1\t%s\n' "$S0" "$S1" >>"$OUTDIR/streams.tsv"
SUM=$(calc "$S0 + $S1")
rlog tsv /dev/null --label x --header >"$TSV"

# run LABEL MODE ARGS...: one rail_run job; its rank 0 log to OUTDIR/LABEL.log and its
# series to series.tsv. Returns the job's status.
run() {
    local label=$1 mode=$2 t0
    shift 2
    LAB_ENV=("${BASE_ENV[@]}" "GS_TCP_RAIL_BALANCE=$mode")
    t0=$SECONDS
    lab_launch "$NH" 1 "$RAILRUN" "$@"
    cp "$LAB_TMP/rank.0.log" "$OUTDIR/$label.log"
    if [ "$LAB_RC" -ne 0 ]; then
        echo "bench_rails: $label failed (ranks exited ${RCS[*]})" >&2
        lab_dump 5 >&2
        FAILED=1
        return 1
    fi
    rlog tsv "$OUTDIR/$label.log" --label "$label" >>"$TSV"
    echo "bench_rails: $label: $((SECONDS - t0)) s, $(grep '^SUMMARY' "$OUTDIR/$label.log")" >&2
}

# Rate-balanced and equal striping, interleaved.
SUMMARY=$OUTDIR/summary.md
{
    echo "single TCP streams: rail 0 $S0 MB/s ($RATE0), rail 1 $S1 MB/s ($RATE1), sum $SUM MB/s"
    echo
    echo "| run | median busbw MB/s | / sum of streams | rail 0 share | S0/(S0+S1) |"
    echo "|---|---:|---:|---:|---:|"
} >"$SUMMARY"
for ((r = 1; r <= ROUNDS; r++)); do
    for mode in rate equal; do
        label=${mode}__r$r
        run "$label" "$mode" --bytes "$BYTES" --iters "$ITERS" --check || continue
        summ=$(rlog summary "$OUTDIR/$label.log" --skip 1)
        bw=$(awk '$1 == "BUSBW" { print $3 }' <<<"$summ")
        sh0=$(awk '$1 == "SHARE" && $3 == 0 { print $7 }' <<<"$summ")
        printf '| %s | %s | %s | %s | %s |\n' "$label" "${bw:-?}" "$(calc "${bw:-0} / $SUM")" \
            "${sh0:--}" "$(calc "$S0 / $SUM")" >>"$SUMMARY"
    done
done

# The tc change, once per mode; the rate-balanced run's new streams are the reference.
MARKS=()
{
    echo
    echo "tc change of rail 0 on every host, $RATE0 -> $NEW_RATE0, after $PRE all-reduces:"
    echo
    echo "| run | change at (s) | collectives after it | first >= 0.80 x new sum | median busbw from there MB/s | / new sum | rail 0 share from there |"
    echo "|---|---:|---:|---:|---:|---:|---:|"
} >"$SUMMARY.change"
for mode in rate equal; do
    label=${mode}__tcchange
    LAB_ENV=("${BASE_ENV[@]}" "GS_TCP_RAIL_BALANCE=$mode")
    lab_start "$NH" 1 "$RAILRUN" --bytes "$BYTES" --iters $((PRE + POST)) --check
    end=$(($(lab_now_ms) + LAB_TIMEOUT * 1000))
    until grep -q "^ITER $((PRE - 1)) " "$LAB_TMP/rank.0.log" 2>/dev/null; do
        if [ "$(lab_now_ms)" -ge "$end" ] || ! kill -0 "${LAB_PID[0]}" 2>/dev/null; then
            break
        fi
        sleep 0.05
    done
    t_chg=$(lab_now_ms)
    for ((h = 0; h < NH; h++)); do lab_rail_rate "$h" 0 "$NEW_RATE0"; done
    echo "bench_rails: $label: rail 0 at $NEW_RATE0 on every host" >&2
    lab_wait
    cp "$LAB_TMP/rank.0.log" "$OUTDIR/$label.log"
    if [ "$LAB_RC" -ne 0 ]; then
        echo "bench_rails: $label failed (ranks exited ${RCS[*]})" >&2
        lab_dump 5 >&2
        FAILED=1
    else
        rlog tsv "$OUTDIR/$label.log" --label "$label" >>"$TSV"
    fi
    if [ "$mode" = rate ]; then
        stream 0
        N0=$STREAM
        stream 1
        N1=$STREAM
        printf 'after\t0\t%s\nafter\t1\t%s\n' "$N0" "$N1" >>"$OUTDIR/streams.tsv"
        NSUM=$(calc "$N0 + $N1")
    fi
    for ((h = 0; h < NH; h++)); do lab_rail_rate "$h" 0 "$RATE0"; done
    [ "$LAB_RC" -eq 0 ] || continue
    first=$(rlog iters "$OUTDIR/$label.log" | awk 'NR == 1 { print $4 }')
    at=$(calc "($t_chg - $first) / 1000")
    MARKS+=(--mark-s "$at:$label")
    # The collectives that end after the change (the one under way counts): the first that
    # reaches 0.80 x the new sum, and the median from there.
    hit=$(rlog iters "$OUTDIR/$label.log" --t0 "$t_chg" |
        awk -v need="$(calc "0.80 * $NSUM")" '$6 > 0 { k++; if ($10 >= need) { print k, $2; exit } }')
    npost=$(rlog iters "$OUTDIR/$label.log" --t0 "$t_chg" | awk '$6 > 0' | wc -l)
    if [ -n "$hit" ]; then
        summ=$(rlog summary "$OUTDIR/$label.log" --skip "${hit#* }")
        bw=$(awk '$1 == "BUSBW" { print $3 }' <<<"$summ")
        sh0=$(awk '$1 == "SHARE" && $3 == 0 { print $7 }' <<<"$summ")
        printf '| %s | %s | %s | %s (iteration %s) | %s | %s | %s |\n' "$label" "$at" "$npost" \
            "${hit% *}" "${hit#* }" "$bw" "$(calc "$bw / $NSUM")" "${sh0:--}" >>"$SUMMARY.change"
    else
        printf '| %s | %s | %s | none | - | - | - |\n' "$label" "$at" "$npost" >>"$SUMMARY.change"
    fi
done
{
    cat "$SUMMARY.change"
    echo
    echo "streams after the change: rail 0 ${N0:-?} MB/s, rail 1 ${N1:-?} MB/s, sum ${NSUM:-?} MB/s" \
        "(S0'/(S0'+S1) = $(calc "${N0:-0} / ${NSUM:-1}"))"
} >>"$SUMMARY"
rm -f "$SUMMARY.change"

echo
cat "$SUMMARY"
echo
echo "time series: $TSV"
# The plot: the tc change runs' shares and busbw against time.
if "$PY" -c 'import matplotlib' 2>/dev/null; then
    CHG=$OUTDIR/series_tcchange.tsv
    awk -F '\t' 'NR == 1 || $1 ~ /__tcchange$/' "$TSV" >"$CHG"
    "$PY" "$NETDIR/rail_log.py" plot "$CHG" "$OUTDIR/rails_tcchange.png" ${MARKS[@]+"${MARKS[@]}"} \
        --title "$NH hosts, rails $RATE0 + $RATE1, rail 0 -> $NEW_RATE0; $BYTES all-reduce" ||
        FAILED=1
else
    echo "no plot: $PY has no matplotlib (series.tsv holds the same numbers)"
fi
[ "$FAILED" -eq 0 ]
