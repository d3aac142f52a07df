#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# tests/gpu/run.sh: the GPU checks of gradsync in one go, on a machine with
# an NVIDIA GPU (made for one H200 and 16 cores), inside a deadline. From
# the repository root:
#
#   bash tests/gpu/run.sh --quick     # under 4 min: build, GPU tests, one all-reduce per path
#   bash tests/gpu/run.sh             # full, under 6 min: also kernel GB/s and host buffers
#   bash tests/gpu/run.sh --plan      # the steps and their time caps; runs nothing
#   bash tests/gpu/run.sh --quick --no-build   # again, on the build already there
#
# usage: run.sh [--quick | --full] [--no-build] [--plan] [--results DIR] [BUILD_DIR]
#   BUILD_DIR       the build folder (default ./build-gpu): wiped and configured
#                   afresh, unless --no-build (then its build is used as it is)
#   --results DIR   where every log goes (default $OUT, the device tool's folder,
#                   else ./gpu-results): at most 6 files, each cut to 4 MiB
#
# Needs: an NVIDIA GPU and driver (nvidia-smi), the image's CUDA toolkit
# (nvcc), cmake and a C compiler. NCCL is used when found (NCCL_HOME, the
# toolkit, /usr, pip's nvidia-nccl wheel), and libzstd when found
# (-DGS_WITH_ZSTD=AUTO); without either the rest is built and checked,
# and the table says what was built. cmocka is not needed.
#
# Steps, each under timeout(1), each log kept:
#   gpu        nvidia-smi: the GPU's name, memory, driver, compute capability
#   probe      nvcc -arch=native builds a kernel and runs it (else sm_<cc>)
#   configure  a fresh build folder: CUDA on, NCCL if found, zstd AUTO,
#              -DGS_WERROR=ON, this GPU's architecture only, no MPI
#   build      cmake --build --target gs_gpu_all (tests/gpu, gsrun, gs-bench,
#              gs_info); when -Werror stops it, again without, to run the rest
#   ctest      ctest -L gpu (a skip is a failure here: the GPU is there)
#   kernels    (full only) gs-bench kernels: every kernel's GB/s against a copy
#   allreduce  gs-bench allreduce --device cuda --check, one per path:
#              NCCL (1 rank: NCCL refuses two ranks on one GPU), staged (4
#              ranks sharing the GPU through pinned host memory), compressed
#              (--codec int8, 4 ranks); full mode adds 4 ranks on host
#              buffers (busbw device/host)
# Every step's timeout is its cap (--plan lists them) or the time left
# before the deadline (quick 230 s, full 345 s; the device tool stops a
# call at 600 s), whichever is less. A step that times out is a FAIL row
# "timed out after N s"; one with no time left is a FAIL row "not run".
#
# The summary table is printed last, whatever happens (a failed step, a
# deadline, SIGTERM, SIGINT: traps), and kept in summary.txt: the GPU,
# driver, CUDA and NCCL versions, what was built (CUDA, NCCL, zstd,
# -Werror), and per step its status, seconds and key number. stdout
# carries one line per step and the tail of a failed step's log, so that
# the end of the output is the whole story.
#
# Exit status: 0 when every step passed; 1 otherwise (no GPU, a failure,
# a timeout, a signal, a dry run); 2 for bad arguments.
#
# Knobs: GPURUN_DRY=1 runs the plumbing without a GPU (no GPU check, no
# probe, sm_90; the GPU steps fail or skip, the table says so);
# GPURUN_DEADLINE_S (seconds), GPURUN_STEP_S (a cap on every step),
# GPURUN_JOBS (build and ctest parallelism, default nproc), GPURUN_NVSMI
# (the nvidia-smi to ask). tests/gpu/run_check.sh tests the script with them.
set -uo pipefail

usage() {
  sed -n '/^# usage:/,/^#$/p' "${BASH_SOURCE[0]}" | sed '$d; s/^# \{0,1\}//'
}
usage_error() {
  echo "run.sh: $1" >&2
  usage >&2
  exit 2
}

MODE=""
NO_BUILD=0
PLAN=0
RESULTS=${OUT:-$PWD/gpu-results}
BUILD_ARG=""
while [ $# -gt 0 ]; do
  case $1 in
    --quick | --full)
      [ -z "$MODE" ] || [ "$MODE" = "${1#--}" ] || usage_error "choose one of --quick and --full"
      MODE=${1#--}
      ;;
    --no-build) NO_BUILD=1 ;;
    --plan) PLAN=1 ;;
    --results)
      if [ $# -lt 2 ] || [ -z "$2" ]; then usage_error "--results needs a folder"; fi
      RESULTS=$2
      shift
      ;;
    --results=*)
      RESULTS=${1#--results=}
      [ -n "$RESULTS" ] || usage_error "--results needs a folder"
      ;;
    -h | --help)
      usage
      exit 0
      ;;
    -*) usage_error "unknown option: $1" ;;
    *)
      [ -z "$BUILD_ARG" ] || usage_error "one build folder only (got '$BUILD_ARG' and '$1')"
      BUILD_ARG=$1
      ;;
  esac
  shift
done
MODE=${MODE:-full}
BUILD_ARG=${BUILD_ARG:-build-gpu}
for v in GPURUN_DEADLINE_S GPURUN_STEP_S GPURUN_JOBS; do
  case ${!v:-0} in
    '' | *[!0-9]*) usage_error "$v must be a number of seconds or jobs (got '${!v}')" ;;
  esac
