# SPDX-License-Identifier: Apache-2.0
"""Communicators: from the environment and from keyword arguments, dup, split,
statistics, abort from another thread, the deadline, close and context managers."""
import array
import os
import threading
import time

import pytest

from conftest import WORLD

import gradsync


def test_from_environment(comm):
    assert comm.size == WORLD
    want = int(os.environ.get("GS_RANK") or os.environ.get("RANK") or 0)
    assert comm.rank == want
    assert repr(comm) == "<gradsync.Communicator rank %d of %d>" % (comm.rank, comm.size)
    assert comm.async_error() is None


def test_explicit_config_single_rank():
    with gradsync.Communicator(rank=0, size=1, local_rank=0, timeout_ms=5000,
                               master_addr="127.0.0.1", transport="tcp", tcp_nsocks=1,
                               slice_bytes=4096, algo="ring", job_id="pytest") as c:
        assert (c.rank, c.size) == (0, 1)
        x = array.array("f", [1.5, 2.5])
        assert c.allreduce(x, op="max") is x and list(x) == [1.5, 2.5]
    assert c.closed


def test_config_mirrors_every_field():
    fields = [f for f, _ in gradsync._types.Config._fields_]
    assert fields[:2] == ["size", "version"]
    cfg, _ = gradsync._comm._make_config({})
    import ctypes
    assert cfg.size == ctypes.sizeof(gradsync._types.Config)
    for name, ctype in gradsync._types.Config._fields_[2:]:
        v = getattr(cfg, name)
        if isinstance(v, ctypes._Pointer):  # abort_flag: the caller's, NULL unless given
            v = ctypes.cast(v, ctypes.c_void_p).value
        assert v is None or v == gradsync.UNSET, (name, v)


def test_deadline_names_the_call():
    with gradsync.Communicator(rank=0, size=1, local_rank=0, timeout_ms=300) as c:
        t0 = time.monotonic()
        with pytest.raises(gradsync.Timeout) as ei:
            c.recv(bytearray(4), gradsync.ANY_SOURCE, tag=1)
        assert time.monotonic() - t0 < 20
        assert isinstance(ei.value, TimeoutError) and ei.value.name == "GS_ERR_TIMEOUT"
        assert ei.value.message


def test_abort_from_another_thread():
    c = gradsync.Communicator(rank=0, size=1, local_rank=0, timeout_ms=60000)
    threading.Timer(0.2, c.abort).start()
    with pytest.raises(gradsync.Aborted) as ei:
        c.recv(bytearray(4), gradsync.ANY_SOURCE, tag=1)
    assert ei.value.name == "GS_ERR_ABORTED"
    with pytest.raises(gradsync.Aborted):  # sticky
        c.barrier()
    assert isinstance(c.async_error(), gradsync.Error)
    c.close()


def test_dup(comm):
    with comm.dup() as d:
        assert (d.rank, d.size) == (comm.rank, comm.size)
        x = array.array("q", [comm.rank + 1])
        d.allreduce(x)
        assert x[0] == comm.size * (comm.size + 1) // 2


@pytest.mark.parametrize("colors", ["parity", "negative"])
def test_split(comm, colors):
    me, n = comm.rank, comm.size
    if colors == "parity":
        color, key = me % 2, n - me  # reversed order inside each half
    else:
        color, key = (-1 if me == 0 else 0), 0
    sub = comm.split(color, key)
    if color < 0:
        assert sub is None
        return
    members = [r for r in range(n) if (r % 2 == color if colors == "parity" else r != 0)]
    if colors == "parity":
        members.sort(key=lambda r: n - r)
    with sub:
        assert sub.size == len(members) and sub.rank == members.index(me)
        x = array.array("i", [me])
        sub.allreduce(x)
        assert x[0] == sum(members)


