# SPDX-License-Identifier: Apache-2.0
"""The "gradsync" torch.distributed backend: for torch 2.x the C++ c10d::Backend of
_c10d.py (csrc/backend.cpp); for torch 1.13 (Debian's) this module's Python process group.

``import gradsync.torch.backend`` (or ``gradsync.torch.register_backend()``)
registers it; then ``torch.distributed.init_process_group("gradsync", ...)``
works with any init method that gives a store (env://, tcp://, file://).

It is a Python subclass of torch.distributed.ProcessGroup, not a C++
extension. In torch 1.13 the pybind trampoline forwards exactly the calls
C++ makes on a process group (allreduce, allgather, broadcast, barrier,
reduce_scatter, send, recv: what DDP's reducer and its start-up checks use)
to Python, and every other collective is called by distributed_c10d.py on
the Python object, where the subclass's method wins. So one Python class
serves both, with no compiler at run time. Collectives return a _Work, a
Python subclass of torch's Work whose wait() raises the collective's error
on the thread that waits; the group keeps a reference to each until it is
finished and waited for (a Python Work is collected when only C++ holds it,
and C++ would then wait for ever). The Work's Job is finished by the
thread that waits on it, or, once its future is asked for (DDP's reducer
does for each bucket), by the communicator's completion thread, so
``async_op=True`` and DDP's bucket all-reduces overlap with the caller.

The C calls are gradsync.Communicator's (through gradsync.torch._comm.Comm,
which adds the completion thread); errors are gradsync.Error subclasses that
are RuntimeError too, the backend's own refusals gradsync.InvalidArgument.

What it does not do: CUDA tensors (gradsync's device path is not wired
here), ReduceOp.PREMUL_SUM, allreduce_coalesced and the *_coalesced calls,
several tensors per call (one per device, a multi-GPU idiom).
"""
from __future__ import annotations

import datetime
import os
import threading
import warnings
import weakref
from typing import Any, Callable, List, Optional, Sequence, Tuple

import torch
import torch.distributed as dist

import gradsync
from gradsync import Op
from gradsync._types import GS_ERR_MISMATCH

from ._comm import Comm, Job, call, dtype_of, error, invalid
from ._rendezvous import agree_address, forget_address, free_port

#: torch 2.x: the C++ c10d backend (_c10d.py) is registered instead of this module's class.
TORCH_2 = int(torch.__version__.split(".")[0]) >= 2

BACKEND_NAME = "gradsync"

_REDUCE_OPS = [
    ("SUM", Op.SUM),
    ("PRODUCT", Op.PROD),
    ("MIN", Op.MIN),
    ("MAX", Op.MAX),
    ("BAND", Op.BAND),
    ("BOR", Op.BOR),
    ("BXOR", Op.BXOR),
    ("AVG", Op.AVG),
]


# By the value of ReduceOp.RedOpType (torch 1.13: opts.reduceOp.op): one dict look-up per
# call instead of up to eight ReduceOp comparisons (0.7 us each).
_REDUCE_OPS_BY_CODE = {int(getattr(dist.ReduceOp.RedOpType, torch_name)): gs_op
                       for torch_name, gs_op in _REDUCE_OPS
                       if hasattr(getattr(dist.ReduceOp, "RedOpType", None), torch_name)}


def reduce_op(op: Any) -> Op:
    """Map a torch.distributed.ReduceOp to a gradsync.Op; refuse the rest."""
    try:
        return _REDUCE_OPS_BY_CODE[int(getattr(op, "op", op))]
    except (KeyError, TypeError, ValueError):
        pass
    for torch_name, gs_op in _REDUCE_OPS:
        if hasattr(dist.ReduceOp, torch_name) and op == getattr(dist.ReduceOp, torch_name):
            return gs_op
    raise invalid("gradsync backend: unsupported reduce op %s (supported: SUM, PRODUCT, MIN, "
                  "MAX, BAND, BOR, BXOR, AVG; PREMUL_SUM is not)" % (op,))


def _one(tensors: Sequence[torch.Tensor], what: str) -> torch.Tensor:
    if len(tensors) != 1:
        raise invalid("gradsync backend: %s takes exactly one tensor per call, got %d"
                      % (what, len(tensors)))
    return _check(tensors[0], what)


