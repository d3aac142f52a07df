# SPDX-License-Identifier: Apache-2.0
"""Requests of non-blocking calls, receive statuses, groups, wait_all/any, test_all.

A Request holds every Python object its operation reads or writes until the
C library reports completion, so a buffer dropped by the caller is never
freed under the worker thread. A Request dropped while still running is not
waited for (its finaliser never blocks): it warns (ResourceWarning, naming
the operation) and hands its handle and buffers to its owner, the
Communicator or ParameterServer, which completes it with gs_test() at the
owner's next call and for good when the owner is closed (its destroy
completes or cancels what is in flight); an error it then reports is a
RuntimeWarning. With no owner, an atexit hook tries once more at exit.
"""
from __future__ import annotations

import atexit
import collections
import threading
import time
import warnings
from types import TracebackType
from typing import (TYPE_CHECKING, Any, Deque, Iterable, Iterator, List, Literal, Optional,
                    Sequence, Tuple, Type)

from ctypes import byref, c_int, c_void_p

from . import _types as T
from ._lib import LIB, Error, check, last_error as _last_error

if TYPE_CHECKING:
    from ._comm import Communicator
    from ._ps import ParameterServer


class Status:
    """What a receive or a probe found: source (rank), tag, count (elements).

    Unpacks as a tuple: ``source, tag, count = comm.recv(buf)``. Inside a
    gradsync.group() the fields are None until the group ends.
    """
    __slots__ = ("source", "tag", "count")

    def __init__(self, source: Optional[int] = None, tag: Optional[int] = None,
                 count: Optional[int] = None) -> None:
        self.source = source
        self.tag = tag
        self.count = count

    @classmethod
    def from_c(cls, st: T.P2PStatus) -> Status:
        """A Status from a gs_p2p_status_t."""
        return cls(st.source, st.tag, st.count)

    def _fill(self, st: T.P2PStatus) -> None:
        self.source, self.tag, self.count = st.source, st.tag, st.count

    def __iter__(self) -> Iterator[Optional[int]]:
        return iter((self.source, self.tag, self.count))

    def __eq__(self, other: object) -> bool:
        return tuple(self) == tuple(other)  # type: ignore[arg-type]  # a Status or a tuple

    def __repr__(self) -> str:
        return "Status(source=%r, tag=%r, count=%r)" % (self.source, self.tag, self.count)


