#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# run_trials.sh: randomised kill -9 trials. Each trial starts WORLD ranks of
# trial_check by hand on a free loopback port, runs one collective chosen at
# random (allreduce, broadcast, allgather, reduce_scatter, alltoall,
# allgatherv, alltoallv, reduce_scatterv, p2p ring, int8-compressed
# all-reduce) with a random element count, and SIGKILLs a random rank at a
# random point: in iteration 1..3, 0..30 ms after it began (the victim's own
# thread raises SIGKILL, so the moment is measured on the victim's clock).
# GS_TIMEOUT_MS is 20000, so only failure detection, not the deadline, can
# pass the 2 s bound.
#
# Every survivor must return an error whose gs_last_error() names the
# victim ("rank V" / "peer V") within LIMIT_MS (2000) of the kill, exit 0
# and not crash; a process still running 30 s after the kill is a hang.
# Then a SIGSTOP case: a random rank of WORLD is stopped mid-loop with
# GS_TIMEOUT_MS=STOP_TMO (6000, above the heartbeat's 3 s): every survivor must fail with an error
# naming the stopped rank (GS_ERR_TIMEOUT, or GS_ERR_PEER_FAILED once
# another survivor gave up) within STOP_TMO + 3.5 s.
#
# usage: run_trials.sh TRIAL_CHECK [--trials N] [--world W] [--seed S] [--budget SECONDS]
#                                  [--colls a,b,...] [--stops K]
#   SEED=S (environment) reproduces a run: the same seed gives the same
#   trials (collective, count, victim, iteration, delay). --budget stops
#   starting new trials after SECONDS (the summary says how many ran).
# Prints one line per trial and a summary table; exit 1 on any failure.
set -u

PROG=${1:?usage: run_trials.sh TRIAL_CHECK [--trials N] [--world W] [--seed S] [--budget S]}
shift
TRIALS=100
WORLD=4
SEED=${SEED:-}
BUDGET=210
STOPS=2
COLLS=
while [ $# -gt 0 ]; do
    case "$1" in
    --trials) TRIALS=$2; shift 2 ;;
    --world) WORLD=$2; shift 2 ;;
    --seed) SEED=$2; shift 2 ;;
    --budget) BUDGET=$2; shift 2 ;;
    --colls) COLLS=${2//,/ }; shift 2 ;;
    --stops) STOPS=$2; shift 2 ;;
    *) echo "run_trials: unknown option $1" >&2; exit 2 ;;
    esac
done
[ -n "$SEED" ] || SEED=$(( ($(date +%s%N) / 1000) % 2147483647 ))
# shellcheck source-path=SCRIPTDIR source=lib_procs.sh
. "$(dirname "$0")/lib_procs.sh"
# shellcheck source-path=SCRIPTDIR source=lib_trials.sh
. "$(dirname "$0")/lib_trials.sh"

STOP_TMO=6000
[ -z "$COLLS" ] || read -r -a TRIAL_COLLS <<<"$COLLS"
COLLS=${TRIAL_COLLS[*]}
RANDOM=$SEED
echo "run_trials: seed $SEED (reproduce with SEED=$SEED), $TRIALS trials on $WORLD ranks," \
    "budget ${BUDGET}s, collectives: $COLLS"

declare -A PER_COLL_T PER_COLL_F
t_start=$(now_ms)

# one_trial I : runs trial I; updates the counters.
one_trial() {
    # shellcheck disable=SC2034 # count, kiter, kdelay: set by trial_draw for TRIAL_ARGS
    local i=$1 coll count victim kiter kdelay port r pids=() ok=1 kill_t st t named rc line
    trial_draw "$i" "$WORLD"
    port=$(free_port)
    local name="t$i"
    for ((r = 0; r < WORLD; r++)); do
        start_rank "$r" "$WORLD" "$port" 20000 "$TMP/$name.$r.log" "${TRIAL_ARGS[@]}"
        pids[r]=$LASTPID
    done
    local rcs=()
    for ((r = 0; r < WORLD; r++)); do
        wait_rank "${pids[r]}" 40
        rcs[r]=$RC
    done
    ntrials=$((ntrials + 1))
    PER_COLL_T[$coll]=$(( ${PER_COLL_T[$coll]:-0} + 1 ))
    kill_t=$(field "$TMP/$name.$victim.log" KILL t_ms)
    if [ -z "$kill_t" ]; then
        line+=" victim never reached the kill point (exit ${rcs[victim]})"
        ok=0
        nbad=$((nbad + 1))
    fi
    for ((r = 0; r < WORLD; r++)); do
        [ "$r" -eq "$victim" ] && continue
        [ -z "$kill_t" ] && continue
        nsurv=$((nsurv + 1))
        rc=${rcs[r]}
        st=$(field "$TMP/$name.$r.log" RESULT status)
        t=$(field "$TMP/$name.$r.log" RESULT t_ms)
        named=$(field "$TMP/$name.$r.log" RESULT named)
        if [ "$rc" -eq 137 ] && [ -z "$t" ]; then
            line+=" r$r=HANG"
            nhang=$((nhang + 1)); ok=0; continue
        fi
        if [ "$rc" -eq 137 ]; then
            line+=" r$r=HANG-IN-DESTROY"
            nhang=$((nhang + 1)); ok=0; continue
        fi
        if [ "$rc" -gt 128 ] || grep -q -e 'FATAL' -e 'Segmentation' -e 'Aborted' \
            "$TMP/$name.$r.log"; then
            line+=" r$r=CRASH(exit $rc)"
            ncrash=$((ncrash + 1)); ok=0; continue
        fi
        trial_judge "$r" "$rc" "$st" "$t" "$named" || continue
        [ "$st" = GS_OK ] && { nbad=$((nbad + 1)); ok=0; }
    done
    if [ "$ok" -eq 1 ]; then
        echo "ok   $line"
        rm -f "$TMP/$name".*.log
    else
        PER_COLL_F[$coll]=$(( ${PER_COLL_F[$coll]:-0} + 1 ))
        echo "FAIL $line"
        dump_logs "$name"
    fi
}

