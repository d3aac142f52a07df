#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# run_probe.sh: GS_TUNE=probe measures the cost model's parameters at init.
# Checks, with gs-bench --check on 3 ranks:
#  1. every rank logs the probe line, and the numbers are the same on every
#     rank (they must agree, or ranks would pick different algorithms);
#     the collectives that follow are correct;
#  2. with ranks on two pretend hosts (GS_HOST_ID a,a,b through
#     run_hosts.sh) the probe still agrees and the job is correct;
#  3. an explicit GS_ALGO_BETA_MBPS survives the probe;
#  4. GS_TUNE=bogus fails init with a message naming it (gsrun stops the
#     other ranks when the first one exits);
#  5. the default (auto, also GS_TUNE= empty) probes when the ranks span two
#     pretend hosts, and agrees as in 2; it does not probe on one host, nor
#     with GS_TUNE=off.
#
# usage: run_probe.sh GSRUN GS_BENCH RUN_HOSTS_SH
set -u
GSRUN=$1 BENCH=$2 RUN_HOSTS=$3
tmp=$(mktemp -d "${TMPDIR:-/tmp}/gs_probe.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
fail() { echo "run_probe: FAIL: $*"; exit 1; }

export GS_TIMEOUT_MS=30000 GS_DEBUG=INFO GS_DEBUG_SUBSYS=ALGO GS_TUNE=probe
bench_args=(allreduce -b 4K -e 1M -f 16 -w 1 -n 2 --check)

# probe_lines DIR: the probe line of every rank, without its prefix and timing.
probe_lines() {
    local r
    for r in 0 1 2; do
        grep -h "GS_TUNE=probe over" "$1/log.$r" | sed 's/.*GS_TUNE=probe over [0-9]* ranks in [0-9]* ms://'
    done
}

check_run() { # NAME: logs in $tmp/NAME/log.%r, gs-bench output in $tmp/NAME/out
    local d=$tmp/$1 n
    n=$(probe_lines "$d" | wc -l)
    [ "$n" -eq 3 ] || fail "$1: $n of 3 ranks logged a probe line"
    n=$(probe_lines "$d" | sort -u | wc -l)
    [ "$n" -eq 1 ] || { probe_lines "$d"; fail "$1: ranks disagree on the probed model"; }
    grep -q "Out of bounds values : 0 OK" "$d/out" || { cat "$d/out"; fail "$1: wrong results"; }
    echo "run_probe: $1: $(probe_lines "$d" | head -1)"
}

mkdir -p "$tmp/flat" "$tmp/hosts" "$tmp/beta" "$tmp/bogus"
GS_DEBUG_FILE="$tmp/flat/log.%r" "$GSRUN" -n 3 --timeout 60 "$BENCH" "${bench_args[@]}" \
    >"$tmp/flat/out" 2>&1 || { cat "$tmp/flat/out"; fail "flat: gs-bench failed"; }
check_run flat

GS_DEBUG_FILE="$tmp/hosts/log.%r" bash "$RUN_HOSTS" "$GSRUN" a,a,b 60 "$BENCH" "${bench_args[@]}" \
    >"$tmp/hosts/out" 2>&1 || { cat "$tmp/hosts/out"; fail "hosts: gs-bench failed"; }
check_run hosts

GS_ALGO_BETA_MBPS=125 GS_DEBUG_FILE="$tmp/beta/log.%r" "$GSRUN" -n 3 --timeout 60 "$BENCH" \
    "${bench_args[@]}" >"$tmp/beta/out" 2>&1 || { cat "$tmp/beta/out"; fail "beta: gs-bench failed"; }
check_run beta
probe_lines "$tmp/beta" | head -1 | grep -q ", link 125.0 MB/s, reduce" ||
    fail "beta: the explicit GS_ALGO_BETA_MBPS=125 was overwritten by the probe"

if GS_TUNE=bogus "$GSRUN" -n 2 --timeout 30 "$BENCH" allreduce -b 4K -e 4K >"$tmp/bogus/out" 2>&1; then
    fail "bogus: GS_TUNE=bogus was accepted"
fi
n=$(grep -c 'GS_TUNE="bogus" is not known' "$tmp/bogus/out")
[ "$n" -ge 1 ] || { cat "$tmp/bogus/out"; fail "bogus: no rank named GS_TUNE"; }
mkdir -p "$tmp/auto_hosts" "$tmp/auto_flat" "$tmp/off_hosts"
env -u GS_TUNE GS_DEBUG_FILE="$tmp/auto_hosts/log.%r" bash "$RUN_HOSTS" "$GSRUN" a,a,b 60 "$BENCH" \
    "${bench_args[@]}" >"$tmp/auto_hosts/out" 2>&1 ||
    { cat "$tmp/auto_hosts/out"; fail "auto_hosts: gs-bench failed"; }
check_run auto_hosts
mkdir -p "$tmp/empty_hosts" # GS_TUNE= (empty) is the default too
GS_TUNE= GS_DEBUG_FILE="$tmp/empty_hosts/log.%r" bash "$RUN_HOSTS" "$GSRUN" a,a,b 60 "$BENCH" \
    "${bench_args[@]}" >"$tmp/empty_hosts/out" 2>&1 ||
    { cat "$tmp/empty_hosts/out"; fail "empty_hosts: gs-bench failed"; }
check_run empty_hosts
for d in auto_flat off_hosts; do
    if [ "$d" = auto_flat ]; then
        env -u GS_TUNE GS_DEBUG_FILE="$tmp/$d/log.%r" "$GSRUN" -n 3 --timeout 60 "$BENCH" \
            "${bench_args[@]}" >"$tmp/$d/out" 2>&1 || { cat "$tmp/$d/out"; fail "$d: gs-bench failed"; }
    else
        GS_TUNE=off GS_DEBUG_FILE="$tmp/$d/log.%r" bash "$RUN_HOSTS" "$GSRUN" a,a,b 60 "$BENCH" \
            "${bench_args[@]}" >"$tmp/$d/out" 2>&1 || { cat "$tmp/$d/out"; fail "$d: gs-bench failed"; }
    fi
    n=$(probe_lines "$tmp/$d" | wc -l)
    [ "$n" -eq 0 ] || fail "$d: $n ranks probed, expected none"
    grep -q "Out of bounds values : 0 OK" "$tmp/$d/out" || { cat "$tmp/$d/out"; fail "$d: wrong results"; }
    echo "run_probe: $d: no probe, results correct"
done

echo "run_probe: OK"
