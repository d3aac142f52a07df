#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# run_ps_fault.sh: a parameter server rank killed with SIGKILL (kill -9 on
# itself, in the middle of its work) must give every other rank
# GS_ERR_PEER_FAILED naming it within 2 s, never a hang. The ranks are
# started by hand (gsrun would stop the survivors) with ps_check kill, as
# run_fault.sh does with fault_check. Cases, 4 ranks, BSP, a 4 MiB key split
# over every server and a small key, GS_TIMEOUT_MS=20000:
#   colo     colocated roles; rank 2 (worker and server) dies with pushes in flight
#   server   ranks 2 and 3 serve only; rank 3 dies while serving
#   worker   rank 3 serves only; rank 1 (a worker) dies with pushes in flight
# Each survivor prints RESULT with its status and the time; ps_check exits 1
# unless the error names the victim and is sticky.
# usage: run_ps_fault.sh PATH/TO/ps_check [CASE...]   (KEEP=1 keeps the logs)
set -u

PROG=${1:?usage: run_ps_fault.sh PATH/TO/ps_check [colo|server|worker]...}
shift
CASES=${*:-colo server worker}
# shellcheck source-path=SCRIPTDIR source=lib_procs.sh
. "$(dirname "$0")/lib_procs.sh"

# ps_case NAME VICTIM SERVERS : 4 ranks, the victim raises SIGKILL.
ps_case() {
    local name=$1 victim=$2 servers=$3 n=4 port r pids=() rcs=() ok=1 kill_t st t dt err
    port=$(free_port)
    for ((r = 0; r < n; r++)); do
        start_rank "$r" "$n" "$port" 20000 "$TMP/$name.$r.log" kill --victim "$victim" \
            --kill-after 3 --servers "$servers" --max-seconds 60
        pids[r]=$LASTPID
    done
    for ((r = 0; r < n; r++)); do
        wait_rank "${pids[r]}" 120
        rcs[r]=$RC
    done
    kill_t=$(field "$TMP/$name.$victim.log" KILL t_ms)
    if [ -z "$kill_t" ]; then
        fail "$name: victim rank $victim never reached the kill point"
        dump_logs "$name"
        return
    fi
    if [ "${rcs[victim]}" -ne 137 ]; then
        echo "  $name: victim exit status ${rcs[victim]}, expected 137 (SIGKILL)"
        ok=0
    fi
    for ((r = 0; r < n; r++)); do
        [ "$r" -eq "$victim" ] && continue
        st=$(field "$TMP/$name.$r.log" RESULT status)
        t=$(field "$TMP/$name.$r.log" RESULT t_ms)
        err=$(sed -n 's/^RESULT .* err=//p' "$TMP/$name.$r.log" | head -n 1)
        if [ -z "$t" ]; then
            echo "  $name: rank $r printed no RESULT (exit status ${rcs[r]})"
            ok=0
            continue
        fi
        dt=$((t - kill_t))
        echo "  $name: rank $r got $st $dt ms after the kill (exit status ${rcs[r]}): $err"
        if [ "$st" != GS_ERR_PEER_FAILED ] || [ "$dt" -gt 2000 ] || [ "${rcs[r]}" -ne 0 ]; then
            ok=0
        fi
    done
    if [ "$ok" -eq 1 ]; then
        pass "$name: every survivor failed with GS_ERR_PEER_FAILED naming rank $victim within 2 s"
    else
        fail "$name: survivors did not all fail promptly with GS_ERR_PEER_FAILED naming rank $victim"
        dump_logs "$name"
    fi
}

for c in $CASES; do
    case "$c" in
    colo) ps_case colo 2 0 ;;
    server) ps_case server 3 2 ;;
    worker) ps_case worker 1 1 ;;
    *) fail "unknown case $c" ;;
    esac
done
echo "run_ps_fault: $PASS passed, $FAIL failed"
[ "$FAIL" -eq 0 ]
