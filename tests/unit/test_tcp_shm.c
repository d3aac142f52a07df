/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The TCP transport's shared-memory links, in process: two rank threads on
 * one "host" (equal host ids). Covers: links are set up (and not when the
 * host ids differ, or one side has GS_SHM off, or /dev/shm is too small),
 * messages in both directions at once through a ring smaller than them, a
 * peer that corrupts the ring's position (GS_ERR_PROTOCOL, no read outside
 * the mapping), a byte other than a doorbell on the link's socket
 * (GS_ERR_PROTOCOL), no segment left in /dev/shm, and polling before
 * sleeping (GS_TCP_SPIN_US): on by default only when every peer is local,
 * and an abort or a peer's closed socket ends a spinning wait at once.
 * Rank threads record failures; the main thread asserts (cmocka is not
 * thread-safe).
 */
#include <dirent.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "core/clock.h"
#include "core/error.h"
#include "tcp_test_harness.h"
#include "transport/tcp/tcp_conn.h"
#include "transport/tcp/tcp_transport.h"
#include "transport/transport.h"

#define WAIT_MS 10000
#define TAG ((3ull << 48) | 5u)

typedef struct job job_t;
typedef void (*body_fn_t)(job_t *job, int rank);

struct job {
    uint64_t host_id[2];
    int shm[2];
    int spin_us[2];
    int test_free;
    body_fn_t body;
    char addrs[2][GS_TP_ADDR_MAX];
    gs__tp_t *tps[2];
    pthread_barrier_t barrier;
    tcp_fails_t fails;
    int nshm[2];
    uint64_t spin_ns[2];
};

typedef struct rank_arg {
    job_t *job;
    int rank;
} rank_arg_t;

static const gs__transport_ops_t *ops = &gs__tcp_ops;

/* Progress until req finishes, then release it; returns its status (GS_ERR_TIMEOUT if it
 * never did). */
static gs_status_t wait_req(gs__tp_t *tp, gs__tp_req_t *req, size_t *nbytes)
{
    gs__tp_completion_t comp;
    gs_status_t status = GS_ERR_TIMEOUT;

    memset(&comp, 0, sizeof(comp));
    if (tcp_wait_req(tp, req, &comp, WAIT_MS)) {
        status = comp.status;
        if (nbytes != NULL) {
            *nbytes = comp.nbytes;
        }
    }
    ops->req_release(tp, req);
    return status;
}

static void *rank_main(void *p)
{
    rank_arg_t *arg = (rank_arg_t *)p;
    job_t *job = arg->job;
    int rank = arg->rank;
    gs__tp_params_t params = {.rank = rank, .size = 2, .job_id = 0x5151, .comm_id = 0x77};
    gs__tcp_settings_t set = {.nsocks = 2,
                              .spin_us = job->spin_us[rank],
                              .ifname = "",
                              .family = "any",
                              .master_addr = "127.0.0.1",
                              .host_id = job->host_id[rank],
                              .shm = job->shm[rank],
                              .shm_bytes = 1024,
                              .shm_test_free = job->test_free};
    gs_status_t status = gs__tcp_init_with(&params, &set, &job->tps[rank]);

    CHECK_EQ(job, status, GS_OK);
    if (status == GS_OK) {
        CHECK_EQ(job, ops->get_address(job->tps[rank], job->addrs[rank], GS_TP_ADDR_MAX), GS_OK);
    }
    pthread_barrier_wait(&job->barrier);
    if (job->fails.failed == 0) {
        CHECK_EQ(
            job,
            ops->connect(job->tps[rank], job->addrs, job->host_id, gs__deadline_after_ms(WAIT_MS)),
            GS_OK);
        job->nshm[rank] = job->tps[rank]->nshm;
        job->spin_ns[rank] = job->tps[rank]->spin_ns;
    }
    pthread_barrier_wait(&job->barrier);
    if ((job->fails.failed == 0) && (job->body != NULL)) {
        job->body(job, rank);
    }
    pthread_barrier_wait(&job->barrier);
    if (job->tps[rank] != NULL) {
        ops->finalize(job->tps[rank]);
    }
    return NULL;
}

