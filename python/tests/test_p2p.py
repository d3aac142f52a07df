# SPDX-License-Identifier: Apache-2.0
"""Point-to-point: send/recv with statuses, ANY_SOURCE, isend/irecv, probe and iprobe,
groups, wait_any/test_all, the GIL released during blocking calls, and buffers kept
alive by pending requests. Buffers are bytearray / array.array / memoryview (numpy is
not needed here)."""
import array
import gc
import struct
import threading
import time
import warnings
import weakref

import pytest

from conftest import needs_peers

import gradsync


def payload(src, dst, n, tag=0):
    return array.array("i", [(src * 1000 + dst * 100 + tag + i) for i in range(n)])


@pytest.mark.parametrize("count", [0, 1, 7, 100003])
def test_ring_send_recv(comm, count):
    needs_peers(comm)
    n, me = comm.size, comm.rank
    right, left = (me + 1) % n, (me - 1) % n
    out = array.array("i", [0] * count)
    if me % 2 == 0:
        comm.send(payload(me, right, count), right, tag=3)
        st = comm.recv(out, left, tag=3)
    else:
        st = comm.recv(out, left, tag=3)
        comm.send(payload(me, right, count), right, tag=3)
    assert tuple(st) == (left, 3, count)
    assert st.source == left and st.tag == 3 and st.count == count
    assert out == payload(left, me, count)


def test_any_source_and_shorter_message(comm):
    needs_peers(comm)
    me, n = comm.rank, comm.size
    if me == 0:
        got = {}
        for _ in range(n - 1):
            buf = bytearray(64)
            st = comm.recv(buf, gradsync.ANY_SOURCE, tag=7)
            assert st.tag == 7 and st.count == st.source + 1  # shorter than the buffer is fine
            got[st.source] = bytes(buf[:st.count])
            assert buf[st.count:] == bytes(64 - st.count)  # the rest untouched
        assert got == {r: bytes([r]) * (r + 1) for r in range(1, n)}
    else:
        comm.send(bytes([me]) * (me + 1), 0, tag=7)  # read-only bytes may be sent


def test_truncated(comm):
    needs_peers(comm)
    if comm.rank == 0:
        comm.send(bytearray(16), 1, tag=8)
    elif comm.rank == 1:
        small = bytearray(b"x" * 8)
        with pytest.raises(gradsync.Truncated) as ei:
            comm.recv(small, 0, tag=8)
        assert ei.value.name == "GS_ERR_TRUNCATED" and small == b"x" * 8
    comm.barrier()


def test_isend_irecv_and_keepalive(comm):
    needs_peers(comm)
    n, me = comm.size, comm.rank
    right, left = (me + 1) % n, (me - 1) % n
    outs = [array.array("d", [0.0] * 1000) for _ in range(4)]
    rreqs = [comm.irecv(outs[t], left, tag=t) for t in range(4)]
    # The send buffers are temporaries: only the requests keep them alive.
    sreqs = [comm.isend(array.array("d", [float(me * 10 + t)] * 1000), right, tag=t)
             for t in reversed(range(4))]
    gc.collect()
    gradsync.wait_all(sreqs)
    statuses = gradsync.wait_all(rreqs)
    for t in range(4):
        assert statuses[t] == gradsync.Status(left, t, 1000)
        assert rreqs[t].status == statuses[t] and rreqs[t].result is outs[t]
        assert set(outs[t]) == {float(left * 10 + t)}


def test_probe_iprobe(comm):
    needs_peers(comm)
    if comm.rank == 1:
        assert comm.iprobe(0, tag=21) is None  # rank 0 sends only after the barrier
    comm.barrier()
    if comm.rank == 0:
        comm.send(array.array("q", range(5)), 1, tag=21)
    elif comm.rank == 1:
        st = comm.probe(gradsync.ANY_SOURCE, tag=21, dtype="int64")
        assert tuple(st) == (0, 21, 5)
        assert tuple(comm.probe(0, tag=21)) == (0, 21, 40)  # bytes by default
        assert tuple(comm.iprobe(0, tag=21, dtype="int32")) == (0, 21, 10)
        buf = array.array("q", [0] * 5)
        assert tuple(comm.recv(buf, st.source, st.tag)) == (0, 21, 5)
        assert list(buf) == list(range(5))
    comm.barrier()


def test_group_exchange(comm):
    """Every rank sends to and receives from every other in one group: any order works."""
    needs_peers(comm)
    n, me = comm.size, comm.rank
    outs, sts = {}, {}
    with gradsync.group():
        for p in range(n):
            if p == me:
                continue
            outs[p] = bytearray(4)
            sts[p] = comm.recv(outs[p], p, tag=30)
            assert sts[p].source is None  # filled when the group ends
            comm.send(struct.pack("<i", me * 10 + p), p, tag=30)
    for p, out in outs.items():
        assert struct.unpack("<i", out)[0] == p * 10 + me
        assert tuple(sts[p]) == (p, 30, 4)


