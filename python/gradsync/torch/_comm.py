# SPDX-License-Identifier: Apache-2.0
"""What the PyTorch integration adds to the gradsync package: torch futures.

Everything that touches the C library is the package's: the loader and its
function table (gradsync._lib), the structs and enums (gradsync._types),
tensors to pointers (gradsync._buffer), codecs and error feedback
(gradsync.Codec, gradsync.ErrorFeedback), the calls themselves
(gradsync.Communicator, which returns a gradsync.Request with async_op=True).
This module keeps only the torch side: Comm, a Communicator plus one
completion thread that finishes its collectives (Job) in order and completes
their torch futures; torch's dtype table (bool included); and errors that are
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


class Job:
    """One collective in flight: its gradsync.Request, the copy-out to run once it has
    finished (@after: staged outputs back into the caller's tensors), and the torch future
    that gets @result or the error.

    Nothing waits for it until asked: finish() waits on the calling thread (so a caller
    that waits at once pays no thread hand-off), and watch() has the communicator's
    completion thread finish it and returns the future (DDP's reducer, hooks,
    get_future()). The library's worker runs the collective whether or not anyone
    waits. Whichever thread gets to it first waits for the request (gs_wait: the
    library's deadline) and runs @after, once; every finish() then returns @result or
    raises the error on its own thread. (The future is the child of a ``then`` callback
    that raises: Future.set_exception only marks the Python wrapper, so C++ readers of
    the future, DDP's reducer and Work.get_future(), would see the exception as a value.)"""

    def __init__(self, comm: "Comm", req: gradsync.Request, result: Any,
                 after: Optional[Callable[[], Any]] = None) -> None:
        self._lock = threading.Lock()  # held by the thread that is finishing it
        self._comm: Optional[Comm] = comm
        self._req: Optional[gradsync.Request] = req
        self._after = after
        self.result = result
        self.error: Optional[BaseException] = None
        self.done = False
        self._base: torch.futures.Future = torch.futures.Future()
        self.future: torch.futures.Future = self._base.then(_unpack)

    def _settle(self, block: bool) -> bool:
        """With the lock held: finish the job if it is not done (@block: waiting for the
        request; else only if the request has finished). True if this call finished it."""
        req = self._req
        if self.done or req is None or (not block and not req.done):
            return False
        try:
            req.wait()
            if self._after is not None:
                self._after()
        except gradsync.Error as exc:
            self.error = torch_error(exc)
        except BaseException as exc:  # handed to whoever waits, like the rest
            self.error = exc
        self._req = self._after = self._comm = None
        self.done = True
        return True

    def _publish(self) -> None:
        """Complete the future (outside the lock: its callbacks may call finish())."""
        self._base.set_result((False, self.error) if self.error is not None
                              else (True, self.result))

    def finish(self) -> Any:
        """Wait for the collective, here or for the thread already waiting; return its
        result or raise its error."""
        with self._lock:
            settled = self._settle(True)
        if settled:
            self._publish()
        if self.error is not None:
            raise self.error.with_traceback(None)
        return self.result

    def try_finish(self, block: bool) -> bool:
        """finish() without the raise and without waiting for another thread that is
        finishing it; with block=False only if the request has finished (never blocks).
        True once done."""
        if not self._lock.acquire(False):
            return self.done
        try:
            settled = self._settle(block)
        finally:
            self._lock.release()
        if settled:
            self._publish()
        return self.done

    def watch(self) -> torch.futures.Future:
        """Have the completion thread finish the job (once), so that its future completes
        with nobody waiting; return the future."""
        comm = self._comm
        if comm is not None:
            self._comm = None
            completer = comm.completer
            if completer is not None:
                completer.submit(self)
            else:  # closed: nobody left to finish it but us
                self.try_finish(True)
        return self.future


class Completer:
    """One thread per communicator that finishes the Jobs it is given (Job.watch) in
    order, so their futures complete without anyone waiting. Collectives on one
    communicator finish in submission order, so waiting FIFO never delays one behind
    another that finishes later. A Job that another thread is finishing is skipped.
    Point-to-point requests are not queued here (they finish in any order); they are
    waited for by the Work that owns them."""

    def __init__(self, name: str) -> None:
        self._queue: queue.SimpleQueue[Optional[Job]] = queue.SimpleQueue()
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    def submit(self, job: Job) -> None:
        """Finish @job on the completion thread."""
        self._queue.put(job)

    def _run(self) -> None:
        get = self._queue.get
        while True:
            job = get()
            if job is None:
                return
            job.try_finish(True)  # never raises: the error goes to the job's waiters
            job = None

    def stop(self) -> None:
        """Stop the thread once it has finished what was submitted before."""
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

    def submit(self, method: str, *args: Any, result: Any = None,
               after: Optional[Callable[[], Any]] = None, **kwargs: Any) -> Job:
        """Start Communicator.@method(*args, **kwargs) (non-blocking) on tensors (bool ones
        go as uint8); returns its Job (finished with @result, after @after, the copy-out of
        staged buffers, by Job.finish() or, after Job.watch(), the completion thread)."""
        if self.completer is None:
            raise error(T.GS_ERR_INVALID_USAGE, "gradsync.torch: Comm.submit(%r) after close()"
                        % method)
        req = call(getattr(self.communicator, method), *_c_views(args), async_op=True, **kwargs)
        return Job(self, req, result, after)

    def start(self, method: str, *args: Any, result: Any = None,
              after: Optional[Callable[[], Any]] = None, sync: bool = False,
              **kwargs: Any) -> torch.futures.Future:
        """submit() and Job.watch(): a future that the completion thread completes with
        @result, or puts in error. With sync=True the call is finished on the calling
        thread instead (its error raised there) and the future comes back completed."""
        job = self.submit(method, *args, result=result, after=after, **kwargs)
        if sync:
            job.finish()
            return job.future
        return job.watch()

    def request(self, method: str, *args: Any) -> gradsync.Request:
        """A gradsync.Request of Communicator.@method(*args) (isend, irecv), not queued."""
        return call(getattr(self.communicator, method), *_c_views(args))
