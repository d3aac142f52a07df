/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The bodies of the reduction kernels, written once for nvcc and the C
 * compiler (gs_device.h): reduce.cu wraps them in __global__ functions,
 * and tests/unit/test_kernel_reduce.c runs the same source through
 * GS_CPU_GRID and compares it bit for bit with the CPU library. The
 * per-element arithmetic is reduce_math.h's; this file only arranges the
 * memory accesses.
 *
 * Every body is a grid-stride loop. The bulk of a buffer moves in 16-byte
 * vectors (4 f32, 2 f64, 8 f16/bf16, 16 i8/u8, 4 i32, 2 i64; one 128-bit
 * load or store per vector on the GPU) when dst, a and b share the same
 * offset within 16 bytes; the unaligned head and the tail, or the whole
 * buffer when the offsets differ, go element by element. Each element is
 * computed by exactly one thread, whatever the grid, so the result never
 * depends on the grid shape. The switch over dtype and op sits outside
 * the loops: every loop below is instantiated with its op as a constant.
 * Nothing here validates arguments; the launchers in reduce.cu do.
 */
#ifndef GS_KERNELS_REDUCE_BODY_H
#define GS_KERNELS_REDUCE_BODY_H

#include <stddef.h>
#include <stdint.h>

#include "gradsync/types.h"
#include "math/gs_device.h"
#include "math/half_math.h"
#include "math/reduce_math.h"

#if !defined(__CUDA_ARCH__)
#include <string.h>
#endif

#if defined(__cplusplus)
#define GS_KRED_ALIGN16 alignas(16)
#else
#define GS_KRED_ALIGN16 _Alignas(16)
#endif

/* Bytes per vector access. */
#define GS_KRED_VEC_BYTES 16u

/* One 16-byte vector of each element type, aligned so that nvcc moves it
 * with a single 128-bit access. */
typedef struct {
    GS_KRED_ALIGN16 float v[4];
} gs__kred_vf32_t;

typedef struct {
    GS_KRED_ALIGN16 double v[2];
} gs__kred_vf64_t;

typedef struct {
    GS_KRED_ALIGN16 uint16_t v[8]; /* f16 or bf16 bits */
} gs__kred_vu16_t;

typedef struct {
    GS_KRED_ALIGN16 int8_t v[16];
} gs__kred_vi8_t;

typedef struct {
    GS_KRED_ALIGN16 uint8_t v[16];
} gs__kred_vu8_t;

typedef struct {
    GS_KRED_ALIGN16 int32_t v[4];
} gs__kred_vi32_t;

typedef struct {
    GS_KRED_ALIGN16 int64_t v[2];
} gs__kred_vi64_t;

/* Copy one 16-byte vector; both pointers are 16-byte aligned. */
GS_KFN void gs_kred_vcopy(void *dst, const void *src)
{
#if defined(__CUDA_ARCH__)
    *(uint4 *)dst = *(const uint4 *)src;
#else
    memcpy(dst, src, GS_KRED_VEC_BYTES);
#endif
}

/*
 * How a buffer of n elements splits: elements [0, head) one by one, then
 * nvec vectors from head, then elements [tail, n) one by one.
 */
typedef struct {
    size_t head;
    size_t nvec;
    size_t tail;
    size_t n;
} gs__kred_span_t;

/* The split for dst, a and b of n elements of esize bytes. Without a
 * common offset within 16 bytes (or with elements not aligned to their
 * size) there is no vector part. */
GS_KFN gs__kred_span_t gs_kred_span(const void *dst, const void *a, const void *b, size_t n,
                                    size_t esize)
{
    const uintptr_t off = (uintptr_t)dst & (GS_KRED_VEC_BYTES - 1u);
    const size_t lanes = GS_KRED_VEC_BYTES / esize;
    gs__kred_span_t s;

    s.n = n;
    s.head = n;
    s.nvec = 0;
    if ((((uintptr_t)a & (GS_KRED_VEC_BYTES - 1u)) == off) &&
        (((uintptr_t)b & (GS_KRED_VEC_BYTES - 1u)) == off) && ((off % esize) == 0)) {
        s.head = ((GS_KRED_VEC_BYTES - off) & (GS_KRED_VEC_BYTES - 1u)) / esize;
        if (s.head > n) {
            s.head = n;
        }
        s.nvec = (n - s.head) / lanes;
    }
    s.tail = s.head + s.nvec * lanes;
    return s;
}

