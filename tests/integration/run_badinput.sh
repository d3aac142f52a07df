#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# run_badinput.sh: start-up misuse that needs hand-started ranks, run with
# "badinput_check init". Every process must fail gs_comm_init with a clear
# error within GS_TIMEOUT_MS (5000) + 2.5 s, never hang. Cases:
#   worldsize   rank 0 says WORLD_SIZE=2, rank 1 says 3 (and the reverse):
#               GS_ERR_MISMATCH expected (GS_ERR_TIMEOUT accepted for one side)
#   duprank     world size 2 with ranks 1, 1 again and 0: the extra rank
#               fails (GS_ERR_MISMATCH, "rank taken twice", or GS_ERR_TIMEOUT
#               when it arrives after the rendezvous closed), nobody hangs
#   jobid       ranks with different GS_JOB_ID: both fail, nobody hangs
#   api         api_badinput_check (next to badinput_check) on one rank, given the
#               names of every GS_API function of include/gradsync/*.h: each needs a
#               bad-input row (NULL handles and pointers, bad enums, overflowing counts,
#               ranks out of range: GS_ERR_INVALID_ARG or GS_ERR_INVALID_USAGE with a
#               sentence, no crash); a function without a row fails the case
# usage: run_badinput.sh PATH/TO/badinput_check [CASE...]   (KEEP=1 keeps the logs)
# Prints "N passed, M failed"; exit status 1 when any case failed.
set -u

PROG=${1:?usage: run_badinput.sh PATH/TO/badinput_check [worldsize|duprank|jobid|api]...}
shift
CASES=${*:-worldsize duprank jobid}
# shellcheck source-path=SCRIPTDIR source=lib_procs.sh
. "$(dirname "$0")/lib_procs.sh"

LIMIT_MS=7500

# check_inits NAME MIN_MISMATCH MIN_FAILED LOGS... : every log has an INIT line
# within LIMIT_MS and exit status 0 (its --expect list accepted it); at least
# MIN_MISMATCH of them report GS_ERR_MISMATCH and MIN_FAILED any error. Uses RCS[log].
check_inits() {
    local name=$1 min=$2 minfail=$3 ok=1 nmis=0 nfail=0 log st ms
    shift 3
    for log in "$@"; do
        st=$(field "$log" INIT status)
        ms=$(field "$log" INIT ms)
        echo "  $name: $(basename "$log" .log): ${st:-no INIT line} after ${ms:-?} ms" \
            "(exit status ${RCS[$log]})"
        [ "$st" = GS_ERR_MISMATCH ] && nmis=$((nmis + 1))
        [ -n "$st" ] && [ "$st" != GS_OK ] && nfail=$((nfail + 1))
        if [ -z "$ms" ] || [ "$ms" -gt "$LIMIT_MS" ] || [ "${RCS[$log]}" -ne 0 ]; then
            ok=0
        fi
    done
    if [ "$nmis" -lt "$min" ]; then
        echo "  $name: $nmis process(es) reported GS_ERR_MISMATCH, expected at least $min"
        ok=0
    fi
    if [ "$nfail" -lt "$minfail" ]; then
        echo "  $name: $nfail process(es) failed init, expected at least $minfail"
        ok=0
    fi
    if [ "$ok" -eq 1 ]; then
        pass "$name"
    else
        fail "$name"
        dump_logs "$name"
    fi
}

declare -A RCS

# run_job NAME EXPECT SPEC... : SPEC is RANK:WORLD[:VAR=value]; waits for all.
run_job() {
    local name=$1 expect=$2 port i=0 spec r w pids=() logs=()
    shift 2
    port=$(free_port)
    for spec in "$@"; do
        IFS=: read -r r w extra <<<"$spec"
        EXTRA_ENV=()
        [ -n "${extra:-}" ] && EXTRA_ENV=("$extra")
        logs[i]="$TMP/$name.$i.log"
        start_rank "$r" "$w" "$port" 5000 "${logs[i]}" init --expect "$expect"
        pids[i]=$LASTPID
        i=$((i + 1))
    done
    EXTRA_ENV=()
    for ((i = 0; i < ${#pids[@]}; i++)); do
        wait_rank "${pids[i]}" 30
        RCS[${logs[i]}]=$RC
    done
    JOB_LOGS=("${logs[@]}")
}

for c in $CASES; do
    case "$c" in
    worldsize)
        run_job worldsize MISMATCH,TIMEOUT 0:2 1:3
        check_inits worldsize 1 2 "${JOB_LOGS[@]}"
        run_job worldsize_rev MISMATCH,TIMEOUT 0:3 1:2
        check_inits worldsize_rev 1 2 "${JOB_LOGS[@]}"
        ;;
    duprank)
        # Both rank 1s start first and retry until rank 0 listens, so they
        # race for the slot; the loser may also arrive after the job formed
        # and the rendezvous closed (then GS_ERR_TIMEOUT is the right answer).
        run_job duprank ok,MISMATCH,TIMEOUT,PEER_FAILED 1:2 1:2 0:2
        check_inits duprank 0 1 "${JOB_LOGS[@]}"
        ;;
    jobid)
        run_job jobid MISMATCH,PROTOCOL,TIMEOUT,VERSION_MISMATCH,PEER_FAILED \
            0:2:GS_JOB_ID=job-a 1:2:GS_JOB_ID=job-b
        check_inits jobid 0 2 "${JOB_LOGS[@]}"
        ;;
    api)
        # The public functions, from the headers: every "GS_API <type> gs_name(".
        hdrs="$(dirname "$0")/../../include/gradsync"
        names="$TMP/api.names"
        for h in "$hdrs"/*.h; do
            tr '\n' ' ' <"$h" | grep -o 'GS_API[^;{]*(' | grep -o 'gs_[a-z0-9_]*($' | tr -d '('
        done | sort -u >"$names"
        echo "  api: $(wc -l <"$names") public functions in $hdrs"
        prog_save=$PROG
        PROG="$(dirname "$PROG")/api_badinput_check"
        start_rank 0 1 "$(free_port)" 10000 "$TMP/api.0.log" --names "$names"
        PROG=$prog_save
        PROG_API_PID=$LASTPID
        wait_rank "$PROG_API_PID" 50
        grep -E '^(FAIL|  FAIL|MISSING|SKIP|NOTE|  NOTE|api_badinput_check:)' "$TMP/api.0.log"
        if [ "$RC" -eq 0 ] && grep -q ' 0 failed, .* 0 missing' "$TMP/api.0.log"; then
            pass "api: every public function refuses bad input cleanly"
        else
            fail "api: exit status $RC"
            tail -n 20 "$TMP/api.0.log"
        fi
        ;;
    *) fail "unknown case $c" ;;
    esac
done
echo "run_badinput: $PASS passed, $FAIL failed"
[ "$FAIL" -eq 0 ]
