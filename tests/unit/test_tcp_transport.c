/* SPDX-License-Identifier: Apache-2.0 */
/*
 * In-process tests of the TCP transport: N threads, one transport instance
 * each, endpoints exchanged through shared memory, loopback sockets. Covers
 * sizes 0 B .. 8 MiB with 1, 2, 3 and 4 sockets per peer (around the
 * striping threshold too), unexpected messages, GS_ANY_SOURCE, same-tag
 * ordering, truncation, mismatch, cancel, a peer that leaves, abort from
 * another thread, garbage on the listening port, the connect timeout,
 * hostile frames from a hand-driven peer (tcp_fake_peer.h: chunks off the
 * sender's chunk plan or overlapping, floods of held messages past lowered
 * bounds on what a peer can make rank 0 hold), the chunk plan itself, and
 * failure propagation between real ranks (a rank killed, or cut off from
 * one rank only so that the others learn of it from DOWN frames, fails
 * every survivor's receive naming it within 2 s; the frame-level DOWN tests
 * are in test_tcp_down.c). Rank threads never call cmocka asserts (they are
 * not thread-safe); they record the first failure and the main thread
 * asserts.
 */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <unistd.h>

#include <cmocka.h>

#include "core/build_info.h"
#include "core/clock.h"
#include "core/error.h"
#include "core/socket.h"
#include "tcp_fake_peer.h"
#include "tcp_test_harness.h"
#include "transport/tcp/tcp_conn.h"
#include "transport/tcp/tcp_transport.h"
#include "transport/tcp/tcp_wire.h"
#include "transport/transport.h"

#define MAX_RANKS 4
#define WAIT_MS 10000
#define TAG_A ((1ull << 48) | 7u)
#define TAG_B ((2ull << 48) | 7u) /* same masked tag as TAG_A, other check bits */

typedef struct job job_t;
typedef void (*body_fn_t)(job_t *job, int rank);

struct job {
    int size;
    int nsocks;
    body_fn_t body;
    body_fn_t pre_connect; /* runs on rank 0 after addresses are known */
    char addrs[MAX_RANKS][GS_TP_ADDR_MAX];
    gs__tp_t *tps[MAX_RANKS];
    gs__counters_t counters[MAX_RANKS];
    pthread_barrier_t barrier;
    tcp_fails_t fails;
    void *shared; /* per-test data */
};

typedef struct rank_arg {
    job_t *job;
    int rank;
} rank_arg_t;

static const gs__transport_ops_t *ops = &gs__tcp_ops;

/* Wait for a request that must succeed, then release it. */
static void wait_ok(job_t *job, gs__tp_t *tp, gs__tp_req_t *req, size_t nbytes, int line)
{
    gs__tp_completion_t comp;

    memset(&comp, 0, sizeof(comp));
    if (!tcp_wait_req(tp, req, &comp, WAIT_MS)) {
        tcp_fail(&job->fails, line, "request did not finish within %d ms", WAIT_MS);
    } else if (comp.status != GS_OK) {
        tcp_fail(&job->fails, line, "request failed: %d (%s)", (int)comp.status, gs__error_get());
    } else if (comp.nbytes != nbytes) {
        tcp_fail(&job->fails, line, "request moved %zu bytes, expected %zu", comp.nbytes, nbytes);
    }
    ops->req_release(tp, req);
}

static uint8_t pattern(int src, int dst, size_t i, int salt)
{
    return (uint8_t)(src * 31 + dst * 7 + (int)(i * 13u) + (int)(i >> 9) + salt);
}

static void fill(uint8_t *buf, size_t len, int src, int dst, int salt)
{
    for (size_t i = 0; i < len; i++) {
        buf[i] = pattern(src, dst, i, salt);
    }
}

static int verify(const uint8_t *buf, size_t len, int src, int dst, int salt)
{
    for (size_t i = 0; i < len; i++) {
        if (buf[i] != pattern(src, dst, i, salt)) {
            return 0;
        }
    }
    return 1;
}

static void *rank_main(void *p)
{
    rank_arg_t *arg = (rank_arg_t *)p;
    job_t *job = arg->job;
    int rank = arg->rank;
    gs__tp_params_t params = {.rank = rank,
                              .size = job->size,
                              .job_id = 0x1234,
                              .comm_id = 0x99,
                              .counters = &job->counters[rank]};
    gs__tcp_settings_t set = {
        .nsocks = job->nsocks, .ifname = "", .family = "any", .master_addr = "127.0.0.1"};
    gs_status_t status;

    /* GS_TEST_TCP_SHM=BYTES: the same tests over shared-memory rings of that size. */
    if (getenv("GS_TEST_TCP_SHM") != NULL) {
        set.host_id = 1;
        set.shm = 1;
        set.shm_bytes = atoi(getenv("GS_TEST_TCP_SHM"));
        set.shm_test_free = -1;
    }
    /* GS_TEST_TCP_SPIN_US=N: poll before sleeping (-1: auto, as GS_TCP_SPIN_US). */
    if (getenv("GS_TEST_TCP_SPIN_US") != NULL) {
        set.spin_us = atoi(getenv("GS_TEST_TCP_SPIN_US"));
    }

    status = gs__tcp_init_with(&params, &set, &job->tps[rank]);
    CHECK_EQ(job, status, GS_OK);
    if (status == GS_OK) {
        CHECK_EQ(job, ops->get_address(job->tps[rank], job->addrs[rank], GS_TP_ADDR_MAX), GS_OK);
    }
    pthread_barrier_wait(&job->barrier);
    if (job->fails.failed > 0) {
        goto out;
    }
    if ((rank == 0) && (job->pre_connect != NULL)) {
        job->pre_connect(job, rank);
    }
    status = ops->connect(job->tps[rank], job->addrs, NULL, gs__deadline_after_ms(WAIT_MS));
    CHECK_EQ(job, status, GS_OK);
    pthread_barrier_wait(&job->barrier);
    if (job->fails.failed == 0) {
        job->body(job, rank);
    }
out:
    pthread_barrier_wait(&job->barrier);
    if (job->tps[rank] != NULL) {
        ops->finalize(job->tps[rank]);
        job->tps[rank] = NULL;
    }
    return NULL;
}

static void run_job(int size, int nsocks, body_fn_t body, body_fn_t pre_connect, void *shared)
{
    pthread_t threads[MAX_RANKS];
    rank_arg_t args[MAX_RANKS];
    char what[64];
    job_t *job = calloc(1, sizeof(*job));

    assert_non_null(job);
    job->size = size;
    job->nsocks = nsocks;
    job->body = body;
    job->pre_connect = pre_connect;
    job->shared = shared;
    pthread_barrier_init(&job->barrier, NULL, (unsigned)size);
    tcp_fails_init(&job->fails);
    for (int r = 0; r < size; r++) {
        args[r].job = job;
        args[r].rank = r;
        assert_int_equal(pthread_create(&threads[r], NULL, rank_main, &args[r]), 0);
    }
    for (int r = 0; r < size; r++) {
        pthread_join(threads[r], NULL);
    }
    snprintf(what, sizeof(what), "size %d nsocks %d: ", size, nsocks);
    assert_int_equal(tcp_fails_end(&job->fails, what), 0);
    pthread_barrier_destroy(&job->barrier);
    free(job);
}

/* ---------------------------------------------------------------------- */

/* Around GS_TCP_STRIPE_MIN (one frame, or one chunk per socket) and totals
 * that no socket count divides: the receiver checks every chunk against
 * the plan the sender followed (tcp_wire.h). */
static const size_t exchange_sizes[] = {0,
                                        1,
                                        GS_TCP_STRIPE_MIN - 1,
                                        GS_TCP_STRIPE_MIN,
                                        GS_TCP_STRIPE_MIN + 1,
                                        100 * 1024,
                                        8 * 1024 * 1024 + 7};

/* Every rank sends every size to every other rank; receives are posted first. */
static void body_exchange(job_t *job, int rank)
{
    gs__tp_t *tp = job->tps[rank];
    const size_t nsizes = sizeof(exchange_sizes) / sizeof(exchange_sizes[0]);

    for (size_t s = 0; s < nsizes; s++) {
        size_t len = exchange_sizes[s];
        gs__tp_req_t *rreq[MAX_RANKS] = {0};
        gs__tp_req_t *sreq[MAX_RANKS] = {0};
        uint8_t *rbuf[MAX_RANKS] = {0};
        uint8_t *sbuf = malloc(len + 1);

        for (int p = 0; p < job->size; p++) {
            if (p == rank) {
                continue;
            }
            rbuf[p] = calloc(1, len + 1);
            CHECK_EQ(job, ops->irecv(tp, p, 100 + s, rbuf[p], len, &rreq[p]), GS_OK);
        }
        for (int p = 0; p < job->size; p++) {
            if (p == rank) {
                continue;
            }
            fill(sbuf, len, rank, p, (int)s);
            /* One buffer per destination would be needed if contents differed while in
             * flight; wait for each send before refilling. */
            CHECK_EQ(job, ops->isend(tp, p, 100 + s, sbuf, len, &sreq[p]), GS_OK);
            wait_ok(job, tp, sreq[p], len, __LINE__);
        }
        for (int p = 0; p < job->size; p++) {
            if (p == rank) {
                continue;
            }
            wait_ok(job, tp, rreq[p], len, __LINE__);
            CHECK(job, verify(rbuf[p], len, p, rank, (int)s));
            free(rbuf[p]);
        }
        free(sbuf);
    }
}

