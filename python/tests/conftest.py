# SPDX-License-Identifier: Apache-2.0
"""Shared fixtures of the gradsync Python tests.

Every rank of a gsrun job runs the same pytest session, so the tests run in
the same order everywhere and each collective in a test is matched by the
other ranks' copy of that test. Each rank checks its own results against an
expectation it computes locally. A rank whose test fails before a
collective leaves the others to fail that collective by GS_TIMEOUT_MS
(CMake sets 20 s), never to hang; the communicator is then failed
(sticky) and the rest of the session fails fast.

Values are small integers (|x| <= 3), so sums, products and averages over 1
to 4 ranks are exact in every dtype, float16 and bfloat16 included.
"""
import os
import sys

import pytest

import gradsync

#: World size of the job, known before the communicator exists (for parametrize).
WORLD = int(os.environ.get("GS_WORLD_SIZE") or os.environ.get("WORLD_SIZE") or 1)
LARGE = (1 << 20) + 3
#: Element counts every collective is tried at: empty, one, uneven, world+1, large.
COUNTS = sorted({0, 1, 7, WORLD + 1, LARGE})
NUMPY_DTYPES = ["float32", "float64", "float16", "int8", "uint8", "int32", "int64"]
FLOAT_DTYPES = {"float32", "float64", "float16", "bfloat16"}
OPS = ["sum", "prod", "min", "max", "avg", "band", "bor", "bxor"]


@pytest.fixture(scope="session")
def comm():
    c = gradsync.Communicator()
    assert c.size == WORLD
    yield c
    c.close()


def needs_peers(comm, n=2):
    if comm.size < n:
        pytest.skip("needs at least %d ranks (this run has %d)" % (n, comm.size))


def op_valid(op, dtype):
    """Whether the C library defines @op on @dtype (avg: floats; bitwise: integers)."""
    if op == "avg":
        return dtype in FLOAT_DTYPES
    if op in ("band", "bor", "bxor"):
        return dtype not in FLOAT_DTYPES
    return True


def rank_data(np, rank, n, dtype, salt=0):
    """Rank @rank's input: n small integers in @dtype (uint8: 0..3, others -3..3)."""
    i = np.arange(n, dtype=np.int64)
    v = (i * 7 + rank * 3 + salt) % 7
    v = v % 4 if dtype == "uint8" else v - 3
    return v.astype(dtype)


def reduce_ref(np, arrays, op, dtype):
    """The reduction of @arrays computed in int64 / float64, cast to @dtype."""
    a = np.stack([x.astype(np.float64 if dtype in FLOAT_DTYPES else np.int64) for x in arrays])
    if op == "sum":
        r = a.sum(axis=0)
    elif op == "prod":
        r = a.prod(axis=0)
    elif op == "min":
        r = a.min(axis=0)
    elif op == "max":
        r = a.max(axis=0)
    elif op == "avg":
        r = a.sum(axis=0) / len(arrays)
    else:
        f = {"band": np.bitwise_and, "bor": np.bitwise_or, "bxor": np.bitwise_xor}[op]
        r = f.reduce(a, axis=0)
    return r.astype(dtype)


def pytest_report_header(config):
    return "gradsync %s from %s; world size %d; python %s" % (
        gradsync.library_version(), gradsync.library_path(), WORLD, sys.executable)
