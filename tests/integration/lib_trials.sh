# SPDX-License-Identifier: Apache-2.0
# shellcheck shell=bash disable=SC2034,SC2154 # counters, LAT, the trial's fields: the caller's
#
# lib_trials.sh: the randomised kill -9 trials that run_trials.sh (ranks on
# loopback) and tests/net/run_trials_lab.sh (one rank per lab host) share:
# the draw of a trial, the judgement of a survivor that reported, and the
# summary table. How ranks are started, waited for and classified as hung
# or crashed stays with each script. Source it after `RANDOM=$SEED`: the
# draws consume $RANDOM in a fixed order, so a seed replays the same trials
# in both scripts. Not executable on its own.
#
#   trial_draw I NRANKS   sets coll, count, victim, kiter, kdelay, TRIAL_ARGS (trial_check's
#                         arguments) and line ("trial I: ... :"), in the caller's scope
#   trial_judge R RC ST T NAMED   judges survivor R's RESULT against kill_t (once the
#                                 caller found it neither hung nor crashed)
#   trial_latency                 sets lat_max and lat_median (ms) from LAT
#   trial_summary TITLE [LABEL VALUE]...   the summary table
#   trial_failures                the number of failed survivors and trials

# The collectives a trial picks from (trial_check --coll); run_trials.sh --colls narrows it.
TRIAL_COLLS=(allreduce broadcast allgather reduce_scatter alltoall allgatherv alltoallv
    reduce_scatterv p2p compressed)
LIMIT_MS=2000 # every survivor must name the victim within this long of the kill
ntrials=0 nsurv=0 nhang=0 ncrash=0 nbad=0 nslow=0 nunnamed=0
LAT=()

# trial_draw I NRANKS : a random collective and count (1 in 6 small: 1..64 elements, else
# 1000..400999), victim, kill iteration (1..3) and delay into it (0..30 ms). Sets the
# caller's coll count victim kiter kdelay line (bash's dynamic scope: its locals when it
# declared them) and TRIAL_ARGS.
trial_draw() {
    coll=${TRIAL_COLLS[RANDOM % ${#TRIAL_COLLS[@]}]}
    count=$(( (RANDOM % 6 == 0) ? 1 + RANDOM % 64 : 1000 + (RANDOM * 8 + RANDOM % 8) % 400000 ))
    victim=$((RANDOM % $2))
    kiter=$((1 + RANDOM % 3))
    kdelay=$((RANDOM % 30000))
    TRIAL_ARGS=(loop --coll "$coll" --count "$count" --victim "$victim" --kill-iter "$kiter"
        --kill-delay-us "$kdelay" --max-seconds 25)
    line="trial $1: $coll count=$count victim=$victim iter=$kiter delay=${kdelay}us:"
}

# trial_judge R RC ST T NAMED : survivor R exited with RC after reporting status ST at wall
# time T (ms; empty: it printed no RESULT, counted in nbad), NAMED=1 when its error names
# the victim. Records the latency after the caller's kill_t in LAT, appends
# "rR=STATUS/Nms" to the caller's line, and clears its ok (counting nunnamed or nslow)
# when the error does not name the victim or came after LIMIT_MS. Returns 1 when there was
# no RESULT (nothing more to check), else 0.
trial_judge() {
    local r=$1 rc=$2 st=$3 t=$4 named=$5 dt
    if [ -z "$t" ]; then
        line+=" r$r=no-RESULT(exit $rc)"
        nbad=$((nbad + 1)); ok=0
        return 1
    fi
    dt=$((t - kill_t))
    [ "$dt" -lt 0 ] && dt=0
    LAT+=("$dt")
    line+=" r$r=${st#GS_ERR_}/${dt}ms"
    if [ "$named" != 1 ]; then
        line+="(unnamed)"
        nunnamed=$((nunnamed + 1)); ok=0
    fi
    if [ "$dt" -gt "$LIMIT_MS" ]; then
        nslow=$((nslow + 1)); ok=0
    fi
    return 0
}

# trial_latency : lat_max and lat_median of LAT (0 when empty).
trial_latency() {
    lat_max=0 lat_median=0
    if [ ${#LAT[@]} -gt 0 ]; then
        read -r lat_max lat_median < <(printf '%s\n' "${LAT[@]}" | sort -n |
            awk '{a[NR]=$1} END {print a[NR], a[int((NR+1)/2)]}')
    fi
}

# trial_summary TITLE [LABEL VALUE]... : a blank line, TITLE, then one row per count, and
# the caller's own rows after them.
trial_summary() {
    local title=$1
    shift
    trial_latency
    echo
    echo "$title"
    printf '  %-28s %s\n' "kill -9 trials" "$ntrials" \
        "survivors checked" "$nsurv" \
        "detection latency max" "${lat_max} ms (limit $LIMIT_MS)" \
        "detection latency median" "${lat_median} ms" \
        "over the limit" "$nslow" \
        "error not naming the victim" "$nunnamed" \
        "hangs" "$nhang" \
        "crashes" "$ncrash" \
        "other failures" "$nbad" \
        "$@"
}

# trial_failures : prints how many survivors or trials failed (0: all passed).
trial_failures() {
    echo $((nslow + nunnamed + nhang + ncrash + nbad))
}
