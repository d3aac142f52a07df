# SPDX-License-Identifier: Apache-2.0
"""CPU torch tensors: every dtype (bfloat16 included), in place and out of place,
async, multi-dimensional, and the errors for the ones gradsync cannot take."""
import pytest

from conftest import OPS, op_valid

import gradsync

torch = pytest.importorskip("torch", reason="torch is not installed for this interpreter")

DTYPES = {"float32": torch.float32, "float64": torch.float64, "float16": torch.float16,
          "bfloat16": torch.bfloat16, "int8": torch.int8, "uint8": torch.uint8,
          "int32": torch.int32, "int64": torch.int64}


def rank_tensor(rank, n, name, salt=0):
    v = (torch.arange(n, dtype=torch.int64) * 7 + rank * 3 + salt) % 7
    v = v % 4 if name == "uint8" else v - 3
    return v.to(DTYPES[name])


def reduce_ref(ts, op, name):
    wide = torch.float64 if name in ("float32", "float64", "float16", "bfloat16") else torch.int64
    a = torch.stack([t.to(wide) for t in ts])
    if op == "sum":
        r = a.sum(0)
    elif op == "prod":
        r = a.prod(0)
    elif op == "min":
        r = a.min(0).values
    elif op == "max":
        r = a.max(0).values
    elif op == "avg":
        r = a.sum(0) / len(ts)
    else:
        r = a[0].clone()
        for t in a[1:]:
            r = {"band": r & t, "bor": r | t, "bxor": r ^ t}[op]
    return r.to(DTYPES[name])


@pytest.mark.parametrize("count", [0, 1, 7, 65537])
@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("name", list(DTYPES))
def test_allreduce_tensor(comm, name, op, count):
    ins = [rank_tensor(r, count, name) for r in range(comm.size)]
    x = ins[comm.rank].clone()
    if not op_valid(op, name):
        with pytest.raises(gradsync.InvalidArgument):
            comm.allreduce(x, op=op)
        assert torch.equal(x, ins[comm.rank])
        return
    want = reduce_ref(ins, op, name)
    out = torch.empty_like(x)
    assert comm.allreduce(x, out, op=op) is out
    assert torch.equal(out, want)
    req = comm.allreduce(x, op=op, async_op=True)
    req.wait()
    assert req.result is x and torch.equal(x, want)


@pytest.mark.parametrize("name", list(DTYPES))
def test_other_collectives_tensor(comm, name):
    n, me = comm.size, comm.rank
    x = rank_tensor(me, 6, name).reshape(2, 3)
    out = torch.zeros(n * 2, 3, dtype=DTYPES[name])
    comm.allgather(x, out)
    assert torch.equal(out, torch.cat([rank_tensor(r, 6, name).reshape(2, 3) for r in range(n)]))
    b = rank_tensor(0, 5, name, salt=1) if me == 0 else torch.zeros(5, dtype=DTYPES[name])
    comm.broadcast(b, 0)
    assert torch.equal(b, rank_tensor(0, 5, name, salt=1))
    rs_in = rank_tensor(me, 3 * n, name)
    rs_out = torch.zeros(3, dtype=DTYPES[name])
    comm.reduce_scatter(rs_in, rs_out)
    want = reduce_ref([rank_tensor(r, 3 * n, name) for r in range(n)], "sum", name)
    assert torch.equal(rs_out, want[me * 3:(me + 1) * 3])


def test_tensor_errors(comm):
    x = torch.arange(8, dtype=torch.float32)
    cases = [
        (lambda: comm.allreduce(x[::2]), "not contiguous"),
        (lambda: comm.allreduce(torch.zeros(4, 4).t()), "not contiguous"),
        (lambda: comm.allreduce(torch.zeros(4, dtype=torch.int16)), "torch.int16"),
        (lambda: comm.allreduce(torch.zeros(4, dtype=torch.bool)), "torch.bool"),
        (lambda: comm.allreduce(torch.zeros(4, dtype=torch.complex64)), "torch.complex64"),
        (lambda: comm.allreduce(x, torch.zeros(8, dtype=torch.float64)), "dtype float64"),
        (lambda: comm.allreduce(torch.eye(3).to_sparse()), "sparse"),
    ]
    for fn, text in cases:
        with pytest.raises(gradsync.InvalidArgument) as ei:
            fn()
        assert ei.value.name == "GS_ERR_INVALID_ARG" and text in ei.value.message, (
            ei.value.message, text)
    assert torch.equal(x, torch.arange(8, dtype=torch.float32))


def test_tensor_and_numpy_mix(comm):
    np = pytest.importorskip("numpy", reason="numpy is not installed for this interpreter")
    x = torch.full((4,), float(comm.rank), dtype=torch.float64)
    out = np.zeros(4, np.float64)
    comm.allreduce(x, out)
    assert (out == sum(range(comm.size))).all()
