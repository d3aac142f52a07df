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
# usage: run_hostile.sh COLL_CHECK TRIAL_CHECK [CASE...]   (KEEP=1 keeps the logs)
# Prints what was tried and what survived; exit status 1 when any case failed.
set -u

COLL=${1:?usage: run_hostile.sh COLL_CHECK TRIAL_CHECK [form|join|overlimit]...}
TRIAL=${2:?usage: run_hostile.sh COLL_CHECK TRIAL_CHECK [form|join|overlimit]...}
shift 2
CASES=${*:-form join overlimit}
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
    python3 "$CLIENT" join 127.0.0.1 "$port" 2 3 --token hostile-test-token \
        --job-id hostile-job --hold 0.5 >"$TMP/join.client.log" 2>&1
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

# overlimit_one NAME TOTAL STREAM [VAR=value]
overlimit_one() {
    local name=$1 total=$2 stream=$3 port cpid rpid st err before hwm ok=1
    shift 3
    port=$(free_port)
    python3 "$CLIENT" rank0 "$port" --total "$total" --stream "$stream" --hold 6 \
        >"$TMP/$name.client.log" 2>&1 &
    cpid=$!
    PIDS+=("$cpid")
    wait_line "$TMP/$name.client.log" '^READY' 10
    PROG=$TRIAL
    EXTRA_ENV=(GS_TUNE=off GS_SHM=0 "$@")
    start_rank 1 2 "$port" 10000 "$TMP/$name.1.log" hwm --count 1000
    rpid=$LASTPID
    EXTRA_ENV=()
    PROG=$COLL
    wait_rank "$rpid" 30
    local rc=$RC
    wait_rank "$cpid" 30
    st=$(field "$TMP/$name.1.log" RESULT status)
    before=$(field "$TMP/$name.1.log" RESULT hwm_before_kb)
    hwm=$(field "$TMP/$name.1.log" RESULT hwm_kb)
    err=$(sed -n 's/^RESULT .* err=//p' "$TMP/$name.1.log" | head -n 1)
    echo "  $name: announced $total bytes, streamed $stream ($*): rank 1 got ${st:-nothing}," \
        "peak RSS ${before:-?} -> ${hwm:-?} kB, exit $rc: $err"
    grep -h '^RANK0' "$TMP/$name.client.log" | sed 's/^/    /'
    if [ "$st" != GS_ERR_PROTOCOL ] && [ "$st" != GS_ERR_PEER_FAILED ]; then ok=0; fi
    printf '%s' "$err" | grep -q 'GS_MAX_MESSAGE_BYTES' || ok=0
    printf '%s' "$err" | grep -qiE '(peer|rank) 0' || ok=0
    [ "$rc" -eq 0 ] || ok=0
    if [ -z "$hwm" ] || [ -z "$before" ] || [ $((hwm - before)) -gt 65536 ]; then ok=0; fi
    if [ "$ok" -eq 1 ]; then
        pass "$name: over-limit message refused with $st naming peer 0 and GS_MAX_MESSAGE_BYTES; RSS +$((hwm - before)) kB"
    else
        fail "$name: expected GS_ERR_PROTOCOL naming peer 0 and GS_MAX_MESSAGE_BYTES, RSS growth < 64 MiB"
        dump_logs "$name"
    fi
}

case_overlimit() {
    overlimit_one overlimit_1t $((1 << 40)) 65536
    overlimit_one overlimit_3g $((3 << 30)) $((256 << 20)) GS_MAX_MESSAGE_BYTES=1M
}

for c in $CASES; do
    case "$c" in
    form) case_form ;;
    join) case_join ;;
    overlimit) case_overlimit ;;
    *) fail "unknown case $c" ;;
    esac
done
echo "run_hostile: $PASS passed, $FAIL failed"
[ "$FAIL" -eq 0 ]
