#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# tests/gpu/run.sh [BUILD_DIR]: the GPU checks of gradsync, in one go, on a
# machine with an NVIDIA GPU (made for one H200 and 16 cores: under 5
# minutes). From the repository root:
#
#   bash tests/gpu/run.sh              # builds in ./build-gpu (wiped first)
#
# Steps, each bounded by timeout(1), each one's output kept:
#   1. the GPU (nvidia-smi -L; none: exit 1 at once) and the tools
#      (cmake, nvcc, a C compiler, zstd, NCCL; cmocka is not needed);
#   2. a FRESH build folder: -DGS_WITH_CUDA=ON -DGS_WITH_NCCL=ON
#      -DGS_WERROR=ON -DCMAKE_CUDA_ARCHITECTURES=native when nvcc sees the
#      GPU (else 90); `cmake --build -j$(nproc) --target gs_gpu_all`
#      (tests/gpu, gsrun, gs-bench). If -Werror stops the build, it is
#      built again without it so that the GPU steps still run; the
#      summary then says FAIL for the build;
#   3. ctest -L gpu --output-on-failure (a test skipped here is a failure:
#      the GPU is there);
#   4. gs-bench kernels -e 256M: every kernel's GB/s against a device copy;
#   5. gs-bench allreduce --device cuda on 1 rank (NCCL), on 4 ranks sharing
#      the GPU (staged through pinned host memory), the same 4 ranks with
#      host buffers (busbw ratio device/host), and --codec int8 on device
#      buffers, 4 ranks (the compressed path);
#   6. a summary table, printed last: step, status, key number.
# Exit status: 0 when every step passed; 1 otherwise (or when there is no
# GPU). Output: every step's log under $OUT when it is set (the device
# tool's folder; at most 8 files), else ./gpu-results.
#
# When the image lacks libzstd's headers (NCCL comes from the image, a
# CUDA toolkit's folder or the nvidia-nccl Python package), pack them on a
# machine that has them with `bash tests/gpu/pack_deps.sh .gpu-deps` and
# bring that folder along in the repository root (or set GPURUN_DEPS).
#
# Test knob: GPURUN_DRY=1 runs the script's plumbing on a machine
# without a GPU (no GPU check, no probe, sm_90): every GPU step then
# fails or skips, and the summary says so.
set -uo pipefail

SRC=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
BUILD_ARG=${1:-build-gpu}
RESULTS=${OUT:-$PWD/gpu-results}
DEPS=${GPURUN_DEPS:-$SRC/.gpu-deps}
NPROC=$(nproc 2>/dev/null || echo 4)
T_START=$(date +%s)
DEADLINE_S=${GPURUN_DEADLINE_S:-540} # the device tool stops a call at 600 s
SIZES=(-b 4M -e 256M -f 4)

mkdir -p "$RESULTS" || { echo "run.sh: cannot create $RESULTS" >&2; exit 1; }
LOG_SETUP=$RESULTS/00-setup.log
LOG_CTEST=$RESULTS/01-ctest.log
LOG_KERNELS=$RESULTS/02-kernels.txt
LOG_BENCH=$RESULTS/03-allreduce.txt
SUMMARY=$RESULTS/summary.txt
: >"$LOG_SETUP"
: >"$LOG_CTEST"
: >"$LOG_KERNELS"
: >"$LOG_BENCH"

STEP_NAMES=()
STEP_STATUS=()
STEP_KEYS=()
FAILED=0

elapsed() { echo $(($(date +%s) - T_START)); }
say() { echo "[run.sh $(elapsed)s] $*" | tee -a "$LOG_SETUP"; }
record() { # record NAME STATUS KEY
  STEP_NAMES+=("$1")
  STEP_STATUS+=("$2")
  STEP_KEYS+=("$3")
  if [ "$2" != ok ]; then FAILED=1; fi
  say "step '$1': $2${3:+ ($3)}"
}

print_summary() {
  {
    echo
    echo "== tests/gpu/run.sh summary: ${GPU_NAME:-no GPU}, $NPROC cores, $(elapsed) s =="
    printf '%-34s %-8s %s\n' step status key
    for i in "${!STEP_NAMES[@]}"; do
      printf '%-34s %-8s %s\n' "${STEP_NAMES[$i]}" "${STEP_STATUS[$i]}" "${STEP_KEYS[$i]}"
    done
    echo "logs: $RESULTS"
    if [ "$FAILED" = 0 ]; then echo "RESULT: PASS"; else echo "RESULT: FAIL"; fi
  } | tee "$SUMMARY"
}