/* ---------------------------------------------------------------------- */
/* One element: op, or (op == GS_OP_AVG here) the fused sum and divide    */
/* ---------------------------------------------------------------------- */

/* In the loops below GS_OP_AVG means "sum, then divide by divisor"; a plain
 * AVG step without a divisor arrives as GS_OP_SUM (gs_kred_reduce). */
GS_KFN float gs_kred_f32(float x, float y, gs_op_t op, float divisor)
{
    return (op == GS_OP_AVG) ? gs_km_avg_f32(x, y, divisor) : gs_km_op_f32(x, y, op);
}

GS_KFN double gs_kred_f64(double x, double y, gs_op_t op, double divisor)
{
    return (op == GS_OP_AVG) ? gs_km_avg_f64(x, y, divisor) : gs_km_op_f64(x, y, op);
}

GS_KFN uint16_t gs_kred_f16(uint16_t x, uint16_t y, gs_op_t op, float divisor)
{
    return (op == GS_OP_AVG) ? gs_km_avg_f16(x, y, divisor) : gs_km_op_f16(x, y, op);
}

GS_KFN uint16_t gs_kred_bf16(uint16_t x, uint16_t y, gs_op_t op, float divisor)
{
    return (op == GS_OP_AVG) ? gs_km_avg_bf16(x, y, divisor) : gs_km_op_bf16(x, y, op);
}

/* ---------------------------------------------------------------------- */
/* Loops, one per element type                                            */
/* ---------------------------------------------------------------------- */

GS_KFN void gs_kred_loop_f32(gs__kthread_t t, gs__kred_span_t s, float *d, const float *a,
                             const float *b, gs_op_t op, float divisor)
{
    const size_t gid = gs_kthread_gid(t);
    const size_t stride = gs_kthread_gstride(t);
    size_t i;

    for (i = gid; i < s.head; i += stride) {
        d[i] = gs_kred_f32(a[i], b[i], op, divisor);
    }
    for (i = gid; i < s.nvec; i += stride) {
        const size_t e = s.head + i * 4u;
        gs__kred_vf32_t va, vb, vd;
        unsigned k;

        gs_kred_vcopy(&va, a + e);
        gs_kred_vcopy(&vb, b + e);
        for (k = 0; k < 4u; k++) {
            vd.v[k] = gs_kred_f32(va.v[k], vb.v[k], op, divisor);
        }
        gs_kred_vcopy(d + e, &vd);
    }
    for (i = s.tail + gid; i < s.n; i += stride) {
        d[i] = gs_kred_f32(a[i], b[i], op, divisor);
    }
}

GS_KFN void gs_kred_loop_f64(gs__kthread_t t, gs__kred_span_t s, double *d, const double *a,
                             const double *b, gs_op_t op, double divisor)
{
    const size_t gid = gs_kthread_gid(t);
    const size_t stride = gs_kthread_gstride(t);
    size_t i;

    for (i = gid; i < s.head; i += stride) {
        d[i] = gs_kred_f64(a[i], b[i], op, divisor);
    }
    for (i = gid; i < s.nvec; i += stride) {
        const size_t e = s.head + i * 2u;
        gs__kred_vf64_t va, vb, vd;
        unsigned k;

        gs_kred_vcopy(&va, a + e);
        gs_kred_vcopy(&vb, b + e);
        for (k = 0; k < 2u; k++) {
            vd.v[k] = gs_kred_f64(va.v[k], vb.v[k], op, divisor);
        }
        gs_kred_vcopy(d + e, &vd);
    }
    for (i = s.tail + gid; i < s.n; i += stride) {
        d[i] = gs_kred_f64(a[i], b[i], op, divisor);
    }
}

