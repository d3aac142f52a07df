/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The primitives: ring, double binary tree, recursive doubling,
 * Rabenseifner, direct, chain, binomial, the v-collectives and the native
 * calls. Each runs one collective over the context alone (algo/ctx): none
 * chooses, plans or calls a schedule. Each file's header comment states its
 * costs and step tables; the peer and step arithmetic of the tree and of
 * recursive doubling is pure, in pattern_tree.h and pattern_rd.h.
 */
#ifndef GS_ALGO_PRIM_PRIM_H
#define GS_ALGO_PRIM_PRIM_H

#include <stddef.h>
#include <stdint.h>

#include "algo/ctx/ctx.h"


/* Primitives (each file's header comment states its costs and step tables). */
gs_status_t gs__ring_allreduce(gs__algo_ctx_t *ctx, const gs__coll_desc_t *d);
gs_status_t gs__ring_reduce_scatter(gs__algo_ctx_t *ctx, const gs__coll_desc_t *d);
gs_status_t gs__ring_allgather(gs__algo_ctx_t *ctx, const gs__coll_desc_t *d);
/* The two phases of the ring all-reduce on their own, over ctx->route, for
 * the hierarchical all-reduce. Chunk c is elements [bounds[c], bounds[c+1])
 * of the d->count-element vector (route n + 1 entries; NULL: the balanced
 * split). rs_chunks: position p ends with chunk (p+1) mod n reduced over the
 * route (op as given; AVG is not scaled) in recvbuf; other chunks of
 * recvbuf hold partial sums. ag_chunks: position p holds chunk (p+1) mod n
 * in recvbuf; every position ends with every chunk. */
gs_status_t gs__ring_rs_chunks(gs__algo_ctx_t *ctx, const gs__coll_desc_t *d, const size_t *bounds);
gs_status_t gs__ring_ag_chunks(gs__algo_ctx_t *ctx, const gs__coll_desc_t *d, const size_t *bounds);
gs_status_t gs__chain_broadcast(gs__algo_ctx_t *ctx, const gs__coll_desc_t *d);
gs_status_t gs__chain_reduce(gs__algo_ctx_t *ctx, const gs__coll_desc_t *d);
gs_status_t gs__direct_alltoall(gs__algo_ctx_t *ctx, const gs__coll_desc_t *d);
gs_status_t gs__direct_barrier(gs__algo_ctx_t *ctx, const gs__coll_desc_t *d);
gs_status_t gs__p2p_post(gs__algo_ctx_t *ctx, const gs__coll_desc_t *d, gs__algo_req_t *r);
gs_status_t gs__rd_allreduce(gs__algo_ctx_t *ctx, const gs__coll_desc_t *d);
gs_status_t gs__rabenseifner_allreduce(gs__algo_ctx_t *ctx, const gs__coll_desc_t *d);
gs_status_t gs__tree_allreduce(gs__algo_ctx_t *ctx, const gs__coll_desc_t *d);
gs_status_t gs__binomial_broadcast(gs__algo_ctx_t *ctx, const gs__coll_desc_t *d);
gs_status_t gs__binomial_reduce(gs__algo_ctx_t *ctx, const gs__coll_desc_t *d);
gs_status_t gs__p2p_send(gs__algo_ctx_t *ctx, const gs__coll_desc_t *d);
/* The rooted and variable-size collectives (algo_vcoll.c). */
gs_status_t gs__binomial_gather(gs__algo_ctx_t *ctx, const gs__coll_desc_t *d);
gs_status_t gs__direct_gather(gs__algo_ctx_t *ctx, const gs__coll_desc_t *d);
gs_status_t gs__binomial_scatter(gs__algo_ctx_t *ctx, const gs__coll_desc_t *d);
gs_status_t gs__direct_scatter(gs__algo_ctx_t *ctx, const gs__coll_desc_t *d);
gs_status_t gs__direct_alltoallv(gs__algo_ctx_t *ctx, const gs__coll_desc_t *d);
gs_status_t gs__ring_allgatherv(gs__algo_ctx_t *ctx, const gs__coll_desc_t *d);
gs_status_t gs__ring_reduce_scatterv(gs__algo_ctx_t *ctx, const gs__coll_desc_t *d);
gs_status_t gs__p2p_recv(gs__algo_ctx_t *ctx, const gs__coll_desc_t *d);

