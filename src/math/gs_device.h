/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The portability layer of the kernel sources: the same kernel body
 * compiles with nvcc (one CUDA thread per gs__kthread_t) and with the C
 * compiler (the CPU runs the grid as loops, block by block, thread by
 * thread), so the unit tests run the real kernel sources on machines
 * without a GPU. It holds no arithmetic: that lives in reduce_math.h and
 * codec_math.h, which the CPU library code includes too.
 *
 * Conventions for kernel bodies (kernels/ *_body.h):
 * - A body is a GS_KFN function whose first argument is a gs__kthread_t.
 *   It never reads blockIdx/threadIdx itself, so it means the same on
 *   both sides. The .cu file wraps it in a __global__ that passes
 *   gs_kthread_here(); the CPU runner is GS_CPU_GRID below.
 * - A body that needs a barrier (__syncthreads) is split into phases at
 *   every barrier: phase k of every thread of a block runs before phase
 *   k + 1 of any (GS_CPU_GRID_PHASES on the CPU; the wrapper calls the
 *   phases with __syncthreads() between them on the GPU). Per-block
 *   shared memory is a pointer argument ("smem"), __shared__ storage on
 *   the GPU and a buffer on the CPU.
 * - Reductions across threads (sums, maxima) are written as explicit
 *   trees over shared memory in a fixed order, never as warp shuffles or
 *   atomics whose order the hardware picks, so that the CPU build gives
 *   the same bits.
 * - No C++ in bodies (they compile as C11); no templates; types from
 *   <stdint.h>.
 */
#ifndef GS_MATH_GS_DEVICE_H
#define GS_MATH_GS_DEVICE_H

#include <stddef.h>
#include <stdint.h>

#if defined(__CUDACC__)
/* A function usable from kernels and from host code. */
#define GS_KFN static __host__ __device__ __forceinline__
#else
#define GS_KFN static inline
#endif

/* One thread of a one-dimensional grid. */
typedef struct gs__kthread {
    size_t block;      /* blockIdx.x */
    size_t nblocks;    /* gridDim.x */
    unsigned thread;   /* threadIdx.x */
    unsigned nthreads; /* blockDim.x */
} gs__kthread_t;

GS_KFN gs__kthread_t gs_kthread(size_t block, size_t nblocks, unsigned thread, unsigned nthreads)
{
    gs__kthread_t t;

    t.block = block;
    t.nblocks = nblocks;
    t.thread = thread;
    t.nthreads = nthreads;
    return t;
}

#if defined(__CUDACC__)
/* The calling CUDA thread (device code only; declared in both nvcc passes
 * so that __global__ wrappers compile in the host pass too). */
static __device__ __forceinline__ gs__kthread_t gs_kthread_here(void)
{
    return gs_kthread(blockIdx.x, gridDim.x, threadIdx.x, blockDim.x);
}
#endif

/* Index of the thread in the whole grid, and the stride of a grid-stride loop. */
GS_KFN size_t gs_kthread_gid(gs__kthread_t t)
{
    return t.block * (size_t)t.nthreads + t.thread;
}

GS_KFN size_t gs_kthread_gstride(gs__kthread_t t)
{
    return t.nblocks * (size_t)t.nthreads;
}

/* CPU runner: body(thread, args...) for every block and thread, in order. */
#define GS_CPU_GRID(_nblocks, _nthreads, _body, ...)                                               \
    do {                                                                                           \
        for (size_t gs_b_ = 0; gs_b_ < (size_t)(_nblocks); gs_b_++) {                              \
            for (unsigned gs_t_ = 0; gs_t_ < (unsigned)(_nthreads); gs_t_++) {                     \
                _body(gs_kthread(gs_b_, (size_t)(_nblocks), gs_t_, (unsigned)(_nthreads)),         \
                      __VA_ARGS__);                                                                \
            }                                                                                      \
        }                                                                                          \
    } while (0)

/* CPU runner of a body split at barriers: _phase(thread, phase, args...)
 * for phase 0 .. _nphases - 1, every thread of a block finishing a phase
 * before any starts the next. */
#define GS_CPU_GRID_PHASES(_nblocks, _nthreads, _nphases, _phase, ...)                             \
    do {                                                                                           \
        for (size_t gs_b_ = 0; gs_b_ < (size_t)(_nblocks); gs_b_++) {                              \
            for (int gs_p_ = 0; gs_p_ < (_nphases); gs_p_++) {                                     \
                for (unsigned gs_t_ = 0; gs_t_ < (unsigned)(_nthreads); gs_t_++) {                 \
                    _phase(gs_kthread(gs_b_, (size_t)(_nblocks), gs_t_, (unsigned)(_nthreads)),    \
                           gs_p_, __VA_ARGS__);                                                    \
                }                                                                                  \
            }                                                                                      \
        }                                                                                          \
    } while (0)

#endif /* GS_MATH_GS_DEVICE_H */