GS_KFN void gs_kred_loop_f16(gs__kthread_t t, gs__kred_span_t s, uint16_t *d, const uint16_t *a,
                             const uint16_t *b, gs_op_t op, float divisor)
{
    const size_t gid = gs_kthread_gid(t);
    const size_t stride = gs_kthread_gstride(t);
    size_t i;

    for (i = gid; i < s.head; i += stride) {
        d[i] = gs_kred_f16(a[i], b[i], op, divisor);
    }
    for (i = gid; i < s.nvec; i += stride) {
        const size_t e = s.head + i * 8u;
        gs__kred_vu16_t va, vb, vd;
        unsigned k;

        gs_kred_vcopy(&va, a + e);
        gs_kred_vcopy(&vb, b + e);
        for (k = 0; k < 8u; k++) {
            vd.v[k] = gs_kred_f16(va.v[k], vb.v[k], op, divisor);
        }
        gs_kred_vcopy(d + e, &vd);
    }
    for (i = s.tail + gid; i < s.n; i += stride) {
        d[i] = gs_kred_f16(a[i], b[i], op, divisor);
    }
}

GS_KFN void gs_kred_loop_bf16(gs__kthread_t t, gs__kred_span_t s, uint16_t *d, const uint16_t *a,
                              const uint16_t *b, gs_op_t op, float divisor)
{
    const size_t gid = gs_kthread_gid(t);
    const size_t stride = gs_kthread_gstride(t);
    size_t i;

    for (i = gid; i < s.head; i += stride) {
        d[i] = gs_kred_bf16(a[i], b[i], op, divisor);
    }
    for (i = gid; i < s.nvec; i += stride) {
        const size_t e = s.head + i * 8u;
        gs__kred_vu16_t va, vb, vd;
        unsigned k;

        gs_kred_vcopy(&va, a + e);
        gs_kred_vcopy(&vb, b + e);
        for (k = 0; k < 8u; k++) {
            vd.v[k] = gs_kred_bf16(va.v[k], vb.v[k], op, divisor);
        }
        gs_kred_vcopy(d + e, &vd);
    }
    for (i = s.tail + gid; i < s.n; i += stride) {
        d[i] = gs_kred_bf16(a[i], b[i], op, divisor);
    }
}

GS_KFN void gs_kred_loop_i8(gs__kthread_t t, gs__kred_span_t s, int8_t *d, const int8_t *a,
                            const int8_t *b, gs_op_t op)
{
    const size_t gid = gs_kthread_gid(t);
    const size_t stride = gs_kthread_gstride(t);
    size_t i;

    for (i = gid; i < s.head; i += stride) {
        d[i] = gs_km_op_i8(a[i], b[i], op);
    }
    for (i = gid; i < s.nvec; i += stride) {
        const size_t e = s.head + i * 16u;
        gs__kred_vi8_t va, vb, vd;
        unsigned k;

        gs_kred_vcopy(&va, a + e);
        gs_kred_vcopy(&vb, b + e);
        for (k = 0; k < 16u; k++) {
            vd.v[k] = gs_km_op_i8(va.v[k], vb.v[k], op);
        }
        gs_kred_vcopy(d + e, &vd);
    }
    for (i = s.tail + gid; i < s.n; i += stride) {
        d[i] = gs_km_op_i8(a[i], b[i], op);
    }
}

GS_KFN void gs_kred_loop_u8(gs__kthread_t t, gs__kred_span_t s, uint8_t *d, const uint8_t *a,
                            const uint8_t *b, gs_op_t op)
{
    const size_t gid = gs_kthread_gid(t);
    const size_t stride = gs_kthread_gstride(t);
    size_t i;

    for (i = gid; i < s.head; i += stride) {
        d[i] = gs_km_op_u8(a[i], b[i], op);
    }
    for (i = gid; i < s.nvec; i += stride) {
        const size_t e = s.head + i * 16u;
        gs__kred_vu8_t va, vb, vd;
        unsigned k;

        gs_kred_vcopy(&va, a + e);
        gs_kred_vcopy(&vb, b + e);
        for (k = 0; k < 16u; k++) {
            vd.v[k] = gs_km_op_u8(va.v[k], vb.v[k], op);
        }
        gs_kred_vcopy(d + e, &vd);
    }
    for (i = s.tail + gid; i < s.n; i += stride) {
        d[i] = gs_km_op_u8(a[i], b[i], op);
    }
}

