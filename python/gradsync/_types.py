# SPDX-License-Identifier: Apache-2.0
"""Value types of the C API mirrored in ctypes: enums and option structs.

Every table here mirrors one in include/gradsync/*.h, field for field and
value for value; python/tests/test_binding.py compiles the headers and checks
the offsets, sizes and enum values against these. Structs are only ever
appended to in C, and each carries its own size first, so a library newer
than this file still reads these structs correctly (it reads the fields
that fit in ``size``). This file does not load the library.
"""
from __future__ import annotations

import ctypes
import enum
from typing import Any, Dict, Type, TypeVar
from ctypes import c_char_p, c_double, c_int, c_int64, c_size_t, c_uint, c_uint32, c_uint64
from ctypes import c_void_p

from ._version import __version__

#: "Not set by the caller" for numeric option fields (GS_UNSET, INT_MIN).
UNSET = -2147483647 - 1
#: Receive from any rank (GS_ANY_SOURCE).
ANY_SOURCE = -1


def _version_number(version: str) -> int:
    """GS_VERSION_NUMBER (major*10000 + minor*100 + patch) of "major.minor.patch"."""
    major, minor, patch = (int(p) for p in version.split(".")[:3])
    return major * 10000 + minor * 100 + patch


#: GS_VERSION_NUMBER of the headers these tables mirror, passed to gs_config_init_v (which
#: checks the major). Not a version of its own: these tables and the headers live in one
#: source tree and are released together, so it is the package's version (_version.py)
#: encoded as version.h encodes it; the structs' own compatibility is their size field.
HEADER_VERSION = _version_number(__version__)
#: GS_UNIQUE_ID_BYTES: the size of a gs_unique_id_t (gs_comm_get_unique_id, gs_comm_grow).
UNIQUE_ID_BYTES = 128


def _enum(name: str, doc: str, members: str) -> Any:
    """An IntEnum of a C enum whose values run 0, 1, 2, ... in the order of @members."""
    cls = enum.IntEnum(name, [(m, i) for i, m in enumerate(members.split())],  # type: ignore[misc]
                       module=__name__)
    cls.__doc__ = doc
    return cls


DType = _enum("DType", "gs_dtype_t (GS_DTYPE_MAP in types.h).",
              "FLOAT32 FLOAT64 FLOAT16 BFLOAT16 INT8 UINT8 INT32 INT64")
_DTYPE_SIZE = dict(zip(DType, (4, 8, 2, 2, 1, 1, 4, 8)))
DType.itemsize = property(lambda self: _DTYPE_SIZE[self], doc="Bytes per element.")

#: Names accepted wherever a dtype is given as a string.
DTYPE_NAMES = {
    "float32": DType.FLOAT32, "f32": DType.FLOAT32, "float": DType.FLOAT32,
    "float64": DType.FLOAT64, "f64": DType.FLOAT64, "double": DType.FLOAT64,
    "float16": DType.FLOAT16, "f16": DType.FLOAT16, "half": DType.FLOAT16,
    "bfloat16": DType.BFLOAT16, "bf16": DType.BFLOAT16,
    "int8": DType.INT8, "i8": DType.INT8,
    "uint8": DType.UINT8, "u8": DType.UINT8,
    "int32": DType.INT32, "i32": DType.INT32,
    "int64": DType.INT64, "i64": DType.INT64,
}

Op = _enum("Op", "gs_op_t (GS_OP_MAP in types.h). AVG needs a float dtype; the bitwise ops "
           "integer ones.", "SUM PROD MIN MAX AVG BAND BOR BXOR")
Algo = _enum("Algo", "gs_algo_t (GS_ALGO_MAP in types.h).",
             "AUTO RING CHAIN DIRECT TREE RD RABENSEIFNER BINOMIAL NATIVE HIER SHM")
CodecKind = _enum("CodecKind", "gs_codec_kind_t (GS_CODEC_MAP in compress.h).",
                  "NONE FP16 BF16 INT8 QSGD SIGN TOPK RANDK INT4 FP8_E4M3 FP8_E5M2")
CodecZstd = _enum("CodecZstd", "gs_codec_zstd_t (compress.h).", "OFF ON AUTO")
PSConsistency = _enum("PSConsistency", "gs_ps_consistency_t (ps.h).", "BSP SSP ASP")
PSRule = _enum("PSRule", "gs_ps_rule_t (ps.h).", "SGD ADAM CALLBACK")
CollType = _enum("CollType", "gs_coll_type_t (gradsync.h): the indexes of "
                 "Communicator.stats()[\"coll\"].",
                 "ALLREDUCE BROADCAST REDUCE ALLGATHER REDUCE_SCATTER ALLTOALL BARRIER SEND RECV "
                 "GATHER SCATTER ALLGATHERV ALLTOALLV REDUCE_SCATTERV")
