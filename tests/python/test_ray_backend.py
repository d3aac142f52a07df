# SPDX-License-Identifier: Apache-2.0
"""The Ray collective backend (python/gradsync/ray; docs/python.md, "Ray collective
backend") in a local Ray head on loopback with 4 worker actors.

1. Every actor calls init_collective_group(backend="GRADSYNC"); all-reduce (4 ops, 4
   dtypes), all-gather, broadcast from every root, reduce, reduce-scatter, barrier and a
   send/recv ring on numpy arrays, and all-reduce, all-gather and broadcast on torch CPU
   tensors where the workers have torch; every result is checked exactly.
2. Bad inputs (non-contiguous, unsupported dtype, wrong-size or mismatched output list,
   several tensors, a bad root, a per-call timeout, a read-only tensor) raise a clear
   exception on every rank and change no tensor; the group works afterwards; the driver's
   ray.get re-raises an actor's gradsync.InvalidArgument as that class; a rank whose rank
   0 never comes raises TimeoutError naming the group and the key at its deadline.
3. destroy_collective_group, then the same group name again while the KV still holds the
   old epoch's pointer and address (as when rank 0 dies before it cleans up) and rank 0
   starts last: the new group must not read the old address, gets a new epoch, and works.
4. The same name once more through create_collective_group from the driver.

Run: the interpreter that has ray (tests/python/run_ray.sh picks the torch venv of
scripts/install-deps.sh), with GRADSYNC_LIBRARY and PYTHONPATH=python as ctest sets them.
Exit 0 pass, 1 fail, 77 skip (no ray). Every wait is bounded; ray.shutdown() in a finally;
Ray's session files go to a fresh folder under /tmp, removed at the end; Ray and gradsync
stay on 127.0.0.1.
"""
import os
import secrets
import shutil
import signal
import sys
import tempfile
import time

NWORKERS = 4
GET_TIMEOUT_S = 150  # any one round of actor calls
# The whole run's budget, well inside ctest's TIMEOUT (300 s), which kills without a
# finally: past it every wait fails at once and ray.shutdown() still runs.
BUDGET_S = 230
DEADLINE = time.monotonic() + BUDGET_S
GROUP = "gs_ray_test"


def skip(reason):
    print("SKIPPED: %s" % reason)
    sys.exit(77)