GS_KFN void gs_kred_loop_i32(gs__kthread_t t, gs__kred_span_t s, int32_t *d, const int32_t *a,
                             const int32_t *b, gs_op_t op)
{
    const size_t gid = gs_kthread_gid(t);
    const size_t stride = gs_kthread_gstride(t);
    size_t i;

    for (i = gid; i < s.head; i += stride) {
        d[i] = gs_km_op_i32(a[i], b[i], op);
    }
    for (i = gid; i < s.nvec; i += stride) {
        const size_t e = s.head + i * 4u;
        gs__kred_vi32_t va, vb, vd;
        unsigned k;

        gs_kred_vcopy(&va, a + e);
        gs_kred_vcopy(&vb, b + e);
        for (k = 0; k < 4u; k++) {
            vd.v[k] = gs_km_op_i32(va.v[k], vb.v[k], op);
        }
        gs_kred_vcopy(d + e, &vd);
    }
    for (i = s.tail + gid; i < s.n; i += stride) {
        d[i] = gs_km_op_i32(a[i], b[i], op);
    }
}

GS_KFN void gs_kred_loop_i64(gs__kthread_t t, gs__kred_span_t s, int64_t *d, const int64_t *a,
                             const int64_t *b, gs_op_t op)
{
    const size_t gid = gs_kthread_gid(t);
    const size_t stride = gs_kthread_gstride(t);
    size_t i;

    for (i = gid; i < s.head; i += stride) {
        d[i] = gs_km_op_i64(a[i], b[i], op);
    }
    for (i = gid; i < s.nvec; i += stride) {
        const size_t e = s.head + i * 2u;
        gs__kred_vi64_t va, vb, vd;
        unsigned k;

        gs_kred_vcopy(&va, a + e);
        gs_kred_vcopy(&vb, b + e);
        for (k = 0; k < 2u; k++) {
            vd.v[k] = gs_km_op_i64(va.v[k], vb.v[k], op);
        }
        gs_kred_vcopy(d + e, &vd);
    }
    for (i = s.tail + gid; i < s.n; i += stride) {
        d[i] = gs_km_op_i64(a[i], b[i], op);
    }
}

/* ---------------------------------------------------------------------- */
/* Scale loops (one buffer, in place)                                     */
/* ---------------------------------------------------------------------- */

GS_KFN void gs_kred_scale_loop_f32(gs__kthread_t t, gs__kred_span_t s, float *buf, float divisor)
{
    const size_t gid = gs_kthread_gid(t);
    const size_t stride = gs_kthread_gstride(t);
    size_t i;

    for (i = gid; i < s.head; i += stride) {
        buf[i] = gs_km_scale_f32(buf[i], divisor);
    }
    for (i = gid; i < s.nvec; i += stride) {
        const size_t e = s.head + i * 4u;
        gs__kred_vf32_t v;
        unsigned k;

        gs_kred_vcopy(&v, buf + e);
        for (k = 0; k < 4u; k++) {
            v.v[k] = gs_km_scale_f32(v.v[k], divisor);
        }
        gs_kred_vcopy(buf + e, &v);
    }
    for (i = s.tail + gid; i < s.n; i += stride) {
        buf[i] = gs_km_scale_f32(buf[i], divisor);
    }
}

/* buf[i] = buf[i] * m: the average of the compressed all-reduce, which
 * multiplies by 1/n as algo_compressed.c does (not a divide). */
GS_KFN void gs_kred_mul_loop_f32(gs__kthread_t t, gs__kred_span_t s, float *buf, float m)
{
    const size_t gid = gs_kthread_gid(t);
    const size_t stride = gs_kthread_gstride(t);
    size_t i;

    for (i = gid; i < s.head; i += stride) {
        buf[i] *= m;
    }
    for (i = gid; i < s.nvec; i += stride) {
        const size_t e = s.head + i * 4u;
        gs__kred_vf32_t v;
        unsigned k;

        gs_kred_vcopy(&v, buf + e);
        for (k = 0; k < 4u; k++) {
            v.v[k] *= m;
        }
        gs_kred_vcopy(buf + e, &v);
    }
    for (i = s.tail + gid; i < s.n; i += stride) {
        buf[i] *= m;
    }
}

