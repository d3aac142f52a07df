# SPDX-License-Identifier: Apache-2.0
"""FSDP2 step time with gradsync's compressed sharded collectives: one rank of one mode.

    RANK=r WORLD_SIZE=n MASTER_ADDR=.. MASTER_PORT=.. [GS_SOCKET_IFNAME=nl<h>] \\
    GRADSYNC_LIBRARY=build/libgradsync.so GRADSYNC_TORCH_EXTENSION=build/torch-ext/_C...so \\
    PYTHONPATH=python OMP_NUM_THREADS=1 <torch 2.x python> bench/torch/fsdp_step.py \\
        --mode gs-ag=int8,rs=int4 --out result.json

bench/net/bench_fsdp.sh starts one rank per lab host with this (lib_lab.sh sets the
launcher variables) and runs the modes interleaved over rounds. Modes:

  compute              no communication: every rank runs the same MLP unsharded on its own
                       batch (forward, backward, SGD step), all ranks at once, so the CPU is
                       shared as in the sharded runs; a gloo group only carries the barrier
                       before each step and the final time reduction. Its median is the
                       compute-only step time the communication share is measured against.
  gloo                 FSDP2 on a "gloo" default group (torch's peer).
  gs                   FSDP2 on a "gradsync" default group, uncompressed.
  gs-ag=A,rs=R         FSDP2 on a "gradsync" default group with
                       pg_options=gradsync.torch.Options(allgather=A, reduce_scatter=R,
                       error_feedback="off"): the weights' all-gathers (forward and
                       backward) use codec A, the gradients' reduce-scatters codec R.

FSDP2: fully_shard on every Linear and on the root, on a DeviceMesh over the default
group, CPU, float32, reshard_after_forward default (the layers all-gather again in the
backward). The timed step is zero_grad, forward, cross-entropy, backward (which waits for
the reduce-scatters) and the SGD step, after a barrier on a separate gloo group (the same
control traffic in every mode); --warmup steps, then --steps timed ones; a step's time is
the slowest rank's (a MAX reduction after the last step); the JSON has every step and the
median. The wire bytes are measured: the host interface's tx_bytes (sysfs, the namespace's
own link when GS_SOCKET_IFNAME names it) over the timed steps, per step and rank, TCP/IP
headers and the barriers included. A compressed run also records the backend's counters
(compression_stats) and fails when any all-gather or reduce-scatter ran uncompressed, and
each codec's encoded size of one rank's shard of the model (Codec.encoded_size).
"""

import argparse
import datetime
import json
import os
import statistics
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "..", "python"))
from mlp import mlp  # noqa: E402

INPUTS, CLASSES = 32, 10


def parse_mode(mode):
    """(backend, allgather codec, reduce_scatter codec) of a --mode word."""
    if mode in ("compute", "gloo"):
        return mode, None, None
    if mode == "gs":
        return "gradsync", None, None
    if mode.startswith("gs-"):
        kv = dict(p.split("=", 1) for p in mode[3:].split(",") if "=" in p)
        if set(kv) - {"ag", "rs"} or not kv or len(kv) != len(mode[3:].split(",")):
            raise SystemExit("fsdp_step: mode %r: want gs-ag=CODEC,rs=CODEC" % mode)
        return "gradsync", kv.get("ag"), kv.get("rs")
    raise SystemExit("fsdp_step: unknown mode %r (compute, gloo, gs, gs-ag=A,rs=R)" % mode)