# Before Ray is imported (its constants read these) and inherited by every Ray process:
# ENABLE_RAY_CLUSTER off makes Ray's node address 127.0.0.1 (it otherwise swaps a loopback
# _node_ip_address for the routable one); a token of our own keeps Ray from writing
# ~/.ray/auth_token; no usage reporting; gradsync's rank 0 listens on 127.0.0.1.
os.environ["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] = "0"
if not (os.environ.get("RAY_AUTH_TOKEN") or os.environ.get("RAY_AUTH_TOKEN_PATH")):
    os.environ["RAY_AUTH_TOKEN"] = secrets.token_hex(32)
os.environ["RAY_USAGE_STATS_ENABLED"] = "0"
os.environ["GS_MASTER_ADDR"] = "127.0.0.1"
os.environ.setdefault("GS_TIMEOUT_MS", "30000")
os.environ.pop("RAY_ADDRESS", None)  # never join a cluster that is already running
os.environ.pop("GS_SOURCE_DIR", None)  # ctest's, not a knob of the library (it would warn)

try:
    import numpy as np
    import ray
    import ray.util.collective as col
    from ray.experimental import internal_kv
except ImportError as e:
    skip("cannot import ray (%s) with %s; scripts/install-deps.sh test installs ray into "
         "the torch venv (install-deps.sh --torch-venv-path)" % (e, sys.executable))
if not hasattr(col, "register_collective_backend"):
    skip("ray %s has no ray.util.collective.register_collective_backend" % ray.__version__)

import gradsync  # noqa: E402  (after the skip: the library must load from here on)
import gradsync.ray  # noqa: E402,F401  (registers GRADSYNC in the driver)
from gradsync.ray import _rendezvous  # noqa: E402


@ray.remote(num_cpus=0.5)
class Worker:
    """One rank. Each method checks its own results and raises AssertionError (with the
    values) on the first wrong one; it returns the number of checks made."""

    def __init__(self, rank, world):
        import gradsync.ray
        gradsync.ray.register()  # the import did; Ray's docs ask for it in every process
        self.rank, self.world = rank, world
        try:
            import torch
            self.torch = torch
        except ImportError:
            self.torch = None

    def ready(self):
        return self.rank

    def init(self, group):
        col.init_collective_group(self.world, self.rank, backend="GRADSYNC",
                                  group_name=group)
        return self.info(group)

    def info(self, group):
        g = col.get_group_handle(group)
        return {"epoch": g.epoch, "job_id": g.job_id, "addr": g.master_addr,
                "port": g.master_port, "rank": g.rank, "size": g.world_size,
                "backend": g.backend()}

    def destroy(self, group):
        g = col.get_group_handle(group)
        col.destroy_collective_group(group)
        assert not col.is_group_initialized(group), "group still initialized after destroy"
        try:
            g.communicator
        except gradsync.InvalidUsage:
            return 1
        raise AssertionError("a destroyed group's communicator is still usable")

    # ---- collectives --------------------------------------------------

    def collectives(self, group):
        r, n = self.rank, self.world
        checks = 0

        def eq(got, want, what):
            nonlocal checks
            assert got.dtype == want.dtype and np.array_equal(got, want), (
                "rank %d: %s: got %r, want %r" % (r, what, got, want))
            checks += 1

        for dtype in ("float32", "float64", "int32", "int64"):
            base = np.arange(1, 8, dtype=dtype)
            for op, want in ((col.types.ReduceOp.SUM, base * n + n * (n - 1) // 2),
                             (col.types.ReduceOp.PRODUCT,
                              np.prod([base + k for k in range(n)], axis=0).astype(dtype)),
                             (col.types.ReduceOp.MIN, base.copy()),
                             (col.types.ReduceOp.MAX, base + (n - 1))):
                x = (base + r).astype(dtype)
                col.allreduce(x, group_name=group, op=op)
                eq(x, want.astype(dtype), "allreduce %s %s" % (op.name, dtype))

        x = np.full((2, 3), r + 1, dtype=np.float32)  # 2-D in, 2-D outs
        outs = [np.zeros((2, 3), dtype=np.float32) for _ in range(n)]
        col.allgather(outs, x, group_name=group)
        for j in range(n):
            eq(outs[j], np.full((2, 3), j + 1, dtype=np.float32), "allgather block %d" % j)

        for root in range(n):
            x = np.arange(5, dtype=np.int64) * (10 * r + 1)
            col.broadcast(x, src_rank=root, group_name=group)
            eq(x, np.arange(5, dtype=np.int64) * (10 * root + 1), "broadcast from %d" % root)

        root = n - 1
        x = np.full(6, r + 1, dtype=np.float64)
        before = x.copy()
        col.reduce(x, dst_rank=root, group_name=group, op=col.types.ReduceOp.SUM)
        eq(x, np.full(6, n * (n + 1) / 2) if r == root else before, "reduce to %d" % root)

        ins = [np.full(3, 100 * r + j, dtype=np.int32) for j in range(n)]
        out = np.zeros(3, dtype=np.int32)
        col.reducescatter(out, ins, group_name=group)
        eq(out, np.full(3, sum(100 * k + r for k in range(n)), dtype=np.int32),
           "reducescatter")

        col.barrier(group_name=group)

        # A ring: even ranks send first, odd ones receive first (blocking calls).
        dst, src = (r + 1) % n, (r - 1) % n
        msg = np.arange(4, dtype=np.float32) + 10 * r
        got = np.zeros(4, dtype=np.float32)
        if r % 2 == 0:
            col.send(msg, dst, group_name=group)
            col.recv(got, src, group_name=group)
        else:
            col.recv(got, src, group_name=group)
            col.send(msg, dst, group_name=group)
        eq(got, np.arange(4, dtype=np.float32) + 10 * src, "recv from %d" % src)
        return checks

    def torch_collectives(self, group):
        """The same calls on torch CPU tensors; (checks, None) or (0, why not)."""
        th, r, n = self.torch, self.rank, self.world
        if th is None:
            return 0, "no torch in the workers"
        x = th.arange(6, dtype=th.float32) + r
        col.allreduce(x, group_name=group)
        want = th.arange(6, dtype=th.float32) * n + n * (n - 1) / 2
        assert th.equal(x, want), "rank %d: torch allreduce: %s != %s" % (r, x, want)
        outs = [th.zeros(3, dtype=th.int64) for _ in range(n)]
        col.allgather(outs, th.full((3,), r, dtype=th.int64), group_name=group)
        for j in range(n):
            assert th.equal(outs[j], th.full((3,), j, dtype=th.int64)), (
                "rank %d: torch allgather block %d: %s" % (r, j, outs[j]))
        x = th.full((4,), float(r), dtype=th.float64)
        col.broadcast(x, src_rank=1 % n, group_name=group)
        assert th.equal(x, th.full((4,), float(1 % n), dtype=th.float64)), (
            "rank %d: torch broadcast: %s" % (r, x))
        return 3, None

    # ---- bad inputs ---------------------------------------------------

    def bad_inputs(self, group):
        """Each bad call on every rank: the exception type and a phrase of its message
        are checked, and no tensor changed. Returns the number of cases."""
        r, n = self.rank, self.world
        g = col.get_group_handle(group)
        cases = 0

        def expect(exc, phrase, call, *keep):
            nonlocal cases
            saved = [k.copy() for k in keep]
            try:
                call()
            except exc as e:
                assert phrase in str(e), "rank %d: %r lacks %r" % (r, str(e), phrase)
            else:
                raise AssertionError("rank %d: no %s for the call with %r"
                                     % (r, exc.__name__, phrase))
            for k, s in zip(keep, saved):
                assert np.array_equal(k, s), "rank %d: a failed call (%s) changed %r" % (
                    r, phrase, k)
            cases += 1

        base = np.arange(8, dtype=np.float32) + r
        strided = base[::2]  # not contiguous
        expect(ValueError, "not C-contiguous",
               lambda: col.allreduce(strided, group_name=group), base)
        cplx = np.ones(4, dtype=np.complex64)
        expect(ValueError, "cannot reduce", lambda: col.allreduce(cplx, group_name=group),
               cplx)
        x = np.full(3, r, dtype=np.float32)
        short = [np.zeros(3, dtype=np.float32) for _ in range(n - 1)]
        # Ray checks the list's length itself; the backend checks it again for direct calls.
        expect(RuntimeError, "world_size", lambda: col.allgather(short, x, group_name=group),
               x, *short)
        expect(ValueError, "world_size = %d" % n, lambda: g.allgather([short], [x]),
               x, *short)
        mixed = [np.zeros(3, dtype=np.float32) for _ in range(n - 1)] + [
            np.zeros(3, dtype=np.float64)]
        expect(ValueError, "it must match the tensor",
               lambda: col.allgather(mixed, x, group_name=group), x, *mixed)
        small = [np.zeros(3, dtype=np.float32) for _ in range(n - 1)] + [
            np.zeros(2, dtype=np.float32)]
        expect(ValueError, "it must match the tensor",
               lambda: col.allgather(small, x, group_name=group), x, *small)
        out = np.zeros(3, dtype=np.int32)
        ins = [np.ones(3, dtype=np.int32) for _ in range(n - 1)] + [np.ones(4, dtype=np.int32)]
        expect(ValueError, "it must match the tensor",
               lambda: col.reducescatter(out, ins, group_name=group), out, *ins)
        y = np.ones(3, dtype=np.float32)
        expect(NotImplementedError, "*_multigpu", lambda: g.allreduce([y, y.copy()]), y)
        opts = col.types.BroadcastOptions()
        opts.root_rank = n
        expect(ValueError, "not a rank of the group", lambda: g.broadcast([y], opts), y)
        opts = col.types.AllReduceOptions()
        opts.timeout_ms = 5
        expect(NotImplementedError, "per-call timeout_ms", lambda: g.allreduce([y], opts), y)
        ro = np.ones(3, dtype=np.float32)
        ro.flags.writeable = False
        expect(ValueError, "is read-only", lambda: col.allreduce(ro, group_name=group), ro)

        # The group still works.
        z = np.full(5, r + 1, dtype=np.int64)
        col.allreduce(z, group_name=group)
        assert np.array_equal(z, np.full(5, n * (n + 1) // 2)), "rank %d: after: %r" % (r, z)
        return cases

    def bad_alone(self, group):
        """A bad call for the driver to see (a local check: the other ranks never know)."""
        col.allreduce(np.ones(3, dtype=np.complex64), group_name=group)

    def orphan(self, group, timeout_ms):
        """Rank 1 of a group whose rank 0 never comes: TimeoutError naming group and key."""
        try:
            gradsync.ray.GradsyncGroup(self.world, 1, group, timeout_ms=timeout_ms)
        except TimeoutError as e:
            return str(e)
        raise AssertionError("rank 1 of %r without rank 0 did not time out" % group)

    # ---- the declarative path -----------------------------------------

    def allreduce_once(self, group):
        x = np.full(4, self.rank, dtype=np.int64)
        col.allreduce(x, group_name=group)  # the first call creates the group here
        n = self.world
        assert np.array_equal(x, np.full(4, n * (n - 1) // 2)), "rank %d: %r" % (self.rank, x)
        return self.info(group)


def get(refs, what):
    """ray.get with a deadline; the error says which step did not finish."""
    timeout = max(1.0, min(GET_TIMEOUT_S, DEADLINE - time.monotonic()))
    try:
        return ray.get(refs, timeout=timeout)
    except ray.exceptions.GetTimeoutError:
        raise AssertionError("%s did not finish in %.0f s (the test's budget is %d s)"
                             % (what, timeout, BUDGET_S)) from None


def descendants(pid):
    """Live processes below @pid (from /proc)."""
    children = {}
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open("/proc/%s/stat" % d) as f:
                stat = f.read()
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2:].split()
        if fields[0] != "Z":
            children.setdefault(int(fields[1]), []).append(int(d))
    out, todo = [], [pid]
    while todo:
        for c in children.get(todo.pop(), []):
            out.append(c)
            todo.append(c)
    return out


def kv_get(key):
    v = internal_kv._internal_kv_get(key, namespace=_rendezvous.NAMESPACE)
    return v.decode() if v is not None else None


def kv_put(key, value):
    internal_kv._internal_kv_put(key, value, overwrite=True, namespace=_rendezvous.NAMESPACE)


def run(actors, t0):
    def step(msg):
        print("[%5.1f s] %s" % (time.monotonic() - t0, msg), flush=True)

    # The actors first (each imports Ray's collective module, and torch with it: seconds
    # apiece on 2 cores), so that the ranks' rendezvous deadlines start together.
    get([a.ready.remote() for a in actors], "starting %d actors" % len(actors))
    step("%d actors up" % len(actors))
    infos = get([a.init.remote(GROUP) for a in actors], "init_collective_group")
    e1 = infos[0]["epoch"]
    assert all(i["epoch"] == e1 for i in infos), "ranks disagree on the epoch: %r" % infos
    assert all(i["addr"] == "127.0.0.1" for i in infos), "not on loopback: %r" % infos
    assert [i["rank"] for i in infos] == list(range(NWORKERS)), infos
    assert infos[0]["backend"] == "GRADSYNC"
    job = _rendezvous.scope()  # the driver's job id, which its actors share
    assert kv_get(_rendezvous.addr_key(job, GROUP, e1)) is None, "epoch 1's address key left"
    step("epoch 1: %d ranks on 127.0.0.1:%d, job_id %s" % (NWORKERS, infos[0]["port"],
                                                           infos[0]["job_id"]))
    n = get([a.collectives.remote(GROUP) for a in actors], "numpy collectives")
    step("numpy collectives: %d exact checks per rank" % n[0])
    res = get([a.torch_collectives.remote(GROUP) for a in actors], "torch collectives")
    if res[0][1]:
        step("torch collectives: not run (%s)" % res[0][1])
    else:
        step("torch collectives: %d exact checks per rank" % res[0][0])
    n = get([a.bad_inputs.remote(GROUP) for a in actors], "bad inputs")
    step("bad inputs: %d cases raised and changed nothing; the group still works" % n[0])
    try:
        get(actors[1].bad_alone.remote(GROUP), "a bad call on rank 1")
    except gradsync.InvalidArgument as e:  # the actor's exception, through ray.get
        assert e.name == "GS_ERR_INVALID_ARG" and "complex64" in e.message, (e.name, e.message)
    else:
        raise AssertionError("rank 1's bad call did not raise in the driver")
    step("a bad call in an actor: gradsync.InvalidArgument in the driver's ray.get")
    t = time.monotonic()
    msg = get(actors[1].orphan.remote("gs_ray_orphan", 700), "a rank without rank 0")
    waited = time.monotonic() - t
    key = _rendezvous.epoch_key(job, "gs_ray_orphan")
    assert "'gs_ray_orphan'" in msg and key in msg and "GS_TIMEOUT_MS" in msg, msg
    assert waited < 30, "the 0.7 s rendezvous deadline took %.1f s" % waited
    step("a rank whose rank 0 never comes: TimeoutError after %.1f s naming %s" % (waited, key))
    get([a.destroy.remote(GROUP) for a in actors], "destroy_collective_group")
    step("destroy_collective_group: done on every rank")

    # Epoch 2: the old epoch's pointer and address back in the KV (a rank 0 that died
    # before cleaning up) and rank 0 starting last: ranks 1..3 must wait for a new epoch.
    kv_put(_rendezvous.epoch_key(job, GROUP), e1)
    kv_put(_rendezvous.addr_key(job, GROUP, e1), "127.0.0.1:%d" % infos[0]["port"])
    later = [a.init.remote(GROUP) for a in actors[1:]]
    time.sleep(1.5)
    ready, _ = ray.wait(later, num_returns=len(later), timeout=0)
    assert not ready, "ranks 1.. finished init before rank 0 started: they used epoch 1"
    infos2 = get([actors[0].init.remote(GROUP)] + later, "init_collective_group again")
    e2 = infos2[0]["epoch"]
    assert e2 != e1 and all(i["epoch"] == e2 for i in infos2), (
        "the re-created group reused epoch %s or disagrees: %r" % (e1, infos2))
    assert infos2[0]["job_id"] != infos[0]["job_id"]
    n = get([a.collectives.remote(GROUP) for a in actors], "collectives, epoch 2")
    step("epoch 2 (stale epoch 1 planted, rank 0 last): new epoch, %d checks per rank" % n[0])
    get([a.destroy.remote(GROUP) for a in actors], "destroy_collective_group, epoch 2")

    # Epoch 3: create_collective_group from the driver; the first call creates the group.
    col.create_collective_group(actors, NWORKERS, list(range(NWORKERS)), backend="GRADSYNC",
                                group_name=GROUP)
    infos3 = get([a.allreduce_once.remote(GROUP) for a in actors], "create_collective_group")
    e3 = infos3[0]["epoch"]
    assert e3 not in (e1, e2) and all(i["epoch"] == e3 for i in infos3), infos3
    get([a.destroy.remote(GROUP) for a in actors], "destroy_collective_group, epoch 3")
    step("epoch 3 (create_collective_group from the driver): allreduce exact, destroyed")


def main():
    t0 = time.monotonic()
    tmp = tempfile.mkdtemp(prefix="gs-ray-", dir="/tmp")
    rc = 1
    try:
        ray.init(address="local", namespace="gradsync_test", num_cpus=NWORKERS,
                 include_dashboard=False,
                 _node_ip_address="127.0.0.1", _temp_dir=tmp, configure_logging=False)
        print("[%5.1f s] ray %s head on %s, session in %s" % (
            time.monotonic() - t0, ray.__version__, ray.util.get_node_ip_address(), tmp),
            flush=True)
        actors = [Worker.remote(r, NWORKERS) for r in range(NWORKERS)]
        run(actors, t0)
        rc = 0
    except Exception as e:
        print("FAIL: %s: %s" % (type(e).__name__, e), flush=True)
    finally:
        try:
            ray.shutdown()
        except Exception as e:
            print("FAIL: ray.shutdown(): %s" % e)
            rc = 1
        left = descendants(os.getpid())
        for _ in range(100):  # up to 10 s for Ray's processes to exit
            if not left:
                break
            time.sleep(0.1)
            left = descendants(os.getpid())
        if left:
            print("FAIL: processes of this Ray head left after ray.shutdown(): %s; killing them"
                  % left)
            for pid in left:
                try:
                    os.kill(pid, signal.SIGKILL)
                except OSError:
                    pass
            rc = 1
        shutil.rmtree(tmp, ignore_errors=True)
    print("%s (%.1f s)" % ("PASS" if rc == 0 else "FAIL", time.monotonic() - t0))
    return rc


if __name__ == "__main__":
    sys.exit(main())
