#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# pip_install.sh SOURCE_DIR BUILD_LIBRARY PYTHON FALLBACK_CACHE: `pip install ./python` as a
# user runs it, into a fresh venv of PYTHON (a temporary folder), then the demo of
# docs/python.md ("A first script", taken from the page) on 2 ranks with RANK, WORLD_SIZE,
# MASTER_ADDR and MASTER_PORT alone: no GRADSYNC_LIBRARY, PYTHONPATH or LD_LIBRARY_PATH.
# The library must come from inside the installed package, with its SONAME and a RUNPATH
# that names nothing of the (deleted) build folder. Then GRADSYNC_LIBRARY must still win
# (BUILD_LIBRARY, the CMake build's, is loaded; a missing path is an error naming it), the
# extras must be declared, the source tree must be left as it was, and `pip wheel ./python`
# must give one self-contained wheel: libgradsync.so.0 inside, run on 2 ranks from a second
# fresh venv.
#
# The build backend (scikit-build-core, and Ninja where the system has none) comes from a
# wheelhouse, GRADSYNC_PIP_WHEELHOUSE or ~/.cache/gradsync/pip-wheelhouse (FALLBACK_CACHE
# when that cannot be written), filled from PyPI on the first run and used offline
# (--no-index) after. With PyPI out of reach and nothing there the test skips (exit 77).
# Both builds pass GRADSYNC_PIP_CONFIG, each word one --config-settings: by default
# cmake.define.GS_WITH_CUDA=OFF, for speed; GRADSYNC_PIP_CONFIG= (empty) builds what a user
# gets, the device path in when a CUDA toolkit is found. (Not GS_*: the library warns about
# GS_ variables it does not know.)
set -euo pipefail
src=$(cd "$1" && pwd)
build_lib=$2
py=$3
fallback_cache=$4
read -r -a config <<<"${GRADSYNC_PIP_CONFIG-cmake.define.GS_WITH_CUDA=OFF}"
# Nothing of the caller's: the point is that nothing needs to be set.
unset GRADSYNC_LIBRARY PYTHONPATH LD_LIBRARY_PATH PYTHONHOME VIRTUAL_ENV CMAKE_ARGS
export PIP_DISABLE_PIP_VERSION_CHECK=1 PYTHONDONTWRITEBYTECODE=1

work=$(mktemp -d "${TMPDIR:-/tmp}/gs-pip.XXXXXX")
trap 'rm -rf "$work"' EXIT
fail() {
  echo "pip_install: FAIL: $*" >&2
  exit 1
}
step() { echo "pip_install: $* ($(($(date +%s) - t0)) s)"; }
t0=$(date +%s)

# The wheelhouse: what pip must fetch to build (the system's CMake, and Ninja when there is
# one, are used as they are), plus numpy when PYTHON has none (the demo uses it).
cache=${XDG_CACHE_HOME:-${HOME:-/nonexistent}/.cache}
wh=${GRADSYNC_PIP_WHEELHOUSE:-$cache/gradsync/pip-wheelhouse}
if ! mkdir -p "$wh" 2>/dev/null || [ ! -w "$wh" ]; then
  wh=$fallback_cache
  mkdir -p "$wh"
fi
need=(scikit-build-core)
have=(scikit_build_core-)
if ! command -v ninja >/dev/null 2>&1; then
  need+=(ninja)
  have+=(ninja-)
fi
if ! "$py" -c 'import numpy' 2>/dev/null; then
  need+=(numpy)
  have+=(numpy-)
fi
missing=0
for h in "${have[@]}"; do
  compgen -G "$wh/$h*.whl" >/dev/null || missing=1
done

# --system-site-packages: Debian's numpy (python3-numpy) satisfies the numpy extra offline.
"$py" -m venv --system-site-packages "$work/venv" ||
  fail "$py -m venv (Debian: apt-get install python3-venv)"
pip=("$work/venv/bin/python" -m pip)
if [ "$missing" = 1 ]; then
  if ! "${pip[@]}" download --quiet --timeout 20 --retries 1 --dest "$wh" "${need[@]}" \
      >"$work/download.log" 2>&1; then
    cat "$work/download.log"
    # Skipped only for want of a network; any other refusal is a failure.
    net='NewConnectionError|ConnectTimeout|ReadTimeout|ProxyError|Connection refused|'
    net+='Network is unreachable|Temporary failure in name resolution|Name or service not known'
    grep -Eq "$net" "$work/download.log" || fail "pip download ${need[*]} (above)"
    echo "pip_install: SKIP: PyPI is out of reach and $wh holds no ${need[*]} (a run with PyPI" \
         "fills it; GRADSYNC_PIP_WHEELHOUSE names another folder of those wheels)"
    exit 77
  fi
  step "wheelhouse $wh filled from PyPI: $(cd "$wh" && echo *.whl)"
