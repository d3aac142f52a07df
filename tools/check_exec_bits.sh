#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# check_exec_bits.sh SOURCE_DIR: fail (exit 1) when a file tracked by git
# starts with a shebang ("#!") but is recorded without its executable bit
# (mode 100644), so that a fresh clone cannot run it directly. Files that
# are only sourced (lib_*.sh) carry no shebang. Exit 77 (skipped) outside a
# git checkout, e.g. in a source tarball.
set -euo pipefail
src=${1:?usage: check_exec_bits.sh SOURCE_DIR}
if ! command -v git >/dev/null || ! git -C "$src" rev-parse --git-dir >/dev/null 2>&1; then
    echo "skip: $src is not a git checkout"
    exit 77
fi
cd "$src"
# The modes as git records them (what a clone gets): the plain files without
# the bit, then one awk over all of them reads each first line only.
plain=$(git ls-files -s | awk -F '\t' '$1 ~ /^100644 / {print $2}')
count=$(printf '%s\n' "$plain" | grep -c . || true)
# shellcheck disable=SC2016 # an awk program
bad=$(printf '%s\n' "$plain" | while IFS= read -r f; do [ -f "$f" ] && printf '%s\0' "$f"; done |
    xargs -0 -r awk 'FNR == 1 { if (substr($0, 1, 2) == "#!") print FILENAME; nextfile }')
if [ -n "$bad" ]; then
    echo "FAIL: $(printf '%s\n' "$bad" | wc -l) tracked files with a shebang lack the executable bit:"
    printf '%s\n' "$bad" | sed 's/^/  /'
    echo "fix: git update-index --chmod=+x FILE (and chmod +x FILE)"
    exit 1
fi
echo "ok: none of the $count tracked files without the executable bit starts with a shebang"
