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


# --------------------------------------------------------------------------
# gradsync.torch's layer over the package (gradsync/torch/_comm.py)
# --------------------------------------------------------------------------

def test_torch_layer_errors_are_gradsync_errors_and_runtime_errors():
    from gradsync.torch import _comm

    for status in (-1, -2, -4, -20, -40, -41, -44, -45, -60, -100):
        e = _comm.error(status, "a sentence")
        assert isinstance(e, gradsync.error_class(status)) and isinstance(e, RuntimeError)
        assert e.status == status and e.message == "a sentence" and e.name.startswith("GS_")
        assert type(_comm.error(status, "again")) is type(e)  # one class per status class
    e = _comm.invalid("gradsync backend: no")
    assert isinstance(e, gradsync.InvalidArgument) and isinstance(e, ValueError)
    with pytest.raises(gradsync.InvalidArgument):
        _comm.call(gradsync.Codec, "zip")


def test_torch_layer_dtypes_follow_the_package():
    from gradsync import _buffer
    from gradsync.torch import _comm

    for t, dt in _comm.DTYPES.items():
        if t is not torch.bool:
            assert _buffer.dtype_of(t) == dt
    assert _comm.DTYPES[torch.bool] == gradsync.DType.UINT8
    assert set(_comm.FLOAT_DTYPES) == {torch.float32, torch.float64, torch.float16,
                                       torch.bfloat16}
    with pytest.raises(gradsync.InvalidArgument, match="not supported"):
        _comm.dtype_of(torch.zeros(1, dtype=torch.int16))


def test_torch_layer_on_a_borrowed_communicator(comm):
    """Comm(communicator) runs the package's calls, completes torch futures on its thread
    (bool tensors as uint8), raises the package's errors as RuntimeError too, and leaves a
    borrowed communicator open."""
    from gradsync.torch import _comm

    c = _comm.Comm(comm)
    try:
        x = torch.full((5,), float(comm.rank + 1))
        assert c.start("allreduce", x, op="sum", result="done").wait() == "done"
        assert torch.all(x == sum(range(1, comm.size + 1)))
        b = torch.tensor([comm.rank == 0, True, False])
        c.start("allreduce", b, op="max", sync=True).wait()
        assert b.tolist() == [True, True, False]
        after = []
        fut = c.start("barrier", result=7, after=lambda: after.append(1))
        assert fut.wait() == 7 and after == [1]
        with pytest.raises(gradsync.InvalidArgument) as ei:
            c.start("allreduce", x, torch.zeros(2), sync=True)
        assert isinstance(ei.value, RuntimeError)
    finally:
        c.close()
        c.close()
    assert not comm.closed
