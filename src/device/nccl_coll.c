/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The NCCL engine's operations: NCCL's own all-reduce, broadcast, reduce,
 * all-gather and reduce-scatter, all-to-all as one group of ncclSend/ncclRecv
 * with every peer, and point-to-point send and receive (also inside a
 * group, as the compressed device all-reduce uses them). Each call checks its
 * arguments before touching NCCL, enqueues on the caller's stream and
 * returns; gs__nccl_leave() waits only for NCCL to finish enqueuing (a
 * non-blocking communicator may answer ncclInProgress), never for the GPU.
 *
 * This file does not reduce, scale or compress anything itself (AVG is
 * ncclAvg) and does not choose NCCL over the host transports.
 */
#include "device/nccl_engine.h"
#include "device/nccl_lib.h"

#include "core/check.h"
#include "core/dtype.h"
#include "core/error.h"

#include <cuda_runtime.h>

#include <stdint.h>

static gs_status_t check_handle(const gs__nccl_t *nccl, const char *call)
{
    if (nccl == NULL) {
        return gs__error_set(GS_ERR_INVALID_ARG, "nccl: %s: NULL handle", call);
    }
    return GS_OK;
}

/* The NCCL type (and op, when @p op_out is not NULL) of the call's dtype and op. */
static gs_status_t check_types(const gs__nccl_t *nccl, const char *call, gs_dtype_t dtype,
                               gs_op_t op, int *type_out, int *op_out)
{
    gs_status_t status = gs__nccl_dtype(dtype, type_out);

    if ((status == GS_OK) && (op_out != NULL)) {
        status = gs__nccl_op(op, dtype, op_out);
    }
    if (status != GS_OK) {
        return gs__error_wrap(status, "rank %d: %s: %s", gs__nccl_rank(nccl), call,
                              gs__error_get());
    }
    return GS_OK;
}

static gs_status_t check_buf(const gs__nccl_t *nccl, const char *call, const char *name,
                             const void *buf, size_t count)
{
    if ((buf == NULL) && (count > 0)) {
        return gs__error_set(GS_ERR_INVALID_ARG, "rank %d: %s: %s is NULL with count %zu",
                             gs__nccl_rank(nccl), call, name, count);
    }
    return GS_OK;
}

static gs_status_t check_rank(const gs__nccl_t *nccl, const char *call, const char *name, int r)
{
    if ((r < 0) || (r >= gs__nccl_size(nccl))) {
        return gs__error_set(GS_ERR_INVALID_ARG, "rank %d: %s: %s %d is out of range (%d ranks)",
                             gs__nccl_rank(nccl), call, name, r, gs__nccl_size(nccl));
    }
    return GS_OK;
}

/* Bytes of @p nblocks blocks of @p count elements of @p dtype, refusing overflow. */
static gs_status_t check_bytes(const gs__nccl_t *nccl, const char *call, size_t count,
                               size_t nblocks, gs_dtype_t dtype, size_t *bytes_out)
{
    const size_t elem = gs__dtype_size(dtype);

    if ((count > 0) && ((nblocks > SIZE_MAX / count) || (count * nblocks > SIZE_MAX / elem))) {
        return gs__error_set(GS_ERR_INVALID_ARG,
                             "rank %d: %s: %zu blocks of %zu elements overflow size_t bytes",
                             gs__nccl_rank(nccl), call, nblocks, count);
    }
    *bytes_out = count * nblocks * elem;
    return GS_OK;
}

/* count 0: nothing to enqueue on any rank, but an aborted handle says so. */
static gs_status_t nothing_to_do(gs__nccl_t *nccl, const char *call)
{
    struct ncclComm *comm;
    gs_status_t status = gs__nccl_enter(nccl, call, &comm);

    if (status != GS_OK) {
        return status;
    }
    return gs__nccl_leave(nccl, ncclSuccess, call);
}

/* The checks of a call with one buffer and one rank (broadcast's root, a
 * send's or receive's peer): handle, dtype, buffer, rank, byte count. */
