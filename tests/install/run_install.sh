#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# run_install.sh BUILD_DIR SOURCE_DIR: install the build to a temporary
# prefix, then build examples/allreduce.c against the installed copy three
# ways (CMake's find_package with the shared and the static library, and
# pkg-config) and run each on 2 ranks with the installed gsrun. Nothing from
# the build tree is used after the install: the prefix is all there is. Last,
# nothing installed may hold a test-only fault switch (tools/check_test_switches.sh).
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
# A build without zstd (GS_WITH_ZSTD=OFF, or AUTO without libzstd) names zstd
# nowhere in the static link interface (pkg-config, CMake); one with it does.
zstd_named=no
if grep -q -- '-lzstd' "$libdir/pkgconfig/gradsync.pc" ||
  grep -q 'zstd' "$libdir"/cmake/gradsync/gradsync-static-targets*.cmake; then
  zstd_named=yes
fi
if "$PREFIX/bin/gs_info" | grep -q '^zstd: off'; then
  [ "$zstd_named" = no ] || fail "built without zstd, but gradsync.pc or the static targets name zstd"
else
  [ "$zstd_named" = yes ] || fail "built with zstd, but the static link interface lacks it"
fi
echo "PASS the static link interface names zstd only when it is built in ($zstd_named)"
# No test-only fault switch in what is installed, though this build has the tests
# (GS_BUILD_TESTS=ON): the libraries, shared and static, and the programs hold
# none of the names of env_table.h's GS_ENV_TEST_ROWS (the check reads them
# there), the test variant of the library is not installed, and gs_info says
# "test hooks: no".
bash "$SRC/tools/check_test_switches.sh" "$SRC/src/core/env_table.h" "$libdir"/libgradsync.so.* \
  "$libdir/libgradsync.a" "$PREFIX"/bin/* || fail "the installed files have test switches"
variant=$(find "$PREFIX" -name '*testhooks*')
[ -z "$variant" ] || fail "the test variant of the library is installed: $variant"
"$PREFIX/bin/gs_info" | grep -qx 'test hooks: no' || fail "the installed gs_info has test hooks"
echo "PASS the installed libraries and programs have no test switches"
echo "run_install: installed to a temporary prefix; CMake (shared, static) and pkg-config consumers pass"