Scope = _enum("Scope", "gs_status_scope_t (status.h).",
              "NONE ARGUMENT RESOURCE PEER COMM INTERNAL")


#: gs_status_t (GS_STATUS_MAP in status.h): name -> value.
STATUS = {
    "GS_OK": 0,
    "GS_INPROGRESS": 1,
    "GS_ERR_INVALID_ARG": -1,
    "GS_ERR_INVALID_USAGE": -2,
    "GS_ERR_UNSUPPORTED": -3,
    "GS_ERR_TRUNCATED": -4,
    "GS_ERR_NO_MEMORY": -20,
    "GS_ERR_NO_RESOURCE": -21,
    "GS_ERR_SYSTEM": -22,
    "GS_ERR_CUDA": -23,
    "GS_ERR_PEER_FAILED": -40,
    "GS_ERR_TIMEOUT": -41,
    "GS_ERR_PROTOCOL": -42,
    "GS_ERR_VERSION_MISMATCH": -43,
    "GS_ERR_MISMATCH": -44,
    "GS_ERR_AUTH": -45,
    "GS_ERR_ABORTED": -60,
    "GS_ERR_COMM_FAILED": -61,
    "GS_ERR_REVOKED": -62,
    "GS_ERR_INTERNAL": -100,
}
GS_OK = STATUS["GS_OK"]
GS_INPROGRESS = STATUS["GS_INPROGRESS"]
GS_ERR_INVALID_ARG = STATUS["GS_ERR_INVALID_ARG"]
GS_ERR_INVALID_USAGE = STATUS["GS_ERR_INVALID_USAGE"]
GS_ERR_UNSUPPORTED = STATUS["GS_ERR_UNSUPPORTED"]
GS_ERR_MISMATCH = STATUS["GS_ERR_MISMATCH"]


# --------------------------------------------------------------------------
# Structs (field order and types exactly as in the headers)
# --------------------------------------------------------------------------

class Config(ctypes.Structure):
    """gs_config_t (gradsync.h)."""
    _fields_ = [
        ("size", c_size_t),
        ("version", c_uint),
        ("rank", c_int),
        ("world_size", c_int),
        ("local_rank", c_int),
        ("master_addr", c_char_p),
        ("master_port", c_int),
        ("timeout_ms", c_int),
        ("transport", c_char_p),
        ("tcp_nsocks", c_int),
        ("socket_ifname", c_char_p),
        ("socket_family", c_char_p),
        ("slice_bytes", c_int),
        ("algo", c_char_p),
        ("job_id", c_char_p),
        # Process-wide knobs, appended (scope "process" in docs/env.md; GS_ENV_PROC in
        # src/core/env_table.h).
        ("shm", c_int),
        ("tcp_spin_us", c_int),
        ("tune", c_char_p),
        ("debug", c_char_p),
        ("debug_subsys", c_char_p),
        ("debug_file", c_char_p),
        ("stats_file", c_char_p),
        # Connection authentication (docs/security.md), appended.
        ("auth_token", c_char_p),
        ("auth_token_file", c_char_p),
        # Failure detection and abortable init (docs/design.md), appended. abort_flag is the
        # caller's int, not a keyword of Communicator().
        ("heartbeat_ms", c_int),
        ("abort_flag", ctypes.POINTER(c_int)),
        # TLS on the TCP transport (docs/security.md), appended.
        ("tls", c_int),
        ("tls_cert", c_char_p),
        ("tls_key", c_char_p),
        ("tls_ca", c_char_p),
        # Bootstrap through a key-value store (docs/gsrun.md), appended.
        ("store", c_char_p),
        ("store_epoch", c_int),
    ]


class Counters(ctypes.Structure):
    """gs_counters_t (gradsync.h)."""
    _fields_ = [("size", c_size_t)] + [(n, c_uint64) for n in (
        "bytes_sent", "bytes_received", "msgs_sent", "msgs_received", "ops_completed",
        "ops_failed", "busy_ns")]


STATS_COLL_MAX = 16


class CollStats(ctypes.Structure):
    """gs_coll_stats_t (gradsync.h)."""
    _fields_ = [("ops", c_uint64), ("bytes", c_uint64), ("busy_ns", c_uint64),
                ("last_algo", c_int)]


class CommStats(ctypes.Structure):
    """gs_comm_stats_t (gradsync.h)."""
    _fields_ = [("size", c_size_t), ("rank", c_int), ("nranks", c_int)] + [
        (n, c_uint64) for n in ("comm_id", "bytes_sent", "bytes_received", "msgs_sent",
                                "msgs_received", "ops_completed", "ops_failed", "busy_ns",
                                "wait_ns")] + [("coll", CollStats * STATS_COLL_MAX),
                                           ("traffic_bytes", c_uint64 * STATS_COLL_MAX)]


RAILS_MAX = 4


