#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# scripts/test-loaded.sh BUILD_DIR [CTEST_ARGS...]: the whole suite (ctest, as
# `make test` runs it) with LOAD_BURNERS (default 2) CPU-burning processes
# beside it, as on a busy CI machine; then the margin of every test: its time
# over its deadline (a launcher's --timeout in its command, else its ctest
# TIMEOUT, else the --timeout given here), the ten
# with the least margin first. Every deadline should be at least 3x what the
# test takes on a quiet machine, so a loaded run must pass (CONTRIBUTING.md).
#
# Writes BUILD_DIR/test-loaded/{junit.xml,margins.txt}. Exit status: ctest's.
# The burners are `timeout`-bounded (LOAD_MAX_S, default 3 h) and killed on
# every exit.
set -uo pipefail

BUILD=${1:?usage: test-loaded.sh BUILD_DIR [CTEST_ARGS...]}
shift
BURNERS=${LOAD_BURNERS:-2}
MAX_S=${LOAD_MAX_S:-10800}
TIMEOUT=600
OUTDIR=$BUILD/test-loaded
PY=/usr/bin/python3
[ -x "$PY" ] || PY=python3
mkdir -p "$OUTDIR" || exit 1
BUILD=$(cd "$BUILD" && pwd)
OUTDIR=$BUILD/test-loaded

pids=()
cleanup() {
    local p
    for p in "${pids[@]}"; do
        kill "$p" 2>/dev/null
    done
    for p in "${pids[@]}"; do
        wait "$p" 2>/dev/null
    done
}
trap cleanup EXIT
trap 'exit 130' INT TERM

for _ in $(seq 1 "$BURNERS"); do
    timeout "$MAX_S" bash -c 'while :; do :; done' &
    pids+=("$!")
done
echo "test-loaded: $BURNERS CPU burners beside the suite (load $(cut -d' ' -f1 /proc/loadavg))"

t0=$(date +%s)
(cd "$BUILD" && ctest --output-on-failure --timeout "$TIMEOUT" \
    --output-junit "$OUTDIR/junit.xml" "$@")
rc=$?
echo "test-loaded: ctest exit $rc after $(($(date +%s) - t0)) s"
cleanup
pids=()

# The deadlines: each test's TIMEOUT property, else the --timeout above.
(cd "$BUILD" && ctest --show-only=json-v1) >"$OUTDIR/tests.json" 2>/dev/null
"$PY" - "$OUTDIR/junit.xml" "$OUTDIR/tests.json" "$TIMEOUT" >"$OUTDIR/margins.txt" <<'EOF'
import json
import sys
import xml.etree.ElementTree as ET

junit, tests_json, default = sys.argv[1], sys.argv[2], float(sys.argv[3])
deadline = {}
try:
    for t in json.load(open(tests_json)).get("tests", []):
        tmo = default
        for p in t.get("properties", []):
            if p.get("name") == "TIMEOUT":
                tmo = float(p["value"])
        # A launcher's own limit (gsrun --timeout N) comes before ctest's.
        cmd = t.get("command") or []
        for i, word in enumerate(cmd[:-1]):
            if word == "--timeout":
                try:
                    tmo = min(tmo, float(cmd[i + 1]))
                except ValueError:
                    pass
                break
        deadline[t["name"]] = tmo
except (OSError, ValueError):
    pass
rows = []
for case in ET.parse(junit).getroot().iter("testcase"):
    name = case.get("name")
    t = float(case.get("time") or 0)
    status = case.get("status") or ("fail" if case.find("failure") is not None else "run")
    d = deadline.get(name, default)
    rows.append((t / d if d > 0 else 0.0, name, t, d, status))
rows.sort(reverse=True)
print("%-44s %9s %9s %7s %s" % ("test", "time_s", "limit_s", "t/limit", "status"))
for r in rows:
    print("%-44s %9.1f %9.0f %7.3f %s" % (r[1], r[2], r[3], r[0], r[4]))
EOF
echo "test-loaded: the 10 tests with the least margin (time / ctest deadline;" \
    "all in $OUTDIR/margins.txt):"
head -n 11 "$OUTDIR/margins.txt"
exit "$rc"