else
  step "wheelhouse $wh (offline): $(cd "$wh" && echo *.whl)"
fi
offline=(--no-index --find-links "$wh")
# One CMake build folder for both builds, in the scratch folder (never the source tree): the
# second, pip wheel, reconfigures and finds the library built, so the test pays for one
# compile. (A user's pip call gets a temporary one.)
cfg=("--config-settings=build-dir=$work/skbuild")
for c in "${config[@]}"; do
  cfg+=("--config-settings=$c")
done

# The source tree before: every file under python/ (the backend's working folder) and every
# name at the top but the build folders (build, build-*), which others may make meanwhile.
tree_state() {
  (cd "$src" && find python -path '*/__pycache__' -prune -o -print | sort &&
    find . -mindepth 1 -maxdepth 1 ! -name build ! -name 'build-*' | sort)
}
tree_state >"$work/tree.before"

# 1. pip install ./python (with the numpy extra), from a folder that is not the source.
cd "$work"
"${pip[@]}" install "${offline[@]}" "${cfg[@]}" "$src/python[numpy]" >"$work/install.log" 2>&1 ||
  { cat "$work/install.log"; fail "pip install $src/python[numpy]"; }
step "pip install ./python[numpy] ${cfg[*]} done"
tree_state >"$work/tree.after"
diff "$work/tree.before" "$work/tree.after" ||
  fail "pip install left files in the source tree (above: > lines are new)"

vpy=$work/venv/bin/python
"$vpy" - "$work/venv" >"$work/where.txt" <<'EOF' || fail "import gradsync in the venv"
import importlib.metadata as md
import os
import sys

import gradsync

venv = os.path.realpath(sys.argv[1])
pkg = os.path.dirname(os.path.realpath(gradsync.__file__))
lib = os.path.realpath(gradsync.library_path())
assert pkg.startswith(venv + os.sep), "gradsync imported from %s, not the venv" % pkg
assert lib == os.path.join(pkg, "libgradsync.so.0"), "library loaded from %s" % lib
assert gradsync.library_version() == gradsync.__version__ == md.version("gradsync"), \
    (gradsync.library_version(), gradsync.__version__, md.version("gradsync"))
reqs = md.requires("gradsync") or []
for want in ('numpy; extra == "numpy"', 'pytest; extra == "test"', 'numpy; extra == "test"'):
    assert want in reqs, "%r not in the metadata's requirements %r" % (want, reqs)
print(lib)
EOF
lib=$(cat "$work/where.txt")
step "installed library $lib"

# 2. The library: its SONAME, a RUNPATH of existing folders outside the source tree and the
# temporary build folder, and every library it needs found with nothing set.
check_elf() {
  local f=$1 dyn soname runpath d
  dyn=$(readelf -d "$f") || fail "readelf -d $f"
  soname=$(sed -n 's/.*(SONAME).*\[\(.*\)\]/\1/p' <<<"$dyn")
  [ "$soname" = libgradsync.so.0 ] || fail "$f: SONAME '$soname', not libgradsync.so.0"
  ! grep -q '(RPATH)' <<<"$dyn" || fail "$f has an RPATH (not RUNPATH): $dyn"
  runpath=$(sed -n 's/.*(RUNPATH).*\[\(.*\)\]/\1/p' <<<"$dyn")
  IFS=: read -r -a dirs <<<"$runpath"
  for d in "${dirs[@]}"; do
    case $d in
      "$src"* | "$work"*) fail "$f: RUNPATH names $d (a build folder): $runpath" ;;
    esac
    [ -d "$d" ] || fail "$f: RUNPATH names $d, which does not exist: $runpath"
  done
  if ldd "$f" | grep 'not found'; then
    fail "$f: ldd says not found (above) with LD_LIBRARY_PATH unset"
  fi
  echo "pip_install: $f: SONAME $soname, RUNPATH '${runpath}'"
}
check_elf "$lib"

# 3. The demo of docs/python.md on 2 ranks, from torchrun's variables alone.
awk '/^```python$/ {inb = 1; n = 0; next} inb && /^```$/ {inb = 0; if (demo) exit}
     inb { if (n++ == 0 && $0 == "# demo.py") demo = 1; if (demo) print }' \
  "$src/docs/python.md" >"$work/demo.py"
