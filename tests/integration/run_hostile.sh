#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# run_hostile.sh: hostile peers against gradsync's ports (docs/wire.md,
# docs/security.md), with the raw-socket client hostile_peer.py. Cases:
#   form        a 3-rank coll_check job with a job token (GS_AUTH_TOKEN):
#               ranks 0 and 1 start, and while the job waits for rank 2 the
#               client sends the rendezvous garbage, truncated hellos, wrong
#               magic and version, huge address lengths and a wrong-token
#               proof; sends each of rank 0's and rank 1's transport ports
#               garbage, truncated and wrong-magic/version handshakes, a DATA
#               frame instead of a handshake, and (with the job and
#               communicator ids a rejecting ACK gives away) a HELLO without
#               the token, a PROOF made with a wrong token and a replayed
#               PROOF; and opens 300 idle connections to each port. Then
#               rank 2 starts. Pass: the job's results are right (every rank
#               exits 0, "0 failed"), the ranks logged the rejections (WARN),
#               and nothing crashed.
#   join        the client joins the rendezvous as rank 2 of 3 (it has the token), so
#               ranks 0 and 1 wait in connection setup and answer handshakes; it then
#               sends each the transport attacks: wrong magic and version, another job,
#               a rank or socket index out of range, an unknown flag, a HELLO without
#               the token, a PROOF made with a wrong token, a replayed PROOF. Pass:
#               each rejected with a WARN, no crash, and both ranks fail at their
#               deadline with GS_ERR_TIMEOUT naming rank 2 (it never really connected).
#   overlimit   hostile_peer.py plays rank 0 of a 2-rank job (a peer past
#               the handshake) and announces a message over
#               GS_MAX_MESSAGE_BYTES to the real rank 1 (trial_check hwm):
#               1 TiB under the default (64 GiB), and 3 GiB with 256 MiB of
#               it streamed under GS_MAX_MESSAGE_BYTES=1M. Pass: rank 1
#               fails with GS_ERR_PROTOCOL naming peer 0 and the limit, its
#               peak RSS grows by less than 64 MiB, and it does not crash.
#   flood       the same fake rank 0 sends 1,100,000 zero-length DATA frames
#               (built at C speed, so the sender never limits it) that no
#               receive matches: every message held costs GS_TCP_MSG_COST
#               (512 B) against the 8 GiB budget and at most 2^20 are held
#               (tcp_conn.h), while rank 1's diagnosis probes the held ones
#               on every wake-up (each probe found through the match index,
#               not by a walk: test_tcp_held counts the keys looked at).
#               Then (flood_overlap) a 64-byte message as two chunks that
#               both cover bytes 0..31. Pass: rank 1 fails with
#               GS_ERR_PROTOCOL naming peer 0 and the bound (the chunk plan),
#               its peak RSS grows by at most 2^20 x 512 B + 32 MiB (overlap:
#               64 MiB), and it does not crash.
# usage: run_hostile.sh COLL_CHECK TRIAL_CHECK [CASE...]   (KEEP=1 keeps the logs)
# Prints what was tried and what survived; exit status 1 when any case failed.
set -u

COLL=${1:?usage: run_hostile.sh COLL_CHECK TRIAL_CHECK [form|join|overlimit|flood]...}
TRIAL=${2:?usage: run_hostile.sh COLL_CHECK TRIAL_CHECK [form|join|overlimit|flood]...}
shift 2
CASES=${*:-form join overlimit flood}
HERE=$(cd "$(dirname "$0")" && pwd)
CLIENT="$HERE/hostile_peer.py"
PROG=$COLL
# shellcheck source-path=SCRIPTDIR source=lib_procs.sh
. "$HERE/lib_procs.sh"
command -v python3 >/dev/null 2>&1 || { echo "run_hostile: no python3; skipped"; exit 77; }

# listen_addr LOG : the transport address a rank logged ("listening on ADDR").
listen_addr() {
    sed -n 's/.*listening on \([0-9.]*:[0-9]*\).*/\1/p' "$1" | head -n 1
}

