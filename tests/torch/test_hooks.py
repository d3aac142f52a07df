# SPDX-License-Identifier: Apache-2.0
"""The DDP communication hook: averages like DDP's own all-reduce, keeps one
error-feedback residual per bucket, and works over gloo and gradsync groups."""

import pytest

torch = pytest.importorskip("torch")
dist = pytest.importorskip("torch.distributed")

from dist_harness import run_ranks  # noqa: E402


def _grads(rank, size, codec, bucket_cap_mb, steps=1, width=64):
    from gradsync.torch import GradsyncHookState, gradsync_allreduce_hook

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(16, width), torch.nn.Tanh(),
                                torch.nn.Linear(width, 4 * width), torch.nn.Tanh(),
                                torch.nn.Linear(4 * width, 4))
    ref = torch.nn.Sequential(torch.nn.Linear(16, width), torch.nn.Tanh(),
                              torch.nn.Linear(width, 4 * width), torch.nn.Tanh(),
                              torch.nn.Linear(4 * width, 4))
    ref.load_state_dict(model.state_dict())
    ddp = torch.nn.parallel.DistributedDataParallel(model, bucket_cap_mb=bucket_cap_mb)
    state = GradsyncHookState(codec=codec)
    ddp.register_comm_hook(state, gradsync_allreduce_hook)
    g = torch.Generator().manual_seed(3)
    worst = 0.0
    for _ in range(steps):
        x, y = torch.randn(8 * size, 16, generator=g), torch.randn(8 * size, 4, generator=g)
        ddp.zero_grad()
        ref.zero_grad()
        torch.nn.functional.mse_loss(ddp(x[rank::size]), y[rank::size]).backward()
        sum(torch.nn.functional.mse_loss(ref(x[r::size]), y[r::size]) for r in range(size)) \
            .div(size).backward()
        # Relative to the largest gradient of the model: a codec block spans
        # parameters, so a small bias next to large weights shares their scale.
        got = torch.cat([p.grad.reshape(-1) for p in model.parameters()])
        want = torch.cat([q.grad.reshape(-1) for q in ref.parameters()])
        worst = max(worst, float((got - want).abs().max() / want.abs().max()))
    efs = {i: (ef.count, ef.dtype.name) for i, ef in state._ef.items()}
    pg = dist.distributed_c10d._get_default_group()
    shared = state.comm is getattr(pg, "comm", None)
    if int(torch.__version__.split(".")[0]) >= 2:
        from gradsync.torch import _c10d
        ext = _c10d.extension()
        backend = pg._get_backend(torch.device("cpu"))
        shared = ext.is_gradsync(backend) and state.comm is not None and \
            state.comm.communicator._h == ext.comm_handle(backend)
    state.close()
    return worst, efs, shared


def test_hook_plain_average_matches_reference_over_gloo():
    for worst, efs, shared in run_ranks(_grads, 3, "hook", args=(None, 0.001, 2)):
        assert worst < 1e-5, "plain average differs by %g (relative)" % worst
        assert efs == {} and not shared


def test_hook_int8_keeps_one_residual_per_bucket():
    # 530k parameters (2 MiB): DDP's first bucket holds 1 MiB, the rest go in 0.25 MiB ones.
    res = run_ranks(_grads, 4, "hook", args=("int8", 0.25, 3, 360))
    for worst, efs, _ in res:
        # int8: two roundings of at most 1/254 of a block's largest value, plus the
        # residual error feedback carries into the next step (measured 1.4%).
        assert worst < 0.05, "int8 average off by %g (relative)" % worst
        assert len(efs) >= 2, "expected several buckets, got %s" % efs
        assert all(dtype == "FLOAT32" and count > 0 for count, dtype in efs.values())
    assert all(r[1] == res[0][1] for r in res), "ranks disagree on the buckets"


def test_hook_over_gradsync_backend_shares_its_communicator():
    for worst, efs, shared in run_ranks(_grads, 2, "gradsync", args=("fp16", 25, 1)):
        assert shared, "the hook made a second communicator over a gradsync group"
        assert worst < 2e-3, "fp16 average off by %g (relative)" % worst
        assert len(efs) == 1


def _borrowed(rank, size, port):
    import gradsync
    from gradsync.torch import GradsyncHookState, gradsync_allreduce_hook

    comm = gradsync.Communicator(rank=rank, size=size, master_addr="127.0.0.1",
                                 master_port=port, timeout_ms=20000)
    torch.manual_seed(0)
    model = torch.nn.Linear(6, 3)
    ddp = torch.nn.parallel.DistributedDataParallel(model)
    state = GradsyncHookState(comm=comm, codec=None)
    ddp.register_comm_hook(state, gradsync_allreduce_hook)
    torch.manual_seed(rank + 1)
    ddp(torch.randn(5, 6)).sum().backward()
    want = model.weight.grad.clone()
    dist.all_reduce(want)  # gloo: the hook's result is already the average on every rank
    state.close()
    comm.close()
    return float((want / size - model.weight.grad).abs().max())


def test_hook_on_a_gradsync_communicator():
    from dist_harness import free_port

    for err in run_ranks(_borrowed, 2, "hook", args=(free_port(),)):
        assert err < 1e-6, "hook over gradsync.Communicator: off by %g" % err
