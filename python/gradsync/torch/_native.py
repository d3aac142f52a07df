# SPDX-License-Identifier: Apache-2.0
"""Thin ctypes layer over libgradsync for the PyTorch integration.

This file binds the C calls that gradsync.torch needs and nothing else:
communicator lifetime, the non-blocking collectives and point-to-point calls
on *contiguous CPU torch tensors*, codecs and error feedback, and a
completion thread that turns gradsync requests into torch futures.

It deliberately does not depend on the general ``gradsync`` Python package
(python/gradsync/*.py): the backend and the DDP hook pass
``tensor.data_ptr()`` straight to C with no copy and no buffer-protocol
round trip, and they must keep working while that package changes. It does
not validate what C validates (counts, roots, peers): C's status and
gs_last_error() sentence are raised as GradsyncError.
"""

import ctypes
import ctypes.util
import os
import queue
import threading

import torch

# Values from include/gradsync/types.h, compress.h and status.h (stable rows).
DTYPES = {
    torch.float32: 0,
    torch.float64: 1,
    torch.float16: 2,
    torch.bfloat16: 3,
    torch.int8: 4,
    torch.uint8: 5,
    torch.bool: 5,  # one byte, 0 or 1: min, max, band, bor, bxor stay 0/1
    torch.int32: 6,
    torch.int64: 7,
}
FLOAT_DTYPES = (torch.float32, torch.float64, torch.float16, torch.bfloat16)
OPS = {"sum": 0, "prod": 1, "min": 2, "max": 3, "avg": 4, "band": 5, "bor": 6, "bxor": 7}
CODECS = {"none": 0, "fp16": 1, "bf16": 2, "int8": 3, "qsgd": 4, "sign": 5, "topk": 6, "randk": 7}
ANY_SOURCE = -1
GS_OK = 0
GS_INPROGRESS = 1
GS_UNSET = -2147483648


class GradsyncError(RuntimeError):
    """A gradsync call failed: .status (negative code), .name, .message."""

    def __init__(self, status, name, message):
        super().__init__("%s (%d): %s" % (name, status, message))
        self.status = status
        self.name = name
        self.message = message


class _Config(ctypes.Structure):
    _fields_ = [
        ("size", ctypes.c_size_t),
        ("version", ctypes.c_uint),
        ("rank", ctypes.c_int),
        ("world_size", ctypes.c_int),
        ("local_rank", ctypes.c_int),
        ("master_addr", ctypes.c_char_p),
        ("master_port", ctypes.c_int),
        ("timeout_ms", ctypes.c_int),
        ("transport", ctypes.c_char_p),
        ("tcp_nsocks", ctypes.c_int),
        ("socket_ifname", ctypes.c_char_p),
        ("socket_family", ctypes.c_char_p),
        ("slice_bytes", ctypes.c_int),
        ("algo", ctypes.c_char_p),
        ("job_id", ctypes.c_char_p),
    ]


class _CodecConfig(ctypes.Structure):
    _fields_ = [
        ("size", ctypes.c_size_t),
        ("kind", ctypes.c_int),
        ("block_size", ctypes.c_int),
        ("ratio", ctypes.c_double),
        ("levels", ctypes.c_int),
        ("seed", ctypes.c_uint64),
        ("zstd", ctypes.c_int),
        ("zstd_level", ctypes.c_int),
    ]


class _AllreduceOpts(ctypes.Structure):
    _fields_ = [
        ("size", ctypes.c_size_t),
        ("algo", ctypes.c_int),
        ("codec", ctypes.POINTER(_CodecConfig)),
        ("ef", ctypes.c_void_p),
        ("stream", ctypes.c_void_p),
        ("flags", ctypes.c_uint),
    ]


class _P2PStatus(ctypes.Structure):
    _fields_ = [("source", ctypes.c_int), ("tag", ctypes.c_uint32), ("count", ctypes.c_size_t)]


_lib = None
_lib_lock = threading.Lock()


def _candidates():
    env = os.environ.get("GRADSYNC_LIBRARY")
    if env:
        return [env]
    try:  # the library the gradsync package found (next to it, or on the loader path)
        import gradsync

        return [gradsync.library_path()]
    except Exception:
        pass
    here = os.path.dirname(os.path.abspath(__file__))
    root = os.path.normpath(os.path.join(here, "..", "..", ".."))
    found = ctypes.util.find_library("gradsync")
    return [p for p in (os.path.join(root, "build", "libgradsync.so"), found) if p]


