#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# run_fault.sh: fault-injection checks of gradsync, run with the rank
# program fault_check. The ranks are started directly (not via gsrun, which
# stops every rank when one dies) with RANK/WORLD_SIZE/MASTER_ADDR/
# MASTER_PORT on a free loopback port, and every process is bounded by a
# watchdog and killed on exit. Cases:
#   kill      kill -9 of one rank (it raises SIGKILL on itself) in the middle
#             of a 64 MiB f32 all-reduce loop, GS_TIMEOUT_MS=20000, on 4 ranks
#             (victim 2) and on 5 ranks (victim 3; kill4/kill5 run one): EVERY
#             survivor gets GS_ERR_PEER_FAILED within 2 s of the kill, with
#             gs_last_error() naming the killed rank, and the error is sticky
#   nojoin    world size 3 but only ranks 0 and 1 start, GS_TIMEOUT_MS=3000:
#             both fail gs_comm_init with GS_ERR_TIMEOUT within ~5 s
#   nomaster  world size 3 but rank 0 (the rendezvous host) never starts
#   garbage   random bytes sent to the master port while a 2-rank job
#             initialises and runs: the job still finishes correctly
#   stop      SIGSTOP of one rank of 3 during an all-reduce loop with
#             GS_TIMEOUT_MS=3000: the others fail with GS_ERR_TIMEOUT
#   ghost     rank 3 of 6 joins the rendezvous with an address (and bootstrap
#             ring port) nothing listens on and is gone before any peer
#             connected to it (hostile_peer.py ghost): every other rank fails
#             init with GS_ERR_PEER_FAILED naming rank 3 within 5 s of the
#             ghost's exit (the bootstrap ring passes the report round); and
#             again without a ring port (rank 0 sends the whole table), where
#             only the transport finds it gone: its ring neighbours fail init,
#             the rest their first all-reduce, all naming rank 3
# usage: run_fault.sh PATH/TO/fault_check [CASE...]   (KEEP=1 keeps the logs)
# Prints "N passed, M failed"; exit status 1 when any case failed.
set -u

PROG=${1:?usage: run_fault.sh PATH/TO/fault_check [kill|kill4|kill5|nojoin|nomaster|garbage|stop|ghost]...}
shift
CASES=${*:-kill nojoin nomaster garbage stop ghost}
# shellcheck source-path=SCRIPTDIR source=lib_procs.sh
. "$(dirname "$0")/lib_procs.sh"

# kill_case WORLD VICTIM : the victim raises SIGKILL in the middle of an all-reduce.
kill_case() {
    local n=$1 victim=$2 name="kill$1" port r pids=()
    port=$(free_port)
    for ((r = 0; r < n; r++)); do
        start_rank "$r" "$n" "$port" 20000 "$TMP/$name.$r.log" loop --count 16777216 \
            --victim "$victim" --kill-after 3 --max-seconds 60 --expect PEER_FAILED
        pids[r]=$LASTPID
    done
    judge_kill "$name" "$victim" "${pids[@]}"
}

# init_only NAME WORLD RANKS... : start only RANKS of WORLD; each must time out in init.
init_only() {
    local name=$1 w=$2 port r pids=() ok=1 st ms
    shift 2
    port=$(free_port)
    for r in "$@"; do
        start_rank "$r" "$w" "$port" 3000 "$TMP/$name.$r.log" init --expect TIMEOUT
        pids[r]=$LASTPID
    done
    for r in "$@"; do
        wait_rank "${pids[r]}" 30
        st=$(field "$TMP/$name.$r.log" INIT status)
        ms=$(field "$TMP/$name.$r.log" INIT ms)
        echo "  $name: rank $r init returned ${st:-nothing} after ${ms:-?} ms (exit status $RC)"
        if [ "$RC" -ne 0 ] || [ "$st" != GS_ERR_TIMEOUT ] || [ -z "$ms" ] ||
            [ "$ms" -gt 5500 ]; then
            ok=0
        fi
    done
    if [ "$ok" -eq 1 ]; then
        pass "$name: every started rank failed init with GS_ERR_TIMEOUT within 5.5 s"
    else
        fail "$name: expected GS_ERR_TIMEOUT from gs_comm_init within 5.5 s on every rank"
        dump_logs "$name"
    fi
}

