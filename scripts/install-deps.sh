#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Install the Debian packages gradsync needs, by purpose:
#   install-deps.sh build   what building the library and its tools needs
#   install-deps.sh test    that, plus what the test suite needs
#   install-deps.sh all     that, plus the comparison peers of the benchmarks (default)
#   install-deps.sh torch-venv          only the test set's torch 2.x virtual environment
#                                       (torch, then Ray into it)
#   install-deps.sh ray                 only Ray into that environment (it must exist)
#   install-deps.sh --torch-venv-path   where that is (waiting for an install in progress)
# Idempotent: it asks the package manager only for what is missing, says what
# and why first, and needs root (or sudo) only then; with everything present
# it changes nothing and needs no privileges. Runs without a terminal.
set -euo pipefail

WHAT=${1:-all}
# Where the test set's torch 2.x virtual environment is (below); the tests ask this.
torch_venv_path() {
  if [ -n "${GRADSYNC_TORCH_VENV:-}" ]; then echo "$GRADSYNC_TORCH_VENV"
  elif [ "$(id -u)" = 0 ]; then echo /var/cache/gradsync/torch-venv
  else echo "${XDG_CACHE_HOME:-$HOME/.cache}/gradsync/torch-venv"; fi
}
if [ "$WHAT" = --torch-venv-path ]; then
  # An install in progress (torch-venv, below) holds the lock: wait for it, then answer.
  venv=$(torch_venv_path)
  if [ -e "$venv.lock" ]; then flock -s -w 900 "$venv.lock" true 2>/dev/null || true; fi
  echo "$venv"
  exit 0
fi
# The library: compiler and CMake, zstd (codecs), OpenSSL's libcrypto and
# libssl (connection authentication, TLS), pkg-config (finding them).
BUILD_PKGS="cmake make gcc g++ pkg-config libzstd-dev libssl-dev"
# The test suite: CMocka (unit tests), Open MPI (MPI transport and its tests),
# iproute2 (the network-namespace lab), Python with pytest, numpy and torch
# (the Python package and the PyTorch plugin), libtorch-dev (its C++ headers),
# matplotlib (scripts/plot-bench), doxygen (the API reference), binutils (the
# exported-symbol check), clang and its runtime (libFuzzer: make fuzz),
# clang-format, clang-tidy and cppcheck (make lint), the openssl command (the
# TLS test's certificates), strace (the TLS test's look at the wire) and python3-venv
# (the virtual environments of torch 2.x and of the pip test).
TEST_PKGS="libcmocka-dev libopenmpi-dev openmpi-bin iproute2 python3 python3-pytest
           python3-numpy python3-torch libtorch-dev python3-matplotlib doxygen binutils
           clang libclang-rt-14-dev clang-format clang-tidy cppcheck openssl strace python3-venv"
# The benchmarks' comparison peers (bench/compare): Gloo.
BENCH_PKGS="libgloo-dev"
case "$WHAT" in
  build) PKGS="$BUILD_PKGS" ;;
  test) PKGS="$BUILD_PKGS $TEST_PKGS" ;;
  torch-venv|ray) PKGS="" ;;
  all) PKGS="$BUILD_PKGS $TEST_PKGS $BENCH_PKGS" ;;
  *) echo "usage: install-deps.sh [build|test|all|torch-venv|ray|--torch-venv-path]" >&2; exit 2 ;;
esac

# CUDA and NCCL are not Debian packages here: they come with the CUDA toolkit
# (nvcc, and NCCL beside it or under NCCL_HOME). Say what CMake will find;
# without them the build leaves the device path out (GS_WITH_CUDA=AUTO).
nvcc_bin=$(command -v nvcc 2>/dev/null || true)
for d in "${CUDAToolkit_ROOT:-}" "${CUDA_HOME:-}" /usr/local/cuda; do
  if [ -z "$nvcc_bin" ] && [ -n "$d" ] && [ -x "$d/bin/nvcc" ]; then
    nvcc_bin="$d/bin/nvcc"
  fi
done
if [ -n "$nvcc_bin" ]; then
  cuda_root=$(dirname "$(dirname "$nvcc_bin")")
  nccl_h=""
  for d in "${NCCL_HOME:-}" "$cuda_root" /usr; do
    if [ -n "$d" ] && [ -f "$d/include/nccl.h" ]; then nccl_h="$d/include/nccl.h"; break; fi
  done
  echo "install-deps: CUDA toolkit $nvcc_bin; NCCL ${nccl_h:-not found (set NCCL_HOME)}"
else
  echo "install-deps: no CUDA toolkit (nvcc): the device path is left out of the build"
fi

missing=""
for p in $PKGS; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing="$missing $p"
  fi
