# SPDX-License-Identifier: Apache-2.0
"""Train a small MLP with DistributedDataParallel three ways, on CPU processes.

    --mode gloo       DDP over the gloo backend (torch's own)
    --mode gradsync   DDP over the "gradsync" torch.distributed backend
    --mode hook       DDP over gloo, gradients all-reduced by gradsync's
                      compression hook (--codec int8 by default, error feedback)

Launch: by default it spawns --nprocs local ranks itself (torch.multiprocessing).
Under torchrun or gsrun (RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT set) it runs
as the one rank the launcher started:

    python3 examples/torch/train_ddp.py --mode gradsync --nprocs 4 --steps 50
    torchrun --nproc_per_node 4 examples/torch/train_ddp.py --mode hook
    build/tools/gsrun -n 4 python3 examples/torch/train_ddp.py --mode gloo

Everything is deterministic: the data (a fixed random teacher network labels
random inputs), the initial weights (same seed on every rank) and the split
(rank r takes rows r, r+size, ... of each global batch). Rank 0 prints its
loss every step, so two runs can be compared line by line.
"""

import argparse
import datetime
import os
import sys

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn as nn

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.normpath(os.path.join(HERE, "..", "..", "python")))


def make_model(width, depth, inputs=32, classes=10):
    layers, last = [], inputs
    for _ in range(depth):
        layers += [nn.Linear(last, width), nn.ReLU()]
        last = width
    layers.append(nn.Linear(last, classes))
    return nn.Sequential(*layers)


def make_data(n, inputs=32, classes=10):
    g = torch.Generator().manual_seed(1234)
    x = torch.randn(n, inputs, generator=g)
    teacher = torch.randn(inputs, classes, generator=g)
    y = (x @ teacher + 0.5 * torch.randn(n, classes, generator=g)).argmax(dim=1)
    return x, y


def setup(args, rank, size):
    if args.mode in ("gradsync", "hook"):
        import gradsync.torch  # noqa: F401  registers the "gradsync" backend
    backend = "gradsync" if args.mode == "gradsync" else "gloo"
    dist.init_process_group(backend, rank=rank, world_size=size,
                            timeout=datetime.timedelta(seconds=args.timeout))


def build_ddp(args, model):
    ddp = nn.parallel.DistributedDataParallel(model, bucket_cap_mb=args.bucket_mb)
    state = None
    if args.mode == "hook":
        from gradsync.torch import GradsyncHookState, gradsync_allreduce_hook

        state = GradsyncHookState(codec=args.codec)
        ddp.register_comm_hook(state, gradsync_allreduce_hook)
    return ddp, state


def train(rank, size, args):
    setup(args, rank, size)
    torch.manual_seed(0)
    torch.set_num_threads(1)
    model = make_model(args.width, args.depth)
    ddp, state = build_ddp(args, model)
    opt = torch.optim.SGD(ddp.parameters(), lr=args.lr, momentum=0.9)
    x, y = make_data(args.batch * args.steps)
    losses = []
    for step in range(args.steps):
        lo = step * args.batch
        xb, yb = x[lo + rank:lo + args.batch:size], y[lo + rank:lo + args.batch:size]
        opt.zero_grad()
        loss = nn.functional.cross_entropy(ddp(xb), yb)
        loss.backward()
        opt.step()
        losses.append(loss.item())
        if rank == 0:
            print("step %d loss %.7f" % (step, loss.item()), flush=True)
    if state is not None:
        state.close()
    dist.destroy_process_group()
    return losses


def _spawned(rank, size, args, port):
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    train(rank, size, args)


def parse(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--mode", choices=["gloo", "gradsync", "hook"], default="gradsync")
    p.add_argument("--codec", default="int8", help="codec of --mode hook (int8, fp16, sign, ...)")
    p.add_argument("--nprocs", type=int, default=4, help="ranks to spawn without a launcher")
    p.add_argument("--steps", type=int, default=50)
    p.add_argument("--batch", type=int, default=256, help="global batch (split over the ranks)")
    p.add_argument("--width", type=int, default=256)
    p.add_argument("--depth", type=int, default=2)
    p.add_argument("--lr", type=float, default=0.05)
    p.add_argument("--bucket-mb", type=float, default=0.25, dest="bucket_mb",
                   help="DDP bucket cap (small: several buckets, so the hook's per-bucket "
                        "error feedback is exercised)")
    p.add_argument("--timeout", type=float, default=120, help="collective deadline, seconds")
    return p.parse_args(argv)


def main(argv=None):
    args = parse(argv)
    if "RANK" in os.environ and "WORLD_SIZE" in os.environ:
        train(int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"]), args)
        return 0
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    mp.spawn(_spawned, args=(args.nprocs, args, port), nprocs=args.nprocs, join=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
