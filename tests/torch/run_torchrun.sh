#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# run_torchrun.sh: gradsync programs under torchrun (torch 2.x from PyPI, the virtual
# environment scripts/install-deps.sh makes), where MASTER_ADDR:MASTER_PORT is the
# TCPStore of torchrun's agent and gs_comm_init_env bootstraps through it
# (core/bootstrap_store.c). Cases:
#   c          torchrun --standalone --nproc-per-node 4 of a C program (coll_check):
#              every result right, and rank 0's log says it used torchrun's store.
#   python     the same with docs/python.md's demo (gradsync.Communicator).
#   own_port   GS_MASTER_PORT under torchrun: gradsync's own rendezvous on that port.
#   missing    ranks started by hand against a TCPStore (torch's, from Python), one of
#              4 never started: every started rank fails with GS_ERR_TIMEOUT naming
#              rank 3, soon after its GS_TIMEOUT_MS.
#   twice      two processes claim rank 1: one fails at once saying rank 1 joined twice,
#              the other pair completes.
#   world      rank 1 says WORLD_SIZE=3, rank 0 says 2: both fail with GS_ERR_MISMATCH
#              naming the disagreement.
#   not_store  MASTER_PORT is a server that is not a TCPStore (it closes every
#              connection): the rank fails well before its deadline, naming the store.
# usage: run_torchrun.sh PYTHON COLL_CHECK TRIAL_CHECK
#   PYTHON: the interpreter of the torch 2.x virtual environment (torchrun beside it), or
#   "venv": the one scripts/install-deps.sh makes (--torch-venv-path says where).
# Exit status: 0 pass, 1 fail, 77 skip (no torch 2.x there), 2 usage.
# shellcheck source-path=SCRIPTDIR
set -u
[ $# -eq 3 ] || { echo "usage: run_torchrun.sh PYTHON COLL_CHECK TRIAL_CHECK" >&2; exit 2; }
PY=$1
COLL=$2
PROG=$3
HERE=$(cd "$(dirname "$0")" && pwd)
[ "$PY" = venv ] && PY="$(bash "$HERE/../../scripts/install-deps.sh" --torch-venv-path)/bin/python"
if ! "$PY" -c 'import sys, torch; sys.exit(int(torch.__version__.split(".")[0]) < 2)' \
    2>/dev/null; then
    echo "SKIPPED: no torch 2.x at $PY (scripts/install-deps.sh test installs it into" \
        "GRADSYNC_TORCH_VENV, default /var/cache/gradsync/torch-venv)"
    exit 77
fi
TORCHRUN=$(dirname "$PY")/torchrun
# shellcheck source=../integration/lib_procs.sh
. "$HERE/../integration/lib_procs.sh"
unset TORCHELASTIC_RUN_ID TORCHELASTIC_USE_AGENT_STORE TORCHELASTIC_RESTART_COUNT
export OMP_NUM_THREADS=1

# trun NAME ARGS...: torchrun --standalone with ARGS, logging to $TMP/NAME.log; sets RC.
trun() {
    local name=$1
    shift
    timeout 120 env GS_TIMEOUT_MS=30000 GS_DEBUG=INFO GS_DEBUG_SUBSYS=BOOT \
        "$TORCHRUN" --standalone "$@" >"$TMP/$name.log" 2>&1 </dev/null
    RC=$?
}
show() { echo "---- $1.log"; tail -n 20 "$TMP/$1.log"; }

# c
trun c --nproc-per-node 4 --no-python "$COLL" --colls allreduce,broadcast,allgather \
    --counts 1,1031
if [ "$RC" -eq 0 ] && grep -q "0 failed" "$TMP/c.log" &&
    grep -q "\[0\] GS INFO BOOT bootstrapping through torchrun's store" "$TMP/c.log"; then
    pass "c: torchrun --standalone, 4 ranks of coll_check, through torchrun's store"
else
    fail "c: torchrun exited $RC"
    show c
fi

# python
trun python --nproc-per-node 4 "$HERE/torchrun_demo.py"
n=$(grep -c "DEMO [0-3] 4 1.5 \[0, 1, 2, 3\]" "$TMP/python.log")
if [ "$RC" -eq 0 ] && [ "$n" -eq 4 ]; then
    pass "python: torchrun --standalone, 4 ranks of the Communicator demo"
else
    fail "python: torchrun exited $RC, $n of 4 ranks printed the right result"
    show python
fi

# own_port
GS_MASTER_PORT=$(free_port) trun own_port --nproc-per-node 2 --no-python "$COLL" \
    --colls allreduce --counts 1031
if [ "$RC" -eq 0 ] && grep -q "0 failed" "$TMP/own_port.log" &&
    ! grep -q "through torchrun's store" "$TMP/own_port.log"; then
    pass "own_port: GS_MASTER_PORT under torchrun uses gradsync's rendezvous on that port"
else
    fail "own_port: torchrun exited $RC (or it used the store)"
    show own_port
fi

# The hand-started cases: torch's TCPStore, as torchrun's agent hosts it.
"$PY" - >"$TMP/store.out" 2>&1 <<'EOF' &
import sys, time
from torch.distributed import TCPStore
s = TCPStore("127.0.0.1", 0, is_master=True, wait_for_workers=False)
print("PORT", s.port, flush=True)
time.sleep(600)
EOF
PIDS+=("$!")
wait_line "$TMP/store.out" "^PORT " 60 || { fail "no TCPStore started"; cat "$TMP/store.out"; exit 1; }
SPORT=$(sed -n 's/^PORT //p' "$TMP/store.out")

# hand NAME RANK WORLD TIMEOUT_MS [PORT]: one rank of trial_check under torchrun's variables.
hand() {
    EXTRA_ENV=(TORCHELASTIC_USE_AGENT_STORE=True "TORCHELASTIC_RUN_ID=$1" GS_DEBUG=WARN)
    start_rank "$2" "$3" "${5:-$SPORT}" "$4" "$TMP/$1.$2.${#PIDS[@]}.log" loop \
        --coll allreduce --count 1000 --max-seconds 0.5
}
# init_err LOG: the INIT line's status and error of one rank's log.
init_line() { grep -m1 "^INIT " "$1" 2>/dev/null; }

# missing: ranks 0..2 of 4.
t0=$(now_ms)
pids=()
for r in 0 1 2; do hand missing "$r" 4 3000; pids+=("$LASTPID"); done
ok=1
for p in "${pids[@]}"; do wait_rank "$p" 60; done
dt=$(($(now_ms) - t0))
for f in "$TMP"/missing.*.log; do
    l=$(init_line "$f")
    case "$l" in
    *status=GS_ERR_TIMEOUT*"rank 3 of 4"*) ;;
    *) ok=0 ;;
    esac
