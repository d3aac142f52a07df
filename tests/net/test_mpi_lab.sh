#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# test_mpi_lab.sh: the worked multi-host example of docs/cluster.md, run in
# the lab. netlab.sh builds NHOSTS hosts (network namespaces on a bridge);
# mpirun runs in host 0's namespace and starts an orted on every other host
# through the launch agent netns_agent.sh (--mca plm_rsh_agent, no sshd),
# with RPH ranks per host, Open MPI on TCP over the lab subnet only (pml ob1,
# btl tcp,self, btl/oob_tcp_if_include = the subnet). Each job is
#   gs-bench allreduce --transport T --check
# once with T=mpi (gradsync's algorithms over MPI point-to-point) and once
# with T=tcp (gradsync's own sockets, endpoints exchanged with
# MPI_Allgather). A job passes when (tests/mpi/bench_check.sh) it exits 0,
# every rank came up over MPI with transport T, every size was checked with
# no wrong element, and here: every rank ran on the host the hostfile gives
# it (the host name in its log prefix is its namespace's), and with tcp
# every rank listened on its own host's lab address.
#
# usage: test_mpi_lab.sh GS_BENCH [--hosts N] [--rph R] [--transports mpi,tcp]
#                        [--timeout S]
# Exit status: 0 pass, 1 fail, 2 usage, 77 skip (not root, no netns/bridge,
# no mpirun or unshare).
# shellcheck source-path=SCRIPTDIR
set -u

usage() {
    echo "usage: test_mpi_lab.sh GS_BENCH [--hosts N] [--rph R] [--transports mpi,tcp]" \
        "[--timeout S]" >&2
    exit 2
}
skip() { echo "test_mpi_lab: SKIP: $*" >&2; exit 77; }

HERE=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=lib_script.sh
. "$HERE/lib_script.sh"
[ $# -ge 1 ] || usage
GSBENCH=$1
shift
NH=2 RPH=2 TRANSPORTS=mpi,tcp LAB_TIMEOUT=120
while [ $# -gt 0 ]; do
    case "$1" in
    --transports) TRANSPORTS=$2; shift 2 ;;
    *) lab_opt "--hosts --rph --timeout" "$@" || usage; shift 2 ;;
    esac
done
lab_whole "$NH" "$RPH" "$LAB_TIMEOUT" || usage
[ -x "$GSBENCH" ] || { echo "test_mpi_lab: $GSBENCH is not executable" >&2; exit 2; }

AGENT=$HERE/netns_agent.sh
CHECK=$HERE/../mpi/bench_check.sh
[ "$(id -u)" -eq 0 ] || skip "needs root (network namespaces)"
MPIRUN=$(command -v mpirun) || skip "mpirun not found"
command -v unshare >/dev/null 2>&1 || skip "unshare not found (util-linux)"

LAB_PREFIX=gsmpi$$
# shellcheck source=lib_lab.sh
. "$HERE/lib_lab.sh"

# A job killed by the deadline can leave orteds and ranks in the namespaces:
# kill exactly those (ip netns pids), then remove the lab.
# shellcheck disable=SC2317 # called by the EXIT trap
mpi_lab_cleanup() {
    local h p
    for ((h = 0; h < NH; h++)); do
        for p in $(ip netns pids "${LAB_PREFIX}h$h" 2>/dev/null); do
            kill -KILL "$p" 2>/dev/null
        done
    done
    lab_cleanup
}
trap mpi_lab_cleanup EXIT

lab_up "$NH"
NP=$((NH * RPH))
SUBNET=$(lab_addr 0 | sed 's/\.[0-9]*$/.0/')/24
HOSTFILE=$LAB_TMP/hosts
: > "$HOSTFILE"
for ((h = 0; h < NH; h++)); do
    echo "${LAB_PREFIX}h$h slots=$RPH" >> "$HOSTFILE"
done
export GS_TIMEOUT_MS=${GS_TIMEOUT_MS:-30000}
export GS_DEBUG_SUBSYS=INIT,BOOT,NET # NET: the tcp "listening on" line

# check_hosts LOG TRANSPORT: rank r ran on host r/RPH (its log prefix is that
# namespace's host name) and, for tcp, listened on that host's lab address.
check_hosts() {
    local log=$1 tp=$2 r h got want ok=0
    for ((r = 0; r < NP; r++)); do
        h=$((r / RPH))
        got=$(grep -m1 -E "\] GS INFO INIT communicator ready over MPI: rank $r of $NP," "$log" |
            cut -d: -f1)
        if [ "$got" != "${LAB_PREFIX}h$h" ]; then
            echo "test_mpi_lab: rank $r ran on '${got:-?}', expected ${LAB_PREFIX}h$h"
            ok=1
        fi
        [ "$tp" = tcp ] || continue
        want=$(lab_addr "$h")
        got=$(sed -n "s/.*tcp: rank $r of $NP listening on \([^ ,]*\).*/\1/p" "$log" | head -n 1)
        if [ "${got%:*}" != "$want" ]; then
            echo "test_mpi_lab: rank $r listens on '${got:-?}', expected $want:PORT"
            ok=1
        fi
    done
    return $ok
}

fail=0
IFS=, read -r -a tps <<< "$TRANSPORTS"
for tp in "${tps[@]}"; do
    echo "test_mpi_lab: $NP ranks on $NH hosts ($RPH per host), gs-bench --transport $tp"
    # The worked example of docs/cluster.md: mpirun starts in host 0 through
    # the same agent that starts the other hosts' daemons.
    if ! BENCH_CHECK_LOG=$LAB_TMP/job_$tp.log bash "$CHECK" "$NP" "$tp" 3 \
        timeout -k 10 "$LAB_TIMEOUT" "$AGENT" "${LAB_PREFIX}h0" \
        "$MPIRUN" --allow-run-as-root --bind-to none -np "$NP" --hostfile "$HOSTFILE" \
        --mca plm_rsh_agent "$AGENT" \
        --mca pml ob1 --mca btl tcp,self \
        --mca btl_tcp_if_include "$SUBNET" --mca oob_tcp_if_include "$SUBNET" \
        -x GS_DEBUG -x GS_DEBUG_SUBSYS -x GS_TIMEOUT_MS \
        "$GSBENCH" allreduce --transport "$tp" --check -b 1K -e 4M -f 8 -w 1 -n 3; then
        echo "test_mpi_lab: FAIL: --transport $tp"
        fail=1
        continue
    fi
    if ! check_hosts "$LAB_TMP/job_$tp.log" "$tp"; then
        echo "test_mpi_lab: FAIL: --transport $tp: ranks not where the hostfile puts them"
        grep -E 'communicator ready|listening on' "$LAB_TMP/job_$tp.log"
        fail=1
        continue
    fi
    echo "test_mpi_lab: --transport $tp OK (every rank on its host)"
done
[ "$fail" -eq 0 ] || { echo "test_mpi_lab: FAIL"; exit 1; }
echo "test_mpi_lab: PASS"
exit 0
