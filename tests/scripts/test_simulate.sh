#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# test_simulate.sh PYTHON SIMULATE FIXTURE [FIXTURE_LAZY]: bench/scale/simulate.py
# (issue 22) on fixed bench_scale.sh TSVs: FIXTURE from a library without
# GS_CONNECT (every row ran eager), FIXTURE_LAZY from one with lazy
# connections (its lazy rows are checked out of sample, since the fit uses
# only eager rows). On each it must fit, validate and predict with its
# own --check passing (fitted costs positive and finite, every measured point
# within 50%, descriptors as fitted, lazy below eager from 64 ranks, eager
# init growing with the ranks); its tables must be there with a row for
# 1,024 ranks; --markdown must print the same sections without the title;
# without a TSV the built-in fit must pass --check too; and a file that is
# not a TSV must fail with a message, not a traceback. With FIXTURE_LAZY the
# fit must model eager with the bootstrap ring and show the lazy rows as lazy.
# Exit status: 0 pass, 1 fail.
set -u
PY=${1:?usage: test_simulate.sh PYTHON SIMULATE FIXTURE [FIXTURE_LAZY]}
SIM=${2:?}
FIX=${3:?}
FIX_LAZY=${4:-}
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
fail=0
bad() {
    echo "test_simulate: $*"
    fail=1
}

run() { timeout 60 "$PY" "$SIM" "$@"; }

if ! run --tsv "$FIX" --ranks 8,64,1024 --sizes 64,1M --check >"$TMP/out" 2>"$TMP/err"; then
    cat "$TMP/out" "$TMP/err"
    bad "simulate.py --check failed on $FIX"
fi
for want in '### Fitted costs' '### Validation: one host' '### Predicted init' \
    '### Predicted all-reduce' '| 1,024 | eager | off |' '| 1,024 | lazy | on |' \
    'Launch to ready: median |error|'; do
    grep -qF -- "$want" "$TMP/out" || bad "no '$want' in the output"
done
# Eager holds a socket pair for every peer (7 + 2 x 1023 here), lazy a few.
eager=$(awk -F' [|] ' '$1 == "| 1,024" && $2 == "eager" && $3 == "off" {print $11}' "$TMP/out" |
    tr -dc '0-9')
lazy=$(awk -F' [|] ' '$1 == "| 1,024" && $2 == "lazy" && $3 == "off" {print $11}' "$TMP/out" |
    tr -dc '0-9')
if [ -z "$eager" ] || [ -z "$lazy" ] || [ "$eager" -lt 2000 ] || [ "$lazy" -gt 100 ]; then
    bad "descriptors after init at 1,024 ranks: eager '$eager', lazy '$lazy'"
fi
run --tsv "$FIX" --ranks 8 --sizes 64 --markdown >"$TMP/md" 2>&1 || bad "--markdown failed"
grep -q '^# simulate.py' "$TMP/md" && bad "--markdown printed the title"
grep -qF '### Validation' "$TMP/md" || bad "--markdown left out the validation"
run --ranks 8,64 --sizes 64 --check >"$TMP/def" 2>&1 || {
    cat "$TMP/def"
    bad "the built-in fit fails --check"
}
if [ -n "$FIX_LAZY" ]; then
    if ! run --tsv "$FIX_LAZY" --ranks 8,64,1024 --sizes 64 --check >"$TMP/lazy" 2>&1; then
        cat "$TMP/lazy"
        bad "simulate.py --check failed on $FIX_LAZY"
    fi
    grep -qF 'eager with the bootstrap ring' "$TMP/lazy" ||
        bad "$FIX_LAZY: eager not modelled with the bootstrap ring"
    grep -q '^| 128 | tcp | lazy | ' "$TMP/lazy" || bad "$FIX_LAZY: no validated lazy row"
    grep -qF '(ran eager)' "$TMP/lazy" && bad "$FIX_LAZY: lazy rows taken as eager"
fi
printf 'not\ta\ttsv\n' >"$TMP/bad.tsv"
if run --tsv "$TMP/bad.tsv" >"$TMP/badout" 2>&1; then
    bad "a file that is not a TSV was accepted"
fi
grep -q Traceback "$TMP/badout" && bad "a bad TSV gave a traceback: $(cat "$TMP/badout")"
[ "$fail" = 0 ] && echo "test_simulate: ok"
exit "$fail"