def test_wait_any_test_all(comm):
    needs_peers(comm)
    n, me = comm.size, comm.rank
    if me == 0:
        bufs = [bytearray(8) for _ in range(1, n)]
        reqs = [comm.irecv(b, r, tag=40) for r, b in zip(range(1, n), bufs)]
        seen = set()
        for _ in range(n - 1):
            i, st = gradsync.wait_any(reqs)
            assert st.source == i + 1 and st.count == 8 and i not in seen
            seen.add(i)
        assert gradsync.wait_any(reqs) == (None, None)
        assert gradsync.test_all(reqs)
        comm.barrier()
        more = [comm.irecv(bytearray(1), r, tag=41) for r in range(1, n)]
        assert not gradsync.test_all(more)  # nobody has sent yet
        comm.barrier()
        deadline = time.monotonic() + 10
        while not gradsync.test_all(more):
            assert time.monotonic() < deadline
            time.sleep(0.001)
        assert all(r.done for r in more)
    else:
        comm.send(bytes(8), 0, tag=40)
        comm.barrier()
        comm.barrier()
        comm.send(b"x", 0, tag=41)


def test_blocking_call_releases_the_gil(comm):
    """Rank 1 blocks a thread in recv from rank 0; its main thread must still run to send
    what rank 0 waits for before it answers. Holding the GIL would deadlock (then time out)."""
    needs_peers(comm)
    if comm.rank == 0:
        got = bytearray(1)
        comm.recv(got, 1, tag=51)
        assert got == b"m"
        comm.send(b"t", 1, tag=50)
    elif comm.rank == 1:
        got = bytearray(1)
        t = threading.Thread(target=comm.recv, args=(got, 0, 50))
        t.start()
        time.sleep(0.05)
        assert t.is_alive()
        comm.send(b"m", 0, tag=51)
        t.join(30)
        assert not t.is_alive() and got == b"t"
    comm.barrier()


def test_threads_share_a_communicator(comm):
    needs_peers(comm)
    n, me = comm.size, comm.rank
    right, left = (me + 1) % n, (me - 1) % n
    results = {}

    def worker(t):
        out = array.array("i", [0] * 100)
        r = comm.irecv(out, left, tag=60 + t)
        comm.send(array.array("i", [me + t] * 100), right, tag=60 + t)
        r.wait()
        results[t] = set(out)

    ts = [threading.Thread(target=worker, args=(t,)) for t in range(4)]
    for t in ts:
        t.start()
    for t in ts:
        t.join(30)
    assert results == {t: {left + t} for t in range(4)}


def test_send_to_self_is_an_error(comm):
    with pytest.raises(gradsync.InvalidArgument) as ei:
        comm.send(bytearray(1), comm.rank)
    assert ei.value.name == "GS_ERR_INVALID_ARG" and ei.value.message


def test_dropped_request_keeps_its_buffer(comm):
    """A Request dropped while running is not waited for, but the buffer it holds outlives
    the operation: the receiver still gets every byte."""
    needs_peers(comm)
    if comm.rank == 0:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ResourceWarning)  # may still be in flight
            comm.isend(array.array("i", range(1000)), 1, tag=70)  # request and buffer dropped
        gc.collect()
    elif comm.rank == 1:
        out = array.array("i", [0] * 1000)
        comm.recv(out, 0, tag=70)
        assert list(out) == list(range(1000))
    comm.barrier()


def test_dropped_request_never_blocks(comm):
    """Dropping an irecv nobody has matched yet returns at once (it used to wait in gs_wait
    until the deadline and swallow the timeout): a ResourceWarning names it, its buffer
    stays referenced, and once the message arrives the next call on the communicator
    releases it. One the peer never matches is cancelled when its communicator closes,
    with a RuntimeWarning that says so."""
    needs_peers(comm)
    me = comm.rank
    if me == 0:
        buf = array.array("i", [0] * 16)
        kept = weakref.ref(buf)
        req = comm.irecv(buf, 1, tag=71)
        del buf
        t0 = time.monotonic()
        with pytest.warns(ResourceWarning, match=r"gs_irecv from 1, tag 71.*not waited for"):
            del req
            gc.collect()
        assert time.monotonic() - t0 < 2.0
        assert kept() is not None  # held by the communicator, not freed under the worker
    comm.barrier()
    if me == 1:
        comm.send(array.array("i", range(16)), 0, tag=71)
    comm.barrier()
    if me == 0:
        deadline = time.monotonic() + 10
        while kept() is not None and time.monotonic() < deadline:
            comm.iprobe(1, tag=72)  # any call reaps the dropped requests that finished
            time.sleep(0.01)
        assert kept() is None and not comm._orphans

    other = comm.dup()
    if me == 0:
        buf = array.array("i", [0] * 16)
        kept = weakref.ref(buf)
        with pytest.warns(ResourceWarning):
            other.irecv(buf, 1, tag=73)  # never sent
        del buf
        assert kept() is not None
        with pytest.warns(RuntimeWarning, match=r"gs_irecv from 1, tag 73.*failed: GS_ERR_"):
            other.close()
        assert kept() is None
    else:
        other.close()
    comm.barrier()
