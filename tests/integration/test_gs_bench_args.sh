#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# test_gs_bench_args.sh GSRUN GS_BENCH [MPI_BUILT]: gs-bench reads an nccl-tests command
# line as nccl-tests does (docs/bench.md): -o is the reduction op, -d the
# dtype (nccl-tests' names too), -c 0|1 turns checking off or on (on by
# default), -a the aggregation over ranks; --out FILE still writes a file,
# and -o with a file name is refused with a sentence that says so. --help
# lists, per collective, only the algorithms that implement it, and offers
# --transport mpi only when the library has MPI (MPI_BUILT 1 or 0). The
# progress line of a sweep shows on a terminal and never in a pipe.
# --codec on allreduce, reduce_scatter and allgather (one row per size with
# wire bytes and rel.err: none is exact and sends the uncompressed bytes,
# int8 about a quarter of them with its error), --ef on the summed shapes
# only, --codec on any other collective refused naming those that take it;
# `gs-bench codec --list` names the codecs --help offers.
# The floor column: a positive number for a 16 MiB all-reduce on one host (2 ranks), also
# with the ring forced over the pair rings; with GS_SHM=0 "not measured" and - (bytes go
# through sockets), - in every row on two pretend hosts (run_hosts.sh), and the last csv
# field and a json key.
set -u
GSRUN=${1:?usage: test_gs_bench_args.sh GSRUN GS_BENCH [MPI_BUILT]}
BENCH=${2:?usage: test_gs_bench_args.sh GSRUN GS_BENCH [MPI_BUILT]}
MPI_BUILT=${3:-}
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
PASS=0
FAIL=0
ok() { echo "ok - $1"; PASS=$((PASS + 1)); }
bad() { echo "FAIL - $1"; FAIL=$((FAIL + 1)); }
run() { "$GSRUN" -n 2 --timeout 60 "$BENCH" allreduce -b 1K -e 4K -w 1 -n 3 "$@" >"$TMP/out" 2>&1; }

run -o max -d float -a 2
if [ $? -eq 0 ] && grep -q "dtype f32, op max" "$TMP/out" && grep -q "check on" "$TMP/out" &&
    grep -q "of the fastest rank's time" "$TMP/out" && grep -Eq "^\[0\] +1024 .* max .* 0 " "$TMP/out"; then
    ok "-o max -d float -a 2: op max, f32, checked by default, fastest rank"
else
    bad "-o max -d float -a 2: $(head -4 "$TMP/out")"
fi
run -c 0 -d int32 -o bxor
if [ $? -eq 0 ] && grep -q "check off" "$TMP/out" && grep -q "dtype i32, op bxor" "$TMP/out" &&
    grep -q "N/A" "$TMP/out"; then ok "-c 0: not checked"; else bad "-c 0: $(head -3 "$TMP/out")"; fi
run --no-check -a 0
if [ $? -eq 0 ] && grep -q "check off" "$TMP/out" && grep -q "of rank 0's time" "$TMP/out"; then
    ok "--no-check -a 0"; else bad "--no-check -a 0: $(head -3 "$TMP/out")"; fi
run --out "$TMP/file.txt" --check=1
if [ $? -eq 0 ] && grep -q "check on" "$TMP/file.txt"; then ok "--out FILE --check=1"; else
    bad "--out FILE: $(cat "$TMP/out")"; fi
run -o result.txt
if [ $? -eq 2 ] && grep -q "reduction op, as in nccl-tests" "$TMP/out" && [ ! -e result.txt ]; then
    ok "-o FILE is refused, saying -o is the op"; else bad "-o FILE: $(cat "$TMP/out")"; fi
run -a 4
if [ $? -eq 2 ]; then ok "-a 4 refused"; else bad "-a 4 accepted"; fi
run -c 2
if [ $? -eq 2 ]; then ok "-c 2 refused"; else bad "-c 2 accepted"; fi
if "$BENCH" --version 2>&1 | grep -Eqx 'gs-bench \(gradsync\) [0-9]+\.[0-9]+\.[0-9]+'; then
    ok "--version"; else bad "--version: $("$BENCH" --version 2>&1)"; fi