static void run_job(job_t *job)
{
    pthread_t threads[2];
    rank_arg_t args[2];

    pthread_barrier_init(&job->barrier, NULL, 2);
    tcp_fails_init(&job->fails);
    for (int r = 0; r < 2; r++) {
        args[r].job = job;
        args[r].rank = r;
        assert_int_equal(pthread_create(&threads[r], NULL, rank_main, &args[r]), 0);
    }
    for (int r = 0; r < 2; r++) {
        pthread_join(threads[r], NULL);
    }
    assert_int_equal(tcp_fails_end(&job->fails, ""), 0);
    pthread_barrier_destroy(&job->barrier);
}

static void job_init(job_t *job, body_fn_t body)
{
    memset(job, 0, sizeof(*job));
    job->host_id[0] = 42;
    job->host_id[1] = 42;
    job->shm[0] = 1;
    job->shm[1] = 1;
    job->test_free = -1;
    job->body = body;
}

/* Segments of this process still named in /dev/shm. */
static int my_segments(void)
{
    char prefix[64];
    struct dirent *e;
    DIR *d = opendir("/dev/shm");
    int n = 0;

    snprintf(prefix, sizeof(prefix), "gradsync-%d-", (int)getpid());
    while ((d != NULL) && ((e = readdir(d)) != NULL)) {
        n += (strncmp(e->d_name, prefix, strlen(prefix)) == 0) ? 1 : 0;
    }
    if (d != NULL) {
        closedir(d);
    }
    return n;
}

/* ---------------------------------------------------------------------- */

#define BIG (300u * 1024u + 7u) /* ~300 rings' worth */

/* Both ranks send BIG bytes and a small message to each other at once. */
static void body_both_ways(job_t *job, int rank)
{
    gs__tp_t *tp = job->tps[rank];
    int peer = 1 - rank;
    uint8_t *sbuf = malloc(BIG);
    uint8_t *rbuf = calloc(1, BIG);
    uint8_t small_in[40] = {0};
    uint8_t small_out[40];
    gs__tp_req_t *rr = NULL;
    gs__tp_req_t *rs = NULL;
    gs__tp_req_t *sr = NULL;
    gs__tp_req_t *ss = NULL;
    size_t n = 0;

    for (size_t i = 0; i < BIG; i++) {
        sbuf[i] = (uint8_t)(i * 29u + (unsigned)rank);
    }
    memset(small_out, 0x60 + rank, sizeof(small_out));
    CHECK_EQ(job, ops->irecv(tp, peer, TAG, rbuf, BIG, &rr), GS_OK);
    CHECK_EQ(job, ops->isend(tp, peer, TAG, sbuf, BIG, &sr), GS_OK);
    CHECK_EQ(job, ops->isend(tp, peer, TAG + 1, small_out, sizeof(small_out), &ss), GS_OK);
    CHECK_EQ(job, wait_req(tp, rr, &n), GS_OK);
    CHECK_EQ(job, n, BIG);
    /* The small one arrived unexpected behind the big one. */
    CHECK_EQ(job, ops->irecv(tp, peer, TAG + 1, small_in, sizeof(small_in), &rs), GS_OK);
    CHECK_EQ(job, wait_req(tp, rs, &n), GS_OK);
    CHECK_EQ(job, wait_req(tp, sr, NULL), GS_OK);
    CHECK_EQ(job, wait_req(tp, ss, NULL), GS_OK);
    for (size_t i = 0; i < BIG; i++) {
        if (rbuf[i] != (uint8_t)(i * 29u + (unsigned)peer)) {
            tcp_fail(&job->fails, __LINE__, "rank %d: byte %zu wrong", rank, i);
            break;
        }
    }
    CHECK_EQ(job, small_in[39], 0x60 + peer);
    free(sbuf);
    free(rbuf);
}