# inject PORT SECONDS MARKER : connect to PORT repeatedly and send junk.
inject() {
    local port=$1 end=$(($(now_ms) + $2 * 1000)) marker=$3 i=0
    trap - EXIT
    trap '' PIPE
    # One connection that sends a few bytes and then stays silent.
    exec 4<>"/dev/tcp/127.0.0.1/$port" 2>/dev/null && printf 'GS\x00' >&4 2>/dev/null
    while [ "$(now_ms)" -lt "$end" ]; do
        if exec 3<>"/dev/tcp/127.0.0.1/$port" 2>/dev/null; then
            case $((i % 5)) in
            0) head -c $((1 + RANDOM % 8192)) /dev/urandom >&3 2>/dev/null ;;
            1) printf '%b' '\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff' >&3 2>/dev/null ;;
            2) printf 'GET / HTTP/1.0\r\n\r\n' >&3 2>/dev/null ;;
            3) head -c 3 /dev/urandom >&3 2>/dev/null ;;
            4) head -c 65536 /dev/zero >&3 2>/dev/null ;;
            esac
            exec 3>&-
            i=$((i + 1))
            [ "$i" -eq 3 ] && : >"$marker"
        fi
        sleep 0.02
    done
    : >"$marker"
    echo "inject: $i junk connections" >"$marker"
}

case_garbage() {
    local port r ok=1 pids=() inj st
    port=$(free_port)
    start_rank 0 2 "$port" 10000 "$TMP/garbage.0.log" loop --count 100000 --iters 40 \
        --max-seconds 60 --expect ok
    pids[0]=$LASTPID
    (inject "$port" 4 "$TMP/garbage.inject") >/dev/null 2>&1 &
    inj=$!
    PIDS+=("$inj")
    # Start rank 1 once some junk has reached rank 0 (at most 5 s later).
    local end=$(($(now_ms) + 5000))
    while [ ! -e "$TMP/garbage.inject" ] && [ "$(now_ms)" -lt "$end" ]; do
        sleep 0.05
    done
    start_rank 1 2 "$port" 10000 "$TMP/garbage.1.log" loop --count 100000 --iters 40 \
        --max-seconds 60 --expect ok
    pids[1]=$LASTPID
    for r in 0 1; do
        wait_rank "${pids[r]}" 60
        st=$(field "$TMP/garbage.$r.log" RESULT status)
        echo "  garbage: rank $r ${st:-no RESULT} (exit status $RC)"
        if [ "$RC" -ne 0 ] || [ "$st" != GS_OK ]; then
            ok=0
        fi
    done
    wait_rank "$inj" 10
    [ -s "$TMP/garbage.inject" ] && echo "  $(cat "$TMP/garbage.inject")"
    if [ "$ok" -eq 1 ]; then
        pass "garbage: job finished correctly despite junk on the master port"
    else
        fail "garbage: junk on the master port broke the job"
        dump_logs garbage
    fi
}

