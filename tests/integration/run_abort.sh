#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# run_abort.sh: the abort_check modes whose ranks must be started by hand
# (gsrun would stop every rank when one is stopped or killed), with the
# lib_procs.sh helpers:
#   stopped    2 ranks; rank 1 stops itself (SIGSTOP); rank 0's blocked
#              all-reduce is aborted by a watchdog and returns GS_ERR_ABORTED
#              within 1 s; rank 0 then kills rank 1
#   heartbeat  3 ranks, GS_HEARTBEAT_MS=500, GS_TIMEOUT_MS=30000; rank 2
#              stops itself; ranks 0 and 1 fail with GS_ERR_PEER_FAILED naming
#              rank 2 within 1-4 s and at least one says "no heartbeat"
#   connect    rank 0 of 2 with gs_config_t.abort_flag; rank 1 is
#              hostile_peer.py, which joins the rendezvous and never completes
#              a connection (GS_TIMEOUT_MS=20000): the flag, set after 1.5 s,
#              stops the init with GS_ERR_ABORTED within 1 s
# usage: run_abort.sh PATH/TO/abort_check [CASE...]   (KEEP=1 keeps the logs)
set -u

PROG=${1:?usage: run_abort.sh PATH/TO/abort_check [stopped|heartbeat|connect]...}
shift
CASES=${*:-stopped heartbeat connect rendezvous}
# shellcheck source-path=SCRIPTDIR source=lib_procs.sh
. "$(dirname "$0")/lib_procs.sh"

# run_case NAME WORLD STOPPED_RANK TIMEOUT_MS : start WORLD ranks of "abort_check NAME";
# every rank but STOPPED_RANK must exit 0, and STOPPED_RANK must die of SIGKILL.
run_case() {
    local name=$1 n=$2 victim=$3 tmo=$4 port r pids=() ok=1 nhb=0 v
    port=$(free_port)
    for ((r = 0; r < n; r++)); do
        start_rank "$r" "$n" "$port" "$tmo" "$TMP/$name.$r.log" "$name"
        pids[r]=$LASTPID
    done
    for ((r = 0; r < n; r++)); do
        [ "$r" -eq "$victim" ] && continue
        wait_rank "${pids[r]}" 60
        echo "  $name: rank $r exit status $RC"
        [ "$RC" -eq 0 ] || ok=0
        v=$(field "$TMP/$name.$r.log" HB says_heartbeat)
        [ "${v:-0}" = 1 ] && nhb=$((nhb + 1))
    done
    wait_rank "${pids[victim]}" 10
    echo "  $name: stopped rank $victim exit status $RC (137 expected: killed by rank 0)"
    [ "$RC" -eq 137 ] || ok=0
    if [ "$name" = heartbeat ] && [ "$nhb" -lt 1 ]; then
        echo "  $name: no survivor said \"no heartbeat\""
        ok=0
    fi
    if [ "$ok" -eq 1 ]; then
        pass "$name"
    else
        fail "$name"
        dump_logs "$name"
    fi
}

# rendezvous_case RANK: one rank of 2 alone, so its init waits in the
# rendezvous (rank 0: for rank 1's hello; rank 1: connecting to rank 0);
# abort_flag, set after 1.5 s, ends it by 2.5 s (GS_TIMEOUT_MS 20 s).
rendezvous_case() {
    local r=$1 port name=rendezvous_r$1
    port=$(free_port)
    start_rank "$r" 2 "$port" 20000 "$TMP/$name.$r.log" initconnect
    wait_rank "$LASTPID" 30
    echo "  $name: init $(field "$TMP/$name.$r.log" INIT status) after" \
        "$(field "$TMP/$name.$r.log" INIT s) s (exit status $RC)"
    if [ "$RC" -eq 0 ]; then pass "$name"; else fail "$name"; dump_logs "$name"; fi
}

connect_case() {
    local port pid_fake ok=1 st
    port=$(free_port)
    start_rank 0 2 "$port" 20000 "$TMP/connect.0.log" initconnect
    local pid0=$LASTPID
    python3 "$(dirname "$0")/hostile_peer.py" join 127.0.0.1 "$port" 1 2 --hold 8 \
        >"$TMP/connect.fake.log" 2>&1 &
    pid_fake=$!
    PIDS+=("$pid_fake")
    wait_rank "$pid0" 30
    st=$(field "$TMP/connect.0.log" INIT status)
    echo "  connect: rank 0 init ${st:-nothing} after $(field "$TMP/connect.0.log" INIT s) s" \
        "(exit status $RC)"
    [ "$RC" -eq 0 ] || ok=0
    grep -q 'joined' "$TMP/connect.fake.log" || { echo "  the fake rank never joined"; ok=0; }
    kill -KILL "$pid_fake" 2>/dev/null
    if [ "$ok" -eq 1 ]; then
        pass connect
    else
        fail connect
        dump_logs connect
    fi
}

for c in $CASES; do
    case "$c" in
    connect) connect_case ;;
    rendezvous) rendezvous_case 0; rendezvous_case 1 ;;
    stopped) run_case stopped 2 1 20000 ;;
    heartbeat)
        EXTRA_ENV=(GS_HEARTBEAT_MS=500)
        run_case heartbeat 3 2 30000
        EXTRA_ENV=()
        ;;
    *) fail "unknown case $c" ;;
    esac
done
echo "run_abort: $PASS passed, $FAIL failed"
[ "$FAIL" -eq 0 ]