done
case "$BUILD_ARG" in
  /*) BUILD=$BUILD_ARG ;;
  *) BUILD=$PWD/$BUILD_ARG ;;
esac
case "$RESULTS" in
  /*) ;;
  *) RESULTS=$PWD/$RESULTS ;;
esac

SRC=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
DRY=${GPURUN_DRY:-0}
NPROC=$(nproc 2>/dev/null || echo 4)
JOBS=${GPURUN_JOBS:-$NPROC}
RESERVE_S=10 # kept back at the end: the table and the logs' trimming

# ---------------------------------------------------------------------------
# The steps of each mode: id, cap (s), title. The run and --plan read this.
# ---------------------------------------------------------------------------
if [ "$MODE" = quick ]; then
  DEADLINE_S=${GPURUN_DEADLINE_S:-230}
  GPU_TEST_TIMEOUT=60 # each GPU test's own limit (gsrun --timeout; ctest's is 15 s more)
  BENCH_SIZES=(-b 1M -e 64M -f 8 -w 1 -n 3)
  STEPS=("gpu|20|the GPU (nvidia-smi)"
    "probe|60|a kernel built by nvcc runs on it"
    "configure|45|cmake, fresh build folder"
    "build|120|cmake --build --target gs_gpu_all"
    "ctest|90|ctest -L gpu (GPUTEST_QUICK=1)"
    "nccl|30|all-reduce on device buffers, NCCL, 1 rank"
    "staged|30|all-reduce on device buffers, staged, 4 ranks"
    "int8|30|compressed all-reduce (int8), device buffers, 4 ranks")
else
  DEADLINE_S=${GPURUN_DEADLINE_S:-345}
  GPU_TEST_TIMEOUT=120
  BENCH_SIZES=(-b 4M -e 256M -f 4 -w 2 -n 5)
  STEPS=("gpu|20|the GPU (nvidia-smi)"
    "probe|60|a kernel built by nvcc runs on it"
    "configure|45|cmake, fresh build folder"
    "build|150|cmake --build --target gs_gpu_all"
    "ctest|150|ctest -L gpu"
    "kernels|60|gs-bench kernels: GB/s against a device copy"
    "nccl|40|all-reduce on device buffers, NCCL, 1 rank"
    "staged|40|all-reduce on device buffers, staged, 4 ranks"
    "host|40|all-reduce on host buffers, 4 ranks"
    "int8|40|compressed all-reduce (int8), device buffers, 4 ranks")
fi

cap_of() { # cap_of ID: the step's cap in seconds (GPURUN_STEP_S caps it further)
  local s cap
  for s in "${STEPS[@]}"; do
    if [ "${s%%|*}" = "$1" ]; then
      cap=${s#*|}
      cap=${cap%%|*}
      if [ -n "${GPURUN_STEP_S:-}" ] && [ "$GPURUN_STEP_S" -lt "$cap" ]; then cap=$GPURUN_STEP_S; fi
      echo "$cap"
      return 0
    fi
  done
  echo 30
}

if [ "$PLAN" = 1 ]; then
  echo "tests/gpu/run.sh --$MODE: the plan (nothing is run)"
  echo "deadline ${DEADLINE_S} s; each step's timeout is its cap or the time left before the"
  echo "deadline less ${RESERVE_S} s, whichever is less${GPURUN_STEP_S:+ (GPURUN_STEP_S=$GPURUN_STEP_S)}"
  printf '%-10s %7s  %s\n' step "cap (s)" what
  total=0
  for s in "${STEPS[@]}"; do
    id=${s%%|*}
    title=${s##*|}
    cap=$(cap_of "$id")
    skip=""
    if [ "$NO_BUILD" = 1 ] && { [ "$id" = probe ] || [ "$id" = configure ] || [ "$id" = build ]; }; then
      skip=" (skipped: --no-build)"
    else
      total=$((total + cap))
    fi
    printf '%-10s %7s  %s%s\n' "$id" "$cap" "$title" "$skip"
  done
  echo "sum of the caps: $total s (the deadline bounds the run: ${DEADLINE_S} s)"
  echo "build folder: $BUILD$([ "$NO_BUILD" = 1 ] && echo " (used as it is)" || echo " (wiped first)")"
  echo "results: $RESULTS (00-setup.log 01-build.log 02-ctest.log 03-kernels.txt 04-allreduce.txt summary.txt)"
  echo "all-reduce sizes: ${BENCH_SIZES[*]}; GPU tests' own limit ${GPU_TEST_TIMEOUT} s"
  exit 0
fi

# ---------------------------------------------------------------------------
# Results, records and the table
# ---------------------------------------------------------------------------
if ! mkdir -p "$RESULTS" 2>/dev/null || [ ! -w "$RESULTS" ]; then
  echo "run.sh: cannot write to the results folder $RESULTS" >&2
  exit 1
fi
LOG_SETUP=$RESULTS/00-setup.log
LOG_BUILD=$RESULTS/01-build.log
LOG_CTEST=$RESULTS/02-ctest.log
LOG_KERNELS=$RESULTS/03-kernels.txt
LOG_BENCH=$RESULTS/04-allreduce.txt
SUMMARY=$RESULTS/summary.txt
for f in "$LOG_SETUP" "$LOG_BUILD" "$LOG_CTEST" "$LOG_KERNELS" "$LOG_BENCH" "$SUMMARY"; do
  : >"$f"
done
TMPD=$(mktemp -d /tmp/gs-gpurun.XXXXXX)

T_START=$(date +%s)
ROWS=()     # "name|status|seconds|key"
FAILED=0
FINISHED=0
CHILD=""    # the running step's timeout(1) process (its own process group)
CUR_STEP="" # the running step's row name, and when it started
CUR_T0=0
STEP_SECS=0 # seconds the last run_step took
GPU_NAME="" GPU_MEM="" GPU_DRIVER="" GPU_CC="" CUDA_DRIVER="" NVCC_VER=""
NCCL_VER="" NCCL_INC="" NCCL_LIB=""
BUILT_CUDA="?" BUILT_NCCL="?" BUILT_ZSTD="?" BUILT_WERROR="?" ARCH=""

now() { date +%s; }
elapsed() { echo $(($(now) - T_START)); }
say() { echo "[run.sh $(elapsed)s] $*" | tee -a "$LOG_SETUP"; }

record() { # record NAME STATUS SECONDS KEY
  ROWS+=("$1|$2|$3|$4")
  [ "$2" = FAIL ] && FAILED=1
  say "$1: $2 ($3 s)${4:+ $4}"
  write_summary >/dev/null # so that even a SIGKILL leaves the rows so far
}

# Show the end of a failed step's log on stdout (the device tool keeps the
# last 12,000 characters of the output).
show_tail() { # show_tail LOG [LINES [FROM]]: the last LINES of LOG (after its last line FROM)
  [ -s "$1" ] || return 0
  echo "---- last lines of $(basename "$1") ----"
  awk -v m="${3:-}" 'm == "" || $0 == m {n = 0} {l[n++] = $0} END {for (i = 0; i < n; i++) print l[i]}' "$1" |
    tail -n "${2:-12}" | cut -c1-200 | sed 's/^/| /'
}

write_summary() {
  local r n s secs key total nfail=0
  total=${#ROWS[@]}
  for r in ${ROWS[@]+"${ROWS[@]}"}; do
    s=${r#*|}
    s=${s%%|*}
    [ "$s" = FAIL ] && nfail=$((nfail + 1))
  done
  {
    echo
    echo "== tests/gpu/run.sh --$MODE: $(elapsed) s of a ${DEADLINE_S} s deadline, $NPROC cores =="
    echo "GPU:    ${GPU_NAME:-?}${GPU_MEM:+, $GPU_MEM}${GPU_CC:+, compute capability $GPU_CC}"
    echo "driver: ${GPU_DRIVER:-?}${CUDA_DRIVER:+ (CUDA $CUDA_DRIVER)}"
    echo "CUDA:   ${NVCC_VER:-?}${ARCH:+; built for $ARCH}"
    echo "NCCL:   ${NCCL_VER:-not found}"
    echo "built:  CUDA $BUILT_CUDA, NCCL $BUILT_NCCL, zstd $BUILT_ZSTD, -Werror $BUILT_WERROR"
    printf '%-32s %-6s %5s  %s\n' step status secs key
    for r in ${ROWS[@]+"${ROWS[@]}"}; do
      n=${r%%|*}
      r=${r#*|}
      s=${r%%|*}
      r=${r#*|}
      secs=${r%%|*}
      key=${r#*|}
      printf '%-32s %-6s %5s  %s\n' "$n" "$s" "$secs" "$key"
    done
    echo "logs: $RESULTS"
    if [ "$FAILED" = 0 ] && [ "$DRY" != 1 ]; then
      echo "RESULT: PASS ($total steps)"
    elif [ "$DRY" = 1 ]; then
      echo "RESULT: FAIL (GPURUN_DRY=1: a dry run checks nothing on a GPU; $nfail of $total steps failed)"
    else
      echo "RESULT: FAIL ($nfail of $total steps failed)"
    fi
  } >"$SUMMARY"
  cat "$SUMMARY"
}

stop_child() {
  local tries=0
  [ -n "$CHILD" ] || return 0
  kill -TERM -- "-$CHILD" 2>/dev/null || kill -TERM "$CHILD" 2>/dev/null
  while kill -0 "$CHILD" 2>/dev/null && [ "$tries" -lt 10 ]; do
    sleep 0.5
    tries=$((tries + 1))
  done
  kill -KILL -- "-$CHILD" 2>/dev/null || kill -KILL "$CHILD" 2>/dev/null
  CHILD=""
}

finish() {
  local f
  [ "$FINISHED" = 1 ] && return 0
  FINISHED=1
  trap - EXIT
  trap '' TERM INT HUP
  stop_child
  # Small logs only: the ends of one that grew past 4 MiB.
  for f in "$LOG_SETUP" "$LOG_BUILD" "$LOG_CTEST" "$LOG_KERNELS" "$LOG_BENCH"; do
    if [ "$(stat -c %s "$f" 2>/dev/null || echo 0)" -gt $((4 * 1024 * 1024)) ]; then
      { head -c $((1024 * 1024)) "$f"; echo; echo "[... cut by run.sh ...]"
        tail -c $((3 * 1024 * 1024)) "$f"; } >"$f.cut" && mv "$f.cut" "$f"
    fi
  done
  rm -rf "$TMPD"
  write_summary
  exit $((FAILED || DRY == 1))
}

on_signal() { # on_signal NAME
  trap '' TERM INT HUP
  if [ -n "$CUR_STEP" ]; then
    stop_child
    record "$CUR_STEP" FAIL $(($(now) - CUR_T0)) "interrupted by SIG$1"
    CUR_STEP=""
  fi
  record "run.sh" FAIL "$(elapsed)" "stopped by SIG$1"
  finish
}
on_exit() {
  local rc=$?
  if [ "$FINISHED" = 0 ]; then
    record "run.sh" FAIL "$(elapsed)" "ended early (exit status $rc; see 00-setup.log)"
    finish
  fi
}
trap 'on_signal TERM' TERM
trap 'on_signal INT' INT
trap 'on_signal HUP' HUP
trap on_exit EXIT

# The seconds step ID may take: its cap, never past the deadline; 0 when
# fewer than 5 s are left before it.
budget() {
  local want left
  want=$(cap_of "$1")
  left=$((DEADLINE_S - $(elapsed) - RESERVE_S))
  if [ "$left" -lt 5 ]; then
    want=0
  elif [ "$left" -lt "$want" ]; then
    want=$left
  fi
  echo "$want"
}

# run_step ID ROW LOG CMD...: CMD under timeout(1) with ID's budget, its
# output appended to LOG; returns its exit status (124: timed out, 125: no
# time left, nothing run). STEP_SECS is set to the seconds it took.
run_step() {
  local id=$1 row=$2 log=$3 secs rc t0
  shift 3
  secs=$(budget "$id")
  STEP_SECS=0
  if [ "$secs" -lt 1 ]; then
    echo "run.sh: no time left for: $*" >>"$log"
    return 125
  fi
  echo "\$ $* (timeout ${secs} s)" >>"$log"
  t0=$(now)
  CUR_STEP=$row
  CUR_T0=$t0
  timeout -k 5 "$secs" "$@" >>"$log" 2>&1 </dev/null &
  CHILD=$!
  wait "$CHILD"
  rc=$?
  CHILD=""
  CUR_STEP=""
  STEP_SECS=$(($(now) - t0))
  echo "[exit $rc after ${STEP_SECS} s]" >>"$log"
  LAST_BUDGET=$secs
  return "$rc"
}

# The row of a step that did not pass: why, in words.
why_failed() { # why_failed RC [KEY]
  case $1 in
    124 | 137) echo "timed out after $LAST_BUDGET s${2:+; $2}" ;;
    125) echo "not run: no time left before the ${DEADLINE_S} s deadline" ;;
    *) echo "exit $1${2:+; $2}" ;;
  esac
}
LAST_BUDGET=0

say "gradsync GPU checks, --$MODE: source $SRC, build $BUILD, results $RESULTS, $NPROC cores"

# ---------------------------------------------------------------------------
# The GPU
# ---------------------------------------------------------------------------
NVSMI=${GPURUN_NVSMI:-$(command -v nvidia-smi || true)}
if [ -z "$NVSMI" ] && [ -x /usr/local/nvidia/bin/nvidia-smi ]; then NVSMI=/usr/local/nvidia/bin/nvidia-smi; fi
GPU_LIST=""
T0=$(now)
if [ -n "$NVSMI" ]; then
  GPU_LIST=$(timeout 20 "$NVSMI" -L 2>&1)
  echo "$GPU_LIST" >>"$LOG_SETUP"
  if echo "$GPU_LIST" | grep -q '^GPU [0-9]'; then
    # One query (compute_cap needs a driver of 2021 or later; without it, the rest).
    Q=$(timeout 20 "$NVSMI" --query-gpu=name,memory.total,driver_version,compute_cap \
      --format=csv,noheader 2>/dev/null | head -1) ||
      Q="$(timeout 20 "$NVSMI" --query-gpu=name,memory.total,driver_version \
        --format=csv,noheader 2>/dev/null | head -1),"
    IFS=, read -r GPU_NAME GPU_MEM GPU_DRIVER GPU_CC <<<"$Q"
    GPU_NAME=$(echo "$GPU_NAME" | sed 's/^ *//; s/ *$//')
    GPU_MEM=$(echo "$GPU_MEM" | sed 's/^ *//; s/ *$//')
    GPU_DRIVER=$(echo "$GPU_DRIVER" | sed 's/^ *//; s/ *$//')
    GPU_CC=$(echo "$GPU_CC" | sed 's/^ *//; s/ *$//')
    timeout 20 "$NVSMI" >"$TMPD/nvidia-smi.txt" 2>&1
    cat "$TMPD/nvidia-smi.txt" >>"$LOG_SETUP"
    CUDA_DRIVER=$(grep -o 'CUDA Version: *[0-9.]*' "$TMPD/nvidia-smi.txt" | head -1 | awk '{print $3}')
  fi
