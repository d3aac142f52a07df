# SPDX-License-Identifier: Apache-2.0
"""The address of a new communicator's rendezvous, agreed through torch's store: rank 0
picks a free port on its rendezvous address and publishes "addr:port"; the others read it.
GS_MASTER_ADDR, else MASTER_ADDR, else 127.0.0.1 names rank 0's host. Shared by the torch
1.13 Python process group (backend.py) and the torch 2.x C++ backend (_c10d.py)."""
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