static void test_tcp_transport_exchange_2ranks_1sock(void **state)
{
    (void)state;
    run_job(2, 1, body_exchange, NULL, NULL);
}

static void test_tcp_transport_exchange_2ranks_2socks(void **state)
{
    (void)state;
    run_job(2, 2, body_exchange, NULL, NULL);
}

static void test_tcp_transport_exchange_3ranks_4socks(void **state)
{
    (void)state;
    run_job(3, 4, body_exchange, NULL, NULL);
}

static void test_tcp_transport_exchange_2ranks_3socks(void **state)
{
    (void)state;
    run_job(2, 3, body_exchange, NULL, NULL);
}

static void test_tcp_transport_exchange_3ranks_1sock(void **state)
{
    (void)state;
    run_job(3, 1, body_exchange, NULL, NULL);
}

/* ---------------------------------------------------------------------- */

/* Rank 1 sends before rank 0 posts anything; a later "go" message proves
 * the earlier ones have at least started to arrive. */
static void body_unexpected(job_t *job, int rank)
{
    static const size_t lens[] = {0, 10, 100 * 1024, 1024 * 1024};
    gs__tp_t *tp = job->tps[rank];
    gs__tp_req_t *req;
    uint8_t go = 0;

    if (rank == 1) {
        gs__tp_req_t *sreq[4];
        uint8_t *bufs[4];

        for (int i = 0; i < 4; i++) {
            bufs[i] = malloc(lens[i] + 1);
            fill(bufs[i], lens[i], 1, 0, i);
            CHECK_EQ(job, ops->isend(tp, 0, 200 + i, bufs[i], lens[i], &sreq[i]), GS_OK);
        }
        go = 42;
        CHECK_EQ(job, ops->isend(tp, 0, 299, &go, 1, &req), GS_OK);
        for (int i = 0; i < 4; i++) {
            wait_ok(job, tp, sreq[i], lens[i], __LINE__);
            free(bufs[i]);
        }
        wait_ok(job, tp, req, 1, __LINE__);
        return;
    }
    CHECK_EQ(job, ops->irecv(tp, 1, 299, &go, 1, &req), GS_OK);
    wait_ok(job, tp, req, 1, __LINE__);
    CHECK_EQ(job, go, 42);
    /* Receive in reverse order: matching is by tag, not arrival. */
    for (int i = 3; i >= 0; i--) {
        uint8_t *buf = calloc(1, lens[i] + 1);

        CHECK_EQ(job, ops->irecv(tp, 1, 200 + i, buf, lens[i] + 1, &req), GS_OK);
        wait_ok(job, tp, req, lens[i], __LINE__);
        CHECK(job, verify(buf, lens[i], 1, 0, i));
        free(buf);
    }
}

static void test_tcp_transport_unexpected(void **state)
{
    (void)state;
    run_job(2, 2, body_unexpected, NULL, NULL);
}

/* ---------------------------------------------------------------------- */

static void body_any_source(job_t *job, int rank)
{
    gs__tp_t *tp = job->tps[rank];
    gs__tp_completion_t comp;
    gs__tp_req_t *req;

    if (rank != 0) {
        uint32_t v = 1000u + (uint32_t)rank;

        CHECK_EQ(job, ops->isend(tp, 0, 300, &v, sizeof(v), &req), GS_OK);
        wait_ok(job, tp, req, sizeof(v), __LINE__);
        return;
    }
    {
        int seen = 0;

        for (int i = 0; i < job->size - 1; i++) {
            uint32_t v = 0;

            CHECK_EQ(job, ops->irecv(tp, GS_ANY_SOURCE, 300, &v, sizeof(v), &req), GS_OK);
            memset(&comp, 0, sizeof(comp));
            CHECK(job, tcp_wait_req(tp, req, &comp, WAIT_MS));
            CHECK_EQ(job, comp.status, GS_OK);
            CHECK(job, (comp.peer >= 1) && (comp.peer < job->size));
            CHECK_EQ(job, comp.tag, 300);
            CHECK_EQ(job, v, 1000 + comp.peer);
            seen |= 1 << comp.peer;
            ops->req_release(tp, req);
        }
        CHECK_EQ(job, seen, ((1 << job->size) - 1) & ~1);
    }
}

static void test_tcp_transport_any_source(void **state)
{
    (void)state;
    run_job(3, 2, body_any_source, NULL, NULL);
}

/* ---------------------------------------------------------------------- */

#define ORDER_N 24

static size_t order_len(int i)
{
    /* Mix small (one socket) and striped messages so chunks overtake. */
    return ((i % 3) == 0) ? (size_t)(300 * 1024 + i) : (size_t)(8 + i);
}

/* Same tag, many messages: each must land in the receive posted in order. */
static void body_order(job_t *job, int rank)
{
    gs__tp_t *tp = job->tps[rank];
    gs__tp_req_t *reqs[ORDER_N];
    uint8_t *bufs[ORDER_N];

    for (int i = 0; i < ORDER_N; i++) {
        bufs[i] = calloc(1, order_len(i) + 1);
    }
    if (rank == 1) {
        for (int i = 0; i < ORDER_N; i++) {
            fill(bufs[i], order_len(i), 1, 0, i);
            CHECK_EQ(job, ops->isend(tp, 0, 400, bufs[i], order_len(i), &reqs[i]), GS_OK);
        }
        for (int i = 0; i < ORDER_N; i++) {
            wait_ok(job, tp, reqs[i], order_len(i), __LINE__);
        }
    } else {
        /* Half posted before data arrives, half matched from the unexpected list. */
        for (int i = 0; i < ORDER_N / 2; i++) {
            CHECK_EQ(job, ops->irecv(tp, 1, 400, bufs[i], order_len(i) + 1, &reqs[i]), GS_OK);
        }
        for (int i = 0; i < ORDER_N / 2; i++) {
            wait_ok(job, tp, reqs[i], order_len(i), __LINE__);
        }
        for (int i = ORDER_N / 2; i < ORDER_N; i++) {
            CHECK_EQ(job, ops->irecv(tp, 1, 400, bufs[i], order_len(i) + 1, &reqs[i]), GS_OK);
        }
        for (int i = ORDER_N / 2; i < ORDER_N; i++) {
            wait_ok(job, tp, reqs[i], order_len(i), __LINE__);
        }
        for (int i = 0; i < ORDER_N; i++) {
            CHECK(job, verify(bufs[i], order_len(i), 1, 0, i));
        }
    }
    for (int i = 0; i < ORDER_N; i++) {
        free(bufs[i]);
    }
}

static void test_tcp_transport_same_tag_order_4socks(void **state)
{
    (void)state;
    run_job(2, 4, body_order, NULL, NULL);
}

/* ---------------------------------------------------------------------- */

/* A message longer than the receive, then a tag mismatch; the stream stays usable. */
static void body_trunc_mismatch(job_t *job, int rank)
{
    gs__tp_t *tp = job->tps[rank];
    const size_t big = 512 * 1024;
    uint8_t *sbuf = malloc(big);
    uint8_t *rbuf = malloc(big);
    gs__tp_completion_t comp;
    gs__tp_req_t *req;

    if (rank == 1) {
        gs__tp_req_t *r[5];

        fill(sbuf, big, 1, 0, 5);
        CHECK_EQ(job, ops->isend(tp, 0, 500, sbuf, 100, &r[0]), GS_OK);
        CHECK_EQ(job, ops->isend(tp, 0, 501, sbuf, big, &r[1]), GS_OK);
        CHECK_EQ(job, ops->isend(tp, 0, TAG_A, sbuf, 64, &r[2]), GS_OK);
        CHECK_EQ(job, ops->isend(tp, 0, TAG_B, sbuf, big, &r[3]), GS_OK);
        CHECK_EQ(job, ops->isend(tp, 0, 502, sbuf, 1000, &r[4]), GS_OK);
        wait_ok(job, tp, r[0], 100, __LINE__);
        wait_ok(job, tp, r[1], big, __LINE__);
        wait_ok(job, tp, r[2], 64, __LINE__);
        wait_ok(job, tp, r[3], big, __LINE__);
        wait_ok(job, tp, r[4], 1000, __LINE__);
    } else {
        /* 100 bytes into 50: truncated, buffer untouched. */
        memset(rbuf, 0xee, big);
        CHECK_EQ(job, ops->irecv(tp, 1, 500, rbuf, 50, &req), GS_OK);
        CHECK(job, tcp_wait_req(tp, req, &comp, WAIT_MS));
        CHECK_EQ(job, comp.status, GS_ERR_TRUNCATED);
        CHECK(job, strstr(gs__error_get(), "peer 1") != NULL);
        CHECK_EQ(job, rbuf[0], 0xee);
        ops->req_release(tp, req);
        /* A striped message too long for its receive. */
        CHECK_EQ(job, ops->irecv(tp, 1, 501, rbuf, big / 2, &req), GS_OK);
        CHECK(job, tcp_wait_req(tp, req, &comp, WAIT_MS));
        CHECK_EQ(job, comp.status, GS_ERR_TRUNCATED);
        CHECK_EQ(job, rbuf[0], 0xee);
        CHECK_EQ(job, rbuf[big / 2 - 1], 0xee);
        ops->req_release(tp, req);
        /* Same masked tag, different check bits. */
        CHECK_EQ(job, ops->irecv(tp, 1, TAG_B, rbuf, big, &req), GS_OK);
        CHECK(job, tcp_wait_req(tp, req, &comp, WAIT_MS));
        CHECK_EQ(job, comp.status, GS_ERR_MISMATCH);
        CHECK(job, comp.tag == TAG_A);
        CHECK_EQ(job, rbuf[0], 0xee);
        ops->req_release(tp, req);
        CHECK_EQ(job, ops->irecv(tp, 1, TAG_A, rbuf, big, &req), GS_OK);
        CHECK(job, tcp_wait_req(tp, req, &comp, WAIT_MS));
        CHECK_EQ(job, comp.status, GS_ERR_MISMATCH);
        CHECK_EQ(job, rbuf[0], 0xee);
        ops->req_release(tp, req);
        /* The next message arrives intact. */
        CHECK_EQ(job, ops->irecv(tp, 1, 502, rbuf, big, &req), GS_OK);
        wait_ok(job, tp, req, 1000, __LINE__);
        CHECK(job, verify(rbuf, 1000, 1, 0, 5));
    }
    free(sbuf);
    free(rbuf);
}

