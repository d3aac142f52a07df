/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Helpers shared by the GPU test programs of tests/gpu (CUDA builds
 * only): the skip when no device is present (exit 77, ctest's
 * SKIP_RETURN_CODE), a CUDA check that ends the program (a failed CUDA
 * call usually leaves the context unusable, so nothing after it would
 * mean anything), a failure counter that lets a test report every
 * mismatch before it exits 1, a check of the CUDA runtime's last-error
 * slot after every library call (GT_LIB, GT_KLIB), and a deterministic
 * PRNG.
 */
#ifndef GS_TESTS_GPU_GPU_TEST_UTIL_H
#define GS_TESTS_GPU_GPU_TEST_UTIL_H

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime_api.h>

#include "gradsync/status.h"

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

/*
 * After a library call the CUDA runtime's last-error slot must be clean.
 * A caller that checks its own launches with cudaGetLastError() would
 * otherwise take an error the library left there (say cudaErrorNotReady
 * from a cudaEventQuery that found its event not done yet) for its own.
 * Reads and clears the slot; a dirty one is a counted failure naming the
 * call, not the end of the program (the error may not be sticky).
 */
static inline void gt_last_error_clean(const char *call, const char *file, int line)
{
    const cudaError_t err = cudaGetLastError();

    gt_check(err == cudaSuccess,
             "%s:%d: after %s: cudaGetLastError() is %s (%s), want cudaSuccess: the call left "
             "an error in the CUDA runtime's last-error slot",
             file, line, call, cudaGetErrorName(err), cudaGetErrorString(err));
}

static inline gs_status_t gt_lib_status(gs_status_t st, const char *call, const char *file,
                                        int line)
{
    gt_last_error_clean(call, file, line);
    return st;
}

static inline int gt_lib_int(int rc, const char *call, const char *file, int line)
{
    gt_last_error_clean(call, file, line);
    return rc;
}

/* A gradsync call (its gs_status_t is the value), then the last-error check. */
#define GT_LIB(_call) gt_lib_status((_call), #_call, __FILE__, __LINE__)
/* A kernel launcher of kernels/ (its int, a cudaError_t, is the value), then the check. */
#define GT_KLIB(_call) gt_lib_int((_call), #_call, __FILE__, __LINE__)

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
