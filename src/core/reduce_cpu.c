/* SPDX-License-Identifier: Apache-2.0 */
/*
 * CPU element-wise reductions, the inner loop of every host all-reduce.
 *
 * Each dtype has one always-inline "body" (a switch over the op, one plain
 * C loop per op, written so that GCC and clang auto-vectorise it at -O3)
 * that is instantiated twice: once as a plain function (the generic path,
 * gs__reduce_generic) and once under target_clones("avx512f", "avx2",
 * "default"), so that the loader picks the widest ISA the CPU has at run
 * time (an ifunc; not under TSan). The library is never built with
 * -march=native. f16 on x86-64 uses F16C intrinsics (8 lanes per step)
 * when the CPU has AVX2 and F16C; bf16 uses integer shifts with
 * round-to-nearest-even in vectorisable C, two elements per 32-bit word.
 * On other architectures everything is the plain C path.
 *
 * Semantics (the same on every path, bit for bit except the payload of a
 * NaN produced from two NaN inputs):
 * - float min/max are IEEE 754-2019 minimum/maximum: a NaN input gives a
 *   NaN (that input, quietened by any f16/bf16 rounding), and -0 < +0;
 * - integer sum/prod wrap modulo 2^n (computed in unsigned arithmetic);
 * - f16/bf16 are widened to f32, combined, and rounded once to nearest even;
 * - GS_OP_AVG is a sum here; gs__reduce_scale() divides once at the end.
 * No restrict anywhere: dst may alias a or b exactly, and the vectoriser's
 * run-time overlap check accepts that (distance 0) and keeps the vector
 * loop. This file does not validate (dtype, op) pairs or lengths: callers do.
 */
#include "core/reduce_cpu.h"

#include "core/dtype.h"

#include <stdint.h>
#include <string.h>

#if defined(__x86_64__) && defined(__GNUC__)
#define GS_REDUCE_X86 1
#include <cpuid.h>
#include <immintrin.h>
#include <stdatomic.h>
#endif

/*
 * NOTE: ThreadSanitizer crashes at load time on ifunc resolvers (they run
 * before its runtime is up), so TSan builds use the plain C instances.
 */
#if defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define GS_REDUCE_TSAN 1
#endif
#endif
#if defined(__SANITIZE_THREAD__)
#define GS_REDUCE_TSAN 1
#endif

#if defined(GS_REDUCE_X86) && !defined(GS_REDUCE_TSAN) && defined(__has_attribute)
#if __has_attribute(target_clones)
#define GS_REDUCE_HAVE_CLONES 1
#endif
#endif
#if defined(GS_REDUCE_HAVE_CLONES)
#define GS_REDUCE_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define GS_REDUCE_CLONES
#endif

#if defined(__GNUC__)
#define GS_REDUCE_INLINE static inline __attribute__((always_inline))
#else
#define GS_REDUCE_INLINE static inline
#endif

/* ---------------------------------------------------------------------- */
/* Scalar element helpers (inlined into the loops, vectorisable)          */
/* ---------------------------------------------------------------------- */

/*
 * IEEE minimum as compare-and-select: x < y picks x; equal values (only
 * +-0 can differ) combine their bits with OR, so -0 wins; a NaN in x is
 * kept and a NaN in y falls out of the first select. Written on the bit
 * patterns so that every step maps onto a compare and a blend.
 */
GS_REDUCE_INLINE float min_f32(float x, float y)
{
    uint32_t xb, yb, rb;
    float r = (x < y) ? x : y;

    memcpy(&xb, &x, sizeof(xb));
    memcpy(&yb, &y, sizeof(yb));
    memcpy(&rb, &r, sizeof(rb));
    rb = (x == y) ? (xb | yb) : rb;
    rb = (x != x) ? xb : rb;
    memcpy(&r, &rb, sizeof(r));
    return r;
}

/* IEEE maximum: as min_f32 with AND on equality, so +0 wins. The f64
 * twins below follow the same scheme. */
GS_REDUCE_INLINE float max_f32(float x, float y)
{
    uint32_t xb, yb, rb;
    float r = (x > y) ? x : y;

    memcpy(&xb, &x, sizeof(xb));
    memcpy(&yb, &y, sizeof(yb));
    memcpy(&rb, &r, sizeof(rb));
    rb = (x == y) ? (xb & yb) : rb;
    rb = (x != x) ? xb : rb;
    memcpy(&r, &rb, sizeof(r));
    return r;
}

