#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# train_check.sh: tests of examples/train (registered in
# examples/train/CMakeLists.txt, label integration).
#
#   train_check.sh converge GSRUN TRAIN
#       A short synthetic training on 2 ranks, uncompressed and with
#       sign + error feedback: both must end well above chance, and sign+EF
#       within MAX_GAP points of uncompressed. Every rank must finish with
#       the same parameters (train checks that itself and exits 1 if not).
#   train_check.sh csv GSRUN TRAIN
#       --data on a tiny generated CSV trains to high accuracy; malformed
#       files (bad feature, wrong feature count, bad label, missing file)
#       and bad options fail with a non-zero exit and a message naming the
#       file and line (or the option).
#
# Each run is bounded by gsrun --timeout; the whole script by ctest TIMEOUT.
set -u

MODE=${1:?mode}
GSRUN=${2:?gsrun}
TRAIN=${3:?train}
MAX_GAP=${MAX_GAP:-3}
FAIL=0
PASS=0
TMP=$(mktemp -d "${TMPDIR:-/tmp}/gs_train.XXXXXX")
trap 'rm -rf "$TMP"' EXIT
export GS_TIMEOUT_MS=${GS_TIMEOUT_MS:-30000}
unset GS_RANK GS_WORLD_SIZE RANK WORLD_SIZE GS_MASTER_PORT MASTER_PORT

ok() { PASS=$((PASS + 1)); echo "ok: $*"; }
bad() { FAIL=$((FAIL + 1)); echo "FAIL: $*"; }

# run NAME ARGS...: rank-0 output in $TMP/NAME.out, stderr in $TMP/NAME.err; sets RC.
run() {
    local name=$1
    shift
    "$GSRUN" -n 2 --timeout 60 "$TRAIN" "$@" >"$TMP/$name.out" 2>"$TMP/$name.err"
    RC=$?
}

# final_acc NAME: the accuracy of the 'final:' line, or empty.
final_acc() {
    sed -n 's/^\[0\] final: loss [0-9.naif]* acc \([0-9.]*\)$/\1/p' "$TMP/$1.out"
}

# Floating-point comparison through awk: cmp A OP B.
cmp() { awk -v a="$1" -v b="$3" "BEGIN { exit !(a $2 b) }"; }

# expect_error NAME PATTERN ARGS...: train must fail and say PATTERN on stderr.
expect_error() {
    local name=$1 pattern=$2
    shift 2
    run "$name" "$@"
    if [ "$RC" -eq 0 ]; then
        bad "$name: exit 0, expected a failure"
    elif ! grep -q -- "$pattern" "$TMP/$name.err"; then
        bad "$name: exit $RC but stderr lacks '$pattern':"
        sed 's/^/    /' "$TMP/$name.err" | head -5
    else
        ok "$name: exit $RC, $(grep -m1 -- "$pattern" "$TMP/$name.err")"
    fi
}

case "$MODE" in
converge)
    # 5 classes (chance 20%), 2 clusters each; about 1 s per run on 2 idle cores.
    # At this setting: none 78.95, sign+EF 78.83, sign without EF 73.95.
    SMALL=(--samples 20000 --features 64 --classes 5 --hidden 32 --spread 0.35 --epochs 8)
    run none "${SMALL[@]}" --codec none
    A_NONE=$(final_acc none)
    run sign "${SMALL[@]}" --codec sign
    A_SIGN=$(final_acc sign)
    cat "$TMP/none.out" "$TMP/sign.out" | grep '^\[0\]'
    for n in none sign; do
        if [ -s "$TMP/$n.err" ]; then
            sed "s/^/    $n stderr: /" "$TMP/$n.err" | head -5
        fi
    done
    if [ -z "$A_NONE" ] || [ -z "$A_SIGN" ]; then
        bad "no 'final:' line (none: '$A_NONE', sign: '$A_SIGN')"
    else
        if cmp "$A_NONE" '>=' 50; then ok "none: acc $A_NONE >= 50 (chance 20)"; else
            bad "none: acc $A_NONE < 50 (chance 20)"; fi
        if cmp "$A_SIGN" '>=' 50; then ok "sign+ef: acc $A_SIGN >= 50"; else
            bad "sign+ef: acc $A_SIGN < 50"; fi
        GAP=$(awk -v a="$A_NONE" -v b="$A_SIGN" 'BEGIN { printf "%.2f", a - b }')
        if cmp "$GAP" '<=' "$MAX_GAP"; then
            ok "sign+ef within $MAX_GAP points of none ($A_SIGN vs $A_NONE, gap $GAP)"
        else
            bad "sign+ef $A_SIGN is $GAP points below none $A_NONE (limit $MAX_GAP)"
        fi
    fi
    ;;
csv)
    # 300 samples, 4 features, 3 classes: class k has feature k at +2, others near 0.
    awk 'BEGIN { print "# label,f1,f2,f3,f4";
        for (i = 0; i < 300; i++) { k = i % 3; line = k;
            for (j = 0; j < 4; j++) { v = ((i * 7919 + j * 104729) % 1000) / 1000.0 - 0.5;
                if (j == k) v += 2; line = line "," v }
            print line } }' >"$TMP/good.csv"
    run good --data "$TMP/good.csv" --epochs 20 --batch 16 --hidden 8
    A=$(final_acc good)
    grep '^\[0\] \(train\|final\)' "$TMP/good.out"
    if [ "$RC" -ne 0 ] || [ -z "$A" ]; then
        bad "good.csv: exit $RC, final acc '$A'"
        head -5 "$TMP/good.err"
    elif cmp "$A" '>=' 90; then
        ok "good.csv: acc $A >= 90"
    else
        bad "good.csv: acc $A < 90"
    fi
    if grep -q '300 train\|240 train' "$TMP/good.out" && grep -q '4 features, 3 classes' "$TMP/good.out"; then
        ok "good.csv: 4 features and 3 classes read from the file"
    else
        bad "good.csv: feature or class count not read from the file"
    fi

    head -4 "$TMP/good.csv" >"$TMP/badnum.csv"
    echo "1,0.5,abc,0.1,0.2" >>"$TMP/badnum.csv"
    expect_error badnum "badnum.csv:5: feature 2: bad number 'abc'" --data "$TMP/badnum.csv"

    head -3 "$TMP/good.csv" >"$TMP/badcount.csv"
    echo "2,0.5,0.1,0.2" >>"$TMP/badcount.csv"
    expect_error badcount "badcount.csv:4: 3 features, but the first sample has 4" \
        --data "$TMP/badcount.csv"

    head -6 "$TMP/good.csv" >"$TMP/badlabel.csv"
    echo "x1,0.5,0.1,0.2,0.3" >>"$TMP/badlabel.csv"
    expect_error badlabel "badlabel.csv:7: bad label 'x1'" --data "$TMP/badlabel.csv"

    expect_error missing "nosuch.csv: cannot open" --data "$TMP/nosuch.csv"
    expect_error badcodec "unknown --codec 'zip'" --codec zip
    expect_error badratio "bad value '2' for --ratio" --ratio 2
    ;;
*)
    echo "usage: train_check.sh converge|csv GSRUN TRAIN" >&2
    exit 2
    ;;
esac

echo "train_check $MODE: $PASS passed, $FAIL failed"
[ "$FAIL" -eq 0 ] && [ "$PASS" -gt 0 ]
