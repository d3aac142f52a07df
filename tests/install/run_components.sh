#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# run_components.sh BUILD_DIR SOURCE_DIR MPI CUDA NCCL ZSTD: install the build to a
# temporary prefix and ask find_package(gradsync COMPONENTS X) for a component it lacks
# (the first of MPI, CUDA, NCCL, ZSTD that the build says is OFF) and for one gradsync
# does not have: each must fail, naming the component (issue 25). Skipped (77) when
# the build has every component.
set -euo pipefail
BUILD=${1:?usage: run_components.sh BUILD_DIR SOURCE_DIR MPI CUDA NCCL ZSTD}
SRC=${2:?source dir}
fail() { echo "FAIL: $*"; exit 1; }
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
lacks=""
for pair in "MPI ${3:?}" "CUDA ${4:?}" "NCCL ${5:?}" "ZSTD ${6:?}"; do
  if [ "${pair#* }" = OFF ]; then
    lacks=${pair% *}
    break
  fi
done
timeout 120 cmake --install "$BUILD" --prefix "$TMP/prefix" > "$TMP/install.log" 2>&1 || {
  cat "$TMP/install.log"; fail "cmake --install"; }
ask() { # COMPONENT WANT...: the configure fails, and its output holds each WANT
  local comp=$1
  shift
  if timeout 120 cmake -S "$SRC/tests/install/components" -B "$TMP/c_$comp" \
    -DCMAKE_PREFIX_PATH="$TMP/prefix" -DGS_ASK="$comp" > "$TMP/c.log" 2>&1; then
    cat "$TMP/c.log"; fail "find_package(gradsync COMPONENTS $comp) succeeded"
  fi
  for want in "$@"; do
    tr -s ' \n' ' ' < "$TMP/c.log" | grep -qF -- "$want" || {
      cat "$TMP/c.log"; fail "COMPONENTS $comp: the message lacks '$want'"; }
  done
  echo "PASS find_package(gradsync COMPONENTS $comp) fails naming it"
}
ask NoSuchPart "required component(s): NoSuchPart" "no such component"
if [ -n "$lacks" ]; then
  ask "$lacks" "required component(s): $lacks" "built without it" "GS_WITH_$lacks"
fi
