# SPDX-License-Identifier: Apache-2.0
"""Unit tests of the "gradsync" torch.distributed backend across 2-4 processes.

Each world size spawns its ranks once and runs every case in CASES there
(spawning per case would cost seconds each); every case checks values on
every rank, and the pytest items below report each case separately.
"""

import os

import pytest

torch = pytest.importorskip("torch")
dist = pytest.importorskip("torch.distributed")

from dist_harness import run_ranks  # noqa: E402

R = dist.ReduceOp
#: torch 2.x runs the C++ backend (gradsync/torch/_c10d.py), torch 1.13 the Python one.
TORCH_2 = int(torch.__version__.split(".")[0]) >= 2


def _expect(cond, what):
    if not cond:
        raise AssertionError(what)


def case_allreduce_ops(rank, size):
    base = [float(r + 1) for r in range(size)]
    prod = 1.0
    for b in base:
        prod *= b
    for op, want in [(R.SUM, sum(base)), (R.PRODUCT, prod), (R.MIN, 1.0),
                     (R.MAX, float(size)), (R.AVG, sum(base) / size)]:
        for dtype in (torch.float32, torch.float64):
            t = torch.full((37,), float(rank + 1), dtype=dtype)
            dist.all_reduce(t, op=op)
            _expect(torch.allclose(t, torch.full_like(t, want)), "%s %s: %s" % (op, dtype, t[:3]))
    t = torch.full((5,), rank + 1, dtype=torch.int64)
    dist.all_reduce(t)
    _expect(t.tolist() == [sum(range(1, size + 1))] * 5, "int64 sum %s" % t)


def case_allreduce_bitwise(rank, size):
    vals = [1 << r | 0x100 for r in range(size)]
    band, bor, bxor = vals[0], 0, 0
    for v in vals:
        band &= v
        bor |= v
        bxor ^= v
    for op, want in [(R.BAND, band), (R.BOR, bor), (R.BXOR, bxor)]:
        t = torch.full((9,), vals[rank], dtype=torch.int32)
        dist.all_reduce(t, op=op)
        _expect(t.tolist() == [want] * 9, "%s: %s want %d" % (op, t.tolist(), want))


def case_allreduce_async_noncontig(rank, size):
    big = torch.full((8, 6), float(rank))
    view = big[:, ::2]  # not contiguous
    work = dist.all_reduce(view, async_op=True)
    work.wait()
    want = float(sum(range(size)))
    _expect(torch.all(big[:, ::2] == want) and torch.all(big[:, 1::2] == rank), "strided")
    works = [dist.all_reduce(torch.full((100,), float(i)), async_op=True) for i in range(5)]
    for w in works:
        w.wait()
        _expect(w.is_completed(), "completed")


def case_unsupported_op(rank, size):
    t = torch.ones(4)
    premul = dist._make_nccl_premul_sum(2.0) if hasattr(dist, "_make_nccl_premul_sum") \
        else R.PREMUL_SUM
    if TORCH_2:
        # The C++ backend (torch 2.x) has PREMUL_SUM: each rank's tensor times 2, summed.
        dist.all_reduce(t, op=premul)
        _expect(torch.all(t == 2.0 * size), "PREMUL_SUM gave %s" % t)
        t.fill_(1.0)
    else:
        try:
            dist.all_reduce(t, op=premul)
        except (ValueError, RuntimeError) as exc:
            _expect("unsupported reduce op" in str(exc), "message: %s" % exc)
        else:
            raise AssertionError("PREMUL_SUM was accepted")
    bad = torch.ones(2, dtype=torch.int16)
    try:
        dist.all_reduce(bad)
    except (ValueError, RuntimeError) as exc:
        _expect("not supported" in str(exc) or "cannot reduce" in str(exc), "message: %s" % exc)
    else:
        raise AssertionError("int16 was accepted")
    _expect(torch.all(bad == 1), "a refused tensor was written")
    dist.all_reduce(t)  # the communicator is still usable
    _expect(torch.all(t == size), "after refusal")


def case_broadcast(rank, size):
    for root in range(size):
        t = torch.arange(10, dtype=torch.float32) * (rank + 1)
        dist.broadcast(t, src=root)
        want = torch.arange(10, dtype=torch.float32) * (root + 1)
        _expect(torch.equal(t, want), "root %d" % root)