static void test_links_both_ways(void **state)
{
    job_t job;

    (void)state;
    job_init(&job, body_both_ways);
    run_job(&job);
    assert_int_equal(job.nshm[0], 1);
    assert_int_equal(job.nshm[1], 1);
    assert_int_equal(my_segments(), 0);
}

static void test_no_link_when_not_local(void **state)
{
    job_t job;

    (void)state;
    job_init(&job, body_both_ways);
    job.host_id[1] = 43; /* another host */
    run_job(&job);
    assert_int_equal(job.nshm[0], 0);
    assert_int_equal(job.nshm[1], 0);
    job_init(&job, body_both_ways);
    job.shm[0] = 0; /* GS_SHM=0 on one side */
    run_job(&job);
    assert_int_equal(job.nshm[0], 0);
    assert_int_equal(job.nshm[1], 0);
    job_init(&job, body_both_ways);
    job.test_free = 100; /* /dev/shm too small: both fall back */
    run_job(&job);
    assert_int_equal(job.nshm[0], 0);
    assert_int_equal(job.nshm[1], 0);
    assert_int_equal(my_segments(), 0);
}

/* Rank 0 acts as a buggy peer: it moves the tail of the ring rank 1 reads
 * more than a ring ahead (or writes a non-doorbell byte on the socket). */
static int hostile_mode;

static void body_hostile(job_t *job, int rank)
{
    gs__tp_t *tp = job->tps[rank];
    uint8_t buf[64];
    gs__tp_req_t *req = NULL;

    if (rank == 0) {
        gs__tcp_conn_t *c = &tp->peers[1].conns[0];
        uint8_t b = (hostile_mode == 0) ? GS_TCP_SHM_DOORBELL : 'X';

        if (hostile_mode == 0) {
            atomic_store(&c->shm->tx.ctl->tail, c->shm->tx.pos + c->shm->tx.size + 4096);
        }
        CHECK_EQ(job, send(c->fd, &b, 1, MSG_NOSIGNAL), 1);
        return;
    }
    CHECK_EQ(job, ops->irecv(tp, 0, TAG, buf, sizeof(buf), &req), GS_OK);
    CHECK_EQ(job, wait_req(tp, req, NULL), GS_ERR_PROTOCOL);
    if (strstr(gs__error_get(), (hostile_mode == 0) ? "corrupted the shared-memory ring"
                                                    : "only doorbells") == NULL) {
        tcp_fail(&job->fails, __LINE__, "unexpected reason: %s", gs__error_get());
    }
}

static void test_corrupt_ring_is_protocol_error(void **state)
{
    job_t job;

    (void)state;
    hostile_mode = 0;
    job_init(&job, body_hostile);
    run_job(&job);
    assert_int_equal(job.nshm[1], 1);
    hostile_mode = 1;
    job_init(&job, body_hostile);
    run_job(&job);
    assert_int_equal(my_segments(), 0);
}

/* Spinning waits: rank 1 waits for a message that never comes, polling
 * for up to SPIN_LONG_US; SPIN_ACT_MS in, rank 0 aborts rank 1's instance
 * (mode 0) or shuts its sockets to rank 1 down as a killed process would
 * (mode 1). Rank 1 must see it while still spinning, well before the spin
 * is over (a spin that looked only at the rings would notice neither). */
#define SPIN_LONG_US 1000000
#define SPIN_ACT_MS 20
#define SPIN_NOTICE_MS 300

static int spin_mode;
static atomic_int spin_waiting;
static _Atomic uint64_t spin_act_ns;

