/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Unit tests for the reduction kernels' bodies (kernels/reduce_body.h),
 * compiled here as C and run through GS_CPU_GRID, so they run without a
 * GPU. Every dtype x op, counts 0 .. 4099, pointers aligned to 16 bytes or
 * offset by one element (vector path with a scalar head, or no vector path
 * when the offsets differ), out of place and in place, under grid shapes
 * from one thread to more threads than elements, on random data that is
 * never zero plus NaN, inf, -0/+0 and subnormal inputs. Results must match
 * the CPU library's plain C path (gs__reduce_generic and
 * gs__reduce_scale_generic) bit for bit; the fused average is checked
 * against a reference written here (sum in f32, or f64 for f64, divide,
 * round once). Outputs are poisoned with 0xA5 first, and every byte
 * outside the output range, and every input, must be left as it was.
 *
 * NOTE: when both inputs of a sum or product are NaN, which payload wins
 * depends on the operand order the compiler picks (core/reduce_cpu.h), so
 * the data never puts two different NaNs at the same index.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "core/dtype.h"
#include "core/reduce_cpu.h"
#include "reduce_body.h"

#define POISON 0xA5u
#define MAX_COUNT 4099u
/* Bytes per test buffer: the largest count of 8-byte elements, one element
 * of offset, and room for guard bytes on both sides, rounded up to a
 * multiple of 64 as aligned_alloc requires. */
#define BUF_BYTES ((((MAX_COUNT + 2u) * 8u + 64u) + 63u) / 64u * 64u)
/* Where element 0 sits in a buffer at offset 0: 16-byte aligned, with
 * guard bytes before it. */
#define BUF_LEAD 32u

typedef struct {
    size_t nblocks;
    unsigned nthreads;
} grid_t;

/* One thread; odd shapes; a block per SM-ish; more threads than elements. */
static const grid_t test_grids[] = {{1, 1}, {3, 7}, {4, 256}, {40, 128}};

static const size_t test_counts[] = {0, 1, 3, 17, 1000, MAX_COUNT};

/* Element offsets of dst, a and b: all aligned, all one element off (the
 * vector path after a scalar head), and mixed (no common alignment). */
static const size_t test_offsets[][3] = {{0, 0, 0}, {1, 1, 1}, {0, 1, 1}, {1, 0, 1}};

typedef enum { PLACE_OUT, PLACE_DST_A, PLACE_DST_B, PLACE_COUNT } place_t;

static const char *const place_names[] = {"out of place", "dst = a", "dst = b"};

static const gs_dtype_t float_dtypes[] = {GS_DTYPE_F32, GS_DTYPE_F64, GS_DTYPE_F16, GS_DTYPE_BF16};

#define NELEMS(_a) (sizeof(_a) / sizeof((_a)[0]))

/* Three working buffers and the reference, 64-byte aligned. */
typedef struct {
    unsigned char *a;
    unsigned char *b;
    unsigned char *d;
    unsigned char *ref;
} bufs_t;

static uint64_t prng_state = 0x9e3779b97f4a7c15ull;

static uint64_t prng_next(void)
{
    /* xorshift64*: deterministic, so failures reproduce. */
    prng_state ^= prng_state >> 12;
    prng_state ^= prng_state << 25;
    prng_state ^= prng_state >> 27;
    return prng_state * 0x2545f4914f6cdd1dull;
}

static int setup_bufs(void **state)
{
    bufs_t *bufs = calloc(1, sizeof(*bufs));

    if (bufs == NULL) {
        return -1;
    }
    bufs->a = aligned_alloc(64, BUF_BYTES);
    bufs->b = aligned_alloc(64, BUF_BYTES);
    bufs->d = aligned_alloc(64, BUF_BYTES);
    bufs->ref = aligned_alloc(64, BUF_BYTES);
    *state = bufs;
    if ((bufs->a == NULL) || (bufs->b == NULL) || (bufs->d == NULL) || (bufs->ref == NULL)) {
        return -1;
    }
    return 0;
}

