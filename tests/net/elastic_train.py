# SPDX-License-Identifier: Apache-2.0
"""A small deterministic training job for torchrun's elastic restarts
(tests/net/run_torchrun_elastic.sh): one worker of torchrun, on the "gradsync"
torch.distributed backend (torch 2.x, the C++ extension).

The model is a 2-layer MLP regressing a fixed random teacher. Step n (1-based)
trains on a global batch of --batch rows drawn from a generator seeded by n;
rank r of a world of w takes rows r, r+w, ... (--batch must be a multiple of
every world the job sees). The gradients (and the loss) are averaged over the
ranks with one all_reduce per step, so a step computes the mean gradient of the
whole global batch whatever the world: the losses follow one trajectory, at
world 2 or 4, started once or resumed from a checkpoint (up to the rounding of
a sum taken in another order). --reference trains the same steps in this
process alone (no torch.distributed), the trajectory the test compares with.

Every --ckpt-every steps (and after the last), rank 0 saves the model, the
optimizer (SGD with momentum) and the step to DIR/ckpt.pt, atomically: a
temporary file in DIR, fsync, os.replace. At start every rank loads the
checkpoint if there is one, and the ranks check that they agree on its step.

Lines (stdout, each one write):
  START RANK r WORLD w RESTART c RESUME s PID p   every rank, once set up
  STEP n WORLD w LOSS x RESTART c                rank 0, every step (c: its
                                                 TORCHELASTIC_RESTART_COUNT)
  DONE STEPS n                                   rank 0, at the end
  REF n x                                        --reference, every step
With --markers DIR each rank writes DIR/ready.r<c>.w<w>.<rank> (written to a
temporary name, then renamed) once it has trained its first step after start:
"pid=P rank=R local_rank=L group_rank=G world=W restart=C step=N", so that a
test can kill -9 a worker that is known to be training. With --pause-at N
--pause-world W, a group smaller than W waits before step N (--pause-s at most)
for torchrun to restart it at a larger world, so that a node that joins late
on a loaded machine still finds the job running.
"""

import argparse
import datetime
import os
import sys
import time

import torch
import torch.nn as nn

INPUTS, HIDDEN = 8, 16


def make_model():
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(INPUTS, HIDDEN), nn.Tanh(), nn.Linear(HIDDEN, 1))


def teacher():
    g = torch.Generator().manual_seed(1234)
    return torch.randn(INPUTS, 1, generator=g), torch.randn(1, generator=g)


def batch(step, rows, w_true, b_true):
    """Step @step's global batch: the same on every rank and in every world."""
    g = torch.Generator().manual_seed(100000 + step)
    x = torch.randn(rows, INPUTS, generator=g)
    y = x @ w_true + b_true + 0.01 * torch.randn(rows, 1, generator=g)
    return x, y


def make_opt(model, lr):
    return torch.optim.SGD(model.parameters(), lr=lr, momentum=0.9)


def reference(args):
    """The trajectory of an uninterrupted run, in one process."""
    torch.set_num_threads(1)
    model = make_model()
    opt = make_opt(model, args.lr)
    w_true, b_true = teacher()
    for step in range(1, args.steps + 1):
        x, y = batch(step, args.batch, w_true, b_true)
        opt.zero_grad()
        loss = nn.functional.mse_loss(model(x), y)
        loss.backward()
        opt.step()
        sys.stdout.write("REF %d %.7g\n" % (step, loss.item()))
    sys.stdout.flush()
    return 0


def save(path, model, opt, step):
    tmp = "%s.tmp.%d" % (path, os.getpid())
    with open(tmp, "wb") as f:
        torch.save({"step": step, "model": model.state_dict(), "opt": opt.state_dict()}, f)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def write_marker(mdir, name, text):
    tmp = os.path.join(mdir, ".%s.tmp" % name)
    with open(tmp, "w") as f:
        f.write(text + "\n")
    os.replace(tmp, os.path.join(mdir, name))


def pause(args, world):
    """Wait (every rank, before step --pause-at) for the group to be restarted at a larger
    world: torchrun's agent stops these workers when a node joins. After --pause-s, go on
    (the test then finds that the world never grew)."""
    end = time.monotonic() + args.pause_s
    while time.monotonic() < end:
        time.sleep(0.1)
    sys.stderr.write("elastic_train: still at world %d after %g s at step %d\n"
                     % (world, args.pause_s, args.pause_at))


