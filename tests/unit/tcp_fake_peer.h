/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Test helper, not a test: a real TCP transport rank 0 whose peers
 * 1..size-1 are hand-driven raw sockets speaking the wire format, so frames
 * can be put on chosen sockets in a chosen order, or be hostile. Shared by
 * test_tcp_transport.c and test_tcp_down.c; include after <cmocka.h>.
 * Everything is static inline so that a file may use any subset.
 */
#ifndef GS_TESTS_UNIT_TCP_FAKE_PEER_H
#define GS_TESTS_UNIT_TCP_FAKE_PEER_H

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "core/clock.h"
#include "core/error.h"
#include "core/socket.h"
#include "transport/tcp/tcp_transport.h"
#include "transport/tcp/tcp_wire.h"
#include "transport/transport.h"

#define FAKE_MAX_RANKS 4
#define FAKE_WAIT_MS 10000

typedef struct fake_peer {
    gs__tp_t *tp; /* the real rank 0 */
    int size;
    int nsocks;
    int fds[FAKE_MAX_RANKS][4]; /* fds[r][i]: socket i of fake rank r >= 1 */
} fake_peer_t;

/* A real rank 0 of @p size ranks whose peers 1..size-1 are all fakes. */
static inline void fake_setup_n(fake_peer_t *f, int size, int nsocks)
{
    gs__tp_params_t params = {
        .rank = 0, .size = size, .job_id = 0x1234, .comm_id = 0x99, .counters = NULL};
    gs__tcp_settings_t set = {
        .nsocks = nsocks, .ifname = "", .family = "any", .master_addr = "127.0.0.1"};
    char addrs[FAKE_MAX_RANKS][GS_TP_ADDR_MAX];
    gs__sockaddr_t addr;

    f->size = size;
    f->nsocks = nsocks;
    assert_int_equal(gs__tcp_init_with(&params, &set, &f->tp), GS_OK);
    assert_int_equal(gs__tcp_ops.get_address(f->tp, addrs[0], sizeof(addrs[0])), GS_OK);
    assert_int_equal(gs__sock_parse(addrs[0], "any", &addr), GS_OK);
    for (int r = 1; r < size; r++) {
        snprintf(addrs[r], sizeof(addrs[r]), "127.0.0.1:1");
        for (int i = 0; i < nsocks; i++) {
            gs__tcp_hs_t hs = {.version = GS_TCP_PROTO_VERSION,
                               .kind = GS_TCP_HS_HELLO,
                               .job_id = 0x1234,
                               .comm_id = 0x99,
                               .rank = (uint32_t)r,
                               .size = (uint32_t)size,
                               .index = (uint32_t)i,
                               .nsocks = (uint32_t)nsocks};
            uint8_t buf[GS_TCP_HS_LEN];

            /* The kernel completes the TCP handshake from the listen backlog. */
            assert_int_equal(
                gs__sock_connect(&addr, gs__deadline_after_ms(FAKE_WAIT_MS), &f->fds[r][i]), GS_OK);
            gs__tcp_hs_encode(&hs, buf);
            assert_int_equal(gs__sock_write_full(f->fds[r][i], buf, sizeof(buf),
                                                 gs__deadline_after_ms(FAKE_WAIT_MS)),
                             GS_OK);
        }
    }
    assert_int_equal(gs__tcp_ops.connect(f->tp, addrs, NULL, gs__deadline_after_ms(FAKE_WAIT_MS)),
                     GS_OK);
    for (int r = 1; r < size; r++) {
        for (int i = 0; i < nsocks; i++) {
            uint8_t buf[GS_TCP_HS_LEN];
            gs__tcp_hs_t ack;

            assert_int_equal(gs__sock_read_full(f->fds[r][i], buf, sizeof(buf),
                                                gs__deadline_after_ms(FAKE_WAIT_MS)),
                             GS_OK);
            assert_int_equal(gs__tcp_hs_decode(buf, sizeof(buf), &ack, NULL, 0), GS_OK);
            assert_int_equal(ack.verdict, GS_TCP_HS_OK);
            assert_int_equal(ack.rank, 0);
            assert_int_equal(ack.index, i);
        }
    }
}

static inline void fake_setup(fake_peer_t *f, int nsocks)
{
    fake_setup_n(f, 2, nsocks);
}

static inline void fake_teardown(fake_peer_t *f)
{
    for (int r = 1; r < f->size; r++) {
        for (int i = 0; i < f->nsocks; i++) {
            close(f->fds[r][i]);
        }
    }
    assert_int_equal(gs__tcp_ops.finalize(f->tp), GS_OK);
}

