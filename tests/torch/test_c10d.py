# SPDX-License-Identifier: Apache-2.0
"""The torch 2.x C++ backend (gradsync/torch/csrc/backend.cpp) on 4 spawned ranks, with what
torch 2.x users call beyond test_backend.py's ops: the tensor collectives FSDP2 uses, the
coalescing manager, batch_isend_irecv, every dtype torch has against a reference, bad input
refused with the communicator left usable, DDP and FSDP2 (fully_shard) losses equal to
gloo's, and a 2x2 DeviceMesh (HSDP: replicate x shard) on groups that gs_comm_create_group
makes. Run under torch 2.x only (the virtual environment of scripts/install-deps.sh)."""

import os

import pytest

torch = pytest.importorskip("torch")
dist = pytest.importorskip("torch.distributed")
if int(torch.__version__.split(".")[0]) < 2:
    pytest.skip("torch %s: the C++ backend is for torch 2.x" % torch.__version__,
                allow_module_level=True)

from dist_harness import run_ranks  # noqa: E402

R = dist.ReduceOp
SIZE = 4
TOL = 1e-5


def _expect(cond, what):
    if not cond:
        raise AssertionError(what)


def case_backend_is_cpp(rank, size):
    pg = dist.distributed_c10d._get_default_group()
    from gradsync.torch import _c10d
    _expect(_c10d.extension().is_gradsync(pg._get_backend(torch.device("cpu"))),
            "the cpu backend is not gradsync's C++ one")


def case_tensor_collectives(rank, size):
    for dtype in (torch.float32, torch.bfloat16, torch.int64):
        x = torch.arange(6, dtype=dtype) + rank * 10
        out = torch.empty(6 * size, dtype=dtype)
        dist.all_gather_into_tensor(out, x)
        want = torch.cat([torch.arange(6, dtype=dtype) + r * 10 for r in range(size)])
        _expect(torch.equal(out, want), "all_gather_into_tensor %s" % dtype)
        inp = torch.arange(3 * size, dtype=dtype) * (rank + 1)
        o = torch.empty(3, dtype=dtype)
        dist.reduce_scatter_tensor(o, inp)
        tot = sum(range(1, size + 1))
        _expect(torch.equal(o, (torch.arange(3 * size, dtype=dtype) * tot)[3 * rank:3 * rank + 3]),
                "reduce_scatter_tensor %s: %s" % (dtype, o))
    inp = torch.full((2 * size,), float(rank + 1))
    o = torch.empty(2)
    dist.reduce_scatter_tensor(o, inp, op=R.AVG)
    _expect(torch.allclose(o, torch.full((2,), (size + 1) / 2.0)), "reduce_scatter AVG %s" % o)
    pre = dist._make_nccl_premul_sum(0.5)
    inp = torch.full((2 * size,), float(rank + 1))
    keep = inp.clone()
    dist.reduce_scatter_tensor(o, inp, op=pre)
    _expect(torch.allclose(o, torch.full((2,), 0.5 * size * (size + 1) / 2.0)), "PREMUL rs")
    _expect(torch.equal(inp, keep), "PREMUL_SUM changed the reduce-scatter's input")
    # all_to_all_single with uneven splits: rank r sends r+1+j rows to rank j.
    ins = [rank + 1 + j for j in range(size)]
    outs = [r + 1 + rank for r in range(size)]
    send = torch.cat([torch.full((n, 2), float(rank * 100 + j)) for j, n in enumerate(ins)])
    recv = torch.empty(sum(outs), 2)
    dist.all_to_all_single(recv, send, outs, ins)
    want = torch.cat([torch.full((n, 2), float(r * 100 + rank)) for r, n in enumerate(outs)])
    _expect(torch.equal(recv, want), "all_to_all_single with splits")


