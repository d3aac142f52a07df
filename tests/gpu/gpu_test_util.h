/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Helpers shared by the GPU test programs of tests/gpu (CUDA builds
 * only): the skip when no device is present (exit 77, ctest's
 * SKIP_RETURN_CODE), a CUDA check that ends the program (a failed CUDA
 * call usually leaves the context unusable, so nothing after it would
 * mean anything), a failure counter that lets a test report every
 * mismatch before it exits 1, and a deterministic PRNG.
 */
#ifndef GS_TESTS_GPU_GPU_TEST_UTIL_H
#define GS_TESTS_GPU_GPU_TEST_UTIL_H

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime_api.h>

#define GT_EXIT_SKIP 77
/* Failures printed in full; later ones are only counted. */
#define GT_MAX_PRINTED 40

static long gt_failures;
static long gt_checks;

/* Exit 77 with a message unless the CUDA runtime sees at least one device. */
static inline void gt_skip_without_device(const char *prog)
{
    int n = 0;
    const cudaError_t err = cudaGetDeviceCount(&n);

    if ((err != cudaSuccess) || (n <= 0)) {
        printf("%s: no CUDA device: skipped (cudaGetDeviceCount: %s)\n", prog,
               (err != cudaSuccess) ? cudaGetErrorString(err) : "0 devices");
        fflush(NULL);
        exit(GT_EXIT_SKIP);
    }
}

static inline void gt_cuda_check(cudaError_t err, const char *what, const char *file, int line)
{
    if (err != cudaSuccess) {
        fprintf(stderr, "%s:%d: %s failed: %s (%s)\n", file, line, what, cudaGetErrorString(err),
                cudaGetErrorName(err));
        fflush(NULL);
        exit(1);
    }
}

/* A CUDA runtime call that must succeed; otherwise the program ends (exit 1). */
#define GT_CUDA(_call) gt_cuda_check((cudaError_t)(_call), #_call, __FILE__, __LINE__)

/* Record one check; print the first GT_MAX_PRINTED failures. Returns ok. */
static inline int gt_check(int ok, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static inline int gt_check(int ok, const char *fmt, ...)
{
    va_list ap;

    gt_checks++;
    if (ok) {
        return 1;
    }
    /* GPUTEST_VERBOSE=1 prints every failure (not GS_*: the library warns
     * about GS_ variables it does not know). */
    if ((gt_failures++ < GT_MAX_PRINTED) || (getenv("GPUTEST_VERBOSE") != NULL)) {
        fprintf(stderr, "FAIL: ");
        va_start(ap, fmt);
        vfprintf(stderr, fmt, ap);
        va_end(ap);
        fprintf(stderr, "\n");
    } else if (gt_failures == GT_MAX_PRINTED + 1) {
        fprintf(stderr, "FAIL: (further failures are counted, not printed)\n");
    }
    return 0;
}

/* xorshift64*: deterministic, so a failure reproduces. */
static inline uint64_t gt_rand(uint64_t *state)
{
    uint64_t x = *state;

    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    *state = x;
    return x * 0x2545f4914f6cdd1dull;
}

/* The rank among this host's ranks (gsrun and torchrun set LOCAL_RANK). */
static inline int gt_local_rank(void)
{
    const char *v = getenv("GS_LOCAL_RANK");

    if ((v == NULL) || (*v == '\0')) {
        v = getenv("LOCAL_RANK");
    }
    return ((v != NULL) && (*v != '\0')) ? atoi(v) : 0;
}

#endif /* GS_TESTS_GPU_GPU_TEST_UTIL_H */