def train(args):
    import torch.distributed as dist

    import gradsync.torch  # noqa: F401  registers the "gradsync" backend

    torch.set_num_threads(1)
    restart = int(os.environ.get("TORCHELASTIC_RESTART_COUNT", "0"))
    dist.init_process_group("gradsync", timeout=datetime.timedelta(seconds=args.timeout))
    rank, world = dist.get_rank(), dist.get_world_size()
    if args.batch % world:
        raise SystemExit("elastic_train: --batch %d is not a multiple of the world %d"
                         % (args.batch, world))

    model = make_model()
    opt = make_opt(model, args.lr)
    ckpt = os.path.join(args.ckpt_dir, "ckpt.pt")
    start = 0
    if os.path.exists(ckpt):
        with open(ckpt, "rb") as f:
            state = torch.load(f, weights_only=True)
        model.load_state_dict(state["model"])
        opt.load_state_dict(state["opt"])
        start = int(state["step"])
    # Every rank must resume from the same step: rank 0 saves again only after steps that
    # need every rank, but a file replaced between two ranks' reads would split them.
    agree = torch.tensor([start, -start], dtype=torch.int64)
    dist.all_reduce(agree, op=dist.ReduceOp.MAX)
    if int(agree[0]) != start or int(-agree[1]) != start:
        raise SystemExit("elastic_train: rank %d read step %d, others %d..%d"
                         % (rank, start, int(-agree[1]), int(agree[0])))
    sys.stdout.write("START RANK %d WORLD %d RESTART %d RESUME %d PID %d\n"
                     % (rank, world, restart, start, os.getpid()))
    sys.stdout.flush()

    w_true, b_true = teacher()
    params = [p for p in model.parameters()]
    slow = args.slow_rank in (-1, rank)
    for step in range(start + 1, args.steps + 1):
        if step == args.pause_at and world < args.pause_world:
            pause(args, world)
        x, y = batch(step, args.batch, w_true, b_true)
        x, y = x[rank::world], y[rank::world]
        opt.zero_grad()
        loss = nn.functional.mse_loss(model(x), y)
        loss.backward()
        flat = torch.cat([p.grad.reshape(-1) for p in params] + [loss.detach().reshape(1)])
        if slow and args.slow_ms > 0:
            time.sleep(args.slow_ms / 1000.0)
        dist.all_reduce(flat)  # SUM, then the mean over the ranks' equal shares
        flat /= world
        off = 0
        for p in params:
            n = p.numel()
            p.grad.copy_(flat[off:off + n].view_as(p))
            off += n
        opt.step()
        if rank == 0:
            sys.stdout.write("STEP %d WORLD %d LOSS %.7g RESTART %d\n"
                             % (step, world, float(flat[-1]), restart))
            sys.stdout.flush()
            if step % args.ckpt_every == 0 or step == args.steps:
                save(ckpt, model, opt, step)
        if args.markers and step == start + 1:
            write_marker(args.markers, "ready.r%d.w%d.%d" % (restart, world, rank),
                         "pid=%d rank=%d local_rank=%s group_rank=%s world=%d restart=%d "
                         "step=%d" % (os.getpid(), rank, os.environ.get("LOCAL_RANK", "?"),
                                      os.environ.get("GROUP_RANK", "?"), world, restart, step))
    if rank == 0:
        sys.stdout.write("DONE STEPS %d\n" % args.steps)
        sys.stdout.flush()
    dist.destroy_process_group()
    return 0


def parse(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--ckpt-dir", dest="ckpt_dir", help="shared folder of ckpt.pt")
    p.add_argument("--steps", type=int, default=60, help="train until this step")
    p.add_argument("--ckpt-every", dest="ckpt_every", type=int, default=5)
    p.add_argument("--batch", type=int, default=64, help="global batch, a multiple of the world")
    p.add_argument("--lr", type=float, default=0.02)
    p.add_argument("--slow-rank", dest="slow_rank", type=int, default=-2,
                   help="this rank sleeps --slow-ms a step (-1: every rank; default none)")
    p.add_argument("--slow-ms", dest="slow_ms", type=float, default=0.0)
    p.add_argument("--pause-at", dest="pause_at", type=int, default=0,
                   help="before this step, wait --pause-s for a restart at --pause-world "
                        "(a join; 0: never)")
    p.add_argument("--pause-world", dest="pause_world", type=int, default=0)
    p.add_argument("--pause-s", dest="pause_s", type=float, default=120)
    p.add_argument("--markers", help="folder of the ready.r<restart>.w<world>.<rank> files")
    p.add_argument("--timeout", type=float, default=60, help="the group's timeout, seconds")
    p.add_argument("--reference", action="store_true",
                   help="print the uninterrupted trajectory (REF lines) from one process")
    args = p.parse_args(argv)
    if not args.reference and not args.ckpt_dir:
        p.error("--ckpt-dir is needed (or --reference)")
    if args.ckpt_every < 1:
        p.error("--ckpt-every must be at least 1")
    return args


def main(argv=None):
    args = parse(argv)
    return reference(args) if args.reference else train(args)


if __name__ == "__main__":
    sys.exit(main())
