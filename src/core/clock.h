/* SPDX-License-Identifier: Apache-2.0 */
/* Monotonic time in nanoseconds, for deadlines. */
#ifndef GS_CORE_CLOCK_H
#define GS_CORE_CLOCK_H

#include <stdint.h>
#include <time.h>

static inline uint64_t gs__now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static inline uint64_t gs__deadline_after_ms(int64_t ms)
{
    return gs__now_ns() + (uint64_t)ms * 1000000ull;
}

#endif /* GS_CORE_CLOCK_H */
