# SPDX-License-Identifier: Apache-2.0
# shellcheck shell=bash disable=SC2034 # LAB_RC, RCS are for the caller
#
# lib_lab.sh: helpers for the multi-host lab tests and benchmarks, sourced
# after setting nothing (it finds netlab.sh next to itself). It builds a lab
# with netlab.sh (and tears it down on exit, even when the caller fails or
# is interrupted), and launches a job whose ranks are spread over the lab's
# hosts: gsrun starts local ranks only, so every rank is started here with
# `ip netns exec <host> env RANK=.. WORLD_SIZE=.. MASTER_ADDR=<host 0> ...`,
# waited for under a deadline, and killed with the others when one fails.
#
#   lab_up N [netlab up options]     builds the lab (prefix LAB_PREFIX); exits 77 to skip
#                                    (--rails 2 sets LAB_RAILS=2: two rails per host)
#   lab_addr I [RAIL]                host I's address (on rail RAIL, 0 or 1)
#   lab_rail_rate I RAIL RATE        tc change of host I's rail (netlab.sh rail-rate)
#   lab_rail_link I RAIL up|down     host I's end of the rail up or down (netlab.sh rail-link)
#   lab_launch NHOSTS RPH PROG ARGS  runs NHOSTS*RPH ranks of PROG; sets RCS[r], LAB_RC
#                                    (= lab_start, then lab_wait)
#   lab_wait_running NAME            every started rank has printed RUNNING, or exits 1
#   field LOG TAG KEY                a rank's "TAG key=value" line, read as lib_procs.sh does
#
# Settings read by lab_launch (set them before calling):
#   LAB_PLACE=block|cyclic  rank r on host r/RPH (block, each host's ranks adjacent)
#                           or r%NHOSTS (cyclic, every ring hop crosses hosts)
#   LAB_TIMEOUT=S           every rank is killed after S seconds (default 180)
#   LAB_KILL_ON_FAIL=1|0    kill all ranks as soon as one exits non-zero (default 1)
#   LAB_IFNAME=1|0          set GS_SOCKET_IFNAME=nl<host> (default 1; 0: route-based choice);
#                           nl<host>,nm<host> when the lab has two rails (LAB_RAILS=2)
#   LAB_ENV=(VAR=value ...) extra environment for every rank
#   LAB_PORT                MASTER_PORT (default 29500: each lab's namespaces are fresh)
# Every rank also gets LAB_HOST_ADDR, its host's address (e.g. for GLOO_BENCH_HOST).
# Logs: $LAB_TMP/rank.<r>.log; LAB_PID[r] and LAB_HOST[r] describe each rank.

LAB_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
NETLAB="$LAB_DIR/netlab.sh"
LAB_PREFIX=${LAB_PREFIX:-gsnl$$}
LAB_PREFIX=${LAB_PREFIX:0:20}
LAB_TMP=$(mktemp -d "${TMPDIR:-/tmp}/gs_net.XXXXXX")
LAB_IS_UP=0
LAB_RAILS=1
LAB_SHELL_PID=$BASHPID
LAB_PID=()
LAB_HOST=()
RCS=()

# Launcher variables from the caller's environment must not leak into the ranks.
unset GS_RANK GS_WORLD_SIZE GS_LOCAL_RANK GS_MASTER_ADDR GS_MASTER_PORT GS_SOCKET_IFNAME \
    RANK WORLD_SIZE LOCAL_RANK MASTER_ADDR MASTER_PORT OMPI_COMM_WORLD_RANK \
    OMPI_COMM_WORLD_SIZE OMPI_COMM_WORLD_LOCAL_RANK SLURM_PROCID SLURM_NTASKS SLURM_LOCALID