GS_KFN void gs_kred_scale_loop_f64(gs__kthread_t t, gs__kred_span_t s, double *buf, double divisor)
{
    const size_t gid = gs_kthread_gid(t);
    const size_t stride = gs_kthread_gstride(t);
    size_t i;

    for (i = gid; i < s.head; i += stride) {
        buf[i] = gs_km_scale_f64(buf[i], divisor);
    }
    for (i = gid; i < s.nvec; i += stride) {
        const size_t e = s.head + i * 2u;
        gs__kred_vf64_t v;
        unsigned k;

        gs_kred_vcopy(&v, buf + e);
        for (k = 0; k < 2u; k++) {
            v.v[k] = gs_km_scale_f64(v.v[k], divisor);
        }
        gs_kred_vcopy(buf + e, &v);
    }
    for (i = s.tail + gid; i < s.n; i += stride) {
        buf[i] = gs_km_scale_f64(buf[i], divisor);
    }
}

GS_KFN void gs_kred_scale_loop_f16(gs__kthread_t t, gs__kred_span_t s, uint16_t *buf, float divisor)
{
    const size_t gid = gs_kthread_gid(t);
    const size_t stride = gs_kthread_gstride(t);
    size_t i;

    for (i = gid; i < s.head; i += stride) {
        buf[i] = gs_km_scale_f16(buf[i], divisor);
    }
    for (i = gid; i < s.nvec; i += stride) {
        const size_t e = s.head + i * 8u;
        gs__kred_vu16_t v;
        unsigned k;

        gs_kred_vcopy(&v, buf + e);
        for (k = 0; k < 8u; k++) {
            v.v[k] = gs_km_scale_f16(v.v[k], divisor);
        }
        gs_kred_vcopy(buf + e, &v);
    }
    for (i = s.tail + gid; i < s.n; i += stride) {
        buf[i] = gs_km_scale_f16(buf[i], divisor);
    }
}

GS_KFN void gs_kred_scale_loop_bf16(gs__kthread_t t, gs__kred_span_t s, uint16_t *buf,
                                    float divisor)
{
    const size_t gid = gs_kthread_gid(t);
    const size_t stride = gs_kthread_gstride(t);
    size_t i;

    for (i = gid; i < s.head; i += stride) {
        buf[i] = gs_km_scale_bf16(buf[i], divisor);
    }
    for (i = gid; i < s.nvec; i += stride) {
        const size_t e = s.head + i * 8u;
        gs__kred_vu16_t v;
        unsigned k;

        gs_kred_vcopy(&v, buf + e);
        for (k = 0; k < 8u; k++) {
            v.v[k] = gs_km_scale_bf16(v.v[k], divisor);
        }
        gs_kred_vcopy(buf + e, &v);
    }
    for (i = s.tail + gid; i < s.n; i += stride) {
        buf[i] = gs_km_scale_bf16(buf[i], divisor);
    }
}

/* ---------------------------------------------------------------------- */
/* Dispatch: one switch per dtype over the op, outside the loops          */
/* ---------------------------------------------------------------------- */

/* The op a float loop runs: GS_OP_AVG (fused divide) when divisor > 0 and
 * the op sums, else the op itself with AVG as SUM. */
GS_KFN gs_op_t gs_kred_float_op(gs_op_t op, int divisor)
{
    if ((op == GS_OP_SUM) || (op == GS_OP_AVG)) {
        return (divisor > 0) ? GS_OP_AVG : GS_OP_SUM;
    }
    return op;
}

