# SPDX-License-Identifier: Apache-2.0
"""Loading libgradsync.so, the table of C signatures, and the exceptions.

The library is found in this order: the GRADSYNC_LIBRARY environment
variable (a path; when it is set nothing else is tried), a libgradsync.so*
next to this package, then the dynamic loader's search path. Every C
function is bound lazily, on first use, from SIGNATURES below: a library
that lacks a symbol imports fine and fails only when a method needs it,
with gradsync.Unsupported "this libgradsync has no gs_xxx; rebuild".

ctypes.CDLL (not PyDLL) is deliberate: it releases the GIL for the length
of every C call, so a collective blocked in one Python thread never stops
the others. Errors are read with gs_last_error() right after the failing
call, on the same thread (the C text is thread-local).
"""
from __future__ import annotations

import ctypes
import ctypes.util
import glob
import os
from typing import Any, Callable, Dict, List, Optional, Tuple, Type, TypeVar

from ctypes import POINTER, c_char_p, c_int, c_size_t, c_uint, c_uint32, c_uint64, c_void_p

from . import _types as T

_S = TypeVar("_S", bound=ctypes.Structure)
_R = TypeVar("_R", bound="Resource")

# --------------------------------------------------------------------------
# Exceptions
# --------------------------------------------------------------------------


class Error(Exception):
    """A gradsync call failed.

    Attributes: status (the gs_status_t value, an int), name (its enum name,
    "GS_ERR_TIMEOUT") and message (gs_last_error()'s sentence, naming the
    argument, peer or rank at fault).
    """

    def __init__(self, status: int, name: str, message: str) -> None:
        self.status = int(status)
        self.name = name
        self.message = message
        super().__init__("%s: %s" % (name, message) if message else name)

    def __reduce__(self) -> Tuple[Any, Tuple[int, str, str]]:
        # Pickles as itself (an error raised in a Ray actor or a multiprocessing child reaches
        # the caller as the same class): the default passes self.args, one string.
        return type(self), (self.status, self.name, self.message)


class InvalidArgument(Error, ValueError):
    """GS_ERR_INVALID_ARG: the call was wrong; nothing was changed."""


class InvalidUsage(Error, RuntimeError):
    """GS_ERR_INVALID_USAGE: a call out of order (e.g. a group end without a start)."""


class Unsupported(Error, NotImplementedError):
    """GS_ERR_UNSUPPORTED, also raised when the loaded library lacks a C function."""


class Truncated(Error):
    """GS_ERR_TRUNCATED: the message was larger than the receive buffer."""


class NoMemory(Error, MemoryError):
    """GS_ERR_NO_MEMORY."""


class PeerFailed(Error, ConnectionError):
    """GS_ERR_PEER_FAILED: a peer died or its link broke; the communicator is failed."""


class Timeout(Error, TimeoutError):
    """GS_ERR_TIMEOUT: a deadline passed (GS_TIMEOUT_MS); the message names the rank."""


class Mismatch(Error):
    """GS_ERR_MISMATCH: ranks disagree (different collective, count or world size)."""


class AuthError(Error, PermissionError):
    """GS_ERR_AUTH: a peer's authentication token differs or is missing."""


class Aborted(Error):
    """GS_ERR_ABORTED: the communicator was aborted."""


class Revoked(Error):
    """GS_ERR_REVOKED: a rank revoked the communicator (gs_comm_revoke); shrink, grow or close it."""


class LibraryNotFound(Error, ImportError):  # type: ignore[misc]  # name: str, not Optional
    """libgradsync.so could not be loaded; the message names every place tried."""


_STATUS_CLASS = {T.STATUS[name]: cls for name, cls in (
    ("GS_ERR_INVALID_ARG", InvalidArgument), ("GS_ERR_INVALID_USAGE", InvalidUsage),
    ("GS_ERR_UNSUPPORTED", Unsupported), ("GS_ERR_TRUNCATED", Truncated),
    ("GS_ERR_NO_MEMORY", NoMemory), ("GS_ERR_PEER_FAILED", PeerFailed),
    ("GS_ERR_TIMEOUT", Timeout), ("GS_ERR_MISMATCH", Mismatch), ("GS_ERR_AUTH", AuthError),
    ("GS_ERR_ABORTED", Aborted), ("GS_ERR_REVOKED", Revoked))}
