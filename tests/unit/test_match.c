/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The index of held unexpected messages (transport/match.h) and the hash
 * table under it (core/htab.h): the earliest message for (peer, tag) and for
 * (any source, tag) in arrival order, removal from anywhere, and lookups
 * that look at a bounded number of keys however many messages are held.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "core/htab.h"
#include "transport/match.h"

typedef struct msg {
    gs__match_entry_t e; /* first, as the transports embed it */
    int peer;
    uint64_t tag;
    int id;
} msg_t;

static msg_t *find(gs__match_index_t *x, int peer, bool any, uint64_t tag)
{
    return (msg_t *)gs__match_find(x, peer, any, tag);
}

static void add(gs__match_index_t *x, msg_t *m, int peer, uint64_t tag, int id)
{
    m->peer = peer;
    m->tag = tag;
    m->id = id;
    assert_int_equal(gs__match_add(x, &m->e, peer, tag), GS_OK);
}

/* Arrival order per (peer, tag) and per (any, tag), across interleaved peers. */
static void test_match_order(void **state)
{
    gs__match_index_t x;
    msg_t m[8];

    (void)state;
    memset(m, 0, sizeof(m));
    gs__match_init(&x);
    add(&x, &m[0], 1, 10, 0);
    add(&x, &m[1], 2, 10, 1);
    add(&x, &m[2], 1, 20, 2);
    add(&x, &m[3], 1, 10, 3);
    add(&x, &m[4], 2, 20, 4);
    assert_int_equal(x.n, 5);
    assert_int_equal(find(&x, 0, true, 10)->id, 0);
    assert_int_equal(find(&x, 2, false, 10)->id, 1);
    assert_int_equal(find(&x, 2, false, 20)->id, 4);
    assert_null(find(&x, 3, false, 10));
    assert_null(find(&x, 0, true, 30));
    /* Removing from the middle keeps both orders. */
    gs__match_remove(&x, &m[1].e);
    assert_int_equal(find(&x, 0, true, 10)->id, 0);
    assert_null(find(&x, 2, false, 10));
    gs__match_remove(&x, &m[0].e);
    assert_int_equal(find(&x, 0, true, 10)->id, 3);
    assert_int_equal(find(&x, 1, false, 10)->id, 3);
    /* Removing twice is a no-op. */
    gs__match_remove(&x, &m[0].e);
    assert_int_equal(x.n, 3);
    /* The arrival list has what is left, oldest first. */
    assert_ptr_equal(x.head, &m[2].e);
    assert_ptr_equal(x.head->anext, &m[3].e);
    assert_ptr_equal(x.tail, &m[4].e);
    gs__match_remove(&x, &m[4].e);
    gs__match_remove(&x, &m[2].e);
    gs__match_remove(&x, &m[3].e);
    assert_int_equal(x.n, 0);
    assert_null(x.head);
    assert_null(x.tail);
    assert_int_equal(x.keys.n, 0); /* every key went with its last message */
    gs__match_free(&x);
}

/*
 * 2^17 held messages, one tag from one peer (a flood), then lookups for
 * absent and present keys: each looks at a few keys, not at what is held
 * (before the index every probe walked all 2^17). Taking them all in order
 * gives them back oldest first.
 */
static void test_match_flood_lookups_are_constant(void **state)
{
    const int n = 1 << 17;
    msg_t *m = calloc((size_t)n, sizeof(*m));
    gs__match_index_t x;
    uint64_t before;

    (void)state;
    assert_non_null(m);
    gs__match_init(&x);
    for (int i = 0; i < n; i++) {
        add(&x, &m[i], 1, 777, i);
    }
    before = x.steps;
    for (int i = 0; i < 1000; i++) {
        assert_null(find(&x, 1, false, 12345));
        assert_null(find(&x, 0, true, 4444));
        assert_int_equal(find(&x, 0, true, 777)->id, 0);
        assert_int_equal(find(&x, 1, false, 777)->id, 0);
    }
    /* Two keys held, in a table of at least 64 slots: a chain is rarely
     * longer than one. */
    assert_true(x.steps - before <= 4000 * 2);
    before = x.steps;
    for (int i = 0; i < n; i++) {
        msg_t *got = find(&x, 1, false, 777);

        assert_non_null(got);
        assert_int_equal(got->id, i);
        gs__match_remove(&x, &got->e);
    }
    assert_true(x.steps - before <= (uint64_t)n * 2);
    assert_int_equal(x.n, 0);
    gs__match_free(&x);
    free(m);
}

/* Every message with a tag of its own (the worst case for the keys): the
 * table grows and shrinks, lookups stay short. */
static void test_match_many_keys(void **state)
{
    const int n = 1 << 16;
    msg_t *m = calloc((size_t)n, sizeof(*m));
    gs__match_index_t x;
    uint64_t before;

    (void)state;
    assert_non_null(m);
    gs__match_init(&x);
    for (int i = 0; i < n; i++) {
        add(&x, &m[i], i % 3, (uint64_t)i * 0x10000u, i);
    }
    assert_int_equal(x.keys.n, 2 * n);
    before = x.steps;
    for (int i = 0; i < n; i++) {
        assert_int_equal(find(&x, 0, true, (uint64_t)i * 0x10000u)->id, i);
    }
    /* Load at most 1 after growth: chains average under 2. */
    assert_true(x.steps - before <= (uint64_t)n * 4);
    for (int i = 0; i < n; i++) {
        gs__match_remove(&x, &m[i].e);
    }
    assert_int_equal(x.keys.n, 0);
    assert_true(x.keys.nslots <= 256); /* what the flood made it grow to went back */
    gs__match_free(&x);
    free(m);
}

/* The hash table alone: duplicates, removal, first/next over one hash. */
static void test_htab_basics(void **state)
{
    gs__htab_t t;
    gs__hnode_t a;
    gs__hnode_t b;
    gs__hnode_t c;
    uint64_t h1;
    uint64_t h2;

    (void)state;
    gs__htab_init(&t);
    h1 = gs__htab_hash(&t, 1, 2);
    h2 = gs__htab_hash(&t, 2, 1);
    assert_true(h1 != h2);
    assert_null(gs__htab_first(&t, h1));
    assert_int_equal(gs__htab_insert(&t, &a, h1), GS_OK);
    assert_int_equal(gs__htab_insert(&t, &b, h1), GS_OK);
    assert_int_equal(gs__htab_insert(&t, &c, h2), GS_OK);
    assert_int_equal(t.n, 3);
    {
        gs__hnode_t *n1 = gs__htab_first(&t, h1);
        gs__hnode_t *n2 = gs__htab_next(n1);

        assert_true(((n1 == &a) && (n2 == &b)) || ((n1 == &b) && (n2 == &a)));
        assert_null(gs__htab_next(n2));
    }
    assert_ptr_equal(gs__htab_first(&t, h2), &c);
    gs__htab_remove(&t, &a);
    assert_ptr_equal(gs__htab_first(&t, h1), &b);
    gs__htab_remove(&t, &b);
    gs__htab_remove(&t, &c);
    assert_null(gs__htab_first(&t, h1));
    assert_int_equal(t.n, 0);
    gs__htab_free(&t);
    assert_null(gs__htab_first(&t, h1));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_match_order),
        cmocka_unit_test(test_match_flood_lookups_are_constant),
        cmocka_unit_test(test_match_many_keys),
        cmocka_unit_test(test_htab_basics),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
