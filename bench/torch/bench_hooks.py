# SPDX-License-Identifier: Apache-2.0
"""Time to accuracy: gradsync's DDP communication hook beside torch's PowerSGD and plain DDP.

    OMP_NUM_THREADS=1 GRADSYNC_LIBRARY=build/libgradsync.so PYTHONPATH=python \\
    GRADSYNC_TORCH_EXTENSION=build/torch-ext/_C....so \\
        <torch 2.x python> bench/torch/bench_hooks.py --nprocs 4

One learning problem, trained once per configuration with the same seed, data, optimizer
and number of steps: a student MLP (--inputs 64, --depth 3 hidden layers of --width 512,
10 classes: 563,722 parameters, 2.15 MiB of float32 gradients) learns the labels of a
fixed random teacher (64-128-10, tanh; the argmax of its outputs) from fresh Gaussian
inputs, a global batch of --batch 256 per step split over the ranks (rank r takes rows r,
r+N, ...), SGD with momentum 0.9 at --lr 0.02, for --steps 400. DDP's bucket_cap_mb is 4
for every configuration, so the model is one bucket: with DDP's default two buckets,
powerSGD_hook on gloo failed in the first steps with gloo's size mismatch ("op.preamble.length
<= op.nbytes. 524 vs 512"), most likely because it starts its later all-reduces from
completion callbacks, whose order across two buckets differs between ranks. The test set
(--test 8192 rows, a seed of its own) is scored every --eval-every 10 steps, each rank a
quarter of it, untimed.

Configurations (--configs, comma-separated names; all by default):
  ddp-gloo            plain DDP on gloo (no hook): the reference
  ddp-gradsync        plain DDP on a "gradsync" group (the torch 2.x C++ backend)
  powersgd-r1, -r2    DDP on gloo + torch's powerSGD_hook, matrix_approximation_rank 1 or 2,
                      start_powerSGD_iter --psgd-start 10, error feedback and warm start on
  powersgd-r1-gs, -r2-gs   the same on a "gradsync" group (powerSGD_hook waits on a second
                      all-reduce's future inside a then() callback: the backend's
                      completion threads grow for it)
  hook-none           DDP on gloo + gradsync_allreduce_hook without a codec (plain average)
  hook-fp16, -bf16, -int8, -qsgd, -sign, -topk   DDP on gloo + gradsync_allreduce_hook with
                      that codec (topk: ratio --topk-ratio 0.01), error feedback on
  hook-int8-gs        hook-int8 on a "gradsync" group (the hook borrows its communicator)

All configurations live in the same spawned ranks (torch.multiprocessing, spawn) and train
interleaved, step by step, the first of each round rotating, so that the load of this
machine falls on all of them alike. Every step (forward, backward with DDP's all-reduces,
SGD step) starts after a barrier on a gloo control group, is timed on every rank and counts
as the slowest rank's time; "median step" is the median after --warmup 20 steps. "To
target" is the first evaluation at which the test accuracy reached --target 0.74, as the
step and the sum of the step times up to it: the training time the configuration would
need alone. Bytes per step are each rank's gradient payload into the all-reduce: 4 B per
element for fp32, the codec's encoded size (gs_codec_encoded_size) per bucket, and for
PowerSGD 4 B x (n + m) x rank per compressed n x m matrix plus the tensors it leaves
uncompressed (its _should_compress rule; after start_powerSGD_iter); for gradsync's
communicators also the bytes the transport sent (gs_comm_stats bytes_sent, per rank per
step: what the all-reduce algorithm moves, 1.5x the payload for fp32 on 4 ranks).

Bounded: one --deadline (330 s) covers the whole run. A configuration that fails is
reported, and the ranks are started again without it (3 starts at most); at the deadline
the ranks stop themselves or are killed, and whatever had not finished is reported failed.
Exit status 1 when any configuration failed.
"""

import argparse
import datetime
import json
import os
import socket
import statistics
import sys
import time
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "python"))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from mlp import mlp  # noqa: E402