class Request:
    """A non-blocking operation in flight.

    wait() blocks until it finishes and returns a Status for receives (None
    otherwise), raising gradsync.Error when it failed; test() returns True
    once finished (raising likewise); done is test() without the raise.
    result is the output object of the call (the out buffer), if any.
    """

    def __init__(self, keep: Any, result: Any = None, pstatus: Optional[T.P2PStatus] = None,
                 owner: Optional[Communicator | ParameterServer] = None, ps: bool = False,
                 what: str = "request") -> None:
        self._h = c_void_p()
        self._what = what  # the operation, named in warnings ("gs_irecv from 1, tag 7")
        self._keep = keep
        self.result = result
        self._pstatus = pstatus
        self._owner = owner  # the Communicator or ParameterServer: it must outlive us
        self._ps = ps
        self._finished = False
        self._error: Optional[Error] = None
        self._lock = threading.Lock()

    def _complete(self, status: int, error: Optional[Error] = None) -> None:
        """Record completion (called right after the C call that released the handle)."""
        if status < 0 and error is None:
            error = _last_error(status)
        self._error = error
        self._finished = True
        self._keep = None
        self._h = c_void_p()

    def _outcome(self) -> Optional[Status]:
        if self._error is not None:
            raise self._error
        return Status.from_c(self._pstatus) if self._pstatus is not None else None

    def _poll(self) -> None:
        fn = LIB.gs_ps_test if self._ps else LIB.gs_test
        st = fn(byref(self._h))
        if st != T.GS_INPROGRESS:
            self._complete(st)

    def wait(self) -> Optional[Status]:
        """Block until finished; return its Status (receives) or None; raise on failure."""
        with self._lock:
            if not self._finished:
                fn = LIB.gs_ps_wait if self._ps else LIB.gs_wait
                self._complete(fn(byref(self._h)))
        return self._outcome()

    def test(self) -> bool:
        """True once finished (then raises if it failed); False while it runs. Never blocks."""
        with self._lock:
            if not self._finished:
                self._poll()
        if self._finished:
            self._outcome()
        return self._finished

    @property
    def done(self) -> bool:
        """True once finished, successfully or not (wait() then says which)."""
        with self._lock:
            if not self._finished:
                self._poll()
        return self._finished

    @property
    def status(self) -> Optional[Status]:
        """The Status of a finished receive (None before, or for other operations)."""
        if self._finished and self._error is None and self._pstatus is not None:
            return Status.from_c(self._pstatus)
        return None

    def __del__(self) -> None:
        # Never blocks: one gs_test(); a request still running goes to its owner (or the
        # module's list), which keeps its buffers and releases it later (_Orphan).
        if self._finished or not self._h.value:
            return
        orphan = _Orphan(self._h, self._ps, self._keep, self._pstatus, self._what)
        self._h = c_void_p()
        self._keep = None
        if orphan.test(dropped=True):
            return
        warnings.warn("a gradsync.Request (%s) was dropped while in flight: it is not waited "
                      "for; its buffers stay referenced until it completes, checked at the "
                      "next call on its communicator and at its close. Wait for requests (or "
                      "keep them) to see their outcome." % self._what, ResourceWarning,
                      stacklevel=2)
        owner = self._owner
        orphans = getattr(owner, "_orphans", None) if owner is not None else None
        if orphans is None or getattr(owner, "_h", None) is None:
            orphans = _ORPHANS  # no owner, or one already closed: released at exit
        orphans.append(orphan)

    def __repr__(self) -> str:
        state = "running" if not self._finished else ("failed" if self._error else "done")
        return "<gradsync.Request %s>" % state


class _Orphan:
    """The C handle and the buffers of a Request dropped while in flight."""
    __slots__ = ("h", "ps", "keep", "pstatus", "what")

    def __init__(self, h: c_void_p, ps: bool, keep: Any, pstatus: Optional[T.P2PStatus],
                 what: str) -> None:
        self.h, self.ps, self.keep, self.pstatus, self.what = h, ps, keep, pstatus, what

    def test(self, dropped: bool = False) -> bool:
        """gs_test() it: True once released (warning when it failed), False while it runs."""
        st = (LIB.gs_ps_test if self.ps else LIB.gs_test)(byref(self.h))
        if st == T.GS_INPROGRESS:
            return False
        if st < 0:
            warnings.warn("a gradsync.Request (%s), dropped %s, failed: %s"
                          % (self.what, "without a wait" if dropped else "while in flight",
                             _last_error(st)), RuntimeWarning, stacklevel=3)
        self.keep = self.pstatus = None
        return True


#: Dropped requests with no open owner; _reap_at_exit() tries them once more.
_ORPHANS: Deque[_Orphan] = collections.deque()


def reap(orphans: Deque[_Orphan]) -> None:
    """gs_test() each dropped request of @orphans (a deque) once and release the finished
    ones; never blocks. Safe from several threads (deque pops and appends are atomic)."""
    for _ in range(len(orphans)):
        try:
            o = orphans.popleft()
        except IndexError:
            return
        if not o.test():
            orphans.append(o)


def reap_closed(orphans: Deque[_Orphan]) -> None:
    """reap(), after the owner's destroy completed or cancelled everything it had: what
    still runs then (nothing should) moves to the module's list for the exit hook."""
    reap(orphans)
    while orphans:
        _ORPHANS.append(orphans.popleft())


@atexit.register
def _reap_at_exit() -> None:
    reap(_ORPHANS)
    if _ORPHANS:
        warnings.warn("%d dropped gradsync.Request(s) still in flight at exit (%s): their "
                      "buffers were never released" % (len(_ORPHANS), ", ".join(
                          o.what for o in _ORPHANS)), ResourceWarning)


def _all_comm(reqs: Sequence[Request]) -> bool:
    return all(isinstance(r, Request) and not r._ps for r in reqs)


