# SPDX-License-Identifier: Apache-2.0
"""Ray integration of gradsync (docs/python.md, "Ray collective backend").

A backend of ray.util.collective, registered as "GRADSYNC" on import of this package
(ray.util.collective.register_collective_backend), in the driver and in every actor:

    import ray, numpy as np
    import ray.util.collective as col
    import gradsync.ray                                   # registers "GRADSYNC"

    @ray.remote
    class Worker:
        def __init__(self):
            import gradsync.ray                           # the actor's process too
        def setup(self, world_size, rank):
            col.init_collective_group(world_size, rank, backend="GRADSYNC",
                                      group_name="grads")
        def step(self):
            x = np.ones(4, dtype=np.float32)
            col.allreduce(x, group_name="grads")          # in place: x == world_size
            return x

Supported: allreduce, reduce (sum, product, min, max), broadcast, allgather,
reducescatter, barrier, send and recv, on one CPU numpy array or torch tensor per process
(C-contiguous; float32/64, float16, bfloat16 for torch, int8, uint8, int32, int64).
Not supported (NotImplementedError naming it): the *_multigpu calls (several tensors per
process), a per-call timeout_ms (GS_TIMEOUT_MS is the group's deadline). The group's
gradsync.Communicator is col.get_group_handle(name).communicator, for everything else.
Needs Ray 2.x with register_collective_backend (tested with 2.60.0) and libgradsync.
"""
from __future__ import annotations

from typing import Type

from ._group import BACKEND, GradsyncGroup


def register(name: str = BACKEND, group_cls: Type[GradsyncGroup] = GradsyncGroup) -> None:
    """Register @group_cls with ray.util.collective under @name (case-insensitive).
    Idempotent; ValueError when another class holds the name already."""
    from ray.util.collective import register_collective_backend
    from ray.util.collective.backend_registry import BackendRegistry

    registry = BackendRegistry()  # Ray's process-wide singleton
    if registry.is_registered(name):
        held = registry.get(name)
        if held is group_cls:
            return
        raise ValueError("gradsync.ray: the Ray collective backend %r is already registered "
                         "to %s.%s; register gradsync under another name"
                         % (name.upper(), held.__module__, held.__qualname__))
    register_collective_backend(name, group_cls)


register()

__all__ = ["BACKEND", "GradsyncGroup", "register"]
