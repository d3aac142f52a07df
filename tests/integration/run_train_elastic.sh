#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# run_train_elastic.sh: examples/train --elastic on 4 ranks started by hand
# (lib_procs.sh; gsrun would stop the survivors). Rank 2 raises SIGKILL on
# itself at global step 30 (inside epoch 1); the survivors shrink to 3 ranks,
# report the lost shard (rank 2's quarter of the training split) and finish.
# Pass: the victim died of SIGKILL, every survivor exited 0, rank 0 printed
# the lost shard and "finished on 3 of 4 ranks", and its final held-out loss
# is within 10% of (and its accuracy within 5 points of) an undisturbed
# 4-rank run of the same job, run first.
# usage: run_train_elastic.sh PATH/TO/train   (KEEP=1 keeps the logs)
set -u

PROG=${1:?usage: run_train_elastic.sh PATH/TO/train}
# shellcheck source-path=SCRIPTDIR source=lib_procs.sh
. "$(dirname "$0")/lib_procs.sh"

ARGS=(--epochs 4 --samples 20000)
N=4
VICTIM=2

run_job() { # NAME ARGS... : N ranks; sets RCS
    local name=$1 port r pids=()
    shift
    port=$(free_port)
    for ((r = 0; r < N; r++)); do
        start_rank "$r" "$N" "$port" 20000 "$TMP/$name.$r.log" "${ARGS[@]}" "$@"
        pids[r]=$LASTPID
    done
    RCS=()
    for ((r = 0; r < N; r++)); do
        wait_rank "${pids[r]}" 120
        RCS[r]=$RC
    done
}

final() { # LOG FIELD(2: loss, 4: acc)
    awk -v f="$2" '/^final: /{print $(f + 1)}' "$1" | head -n 1
}

run_job base
base_loss=$(final "$TMP/base.0.log" 2)
base_acc=$(final "$TMP/base.0.log" 4)
echo "  undisturbed: final loss ${base_loss:-?} acc ${base_acc:-?} (exit ${RCS[*]})"
if [ -z "$base_loss" ]; then
    fail "the undisturbed run did not finish"
    dump_logs base
    echo "run_train_elastic: $PASS passed, $FAIL failed"
    exit 1
fi

run_job elastic --elastic --kill-rank "$VICTIM" --kill-at-step 30
ok=1
loss=$(final "$TMP/elastic.0.log" 2)
acc=$(final "$TMP/elastic.0.log" 4)
echo "  elastic: exit statuses ${RCS[*]}; final loss ${loss:-?} acc ${acc:-?}"
grep -h '^elastic:' "$TMP/elastic.0.log" | sed 's/^/  /'
[ "${RCS[VICTIM]}" -eq 137 ] || { echo "  the victim was not killed"; ok=0; }
for ((r = 0; r < N; r++)); do
    [ "$r" -eq "$VICTIM" ] && continue
    [ "${RCS[r]}" -eq 0 ] || { echo "  survivor $r exited ${RCS[r]}"; ok=0; }
done
grep -q "^elastic: rank $VICTIM is gone .* training samples \[8000, 12000) (4000 samples), is lost" \
    "$TMP/elastic.0.log" || { echo "  no lost-shard line for rank $VICTIM"; ok=0; }
grep -q '^elastic: finished on 3 of 4 ranks' "$TMP/elastic.0.log" ||
    { echo "  no 'finished on 3 of 4 ranks' line"; ok=0; }
if [ -z "$loss" ] ||
    ! awk -v l="$loss" -v a="$acc" -v bl="$base_loss" -v ba="$base_acc" \
        'BEGIN { exit !((l <= bl * 1.10) && (a >= ba - 5.0)) }'; then
    echo "  final loss/accuracy not within 10% / 5 points of the undisturbed run"
    ok=0
fi
if [ "$ok" -eq 1 ]; then
    pass "elastic: 3 survivors finished after rank $VICTIM's kill (loss $loss vs $base_loss)"
else
    fail "elastic training after rank $VICTIM's kill"
    dump_logs elastic
fi
echo "run_train_elastic: $PASS passed, $FAIL failed"
[ "$FAIL" -eq 0 ]
