/* SPDX-License-Identifier: Apache-2.0 */
/*
 * What a flood of held messages costs the TCP transport per frame, probe
 * and receive (issue 17): a fake peer makes the real rank 0 hold 2^16
 * messages, and then probes, receives and further chunks must look at a
 * bounded number of match keys each, not at everything held (before the
 * match index every probe walked the whole unexpected list, and a further
 * chunk or a finished message walked the peer's started ones). Also the
 * order in which receives from one peer and from any source take held
 * messages of two peers.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "core/clock.h"
#include "core/error.h"
#include "core/socket.h"
#include "tcp_fake_peer.h"
#include "transport/tcp/tcp_conn.h"
#include "transport/tcp/tcp_transport.h"
#include "transport/tcp/tcp_wire.h"
#include "transport/transport.h"

#define FLOOD_TAG 777u
#define FLOOD_BATCH 512

/* Drive rank 0 until it holds @p want messages (bounded by FAKE_WAIT_MS). */
static void wait_held(fake_peer_t *f, uint64_t want)
{
    const uint64_t deadline = gs__deadline_after_ms(FAKE_WAIT_MS);

    while ((f->tp->held.msgs < want) && (gs__now_ns() < deadline)) {
        (void)gs__tcp_ops.progress(f->tp, gs__now_ns() + 1000000ull);
    }
    assert_int_equal(f->tp->held.msgs, want);
}

/* @p n zero-length messages seq0.. from fake rank @p from with @p tag, in
 * batches that fit a socket buffer, each batch taken in before the next. */
static void flood(fake_peer_t *f, int from, uint64_t seq0, int n, uint64_t tag)
{
    uint8_t *buf = malloc((size_t)FLOOD_BATCH * GS_TCP_FRAME_HDR_LEN);
    const uint64_t held = f->tp->held.msgs;

    assert_non_null(buf);
    for (int done = 0; done < n;) {
        const int k = (n - done < FLOOD_BATCH) ? n - done : FLOOD_BATCH;

        for (int i = 0; i < k; i++) {
            gs__tcp_frame_hdr_t h = {
                .type = GS_TCP_FRAME_DATA, .seq = seq0 + (uint64_t)(done + i), .tag = tag};

            gs__tcp_frame_encode(&h, buf + (size_t)i * GS_TCP_FRAME_HDR_LEN);
        }
        assert_int_equal(gs__sock_write_full(f->fds[from][0], buf, (size_t)k * GS_TCP_FRAME_HDR_LEN,
                                             gs__deadline_after_ms(FAKE_WAIT_MS)),
                         GS_OK);
        done += k;
        wait_held(f, held + (uint64_t)done);
    }
    free(buf);
}

static void probe(fake_peer_t *f, int peer, uint64_t tag, int want_found, int want_peer)
{
    gs__tp_completion_t comp;
    int found = -1;

    assert_int_equal(gs__tcp_ops.probe(f->tp, peer, tag, &found, &comp), GS_OK);
    assert_int_equal(found, want_found);
    if (want_found) {
        assert_int_equal(comp.peer, want_peer);
    }
}

/*
 * 2^16 held empty messages from rank 1 (what hostile flood_zero sends, at a
 * sixteenth), then what diagnosis polls do on every wake-up: probes for a
 * tag nobody sent, from any source and from the flooder, 1,000 times; then
 * every held message received. Each look at the index costs a few keys.
 * The walk it replaced looked at 2^16 messages per probe: 2^27 for these
 * probes alone.
 */
static void test_tcp_held_flood_lookups_are_constant(void **state)
{
    const int n = 1 << 16;
    uint64_t before;
    fake_peer_t f;

    (void)state;
    fake_setup(&f, 1);
    before = f.tp->unexp.steps;
    flood(&f, 1, 0, n, FLOOD_TAG);
    /* Holding each one looked its two keys up. */
    assert_true(f.tp->unexp.steps - before <= (uint64_t)n * 2 * 2);
    before = f.tp->unexp.steps;
    for (int i = 0; i < 1000; i++) {
        probe(&f, GS_ANY_SOURCE, 0x4447u, 0, 0);
        probe(&f, 1, 12345u, 0, 0);
        probe(&f, GS_ANY_SOURCE, FLOOD_TAG, 1, 1);
    }
    assert_true(f.tp->unexp.steps - before <= 3000u * 2);
    before = f.tp->unexp.steps;
    for (int i = 0; i < n; i++) {
        gs__tp_completion_t comp;
        gs__tp_req_t *req;
        uint8_t dummy;
        int done = 0;

        assert_int_equal(gs__tcp_ops.irecv(f.tp, 1, FLOOD_TAG, &dummy, sizeof(dummy), &req), GS_OK);
        assert_int_equal(gs__tcp_ops.test(f.tp, req, &done, &comp), GS_OK);
        assert_true(done);
        assert_int_equal(comp.status, GS_OK);
        assert_int_equal(comp.nbytes, 0);
        gs__tcp_ops.req_release(f.tp, req);
    }
    assert_true(f.tp->unexp.steps - before <= (uint64_t)n * 2);
    assert_int_equal(f.tp->held.msgs, 0);
    assert_int_equal(f.tp->held.bytes, 0);
    assert_int_equal(f.tp->unexp.keys.n, 0);
    fake_teardown(&f);
}

