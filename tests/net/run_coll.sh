#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# run_coll.sh: coll_check with its ranks spread over the hosts of a fresh
# netlab (one network namespace per host, on a bridge). Passes when every
# rank exits 0 within the deadline, rank 0 reports "0 failed", and every
# rank listens on its own host's lab address (checked from the GS_DEBUG=INFO
# NET line), which shows that gradsync picked the namespace's interface.
#
# usage: run_coll.sh COLL_CHECK NHOSTS RANKS_PER_HOST [--place block|cyclic]
#                    [--no-ifname] [--rate R] [--timeout S] [-- COLL_CHECK_ARGS...]
# Exit status: 0 pass, 1 fail, 77 skip (not root, no netns/bridge/tbf), 2 usage.
# shellcheck source-path=SCRIPTDIR disable=SC2034 # LAB_* settings are read by lib_lab.sh
set -u

usage() {
    echo "usage: run_coll.sh COLL_CHECK NHOSTS RANKS_PER_HOST [--place block|cyclic]" \
        "[--no-ifname] [--rate R] [--timeout S] [-- ARGS...]" >&2
    exit 2
}
[ $# -ge 3 ] || usage
PROG=$1 NH=$2 RPH=$3
shift 3
for v in "$NH" "$RPH"; do
    case "$v" in ''|*[!0-9]*) usage ;; esac
done
[ -x "$PROG" ] || { echo "run_coll: $PROG is not executable" >&2; exit 2; }
RATE_OPTS=()
LAB_TIMEOUT=180
while [ $# -gt 0 ]; do
    case "$1" in
    --place) LAB_PLACE=$2; shift 2 ;;
    --no-ifname) LAB_IFNAME=0; shift ;;
    --rate) RATE_OPTS=(--rate "$2"); shift 2 ;;
    --timeout) LAB_TIMEOUT=$2; shift 2 ;;
    --) shift; break ;;
    *) usage ;;
    esac
done

# shellcheck source=lib_lab.sh
. "$(dirname "$0")/lib_lab.sh"
LAB_ENV=(GS_DEBUG=INFO GS_DEBUG_SUBSYS=NET "GS_TIMEOUT_MS=${GS_TIMEOUT_MS:-30000}")
for v in GS_SLICE_BYTES GS_TCP_NSOCKS GS_ALGO; do
    [ -n "${!v:-}" ] && LAB_ENV+=("$v=${!v}")
done

lab_up "$NH" ${RATE_OPTS[@]+"${RATE_OPTS[@]}"}
WORLD=$((NH * RPH))
echo "run_coll: $WORLD ranks on $NH hosts ($RPH per host, ${LAB_PLACE:-block} placement," \
    "GS_SOCKET_IFNAME $([ "${LAB_IFNAME:-1}" = 1 ] && echo set || echo unset)): $(basename "$PROG") $*"
t0=$(lab_now_ms)
lab_launch "$NH" "$RPH" "$PROG" "$@"
dt=$(($(lab_now_ms) - t0))

ok=1
for ((r = 0; r < WORLD; r++)); do
    if [ "${RCS[r]}" -ne 0 ]; then
        echo "run_coll: rank $r (host ${LAB_HOST[r]}) exited ${RCS[r]}"
        ok=0
    fi
done
summary=$(grep -m1 -E ' [0-9]+ passed, [0-9]+ failed' "$LAB_TMP/rank.0.log")
echo "run_coll: rank 0: ${summary:-no summary line} (${dt} ms)"
case "$summary" in *" 0 failed"*) ;; *) ok=0 ;; esac
lab_check_listen "$WORLD" || ok=0
grep -h "FAIL " "$LAB_TMP"/rank.*.log | head -n 20
if [ "$ok" -ne 1 ]; then
    lab_dump 20
    echo "run_coll: FAIL"
    exit 1
fi
echo "run_coll: PASS (every rank listened on its own host's address)"
exit 0
