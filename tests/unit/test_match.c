/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Tag matching (transport/match.h): which receive accepts a message, the
 * bind check (full tag, length), the held-bytes budget and its refusal;
 * and the index of held unexpected messages and the hash table under it
 * (core/htab.h): the earliest message for (peer, tag) and for (any source,
 * tag) in arrival order, removal from anywhere, and lookups that look at a
 * bounded number of keys however many messages are held.
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

/* A receive accepts a message from its peer (or any) with an equal masked tag. */
static void test_match_accepts(void **state)
{
    const uint64_t tag = 0x12345ull;
    const uint64_t check = 1ull << 48; /* a check bit, outside GS_TP_TAG_MATCH_MASK */

    (void)state;
    assert_int_equal(check & GS_TP_TAG_MATCH_MASK, 0);
    assert_true(gs__match_accepts(3, tag, 3, tag));
    assert_true(gs__match_accepts(GS_ANY_SOURCE, tag, 5, tag));
    assert_false(gs__match_accepts(3, tag, 4, tag));
    assert_false(gs__match_accepts(3, tag, 3, tag + 1));
    /* Check bits differ: accepted here, refused by the bind check. */
    assert_true(gs__match_accepts(3, tag, 3, tag | check));
    assert_true(gs__match_accepts(3, tag | GS_TP_TAG_P2P, 3, tag | GS_TP_TAG_P2P));
    assert_false(gs__match_accepts(3, tag, 3, tag | GS_TP_TAG_P2P));
}

/* Full-tag mismatch, then truncation; a shorter or equal message binds. */
static void test_match_bind(void **state)
{
    const uint64_t tag = 0x8000000000000007ull;
    const uint64_t other = tag | (1ull << 48); /* the same masked tag, another check bit */
    char why[GS_MATCH_WHY_MAX];

    (void)state;
    why[0] = '\0';
    assert_int_equal(gs__match_bind(tag, 64, 2, tag, 64, why, sizeof(why)), GS_OK);
    assert_int_equal(gs__match_bind(tag, 64, 2, tag, 0, why, sizeof(why)), GS_OK);
    assert_string_equal(why, "");
    assert_int_equal(gs__match_bind(tag, 64, 2, other, 8, why, sizeof(why)), GS_ERR_MISMATCH);
    assert_non_null(strstr(why, "peer 2 has tag 0x8001000000000007"));
    assert_non_null(strstr(why, "expects 0x8000000000000007"));
    assert_non_null(strstr(why, "different operations"));
    /* Mismatch is judged before length. */
    assert_int_equal(gs__match_bind(tag, 64, 2, other, 65, why, sizeof(why)), GS_ERR_MISMATCH);
    assert_int_equal(gs__match_bind(tag, 64, 2, tag, 65, why, sizeof(why)), GS_ERR_TRUNCATED);
    assert_non_null(strstr(why, "message of 65 bytes from peer 2"));
    assert_non_null(strstr(why, "receive buffer of 64 bytes"));
    /* The sentence is cut to the buffer, never past it. */
    assert_int_equal(gs__match_bind(tag, 1, 2, tag, 2, why, 8), GS_ERR_TRUNCATED);
    assert_int_equal(strlen(why), 7);
}

/* The budget counts bytes and messages, refuses past either bound with a
 * sentence, never wraps, and gives back what was charged. */
static void test_match_budget(void **state)
{
    gs__match_budget_t b;
    char why[GS_MATCH_WHY_MAX];

    (void)state;
    gs__match_budget_init(&b, 1000, 3);
    assert_true(gs__match_budget_fits(&b, 100, 400, 400, why, sizeof(why)));
    gs__match_budget_charge(&b, 500);
    assert_int_equal(b.bytes, 500);
    assert_int_equal(b.msgs, 1);
    /* Exactly to the byte bound fits; one byte more does not. */
    assert_true(gs__match_budget_fits(&b, 100, 400, 400, why, sizeof(why)));
    assert_false(gs__match_budget_fits(&b, 100, 401, 401, why, sizeof(why)));
    assert_string_equal(why, "sent a message of 401 bytes while 1 messages (500 bytes) are held; "
                             "the limit is 3 messages and 1000 bytes, all peers together");
    /* A message bound to a receive holds no payload: only its overhead counts. */
    assert_true(gs__match_budget_fits(&b, 100, 0, 1ull << 40, why, sizeof(why)));
    /* Sizes near 2^64 do not wrap into fitting. */
    assert_false(gs__match_budget_fits(&b, 100, UINT64_MAX - 50, 0, why, sizeof(why)));
    assert_false(gs__match_budget_fits(&b, UINT64_MAX, 0, 0, why, sizeof(why)));
    gs__match_budget_charge(&b, 100);
    gs__match_budget_charge(&b, 100);
    /* The count bound. */
    assert_false(gs__match_budget_fits(&b, 1, 0, 0, why, sizeof(why)));
    assert_non_null(strstr(why, "while 3 messages (700 bytes) are held"));
    /* A bound lowered below what is charged refuses, and does not wrap. */
    gs__match_budget_release(&b, 100, 1);
    b.max_bytes = 500;
    assert_false(gs__match_budget_fits(&b, 0, 0, 0, why, sizeof(why)));
    gs__match_budget_release(&b, 600, 2);
    b.max_bytes = 1000;
    assert_int_equal(b.bytes, 0);
    assert_int_equal(b.msgs, 0);
    assert_true(gs__match_budget_fits(&b, 600, 0, 0, why, sizeof(why)));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_match_accepts),
        cmocka_unit_test(test_match_bind),
        cmocka_unit_test(test_match_budget),
        cmocka_unit_test(test_match_order),
        cmocka_unit_test(test_match_flood_lookups_are_constant),
        cmocka_unit_test(test_match_many_keys),
        cmocka_unit_test(test_htab_basics),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