CLASSES = 10
CONFIGS = {
    # name: (backend of the default group, kind, codec or PowerSGD rank)
    "ddp-gloo": ("gloo", "plain", None),
    "ddp-gradsync": ("gradsync", "plain", None),
    "powersgd-r1": ("gloo", "powersgd", 1),
    "powersgd-r2": ("gloo", "powersgd", 2),
    "powersgd-r1-gs": ("gradsync", "powersgd", 1),
    "powersgd-r2-gs": ("gradsync", "powersgd", 2),
    "hook-none": ("gloo", "hook", None),
    "hook-fp16": ("gloo", "hook", "fp16"),
    "hook-bf16": ("gloo", "hook", "bf16"),
    "hook-int8": ("gloo", "hook", "int8"),
    "hook-qsgd": ("gloo", "hook", "qsgd"),
    "hook-sign": ("gloo", "hook", "sign"),
    "hook-topk": ("gloo", "hook", "topk"),
    "hook-int8-gs": ("gradsync", "hook", "int8"),
}
DEFAULT = list(CONFIGS)


# ---------------------------------------------------------------------------- the ranks


def make_mlp(inputs, width, depth, outputs, seed):
    import torch
    torch.manual_seed(seed)
    return mlp(inputs, width, depth, outputs)


def make_teacher(opts):
    import torch
    import torch.nn as nn
    teacher = nn.Sequential(nn.Linear(opts["inputs"], 128), nn.Tanh(), nn.Linear(128, CLASSES))
    g = torch.Generator().manual_seed(1234)
    with torch.no_grad():
        for p in teacher.parameters():
            scale = p.shape[-1] ** -0.5 if p.dim() > 1 else 0.1
            p.copy_(torch.randn(p.shape, generator=g) * scale)
    return teacher


def batch(opts, teacher, seed, rows, rank, size):
    """Rows rank, rank + size, ... of a global batch of @rows inputs drawn with @seed."""
    import torch
    x = torch.randn(rows, opts["inputs"], generator=torch.Generator().manual_seed(seed))
    x = x[rank::size].contiguous()
    with torch.no_grad():
        y = teacher(x).argmax(1)
    return x, y


def powersgd_payload(model, rank, min_rate):
    """Elements per step of powerSGD_hook's all-reduces (its _should_compress rule)."""
    total = 0
    for p in model.parameters():
        n = p.shape[0]
        m = p.numel() // n
        r = min(n, m, rank)
        total += (n + m) * r if (n + m) * r * min_rate < n * m else n * m
    return total


