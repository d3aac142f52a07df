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
# Then --grow-back (issue 24): rank 2 dies at step 60 (the end of epoch 1);
# the survivors shrink to 3, rank 0 starts a fresh worker, and at step 63
# (--grow-after 2, in epoch 2) they grow back to 4 with it as rank 3 on
# shard 2. Pass: the victim died of SIGKILL, the survivors exited 0, rank 0
# printed the size-by-steps lines (0-59 at 4, 60 dropped, 61-62 at 3,
# 63-247 at 4), the worker joined, trained to the end and exited 0 (reaped
# by rank 0; no process left), all 4 ranks printed the same parameter
# checksum (rank 0's "params:" one), nothing is reported lost, and the loss
# and accuracy meet the same criterion as above.
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

# --- --grow-back: the worker's lines go to rank 0's log (it inherits its output).
run_job grow --elastic --grow-back --kill-rank "$VICTIM" --kill-at-step 60
ok=1
log0=$TMP/grow.0.log
loss=$(final "$log0" 2)
acc=$(final "$log0" 4)
echo "  grow-back: exit statuses ${RCS[*]}; final loss ${loss:-?} acc ${acc:-?}"
grep -h '^elastic:' "$log0" | sed 's/^/  /'
wpid=$(sed -n 's/^elastic: started a new worker, pid \([0-9]*\), to join as rank 3 with shard 2$/\1/p' \
    "$log0" | head -n 1)
[ -n "$wpid" ] && PIDS+=("$wpid") # cleanup stops it if it outlived the job
[ "${RCS[VICTIM]}" -eq 137 ] || { echo "  the victim was not killed"; ok=0; }
for ((r = 0; r < N; r++)); do
    [ "$r" -eq "$VICTIM" ] && continue
    [ "${RCS[r]}" -eq 0 ] || { echo "  survivor $r exited ${RCS[r]}"; ok=0; }
done
for want in \
    '^elastic: steps 0-59 ran at 4 ranks$' \
    "^elastic: rank $VICTIM is gone (epoch 1, step 60): .* \\[8000, 12000) (4000 samples), waits for a new worker$" \
    '^elastic: going on with 3 of 4 ranks' \
    '^elastic: step 60 dropped; growing back to 4 ranks at step 63$' \
    '^elastic: steps 61-62 ran at 3 ranks$' \
    '^elastic: grew back to 4 ranks at step 63 (new rank 3 took shard 2)$' \
    "^elastic: new worker pid ${wpid:-none} joined as rank 3 of 4 with shard 2; it trains from epoch 2 step 1$" \
    "^elastic: new worker pid ${wpid:-none} (rank 3, shard 2) exited with status 0$" \
    '^elastic: steps 63-247 ran at 4 ranks$' \
    '^elastic: summary: steps 0-59 at 4 ranks, step 60 dropped, steps 61-62 at 3 ranks, steps 63-247 at 4 ranks$' \
    '^elastic: finished on 4 of 4 ranks, no training samples lost'; do
    grep -q "$want" "$log0" || { echo "  no line matching: $want"; ok=0; }
done
if [ -n "$wpid" ] && kill -0 "$wpid" 2>/dev/null; then
    echo "  the new worker (pid $wpid) outlived the job"
    ok=0
fi
# Every rank's checksum (the worker's in rank 0's log), each rank once, all equal to rank 0's.
sums=$(cat "$TMP"/grow.[013].log | sed -n 's/^elastic: rank \([0-3]\) (shard [0-3]) checksum \(.*\)$/\1 \2/p' | sort)
ref=$(sed -n 's/^params: checksum //p' "$log0" | head -n 1)
if [ "$(echo "$sums" | cut -d' ' -f1 | tr '\n' ' ')" != "0 1 2 3 " ] ||
    [ -z "$ref" ] || [ "$(echo "$sums" | cut -d' ' -f2 | sort -u)" != "$ref" ]; then
    echo "  the ranks' checksums are not 4 equal ones (rank 0: ${ref:-none}): $(echo "$sums" | tr '\n' ' ')"
    ok=0
fi
if [ -z "$loss" ] ||
    ! awk -v l="$loss" -v a="$acc" -v bl="$base_loss" -v ba="$base_acc" \
        'BEGIN { exit !((l <= bl * 1.10) && (a >= ba - 5.0)) }'; then
    echo "  final loss/accuracy not within 10% / 5 points of the undisturbed run"
    ok=0
fi
if [ "$ok" -eq 1 ]; then
    pass "grow-back: 3 survivors grew back to 4 with a new worker on shard 2, replicas agree (loss $loss vs $base_loss)"
else
    fail "grow-back after rank $VICTIM's kill"
    dump_logs grow
fi
echo "run_train_elastic: $PASS passed, $FAIL failed"
[ "$FAIL" -eq 0 ]
