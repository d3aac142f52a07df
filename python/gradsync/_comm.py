# SPDX-License-Identifier: Apache-2.0
"""gradsync.Communicator: the communicator, its collectives and point-to-point calls.

Each method resolves its buffers (gradsync._buffer), checks what the C call
cannot check from pointers alone (dtypes agree, an output is writable and
large enough, counts are not negative), then makes one C call with the GIL
released. Blocking calls return the output object; with async_op=True they
return a Request that holds every buffer until completion. Errors found on
the Python side are raised as the C library would raise them
(gradsync.InvalidArgument, status GS_ERR_INVALID_ARG), before any byte moves.
"""
from __future__ import annotations

import collections
import ctypes
import operator
import weakref
from typing import Any, Dict, List, Optional, Sequence, Tuple, Union

from ctypes import byref, c_int, c_size_t, c_void_p

from . import _types as T
from ._buffer import Buf, BufferLike, dtype_of, resolve
from ._compress import Codec, ErrorFeedback, codec_of
from ._lib import LIB, Error, Resource, check, invalid, make_error, query
from ._request import Request, Status, _Orphan, group_keep, reap, reap_closed

#: An op: a gradsync.Op or its name ("sum", "avg", ...). An algorithm: a gradsync.Algo, its
#: name ("ring", ...) or None (automatic).
OpLike = Union[str, T.Op]
AlgoLike = Union[None, str, T.Algo]

_OPS = {"sum": T.Op.SUM, "prod": T.Op.PROD, "min": T.Op.MIN, "max": T.Op.MAX,
        "avg": T.Op.AVG, "band": T.Op.BAND, "bor": T.Op.BOR, "bxor": T.Op.BXOR}
_ALGOS = {a.name.lower(): a for a in T.Algo}
_ALGOS.update({"recursive_doubling": T.Algo.RD, "hierarchical": T.Algo.HIER})
_INT_MIN, _INT_MAX = -(1 << 31), (1 << 31) - 1


def op_of(op: OpLike) -> T.Op:
    """A gs_op_t from an Op or its name ("sum", "prod", "min", "max", "avg", "band", ...)."""
    if isinstance(op, T.Op):
        return op
    if isinstance(op, str) and op.lower() in _OPS:
        return _OPS[op.lower()]
    raise invalid("op %r is unknown; one of %s" % (op, ", ".join(_OPS)))


def algo_of(algo: AlgoLike) -> T.Algo:
    """A gs_algo_t from an Algo, its name, or None (AUTO)."""
    if algo is None:
        return T.Algo.AUTO
    if isinstance(algo, T.Algo):
        return algo
    if isinstance(algo, str) and algo.lower() in _ALGOS:
        return _ALGOS[algo.lower()]
    raise invalid("algo %r is unknown; one of %s" % (algo, ", ".join(a.name.lower()
                                                                      for a in T.Algo)))


def _int(value: Any, what: str, lo: int = _INT_MIN, hi: int = _INT_MAX) -> int:
    try:
        v = operator.index(value)
    except TypeError:
        raise invalid("%s must be an integer, not %s" % (what, type(value).__name__)) from None
    if not lo <= v <= hi:
        raise invalid("%s %d is out of range [%d, %d]" % (what, v, lo, hi))
    return v


def _tag(tag: Any, fn: str) -> int:
    return _int(tag, "%s: tag" % fn, 0, (1 << 32) - 1)


def _counts(values: Optional[Sequence[int]], n: int,
            what: str) -> Tuple[Optional[ctypes.Array[c_size_t]], Optional[List[int]]]:
    """A size_t[n] from a sequence of n non-negative integers (None stays None)."""
    if values is None:
        return None, None
    values = list(values)
    if len(values) != n:
        raise invalid("%s has %d entries; the communicator has %d ranks" % (what, len(values), n))
    out = []
    for i, v in enumerate(values):
        try:
            v = operator.index(v)
        except TypeError:
            raise invalid("%s[%d] must be an integer, not %s"
                          % (what, i, type(v).__name__)) from None
        if v < 0:
            raise invalid("%s[%d] = %d is negative" % (what, i, v))
        if v >= 1 << 63:
            raise invalid("%s[%d] = %d is too large" % (what, i, v))
        out.append(v)
    return (c_size_t * n)(*out), out


