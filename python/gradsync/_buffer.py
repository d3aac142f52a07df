# SPDX-License-Identifier: Apache-2.0
"""From a Python object to (address, element count, gs_dtype_t).

Three kinds of object are accepted, checked in this order: torch tensors
(strided, contiguous; CPU, or CUDA passed through as a device pointer),
numpy arrays (C-contiguous, native byte order) and anything with the
buffer protocol (bytearray, bytes, memoryview, array.array, ...; the
dtype comes from the format character, bytes are uint8). Neither torch
nor numpy is imported here: an object is only recognised as a tensor or
an array when its module is already loaded, so the package works without
either. A resolved buffer keeps the Python object (and the memoryview that
pins it) referenced; requests hold these until the operation completes.
"""
from __future__ import annotations

import ctypes
import sys
from typing import Any, Optional

#: What the calls take as a buffer: a torch tensor, a numpy array or any object with the
#: buffer protocol (bytearray, memoryview, array.array, ...). Neither torch nor numpy is a
#: dependency, so the annotation cannot be narrower.
BufferLike = Any
from . import _types as T
from ._lib import invalid

_NUMPY = {("f", 4): T.DType.FLOAT32, ("f", 8): T.DType.FLOAT64, ("f", 2): T.DType.FLOAT16,
          ("i", 1): T.DType.INT8, ("u", 1): T.DType.UINT8, ("i", 4): T.DType.INT32,
          ("i", 8): T.DType.INT64}
_TORCH = {"torch.float32": T.DType.FLOAT32, "torch.float64": T.DType.FLOAT64,
          "torch.float16": T.DType.FLOAT16, "torch.bfloat16": T.DType.BFLOAT16,
          "torch.int8": T.DType.INT8, "torch.uint8": T.DType.UINT8,
          "torch.int32": T.DType.INT32, "torch.int64": T.DType.INT64}
# Buffer-protocol format characters: signed integer codes map by size.
_FMT_FLOAT = {"f": T.DType.FLOAT32, "d": T.DType.FLOAT64, "e": T.DType.FLOAT16}
_FMT_SIGNED = "bhilqn"
_INT_BY_SIZE = {1: T.DType.INT8, 4: T.DType.INT32, 8: T.DType.INT64}
_SUPPORTED = "float32, float64, float16, bfloat16 (torch only), int8, uint8, int32, int64"


class _PyBuffer(ctypes.Structure):
    _fields_ = [("buf", ctypes.c_void_p), ("obj", ctypes.c_void_p), ("len", ctypes.c_ssize_t),
                ("itemsize", ctypes.c_ssize_t), ("readonly", ctypes.c_int),
                ("ndim", ctypes.c_int), ("format", ctypes.c_char_p),
                ("shape", ctypes.c_void_p), ("strides", ctypes.c_void_p),
                ("suboffsets", ctypes.c_void_p), ("internal", ctypes.c_void_p)]


_get_buffer = ctypes.pythonapi.PyObject_GetBuffer
_get_buffer.argtypes = [ctypes.py_object, ctypes.POINTER(_PyBuffer), ctypes.c_int]
_get_buffer.restype = ctypes.c_int
_release_buffer = ctypes.pythonapi.PyBuffer_Release
_release_buffer.argtypes = [ctypes.POINTER(_PyBuffer)]
_release_buffer.restype = None


def _address(mv: memoryview) -> Optional[int]:
    """Address of a C-contiguous memoryview's data (read-only ones too). The
    memoryview itself keeps the export alive; the caller keeps it referenced."""
    view = _PyBuffer()
    if _get_buffer(mv, ctypes.byref(view), 0) != 0:  # PyBUF_SIMPLE
        raise invalid("cannot get the address of a %s" % type(mv.obj).__name__)
    addr = view.buf
    _release_buffer(ctypes.byref(view))
    return addr


class Buf:
    """A resolved buffer: ptr (int or None), count (elements), dtype (DType), readonly,
    device (True for a CUDA tensor), obj (the caller's object), keep (what to hold)."""
    __slots__ = ("ptr", "count", "dtype", "readonly", "device", "obj", "keep")

    def __init__(self, ptr: Optional[int], count: int, dtype: T.DType, readonly: bool,
                 device: bool, obj: Any, keep: Any) -> None:
        self.ptr = ptr or None
        self.count = count
        self.dtype = dtype
        self.readonly = readonly
        self.device = device
        self.obj = obj
        self.keep = keep