def _check(t: torch.Tensor, what: str) -> torch.Tensor:
    if not t.is_cpu:  # (t.device costs more than the rest of the call's checks)
        raise invalid("gradsync backend: %s: only CPU tensors are supported, got %s"
                      % (what, t.device))
    if t.is_sparse:
        raise invalid("gradsync backend: %s: sparse tensors are not supported" % what)
    dtype_of(t)
    return t


def _staged(t: torch.Tensor) -> Tuple[torch.Tensor, Optional[Callable[[], Any]]]:
    """A contiguous tensor for t (_check()ed already) and the copy-back to run after the call
    (or None)."""
    if t.is_contiguous():
        return t, None
    c = t.contiguous()
    return c, (lambda: t.copy_(c))


def _contiguous_block(tensors: Sequence[torch.Tensor]) -> Optional[torch.Tensor]:
    """The one contiguous tensor the list views back to back, or None."""
    first = tensors[0]
    n = first.numel()
    for i, t in enumerate(tensors):
        if (not t.is_contiguous()) or (t.dtype != first.dtype) or (t.numel() != n):
            return None
        if t.data_ptr() != first.data_ptr() + i * n * first.element_size():
            return None
    if not first.is_contiguous():
        return None
    return torch.as_strided(first, (len(tensors) * n,), (1,)) if n else None


class _Work(dist.Work):
    """Work of one collective (a Job): a Python subclass of torch's Work, whose wait() and
    getFuture() torch 1.13's trampoline forwards from C++. wait() waits on the calling
    thread and raises the collective's error there: the caller of a synchronous
    torch.distributed call, of work.wait() after async_op=True, or C++ (DDP's start-up
    checks, the reducer's wait for its unused-parameter map), where torch turns it into
    a C++ exception. get_future() hands the Job to the completion thread and gives its
    future, which DDP's reducer reads for each bucket.

    The process group keeps a reference to each one until it is released() (see
    ProcessGroupGradsync._track): a Python Work that only C++ holds is collected, and
    C++ then calls the base Work's methods, whose wait() never returns."""

    def __init__(self, job: Job) -> None:
        super().__init__()
        self._job = job
        self._asked = False  # wait() ended, or get_future() / is_completed() answered

    def released(self) -> bool:
        """True once nothing will call into this Work but a Python owner: it has finished
        and its waiter has waited (or taken its future, or seen it complete)."""
        return self._asked and self._job.done

    def wait(self, timeout: Any = None) -> bool:
        """Wait for the collective and raise its error. @timeout is not used: the
        communicator's deadline (GS_TIMEOUT_MS, else the group's timeout) bounds it."""
        try:
            self._job.finish()
        finally:
            self._asked = True
        return True

    def get_future(self) -> torch.futures.Future:
        self._asked = True
        return self._job.watch()

    def is_completed(self) -> bool:
        done = self._job.try_finish(False)
        if done:
            self._asked = True
        return done

    def is_success(self) -> bool:
        return self.is_completed() and self._job.error is None

    def exception(self) -> Optional[BaseException]:
        return self._job.error if self.is_completed() else None

    def result(self) -> Any:
        return self._job.finish()


#: Pruning: the group drops released Works once it holds twice as many as after the
#: previous pruning (amortised O(1) per call), and warns once above _LIVE_WARN unreleased.
_PRUNE_MIN = 64
_LIVE_WARN = 100000


class _PeerWork(dist.Work):
    """Work of a send or receive (a gradsync.Request), waited for by its (Python) caller.
    Called only from Python (distributed_c10d's send/recv/isend/irecv), so a Python Work
    is safe here and gives recv_anysource its _source_rank(). A receive must fill its
    tensor: @expect elements, else gradsync.Mismatch."""

    def __init__(self, req: gradsync.Request, copy_back: Optional[Callable[[], Any]] = None,
                 expect: Optional[int] = None) -> None:
        super().__init__()
        self._req = req
        self._copy_back = copy_back
        self._expect = expect

    def _check_count(self) -> None:
        st = self._req.status
        if self._expect is not None and st is not None and st.count != self._expect:
            expect, self._expect = self._expect, None
            raise error(GS_ERR_MISMATCH, "received %s elements, expected %d" % (st.count, expect))

    def wait(self, timeout: Any = None) -> bool:
        call(self._req.wait)
        self._check_count()
        if self._copy_back is not None:
            self._copy_back()
            self._copy_back = None
        return True

    def is_completed(self) -> bool:
        done = call(self._req.test)
        if done:
            self._check_count()
        return done

    def is_success(self) -> bool:
        return self.is_completed()

    def _source_rank(self) -> int:
        self.wait()
        return self._req.status.source  # type: ignore[union-attr,return-value]  # waited

    def source_rank(self) -> int:
        return self._source_rank()