else
  echo "nvidia-smi: not found" >>"$LOG_SETUP"
fi
if [ "$DRY" = 1 ]; then
  if [ -z "$GPU_NAME" ]; then
    GPU_NAME="none (GPURUN_DRY=1: the plumbing without a GPU)"
  fi
  record gpu SKIP $(($(now) - T0)) "dry run: no GPU used"
elif ! echo "$GPU_LIST" | grep -q '^GPU [0-9]'; then
  record gpu FAIL $(($(now) - T0)) "no NVIDIA GPU: nvidia-smi ${NVSMI:-missing}: $(echo "${GPU_LIST:-no output}" | head -1 | cut -c1-80)"
  finish
else
  record gpu ok $(($(now) - T0)) "$(echo "$GPU_LIST" | grep -c '^GPU [0-9]') GPU(s): $GPU_NAME"
fi
CC_NUM=$(echo "$GPU_CC" | tr -d ' .')
[ -n "$CC_NUM" ] || CC_NUM=90 # an H200 when nvidia-smi does not say

# ---------------------------------------------------------------------------
# The tools
# ---------------------------------------------------------------------------
find_tool() { # find_tool NAME DIR...: NAME on PATH or in the first DIR that has it
  local name=$1 d
  shift
  if command -v "$name" >/dev/null 2>&1; then command -v "$name"; return 0; fi
  for d in "$@"; do
    if [ -x "$d/$name" ]; then echo "$d/$name"; return 0; fi
  done
  return 1
}
CMAKE=$(find_tool cmake /opt/torch/.venv/bin /usr/local/bin) || CMAKE=""
CTEST=""
if [ -n "$CMAKE" ]; then
  CTEST=$(dirname "$CMAKE")/ctest
  [ -x "$CTEST" ] || CTEST=$(command -v ctest || true)
