/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Point-to-point ordering: every rank posts its receive BEFORE its send
 * (the pattern of pipeline-parallel training), with small and large
 * messages, and keeps a receive in flight across collectives. This hung
 * when the worker ran a receive to completion before starting the send
 * queued behind it. Also checks that messages with the same tag between
 * the same pair arrive in order.
 *   gsrun -n N p2p_order_check
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <gradsync/gradsync.h>

#define CHECK(_call)                                                                               \
    do {                                                                                           \
        gs_status_t _s = (_call);                                                                  \
        if (_s != GS_OK) {                                                                         \
            fprintf(stderr, "rank %d: %s failed: %s: %s\n", rank, #_call, gs_status_name(_s),      \
                    gs_last_error());                                                              \
            return 1;                                                                              \
        }                                                                                          \
    } while (0)

static int ring_exchange(gs_comm_t comm, int rank, int size, size_t n, int iters)
{
    const int next = (rank + 1) % size;
    const int prev = (rank + size - 1) % size;
    int *out = malloc(n * sizeof(int));
    int *in = malloc(n * sizeof(int));
    int wrong = 0;

    for (int it = 0; (it < iters) && (wrong == 0); it++) {
        gs_request_t r[2];
        for (size_t i = 0; i < n; i++) {
            out[i] = rank * 1000003 + it * 7 + (int)i;
            in[i] = -1;
        }
        CHECK(gs_irecv(comm, in, n, GS_DTYPE_I32, prev, 11, &r[0]));
        CHECK(gs_isend(comm, out, n, GS_DTYPE_I32, next, 11, &r[1]));
        CHECK(gs_waitall(2, r));
        for (size_t i = 0; i < n; i++) {
            wrong += (in[i] != prev * 1000003 + it * 7 + (int)i);
        }
    }
    free(out);
    free(in);
    return wrong;
}

int main(void)
{
    gs_comm_t comm;
    int rank = -1, size = 0, wrong = 0;
    long long total = 0;

    if (gs_comm_init_env(&comm, NULL) != GS_OK) {
        fprintf(stderr, "init failed: %s\n", gs_last_error());
        return 1;
    }
    CHECK(gs_comm_rank(comm, &rank));
    CHECK(gs_comm_size(comm, &size));
    if (size < 2) {
        printf("p2p_order_check: needs 2 or more ranks; 1 passed, 0 failed\n");
        gs_comm_destroy(comm);
        return 0;
    }
    wrong += ring_exchange(comm, rank, size, 1, 50);
    wrong += ring_exchange(comm, rank, size, 300000, 3); /* striped, 1.2 MB */

    /* A receive stays in flight across collectives; the matching send is
     * issued only after them. */
    {
        const int next = (rank + 1) % size;
        const int prev = (rank + size - 1) % size;
        int got = -1, mine = rank + 5;
        float x = 1.0f;
        gs_request_t rr, rs;
        CHECK(gs_irecv(comm, &got, 1, GS_DTYPE_I32, GS_ANY_SOURCE, 12, &rr));
        CHECK(gs_allreduce(comm, &x, &x, 1, GS_DTYPE_F32, GS_OP_SUM));
        CHECK(gs_barrier(comm));
        CHECK(gs_isend(comm, &mine, 1, GS_DTYPE_I32, next, 12, &rs));
        CHECK(gs_wait(&rr));
        CHECK(gs_wait(&rs));
        wrong += (got != prev + 5) || (x != (float)size);
    }

    /* Same tag, same pair: in order. */
    {
        enum { K = 20 };
        int vals[K], outv[K];
        gs_request_t r[K];
        if (rank == 0) {
            for (int i = 0; i < K; i++) {
                outv[i] = i;
                CHECK(gs_isend(comm, &outv[i], 1, GS_DTYPE_I32, 1, 13, &r[i]));
            }
            CHECK(gs_waitall(K, r));
        } else if (rank == 1) {
            for (int i = 0; i < K; i++) {
                CHECK(gs_irecv(comm, &vals[i], 1, GS_DTYPE_I32, 0, 13, &r[i]));
            }
            CHECK(gs_waitall(K, r));
            for (int i = 0; i < K; i++) {
                wrong += (vals[i] != i);
            }
        }
    }

    total = wrong;
    CHECK(gs_allreduce(comm, &total, &total, 1, GS_DTYPE_I64, GS_OP_SUM));

    /* A receive nobody will match must not hold destroy until GS_TIMEOUT_MS:
     * it is cancelled with GS_ERR_ABORTED, and its request is still released. */
    {
        int never = 0;
        gs_request_t orphan;
        struct timespec t0, t1;
        double dt;
        gs_status_t st;
        CHECK(gs_irecv(comm, &never, 1, GS_DTYPE_I32, GS_ANY_SOURCE, 77, &orphan));
        clock_gettime(CLOCK_MONOTONIC, &t0);
        gs_comm_destroy(comm);
        clock_gettime(CLOCK_MONOTONIC, &t1);
        dt = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) * 1e-9;
        st = gs_wait(&orphan);
        /* A peer that destroyed first fails an any-source receive instead. */
        if (((st != GS_ERR_ABORTED) && (st != GS_ERR_PEER_FAILED)) || (dt > 5.0) ||
            (orphan != GS_REQUEST_NULL)) {
            fprintf(stderr, "rank %d: destroy with a pending receive took %.2f s, wait gave %s\n",
                    rank, dt, gs_status_name(st));
            total++;
        }
    }
    if (rank == 0) {
        printf("p2p_order_check: %d passed, %d failed\n", total == 0 ? 1 : 0, total == 0 ? 0 : 1);
    }
    return total == 0 ? 0 : 1;
}