static void test_tcp_transport_truncation_and_mismatch(void **state)
{
    (void)state;
    run_job(2, 2, body_trunc_mismatch, NULL, NULL);
}

/* ---------------------------------------------------------------------- */

/* Cancel a send that is queued behind a large one and a posted receive. */
static void body_cancel(job_t *job, int rank)
{
    gs__tp_t *tp = job->tps[rank];
    const size_t big = 16 * 1024 * 1024;
    uint8_t *buf = malloc(big);
    uint8_t small[64];
    gs__tp_req_t *req;
    gs__tp_req_t *r2;

    if (rank == 1) {
        fill(buf, big, 1, 0, 9);
        memset(small, 0x5a, sizeof(small));
        CHECK_EQ(job, ops->isend(tp, 0, 600, buf, big, &req), GS_OK);
        CHECK_EQ(job, ops->isend(tp, 0, 601, small, sizeof(small), &r2), GS_OK);
        /* Rank 0 is not reading yet, so the small send cannot be on the wire. */
        CHECK_EQ(job, ops->req_release(tp, r2), GS_OK);
        CHECK_EQ(job, ops->isend(tp, 0, 602, small, 8, &r2), GS_OK);
        wait_ok(job, tp, req, big, __LINE__);
        wait_ok(job, tp, r2, 8, __LINE__);
        pthread_barrier_wait(&job->barrier);
    } else {
        uint8_t got[64];
        gs__tp_completion_t comp;
        int done = 0;

        /* A receive that is cancelled before anything matches it. */
        CHECK_EQ(job, ops->irecv(tp, 1, 777, got, sizeof(got), &req), GS_OK);
        CHECK_EQ(job, ops->req_release(tp, req), GS_OK);
        CHECK_EQ(job, ops->irecv(tp, 1, 600, buf, big, &req), GS_OK);
        CHECK_EQ(job, ops->irecv(tp, 1, 601, got, sizeof(got), &r2), GS_OK);
        wait_ok(job, tp, req, big, __LINE__);
        CHECK(job, verify(buf, big, 1, 0, 9));
        /* The cancelled message never arrives; the next one does. */
        {
            gs__tp_req_t *r3;

            CHECK_EQ(job, ops->irecv(tp, 1, 602, got, sizeof(got), &r3), GS_OK);
            wait_ok(job, tp, r3, 8, __LINE__);
        }
        ops->test(tp, r2, &done, &comp);
        CHECK_EQ(job, done, 0);
        ops->req_release(tp, r2);
        pthread_barrier_wait(&job->barrier);
    }
    free(buf);
}

static void test_tcp_transport_cancel(void **state)
{
    (void)state;
    run_job(2, 1, body_cancel, NULL, NULL);
}

/* ---------------------------------------------------------------------- */

/* The probe slot: nothing before the send; then the held message (peer,
 * full tag, whole length while a large one may still be arriving), again
 * and again, by any source or by rank, until an irecv from the reported
 * peer takes exactly that message; a bad peer is refused. */
static void body_probe(job_t *job, int rank)
{
    static const size_t lens[2] = {300, 3 * 1024 * 1024};
    gs__tp_t *tp = job->tps[rank];
    gs__tp_completion_t comp;
    gs__tp_req_t *req;
    int found = -1;

    if (rank == 1) {
        uint8_t *bufs[2];
        gs__tp_req_t *sreq[2];

        pthread_barrier_wait(&job->barrier); /* rank 0 probed an empty queue */
        for (int i = 0; i < 2; i++) {
            bufs[i] = malloc(lens[i]);
            fill(bufs[i], lens[i], 1, 0, i);
            CHECK_EQ(job,
                     ops->isend(tp, 0, (i == 0) ? TAG_B : TAG_A + 1, bufs[i], lens[i], &sreq[i]),
                     GS_OK);
        }
        for (int i = 0; i < 2; i++) {
            wait_ok(job, tp, sreq[i], lens[i], __LINE__);
            free(bufs[i]);
        }
        return;
    }
    CHECK_EQ(job, ops->probe(tp, GS_ANY_SOURCE, TAG_A, &found, &comp), GS_OK);
    CHECK_EQ(job, found, 0);
    CHECK_EQ(job, ops->probe(tp, 0, TAG_A, &found, &comp), GS_ERR_INVALID_ARG); /* itself */
    CHECK_EQ(job, ops->probe(tp, 5, TAG_A, &found, &comp), GS_ERR_INVALID_ARG);
    pthread_barrier_wait(&job->barrier);
    for (int i = 0; i < 2; i++) {
        const uint64_t tag = (i == 0) ? TAG_A : TAG_A + 1;
        const uint64_t deadline = gs__deadline_after_ms(WAIT_MS);
        uint8_t *buf = calloc(1, lens[i]);

        found = 0;
        while (!found && (gs__now_ns() < deadline)) {
            ops->progress(tp, deadline);
            memset(&comp, 0, sizeof(comp));
            CHECK_EQ(job, ops->probe(tp, GS_ANY_SOURCE, tag, &found, &comp), GS_OK);
        }
        CHECK_EQ(job, found, 1);
        CHECK_EQ(job, comp.peer, 1);
        CHECK_EQ(job, comp.nbytes, lens[i]);
        /* Masked match; the full tag is the message's (TAG_B's check bits). */
        CHECK_EQ(job, comp.tag, (i == 0) ? TAG_B : TAG_A + 1);
        /* A probe consumes nothing. */
        found = 0;
        CHECK_EQ(job, ops->probe(tp, 1, tag, &found, &comp), GS_OK);
        CHECK_EQ(job, found, 1);
        CHECK_EQ(job, ops->probe(tp, 1, tag + 100, &found, &comp), GS_OK);
        CHECK_EQ(job, found, 0);
        CHECK_EQ(job, ops->irecv(tp, 1, comp.tag, buf, lens[i], &req), GS_OK);
        wait_ok(job, tp, req, lens[i], __LINE__);
        CHECK(job, verify(buf, lens[i], 1, 0, i));
        CHECK_EQ(job, ops->probe(tp, GS_ANY_SOURCE, tag, &found, &comp), GS_OK);
        CHECK_EQ(job, found, 0);
        free(buf);
    }
}

static void test_tcp_transport_probe(void **state)
{
    (void)state;
    run_job(2, 2, body_probe, NULL, NULL);
}

/* ---------------------------------------------------------------------- */

/* Rank 1 finalizes; rank 0's pending receive fails within 2 s, naming it. */
static void body_peer_left(job_t *job, int rank)
{
    gs__tp_t *tp = job->tps[rank];
    gs__tp_completion_t comp;
    gs__tp_req_t *req;
    uint8_t b[8];

    if (rank == 1) {
        ops->finalize(tp);
        job->tps[rank] = NULL;
        return;
    }
    CHECK_EQ(job, ops->irecv(tp, 1, 700, b, sizeof(b), &req), GS_OK);
    {
        uint64_t deadline = gs__deadline_after_ms(2000);
        int done = 0;

        while (!done && (gs__now_ns() < deadline)) {
            ops->progress(tp, deadline);
            ops->test(tp, req, &done, &comp);
        }
        CHECK_EQ(job, done, 1);
        CHECK_EQ(job, comp.status, GS_ERR_PEER_FAILED);
        CHECK(job, strstr(gs__error_get(), "peer 1") != NULL);
        CHECK(job, strstr(gs__error_get(), "left the communicator") != NULL);
    }
    ops->req_release(tp, req);
    /* Later requests to it fail at once. */
    CHECK_EQ(job, ops->isend(tp, 1, 701, b, sizeof(b), &req), GS_OK);
    memset(&comp, 0, sizeof(comp));
    {
        int done = 0;

        ops->test(tp, req, &done, &comp);
        CHECK_EQ(job, done, 1);
        CHECK_EQ(job, comp.status, GS_ERR_PEER_FAILED);
    }
    ops->req_release(tp, req);
}

static void test_tcp_transport_peer_finalized(void **state)
{
    (void)state;
    run_job(2, 2, body_peer_left, NULL, NULL);
}

/* ---------------------------------------------------------------------- */

