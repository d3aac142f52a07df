#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# run_plot_bench.sh PYTHON GSRUN GS_BENCH PLOT_BENCH: scripts/plot-bench on a
# real gs-bench JSON run (2 ranks, two algorithms) and on a compare.sh-style
# CSV directory writes PNG files; a file that is not gs-bench JSON is refused
# with a message naming it. A series given in several inputs is the median of
# them (--table prints it); --ratio plots REF/PEER busbw and refuses a series
# that is not there; scripts/bench-plots.sh redraws docs/bench's plots from
# the recorded data, each PNG under 120 KB. Exit 77 (skip) without matplotlib.
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

# Aggregation: the same series in three JSON files is their median (2.0),
# a compare directory's rounds too (3.0); the ratio is gradsync / peer (2.0).
for v in 1.0 3.0 2.0; do
    printf '{"bench": "gs-bench", "coll": "allreduce", "nranks": 2, "algo": "ring",\n "rows": [\n' > "$TMP/r$v.json"
    printf '  {"size": 1024, "count": 256, "time_us": 1.0, "busbw_gbps": %s, "wrong": 0, "algo": "ring", "algo_used": "ring"}\n ]}\n' "$v" >> "$TMP/r$v.json"
done
"$PY" "$PLOT" -o "$TMP/agg.png" --table "$TMP/r1.0.json=ring" "$TMP/r3.0.json=ring" "$TMP/r2.0.json=ring" \
    > "$TMP/out" 2>&1 || { cat "$TMP/out"; fail "plot-bench on three rounds of JSON"; }
grep -q '^| 1K | 2 |$' "$TMP/out" || fail "three rounds are not aggregated to their median: $(cat "$TMP/out")"
cp "$TMP/cmp/peer__r1.csv" "$TMP/cmp/gradsync__r1.csv"
cp "$TMP/cmp/peer__r1.csv" "$TMP/cmp/gradsync__r2.csv"
sed -i 's/5\.0,0\.2,0\.2/5.0,0.2,0.4/' "$TMP/cmp/gradsync__r1.csv"   # 1K: 0.4 and 0.2 -> 0.3
"$PY" "$PLOT" -o "$TMP/ratio.png" --table --ratio gradsync/peer --note "a note" "$TMP/cmp" \
    > "$TMP/out" 2>&1 || { cat "$TMP/out"; fail "plot-bench --ratio"; }
is_png "$TMP/ratio.png" || fail "no PNG from --ratio"
grep -q '^| 1K | 1.5 |$' "$TMP/out" || fail "ratio of the round medians is not 0.3/0.2: $(cat "$TMP/out")"
"$PY" "$PLOT" -o "$TMP/ratio2.png" --ratio gradsync "$TMP/cmp" > "$TMP/out" 2>&1 || {
    cat "$TMP/out"; fail "plot-bench --ratio REF alone"; }
is_png "$TMP/ratio2.png" || fail "no PNG from --ratio REF"
if "$PY" "$PLOT" -o "$TMP/r3.png" --ratio gradsync/nosuch "$TMP/cmp" > "$TMP/out" 2>&1; then
    fail "--ratio accepted a series that is not there"; fi
grep -q "nosuch" "$TMP/out" || fail "the --ratio refusal does not name the series: $(cat "$TMP/out")"

# docs/bench.md's plots, redrawn from the recorded runs.
BP=$(dirname "$PLOT")/bench-plots.sh
if [ -f "$BP" ] && [ -d "$(dirname "$PLOT")/../docs/bench/data" ]; then
    bash "$BP" --img "$TMP/img" --python "$PY" > "$TMP/out" 2>&1 || { cat "$TMP/out"; fail "bench-plots.sh"; }
    n=0
    for f in "$TMP"/img/*.png; do
        is_png "$f" || fail "bench-plots.sh: $f is not a PNG"
        [ "$(stat -c %s "$f")" -lt 122880 ] || fail "bench-plots.sh: $f is over 120 KB"
        n=$((n + 1))
    done
    [ $n -ge 5 ] || fail "bench-plots.sh wrote $n plots, expected 5: $(cat "$TMP/out")"
fi

echo "not json" > "$TMP/bad.json"
if "$PY" "$PLOT" -o "$TMP/bad.png" "$TMP/bad.json" > "$TMP/out" 2>&1; then fail "accepted a file with no gs-bench JSON"; fi
grep -q "bad.json" "$TMP/out" || fail "the refusal does not name the file: $(cat "$TMP/out")"
echo "PASS plot-bench: JSON, JSON plus a compare directory, medians over inputs, --ratio," \
     "bench-plots.sh on the recorded runs, and a bad file refused"
