#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# The bootstrap through a key-value store (GS_STORE, core/bootstrap_store.c), real processes
# on loopback. Usage: run_store.sh CASE GSRUN GS_STORE_PROG COLL_CHECK
#   gsrun  gsrun --store 0 hosts gradsync's store; 4 ranks bootstrap through it (their BOOT
#          log says so) and run a collective check.
#   stale  4 ranks of epoch 1 complete an init through a gs_store; then a rank of epoch 0 is
#          refused at once with GS_ERR_MISMATCH naming both epochs, and no key of the store
#          changed (its key count, the epoch, epoch 1's table).
#   torch  torch's own TCPStore (torch 2.x, the venv of scripts/install-deps.sh) as the store
#          of 4 ranks; and torch's client against gs_store (set, get, add, check, wait,
#          compare_set, delete_key, num_keys). Exit 77 without torch 2.x.
set -u
CASE=$1
GSRUN=$2
STORE_PROG=$3
PROG=$4
HERE=$(cd "$(dirname "$0")" && pwd)
# shellcheck source-path=SCRIPTDIR source=lib_procs.sh
. "$HERE/lib_procs.sh"
unset GS_STORE GS_STORE_EPOCH GS_DEBUG GS_DEBUG_SUBSYS TORCHELASTIC_USE_AGENT_STORE

COLL_ARGS=(--colls allreduce,broadcast,allgather --dtypes f32,i32 --ops sum,max
    --variants blk,nb --counts 1,w+1,1031 --iters 1)

# start_store : gs_store on a free loopback port; sets STORE_PORT and adds it to PIDS.
start_store() {
    "$STORE_PROG" 127.0.0.1:0 >"$TMP/store.out" 2>"$TMP/store.err" &
    PIDS+=("$!")
    if ! wait_line "$TMP/store.out" "listening on" 10; then
        fail "$CASE: gs_store did not listen"
        cat "$TMP/store.err"
        exit 1
    fi
    STORE_PORT=$(sed -n 's/.*listening on 127.0.0.1:\([0-9]*\).*/\1/p' "$TMP/store.out")
}

# store_snapshot PORT PREFIX : the store's key count, /PREFIX/epoch and a digest of
# /PREFIX/1/table, read with a raw client of torch's wire (no key is written).
store_snapshot() {
    python3 - "$1" "$2" <<'EOF'
import hashlib, socket, struct, sys
port, prefix = int(sys.argv[1]), sys.argv[2]
s = socket.create_connection(("127.0.0.1", port), timeout=10)
def send(b): s.sendall(b)
def recv(n):
    b = b""
    while len(b) < n:
        c = s.recv(n - len(b))
        if not c:
            raise SystemExit("store closed")
        b += c
    return b
def key(k): return struct.pack("=Q", len(k)) + k.encode()
send(struct.pack("=BI", 0, 0x3C85F7CE))            # VALIDATE
send(struct.pack("=B", 7))                         # GETNUMKEYS
n = struct.unpack("=q", recv(8))[0]
out = ["keys=%d" % n]
for k in ("/%s/epoch" % prefix, "/%s/1/table" % prefix):
    send(struct.pack("=BQ", 5, 1) + key(k))        # CHECK
    if recv(1) != b"\0":
        out.append("%s=absent" % k)
        continue
    send(struct.pack("=B", 3) + key(k))            # GET
    v = recv(struct.unpack("=Q", recv(8))[0])
    out.append("%s=%s" % (k, v.decode() if k.endswith("epoch") else hashlib.sha1(v).hexdigest()))
print(" ".join(out))
EOF
}

# store_set PORT KEY VALUE : SET with a raw client of torch's wire.
store_set() {
    python3 - "$@" <<'EOF'
import socket, struct, sys
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=10)
k, v = sys.argv[2].encode(), sys.argv[3].encode()
s.sendall(struct.pack("=BI", 0, 0x3C85F7CE) + struct.pack("=BQ", 1, len(k)) + k +
          struct.pack("=Q", len(v)) + v)
s.sendall(struct.pack("=BI", 13, 7))               # PING: the SET was served before the echo
assert s.recv(4) == struct.pack("=I", 7)
EOF
}

