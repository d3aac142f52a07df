/* SPDX-License-Identifier: Apache-2.0 */
/*
 * gs_comm_abort and failure detection, one mode per run:
 *
 *   abort_check [blocked]   (gsrun -n 2) rank 0 blocks in an all-reduce that
 *       rank 1 never joins (it waits in a receive that nobody sends); a
 *       watchdog thread aborts rank 0's communicator after 300 ms. The call
 *       returns GS_ERR_ABORTED within 1 s, later calls too (sticky), and
 *       destroy still succeeds.
 *   abort_check pending     (gsrun -n 2) rank 0 has a gs_irecv nobody
 *       matches and a gs_iallreduce rank 1 never joins in flight, and a
 *       second thread blocks in gs_barrier; the watchdog aborts. Every one
 *       completes with GS_ERR_ABORTED within 1 s of the abort, and a later
 *       gs_isend/gs_test and gs_allreduce do too.
 *   abort_check destroy     (gsrun -n 2) rank 0 queues a gs_iallreduce rank 1
 *       never joins and calls gs_comm_destroy, which would wait for it (up
 *       to GS_TIMEOUT_MS); the watchdog aborts 300 ms later, racing the
 *       destroy: destroy returns within 1 s of the abort and the request
 *       completes with GS_ERR_ABORTED.
 *   abort_check init        (gsrun -n 1) gs_config_t.abort_flag already set:
 *       gs_comm_init_env returns GS_ERR_ABORTED at once, and a second init
 *       without the flag still works.
 *   abort_check initconnect (by hand, rank 0 of 2: run_abort.sh) the other
 *       "rank" is hostile_peer.py, which joins the rendezvous and never
 *       completes a connection, so the init hangs in the connection setup;
 *       a thread sets gs_config_t.abort_flag after 1.5 s: the init returns
 *       GS_ERR_ABORTED within 1 s of it, far before GS_TIMEOUT_MS.
 *   abort_check slow        (gsrun -n 2, GS_HEARTBEAT_MS=200) rank 1
 *       computes 2 s (ten heartbeat intervals) on its main thread before
 *       each of three all-reduces, once while rank 0 waits in the call and
 *       once while both compute: nobody is declared dead, sums are right.
 *   abort_check stopped     (by hand, 2 ranks: run_abort.sh) rank 1 stops
 *       itself (SIGSTOP); rank 0 blocks in an all-reduce and the watchdog
 *       aborts: the call returns GS_ERR_ABORTED within 1 s. Rank 0 then
 *       kills rank 1 (SIGKILL).
 *   abort_check heartbeat   (by hand, 3 ranks, GS_HEARTBEAT_MS=500,
 *       GS_TIMEOUT_MS=30000: run_abort.sh) rank 2 stops itself (SIGSTOP);
 *       ranks 0 and 1 fail their all-reduce with GS_ERR_PEER_FAILED naming
 *       rank 2 within 1-4 s (3 intervals and the tick), far before the
 *       timeout, and at least one of them says "no heartbeat". Rank 0 then
 *       kills rank 2 (SIGKILL).
 *
 * Prints "abort_check rank R: N passed, M failed"; exit status 1 on failure.
 */
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <time.h>
#include <unistd.h>

#include <gradsync/gradsync.h>
#include "tc_check.h"
#include "tc_clock.h"


static void sleep_ms(long ms)
{
    struct timespec d = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&d, NULL);
}

/* The watchdog: aborts after delay_ms and records when. */
typedef struct watchdog {
    gs_comm_t comm;
    long delay_ms;
    double t_abort;
    gs_status_t status;
} watchdog_t;

static void *watchdog_main(void *arg)
{
    watchdog_t *w = (watchdog_t *)arg;

    sleep_ms(w->delay_ms);
    w->t_abort = tc_now_s();
    w->status = gs_comm_abort(w->comm);
    return NULL;
}

/* A second thread that blocks in a barrier while the abort comes. */
typedef struct blocker {
    gs_comm_t comm;
    gs_status_t status;
    double t_done;
} blocker_t;

static void *blocker_main(void *arg)
{
    blocker_t *b = (blocker_t *)arg;

    b->status = gs_barrier(b->comm);
    b->t_done = tc_now_s();
    return NULL;
}

/* Rank 1's part in the modes where rank 0 aborts: wait in a receive nobody
 * sends until rank 0 leaves; only a failure is acceptable. */
static void wait_for_leaver(gs_comm_t comm)
{
    int v = 0;
    gs_status_t st = gs_recv(comm, &v, 1, GS_DTYPE_I32, 0, 99);

    printf("rank %d: recv returned %s: %s\n", g_rank, gs_status_name(st), gs_last_error());
    check(st != GS_OK, "the receive fails once rank 0 leaves", gs_status_name(st));
}

