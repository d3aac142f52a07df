/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The TCP transport's handshake with a job token (tcp_handshake.c,
 * core/auth.h), against hand-driven raw sockets: a real rank 0 (the
 * acceptor) meets a fake rank 1 that knows the token, one that has none,
 * one with a wrong token and one that replays a recorded handshake; and a
 * real rank 1 (the connector) meets a fake rank 0 with a wrong token. Only
 * the right token connects; the others are closed before any frame is
 * read, and a side without a token, or with another one, fails with
 * GS_ERR_AUTH or a timeout naming the rank.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "core/auth.h"
#include "core/clock.h"
#include "core/error.h"
#include "core/socket.h"
#include "transport/tcp/tcp_transport.h"
#include "transport/tcp/tcp_wire.h"
#include "transport/transport.h"

#define WAIT_MS 10000
#define SHORT_MS 1500

typedef struct acceptor {
    gs__tp_t *tp;
    char addrs[2][GS_TP_ADDR_MAX];
    gs__sockaddr_t addr;
    pthread_t thread;
    int wait_ms;
    gs_status_t status; /* of connect */
    char err[GS_ERROR_MSG_MAX];
} acceptor_t;

static gs__auth_t auth_of(const char *token)
{
    gs__auth_t a;

    assert_int_equal(gs__auth_init(&a, token, NULL), GS_OK);
    return a;
}

static void *acceptor_connect(void *arg)
{
    acceptor_t *a = arg;

    a->status = gs__tcp_ops.connect(a->tp, a->addrs, NULL, gs__deadline_after_ms(a->wait_ms));
    snprintf(a->err, sizeof(a->err), "%s", gs__error_get());
    return NULL;
}

/* A real rank 0 of 2 with @p auth (may be off), connecting in a thread. */
static void acceptor_start(acceptor_t *a, const gs__auth_t *auth, int wait_ms)
{
    gs__tp_params_t params = {
        .rank = 0, .size = 2, .job_id = 0x1234, .comm_id = 0x99, .auth = auth};
    gs__tcp_settings_t set = {
        .nsocks = 1, .ifname = "", .family = "any", .master_addr = "127.0.0.1"};

    memset(a, 0, sizeof(*a));
    a->wait_ms = wait_ms;
    assert_int_equal(gs__tcp_init_with(&params, &set, &a->tp), GS_OK);
    assert_int_equal(gs__tcp_ops.get_address(a->tp, a->addrs[0], sizeof(a->addrs[0])), GS_OK);
    snprintf(a->addrs[1], sizeof(a->addrs[1]), "127.0.0.1:1");
    assert_int_equal(gs__sock_parse(a->addrs[0], "any", &a->addr), GS_OK);
    assert_int_equal(pthread_create(&a->thread, NULL, acceptor_connect, a), 0);
}

static gs_status_t acceptor_join(acceptor_t *a)
{
    assert_int_equal(pthread_join(a->thread, NULL), 0);
    assert_int_equal(gs__tcp_ops.finalize(a->tp), GS_OK);
    return a->status;
}

static gs__tcp_hs_t hello_of(uint32_t flags, const uint8_t *nonce)
{
    gs__tcp_hs_t hs = {.version = GS_TCP_PROTO_VERSION,
                       .kind = GS_TCP_HS_HELLO,
                       .job_id = 0x1234,
                       .comm_id = 0x99,
                       .rank = 1,
                       .size = 2,
                       .index = 0,
                       .nsocks = 1,
                       .flags = flags};

    if (nonce != NULL) {
        memcpy(hs.nonce, nonce, sizeof(hs.nonce));
    }
    return hs;
}

static int fake_connect(const acceptor_t *a)
{
    int fd = -1;

    assert_int_equal(gs__sock_connect(&a->addr, gs__deadline_after_ms(WAIT_MS), &fd), GS_OK);
    return fd;
}

static void send_hs(int fd, const gs__tcp_hs_t *hs, uint8_t raw[GS_TCP_HS_LEN])
{
    gs__tcp_hs_encode(hs, raw);
    assert_int_equal(gs__sock_write_full(fd, raw, GS_TCP_HS_LEN, gs__deadline_after_ms(WAIT_MS)),
                     GS_OK);
}

static void recv_hs(int fd, gs__tcp_hs_t *hs)
{
    uint8_t buf[GS_TCP_HS_LEN];

    assert_int_equal(gs__sock_read_full(fd, buf, sizeof(buf), gs__deadline_after_ms(WAIT_MS)),
                     GS_OK);
    assert_int_equal(gs__tcp_hs_decode(buf, sizeof(buf), hs, NULL, 0), GS_OK);
}

/* 1 when the peer closed @p fd (EOF within WAIT_MS, nothing more to read). */
static int closed_by_peer(int fd)
{
    uint8_t b;
    const uint64_t end = gs__deadline_after_ms(WAIT_MS);

    while (gs__now_ns() < end) {
        ssize_t n = recv(fd, &b, 1, MSG_DONTWAIT);

        if ((n == 0) || ((n < 0) && (errno == ECONNRESET))) {
            return 1;
        }
        if (n > 0) {
            return 0;
        }
        usleep(1000);
    }
    return 0;
}

