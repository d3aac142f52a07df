/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Exhaustive checks of pattern_tree.h for n = 1..64: the in-order binary
 * tree and the double binary tree are trees over every rank (one root,
 * parent/child links agree, no cycles, depth as documented), every rank is
 * interior in at most one of the two trees, the busiest rank's traffic is
 * what the cost model assumes, and the binomial tree is a tree for every
 * root.
 */
#include "algo/prim/pattern_tree.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#define MAX_N 64

static void test_pattern_tree_pof2_helpers(void **state)
{
    (void)state;
    for (int n = 1; n <= 4096; n++) {
        const int lo = gs__tree_pof2_floor(n);
        const int hi = gs__tree_pof2_ceil(n);

        assert_true((lo & (lo - 1)) == 0);
        assert_true((hi & (hi - 1)) == 0);
        assert_true((lo <= n) && (n < 2 * lo));
        assert_true((hi >= n) && ((hi == 1) || (hi / 2 < n)));
        assert_int_equal(1 << gs__tree_log2_floor(n), lo);
    }
}

static void test_pattern_tree_inorder_is_a_tree(void **state)
{
    (void)state;
    for (int n = 1; n <= MAX_N; n++) {
        int edges = 0;
        int max_depth = 0;

        for (int x = 1; x <= n; x++) {
            int l, r, depth = 0;
            const int p = gs__itree_parent(n, x);

            gs__itree_children(n, x, &l, &r);
            /* Leaves are exactly the odd positions. */
            assert_int_equal((l < 0) && (r < 0), (x % 2) == 1);
            if (l >= 0) {
                assert_true((l >= 1) && (l < x));
                assert_int_equal(gs__itree_parent(n, l), x);
                edges++;
            }
            if (r >= 0) {
                assert_true((r > x) && (r <= n));
                assert_int_equal(gs__itree_parent(n, r), x);
                edges++;
            }
            if (p < 0) {
                assert_int_equal(x, gs__itree_root(n));
            } else {
                int pl, pr;
                assert_true((p >= 1) && (p <= n));
                gs__itree_children(n, p, &pl, &pr);
                assert_true((pl == x) || (pr == x));
            }
            /* Walk up: the root within floor(log2 n) steps (no cycles). */
            for (int y = x; gs__itree_parent(n, y) >= 0; y = gs__itree_parent(n, y)) {
                depth++;
                assert_true(depth <= gs__tree_log2_floor(n));
            }
            max_depth = (depth > max_depth) ? depth : max_depth;
        }
        assert_int_equal(edges, n - 1);
        assert_int_equal(max_depth, gs__tree_log2_floor(n));
    }
}

static void test_pattern_tree_dtree_spans_every_rank(void **state)
{
    (void)state;
    for (int n = 1; n <= MAX_N; n++) {
        for (int t = 0; t < 2; t++) {
            int seen[MAX_N + 1];
            int roots = 0;
            int edges = 0;

            memset(seen, 0, sizeof(seen));
            for (int r = 0; r < n; r++) {
                const int x = gs__dtree_pos(n, t, r);
                int p, c0, c1;

                assert_true((x >= 1) && (x <= n));
                assert_int_equal(seen[x], 0);
                seen[x] = 1;
                assert_int_equal(gs__dtree_rank(n, t, x), r);
                gs__dtree_node(n, t, r, &p, &c0, &c1);
                if (p < 0) {
                    roots++;
                    assert_int_equal(r, gs__dtree_root(n, t));
                } else {
                    int pp, pc0, pc1;
                    assert_true((p < n) && (p != r));
                    gs__dtree_node(n, t, p, &pp, &pc0, &pc1);
                    assert_true((pc0 == r) || (pc1 == r));
                }
                for (int c = 0; c < 2; c++) {
                    const int ch = (c == 0) ? c0 : c1;
                    int cp, x0, x1;
                    if (ch < 0) {
                        continue;
                    }
                    assert_true((ch < n) && (ch != r));
                    gs__dtree_node(n, t, ch, &cp, &x0, &x1);
                    assert_int_equal(cp, r);
                    edges++;
                }
            }
            assert_int_equal(roots, 1);
            assert_int_equal(edges, n - 1);
        }
        /* The two trees have different roots once there are two ranks. */
        if (n > 1) {
            assert_true(gs__dtree_root(n, 0) != gs__dtree_root(n, 1));
        }
    }
}