def wait_all(reqs: Iterable[Request]) -> List[Optional[Status]]:
    """Wait for every request (even after one fails); raise the first error in list order.
    Returns the list of their results (Status for receives, else None)."""
    first: Optional[BaseException] = None
    out: List[Optional[Status]] = []
    for r in reqs:
        try:
            out.append(r.wait())
        except Exception as e:  # noqa: BLE001 - re-raised below
            out.append(None)
            if first is None:
                first = e
    if first is not None:
        raise first
    return out


def wait_any(reqs: Iterable[Request]) -> Tuple[Optional[int], Optional[Status]]:
    """Wait until one unfinished request finishes: (index, Status or None); raises its error.
    (None, None) when every request had already finished."""
    reqs = list(reqs)
    live = [i for i, r in enumerate(reqs) if not r._finished]
    if not live:
        return None, None
    if _all_comm(reqs):
        arr = (c_void_p * len(reqs))(*[r._h.value if not r._finished else None for r in reqs])
        idx = c_int(-1)
        st = LIB.gs_waitany(len(reqs), arr, byref(idx))
        err = _last_error(st) if st < 0 else None
        if idx.value < 0:
            if err is not None:
                raise err
            return None, None
        r = reqs[idx.value]
        with r._lock:
            r._complete(st, err)
        return idx.value, r._outcome()
    delay = 1e-5
    while True:
        for i in live:
            if reqs[i].done:
                return i, reqs[i]._outcome()
        time.sleep(delay)
        delay = min(delay * 2, 1e-3)


def test_all(reqs: Iterable[Request]) -> bool:
    """True when every request has finished (then raises the first error), else False;
    never blocks. With communicator requests only it is gs_testall(): when that reports
    an error it cannot say whose, and every request of the list then carries it."""
    reqs = list(reqs)
    if _all_comm(reqs) and any(not r._finished for r in reqs):
        arr = (c_void_p * len(reqs))(*[r._h.value if not r._finished else None for r in reqs])
        st = LIB.gs_testall(len(reqs), arr)
        if st == T.GS_INPROGRESS:
            return False
        err = _last_error(st) if st < 0 else None
        for r in reqs:
            with r._lock:
                if not r._finished:
                    r._complete(st, err)
        if err is not None:
            raise err
    elif not all(r.done for r in reqs):
        return False
    for r in reqs:
        r._outcome()
    return True


# --------------------------------------------------------------------------
# Groups of point-to-point calls
# --------------------------------------------------------------------------

_tls = threading.local()


def group_keep(keep: Any, pending_status: Optional[Tuple[T.P2PStatus, Status]] = None) -> bool:
    """Inside a group, hold @keep until the group ends; return True when in a group."""
    stack = getattr(_tls, "groups", None)
    if not stack:
        return False
    stack[-1].append((keep, pending_status))
    return True


def in_group() -> bool:
    """Whether this thread is inside a gradsync.group()."""
    return bool(getattr(_tls, "groups", None))


class group:
    """``with gradsync.group(): ...`` : gs_group_start()/gs_group_end() on this thread.

    send() and recv() inside only queue; the end posts them all and waits for
    every one (so their order never deadlocks). Statuses returned by recv()
    inside the group are filled when it ends. Groups nest.
    """

    def __enter__(self) -> group:
        check(LIB.gs_group_start())
        stack = getattr(_tls, "groups", None)
        if stack is None:
            stack = _tls.groups = []
        stack.append([])
        return self

    def __exit__(self, exc_type: Optional[Type[BaseException]], exc: Optional[BaseException],
                 tb: Optional[TracebackType]) -> Literal[False]:
        pending = _tls.groups.pop()
        st = LIB.gs_group_end()
        err = _last_error(st) if st < 0 else None
        if _tls.groups:
            # Nested: only the outermost end posts, so the outer group holds these.
            _tls.groups[-1].extend(pending)
        elif err is None:
            for keep, pst in pending:
                if pst is not None:
                    pst[1]._fill(pst[0])
        del pending
        if err is not None and exc_type is None:
            raise err
        return False
