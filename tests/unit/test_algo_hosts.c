/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The host table (algo_hosts.c): host numbering, local rank and size, the
 * host-grouped order and the route helpers, exhaustively over small worlds
 * with many host layouts (grouped, interleaved, uneven, one host, one rank
 * per host).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "algo/select/select.h"

/* Host id of rank r in layout number k (a few shapes, then pseudo-random). */
static uint64_t layout_id(int k, int n, int r)
{
    switch (k) {
    case 0:
        return 7; /* one host */
    case 1:
        return 1000 + (uint64_t)r; /* one rank per host */
    case 2:
        return 50 + (uint64_t)(r % 2); /* interleaved over 2 hosts */
    case 3:
        return 90 + (uint64_t)(r * 3 / n); /* 3 grouped hosts, uneven */
    case 4:
        return 200 + (uint64_t)((n - 1 - r) % 3); /* interleaved, highest ranks first */
    default: {
        uint64_t x = (uint64_t)k * 0x9e3779b97f4a7c15ull + (uint64_t)r * 0xbf58476d1ce4e5b9ull;
        x ^= x >> 31;
        return 1 + (x % (uint64_t)(1 + k % 5)); /* up to 5 hosts, random assignment */
    }
    }
}

/* Check every invariant of the table that rank @p me builds. */
static void check_table(const uint64_t *ids, int n, int me)
{
    gs__algo_hosts_t h;
    int crossings = 0;

    assert_int_equal(gs__algo_hosts_init(&h, ids, n, me), GS_OK);
    assert_true((h.nhosts >= 1) && (h.nhosts <= n));
    assert_int_equal(h.first[0], 0);
    assert_int_equal(h.first[h.nhosts], n);
    for (int p = 0; p < n; p++) {
        const int r = h.order[p];
        assert_true((r >= 0) && (r < n));
        assert_int_equal(h.pos[r], p); /* pos is the inverse of order */
        assert_true(h.ids[r] == ids[r]);
        /* Positions of host g are first[g] .. first[g+1]-1. */
        assert_true((p >= h.first[h.host_of[r]]) && (p < h.first[h.host_of[r] + 1]));
        if (p > 0) {
            const int prev = h.order[p - 1];
            if (h.host_of[prev] == h.host_of[r]) {
                assert_true(prev < r); /* ascending inside a host */
            } else {
                assert_int_equal(h.host_of[r], h.host_of[prev] + 1);
            }
        }
        if (h.host_of[h.order[p]] != h.host_of[h.order[(p + 1) % n]]) {
            crossings++;
        }
    }
    /* The ring over the order crosses between hosts once per host. */
    assert_int_equal(crossings, (h.nhosts > 1) ? h.nhosts : 0);
    for (int g = 0; g < h.nhosts; g++) {
        const int size = h.first[g + 1] - h.first[g];
        /* Hosts are numbered by their lowest rank, and a host holds equal ids only. */
        if (g > 0) {
            assert_true(h.order[h.first[g - 1]] < h.order[h.first[g]]);
        }
        assert_true((size >= h.min_local) && (size <= h.max_local));
        for (int p = h.first[g]; p < h.first[g + 1]; p++) {
            assert_true(ids[h.order[p]] == ids[h.order[h.first[g]]]);
        }
    }
    for (int r = 0; r < n; r++) {
        /* Equal ids, same host; different ids, different hosts. */
        assert_int_equal(h.host_of[r] == h.host_of[me], ids[r] == ids[me]);
    }
    assert_int_equal(h.local_size, h.first[h.host_of[me] + 1] - h.first[h.host_of[me]]);
    assert_int_equal(h.local_rank, h.pos[me] - h.first[h.host_of[me]]);
    gs__algo_hosts_free(&h);
    assert_null(h.order);
}

