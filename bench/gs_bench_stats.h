/* SPDX-License-Identifier: Apache-2.0 */
/*
 * gs-bench --stats: after the run, every rank's slowest link (the peer it
 * spent the most time blocked on, from gs_comm_peer_stats), gathered to
 * every rank, printed by rank 0 as a table or JSON, with the most
 * waited-on rank (docs/stats.md explains how to read it). Public API only.
 */
#ifndef GRADSYNC_BENCH_GS_BENCH_STATS_H
#define GRADSYNC_BENCH_GS_BENCH_STATS_H

#include <stdint.h>
#include <stdio.h>

#include "gradsync/gradsync.h"

/** Gather every rank's row into a new array (*all_out, free() it). Collective. */
gs_status_t gs_bench_stats_gather(gs_comm_t comm, int rank, int nranks, int64_t **all_out);

/** The table (text) or the "stats" member (JSON) of the gathered rows. */
void gs_bench_stats_text(const int64_t *all, int nranks, FILE *f);
void gs_bench_stats_json(const int64_t *all, int nranks, FILE *f);
/* Rank @p rank's TCP rails to each peer with several (bytes, rate and share
 * per rail, gs_peer_stats_t.rails), as comment lines; nothing without one. */
void gs_bench_stats_rails(gs_comm_t comm, int rank, int nranks, FILE *f);

#endif /* GRADSYNC_BENCH_GS_BENCH_STATS_H */