def case_reduce(rank, size):
    root = size - 1
    t = torch.full((11,), float(rank + 1))
    dist.reduce(t, dst=root, op=R.SUM)
    if rank == root:
        _expect(torch.all(t == sum(range(1, size + 1))), "reduce sum %s" % t)
    t = torch.full((3,), float(rank + 1))
    dist.reduce(t, dst=0, op=R.MAX)
    if rank == 0:
        _expect(torch.all(t == size), "reduce max %s" % t)


def case_allgather(rank, size):
    outs = [torch.zeros(2, 3) for _ in range(size)]
    dist.all_gather(outs, torch.full((2, 3), float(rank)))
    for r, o in enumerate(outs):
        _expect(torch.all(o == r), "all_gather block %d: %s" % (r, o))
    flat = torch.zeros(size * 4, dtype=torch.int64)
    dist.all_gather(list(flat.chunk(size)), torch.full((4,), rank, dtype=torch.int64))
    _expect(flat.tolist() == [r for r in range(size) for _ in range(4)], "into views %s" % flat)
    out = torch.zeros(size * 5)
    dist.all_gather_into_tensor(out, torch.full((5,), float(rank)))
    _expect(out.tolist() == [float(r) for r in range(size) for _ in range(5)], "into tensor")


def case_gather(rank, size):
    root = 1 % size
    mine = torch.arange(3, dtype=torch.float32) + 10 * rank
    outs = [torch.zeros(3) for _ in range(size)] if rank == root else None
    dist.gather(mine, gather_list=outs, dst=root)
    if rank == root:
        for r, o in enumerate(outs):
            _expect(torch.equal(o, torch.arange(3, dtype=torch.float32) + 10 * r), "gather %d" % r)


def case_scatter(rank, size):
    root = 0
    ins = [torch.full((4,), float(r * r)) for r in range(size)] if rank == root else None
    out = torch.zeros(4)
    dist.scatter(out, scatter_list=ins, src=root)
    _expect(torch.all(out == rank * rank), "scatter %s" % out)


def case_reduce_scatter(rank, size):
    ins = [torch.full((6,), float(rank + r)) for r in range(size)]
    out = torch.zeros(6)
    dist.reduce_scatter(out, ins, op=R.SUM)
    want = float(sum(q + rank for q in range(size)))
    _expect(torch.all(out == want), "reduce_scatter %s want %s" % (out, want))
    out = torch.zeros(2)
    dist.reduce_scatter_tensor(out, torch.arange(2 * size, dtype=torch.float32), op=R.MAX)
    _expect(out.tolist() == [2.0 * rank, 2.0 * rank + 1], "reduce_scatter_tensor %s" % out)


def case_alltoall(rank, size):
    inp = torch.arange(size * 2, dtype=torch.float32) + 100 * rank
    out = torch.zeros(size * 2)
    dist.all_to_all_single(out, inp)
    want = [100.0 * r + 2 * rank + k for r in range(size) for k in range(2)]
    _expect(out.tolist() == want, "equal splits %s" % out.tolist())
    # Uneven: rank r sends (j + 1) rows of 2 to rank j.
    in_splits = [j + 1 for j in range(size)]
    out_splits = [rank + 1] * size
    inp = torch.cat([torch.full((j + 1, 2), float(10 * rank + j)) for j in range(size)])
    out = torch.zeros(sum(out_splits), 2)
    dist.all_to_all_single(out, inp, out_splits, in_splits)
    want = torch.cat([torch.full((rank + 1, 2), float(10 * r + rank)) for r in range(size)])
    _expect(torch.equal(out, want), "uneven %s" % out.tolist())
    outs = [torch.zeros(r + 1) for r in range(size)]
    dist.all_to_all(outs, [torch.full((rank + 1,), float(rank * size + j)) for j in range(size)])
    for r, o in enumerate(outs):
        _expect(torch.all(o == r * size + rank), "all_to_all list %d: %s" % (r, o))


def case_barrier(rank, size):
    for _ in range(3):
        dist.barrier()


def case_send_recv(rank, size):
    nxt, prv = (rank + 1) % size, (rank - 1) % size
    buf = torch.zeros(5)
    req = dist.irecv(buf, src=prv, tag=7)
    dist.send(torch.full((5,), float(rank)), dst=nxt, tag=7)
    req.wait()
    _expect(torch.all(buf == prv), "ring irecv %s" % buf)
    if rank == 0:
        got = torch.zeros(3, dtype=torch.int64)
        dist.recv(got, src=size - 1, tag=3)
        _expect(got.tolist() == [1, 2, 3], "recv %s" % got)
    elif rank == size - 1:
        dist.send(torch.tensor([1, 2, 3]), dst=0, tag=3)


