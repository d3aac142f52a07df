/* SPDX-License-Identifier: Apache-2.0 */
/*
 * GS_SHM_MAX_BYTES (core/shm_budget.h): parsing, auto, and the plan of the
 * pair rings: every pair at GS_SHM_BYTES when it fits, a smaller power of
 * two when not, and at the floor only the nearest pairs, a whole distance
 * at a time, never more bytes than the budget.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "core/shm_budget.h"

#define KIB (1ull << 10)
#define MIB (1ull << 20)
#define GIB (1ull << 30)
#define OVH 8192ull

static void test_parse(void **state)
{
    int is_auto = -1;
    uint64_t v = 7;

    (void)state;
    assert_int_equal(gs__shm_budget_parse("auto", &is_auto, &v), 0);
    assert_int_equal(is_auto, 1);
    assert_int_equal(v, 0);
    assert_int_equal(gs__shm_budget_parse("", &is_auto, &v), 0);
    assert_int_equal(is_auto, 1);
    assert_int_equal(gs__shm_budget_parse("64K", &is_auto, &v), 0);
    assert_int_equal(is_auto, 0);
    assert_int_equal(v, 64 * KIB);
    assert_int_equal(gs__shm_budget_parse("3GiB", &is_auto, &v), 0);
    assert_int_equal(v, 3 * GIB);
    assert_int_equal(gs__shm_budget_parse("1048576", &is_auto, &v), 0);
    assert_int_equal(v, MIB);
    v = 5;
    is_auto = 5;
    assert_int_equal(gs__shm_budget_parse("63K", &is_auto, &v), -1); /* below the least */
    assert_int_equal(gs__shm_budget_parse("12X", &is_auto, &v), -1);
    assert_int_equal(gs__shm_budget_parse("-1", &is_auto, &v), -1);
    assert_int_equal(gs__shm_budget_parse("Auto", &is_auto, &v), -1);
    assert_int_equal(gs__shm_budget_parse("99999T", &is_auto, &v), -1);
    assert_int_equal(v, 5); /* untouched on error */
    assert_int_equal(is_auto, 5);
}

static void test_auto(void **state)
{
    (void)state;
    assert_int_equal(gs__shm_budget(1, 0, 4, 24 * GIB), 128 * MIB);
    assert_int_equal(gs__shm_budget(1, 0, 128, 24 * GIB), 4 * GIB);
    assert_int_equal(gs__shm_budget(1, 0, 128, 4 * GIB), 2 * GIB); /* half of /dev/shm */
    assert_int_equal(gs__shm_budget(1, 0, 128, 0), 4 * GIB);       /* size unknown */
    assert_int_equal(gs__shm_budget(0, 5 * MIB, 128, 1 * MIB), 5 * MIB);
}

static void test_pairs_within(void **state)
{
    (void)state;
    assert_int_equal(gs__shm_pairs_within(2, 1), 1);
    assert_int_equal(gs__shm_pairs_within(4, 1), 4);
    assert_int_equal(gs__shm_pairs_within(4, 2), 6);
    assert_int_equal(gs__shm_pairs_within(5, 2), 10);
    assert_int_equal(gs__shm_pairs_within(8, 4), 28);
    assert_int_equal(gs__shm_pairs_within(8, 9), 28); /* no farther pairs */
    assert_int_equal(gs__shm_pairs_within(8, 0), 0);
}

/* The bytes a plan takes never exceed what the budget leaves. */
static void check_fits(const gs__shm_plan_t *p, uint64_t reserve)
{
    if (p->pairs > 0) {
        assert_true(reserve + (uint64_t)p->pairs * (2u * p->ring + OVH) <= p->budget);
    }
}

