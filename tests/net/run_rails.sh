#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# run_rails.sh: multi-rail TCP in the lab (docs/design.md "Several rails per
# peer", issue 23), the short versions that `make test` runs. Four hosts of a
# fresh netlab with two rails each (netlab.sh up 4 --rails 2: nl<I> on
# 10.77.0.0/24 and nm<I> on 10.78.0.0/24, shaped with tbf to --rate0 and
# --rate1, default 80 and 20 Mbit/s, the issue's 800 and 200 scaled down),
# one rank per host, GS_SOCKET_IFNAME=nl<I>,nm<I>, ring all-reduce
# (GS_ALGO=allreduce:ring, so that the rails rank 0 reports are those its
# data crosses), driven by bench/net/rail_run (f32 sum, in place, every
# result checked). The single-stream rates come from tests/net/tcp_stream.py,
# one TCP stream at a time from host 0 to host 1 on each rail, in the same
# run. One case a run:
#   --case shares: streams on each rail (S0, S1), then 16 MiB all-reduces:
#       the median busbw (first iteration left out) must be >= 0.85 x
#       (S0 + S1), and the median share of rail 0 within 0.1 of S0/(S0+S1).
#       Then GS_TCP_RAIL_BALANCE=equal (8 MiB): its ratio to S0+S1 is printed
#       (about 0.40 expected) and must be below the rate-balanced one.
#   --case tcchange: 8 all-reduces of 8 MiB; after 3, rail 0 goes from
#       --rate0 to --new-rate0 (10 Mbit/s) on both ends of every host (tc
#       qdisc change, netlab.sh rail-rate); then the streams measure the new
#       S0' and S1. Counting the collectives that end after the change (the
#       one under way included), one of the first 5 must reach 0.80 x
#       (S0' + S1), and the median from that one on too.
#   --case raildown: 32 MiB all-reduces; in the middle of the second one,
#       host --victim's rail 1 goes down (ip link set nm<V> down): every
#       rank must finish with every result right, and some rank's log must
#       say that the rail failed (a WARN line with "rail" and "failed").
#   --case secure: GS_TLS=1 (a CA and a certificate made here with openssl)
#       and a GS_AUTH_TOKEN: 8 MiB all-reduces, every result checked, and both
#       rails to rank 0's peer carried at least 1 MB: every socket of every
#       rail went through the TLS handshake and the token's proof before its
#       first frame (tests/integration/run_tls.sh and run_auth.sh check the
#       refusals, which are the same code for every socket).
#   --case lastrail: 16 MiB all-reduces in a loop; host --victim's two
#       rails go down: every other rank must fail with GS_ERR_PEER_FAILED
#       naming rank V within 3 heartbeat intervals + 2.5 s (the heartbeat
#       bound of run_heartbeat.sh; rail detection is TCP_USER_TIMEOUT of 3
#       intervals), and the victim must end with an error.
# Deadlines (LAB_TIMEOUT) are 3x or more the quiet time of each job.
# LAB_IFNAME=0 in the environment runs a case on one rail (no GS_SOCKET_IFNAME:
# the route to MASTER_ADDR, nl<I>): a baseline, which fails the rail checks.
#
# usage: run_rails.sh RAIL_RUN --case shares|tcchange|raildown|secure|lastrail [--rate0 80mbit]
#                     [--rate1 20mbit] [--new-rate0 10mbit] [--bytes N] [--iters K]
#                     [--victim V] [--hb MS] [--stream-s S]
# Exit status: 0 pass, 1 fail, 77 skip (no root, netns, tbf or python3), 2 usage.
# shellcheck source-path=SCRIPTDIR disable=SC2034 # LAB_* settings are read by lib_lab.sh
set -u

HERE=$(cd "$(dirname "$0")" && pwd)
usage() {
    sed -n '/^# usage:/,/^# Exit/s/^#//p' "$0" | sed '$d' >&2
    exit 2
}
[ $# -ge 1 ] || usage
PROG=$1
shift
[ -x "$PROG" ] || { echo "run_rails: $PROG is not executable" >&2; exit 2; }
CASE=
RATE0=80mbit
RATE1=20mbit
NEW_RATE0=10mbit
BYTES=
ITERS=
VICTIM=2
HB_MS=
STREAM_S=2
NH=4
while [ $# -gt 0 ]; do
    case "$1" in
    --case) CASE=$2; shift 2 ;;
    --rate0) RATE0=$2; shift 2 ;;
    --rate1) RATE1=$2; shift 2 ;;
    --new-rate0) NEW_RATE0=$2; shift 2 ;;
    --bytes) BYTES=$2; shift 2 ;;
    --iters) ITERS=$2; shift 2 ;;
    --victim) VICTIM=$2; shift 2 ;;
    --hb) HB_MS=$2; shift 2 ;;
    --stream-s) STREAM_S=$2; shift 2 ;;
    *) usage ;;
    esac
