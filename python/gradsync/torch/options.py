# SPDX-License-Identifier: Apache-2.0
"""gradsync.torch.Options: per-group compression of the torch 2.x "gradsync" backend.

    opts = gradsync.torch.Options(allreduce="int8", reduce_scatter="int4",
                                  allgather=gradsync.Codec("fp8_e4m3"),
                                  error_feedback="tensor")
    dist.init_process_group("gradsync", pg_options=opts)        # or
    group = dist.new_group(ranks, backend="gradsync", pg_options=opts)

torch hands pg_options to the backend's creator (gradsync.torch._c10d, extended API);
the C++ backend (csrc/backend.cpp) then runs the group's all_reduce (and its coalesced
form), reduce_scatter_tensor / reduce_scatter (and coalesced) and all_gather_into_tensor /
all_gather (and coalesced) through gradsync's compressed calls with the named codec, for
float tensors (float32, float64, float16, bfloat16) with SUM, AVG or PREMUL_SUM. Anything
a codec cannot serve (an integer, bool or complex tensor, MIN/MAX/PRODUCT/bitwise ops, a
device path without compression) runs uncompressed, logged once per reason at INFO.
docs/python.md, "The torch 2.x backend", says what falls back and how error feedback is
keyed. Needs no torch to construct (the options are plain values).
"""
from __future__ import annotations

from typing import Any, Dict, Optional, Union

import gradsync
from gradsync import Codec
from gradsync._compress import codec_of
from gradsync._lib import invalid

CodecLike = Union[None, str, Codec]

#: error_feedback values: "off" (none), "tensor" (a residual per send buffer, kept by
#: the backend across calls, keyed by (storage, offset, elements, dtype)).
ERROR_FEEDBACK = ("off", "tensor")
#: How many residuals a backend keeps at most by default (least recently used go first).
EF_CAPACITY = 4096


def _checked(codec: CodecLike, what: str) -> Optional[Codec]:
    """@codec as a gradsync.Codec (None and "none" give None), after the library has
    accepted it for @what on a world of one rank: a bad kind, a bad field or a codec that
    cannot serve the collective (a sparsifier on all-gather) is refused here, with the
    library's sentence, before any group exists."""
    c = codec_of(codec)
    if c is None or c.kind == "none":
        return None
    comm = gradsync.Communicator(rank=0, size=1, launcher=False)
    try:
        a, b = bytearray(4), bytearray(4)
        x, y = memoryview(a).cast("f"), memoryview(b).cast("f")
        if what == "allreduce":
            comm.allreduce(x, y, op="sum", codec=c)
        elif what == "reduce_scatter":
            comm.reduce_scatter(x, y, op="sum", codec=c)
        else:
            comm.allgather(x, y, codec=c)
    except gradsync.Error as exc:
        raise invalid("gradsync.torch.Options: %s=%r: %s" % (what, c, exc)) from None
    finally:
        comm.close()
    return c


class Options:
    """Compression options of one "gradsync" group (pass as pg_options).

    allreduce, reduce_scatter, allgather: the codec of that collective: None (default,
        uncompressed), a gradsync.Codec, or a codec kind's name (gradsync.CodecKind:
        "fp16", "bf16", "int8", "int4", "fp8_e4m3", ... as this libgradsync has them).
        The sparsifiers (topk, randk) cannot serve all-gather and are refused here.
    error_feedback: "off" (default) or "tensor": all-reduce and reduce-scatter keep a
        residual per send buffer (what the codec lost is added to the next call on the
        same buffer), created on first use and freed with the group. True and False are
        taken for "tensor" and "off".
    ef_capacity: the most residuals the group keeps (default 4096); past it the least
        recently used is dropped (its tensor starts over from no residual).
    """

    def __init__(self, allreduce: CodecLike = None, reduce_scatter: CodecLike = None,
                 allgather: CodecLike = None, error_feedback: Union[str, bool] = "off",
                 ef_capacity: int = EF_CAPACITY) -> None:
        self.allreduce = _checked(allreduce, "allreduce")
        self.reduce_scatter = _checked(reduce_scatter, "reduce_scatter")
        self.allgather = _checked(allgather, "allgather")
        ef = {True: "tensor", False: "off"}.get(error_feedback, error_feedback)  # type: ignore
        if ef not in ERROR_FEEDBACK:
            raise invalid("gradsync.torch.Options: error_feedback %r is not one of %s"
                          % (error_feedback, ", ".join(repr(e) for e in ERROR_FEEDBACK)))
        self.error_feedback = ef
        if isinstance(ef_capacity, bool) or not isinstance(ef_capacity, int) or ef_capacity < 1:
            raise invalid("gradsync.torch.Options: ef_capacity must be a positive integer, "
                          "not %r" % (ef_capacity,))
        self.ef_capacity = ef_capacity

    def _native(self) -> Dict[str, Any]:
        """The arguments of the extension's set_options: each codec's gs_codec_config_t
        address (0: none), read (copied) during that call."""
        def addr(c: Optional[Codec]) -> int:
            return c._ptr() if c is not None else 0
        return {"allreduce": addr(self.allreduce), "reduce_scatter": addr(self.reduce_scatter),
                "allgather": addr(self.allgather),
                "error_feedback": self.error_feedback == "tensor",
                "ef_capacity": self.ef_capacity}

    def __repr__(self) -> str:
        parts = ["%s=%r" % (k, getattr(self, k)) for k in ("allreduce", "reduce_scatter",
                                                           "allgather")
                 if getattr(self, k) is not None]
        parts.append("error_feedback=%r" % self.error_feedback)
        if self.ef_capacity != EF_CAPACITY:
            parts.append("ef_capacity=%d" % self.ef_capacity)
        return "gradsync.torch.Options(%s)" % ", ".join(parts)


__all__ = ["Options", "ERROR_FEEDBACK", "EF_CAPACITY"]
