/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The CUDA parts of gs-bench: `--device cuda` buffers (gs_bench_cuda.c)
 * and the `gs-bench kernels` subcommand (gs_bench_kernels.c). Both files
 * are compiled only when CMake builds CUDA (GS_CUDA), which also defines
 * GS_WITH_CUDA for gs-bench; without it this header gives stubs that say
 * so, and gs_bench.c rejects --device cuda as a usage error (exit 2).
 *
 * GS_BENCH_KERNELS (set by CMake with the kernel objects) adds
 * gs_bench_kernels_main.
 *
 * Every call here that can fail prints a sentence naming the CUDA call
 * and CUDA's own words, then exits 1 (gs-bench's exit status for a run
 * that failed); nothing here talks to other ranks.
 */
#ifndef GRADSYNC_BENCH_GS_BENCH_CUDA_H
#define GRADSYNC_BENCH_GS_BENCH_CUDA_H

#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>

/* gs-bench's exit status when a GPU program finds no GPU (ctest's skip). */
#define GS_BENCH_EXIT_SKIP 77

/* The GPU a rank uses: local rank % device count. */
typedef struct gs_bench_gpu {
    int device;     /* CUDA device index */
    int ndevices;   /* devices this process sees */
    char name[256]; /* cudaDeviceProp.name */
} gs_bench_gpu_t;

#ifdef GS_WITH_CUDA

/** 1 when gs-bench was built with CUDA. */
static inline int gs_bench_cuda_built(void)
{
    return 1;
}

/**
 * Select GPU (local rank % device count) for this process; the local rank
 * comes from GS_LOCAL_RANK, LOCAL_RANK, OMPI_COMM_WORLD_LOCAL_RANK or
 * SLURM_LOCALID (0 when none is set). Returns 0 with *gpu_out filled, or
 * GS_BENCH_EXIT_SKIP after printing "no CUDA device: skipped" when the
 * runtime reports no device (no driver, no GPU). Exits 1 on other errors.
 */
int gs_bench_cuda_open(gs_bench_gpu_t *gpu_out);

/** cudaMalloc of @p bytes (at least 1), zeroed; exits 1 on failure. */
void *gs_bench_cuda_alloc(size_t bytes);

/** cudaFree; NULL is a no-op. */
void gs_bench_cuda_free(void *dev);

/** Copy @p bytes host -> device and wait for it; exits 1 on failure. */
void gs_bench_cuda_put(void *dev, const void *host, size_t bytes);

/** Copy @p bytes device -> host and wait for it; exits 1 on failure. */
void gs_bench_cuda_get(void *host, const void *dev, size_t bytes);

/** Copy @p bytes device -> device and wait for it; exits 1 on failure. */
void gs_bench_cuda_copy(void *dst, const void *src, size_t bytes);

#else /* !GS_WITH_CUDA: never called once gs_bench.c has rejected --device cuda */

static inline int gs_bench_cuda_built(void)
{
    return 0;
}

static inline void gs_bench_cuda_unbuilt(void)
{
    fprintf(stderr, "gs-bench: this gs-bench was built without CUDA (configure with "
                    "-DGS_WITH_CUDA=ON where a CUDA toolkit is installed)\n");
    exit(2);
}

static inline int gs_bench_cuda_open(gs_bench_gpu_t *gpu_out)
{
    (void)gpu_out;
    gs_bench_cuda_unbuilt();
    return 2;
}

static inline void *gs_bench_cuda_alloc(size_t bytes)
{
    (void)bytes;
    gs_bench_cuda_unbuilt();
    return NULL;
}

static inline void gs_bench_cuda_free(void *dev)
{
    (void)dev;
}

static inline void gs_bench_cuda_put(void *dev, const void *host, size_t bytes)
{
    (void)dev;
    (void)host;
    (void)bytes;
    gs_bench_cuda_unbuilt();
}

static inline void gs_bench_cuda_get(void *host, const void *dev, size_t bytes)
{
    (void)host;
    (void)dev;
    (void)bytes;
    gs_bench_cuda_unbuilt();
}

static inline void gs_bench_cuda_copy(void *dst, const void *src, size_t bytes)
{
    (void)dst;
    (void)src;
    (void)bytes;
    gs_bench_cuda_unbuilt();
}

#endif /* GS_WITH_CUDA */

#if defined(GS_WITH_CUDA) && defined(GS_BENCH_KERNELS)

/** `gs-bench kernels ...` (argv[0] is "kernels"); returns the exit status. */
int gs_bench_kernels_main(int argc, char **argv);

#else

static inline int gs_bench_kernels_main(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    fprintf(stderr, "gs-bench: kernels needs a build with CUDA and the kernels of kernels/; "
                    "this gs-bench has none\n");
    return 2;
}

#endif /* GS_BENCH_KERNELS */

#endif /* GRADSYNC_BENCH_GS_BENCH_CUDA_H */