static void *aborter(void *p)
{
    ops->abort((gs__tp_t *)p);
    return NULL;
}

static void body_abort(job_t *job, int rank)
{
    gs__tp_t *tp = job->tps[rank];
    gs__tp_completion_t comp;
    gs__tp_req_t *req;
    pthread_t th;
    uint8_t b[8];

    if (rank != 0) {
        return;
    }
    CHECK_EQ(job, ops->irecv(tp, 1, 800, b, sizeof(b), &req), GS_OK);
    CHECK_EQ(job, pthread_create(&th, NULL, aborter, tp), 0);
    {
        uint64_t deadline = gs__deadline_after_ms(WAIT_MS);
        gs_status_t status = GS_OK;

        while ((status != GS_ERR_ABORTED) && (gs__now_ns() < deadline)) {
            status = ops->progress(tp, deadline);
        }
        CHECK_EQ(job, status, GS_ERR_ABORTED);
    }
    pthread_join(th, NULL);
    CHECK(job, tcp_wait_req(tp, req, &comp, WAIT_MS));
    CHECK_EQ(job, comp.status, GS_ERR_ABORTED);
    ops->req_release(tp, req);
    CHECK_EQ(job, ops->isend(tp, 1, 801, b, sizeof(b), &req), GS_OK);
    CHECK(job, tcp_wait_req(tp, req, &comp, WAIT_MS));
    CHECK_EQ(job, comp.status, GS_ERR_ABORTED);
    ops->req_release(tp, req);
}

static void test_tcp_transport_abort(void **state)
{
    (void)state;
    run_job(2, 2, body_abort, NULL, NULL);
}

/* ---------------------------------------------------------------------- */

/* Before connecting, throw junk at rank 0's listening port. */
static void pre_connect_garbage(job_t *job, int rank)
{
    static const char junk[] = "GET / HTTP/1.0\r\nHost: gradsync\r\n\r\nxxxxxxxxxxxxxxxxxxxxxx";
    gs__tcp_hs_t hs = {.version = GS_TCP_PROTO_VERSION,
                       .kind = GS_TCP_HS_HELLO,
                       .job_id = 0xdead, /* another job */
                       .comm_id = 0x99,
                       .rank = 1,
                       .size = (uint32_t)job->size,
                       .index = 0,
                       .nsocks = (uint32_t)job->nsocks};
    uint8_t buf[GS_TCP_HS_LEN];
    gs__sockaddr_t addr;
    int *keep = (int *)job->shared;
    int fd;

    (void)rank;
    CHECK_EQ(job, gs__sock_parse(job->addrs[0], "any", &addr), GS_OK);
    /* Junk, then close. */
    if (gs__sock_connect(&addr, gs__deadline_after_ms(WAIT_MS), &fd) == GS_OK) {
        (void)gs__sock_write_full(fd, junk, sizeof(junk), gs__deadline_after_ms(WAIT_MS));
        close(fd);
    }
    /* A well-formed handshake from another job. */
    gs__tcp_hs_encode(&hs, buf);
    if (gs__sock_connect(&addr, gs__deadline_after_ms(WAIT_MS), &fd) == GS_OK) {
        (void)gs__sock_write_full(fd, buf, sizeof(buf), gs__deadline_after_ms(WAIT_MS));
        close(fd);
    }
    /* A future protocol version, kept open. */
    hs.job_id = 0x1234;
    hs.version = GS_TCP_PROTO_VERSION + 1;
    gs__tcp_hs_encode(&hs, buf);
    if (gs__sock_connect(&addr, gs__deadline_after_ms(WAIT_MS), &fd) == GS_OK) {
        (void)gs__sock_write_full(fd, buf, sizeof(buf), gs__deadline_after_ms(WAIT_MS));
        keep[0] = fd;
    }
    /* Connects and says nothing, kept open. */
    if (gs__sock_connect(&addr, gs__deadline_after_ms(WAIT_MS), &fd) == GS_OK) {
        keep[1] = fd;
    }
}

static void body_after_garbage(job_t *job, int rank)
{
    gs__tp_t *tp = job->tps[rank];
    gs__tp_req_t *req;
    uint32_t v = 77;

    if (rank == 1) {
        CHECK_EQ(job, ops->isend(tp, 0, 900, &v, sizeof(v), &req), GS_OK);
        wait_ok(job, tp, req, sizeof(v), __LINE__);
    } else {
        v = 0;
        CHECK_EQ(job, ops->irecv(tp, 1, 900, &v, sizeof(v), &req), GS_OK);
        wait_ok(job, tp, req, sizeof(v), __LINE__);
        CHECK_EQ(job, v, 77);
    }
}

static void test_tcp_transport_garbage_on_listen_port(void **state)
{
    int keep[2] = {-1, -1};

    (void)state;
    run_job(2, 2, body_after_garbage, pre_connect_garbage, keep);
    assert_true(keep[0] >= 0);
    assert_true(keep[1] >= 0);
    {
        /* The future-version client was told why before being closed. */
        uint8_t buf[GS_TCP_HS_LEN];
        gs__tcp_hs_t ack;

        assert_int_equal(
            gs__sock_read_full(keep[0], buf, sizeof(buf), gs__deadline_after_ms(WAIT_MS)), GS_OK);
        assert_int_equal(gs__tcp_hs_decode(buf, sizeof(buf), &ack, NULL, 0), GS_OK);
        assert_int_equal(ack.kind, GS_TCP_HS_ACK);
        assert_int_equal(ack.verdict, GS_TCP_HS_BAD_VERSION);
    }
    close(keep[0]);
    close(keep[1]);
}

/* ---------------------------------------------------------------------- */

static void body_counters(job_t *job, int rank)
{
    gs__tp_t *tp = job->tps[rank];
    uint8_t buf[1000];
    gs__tp_req_t *req;

    memset(buf, 1, sizeof(buf));
    if (rank == 1) {
        CHECK_EQ(job, ops->isend(tp, 0, 950, buf, sizeof(buf), &req), GS_OK);
        wait_ok(job, tp, req, sizeof(buf), __LINE__);
        CHECK_EQ(job, atomic_load(&job->counters[1].bytes_sent), sizeof(buf));
        CHECK_EQ(job, atomic_load(&job->counters[1].msgs_sent), 1);
    } else {
        CHECK_EQ(job, ops->irecv(tp, 1, 950, buf, sizeof(buf), &req), GS_OK);
        wait_ok(job, tp, req, sizeof(buf), __LINE__);
        CHECK_EQ(job, atomic_load(&job->counters[0].bytes_received), sizeof(buf));
        CHECK_EQ(job, atomic_load(&job->counters[0].msgs_received), 1);
    }
}

static void test_tcp_transport_counters(void **state)
{
    (void)state;
    run_job(2, 1, body_counters, NULL, NULL);
}

/* ---------------------------------------------------------------------- */
/* Failure propagation                                                    */
/* ---------------------------------------------------------------------- */

typedef struct kill_job {
    int only;                 /* rank 3 cuts its sockets to this rank only; -1: to all */
    _Atomic uint64_t kill_ns; /* when rank 3 cut them */
    double ms[MAX_RANKS];     /* per survivor: kill to failed receive */
} kill_job_t;

/*
 * Ranks 0..2 each wait on a receive from a live rank that never sends
 * ((r + 1) % 3); rank 3 "dies" by closing its sockets without BYE (all of
 * them, or only those to one rank, so that the others can only learn of it
 * through a DOWN frame). Every survivor's receive must fail with
 * GS_ERR_PEER_FAILED naming rank 3 within 2 s; later receives fail at once;
 * sends to live ranks still complete.
 */
static void body_kill(job_t *job, int rank)
{
    kill_job_t *k = (kill_job_t *)job->shared;
    gs__tp_t *tp = job->tps[rank];
    const int from = (rank + 1) % 3;
    gs__tp_completion_t comp;
    gs__tp_req_t *req;
    uint8_t b[8] = {0};
    double ms;
    int done;

    if (rank == 3) {
        pthread_barrier_wait(&job->barrier); /* the others have posted */
        atomic_store(&k->kill_ns, gs__now_ns());
        for (int p = 0; p < 3; p++) {
            for (int i = 0; (i < tp->nsocks) && ((k->only < 0) || (p == k->only)); i++) {
                gs__tcp_conn_close(tp, &tp->peers[p].conns[i]);
            }
        }
        return;
    }
    CHECK_EQ(job, ops->irecv(tp, from, 800, b, sizeof(b), &req), GS_OK);
    pthread_barrier_wait(&job->barrier);
    memset(&comp, 0, sizeof(comp));
    done = tcp_wait_req(tp, req, &comp, WAIT_MS);
    ms = (double)(gs__now_ns() - atomic_load(&k->kill_ns)) / 1e6;
    k->ms[rank] = ms;
    CHECK_EQ(job, done, 1);
    CHECK_EQ(job, comp.status, GS_ERR_PEER_FAILED);
    CHECK(job, strstr(gs__error_get(), "rank 3 failed") != NULL);
    if ((k->only >= 0) && (rank != k->only)) {
        CHECK(job, strstr(gs__error_get(), "reported by rank 1") != NULL);
    }
    CHECK(job, ms < 2000.0);
    ops->req_release(tp, req);
    CHECK_EQ(job, ops->irecv(tp, from, 801, b, sizeof(b), &req), GS_OK);
    done = 0;
    ops->test(tp, req, &done, &comp);
    CHECK_EQ(job, done, 1);
    CHECK_EQ(job, comp.status, GS_ERR_PEER_FAILED);
    ops->req_release(tp, req);
    CHECK_EQ(job, ops->isend(tp, from, 802, b, sizeof(b), &req), GS_OK);
    wait_ok(job, tp, req, sizeof(b), __LINE__);
}

