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
# shellcheck source=lib_script.sh
. "$(dirname "$0")/lib_script.sh"
lab_coll_args run_coll "$@" || usage
shift 3
RATE=
LAB_TIMEOUT=180
while [ $# -gt 0 ]; do
    case "$1" in
    --no-ifname) LAB_IFNAME=0; shift ;;
    --) shift; break ;;
    *) lab_opt "--place --rate --timeout" "$@" || usage; shift 2 ;;
    esac
done

# shellcheck source=lib_lab.sh
. "$(dirname "$0")/lib_lab.sh"
lab_coll_env NET GS_SLICE_BYTES GS_TCP_NSOCKS GS_ALGO

lab_up "$NH" ${RATE:+--rate "$RATE"}
WORLD=$((NH * RPH))
echo "run_coll: $WORLD ranks on $NH hosts ($RPH per host, ${LAB_PLACE:-block} placement," \
    "GS_SOCKET_IFNAME $([ "${LAB_IFNAME:-1}" = 1 ] && echo set || echo unset)): $(basename "$PROG") $*"
lab_coll_run run_coll "" "$NH" "$RPH" "$PROG" "$@"
lab_check_listen "$WORLD" || LAB_OK=0
lab_verdict run_coll "PASS (every rank listened on its own host's address)"
