#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# tests/gpu/pack_deps.sh DIR: copy the build dependencies that a bare CUDA
# image may lack (libzstd's headers and library, and cmocka's, which
# run.sh can do without) from this machine into DIR/include and DIR/lib,
# for tests/gpu/run.sh on a GPU machine that cannot install packages:
#
#   bash tests/gpu/pack_deps.sh .gpu-deps    # here, in the repository root
#   # then bring .gpu-deps along; run.sh uses $GPURUN_DEPS or ./.gpu-deps
#
# About 1 MiB. The libraries are this machine's builds (x86-64 glibc); a
# newer glibc on the GPU machine runs them. NCCL is not packed (hundreds of
# MiB): run.sh finds the GPU image's own.
set -euo pipefail

DIR=${1:?usage: pack_deps.sh DIR}
mkdir -p "$DIR/include" "$DIR/lib"

# copy_lib NAME: libNAME.so and its SONAME link, as plain files.
copy_lib() {
  local so real soname d
  for d in /usr/lib/x86_64-linux-gnu /usr/lib64 /usr/lib /usr/local/lib; do
    so=$d/lib$1.so
    [ -e "$so" ] || continue
    real=$(readlink -f "$so")
    soname=$(objdump -p "$real" 2>/dev/null | awk '$1 == "SONAME" {print $2}')
    cp -L "$real" "$DIR/lib/lib$1.so"
    [ -n "$soname" ] && cp -L "$real" "$DIR/lib/$soname"
    echo "lib$1: $real (soname ${soname:-?})"
    return 0
  done
  echo "lib$1: not found on this machine" >&2
  return 1
}

copy_headers() { # copy_headers HEADER...
  local h d found
  for h in "$@"; do
    found=0
    for d in /usr/include /usr/local/include; do
      if [ -f "$d/$h" ]; then
        cp "$d/$h" "$DIR/include/"
        found=1
        break
      fi
    done
    [ "$found" = 1 ] || { echo "$h: not found on this machine" >&2; return 1; }
  done
}

copy_headers zstd.h zstd_errors.h zdict.h
copy_lib zstd
if copy_headers cmocka.h && copy_lib cmocka; then
  copy_headers cmocka_pbc.h || true
else
  echo "cmocka not packed (run.sh does without it)"
fi
du -sh "$DIR"
