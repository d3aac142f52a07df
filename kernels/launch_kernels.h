/* SPDX-License-Identifier: Apache-2.0 */
/*
 * How the launchers of reduce.cu and codec.cu launch a kernel and learn
 * whether the launch failed (CUDA sources only; empty for the C compiler).
 *
 * Why not <<< >>>: that syntax discards the launch's result, and the only
 * way left to learn it is cudaGetLastError() afterwards, which returns
 * whatever the calling thread's last-error slot holds: also an error an
 * earlier call left there, such as the cudaErrorNotReady of an event that
 * was polled before it completed (the device wait does that on every
 * call), or a failed call of the application's own. A launcher would then
 * blame its launch for it, and the device path would fail a good call with
 * "device not ready", a sticky communicator error. Clearing the slot before
 * the launch would fix that but discard the application's pending error;
 * comparing cudaPeekAtLastError() before and after cannot tell two equal
 * codes apart.
 *
 * cudaLaunchKernelEx returns the launch's own status, checks the
 * arguments against the kernel's parameter types at compile time, and
 * leaves the slot alone when the launch succeeds. A failed launch has also
 * written its error into the slot: that one is taken back (cleared when the
 * slot still holds it), since the launcher reports it by its return value.
 * A sticky error (the context is lost) cannot be cleared and is returned
 * by every later call anyway. Needs CUDA 12.0 (cudaLaunchKernelEx).
 */
#ifndef GS_KERNELS_LAUNCH_KERNELS_H
#define GS_KERNELS_LAUNCH_KERNELS_H

#ifdef __CUDACC__

#include <cuda_runtime.h>

#include <utility>

#if CUDART_VERSION < 12000
#error "gradsync's kernels need CUDA 12.0 or newer (cudaLaunchKernelEx)"
#endif

/* Launch @p kernel on @p stream with @p grid blocks of @p block threads and
 * no dynamic shared memory; returns the launch's cudaError_t as an int. */
template <typename... Params, typename... Args>
static inline int gs_k_launch(void (*kernel)(Params...), dim3 grid, dim3 block, cudaStream_t stream,
                              Args &&...args)
{
    cudaLaunchConfig_t cfg = {};
    cudaError_t err;

    cfg.gridDim = grid;
    cfg.blockDim = block;
    cfg.dynamicSmemBytes = 0;
    cfg.stream = stream;
    err = cudaLaunchKernelEx(&cfg, kernel, std::forward<Args>(args)...);
    if ((err != cudaSuccess) && (cudaPeekAtLastError() == err)) {
        (void)cudaGetLastError();
    }
    return (int)err;
}

#endif /* __CUDACC__ */

#endif /* GS_KERNELS_LAUNCH_KERNELS_H */
