/* SPDX-License-Identifier: Apache-2.0 */
/*
 * grow_check: the rank program of run_grow.sh (ranks started by hand).
 *
 * Old ranks (RANK/WORLD_SIZE/MASTER_* as for gs_comm_init_env):
 *   grow_check --new-size N --idfile F [--stale-idfile S] [--victim V] [--regrow-idfile F2]
 *     all-reduce; rank 0 makes the id (gs_comm_get_unique_id; with --stale-idfile it first
 *     makes one it writes there, then the real one) and writes it as hex to F; every old rank
 *     calls gs_comm_grow to N ranks. On the grown communicator: an all-reduce of rank + 1
 *     (sums N(N+1)/2), a broadcast of "parameters" from rank 0 checked on every rank, a
 *     barrier. With --victim V, old rank V raises SIGKILL just before the grow: every other
 *     rank's grow must fail naming it; the survivors shrink, rank 0 makes a new id into F2,
 *     and they grow back to N - 1 (the old size) with the joiner that waits on F2.
 * New ranks:
 *   grow_check --join --rank R --new-size N --idfile F [--expect STATUS_NAME]
 *     wait for F (bounded), read the id and call gs_comm_grow(GS_COMM_NULL, N, id, cfg{rank R}).
 *     With --expect, the call must fail with that status (a stale id, a missing token), and
 *     the program ends there.
 * Revoke:
 *   grow_check --revoke: rank 0 stays out of the all-reduce the others are blocked in and
 *     revokes; rank 1 also revokes from a second thread while its own all-reduce is blocked.
 *     Every rank's call fails with GS_ERR_REVOKED; a shrink then keeps every rank and its
 *     all-reduce is right; destroy returns.
 * Prints "GROW rank=R newrank=r newsize=n ms=T", "SHRINK ... ms=T", "REVOKED rank=R ms=T",
 * and "grow_check rank R: N passed, M failed"; exit status 1 on failure.
 */
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <gradsync/gradsync.h>
#include "tc_check.h"
#include "tc_clock.h"


static int write_id(const char *path, const gs_unique_id_t *id)
{
    char tmp[1024];
    FILE *f;

    snprintf(tmp, sizeof(tmp), "%s.tmp", path);
    f = fopen(tmp, "w");
    if (f == NULL) {
        return -1;
    }
    for (int i = 0; i < GS_UNIQUE_ID_BYTES; i++) {
        fprintf(f, "%02x", id->bytes[i]);
    }
    fprintf(f, "\n");
    if (fclose(f) != 0) {
        return -1;
    }
    return rename(tmp, path);
}

/* Wait up to 60 s for @p path, then read the id. */
static int read_id(const char *path, gs_unique_id_t *id)
{
    char hex[2 * GS_UNIQUE_ID_BYTES + 2];
    FILE *f = NULL;

    for (int i = 0; (i < 12000) && (f == NULL); i++) {
        f = fopen(path, "r");
        if (f == NULL) {
            usleep(5000);
        }
    }
    if (f == NULL) {
        return -1;
    }
    if (fgets(hex, sizeof(hex), f) == NULL || strlen(hex) < 2 * GS_UNIQUE_ID_BYTES) {
        fclose(f);
        return -1;
    }
    fclose(f);
    for (int i = 0; i < GS_UNIQUE_ID_BYTES; i++) {
        unsigned v;
        if (sscanf(hex + 2 * i, "%2x", &v) != 1) {
            return -1;
        }
        id->bytes[i] = (unsigned char)v;
    }
    return 0;
}