lab_cleanup() {
    local p
    # A background subshell (lab_wait's watchdog) that receives TERM in the instant after
    # fork, before bash resets the inherited traps, runs `exit 130` and then this trap: it
    # must not tear down the lab or remove the logs under the caller (seen in CI).
    [ "$BASHPID" = "$LAB_SHELL_PID" ] || return 0
    for p in "${LAB_PID[@]}"; do
        kill -CONT "$p" 2>/dev/null
        kill -KILL "$p" 2>/dev/null
    done
    wait 2>/dev/null
    if [ "$LAB_IS_UP" -eq 1 ]; then
        bash "$NETLAB" down --prefix "$LAB_PREFIX" || echo "lab: teardown of $LAB_PREFIX failed" >&2
    fi
    if [ -n "${KEEP:-}" ]; then
        echo "lab: logs kept in $LAB_TMP" >&2
    else
        rm -rf "$LAB_TMP"
    fi
}
trap lab_cleanup EXIT
trap 'exit 130' INT TERM HUP

lab_now_ms() { date +%s%3N; }

# Labs of this scheme (gsnl<PID>...) whose script died without its EXIT trap (SIGKILL,
# e.g. a ctest timeout) are removed, so that they do not pile up.
lab_gc() {
    local ns pid
    for ns in $(ip netns list 2>/dev/null | awk '{print $1}' | grep -E '^gsnl[0-9]+(h[0-9]+|br)$'); do
        pid=${ns#gsnl}
        pid=${pid%%[hb]*}
        if ! kill -0 "$pid" 2>/dev/null; then
            ip netns del "$ns" 2>/dev/null && echo "lab: removed stale namespace $ns" >&2
        fi
    done
}

lab_up() {
    local rc=0 a prev=
    for a in "$@"; do
        [ "$prev" = --rails ] && LAB_RAILS=$a
        prev=$a
    done
    [ "$(id -u)" -eq 0 ] && command -v ip >/dev/null 2>&1 && lab_gc
    LAB_IS_UP=1 # from here on, the EXIT trap removes whatever exists
    bash "$NETLAB" up "$@" --prefix "$LAB_PREFIX" || rc=$?
    if [ $rc -eq 77 ]; then
        exit 77
    elif [ $rc -ne 0 ]; then
        echo "lab: netlab up failed (exit $rc)" >&2
        exit 1
    fi
}

lab_addr() { bash "$NETLAB" addr --rail "${2:-0}" "$1"; }
lab_rail_rate() { bash "$NETLAB" rail-rate --prefix "$LAB_PREFIX" "$@"; }
lab_rail_link() { bash "$NETLAB" rail-link --prefix "$LAB_PREFIX" "$@"; }

# lab_host_of RANK NHOSTS RPH
lab_host_of() {
    if [ "${LAB_PLACE:-block}" = cyclic ]; then
        echo $(($1 % $2))
    else
        echo $(($1 / $3))
    fi
}

# lab_start NHOSTS RPH PROG ARGS... : starts every rank in the background.
lab_start() {
    local nh=$1 rph=$2 world r h lr master
    shift 2
    world=$((nh * rph))
    master=$(lab_addr 0)
    LAB_PID=()
    LAB_HOST=()
    RCS=()
    for ((r = 0; r < world; r++)); do
        h=$(lab_host_of "$r" "$nh" "$rph")
        if [ "${LAB_PLACE:-block}" = cyclic ]; then lr=$((r / nh)); else lr=$((r % rph)); fi
        local -a env_if=()
        if [ "${LAB_IFNAME:-1}" = 1 ]; then
            if [ "$LAB_RAILS" = 2 ]; then
                env_if=(GS_SOCKET_IFNAME="nl$h,nm$h")
            else
                env_if=(GS_SOCKET_IFNAME="nl$h")
            fi
        fi
        ip netns exec "${LAB_PREFIX}h$h" env ${LAB_ENV[@]+"${LAB_ENV[@]}"} "${env_if[@]}" \
            LAB_HOST_ADDR="$(lab_addr "$h")" RANK="$r" WORLD_SIZE="$world" LOCAL_RANK="$lr" \
            MASTER_ADDR="$master" \
            MASTER_PORT="${LAB_PORT:-29500}" "$@" >"$LAB_TMP/rank.$r.log" 2>&1 &
        LAB_PID[r]=$!
        LAB_HOST[r]=$h
    done
}

# lab_wait: waits for every started rank under LAB_TIMEOUT; sets RCS[r] (137 when killed
# by the deadline or because another rank failed) and LAB_RC (0 when all exited 0).
lab_wait() {
    local world=${#LAB_PID[@]} r pid st deadline watchdog
    local -a running=("${LAB_PID[@]}")
    deadline=${LAB_TIMEOUT:-180}
    # The watchdog kills every rank at the deadline; `wait -n` below then returns. Its
    # sleep dies with it, so that no stray process holds the caller's output open.
    (
        trap 'kill "$sp" 2>/dev/null; exit 0' TERM
        sleep "$deadline" >/dev/null 2>&1 &
        sp=$!
        wait "$sp"
        echo "lab: deadline of $deadline s reached, killing every rank" >&2
        kill -KILL "${LAB_PID[@]}" 2>/dev/null
    ) &
    watchdog=$!
    while [ ${#running[@]} -gt 0 ]; do
        pid=
        { wait -n -p pid "${running[@]}"; } 2>/dev/null # no "Killed" job notices
        st=$?
        [ -n "${pid:-}" ] || break # bash unsets pid when no job was left to wait for
        local -a still=()
        for r in "${running[@]}"; do
            [ "$r" = "$pid" ] || still+=("$r")
        done
        running=(${still[@]+"${still[@]}"})
        for ((r = 0; r < world; r++)); do
            if [ "${LAB_PID[r]}" = "$pid" ]; then
                RCS[r]=$st
                if [ "$st" -ne 0 ] && [ "${LAB_KILL_ON_FAIL:-1}" = 1 ]; then
                    kill -KILL "${LAB_PID[@]}" 2>/dev/null
                fi
            fi
        done
    done
    kill "$watchdog" 2>/dev/null
    wait "$watchdog" 2>/dev/null
    LAB_RC=0
    for ((r = 0; r < world; r++)); do
        [ -n "${RCS[r]:-}" ] || RCS[r]=137
        [ "${RCS[r]}" -eq 0 ] || LAB_RC=1
    done
}

lab_launch() {
    lab_start "$@"
    lab_wait
}

# lab_wait_running NAME: waits (30 s at most) until every rank started by lab_start has
# printed its RUNNING line (fault_check loop: 3 iterations done). Otherwise it says which
# rank never started its loop, dumps the logs and exits 1 ("NAME: FAIL").
lab_wait_running() {
    local name=$1 r end
    end=$(($(lab_now_ms) + 30000))
    for ((r = 0; r < ${#LAB_PID[@]}; r++)); do
        until grep -q '^RUNNING' "$LAB_TMP/rank.$r.log" 2>/dev/null; do
            if [ "$(lab_now_ms)" -ge "$end" ]; then
                echo "$name: rank $r never started its loop"
                lab_dump 20
                echo "$name: FAIL"
                exit 1
            fi
            sleep 0.05
        done
    done
}

# field LOG TAG KEY : value of KEY= on the first line of LOG starting with TAG.
field() {
    grep -m1 "^$2 " "$1" 2>/dev/null | tr ' ' '\n' | sed -n "s/^$3=//p" | head -n 1
}

# lab_dump: the tail of every rank's log.
lab_dump() {
    local f
    for f in "$LAB_TMP"/rank.*.log; do
        [ -e "$f" ] || continue
        echo "---- $(basename "$f")"
        tail -n "${1:-15}" "$f"
    done
}

# lab_check_listen WORLD: every rank's "listening on ADDR" log line (GS_DEBUG=INFO) shows
# its own host's address. Prints one line per rank; returns 1 on any mismatch.
lab_check_listen() {
    local world=$1 r got want ok=0
    for ((r = 0; r < world; r++)); do
        want=$(lab_addr "${LAB_HOST[r]}")
        got=$(sed -n 's/.*tcp: rank [0-9]* of [0-9]* listening on \([^ ,]*\).*/\1/p' \
            "$LAB_TMP/rank.$r.log" | head -n 1)
        if [ "${got%:*}" != "$want" ]; then
            echo "lab: rank $r on host ${LAB_HOST[r]} listens on '${got:-?}', expected $want:PORT"
            ok=1
        fi
    done
    return $ok
}
