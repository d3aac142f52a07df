#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# run_cutlink.sh: a link is cut in the middle of an all-reduce loop. Four
# hosts of a fresh netlab, one rank each, run `fault_check loop` (f32 sum
# all-reduce of --count elements, results verified) with GS_TIMEOUT_MS=5000.
# Once every rank has printed RUNNING, the victim host's link is brought
# down:
#   --side bridge (default): the bridge port (port<V>) goes down, as when a
#       cable is pulled at the switch: the victim keeps its address and
#       route, and nobody gets an RST; packets just stop.
#   --side host: the victim's own interface (nl<V>) goes down, so its
#       address and route go away.
# Pass: every survivor reports GS_ERR_PEER_FAILED or GS_ERR_TIMEOUT within
# GS_TIMEOUT_MS + 4 s of the cut (fault_check also checks that the error
# names a rank and is sticky, and that destroy returns); the victim also
# ends with an error within that bound (any error status: it must not hang).
#
# usage: run_cutlink.sh FAULT_CHECK [--side bridge|host] [--victim V] [--rate R] [--count N]
# Exit status: 0 pass, 1 fail, 77 skip, 2 usage.
# shellcheck source-path=SCRIPTDIR disable=SC2034 # LAB_* settings are read by lib_lab.sh
set -u

usage() {
    echo "usage: run_cutlink.sh FAULT_CHECK [--side bridge|host] [--victim V] [--rate R]" \
        "[--count N]" >&2
    exit 2
}
[ $# -ge 1 ] || usage
PROG=$1
shift
[ -x "$PROG" ] || { echo "run_cutlink: $PROG is not executable" >&2; exit 2; }
SIDE=bridge
VICTIM=2
COUNT=1000000
RATE_OPTS=()
NH=4
TMO_MS=5000
while [ $# -gt 0 ]; do
    case "$1" in
    --side) SIDE=$2; shift 2 ;;
    --victim) VICTIM=$2; shift 2 ;;
    --rate) RATE_OPTS=(--rate "$2"); shift 2 ;;
    --count) COUNT=$2; shift 2 ;;
    *) usage ;;
    esac
done
case "$SIDE" in bridge|host) ;; *) usage ;; esac
case "$VICTIM" in 0|1|2|3) ;; *) usage ;; esac

# shellcheck source=lib_lab.sh
. "$(dirname "$0")/lib_lab.sh"
lab_up "$NH" ${RATE_OPTS[@]+"${RATE_OPTS[@]}"}

LAB_ENV=(GS_DEBUG=INFO GS_DEBUG_SUBSYS=NET "GS_TIMEOUT_MS=$TMO_MS")
LAB_KILL_ON_FAIL=0
LAB_TIMEOUT=90
LIMIT_MS=$((TMO_MS + 4000))
echo "run_cutlink: $NH hosts, 1 rank each, all-reduce loop of $COUNT f32;" \
    "host $VICTIM's link cut on the $SIDE side; GS_TIMEOUT_MS=$TMO_MS"
lab_start "$NH" 1 "$PROG" loop --count "$COUNT" --max-seconds 60 --expect PEER_FAILED,TIMEOUT

lab_wait_running run_cutlink # every rank is in the loop
sleep 0.3 # well inside the loop
t_cut=$(lab_now_ms)
if [ "$SIDE" = bridge ]; then
    ip -n "${LAB_PREFIX}br" link set "port$VICTIM" down
else
    ip -n "${LAB_PREFIX}h$VICTIM" link set "nl$VICTIM" down
fi
echo "run_cutlink: link of host $VICTIM down at t=0"
lab_wait

ok=1
for ((r = 0; r < NH; r++)); do
    log=$LAB_TMP/rank.$r.log
    st=$(field "$log" RESULT status)
    t=$(field "$log" RESULT t_ms)
    it=$(field "$log" RESULT iters)
    dst=$(field "$log" DESTROY status)
    dt=$((${t:-0} - t_cut))
    what="survivor"
    [ "$r" -eq "$VICTIM" ] && what="victim"
    echo "run_cutlink: rank $r ($what) ${st:-no RESULT} after $it iterations," \
        "$dt ms after the cut, exit ${RCS[r]}, destroy ${dst:-none}"
    if [ -z "$t" ] || [ "$dt" -lt 0 ] || [ "$dt" -gt "$LIMIT_MS" ] || [ "${st:-GS_OK}" = GS_OK ] || [ -z "$dst" ]; then
        ok=0
    fi
    # Survivors: fault_check accepted the status (PEER_FAILED or TIMEOUT), found a rank
    # named in gs_last_error(), and saw the error stay.
    if [ "$r" -ne "$VICTIM" ] && [ "${RCS[r]}" -ne 0 ]; then
        ok=0
    fi
done
grep -h '^FAIL' "$LAB_TMP"/rank.*.log
if [ "$ok" -ne 1 ]; then
    lab_dump 20
    echo "run_cutlink: FAIL (every rank must end with an error, survivors with" \
        "PEER_FAILED or TIMEOUT, within $LIMIT_MS ms of the cut)"
    exit 1
fi
echo "run_cutlink: PASS (all ranks failed cleanly within $LIMIT_MS ms of the cut)"
exit 0
