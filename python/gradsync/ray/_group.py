# SPDX-License-Identifier: Apache-2.0
"""GradsyncGroup: a ray.util.collective group whose calls go to a gradsync.Communicator.

Ray calls a backend with lists: one tensor per process for the plain calls (allreduce,
broadcast, ...), one list per process for allgather's outputs and reducescatter's inputs;
more than one is Ray's *_multigpu form, which this backend does not take. Tensors are
numpy arrays or torch tensors (CPU; CUDA ones where the library was built with CUDA),
C-contiguous, of a dtype gradsync reduces. Every argument is checked before any byte
moves: a bad one raises (gradsync.InvalidArgument, a ValueError, or NotImplementedError
for what the backend cannot do) on the rank that passed it and changes no tensor.
"""
from __future__ import annotations

import os
import socket
from typing import Any, List, Optional

from ray.util.collective.collective_group.base_collective_group import BaseGroup
from ray.util.collective.types import (AllGatherOptions, AllReduceOptions, BarrierOptions,
                                       BroadcastOptions, ReduceOp, ReduceOptions,
                                       ReduceScatterOptions, unset_timeout_ms)

from .. import Communicator
from .._buffer import Buf, resolve
from .._lib import invalid, make_error
from .._types import GS_ERR_INVALID_USAGE
from . import _rendezvous

BACKEND = "GRADSYNC"
_OPS = {ReduceOp.SUM: "sum", ReduceOp.PRODUCT: "prod", ReduceOp.MIN: "min",
        ReduceOp.MAX: "max"}
_DEFAULT_TIMEOUT_MS = 300000  # GS_TIMEOUT_MS's default (docs/env.md)


def _timeout_ms() -> int:
    value = os.environ.get("GS_TIMEOUT_MS", "")
    try:
        ms = int(value) if value else _DEFAULT_TIMEOUT_MS
    except ValueError:
        raise ValueError("gradsync Ray backend: GS_TIMEOUT_MS=%r is not an integer number of "
                         "milliseconds" % value) from None
    if ms <= 0:
        raise ValueError("gradsync Ray backend: GS_TIMEOUT_MS=%d must be positive" % ms)
    return ms


def _host() -> str:
    """Rank 0's address: GS_MASTER_ADDR when set, else the IP Ray gives this node."""
    host = os.environ.get("GS_MASTER_ADDR")
    if not host:
        import ray
        host = ray.util.get_node_ip_address()
    try:
        return socket.getaddrinfo(host, None, proto=socket.IPPROTO_TCP)[0][4][0]
    except OSError as e:
        raise ValueError("gradsync Ray backend: rank 0's address %r does not resolve (%s); "
                         "set GS_MASTER_ADDR to an address of rank 0's host" % (host, e)
                         ) from None


def _is_torch(obj: Any) -> bool:
    return type(obj).__module__.startswith("torch") and hasattr(obj, "data_ptr")


def _flat(obj: Any) -> Any:
    """A 1-D view of a C-contiguous array or tensor (resolve() has checked it)."""
    return obj.view(-1) if _is_torch(obj) else obj.reshape(-1)


def _empty(like: Any, count: int) -> Any:
    if _is_torch(like):
        import torch
        return torch.empty(count, dtype=like.dtype, device=like.device)
    import numpy
    return numpy.empty(count, dtype=like.dtype)


def _concat(parts: List[Any]) -> Any:
    if _is_torch(parts[0]):
        import torch
        return torch.cat([_flat(p) for p in parts])
    import numpy
    return numpy.concatenate([_flat(p) for p in parts])


