# SPDX-License-Identifier: Apache-2.0
"""Every collective on numpy arrays: every dtype numpy has, every op, counts 0, 1,
uneven and large, in place and out of place, blocking and async, against a
reference each rank computes itself."""
import pytest

from conftest import COUNTS, LARGE, NUMPY_DTYPES, OPS, op_valid, rank_data, reduce_ref

import gradsync

np = pytest.importorskip("numpy", reason="numpy is not installed for this interpreter")


def all_inputs(comm, n, dtype, salt=0):
    return [rank_data(np, r, n, dtype, salt) for r in range(comm.size)]


def cases(dtypes, ops, counts, large_ops, valid_only=False):
    """(dtype, op, count) triples; the large count only with @large_ops (time), and with
    @valid_only only the ops defined on the dtype (test_allreduce checks the others fail)."""
    return [(d, o, c) for d in dtypes for o in ops for c in counts
            if (c != LARGE or o in large_ops) and (op_valid(o, d) or not valid_only)]


@pytest.mark.parametrize("dtype,op,count", cases(NUMPY_DTYPES, OPS, COUNTS, ("sum", "max")))
def test_allreduce(comm, dtype, op, count):
    ins = all_inputs(comm, count, dtype)
    x = ins[comm.rank].copy()
    if not op_valid(op, dtype):
        with pytest.raises(gradsync.InvalidArgument) as ei:
            comm.allreduce(x, op=op)
        assert ei.value.name == "GS_ERR_INVALID_ARG"
        np.testing.assert_array_equal(x, ins[comm.rank])
        return
    want = reduce_ref(np, ins, op, dtype)
    out = np.full(count, 99, dtype=dtype)
    assert comm.allreduce(x, out, op=op) is out
    np.testing.assert_array_equal(out, want)
    np.testing.assert_array_equal(x, ins[comm.rank])  # out of place: buf untouched
    assert comm.allreduce(x, op=gradsync.Op[op.upper()]) is x  # in place, enum op
    np.testing.assert_array_equal(x, want)


@pytest.mark.parametrize("count", [0, 1, 7, 1000])
@pytest.mark.parametrize("dtype", ["float32", "int64", "uint8"])
def test_allreduce_async(comm, dtype, count):
    ins = [all_inputs(comm, count, dtype, salt) for salt in range(3)]
    bufs = [i[comm.rank].copy() for i in ins]
    reqs = [comm.allreduce(b, op="max", async_op=True) for b in bufs]
    assert all(isinstance(r, gradsync.Request) for r in reqs)
    gradsync.wait_all(reqs)
    for b, i, r in zip(bufs, ins, reqs):
        assert r.done and r.test() and r.wait() is None and r.result is b
        np.testing.assert_array_equal(b, reduce_ref(np, i, "max", dtype))


@pytest.mark.parametrize("algo", [None, "ring", "tree", "rd", "rabenseifner", gradsync.Algo.AUTO])
def test_allreduce_algo(comm, algo):
    ins = all_inputs(comm, 1031, "float32")
    x = ins[comm.rank].copy()
    comm.allreduce(x, algo=algo)
    np.testing.assert_array_equal(x, reduce_ref(np, ins, "sum", "float32"))


@pytest.mark.parametrize("count", COUNTS)
@pytest.mark.parametrize("dtype", NUMPY_DTYPES)
def test_broadcast(comm, dtype, count):
    for root in range(comm.size):
        want = rank_data(np, root, count, dtype, salt=5)
        x = want.copy() if comm.rank == root else np.zeros(count, dtype)
        assert comm.broadcast(x, root) is x
        np.testing.assert_array_equal(x, want)
        r = comm.broadcast(x, root, async_op=True)
        assert r.wait() is None


@pytest.mark.parametrize("dtype,op,count",
                         cases(NUMPY_DTYPES, ["sum", "min", "max", "prod"], COUNTS, ("sum",)))
def test_reduce(comm, dtype, op, count):
    ins = all_inputs(comm, count, dtype)
    want = reduce_ref(np, ins, op, dtype)
    for root in sorted({0, comm.size - 1}):
        x = ins[comm.rank].copy()
        out = np.zeros(count, dtype) if comm.rank == root else None
        got = comm.reduce(x, out, op=op, root=root)
        if comm.rank == root:
            assert got is out
            np.testing.assert_array_equal(out, want)
        np.testing.assert_array_equal(x, ins[comm.rank])
        comm.reduce(x, op=op, root=root, async_op=True).wait()  # in place at the root
        if comm.rank == root:
            np.testing.assert_array_equal(x, want)
        else:
            np.testing.assert_array_equal(x, ins[comm.rank])


