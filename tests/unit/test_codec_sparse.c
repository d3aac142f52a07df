/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Unit tests for the sparsifiers: topk (codec_topk.c) keeps exactly the k
 * largest |x| (checked against a sort, with ties), values bit-exact and
 * indices ascending; randk (codec_randk.c) keeps exactly one element per
 * stratum, bit-exact, chosen by the seed. Both: error identity
 * ||x - y||^2 = sum of the dropped squares, and k = round(ratio x n).
 * And the random-k all-reduce path (algo_sparse.c) on one rank: the same
 * bits as encode + decode, with no heap allocation once warm.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include <cmocka.h>

#include "algo/select/select.h"
#include "algo/sched/algo_comp.h"
#include "codec_test_util.h"

/*
 * Allocation counter: this executable's malloc, calloc and realloc forward
 * to glibc's own (__libc_*, exported for replacements like this one) and
 * count the calls made while g_counting is set, the library's included
 * (it is linked in statically). Not under ASan, TSan or MSan, whose
 * allocators must see every call, nor outside glibc.
 */
#if defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer) ||                         \
    __has_feature(memory_sanitizer)
#define SPARSE_TEST_SANITIZED 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define SPARSE_TEST_SANITIZED 1
#endif
#if defined(__GLIBC__) && !defined(SPARSE_TEST_SANITIZED)
#define SPARSE_TEST_COUNT_ALLOCS 1

extern void *__libc_malloc(size_t n);
extern void *__libc_calloc(size_t n, size_t size);
extern void *__libc_realloc(void *p, size_t n);
extern void __libc_free(void *p);

static int g_counting;
static size_t g_allocs;

void *malloc(size_t n)
{
    g_allocs += (g_counting != 0);
    return __libc_malloc(n);
}

void *calloc(size_t n, size_t size)
{
    g_allocs += (g_counting != 0);
    return __libc_calloc(n, size);
}

void *realloc(void *p, size_t n)
{
    g_allocs += (g_counting != 0);
    return __libc_realloc(p, n);
}

void free(void *p)
{
    __libc_free(p);
}
#endif

static int cmp_desc(const void *a, const void *b)
{
    const float x = *(const float *)a, y = *(const float *)b;

    return (x < y) - (x > y);
}

static size_t expected_k(double ratio, size_t n)
{
    double k = floor(ratio * (double)n + 0.5);

    k = (k < 1) ? 1 : k;
    return (n == 0) ? 0 : (size_t)((k > (double)n) ? (double)n : k);
}

/* Decode, then check: nonzeros are exact copies of x, the error is the
 * dropped mass, and (topk) every kept |x| >= every dropped |x|. */
static void check_sparse(gs_codec_kind_t kind, const float *x, size_t n, double ratio)
{
    gs_codec_config_t cfg = codec_cfg(kind);
    float *y = malloc((n > 0 ? n : 1) * sizeof(float));
    float *sorted = malloc((n > 0 ? n : 1) * sizeof(float));
    codec_buf_t b;
    size_t i, kept = 0, k = expected_k(ratio, n);
    double dropped = 0, err;

    assert_non_null(y);
    assert_non_null(sorted);
    cfg.ratio = ratio;
    cfg.seed = 99;
    codec_buf_init(&b, &cfg, n, GS_DTYPE_F32);
    codec_encode_ok(&cfg, x, n, GS_DTYPE_F32, GS_EF_NULL, &b);
    assert_int_equal(b.len, GS_CODEC_HEADER_BYTES + ((kind == GS_CODEC_TOPK) ? 8 * k : 8 + 4 * k));
    for (i = 0; i < n; i++) {
        y[i] = -12345.0f; /* decode overwrites every element */
    }
    codec_decode_ok(&cfg, &b, n, GS_DTYPE_F32, y);
    for (i = 0; i < n; i++) {
        if (y[i] != 0.0f) {
            assert_true(y[i] == x[i]);
            kept++;
        } else {
            dropped += (double)x[i] * x[i];
        }
        sorted[i] = fabsf(x[i]);
    }
    assert_int_equal(kept, k); /* inputs have no zeros */
    err = codec_diff_norm2(x, y, n);
    assert_true(fabs(err * err - dropped) <= 1e-9 * (dropped + 1));
    if ((kind == GS_CODEC_TOPK) && (k > 0)) {
        const float kth = (qsort(sorted, n, sizeof(float), cmp_desc), sorted[k - 1]);

        for (i = 0; i < n; i++) {
            if (y[i] != 0.0f) {
                assert_true(fabsf(x[i]) >= kth);
            } else {
                assert_true(fabsf(x[i]) <= kth);
            }
        }
    }
    if ((kind == GS_CODEC_RANDK) && (k > 0)) {
        /* Exactly one kept element in each stratum [j n / k, (j + 1) n / k). */
        for (size_t j = 0; j < k; j++) {
            const size_t lo = (size_t)(((uint64_t)j * n) / k);
            const size_t hi = (size_t)(((uint64_t)(j + 1) * n) / k);
            size_t in = 0;

            for (i = lo; i < hi; i++) {
                in += (y[i] != 0.0f);
            }
            assert_int_equal(in, 1);
        }
    }
    codec_buf_free(&b);
    free(y);
    free(sorted);
}