GS_REDUCE_INLINE double min_f64(double x, double y)
{
    uint64_t xb, yb, rb;
    double r = (x < y) ? x : y;

    memcpy(&xb, &x, sizeof(xb));
    memcpy(&yb, &y, sizeof(yb));
    memcpy(&rb, &r, sizeof(rb));
    rb = (x == y) ? (xb | yb) : rb;
    rb = (x != x) ? xb : rb;
    memcpy(&r, &rb, sizeof(r));
    return r;
}

GS_REDUCE_INLINE double max_f64(double x, double y)
{
    uint64_t xb, yb, rb;
    double r = (x > y) ? x : y;

    memcpy(&xb, &x, sizeof(xb));
    memcpy(&yb, &y, sizeof(yb));
    memcpy(&rb, &r, sizeof(rb));
    rb = (x == y) ? (xb & yb) : rb;
    rb = (x != x) ? xb : rb;
    memcpy(&r, &rb, sizeof(r));
    return r;
}

GS_REDUCE_INLINE float f32_from_bits(uint32_t u)
{
    float f;

    memcpy(&f, &u, sizeof(f));
    return f;
}

GS_REDUCE_INLINE float bf16_widen(uint16_t h)
{
    return f32_from_bits((uint32_t)h << 16);
}

/*
 * f32 -> bf16 round to nearest even, leaving the result in the top 16 bits
 * (the low 16 are garbage). A NaN only gets its quiet bit set, so rounding
 * cannot carry it into inf.
 * NOTE: the same rounding as gs__f32_to_bf16() in dtype.c, repeated here so
 * that it inlines and vectorises; test_reduce checks that the two agree.
 */
GS_REDUCE_INLINE uint32_t bf16_round_hi(float f)
{
    uint32_t u;

    memcpy(&u, &f, sizeof(u));
    return (f != f) ? (u | 0x400000u) : (u + 0x7fffu + ((u >> 16) & 1u));
}

GS_REDUCE_INLINE uint16_t bf16_round(float f)
{
    return (uint16_t)(bf16_round_hi(f) >> 16);
}

GS_REDUCE_INLINE float f32_op(float x, float y, gs_op_t op)
{
    switch (op) {
    case GS_OP_PROD:
        return x * y;
    case GS_OP_MIN:
        return min_f32(x, y);
    case GS_OP_MAX:
        return max_f32(x, y);
    default:
        return x + y;
    }
}

/*
 * Two bf16 elements in one 32-bit word: each widens to f32 with a single
 * shift or mask and narrows back in place, so the vector loop needs no
 * shuffles (about 3x faster than widening element by element). Both
 * halves get the same treatment, so byte order does not matter.
 */
GS_REDUCE_INLINE uint32_t bf16_pair_op(uint32_t wa, uint32_t wb, gs_op_t op)
{
    const float lo = f32_op(f32_from_bits(wa << 16), f32_from_bits(wb << 16), op);
    const float hi = f32_op(f32_from_bits(wa & 0xffff0000u), f32_from_bits(wb & 0xffff0000u), op);

    return (bf16_round_hi(lo) >> 16) | (bf16_round_hi(hi) & 0xffff0000u);
}

GS_REDUCE_INLINE void bf16_loop(uint16_t *d, const uint16_t *a, const uint16_t *b, size_t n,
                                gs_op_t op)
{
    const size_t pairs = n / 2;
    size_t i;

    for (i = 0; i < pairs; i++) {
        uint32_t wa, wb, wd;

        memcpy(&wa, a + 2 * i, sizeof(wa));
        memcpy(&wb, b + 2 * i, sizeof(wb));
        wd = bf16_pair_op(wa, wb, op);
        memcpy(d + 2 * i, &wd, sizeof(wd));
    }
    if ((n & 1u) != 0) {
        d[n - 1] = bf16_round(f32_op(bf16_widen(a[n - 1]), bf16_widen(b[n - 1]), op));
    }
}

