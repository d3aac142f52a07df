# SPDX-License-Identifier: Apache-2.0
"""PyTorch integration of gradsync (docs/python.md, "PyTorch").

- gradsync.torch.backend: the "gradsync" torch.distributed backend, registered
  on import of this package: torch.distributed.init_process_group("gradsync").
- gradsync.torch.hooks: GradsyncHookState and gradsync_allreduce_hook, a DDP
  communication hook with gradsync's codecs and per-bucket error feedback.

Needs torch and a CPU build of libgradsync (GRADSYNC_LIBRARY names it).
"""

from . import backend, hooks
from .backend import ProcessGroupGradsync, register_backend
from .hooks import GradsyncHookState, gradsync_allreduce_hook

__all__ = [
    "ProcessGroupGradsync",
    "register_backend",
    "GradsyncHookState",
    "gradsync_allreduce_hook",
    "backend",
    "hooks",
]
