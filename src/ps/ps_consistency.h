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