def case_recv_anysource(rank, size):
    if rank == 0:
        seen = {}
        for _ in range(size - 1):
            t = torch.zeros(2)
            src = dist.recv(t, tag=11)  # src=None: any source
            _expect(t.tolist() == [float(src), float(src) * 2], "payload from %d: %s" % (src, t))
            seen[src] = True
        _expect(sorted(seen) == list(range(1, size)), "sources %s" % sorted(seen))
    else:
        dist.send(torch.tensor([float(rank), float(rank) * 2]), dst=0, tag=11)


def case_ddp(rank, size):
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.Tanh(), torch.nn.Linear(16, 2))
    ref = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.Tanh(), torch.nn.Linear(16, 2))
    ref.load_state_dict(model.state_dict())
    ddp = torch.nn.parallel.DistributedDataParallel(model, bucket_cap_mb=0.0002)
    g = torch.Generator().manual_seed(1)
    x = torch.randn(4 * size, 8, generator=g)
    y = torch.randn(4 * size, 2, generator=g)
    torch.nn.functional.mse_loss(ddp(x[rank::size]), y[rank::size]).backward()
    # Reference: the mean of the per-rank losses' gradients, computed locally.
    loss = sum(torch.nn.functional.mse_loss(ref(x[r::size]), y[r::size]) for r in range(size))
    (loss / size).backward()
    for p, q in zip(model.parameters(), ref.parameters()):
        _expect(torch.allclose(p.grad, q.grad, rtol=1e-5, atol=1e-6),
                "ddp grad differs by %g" % (p.grad - q.grad).abs().max())