/* The collectives in the host segment (algo_shm.c; ctx->shm set, every rank
 * on one host). The all-reduce runs as d->design says. */
typedef enum gs__shm_design {
    GS_SHM_ONE_ROUND = 0,   /* every slot reduced by every member: 1 phase */
    GS_SHM_CHUNKED = 1,     /* reduce-scatter + all-gather through the slots, per chunk */
    GS_SHM_SINGLE_COPY = 2, /* the peers' buffers read with process_vm_readv */
    GS_SHM_DESIGN_COUNT = 3
} gs__shm_design_t;

gs_status_t gs__shm_allreduce(gs__algo_ctx_t *ctx, const gs__coll_desc_t *d);
gs_status_t gs__shm_barrier(gs__algo_ctx_t *ctx, const gs__coll_desc_t *d);
/*
 * The hierarchical all-reduce's phases inside a host, in the host segment of
 * this rank's host (ctx->shm, members in host order). Member p owns
 * [bounds[c], bounds[c + 1]) with c = (p + 1) % n, as after the ring's
 * reduce-scatter (gs__ring_rs_chunks). rs: every member's d->sendbuf is
 * reduced into the owner's d->recvbuf part, over the members in order. ag:
 * every owner's d->recvbuf part is copied into the others' d->recvbuf.
 * GS_ERR_UNSUPPORTED when this rank has no segment of its host's ranks.
 */
gs_status_t gs__shm_rs_chunks(gs__algo_ctx_t *ctx, const gs__coll_desc_t *d, const size_t *bounds);
gs_status_t gs__shm_ag_chunks(gs__algo_ctx_t *ctx, const gs__coll_desc_t *d, const size_t *bounds);
/* "one-round", "chunked", "single-copy" ("unknown" out of range), and back (-1: none). */
const char *gs__shm_design_name(int design);
int gs__shm_design_parse(const char *text);

/*
 * The fold of recursive doubling and Rabenseifner (pattern_rd.h), shared by
 * both. fold_in: the even ranks among the first 2*rem send their vector as
 * message @p idx and get *src_out = NULL (they sit out); their odd partners
 * reduce it into recvbuf (*src_out = recvbuf); every other rank gets
 * *src_out = sendbuf. @p tmp holds count elements. fold_out: the odd ranks
 * send the finished recvbuf back to the even ones as message @p idx.
 */
gs_status_t gs__rd_fold_in(gs__algo_ctx_t *ctx, const gs__coll_desc_t *d, uint32_t idx, void *tmp,
                           const void **src_out);
gs_status_t gs__rd_fold_out(gs__algo_ctx_t *ctx, const gs__coll_desc_t *d, uint32_t idx);

/*
 * The start of recursive doubling and Rabenseifner (algo_rd.c). One rank or
 * count 0: no message; recvbuf gets sendbuf's bytes when out of place and
 * *done_out = 1, nothing is left to do. Otherwise *done_out = 0, *tmp_out is
 * scratch of count elements and gs__rd_fold_in has run as message 0
 * (*src_out as it sets it; the caller ends with gs__rd_fold_out). Returns
 * GS_OK, GS_ERR_NO_MEMORY, or the fold's failure; on a failure the caller
 * returns it at once.
 */
gs_status_t gs__rd_start(gs__algo_ctx_t *ctx, const gs__coll_desc_t *d, void **tmp_out,
                         const void **src_out, int *done_out);


/* The native calls (algo_native.c): hand an uncompressed collective to the
 * transport's own implementation (MPI_Iallreduce, ... for the mpi
 * transport). Forced only (GS_ALGO=native or opts.algo); the cost model
 * never picks them. Each returns GS_ERR_UNSUPPORTED (naming the transport)
 * when the transport has no native version; when the transport declines
 * this dtype/op/count it runs gradsync's own primitive instead (ring or
 * chain). Otherwise returns the transport's status. */
gs_status_t gs__native_allreduce(gs__algo_ctx_t *ctx, const gs__coll_desc_t *d);
gs_status_t gs__native_broadcast(gs__algo_ctx_t *ctx, const gs__coll_desc_t *d);
gs_status_t gs__native_allgather(gs__algo_ctx_t *ctx, const gs__coll_desc_t *d);
gs_status_t gs__native_reduce_scatter(gs__algo_ctx_t *ctx, const gs__coll_desc_t *d);

#endif /* GS_ALGO_PRIM_PRIM_H */
