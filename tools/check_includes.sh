#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Dependencies point one way: core <- transport <- algo <- api, and
# core <- compress (pure codecs) <- algo. kernels/ (the CUDA sources and the
# arithmetic headers they share with the CPU code) sits below them all: any
# layer may include its headers, and it includes none of src/.
# Fails on an #include that points upward.
set -uo pipefail
src=$1
fail=0
check() { # folder, forbidden include prefixes...
  local dir=$1; shift
  for bad in "$@"; do
    if grep -rn "#include \"$bad/" "$src/$dir" 2>/dev/null; then
      echo "error: $dir must not include $bad/ headers"
      fail=1
    fi
  done
}
check core transport algo api compress
check compress transport algo api
check transport algo api compress
check algo api
# fusion (bucketing) and ps (parameter server) build on the public API and core only.
check fusion transport algo api compress ps
check ps transport algo api compress fusion
kernels="$src/../kernels"
if [ -d "$kernels" ]; then
  for bad in core transport algo api compress; do
    if grep -rn "#include \"$bad/" "$kernels" 2>/dev/null; then
      echo "error: kernels must not include $bad/ headers"
      fail=1
    fi
  done
fi
[ $fail -eq 0 ] && echo "include direction ok"
exit $fail