case_gsrun() {
    local log=$TMP/gsrun.log
    GS_DEBUG=INFO GS_DEBUG_SUBSYS=BOOT GS_TIMEOUT_MS=30000 \
        "$GSRUN" -n 4 --store 0 --timeout 120 "$PROG" "${COLL_ARGS[@]}" >"$log" 2>&1
    local rc=$?
    local n
    n=$(grep -c "bootstrapping through the store at 127.0.0.1:[0-9]* (keys /gsrun/0/)" "$log")
    if [ "$rc" -eq 0 ] && [ "$n" -eq 4 ]; then
        pass "gsrun --store: 4 ranks bootstrapped through gsrun's store and passed coll_check"
    else
        fail "gsrun --store: exit status $rc, $n of 4 ranks bootstrapped through the store"
        tail -n 30 "$log"
    fi
}

case_stale() {
    local r pids=() before after t0 t1 rc err
    start_store
    EXTRA_ENV=("GS_STORE=127.0.0.1:$STORE_PORT/job" GS_STORE_EPOCH=1)
    for r in 0 1 2 3; do
        # MASTER_PORT 1: nothing listens there; the store must be what they use.
        start_rank "$r" 4 1 30000 "$TMP/stale.$r.log" "${COLL_ARGS[@]}"
        pids+=("$LASTPID")
    done
    for r in 0 1 2 3; do
        wait_rank "${pids[r]}" 120
        if [ "$RC" -ne 0 ]; then
            fail "stale: rank $r of epoch 1 failed (exit status $RC)"
            dump_logs stale
            return
        fi
    done
    before=$(store_snapshot "$STORE_PORT" job)
    case "$before" in
    *"/job/epoch=1 "*) ;;
    *)
        fail "stale: after epoch 1's init the store holds: $before"
        return
        ;;
    esac
    EXTRA_ENV=("GS_STORE=127.0.0.1:$STORE_PORT/job" GS_STORE_EPOCH=0)
    t0=$(now_ms)
    start_rank 2 4 1 30000 "$TMP/stale.late.log" "${COLL_ARGS[@]}"
    wait_rank "$LASTPID" 60
    rc=$RC
    t1=$(now_ms)
    after=$(store_snapshot "$STORE_PORT" job)
    err=$(grep -m1 "gs_comm_init_env returned" "$TMP/stale.late.log")
    echo "  stale: epoch-0 rank: exit status $rc after $((t1 - t0)) ms: $err"
    echo "  stale: store before: $before"
    echo "  stale: store after:  $after"
    if [ "$rc" -ne 0 ] && [ $((t1 - t0)) -lt 10000 ] &&
        [[ "$err" == *"GS_ERR_MISMATCH"*"epoch 0 is stale"*"at epoch 1"*"GS_STORE_EPOCH=1 or later"* ]] &&
        [ "$before" = "$after" ]; then
        pass "stale: a rank of epoch 0 was refused at once with GS_ERR_MISMATCH, the store unchanged"
    else
        fail "stale: the epoch-0 rank was not refused at once, or the store changed"
        dump_logs stale
    fi
    # A rank that times out waiting for its epoch's table reads the epoch again: the job
    # moved to epoch 2 meanwhile (set by hand here), so its error says "stale".
    EXTRA_ENV=("GS_STORE=127.0.0.1:$STORE_PORT/job2" GS_STORE_EPOCH=1 GS_DEBUG=INFO
        GS_DEBUG_SUBSYS=BOOT)
    start_rank 1 2 1 3000 "$TMP/stale.moved.log" "${COLL_ARGS[@]}"
    local pid=$LASTPID
    if ! wait_line "$TMP/stale.moved.log" "bootstrapping through the store" 20; then
        fail "stale: the epoch-1 rank of job2 never reached the store"
        dump_logs stale
        return
    fi
    store_set "$STORE_PORT" /job2/epoch 2
    wait_rank "$pid" 60
    err=$(grep -m1 "gs_comm_init_env returned" "$TMP/stale.moved.log")
    echo "  stale: epoch-1 rank after the job moved on: exit status $RC: $err"
    if [ "$RC" -ne 0 ] && [[ "$err" == *"GS_ERR_MISMATCH"*"epoch 1 is stale"*"at epoch 2"* ]]; then
        pass "stale: a rank that timed out after the job moved on says its epoch is stale"
    else
        fail "stale: the timed-out rank did not report its stale epoch"
        dump_logs stale
    fi
}

