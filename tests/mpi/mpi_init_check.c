/* SPDX-License-Identifier: Apache-2.0 */
/*
 * mpi_init_check: gradsync inside a program that already uses MPI, run under
 * mpirun. Checks gs_comm_init_mpi on MPI_COMM_WORLD and on a split MPI
 * communicator (results compared with MPI_Allreduce of the same inputs),
 * gs_comm_split of an MPI-backed communicator, the native algorithm, the tcp
 * transport bootstrapped through MPI, that gradsync traffic never matches an
 * application receive posted on MPI_COMM_WORLD with MPI_ANY_TAG, and that
 * gradsync leaves the application's MPI initialised.
 *
 *   mpi_init_check [--level serialized] [--abort-rank R]
 *
 * --level serialized initialises MPI with MPI_THREAD_SERIALIZED and expects
 * gs_comm_init_mpi to refuse with GS_ERR_UNSUPPORTED. --abort-rank R makes
 * rank R exit abnormally in the middle of a collective loop (what the job
 * does then is Open MPI's choice: see docs/cluster.md).
 * Prints "PASS mpi_init_check" on rank 0; exit status 1 on any failure.
 */
#include <gradsync/mpi.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define N_ELEMS 100003

static int failures;

#define CHECK(_cond, ...)                                                                          \
    do {                                                                                           \
        if (!(_cond)) {                                                                            \
            int r_;                                                                                \
            MPI_Comm_rank(MPI_COMM_WORLD, &r_);                                                    \
            printf("FAIL rank %d line %d: ", r_, __LINE__);                                        \
            printf(__VA_ARGS__);                                                                   \
            printf(" (%s)\n", gs_last_error());                                                    \
            fflush(stdout);                                                                        \
            failures++;                                                                            \
        }                                                                                          \
    } while (0)

/* gs_allreduce on comm (with algorithm algo) == MPI_Allreduce on mcomm. */
static void check_allreduce(gs_comm_t comm, MPI_Comm mcomm, gs_algo_t algo, size_t n,
                            const char *what)
{
    int rank = 0;
    float *in = malloc(n * sizeof(float));
    float *out = malloc(n * sizeof(float));
    float *ref = malloc(n * sizeof(float));
    gs_allreduce_opts_t opts = GS_ALLREDUCE_OPTS_INIT;
    gs_status_t st;

    MPI_Comm_rank(mcomm, &rank);
    for (size_t i = 0; i < n; i++) {
        in[i] = (float)((i * 7 + (size_t)rank * 13) % 101);
    }
    opts.algo = algo;
    st = gs_allreduce_ex(comm, in, out, n, GS_DTYPE_F32, GS_OP_SUM, &opts);
    CHECK(st == GS_OK, "%s: gs_allreduce_ex returned %s", what, gs_status_name(st));
    MPI_Allreduce(in, ref, (int)n, MPI_FLOAT, MPI_SUM, mcomm);
    if (st == GS_OK) {
        size_t bad = 0;
        for (size_t i = 0; i < n; i++) {
            bad += (out[i] != ref[i]);
        }
        CHECK(bad == 0, "%s: %zu of %zu elements differ from MPI_Allreduce", what, bad, n);
    }
    free(in);
    free(out);
    free(ref);
}

static void run_abort(gs_comm_t comm, int abort_rank)
{
    int rank = 0;
    float v[1024];

    gs_comm_rank(comm, &rank);
    for (int it = 0; it < 1000; it++) {
        gs_status_t st;
        if ((it == 3) && (rank == abort_rank)) {
            printf("rank %d exits abnormally in the middle of the collectives\n", rank);
            fflush(stdout);
            _exit(3);
        }
        for (int i = 0; i < 1024; i++) {
            v[i] = 1.0f;
        }
        st = gs_allreduce(comm, v, v, 1024, GS_DTYPE_F32, GS_OP_SUM);
        if (st != GS_OK) {
            /* Reached only when Open MPI lets survivors run on. */
            printf("rank %d: collective failed as expected: %s: %s\n", rank, gs_status_name(st),
                   gs_last_error());
            fflush(stdout);
            exit(0);
        }
    }
    printf("rank %d: no error after the abort\n", rank);
    exit(1);
}

