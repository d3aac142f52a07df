/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Gradient bucketing on one rank.
 * - The pure grouping (src/bucket/bucket_plan.c): reverse fill order, the
 *   small first bucket, DDP's "close once the limit is reached" rule, dtype
 *   splits, one tensor per bucket at 0 bytes, the ascending-id layout,
 *   contiguity (flat buffers, gaps, reversed memory, empty tensors), the
 *   permutation check; and the grouping's invariants over many random
 *   tensor lists and fill orders.
 * - The public API on a one-rank communicator (an all-reduce over one rank
 *   is the identity, so every value must come back unchanged through the
 *   fusion copies and in place): every argument error, each changing
 *   nothing; wait with unmarked tensors naming them and then completing;
 *   the rebuild from an out-of-order first step; ready() from four threads
 *   over many steps; destroy with buckets in flight.
 * - Device tensors through the fake CUDA driver (tests/fake_cuda, loaded
 *   here by path; skipped when absent): a flat device buffer is accepted
 *   and reduced in place, a gap or mixed kinds are GS_ERR_UNSUPPORTED.
 * Multi-rank behaviour is tests/integration/bucket_check.c.
 */
#include <dlfcn.h>
#include <limits.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "device/memkind.h"
#include "bucket/bucket_plan.h"
#include "gradsync/bucket.h"
#include "gradsync/compress.h"
#include "gradsync/gradsync.h"

#define KIB 1024u
#define MIB (1024u * 1024u)

static gs_comm_t comm;

/* ===================================================================== */
/* Pure grouping                                                         */
/* ===================================================================== */

static gs__bplan_tensor_t tensor(uintptr_t addr, size_t count, gs_dtype_t dtype)
{
    const size_t esize = (dtype == GS_DTYPE_F64 || dtype == GS_DTYPE_I64)    ? 8
                         : (dtype == GS_DTYPE_F16 || dtype == GS_DTYPE_BF16) ? 2
                         : (dtype == GS_DTYPE_I8 || dtype == GS_DTYPE_U8)    ? 1
                                                                             : 4;

    return (gs__bplan_tensor_t){.addr = addr, .count = count, .esize = esize, .dtype = dtype};
}

static size_t assign_reverse(const gs__bplan_tensor_t *t, size_t n, uint64_t first, uint64_t bytes,
                             uint32_t *bucket_of)
{
    uint32_t order[256];

    assert_true(n <= 256);
    gs__bplan_reverse_order(order, n);
    return gs__bplan_assign(t, n, order, first, bytes, bucket_of);
}

static void test_bucket_plan_reverse_order(void **state)
{
    gs__bplan_tensor_t t[10];
    uint32_t bucket_of[10];

    (void)state;
    for (size_t i = 0; i < 10; i++) {
        t[i] = tensor(0, 1000, GS_DTYPE_F32); /* 4000 bytes each */
    }
    /* first 4000: the last tensor alone; then 3 per 12000-byte bucket. */
    assert_int_equal(assign_reverse(t, 10, 4000, 12000, bucket_of), 4);
    assert_int_equal(bucket_of[9], 0);
    assert_int_equal(bucket_of[8], 1);
    assert_int_equal(bucket_of[7], 1);
    assert_int_equal(bucket_of[6], 1);
    assert_int_equal(bucket_of[5], 2);
    assert_int_equal(bucket_of[3], 2);
    assert_int_equal(bucket_of[2], 3);
    assert_int_equal(bucket_of[0], 3);
}

static void test_bucket_plan_first_bucket_size(void **state)
{
    gs__bplan_tensor_t t[104];
    uint32_t bucket_of[104];
    size_t nb;

    (void)state;
    for (size_t i = 0; i < 104; i++) {
        t[i] = tensor(0, 64 * KIB, GS_DTYPE_F32); /* 256 KiB each */
    }
    nb = assign_reverse(t, 104, 1 * MIB, 25 * MIB, bucket_of);
    /* 4 tensors fill the 1 MiB first bucket exactly, 100 fill one 25 MiB bucket. */
    assert_int_equal(nb, 2);
    for (size_t i = 100; i < 104; i++) {
        assert_int_equal(bucket_of[i], 0);
    }
    for (size_t i = 0; i < 100; i++) {
        assert_int_equal(bucket_of[i], 1);
    }
}

static void test_bucket_plan_crossing_tensor_stays(void **state)
{
    /* DDP: the tensor that crosses the limit stays in the bucket that it closes. */
    gs__bplan_tensor_t t[3] = {tensor(0, 10, GS_DTYPE_F32), tensor(0, 3 * MIB, GS_DTYPE_F32),
                               tensor(0, 10, GS_DTYPE_F32)};
    uint32_t bucket_of[3];

    (void)state;
    assert_int_equal(assign_reverse(t, 3, 1 * MIB, 25 * MIB, bucket_of), 2);
    assert_int_equal(bucket_of[2], 0);
    assert_int_equal(bucket_of[1], 0); /* 12 MiB in a 1 MiB first bucket */
    assert_int_equal(bucket_of[0], 1);
}