/* ---------------------------------------------------------------------- */
/* Per-dtype loop bodies                                                  */
/* ---------------------------------------------------------------------- */

GS_REDUCE_INLINE double f64_op(double x, double y, gs_op_t op)
{
    switch (op) {
    case GS_OP_PROD:
        return x * y;
    case GS_OP_MIN:
        return min_f64(x, y);
    case GS_OP_MAX:
        return max_f64(x, y);
    default:
        return x + y;
    }
}

GS_REDUCE_INLINE void f32_loop(float *d, const float *a, const float *b, size_t n, gs_op_t op)
{
    size_t i;

    for (i = 0; i < n; i++) {
        d[i] = f32_op(a[i], b[i], op);
    }
}

GS_REDUCE_INLINE void f64_loop(double *d, const double *a, const double *b, size_t n, gs_op_t op)
{
    size_t i;

    for (i = 0; i < n; i++) {
        d[i] = f64_op(a[i], b[i], op);
    }
}

/* One loop per op (the op a constant inside it) for every float type. */
GS_REDUCE_INLINE void body_f32(float *d, const float *a, const float *b, size_t n, gs_op_t op)
{
    switch (op) {
    case GS_OP_PROD:
        f32_loop(d, a, b, n, GS_OP_PROD);
        break;
    case GS_OP_MIN:
        f32_loop(d, a, b, n, GS_OP_MIN);
        break;
    case GS_OP_MAX:
        f32_loop(d, a, b, n, GS_OP_MAX);
        break;
    default:
        f32_loop(d, a, b, n, GS_OP_SUM);
        break;
    }
}

GS_REDUCE_INLINE void body_f64(double *d, const double *a, const double *b, size_t n, gs_op_t op)
{
    switch (op) {
    case GS_OP_PROD:
        f64_loop(d, a, b, n, GS_OP_PROD);
        break;
    case GS_OP_MIN:
        f64_loop(d, a, b, n, GS_OP_MIN);
        break;
    case GS_OP_MAX:
        f64_loop(d, a, b, n, GS_OP_MAX);
        break;
    default:
        f64_loop(d, a, b, n, GS_OP_SUM);
        break;
    }
}

GS_REDUCE_INLINE void body_bf16(uint16_t *d, const uint16_t *a, const uint16_t *b, size_t n,
                                gs_op_t op)
{
    switch (op) {
    case GS_OP_PROD:
        bf16_loop(d, a, b, n, GS_OP_PROD);
        break;
    case GS_OP_MIN:
        bf16_loop(d, a, b, n, GS_OP_MIN);
        break;
    case GS_OP_MAX:
        bf16_loop(d, a, b, n, GS_OP_MAX);
        break;
    default:
        bf16_loop(d, a, b, n, GS_OP_SUM);
        break;
    }
}

/* The plain C f16 path goes through dtype.c's scalar conversions (not
 * inlined); x86-64 CPUs with F16C never take it, see reduce_f16_f16c. */
GS_REDUCE_INLINE void body_f16(uint16_t *d, const uint16_t *a, const uint16_t *b, size_t n,
                               gs_op_t op)
{
    size_t i;

    for (i = 0; i < n; i++) {
        d[i] = gs__f32_to_f16(f32_op(gs__f16_to_f32(a[i]), gs__f16_to_f32(b[i]), op));
    }
}

/*
 * Integer bodies. Sum and prod wrap, so they are done on the unsigned type
 * of the same width (signed and unsigned wrap to the same bits, and may
 * alias each other); min and max compare with the element's own sign.
 */
GS_REDUCE_INLINE void body_u8(uint8_t *d, const uint8_t *a, const uint8_t *b, size_t n,
                              gs_op_t op)
{
    size_t i;

    switch (op) {
    case GS_OP_SUM:
        for (i = 0; i < n; i++) {
            d[i] = (uint8_t)(a[i] + b[i]);
        }
        break;
    case GS_OP_PROD:
        for (i = 0; i < n; i++) {
            d[i] = (uint8_t)((unsigned)a[i] * (unsigned)b[i]);
        }
        break;
    case GS_OP_MIN:
    case GS_OP_MAX: /* op is loop-invariant: one compare, one blend */
        for (i = 0; i < n; i++) {
            d[i] = ((a[i] < b[i]) == (op == GS_OP_MIN)) ? a[i] : b[i];
        }
        break;
    default:
        break;
    }
}

