# SPDX-License-Identifier: Apache-2.0
"""Wrong calls raise gradsync.Error subclasses with .status, .name and .message, on every
rank alike (no communication starts), and leave every buffer as it was."""
import array

import pytest

import gradsync
from gradsync import _lib


def test_error_attributes_and_classes():
    cases = {
        "GS_ERR_INVALID_ARG": (gradsync.InvalidArgument, ValueError),
        "GS_ERR_INVALID_USAGE": (gradsync.InvalidUsage, RuntimeError),
        "GS_ERR_UNSUPPORTED": (gradsync.Unsupported, NotImplementedError),
        "GS_ERR_TRUNCATED": (gradsync.Truncated, gradsync.Error),
        "GS_ERR_NO_MEMORY": (gradsync.NoMemory, MemoryError),
        "GS_ERR_PEER_FAILED": (gradsync.PeerFailed, ConnectionError),
        "GS_ERR_TIMEOUT": (gradsync.Timeout, TimeoutError),
        "GS_ERR_MISMATCH": (gradsync.Mismatch, gradsync.Error),
        "GS_ERR_ABORTED": (gradsync.Aborted, gradsync.Error),
        "GS_ERR_AUTH": (gradsync.AuthError, PermissionError),
        "GS_ERR_PROTOCOL": (gradsync.Error, gradsync.Error),
        "GS_ERR_INTERNAL": (gradsync.Error, gradsync.Error),
    }
    for name, (cls, base) in cases.items():
        status = gradsync._types.STATUS[name]
        e = _lib.make_error(status, "a sentence")
        assert type(e) is cls and isinstance(e, base) and isinstance(e, gradsync.Error)
        assert (e.status, e.name, e.message) == (status, name, "a sentence")
        assert str(e) == name + ": a sentence"
        assert gradsync.error_class(status) is cls
        assert gradsync.strerror(status)


def test_errors_pickle_as_themselves():
    """An error raised in another process (a Ray actor, a multiprocessing child) reaches the
    caller as the same class with the same fields."""
    import pickle

    for cls, name in ((gradsync.InvalidArgument, "GS_ERR_INVALID_ARG"),
                      (gradsync.Revoked, "GS_ERR_REVOKED"), (gradsync.Error, "GS_ERR_INTERNAL")):
        e = pickle.loads(pickle.dumps(cls(-1, name, "rank 3 said so")))
        assert type(e) is cls and (e.status, e.name, e.message) == (-1, name, "rank 3 said so")
        assert str(e) == "%s: rank 3 said so" % name


def test_c_error_text_is_read_on_the_calling_thread(comm):
    with pytest.raises(gradsync.InvalidArgument) as ei:
        comm.broadcast(bytearray(4), comm.size)  # root out of range: the C library says so
    e = ei.value
    assert e.status == -1 and e.name == "GS_ERR_INVALID_ARG"
    assert "root" in e.message and str(comm.size) in e.message


def test_bad_arguments_python_side(comm):
    buf = array.array("f", [1.0, 2.0])
    checks = [
        (lambda: comm.allreduce(buf, op="mean"), "op 'mean' is unknown"),
        (lambda: comm.allreduce(buf, algo="fastest"), "algo 'fastest' is unknown"),
        (lambda: comm.allreduce(buf, array.array("d", [0.0, 0.0])), "dtype"),
        (lambda: comm.allreduce(buf, array.array("f", [0.0])), "holds 1 elements"),
        (lambda: comm.allreduce(bytes(8)), "read-only"),
        (lambda: comm.allreduce(buf, bytes(8)), "read-only"),
        (lambda: comm.allreduce(array.array("h", [1])), "format 'h'"),
        (lambda: comm.allreduce(array.array("I", [1])), "format 'I'"),
        (lambda: comm.allreduce(memoryview(bytearray(8))[::2]), "not C-contiguous"),
        (lambda: comm.allreduce([1.0, 2.0]), "neither a torch tensor"),
        (lambda: comm.allgatherv(buf, array.array("f", [0] * 4), [-1] * comm.size),
         "is negative"),
        (lambda: comm.allgatherv(buf, array.array("f", [0] * 4), [1] * (comm.size + 1)),
         "entries"),
        (lambda: comm.send(buf, 0, tag=-1), "tag -1 is out of range"),
        (lambda: comm.send(buf, 0, tag=1 << 32), "out of range"),
        (lambda: comm.broadcast(buf, 1 << 40), "out of range"),
        (lambda: comm.split("red"), "must be an integer"),
        (lambda: gradsync.Codec("zip"), "codec kind 'zip' is unknown"),
        (lambda: comm.probe(dtype="complex64"), "unknown"),
    ]
    for fn, text in checks:
        with pytest.raises(gradsync.InvalidArgument) as ei:
            fn()
        assert ei.value.name == "GS_ERR_INVALID_ARG" and ei.value.status == -1
        assert text in ei.value.message, (ei.value.message, text)
    assert list(buf) == [1.0, 2.0]