/* The whole exchange of a fake rank 1 with @p mine; returns the ACK and, in
 * raw_hello/raw_proof, the bytes it sent. */
static gs__tcp_hs_t fake_exchange(int fd, const gs__auth_t *mine, uint8_t raw_hello[GS_TCP_HS_LEN],
                                  uint8_t raw_proof[GS_TCP_HS_LEN])
{
    uint8_t nc[GS_AUTH_NONCE_BYTES];
    gs__tcp_hs_t hello;
    gs__tcp_hs_t ack;
    gs__tcp_hs_t proof;

    assert_int_equal(gs__auth_nonce(nc), GS_OK);
    hello = hello_of(GS_TCP_HS_F_AUTH, nc);
    send_hs(fd, &hello, raw_hello);
    recv_hs(fd, &ack);
    assert_int_equal(ack.kind, GS_TCP_HS_ACK);
    assert_int_equal(ack.verdict, GS_TCP_HS_OK);
    assert_true(ack.flags & GS_TCP_HS_F_AUTH);
    proof = hello_of(GS_TCP_HS_F_AUTH, NULL);
    proof.kind = GS_TCP_HS_PROOF;
    gs__auth_mac(mine, GS_AUTH_CONNECTOR, GS_TCP_AUTH_DOMAIN, nc, ack.nonce, proof.mac);
    send_hs(fd, &proof, raw_proof);
    return ack;
}

static void test_right_token_connects(void **state)
{
    gs__auth_t tok = auth_of("job-7 secret");
    uint8_t raw_hello[GS_TCP_HS_LEN];
    uint8_t raw_proof[GS_TCP_HS_LEN];
    uint8_t nc[GS_AUTH_NONCE_BYTES];
    acceptor_t a;
    gs__tcp_hs_t ack;
    int fd;

    (void)state;
    acceptor_start(&a, &tok, WAIT_MS);
    fd = fake_connect(&a);
    ack = fake_exchange(fd, &tok, raw_hello, raw_proof);
    /* The acceptor's MAC proves it holds the token, over our nonce. */
    memcpy(nc, raw_hello + 40, sizeof(nc));
    assert_int_equal(
        gs__auth_check(&tok, GS_AUTH_ACCEPTOR, GS_TCP_AUTH_DOMAIN, nc, ack.nonce, ack.mac), 1);
    assert_int_equal(acceptor_join(&a), GS_OK);
    close(fd);
}

static void test_no_token_refused(void **state)
{
    gs__auth_t tok = auth_of("job-7 secret");
    uint8_t raw[GS_TCP_HS_LEN];
    gs__tcp_hs_t hello = hello_of(0, NULL);
    gs__tcp_hs_t ack;
    acceptor_t a;
    int fd;

    (void)state;
    acceptor_start(&a, &tok, SHORT_MS);
    fd = fake_connect(&a);
    send_hs(fd, &hello, raw);
    recv_hs(fd, &ack);
    assert_int_equal(ack.verdict, GS_TCP_HS_AUTH_REQUIRED);
    assert_true(closed_by_peer(fd));
    assert_int_equal(acceptor_join(&a), GS_ERR_TIMEOUT);
    assert_non_null(strstr(a.err, "ranks 1"));
    close(fd);
}

static void test_wrong_token_dropped_before_frames(void **state)
{
    gs__auth_t tok = auth_of("job-7 secret");
    gs__auth_t wrong = auth_of("job-7 guess");
    uint8_t raw_hello[GS_TCP_HS_LEN];
    uint8_t raw_proof[GS_TCP_HS_LEN];
    uint8_t frame[GS_TCP_FRAME_HDR_LEN];
    gs__tcp_frame_hdr_t h = {.type = GS_TCP_FRAME_DATA, .tag = 1, .total_len = 0};
    acceptor_t a;
    int fd;

    (void)state;
    acceptor_start(&a, &tok, SHORT_MS);
    fd = fake_connect(&a);
    (void)fake_exchange(fd, &wrong, raw_hello, raw_proof);
    /* A frame right behind the bad proof is never read as one. */
    gs__tcp_frame_encode(&h, frame);
    (void)send(fd, frame, sizeof(frame), MSG_NOSIGNAL);
    assert_true(closed_by_peer(fd));
    assert_int_equal(acceptor_join(&a), GS_ERR_TIMEOUT);
    close(fd);
}