grep -q 'gradsync.Communicator()' "$work/demo.py" ||
  fail "no '# demo.py' block in docs/python.md (A first script)"
free_port() {
  "$vpy" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0))
print(s.getsockname()[1])'
}
run_demo() {
  local python=$1 tag=$2 port r ok pid pids
  for attempt in 1 2 3; do
    port=$(free_port)
    pids=()
    for r in 0 1; do
      RANK=$r WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=$port \
        timeout 120 "$python" "$work/demo.py" >"$work/$tag.$r.out" 2>&1 &
      pids+=($!)
    done
    ok=1
    for pid in "${pids[@]}"; do
      wait "$pid" || ok=0
    done
    if [ "$ok" = 1 ]; then
      break
    fi
    if [ "$attempt" = 3 ] || ! grep -qi 'address already in use' "$work/$tag".*.out; then
      cat "$work/$tag".*.out
      fail "the demo on 2 ranks ($tag)"
    fi
  done
  for r in 0 1; do
    grep -qx "$r 2 0.5 \[0 1\]" "$work/$tag.$r.out" ||
      { cat "$work/$tag.$r.out"; fail "rank $r printed not '$r 2 0.5 [0 1]' ($tag)"; }
  done
  step "demo on 2 ranks ($tag): $(cat "$work/$tag.0.out") / $(cat "$work/$tag.1.out")"
}
run_demo "$vpy" install

# 4. GRADSYNC_LIBRARY still comes first: the CMake build's library, and a missing path.
got=$(GRADSYNC_LIBRARY=$build_lib "$vpy" -c 'import gradsync; print(gradsync.library_path())')
[ "$got" = "$build_lib" ] || fail "GRADSYNC_LIBRARY=$build_lib loaded $got"
bad=$work/no-such-dir/libgradsync.so
if GRADSYNC_LIBRARY=$bad "$vpy" -c 'import gradsync' >"$work/bad.out" 2>&1; then
  fail "GRADSYNC_LIBRARY=$bad imported"
fi
grep -q "LibraryNotFound.*GRADSYNC_LIBRARY=$bad" "$work/bad.out" ||
  { cat "$work/bad.out"; fail "the error for GRADSYNC_LIBRARY=$bad does not name it"; }
step "GRADSYNC_LIBRARY overrides: $build_lib loaded; $bad refused by name"

# 5. pip wheel ./python: one wheel for every Python 3 of this platform, holding the library
# (one file, no links), installed alone into a second fresh venv and run there.
"${pip[@]}" wheel --no-deps "${offline[@]}" "${cfg[@]}" -w "$work/wheels" "$src/python" \
  >"$work/wheel.log" 2>&1 || { cat "$work/wheel.log"; fail "pip wheel $src/python"; }
tree_state >"$work/tree.after"
diff "$work/tree.before" "$work/tree.after" ||
  fail "pip wheel left files in the source tree (above: > lines are new)"
whl=("$work"/wheels/gradsync-*.whl)
if [ "${#whl[@]}" != 1 ] || [ ! -f "${whl[0]}" ]; then
  fail "pip wheel made ${whl[*]}"
fi
case ${whl[0]##*/} in
  gradsync-*-py3-none-linux_*.whl) ;;
  *) fail "wheel ${whl[0]##*/}: want the tag py3-none-linux_<arch>" ;;
esac
"$vpy" - "${whl[0]}" <<'EOF' || fail "the wheel's contents"
import sys
import zipfile

names = zipfile.ZipFile(sys.argv[1]).namelist()
libs = [n for n in names if "libgradsync" in n]
assert libs == ["gradsync/libgradsync.so.0"], "libraries in the wheel: %r" % libs
for want in ("gradsync/__init__.py", "gradsync/py.typed", "gradsync/torch/__init__.py"):
    assert want in names, "%s missing from the wheel: %r" % (want, names)
print("pip_install: wheel holds %d files, the library as %s" % (len(names), libs[0]))
EOF
"$py" -m venv --system-site-packages "$work/venv2"
"$work/venv2/bin/python" -m pip install --quiet "${offline[@]}" "${whl[0]}[numpy]" ||
  fail "pip install ${whl[0]}[numpy]"
step "wheel ${whl[0]##*/} ($(stat -c %s "${whl[0]}") bytes) installed into a second venv"
run_demo "$work/venv2/bin/python" wheel
echo "pip_install: PASS"
