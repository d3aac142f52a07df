/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The reduction kernels and their host launchers (reduce_kernels.h). The
 * kernels are thin __global__ wrappers around reduce_body.h, which the
 * unit tests also compile as C and run on the CPU; all arithmetic is
 * reduce_math.h's. Launchers check their arguments, launch at most one
 * kernel on the caller's stream and never synchronise; they allocate
 * nothing and keep no state, so any thread may call them. Each launch is
 * checked by its own result (gs_k_launch, launch_kernels.h), never by
 * cudaGetLastError().
 */
#include "reduce_kernels.h"

#include "launch_kernels.h"
#include "reduce_body.h"

#include <cuda_runtime.h>

/* Threads per block, and the most blocks a launch uses: the loops are
 * grid-stride, so 1024 x 256 threads fill any current GPU and larger
 * buffers take more turns of the loop. */
#define GS_KRED_THREADS 256u
#define GS_KRED_MAX_BLOCKS 1024u

static __global__ void __launch_bounds__(GS_KRED_THREADS)
    gs_kred_reduce_kernel(void *dst, const void *a, const void *b, size_t n, gs_dtype_t dtype,
                          gs_op_t op, int divisor)
{
    gs_kred_reduce(gs_kthread_here(), dst, a, b, n, dtype, op, divisor);
}

static __global__ void __launch_bounds__(GS_KRED_THREADS)
    gs_kred_scale_kernel(void *buf, size_t n, gs_dtype_t dtype, int divisor)
{
    gs_kred_scale(gs_kthread_here(), buf, n, dtype, divisor);
}

static __global__ void __launch_bounds__(GS_KRED_THREADS)
    gs_kred_mul_kernel(float *buf, size_t n, float m)
{
    gs_kred_mul_f32(gs_kthread_here(), buf, n, m);
}

/* Element size of a dtype, 0 when unknown (types.h's table). */
static size_t kred_dtype_size(gs_dtype_t dtype)
{
    switch (dtype) {
#define KRED_SIZE_ROW(_name, _value, _size, _str)                                                  \
    case _name:                                                                                    \
        return (_size);
        GS_DTYPE_MAP(KRED_SIZE_ROW)
#undef KRED_SIZE_ROW
    default:
        return 0;
    }
}

static bool kred_dtype_is_float(gs_dtype_t dtype)
{
    return (dtype == GS_DTYPE_F32) || (dtype == GS_DTYPE_F64) || (dtype == GS_DTYPE_F16) ||
           (dtype == GS_DTYPE_BF16);
}

/* One thread per 16-byte vector, in blocks of GS_KRED_THREADS, capped. */
static unsigned kred_grid(size_t n, size_t esize)
{
    const size_t lanes = GS_KRED_VEC_BYTES / esize;
    const size_t nvec = (n + lanes - 1) / lanes;
    const size_t blocks = (nvec + GS_KRED_THREADS - 1) / GS_KRED_THREADS;

    return (blocks < GS_KRED_MAX_BLOCKS) ? (unsigned)blocks : GS_KRED_MAX_BLOCKS;
}

extern "C" int gs_k_reduce(void *dst, const void *a, const void *b, size_t n, gs_dtype_t dtype,
                           gs_op_t op, int divisor, void *stream)
{
    const size_t esize = kred_dtype_size(dtype);
    const int bitwise = (op == GS_OP_BAND) || (op == GS_OP_BOR) || (op == GS_OP_BXOR);

    if ((esize == 0) || ((unsigned)op >= (unsigned)GS_OP_COUNT) || (divisor < 0) ||
        ((op == GS_OP_AVG) && !kred_dtype_is_float(dtype)) ||
        (bitwise && kred_dtype_is_float(dtype))) {
        return (int)cudaErrorInvalidValue;
    }
    if ((divisor > 0) &&
        (!kred_dtype_is_float(dtype) || ((op != GS_OP_SUM) && (op != GS_OP_AVG)))) {
        return (int)cudaErrorInvalidValue;
    }
    if (n == 0) {
        return (int)cudaSuccess;
    }
    if ((dst == NULL) || (a == NULL) || (b == NULL)) {
        return (int)cudaErrorInvalidValue;
    }
    return gs_k_launch(gs_kred_reduce_kernel, kred_grid(n, esize), GS_KRED_THREADS,
                       (cudaStream_t)stream, dst, a, b, n, dtype, op, divisor);
}

extern "C" int gs_k_scale(void *buf, size_t n, gs_dtype_t dtype, int divisor, void *stream)
{
    if (!kred_dtype_is_float(dtype)) {
        return (int)cudaErrorInvalidValue;
    }
    if ((n == 0) || (divisor == 0) || (divisor == 1)) {
        return (int)cudaSuccess;
    }
    if (buf == NULL) {
        return (int)cudaErrorInvalidValue;
    }
    return gs_k_launch(gs_kred_scale_kernel, kred_grid(n, kred_dtype_size(dtype)), GS_KRED_THREADS,
                       (cudaStream_t)stream, buf, n, dtype, divisor);
}

extern "C" int gs_k_mul_f32(float *buf, size_t n, float m, void *stream)
{
    if (n == 0) {
        return (int)cudaSuccess;
    }
    if (buf == NULL) {
        return (int)cudaErrorInvalidValue;
    }
    return gs_k_launch(gs_kred_mul_kernel, kred_grid(n, sizeof(float)), GS_KRED_THREADS,
                       (cudaStream_t)stream, buf, n, m);
}