static void test_replayed_handshake_fails(void **state)
{
    gs__auth_t tok = auth_of("job-7 secret");
    uint8_t raw_hello[GS_TCP_HS_LEN];
    uint8_t raw_proof[GS_TCP_HS_LEN];
    gs__tcp_hs_t ack;
    acceptor_t a;
    int fd;

    (void)state;
    /* Record a good exchange... */
    acceptor_start(&a, &tok, WAIT_MS);
    fd = fake_connect(&a);
    (void)fake_exchange(fd, &tok, raw_hello, raw_proof);
    assert_int_equal(acceptor_join(&a), GS_OK);
    close(fd);
    /* ...and replay its bytes, without the token, to a new acceptor. */
    acceptor_start(&a, &tok, SHORT_MS);
    fd = fake_connect(&a);
    assert_int_equal(
        gs__sock_write_full(fd, raw_hello, sizeof(raw_hello), gs__deadline_after_ms(WAIT_MS)),
        GS_OK);
    recv_hs(fd, &ack);
    assert_int_equal(ack.verdict, GS_TCP_HS_OK);
    assert_int_equal(
        gs__sock_write_full(fd, raw_proof, sizeof(raw_proof), gs__deadline_after_ms(WAIT_MS)),
        GS_OK);
    assert_true(closed_by_peer(fd));
    assert_int_equal(acceptor_join(&a), GS_ERR_TIMEOUT);
    close(fd);
}

static void test_acceptor_without_token(void **state)
{
    uint8_t nc[GS_AUTH_NONCE_BYTES] = {7};
    uint8_t raw[GS_TCP_HS_LEN];
    gs__tcp_hs_t hello = hello_of(GS_TCP_HS_F_AUTH, nc);
    gs__tcp_hs_t ack;
    acceptor_t a;
    int fd;

    (void)state;
    acceptor_start(&a, NULL, SHORT_MS);
    fd = fake_connect(&a);
    send_hs(fd, &hello, raw);
    recv_hs(fd, &ack);
    assert_int_equal(ack.verdict, GS_TCP_HS_AUTH_UNEXPECTED);
    assert_true(closed_by_peer(fd));
    assert_int_equal(acceptor_join(&a), GS_ERR_TIMEOUT);
    close(fd);
}

/* A real rank 1 (connector) meets a fake rank 0 whose token differs. */
static void test_connector_refuses_wrong_acceptor(void **state)
{
    gs__auth_t tok = auth_of("job-7 secret");
    gs__auth_t wrong = auth_of("job-7 guess");
    gs__tp_params_t params = {
        .rank = 1, .size = 2, .job_id = 0x1234, .comm_id = 0x99, .auth = &tok};
    gs__tcp_settings_t set = {
        .nsocks = 1, .ifname = "", .family = "any", .master_addr = "127.0.0.1"};
    char addrs[2][GS_TP_ADDR_MAX];
    gs__sockaddr_t any;
    gs__sockaddr_t bound;
    gs__tcp_hs_t hello;
    gs__tcp_hs_t ack;
    gs__tp_t *tp = NULL;
    uint8_t raw[GS_TCP_HS_LEN];
    int lfd = -1;
    int fd = -1;
    acceptor_t conn;

    (void)state;
    assert_int_equal(gs__sock_parse("127.0.0.1:0", "any", &any), GS_OK);
    assert_int_equal(gs__sock_listen(&any, 4, &lfd, &bound), GS_OK);
    assert_int_equal(gs__sock_format(&bound, addrs[0], sizeof(addrs[0])), GS_OK);
    assert_int_equal(gs__tcp_init_with(&params, &set, &tp), GS_OK);
    assert_int_equal(gs__tcp_ops.get_address(tp, addrs[1], sizeof(addrs[1])), GS_OK);
    memset(&conn, 0, sizeof(conn));
    conn.tp = tp;
    conn.wait_ms = WAIT_MS;
    memcpy(conn.addrs, addrs, sizeof(addrs));
    assert_int_equal(pthread_create(&conn.thread, NULL, acceptor_connect, &conn), 0);
    assert_int_equal(gs__sock_accept(lfd, gs__deadline_after_ms(WAIT_MS), &fd), GS_OK);
    assert_true(fd >= 0);
    recv_hs(fd, &hello);
    assert_true(hello.flags & GS_TCP_HS_F_AUTH);
    ack = hello;
    ack.kind = GS_TCP_HS_ACK;
    ack.rank = 0;
    assert_int_equal(gs__auth_nonce(ack.nonce), GS_OK);
    gs__auth_mac(&wrong, GS_AUTH_ACCEPTOR, GS_TCP_AUTH_DOMAIN, hello.nonce, ack.nonce, ack.mac);
    send_hs(fd, &ack, raw);
    assert_int_equal(pthread_join(conn.thread, NULL), 0);
    assert_int_equal(conn.status, GS_ERR_AUTH);
    assert_non_null(strstr(conn.err, "GS_AUTH_TOKEN"));
    assert_int_equal(gs__tcp_ops.finalize(tp), GS_OK);
    close(fd);
    close(lfd);
}

int main(void)
{
    gs__auth_t probe;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_right_token_connects),
        cmocka_unit_test(test_no_token_refused),
        cmocka_unit_test(test_wrong_token_dropped_before_frames),
        cmocka_unit_test(test_replayed_handshake_fails),
        cmocka_unit_test(test_acceptor_without_token),
        cmocka_unit_test(test_connector_refuses_wrong_acceptor),
    };

    if (gs__auth_init(&probe, "x", NULL) == GS_ERR_UNSUPPORTED) {
        printf(
            "test_tcp_auth: built without OpenSSL; tokens are refused (test_auth checks that)\n");
        return 0;
    }
    return cmocka_run_group_tests(tests, NULL, NULL);
}