static int teardown_bufs(void **state)
{
    bufs_t *bufs = *state;

    free(bufs->a);
    free(bufs->b);
    free(bufs->d);
    free(bufs->ref);
    free(bufs);
    return 0;
}

/* ---------------------------------------------------------------------- */
/* Elements as bits                                                       */
/* ---------------------------------------------------------------------- */

static uint64_t load_bits(const void *buf, size_t i, gs_dtype_t dt)
{
    const size_t esz = gs__dtype_size(dt);
    uint64_t v = 0;

    /* Little-endian hosts only (x86-64, aarch64): low bytes first. */
    memcpy(&v, (const unsigned char *)buf + i * esz, esz);
    return v;
}

static void store_bits(void *buf, size_t i, gs_dtype_t dt, uint64_t v)
{
    const size_t esz = gs__dtype_size(dt);

    memcpy((unsigned char *)buf + i * esz, &v, esz);
}

/* Field widths of a float format. */
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

static uint64_t fsign(ffmt_t f)
{
    return 1ull << (f.mant + f.exp);
}

static uint64_t fexp_all(ffmt_t f)
{
    return ((1ull << f.exp) - 1u) << f.mant;
}

static uint64_t fmant_rand_nonzero(ffmt_t f)
{
    const uint64_t m = prng_next() & ((1ull << f.mant) - 1u);

    return (m != 0) ? m : 1u;
}

/* A normal number of magnitude 2^-10 .. 2^10, random sign: never zero, and
 * sums and products mostly stay finite (overflow to inf is fine too). */
static uint64_t frand_normal(ffmt_t f)
{
    const uint64_t bias = (1ull << (f.exp - 1u)) - 1u;
    const uint64_t e = bias - 10u + prng_next() % 21u;
    const uint64_t s = ((prng_next() & 1u) != 0) ? fsign(f) : 0;

    return s | (e << f.mant) | (prng_next() & ((1ull << f.mant) - 1u));
}

static int is_nan_bits(gs_dtype_t dt, uint64_t v)
{
    const ffmt_t f = ffmt_of(dt);

    return ((v & fexp_all(f)) == fexp_all(f)) && ((v & ((1ull << f.mant) - 1u)) != 0);
}

/*
 * Random elements for a[0..n) and b[0..n): never zero; for float dtypes
 * about one index in six gets a special pair instead: NaN (quiet or
 * signalling, random payload) on one side or the same NaN on both, +-inf,
 * inf against -inf, -0 against +0 either way, and subnormals.
 */
static void fill_pair(void *a, void *b, size_t n, gs_dtype_t dt)
{
    size_t i;

    for (i = 0; i < n; i++) {
        uint64_t x, y;

        if (!gs__dtype_is_float(dt)) {
            x = prng_next();
            y = prng_next();
            x = ((x & ((1ull << (8u * gs__dtype_size(dt) - 1u)) * 2u - 1u)) != 0) ? x : 1u;
            y = ((y & ((1ull << (8u * gs__dtype_size(dt) - 1u)) * 2u - 1u)) != 0) ? y : 1u;
        } else {
            const ffmt_t f = ffmt_of(dt);
            const uint64_t nan =
                ((prng_next() & 1u) != 0 ? fsign(f) : 0) | fexp_all(f) | fmant_rand_nonzero(f);
            const uint64_t sub = ((prng_next() & 1u) != 0 ? fsign(f) : 0) | fmant_rand_nonzero(f);

            x = frand_normal(f);
            y = frand_normal(f);
            switch (prng_next() % 60u) {
            case 0:
                x = nan;
                break;
            case 1:
                y = nan;
                break;
            case 2:
                x = nan;
                y = nan;
                break;
            case 3:
                x = fexp_all(f);
                break;
            case 4:
                y = fsign(f) | fexp_all(f);
                break;
            case 5:
                x = fexp_all(f);
                y = fsign(f) | fexp_all(f);
                break;
            case 6:
                x = fsign(f);
                y = 0;
                break;
            case 7:
                x = 0;
                y = fsign(f);
                break;
            case 8:
                x = sub;
                break;
            case 9:
                x = sub;
                y = ((prng_next() & 1u) != 0 ? fsign(f) : 0) | fmant_rand_nonzero(f);
                break;
            default:
                break;
            }
        }
        store_bits(a, i, dt, x);
        store_bits(b, i, dt, y);
    }
}