case_stop() {
    local n=3 victim=2 port r pids=() ok=1 t_stop st t dt ntimeout=0 rc_v
    port=$(free_port)
    for ((r = 0; r < n; r++)); do
        start_rank "$r" "$n" "$port" 3000 "$TMP/stop.$r.log" loop --count 1000000 \
            --max-seconds 40 --expect TIMEOUT,PEER_FAILED
        pids[r]=$LASTPID
    done
    for ((r = 0; r < n; r++)); do
        if ! wait_line "$TMP/stop.$r.log" '^RUNNING' 30; then
            fail "stop: rank $r never started running"
            dump_logs stop
            return
        fi
    done
    t_stop=$(now_ms)
    kill -STOP "${pids[victim]}"
    for ((r = 0; r < n; r++)); do
        [ "$r" -eq "$victim" ] && continue
        wait_rank "${pids[r]}" 30
        st=$(field "$TMP/stop.$r.log" RESULT status)
        t=$(field "$TMP/stop.$r.log" RESULT t_ms)
        dt=$(( ${t:-0} - t_stop ))
        echo "  stop: rank $r got ${st:-no RESULT} $dt ms after SIGSTOP (exit status $RC)"
        [ "$st" = GS_ERR_TIMEOUT ] && ntimeout=$((ntimeout + 1))
        if [ "$RC" -ne 0 ] || [ -z "$t" ] || [ "$dt" -lt 1500 ] || [ "$dt" -gt 6500 ]; then
            ok=0
        fi
    done
    kill -CONT "${pids[victim]}" 2>/dev/null
    kill -KILL "${pids[victim]}" 2>/dev/null
    wait_rank "${pids[victim]}" 10
    rc_v=$RC
    [ "$ntimeout" -ge 1 ] || ok=0
    if [ "$ok" -eq 1 ]; then
        pass "stop: survivors failed with GS_ERR_TIMEOUT ($ntimeout) 1.5-6.5 s after SIGSTOP"
    else
        fail "stop: expected GS_ERR_TIMEOUT (others TIMEOUT or PEER_FAILED) 1.5-6.5 s after SIGSTOP"
        dump_logs stop
    fi
    : "$rc_v"
}

# ghost_case NAME WORLD VICTIM [--no-ring] : the victim is a ghost (hostile_peer.py ghost),
# gone before any peer connected to it; every other rank must name it.
ghost_case() {
    local name=$1 n=$2 victim=$3 port r pids=() ok=1 t0 st t err gpid
    shift 3
    port=$(free_port)
    for ((r = 0; r < n; r++)); do
        [ "$r" -eq "$victim" ] && continue
        start_rank "$r" "$n" "$port" 20000 "$TMP/$name.$r.log" loop --count 1024 --iters 20 \
            --victim "$victim" --max-seconds 30 --expect PEER_FAILED
        pids[r]=$LASTPID
    done
    python3 "$(dirname "$0")/hostile_peer.py" ghost 127.0.0.1 "$port" "$victim" "$n" "$@" \
        >"$TMP/$name.$victim.log" 2>&1 &
    gpid=$!
    PIDS+=("$gpid")
    wait_rank "$gpid" 40
    t0=$(field "$TMP/$name.$victim.log" GHOST t_ms)
    if [ -z "$t0" ]; then
        fail "$name: the ghost never joined"
        dump_logs "$name"
        return
    fi
    for ((r = 0; r < n; r++)); do
        [ "$r" -eq "$victim" ] && continue
        wait_rank "${pids[r]}" 60
        st=$(field "$TMP/$name.$r.log" RESULT status)
        t=$(field "$TMP/$name.$r.log" RESULT t_ms)
        err=$(sed -n 's/^RESULT .* err=//p' "$TMP/$name.$r.log" | head -n 1)
        echo "  $name: rank $r got ${st:-no RESULT} $((${t:-0} - t0)) ms after the ghost left" \
            "(exit status $RC): $err"
        if [ "$RC" -ne 0 ] || [ "$st" != GS_ERR_PEER_FAILED ] || [ -z "$t" ] ||
            [ $((t - t0)) -gt 5000 ]; then
            ok=0
        fi
    done
    if [ "$ok" -eq 1 ]; then
        pass "$name: every rank failed with GS_ERR_PEER_FAILED naming rank $victim within 5 s"
    else
        fail "$name: not every rank named rank $victim, gone before any peer connected to it"
        dump_logs "$name"
    fi
}

for c in $CASES; do
    case "$c" in
    ghost) ghost_case ghost 6 3 && ghost_case ghost_table 6 3 --no-ring ;;
    kill) kill_case 4 2 && kill_case 5 3 ;;
    kill4) kill_case 4 2 ;;
    kill5) kill_case 5 3 ;;
    nojoin) init_only nojoin 3 0 1 ;;
    nomaster) init_only nomaster 3 1 2 ;;
    garbage) case_garbage ;;
    stop) case_stop ;;
    *) fail "unknown case $c" ;;
    esac
done
echo "run_fault: $PASS passed, $FAIL failed"
[ "$FAIL" -eq 0 ]
