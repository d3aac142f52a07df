#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# bench_net.sh (`make bench-net`): all-reduce across the shaped multi-host
# lab. tests/net/netlab.sh builds H hosts (network namespaces on a bridge,
# every link shaped with tc tbf at RATE on both veth ends, 256 KB burst);
# one rank per host runs, for every size, an in-place f32 sum all-reduce:
#   gradsync   gs-bench, ranks started in their namespaces by lib_lab.sh
#   mpi        mpi-bench under mpirun, which runs in host 0's namespace; its
#              launch agent (--mca plm_rsh_agent) starts each orted with
#              `ip netns exec <host>` under its own UTS namespace and host
#              name, so no sshd is needed. ob1 over tcp,self on the lab
#              subnet, mpi_yield_when_idle=1 (the 4 "hosts" share this
#              machine's cores; Open MPI would otherwise busy-poll as on a
#              dedicated node)
#   gloo-ALGO  gloo-bench with a FileStore in a shared folder and
#              GLOO_BENCH_HOST = the host's lab address
# Runs are interleaved (gs mpi gloo gs mpi gloo ...) over ROUNDS rounds; for
# every size the table gives each library's median time over rounds, busbw
# = 2(n-1)/n * bytes / time, and efficiency = (2(n-1)/n * bytes / RATE) /
# time, the fraction of the link-rate limit of a ring all-reduce (TCP/IP
# headers cap it near 95.5% at MTU 1500). Needs root and iproute2 (exit 77
# otherwise).
#
# --codecs int8,sign,topk:0.01 adds compressed all-reduces (gs-bench
# allreduce --codec NAME [--ratio R] --ef, labels gs-NAME) and the
# uncompressed ring they are measured against (gs-bench --algo ring, label
# gs-ring); a second table gives, per size and codec, the median time, the
# speed-up over gs-ring, the issue's target where it has one (int8 3.3x,
# sign 12x, topk 1% 15x), the wire bytes per rank and the relative error
# against the exact f32 sum. --libs none runs only those.
#
# --colls reduce_scatter,allgather (default allreduce) measures the sharded
# shapes instead (add allreduce to the list to keep the runs above): for
# each, gs-bench COLL --codec NAME --inplace (reduce_scatter with --ef; labels
# COLL+NAME) for every codec of --codecs (default: int8, int4 and fp8_e4m3,
# those of them that `gs-bench codec --list` names), beside the uncompressed
# call it is measured against, gs-bench COLL --codec none (label COLL+none:
# the library runs the plain call for GS_CODEC_NONE, and gs-bench still
# reports its wire bytes and rel.err, 0 or f32 rounding), all in the same
# interleaved rounds. A table per collective gives, per size and codec, the
# median time, the speed-up over uncompressed, the wire ratio (uncompressed
# wire bytes / compressed wire bytes, both from gs-bench's wire column), the
# speed-up / wire ratio (issue 20's target: at least 0.8 where the link is
# the bottleneck), the link share (compressed wire bytes / RATE over the
# compressed time: under 50% the call is not link-bound) and rel.err. Sizes
# are gs-bench's: the total buffer (reduce_scatter's send buffer,
# allgather's receive buffer), so a rank's block is size / H. Codec names
# are checked against `gs-bench codec --list`.
#
# usage: bench_net.sh BUILD_DIR [--hosts H] [--rate 1gbit] [--burst 256kb] [-b 1M] [-e 64M]
#                     [-w WARMUP] [-i ITERS] [--rounds R] [--libs gs,mpi,gloo|none]
#                     [--gloo-algos ring_chunked,default] [--codecs C[:RATIO],...]
#                     [--colls allreduce,reduce_scatter,allgather] [--timeout S] [--out DIR]
set -u

HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
# shellcheck source-path=SCRIPTDIR/../../tests/net source=../../tests/net/lib_script.sh
. "$ROOT/tests/net/lib_script.sh"
BUILD=$(lab_build_dir bench_net "$@") || exit 2
shift
NH=4
RATE=1gbit
BURST=256kb
MINB=1M
MAXB=64M
WARMUP=2
ITERS=5
ROUNDS=2
LIBS=gs,mpi,gloo
GLOO_ALGOS=ring_chunked,default
LAB_TIMEOUT=300
OUTDIR=
CODECS=
COLLS=allreduce
while [ $# -gt 0 ]; do
    case "$1" in
    --burst) BURST=$2; shift 2 ;;
    --libs) LIBS=$2; shift 2 ;;
    --gloo-algos) GLOO_ALGOS=$2; shift 2 ;;
    --codecs) CODECS=$2; shift 2 ;;
    --colls) COLLS=$2; shift 2 ;;
    *)
        lab_opt "--hosts --rate -b -e -w -i --rounds --timeout --out" "$@" ||
            lab_unknown bench_net "$1"
        shift 2
        ;;
    esac
done
lab_whole "$NH" "$WARMUP" "$ITERS" "$ROUNDS" "$LAB_TIMEOUT" ||
    { echo "bench_net: '$LAB_NAN' is not a number" >&2; exit 2; }
[ "$NH" -ge 2 ] || { echo "bench_net: needs 2 hosts or more" >&2; exit 2; }

GSBENCH=$BUILD/bench/gs-bench
MPIBENCH=$BUILD/bench/mpi-bench
GLOOBENCH=$BUILD/bench/gloo-bench
[ -x "$GSBENCH" ] || { echo "bench_net: $GSBENCH missing; build first" >&2; exit 2; }
# The codecs this library has (GS_CODEC_MAP, through gs-bench).
CODEC_NAMES=$("$GSBENCH" codec --list) ||
    { echo "bench_net: $GSBENCH codec --list failed" >&2; exit 2; }
has_codec() { printf '%s\n' "$CODEC_NAMES" | grep -qx -- "$1"; }
AR=0
SHARDED=()
IFS=, read -r -a colls <<< "$COLLS"
for c in "${colls[@]}"; do
    case "$c" in
    allreduce) AR=1 ;;
    reduce_scatter | allgather) SHARDED+=("$c") ;;
    *) echo "bench_net: --colls takes allreduce, reduce_scatter and allgather, not '$c'" >&2; exit 2 ;;
    esac
done
if [ -z "$CODECS" ] && [ ${#SHARDED[@]} -gt 0 ]; then
    for c in int8 int4 fp8_e4m3; do
        has_codec "$c" && CODECS=${CODECS:+$CODECS,}$c
    done
fi

# shellcheck source-path=SCRIPTDIR/../../tests/net source=../../tests/net/lib_lab.sh
. "$ROOT/tests/net/lib_lab.sh"
if [ -z "$OUTDIR" ]; then
    OUTDIR=$LAB_TMP/results
    KEEP=1 # the results folder lives in the lab's scratch folder
fi
mkdir -p "$OUTDIR"

RUNS=()
libs=()
[ "$AR" -eq 1 ] && IFS=, read -r -a libs <<< "$LIBS"
for l in "${libs[@]}"; do
    case "$l" in
    gs) RUNS+=("gradsync|gs") ;;
    mpi)
        if [ -x "$MPIBENCH" ] && command -v mpirun >/dev/null 2>&1 &&
            command -v unshare >/dev/null 2>&1; then
            RUNS+=("mpi-ob1-tcp|mpi")
        else
            echo "bench_net: mpi-bench, mpirun or unshare missing; MPI left out" >&2
        fi
        ;;
    gloo)
        if [ -x "$GLOOBENCH" ]; then
            IFS=, read -r -a algos <<< "$GLOO_ALGOS"
            for a in "${algos[@]}"; do RUNS+=("gloo-$a|gloo:$a"); done
        else
            echo "bench_net: gloo-bench not built; Gloo left out" >&2
        fi
        ;;
    none) ;;
    *) echo "bench_net: unknown library '$l'" >&2; exit 2 ;;
    esac
