#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# run_tls.sh GSRUN COLL_CHECK FAULT_CHECK PYTHON LIBGRADSYNC|none [GS_BENCH]: TLS on the TCP
# transport with real processes (GS_TLS, docs/security.md). A CA, a second
# CA and certificates are made here with the openssl command.
#   job       4 ranks, 2 sockets per peer, GS_TLS=1: coll_check passes
#             (small, odd and striped multi-megabyte messages), every rank
#             says its sockets are TLS 1.3 and uses no shared memory
#   wire      2 ranks send a known text with the Python binding under strace:
#             the text is in the bytes written to the sockets without TLS,
#             and nowhere with it
#   config    GS_TLS=1 without a certificate, with a key that is not the
#             certificate's, or a CA file that does not exist: GS_ERR_INVALID_ARG
#             naming the setting, at once
#   wrong_ca  rank 2's certificate comes from another CA: it fails with
#             GS_ERR_AUTH within 3 s, and rank 0 logs why it dropped it
#   plain     rank 1 has no GS_TLS: it fails with GS_ERR_AUTH within 3 s
#             (rank 0 answers its plain HELLO with a TLS_REQUIRED verdict), not
#             at the deadline; a TLS rank that reaches it first fails the same way
#   bench     gs-bench allreduce --tls-compare (when GS_BENCH is given): both
#             links checked at every size, a tls/tcp ratio per size and overall
#   intruder  before rank 1 starts, strangers connect to rank 0's transport
#             port: a TLS client with a certificate from another CA, one
#             that sends garbage and one that sends a plain HELLO: each is
#             logged and dropped, and the job forms
# Exit status: 0 pass, 1 fail, 77 skip (no openssl command, or no TLS built in).
set -u
usage="usage: run_tls.sh GSRUN COLL_CHECK FAULT_CHECK PYTHON LIBGRADSYNC|none [GS_BENCH]"
GSRUN=${1:?$usage}
COLL=${2:?$usage}
PROG=${3:?$usage}
PY=${4:?$usage}
LIB=${5:?$usage}
BENCH=${6:-}
SRC=$(cd "$(dirname "$0")/../.." && pwd)
# shellcheck source-path=SCRIPTDIR source=lib_procs.sh
. "$(dirname "$0")/lib_procs.sh"
unset GS_TLS GS_TLS_CERT GS_TLS_KEY GS_TLS_CA GS_AUTH_TOKEN GS_AUTH_TOKEN_FILE GS_SHM

command -v openssl >/dev/null 2>&1 || { echo "run_tls: SKIP (no openssl command)"; exit 77; }

# --- certificates: CA A signs the job's certificate, CA B a stranger's.
mkca() { # NAME
    openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 2 \
        -keyout "$TMP/$1.key" -out "$TMP/$1.pem" -subj "/CN=gradsync test $1" 2>/dev/null
}
mkcert() { # NAME CA
    openssl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes \
        -keyout "$TMP/$1.key" -out "$TMP/$1.csr" -subj "/CN=gradsync $1" 2>/dev/null &&
        openssl x509 -req -in "$TMP/$1.csr" -CA "$TMP/$2.pem" -CAkey "$TMP/$2.key" \
            -CAcreateserial -days 2 -out "$TMP/$1.pem" 2>/dev/null
}
if ! { mkca caA && mkca caB && mkcert rank caA && mkcert stranger caB; }; then
    echo "run_tls: FAIL (could not make test certificates with openssl)"
    exit 1
fi
TLS_ENV=(GS_TLS=1 "GS_TLS_CERT=$TMP/rank.pem" "GS_TLS_KEY=$TMP/rank.key" "GS_TLS_CA=$TMP/caA.pem")
BAD_ENV=(GS_TLS=1 "GS_TLS_CERT=$TMP/stranger.pem" "GS_TLS_KEY=$TMP/stranger.key"
    "GS_TLS_CA=$TMP/caB.pem")

# Is TLS built in? A build without OpenSSL refuses GS_TLS=1 with GS_ERR_UNSUPPORTED.
port=$(free_port)
EXTRA_ENV=("${TLS_ENV[@]}")
start_rank 0 1 "$port" 5000 "$TMP/probe.0.log" init --expect ok,UNSUPPORTED
wait_rank "$LASTPID" 20
EXTRA_ENV=()
if [ "$(field "$TMP/probe.0.log" INIT status)" = GS_ERR_UNSUPPORTED ]; then
    echo "run_tls: SKIP (gradsync built without OpenSSL)"
    exit 77
