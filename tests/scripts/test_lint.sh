#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# test_lint.sh: make lint's format check (scripts/lint.sh format FILE..., the
# same clang-format invocation and .clang-format as for the tree) fails on a
# misformatted file and passes a well-formatted one, and --fix-format turns
# the first into one that passes. The files are written to a scratch folder,
# never into the tree.
# Exit status: 0 pass, 1 fail, 77 skip (no clang-format).
set -u
HERE=$(cd "$(dirname "$0")/../.." && pwd)
LINT="$HERE/scripts/lint.sh"
if ! command -v clang-format >/dev/null 2>&1; then
    echo "test_lint: SKIP: no clang-format (scripts/install-deps.sh test installs it)"
    exit 77
fi
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
fail=0

# The house style: 4-space indent, function braces on their own line, the
# pointer star by the name.
cat >"$TMP/good.c" <<'C'
/* SPDX-License-Identifier: Apache-2.0 */
#include <stddef.h>

static int count_nonzero(const int *v, size_t n)
{
    int k = 0;

    for (size_t i = 0; i < n; i++) {
        if (v[i] != 0) {
            k++;
        }
    }
    return k;
}
C
# The same function, as it must not be written: 2-space indent, the brace on
# the signature's line, the star by the type, a line past 100 columns.
cat >"$TMP/bad.c" <<'C'
/* SPDX-License-Identifier: Apache-2.0 */
#include <stddef.h>

static int count_nonzero(const int* v, size_t n) {
  int k = 0;

  for (size_t i = 0; i < n; i++) { if (v[i] != 0) { k++; } }
  return k + (int)(n * 0) + (int)(n * 0) + (int)(n * 0) + (int)(n * 0) + (int)(n * 0) + (int)(n * 0);
}
C

out=""
run() {
    local want=$1 what=$2 rc
    shift 2
    out=$(bash "$LINT" "$@" 2>&1)
    rc=$?
    if [ "$want" = pass ] && [ $rc -ne 0 ]; then
        echo "test_lint: FAIL: $what: exit $rc, expected 0:"
        printf '%s\n' "$out"
        fail=1
    elif [ "$want" = fail ] && [ $rc -eq 0 ]; then
        echo "test_lint: FAIL: $what: exit 0, expected a failure:"
        printf '%s\n' "$out"
        fail=1
    else
        echo "test_lint: $what: exit $rc as expected"
    fi
}

run pass "format check of a well-formatted file" format "$TMP/good.c"
run fail "format check of a misformatted file" format "$TMP/bad.c"
if ! grep -q "bad.c" <<<"$out"; then
    echo "test_lint: FAIL: the failing format check does not name bad.c:"
    printf '%s\n' "$out"
    fail=1
fi
run fail "format check of both files" format "$TMP/good.c" "$TMP/bad.c"
cp "$TMP/bad.c" "$TMP/fixed.c"
run pass "--fix-format of the misformatted file" --fix-format "$TMP/fixed.c"
run pass "format check of the fixed file" format "$TMP/fixed.c"
if [ $fail -eq 0 ]; then
    echo "test_lint: PASS"
fi
exit $fail
