/* SPDX-License-Identifier: Apache-2.0 */
/*
 * `gs-bench --device cuda`: the GPU a rank uses and its buffers, through
 * the CUDA runtime (compiled only in CUDA builds; gs_bench_cuda.h). The
 * benchmark keeps its patterns and checks on the host and mirrors them
 * into cudaMalloc'd buffers here; gradsync itself finds out that the
 * buffers live on the device. Nothing here is timed: every copy waits
 * for its end, so the timed calls start with an idle device.
 */
#include "gs_bench_cuda.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime_api.h>

/* Print what failed and exit 1 (gs-bench's status for a failed run). */
static void cuda_check(cudaError_t err, const char *what)
{
    if (err != cudaSuccess) {
        fprintf(stderr, "gs-bench: %s failed: %s (%s)\n", what, cudaGetErrorString(err),
                cudaGetErrorName(err));
        fflush(NULL);
        exit(1);
    }
}

/* The rank among this host's ranks, from the launchers' variables. */
static int local_rank(void)
{
    static const char *const names[] = {"GS_LOCAL_RANK", "LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_RANK",
                                        "SLURM_LOCALID"};

    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
        const char *v = getenv(names[i]);
        char *end = NULL;
        long r;

        if ((v == NULL) || (*v == '\0')) {
            continue;
        }
        r = strtol(v, &end, 10);
        if ((end != v) && (*end == '\0') && (r >= 0) && (r < 1000000)) {
            return (int)r;
        }
    }
    return 0;
}

int gs_bench_cuda_open(gs_bench_gpu_t *gpu_out)
{
    struct cudaDeviceProp prop;
    int n = 0;
    const cudaError_t err = cudaGetDeviceCount(&n);

    if ((err != cudaSuccess) || (n <= 0)) {
        printf("no CUDA device: skipped (cudaGetDeviceCount: %s)\n",
               (err != cudaSuccess) ? cudaGetErrorString(err) : "0 devices");
        fflush(NULL);
        return GS_BENCH_EXIT_SKIP;
    }
    memset(gpu_out, 0, sizeof(*gpu_out));
    gpu_out->ndevices = n;
    gpu_out->device = local_rank() % n;
    cuda_check(cudaSetDevice(gpu_out->device), "cudaSetDevice");
    cuda_check(cudaGetDeviceProperties(&prop, gpu_out->device), "cudaGetDeviceProperties");
    snprintf(gpu_out->name, sizeof(gpu_out->name), "%s", prop.name);
    return 0;
}

void *gs_bench_cuda_alloc(size_t bytes)
{
    void *p = NULL;
    char what[96];

    snprintf(what, sizeof(what), "cudaMalloc (%zu bytes)", bytes);
    cuda_check(cudaMalloc(&p, (bytes > 0) ? bytes : 1), what);
    cuda_check(cudaMemset(p, 0, (bytes > 0) ? bytes : 1), "cudaMemset");
    cuda_check(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
    return p;
}

void gs_bench_cuda_free(void *dev)
{
    if (dev != NULL) {
        cuda_check(cudaFree(dev), "cudaFree");
    }
}

void gs_bench_cuda_put(void *dev, const void *host, size_t bytes)
{
    if (bytes > 0) {
        cuda_check(cudaMemcpy(dev, host, bytes, cudaMemcpyHostToDevice),
                   "cudaMemcpy (host to device)");
    }
}

void gs_bench_cuda_get(void *host, const void *dev, size_t bytes)
{
    if (bytes > 0) {
        cuda_check(cudaMemcpy(host, dev, bytes, cudaMemcpyDeviceToHost),
                   "cudaMemcpy (device to host)");
    }
}

void gs_bench_cuda_copy(void *dst, const void *src, size_t bytes)
{
    if (bytes > 0) {
        /* NOTE: a device-to-device cudaMemcpy may return before the copy
         * ends; the synchronise makes the next timed call start clean. */
        cuda_check(cudaMemcpy(dst, src, bytes, cudaMemcpyDeviceToDevice),
                   "cudaMemcpy (device to device)");
        cuda_check(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
    }
}