/* Points at element 0 of a buffer whose element 0 is `off` elements past
 * a 16-byte boundary. */
static unsigned char *at(unsigned char *base, size_t off, gs_dtype_t dt)
{
    return base + BUF_LEAD + off * gs__dtype_size(dt);
}

/* Every byte of buf outside [lo, lo + len) is still the poison. */
static void assert_guard(const unsigned char *buf, const unsigned char *lo, size_t len,
                         const char *what)
{
    size_t i;

    for (i = 0; i < BUF_BYTES; i++) {
        if (((buf + i) >= lo) && ((buf + i) < (lo + len))) {
            continue;
        }
        if (buf[i] != POISON) {
            fail_msg("%s: byte %zu outside the elements was written (0x%02x)", what, i, buf[i]);
        }
    }
}

static void assert_same_elems(const void *got, const void *want, size_t n, gs_dtype_t dt,
                              const char *what)
{
    size_t i;

    for (i = 0; i < n; i++) {
        const uint64_t g = load_bits(got, i, dt);
        const uint64_t w = load_bits(want, i, dt);

        if (g != w) {
            fail_msg("%s: element %zu of %zu is 0x%llx, want 0x%llx", what, i, n,
                     (unsigned long long)g, (unsigned long long)w);
        }
    }
}

/* ---------------------------------------------------------------------- */
/* Reduce against gs__reduce_generic                                      */
/* ---------------------------------------------------------------------- */

/*
 * One case: fresh data, the CPU library's result out of place as the
 * reference, then the body under grid g with dst placed as `place`.
 * fused_divisor > 0 checks the fused average against ref_fn instead.
 */
typedef void (*ref_fn_t)(void *ref, const void *a, const void *b, size_t n, gs_dtype_t dt,
                         gs_op_t op, int divisor);

static void run_case(bufs_t *bufs, gs_dtype_t dt, gs_op_t op, int divisor, ref_fn_t ref_fn,
                     size_t n, const size_t off[3], place_t place, const grid_t *g)
{
    const size_t esz = gs__dtype_size(dt);
    const size_t aoff = off[1], boff = off[2];
    const size_t doff = (place == PLACE_DST_A) ? aoff : (place == PLACE_DST_B) ? boff : off[0];
    unsigned char *a = at(bufs->a, aoff, dt);
    unsigned char *b = at(bufs->b, boff, dt);
    unsigned char *ref = at(bufs->ref, 0, dt);
    unsigned char *d;
    const void *a_in, *b_in;
    static unsigned char a_copy[BUF_BYTES], b_copy[BUF_BYTES];
    char what[192];

    memset(bufs->a, POISON, BUF_BYTES);
    memset(bufs->b, POISON, BUF_BYTES);
    memset(bufs->d, POISON, BUF_BYTES);
    memset(bufs->ref, POISON, BUF_BYTES);
    fill_pair(a, b, n, dt);
    memcpy(a_copy, a, n * esz);
    memcpy(b_copy, b, n * esz);
    ref_fn(ref, a_copy, b_copy, n, dt, op, divisor);

    switch (place) {
    case PLACE_DST_A:
        d = a;
        break;
    case PLACE_DST_B:
        d = b;
        break;
    default:
        d = at(bufs->d, doff, dt);
        break;
    }
    a_in = a;
    b_in = b;
    GS_CPU_GRID(g->nblocks, g->nthreads, gs_kred_reduce, d, a_in, b_in, n, dt, op, divisor);

    snprintf(what, sizeof(what), "%s %s divisor %d, n %zu, offsets %zu/%zu/%zu, %s, grid %zux%u",
             gs__dtype_name(dt), gs__op_name(op), divisor, n, doff, aoff, boff, place_names[place],
             g->nblocks, g->nthreads);
    assert_same_elems(d, ref, n, dt, what);
    if (place != PLACE_DST_A) {
        assert_same_elems(a, a_copy, n, dt, what);
    }
    if (place != PLACE_DST_B) {
        assert_same_elems(b, b_copy, n, dt, what);
    }
    assert_guard(bufs->a, a, n * esz, what);
    assert_guard(bufs->b, b, n * esz, what);
    assert_guard(bufs->d, (place == PLACE_OUT) ? d : bufs->d, (place == PLACE_OUT) ? n * esz : 0,
                 what);
}

