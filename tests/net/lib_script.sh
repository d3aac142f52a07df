# SPDX-License-Identifier: Apache-2.0
# shellcheck shell=bash disable=SC2034 # the variables set here are the caller's
#
# lib_script.sh: the command-line and reporting pieces that the lab scripts
# (tests/net/run_coll.sh, run_hier.sh, test_mpi_lab.sh) and benchmarks
# (bench/net/bench_net.sh, bench_hier.sh) share. Sourcing it only defines
# functions, so a script sources it first, before it reads its arguments;
# the functions marked (lab) use lib_lab.sh's state and are called after
# lib_lab.sh is sourced.
#
#   lab_opt ALLOWED OPT VALUE       a common option, when OPT is in ALLOWED
#   lab_whole VALUE...              every VALUE a whole number (else LAB_NAN)
#   lab_header_usage                the script's "# usage:" header, exit 2
#   lab_unknown WHO ARG             "WHO: unknown argument", then the header usage
#   lab_build_dir WHO ARGS...       a benchmark's BUILD_DIR word as an absolute path
#   lab_coll_args WHO ARGS...       run_coll.sh's COLL_CHECK NHOSTS RANKS_PER_HOST
#   lab_coll_env SUBSYS VAR...      LAB_ENV of a coll_check job
#   lab_coll_run WHO CHECK NH RPH PROG ARGS...  (lab) a timed coll_check job, checked
#   lab_verdict WHO PASS_TEXT       (lab) FAIL lines, then exit 1 (FAIL) or 0
#   lab_bench_launch LOG NH RPH PROG ARGS...    (lab) one benchmark job
#   lab_bench_done WHO ROUND LABEL RC CSV LOG T0  one benchmark job's report

# lab_opt ALLOWED OPT VALUE: when OPT is one of the space-separated ALLOWED
# options, sets its variable to VALUE and returns 0 (the caller shifts 2);
# returns 1 otherwise. The options and what they set:
#   --hosts NH, --rph RPH, --place LAB_PLACE, --rate RATE, --timeout LAB_TIMEOUT,
#   -b MINB, -e MAXB, -w WARMUP, -i ITERS, --rounds ROUNDS, --out OUTDIR.
# Call it with all the caller's words ("$@"), so that an option without its
# value stops the script (set -u) as an assignment of $2 would.
lab_opt() {
    case " $1 " in *" $2 "*) ;; *) return 1 ;; esac
    case "$2" in
    --hosts) NH=$3 ;;
    --rph) RPH=$3 ;;
    --place) LAB_PLACE=$3 ;;
    --rate) RATE=$3 ;;
    --timeout) LAB_TIMEOUT=$3 ;;
    -b) MINB=$3 ;;
    -e) MAXB=$3 ;;
    -w) WARMUP=$3 ;;
    -i) ITERS=$3 ;;
    --rounds) ROUNDS=$3 ;;
    --out) OUTDIR=$3 ;;
    *) return 1 ;;
    esac
}

# lab_whole VALUE...: 0 when every VALUE is a whole number; otherwise sets
# LAB_NAN to the first that is not and returns 1.
lab_whole() {
    local v
    for v in "$@"; do
        case "$v" in '' | *[!0-9]*) LAB_NAN=$v; return 1 ;; esac
    done
}

# lab_header_usage: the script's usage, the "# usage:" block of its header
# comment, on stderr; exits 2.
lab_header_usage() {
    sed -n '/^# usage:/,/^$/s/^#//p' "$0" | sed '/^$/d' >&2
    exit 2
}

lab_unknown() {
    echo "$1: unknown argument '$2'" >&2
    lab_header_usage
}

# lab_build_dir WHO BUILD_DIR...: prints BUILD_DIR as an absolute path (use
# it as BUILD=$(lab_build_dir NAME "$@") || exit 2); the header usage for no
# word, -h or --help, and an error for a folder that does not exist.
lab_build_dir() {
    [ $# -ge 2 ] || lab_header_usage
    case "$2" in -h | --help) lab_header_usage ;; esac
    (cd "$2" 2>/dev/null && pwd) || { echo "$1: no build folder '$2'" >&2; exit 2; }
}

