#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""The file and output checks of run_stats.sh (see its header).

usage: stats_verify.py files DIR N   DIR/stats.R.jsonl of stats_check's N ranks
       stats_verify.py bench DIR N   DIR/bench.log and DIR/bench.jsonl of
                                     gs-bench allreduce --stats on N ranks
Prints one line per problem and a summary line; exit status 1 when there is
a problem. Standard library only.
"""
import json
import re
import sys

TOP = ["gradsync_stats", "final", "time_unix_ms", "elapsed_ms", "host", "pid", "rank", "nranks",
       "comm_id", "transport", "bytes_sent", "bytes_received", "msgs_sent", "msgs_received",
       "ops_completed", "ops_failed", "busy_ns", "wait_ns", "colls", "peers", "slowest_peer"]
PEER = ["peer", "bytes_sent", "bytes_received", "msgs_sent", "msgs_received", "send_wait_ns",
        "recv_wait_ns"]


def check_files(d, n):
    """Every rank's GS_STATS_FILE lines: JSON with the documented fields, periodic
    lines then one final line, ring neighbours, waits, the late rank 0."""
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
    return f"GS_STATS_FILE: {n} files checked", bad


def check_bench(d, n):
    """gs-bench --stats output: the algo column, the --stats table, and one final
    line per rank in the shared GS_STATS_FILE."""
    out = open(f"{d}/bench.log").read().splitlines()
    out = [re.sub(r"^\[\d+\] ", "", ln) for ln in out]
    bad = []
    header = [ln for ln in out if ln.startswith("#") and "#wrong" in ln]
    if not header or not header[0].rstrip().endswith("algo"):
        bad.append(f"no algo column in the header: {header}")
    rows = [ln.split() for ln in out if re.match(r"^\s+\d+\s+\d+\s+f32", ln)]
    if len(rows) != 3:
        bad.append(f"{len(rows)} result rows, expected 3 (1K, 32K, 1M)")
    # The #wrong column by its name in the header (the header's "#" is no column).
    names = header[0].split()[1:] if header else []
    wrong = names.index("#wrong") if "#wrong" in names else -2
    for r in rows:
        if r[-1] in ("auto", "mixed", "?") or len(r) <= wrong or r[wrong] != "0":
            bad.append(f"row without a known algorithm or with wrong elements: {r}")
    st = [ln for ln in out if re.match(r"^#\s+\d+\s+\d+\s+[\d.]+", ln)]
    if len(st) != n:
        bad.append(f"--stats table has {len(st)} rank lines, expected {n}")
    if not any(ln.startswith("# slowest link: rank") for ln in out):
        bad.append("no 'slowest link' line")
    if not any(ln.startswith("# most waited-on rank:") for ln in out):
        bad.append("no 'most waited-on rank' line")
    lines = open(f"{d}/bench.jsonl").read().splitlines()
    objs = [json.loads(ln) for ln in lines]
    if sorted(o["rank"] for o in objs if o["final"]) != list(range(n)):
        bad.append(f"shared GS_STATS_FILE: final lines of ranks {[o['rank'] for o in objs]}")
    return f"gs-bench --stats: {len(rows)} rows", bad


def main(argv):
    checks = {"files": check_files, "bench": check_bench}
    if len(argv) != 4 or argv[1] not in checks:
        sys.exit(__doc__)
    what, bad = checks[argv[1]](argv[2], int(argv[3]))
    for b in bad:
        print("  " + b)
    print(f"{what}, {len(bad)} problems")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
