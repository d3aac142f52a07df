/* SPDX-License-Identifier: Apache-2.0 */
/*
 * gs_comm_abort from another thread: rank 0 blocks in an all-reduce that
 * rank 1 never joins (it waits in a receive that nobody sends); a watchdog
 * thread aborts rank 0's communicator after 300 ms. The blocked call must
 * return GS_ERR_ABORTED promptly (well before GS_TIMEOUT_MS), later calls
 * must return it too (sticky), and destroy must still succeed.
 *   gsrun -n 2 abort_check          (GS_TIMEOUT_MS=20000)
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include <gradsync/gradsync.h>

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static void *watchdog(void *arg)
{
    struct timespec d = {0, 300 * 1000 * 1000};
    nanosleep(&d, NULL);
    gs_comm_abort((gs_comm_t)arg);
    return NULL;
}

int main(void)
{
    gs_comm_t comm;
    int rank = -1, size = 0, fail = 0;

    if (gs_comm_init_env(&comm, NULL) != GS_OK) {
        fprintf(stderr, "init: %s\n", gs_last_error());
        return 1;
    }
    gs_comm_rank(comm, &rank);
    gs_comm_size(comm, &size);
    if (size != 2) {
        fprintf(stderr, "abort_check needs 2 ranks\n");
        return 1;
    }
    if (rank == 0) {
        pthread_t t;
        float x[1024] = {0};
        double t0 = now_s(), dt;
        gs_status_t st, again, async = GS_OK;

        pthread_create(&t, NULL, watchdog, comm);
        st = gs_allreduce(comm, x, x, 1024, GS_DTYPE_F32, GS_OP_SUM);
        dt = now_s() - t0;
        pthread_join(t, NULL);
        again = gs_barrier(comm);
        gs_comm_get_async_error(comm, &async);
        printf("rank 0: allreduce returned %s after %.3f s: %s\n", gs_status_name(st), dt,
               gs_last_error());
        fail += (st != GS_ERR_ABORTED) || (dt > 5.0);
        fail += (again != GS_ERR_ABORTED) || (async != GS_ERR_ABORTED);
    } else {
        int v = 0;
        gs_status_t st = gs_recv(comm, &v, 1, GS_DTYPE_I32, 0, 99);
        /* Rank 0 leaves after its abort: peer failure (or its goodbye). */
        printf("rank 1: recv returned %s: %s\n", gs_status_name(st), gs_last_error());
        fail += (st == GS_OK);
    }
    {
        /* Destroy always frees; after an abort it may report the abort. */
        const gs_status_t st = gs_comm_destroy(comm);
        fail += (st != GS_OK) && (st != GS_ERR_ABORTED);
    }
    printf("abort_check rank %d: %d passed, %d failed\n", rank, fail ? 0 : 1, fail ? 1 : 0);
    return fail ? 1 : 0;
}
