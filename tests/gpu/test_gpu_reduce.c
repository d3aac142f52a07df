/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The reduction kernels on the GPU (kernels/reduce_kernels.h: gs_k_reduce,
 * gs_k_scale, gs_k_mul_f32) against two CPU references: the CPU build of
 * the very same bodies (kernels/reduce_body.h run through GS_CPU_GRID) and
 * the CPU library's plain C path (core/reduce_cpu.h gs__reduce_generic and
 * gs__reduce_scale_generic). CUDA builds only; exits 77 without a device.
 *
 * Cases: every dtype x op (AVG without a divisor acts as SUM), counts 0, 1,
 * 3, 1000, 4099 and 16 Mi; element offsets of dst, a and b within 16 bytes
 * all 0, all 1 (scalar head, then vectors), 3, and mixed (no common
 * alignment: no vector path); out of place, dst = a and dst = b; the fused
 * average (divisor 2 and 3) and the scale (0, 1, 2, 3, 7) for the float
 * dtypes; half the cases on a stream of their own, half on the legacy
 * default stream. 16 Mi elements run aligned out of place (and one element
 * off for f32, f16 and u8), to keep the CPU side short.
 *
 * Data is fresh for every case (a PRNG that is never reseeded) and never
 * zero: normal numbers of magnitude 2^-10 .. 2^10 with random signs, or
 * random non-zero integers, for which the GPU must give the CPU's bits
 * exactly. A second pass (counts up to 4099, float dtypes) mixes in NaN,
 * inf, -0/+0 and subnormal inputs; there a NaN result only has to be a
 * NaN, because a GPU makes its own NaN payload (canonical quiet NaN) where
 * the CPU passes an operand's on. Every device byte is poisoned (0xA5)
 * first; every byte outside the output must keep the poison, and the
 * inputs of an out-of-place call must be left as they were. The launchers'
 * argument errors (cudaErrorInvalidValue, nothing launched) are checked too.
 * After every launcher call the CUDA runtime's last-error slot must be
 * clean (GT_KLIB). GPUTEST_QUICK=1 runs the 16 Mi cases at 5 Mi.
 */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime_api.h>

#include "core/dtype.h"
#include "core/reduce_cpu.h"
#include "gpu_test_util.h"
#include "reduce_body.h"
#include "reduce_kernels.h"

#define POISON 0xA5u
#define BIG_COUNT ((size_t)16 << 20)
/* GPUTEST_QUICK=1 (tests/gpu/run.sh --quick): the large cases at 5 Mi
 * elements (still more than one grid of 16-byte vectors for every dtype). */
#define QUICK_BIG_COUNT ((size_t)5 << 20)
#define LEAD 64u /* guard bytes before element 0 (and 16-byte aligned) */
#define BUF_BYTES (BIG_COUNT * 8u + 2u * LEAD + 64u)
/* The CPU grid: the result does not depend on it (every element is one
 * thread's), so one shape serves. */
#define CPU_BLOCKS 64u
#define CPU_THREADS 256u

#define NELEMS(_a) (sizeof(_a) / sizeof((_a)[0]))

typedef enum { PLACE_OUT, PLACE_DST_A, PLACE_DST_B, PLACE_COUNT } place_t;

static const char *const place_names[] = {"out of place", "dst = a", "dst = b"};

static const size_t small_counts[] = {0, 1, 3, 1000, 4099};

/* The large cases' count: BIG_COUNT, or QUICK_BIG_COUNT with GPUTEST_QUICK=1. */
static size_t big_count = BIG_COUNT;

/* Element offsets of dst, a and b. */
static const size_t offsets[][3] = {{0, 0, 0}, {1, 1, 1}, {3, 3, 3}, {0, 1, 1}, {1, 0, 1}};

typedef struct bufs {
    /* device */
    unsigned char *da, *db, *dd;
    /* host: inputs, and what came back from the device's a, b and d */
    unsigned char *a, *b, *ga, *gb, *gd;
    /* host: the CPU grid's result and the plain C library's */
    unsigned char *cpu, *ref;
    cudaStream_t stream;
    uint64_t rng;
    unsigned ncase;
} bufs_t;

/* ---------------------------------------------------------------------- */
/* Data                                                                   */
/* ---------------------------------------------------------------------- */

typedef struct {
    unsigned mant;
    unsigned exp;
} ffmt_t;

