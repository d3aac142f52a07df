#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# run_gsrun_nodes.sh: gsrun across hosts, as torchrun is used. A lab of 2
# namespaced hosts; on each, one gsrun with --nnodes 2, its --node-rank and
# host 0's --master-addr/--master-port starts 2 ranks. Two cases:
#   ok    coll_check on the 4 ranks passes; the output carries the global
#         rank prefixes [0]..[3], each node's two.
#   fail  node 1's gsrun stops its ranks after 3 s (--timeout); node 0's
#         ranks then fail on the lost peers and its gsrun exits non-zero
#         within 10 s of that, without waiting for its own long timeout.
# usage: run_gsrun_nodes.sh GSRUN COLL_CHECK FAULT_CHECK
# Exit status: 0 pass, 1 fail, 77 skip (not root, no netns/bridge), 2 usage.
# shellcheck source-path=SCRIPTDIR disable=SC2034 # LAB_* settings are read by lib_lab.sh
set -u
[ $# -eq 3 ] || { echo "usage: run_gsrun_nodes.sh GSRUN COLL_CHECK FAULT_CHECK" >&2; exit 2; }
GSRUN=$1
COLL=$2
FAULT=$3
# shellcheck source=lib_lab.sh
. "$(dirname "$0")/lib_lab.sh"

lab_up 2
MASTER=$(lab_addr 0)
FAILED=0
fail() { echo "FAIL: $*"; FAILED=1; }

# node H PORT TIMEOUT LOG PROG ARGS...: node H's gsrun in host H's namespace, in the background.
NODE_PID=()
node() {
    local h=$1 port=$2 tmo=$3 log=$4
    shift 4
    ip netns exec "${LAB_PREFIX}h$h" env GS_SOCKET_IFNAME="nl$h" GS_TIMEOUT_MS=20000 \
        "$GSRUN" --nnodes 2 --node-rank "$h" --master-addr "$MASTER" --master-port "$port" \
        -n 2 --timeout "$tmo" -- "$@" >"$log" 2>&1 &
    NODE_PID[h]=$!
    LAB_PID+=("$!") # the EXIT trap kills what is left
}

# ok: a real job over both nodes.
# Each rank says what gsrun told it, then becomes coll_check.
SAY='echo "rank $RANK of $WORLD_SIZE local $LOCAL_RANK node $GROUP_RANK"; exec "$0" "$@"'
for h in 0 1; do
    node "$h" 29500 120 "$LAB_TMP/ok.$h.log" bash -c "$SAY" "$COLL" \
        --colls allreduce,broadcast,allgather --counts 1,1031
done
for h in 0 1; do
    wait "${NODE_PID[h]}"
    rc=$?
    [ "$rc" -eq 0 ] || fail "ok: node $h's gsrun exited $rc"
done
for h in 0 1; do
    for r in $((2 * h)) $((2 * h + 1)); do
        grep -q "^\[$r\] rank $r of 4 local $((r % 2)) node $h$" "$LAB_TMP/ok.$h.log" ||
            fail "ok: node $h's output lacks '[$r] rank $r of 4 local $((r % 2)) node $h'"
    done
done
grep -q "0 failed" "$LAB_TMP/ok.0.log" || fail "ok: rank 0 did not report '0 failed'"
[ "$FAILED" -eq 0 ] && echo "PASS ok: 2 nodes x 2 ranks, global ranks 0..3, coll_check passed"

# fail: node 1 goes away after 3 s; node 0 must notice, not wait out its 100 s.
node 0 29501 100 "$LAB_TMP/fail.0.log" "$FAULT" loop --count 1000 --max-seconds 60
t0=$(lab_now_ms)
node 1 29501 3 "$LAB_TMP/fail.1.log" "$FAULT" loop --count 1000 --max-seconds 60
wait "${NODE_PID[1]}"
rc1=$?
t1=$(lab_now_ms)
wait "${NODE_PID[0]}"
rc0=$?
t2=$(lab_now_ms)
[ "$rc1" -eq 124 ] || fail "fail: node 1's gsrun exited $rc1, expected 124 (its --timeout)"
[ "$rc0" -ne 0 ] || fail "fail: node 0's gsrun exited 0 after losing node 1"
grep -q "RESULT rank=[01] status=GS_ERR_PEER_FAILED" "$LAB_TMP/fail.0.log" ||
    fail "fail: node 0's ranks did not report GS_ERR_PEER_FAILED"
[ $((t2 - t1)) -le 10000 ] || fail "fail: node 0's gsrun took $((t2 - t1)) ms after node 1 stopped"
if [ "$FAILED" -eq 0 ]; then
    echo "PASS fail: node 1 stopped after $((t1 - t0)) ms; node 0's gsrun exited $rc0" \
        "$((t2 - t1)) ms later"
else
    for f in "$LAB_TMP"/*.log; do echo "---- $(basename "$f")"; tail -n 12 "$f"; done
fi
exit "$FAILED"
