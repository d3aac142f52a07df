# SPDX-License-Identifier: Apache-2.0
"""docs/python.md's demo as torchrun's tests run it (tests/torch/run_torchrun.sh,
tests/net/run_torchrun_nodes.sh): one "DEMO rank size grad[0] total" line per rank,
each in one write, since torchrun's ranks share its stdout."""
import sys

import gradsync
import numpy as np

with gradsync.Communicator() as comm:
    grad = np.full(1000, comm.rank, dtype=np.float32)
    comm.allreduce(grad, op="avg")
    total = np.zeros(comm.size, dtype=np.int64)
    comm.allgather(np.array([comm.rank], dtype=np.int64), total)
    sys.stdout.write("DEMO %d %d %s %s\n" % (comm.rank, comm.size, grad[0], total.tolist()))