static void test_algo_hosts_invariants_exhaustive(void **state)
{
    uint64_t ids[64];

    (void)state;
    for (int n = 1; n <= 64; n++) {
        for (int k = 0; k < 24; k++) {
            for (int r = 0; r < n; r++) {
                ids[r] = layout_id(k, n, r);
            }
            for (int me = 0; me < n; me += (n > 8) ? 7 : 1) {
                check_table(ids, n, me);
            }
        }
    }
}

static void test_algo_hosts_interleaved_order(void **state)
{
    const uint64_t ids[6] = {11, 22, 11, 33, 22, 33};
    gs__algo_hosts_t h;
    const int expect[6] = {0, 2, 1, 4, 3, 5};

    (void)state;
    assert_int_equal(gs__algo_hosts_init(&h, ids, 6, 4), GS_OK);
    assert_int_equal(h.nhosts, 3);
    for (int p = 0; p < 6; p++) {
        assert_int_equal(h.order[p], expect[p]);
    }
    assert_int_equal(h.local_rank, 1); /* rank 4 is the second rank of host 22 */
    assert_int_equal(h.local_size, 2);
    assert_int_equal(h.min_local, 2);
    assert_int_equal(h.max_local, 2);
    gs__algo_hosts_free(&h);
}

static void test_algo_hosts_grouped_is_identity(void **state)
{
    const uint64_t ids[7] = {5, 5, 5, 9, 9, 4, 4};
    gs__algo_hosts_t h;

    (void)state;
    assert_int_equal(gs__algo_hosts_init(&h, ids, 7, 6), GS_OK);
    assert_int_equal(h.nhosts, 3);
    for (int p = 0; p < 7; p++) {
        assert_int_equal(h.order[p], p); /* launched host by host: nothing moves */
    }
    assert_int_equal(h.min_local, 2);
    assert_int_equal(h.max_local, 3);
    assert_int_equal(h.local_rank, 1);
    gs__algo_hosts_free(&h);
}

static void test_algo_route_helpers(void **state)
{
    const uint64_t ids[4] = {1, 2, 1, 2};
    const int sub[2] = {3, 1};
    gs__algo_ctx_t ctx;

    (void)state;
    memset(&ctx, 0, sizeof(ctx));
    ctx.rank = 1;
    ctx.size = 4;
    /* No table: the identity. */
    assert_int_equal(gs__route_n(&ctx), 4);
    assert_int_equal(gs__route_pos(&ctx), 1);
    assert_int_equal(gs__route_rank(&ctx, 3), 3);
    assert_int_equal(gs__route_pos_of(&ctx, 2), 2);
    assert_int_equal(gs__route_pos_of(&ctx, 4), -1);

    assert_int_equal(gs__algo_hosts_init(&ctx.hosts, ids, 4, 1), GS_OK);
    gs__algo_route_hosts(&ctx); /* order 0 2 1 3 */
    assert_int_equal(gs__route_n(&ctx), 4);
    assert_int_equal(gs__route_pos(&ctx), 2);
    assert_int_equal(gs__route_rank(&ctx, 1), 2);
    assert_int_equal(gs__route_pos_of(&ctx, 3), 3);
    assert_int_equal(gs__route_pos_of(&ctx, 2), 1);

    /* A sub-group route (what algo_hier.c sets up). */
    ctx.route.order = sub;
    ctx.route.n = 2;
    ctx.route.pos = 1;
    assert_int_equal(gs__route_n(&ctx), 2);
    assert_int_equal(gs__route_pos(&ctx), 1);
    assert_int_equal(gs__route_rank(&ctx, 0), 3);
    assert_int_equal(gs__route_pos_of(&ctx, 3), 0);
    assert_int_equal(gs__route_pos_of(&ctx, 0), -1);
    gs__algo_hosts_free(&ctx.hosts);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_algo_hosts_invariants_exhaustive),
        cmocka_unit_test(test_algo_hosts_interleaved_order),
        cmocka_unit_test(test_algo_hosts_grouped_is_identity),
        cmocka_unit_test(test_algo_route_helpers),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