fi
NVCC=$(find_tool nvcc /usr/local/cuda/bin /usr/local/cuda-13/bin /usr/local/cuda-12/bin) || NVCC=""
CC_BIN=$(find_tool cc /usr/bin) || CC_BIN=$(find_tool gcc /usr/bin) || CC_BIN=""
NINJA=$(find_tool ninja /opt/torch/.venv/bin /usr/local/bin) || NINJA=""
[ -n "$NVCC" ] && NVCC_VER=$("$NVCC" --version 2>/dev/null | grep -o 'release [0-9.]*, V[0-9.]*' | head -1)
{
  echo "cmake: ${CMAKE:-MISSING} $([ -n "$CMAKE" ] && "$CMAKE" --version | head -1)"
  echo "ctest: ${CTEST:-MISSING}"
  echo "nvcc:  ${NVCC:-MISSING} ${NVCC_VER}"
  echo "cc:    ${CC_BIN:-MISSING} $([ -n "$CC_BIN" ] && "$CC_BIN" --version | head -1)"
  echo "ninja: ${NINJA:-none (make)}"
} >>"$LOG_SETUP"
MISSING=""
[ -n "$CMAKE" ] || MISSING="$MISSING cmake"
[ -n "$CTEST" ] || MISSING="$MISSING ctest"
[ -n "$NVCC" ] || [ "$NO_BUILD" = 1 ] || MISSING="$MISSING nvcc"
[ -n "$CC_BIN" ] || [ "$NO_BUILD" = 1 ] || MISSING="$MISSING cc"
if [ -n "$MISSING" ]; then
  record tools FAIL 0 "missing:$MISSING"
  finish
