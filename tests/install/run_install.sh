#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# run_install.sh BUILD_DIR SOURCE_DIR: install the build to a temporary
# prefix, then build examples/allreduce.c against the installed copy three
# ways (CMake's find_package with the shared and the static library, and
# pkg-config) and run each on 2 ranks with the installed gsrun. Nothing from
# the build tree is used after the install: the prefix is all there is.
set -euo pipefail
BUILD=${1:?usage: run_install.sh BUILD_DIR SOURCE_DIR}
SRC=${2:?usage: run_install.sh BUILD_DIR SOURCE_DIR}
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
PREFIX=$TMP/prefix
fail() { echo "FAIL: $*"; exit 1; }

cmake --install "$BUILD" --prefix "$PREFIX" > "$TMP/install.log" || {
  cat "$TMP/install.log"; fail "cmake --install"; }
libdir=$(ls -d "$PREFIX"/lib* | head -1)
for f in include/gradsync/gradsync.h include/gradsync/version.h bin/gsrun bin/gs-bench bin/gs_info; do
  [ -e "$PREFIX/$f" ] || fail "$f is not installed"
done
for f in libgradsync.so libgradsync.a pkgconfig/gradsync.pc cmake/gradsync/gradsyncConfig.cmake; do
  [ -e "$libdir/$f" ] || fail "${libdir#"$PREFIX"/}/$f is not installed"
done
# The installed tools run from the prefix alone (their RPATH finds the library).
"$PREFIX/bin/gs_info" > "$TMP/info.log" 2>&1 || { cat "$TMP/info.log"; fail "installed gs_info"; }

# 1 and 2: CMake, shared and static.
cmake -S "$SRC/tests/install/consumer" -B "$TMP/consumer" -DCMAKE_PREFIX_PATH="$PREFIX" \
  -DGS_EXAMPLE="$SRC/examples/allreduce.c" > "$TMP/consumer.log" 2>&1 &&
  cmake --build "$TMP/consumer" >> "$TMP/consumer.log" 2>&1 || {
  cat "$TMP/consumer.log"; fail "building against find_package(gradsync)"; }
# 3: pkg-config.
PKG_CONFIG_PATH="$libdir/pkgconfig" pkg-config --exists gradsync || fail "pkg-config gradsync"
# shellcheck disable=SC2046
cc -std=c11 -o "$TMP/allreduce_pc" "$SRC/examples/allreduce.c" \
  $(PKG_CONFIG_PATH="$libdir/pkgconfig" pkg-config --cflags --libs gradsync) ||
  fail "building with pkg-config"

for prog in "$TMP/consumer/allreduce_cmake" "$TMP/consumer/allreduce_static" "$TMP/allreduce_pc"; do
  LD_LIBRARY_PATH="$libdir" "$PREFIX/bin/gsrun" -n 2 --timeout 60 "$prog" 10007 > "$TMP/run.log" 2>&1 || {
    cat "$TMP/run.log"; fail "$(basename "$prog") on 2 ranks"; }
  echo "PASS $(basename "$prog") on 2 ranks with the installed gsrun"
done
# The shared builds really use the installed library.
LD_LIBRARY_PATH="$libdir" ldd "$TMP/allreduce_pc" | grep -q "$libdir/libgradsync.so" ||
  fail "allreduce_pc does not load the installed libgradsync.so"
# A release build (configured with -DGS_BUILD_TESTS=OFF, so GS_TEST_HOOKS=OFF)
# installs a library without the test-only fault switches: neither the knobs'
# names nor the code behind them, and gs_info says "test hooks: no".
cmake -S "$SRC" -B "$TMP/rel" -DGS_BUILD_TESTS=OFF -DGS_BUILD_BENCH=OFF -DGS_WITH_CUDA=OFF \
  > "$TMP/rel.log" 2>&1 && cmake --build "$TMP/rel" -j 2 >> "$TMP/rel.log" 2>&1 &&
  cmake --install "$TMP/rel" --prefix "$TMP/relprefix" >> "$TMP/rel.log" 2>&1 || {
  cat "$TMP/rel.log"; fail "release build (GS_BUILD_TESTS=OFF)"; }
rellib=$(ls -d "$TMP"/relprefix/lib* | head -1)
for lib in "$rellib/libgradsync.so" "$rellib/libgradsync.a"; do
  if strings "$lib" | grep -E -q 'GS_COMP_TEST_CORRUPT|GS_SHM_TEST_FREE_BYTES'; then
    fail "$(basename "$lib") of a GS_BUILD_TESTS=OFF build has the test hooks"
  fi
done
"$TMP/relprefix/bin/gs_info" | grep -qx 'test hooks: no' ||
  fail "gs_info of a GS_BUILD_TESTS=OFF build does not say 'test hooks: no'"
# and the test build installed above has them
"$PREFIX/bin/gs_info" | grep -qx 'test hooks: yes' || fail "the test build has no test hooks"
echo "PASS a GS_BUILD_TESTS=OFF build installs a library without test hooks"
echo "run_install: installed to a temporary prefix; CMake (shared, static) and pkg-config consumers pass"
