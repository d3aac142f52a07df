# SPDX-License-Identifier: Apache-2.0
"""gloo vs the "gradsync" torch.distributed backend, in one run, on local CPU ranks.

    python3 bench/torch/bench_torch.py --nprocs 4 --steps 20 --iters 10

Spawns --nprocs ranks (torch.multiprocessing). Every rank joins a gloo default
group and a gradsync group over the same ranks, then, interleaving the two
backends round by round so that both see the same machine load:

1. DDP step time of an MLP (examples/torch/train_ddp.py's model, --width wide,
   --depth deep; forward, backward with DDP's bucketed all-reduce, SGD step):
   median over --steps steps after --warmup, where one step's time is the
   slowest rank's; also DDP over gloo with gradsync's compression hook
   (--hook-codec, int8 by default) as a third variant;
2. torch.distributed.all_reduce (SUM, float32) at 1, 4, 16 and 64 MiB: median
   over --iters calls after a warm-up, each call started after a gloo barrier
   and timed as the slowest rank's.

Prints one table per part with the ratio gloo / gradsync (> 1: gradsync faster).
"""

import argparse
import datetime
import os
import socket
import statistics
import sys
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.normpath(os.path.join(HERE, "..", "..", "python")))
sys.path.insert(0, os.path.normpath(os.path.join(HERE, "..", "..", "examples", "torch")))


def slowest(times, group):
    """Per-index max over the ranks of a list of times (gathered over gloo)."""
    t = torch.tensor(times, dtype=torch.float64)
    dist.all_reduce(t, op=dist.ReduceOp.MAX, group=group)
    return t.tolist()


def bench_ddp(args, rank, size, groups, gloo):
    from train_ddp import make_data, make_model

    from gradsync.torch import GradsyncHookState, gradsync_allreduce_hook

    variants = dict(groups)
    if args.hook_codec:
        variants["hook"] = groups["gloo"]
    models, opts, state = {}, {}, None
    for name, group in variants.items():
        torch.manual_seed(0)
        model = make_model(args.width, args.depth)
        models[name] = torch.nn.parallel.DistributedDataParallel(model, process_group=group)
        if name == "hook":
            state = GradsyncHookState(group, codec=args.hook_codec)
            models[name].register_comm_hook(state, gradsync_allreduce_hook)
        opts[name] = torch.optim.SGD(models[name].parameters(), lr=0.01)
    nparams = sum(p.numel() for p in models["gloo"].parameters())
    x, y = make_data(args.batch)
    xb, yb = x[rank::size], y[rank::size]
    times = {name: [] for name in variants}
    for rnd in range(args.warmup + args.steps):
        for name in variants:
            dist.barrier(group=gloo)
            t0 = time.perf_counter()
            opts[name].zero_grad()
            torch.nn.functional.cross_entropy(models[name](xb), yb).backward()
            opts[name].step()
            dt = time.perf_counter() - t0
            if rnd >= args.warmup:
                times[name].append(dt)
    if state is not None:
        state.close()
    return nparams, {name: statistics.median(slowest(t, gloo)) for name, t in times.items()}


def bench_allreduce(args, groups, gloo):
    out = []
    for mib in args.sizes:
        n = mib * (1 << 20) // 4
        bufs = {name: torch.ones(n) for name in groups}
        times = {name: [] for name in groups}
        for it in range(args.warmup_iters + args.iters):
            for name, group in groups.items():
                dist.barrier(group=gloo)
                t0 = time.perf_counter()
                dist.all_reduce(bufs[name], group=group)
                dt = time.perf_counter() - t0
                if it >= args.warmup_iters:
                    times[name].append(dt)
        out.append((mib, {name: statistics.median(slowest(t, gloo)) for name, t in times.items()}))
        del bufs
    return out


def run(rank, size, args, port):
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    torch.set_num_threads(args.threads)
    import gradsync.torch  # noqa: F401  registers the backend

    timeout = datetime.timedelta(seconds=args.timeout)
    dist.init_process_group("gloo", rank=rank, world_size=size, timeout=timeout)
    gloo = dist.new_group(backend="gloo", timeout=timeout)
    groups = {"gloo": dist.new_group(backend="gloo", timeout=timeout),
              "gradsync": dist.new_group(backend="gradsync", timeout=timeout)}
    if not args.skip_ddp:
        nparams, ddp = bench_ddp(args, rank, size, groups, gloo)
        if rank == 0:
            print("DDP step, MLP %d x %d (%d parameters, %.1f MiB of gradients), %d ranks, "
                  "median of %d steps after %d warm-up" % (args.width, args.depth, nparams,
                                                            nparams * 4 / 2**20, size,
                                                            args.steps, args.warmup))
            print("%12s %12s %16s" % ("gloo ms", "gradsync ms", "gloo/gradsync"))
            print("%12.2f %12.2f %16.2f" % (ddp["gloo"] * 1e3, ddp["gradsync"] * 1e3,
                                             ddp["gloo"] / ddp["gradsync"]), flush=True)
            if "hook" in ddp:
                print("gloo + gradsync %s hook: %.2f ms (gloo/hook %.2f)"
                      % (args.hook_codec, ddp["hook"] * 1e3, ddp["gloo"] / ddp["hook"]),
                      flush=True)
    ar = bench_allreduce(args, groups, gloo)
    if rank == 0:
        print("\nall_reduce float32 SUM, %d ranks, median of %d after %d warm-up"
              % (size, args.iters, args.warmup_iters))
        print("%8s %12s %12s %16s" % ("MiB", "gloo ms", "gradsync ms", "gloo/gradsync"))
        for mib, t in ar:
            print("%8d %12.2f %12.2f %16.2f" % (mib, t["gloo"] * 1e3, t["gradsync"] * 1e3,
                                                 t["gloo"] / t["gradsync"]), flush=True)
    dist.barrier(group=gloo)
    dist.destroy_process_group()


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--nprocs", type=int, default=4)
    p.add_argument("--steps", type=int, default=20, help="timed DDP steps per backend")
    p.add_argument("--warmup", type=int, default=3, help="DDP warm-up steps per backend")
    p.add_argument("--iters", type=int, default=10, help="timed all-reduces per size and backend")
    p.add_argument("--warmup-iters", type=int, default=2, dest="warmup_iters")
    p.add_argument("--sizes", type=lambda s: [int(v) for v in s.split(",")], default=[1, 4, 16, 64],
                   help="all-reduce sizes in MiB, comma separated")
    p.add_argument("--width", type=int, default=1024)
    p.add_argument("--depth", type=int, default=4)
    p.add_argument("--batch", type=int, default=256)
    p.add_argument("--threads", type=int, default=1, help="torch intra-op threads per rank")
    p.add_argument("--hook-codec", default="int8", dest="hook_codec",
                   help="also time DDP over gloo with gradsync's hook and this codec "
                        "('' to skip)")
    p.add_argument("--skip-ddp", action="store_true", dest="skip_ddp")
    p.add_argument("--timeout", type=float, default=300)
    args = p.parse_args(argv)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    mp.spawn(run, args=(args.nprocs, args, port), nprocs=args.nprocs, join=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
