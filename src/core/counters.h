/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Per-communicator traffic counters: written by the worker thread (and the
 * transport it drives), read by any thread through gs_comm_counters().
 */
#ifndef GS_CORE_COUNTERS_H
#define GS_CORE_COUNTERS_H

#include <stdatomic.h>
#include <stdint.h>

typedef struct gs__counters {
    atomic_uint_fast64_t bytes_sent;
    atomic_uint_fast64_t bytes_received;
    atomic_uint_fast64_t msgs_sent;
    atomic_uint_fast64_t msgs_received;
    atomic_uint_fast64_t ops_completed;
    atomic_uint_fast64_t ops_failed;
    atomic_uint_fast64_t busy_ns;
} gs__counters_t;

static inline void gs__counter_add(atomic_uint_fast64_t *c, uint64_t v)
{
    atomic_fetch_add_explicit(c, v, memory_order_relaxed);
}

#endif /* GS_CORE_COUNTERS_H */
