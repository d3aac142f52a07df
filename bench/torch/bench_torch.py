# SPDX-License-Identifier: Apache-2.0
"""gloo beside the torch 2.x "gradsync" backend (the C++ c10d::Backend), one run, same ranks.

    OMP_NUM_THREADS=1 GRADSYNC_LIBRARY=build/libgradsync.so PYTHONPATH=python \\
    GRADSYNC_TORCH_EXTENSION=build/torch-ext/_C....so \\
        <torch 2.x python> bench/torch/bench_torch.py --build build --nprocs 4

(`make bench-torch` builds what it needs and runs this.) The launcher first runs gs-bench's
all-reduce under gsrun on the same number of ranks (the C library without torch), then
spawns --nprocs CPU ranks. Each rank's default group is "gradsync"; a gloo group over the
same ranks is measured beside it, and a second gloo group carries the barriers and the
timing reductions, so the control traffic is the same for both. Then:

1. Step time (zero_grad, forward, backward, SGD step) of an MLP at each --models size,
   under DDP and under FSDP2 (fully_shard on every Linear and on the root), on gloo and
   on gradsync: the two backends alternate step by step (which goes first alternates too),
   each step starts after a barrier and counts as the slowest rank's time; median over
   --steps steps after --warmup. The losses of the two backends (same seed, same data)
   are compared as a check.
2. dist.all_reduce (float32, SUM, in place) at each --sizes: in each of --rounds rounds,
   each backend runs a batch of back-to-back calls after a barrier (gs-bench's method),
   every call timed on every rank; a call's time is the slowest rank's; median over all
   rounds, with the algorithm bandwidth (bytes / time, 1 GB = 1e9 B).

Finally gs-bench runs again, and the launcher prints the tables and the issue's targets,
met or not. Every rank has a deadline (--deadline): a rank past it prints so and exits,
and the launcher kills any rank still alive at the deadline and fails with a sentence.
"""

import argparse
import datetime
import json
import os
import socket
import statistics
import subprocess
import sys
import threading
import time
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "python"))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from mlp import mlp  # noqa: E402

BACKENDS = ("gloo", "gradsync")
MODELS = {"3M": (1024, 4), "25M": (2048, 7)}  # width, depth: 3.2 M and 25.3 M parameters
INPUTS, CLASSES = 32, 10


def parse_size(text):
    mult = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    text = text.strip().upper().rstrip("B").rstrip("I")
    if text and text[-1] in mult:
        return int(text[:-1]) * mult[text[-1]]
    return int(text)


