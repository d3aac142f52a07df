#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# run_plot_bench.sh PYTHON GSRUN GS_BENCH PLOT_BENCH: scripts/plot-bench on a
# real gs-bench JSON run (2 ranks, two algorithms) and on a compare.sh-style
# CSV directory writes PNG files; a file that is not gs-bench JSON is refused
# with a message naming it. Exit 77 (skip) without matplotlib.
set -u
PY=$1 GSRUN=$2 BENCH=$3 PLOT=$4
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
"$PY" -c "import matplotlib" 2>/dev/null || { echo "SKIP: no matplotlib for $PY"; exit 77; }
fail() { echo "FAIL: $*"; exit 1; }
is_png() { [ "$(head -c 8 "$1" | od -An -tx1 | tr -d ' \n')" = "89504e470d0a1a0a" ]; }

"$GSRUN" -n 2 --timeout 60 "$BENCH" allreduce -b 1K -e 64K -f 4 -w 1 -n 3 --json \
    --algo ring,rd > "$TMP/ar.json" 2>"$TMP/ar.err" || { cat "$TMP/ar.err"; fail "gs-bench"; }
"$PY" "$PLOT" -o "$TMP/ar.png" "$TMP/ar.json" > "$TMP/out" 2>&1 || { cat "$TMP/out"; fail "plot-bench on JSON"; }
is_png "$TMP/ar.png" || fail "no PNG from the JSON run"

mkdir "$TMP/cmp"
printf 'coll,nranks,size,count,type,redop,root,algo,inplace,time_us,algbw_gbps,busbw_gbps,wrong\n' > "$TMP/cmp/peer__r1.csv"
printf 'allreduce,2,1024,256,f32,sum,-1,auto,1,5.0,0.2,0.2,0\nallreduce,2,4096,1024,f32,sum,-1,auto,1,6.0,0.7,0.7,0\n' >> "$TMP/cmp/peer__r1.csv"
"$PY" "$PLOT" -o "$TMP/both.png" "$TMP/ar.json" "$TMP/cmp=compare" > "$TMP/out" 2>&1 || {
    cat "$TMP/out"; fail "plot-bench on JSON and a compare directory"; }
is_png "$TMP/both.png" || fail "no PNG from JSON plus a compare directory"

echo "not json" > "$TMP/bad.json"
if "$PY" "$PLOT" -o "$TMP/bad.png" "$TMP/bad.json" > "$TMP/out" 2>&1; then fail "accepted a file with no gs-bench JSON"; fi
grep -q "bad.json" "$TMP/out" || fail "the refusal does not name the file: $(cat "$TMP/out")"
echo "PASS plot-bench: JSON, JSON plus a compare directory, and a bad file refused"
