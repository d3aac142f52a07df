# SPDX-License-Identifier: Apache-2.0
"""What the PyTorch integration adds to the gradsync package: torch futures.

Everything that touches the C library is the package's: the loader and its
function table (gradsync._lib), the structs and enums (gradsync._types),
tensors to pointers (gradsync._buffer), codecs and error feedback
(gradsync.Codec, gradsync.ErrorFeedback), the calls themselves
(gradsync.Communicator, which returns a gradsync.Request with async_op=True).
This module keeps only the torch side: Comm, a Communicator plus one
completion thread that waits on its requests in order and completes torch
futures; torch's dtype table (bool included); and errors that are
RuntimeError as well as gradsync.Error, as torch's callers expect.
"""
from __future__ import annotations

import queue
import threading
from typing import Any, Callable, Dict, List, Optional, Tuple, Type

import torch

import gradsync
from gradsync import _buffer
from gradsync import _types as T
from gradsync._lib import make_error

#: torch dtype -> gradsync.DType: the package's table, plus bool as uint8 (one byte, 0 or 1:
#: min, max, band, bor, bxor keep it 0/1).
DTYPES = {getattr(torch, name[len("torch."):]): dt for name, dt in _buffer._TORCH.items()}
DTYPES[torch.bool] = T.DType.UINT8
FLOAT_DTYPES = tuple(t for t, dt in DTYPES.items()
                     if dt in (T.DType.FLOAT32, T.DType.FLOAT64, T.DType.FLOAT16,
                               T.DType.BFLOAT16))

# --------------------------------------------------------------------------
# Errors: gradsync.Error subclasses that are RuntimeError too
# --------------------------------------------------------------------------

_TORCH_ERRORS: Dict[Type[gradsync.Error], Type[gradsync.Error]] = {}


def torch_error(exc: gradsync.Error) -> gradsync.Error:
    """@exc, a gradsync.Error, as an instance of a subclass of its own class and of
    RuntimeError (what torch.distributed's callers catch): ``except gradsync.Timeout``
    and ``except RuntimeError`` both catch it."""
    cls = type(exc)
    if issubclass(cls, RuntimeError):
        return exc
    sub = _TORCH_ERRORS.get(cls)
    if sub is None:
        sub = _TORCH_ERRORS[cls] = type(cls.__name__, (cls, RuntimeError),
                                        {"__module__": cls.__module__, "__doc__": cls.__doc__})
    return sub(exc.status, exc.name, exc.message)


def error(status: int, message: str) -> gradsync.Error:
    """The torch layer's own error of gs_status_t @status, as torch_error() makes them."""
    return torch_error(make_error(status, message))


def invalid(message: str) -> gradsync.Error:
    """The torch layer's refusal of an argument: gradsync.InvalidArgument (a ValueError)."""
    return error(T.GS_ERR_INVALID_ARG, message)