class Run:
    """One configuration on this rank: its DDP model, hook state, optimizer and records."""

    def __init__(self, rank, size, name, opts, group):
        import torch
        from torch.nn.parallel import DistributedDataParallel as DDP

        self.name, self.opts = name, opts
        backend, kind, arg = CONFIGS[name]
        self.net = make_mlp(opts["inputs"], opts["width"], opts["depth"], CLASSES, seed=7)
        self.nparams = sum(p.numel() for p in self.net.parameters())
        self.model = DDP(self.net, process_group=group, bucket_cap_mb=opts["bucket_cap_mb"])
        self.state = None
        self.stats_comm = None  # a gradsync.Communicator whose bytes_sent we read
        self.payload = 4 * self.nparams
        if kind == "powersgd":
            from torch.distributed.algorithms.ddp_comm_hooks import powerSGD_hook as psgd
            self.state = psgd.PowerSGDState(
                process_group=group, matrix_approximation_rank=arg,
                start_powerSGD_iter=opts["psgd_start"], use_error_feedback=True,
                warm_start=True, random_seed=0)
            self.model.register_comm_hook(self.state, psgd.powerSGD_hook)
            self.payload = 4 * powersgd_payload(self.net, arg, self.state.min_compression_rate)
        elif kind == "hook":
            from gradsync.torch import GradsyncHookState, gradsync_allreduce_hook
            params = {"ratio": opts["topk_ratio"]} if arg == "topk" else {}
            self.state = GradsyncHookState(process_group=group, codec=arg, **params)
            self.model.register_comm_hook(self.state, gradsync_allreduce_hook)
            self.stats_comm = self.state.comm.communicator
        elif backend == "gradsync":
            from gradsync.torch import GradsyncHookState
            self.state = GradsyncHookState(process_group=group, codec=None)  # its stats only
            self.stats_comm = self.state.comm.communicator
        self.opt = torch.optim.SGD(self.model.parameters(), lr=opts["lr"], momentum=0.9)
        self.times, self.evals, self.losses, self.sent = [], [], [], 0

    def step(self, step, x, y):
        import torch.nn.functional as F
        before = self.stats_comm.stats()["bytes_sent"] if self.stats_comm is not None else 0
        t0 = time.perf_counter()
        loss = F.cross_entropy(self.model(x), y)
        self.opt.zero_grad(set_to_none=True)
        loss.backward()
        self.opt.step()
        self.times.append(time.perf_counter() - t0)
        if self.stats_comm is not None and step >= self.opts["warmup"]:
            self.sent += self.stats_comm.stats()["bytes_sent"] - before
        self.losses.append(loss.item())

    def evaluate(self, step, xt, yt, ctl):
        import torch
        import torch.distributed as dist
        import torch.nn.functional as F
        with torch.no_grad():
            out = self.net(xt)
            s = torch.tensor([(out.argmax(1) == yt).sum().item(),
                              F.cross_entropy(out, yt, reduction="sum").item()],
                             dtype=torch.float64)
        dist.all_reduce(s, group=ctl)
        n = self.opts["test"] // dist.get_world_size() * dist.get_world_size()
        self.evals.append((step, s[0].item() / n, s[1].item() / n))

    def finish(self, rank, size, ctl):
        import torch
        import torch.distributed as dist
        enc = buckets = None
        if CONFIGS[self.name][1] == "hook" and self.state.codec is not None:
            # one residual per bucket: its element count is the bucket's
            efs = self.state._ef.values()
            enc = sum(self.state.codec.encoded_size(ef.count, "float32") for ef in efs)
            buckets = sorted(ef.count for ef in efs)
        t = torch.tensor(self.times, dtype=torch.float64)
        dist.all_reduce(t, op=dist.ReduceOp.MAX, group=ctl)  # each step: the slowest rank's
        tl = torch.tensor(self.losses, dtype=torch.float64)
        dist.all_reduce(tl, group=ctl)
        if self.state is not None and hasattr(self.state, "close"):
            self.state.close()
        if rank != 0:
            return None
        timed = max(1, self.opts["steps"] - self.opts["warmup"])
        return {"name": self.name, "nparams": self.nparams, "times": t.tolist(),
                "losses": (tl / size).tolist(), "evals": self.evals,
                "payload": enc if enc is not None else self.payload, "buckets": buckets,
                "sent": self.sent / timed if self.stats_comm is not None else None}


def _entry(rank, size, port, names, opts, results):
    """Train every configuration of @names on this rank, interleaved step by step; hand back
    (rank, name, ok, value) for each at the end, or (rank, name, False, traceback) for the
    configuration that failed, and exit (the launcher starts again without it)."""
    name = None
    try:
        import torch
        import torch.distributed as dist
        os.environ["MASTER_ADDR"] = "127.0.0.1"
        os.environ["MASTER_PORT"] = str(port)
        os.environ.setdefault("GS_TIMEOUT_MS", "30000")
        import gradsync.torch  # noqa: F401  registers the backend
        torch.set_num_threads(1)
        timeout = datetime.timedelta(seconds=60)
        dist.init_process_group("gloo", rank=rank, world_size=size, timeout=timeout)
        ctl = dist.new_group(backend="gloo", timeout=timeout)  # barriers, evaluation, timing
        gs_group = None
        if any(CONFIGS[n][0] == "gradsync" for n in names):
            gs_group = dist.new_group(backend="gradsync", timeout=timeout)
        runs = []
        for name in names:
            group = gs_group if CONFIGS[name][0] == "gradsync" else None
            runs.append(Run(rank, size, name, opts, group))
        name = None
        teacher = make_teacher(opts)
        per_rank = opts["test"] // size
        xt, yt = batch(opts, teacher, 99, per_rank * size, rank, size)
        deadline = time.monotonic() + opts["deadline"]
        for step in range(opts["steps"]):
            if time.monotonic() > deadline:
                raise RuntimeError("rank %d: past the deadline (%.0f s) at step %d"
                                   % (rank, opts["deadline"], step))
            x, y = batch(opts, teacher, 1000 + step, opts["batch"], rank, size)
            k = len(runs)
            for i in range(k):
                run = runs[(step + i) % k]  # who goes first rotates
                name = run.name
                dist.barrier(group=ctl)
                run.step(step, x, y)
                if (step + 1) % opts["eval_every"] == 0 or step + 1 == opts["steps"]:
                    run.evaluate(step + 1, xt, yt, ctl)
            name = None
        for run in runs:
            name = run.name
            results.put((rank, run.name, True, run.finish(rank, size, ctl)))
        name = None
        if gs_group is not None:
            dist.destroy_process_group(gs_group)
        dist.destroy_process_group()
    except BaseException:  # noqa: BLE001 - handed to the launcher
        results.put((rank, name, False, traceback.format_exc()))
        time.sleep(0.5)  # the queue's feeder thread flushes
        os._exit(1)


