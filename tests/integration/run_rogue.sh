#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# run_rogue.sh: a rogue rank in a compressed all-reduce, reduce-scatter or
# all-gather on 3 ranks. Rank 1
# runs with GS_COMP_TEST_CORRUPT=OFFSET and flips that byte of every
# compressed payload it sends; the others must fail the call with a clear
# error (rogue_check.c says which), at least one of them with
# GS_ERR_PROTOCOL from its own check, all within GS_TIMEOUT_MS, and nobody
# may crash. Cases (codec offset what):
#   int8  0   allreduce       the payload magic
#   int8  16  allreduce       the element count
#   topk  18  allreduce       the element count of a top-k payload (all-gather path)
#   topk  35  allreduce       the high byte of the first top-k index (out of range)
#   sign  24  allreduce       the body length of a sign payload
#   int8  16  reduce_scatter  the element count of a block bound for its owner
#   topk  35  reduce_scatter  the first top-k index of such a block
#   int8  0   allgather       the magic of the block every peer decodes
#   sign  24  allgather       the body length of that block
# (random-k sends no payload: its ranks draw the same indices and sum the
# values with a plain all-reduce; a rank with another seed is compress_w*'s
# GS_ERR_PROTOCOL case.)
# GS_COMP_TEST_CORRUPT is a test-only switch: ROGUE_CHECK links the test
# variant of the library (libgradsync_testhooks.so), the only one that has it.
# usage: run_rogue.sh GSRUN ROGUE_CHECK
set -u
GSRUN=${1:?usage: run_rogue.sh GSRUN ROGUE_CHECK}
CHECK=${2:?usage: run_rogue.sh GSRUN ROGUE_CHECK}
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
pass=0
failed=0
export GS_TIMEOUT_MS=10000

while read -r codec off coll what; do
    log=$TMP/$codec-$off-$coll.log
    start=$(date +%s)
    # shellcheck disable=SC2016 # expanded by the inner shell
    "$GSRUN" -n 3 --timeout 60 bash -c \
        'if [ "$GS_RANK" = 1 ]; then export GS_COMP_TEST_CORRUPT=$0; fi; exec "$@"' "$off" \
        "$CHECK" "$codec" 0.01 "$coll" >"$log" 2>&1
    rc=$?
    took=$(($(date +%s) - start))
    if [ "$rc" -eq 0 ] && grep -q "GS_ERR_PROTOCOL" "$log" &&
        [ "$(grep -c "^\[[02]\] rank [02]: GS_ERR_" "$log")" -eq 2 ]; then
        echo "ok: $coll $codec, $what (byte $off): both other ranks failed cleanly in ${took}s"
        grep "^\[[0-9]\] rank" "$log" | sed 's/^/    /'
        pass=$((pass + 1))
    else
        echo "FAIL: $coll $codec, $what (byte $off): exit $rc after ${took}s"
        tail -n 20 "$log"
        failed=$((failed + 1))
    fi
done <<'CASES'
int8 0 allreduce the payload magic
int8 16 allreduce the element count
topk 18 allreduce the element count
topk 35 allreduce the first index
sign 24 allreduce the body length
int8 16 reduce_scatter the element count
topk 35 reduce_scatter the first index
int8 0 allgather the payload magic
sign 24 allgather the body length
CASES
echo "$pass passed, $failed failed"
[ "$failed" -eq 0 ]
