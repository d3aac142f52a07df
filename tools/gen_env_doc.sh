#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
#
# Regenerate docs/env.md from the knob table (src/core/env_table.h) through
# `gs_info --env-md`, so the page can never drift from the code. With
# --check, compare instead of writing and fail when docs/env.md is stale
# (what CI runs). It does not build gs_info; pass the path of a built one.
#
# usage: tools/gen_env_doc.sh path/to/gs_info [--check]
set -eu

if [ $# -lt 1 ] || [ $# -gt 2 ]; then
    echo "usage: $0 path/to/gs_info [--check]" >&2
    exit 2
fi
gs_info=$1
mode=${2:-write}
root=$(cd "$(dirname "$0")/.." && pwd)
doc="$root/docs/env.md"
tmp=$(mktemp "${TMPDIR:-/tmp}/gs_env_md.XXXXXX")
trap 'rm -f "$tmp"' EXIT

"$gs_info" --env-md >"$tmp"

case "$mode" in
--check)
    if ! diff -u "$doc" "$tmp"; then
        echo "docs/env.md is out of date: run tools/gen_env_doc.sh $gs_info" >&2
        exit 1
    fi
    ;;
write)
    cp "$tmp" "$doc"
    echo "wrote $doc"
    ;;
*)
    echo "usage: $0 path/to/gs_info [--check]" >&2
    exit 2
    ;;
esac
