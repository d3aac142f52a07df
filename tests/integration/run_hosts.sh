#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# run_hosts.sh: run a program under gsrun with every rank pretending to be on
# a host of its own choosing (GS_HOST_ID per rank), so that host-aware
# routing and the hierarchical all-reduce can be tested on one machine.
# HOSTS is a comma list with one host name per rank: "a,b,a,b" puts ranks 0
# and 2 on host a, 1 and 3 on host b (the world size is its length).
# With --expect-algo NAME, the ranks log the algorithm choices (GS_DEBUG=INFO,
# subsystems ALGO and INIT) and the run passes only if the cost model chose
# NAME for some all-reduce on rank 0; the INIT line of every rank must also
# report the number of distinct names in HOSTS as its host count.
# --expect-log RE / --reject-log RE (repeatable, with the same logging): some
# line of rank 0's log must match RE / no line may.
#
# usage: run_hosts.sh GSRUN HOSTS TIMEOUT_S [--expect-algo NAME] [--expect-log RE]...
#                     [--reject-log RE]... PROG ARGS...
# Exit status: the program's (via gsrun), 1 when an expectation fails, 2 usage.
# (Internally, each rank re-enters this script with GS_TEST_HOSTS set.)
set -u

if [ -n "${GS_TEST_HOSTS:-}" ]; then
    # Per-rank mode: pick this rank's host name, then become the program.
    IFS=, read -r -a names <<<"$GS_TEST_HOSTS"
    rank=${GS_RANK:?run_hosts: GS_RANK is not set (not under gsrun?)}
    export GS_HOST_ID="${names[rank]:?run_hosts: no host name for rank $rank}"
    unset GS_TEST_HOSTS
    exec "$@"
fi

if [ $# -lt 4 ]; then
    echo "usage: run_hosts.sh GSRUN HOSTS TIMEOUT_S [--expect-algo NAME] PROG ARGS..." >&2
    exit 2
fi
GSRUN=$1 HOSTS=$2 TIMEOUT=$3
shift 3
EXPECT= LOGS=0
WANT=() UNWANTED=()
while [ $# -ge 2 ]; do
    case $1 in
    --expect-algo) EXPECT=$2 LOGS=1 ;;
    --expect-log) WANT+=("$2") LOGS=1 ;;
    --reject-log) UNWANTED+=("$2") LOGS=1 ;;
    *) break ;;
    esac
    shift 2
done
IFS=, read -r -a names <<<"$HOSTS"
world=${#names[@]}
nhosts=$(printf '%s\n' "${names[@]}" | sort -u | wc -l)
tmp=$(mktemp -d "${TMPDIR:-/tmp}/gs_hosts.XXXXXX")
trap 'rm -rf "$tmp"' EXIT

export GS_TEST_HOSTS=$HOSTS
if [ $LOGS -eq 1 ]; then
    export GS_DEBUG=INFO GS_DEBUG_SUBSYS=ALGO,INIT GS_DEBUG_FILE="$tmp/log.%r"
fi
echo "run_hosts: $world ranks on $nhosts hosts ($HOSTS): $(basename "$1") ${*:2}"
"$GSRUN" -n "$world" --timeout "$TIMEOUT" "$0" "$@"
rc=$?
[ $rc -eq 0 ] || exit $rc
[ $LOGS -eq 1 ] || exit 0

for ((r = 0; r < world; r++)); do
    if ! grep -q "rank $r: $nhosts host(s), local rank" "$tmp/log.$r"; then
        echo "run_hosts: rank $r did not report $nhosts hosts:"
        grep -m3 "host(s)" "$tmp/log.$r"
        exit 1
    fi
done
for re in "${WANT[@]}"; do
    if ! grep -m3 -E "$re" "$tmp/log.0"; then
        echo "run_hosts: no line of rank 0's log matches '$re'; its choices:"
        grep -E " of [0-9]+ bytes" "$tmp/log.0" | head -n 10
        exit 1
    fi
done
for re in "${UNWANTED[@]}"; do
    if grep -m3 -E "$re" "$tmp/log.0"; then
        echo "run_hosts: rank 0's log has the lines above, matching '$re'"
        exit 1
    fi
done
if [ -n "$EXPECT" ]; then
    if ! grep -E "allreduce of [0-9]+ bytes .*: $EXPECT \(cost model" "$tmp/log.0"; then
        echo "run_hosts: the cost model never chose $EXPECT for an all-reduce; its choices:"
        grep -E "allreduce of" "$tmp/log.0" | head -n 10
        exit 1
    fi
fi
echo "run_hosts: PASS${EXPECT:+ (the cost model chose $EXPECT)}"
exit 0