static void ref_generic(void *ref, const void *a, const void *b, size_t n, gs_dtype_t dt,
                        gs_op_t op, int divisor)
{
    (void)divisor;
    gs__reduce_generic(ref, a, b, n, dt, op);
}

/* Every op valid for dt, count, offset pattern, placement and grid. */
static void sweep_reduce(bufs_t *bufs, gs_dtype_t dt)
{
    size_t c, o, g;
    gs_op_t op;
    int place;

    for (op = (gs_op_t)0; op < GS_OP_COUNT; op++) {
        if (!gs__dtype_op_valid(dt, op)) {
            continue;
        }
        for (c = 0; c < NELEMS(test_counts); c++) {
            for (o = 0; o < NELEMS(test_offsets); o++) {
                for (place = 0; place < PLACE_COUNT; place++) {
                    for (g = 0; g < NELEMS(test_grids); g++) {
                        run_case(bufs, dt, op, 0, ref_generic, test_counts[c], test_offsets[o],
                                 (place_t)place, &test_grids[g]);
                    }
                }
            }
        }
    }
}

static void test_kernel_reduce_f32_matches_cpu(void **state)
{
    sweep_reduce(*state, GS_DTYPE_F32);
}

static void test_kernel_reduce_f64_matches_cpu(void **state)
{
    sweep_reduce(*state, GS_DTYPE_F64);
}

static void test_kernel_reduce_f16_matches_cpu(void **state)
{
    sweep_reduce(*state, GS_DTYPE_F16);
}

static void test_kernel_reduce_bf16_matches_cpu(void **state)
{
    sweep_reduce(*state, GS_DTYPE_BF16);
}

static void test_kernel_reduce_i8_matches_cpu(void **state)
{
    sweep_reduce(*state, GS_DTYPE_I8);
}

static void test_kernel_reduce_u8_matches_cpu(void **state)
{
    sweep_reduce(*state, GS_DTYPE_U8);
}

static void test_kernel_reduce_i32_matches_cpu(void **state)
{
    sweep_reduce(*state, GS_DTYPE_I32);
}

static void test_kernel_reduce_i64_matches_cpu(void **state)
{
    sweep_reduce(*state, GS_DTYPE_I64);
}

/* ---------------------------------------------------------------------- */
/* Fused average against a reference written here                         */
/* ---------------------------------------------------------------------- */

static void ref_fused_avg(void *ref, const void *a, const void *b, size_t n, gs_dtype_t dt,
                          gs_op_t op, int divisor)
{
    size_t i;

    (void)op;
    for (i = 0; i < n; i++) {
        const uint64_t x = load_bits(a, i, dt);
        const uint64_t y = load_bits(b, i, dt);
        uint64_t r;

        switch (dt) {
        case GS_DTYPE_F64: {
            double xd, yd, s;

            memcpy(&xd, &x, sizeof(xd));
            memcpy(&yd, &y, sizeof(yd));
            s = (xd + yd) / (double)divisor;
            memcpy(&r, &s, sizeof(r));
            break;
        }
        case GS_DTYPE_F32: {
            const uint32_t xb = (uint32_t)x, yb = (uint32_t)y;
            float xf, yf, s;
            uint32_t sb;

            memcpy(&xf, &xb, sizeof(xf));
            memcpy(&yf, &yb, sizeof(yf));
            s = (xf + yf) / (float)divisor;
            memcpy(&sb, &s, sizeof(sb));
            r = sb;
            break;
        }
        case GS_DTYPE_F16:
            r = gs__f32_to_f16((gs__f16_to_f32((uint16_t)x) + gs__f16_to_f32((uint16_t)y)) /
                               (float)divisor);
            break;
        default:
            r = gs__f32_to_bf16((gs__bf16_to_f32((uint16_t)x) + gs__bf16_to_f32((uint16_t)y)) /
                                (float)divisor);
            break;
        }
        store_bits(ref, i, dt, r);
    }
}