static gs_status_t check_one(gs__nccl_t *nccl, const char *call, gs_dtype_t dtype, const void *buf,
                             size_t count, const char *rank_name, int r, int *type_out,
                             size_t *bytes_out)
{
    GS_CHECK(check_handle(nccl, call));
    GS_CHECK(check_types(nccl, call, dtype, GS_OP_SUM, type_out, NULL));
    GS_CHECK(check_buf(nccl, call, "buf", buf, count));
    GS_CHECK(check_rank(nccl, call, rank_name, r));
    return check_bytes(nccl, call, count, 1, dtype, bytes_out);
}

/* The checks of a call with a send and a receive buffer of @p count
 * elements each (@p op: GS_OP_SUM for the kinds that do not reduce), whose
 * receive side moves @p nblocks blocks: handle, dtype and op, buffers,
 * byte count. */
static gs_status_t check_two(gs__nccl_t *nccl, const char *call, gs_dtype_t dtype, gs_op_t op,
                             const void *sendbuf, const void *recvbuf, size_t count, size_t nblocks,
                             int *type_out, int *nop_out)
{
    size_t bytes;

    GS_CHECK(check_handle(nccl, call));
    GS_CHECK(check_types(nccl, call, dtype, op, type_out, nop_out));
    GS_CHECK(check_buf(nccl, call, "sendbuf", sendbuf, count));
    GS_CHECK(check_buf(nccl, call, "recvbuf", recvbuf, count));
    return check_bytes(nccl, call, count, nblocks, dtype, &bytes);
}

/* Enter the handle for a call of @p count elements: *comm_out is the NCCL
 * communicator to enqueue on, or NULL when count is 0 and there is nothing
 * to enqueue (the status then says whether the handle is sound). */
static gs_status_t enter_for(gs__nccl_t *nccl, const char *call, size_t count,
                             struct ncclComm **comm_out)
{
    *comm_out = NULL;
    if (count == 0) {
        return nothing_to_do(nccl, call);
    }
    return gs__nccl_enter(nccl, call, comm_out);
}

gs_status_t gs__nccl_allreduce(gs__nccl_t *nccl, const void *sendbuf, void *recvbuf, size_t count,
                               gs_dtype_t dtype, gs_op_t op, void *stream)
{
    static const char call[] = "ncclAllReduce";
    struct ncclComm *comm;
    int type;
    int nop;
    gs_status_t status;

    GS_CHECK(check_two(nccl, call, dtype, op, sendbuf, recvbuf, count, 1, &type, &nop));
    status = enter_for(nccl, call, count, &comm);
    if ((status != GS_OK) || (comm == NULL)) {
        return status;
    }
    return gs__nccl_leave(nccl,
                          GS_NCCL(ncclAllReduce)(sendbuf, recvbuf, count, (ncclDataType_t)type,
                                                 (ncclRedOp_t)nop, comm, (cudaStream_t)stream),
                          call);
}

gs_status_t gs__nccl_broadcast(gs__nccl_t *nccl, void *buf, size_t count, gs_dtype_t dtype,
                               int root, void *stream)
{
    static const char call[] = "ncclBroadcast";
    struct ncclComm *comm;
    size_t bytes;
    int type;
    gs_status_t status;

    GS_CHECK(check_one(nccl, call, dtype, buf, count, "root", root, &type, &bytes));
    status = enter_for(nccl, call, count, &comm);
    if ((status != GS_OK) || (comm == NULL)) {
        return status;
    }
    return gs__nccl_leave(nccl,
                          GS_NCCL(ncclBroadcast)(buf, buf, count, (ncclDataType_t)type, root, comm,
                                                 (cudaStream_t)stream),
                          call);
}