# ---------------------------------------------------------------------------- the launcher


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run_configs(names, opts, size, report, tries=3):
    """Train @names together on @size spawned ranks and report(name, rank 0's result or an
    exception) for each. When a configuration fails it is reported and the ranks start
    again without it (at most @tries starts); past --deadline (plus the start-up allowance)
    every rank still alive is killed and the unfinished configurations are reported failed."""
    import torch.multiprocessing as mp
    ctx = mp.get_context("spawn")
    end = time.monotonic() + opts["deadline"]
    for attempt in range(tries):
        if not names:
            return
        results = ctx.SimpleQueue()
        port = free_port()
        left = dict(opts, deadline=end - time.monotonic() - 5)  # the ranks' own deadline
        procs = [ctx.Process(target=_entry, args=(r, size, port, names, left, results))
                 for r in range(size)]
        for p in procs:
            p.start()
        got, failure, culprit = {}, None, None
        while sum(len(v) for v in got.values()) < size * len(names):
            if time.monotonic() > end:
                failure = "did not finish within --deadline %.0f s (killed)" % opts["deadline"]
                break
            if results.empty():
                if all(not p.is_alive() for p in procs) and results.empty():
                    failure = "every rank exited (exit codes %s)" % [p.exitcode for p in procs]
                    break
                time.sleep(0.05)
                continue
            rank, name, ok, value = results.get()
            if not ok:
                failure, culprit = "rank %d failed:\n%s" % (rank, value), name
                break
            got.setdefault(name, {})[rank] = value
        for p in procs:
            p.join(timeout=2 if failure is None else 0.1)
            if p.is_alive():
                p.kill()
                p.join()
        if failure is None:
            for n in names:
                report(n, got[n][0])
            return
        if culprit is None or attempt + 1 == tries:
            for n in names:
                report(n, RuntimeError(failure))
            return
        report(culprit, RuntimeError(failure))
        names = [n for n in names if n != culprit]
        print("bench_hooks: starting again without %s" % culprit, flush=True)


def human(nbytes):
    if nbytes is None:
        return "-"
    if nbytes >= 1 << 20:
        return "%.2f MiB" % (nbytes / (1 << 20))
    return "%.1f KiB" % (nbytes / (1 << 10))