class RailStats(ctypes.Structure):
    """gs_rail_stats_t (gradsync.h): one TCP rail to a peer."""
    _fields_ = [("bytes_sent", c_uint64), ("bytes_resent", c_uint64), ("rate_bps", c_uint64),
                ("share_ppm", ctypes.c_uint32), ("up", ctypes.c_uint32),
                ("ifname", ctypes.c_char * 16)]


class PeerStats(ctypes.Structure):
    """gs_peer_stats_t (gradsync.h). nrails and rails (appended): multi-rail TCP."""
    _fields_ = [("size", c_size_t), ("peer", c_int)] + [(n, c_uint64) for n in (
        "bytes_sent", "bytes_received", "msgs_sent", "msgs_received", "send_wait_ns",
        "recv_wait_ns")] + [("nrails", c_int), ("rails", RailStats * RAILS_MAX)]


class CollOpts(ctypes.Structure):
    """gs_coll_opts_t (gradsync.h). codec and ef (appended): compressed reduce-scatter(v) and
    all-gather(v)."""
    _fields_ = [("size", c_size_t), ("algo", c_int), ("stream", c_void_p), ("flags", c_uint),
                ("codec", c_void_p), ("ef", c_void_p)]


class AllreduceOpts(ctypes.Structure):
    """gs_allreduce_opts_t (gradsync.h)."""
    _fields_ = [("size", c_size_t), ("algo", c_int), ("codec", c_void_p), ("ef", c_void_p),
                ("stream", c_void_p), ("flags", c_uint)]


class P2PStatus(ctypes.Structure):
    """gs_p2p_status_t (gradsync.h)."""
    _fields_ = [("source", c_int), ("tag", c_uint32), ("count", c_size_t)]


class CodecConfig(ctypes.Structure):
    """gs_codec_config_t (compress.h)."""
    _fields_ = [("size", c_size_t), ("kind", c_int), ("block_size", c_int), ("ratio", c_double),
                ("levels", c_int), ("seed", c_uint64), ("zstd", c_int), ("zstd_level", c_int)]


class BucketerOpts(ctypes.Structure):
    """gs_bucketer_opts_t (bucket.h)."""
    _fields_ = [("size", c_size_t), ("bucket_bytes", c_int64), ("first_bucket_bytes", c_int64),
                ("op", c_int), ("algo", c_int), ("codec", c_void_p), ("error_feedback", c_int),
                ("rebuild", c_int), ("stream", c_void_p), ("flags", c_uint)]


class BucketerStats(ctypes.Structure):
    """gs_bucketer_stats_t (bucket.h)."""
    _fields_ = [("size", c_size_t)] + [(n, c_uint64) for n in (
        "steps", "failed_steps", "tensors", "buckets", "inplace_buckets", "bytes",
        "fusion_bytes", "last_exposed_ns", "total_exposed_ns", "last_step_ns")] + [
        ("rebuilt", c_int), ("device", c_int)]


class BucketInfo(ctypes.Structure):
    """gs_bucket_info_t (bucket.h)."""
    _fields_ = [("size", c_size_t), ("count", c_size_t), ("dtype", c_int),
                ("ntensors", c_size_t), ("inplace", c_int)]


class PSOpts(ctypes.Structure):
    """gs_ps_opts_t (ps.h)."""
    _fields_ = [("size", c_size_t), ("consistency", c_int), ("staleness", c_int),
                ("servers", c_int), ("rule", c_int), ("lr", c_double), ("momentum", c_double),
                ("weight_decay", c_double), ("beta1", c_double), ("beta2", c_double),
                ("eps", c_double), ("update_fn", c_void_p), ("user", c_void_p),
                ("codec", c_void_p), ("split_bytes", c_int64), ("timeout_ms", c_int)]


class PSInfo(ctypes.Structure):
    """gs_ps_info_t (ps.h)."""
    _fields_ = [("size", c_size_t), ("rank", c_int), ("nranks", c_int), ("worker", c_int),
                ("nworkers", c_int), ("server", c_int), ("nservers", c_int), ("clock", c_int64),
                ("nkeys", c_size_t), ("shard_bytes", c_size_t), ("error", c_int)]


_S = TypeVar("_S", bound=ctypes.Structure)


def sized(struct: Type[_S]) -> _S:
    """A zeroed @struct (a class) with its size field set, as every versioned struct starts."""
    s = struct()
    s.size = ctypes.sizeof(s)
    return s


def struct_to_dict(s: ctypes.Structure) -> Dict[str, Any]:
    """The fields of a ctypes struct as a dict (nested arrays of structs become lists)."""
    out = {}
    for field in s._fields_:
        name = field[0]
        if name == "size":
            continue
        v = getattr(s, name)
        if isinstance(v, ctypes.Array):
            v = [struct_to_dict(e) if isinstance(e, ctypes.Structure) else e for e in v]
        elif isinstance(v, bytes):
            v = v.decode("utf-8", "replace")  # a char array (an interface name)
        out[name] = v
    return out