class ProcessGroupGradsync(dist.ProcessGroup):
    """torch.distributed ProcessGroup backed by one gradsync communicator."""

    def __init__(self, store: dist.Store, rank: int, size: int, timeout: Any) -> None:
        super().__init__(rank, size)
        self._rank = rank
        self._size = size
        addr, port = _agree_address(store, rank, timeout)
        timeout_ms = None
        if "GS_TIMEOUT_MS" not in os.environ and isinstance(timeout, datetime.timedelta):
            timeout_ms = int(min(timeout.total_seconds() * 1000, 2**31 - 1))
        self.comm = Comm.connect(rank, size, addr, port, timeout_ms=timeout_ms,
                                 job_id="torch-%s-%d" % (addr, port))
        forget_address(store, rank)
        # The Works C++ may still call into (see _Work), oldest first; dropped at shutdown.
        self._live: List[_Work] = []
        self._live_lock = threading.Lock()  # calls come from the caller's and DDP's threads
        self._prune_at = _PRUNE_MIN
        self._warned = False
        self._finalizer = weakref.finalize(self, _close, self.comm, self._live)

    # --- identity --------------------------------------------------------------------

    def getBackendName(self) -> str:
        return BACKEND_NAME

    def _get_backend_name(self) -> str:
        return BACKEND_NAME

    def name(self) -> str:
        return BACKEND_NAME

    def rank(self) -> int:
        return self._rank

    def size(self) -> int:
        return self._size

    def shutdown(self) -> None:
        """Destroy the gradsync communicator and drop the group's Works (also done when
        the group is collected, after destroy_process_group, and at exit)."""
        self._finalizer()

    # --- Works -----------------------------------------------------------------------

    def _start(self, method: str, *args: Any, result: Any,
               after: Optional[Callable[[], Any]] = None, **kwargs: Any) -> _Work:
        """Start Comm's non-blocking @method; its Work, kept by the group (_track)."""
        return self._track(_Work(self.comm.submit(method, *args, result=result, after=after,
                                                  **kwargs)))

    def _track(self, work: _Work) -> _Work:
        """Keep a reference to @work until it is released(): the Python Work must live
        as long as C++ may call it. Every call appends; once the list has doubled since the
        last pruning, the released ones go (finished, and waited for or their future
        taken). A finished Work that nobody asked yet stays: C++ waits on some of them
        later (torch's broadcast_coalesced, the reducer's unused-parameter map), and a
        Python Work that only C++ holds must not be collected."""
        with self._live_lock:
            live = self._live
            live.append(work)
            if len(live) >= self._prune_at:
                live[:] = [w for w in live if not w.released()]
                self._prune_at = max(_PRUNE_MIN, 2 * len(live))
                if len(live) > _LIVE_WARN and not self._warned:
                    self._warned = True
                    warnings.warn("gradsync backend: %d collectives' Works were never "
                                  "waited for (work.wait(), get_future(), is_completed()); the "
                                  "group keeps them until destroy_process_group. Wait for "
                                  "every async_op=True work." % len(live), RuntimeWarning)
        return work

    # --- collectives -----------------------------------------------------------------

    def allreduce(self, tensors: List[torch.Tensor], opts: Any = None) -> dist.Work:
        t = _one(tensors, "allreduce")
        op = reduce_op(opts.reduceOp if opts is not None else dist.ReduceOp.SUM)
        buf, back = _staged(t)
        return self._start("allreduce", buf, op=op, result=tensors, after=back)

    def broadcast(self, tensors: List[torch.Tensor], opts: Any = None) -> dist.Work:
        t = _one(tensors, "broadcast")
        buf, back = _staged(t)
        root = opts.rootRank if opts is not None else 0
        return self._start("broadcast", buf, root, result=tensors, after=back)

    def reduce(self, tensors: List[torch.Tensor], opts: Any = None) -> dist.Work:
        t = _one(tensors, "reduce")
        op = reduce_op(opts.reduceOp)
        buf, back = _staged(t)
        return self._start("reduce", buf, None, op, opts.rootRank, result=tensors,
                           after=back)

    def allgather(self, output_tensors: List[List[torch.Tensor]],
                  input_tensors: List[torch.Tensor], opts: Any = None) -> dist.Work:
        send = _one(input_tensors, "allgather").contiguous()
        outs = output_tensors[0]
        if len(output_tensors) != 1 or len(outs) != self._size:
            raise invalid("gradsync backend: allgather needs one list of %d output tensors"
                          % self._size)
        for o in outs:
            _check(o, "allgather")
        block = _contiguous_block(outs)
        if block is not None:
            return self._start("allgather", send, block, result=output_tensors)
        flat = torch.empty(self._size * send.numel(), dtype=send.dtype)

        def after() -> None:
            for o, piece in zip(outs, flat.split(send.numel())):
                o.copy_(piece.view_as(o))

        return self._start("allgather", send, flat, result=output_tensors, after=after)

    def _allgather_base(self, output: torch.Tensor, input: torch.Tensor,
                        opts: Any = None) -> dist.Work:
        _check(output, "all_gather_into_tensor")
        send = _check(input, "all_gather_into_tensor").contiguous()
        if not output.is_contiguous():
            raise invalid("gradsync backend: all_gather_into_tensor needs a contiguous output")
        return self._start("allgather", send, output, result=[output])

    def gather(self, output_tensors: List[List[torch.Tensor]], input_tensors: List[torch.Tensor],
               opts: Any = None) -> dist.Work:
        send = _one(input_tensors, "gather").contiguous()
        root = opts.rootRank
        if self._rank != root:
            return self._start("gather", send, None, root, result=[])
        outs = output_tensors[0]
        if len(outs) != self._size:
            raise invalid("gradsync backend: gather needs %d output tensors at the root"
                          % self._size)
        flat = torch.empty(self._size * send.numel(), dtype=send.dtype)

        def after() -> None:
            for o, piece in zip(outs, flat.split(send.numel())):
                o.copy_(piece.view_as(o))

        return self._start("gather", send, flat, root, result=output_tensors,
                           after=after)

    def scatter(self, output_tensors: List[torch.Tensor],
                input_tensors: List[List[torch.Tensor]], opts: Any = None) -> dist.Work:
        out = _one(output_tensors, "scatter")
        root = opts.rootRank
        buf, back = _staged(out)
        send = None
        if self._rank == root:
            ins = input_tensors[0]
            if len(ins) != self._size:
                raise invalid("gradsync backend: scatter needs %d input tensors at the root"
                              % self._size)
            send = torch.cat([_check(i, "scatter").reshape(-1) for i in ins])
        return self._start("scatter", send, buf, root, result=output_tensors,
                           after=back)

    def reduce_scatter(self, output_tensors: List[torch.Tensor],
                       input_tensors: List[List[torch.Tensor]], opts: Any = None) -> dist.Work:
        out = _one(output_tensors, "reduce_scatter")
        op = reduce_op(opts.reduceOp if opts is not None else dist.ReduceOp.SUM)
        ins = input_tensors[0]
        if len(input_tensors) != 1 or len(ins) != self._size:
            raise invalid("gradsync backend: reduce_scatter needs one list of %d inputs"
                          % self._size)
        block = _contiguous_block(ins)
        send = block if block is not None else \
            torch.cat([_check(i, "reduce_scatter").reshape(-1) for i in ins])
        buf, back = _staged(out)
        return self._start("reduce_scatter", send, buf, op, result=output_tensors,
                           after=back)

    def _reduce_scatter_base(self, output: torch.Tensor, input: torch.Tensor,
                             opts: Any = None) -> dist.Work:
        return self.reduce_scatter([output], [list(input.contiguous().chunk(self._size))], opts)

    def alltoall_base(self, output: torch.Tensor, input: torch.Tensor,
                      output_split_sizes: List[int], input_split_sizes: List[int],
                      opts: Any = None) -> dist.Work:
        _check(output, "all_to_all_single")
        send = _check(input, "all_to_all_single").contiguous()
        buf, back = _staged(output)
        if not output_split_sizes and not input_split_sizes:
            if send.numel() % self._size:
                raise invalid("gradsync backend: all_to_all_single: %d elements do not split "
                              "into %d equal blocks" % (send.numel(), self._size))
            return self._start("alltoall", send, buf, result=[output], after=back)
        srow = send.numel() // send.shape[0] if send.dim() and send.shape[0] else 1
        rrow = buf.numel() // buf.shape[0] if buf.dim() and buf.shape[0] else 1
        scounts = _splits(input_split_sizes, send, self._size, srow)
        rcounts = _splits(output_split_sizes, buf, self._size, rrow)
        return self._start("alltoallv", send, buf, scounts, rcounts, _displs(scounts),
                           _displs(rcounts), result=[output], after=back)

    def alltoall(self, output_tensors: List[torch.Tensor], input_tensors: List[torch.Tensor],
                 opts: Any = None) -> dist.Work:
        send = torch.cat([_check(t, "all_to_all").reshape(-1) for t in input_tensors])
        for t in output_tensors:
            _check(t, "all_to_all")
        recv = torch.empty(sum(t.numel() for t in output_tensors), dtype=send.dtype)
        scounts = [t.numel() for t in input_tensors]
        rcounts = [t.numel() for t in output_tensors]

        def after() -> None:
            for o, piece in zip(output_tensors, recv.split(rcounts)):
                o.copy_(piece.view_as(o))

        return self._start("alltoallv", send, recv, scounts, rcounts, _displs(scounts),
                           _displs(rcounts), result=output_tensors, after=after)

    def barrier(self, opts: Any = None) -> dist.Work:
        return self._start("barrier", result=[])

    # --- point-to-point --------------------------------------------------------------

    def send(self, tensors: List[torch.Tensor], dst: int, tag: int) -> dist.Work:
        t = _one(tensors, "send").contiguous()
        return _PeerWork(self.comm.request("isend", t, dst, tag))

    def recv(self, tensors: List[torch.Tensor], src: int, tag: int) -> dist.Work:
        t = _one(tensors, "recv")
        buf, back = _staged(t)
        return _PeerWork(self.comm.request("irecv", buf, src, tag), back, buf.numel())

    def recv_anysource(self, tensors: List[torch.Tensor], tag: int) -> dist.Work:
        t = _one(tensors, "recv")
        buf, back = _staged(t)
        return _PeerWork(self.comm.request("irecv", buf, gradsync.ANY_SOURCE, tag), back,
                         buf.numel())


