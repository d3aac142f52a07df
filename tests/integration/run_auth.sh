#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# run_auth.sh GSRUN COLL_CHECK FAULT_CHECK: connection authentication with
# real processes (docs/security.md).
#   token      3 ranks with the same GS_AUTH_TOKEN run coll_check: pass
#   file       the same through GS_AUTH_TOKEN_FILE: pass
#   secret     at GS_DEBUG=INFO with every subsystem, the token never appears
#              in any output, and its length does
#   missing    rank 2 has no token: it fails with GS_ERR_AUTH within 3 s,
#              saying so; the others fail with a timeout or GS_ERR_AUTH
#   wrong      rank 1 has another token: GS_ERR_AUTH within 3 s
#   intruder   2 ranks with a token; before rank 1 starts, two strangers
#              connect to the rendezvous, one with a hello and no token,
#              one that fakes the flag and sends a garbage proof: both are
#              logged and dropped, and the job still forms
# Ranks are started by hand where they must differ (lib_procs.sh).
set -u
GSRUN=${1:?usage: run_auth.sh GSRUN COLL_CHECK FAULT_CHECK}
COLL=${2:?usage: run_auth.sh GSRUN COLL_CHECK FAULT_CHECK}
PROG=${3:?usage: run_auth.sh GSRUN COLL_CHECK FAULT_CHECK}
# shellcheck source-path=SCRIPTDIR source=lib_procs.sh
. "$(dirname "$0")/lib_procs.sh"
unset GS_AUTH_TOKEN GS_AUTH_TOKEN_FILE
TOKEN="s3cret-token-$$-$RANDOM"

# token and file: a whole job through gsrun.
if GS_AUTH_TOKEN="$TOKEN" GS_TIMEOUT_MS=20000 "$GSRUN" -n 3 --timeout 60 "$COLL" \
    --colls allreduce,broadcast,sendrecv --counts 1,1031 >"$TMP/token.log" 2>&1 &&
    grep -q " 0 failed" "$TMP/token.log"; then
    pass "token: 3 ranks with one GS_AUTH_TOKEN ran coll_check"
else
    fail "token: the job failed"; tail -n 15 "$TMP/token.log"
fi
printf '%s\n' "$TOKEN" >"$TMP/token.txt"
chmod 600 "$TMP/token.txt"
if GS_AUTH_TOKEN_FILE="$TMP/token.txt" GS_TIMEOUT_MS=20000 "$GSRUN" -n 3 --timeout 60 "$COLL" \
    --colls allreduce --counts 1,1031 >"$TMP/file.log" 2>&1 && grep -q " 0 failed" "$TMP/file.log"; then
    pass "file: GS_AUTH_TOKEN_FILE"
else
    fail "file: the job failed"; tail -n 15 "$TMP/file.log"
fi

# secret: never logged, even at INFO with every subsystem.
GS_AUTH_TOKEN="$TOKEN" GS_DEBUG=INFO GS_DEBUG_SUBSYS=ALL GS_TIMEOUT_MS=20000 "$GSRUN" -n 2 \
    --timeout 60 "$COLL" --colls allreduce --counts 1 >"$TMP/secret.log" 2>&1
if grep -q -- "$TOKEN" "$TMP/secret.log"; then
    fail "secret: the token appears in the output"
elif ! grep -q "GS_AUTH_TOKEN set to \"(set, ${#TOKEN} bytes, not shown)\"" "$TMP/secret.log"; then
    fail "secret: the INFO log does not say that a token is set"; grep -m3 AUTH "$TMP/secret.log"
else
    pass "secret: the token is not in the INFO log; its length is"
fi

# mixed_case NAME BADRANK ENV-OF-BADRANK: 3 ranks, BADRANK differs.
mixed_case() {
    local name=$1 bad=$2 port r t0 st ms pids=()
    shift 2
    port=$(free_port)
    t0=$(now_ms)
    for r in 0 1 2; do
        if [ "$r" = "$bad" ]; then
            EXTRA_ENV=("$@")
        else
            EXTRA_ENV=(GS_AUTH_TOKEN="$TOKEN")
        fi
        start_rank "$r" 3 "$port" 4000 "$TMP/$name.$r.log" init --expect AUTH,TIMEOUT
        pids[r]=$LASTPID
    done
    EXTRA_ENV=()
    wait_rank "${pids[bad]}" 20
    st=$(field "$TMP/$name.$bad.log" INIT status)
    ms=$(($(now_ms) - t0))
    if [ "$st" = GS_ERR_AUTH ] && [ "$ms" -le 3000 ] &&
        grep -q "GS_AUTH_TOKEN" "$TMP/$name.$bad.log"; then
        pass "$name: rank $bad failed with GS_ERR_AUTH after $ms ms, naming GS_AUTH_TOKEN"
    else
        fail "$name: rank $bad got ${st:-nothing} after $ms ms"; dump_logs "$name"
    fi
    for r in 0 1 2; do
        [ "$r" = "$bad" ] && continue
        wait_rank "${pids[r]}" 20
        if [ "$RC" -ne 0 ]; then
            fail "$name: rank $r: $(field "$TMP/$name.$r.log" INIT status)"; dump_logs "$name"
        fi
    done
}
mixed_case missing 2 GS_AUTH_TOKEN=
mixed_case wrong 1 GS_AUTH_TOKEN="${TOKEN}x"

# intruder: strangers at the rendezvous are dropped, the job forms.
port=$(free_port)
EXTRA_ENV=(GS_AUTH_TOKEN="$TOKEN")
start_rank 0 2 "$port" 20000 "$TMP/intruder.0.log" init
p0=$LASTPID
python3 - "$port" >"$TMP/intruder.py.log" 2>&1 <<'PY'
import socket, struct, sys, time
port = int(sys.argv[1])
def hello(flags):
    addr = b"127.0.0.1:1"
    h = struct.pack("<IIQIIQII16sI", 0x48425347, 4, 0, 1, 2, 0x1234, len(addr), flags,
                    b"\x01" * 16, 0)  # rendezvous version 4 (docs/wire.md), no ring port
    return h + addr
for attempt in range(200):
    try:
        a = socket.create_connection(("127.0.0.1", port), timeout=2)
        break
    except OSError:
        time.sleep(0.05)
a.sendall(hello(0))                     # no token
print("no-token stranger got", len(a.recv(4096)), "bytes")
b = socket.create_connection(("127.0.0.1", port), timeout=2)
b.sendall(hello(1))                     # claims a token
rec = b.recv(56)
print("flag stranger got", len(rec), "bytes of AUTH")
b.sendall(struct.pack("<II", 0x50425347, 0) + b"\x00" * 32)  # a garbage proof
print("garbage proof answered with", len(b.recv(4096)), "bytes")
PY
start_rank 1 2 "$port" 20000 "$TMP/intruder.1.log" init
p1=$LASTPID
EXTRA_ENV=()
wait_rank "$p0" 30
rc0=$RC
wait_rank "$p1" 30
if [ "$rc0" -eq 0 ] && [ "$RC" -eq 0 ] &&
    grep -q "requires a GS_AUTH_TOKEN and rank 1 has none" "$TMP/intruder.0.log" &&
    grep -q "failed authentication" "$TMP/intruder.0.log"; then
    pass "intruder: two strangers logged and dropped at the rendezvous; the job formed"
else
    fail "intruder: rank 0 exit $rc0, rank 1 exit $RC"; dump_logs intruder; cat "$TMP/intruder.py.log"
fi

echo "run_auth: $PASS passed, $FAIL failed"
[ "$FAIL" -eq 0 ]
