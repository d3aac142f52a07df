#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# run_bucket.sh: the straggler case of bucket_check. In step 2 the last rank
# never marks tensor 10 ready. Checked here, from each rank's RESULT line
# and the job's wall time, with GS_TIMEOUT_MS (default 3000 ms):
#   - the last rank's gs_bucketer_wait() returns GS_ERR_INVALID_ARG at once;
#   - every other rank's returns GS_ERR_TIMEOUT or GS_ERR_PEER_FAILED within
#     the deadline plus 3 s, never hangs;
#   - every rank destroys its bucketer and communicator and exits 0, and the
#     whole job ends well before gsrun's own limit.
# bucket_check checks the same on each rank and exits 1 on a failure.
# usage: run_bucket.sh PATH/TO/gsrun PATH/TO/bucket_check NRANKS
set -u
GSRUN=${1:?usage: run_bucket.sh GSRUN BUCKET_CHECK NRANKS}
PROG=${2:?usage: run_bucket.sh GSRUN BUCKET_CHECK NRANKS}
N=${3:?usage: run_bucket.sh GSRUN BUCKET_CHECK NRANKS}
export GS_TIMEOUT_MS=${GS_TIMEOUT_MS:-3000}
unset GS_RANK GS_WORLD_SIZE RANK WORLD_SIZE
LOG=$(mktemp "${TMPDIR:-/tmp}/gs_bucket.XXXXXX")
trap 'rm -f "$LOG"' EXIT

start=$(date +%s%N)
"$GSRUN" -n "$N" --timeout 60 "$PROG" straggler >"$LOG" 2>&1
rc=$?
end=$(date +%s%N)
wall_ms=$(((end - start) / 1000000))
fail=0
if [ $rc -ne 0 ]; then
    echo "gsrun exit status $rc"
    fail=1
fi
last=$((N - 1))
for ((r = 0; r < N; r++)); do
    line=$(grep "RESULT rank=$r " "$LOG" | head -n 1)
    if [ -z "$line" ]; then
        echo "rank $r printed no RESULT"
        fail=1
        continue
    fi
    st=$(echo "$line" | sed -n 's/.* status=\([A-Z_]*\).*/\1/p')
    t=$(echo "$line" | sed -n 's/.* t_ms=\([0-9]*\).*/\1/p')
    if [ "$r" -eq "$last" ]; then
        if [ "$st" != "GS_ERR_INVALID_ARG" ] || [ "$t" -gt 1000 ]; then
            echo "rank $r (never marks tensor 10): $st after $t ms, expected GS_ERR_INVALID_ARG at once"
            fail=1
        fi
    elif { [ "$st" != "GS_ERR_TIMEOUT" ] && [ "$st" != "GS_ERR_PEER_FAILED" ]; } ||
        [ "$t" -gt $((GS_TIMEOUT_MS + 3000)) ]; then
        echo "rank $r: $st after $t ms, expected GS_ERR_TIMEOUT or GS_ERR_PEER_FAILED within $((GS_TIMEOUT_MS + 3000)) ms"
        fail=1
    fi
    if ! grep -q "DESTROYED rank=$r " "$LOG"; then
        echo "rank $r did not destroy its bucketer"
        fail=1
    fi
done
# Step 1, the deadline, the last rank's extra 1.5 s and the teardown; far below gsrun's 60 s.
if [ $wall_ms -gt $((2 * GS_TIMEOUT_MS + 15000)) ]; then
    echo "the job took $wall_ms ms"
    fail=1
fi
if [ $fail -ne 0 ]; then
    echo "---- log"
    cat "$LOG"
    echo "FAILED (straggler, $N ranks, GS_TIMEOUT_MS=$GS_TIMEOUT_MS)"
    exit 1
fi
grep RESULT "$LOG"
echo "ok: straggler on $N ranks, job $wall_ms ms, GS_TIMEOUT_MS=$GS_TIMEOUT_MS"
