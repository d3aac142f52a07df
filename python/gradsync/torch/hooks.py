# SPDX-License-Identifier: Apache-2.0
"""A DDP communication hook that all-reduces each gradient bucket through gradsync.

    state = GradsyncHookState(process_group=None, codec="int8")
    model.register_comm_hook(state, gradsync_allreduce_hook)

Every bucket DDP hands to the hook is averaged over the ranks by gradsync's
(compressed) all-reduce, in place in bucket.buffer(), and the hook returns
a torch.futures.Future completed by gradsync's completion thread, so the
all-reduce of one bucket overlaps the backward pass of the next. Error
feedback is kept per bucket (keyed by bucket.index()) across steps, and
recreated when a bucket's size or dtype changes (DDP rebuilds its buckets
after the first step).

The hook works whatever DDP's process group is. With the "gradsync"
backend it reuses that group's communicator (torch 2.x: borrowed from the C++
backend, which keeps owning it); with any other (gloo) it
creates its own gradsync communicator for the same ranks, agreeing on the
rendezvous port through the process group itself (rank 0 picks a free
port and broadcasts it), so no extra port or environment is needed.

Not done here: CUDA buckets, and codecs on non-float buckets (those are
averaged without compression).
"""
# No "from __future__ import annotations" here: DDP.register_comm_hook compares the hook's
# annotations with dist.GradBucket and torch.futures.Future[torch.Tensor] themselves.

import os
from typing import Any, Dict, Optional, Union

import torch
import torch.distributed as dist

import gradsync
from gradsync import Op
from gradsync._types import GS_ERR_INVALID_USAGE

from ._comm import FLOAT_DTYPES, Comm, call, dtype_of, error, invalid


class GradsyncHookState:
    """State of gradsync_allreduce_hook.

    process_group: the group whose ranks take part (default: the default
        group). A "gradsync" group lends its communicator; any other group is
        used once, to agree on the address of a new gradsync communicator.
    comm: a gradsync.Communicator to run on instead (borrowed: the state does not
        close it).
    codec: None or "none" (plain average), "fp16", "bf16", "int8", "qsgd",
        "sign", "topk", "randk", or a gradsync.Codec; codec_params go to
        gradsync.Codec (block_size, ratio, levels, seed, zstd, zstd_level).
    error_feedback: keep a residual per bucket (default: when the codec is lossy).
    timeout_ms: deadline of the hook's communicator (default GS_TIMEOUT_MS or the
        library's).
    """

    def __init__(self, process_group: Any = None, codec: Union[None, str, gradsync.Codec] = "int8",
                 error_feedback: Optional[bool] = None,
                 comm: Union[None, gradsync.Communicator, Comm] = None,
                 timeout_ms: Optional[int] = None, **codec_params: Any) -> None:
        self.codec: Optional[gradsync.Codec] = None
        if isinstance(codec, gradsync.Codec):
            self.codec = codec
        elif codec is not None and codec != "none":
            self.codec = call(gradsync.Codec, codec, **codec_params)
        self.error_feedback = (self.codec is not None) if error_feedback is None \
            else bool(error_feedback)
        self._owned = False
        if comm is not None and not isinstance(comm, Comm):
            comm = Comm(comm, owned=False)
            self._owned = True  # the wrapper (its completion thread), not the communicator
        elif comm is None:
            group = process_group if process_group is not None else \
                dist.distributed_c10d._get_default_group()
            comm = getattr(group, "comm", None)
            if comm is None:
                comm = _backend_comm(group)  # torch 2.x: borrowed from the C++ backend
                self._owned = comm is not None  # the wrapper (its thread) is ours
            if not isinstance(comm, Comm):
                comm = _comm_over(group, timeout_ms)
                self._owned = True
        self.comm: Optional[Comm] = comm
        self._ef: Dict[int, gradsync.ErrorFeedback] = {}

    def ef_for(self, index: int, buf: torch.Tensor) -> Optional[gradsync.ErrorFeedback]:
        """The residual (a gradsync.ErrorFeedback) of bucket @index, recreated when its size
        or dtype changed."""
        if (not self.error_feedback) or (buf.dtype not in FLOAT_DTYPES):
            return None
        ef = self._ef.get(index)
        dtype = dtype_of(buf)
        if ef is None or ef.count != buf.numel() or ef.dtype != dtype:
            if ef is not None:
                ef.close()
            ef = call(gradsync.ErrorFeedback, buf.numel(), dtype)
            self._ef[index] = ef
        return ef

    def reset(self) -> None:
        """Forget every residual (after loading a checkpoint, say)."""
        for ef in self._ef.values():
            ef.close()
        self._ef.clear()

    def close(self) -> None:
        """Free the residuals and the communicator this state created."""
        self.reset()
        if self._owned and self.comm is not None:
            self.comm.close()
        self.comm = None

    def __getstate__(self) -> Any:
        raise TypeError("GradsyncHookState holds a live communicator and cannot be pickled")