static void test_codec_sparse_roundtrip(void **state)
{
    static const size_t counts[] = {0, 1, 2, 3, 100, 1000, 65537};
    static const double ratios[] = {1e-6, 0.01, 0.1, 0.5, 1.0};
    size_t c, r, i;

    (void)state;
    for (c = 0; c < sizeof(counts) / sizeof(counts[0]); c++) {
        float *x = codec_normal_vec(1000 + c, counts[c], 1.0);

        for (i = 0; i < counts[c]; i++) {
            x[i] = (x[i] == 0.0f) ? 1.0f : x[i];
        }
        for (r = 0; r < sizeof(ratios) / sizeof(ratios[0]); r++) {
            check_sparse(GS_CODEC_TOPK, x, counts[c], ratios[r]);
            check_sparse(GS_CODEC_RANDK, x, counts[c], ratios[r]);
        }
        free(x);
    }
}

/* Many equal magnitudes: topk takes exactly k, the earliest ties first. */
static void test_codec_topk_ties(void **state)
{
    float x[1000], y[1000];
    gs_codec_config_t cfg = codec_cfg(GS_CODEC_TOPK);
    codec_buf_t b;
    size_t i;

    (void)state;
    for (i = 0; i < 1000; i++) {
        x[i] = ((i % 2) != 0) ? 0.5f : -0.5f;
    }
    x[900] = 2.0f;
    cfg.ratio = 0.01; /* k = 10 */
    codec_buf_init(&b, &cfg, 1000, GS_DTYPE_F32);
    codec_encode_ok(&cfg, x, 1000, GS_DTYPE_F32, GS_EF_NULL, &b);
    codec_decode_ok(&cfg, &b, 1000, GS_DTYPE_F32, y);
    assert_true(y[900] == 2.0f);
    for (i = 0; i < 1000; i++) {
        if (i == 900) {
            continue;
        }
        assert_true(y[i] == ((i < 9) ? x[i] : 0.0f));
    }
    codec_buf_free(&b);
}

/* randk: the seed decides the indices; the decoder takes it from the body. */
static void test_codec_randk_seed(void **state)
{
    const size_t n = 10000;
    float *x = codec_normal_vec(8, n, 1.0), *y1 = malloc(n * 4), *y2 = malloc(n * 4);
    gs_codec_config_t cfg = codec_cfg(GS_CODEC_RANDK);
    codec_buf_t b;

    (void)state;
    assert_non_null(y1);
    assert_non_null(y2);
    cfg.ratio = 0.05;
    cfg.seed = 1;
    codec_buf_init(&b, &cfg, n, GS_DTYPE_F32);
    codec_encode_ok(&cfg, x, n, GS_DTYPE_F32, GS_EF_NULL, &b);
    codec_decode_ok(&cfg, &b, n, GS_DTYPE_F32, y1);
    cfg.seed = 2; /* the decoder's own seed does not matter */
    codec_decode_ok(&cfg, &b, n, GS_DTYPE_F32, y2);
    assert_memory_equal(y1, y2, n * 4);
    codec_encode_ok(&cfg, x, n, GS_DTYPE_F32, GS_EF_NULL, &b);
    codec_decode_ok(&cfg, &b, n, GS_DTYPE_F32, y2);
    assert_true(memcmp(y1, y2, n * 4) != 0);
    codec_buf_free(&b);
    free(x);
    free(y1);
    free(y2);
}