static void run_kill(int only, int nsocks)
{
    kill_job_t k;

    memset(&k, 0, sizeof(k));
    k.only = only;
    atomic_init(&k.kill_ns, 0);
    run_job(4, nsocks, body_kill, NULL, &k);
    print_message("kill (cut to %s): receive failed %.1f / %.1f / %.1f ms after the kill\n",
                  (only < 0) ? "all" : "rank 1 only", k.ms[0], k.ms[1], k.ms[2]);
}

static void test_tcp_transport_killed_rank_fails_every_receive(void **state)
{
    (void)state;
    run_kill(-1, 2);
}

static void test_tcp_transport_down_frame_reaches_ranks_that_saw_nothing(void **state)
{
    (void)state;
    run_kill(1, 1);
}

/* ---------------------------------------------------------------------- */
/* A hand-driven rank 1 (tcp_fake_peer.h): raw sockets speaking the wire   */
/* format, so frames can be put on chosen sockets in a chosen order, or be */
/* hostile.                                                                */
/* ---------------------------------------------------------------------- */

/*
 * Two sockets park on chunks of the same message before it starts; when a
 * third socket starts it, both must go on (regression: only one did, and the
 * message never completed). The message is striped as a sender cuts it
 * (three chunks of GS_TCP_STRIPE_MIN bytes, tcp_wire.h).
 */
static void test_tcp_transport_two_sockets_parked_on_one_message(void **state)
{
    const size_t len1 = 3 * (size_t)GS_TCP_STRIPE_MIN;
    const size_t step = GS_TCP_STRIPE_MIN;
    uint8_t msg0[16];
    uint8_t got0[16] = {0};
    uint8_t *msg1 = malloc(len1);
    uint8_t *got1 = calloc(1, len1);
    gs__tp_req_t *r0;
    gs__tp_req_t *r1;
    fake_peer_t f;

    (void)state;
    assert_non_null(msg1);
    assert_non_null(got1);
    fake_setup(&f, 3);
    fill(msg0, sizeof(msg0), 1, 0, 1);
    fill(msg1, len1, 1, 0, 2);
    fake_frame(&f, 1, GS_TCP_FRAME_DATA, 1, 11, len1, step, msg1, step);
    fake_frame(&f, 2, GS_TCP_FRAME_DATA, 1, 11, len1, 2 * step, msg1, step);
    /* Let rank 0 read both and park them (nothing can complete yet). */
    assert_int_equal(ops->progress(f.tp, gs__deadline_after_ms(30)), GS_OK);
    fake_frame(&f, 0, GS_TCP_FRAME_DATA, 0, 10, sizeof(msg0), 0, msg0, sizeof(msg0));
    fake_frame(&f, 0, GS_TCP_FRAME_DATA, 1, 11, len1, 0, msg1, step);
    assert_int_equal(ops->irecv(f.tp, 1, 10, got0, sizeof(got0), &r0), GS_OK);
    assert_int_equal(ops->irecv(f.tp, 1, 11, got1, len1, &r1), GS_OK);
    assert_int_equal(fake_wait(&f, r0).status, GS_OK);
    assert_int_equal(fake_wait(&f, r1).status, GS_OK);
    assert_memory_equal(got0, msg0, sizeof(msg0));
    assert_memory_equal(got1, msg1, len1);
    ops->req_release(f.tp, r0);
    ops->req_release(f.tp, r1);
    fake_teardown(&f);
    free(msg1);
    free(got1);
}

static void test_tcp_transport_bad_frame_fails_peer(void **state)
{
    const uint8_t junk[GS_TCP_FRAME_HDR_LEN] = "this is not a frame header at all, really.....";
    fake_peer_t f;

    (void)state;
    fake_setup(&f, 1);
    assert_int_equal(
        gs__sock_write_full(f.fds[1][0], junk, sizeof(junk), gs__deadline_after_ms(WAIT_MS)),
        GS_OK);
    expect_protocol_failure(&f, "bad frame magic");
    fake_teardown(&f);
}

static void test_tcp_transport_chunk_outside_message_fails_peer(void **state)
{
    const uint64_t half = GS_TCP_STRIPE_MIN;
    uint8_t *payload = calloc(1, 4 * half);
    fake_peer_t f;

    (void)state;
    assert_non_null(payload);
    fake_setup(&f, 2);
    fake_frame(&f, 0, GS_TCP_FRAME_DATA, 0, 10, 2 * half, 0, payload, half);
    /* Same message, but it now claims another total length. */
    fake_frame(&f, 1, GS_TCP_FRAME_DATA, 0, 10, 4 * half, half, payload, half);
    expect_protocol_failure(&f, "does not fit");
    fake_teardown(&f);
    free(payload);
}

static void test_tcp_transport_all_sockets_parked_fails_peer(void **state)
{
    uint8_t payload[8] = {0};
    fake_peer_t f;

    (void)state;
    fake_setup(&f, 2);
    fake_frame(&f, 0, GS_TCP_FRAME_DATA, 5, 10, 8, 0, payload, 8);
    fake_frame(&f, 1, GS_TCP_FRAME_DATA, 6, 10, 8, 0, payload, 8);
    expect_protocol_failure(&f, "never started");
    fake_teardown(&f);
}

static void test_tcp_transport_close_without_bye_fails_peer(void **state)
{
    gs__tp_completion_t comp;
    gs__tp_req_t *req;
    uint8_t b[8];
    fake_peer_t f;

    (void)state;
    fake_setup(&f, 2);
    assert_int_equal(ops->irecv(f.tp, GS_ANY_SOURCE, 5, b, sizeof(b), &req), GS_OK);
    close(f.fds[1][1]);
    f.fds[1][1] = open("/dev/null", 0); /* keep teardown's close harmless */
    comp = fake_wait(&f, req);
    assert_int_equal(comp.status, GS_ERR_PEER_FAILED);
    assert_non_null(strstr(gs__error_get(), "peer 1 closed the connection"));
    ops->req_release(f.tp, req);
    fake_teardown(&f);
}

static void test_tcp_transport_skip_frame_skips_sequence(void **state)
{
    uint8_t payload[4] = {1, 2, 3, 4};
    uint8_t got[4] = {0};
    gs__tp_req_t *req;
    fake_peer_t f;

    (void)state;
    fake_setup(&f, 1);
    fake_frame(&f, 0, GS_TCP_FRAME_SKIP, 0, 0, 0, 0, NULL, 0);
    fake_frame(&f, 0, GS_TCP_FRAME_DATA, 1, 10, 4, 0, payload, 4);
    assert_int_equal(ops->irecv(f.tp, 1, 10, got, sizeof(got), &req), GS_OK);
    assert_int_equal(fake_wait(&f, req).status, GS_OK);
    assert_memory_equal(got, payload, sizeof(got));
    ops->req_release(f.tp, req);
    fake_teardown(&f);
}

/* ---------------------------------------------------------------------- */
/* What a peer can make rank 0 hold (tcp_conn.h, GS_TCP_MSG_COST), and the */
/* chunk plan (tcp_wire.h): issue 13, bugs A and B of the audit.            */
/* ---------------------------------------------------------------------- */

#define FLOOD_TAG 777u

/* @p n zero-length DATA frames (messages seq0 .. seq0 + n - 1, a tag no
 * receive wants), written at once on socket 0 of fake rank 1. */
static void fake_zero_flood(fake_peer_t *f, uint64_t seq0, int n)
{
    uint8_t *buf = malloc((size_t)n * GS_TCP_FRAME_HDR_LEN);

    assert_non_null(buf);
    for (int i = 0; i < n; i++) {
        gs__tcp_frame_hdr_t h = {
            .type = GS_TCP_FRAME_DATA, .seq = seq0 + (uint64_t)i, .tag = FLOOD_TAG};

        gs__tcp_frame_encode(&h, buf + (size_t)i * GS_TCP_FRAME_HDR_LEN);
    }
    assert_int_equal(gs__sock_write_full(f->fds[1][0], buf, (size_t)n * GS_TCP_FRAME_HDR_LEN,
                                         gs__deadline_after_ms(FAKE_WAIT_MS)),
                     GS_OK);
    free(buf);
}

/*
 * Zero-length messages nobody receives cost nothing against the budget on
 * held messages before the fix, so a peer could make rank 0 hold them
 * without limit. Each now costs GS_TCP_MSG_COST: with the budget lowered to
 * 256 of them, the 257th fails the peer with GS_ERR_PROTOCOL naming it and
 * the limit, and going down releases every charge exactly once.
 */
static void test_tcp_transport_zero_length_flood_fails_peer(void **state)
{
    const int fit = 256;
    fake_peer_t f;

    (void)state;
    fake_setup(&f, 2);
    f.tp->held.max_bytes = (uint64_t)fit * GS_TCP_MSG_COST;
    {
        char bytes[64];
        char held[96];

        snprintf(bytes, sizeof(bytes), "%u bytes, all peers together", fit * GS_TCP_MSG_COST);
        snprintf(held, sizeof(held), "%d messages (%u bytes) are held", fit, fit * GS_TCP_MSG_COST);
        fake_zero_flood(&f, 0, fit + 1);
        expect_protocol_failure(&f, bytes);
        assert_non_null(strstr(gs__error_get(), held));
    }
    assert_int_equal(f.tp->held.msgs, 0);
    assert_int_equal(f.tp->held.bytes, 0);
    fake_teardown(&f);
}