static void mode_blocked(gs_comm_t comm)
{
    if (g_rank == 0) {
        pthread_t t;
        watchdog_t w = {comm, 300, 0.0, GS_OK};
        static float x[1024];
        gs_status_t st, again, async = GS_OK;
        double dt;
        char why[256];

        pthread_create(&t, NULL, watchdog_main, &w);
        st = gs_allreduce(comm, x, x, 1024, GS_DTYPE_F32, GS_OP_SUM);
        dt = tc_now_s();
        pthread_join(t, NULL);
        dt -= w.t_abort;
        snprintf(why, sizeof(why), "%s after %.3f s: %s", gs_status_name(st), dt, gs_last_error());
        check((st == GS_ERR_ABORTED) && (dt < 1.0), "blocked allreduce aborted within 1 s", why);
        again = gs_barrier(comm);
        gs_comm_get_async_error(comm, &async);
        check((again == GS_ERR_ABORTED) && (async == GS_ERR_ABORTED), "abort is sticky",
              gs_status_name(again));
    } else {
        wait_for_leaver(comm);
    }
}

static void mode_pending(gs_comm_t comm)
{
    if (g_rank == 0) {
        pthread_t t;
        pthread_t tb;
        watchdog_t w = {comm, 400, 0.0, GS_OK};
        blocker_t b = {comm, GS_OK, 0.0};
        static float x[4096];
        int v = 0;
        int one = 1;
        gs_request_t rr = GS_REQUEST_NULL;
        gs_request_t ra = GS_REQUEST_NULL;
        gs_request_t rs = GS_REQUEST_NULL;
        gs_status_t st_r, st_a, st_s, st;
        double t_r, t_a;
        char why[256];

        check(gs_irecv(comm, &v, 1, GS_DTYPE_I32, 1, 7, &rr) == GS_OK, "irecv posted",
              gs_last_error());
        check(gs_iallreduce(comm, x, x, 4096, GS_DTYPE_F32, GS_OP_SUM, &ra) == GS_OK,
              "iallreduce posted", gs_last_error());
        pthread_create(&tb, NULL, blocker_main, &b);
        pthread_create(&t, NULL, watchdog_main, &w);
        st_a = gs_wait(&ra);
        t_a = tc_now_s();
        st_r = gs_wait(&rr);
        t_r = tc_now_s();
        pthread_join(t, NULL);
        pthread_join(tb, NULL);
        snprintf(why, sizeof(why), "%s after %.3f s", gs_status_name(st_a), t_a - w.t_abort);
        check((st_a == GS_ERR_ABORTED) && (t_a - w.t_abort < 1.0),
              "pending iallreduce completes ABORTED within 1 s", why);
        snprintf(why, sizeof(why), "%s after %.3f s", gs_status_name(st_r), t_r - w.t_abort);
        check((st_r == GS_ERR_ABORTED) && (t_r - w.t_abort < 1.0),
              "pending irecv completes ABORTED within 1 s", why);
        snprintf(why, sizeof(why), "%s after %.3f s", gs_status_name(b.status),
                 b.t_done - w.t_abort);
        check((b.status == GS_ERR_ABORTED) && (b.t_done - w.t_abort < 1.0),
              "a barrier blocked on a second thread returns ABORTED within 1 s", why);
        check((ra == GS_REQUEST_NULL) && (rr == GS_REQUEST_NULL), "requests released",
              "a handle was not reset");
        st = gs_isend(comm, &one, 1, GS_DTYPE_I32, 1, 8, &rs);
        st_s = (st == GS_OK) ? gs_wait(&rs) : st;
        check(st_s == GS_ERR_ABORTED, "a later isend completes ABORTED", gs_status_name(st_s));
        st = gs_allreduce(comm, x, x, 4096, GS_DTYPE_F32, GS_OP_SUM);
        check(st == GS_ERR_ABORTED, "a later allreduce returns ABORTED", gs_status_name(st));
    } else {
        wait_for_leaver(comm);
    }
}

