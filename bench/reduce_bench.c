/* SPDX-License-Identifier: Apache-2.0 */
/*
 * reduce-bench: how close the CPU reduction (gs__reduce, the inner loop of
 * every host all-reduce) runs to memory bandwidth. For f32, bf16 and f16 it
 * sums two buffers into a third, 64 MiB each by default (well outside any
 * cache), and prints the median over 20 runs of 3 * n * elemsize bytes
 * moved per reduce (two reads, one write), next to the plain C path
 * (gs__reduce_generic) and memcpy on the same buffers (2 * bytes moved).
 * It is not a correctness test (test_reduce is) and does not time
 * communication (gs-bench does).
 *
 * Usage: reduce-bench [MiB per buffer (default 64)] [runs (default 20)]
 */
#include "core/reduce_cpu.h"

#include "core/dtype.h"
#include "tc_clock.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define BENCH_WARMUP_RUNS 2
#define BENCH_MAX_RUNS 1000

typedef enum { BENCH_REDUCE, BENCH_REDUCE_GENERIC, BENCH_MEMCPY } bench_kind_t;

static int cmp_double(const void *x, const void *y)
{
    const double a = *(const double *)x, b = *(const double *)y;

    return (a > b) - (a < b);
}

/* Median seconds of one call of @p kind over @p runs timed runs. */
static double time_median(bench_kind_t kind, void *d, const void *a, const void *b, size_t n,
                          gs_dtype_t dt, int runs, double *times)
{
    const size_t bytes = n * gs__dtype_size(dt);
    int r;

    for (r = -BENCH_WARMUP_RUNS; r < runs; r++) {
        const double t0 = tc_now_s();

        switch (kind) {
        case BENCH_REDUCE:
            gs__reduce(d, a, b, n, dt, GS_OP_SUM);
            break;
        case BENCH_REDUCE_GENERIC:
            gs__reduce_generic(d, a, b, n, dt, GS_OP_SUM);
            break;
        default:
            memcpy(d, a, bytes);
            break;
        }
        if (r >= 0) {
            times[r] = tc_now_s() - t0;
        }
    }
    qsort(times, (size_t)runs, sizeof(double), cmp_double);
    return times[runs / 2];
}

/* Small values whose sums stay finite and normal in every type. */
static void fill(void *buf, size_t n, gs_dtype_t dt, float base)
{
    size_t i;

    for (i = 0; i < n; i++) {
        const float v = base + (float)(i % 251) * 0.25f;

        if (dt == GS_DTYPE_F32) {
            ((float *)buf)[i] = v;
        } else if (dt == GS_DTYPE_F16) {
            ((uint16_t *)buf)[i] = gs__f32_to_f16(v);
        } else {
            ((uint16_t *)buf)[i] = gs__f32_to_bf16(v);
        }
    }
}

int main(int argc, char **argv)
{
    static const gs_dtype_t dtypes[] = {GS_DTYPE_F32, GS_DTYPE_BF16, GS_DTYPE_F16};
    long mib = 64, runs = 20;
    size_t bytes, t;
    unsigned char *a, *b, *d;
    double *times;
    int rc = 0;

    if (argc > 1) {
        mib = strtol(argv[1], NULL, 10);
    }
    if (argc > 2) {
        runs = strtol(argv[2], NULL, 10);
    }
    if ((mib < 1) || (mib > 4096) || (runs < 1) || (runs > BENCH_MAX_RUNS)) {
        fprintf(stderr, "usage: %s [MiB per buffer 1..4096] [runs 1..%d]\n", argv[0],
                BENCH_MAX_RUNS);
        return 2;
    }
    bytes = (size_t)mib << 20;
    a = aligned_alloc(64, bytes);
    b = aligned_alloc(64, bytes);
    d = aligned_alloc(64, bytes);
    times = malloc((size_t)runs * sizeof(double));
    if ((a == NULL) || (b == NULL) || (d == NULL) || (times == NULL)) {
        fprintf(stderr, "reduce-bench: cannot allocate 3 x %ld MiB\n", mib);
        rc = 1;
        goto out;
    }
    memset(d, 0, bytes); /* fault the pages in before timing */

    printf("# reduce-bench: op sum, %ld MiB per buffer, median of %ld runs, isa %s\n", mib, runs,
           gs__reduce_isa());
    printf("# GB/s counts 3*n*elemsize bytes per reduce and 2*bytes per memcpy\n");
    printf("%-6s %12s %14s %14s %12s %8s\n", "dtype", "count", "reduce GB/s", "generic GB/s",
           "memcpy GB/s", "ratio");
    for (t = 0; t < sizeof(dtypes) / sizeof(dtypes[0]); t++) {
        const gs_dtype_t dt = dtypes[t];
        const size_t n = bytes / gs__dtype_size(dt);
        double t_red, t_gen, t_cpy;

        fill(a, n, dt, 1.0f);
        fill(b, n, dt, 2.0f);
        t_red = time_median(BENCH_REDUCE, d, a, b, n, dt, (int)runs, times);
        t_gen = time_median(BENCH_REDUCE_GENERIC, d, a, b, n, dt, (int)runs, times);
        t_cpy = time_median(BENCH_MEMCPY, d, a, b, n, dt, (int)runs, times);
        printf("%-6s %12zu %14.2f %14.2f %12.2f %8.2f\n", gs__dtype_name(dt), n,
               3.0 * (double)bytes / t_red * 1e-9, 3.0 * (double)bytes / t_gen * 1e-9,
               2.0 * (double)bytes / t_cpy * 1e-9, (3.0 * t_cpy) / (2.0 * t_red));
    }

out:
    free(times);
    free(d);
    free(b);
    free(a);
    return rc;
}
