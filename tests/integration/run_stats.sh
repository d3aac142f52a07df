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
        --out "$DIR/bench.json" > "$DIR/bench_json.log" 2>&1; then
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
    # --algo LIST --rounds N: one row per algorithm and size, in the list's order, each
    # row run by the algorithm it names (auto by a real one), checked, and auto/best lines.
    if ! "$GSRUN" -n 3 --timeout 120 "$BENCH" allreduce -b 4K -e 64K -f 16 -w 1 -n 3 --check \
        --algo auto,ring,rd --rounds 3 --json --out "$DIR/bench_list.json" \
        > "$DIR/bench_list.log" 2>&1; then
        cat "$DIR/bench_list.log"
        fail "gs-bench --algo auto,ring,rd --rounds 3 failed"
    elif ! python3 -c '
import json, sys
j = json.load(open(sys.argv[1]))
rows = j["rows"]
assert j["algo"] == "auto,ring,rd", j["algo"]
assert [r["size"] for r in rows] == [4096] * 3 + [65536] * 3, rows
assert [r["algo"] for r in rows] == ["auto", "ring", "rd"] * 2, rows
assert [r["algo_used"] for r in rows[1:3] + rows[4:6]] == ["ring", "rd"] * 2, rows
assert all(rows[i]["algo_used"] not in ("auto", "mixed", "?") for i in (0, 3)), rows
assert all(r["wrong"] == 0 and r["time_us"] > 0 for r in rows), rows
print("gs-bench --algo LIST --rounds --json: ok")' "$DIR/bench_list.json"; then
        fail "gs-bench --algo LIST --json output is wrong"
    elif ! grep -q "4096 bytes: auto (.*) / best forced (.*) = [0-9.]*" "$DIR/bench_list.log"; then
        cat "$DIR/bench_list.log"
        fail "gs-bench --algo LIST: no auto/best line"
    fi
    if ! "$GSRUN" -n 2 --timeout 60 "$BENCH" allreduce -b 4K -e 4K -w 1 -n 2 --algo tree,ring \
        --rounds 2 > "$DIR/bench_list2.log" 2>&1 || ! grep -q "2 rounds over the algorithms" \
        "$DIR/bench_list2.log" || grep -q "auto/best" "$DIR/bench_list2.log"; then
        cat "$DIR/bench_list2.log"
        fail "gs-bench --algo tree,ring --rounds 2 (text): wrong output"
    fi
    for bad in "--algo ring,ring" "--algo ring,,rd" "--algo ring,nope" "--rounds 0" \
        "--algo auto,ring --codec int8"; do
        # shellcheck disable=SC2086 # each case is several words
        "$BENCH" allreduce -b 4K -e 4K $bad > "$DIR/bench_bad.log" 2>&1
        rc=$?
        if [ "$rc" -ne 2 ]; then
            cat "$DIR/bench_bad.log"
            fail "gs-bench $bad: exit $rc, expected the usage error 2"
        fi
    done
fi

if [ "$fails" -ne 0 ]; then
    echo "run_stats: $fails failure(s)"
    exit 1
fi
echo "run_stats: all passed"
