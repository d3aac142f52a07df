/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Selection: the only place that decides how a call runs (algo_select.c:
 * the planner; algo_cost.c: the cost model and GS_ALGO's policy;
 * algo_probe.c: GS_TUNE=probe). Nothing below it calls up into it; the
 * communicator calls gs__algo_run.
 */
#ifndef GS_ALGO_SELECT_SELECT_H
#define GS_ALGO_SELECT_SELECT_H

#include <stddef.h>
#include <stdint.h>

#include "algo/ctx/ctx.h"
#include "algo/sched/sched.h"

/* The cost model's machine parameters (see algo_select.c): seconds per
 * message (alpha), per byte sent on one link (beta), per byte reduced (gamma). */
typedef struct gs__algo_model {
    double alpha;
    double beta;
    double gamma;
    double cache_bytes; /* last-level cache: unsliced messages beyond it pay a memory pass */
    double intra_alpha; /* alpha and beta between ranks of one host (hierarchical phases) */
    double intra_beta;
    int flat_intra;    /* 1: every rank on one host, every pair on shared memory, so the
                         * flat algorithms pay intra_alpha and intra_beta too (agreed by
                         * every rank at init: gs__algo_model_agree_local) */
    double ring_bytes; /* flat_intra: one shared-memory ring (GS_SHM_BYTES); an unsliced
                         * message that does not fit stalls its sender; 0: no such limit */
} gs__algo_model_t;


/* Model parameters GS_TUNE=probe must leave alone (set explicitly by the user). */
#define GS_PROBE_KEEP_ALPHA (1u << 0)
#define GS_PROBE_KEEP_BETA (1u << 1)
#define GS_PROBE_KEEP_GAMMA (1u << 2)
#define GS_PROBE_KEEP_INTRA_ALPHA (1u << 3)
#define GS_PROBE_KEEP_INTRA_BETA (1u << 4)

/*
 * GS_TUNE=probe (algo_probe.c): time small and large messages to the ring
 * neighbours and a reduction, agree with every rank on the slowest value of
 * each, and write them into *model except those flagged in @p keep. The
 * large messages are sized from a pilot so that the probe takes about the
 * same time at any link rate (0.13-0.2 s on the lab's shaped links from
 * 10 Mbit/s to 1 Gbit/s). Collective over ctx's ranks; blocking; runs
 * before any collective (its tags use a sequence number collectives do not
 * reach). Returns GS_OK or the exchange's failure (GS_ERR_TIMEOUT,
 * GS_ERR_PEER_FAILED, GS_ERR_MISMATCH for a probe message of the wrong
 * length, GS_ERR_NO_MEMORY).
 */
gs_status_t gs__algo_probe(gs__algo_ctx_t *ctx, gs__algo_model_t *model, unsigned keep);

/*
 * Set model->flat_intra when every rank says that all its peers are on
 * its host and reached over shared memory (@p local: this rank's view). The
 * ranks agree (a ring of running maxima, like the probe's), so every model
 * stays identical even where one pair fell back to TCP. Then the model
 * knows the ring size (@p ring_bytes per direction of a pair) and its
 * cache shrinks by what the host's n(n-1) rings take of it. Collective over
 * ctx's ranks, before any collective; a few small messages. Returns GS_OK
 * or the exchange's failure.
 */
gs_status_t gs__algo_model_agree_local(gs__algo_ctx_t *ctx, gs__algo_model_t *model, int local,
                                       double ring_bytes);

/* Parsed GS_ALGO: the forced algorithm per collective (GS_ALGO_AUTO = none). */
typedef struct gs__algo_policy {
    gs_algo_t forced[GS_COLL_KIND_COUNT];
} gs__algo_policy_t;

/* Parse "ring" (every collective that has it) or "allreduce:ring,broadcast:chain".
 * Returns GS_OK or GS_ERR_INVALID_ARG naming the bad entry. */
gs_status_t gs__algo_policy_parse(const char *text, gs__algo_policy_t *out);

/*
 * What selection keeps per communicator: GS_ALGO's forced algorithms, the
 * cost model (set from the knobs, measured by GS_TUNE=probe, agreed by
 * gs__algo_model_agree_local), and the size classes whose plan was logged
 * at INFO, per collective and (path, scheme). All zero: no policy, the
 * built-in model, nothing logged. Owned by the communicator, used on its
 * worker thread only; nothing below selection sees it.
 */
typedef struct gs__algo_select {
    gs__algo_policy_t policy;
    int shm_design; /* GS_SHM_DESIGN: 0 auto (the model chooses), else a gs__shm_design_t + 1 */
    gs__algo_model_t model;
    uint64_t logged[GS_COLL_KIND_COUNT][GS_PATH_COUNT * GS_SCHEME_COUNT];
} gs__algo_select_t;

/*
 * Decide how *d runs (pure but for the INFO line, logged once per
 * collective, plan and size class): the path from the buffers' memory kind
 * and ctx->dev_caps, the scheme from d->codec (a density rule every rank
 * evaluates alike), the algorithm from d->algo set by the caller, then the
 * policy, then the cost model. Returns GS_OK, or GS_ERR_UNSUPPORTED (with
 * text) when a forced algorithm cannot run this collective or no path
 * serves these buffers.
 */
gs_status_t gs__algo_plan(gs__algo_select_t *sel, const gs__algo_ctx_t *ctx,
                          const gs__coll_desc_t *d, gs__algo_plan_t *plan_out);

/* Plan *d (gs__algo_plan), set d->algo to the plan's algorithm and run it.
 * Returns the run's status or the plan's error. */