# lab_coll_args WHO COLL_CHECK NHOSTS RANKS_PER_HOST ...: sets PROG, NH and
# RPH (the caller then shifts 3); returns 2 when the words are missing or
# not numbers (the caller prints its usage), and exits 2 when COLL_CHECK is
# not executable.
lab_coll_args() {
    [ $# -ge 4 ] || return 2
    PROG=$2 NH=$3 RPH=$4
    lab_whole "$NH" "$RPH" || return 2
    [ -x "$PROG" ] || { echo "$1: $PROG is not executable" >&2; exit 2; }
}

# lab_coll_env SUBSYS VAR...: LAB_ENV for coll_check ranks: GS_DEBUG=INFO
# for the SUBSYS subsystems, GS_TIMEOUT_MS (default 30000), and every VAR
# that is set in this environment.
lab_coll_env() {
    local v
    LAB_ENV=(GS_DEBUG=INFO "GS_DEBUG_SUBSYS=$1" "GS_TIMEOUT_MS=${GS_TIMEOUT_MS:-30000}")
    shift
    for v in "$@"; do
        [ -n "${!v:-}" ] && LAB_ENV+=("$v=${!v}")
    done
}

# lab_coll_run WHO CHECK NHOSTS RPH PROG ARGS...: (lab) runs the job with
# lab_launch and judges it: every rank exits 0 and, when CHECK is not empty,
# `CHECK RANK` returns 0 for every rank (it prints why not), and rank 0's
# "N passed, M failed" line says 0 failed. Prints one line per problem and
# rank 0's summary with the job's time; sets LAB_OK to 1 when all held.
lab_coll_run() {
    local who=$1 check=$2 r t0 summary
    shift 2
    t0=$(lab_now_ms)
    lab_launch "$@"
    LAB_DT=$(($(lab_now_ms) - t0))
    LAB_OK=1
    for ((r = 0; r < ${#LAB_PID[@]}; r++)); do
        if [ "${RCS[r]}" -ne 0 ]; then
            echo "$who: rank $r (host ${LAB_HOST[r]}) exited ${RCS[r]}"
            LAB_OK=0
        fi
        if [ -n "$check" ] && ! "$check" "$r"; then
            LAB_OK=0
        fi
    done
    summary=$(grep -m1 -E ' [0-9]+ passed, [0-9]+ failed' "$LAB_TMP/rank.0.log")
    echo "$who: rank 0: ${summary:-no summary line} (${LAB_DT} ms)"
    case "$summary" in *" 0 failed"*) ;; *) LAB_OK=0 ;; esac
}

# lab_verdict WHO PASS_TEXT: (lab) the ranks' FAIL lines; then, unless
# LAB_OK is 1, the tail of every rank's log, "WHO: FAIL" and exit 1;
# otherwise "WHO: PASS_TEXT" and exit 0.
lab_verdict() {
    grep -h "FAIL " "$LAB_TMP"/rank.*.log | head -n 20
    if [ "$LAB_OK" -ne 1 ]; then
        lab_dump 20
        echo "$1: FAIL"
        exit 1
    fi
    echo "$1: $2"
    exit 0
}

# lab_bench_launch LOG NHOSTS RPH PROG ARGS...: (lab) lab_launch, then every
# rank's log into LOG; returns LAB_RC.
lab_bench_launch() {
    local log=$1
    shift
    lab_launch "$@"
    cat "$LAB_TMP"/rank.*.log >"$log"
    return "$LAB_RC"
}

# lab_bench_done WHO ROUND LABEL RC CSV LOG T0: on stderr, the run's time
# since T0 ($SECONDS) when RC is 0; otherwise the failure with the tail of
# LOG, and CSV becomes CSV.failed (left out of the tables).
lab_bench_done() {
    if [ "$4" -ne 0 ]; then
        echo "$1: round $2 $3 failed (exit $4), see $6" >&2
        tail -n 5 "$6" >&2
        mv -f "$5" "$5.failed" 2>/dev/null
    else
        echo "round $2 $3: $((SECONDS - $7)) s" >&2
    fi
}
