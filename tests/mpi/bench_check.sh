#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# Run a gs-bench job (mpirun ... gs-bench COLL --check ...) and check what it
# printed, not only its exit status:
#   - the job exits 0;
#   - every one of NP ranks logged "communicator ready over MPI: rank R of NP,
#     transport T" (so the job really bootstrapped through MPI and used the
#     transport that was asked for);
#   - at least MIN_ROWS result rows, each with 0 wrong elements;
#   - the summary line "Out of bounds values : 0 OK".
# The command runs with GS_DEBUG=INFO (for the ready lines); with
# BENCH_CHECK_LOG=FILE set, its whole output is also copied to FILE (for
# further checks by the caller). Used by tests/mpi (mpi_bench_*) and
# tests/net/test_mpi_lab.sh.
#
# usage: bench_check.sh NP TRANSPORT MIN_ROWS COMMAND [ARGS...]
# exit:  0 pass, 1 fail, 2 usage
set -u

if [ $# -lt 4 ]; then
    echo "usage: $0 NP TRANSPORT MIN_ROWS COMMAND [ARGS...]" >&2
    exit 2
fi
np=$1 transport=$2 min_rows=$3
shift 3

log=$(mktemp "${TMPDIR:-/tmp}/gs_bench_check.XXXXXX")
trap 'rm -f "$log"' EXIT

GS_DEBUG=INFO "$@" >"$log" 2>&1
rc=$?
[ -n "${BENCH_CHECK_LOG:-}" ] && cp "$log" "$BENCH_CHECK_LOG"
# The job's output, without the INFO chatter, for ctest's log.
grep -v ' GS INFO ' "$log"

fail() {
    echo "bench_check: FAIL: $*" >&2
    echo "bench_check: full output with GS_DEBUG=INFO follows" >&2
    cat "$log" >&2
    exit 1
}

[ "$rc" -eq 0 ] || fail "the job exited with status $rc"
ready=$(grep -cE "communicator ready over MPI: rank [0-9]+ of $np, transport $transport\$" "$log")
[ "$ready" -eq "$np" ] ||
    fail "$ready of $np ranks reported 'communicator ready over MPI ... of $np, transport $transport'"
# Result rows start with the size and count (nccl-tests layout); the #wrong
# column is found from the header line ("# size count ... #wrong ...").
rows=$(grep -cE '^ +[0-9]+ +[0-9]+ ' "$log")
bad=$(awk '/^#.* #wrong/ && !col { for (i = 2; i <= NF; i++) if ($i == "#wrong") col = i - 1 }
           /^ +[0-9]+ +[0-9]+ / { if (!col || $col != "0") bad++ }
           END { print bad + 0 }' "$log")
[ "$rows" -ge "$min_rows" ] || fail "$rows result rows, expected at least $min_rows"
[ "$bad" -eq 0 ] || fail "$bad result rows with wrong elements"
grep -qE '^# Out of bounds values : 0 OK' "$log" || fail "no '# Out of bounds values : 0 OK' line"
echo "bench_check: OK: $np ranks over transport $transport, $rows sizes checked"
exit 0
