#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# bench_hier.sh: the hierarchical all-reduce against the flat ring (and auto)
# with several ranks per host, in the shaped multi-host lab
# (tests/net/netlab.sh, namespace prefix gshier<PID>). H hosts, RPH ranks in
# each host's namespace (block placement: each host's ranks adjacent; with
# --place cyclic they are interleaved and the ring relies on the host-grouped
# order), every link shaped to RATE with tc tbf. For every size, an in-place
# f32 sum all-reduce with gs-bench --algo ALGO --check, algorithms
# interleaved (ring hier auto ring hier auto ...) over ROUNDS rounds. The
# ranks get GS_ALGO_BETA_MBPS = RATE in MB/s, so that auto knows the link.
# The table gives, per size and algorithm, the median time over rounds and
# the efficiency against the host-link limit of any all-reduce,
# (2(H-1)/H * bytes / RATE) / time: every host must send that much through
# its link (a flat ring over n = H*RPH ranks sends 2(n-1)/n * bytes there,
# so it tops out at (H-1)/H / ((n-1)/n) of it), and hier/ring = ring time /
# hier time. Needs root and iproute2 (exit 77 otherwise).
#
# usage: bench_hier.sh BUILD_DIR [--hosts 4] [--rph 2] [--rate 1gbit] [--place block|cyclic]
#                      [-b 1M] [-e 64M] [-w WARMUP] [-i ITERS] [--rounds R]
#                      [--algos ring,hier,auto] [--timeout S] [--out DIR]
set -u

ROOT=$(cd "$(dirname "$0")/../.." && pwd)
# shellcheck source-path=SCRIPTDIR/../../tests/net source=../../tests/net/lib_script.sh
. "$ROOT/tests/net/lib_script.sh"
BUILD=$(lab_build_dir bench_hier "$@") || exit 2
shift
GSBENCH=$BUILD/bench/gs-bench
NH=4 RPH=2 RATE=1gbit MINB=1M MAXB=64M WARMUP=2 ITERS=5 ROUNDS=3 ALGOS=ring,hier,auto
LAB_TIMEOUT=300
OUTDIR=
while [ $# -gt 0 ]; do
    case "$1" in
    --algos) ALGOS=$2; shift 2 ;;
    *)
        lab_opt "--hosts --rph --rate --place -b -e -w -i --rounds --timeout --out" "$@" ||
            lab_unknown bench_hier "$1"
        shift 2
        ;;
    esac
done
lab_whole "$NH" "$RPH" "$WARMUP" "$ITERS" "$ROUNDS" "$LAB_TIMEOUT" ||
    { echo "bench_hier: '$LAB_NAN' is not a number" >&2; exit 2; }
[ -x "$GSBENCH" ] || { echo "bench_hier: $GSBENCH is not built" >&2; exit 2; }
mbps=$(python3 -c '
import re, sys
m = re.fullmatch(r"([0-9.]+)(bit|kbit|mbit|gbit)", sys.argv[1].lower())
mult = {"bit": 1, "kbit": 1e3, "mbit": 1e6, "gbit": 1e9}[m.group(2)] if m else 0
print(int(float(m.group(1)) * mult / 8e6) if m else 0)' "$RATE")
[ "$mbps" -gt 0 ] || { echo "bench_hier: cannot read rate '$RATE' (e.g. 1gbit)" >&2; exit 2; }

# shellcheck disable=SC2034 # read by lib_lab.sh
LAB_PREFIX=gshier$$
# shellcheck source-path=SCRIPTDIR/../../tests/net source=../../tests/net/lib_lab.sh
. "$ROOT/tests/net/lib_lab.sh"
# shellcheck disable=SC2034 # read by lib_lab.sh
LAB_ENV=("GS_ALGO_BETA_MBPS=$mbps" "GS_TIMEOUT_MS=60000")
[ -n "$OUTDIR" ] || OUTDIR=$(mktemp -d "${TMPDIR:-/tmp}/gs_bench_hier.XXXXXX")
mkdir -p "$OUTDIR"
lab_up "$NH" --rate "$RATE"
IFS=, read -r -a algos <<<"$ALGOS"
echo "bench_hier: $NH hosts x $RPH ranks (${LAB_PLACE:-block}) at $RATE, sizes $MINB..$MAXB," \
    "algorithms ${algos[*]}, $ROUNDS rounds, results in $OUTDIR" >&2
for ((r = 1; r <= ROUNDS; r++)); do
    for a in "${algos[@]}"; do
        csv=$OUTDIR/${a}__r$r.csv log=$OUTDIR/${a}__r$r.log rc=0 t0=$SECONDS
        lab_bench_launch "$log" "$NH" "$RPH" "$GSBENCH" allreduce -b "$MINB" -e "$MAXB" -f 2 \
            -w "$WARMUP" -n "$ITERS" --inplace --check --csv --algo "$a" --out "$csv" || rc=$?
        lab_bench_done bench_hier "$r" "$a" "$rc" "$csv" "$log" "$t0"
    done
done

PYTHONPATH=$ROOT/bench/net${PYTHONPATH:+:$PYTHONPATH} \
    python3 - "$OUTDIR" "$mbps" "$NH" "$RPH" "$ALGOS" <<'EOF'
import statistics, sys

from labcsv import fsz, rows

outdir, mbps = sys.argv[1], float(sys.argv[2])
nh, rph, algos = int(sys.argv[3]), int(sys.argv[4]), sys.argv[5].split(",")
rate = mbps * 1e6
data, ran = {}, {}
for label, row in rows(outdir):
    try:
        data.setdefault(label, {}).setdefault(int(row["size"]), []).append(
            float(row["time_us"]) * 1e-6)
        ran.setdefault(label, {})[int(row["size"])] = row.get("algo_used") or row.get("algo", "")
    except (KeyError, ValueError):
        pass
if not data:
    sys.exit("bench_hier: no results")
algos = [a for a in algos if a in data]
sizes = sorted({s for a in data for s in data[a]})
print(f"\nall-reduce f32 sum in place, {nh} hosts x {rph} ranks, links at {mbps:.0f} MB/s;"
      " median time over rounds")
print("eff = (2(H-1)/H * bytes / link rate) / time (the host-link limit of any all-reduce)\n")
head = " | ".join(f"{a} ms | {a} eff" for a in algos)
has_ratio = ("ring" in algos) and ("hier" in algos)
print(f"| size | {head} |" + (" ring/hier time |" if has_ratio else "") + (" auto ran |" if "auto" in algos else ""))
print("|---:|" + "---:|---:|" * len(algos) + ("---:|" if has_ratio else "") + ("---|" if "auto" in algos else ""))
for s in sizes:
    ideal = 2.0 * (nh - 1) / nh * s / rate
    cells, med = [], {}
    for a in algos:
        ts = data[a].get(s, [])
        if not ts:
            cells += ["-", "-"]
            continue
        med[a] = statistics.median(ts)
        cells += [f"{med[a] * 1e3:.2f}", f"{100.0 * ideal / med[a]:.1f}%"]
    line = f"| {fsz(s)} | " + " | ".join(cells) + " |"
    if has_ratio:
        line += f" {med['ring'] / med['hier']:.2f}x |" if ("ring" in med and "hier" in med) else " - |"
    if "auto" in algos:
        line += f" {ran.get('auto', {}).get(s, '-')} |"
    print(line)
EOF