fi

# job: a whole job through gsrun.
if env "${TLS_ENV[@]}" GS_TCP_NSOCKS=2 GS_DEBUG=INFO GS_DEBUG_SUBSYS=NET,ALGO GS_TIMEOUT_MS=30000 \
    "$GSRUN" -n 4 --timeout 120 "$COLL" --colls allreduce,broadcast,allgather,sendrecv \
    --counts 1,1031,600000 >"$TMP/job.log" 2>&1 && grep -q " 0 failed" "$TMP/job.log"; then
    n=$(grep -c "every socket TLS 1.3" "$TMP/job.log")
    if [ "$n" -ge 4 ] && ! grep -q "talks to rank [0-9]* through shared memory" "$TMP/job.log" &&
        ! grep -q "host segment:" "$TMP/job.log"; then
        pass "job: 4 ranks, 2 sockets per peer, every socket TLS 1.3, coll_check passed"
    else
        fail "job: $n of 4 ranks said 'every socket TLS 1.3' (or one used shared memory or a host segment)"
        grep "connected to" "$TMP/job.log"
    fi
else
    fail "job: the job failed"; tail -n 20 "$TMP/job.log"
fi

# wire: the payload is not in the bytes written to the sockets.
if [ "$LIB" = none ]; then
    echo "run_tls: wire case skipped: this build's library cannot load into Python (sanitizers)"
elif command -v strace >/dev/null 2>&1; then
    CANARY="gradsync-tls-canary-$$"
    cat >"$TMP/wire.py" <<'PY'
import os, sys
import gradsync
text = (sys.argv[1] * 4096).encode()[:65536]
with gradsync.Communicator() as c:
    if c.rank == 0:
        c.send(bytearray(text), 1)
    else:
        got = bytearray(len(text))
        c.recv(got, 0)
        assert bytes(got) == text, "payload changed"
        print("WIRE received", len(got), "bytes intact")
PY
    wire_case() { # NAME ENV...
        local name=$1
        shift
        env "$@" GS_SHM=0 GRADSYNC_LIBRARY="$LIB" PYTHONPATH="$SRC/python" GS_TIMEOUT_MS=20000 \
            strace -f -qq -e trace=write,sendmsg,sendto -e signal=none -s 65536 -xx \
            -o "$TMP/wire.$name.strace" "$GSRUN" -n 2 --timeout 60 "$PY" "$TMP/wire.py" \
            "$CANARY" >"$TMP/wire.$name.log" 2>&1
    }
    hex=$(printf '%s' "$CANARY" | od -An -tx1 | tr -d ' \n' | sed 's/../\\\\x&/g')
    wire_case plain
    wire_case tls "${TLS_ENV[@]}"
    if ! grep -q "WIRE received" "$TMP/wire.plain.log" ||
        ! grep -q "WIRE received" "$TMP/wire.tls.log"; then
        fail "wire: the transfer failed"; tail -n 5 "$TMP/wire.plain.log" "$TMP/wire.tls.log"
    elif ! grep -q -- "$hex" "$TMP/wire.plain.strace"; then
        fail "wire: the control run without TLS does not show the text (the check is blind)"
    elif grep -q -- "$hex" "$TMP/wire.tls.strace"; then
        fail "wire: the text went out in clear with GS_TLS=1"
    else
        pass "wire: the text is in the socket writes without TLS and in none with GS_TLS=1"
    fi
else
    echo "run_tls: wire case skipped: no strace (scripts/install-deps.sh test installs it)"
fi

