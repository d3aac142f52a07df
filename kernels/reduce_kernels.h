/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Host entry points of the reduction kernels (reduce.cu). Every call
 * enqueues on @p stream (a cudaStream_t; NULL is the legacy default
 * stream) and returns at once with the cudaError_t of the launch (0 on
 * success): the launch's own, whatever an earlier call left in the
 * thread's last-error slot (launch_kernels.h); nothing is synchronised. Buffers are device memory (or
 * managed); in place when dst is a or b exactly. Built only with CUDA.
 *
 * Arithmetic is reduce_math.h's, the CPU library's too: f16/bf16 are
 * reduced in f32 and rounded once to nearest even; min/max propagate NaN;
 * integer sum/prod wrap (two's complement); AVG is a sum, and the final
 * step divides once (divisor > 0), fused into the same pass.
 */
#ifndef GS_KERNELS_REDUCE_KERNELS_H
#define GS_KERNELS_REDUCE_KERNELS_H

#include <stddef.h>

#include "gradsync/types.h"

#ifdef __cplusplus
extern "C" {
#endif

/*
 * dst[i] = a[i] op b[i] for i < n, the bits of gs__reduce (AVG acts as
 * SUM). With divisor > 0 (float dtypes, SUM or AVG only): dst[i] = (a[i] +
 * b[i]) / divisor, summed and divided in f32 (f64 for f64) and rounded
 * once to the dtype; divisor 0 means no divide. dst may be a or b exactly;
 * no other overlap. Local, non-blocking, thread-safe.
 * @return 0 (cudaSuccess), nothing launched when n == 0;
 *         cudaErrorInvalidValue, nothing launched, for an unknown dtype or
 *         op, AVG on an integer dtype, a bitwise op (BAND, BOR, BXOR) on a
 *         float dtype, divisor < 0, divisor > 0 with an
 *         integer dtype or an op other than SUM/AVG, or a NULL buffer;
 *         else the launch's error.
 */
int gs_k_reduce(void *dst, const void *a, const void *b, size_t n, gs_dtype_t dtype, gs_op_t op,
                int divisor, void *stream);

/*
 * buf[i] = buf[i] / divisor for a float dtype, divided in f32 (f64 for
 * f64) and rounded once: the bits of gs__reduce_scale. divisor 0 and 1
 * leave buf as it is (nothing launched). Local, non-blocking, thread-safe.
 * @return 0 (cudaSuccess) when done or nothing to do;
 *         cudaErrorInvalidValue, nothing launched, for a non-float dtype or
 *         a NULL buffer with n > 0; else the launch's error.
 */
int gs_k_scale(void *buf, size_t n, gs_dtype_t dtype, int divisor, void *stream);

/* buf[i] = buf[i] * m for n f32 values (the compressed all-reduce's
 * average: a multiply by 1/n, as on the CPU). */
int gs_k_mul_f32(float *buf, size_t n, float m, void *stream);

#ifdef __cplusplus
}
#endif

#endif /* GS_KERNELS_REDUCE_KERNELS_H */
