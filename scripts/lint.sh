#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# make lint: three static checks of the C sources, each with its checked-in
# configuration. Each says what it checked and how long it took; all three
# run, then the script exits 1 if any of them found something.
#   format    clang-format --dry-run --Werror with .clang-format, over every
#             tracked or new (not ignored) *.c, *.h and *.cu file
#   tidy      clang-tidy with .clang-tidy, over the C files of src/ and tools/
#             in the compile database of a configure without CUDA ($LINT_BUILD)
#   cppcheck  cppcheck with the options below and .cppcheck-suppressions, over
#             src/, tools/ and tests/unit/ in the same database
# Usage: see usage() below. Environment: LINT_BUILD (build folder, default
# build-lint), LINT_JOBS (parallel jobs, default 2).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd -P) # as CMake writes the database's paths
BUILD=${LINT_BUILD:-build-lint}
JOBS=${LINT_JOBS:-2}
STYLE="file:$ROOT/.clang-format"

# TEMPORARY: clang-tidy findings in files that someone else is changing right
# now, as "file:check" (that check is turned off for that file only). Each
# line goes once its finding is fixed; the list should be empty.
TIDY_TEMP_EXCLUDE=(
)

TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT

usage() {
  cat >&2 <<'USAGE'
usage: scripts/lint.sh [format|tidy|cppcheck ...]   those checks (default: all three)
       scripts/lint.sh format FILE...               the format check of these files only
       scripts/lint.sh --fix-format [FILE...]       clang-format -i over the format check's
                                                    files (or these)
USAGE
  exit 2
}

now() { printf '%s' "${EPOCHREALTIME/,/.}"; }
took() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.1f", b - a }'; }

# Every C, header and CUDA file git knows of or would add (the tree's files
# when this is not a git checkout), one per line.
format_files() {
  if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
    git ls-files -co --exclude-standard -- '*.c' '*.h' '*.cu'
  else
    find src include tools tests bench examples kernels -type f \
      \( -name '*.c' -o -name '*.h' -o -name '*.cu' \)
  fi | sort -u | while IFS= read -r f; do
    if [ -f "$f" ]; then printf '%s\n' "$f"; fi
  done
}