/* The work on a grown communicator: sum, parameters from rank 0, barrier. */
static void use_grown(gs_comm_t big, int want_size)
{
    enum { COUNT = 4099 };
    static float x[COUNT];
    static double params[1024];
    int r = -1, n = 0;
    char why[600];
    float expect;
    gs_status_t st;

    gs_comm_rank(big, &r);
    gs_comm_size(big, &n);
    expect = (float)n * (float)(n + 1) / 2.0f;
    for (int i = 0; i < COUNT; i++) {
        x[i] = (float)(r + 1);
    }
    st = gs_allreduce(big, x, x, COUNT, GS_DTYPE_F32, GS_OP_SUM);
    snprintf(why, sizeof(why), "%s, x[0]=%g, expected %g (size %d of %d): %s", gs_status_name(st),
             x[0], expect, n, want_size, gs_last_error());
    check((st == GS_OK) && (n == want_size) && (x[0] == expect) && (x[COUNT - 1] == expect),
          "an all-reduce on the grown communicator sums every rank", why);
    for (int i = 0; i < 1024; i++) {
        params[i] = (r == 0) ? 0.5 * i + 7.0 : -1.0;
    }
    st = gs_broadcast(big, params, 1024, GS_DTYPE_F64, 0);
    snprintf(why, sizeof(why), "%s, params[9]=%g: %s", gs_status_name(st), params[9],
             gs_last_error());
    check((st == GS_OK) && (params[9] == 11.5) && (params[1023] == 0.5 * 1023 + 7.0),
          "the parameters from rank 0 reach every rank", why);
    st = gs_barrier(big);
    check(st == GS_OK, "barrier on the grown communicator", gs_last_error());
}

static int join(int rank, int new_size, const char *idfile, const char *expect)
{
    gs_unique_id_t id;
    gs_config_t cfg;
    gs_comm_t big = GS_COMM_NULL;
    double t0;
    char why[600];
    gs_status_t st;

    g_rank = rank;
    if (read_id(idfile, &id) != 0) {
        check(0, "read the id", idfile);
        return 1;
    }
    gs_config_init(&cfg);
    cfg.rank = rank;
    t0 = tc_now_ms();
    st = gs_comm_grow(GS_COMM_NULL, new_size, &id, &cfg, &big);
    snprintf(why, sizeof(why), "%s: %s", gs_status_name(st), gs_last_error());
    if (expect != NULL) {
        printf("REFUSED rank=%d status=%s ms=%.0f why=%s\n", rank, gs_status_name(st),
               tc_now_ms() - t0, gs_last_error());
        check(strcmp(gs_status_name(st), expect) == 0, "the join is refused as expected", why);
        if (st == GS_OK) {
            gs_comm_destroy(big);
        }
    } else {
        check(st == GS_OK, "gs_comm_grow on a new rank", why);
        if (st == GS_OK) {
            int nr = -1, ns = 0;
            gs_comm_rank(big, &nr);
            gs_comm_size(big, &ns);
            printf("GROW rank=new newrank=%d newsize=%d ms=%.0f\n", nr, ns, tc_now_ms() - t0);
            check(nr == rank, "the new rank is the one asked for", "rank differs");
            use_grown(big, new_size);
            st = gs_comm_destroy(big);
            check(st == GS_OK, "destroy the grown communicator", gs_status_name(st));
        }
    }
    printf("grow_check rank %d: %d passed, %d failed\n", g_rank, g_pass, g_fail);
    return g_fail ? 1 : 0;
}

/* Old ranks: grow comm to new_size with the id in idfile (rank 0 makes it). */
static gs_status_t grow_old(gs_comm_t comm, int new_size, const char *idfile, const char *stale,
                            gs_comm_t *big)
{
    gs_unique_id_t id;
    double t0 = tc_now_ms();
    gs_status_t st;
    int r = -1, size = 0;

    gs_comm_rank(comm, &r);
    gs_comm_size(comm, &size);
    if (r == 0) {
        if (stale != NULL) {
            st = gs_comm_get_unique_id(comm, &id);
            check((st == GS_OK) && (write_id(stale, &id) == 0), "an id to go stale",
                  gs_last_error());
        }
        st = gs_comm_get_unique_id(comm, &id);
        check((st == GS_OK) && (write_id(idfile, &id) == 0), "gs_comm_get_unique_id",
              gs_last_error());
    }
    st = gs_comm_grow(comm, new_size, (r == 0) ? &id : NULL, NULL, big);
    if (st == GS_OK) {
        int nr = -1, ns = 0;
        gs_comm_rank(*big, &nr);
        gs_comm_size(*big, &ns);
        printf("GROW rank=%d newrank=%d newsize=%d ms=%.0f\n", r, nr, ns, tc_now_ms() - t0);
        check((nr == r) && (ns == new_size), "an old rank keeps its rank", "rank or size");
    }
    return st;
}

