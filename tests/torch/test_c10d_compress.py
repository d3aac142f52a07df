# SPDX-License-Identifier: Apache-2.0
"""Per-group compression of the torch 2.x C++ backend (gradsync.torch.Options as pg_options,
csrc/backend.cpp) on 4 spawned ranks: reduce_scatter_tensor, reduce_scatter,
all_gather_into_tensor, all_gather, their coalesced forms and all_reduce on groups whose
options name a codec give results within the codec's bound of the exact ones (all-gather's
own shard exact); what a codec cannot serve (integer tensors, MAX) falls back to the exact
uncompressed call; error feedback kept per tensor makes the running sum of 50 calls on the
same gradient converge to 50x the exact sum, and error feedback kept per call's place in the
step (error_feedback="order", gradsync.torch.next_step) does the same on a fresh tensor every
call, where "tensor" does not; a shape change at an ordinal resets its residual, a missing
next_step is refused; the residual table's caps (entries, bytes) drop the least recently
used; bad options are refused with the library's sentence.

Bounds (docs/compression.md, "Codecs"), per element of one rank's contribution x, with M
the largest |x| of the shard that rank encoded (at least its block's, however the library
cuts blocks): fp16 2^-11|x| + 2^-25, bf16 2^-8|x|, int8 M/254, int4 M/14, qsgd M/7,
fp8_e4m3 2^-4|x| + M/448 2^-10, fp8_e5m2 2^-3|x| + M/57344 2^-17; a result's bound is the sum
over the ranks plus float32 rounding of the sum (4 x 2^-23 x sum |x|). Codecs: every dense
one the binding knows (gradsync.CodecKind), so int4 and fp8 are in as soon as it has them.
Run under torch 2.x only (tests/torch/run_torch2.sh)."""

import os

import pytest

torch = pytest.importorskip("torch")
dist = pytest.importorskip("torch.distributed")
if int(torch.__version__.split(".")[0]) < 2:
    pytest.skip("torch %s: the C++ backend is for torch 2.x" % torch.__version__,
                allow_module_level=True)

import gradsync  # noqa: E402
from dist_harness import run_ranks  # noqa: E402

SIZE = 4
R = dist.ReduceOp
NO_ELEMENT_BOUND = {"none", "sign", "topk", "randk"}
DENSE = sorted(k.name.lower() for k in gradsync.CodecKind
               if k.name.lower() not in NO_ELEMENT_BOUND)


def _expect(cond, what):
    if not cond:
        raise AssertionError(what)


def bound(kind, x, m):
    """Largest error of one rank's contribution @x (float64) whose shard's max |x| is @m."""
    ax = x.abs()
    per = {
        "fp16": lambda: ax * 2.0 ** -11 + 2.0 ** -25,
        "bf16": lambda: ax * 2.0 ** -8,
        "int8": lambda: torch.full_like(ax, m / 254.0),
        "int4": lambda: torch.full_like(ax, m / 14.0),
        "qsgd": lambda: torch.full_like(ax, m / 7.0),
        "fp8_e4m3": lambda: ax * 2.0 ** -4 + m / 448.0 * 2.0 ** -10,
        "fp8_e5m2": lambda: ax * 2.0 ** -3 + m / 57344.0 * 2.0 ** -17,
    }
    if kind not in per:
        raise AssertionError("no error bound for codec %r in this test: add it" % kind)
    return per[kind]()