def _torch(obj: Any, what: str, torch: Any) -> Buf:
    # The torch backend calls this on every collective: attribute tests only (obj.device
    # and str(obj.layout) cost more than the rest together).
    if obj.layout != torch.strided:
        raise invalid("%s is a %s tensor; only dense (strided) tensors are supported"
                      % (what, obj.layout))
    dt = _TORCH.get(str(obj.dtype))
    if dt is None:
        raise invalid("%s has dtype %s, which gradsync cannot reduce; supported: %s"
                      % (what, obj.dtype, _SUPPORTED))
    if not obj.is_contiguous():
        raise invalid("%s is not contiguous; pass tensor.contiguous() (and copy back)" % what)
    cuda = obj.is_cuda
    if not (cuda or obj.is_cpu):
        raise invalid("%s is on device %s; gradsync takes CPU or CUDA tensors"
                      % (what, obj.device.type))
    return Buf(obj.data_ptr(), obj.numel(), dt, False, cuda, obj, obj)


def _numpy(obj: Any, what: str) -> Buf:
    dt = obj.dtype
    key = (dt.kind, dt.itemsize)
    gdt = _NUMPY.get(key)
    if gdt is None:
        raise invalid("%s has dtype %s, which gradsync cannot reduce; supported: %s"
                      % (what, dt, _SUPPORTED))
    if not dt.isnative:
        raise invalid("%s has non-native byte order (%s); use .astype(%s.newbyteorder('='))"
                      % (what, dt.str, dt.name))
    if not obj.flags.c_contiguous:
        raise invalid("%s is not C-contiguous; pass numpy.ascontiguousarray(...)" % what)
    return Buf(obj.ctypes.data, obj.size, gdt, not obj.flags.writeable, False, obj, obj)


def _generic(obj: Any, what: str) -> Buf:
    try:
        mv = memoryview(obj)
    except TypeError:
        raise invalid("%s is a %s, which is neither a torch tensor, a numpy array nor a "
                      "buffer (bytearray, memoryview, array.array)" % (what, type(obj).__name__)
                      ) from None
    fmt = mv.format
    if fmt[:1] in "@=" or (fmt[:1] == "<" and sys.byteorder == "little"):
        fmt = fmt[1:]
    gdt = None
    if fmt in _FMT_FLOAT:
        gdt = _FMT_FLOAT[fmt]
    elif fmt in ("B", "c"):
        gdt = T.DType.UINT8
    elif len(fmt) == 1 and fmt in _FMT_SIGNED:
        gdt = _INT_BY_SIZE.get(mv.itemsize)
    if gdt is None or gdt.itemsize != mv.itemsize:
        raise invalid("%s has buffer format %r, which gradsync cannot reduce; supported: %s"
                      % (what, mv.format, _SUPPORTED))
    if not mv.c_contiguous:
        raise invalid("%s is not C-contiguous" % what)
    return Buf(_address(mv), mv.nbytes // mv.itemsize, gdt, mv.readonly, False, obj, mv)


def resolve(obj: BufferLike, what: str, writable: bool = False) -> Buf:
    """Resolve @obj (named @what in errors); @writable: it will be written."""
    torch = sys.modules.get("torch")
    np = sys.modules.get("numpy")
    if torch is not None and isinstance(obj, torch.Tensor):
        b = _torch(obj, what, torch)
    elif np is not None and isinstance(obj, np.ndarray):
        b = _numpy(obj, what)
    else:
        b = _generic(obj, what)
    if writable and b.readonly:
        raise invalid("%s is read-only, but the call writes it" % what)
    return b


def dtype_of(spec: Any, what: str = "dtype") -> T.DType:
    """A DType from a DType, a name ("float32", "bf16"), a numpy dtype or a torch dtype."""
    if isinstance(spec, T.DType):
        return spec
    if isinstance(spec, str):
        dt = T.DTYPE_NAMES.get(spec.lower())
        if dt is None:
            raise invalid("%s %r is unknown; supported: %s" % (what, spec, _SUPPORTED))
        return dt
    s = str(spec)
    if s in _TORCH:
        return _TORCH[s]
    np = sys.modules.get("numpy")
    if np is not None:
        try:
            d = np.dtype(spec)
        except TypeError:
            d = None
        if d is not None and (d.kind, d.itemsize) in _NUMPY:
            return _NUMPY[(d.kind, d.itemsize)]
    if isinstance(spec, int) and not isinstance(spec, bool) and 0 <= spec < len(T.DType):
        return T.DType(spec)
    raise invalid("%s %r is not one gradsync knows; supported: %s" % (what, spec, _SUPPORTED))
