#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# tests/gpu/run_check.sh RUN_SH WORKDIR: checks tests/gpu/run.sh without a
# GPU and without building anything (ctest gpu_run_sh, label static):
#   - bad arguments exit 2 with the usage; --help exits 0;
#   - --plan lists each mode's steps and caps, every cap within the deadline;
#   - with no GPU (GPURUN_NVSMI=false) it stops at once: a gpu FAIL row;
#   - GPURUN_DRY=1 --no-build on a fake build folder (a GPU test that fails,
#     a gsrun that hangs, a gs-bench that fails; an nvidia-smi that answers
#     as an H200's driver would, for the GPU lines), in both modes: the failed
#     test and the timed-out steps are FAIL rows ("timed out after N s"),
#     and a tight deadline gives "not run" rows;
#   - SIGTERM in the middle of a step: the step is a FAIL row, the hung
#     child is gone, the table still comes;
# and every time the table is the last thing printed, summary.txt holds it,
# the results folder has at most 8 files, and the exit status is 1.
set -uo pipefail

RUN=${1:?usage: run_check.sh RUN_SH WORKDIR}
WORK=${2:?usage: run_check.sh RUN_SH WORKDIR}
rm -rf "$WORK"
mkdir -p "$WORK"
FAILS=0
fail() {
  echo "FAIL: $*"
  FAILS=$((FAILS + 1))
}
ok() { echo "ok: $*"; }

# expect_rc WANT GOT WHAT
expect_rc() {
  if [ "$2" = "$1" ]; then ok "$3: exit $2"; else fail "$3: exit $2, want $1"; fi
}
# expect_grep FILE PATTERN WHAT
expect_grep() {
  if grep -qE -- "$2" "$1"; then ok "$3"; else
    fail "$3: no line matching '$2' in $1"
    sed 's/^/  | /' "$1" | tail -30
  fi
}
# table_last OUTFILE RESULTS WHAT: the table ends the output and is summary.txt.
table_last() {
  local out=$1 res=$2 what=$3 n
  if tail -1 "$out" | grep -q '^RESULT: FAIL'; then ok "$what: RESULT: FAIL is the last line"; else
    fail "$what: the last line is '$(tail -1 "$out")', want RESULT: FAIL"
  fi
  if [ -s "$res/summary.txt" ] && [ "$(tail -n "$(wc -l <"$res/summary.txt")" "$out")" = "$(cat "$res/summary.txt")" ]; then
    ok "$what: summary.txt is the end of the output"
  else
    fail "$what: summary.txt is missing or is not the end of the output"
  fi
  expect_grep "$out" '^step +status +secs +key' "$what: the table has its header"
  n=$(find "$res" -type f | wc -l)
  if [ "$n" -le 8 ]; then ok "$what: $n files in the results folder"; else fail "$what: $n files in $res (at most 8)"; fi
}

# --- arguments -------------------------------------------------------------
bash "$RUN" --bogus >"$WORK/a1.out" 2>&1
expect_rc 2 $? "--bogus"
expect_grep "$WORK/a1.out" 'unknown option: --bogus' "--bogus is named"
expect_grep "$WORK/a1.out" '^usage: run.sh' "--bogus prints the usage"
bash "$RUN" --quick --full >"$WORK/a2.out" 2>&1
expect_rc 2 $? "--quick --full"
bash "$RUN" one two >"$WORK/a3.out" 2>&1
expect_rc 2 $? "two build folders"
bash "$RUN" --results >"$WORK/a4.out" 2>&1
expect_rc 2 $? "--results without a folder"
GPURUN_DEADLINE_S=soon bash "$RUN" --plan >"$WORK/a5.out" 2>&1
expect_rc 2 $? "GPURUN_DEADLINE_S=soon"
bash "$RUN" --help >"$WORK/a6.out" 2>&1
expect_rc 0 $? "--help"