def summarise(res, opts, target):
    times = res["times"]
    med = statistics.median(times[opts["warmup"]:]) * 1e3
    reach = next((e for e in res["evals"] if e[1] >= target), None)
    to_step = reach[0] if reach else None
    to_time = sum(times[:to_step]) if reach else None
    last = res["evals"][-1]
    best = max(e[1] for e in res["evals"])
    return {"median_ms": med, "to_step": to_step, "to_s": to_time, "total_s": sum(times),
            "final_acc": last[1], "best_acc": best, "final_loss": last[2],
            "train_loss": statistics.mean(res["losses"][-opts["eval_every"]:])}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--nprocs", type=int, default=4)
    ap.add_argument("--configs", default=",".join(DEFAULT))
    ap.add_argument("--steps", type=int, default=400)
    ap.add_argument("--warmup", type=int, default=20)
    ap.add_argument("--batch", type=int, default=256, help="global batch")
    ap.add_argument("--lr", type=float, default=0.02)
    ap.add_argument("--inputs", type=int, default=64)
    ap.add_argument("--width", type=int, default=512)
    ap.add_argument("--depth", type=int, default=3)
    ap.add_argument("--test", type=int, default=8192)
    ap.add_argument("--eval-every", type=int, default=10)
    ap.add_argument("--target", type=float, default=0.74, help="test accuracy")
    ap.add_argument("--psgd-start", type=int, default=10)
    ap.add_argument("--topk-ratio", type=float, default=0.01)
    ap.add_argument("--deadline", type=float, default=330,
                    help="seconds for the whole run (start-up, every try)")
    ap.add_argument("--bucket-cap-mb", type=float, default=4,
                    help="DDP's bucket_cap_mb (the first bucket too): 4 puts this model in "
                    "one bucket, which powerSGD_hook needs on gloo")
    ap.add_argument("--json", help="write every result here")
    args = ap.parse_args()
    if args.steps <= args.warmup:
        ap.error("--steps %d leaves no timed step after --warmup %d" % (args.steps, args.warmup))
    names = [n for n in args.configs.split(",") if n]
    for n in names:
        if n not in CONFIGS:
            ap.error("unknown configuration %r; one of %s" % (n, ", ".join(CONFIGS)))
    opts = {k: getattr(args, k) for k in ("steps", "warmup", "batch", "lr", "inputs", "width",
                                           "depth", "test", "eval_every", "psgd_start",
                                           "topk_ratio", "deadline", "bucket_cap_mb")}
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    print("bench_hooks: %d ranks, %d steps, global batch %d, lr %g, target accuracy %.3f, "
          "load average %.1f" % (args.nprocs, args.steps, args.batch, args.lr, args.target,
                                 os.getloadavg()[0]), flush=True)
    results = {}
    t_start = time.monotonic()

    def report(name, res):
        if isinstance(res, Exception):
            print("%-14s FAILED: %s" % (name, str(res).strip()[-3000:]), flush=True)
            results[name] = {"error": str(res)}
            return
        s = res["summary"] = summarise(res, opts, args.target)
        results[name] = res
        print("%-14s %7.2f ms/step  target %s  final acc %.4f  loss %.4f"
              % (name, s["median_ms"], "step %d, %.2f s" % (s["to_step"], s["to_s"])
                 if s["to_step"] else "not reached", s["final_acc"], s["final_loss"]),
              flush=True)
        if res["buckets"]:
            print("               buckets (elements): %s" % res["buckets"], flush=True)

    run_configs(names, opts, args.nprocs, report)
    ok = [n for n in names if "summary" in results[n]]
    if not ok:
        sys.exit("bench_hooks: every configuration failed")
    first = results[ok[0]]
    fp32 = 4 * first["nparams"]
    print("\n%d parameters (%s of fp32 gradients); target test accuracy %.3f; %d steps; "
          "run took %.0f s\n" % (first["nparams"], human(fp32), args.target, args.steps,
                                 time.monotonic() - t_start))
    ref = results.get("ddp-gloo", {}).get("summary")
    print("| configuration | median step | steps to target | time to target | vs ddp-gloo | "
          "final acc | best acc | final test loss | payload/rank/step | sent/rank/step |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for n in names:
        res = results[n]
        if "summary" not in res:
            print("| %s | failed | | | | | | | | |" % n)
            continue
        s = res["summary"]
        vs = "%.2fx" % (ref["to_s"] / s["to_s"]) if ref and ref["to_s"] and s["to_s"] else "-"
        print("| %s | %.2f ms | %s | %s | %s | %.4f | %.4f | %.4f | %s (%.1fx) | %s |"
              % (n, s["median_ms"], s["to_step"] or "not reached",
                 "%.2f s" % s["to_s"] if s["to_s"] else "-", vs, s["final_acc"],
                 s["best_acc"], s["final_loss"], human(res["payload"]),
                 fp32 / res["payload"], human(res["sent"])))
    reached = sorted((results[n]["summary"]["to_s"], n) for n in ok
                     if results[n]["summary"]["to_s"])
    if reached:
        print("\nfastest to the target: %s" % ", ".join("%s %.2f s" % (n, t)
                                                        for t, n in reached))
    missed = [n for n in ok if not results[n]["summary"]["to_s"]]
    if missed:
        print("not reached in %d steps: %s" % (args.steps, ", ".join(missed)))
    if ref and not ref["to_step"]:
        print("note: plain DDP (ddp-gloo) did not reach the target %.3f; lower --target"
              % args.target)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"args": vars(args), "results": results}, f)
    if any("summary" not in results[n] for n in names):
        sys.exit(1)


if __name__ == "__main__":
    main()
