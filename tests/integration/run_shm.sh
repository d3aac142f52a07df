#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# run_shm.sh: checks of the shared-memory path between ranks on one host
# (src/transport/tcp/tcp_pipe_shm.c) that need to read the ranks' logs:
#   used      on by default: every rank of 3 logs "2 through shared memory";
#             GS_SHM=0 gives "0 through shared memory"; results correct
#   fallback  /dev/shm "too small" (GS_SHM_TEST_FREE_BYTES=1000, a test-only
#             switch: COLL_CHECK_TESTHOOKS): a WARN naming the bytes free and
#             the bytes needed, every pair on TCP, results still correct
#   tmpfs     a real 16 KiB /dev/shm in a private mount namespace
#             (unshare -m, needs root; skipped otherwise): same as fallback,
#             found by statvfs
#   mixed     4 ranks on two pretend hosts (GS_HOST_ID a,b,a,b via run_hosts.sh):
#             each rank reaches its host mate through shared memory and the
#             other two over TCP, results correct
#   kill      run_fault.sh's kill -9 case on 4 ranks (now over shared memory)
#   budget    GS_SHM_MAX_BYTES (core/shm_budget.h) on 4 ranks with 64 KiB rings: a budget
#             for the 4 nearest pairs only (ranks 1 apart around the host) gives
#             every rank 2 peers through shared memory and one WARN naming the 2
#             pairs on TCP; one too small for any pair puts all 6 on TCP; results
#             correct; a bad value fails init with a sentence naming the knob
#   sweep     a segment left in /dev/shm by a process that is gone is removed at
#             the next job's setup, with a WARN; a live process's is left alone
#   cma       process_vm_readv refused (GS_SHM_TEST_CMA_DENY, COLL_CHECK_TESTHOOKS)
#             with the single-copy design forced: every rank says so once, the
#             host segment's all-reduce runs chunked and is correct
#   sealed    the host segment cannot be shrunk under its mappers: truncating
#             rank 0's memfd through /proc from another process fails (its
#             seals), and the job goes on and passes
#   model     the cost model prices the flat algorithms as intra-host only
#             when every pair is on shared memory, and every rank agrees:
#             with rank 1 alone unable to create its segments (pairs 1-2 and
#             1-3 on TCP) rank 0 still sees all its peers on shared memory but
#             takes the network parameters like the others (a disagreement
#             would pick different algorithms at 16 KiB: GS_ERR_MISMATCH;
#             COLL_CHECK_TESTHOOKS)
#   lazy      GS_CONNECT=lazy (the default; every other case runs eager, as they
#             count the links made at init): each of 4 ranks has shared memory
#             with its two ring neighbours after init, and an all-to-all connects
#             the third peer through shared memory too
# After every case: no /dev/shm/gradsync-PID-* segment whose creator PID is
# dead (segments are unlinked as soon as both sides mapped them).
# COLL_CHECK_TESTHOOKS is coll_check linked with the test variant of the
# library (libgradsync_testhooks.so), the only one with the test switches.
# usage: run_shm.sh GSRUN COLL_CHECK COLL_CHECK_TESTHOOKS FAULT_CHECK [CASE...]
set -u
# The cases count the links every rank makes at init: all of them (case lazy sets its own).
export GS_CONNECT=eager

GSRUN=${1:?usage: run_shm.sh GSRUN COLL_CHECK COLL_CHECK_TESTHOOKS FAULT_CHECK [CASE...]}
COLL=${2:?coll_check}
COLL_HOOKS=${3:?coll_check_testhooks}
FAULT=${4:?fault_check}
shift 4
CASES=${*:-used fallback tmpfs mixed kill budget sweep cma sealed model lazy}
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
pass=0
failed=0
export GS_TIMEOUT_MS=20000
# shellcheck disable=SC2054 # comma lists are single arguments of coll_check
ARGS=(--colls allreduce,broadcast,allgather,sendrecv --dtypes f32 --ops sum --counts 1,w+1,100003)

fail() {
    echo "FAIL: $*"
    failed=$((failed + 1))
}

ok() {
    echo "ok: $*"
    pass=$((pass + 1))
}

