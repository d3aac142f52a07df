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
# usage: run_stats.sh GSRUN STATS_CHECK [GS_BENCH]   (KEEP=1 keeps the files)
set -u

GSRUN=${1:?usage: run_stats.sh GSRUN STATS_CHECK [GS_BENCH]}
CHECK=${2:?usage: run_stats.sh GSRUN STATS_CHECK [GS_BENCH]}
BENCH=${3:-}
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

python3 - "$DIR" 3 <<'EOF' || fail "GS_STATS_FILE lines of stats_check are wrong"
import json, sys
d, n = sys.argv[1], int(sys.argv[2])
TOP = ["gradsync_stats", "final", "time_unix_ms", "elapsed_ms", "host", "pid", "rank", "nranks",
       "comm_id", "transport", "bytes_sent", "bytes_received", "msgs_sent", "msgs_received",
       "ops_completed", "ops_failed", "busy_ns", "wait_ns", "colls", "peers", "slowest_peer"]
PEER = ["peer", "bytes_sent", "bytes_received", "msgs_sent", "msgs_received", "send_wait_ns",
        "recv_wait_ns"]
bad = []
ids = set()
for r in range(n):
    path = f"{d}/stats.{r}.jsonl"
    try:
        lines = open(path).read().splitlines()
    except OSError as e:
        bad.append(f"rank {r}: {e}")
        continue
    objs = []
    for i, line in enumerate(lines):
        try:
            objs.append(json.loads(line))
        except ValueError as e:
            bad.append(f"{path}:{i + 1}: not JSON ({e}): {line[:80]}")
    if not objs:
        bad.append(f"{path}: empty")
        continue
    finals = [o for o in objs if o.get("final") is True]
    if len(finals) != 1 or objs[-1] is not finals[0]:
        bad.append(f"{path}: {len(finals)} final lines, expected exactly one, last")
    if len(objs) < 2:
        bad.append(f"{path}: no periodic line (GS_STATS_INTERVAL_MS=50)")
    prev = -1
    for o in objs:
        missing = [k for k in TOP if k not in o]
        if missing:
            bad.append(f"{path}: missing {missing}")
            continue
        if o["rank"] != r or o["nranks"] != n:
            bad.append(f"{path}: rank {o['rank']} nranks {o['nranks']}")
        if o["ops_completed"] < prev:
            bad.append(f"{path}: counters went backwards")
        prev = o["ops_completed"]
        ids.add(o["comm_id"])
        for p in o["peers"]:
            if [k for k in PEER if k not in p] or not (0 <= p["peer"] < n) or p["peer"] == r:
                bad.append(f"{path}: bad peer entry {p}")
        waits = sum(p["send_wait_ns"] + p["recv_wait_ns"] for p in o["peers"])
        if waits != o["wait_ns"]:
            bad.append(f"{path}: peers' waits add up to {waits}, wait_ns is {o['wait_ns']}")
    f = finals[-1] if finals else objs[-1]
    colls = {c["coll"]: c for c in f.get("colls", [])}
    if colls.get("allreduce", {}).get("last_algo") != "ring":
        bad.append(f"{path}: allreduce last_algo is not ring: {colls.get('allreduce')}")
    if colls.get("alltoall", {}).get("last_algo") != "direct":
        bad.append(f"{path}: alltoall last_algo is not direct: {colls.get('alltoall')}")
    right = (r + 1) % n
    peers = {p["peer"]: p for p in f.get("peers", [])}
    if peers.get(right, {}).get("bytes_sent", 0) <= 0:
        bad.append(f"{path}: nothing sent to the right neighbour {right}")
    if r != 0 and f.get("slowest_peer") != 0:
        bad.append(f"{path}: slowest_peer {f.get('slowest_peer')}, expected the late rank 0")
if len(ids) != 1:
    bad.append(f"comm_id differs between ranks: {ids}")
for b in bad:
    print("  " + b)
print(f"GS_STATS_FILE: {n} files checked, {len(bad)} problems")
sys.exit(1 if bad else 0)
EOF

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
    python3 - "$DIR" 3 <<'EOF' || { cat "$DIR/bench.log"; fail "gs-bench --stats output is wrong"; }
import json, re, sys
d, n = sys.argv[1], int(sys.argv[2])
out = open(f"{d}/bench.log").read().splitlines()
out = [re.sub(r"^\[\d+\] ", "", l) for l in out]
bad = []
header = [l for l in out if l.startswith("#") and "#wrong" in l]
if not header or not header[0].rstrip().endswith("algo"):
    bad.append(f"no algo column in the header: {header}")
rows = [l.split() for l in out if re.match(r"^\s+\d+\s+\d+\s+f32", l)]
if len(rows) != 3:
    bad.append(f"{len(rows)} result rows, expected 3 (1K, 32K, 1M)")
for r in rows:
    if r[-1] in ("auto", "mixed", "?") or r[-2] != "0":
        bad.append(f"row without a known algorithm or with wrong elements: {r}")
st = [l for l in out if re.match(r"^#\s+\d+\s+\d+\s+[\d.]+", l)]
if len(st) != n:
    bad.append(f"--stats table has {len(st)} rank lines, expected {n}")
if not any(l.startswith("# slowest link: rank") for l in out):
    bad.append("no 'slowest link' line")
if not any(l.startswith("# most waited-on rank:") for l in out):
    bad.append("no 'most waited-on rank' line")
lines = open(f"{d}/bench.jsonl").read().splitlines()
objs = [json.loads(l) for l in lines]
if sorted(o["rank"] for o in objs if o["final"]) != list(range(n)):
    bad.append(f"shared GS_STATS_FILE: final lines of ranks {[o['rank'] for o in objs]}")
for b in bad:
    print("  " + b)
print(f"gs-bench --stats: {len(rows)} rows, {len(bad)} problems")
sys.exit(1 if bad else 0)
EOF
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