def case_coalesced(rank, size):
    ts = [torch.full((n,), float(rank + 1)) for n in (1, 7, 1000)]
    with dist._coalescing_manager(async_ops=True) as cm:
        for t in ts:
            dist.all_reduce(t)
    cm.wait()
    for t in ts:
        _expect(torch.all(t == size * (size + 1) / 2), "coalesced all_reduce")
    ins = [torch.full((n,), float(rank)) for n in (3, 5)]
    outs = [torch.empty(n * size) for n in (3, 5)]
    with dist._coalescing_manager(async_ops=True) as cm:
        for o, i in zip(outs, ins):
            dist.all_gather_into_tensor(o, i)
    cm.wait()
    for o, n in zip(outs, (3, 5)):
        _expect(torch.equal(o, torch.arange(size).repeat_interleave(n).float()),
                "coalesced all_gather_into_tensor")
    ins = [torch.ones(n * size) * (rank + 1) for n in (2, 4)]
    outs = [torch.empty(n) for n in (2, 4)]
    with dist._coalescing_manager(async_ops=True) as cm:
        for o, i in zip(outs, ins):
            dist.reduce_scatter_tensor(o, i)
    cm.wait()
    for o in outs:
        _expect(torch.all(o == size * (size + 1) / 2), "coalesced reduce_scatter_tensor")
    # batch_isend_irecv: a ring, every rank receiving first.
    right, left = (rank + 1) % size, (rank - 1) % size
    got = torch.empty(5)
    ops = [dist.P2POp(dist.irecv, got, left), dist.P2POp(dist.isend, torch.full((5,),
                                                                                 float(rank)), right)]
    for w in dist.batch_isend_irecv(ops):
        w.wait()
    _expect(torch.all(got == left), "batch_isend_irecv ring")


def case_dtypes(rank, size):
    """Every dtype torch has: reduced where gradsync reduces it, moved otherwise."""
    reduced = [torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.int8,
               torch.uint8, torch.int32, torch.int64, torch.bool, torch.complex64,
               torch.complex128]
    for dt in reduced:
        base = torch.arange(1, 9) % 3
        t = (base + rank).to(dt) if dt != torch.bool else (base + rank) % 2 == 0
        ref = [(base + r).to(dt) if dt != torch.bool else (base + r) % 2 == 0 for r in range(size)]
        x = t.clone()
        dist.all_reduce(x)
        if dt == torch.bool:
            want = torch.stack(ref).any(0)
        else:
            want = sum(ref[1:], ref[0].clone())
        _expect(torch.equal(x, want), "all_reduce SUM %s: %s, want %s" % (dt, x, want))
        z = t.clone()
        work = dist.all_reduce(z, async_op=True)  # the same through a Work and its future
        fut = work.get_future()
        work.wait()
        got = fut.wait()[0]  # torch hands a complex tensor to the backend as its real view
        got = torch.view_as_complex(got) if dt.is_complex else got
        _expect(torch.equal(z, want) and torch.equal(got, want), "async all_reduce SUM %s" % dt)
        y = t.clone()
        dist.all_reduce(y, op=R.MAX if not dt.is_complex else R.SUM)
        if not dt.is_complex:
            want = torch.stack(ref).max(0).values if dt != torch.bool else torch.stack(ref).any(0)
            _expect(torch.equal(y, want), "all_reduce MAX %s" % dt)
    moved = [torch.int16, torch.float8_e4m3fn, torch.float8_e5m2, torch.uint16] \
        if hasattr(torch, "uint16") else [torch.int16]
    for dt in moved:
        src = (torch.arange(16) + rank).to(torch.float32).to(dt)
        out = [torch.empty(16, dtype=dt) for _ in range(size)]
        dist.all_gather(out, src)
        for r in range(size):
            want = (torch.arange(16) + r).to(torch.float32).to(dt)
            _expect(torch.equal(out[r].view(torch.uint8), want.view(torch.uint8)),
                    "all_gather %s from rank %d" % (dt, r))
        b = src.clone()
        dist.broadcast(b, src=size - 1)
        want = (torch.arange(16) + size - 1).to(torch.float32).to(dt)
        _expect(torch.equal(b.view(torch.uint8), want.view(torch.uint8)), "broadcast %s" % dt)


def case_bad_input(rank, size):
    def refused(fn, words):
        try:
            fn()
        except (RuntimeError, ValueError) as exc:
            _expect(any(w in str(exc) for w in words), "message: %s" % exc)
        else:
            raise AssertionError("accepted: %s" % words)

    sp = torch.ones(4).to_sparse()
    refused(lambda: dist.all_reduce(sp), ["sparse", "Sparse"])
    t = torch.ones(4)
    # (Mixed devices need a second device type: a meta tensor never reaches a backend, torch's
    # meta kernels answer for it. The GPU run checks cpu + cuda in one call.)
    refused(lambda: dist.all_gather_into_tensor(torch.empty(4 * size, dtype=torch.float64), t),
            ["must hold"])
    refused(lambda: dist.all_gather_into_tensor(torch.empty(3), t), ["must hold"])
    i16 = torch.ones(3, dtype=torch.int16)
    refused(lambda: dist.all_reduce(i16), ["cannot reduce"])
    refused(lambda: dist.all_reduce(torch.ones(3, dtype=torch.int32), op=R.AVG),
            ["AVG needs a floating-point"])
    refused(lambda: dist.broadcast(t, src=size + 3), ["root", "rank", "Invalid"])
    refused(lambda: dist.all_reduce(t, op=R.BAND), ["bitwise ops need integer"])
    refused(lambda: dist.all_reduce(torch.ones(2, dtype=torch.complex64), op=R.MAX),
            ["complex", "MAX"])
    _expect(torch.all(t == 1) and torch.all(i16 == 1), "a refused call wrote its tensor")
    dist.all_reduce(t)  # nothing was sent: the communicator still matches up
    _expect(torch.all(t == size), "after the refusals: %s" % t)