# --help lists, per collective, only the algorithms that implement it (the library's
# table, gs_algo_implements): allreduce's --algo list has no chain, binomial or direct,
# broadcast's has chain and binomial but no ring; --algo chain is refused at once.
"$BENCH" --help >"$TMP/help" 2>&1
algo_line=$(grep -E '^ +allreduce +auto ' "$TMP/help")
bcast_line=$(grep -E '^ +broadcast +auto ' "$TMP/help")
if echo "$algo_line" | grep -qw ring && ! echo "$algo_line" | grep -Eqw 'chain|binomial|direct' &&
    echo "$bcast_line" | grep -qw binomial && ! echo "$bcast_line" | grep -qw ring; then
    ok "--help: per collective, only the algorithms that implement it"
else
    bad "--help algorithms: '$algo_line' / '$bcast_line'"
fi
run --algo chain
if [ $? -eq 2 ] && grep -q "does not implement allreduce" "$TMP/out"; then
    ok "--algo chain refused for allreduce"; else bad "--algo chain: $(head -3 "$TMP/out")"; fi
# --transport mpi: in --help only in a build with the MPI transport.
if [ -n "$MPI_BUILT" ]; then
    tline=$(grep -E '^ +--transport ' "$TMP/help")
    if echo "$tline" | grep -q 'tcp|mpi'; then has=1; else has=0; fi
    if [ "$has" = "$MPI_BUILT" ]; then ok "--help: --transport mpi offered iff built ($MPI_BUILT)"
    else bad "--help offers '$tline' in a build with MPI_BUILT=$MPI_BUILT"; fi
fi
# The progress line: on a terminal only (a pseudo-terminal from script(1)), never in a pipe.
run -a 3
if grep -q $'\033' "$TMP/out"; then bad "progress: escape codes in piped output"; else
    ok "progress: quiet when stderr is not a terminal"; fi
if command -v script >/dev/null 2>&1; then
    script -qec "$BENCH allreduce -b 1K -e 1M -w 1 -n 2" /dev/null >"$TMP/tty" 2>&1
    if grep -q $'\033\[K'"allreduce .*%" "$TMP/tty"; then ok "progress: drawn on a terminal"; else
        bad "progress: no progress line on a terminal"; fi
fi
# --codec on the three shapes that take it: 3 ranks, 12 KiB and 192 KiB (total buffer bytes).
# check_codec COLL CODEC [OPTIONS]: exit 0, two rows of that codec; none: rel.err below 1e-6
# and the wire bytes those of the uncompressed call ((n-1)/n of the size for the sharded
# shapes); int8: rel.err in (1e-3, 2e-2) and under 0.3x those bytes.
check_codec() {
    local coll=$1 codec=$2
    shift 2
    "$GSRUN" -n 3 --timeout 60 "$BENCH" "$coll" -b 12K -e 192K -f 16 -w 1 -n 2 --codec "$codec" \
        "$@" --csv --out "$TMP/codec.csv" >"$TMP/out" 2>&1 ||
        { bad "$coll --codec $codec $*: $(tail -3 "$TMP/out")"; return; }
    if python3 - "$TMP/codec.csv" "$coll" "$codec" <<'PY'
import csv, sys
rows = list(csv.DictReader(open(sys.argv[1])))
coll, codec = sys.argv[2], sys.argv[3]
assert [int(r["size"]) for r in rows] == [12288, 196608], rows
for r in rows:
    assert r["coll"] == coll and r["codec"] == codec, r
    size, wire, err = int(r["size"]), float(r["wire_bytes"]), float(r["rel_err"])
    plain = size * 2 / 3 if coll != "allreduce" else size * 4 / 3
    assert float(r["time_us"]) > 0 and float(r["busbw_gbps"]) > 0, r
    if codec == "none":
        assert err < 1e-6 and (coll == "allreduce" or wire == plain), r
    else:
        assert 1e-3 < err < 2e-2 and wire < 0.3 * plain, r
PY
    then ok "$coll --codec $codec $*: rows with wire bytes and rel.err"; else
        bad "$coll --codec $codec $*: $(cat "$TMP/codec.csv")"; fi
}
check_codec allreduce int8 --ef
check_codec reduce_scatter none
check_codec reduce_scatter int8 --ef --op avg
check_codec reduce_scatter int8 --inplace
check_codec allgather none --inplace
check_codec allgather int8
"$BENCH" broadcast -b 1K -e 1K --codec int8 >"$TMP/out" 2>&1
if [ $? -eq 2 ] && grep -q "codec applies to allreduce, allgather and reduce_scatter only" "$TMP/out"; then
    ok "--codec on broadcast refused, naming the collectives that take it"
