# SPDX-License-Identifier: Apache-2.0
"""Codec configurations and error-feedback state (gradsync/compress.h).

A Codec is a gs_codec_config_t: pass it as codec= to allreduce(), to a
Bucketer or to a ParameterServer; it can also encode and decode on its own.
An ErrorFeedback is the residual of one tensor (gs_ef_create), passed as
ef= to allreduce() together with a lossy codec.
"""
from __future__ import annotations

import ctypes
from ctypes import byref, c_size_t, c_void_p
from typing import Any, Optional, Tuple, Union
from . import _types as T
from ._buffer import BufferLike, dtype_of, resolve
from ._lib import LIB, Resource, check, invalid

_ZSTD = {"off": T.CodecZstd.OFF, "on": T.CodecZstd.ON, "auto": T.CodecZstd.AUTO,
         False: T.CodecZstd.OFF, True: T.CodecZstd.ON, None: T.CodecZstd.OFF}


def _kind(kind: Union[str, T.CodecKind]) -> T.CodecKind:
    if isinstance(kind, T.CodecKind):
        return kind
    if isinstance(kind, str):
        try:
            return T.CodecKind[kind.upper()]
        except KeyError:
            pass
    raise invalid("codec kind %r is unknown; one of %s"
                  % (kind, ", ".join(k.name.lower() for k in T.CodecKind)))


class Codec:
    """A codec configuration (gs_codec_config_t).

    Codec(kind="int8"|"int4"|"fp8_e4m3"|"fp8_e5m2"|"fp16"|"bf16"|"qsgd"|"sign"|"topk"|"randk"
          |"none", block_size=None, ratio=None, levels=None, seed=0, zstd="off"|"on"|"auto",
          zstd_level=None): the kinds are gradsync.CodecKind's names in lower case (the
    GS_CODEC_MAP rows of compress.h); fields left at None take the library's default
    (docs/compression.md). The library checks the values when the codec is used.
    """

    def __init__(self, kind: Union[str, T.CodecKind] = "none", block_size: Optional[int] = None,
                 ratio: Optional[float] = None, levels: Optional[int] = None,
                 seed: Optional[int] = 0, zstd: Union[str, bool, None, T.CodecZstd] = "off",
                 zstd_level: Optional[int] = None) -> None:
        c = self._cfg = T.sized(T.CodecConfig)
        c.kind = _kind(kind)
        c.block_size = T.UNSET if block_size is None else int(block_size)
        c.ratio = float(T.UNSET) if ratio is None else float(ratio)
        c.levels = T.UNSET if levels is None else int(levels)
        c.seed = int(seed or 0)
        z = zstd.lower() if isinstance(zstd, str) else zstd
        if isinstance(z, T.CodecZstd):
            c.zstd = z
        elif z in _ZSTD:
            c.zstd = _ZSTD[z]
        else:
            raise invalid("zstd %r is not one of 'off', 'on', 'auto'" % (zstd,))
        c.zstd_level = T.UNSET if zstd_level is None else int(zstd_level)

    @property
    def kind(self) -> str:
        """The codec kind's name ("int8", ...)."""
        return T.CodecKind(self._cfg.kind).name.lower()

    def _ptr(self) -> int:
        return ctypes.addressof(self._cfg)

    def __repr__(self) -> str:
        c = self._cfg
        parts = ["kind=%r" % self.kind]
        for name in ("block_size", "levels", "zstd_level"):
            if getattr(c, name) != T.UNSET:
                parts.append("%s=%d" % (name, getattr(c, name)))
        if c.ratio != float(T.UNSET):
            parts.append("ratio=%g" % c.ratio)
        if c.seed:
            parts.append("seed=%d" % c.seed)
        if c.zstd:
            parts.append("zstd=%r" % T.CodecZstd(c.zstd).name.lower())
        return "gradsync.Codec(%s)" % ", ".join(parts)

    def encoded_size(self, count: int, dtype: Any = "float32") -> int:
        """Largest payload (bytes, header included) for @count elements of @dtype."""
        out = c_size_t()
        check(LIB.gs_codec_encoded_size(byref(self._cfg), count, dtype_of(dtype), byref(out)))
        return out.value

    def _scratch(self, count: int,
                 dt: T.DType) -> Tuple[Optional[ctypes.Array[ctypes.c_char]], int]:
        n = c_size_t()
        check(LIB.gs_codec_scratch_size(byref(self._cfg), count, dt, byref(n)))
        return (ctypes.c_char * n.value)() if n.value else None, n.value

    def encode(self, buf: BufferLike, ef: Optional[ErrorFeedback] = None) -> bytes:
        """Encode a float buffer; returns the payload as bytes (updates @ef when given)."""
        b = resolve(buf, "encode: buf")
        cap = self.encoded_size(b.count, b.dtype)
        dst = (ctypes.c_char * max(cap, 1))()
        scratch, nscratch = self._scratch(b.count, b.dtype)
        n = c_size_t()
        check(LIB.gs_codec_encode(byref(self._cfg), b.ptr, b.count, b.dtype,
                                  ef._handle() if ef is not None else None,
                                  scratch, nscratch, dst, cap, byref(n)))
        return dst.raw[:n.value]

    def decode(self, payload: BufferLike, out: BufferLike, accumulate: bool = False) -> BufferLike:
        """Decode @payload into @out (out = decode; out += decode with accumulate=True)."""
        o = resolve(out, "decode: out", writable=True)
        p = resolve(payload, "decode: payload")
        nbytes = p.count * p.dtype.itemsize
        scratch, nscratch = self._scratch(o.count, o.dtype)
        fn = LIB.gs_codec_decode_accumulate if accumulate else LIB.gs_codec_decode
        check(fn(byref(self._cfg), p.ptr, nbytes, o.count, o.dtype, scratch, nscratch, o.ptr))
        return out


def codec_of(codec: Union[None, str, Codec]) -> Optional[Codec]:
    """None, a Codec, or a kind name (shorthand for Codec(kind))."""
    if codec is None or isinstance(codec, Codec):
        return codec
    return Codec(codec)


class ErrorFeedback(Resource):
    """Error-feedback residual of one tensor: ErrorFeedback(count, dtype="float32").

    Pass it as ef= to allreduce() with a lossy codec, one per tensor, never to
    two calls in flight at once. reset() zeroes it; close() frees it.
    """

    _what = "error feedback"

    def __init__(self, count: int, dtype: Any = "float32") -> None:
        self.count = int(count)
        self.dtype = dtype_of(dtype)
        if self.count < 0:
            raise invalid("ErrorFeedback: count %d is negative" % self.count)
        h = c_void_p()
        check(LIB.gs_ef_create(self.count, self.dtype, byref(h)))
        self._h = h.value

    def reset(self) -> None:
        """Zero the residual."""
        check(LIB.gs_ef_reset(self._handle()))

    def close(self) -> None:
        """Free the residual. Idempotent."""
        h, self._h = self._h, None
        if h:
            check(LIB.gs_ef_destroy(h))