static ffmt_t ffmt_of(gs_dtype_t dt)
{
    switch (dt) {
    case GS_DTYPE_F64:
        return (ffmt_t){.mant = 52, .exp = 11};
    case GS_DTYPE_F16:
        return (ffmt_t){.mant = 10, .exp = 5};
    case GS_DTYPE_BF16:
        return (ffmt_t){.mant = 7, .exp = 8};
    default:
        return (ffmt_t){.mant = 23, .exp = 8};
    }
}

static uint64_t load_bits(const void *buf, size_t i, size_t esz)
{
    uint64_t v = 0;

    memcpy(&v, (const unsigned char *)buf + i * esz, esz); /* little-endian hosts */
    return v;
}

static void store_bits(void *buf, size_t i, size_t esz, uint64_t v)
{
    memcpy((unsigned char *)buf + i * esz, &v, esz);
}

static bool is_nan_bits(gs_dtype_t dt, uint64_t v)
{
    const ffmt_t f = ffmt_of(dt);
    const uint64_t e = ((1ull << f.exp) - 1u) << f.mant;

    return gs__dtype_is_float(dt) && ((v & e) == e) && ((v & ((1ull << f.mant) - 1u)) != 0);
}

/* A normal number of magnitude 2^-10 .. 2^10, random sign (never zero). */
static uint64_t frand_normal(bufs_t *s, ffmt_t f)
{
    const uint64_t bias = (1ull << (f.exp - 1u)) - 1u;
    const uint64_t e = bias - 10u + gt_rand(&s->rng) % 21u;
    const uint64_t sign = (gt_rand(&s->rng) & 1u) ? (1ull << (f.mant + f.exp)) : 0;

    return sign | (e << f.mant) | (gt_rand(&s->rng) & ((1ull << f.mant) - 1u));
}

/* A special value: NaN (random payload, either sign), +-inf, +-0 or a subnormal. */
static uint64_t frand_special(bufs_t *s, ffmt_t f)
{
    const uint64_t sign = (gt_rand(&s->rng) & 1u) ? (1ull << (f.mant + f.exp)) : 0;
    const uint64_t eall = ((1ull << f.exp) - 1u) << f.mant;
    uint64_t m = gt_rand(&s->rng) & ((1ull << f.mant) - 1u);

    m = (m != 0) ? m : 1u;
    switch (gt_rand(&s->rng) % 4u) {
    case 0:
        return sign | eall | m; /* NaN */
    case 1:
        return sign | eall; /* inf */
    case 2:
        return sign; /* zero */
    default:
        return sign | m; /* subnormal */
    }
}

/* Fresh elements for a[0..n) and b[0..n); none is zero unless @p special,
 * which puts a special value on one side or both at about one index in six. */
static void fill_pair(bufs_t *s, void *a, void *b, size_t n, gs_dtype_t dt, bool special)
{
    const size_t esz = gs__dtype_size(dt);
    const ffmt_t f = ffmt_of(dt);
    const uint64_t mask = (esz == 8) ? ~0ull : ((1ull << (8u * esz)) - 1u);

    for (size_t i = 0; i < n; i++) {
        uint64_t x, y;

        if (!gs__dtype_is_float(dt)) {
            x = gt_rand(&s->rng) & mask;
            y = gt_rand(&s->rng) & mask;
            x = (x != 0) ? x : 1u;
            y = (y != 0) ? y : 1u;
        } else {
            x = frand_normal(s, f);
            y = frand_normal(s, f);
            if (special) {
                switch (gt_rand(&s->rng) % 6u) {
                case 0:
                    x = frand_special(s, f);
                    break;
                case 1:
                    y = frand_special(s, f);
                    break;
                case 2:
                    x = frand_special(s, f);
                    y = frand_special(s, f);
                    break;
                default:
                    break;
                }
            }
        }
        store_bits(a, i, esz, x);
        store_bits(b, i, esz, y);
    }
}

/* ---------------------------------------------------------------------- */
/* Checks                                                                 */
/* ---------------------------------------------------------------------- */

/* got == want element by element (bits; a NaN for a NaN when nan_class). */
static bool same_elems(const void *got, const void *want, size_t n, gs_dtype_t dt, bool nan_class,
                       const char *what, const char *against)
{
    const size_t esz = gs__dtype_size(dt);

    for (size_t i = 0; i < n; i++) {
        const uint64_t g = load_bits(got, i, esz), w = load_bits(want, i, esz);

        if ((g != w) && !(nan_class && is_nan_bits(dt, g) && is_nan_bits(dt, w))) {
            gt_check(false, "%s: element %zu of %zu is 0x%llx, %s gives 0x%llx", what, i, n,
                     (unsigned long long)g, against, (unsigned long long)w);
            return false;
        }
    }
    gt_check(true, "%s", what);
    return true;
}

