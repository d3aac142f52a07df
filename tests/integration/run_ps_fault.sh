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
    local name=$1 victim=$2 servers=$3 n=4 port r pids=()
    port=$(free_port)
    for ((r = 0; r < n; r++)); do
        start_rank "$r" "$n" "$port" 20000 "$TMP/$name.$r.log" kill --victim "$victim" \
            --kill-after 3 --servers "$servers" --max-seconds 60
        pids[r]=$LASTPID
    done
    judge_kill "$name" "$victim" "${pids[@]}"
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