def test_unknown_config_field():
    with pytest.raises(TypeError, match="unknown keyword argument 'nranks'.*world_size"):
        gradsync.Communicator(nranks=2)
    with pytest.raises(gradsync.InvalidArgument, match="master_port = 0 is out of range"):
        gradsync.Communicator(rank=0, size=1, local_rank=0, master_port=0)
    with pytest.raises(gradsync.InvalidArgument, match="disagree"):
        gradsync.Communicator(size=2, world_size=3)


def test_numpy_errors_change_nothing(comm):
    np = pytest.importorskip("numpy", reason="numpy is not installed for this interpreter")
    x = np.arange(8, dtype=np.float32)
    ro = np.zeros(8, np.float32)
    ro.flags.writeable = False
    f64 = np.zeros(8, np.float64)
    cases = [
        (lambda: comm.allreduce(x, ro), "read-only"),
        (lambda: comm.allreduce(x, f64), "dtype float64"),
        (lambda: comm.allreduce(x[::2]), "not C-contiguous"),
        (lambda: comm.allreduce(np.zeros(4, np.int16)), "int16"),
        (lambda: comm.allreduce(np.zeros(4, np.bool_)), "bool"),
        (lambda: comm.allreduce(np.zeros(4, np.complex64)), "complex64"),
        (lambda: comm.allreduce(np.zeros(4, ">f4")), "byte order"),
        (lambda: comm.allreduce(np.arange(8, dtype=np.int32), op="avg"), "avg"),
        (lambda: comm.allgather(x, np.zeros(8 * comm.size + 1, np.float32)), "size * len"),
        (lambda: comm.reduce_scatter(x, np.zeros(9, np.float32)), "size * len"),
        (lambda: comm.reduce_scatterv(x, np.zeros(8, np.float32), [-3] * comm.size),
         "negative"),
        (lambda: comm.reduce_scatterv(x, np.zeros(8, np.float32), [9] * comm.size),
         "add up to"),
        (lambda: comm.alltoallv(x, np.zeros(8, np.float32), [1] * comm.size,
                                [-1] * comm.size), "negative"),
        (lambda: comm.alltoallv(x, np.zeros(8, np.float32), [1] * comm.size,
                                [1] * comm.size, [0] * comm.size, [-2] * comm.size),
         "negative"),
        (lambda: comm.gather(x, None, comm.rank), "required at the root"),
        (lambda: comm.scatter(None, x, comm.rank), "required at the root"),
    ]
    for fn, text in cases:
        before = (x.copy(), f64.copy())
        with pytest.raises(gradsync.InvalidArgument) as ei:
            fn()
        assert ei.value.name == "GS_ERR_INVALID_ARG"
        assert text in ei.value.message, (ei.value.message, text)
        np.testing.assert_array_equal(x, before[0])
        np.testing.assert_array_equal(f64, before[1])
        assert not ro.any()


def test_c_side_count_errors_change_nothing(comm):
    """Counts the C library rejects (a block past the buffer, disagreeing with this rank's
    own count): GS_ERR_INVALID_ARG at the call on every rank, out unchanged."""
    np = pytest.importorskip("numpy", reason="numpy is not installed for this interpreter")
    n = comm.size
    x = np.arange(4, dtype=np.float32)
    out = np.full(4 * n, 3, np.float32)
    for counts in ([4] * (n - 1) + [5], [5] * n):  # recvcounts[rank] != len(buf), or past out
        if counts[comm.rank] == 4 and sum(counts) <= out.size:
            continue
        with pytest.raises(gradsync.InvalidArgument) as ei:
            comm.allgatherv(x, out, counts)
        assert ei.value.name == "GS_ERR_INVALID_ARG" and ei.value.message
        assert (out == 3).all()
    with pytest.raises(gradsync.InvalidArgument):
        comm.alltoallv(x, out, [5] * n, [5] * n)  # blocks past a buffer of 4
    assert (out == 3).all()


def test_closed_communicator():
    c = gradsync.Communicator(rank=0, size=1, local_rank=0)
    c.close()
    c.close()  # idempotent
    with pytest.raises(gradsync.InvalidUsage, match="closed") as ei:
        c.barrier()
    assert ei.value.name == "GS_ERR_INVALID_USAGE"