/* The bytes of a buffer that a case of @p n elements of @p esz bytes uses:
 * the lead, at most 3 elements of offset, the elements, then guard bytes.
 * Only these are poisoned, copied back and checked. */
static size_t span_of(size_t n, size_t esz)
{
    return LEAD + (n + 4u) * esz + 64u;
}

/* Every byte of the device copy @p buf (its first @p span bytes) outside
 * [lo, lo + len) is the poison. */
static void guard_ok(const unsigned char *buf, size_t span, const unsigned char *lo, size_t len,
                     const char *what, const char *name)
{
    for (size_t i = 0; i < span; i++) {
        if (((buf + i) >= lo) && ((buf + i) < (lo + len))) {
            i += len - 1;
            continue;
        }
        if (buf[i] != POISON) {
            gt_check(false,
                     "%s: byte %zu of device buffer %s, outside the output, was written "
                     "(0x%02x)",
                     what, i, name, buf[i]);
            return;
        }
    }
    gt_check(true, "%s", what);
}

/* Poison the device buffers' spans and put the inputs at their offsets. */
static void upload(bufs_t *s, size_t span, size_t aoff_b, size_t boff_b, size_t bytes)
{
    GT_CUDA(cudaMemset(s->da, POISON, span));
    GT_CUDA(cudaMemset(s->db, POISON, span));
    GT_CUDA(cudaMemset(s->dd, POISON, span));
    GT_CUDA(cudaMemcpy(s->da + aoff_b, s->a + aoff_b, bytes, cudaMemcpyHostToDevice));
    GT_CUDA(cudaMemcpy(s->db + boff_b, s->b + boff_b, bytes, cudaMemcpyHostToDevice));
}

static void download(bufs_t *s, size_t span)
{
    GT_CUDA(cudaMemcpy(s->ga, s->da, span, cudaMemcpyDeviceToHost));
    GT_CUDA(cudaMemcpy(s->gb, s->db, span, cudaMemcpyDeviceToHost));
    GT_CUDA(cudaMemcpy(s->gd, s->dd, span, cudaMemcpyDeviceToHost));
}

/* The stream of the next case: ours for odd cases, the legacy one for even. */
static cudaStream_t next_stream(bufs_t *s)
{
    return ((s->ncase++ & 1u) != 0) ? s->stream : (cudaStream_t)0;
}

/* The launch's status, then the stream's. */
static bool launch_ok(int rc, cudaStream_t st, const char *what)
{
    const cudaError_t sync = cudaStreamSynchronize(st);

    if (!gt_check(rc == 0, "%s: the launcher returned %d (%s)", what, rc,
                  cudaGetErrorString((cudaError_t)rc))) {
        return false;
    }
    GT_CUDA(sync);
    GT_CUDA(cudaGetLastError());
    return true;
}

/* ---------------------------------------------------------------------- */
/* gs_k_reduce                                                            */
/* ---------------------------------------------------------------------- */

