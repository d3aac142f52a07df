/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Failure propagation in the TCP transport, against a real rank 0 whose
 * peers are hand-driven sockets (tcp_fake_peer.h): DOWN frames received
 * (receives fail naming the failed rank, arriving bytes are drained, sends
 * go on, nothing is passed on), DOWN frames sent when a peer closes without
 * BYE (and again before BYE at finalize, never for a BYE), hostile DOWN
 * frames, a send released mid-wire while down, reading what a peer sent
 * before blaming a reset, and first-reason-wins. The in-process multi-rank
 * kill tests are in test_tcp_transport.c.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "tcp_fake_peer.h"
#include "transport/tcp/tcp_conn.h"

static const gs__transport_ops_t *ops = &gs__tcp_ops;

static uint8_t pattern(int src, int dst, size_t i, int salt)
{
    return (uint8_t)(src * 31 + dst * 7 + (int)(i * 13u) + (int)(i >> 9) + salt);
}

static void fill_pattern(uint8_t *buf, size_t len, int src, int dst, int salt)
{
    for (size_t i = 0; i < len; i++) {
        buf[i] = pattern(src, dst, i, salt);
    }
}

static int check_pattern(const uint8_t *buf, size_t len, int src, int dst, int salt)
{
    for (size_t i = 0; i < len; i++) {
        if (buf[i] != pattern(src, dst, i, salt)) {
            return 0;
        }
    }
    return 1;
}

/*
 * DOWN(3) from rank 2 while a message from live rank 1 is half read into a
 * receive: that receive and one from rank 2 fail naming rank 3; the rest of
 * the message is drained (the buffer is not written after the failure) and
 * rank 1's stream stays in sync; rank 3's sockets are closed; nothing is
 * passed on; later receives fail at once; sends to rank 1 still work.
 */
static void test_tcp_down_down_frame_fails_receives_and_drains(void **state)
{
    uint8_t msg[2000];
    uint8_t got[2000];
    uint8_t small[8] = {1, 2, 3, 4, 5, 6, 7, 8};
    uint8_t hdr[GS_TCP_FRAME_HDR_LEN];
    gs__tcp_frame_hdr_t h = {
        .type = GS_TCP_FRAME_DATA, .tag = 10, .total_len = 2000, .chunk_len = 2000};
    gs__tp_completion_t comp;
    gs__tp_req_t *r1;
    gs__tp_req_t *r2;
    int done = 0;
    fake_peer_t f;

    (void)state;
    fake_setup_n(&f, 4, 1);
    fill_pattern(msg, sizeof(msg), 1, 0, 3);
    memset(got, 0xee, sizeof(got));
    assert_int_equal(ops->irecv(f.tp, 1, 10, got, sizeof(got), &r1), GS_OK);
    assert_int_equal(ops->irecv(f.tp, 2, 11, small, sizeof(small), &r2), GS_OK);
    gs__tcp_frame_encode(&h, hdr);
    assert_int_equal(
        gs__sock_write_full(f.fds[1][0], hdr, sizeof(hdr), gs__deadline_after_ms(FAKE_WAIT_MS)),
        GS_OK);
    assert_int_equal(
        gs__sock_write_full(f.fds[1][0], msg, 500, gs__deadline_after_ms(FAKE_WAIT_MS)), GS_OK);
    assert_int_equal(ops->progress(f.tp, gs__deadline_after_ms(50)), GS_OK);
    fake_frame_from(&f, 2, 0, GS_TCP_FRAME_DOWN, 0, 3, 0, 0, NULL, 0);
    comp = fake_wait(&f, r1);
    assert_int_equal(comp.status, GS_ERR_PEER_FAILED);
    assert_non_null(strstr(gs__error_get(), "rank 3 failed (reported by rank 2)"));
    assert_int_equal(fake_wait(&f, r2).status, GS_ERR_PEER_FAILED);
    ops->req_release(f.tp, r1);
    ops->req_release(f.tp, r2);
    /* The rest of message 0, then message 1: drained, rank 1 stays healthy. */
    assert_int_equal(
        gs__sock_write_full(f.fds[1][0], msg + 500, 1500, gs__deadline_after_ms(FAKE_WAIT_MS)),
        GS_OK);
    fake_frame_from(&f, 1, 0, GS_TCP_FRAME_DATA, 1, 12, 8, 0, small, 8);
    assert_int_equal(ops->progress(f.tp, gs__deadline_after_ms(50)), GS_OK);
    assert_memory_equal(got, msg, 500);
    for (size_t i = 500; i < sizeof(got); i++) {
        assert_int_equal(got[i], 0xee);
    }
    assert_int_equal(f.tp->peers[1].fail_status, GS_OK);
    assert_int_equal(f.tp->peers[2].fail_status, GS_OK);
    assert_int_equal(f.tp->peers[3].fail_status, GS_ERR_PEER_FAILED);
    fake_expect_closed(&f, 3, 0);
    fake_expect_quiet(&f, 1, 0);
    fake_expect_quiet(&f, 2, 0);
    /* Later receives fail at once, even one a held message would match. */
    assert_int_equal(ops->irecv(f.tp, 1, 12, got, sizeof(got), &r1), GS_OK);
    ops->test(f.tp, r1, &done, &comp);
    assert_int_equal(done, 1);
    assert_int_equal(comp.status, GS_ERR_PEER_FAILED);
    ops->req_release(f.tp, r1);
    /* Sends to a live rank are untouched. */
    assert_int_equal(ops->isend(f.tp, 1, 13, small, sizeof(small), &r1), GS_OK);
    assert_int_equal(fake_wait(&f, r1).status, GS_OK);
    ops->req_release(f.tp, r1);
    h = fake_read_hdr(&f, 1, 0);
    assert_int_equal(h.type, GS_TCP_FRAME_DATA);
    assert_true(h.tag == 13);
    fake_teardown(&f);
}