def _close(comm: Comm, live: List[_Work]) -> None:
    for work in list(live):  # what nobody waited for: copy-outs run, requests released
        work._job.try_finish(True)
    comm.close()
    live.clear()


def _splits(sizes: List[int], t: torch.Tensor, size: int, row: int) -> List[int]:
    if not sizes:
        if t.numel() % size:
            raise invalid("gradsync backend: all_to_all_single: %d elements do not split into "
                          "%d equal blocks" % (t.numel(), size))
        return [t.numel() // size] * size
    if len(sizes) != size:
        raise invalid("gradsync backend: all_to_all_single: %d split sizes for %d ranks"
                      % (len(sizes), size))
    return [int(s) * row for s in sizes]


def _displs(counts: List[int]) -> List[int]:
    out, acc = [], 0
    for c in counts:
        out.append(acc)
        acc += c
    return out


def _free_port(addr: str) -> int:
    return free_port(addr)


def _agree_address(store: dist.Store, rank: int, timeout: Any) -> Tuple[str, int]:
    return agree_address(store, rank)


def _create(store: dist.Store, rank: int, size: int, timeout: Any) -> ProcessGroupGradsync:
    return ProcessGroupGradsync(store, rank, size, timeout)


def register_backend() -> None:
    """Register "gradsync" with torch.distributed (idempotent): torch 2.x gets the C++
    backend (_c10d.py), torch 1.13 this Python process group."""
    if TORCH_2:
        from ._c10d import register_backend as register_c10d
        register_c10d()
    elif BACKEND_NAME.upper() not in dist.Backend._plugins:
        dist.Backend.register_backend(BACKEND_NAME, _create)


register_backend()
