/* SPDX-License-Identifier: Apache-2.0 */
/*
 * CPU element-wise reductions, the inner loop of every host all-reduce.
 *
 * Each dtype has one always-inline "body" (a switch over the op, one plain
 * C loop per op, written so that GCC and clang auto-vectorise it at -O3)
 * that is instantiated twice: once as a plain function (the generic path,
 * gs__reduce_generic) and once under target_clones("avx512f", "avx2",
 * "default"), so that the loader picks the widest ISA the CPU has at run
 * time (an ifunc; not under TSan). The per-element arithmetic is
 * src/math/reduce_math.h's, the source the CUDA kernels compile too, so
 * the CPU and GPU reductions cannot drift. The library is never built with
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

#include "math/half_math.h"
#include "math/reduce_math.h"

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
/* Per-dtype loop bodies                                                  */
/* ---------------------------------------------------------------------- */

/*
 * The arithmetic of every element is src/math/reduce_math.h's (gs_km_*),
 * shared with the CUDA kernels; the loops below only arrange it so that
 * GCC vectorises it: each loop has its op as a constant (the body_* switch
 * calls it once per op), and the gs_km_* functions are branch-free selects
 * once the op is known.
 */

GS_REDUCE_INLINE void f32_loop(float *d, const float *a, const float *b, size_t n, gs_op_t op)
{
    size_t i;

    for (i = 0; i < n; i++) {
        d[i] = gs_km_op_f32(a[i], b[i], op);
    }
}

GS_REDUCE_INLINE void f64_loop(double *d, const double *a, const double *b, size_t n, gs_op_t op)
{
    size_t i;

    for (i = 0; i < n; i++) {
        d[i] = gs_km_op_f64(a[i], b[i], op);
    }
}

/*
 * Two bf16 elements in one 32-bit word: each widens to f32 with a single
 * shift or mask and narrows back in place, so the vector loop needs no
 * shuffles (about 3x faster than widening element by element). Both
 * halves get the same treatment, so byte order does not matter, and each
 * gives the bits of gs_km_op_bf16 (same widening, op and rounding).
 */
GS_REDUCE_INLINE uint32_t bf16_pair_op(uint32_t wa, uint32_t wb, gs_op_t op)
{
    const float lo = gs_km_op_f32(gs_km_f32_from_bits(wa << 16), gs_km_f32_from_bits(wb << 16), op);
    const float hi = gs_km_op_f32(gs_km_f32_from_bits(wa & 0xffff0000u),
                                  gs_km_f32_from_bits(wb & 0xffff0000u), op);

    return (gs_km_f32_to_bf16_hi(lo) >> 16) | (gs_km_f32_to_bf16_hi(hi) & 0xffff0000u);
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
        d[n - 1] = gs_km_op_bf16(a[n - 1], b[n - 1], op);
    }
}

/* The plain C f16 loop; x86-64 CPUs with F16C never take it, see
 * reduce_f16_f16c. */
GS_REDUCE_INLINE void f16_loop(uint16_t *d, const uint16_t *a, const uint16_t *b, size_t n,
                               gs_op_t op)
{
    size_t i;

    for (i = 0; i < n; i++) {
        d[i] = gs_km_op_f16(a[i], b[i], op);
    }
}

GS_REDUCE_INLINE void u8_loop(uint8_t *d, const uint8_t *a, const uint8_t *b, size_t n, gs_op_t op)
{
    size_t i;

    for (i = 0; i < n; i++) {
        d[i] = gs_km_op_u8(a[i], b[i], op);
    }
}

GS_REDUCE_INLINE void i8_loop(int8_t *d, const int8_t *a, const int8_t *b, size_t n, gs_op_t op)
{
    size_t i;

    for (i = 0; i < n; i++) {
        d[i] = gs_km_op_i8(a[i], b[i], op);
    }
}

GS_REDUCE_INLINE void i32_loop(int32_t *d, const int32_t *a, const int32_t *b, size_t n, gs_op_t op)
{
    size_t i;

    for (i = 0; i < n; i++) {
        d[i] = gs_km_op_i32(a[i], b[i], op);
    }
}

GS_REDUCE_INLINE void i64_loop(int64_t *d, const int64_t *a, const int64_t *b, size_t n, gs_op_t op)
{
    size_t i;

    for (i = 0; i < n; i++) {
        d[i] = gs_km_op_i64(a[i], b[i], op);
    }
}

/* One loop per op (the op a constant inside it) for every type. */
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

GS_REDUCE_INLINE void body_f16(uint16_t *d, const uint16_t *a, const uint16_t *b, size_t n,
                               gs_op_t op)
{
    switch (op) {
    case GS_OP_PROD:
        f16_loop(d, a, b, n, GS_OP_PROD);
        break;
    case GS_OP_MIN:
        f16_loop(d, a, b, n, GS_OP_MIN);
        break;
    case GS_OP_MAX:
        f16_loop(d, a, b, n, GS_OP_MAX);
        break;
    default:
        f16_loop(d, a, b, n, GS_OP_SUM);
        break;
    }
}

GS_REDUCE_INLINE void body_u8(uint8_t *d, const uint8_t *a, const uint8_t *b, size_t n, gs_op_t op)
{
    switch (op) {
    case GS_OP_PROD:
        u8_loop(d, a, b, n, GS_OP_PROD);
        break;
    case GS_OP_MIN:
        u8_loop(d, a, b, n, GS_OP_MIN);
        break;
    case GS_OP_MAX:
        u8_loop(d, a, b, n, GS_OP_MAX);
        break;
    case GS_OP_BAND:
        u8_loop(d, a, b, n, GS_OP_BAND);
        break;
    case GS_OP_BOR:
        u8_loop(d, a, b, n, GS_OP_BOR);
        break;
    case GS_OP_BXOR:
        u8_loop(d, a, b, n, GS_OP_BXOR);
        break;
    default:
        u8_loop(d, a, b, n, GS_OP_SUM);
        break;
    }
}

