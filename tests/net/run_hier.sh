#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# run_hier.sh: host detection and the hierarchical all-reduce on real
# (namespaced) hosts. Builds a netlab of NHOSTS hosts, runs coll_check with
# RANKS_PER_HOST ranks in each host's namespace, and passes when every rank
# exits 0, rank 0 reports "0 failed", every rank's INIT line reports NHOSTS
# hosts with RANKS_PER_HOST local ranks (the host ids exchanged at bootstrap
# tell namespaces apart), and, with --expect-algo NAME, rank 0's cost model
# chose NAME for some all-reduce (GS_DEBUG=INFO ALGO lines). GS_ALGO,
# GS_ALGO_BETA_MBPS, GS_SLICE_BYTES and GS_TCP_NSOCKS pass through to the
# ranks. The lab uses its own namespace prefix (gshier<PID>).
#
# usage: run_hier.sh COLL_CHECK NHOSTS RANKS_PER_HOST [--place block|cyclic]
#                    [--rate R] [--expect-algo NAME] [--timeout S] [-- COLL_CHECK_ARGS...]
# Exit status: 0 pass, 1 fail, 77 skip (not root, no netns/bridge/tbf), 2 usage.
# shellcheck source-path=SCRIPTDIR disable=SC2034 # LAB_* settings are read by lib_lab.sh
set -u

usage() {
    echo "usage: run_hier.sh COLL_CHECK NHOSTS RANKS_PER_HOST [--place block|cyclic]" \
        "[--rate R] [--expect-algo NAME] [--timeout S] [-- ARGS...]" >&2
    exit 2
}
[ $# -ge 3 ] || usage
PROG=$1 NH=$2 RPH=$3
shift 3
for v in "$NH" "$RPH"; do
    case "$v" in '' | *[!0-9]*) usage ;; esac
done
[ -x "$PROG" ] || { echo "run_hier: $PROG is not executable" >&2; exit 2; }
RATE_OPTS=()
EXPECT=
LAB_TIMEOUT=180
while [ $# -gt 0 ]; do
    case "$1" in
    --place) LAB_PLACE=$2; shift 2 ;;
    --rate) RATE_OPTS=(--rate "$2"); shift 2 ;;
    --expect-algo) EXPECT=$2; shift 2 ;;
    --timeout) LAB_TIMEOUT=$2; shift 2 ;;
    --) shift; break ;;
    *) usage ;;
    esac
done

LAB_PREFIX=gshier$$
# shellcheck source=lib_lab.sh
. "$(dirname "$0")/lib_lab.sh"
LAB_ENV=(GS_DEBUG=INFO "GS_DEBUG_SUBSYS=INIT,ALGO" "GS_TIMEOUT_MS=${GS_TIMEOUT_MS:-30000}")
for v in GS_SLICE_BYTES GS_TCP_NSOCKS GS_ALGO GS_ALGO_BETA_MBPS; do
    [ -n "${!v:-}" ] && LAB_ENV+=("$v=${!v}")
done

lab_up "$NH" ${RATE_OPTS[@]+"${RATE_OPTS[@]}"}
WORLD=$((NH * RPH))
echo "run_hier: $WORLD ranks on $NH hosts ($RPH per host, ${LAB_PLACE:-block} placement," \
    "GS_ALGO=${GS_ALGO:-auto}): $(basename "$PROG") $*"
t0=$(lab_now_ms)
lab_launch "$NH" "$RPH" "$PROG" "$@"
dt=$(($(lab_now_ms) - t0))

ok=1
for ((r = 0; r < WORLD; r++)); do
    if [ "${RCS[r]}" -ne 0 ]; then
        echo "run_hier: rank $r (host ${LAB_HOST[r]}) exited ${RCS[r]}"
        ok=0
    fi
    if ! grep -q "rank $r: $NH host(s), local rank [0-9]* of $RPH on this host" \
        "$LAB_TMP/rank.$r.log"; then
        echo "run_hier: rank $r did not detect $NH hosts of $RPH ranks:" \
            "$(grep -m1 'host(s)' "$LAB_TMP/rank.$r.log")"
        ok=0
    fi
done
summary=$(grep -m1 -E ' [0-9]+ passed, [0-9]+ failed' "$LAB_TMP/rank.0.log")
echo "run_hier: rank 0: ${summary:-no summary line} (${dt} ms)"
case "$summary" in *" 0 failed"*) ;; *) ok=0 ;; esac
if [ -n "$EXPECT" ]; then
    if grep -m1 -E "allreduce of [0-9]+ bytes .*: $EXPECT \(cost model" "$LAB_TMP/rank.0.log"; then
        echo "run_hier: the cost model chose $EXPECT"
    else
        echo "run_hier: the cost model never chose $EXPECT; its all-reduce choices:"
        grep -E "allreduce of" "$LAB_TMP/rank.0.log" | head -n 10
        ok=0
    fi
fi
grep -h "FAIL " "$LAB_TMP"/rank.*.log | head -n 20
if [ "$ok" -ne 1 ]; then
    lab_dump 20
    echo "run_hier: FAIL"
    exit 1
fi
echo "run_hier: PASS"
exit 0