static void reduce_case(bufs_t *s, gs_dtype_t dt, gs_op_t op, int divisor, size_t n,
                        const size_t off[3], place_t place, bool special)
{
    const size_t esz = gs__dtype_size(dt);
    const size_t aoff = LEAD + off[1] * esz, boff = LEAD + off[2] * esz;
    const size_t doff = (place == PLACE_DST_A)   ? aoff
                        : (place == PLACE_DST_B) ? boff
                                                 : LEAD + off[0] * esz;
    const size_t bytes = n * esz, span = span_of(n, esz);
    const cudaStream_t st = next_stream(s);
    unsigned char *dev_dst = (place == PLACE_DST_A)   ? s->da + aoff
                             : (place == PLACE_DST_B) ? s->db + boff
                                                      : s->dd + doff;
    const unsigned char *got = (place == PLACE_DST_A)   ? s->ga + aoff
                               : (place == PLACE_DST_B) ? s->gb + boff
                                                        : s->gd + doff;
    char what[200];

    snprintf(what, sizeof(what), "gs_k_reduce %s %s divisor %d, n %zu, offsets %zu/%zu/%zu, %s%s",
             gs__dtype_name(dt), gs__op_name(op), divisor, n, off[0], off[1], off[2],
             place_names[place], special ? ", special values" : "");
    fill_pair(s, s->a + aoff, s->b + boff, n, dt, special);
    upload(s, span, aoff, boff, bytes);
    if (!launch_ok(
            GT_KLIB(gs_k_reduce(dev_dst, s->da + aoff, s->db + boff, n, dt, op, divisor, st)), st,
            what)) {
        return;
    }
    download(s, span);

    /* The CPU build of the same body, out of place at the same offset. */
    memset(s->cpu, POISON, LEAD + bytes + 64);
    GS_CPU_GRID(CPU_BLOCKS, CPU_THREADS, gs_kred_reduce, s->cpu + doff, s->a + aoff, s->b + boff, n,
                dt, op, divisor);
    same_elems(got, s->cpu + doff, n, dt, special, what, "the CPU build of the body");
    if (divisor == 0) {
        gs__reduce_generic(s->ref, s->a + aoff, s->b + boff, n, dt, op);
        same_elems(got, s->ref, n, dt, special, what, "gs__reduce_generic");
    }
    /* Inputs that are not the output are unchanged; nothing outside is written. */
    if (place != PLACE_DST_A) {
        same_elems(s->ga + aoff, s->a + aoff, n, dt, false, what, "input a before the call");
    }
    if (place != PLACE_DST_B) {
        same_elems(s->gb + boff, s->b + boff, n, dt, false, what, "input b before the call");
    }
    guard_ok(s->ga, span, s->ga + aoff, bytes, what, "a");
    guard_ok(s->gb, span, s->gb + boff, bytes, what, "b");
    guard_ok(s->gd, span, s->gd + doff, (place == PLACE_OUT) ? bytes : 0, what, "dst");
}

static void sweep_reduce(bufs_t *s)
{
    static const int divisors[] = {2, 3};
    static const gs_op_t sum_ops[] = {GS_OP_SUM, GS_OP_AVG};

    for (gs_dtype_t dt = (gs_dtype_t)0; dt < GS_DTYPE_COUNT; dt++) {
        const bool fl = gs__dtype_is_float(dt);

        for (gs_op_t op = (gs_op_t)0; op < GS_OP_COUNT; op++) {
            if (!gs__dtype_op_valid(dt, op)) {
                continue;
            }
            for (size_t c = 0; c < NELEMS(small_counts); c++) {
                for (size_t o = 0; o < NELEMS(offsets); o++) {
                    for (int p = 0; p < PLACE_COUNT; p++) {
                        reduce_case(s, dt, op, 0, small_counts[c], offsets[o], (place_t)p, false);
                        if (fl) {
                            reduce_case(s, dt, op, 0, small_counts[c], offsets[o], (place_t)p,
                                        true);
                        }
                    }
                }
            }
            reduce_case(s, dt, op, 0, big_count, offsets[0], PLACE_OUT, false);
            if ((dt == GS_DTYPE_F32) || (dt == GS_DTYPE_F16) || (dt == GS_DTYPE_U8)) {
                reduce_case(s, dt, op, 0, big_count, offsets[1], PLACE_OUT, false);
            }
        }
        if (!fl) {
            continue;
        }
        /* The fused average: SUM or AVG with a divisor. */
        for (size_t v = 0; v < NELEMS(divisors); v++) {
            for (size_t k = 0; k < NELEMS(sum_ops); k++) {
                const gs_op_t op = sum_ops[k];

                for (size_t c = 0; c < NELEMS(small_counts); c++) {
                    for (size_t o = 0; o < NELEMS(offsets); o++) {
                        reduce_case(s, dt, op, divisors[v], small_counts[c], offsets[o], PLACE_OUT,
                                    false);
                        reduce_case(s, dt, op, divisors[v], small_counts[c], offsets[o],
                                    PLACE_DST_A, true);
                    }
                }
            }
            reduce_case(s, dt, GS_OP_AVG, divisors[v], big_count, offsets[0], PLACE_OUT, false);
        }
    }
}

/* ---------------------------------------------------------------------- */
/* gs_k_scale and gs_k_mul_f32                                            */
/* ---------------------------------------------------------------------- */

