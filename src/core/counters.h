/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Per-communicator traffic counters: totals counted by the transport, per
 * collective kind counted by the API layer, and per peer counted by the
 * algorithm layer (algo_ctx.c), so every transport gets per-peer numbers
 * for free. Written by whichever thread runs the communicator's operations
 * (one at a time), read by any thread through gs_comm_counters(),
 * gs_comm_stats() and gs_comm_peer_stats(). Every update is one relaxed
 * atomic add: no locks on the hot path, and a reader sees each value whole
 * (a snapshot across fields is only approximately consistent).
 * This file knows nothing about collectives or peers beyond array indexes.
 */
#ifndef GS_CORE_COUNTERS_H
#define GS_CORE_COUNTERS_H

#include <stdatomic.h>
#include <stdint.h>

/* Slots of the per-collective arrays (the public GS_STATS_COLL_MAX). */
#define GS__COUNTERS_COLL_MAX 16

/* Rails per peer with statistics (the public GS_RAILS_MAX). */
#define GS__COUNTERS_RAILS_MAX 4

/* One TCP rail to a peer (the transport writes them; ifname is written
 * before nrails is published with release, and never changes). */
typedef struct gs__rail_counters {
    atomic_uint_fast64_t bytes;
    atomic_uint_fast64_t resent;
    atomic_uint_fast64_t rate_bps;
    atomic_uint_fast32_t share_ppm;
    atomic_int up;
    char ifname[16];
} gs__rail_counters_t;

/* One peer, seen from this rank. Wait time is time this rank spent blocked
 * in the transport, charged to the request whose completion ended the wait. */
typedef struct gs__peer_counters {
    atomic_uint_fast64_t bytes_sent;
    atomic_uint_fast64_t bytes_received;
    atomic_uint_fast64_t msgs_sent;
    atomic_uint_fast64_t msgs_received;
    atomic_uint_fast64_t send_wait_ns;
    atomic_uint_fast64_t recv_wait_ns;
    atomic_int nrails; /* TCP rails (0: none published) */
    gs__rail_counters_t rails[GS__COUNTERS_RAILS_MAX];
} gs__peer_counters_t;

/* One collective kind. */
typedef struct gs__coll_counters {
    atomic_uint_fast64_t ops;
    atomic_uint_fast64_t bytes; /* count x dtype size of the calls */
    atomic_uint_fast64_t busy_ns;
    atomic_int last_algo;              /* a gs_algo_t; 0 (auto) until one ran */
    atomic_uint_fast64_t last_traffic; /* memory traffic of the latest call's design (host) */
} gs__coll_counters_t;

typedef struct gs__counters {
    atomic_uint_fast64_t bytes_sent;
    atomic_uint_fast64_t bytes_received;
    atomic_uint_fast64_t msgs_sent;
    atomic_uint_fast64_t msgs_received;
    atomic_uint_fast64_t ops_completed;
    atomic_uint_fast64_t ops_failed;
    atomic_uint_fast64_t busy_ns;
    gs__coll_counters_t coll[GS__COUNTERS_COLL_MAX];
    gs__peer_counters_t *peers; /* npeers entries (one per rank), or NULL */
    int npeers;
    /* GS_STATS_FILE emission; touched only by the thread running operations. */
    uint64_t emit_start_ns; /* when counting began (the lines' elapsed_ms) */
    uint64_t emit_next_ns;  /* next periodic line is due at this time (0: never) */
    int emit_warned;        /* the file could not be written; warned once */
} gs__counters_t;

static inline void gs__counter_add(atomic_uint_fast64_t *c, uint64_t v)
{
    atomic_fetch_add_explicit(c, v, memory_order_relaxed);
}

static inline uint64_t gs__counter_get(const atomic_uint_fast64_t *c)
{
    return atomic_load_explicit((atomic_uint_fast64_t *)c, memory_order_relaxed);
}

#endif /* GS_CORE_COUNTERS_H */
