# SPDX-License-Identifier: Apache-2.0
"""gradsync.Bucketer: a thin class over the gradient bucketer (gradsync/bucket.h,
gs_bucketer_*; src/fusion/ implements it: its fusion buffers are the buckets' staging
copies). The C header holds the full contract; this only holds on to the registered
tensors, which the C side points into, for as long as it may touch them.
"""
from __future__ import annotations

import operator

from ctypes import byref, c_size_t, c_void_p
from typing import TYPE_CHECKING, Any, Dict, List, Optional, Tuple, Union

from . import _types as T
from ._buffer import BufferLike, resolve
from ._comm import _int, algo_of, op_of
from ._compress import Codec, codec_of
from ._lib import LIB, Resource, check, query

if TYPE_CHECKING:
    from ._comm import AlgoLike, Communicator, OpLike


class Bucketer(Resource):
    """Gradient bucketing over comm (gs_bucketer_t), as DDP's reducer.

    Bucketer(comm, bucket_bytes=None, first_bucket_bytes=None, op="avg", algo=None,
             codec=None, error_feedback=None, rebuild=None). Register every
    gradient with add(tensor) -> id in forward order, on every rank alike; each
    step call ready(id) as each gradient becomes final (any thread), then wait()
    (collective): every tensor then holds the reduced gradient. The tensors are
    referenced here until close(): they must stay at their address.
    """

    _what = "bucketer"

    def __init__(self, comm: Communicator, bucket_bytes: Optional[int] = None,
                 first_bucket_bytes: Optional[int] = None, op: OpLike = "avg",
                 algo: AlgoLike = None, codec: Union[None, str, Codec] = None,
                 error_feedback: Optional[bool] = None, rebuild: Optional[bool] = None) -> None:
        o = self._opts = T.sized(T.BucketerOpts)
        o.bucket_bytes = T.UNSET if bucket_bytes is None else operator.index(bucket_bytes)
        o.first_bucket_bytes = (T.UNSET if first_bucket_bytes is None
                                else operator.index(first_bucket_bytes))
        o.op = op_of(op)
        o.algo = algo_of(algo)
        self._codec = codec_of(codec)
        o.codec = self._codec._ptr() if self._codec is not None else None
        o.error_feedback = T.UNSET if error_feedback is None else int(bool(error_feedback))
        o.rebuild = T.UNSET if rebuild is None else int(bool(rebuild))
        o.stream = None
        o.flags = 0
        h = c_void_p()
        check(LIB.gs_bucketer_create(comm._handle(), byref(o), byref(h)))
        self._h = h.value
        self._comm = comm
        self._tensors: List[Any] = []
        comm._children.add(self)

    def add(self, tensor: BufferLike) -> int:
        """Register a gradient buffer; returns its id (0, 1, ... in registration order)."""
        b = resolve(tensor, "Bucketer.add: tensor", writable=True)
        out = c_size_t()
        check(LIB.gs_bucketer_add(self._handle(), b.ptr, b.count, b.dtype, byref(out)))
        self._tensors.append(b.keep)
        return out.value

    def ready(self, id: int) -> None:
        """Mark tensor id's gradient final for this step (any thread; never blocks)."""
        check(LIB.gs_bucketer_ready(self._handle(), _int(id, "Bucketer.ready: id", 0,
                                                         (1 << 63) - 1)))

    def wait(self) -> None:
        """End the step: every tensor holds the reduced gradient. Collective, blocking."""
        check(LIB.gs_bucketer_wait(self._handle()))

    def stats(self) -> Dict[str, Any]:
        """gs_bucketer_stats_t as a dict."""
        return T.struct_to_dict(query(LIB.gs_bucketer_stats, T.BucketerStats, self._handle()))

    def bucket_info(self, index: int) -> Dict[str, Any]:
        """Bucket index of the current grouping (count, dtype, ntensors, inplace) as a dict."""
        d = T.struct_to_dict(query(LIB.gs_bucketer_bucket_info, T.BucketInfo, self._handle(),
                                   _int(index, "bucket_info: index", 0, (1 << 63) - 1)))
        d["dtype"] = T.DType(d["dtype"])
        return d

    def locate(self, id: int) -> Tuple[int, int]:
        """(bucket, offset in elements) of tensor id in the current grouping."""
        b, off = c_size_t(), c_size_t()
        check(LIB.gs_bucketer_locate(self._handle(), _int(id, "locate: id", 0, (1 << 63) - 1),
                                     byref(b), byref(off)))
        return b.value, off.value

    def close(self) -> None:
        """Wait for the all-reduces in flight and free the bucketer. Idempotent."""
        h, self._h = self._h, None
        if h is not None:
            try:
                check(LIB.gs_bucketer_destroy(h))
            finally:
                self._tensors = []
