# SPDX-License-Identifier: Apache-2.0
"""PyTorch integration of gradsync (docs/python.md, "PyTorch").

- gradsync.torch.backend: the "gradsync" torch.distributed backend, registered
  on import of this package: torch.distributed.init_process_group("gradsync").
- gradsync.torch.hooks: GradsyncHookState and gradsync_allreduce_hook, a DDP
  communication hook with gradsync's codecs and per-bucket error feedback.
- gradsync.torch.Options: per-group compression of the torch 2.x backend, passed as
  pg_options to init_process_group("gradsync") or new_group (codecs for all-reduce,
  reduce-scatter and all-gather; error feedback per tensor).

Needs torch and a CPU build of libgradsync (GRADSYNC_LIBRARY names it).
"""

from . import backend, hooks
from .backend import ProcessGroupGradsync, register_backend
from .hooks import GradsyncHookState, gradsync_allreduce_hook
from .options import Options

__all__ = [
    "ProcessGroupGradsync",
    "register_backend",
    "GradsyncHookState",
    "gradsync_allreduce_hook",
    "Options",
    "backend",
    "hooks",
]