/* Write a frame header (and its payload bytes) as fake rank @p from. */
static inline void fake_frame_from(fake_peer_t *f, int from, int sock, uint32_t type, uint64_t seq,
                                   uint64_t tag, uint64_t total, uint64_t off,
                                   const uint8_t *payload, uint64_t chunk)
{
    gs__tcp_frame_hdr_t h = {.type = type,
                             .seq = seq,
                             .tag = tag,
                             .total_len = total,
                             .offset = off,
                             .chunk_len = chunk};
    uint8_t hdr[GS_TCP_FRAME_HDR_LEN];

    gs__tcp_frame_encode(&h, hdr);
    assert_int_equal(gs__sock_write_full(f->fds[from][sock], hdr, sizeof(hdr),
                                         gs__deadline_after_ms(FAKE_WAIT_MS)),
                     GS_OK);
    if (chunk > 0) {
        assert_int_equal(gs__sock_write_full(f->fds[from][sock], payload + off, (size_t)chunk,
                                             gs__deadline_after_ms(FAKE_WAIT_MS)),
                         GS_OK);
    }
}

static inline void fake_frame(fake_peer_t *f, int sock, uint32_t type, uint64_t seq, uint64_t tag,
                              uint64_t total, uint64_t off, const uint8_t *payload, uint64_t chunk)
{
    fake_frame_from(f, 1, sock, type, seq, tag, total, off, payload, chunk);
}

/* Run rank 0's progress until req finishes; returns its completion. */
static inline gs__tp_completion_t fake_wait(fake_peer_t *f, gs__tp_req_t *req)
{
    gs__tp_completion_t comp;

    memset(&comp, 0, sizeof(comp));
    comp.status = GS_INPROGRESS;
    uint64_t deadline = gs__deadline_after_ms(FAKE_WAIT_MS);
    int done = 0;

    for (;;) {
        gs__tcp_ops.test(f->tp, req, &done, &comp);
        if (done || (gs__now_ns() >= deadline)) {
            break;
        }
        (void)gs__tcp_ops.progress(f->tp, deadline);
    }
    assert_true(done);
    return comp;
}


static inline void expect_protocol_failure(fake_peer_t *f, const char *needle)
{
    gs__tp_completion_t comp;
    gs__tp_req_t *req;
    uint8_t b[8];

    assert_int_equal(gs__tcp_ops.irecv(f->tp, 1, 12345, b, sizeof(b), &req), GS_OK);
    comp = fake_wait(f, req);
    assert_int_equal(comp.status, GS_ERR_PROTOCOL);
    assert_non_null(strstr(gs__error_get(), "peer 1"));
    assert_non_null(strstr(gs__error_get(), needle));
    gs__tcp_ops.req_release(f->tp, req);
}


/* The fake rank's socket got nothing from rank 0 (no frame was sent to it). */
static inline void fake_expect_quiet(fake_peer_t *f, int r, int sock)
{
    uint8_t b[1];

    assert_int_equal(recv(f->fds[r][sock], b, sizeof(b), MSG_DONTWAIT), -1);
    assert_true((errno == EAGAIN) || (errno == EWOULDBLOCK));
}

/* Rank 0 closed this fake rank's socket (EOF or reset within 2 s). */
static inline void fake_expect_closed(fake_peer_t *f, int r, int sock)
{
    struct pollfd pfd = {.fd = f->fds[r][sock], .events = POLLIN};
    uint8_t b[64];

    assert_int_equal(poll(&pfd, 1, 2000), 1);
    assert_true(recv(f->fds[r][sock], b, sizeof(b), MSG_DONTWAIT) <= 0);
}

/* Read the next frame header rank 0 sent to fake rank r. */
static inline gs__tcp_frame_hdr_t fake_read_hdr(fake_peer_t *f, int r, int sock)
{
    uint8_t buf[GS_TCP_FRAME_HDR_LEN];
    gs__tcp_frame_hdr_t h;

    assert_int_equal(
        gs__sock_read_full(f->fds[r][sock], buf, sizeof(buf), gs__deadline_after_ms(2000)), GS_OK);
    assert_int_equal(gs__tcp_frame_decode(buf, sizeof(buf), &h, NULL, 0), GS_OK);
    return h;
}

#endif /* GS_TESTS_UNIT_TCP_FAKE_PEER_H */