done
case "$CASE" in
shares) : "${BYTES:=16M}" "${ITERS:=5}" ;;
tcchange) : "${BYTES:=8M}" "${ITERS:=8}" ;;
raildown) : "${BYTES:=32M}" "${ITERS:=3}" ;;
secure) : "${BYTES:=8M}" "${ITERS:=2}" ;;
lastrail) : "${BYTES:=16M}" "${ITERS:=0}" ;;
*) usage ;;
esac
case "$VICTIM" in 1|2|3) ;; *) usage ;; esac # rank 0 hosts the rendezvous
case "$ITERS$STREAM_S${HB_MS:-0}" in *[!0-9]*) usage ;; esac
if ! command -v python3 >/dev/null 2>&1; then
    echo "run_rails: SKIP: no python3 (tcp_stream.py measures the rails)" >&2
    exit 77
fi

# shellcheck source=lib_lab.sh
. "$HERE/lib_lab.sh"
lab_up "$NH" --rails 2 --rate "$RATE0" --rate2 "$RATE1"

LAB_ENV=(GS_DEBUG=WARN GS_ALGO=allreduce:ring GS_TUNE=off)
[ -n "$HB_MS" ] && LAB_ENV+=("GS_HEARTBEAT_MS=$HB_MS")
FAILED=0
fail() {
    echo "run_rails: FAIL: $*"
    FAILED=1
}
verdict() {
    if [ "$FAILED" -ne 0 ]; then
        lab_dump 25
        echo "run_rails: $CASE: FAIL"
        exit 1
    fi
    echo "run_rails: $CASE: PASS ($*)"
    exit 0
}
# fge A B: A >= B (decimals).
fge() { awk -v a="$1" -v b="$2" 'BEGIN { exit !(a + 0 >= b + 0) }'; }
calc() { awk "BEGIN { printf \"%.4f\", $1 }"; }
log0() { echo "$LAB_TMP/rank.0.log"; }
rlog() { python3 "$HERE/rail_log.py" "$@"; }
# sumval KEY WORD...: from rail_log.py summary output on stdin, the value after "median"
# on the line that starts with KEY WORD... (e.g. BUSBW, or SHARE rail 0).
sumval() { awk -v k="$*" 'index($0, k) == 1 { for (i = 1; i < NF; i++) if ($i == "median") { print $(i + 1); exit } }'; }

# stream RAIL: one TCP stream of STREAM_S seconds from host 0 to host 1 on RAIL; sets
# STREAM (MB/s) or fails the run.
stream() {
    local rail=$1 addr port out sp
    addr=$(lab_addr 1 "$rail")
    port=$((5201 + rail))
    ip netns exec "${LAB_PREFIX}h1" timeout $((STREAM_S + 30)) python3 "$HERE/tcp_stream.py" \
        server "$addr" "$port" --timeout 20 >"$LAB_TMP/stream.srv.$rail" 2>&1 &
    sp=$!
    out=$(ip netns exec "${LAB_PREFIX}h0" timeout $((STREAM_S + 30)) python3 \
        "$HERE/tcp_stream.py" client "$addr" "$port" --seconds "$STREAM_S" --timeout 20 2>&1)
    wait "$sp"
    STREAM=$(awk 'NR == 1 && $2 == "MB/s" { print $1 }' <<<"$out")
    if [ -z "$STREAM" ]; then
        echo "run_rails: the stream on rail $rail failed: $out $(cat "$LAB_TMP/stream.srv.$rail")"
        echo "run_rails: $CASE: FAIL"
        exit 1
    fi
    echo "run_rails: single TCP stream on rail $rail ($addr): $out"
}

