#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# test_trap_guard.sh: the EXIT traps of tests/net/lib_lab.sh and
# tests/integration/lib_procs.sh act only in the shell that sourced them. A
# background subshell that receives TERM in the instant after fork runs the
# parent's `exit 130` trap and then its EXIT trap; before the guard, that
# removed the lab's logs under the running test (net_heartbeat_stop failed in
# CI with "rank.0.log: No such file"). Each library is sourced in a child
# shell that forks and TERMs 100 subshells at once, then checks that its
# scratch folder survived; the folder must be gone once the shell exits.
# Exit status: 0 pass, 1 fail.
set -u
HERE=$(cd "$(dirname "$0")/../.." && pwd)
fail=0
for lib in tests/net/lib_lab.sh tests/integration/lib_procs.sh; do
    out=$(bash -c '
        . "$1"
        dir=${LAB_TMP:-$TMP}
        echo "DIR $dir"
        for ((i = 0; i < 100; i++)); do
            ( sleep 5 >/dev/null 2>&1 ) &
            kill -TERM $! 2>/dev/null
            wait $! 2>/dev/null
        done
        if [ -d "$dir" ]; then echo "KEPT"; else echo "REMOVED"; fi
    ' guard "$HERE/$lib" 2>/dev/null)
    dir=$(sed -n 's/^DIR //p' <<<"$out")
    if ! grep -q '^KEPT$' <<<"$out"; then
        echo "test_trap_guard: $lib: a killed subshell removed the scratch folder"
        fail=1
    elif [ -z "$dir" ] || [ -d "$dir" ]; then
        echo "test_trap_guard: $lib: the scratch folder '$dir' outlived its shell"
        fail=1
    else
        echo "test_trap_guard: $lib: PASS"
    fi
done
exit $fail
