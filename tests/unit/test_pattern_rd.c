/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Exhaustive checks of pattern_rd.h for n = 1..64: the fold maps ranks
 * onto exactly p new ranks, partners are symmetric, a simulation of
 * recursive doubling (with sets of contributions) ends with every rank
 * holding every contribution, a simulation of Rabenseifner's halving and
 * doubling ends with each new rank owning its block and then every block,
 * and the block offsets cover a vector exactly.
 */
#include "algo/prim/pattern_rd.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#define MAX_N 64

static uint64_t all_ranks(int n)
{
    return (n == 64) ? ~0ull : ((1ull << n) - 1ull);
}

static void test_pattern_rd_fold_maps_onto_pof2(void **state)
{
    (void)state;
    for (int n = 1; n <= MAX_N; n++) {
        const int p = gs__rd_pof2(n);
        int hits[MAX_N];
        int folded = 0;

        assert_true(((p & (p - 1)) == 0) && (p <= n) && (n < 2 * p));
        assert_int_equal(1 << gs__rd_log2(p), p);
        assert_int_equal(gs__rd_rem(n), n - p);
        memset(hits, 0, sizeof(hits));
        for (int r = 0; r < n; r++) {
            const int v = gs__rd_newrank(n, r);
            const int f = gs__rd_fold_peer(n, r);

            if (v < 0) {
                folded++;
                /* A folded rank is even, below 2*rem, and its peer is active. */
                assert_true((r % 2 == 0) && (r < 2 * gs__rd_rem(n)));
                assert_int_equal(f, r + 1);
                assert_true(gs__rd_newrank(n, f) >= 0);
                assert_int_equal(gs__rd_peer(n, r, 0), -1);
                continue;
            }
            assert_true(v < p);
            hits[v]++;
            assert_int_equal(gs__rd_oldrank(n, v), r);
            if (f >= 0) {
                assert_int_equal(gs__rd_fold_peer(n, f), r);
            }
        }
        assert_int_equal(folded, n - p);
        for (int v = 0; v < p; v++) {
            assert_int_equal(hits[v], 1);
        }
    }
}

static void test_pattern_rd_doubling_reaches_everyone(void **state)
{
    (void)state;
    for (int n = 1; n <= MAX_N; n++) {
        const int steps = gs__rd_log2(gs__rd_pof2(n));
        uint64_t have[MAX_N];
        uint64_t next[MAX_N];

        for (int r = 0; r < n; r++) {
            have[r] = 1ull << r;
        }
        for (int r = 0; r < n; r++) { /* fold in */
            const int f = gs__rd_fold_peer(n, r);
            if ((f >= 0) && (gs__rd_newrank(n, r) >= 0)) {
                have[r] |= have[f];
            }
        }
        for (int s = 0; s < steps; s++) {
            memcpy(next, have, sizeof(have));
            for (int r = 0; r < n; r++) {
                const int q = gs__rd_peer(n, r, s);
                if (q < 0) {
                    continue;
                }
                assert_int_equal(gs__rd_peer(n, q, s), r);
                /* Contributions never meet twice: a sum stays a sum. */
                assert_int_equal(have[r] & have[q], 0);
                next[r] = have[r] | have[q];
            }
            memcpy(have, next, sizeof(have));
        }
        for (int r = 0; r < n; r++) { /* fold out */
            const int f = gs__rd_fold_peer(n, r);
            if ((f >= 0) && (gs__rd_newrank(n, r) < 0)) {
                have[r] = have[f];
            }
        }
        for (int r = 0; r < n; r++) {
            assert_true(have[r] == all_ranks(n));
        }
    }
}

static void test_pattern_rd_halving_owns_blocks(void **state)
{
    (void)state;
    for (int p = 1; p <= MAX_N; p *= 2) {
        /* own[v][b]: the contributions new rank v has summed into block b. */
        static uint64_t own[MAX_N][MAX_N];
        static uint64_t next[MAX_N][MAX_N];
        uint64_t valid[MAX_N]; /* blocks v holds the full result of */

        for (int v = 0; v < p; v++) {
            for (int b = 0; b < p; b++) {
                own[v][b] = 1ull << v;
            }
        }
        for (int m = p / 2; m >= 1; m /= 2) {
            memcpy(next, own, sizeof(own));
            for (int v = 0; v < p; v++) {
                int klo, khi, slo, shi, plo, phi;
                gs__rd_window(v, m, &klo, &khi);
                gs__rd_window(v ^ m, m, &slo, &shi);
                /* What v sends is what its partner keeps, and the halves are disjoint. */
                /* cppcheck-suppress duplicateExpression ; the partner's partner, on purpose */
                gs__rd_window((v ^ m) ^ m, m, &plo, &phi);
                assert_int_equal(plo, klo);
                assert_true((khi <= slo) || (shi <= klo));
                assert_true((klo <= v) && (v < khi));
                for (int b = klo; b < khi; b++) {
                    assert_int_equal(own[v][b] & own[v ^ m][b], 0);
                    next[v][b] = own[v][b] | own[v ^ m][b];
                }
            }
            memcpy(own, next, sizeof(own));
        }
        for (int v = 0; v < p; v++) {
            assert_true(own[v][v] == all_ranks(p));
            valid[v] = 1ull << v;
        }
        for (int m = 1; m < p; m *= 2) {
            uint64_t nv[MAX_N] = {0};
            for (int v = 0; v < p; v++) {
                int lo, hi;
                uint64_t window = 0;
                gs__rd_window(v ^ m, m, &lo, &hi);
                for (int b = lo; b < hi; b++) {
                    window |= 1ull << b;
                }
                /* The partner holds exactly its window, which v lacks. */
                assert_true(valid[v ^ m] == window);
                assert_int_equal(valid[v] & window, 0);
                nv[v] = valid[v] | window;
            }
            memcpy(valid, nv, sizeof(nv));
        }
        for (int v = 0; v < p; v++) {
            assert_true(valid[v] == all_ranks(p));
        }
    }
}

static void test_pattern_rd_block_offsets_cover(void **state)
{
    (void)state;
    for (size_t count = 0; count < 300; count++) {
        for (int p = 1; p <= MAX_N; p *= 2) {
            assert_int_equal(gs__rd_block_off(count, p, 0), 0);
            assert_int_equal(gs__rd_block_off(count, p, p), count);
            for (int b = 0; b < p; b++) {
                const size_t len =
                    gs__rd_block_off(count, p, b + 1) - gs__rd_block_off(count, p, b);
                assert_true((len == count / (size_t)p) || (len == count / (size_t)p + 1));
            }
        }
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_pattern_rd_fold_maps_onto_pof2),
        cmocka_unit_test(test_pattern_rd_doubling_reaches_everyone),
        cmocka_unit_test(test_pattern_rd_halving_owns_blocks),
        cmocka_unit_test(test_pattern_rd_block_offsets_cover),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