static void test_pattern_tree_dtree_interior_in_at_most_one(void **state)
{
    (void)state;
    for (int n = 1; n <= MAX_N; n++) {
        int max_halves = 0;

        for (int r = 0; r < n; r++) {
            int interior = 0;
            int halves = 0;

            for (int t = 0; t < 2; t++) {
                int p, c0, c1;
                gs__dtree_node(n, t, r, &p, &c0, &c1);
                interior += (c0 >= 0) || (c1 >= 0);
                halves += (p >= 0) + (c0 >= 0) + (c1 >= 0);
            }
            assert_true(interior <= 1);
            max_halves = (halves > max_halves) ? halves : max_halves;
        }
        /* The cost model's "bytes the busiest rank sends" (in half vectors):
         * up to the parent in each tree, down to each child. */
        if (n >= 4) {
            assert_int_equal(max_halves, 4);
        } else if (n == 3) {
            assert_int_equal(max_halves, 3);
        } else if (n == 2) {
            assert_int_equal(max_halves, 2);
        }
    }
}

static void test_pattern_tree_dtree_example_n5(void **state)
{
    int p, c0, c1;

    (void)state;
    /* The n = 5 picture in pattern_tree.h. */
    gs__dtree_node(5, 0, 3, &p, &c0, &c1);
    assert_int_equal(p, -1);
    assert_int_equal(c0, 1);
    assert_int_equal(c1, 4);
    gs__dtree_node(5, 0, 1, &p, &c0, &c1);
    assert_int_equal(p, 3);
    assert_int_equal(c0, 0);
    assert_int_equal(c1, 2);
    gs__dtree_node(5, 1, 4, &p, &c0, &c1);
    assert_int_equal(p, -1);
    assert_int_equal(c0, 2);
    assert_int_equal(c1, 0);
    gs__dtree_node(5, 1, 0, &p, &c0, &c1);
    assert_int_equal(p, 4);
    assert_int_equal(c0, -1);
    assert_int_equal(c1, -1);
}

static void test_pattern_tree_binomial_is_a_tree(void **state)
{
    (void)state;
    for (int n = 1; n <= MAX_N; n++) {
        for (int root = 0; root < n; root++) {
            int edges = 0;

            for (int r = 0; r < n; r++) {
                const int v = gs__binom_vrank(n, root, r);
                const int pv = gs__binom_parent(v);
                int kids = 0;
                int depth = 0;

                assert_int_equal(gs__binom_rank(n, root, v), r);
                assert_int_equal(pv < 0, r == root);
                if (pv >= 0) {
                    /* v is one of the parent's children: v = pv + m, m < span(pv). */
                    const int m = v - pv;
                    assert_true((m > 0) && ((m & (m - 1)) == 0));
                    assert_true(m < gs__binom_span(n, pv));
                }
                for (int m = 1; m < gs__binom_span(n, v); m *= 2) {
                    if (v + m < n) {
                        assert_int_equal(gs__binom_parent(v + m), v);
                        kids++;
                        edges++;
                    }
                }
                assert_int_equal(kids, gs__binom_nchildren(n, v));
                for (int y = v; gs__binom_parent(y) >= 0; y = gs__binom_parent(y)) {
                    depth++;
                }
                assert_true(depth <= gs__binom_rounds(n));
            }
            assert_int_equal(edges, n - 1);
        }
        assert_int_equal(1 << gs__binom_rounds(n), gs__tree_pof2_ceil(n));
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_pattern_tree_pof2_helpers),
        cmocka_unit_test(test_pattern_tree_inorder_is_a_tree),
        cmocka_unit_test(test_pattern_tree_dtree_spans_every_rank),
        cmocka_unit_test(test_pattern_tree_dtree_interior_in_at_most_one),
        cmocka_unit_test(test_pattern_tree_dtree_example_n5),
        cmocka_unit_test(test_pattern_tree_binomial_is_a_tree),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
