/* SPDX-License-Identifier: Apache-2.0 */
/*
 * tc_clock.h: the monotonic clock of the tests and the benchmarks, the one
 * definition of their now_s. Header-only and plain C that C++ also accepts
 * (bench/compare/gloo_bench.cc includes it), with nothing of gradsync, so
 * that the comparison programs built against MPI or Gloo alone can use it.
 * tests/common/ is on the include path of every program that does
 * (target_include_directories in its CMakeLists.txt).
 */
#ifndef GS_TESTS_COMMON_TC_CLOCK_H
#define GS_TESTS_COMMON_TC_CLOCK_H

#include <time.h>

/* Seconds on CLOCK_MONOTONIC, for durations inside one process. */
static inline double tc_now_s(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* The same clock in milliseconds. */
static inline double tc_now_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

#endif /* GS_TESTS_COMMON_TC_CLOCK_H */