# --- --plan ----------------------------------------------------------------
for mode in quick full; do
  bash "$RUN" --plan "--$mode" >"$WORK/plan-$mode.out" 2>&1
  expect_rc 0 $? "--plan --$mode"
  deadline=$(sed -n 's/^deadline \([0-9]*\) s.*/\1/p' "$WORK/plan-$mode.out")
  want=230
  [ "$mode" = full ] && want=345
  if [ "$deadline" = "$want" ]; then ok "--plan --$mode: deadline $want s"; else
    fail "--plan --$mode: deadline '${deadline}', want $want"
  fi
  nsteps=$(grep -cE '^(gpu|probe|configure|build|ctest|kernels|nccl|staged|host|int8) +[0-9]+ ' "$WORK/plan-$mode.out")
  want=8
  [ "$mode" = full ] && want=10
  if [ "$nsteps" = "$want" ]; then ok "--plan --$mode: $nsteps steps"; else
    fail "--plan --$mode: $nsteps steps, want $want"
  fi
  over=$(awk -v d="${deadline:-0}" '$2 ~ /^[0-9]+$/ && $2 + 0 > d {print $1}' "$WORK/plan-$mode.out")
  if [ -z "$over" ]; then ok "--plan --$mode: every cap within the deadline"; else
    fail "--plan --$mode: caps past the deadline: $over"
  fi
done

# --- no GPU ----------------------------------------------------------------
t0=$(date +%s)
GPURUN_NVSMI=false bash "$RUN" --quick --results "$WORK/r-nogpu" "$WORK/build-none" >"$WORK/nogpu.out" 2>&1
expect_rc 1 $? "no GPU"
table_last "$WORK/nogpu.out" "$WORK/r-nogpu" "no GPU"
expect_grep "$WORK/nogpu.out" '^gpu +FAIL .*no NVIDIA GPU' "no GPU: a gpu FAIL row"
[ -e "$WORK/build-none" ] && fail "no GPU: it made a build folder"
[ $(($(date +%s) - t0)) -le 30 ] || fail "no GPU: took more than 30 s"

# --- a fake build folder ---------------------------------------------------
FB=$WORK/fake-build
mkdir -p "$FB/tools" "$FB/bench"
cat >"$FB/CMakeCache.txt" <<'EOF'
GS_WERROR:BOOL=ON
CMAKE_CUDA_ARCHITECTURES:STRING=90
EOF
cat >"$FB/CTestTestfile.cmake" <<'EOF'
add_test(fake_gpu_ok "/bin/sh" "-c" "echo a fake GPU test that passes")
set_tests_properties(fake_gpu_ok PROPERTIES LABELS "gpu")
add_test(fake_gpu_bad "/bin/sh" "-c" "echo 'FAIL: a fake GPU test that fails'; exit 1")
set_tests_properties(fake_gpu_bad PROPERTIES LABELS "gpu")
EOF
# gsrun hangs (and says where it is); gs-bench and gs_info answer at once.
cat >"$FB/tools/gsrun" <<EOF
#!/bin/sh
echo \$\$ >>"$WORK/gsrun.pids"
exec sleep 1000
EOF
printf '#!/bin/sh\necho "gs-bench: no GPU here"\nexit 1\n' >"$FB/bench/gs-bench"
printf '#!/bin/sh\necho "device buffers: CUDA on, NCCL off; fake"\necho "zstd: off (fake)"\n' >"$FB/tools/gs_info"
chmod +x "$FB/tools/gsrun" "$FB/bench/gs-bench" "$FB/tools/gs_info"

# An nvidia-smi that answers as a driver of an H200 would.
cat >"$WORK/nvidia-smi" <<'EOF'
#!/bin/sh
case "$*" in
  -L) echo "GPU 0: NVIDIA H200 (UUID: GPU-00000000-0000-0000-0000-000000000000)" ;;
  --query-gpu=*) echo "NVIDIA H200, 143771 MiB, 570.124.06, 9.0" ;;
  *) echo "| NVIDIA-SMI 570.124.06    Driver Version: 570.124.06    CUDA Version: 12.8 |" ;;
esac
EOF
chmod +x "$WORK/nvidia-smi"