def _same_dtype(a: Buf, b: Buf, fn: str, an: str = "buf", bn: str = "out") -> None:
    if a.dtype != b.dtype:
        raise invalid("%s: %s has dtype %s but %s has %s" % (fn, bn, b.dtype.name.lower(), an,
                                                             a.dtype.name.lower()))


def _coll_codec(fn: str, codec: Union[None, str, Codec],
                ef: Optional[ErrorFeedback]) -> Tuple[Optional[T.CollOpts], Any]:
    """gs_coll_opts_t with @codec and @ef for a compressed reduce-scatter(v) or all-gather(v),
    or None when neither is given (the plain call); and what it points to, kept alive with
    the call. The library checks the rest (a float dtype, the op, ef's size and dtype)."""
    codec = codec_of(codec)
    if ef is not None and not isinstance(ef, ErrorFeedback):
        raise invalid("%s: ef must be a gradsync.ErrorFeedback" % fn)
    if codec is None and ef is None:
        return None, None
    opts = T.sized(T.CollOpts)
    opts.codec = codec._ptr() if codec is not None else None
    opts.ef = ef._handle() if ef is not None else None
    return opts, (opts, codec, ef)


class Communicator(Resource):
    """A group of ranks (gs_comm_t).

    Communicator(): rank and size from the environment: GS_RANK/GS_WORLD_SIZE,
    torchrun's RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT, Open MPI or Slurm
    (gs_comm_init_env); with none set, a single rank. Keyword arguments set
    the gs_config_t fields and win over the environment: rank, size (or
    world_size), local_rank, master_addr, master_port, timeout_ms, transport,
    tcp_nsocks, socket_ifname, socket_family, slice_bytes, algo, job_id, shm,
    tcp_spin_us, tune, debug, debug_subsys, debug_file, stats_file, auth_token,
    auth_token_file, heartbeat_ms, tls, tls_cert, tls_key, tls_ca (docs/env.md describes
    each; the debug ones apply to the whole process).
    launcher=False ignores the launcher variables (gs_comm_init).

    Collective: every rank constructs it, with the same size. Use it as a
    context manager, or call close(); abort() from any thread fails every
    pending and later call with gradsync.Aborted.
    """

    _what = "communicator"

    _orphans: collections.deque[_Orphan]

    def __init__(self, rank: Optional[int] = None, size: Optional[int] = None,
                 master_addr: Optional[str] = None, master_port: Optional[int] = None,
                 timeout_ms: Optional[int] = None, *, launcher: bool = True,
                 **config: Any) -> None:
        if "world_size" in config:
            if size is not None and config["world_size"] != size:
                raise invalid("Communicator: size %r and world_size %r disagree"
                              % (size, config["world_size"]))
            size = config.pop("world_size")
        config.update(rank=rank, world_size=size, master_addr=master_addr,
                      master_port=master_port, timeout_ms=timeout_ms)
        cfg, keep = _make_config(config)
        h = c_void_p()
        fn = LIB.gs_comm_init_env if launcher else LIB.gs_comm_init
        check(fn(byref(h), byref(cfg)))
        del keep
        self._adopt(h.value)

    @classmethod
    def _wrap(cls, handle: Optional[int]) -> Communicator:
        self = cls.__new__(cls)
        self._adopt(handle)
        return self

    @classmethod
    def _borrow(cls, handle: int) -> Communicator:
        """A Communicator over a handle someone else owns (the torch 2.x backend's): close()
        and collection forget the handle and never destroy it; the owner must outlive it."""
        self = cls._wrap(handle)
        self._borrowed = True
        return self

    def _adopt(self, handle: Optional[int]) -> None:
        self._borrowed = False
        self._h = handle
        self._children: weakref.WeakSet[Resource] = weakref.WeakSet()
        self._orphans = collections.deque()  # Requests dropped in flight (_request._Orphan)
        r, s = c_int(), c_int()
        check(LIB.gs_comm_rank(handle, byref(r)))
        check(LIB.gs_comm_size(handle, byref(s)))
        self._rank, self._size = r.value, s.value

    # ---- lifetime ------------------------------------------------------

    def _handle(self) -> int:
        if self._orphans:  # every call first releases the dropped requests that finished
            reap(self._orphans)
        return super()._handle()

    @property
    def rank(self) -> int:
        """This process's rank, 0 .. size-1."""
        return self._rank

    @property
    def size(self) -> int:
        """Number of ranks."""
        return self._size

    @property
    def closed(self) -> bool:
        """True once close() has run."""
        return self._h is None

    def close(self) -> None:
        """Finish the submitted collectives, close the bucketers and parameter servers made
        on it, and free the communicator (gs_comm_destroy), which cancels point-to-point
        calls still in flight; then release the requests dropped in flight. Idempotent."""
        if self._h is None:
            return
        for child in list(self._children):
            try:
                child.close()
            except Exception:
                pass
        h, self._h = self._h, None
        if self._borrowed:
            reap_closed(self._orphans)
            return
        try:
            check(LIB.gs_comm_destroy(h))
        finally:
            reap_closed(self._orphans)

    def abort(self) -> None:
        """Every pending and later operation fails with gradsync.Aborted. Any thread."""
        check(LIB.gs_comm_abort(self._handle()))

    def __repr__(self) -> str:
        return "<gradsync.Communicator rank %d of %d%s>" % (
            self._rank, self._size, " (closed)" if self._h is None else "")

    def dup(self) -> Communicator:
        """A new communicator with the same ranks whose traffic never matches this one's.
        Collective."""
        h = c_void_p()
        check(LIB.gs_comm_dup(self._handle(), byref(h)))
        return Communicator._wrap(h.value)

    def split(self, color: int, key: int = 0) -> Optional[Communicator]:
        """Ranks passing the same color form a new communicator, ordered by (key, rank);
        a negative color takes part and gets None. Collective."""
        h = c_void_p()
        args = (self._handle(), _int(color, "split: color"), _int(key, "split: key"), byref(h))
        check(LIB.gs_comm_split(*args))
        return Communicator._wrap(h.value) if h.value else None

    def create_group(self, ranks: Sequence[int], tag: int = 0) -> Communicator:
        """A communicator of the listed ranks (increasing, this rank among them), created by
        those ranks alone: the others do not call (MPI_Comm_create_group). Groups created at
        the same time by overlapping ranks need different tags."""
        members = [_int(r, "create_group: ranks") for r in ranks]
        arr = (c_int * max(1, len(members)))(*members)
        h = c_void_p()
        check(LIB.gs_comm_create_group(self._handle(), len(members), arr,
                                       _int(tag, "create_group: tag") & 0xFFFFFFFF, byref(h)))
        return Communicator._wrap(h.value)

    def revoke(self) -> None:
        """Stop new work on this communicator and fail what is pending with
        gradsync.Revoked on every rank that hears of it (gs_comm_revoke); the connections
        stay up for shrink() and grow(). Any thread; returns at once."""
        check(LIB.gs_comm_revoke(self._handle()))

    def shrink(self) -> Communicator:
        """The survivors of a failure agree on who is gone and form a new communicator
        without them (gs_comm_shrink). Collective over the survivors."""
        h = c_void_p()
        check(LIB.gs_comm_shrink(self._handle(), byref(h)))
        return Communicator._wrap(h.value)

    def unique_id(self) -> bytes:
        """Rank 0 only: the id with which new ranks join this communicator (grow/join);
        gs_comm_get_unique_id. A new id makes the older ones stale."""
        buf = ctypes.create_string_buffer(T.UNIQUE_ID_BYTES)
        check(LIB.gs_comm_get_unique_id(self._handle(), buf))
        return buf.raw

    def grow(self, new_size: int, unique_id: Optional[bytes] = None) -> Communicator:
        """Admit new ranks (Communicator.join on their side) and return a communicator of
        new_size ranks, this rank keeping its rank (gs_comm_grow). Rank 0 passes the id of
        its unique_id(); the others may pass None. Collective over the old and new ranks."""
        buf = _unique_id_buf(unique_id) if unique_id is not None else None
        h = c_void_p()
        check(LIB.gs_comm_grow(self._handle(), _int(new_size, "grow: new_size"), buf, None,
                               byref(h)))
        return Communicator._wrap(h.value)

    @classmethod
    def join(cls, unique_id: bytes, new_size: int, rank: int, **config: Any) -> Communicator:
        """A new rank joins a communicator that grows to new_size ranks, as rank (old size ..
        new_size - 1), with rank 0's unique_id() (gs_comm_grow with no communicator).
        config: gs_config_t fields as for Communicator() (timeout_ms, auth_token, ...)."""
        config.update(rank=rank)
        cfg, keep = _make_config(config)
        h = c_void_p()
        check(LIB.gs_comm_grow(None, _int(new_size, "join: new_size"),
                               _unique_id_buf(unique_id), byref(cfg), byref(h)))
        del keep
        return cls._wrap(h.value)

    def async_error(self) -> Optional[Error]:
        """The sticky error of the communicator as a gradsync.Error, or None while healthy."""
        st = c_int()
        check(LIB.gs_comm_get_async_error(self._handle(), byref(st)))
        if st.value == T.GS_OK:
            return None
        return make_error(st.value, "the communicator failed earlier with %s"
                          % LIB.gs_strerror(st.value).decode())

    def counters(self) -> Dict[str, Any]:
        """Traffic counters (gs_counters_t) as a dict."""
        return T.struct_to_dict(query(LIB.gs_comm_counters, T.Counters, self._handle()))

    def stats(self) -> Dict[str, Any]:
        """Statistics (gs_comm_stats_t) as a dict; "coll" is a list indexed by gs_coll_type_t."""
        return T.struct_to_dict(query(LIB.gs_comm_stats, T.CommStats, self._handle()))

    def peer_stats(self, peer: int) -> Dict[str, Any]:
        """What this rank exchanged with @peer (gs_peer_stats_t) as a dict; "rails" lists
        the nrails TCP rails to it (ifname, up, bytes_sent, bytes_resent, rate_bps, share_ppm)."""
        d = T.struct_to_dict(query(LIB.gs_comm_peer_stats, T.PeerStats, self._handle(),
                                   _int(peer, "peer_stats: peer")))
        d["rails"] = d["rails"][:max(0, min(d["nrails"], T.RAILS_MAX))]
        return d

    # ---- helpers -------------------------------------------------------

    def _run(self, fn: str, args: Tuple[Any, ...], async_op: bool, keep: Any, result: Any,
             ifn: str = "", pstatus: Optional[T.P2PStatus] = None) -> Any:
        if async_op:
            req = Request(keep, result, pstatus=pstatus, owner=self, what=ifn)
            check(getattr(LIB, ifn)(*args, byref(req._h)))
            return req
        check(getattr(LIB, fn)(*args))
        return result

    def _io(self, fn: str, buf: BufferLike, out: Optional[BufferLike],
            inplace_ok: bool = True) -> Tuple[Buf, Buf]:
        """(send, recv) Bufs; out None means in place (buf is written)."""
        if out is None:
            if not inplace_ok:
                raise invalid("%s: out is required" % fn)
            s = resolve(buf, "%s: buf" % fn, writable=True)
            return s, s
        s = resolve(buf, "%s: buf" % fn)
        o = resolve(out, "%s: out" % fn, writable=True)
        _same_dtype(s, o, fn)
        return s, o

    # ---- collectives ---------------------------------------------------

    # The collectives return their output object, or a Request with async_op=True: "Any".

    def allreduce(self, buf: BufferLike, out: Optional[BufferLike] = None, op: OpLike = "sum",
                  codec: Union[None, str, Codec] = None, ef: Optional[ErrorFeedback] = None,
                  algo: AlgoLike = None, async_op: bool = False) -> Any:
        """out = op over every rank's buf (out None: in place). codec (a Codec or a kind name)
        and ef (an ErrorFeedback) compress; algo forces an algorithm. Returns out (buf in
        place) or, with async_op, a Request."""
        fn = "allreduce"
        s, o = self._io(fn, buf, out)
        if o.count != s.count:
            raise invalid("%s: out holds %d elements, buf %d" % (fn, o.count, s.count))
        opv = op_of(op)
        result = buf if out is None else out
        codec = codec_of(codec)
        if ef is not None and not isinstance(ef, ErrorFeedback):
            raise invalid("%s: ef must be a gradsync.ErrorFeedback" % fn)
        if codec is None and ef is None and algo is None:
            return self._run("gs_allreduce", (self._handle(), s.ptr, o.ptr, s.count, s.dtype,
                                              opv), async_op, (s.keep, o.keep), result,
                             "gs_iallreduce")
        opts = T.sized(T.AllreduceOpts)
        opts.algo = algo_of(algo)
        opts.codec = codec._ptr() if codec is not None else None
        opts.ef = ef._handle() if ef is not None else None
        return self._run("gs_allreduce_ex", (self._handle(), s.ptr, o.ptr, s.count, s.dtype,
                                             opv, byref(opts)), async_op,
                         (s.keep, o.keep, opts, codec, ef), result, "gs_iallreduce_ex")

    def broadcast(self, buf: BufferLike, root: int, async_op: bool = False) -> Any:
        """Every rank's buf = root's buf. Returns buf (or a Request)."""
        root = _int(root, "broadcast: root")
        b = resolve(buf, "broadcast: buf", writable=(root != self._rank))
        return self._run("gs_broadcast", (self._handle(), b.ptr, b.count, b.dtype, root),
                         async_op, b.keep, buf, "gs_ibroadcast")

    def reduce(self, buf: BufferLike, out: Optional[BufferLike] = None, op: OpLike = "sum",
               root: int = 0, async_op: bool = False) -> Any:
        """root's out = op over every rank's buf (out None: in place at the root; ignored
        elsewhere). Returns out (buf in place) or a Request."""
        fn = "reduce"
        root = _int(root, "reduce: root")
        if out is None and self._rank != root:
            s = resolve(buf, "%s: buf" % fn)
            o = None
        else:
            s, o = self._io(fn, buf, out)
            if o.count != s.count:
                raise invalid("%s: out holds %d elements, buf %d" % (fn, o.count, s.count))
        result = buf if out is None else out
        return self._run("gs_reduce", (self._handle(), s.ptr, o.ptr if o else None, s.count,
                                       s.dtype, op_of(op), root), async_op,
                         (s.keep, o.keep if o else None), result, "gs_ireduce")

    def allgather(self, buf: BufferLike, out: BufferLike, async_op: bool = False,
                  codec: Union[None, str, Codec] = None) -> Any:
        """out (size * len(buf) elements) = every rank's buf in rank order. codec (a Codec or
        a kind name; float dtypes, not topk or randk) compresses what moves; each rank's own
        block is copied exactly. All-gather takes no error feedback."""
        fn = "allgather"
        s, o = self._io(fn, buf, out, inplace_ok=False)
        if o.count != s.count * self._size:
            raise invalid("%s: out holds %d elements; it needs size * len(buf) = %d"
                          % (fn, o.count, s.count * self._size))
        opts, held = _coll_codec(fn, codec, None)
        if opts is None:
            return self._run("gs_allgather", (self._handle(), s.ptr, o.ptr, s.count, s.dtype),
                             async_op, (s.keep, o.keep), out, "gs_iallgather")
        return self._run("gs_allgather_ex", (self._handle(), s.ptr, o.ptr, s.count, s.dtype,
                                             byref(opts)), async_op, (s.keep, o.keep, held),
                         out, "gs_iallgather_ex")

    def gather(self, buf: BufferLike, out: Optional[BufferLike], root: int,
               async_op: bool = False) -> Any:
        """root's out (size * len(buf) elements) = every rank's buf in rank order; out is
        ignored elsewhere (may be None)."""
        fn = "gather"
        root = _int(root, "gather: root")
        s = resolve(buf, "%s: buf" % fn)
        o = None
        if self._rank == root or out is not None:
            if out is None:
                raise invalid("%s: out is required at the root" % fn)
            o = resolve(out, "%s: out" % fn, writable=True)
            _same_dtype(s, o, fn)
            if self._rank == root and o.count != s.count * self._size:
                raise invalid("%s: out holds %d elements; it needs size * len(buf) = %d"
                              % (fn, o.count, s.count * self._size))
        return self._run("gs_gather", (self._handle(), s.ptr, o.ptr if o else None, s.count,
                                       s.dtype, root), async_op,
                         (s.keep, o.keep if o else None), out, "gs_igather")

    def scatter(self, buf: Optional[BufferLike], out: BufferLike, root: int,
                async_op: bool = False) -> Any:
        """Block j of root's buf (size blocks of len(out)) goes to rank j's out; buf is
        ignored elsewhere (may be None)."""
        fn = "scatter"
        root = _int(root, "scatter: root")
        o = resolve(out, "%s: out" % fn, writable=True)
        s = None
        if self._rank == root or buf is not None:
            if buf is None:
                raise invalid("%s: buf is required at the root" % fn)
            s = resolve(buf, "%s: buf" % fn)
            _same_dtype(s, o, fn)
            if self._rank == root and s.count != o.count * self._size:
                raise invalid("%s: buf holds %d elements; it needs size * len(out) = %d"
                              % (fn, s.count, o.count * self._size))
        return self._run("gs_scatter", (self._handle(), s.ptr if s else None, o.ptr, o.count,
                                        o.dtype, root), async_op,
                         (s.keep if s else None, o.keep), out, "gs_iscatter")

    def reduce_scatter(self, buf: BufferLike, out: BufferLike, op: OpLike = "sum",
                       async_op: bool = False, codec: Union[None, str, Codec] = None,
                       ef: Optional[ErrorFeedback] = None) -> Any:
        """out = block rank of op over every rank's buf (size * len(out) elements). codec (a
        Codec or a kind name; float dtypes, op sum or avg) and ef (an ErrorFeedback made for
        len(buf) elements of buf's dtype) compress, as allreduce's do."""
        fn = "reduce_scatter"
        s, o = self._io(fn, buf, out, inplace_ok=False)
        if s.count != o.count * self._size:
            raise invalid("%s: buf holds %d elements; it needs size * len(out) = %d"
                          % (fn, s.count, o.count * self._size))
        opts, held = _coll_codec(fn, codec, ef)
        if opts is None:
            return self._run("gs_reduce_scatter", (self._handle(), s.ptr, o.ptr, o.count,
                                                   o.dtype, op_of(op)), async_op,
                             (s.keep, o.keep), out, "gs_ireduce_scatter")
        return self._run("gs_reduce_scatter_ex", (self._handle(), s.ptr, o.ptr, o.count,
                                                  o.dtype, op_of(op), byref(opts)), async_op,
                         (s.keep, o.keep, held), out, "gs_ireduce_scatter_ex")

    def reduce_scatterv(self, buf: BufferLike, out: BufferLike, counts: Sequence[int],
                        op: OpLike = "sum", async_op: bool = False,
                        codec: Union[None, str, Codec] = None,
                        ef: Optional[ErrorFeedback] = None) -> Any:
        """out (counts[rank] elements) = block rank of op over every rank's buf, whose blocks
        are counts[0], counts[1], ... elements packed in rank order. codec and ef as for
        reduce_scatter (ef made for sum(counts) elements)."""
        fn = "reduce_scatterv"
        opts, held = _coll_codec(fn, codec, ef)
        s, o = self._io(fn, buf, out, inplace_ok=False)
        carr, cl = _counts(counts, self._size, "%s: counts" % fn)
        if cl is None:
            raise invalid("%s: counts is required" % fn)
        if s.count < sum(cl):
            raise invalid("%s: buf holds %d elements; the counts add up to %d"
                          % (fn, s.count, sum(cl)))
        if o.count < cl[self._rank]:
            raise invalid("%s: out holds %d elements; counts[%d] is %d"
                          % (fn, o.count, self._rank, cl[self._rank]))
        if opts is not None:
            return self._run("gs_reduce_scatterv_ex", (self._handle(), s.ptr, o.ptr, carr,
                                                       s.dtype, op_of(op), byref(opts)),
                             async_op, (s.keep, o.keep, carr, held), out,
                             "gs_ireduce_scatterv_ex")
        return self._run("gs_reduce_scatterv", (self._handle(), s.ptr, o.ptr, carr, s.dtype,
                                                op_of(op)), async_op, (s.keep, o.keep, carr),
                         out, "gs_ireduce_scatterv")

    def allgatherv(self, buf: BufferLike, out: BufferLike, counts: Sequence[int],
                   displs: Optional[Sequence[int]] = None, async_op: bool = False,
                   codec: Union[None, str, Codec] = None) -> Any:
        """Rank r's buf (counts[r] elements) lands at out[displs[r]:] on every rank; displs
        None packs the blocks in rank order. codec as for allgather."""
        fn = "allgatherv"
        opts, held = _coll_codec(fn, codec, None)
        s, o = self._io(fn, buf, out, inplace_ok=False)
        carr, _ = _counts(counts, self._size, "%s: counts" % fn)
        darr, _ = _counts(displs, self._size, "%s: displs" % fn)
        if opts is not None:
            return self._run("gs_allgatherv_ex", (self._handle(), s.ptr, s.count, o.ptr,
                                                  o.count, carr, darr, s.dtype, byref(opts)),
                             async_op, (s.keep, o.keep, carr, darr, held), out,
                             "gs_iallgatherv_ex")
        return self._run("gs_allgatherv", (self._handle(), s.ptr, s.count, o.ptr, o.count, carr,
                                           darr, s.dtype), async_op,
                         (s.keep, o.keep, carr, darr), out, "gs_iallgatherv")

    def alltoall(self, buf: BufferLike, out: BufferLike, async_op: bool = False) -> Any:
        """Block j of buf (size equal blocks) goes to rank j, stored as block rank of its out."""
        fn = "alltoall"
        s, o = self._io(fn, buf, out, inplace_ok=False)
        if s.count % self._size or o.count != s.count:
            raise invalid("%s: buf (%d elements) must be size (%d) equal blocks and out as "
                          "large (%d)" % (fn, s.count, self._size, o.count))
        return self._run("gs_alltoall", (self._handle(), s.ptr, o.ptr, s.count // self._size,
                                         s.dtype), async_op, (s.keep, o.keep), out,
                         "gs_ialltoall")

    def alltoallv(self, buf: BufferLike, out: BufferLike, send_counts: Sequence[int],
                  recv_counts: Sequence[int], send_displs: Optional[Sequence[int]] = None,
                  recv_displs: Optional[Sequence[int]] = None, async_op: bool = False) -> Any:
        """send_counts[j] elements at buf[send_displs[j]:] go to rank j, which stores them at
        out[recv_displs[rank]:]; displs None packs in rank order. Not in place."""
        fn = "alltoallv"
        s, o = self._io(fn, buf, out, inplace_ok=False)
        sc, _ = _counts(send_counts, self._size, "%s: send_counts" % fn)
        rc, _ = _counts(recv_counts, self._size, "%s: recv_counts" % fn)
        sd, _ = _counts(send_displs, self._size, "%s: send_displs" % fn)
        rd, _ = _counts(recv_displs, self._size, "%s: recv_displs" % fn)
        return self._run("gs_alltoallv", (self._handle(), s.ptr, s.count, sc, sd, o.ptr, o.count,
                                          rc, rd, s.dtype), async_op,
                         (s.keep, o.keep, sc, rc, sd, rd), out, "gs_ialltoallv")

    def barrier(self, async_op: bool = False) -> Optional[Request]:
        """Return once every rank has entered the barrier."""
        return self._run("gs_barrier", (self._handle(),), async_op, None, None, "gs_ibarrier")

    # ---- point-to-point ------------------------------------------------

    def send(self, buf: BufferLike, peer: int, tag: int = 0) -> None:
        """Send buf to rank peer with tag; returns when buf may be reused (inside a group():
        at once, the group's end sends it)."""
        b = resolve(buf, "send: buf")
        args = (self._handle(), b.ptr, b.count, b.dtype, _int(peer, "send: peer"),
                _tag(tag, "send"))
        check(LIB.gs_send(*args))
        group_keep(b.keep)

    def recv(self, buf: BufferLike, peer: int = T.ANY_SOURCE, tag: int = 0) -> Status:
        """Receive at most len(buf) elements from peer (or ANY_SOURCE) with tag; returns
        Status(source, tag, count). Inside a group() the Status fills in when it ends."""
        b = resolve(buf, "recv: buf", writable=True)
        pst = T.P2PStatus()
        args = (self._handle(), b.ptr, b.count, b.dtype, _int(peer, "recv: peer"),
                _tag(tag, "recv"), byref(pst))
        check(LIB.gs_recv_status(*args))
        st = Status()
        if group_keep(b.keep, (pst, st)):
            return st
        st._fill(pst)
        return st

    def isend(self, buf: BufferLike, peer: int, tag: int = 0) -> Request:
        """Start a send; returns a Request."""
        b = resolve(buf, "isend: buf")
        h, peer, tag = self._handle(), _int(peer, "isend: peer"), _tag(tag, "isend")
        req = Request(b.keep, None, owner=self, what="gs_isend to %d, tag %d" % (peer, tag))
        check(LIB.gs_isend(h, b.ptr, b.count, b.dtype, peer, tag, byref(req._h)))
        return req

    def irecv(self, buf: BufferLike, peer: int = T.ANY_SOURCE, tag: int = 0) -> Request:
        """Start a receive; returns a Request whose wait() gives the Status."""
        b = resolve(buf, "irecv: buf", writable=True)
        pst = T.P2PStatus()
        h, peer, tag = self._handle(), _int(peer, "irecv: peer"), _tag(tag, "irecv")
        req = Request(b.keep, buf, pstatus=pst, owner=self,
                      what="gs_irecv from %d, tag %d" % (peer, tag))
        check(LIB.gs_irecv_status(h, b.ptr, b.count, b.dtype, peer, tag, byref(pst),
                                  byref(req._h)))
        return req

    def probe(self, peer: int = T.ANY_SOURCE, tag: int = 0, dtype: Any = "uint8") -> Status:
        """Wait until a message from peer with tag can be received; Status with count in
        elements of dtype (bytes by default). Does not receive it."""
        pst = T.P2PStatus()
        args = (self._handle(), _int(peer, "probe: peer"), _tag(tag, "probe"), dtype_of(dtype),
                byref(pst))
        check(LIB.gs_probe(*args))
        return Status.from_c(pst)

    def iprobe(self, peer: int = T.ANY_SOURCE, tag: int = 0,
               dtype: Any = "uint8") -> Optional[Status]:
        """probe() without waiting: a Status, or None when no such message has arrived."""
        pst = T.P2PStatus()
        flag = c_int(0)
        args = (self._handle(), _int(peer, "iprobe: peer"), _tag(tag, "iprobe"), dtype_of(dtype),
                byref(flag), byref(pst))
        check(LIB.gs_iprobe(*args))
        return Status.from_c(pst) if flag.value else None


