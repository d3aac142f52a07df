# SPDX-License-Identifier: Apache-2.0
"""The binding against the C headers, and finding the library.

test_structs_and_enums compiles a C program against include/gradsync and compares
every mirrored struct (size and every field offset) and enum value with the ctypes
tables; test_signatures parses every GS_API declaration of gradsync.h, compress.h,
bucket.h and ps.h and compares it with the argtypes/restype table. Both fail when a
header gains a field, a value or a function the binding does not have yet."""
import ctypes
import os
import re
import shutil
import subprocess
import sys

import pytest

import gradsync
from gradsync import _lib, _types as T

HERE = os.path.dirname(os.path.abspath(__file__))
SRC = os.environ.get("GS_SOURCE_DIR") or os.path.abspath(os.path.join(HERE, "..", ".."))
INCLUDE = os.path.join(SRC, "include")
HEADERS = ["gradsync.h", "compress.h", "bucket.h", "ps.h"]

STRUCTS = {T.Config: "gs_config_t", T.Counters: "gs_counters_t", T.CollStats: "gs_coll_stats_t",
           T.CommStats: "gs_comm_stats_t", T.PeerStats: "gs_peer_stats_t",
           T.RailStats: "gs_rail_stats_t",
           T.CollOpts: "gs_coll_opts_t", T.AllreduceOpts: "gs_allreduce_opts_t",
           T.P2PStatus: "gs_p2p_status_t", T.CodecConfig: "gs_codec_config_t",
           T.BucketerOpts: "gs_bucketer_opts_t", T.BucketerStats: "gs_bucketer_stats_t",
           T.BucketInfo: "gs_bucket_info_t", T.PSOpts: "gs_ps_opts_t", T.PSInfo: "gs_ps_info_t"}
_ALGO_C = {"RD": "RECURSIVE_DOUBLING", "HIER": "HIERARCHICAL"}
_DTYPE_C = {"FLOAT32": "F32", "FLOAT64": "F64", "FLOAT16": "F16", "BFLOAT16": "BF16",
            "INT8": "I8", "UINT8": "U8", "INT32": "I32", "INT64": "I64"}