else bad "broadcast --codec: $(cat "$TMP/out")"; fi
"$BENCH" allgather -b 1K -e 1K --codec int8 --ef >"$TMP/out" 2>&1
if [ $? -eq 2 ] && grep -q "ef applies to allreduce and reduce_scatter only" "$TMP/out"; then
    ok "allgather --ef refused"; else bad "allgather --ef: $(cat "$TMP/out")"; fi
help_codecs=$(sed -n '/--codec NAME/{n;s/.*(f32; sum|avg)://p}' "$TMP/help" | xargs)
list_codecs=$("$BENCH" codec --list | xargs)
if [ -n "$list_codecs" ] && [ "$help_codecs" = "$list_codecs" ] && echo " $list_codecs " | grep -q " int8 "; then
    ok "codec --list: the codecs --help offers ($list_codecs)"
else bad "codec --list '$list_codecs' against --help '$help_codecs'"; fi
# The floor column: the fraction of the memory-traffic floor a row reached (gs_comm_stats'
# traffic_bytes at the two-thread memcpy rate that rank 0 measures in the run, over the
# row's time). floor_rows FILE prints "ALGO FLOOR" per row, the columns found by name.
floor_rows() {
    python3 - "$1" <<'PY'
import re, sys
col = None
for ln in open(sys.argv[1]):
    ln = re.sub(r"^\[\d+\] ", "", ln.rstrip("\n"))
    if ln.startswith("#") and "#wrong" in ln:
        names = ln.split()[1:]
        col, algo = names.index("floor"), names.index("algo")
    elif col is not None and re.match(r"^\s+\d+\s+\d+\s", ln):
        t = ln.split()
        print(t[algo].split("->")[-1], t[col])
PY
}
# in_floor V: V is a positive number (16 MiB is out of the cache, so about 1 at most; the
# bound is loose because the copy rate and the call are timed at different moments of a
# loaded machine).
in_floor() { awk -v v="$1" 'BEGIN { exit !(v ~ /^[0-9.]+$/ && v > 0 && v <= 4) }'; }
measured='^\[0\] # memory floor: (one|two)-thread memcpy [0-9.]+ GB/s \([0-9.]+ GB/s of traffic\), measured in this run'
# One host, shared memory: the all-reduce's design is counted, the floor is a number.
"$GSRUN" -n 2 --timeout 60 "$BENCH" allreduce -b 16M -e 16M -w 1 -n 3 >"$TMP/out" 2>&1
rows=$(floor_rows "$TMP/out")
if [ $? -eq 0 ] && grep -Eq "$measured" "$TMP/out" && [ "$(echo "$rows" | wc -l)" -eq 1 ] &&
    in_floor "$(echo "$rows" | awk '{print $2}')"; then
    ok "floor: one host, 2 ranks: memcpy rate in the header, floor ${rows#* } in (0, 4]"
else bad "floor, one host: rows '$rows': $(cat "$TMP/out")"; fi
# GS_SHM=0: the ranks share a host but their bytes go through sockets: nothing counted.
GS_SHM=0 "$GSRUN" -n 2 --timeout 60 "$BENCH" allreduce -b 16M -e 16M -w 1 -n 3 --algo rd,ring \
    >"$TMP/out" 2>&1