/* Returns 1 when the communicator was destroyed here. */
static int mode_destroy(gs_comm_t comm)
{
    if (g_rank == 0) {
        pthread_t t;
        watchdog_t w = {comm, 300, 0.0, GS_OK};
        static float x[4096];
        gs_request_t ra = GS_REQUEST_NULL;
        gs_status_t st;
        double t_done;
        char why[256];

        check(gs_iallreduce(comm, x, x, 4096, GS_DTYPE_F32, GS_OP_SUM, &ra) == GS_OK,
              "iallreduce posted", gs_last_error());
        pthread_create(&t, NULL, watchdog_main, &w);
        st = gs_comm_destroy(comm); /* waits for the queued all-reduce: the abort cuts it */
        t_done = tc_now_s();
        pthread_join(t, NULL);
        snprintf(why, sizeof(why), "destroy %s %.3f s after the abort", gs_status_name(st),
                 t_done - w.t_abort);
        check(((st == GS_OK) || (st == GS_ERR_ABORTED)) && (t_done - w.t_abort < 1.0) &&
                  (w.status == GS_OK),
              "an abort racing destroy cuts it short", why);
        st = gs_wait(&ra);
        check(st == GS_ERR_ABORTED, "the queued iallreduce completes ABORTED", gs_status_name(st));
        return 1;
    }
    wait_for_leaver(comm);
    return 0;
}

static void mode_slow(gs_comm_t comm)
{
    for (int round = 0; round < 3; round++) {
        double v = (double)(g_rank + 1);
        double t0 = tc_now_s();
        gs_status_t st;
        char why[256];
        char what[96];

        if ((g_rank == 1) || (round == 2)) {
            /* Busy on the main thread, as a training step would be. */
            volatile double acc = 0.0;

            while (tc_now_s() - t0 < 2.0) {
                for (int i = 0; i < 100000; i++) {
                    acc += (double)i * 1e-9;
                }
            }
        }
        st = gs_allreduce(comm, &v, &v, 1, GS_DTYPE_F64, GS_OP_SUM);
        snprintf(why, sizeof(why), "%s, sum %g: %s", gs_status_name(st), v,
                 st == GS_OK ? "" : gs_last_error());
        snprintf(what, sizeof(what), "round %d: a peer computing 2 s is not declared dead", round);
        check((st == GS_OK) && (v == 3.0), what, why);
    }
}

static void mode_stopped(gs_comm_t comm)
{
    long long pids[2] = {0, 0};
    long long mine = (long long)getpid();

    check(gs_allgather(comm, &mine, pids, 1, GS_DTYPE_I64) == GS_OK, "pids exchanged",
          gs_last_error());
    if (g_rank == 1) {
        raise(SIGSTOP); /* rank 0 kills us */
        return;
    }
    sleep_ms(200);
    {
        pthread_t t;
        watchdog_t w = {comm, 300, 0.0, GS_OK};
        static float x[1024];
        gs_status_t st;
        double dt;
        char why[256];

        pthread_create(&t, NULL, watchdog_main, &w);
        st = gs_allreduce(comm, x, x, 1024, GS_DTYPE_F32, GS_OP_SUM);
        dt = tc_now_s();
        pthread_join(t, NULL);
        dt -= w.t_abort;
        snprintf(why, sizeof(why), "%s after %.3f s: %s", gs_status_name(st), dt, gs_last_error());
        check((st == GS_ERR_ABORTED) && (dt < 1.0),
              "allreduce with a stopped peer aborted within 1 s", why);
    }
    kill((pid_t)pids[1], SIGKILL);
}

static void mode_heartbeat(gs_comm_t comm)
{
    long long pids[3] = {0, 0, 0};
    long long mine = (long long)getpid();
    static float x[1024];
    gs_status_t st;
    double t0;
    double dt;
    const char *err;
    char why[512];
    int named;
    int says_hb;

    check(gs_allgather(comm, &mine, pids, 1, GS_DTYPE_I64) == GS_OK, "pids exchanged",
          gs_last_error());
    check(gs_barrier(comm) == GS_OK, "barrier", gs_last_error());
    if (g_rank == 2) {
        raise(SIGSTOP); /* rank 0 kills us */
        return;
    }
    t0 = tc_now_s();
    st = gs_allreduce(comm, x, x, 1024, GS_DTYPE_F32, GS_OP_SUM);
    dt = tc_now_s() - t0;
    err = gs_last_error();
    named = (strstr(err, "rank 2") != NULL);
    says_hb = (strstr(err, "no heartbeat") != NULL);
    snprintf(why, sizeof(why), "%s after %.3f s: %s", gs_status_name(st), dt, err);
    printf("rank %d: allreduce %s\n", g_rank, why);
    check((st == GS_ERR_PEER_FAILED) && named && (dt > 1.0) && (dt < 4.0),
          "a stopped rank is declared failed by heartbeat, named, in 1-4 s", why);
    if (g_rank == 0) {
        kill((pid_t)pids[2], SIGKILL);
    }
    /* Who said "no heartbeat": the other may have heard it from us (a DOWN
     * frame: "rank 2 failed (reported by rank R)"); run_abort.sh wants one. */
    printf("HB rank=%d says_heartbeat=%d\n", g_rank, says_hb);
}

