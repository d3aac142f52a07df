# SPDX-License-Identifier: Apache-2.0
"""The torch 2.x C++ backend on CUDA tensors: run by hand on a machine with a GPU and a
CUDA build of torch 2.x (it has not run yet: no such machine has had torch), from the
repository root, with the extension built against that torch:

    GRADSYNC_LIBRARY=build/libgradsync.so PYTHONPATH=python \\
    GRADSYNC_TORCH_EXTENSION=$(ls build/torch-ext/_C*.so) python tests/torch/gpu_c10d.py

(tests/torch/run_torch2.sh build builds the extension; a CUDA build of libgradsync, with
NCCL for the stream-ordered path.) Two runs, each bounded: 1 rank (gradsync's NCCL path:
the op only enqueues, wait() orders the caller's stream after it) and 2 ranks sharing the
GPU (the staged path through host memory: wait() finishes on the host). Each checks
all_reduce (sync, async with a kernel queued after wait() that reads the result),
all_gather_into_tensor, reduce_scatter_tensor, broadcast and a CPU and a CUDA tensor in one
call refused. Prints one PASS or FAIL line per run; exit 0 only when both pass, 77 when
there is no GPU or the extension has no CUDA half."""

import os
import sys

import torch
import torch.distributed as dist

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from dist_harness import run_ranks  # noqa: E402


def _expect(cond, what):
    if not cond:
        raise AssertionError(what)


def cuda_suite(rank, size):
    torch.cuda.set_device(0)
    dev = torch.device("cuda", 0)
    x = torch.full((1 << 20,), float(rank + 1), device=dev)
    dist.all_reduce(x)
    want = size * (size + 1) / 2
    _expect(bool(torch.all(x == want)), "sync all_reduce: %s" % x[:4])
    # async: the caller's stream, after wait(), sees the result without a host sync
    y = torch.full((1 << 22,), float(rank + 1), device=dev)
    work = dist.all_reduce(y, async_op=True)
    work.wait()
    z = y * 2  # queued on the current stream after wait()
    _expect(bool(torch.all(z == 2 * want)), "async all_reduce then a kernel: %s" % z[:4])
    out = torch.empty(4 * size, device=dev)
    dist.all_gather_into_tensor(out, torch.full((4,), float(rank), device=dev))
    _expect(torch.equal(out.cpu(), torch.arange(size).repeat_interleave(4).float()),
            "all_gather_into_tensor")
    o = torch.empty(3, device=dev)
    dist.reduce_scatter_tensor(o, torch.ones(3 * size, device=dev) * (rank + 1))
    _expect(bool(torch.all(o == want)), "reduce_scatter_tensor")
    b = torch.full((5,), float(rank), device=dev)
    dist.broadcast(b, src=size - 1)
    _expect(bool(torch.all(b == size - 1)), "broadcast")
    try:
        dist.all_gather_into_tensor(torch.empty(4 * size), torch.ones(4, device=dev))
    except (RuntimeError, ValueError) as exc:
        _expect("one device" in str(exc) or "tensors on" in str(exc), "message: %s" % exc)
    else:
        raise AssertionError("a CPU output and a CUDA input were accepted")
    torch.cuda.synchronize()
    return True


def main():
    if not torch.cuda.is_available():
        print("SKIPPED: torch %s sees no GPU" % torch.__version__)
        return 77
    import gradsync.torch  # noqa: F401
    from gradsync.torch import _c10d
    if not _c10d.extension().cuda:
        print("SKIPPED: the extension was built without its CUDA half")
        return 77
    rc = 0
    for size, path in ((1, "NCCL, stream-ordered"), (2, "staged, 2 ranks on one GPU")):
        try:
            run_ranks(cuda_suite, size, timeout_s=120)
            print("PASS: %d rank(s), %s" % (size, path))
        except AssertionError as exc:
            print("FAIL: %d rank(s), %s: %s" % (size, path, exc))
            rc = 1
    return rc


if __name__ == "__main__":
    sys.exit(main())
