# SPDX-License-Identifier: Apache-2.0
"""Run a function on N local ranks (torch.multiprocessing spawn) with a deadline.

Each rank gets MASTER_ADDR/MASTER_PORT, initialises the process group of the
requested backend, runs fn(rank, size, *args) and sends back its return value
or its traceback. A rank that does not finish within the deadline is killed,
and the caller gets an error naming it, so a hang fails one test, not the suite.
Not a test module: imported by the tests in this folder.
"""

import datetime
import os
import socket
import time
import traceback

import torch.multiprocessing as mp


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _timeout_s(default):
    mult = float(os.environ.get("GSTEST_TIMEOUT_MULT", "1"))
    return default * mult


_RESULTS = None  # this rank's queue (in a spawned rank)


def report_and_die(rank, value, code=9):
    """Hand back @value as this rank's result, then exit at once (no destroy, no goodbye):
    a rank that crashes mid-job, for the fault tests."""
    _RESULTS.put((rank, True, value))
    time.sleep(0.2)  # the queue's feeder thread flushes
    os._exit(code)


def _entry(rank, size, port, backend, fn, args, results):
    global _RESULTS
    _RESULTS = results
    try:
        import torch.distributed as dist

        os.environ["MASTER_ADDR"] = "127.0.0.1"
        os.environ["MASTER_PORT"] = str(port)
        os.environ.setdefault("GS_TIMEOUT_MS", "30000")
        if backend is not None and (backend == "gradsync" or backend.startswith("hook")):
            import gradsync.torch  # noqa: F401  registers the backend
        if backend is not None:
            dist.init_process_group("gloo" if backend.startswith("hook") else backend,
                                    rank=rank, world_size=size,
                                    timeout=datetime.timedelta(seconds=60))
        value = fn(rank, size, *args)
        if backend is not None:
            dist.destroy_process_group()
        results.put((rank, True, value))
    except BaseException:
        results.put((rank, False, traceback.format_exc()))


def run_ranks(fn, size, backend="gradsync", args=(), timeout_s=90):
    """Return [fn's value on rank r for r in range(size)]; raise AssertionError with the
    failing rank's traceback, or naming the ranks that missed the deadline."""
    ctx = mp.get_context("spawn")
    results = ctx.SimpleQueue()
    port = free_port()
    procs = [ctx.Process(target=_entry, args=(r, size, port, backend, fn, args, results))
             for r in range(size)]
    for p in procs:
        p.start()
    deadline = _timeout_s(timeout_s)

    end = time.monotonic() + deadline
    got = {}
    while len(got) < size and time.monotonic() < end:
        if not results.empty():
            rank, ok, value = results.get()
            got[rank] = (ok, value)
            if not ok:
                break
        else:
            if all((not p.is_alive()) for p in procs) and results.empty():
                break
            time.sleep(0.02)
    for p in procs:
        p.join(timeout=2 if len(got) == size else 0.1)
        if p.is_alive():
            p.kill()
            p.join()
    failed = [(r, v) for r, (ok, v) in got.items() if not ok]
    if failed:
        raise AssertionError("rank %d failed:\n%s" % failed[0])
    missing = sorted(set(range(size)) - set(got))
    if missing:
        raise AssertionError("ranks %s did not finish within %.0f s (exit codes %s)"
                             % (missing, deadline, [p.exitcode for p in procs]))
    return [got[r][1] for r in range(size)]
