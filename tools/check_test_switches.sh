#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# check_test_switches.sh ENV_TABLE FILE...: fail (exit 1) when `strings` finds
# the name of a test-only fault switch in any FILE (a library, a program).
# The names are read from the GS_ENV_TEST_ROWS rows of ENV_TABLE
# (src/core/env_table.h), so a new row is covered without editing this
# script. The library users build, install or load from Python must have
# none; only the test variant (gradsync_testhooks) does, and the test
# test_switches_found runs this script on it to prove the check can fail.
set -euo pipefail
table=${1:?usage: check_test_switches.sh ENV_TABLE FILE...}
shift
[ "$#" -gt 0 ] || { echo "usage: check_test_switches.sh ENV_TABLE FILE..."; exit 2; }
command -v strings >/dev/null || { echo "check_test_switches: strings (binutils) is missing"; exit 2; }
# The rows: from "#define GS_ENV_TEST_ROWS(X)" to the first line without a
# continuation backslash; each row starts X("NAME", ...
names=$(sed -n '/^#define GS_ENV_TEST_ROWS(X)/,/[^\\]$/p' "$table" |
  sed -n 's/^[[:space:]]*X("\(GS_[A-Z0-9_]*\)".*/\1/p')
if [ -z "$names" ]; then
  echo "check_test_switches: no GS_ENV_TEST_ROWS names in $table (has its form changed?)"
  exit 2
fi
bad=0
for f in "$@"; do
  [ -f "$f" ] || { echo "check_test_switches: $f does not exist"; exit 2; }
  found=$(strings -a "$f" | grep -F -o -f <(echo "$names") | sort -u | tr '\n' ' ' || true)
  if [ -n "$found" ]; then
    echo "FAIL: $f contains test switches: $found"
    bad=1
  else
    echo "ok: $f has none of the test switches ($(echo "$names" | tr '\n' ' '))"
  fi
done
exit "$bad"