def size_name(nbytes):
    for unit, div in (("MiB", 1 << 20), ("KiB", 1 << 10)):
        if nbytes >= div and nbytes % div == 0:
            return "%d %s" % (nbytes // div, unit)
    return "%d B" % nbytes


def calls_per_batch(nbytes):
    """Back-to-back calls per batch: many for the small sizes, a few for 64 MiB."""
    if nbytes <= 64 << 10:
        return 200
    if nbytes <= 1 << 20:
        return 40
    if nbytes <= 16 << 20:
        return 10
    return 5


# ---------------------------------------------------------------------------- the ranks


def make_model(width, depth):
    return mlp(INPUTS, width, depth, CLASSES)


def slowest(times, ctl):
    """Per-index maximum over the ranks (float64, over the control group)."""
    import torch
    import torch.distributed as dist
    t = torch.tensor(times, dtype=torch.float64)
    dist.all_reduce(t, op=dist.ReduceOp.MAX, group=ctl)
    return t.tolist()


def wrap(kind, model, group):
    import torch
    if kind == "DDP":
        return torch.nn.parallel.DistributedDataParallel(model, process_group=group)
    from torch.distributed.device_mesh import DeviceMesh
    from torch.distributed.fsdp import fully_shard
    mesh = DeviceMesh.from_group(group, "cpu")
    for layer in model:
        if isinstance(layer, torch.nn.Linear):
            fully_shard(layer, mesh=mesh)
    return fully_shard(model, mesh=mesh)


def bench_steps(args, rank, size, groups, ctl, name, kind):
    import torch
    import torch.distributed as dist
    width, depth = MODELS[name]
    nets, opts = {}, {}
    for b in BACKENDS:
        torch.manual_seed(0)
        model = make_model(width, depth)
        nparams = sum(p.numel() for p in model.parameters())
        nets[b] = wrap(kind, model, groups[b])
        opts[b] = torch.optim.SGD(nets[b].parameters(), lr=0.01)
    g = torch.Generator().manual_seed(1234 + rank)
    x = torch.randn(args.batch, INPUTS, generator=g)
    y = torch.randint(0, CLASSES, (args.batch,), generator=g)
    times = {b: [] for b in BACKENDS}
    losses = {b: [] for b in BACKENDS}
    for step in range(args.warmup + args.steps):
        order = BACKENDS if step % 2 == 0 else BACKENDS[::-1]
        for b in order:
            dist.barrier(group=ctl)
            t0 = time.perf_counter()
            opts[b].zero_grad()
            loss = torch.nn.functional.cross_entropy(nets[b](x), y)
            loss.backward()
            opts[b].step()
            dt = time.perf_counter() - t0
            losses[b].append(float(loss.detach()))
            if step >= args.warmup:
                times[b].append(dt)
    out = {"params": nparams, "width": width, "depth": depth}
    for b in BACKENDS:
        out[b] = statistics.median(slowest(times[b], ctl))
    diff = max(abs(a - c) / max(1.0, abs(c)) for a, c in zip(losses["gradsync"], losses["gloo"]))
    out["loss_diff"] = max(slowest([diff], ctl))
    del nets, opts
    return out


def bench_allreduce(args, groups, ctl):
    import torch
    import torch.distributed as dist
    size = dist.get_world_size()
    out = []
    for nbytes in args.sizes:
        n = nbytes // 4
        calls = calls_per_batch(nbytes)
        bufs = {}
        for b in BACKENDS:
            buf = torch.ones(n)
            dist.all_reduce(buf, group=groups[b])
            if not bool((buf == size).all()):
                raise RuntimeError("%s all_reduce at %s: wrong sum (%s, want %d)"
                                   % (b, size_name(nbytes), buf[:4].tolist(), size))
            buf.zero_()
            for _ in range(max(2, calls // 10)):  # warm-up
                dist.all_reduce(buf, group=groups[b])
            bufs[b] = buf
        times = {b: [] for b in BACKENDS}
        for rnd in range(args.rounds):
            order = BACKENDS if rnd % 2 == 0 else BACKENDS[::-1]
            for b in order:
                dist.barrier(group=ctl)
                ts = []
                for _ in range(calls):
                    t0 = time.perf_counter()
                    dist.all_reduce(bufs[b], group=groups[b])
                    ts.append(time.perf_counter() - t0)
                times[b] += slowest(ts, ctl)
        out.append({"bytes": nbytes, "calls": calls * args.rounds,
                    **{b: statistics.median(times[b]) for b in BACKENDS}})
        del bufs
    return out


def rank_main(rank, size, port, args, results):
    def past_deadline():
        print("bench-torch: rank %d is past its deadline of %.0f s; exiting"
              % (rank, args.deadline), file=sys.stderr, flush=True)
        os._exit(3)
    watchdog = threading.Timer(args.deadline, past_deadline)
    watchdog.daemon = True
    watchdog.start()
    try:
        os.environ["MASTER_ADDR"] = "127.0.0.1"
        os.environ["MASTER_PORT"] = str(port)
        import torch
        import torch.distributed as dist
        torch.set_num_threads(args.threads)
        from gradsync.torch import _c10d, register_backend
        register_backend()  # (importing gradsync.torch did it already; idempotent)
        timeout = datetime.timedelta(seconds=args.op_timeout)
        dist.init_process_group("gradsync", rank=rank, world_size=size, timeout=timeout)
        if not _c10d.extension().is_gradsync(dist.group.WORLD._get_backend(torch.device("cpu"))):
            raise RuntimeError("the default group's backend is not the C++ gradsync backend")
        ctl = dist.new_group(backend="gloo", timeout=timeout)
        groups = {"gloo": dist.new_group(backend="gloo", timeout=timeout),
                  "gradsync": dist.group.WORLD}
        res = {"steps": [], "allreduce": []}
        for name in args.models:
            for kind in args.kinds:
                t0 = time.monotonic()
                r = bench_steps(args, rank, size, groups, ctl, name, kind)
                r.update(model=name, kind=kind, seconds=time.monotonic() - t0)
                res["steps"].append(r)
                if rank == 0:
                    print("  %s %s: gloo %.1f ms, gradsync %.1f ms (%.0f s)"
                          % (kind, name, r["gloo"] * 1e3, r["gradsync"] * 1e3, r["seconds"]),
                          flush=True)
        if args.sizes:
            t0 = time.monotonic()
            res["allreduce"] = bench_allreduce(args, groups, ctl)
            if rank == 0:
                print("  all_reduce: %.0f s" % (time.monotonic() - t0), flush=True)
        dist.barrier(group=ctl)
        dist.destroy_process_group()
        results.put((rank, True, res if rank == 0 else None))
    except BaseException:  # noqa: BLE001 - handed to the launcher
        results.put((rank, False, traceback.format_exc()))


# ---------------------------------------------------------------------------- the launcher


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run_ranks(args):
    """Rank 0's results; raises SystemExit with a sentence when a rank fails or hangs."""
    import torch.multiprocessing as mp
    ctx = mp.get_context("spawn")
    results = ctx.SimpleQueue()
    port = free_port()
    procs = [ctx.Process(target=rank_main, args=(r, args.nprocs, port, args, results))
             for r in range(args.nprocs)]
    for p in procs:
        p.start()
    end = time.monotonic() + args.deadline + 15
    got = {}
    failed = None
    while len(got) < args.nprocs and time.monotonic() < end:
        if not results.empty():
            r, ok, value = results.get()
            got[r] = value
            if not ok:
                failed = (r, value)
                break
        elif not any(p.is_alive() for p in procs) and results.empty():
            break
        else:
            time.sleep(0.05)
    for p in procs:
        p.join(timeout=5 if len(got) == args.nprocs and failed is None else 0.5)
    alive = [r for r, p in enumerate(procs) if p.is_alive()]
    for r in alive:
        procs[r].kill()
        procs[r].join()
    if failed:
        sys.exit("bench-torch: rank %d failed (killed the ranks still running: %s):\n%s"
                 % (failed[0], alive or "none", failed[1]))
    missing = sorted(set(range(args.nprocs)) - set(got))
    if missing:
        sys.exit("bench-torch: ranks %s did not finish within the %.0f s deadline "
                 "(exit codes %s); killed %s"
                 % (missing, args.deadline, [p.exitcode for p in procs], alive or "none"))
    return got[0]


def gs_bench(args, sizes_arg, iters, warmup):
    """gs-bench all-reduce rows ({bytes: median us}) under gsrun, in place, f32 sum."""
    gsrun = os.path.join(args.build, "tools", "gsrun")
    bench = os.path.join(args.build, "bench", "gs-bench")
    cmd = [gsrun, "-n", str(args.nprocs), "--timeout", "120", bench, "allreduce"] + sizes_arg \
        + ["-w", str(warmup), "-n", str(iters), "--inplace", "--json"]
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=150)
    except subprocess.TimeoutExpired:
        sys.exit("bench-torch: gs-bench did not finish within 150 s: %s" % " ".join(cmd))
    if p.returncode != 0:
        sys.exit("bench-torch: gs-bench failed (exit %d): %s\n%s%s"
                 % (p.returncode, " ".join(cmd), p.stdout, p.stderr))
    text = "\n".join(line.split("] ", 1)[1] if line.startswith("[0] ") else line
                     for line in p.stdout.splitlines() if line.startswith("[0] "))
    rows = json.loads(text)["rows"]
    if any(r["wrong"] for r in rows):
        sys.exit("bench-torch: gs-bench found wrong elements: %s" % rows)
    return {r["size"]: r["time_us"] for r in rows}


def run_gs_bench(args):
    out = gs_bench(args, ["-b", "4K", "-e", "4K"], 1000, 100)
    big = [s for s in args.sizes if s > 4096]
    if big:
        lo, hi = min(big), max(big)
        out.update(gs_bench(args, ["-b", str(lo), "-e", str(hi), "-f", "4"], 10, 2))
    return out


def fmt_ratio(a, b):
    return "%.2f" % (a / b) if b > 0 else "n/a"


def report(args, res, gsb, runs4k, took):
    met = []
    print("\nStep time (zero_grad + forward + backward + SGD step), %d ranks, batch %d per "
          "rank, median of %d steps after %d warm-up, each the slowest rank's"
          % (args.nprocs, args.batch, args.steps, args.warmup))
    print("| model | parameters | wrapper | gloo ms | gradsync ms | gradsync / gloo "
          "| loss diff |")
    print("|---|---|---|---|---|---|---|")
    for r in res["steps"]:
        print("| MLP %s (%d x %d) | %.1f M | %s | %.1f | %.1f | %s | %.1e |"
              % (r["model"], r["width"], r["depth"], r["params"] / 1e6, r["kind"],
                 r["gloo"] * 1e3, r["gradsync"] * 1e3, fmt_ratio(r["gradsync"], r["gloo"]),
                 r["loss_diff"]))
        met.append(("%s %s step no slower than gloo's (gradsync / gloo <= 1.00)"
                    % (r["kind"], r["model"]), r["gradsync"] <= r["gloo"],
                    "%s" % fmt_ratio(r["gradsync"], r["gloo"])))
    if res["allreduce"]:
        print("\ndist.all_reduce float32 SUM in place, %d ranks, %d rounds of back-to-back "
              "calls per backend, median of the slowest rank's time per call"
              % (args.nprocs, args.rounds))
        print("| size | calls | gloo us | gloo GB/s | gradsync us | gradsync GB/s "
              "| gloo / gradsync | gs-bench us |")
        print("|---|---|---|---|---|---|---|---|")
        for r in res["allreduce"]:
            nb = r["bytes"]
            gs = gsb.get(nb)
            print("| %s | %d | %.1f | %.3f | %.1f | %.3f | %sx | %s |"
                  % (size_name(nb), r["calls"], r["gloo"] * 1e6, nb / r["gloo"] / 1e9,
                     r["gradsync"] * 1e6, nb / r["gradsync"] / 1e9,
                     fmt_ratio(r["gloo"], r["gradsync"]),
                     "%.1f" % gs if gs is not None else "-"))
            if nb >= 1 << 20:
                met.append(("all_reduce %s at least 1.5x faster than gloo" % size_name(nb),
                            r["gloo"] >= 1.5 * r["gradsync"],
                            "%sx" % fmt_ratio(r["gloo"], r["gradsync"])))
            if nb == 4096 and gs is not None:
                gap = r["gradsync"] * 1e6 - gs
                met.append(("all_reduce 4 KiB within 20 us of gs-bench's", gap <= 20.0,
                            "%.1f us over gs-bench's %.1f us" % (gap, gs)))
        if gsb:
            print("gs-bench: the C library under gsrun -n %d, in place, the slowest rank's "
                  "median, mean of its runs before and after the torch ranks (4 KiB: %s us)"
                  % (args.nprocs, " and ".join("%.1f" % t for t in runs4k)))
    print("\nTargets:")
    for what, ok, value in met:
        print("  %-62s %-8s %s" % (what, "met" if ok else "NOT met", value))
    print("\nbench-torch: %.0f s; load average before %s, after %s; %d cores"
          % (took, args.load_before, " ".join("%.2f" % v for v in os.getloadavg()),
             os.cpu_count() or 0))


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--nprocs", type=int, default=4)
    p.add_argument("--build", default=os.path.join(ROOT, "build"),
                   help="the CMake build with gs-bench, gsrun, libgradsync.so and torch-ext/")
    p.add_argument("--models", type=lambda s: s.split(","), default=["3M", "25M"],
                   help="comma list of %s" % ",".join(MODELS))
    p.add_argument("--kinds", type=lambda s: s.split(","), default=["DDP", "FSDP2"])
    p.add_argument("--steps", type=int, default=20, help="timed steps per backend")
    p.add_argument("--warmup", type=int, default=3, help="warm-up steps per backend")
    p.add_argument("--batch", type=int, default=32, help="samples per rank and step")
    p.add_argument("--sizes", type=lambda s: [parse_size(v) for v in s.split(",") if v],
                   default=[4 << 10, 1 << 20, 16 << 20, 64 << 20],
                   help="all_reduce sizes, comma list (K, M suffixes), '' for none")
    p.add_argument("--rounds", type=int, default=5, help="all_reduce rounds per size")
    p.add_argument("--threads", type=int, default=1, help="torch intra-op threads per rank")
    p.add_argument("--deadline", type=float, default=420, help="seconds each rank may run")
    p.add_argument("--op-timeout", type=float, default=120, dest="op_timeout",
                   help="the process groups' timeout in seconds")
    p.add_argument("--no-gs-bench", action="store_true", dest="no_gs_bench")
    args = p.parse_args(argv)
    args.build = os.path.abspath(args.build)
    for m in args.models:
        if m not in MODELS:
            p.error("unknown model %r (known: %s)" % (m, ", ".join(MODELS)))
    for k in args.kinds:
        if k not in ("DDP", "FSDP2"):
            p.error("unknown wrapper %r (DDP, FSDP2)" % k)
    lib = os.path.join(args.build, "libgradsync.so")
    os.environ.setdefault("GRADSYNC_LIBRARY", lib)
    if "GRADSYNC_TORCH_EXTENSION" not in os.environ:
        ext = os.path.join(args.build, "torch-ext")
        found = sorted(f for f in os.listdir(ext) if f.startswith("_C")) \
            if os.path.isdir(ext) else []
        if not found:
            sys.exit("bench-torch: no extension in %s (tests/torch/run_torch2.sh build "
                     "builds it)" % ext)
        os.environ["GRADSYNC_TORCH_EXTENSION"] = os.path.join(ext, found[0])
    os.environ.setdefault("OMP_NUM_THREADS", str(args.threads))
    import torch
    args.load_before = " ".join("%.2f" % v for v in os.getloadavg())
    print("bench-torch: torch %s, %s, %d ranks, OMP_NUM_THREADS=%s, %d cores, load %s"
          % (torch.__version__, sys.executable, args.nprocs, os.environ["OMP_NUM_THREADS"],
             os.cpu_count() or 0, args.load_before), flush=True)
    t0 = time.monotonic()
    gsb, runs4k = {}, []
    def gs_bench(when):
        times = run_gs_bench(args)
        runs4k.append(times[4096])
        print("  gs-bench %s: %s" % (when, ", ".join("%s %.1f us" % (size_name(s), t)
                                                     for s, t in sorted(times.items()))),
              flush=True)
        return times

    if not args.no_gs_bench:
        first = gs_bench("before")
    res = run_ranks(args)
    if not args.no_gs_bench:
        second = gs_bench("after")
        for s in first:
            gsb[s] = statistics.median([first[s], second[s]])
    report(args, res, gsb, runs4k, time.monotonic() - t0)
    return 0


if __name__ == "__main__":
    sys.exit(main())