def case_errors_are_dist_backend_errors(rank, size):
    """A failure inside gradsync arrives as DistBackendError with gradsync's sentence."""
    # A receive of a message longer than the tensor: GS_ERR_TRUNCATED on the receiver.
    if rank == 0:
        dist.send(torch.ones(8), dst=1)
    elif rank == 1:
        try:
            dist.recv(torch.empty(4), src=0)
        except dist.DistBackendError as exc:
            _expect("gradsync backend: recv" in str(exc), "message: %s" % exc)
        else:
            raise AssertionError("a short receive buffer was accepted")
    dist.barrier()


def case_future_callback_waits_on_another(rank, size):
    """A then() callback that waits on a second all-reduce's future (torch's PowerSGD hook
    does this): it runs on a completion thread, and the second future must still complete."""
    t = torch.ones(1 << 16)
    fut = dist.all_reduce(t, async_op=True).get_future()

    def cb(f):
        u = torch.ones(16)
        return dist.all_reduce(u, async_op=True).get_future().wait()[0]
    v = fut.then(cb).wait()
    _expect(torch.all(v == size) and torch.all(t == size), "chained futures: %s" % v[:2])


def case_poll_beside_the_future(rank, size):
    """is_completed() polled while the completion thread finishes the same Work (its future
    was asked for): the look hands its claim back, and the future still completes."""
    for i in range(300):
        t = torch.full((64,), float(rank))
        w = dist.all_reduce(t, async_op=True)
        fut = w.get_future()
        while not w.is_completed():
            pass
        _expect(torch.all(fut.wait()[0] == sum(range(size))), "round %d" % i)


def case_ddp_powersgd_on_gradsync(rank, size):
    from torch.distributed.algorithms.ddp_comm_hooks import powerSGD_hook as psgd
    torch.manual_seed(3)
    model = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 4))
    ddp = torch.nn.parallel.DistributedDataParallel(model, bucket_cap_mb=4)
    state = psgd.PowerSGDState(process_group=None, matrix_approximation_rank=1,
                               start_powerSGD_iter=2)
    ddp.register_comm_hook(state, psgd.powerSGD_hook)
    opt = torch.optim.SGD(ddp.parameters(), lr=0.01)
    g = torch.Generator().manual_seed(rank)
    for _ in range(5):
        loss = ddp(torch.randn(8, 32, generator=g)).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
    flat = torch.cat([p.detach().reshape(-1) for p in model.parameters()])
    mean = flat.clone()
    dist.all_reduce(mean, op=R.AVG)
    _expect(torch.allclose(flat, mean, atol=1e-6), "PowerSGD left the ranks' parameters apart")


def _mlp(seed):
    torch.manual_seed(seed)
    return torch.nn.Sequential(torch.nn.Linear(16, 64), torch.nn.ReLU(), torch.nn.Linear(64, 4))


