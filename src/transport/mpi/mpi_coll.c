/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Native collectives of the MPI transport: uncompressed all-reduce,
 * broadcast, all-gather and reduce-scatter handed to MPI's own non-blocking
 * collectives (MPI_Iallreduce, ...) on the transport's communicator and
 * tested until done or the deadline. For comparison and as a fallback
 * (GS_ALGO=native). MPI has no f16/bf16 and no average: f16/bf16 return
 * GS_ERR_UNSUPPORTED (the caller runs gradsync's own algorithm), and an
 * average is a sum followed by a scale here. Counts above INT_MAX are also
 * declined. Every rank makes the same decision from the same arguments.
 */
#include "transport/mpi/mpi_transport.h"

#include <limits.h>
#include <string.h>

#include "core/dtype.h"
#include "core/error.h"
#include "core/reduce_cpu.h"

static MPI_Datatype mpi_dtype(gs_dtype_t dt)
{
    switch (dt) {
    case GS_DTYPE_F32:
        return MPI_FLOAT;
    case GS_DTYPE_F64:
        return MPI_DOUBLE;
    case GS_DTYPE_I8:
        return MPI_INT8_T;
    case GS_DTYPE_U8:
        return MPI_UINT8_T;
    case GS_DTYPE_I32:
        return MPI_INT32_T;
    case GS_DTYPE_I64:
        return MPI_INT64_T;
    default:
        return MPI_DATATYPE_NULL; /* f16, bf16 */
    }
}

static MPI_Op mpi_op(gs_op_t op)
{
    switch (op) {
    case GS_OP_SUM:
    case GS_OP_AVG:
        return MPI_SUM;
    case GS_OP_PROD:
        return MPI_PROD;
    case GS_OP_MIN:
        return MPI_MIN;
    case GS_OP_MAX:
        return MPI_MAX;
    case GS_OP_BAND:
        return MPI_BAND;
    case GS_OP_BOR:
        return MPI_BOR;
    case GS_OP_BXOR:
        return MPI_BXOR;
    default:
        return MPI_OP_NULL;
    }
}

static gs_status_t decline(const char *what, gs_dtype_t dt, size_t count)
{
    return gs__error_set(GS_ERR_UNSUPPORTED,
                         "mpi: native %s cannot do dtype %d with count %zu (MPI has no f16/bf16; "
                         "counts are int)",
                         what, (int)dt, count);
}

static gs_status_t start_failed(const char *what, int ret)
{
    return gs__error_set(GS_ERR_PEER_FAILED, "mpi: %s failed to start: %s", what,
                         gs__mpi_errstr(ret));
}

gs_status_t gs__mpi_coll_allreduce(gs__tp_t *tp, const void *sendbuf, void *recvbuf, size_t count,
                                   gs_dtype_t dtype, gs_op_t op, uint64_t deadline_ns)
{
    const MPI_Datatype mdt = mpi_dtype(dtype);
    const MPI_Op mop = mpi_op(op);
    MPI_Request mreq;
    gs_status_t status;
    int size = 1;
    int ret;

    if ((mdt == MPI_DATATYPE_NULL) || (mop == MPI_OP_NULL) || (count > INT_MAX)) {
        return decline("allreduce", dtype, count);
    }
    ret = MPI_Iallreduce((sendbuf == recvbuf) ? MPI_IN_PLACE : sendbuf, recvbuf, (int)count, mdt,
                         mop, gs__mpi_tp_comm(tp), &mreq);
    if (ret != MPI_SUCCESS) {
        return start_failed("MPI_Iallreduce", ret);
    }
    status = gs__mpi_tp_wait(tp, &mreq, deadline_ns, "MPI_Iallreduce");
    if ((status == GS_OK) && (op == GS_OP_AVG)) {
        MPI_Comm_size(gs__mpi_tp_comm(tp), &size);
        gs__reduce_scale(recvbuf, count, dtype, size);
    }
    return status;
}

gs_status_t gs__mpi_coll_bcast(gs__tp_t *tp, void *buf, size_t count, gs_dtype_t dtype, int root,
                               uint64_t deadline_ns)
{
    const MPI_Datatype mdt = mpi_dtype(dtype);
    MPI_Request mreq;
    int ret;

    /* A copy needs no arithmetic: f16/bf16 travel as 2-byte integers. */
    if ((dtype == GS_DTYPE_F16) || (dtype == GS_DTYPE_BF16)) {
        ret = (count > INT_MAX)
                  ? MPI_ERR_COUNT
                  : MPI_Ibcast(buf, (int)count, MPI_UINT16_T, root, gs__mpi_tp_comm(tp), &mreq);
    } else {
        ret = ((mdt == MPI_DATATYPE_NULL) || (count > INT_MAX))
                  ? MPI_ERR_COUNT
                  : MPI_Ibcast(buf, (int)count, mdt, root, gs__mpi_tp_comm(tp), &mreq);
    }
    if (ret == MPI_ERR_COUNT) {
        return decline("broadcast", dtype, count);
    }
    if (ret != MPI_SUCCESS) {
        return start_failed("MPI_Ibcast", ret);
    }
    return gs__mpi_tp_wait(tp, &mreq, deadline_ns, "MPI_Ibcast");
}

gs_status_t gs__mpi_coll_allgather(gs__tp_t *tp, const void *sendbuf, void *recvbuf, size_t count,
                                   gs_dtype_t dtype, uint64_t deadline_ns)
{
    MPI_Datatype mdt = mpi_dtype(dtype);
    MPI_Request mreq;
    int rank = 0;
    int ret;

    if ((dtype == GS_DTYPE_F16) || (dtype == GS_DTYPE_BF16)) {
        mdt = MPI_UINT16_T;
    }
    if ((mdt == MPI_DATATYPE_NULL) || (count > INT_MAX)) {
        return decline("allgather", dtype, count);
    }
    MPI_Comm_rank(gs__mpi_tp_comm(tp), &rank);
    if ((const char *)sendbuf ==
        (const char *)recvbuf + (size_t)rank * count * gs__dtype_size(dtype)) {
        sendbuf = MPI_IN_PLACE;
    }
    ret = MPI_Iallgather(sendbuf, (int)count, mdt, recvbuf, (int)count, mdt, gs__mpi_tp_comm(tp),
                         &mreq);
    if (ret != MPI_SUCCESS) {
        return start_failed("MPI_Iallgather", ret);
    }
    return gs__mpi_tp_wait(tp, &mreq, deadline_ns, "MPI_Iallgather");
}

gs_status_t gs__mpi_coll_reduce_scatter(gs__tp_t *tp, const void *sendbuf, void *recvbuf,
                                        size_t count, gs_dtype_t dtype, gs_op_t op,
                                        uint64_t deadline_ns)
{
    const MPI_Datatype mdt = mpi_dtype(dtype);
    const MPI_Op mop = mpi_op(op);
    MPI_Request mreq;
    gs_status_t status;
    int rank = 0;
    int size = 1;
    int ret;

    if ((mdt == MPI_DATATYPE_NULL) || (mop == MPI_OP_NULL) || (count > INT_MAX)) {
        return decline("reduce_scatter", dtype, count);
    }
    MPI_Comm_rank(gs__mpi_tp_comm(tp), &rank);
    MPI_Comm_size(gs__mpi_tp_comm(tp), &size);
    if ((const char *)recvbuf ==
        (const char *)sendbuf + (size_t)rank * count * gs__dtype_size(dtype)) {
        /* In place: MPI wants the whole input in recvbuf and leaves block
         * rank's result at its start, so run it in place and move it. */
        ret = MPI_Ireduce_scatter_block(MPI_IN_PLACE, (void *)sendbuf, (int)count, mdt, mop,
                                        gs__mpi_tp_comm(tp), &mreq);
    } else {
        ret = MPI_Ireduce_scatter_block(sendbuf, recvbuf, (int)count, mdt, mop, gs__mpi_tp_comm(tp),
                                        &mreq);
    }
    if (ret != MPI_SUCCESS) {
        return start_failed("MPI_Ireduce_scatter_block", ret);
    }
    status = gs__mpi_tp_wait(tp, &mreq, deadline_ns, "MPI_Ireduce_scatter_block");
    if ((status == GS_OK) && (count > 0) &&
        ((const char *)recvbuf ==
         (const char *)sendbuf + (size_t)rank * count * gs__dtype_size(dtype)) &&
        (rank > 0)) {
        memmove(recvbuf, sendbuf, count * gs__dtype_size(dtype));
    }
    if ((status == GS_OK) && (op == GS_OP_AVG)) {
        gs__reduce_scale(recvbuf, count, dtype, size);
    }
    return status;
}
