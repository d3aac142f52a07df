/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The one execution entry (gs__algo_exec): a plan's path runner, and on the
 * host path its scheme, then the primitive or schedule of the algorithm
 * from the one table of which algorithm implements which collective. It
 * runs what the plan says and decides nothing (algo/select plans).
 */
#include "algo/sched/sched.h"

#include "algo/sched/algo_comp.h"
#include "algo/sched/algo_dev.h"
#include "core/error.h"
#include "core/log.h"

typedef gs_status_t (*algo_fn_t)(gs__algo_ctx_t *ctx, const gs__coll_desc_t *d);
typedef gs_status_t (*path_fn_t)(gs__algo_ctx_t *ctx, gs__coll_desc_t *d,
                                 const gs__algo_plan_t *plan);

static const char *const path_names[GS_PATH_COUNT] = {
    [GS_PATH_HOST] = "host",
    [GS_PATH_NCCL] = "nccl",
    [GS_PATH_STAGED] = "staged",
    [GS_PATH_MPI_CUDA] = "CUDA-aware MPI",
};

static const char *const scheme_names[GS_SCHEME_COUNT] = {
    [GS_SCHEME_PLAIN] = "plain",
    [GS_SCHEME_TWO_PHASE] = "two-phase",
    [GS_SCHEME_SPARSE_GATHER] = "sparse gather",
    [GS_SCHEME_SPARSE_SHARED] = "sparse shared",
    [GS_SCHEME_SHARD] = "block-wise",
    [GS_SCHEME_SHARD_HIER] = "two-hop",
};

/* Who runs each path (NULL: not built in; the plan never picks it). */
static const path_fn_t path_table[GS_PATH_COUNT] = {
    [GS_PATH_HOST] = gs__algo_run_host,
#ifdef GS_WITH_NCCL
    [GS_PATH_NCCL] = gs__dev_run_nccl,
#endif
#ifdef GS_WITH_CUDA
    [GS_PATH_STAGED] = gs__dev_run_staged,
    [GS_PATH_MPI_CUDA] = gs__dev_run_mpi,
#endif
};

/* Which algorithm implements which collective (NULL: not offered). */
static const algo_fn_t algo_table[GS_COLL_KIND_COUNT][GS_ALGO_COUNT] = {
    [GS_COLL_ALLREDUCE] = {[GS_ALGO_RING] = gs__ring_allreduce,
                           [GS_ALGO_TREE] = gs__tree_allreduce,
                           [GS_ALGO_RECURSIVE_DOUBLING] = gs__rd_allreduce,
                           [GS_ALGO_RABENSEIFNER] = gs__rabenseifner_allreduce,
                           [GS_ALGO_NATIVE] = gs__native_allreduce,
                           [GS_ALGO_HIERARCHICAL] = gs__hier_allreduce,
                           [GS_ALGO_SHM] = gs__shm_allreduce},
    [GS_COLL_BROADCAST] = {[GS_ALGO_CHAIN] = gs__chain_broadcast,
                           [GS_ALGO_BINOMIAL] = gs__binomial_broadcast,
                           [GS_ALGO_NATIVE] = gs__native_broadcast},
    [GS_COLL_REDUCE] =
        {[GS_ALGO_CHAIN] = gs__chain_reduce, [GS_ALGO_BINOMIAL] = gs__binomial_reduce},
    [GS_COLL_ALLGATHER] =
        {[GS_ALGO_RING] = gs__ring_allgather, [GS_ALGO_NATIVE] = gs__native_allgather},
    [GS_COLL_REDUCE_SCATTER] =
        {[GS_ALGO_RING] = gs__ring_reduce_scatter, [GS_ALGO_NATIVE] = gs__native_reduce_scatter},
    [GS_COLL_ALLTOALL] = {[GS_ALGO_DIRECT] = gs__direct_alltoall},
    [GS_COLL_BARRIER] = {[GS_ALGO_DIRECT] = gs__direct_barrier, [GS_ALGO_SHM] = gs__shm_barrier},
    [GS_COLL_SEND] = {[GS_ALGO_DIRECT] = gs__p2p_send},
    [GS_COLL_RECV] = {[GS_ALGO_DIRECT] = gs__p2p_recv},
    [GS_COLL_GATHER] =
        {[GS_ALGO_DIRECT] = gs__direct_gather, [GS_ALGO_BINOMIAL] = gs__binomial_gather},
    [GS_COLL_SCATTER] =
        {[GS_ALGO_DIRECT] = gs__direct_scatter, [GS_ALGO_BINOMIAL] = gs__binomial_scatter},
    [GS_COLL_ALLGATHERV] = {[GS_ALGO_RING] = gs__ring_allgatherv},
    [GS_COLL_ALLTOALLV] = {[GS_ALGO_DIRECT] = gs__direct_alltoallv},
    [GS_COLL_REDUCE_SCATTERV] = {[GS_ALGO_RING] = gs__ring_reduce_scatterv},
};

const char *gs__path_name(gs__path_t path)
{
    return ((unsigned)path < GS_PATH_COUNT) ? path_names[path] : "unknown";
}

const char *gs__scheme_name(gs__scheme_t scheme)
{
    return ((unsigned)scheme < GS_SCHEME_COUNT) ? scheme_names[scheme] : "unknown";
}

int gs__algo_offers(gs__coll_kind_t kind, gs_algo_t algo)
{
    if (((unsigned)kind >= GS_COLL_KIND_COUNT) || ((unsigned)algo >= GS_ALGO_COUNT)) {
        return 0;
    }
    return (algo == GS_ALGO_AUTO) || (algo_table[kind][algo] != NULL);
}

int gs__algo_path_built(gs__path_t path)
{
    return ((unsigned)path < GS_PATH_COUNT) && (path_table[path] != NULL);
}

gs_status_t gs__algo_run_host(gs__algo_ctx_t *ctx, gs__coll_desc_t *d, const gs__algo_plan_t *plan)
{
    switch (plan->scheme) {
    case GS_SCHEME_PLAIN:
        GS_TRACE(ALGO, "%s: %s count %zu with %s", ctx->opname, gs__coll_name(d->kind), d->count,
                 gs__algo_name(plan->algo));
        if (!gs__algo_offers(d->kind, plan->algo) || (plan->algo == GS_ALGO_AUTO)) {
            return gs__error_set(GS_ERR_INTERNAL, "%s: no plan for %s with algorithm '%s'",
                                 ctx->opname, gs__coll_name(d->kind), gs__algo_name(plan->algo));
        }
        return algo_table[d->kind][plan->algo](ctx, d);
    case GS_SCHEME_TWO_PHASE:
        return gs__compressed_allreduce(ctx, d);
    case GS_SCHEME_SPARSE_GATHER:
    case GS_SCHEME_SPARSE_SHARED:
        return gs__sparse_allreduce(ctx, d, plan);
    case GS_SCHEME_SHARD:
        return gs__compressed_shard(ctx, d, NULL);
    case GS_SCHEME_SHARD_HIER:
        return gs__compressed_rs_two_hop(ctx, d);
    default:
        return gs__error_set(GS_ERR_INTERNAL, "%s: unknown scheme %d", ctx->opname,
                             (int)plan->scheme);
    }
}

gs_status_t gs__algo_exec(gs__algo_ctx_t *ctx, gs__coll_desc_t *d, const gs__algo_plan_t *plan)
{
    if (!gs__algo_path_built(plan->path)) {
        return gs__error_set(GS_ERR_INTERNAL, "%s: path %d is not built in", ctx->opname,
                             (int)plan->path);
    }
    return path_table[plan->path](ctx, d, plan);
}
