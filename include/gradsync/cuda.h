/* SPDX-License-Identifier: Apache-2.0 */
/**
 * @file
 * Typed helpers for CUDA programs. gradsync.h takes streams as opaque
 * pointers so that it compiles without the CUDA headers; this header
 * (which needs cuda_runtime_api.h on the include path) adds calls that take
 * a cudaStream_t, for callers that want the compiler to check it. Every
 * helper is a static inline wrapper over the _ex calls of gradsync.h: no
 * extra symbols, the same semantics (see "Options, streams and device
 * buffers" there, and docs/gpu.md).
 */
#ifndef GRADSYNC_CUDA_H
#define GRADSYNC_CUDA_H

#include <cuda_runtime_api.h>

#include "gradsync/gradsync.h"

#ifdef __cplusplus
extern "C" {
#endif

/** @brief Options for a call ordered on @p stream (flags 0: the call returns with the result). */
static inline gs_coll_opts_t gs_coll_opts_on_stream(cudaStream_t stream)
{
    gs_coll_opts_t opts = GS_COLL_OPTS_INIT;

    opts.stream = (void *)stream;
    return opts;
}

/** @brief All-reduce of device buffers ordered on @p stream; @p flags is 0 or GS_COLL_F_STREAM_ORDERED. */
static inline gs_status_t gs_allreduce_on_stream(gs_comm_t comm, const void *sendbuf, void *recvbuf,
                                                 size_t count, gs_dtype_t dtype, gs_op_t op,
                                                 cudaStream_t stream, unsigned flags)
{
    gs_allreduce_opts_t opts = GS_ALLREDUCE_OPTS_INIT;

    opts.stream = (void *)stream;
    opts.flags = flags;
    return gs_allreduce_ex(comm, sendbuf, recvbuf, count, dtype, op, &opts);
}

/** @brief Non-blocking all-reduce of device buffers ordered on @p stream. */
static inline gs_status_t gs_iallreduce_on_stream(gs_comm_t comm, const void *sendbuf,
                                                  void *recvbuf, size_t count, gs_dtype_t dtype,
                                                  gs_op_t op, cudaStream_t stream, unsigned flags,
                                                  gs_request_t *req_out)
{
    gs_allreduce_opts_t opts = GS_ALLREDUCE_OPTS_INIT;

    opts.stream = (void *)stream;
    opts.flags = flags;
    return gs_iallreduce_ex(comm, sendbuf, recvbuf, count, dtype, op, &opts, req_out);
}

/** @brief Broadcast of a device buffer ordered on @p stream. */
static inline gs_status_t gs_broadcast_on_stream(gs_comm_t comm, void *buf, size_t count,
                                                 gs_dtype_t dtype, int root, cudaStream_t stream,
                                                 unsigned flags)
{
    gs_coll_opts_t opts = gs_coll_opts_on_stream(stream);

    opts.flags = flags;
    return gs_broadcast_ex(comm, buf, count, dtype, root, &opts);
}

#ifdef __cplusplus
}
#endif

#endif /* GRADSYNC_CUDA_H */