# config_case NAME EXPECTED-TEXT ENV... : 2 ranks fail their init with GS_ERR_INVALID_ARG.
config_case() {
    local name=$1 want=$2 port r st t0 ms ok=1
    shift 2
    port=$(free_port)
    t0=$(now_ms)
    EXTRA_ENV=("$@")
    for r in 0 1; do
        start_rank "$r" 2 "$port" 10000 "$TMP/$name.$r.log" init --expect INVALID_ARG
        pids[r]=$LASTPID
    done
    EXTRA_ENV=()
    for r in 0 1; do
        wait_rank "${pids[r]}" 20
        st=$(field "$TMP/$name.$r.log" INIT status)
        if [ "$st" != GS_ERR_INVALID_ARG ] || ! grep -q -- "$want" "$TMP/$name.$r.log"; then
            ok=0
        fi
    done
    ms=$(($(now_ms) - t0))
    if [ "$ok" -eq 1 ] && [ "$ms" -le 5000 ]; then
        pass "$name: GS_ERR_INVALID_ARG naming '$want' after $ms ms"
    else
        fail "$name: expected GS_ERR_INVALID_ARG naming '$want' (after $ms ms)"
        dump_logs "$name"
    fi
}
config_case config_nocert "GS_TLS_CERT" GS_TLS=1 "GS_TLS_CA=$TMP/caA.pem"
config_case config_badkey "is not the key" GS_TLS=1 "GS_TLS_CERT=$TMP/rank.pem" \
    "GS_TLS_KEY=$TMP/stranger.key" "GS_TLS_CA=$TMP/caA.pem"
config_case config_noca "GS_TLS_CA $TMP/missing.pem" GS_TLS=1 "GS_TLS_CERT=$TMP/rank.pem" \
    "GS_TLS_KEY=$TMP/rank.key" "GS_TLS_CA=$TMP/missing.pem"

# mixed_case NAME WANT-RANKS TEXT BAD-RANK ENV... : 3 ranks, BAD-RANK gets ENV instead of
# TLS_ENV; each rank of WANT-RANKS fails with GS_ERR_AUTH within 3 s, its error holding TEXT
# (the others fail too: GS_ERR_AUTH, or GS_ERR_PEER_FAILED once the bad rank has gone).
mixed_case() {
    local name=$1 want=$2 text=$3 bad=$4 port r t0 st ms pids=()
    shift 4
    port=$(free_port)
    t0=$(now_ms)
    for r in 0 1 2; do
        if [ "$r" = "$bad" ]; then
            EXTRA_ENV=("$@")
        else
            EXTRA_ENV=("${TLS_ENV[@]}")
        fi
        start_rank "$r" 3 "$port" 6000 "$TMP/$name.$r.log" init --expect AUTH,TIMEOUT,PEER_FAILED
        pids[r]=$LASTPID
    done
    EXTRA_ENV=()
    for r in $want; do
        wait_rank "${pids[r]}" 20
        st=$(field "$TMP/$name.$r.log" INIT status)
        ms=$(($(now_ms) - t0))
        if [ "$st" = GS_ERR_AUTH ] && [ "$ms" -le 3000 ] && grep -q -- "$text" "$TMP/$name.$r.log"
        then
            pass "$name: rank $r failed with GS_ERR_AUTH after $ms ms: $(sed -n \
                's/^INIT .* err=//p' "$TMP/$name.$r.log" | cut -c1-110)..."
        else
            fail "$name: rank $r got ${st:-nothing} after $ms ms"; dump_logs "$name"
        fi
    done
    for r in 0 1 2; do
        wait_rank "${pids[r]}" 20
        if [ "$RC" -ne 0 ]; then
            fail "$name: rank $r: $(field "$TMP/$name.$r.log" INIT status)"; dump_logs "$name"
        fi
    done
}
mixed_case wrong_ca 2 "GS_TLS_CA" 2 "${BAD_ENV[@]}"
if grep -q "rejected a connection from .*TLS" "$TMP/wrong_ca.0.log" "$TMP/wrong_ca.1.log"; then
    pass "wrong_ca: the ranks it reached logged why they dropped it"
else
    fail "wrong_ca: no rank logged the dropped connection"; dump_logs wrong_ca
fi
mixed_case plain 1 "GS_TLS=1" 1 GS_DEBUG=WARN

# bench: gs-bench's TLS comparison runs, checks both links and reports the ratio.
if [ -n "$BENCH" ]; then
    if env "${TLS_ENV[@]}" GS_TIMEOUT_MS=30000 "$GSRUN" -n 2 --timeout 120 "$BENCH" allreduce \
        --tls-compare -b 8 -e 256K -f 32 -w 1 -n 3 >"$TMP/bench.log" 2>&1 &&
        [ "$(grep -c "tls / tcp time = " "$TMP/bench.log")" -eq 4 ] &&
        [ "$(grep -c "  tls$" "$TMP/bench.log")" -eq 4 ] &&
        grep -q "TLS / plain TCP time : median" "$TMP/bench.log" &&
        grep -q "Out of bounds values : 0 OK" "$TMP/bench.log"; then
        pass "bench: gs-bench --tls-compare: $(sed -n 's/.*TLS \/ plain TCP time : //p' \
            "$TMP/bench.log")"
    else
        fail "bench: gs-bench --tls-compare"; tail -n 15 "$TMP/bench.log"
    fi