static void test_kernel_reduce_fused_avg(void **state)
{
    static const int divisors[] = {1, 2, 3, 7};
    static const gs_op_t sum_ops[] = {GS_OP_SUM, GS_OP_AVG};
    size_t t, v, s, c, o, g;
    int place;

    for (t = 0; t < NELEMS(float_dtypes); t++) {
        for (v = 0; v < NELEMS(divisors); v++) {
            for (s = 0; s < NELEMS(sum_ops); s++) {
                for (c = 0; c < NELEMS(test_counts); c++) {
                    for (o = 0; o < NELEMS(test_offsets); o++) {
                        for (place = 0; place < PLACE_COUNT; place++) {
                            for (g = 0; g < NELEMS(test_grids); g++) {
                                run_case(*state, float_dtypes[t], sum_ops[s], divisors[v],
                                         ref_fused_avg, test_counts[c], test_offsets[o],
                                         (place_t)place, &test_grids[g]);
                            }
                        }
                    }
                }
            }
        }
    }
}

/* For f16 and bf16 the fused step rounds once, so on random data some
 * elements must differ from a rounded sum divided afterwards (two
 * roundings); if none does, the body is not fusing. */
/* The bitwise ops in the device body against C's own &, | and ^ on the
 * element bits (not against the CPU reduction, which shares reduce_math.h). */
static void test_kernel_reduce_bitwise(void **state)
{
    static const gs_dtype_t ints[] = {GS_DTYPE_I8, GS_DTYPE_U8, GS_DTYPE_I32, GS_DTYPE_I64};
    static const gs_op_t ops[] = {GS_OP_BAND, GS_OP_BOR, GS_OP_BXOR};
    bufs_t *bufs = *state;
    const size_t n = 1000;

    for (size_t t = 0; t < NELEMS(ints); t++) {
        const gs_dtype_t dt = ints[t];
        const size_t bits = 8 * gs__dtype_size(dt);
        const uint64_t mask = (bits == 64) ? ~0ull : ((1ull << bits) - 1u);

        for (size_t i = 0; i < n; i++) {
            store_bits(bufs->a, i, dt, prng_next() & mask);
            store_bits(bufs->b, i, dt, prng_next() & mask);
        }
        for (size_t o = 0; o < NELEMS(ops); o++) {
            GS_CPU_GRID(3, 7, gs_kred_reduce, bufs->d, bufs->a, bufs->b, n, dt, ops[o], 0);
            for (size_t i = 0; i < n; i++) {
                const uint64_t x = load_bits(bufs->a, i, dt);
                const uint64_t y = load_bits(bufs->b, i, dt);
                const uint64_t want = (ops[o] == GS_OP_BAND)  ? (x & y)
                                      : (ops[o] == GS_OP_BOR) ? (x | y)
                                                              : (x ^ y);

                if (load_bits(bufs->d, i, dt) != want) {
                    print_error(
                        "%s %s [%zu]: 0x%llx op 0x%llx = 0x%llx, want 0x%llx\n", gs__dtype_name(dt),
                        gs__op_name(ops[o]), i, (unsigned long long)x, (unsigned long long)y,
                        (unsigned long long)load_bits(bufs->d, i, dt), (unsigned long long)want);
                }
                assert_true(load_bits(bufs->d, i, dt) == want);
            }
        }
    }
}