/* Rank 2 closes without BYE: rank 0 fails its receive from live rank 1,
 * naming rank 2, and reports rank 2 to rank 1 with a DOWN frame on each
 * socket; its finalize repeats DOWN(2) before BYE. */
static void test_tcp_down_close_is_reported_with_down(void **state)
{
    gs__tcp_frame_hdr_t h;
    gs__tp_completion_t comp;
    gs__tp_req_t *req;
    uint8_t b[8];
    fake_peer_t f;

    (void)state;
    fake_setup_n(&f, 3, 2);
    assert_int_equal(ops->irecv(f.tp, 1, 10, b, sizeof(b), &req), GS_OK);
    close(f.fds[2][1]);
    f.fds[2][1] = open("/dev/null", 0); /* keep teardown's close harmless */
    comp = fake_wait(&f, req);
    assert_int_equal(comp.status, GS_ERR_PEER_FAILED);
    assert_non_null(strstr(gs__error_get(), "rank 2 failed (peer 2 closed the connection)"));
    ops->req_release(f.tp, req);
    for (int i = 0; i < 2; i++) {
        h = fake_read_hdr(&f, 1, i);
        assert_int_equal(h.type, GS_TCP_FRAME_DOWN);
        assert_true(h.tag == 2);
        fake_expect_quiet(&f, 1, i);
    }
    assert_int_equal(ops->finalize(f.tp), GS_OK);
    for (int i = 0; i < 2; i++) {
        h = fake_read_hdr(&f, 1, i);
        assert_int_equal(h.type, GS_TCP_FRAME_DOWN);
        assert_true(h.tag == 2);
        assert_int_equal(fake_read_hdr(&f, 1, i).type, GS_TCP_FRAME_BYE);
    }
    for (int r = 1; r < 3; r++) {
        for (int i = 0; i < 2; i++) {
            close(f.fds[r][i]);
        }
    }
}

/* A rank that leaves with BYE is not a failure: no DOWN, other receives live on. */
static void test_tcp_down_bye_is_not_reported(void **state)
{
    uint8_t payload[4] = {4, 3, 2, 1};
    uint8_t got[4] = {0};
    gs__tp_completion_t comp;
    gs__tp_req_t *req;
    int done = 0;
    fake_peer_t f;

    (void)state;
    fake_setup_n(&f, 3, 1);
    assert_int_equal(ops->irecv(f.tp, 1, 10, got, sizeof(got), &req), GS_OK);
    fake_frame_from(&f, 2, 0, GS_TCP_FRAME_BYE, 0, 0, 0, 0, NULL, 0);
    close(f.fds[2][0]);
    f.fds[2][0] = open("/dev/null", 0);
    assert_int_equal(ops->progress(f.tp, gs__deadline_after_ms(100)), GS_OK);
    assert_int_equal(ops->progress(f.tp, gs__deadline_after_ms(100)), GS_OK);
    assert_int_equal(f.tp->peers[2].fail_status, GS_ERR_PEER_FAILED);
    ops->test(f.tp, req, &done, &comp);
    assert_int_equal(done, 0);
    fake_expect_quiet(&f, 1, 0);
    fake_frame(&f, 0, GS_TCP_FRAME_DATA, 0, 10, 4, 0, payload, 4);
    assert_int_equal(fake_wait(&f, req).status, GS_OK);
    assert_memory_equal(got, payload, sizeof(got));
    ops->req_release(f.tp, req);
    fake_teardown(&f);
}