fi
if [ -n "$NVCC" ]; then
  PATH="$(dirname "$NVCC"):$PATH"
  export PATH
  CUDA_ROOT=$(cd "$(dirname "$NVCC")/.." && pwd)
else
  CUDA_ROOT=/usr/local/cuda
fi

# NCCL: NCCL_HOME, the toolkit's, the system's, or the nvidia-nccl Python wheel.
nccl_candidates() {
  [ -n "${NCCL_HOME:-}" ] && echo "$NCCL_HOME/include"
  echo "$CUDA_ROOT/include" /usr/include /usr/local/include
  timeout 20 python3 - 2>/dev/null <<'PY' || true
import importlib.util, os
spec = importlib.util.find_spec("nvidia.nccl")
for p in (spec.submodule_search_locations or []) if spec else []:
    print(os.path.join(p, "include"))
PY
}
nccl_pick() { # nccl_pick INCLUDE_DIR...: the first with nccl.h and a libnccl beside it
  local inc lib
  for inc in "$@"; do
    [ -f "$inc/nccl.h" ] || continue
    for lib in "$inc/../lib" "$inc/../lib64" "$inc/../lib/x86_64-linux-gnu" \
      /usr/lib/x86_64-linux-gnu "$CUDA_ROOT/lib64" "$CUDA_ROOT/lib"; do
      if [ -e "$lib/libnccl.so" ] || [ -e "$lib/libnccl.so.2" ]; then
        NCCL_INC=$(cd "$inc" && pwd)
        NCCL_LIB=$(cd "$lib" && pwd)
        return 0
      fi
    done
  done
  return 1
}
# shellcheck disable=SC2046 # folder names without spaces, one per word
nccl_pick $(nccl_candidates) ||
  nccl_pick $(timeout 30 find /usr /opt -name nccl.h -path '*include*' 2>/dev/null | head -5 |
    xargs -r -n1 dirname) || true
if [ -n "$NCCL_INC" ]; then
  NCCL_VER=$(grep -E '^#define NCCL_(MAJOR|MINOR|PATCH) ' "$NCCL_INC/nccl.h" | awk '{print $3}' |
    paste -sd. -)
  NCCL_VER="${NCCL_VER:-?} ($NCCL_INC/nccl.h)"
  export LD_LIBRARY_PATH="$NCCL_LIB${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
fi
say "tools: cmake $CMAKE, nvcc ${NVCC:-none}, ${NINJA:+ninja, }NCCL ${NCCL_VER:-not found}"

# ---------------------------------------------------------------------------
# A kernel built here runs on the GPU (and which architecture to build for)
# ---------------------------------------------------------------------------
CMAKE_VER=$("$CMAKE" --version | head -1 | awk '{print $3}')
cmake_has_native() { [ "$(printf '%s\n3.24\n' "$CMAKE_VER" | sort -V | head -1)" = 3.24 ]; }
if [ "$NO_BUILD" = 1 ]; then
  ARCH=$(grep -E '^CMAKE_CUDA_ARCHITECTURES:' "$BUILD/CMakeCache.txt" 2>/dev/null | cut -d= -f2)
elif [ "$DRY" = 1 ]; then
  ARCH=90
  record probe SKIP 0 "dry run: built for sm_90"
else
  cat >"$TMPD/probe.cu" <<'CU'
#include <cstdio>
#include <cuda_runtime.h>
__global__ void k(int *x) { *x = 42; }
int main() {
  int n = 0, *d = nullptr, h = 0, drv = 0, rt = 0;
  cudaError_t e = cudaGetDeviceCount(&n);
  cudaDriverGetVersion(&drv);
  cudaRuntimeGetVersion(&rt);
  printf("probe: driver API %d, runtime %d\n", drv, rt);
  if (e != cudaSuccess || n == 0) { printf("probe: no device: %s\n", cudaGetErrorString(e)); return 1; }
  if (cudaMalloc(&d, sizeof(int)) != cudaSuccess) { printf("probe: cudaMalloc failed\n"); return 1; }
  k<<<1, 1>>>(d);
  e = cudaMemcpy(&h, d, sizeof(int), cudaMemcpyDeviceToHost);
  printf("probe: %d device(s), the kernel wrote %d (%s)\n", n, h, cudaGetErrorString(e));
  return (e == cudaSuccess && h == 42) ? 0 : 1;
}
CU
  cat >"$TMPD/probe.sh" <<SH
#!/bin/sh
"$NVCC" "-arch=\$1" -o "$TMPD/probe" "$TMPD/probe.cu" && "$TMPD/probe"
SH
  # native (what nvcc sees), then, when the driver is older than the
  # toolkit, native with the toolkit's forward-compatibility libraries,
  # then sm_<compute capability>.
  T_PROBE=0
  KEY=""
  ARCH=""
  if run_step probe probe "$LOG_SETUP" sh "$TMPD/probe.sh" native; then
    ARCH=native
  else
    RC=$?
    T_PROBE=$STEP_SECS
    [ "$RC" = 125 ] && { record probe FAIL 0 "$(why_failed "$RC")"; finish; }
    if grep -q 'insufficient' "$LOG_SETUP" && [ -d "$CUDA_ROOT/compat" ]; then
      say "the driver is older than the toolkit; trying $CUDA_ROOT/compat"
      export LD_LIBRARY_PATH="$CUDA_ROOT/compat${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
      if run_step probe probe "$LOG_SETUP" sh "$TMPD/probe.sh" native; then
        ARCH=native
        KEY="with $CUDA_ROOT/compat; "
      fi
      T_PROBE=$((T_PROBE + STEP_SECS))
    fi
  fi
  if [ -z "$ARCH" ]; then
    say "nvcc -arch=native gave no working program; trying sm_$CC_NUM"
    if run_step probe probe "$LOG_SETUP" sh "$TMPD/probe.sh" "sm_$CC_NUM"; then
      ARCH=$CC_NUM
      KEY="${KEY}native failed; sm_$ARCH ran"
      T_PROBE=$((T_PROBE + STEP_SECS))
    else
      RC=$?
      T_PROBE=$((T_PROBE + STEP_SECS))
      grep -E '^(probe:|nvcc|.*error)' "$LOG_SETUP" | tail -6 | cut -c1-200 | sed 's/^/| /'
      record probe FAIL "$T_PROBE" "$(why_failed "$RC" "no CUDA program runs here")"
      finish
    fi
  else
    T_PROBE=$((T_PROBE + STEP_SECS))
    KEY="${KEY}nvcc -arch=native: the kernel ran"
    if ! cmake_has_native; then
      ARCH=$CC_NUM
      KEY="$KEY; cmake $CMAKE_VER has no 'native': sm_$ARCH"
    fi
  fi
  record probe ok "$T_PROBE" "$KEY"