class GradsyncGroup(BaseGroup):
    """A Ray collective group over a gradsync.Communicator (backend "GRADSYNC").

    Ray creates it in each actor: init_collective_group(world_size, rank,
    backend="GRADSYNC", group_name=...) in every actor, or create_collective_group(...)
    from the driver and then any collective call. The constructor is the rendezvous
    (gradsync.ray._rendezvous): rank 0 publishes a fresh epoch's "host:port" through Ray's
    key-value store, the others wait for it (GS_TIMEOUT_MS, default 300 s), and every
    rank then builds the communicator with the epoch in its job_id. Attributes beyond
    BaseGroup's: communicator (the gradsync.Communicator, for the calls Ray has no name
    for), epoch, job_id, master_addr, master_port.
    """

    def __init__(self, world_size: int, rank: int, group_name: str,
                 timeout_ms: Optional[int] = None) -> None:
        super().__init__(world_size, rank, group_name)
        self._comm: Optional[Communicator] = None
        ms = timeout_ms if timeout_ms is not None else _timeout_ms()
        akey = None
        if rank == 0:
            host = _host()
            epoch, port, akey = _rendezvous.publish(group_name, host)
        else:
            epoch, host, port = _rendezvous.lookup(group_name, rank, ms)
        self.epoch, self.master_addr, self.master_port = epoch, host, port
        self.job_id = _rendezvous.job_id(group_name, epoch)
        try:
            self._comm = Communicator(rank=rank, size=world_size, master_addr=host,
                                      master_port=port, timeout_ms=timeout_ms,
                                      job_id=self.job_id, launcher=False)
        finally:
            if akey is not None:
                _rendezvous.withdraw(akey)

    @classmethod
    def backend(cls) -> str:
        return BACKEND

    @classmethod
    def check_backend_availability(cls) -> bool:
        """True when libgradsync loads (it did, or this module would not import)."""
        try:
            from .. import library_version
            library_version()
            return True
        except Exception:
            return False

    @property
    def communicator(self) -> Communicator:
        """The group's gradsync.Communicator (gradsync.InvalidUsage once destroyed)."""
        if self._comm is None:
            raise make_error(GS_ERR_INVALID_USAGE, "gradsync Ray backend: group %r is destroyed"
                             % self._group_name)
        return self._comm

    def destroy_group(self) -> None:
        """Free the communicator (destroy_collective_group calls this). Idempotent."""
        comm, self._comm = self._comm, None
        if comm is not None:
            comm.close()

    def __repr__(self) -> str:
        return "<gradsync.ray.GradsyncGroup %r rank %d of %d, epoch %s%s>" % (
            self._group_name, self._rank, self._world_size, self.epoch,
            "" if self._comm is not None else " (destroyed)")

    # ---- argument checks ----------------------------------------------

    def _what(self, fn: str) -> str:
        return "gradsync Ray backend: %s on group %r" % (fn, self._group_name)

    def _one(self, items: Any, fn: str, what: str) -> Any:
        """The single entry of Ray's per-device list @items."""
        if not isinstance(items, (list, tuple)):
            raise invalid("%s: %s must be a list (one entry per device), not %s"
                          % (self._what(fn), what, type(items).__name__))
        if len(items) != 1:
            raise NotImplementedError(
                "%s: %s has %d entries; this backend takes one tensor per process (Ray's "
                "*_multigpu calls are not supported): call it once per tensor"
                % (self._what(fn), what, len(items)))
        return items[0]

    def _no_timeout(self, options: Any, fn: str) -> None:
        t = getattr(options, "timeout_ms", unset_timeout_ms)
        if t is not None and t != unset_timeout_ms:
            raise NotImplementedError(
                "%s: a per-call timeout_ms (%s) is not supported; the group's deadline is "
                "GS_TIMEOUT_MS, set in the actors' environment" % (self._what(fn), t))

    def _device(self, options: Any, field: str, fn: str) -> None:
        if getattr(options, field, 0):
            raise NotImplementedError("%s: %s = %r: this backend takes one tensor per process "
                                      "(index 0)" % (self._what(fn), field,
                                                     getattr(options, field)))

    def _op(self, options: Any, fn: str) -> str:
        op = getattr(options, "reduceOp", ReduceOp.SUM)
        if op not in _OPS:
            raise invalid("%s: reduceOp %r is not a ray.util.collective.ReduceOp; one of %s"
                          % (self._what(fn), op, ", ".join(o.name for o in _OPS)))
        return _OPS[op]

    def _rank_arg(self, rank: Any, field: str, fn: str) -> int:
        if isinstance(rank, bool) or not isinstance(rank, int) or \
                not 0 <= rank < self._world_size:
            raise invalid("%s: %s %r is not a rank of the group (0 .. %d)"
                          % (self._what(fn), field, rank, self._world_size - 1))
        return rank

    def _tensor(self, t: Any, fn: str, writable: bool) -> Buf:
        return resolve(t, "%s: tensor" % self._what(fn), writable=writable)

    def _blocks(self, fn: str, what: str, blocks: Any, like: Any, one: Buf,
                writable: bool) -> List[Buf]:
        """Check @blocks, a list of world_size tensors each of @one's dtype and count and of
        @like's kind (numpy or torch), C-contiguous (and writable when @writable)."""
        if not isinstance(blocks, (list, tuple)) or len(blocks) != self._world_size:
            n = len(blocks) if isinstance(blocks, (list, tuple)) else type(blocks).__name__
            raise invalid("%s: %s must be a list of world_size = %d tensors, got %s"
                          % (self._what(fn), what, self._world_size, n))
        out = []
        for i, b in enumerate(blocks):
            name = "%s[%d]" % (what, i)
            if _is_torch(b) != _is_torch(like):
                raise invalid("%s: %s is a %s but the tensor is a %s; use one kind"
                              % (self._what(fn), name, type(b).__name__, type(like).__name__))
            r = resolve(b, "%s: %s" % (self._what(fn), name), writable=writable)
            if r.dtype != one.dtype or r.count != one.count:
                raise invalid("%s: %s has %d elements of %s; it must match the tensor: %d of %s"
                              % (self._what(fn), name, r.count, r.dtype.name.lower(),
                                 one.count, one.dtype.name.lower()))
            out.append(r)
        return out

    # ---- collectives --------------------------------------------------

    def allreduce(self, tensors: Any, allreduce_options: Any = AllReduceOptions()) -> None:
        """Every rank's tensor = op over every rank's tensor, in place."""
        fn = "allreduce"
        t = self._one(tensors, fn, "tensors")
        self._no_timeout(allreduce_options, fn)
        op = self._op(allreduce_options, fn)
        self._tensor(t, fn, True)
        self.communicator.allreduce(t, op=op)

    def barrier(self, barrier_options: Any = BarrierOptions()) -> None:
        """Return once every rank has entered the barrier."""
        self._no_timeout(barrier_options, "barrier")
        self.communicator.barrier()

    def reduce(self, tensors: Any, reduce_options: Any = ReduceOptions()) -> None:
        """root_rank's tensor = op over every rank's tensor; the others' are left alone."""
        fn = "reduce"
        t = self._one(tensors, fn, "tensors")
        self._no_timeout(reduce_options, fn)
        self._device(reduce_options, "root_tensor", fn)
        root = self._rank_arg(getattr(reduce_options, "root_rank", 0), "root_rank", fn)
        op = self._op(reduce_options, fn)
        self._tensor(t, fn, root == self._rank)
        self.communicator.reduce(t, op=op, root=root)

    def broadcast(self, tensors: Any, broadcast_options: Any = BroadcastOptions()) -> None:
        """Every rank's tensor = root_rank's tensor."""
        fn = "broadcast"
        t = self._one(tensors, fn, "tensors")
        self._no_timeout(broadcast_options, fn)
        self._device(broadcast_options, "root_tensor", fn)
        root = self._rank_arg(getattr(broadcast_options, "root_rank", 0), "root_rank", fn)
        self._tensor(t, fn, root != self._rank)
        self.communicator.broadcast(t, root)

    def allgather(self, tensor_lists: Any, tensors: Any,
                  allgather_options: Any = AllGatherOptions()) -> None:
        """tensor_lists[0][j] = rank j's tensor, on every rank."""
        fn = "allgather"
        t = self._one(tensors, fn, "tensors")
        outs = self._one(tensor_lists, fn, "tensor_lists")
        self._no_timeout(allgather_options, fn)
        src = self._tensor(t, fn, False)
        blocks = self._blocks(fn, "tensor_lists[0]", outs, t, src, True)
        n = src.count
        gathered = self.communicator.allgather(t, _empty(t, n * self._world_size))
        if _is_torch(t):
            import torch
            with torch.no_grad():  # outputs that require grad take the copy too
                for j, b in enumerate(blocks):
                    _flat(b.obj).copy_(gathered[j * n:(j + 1) * n])
        else:
            for j, b in enumerate(blocks):
                _flat(b.obj)[:] = gathered[j * n:(j + 1) * n]

    def reducescatter(self, tensors: Any, tensor_lists: Any,
                      reducescatter_options: Any = ReduceScatterOptions()) -> None:
        """tensors[0] = op over every rank's tensor_lists[0][rank]."""
        fn = "reducescatter"
        out = self._one(tensors, fn, "tensors")
        ins = self._one(tensor_lists, fn, "tensor_lists")
        self._no_timeout(reducescatter_options, fn)
        op = self._op(reducescatter_options, fn)
        dst = self._tensor(out, fn, True)
        self._blocks(fn, "tensor_lists[0]", ins, out, dst, False)
        self.communicator.reduce_scatter(_concat(list(ins)), out, op=op)

    # ---- point-to-point -----------------------------------------------

    def _p2p_view(self, t: Any, n_elements: Any, fn: str, writable: bool) -> Any:
        b = self._tensor(t, fn, writable)
        if not isinstance(n_elements, int) or not 0 <= n_elements <= b.count:
            raise invalid("%s: n_elements %r is not in 0 .. %d (0: the whole tensor)"
                          % (self._what(fn), n_elements, b.count))
        return _flat(t)[:n_elements] if n_elements else t

    def send(self, tensors: Any, send_options: Any) -> None:
        """Send the tensor (or its first n_elements) to dst_rank; returns once it may be
        reused."""
        fn = "send"
        t = self._one(tensors, fn, "tensors")
        self._no_timeout(send_options, fn)
        self._device(send_options, "dst_gpu_index", fn)
        peer = self._rank_arg(getattr(send_options, "dst_rank", 0), "dst_rank", fn)
        buf = self._p2p_view(t, getattr(send_options, "n_elements", 0), fn, False)
        self.communicator.send(buf, peer)

    def recv(self, tensors: Any, recv_options: Any) -> None:
        """Receive src_rank's send into the tensor (or its first n_elements); a message of
        another size raises (gradsync.Truncated when larger)."""
        fn = "recv"
        t = self._one(tensors, fn, "tensors")
        self._no_timeout(recv_options, fn)
        self._device(recv_options, "src_gpu_index", fn)
        peer = self._rank_arg(getattr(recv_options, "src_rank", 0), "src_rank", fn)
        buf = self._p2p_view(t, getattr(recv_options, "n_elements", 0), fn, True)
        want = self._tensor(buf, fn, True).count
        st = self.communicator.recv(buf, peer)
        if st.count != want:
            raise RuntimeError("%s: rank %d sent %d elements, the tensor takes %d; send and "
                               "recv must agree on the size" % (self._what(fn), peer,
                                                                st.count, want))