# job_ok WHAT: every rank exited 0; otherwise says why (RESULT lines) and returns 1.
job_ok() {
    local r ok=0
    for ((r = 0; r < ${#LAB_PID[@]}; r++)); do
        if [ "${RCS[r]}" -eq 137 ]; then
            fail "$1: rank $r killed (the deadline, or another rank failed)"
            ok=1
        elif [ "${RCS[r]}" -ne 0 ]; then
            fail "$1: rank $r exited ${RCS[r]}:" \
                "$(grep -h '^RESULT' "$LAB_TMP/rank.$r.log" | head -n 1)"
            ok=1
        fi
    done
    return $ok
}

# two_rails WHAT: rank 0 reports two rails to a ring neighbour (multi-rail TCP is on).
two_rails() {
    if ! grep -q '^RAIL peer [0-9]* rail 1 ' "$(log0)"; then
        fail "$1: rank 0 reports fewer than 2 rails to its peers (GS_SOCKET_IFNAME=nl0,nm0;" \
            "$(grep -m1 '^RAIL' "$(log0)" || echo 'no RAIL line')): is multi-rail TCP built in?"
        return 1
    fi
}

# job_done WHAT: the job passed with two rails (job_ok, two_rails); otherwise the verdict.
job_done() {
    if ! job_ok "$1" || ! two_rails "$1"; then
        verdict ""
    fi
}

# wait_line FILE REGEX SECONDS: waits until FILE has a line matching REGEX; 1 on timeout.
wait_line() {
    local end=$(($(lab_now_ms) + $3 * 1000))
    until grep -qE "$2" "$1" 2>/dev/null; do
        [ "$(lab_now_ms)" -ge "$end" ] && return 1
        # Rank 0 already ended: it will not print it.
        kill -0 "${LAB_PID[0]}" 2>/dev/null || return 1
        sleep 0.05
    done
}

echo "run_rails: $NH hosts, 1 rank each, rails nl ($RATE0) and nm ($RATE1); case $CASE," \
    "$BYTES all-reduces"
case "$CASE" in
shares)
    stream 0
    S0=$STREAM
    stream 1
    S1=$STREAM
    SUM=$(calc "$S0 + $S1")
    WANT0=$(calc "$S0 / $SUM")
    LAB_TIMEOUT=60 # about 12 s quiet
    lab_launch "$NH" 1 "$PROG" --bytes "$BYTES" --iters "$ITERS" --check
    job_done "rate-balanced run"
    rlog iters "$(log0)"
    summ=$(rlog summary "$(log0)" --skip 1)
    echo "$summ"
    bw=$(sumval BUSBW <<<"$summ")
    sh0=$(sumval SHARE rail 0 <<<"$summ")
    ratio=$(calc "${bw:-0} / $SUM")
    echo "run_rails: rate-balanced: median busbw ${bw:-?} MB/s = $ratio x the streams' sum" \
        "$SUM MB/s ($S0 + $S1); rail 0 share ${sh0:-?}, expected $WANT0 +- 0.1"
    fge "$ratio" 0.85 || fail "median busbw $bw MB/s is $ratio x the sum of the single streams" \
        "($SUM MB/s), below 0.85"
    d=$(calc "${sh0:-9} - $WANT0")
    fge 0.1 "${d#-}" || fail "rail 0's median share ${sh0:-none} is not within 0.1 of" \
        "$WANT0 = S0/(S0+S1)"
    cp "$(log0)" "$LAB_TMP/rate.log"

    LAB_ENV+=(GS_TCP_RAIL_BALANCE=equal)
    lab_launch "$NH" 1 "$PROG" --bytes 8M --iters 3 --check
    job_done "equal striping run"
    rlog iters "$(log0)"
    summ=$(rlog summary "$(log0)" --skip 1)
    bw_eq=$(sumval BUSBW <<<"$summ")
    ratio_eq=$(calc "${bw_eq:-0} / $SUM")
    echo "run_rails: equal striping: median busbw ${bw_eq:-?} MB/s = $ratio_eq x the sum" \
        "(about 0.40 expected); rate-balanced $ratio"
    fge "$ratio_eq" "$ratio" && fail "equal striping ($ratio_eq x) is not below the" \
        "rate-balanced shares ($ratio x)"
    verdict "busbw $ratio x the sum of the single streams, rail 0 share $sh0 (want $WANT0)," \
        "equal striping $ratio_eq x"
    ;;
tcchange)
    PRE=3
    [ "$ITERS" -gt "$PRE" ] || { echo "run_rails: tcchange needs --iters above $PRE" >&2; exit 2; }
    LAB_TIMEOUT=100 # about 25 s quiet
    lab_start "$NH" 1 "$PROG" --bytes "$BYTES" --iters "$ITERS" --check
    if ! wait_line "$(log0)" "^ITER $((PRE - 1)) " 60; then
        lab_wait
        job_ok "before the change"
        fail "rank 0 never finished $PRE all-reduces"
        verdict ""
    fi
    t_chg=$(lab_now_ms)
    for ((h = 0; h < NH; h++)); do
        lab_rail_rate "$h" 0 "$NEW_RATE0" || fail "rail-rate $h 0 $NEW_RATE0"
    done
    echo "run_rails: rail 0 of every host changed from $RATE0 to $NEW_RATE0 in" \
        "$(($(lab_now_ms) - t_chg)) ms"
    lab_wait
    job_done "across the change"
    rlog iters "$(log0)" --t0 "$t_chg"
    stream 0
    S0=$STREAM
    stream 1
    S1=$STREAM
    SUM=$(calc "$S0 + $S1")
    WANT0=$(calc "$S0 / $SUM")
    NEED=$(calc "0.80 * $SUM")
    # The collectives that end after the change, in order (the one under way counts).
    mapfile -t post < <(rlog iters "$(log0)" --t0 "$t_chg" |
        awk '$6 > 0 { print $2, $10 }')
    k=0
    hit=
    for line in "${post[@]}"; do
        k=$((k + 1))
        read -r it bw <<<"$line"
        if fge "$bw" "$NEED"; then hit=$it; break; fi
        [ "$k" -ge 5 ] && break
    done
    echo "run_rails: after the change: sum of the single streams $SUM MB/s ($S0 + $S1)," \
        "0.80 x = $NEED MB/s; ${#post[@]} collectives ended after it"
    if [ -z "$hit" ]; then
        fail "none of the first 5 collectives after the change reached 0.80 x the new sum" \
            "($NEED MB/s)"
    else
        summ=$(rlog summary "$(log0)" --skip "$hit")
        echo "$summ"
        bw=$(sumval BUSBW <<<"$summ")
        sh0=$(sumval SHARE rail 0 <<<"$summ")
        ratio=$(calc "$bw / $SUM")
        echo "run_rails: collective $k after the change (iteration $hit) reached 0.80 x;" \
            "from there the median busbw is $bw MB/s = $ratio x; rail 0 share $sh0 (streams:" \
            "$WANT0)"
        fge "$ratio" 0.80 || fail "from iteration $hit on, the median busbw $bw MB/s is only" \
            "$ratio x the new sum"
    fi
    verdict "0.80 x the new sum reached ${hit:+at collective $k after the change}"
    ;;
raildown)
    LAB_TIMEOUT=90 # about 20 s quiet
    LAB_KILL_ON_FAIL=0
    lab_start "$NH" 1 "$PROG" --bytes "$BYTES" --iters "$ITERS" --check --report-all
    if ! wait_line "$(log0)" "^ITER 0 " 60; then
        lab_wait
        job_ok "before the rail went down"
        fail "rank 0 never finished its first all-reduce"
        verdict ""
    fi
    sleep 1 # well inside the second all-reduce
    t_down=$(lab_now_ms)
    lab_rail_link "$VICTIM" 1 down || fail "rail-link $VICTIM 1 down"
    echo "run_rails: host $VICTIM's rail 1 (nm$VICTIM) down at t=0"
    lab_wait
    job_ok "with a rail down"
    two_rails "with a rail down"
    grep -h '^RESULT' "$LAB_TMP"/rank.*.log
    rlog iters "$(log0)" --t0 "$t_down"
    last_end=$(rlog iters "$(log0)" --t0 "$t_down" | awk 'END { print $6 + 0 }')
    during=$(rlog iters "$(log0)" --t0 "$t_down" | awk '$4 <= 0 && $6 > 0 { print $2 }')
    if [ -n "$during" ]; then
        echo "run_rails: the rail went down during iteration $during"
    else
        echo "run_rails: the rail went down between two iterations"
    fi
    [ "${last_end:-0}" -gt 0 ] || fail "no collective ended after the rail went down"
    if grep -qh 'WRONG' "$LAB_TMP"/rank.*.log; then
        fail "wrong results: $(grep -h WRONG "$LAB_TMP"/rank.*.log | head -n 2)"
    fi
    failed_line=$(grep -ih 'rail' "$LAB_TMP"/rank.*.log | grep -i 'failed' | head -n 3)
    if [ -n "$failed_line" ]; then
        echo "run_rails: the log says: $failed_line"
    else
        fail "no log line says that the rail failed (WARN with 'rail' and 'failed')"
    fi
    for ((r = 0; r < NH; r++)); do
        echo "run_rails: rank $r, last stats:" \
            "$(rlog summary "$LAB_TMP/rank.$r.log" | grep '^RAILS' | tr '\n' ';')"
    done
    verdict "every all-reduce finished and checked after host $VICTIM's rail 1 went down"
    ;;
