/* SPDX-License-Identifier: Apache-2.0 */
/*
 * shrink_check: the rank program of run_shrink.sh (ranks started by hand:
 * gsrun would stop the survivors). Every rank runs an all-reduce loop; at
 * iteration K the victim raises SIGKILL on itself in the middle of it. The
 * survivors must fail with GS_ERR_PEER_FAILED, call gs_comm_shrink, and get
 * a communicator of size N-1 in which their rank is their old rank's
 * position among the survivors; an all-reduce on it sums exactly the
 * survivors' contributions, a second shrink of the healthy new one keeps
 * every rank, and both communicators are destroyed cleanly.
 *   shrink_check --victim V --kill-at K [--iters I]
 * Prints "SHRINK rank=R newrank=r newsize=n ms=T" and the usual
 * "shrink_check rank R: N passed, M failed"; exit status 1 on failure.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <gradsync/gradsync.h>
#include "tc_check.h"
#include "tc_clock.h"


int main(int argc, char **argv)
{
    enum { COUNT = 1 << 16 };
    static float x[COUNT];
    int victim = -1, kill_at = 3, iters = 6, size = 0;
    gs_comm_t comm = GS_COMM_NULL, shrunk = GS_COMM_NULL, again = GS_COMM_NULL;
    gs_status_t st = GS_OK;
    char why[512];

    setvbuf(stdout, NULL, _IOLBF, 0);
    for (int i = 1; i + 1 < argc; i += 2) {
        if (strcmp(argv[i], "--victim") == 0) {
            victim = atoi(argv[i + 1]);
        } else if (strcmp(argv[i], "--kill-at") == 0) {
            kill_at = atoi(argv[i + 1]);
        } else if (strcmp(argv[i], "--iters") == 0) {
            iters = atoi(argv[i + 1]);
        } else {
            fprintf(stderr, "usage: shrink_check --victim V --kill-at K [--iters I]\n");
            return 2;
        }
    }
    if (gs_comm_init_env(&comm, NULL) != GS_OK) {
        fprintf(stderr, "init: %s\n", gs_last_error());
        return 1;
    }
    gs_comm_rank(comm, &g_rank);
    gs_comm_size(comm, &size);
    for (int it = 0; it < iters && st == GS_OK; it++) {
        for (int i = 0; i < COUNT; i++) {
            x[i] = (float)(g_rank + 1);
        }
        if ((g_rank == victim) && (it == kill_at)) {
            printf("KILL rank=%d\n", g_rank);
            raise(SIGKILL);
        }
        st = gs_allreduce(comm, x, x, COUNT, GS_DTYPE_F32, GS_OP_SUM);
    }
    snprintf(why, sizeof(why), "%s: %s", gs_status_name(st), gs_last_error());
    check(st == GS_ERR_PEER_FAILED, "the loop fails with GS_ERR_PEER_FAILED", why);
    {
        double t0 = tc_now_ms();
        int newrank = -1, newsize = 0, expect_rank = g_rank - (g_rank > victim ? 1 : 0);
        float expect = 0.0f;

        st = gs_comm_shrink(comm, &shrunk);
        snprintf(why, sizeof(why), "%s: %s", gs_status_name(st), gs_last_error());
        check(st == GS_OK, "gs_comm_shrink", why);
        if (st == GS_OK) {
            gs_comm_rank(shrunk, &newrank);
            gs_comm_size(shrunk, &newsize);
            printf("SHRINK rank=%d newrank=%d newsize=%d ms=%.0f\n", g_rank, newrank, newsize,
                   tc_now_ms() - t0);
            snprintf(why, sizeof(why), "rank %d of %d, expected %d of %d", newrank, newsize,
                     expect_rank, size - 1);
            check((newsize == size - 1) && (newrank == expect_rank),
                  "dense renumbering in old-rank order", why);
            for (int i = 0; i < COUNT; i++) {
                x[i] = (float)(g_rank + 1);
            }
            for (int r = 0; r < size; r++) {
                expect += (r == victim) ? 0.0f : (float)(r + 1);
            }
            st = gs_allreduce(shrunk, x, x, COUNT, GS_DTYPE_F32, GS_OP_SUM);
            snprintf(why, sizeof(why), "%s, x[0]=%g x[last]=%g, expected %g: %s",
                     gs_status_name(st), x[0], x[COUNT - 1], expect, gs_last_error());
            check((st == GS_OK) && (x[0] == expect) && (x[COUNT - 1] == expect),
                  "an all-reduce on the shrunk communicator sums the survivors", why);
            st = gs_comm_shrink(shrunk, &again);
            snprintf(why, sizeof(why), "%s: %s", gs_status_name(st), gs_last_error());
            check(st == GS_OK, "a shrink of a healthy communicator", why);
            if (st == GS_OK) {
                int s2 = 0;
                gs_comm_size(again, &s2);
                check(s2 == newsize, "keeps every rank", "size changed");
                st = gs_barrier(again);
                check(st == GS_OK, "barrier on it", gs_last_error());
                gs_comm_destroy(again);
            }
            st = gs_comm_destroy(shrunk);
            check(st == GS_OK, "destroy the shrunk communicator", gs_status_name(st));
        }
    }
    gs_comm_destroy(comm); /* failed: any status */
    printf("shrink_check rank %d: %d passed, %d failed\n", g_rank, g_pass, g_fail);
    return g_fail ? 1 : 0;
}
