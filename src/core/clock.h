/* SPDX-License-Identifier: Apache-2.0 */
/* Monotonic time in nanoseconds, for deadlines. */
#ifndef GS_CORE_CLOCK_H
#define GS_CORE_CLOCK_H

#include <sched.h>
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

/* Milliseconds from @p now_ns until @p deadline_ns, rounded up (a poll()
 * timeout that does not wake early), 0 once it has passed, at most INT_MAX. */
static inline int gs__ms_until(uint64_t deadline_ns, uint64_t now_ns)
{
    uint64_t ms;

    if (deadline_ns <= now_ns) {
        return 0;
    }
    ms = (deadline_ns - now_ns + 999999u) / 1000000u;
    return (ms > 2147483647u) ? 2147483647 : (int)ms;
}

/* Between two polls of something that will finish on its own (a device
 * event, an NCCL call): yield for the first 32 (work of a few tens of
 * microseconds ends without a sleep), then sleep 1 us doubling every 16
 * polls up to 128 us, so that a long wait costs a fraction of a core. */
static inline void gs__poll_pause(unsigned polls)
{
    struct timespec ts;
    unsigned shift;

    if (polls < 32) {
        (void)sched_yield();
        return;
    }
    shift = (polls - 32) / 16;
    shift = (shift > 7) ? 7 : shift;
    ts.tv_sec = 0;
    ts.tv_nsec = 1000L << shift;
    (void)nanosleep(&ts, NULL);
}

#endif /* GS_CORE_CLOCK_H */
