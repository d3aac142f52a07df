#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# run_install.sh BUILD_DIR SOURCE_DIR [CUDA_LIBDIR]: install the build to a
# temporary prefix, then build examples/allreduce.c against the installed copy
# four ways (CMake's find_package with the shared and the static library, and
# pkg-config with each, by the commands of docs/install.md) and run each on 2
# ranks with the installed gsrun, with nothing set (no LD_LIBRARY_PATH).
# Nothing from the build tree is used after the install: the prefix is all
# there is. CUDA_LIBDIR (a CUDA build's toolkit library folder) is the -L that
# install.md's static pkg-config link adds for libcudart_static.a. Then: no
# installed library or consumer needs libcudart or libnccl (readelf), none
# loads them on a host-buffer run (LD_DEBUG), the .pc files hold no path into
# the CUDA toolkit, and nothing installed holds a test-only fault switch
# (tools/check_test_switches.sh).
set -euo pipefail
BUILD=${1:?usage: run_install.sh BUILD_DIR SOURCE_DIR [CUDA_LIBDIR]}
SRC=${2:?usage: run_install.sh BUILD_DIR SOURCE_DIR [CUDA_LIBDIR]}
CUDA_LIBDIR=${3:-}
unset LD_LIBRARY_PATH PKG_CONFIG_PATH
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
PREFIX=$TMP/prefix
fail() { echo "FAIL: $*"; exit 1; }

cmake --install "$BUILD" --prefix "$PREFIX" > "$TMP/install.log" || {
  cat "$TMP/install.log"; fail "cmake --install"; }
libdir=$(ls -d "$PREFIX"/lib* | head -1)
for f in include/gradsync/gradsync.h include/gradsync/version.h bin/gsrun bin/gs-bench bin/gs_info \
  bin/gs_store; do
  [ -e "$PREFIX/$f" ] || fail "$f is not installed"
done
for f in libgradsync.so libgradsync.a pkgconfig/gradsync.pc pkgconfig/gradsync-static.pc \
  cmake/gradsync/gradsyncConfig.cmake; do
  [ -e "$libdir/$f" ] || fail "${libdir#"$PREFIX"/}/$f is not installed"
done
# The installed tools run from the prefix alone (their RPATH finds the library).
"$PREFIX/bin/gs_info" > "$TMP/info.log" 2>&1 || { cat "$TMP/info.log"; fail "installed gs_info"; }

# 1 and 2: CMake, shared and static.
cmake -S "$SRC/tests/install/consumer" -B "$TMP/consumer" -DCMAKE_PREFIX_PATH="$PREFIX" \
  -DGS_EXAMPLE="$SRC/examples/allreduce.c" > "$TMP/consumer.log" 2>&1 &&
  cmake --build "$TMP/consumer" >> "$TMP/consumer.log" 2>&1 || {
  cat "$TMP/consumer.log"; fail "building against find_package(gradsync)"; }
# 3 and 4: pkg-config, shared and static, as docs/install.md says.
export PKG_CONFIG_PATH="$libdir/pkgconfig"
pkg-config --exists gradsync gradsync-static || fail "pkg-config gradsync gradsync-static"
# shellcheck disable=SC2046
cc -std=c11 -o "$TMP/allreduce_pc" "$SRC/examples/allreduce.c" \
  $(pkg-config --cflags --libs gradsync) || fail "building with pkg-config gradsync"
cuda_l=()
if grep -q -- '-lcudart_static' "$libdir/pkgconfig/gradsync-static.pc"; then
  [ -n "$CUDA_LIBDIR" ] || fail "a CUDA build, but no CUDA_LIBDIR argument"
  cuda_l=(-L"$CUDA_LIBDIR")
fi
# shellcheck disable=SC2046
cc -std=c11 -o "$TMP/allreduce_pc_static" "$SRC/examples/allreduce.c" \
  $(pkg-config --static --cflags --libs gradsync-static) "${cuda_l[@]}" ||
  fail "building with pkg-config --static gradsync-static"
unset PKG_CONFIG_PATH

for prog in "$TMP/consumer/allreduce_cmake" "$TMP/consumer/allreduce_static" \
  "$TMP/allreduce_pc" "$TMP/allreduce_pc_static"; do
  "$PREFIX/bin/gsrun" -n 2 --timeout 60 "$prog" 10007 > "$TMP/run.log" 2>&1 || {
    cat "$TMP/run.log"; fail "$(basename "$prog") on 2 ranks with nothing set"; }
  echo "PASS $(basename "$prog") on 2 ranks with the installed gsrun, nothing set"