typedef struct {
    gs_comm_t comm;
    int delay_ms;
} revoker_t;

static void *revoke_later(void *arg)
{
    revoker_t *rv = (revoker_t *)arg;

    usleep((useconds_t)rv->delay_ms * 1000);
    gs_comm_revoke(rv->comm);
    return NULL;
}

static int run_revoke(gs_comm_t comm, int size)
{
    enum { COUNT = 1 << 14 };
    static float x[COUNT];
    gs_comm_t again = GS_COMM_NULL;
    pthread_t th;
    revoker_t rv = {comm, 400};
    char why[600];
    double t0 = tc_now_ms();
    gs_status_t st;

    for (int i = 0; i < COUNT; i++) {
        x[i] = 1.0f;
    }
    if (g_rank == 0) {
        struct timespec now;

        usleep(300000); /* the others are blocked in the all-reduce by now */
        t0 = tc_now_ms();
        clock_gettime(CLOCK_REALTIME, &now);
        printf("REVOKE rank=0 at=%lld\n", (long long)now.tv_sec * 1000 + now.tv_nsec / 1000000);
        st = gs_comm_revoke(comm);
        check(st == GS_OK, "gs_comm_revoke", gs_last_error());
        st = gs_allreduce(comm, x, x, COUNT, GS_DTYPE_F32, GS_OP_SUM);
    } else {
        if (g_rank == 1) {
            pthread_create(&th, NULL, revoke_later, &rv); /* races rank 0's */
        }
        st = gs_allreduce(comm, x, x, COUNT, GS_DTYPE_F32, GS_OP_SUM);
    }
    /* Rank 0 revoked at 0 ms; the others' all-reduce began some 300 ms before. */
    {
        struct timespec now;

        clock_gettime(CLOCK_REALTIME, &now); /* the script compares the ranks' clocks */
        printf("REVOKED rank=%d ms=%.0f at=%lld status=%s why=%s\n", g_rank, tc_now_ms() - t0,
               (long long)now.tv_sec * 1000 + now.tv_nsec / 1000000, gs_status_name(st),
               gs_last_error());
    }
    if (g_rank == 1) {
        pthread_join(th, NULL);
    }
    snprintf(why, sizeof(why), "%s: %s", gs_status_name(st), gs_last_error());
    check(st == GS_ERR_REVOKED, "the blocked (or later) all-reduce fails with GS_ERR_REVOKED", why);
    st = gs_allreduce(comm, x, x, COUNT, GS_DTYPE_F32, GS_OP_SUM);
    check(st == GS_ERR_REVOKED, "new work on a revoked communicator fails", gs_status_name(st));
    t0 = tc_now_ms();
    st = gs_comm_shrink(comm, &again);
    snprintf(why, sizeof(why), "%s: %s", gs_status_name(st), gs_last_error());
    check(st == GS_OK, "gs_comm_shrink after the revoke", why);
    if (st == GS_OK) {
        int ns = 0;
        gs_comm_size(again, &ns);
        printf("SHRINK rank=%d newsize=%d ms=%.0f\n", g_rank, ns, tc_now_ms() - t0);
        check(ns == size, "the shrink keeps every rank (none failed)", "size differs");
        use_grown(again, size);
        gs_comm_destroy(again);
    }
    t0 = tc_now_ms();
    st = gs_comm_destroy(comm);
    printf("DESTROY rank=%d ms=%.0f\n", g_rank, tc_now_ms() - t0);
    printf("grow_check rank %d: %d passed, %d failed\n", g_rank, g_pass, g_fail);
    return g_fail ? 1 : 0;
}

