#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# run_probe_lab.sh: the start-up link probe (GS_TUNE=auto across hosts) on
# shaped links. Builds a netlab of NHOSTS hosts whose links tbf shapes to
# RATE, then runs RUNS short coll_check jobs (one all-reduce of one element)
# with RANKS_PER_HOST ranks per host, one after another. Each rank logs the
# probe's line at GS_DEBUG=INFO (ALGO): its time and the fitted link rate,
# the same on every rank. Passes when every job passes, every rank probed,
# the median over the runs of the slowest rank's probe time is at most
# --max-ms, and the median fitted inter-host bandwidth is between --min-frac
# and --max-frac of RATE (converted to MB/s). Prints one line per run: the
# probe's time (slowest rank), alpha, the link's MB/s and the sizes it chose.
# The lab uses its own namespace prefix (gsprobe<PID>).
#
# usage: run_probe_lab.sh COLL_CHECK [--hosts NH] [--rph RPH] [--rate R] [--runs K]
#                         [--max-ms MS] [--min-frac F] [--max-frac F] [--timeout S]
#   defaults: 2 hosts, 2 ranks per host, 100mbit, 3 runs, 800 ms, 0.5, 1.3, 60 s per job
#   R is a tc rate with a unit: kbit, mbit or gbit. GSTEST_TIMEOUT_MULT (sanitizer builds)
#   multiplies the bound on the probe's time.
# Exit status: 0 pass, 1 fail, 77 skip (not root, no netns/bridge/tbf), 2 usage.
# shellcheck source-path=SCRIPTDIR disable=SC2034 # LAB_* settings are read by lib_lab.sh
set -u

# shellcheck source=lib_script.sh
. "$(dirname "$0")/lib_script.sh"
[ $# -ge 1 ] || lab_header_usage
case "$1" in -h | --help) lab_header_usage ;; esac
PROG=$1
shift
[ -x "$PROG" ] || { echo "run_probe_lab: $PROG is not executable" >&2; exit 2; }
NH=2
RPH=2
RATE=100mbit
RUNS=3
MAX_MS=800
MIN_FRAC=0.5
MAX_FRAC=1.3
LAB_TIMEOUT=60
while [ $# -gt 0 ]; do
    case "$1" in
    --runs) RUNS=$2; shift 2 ;;
    --max-ms) MAX_MS=$2; shift 2 ;;
    --min-frac) MIN_FRAC=$2; shift 2 ;;
    --max-frac) MAX_FRAC=$2; shift 2 ;;
    *) lab_opt "--hosts --rph --rate --timeout" "$@" || lab_unknown run_probe_lab "$1"; shift 2 ;;
    esac
done
lab_whole "$NH" "$RPH" "$RUNS" "$MAX_MS" "$LAB_TIMEOUT" ||
    { echo "run_probe_lab: '$LAB_NAN' is not a whole number" >&2; exit 2; }
if [ "$NH" -lt 2 ] || [ "$RUNS" -lt 1 ] || [ "$RUNS" -gt 50 ]; then
    echo "run_probe_lab: needs 2 hosts or more and 1 to 50 runs" >&2
    exit 2
