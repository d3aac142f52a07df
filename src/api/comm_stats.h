/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Traffic statistics of a communicator, API side: setting up the per-peer
 * counters, counting finished operations per collective kind, and writing
 * GS_STATS_FILE lines (periodically and at destroy). The counters
 * themselves live in core/counters.h; the per-peer ones are counted by the
 * algorithm layer (algo_ctx.c). No thread of its own: lines are written by
 * the thread that runs the communicator's operations, when one finishes or
 * while the worker idles with operations in flight, and once at destroy.
 */
#ifndef GS_API_COMM_STATS_H
#define GS_API_COMM_STATS_H

#include "api/comm_impl.h"

/* Allocate the per-peer counters (comm->size entries), hand them to the
 * algorithm context and arm the periodic GS_STATS_FILE line. Call once the
 * size and configuration are known, before the worker starts.
 * Returns GS_OK or GS_ERR_NO_MEMORY. */
gs_status_t gs__comm_stats_setup(gs_comm_t comm);

/* Free what gs__comm_stats_setup allocated (safe when it never ran). */
void gs__comm_stats_free(gs_comm_t comm);

/* Count a finished operation: ops_completed/ops_failed, and for its kind
 * the call, its bytes (count x dtype size), @p busy_ns and the algorithm
 * that ran (d->algo once resolved). Lock-free. */
void gs__comm_stats_op_done(gs_comm_t comm, const gs__coll_desc_t *d, gs_status_t status,
                            uint64_t busy_ns);

/* Write a GS_STATS_FILE line now (final: the one at destroy). Failures to
 * write are logged at WARN once per communicator and otherwise ignored. */
void gs__comm_stats_emit(gs_comm_t comm, uint64_t now_ns, int final);

/* Write the periodic line when it is due (GS_STATS_INTERVAL_MS). One
 * comparison when nothing is due. Thread running operations only. */
static inline void gs__comm_stats_tick(gs_comm_t comm, uint64_t now_ns)
{
    if ((comm->counters.emit_next_ns != 0) && (now_ns >= comm->counters.emit_next_ns)) {
        gs__comm_stats_emit(comm, now_ns, 0);
    }
}

#endif /* GS_API_COMM_STATS_H */