GS_REDUCE_INLINE void body_i8(int8_t *d, const int8_t *a, const int8_t *b, size_t n, gs_op_t op)
{
    switch (op) {
    case GS_OP_PROD:
        i8_loop(d, a, b, n, GS_OP_PROD);
        break;
    case GS_OP_MIN:
        i8_loop(d, a, b, n, GS_OP_MIN);
        break;
    case GS_OP_MAX:
        i8_loop(d, a, b, n, GS_OP_MAX);
        break;
    case GS_OP_BAND:
        i8_loop(d, a, b, n, GS_OP_BAND);
        break;
    case GS_OP_BOR:
        i8_loop(d, a, b, n, GS_OP_BOR);
        break;
    case GS_OP_BXOR:
        i8_loop(d, a, b, n, GS_OP_BXOR);
        break;
    default:
        i8_loop(d, a, b, n, GS_OP_SUM);
        break;
    }
}

GS_REDUCE_INLINE void body_i32(int32_t *d, const int32_t *a, const int32_t *b, size_t n, gs_op_t op)
{
    switch (op) {
    case GS_OP_PROD:
        i32_loop(d, a, b, n, GS_OP_PROD);
        break;
    case GS_OP_MIN:
        i32_loop(d, a, b, n, GS_OP_MIN);
        break;
    case GS_OP_MAX:
        i32_loop(d, a, b, n, GS_OP_MAX);
        break;
    case GS_OP_BAND:
        i32_loop(d, a, b, n, GS_OP_BAND);
        break;
    case GS_OP_BOR:
        i32_loop(d, a, b, n, GS_OP_BOR);
        break;
    case GS_OP_BXOR:
        i32_loop(d, a, b, n, GS_OP_BXOR);
        break;
    default:
        i32_loop(d, a, b, n, GS_OP_SUM);
        break;
    }
}

GS_REDUCE_INLINE void body_i64(int64_t *d, const int64_t *a, const int64_t *b, size_t n, gs_op_t op)
{
    switch (op) {
    case GS_OP_PROD:
        i64_loop(d, a, b, n, GS_OP_PROD);
        break;
    case GS_OP_MIN:
        i64_loop(d, a, b, n, GS_OP_MIN);
        break;
    case GS_OP_MAX:
        i64_loop(d, a, b, n, GS_OP_MAX);
        break;
    case GS_OP_BAND:
        i64_loop(d, a, b, n, GS_OP_BAND);
        break;
    case GS_OP_BOR:
        i64_loop(d, a, b, n, GS_OP_BOR);
        break;
    case GS_OP_BXOR:
        i64_loop(d, a, b, n, GS_OP_BXOR);
        break;
    default:
        i64_loop(d, a, b, n, GS_OP_SUM);
        break;
    }
}

GS_REDUCE_INLINE void body_scale_f32(float *buf, size_t n, float divisor)
{
    size_t i;

    for (i = 0; i < n; i++) {
        buf[i] = gs_km_scale_f32(buf[i], divisor);
    }
}

GS_REDUCE_INLINE void body_scale_f64(double *buf, size_t n, double divisor)
{
    size_t i;

    for (i = 0; i < n; i++) {
        buf[i] = gs_km_scale_f64(buf[i], divisor);
    }
}

/* Pairs of bf16 per word, as bf16_loop; each half gives gs_km_scale_bf16's bits. */
GS_REDUCE_INLINE void body_scale_bf16(uint16_t *buf, size_t n, float divisor)
{
    const size_t pairs = n / 2;
    size_t i;

    for (i = 0; i < pairs; i++) {
        uint32_t w;

        memcpy(&w, buf + 2 * i, sizeof(w));
        w = (gs_km_f32_to_bf16_hi(gs_km_scale_f32(gs_km_f32_from_bits(w << 16), divisor)) >> 16) |
            (gs_km_f32_to_bf16_hi(gs_km_scale_f32(gs_km_f32_from_bits(w & 0xffff0000u), divisor)) &
             0xffff0000u);
        memcpy(buf + 2 * i, &w, sizeof(w));
    }
    if ((n & 1u) != 0) {
        buf[n - 1] = gs_km_scale_bf16(buf[n - 1], divisor);
    }
}

GS_REDUCE_INLINE void body_scale_f16(uint16_t *buf, size_t n, float divisor)
{
    size_t i;

    for (i = 0; i < n; i++) {
        buf[i] = gs_km_scale_f16(buf[i], divisor);
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

/* The vector twin of gs_km_min_f32: select on x < y, OR on equality, keep NaN x. */
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

    _mm_storeu_si128((__m128i *)(void *)d,
                     _mm256_cvtps_ph(f16c_op(x, y, op), _MM_FROUND_TO_NEAREST_INT));
}

GS_REDUCE_F16C_TARGET static void reduce_f16_f16c(uint16_t *d, const uint16_t *a, const uint16_t *b,
                                                  size_t n, gs_op_t op)
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

    _mm_storeu_si128((__m128i *)(void *)buf,
                     _mm256_cvtps_ph(_mm256_div_ps(x, divisor), _MM_FROUND_TO_NEAREST_INT));
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