gs_status_t gs__nccl_reduce(gs__nccl_t *nccl, const void *sendbuf, void *recvbuf, size_t count,
                            gs_dtype_t dtype, gs_op_t op, int root, void *stream)
{
    static const char call[] = "ncclReduce";
    struct ncclComm *comm;
    size_t bytes;
    int type;
    int nop;
    gs_status_t status;

    GS_CHECK(check_handle(nccl, call));
    GS_CHECK(check_types(nccl, call, dtype, op, &type, &nop));
    GS_CHECK(check_rank(nccl, call, "root", root));
    GS_CHECK(check_buf(nccl, call, "sendbuf", sendbuf, count));
    if (root == gs__nccl_rank(nccl)) {
        GS_CHECK(check_buf(nccl, call, "recvbuf (at the root)", recvbuf, count));
    }
    GS_CHECK(check_bytes(nccl, call, count, 1, dtype, &bytes));
    status = enter_for(nccl, call, count, &comm);
    if ((status != GS_OK) || (comm == NULL)) {
        return status;
    }
    return gs__nccl_leave(nccl,
                          GS_NCCL(ncclReduce)(sendbuf, recvbuf, count, (ncclDataType_t)type,
                                              (ncclRedOp_t)nop, root, comm, (cudaStream_t)stream),
                          call);
}

gs_status_t gs__nccl_allgather(gs__nccl_t *nccl, const void *sendbuf, void *recvbuf, size_t count,
                               gs_dtype_t dtype, void *stream)
{
    static const char call[] = "ncclAllGather";
    struct ncclComm *comm;
    int type;
    gs_status_t status;

    GS_CHECK(check_two(nccl, call, dtype, GS_OP_SUM, sendbuf, recvbuf, count,
                       (size_t)gs__nccl_size(nccl), &type, NULL));
    status = enter_for(nccl, call, count, &comm);
    if ((status != GS_OK) || (comm == NULL)) {
        return status;
    }
    return gs__nccl_leave(nccl,
                          GS_NCCL(ncclAllGather)(sendbuf, recvbuf, count, (ncclDataType_t)type,
                                                 comm, (cudaStream_t)stream),
                          call);
}

gs_status_t gs__nccl_reduce_scatter(gs__nccl_t *nccl, const void *sendbuf, void *recvbuf,
                                    size_t recvcount, gs_dtype_t dtype, gs_op_t op, void *stream)
{
    static const char call[] = "ncclReduceScatter";
    struct ncclComm *comm;
    int type;
    int nop;
    gs_status_t status;

    GS_CHECK(check_two(nccl, call, dtype, op, sendbuf, recvbuf, recvcount,
                       (size_t)gs__nccl_size(nccl), &type, &nop));
    status = enter_for(nccl, call, recvcount, &comm);
    if ((status != GS_OK) || (comm == NULL)) {
        return status;
    }
    return gs__nccl_leave(nccl,
                          GS_NCCL(ncclReduceScatter)(sendbuf, recvbuf, recvcount,
                                                     (ncclDataType_t)type, (ncclRedOp_t)nop, comm,
                                                     (cudaStream_t)stream),
                          call);
}

/* ncclSend or ncclRecv after the checks both share. */
static gs_status_t p2p(gs__nccl_t *nccl, const char *call, int is_send, void *buf, size_t count,
                       gs_dtype_t dtype, int peer, void *stream)
{
    struct ncclComm *comm;
    size_t bytes;
    int type;
    gs_status_t status;

    GS_CHECK(check_one(nccl, call, dtype, buf, count, "peer", peer, &type, &bytes));
    if ((peer == gs__nccl_rank(nccl)) && (gs__nccl_group_depth() == 0)) {
        /* Alone, a send to oneself waits for a receive that cannot be posted. */
        return gs__error_set(GS_ERR_INVALID_ARG,
                             "rank %d: %s to itself outside a group (copy locally or group it "
                             "with the matching %s)",
                             gs__nccl_rank(nccl), call, is_send ? "receive" : "send");
    }
    status = enter_for(nccl, call, count, &comm);
    if ((status != GS_OK) || (comm == NULL)) {
        return status;
    }
    if (is_send) {
        return gs__nccl_leave(
            nccl,
            GS_NCCL(ncclSend)(buf, count, (ncclDataType_t)type, peer, comm, (cudaStream_t)stream),
            call);
    }
    return gs__nccl_leave(
        nccl, GS_NCCL(ncclRecv)(buf, count, (ncclDataType_t)type, peer, comm, (cudaStream_t)stream),
        call);
}