/* mul: gs_k_mul_f32 by @p m instead of a scale by @p divisor. */
static void scale_case(bufs_t *s, gs_dtype_t dt, int divisor, bool mul, float m, size_t n,
                       size_t off, bool special)
{
    const size_t esz = gs__dtype_size(dt);
    const size_t boff = LEAD + off * esz, bytes = n * esz, span = span_of(n, esz);
    const cudaStream_t st = next_stream(s);
    char what[160];
    int rc;

    if (mul) {
        snprintf(what, sizeof(what), "gs_k_mul_f32 by %.9g, n %zu, offset %zu%s", (double)m, n, off,
                 special ? ", special values" : "");
    } else {
        snprintf(what, sizeof(what), "gs_k_scale %s / %d, n %zu, offset %zu%s", gs__dtype_name(dt),
                 divisor, n, off, special ? ", special values" : "");
    }
    /* b's elements are scratch: the buffer is a. */
    fill_pair(s, s->a + boff, s->cpu, n, dt, special);
    upload(s, span, boff, boff, bytes);
    rc = mul ? GT_KLIB(gs_k_mul_f32((float *)(void *)(s->da + boff), n, m, st))
             : GT_KLIB(gs_k_scale(s->da + boff, n, dt, divisor, st));
    if (!launch_ok(rc, st, what)) {
        return;
    }
    download(s, span);
    memcpy(s->cpu, s->a + boff, bytes);
    memcpy(s->ref, s->a + boff, bytes);
    if (mul) {
        GS_CPU_GRID(CPU_BLOCKS, CPU_THREADS, gs_kred_mul_f32, (float *)(void *)s->cpu, n, m);
        for (size_t i = 0; i < n; i++) {
            float x;

            memcpy(&x, s->ref + 4 * i, 4);
            x = x * m;
            memcpy(s->ref + 4 * i, &x, 4);
        }
    } else {
        GS_CPU_GRID(CPU_BLOCKS, CPU_THREADS, gs_kred_scale, s->cpu, n, dt, divisor);
        gs__reduce_scale_generic(s->ref, n, dt, divisor);
    }
    same_elems(s->ga + boff, s->cpu, n, dt, special, what, "the CPU build of the body");
    same_elems(s->ga + boff, s->ref, n, dt, special, what,
               mul ? "x * m in C" : "gs__reduce_scale_generic");
    guard_ok(s->ga, span, s->ga + boff, bytes, what, "buf");
}

static void sweep_scale(bufs_t *s)
{
    static const int divisors[] = {0, 1, 2, 3, 7};
    static const float muls[] = {1.0f / 3.0f, 0.25f, -1.5f};

    for (gs_dtype_t dt = (gs_dtype_t)0; dt < GS_DTYPE_COUNT; dt++) {
        if (!gs__dtype_is_float(dt)) {
            continue;
        }
        for (size_t v = 0; v < NELEMS(divisors); v++) {
            for (size_t c = 0; c < NELEMS(small_counts); c++) {
                for (size_t o = 0; o < 3; o++) {
                    scale_case(s, dt, divisors[v], false, 0.0f, small_counts[c], o, false);
                    scale_case(s, dt, divisors[v], false, 0.0f, small_counts[c], o, true);
                }
            }
        }
        scale_case(s, dt, 3, false, 0.0f, big_count, 0, false);
    }
    for (size_t v = 0; v < NELEMS(muls); v++) {
        for (size_t c = 0; c < NELEMS(small_counts); c++) {
            for (size_t o = 0; o < 3; o++) {
                scale_case(s, GS_DTYPE_F32, 0, true, muls[v], small_counts[c], o, false);
                scale_case(s, GS_DTYPE_F32, 0, true, muls[v], small_counts[c], o, true);
            }
        }
    }
    scale_case(s, GS_DTYPE_F32, 0, true, muls[0], big_count, 1, false);
}

/* ---------------------------------------------------------------------- */
/* Argument errors                                                        */
/* ---------------------------------------------------------------------- */

static void check_rc(int got, int want, const char *what)
{
    gt_check(got == want, "%s: the launcher returned %d, want %d", what, got, want);
}