# leaked: segments in /dev/shm whose creating process is gone.
leak_check() {
    local f pid left=0
    for f in /dev/shm/gradsync-*; do
        [ -e "$f" ] || continue
        pid=${f#/dev/shm/gradsync-}
        pid=${pid%%-*}
        if ! kill -0 "$pid" 2>/dev/null; then
            echo "  leaked segment $f (process $pid is gone)"
            left=1
        fi
    done
    if [ "$left" -eq 0 ]; then ok "$1: no segment left in /dev/shm"; else fail "$1: segments leaked"; fi
}

# run LOG PROGRAM ENV... : PROGRAM (coll_check) on 3 ranks with GS_DEBUG=INFO
# for NET; status in RC.
run3() {
    local log=$1 prog=$2
    shift 2
    env GS_DEBUG=INFO GS_DEBUG_SUBSYS=NET "$@" "$GSRUN" -n 3 --timeout 120 "$prog" "${ARGS[@]}" \
        >"$log" 2>&1
    RC=$?
}

expect_rc0() { # LOG WHAT: RC must be 0
    if [ "$RC" -eq 0 ]; then
        ok "$2"
    else
        fail "$2 (exit $RC)"
        tail -n 20 "$1"
    fi
}

expect_in() { # LOG PATTERN COUNT WHAT
    local n
    n=$(grep -c -- "$2" "$1")
    if [ "$n" -ge "$3" ]; then
        ok "$4"
    else
        fail "$4 (found $n lines matching '$2', expected >= $3)"
        tail -n 20 "$1"
    fi
}

case_used() {
    run3 "$TMP/used.log" "$COLL"
    expect_rc0 "$TMP/used.log" "used: coll_check passed"
    expect_in "$TMP/used.log" "connected to 2 of 2 peers (2 through shared memory)" 3 \
        "used: every rank reaches both peers through shared memory"
    run3 "$TMP/off.log" "$COLL" GS_SHM=0
    expect_rc0 "$TMP/off.log" "off: coll_check passed"
    expect_in "$TMP/off.log" "connected to 2 of 2 peers (0 through shared memory)" 3 \
        "off: GS_SHM=0 keeps every pair on TCP"
    leak_check used
}

check_fallback() { # LOG WHAT
    expect_rc0 "$1" "$2: coll_check passed on TCP"
    expect_in "$1" "no shared memory with rank .* bytes free, the segment .* needs [0-9]* bytes" 3 \
        "$2: WARN names the bytes free and needed (one per pair)"
    expect_in "$1" "connected to 2 of 2 peers (0 through shared memory)" 3 "$2: every pair fell back to TCP"
}

case_fallback() {
    run3 "$TMP/fallback.log" "$COLL_HOOKS" GS_SHM_TEST_FREE_BYTES=1000
    check_fallback "$TMP/fallback.log" fallback
    leak_check fallback
}

case_tmpfs() {
    if [ "$(id -u)" -ne 0 ] ||
        ! unshare -m sh -c 'mount -t tmpfs -o size=16k gs_probe /dev/shm' 2>/dev/null; then
        echo "skipped: tmpfs (needs root, unshare -m and mount)"
        return
    fi
    local log=$TMP/tmpfs.log
    # A budget larger than the tmpfs, so that the room check (statvfs) is what refuses.
    unshare -m bash -c 'mount -t tmpfs -o size=16k gs_small_shm /dev/shm &&
        exec env GS_DEBUG=INFO GS_DEBUG_SUBSYS=NET GS_SHM_MAX_BYTES=1G "$@"' _ "$GSRUN" -n 3 \
        --timeout 120 "$COLL" \
        "${ARGS[@]}" >"$log" 2>&1
    RC=$?
    check_fallback "$log" tmpfs
}

case_mixed() {
    GS_DEBUG=INFO GS_DEBUG_SUBSYS=NET bash "$(dirname "$0")/run_hosts.sh" "$GSRUN" a,b,a,b 120 \
        "$COLL" "${ARGS[@]}" >"$TMP/mixed.log" 2>&1
    RC=$?
    expect_rc0 "$TMP/mixed.log" "mixed: coll_check passed"
    expect_in "$TMP/mixed.log" "connected to 3 of 3 peers (1 through shared memory)" 4 \
        "mixed: shared memory with the host mate only"
    leak_check mixed
}

case_kill() {
    if bash "$(dirname "$0")/run_fault.sh" "$FAULT" kill4 >"$TMP/kill.log" 2>&1; then
        ok "kill: survivors fail with GS_ERR_PEER_FAILED naming the rank"
    else
        fail "kill: run_fault.sh kill4"
        tail -n 30 "$TMP/kill.log"
    fi
    leak_check kill
}

# run4 LOG PROGRAM ENV... : PROGRAM (coll_check with ARGS) on 4 ranks; status in RC.
run4() {
    local log=$1 prog=$2
    shift 2
    env GS_DEBUG=INFO GS_DEBUG_SUBSYS=NET,ALGO "$@" "$GSRUN" -n 4 --timeout 120 "$prog" \
        "${ARGS[@]}" >"$log" 2>&1
    RC=$?
}

case_budget() {
    # 4 KiB slots: the host segment takes 4 x 8 KiB; a pair with 64 KiB rings 136 KiB.
    # 632 KiB leaves 600 KiB: the 4 pairs 1 apart (544 KiB), not all 6 (816 KiB).
    local base=(GS_SHM_SLOT_BYTES=4096 GS_SHM_BYTES=65536)
    run4 "$TMP/budget.log" "$COLL" "${base[@]}" GS_SHM_MAX_BYTES=632K
    expect_rc0 "$TMP/budget.log" "budget: coll_check passed"
    expect_in "$TMP/budget.log" "GS_SHM_MAX_BYTES gives the 4 ranks of this host 647168 bytes.*4 of their 6 pairs.*the other 2 talk TCP" 1 \
        "budget: one WARN names the pairs the budget left on TCP"
    expect_in "$TMP/budget.log" "connected to 3 of 3 peers (2 through shared memory)" 4 \
        "budget: every rank keeps shared memory with its two neighbours around the host"
    expect_in "$TMP/budget.log" "rank 0 talks to rank 1 through shared memory (2 x 65536 bytes)" 1 \
        "budget: rank 0 and its neighbour 1 share 64 KiB rings"
    expect_in "$TMP/budget.log" "rank 0 talks to rank 3 through shared memory" 1 \
        "budget: rank 0 and rank 3 are neighbours around the host"
    if [ "$(grep -c "GS_SHM_MAX_BYTES gives" "$TMP/budget.log")" -eq 1 ]; then
        ok "budget: the WARN is said once"
    else
        fail "budget: the WARN is not said exactly once"
    fi
    run4 "$TMP/budget0.log" "$COLL" "${base[@]}" GS_SHM_MAX_BYTES=64K
    expect_rc0 "$TMP/budget0.log" "budget (none fits): coll_check passed"
    expect_in "$TMP/budget0.log" "too little for the rings of their nearest pairs, so all 6 pairs talk TCP" 1 \
        "budget (none fits): the WARN says every pair talks TCP"
    expect_in "$TMP/budget0.log" "connected to 3 of 3 peers (0 through shared memory)" 4 \
        "budget (none fits): every pair on TCP"
    run4 "$TMP/budget_big.log" "$COLL" GS_SHM_MAX_BYTES=1G
    expect_rc0 "$TMP/budget_big.log" "budget (1G): coll_check passed"
    expect_in "$TMP/budget_big.log" "connected to 3 of 3 peers (3 through shared memory)" 4 \
        "budget (1G): every pair on shared memory at GS_SHM_BYTES"
    if grep -q "GS_SHM_MAX_BYTES gives" "$TMP/budget_big.log"; then
        fail "budget (1G): a budget that fits everything says nothing"
    else
        ok "budget (1G): a budget that fits everything says nothing"
    fi
    run4 "$TMP/budget_bad.log" "$COLL" GS_SHM_MAX_BYTES=12X
    if [ "$RC" -ne 0 ] && grep -q 'GS_SHM_MAX_BYTES="12X" is not auto or a size' "$TMP/budget_bad.log"; then
        ok "budget: GS_SHM_MAX_BYTES=12X fails init with a sentence naming it"
    else
        fail "budget: GS_SHM_MAX_BYTES=12X (exit $RC)"
        tail -n 5 "$TMP/budget_bad.log"
    fi
    leak_check budget
}

case_sweep() {
    local dead live stale mine
    bash -c 'exit 0' &
    dead=$!
    wait "$dead"
    if kill -0 "$dead" 2>/dev/null; then
        echo "skipped: sweep (pid $dead was reused at once)"
        return
    fi
    stale=/dev/shm/gradsync-$dead-0-1-00000000deadbeef
    mine=/dev/shm/gradsync-$$-0-1-00000000cafef00d
    head -c 4096 /dev/zero >"$stale"
    head -c 4096 /dev/zero >"$mine"
    run3 "$TMP/sweep.log" "$COLL"
    expect_rc0 "$TMP/sweep.log" "sweep: coll_check passed"
    expect_in "$TMP/sweep.log" "removed [0-9]* shared-memory segments* of gradsync processes that are gone" 1 \
        "sweep: a WARN says what was removed"
    if [ -e "$stale" ]; then fail "sweep: $stale is still there"; else ok "sweep: the dead process's segment is gone"; fi
    if [ -e "$mine" ]; then ok "sweep: a live process's segment is left alone"; else fail "sweep: $mine was removed"; fi
    rm -f "$stale" "$mine"
}

case_cma() {
    run3 "$TMP/cma.log" "$COLL_HOOKS" GS_SHM_TEST_CMA_DENY=1 GS_SHM_DESIGN=single-copy \
        GS_ALGO=allreduce:shm GS_DEBUG_SUBSYS=NET,ALGO
    expect_rc0 "$TMP/cma.log" "cma: coll_check passed with process_vm_readv refused"
    expect_in "$TMP/cma.log" "single copy is off for the collectives on this host: process_vm_readv from member [0-9]*: Operation not permitted" 3 \
        "cma: every rank says once why single copy is off"
    expect_in "$TMP/cma.log" "host segment: 3 ranks .* single copy off" 1 \
        "cma: rank 0's host segment line says single copy is off"
}

case_sealed() {
    local log=$TMP/sealed.log pid="" fd="" job t
    if [ "$(id -u)" -ne 0 ]; then
        echo "skipped: sealed (opening /proc/PID/map_files needs root)"
        return
    fi
    env GS_DEBUG=INFO GS_DEBUG_SUBSYS=ALGO "$GSRUN" -n 3 --timeout 120 "$COLL" --colls allreduce \
        --dtypes f32 --ops sum --counts 1,100003 --iters 400 >"$log" 2>&1 &
    job=$!
    # A rank's mapping of the segment (its memfd is closed once every rank mapped it):
    # bounded by 200 looks, 50 ms apart.
    for ((t = 0; t < 200 && ${#fd} == 0; t++)); do
        for p in $(pgrep -f "$COLL" || true); do
            for f in /proc/"$p"/map_files/*; do
                if [ "$(readlink "$f" 2>/dev/null)" = "/memfd:gradsync-host (deleted)" ]; then
                    pid=$p
                    fd=$f
                    break 2
                fi
            done
        done
        [ -n "$fd" ] || sleep 0.05
    done
    if [ -z "$fd" ]; then
        fail "sealed: no rank had the host segment mapped"
    elif python3 -c 'import os, sys; os.truncate(sys.argv[1], 0)' "$fd" 2>"$TMP/sealed.err"; then
        fail "sealed: truncating $fd (pid $pid) succeeded"
    else
        ok "sealed: truncating the segment from another process fails: $(tail -n 1 "$TMP/sealed.err")"
    fi
    wait "$job"
    RC=$?
    expect_rc0 "$log" "sealed: the job went on and passed"
}

case_model() {
    local log=$TMP/model.log
    # Pinned so that 16 KiB is rd with the network alpha and Rabenseifner with the intra one.
    local pin=(GS_ALGO_ALPHA_US=20 GS_ALGO_INTRA_ALPHA_US=10 GS_DEBUG=INFO GS_DEBUG_SUBSYS=NET,ALGO)
    env "${pin[@]}" "$GSRUN" -n 4 --timeout 120 "$COLL" --colls allreduce --dtypes f32 --ops sum \
        --counts 4096,w+1 >"$log" 2>&1
    RC=$?
    expect_rc0 "$log" "model: coll_check passed"
    expect_in "$log" "prices every algorithm with the intra-host parameters" 4 \
        "model: all on shared memory, every rank prices with the intra parameters"
    # The host segment's all-reduce beats the pair-ring algorithms, which the model still
    # prices with the intra parameters (Rabenseifner the cheapest of them at 16 KiB).
    expect_in "$log" "allreduce of 16384 bytes .*: shm (one-round; .*(cost model; model: .*rabenseifner" 4 \
        "model: 16 KiB all-reduce takes the host segment's one-round design on shared memory"
    env "${pin[@]}" "$GSRUN" -n 4 --timeout 120 bash -c \
        'if [ "$GS_RANK" = 1 ]; then export GS_SHM_TEST_FREE_BYTES=1000; fi; exec "$@"' _ \
        "$COLL_HOOKS" --colls allreduce --dtypes f32 --ops sum --counts 4096,w+1 >"$log" 2>&1
    RC=$?
    expect_rc0 "$log" "model (one pair on TCP): coll_check passed"
    expect_in "$log" "connected to 3 of 3 peers (3 through shared memory)" 1 \
        "model (one pair on TCP): rank 0 still has shared memory with all three peers"
    expect_in "$log" "prices the flat algorithms with the network parameters" 4 \
        "model (one pair on TCP): every rank agrees on the network parameters"
    expect_in "$log" "allreduce of 16384 bytes .*: shm (one-round; .*(cost model" 4 \
        "model (one pair on TCP): every rank still takes the host segment at 16 KiB"
}

case_lazy() {
    local log=$TMP/lazy.log
    env GS_CONNECT=lazy GS_DEBUG=INFO GS_DEBUG_SUBSYS=NET "$GSRUN" -n 4 --timeout 120 "$COLL" \
        --colls allreduce,alltoall --dtypes f32 --ops sum --counts 1,100003 >"$log" 2>&1
    RC=$?
    expect_rc0 "$log" "lazy: coll_check passed"
    expect_in "$log" "connected to 2 of 3 peers (2 through shared memory) at init, the others on first use" 4 \
        "lazy: every rank has shared memory with its two ring neighbours after init"
    expect_in "$log" "connected to rank [0-9] through shared memory (3 of 3 peers now)" 4 \
        "lazy: the all-to-all connects the third peer of every rank through shared memory"
    leak_check lazy
}

for c in $CASES; do
    "case_$c"
done
echo "$pass passed, $failed failed"
[ "$failed" -eq 0 ]