/* The random-k all-reduce (GS_SCHEME_SPARSE_SHARED) on a one-rank context, five
 * error-feedback steps: each result is bit-identical to gs_codec_encode
 * and gs_codec_decode with an error-feedback state of its own, and from
 * the third step on nothing is allocated (the payload lives in the
 * context, grown only when it is too small). f16 also takes the context's
 * scratch for the conversion. */
static void sparse_shared_case(gs_dtype_t dtype)
{
    const size_t n = 10000, esize = (dtype == GS_DTYPE_F32) ? 4 : 2;
    float *xf = codec_normal_vec(21, n, 1.0);
    uint8_t *x = malloc(n * esize), *y = malloc(n * esize), *want = malloc(n * esize);
    gs_codec_config_t cfg = codec_cfg(GS_CODEC_RANDK);
    gs__algo_ctx_t ctx;
    gs__algo_select_t sel;
    gs_ef_t ef, ref_ef;
    gs__coll_desc_t d;
    codec_buf_t b;

    assert_true((x != NULL) && (y != NULL) && (want != NULL));
    for (size_t i = 0; i < n; i++) {
        if (dtype == GS_DTYPE_F32) {
            memcpy(x + 4 * i, &xf[i], 4);
        } else { /* f16 near xf[i]: any bits of a finite half will do */
            const uint16_t h =
                (uint16_t)(0x3c00u + (i * 37u) % 0x0c00u) | (uint16_t)((xf[i] < 0) ? 0x8000u : 0u);

            memcpy(x + 2 * i, &h, 2);
        }
    }
    cfg.ratio = 0.05;
    cfg.seed = 7;
    assert_int_equal(gs_ef_create(n, dtype, &ef), GS_OK);
    assert_int_equal(gs_ef_create(n, dtype, &ref_ef), GS_OK);
    memset(&ctx, 0, sizeof(ctx));
    ctx.size = 1;
    ctx.opname = "gs_allreduce";
    ctx.timeout_ns = 10000000000ull;
    /* As the communicator does: with an all-zero model, every choice of
     * the inner all-reduce would read the cache size from sysfs. */
    memset(&sel, 0, sizeof(sel));
    gs__algo_model_init(&sel.model, 0, 0, 0);
    memset(&d, 0, sizeof(d));
    d.kind = GS_COLL_ALLREDUCE;
    d.sendbuf = x;
    d.recvbuf = y;
    d.count = n;
    d.dtype = dtype;
    d.op = GS_OP_SUM;
    d.codec = &cfg;
    d.ef = ef;
    {
        gs__algo_plan_t plan;

        assert_int_equal(gs__algo_plan(&sel, &ctx, &d, &plan), GS_OK);
        assert_int_equal(plan.scheme, GS_SCHEME_SPARSE_SHARED);
        assert_int_equal(plan.path, GS_PATH_HOST);
    }
    codec_buf_init(&b, &cfg, n, dtype);
    for (int step = 0; step < 5; step++) {
#if defined(SPARSE_TEST_COUNT_ALLOCS)
        g_counting = (step >= 2);
#endif
        assert_int_equal(gs__algo_run(&sel, &ctx, &d), GS_OK);
#if defined(SPARSE_TEST_COUNT_ALLOCS)
        g_counting = 0;
#endif
        codec_encode_ok(&cfg, x, n, dtype, ref_ef, &b);
        codec_decode_ok(&cfg, &b, n, dtype, want);
        assert_memory_equal(y, want, n * esize);
    }
#if defined(SPARSE_TEST_COUNT_ALLOCS)
    assert_int_equal(g_allocs, 0);
    g_allocs = 0;
#endif
    free(ctx.scratch);
    free(ctx.outer_buf);
    codec_buf_free(&b);
    gs_ef_destroy(ef);
    gs_ef_destroy(ref_ef);
    free(xf);
    free(x);
    free(y);
    free(want);
}

static void test_codec_randk_allreduce_steady_state(void **state)
{
    (void)state;
    sparse_shared_case(GS_DTYPE_F32);
    sparse_shared_case(GS_DTYPE_F16);
#if !defined(SPARSE_TEST_COUNT_ALLOCS)
    skip(); /* results checked; allocations not counted in this build */
#endif
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_codec_sparse_roundtrip),
        cmocka_unit_test(test_codec_topk_ties),
        cmocka_unit_test(test_codec_randk_seed),
        cmocka_unit_test(test_codec_randk_allreduce_steady_state),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