done
# The shared builds really use the installed library, found by their RPATH;
# the static ones do not use it at all.
for prog in allreduce_pc consumer/allreduce_cmake; do
  found=$(ldd "$TMP/$prog" | awk '$1 ~ /^libgradsync\.so/ { print $3 }')
  if [ -z "$found" ] || [ "$(dirname "$(readlink -f "$found")")" != "$(readlink -f "$libdir")" ]; then
    fail "$prog does not load the installed libgradsync.so (ldd: ${found:-not found})"
  fi
done
for prog in allreduce_pc_static consumer/allreduce_static; do
  if readelf -d "$TMP/$prog" | grep -q 'NEEDED.*libgradsync'; then
    fail "$prog (static) needs libgradsync.so"
  fi
done
echo "PASS the shared consumers load the installed library by RPATH; the static ones need none"

# No CUDA runtime or NCCL for a program that passes no device buffer: neither
# the installed library nor any consumer needs them (the library links the
# runtime statically and loads libnccl.so.2 with dlopen on first use), and a
# host-buffer run loads neither. (gs-bench is left out: a CUDA build's is a
# CUDA program of its own, --device cuda, and links the runtime.)
for f in "$libdir"/libgradsync.so.* "$TMP/allreduce_pc" "$TMP/allreduce_pc_static" \
  "$TMP/consumer/allreduce_cmake" "$TMP/consumer/allreduce_static" "$PREFIX/bin/gsrun" \
  "$PREFIX/bin/gs_info"; do
  [ -L "$f" ] && continue
  if readelf -d "$f" | grep -E 'NEEDED.*(libcudart|libnccl)'; then
    fail "${f#"$TMP"/} needs the CUDA runtime or NCCL"
  fi
done
LD_DEBUG=files LD_DEBUG_OUTPUT="$TMP/lddebug" "$PREFIX/bin/gsrun" -n 2 --timeout 60 \
  "$TMP/allreduce_pc" 10007 > "$TMP/run.log" 2>&1 || { cat "$TMP/run.log"; fail "allreduce_pc under LD_DEBUG"; }
cat "$TMP"/lddebug.* > "$TMP/lddebug.all" 2> /dev/null || true
grep -q 'file=libgradsync' "$TMP/lddebug.all" || fail "LD_DEBUG=files recorded no load of libgradsync"
# gsrun --store finds the installed gs_store beside it, and the ranks bootstrap through it.
"$PREFIX/bin/gsrun" -n 2 --store 0 --timeout 60 "$TMP/allreduce_pc" 10007 > "$TMP/store.log" 2>&1 ||
  { cat "$TMP/store.log"; fail "installed gsrun --store (gs_store beside it)"; }
if grep -E 'file=[^ ]*(libcudart|libnccl)' "$TMP/lddebug.all"; then
  fail "a host-buffer run loaded the CUDA runtime or NCCL"
fi
echo "PASS no libcudart or libnccl is needed or loaded by the library, the tools and the consumers"
# The .pc files name no path into the CUDA toolkit (nor anything of it but
# libcudart_static, by name).
if grep -nE '(^|[ =:])(-L|-I|-Wl,-rpath,)?/[^ ]*(cuda|nccl)' "$libdir"/pkgconfig/*.pc; then
  fail "a .pc file holds a path into the CUDA toolkit or NCCL"
fi
if grep -nE 'nccl|-lcudart( |$)' "$libdir"/pkgconfig/*.pc; then
  fail "a .pc file names NCCL or the shared CUDA runtime"
fi
echo "PASS the .pc files hold no path into the CUDA toolkit"
# A build without zstd (GS_WITH_ZSTD=OFF, or AUTO without libzstd) names zstd
# nowhere in the static link interface (pkg-config, CMake); one with it does.
zstd_named=no
if grep -q -- '-lzstd' "$libdir/pkgconfig/gradsync-static.pc" ||
  grep -q 'zstd' "$libdir"/cmake/gradsync/gradsync-static-targets*.cmake; then
  zstd_named=yes
fi
if "$PREFIX/bin/gs_info" | grep -q '^zstd: off'; then
  [ "$zstd_named" = no ] || fail "built without zstd, but gradsync-static.pc or the static targets name zstd"
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
echo "run_install: installed to a temporary prefix; CMake and pkg-config consumers (shared, static) pass"
