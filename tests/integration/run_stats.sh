#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# run_stats.sh: traffic statistics end to end, on 3 ranks.
#  1. stats_check under gsrun with GS_ALGO=allreduce:ring, GS_STATS_FILE=DIR/stats.%r.jsonl
#     and GS_STATS_INTERVAL_MS=50 (stats_check asserts the API side); then every
#     line of every rank's file must be valid JSON with the documented fields,
#     periodic lines before one final line, the ring neighbours in "peers",
#     per-peer waits adding up to wait_ns, and rank 0 as the slowest peer of
#     the others (it joined an all-to-all 300 ms late).
#     An unwritable GS_STATS_FILE warns once per rank and changes nothing else.
#  2. gs-bench allreduce --stats --check (auto selection) with one shared
#     GS_STATS_FILE: the table has the "algo" column with a known algorithm
#     on every row, the --stats table lists every rank, the file holds one
#     final line per rank (appends from 3 processes did not interleave), and
#     --json output with --stats parses; --algo ring has no algo column.
#  The checks of the files and of the bench output are in stats_verify.py.
# usage: run_stats.sh GSRUN STATS_CHECK [GS_BENCH]   (KEEP=1 keeps the files)
set -u

GSRUN=${1:?usage: run_stats.sh GSRUN STATS_CHECK [GS_BENCH]}
CHECK=${2:?usage: run_stats.sh GSRUN STATS_CHECK [GS_BENCH]}
BENCH=${3:-}
HERE=$(cd "$(dirname "$0")" && pwd)
DIR=$(mktemp -d "${TMPDIR:-/tmp}/gs_stats.XXXXXX")
if [ "${KEEP:-0}" != 1 ]; then
    trap 'rm -rf "$DIR"' EXIT
fi
export GS_TIMEOUT_MS=${GS_TIMEOUT_MS:-30000}
fails=0

fail() {
    echo "FAIL: $*"
    fails=$((fails + 1))
}

# --- 1. stats_check and its files --------------------------------------------
if ! GS_ALGO=allreduce:ring GS_STATS_FILE="$DIR/stats.%r.jsonl" GS_STATS_INTERVAL_MS=50 \
    "$GSRUN" -n 3 --timeout 120 "$CHECK" > "$DIR/check.log" 2>&1; then
    cat "$DIR/check.log"
    fail "stats_check failed"
else
    grep -h 'passed' "$DIR/check.log"
fi

python3 "$HERE/stats_verify.py" files "$DIR" 3 ||
    fail "GS_STATS_FILE lines of stats_check are wrong"

# An unwritable GS_STATS_FILE: one warning per rank (not one per due line), and the
# program and gs_comm_destroy still succeed.
if ! GS_ALGO=allreduce:ring GS_STATS_FILE="$DIR/missing/dir/s.%r.jsonl" GS_STATS_INTERVAL_MS=50 \
    GS_DEBUG=WARN "$GSRUN" -n 2 --timeout 120 "$CHECK" > "$DIR/nofile.log" 2>&1; then
    cat "$DIR/nofile.log"
    fail "stats_check with an unwritable GS_STATS_FILE failed"
fi
nwarn=$(grep -c 'GS_STATS_FILE: cannot write' "$DIR/nofile.log")
if [ "$nwarn" -ne 2 ]; then
    cat "$DIR/nofile.log"
    fail "unwritable GS_STATS_FILE: $nwarn warnings, expected one per rank (2)"
else
    echo "unwritable GS_STATS_FILE: one warning per rank, run succeeded"
fi

# --- 2. gs-bench --stats and the algo column ---------------------------------
if [ -n "$BENCH" ]; then
    if ! GS_STATS_FILE="$DIR/bench.jsonl" "$GSRUN" -n 3 --timeout 120 "$BENCH" allreduce \
        -b 1K -e 1M -f 32 -w 1 -n 3 --check --stats > "$DIR/bench.log" 2>&1; then
        cat "$DIR/bench.log"
        fail "gs-bench --stats failed"
    fi
    python3 "$HERE/stats_verify.py" bench "$DIR" 3 ||
        { cat "$DIR/bench.log"; fail "gs-bench --stats output is wrong"; }
    if ! "$GSRUN" -n 3 --timeout 120 "$BENCH" allreduce -b 4K -e 4K -w 1 -n 2 --stats --json \
        -o "$DIR/bench.json" > "$DIR/bench_json.log" 2>&1; then
        cat "$DIR/bench_json.log"
        fail "gs-bench --stats --json failed"
    elif ! python3 -c '
import json, sys
j = json.load(open(sys.argv[1]))
assert len(j["stats"]["slowest_links"]) == 3, j["stats"]
assert all(r["algo_used"] not in ("auto", "mixed", "?") for r in j["rows"]), j["rows"]
print("gs-bench --stats --json: ok")' "$DIR/bench.json"; then
        fail "gs-bench --stats --json output is wrong"
    fi
    if ! "$GSRUN" -n 3 --timeout 120 "$BENCH" allreduce -b 4K -e 4K -w 1 -n 2 --algo ring \
        > "$DIR/bench_ring.log" 2>&1 || grep -q "auto chose" "$DIR/bench_ring.log"; then
        cat "$DIR/bench_ring.log"
        fail "gs-bench --algo ring failed or shows the auto algo column"
    fi
fi

if [ "$fails" -ne 0 ]; then
    echo "run_stats: $fails failure(s)"
    exit 1
fi
echo "run_stats: all passed"
