# SPDX-License-Identifier: Apache-2.0
"""The parameter server (gradsync.ParameterServer, gradsync/ps.h) through its Python class."""
import pytest

import gradsync

np = pytest.importorskip("numpy", reason="numpy is not installed for this interpreter")


@pytest.mark.parametrize("mode", ["bsp", "ssp", "asp"])
def test_parameter_server_sgd(comm, mode):
    n = comm.size
    w0 = np.full(1000, 10.0, np.float32)
    with gradsync.ParameterServer(comm, mode=mode, staleness=1, rule="sgd", lr=0.5) as ps:
        ps.register(7, w0 if comm.rank == 0 else np.zeros_like(w0))
        ps.register(8, count=5, dtype="float64")  # zeros
        info = ps.info()
        assert info["nkeys"] == 2 and info["nworkers"] == n
        grad = np.full(1000, float(comm.rank + 1), np.float32)
        push = ps.push(7, grad)
        del grad  # the request keeps it alive
        push.wait()
        ps.clock()
        if mode != "bsp":
            comm.barrier()  # every push has been applied (SSP with s=1 would not wait for it)
        out = np.zeros(1000, np.float32)
        req = ps.pull(7, out)
        assert req.wait() is None and req.result is out
        np.testing.assert_array_equal(out, 10.0 - 0.5 * n * (n + 1) / 2)
        z = np.ones(5)
        ps.pull(8, z).wait()
        assert not z.any()
        with pytest.raises(gradsync.InvalidArgument):
            ps.pull(9, z)  # unknown key
        with pytest.raises(gradsync.InvalidArgument):
            ps.push(7, np.zeros(3, np.float32))  # wrong count
        assert not z.any()
        gradsync.wait_all([ps.pull(7, np.zeros(1000, np.float32)) for _ in range(3)])
        comm.barrier()


def test_parameter_server_bad_options(comm):
    with pytest.raises(gradsync.InvalidArgument):
        gradsync.ParameterServer(comm, mode="eventual")
    with pytest.raises(gradsync.InvalidArgument):
        gradsync.ParameterServer(comm, rule="lion")