static void test_kernel_reduce_fused_avg_rounds_once(void **state)
{
    static const gs_dtype_t halves[] = {GS_DTYPE_F16, GS_DTYPE_BF16};
    bufs_t *bufs = *state;
    const size_t n = 1000;
    size_t t, i, differ;

    for (t = 0; t < NELEMS(halves); t++) {
        const gs_dtype_t dt = halves[t];

        fill_pair(bufs->a, bufs->b, n, dt);
        GS_CPU_GRID(4, 256, gs_kred_reduce, bufs->d, bufs->a, bufs->b, n, dt, GS_OP_AVG, 3);
        gs__reduce_generic(bufs->ref, bufs->a, bufs->b, n, dt, GS_OP_SUM);
        gs__reduce_scale_generic(bufs->ref, n, dt, 3);
        differ = 0;
        for (i = 0; i < n; i++) {
            const uint64_t got = load_bits(bufs->d, i, dt);
            const uint64_t two = load_bits(bufs->ref, i, dt);

            if ((got != two) && !(is_nan_bits(dt, got) && is_nan_bits(dt, two))) {
                differ++;
            }
        }
        print_message("%s: fused avg differs from sum-then-scale in %zu of %zu elements\n",
                      gs__dtype_name(dt), differ, n);
        assert_true(differ > 0);
    }
}

/* A divisor only applies to float sums: other ops and integer sums give
 * the plain result (the launchers reject those combinations; the body
 * must still not divide). */
static void test_kernel_reduce_divisor_only_for_float_sums(void **state)
{
    static const size_t off[3] = {0, 0, 0};
    size_t g;
    gs_op_t op;

    for (g = 0; g < NELEMS(test_grids); g++) {
        for (op = GS_OP_PROD; op <= GS_OP_MAX; op++) {
            run_case(*state, GS_DTYPE_F32, op, 3, ref_generic, 1000, off, PLACE_OUT,
                     &test_grids[g]);
            run_case(*state, GS_DTYPE_BF16, op, 3, ref_generic, 1000, off, PLACE_OUT,
                     &test_grids[g]);
        }
        run_case(*state, GS_DTYPE_I32, GS_OP_SUM, 3, ref_generic, 1000, off, PLACE_OUT,
                 &test_grids[g]);
        run_case(*state, GS_DTYPE_U8, GS_OP_SUM, 3, ref_generic, 1000, off, PLACE_OUT,
                 &test_grids[g]);
    }
}

/* ---------------------------------------------------------------------- */
/* Scale against gs__reduce_scale_generic                                 */
/* ---------------------------------------------------------------------- */

static void test_kernel_reduce_scale_matches_cpu(void **state)
{
    static const int divisors[] = {0, 1, 2, 3, 7, -3};
    bufs_t *bufs = *state;
    size_t t, v, c, o, g;
    char what[160];

    for (t = 0; t < NELEMS(float_dtypes); t++) {
        const gs_dtype_t dt = float_dtypes[t];
        const size_t esz = gs__dtype_size(dt);

        for (v = 0; v < NELEMS(divisors); v++) {
            for (c = 0; c < NELEMS(test_counts); c++) {
                for (o = 0; o < 2; o++) {
                    for (g = 0; g < NELEMS(test_grids); g++) {
                        const size_t n = test_counts[c];
                        unsigned char *buf = at(bufs->d, o, dt);
                        unsigned char *ref = at(bufs->ref, 0, dt);

                        memset(bufs->d, POISON, BUF_BYTES);
                        memset(bufs->ref, POISON, BUF_BYTES);
                        /* b is scratch: only a's elements are used. */
                        fill_pair(buf, bufs->b, n, dt);
                        memcpy(ref, buf, n * esz);
                        gs__reduce_scale_generic(ref, n, dt, divisors[v]);
                        GS_CPU_GRID(test_grids[g].nblocks, test_grids[g].nthreads, gs_kred_scale,
                                    buf, n, dt, divisors[v]);
                        snprintf(what, sizeof(what),
                                 "scale %s / %d, n %zu, offset %zu, grid %zux%u",
                                 gs__dtype_name(dt), divisors[v], n, o, test_grids[g].nblocks,
                                 test_grids[g].nthreads);
                        assert_same_elems(buf, ref, n, dt, what);
                        assert_guard(bufs->d, buf, n * esz, what);
                    }
                }
            }
        }
    }
}

