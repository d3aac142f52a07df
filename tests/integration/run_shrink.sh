#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# run_shrink.sh: gs_comm_shrink after a kill -9. Four ranks of shrink_check
# are started by hand (lib_procs.sh; gsrun would stop the survivors); the
# victim raises SIGKILL in the middle of an all-reduce, the survivors fail
# with GS_ERR_PEER_FAILED, shrink to 3 ranks (dense, in old-rank order), and
# run an all-reduce, a second shrink and a barrier on the new communicator.
# Cases: mid (victim 2) and coord (victim 0: the rendezvous host and the
# first coordinator of the agreement).
# usage: run_shrink.sh PATH/TO/shrink_check [mid|coord]...   (KEEP=1 keeps the logs)
set -u

PROG=${1:?usage: run_shrink.sh PATH/TO/shrink_check [mid|coord]...}
shift
CASES=${*:-mid coord}
# shellcheck source-path=SCRIPTDIR source=lib_procs.sh
. "$(dirname "$0")/lib_procs.sh"

shrink_case() {
    local name=$1 victim=$2 n=4 port r pids=() ok=1
    port=$(free_port)
    for ((r = 0; r < n; r++)); do
        start_rank "$r" "$n" "$port" 20000 "$TMP/$name.$r.log" --victim "$victim" --kill-at 3
        pids[r]=$LASTPID
    done
    for ((r = 0; r < n; r++)); do
        wait_rank "${pids[r]}" 90
        if [ "$r" -eq "$victim" ]; then
            [ "$RC" -eq 137 ] || { echo "  $name: victim exit status $RC, expected 137"; ok=0; }
            continue
        fi
        echo "  $name: rank $r exit status $RC: $(grep -m1 '^SHRINK' "$TMP/$name.$r.log")"
        [ "$RC" -eq 0 ] || ok=0
    done
    if [ "$ok" -eq 1 ]; then
        pass "$name: the survivors of rank $victim's kill shrank to 3 ranks and went on"
    else
        fail "$name: shrink after rank $victim's kill"
        dump_logs "$name"
    fi
}

for c in $CASES; do
    case "$c" in
    mid) shrink_case mid 2 ;;
    coord) shrink_case coord 0 ;;
    *) fail "unknown case $c" ;;
    esac
done
echo "run_shrink: $PASS passed, $FAIL failed"
[ "$FAIL" -eq 0 ]
