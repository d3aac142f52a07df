#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# Integration test of the gsrun launcher with real processes: the rank environment, output
# prefixing (stdout, stderr, a last line without newline, very long lines), exit status
# propagation and the stopping of the other ranks, signal forwarding, --timeout and usage
# errors. It does not test gradsync itself. Every gsrun run is bounded (coreutils timeout, or a
# bounded wait for background runs), so a hang fails one check and the script stays well under
# 30 s. Usage: test_gsrun.sh <path-to-gsrun>

set -u

GSRUN=${1:-}
if [ -z "$GSRUN" ] || [ ! -x "$GSRUN" ]; then
    echo "usage: $0 <path-to-gsrun>" >&2
    exit 2
fi
case "$GSRUN" in
/*) ;;
*) GSRUN="$PWD/$GSRUN" ;;
esac

TMP=$(mktemp -d "${TMPDIR:-/tmp}/test_gsrun.XXXXXX") || exit 1
# A broken gsrun may leave ranks behind: kill the ones whose pids the checks recorded.
cleanup() {
    local f
    for f in "$TMP/pids" "$TMP/sigout" "$TMP/out"; do
        check_dead "$f" >/dev/null 2>&1
    done
    rm -rf "$TMP"
}
trap cleanup EXIT
unset GS_MASTER_PORT GS_MASTER_ADDR RANK WORLD_SIZE LOCAL_RANK MASTER_PORT MASTER_ADDR

PASS=0
FAIL=0
CUR=""

begin() { CUR=$1; }
ok() { PASS=$((PASS + 1)); echo "ok - $CUR"; }
bad() {
    FAIL=$((FAIL + 1))
    echo "FAIL - $CUR: $*"
}
now_ms() { date +%s%3N; }

# The whole script stays under 30 s even when gsrun hangs: every wait is capped by what is left
# of a 24 s budget (at least 1 s, so a check on a broken gsrun still runs and fails).
T_START=$(now_ms)
cap_s() {
    local left=$(((24000 - ($(now_ms) - T_START)) / 1000))
    [ "$left" -ge 1 ] || left=1
    [ "$left" -lt "$1" ] || left=$1
    echo "$left"
}

# gsrun with a hard bound; stdout and stderr go to $TMP/out and $TMP/err, $RC is the status.
run() {
    timeout -k 1 "$(cap_s 10)" "$GSRUN" "$@" >"$TMP/out" 2>"$TMP/err"
    RC=$?
}

# Wait until file $1 has at least $2 lines, for at most $3 seconds.
wait_lines() {
    local end=$(($(now_ms) + $(cap_s "$3") * 1000))
    while [ "$(now_ms)" -lt "$end" ]; do
        if [ -f "$1" ] && [ "$(wc -l <"$1")" -ge "$2" ]; then
            return 0
        fi
        sleep 0.02
    done
    return 1
}

# Wait for background pid $1 to end, for at most $2 seconds; sets $RC. Kills it if it does not.
wait_bg() {
    local end=$(($(now_ms) + $(cap_s "$2") * 1000))
    while [ "$(now_ms)" -lt "$end" ]; do
        if ! kill -0 "$1" 2>/dev/null; then
            wait "$1"
            RC=$?
            return 0
        fi
        sleep 0.02
    done
    kill -KILL "$1" 2>/dev/null
    wait "$1" 2>/dev/null
    RC=hung
    return 1
}

# Fails (and kills them) if any of the pids listed in file $1 (last field per line) still live.
check_dead() {
    local p alive=""
    [ -f "$1" ] || return 0
    for p in $(awk '$NF ~ /^[0-9]+$/ {print $NF}' "$1"); do
        if kill -0 "$p" 2>/dev/null; then
            alive="$alive $p"
            kill -KILL "$p" 2>/dev/null
        fi
    done
    [ -z "$alive" ] || { echo "still alive:$alive"; return 1; }
}

# ---- environment ----------------------------------------------------------------------------

begin "env vars per rank"
run --port 29876 -n 3 -- sh -c 'echo $RANK $WORLD_SIZE $LOCAL_RANK $LOCAL_WORLD_SIZE \
    $MASTER_ADDR $MASTER_PORT $GS_RANK $GS_WORLD_SIZE $GS_LOCAL_RANK \
    $GS_MASTER_ADDR $GS_MASTER_PORT'
sort "$TMP/out" >"$TMP/sorted"
printf '%s\n' \
    "[0] 0 3 0 3 127.0.0.1 29876 0 3 0 127.0.0.1 29876" \
    "[1] 1 3 1 3 127.0.0.1 29876 1 3 1 127.0.0.1 29876" \
    "[2] 2 3 2 3 127.0.0.1 29876 2 3 2 127.0.0.1 29876" >"$TMP/want"
if [ "$RC" = 0 ] && cmp -s "$TMP/sorted" "$TMP/want"; then ok; else
    bad "rc=$RC out=$(cat "$TMP/out")"; fi

begin "rank env from the brief's command"
run -n 2 sh -c 'echo $RANK $WORLD_SIZE $LOCAL_RANK $MASTER_PORT $GS_RANK'
r0=$(grep '^\[0\] ' "$TMP/out")
r1=$(grep '^\[1\] ' "$TMP/out")
port=$(echo "$r0" | awk '{print $5}')
if [ "$RC" = 0 ] && [ "$r0" = "[0] 0 2 0 $port 0" ] && [ "$r1" = "[1] 1 2 1 $port 1" ] &&
    [ "$port" -ge 1 ] && [ "$port" -le 65535 ]; then ok; else
    bad "rc=$RC out=$(cat "$TMP/out")"; fi

begin "GS_MASTER_PORT is used when --port is absent"
GS_MASTER_PORT=31234 run -n 2 sh -c 'echo $MASTER_PORT $GS_MASTER_PORT'
if [ "$RC" = 0 ] && [ "$(sort -u "$TMP/out" | sed 's/^\[.\] //' | sort -u)" = "31234 31234" ]; then
    ok; else bad "rc=$RC out=$(cat "$TMP/out")"; fi

begin "--port wins over GS_MASTER_PORT"
GS_MASTER_PORT=31234 run --port 31235 -n 1 sh -c 'echo $MASTER_PORT $GS_MASTER_PORT'
if [ "$RC" = 0 ] && [ "$(cat "$TMP/out")" = "[0] 31235 31235" ]; then ok; else
    bad "rc=$RC out=$(cat "$TMP/out")"; fi

begin "free port is printed with --verbose and shared by all ranks"
run --verbose -n 3 sh -c 'echo $MASTER_PORT'
ports=$(sed 's/^\[.\] //' "$TMP/out" | sort -u)
if [ "$RC" = 0 ] && [ "$(echo "$ports" | wc -l)" = 1 ] && [ "$(wc -l <"$TMP/out")" = 3 ] &&
    grep -q "127.0.0.1:$ports" "$TMP/err"; then ok; else
    bad "rc=$RC out=$(cat "$TMP/out") err=$(cat "$TMP/err")"; fi

begin "--addr sets MASTER_ADDR and GS_MASTER_ADDR"
run --addr 10.1.2.3 --port 4000 -n 1 sh -c 'echo $MASTER_ADDR $GS_MASTER_ADDR'
if [ "$RC" = 0 ] && [ "$(cat "$TMP/out")" = "[0] 10.1.2.3 10.1.2.3" ]; then ok; else
    bad "rc=$RC out=$(cat "$TMP/out")"; fi

# ---- output ---------------------------------------------------------------------------------

begin "stdout and stderr prefixed, final line without newline"
run -n 2 sh -c 'echo out$RANK; echo err$RANK >&2; printf "two\nlines$RANK\n"; printf tail$RANK'
sort "$TMP/out" >"$TMP/sorted"
printf '%s\n' "[0] lines0" "[0] out0" "[0] tail0" "[0] two" \
    "[1] lines1" "[1] out1" "[1] tail1" "[1] two" >"$TMP/want"
if [ "$RC" = 0 ] && cmp -s "$TMP/sorted" "$TMP/want" &&
    [ "$(sort "$TMP/err")" = "$(printf '[0] err0\n[1] err1')" ]; then ok; else
    bad "rc=$RC out=$(cat "$TMP/out") err=$(cat "$TMP/err")"; fi

begin "a line written in pieces stays one line"
run -n 1 sh -c 'printf ab; printf cd >&2; printf ef; echo gh; echo ij >&2'
if [ "$RC" = 0 ] && [ "$(cat "$TMP/out")" = "[0] abefgh" ] &&
    [ "$(cat "$TMP/err")" = "[0] cdij" ]; then ok; else
    bad "rc=$RC out=$(cat "$TMP/out") err=$(cat "$TMP/err")"; fi

begin "very long line is split into prefixed lines, no byte lost"
run -n 2 sh -c 'head -c 100000 /dev/zero | tr "\0" "a"; echo; echo after$RANK'
nbad=$(grep -cv '^\[[01]\] ' "$TMP/out")
na=$(grep -x '\[0\] a*' "$TMP/out" | sed 's/^\[0\] //' | tr -d '\n' | wc -c)
if [ "$RC" = 0 ] && [ "$nbad" = 0 ] && [ "$na" = 100000 ] && grep -qx '\[1\] after1' "$TMP/out"
then ok; else bad "rc=$RC unprefixed=$nbad a-count=$na"; fi

begin "--no-tag-output passes output through"
run --no-tag-output -n 2 sh -c 'echo plain; echo e >&2'
if [ "$RC" = 0 ] && [ "$(cat "$TMP/out")" = "$(printf 'plain\nplain')" ] &&
    [ "$(cat "$TMP/err")" = "$(printf 'e\ne')" ]; then ok; else
    bad "rc=$RC out=$(cat "$TMP/out")"; fi

# ---- exit status ----------------------------------------------------------------------------

begin "all ranks exit 0 gives 0 and no messages"
run -n 4 true
if [ "$RC" = 0 ] && [ ! -s "$TMP/err" ]; then ok; else bad "rc=$RC err=$(cat "$TMP/err")"; fi

begin "failing rank's status propagates and the others are killed quickly"
rm -f "$TMP/pids"
t0=$(now_ms)
# Ranks 0, 2, 3 record their pid and sleep; rank 1 waits (bounded) for them, then fails.
PIDS="$TMP/pids" run -n 4 sh -c '
    if [ "$RANK" = 1 ]; then
        i=0
        while [ "$(cat "$PIDS" 2>/dev/null | wc -l)" -lt 3 ] && [ $i -lt 250 ]; do
            sleep 0.02; i=$((i + 1))
        done
        exit 7
    fi
    echo $$ >>"$PIDS"; exec sleep 30'
dt=$(($(now_ms) - t0))
nmsg=$(grep -c '^gsrun: rank' "$TMP/err")
if [ "$RC" = 7 ] && [ "$dt" -lt 10000 ] &&
    grep -qx 'gsrun: rank 1 exited with status 7' "$TMP/err" && [ "$nmsg" = 1 ] &&
    [ "$(wc -l <"$TMP/pids")" = 3 ] && check_dead "$TMP/pids"; then ok; else
    bad "rc=$RC ms=$dt err=$(cat "$TMP/err")"; fi

begin "rank killed by a signal gives 128+signal"
run -n 2 sh -c 'if [ $RANK = 1 ]; then kill -KILL $$; fi; exec sleep 30'
if [ "$RC" = 137 ] && grep -q '^gsrun: rank 1 killed by signal 9' "$TMP/err"; then ok; else
    bad "rc=$RC err=$(cat "$TMP/err")"; fi

begin "program that cannot be executed gives 127"
run -n 2 "$TMP/no-such-program"
if [ "$RC" = 127 ] && grep -q 'cannot execute' "$TMP/err"; then ok; else
    bad "rc=$RC err=$(cat "$TMP/err")"; fi

# ---- signals and timeout --------------------------------------------------------------------

# Start gsrun in the background on a script that prints its pid and sleeps, send $1 to gsrun
# once every rank has started, and check the status ($2) and the time taken (< $3 ms).
signal_case() {
    local sig=$1 want=$2 max_ms=$3 script=$4 pid t0 dt
    : >"$TMP/sigout"
    "$GSRUN" -n 3 sh -c "$script" >"$TMP/sigout" 2>"$TMP/sigerr" &
    pid=$!
    if ! wait_lines "$TMP/sigout" 3 3; then
        kill -KILL "$pid" 2>/dev/null
        wait "$pid" 2>/dev/null
        check_dead "$TMP/sigout" >/dev/null
        bad "ranks did not start: $(cat "$TMP/sigout" "$TMP/sigerr")"
        return
    fi
    t0=$(now_ms)
    kill "-$sig" "$pid"
    wait_bg "$pid" 8
    dt=$(($(now_ms) - t0))
    if [ "$RC" = "$want" ] && [ "$dt" -lt "$max_ms" ] && check_dead "$TMP/sigout" &&
        grep -q "got SIG$sig" "$TMP/sigerr"; then ok; else
        bad "rc=$RC (want $want) ms=$dt err=$(cat "$TMP/sigerr")"; fi
}

begin "SIGTERM to gsrun is forwarded and the ranks are gone"
signal_case TERM 143 1500 'echo $$; exec sleep 30'

begin "ranks ignoring the forwarded signal are SIGKILLed after the grace period"
signal_case TERM 143 6000 'trap "" TERM; echo $$; exec sleep 30'

begin "SIGINT to gsrun is forwarded"
signal_case INT 130 6000 'echo $$; exec sleep 30'

begin "SIGHUP to gsrun is forwarded"
signal_case HUP 129 6000 'echo $$; exec sleep 30'

begin "--timeout stops every rank and exits 124"
t0=$(now_ms)
run --timeout 1 -n 2 sh -c 'echo $$; exec sleep 30'
dt=$(($(now_ms) - t0))
if [ "$RC" = 124 ] && [ "$dt" -ge 900 ] && [ "$dt" -lt 6000 ] && grep -q 'timeout' "$TMP/err" &&
    [ "$(wc -l <"$TMP/out")" = 2 ] && check_dead "$TMP/out"; then ok; else
    bad "rc=$RC ms=$dt err=$(cat "$TMP/err")"; fi

# ---- usage ----------------------------------------------------------------------------------

usage_case() {
    begin "usage error: $*"
    run "$@"
    if [ "$RC" = 2 ] && grep -q '^gsrun: ' "$TMP/err" && [ ! -s "$TMP/out" ]; then ok; else
        bad "rc=$RC err=$(cat "$TMP/err")"; fi
}
usage_case
usage_case -n
usage_case true
usage_case -n 0 true
usage_case -n 1025 true
usage_case -n abc true
usage_case -n 2
usage_case -n 2 --
usage_case --port 0 -n 1 true
usage_case --port 65536 -n 1 true
usage_case --port x -n 1 true
usage_case --timeout 0 -n 1 true
usage_case --timeout abc -n 1 true
usage_case --addr '' -n 1 true
usage_case --bogus -n 1 true

begin "usage error: bad GS_MASTER_PORT"
GS_MASTER_PORT=notaport run -n 1 true
if [ "$RC" = 2 ]; then ok; else bad "rc=$RC"; fi

begin "--help"
run --help
if [ "$RC" = 0 ] && grep -q '^Usage: gsrun -n N' "$TMP/out"; then ok; else bad "rc=$RC"; fi

begin "--version"
run --version
if [ "$RC" = 0 ] && grep -Eq '^gsrun \(gradsync\) [0-9]+\.[0-9]+\.[0-9]+$' "$TMP/out"; then ok; else
    bad "rc=$RC out=$(head -1 "$TMP/out")"; fi

begin "node 1 of 2: global ranks, world size, node rank"
run --nnodes 2 --node-rank 1 --master-port 29877 --master-addr 127.0.0.1 --nproc-per-node 2 -- \
    sh -c 'echo $RANK $WORLD_SIZE $LOCAL_RANK $LOCAL_WORLD_SIZE $GROUP_RANK $GS_RANK $GS_WORLD_SIZE $MASTER_PORT'
if [ "$RC" = 0 ] && grep -qx '\[2\] 2 4 0 2 1 2 4 29877' "$TMP/out" &&
    grep -qx '\[3\] 3 4 1 2 1 3 4 29877' "$TMP/out"; then ok; else bad "rc=$RC out=$(cat "$TMP/out")"; fi

usage_case --nnodes 2 -n 1 true
usage_case --nnodes 2 --node-rank 2 --master-port 29878 -n 1 true
usage_case --nnodes 0 -n 1 true
usage_case --node-rank -1 -n 1 true

begin "-n1024 is accepted"
run -n1024 --no-tag-output true
if [ "$RC" = 0 ]; then ok; else bad "rc=$RC err=$(head -3 "$TMP/err")"; fi

echo "$PASS passed, $FAIL failed"
[ "$FAIL" = 0 ]
