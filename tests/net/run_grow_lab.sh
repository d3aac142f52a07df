#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# run_grow_lab.sh: gs_comm_grow across hosts of the lab (4 namespaced hosts, one link each).
# The old ranks start first, one per host from host 0; the new ranks start beside them on
# the next hosts and wait for rank 0's id (a file), as tests/integration/run_grow.sh does on
# loopback. Cases: 2to4, 3to5, 4to8 (every host has an old and a new rank), and stale (a
# joiner with an older id of rank 0 is refused at once; the grow goes on with the current
# one). Each grown communicator sums every rank, carries rank 0's parameters and runs a
# barrier, on links that cross hosts.
# usage: run_grow_lab.sh GROW_CHECK [case]...
# Exit status: 0 pass, 1 fail, 77 skip (not root, no netns/bridge), 2 usage.
# shellcheck source-path=SCRIPTDIR
set -u
[ $# -ge 1 ] || { echo "usage: run_grow_lab.sh GROW_CHECK [case]..." >&2; exit 2; }
PROG=$1
shift
CASES=${*:-2to4 3to5 4to8 stale}
HERE=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=lib_lab.sh
. "$HERE/lib_lab.sh"

lab_up 4
MASTER=$(lab_addr 0)
FAILED=0
PORT=29600
fail() { echo "FAIL: $*"; FAILED=1; }

# start HOST LOG ENV... -- ARGS...: a process of grow_check in HOST's namespace, bounded.
start() {
    local h=$1 log=$2
    shift 2
    local envs=()
    while [ "$1" != "--" ]; do envs+=("$1"); shift; done
    shift
    ip netns exec "${LAB_PREFIX}h$h" timeout 120 env ${envs[@]+"${envs[@]}"} GS_TIMEOUT_MS=30000 \
        "$PROG" "$@" >"$log" 2>&1 </dev/null &
    LAB_PID+=("$!")
    PIDS+=("$!")
}

# run_case NAME OLD NEW [stale]: old ranks on hosts 0..OLD-1, new rank r on host r % 4.
run_case() {
    local name=$1 old=$2 new=$3 stale=${4:-} r pid rc ok=1 idf="$LAB_TMP/$1.id"
    local oldf="$LAB_TMP/$1.old" extra=()
    PIDS=()
    PORT=$((PORT + 1))
    [ -n "$stale" ] && extra=(--stale-idfile "$oldf")
    for ((r = 0; r < old; r++)); do
        start $((r % 4)) "$LAB_TMP/$name.$r.log" RANK="$r" WORLD_SIZE="$old" MASTER_ADDR="$MASTER" \
            MASTER_PORT="$PORT" -- --new-size "$new" --idfile "$idf" ${extra[@]+"${extra[@]}"}
    done
    if [ -n "$stale" ]; then
        start $((old % 4)) "$LAB_TMP/$name.x.log" -- --join --rank "$old" --new-size "$new" \
            --idfile "$oldf" --expect GS_ERR_MISMATCH
        local end=$((SECONDS + 60))
        until grep -q '^REFUSED' "$LAB_TMP/$name.x.log" 2>/dev/null || [ "$SECONDS" -ge "$end" ]; do
            sleep 0.1
        done
    fi
    for ((r = old; r < new; r++)); do
        start $((r % 4)) "$LAB_TMP/$name.$r.log" -- --join --rank "$r" --new-size "$new" \
            --idfile "$idf"
    done
    for pid in "${PIDS[@]}"; do
        wait "$pid"
        rc=$?
        [ "$rc" -eq 0 ] || ok=0
    done
    if [ -n "$stale" ] && ! grep -q 'stale' "$LAB_TMP/$name.x.log"; then
        echo "  $name: the stale joiner's refusal does not say stale"
        ok=0
    fi
    echo "  $name: $(cat "$LAB_TMP/$name".[0-9]*.log | grep -c '^GROW ') of $new ranks grew;" \
        "$(grep -h -m1 '^GROW rank=0 ' "$LAB_TMP/$name.0.log")"
    if [ "$ok" -eq 1 ]; then
        echo "PASS $name: $old ranks on $old host(s) grew to $new across the lab's links"
    else
        fail "$name"
        for f in "$LAB_TMP/$name".*.log; do
            echo "---- $(basename "$f")"
            grep -v '^ok ' "$f" | head -n 20
        done
    fi
}

for c in $CASES; do
    case "$c" in
    2to4) run_case 2to4 2 4 ;;
    3to5) run_case 3to5 3 5 ;;
    4to8) run_case 4to8 4 8 ;;
    stale) run_case stale 2 3 stale ;;
    *) fail "unknown case $c" ;;
    esac
done
exit "$FAILED"