def enum_constants():
    out = {}
    out.update({"GS_DTYPE_" + _DTYPE_C[d.name]: int(d) for d in T.DType})
    out.update({"GS_OP_" + o.name: int(o) for o in T.Op})
    out.update({"GS_ALGO_" + _ALGO_C.get(a.name, a.name): int(a) for a in T.Algo})
    out.update({"GS_CODEC_" + k.name: int(k) for k in T.CodecKind})
    out.update({"GS_CODEC_ZSTD_" + z.name: int(z) for z in T.CodecZstd})
    out.update({"GS_PS_" + c.name: int(c) for c in T.PSConsistency})
    out.update({"GS_PS_RULE_" + r.name: int(r) for r in T.PSRule})
    out.update({"GS_SCOPE_" + s.name: int(s) for s in T.Scope})
    out.update({"GS_COLL_TYPE_" + c.name: int(c) for c in T.CollType})
    out.update(T.STATUS)
    out.update({"GS_DTYPE_COUNT": len(T.DType), "GS_OP_COUNT": len(T.Op),
                "GS_ALGO_COUNT": len(T.Algo), "GS_CODEC_KIND_COUNT": len(T.CodecKind),
                "GS_COLL_TYPE_COUNT": len(T.CollType),
                "GS_UNSET": T.UNSET, "GS_ANY_SOURCE": T.ANY_SOURCE,
                "GS_STATS_COLL_MAX": T.STATS_COLL_MAX,
                "GS_VERSION_MAJOR": T.HEADER_VERSION // 10000})
    return out


def _build_include():
    lib = os.environ.get("GRADSYNC_LIBRARY") or gradsync.library_path()
    cand = os.path.join(os.path.dirname(os.path.abspath(lib)), "include")
    return cand if os.path.exists(os.path.join(cand, "gradsync", "version.h")) else None


def test_structs_and_enums(tmp_path):
    cc = shutil.which(os.environ.get("CC", "cc")) or shutil.which("gcc")
    binc = _build_include()
    if cc is None or binc is None or not os.path.isdir(INCLUDE):
        pytest.skip("needs a C compiler, %s and the build's include/gradsync/version.h "
                    "next to the library" % INCLUDE)
    lines = ['#include <stdio.h>', '#include <stddef.h>']
    lines += ['#include "gradsync/%s"' % h for h in HEADERS]
    lines.append("int main(void) {")
    expect = []
    for cls, cname in STRUCTS.items():
        lines.append('printf("%%zu\\n", sizeof(%s));' % cname)
        expect.append(("sizeof(%s)" % cname, ctypes.sizeof(cls)))
        for fname, _ in cls._fields_:
            lines.append('printf("%%zu\\n", offsetof(%s, %s));' % (cname, fname))
            expect.append(("offsetof(%s, %s)" % (cname, fname), getattr(cls, fname).offset))
    for name, value in enum_constants().items():
        lines.append('printf("%%lld\\n", (long long)(%s));' % name)
        expect.append((name, value))
    lines.append("return 0; }")
    src = tmp_path / "abi.c"
    src.write_text("\n".join(lines))
    exe = tmp_path / "abi"
    r = subprocess.run([cc, "-std=c11", "-I", INCLUDE, "-I", binc, str(src), "-o", str(exe)],
                       capture_output=True, text=True)
    assert r.returncode == 0, "the headers lack something the binding names:\n" + r.stderr
    got = subprocess.run([str(exe)], capture_output=True, text=True, check=True).stdout.split()
    bad = ["%s: C %s, Python %s" % (what, g, want) for (what, want), g in zip(expect, got)
           if int(g) != want]
    assert not bad, "binding out of date with the headers:\n" + "\n".join(bad)


def test_tables_are_complete():
    """Every row of the X-macro tables (status, dtype, op, algo, codec) is mirrored."""
    if not os.path.isdir(INCLUDE):
        pytest.skip("the headers are not at %s (set GS_SOURCE_DIR)" % INCLUDE)
    rows = {}
    for h in ("status.h", "types.h", "compress.h"):
        text = open(os.path.join(INCLUDE, "gradsync", h)).read()
        rows.update({m.group(1): int(m.group(2))
                     for m in re.finditer(r"X\((GS_\w+),\s*(-?\d+)", text)})
    ours = enum_constants()
    missing = {k: v for k, v in rows.items() if ours.get(k) != v}
    assert not missing, "header rows the binding lacks or disagrees with: %s" % missing


_C_TO_CTYPES = {
    "gs_comm_t": ctypes.c_void_p, "gs_request_t": ctypes.c_void_p, "gs_ef_t": ctypes.c_void_p,
    "gs_bucketer_t": ctypes.c_void_p, "gs_ps_t": ctypes.c_void_p, "void*": ctypes.c_void_p,
    "size_t": ctypes.c_size_t, "int": ctypes.c_int, "unsigned": ctypes.c_uint,
    "uint32_t": ctypes.c_uint32, "uint64_t": ctypes.c_uint64, "gs_dtype_t": ctypes.c_int,
    "gs_op_t": ctypes.c_int, "gs_status_t": ctypes.c_int, "gs_status_scope_t": ctypes.c_int,
    "gs_coll_type_t": ctypes.c_int, "gs_algo_t": ctypes.c_int,
    "char*": ctypes.c_char_p, "size_t*": ctypes.POINTER(ctypes.c_size_t),
    "int*": ctypes.POINTER(ctypes.c_int), "gs_status_t*": ctypes.POINTER(ctypes.c_int),
    "FILE*": ctypes.c_void_p,
    # 128 opaque bytes, passed as a buffer (Communicator.unique_id, grow, join)
    "gs_unique_id_t*": ctypes.c_void_p,
}
for _h in ("gs_comm_t", "gs_request_t", "gs_ef_t", "gs_bucketer_t", "gs_ps_t",
           "gs_ps_request_t"):
    _C_TO_CTYPES[_h + "*"] = ctypes.POINTER(ctypes.c_void_p)
for _cls, _cname in STRUCTS.items():
    _C_TO_CTYPES[_cname + "*"] = ctypes.POINTER(_cls)
    _C_TO_CTYPES["struct" + _cname[:-2] + "*"] = ctypes.POINTER(_cls)


def _ctype(text):
    t = re.sub(r"\bconst\b", "", text)
    t = re.sub(r"\s+", "", t)
    return _C_TO_CTYPES.get(t, "unknown C type %r" % text)


def declarations():
    out = {}
    for h in HEADERS:
        text = open(os.path.join(INCLUDE, "gradsync", h)).read()
        text = re.sub(r"/\*.*?\*/", "", text, flags=re.S)
        for m in re.finditer(r"GS_API\s+([^;(]*?)\b(gs_\w+)\s*\(([^)]*)\)\s*;", text):
            ret, name, params = m.group(1), m.group(2), m.group(3).strip()
            args = []
            if params not in ("", "void"):
                for p in params.split(","):
                    p = p.strip()
                    pm = re.match(r"(.*?)(\w+)$", p, flags=re.S)
                    args.append(_ctype(pm.group(1)))
            out[name] = (_ctype(ret), args)
    return out


def test_signatures():
    if not os.path.isdir(INCLUDE):
        pytest.skip("the headers are not at %s (set GS_SOURCE_DIR)" % INCLUDE)
    decl = declarations()
    assert len(decl) > 80
    missing = sorted(set(decl) - set(_lib.SIGNATURES))
    extra = sorted(set(_lib.SIGNATURES) - set(decl))
    assert not missing, "declared in the headers but not bound: %s" % missing
    assert not extra, "bound but not declared: %s" % extra
    bad = []
    for name, (ret, args) in decl.items():
        bret, bargs = _lib.SIGNATURES[name]
        if ret != bret or args != bargs:
            bad.append("%s: header (%s, %s), binding (%s, %s)" % (name, ret, args, bret, bargs))
    assert not bad, "\n".join(bad)


def test_every_declared_symbol_is_exported():
    """Run against a current build, every bound function is there (the lazy binding would
    otherwise raise Unsupported naming it when called)."""
    missing = [n for n in _lib.SIGNATURES if not _lib.LIB.has(n)]
    assert not missing, "this libgradsync (%s) lacks %s: rebuild" % (gradsync.library_path(),
                                                                      missing)


def _run_import(env_changes, code="import gradsync; print(gradsync.library_path())", cwd=None,
                path=None):
    env = dict(os.environ)
    for k, v in env_changes.items():
        if v is None:
            env.pop(k, None)
        else:
            env[k] = v
    if path is not None:
        env["PYTHONPATH"] = path
    return subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                          text=True, cwd=cwd, timeout=60)


def test_library_not_found_names_every_place(tmp_path):
    r = _run_import({"GRADSYNC_LIBRARY": str(tmp_path / "nope.so")})
    assert r.returncode != 0
    assert "LibraryNotFound" in r.stderr and str(tmp_path / "nope.so") in r.stderr
    assert "unset GRADSYNC_LIBRARY" in r.stderr
    # Without the variable, from a copy of the package with no library beside it.
    pkg = os.path.dirname(gradsync.__file__)
    shutil.copytree(pkg, tmp_path / "gradsync", ignore=shutil.ignore_patterns("libgradsync*",
                                                                             "__pycache__"))
    r = _run_import({"GRADSYNC_LIBRARY": None, "LD_LIBRARY_PATH": None}, path=str(tmp_path))
    if r.returncode == 0:
        pytest.skip("a libgradsync is installed on the loader path: %s" % r.stdout.strip())
    err = r.stderr
    assert "ImportError" in err or "LibraryNotFound" in err
    for where in (str(tmp_path / "gradsync" / "libgradsync.so*"), "find_library",
                  "libgradsync.so.0", "GRADSYNC_LIBRARY"):
        assert where in err, (where, err)


def test_library_next_to_the_package(tmp_path):
    pkg = os.path.dirname(gradsync.__file__)
    shutil.copytree(pkg, tmp_path / "gradsync", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(gradsync.library_path(), tmp_path / "gradsync" / "libgradsync.so.0")
    r = _run_import({"GRADSYNC_LIBRARY": None}, path=str(tmp_path))
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == str(tmp_path / "gradsync" / "libgradsync.so.0")


def test_missing_symbol_fails_at_call_not_import():
    """A library without the gradsync symbols (libc stands in for an old build): import
    works, the first call names the missing function."""
    code = ("import gradsync\n"
            "try:\n"
            "    gradsync.Communicator()\n"
            "except gradsync.Unsupported as e:\n"
            "    print(e.name, '|', e.message)\n")
    r = _run_import({"GRADSYNC_LIBRARY": "libc.so.6"}, code=code)
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("GS_ERR_UNSUPPORTED |")
    assert "has no gs_config_init_v; rebuild" in r.stdout


def test_version_is_the_library_version():
    """The package's version (gradsync/_version.py, its one Python-side copy) is the C
    library's (CMake's project(VERSION)): gs_version_string() and gs_version() agree with
    __version__ and HEADER_VERSION, and nothing else in the package spells it out."""
    lib_version = gradsync.library_version()
    assert gradsync.__version__ == lib_version, (
        "python/gradsync/_version.py says %s but %s reports %s: set __version__ there to "
        "CMakeLists.txt's project(VERSION)" % (gradsync.__version__, gradsync.library_path(),
                                                lib_version))
    assert T.HEADER_VERSION == _lib.LIB.gs_version()
    pkg = os.path.dirname(gradsync.__file__)
    root = os.path.dirname(pkg)
    copies = []
    for dirpath, _, files in os.walk(pkg):
        for f in files:
            path = os.path.join(dirpath, f)
            if f.endswith(".py") and f != "_version.py" and \
                    ('"%s"' % gradsync.__version__) in open(path).read():
                copies.append(path)
    pyproject = os.path.join(root, "pyproject.toml")
    if os.path.exists(pyproject):
        text = open(pyproject).read()
        # scikit-build-core's regex provider reads it from gradsync/_version.py.
        assert 'dynamic = ["version"]' in text and 'input = "gradsync/_version.py"' in text
        if re.search(r"^version\s*=\s*[\"']", text, flags=re.M):
            copies.append(pyproject)
    assert not copies, "the version is written outside gradsync/_version.py: %s" % copies
