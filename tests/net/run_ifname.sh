#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# run_ifname.sh: GS_SOCKET_IFNAME names what happened. In a network namespace of its
# own (lo, and a veth pair gsd0-gsd1 inside it, gsd0 with 10.88.0.1/24; nothing outside
# it is touched, and it is deleted on exit), two ranks of trial_check:
#   other     rank 0 has GS_SOCKET_IFNAME=gsd0 but the master address is 127.0.0.1,
#             another address of its host: rank 0 fails at once (not at its deadline)
#             naming the interface, its address and the master address; rank 1, left
#             waiting, times out saying where rank 0 listens must match.
#   same      both with GS_SOCKET_IFNAME=gsd0 and the master address 10.88.0.1: the job
#             runs, and rank 0's log says it listens on 10.88.0.1 (GS_SOCKET_IFNAME=gsd0).
#   nccl      both with GS_SOCKET_IFNAME=^lo (NCCL's exclusion: every interface but
#             loopback, here gsd0 alone) and the master address 10.88.0.1: accepted, the
#             job runs, and rank 0's log says it listens on 10.88.0.1 (GS_SOCKET_IFNAME=^lo).
# usage: run_ifname.sh TRIAL_CHECK
# Exit status: 0 pass, 1 fail, 77 skip (not root, no netns or veth), 2 usage.
set -u
[ $# -eq 1 ] || { echo "usage: run_ifname.sh TRIAL_CHECK" >&2; exit 2; }
PROG=$1
NS="gsif$$"
if [ "$(id -u)" != 0 ] || ! command -v ip >/dev/null 2>&1; then
    echo "SKIPPED: needs root and iproute2 (a network namespace of its own)"
    exit 77
fi
TMP=$(mktemp -d "${TMPDIR:-/tmp}/gs_ifname.XXXXXX")
PIDS=()
cleanup() {
    local p
    for p in "${PIDS[@]}"; do kill -KILL "$p" 2>/dev/null; done
    wait 2>/dev/null
    ip netns del "$NS" 2>/dev/null
    rm -rf "$TMP"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
if ! ip netns add "$NS" 2>/dev/null || ! ip -n "$NS" link set lo up ||
    ! ip -n "$NS" link add gsd0 type veth peer name gsd1 2>/dev/null ||
    ! ip -n "$NS" addr add 10.88.0.1/24 dev gsd0 || ! ip -n "$NS" link set gsd1 up ||
    ! ip -n "$NS" link set gsd0 up; then
    echo "SKIPPED: cannot make a network namespace with a veth pair here"
    exit 77
fi
FAIL=0
pass() { echo "PASS $*"; }
fail() { echo "FAIL $*"; FAIL=1; }
now_ms() { date +%s%3N; }

# rank NAME R MASTER TIMEOUT_MS [VAR=value...]: one rank in the namespace, in the background.
rank() {
    local name=$1 r=$2 master=$3 tmo=$4
    shift 4
    ip netns exec "$NS" env -u GS_SOCKET_IFNAME "$@" RANK="$r" WORLD_SIZE=2 \
        MASTER_ADDR="$master" MASTER_PORT=29500 GS_TIMEOUT_MS="$tmo" GS_DEBUG=INFO \
        GS_DEBUG_SUBSYS=BOOT "$PROG" loop --coll allreduce --count 1000 --max-seconds 0.3 \
        >"$TMP/$name.$r.log" 2>&1 &
    PIDS+=("$!")
    LASTPID=$!
}
# waitfor PID SECONDS: wait, killing it after SECONDS.
waitfor() {
    timeout "$2" tail --pid="$1" -s 0.05 -f /dev/null >/dev/null 2>&1
    kill -KILL "$1" 2>/dev/null
    wait "$1" 2>/dev/null
}
show() { local f; for f in "$TMP/$1".*.log; do echo "---- $(basename "$f")"; tail -n 8 "$f"; done; }
init_line() { grep -m1 "^INIT " "$1" 2>/dev/null; }

# other
t0=$(now_ms)
rank other 0 127.0.0.1 60000 GS_SOCKET_IFNAME=gsd0
p0=$LASTPID
rank other 1 127.0.0.1 4000
p1=$LASTPID
waitfor "$p0" 30
t1=$(now_ms)
waitfor "$p1" 30
l0=$(init_line "$TMP/other.0.log")
l1=$(init_line "$TMP/other.1.log")
case "$l0" in
*GS_ERR_INVALID_ARG*"10.88.0.1"*"GS_SOCKET_IFNAME=gsd0"*"127.0.0.1"*)
    if [ $((t1 - t0)) -lt 10000 ]; then
        pass "other: rank 0 refused at once ($((t1 - t0)) ms): ${l0:0:200}"
    else
        fail "other: rank 0 took $((t1 - t0)) ms to refuse (its deadline is 60 s)"
    fi
    ;;
*) fail "other: rank 0 did not name the interface, its address and the master's"; show other ;;
esac
case "$l1" in
*GS_ERR_TIMEOUT*GS_SOCKET_IFNAME*) pass "other: rank 1's timeout says where rank 0 must listen" ;;
*) fail "other: rank 1's timeout does not mention GS_SOCKET_IFNAME"; show other ;;
esac

# same
rank same 0 10.88.0.1 30000 GS_SOCKET_IFNAME=gsd0
p0=$LASTPID
rank same 1 10.88.0.1 30000 GS_SOCKET_IFNAME=gsd0
p1=$LASTPID
waitfor "$p0" 60
waitfor "$p1" 60
# (trial_check's loop is timed on each rank, so the last iteration may see the other leave:
# the job ran when both were READY and went through iterations.)
if grep -q "^RESULT .* iters=[1-9]" "$TMP/same.0.log" &&
    grep -q "^RESULT .* iters=[1-9]" "$TMP/same.1.log" &&
    grep -q "waiting for 1 ranks on 10.88.0.1:29500 (GS_SOCKET_IFNAME=gsd0)" "$TMP/same.0.log"; then
    pass "same: the job ran; rank 0 said it listens on 10.88.0.1:29500 (GS_SOCKET_IFNAME=gsd0)"
else
    fail "same: the job did not run, or rank 0 did not say where it listens"
    show same
fi

# nccl
rank nccl 0 10.88.0.1 30000 GS_SOCKET_IFNAME=^lo
p0=$LASTPID
rank nccl 1 10.88.0.1 30000 GS_SOCKET_IFNAME=^lo
p1=$LASTPID
waitfor "$p0" 60
waitfor "$p1" 60
if grep -q "^RESULT .* iters=[1-9]" "$TMP/nccl.0.log" &&
    grep -q "^RESULT .* iters=[1-9]" "$TMP/nccl.1.log" &&
    grep -qF "waiting for 1 ranks on 10.88.0.1:29500 (GS_SOCKET_IFNAME=^lo)" "$TMP/nccl.0.log"; then
    pass "nccl: ^lo accepted; the job ran with rank 0 on 10.88.0.1:29500, gsd0's address"
else
    fail "nccl: GS_SOCKET_IFNAME=^lo was not accepted, or rank 0 did not listen on 10.88.0.1"
    show nccl
fi

[ "$FAIL" -eq 0 ] && echo "run_ifname: PASS"
exit "$FAIL"