def _unique_id_buf(unique_id: Any) -> Any:
    """A gs_unique_id_t buffer from the bytes of Communicator.unique_id()."""
    if not isinstance(unique_id, (bytes, bytearray)) or len(unique_id) != T.UNIQUE_ID_BYTES:
        raise invalid("grow/join: the id must be the %d bytes of Communicator.unique_id(), not %r"
                      % (T.UNIQUE_ID_BYTES, type(unique_id).__name__))
    return ctypes.create_string_buffer(bytes(unique_id), T.UNIQUE_ID_BYTES)


def _make_config(fields: Dict[str, Any]) -> Tuple[T.Config, List[bytes]]:
    """A gs_config_t from keyword arguments (None: unset), and the bytes it points to."""
    cfg = T.Config()
    types = {f[0]: f[1] for f in T.Config._fields_
             if f[0] not in ("size", "version", "abort_flag")}
    for name, ctype in types.items():
        if ctype is ctypes.c_int:  # a library older than this struct leaves these alone
            setattr(cfg, name, T.UNSET)
    check(LIB.gs_config_init_v(byref(cfg), T.HEADER_VERSION, ctypes.sizeof(cfg)))
    keep = []
    for name, value in fields.items():
        if name not in types:
            raise TypeError("Communicator() got an unknown keyword argument %r; the gs_config_t "
                            "fields are: size (world size), %s" % (name, ", ".join(types)))
        if value is None:
            continue
        if types[name] is ctypes.c_char_p:
            if not isinstance(value, (str, bytes)):
                raise invalid("Communicator: %s must be a string, not %s"
                              % (name, type(value).__name__))
            value = value.encode() if isinstance(value, str) else value
            keep.append(value)
        else:
            value = _int(value, "Communicator: %s" % name)
        setattr(cfg, name, value)
    return cfg, keep
