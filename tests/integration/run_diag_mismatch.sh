#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# run_diag_mismatch.sh: a mismatch at operation #3 on NRANKS ranks (diag_check
# mismatch WHAT ODD), with the odd rank first, second and last, and the count,
# the dtype, the op and the collective kind in turn. Every rank must fail with
# GS_ERR_MISMATCH naming both calls in words and which ranks made which,
# whichever side it is on, and its log (GS_DEBUG_FILE) may show no raw tag or
# fingerprint at WARN (issue 25). GS_TIMEOUT_MS=30000, so a timeout cannot
# pass; each job is killed by gsrun after 30 s.
# usage: run_diag_mismatch.sh GSRUN DIAG_CHECK NRANKS [WHAT...]
set -u

GSRUN=${1:?usage: run_diag_mismatch.sh GSRUN DIAG_CHECK NRANKS [WHAT...]}
DIAG=${2:?diag_check}
NP=${3:?nranks}
shift 3
WHATS=${*:-count dtype op kind}
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
pass=0
failed=0

odds="0 1"
if [ "$NP" -gt 2 ]; then
    odds="0 1 last"
fi
for what in $WHATS; do
    for odd in $odds; do
        name="$what-odd$odd"
        if GS_TIMEOUT_MS=30000 GS_DEBUG_FILE="$TMP/$name.%r.log" \
            "$GSRUN" -n "$NP" --timeout 30 "$DIAG" mismatch "$what" "$odd" >"$TMP/$name.out" 2>&1; then
            echo "ok   $NP ranks, $what, odd rank $odd"
            pass=$((pass + 1))
        else
            echo "FAIL $NP ranks, $what, odd rank $odd:"
            grep -E "FAIL|GS_ERR|GS_OK|gsrun" "$TMP/$name.out" | head -20
            failed=$((failed + 1))
        fi
    done
done
echo "run_diag_mismatch $NP ranks: $pass passed, $failed failed"
[ "$failed" -eq 0 ]
