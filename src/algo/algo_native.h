/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The "native" algorithm (algo_native.c): hand an uncompressed collective to
 * the transport's own implementation (MPI_Iallreduce, ... for the mpi
 * transport). Forced only (GS_ALGO=native or opts.algo); the cost model
 * never picks it.
 */
#ifndef GS_ALGO_ALGO_NATIVE_H
#define GS_ALGO_ALGO_NATIVE_H

#include "algo/algo.h"

/* Each returns GS_ERR_UNSUPPORTED (naming the transport) when the transport
 * has no native version; when the transport declines this dtype/op/count it
 * runs gradsync's own algorithm instead (ring or chain). Otherwise returns
 * the transport's status. */
gs_status_t gs__native_allreduce(gs_algo_ctx_t *ctx, const gs_coll_desc_t *d);
gs_status_t gs__native_broadcast(gs_algo_ctx_t *ctx, const gs_coll_desc_t *d);
gs_status_t gs__native_allgather(gs_algo_ctx_t *ctx, const gs_coll_desc_t *d);
gs_status_t gs__native_reduce_scatter(gs_algo_ctx_t *ctx, const gs_coll_desc_t *d);

#endif /* GS_ALGO_ALGO_NATIVE_H */