secure)
    if ! command -v openssl >/dev/null 2>&1; then
        echo "run_rails: SKIP: no openssl command (the secure case makes its certificates)"
        exit 77
    fi
    if ! openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 2 \
        -keyout "$LAB_TMP/ca.key" -out "$LAB_TMP/ca.pem" -subj "/CN=gradsync rails CA" \
        2>/dev/null ||
        ! openssl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes \
            -keyout "$LAB_TMP/rank.key" -out "$LAB_TMP/rank.csr" -subj "/CN=gradsync rank" \
            2>/dev/null ||
        ! openssl x509 -req -in "$LAB_TMP/rank.csr" -CA "$LAB_TMP/ca.pem" \
            -CAkey "$LAB_TMP/ca.key" -CAcreateserial -days 2 -out "$LAB_TMP/rank.pem" 2>/dev/null; then
        echo "run_rails: secure: FAIL (openssl could not make the test certificates)"
        exit 1
    fi
    LAB_ENV+=(GS_TLS=1 "GS_TLS_CERT=$LAB_TMP/rank.pem" "GS_TLS_KEY=$LAB_TMP/rank.key"
        "GS_TLS_CA=$LAB_TMP/ca.pem" GS_AUTH_TOKEN=rails-secret-1)
    LAB_TIMEOUT=60 # about 8 s quiet
    lab_launch "$NH" 1 "$PROG" --bytes "$BYTES" --iters "$ITERS" --check
    job_done "TLS and a token on both rails"
    rlog iters "$(log0)"
    # The last RAIL lines of the peer rank 0 sends to: bytes per rail.
    peer=$(awk '$1 == "RAIL" && $11 + 0 > 1000000 { p = $3 } END { print p }' "$(log0)")
    for k in 0 1; do
        b=$(awk -v p="${peer:--1}" -v k=$k '$1 == "RAIL" && $3 == p && $5 == k { b = $11 }
            END { print b + 0 }' "$(log0)")
        echo "run_rails: rail $k to rank ${peer:-?} carried $b bytes under TLS"
        [ "$b" -gt 1000000 ] || fail "rail $k to rank ${peer:-?} carried only $b bytes"
    done
    verdict "both rails carried the checked job under TLS and the token"
    ;;
lastrail)
    HB=${HB_MS:-1000}
    LIMIT_MS=$((3 * HB + 2500))
    LAB_ENV+=(GS_TIMEOUT_MS=60000)
    LAB_TIMEOUT=60 # about 5 s quiet
    LAB_KILL_ON_FAIL=0
    lab_start "$NH" 1 "$PROG" --bytes "$BYTES" --seconds 45 --check
    lab_wait_running run_rails
    sleep 0.3
    t_ev=$(lab_now_ms)
    lab_rail_link "$VICTIM" 0 down || fail "rail-link $VICTIM 0 down"
    lab_rail_link "$VICTIM" 1 down || fail "rail-link $VICTIM 1 down"
    echo "run_rails: both rails of host $VICTIM down at t=0 (heartbeat $HB ms, limit $LIMIT_MS ms)"
    lab_wait
    two_rails "before the rails went down"
    for ((r = 0; r < NH; r++)); do
        log=$LAB_TMP/rank.$r.log
        st=$(field "$log" RESULT status)
        t=$(field "$log" RESULT t_ms)
        err=$(sed -n 's/^RESULT .* err=//p' "$log" | head -n 1)
        dt=$((${t:-0} - t_ev))
        if [ "$r" -eq "$VICTIM" ]; then
            echo "run_rails: rank $r (victim) ${st:-no RESULT} $dt ms after, exit ${RCS[r]}: $err"
            if [ -z "$t" ] || [ "${st:-GS_OK}" = GS_OK ]; then
                fail "the victim (rank $r) did not end with an error"
            fi
            continue
        fi
        echo "run_rails: rank $r ${st:-no RESULT} $dt ms after, exit ${RCS[r]}: $err"
        if [ -z "$t" ] || [ "$dt" -lt 0 ] || [ "$dt" -gt "$LIMIT_MS" ] ||
            [ "$st" != GS_ERR_PEER_FAILED ]; then
            fail "rank $r: ${st:-no RESULT} after $dt ms; expected GS_ERR_PEER_FAILED within" \
                "$LIMIT_MS ms"
        fi
        case "$err" in
        *"rank $VICTIM"* | *"peer $VICTIM"*) ;;
        *) fail "rank $r's error does not name rank $VICTIM" ;;
        esac
    done
    verdict "every survivor named rank $VICTIM within $LIMIT_MS ms"
    ;;
esac