GS_REDUCE_INLINE void body_i8(int8_t *d, const int8_t *a, const int8_t *b, size_t n, gs_op_t op)
{
    size_t i;

    switch (op) {
    case GS_OP_MIN:
    case GS_OP_MAX: /* op is loop-invariant: one compare, one blend */
        for (i = 0; i < n; i++) {
            d[i] = ((a[i] < b[i]) == (op == GS_OP_MIN)) ? a[i] : b[i];
        }
        break;
    default:
        body_u8((uint8_t *)d, (const uint8_t *)a, (const uint8_t *)b, n, op);
        break;
    }
}

GS_REDUCE_INLINE void body_i32(int32_t *d, const int32_t *a, const int32_t *b, size_t n,
                               gs_op_t op)
{
    uint32_t *ud = (uint32_t *)d;
    const uint32_t *ua = (const uint32_t *)a, *ub = (const uint32_t *)b;
    size_t i;

    switch (op) {
    case GS_OP_SUM:
        for (i = 0; i < n; i++) {
            ud[i] = ua[i] + ub[i];
        }
        break;
    case GS_OP_PROD:
        for (i = 0; i < n; i++) {
            ud[i] = ua[i] * ub[i];
        }
        break;
    case GS_OP_MIN:
    case GS_OP_MAX: /* op is loop-invariant: one compare, one blend */
        for (i = 0; i < n; i++) {
            d[i] = ((a[i] < b[i]) == (op == GS_OP_MIN)) ? a[i] : b[i];
        }
        break;
    default:
        break;
    }
}

GS_REDUCE_INLINE void body_i64(int64_t *d, const int64_t *a, const int64_t *b, size_t n,
                               gs_op_t op)
{
    uint64_t *ud = (uint64_t *)d;
    const uint64_t *ua = (const uint64_t *)a, *ub = (const uint64_t *)b;
    size_t i;

    switch (op) {
    case GS_OP_SUM:
        for (i = 0; i < n; i++) {
            ud[i] = ua[i] + ub[i];
        }
        break;
    case GS_OP_PROD:
        for (i = 0; i < n; i++) {
            ud[i] = ua[i] * ub[i];
        }
        break;
    case GS_OP_MIN:
    case GS_OP_MAX: /* op is loop-invariant: one compare, one blend */
        for (i = 0; i < n; i++) {
            d[i] = ((a[i] < b[i]) == (op == GS_OP_MIN)) ? a[i] : b[i];
        }
        break;
    default:
        break;
    }
}

GS_REDUCE_INLINE void body_scale_f32(float *buf, size_t n, float divisor)
{
    size_t i;

    for (i = 0; i < n; i++) {
        buf[i] = buf[i] / divisor;
    }
}

GS_REDUCE_INLINE void body_scale_f64(double *buf, size_t n, double divisor)
{
    size_t i;

    for (i = 0; i < n; i++) {
        buf[i] = buf[i] / divisor;
    }
}

GS_REDUCE_INLINE void body_scale_bf16(uint16_t *buf, size_t n, float divisor)
{
    const size_t pairs = n / 2;
    size_t i;

    for (i = 0; i < pairs; i++) {
        uint32_t w;

        memcpy(&w, buf + 2 * i, sizeof(w));
        w = (bf16_round_hi(f32_from_bits(w << 16) / divisor) >> 16) |
            (bf16_round_hi(f32_from_bits(w & 0xffff0000u) / divisor) & 0xffff0000u);
        memcpy(buf + 2 * i, &w, sizeof(w));
    }
    if ((n & 1u) != 0) {
        buf[n - 1] = bf16_round(bf16_widen(buf[n - 1]) / divisor);
    }
}

GS_REDUCE_INLINE void body_scale_f16(uint16_t *buf, size_t n, float divisor)
{
    size_t i;

    for (i = 0; i < n; i++) {
        buf[i] = gs__f32_to_f16(gs__f16_to_f32(buf[i]) / divisor);
    }
}

/* ---------------------------------------------------------------------- */
/* Run-time multiversioned instances (x86-64); plain C elsewhere           */
/* ---------------------------------------------------------------------- */

