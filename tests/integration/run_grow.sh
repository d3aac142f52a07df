#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# run_grow.sh: gs_comm_grow and gs_comm_revoke with ranks started by hand (lib_procs.sh) on
# loopback. Cases:
#   2to4 3to5 4to8  old ranks grow with new ranks that join with rank 0's id; the grown
#                   communicator sums every rank, carries rank 0's parameters, and both
#                   communicators are destroyed cleanly.
#   stale           rank 0 makes an id, then another: a joiner with the first is refused at
#                   once (GS_ERR_MISMATCH, "stale") and the grow goes on with the right one.
#   token           the job has a token: a joiner without one fails at once (GS_ERR_AUTH), one
#                   with another token is refused by rank 0 (GS_ERR_AUTH); the right one joins.
#   race            old rank 2 of 4 is killed just before a grow to 5: every other old rank's
#                   grow fails naming it; they shrink to 3 and grow back to 4 with a joiner.
#   revoke          a revoke ends an all-reduce the other ranks are blocked in, and races one
#                   blocked on the revoker's own thread; the shrink after it keeps every rank.
# usage: run_grow.sh PATH/TO/grow_check [case]...   (KEEP=1 keeps the logs)
set -u

PROG=${1:?usage: run_grow.sh PATH/TO/grow_check [case]...}
shift
CASES=${*:-2to4 3to5 4to8 stale token race revoke}
# shellcheck source-path=SCRIPTDIR source=lib_procs.sh
. "$(dirname "$0")/lib_procs.sh"
TMO=20000

# start_join R N IDFILE LOG [ARGS...]: a new rank.
start_join() {
    local r=$1 n=$2 idf=$3 log=$4
    shift 4
    env ${EXTRA_ENV[@]+"${EXTRA_ENV[@]}"} GS_TIMEOUT_MS="$TMO" "$PROG" --join --rank "$r" \
        --new-size "$n" --idfile "$idf" "$@" >"$log" 2>&1 &
    LASTPID=$!
    PIDS+=("$LASTPID")
}

# finish NAME PIDS...: wait for every rank; ok=0 when one failed.
finish() {
    local name=$1 pid i=0
    shift
    for pid in "$@"; do
        wait_rank "$pid" 120
        [ "$RC" -eq 0 ] || { echo "  $name: process $i exit status $RC"; ok=0; }
        i=$((i + 1))
    done
}

grow_case() {
    local name=$1 old=$2 new=$3 port r pids=()
    ok=1
    port=$(free_port)
    rm -f "$TMP/$name.id"
    for ((r = 0; r < old; r++)); do
        start_rank "$r" "$old" "$port" "$TMO" "$TMP/$name.$r.log" --new-size "$new" \
            --idfile "$TMP/$name.id"
        pids+=("$LASTPID")
    done
    for ((r = old; r < new; r++)); do
        start_join "$r" "$new" "$TMP/$name.id" "$TMP/$name.$r.log"
        pids+=("$LASTPID")
    done
    finish "$name" "${pids[@]}"
    echo "  $name: $(cat "$TMP/$name".*.log | grep -c '^GROW ') of $new ranks grew;" \
        "rank 0 $(grep -h -m1 '^GROW rank=0 ' "$TMP/$name".0.log)"
    if [ "$ok" -eq 1 ]; then
        pass "$name: $old ranks grew to $new and ran an all-reduce, a broadcast and a barrier"
    else
        fail "$name"
        dump_logs "$name"
    fi
}

stale_case() {
    local name=stale port r pids=()
    ok=1
    port=$(free_port)
    rm -f "$TMP/$name.id" "$TMP/$name.old"
    for ((r = 0; r < 2; r++)); do
        start_rank "$r" 2 "$port" "$TMO" "$TMP/$name.$r.log" --new-size 3 \
            --idfile "$TMP/$name.id" --stale-idfile "$TMP/$name.old"
        pids+=("$LASTPID")
    done
    start_join 2 3 "$TMP/$name.old" "$TMP/$name.x.log" --expect GS_ERR_MISMATCH
    pids+=("$LASTPID")
    # The right joiner comes once the stale one was refused.
    wait_line "$TMP/$name.x.log" '^REFUSED' 60 || echo "  $name: the stale joiner never answered"
    start_join 2 3 "$TMP/$name.id" "$TMP/$name.2.log"
    pids+=("$LASTPID")
    finish "$name" "${pids[@]}"
    echo "  $name: $(grep -h '^REFUSED' "$TMP/$name.x.log")"
    grep -q 'stale' "$TMP/$name.x.log" || { echo "  $name: the refusal does not say stale"; ok=0; }
    if [ "$ok" -eq 1 ]; then
        pass "$name: a stale id was refused and named; the grow went on with the current id"
    else
        fail "$name"
        dump_logs "$name"
    fi
}