fi

# ---------------------------------------------------------------------------
# Configure and build (a fresh folder), or take the one there (--no-build)
# ---------------------------------------------------------------------------
# OpenSSL stays as found: src/core/auth.c does not build with -Werror without it.
CMAKE_ARGS=(-DGS_WITH_CUDA=ON -DGS_WITH_ZSTD=AUTO -DGS_WITH_MPI=OFF
  -DGS_BUILD_TESTS=ON -DGS_BUILD_BENCH=ON -DCMAKE_BUILD_TYPE=RelWithDebInfo
  -DGS_GPU_TEST_TIMEOUT="$GPU_TEST_TIMEOUT")
[ -n "$NVCC" ] && CMAKE_ARGS+=(-DCMAKE_CUDA_COMPILER="$NVCC" -DCUDAToolkit_ROOT="$CUDA_ROOT")
[ -n "$NINJA" ] && CMAKE_ARGS+=(-G Ninja -DCMAKE_MAKE_PROGRAM="$NINJA")

nccl_args() { # the NCCL arguments for mode ON (what we found), AUTO or OFF
  case $1 in
    ON)
      local so=$NCCL_LIB/libnccl.so
      if [ ! -e "$so" ]; then # a Python wheel ships libnccl.so.2 only: a link name beside the build
        mkdir -p "$BUILD/.nccl-link"
        ln -sf "$NCCL_LIB/libnccl.so.2" "$BUILD/.nccl-link/libnccl.so"
        so=$BUILD/.nccl-link/libnccl.so
      fi
      echo "-DGS_WITH_NCCL=ON -DGS_NCCL_INCLUDE_DIR=$NCCL_INC -DGS_NCCL_LIBRARY=$so"
      ;;
    *) echo "-DGS_WITH_NCCL=$1" ;;
  esac
}

configure() { # configure WERROR ARCH NCCL_MODE: a fresh folder
  local extra
  rm -rf "$BUILD"
  mkdir -p "$BUILD"
  read -r -a extra <<<"$(nccl_args "$3")"
  run_step configure configure "$LOG_SETUP" "$CMAKE" -S "$SRC" -B "$BUILD" "${CMAKE_ARGS[@]}" \
    "${extra[@]}" -DGS_WERROR="$1" -DCMAKE_CUDA_ARCHITECTURES="$2"
}

if [ "$NO_BUILD" = 1 ]; then
  if [ ! -f "$BUILD/CMakeCache.txt" ]; then
    record build FAIL 0 "--no-build: $BUILD is not a build folder"
    finish
  fi
  record build SKIP 0 "--no-build: $BUILD as it is"
  BUILT_WERROR=$(grep -E '^GS_WERROR:' "$BUILD/CMakeCache.txt" | cut -d= -f2)
else
  if [ "$BUILD" = "$SRC" ] || [ "$BUILD" = / ] || [ "$BUILD" = "${HOME:-/root}" ]; then
    record configure FAIL 0 "refusing to wipe $BUILD"
    finish
  fi
  if [ -d "$BUILD" ] && [ -n "$(ls -A "$BUILD")" ] && [ ! -f "$BUILD/CMakeCache.txt" ]; then
    record configure FAIL 0 "$BUILD exists and is not a build folder; not wiping it"
    finish
  fi
  NCCL_MODE=AUTO
  [ -n "$NCCL_INC" ] && NCCL_MODE=ON
  T_CONF=0
  NOTE=""
  configure ON "$ARCH" "$NCCL_MODE"
  RC=$?
  T_CONF=$STEP_SECS
  if [ "$RC" != 0 ] && [ "$RC" != 124 ] && [ "$RC" != 125 ] && [ "$ARCH" = native ]; then
    ARCH=$CC_NUM
    NOTE="native refused: sm_$ARCH"
    say "configure with native architectures failed; again with $ARCH"
    configure ON "$ARCH" "$NCCL_MODE"
    RC=$?
    T_CONF=$((T_CONF + STEP_SECS))
  fi
  if [ "$RC" != 0 ] && [ "$RC" != 124 ] && [ "$RC" != 125 ] && [ "$NCCL_MODE" = ON ]; then
    NCCL_MODE=OFF
    NOTE="${NOTE:+$NOTE; }NCCL refused: without it"
    say "configure with NCCL $NCCL_VER failed; again without NCCL"
    configure ON "$ARCH" "$NCCL_MODE"
    RC=$?
    T_CONF=$((T_CONF + STEP_SECS))
  fi
  if [ "$RC" != 0 ]; then
    record configure FAIL "$T_CONF" "$(why_failed "$RC" "cmake failed (see 00-setup.log)")"
    show_tail "$LOG_SETUP" 20
    finish
  fi
  record configure ok "$T_CONF" "arch $ARCH, NCCL $NCCL_MODE${NOTE:+; $NOTE}"

  build() { run_step build "$1" "$LOG_BUILD" "$CMAKE" --build "$BUILD" -j"$JOBS" --target gs_gpu_all; }
  if build "build (-Werror)"; then
    BUILT_WERROR=ON
    record "build (-Werror)" ok "$STEP_SECS" "gs_gpu_all, -j$JOBS"
  else
    RC=$?
    record "build (-Werror)" FAIL "$STEP_SECS" "$(why_failed "$RC" "see 01-build.log")"
    grep -E 'error|Error' "$LOG_BUILD" | head -6 | cut -c1-200 | sed 's/^/| /'
    if [ "$RC" = 124 ] || [ "$RC" = 125 ] || [ "$RC" = 137 ]; then
      finish
    fi
    # The GPU steps still tell something: the same build without -Werror.
    echo "==== again without -Werror ====" >>"$LOG_BUILD"
    T_B=0
    run_step build "build (no -Werror)" "$LOG_BUILD" "$CMAKE" -DGS_WERROR=OFF "$BUILD"
    RC=$?
    T_B=$STEP_SECS
    if [ "$RC" = 0 ]; then
      build "build (no -Werror)"
      RC=$?
      T_B=$((T_B + STEP_SECS))
    fi
    if [ "$RC" = 0 ]; then
      BUILT_WERROR=OFF
      record "build (no -Werror)" ok "$T_B" "only to run the GPU steps"
    else
      record "build (no -Werror)" FAIL "$T_B" "$(why_failed "$RC" "see 01-build.log")"
      show_tail "$LOG_BUILD" 20
      finish
    fi
  fi
