#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Install the Debian packages gradsync needs to build, test and bench.
# Idempotent: a no-op when everything is present. Runs without a terminal.
set -euo pipefail

PKGS="cmake make gcc g++ libzstd-dev libcmocka-dev libopenmpi-dev openmpi-bin iproute2
      python3 libgloo-dev binutils"

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
if [ -z "$missing" ]; then
  exit 0
fi
echo "install-deps: installing:$missing"
SUDO=""
if [ "$(id -u)" != 0 ]; then
  SUDO="sudo"
fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
# shellcheck disable=SC2086
$SUDO apt-get install -y -qq --no-install-recommends $missing