/* DOWN naming no rank, the receiver or the sender, or with a field set. */
static void test_tcp_down_bad_down_frame_fails_peer(void **state)
{
    static const uint64_t bad_rank[] = {3, 1000, 0, 1};
    fake_peer_t f;

    (void)state;
    for (size_t i = 0; i < sizeof(bad_rank) / sizeof(bad_rank[0]); i++) {
        fake_setup_n(&f, 3, 1);
        fake_frame(&f, 0, GS_TCP_FRAME_DOWN, 0, bad_rank[i], 0, 0, NULL, 0);
        expect_protocol_failure(&f, "down frame names rank");
        assert_int_equal(f.tp->peers[2].fail_status, GS_OK); /* only the liar is failed */
        fake_teardown(&f);
    }
    fake_setup_n(&f, 3, 1);
    fake_frame(&f, 0, GS_TCP_FRAME_DOWN, 7, 2, 0, 0, NULL, 0);
    expect_protocol_failure(&f, "down frame with non-zero fields");
    fake_teardown(&f);
}

/*
 * While down, a send released with part of it on the wire finishes from a
 * copy (the caller may reuse the buffer at once) instead of cutting the
 * stream, so the receiver is not led to blame this rank.
 */
static void test_tcp_down_release_mid_wire_while_down_finishes(void **state)
{
    const size_t big = 32u << 20;
    uint8_t *buf = malloc(big);
    uint8_t *got = malloc(big);
    gs__tcp_frame_hdr_t h;
    gs__tp_completion_t comp;
    gs__tp_req_t *req;
    uint64_t deadline;
    size_t have = 0;
    int done = 0;
    fake_peer_t f;

    (void)state;
    assert_non_null(buf);
    assert_non_null(got);
    fake_setup_n(&f, 4, 1);
    fill_pattern(buf, big, 0, 1, 5);
    assert_int_equal(ops->isend(f.tp, 1, 20, buf, big, &req), GS_OK);
    ops->test(f.tp, req, &done, &comp);
    assert_int_equal(done, 0); /* rank 1 is not reading: partly on the wire */
    assert_true(req->on_wire);
    fake_frame_from(&f, 2, 0, GS_TCP_FRAME_DOWN, 0, 3, 0, 0, NULL, 0);
    deadline = gs__deadline_after_ms(FAKE_WAIT_MS);
    while ((f.tp->down_status == GS_OK) && (gs__now_ns() < deadline)) {
        assert_int_equal(ops->progress(f.tp, gs__deadline_after_ms(10)), GS_OK);
    }
    assert_int_equal(f.tp->down_status, GS_ERR_PEER_FAILED);
    assert_int_equal(ops->req_release(f.tp, req), GS_OK);
    memset(buf, 0, big); /* the caller owns it again */
    h = fake_read_hdr(&f, 1, 0);
    assert_int_equal(h.type, GS_TCP_FRAME_DATA);
    assert_true((h.tag == 20) && (h.total_len == big) && (h.chunk_len == big));
    deadline = gs__deadline_after_ms(FAKE_WAIT_MS);
    while ((have < big) && (gs__now_ns() < deadline)) {
        ssize_t n = recv(f.fds[1][0], got + have, big - have, MSG_DONTWAIT);

        if (n > 0) {
            have += (size_t)n;
        } else {
            assert_int_equal(ops->progress(f.tp, gs__deadline_after_ms(1)), GS_OK);
        }
    }
    assert_int_equal(have, big);
    assert_true(check_pattern(got, big, 0, 1, 5));
    assert_int_equal(f.tp->peers[1].fail_status, GS_OK);
    assert_int_equal(ops->progress(f.tp, gs__deadline_after_ms(20)), GS_OK);
    fake_expect_quiet(&f, 1, 0);
    fake_teardown(&f);
    free(buf);
    free(got);
}