def gradsync_allreduce_hook(state: "GradsyncHookState",
                            bucket: dist.GradBucket) -> torch.futures.Future[torch.Tensor]:
    """DDP comm hook: average bucket.buffer() over the ranks through gradsync."""
    buf = bucket.buffer()
    if buf.device.type != "cpu":
        raise invalid("gradsync_allreduce_hook: only CPU buckets are supported, got %s"
                      % buf.device)
    comm = state.comm
    if comm is None:
        raise error(GS_ERR_INVALID_USAGE, "gradsync_allreduce_hook: the GradsyncHookState "
                    "was closed; make a new one for this model")
    if buf.dtype not in FLOAT_DTYPES:
        size = comm.size
        return comm.start("allreduce", buf, op=Op.SUM, result=buf).then(
            lambda f: f.value().div_(size))
    if state.codec is None:
        return comm.start("allreduce", buf, op=Op.AVG, result=buf)
    ef = state.ef_for(bucket.index(), buf)
    return comm.start("allreduce", buf, op=Op.AVG, codec=state.codec, ef=ef, result=buf)


def _backend_comm(group: Any) -> Optional[Comm]:
    """torch 2.x: the communicator of @group's gradsync C++ backend (either device's),
    borrowed (the group owns it), or None when the group is not gradsync's."""
    if not hasattr(group, "_get_backend"):
        return None
    try:
        from . import _c10d
        backend = _c10d.gradsync_backend(group)
    except Exception:  # noqa: BLE001 - no torch 2.x extension: not a gradsync group
        return None
    if backend is None:
        return None
    handle = _c10d.extension().comm_handle(backend)
    return Comm(gradsync.Communicator._borrow(handle), owned=False)


def _comm_over(group: Any, timeout_ms: Optional[int]) -> Comm:
    """A new gradsync communicator over @group's ranks; rank 0 picks the port and tells
    the others through the group (one broadcast of two int64 and the address)."""
    from .backend import _free_port

    rank = dist.get_rank(group)
    size = dist.get_world_size(group)
    addr_bytes = torch.zeros(256, dtype=torch.uint8)
    port = torch.zeros(1, dtype=torch.int64)
    if rank == 0:
        addr = os.environ.get("GS_MASTER_ADDR") or os.environ.get("MASTER_ADDR") or "127.0.0.1"
        raw = addr.encode()[:255]
        addr_bytes[:len(raw)] = torch.tensor(list(raw), dtype=torch.uint8)
        import socket
        try:
            bind = socket.gethostbyname(addr)
        except OSError:
            bind = ""
        port[0] = _free_port(bind)
    src = dist.get_global_rank(group, 0) if group is not dist.GroupMember.WORLD and \
        hasattr(dist, "get_global_rank") else 0
    dist.broadcast(addr_bytes, src=src, group=group)
    dist.broadcast(port, src=src, group=group)
    addr = bytes(addr_bytes.tolist()).rstrip(b"\0").decode()
    return Comm.connect(rank, size, addr, int(port[0]), timeout_ms=timeout_ms,
                        job_id="torch-hook-%s-%d" % (addr, int(port[0])))