GS_KFN void gs_kred_run_f32(gs__kthread_t t, float *d, const float *a, const float *b, size_t n,
                            gs_op_t op, int divisor)
{
    const gs__kred_span_t s = gs_kred_span(d, a, b, n, sizeof(float));

    switch (gs_kred_float_op(op, divisor)) {
    case GS_OP_AVG:
        gs_kred_loop_f32(t, s, d, a, b, GS_OP_AVG, (float)divisor);
        break;
    case GS_OP_PROD:
        gs_kred_loop_f32(t, s, d, a, b, GS_OP_PROD, 1.0f);
        break;
    case GS_OP_MIN:
        gs_kred_loop_f32(t, s, d, a, b, GS_OP_MIN, 1.0f);
        break;
    case GS_OP_MAX:
        gs_kred_loop_f32(t, s, d, a, b, GS_OP_MAX, 1.0f);
        break;
    default:
        gs_kred_loop_f32(t, s, d, a, b, GS_OP_SUM, 1.0f);
        break;
    }
}

GS_KFN void gs_kred_run_f64(gs__kthread_t t, double *d, const double *a, const double *b, size_t n,
                            gs_op_t op, int divisor)
{
    const gs__kred_span_t s = gs_kred_span(d, a, b, n, sizeof(double));

    switch (gs_kred_float_op(op, divisor)) {
    case GS_OP_AVG:
        gs_kred_loop_f64(t, s, d, a, b, GS_OP_AVG, (double)divisor);
        break;
    case GS_OP_PROD:
        gs_kred_loop_f64(t, s, d, a, b, GS_OP_PROD, 1.0);
        break;
    case GS_OP_MIN:
        gs_kred_loop_f64(t, s, d, a, b, GS_OP_MIN, 1.0);
        break;
    case GS_OP_MAX:
        gs_kred_loop_f64(t, s, d, a, b, GS_OP_MAX, 1.0);
        break;
    default:
        gs_kred_loop_f64(t, s, d, a, b, GS_OP_SUM, 1.0);
        break;
    }
}

GS_KFN void gs_kred_run_f16(gs__kthread_t t, uint16_t *d, const uint16_t *a, const uint16_t *b,
                            size_t n, gs_op_t op, int divisor)
{
    const gs__kred_span_t s = gs_kred_span(d, a, b, n, sizeof(uint16_t));

    switch (gs_kred_float_op(op, divisor)) {
    case GS_OP_AVG:
        gs_kred_loop_f16(t, s, d, a, b, GS_OP_AVG, (float)divisor);
        break;
    case GS_OP_PROD:
        gs_kred_loop_f16(t, s, d, a, b, GS_OP_PROD, 1.0f);
        break;
    case GS_OP_MIN:
        gs_kred_loop_f16(t, s, d, a, b, GS_OP_MIN, 1.0f);
        break;
    case GS_OP_MAX:
        gs_kred_loop_f16(t, s, d, a, b, GS_OP_MAX, 1.0f);
        break;
    default:
        gs_kred_loop_f16(t, s, d, a, b, GS_OP_SUM, 1.0f);
        break;
    }
}

GS_KFN void gs_kred_run_bf16(gs__kthread_t t, uint16_t *d, const uint16_t *a, const uint16_t *b,
                             size_t n, gs_op_t op, int divisor)
{
    const gs__kred_span_t s = gs_kred_span(d, a, b, n, sizeof(uint16_t));

    switch (gs_kred_float_op(op, divisor)) {
    case GS_OP_AVG:
        gs_kred_loop_bf16(t, s, d, a, b, GS_OP_AVG, (float)divisor);
        break;
    case GS_OP_PROD:
        gs_kred_loop_bf16(t, s, d, a, b, GS_OP_PROD, 1.0f);
        break;
    case GS_OP_MIN:
        gs_kred_loop_bf16(t, s, d, a, b, GS_OP_MIN, 1.0f);
        break;
    case GS_OP_MAX:
        gs_kred_loop_bf16(t, s, d, a, b, GS_OP_MAX, 1.0f);
        break;
    default:
        gs_kred_loop_bf16(t, s, d, a, b, GS_OP_SUM, 1.0f);
        break;
    }
}