fi

# intruder: strangers at rank 0's transport port are logged and dropped; the job forms.
port=$(free_port)
EXTRA_ENV=("${TLS_ENV[@]}" GS_DEBUG=INFO GS_DEBUG_SUBSYS=NET)
start_rank 0 2 "$port" 20000 "$TMP/intruder.0.log" init
p0=$LASTPID
EXTRA_ENV=()
if ! wait_line "$TMP/intruder.0.log" "listening on" 10; then
    fail "intruder: rank 0 never said where it listens"; dump_logs intruder
else
    tport=$(sed -n 's/.*listening on [^ ]*:\([0-9]*\),.*/\1/p' "$TMP/intruder.0.log" | head -n 1)
    "$PY" - "$tport" "$TMP/stranger.pem" "$TMP/stranger.key" >"$TMP/intruder.py.log" 2>&1 <<'PY' &
import socket, ssl, struct, sys, threading
port, cert, key = int(sys.argv[1]), sys.argv[2], sys.argv[3]
def tls_stranger():
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    ctx.load_cert_chain(cert, key)
    s = socket.create_connection(("127.0.0.1", port), timeout=15)
    print("tls stranger connected", flush=True)
    try:
        t = ctx.wrap_socket(s)
        t.sendall(b"\0" * 96)
        print("tls stranger read", len(t.recv(96)), "bytes", flush=True)
    except (OSError, ssl.SSLError) as e:
        print("tls stranger refused:", e, flush=True)
def garbage():
    s = socket.create_connection(("127.0.0.1", port), timeout=15)
    print("garbage stranger connected", flush=True)
    s.sendall(b"\x42" * 200)
    try:
        print("garbage stranger read", len(s.recv(96)), "bytes", flush=True)
    except OSError as e:
        print("garbage stranger refused:", e, flush=True)
def plain_hello():
    s = socket.create_connection(("127.0.0.1", port), timeout=15)
    print("plain stranger connected", flush=True)
    s.sendall(struct.pack("<I", 0x53485347) + b"\0" * 92)
    try:
        ack = s.recv(96)
        print("plain stranger read", len(ack), "bytes, verdict", ack[7] if len(ack) > 7 else None,
              flush=True)
    except OSError as e:
        print("plain stranger refused:", e, flush=True)
ts = [threading.Thread(target=f) for f in (tls_stranger, garbage, plain_hello)]
for t in ts:
    t.start()
for t in ts:
    t.join()
PY
    pypid=$!
    wait_line "$TMP/intruder.py.log" "plain stranger connected" 10
    wait_line "$TMP/intruder.py.log" "tls stranger connected" 10
    wait_line "$TMP/intruder.py.log" "garbage stranger connected" 10
    sleep 0.3 # their first bytes are in rank 0's socket buffers before rank 1 exists
    EXTRA_ENV=("${TLS_ENV[@]}")
    start_rank 1 2 "$port" 20000 "$TMP/intruder.1.log" init
    p1=$LASTPID
    EXTRA_ENV=()
    wait_rank "$p0" 30
    rc0=$RC
    wait_rank "$p1" 30
    rc1=$RC
    wait_rank "$pypid" 30
    nrej=$(grep -c "rejected a connection" "$TMP/intruder.0.log")
    # Rank 0 handles the strangers while rank 1 connects; one still mid-handshake when
    # rank 1 completes the mesh is closed unlogged with the listening socket: ask for two.
    if [ "$rc0" -eq 0 ] && [ "$rc1" -eq 0 ] && [ "$nrej" -ge 2 ] &&
        grep -q "plain gradsync HELLO where TLS was required" "$TMP/intruder.0.log" &&
        grep -q "plain stranger read 96 bytes, verdict 7" "$TMP/intruder.py.log"; then
        pass "intruder: 3 strangers dropped ($nrej logged), the job formed"
    else
        fail "intruder: rank 0 exit $rc0, rank 1 exit $rc1, $nrej rejections logged"
        grep "rejected" "$TMP/intruder.0.log"; cat "$TMP/intruder.py.log"; dump_logs intruder
    fi
fi

echo "run_tls: $PASS passed, $FAIL failed"
[ "$FAIL" -eq 0 ]