def lib():
    """Load libgradsync once (GRADSYNC_LIBRARY, else <repo>/build, else the linker path)."""
    global _lib
    with _lib_lock:
        if _lib is not None:
            return _lib
        errors = []
        for path in _candidates():
            try:
                handle = ctypes.CDLL(path)
                break
            except OSError as exc:
                errors.append("%s: %s" % (path, exc))
        else:
            raise ImportError("libgradsync not found; set GRADSYNC_LIBRARY (tried %s)"
                              % ("; ".join(errors) or "nothing"))
        handle.gs_last_error.restype = ctypes.c_char_p
        handle.gs_status_name.restype = ctypes.c_char_p
        handle.gs_status_name.argtypes = [ctypes.c_int]
        handle.gs_version.restype = ctypes.c_uint
        _lib = handle
        return _lib


def _fn(name):
    """A C entry point, or a clear error naming it when this libgradsync lacks it."""
    try:
        return getattr(lib(), name)
    except AttributeError:
        raise NotImplementedError("%s is not exported by the loaded libgradsync (%s)"
                                  % (name, os.environ.get("GRADSYNC_LIBRARY", "default path")))


def check(status):
    if status != GS_OK and status != GS_INPROGRESS:
        msg = (lib().gs_last_error() or b"").decode("utf-8", "replace")
        name = (lib().gs_status_name(status) or b"?").decode()
        raise GradsyncError(status, name, msg)
    return status


def dtype_of(tensor):
    try:
        return DTYPES[tensor.dtype]
    except KeyError:
        raise ValueError("gradsync: dtype %s is not supported (float32/64, float16, bfloat16, "
                         "int8, uint8, bool, int32, int64 are)" % tensor.dtype)


def ptr(tensor):
    return ctypes.c_void_p(tensor.data_ptr())


class Codec:
    """A codec configuration (include/gradsync/compress.h); kind as in CODECS."""

    def __init__(self, kind="int8", block_size=None, ratio=None, levels=None, seed=0):
        if kind not in CODECS:
            raise ValueError("gradsync: unknown codec %r (one of %s)" % (kind, ", ".join(CODECS)))
        self.kind = kind
        self.cfg = _CodecConfig(ctypes.sizeof(_CodecConfig), CODECS[kind],
                                GS_UNSET if block_size is None else int(block_size),
                                float(GS_UNSET) if ratio is None else float(ratio),
                                GS_UNSET if levels is None else int(levels), int(seed), 0, GS_UNSET)

    @property
    def lossy(self):
        return self.kind != "none"


class ErrorFeedback:
    """Error-feedback residual of one tensor of @count elements (gs_ef_t)."""

    def __init__(self, count, dtype):
        self.count = int(count)
        self.dtype = dtype
        handle = ctypes.c_void_p()
        check(_fn("gs_ef_create")(ctypes.c_size_t(self.count), ctypes.c_int(dtype_of_t(dtype)),
                                  ctypes.byref(handle)))
        self.handle = handle

    def reset(self):
        check(_fn("gs_ef_reset")(self.handle))

    def close(self):
        if self.handle is not None and _lib is not None:
            _lib.gs_ef_destroy(self.handle)
        self.handle = None

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass


def dtype_of_t(torch_dtype):
    return DTYPES[torch_dtype]


class _Pending:
    __slots__ = ("req", "future", "result", "keep", "after")

    def __init__(self, req, future, result, keep, after):
        self.req = req
        self.future = future
        self.result = result
        self.keep = keep
        self.after = after


def _unpack(fut):
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

    def __init__(self, name):
        self._queue = queue.SimpleQueue()
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    def submit(self, req, future, result, keep=None, after=None):
        self._queue.put(_Pending(req, future, result, keep, after))

    def _run(self):
        wait = lib().gs_wait
        while True:
            item = self._queue.get()
            if item is None:
                return
            try:
                check(wait(ctypes.byref(item.req)))
                if item.after is not None:
                    item.after()
            except BaseException as exc:  # handed to whoever waits on the future
                item.future.set_result((False, exc))
            else:
                item.future.set_result((True, item.result))
            item.keep = None

    def stop(self):
        self._queue.put(None)
        self._thread.join()