static void test_bucket_plan_dtype_splits(void **state)
{
    gs__bplan_tensor_t t[6] = {tensor(0, 8, GS_DTYPE_F32), tensor(0, 8, GS_DTYPE_F32),
                               tensor(0, 8, GS_DTYPE_F16), tensor(0, 8, GS_DTYPE_F32),
                               tensor(0, 8, GS_DTYPE_I64), tensor(0, 8, GS_DTYPE_I64)};
    uint32_t bucket_of[6];

    (void)state;
    /* Limits far above the data: only the dtype changes close buckets. */
    assert_int_equal(assign_reverse(t, 6, MIB, MIB, bucket_of), 4);
    assert_int_equal(bucket_of[5], 0);
    assert_int_equal(bucket_of[4], 0);
    assert_int_equal(bucket_of[3], 1);
    assert_int_equal(bucket_of[2], 2);
    assert_int_equal(bucket_of[1], 3);
    assert_int_equal(bucket_of[0], 3);
}

static void test_bucket_plan_zero_bytes_one_per_bucket(void **state)
{
    gs__bplan_tensor_t t[5];
    uint32_t bucket_of[5];

    (void)state;
    for (size_t i = 0; i < 5; i++) {
        t[i] = tensor(0, i, GS_DTYPE_F32); /* tensor 0 is empty */
    }
    assert_int_equal(assign_reverse(t, 5, 0, 0, bucket_of), 5);
    for (size_t i = 0; i < 5; i++) {
        assert_int_equal(bucket_of[i], 4 - i);
    }
    assert_int_equal(assign_reverse(t, 0, 0, 0, bucket_of), 0);
}

static void test_bucket_plan_layout_ascending(void **state)
{
    gs__bplan_tensor_t t[5];
    const uint32_t order[5] = {3, 0, 4, 1, 2};
    uint32_t bucket_of[5], members[5];
    size_t first[6], offset_of[5], count_of[5], nb;

    (void)state;
    for (size_t i = 0; i < 5; i++) {
        t[i] = tensor(0, 10 + i, GS_DTYPE_F32);
    }
    /* 3, 0 | 4, 1 | 2: bytes 52+40 >= 80, 56+44 >= 80. */
    nb = gs__bplan_assign(t, 5, order, 80, 80, bucket_of);
    assert_int_equal(nb, 3);
    gs__bplan_layout(t, 5, bucket_of, nb, first, members, offset_of, count_of);
    assert_int_equal(first[0], 0);
    assert_int_equal(first[1], 2);
    assert_int_equal(first[2], 4);
    assert_int_equal(first[3], 5);
    /* Ascending ids inside each bucket, offsets in that order. */
    assert_int_equal(members[0], 0);
    assert_int_equal(members[1], 3);
    assert_int_equal(members[2], 1);
    assert_int_equal(members[3], 4);
    assert_int_equal(members[4], 2);
    assert_int_equal(offset_of[0], 0);
    assert_int_equal(offset_of[3], 10);
    assert_int_equal(offset_of[1], 0);
    assert_int_equal(offset_of[4], 11);
    assert_int_equal(offset_of[2], 0);
    assert_int_equal(count_of[0], 23);
    assert_int_equal(count_of[1], 25);
    assert_int_equal(count_of[2], 12);
}

static void test_bucket_plan_contiguity(void **state)
{
    const uintptr_t base = 0x10000;
    gs__bplan_tensor_t flat[4] = {tensor(base, 3, GS_DTYPE_F32), tensor(base + 12, 0, GS_DTYPE_F32),
                                  tensor(base + 12, 5, GS_DTYPE_F32),
                                  tensor(base + 32, 1, GS_DTYPE_F32)};
    gs__bplan_tensor_t gap[2] = {tensor(base, 3, GS_DTYPE_F32), tensor(base + 16, 1, GS_DTYPE_F32)};
    /* Back to back, but the higher id lies first in memory. */
    gs__bplan_tensor_t rev[2] = {tensor(base + 12, 3, GS_DTYPE_F32), tensor(base, 3, GS_DTYPE_F32)};
    gs__bplan_tensor_t empty[2] = {tensor(0, 0, GS_DTYPE_F32), tensor(0x777, 0, GS_DTYPE_F32)};
    const uint32_t all[4] = {0, 1, 2, 3}, tail[2] = {2, 3};
    uintptr_t got = 1;

    (void)state;
    assert_true(gs__bplan_contiguous(flat, all, 4, &got));
    assert_int_equal(got, base);
    assert_true(gs__bplan_contiguous(flat, tail, 2, &got));
    assert_int_equal(got, base + 12);
    /* An empty tensor at any address does not break a run. */
    flat[1].addr = 0xdead;
    assert_true(gs__bplan_contiguous(flat, all, 4, &got));
    got = 7;
    assert_false(gs__bplan_contiguous(gap, all, 2, &got));
    assert_int_equal(got, 7); /* untouched */
    assert_false(gs__bplan_contiguous(rev, all, 2, &got));
    assert_true(gs__bplan_contiguous(empty, all, 2, &got));
    assert_int_equal(got, 0);
}

