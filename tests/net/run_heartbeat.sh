#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# run_heartbeat.sh: a host that goes silent without closing anything is found
# by the heartbeat (GS_HEARTBEAT_MS, docs/design.md "Heartbeats") in seconds,
# not at GS_TIMEOUT_MS. Four hosts of a fresh netlab, one rank each, run
# `fault_check loop` (f32 sum all-reduce, results verified) with
# GS_HEARTBEAT_MS=500 and GS_TIMEOUT_MS=60000. Once every rank has printed
# RUNNING, host V goes silent:
#   --case cut  (default): its bridge port goes down in the middle of the
#       loop (a cable pulled at the switch: no RST, the sockets stay open);
#   --case stop: its rank is SIGSTOPped (a frozen host), and killed once
#       the survivors have reported.
# Pass: every survivor ends with GS_ERR_PEER_FAILED naming rank V within
# 3 intervals + 2.5 s of the event (far below the 60 s timeout), and with
# --case cut the victim ends with an error within that bound too.
#
# usage: run_heartbeat.sh FAULT_CHECK [--case cut|stop] [--victim V]
# Exit status: 0 pass, 1 fail, 77 skip, 2 usage.
# shellcheck source-path=SCRIPTDIR disable=SC2034 # LAB_* settings are read by lib_lab.sh
set -u

usage() {
    echo "usage: run_heartbeat.sh FAULT_CHECK [--case cut|stop] [--victim V]" >&2
    exit 2
}
[ $# -ge 1 ] || usage
PROG=$1
shift
[ -x "$PROG" ] || { echo "run_heartbeat: $PROG is not executable" >&2; exit 2; }
CASE=cut
VICTIM=2
NH=4
HB_MS=500
TMO_MS=60000
while [ $# -gt 0 ]; do
    case "$1" in
    --case) CASE=$2; shift 2 ;;
    --victim) VICTIM=$2; shift 2 ;;
    *) usage ;;
    esac
done
case "$CASE" in cut|stop) ;; *) usage ;; esac
case "$VICTIM" in 1|2|3) ;; *) usage ;; esac # rank 0 hosts the rendezvous

# shellcheck source=lib_lab.sh
. "$(dirname "$0")/lib_lab.sh"
lab_up "$NH"

LAB_ENV=(GS_DEBUG=WARN "GS_TIMEOUT_MS=$TMO_MS" "GS_HEARTBEAT_MS=$HB_MS")
LAB_KILL_ON_FAIL=0
LAB_TIMEOUT=90
LIMIT_MS=$((3 * HB_MS + 2500))
echo "run_heartbeat: $NH hosts, 1 rank each; host $VICTIM goes silent ($CASE);" \
    "GS_HEARTBEAT_MS=$HB_MS GS_TIMEOUT_MS=$TMO_MS; limit $LIMIT_MS ms"
lab_start "$NH" 1 "$PROG" loop --count 100000 --max-seconds 80 --expect PEER_FAILED

lab_wait_running run_heartbeat
sleep 0.3 # well inside the loop
t_ev=$(lab_now_ms)
if [ "$CASE" = cut ]; then
    ip -n "${LAB_PREFIX}br" link set "port$VICTIM" down
else
    kill -STOP "${LAB_PID[VICTIM]}"
fi
echo "run_heartbeat: host $VICTIM silent at t=0"
if [ "$CASE" = stop ]; then
    # The stopped rank never ends on its own: kill it once the others reported.
    end=$(($(lab_now_ms) + 30000))
    for ((r = 0; r < NH; r++)); do
        [ "$r" -eq "$VICTIM" ] && continue
        until grep -q '^DESTROY' "$LAB_TMP/rank.$r.log" 2>/dev/null; do
            [ "$(lab_now_ms)" -ge "$end" ] && break
            sleep 0.05
        done
    done
    kill -KILL "${LAB_PID[VICTIM]}" 2>/dev/null
    kill -CONT "${LAB_PID[VICTIM]}" 2>/dev/null
fi
lab_wait

ok=1
for ((r = 0; r < NH; r++)); do
    log=$LAB_TMP/rank.$r.log
    st=$(field "$log" RESULT status)
    t=$(field "$log" RESULT t_ms)
    err=$(sed -n 's/^RESULT .* err=//p' "$log" | head -n 1)
    dt=$((${t:-0} - t_ev))
    if [ "$r" -eq "$VICTIM" ]; then
        echo "run_heartbeat: rank $r (victim) ${st:-no RESULT} $dt ms after, exit ${RCS[r]}"
        if [ "$CASE" = cut ] && { [ -z "$t" ] || [ "$dt" -gt "$LIMIT_MS" ] ||
            [ "${st:-GS_OK}" = GS_OK ]; }; then
            ok=0
        fi
        continue
    fi
    echo "run_heartbeat: rank $r ${st:-no RESULT} $dt ms after, exit ${RCS[r]}: $err"
    if [ -z "$t" ] || [ "$dt" -lt 0 ] || [ "$dt" -gt "$LIMIT_MS" ] ||
        [ "$st" != GS_ERR_PEER_FAILED ] || [ "${RCS[r]}" -ne 0 ]; then
        ok=0
    fi
    case "$err" in
    *"rank $VICTIM"* | *"peer $VICTIM"*) ;;
    *) echo "run_heartbeat: rank $r's error does not name rank $VICTIM"; ok=0 ;;
    esac
done
grep -h '^FAIL' "$LAB_TMP"/rank.*.log
if [ "$ok" -ne 1 ]; then
    lab_dump 20
    echo "run_heartbeat: FAIL (survivors must fail with GS_ERR_PEER_FAILED naming rank" \
        "$VICTIM within $LIMIT_MS ms)"
    exit 1
fi
echo "run_heartbeat: PASS (host $VICTIM's silence found within $LIMIT_MS ms)"
exit 0
