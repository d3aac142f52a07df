#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Check that libgradsync.so exports exactly the gs_* functions declared with
# GS_API in the public headers, and that it has a SONAME.
set -euo pipefail
lib=$1
incdir=$2
# Every defined dynamic symbol of every type (functions, ifuncs, weak
# resolvers, data), except the version node itself.
all=$(nm -D --defined-only "$lib" | awk '$2 != "A" {sub(/@.*/, "", $3); print $3}' | sort -u)
leaked=$(echo "$all" | grep -v '^gs_[a-z0-9]' || true)
if [ -n "$leaked" ]; then
  echo "libgradsync.so exports names outside the gs_* API (internal or foreign):"
  echo "$leaked"
  exit 1
fi
exported=$(nm -D --defined-only "$lib" | awk '$2 == "T" {sub(/@.*/, "", $3); print $3}' | sort -u)
other=$(nm -D --defined-only "$lib" | awk '$2 != "T" && $2 != "A" {print $3}')
if [ -n "$other" ]; then
  echo "libgradsync.so exports symbols that are not plain functions:"
  echo "$other"
  exit 1
fi
# gradsync/mpi.h declares calls that exist only in builds with MPI (GS_WITH_MPI),
# recognised by the library's dependency on libmpi.
headers=$(ls "$incdir"/*.h)
if ! readelf -d "$lib" | grep -q 'NEEDED.*libmpi'; then
  headers=$(echo "$headers" | grep -v '/mpi\.h$')
fi
# shellcheck disable=SC2086
declared=$(grep -ho '^GS_API [^(]*(' $headers | sed -E 's/.*[ *]([a-z_0-9]+)\($/\1/' | sort -u)
if [ "$exported" != "$declared" ]; then
  echo "exported symbols differ from the GS_API declarations (< exported, > declared):"
  diff <(echo "$exported") <(echo "$declared") || true
  exit 1
fi
soname=$(readelf -d "$lib" | sed -n 's/.*SONAME.*\[\(.*\)\]/\1/p')
case "$soname" in
  libgradsync.so.[0-9]*) ;;
  *) echo "bad or missing SONAME: '$soname'"; exit 1 ;;
esac
echo "exported symbols: $(echo "$exported" | wc -l) match the headers; SONAME $soname"
