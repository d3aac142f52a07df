/* SPDX-License-Identifier: Apache-2.0 */
/*
 * gs__rd_start, the start shared by recursive doubling and Rabenseifner
 * (algo_rd.c), on the paths that send nothing: one rank (recvbuf gets a copy
 * of sendbuf out of place, in place nothing changes), count 0 (nothing is
 * written), and ranks the fold leaves alone (scratch of count elements, the
 * vector read from sendbuf, recvbuf untouched). The context has no
 * transport, so a message on any of these paths would crash the test. The
 * folded ranks' messages are covered by the coll_w*_algo_rd and
 * _rabenseifner integration tests.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "algo/select/select.h"

#define COUNT 37

static void ctx_init(gs__algo_ctx_t *ctx, int rank, int size)
{
    memset(ctx, 0, sizeof(*ctx));
    ctx->rank = rank;
    ctx->size = size;
    ctx->opname = "gs_allreduce";
}

static gs__coll_desc_t desc(const void *sendbuf, void *recvbuf, size_t count)
{
    const gs__coll_desc_t d = {.kind = GS_COLL_ALLREDUCE,
                               .sendbuf = sendbuf,
                               .recvbuf = recvbuf,
                               .count = count,
                               .dtype = GS_DTYPE_F32,
                               .op = GS_OP_SUM};

    return d;
}

static void fill(float *buf, size_t n, float base)
{
    for (size_t i = 0; i < n; i++) {
        buf[i] = base + (float)i;
    }
}

static void test_rd_start_one_rank_copies(void **state)
{
    float in[COUNT], out[COUNT], want[COUNT];
    gs__algo_ctx_t ctx;
    gs__coll_desc_t d;
    void *tmp = &ctx; /* must be reset */
    const void *src = &ctx;
    int done = 0;

    (void)state;
    ctx_init(&ctx, 0, 1);
    fill(in, COUNT, 1.0f);
    fill(out, COUNT, -100.0f);
    d = desc(in, out, COUNT);
    assert_int_equal(gs__rd_start(&ctx, &d, &tmp, &src, &done), GS_OK);
    assert_int_equal(done, 1);
    assert_null(tmp);
    assert_null(src);
    assert_memory_equal(out, in, sizeof(in));
    assert_null(ctx.scratch); /* no scratch when there is nothing to do */

    /* In place: the vector stays as it is. */
    fill(want, COUNT, 7.0f);
    fill(out, COUNT, 7.0f);
    d = desc(out, out, COUNT);
    done = 0;
    assert_int_equal(gs__rd_start(&ctx, &d, &tmp, &src, &done), GS_OK);
    assert_int_equal(done, 1);
    assert_memory_equal(out, want, sizeof(want));
}

static void test_rd_start_count_zero_is_done(void **state)
{
    float in[1] = {3.0f};
    float out[1] = {-1.0f};
    gs__algo_ctx_t ctx;
    gs__coll_desc_t d = desc(in, out, 0);
    void *tmp = NULL;
    const void *src = NULL;
    int done = 0;

    (void)state;
    /* Rank 0 of 3 is folded when count > 0; with count 0 it sends nothing. */
    ctx_init(&ctx, 0, 3);
    assert_int_equal(gs__rd_start(&ctx, &d, &tmp, &src, &done), GS_OK);
    assert_int_equal(done, 1);
    assert_true(out[0] == -1.0f);
    assert_null(ctx.scratch);
}

static void test_rd_start_unfolded_rank_reads_sendbuf(void **state)
{
    /* (size, rank): a power of two, and ranks at or beyond 2 * rem. */
    static const int cases[][2] = {{2, 0}, {4, 3}, {3, 2}, {6, 4}, {6, 5}, {7, 6}};
    float in[COUNT], out[COUNT], want[COUNT];

    (void)state;
    for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); c++) {
        gs__algo_ctx_t ctx;
        gs__coll_desc_t d;
        void *tmp = NULL;
        const void *src = NULL;
        int done = 1;

        ctx_init(&ctx, cases[c][1], cases[c][0]);
        fill(in, COUNT, 2.0f);
        fill(out, COUNT, -5.0f);
        fill(want, COUNT, -5.0f);
        d = desc(in, out, COUNT);
        assert_int_equal(gs__rd_start(&ctx, &d, &tmp, &src, &done), GS_OK);
        assert_int_equal(done, 0);
        assert_ptr_equal(src, in);
        assert_non_null(tmp);
        assert_ptr_equal(tmp, ctx.scratch);
        assert_true(ctx.scratch_cap >= sizeof(in));
        assert_memory_equal(out, want, sizeof(want));
        free(ctx.scratch);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_rd_start_one_rank_copies),
        cmocka_unit_test(test_rd_start_count_zero_is_done),
        cmocka_unit_test(test_rd_start_unfolded_rank_reads_sendbuf),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
