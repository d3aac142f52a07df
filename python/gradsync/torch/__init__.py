# SPDX-License-Identifier: Apache-2.0
"""PyTorch integration of gradsync (docs/python.md, "PyTorch").

- gradsync.torch.backend: the "gradsync" torch.distributed backend, registered
  on import of this package: torch.distributed.init_process_group("gradsync").
- gradsync.torch.hooks: GradsyncHookState and gradsync_allreduce_hook, a DDP
  communication hook with gradsync's codecs and per-bucket error feedback.
- gradsync.torch.Options: per-group compression of the torch 2.x backend, passed as
  pg_options to init_process_group("gradsync") or new_group (codecs for all-reduce,
  reduce-scatter and all-gather; error feedback per tensor or per call's place in
  the step), with gradsync.torch.next_step(group) once per step for
  error_feedback="order" and gradsync.torch.compression_stats(group).

Needs torch and a CPU build of libgradsync (GRADSYNC_LIBRARY names it).
"""

from . import backend, hooks
from .backend import ProcessGroupGradsync, register_backend
from .hooks import GradsyncHookState, gradsync_allreduce_hook
from .options import Options


def next_step(group=None):
    """The end of a training step on @group (torch 2.x backend; error_feedback="order"
    counts its calls from 0 again): gradsync.torch._c10d.next_step."""
    from ._c10d import next_step as _next_step
    _next_step(group)


def compression_stats(group=None):
    """@group's compression counters: gradsync.torch._c10d.compression_stats."""
    from ._c10d import compression_stats as _stats
    return _stats(group)


__all__ = [
    "ProcessGroupGradsync",
    "register_backend",
    "GradsyncHookState",
    "gradsync_allreduce_hook",
    "Options",
    "next_step",
    "compression_stats",
    "backend",
    "hooks",
]