/* Integer dtypes are not scaled. */
static void test_kernel_reduce_scale_ignores_int(void **state)
{
    static const gs_dtype_t ints[] = {GS_DTYPE_I8, GS_DTYPE_U8, GS_DTYPE_I32, GS_DTYPE_I64};
    bufs_t *bufs = *state;
    size_t t;

    for (t = 0; t < NELEMS(ints); t++) {
        const size_t n = 1000;

        fill_pair(bufs->d, bufs->b, n, ints[t]);
        memcpy(bufs->ref, bufs->d, n * gs__dtype_size(ints[t]));
        GS_CPU_GRID(4, 256, gs_kred_scale, bufs->d, n, ints[t], 3);
        assert_memory_equal(bufs->d, bufs->ref, n * gs__dtype_size(ints[t]));
    }
}

/* ---------------------------------------------------------------------- */
/* The split into scalar head, vectors and tail                           */
/* ---------------------------------------------------------------------- */

static void test_kernel_reduce_span_split(void **state)
{
    bufs_t *bufs = *state;
    const unsigned char *p = bufs->a; /* 64-byte aligned */
    gs__kred_span_t s;

    /* Aligned f32: vectors from element 0, the tail after them. */
    s = gs_kred_span(p, p, p, 17, 4);
    assert_int_equal(s.head, 0);
    assert_int_equal(s.nvec, 4);
    assert_int_equal(s.tail, 16);
    assert_int_equal(s.n, 17);
    /* One f32 off: three scalars reach the boundary. */
    s = gs_kred_span(p + 4, p + 4, p + 20, 17, 4);
    assert_int_equal(s.head, 3);
    assert_int_equal(s.nvec, 3);
    assert_int_equal(s.tail, 15);
    /* Different offsets within 16 bytes: no vectors at all. */
    s = gs_kred_span(p, p + 4, p, 1000, 4);
    assert_int_equal(s.head, 1000);
    assert_int_equal(s.nvec, 0);
    assert_int_equal(s.tail, 1000);
    /* Shorter than the head: all scalars. */
    s = gs_kred_span(p + 2, p + 2, p + 2, 5, 2);
    assert_int_equal(s.head, 5);
    assert_int_equal(s.nvec, 0);
    assert_int_equal(s.tail, 5);
    /* Bytes: 16 per vector. */
    s = gs_kred_span(p + 1, p + 1, p + 1, 100, 1);
    assert_int_equal(s.head, 15);
    assert_int_equal(s.nvec, 5);
    assert_int_equal(s.tail, 95);
    /* f64 aligned to 8 but not 16. */
    s = gs_kred_span(p + 8, p + 8, p + 8, 4, 8);
    assert_int_equal(s.head, 1);
    assert_int_equal(s.nvec, 1);
    assert_int_equal(s.tail, 3);
}

/* n = 0 touches no pointer, NULL included, whatever the grid. */
static void test_kernel_reduce_zero_count(void **state)
{
    gs_dtype_t dt;
    gs_op_t op;
    size_t g;

    (void)state;
    for (g = 0; g < NELEMS(test_grids); g++) {
        for (dt = (gs_dtype_t)0; dt < GS_DTYPE_COUNT; dt++) {
            for (op = (gs_op_t)0; op < GS_OP_COUNT; op++) {
                GS_CPU_GRID(test_grids[g].nblocks, test_grids[g].nthreads, gs_kred_reduce, NULL,
                            NULL, NULL, 0, dt, op, 0);
            }
            GS_CPU_GRID(test_grids[g].nblocks, test_grids[g].nthreads, gs_kred_scale, NULL, 0, dt,
                        3);
        }
    }
}