done
install_packages() {
echo "install-deps: the '$WHAT' set needs these Debian packages, missing here:$missing"
SUDO=""
if [ "$(id -u)" != 0 ]; then
  if ! command -v sudo >/dev/null 2>&1; then
    echo "install-deps: not root and no sudo: install them yourself, then run again" >&2
    exit 1
  fi
  SUDO="sudo"
fi
# (Not "${SUDO:-root's}": bash 5.2 reads that quote as opening a string.)
if [ -n "$SUDO" ]; then how="sudo apt-get"; else how="root's apt-get"; fi
echo "install-deps: installing them with $how"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
# shellcheck disable=SC2086
$SUDO apt-get install -y -qq --no-install-recommends $missing
}
if [ -n "$missing" ]; then
  install_packages
fi

# The test set's PyTorch as users run it today: torch 2.15 from PyPI in a virtual
# environment made from Debian's Python (python3-venv), kept outside the checkout in
# GRADSYNC_TORCH_VENV (default /var/cache/gradsync/torch-venv, or ~/.cache/gradsync/torch-venv
# without root) and reused while it holds that torch. torchrun's tests run in it
# (torch_torchrun, net_torchrun_nodes); Debian's torch 1.13 stays for the Python
# backend's tests. About 5.4 GB with its CUDA wheels, a minute or two from PyPI. Without
# the network it says so and goes on: those tests then report a skip naming it.
# The install holds the lock file <venv>.lock; --torch-venv-path waits (up to 15 min)
# for an install in progress, so `install-deps.sh torch-venv &` may run beside a build
# (.ci/run does, with GRADSYNC_TORCH_VENV_LATER=1 telling the other calls to leave it).
# (GRADSYNC_, not GS_: the library warns about every GS_ variable it does not know.)
TORCH_VERSION=2.15.0
# Ray from PyPI in the same environment, for the Ray collective backend's test (python_ray,
# tests/python/run_ray.sh; docs/python.md, "Ray collective backend"): installed only when
# `import ray` does not give this version, under the same lock, so the tests waiting on
# --torch-venv-path see torch and Ray together. About 350 MB, under a minute from PyPI.
# Without the network it says so and goes on: python_ray then reports a skip naming it.
RAY_VERSION=2.60.0
# ray_into_venv VENV: the Ray step; the caller holds VENV.lock.
ray_into_venv() {
  local venv=$1
  if [ ! -x "$venv/bin/python" ]; then
    echo "install-deps: no virtual environment at $venv for Ray (install-deps.sh torch-venv" \
         "makes it); the Ray test will report a skip" >&2
    return 0
  fi
  if "$venv/bin/python" -c "import ray, sys; sys.exit(ray.__version__ != '$RAY_VERSION')" 2>/dev/null; then
    return 0
  fi
  echo "install-deps: ray $RAY_VERSION from PyPI into $venv (the Ray backend's test)"
  if "$venv/bin/pip" install -q --disable-pip-version-check "ray==$RAY_VERSION" </dev/null; then
    echo "install-deps: ray $RAY_VERSION is in $venv"
  else
    echo "install-deps: could not install ray $RAY_VERSION from PyPI into $venv;" \
         "the Ray test will report a skip" >&2
  fi
}
ray_venv() {
  local venv
  venv=$(torch_venv_path)
  mkdir -p "$(dirname "$venv")"
  (
    flock -w 900 9 || { echo "install-deps: $venv.lock is held past 15 min; not installing" >&2; exit 0; }
    ray_into_venv "$venv"
  ) 9>"$venv.lock"
}
torch_venv() {
  local venv
  venv=$(torch_venv_path)
  mkdir -p "$(dirname "$venv")"
  (
    flock -w 900 9 || { echo "install-deps: $venv.lock is held past 15 min; not installing" >&2; exit 0; }
    if "$venv/bin/python" -c "import torch, sys; sys.exit(torch.__version__.split('+')[0] != '$TORCH_VERSION')" 2>/dev/null; then
      # scikit-build-core: `pip install --no-build-isolation ./python` builds the torch
      # extension there (torch2_pip_install); added to venvs made before it was listed.
      "$venv/bin/python" -c "import scikit_build_core" 2>/dev/null ||
        "$venv/bin/pip" install -q --disable-pip-version-check scikit-build-core </dev/null ||
        echo "install-deps: could not install scikit-build-core into $venv" >&2
      ray_into_venv "$venv"
      exit 0
    fi
    echo "install-deps: torch $TORCH_VERSION from PyPI into $venv (torchrun's tests)"
    if /usr/bin/python3 -m venv --clear "$venv" &&
       "$venv/bin/pip" install -q --disable-pip-version-check "torch==$TORCH_VERSION" numpy pytest \
         scikit-build-core </dev/null; then
      echo "install-deps: torch $TORCH_VERSION is in $venv"
    else
      echo "install-deps: could not install torch $TORCH_VERSION from PyPI into $venv;" \
           "the tests that need it will report a skip" >&2
    fi
    ray_into_venv "$venv"
  ) 9>"$venv.lock"
}
if [ "$WHAT" = torch-venv ]; then
  torch_venv
elif [ "$WHAT" = ray ]; then
  ray_venv
elif [ "$WHAT" != build ] && [ -z "${GRADSYNC_TORCH_VENV_LATER:-}" ]; then
  torch_venv
fi