/*
 * Started striped messages held by (peer, seq): 500 messages of two
 * chunks each, first halves sent oldest first, then the second halves
 * oldest first. Each second half finds its message and each finished
 * message leaves its peer's list at once (both walked the list before:
 * about 500 x 500 steps). Every message arrives whole.
 */
static void test_tcp_held_striped_chunks_find_their_message(void **state)
{
    const uint64_t total = GS_TCP_STRIPE_MIN;
    const uint64_t half = total / 2;
    const int n = 500;
    uint8_t *payload = malloc(total);
    uint8_t *got = malloc(total);
    fake_peer_t f;

    (void)state;
    assert_non_null(payload);
    assert_non_null(got);
    for (uint64_t i = 0; i < total; i++) {
        payload[i] = (uint8_t)(i * 7u + 3u);
    }
    fake_setup(&f, 2);
    for (int i = 0; i < n; i++) {
        fake_frame(&f, 0, GS_TCP_FRAME_DATA, (uint64_t)i, FLOOD_TAG, total, 0, payload, half);
        if ((i % 64) == 63) {
            wait_held(&f, (uint64_t)i + 1u);
        }
    }
    wait_held(&f, (uint64_t)n);
    for (int i = 0; i < n; i++) {
        fake_frame(&f, 1, GS_TCP_FRAME_DATA, (uint64_t)i, FLOOD_TAG, total, half, payload, half);
        if (((i % 64) == 63) || (i == n - 1)) {
            /* Held until received, but finished: off the started ones. */
            const uint64_t deadline = gs__deadline_after_ms(FAKE_WAIT_MS);

            while ((gs__tcp_active_find(f.tp, 1, (uint64_t)i) != NULL) &&
                   (gs__now_ns() < deadline)) {
                (void)gs__tcp_ops.progress(f.tp, gs__now_ns() + 1000000ull);
            }
            assert_null(gs__tcp_active_find(f.tp, 1, (uint64_t)i));
        }
    }
    assert_null(f.tp->peers[1].active);
    for (int i = 0; i < n; i++) {
        gs__tp_completion_t comp;
        gs__tp_req_t *req;

        memset(got, 0, total);
        assert_int_equal(gs__tcp_ops.irecv(f.tp, 1, FLOOD_TAG, got, total, &req), GS_OK);
        comp = fake_wait(&f, req);
        assert_int_equal(comp.status, GS_OK);
        assert_int_equal(comp.nbytes, total);
        assert_memory_equal(got, payload, total);
        gs__tcp_ops.req_release(f.tp, req);
    }
    assert_int_equal(f.tp->held.msgs, 0);
    assert_int_equal(f.tp->active.n, 0);
    fake_teardown(&f);
    free(payload);
    free(got);
}

/* Held messages of two peers, taken by receives from one peer and from any
 * source: each takes the earliest that matches it. */
static void test_tcp_held_order_two_peers(void **state)
{
    const uint64_t a = 50;
    const uint64_t b = 60;
    fake_peer_t f;
    uint8_t v;

    (void)state;
    fake_setup_n(&f, 3, 1);
    v = 10;
    fake_frame_from(&f, 1, 0, GS_TCP_FRAME_DATA, 0, a, 1, 0, &v, 1);
    v = 11;
    fake_frame_from(&f, 1, 0, GS_TCP_FRAME_DATA, 1, b, 1, 0, &v, 1);
    v = 12;
    fake_frame_from(&f, 1, 0, GS_TCP_FRAME_DATA, 2, a, 1, 0, &v, 1);
    wait_held(&f, 3);
    v = 20;
    fake_frame_from(&f, 2, 0, GS_TCP_FRAME_DATA, 0, a, 1, 0, &v, 1);
    v = 21;
    fake_frame_from(&f, 2, 0, GS_TCP_FRAME_DATA, 1, b, 1, 0, &v, 1);
    wait_held(&f, 5);
    probe(&f, GS_ANY_SOURCE, a, 1, 1);
    probe(&f, 2, a, 1, 2);
    {
        const struct {
            int peer;
            uint64_t tag;
            uint8_t want;
        } takes[] = {{2, a, 20},
                     {GS_ANY_SOURCE, a, 10},
                     {GS_ANY_SOURCE, a, 12},
                     {GS_ANY_SOURCE, b, 11},
                     {1, b, 0},
                     {2, b, 21}};

        for (size_t i = 0; i < sizeof(takes) / sizeof(takes[0]); i++) {
            gs__tp_completion_t comp;
            gs__tp_req_t *req;
            uint8_t got = 0;
            int done = 0;

            assert_int_equal(gs__tcp_ops.irecv(f.tp, takes[i].peer, takes[i].tag, &got, 1, &req),
                             GS_OK);
            assert_int_equal(gs__tcp_ops.test(f.tp, req, &done, &comp), GS_OK);
            if (takes[i].want == 0) {
                assert_false(done); /* nothing of rank 1 with tag b is left */
            } else {
                assert_true(done);
                assert_int_equal(got, takes[i].want);
            }
            gs__tcp_ops.req_release(f.tp, req);
        }
    }
    probe(&f, GS_ANY_SOURCE, a, 0, 0);
    assert_int_equal(f.tp->held.msgs, 0);
    fake_teardown(&f);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_tcp_held_flood_lookups_are_constant),
        cmocka_unit_test(test_tcp_held_striped_chunks_find_their_message),
        cmocka_unit_test(test_tcp_held_order_two_peers),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
