# SPDX-License-Identifier: Apache-2.0
# shellcheck shell=bash disable=SC2034
#
# lib_procs.sh: shell helpers shared by the integration scripts that start
# gradsync ranks by hand (run_fault.sh, run_badinput.sh): a scratch folder,
# free loopback ports, starting a rank with the torchrun variables, waiting
# for it under a watchdog, reading its "TAG key=value" lines, and killing
# every process the script started when it exits. Source it after setting
# PROG (the rank program). Not executable on its own.

PIDS=()
EXTRA_ENV=()
PASS=0
FAIL=0
TMP=$(mktemp -d "${TMPDIR:-/tmp}/gs_itest.XXXXXX")

# Launcher variables from the caller's environment must not leak in.
unset GS_RANK GS_WORLD_SIZE GS_LOCAL_RANK GS_MASTER_ADDR GS_MASTER_PORT GS_TIMEOUT_MS \
    RANK WORLD_SIZE LOCAL_RANK MASTER_ADDR MASTER_PORT OMPI_COMM_WORLD_RANK \
    OMPI_COMM_WORLD_SIZE OMPI_COMM_WORLD_LOCAL_RANK SLURM_PROCID SLURM_NTASKS SLURM_LOCALID \
    PMIX_RANK PMI_RANK PMI_SIZE MPI_LOCALRANKID

PROCS_SHELL_PID=$BASHPID
cleanup() {
    local p
    # Only the shell that set the trap cleans up: a background subshell killed in the
    # instant after fork runs the inherited traps (see tests/net/lib_lab.sh).
    [ "$BASHPID" = "$PROCS_SHELL_PID" ] || return 0
    for p in "${PIDS[@]}"; do
        kill -CONT "$p" 2>/dev/null
        kill -KILL "$p" 2>/dev/null
    done
    wait 2>/dev/null
    if [ -n "${KEEP:-}" ]; then
        echo "logs kept in $TMP"
    else
        rm -rf "$TMP"
    fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

now_ms() { date +%s%3N; }
pass() { echo "PASS $*"; PASS=$((PASS + 1)); }
fail() { echo "FAIL $*"; FAIL=$((FAIL + 1)); }

# Print the tail of every log of case $1, to diagnose a failure.
dump_logs() {
    local f
    for f in "$TMP/$1".*.log; do
        [ -e "$f" ] || continue
        echo "---- $(basename "$f")"
        tail -n 15 "$f"
    done
}

# free_port: a port free right now, picked below the kernel's ephemeral range
# (as gsrun does): a port from that range can go to any outgoing connection
# before the test binds it.
free_port() {
    if python3 -c 'import random, socket
lo = int(open("/proc/sys/net/ipv4/ip_local_port_range").read().split()[0])
for p in [random.randrange(20000, lo) for _ in range(64)] + [0]:
    s = socket.socket()
    try:
        s.bind(("0.0.0.0", p))
        print(s.getsockname()[1])
        break
    except OSError:
        pass
    finally:
        s.close()' 2>/dev/null; then
        return
    fi
    local p i
    for i in 1 2 3 4 5 6 7 8 9 10; do
        p=$((20000 + (RANDOM * 7 + i) % 40000))
        if ! (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; then
            echo "$p"
            return
        fi
    done
    echo "$p"
}

# start_rank RANK WORLD PORT TIMEOUT_MS LOG ARGS... : starts "$PROG ARGS" as one rank
# (torchrun variables, plus the VAR=value words of the EXTRA_ENV array), sets LASTPID.
start_rank() {
    local r=$1 w=$2 port=$3 tmo=$4 log=$5
    shift 5
    env ${EXTRA_ENV[@]+"${EXTRA_ENV[@]}"} RANK="$r" WORLD_SIZE="$w" MASTER_ADDR=127.0.0.1 \
        MASTER_PORT="$port" GS_TIMEOUT_MS="$tmo" "$PROG" "$@" >"$log" 2>&1 &
    LASTPID=$!
    PIDS+=("$LASTPID")
}

# wait_rank PID SECONDS : waits for PID (a child of this shell), killing it after SECONDS;
# sets RC (137 when killed). No background watchdog: tail --pid polls in the foreground.
wait_rank() {
    local pid=$1
    timeout "$2" tail --pid="$pid" -s 0.05 -f /dev/null >/dev/null 2>&1
    kill -KILL "$pid" 2>/dev/null
    { wait "$pid"; } 2>/dev/null # no "Killed" job notice
    RC=$?
}

# wait_line FILE REGEX SECONDS : 0 once a line of FILE matches REGEX.
wait_line() {
    local end=$(($(now_ms) + $3 * 1000))
    until grep -q "$2" "$1" 2>/dev/null; do
        [ "$(now_ms)" -ge "$end" ] && return 1
        sleep 0.05
    done
    return 0
}

# field LOG TAG KEY : value of KEY= on the first line of LOG starting with TAG.
field() {
    grep -m1 "^$2 " "$1" 2>/dev/null | tr ' ' '\n' | sed -n "s/^$3=//p" | head -n 1
}

# judge_kill NAME VICTIM PIDS... : waits for the ranks (one pid per rank, in rank order;
# each logs to $TMP/NAME.RANK.log), then passes when the victim died of SIGKILL after
# printing "KILL t_ms=..." and every survivor exited 0 after printing "RESULT
# status=GS_ERR_PEER_FAILED t_ms=..." within 2 s of the kill (the checker itself verifies
# that the error names the victim); otherwise fails and dumps the logs.
judge_kill() {
    local name=$1 victim=$2 n r ok=1 kill_t st t dt err pids rcs=()
    shift 2
    pids=("$@")
    n=${#pids[@]}
    for ((r = 0; r < n; r++)); do
        wait_rank "${pids[r]}" 120
        rcs[r]=$RC
    done
    kill_t=$(field "$TMP/$name.$victim.log" KILL t_ms)
    if [ -z "$kill_t" ]; then
        fail "$name: victim rank $victim never reached the kill point"
        dump_logs "$name"
        return
    fi
    if [ "${rcs[victim]}" -ne 137 ]; then
        echo "  $name: victim exit status ${rcs[victim]}, expected 137 (SIGKILL)"
        ok=0
    fi
    for ((r = 0; r < n; r++)); do
        [ "$r" -eq "$victim" ] && continue
        st=$(field "$TMP/$name.$r.log" RESULT status)
        t=$(field "$TMP/$name.$r.log" RESULT t_ms)
        err=$(sed -n 's/^RESULT .* err=//p' "$TMP/$name.$r.log" | head -n 1)
        if [ -z "$t" ]; then
            echo "  $name: rank $r printed no RESULT (exit status ${rcs[r]})"
            ok=0
            continue
        fi
        dt=$((t - kill_t))
        echo "  $name: rank $r got $st $dt ms after the kill (exit status ${rcs[r]}): $err"
        if [ "$st" != GS_ERR_PEER_FAILED ] || [ "$dt" -gt 2000 ] || [ "${rcs[r]}" -ne 0 ]; then
            ok=0
        fi
    done
    if [ "$ok" -eq 1 ]; then
        pass "$name: every survivor failed with GS_ERR_PEER_FAILED naming rank $victim within 2 s"
    else
        fail "$name: survivors did not all fail promptly with GS_ERR_PEER_FAILED naming rank $victim"
        dump_logs "$name"
    fi
}