GS_REDUCE_CLONES static void reduce_f32_mv(void *d, const void *a, const void *b, size_t n,
                                           gs_op_t op)
{
    body_f32(d, a, b, n, op);
}

GS_REDUCE_CLONES static void reduce_f64_mv(void *d, const void *a, const void *b, size_t n,
                                           gs_op_t op)
{
    body_f64(d, a, b, n, op);
}

GS_REDUCE_CLONES static void reduce_bf16_mv(void *d, const void *a, const void *b, size_t n,
                                            gs_op_t op)
{
    body_bf16(d, a, b, n, op);
}

GS_REDUCE_CLONES static void reduce_i8_mv(void *d, const void *a, const void *b, size_t n,
                                          gs_op_t op)
{
    body_i8(d, a, b, n, op);
}

GS_REDUCE_CLONES static void reduce_u8_mv(void *d, const void *a, const void *b, size_t n,
                                          gs_op_t op)
{
    body_u8(d, a, b, n, op);
}

GS_REDUCE_CLONES static void reduce_i32_mv(void *d, const void *a, const void *b, size_t n,
                                           gs_op_t op)
{
    body_i32(d, a, b, n, op);
}

GS_REDUCE_CLONES static void reduce_i64_mv(void *d, const void *a, const void *b, size_t n,
                                           gs_op_t op)
{
    body_i64(d, a, b, n, op);
}

GS_REDUCE_CLONES static void scale_f32_mv(void *buf, size_t n, float divisor)
{
    body_scale_f32(buf, n, divisor);
}

GS_REDUCE_CLONES static void scale_f64_mv(void *buf, size_t n, double divisor)
{
    body_scale_f64(buf, n, divisor);
}

GS_REDUCE_CLONES static void scale_bf16_mv(void *buf, size_t n, float divisor)
{
    body_scale_bf16(buf, n, divisor);
}

/* ---------------------------------------------------------------------- */
/* f16 with F16C (x86-64)                                                 */
/* ---------------------------------------------------------------------- */

#if defined(GS_REDUCE_X86)
#define GS_REDUCE_F16C_TARGET __attribute__((target("avx2,f16c")))
#define GS_REDUCE_F16C_LANES 8

/* The vector twin of min_f32: select on x < y, OR on equality, keep NaN x. */
GS_REDUCE_F16C_TARGET GS_REDUCE_INLINE __m256 f16c_min(__m256 x, __m256 y)
{
    __m256 r = _mm256_blendv_ps(y, x, _mm256_cmp_ps(x, y, _CMP_LT_OQ));

    r = _mm256_blendv_ps(r, _mm256_or_ps(x, y), _mm256_cmp_ps(x, y, _CMP_EQ_OQ));
    return _mm256_blendv_ps(r, x, _mm256_cmp_ps(x, x, _CMP_UNORD_Q));
}

GS_REDUCE_F16C_TARGET GS_REDUCE_INLINE __m256 f16c_max(__m256 x, __m256 y)
{
    __m256 r = _mm256_blendv_ps(y, x, _mm256_cmp_ps(x, y, _CMP_GT_OQ));

    r = _mm256_blendv_ps(r, _mm256_and_ps(x, y), _mm256_cmp_ps(x, y, _CMP_EQ_OQ));
    return _mm256_blendv_ps(r, x, _mm256_cmp_ps(x, x, _CMP_UNORD_Q));
}

GS_REDUCE_F16C_TARGET GS_REDUCE_INLINE __m256 f16c_op(__m256 x, __m256 y, gs_op_t op)
{
    switch (op) {
    case GS_OP_PROD:
        return _mm256_mul_ps(x, y);
    case GS_OP_MIN:
        return f16c_min(x, y);
    case GS_OP_MAX:
        return f16c_max(x, y);
    default:
        return _mm256_add_ps(x, y);
    }
}

GS_REDUCE_F16C_TARGET GS_REDUCE_INLINE void f16c_step(uint16_t *d, const uint16_t *a,
                                                   const uint16_t *b, gs_op_t op)
{
    const __m256 x = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(const void *)a));
    const __m256 y = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(const void *)b));

    _mm_storeu_si128((__m128i *)(void *)d, _mm256_cvtps_ph(f16c_op(x, y, op),
                                                           _MM_FROUND_TO_NEAREST_INT));
}