/* The bound on the number of messages held (tcp_conn.h). */
static void test_tcp_transport_held_message_count_bound(void **state)
{
    fake_peer_t f;

    (void)state;
    fake_setup(&f, 1);
    f.tp->held.max_msgs = 100;
    fake_zero_flood(&f, 0, 101);
    expect_protocol_failure(&f, "the limit is 100 messages");
    assert_int_equal(f.tp->held.msgs, 0);
    assert_int_equal(f.tp->held.bytes, 0);
    fake_teardown(&f);
}

/*
 * Charges come back when messages go: three rounds of 200 held messages
 * (zero-length and 8-byte ones, unexpected and bound to a receive) under a
 * budget of 256 messages, each round received in full; and a striped
 * message that never finishes holds its charge until the peer fails.
 */
static void test_tcp_transport_held_charges_released(void **state)
{
    const uint64_t half = GS_TCP_STRIPE_MIN;
    uint8_t small[8] = {1, 2, 3, 4, 5, 6, 7, 8};
    uint8_t *big = calloc(1, 2 * half);
    uint64_t seq = 0;
    gs__tp_req_t *req;
    fake_peer_t f;

    (void)state;
    assert_non_null(big);
    fake_setup(&f, 2);
    f.tp->held.max_bytes = 256u * GS_TCP_MSG_COST + 100u * sizeof(small);
    for (int round = 0; round < 3; round++) {
        uint8_t got[8];

        fake_zero_flood(&f, seq, 100);
        seq += 100;
        for (int i = 0; i < 100; i++) {
            fake_frame(&f, i % 2, GS_TCP_FRAME_DATA, seq++, 20, sizeof(small), 0, small,
                       sizeof(small));
        }
        for (int i = 0; i < 100; i++) {
            assert_int_equal(ops->irecv(f.tp, 1, FLOOD_TAG, NULL, 0, &req), GS_OK);
            assert_int_equal(fake_wait(&f, req).status, GS_OK);
            ops->req_release(f.tp, req);
        }
        for (int i = 0; i < 100; i++) {
            memset(got, 0, sizeof(got));
            assert_int_equal(ops->irecv(f.tp, 1, 20, got, sizeof(got), &req), GS_OK);
            assert_int_equal(fake_wait(&f, req).status, GS_OK);
            assert_memory_equal(got, small, sizeof(got));
            ops->req_release(f.tp, req);
        }
        assert_int_equal(f.tp->held.msgs, 0);
        assert_int_equal(f.tp->held.bytes, 0);
    }
    /* Bound to a posted receive: charged the fixed cost while it arrives. */
    assert_int_equal(ops->irecv(f.tp, 1, 30, big, 2 * half, &req), GS_OK);
    fake_frame(&f, 1, GS_TCP_FRAME_DATA, seq, 30, 2 * half, half, big, half);
    for (uint64_t deadline = gs__deadline_after_ms(FAKE_WAIT_MS);
         (f.tp->held.msgs == 0) && (gs__now_ns() < deadline);) {
        (void)ops->progress(f.tp, gs__deadline_after_ms(10));
    }
    assert_int_equal(f.tp->held.msgs, 1);
    assert_int_equal(f.tp->held.bytes, GS_TCP_MSG_COST);
    close(f.fds[1][0]);
    f.fds[1][0] = open("/dev/null", 0); /* keep teardown's close harmless */
    assert_int_equal(fake_wait(&f, req).status, GS_ERR_PEER_FAILED);
    ops->req_release(f.tp, req);
    assert_int_equal(f.tp->held.msgs, 0);
    assert_int_equal(f.tp->held.bytes, 0);
    fake_teardown(&f);
    free(big);
}

/* Let the frames already written arrive (a message nobody receives yet is
 * held as unexpected), then receive @p len bytes from fake rank 1 with tag
 * @p tag; returns the completion status. */
static gs_status_t fake_recv_late(fake_peer_t *f, uint64_t tag, uint8_t *buf, size_t len)
{
    gs__tp_completion_t comp;
    gs__tp_req_t *req;

    (void)ops->progress(f->tp, gs__deadline_after_ms(50));
    assert_int_equal(ops->irecv(f->tp, 1, tag, buf, len, &req), GS_OK);
    comp = fake_wait(f, req);
    ops->req_release(f->tp, req);
    return comp.status;
}

/*
 * Overlapping chunks used to add up to the total and complete a message
 * around a hole: bytes never sent (the stale receive buffer, or heap) went
 * to the user with GS_OK. The audit's frames (two chunks [0, 32) of a 64-byte
 * message), and a striped message whose chunk 0 comes twice (one on each
 * socket), into a posted receive and held as unexpected, must fail the
 * receive (GS_ERR_PROTOCOL, or GS_ERR_PEER_FAILED for one posted after the
 * failure took rank 0 down) naming peer 1.
 */
static void test_tcp_transport_overlapping_chunks_fail_receive(void **state)
{
    const uint64_t half = GS_TCP_STRIPE_MIN;
    uint8_t *a = malloc(2 * half);
    uint8_t *b = malloc(2 * half);
    uint8_t *got = malloc(2 * half);
    fake_peer_t f;

    (void)state;
    assert_non_null(a);
    assert_non_null(b);
    assert_non_null(got);
    memset(a, 'A', 2 * half);
    memset(b, 'B', 2 * half);
    for (int posted = 0; posted < 2; posted++) {
        memset(got, '.', 2 * half);
        fake_setup(&f, 2);
        if (posted) {
            gs__tp_req_t *req;

            assert_int_equal(ops->irecv(f.tp, 1, 5, got, 64, &req), GS_OK);
            fake_frame(&f, 0, GS_TCP_FRAME_DATA, 0, 5, 64, 0, a, 32);
            fake_frame(&f, 0, GS_TCP_FRAME_DATA, 0, 5, 64, 0, b, 32);
            assert_int_equal(fake_wait(&f, req).status, GS_ERR_PROTOCOL);
            ops->req_release(f.tp, req);
        } else {
            fake_frame(&f, 0, GS_TCP_FRAME_DATA, 0, 5, 64, 0, a, 32);
            fake_frame(&f, 0, GS_TCP_FRAME_DATA, 0, 5, 64, 0, b, 32);
            /* Rank 0 went down on the failure: a later receive fails with
             * GS_ERR_PEER_FAILED, giving the cause. */
            assert_int_equal(fake_recv_late(&f, 5, got, 64), GS_ERR_PEER_FAILED);
        }
        assert_non_null(strstr(gs__error_get(), "peer 1"));
        fake_teardown(&f);

        fake_setup(&f, 2);
        if (posted) {
            gs__tp_req_t *req;

            assert_int_equal(ops->irecv(f.tp, 1, 6, got, 2 * half, &req), GS_OK);
            fake_frame(&f, 0, GS_TCP_FRAME_DATA, 0, 6, 2 * half, 0, a, half);
            fake_frame(&f, 1, GS_TCP_FRAME_DATA, 0, 6, 2 * half, 0, b, half);
            assert_int_equal(fake_wait(&f, req).status, GS_ERR_PROTOCOL);
            ops->req_release(f.tp, req);
        } else {
            fake_frame(&f, 0, GS_TCP_FRAME_DATA, 0, 6, 2 * half, 0, a, half);
            fake_frame(&f, 1, GS_TCP_FRAME_DATA, 0, 6, 2 * half, 0, b, half);
            assert_int_equal(fake_recv_late(&f, 6, got, 2 * half), GS_ERR_PEER_FAILED);
        }
        assert_non_null(strstr(gs__error_get(), "granules 0xffff of message 0 arrived twice"));
        fake_teardown(&f);
    }
    free(a);
    free(b);
    free(got);
}

/*
 * A chunk that is not a run of whole granules of the sender's plan
 * (tcp_wire.h) fails the peer: a wrong offset, a wrong length, a split
 * message below GS_TCP_STRIPE_MIN or with one socket, a run that ends
 * inside a granule.
 */
static void test_tcp_transport_chunk_off_plan_fails_peer(void **state)
{
    const uint64_t s = GS_TCP_STRIPE_MIN;
    const uint64_t q = GS_TCP_GRANULE_MIN;
    static const struct {
        int nsocks;
        uint64_t total;
        int nframes; /* the last one is off plan */
        uint64_t off[3];
        uint64_t len[3];
    } cases[] = {
        {2, 2 * GS_TCP_STRIPE_MIN, 2, {0, 1000}, {GS_TCP_STRIPE_MIN, GS_TCP_STRIPE_MIN}},
        {2, 2 * GS_TCP_STRIPE_MIN, 2, {0, GS_TCP_STRIPE_MIN}, {GS_TCP_STRIPE_MIN, 1000}},
        {2, 2 * GS_TCP_STRIPE_MIN, 1, {1000}, {GS_TCP_STRIPE_MIN}},
        {1, 2 * GS_TCP_STRIPE_MIN, 1, {0}, {GS_TCP_STRIPE_MIN}},
        {2, GS_TCP_STRIPE_MIN - 1, 1, {0}, {GS_TCP_STRIPE_MIN / 2}},
        {3,
         GS_TCP_STRIPE_MIN + 1,
         2,
         {0, GS_TCP_GRANULE_MIN},
         {GS_TCP_GRANULE_MIN, 2 * GS_TCP_GRANULE_MIN + 1}},
    };
    uint8_t *payload = calloc(1, 3 * s);

    (void)state;
    (void)q;
    assert_non_null(payload);
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        fake_peer_t f;

        fake_setup(&f, cases[i].nsocks);
        for (int k = 0; k < cases[i].nframes; k++) {
            fake_frame(&f, k % cases[i].nsocks, GS_TCP_FRAME_DATA, 0, 40, cases[i].total,
                       cases[i].off[k], payload, cases[i].len[k]);
        }
        expect_protocol_failure(&f, "its sender cuts it into");
        fake_teardown(&f);
    }
    free(payload);
}