/*
 * Rank 1 writes DOWN(3) and then resets the connection; rank 0 meets the
 * reset first, on a send. It must read what rank 1 sent before blaming it:
 * its receive from live rank 2 and the send fail naming rank 3, and rank 1
 * is not reported to rank 2 (that would make rank 2 blame a survivor).
 */
static void test_tcp_down_reads_down_before_blaming_a_reset(void **state)
{
    struct linger lg = {.l_onoff = 1, .l_linger = 0};
    uint8_t b[8] = {0};
    gs__tp_completion_t comp;
    gs__tp_req_t *rr;
    gs__tp_req_t *rs;
    int done = 0;
    fake_peer_t f;

    (void)state;
    fake_setup_n(&f, 4, 1);
    assert_int_equal(ops->irecv(f.tp, 2, 10, b, sizeof(b), &rr), GS_OK);
    fake_frame_from(&f, 1, 0, GS_TCP_FRAME_DOWN, 0, 3, 0, 0, NULL, 0);
    assert_int_equal(setsockopt(f.fds[1][0], SOL_SOCKET, SO_LINGER, &lg, sizeof(lg)), 0);
    close(f.fds[1][0]); /* RST */
    f.fds[1][0] = open("/dev/null", 0);
    usleep(20000);
    /* No progress yet: the send is what finds the connection broken. */
    assert_int_equal(ops->isend(f.tp, 1, 11, b, sizeof(b), &rs), GS_OK);
    ops->test(f.tp, rs, &done, &comp);
    if (!done) { /* the first write may still be accepted; the reset shows on the next */
        comp = fake_wait(&f, rs);
    }
    assert_int_equal(comp.status, GS_ERR_PEER_FAILED);
    assert_non_null(strstr(gs__error_get(), "rank 3 failed (reported by rank 1)"));
    comp = fake_wait(&f, rr);
    assert_int_equal(comp.status, GS_ERR_PEER_FAILED);
    assert_non_null(strstr(gs__error_get(), "rank 3 failed (reported by rank 1)"));
    fake_expect_quiet(&f, 2, 0);
    ops->req_release(f.tp, rr);
    ops->req_release(f.tp, rs);
    fake_teardown(&f);
}

/* Once down, a survivor that leaves (BYE) fails the send still queued to it
 * with the reason that took the instance down, not "left". */
static void test_tcp_down_later_failures_keep_the_first_reason(void **state)
{
    const size_t big = 32u << 20;
    uint8_t *buf = calloc(1, big);
    gs__tp_completion_t comp;
    gs__tp_req_t *req;
    uint64_t deadline;
    fake_peer_t f;

    (void)state;
    assert_non_null(buf);
    fake_setup_n(&f, 4, 1);
    assert_int_equal(ops->isend(f.tp, 1, 20, buf, big, &req), GS_OK);
    fake_frame_from(&f, 2, 0, GS_TCP_FRAME_DOWN, 0, 3, 0, 0, NULL, 0);
    deadline = gs__deadline_after_ms(FAKE_WAIT_MS);
    while ((f.tp->down_status == GS_OK) && (gs__now_ns() < deadline)) {
        assert_int_equal(ops->progress(f.tp, gs__deadline_after_ms(10)), GS_OK);
    }
    fake_frame_from(&f, 1, 0, GS_TCP_FRAME_BYE, 0, 0, 0, 0, NULL, 0);
    comp = fake_wait(&f, req);
    assert_int_equal(comp.status, GS_ERR_PEER_FAILED);
    assert_non_null(strstr(gs__error_get(), "rank 3 failed (reported by rank 2)"));
    assert_int_equal(f.tp->peers[1].fail_status, GS_ERR_PEER_FAILED);
    fake_expect_quiet(&f, 2, 0); /* and rank 1 is not reported */
    ops->req_release(f.tp, req);
    fake_teardown(&f);
    free(buf);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_tcp_down_down_frame_fails_receives_and_drains),
        cmocka_unit_test(test_tcp_down_close_is_reported_with_down),
        cmocka_unit_test(test_tcp_down_bye_is_not_reported),
        cmocka_unit_test(test_tcp_down_bad_down_frame_fails_peer),
        cmocka_unit_test(test_tcp_down_release_mid_wire_while_down_finishes),
        cmocka_unit_test(test_tcp_down_reads_down_before_blaming_a_reset),
        cmocka_unit_test(test_tcp_down_later_failures_keep_the_first_reason),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