gs_status_t gs__algo_run(gs__algo_select_t *sel, gs__algo_ctx_t *ctx, gs__coll_desc_t *d);

void gs__algo_model_init(gs__algo_model_t *m, int alpha_us, int beta_mbps, int gamma_mbps);

/* Predicted seconds of @p algo running @p kind on @p n ranks with @p bytes
 * (the whole vector for allreduce/broadcast/reduce; per rank otherwise) and
 * pipeline slices of @p slice_bytes; a negative value when @p algo does not
 * implement @p kind. A zero model means the built-in defaults. Pure. */
double gs__algo_cost(const gs__algo_model_t *m, gs__coll_kind_t kind, gs_algo_t algo, int n,
                     size_t bytes, size_t slice_bytes);

/* How the ranks sit on hosts, as the cost model sees it. */
typedef struct gs__algo_shape {
    int n;           /* ranks */
    int nhosts;      /* hosts */
    int min_local;   /* fewest ranks on a host */
    int max_local;   /* most ranks on a host */
    int shm;         /* a host segment serves the communicator (every rank on one host,
                    * ctx->shm): 0 none, 1 yes, 2 yes and single copy works */
    size_t shm_slot; /* its slot bytes */
} gs__algo_shape_t;

/*
 * The designs of an all-reduce in the host segment (algo_shm.c), n ranks, S
 * bytes, with a phase costing the intra-host alpha and a byte of memory
 * traffic GS_ALGO_MEM_BETA (the host's, shared by its ranks); the reductions
 * stream what the traffic term counts, at memory speed, so no gamma:
 *   one-round:   alpha + n (n + 3) S mem                             (S <= slot)
 *   chunked:     2 ceil(S / slot) alpha + 5 n S mem
 *   single copy: 3 alpha + (n - 1)(ceil(S / (n piece)) + 1) syscall + 3 n S mem
 *                                                                   (shm == 2)
 * gs__algo_cost_shm: one design's seconds, -1 where it does not apply.
 * gs__algo_shm_design: the cheapest design (its seconds in *cost_out).
 * gs__algo_traffic: bytes of memory traffic a design moves, summed over the
 * n ranks of one host (gs_comm_stats_t.traffic_bytes); 0 when not counted.
 * Pure.
 */
double gs__algo_cost_shm(const gs__algo_model_t *m, const gs__algo_shape_t *sh, size_t bytes,
                         int design);
int gs__algo_shm_design(const gs__algo_model_t *m, const gs__algo_shape_t *sh, size_t bytes,
                        double *cost_out);
uint64_t gs__algo_traffic(gs__coll_kind_t kind, gs_algo_t algo, int design, int n, size_t bytes);

/* What gs__algo_shm_setup needs from the communicator. */
typedef struct gs__algo_shm_params {
    uint64_t job_id;
    uint64_t comm_id;
    size_t slot_bytes; /* GS_SHM_SLOT_BYTES */
    int cma;           /* GS_SHM_CMA */
    int cma_deny;      /* GS_SHM_TEST_CMA_DENY == 1 */
} gs__algo_shm_params_t;

/*
 * Set up the host segment of a communicator whose ranks all share one host
 * (ctx->shm; ctx_shm.h): rank 0 creates it and names it to the others,
 * which map it; every rank agrees (running maxima) whether it serves and
 * whether single copy works between every pair. A rank that cannot map it
 * WARNs why, and the communicator goes without (ctx->shm stays NULL).
 * Collective over ctx's ranks, at init. Returns GS_OK or the exchange's
 * failure (GS_ERR_TIMEOUT, GS_ERR_PEER_FAILED, GS_ERR_NO_MEMORY).
 */
gs_status_t gs__algo_shm_setup(gs__algo_ctx_t *ctx, const gs__algo_shm_params_t *p);

/* Intra-host link parameters (microseconds, MB/s; <= 0: the built-in defaults). */
void gs__algo_model_set_intra(gs__algo_model_t *m, int alpha_us, int beta_mbps);

/* gs__algo_cost and gs__algo_choose for ranks spread over hosts: the flat
 * algorithms pay the model's alpha and beta (the links between hosts), the
 * hierarchical all-reduce pays intra_alpha and intra_beta inside a host and
 * is offered only when some host has several ranks and there are several
 * hosts. gs__algo_cost(n) is the shape {n, n, 1, 1}. Pure. */
double gs__algo_cost_shape(const gs__algo_model_t *m, gs__coll_kind_t kind, gs_algo_t algo,
                           const gs__algo_shape_t *shape, size_t bytes, size_t slice_bytes);
gs_algo_t gs__algo_choose_shape(const gs__algo_model_t *m, gs__coll_kind_t kind,
                                const gs__algo_shape_t *shape, size_t bytes, size_t slice_bytes);

/* Predicted seconds of a compressed reduce-scatter of @p block_bytes per
 * rank whose codec sends @p ratio of the raw bytes: the flat block-wise
 * scheme, or (two_hop) the two-hop one; -1 where two-hop does not apply
 * (algo_cost.c has the formulas). Pure. */
double gs__algo_cost_shard_rs(const gs__algo_model_t *m, const gs__algo_shape_t *shape,
                              size_t block_bytes, double ratio, int two_hop);

/* The model's choice: the cheapest algorithm that implements @p kind. Pure. */
gs_algo_t gs__algo_choose(const gs__algo_model_t *m, gs__coll_kind_t kind, int n, size_t bytes,
                          size_t slice_bytes);

#endif /* GS_ALGO_SELECT_SELECT_H */