static void test_plan_fits_all(void **state)
{
    gs__shm_plan_t p;

    (void)state;
    /* 4 ranks, auto on a large /dev/shm: every pair at GS_SHM_BYTES, as before. */
    gs__shm_plan(128 * MIB, 4, 4 * 2 * MIB, MIB, OVH, &p);
    assert_int_equal(p.ring, MIB);
    assert_int_equal(p.pairs, 6);
    assert_int_equal(p.pairs_total, 6);
    assert_int_equal(p.max_dist, 2);
    assert_int_equal(p.need, 8 * MIB + 6 * (2 * MIB + OVH));
    check_fits(&p, 8 * MIB);
    /* 128 ranks, auto (4 GiB): every pair, rings shrunk to a power of two. */
    gs__shm_plan(4 * GIB, 128, 128 * 2 * MIB, MIB, OVH, &p);
    assert_int_equal(p.pairs, 128 * 127 / 2);
    assert_int_equal(p.ring, 128 * KIB);
    check_fits(&p, 256 * MIB);
    /* One rank: nothing to plan. */
    gs__shm_plan(64 * KIB, 1, 0, MIB, OVH, &p);
    assert_int_equal(p.pairs_total, 0);
    assert_int_equal(p.pairs, 0);
}

static void test_plan_nearest(void **state)
{
    gs__shm_plan_t p;

    (void)state;
    /* 8 ranks, 2 MiB: 64 KiB rings (136 KiB a pair) fit 15 pairs: the 8 at distance 1. */
    gs__shm_plan(2 * MIB, 8, 0, MIB, OVH, &p);
    assert_int_equal(p.ring, 64 * KIB);
    assert_int_equal(p.max_dist, 1);
    assert_int_equal(p.pairs, 8);
    check_fits(&p, 0);
    assert_int_equal(gs__shm_plan_ring(&p, 8, 0, 1), 64 * KIB);
    assert_int_equal(gs__shm_plan_ring(&p, 8, 0, 7), 64 * KIB); /* around the host */
    assert_int_equal(gs__shm_plan_ring(&p, 8, 7, 0), 64 * KIB);
    assert_int_equal(gs__shm_plan_ring(&p, 8, 0, 2), 0);
    assert_int_equal(gs__shm_plan_ring(&p, 8, 3, 7), 0);
    assert_int_equal(gs__shm_plan_ring(&p, 8, 3, 3), 0); /* not a pair */
    /* 1 MiB: not even distance 1 (8 pairs, 1088 KiB) fits: every pair talks TCP. */
    gs__shm_plan(1 * MIB, 8, 0, MIB, OVH, &p);
    assert_int_equal(p.pairs, 0);
    assert_int_equal(p.max_dist, 0);
    assert_int_equal(gs__shm_plan_ring(&p, 8, 0, 1), 0);
    /* The host segment goes first: with nothing left, no pair. */
    gs__shm_plan(4 * MIB, 2, 2 * 2 * MIB, MIB, OVH, &p);
    assert_int_equal(p.pairs, 0);
    /* A GS_SHM_BYTES below the floor is kept as it is. */
    gs__shm_plan(64 * KIB, 4, 0, 4 * KIB, OVH, &p);
    assert_int_equal(p.ring, 4 * KIB);
    assert_int_equal(p.pairs, 4); /* 16 KiB a pair: distance 1 (4 pairs) fits, 2 does not */
    check_fits(&p, 0);
}

/* Every budget from 64 KiB up: the plan fits, and a larger budget never gives less. */
static void test_plan_monotone(void **state)
{
    (void)state;
    for (int n = 2; n <= 33; n += 7) {
        int last_pairs = 0;
        uint64_t last_bytes = 0;

        for (uint64_t b = 64 * KIB; b <= 64 * MIB; b += 192 * KIB) {
            gs__shm_plan_t p;
            uint64_t bytes;

            gs__shm_plan(b, n, 0, MIB, OVH, &p);
            check_fits(&p, 0);
            bytes = (uint64_t)p.pairs * 2u * p.ring;
            assert_true(p.pairs >= last_pairs);
            assert_true((p.pairs > last_pairs) || (bytes >= last_bytes));
            last_pairs = p.pairs;
            last_bytes = bytes;
        }
        assert_int_equal(last_pairs, n * (n - 1) / 2);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parse),        cmocka_unit_test(test_auto),
        cmocka_unit_test(test_pairs_within), cmocka_unit_test(test_plan_fits_all),
        cmocka_unit_test(test_plan_nearest), cmocka_unit_test(test_plan_monotone),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