@pytest.mark.parametrize("count", COUNTS)
@pytest.mark.parametrize("dtype", NUMPY_DTYPES)
def test_allgather(comm, dtype, count):
    ins = all_inputs(comm, count, dtype)
    out = np.zeros(count * comm.size, dtype)
    comm.allgather(ins[comm.rank], out)
    np.testing.assert_array_equal(out, np.concatenate(ins))
    # In place: the rank's block of out is the send buffer.
    out2 = np.zeros(count * comm.size, dtype)
    out2[comm.rank * count:(comm.rank + 1) * count] = ins[comm.rank]
    comm.allgather(out2[comm.rank * count:(comm.rank + 1) * count], out2, async_op=True).wait()
    np.testing.assert_array_equal(out2, np.concatenate(ins))


@pytest.mark.parametrize("count", COUNTS)
@pytest.mark.parametrize("dtype", NUMPY_DTYPES)
def test_gather(comm, dtype, count):
    ins = all_inputs(comm, count, dtype)
    for root in sorted({0, comm.size - 1}):
        out = np.zeros(count * comm.size, dtype) if comm.rank == root else None
        got = comm.gather(ins[comm.rank], out, root)
        if comm.rank == root:
            assert got is out
            np.testing.assert_array_equal(out, np.concatenate(ins))
        comm.gather(ins[comm.rank], out, root, async_op=True).wait()


@pytest.mark.parametrize("count", COUNTS)
@pytest.mark.parametrize("dtype", NUMPY_DTYPES)
def test_scatter(comm, dtype, count):
    for root in sorted({0, comm.size - 1}):
        blocks = all_inputs(comm, count, dtype, salt=root)
        buf = np.concatenate(blocks) if comm.rank == root else None
        out = np.zeros(count, dtype)
        assert comm.scatter(buf, out, root) is out
        np.testing.assert_array_equal(out, blocks[comm.rank])
        out[:] = 0
        comm.scatter(buf, out, root, async_op=True).wait()
        np.testing.assert_array_equal(out, blocks[comm.rank])


@pytest.mark.parametrize("dtype,op,count", cases(NUMPY_DTYPES, ["sum", "max", "avg", "bxor"],
                                                 COUNTS, ("sum",), valid_only=True))
def test_reduce_scatter(comm, dtype, op, count):
    n = comm.size
    ins = all_inputs(comm, count * n, dtype)
    want = reduce_ref(np, ins, op, dtype)[comm.rank * count:(comm.rank + 1) * count]
    out = np.zeros(count, dtype)
    assert comm.reduce_scatter(ins[comm.rank], out, op=op) is out
    np.testing.assert_array_equal(out, want)
    out[:] = 0
    comm.reduce_scatter(ins[comm.rank], out, op=op, async_op=True).wait()
    np.testing.assert_array_equal(out, want)


def uneven_counts(size, base):
    """Per-rank counts with an empty block, a one-element block and uneven sizes."""
    return [(base * (r + 1) + r) if r % 3 else (0 if r == 0 else 1) for r in range(size)]


@pytest.mark.parametrize("base", [0, 1, 5, 4099])
@pytest.mark.parametrize("dtype", NUMPY_DTYPES)
def test_reduce_scatterv(comm, dtype, base):
    counts = uneven_counts(comm.size, base)
    total = sum(counts)
    ins = all_inputs(comm, total, dtype)
    full = reduce_ref(np, ins, "sum", dtype)
    off = sum(counts[:comm.rank])
    want = full[off:off + counts[comm.rank]]
    out = np.zeros(counts[comm.rank], dtype)
    assert comm.reduce_scatterv(ins[comm.rank], out, counts) is out
    np.testing.assert_array_equal(out, want)
    out[:] = 0
    comm.reduce_scatterv(ins[comm.rank], out, counts, op="sum", async_op=True).wait()
    np.testing.assert_array_equal(out, want)


