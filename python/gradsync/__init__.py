# SPDX-License-Identifier: Apache-2.0
"""gradsync: collective communication for distributed deep learning (Python binding).

A ctypes binding over libgradsync.so: no compiled extension. The library is
found through GRADSYNC_LIBRARY (a path), next to this package, or on the
loader path (gradsync._lib says how). Buffers are bytearray, memoryview,
array.array and other buffer-protocol objects, numpy arrays and torch
tensors (contiguous). docs/python.md is the guide and the reference.

    import gradsync, numpy as np
    with gradsync.Communicator() as comm:          # rank and size from gsrun/torchrun
        grad = np.full(1000, comm.rank, dtype=np.float32)
        comm.allreduce(grad, op="avg")              # in place
"""
from __future__ import annotations

from ._lib import (LIB as _LIB, Aborted, AuthError, Error, InvalidArgument, InvalidUsage,
                   LibraryNotFound, Mismatch, NoMemory, PeerFailed, Revoked, Timeout,
                   Truncated, Unsupported, error_class)
from ._types import (ANY_SOURCE, UNSET, Algo, CodecKind, CollType, DType, Op, PSConsistency,
                     PSRule, Scope)
from ._request import Request, Status, group, test_all, wait_all, wait_any
from ._compress import Codec, ErrorFeedback
from ._comm import Communicator
from ._bucket import Bucketer
from ._ps import ParameterServer
from ._version import __version__  # noqa: F401 (re-exported)

__all__ = [
    "ANY_SOURCE", "Aborted", "Algo", "AuthError", "Bucketer", "Codec", "CodecKind", "CollType",
    "Communicator", "DType", "Error", "ErrorFeedback", "InvalidArgument", "InvalidUsage",
    "LibraryNotFound", "Mismatch", "NoMemory", "Op", "PSConsistency", "PSRule", "ParameterServer",
    "PeerFailed", "Request", "Revoked", "Scope", "Status", "Timeout", "Truncated", "UNSET",
    "Unsupported", "error_class", "group", "library_path", "library_version", "strerror", "test_all",
    "wait_all", "wait_any",
]


def library_version() -> str:
    """Version string of the loaded libgradsync, "major.minor.patch" (gs_version_string()).
    It equals __version__ when the package and the library come from the same source tree."""
    return _LIB.gs_version_string().decode()


def library_path() -> str:
    """The path or name libgradsync was loaded from."""
    return _LIB.path


def strerror(status: int) -> str:
    """One-line description of a gs_status_t value."""
    return _LIB.gs_strerror(int(status)).decode()