int main(int argc, char **argv)
{
    const char *level = "multiple";
    int abort_rank = -1;
    int provided = 0;
    int rank = 0;
    int size = 0;
    int finalized = 0;
    int total = 0;
    gs_comm_t world = GS_COMM_NULL;
    gs_status_t st;

    for (int i = 1; i < argc; i++) {
        if ((strcmp(argv[i], "--level") == 0) && (i + 1 < argc)) {
            level = argv[++i];
        } else if ((strcmp(argv[i], "--abort-rank") == 0) && (i + 1 < argc)) {
            abort_rank = atoi(argv[++i]);
        } else {
            fprintf(stderr, "usage: mpi_init_check [--level serialized] [--abort-rank R]\n");
            return 2;
        }
    }
    MPI_Init_thread(&argc, &argv,
                    strcmp(level, "serialized") == 0 ? MPI_THREAD_SERIALIZED : MPI_THREAD_MULTIPLE,
                    &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);

    if (strcmp(level, "serialized") == 0) {
        st = gs_comm_init_mpi(&world, MPI_COMM_WORLD, NULL);
        CHECK(st == GS_ERR_UNSUPPORTED, "serialized: expected GS_ERR_UNSUPPORTED, got %s",
              gs_status_name(st));
        CHECK(strstr(gs_last_error(), "MPI_THREAD_MULTIPLE") != NULL,
              "serialized: the message does not name the thread level");
        goto done;
    }
    CHECK(provided == MPI_THREAD_MULTIPLE, "the MPI library provides thread level %d", provided);

    st = gs_comm_init_mpi(&world, MPI_COMM_WORLD, NULL);
    CHECK(st == GS_OK, "gs_comm_init_mpi(MPI_COMM_WORLD) returned %s", gs_status_name(st));
    if (st != GS_OK) {
        goto done;
    }
    {
        int r = -1;
        int s = -1;
        gs_comm_rank(world, &r);
        gs_comm_size(world, &s);
        CHECK((r == rank) && (s == size), "world comm is rank %d of %d", r, s);
    }
    if (abort_rank >= 0) {
        run_abort(world, abort_rank);
    }

    /* An application receive with MPI_ANY_TAG on MPI_COMM_WORLD stays
     * pending while gradsync runs: gradsync uses a communicator of its own. */
    {
        int app_msg = -1;
        int flag = 0;
        MPI_Request app_req;

        MPI_Irecv(&app_msg, 1, MPI_INT, (rank + size - 1) % size, MPI_ANY_TAG, MPI_COMM_WORLD,
                  &app_req);
        check_allreduce(world, MPI_COMM_WORLD, GS_ALGO_AUTO, N_ELEMS, "world ring");
        check_allreduce(world, MPI_COMM_WORLD, GS_ALGO_AUTO, 5, "world small");
        /* Nobody sends the application message before everyone tested. */
        MPI_Barrier(MPI_COMM_WORLD);
        MPI_Test(&app_req, &flag, MPI_STATUS_IGNORE);
        CHECK(!flag, "an application receive on MPI_COMM_WORLD matched gradsync traffic");
        MPI_Barrier(MPI_COMM_WORLD);
        {
            int v = 1000 + rank;
            MPI_Send(&v, 1, MPI_INT, (rank + 1) % size, 7, MPI_COMM_WORLD);
        }
        MPI_Wait(&app_req, MPI_STATUS_IGNORE);
        CHECK(app_msg == 1000 + (rank + size - 1) % size, "application message %d", app_msg);
    }

    /* The native algorithm (MPI_Iallreduce underneath). */
    check_allreduce(world, MPI_COMM_WORLD, GS_ALGO_NATIVE, N_ELEMS, "world native");

    /* A split MPI communicator. */
    {
        MPI_Comm half;
        gs_comm_t gh = GS_COMM_NULL;

        MPI_Comm_split(MPI_COMM_WORLD, rank % 2, -rank, &half);
        st = gs_comm_init_mpi(&gh, half, NULL);
        CHECK(st == GS_OK, "gs_comm_init_mpi(split) returned %s", gs_status_name(st));
        if (st == GS_OK) {
            int r = -1;
            int mr = -2;
            gs_comm_rank(gh, &r);
            MPI_Comm_rank(half, &mr);
            CHECK(r == mr, "split comm rank %d, MPI rank %d", r, mr);
            check_allreduce(gh, half, GS_ALGO_AUTO, N_ELEMS, "split MPI comm");
            check_allreduce(gh, half, GS_ALGO_NATIVE, 31, "split MPI comm native");
            gs_comm_destroy(gh);
        }
        MPI_Comm_free(&half);
    }

    /* gs_comm_split of an MPI-backed communicator (MPI_Comm_create_group). */
    {
        gs_comm_t sub = GS_COMM_NULL;
        MPI_Comm mref;

        st = gs_comm_split(world, rank % 3, rank, &sub);
        CHECK(st == GS_OK, "gs_comm_split returned %s", gs_status_name(st));
        MPI_Comm_split(MPI_COMM_WORLD, rank % 3, rank, &mref);
        if (st == GS_OK) {
            check_allreduce(sub, mref, GS_ALGO_AUTO, 1031, "gs_comm_split");
            gs_comm_destroy(sub);
        }
        MPI_Comm_free(&mref);
    }

    /* The tcp transport with endpoints exchanged over MPI (no master address). */
    {
        gs_config_t cfg;
        gs_comm_t tcp = GS_COMM_NULL;

        gs_config_init(&cfg);
        cfg.transport = "tcp";
        st = gs_comm_init_mpi(&tcp, MPI_COMM_WORLD, &cfg);
        CHECK(st == GS_OK, "gs_comm_init_mpi(tcp) returned %s", gs_status_name(st));
        if (st == GS_OK) {
            check_allreduce(tcp, MPI_COMM_WORLD, GS_ALGO_AUTO, N_ELEMS, "tcp over MPI bootstrap");
            gs_comm_destroy(tcp);
        }
    }

    st = gs_comm_destroy(world);
    CHECK(st == GS_OK, "gs_comm_destroy returned %s", gs_status_name(st));
done:
    MPI_Finalized(&finalized);
    CHECK(!finalized, "gradsync finalized the application's MPI");
    MPI_Allreduce(&failures, &total, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    if (rank == 0) {
        printf("%s mpi_init_check world=%d level=%s (%d failures)\n", total ? "FAIL" : "PASS", size,
               level, total);
    }
    MPI_Finalize();
    return total ? 1 : 0;
}