rows=$(floor_rows "$TMP/out")
rd=$(echo "$rows" | awk '$1 == "rd" {print $2}')
ring=$(echo "$rows" | awk '$1 == "ring" {print $2}')
if grep -q "memory floor: not measured (.*GS_SHM=0)" "$TMP/out" && [ "$rd" = "-" ] &&
    [ "$ring" = "-" ]; then
    ok "floor: GS_SHM=0: not measured, rd -, ring -"
else bad "floor, GS_SHM=0: rd '$rd', ring '$ring': $(cat "$TMP/out")"; fi
# Shared memory with the ring forced: the pair rings' traffic is counted; recursive
# doubling's is not: -.
"$GSRUN" -n 2 --timeout 60 "$BENCH" allreduce -b 16M -e 16M -w 1 -n 3 --algo ring,rd \
    >"$TMP/out" 2>&1
rows=$(floor_rows "$TMP/out")
rd=$(echo "$rows" | awk '$1 == "rd" {print $2}')
ring=$(echo "$rows" | awk '$1 == "ring" {print $2}')
if in_floor "$ring" && [ "$rd" = "-" ]; then
    ok "floor: shared memory, forced: ring $ring, rd -"
else bad "floor, forced: ring '$ring', rd '$rd': $(cat "$TMP/out")"; fi
# Two pretend hosts (GS_HOST_ID a, b): no traffic is counted, nothing is measured.
bash "$(dirname "$0")/run_hosts.sh" "$GSRUN" a,b 60 "$BENCH" allreduce -b 4K -e 1M -f 16 -w 1 \
    -n 2 >"$TMP/out" 2>&1
rows=$(floor_rows "$TMP/out")
if grep -q "memory floor: not measured (the ranks do not all share one host" "$TMP/out" &&
    [ "$(echo "$rows" | wc -l)" -eq 3 ] && [ -z "$(echo "$rows" | awk '$2 != "-"')" ]; then
    ok "floor: two hosts: not measured, - in every row"
else bad "floor, two hosts: $(cat "$TMP/out")"; fi
# CSV: floor is the last field; JSON: memory_floor in the header, floor in every row.
"$GSRUN" -n 2 --timeout 60 "$BENCH" allreduce -b 4K -e 64K -f 16 -w 1 -n 2 --csv \
    --out "$TMP/floor.csv" >"$TMP/out" 2>&1 &&
    "$GSRUN" -n 2 --timeout 60 "$BENCH" allreduce -b 4K -e 64K -f 16 -w 1 -n 2 --json \
        --out "$TMP/floor.json" >>"$TMP/out" 2>&1
if [ $? -eq 0 ] && python3 - "$TMP/floor.csv" "$TMP/floor.json" <<'PY'
import csv, json, sys
lines = open(sys.argv[1]).read().splitlines()
assert lines[0].split(",")[-1] == "floor", lines[0]
# A number where the design's traffic is counted (shm, ring), else - (csv) or null (json).
counted = ("shm", "ring")
rows = list(csv.DictReader(lines))
assert len(rows) == 2, rows
for r in rows:
    assert float(r["floor"]) > 0 if r["algo_used"] in counted else r["floor"] == "-", r
d = json.load(open(sys.argv[2]))
fl = d["memory_floor"]
assert abs(fl["traffic_gbps"] / fl["memcpy_gbps"] - 2) < 1e-3, fl
assert len(d["rows"]) == 2, d["rows"]
for r in d["rows"]:
    assert r["floor"] > 0 if r["algo_used"] in counted else r["floor"] is None, r
PY
then ok "floor: the last csv field, a json key"; else
    bad "floor in csv/json: $(cat "$TMP/out" "$TMP/floor.csv" "$TMP/floor.json")"; fi
echo "test_gs_bench_args: $PASS passed, $FAIL failed"
[ "$FAIL" -eq 0 ]