/* Sets *flag after 1.5 s (initconnect). */
static void *flag_setter(void *arg)
{
    sleep_ms(1500);
    /* Another thread: an atomic store, as gradsync.h asks (a plain one races). */
    __atomic_store_n((volatile int *)arg, 1, __ATOMIC_RELAXED);
    return NULL;
}

static int mode_initconnect(void)
{
    gs_config_t cfg;
    volatile int flag = 0;
    pthread_t t;
    gs_comm_t comm = GS_COMM_NULL;
    gs_status_t st;
    double t0 = tc_now_s();
    double dt;
    char why[512];

    g_rank = 0;
    gs_config_init(&cfg);
    cfg.abort_flag = &flag;
    pthread_create(&t, NULL, flag_setter, (void *)&flag);
    st = gs_comm_init_env(&comm, &cfg);
    dt = tc_now_s() - t0;
    pthread_join(t, NULL);
    snprintf(why, sizeof(why), "%s after %.3f s: %s", gs_status_name(st), dt, gs_last_error());
    printf("INIT status=%s s=%.3f\n", gs_status_name(st), dt);
    check((st == GS_ERR_ABORTED) && (dt >= 1.4) && (dt < 2.5),
          "an init hanging (rendezvous or connection setup) stops within 1 s of abort_flag", why);
    if (st == GS_OK) {
        gs_comm_destroy(comm);
    }
    printf("abort_check rank %d: %d passed, %d failed\n", g_rank, g_pass, g_fail);
    return g_fail ? 1 : 0;
}

int main(int argc, char **argv)
{
    const char *mode = (argc > 1) ? argv[1] : "blocked";
    gs_comm_t comm;
    int size = 0;
    int destroyed = 0;

    setvbuf(stdout, NULL, _IOLBF, 0);
    if (strcmp(mode, "initconnect") == 0) {
        return mode_initconnect();
    }
    if (strcmp(mode, "init") == 0) {
        gs_config_t cfg;
        volatile int flag = 1;
        double t0 = tc_now_s();
        gs_status_t st;

        g_rank = 0;
        gs_config_init(&cfg);
        cfg.abort_flag = &flag;
        st = gs_comm_init_env(&comm, &cfg);
        check((st == GS_ERR_ABORTED) && (tc_now_s() - t0 < 1.0),
              "init with abort_flag set returns ABORTED at once", gs_status_name(st));
        if (st == GS_OK) {
            gs_comm_destroy(comm);
        }
        flag = 0;
        st = gs_comm_init_env(&comm, &cfg);
        check(st == GS_OK, "init with the flag clear works", gs_last_error());
        if (st == GS_OK) {
            gs_comm_destroy(comm);
        }
        printf("abort_check rank %d: %d passed, %d failed\n", g_rank, g_pass, g_fail);
        return g_fail ? 1 : 0;
    }
    if (gs_comm_init_env(&comm, NULL) != GS_OK) {
        fprintf(stderr, "init: %s\n", gs_last_error());
        return 1;
    }
    gs_comm_rank(comm, &g_rank);
    gs_comm_size(comm, &size);
    if (strcmp(mode, "heartbeat") == 0 ? (size != 3) : (size != 2)) {
        fprintf(stderr, "abort_check %s: wrong number of ranks (%d)\n", mode, size);
        return 1;
    }
    if (strcmp(mode, "blocked") == 0) {
        mode_blocked(comm);
    } else if (strcmp(mode, "pending") == 0) {
        mode_pending(comm);
    } else if (strcmp(mode, "destroy") == 0) {
        destroyed = mode_destroy(comm);
    } else if (strcmp(mode, "slow") == 0) {
        mode_slow(comm);
    } else if (strcmp(mode, "stopped") == 0) {
        mode_stopped(comm);
    } else if (strcmp(mode, "heartbeat") == 0) {
        mode_heartbeat(comm);
    } else {
        fprintf(stderr, "abort_check: unknown mode %s\n", mode);
        return 2;
    }
    if (!destroyed) {
        /* Destroy always frees; after an abort or a failure it may report it. */
        const gs_status_t st = gs_comm_destroy(comm);
        check((st == GS_OK) || (st == GS_ERR_ABORTED) || (st == GS_ERR_PEER_FAILED), "destroy",
              gs_status_name(st));
    }
    printf("abort_check rank %d: %d passed, %d failed\n", g_rank, g_pass, g_fail);
    return g_fail ? 1 : 0;
}