/*
 * Messages cut as a sender may cut them complete, whatever order their
 * runs come in: one granule per frame, last granule first, round robin
 * over the sockets; at GS_TCP_STRIPE_MIN and one byte below, totals not
 * divisible by the granule count, over 1 to 4 sockets, into a posted
 * receive and held as unexpected.
 */
static void test_tcp_transport_striped_chunks_any_order(void **state)
{
    static const struct {
        int nsocks;
        uint64_t total;
    } cases[] = {
        {3, GS_TCP_STRIPE_MIN},          {3, GS_TCP_STRIPE_MIN - 1}, {3, 3 * GS_TCP_STRIPE_MIN + 2},
        {4, GS_TCP_STRIPE_MIN + 3},      {2, 2 * GS_TCP_STRIPE_MIN}, {1, GS_TCP_STRIPE_MIN + 5},
        {2, 20 * GS_TCP_STRIPE_MIN + 7},
    };

    (void)state;
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        const uint64_t total = cases[i].total;
        const unsigned n = gs__tcp_granules(total, cases[i].nsocks > 1);
        uint8_t *msg = malloc(total);
        uint8_t *got = malloc(total);

        assert_non_null(msg);
        assert_non_null(got);
        fill(msg, total, 1, 0, (int)i);
        for (int posted = 0; posted < 2; posted++) {
            gs__tp_req_t *req = NULL;
            fake_peer_t f;

            memset(got, 0, total);
            fake_setup(&f, cases[i].nsocks);
            if (posted) {
                assert_int_equal(ops->irecv(f.tp, 1, 50, got, total, &req), GS_OK);
            }
            /* The last granule first, on the last socket; then the others. */
            for (unsigned k = 0; k < n; k++) {
                const unsigned part = (k + n - 1) % n;
                uint64_t off;
                uint64_t len;

                gs__tcp_granule_span(total, n, part, 1, &off, &len);
                fake_frame(&f,
                           (int)((k + (unsigned)cases[i].nsocks - 1) % (unsigned)cases[i].nsocks),
                           GS_TCP_FRAME_DATA, 0, 50, total, off, msg, len);
            }
            if (posted) {
                assert_int_equal(fake_wait(&f, req).status, GS_OK);
                ops->req_release(f.tp, req);
            } else {
                assert_int_equal(fake_recv_late(&f, 50, got, total), GS_OK);
            }
            assert_memory_equal(got, msg, total);
            assert_int_equal(f.tp->held.msgs, 0);
            assert_int_equal(f.tp->held.bytes, 0);
            fake_teardown(&f);
        }
        free(msg);
        free(got);
    }
}

/* Protocol 8's rail frames are checked like the rest: a RESEND before any
 * rail of the pair failed, a RAIL_DOWN naming the pair's last rail or a
 * rail it does not have, fail the peer naming what was wrong. */
static void test_tcp_transport_rail_frames_checked(void **state)
{
    uint8_t payload[64] = {0};

    (void)state;
    for (int k = 0; k < 3; k++) {
        fake_peer_t f;

        fake_setup(&f, 2);
        if (k == 0) {
            gs__tcp_frame_hdr_t h = {
                .type = GS_TCP_FRAME_DATA, .tag = 40, .total_len = 64, .chunk_len = 64};
            uint8_t hdr[GS_TCP_FRAME_HDR_LEN];

            gs__tcp_frame_encode(&h, hdr);
            gs__tcp_frame_mark_resend(hdr);
            assert_int_equal(gs__sock_write_full(f.fds[1][0], hdr, sizeof(hdr),
                                                 gs__deadline_after_ms(FAKE_WAIT_MS)),
                             GS_OK);
            assert_int_equal(gs__sock_write_full(f.fds[1][0], payload, sizeof(payload),
                                                 gs__deadline_after_ms(FAKE_WAIT_MS)),
                             GS_OK);
            expect_protocol_failure(&f, "no rail of the pair failed");
        } else {
            fake_frame(&f, 1, GS_TCP_FRAME_RAIL_DOWN, 0, (k == 1) ? 0 : 3, 0, 0, NULL, 0);
            expect_protocol_failure(&f, (k == 1) ? "it is our last" : "names rail 3 of 1");
        }
        fake_teardown(&f);
    }
}

/* The granule plan itself: every run of every plan is found, single
 * granules tile the message, and anything else is refused. */
static void test_tcp_transport_chunk_plan(void **state)
{
    static const uint64_t totals[] = {0,
                                      1,
                                      GS_TCP_STRIPE_MIN - 1,
                                      GS_TCP_STRIPE_MIN,
                                      GS_TCP_STRIPE_MIN + 1,
                                      GS_TCP_STRIPE_MIN + 15,
                                      1000003,
                                      GS_TCP_MAX_MSG};

    (void)state;
    assert_int_equal(gs__tcp_granule_mask(0, 64), ~0ull);
    assert_int_equal(gs__tcp_granule_mask(3, 2), 0x18ull);
    for (size_t t = 0; t < sizeof(totals) / sizeof(totals[0]); t++) {
        const uint64_t total = totals[t];
        const unsigned g = gs__tcp_granules(total, true);
        uint64_t next = 0;
        unsigned first = 99;
        unsigned count = 99;

        assert_int_equal(gs__tcp_granules(total, false), 1);
        if (total < GS_TCP_STRIPE_MIN) {
            assert_int_equal(g, 1);
        } else {
            assert_int_equal(g, (total / GS_TCP_GRANULE_MIN > GS_TCP_GRANULES_MAX)
                                    ? GS_TCP_GRANULES_MAX
                                    : (unsigned)(total / GS_TCP_GRANULE_MIN));
        }
        for (unsigned i = 0; i < g; i++) {
            uint64_t off;
            uint64_t len;

            gs__tcp_granule_span(total, g, i, 1, &off, &len);
            assert_int_equal(off, next);
            assert_true((len > 0) || (total == 0));
            next = off + len;
            assert_true(gs__tcp_granule_run(total, g, off, len, &first, &count));
            assert_int_equal(first, i);
            assert_int_equal(count, 1);
            assert_false(gs__tcp_granule_run(total, g, off, len + 1, &first, &count));
            assert_false(gs__tcp_granule_run(total, g, off + 1, len, &first, &count));
            if (len > 1) {
                assert_false(gs__tcp_granule_run(total, g, off, len - 1, &first, &count));
            }
            if (off > 0) {
                assert_false(gs__tcp_granule_run(total, g, off - 1, len, &first, &count));
            }
            /* Every longer run from here is one too. */
            for (unsigned k = 2; i + k <= g; k += 3) {
                gs__tcp_granule_span(total, g, i, k, &off, &len);
                assert_true(gs__tcp_granule_run(total, g, off, len, &first, &count));
                assert_int_equal(first, i);
                assert_int_equal(count, k);
            }
        }
        assert_int_equal(next, total);
        assert_false(gs__tcp_granule_run(total, g, total + 1, 0, &first, &count));
    }
}

static void test_tcp_transport_connect_timeout_names_rank(void **state)
{
    gs__tp_params_t params = {.rank = 0, .size = 2, .job_id = 1, .comm_id = 2, .counters = NULL};
    gs__tcp_settings_t set = {
        .nsocks = 1, .ifname = "", .family = "ipv4", .master_addr = "127.0.0.1"};
    char addrs[2][GS_TP_ADDR_MAX];
    gs__tp_t *tp = NULL;

    (void)state;
    assert_int_equal(gs__tcp_init_with(&params, &set, &tp), GS_OK);
    assert_int_equal(ops->get_address(tp, addrs[0], sizeof(addrs[0])), GS_OK);
    assert_non_null(strstr(addrs[0], "127.0.0.1:"));
    snprintf(addrs[1], sizeof(addrs[1]), "127.0.0.1:1");
    /* Rank 1 never connects to us. */
    assert_int_equal(ops->connect(tp, addrs, NULL, gs__deadline_after_ms(150)), GS_ERR_TIMEOUT);
    assert_non_null(strstr(gs__error_get(), "missing ranks 1"));
    assert_int_equal(ops->finalize(tp), GS_OK);
}

