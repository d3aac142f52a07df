#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# run_trials_lab.sh: tests/integration/run_trials.sh's randomised kill -9
# trials across the lab's hosts (network namespaces on a bridge, one rank per
# host), so that every failure is seen through a real (virtual) link. Each
# trial runs trial_check with a random collective (allreduce, broadcast,
# allgather, reduce_scatter, alltoall, allgatherv, alltoallv,
# reduce_scatterv, p2p ring, int8-compressed all-reduce) and count, and a
# random rank raises SIGKILL on itself at a random point (iteration 1..3,
# 0..30 ms in). GS_TIMEOUT_MS=20000: only failure detection can meet the
# bound. Pass: every survivor returns an error naming the victim within
# 2 s of the kill, exits 0, and nothing hangs or crashes. A summary table
# follows (trials, survivors, detection latency max and median, hangs,
# crashes).
#
# usage: run_trials_lab.sh TRIAL_CHECK [--trials N] [--hosts H] [--seed S] [--rate R]
#   SEED=S (environment) reproduces a run.
# Exit status: 0 pass, 1 fail, 77 skip (no root or iproute2), 2 usage.
# shellcheck source-path=SCRIPTDIR disable=SC2034 # LAB_* settings are read by lib_lab.sh
set -u

usage() {
    echo "usage: run_trials_lab.sh TRIAL_CHECK [--trials N] [--hosts H] [--seed S] [--rate R]" >&2
    exit 2
}
[ $# -ge 1 ] || usage
PROG=$1
shift
[ -x "$PROG" ] || { echo "run_trials_lab: $PROG is not executable" >&2; exit 2; }
TRIALS=20
NH=4
SEED=${SEED:-}
RATE_OPTS=()
while [ $# -gt 0 ]; do
    case "$1" in
    --trials) TRIALS=$2; shift 2 ;;
    --hosts) NH=$2; shift 2 ;;
    --seed) SEED=$2; shift 2 ;;
    --rate) RATE_OPTS=(--rate "$2"); shift 2 ;;
    *) usage ;;
    esac
done
[ -n "$SEED" ] || SEED=$(( ($(date +%s%N) / 1000) % 2147483647 ))

# shellcheck source=lib_lab.sh
. "$(dirname "$0")/lib_lab.sh"
# shellcheck source=../integration/lib_trials.sh
. "$(dirname "$0")/../integration/lib_trials.sh"
lab_up "$NH" ${RATE_OPTS[@]+"${RATE_OPTS[@]}"}

LAB_ENV=(GS_TIMEOUT_MS=20000)
LAB_KILL_ON_FAIL=0
LAB_TIMEOUT=45
RANDOM=$SEED
echo "run_trials_lab: seed $SEED (reproduce with SEED=$SEED), $TRIALS trials on $NH hosts" \
    "(one rank each)"

t_start=$(lab_now_ms)
for ((i = 1; i <= TRIALS; i++)); do
    trial_draw "$i" "$NH"
    LAB_PORT=$((29500 + i))
    rm -f "$LAB_TMP"/rank.*.log
    lab_start "$NH" 1 "$PROG" "${TRIAL_ARGS[@]}"
    # lib_lab.sh's lab_wait reads "$pid" after `wait -n -p pid`, which bash unsets when
    # wait returns without a job (a rank already reaped): not under set -u.
    set +u
    lab_wait
    set -u
    ntrials=$((ntrials + 1))
    ok=1
    kill_t=$(field "$LAB_TMP/rank.$victim.log" KILL t_ms)
    if [ -z "$kill_t" ]; then
        line+=" victim never reached the kill point"
        nbad=$((nbad + 1))
        ok=0
    else
        for ((r = 0; r < NH; r++)); do
            [ "$r" -eq "$victim" ] && continue
            nsurv=$((nsurv + 1))
            log=$LAB_TMP/rank.$r.log
            rc=${RCS[r]}
            # lab_wait may stop tracking a rank (see above): one that printed DESTROY exited.
            if [ "$rc" -eq 137 ] && grep -q '^DESTROY' "$log"; then rc=0; fi
            st=$(field "$log" RESULT status)
            t=$(field "$log" RESULT t_ms)
            named=$(field "$log" RESULT named)
            if [ "$rc" -eq 137 ]; then
                line+=" r$r=HANG"
                nhang=$((nhang + 1)); ok=0; continue
            fi
            if [ "$rc" -gt 128 ]; then
                line+=" r$r=CRASH(exit $rc)"
                ncrash=$((ncrash + 1)); ok=0; continue
            fi
            trial_judge "$r" "$rc" "$st" "$t" "$named" || continue
            [ "$rc" -eq 0 ] || ok=0
        done
    fi
    if [ "$ok" -eq 1 ]; then
        echo "ok   $line"
    else
        echo "FAIL $line"
        lab_dump 10
    fi
done
trial_summary "run_trials_lab summary (seed $SEED, $NH hosts, $(( ($(lab_now_ms) - t_start) / 1000 ))s):"
if [ "$(trial_failures)" -eq 0 ] && [ "$ntrials" -gt 0 ]; then
    echo "run_trials_lab: PASS"
    exit 0
fi
echo "run_trials_lab: FAIL (reproduce with SEED=$SEED)"
exit 1