done
codecs=()
[ -n "$CODECS" ] && IFS=, read -r -a codecs <<< "$CODECS"
for c in "${codecs[@]}"; do
    has_codec "${c%%:*}" || {
        echo "bench_net: unknown codec '${c%%:*}' (gs-bench codec --list: $(tr '\n' ' ' <<< "$CODEC_NAMES"))" >&2
        exit 2
    }
done
if [ ${#codecs[@]} -gt 0 ] && [ "$AR" -eq 1 ]; then
    RUNS+=("gs-ring|gsring")
    for c in "${codecs[@]}"; do RUNS+=("gs-${c/:/-}|codec:$c"); done
fi
for coll in "${SHARDED[@]}"; do
    RUNS+=("$coll+none|shard:$coll:none")
    for c in "${codecs[@]}"; do
        [ "${c%%:*}" != none ] && RUNS+=("$coll+${c/:/-}|shard:$coll:$c")
    done
done
[ ${#RUNS[@]} -gt 0 ] || { echo "bench_net: nothing to run" >&2; exit 2; }

lab_up "$NH" --rate "$RATE" --burst "$BURST"
COMMON=(-b "$MINB" -e "$MAXB" -f 2 -w "$WARMUP" -n "$ITERS" --inplace --csv)

# Open MPI: hostfile of namespace names; the launch agent (shared with
# tests/net/test_mpi_lab.sh) maps a name to its namespace.
AGENT=$ROOT/tests/net/netns_agent.sh
: > "$LAB_TMP/mpi_hosts"
IFLIST=
for ((h = 0; h < NH; h++)); do
    echo "${LAB_PREFIX}h$h slots=1" >> "$LAB_TMP/mpi_hosts"
    IFLIST=${IFLIST:+$IFLIST,}nl$h
done

run_one() { # label kind round
    local label=$1 kind=$2 round=$3 rc=0 t0=$SECONDS
    local csv=$OUTDIR/${label}__r${round}.csv log=$OUTDIR/${label}__r${round}.log
    case "$kind" in
    gs)
        lab_bench_launch "$log" "$NH" 1 "$GSBENCH" allreduce "${COMMON[@]}" --check --out "$csv" ||
            rc=$?
        ;;
    gsring)
        lab_bench_launch "$log" "$NH" 1 "$GSBENCH" allreduce "${COMMON[@]}" --algo ring --check \
            --out "$csv" || rc=$?
        ;;
    codec:*)
        local spec=${kind#codec:} extra=()
        [ "${spec#*:}" != "$spec" ] && extra=(--ratio "${spec#*:}")
        lab_bench_launch "$log" "$NH" 1 "$GSBENCH" allreduce "${COMMON[@]}" \
            --codec "${spec%%:*}" "${extra[@]}" --ef --out "$csv" || rc=$?
        ;;
    shard:*)
        local coll=${kind#shard:} spec extra=()
        spec=${coll#*:} coll=${coll%%:*}
        [ "${spec#*:}" != "$spec" ] && extra=(--ratio "${spec#*:}")
        [ "$coll" = reduce_scatter ] && [ "${spec%%:*}" != none ] && extra+=(--ef)
        lab_bench_launch "$log" "$NH" 1 "$GSBENCH" "$coll" "${COMMON[@]}" \
            --codec "${spec%%:*}" "${extra[@]}" --out "$csv" || rc=$?
        ;;
    mpi)
        # shellcheck disable=SC2016 # expanded by the inner sh
        timeout -k 10 "$LAB_TIMEOUT" ip netns exec "${LAB_PREFIX}h0" unshare --uts \
            sh -c 'hostname "$0" && exec "$@"' "${LAB_PREFIX}h0" \
            mpirun --allow-run-as-root --hostfile "$LAB_TMP/mpi_hosts" -np "$NH" --map-by node \
            --mca plm_rsh_agent "$AGENT" --mca oob_tcp_if_include "$IFLIST" \
            --mca pml ob1 --mca btl tcp,self --mca btl_tcp_if_include "$(lab_addr 0 | sed 's/\.[0-9]*$/.0/')/24" \
            --mca mpi_yield_when_idle 1 \
            "$MPIBENCH" "${COMMON[@]}" -o "$csv" > "$log" 2>&1 || rc=$?
        ;;
    gloo:*)
        local store=$LAB_TMP/store_${label}_r${round}
        mkdir -p "$store"
        # shellcheck disable=SC2016 # expanded in each rank
        lab_bench_launch "$log" "$NH" 1 bash -c 'GLOO_BENCH_HOST=$LAB_HOST_ADDR exec "$@"' gloo \
            "$GLOOBENCH" --algo "${kind#gloo:}" "${COMMON[@]}" --store "$store" -o "$csv" || rc=$?
        ;;
    esac
    lab_bench_done bench_net "$round" "$label" "$rc" "$csv" "$log" "$t0"
}

echo "bench_net: $NH hosts at $RATE (tbf burst $BURST), 1 rank per host, sizes $MINB..$MAXB," \
    "$ROUNDS rounds, $(nproc) cores, results in $OUTDIR" >&2
for ((r = 1; r <= ROUNDS; r++)); do
    for entry in "${RUNS[@]}"; do
        run_one "${entry%%|*}" "${entry#*|}" "$r"
    done
done

PYTHONPATH=$HERE${PYTHONPATH:+:$PYTHONPATH} python3 - "$OUTDIR" "$RATE" "$NH" <<'EOF'
import re, statistics, sys

from labcsv import fsz, rows

outdir, rate_s, nh = sys.argv[1], sys.argv[2].lower(), int(sys.argv[3])
m = re.fullmatch(r"([0-9.]+)\s*(bit|kbit|mbit|gbit|bps|kbps|mbps|gbps)?", rate_s)
if not m:
    sys.exit(f"bench_net: cannot read rate {rate_s}")
mult = {None: 1, "bit": 1, "kbit": 1e3, "mbit": 1e6, "gbit": 1e9,
        "bps": 8, "kbps": 8e3, "mbps": 8e6, "gbps": 8e9}[m.group(2)]
rate = float(m.group(1)) * mult / 8.0  # bytes per second
data = {}
extra = {}  # codec runs: label -> size -> [(rel_err, wire bytes)]
# The sharded shapes' labels are COLL+CODEC; the all-reduce tables take the others.
for label, row in rows(outdir):
    try:
        data.setdefault(label, {}).setdefault(int(row["size"]), []).append(
            (float(row["time_us"]) * 1e-6, row.get("wrong", "")))
        if row.get("rel_err"):
            extra.setdefault(label, {}).setdefault(int(row["size"]), []).append(
                (float(row["rel_err"]), float(row["wire_bytes"])))
    except (KeyError, ValueError):
        pass
if not data:
    sys.exit("bench_net: no results")
order = sorted((l for l in data if "+" not in l), key=lambda l: (l != "gradsync", l))
sizes = sorted({s for l in data for s in data[l]})
if order:
    print(f"\nall-reduce f32 sum in place, {nh} hosts x 1 rank, links shaped to {rate_s}"
          f" ({rate / 1e6:.1f} MB/s); median over rounds")
    print("efficiency = (2(n-1)/n * bytes / link rate) / time; TCP/IP headers cap it near 95.5%\n")
    print("| size | " + " | ".join(f"{l} busbw GB/s | {l} eff" for l in order) + " |")
    print("|---:|" + "---:|---:|" * len(order))
    for s in sizes:
        cells = []
        ideal = 2.0 * (nh - 1) / nh * s / rate
        for l in order:
            ts = [t for t, _ in data[l].get(s, [])]
            if not ts:
                cells += ["-", "-"]
                continue
            t = statistics.median(ts)
            cells += [f"{2.0 * (nh - 1) / nh * s / t / 1e9:.4f}", f"{100.0 * ideal / t:.1f}%"]
        print(f"| {fsz(s)} | " + " | ".join(cells) + " |")
if extra and "gs-ring" in data:
    targets = {"gs-int8": 3.3, "gs-sign": 12.0, "gs-topk-0.01": 15.0, "gs-topk": 15.0}
    print("\ncompressed all-reduce (with EF) against the uncompressed ring (gs-ring), median "
          "time over rounds; rel.err = ||out - exact|| / ||exact||, largest over rounds\n")
    print("| size | codec | time ms | ring ms | speed-up | target | wire bytes/rank | rel.err |")
    print("|---:|---|---:|---:|---:|---:|---:|---:|")
    for s in sizes:
        ring = [t for t, _ in data["gs-ring"].get(s, [])]
        for l in sorted(l for l in extra if "+" not in l):
            ts = [t for t, _ in data[l].get(s, [])]
            if not ts or not ring:
                continue
            t, tr = statistics.median(ts), statistics.median(ring)
            errs = extra[l].get(s, [(float("nan"), 0.0)])
            tgt = targets.get(l)
            mark = "" if tgt is None else (f"{tgt:g}x " + ("met" if tr / t >= tgt else "MISSED"))
            print(f"| {fsz(s)} | {l[3:]} | {t * 1e3:.1f} | {tr * 1e3:.1f} | {tr / t:.2f}x | "
                  f"{mark or '-'} | {statistics.median(w for _, w in errs):.0f} | "
                  f"{max(e for e, _ in errs):.3e} |")
# The sharded shapes: COLL+CODEC against COLL+none, per size.
for coll in ("reduce_scatter", "allgather"):
    base = f"{coll}+none"
    labels = sorted(l for l in data if l.startswith(coll + "+") and l != base)
    if base not in data:
        continue
    print(f"\n{coll} f32 in place, {nh} hosts x 1 rank, links shaped to {rate_s}"
          f" ({rate / 1e6:.1f} MB/s): compressed against uncompressed ({base}: the plain call),"
          " median time over rounds" + ("; reduce_scatter with error feedback" if coll ==
                                         "reduce_scatter" else ""))
    print("size = total buffer (a rank's block is size / hosts); none eff = ((n-1)/n * size /"
          " link rate) / time; wire ratio = none's wire bytes / the codec's (measured);"
          " link share = codec wire bytes / link rate / codec time (under 50%: not link-bound);"
          " target: speed-up / wire ratio >= 0.8 where the link is the bottleneck\n")
    print("| size | block | codec | time ms | none ms | none eff | speed-up | wire ratio |"
          " speed-up / ratio | link share | target | rel.err |")
    print("|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|---|---:|")
    for s in sizes:
        tb = [t for t, _ in data[base].get(s, [])]
        wb = [w for _, w in extra.get(base, {}).get(s, [])]
        if not tb or not wb:
            continue
        t0, w0 = statistics.median(tb), statistics.median(wb)
        eff = (nh - 1) / nh * s / rate / t0
        for l in labels:
            ts = [t for t, _ in data[l].get(s, [])]
            errs = extra.get(l, {}).get(s, [])
            if not ts or not errs:
                continue
            t, w = statistics.median(ts), statistics.median(e[1] for e in errs)
            up, ratio = t0 / t, w0 / w
            share = w / rate / t
            verdict = ("met" if up / ratio >= 0.8 else
                       "missed" + (" (not link-bound)" if share < 0.5 else ""))
            print(f"| {fsz(s)} | {fsz(s // nh)} | {l[len(coll) + 1:]} | {t * 1e3:.1f} |"
                  f" {t0 * 1e3:.1f} | {100.0 * eff:.1f}% | {up:.2f}x | {ratio:.2f} |"
                  f" {up / ratio:.2f} | {100.0 * share:.0f}% | {verdict} |"
                  f" {max(e[0] for e in errs):.2e} |")
bad = [(l, s, w) for l in data for s in data[l] for _, w in data[l][s] if w not in ("", "0", "-1", "N/A")]
if bad:
    print(f"\nWRONG RESULTS: {bad}")
    sys.exit(1)
EOF