case_form() {
    local port r pids=() ok=1 a host tport tried=0 n
    port=$(free_port)
    EXTRA_ENV=(GS_AUTH_TOKEN=hostile-test-token GS_DEBUG=INFO "GS_DEBUG_SUBSYS=NET,BOOT,INIT")
    for r in 0 1; do
        start_rank "$r" 3 "$port" 60000 "$TMP/form.$r.log" --colls allreduce,broadcast,allgather,alltoall \
            --dtypes f32,i64 --ops sum,max --counts 1,w+1,10007 --iters 2
        pids[r]=$LASTPID
    done
    for r in 0 1; do
        if ! wait_line "$TMP/form.$r.log" 'listening on' 20; then
            fail "form: rank $r never logged its listening address"
            dump_logs form
            return
        fi
    done
    : >"$TMP/form.client.log"
    python3 "$CLIENT" boot 127.0.0.1 "$port" >>"$TMP/form.client.log" 2>&1
    for r in 0 1; do
        a=$(listen_addr "$TMP/form.$r.log")
        host=${a%:*}
        tport=${a##*:}
        echo "  form: rank $r listens on $a; attacking it" >>"$TMP/form.client.log"
        python3 "$CLIENT" transport "$host" "$tport" --token hostile-test-token --rank 2 \
            >>"$TMP/form.client.log" 2>&1
        python3 "$CLIENT" flood "$host" "$tport" 300 2 >>"$TMP/form.client.log" 2>&1 &
        PIDS+=("$!")
    done
    python3 "$CLIENT" flood 127.0.0.1 "$port" 300 2 >>"$TMP/form.client.log" 2>&1
    wait "${PIDS[@]: -2}" 2>/dev/null
    start_rank 2 3 "$port" 60000 "$TMP/form.2.log" --colls allreduce,broadcast,allgather,alltoall \
        --dtypes f32,i64 --ops sum,max --counts 1,w+1,10007 --iters 2
    pids[2]=$LASTPID
    EXTRA_ENV=()
    for r in 0 1 2; do
        wait_rank "${pids[r]}" 120
        [ "$RC" -eq 0 ] || { ok=0; echo "  form: rank $r exit status $RC"; }
        grep -q -e 'FATAL' -e 'Segmentation' -e 'AddressSanitizer' "$TMP/form.$r.log" && ok=0
    done
    tried=$(grep -c '^TRIED' "$TMP/form.client.log")
    grep -E '^(TRIED|  )' "$TMP/form.client.log" | sed 's/^/  client: /'
    for r in 0 1 2; do
        n=$(grep -c -i -e 'rejected' -e 'dropp' -e 'refus' "$TMP/form.$r.log")
        echo "  form: rank $r logged $n rejections; $(grep -m1 -E 'passed, [0-9]+ failed' \
            "$TMP/form.$r.log" || echo 'no result line')"
    done
    grep -q ' 0 failed' "$TMP/form.0.log" || ok=0
    for r in 0 1; do
        [ "$(grep -c -i -e 'rejected' -e 'dropp' "$TMP/form.$r.log")" -gt 0 ] || {
            ok=0
            echo "  form: rank $r logged no rejection"
        }
    done
    if [ "$ok" -eq 1 ]; then
        pass "form: $tried hostile attempts (+ 3 floods of 300 idle connections); the job's results are right"
    else
        fail "form: the job did not survive the hostile client"
        dump_logs form
    fi
}

# join: the client joins the rendezvous as rank 2 of 3 with the token, so ranks 0 and 1
# enter connection setup and answer handshakes; it then sends each of them the transport
# attacks, the authenticated ones included, and never connects for real. Pass: every
# attempt that reached a rank is rejected with a WARN, nothing crashes, and both ranks
# fail init at their deadline naming rank 2 (GS_ERR_TIMEOUT).
case_join() {
    local port r pids=() ok=1 st err n tried
    port=$(free_port)
    EXTRA_ENV=(GS_AUTH_TOKEN=hostile-test-token GS_JOB_ID=hostile-job GS_DEBUG=INFO
        "GS_DEBUG_SUBSYS=NET,BOOT")
    PROG=$TRIAL
    for r in 0 1; do
        start_rank "$r" 3 "$port" 6000 "$TMP/join.$r.log" loop --coll allreduce --count 10
        pids[r]=$LASTPID
    done
    PROG=$COLL
    EXTRA_ENV=()
    wait_line "$TMP/join.0.log" 'listening on' 20
    sleep 0.3
    # Held past the ranks' 6 s deadline: its port takes their connections and never answers.
    python3 "$CLIENT" join 127.0.0.1 "$port" 2 3 --token hostile-test-token \
        --job-id hostile-job --hold 7 >"$TMP/join.client.log" 2>&1
    for r in 0 1; do
        wait_rank "${pids[r]}" 30
        st=$(field "$TMP/join.$r.log" INIT status)
        err=$(sed -n 's/^INIT .* err=//p' "$TMP/join.$r.log" | head -n 1)
        n=$(grep -c 'rejected a connection\|dropp\|refus' "$TMP/join.$r.log")
        echo "  join: rank $r: ${st:-no INIT line} (exit $RC), $n rejections logged: $err"
        grep -h 'rejected a connection' "$TMP/join.$r.log" | sed 's/.*rejected a connection from [^:]*:[0-9]*: /      /' | sort | uniq -c | sed 's/^/   /'
        [ "$RC" -gt 128 ] && ok=0
        [ "$st" = GS_ERR_TIMEOUT ] || ok=0
        printf '%s' "$err" | grep -qiE '(ranks?|peer) 2' || ok=0
        [ "$n" -ge 8 ] || ok=0
    done
    tried=$(grep -c '^TRIED' "$TMP/join.client.log")
    grep -E '^(TRIED|  )' "$TMP/join.client.log" | sed 's/^/  client: /'
    if [ "$ok" -eq 1 ]; then
        pass "join: $tried hostile handshakes from a joined stranger rejected and logged; both ranks failed cleanly naming rank 2"
    else
        fail "join: expected every hostile handshake rejected with a WARN and GS_ERR_TIMEOUT naming rank 2"
        dump_logs join
    fi
}

# rank0_case NAME NEEDLE MAX_KB TIMEOUT_MS "CLIENT ARGS" [VAR=value...]: hostile_peer.py
# plays rank 0 (rank0 mode with CLIENT ARGS) against the real rank 1 (trial_check hwm, one
# all-reduce). Pass: rank 1 fails with GS_ERR_PROTOCOL (or GS_ERR_PEER_FAILED) naming peer
# 0, its error contains NEEDLE, its peak RSS grows by at most MAX_KB, and it exits 0.
rank0_case() {
    local name=$1 needle=$2 maxkb=$3 tmo=$4 args=$5 port cpid rpid st err before hwm ok=1
    shift 5
    port=$(free_port)
    # shellcheck disable=SC2086 # ARGS is a list of words
    python3 "$CLIENT" rank0 "$port" $args >"$TMP/$name.client.log" 2>&1 &
    cpid=$!
    PIDS+=("$cpid")
    wait_line "$TMP/$name.client.log" '^READY' 10
    PROG=$TRIAL
    EXTRA_ENV=(GS_TUNE=off GS_SHM=0 "$@")
    start_rank 1 2 "$port" "$tmo" "$TMP/$name.1.log" hwm --count 1000
    rpid=$LASTPID
    EXTRA_ENV=()
    PROG=$COLL
    local idle=
    if [ -n "${IDLE_CPU_MAX_MS:-}" ]; then
        # CPU rank 1 burns from 1 s to 3 s after the fake rank 0 paused its flood: holding
        # what it sent, waiting, and probing it on every wake-up (diagnosis).
        local c1 c2
        wait_line "$TMP/$name.client.log" '^RANK0 paused' 30
        sleep 1
        c1=$(cpu_ms "$rpid")
        sleep 2
        c2=$(cpu_ms "$rpid")
        idle=$((c2 - c1))
    fi
    wait_rank "$rpid" 60
    local rc=$RC
    wait_rank "$cpid" 30
    st=$(field "$TMP/$name.1.log" RESULT status)
    before=$(field "$TMP/$name.1.log" RESULT hwm_before_kb)
    hwm=$(field "$TMP/$name.1.log" RESULT hwm_kb)
    err=$(sed -n 's/^RESULT .* err=//p' "$TMP/$name.1.log" | head -n 1)
    echo "  $name ($args${*:+; $*}): rank 1 got ${st:-nothing}," \
        "peak RSS ${before:-?} -> ${hwm:-?} kB, exit $rc: $err"
    grep -h '^RANK0' "$TMP/$name.client.log" | sed 's/^/    /'
    if [ -n "${IDLE_CPU_MAX_MS:-}" ]; then
        echo "    rank 1 used ${idle:-?} ms of CPU in 2 s of waiting (at most $IDLE_CPU_MAX_MS)"
        if [ -z "$idle" ] || [ "$idle" -gt "$IDLE_CPU_MAX_MS" ]; then ok=0; fi
    fi
    if [ "$st" != GS_ERR_PROTOCOL ] && [ "$st" != GS_ERR_PEER_FAILED ]; then ok=0; fi
    printf '%s' "$err" | grep -q -- "$needle" || ok=0
    printf '%s' "$err" | grep -qiE '(peer|rank) 0' || ok=0
    [ "$rc" -eq 0 ] || ok=0
    if [ -z "$hwm" ] || [ -z "$before" ] || [ $((hwm - before)) -gt "$maxkb" ]; then ok=0; fi
    if [ "$ok" -eq 1 ]; then
        pass "$name: refused with $st naming peer 0 and '$needle'; RSS +$((hwm - before)) kB"
    else
        fail "$name: expected GS_ERR_PROTOCOL naming peer 0 and '$needle', RSS growth <= $maxkb kB${IDLE_CPU_MAX_MS:+, <= $IDLE_CPU_MAX_MS ms of CPU while waiting}"
        dump_logs "$name"
    fi
}

case_overlimit() {
    rank0_case overlimit_1t GS_MAX_MESSAGE_BYTES 65536 10000 \
        "--total $((1 << 40)) --stream 65536 --hold 6"
    rank0_case overlimit_3g GS_MAX_MESSAGE_BYTES 65536 10000 \
        "--total $((3 << 30)) --stream $((256 << 20)) --hold 6" GS_MAX_MESSAGE_BYTES=1M
}

# cpu_ms PID : user + system CPU time of PID so far, in milliseconds.
cpu_ms() {
    local tck
    tck=$(getconf CLK_TCK)
    awk -v t="$tck" '{ sub(/^.*\) /, ""); print int(($12 + $13) * 1000 / t) }' "/proc/$1/stat" \
        2>/dev/null
}

# No heartbeat: the fake rank 0 sends none, and a silent moment must not decide the case.
# flood_zero pauses with 1,048,000 messages held: while it waits, rank 1 must use almost
# no CPU (every probe of its diagnosis walked all held messages before the match index:
# about 100% of a core here, for as long as the peer holds them).
case_flood() {
    IDLE_CPU_MAX_MS=400 rank0_case flood_zero 'the limit is 1048576 messages' \
        $(((512 + 32) << 10)) 60000 "--zero 1100000 --pause-at 1048000 --pause 4 --hold 30" \
        GS_HEARTBEAT_MS=0
    rank0_case flood_overlap 'its sender cuts it into' 65536 10000 "--overlap --hold 6" \
        GS_HEARTBEAT_MS=0
}

for c in $CASES; do
    case "$c" in
    form) case_form ;;
    join) case_join ;;
    overlimit) case_overlimit ;;
    flood) case_flood ;;
    *) fail "unknown case $c" ;;
    esac
done
echo "run_hostile: $PASS passed, $FAIL failed"
[ "$FAIL" -eq 0 ]