GS_REDUCE_F16C_TARGET static void reduce_f16_f16c(uint16_t *d, const uint16_t *a,
                                                  const uint16_t *b, size_t n, gs_op_t op)
{
    const size_t tail = n % GS_REDUCE_F16C_LANES;
    const size_t body = n - tail;
    size_t i;

    /* One loop per op, so the op is a constant inside each loop. */
    switch (op) {
    case GS_OP_PROD:
        for (i = 0; i < body; i += GS_REDUCE_F16C_LANES) {
            f16c_step(d + i, a + i, b + i, GS_OP_PROD);
        }
        break;
    case GS_OP_MIN:
        for (i = 0; i < body; i += GS_REDUCE_F16C_LANES) {
            f16c_step(d + i, a + i, b + i, GS_OP_MIN);
        }
        break;
    case GS_OP_MAX:
        for (i = 0; i < body; i += GS_REDUCE_F16C_LANES) {
            f16c_step(d + i, a + i, b + i, GS_OP_MAX);
        }
        break;
    default:
        for (i = 0; i < body; i += GS_REDUCE_F16C_LANES) {
            f16c_step(d + i, a + i, b + i, GS_OP_SUM);
        }
        break;
    }
    if (tail != 0) {
        /* The tail goes through the same vector step, so results do not
         * depend on where an element sits in the buffer. */
        uint16_t ta[GS_REDUCE_F16C_LANES] = {0}, tb[GS_REDUCE_F16C_LANES] = {0};
        uint16_t td[GS_REDUCE_F16C_LANES];

        memcpy(ta, a + body, tail * sizeof(uint16_t));
        memcpy(tb, b + body, tail * sizeof(uint16_t));
        f16c_step(td, ta, tb, op);
        memcpy(d + body, td, tail * sizeof(uint16_t));
    }
}

GS_REDUCE_F16C_TARGET static inline void f16c_scale_step(uint16_t *buf, __m256 divisor)
{
    const __m256 x = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(const void *)buf));

    _mm_storeu_si128((__m128i *)(void *)buf, _mm256_cvtps_ph(_mm256_div_ps(x, divisor),
                                                             _MM_FROUND_TO_NEAREST_INT));
}

GS_REDUCE_F16C_TARGET static void scale_f16_f16c(uint16_t *buf, size_t n, float divisor)
{
    const size_t tail = n % GS_REDUCE_F16C_LANES;
    const size_t body = n - tail;
    const __m256 vdiv = _mm256_set1_ps(divisor);
    size_t i;

    for (i = 0; i < body; i += GS_REDUCE_F16C_LANES) {
        f16c_scale_step(buf + i, vdiv);
    }
    if (tail != 0) {
        uint16_t t[GS_REDUCE_F16C_LANES] = {0};

        memcpy(t, buf + body, tail * sizeof(uint16_t));
        f16c_scale_step(t, vdiv);
        memcpy(buf + body, t, tail * sizeof(uint16_t));
    }
}

/*
 * AVX2 (which __builtin_cpu_supports only reports when the OS saves YMM
 * state) plus the F16C cpuid bit, looked up once: cpuid traps to the
 * hypervisor in a VM, and clang's __builtin_cpu_supports has no "f16c".
 */
int gs__cpu_has_avx2_f16c(void)
{
    static atomic_int cached; /* 0: not looked up yet, 1: no, 2: yes */
    int v = atomic_load_explicit(&cached, memory_order_relaxed);

    if (v == 0) {
        unsigned int eax, ebx, ecx = 0, edx;
        const int cpuid_ok = __get_cpuid(1, &eax, &ebx, &ecx, &edx);

        v = (__builtin_cpu_supports("avx2") && cpuid_ok && ((ecx & bit_F16C) != 0)) ? 2 : 1;
        atomic_store_explicit(&cached, v, memory_order_relaxed);
    }
    return v == 2;
}
#else
int gs__cpu_has_avx2_f16c(void)
{
    return 0;
}
#endif /* GS_REDUCE_X86 */