_STATUS_NAME = {v: k for k, v in T.STATUS.items()}


def error_class(status: int) -> Type[Error]:
    """The Error subclass raised for a gs_status_t value."""
    return _STATUS_CLASS.get(int(status), Error)


def make_error(status: int, message: str) -> Error:
    """An Error for @status with @message (used for errors found on the Python side too)."""
    status = int(status)
    try:
        name = LIB.gs_status_name(status).decode()
    except Exception:  # the library has no such symbol or is not loaded
        name = _STATUS_NAME.get(status, "status %d" % status)
    return error_class(status)(status, name, message)


def invalid(message: str) -> Error:
    """InvalidArgument raised by the Python side, as the C library would."""
    return make_error(T.GS_ERR_INVALID_ARG, message)


def last_error(status: int) -> Error:
    """The Error of a failed C call, with gs_last_error()'s sentence. Call it right after
    the call, on the same thread (the text is thread-local)."""
    raw = LIB.gs_last_error()
    return make_error(status, raw.decode(errors="replace") if raw else "")


def check(status: int) -> int:
    """Raise the Error for a C return value; return it when it is GS_OK or GS_INPROGRESS."""
    if status < 0:
        raise last_error(status)
    return status


def query(fn: Callable[..., int], struct: Type[_S], *args: Any) -> _S:
    """A new @struct (its size field set) filled by ``fn(*args, &struct)``."""
    s = T.sized(struct)
    check(fn(*args, ctypes.byref(s)))
    return s


class Resource:
    """Base of the objects that own a C handle (self._h, None once closed): _handle(),
    with-statement support, and a finaliser that closes. Subclasses define close()."""

    _h: Optional[int] = None
    _what = "object"

    def close(self) -> None:
        """Free the C object (subclasses do). Idempotent."""
        raise NotImplementedError

    def _handle(self) -> int:
        h = self._h
        if h is None:
            raise make_error(T.GS_ERR_INVALID_USAGE, "the %s is closed" % self._what)
        return h

    def __enter__(self: _R) -> _R:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:
            pass


# --------------------------------------------------------------------------
# Signatures: every function of gradsync.h, compress.h, bucket.h and ps.h.
# python/tests/test_binding.py (test_signatures) checks this table against the headers.
# --------------------------------------------------------------------------

_P = c_void_p          # any pointer to data, and every handle
_Z = c_size_t
_I = c_int             # int, gs_dtype_t, gs_op_t, gs_status_t and the other enums
_PP = POINTER(c_void_p)  # handle out-parameters (gs_comm_t *, gs_request_t *, ...)
_ZP = POINTER(c_size_t)
_IP = POINTER(c_int)
_U32 = c_uint32
_CO = POINTER(T.CollOpts)