def test_revoke_then_shrink(comm):
    """A revoke fails the other ranks' barrier with gradsync.Revoked (or their next call);
    the shrink after it keeps every rank and works."""
    d = comm.dup()
    d.barrier()  # every rank has finished making it: a revoke fails a creation in progress
    if comm.rank == 0:
        d.revoke()
    with pytest.raises(gradsync.Revoked) as ei:
        d.barrier()
    assert "revoked the communicator" in str(ei.value)
    with pytest.raises(gradsync.Revoked):  # sticky
        d.barrier()
    with d.shrink() as s:
        assert (s.rank, s.size) == (comm.rank, comm.size)
        x = array.array("q", [comm.rank + 1])
        s.allreduce(x)
        assert x[0] == comm.size * (comm.size + 1) // 2
    d.close()


_JOINER = """
import array, sys, gradsync
uid, n = bytes.fromhex(sys.argv[1]), int(sys.argv[2])
with gradsync.Communicator.join(uid, n, n - 1, timeout_ms=30000) as c:
    x = array.array("q", [c.rank + 1])
    c.allreduce(x)
    assert (c.rank, c.size, x[0]) == (n - 1, n, n * (n + 1) // 2), (c.rank, c.size, x[0])
print("JOINED", c.rank)
"""


def test_grow_with_a_joiner(comm, tmp_path):
    """Rank 0 makes the id and starts a new rank (a subprocess) that joins with it; the
    grown communicator sums every rank; a malformed id is refused before anything moves."""
    import subprocess
    import sys

    with pytest.raises(gradsync.InvalidArgument):
        gradsync.Communicator.join(b"short", comm.size + 1, comm.size)
    d = comm.dup()
    n = comm.size + 1
    uid, proc = None, None
    if comm.rank == 0:
        uid = d.unique_id()
        assert len(uid) == 128
        proc = subprocess.Popen([sys.executable, "-c", _JOINER, uid.hex(), str(n)],
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    try:
        with d.grow(n, uid) as big:
            assert (big.rank, big.size) == (comm.rank, n)
            x = array.array("q", [big.rank + 1])
            big.allreduce(x)
            assert x[0] == n * (n + 1) // 2
    finally:
        if proc is not None:
            out, _ = proc.communicate(timeout=60)
            assert proc.returncode == 0 and b"JOINED" in out, out.decode(errors="replace")
        d.close()


def test_create_group(comm):
    """Only the members call: the evens make a group while the odd ranks go on; a bad list
    is refused before anything is sent."""
    me, n = comm.rank, comm.size
    evens = list(range(0, n, 2))
    if me % 2 == 0:
        with comm.create_group(evens, tag=7) as sub:
            assert (sub.rank, sub.size) == (evens.index(me), len(evens))
            x = array.array("i", [me])
            sub.allreduce(x)
            assert x[0] == sum(evens)
    if n > 1:
        with pytest.raises(gradsync.InvalidArgument, match="increase strictly"):
            comm.create_group([me, me])
    x = array.array("i", [1])
    comm.allreduce(x)
    assert x[0] == n


def test_counters_and_stats(comm):
    comm.allreduce(array.array("f", [1.0] * 1024))
    c = comm.counters()
    assert set(c) == {"bytes_sent", "bytes_received", "msgs_sent", "msgs_received",
                      "ops_completed", "ops_failed", "busy_ns"}
    assert c["ops_completed"] >= 1
    s = comm.stats()
    assert s["rank"] == comm.rank and s["nranks"] == comm.size
    assert len(s["coll"]) == 16 and s["coll"][0]["ops"] >= 1
    p = comm.peer_stats((comm.rank + 1) % comm.size)
    assert p["peer"] == (comm.rank + 1) % comm.size
    # One rail on this host (GS_SOCKET_IFNAME picks one interface or none); none to itself.
    assert len(p["rails"]) == p["nrails"] and p["nrails"] in ((0,) if comm.size == 1 else (1,))
    for r in p["rails"]:
        assert r["up"] == 1 and r["ifname"] == ""


def test_library_info():
    assert gradsync.library_version().count(".") == 2
    assert "gradsync" in os.path.basename(gradsync.library_path())