done
if [ "$ok" -eq 1 ] && [ "$dt" -lt 30000 ]; then
    pass "missing: ranks 0-2 failed with GS_ERR_TIMEOUT naming rank 3, after ${dt} ms"
else
    fail "missing: every rank must fail with GS_ERR_TIMEOUT naming rank 3 (${dt} ms)"
    dump_logs missing
fi

# twice: rank 1 twice in a world of 2.
pids=()
hand twice 0 2 20000; pids+=("$LASTPID")
hand twice 1 2 20000; pids+=("$LASTPID")
hand twice 1 2 20000; pids+=("$LASTPID")
for p in "${pids[@]}"; do wait_rank "$p" 60; done
nt=$(cat "$TMP"/twice.*.log | grep -c "^INIT status=GS_ERR_MISMATCH.*rank 1 joined twice")
nok=$(cat "$TMP"/twice.*.log | grep -c "^READY ")
if [ "$nt" -eq 1 ] && [ "$nok" -eq 2 ]; then
    pass "twice: the second rank 1 was refused (joined twice), the first pair ran"
else
    fail "twice: $nt refusals (want 1), $nok ranks ran (want 2)"
    dump_logs twice
fi

# world: rank 0 says 2, rank 1 says 3.
pids=()
hand world 0 2 10000; pids+=("$LASTPID")
hand world 1 3 10000; pids+=("$LASTPID")
for p in "${pids[@]}"; do wait_rank "$p" 60; done
nw=$(cat "$TMP"/world.*.log | grep -c "^INIT status=GS_ERR_MISMATCH.*disagree on the world size")
if [ "$nw" -eq 2 ]; then
    pass "world: both ranks failed with GS_ERR_MISMATCH naming the world sizes"
else
    fail "world: $nw of 2 ranks reported the disagreement"
    dump_logs world
fi

# not_store: a server that closes every connection at once.
"$PY" - >"$TMP/closer.out" 2>&1 <<'EOF' &
import socket, time
s = socket.socket()
s.bind(("127.0.0.1", 0))
s.listen(16)
print("PORT", s.getsockname()[1], flush=True)
end = time.time() + 600
while time.time() < end:
    c, _ = s.accept()
    c.close()
EOF
PIDS+=("$!")
wait_line "$TMP/closer.out" "^PORT " 30 || { fail "no closing server started"; exit 1; }
CPORT=$(sed -n 's/^PORT //p' "$TMP/closer.out")
t0=$(now_ms)
hand not_store 1 2 60000 "$CPORT"
wait_rank "$LASTPID" 90
dt=$(($(now_ms) - t0))
l=$(init_line "$TMP"/not_store.1.*.log)
case "$l" in
*"store at 127.0.0.1:$CPORT"*)
    if [ "$dt" -lt 20000 ]; then
        pass "not_store: failed after ${dt} ms naming the store: ${l:0:160}"
    else
        fail "not_store: took ${dt} ms of its 60000 ms deadline"
    fi
    ;;
*)
    fail "not_store: the error does not name the store at 127.0.0.1:$CPORT"
    dump_logs not_store
    ;;
esac

echo "run_torchrun: $PASS passed, $FAIL failed"
[ "$FAIL" -eq 0 ]