static void launcher_errors(bufs_t *s)
{
    const int inval = (int)cudaErrorInvalidValue;
    void *d = s->dd;

    check_rc(GT_KLIB(gs_k_reduce(d, d, d, 10, GS_DTYPE_COUNT, GS_OP_SUM, 0, NULL)), inval,
             "reduce, unknown dtype");
    check_rc(GT_KLIB(gs_k_reduce(d, d, d, 10, GS_DTYPE_F32, GS_OP_COUNT, 0, NULL)), inval,
             "reduce, unknown op");
    check_rc(GT_KLIB(gs_k_reduce(d, d, d, 10, GS_DTYPE_I32, GS_OP_AVG, 0, NULL)), inval,
             "reduce, AVG on i32");
    check_rc(GT_KLIB(gs_k_reduce(d, d, d, 10, GS_DTYPE_F32, GS_OP_BAND, 0, NULL)), inval,
             "reduce, BAND on f32");
    check_rc(GT_KLIB(gs_k_reduce(d, d, d, 10, GS_DTYPE_BF16, GS_OP_BXOR, 0, NULL)), inval,
             "reduce, BXOR on bf16");
    check_rc(GT_KLIB(gs_k_reduce(d, d, d, 10, GS_DTYPE_F32, GS_OP_SUM, -1, NULL)), inval,
             "reduce, divisor -1");
    check_rc(GT_KLIB(gs_k_reduce(d, d, d, 10, GS_DTYPE_F32, GS_OP_MAX, 2, NULL)), inval,
             "reduce, divisor with MAX");
    check_rc(GT_KLIB(gs_k_reduce(d, d, d, 10, GS_DTYPE_I32, GS_OP_SUM, 2, NULL)), inval,
             "reduce, divisor with i32");
    check_rc(GT_KLIB(gs_k_reduce(NULL, d, d, 10, GS_DTYPE_F32, GS_OP_SUM, 0, NULL)), inval,
             "reduce, NULL dst");
    check_rc(GT_KLIB(gs_k_reduce(NULL, NULL, NULL, 0, GS_DTYPE_F32, GS_OP_SUM, 0, NULL)), 0,
             "reduce, n 0 with NULL buffers");
    check_rc(GT_KLIB(gs_k_scale(d, 10, GS_DTYPE_I32, 2, NULL)), inval, "scale, i32");
    check_rc(GT_KLIB(gs_k_scale(NULL, 10, GS_DTYPE_F32, 3, NULL)), inval, "scale, NULL buffer");
    check_rc(GT_KLIB(gs_k_scale(NULL, 10, GS_DTYPE_F32, 1, NULL)), 0, "scale by 1, NULL buffer");
    check_rc(GT_KLIB(gs_k_scale(NULL, 0, GS_DTYPE_F32, 3, NULL)), 0, "scale, n 0");
    GT_CUDA(cudaDeviceSynchronize());
    GT_CUDA(cudaGetLastError());
}

/* ---------------------------------------------------------------------- */

static unsigned char *host_alloc(void)
{
    unsigned char *p = aligned_alloc(64, BUF_BYTES);

    if (p == NULL) {
        fprintf(stderr, "test_gpu_reduce: out of host memory\n");
        exit(1);
    }
    memset(p, POISON, BUF_BYTES);
    return p;
}

int main(void)
{
    bufs_t s;
    int dev = 0;
    struct cudaDeviceProp prop;

    gt_skip_without_device("test_gpu_reduce");
    if ((getenv("GPUTEST_QUICK") != NULL) && (strcmp(getenv("GPUTEST_QUICK"), "1") == 0)) {
        big_count = QUICK_BIG_COUNT;
    }
    memset(&s, 0, sizeof(s));
    s.rng = 0x9e3779b97f4a7c15ull;
    GT_CUDA(cudaSetDevice(dev));
    GT_CUDA(cudaGetDeviceProperties(&prop, dev));
    printf("test_gpu_reduce: GPU %d (%s, sm_%d%d)\n", dev, prop.name, prop.major, prop.minor);
    fflush(stdout);
    GT_CUDA(cudaMalloc((void **)&s.da, BUF_BYTES));
    GT_CUDA(cudaMalloc((void **)&s.db, BUF_BYTES));
    GT_CUDA(cudaMalloc((void **)&s.dd, BUF_BYTES));
    GT_CUDA(cudaStreamCreateWithFlags(&s.stream, cudaStreamNonBlocking));
    s.a = host_alloc();
    s.b = host_alloc();
    s.ga = host_alloc();
    s.gb = host_alloc();
    s.gd = host_alloc();
    s.cpu = host_alloc();
    s.ref = host_alloc();

    launcher_errors(&s);
    sweep_reduce(&s);
    sweep_scale(&s);

    printf("test_gpu_reduce: %ld checks, %ld failed (%u launches)\n", gt_checks, gt_failures,
           s.ncase);
    GT_CUDA(cudaStreamDestroy(s.stream));
    GT_CUDA(cudaFree(s.da));
    GT_CUDA(cudaFree(s.db));
    GT_CUDA(cudaFree(s.dd));
    free(s.a);
    free(s.b);
    free(s.ga);
    free(s.gb);
    free(s.gd);
    free(s.cpu);
    free(s.ref);
    return (gt_failures > 0) ? 1 : 0;
}