static void test_bucket_plan_permutation(void **state)
{
    const uint32_t ok[4] = {2, 0, 3, 1}, dup[4] = {2, 0, 2, 1}, big[4] = {2, 0, 4, 1};
    uint8_t seen[4];
    uint32_t a[3] = {0, 1, 1}, b[3] = {0, 1, 1};

    (void)state;
    assert_true(gs__bplan_is_permutation(ok, 4, seen));
    assert_false(gs__bplan_is_permutation(dup, 4, seen));
    assert_false(gs__bplan_is_permutation(big, 4, seen));
    assert_true(gs__bplan_is_permutation(ok, 0, seen));
    assert_true(gs__bplan_same(a, b, 3));
    b[2] = 2;
    assert_false(gs__bplan_same(a, b, 3));
}

static uint64_t rng_next(uint64_t *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

/* Invariants of any grouping, over random tensors, limits and fill orders. */
static void test_bucket_plan_random_invariants(void **state)
{
    static const gs_dtype_t dts[3] = {GS_DTYPE_F32, GS_DTYPE_F16, GS_DTYPE_F64};
    uint64_t s = 0x9e3779b97f4a7c15ull;

    (void)state;
    for (int iter = 0; iter < 3000; iter++) {
        gs__bplan_tensor_t t[64];
        uint32_t order[64], bucket_of[64], members[64];
        size_t first[65], offset_of[64], count_of[64];
        const size_t n = rng_next(&s) % 64;
        const uint64_t lim0 = rng_next(&s) % 600, lim = rng_next(&s) % 2000;
        const int mixed = (int)(rng_next(&s) % 2);
        size_t nb;

        for (size_t i = 0; i < n; i++) {
            t[i] = tensor(0, rng_next(&s) % 100, mixed ? dts[rng_next(&s) % 3] : GS_DTYPE_F32);
            order[i] = (uint32_t)i;
        }
        for (size_t i = n; i > 1; i--) { /* Fisher-Yates */
            const size_t j = rng_next(&s) % i;
            const uint32_t x = order[i - 1];

            order[i - 1] = order[j];
            order[j] = x;
        }
        nb = gs__bplan_assign(t, n, order, lim0, lim, bucket_of);
        assert_true(nb <= n);
        assert_true((n == 0) == (nb == 0));
        /* Buckets are consecutive runs of the fill order, one dtype each, and
         * each but the last closes at its limit or at a dtype change. */
        for (size_t k = 0; k < n; k++) {
            const uint32_t bk = bucket_of[order[k]];

            assert_true(bk < nb);
            if (k == 0) {
                assert_int_equal(bk, 0);
                continue;
            }
            const uint32_t prev = bucket_of[order[k - 1]];

            assert_true((bk == prev) || (bk == prev + 1));
            if (bk == prev) {
                assert_int_equal(t[order[k]].dtype, t[order[k - 1]].dtype);
            }
        }
        uint64_t filled = 0;

        for (size_t k = 0; k < n; k++) {
            const uint32_t bk = bucket_of[order[k]];
            const int last_of_bucket = (k + 1 == n) || (bucket_of[order[k + 1]] != bk);

            filled += t[order[k]].count * t[order[k]].esize;
            if (!last_of_bucket) {
                /* Not closed yet: below the limit. */
                assert_true(filled < ((bk == 0) ? lim0 : lim));
            } else {
                if ((k + 1 < n) && (t[order[k + 1]].dtype == t[order[k]].dtype)) {
                    assert_true(filled >= ((bk == 0) ? lim0 : lim));
                }
                filled = 0;
            }
        }
        gs__bplan_layout(t, n, bucket_of, nb, first, members, offset_of, count_of);
        assert_int_equal(first[nb], n);
        for (size_t b = 0; b < nb; b++) {
            size_t off = 0;

            assert_true(first[b] < first[b + 1]); /* no empty bucket */
            for (size_t k = first[b]; k < first[b + 1]; k++) {
                assert_int_equal(bucket_of[members[k]], b);
                assert_int_equal(offset_of[members[k]], off);
                off += t[members[k]].count;
                if (k > first[b]) {
                    assert_true(members[k] > members[k - 1]);
                }
            }
            assert_int_equal(count_of[b], off);
        }
    }
}

/* ===================================================================== */
/* Public API on one rank                                                */
/* ===================================================================== */

static int setup(void **state)
{
    (void)state;
    unsetenv("GS_RANK");
    unsetenv("GS_WORLD_SIZE");
    unsetenv("RANK");
    unsetenv("WORLD_SIZE");
    return (gs_comm_init_env(&comm, NULL) == GS_OK) ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    return (gs_comm_destroy(comm) == GS_OK) ? 0 : -1;
}

static void fill(float *x, size_t n, float seed)
{
    for (size_t i = 0; i < n; i++) {
        x[i] = seed + (float)i * 0.5f;
    }
}

static void check(const float *x, size_t n, float seed)
{
    for (size_t i = 0; i < n; i++) {
        assert_true(x[i] == seed + (float)i * 0.5f);
    }
}

static gs_bucketer_t make(int64_t first, int64_t bytes, gs_op_t op)
{
    gs_bucketer_opts_t o = GS_BUCKETER_OPTS_INIT;
    gs_bucketer_t b = GS_BUCKETER_NULL;

    o.first_bucket_bytes = first;
    o.bucket_bytes = bytes;
    o.op = op;
    assert_int_equal(gs_bucketer_create(comm, &o, &b), GS_OK);
    return b;
}

static void test_bucket_api_create_errors(void **state)
{
    gs_bucketer_opts_t o = GS_BUCKETER_OPTS_INIT;
    gs_codec_config_t codec = GS_CODEC_CONFIG_INIT;
    gs_bucketer_t b = GS_BUCKETER_NULL;

    (void)state;
    assert_int_equal(gs_bucketer_create(NULL, NULL, &b), GS_ERR_INVALID_ARG);
    assert_int_equal(gs_bucketer_create(comm, NULL, NULL), GS_ERR_INVALID_ARG);
    o.op = GS_OP_MAX;
    assert_int_equal(gs_bucketer_create(comm, &o, &b), GS_ERR_INVALID_ARG);
    assert_non_null(strstr(gs_last_error(), "GS_OP_SUM or GS_OP_AVG"));
    o.op = GS_OP_SUM;
    o.bucket_bytes = -5;
    assert_int_equal(gs_bucketer_create(comm, &o, &b), GS_ERR_INVALID_ARG);
    assert_non_null(strstr(gs_last_error(), "bucket_bytes"));
    o.bucket_bytes = GS_UNSET;
    o.size = 8;
    assert_int_equal(gs_bucketer_create(comm, &o, &b), GS_ERR_INVALID_ARG);
    o.size = sizeof(o);
    o.flags = 1;
    assert_int_equal(gs_bucketer_create(comm, &o, &b), GS_ERR_INVALID_ARG);
    o.flags = 0;
    o.codec = &codec;
    o.algo = GS_ALGO_RING;
    codec.kind = GS_CODEC_INT8;
    assert_int_equal(gs_bucketer_create(comm, &o, &b), GS_ERR_INVALID_ARG);
    assert_non_null(strstr(gs_last_error(), "GS_ALGO_AUTO"));
    o.algo = GS_ALGO_AUTO;
    codec.block_size = 0;
    assert_int_equal(gs_bucketer_create(comm, &o, &b), GS_ERR_INVALID_ARG);
    assert_non_null(strstr(gs_last_error(), "opts->codec"));
    assert_ptr_equal(b, GS_BUCKETER_NULL); /* never written on error */
    codec.block_size = GS_UNSET;
    o.error_feedback = 3;
    assert_int_equal(gs_bucketer_create(comm, &o, &b), GS_ERR_INVALID_ARG);
    o.error_feedback = GS_UNSET;
    assert_int_equal(gs_bucketer_create(comm, &o, &b), GS_OK);
    assert_int_equal(gs_bucketer_destroy(b), GS_OK);
    assert_int_equal(gs_bucketer_destroy(GS_BUCKETER_NULL), GS_OK);
    assert_int_equal(gs_bucketer_create(comm, NULL, &b), GS_OK); /* defaults */
    assert_int_equal(gs_bucketer_destroy(b), GS_OK);
}

static void test_bucket_api_add_errors(void **state)
{
    float x[16], y[16];
    int32_t k[4];
    gs_bucketer_t b = make(GS_UNSET, GS_UNSET, GS_OP_AVG);
    gs_bucketer_stats_t st = GS_BUCKETER_STATS_INIT;
    size_t id = 99;

    (void)state;
    assert_int_equal(gs_bucketer_add(NULL, x, 16, GS_DTYPE_F32, &id), GS_ERR_INVALID_ARG);
    assert_int_equal(gs_bucketer_add(b, x, 16, GS_DTYPE_F32, NULL), GS_ERR_INVALID_ARG);
    assert_int_equal(gs_bucketer_add(b, NULL, 16, GS_DTYPE_F32, &id), GS_ERR_INVALID_ARG);
    assert_int_equal(gs_bucketer_add(b, x, 16, (gs_dtype_t)42, &id), GS_ERR_INVALID_ARG);
    /* Average of integers: no. */
    assert_int_equal(gs_bucketer_add(b, k, 4, GS_DTYPE_I32, &id), GS_ERR_INVALID_ARG);
    assert_non_null(strstr(gs_last_error(), "i32"));
    assert_int_equal(id, 99);
    assert_int_equal(gs_bucketer_add(b, x, 16, GS_DTYPE_F32, &id), GS_OK);
    assert_int_equal(id, 0);
    /* Overlap with tensor 0. */
    assert_int_equal(gs_bucketer_add(b, x + 8, 4, GS_DTYPE_F32, &id), GS_ERR_INVALID_ARG);
    assert_non_null(strstr(gs_last_error(), "overlaps tensor 0"));
    /* count 0 with NULL is fine, and so is an empty tensor inside another. */
    assert_int_equal(gs_bucketer_add(b, NULL, 0, GS_DTYPE_F32, &id), GS_OK);
    assert_int_equal(id, 1);
    assert_int_equal(gs_bucketer_add(b, x + 3, 0, GS_DTYPE_F32, &id), GS_OK);
    assert_int_equal(gs_bucketer_add(b, y, 16, GS_DTYPE_F32, &id), GS_OK);
    assert_int_equal(id, 3);
    assert_int_equal(gs_bucketer_stats(b, &st), GS_OK);
    assert_int_equal(st.tensors, 4);
    assert_int_equal(st.bytes, 128);
    assert_int_equal(st.buckets, 0);
    assert_int_equal(gs_bucketer_destroy(b), GS_OK);

    /* SUM takes integers; a codec does not. */
    b = make(GS_UNSET, GS_UNSET, GS_OP_SUM);
    assert_int_equal(gs_bucketer_add(b, k, 4, GS_DTYPE_I32, &id), GS_OK);
    assert_int_equal(gs_bucketer_destroy(b), GS_OK);
    {
        gs_bucketer_opts_t o = GS_BUCKETER_OPTS_INIT;
        gs_codec_config_t codec = GS_CODEC_CONFIG_INIT;

        codec.kind = GS_CODEC_INT8;
        o.op = GS_OP_SUM;
        o.codec = &codec;
        assert_int_equal(gs_bucketer_create(comm, &o, &b), GS_OK);
        assert_int_equal(gs_bucketer_add(b, k, 4, GS_DTYPE_I32, &id), GS_ERR_INVALID_ARG);
        assert_non_null(strstr(gs_last_error(), "codec"));
        assert_int_equal(gs_bucketer_add(b, x, 16, GS_DTYPE_F32, &id), GS_OK);
        assert_int_equal(gs_bucketer_destroy(b), GS_OK);
    }
}

/* Tensors of a step: separate buffers (fusion copies) of odd sizes and an empty one. */
static void test_bucket_api_step_errors_change_nothing(void **state)
{
    enum { N = 7 };
    float *t[N];
    size_t ids[N], id;
    gs_bucketer_t b = make(64, 256, GS_OP_AVG);
    gs_bucketer_stats_t st = GS_BUCKETER_STATS_INIT;
    gs_bucket_info_t info = GS_BUCKET_INFO_INIT;
    size_t bk, off;

    (void)state;
    for (int i = 0; i < N; i++) {
        const size_t n = (i == 2) ? 0 : (size_t)(7 + 13 * i);

        t[i] = malloc((n + 1) * sizeof(float));
        fill(t[i], n, (float)(100 * i));
        assert_int_equal(gs_bucketer_add(b, t[i], n, GS_DTYPE_F32, &ids[i]), GS_OK);
        assert_int_equal(ids[i], (size_t)i);
    }
    assert_int_equal(gs_bucketer_bucket_info(b, 0, &info), GS_ERR_INVALID_USAGE);
    assert_int_equal(gs_bucketer_locate(b, 0, &bk, &off), GS_ERR_INVALID_USAGE);
    /* Nothing marked: every id named. */
    assert_int_equal(gs_bucketer_wait(b), GS_ERR_INVALID_ARG);
    assert_non_null(strstr(gs_last_error(), "7 of 7 tensors"));
    assert_int_equal(gs_bucketer_ready(b, N), GS_ERR_INVALID_ARG);
    assert_non_null(strstr(gs_last_error(), "unknown tensor id 7"));
    assert_int_equal(gs_bucketer_ready(NULL, 0), GS_ERR_INVALID_ARG);
    for (int step = 0; step < 3; step++) {
        assert_int_equal(gs_bucketer_ready(b, 6), GS_OK);
        assert_int_equal(gs_bucketer_ready(b, 6), GS_ERR_INVALID_ARG);
        assert_non_null(strstr(gs_last_error(), "tensor 6 was already marked"));
        for (int i = 0; i < N; i++) {
            if ((i != 6) && (i != 1) && (i != 4)) {
                assert_int_equal(gs_bucketer_ready(b, (size_t)i), GS_OK);
            }
        }
        /* 1 and 4 missing: named, nothing changed. */
        assert_int_equal(gs_bucketer_wait(b), GS_ERR_INVALID_ARG);
        assert_non_null(strstr(gs_last_error(), "2 of 7 tensors"));
        assert_non_null(strstr(gs_last_error(), ": 1, 4;"));
        assert_int_equal(gs_bucketer_add(b, &id, 1, GS_DTYPE_F32, &id), GS_ERR_INVALID_ARG);
        assert_non_null(strstr(gs_last_error(), "registration closed"));
        assert_int_equal(gs_bucketer_ready(b, 4), GS_OK);
        assert_int_equal(gs_bucketer_wait(b), GS_ERR_INVALID_ARG);
        assert_non_null(strstr(gs_last_error(), "1 of 7 tensors"));
        assert_int_equal(gs_bucketer_ready(b, 1), GS_OK);
        assert_int_equal(gs_bucketer_wait(b), GS_OK);
        for (int i = 0; i < N; i++) {
            check(t[i], (i == 2) ? 0 : (size_t)(7 + 13 * i), (float)(100 * i));
        }
    }
    assert_int_equal(gs_bucketer_stats(b, &st), GS_OK);
    assert_int_equal(st.steps, 3);
    assert_int_equal(st.failed_steps, 0);
    assert_true(st.buckets >= 3);
    assert_true(st.fusion_bytes > 0);
    assert_int_equal(gs_bucketer_bucket_info(b, st.buckets, &info), GS_ERR_INVALID_ARG);
    assert_int_equal(gs_bucketer_locate(b, N, &bk, &off), GS_ERR_INVALID_ARG);
    assert_int_equal(gs_bucketer_locate(b, 6, &bk, &off), GS_OK);
    st.size = 3;
    assert_int_equal(gs_bucketer_stats(b, &st), GS_ERR_INVALID_ARG);
    assert_int_equal(gs_bucketer_destroy(b), GS_OK);
    for (int i = 0; i < N; i++) {
        free(t[i]);
    }
}

/* One flat buffer in forward order: every bucket in place, no fusion buffer. */
static void test_bucket_api_flat_in_place(void **state)
{
    enum { N = 9 };
    const size_t sizes[N] = {5, 64, 0, 1, 33, 100, 7, 16, 3};
    size_t total = 0, off = 0, id;
    float *flat;
    gs_bucketer_t b = make(100, 300, GS_OP_SUM);
    gs_bucketer_stats_t st = GS_BUCKETER_STATS_INIT;

    (void)state;
    for (int i = 0; i < N; i++) {
        total += sizes[i];
    }
    flat = malloc(total * sizeof(float));
    fill(flat, total, 1.0f);
    for (int i = 0; i < N; i++) {
        assert_int_equal(gs_bucketer_add(b, flat + off, sizes[i], GS_DTYPE_F32, &id), GS_OK);
        off += sizes[i];
    }
    for (int step = 0; step < 2; step++) {
        for (int i = N - 1; i >= 0; i--) {
            assert_int_equal(gs_bucketer_ready(b, (size_t)i), GS_OK);
        }
        assert_int_equal(gs_bucketer_wait(b), GS_OK);
    }
    check(flat, total, 1.0f);
    assert_int_equal(gs_bucketer_stats(b, &st), GS_OK);
    assert_true(st.buckets > 2);
    assert_int_equal(st.inplace_buckets, st.buckets);
    assert_int_equal(st.fusion_bytes, 0);
    assert_int_equal(st.rebuilt, 0); /* reverse order observed: same grouping */
    assert_int_equal(gs_bucketer_destroy(b), GS_OK);
    free(flat);
}

/* Step 1 in forward order regroups; the values stay right before and after. */
static void test_bucket_api_rebuild(void **state)
{
    enum { N = 12 };
    float *t[N];
    size_t id, bk0, bk11, off;
    gs_bucketer_t b = make(64, 200, GS_OP_AVG);
    gs_bucketer_stats_t st = GS_BUCKETER_STATS_INIT;

    (void)state;
    for (int i = 0; i < N; i++) {
        t[i] = malloc(20 * sizeof(float));
        fill(t[i], 20, (float)i);
        assert_int_equal(gs_bucketer_add(b, t[i], 20, GS_DTYPE_F32, &id), GS_OK);
    }
    for (int i = 0; i < N; i++) {
        assert_int_equal(gs_bucketer_ready(b, (size_t)i), GS_OK);
    }
    assert_int_equal(gs_bucketer_locate(b, 11, &bk11, &off), GS_OK);
    assert_int_equal(bk11, 0);
    assert_int_equal(gs_bucketer_wait(b), GS_OK);
    assert_int_equal(gs_bucketer_stats(b, &st), GS_OK);
    assert_int_equal(st.rebuilt, 1);
    /* Now tensor 0, seen ready first, is in the first bucket. */
    assert_int_equal(gs_bucketer_locate(b, 0, &bk0, &off), GS_OK);
    assert_int_equal(bk0, 0);
    for (int step = 0; step < 3; step++) {
        for (int i = 0; i < N; i++) {
            fill(t[i], 20, (float)(i + step));
            assert_int_equal(gs_bucketer_ready(b, (size_t)i), GS_OK);
        }
        assert_int_equal(gs_bucketer_wait(b), GS_OK);
        for (int i = 0; i < N; i++) {
            check(t[i], 20, (float)(i + step));
        }
    }
    assert_int_equal(gs_bucketer_destroy(b), GS_OK);
    for (int i = 0; i < N; i++) {
        free(t[i]);
    }
}

typedef struct marker {
    gs_bucketer_t b;
    const size_t *ids;
    size_t n;
    int errors;
} marker_t;

static void *mark_thread(void *arg)
{
    marker_t *m = arg;

    for (size_t k = 0; k < m->n; k++) {
        if (gs_bucketer_ready(m->b, m->ids[k]) != GS_OK) {
            m->errors++;
        }
    }
    return NULL;
}

static void test_bucket_api_threads(void **state)
{
    enum { N = 40, THREADS = 4, STEPS = 25 };
    float *t[N];
    size_t id, order[N];
    uint64_t s = 12345;
    gs_bucketer_t b = make(256, 1024, GS_OP_AVG);

    (void)state;
    for (int i = 0; i < N; i++) {
        t[i] = malloc((size_t)(1 + 17 * i) * sizeof(float));
        assert_int_equal(gs_bucketer_add(b, t[i], (size_t)(1 + 17 * i), GS_DTYPE_F32, &id), GS_OK);
    }
    for (int step = 0; step < STEPS; step++) {
        pthread_t th[THREADS];
        marker_t m[THREADS];

        for (int i = 0; i < N; i++) {
            fill(t[i], (size_t)(1 + 17 * i), (float)(i * 7 + step));
            order[i] = (size_t)i;
        }
        for (size_t i = N; i > 1; i--) {
            const size_t j = rng_next(&s) % i, x = order[i - 1];

            order[i - 1] = order[j];
            order[j] = x;
        }
        for (int k = 0; k < THREADS; k++) {
            m[k] = (marker_t){.b = b, .ids = order + k * (N / THREADS), .n = N / THREADS};
            assert_int_equal(pthread_create(&th[k], NULL, mark_thread, &m[k]), 0);
        }
        for (int k = 0; k < THREADS; k++) {
            pthread_join(th[k], NULL);
            assert_int_equal(m[k].errors, 0);
        }
        assert_int_equal(gs_bucketer_wait(b), GS_OK);
        for (int i = 0; i < N; i++) {
            check(t[i], (size_t)(1 + 17 * i), (float)(i * 7 + step));
        }
    }
    assert_int_equal(gs_bucketer_destroy(b), GS_OK);
    for (int i = 0; i < N; i++) {
        free(t[i]);
    }
}

/* Destroy with every bucket started and none waited for. */
static void test_bucket_api_destroy_in_flight(void **state)
{
    float x[100], y[300];
    size_t id;
    gs_bucketer_t b = make(16, 16, GS_OP_SUM);

    (void)state;
    assert_int_equal(gs_bucketer_add(b, x, 100, GS_DTYPE_F32, &id), GS_OK);
    assert_int_equal(gs_bucketer_add(b, y, 300, GS_DTYPE_F32, &id), GS_OK);
    assert_int_equal(gs_bucketer_ready(b, 1), GS_OK);
    assert_int_equal(gs_bucketer_ready(b, 0), GS_OK);
    assert_int_equal(gs_bucketer_destroy(b), GS_OK);
}

/* ===================================================================== */
/* Device tensors (fake driver)                                          */
/* ===================================================================== */

typedef int (*fake_add_fn_t)(const void *base, size_t len, int device);
typedef void (*fake_clear_fn_t)(void);

/* Load tests/fake_cuda/libcuda.so.1 beside this program before the library looks for a driver. */
static fake_add_fn_t load_fake_driver(fake_clear_fn_t *clear_out)
{
    char exe[PATH_MAX], path[PATH_MAX + 32];
    ssize_t len = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
    char *slash;
    void *lib;

    if (len <= 0) {
        return NULL;
    }
    exe[len] = '\0';
    slash = strrchr(exe, '/');
    if (slash == NULL) {
        return NULL;
    }
    *slash = '\0';
    snprintf(path, sizeof(path), "%s/fake_cuda/libcuda.so.1", exe);
    lib = dlopen(path, RTLD_NOW | RTLD_GLOBAL);
    if (lib == NULL) {
        return NULL;
    }
    *clear_out = (fake_clear_fn_t)dlsym(lib, "gs_fake_cuda_clear");
    return (fake_add_fn_t)dlsym(lib, "gs_fake_cuda_add");
}

static fake_add_fn_t fake_add;
static fake_clear_fn_t fake_clear;

static void test_bucket_api_device_rules(void **state)
{
    float *dev, host[8];
    size_t id;
    gs_bucketer_t b;
    gs_bucketer_stats_t st = GS_BUCKETER_STATS_INIT;

    (void)state;
    if ((fake_add == NULL) || (fake_clear == NULL) || !gs__mem_driver_loaded()) {
        skip();
    }
    dev = malloc(64 * sizeof(float));
    assert_int_equal(fake_add(dev, 64 * sizeof(float), 0), 0);
    assert_true(gs__mem_is_device(dev, NULL));

    /* One flat device buffer in memory order: accepted, every bucket in place. */
    b = make(16, 64, GS_OP_AVG);
    assert_int_equal(gs_bucketer_add(b, dev, 10, GS_DTYPE_F32, &id), GS_OK);
    assert_int_equal(gs_bucketer_add(b, NULL, 0, GS_DTYPE_F32, &id), GS_OK);
    assert_int_equal(gs_bucketer_add(b, dev + 10, 30, GS_DTYPE_F32, &id), GS_OK);
    /* A gap, then host memory: unsupported, nothing changed. */
    assert_int_equal(gs_bucketer_add(b, dev + 41, 4, GS_DTYPE_F32, &id), GS_ERR_UNSUPPORTED);
    assert_non_null(strstr(gs_last_error(), "does not start where tensor 2 ends"));
    assert_int_equal(gs_bucketer_add(b, host, 8, GS_DTYPE_F32, &id), GS_ERR_UNSUPPORTED);
    assert_int_equal(gs_bucketer_add(b, dev + 40, 24, GS_DTYPE_F32, &id), GS_OK);
    assert_int_equal(id, 3);
    for (int i = 3; i >= 0; i--) {
        assert_int_equal(gs_bucketer_ready(b, (size_t)i), GS_OK);
    }
    /* This build has no CUDA: the in-place all-reduce refuses the device buffer. */
    assert_int_not_equal(gs_bucketer_wait(b), GS_OK);
    assert_non_null(strstr(gs_last_error(), "bucket 0"));
    assert_int_equal(gs_bucketer_stats(b, &st), GS_OK);
    assert_int_equal(st.device, 1);
    assert_int_equal(st.inplace_buckets, st.buckets);
    assert_int_equal(st.fusion_bytes, 0);
    assert_int_equal(gs_bucketer_destroy(b), GS_OK);

    /* Host first, then device: unsupported. */
    b = make(GS_UNSET, GS_UNSET, GS_OP_AVG);
    assert_int_equal(gs_bucketer_add(b, host, 8, GS_DTYPE_F32, &id), GS_OK);
    assert_int_equal(gs_bucketer_add(b, dev, 8, GS_DTYPE_F32, &id), GS_ERR_UNSUPPORTED);
    assert_non_null(strstr(gs_last_error(), "one kind"));
    assert_int_equal(gs_bucketer_destroy(b), GS_OK);
    fake_clear();
    free(dev);
}

int main(void)
{
    const struct CMUnitTest pure[] = {
        cmocka_unit_test(test_bucket_plan_reverse_order),
        cmocka_unit_test(test_bucket_plan_first_bucket_size),
        cmocka_unit_test(test_bucket_plan_crossing_tensor_stays),
        cmocka_unit_test(test_bucket_plan_dtype_splits),
        cmocka_unit_test(test_bucket_plan_zero_bytes_one_per_bucket),
        cmocka_unit_test(test_bucket_plan_layout_ascending),
        cmocka_unit_test(test_bucket_plan_contiguity),
        cmocka_unit_test(test_bucket_plan_permutation),
        cmocka_unit_test(test_bucket_plan_random_invariants),
    };
    const struct CMUnitTest api[] = {
        cmocka_unit_test(test_bucket_api_create_errors),
        cmocka_unit_test(test_bucket_api_add_errors),
        cmocka_unit_test(test_bucket_api_step_errors_change_nothing),
        cmocka_unit_test(test_bucket_api_flat_in_place),
        cmocka_unit_test(test_bucket_api_rebuild),
        cmocka_unit_test(test_bucket_api_threads),
        cmocka_unit_test(test_bucket_api_destroy_in_flight),
        cmocka_unit_test(test_bucket_api_device_rules),
    };
    int failed;

    /* Before any gradsync call can load a driver. */
    fake_add = load_fake_driver(&fake_clear);
    failed = cmocka_run_group_tests_name("bucket_plan", pure, NULL, NULL);
    failed += cmocka_run_group_tests_name("bucket_api", api, setup, teardown);
    return failed;
}