gs_status_t gs__nccl_send(gs__nccl_t *nccl, const void *buf, size_t count, gs_dtype_t dtype,
                          int peer, void *stream)
{
    /* ncclSend takes a const buffer; p2p() only passes it through. */
    return p2p(nccl, "ncclSend", 1, (void *)(uintptr_t)buf, count, dtype, peer, stream);
}

gs_status_t gs__nccl_recv(gs__nccl_t *nccl, void *buf, size_t count, gs_dtype_t dtype, int peer,
                          void *stream)
{
    return p2p(nccl, "ncclRecv", 0, buf, count, dtype, peer, stream);
}

/* cudaMemcpyAsync device to device on the handle's GPU. */
static gs_status_t copy_d2d(gs__nccl_t *nccl, void *dst, const void *src, size_t bytes,
                            void *stream)
{
    return gs__nccl_cuda_status(
        cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, (cudaStream_t)stream), nccl,
        "cudaMemcpyAsync (all-to-all own block)");
}

gs_status_t gs__nccl_alltoall(gs__nccl_t *nccl, const void *sendbuf, void *recvbuf, size_t count,
                              gs_dtype_t dtype, void *stream)
{
    static const char call[] = "all-to-all";
    const int rank = gs__nccl_rank(nccl);
    const int size = gs__nccl_size(nccl);
    const char *src;
    char *dst = recvbuf;
    size_t block = 0;
    size_t total = 0;
    void *scratch = NULL;
    int in_place;
    int type;
    gs_status_t status;
    gs_status_t end_status;

    status = check_handle(nccl, call);
    if (status == GS_OK) {
        status = check_types(nccl, call, dtype, GS_OP_SUM, &type, NULL);
    }
    if (status == GS_OK) {
        status = check_buf(nccl, call, "sendbuf", sendbuf, count);
    }
    if (status == GS_OK) {
        status = check_buf(nccl, call, "recvbuf", recvbuf, count);
    }
    if (status == GS_OK) {
        status = check_bytes(nccl, call, count, 1, dtype, &block);
    }
    if (status == GS_OK) {
        status = check_bytes(nccl, call, count, (size_t)size, dtype, &total);
    }
    if (status != GS_OK) {
        return status;
    }
    in_place = (sendbuf == recvbuf);
    status = nothing_to_do(nccl, call); /* an aborted handle copies nothing either */
    if ((status != GS_OK) || (count == 0) || (in_place && (size == 1))) {
        return status;
    }
    if (in_place && (gs__nccl_group_depth() > 0)) {
        /* The scratch copy would be enqueued now but read only when the outer
         * group launches, after a second call may have overwritten it. */
        return gs__error_set(GS_ERR_INVALID_USAGE,
                             "rank %d: in-place all-to-all inside a group is not supported",
                             gs__nccl_rank(nccl));
    }
    status = gs__nccl_cuda_status(cudaSetDevice(gs__nccl_device(nccl)), nccl, "cudaSetDevice");
    if (status != GS_OK) {
        return status;
    }
    src = sendbuf;
    if (in_place) {
        status = gs__nccl_scratch_get(nccl, total, stream, &scratch);
        if (status == GS_OK) {
            status = copy_d2d(nccl, scratch, sendbuf, total, stream);
        }
        src = scratch;
    } else {
        status =
            copy_d2d(nccl, dst + (size_t)rank * block, src + (size_t)rank * block, block, stream);
    }
    if ((status != GS_OK) || (size == 1)) {
        return status;
    }

    status = gs__nccl_group_start();
    if (status != GS_OK) {
        return status;
    }
    for (int i = 1; (i < size) && (status == GS_OK); i++) {
        const int to = (rank + i) % size;
        const int from = (rank + size - i) % size;

        status = gs__nccl_send(nccl, src + (size_t)to * block, count, dtype, to, stream);
        if (status == GS_OK) {
            status = gs__nccl_recv(nccl, dst + (size_t)from * block, count, dtype, from, stream);
        }
    }
    /* Close the group whatever happened, so the thread is not left in one. */
    end_status = gs__nccl_group_end(nccl);
    if (status == GS_OK) {
        status = end_status;
    }
    if ((status == GS_OK) && in_place) {
        status = gs__nccl_scratch_release(nccl, stream);
    }
    return status;
}
