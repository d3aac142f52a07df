# SPDX-License-Identifier: Apache-2.0
"""torch 2.x: the "gradsync" backend as a C++ c10d::Backend (csrc/backend.cpp, the
extension gradsync.torch._C), registered for the devices "cpu" and "cuda" with torch's
extended API, so that ``init_process_group("gradsync")`` and
``init_process_group("cpu:gloo,cuda:gradsync")`` work, and every group after the default
one is made from the default group's communicator by its members alone
(gs_comm_create_group): no second rendezvous, and non-members never call.

The extension is looked for in GRADSYNC_TORCH_EXTENSION (a path; the build tree's tests
set it), then beside this file (``pip install --no-build-isolation ./python`` builds it
there when torch 2.x is installed). Without it, init_process_group("gradsync") fails with
a sentence that says how to build it (docs/python.md, "PyTorch").
"""
from __future__ import annotations

import datetime
import glob
import importlib.util
import os
import sys
import zlib
from typing import Any, Dict, Optional

import torch
import torch.distributed as dist

import gradsync
from gradsync import _lib  # noqa: F401 - libgradsync is loaded before the extension links it

from ._rendezvous import agree_address, forget_address
from .options import Options

BACKEND_NAME = "gradsync"
_ext: Any = None


def extension() -> Any:
    """The loaded gradsync.torch._C module; raises RuntimeError naming where it looked."""
    global _ext
    if _ext is not None:
        return _ext
    here = os.path.dirname(os.path.abspath(__file__))
    env = os.environ.get("GRADSYNC_TORCH_EXTENSION")
    paths = [env] if env else sorted(glob.glob(os.path.join(here, "_C*.so")))
    if not paths or not os.path.isfile(paths[0]):
        raise RuntimeError(
            "gradsync backend: the C++ extension for torch %s is not built (looked in %s). "
            "Build it with `pip install --no-build-isolation ./python` in this environment "
            "(torch must be installed first), or with `cmake -DGS_WITH_TORCH=ON "
            "-DGS_TORCH_PYTHON=%s` and GRADSYNC_TORCH_EXTENSION set to the _C*.so it builds "
            "(python/gradsync/torch/csrc/ in the build folder); docs/python.md, \"PyTorch\""
            % (torch.__version__, env or here, sys.executable))
    spec = importlib.util.spec_from_file_location("gradsync.torch._C", paths[0])
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)  # type: ignore[union-attr]
    _ext = mod
    return mod


def _timeout_ms(timeout: Any) -> int:
    """GS_TIMEOUT_MS wins (0: leave it to gradsync); else the group's timeout."""
    if "GS_TIMEOUT_MS" in os.environ:
        return 0
    if isinstance(timeout, datetime.timedelta):
        return int(min(timeout.total_seconds() * 1000, 2**31 - 1))
    return 0


def gradsync_backend(group: Any) -> Optional[Any]:
    """@group's gradsync C++ backend (its cpu or cuda one), or None."""
    ext = extension()
    for dev in ("cpu", "cuda"):
        try:
            b = group._get_backend(torch.device(dev))
        except Exception:  # noqa: BLE001 - no backend for that device
            continue
        if ext.is_gradsync(b):
            return b
    return None


def _default_backend() -> Optional[Any]:
    """The default group's gradsync backend, or None."""
    if not dist.is_initialized():
        return None
    return gradsync_backend(dist.distributed_c10d._get_default_group())


def _create(opts: Any, backend_options: Any) -> Any:
    """torch's creator call (extended API): @opts its _DistributedBackendOptions,
    @backend_options the pg_options given to init_process_group or new_group: None or a
    gradsync.torch.Options (the group's codecs and error feedback)."""
    if backend_options is not None and not isinstance(backend_options, Options):
        raise TypeError("gradsync backend: pg_options must be a gradsync.torch.Options (or "
                        "None), not %s" % type(backend_options).__name__)
    ext = extension()
    timeout_ms = _timeout_ms(opts.timeout)
    ranks = [int(r) for r in opts.global_ranks_in_group]
    parent = _default_backend() if ranks else None
    if parent is not None and ranks == sorted(set(ranks)):
        # The members alone, over the default group's connections; the group's name
        # (the same on every member) tells concurrent creations apart.
        tag = zlib.crc32(str(opts.group_id).encode())
        backend = ext.create_group(parent, ranks, tag, timeout_ms)
    else:
        addr, port = agree_address(opts.store, opts.group_rank)
        backend = ext.create_backend(opts.group_rank, opts.group_size, addr, port, timeout_ms,
                                     "torch-%s-%d" % (addr, port))
        forget_address(opts.store, opts.group_rank)
    if backend_options is not None:  # before torch sees the backend: no op has run on it
        ext.set_options(backend, **backend_options._native())
    return backend


def compression_stats(group: Any = None) -> Dict[str, int]:
    """What @group's gradsync backend (default: the default group's) compressed, ran
    uncompressed and kept as error feedback, as counters since the group was made:
    {allreduce,reduce_scatter,allgather}_{compressed,uncompressed} (tensors), ef_created,
    ef_reused, ef_evicted (residuals dropped past ef_capacity or ef_capacity_bytes),
    ef_busy (calls that ran without their residual because another call in flight held
    it), ef_oversize (calls that ran without one because it alone is larger than
    ef_capacity_bytes), ef_reset (error_feedback="order": a call whose element count or
    dtype differs from what its ordinal had, which starts a fresh residual), ef_entries
    and ef_bytes (kept now), steps (next_step calls)."""
    if group is None:
        group = dist.distributed_c10d._get_default_group()
    b = gradsync_backend(group)
    if b is None:
        raise ValueError("compression_stats: the group has no gradsync backend")
    return dict(extension().compression_stats(b))


def next_step(group: Any = None) -> None:
    """Mark the end of a training step on @group's gradsync backend (default: the default
    group's): with error_feedback="order", the next compressed reduce-scatter (all-reduce)
    is call 0 again, so the k-th call of every step shares the k-th residual. Call it once
    per step on every rank, after optimizer.step() (when no collective of the step is
    still to be issued). A no-op for the other error_feedback modes; counted as "steps"
    in compression_stats()."""
    if group is None:
        if not dist.is_initialized():
            raise ValueError("next_step: no process group (call init_process_group first)")
        group = dist.distributed_c10d._get_default_group()
    b = gradsync_backend(group)
    if b is None:
        raise ValueError("next_step: the group has no gradsync backend")
    extension().next_step(b)


def register_backend() -> None:
    """Register "gradsync" for cpu and cuda with torch 2.x (idempotent)."""
    if BACKEND_NAME.upper() not in dist.Backend._plugins:
        dist.Backend.register_backend(BACKEND_NAME, _create, extended_api=True,
                                      devices=["cpu", "cuda"])


__all__ = ["register_backend", "extension", "compression_stats", "next_step", "BACKEND_NAME", "gradsync",
           "Options"]