fi
MAX_MS=$((MAX_MS * ${GSTEST_TIMEOUT_MULT:-1}))
# The tc rate in MB/s (10^6 bytes), what the probe's line reports.
RATE_MBS=$(echo "$RATE" | awk '
    /^[0-9.]+kbit$/ { print $0 / 8e3; exit } /^[0-9.]+mbit$/ { print $0 / 8; exit }
    /^[0-9.]+gbit$/ { print $0 * 1e3 / 8; exit } { exit 1 }') ||
    { echo "run_probe_lab: rate '$RATE' is not N{kbit,mbit,gbit}" >&2; exit 2; }

LAB_PREFIX=gsprobe$$
# shellcheck source=lib_lab.sh
. "$(dirname "$0")/lib_lab.sh"
lab_coll_env ALGO GS_TCP_NSOCKS
LAB_ENV+=(GS_TUNE=auto)

lab_up "$NH" --rate "$RATE"
WORLD=$((NH * RPH))
echo "run_probe_lab: $RUNS jobs of $WORLD ranks on $NH hosts ($RPH per host), links at $RATE" \
    "($RATE_MBS MB/s), GS_TUNE=auto"

# probe_field RANK WHAT: from the rank's probe line, its time (ms), alpha (us), the
# network link (MB/s), the intra-host values, or the sizes it chose (from "messages of").
probe_field() {
    local line
    line=$(grep -m1 'GS_TUNE=probe over' "$LAB_TMP/rank.$1.log") || return 1
    case "$2" in
    ms) sed -E 's/.* ranks in ([0-9]+) ms:.*/\1/' <<<"$line" ;;
    alpha) sed -E 's/.*: alpha ([0-9.]+) us,.*/\1/' <<<"$line" ;;
    link) sed -E 's/.* us, link ([0-9.]+) MB\/s, reduce.*/\1/' <<<"$line" ;;
    intra) sed -E 's/.*(intra-host alpha [0-9.]+ us, link [0-9.]+ MB\/s).*/\1/' <<<"$line" ;;
    sizes) grep -o 'messages of .*' <<<"$line" || echo "(no sizes logged)" ;;
    esac
}

median() { sort -g | awk '{ v[NR] = $1 } END { if (NR) print v[int((NR + 1) / 2)] }'; }

OK=1
MS_ALL=()
LINK_ALL=()
for ((run = 1; run <= RUNS; run++)); do
    lab_coll_run run_probe_lab "" "$NH" "$RPH" "$PROG" --colls allreduce --dtypes f32 \
        --ops sum --variants blk --counts 1 --iters 1 >"$LAB_TMP/run.out"
    if [ "$LAB_OK" -ne 1 ]; then
        cat "$LAB_TMP/run.out"
        lab_verdict run_probe_lab PASS # prints the logs and exits 1
    fi
    slowest=0
    for ((r = 0; r < WORLD; r++)); do
        ms=$(probe_field "$r" ms) || {
            echo "run_probe_lab: run $run: rank $r logged no probe line"
            OK=0
            continue
        }
        [ "$ms" -gt "$slowest" ] && slowest=$ms
    done
    link=$(probe_field 0 link)
    MS_ALL+=("$slowest")
    LINK_ALL+=("${link:-0}")
    echo "run_probe_lab: run $run: probe $slowest ms (slowest rank), alpha $(probe_field 0 alpha) us," \
        "link ${link:-?} MB/s, $(probe_field 0 intra); $(probe_field 0 sizes)"
done
[ "$OK" -eq 1 ] || lab_verdict run_probe_lab PASS
MS_MED=$(printf '%s\n' "${MS_ALL[@]}" | median)
LINK_MED=$(printf '%s\n' "${LINK_ALL[@]}" | median)
echo "run_probe_lab: median probe time $MS_MED ms (bound $MAX_MS ms), median link $LINK_MED MB/s" \
    "($(awk -v l="$LINK_MED" -v r="$RATE_MBS" 'BEGIN { printf "%.2f", l / r }') of $RATE_MBS MB/s," \
    "bounds $MIN_FRAC to $MAX_FRAC)"
if [ "$MS_MED" -gt "$MAX_MS" ]; then
    echo "run_probe_lab: the probe took $MS_MED ms, over the bound of $MAX_MS ms"
    LAB_OK=0
fi
if ! awk -v l="$LINK_MED" -v r="$RATE_MBS" -v lo="$MIN_FRAC" -v hi="$MAX_FRAC" \
    'BEGIN { exit !(l >= lo * r && l <= hi * r) }'; then
    echo "run_probe_lab: the fitted link, $LINK_MED MB/s, is not within $MIN_FRAC to $MAX_FRAC" \
        "of the tc rate, $RATE_MBS MB/s"
    LAB_OK=0
fi
lab_verdict run_probe_lab "PASS (the probe took $MS_MED ms and fitted $LINK_MED MB/s on $RATE links)"