def inputs(n, numel, salt):
    """Every rank's input (the same on every rank): rank r's from a generator seeded with
    (salt, r), magnitudes changing every 64 elements."""
    out = []
    for r in range(n):
        g = torch.Generator().manual_seed(1000 * salt + r)
        scale = (torch.rand(numel // 64 + 1, generator=g) * 3.9 + 0.1).repeat_interleave(64)
        out.append(torch.randn(numel, generator=g) * scale[:numel])
    return out


def within(got, parts, kind, what, avg=False):
    """@got within the summed bound of the sum (or average) of @parts."""
    parts = [p.double() for p in parts]
    exact = sum(parts)
    b = sum(bound(kind, p, float(p.abs().max())) for p in parts)
    b = b + len(parts) * 2.0 ** -23 * sum(p.abs() for p in parts) + 1e-30
    if avg:
        exact, b = exact / len(parts), b / len(parts)
    err = (got.double() - exact).abs()
    i = int(torch.argmax(err - b))
    _expect(bool(torch.all(err <= b)), "%s: element %d off by %g, bound %g" % (
        what, i, float(err[i]), float(b[i])))
    return float(err.max())


def stats(group=None):
    from gradsync.torch import _c10d
    return _c10d.compression_stats(group)


def init(rank, size, pg_options):
    import datetime
    import gradsync.torch  # noqa: F401 - registers "gradsync"
    dist.init_process_group("gradsync", rank=rank, world_size=size, pg_options=pg_options,
                            timeout=datetime.timedelta(seconds=60))


def case_codecs_within_bound(rank, size):
    """Each dense codec on its own group: reduce-scatter (tensor, list, coalesced; SUM,
    AVG, PREMUL_SUM) and all-gather (tensor, list, coalesced) within the bound."""
    from gradsync.torch import Options
    for kind in DENSE:
        g = dist.new_group(pg_options=Options(reduce_scatter=kind, allgather=kind))
        n = 1000
        ins = inputs(size, size * n, salt=1)
        shard = slice(rank * n, (rank + 1) * n)
        for op, avg in ((R.SUM, False), (R.AVG, True)):
            out = torch.full((n,), float("nan"))
            dist.reduce_scatter_tensor(out, ins[rank], op=op, group=g)
            within(out, [x[shard] for x in ins], kind, "%s reduce_scatter_tensor %s"
                   % (kind, op), avg)
        pre = dist._make_nccl_premul_sum(0.5)
        out = torch.empty(n)
        dist.reduce_scatter_tensor(out, ins[rank].clone(), op=pre, group=g)
        within(out, [0.5 * x[shard] for x in ins], kind, "%s PREMUL_SUM" % kind)
        out = torch.empty(n)
        dist.reduce_scatter(out, list(ins[rank].chunk(size)), group=g)
        within(out, [x[shard] for x in ins], kind, "%s reduce_scatter (list)" % kind)
        outs = [torch.empty(m) for m in (7, 300)]
        cins = [inputs(size, size * m, salt=2 + m) for m in (7, 300)]
        with dist._coalescing_manager(group=g, async_ops=True) as cm:
            for o, ci in zip(outs, cins):
                dist.reduce_scatter_tensor(o, ci[rank], group=g)
        cm.wait()
        for o, ci, m in zip(outs, cins, (7, 300)):
            within(o, [x[rank * m:(rank + 1) * m] for x in ci], kind,
                   "%s coalesced reduce_scatter_tensor %d" % (kind, m))
        # All-gather: every shard within the bound of its owner's, the own one exact.
        mine = inputs(size, n, salt=9)
        full = torch.full((size * n,), float("nan"))
        dist.all_gather_into_tensor(full, mine[rank], group=g)
        lst = [torch.empty(n) for _ in range(size)]
        dist.all_gather(lst, mine[rank], group=g)
        couts = [torch.empty(size * m) for m in (5, 200)]
        cmine = [inputs(size, m, salt=20 + m) for m in (5, 200)]
        with dist._coalescing_manager(group=g, async_ops=True) as cm:
            for o, ci in zip(couts, cmine):
                dist.all_gather_into_tensor(o, ci[rank], group=g)
        cm.wait()
        for r in range(size):
            for got, what in ((full[r * n:(r + 1) * n], "all_gather_into_tensor"),
                              (lst[r], "all_gather (list)")):
                if r == rank:
                    _expect(torch.equal(got, mine[r]), "%s %s: own shard not exact"
                            % (kind, what))
                else:
                    within(got, [mine[r]], kind, "%s %s shard %d" % (kind, what, r))
            for o, ci, m in zip(couts, cmine, (5, 200)):
                got = o[r * m:(r + 1) * m]
                if r == rank:
                    _expect(torch.equal(got, ci[r]), "%s coalesced all-gather own" % kind)
                else:
                    within(got, [ci[r]], kind, "%s coalesced all-gather %d" % (kind, m))
        st = stats(g)
        _expect(st["reduce_scatter_compressed"] == 6 and st["allgather_compressed"] == 4
                and st["reduce_scatter_uncompressed"] == 0
                and st["allgather_uncompressed"] == 0, "%s: counters %s" % (kind, st))


def case_allreduce_codec_and_fallbacks(rank, size):
    """The default group's options (int8 everywhere): all_reduce within the bound; integer
    tensors and MAX fall back to the exact uncompressed call, counted, never refused."""
    st0 = stats()
    n = 4096
    ins = inputs(size, n, salt=3)
    x = ins[rank].clone()
    dist.all_reduce(x)
    within(x, ins, "int8", "all_reduce")
    y = ins[rank].clone()
    dist.all_reduce(y, op=R.MAX)
    _expect(torch.equal(y, torch.stack(ins).max(0).values), "all_reduce MAX fell back")
    for dt in (torch.int64, torch.int32, torch.int8):
        big = (torch.arange(size * 6) % 5 + rank).to(dt)
        out = torch.empty(6, dtype=dt)
        dist.reduce_scatter_tensor(out, big)
        want = sum((torch.arange(size * 6) % 5 + r).to(torch.int64) for r in range(size))
        _expect(torch.equal(out.long(), want[rank * 6:(rank + 1) * 6]),
                "int reduce_scatter %s: %s" % (dt, out))
        g = torch.empty(size * 3, dtype=dt)
        dist.all_gather_into_tensor(g, torch.full((3,), rank, dtype=dt))
        _expect(torch.equal(g, torch.arange(size).repeat_interleave(3).to(dt)),
                "int all_gather %s" % dt)
        z = torch.full((5,), rank + 1, dtype=dt)
        dist.all_reduce(z)
        _expect(bool(torch.all(z == size * (size + 1) // 2)), "int all_reduce %s" % dt)
    f = torch.full((8,), float(rank + 1))
    o = torch.empty(8 // size)
    dist.reduce_scatter_tensor(o, f, op=R.MAX)
    _expect(bool(torch.all(o == size)), "MAX reduce_scatter: %s" % o)
    b = torch.tensor([rank % 2 == 0] * 4)
    dist.all_reduce(b)  # bool SUM (gradsync MAX): uncompressed
    _expect(bool(torch.all(b)), "bool all_reduce")
    st = stats()
    d = {k: st[k] - st0[k] for k in st}
    _expect(d["allreduce_compressed"] == 1 and d["allreduce_uncompressed"] == 5
            and d["reduce_scatter_uncompressed"] == 4 and d["allgather_uncompressed"] == 3
            and d["reduce_scatter_compressed"] == 0, "fallback counters %s" % d)


def case_error_feedback_converges(rank, size):
    """ef on: the running sum of 50 reduce_scatter_tensor results of the same gradient
    (the same tensor each call) converges to 50x the exact sum: within twice one step's
    bound (what is still owed is the last step's residual), where the group without error
    feedback is at least 10x further off (its error grows with the steps). Likewise for
    all_reduce. One residual is made per tensor and reused 49 times."""
    from gradsync.torch import Options
    kind = "int4" if "int4" in DENSE else "int8"
    steps, n = 50, 2048
    ins = inputs(size, size * n, salt=4)
    shard = slice(rank * n, (rank + 1) * n)
    parts = [x[shard].double() for x in ins]
    exact = sum(parts)
    one = sum(bound(kind, p, float(p.abs().max())) for p in parts)
    slack = steps * size * 2.0 ** -23 * sum(p.abs() for p in parts)
    errs = {}
    for ef in ("tensor", "off"):
        g = dist.new_group(pg_options=Options(reduce_scatter=kind, allreduce=kind,
                                              error_feedback=ef))
        grad = ins[rank].clone()
        out = torch.empty(n)
        acc = torch.zeros(n, dtype=torch.float64)
        for _ in range(steps):
            dist.reduce_scatter_tensor(out, grad, group=g)
            acc += out
        _expect(torch.equal(grad, ins[rank]), "the reduce-scatter changed its input")
        errs[ef] = (acc - steps * exact).abs()
        ar_grad = inputs(size, n, salt=6)
        acc2 = torch.zeros(n, dtype=torch.float64)
        buf = torch.empty(n)
        for _ in range(steps):
            buf.copy_(ar_grad[rank])
            dist.all_reduce(buf, group=g)
            acc2 += buf
        errs[ef + "-ar"] = (acc2 - steps * sum(p.double() for p in ar_grad)).abs()
        st = stats(g)
        if ef == "tensor":
            _expect(st["ef_created"] == 2 and st["ef_reused"] == 2 * (steps - 1)
                    and st["ef_entries"] == 2 and st["ef_busy"] == 0, "ef counters %s" % st)
        else:
            _expect(st["ef_created"] == 0, "ef off made residuals: %s" % st)
    e = errs["tensor"]
    _expect(bool(torch.all(e <= 2 * one + slack)), "%s with ef: %g > %g" % (
        kind, float(e.max()), float((2 * one + slack).max())))
    _expect(float(errs["off"].max()) >= 10 * float(e.max()),
            "without ef %g, with %g: the residual was not carried" % (
                float(errs["off"].max()), float(e.max())))
    ar_one = sum(bound(kind, p.double(), float(p.abs().max()))
                 for p in inputs(size, n, salt=6))
    _expect(float(errs["tensor-ar"].max()) <= float((4 * ar_one).max()) + 1e-3,
            "all_reduce with ef: %g" % float(errs["tensor-ar"].max()))
    return {"kind": kind, "ef": float(e.max()), "no_ef": float(errs["off"].max()),
            "bound": float((2 * one + slack).max())}


def case_ef_capacity_drops_the_least_recent(rank, size):
    from gradsync.torch import Options
    g = dist.new_group(pg_options=Options(reduce_scatter="int8", error_feedback="tensor",
                                          ef_capacity=2))
    ts = [torch.randn(size * 64) for _ in range(3)]
    out = torch.empty(64)
    for t in ts + ts[:1]:
        dist.reduce_scatter_tensor(out, t, group=g)
    st = stats(g)
    _expect(st["ef_entries"] == 2 and st["ef_evicted"] == 2 and st["ef_created"] == 4,
            "LRU of 2 over tensors 0 1 2 0: %s" % st)


def case_ef_capacity_bytes_drops_the_least_recent(rank, size):
    """A byte cap smaller than two residuals keeps at most one: every new tensor evicts
    the one before (4 bytes per element: 1024 bytes each, cap 1500), the bytes kept never
    pass the cap, and a tensor whose residual alone is larger than the cap gets none (it
    still compresses; counted as ef_oversize)."""
    from gradsync.torch import Options
    g = dist.new_group(pg_options=Options(reduce_scatter="int8", error_feedback="tensor",
                                          ef_capacity_bytes=1500))
    ts = [torch.randn(size * 64) for _ in range(3)]
    out = torch.empty(64)
    seen = []
    for t in ts + ts[:1]:
        dist.reduce_scatter_tensor(out, t, group=g)
        st = stats(g)
        seen.append((st["ef_entries"], st["ef_bytes"]))
        _expect(st["ef_entries"] == 1 and st["ef_bytes"] == 4 * t.numel(),
                "byte cap 1500 after a call: %s" % st)
    st = stats(g)
    _expect(st["ef_created"] == 4 and st["ef_evicted"] == 3 and st["ef_reused"] == 0,
            "byte cap 1500 over tensors 0 1 2 0: %s" % st)
    big = torch.randn(size * 128)  # 2048 bytes of residual: larger than the cap alone
    out2 = torch.empty(128)
    dist.reduce_scatter_tensor(out2, big, group=g)
    st2 = stats(g)
    _expect(st2["ef_oversize"] == 1 and st2["ef_created"] == 4 and st2["ef_entries"] == 1
            and st2["reduce_scatter_compressed"] == 5, "an oversize residual: %s" % st2)
    return {"kept": seen, "stats": {k: st2[k] for k in ("ef_created", "ef_evicted",
                                                        "ef_oversize", "ef_bytes")}}


def case_order_converges_on_fresh_tensors(rank, size):
    """error_feedback="order" with gradsync.torch.next_step after every call: the running
    sum of 50 reduce_scatter_tensor results of the same gradient, sent from a fresh
    tensor every call (a clone, the old ones kept alive so that no address comes back, as
    FSDP2's buffers do), converges to 50x the exact sum within twice one step's bound; the
    same with "tensor" does not (at least 10x further off: every call makes a new
    residual, 50 of them). Likewise for all_reduce on fresh tensors. "order" makes one
    residual per collective and reuses it 49 times."""
    import gradsync.torch as gt
    from gradsync.torch import Options
    kind = "int4" if "int4" in DENSE else "int8"
    steps, n = 50, 2048
    ins = inputs(size, size * n, salt=4)
    shard = slice(rank * n, (rank + 1) * n)
    parts = [x[shard].double() for x in ins]
    exact = sum(parts)
    one = sum(bound(kind, p, float(p.abs().max())) for p in parts)
    slack = steps * size * 2.0 ** -23 * sum(p.abs() for p in parts)
    ar_in = inputs(size, n, salt=6)
    ar_exact = sum(p.double() for p in ar_in)
    ar_one = sum(bound(kind, p.double(), float(p.abs().max())) for p in ar_in)
    errs, st = {}, {}
    for ef in ("order", "tensor"):
        g = dist.new_group(pg_options=Options(reduce_scatter=kind, allreduce=kind,
                                              error_feedback=ef))
        alive = []
        acc = torch.zeros(n, dtype=torch.float64)
        acc2 = torch.zeros(n, dtype=torch.float64)
        for _ in range(steps):
            grad = ins[rank].clone()
            out = torch.empty(n)
            dist.reduce_scatter_tensor(out, grad, group=g)
            acc += out
            buf = ar_in[rank].clone()
            dist.all_reduce(buf, group=g)
            acc2 += buf
            alive += [grad, buf]
            gt.next_step(g)
        errs[ef] = (acc - steps * exact).abs()
        errs[ef + "-ar"] = (acc2 - steps * ar_exact).abs()
        st[ef] = stats(g)
    o, t = st["order"], st["tensor"]
    _expect(o["ef_created"] == 2 and o["ef_reused"] == 2 * (steps - 1) and o["ef_entries"] == 2
            and o["ef_reset"] == 0 and o["steps"] == steps, "order counters %s" % o)
    _expect(t["ef_created"] == 2 * steps and t["ef_reused"] == 0,
            "tensor on fresh tensors reused a residual: %s" % t)
    _expect(o["ef_bytes"] == 4 * size * n + 4 * n + 4 * ((n + size - 1) // size),
            "order ef_bytes %s" % o)
    e = errs["order"]
    _expect(bool(torch.all(e <= 2 * one + slack)), "%s with order: %g > %g" % (
        kind, float(e.max()), float((2 * one + slack).max())))
    _expect(float(errs["tensor"].max()) >= 10 * float(e.max()),
            "tensor on fresh tensors %g, order %g: tensor should not converge" % (
                float(errs["tensor"].max()), float(e.max())))
    _expect(float(errs["order-ar"].max()) <= float((4 * ar_one).max()) + 1e-3,
            "all_reduce with order: %g" % float(errs["order-ar"].max()))
    _expect(float(errs["tensor-ar"].max()) >= 10 * float(errs["order-ar"].max()),
            "all_reduce: tensor %g, order %g" % (float(errs["tensor-ar"].max()),
                                                 float(errs["order-ar"].max())))
    return {"kind": kind, "order": float(e.max()), "tensor": float(errs["tensor"].max()),
            "bound": float((2 * one + slack).max()), "order_ar": float(errs["order-ar"].max()),
            "tensor_ar": float(errs["tensor-ar"].max())}


def case_order_shape_change_and_missing_next_step(rank, size):
    """error_feedback="order": a call whose element count or dtype differs from what its
    ordinal had last step starts a fresh residual (ef_reset); without next_step, the call
    that passes ef_capacity is refused on every rank with a RuntimeError naming next_step
    (nothing sent), and after next_step the group runs again."""
    import gradsync.torch as gt
    from gradsync.torch import Options
    g = dist.new_group(pg_options=Options(reduce_scatter="int8", error_feedback="order",
                                          ef_capacity=3))
    for numel, dt in ((64, torch.float32), (64, torch.float32), (128, torch.float32),
                      (128, torch.float64), (128, torch.float64)):
        out = torch.empty(numel, dtype=dt)
        dist.reduce_scatter_tensor(out, torch.randn(size * numel, dtype=dt), group=g)
        gt.next_step(g)
    st = stats(g)
    _expect(st["ef_created"] == 3 and st["ef_reset"] == 2 and st["ef_reused"] == 2
            and st["ef_entries"] == 1 and st["ef_bytes"] == 4 * size * 128,
            "order over shapes 64 64 128 128/f64 128/f64: %s" % st)
    out = torch.empty(8)
    for _ in range(3):  # ordinals 0, 1, 2: within ef_capacity
        dist.reduce_scatter_tensor(out, torch.randn(size * 8), group=g)
    try:
        dist.reduce_scatter_tensor(out, torch.randn(size * 8), group=g)
    except RuntimeError as exc:
        msg = str(exc)
        _expect("next_step" in msg and "ef_capacity=3" in msg, msg)
    else:
        raise AssertionError("a 4th call without next_step past ef_capacity=3 ran")
    gt.next_step(g)
    x = torch.full((size * 8,), float(rank))
    dist.reduce_scatter_tensor(out, x, group=g)
    _expect(bool(torch.allclose(out, torch.full((8,), float(sum(range(size)))), atol=0.2)),
            "after next_step: %s" % out)
    # "off" and "tensor" groups take next_step as a no-op.
    gt.next_step()
    return {"refused": msg.split("gradsync backend: ")[-1][:200]}


def case_bad_options(rank, size):
    from gradsync.torch import Options
    for kw, words in (({"allgather": "topk"}, "cannot serve"),
                      ({"reduce_scatter": "int9"}, "is unknown"),
                      ({"allreduce": gradsync.Codec("int8", block_size=0)}, "block_size"),
                      ({"error_feedback": "bucket"}, "error_feedback"),
                      ({"ef_capacity": 0}, "ef_capacity"),
                      ({"ef_capacity_bytes": 0}, "ef_capacity_bytes"),
                      ({"ef_capacity_bytes": 1.5}, "ef_capacity_bytes")):
        try:
            Options(**kw)
        except gradsync.InvalidArgument as exc:
            _expect(words in str(exc), "%s: %s" % (kw, exc))
        else:
            raise AssertionError("accepted %s" % kw)
    try:
        dist.new_group(pg_options=object())
    except TypeError as exc:
        _expect("gradsync.torch.Options" in str(exc), str(exc))
    else:
        raise AssertionError("pg_options=object() accepted")
    r = repr(Options(allgather="fp16", error_feedback=True))
    _expect("allgather=gradsync.Codec(kind='fp16')" in r and "'tensor'" in r, r)
    r = repr(Options(reduce_scatter="int8", error_feedback="order", ef_capacity_bytes=1 << 20))
    _expect("'order'" in r and "ef_capacity_bytes=1048576" in r, r)


CASES = {name[5:]: fn for name, fn in sorted(globals().items()) if name.startswith("case_")}
if os.environ.get("GSTEST_TORCH_CASES"):
    CASES = {k: v for k, v in CASES.items() if k in os.environ["GSTEST_TORCH_CASES"].split(",")}


def run_suite(rank, size):
    import traceback
    from gradsync.torch import Options
    init(rank, size, Options(allreduce="int8", reduce_scatter="int8", allgather="int8"))
    out = {}
    for name, fn in CASES.items():
        try:
            out[name] = (None, fn(rank, size))
        except BaseException:  # noqa: BLE001 - reported per case
            out[name] = (traceback.format_exc(), None)
    dist.destroy_process_group()
    return out


_RESULTS = {}


def _suite():
    if "r" not in _RESULTS:
        _RESULTS["r"] = run_ranks(run_suite, SIZE, backend=None, timeout_s=240)
    return _RESULTS["r"]


@pytest.mark.parametrize("case", sorted(CASES))
def test_c10d_compress(case):
    errors = ["rank %d: %s" % (r, res[case][0]) for r, res in enumerate(_suite())
              if res[case][0]]
    assert not errors, "\n".join(errors)
    values = [res[case][1] for res in _suite() if res[case][1] is not None]
    if values:
        print("%s: %s" % (case, values))
