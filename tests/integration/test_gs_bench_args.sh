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
echo "test_gs_bench_args: $PASS passed, $FAIL failed"
[ "$FAIL" -eq 0 ]