def tx_bytes():
    name = os.environ.get("GS_SOCKET_IFNAME")
    names = [name] if name else [n for n in os.listdir("/sys/class/net") if n != "lo"]
    total = 0
    for n in names:
        try:
            with open("/sys/class/net/%s/statistics/tx_bytes" % n) as f:
                total += int(f.read())
        except OSError:
            return -1
    return total


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--mode", required=True)
    p.add_argument("--width", type=int, default=768)
    p.add_argument("--depth", type=int, default=3, help="hidden layers")
    p.add_argument("--batch", type=int, default=64, help="samples per rank and step")
    p.add_argument("--warmup", type=int, default=2)
    p.add_argument("--steps", type=int, default=6)
    p.add_argument("--threads", type=int, default=1, help="torch intra-op threads")
    p.add_argument("--timeout", type=float, default=120, help="process groups' timeout, s")
    p.add_argument("--out", help="rank 0 writes the result JSON here (else stdout)")
    args = p.parse_args(argv)
    backend, ag, rs = parse_mode(args.mode)

    if os.environ.get("GS_SOCKET_IFNAME"):  # gloo on the lab host's own interface
        os.environ.setdefault("GLOO_SOCKET_IFNAME", os.environ["GS_SOCKET_IFNAME"])
    import torch
    import torch.distributed as dist
    torch.set_num_threads(args.threads)
    rank, size = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    timeout = datetime.timedelta(seconds=args.timeout)
    opts = None
    codecs = {}
    if backend == "gradsync":
        import gradsync
        import gradsync.torch  # noqa: F401 - registers "gradsync"
        from gradsync.torch import Options
        kinds = [k.name.lower() for k in gradsync.CodecKind]
        for c in (ag, rs):
            if c is not None and c not in kinds:
                raise SystemExit("fsdp_step: no codec %r in this gradsync (CodecKind: %s)"
                                 % (c, ", ".join(kinds)))
        if ag or rs:
            opts = Options(allgather=ag, reduce_scatter=rs, error_feedback="off")
    dist.init_process_group("gloo" if backend == "compute" else backend, rank=rank,
                            world_size=size, timeout=timeout,
                            **({"pg_options": opts} if opts is not None else {}))
    ctl = dist.new_group(backend="gloo", timeout=timeout) if backend != "compute" \
        else dist.group.WORLD

    torch.manual_seed(0)
    model = mlp(INPUTS, args.width, args.depth, CLASSES)
    nparams = sum(q.numel() for q in model.parameters())
    if backend != "compute":
        from torch.distributed.device_mesh import DeviceMesh
        from torch.distributed.fsdp import fully_shard
        mesh = DeviceMesh.from_group(dist.group.WORLD, "cpu")
        for layer in model:
            if isinstance(layer, torch.nn.Linear):
                fully_shard(layer, mesh=mesh)
        fully_shard(model, mesh=mesh)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    g = torch.Generator().manual_seed(1234 + rank)
    x = torch.randn(args.batch, INPUTS, generator=g)
    y = torch.randint(0, CLASSES, (args.batch,), generator=g)

    times, losses = [], []
    tx0 = None
    for step in range(args.warmup + args.steps):
        if step == args.warmup:
            tx0 = tx_bytes()
        dist.barrier(group=ctl)
        t0 = time.perf_counter()
        opt.zero_grad()
        loss = torch.nn.functional.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        dt = time.perf_counter() - t0
        losses.append(float(loss.detach()))
        if step >= args.warmup:
            times.append(dt)
    tx1 = tx_bytes()
    tx = (tx1 - tx0) / args.steps if tx0 is not None and tx0 >= 0 and tx1 >= 0 else -1.0
    t = torch.tensor(times + [tx], dtype=torch.float64)
    dist.all_reduce(t, op=dist.ReduceOp.MAX, group=ctl)
    txs = torch.tensor([tx], dtype=torch.float64)
    dist.all_reduce(txs, group=ctl)  # sum over the ranks
    stats = None
    if backend == "gradsync":
        from gradsync.torch import _c10d
        stats = _c10d.compression_stats(dist.group.WORLD)
        if opts is not None:
            plain = [k for k in ("allgather", "reduce_scatter")
                     if (ag if k == "allgather" else rs) is not None and
                     (stats.get(k + "_uncompressed", 0) or not stats.get(k + "_compressed", 0))]
            if plain:
                raise SystemExit("fsdp_step: %s: %s ran uncompressed: %s"
                                 % (args.mode, " and ".join(plain), stats))
        shard = -(-nparams // size)
        for what, c in (("allgather", ag), ("reduce_scatter", rs)):
            if c is not None:
                codecs[what] = {"codec": c, "elements": shard,
                                "bytes": gradsync.Codec(c).encoded_size(shard),
                                "ratio": 4.0 * shard / gradsync.Codec(c).encoded_size(shard)}
    dist.barrier(group=ctl)
    dist.destroy_process_group()
    if rank != 0:
        return 0
    steps = t[:-1].tolist()
    res = {"mode": args.mode, "backend": backend, "allgather": ag, "reduce_scatter": rs,
           "ranks": size, "params": nparams, "width": args.width, "depth": args.depth,
           "batch": args.batch, "warmup": args.warmup, "steps": steps,
           "median_s": statistics.median(steps), "tx_bytes_per_step_max": float(t[-1]),
           "tx_bytes_per_step_mean": float(txs[0]) / size, "loss_first": losses[0],
           "loss_last": losses[-1], "stats": stats, "codecs": codecs,
           "torch": torch.__version__}
    text = json.dumps(res, indent=1, sort_keys=True)
    if args.out:
        with open(args.out + ".tmp", "w") as f:
            f.write(text + "\n")
        os.replace(args.out + ".tmp", args.out)
    else:
        print(text)
    print("fsdp_step %s: median %.1f ms over %d steps, %.2f MB sent per rank and step"
          % (args.mode, res["median_s"] * 1e3, len(steps), res["tx_bytes_per_step_mean"] / 1e6),
          flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
