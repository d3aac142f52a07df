/* SPDX-License-Identifier: Apache-2.0 */
/* GS_ALGO parsing, the algorithm table, tags and the balanced split. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "algo/algo.h"

static void test_algo_policy_bare_name(void **state)
{
    gs_algo_policy_t p;

    (void)state;
    assert_int_equal(gs__algo_policy_parse("ring", &p), GS_OK);
    assert_int_equal(p.forced[GS_COLL_ALLREDUCE], GS_ALGO_RING);
    assert_int_equal(p.forced[GS_COLL_ALLGATHER], GS_ALGO_RING);
    assert_int_equal(p.forced[GS_COLL_REDUCE_SCATTER], GS_ALGO_RING);
    /* Collectives without a ring keep the model's choice. */
    assert_int_equal(p.forced[GS_COLL_BROADCAST], GS_ALGO_AUTO);
    assert_int_equal(gs__algo_policy_parse("", &p), GS_OK);
    assert_int_equal(p.forced[GS_COLL_ALLREDUCE], GS_ALGO_AUTO);
}

static void test_algo_policy_per_collective(void **state)
{
    gs_algo_policy_t p;

    (void)state;
    assert_int_equal(gs__algo_policy_parse("allreduce:ring,broadcast:chain", &p), GS_OK);
    assert_int_equal(p.forced[GS_COLL_ALLREDUCE], GS_ALGO_RING);
    assert_int_equal(p.forced[GS_COLL_BROADCAST], GS_ALGO_CHAIN);
    assert_int_equal(p.forced[GS_COLL_REDUCE], GS_ALGO_AUTO);
}

static void test_algo_policy_rejects(void **state)
{
    gs_algo_policy_t p;

    (void)state;
    assert_int_equal(gs__algo_policy_parse("bogus", &p), GS_ERR_INVALID_ARG);
    assert_non_null(strstr(gs_last_error(), "bogus"));
    assert_int_equal(gs__algo_policy_parse("allreduce:chain", &p), GS_ERR_INVALID_ARG);
    assert_int_equal(gs__algo_policy_parse("allreduces:ring", &p), GS_ERR_INVALID_ARG);
    assert_int_equal(gs__algo_policy_parse("allreduce:", &p), GS_ERR_INVALID_ARG);
}

static void test_algo_policy_hier(void **state)
{
    gs_algo_policy_t p;

    (void)state;
    assert_int_equal(gs__algo_policy_parse("allreduce:hier", &p), GS_OK);
    assert_int_equal(p.forced[GS_COLL_ALLREDUCE], GS_ALGO_HIERARCHICAL);
    assert_int_equal(gs__algo_policy_parse("hier", &p), GS_OK); /* only the all-reduce has it */
    assert_int_equal(p.forced[GS_COLL_ALLREDUCE], GS_ALGO_HIERARCHICAL);
    assert_int_equal(p.forced[GS_COLL_BROADCAST], GS_ALGO_AUTO);
    assert_int_equal(gs__algo_policy_parse("broadcast:hier", &p), GS_ERR_INVALID_ARG);
    assert_string_equal(gs__algo_name(GS_ALGO_HIERARCHICAL), "hier");
    assert_true(gs__algo_offers(GS_COLL_ALLREDUCE, GS_ALGO_HIERARCHICAL));
    assert_false(gs__algo_offers(GS_COLL_REDUCE_SCATTER, GS_ALGO_HIERARCHICAL));
}

static void test_algo_offers(void **state)
{
    (void)state;
    assert_true(gs__algo_offers(GS_COLL_ALLREDUCE, GS_ALGO_RING));
    assert_true(gs__algo_offers(GS_COLL_ALLREDUCE, GS_ALGO_AUTO));
    assert_false(gs__algo_offers(GS_COLL_ALLREDUCE, GS_ALGO_CHAIN));
    assert_false(gs__algo_offers(GS_COLL_ALLREDUCE, (gs_algo_t)77));
    assert_string_equal(gs__coll_name(GS_COLL_REDUCE_SCATTER), "reduce_scatter");
}

static void test_algo_split_covers_exactly(void **state)
{
    (void)state;
    for (size_t count = 0; count < 200; count++) {
        for (int parts = 1; parts <= 17; parts++) {
            size_t expect_off = 0;
            for (int i = 0; i < parts; i++) {
                size_t off, len;
                gs__algo_split(count, parts, i, &off, &len);
                assert_int_equal(off, expect_off);
                assert_true(len == count / (size_t)parts || len == count / (size_t)parts + 1);
                expect_off += len;
            }
            assert_int_equal(expect_off, count);
        }
    }
}

static void test_algo_tag_layout(void **state)
{
    gs_algo_ctx_t ctx;
    gs_coll_desc_t a = {.kind = GS_COLL_ALLREDUCE, .count = 10, .dtype = GS_DTYPE_F32};
    gs_coll_desc_t b = a;
    uint64_t ta, tb;

    (void)state;
    memset(&ctx, 0, sizeof(ctx));
    ctx.seq = 5;
    ta = gs__algo_tag(&ctx, &a, 7);
    assert_int_equal(ta & 0xffffff, 7);
    assert_int_equal((ta >> 24) & 0xffffff, 5);
    assert_int_equal(ta & GS_TP_TAG_P2P, 0);
    /* A different collective with the same sequence and index matches the
     * same receive but differs in the check bits. */
    b.kind = GS_COLL_BROADCAST;
    tb = gs__algo_tag(&ctx, &b, 7);
    assert_true((ta & GS_TP_TAG_MATCH_MASK) == (tb & GS_TP_TAG_MATCH_MASK));
    assert_true(ta != tb);
    b = a;
    b.count = 11;
    assert_true(gs__algo_tag(&ctx, &b, 7) != ta);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_algo_policy_bare_name),
        cmocka_unit_test(test_algo_policy_per_collective),
        cmocka_unit_test(test_algo_policy_rejects),
        cmocka_unit_test(test_algo_policy_hier),
        cmocka_unit_test(test_algo_offers),
        cmocka_unit_test(test_algo_split_covers_exactly),
        cmocka_unit_test(test_algo_tag_layout),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