/* The compressed all-reduce's average: x * m, element by element, every
 * alignment and grid shape, the same bits as the plain loop; nothing
 * outside the span is written. */
static void test_kernel_reduce_mul_matches_loop(void **state)
{
    static const size_t counts[] = {0, 1, 3, 17, 1000, 4099};
    static const unsigned grids[][2] = {{1, 1}, {3, 7}, {4, 256}, {40, 128}};
    enum { PAD = 8, MAXN = 4099 + 2 * PAD };
    float *buf = malloc(MAXN * sizeof(float));
    float *want = malloc(MAXN * sizeof(float));
    const float m = 1.0f / 3.0f;
    uint32_t seed = 12345;

    (void)state;
    assert_true((buf != NULL) && (want != NULL));
    for (size_t ci = 0; ci < sizeof(counts) / sizeof(counts[0]); ci++) {
        for (size_t g = 0; g < sizeof(grids) / sizeof(grids[0]); g++) {
            for (size_t off = 0; off < 2; off++) {
                const size_t n = counts[ci];

                for (size_t i = 0; i < MAXN; i++) {
                    seed = seed * 1664525u + 1013904223u;
                    buf[i] = (float)((int32_t)seed >> 8) * 1e-3f + 0.5f;
                    want[i] = buf[i];
                }
                buf[PAD + off] = (n > 0) ? -0.0f : buf[PAD + off];
                want[PAD + off] = buf[PAD + off];
                for (size_t i = 0; i < n; i++) {
                    want[PAD + off + i] = want[PAD + off + i] * m;
                }
                GS_CPU_GRID(grids[g][0], grids[g][1], gs_kred_mul_f32, buf + PAD + off, n, m);
                assert_memory_equal(buf, want, MAXN * sizeof(float));
            }
        }
    }
    free(buf);
    free(want);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_kernel_reduce_f32_matches_cpu, setup_bufs,
                                        teardown_bufs),
        cmocka_unit_test_setup_teardown(test_kernel_reduce_f64_matches_cpu, setup_bufs,
                                        teardown_bufs),
        cmocka_unit_test_setup_teardown(test_kernel_reduce_f16_matches_cpu, setup_bufs,
                                        teardown_bufs),
        cmocka_unit_test_setup_teardown(test_kernel_reduce_bf16_matches_cpu, setup_bufs,
                                        teardown_bufs),
        cmocka_unit_test_setup_teardown(test_kernel_reduce_i8_matches_cpu, setup_bufs,
                                        teardown_bufs),
        cmocka_unit_test_setup_teardown(test_kernel_reduce_u8_matches_cpu, setup_bufs,
                                        teardown_bufs),
        cmocka_unit_test_setup_teardown(test_kernel_reduce_i32_matches_cpu, setup_bufs,
                                        teardown_bufs),
        cmocka_unit_test_setup_teardown(test_kernel_reduce_i64_matches_cpu, setup_bufs,
                                        teardown_bufs),
        cmocka_unit_test_setup_teardown(test_kernel_reduce_fused_avg, setup_bufs, teardown_bufs),
        cmocka_unit_test_setup_teardown(test_kernel_reduce_bitwise, setup_bufs, teardown_bufs),
        cmocka_unit_test_setup_teardown(test_kernel_reduce_fused_avg_rounds_once, setup_bufs,
                                        teardown_bufs),
        cmocka_unit_test_setup_teardown(test_kernel_reduce_divisor_only_for_float_sums, setup_bufs,
                                        teardown_bufs),
        cmocka_unit_test_setup_teardown(test_kernel_reduce_scale_matches_cpu, setup_bufs,
                                        teardown_bufs),
        cmocka_unit_test_setup_teardown(test_kernel_reduce_scale_ignores_int, setup_bufs,
                                        teardown_bufs),
        cmocka_unit_test_setup_teardown(test_kernel_reduce_span_split, setup_bufs, teardown_bufs),
        cmocka_unit_test(test_kernel_reduce_zero_count),
        cmocka_unit_test(test_kernel_reduce_mul_matches_loop),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
