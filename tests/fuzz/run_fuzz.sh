#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# run_fuzz.sh BUILD SECONDS JOBS: run every libFuzzer target of BUILD
# (tests/fuzz/fuzz_*, built by `make fuzz`) for SECONDS each, JOBS at a
# time, seeded from tests/fuzz/corpora/<target>/. New inputs go to
# BUILD/fuzz-work/<target>/ (the committed corpus is never written), a crash,
# leak, timeout or sanitizer report to BUILD/fuzz-artifacts/<target>/ and
# fails the run. With FUZZ_MERGE=1, what a target found is merged
# (-merge=1, coverage-minimal) into its committed corpus afterwards.
set -u
BUILD=${1:?usage: run_fuzz.sh BUILD SECONDS JOBS}
SECONDS_EACH=${2:-60}
JOBS=${3:-2}
HERE=$(cd "$(dirname "$0")" && pwd)
BIN=$BUILD/tests/fuzz
WORK=$BUILD/fuzz-work
ART=$BUILD/fuzz-artifacts

targets=()
for f in "$BIN"/fuzz_*; do
    [ -x "$f" ] && [ -f "$f" ] && targets+=("$(basename "$f")")
done
if [ "${#targets[@]}" -eq 0 ]; then
    echo "run_fuzz: no fuzz_* binary in $BIN (configure with -DGS_FUZZ=ON and clang)" >&2
    exit 1
fi
rm -rf "$ART"
mkdir -p "$WORK" "$ART"
# The decoders WARN about every malformed input; millions of lines would
# only slow the fuzzer down.
export GS_DEBUG=${GS_DEBUG:-NONE}

# one TARGET: fuzz it; prints one summary line; exit status 0 when clean.
one() {
    local t=$1 name=${1#fuzz_} log rc units
    log=$WORK/$name.log
    mkdir -p "$WORK/$name" "$ART/$name"
    "$BIN/$t" -max_total_time="$SECONDS_EACH" -timeout=10 -rss_limit_mb=2048 \
        -print_final_stats=1 -artifact_prefix="$ART/$name/" \
        "$WORK/$name" "$HERE/corpora/$name" > "$log" 2>&1
    rc=$?
    units=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log")
    if [ "$rc" -ne 0 ] || [ -n "$(ls -A "$ART/$name")" ]; then
        echo "FAIL $name (exit $rc): $(grep -m1 -E 'ERROR|SUMMARY|runtime error' "$log")"
        echo "     reproducer(s): $(find "$ART/$name" -type f | tr '\n' ' ') log: $log"
        return 1
    fi
    echo "ok   $name: ${units:-?} inputs in ${SECONDS_EACH}s, coverage $(grep -o "DONE *cov: [0-9]*" "$log" | grep -o "[0-9]*$") edges," \
        "$(find "$WORK/$name" -type f | wc -l) new inputs"
    return 0
}
export -f one
export BIN WORK ART HERE SECONDS_EACH

start=$(date +%s)
# shellcheck disable=SC2016 # $1 is the inner shell's
printf '%s\n' "${targets[@]}" | xargs -P "$JOBS" -I{} bash -c 'one "$1"' _ {} > "$WORK/summary" 2>&1
rc=$?
cat "$WORK/summary"
if [ "${FUZZ_MERGE:-0}" = 1 ]; then
    for t in "${targets[@]}"; do
        name=${t#fuzz_}
        before=$(find "$HERE/corpora/$name" -type f | wc -l)
        "$BIN/$t" -merge=1 "$HERE/corpora/$name" "$WORK/$name" > "$WORK/$name.merge.log" 2>&1
        echo "merged $name: $before -> $(find "$HERE/corpora/$name" -type f | wc -l) files"
    done
fi
echo "run_fuzz: ${#targets[@]} targets, ${SECONDS_EACH}s each, $JOBS at a time," \
    "$(($(date +%s) - start))s"
[ "$rc" -eq 0 ]