static void body_spin_interrupted(job_t *job, int rank)
{
    gs__tp_t *tp = job->tps[rank];
    uint8_t buf[64];
    gs__tp_req_t *req = NULL;
    gs_status_t status;
    uint64_t t0;
    uint64_t t1;

    if (rank == 0) {
        struct timespec d = {0, SPIN_ACT_MS * 1000000L};
        uint64_t give_up = gs__deadline_after_ms(WAIT_MS);

        while (!atomic_load(&spin_waiting) && (gs__now_ns() < give_up)) {
            nanosleep(&d, NULL);
        }
        nanosleep(&d, NULL);
        atomic_store(&spin_act_ns, gs__now_ns());
        if (spin_mode == 0) {
            CHECK_EQ(job, ops->abort(job->tps[1]), GS_OK);
        } else {
            for (int i = 0; i < tp->nsocks; i++) {
                CHECK_EQ(job, shutdown(tp->peers[1].conns[i].fd, SHUT_RDWR), 0);
            }
        }
        return;
    }
    CHECK_EQ(job, ops->irecv(tp, 0, TAG, buf, sizeof(buf), &req), GS_OK);
    t0 = gs__now_ns();
    atomic_store(&spin_waiting, 1);
    status = wait_req(tp, req, NULL);
    t1 = gs__now_ns();
    CHECK_EQ(job, status, (spin_mode == 0) ? GS_ERR_ABORTED : GS_ERR_PEER_FAILED);
    if ((atomic_load(&spin_act_ns) < t0) ||
        (t1 - atomic_load(&spin_act_ns) > SPIN_NOTICE_MS * 1000000ull)) {
        tcp_fail(&job->fails, __LINE__,
                 "mode %d: the wait started %.1f ms before the event and ended "
                 "%.1f ms after it (spinning %d ms)",
                 spin_mode, ((double)atomic_load(&spin_act_ns) - (double)t0) / 1e6,
                 ((double)t1 - (double)atomic_load(&spin_act_ns)) / 1e6, SPIN_LONG_US / 1000);
    }
}

static void test_spin_interrupted(void **state)
{
    job_t job;

    (void)state;
    for (spin_mode = 0; spin_mode < 2; spin_mode++) {
        atomic_store(&spin_act_ns, 0);
        atomic_store(&spin_waiting, 0);
        job_init(&job, body_spin_interrupted);
        job.spin_us[0] = SPIN_LONG_US;
        job.spin_us[1] = SPIN_LONG_US;
        run_job(&job);
        assert_int_equal(job.nshm[1], 1);
        assert_int_equal(job.spin_ns[1], SPIN_LONG_US * 1000ull);
    }
    assert_int_equal(my_segments(), 0);
}

/* GS_TCP_SPIN_US=-1 (the default) spins only when every peer is local;
 * 0 never spins. Traffic still flows either way. */
static void test_spin_auto(void **state)
{
    job_t job;

    (void)state;
    job_init(&job, body_both_ways);
    job.spin_us[0] = -1;
    job.spin_us[1] = -1;
    run_job(&job);
    assert_int_equal(job.nshm[0], 1);
    assert_true(job.spin_ns[0] > 0);
    assert_true(job.spin_ns[1] > 0);
    job_init(&job, body_both_ways);
    job.spin_us[0] = -1;
    job.spin_us[1] = -1;
    job.host_id[1] = 43; /* another host: TCP, no spinning */
    run_job(&job);
    assert_int_equal(job.nshm[0], 0);
    assert_int_equal(job.spin_ns[0], 0);
    assert_int_equal(job.spin_ns[1], 0);
    job_init(&job, body_both_ways);
    job.spin_us[0] = 0; /* off, although local */
    job.spin_us[1] = -1;
    run_job(&job);
    assert_int_equal(job.nshm[0], 1);
    assert_int_equal(job.spin_ns[0], 0);
    assert_true(job.spin_ns[1] > 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_links_both_ways),
        cmocka_unit_test(test_no_link_when_not_local),
        cmocka_unit_test(test_corrupt_ring_is_protocol_error),
        cmocka_unit_test(test_spin_interrupted),
        cmocka_unit_test(test_spin_auto),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
