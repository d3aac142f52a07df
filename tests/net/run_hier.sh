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
# shellcheck source=lib_script.sh
. "$(dirname "$0")/lib_script.sh"
lab_coll_args run_hier "$@" || usage
shift 3
RATE=
EXPECT=
LAB_TIMEOUT=180
while [ $# -gt 0 ]; do
    case "$1" in
    --expect-algo) EXPECT=$2; shift 2 ;;
    --) shift; break ;;
    *) lab_opt "--place --rate --timeout" "$@" || usage; shift 2 ;;
    esac
done

LAB_PREFIX=gshier$$
# shellcheck source=lib_lab.sh
. "$(dirname "$0")/lib_lab.sh"
lab_coll_env INIT,ALGO GS_SLICE_BYTES GS_TCP_NSOCKS GS_ALGO GS_ALGO_BETA_MBPS GS_TUNE

# hosts_seen RANK: the rank's INIT line reports NH hosts with RPH ranks on its own.
# shellcheck disable=SC2317 # called by lab_coll_run
hosts_seen() {
    grep -q "rank $1: $NH host(s), local rank [0-9]* of $RPH on this host" \
        "$LAB_TMP/rank.$1.log" && return 0
    echo "run_hier: rank $1 did not detect $NH hosts of $RPH ranks:" \
        "$(grep -m1 'host(s)' "$LAB_TMP/rank.$1.log")"
    return 1
}

lab_up "$NH" ${RATE:+--rate "$RATE"}
WORLD=$((NH * RPH))
echo "run_hier: $WORLD ranks on $NH hosts ($RPH per host, ${LAB_PLACE:-block} placement," \
    "GS_ALGO=${GS_ALGO:-auto}): $(basename "$PROG") $*"
lab_coll_run run_hier hosts_seen "$NH" "$RPH" "$PROG" "$@"
if [ -n "$EXPECT" ]; then
    if grep -m1 -E "allreduce of [0-9]+ bytes .*: $EXPECT \(cost model" "$LAB_TMP/rank.0.log"; then
        echo "run_hier: the cost model chose $EXPECT"
    else
        echo "run_hier: the cost model never chose $EXPECT; its all-reduce choices:"
        grep -E "allreduce of" "$LAB_TMP/rank.0.log" | head -n 10
        LAB_OK=0
    fi
fi
lab_verdict run_hier PASS