finish() {
  # The device tool brings back files of at most 16 MiB: keep the ends of a huge log.
  for f in "$RESULTS"/*; do
    [ -f "$f" ] || continue
    if [ "$(stat -c %s "$f" 2>/dev/null || echo 0)" -gt $((15 * 1024 * 1024)) ]; then
      { head -c $((4 * 1024 * 1024)) "$f"; echo; echo "[... cut by run.sh ...]"
        tail -c $((10 * 1024 * 1024)) "$f"; } >"$f.cut" && mv "$f.cut" "$f"
    fi
  done
  print_summary
  exit "$FAILED"
}

# Seconds a step may take: its own bound, and never past the deadline.
budget() {
  local want=$1 left=$((DEADLINE_S - $(elapsed) - 15))
  if [ "$left" -lt "$want" ]; then want=$left; fi
  echo "$want"
}

# run_step SECONDS LOGFILE CMD...: the command under timeout, its output
# appended to LOGFILE and shown; returns its status (124: timed out).
run_step() {
  local secs log rc
  secs=$(budget "$1")
  log=$2
  shift 2
  if [ "$secs" -le 5 ]; then
    echo "run.sh: no time left for: $*" | tee -a "$log"
    return 124
  fi
  echo "\$ $* (timeout ${secs}s)" | tee -a "$log"
  timeout -k 10 "$secs" "$@" 2>&1 | tee -a "$log"
  rc=${PIPESTATUS[0]}
  echo "[exit $rc]" | tee -a "$log"
  return "$rc"
}

# ---------------------------------------------------------------------------
# 1. The GPU and the tools
# ---------------------------------------------------------------------------
say "gradsync GPU checks: source $SRC, results $RESULTS, $NPROC cores"
DRY=${GPURUN_DRY:-0}
NVSMI=$(command -v nvidia-smi || true)
[ -z "$NVSMI" ] && [ -x /usr/local/nvidia/bin/nvidia-smi ] && NVSMI=/usr/local/nvidia/bin/nvidia-smi
GPU_LIST=""
if [ -n "$NVSMI" ]; then
  GPU_LIST=$(timeout 30 "$NVSMI" -L 2>&1)
fi
echo "${GPU_LIST:-nvidia-smi: not found}" | tee -a "$LOG_SETUP"
if [ "$DRY" = 1 ]; then
  say "GPURUN_DRY=1: going on without a GPU (plumbing test)"
  GPU_LIST="GPU 0: none (dry run)"
fi
if ! echo "$GPU_LIST" | grep -q '^GPU [0-9]'; then
  say "no NVIDIA GPU here (nvidia-smi missing or lists none): the GPU checks need one"
  record gpu FAIL "no GPU"
  finish
fi
GPU_NAME="dry run, no GPU"
GPU_CC=""
if [ -n "$NVSMI" ]; then
  GPU_NAME=$(timeout 30 "$NVSMI" --query-gpu=name,memory.total,driver_version \
    --format=csv,noheader 2>/dev/null | head -1)
  GPU_CC=$(timeout 30 "$NVSMI" --query-gpu=compute_cap --format=csv,noheader 2>/dev/null |
    head -1 | tr -d ' .')
fi
echo "GPU: $GPU_NAME, compute capability ${GPU_CC:-?}" | tee -a "$LOG_SETUP"

find_tool() { # find_tool NAME DIR...: the first executable NAME on PATH or in the DIRs
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
[ -n "$CMAKE" ] && CTEST=$(dirname "$CMAKE")/ctest
[ -n "$CTEST" ] && [ ! -x "$CTEST" ] && CTEST=$(command -v ctest || true)
NVCC=$(find_tool nvcc /usr/local/cuda/bin /usr/local/cuda-13/bin /usr/local/cuda-12/bin) || NVCC=""
CC_BIN=$(find_tool cc /usr/bin) || CC_BIN=$(find_tool gcc /usr/bin) || CC_BIN=""
NINJA=$(find_tool ninja /opt/torch/.venv/bin /usr/local/bin) || NINJA=""
{
  echo "cmake: ${CMAKE:-MISSING} $([ -n "$CMAKE" ] && "$CMAKE" --version | head -1)"
  echo "ctest: ${CTEST:-MISSING}"
  echo "nvcc:  ${NVCC:-MISSING} $([ -n "$NVCC" ] && "$NVCC" --version | tail -1)"
  echo "cc:    ${CC_BIN:-MISSING} $([ -n "$CC_BIN" ] && "$CC_BIN" --version | head -1)"
  echo "ninja: ${NINJA:-none (make)}"
} | tee -a "$LOG_SETUP"
if [ -z "$CMAKE" ] || [ -z "$CTEST" ] || [ -z "$NVCC" ] || [ -z "$CC_BIN" ]; then
  record tools FAIL "cmake, ctest, nvcc or a C compiler is missing (see 00-setup.log)"
  finish
fi
PATH="$(dirname "$NVCC"):$PATH"
export PATH
CUDA_ROOT=$(cd "$(dirname "$NVCC")/.." && pwd)

CMAKE_ARGS=(-DGS_WITH_CUDA=ON -DCMAKE_BUILD_TYPE=RelWithDebInfo
            -DCMAKE_CUDA_COMPILER="$NVCC" -DCUDAToolkit_ROOT="$CUDA_ROOT")
[ -n "$NINJA" ] && CMAKE_ARGS+=(-G Ninja -DCMAKE_MAKE_PROGRAM="$NINJA")
PREFIXES=()
DEPS_NOTE=""
if [ -d "$DEPS" ]; then
  PREFIXES+=("$DEPS")
  export LD_LIBRARY_PATH="${LD_LIBRARY_PATH:+$LD_LIBRARY_PATH:}$DEPS/lib"
  DEPS_NOTE="deps from $DEPS"
fi

# zstd: the library needs it (the codecs' lossless stage).
have_header() { # have_header NAME: in a system include folder or a prefix
  local d
  for d in /usr/include /usr/local/include /usr/include/x86_64-linux-gnu "${PREFIXES[@]/%//include}"; do
    [ -f "$d/$1" ] && return 0
  done
  return 1
}
if ! have_header zstd.h; then
  say "zstd.h not found (no libzstd-dev here): pack it elsewhere with" \
      "'bash tests/gpu/pack_deps.sh .gpu-deps' and bring .gpu-deps along"
  record tools FAIL "libzstd headers missing"
  finish
fi

# cmocka: tests/CMakeLists.txt asks for it, the GPU tests do not use it.
if ! have_header cmocka.h; then
  STUB=$(mktemp -d /tmp/gs-gpu-stub.XXXXXX)
  mkdir -p "$STUB/include" "$STUB/lib"
  echo "#error cmocka is not installed (a stub for tests/gpu/run.sh)" >"$STUB/include/cmocka.h"
  : >"$STUB/lib/libcmocka.a"
  CMAKE_ARGS+=(-DCMOCKA_INCLUDE_DIR="$STUB/include" -DCMOCKA_LIBRARY="$STUB/lib/libcmocka.a")
  say "cmocka not installed: a stub satisfies configure (the unit tests are not built here)"
fi

# NCCL: the image's, the toolkit's, NCCL_HOME, or the nvidia-nccl Python package.
NCCL_INC=""
NCCL_LIB=""
nccl_candidates() {
  [ -n "${NCCL_HOME:-}" ] && echo "$NCCL_HOME/include"
  echo "$CUDA_ROOT/include" /usr/include /usr/local/include "${PREFIXES[@]/%//include}"
  python3 - 2>/dev/null <<'PY' || true
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
  nccl_pick $(timeout 60 find /usr /opt -name nccl.h -path '*include*' 2>/dev/null | head -5 |
              xargs -r -n1 dirname) || true
NCCL_ON=OFF
if [ -n "$NCCL_INC" ]; then
  NCCL_ON=ON
  if [ -e "$NCCL_LIB/libnccl.so" ]; then
    NCCL_SO=$NCCL_LIB/libnccl.so
  else # a Python wheel ships libnccl.so.2 only: a link name beside it, in /tmp
    NCCL_LINK=$(mktemp -d /tmp/gs-gpu-nccl.XXXXXX)
    ln -s "$NCCL_LIB/libnccl.so.2" "$NCCL_LINK/libnccl.so"
    ln -s "$NCCL_LIB/libnccl.so.2" "$NCCL_LINK/libnccl.so.2"
    NCCL_SO=$NCCL_LINK/libnccl.so
  fi
  export LD_LIBRARY_PATH="${LD_LIBRARY_PATH:+$LD_LIBRARY_PATH:}$NCCL_LIB"
  CMAKE_ARGS+=(-DGS_WITH_NCCL=ON -DGS_NCCL_INCLUDE_DIR="$NCCL_INC" -DGS_NCCL_LIBRARY="$NCCL_SO")
  NCCL_VER=$(grep -E '^#define NCCL_(MAJOR|MINOR|PATCH) ' "$NCCL_INC/nccl.h" | awk '{print $3}' |
    paste -sd. -)
  say "NCCL $NCCL_VER: $NCCL_INC/nccl.h, $NCCL_SO"
else
  CMAKE_ARGS+=(-DGS_WITH_NCCL=OFF)
  say "NCCL not found: building without it (the NCCL path is not checked)"
fi
[ ${#PREFIXES[@]} -gt 0 ] && CMAKE_ARGS+=(-DCMAKE_PREFIX_PATH="$(IFS=';'; echo "${PREFIXES[*]}")")

# Does nvcc see the GPU? A probe built for the GPU it finds ("native").
PROBE=$(mktemp -d /tmp/gs-gpu-probe.XXXXXX)
cat >"$PROBE/probe.cu" <<'CU'
#include <cstdio>
#include <cuda_runtime.h>
__global__ void k(int *x) { *x = 42; }
int main() {
  int n = 0, *d = nullptr, h = 0;
  cudaError_t e = cudaGetDeviceCount(&n);
  if (e != cudaSuccess || n == 0) { printf("probe: no device: %s\n", cudaGetErrorString(e)); return 1; }
  if (cudaMalloc(&d, sizeof(int)) != cudaSuccess) { printf("probe: cudaMalloc failed\n"); return 1; }
  k<<<1, 1>>>(d);
  e = cudaMemcpy(&h, d, sizeof(int), cudaMemcpyDeviceToHost);
  printf("probe: %d device(s), kernel wrote %d (%s)\n", n, h, cudaGetErrorString(e));
  return (e == cudaSuccess && h == 42) ? 0 : 1;
}
CU
ARCH=""
if [ "$DRY" = 1 ]; then
  ARCH=90
elif timeout 90 "$NVCC" -arch=native -o "$PROBE/probe" "$PROBE/probe.cu" >>"$LOG_SETUP" 2>&1 &&
   timeout 30 "$PROBE/probe" 2>&1 | tee -a "$LOG_SETUP"; then
  ARCH=native
else
  ARCH=${GPU_CC:-90}
  say "nvcc -arch=native did not give a working program; trying sm_$ARCH"
  if ! { timeout 90 "$NVCC" -arch="sm_$ARCH" -o "$PROBE/probe" "$PROBE/probe.cu" >>"$LOG_SETUP" 2>&1 &&
         timeout 30 "$PROBE/probe" 2>&1 | tee -a "$LOG_SETUP"; }; then
    record "cuda probe" FAIL "a CUDA program cannot use the GPU (see 00-setup.log)"
    finish
  fi
fi
# CMake learned "native" in 3.24.
CMAKE_VER=$("$CMAKE" --version | head -1 | awk '{print $3}')
if [ "$ARCH" = native ] && [ "$(printf '%s\n3.24\n' "$CMAKE_VER" | sort -V | head -1)" != 3.24 ]; then
  ARCH=${GPU_CC:-90}
fi
record "gpu and tools" ok "$GPU_NAME; arch $ARCH; NCCL $NCCL_ON${DEPS_NOTE:+; $DEPS_NOTE}"

# ---------------------------------------------------------------------------
# 2. A fresh build
# ---------------------------------------------------------------------------
case "$BUILD_ARG" in
  /*) BUILD=$BUILD_ARG ;;
  *) BUILD=$PWD/$BUILD_ARG ;;
esac
if [ "$BUILD" = "$SRC" ] || [ "$BUILD" = / ] || [ "$BUILD" = "${HOME:-/root}" ]; then
  record configure FAIL "refusing to wipe $BUILD"
  finish
fi
if [ -d "$BUILD" ] && [ -n "$(ls -A "$BUILD")" ] && [ ! -f "$BUILD/CMakeCache.txt" ]; then
  record configure FAIL "$BUILD exists and is not a build folder; not wiping it"
  finish
fi
rm -rf "$BUILD"

configure() { # configure WERROR ARCH
  rm -rf "$BUILD"
  run_step 150 "$LOG_SETUP" "$CMAKE" -S "$SRC" -B "$BUILD" "${CMAKE_ARGS[@]}" \
    -DGS_WERROR="$1" -DCMAKE_CUDA_ARCHITECTURES="$2"
}
build() {
  run_step 330 "$LOG_SETUP" "$CMAKE" --build "$BUILD" -j"$NPROC" --target gs_gpu_all
}
if ! configure ON "$ARCH"; then
  if [ "$ARCH" = native ]; then
    ARCH=${GPU_CC:-90}
    say "configure with native architectures failed; again with $ARCH"
  fi
  if ! configure ON "$ARCH"; then
    record configure FAIL "cmake failed (see 00-setup.log)"
    finish
  fi
fi
if build; then
  record "build (-Werror)" ok "arch $ARCH, $(elapsed) s so far"
else
  record "build (-Werror)" FAIL "see 00-setup.log; building again without -Werror"
  if ! { configure OFF "$ARCH" && build; }; then
    record "build (no -Werror)" FAIL "see 00-setup.log"
    finish
  fi
  record "build (no -Werror)" ok "only to run the GPU steps"
fi
GSRUN=$BUILD/tools/gsrun
BENCH=$BUILD/bench/gs-bench

# ---------------------------------------------------------------------------
# 3. The GPU tests
# ---------------------------------------------------------------------------
(cd "$BUILD" && run_step 240 "$LOG_CTEST" "$CTEST" -L gpu --output-on-failure -j"$NPROC")
RC=$?
cp "$BUILD/Testing/Temporary/LastTest.log" "$RESULTS/01-ctest-full.log" 2>/dev/null || true
NTESTS=$(grep -Eo 'tests passed, [0-9]+ tests failed out of [0-9]+' "$LOG_CTEST" | tail -1 |
  awk '{print $NF}')
NFAIL=$(grep -Eo 'tests passed, [0-9]+ tests failed' "$LOG_CTEST" | tail -1 | awk '{print $3}')
NSKIP=$(grep -c '(Skipped)' "$LOG_CTEST")
KEY="${NTESTS:-?} tests, ${NFAIL:-?} failed, $NSKIP skipped"
if [ "$RC" = 0 ] && [ "${NFAIL:-1}" = 0 ] && [ "$NSKIP" = 0 ] && [ "${NTESTS:-0}" -gt 0 ]; then
  record "ctest -L gpu" ok "$KEY"
else
  [ "$NSKIP" != 0 ] && KEY="$KEY (a skip means the tests saw no GPU)"
  [ "$RC" = 124 ] && KEY="$KEY, timed out"
  record "ctest -L gpu" FAIL "$KEY"
fi

# ---------------------------------------------------------------------------
# 4. Kernel bandwidth
# ---------------------------------------------------------------------------
run_step 150 "$LOG_KERNELS" "$BENCH" kernels -b 1M -e 256M -f 4 -w 5 -n 20
RC=$?
KEY=$(grep -E '^# Min vs copy' "$LOG_KERNELS" | tail -1 | sed 's/^# //')
COPY=$(awk '$4 == "copy" && $1 == 268435456 {print $6}' "$LOG_KERNELS" | tail -1)
if [ "$RC" = 0 ]; then
  record "kernels -e 256M" ok "copy ${COPY:-?} GB/s; ${KEY:-?}"
else
  record "kernels -e 256M" FAIL "exit $RC${KEY:+; $KEY}"
fi

# ---------------------------------------------------------------------------
# 5. All-reduce on the GPU
# ---------------------------------------------------------------------------
# bench NAME NRANKS ENV... -- ARGS...: gs-bench allreduce under gsrun; rank 0
# writes its table to a file (-o) that is appended to 03-allreduce.txt.
LAST_TABLE=""
bench() {
  local name=$1 nranks=$2 table rc
  shift 2
  local envs=()
  while [ "$1" != -- ]; do envs+=("$1"); shift; done
  shift
  table=$BUILD/bench-$name.txt
  rm -f "$table"
  echo "=== $name ===" | tee -a "$LOG_BENCH"
  run_step 120 "$LOG_BENCH" env GS_TIMEOUT_MS=60000 "${envs[@]}" "$GSRUN" -n "$nranks" \
    --timeout 110 "$BENCH" allreduce "${SIZES[@]}" -w 2 -n 5 --out "$table" "$@"
  rc=$?
  [ -f "$table" ] && cat "$table" | tee -a "$LOG_BENCH"
  LAST_TABLE=$table
  return "$rc"
}
# Columns of the last data row: 1 size ... 6 time, 7 algbw, 8 busbw, 9 #wrong (11: rel.err with --codec).
last_row() { grep -E '^ +[0-9]+ ' "$LAST_TABLE" 2>/dev/null | tail -1; }
footer() { grep -E "^# $1" "$LAST_TABLE" 2>/dev/null | tail -1 | sed 's/^# [^:]*: *//'; }

if bench n1-device 1 GS_CUDA_PATH=auto -- --device cuda --check; then
  ROW=$(last_row)
  PATH_RAN=$(footer 'Device path')
  WRONG=$(footer 'Out of bounds')
  EXPECT=nccl
  [ "$NCCL_ON" = OFF ] && EXPECT=staged
  if [ "${PATH_RAN%% *}" = "$EXPECT" ]; then ST=ok; else ST=FAIL; fi
  record "allreduce 1 rank, device" "$ST" \
    "algbw $(echo "$ROW" | awk '{print $7}') GB/s at $(echo "$ROW" | awk '{print $1}') B; path ${PATH_RAN:-?} (want $EXPECT); wrong ${WRONG:-?}"
else
  record "allreduce 1 rank, device" FAIL "exit $? (see 03-allreduce.txt)"
fi

DEV_BUS=""
if bench n4-device 4 GS_CUDA_PATH=auto -- --device cuda --check; then
  ROW=$(last_row)
  DEV_BUS=$(echo "$ROW" | awk '{print $8}')
  PATH_RAN=$(footer 'Device path')
  if [ "${PATH_RAN%% *}" = staged ]; then ST=ok; else ST=FAIL; fi
  record "allreduce 4 ranks, device" "$ST" \
    "busbw $DEV_BUS GB/s at $(echo "$ROW" | awk '{print $1}') B; path ${PATH_RAN:-?} (want staged); wrong $(footer 'Out of bounds')"
else
  record "allreduce 4 ranks, device" FAIL "exit $? (see 03-allreduce.txt)"
fi

if bench n4-host 4 -- --check; then
  HOST_BUS=$(last_row | awk '{print $8}')
  RATIO=$(awk -v d="${DEV_BUS:-}" -v h="${HOST_BUS:-0}" \
    'BEGIN { if ((d != "") && (h > 0)) printf "%.2f", d / h; else print "?" }')
  record "allreduce 4 ranks, host" ok "busbw $HOST_BUS GB/s; device/host $RATIO (goal >= 0.90, not asserted)"
else
  record "allreduce 4 ranks, host" FAIL "exit $? (see 03-allreduce.txt)"
fi

if bench n4-device-int8 4 GS_CUDA_PATH=auto -- --device cuda --codec int8; then
  ROW=$(last_row)
  RELERR=$(echo "$ROW" | awk '{print $11}')
  # int8 with blocks of 256 on 4 ranks: about 0.5%; far more means a broken codec path.
  if awk -v e="${RELERR:-9}" 'BEGIN { exit !(e + 0 < 0.05) }'; then ST=ok; else ST=FAIL; fi
  record "allreduce 4 ranks, device, int8" "$ST" \
    "busbw $(echo "$ROW" | awk '{print $8}') GB/s (effective); rel.err ${RELERR:-?} (want < 0.05); path $(echo "$ROW" | awk '{print $12}')"
else
  record "allreduce 4 ranks, device, int8" FAIL "exit $? (see 03-allreduce.txt)"
fi

finish