for mode in quick full; do
  R=$WORK/r-dry-$mode
  t0=$(date +%s)
  NVSMI_USED=false
  [ "$mode" = quick ] && NVSMI_USED=$WORK/nvidia-smi
  GPURUN_DRY=1 GPURUN_STEP_S=2 GPURUN_NVSMI=$NVSMI_USED bash "$RUN" "--$mode" --no-build --results "$R" "$FB" \
    >"$WORK/dry-$mode.out" 2>&1
  expect_rc 1 $? "dry --$mode"
  table_last "$WORK/dry-$mode.out" "$R" "dry --$mode"
  expect_grep "$WORK/dry-$mode.out" '^ctest -L gpu +FAIL .*2 tests, 1 failed \(fake_gpu_bad\)' \
    "dry --$mode: the failed GPU test is named"
  expect_grep "$WORK/dry-$mode.out" '^allreduce staged, 4 ranks +FAIL .*timed out after 2 s' \
    "dry --$mode: the hung all-reduce timed out"
  expect_grep "$WORK/dry-$mode.out" '^allreduce int8, 4 ranks, device +FAIL .*timed out after 2 s' \
    "dry --$mode: the compressed all-reduce timed out"
  expect_grep "$WORK/dry-$mode.out" '^built: +CUDA yes, NCCL no, zstd no, -Werror ON' \
    "dry --$mode: what the build has"
  if [ "$mode" = quick ]; then
    expect_grep "$WORK/dry-$mode.out" '^GPU: +NVIDIA H200, 143771 MiB, compute capability 9.0$' \
      "dry --quick: the GPU line from nvidia-smi"
    expect_grep "$WORK/dry-$mode.out" '^driver: 570.124.06 \(CUDA 12.8\)$' "dry --quick: the driver line"
  fi
  if [ "$mode" = full ]; then
    expect_grep "$WORK/dry-$mode.out" '^kernels 1M..256M +FAIL .*exit 1' "dry --full: the kernels row"
    expect_grep "$WORK/dry-$mode.out" '^allreduce host buffers, 4 ranks +FAIL' "dry --full: the host row"
  fi
  [ $(($(date +%s) - t0)) -le 40 ] || fail "dry --$mode: took more than 40 s"
done

# A deadline that leaves no time for the last steps: "not run" rows, and the
# run ends by the deadline.
R=$WORK/r-deadline
t0=$(date +%s)
GPURUN_DRY=1 GPURUN_DEADLINE_S=18 GPURUN_NVSMI=false bash "$RUN" --quick --no-build --results "$R" "$FB" \
  >"$WORK/deadline.out" 2>&1
expect_rc 1 $? "deadline"
took=$(($(date +%s) - t0))
table_last "$WORK/deadline.out" "$R" "deadline"
expect_grep "$WORK/deadline.out" 'FAIL .*not run: no time left before the 18 s deadline' \
  "deadline: a step with no time left is a FAIL row"
if [ "$took" -le 24 ]; then ok "deadline: ended after $took s"; else fail "deadline: took $took s for an 18 s deadline"; fi

# SIGTERM in the middle of the staged all-reduce.
R=$WORK/r-term
: >"$WORK/gsrun.pids"
GPURUN_DRY=1 GPURUN_NVSMI=false bash "$RUN" --quick --no-build --results "$R" "$FB" >"$WORK/term.out" 2>&1 &
pid=$!
for _ in $(seq 1 100); do
  grep -q '^=== allreduce staged' "$R/04-allreduce.txt" 2>/dev/null && [ -s "$WORK/gsrun.pids" ] && break
  sleep 0.2
done
sleep 1
t0=$(date +%s)
kill -TERM "$pid"
wait "$pid"
expect_rc 1 $? "SIGTERM"
took=$(($(date +%s) - t0))
table_last "$WORK/term.out" "$R" "SIGTERM"
expect_grep "$WORK/term.out" '^allreduce .* +FAIL .*interrupted by SIGTERM' "SIGTERM: the running step is a FAIL row"
expect_grep "$WORK/term.out" '^run.sh +FAIL .*stopped by SIGTERM' "SIGTERM: a run.sh row says so"
if [ "$took" -le 10 ]; then ok "SIGTERM: the table came $took s after the signal"; else fail "SIGTERM: $took s after the signal"; fi
sleep 0.5
while read -r gp; do
  if kill -0 "$gp" 2>/dev/null; then
    fail "SIGTERM: the hung gsrun ($gp) is still running"
    kill -KILL "$gp" 2>/dev/null
  fi
done <"$WORK/gsrun.pids"

if [ "$FAILS" = 0 ]; then
  echo "run_check: every check passed"
  exit 0
fi
echo "run_check: $FAILS check(s) failed"
exit 1