for ((i = 1; i <= TRIALS; i++)); do
    if [ $(( ($(now_ms) - t_start) / 1000 )) -ge "$BUDGET" ]; then
        echo "run_trials: budget of ${BUDGET}s spent after $((i - 1)) trials"
        break
    fi
    # (stderr: bash's "Killed" notices of the victims)
    one_trial "$i" 2>>"$TMP/notices"
done

# SIGSTOP: a stopped rank is noticed by the deadline (or a heartbeat, once there is one).
nstop=0 nstop_ok=0
stop_case() {
    local k=$1 victim port r pids=() ok=1 t_stop st t dt err coll
    victim=$((RANDOM % WORLD))
    coll=${TRIAL_COLLS[RANDOM % ${#TRIAL_COLLS[@]}]}
    port=$(free_port)
    for ((r = 0; r < WORLD; r++)); do
        start_rank "$r" "$WORLD" "$port" "$STOP_TMO" "$TMP/stop$k.$r.log" loop --coll "$coll" \
            --count 50000 --max-seconds 30
        pids[r]=$LASTPID
    done
    for ((r = 0; r < WORLD; r++)); do
        wait_line "$TMP/stop$k.$r.log" '^READY' 20 || ok=0
    done
    sleep 0.$((RANDOM % 5 + 2))
    t_stop=$(now_ms)
    kill -STOP "${pids[victim]}"
    local line="stop $k: $coll, rank $victim stopped:"
    for ((r = 0; r < WORLD; r++)); do
        [ "$r" -eq "$victim" ] && continue
        wait_rank "${pids[r]}" 20
        st=$(field "$TMP/stop$k.$r.log" RESULT status)
        t=$(field "$TMP/stop$k.$r.log" RESULT t_ms)
        err=$(sed -n 's/^RESULT .* err=//p' "$TMP/stop$k.$r.log" | head -n 1)
        dt=$(( ${t:-0} - t_stop ))
        line+=" r$r=${st:-none}/${dt}ms"
        if [ -z "$t" ] || [ "$dt" -gt $((STOP_TMO + 3500)) ] || [ "$st" = GS_OK ] ||
            ! printf '%s' "$err" | grep -qiE "(rank|peer) $victim([^0-9]|$)"; then
            ok=0
            line+="(err: $err)"
        fi
    done
    kill -CONT "${pids[victim]}" 2>/dev/null
    kill -KILL "${pids[victim]}" 2>/dev/null
    wait_rank "${pids[victim]}" 5
    nstop=$((nstop + 1))
    if [ "$ok" -eq 1 ]; then
        nstop_ok=$((nstop_ok + 1))
        echo "ok   $line"
    else
        echo "FAIL $line"
        dump_logs "stop$k"
    fi
}
for ((k = 1; k <= STOPS; k++)); do
    stop_case "$k" 2>>"$TMP/notices"
done

elapsed=$(( ($(now_ms) - t_start) / 1000 ))
trial_summary "run_trials summary (seed $SEED, world $WORLD, ${elapsed}s):" \
    "SIGSTOP cases (passed)" "$nstop ($nstop_ok)"
printf '  per collective (trials/failed):'
for c in "${TRIAL_COLLS[@]}"; do
    printf ' %s %s/%s' "$c" "${PER_COLL_T[$c]:-0}" "${PER_COLL_F[$c]:-0}"
done
echo
if [ "$(trial_failures)" -eq 0 ] && [ "$nstop" -eq "$nstop_ok" ] &&
    [ "$ntrials" -gt 0 ]; then
    echo "run_trials: PASS"
    exit 0
fi
echo "run_trials: FAIL (reproduce with SEED=$SEED)"
exit 1
