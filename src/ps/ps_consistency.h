/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The consistency rules of the parameter server as pure predicates over
 * clocks (gradsync/ps.h states them for users). A server keeps, per
 * worker, its clock (the number of gs_ps_clock() calls it has seen, or
 * GS_PS_CLOCK_LEFT once the worker destroyed its handle) and, per shard,
 * either the BSP round and which workers pushed in it, or (SSP, ASP) the
 * last clock in which each worker pushed the shard.
 *
 * A worker w is done with round k of a shard when it pushed the shard in
 * clock k or later, or its clock is past k. A pull at clock t needs round
 * r = t when its worker pushed the key in clock t, else t - 1:
 *   BSP: the shard's round counter is past r (rounds <= r applied);
 *   SSP(s): every worker is done with round r - s;
 *   ASP: nothing.
 * A BSP round k completes when every worker pushed in it or is past it.
 *
 * BSP pushes of later rounds. A worker's push of clock t reaches the server
 * of a shard whose round r may be behind: the push is added to the round
 * when t == r, and kept until its round when t > r. How far ahead an
 * honest worker can be follows from the model: a pull waits for round
 * t - 1 at least (t with the worker's own push), which needs every worker
 * at clock t - 1 or later, so a worker that pulls (any key) in every clock
 * is at most one round ahead of a shard when its push arrives; with the
 * usual loops over the same key ("pull, compute, push, clock" and "push,
 * pull, clock") its pushes are never ahead at all. The server learns the
 * other workers' clocks by their own messages, which may arrive a little
 * after the pull that let this worker go on was answered by another server;
 * GS_PS_BSP_MAX_AHEAD allows one round more for that. A worker that pushes
 * and clocks without pulling has no bound in the model: past the limit its
 * push is refused (GS_ERR_INVALID_USAGE), so that a server keeps at most
 * GS_PS_BSP_MAX_AHEAD pushes per worker and shard.
 *
 * SSP and ASP apply every push as it arrives and keep none, so they need
 * no such limit (an SSP worker may legitimately run s + 1 clocks ahead).
 */
#ifndef GS_PS_CONSISTENCY_H
#define GS_PS_CONSISTENCY_H

#include <stdint.h>

#define GS_PS_CLOCK_LEFT INT64_MAX

/* The round a pull at @p clock needs. */
static inline int64_t gs__ps_pull_round(int64_t clock, int pushed)
{
    return pushed ? clock : clock - 1;
}

/* Worker done with round @p k given its last pushed clock and its clock. */
static inline int gs__ps_worker_done(int64_t pushed_clock, int64_t wclock, int64_t k)
{
    return (pushed_clock >= k) || (wclock > k);
}

/* Pushes of later rounds a BSP server keeps per worker and shard. */
#define GS_PS_BSP_MAX_AHEAD 2

/* What a BSP server does with a push (gs__ps_bsp_push_kind()). */
typedef enum gs__ps_bsp_push {
    GS_PS_BSP_ADD = 0,   /* add it to the shard's current round */
    GS_PS_BSP_KEEP = 1,  /* keep it for its later round */
    GS_PS_BSP_TWICE = 2, /* refuse: the worker already pushed that round */
    GS_PS_BSP_AHEAD = 3  /* refuse: GS_PS_BSP_MAX_AHEAD pushes already kept */
} gs__ps_bsp_push_t;

/*
 * The fate of a BSP push of @p clock on a shard at @p round, from a worker
 * that pushed in the current round (@p pushed), has @p kept pushes of
 * later rounds waiting and has one of @p clock among them (@p kept_same).
 */
gs__ps_bsp_push_t gs__ps_bsp_push_kind(int64_t clock, int64_t round, int pushed, unsigned kept,
                                       int kept_same);

/*
 * SSP readiness: the first worker (index) not done with round @p need, or
 * -1 when all are (always when need < 0).
 */
int gs__ps_ssp_blocker(const int64_t *pushed_clock, const int64_t *wclock, int nworkers,
                       int64_t need);

/*
 * BSP round completion: the first worker that neither pushed in round
 * @p round (pushed[w] != 0) nor moved past it, or -1 when the round is
 * complete.
 */
int gs__ps_bsp_blocker(const uint8_t *pushed, const int64_t *wclock, int nworkers, int64_t round);

#endif /* GS_PS_CONSISTENCY_H */