@pytest.mark.parametrize("base", [0, 1, 5, 4099])
@pytest.mark.parametrize("dtype", NUMPY_DTYPES)
def test_allgatherv(comm, dtype, base):
    counts = uneven_counts(comm.size, base)
    ins = [rank_data(np, r, counts[r], dtype) for r in range(comm.size)]
    out = np.zeros(sum(counts), dtype)
    assert comm.allgatherv(ins[comm.rank], out, counts) is out
    np.testing.assert_array_equal(out, np.concatenate(ins))
    # Explicit displacements: blocks in reverse rank order, a gap of 2 between them.
    displs, pos = [0] * comm.size, 0
    for r in reversed(range(comm.size)):
        displs[r] = pos
        pos += counts[r] + 2
    out2 = np.full(pos, 7, dtype)
    comm.allgatherv(ins[comm.rank], out2, counts, displs, async_op=True).wait()
    want = np.full(pos, 7, dtype)
    for r in range(comm.size):
        want[displs[r]:displs[r] + counts[r]] = ins[r]
    np.testing.assert_array_equal(out2, want)


@pytest.mark.parametrize("count", [0, 1, 7, 65537])
@pytest.mark.parametrize("dtype", NUMPY_DTYPES)
def test_alltoall(comm, dtype, count):
    n = comm.size
    ins = all_inputs(comm, count * n, dtype)
    out = np.zeros(count * n, dtype)
    assert comm.alltoall(ins[comm.rank], out) is out
    want = np.concatenate([ins[j][comm.rank * count:(comm.rank + 1) * count] for j in range(n)])
    np.testing.assert_array_equal(out, want)
    out[:] = 0
    comm.alltoall(ins[comm.rank], out, async_op=True).wait()
    np.testing.assert_array_equal(out, want)


@pytest.mark.parametrize("base", [0, 1, 3, 1000])
@pytest.mark.parametrize("dtype", NUMPY_DTYPES)
def test_alltoallv(comm, dtype, base):
    n = comm.size

    def cnt(src, dst):  # elements rank src sends to rank dst
        return (base * (src + 2 * dst + 1) + src + dst) % (base * 3 + 2)

    me = comm.rank
    send_counts = [cnt(me, j) for j in range(n)]
    recv_counts = [cnt(j, me) for j in range(n)]
    sends = {(s, d): rank_data(np, s * n + d, cnt(s, d), dtype) for s in range(n)
             for d in range(n)}
    buf = np.concatenate([sends[(me, j)] for j in range(n)]) if n else None
    out = np.zeros(sum(recv_counts), dtype)
    assert comm.alltoallv(buf, out, send_counts, recv_counts) is out
    np.testing.assert_array_equal(out, np.concatenate([sends[(j, me)] for j in range(n)]))
    # Explicit displacements: received blocks in reverse order with a one-element gap.
    rdispls, pos = [0] * n, 0
    for j in reversed(range(n)):
        rdispls[j] = pos
        pos += recv_counts[j] + 1
    sdispls = [sum(send_counts[:j]) for j in range(n)]
    out2 = np.full(pos, 5, dtype)
    comm.alltoallv(buf, out2, send_counts, recv_counts, sdispls, rdispls, async_op=True).wait()
    want = np.full(pos, 5, dtype)
    for j in range(n):
        want[rdispls[j]:rdispls[j] + recv_counts[j]] = sends[(j, me)]
    np.testing.assert_array_equal(out2, want)


def test_barrier(comm):
    assert comm.barrier() is None
    r = comm.barrier(async_op=True)
    assert r.wait() is None and r.done


def test_multidim_and_views(comm):
    """A 2-D C-contiguous array and a contiguous slice are fine; counts are element totals."""
    ins = all_inputs(comm, 24, "float64")
    x = ins[comm.rank].reshape(4, 6).copy()
    comm.allreduce(x)
    np.testing.assert_array_equal(x.ravel(), reduce_ref(np, ins, "sum", "float64"))
    y = np.zeros(30, np.int32)
    y[3:10] = rank_data(np, comm.rank, 7, "int32")
    comm.allreduce(y[3:10], op="max")
    np.testing.assert_array_equal(y[3:10], reduce_ref(
        np, [rank_data(np, r, 7, "int32") for r in range(comm.size)], "max", "int32"))
    assert not y[:3].any() and not y[10:].any()
