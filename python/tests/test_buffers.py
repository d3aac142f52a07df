# SPDX-License-Identifier: Apache-2.0
"""Buffer-protocol objects without numpy: dtypes from format characters, bytes as
uint8, memoryview slices, read-only inputs."""
import array
import ctypes

import pytest

import gradsync
from gradsync._buffer import resolve


@pytest.mark.parametrize("fmt,dtype", [("f", "FLOAT32"), ("d", "FLOAT64"), ("b", "INT8"),
                                       ("B", "UINT8"), ("i", "INT32"), ("q", "INT64"),
                                       ("l", "INT64" if ctypes.sizeof(ctypes.c_long) == 8
                                        else "INT32")])
def test_array_formats(comm, fmt, dtype):
    a = array.array(fmt, [1, 2, 3])
    assert resolve(a, "a").dtype == gradsync.DType[dtype]
    comm.allreduce(a, op="sum")
    assert list(a) == [comm.size, 2 * comm.size, 3 * comm.size]


def test_float16_memoryview(comm):
    """A memoryview of format 'e' (float16) goes through the buffer-protocol path."""
    np = pytest.importorskip("numpy", reason="numpy is needed to make a float16 buffer")
    arr = np.array([0.5, -2.0], np.float16)
    half = memoryview(arr)
    b = resolve(half, "h")
    assert b.dtype == gradsync.DType.FLOAT16 and b.count == 2
    comm.allreduce(half, op="sum")
    assert list(arr) == [0.5 * comm.size, -2.0 * comm.size]


def test_bytes_bytearray_memoryview(comm):
    assert resolve(b"abc", "b").dtype == gradsync.DType.UINT8
    assert resolve(b"abc", "b").readonly
    ba = bytearray(b"\x01\x02\x03\x04")
    mv = memoryview(ba)[1:3]  # a contiguous slice: its own address
    comm.allreduce(mv, op="max")
    assert ba == b"\x01\x02\x03\x04"
    out = bytearray(3)
    comm.allreduce(b"\x01\x02\x03", out, op="min")  # read-only input, out of place
    assert out == b"\x01\x02\x03"
    assert resolve(bytearray(), "e").count == 0
    comm.allreduce(bytearray())


def test_array_cannot_resize_while_pinned(comm):
    a = array.array("i", [1, 2])
    b = resolve(a, "a")
    with pytest.raises(BufferError):
        a.append(3)
    del b


def test_dtype_names():
    from gradsync._buffer import dtype_of
    assert dtype_of("bf16") == gradsync.DType.BFLOAT16
    assert dtype_of("Float32") == gradsync.DType.FLOAT32
    assert dtype_of(gradsync.DType.INT8) == gradsync.DType.INT8
    assert gradsync.DType.INT64.itemsize == 8