int main(int argc, char **argv)
{
    enum { COUNT = 1 << 12 };
    static float x[COUNT];
    const char *idfile = NULL, *stale = NULL, *regrow = NULL, *expect = NULL;
    int new_size = 0, victim = -1, joiner = 0, rank = -1, revoke = 0, size = 0;
    gs_comm_t comm = GS_COMM_NULL, big = GS_COMM_NULL;
    char why[600];
    gs_status_t st;

    setvbuf(stdout, NULL, _IOLBF, 0);
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *v = (i + 1 < argc) ? argv[i + 1] : NULL;

        if (strcmp(a, "--join") == 0) {
            joiner = 1;
        } else if (strcmp(a, "--revoke") == 0) {
            revoke = 1;
        } else if ((v != NULL) && (strcmp(a, "--new-size") == 0)) {
            new_size = atoi(v), i++;
        } else if ((v != NULL) && (strcmp(a, "--idfile") == 0)) {
            idfile = v, i++;
        } else if ((v != NULL) && (strcmp(a, "--stale-idfile") == 0)) {
            stale = v, i++;
        } else if ((v != NULL) && (strcmp(a, "--regrow-idfile") == 0)) {
            regrow = v, i++;
        } else if ((v != NULL) && (strcmp(a, "--victim") == 0)) {
            victim = atoi(v), i++;
        } else if ((v != NULL) && (strcmp(a, "--rank") == 0)) {
            rank = atoi(v), i++;
        } else if ((v != NULL) && (strcmp(a, "--expect") == 0)) {
            expect = v, i++;
        } else {
            fprintf(stderr, "usage: see the comment at the top of grow_check.c\n");
            return 2;
        }
    }
    if (joiner) {
        return join(rank, new_size, idfile, expect);
    }
    if (gs_comm_init_env(&comm, NULL) != GS_OK) {
        fprintf(stderr, "init: %s\n", gs_last_error());
        return 1;
    }
    gs_comm_rank(comm, &g_rank);
    gs_comm_size(comm, &size);
    for (int i = 0; i < COUNT; i++) {
        x[i] = 1.0f;
    }
    st = gs_allreduce(comm, x, x, COUNT, GS_DTYPE_F32, GS_OP_SUM);
    check((st == GS_OK) && (x[0] == (float)size), "an all-reduce before", gs_last_error());
    if (revoke) {
        return run_revoke(comm, size);
    }
    if (g_rank == victim) {
        printf("KILL rank=%d\n", g_rank);
        raise(SIGKILL);
    }
    st = grow_old(comm, new_size, idfile, stale, &big);
    snprintf(why, sizeof(why), "%s: %s", gs_status_name(st), gs_last_error());
    if (victim < 0) {
        check(st == GS_OK, "gs_comm_grow on an old rank", why);
    } else {
        gs_comm_t shrunk = GS_COMM_NULL;
        char named[32];

        printf("GROWFAIL rank=%d status=%s why=%s\n", g_rank, gs_status_name(st), gs_last_error());
        snprintf(named, sizeof(named), "rank %d", victim);
        check((st != GS_OK) && (strstr(gs_last_error(), named) != NULL),
              "the grow fails naming the dead old rank", why);
        if (st == GS_OK) {
            gs_comm_destroy(big);
            big = GS_COMM_NULL;
        }
        /* Reconcile: shrink, then grow back to new_size with the joiner on the second id. */
        st = gs_comm_shrink(comm, &shrunk);
        snprintf(why, sizeof(why), "%s: %s", gs_status_name(st), gs_last_error());
        check(st == GS_OK, "gs_comm_shrink after the failed grow", why);
        if (st == GS_OK) {
            gs_comm_destroy(comm);
            comm = shrunk;
            gs_comm_rank(comm, &g_rank);
            new_size--; /* back to the old size: one joiner replaces the dead rank */
            st = grow_old(comm, new_size, regrow, NULL, &big);
            snprintf(why, sizeof(why), "%s: %s", gs_status_name(st), gs_last_error());
            check(st == GS_OK, "gs_comm_grow after the shrink", why);
        }
    }
    if (st == GS_OK) {
        use_grown(big, new_size);
        st = gs_comm_destroy(big);
        check(st == GS_OK, "destroy the grown communicator", gs_status_name(st));
    }
    st = gs_comm_destroy(comm);
    check((st == GS_OK) || (victim >= 0), "destroy the old communicator", gs_status_name(st));
    printf("grow_check rank %d: %d passed, %d failed\n", g_rank, g_pass, g_fail);
    return g_fail ? 1 : 0;
}