def _train(model, rank, steps=6, wrap=lambda m: m):
    net = wrap(model)
    opt = torch.optim.SGD(net.parameters(), lr=0.05)
    g = torch.Generator().manual_seed(1234 + rank)
    losses = []
    for _ in range(steps):
        x = torch.randn(8, 16, generator=g)
        y = torch.randn(8, 4, generator=g)
        loss = torch.nn.functional.mse_loss(net(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(float(loss))
    return losses


def case_ddp_equals_gloo(rank, size):
    gloo = dist.new_group(backend="gloo")
    ddp = torch.nn.parallel.DistributedDataParallel
    ours = _train(_mlp(7), rank, wrap=lambda m: ddp(m))
    theirs = _train(_mlp(7), rank, wrap=lambda m: ddp(m, process_group=gloo))
    for a, b in zip(ours, theirs):
        _expect(abs(a - b) <= TOL * max(1.0, abs(b)), "DDP losses %s vs gloo %s" % (ours, theirs))


def _fsdp_losses(rank, mesh):
    from torch.distributed.fsdp import fully_shard

    def wrap(m):
        for layer in m:
            if isinstance(layer, torch.nn.Linear):
                fully_shard(layer, mesh=mesh)
        return fully_shard(m, mesh=mesh)
    return _train(_mlp(11), rank, wrap=wrap)


def case_fsdp2_equals_gloo(rank, size):
    from torch.distributed.device_mesh import DeviceMesh, init_device_mesh
    ours = _fsdp_losses(rank, init_device_mesh("cpu", (size,)))
    gloo = dist.new_group(backend="gloo")
    theirs = _fsdp_losses(rank, DeviceMesh.from_group(gloo, "cpu"))
    for a, b in zip(ours, theirs):
        _expect(abs(a - b) <= TOL * max(1.0, abs(b)), "FSDP2 losses %s vs gloo %s"
                % (ours, theirs))


def case_hsdp_2x2_mesh(rank, size):
    """replicate x shard on a 2x2 mesh: its groups come from gs_comm_create_group; the
    losses equal 1-D FSDP2's on gloo (the same model, data and steps)."""
    from torch.distributed.device_mesh import DeviceMesh, init_device_mesh
    from gradsync.torch import _c10d
    mesh = init_device_mesh("cpu", (2, size // 2), mesh_dim_names=("replicate", "shard"))
    for name in ("replicate", "shard"):
        g = mesh.get_group(name)
        _expect(_c10d.extension().is_gradsync(g._get_backend(torch.device("cpu"))),
                "the %s group is not gradsync's" % name)
        x = torch.ones(1) * rank
        dist.all_reduce(x, group=g)
        members = dist.get_process_group_ranks(g)
        _expect(float(x) == sum(members), "%s group %s: sum %s" % (name, members, x))
    ours = _fsdp_losses(rank, mesh)
    gloo = dist.new_group(backend="gloo")
    theirs = _fsdp_losses(rank, DeviceMesh.from_group(gloo, "cpu"))
    for a, b in zip(ours, theirs):
        _expect(abs(a - b) <= 1e-4 * max(1.0, abs(b)), "HSDP losses %s vs FSDP2 on gloo %s"
                % (ours, theirs))


CASES = {name[5:]: fn for name, fn in sorted(globals().items()) if name.startswith("case_")}
if os.environ.get("GSTEST_TORCH_CASES"):
    CASES = {k: v for k, v in CASES.items() if k in os.environ["GSTEST_TORCH_CASES"].split(",")}


def run_suite(rank, size):
    import traceback
    out = {}
    for name, fn in CASES.items():
        try:
            fn(rank, size)
            out[name] = None
        except BaseException:  # noqa: BLE001 - reported per case
            out[name] = traceback.format_exc()
    return out


_RESULTS = {}


def _suite():
    if "r" not in _RESULTS:
        _RESULTS["r"] = run_ranks(run_suite, SIZE, timeout_s=240)
    return _RESULTS["r"]


@pytest.mark.parametrize("case", sorted(CASES))
def test_c10d(case):
    errors = ["rank %d: %s" % (r, res[case]) for r, res in enumerate(_suite()) if res[case]]
    assert not errors, "\n".join(errors)


def gradsync_groups_beside_gloo(rank, size):
    """The default group is gloo's: gradsync groups then have no gradsync parent and make
    their own communicator, their address agreed through the group's store."""
    import gradsync.torch  # noqa: F401 - registers "gradsync"
    from gradsync.torch import _c10d
    whole = dist.new_group(backend="gradsync")
    pair = dist.new_group(ranks=[0, 1], backend="gradsync")
    _expect(_c10d.gradsync_backend(whole) is not None, "new_group(backend='gradsync')")
    x = torch.full((3,), float(rank))
    dist.all_reduce(x, group=whole)
    _expect(torch.all(x == sum(range(size))), "all_reduce on the gradsync group: %s" % x)
    if rank < 2:
        y = torch.ones(2)
        dist.all_reduce(y, group=pair)
        _expect(torch.all(y == 2), "all_reduce on the pair: %s" % y)
    dist.barrier()
    return True


def test_gradsync_groups_beside_a_gloo_default():
    assert all(run_ranks(gradsync_groups_beside_gloo, SIZE, backend="gloo", timeout_s=120))
