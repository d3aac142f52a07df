# SPDX-License-Identifier: Apache-2.0
"""A rank killed during DDP training on the torch 2.x C++ backend (4 spawned ranks): every
survivor's pending all-reduce fails within 2 s of the death with a DistBackendError that
names the dead rank, never a hang; then dist.shrink_group([3]) (gs_comm_shrink) gives the
3 survivors a new default group, DDP is rebuilt on it, and training goes on with the
survivors' parameters identical."""

import time

import pytest

torch = pytest.importorskip("torch")
dist = pytest.importorskip("torch.distributed")
if int(torch.__version__.split(".")[0]) < 2:
    pytest.skip("torch %s: the C++ backend is for torch 2.x" % torch.__version__,
                allow_module_level=True)

from dist_harness import report_and_die, run_ranks  # noqa: E402

SIZE = 4
DEAD = 3


def _step(net, opt, g):
    x = torch.randn(8, 16, generator=g)
    loss = torch.nn.functional.mse_loss(net(x), torch.zeros(8, 4))
    opt.zero_grad()
    loss.backward()
    opt.step()
    return float(loss)


def train_kill_shrink(rank, size):
    torch.manual_seed(5)
    model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 4))
    ddp = torch.nn.parallel.DistributedDataParallel(model)
    opt = torch.optim.SGD(ddp.parameters(), lr=0.01)
    g = torch.Generator().manual_seed(rank)
    for _ in range(3):
        _step(ddp, opt, g)
    dist.barrier()
    if rank == DEAD:
        time.sleep(0.5)  # the survivors are inside their next step's all-reduce
        report_and_die(rank, {"died": time.time()})
    t0 = time.time()
    err = None
    try:
        for _ in range(1000):  # bounded: the step fails within the communicator's deadline
            _step(ddp, opt, g)
    except Exception as exc:  # noqa: BLE001 - DDP may wrap the backend's error
        err = exc
    failed_at = time.time()
    if err is None:
        raise AssertionError("1000 steps passed with rank %d dead" % DEAD)
    text = "%s: %s" % (type(err).__name__, err)
    new = dist.shrink_group([DEAD])
    ws, r = dist.get_world_size(), dist.get_rank()
    del ddp, opt
    ddp = torch.nn.parallel.DistributedDataParallel(model)
    opt = torch.optim.SGD(ddp.parameters(), lr=0.01)
    losses = [_step(ddp, opt, g) for _ in range(3)]
    flat = torch.cat([p.detach().reshape(-1) for p in model.parameters()])
    mean = flat.clone()
    dist.all_reduce(mean, op=dist.ReduceOp.AVG)
    return {"error": text, "failed_at": failed_at, "t0": t0, "size": ws, "rank": r,
            "new": new is not None, "losses": losses,
            "same": bool(torch.allclose(flat, mean, rtol=0, atol=1e-6))}


def test_kill_then_shrink():
    res = run_ranks(train_kill_shrink, SIZE, timeout_s=120)
    died = res[DEAD]["died"]
    for rank in range(SIZE):
        if rank == DEAD:
            continue
        r = res[rank]
        assert "gradsync" in r["error"] and ("rank %d" % DEAD in r["error"] or
                                             "peer %d" % DEAD in r["error"]), r["error"]
        assert r["failed_at"] - died < 2.0, "rank %d failed %.2f s after the death: %s" % (
            rank, r["failed_at"] - died, r["error"])
        assert r["size"] == SIZE - 1 and r["rank"] == rank, r
        assert all(loss == loss for loss in r["losses"]), r["losses"]  # finite, not NaN
        assert r["same"], "rank %d's parameters differ from the survivors' mean" % rank
