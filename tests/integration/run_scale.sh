#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# run_scale.sh: jobs of many ranks on this host, with connections made on
# first use (GS_CONNECT=lazy, the default; docs/scale.md). Cases:
#   w128    128 ranks pass all-reduce, broadcast and all-to-all (coll_check
#           checks every result), with shared memory and with GS_SHM=0
#   ulimit  128 ranks pass a ring all-reduce with every rank under
#           `ulimit -n 256` (the full mesh needs 2 x 127 sockets a rank)
#   a2a     8 ranks: 100 ring all-reduces connect only the ring neighbours
#           (each rank logs 2 of 7 peers at init and nothing more during
#           them), then an all-to-all connects the other 5 of each rank
#           without error (each logs "7 of 7 peers now")
#   eager   GS_CONNECT=eager still connects every pair at init (8 ranks)
# usage: run_scale.sh GSRUN COLL_CHECK [CASE...]
# Prints "N passed, M failed"; exit status 1 when any case failed.
set -u

GSRUN=${1:?usage: run_scale.sh GSRUN COLL_CHECK [CASE...]}
COLL=${2:?coll_check}
shift 2
CASES=${*:-w128 ulimit a2a eager}
# shellcheck source-path=SCRIPTDIR source=lib_procs.sh
. "$(dirname "$0")/lib_procs.sh" # TMP, pass, fail (its launcher variables unset)
export GS_TIMEOUT_MS=120000
# 128 ranks on 2 cores (64 a core, beside whatever else runs): a rank can go unscheduled for
# seconds, which the default heartbeat (3 x 1 s of silence) takes for a frozen host. The
# heartbeat is not what these cases test.
export GS_HEARTBEAT_MS=10000

# job NAME N ENV... -- ARGS... : coll_check on N ranks; output in $TMP/NAME.log, status in RC.
job() {
    local name=$1 n=$2 envs=()
    shift 2
    while [ $# -gt 0 ] && [ "$1" != -- ]; do
        envs+=("$1")
        shift
    done
    shift
    local t0
    t0=$(date +%s%N)
    env ${envs[@]+"${envs[@]}"} "$GSRUN" -n "$n" --timeout 400 "$@" >"$TMP/$name.log" 2>&1
    RC=$?
    MS=$((($(date +%s%N) - t0) / 1000000))
}

passed_line() { # NAME: coll_check's summary, "0 failed" and nothing skipped it needed
    grep -q "coll_check world=[0-9]*: [0-9]* passed, 0 failed" "$TMP/$1.log"
}

expect_job() { # NAME WHAT
    if [ "$RC" -eq 0 ] && passed_line "$1"; then
        pass "$2 ($MS ms): $(grep -o 'world=[0-9]*: [0-9]* passed, 0 failed' "$TMP/$1.log")"
    else
        fail "$2 (exit $RC after $MS ms)"
        grep -v " INFO " "$TMP/$1.log" | tail -n 15
    fi
}

every_rank() { # LOG PATTERN N WHAT: N lines of LOG (one a rank) match PATTERN
    local n
    n=$(grep -c -- "$2" "$1")
    if [ "$n" -eq "$3" ]; then
        pass "$4"
    else
        fail "$4: $n of $3 ranks said '$2'"
    fi
}

case_w128() {
    job w128 128 -- "$COLL" --colls allreduce,broadcast,alltoall --dtypes f32,i32 --ops sum \
        --counts 1,w+1,4099
    expect_job w128 "w128: 128 ranks, all-reduce, broadcast and all-to-all checked"
    job w128_tcp 128 GS_SHM=0 -- "$COLL" --colls allreduce,broadcast,alltoall --dtypes f32 \
        --ops sum --counts 1,w+1
    expect_job w128_tcp "w128: the same with GS_SHM=0"
}

case_ulimit() {
    # The limit is set in each rank (gsrun itself keeps a pipe per rank).
    job ulimit 128 GS_ALGO=allreduce:ring -- bash -c 'ulimit -n 256 && exec "$@"' _ "$COLL" \
        --colls allreduce --dtypes f32 --ops sum --counts 1,w+1,65537
    expect_job ulimit "ulimit: 128 ranks under ulimit -n 256, ring all-reduce"
}

case_a2a() {
    local log=$TMP/a2a.log
    job a2a 8 GS_ALGO=allreduce:ring GS_DEBUG=INFO GS_DEBUG_SUBSYS=NET,ALGO -- "$COLL" \
        --colls allreduce,alltoall --dtypes f32 --ops sum --counts 1031 --variants blk --iters 100
    expect_job a2a "a2a: 100 ring all-reduces, then an all-to-all, 8 ranks"
    every_rank "$log" "connected to 2 of 7 peers .* at init, the others on first use" 8 \
        "a2a: every rank connected its 2 ring neighbours at init"
    every_rank "$log" "(7 of 7 peers now)" 8 "a2a: the all-to-all connected every rank's other 5 peers"
    # The ring all-reduces connect nobody new: rank 0's first link made on first use comes
    # after its first all-to-all was chosen (its log lines are in its own order).
    local first_link first_a2a
    first_link=$(grep -n "^\[0\].*connected to rank [0-9]" "$log" | head -n 1 | cut -d: -f1)
    first_a2a=$(grep -n "^\[0\].* INFO ALGO alltoall" "$log" | head -n 1 | cut -d: -f1)
    if [ -n "$first_link" ] && [ -n "$first_a2a" ] && [ "$first_link" -gt "$first_a2a" ]; then
        pass "a2a: rank 0 made no link during the 100 ring all-reduces, its others in the all-to-all"
    else
        fail "a2a: rank 0's first lazy link (line ${first_link:-none}) is not after its first" \
            "all-to-all (line ${first_a2a:-none})"
        grep "^\[0\].*\(connected to rank\|INFO ALGO\)" "$log" | head -n 12
    fi
}

case_eager() {
    local log=$TMP/eager.log
    job eager 8 GS_CONNECT=eager GS_DEBUG=INFO GS_DEBUG_SUBSYS=NET -- "$COLL" \
        --colls allreduce,alltoall --dtypes f32 --ops sum --counts 1031
    expect_job eager "eager: 8 ranks with GS_CONNECT=eager"
    every_rank "$log" "connected to 7 of 7 peers .* at init, GS_CONNECT=eager" 8 \
        "eager: every rank connected all 7 peers at init"
}

for c in $CASES; do
    "case_$c"
done
echo "$PASS passed, $FAIL failed"
[ "$FAIL" -eq 0 ]