/* The init slot reads TCP's own settings from the configuration. */
static void test_tcp_transport_init_reads_cfg(void **state)
{
    gs__cfg_t cfg;
    gs__tcp_settings_t set;
    gs__tp_params_t params = {.rank = 0, .size = 1};
    gs__tp_t *tp = NULL;

    (void)state;
    /* Without a configuration there is nothing to read. */
    assert_int_equal(ops->init(&params, &tp), GS_ERR_INVALID_ARG);
    assert_non_null(strstr(gs__error_get(), "configuration"));
    memset(&cfg, 0, sizeof(cfg));
    cfg.tcp_nsocks = 3;
    cfg.tcp_spin_us = 7;
    cfg.shm = 1;
    cfg.shm_bytes = 4096;
    cfg.heartbeat_ms = 250;
    cfg.timeout_ms = 5000;
    cfg.tls = 1;
    snprintf(cfg.socket_ifname, sizeof(cfg.socket_ifname), "lo");
    snprintf(cfg.socket_family, sizeof(cfg.socket_family), "ipv4");
    snprintf(cfg.master_addr, sizeof(cfg.master_addr), "127.0.0.1");
    snprintf(cfg.host_id, sizeof(cfg.host_id), "host-a");
    snprintf(cfg.tls_cert, sizeof(cfg.tls_cert), "c.pem");
    snprintf(cfg.tls_key, sizeof(cfg.tls_key), "k.pem");
    snprintf(cfg.tls_ca, sizeof(cfg.tls_ca), "ca.pem");
    gs__tcp_settings_read(&cfg, &set);
    assert_int_equal(set.nsocks, 3);
    assert_int_equal(set.spin_us, 7);
    assert_int_equal(set.shm, 1);
    assert_int_equal(set.shm_bytes, 4096);
    assert_int_equal(set.heartbeat_ms, 250);
    assert_int_equal(set.timeout_ms, 5000);
    assert_string_equal(set.ifname, "lo");
    assert_string_equal(set.family, "ipv4");
    assert_string_equal(set.master_addr, "127.0.0.1");
    assert_true(set.host_id != 0);
    assert_int_equal(set.tls.on, 1);
    assert_string_equal(set.tls.cert, "c.pem");
    assert_string_equal(set.tls.key, "k.pem");
    assert_string_equal(set.tls.ca, "ca.pem");
    /* The slot applies them: a bad count from the configuration is refused. */
    cfg.tls = 0;
    cfg.tcp_nsocks = GS_TCP_MAX_SOCKS + 1;
    params.cfg = &cfg;
    assert_int_equal(ops->init(&params, &tp), GS_ERR_INVALID_ARG);
    assert_non_null(strstr(gs__error_get(), "sockets per peer"));
    cfg.tcp_nsocks = 1;
    assert_int_equal(ops->init(&params, &tp), GS_OK);
    assert_int_equal(ops->finalize(tp), GS_OK);
}

static void test_tcp_transport_bad_args(void **state)
{
    gs__tp_params_t params = {.rank = 0, .size = 1};
    gs__tcp_settings_t set = {.nsocks = 1, .family = "any"};
    char small[4];
    gs__tp_t *tp = NULL;
    gs__tp_req_t *req = NULL;
    uint8_t b[4];

    (void)state;
    set.nsocks = 0;
    assert_int_equal(gs__tcp_init_with(&params, &set, &tp), GS_ERR_INVALID_ARG);
    set.nsocks = GS_TCP_MAX_SOCKS + 1;
    assert_int_equal(gs__tcp_init_with(&params, &set, &tp), GS_ERR_INVALID_ARG);
    set.nsocks = 1;
    params.rank = 1;
    assert_int_equal(gs__tcp_init_with(&params, &set, &tp), GS_ERR_INVALID_ARG);
    params.rank = 0;
    set.ifname = "no-such-if0";
    assert_int_equal(gs__tcp_init_with(&params, &set, &tp), GS_ERR_INVALID_ARG);
    set.ifname = "";
    set.master_addr = "127.0.0.1";
    assert_int_equal(gs__tcp_init_with(&params, &set, &tp), GS_OK);
    assert_int_equal(ops->get_address(tp, small, sizeof(small)), GS_ERR_INVALID_ARG);
    /* A world of one connects to nobody. */
    assert_int_equal(ops->connect(tp, NULL, NULL, gs__deadline_after_ms(100)), GS_OK);
    assert_int_equal(ops->isend(tp, 0, 1, b, sizeof(b), &req), GS_ERR_INVALID_ARG);
    assert_int_equal(ops->isend(tp, 5, 1, b, sizeof(b), &req), GS_ERR_INVALID_ARG);
    assert_int_equal(ops->irecv(tp, -7, 1, b, sizeof(b), &req), GS_ERR_INVALID_ARG);
    assert_int_equal(ops->progress(tp, gs__deadline_after_ms(1)), GS_OK);
    assert_int_equal(ops->finalize(tp), GS_OK);
}

static void test_tcp_transport_lookup(void **state)
{
    const gs__transport_ops_t *found = NULL;

    (void)state;
    assert_int_equal(gs__transport_lookup("tcp", &found), GS_OK);
    assert_ptr_equal(found, &gs__tcp_ops);
    assert_int_equal(found->abi_size, sizeof(gs__transport_ops_t));
    assert_int_equal(gs__transport_lookup("carrier-pigeon", &found), GS_ERR_INVALID_ARG);
    assert_non_null(strstr(gs__error_get(), "carrier-pigeon"));
    assert_int_equal(gs__transport_lookup(NULL, &found), GS_ERR_INVALID_ARG);
}

/* The registry and the one list of parts (core/build_info.h) agree: every
 * transport row built in is found, one left out is not, and the sentence for
 * an unknown name lists each row, with how to build in one that is off. */
static void test_transport_lookup_matches_build_info(void **state)
{
    size_t n = 0;
    const gs__build_part_t *parts = gs__build_parts(&n);
    char unknown[1024];
    const gs__transport_ops_t *found = NULL;

    (void)state;
    assert_int_equal(gs__transport_lookup("carrier-pigeon", &found), GS_ERR_INVALID_ARG);
    snprintf(unknown, sizeof(unknown), "%s", gs__error_get());
    for (size_t i = 0; i < n; i++) {
        if (!parts[i].transport) {
            assert_int_not_equal(gs__transport_lookup(parts[i].name, &found), GS_OK);
            continue;
        }
        assert_non_null(strstr(unknown, parts[i].name));
        if (parts[i].on) {
            found = NULL;
            assert_int_equal(gs__transport_lookup(parts[i].name, &found), GS_OK);
            assert_string_equal(found->name, parts[i].name);
        } else {
            assert_int_equal(gs__transport_lookup(parts[i].name, &found), GS_ERR_INVALID_ARG);
            assert_non_null(strstr(unknown, parts[i].rebuild));
        }
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_tcp_transport_lookup),
        cmocka_unit_test(test_transport_lookup_matches_build_info),
        cmocka_unit_test(test_tcp_transport_init_reads_cfg),
        cmocka_unit_test(test_tcp_transport_bad_args),
        cmocka_unit_test(test_tcp_transport_exchange_2ranks_1sock),
        cmocka_unit_test(test_tcp_transport_exchange_2ranks_2socks),
        cmocka_unit_test(test_tcp_transport_exchange_2ranks_3socks),
        cmocka_unit_test(test_tcp_transport_exchange_3ranks_1sock),
        cmocka_unit_test(test_tcp_transport_exchange_3ranks_4socks),
        cmocka_unit_test(test_tcp_transport_unexpected),
        cmocka_unit_test(test_tcp_transport_any_source),
        cmocka_unit_test(test_tcp_transport_probe),
        cmocka_unit_test(test_tcp_transport_same_tag_order_4socks),
        cmocka_unit_test(test_tcp_transport_truncation_and_mismatch),
        cmocka_unit_test(test_tcp_transport_cancel),
        cmocka_unit_test(test_tcp_transport_peer_finalized),
        cmocka_unit_test(test_tcp_transport_abort),
        cmocka_unit_test(test_tcp_transport_garbage_on_listen_port),
        cmocka_unit_test(test_tcp_transport_counters),
        cmocka_unit_test(test_tcp_transport_connect_timeout_names_rank),
        cmocka_unit_test(test_tcp_transport_two_sockets_parked_on_one_message),
        cmocka_unit_test(test_tcp_transport_bad_frame_fails_peer),
        cmocka_unit_test(test_tcp_transport_chunk_outside_message_fails_peer),
        cmocka_unit_test(test_tcp_transport_all_sockets_parked_fails_peer),
        cmocka_unit_test(test_tcp_transport_close_without_bye_fails_peer),
        cmocka_unit_test(test_tcp_transport_skip_frame_skips_sequence),
        cmocka_unit_test(test_tcp_transport_zero_length_flood_fails_peer),
        cmocka_unit_test(test_tcp_transport_held_message_count_bound),
        cmocka_unit_test(test_tcp_transport_held_charges_released),
        cmocka_unit_test(test_tcp_transport_overlapping_chunks_fail_receive),
        cmocka_unit_test(test_tcp_transport_chunk_off_plan_fails_peer),
        cmocka_unit_test(test_tcp_transport_striped_chunks_any_order),
        cmocka_unit_test(test_tcp_transport_rail_frames_checked),
        cmocka_unit_test(test_tcp_transport_chunk_plan),
        cmocka_unit_test(test_tcp_transport_killed_rank_fails_every_receive),
        cmocka_unit_test(test_tcp_transport_down_frame_reaches_ranks_that_saw_nothing),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