/* ---------------------------------------------------------------------- */
/* Entry points                                                           */
/* ---------------------------------------------------------------------- */

void gs__reduce_generic(void *dst, const void *a, const void *b, size_t n, gs_dtype_t dt,
                        gs_op_t op)
{
    switch (dt) {
    case GS_DTYPE_F32:
        body_f32(dst, a, b, n, op);
        break;
    case GS_DTYPE_F64:
        body_f64(dst, a, b, n, op);
        break;
    case GS_DTYPE_F16:
        body_f16(dst, a, b, n, op);
        break;
    case GS_DTYPE_BF16:
        body_bf16(dst, a, b, n, op);
        break;
    case GS_DTYPE_I8:
        body_i8(dst, a, b, n, op);
        break;
    case GS_DTYPE_U8:
        body_u8(dst, a, b, n, op);
        break;
    case GS_DTYPE_I32:
        body_i32(dst, a, b, n, op);
        break;
    case GS_DTYPE_I64:
        body_i64(dst, a, b, n, op);
        break;
    default:
        break;
    }
}

void gs__reduce(void *dst, const void *a, const void *b, size_t n, gs_dtype_t dt, gs_op_t op)
{
    switch (dt) {
    case GS_DTYPE_F32:
        reduce_f32_mv(dst, a, b, n, op);
        break;
    case GS_DTYPE_F64:
        reduce_f64_mv(dst, a, b, n, op);
        break;
    case GS_DTYPE_F16:
#if defined(GS_REDUCE_X86)
        if (gs__cpu_has_avx2_f16c()) {
            reduce_f16_f16c(dst, a, b, n, op);
            break;
        }
#endif
        body_f16(dst, a, b, n, op);
        break;
    case GS_DTYPE_BF16:
        reduce_bf16_mv(dst, a, b, n, op);
        break;
    case GS_DTYPE_I8:
        reduce_i8_mv(dst, a, b, n, op);
        break;
    case GS_DTYPE_U8:
        reduce_u8_mv(dst, a, b, n, op);
        break;
    case GS_DTYPE_I32:
        reduce_i32_mv(dst, a, b, n, op);
        break;
    case GS_DTYPE_I64:
        reduce_i64_mv(dst, a, b, n, op);
        break;
    default:
        break;
    }
}

void gs__reduce_scale_generic(void *buf, size_t n, gs_dtype_t dt, int divisor)
{
    /* Dividing by 1 is the identity and 0 has no meaning: leave buf as is. */
    if ((divisor == 0) || (divisor == 1)) {
        return;
    }
    switch (dt) {
    case GS_DTYPE_F32:
        body_scale_f32(buf, n, (float)divisor);
        break;
    case GS_DTYPE_F64:
        body_scale_f64(buf, n, (double)divisor);
        break;
    case GS_DTYPE_F16:
        body_scale_f16(buf, n, (float)divisor);
        break;
    case GS_DTYPE_BF16:
        body_scale_bf16(buf, n, (float)divisor);
        break;
    default:
        break;
    }
}

void gs__reduce_scale(void *buf, size_t n, gs_dtype_t dt, int divisor)
{
    if ((divisor == 0) || (divisor == 1)) {
        return;
    }
    switch (dt) {
    case GS_DTYPE_F32:
        scale_f32_mv(buf, n, (float)divisor);
        break;
    case GS_DTYPE_F64:
        scale_f64_mv(buf, n, (double)divisor);
        break;
    case GS_DTYPE_F16:
#if defined(GS_REDUCE_X86)
        if (gs__cpu_has_avx2_f16c()) {
            scale_f16_f16c(buf, n, (float)divisor);
            break;
        }
#endif
        body_scale_f16(buf, n, (float)divisor);
        break;
    case GS_DTYPE_BF16:
        scale_bf16_mv(buf, n, (float)divisor);
        break;
    default:
        break;
    }
}

const char *gs__reduce_isa(void)
{
#if defined(GS_REDUCE_HAVE_CLONES)
    /* The same order the target_clones resolvers try. */
    if (__builtin_cpu_supports("avx512f")) {
        return "avx512";
    }
    if (__builtin_cpu_supports("avx2")) {
        return "avx2";
    }
#endif
    return "generic";
}