# format [FILE...]: every file must be exactly what clang-format makes of it.
check_format() {
  local t0 list=$TMP/format.list log=$TMP/format.log n bad
  t0=$(now)
  if [ $# -gt 0 ]; then printf '%s\n' "$@" >"$list"; else format_files >"$list"; fi
  n=$(wc -l <"$list")
  # Batches of files per clang-format; --Werror turns each difference into an error.
  tr '\n' '\0' <"$list" |
    xargs -0 -r -n 32 -P "$JOBS" clang-format --dry-run --Werror --style="$STYLE" 2>"$log" || true
  if [ -s "$log" ]; then
    grep -E ': error:' "$log" | head -n 20 || head -n 20 "$log"
    bad=$(grep -oE '^[^:]+:[0-9]+:[0-9]+: error:' "$log" | cut -d: -f1 | sort -u | wc -l || true)
    echo "lint: format: $bad of $n files differ from clang-format's output (.clang-format):"
    grep -oE '^[^:]+:[0-9]+:[0-9]+: error:' "$log" | cut -d: -f1 | sort | uniq -c |
      awk '{ printf "  %s (%d places)\n", $2, $1 }'
    echo "lint: format: fix with 'scripts/lint.sh --fix-format' ($(took "$t0") s)"
    return 1
  fi
  echo "lint: format: $n files (*.c, *.h, *.cu) match .clang-format ($(took "$t0") s)"
}

fix_format() {
  local list=$TMP/fix.list n
  if [ $# -gt 0 ]; then printf '%s\n' "$@" >"$list"; else format_files >"$list"; fi
  n=$(wc -l <"$list")
  tr '\n' '\0' <"$list" | xargs -0 -r -n 32 -P "$JOBS" clang-format -i --style="$STYLE"
  echo "lint: format: clang-format -i over $n files"
}

# The compile database. A configure without CUDA is enough (the one generated
# header, gradsync/version.h, is written at configure time); it is redone on
# every run so that new source files are in it.
compile_db() {
  mkdir -p "$BUILD"
  if ! cmake -S . -B "$BUILD" -DCMAKE_EXPORT_COMPILE_COMMANDS=ON -DGS_WITH_CUDA=OFF \
    -DGS_WITH_NCCL=OFF >"$BUILD/lint-configure.log" 2>&1; then
    cat "$BUILD/lint-configure.log" >&2
    echo "lint: the configure of $BUILD failed" >&2
    return 1
  fi
}

# The database's files under the given folders (absolute paths), one per line.
db_files() {
  grep -oE '"file": *"[^"]*"' "$BUILD/compile_commands.json" | sed -E 's/^"file": *"(.*)"$/\1/' |
    awk -v root="$ROOT" -v dirs="$*" '
      BEGIN { n = split(dirs, d, " ") }
      { for (i = 1; i <= n; i++) if (index($0, root "/" d[i] "/") == 1) { print; next } }' |
    sort -u
}

# One translation unit. Its output goes to a log of its own in $TIDY_OUT, so
# that the parallel runs do not interleave; a failing one is added to
# $TIDY_OUT/failed.
tidy_one() {
  local f=$1 out=$TIDY_OUT rel extra="" e
  rel=${f#"$ROOT"/}
  for e in $TIDY_TEMP_EXCLUDE_LIST; do
    if [ "${e%%:*}" = "$rel" ]; then extra="$extra,-${e#*:}"; fi
  done
  if ! clang-tidy -p "$BUILD" --quiet ${extra:+--checks="${extra#,}"} "$f" \
    >"$out/$(printf '%s' "$rel" | tr / _).log" 2>&1; then
    printf '%s\n' "$rel" >>"$out/failed"
  fi
}

check_tidy() {
  local t0 out=$TMP/tidy n
  t0=$(now)
  mkdir -p "$out"
  db_files src tools | grep -E '\.c$' >"$out/files" || true
  n=$(wc -l <"$out/files")
  TIDY_TEMP_EXCLUDE_LIST="${TIDY_TEMP_EXCLUDE[*]-}"
  export -f tidy_one
  TIDY_OUT=$out
  export ROOT BUILD TIDY_TEMP_EXCLUDE_LIST TIDY_OUT
  tr '\n' '\0' <"$out/files" | xargs -0 -r -n 1 -P "$JOBS" bash -c 'tidy_one "$1"' _ || true
  if [ -s "$out/failed" ]; then
    sort "$out/failed" | while IFS= read -r rel; do
      cat "$out/$(printf '%s' "$rel" | tr / _).log"
    done
    echo "lint: tidy: the findings, each once:"
    cat "$out"/*.log | grep -E '^[^ ]+:[0-9]+:[0-9]+: (error|warning):' | sed "s|^$ROOT/||" |
      sort -u | sed 's/^/  /'
    echo "lint: tidy: $(wc -l <"$out/failed") of $n files of src/ and tools/ fail .clang-tidy" \
      "($(took "$t0") s)"
    return 1
  fi
  echo "lint: tidy: $n files of src/ and tools/ pass .clang-tidy ($(took "$t0") s, $JOBS jobs)"
}

check_cppcheck() {
  local t0 n
  t0=$(now)
  n=$(db_files src tools tests/unit | wc -l)
  # warning, performance and portability: the findings that are bugs or may
  # become ones (style is clang-format's and the reviewers'); posix: what the
  # POSIX calls do with their arguments, so that a leaked descriptor shows.
  # An absolute --project: with a relative one, cppcheck makes the paths relative.
  if ! cppcheck --project="$(cd "$BUILD" && pwd -P)/compile_commands.json" \
    --file-filter="$ROOT/src/*" \
    --file-filter="$ROOT/tools/*" --file-filter="$ROOT/tests/unit/*" --library=posix \
    --enable=warning,performance,portability --inline-suppr \
    --suppressions-list=.cppcheck-suppressions --error-exitcode=1 --quiet --template=gcc \
    -j "$JOBS"; then
    echo "lint: cppcheck: findings in src/, tools/ or tests/unit/ ($(took "$t0") s)"
    return 1
  fi
  echo "lint: cppcheck: $n files of src/, tools/ and tests/unit/ pass ($(took "$t0") s)"
}

checks=()
files=()
fix=0
for a in "$@"; do
  case "$a" in
    --fix-format) fix=1 ;;
    format | tidy | cppcheck) checks+=("$a") ;;
    -h | --help) usage ;;
    *)
      if [ ! -f "$a" ]; then
        echo "lint: no such check or file: $a" >&2
        usage
      fi
      files+=("$a")
      ;;
  esac
done
if [ $fix = 1 ]; then
  fix_format ${files[@]+"${files[@]}"}
  exit 0
fi
if [ ${#files[@]} -gt 0 ]; then
  if [ "${checks[*]-}" != format ]; then
    echo "lint: files are for the format check only (scripts/lint.sh format FILE...)" >&2
    exit 2
  fi
  check_format "${files[@]}"
  exit
fi
if [ ${#checks[@]} = 0 ]; then checks=(format tidy cppcheck); fi

need=()
for c in "${checks[@]}"; do
  case $c in
    format) need+=(clang-format) ;;
    tidy) need+=(cmake clang-tidy) ;;
    cppcheck) need+=(cmake cppcheck) ;;
  esac
done
for tool in "${need[@]}"; do
  if ! command -v "$tool" >/dev/null 2>&1; then
    echo "lint: $tool not found (scripts/install-deps.sh test installs it)" >&2
    exit 2
  fi
done

t_all=$(now)
status=0
case " ${checks[*]} " in
  *" tidy "* | *" cppcheck "*)
    t0=$(now)
    compile_db
    echo "lint: compile database: $BUILD/compile_commands.json, configured without CUDA" \
      "($(took "$t0") s)"
    ;;
esac
for c in "${checks[@]}"; do
  "check_$c" || status=1
done
if [ $status != 0 ]; then
  echo "lint: FAILED ($(took "$t_all") s)"
else
  echo "lint: passed ($(took "$t_all") s)"
fi
exit $status
