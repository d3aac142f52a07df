#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# run_torchrun_elastic.sh: torchrun's elastic restarts on the gradsync torch backend,
# across two lab hosts. On each host, `torchrun --nnodes 1:2 --nproc-per-node 2
# --max-restarts 3 --rdzv-backend c10d --rdzv-endpoint <host 0>:29400` (torch 2.x from
# PyPI, the virtual environment scripts/install-deps.sh makes, and the C++ extension the
# torch2_ext_build test builds) runs elastic_train.py: a deterministic MLP whose gradients
# go through init_process_group("gradsync"), rank 0 checkpointing every CKPT_EVERY steps
# to a shared folder, every rank resuming from the checkpoint at start. Two cases:
#   kill  both hosts from the start (world 4); once every rank trains and step KILL_AT is
#         done, kill -9 one worker on host 1. Host 1's torchrun restarts the group
#         (its workers' TORCHELASTIC_RESTART_COUNT becomes 1), host 0's follows, and the
#         job resumes at world 4 from the last checkpoint and completes.
#   join  host 0 alone (world 2, after the rendezvous' last call); once step JOIN_AT is
#         done, host 1's torchrun starts: host 0's agent sees a node waiting and restarts
#         the group at world 4 (a membership change: not counted as a restart), which
#         resumes from the last checkpoint and completes.
# The kill runs as torchrun does by default, its workers' store the agent's, shared by
# every worker group of the job under the same keys (the backend's rank 0 deletes the
# address it published there once the group is made: gradsync/torch/_rendezvous.py). The
# join sets TORCH_DISABLE_SHARE_RDZV_TCP_STORE=1 (see case_join).
# Checks, each case: both torchruns exit 0; the first step after the restart is the last
# checkpoint's step + 1 (a multiple of CKPT_EVERY, not 0, at most one checkpoint behind
# the last step done before it); every step to STEPS runs after it; and every step's loss
# (the last run of it) is within 1e-3 relative of the uninterrupted trajectory
# (elastic_train.py --reference, one process). The global batch is the same at world 2 and
# 4 and the mean gradient over equal shares is the whole batch's, so only the order of
# the float32 sums differs: 1e-6 relative at most (measured, 6 runs); a resume that loses the
# optimizer's momentum, restarts the data or sums instead of averaging is 0.4 or more off
# (measured, resuming at step 10 or 40).
# The loss per step moves 2-4x between neighbouring steps (each step draws its batch),
# so the loss at the checkpoint is printed beside the first one after the restart, and
# the latter must also be below a quarter of the initial loss (not back at the start).
# usage: run_torchrun_elastic.sh PYTHON BUILD_DIR [kill|join]...
#   PYTHON "venv": install-deps.sh's; BUILD_DIR: its torch-ext/_C*.so is the extension.
# Exit status: 0 pass, 1 fail, 77 skip (not root, no netns/bridge, no torch 2.x), 2 usage.
# shellcheck source-path=SCRIPTDIR
set -u
if [ $# -lt 2 ]; then
    echo "usage: run_torchrun_elastic.sh PYTHON BUILD_DIR [kill|join]..." >&2
    exit 2
fi
PY=$1
BUILD=$2
shift 2
CASES=("$@")
[ ${#CASES[@]} -gt 0 ] || CASES=(kill join)
for c in "${CASES[@]}"; do
    case "$c" in
    kill | join) ;;
    *) echo "run_torchrun_elastic.sh: unknown case '$c' (kill, join)" >&2; exit 2 ;;
    esac
done
HERE=$(cd "$(dirname "$0")" && pwd)
[ "$PY" = venv ] && PY="$(bash "$HERE/../../scripts/install-deps.sh" --torch-venv-path)/bin/python"
if ! "$PY" -c 'import sys, torch; sys.exit(int(torch.__version__.split(".")[0]) < 2)' \
    2>/dev/null; then
    echo "SKIPPED: no torch 2.x at $PY (scripts/install-deps.sh test installs it)"
    exit 77
fi
TORCHRUN=$(dirname "$PY")/torchrun
EXT=
for f in "$BUILD"/torch-ext/_C*.so; do
    [ -f "$f" ] && EXT=$f && break
done
if [ -z "$EXT" ]; then
    echo "FAIL: the extension is not built in $BUILD/torch-ext" \
        "(the torch2_ext_build test builds it)"
    exit 1
fi
# shellcheck source=lib_lab.sh
. "$HERE/lib_lab.sh"
unset TORCHELASTIC_RUN_ID TORCHELASTIC_USE_AGENT_STORE TORCHELASTIC_RESTART_COUNT

STEPS=60       # the job's last step
CKPT_EVERY=5   # rank 0 saves after every 5th step
STEP_MS=150    # every rank sleeps this long a step, so that the kill and the join land
               # in the middle of training
KILL_AT=12     # kill: the kill once this step is done (a checkpoint at 10 exists)
JOIN_AT=12     # join: host 1 starts once this step is done
PAUSE_AT=45    # join: a world-2 group waits at this step (up to 120 s) for the join, so
               # that a slow start of host 1's torchrun cannot let the job end first
AGENT_S=300    # each torchrun's deadline
WAIT_S=200     # the script's waits for a step or a marker
# The rendezvous: a round that has min nodes (1) completes after last_call_timeout even
# without the second node; 10 s leaves a re-joining agent time to come back on a loaded
# machine (it polls once a second). join_timeout bounds a rendezvous below AGENT_S.
RDZV_CONF="last_call_timeout=10,join_timeout=120"

lab_up 2
MASTER=$(lab_addr 0)
FAILED=0
fail() { echo "FAIL: $*"; FAILED=1; }
APID=()
AGENT_ENV=()

# agent NAME H TRAIN_ARGS...: host H's torchrun of job NAME in the background (APID[H]),
# log $LAB_TMP/NAME.H.log, checkpoints in NAME.ckpt, markers in NAME.mk, torchrun's own
# folder (by default a new /tmp/torchelastic_* each run) in NAME.torchelastic.H. The lab's hosts
# share one host name, from which torchrun would guess which agent hosts the store and
# the address its workers reach it at: is_host and --local-addr say so. The node
# descriptors sort by that address, so host 0 is always node 0 (global ranks 0 and 1).
agent() {
    local name=$1 h=$2
    shift 2
    mkdir -p "$LAB_TMP/$name.ckpt" "$LAB_TMP/$name.mk"
    ip netns exec "${LAB_PREFIX}h$h" timeout -k 10 "$AGENT_S" env GS_TIMEOUT_MS=30000 \
        OMP_NUM_THREADS=1 GRADSYNC_TORCH_EXTENSION="$EXT" ${AGENT_ENV[@]+"${AGENT_ENV[@]}"} \
        "$TORCHRUN" --nnodes 1:2 --nproc-per-node 2 --max-restarts 3 \
        --rdzv-backend c10d --rdzv-endpoint "$MASTER:29400" --rdzv-id "$name" \
        --rdzv-conf "is_host=$((h == 0)),$RDZV_CONF" --local-addr "$(lab_addr "$h")" \
        --log-dir "$LAB_TMP/$name.torchelastic.$h" \
        "$HERE/elastic_train.py" --ckpt-dir "$LAB_TMP/$name.ckpt" --markers "$LAB_TMP/$name.mk" \
        --steps "$STEPS" --ckpt-every "$CKPT_EVERY" --slow-rank -1 --slow-ms "$STEP_MS" "$@" \
        >"$LAB_TMP/$name.$h.log" 2>&1 </dev/null &
    APID[h]=$!
    LAB_PID+=("$!")
}
# agents_wait NAME: waits for both torchruns (each under its timeout).
agents_wait() {
    local h rc
    for h in 0 1; do
        [ -n "${APID[h]:-}" ] || continue
        wait "${APID[h]}"
        rc=$?
        [ "$rc" -eq 0 ] || fail "$1: host $h's torchrun exited $rc"
        APID[h]=
    done
}
# agents_stop: TERM to both torchruns (timeout passes it on; torchrun stops its workers).
agents_stop() {
    local h
    for h in 0 1; do
        [ -n "${APID[h]:-}" ] && kill -TERM "${APID[h]}" 2>/dev/null
    done
}
# last_step NAME: the last STEP rank 0 printed (0 before the first).
last_step() {
    awk '$1 == "STEP" { n = $2 } END { print n + 0 }' "$LAB_TMP/$1.0.log" 2>/dev/null
}
# wait_for WHAT CMD...: runs CMD (step_done, markers) every 0.2 s until it succeeds, at
# most WAIT_S; 1 if not.
wait_for() {
    local what=$1 end
    shift
    end=$(($(lab_now_ms) + WAIT_S * 1000))
    until "$@"; do
        if [ "$(lab_now_ms)" -ge "$end" ]; then
            fail "no $what within $WAIT_S s"
            return 1
        fi
        sleep 0.2
    done
}
# shellcheck disable=SC2317 # called through wait_for
step_done() { [ "$(last_step "$1")" -ge "$2" ]; }
# markers NAME RESTART WORLD N: N ranks or more wrote their ready marker.
# shellcheck disable=SC2317 # called through wait_for
markers() {
    local f n=0
    for f in "$LAB_TMP/$1.mk/ready.r$2.w$3".*; do
        [ -f "$f" ] && n=$((n + 1))
    done
    [ "$n" -ge "$4" ]
}
show() {
    local f
    for f in "$LAB_TMP/$1".*.log; do
        echo "---- $(basename "$f")"
        grep -v -e '^\[\?W[0-9]\{4\} ' -e '^ *$' -e '^\(\[rank[0-9]*\]: \)\? ' \
            -e '^\(\[rank[0-9]*\]: \)\?Traceback' -e error_file -e '^STEP ' "$f" | head -n 40
        # rank 0's steps as STEP@WORLD
        grep '^STEP ' "$f" |
            awk '{ printf "%s%s", sep, $2 "@" $4; sep = " " } END { if (NR) print "" }'
    done
}

"$PY" "$HERE/elastic_train.py" --reference --steps "$STEPS" >"$LAB_TMP/ref.txt" ||
    { echo "FAIL: elastic_train.py --reference failed"; cat "$LAB_TMP/ref.txt"; exit 1; }

# verdict NAME: reads rank 0's START and STEP lines. Its second START line is the
# restarted group's, resuming after step S (RESUME S); the steps before it are the first
# run's. Prints the numbers and sets V_*; fails on any miss.
verdict() {
    local name=$1 out
    out=$(awk -v steps="$STEPS" '
        FNR == NR { ref[$2] = $3; next }
        $1 == "START" && $3 == 0 {
            starts++
            if (starts == 1 && $9 != 0) bad = bad " the_first_run_resumed_at_" $9
            if (starts == 2) resume = $9
            next
        }
        $1 == "STEP" {
            n = $2; loss[n] = $6
            if (starts <= 1) { last = n; w0 = $4; rc0 = $8; before[n] = $6 }
            else if (first == "") { first = n; w1 = $4; rc1 = $8 }
        }
        $1 == "DONE" { done = 1 }
        END {
            worst = 0
            for (n = 1; n <= steps; n++) {
                if (!(n in loss)) { miss = miss "," n; continue }
                d = loss[n] - ref[n]; if (d < 0) d = -d
                r = d / ref[n]; if (r > worst) { worst = r; wn = n }
            }
            if (starts > 2) bad = bad " " starts - 1 "_restarts"
            printf "starts=%d s=%s last=%d first=%s w0=%s w1=%s rc0=%s rc1=%s done=%d ",
                starts, resume, last, first, w0, w1, rc0, rc1, done
            printf "worst=%.3g worstn=%d ", worst, wn
            printf "ckloss=%s after=%s init=%s ",
                (resume in before) ? before[resume] : "-", loss[first], ref[1]
            printf "miss=%s bad=%s\n",
                (miss == "" ? "none" : substr(miss, 2)), (bad == "" ? "none" : substr(bad, 2))
        }
    ' "$LAB_TMP/ref.txt" "$LAB_TMP/$name.0.log")
    echo "$name: $out"
    local starts s last first complete worst after init miss bad
    starts=$(kv "$out" starts) s=$(kv "$out" s) last=$(kv "$out" last) first=$(kv "$out" first)
    complete=$(kv "$out" "done") worst=$(kv "$out" worst) after=$(kv "$out" after)
    init=$(kv "$out" init) miss=$(kv "$out" miss) bad=$(kv "$out" bad)
    if [ "$starts" -lt 2 ] || [ -z "$s" ] || [ -z "$first" ]; then
        fail "$name: rank 0 never trained in a restarted group (START lines: $starts)"
        return
    fi
    [ "$s" -gt 0 ] || fail "$name: the restarted group began at step 0, not from a checkpoint"
    [ $((s % CKPT_EVERY)) -eq 0 ] || fail "$name: resumed after step $s, not a checkpoint's"
    if [ "$s" -gt "$last" ] || [ "$s" -le $((last - 2 * CKPT_EVERY)) ]; then
        fail "$name: resumed after step $s, but step $last was done before the restart"
    fi
    [ "$first" -eq $((s + 1)) ] ||
        fail "$name: resumed from step $s, but its first step was $first"
    if [ "$complete" -ne 1 ] || [ "$miss" != none ]; then
        fail "$name: the job did not complete (steps never done: $miss)"
    fi
    [ "$bad" = none ] || fail "$name: ${bad//_/ }"
    awk -v w="$worst" 'BEGIN { exit !(w <= 1e-3) }' ||
        fail "$name: step $(kv "$out" worstn)'s loss is $worst (relative) off the" \
            "uninterrupted run's, above 1e-3"
    awk -v a="$after" -v i="$init" 'BEGIN { exit !(a < 0.25 * i) }' ||
        fail "$name: the loss after the restart ($after) is not below a quarter of the" \
            "initial one ($init)"
    V_S=$s V_LAST=$last V_W0=$(kv "$out" w0) V_W1=$(kv "$out" w1) V_RC0=$(kv "$out" rc0)
    V_RC1=$(kv "$out" rc1) V_CK=$(kv "$out" ckloss) V_AFTER=$after V_WORST=$worst
}
kv() { tr ' ' '\n' <<<"$1" | sed -n "s/^$2=//p" | head -n 1; }

case_kill() {
    local name=kill pid mk h1rc t0
    t0=$(lab_now_ms)
    AGENT_ENV=() # torchrun's default: the workers share the agent's store
    agent "$name" 0
    agent "$name" 1
    if wait_for "4 training ranks" markers "$name" 0 4 4 &&
        wait_for "step $KILL_AT" step_done "$name" "$KILL_AT"; then
        # Host 1 is node 1: global ranks 2 and 3; kill its local rank 1.
        mk=$(grep -l "local_rank=1 group_rank=1 " "$LAB_TMP/$name.mk"/ready.r0.w4.* | head -n 1)
        pid=$(sed -n 's/^pid=\([0-9]*\) .*/\1/p' "$mk" 2>/dev/null)
        if [ -n "$pid" ] && grep -q elastic_train "/proc/$pid/cmdline" 2>/dev/null; then
            KILLED_AT=$(last_step "$name")
            kill -KILL "$pid"
            echo "kill: killed $(basename "$mk") (pid $pid) after step $KILLED_AT"
        else
            fail "kill: no live worker of host 1 in the markers (${mk:-none})"
            agents_stop
        fi
    else
        agents_stop
    fi
    agents_wait "$name"
    T_KILL=$((($(lab_now_ms) - t0) / 1000))
    verdict "$name"
    # Host 1's agent counted the failure: its new workers say RESTART 1.
    h1rc=$(awk '$1 == "START" && $3 >= 2 && !seen[$7]++ { printf "%s%s", sep, $7; sep = " -> " }' \
        "$LAB_TMP/$name.1.log")
    grep -q "^START RANK [23] WORLD 4 RESTART 1 RESUME ${V_S:-x} " "$LAB_TMP/$name.1.log" ||
        fail "kill: host 1's ranks did not restart with TORCHELASTIC_RESTART_COUNT 1 (saw: $h1rc)"
    if [ "${V_W0:-}" != 4 ] || [ "${V_W1:-}" != 4 ]; then
        fail "kill: worlds ${V_W0:-?} then ${V_W1:-?}, expected 4 then 4"
    fi
    if [ "$FAILED" -eq 0 ]; then
        echo "PASS kill: rank $(sed -n 's/^pid=[0-9]* rank=\([0-9]*\) .*/\1/p' "$mk") killed" \
            "after step $KILLED_AT; host 1 restarted (its workers' restart counts: $h1rc;" \
            "rank 0's: $V_RC0 -> $V_RC1)," \
            "resumed at step $((V_S + 1)) from the checkpoint of step $V_S, loss $V_CK at the" \
            "checkpoint, $V_AFTER after, every step to $STEPS within $V_WORST of the" \
            "uninterrupted run; ${T_KILL} s"
    else
        show "$name"
    fi
}

case_join() {
    local name=join t0
    t0=$(lab_now_ms)
    # torch 2.15's c10d rendezvous caches the address of the store it shares with the
    # workers (the agent's) from the first round: a node that joins later waits for the
    # round's MASTER_ADDR key that no one sets, and its torchrun fails after 60 s
    # (dynamic_rendezvous.py, next_rendezvous). Without the sharing, rank 0's agent
    # publishes a free port every round and rank 0's worker hosts the store there.
    AGENT_ENV=(TORCH_DISABLE_SHARE_RDZV_TCP_STORE=1)
    agent "$name" 0 --pause-at "$PAUSE_AT" --pause-world 4
    if wait_for "2 training ranks on host 0" markers "$name" 0 2 2 &&
        wait_for "step $JOIN_AT" step_done "$name" "$JOIN_AT"; then
        JOINED_AT=$(last_step "$name")
        agent "$name" 1 --pause-at "$PAUSE_AT" --pause-world 4
        echo "join: host 1's torchrun started after step $JOINED_AT"
    else
        agents_stop
    fi
    agents_wait "$name"
    T_JOIN=$((($(lab_now_ms) - t0) / 1000))
    verdict "$name"
    if [ "${V_W0:-}" != 2 ] || [ "${V_W1:-}" != 4 ]; then
        fail "join: worlds ${V_W0:-?} then ${V_W1:-?}, expected 2 then 4"
    fi
    [ "${V_RC0:-}" = "${V_RC1:-}" ] ||
        echo "join: note: rank 0's restart count went from ${V_RC0:-?} to ${V_RC1:-?}"
    grep -q "^START RANK [23] WORLD 4 RESTART [0-9]* RESUME ${V_S:-x} " "$LAB_TMP/$name.1.log" ||
        fail "join: host 1's ranks did not start at world 4 from the checkpoint"
    if [ "$FAILED" -eq 0 ]; then
        echo "PASS join: world 2 to step $V_LAST, host 1 joined (started after step" \
            "$JOINED_AT), world 4 resumed at step $((V_S + 1)) from the checkpoint of step" \
            "$V_S (rank 0's restart count $V_RC0 -> $V_RC1: a membership change), loss $V_CK at" \
            "the checkpoint, $V_AFTER after, every step to $STEPS within $V_WORST of the" \
            "uninterrupted run; ${T_JOIN} s"
    else
        show "$name"
    fi
}

for c in "${CASES[@]}"; do
    V_S='' V_LAST='' V_W0='' V_W1='' V_RC0='' V_RC1='' V_CK='' V_AFTER='' V_WORST=''
    before=$FAILED
    FAILED=0
    case "$c" in
    kill) case_kill ;;
    join) case_join ;;
    esac
    [ "$before" -eq 0 ] || FAILED=1
done
exit "$FAILED"
