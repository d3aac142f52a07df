/* SPDX-License-Identifier: Apache-2.0 */
/*
 * gs-bench's memory-traffic floor: the host's memory-copy rate, measured in
 * the run itself, which the floor column divides a row's memory traffic by
 * (gs_comm_stats_t.traffic_bytes: what the design that ran reads and writes,
 * summed over the host's ranks). Public API only.
 */
#ifndef GRADSYNC_BENCH_GS_BENCH_FLOOR_H
#define GRADSYNC_BENCH_GS_BENCH_FLOOR_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "gradsync/gradsync.h"

/* The host's memory-copy rate, as gs_bench_floor_measure found it. */
typedef struct gs_bench_floor {
    double copy_bps;    /* bytes memcpy'd per second, all threads together; 0: not measured */
    double traffic_bps; /* memory traffic per second: each copied byte is read and written */
    int threads;        /* threads that copied at once */
    size_t bytes;       /* bytes each thread copied per repetition */
    int reps;           /* timed repetitions (the rate is their median) */
    const char *why;    /* why there is no rate (copy_bps 0), NULL when there is one */
} gs_bench_floor_t;

/*
 * Measure the rate: min(2, online CPUs) threads each memcpy a buffer of at
 * least 32 MiB (together at least 64 MiB and twice the last-level cache) at
 * once, a warm-up then several timed repetitions; the median repetition
 * gives the rate. Local and blocking (a fraction of a second); run it while
 * the other ranks of the host are idle. Allocates (and frees) a source and a
 * destination buffer per thread.
 * @return GS_OK with *out filled; GS_ERR_NO_MEMORY, or GS_ERR_SYSTEM when a
 * thread cannot be started, with *out zeroed (copy_bps 0).
 */
gs_status_t gs_bench_floor_measure(gs_bench_floor_t *out);

/*
 * At the start of a run: whether the ranks of @p comm all share one host,
 * and if so the rate (rank 0 measures it with gs_bench_floor_measure while
 * the others wait idle for its message that it is done). Where there is no
 * rate, out->why says why (one rank, ranks on several hosts, the
 * measurement's error). Collective (a one-element all-reduce, then
 * point-to-point).
 * @return GS_OK, or the error of a gradsync call.
 */
gs_status_t gs_bench_floor_setup(gs_comm_t comm, int rank, int nranks, gs_bench_floor_t *out);

/* The fraction of the memory-traffic floor reached by a call that moved @p traffic bytes of
 * memory traffic in @p time_us: the time that traffic takes at the rate over time_us (1.0: at
 * the floor); -1 when either is unknown (traffic 0, no rate). */
double gs_bench_floor_frac(const gs_bench_floor_t *fl, uint64_t traffic, double time_us);

/* The header line of the text output ("# memory floor: ..."): the rate, or why there is none. */
void gs_bench_floor_print(const gs_bench_floor_t *fl, FILE *f);

#endif /* GRADSYNC_BENCH_GS_BENCH_FLOOR_H */