case_torch() {
    local py pids=() r port
    py="$(bash "$HERE/../../scripts/install-deps.sh" --torch-venv-path 2>/dev/null)/bin/python"
    if ! [ -x "$py" ] || ! "$py" -c 'import sys, torch; sys.exit(int(torch.__version__.split(".")[0]) < 2)' 2>/dev/null; then
        echo "SKIP torch 2.x is not installed ($py)"
        exit 77
    fi
    # torch's client against gradsync's store.
    start_store
    if "$py" - "$STORE_PORT" <<'EOF' >"$TMP/torch_client.log" 2>&1; then
import datetime, sys
from torch.distributed import TCPStore
port = int(sys.argv[1])
s = TCPStore("127.0.0.1", port, is_master=False, timeout=datetime.timedelta(seconds=20))
s.set("k", "v")
assert s.get("k") == b"v", s.get("k")
assert s.add("n", 1) == 1 and s.add("n", 41) == 42
assert s.check(["k", "n"]) and not s.check(["missing"])
s.wait(["k"], datetime.timedelta(seconds=5))
try:
    s.wait(["never"], datetime.timedelta(milliseconds=200))
    raise SystemExit("wait for a missing key returned")
except Exception as e:  # torch raises on the timeout (after CANCEL_WAIT)
    if "never" in str(e) or "imeout" in str(e) or "imed out" in str(e):
        pass
    elif isinstance(e, SystemExit):
        raise
assert s.compare_set("c", "", "1") == b"1"
assert s.compare_set("c", "0", "2") == b"1"
assert s.compare_set("c", "1", "2") == b"2"
assert s.num_keys() >= 3, s.num_keys()
assert s.delete_key("k") and not s.check(["k"])
# The store keeps working for a second client (torch's master waits on none).
t = TCPStore("127.0.0.1", port, is_master=False, timeout=datetime.timedelta(seconds=20))
assert t.get("n") == b"42"
print("torch client OK")
EOF
        if grep -q "dropped client" "$TMP/store.err"; then
            fail "torch: gs_store dropped torch's client"
            cat "$TMP/store.err"
        else
            pass "torch: torch's TCPStore client works against gs_store"
        fi
    else
        fail "torch: torch's TCPStore client against gs_store"
        cat "$TMP/torch_client.log" "$TMP/store.err" | tail -n 30
    fi
    # torch's TCPStore as the store of 4 ranks.
    port=$(free_port)
    "$py" - "$port" >"$TMP/torch_store.log" 2>&1 <<'EOF' &
import datetime, sys, time
from torch.distributed import TCPStore
s = TCPStore("127.0.0.1", int(sys.argv[1]), is_master=True, wait_for_workers=False,
             timeout=datetime.timedelta(seconds=120))
print("torch store listening", flush=True)
# Serve until the test kills this process (bounded: at most 150 s).
end = time.time() + 150
while time.time() < end:
    time.sleep(0.2)
EOF
    PIDS+=("$!")
    if ! wait_line "$TMP/torch_store.log" "listening" 60; then
        fail "torch: torch's TCPStore did not start"
        cat "$TMP/torch_store.log"
        return
    fi
    EXTRA_ENV=("GS_STORE=127.0.0.1:$port/torchjob" GS_STORE_EPOCH=3 GS_DEBUG=INFO
        GS_DEBUG_SUBSYS=BOOT)
    for r in 0 1 2 3; do
        start_rank "$r" 4 1 30000 "$TMP/torchstore.$r.log" "${COLL_ARGS[@]}"
        pids+=("$LASTPID")
    done
    local ok=1
    for r in 0 1 2 3; do
        wait_rank "${pids[r]}" 120
        if [ "$RC" -ne 0 ] || ! grep -q "bootstrapping through the store at 127.0.0.1:$port (keys /torchjob/3/)" \
            "$TMP/torchstore.$r.log"; then
            echo "  torch: rank $r: exit status $RC"
            ok=0
        fi
    done
    if [ "$ok" -eq 1 ]; then
        pass "torch: 4 ranks bootstrapped through torch's TCPStore (GS_STORE) and passed coll_check"
    else
        fail "torch: 4 ranks through torch's TCPStore"
        dump_logs torchstore
    fi
}

case "$CASE" in
gsrun) case_gsrun ;;
stale) case_stale ;;
torch) case_torch ;;
*)
    echo "unknown case $CASE" >&2
    exit 2
    ;;
esac
echo "$PASS passed, $FAIL failed"
[ "$FAIL" -eq 0 ]