SIGNATURES: Dict[str, Tuple[Any, List[Any]]] = {
    # version and errors
    "gs_version": (c_uint, []),
    "gs_version_string": (c_char_p, []),
    "gs_strerror": (c_char_p, [_I]),
    "gs_status_name": (c_char_p, [_I]),
    "gs_status_scope": (_I, [_I]),
    "gs_last_error": (c_char_p, []),
    # which algorithms implement which collective (gs-bench --help's lists)
    "gs_algo_implements": (_I, [_I, _I]),
    # configuration and communicators
    "gs_config_init_v": (_I, [POINTER(T.Config), c_uint, _Z]),
    "gs_comm_init": (_I, [_PP, POINTER(T.Config)]),
    "gs_comm_init_env": (_I, [_PP, POINTER(T.Config)]),
    "gs_comm_destroy": (_I, [_P]),
    "gs_comm_abort": (_I, [_P]),
    "gs_comm_rank": (_I, [_P, _IP]),
    "gs_comm_size": (_I, [_P, _IP]),
    "gs_comm_split": (_I, [_P, _I, _I, _PP]),
    "gs_comm_dup": (_I, [_P, _PP]),
    "gs_comm_create_group": (_I, [_P, _I, _IP, _U32, _PP]),
    "gs_comm_get_async_error": (_I, [_P, _IP]),
    "gs_comm_counters": (_I, [_P, POINTER(T.Counters)]),
    "gs_comm_stats": (_I, [_P, POINTER(T.CommStats)]),
    "gs_comm_peer_stats": (_I, [_P, _I, POINTER(T.PeerStats)]),
    "gs_comm_dump": (_I, [_P, _P]),  # FILE *stream
    "gs_comm_shrink": (_I, [_P, _PP]),
    "gs_comm_revoke": (_I, [_P]),
    "gs_comm_get_unique_id": (_I, [_P, _P]),  # gs_unique_id_t * (GS_UNIQUE_ID_BYTES bytes)
    "gs_comm_grow": (_I, [_P, _I, _P, POINTER(T.Config), _PP]),
    "gs_barrier": (_I, [_P]),
    "gs_ibarrier": (_I, [_P, _PP]),
    "gs_recv_status": (_I, [_P, _P, _Z, _I, _I, _U32, POINTER(T.P2PStatus)]),
    "gs_irecv_status": (_I, [_P, _P, _Z, _I, _I, _U32, POINTER(T.P2PStatus), _PP]),
    "gs_probe": (_I, [_P, _I, _U32, _I, POINTER(T.P2PStatus)]),
    "gs_iprobe": (_I, [_P, _I, _U32, _I, _IP, POINTER(T.P2PStatus)]),
    "gs_group_start": (_I, []),
    "gs_group_end": (_I, []),
    "gs_wait": (_I, [_PP]),
    "gs_test": (_I, [_PP]),
    "gs_waitall": (_I, [_Z, _PP]),
    "gs_waitany": (_I, [_Z, _PP, _IP]),
    "gs_testall": (_I, [_Z, _PP]),
    # compress.h
    "gs_ef_create": (_I, [_Z, _I, _PP]),
    "gs_ef_reset": (_I, [_P]),
    "gs_ef_destroy": (_I, [_P]),
    "gs_codec_encoded_size": (_I, [POINTER(T.CodecConfig), _Z, _I, _ZP]),
    "gs_codec_scratch_size": (_I, [POINTER(T.CodecConfig), _Z, _I, _ZP]),
    "gs_codec_encode": (_I, [POINTER(T.CodecConfig), _P, _Z, _I, _P, _P, _Z, _P, _Z, _ZP]),
    "gs_codec_decode": (_I, [POINTER(T.CodecConfig), _P, _Z, _Z, _I, _P, _Z, _P]),
    "gs_codec_decode_accumulate": (_I, [POINTER(T.CodecConfig), _P, _Z, _Z, _I, _P, _Z, _P]),
    # bucket.h
    "gs_bucketer_create": (_I, [_P, POINTER(T.BucketerOpts), _PP]),
    "gs_bucketer_add": (_I, [_P, _P, _Z, _I, _ZP]),
    "gs_bucketer_destroy": (_I, [_P]),
    "gs_bucketer_ready": (_I, [_P, _Z]),
    "gs_bucketer_wait": (_I, [_P]),
    "gs_bucketer_stats": (_I, [_P, POINTER(T.BucketerStats)]),
    "gs_bucketer_bucket_info": (_I, [_P, _Z, POINTER(T.BucketInfo)]),
    "gs_bucketer_locate": (_I, [_P, _Z, _ZP, _ZP]),
    # ps.h
    "gs_ps_create": (_I, [_P, POINTER(T.PSOpts), _PP]),
    "gs_ps_register": (_I, [_P, c_uint64, _Z, _I, _P]),
    "gs_ps_destroy": (_I, [_P]),
    "gs_ps_push": (_I, [_P, c_uint64, _P, _Z, _I, _PP]),
    "gs_ps_pull": (_I, [_P, c_uint64, _P, _Z, _I, _PP]),
    "gs_ps_clock": (_I, [_P]),
    "gs_ps_wait": (_I, [_PP]),
    "gs_ps_test": (_I, [_PP]),
    "gs_ps_waitall": (_I, [_Z, _PP]),
    "gs_ps_info": (_I, [_P, POINTER(T.PSInfo)]),
}


def _forms(name: str, args: List[Any], opts: Any = _CO, nonblocking_ex: bool = True) -> None:
    """The calls of one operation: gs_NAME(args), gs_iNAME(args, &req), gs_NAME_ex(args,
    opts) and, unless @nonblocking_ex is false, gs_iNAME_ex(args, opts, &req)."""
    SIGNATURES["gs_" + name] = (_I, args)
    SIGNATURES["gs_i" + name] = (_I, args + [_PP])
    SIGNATURES["gs_%s_ex" % name] = (_I, args + [opts])
    if nonblocking_ex:
        SIGNATURES["gs_i%s_ex" % name] = (_I, args + [opts, _PP])


