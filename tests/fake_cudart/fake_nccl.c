/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A fake NCCL of one rank for the device path's CPU tests (see
 * fake_cudart.h): built as a libnccl.so.2 of its own (tests/fake_nccl/),
 * which test_dev_cuda links, so that the engine's dlopen of libnccl.so.2
 * (src/device/nccl_lib.c) finds this one, already loaded, under that name.
 * It answers the calls the NCCL engine (src/device) makes. A communicator is healthy unless
 * gs_fake_nccl_set_async_error() says otherwise; collectives copy sendbuf
 * to recvbuf (the result of every collective on one rank); sends and
 * receives move nothing (one rank never sends).
 */
#include "fake_cudart.h"

#include <stdlib.h>
#include <string.h>

#include <nccl.h>

/* nccl.h declares these two without a prototype. */
ncclResult_t ncclGroupStart(void);
ncclResult_t ncclGroupEnd(void);

struct ncclComm {
    int rank;
    int size;
};

static _Thread_local int tl_groups;

static size_t fake_size(ncclDataType_t type)
{
    switch (type) {
    case ncclInt8:
    case ncclUint8:
    case ncclFloat8e4m3:
    case ncclFloat8e5m2:
        return 1;
    case ncclFloat16:
    case ncclBfloat16:
        return 2;
    case ncclInt32:
    case ncclUint32:
    case ncclFloat32:
        return 4;
    default:
        return 8;
    }
}

/* One rank: every collective's result is its input. */
static ncclResult_t fake_copy(const void *send, void *recv, size_t count, ncclDataType_t type)
{
    gs_fake_rt_bump(GS_FAKE_NCCL_COLL);
    if ((send != recv) && (count > 0)) {
        memmove(recv, send, count * fake_size(type));
    }
    return ncclSuccess;
}

ncclResult_t ncclGetVersion(int *version)
{
    *version = 22809;
    return ncclSuccess;
}

ncclResult_t ncclGetUniqueId(ncclUniqueId *id)
{
    memset(id, 0x5a, sizeof(*id));
    return ncclSuccess;
}

const char *ncclGetErrorString(ncclResult_t result)
{
    return (result == ncclSuccess) ? "no error" : "an error of the fake NCCL";
}

const char *ncclGetLastError(ncclComm_t comm)
{
    (void)comm;
    return "";
}

ncclResult_t ncclCommInitRankConfig(ncclComm_t *comm, int nranks, ncclUniqueId id, int rank,
                                    ncclConfig_t *config)
{
    struct ncclComm *c = calloc(1, sizeof(*c));

    (void)id;
    (void)config;
    if (c == NULL) {
        return ncclSystemError;
    }
    c->rank = rank;
    c->size = nranks;
    *comm = c;
    return ncclSuccess;
}

ncclResult_t ncclCommSplit(ncclComm_t comm, int color, int key, ncclComm_t *newcomm,
                           ncclConfig_t *config)
{
    (void)comm;
    (void)key;
    if (color == NCCL_SPLIT_NOCOLOR) {
        *newcomm = NULL;
        return ncclSuccess;
    }
    return ncclCommInitRankConfig(newcomm, 1, (ncclUniqueId){{0}}, 0, config);
}

ncclResult_t ncclCommGetAsyncError(ncclComm_t comm, ncclResult_t *state)
{
    (void)comm;
    *state = (ncclResult_t)gs_fake_nccl_async_error();
    return ncclSuccess;
}

ncclResult_t ncclCommFinalize(ncclComm_t comm)
{
    (void)comm;
    return ncclSuccess;
}

ncclResult_t ncclCommDestroy(ncclComm_t comm)
{
    free(comm);
    return ncclSuccess;
}

ncclResult_t ncclCommAbort(ncclComm_t comm)
{
    gs_fake_rt_bump(GS_FAKE_NCCL_ABORT);
    free(comm);
    return ncclSuccess;
}

ncclResult_t ncclCommCount(const ncclComm_t comm, int *count)
{
    *count = comm->size;
    return ncclSuccess;
}

ncclResult_t ncclCommUserRank(const ncclComm_t comm, int *rank)
{
    *rank = comm->rank;
    return ncclSuccess;
}

ncclResult_t ncclGroupStart(void)
{
    tl_groups++;
    return ncclSuccess;
}

ncclResult_t ncclGroupEnd(void)
{
    tl_groups--;
    return ncclSuccess;
}

ncclResult_t ncclAllReduce(const void *send, void *recv, size_t count, ncclDataType_t type,
                           ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream)
{
    (void)op;
    (void)comm;
    (void)stream;
    return fake_copy(send, recv, count, type);
}

ncclResult_t ncclBroadcast(const void *send, void *recv, size_t count, ncclDataType_t type,
                           int root, ncclComm_t comm, cudaStream_t stream)
{
    (void)root;
    (void)comm;
    (void)stream;
    return fake_copy(send, recv, count, type);
}

ncclResult_t ncclReduce(const void *send, void *recv, size_t count, ncclDataType_t type,
                        ncclRedOp_t op, int root, ncclComm_t comm, cudaStream_t stream)
{
    (void)op;
    (void)root;
    (void)comm;
    (void)stream;
    return fake_copy(send, recv, count, type);
}

ncclResult_t ncclAllGather(const void *send, void *recv, size_t count, ncclDataType_t type,
                           ncclComm_t comm, cudaStream_t stream)
{
    (void)comm;
    (void)stream;
    return fake_copy(send, recv, count, type);
}

ncclResult_t ncclReduceScatter(const void *send, void *recv, size_t count, ncclDataType_t type,
                               ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream)
{
    (void)op;
    (void)comm;
    (void)stream;
    return fake_copy(send, recv, count, type);
}

ncclResult_t ncclSend(const void *buf, size_t count, ncclDataType_t type, int peer, ncclComm_t comm,
                      cudaStream_t stream)
{
    (void)buf;
    (void)count;
    (void)type;
    (void)peer;
    (void)comm;
    (void)stream;
    return ncclSuccess;
}

ncclResult_t ncclRecv(void *buf, size_t count, ncclDataType_t type, int peer, ncclComm_t comm,
                      cudaStream_t stream)
{
    (void)buf;
    (void)count;
    (void)type;
    (void)peer;
    (void)comm;
    (void)stream;
    return ncclSuccess;
}
