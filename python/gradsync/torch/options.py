# SPDX-License-Identifier: Apache-2.0
"""gradsync.torch.Options: per-group compression of the torch 2.x "gradsync" backend.

    opts = gradsync.torch.Options(allreduce="int8", reduce_scatter="int4",
                                  allgather=gradsync.Codec("fp8_e4m3"),
                                  error_feedback="order")
    dist.init_process_group("gradsync", pg_options=opts)        # or
    group = dist.new_group(ranks, backend="gradsync", pg_options=opts)
    ...; optimizer.step(); gradsync.torch.next_step(group)    # "order": once per step

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
#: the backend across calls, keyed by (storage, offset, elements, dtype)), "order" (a
#: residual per call's place in the step: the k-th compressed reduce-scatter (all-reduce)
#: since gradsync.torch.next_step(group), for FSDP2, whose buffers are fresh every step).
ERROR_FEEDBACK = ("off", "tensor", "order")
#: How many residuals a backend keeps at most by default (least recently used go first);
#: with "order", also the most compressed calls of one collective between next_steps.
EF_CAPACITY = 4096
#: How many bytes of residuals a backend keeps at most by default (2 GiB: the f32
#: residuals of a reduce-scatter input of 512M elements, a 0.5B-parameter model's
#: gradient under FSDP2 with "order"; beyond that set it, or the LRU starts dropping).
EF_CAPACITY_BYTES = 2 << 30


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
    error_feedback: "off" (default), "tensor" or "order": all-reduce and reduce-scatter
        keep a residual (what the codec lost is added to the next call that has the same
        key), created on first use and freed with the group. "tensor" keys it by the send
        buffer (storage, offset, elements, dtype): for buffers that persist (DDP's
        buckets). "order" keys it by the call's ordinal among the group's compressed
        reduce-scatters (all-reduces) since the last gradsync.torch.next_step(group), with
        its element count and dtype (a different one resets it): for FSDP2, whose
        reduce-scatter inputs are fresh every step; it needs next_step once per step (a
        call past ef_capacity without one is refused). True and False are taken for
        "tensor" and "off".
    ef_capacity: the most residuals the group keeps (default 4096); past it the least
        recently used is dropped (its tensor starts over from no residual).
    ef_capacity_bytes: the most bytes of residuals the group keeps (default 2 GiB; 4
        bytes per element, an all-reduce's 1/size more); past it the least recently used
        go first, and one larger than it alone is not made (that call runs without).
    """

    def __init__(self, allreduce: CodecLike = None, reduce_scatter: CodecLike = None,
                 allgather: CodecLike = None, error_feedback: Union[str, bool] = "off",
                 ef_capacity: int = EF_CAPACITY,
                 ef_capacity_bytes: int = EF_CAPACITY_BYTES) -> None:
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
        if (isinstance(ef_capacity_bytes, bool) or not isinstance(ef_capacity_bytes, int)
                or not 0 < ef_capacity_bytes < 2**63):
            raise invalid("gradsync.torch.Options: ef_capacity_bytes must be a positive "
                          "integer, not %r" % (ef_capacity_bytes,))
        self.ef_capacity_bytes = ef_capacity_bytes

    def _native(self) -> Dict[str, Any]:
        """The arguments of the extension's set_options: each codec's gs_codec_config_t
        address (0: none), read (copied) during that call."""
        def addr(c: Optional[Codec]) -> int:
            return c._ptr() if c is not None else 0
        return {"allreduce": addr(self.allreduce), "reduce_scatter": addr(self.reduce_scatter),
                "allgather": addr(self.allgather),
                "error_feedback": self.error_feedback,
                "ef_capacity": self.ef_capacity,
                "ef_capacity_bytes": self.ef_capacity_bytes}

    def __repr__(self) -> str:
        parts = ["%s=%r" % (k, getattr(self, k)) for k in ("allreduce", "reduce_scatter",
                                                           "allgather")
                 if getattr(self, k) is not None]
        parts.append("error_feedback=%r" % self.error_feedback)
        if self.ef_capacity != EF_CAPACITY:
            parts.append("ef_capacity=%d" % self.ef_capacity)
        if self.ef_capacity_bytes != EF_CAPACITY_BYTES:
            parts.append("ef_capacity_bytes=%d" % self.ef_capacity_bytes)
        return "gradsync.torch.Options(%s)" % ", ".join(parts)


__all__ = ["Options", "ERROR_FEEDBACK", "EF_CAPACITY", "EF_CAPACITY_BYTES"]