_forms("allreduce", [_P, _P, _P, _Z, _I, _I], POINTER(T.AllreduceOpts))
_forms("broadcast", [_P, _P, _Z, _I, _I])
_forms("reduce", [_P, _P, _P, _Z, _I, _I, _I])
_forms("allgather", [_P, _P, _P, _Z, _I])
_forms("reduce_scatter", [_P, _P, _P, _Z, _I, _I])
_forms("alltoall", [_P, _P, _P, _Z, _I])
_forms("send", [_P, _P, _Z, _I, _I, _U32])
_forms("recv", [_P, _P, _Z, _I, _I, _U32])
_forms("gather", [_P, _P, _P, _Z, _I, _I])
_forms("scatter", [_P, _P, _P, _Z, _I, _I])
_forms("allgatherv", [_P, _P, _Z, _P, _Z, _ZP, _ZP, _I])
_forms("alltoallv", [_P, _P, _Z, _ZP, _ZP, _P, _Z, _ZP, _ZP, _I])
_forms("reduce_scatterv", [_P, _P, _P, _ZP, _I, _I])


# --------------------------------------------------------------------------
# Loading
# --------------------------------------------------------------------------

def _candidates() -> Tuple[List[Tuple[str, Optional[str]]], bool]:
    """(description, path-or-name) pairs in search order."""
    env = os.environ.get("GRADSYNC_LIBRARY")
    if env:
        return [("GRADSYNC_LIBRARY=%s" % env, env)], True
    here = os.path.dirname(os.path.abspath(__file__))
    out: List[Tuple[str, Optional[str]]] = []
    local = sorted(glob.glob(os.path.join(here, "libgradsync.so*")), key=len)
    if local:
        out += [(p, p) for p in local]
    else:
        out.append((os.path.join(here, "libgradsync.so*") + " (none there)", None))
    found = ctypes.util.find_library("gradsync")
    if found:
        out.append(("ctypes.util.find_library('gradsync') = %s" % found, found))
    else:
        out.append(("ctypes.util.find_library('gradsync') (found nothing)", None))
    for name in ("libgradsync.so.0", "libgradsync.so"):
        out.append(("%s on the loader path (LD_LIBRARY_PATH, ld.so.cache)" % name, name))
    return out, False


def _load() -> Tuple[ctypes.CDLL, str]:
    tried = []
    cands, from_env = _candidates()
    for desc, path in cands:
        if path is None:
            tried.append(desc)
            continue
        try:
            return ctypes.CDLL(path), path
        except OSError as e:
            tried.append("%s: %s" % (desc, e))
    hint = ("unset GRADSYNC_LIBRARY to search next to the package and on the loader path"
            if from_env else "pip install ./python (from the gradsync source tree) builds "
            "one into the package; or set GRADSYNC_LIBRARY to the path of libgradsync.so "
            "(build/libgradsync.so after a CMake build)")
    raise LibraryNotFound(-22, "GS_ERR_SYSTEM", "cannot load libgradsync; tried: "
                          + "; ".join(tried) + ". " + hint)


class _Lib:
    """The loaded library; attributes are its C functions, bound on first use."""

    def __init__(self) -> None:
        self._dll, self.path = _load()

    def has(self, name: str) -> bool:
        try:
            getattr(self._dll, name)
            return True
        except AttributeError:
            return False

    def __getattr__(self, name: str) -> Any:
        if not name.startswith("gs_"):
            raise AttributeError(name)
        sig = SIGNATURES.get(name)
        if sig is None:
            raise AttributeError("gradsync binds no C function %s" % name)
        try:
            fn = getattr(self._dll, name)
        except AttributeError:
            msg = "this libgradsync (%s) has no %s; rebuild" % (self.path, name)
            raise Unsupported(T.GS_ERR_UNSUPPORTED, "GS_ERR_UNSUPPORTED", msg) from None
        fn.restype, fn.argtypes = sig
        self.__dict__[name] = fn
        return fn


LIB = _Lib()