GS_KFN void gs_kred_run_i8(gs__kthread_t t, int8_t *d, const int8_t *a, const int8_t *b, size_t n,
                           gs_op_t op)
{
    const gs__kred_span_t s = gs_kred_span(d, a, b, n, sizeof(int8_t));

    switch (op) {
    case GS_OP_PROD:
        gs_kred_loop_i8(t, s, d, a, b, GS_OP_PROD);
        break;
    case GS_OP_MIN:
        gs_kred_loop_i8(t, s, d, a, b, GS_OP_MIN);
        break;
    case GS_OP_MAX:
        gs_kred_loop_i8(t, s, d, a, b, GS_OP_MAX);
        break;
    case GS_OP_BAND:
        gs_kred_loop_i8(t, s, d, a, b, GS_OP_BAND);
        break;
    case GS_OP_BOR:
        gs_kred_loop_i8(t, s, d, a, b, GS_OP_BOR);
        break;
    case GS_OP_BXOR:
        gs_kred_loop_i8(t, s, d, a, b, GS_OP_BXOR);
        break;
    default:
        gs_kred_loop_i8(t, s, d, a, b, GS_OP_SUM);
        break;
    }
}

GS_KFN void gs_kred_run_u8(gs__kthread_t t, uint8_t *d, const uint8_t *a, const uint8_t *b,
                           size_t n, gs_op_t op)
{
    const gs__kred_span_t s = gs_kred_span(d, a, b, n, sizeof(uint8_t));

    switch (op) {
    case GS_OP_PROD:
        gs_kred_loop_u8(t, s, d, a, b, GS_OP_PROD);
        break;
    case GS_OP_MIN:
        gs_kred_loop_u8(t, s, d, a, b, GS_OP_MIN);
        break;
    case GS_OP_MAX:
        gs_kred_loop_u8(t, s, d, a, b, GS_OP_MAX);
        break;
    case GS_OP_BAND:
        gs_kred_loop_u8(t, s, d, a, b, GS_OP_BAND);
        break;
    case GS_OP_BOR:
        gs_kred_loop_u8(t, s, d, a, b, GS_OP_BOR);
        break;
    case GS_OP_BXOR:
        gs_kred_loop_u8(t, s, d, a, b, GS_OP_BXOR);
        break;
    default:
        gs_kred_loop_u8(t, s, d, a, b, GS_OP_SUM);
        break;
    }
}

GS_KFN void gs_kred_run_i32(gs__kthread_t t, int32_t *d, const int32_t *a, const int32_t *b,
                            size_t n, gs_op_t op)
{
    const gs__kred_span_t s = gs_kred_span(d, a, b, n, sizeof(int32_t));

    switch (op) {
    case GS_OP_PROD:
        gs_kred_loop_i32(t, s, d, a, b, GS_OP_PROD);
        break;
    case GS_OP_MIN:
        gs_kred_loop_i32(t, s, d, a, b, GS_OP_MIN);
        break;
    case GS_OP_MAX:
        gs_kred_loop_i32(t, s, d, a, b, GS_OP_MAX);
        break;
    case GS_OP_BAND:
        gs_kred_loop_i32(t, s, d, a, b, GS_OP_BAND);
        break;
    case GS_OP_BOR:
        gs_kred_loop_i32(t, s, d, a, b, GS_OP_BOR);
        break;
    case GS_OP_BXOR:
        gs_kred_loop_i32(t, s, d, a, b, GS_OP_BXOR);
        break;
    default:
        gs_kred_loop_i32(t, s, d, a, b, GS_OP_SUM);
        break;
    }
}

GS_KFN void gs_kred_run_i64(gs__kthread_t t, int64_t *d, const int64_t *a, const int64_t *b,
                            size_t n, gs_op_t op)
{
    const gs__kred_span_t s = gs_kred_span(d, a, b, n, sizeof(int64_t));

    switch (op) {
    case GS_OP_PROD:
        gs_kred_loop_i64(t, s, d, a, b, GS_OP_PROD);
        break;
    case GS_OP_MIN:
        gs_kred_loop_i64(t, s, d, a, b, GS_OP_MIN);
        break;
    case GS_OP_MAX:
        gs_kred_loop_i64(t, s, d, a, b, GS_OP_MAX);
        break;
    case GS_OP_BAND:
        gs_kred_loop_i64(t, s, d, a, b, GS_OP_BAND);
        break;
    case GS_OP_BOR:
        gs_kred_loop_i64(t, s, d, a, b, GS_OP_BOR);
        break;
    case GS_OP_BXOR:
        gs_kred_loop_i64(t, s, d, a, b, GS_OP_BXOR);
        break;
    default:
        gs_kred_loop_i64(t, s, d, a, b, GS_OP_SUM);
        break;
    }
}