def call(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """fn(*args, **kwargs) with a gradsync.Error raised as torch_error()."""
    try:
        return fn(*args, **kwargs)
    except gradsync.Error as exc:
        raise torch_error(exc) from None


def dtype_of(tensor: torch.Tensor) -> T.DType:
    """The gradsync.DType of a tensor's dtype; refuses the ones gradsync has not."""
    dt = DTYPES.get(tensor.dtype)
    if dt is None:
        raise invalid("gradsync: dtype %s is not supported (float32/64, float16, bfloat16, "
                      "int8, uint8, bool, int32, int64 are)" % tensor.dtype)
    return dt


def _c_views(args: Tuple[Any, ...]) -> List[Any]:
    """What the package takes for @args: a bool tensor as its uint8 view, the rest as is."""
    return [a.view(torch.uint8) if getattr(a, "dtype", None) is torch.bool else a for a in args]


# --------------------------------------------------------------------------
# Completion thread and the communicator
# --------------------------------------------------------------------------

def _unpack(fut: torch.futures.Future) -> Any:
    ok, value = fut.value()
    if not ok:
        raise value
    return value


class Completer:
    """One thread per communicator that waits on its collectives in order and
    completes their torch futures. Collectives on one communicator finish in
    submission order, so waiting FIFO never delays one behind another that
    finishes later. Point-to-point requests are not queued here (they finish
    in any order); they are waited for by the Work that owns them."""

    def __init__(self, name: str) -> None:
        self._queue: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    def submit(self, req: gradsync.Request, future: torch.futures.Future, result: Any,
               after: Optional[Callable[[], Any]] = None) -> None:
        """Complete @future with (True, @result) once gradsync.Request @req finishes and
        @after (if any) has run, or with (False, the error)."""
        self._queue.put((req, future, result, after))

    def _run(self) -> None:
        get = self._queue.get
        while True:
            item = get()
            if item is None:
                return
            req, future, result, after = item
            item = None
            try:
                req.wait()
                if after is not None:
                    after()
            except gradsync.Error as exc:  # handed to whoever waits on the future
                future.set_result((False, torch_error(exc)))
            except BaseException as exc:
                future.set_result((False, exc))
            else:
                future.set_result((True, result))
            req = future = result = after = None

    def stop(self) -> None:
        """Stop the thread once it has completed what was submitted before."""
        self._queue.put(None)
        self._thread.join()


class Comm:
    """A gradsync.Communicator plus its completion thread.

    Comm(communicator, owned): close() stops the thread, and closes the
    communicator when @owned (a borrowed one stays its caller's).
    Comm.connect(...) makes a communicator of its own."""

    def __init__(self, communicator: gradsync.Communicator, owned: bool = False) -> None:
        self.communicator = communicator
        self.rank = communicator.rank
        self.size = communicator.size
        self.owned = owned
        self.completer: Optional[Completer] = Completer("gradsync-completion-%d" % self.rank)

    @classmethod
    def connect(cls, rank: int, size: int, master_addr: str, master_port: int,
                timeout_ms: Optional[int] = None, job_id: Optional[str] = None) -> Comm:
        """A new communicator (gs_comm_init: the GS_* variables apply, the launcher's not)."""
        comm = call(gradsync.Communicator, rank=rank, size=size, master_addr=master_addr,
                    master_port=master_port, timeout_ms=timeout_ms, job_id=job_id,
                    launcher=False)
        return cls(comm, owned=True)

    def close(self) -> None:
        """Stop the completion thread; close the communicator when owned. Idempotent."""
        if self.completer is None:
            return
        self.completer.stop()
        self.completer = None
        if self.owned:
            self.communicator.close()

    def start(self, method: str, *args: Any, result: Any = None,
              after: Optional[Callable[[], Any]] = None, sync: bool = False,
              **kwargs: Any) -> torch.futures.Future:
        """Start Communicator.@method(*args, **kwargs) on tensors (bool ones go as uint8);
        returns a torch.futures.Future completed with @result by the completion thread,
        after @after (copy-out of staged buffers) has run there. With sync=True (the caller
        will wait at once) the request is waited for on the calling thread instead, its
        error raised there, and the future comes back completed. (Both start the
        non-blocking call: on 4 loaded ranks sharing 2 cores, the blocking C call measured
        slower than the non-blocking one and gs_wait.)"""
        fn = getattr(self.communicator, method)
        completer = self.completer
        if completer is None and not sync:
            raise error(T.GS_ERR_INVALID_USAGE, "gradsync.torch: Comm.start(%r) after close()"
                        % method)
        views = _c_views(args)
        try:
            req = fn(*views, async_op=True, **kwargs)
            if sync:
                # No hand-off to the completion thread: wait here (the GIL released inside)
                # and raise any error to the caller directly.
                req.wait()
        except gradsync.Error as exc:
            raise torch_error(exc) from None
        if sync:
            if after is not None:
                after()
            fut = torch.futures.Future()
            fut.set_result(result)
            return fut
        # NOTE: Future.set_exception only marks the Python wrapper; C++ readers of the
        # future (DDP's reducer, Work.get_future()) would see the exception as a value.
        # A callback that raises puts the child future in C++'s error state instead.
        base = torch.futures.Future()
        assert completer is not None  # checked above, before the call started
        completer.submit(req, base, result, after)
        return base.then(_unpack)

    def request(self, method: str, *args: Any) -> gradsync.Request:
        """A gradsync.Request of Communicator.@method(*args) (isend, irecv), not queued."""
        return call(getattr(self.communicator, method), *_c_views(args))
