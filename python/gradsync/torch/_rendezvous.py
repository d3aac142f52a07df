# SPDX-License-Identifier: Apache-2.0
"""The address of a new communicator's rendezvous, agreed through torch's store: rank 0
picks a free port on its rendezvous address and publishes "addr:port"; the others read it.
GS_MASTER_ADDR, else MASTER_ADDR, else 127.0.0.1 names rank 0's host. Shared by the torch
1.13 Python process group (backend.py) and the torch 2.x C++ backend (_c10d.py).

The store can outlive the group: under torchrun every worker group of an elastic job (after
a restart or a membership change) uses the agent's store under the same keys. So rank 0
deletes the key once the communicator is made (forget_address): every other rank read the
address before it joined, and a later group's ranks wait for their own rank 0's address
instead of reading the last group's (and failing to reach it until GS_TIMEOUT_MS). A
rendezvous that failed leaves the key, as a rank that comes late still reads an address
and fails at GS_TIMEOUT_MS, not at the store's timeout."""
from __future__ import annotations

import os
import socket
from typing import Any, Tuple

RENDEZVOUS_KEY = "gradsync/rendezvous"


def free_port(addr: str) -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.bind((addr, 0))
        return s.getsockname()[1]


def agree_address(store: Any, rank: int) -> Tuple[str, int]:
    if rank == 0:
        addr = os.environ.get("GS_MASTER_ADDR") or os.environ.get("MASTER_ADDR") or "127.0.0.1"
        try:
            bind_addr = socket.gethostbyname(addr)
        except OSError:
            bind_addr = ""
        store.set(RENDEZVOUS_KEY, "%s:%d" % (addr, free_port(bind_addr)))
    value = store.get(RENDEZVOUS_KEY).decode()
    addr, _, port = value.rpartition(":")
    return addr, int(port)


def forget_address(store: Any, rank: int) -> None:
    """Rank 0, once the communicator is made at the agreed address: delete the key, which
    every other rank has read (it joined). Best effort: a store that cannot delete keeps it."""
    if rank != 0:
        return
    try:
        store.delete_key(RENDEZVOUS_KEY)
    except Exception:  # noqa: BLE001 - e.g. a store without delete_key
        pass
