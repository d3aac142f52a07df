# SPDX-License-Identifier: Apache-2.0
"""gradsync.ParameterServer: a thin class over the parameter server (gradsync/ps.h,
gs_ps_*). The C header holds the full contract; this only holds on to the
Python objects the C side points into (pending pushes and pulls) for as long
as the C side may touch them.
"""
from __future__ import annotations

import collections
import operator

from ctypes import byref, c_void_p
from typing import TYPE_CHECKING, Any, Dict, Optional, Union

from . import _types as T
from ._buffer import BufferLike, dtype_of, resolve
from ._comm import _int
from ._compress import Codec, codec_of
from ._lib import LIB, Resource, check, invalid, query
from ._request import Request, _Orphan, reap, reap_closed

if TYPE_CHECKING:
    from ._comm import Communicator


def _opt_int(v: Optional[int], what: str) -> int:
    return T.UNSET if v is None else _int(v, what)


def _opt_real(v: Optional[float]) -> float:
    return float(T.UNSET) if v is None else float(v)


_MODES = {"bsp": T.PSConsistency.BSP, "ssp": T.PSConsistency.SSP, "asp": T.PSConsistency.ASP}
_RULES = {"sgd": T.PSRule.SGD, "adam": T.PSRule.ADAM}


class ParameterServer(Resource):
    """A parameter server over comm's ranks (gs_ps_t). Collective to create.

    ParameterServer(comm, mode="bsp"|"ssp"|"asp", staleness=None, servers=None,
                    rule="sgd"|"adam", lr=None, momentum=None, weight_decay=None,
                    beta1=None, beta2=None, eps=None, codec=None, split_bytes=None,
                    timeout_ms=None); None takes the library default (ps.h).
    register(key, initial) is collective (initial: rank 0's values define the
    key; other ranks pass a buffer of the same length and dtype, or count= and
    dtype=). push(key, grad) and pull(key, out) return Requests; clock() ends
    this worker's iteration; close() is collective.
    """

    _what = "parameter server"

    def __init__(self, comm: Communicator, mode: Union[str, int] = "bsp",
                 staleness: Optional[int] = None, servers: Optional[int] = None,
                 rule: Union[str, int] = "sgd", lr: Optional[float] = None,
                 momentum: Optional[float] = None, weight_decay: Optional[float] = None,
                 beta1: Optional[float] = None, beta2: Optional[float] = None,
                 eps: Optional[float] = None, codec: Union[None, str, Codec] = None,
                 split_bytes: Optional[int] = None, timeout_ms: Optional[int] = None) -> None:
        o = self._opts = T.sized(T.PSOpts)
        m = _MODES.get(mode.lower(), mode) if isinstance(mode, str) else mode
        if not isinstance(m, int):
            raise invalid("ParameterServer: mode %r is not one of %s" % (mode, ", ".join(_MODES)))
        o.consistency = m
        r = _RULES.get(rule.lower(), rule) if isinstance(rule, str) else rule
        if not isinstance(r, int) or r == T.PSRule.CALLBACK:
            raise invalid("ParameterServer: rule %r is not one of %s (a Python callback rule "
                          "is not supported)" % (rule, ", ".join(_RULES)))
        o.rule = r
        o.staleness = _opt_int(staleness, "staleness")
        o.servers = _opt_int(servers, "servers")
        o.lr, o.momentum, o.weight_decay = _opt_real(lr), _opt_real(momentum), _opt_real(
            weight_decay)
        o.beta1, o.beta2, o.eps = _opt_real(beta1), _opt_real(beta2), _opt_real(eps)
        o.update_fn = None
        o.user = None
        self._codec = codec_of(codec)
        o.codec = self._codec._ptr() if self._codec is not None else None
        o.split_bytes = T.UNSET if split_bytes is None else operator.index(split_bytes)
        o.timeout_ms = _opt_int(timeout_ms, "timeout_ms")
        h = c_void_p()
        check(LIB.gs_ps_create(comm._handle(), byref(o), byref(h)))
        self._h = h.value
        self._comm = comm
        # Requests dropped in flight (_request._Orphan).
        self._orphans: collections.deque[_Orphan] = collections.deque()
        comm._children.add(self)

    def _handle(self) -> int:
        if self._orphans:  # every call first releases the dropped requests that finished
            reap(self._orphans)
        return super()._handle()

    def register(self, key: int, initial: Optional[BufferLike] = None, count: Optional[int] = None,
                 dtype: Any = None) -> None:
        """Register key (collective, same order on every rank) from rank 0's initial values."""
        key = _int(key, "register: key", 0, (1 << 64) - 1)
        if initial is not None:
            b = resolve(initial, "register: initial")
            if count is not None and count != b.count:
                raise invalid("register: count %r but initial holds %d" % (count, b.count))
            if dtype is not None and dtype_of(dtype) != b.dtype:
                raise invalid("register: dtype %r but initial is %s"
                              % (dtype, b.dtype.name.lower()))
            cnt, dt, ptr = b.count, b.dtype, b.ptr
        else:
            if count is None or dtype is None:
                raise invalid("register: give initial, or count and dtype")
            cnt, dt, ptr = _int(count, "register: count", 0, (1 << 63) - 1), dtype_of(dtype), None
        check(LIB.gs_ps_register(self._handle(), key, cnt, dt, ptr))

    def push(self, key: int, grad: BufferLike) -> Request:
        """Start sending grad (the whole key) to its servers; returns a Request."""
        b = resolve(grad, "push: grad")
        key = _int(key, "push: key", 0, (1 << 64) - 1)
        req = Request(b.keep, None, owner=self, ps=True, what="gs_ps_push of key %d" % key)
        check(LIB.gs_ps_push(self._handle(), key, b.ptr, b.count, b.dtype, byref(req._h)))
        return req

    def pull(self, key: int, out: BufferLike) -> Request:
        """Start fetching key's parameters into out; returns a Request (result: out)."""
        b = resolve(out, "pull: out", writable=True)
        key = _int(key, "pull: key", 0, (1 << 64) - 1)
        req = Request(b.keep, out, owner=self, ps=True, what="gs_ps_pull of key %d" % key)
        check(LIB.gs_ps_pull(self._handle(), key, b.ptr, b.count, b.dtype, byref(req._h)))
        return req

    def clock(self) -> None:
        """End this worker's iteration (after starting its pushes)."""
        check(LIB.gs_ps_clock(self._handle()))

    def info(self) -> Dict[str, Any]:
        """gs_ps_info_t as a dict (roles, clock, keys, health)."""
        return T.struct_to_dict(query(LIB.gs_ps_info, T.PSInfo, self._handle()))

    def close(self) -> None:
        """Finish this rank's part and free the parameter server (gs_ps_destroy completes
        every pending request first); then release the requests dropped in flight.
        Collective. Idempotent."""
        h, self._h = self._h, None
        if h is not None:
            try:
                check(LIB.gs_ps_destroy(h))
            finally:
                reap_closed(self._orphans)