fi
GSRUN=$BUILD/tools/gsrun
BENCH=$BUILD/bench/gs-bench

# What the build has: the configure line, gs_info, the library's links.
CONF_LINE=$(grep -E 'gradsync: CUDA' "$LOG_SETUP" | tail -1)
INFO=""
[ -x "$BUILD/tools/gs_info" ] && INFO=$(timeout 20 "$BUILD/tools/gs_info" 2>&1)
echo "$INFO" >>"$LOG_SETUP"
yes_no() { case $1 in ON | on | yes | 1 | TRUE) echo yes ;; OFF | off | no | 0 | FALSE) echo no ;; *) echo "?" ;; esac; }
BUILT_CUDA=$(yes_no "$(echo "$CONF_LINE" | sed -n 's/.*CUDA \([A-Za-z]*\).*/\1/p')")
BUILT_NCCL=$(yes_no "$(echo "$CONF_LINE" | sed -n 's/.*NCCL \([A-Za-z]*\).*/\1/p')")
if [ "$BUILT_CUDA" = "?" ] || [ "$BUILT_NCCL" = "?" ]; then # --no-build: ask gs_info
  BUILT_CUDA=$(yes_no "$(echo "$INFO" | sed -n 's/^device buffers: CUDA \([a-z]*\).*/\1/p')")
  BUILT_NCCL=$(yes_no "$(echo "$INFO" | sed -n 's/^device buffers:.*NCCL \([a-z]*\).*/\1/p')")
fi
# zstd: gs_info's "zstd: on|off", else the configure line's "zstd ON|OFF",
# else whether the library links libzstd.
ZSTD_WORD=$(echo "$INFO" | sed -n 's/^zstd: *\([a-z]*\).*/\1/p' | head -1)
[ -n "$ZSTD_WORD" ] || ZSTD_WORD=$(echo "$CONF_LINE" | sed -n 's/.*zstd \([A-Za-z]*\).*/\1/p')
BUILT_ZSTD=$(yes_no "$ZSTD_WORD")
if [ "$BUILT_ZSTD" = "?" ] && [ -e "$BUILD/libgradsync.so" ]; then
  if objdump -p "$BUILD/libgradsync.so" 2>/dev/null | grep -q 'NEEDED.*libzstd' ||
    nm "$BUILD/libgradsync.so" 2>/dev/null | grep -q ' ZSTD_compress'; then
    BUILT_ZSTD=yes
  else
    BUILT_ZSTD=no
  fi
fi
say "built: CUDA $BUILT_CUDA, NCCL $BUILT_NCCL, zstd $BUILT_ZSTD, -Werror $BUILT_WERROR"

# ---------------------------------------------------------------------------
# The GPU tests
# ---------------------------------------------------------------------------
QUICK=0
[ "$MODE" = quick ] && QUICK=1
cd "$BUILD" || { record "ctest -L gpu" FAIL 0 "no build folder $BUILD"; finish; }
run_step ctest "ctest -L gpu" "$LOG_CTEST" env GPUTEST_QUICK="$QUICK" "$CTEST" -L gpu \
  --output-on-failure -j"$JOBS"
RC=$?
cd "$SRC" || true
SECS=$STEP_SECS
if [ -f "$BUILD/Testing/Temporary/LastTest.log" ]; then
  { echo; echo "==== LastTest.log (every test's output) ===="; cat "$BUILD/Testing/Temporary/LastTest.log"; } >>"$LOG_CTEST"
fi
NTESTS=$(grep -Eo 'tests passed, [0-9]+ tests failed out of [0-9]+' "$LOG_CTEST" | tail -1 | awk '{print $NF}')
NFAIL=$(grep -Eo 'tests passed, [0-9]+ tests failed' "$LOG_CTEST" | tail -1 | awk '{print $3}')
NSKIP=$(grep -c '(Skipped)$' "$LOG_CTEST")
FAILED_NAMES=$(grep -E '^[[:space:]]*[0-9]+ - .*\((Failed|Timeout|SEGFAULT|Subprocess aborted|Exception|Not Run|Child aborted)' "$LOG_CTEST" |
  sed -E 's/^[[:space:]]*[0-9]+ - ([^ ]+).*/\1/' | head -4 | paste -sd, -)
KEY="${NTESTS:-?} tests, ${NFAIL:-?} failed${FAILED_NAMES:+ ($FAILED_NAMES)}, $NSKIP skipped"
if [ "$RC" = 0 ] && [ "${NFAIL:-1}" = 0 ] && [ "$NSKIP" = 0 ] && [ "${NTESTS:-0}" -gt 0 ]; then
  record "ctest -L gpu" ok "${SECS:-0}" "$KEY"
else
  [ "$NSKIP" != 0 ] && KEY="$KEY (a skip: the tests saw no GPU)"
  [ "${NTESTS:-0}" = 0 ] && KEY="$KEY (no GPU tests found)"
  case $RC in
    0 | 8) record "ctest -L gpu" FAIL "${SECS:-0}" "$KEY" ;;
    *) record "ctest -L gpu" FAIL "${SECS:-0}" "$(why_failed "$RC" "$KEY")" ;;
  esac
  grep -E '^(FAIL:|test_gpu_[a-z]+: |.*Skipped|.*Timeout)' "$LOG_CTEST" | awk '!seen[$0]++' |
    head -10 | cut -c1-200 | sed 's/^/| /'
