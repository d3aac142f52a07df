#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# test_auto_redetect.sh SOURCE_DIR MPI OPENSSL: MPI and OpenSSL (each AUTO by default) are
# looked for again at every configure, not frozen at what the first one found (issue 25:
# `make run` configured before `make test` installed Open MPI, and the build never had the
# MPI transport). A scratch build dir is configured with both hidden
# (CMAKE_DISABLE_FIND_PACKAGE_*), then again with them visible: the second configure must
# build them in, as the generated package file (gradsyncConfig.cmake) says. MPI and
# OPENSSL (ON or OFF) are what the calling build found: a part it did not find is not
# checked; with neither, the test is skipped (77).
set -euo pipefail
SRC=${1:?usage: test_auto_redetect.sh SOURCE_DIR MPI OPENSSL}
MPI=${2:?MPI}
SSL=${3:?OPENSSL}
fail() { echo "FAIL: $*"; exit 1; }
[ "$MPI" = ON ] || [ "$SSL" = ON ] || { echo "SKIP: this build found neither MPI nor OpenSSL"; exit 77; }
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
B=$TMP/build
found() { # NAME: 1 when the generated package file says the part is built in
  grep -Eq "set\\(gradsync_$1 1\\)" "$B/gradsyncConfig.cmake"
}
conf() { # HIDE(ON|OFF): configure the scratch dir, MPI and OpenSSL hidden or not
  timeout 200 cmake -S "$SRC" -B "$B" -DGS_BUILD_TESTS=OFF -DGS_BUILD_BENCH=OFF \
    -DGS_WITH_CUDA=OFF -DCMAKE_DISABLE_FIND_PACKAGE_MPI="$1" \
    -DCMAKE_DISABLE_FIND_PACKAGE_OpenSSL="$1" > "$TMP/conf.log" 2>&1 || {
    cat "$TMP/conf.log"; fail "configure (hidden: $1)"; }
}
conf ON
! found MPI_FOUND || fail "MPI found though hidden: the test cannot tell"
! found WITH_OPENSSL || fail "OpenSSL found though hidden: the test cannot tell"
echo "PASS first configure, MPI and OpenSSL hidden: both off"
conf OFF
if [ "$MPI" = ON ]; then
  found MPI_FOUND || { grep -i mpi "$TMP/conf.log" || true; fail "MPI is installed, but the second configure left it off"; }
  echo "PASS second configure: MPI on"
fi
if [ "$SSL" = ON ]; then
  found WITH_OPENSSL || fail "OpenSSL is installed, but the second configure left it off"
  echo "PASS second configure: OpenSSL on"
fi
