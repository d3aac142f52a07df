# SPDX-License-Identifier: Apache-2.0
"""The gradient bucketer (gradsync.Bucketer, gradsync/bucket.h) through its Python class."""
import threading

import pytest

from conftest import rank_data, reduce_ref

import gradsync

np = pytest.importorskip("numpy", reason="numpy is not installed for this interpreter")

SIZES = [7, 0, 1000, 1, 5000, 33]


def test_bucketer_steps(comm):
    grads = [np.zeros(n, np.float32) for n in SIZES]
    with gradsync.Bucketer(comm, bucket_bytes=4096, first_bucket_bytes=1024, op="avg") as bk:
        ids = [bk.add(g) for g in grads]
        assert ids == list(range(len(SIZES)))
        for step in range(3):
            ins = [[rank_data(np, r, n, "float32", salt=step + i) for r in range(comm.size)]
                   for i, n in enumerate(SIZES)]
            for g, i in zip(grads, ins):
                g[:] = i[comm.rank]
            order = list(reversed(ids)) if step % 2 == 0 else ids
            ts = [threading.Thread(target=bk.ready, args=(i,)) for i in order]
            for t in ts:
                t.start()
            for t in ts:
                t.join()
            bk.wait()
            for g, i in zip(grads, ins):
                np.testing.assert_array_equal(g, reduce_ref(np, i, "avg", "float32"))
        st = bk.stats()
        assert st["steps"] == 3 and st["failed_steps"] == 0 and st["tensors"] == len(SIZES)
        info = [bk.bucket_info(b) for b in range(st["buckets"])]
        assert sum(i["ntensors"] for i in info) == len(SIZES)
        assert info[0]["dtype"] == gradsync.DType.FLOAT32
        b, off = bk.locate(2)
        assert 0 <= b < st["buckets"] and off >= 0


def test_bucketer_int_sum_and_errors(comm):
    grads = [rank_data(np, comm.rank, n, "int64") for n in (3, 10)]
    want = [reduce_ref(np, [rank_data(np, r, n, "int64") for r in range(comm.size)], "sum",
                       "int64") for n in (3, 10)]
    with gradsync.Bucketer(comm, op="sum", bucket_bytes=0) as bk:
        for g in grads:
            bk.add(g)
        with pytest.raises(gradsync.InvalidArgument) as ei:
            bk.ready(5)
        assert "5" in ei.value.message
        bk.ready(1)
        with pytest.raises(gradsync.InvalidArgument):
            bk.ready(1)  # twice in one step
        with pytest.raises(gradsync.InvalidArgument):
            bk.wait()  # tensor 0 not marked: nothing changes
        bk.ready(0)
        bk.wait()
    for g, w in zip(grads, want):
        np.testing.assert_array_equal(g, w)
    with pytest.raises(gradsync.InvalidArgument):
        gradsync.Bucketer(comm, op="max")


def test_bucketer_compressed(comm):
    g = np.zeros(3000, np.float32)
    with gradsync.Bucketer(comm, codec="fp16", bucket_bytes=4096) as bk:
        bk.add(g)
        g[:] = rank_data(np, comm.rank, 3000, "float32")
        bk.ready(0)
        bk.wait()
    np.testing.assert_array_equal(g, reduce_ref(
        np, [rank_data(np, r, 3000, "float32") for r in range(comm.size)], "avg", "float32"))