fi

# ---------------------------------------------------------------------------
# Kernel bandwidth (full mode)
# ---------------------------------------------------------------------------
if [ "$MODE" = full ]; then
  if run_step kernels "kernels" "$LOG_KERNELS" "$BENCH" kernels -b 1M -e 256M -f 4 -w 5 -n 20; then
    KEY=$(grep -E '^# Min vs copy' "$LOG_KERNELS" | tail -1 | sed 's/^# //')
    COPY=$(awk '$4 == "copy" && $1 == 268435456 {print $6}' "$LOG_KERNELS" | tail -1)
    record "kernels 1M..256M" ok "$STEP_SECS" "copy ${COPY:-?} GB/s at 256 MB; ${KEY:-?}"
  else
    RC=$?
    record "kernels 1M..256M" FAIL "$STEP_SECS" "$(why_failed "$RC" "see 03-kernels.txt")"
    show_tail "$LOG_KERNELS" 8
  fi
fi

# ---------------------------------------------------------------------------
# One all-reduce per path
# ---------------------------------------------------------------------------
# bench ID ROW NRANKS ENV... -- ARGS...: gs-bench allreduce under gsrun; rank
# 0 writes its table (-o) to a file appended to 04-allreduce.txt.
LAST_TABLE=""
bench() {
  local id=$1 row=$2 nranks=$3 rc secs
  shift 3
  local envs=(GS_TIMEOUT_MS=30000)
  while [ "$1" != -- ]; do envs+=("$1"); shift; done
  shift
  LAST_TABLE=$TMPD/bench-$id.txt
  rm -f "$LAST_TABLE"
  echo "=== $row ===" >>"$LOG_BENCH"
  # gsrun stops the ranks a little before timeout(1) would.
  secs=$(budget "$id")
  if [ "$secs" -gt 8 ]; then secs=$((secs - 3)); fi
  run_step "$id" "$row" "$LOG_BENCH" env "${envs[@]}" "$GSRUN" -n "$nranks" --timeout "$secs" \
    "$BENCH" allreduce "${BENCH_SIZES[@]}" --out "$LAST_TABLE" "$@"
  rc=$?
  [ -f "$LAST_TABLE" ] && cat "$LAST_TABLE" >>"$LOG_BENCH"
  return "$rc"
}
# Columns of a data row: 1 size ... 6 time, 7 algbw, 8 busbw, 9 #wrong (with
# --codec: 9 wire, 10 wirebw, 11 rel.err, 12 path).
last_row() { grep -E '^ +[0-9]+ ' "$LAST_TABLE" 2>/dev/null | tail -1; }
col() { last_row | awk -v c="$1" '{print $c}'; }
footer() { grep -E "^# $1" "$LAST_TABLE" 2>/dev/null | tail -1 | sed 's/^# [^:]*: *//'; }
bench_failed() { # bench_failed ROW RC LOG
  record "$1" FAIL "$STEP_SECS" "$(why_failed "$2" "see 04-allreduce.txt")"
  show_tail "$LOG_BENCH" 10 "=== $1 ==="
}

if [ "$BUILT_NCCL" = yes ]; then
  ROW="allreduce NCCL, 1 rank"
  EXPECT=nccl
else
  ROW="allreduce 1 rank (no NCCL)"
  EXPECT=staged
fi
if bench nccl "$ROW" 1 GS_CUDA_PATH=auto -- --device cuda --check; then
  PATH_RAN=$(footer 'Device path')
  if [ "${PATH_RAN%% *}" = "$EXPECT" ]; then ST=ok; else ST=FAIL; fi
  record "$ROW" "$ST" "$STEP_SECS" "algbw $(col 7) GB/s at $(col 1) B; path ${PATH_RAN%% *} (want $EXPECT); wrong $(footer 'Out of bounds')"
else
  bench_failed "$ROW" $?
fi

DEV_BUS=""
ROW="allreduce staged, 4 ranks"
if bench staged "$ROW" 4 GS_CUDA_PATH=auto -- --device cuda --check; then
  DEV_BUS=$(col 8)
  PATH_RAN=$(footer 'Device path')
  if [ "${PATH_RAN%% *}" = staged ]; then ST=ok; else ST=FAIL; fi
  record "$ROW" "$ST" "$STEP_SECS" "busbw $DEV_BUS GB/s at $(col 1) B; path ${PATH_RAN%% *} (want staged); wrong $(footer 'Out of bounds')"
else
  bench_failed "$ROW" $?
fi

if [ "$MODE" = full ]; then
  ROW="allreduce host buffers, 4 ranks"
  if bench host "$ROW" 4 -- --check; then
    HOST_BUS=$(col 8)
    RATIO=$(awk -v d="${DEV_BUS:-}" -v h="${HOST_BUS:-0}" \
      'BEGIN { if ((d != "") && (h > 0)) printf "%.2f", d / h; else print "?" }')
    record "$ROW" ok "$STEP_SECS" "busbw $HOST_BUS GB/s; device/host $RATIO (goal >= 0.90, not asserted)"
  else
    bench_failed "$ROW" $?
  fi
fi

ROW="allreduce int8, 4 ranks, device"
if bench int8 "$ROW" 4 GS_CUDA_PATH=auto -- --device cuda --codec int8; then
  RELERR=$(col 11)
  # int8 with blocks of 256 on 4 ranks: about 0.5%; far more is a broken codec path.
  if awk -v e="${RELERR:-9}" 'BEGIN { exit !(e + 0 < 0.05) }'; then ST=ok; else ST=FAIL; fi
  record "$ROW" "$ST" "$STEP_SECS" "busbw $(col 8) GB/s (effective) at $(col 1) B; rel.err ${RELERR:-?} (want < 0.05); path $(col 12)"
else
  bench_failed "$ROW" $?
fi

finish
