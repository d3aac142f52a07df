/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Schedules and the one execution entry. A plan (gs__algo_plan_t, decided
 * by algo/select and nowhere else) says where a call's bytes go, whether
 * and how they are compressed, and which algorithm moves them; gs__algo_exec
 * runs a plan: its path runner, then on the host path its scheme, then the
 * algorithm's primitive or schedule from the one table of which algorithm
 * implements which collective (algo_exec.c). The schedules combine
 * primitives: hierarchical (algo_hier.c), compressed two-phase
 * (algo_compressed.c), sparse (algo_sparse.c), and the device paths
 * (algo_dev.h). A schedule never plans: what it runs nested is in the plan
 * it was given.
 */
#ifndef GS_ALGO_SCHED_SCHED_H
#define GS_ALGO_SCHED_SCHED_H

#include <stddef.h>
#include <stdint.h>

#include "algo/ctx/ctx.h"
#include "algo/prim/prim.h"


/*
 * How a call runs, decided by gs__algo_plan (algo_select.c) and nowhere
 * else. Each field selects a row of a table there: the path says where
 * the bytes go, the scheme whether and how they are compressed, the
 * algorithm which gradsync algorithm moves them (GS_ALGO_NATIVE on the
 * NCCL path: NCCL's own collectives).
 */
typedef enum gs__path {
    GS_PATH_HOST = 0,     /* host buffers over the communicator's transport */
    GS_PATH_NCCL = 1,     /* device buffers through NCCL, ordered on the caller's stream */
    GS_PATH_STAGED = 2,   /* device buffers staged through pinned host memory, host transport */
    GS_PATH_MPI_CUDA = 3, /* device buffers straight to a CUDA-aware MPI's collectives */
    GS_PATH_COUNT = 4
} gs__path_t;

typedef enum gs__scheme {
    GS_SCHEME_PLAIN = 0,         /* uncompressed */
    GS_SCHEME_TWO_PHASE = 1,     /* quantizers, or a sparsifier too dense: algo_compressed.c */
    GS_SCHEME_SPARSE_GATHER = 2, /* top-k: all-gather of (index, value) payloads (algo_sparse.c) */
    GS_SCHEME_SPARSE_SHARED = 3, /* random-k: shared indices, dense all-reduce of the k values */
    GS_SCHEME_SHARD = 4,         /* reduce-scatter(v), all-gather(v) with a codec: each block
                                  * encoded once, moved all-to-all (algo_compressed.c) */
    GS_SCHEME_SHARD_HIER = 5,    /* reduce-scatter with a codec in two hops: full precision
                                  * inside hosts, compressed between (algo_comp_hier.c) */
    GS_SCHEME_COUNT = 6
} gs__scheme_t;

typedef struct gs__algo_plan {
    gs__path_t path;
    gs__scheme_t scheme;
    gs_algo_t algo;   /* GS_SCHEME_PLAIN: the algorithm; else GS_ALGO_AUTO */
    int device_codec; /* device buffers, two-phase: the codec kernels run on the GPU
                       * (f32 without zstd); else the CPU codecs run on staged copies */
    gs_algo_t inner;  /* GS_SCHEME_SPARSE_SHARED: the algorithm of its dense all-reduce
                       * of the k values (the planner's choice for that size) */
    const char *why;  /* what decided the algorithm: "caller", "GS_ALGO", "cost model", ... */
    int design;       /* GS_ALGO_SHM: how it runs in the host segment (gs__shm_design_t) */
    uint64_t traffic; /* memory traffic of the plan, summed over one host's ranks (the
                       * model's count; 0: not counted) */
} gs__algo_plan_t;

/* Names for logs ("host", "nccl", "staged"; "plain", "two-phase", ...). */
const char *gs__path_name(gs__path_t path);
const char *gs__scheme_name(gs__scheme_t scheme);

/* 1 when @p algo implements @p kind (GS_ALGO_AUTO always does): the
 * execution table's entry is set. */
int gs__algo_offers(gs__coll_kind_t kind, gs_algo_t algo);

/* 1 when this build has a runner for @p path (no NCCL or CUDA: those are not). */
int gs__algo_path_built(gs__path_t path);

/* Run *d as @p plan says (plan->path's runner). d->algo is the plan's
 * algorithm. Returns the run's status. */
gs_status_t gs__algo_exec(gs__algo_ctx_t *ctx, gs__coll_desc_t *d, const gs__algo_plan_t *plan);


/* Run *d as @p plan says on the host path (the gradsync algorithms and the
 * compressed schemes over ctx's transport). The staged device path calls
 * it on host copies of the buffers. */
gs_status_t gs__algo_run_host(gs__algo_ctx_t *ctx, gs__coll_desc_t *d, const gs__algo_plan_t *plan);

/* The hierarchical all-reduce (algo_hier.c): a ring reduce-scatter inside
 * each host, a ring all-reduce of each chunk between hosts, a ring
 * all-gather inside each host. */
gs_status_t gs__hier_allreduce(gs__algo_ctx_t *ctx, const gs__coll_desc_t *d);
/* Compressed all-reduce, two-phase scheme (algo_compressed.c): d->codec set,
 * float dtype, SUM or AVG; the sparse schemes are algo_comp.h's. */
gs_status_t gs__compressed_allreduce(gs__algo_ctx_t *ctx, const gs__coll_desc_t *d);
/* A group of ctx's ranks a compressed schedule runs over: n members,
 * ranks[i] the rank of ctx of member i, this rank member index. */
typedef struct gs__comp_group {
    int n;
    int index;
    const int *ranks;
} gs__comp_group_t;

/* Compressed reduce-scatter(v) or all-gather(v) (GS_SCHEME_SHARD,
 * algo_compressed.c): d->codec set, float dtype, SUM or AVG; over @p grp
 * (NULL: every rank of ctx; AVG always divides by ctx's size). */
gs_status_t gs__compressed_shard(gs__algo_ctx_t *ctx, const gs__coll_desc_t *d,
                                 const gs__comp_group_t *grp);
/* Compressed reduce-scatter in two hops (GS_SCHEME_SHARD_HIER,
 * algo_comp_hier.c): a full-precision ring reduce-scatter inside each host,
 * then gs__compressed_shard over the ranks of one local position on every
 * host. Needs the same number of ranks, at least two, on every host of
 * several. */
gs_status_t gs__compressed_rs_two_hop(gs__algo_ctx_t *ctx, const gs__coll_desc_t *d);

#endif /* GS_ALGO_SCHED_SCHED_H */