/* ---------------------------------------------------------------------- */
/* The bodies                                                             */
/* ---------------------------------------------------------------------- */

/*
 * dst[i] = a[i] op b[i] for i < n, the bits of gs__reduce_generic. With
 * divisor > 0, a float dtype and op SUM or AVG: dst[i] = (a[i] + b[i]) /
 * divisor, the sum and divide in f32 (f64 for f64) and one rounding to the
 * dtype (gs_km_avg_*). dst may be a or b exactly; no other overlap. An
 * unknown dtype does nothing.
 */
GS_KFN void gs_kred_reduce(gs__kthread_t t, void *dst, const void *a, const void *b, size_t n,
                           gs_dtype_t dtype, gs_op_t op, int divisor)
{
    switch (dtype) {
    case GS_DTYPE_F32:
        gs_kred_run_f32(t, (float *)dst, (const float *)a, (const float *)b, n, op, divisor);
        break;
    case GS_DTYPE_F64:
        gs_kred_run_f64(t, (double *)dst, (const double *)a, (const double *)b, n, op, divisor);
        break;
    case GS_DTYPE_F16:
        gs_kred_run_f16(t, (uint16_t *)dst, (const uint16_t *)a, (const uint16_t *)b, n, op,
                        divisor);
        break;
    case GS_DTYPE_BF16:
        gs_kred_run_bf16(t, (uint16_t *)dst, (const uint16_t *)a, (const uint16_t *)b, n, op,
                         divisor);
        break;
    case GS_DTYPE_I8:
        gs_kred_run_i8(t, (int8_t *)dst, (const int8_t *)a, (const int8_t *)b, n, op);
        break;
    case GS_DTYPE_U8:
        gs_kred_run_u8(t, (uint8_t *)dst, (const uint8_t *)a, (const uint8_t *)b, n, op);
        break;
    case GS_DTYPE_I32:
        gs_kred_run_i32(t, (int32_t *)dst, (const int32_t *)a, (const int32_t *)b, n, op);
        break;
    case GS_DTYPE_I64:
        gs_kred_run_i64(t, (int64_t *)dst, (const int64_t *)a, (const int64_t *)b, n, op);
        break;
    default:
        break;
    }
}

/*
 * buf[i] = buf[i] / divisor for i < n and a float dtype, the bits of
 * gs__reduce_scale_generic: divisor 0 and 1 leave buf as it is, integer
 * dtypes are not touched.
 */
GS_KFN void gs_kred_scale(gs__kthread_t t, void *buf, size_t n, gs_dtype_t dtype, int divisor)
{
    if ((divisor == 0) || (divisor == 1)) {
        return;
    }
    switch (dtype) {
    case GS_DTYPE_F32:
        gs_kred_scale_loop_f32(t, gs_kred_span(buf, buf, buf, n, sizeof(float)), (float *)buf,
                               (float)divisor);
        break;
    case GS_DTYPE_F64:
        gs_kred_scale_loop_f64(t, gs_kred_span(buf, buf, buf, n, sizeof(double)), (double *)buf,
                               (double)divisor);
        break;
    case GS_DTYPE_F16:
        gs_kred_scale_loop_f16(t, gs_kred_span(buf, buf, buf, n, sizeof(uint16_t)), (uint16_t *)buf,
                               (float)divisor);
        break;
    case GS_DTYPE_BF16:
        gs_kred_scale_loop_bf16(t, gs_kred_span(buf, buf, buf, n, sizeof(uint16_t)),
                                (uint16_t *)buf, (float)divisor);
        break;
    default:
        break;
    }
}

/* buf[i] = buf[i] * m for i < n f32 values. */
GS_KFN void gs_kred_mul_f32(gs__kthread_t t, float *buf, size_t n, float m)
{
    gs_kred_mul_loop_f32(t, gs_kred_span(buf, buf, buf, n, sizeof(float)), buf, m);
}

#endif /* GS_KERNELS_REDUCE_BODY_H */