class Comm:
    """A gradsync communicator (gs_comm_t) plus its completion thread.

    Every i* method starts a non-blocking gradsync call on contiguous CPU
    tensors and returns a torch.futures.Future completed (with @result) by
    the completion thread; @keep holds objects (tensors, options) alive until
    then, @after runs on the completion thread before the future completes
    (copy-out of staged buffers). With sync=True (the caller will wait at
    once) the call instead waits on the calling thread, raises its error
    there, and returns a completed future."""

    @classmethod
    def borrow(cls, communicator):
        """Wrap a gradsync.Communicator's handle (it stays the owner: close() here only
        stops this wrapper's completion thread)."""
        self = cls.__new__(cls)
        self.handle = ctypes.c_void_p(communicator._handle().value
                                      if isinstance(communicator._handle(), ctypes.c_void_p)
                                      else communicator._handle())
        self.rank = int(communicator.rank)
        self.size = int(communicator.size)
        self.owned = False
        self.completer = Completer("gradsync-completion-%d" % self.rank)
        return self

    def __init__(self, rank, size, master_addr, master_port, timeout_ms=None, job_id=None):
        self.owned = True
        cfg = _Config()
        check(_fn("gs_config_init_v")(ctypes.byref(cfg), lib().gs_version(),
                                      ctypes.c_size_t(ctypes.sizeof(_Config))))
        cfg.rank = int(rank)
        cfg.world_size = int(size)
        self._addr = master_addr.encode()
        cfg.master_addr = self._addr
        cfg.master_port = int(master_port)
        if timeout_ms is not None:
            cfg.timeout_ms = int(timeout_ms)
        if job_id is not None:
            self._job = job_id.encode()
            cfg.job_id = self._job
        handle = ctypes.c_void_p()
        check(_fn("gs_comm_init")(ctypes.byref(handle), ctypes.byref(cfg)))
        self.handle = handle
        self.rank = int(rank)
        self.size = int(size)
        self.completer = Completer("gradsync-completion-%d" % self.rank)

    def close(self):
        if self.handle is None:
            return
        self.completer.stop()
        handle, self.handle = self.handle, None
        if self.owned:
            lib().gs_comm_destroy(handle)

    def _start(self, name, args, result, keep=None, after=None, sync=False):
        req = ctypes.c_void_p()
        check(_fn(name)(self.handle, *args, ctypes.byref(req)))
        if sync:
            # The caller waits at once: wait here (the GIL is released inside gs_wait) and
            # raise any error to it directly, with no hand-off to the completion thread.
            check(lib().gs_wait(ctypes.byref(req)))
            if after is not None:
                after()
            fut = torch.futures.Future()
            fut.set_result(result)
            return fut
        # NOTE: Future.set_exception only marks the Python wrapper; C++ readers of the
        # future (DDP's reducer, Work.get_future()) would see the exception as a value.
        # A callback that raises puts the child future in C++'s error state instead.
        base = torch.futures.Future()
        self.completer.submit(req, base, result, (keep, args), after)
        return base.then(_unpack)

    # --- collectives: every buffer a contiguous CPU tensor --------------------------

    def iallreduce(self, t, op, codec=None, ef=None, result=None, after=None, sync=False):
        dt = dtype_of(t)
        if result is None:
            result = t
        if codec is None and ef is None:
            return self._start("gs_iallreduce", (ptr(t), ptr(t), ctypes.c_size_t(t.numel()),
                                                 dt, op), result, t, after, sync=sync)
        opts = _AllreduceOpts(ctypes.sizeof(_AllreduceOpts), 0,
                              ctypes.pointer(codec.cfg) if codec is not None else None,
                              ef.handle if ef is not None else None, None, 0)
        return self._start("gs_iallreduce_ex",
                           (ptr(t), ptr(t), ctypes.c_size_t(t.numel()), dt, op,
                            ctypes.byref(opts)), result, (t, opts, codec, ef), after, sync=sync)

    def ibroadcast(self, t, root, result=None, after=None, sync=False):
        return self._start("gs_ibroadcast", (ptr(t), ctypes.c_size_t(t.numel()), dtype_of(t),
                                             int(root)), result, t, after, sync=sync)

    def ireduce(self, t, op, root, result=None, after=None, sync=False):
        """In place: t holds this rank's input, and the result at the root."""
        return self._start("gs_ireduce", (ptr(t), ptr(t), ctypes.c_size_t(t.numel()),
                                          dtype_of(t), op, int(root)), result, t, after, sync=sync)

    def iallgather(self, send, recv, result=None, after=None, sync=False):
        return self._start("gs_iallgather", (ptr(send), ptr(recv), ctypes.c_size_t(send.numel()),
                                             dtype_of(send)), result, (send, recv), after,
                           sync=sync)

    def igather(self, send, recv, root, result=None, after=None, sync=False):
        rp = ptr(recv) if recv is not None else None
        return self._start("gs_igather", (ptr(send), rp, ctypes.c_size_t(send.numel()),
                                          dtype_of(send), int(root)), result, (send, recv), after,
                           sync=sync)

    def iscatter(self, send, recv, root, result=None, after=None, sync=False):
        sp = ptr(send) if send is not None else None
        return self._start("gs_iscatter", (sp, ptr(recv), ctypes.c_size_t(recv.numel()),
                                           dtype_of(recv), int(root)), result, (send, recv),
                           after, sync=sync)

    def ireduce_scatter(self, send, recv, op, result=None, after=None, sync=False):
        return self._start("gs_ireduce_scatter", (ptr(send), ptr(recv),
                                                  ctypes.c_size_t(recv.numel()), dtype_of(recv),
                                                  op), result, (send, recv), after, sync=sync)

    def ialltoall(self, send, recv, result=None, after=None, sync=False):
        return self._start("gs_ialltoall", (ptr(send), ptr(recv),
                                            ctypes.c_size_t(send.numel() // self.size),
                                            dtype_of(send)), result, (send, recv), after,
                           sync=sync)

    def ialltoallv(self, send, scounts, sdispls, recv, rcounts, rdispls, result=None,
                   after=None, sync=False):
        arr = ctypes.c_size_t * self.size
        sc, sd, rc, rd = arr(*scounts), arr(*sdispls), arr(*rcounts), arr(*rdispls)
        return self._start("gs_ialltoallv",
                           (ptr(send), ctypes.c_size_t(send.numel()), sc, sd, ptr(recv),
                            ctypes.c_size_t(recv.numel()), rc, rd, dtype_of(send)),
                           result, (send, recv, sc, sd, rc, rd), after, sync=sync)

    def ibarrier(self, result=None, sync=False):
        return self._start("gs_ibarrier", (), result, sync=sync)

    # --- point-to-point: requests waited for by their owner -------------------------

    def isend(self, t, peer, tag):
        req = ctypes.c_void_p()
        check(_fn("gs_isend")(self.handle, ptr(t), ctypes.c_size_t(t.numel()), dtype_of(t),
                              int(peer), ctypes.c_uint32(tag), ctypes.byref(req)))
        return P2PRequest(req, t, None)

    def irecv(self, t, peer, tag):
        """Receive exactly t.numel() elements from @peer (ANY_SOURCE allowed); the request's
        .source says who sent."""
        req = ctypes.c_void_p()
        status = _P2PStatus(-1, 0, 0)
        check(_fn("gs_irecv_status")(self.handle, ptr(t), ctypes.c_size_t(t.numel()),
                                     dtype_of(t), int(peer), ctypes.c_uint32(tag),
                                     ctypes.byref(status), ctypes.byref(req)))
        return P2PRequest(req, t, status, expect=t.numel())


class P2PRequest:
    """A point-to-point gs_request_t: wait() / test(); .source after a receive."""

    def __init__(self, req, tensor, status, expect=None):
        self.req = req
        self.tensor = tensor
        self.status = status
        self.expect = expect
        self.done = False
        self.lock = threading.Lock()

    def _finish(self, rc):
        self.done = True
        self.tensor = None
        check(rc)
        if self.status is not None and self.status.count != self.expect:
            raise GradsyncError(-1, "GS_ERR_MISMATCH", "received %d elements, expected %d"
                                % (self.status.count, self.expect))

    def wait(self):
        with self.lock:
            if not self.done:
                self._finish(lib().gs_wait(ctypes.byref(self.req)))
        return True

    def test(self):
        with self.lock:
            if self.done:
                return True
            rc = lib().gs_test(ctypes.byref(self.req))
            if rc == GS_INPROGRESS:
                return False
            self._finish(rc)
            return True

    @property
    def source(self):
        return self.status.source if self.status is not None else -1