token_case() {
    local name=token port r pids=()
    ok=1
    port=$(free_port)
    rm -f "$TMP/$name.id"
    EXTRA_ENV=(GS_AUTH_TOKEN=grow-secret)
    for ((r = 0; r < 2; r++)); do
        start_rank "$r" 2 "$port" "$TMO" "$TMP/$name.$r.log" --new-size 3 \
            --idfile "$TMP/$name.id"
        pids+=("$LASTPID")
    done
    EXTRA_ENV=()
    start_join 2 3 "$TMP/$name.id" "$TMP/$name.none.log" --expect GS_ERR_AUTH
    pids+=("$LASTPID")
    EXTRA_ENV=(GS_AUTH_TOKEN=another-secret)
    start_join 2 3 "$TMP/$name.id" "$TMP/$name.other.log" --expect GS_ERR_AUTH
    pids+=("$LASTPID")
    wait_line "$TMP/$name.other.log" '^REFUSED' 60 || echo "  $name: the wrong token got no answer"
    EXTRA_ENV=(GS_AUTH_TOKEN=grow-secret)
    start_join 2 3 "$TMP/$name.id" "$TMP/$name.2.log"
    pids+=("$LASTPID")
    EXTRA_ENV=()
    finish "$name" "${pids[@]}"
    echo "  $name: no token: $(grep -h -o 'status=[A-Z_]*' "$TMP/$name.none.log");" \
        "another token: $(grep -h -o 'status=[A-Z_]*' "$TMP/$name.other.log")"
    if [ "$ok" -eq 1 ]; then
        pass "$name: joiners without the job's token were refused; the right one joined"
    else
        fail "$name"
        dump_logs "$name"
    fi
}

race_case() {
    local name=race port r pids=()
    ok=1
    port=$(free_port)
    rm -f "$TMP/$name.id" "$TMP/$name.id2"
    for ((r = 0; r < 4; r++)); do
        start_rank "$r" 4 "$port" "$TMO" "$TMP/$name.$r.log" --new-size 5 --victim 2 \
            --idfile "$TMP/$name.id" --regrow-idfile "$TMP/$name.id2"
        pids+=("$LASTPID")
    done
    start_join 3 4 "$TMP/$name.id2" "$TMP/$name.j.log"
    pids+=("$LASTPID")
    for ((r = 0; r < 4; r++)); do
        wait_rank "${pids[r]}" 120
        if [ "$r" -eq 2 ]; then
            [ "$RC" -eq 137 ] || { echo "  $name: victim exit status $RC, expected 137"; ok=0; }
        else
            [ "$RC" -eq 0 ] || { echo "  $name: rank $r exit status $RC"; ok=0; }
            echo "  $name: rank $r: $(grep -h -m1 '^GROWFAIL' "$TMP/$name.$r.log" | cut -c1-200)"
        fi
    done
    wait_rank "${pids[4]}" 120
    [ "$RC" -eq 0 ] || { echo "  $name: the joiner's exit status $RC"; ok=0; }
    if [ "$ok" -eq 1 ]; then
        pass "$name: the grow failed naming the dead rank; shrink, then grow back to 4"
    else
        fail "$name"
        dump_logs "$name"
    fi
}

revoke_case() {
    local name=revoke port r pids=() at0 at
    ok=1
    port=$(free_port)
    for ((r = 0; r < 4; r++)); do
        start_rank "$r" 4 "$port" "$TMO" "$TMP/$name.$r.log" --revoke
        pids+=("$LASTPID")
    done
    finish "$name" "${pids[@]}"
    at0=$(sed -n 's/^REVOKE rank=0 at=\([0-9]*\).*/\1/p' "$TMP/$name.0.log")
    for ((r = 0; r < 4; r++)); do
        at=$(sed -n 's/^REVOKED .* at=\([0-9]*\) .*/\1/p' "$TMP/$name.$r.log")
        echo "  $name: rank $r failed $((${at:-0} - ${at0:-0})) ms after rank 0's revoke:" \
            "$(grep -h -m1 '^REVOKED' "$TMP/$name.$r.log" | sed 's/.*status=//' | cut -c1-120)"
        # 3-14 ms on a loaded 2-core VM; a bound far above it, never the deadline (20 s).
        if [ -z "$at" ] || [ -z "$at0" ] || [ $((at - at0)) -gt 3000 ]; then
            echo "  $name: rank $r did not fail within 3 s of the revoke"
            ok=0
        fi
    done
    if [ "$ok" -eq 1 ]; then
        pass "$name: a revoke failed the blocked all-reduces with GS_ERR_REVOKED; shrink kept 4"
    else
        fail "$name"
        dump_logs "$name"
    fi
}

for c in $CASES; do
    case "$c" in
    2to4) grow_case 2to4 2 4 ;;
    3to5) grow_case 3to5 3 5 ;;
    4to8) grow_case 4to8 4 8 ;;
    stale) stale_case ;;
    token) token_case ;;
    race) race_case ;;
    revoke) revoke_case ;;
    *) fail "unknown case $c" ;;
    esac
done
echo "run_grow: $PASS passed, $FAIL failed"
[ "$FAIL" -eq 0 ]