def case_ddp_unused(rank, size):
    """find_unused_parameters=True: the reducer waits on its unused-parameter map's
    all-reduce late, after the buckets' (a Work that only C++ holds, finished before its
    wait). Rank-dependent inputs, so the map differs per rank."""

    class Two(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.a = torch.nn.Linear(4, 3)
            self.b = torch.nn.Linear(4, 3)

        def forward(self, x, use_b):
            return self.a(x) + (self.b(x) if use_b else 0)

    torch.manual_seed(0)
    model, ref = Two(), Two()
    ref.load_state_dict(model.state_dict())
    ddp = torch.nn.parallel.DistributedDataParallel(model, find_unused_parameters=True)
    for step in range(3):
        x = torch.full((2, 4), float(rank + step))
        model.zero_grad()
        ddp(x, rank % 2 == 0).sum().backward()
        ref.zero_grad()
        (sum(ref(torch.full((2, 4), float(r + step)), r % 2 == 0).sum()
             for r in range(size)) / size).backward()
        for name, p in model.named_parameters():
            q = dict(ref.named_parameters())[name]
            want = q.grad if q.grad is not None else torch.zeros_like(q)
            _expect(p.grad is not None and torch.allclose(p.grad, want, atol=1e-6),
                    "step %d %s: %s want %s" % (step, name, p.grad, want))


def case_works_released(rank, size):
    """The group's references to its Works (kept for C++) are dropped once waited for,
    their future taken or seen complete: a loop of calls leaves a bounded list."""
    from gradsync.torch import backend

    pg = dist.distributed_c10d._get_default_group()
    t = torch.full((8,), float(rank))
    for i in range(3 * backend._PRUNE_MIN):
        dist.all_reduce(t, op=R.MAX)
        dist.all_reduce(t, op=R.MAX, async_op=True).wait()
        dist.all_reduce(t, op=R.MAX, async_op=True).get_future().wait()
        w = dist.all_reduce(t, op=R.MAX, async_op=True)
        while not w.is_completed():
            pass
    _expect(torch.all(t == size - 1), "values %s" % t[:2])
    if TORCH_2:
        # The C++ backend's Works are reference-counted: ones nobody waits for are finished
        # and released when dropped, and the group keeps nothing.
        for i in range(200):
            dist.all_reduce(torch.ones(4), async_op=True)
        x = torch.ones(3)
        dist.all_reduce(x)
        _expect(torch.all(x == size), "after 200 dropped Works: %s" % x)
        return
    _expect(len(pg._live) <= 2 * backend._PRUNE_MIN, "%d Works kept" % len(pg._live))


CASES = {name[5:]: fn for name, fn in sorted(globals().items()) if name.startswith("case_")}
if os.environ.get("GSTEST_TORCH_CASES"):  # a comma list, to run a subset while debugging
    CASES = {k: v for k, v in CASES.items() if k in os.environ["GSTEST_TORCH_CASES"].split(",")}


def run_suite(rank, size):
    import traceback

    # A failed case leaves the ranks at different places; a gloo barrier after
    # every case puts them back in step, whatever state gradsync is in.
    sync = dist.new_group(backend="gloo")
    results = {}
    for name, fn in CASES.items():
        try:
            fn(rank, size)
            results[name] = None
        except Exception as exc:  # reported per case by the pytest items
            results[name] = "%s\n%s" % (exc, traceback.format_exc(limit=4))
        dist.barrier(group=sync)
    return results


_CACHE = {}


def _suite(size):
    if size not in _CACHE:
        _CACHE[size] = run_ranks(run_suite, size, "gradsync", timeout_s=120)
    return _CACHE[size]


@pytest.mark.parametrize("size", [2, 3, 4])
@pytest.mark.parametrize("case", sorted(CASES))
def test_backend_op(size, case):
    per_rank = _suite(size)
    errors = ["rank %d: %s" % (r, res[case]) for r, res in enumerate(per_rank) if res[case]]
    assert not errors, "\n".join(errors)


def _mismatch(rank, size):
    """Rank 0 enters a barrier while the others run an all-reduce: every rank must get a
    gradsync error (timeout or failed peer), raised by the synchronous call itself, and
    from the future of the asynchronous one."""
    import datetime
    import os

    os.environ["GS_TIMEOUT_MS"] = "2000"  # read by gs_comm_init of the group below
    group = dist.new_group(backend="gradsync", timeout=datetime.timedelta(seconds=2))
    try:
        if rank == 0:
            dist.barrier(group=group)
        else:
            work = dist.all_reduce(torch.ones(3), group=group, async_op=True)
            work.get_future().wait()
    except RuntimeError as exc:
        return str(exc)
    return None


def test_errors_reach_the_caller():
    for rank, msg in enumerate(run_ranks(_mismatch, 2, "gradsync", timeout_s=60)):
        assert msg is not None, "rank %d: the failed collective returned normally" % rank
        assert "GS_ERR_" in msg, "rank %d: %s" % (rank, msg)


def _mismatch_wait(rank, size):
    """As _mismatch, but the error must reach wait(): rank 0 calls barrier() on the process
    group object itself (not through torch.distributed), rank 1 an async_op=True
    all-reduce; each waits with work.wait()."""
    import datetime
    import os

    os.environ["GS_TIMEOUT_MS"] = "2000"
    group = dist.new_group(backend="gradsync", timeout=datetime.timedelta(seconds=2))
    work = group.barrier() if rank == 0 else \
        dist.all_reduce(torch.ones(3), group=group, async_op=True)
    try:
        work.wait()
    except RuntimeError as exc:
        failed = work.is_completed() and not work.is_success() and \
            work.exception() is not None
        return str(exc) if failed else "completed %s success %s exception %r" % (
            work.is_completed(), work.is_success(), work.exception())
    return None


def test_errors_reach_wait():
    for rank, msg in enumerate(run_ranks(_mismatch_wait, 2, "gradsync", timeout_s=60)):
        assert msg is not None, "rank %d: work.wait() of the failed collective returned" % rank
        assert "GS_ERR_" in msg, "rank %d: %s" % (rank, msg)


def _mismatch_ddp(rank, size):
    """Rank 0 makes a DDP model, whose start-up check all-gathers from C++ and waits there,
    while rank 1 enters a barrier: the C++ wait must raise, so the constructor does."""
    import datetime
    import os

    os.environ["GS_TIMEOUT_MS"] = "2000"
    group = dist.new_group(backend="gradsync", timeout=datetime.timedelta(seconds=2))
    try:
        if rank == 0:
            torch.nn.parallel.DistributedDataParallel(torch.nn.Linear(3, 2), process_group=group)
        else:
            dist.barrier(group=group)
    except RuntimeError as exc:
        return str(exc)
    return None


def test_errors_reach_cpp_waiters():
    for rank, msg in enumerate(run_ranks(_mismatch_ddp, 2, "gradsync", timeout_s=60)):
        assert msg is not None, "rank %d: the failed collective returned normally" % rank
        assert "GS_ERR_" in msg, "rank %d: %s" % (rank, msg)
