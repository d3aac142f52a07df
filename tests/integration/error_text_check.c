/* SPDX-License-Identifier: Apache-2.0 */
/*
 * error_text_check: what gs_last_error() says, and for how long.
 *
 * - The sentence of a failing call stays until the thread's next failing
 *   call: successful calls (blocking and non-blocking collectives, waits,
 *   queries, configuration) leave it as it is, as errno does
 *   (gradsync.h, docs/errors.md).
 * - An algorithm that does not implement a collective is named in the
 *   sentence ("ring"), never given as its number.
 * - A suggestion names only a transport the build has: the forced 'native'
 *   algorithm on TCP points at GS_TRANSPORT=mpi only in a build with MPI
 *   (--mpi 0|1 says which this build is).
 *
 *   error_text_check [--mpi 0|1]
 *
 * Run on 2 ranks under gsrun (GS_TIMEOUT_MS bounds every wait). Prints one
 * line per check and "N checks, F failed"; exit status 1 on any failure.
 */
#include <gradsync/gradsync.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int g_checks, g_failed, g_rank;

static void check_(int cond, const char *what, const char *detail)
{
    g_checks++;
    if (!cond) {
        g_failed++;
        printf("FAIL rank %d: %s (%s)\n", g_rank, what, detail);
    } else {
        printf("ok   rank %d: %s\n", g_rank, what);
    }
}

/* The sentence must still be the first failure's after @p st (a success). */
static void kept_(gs_status_t st, const char *call, const char *first)
{
    char what[256];
    snprintf(what, sizeof(what), "gs_last_error() unchanged after a successful %s", call);
    check_(st == GS_OK, call, gs_status_name(st));
    check_(strcmp(gs_last_error(), first) == 0, what, gs_last_error());
}
#define KEPT(_call) kept_((_call), #_call, first)

/* A forced algorithm that the collective lacks: GS_ERR_UNSUPPORTED, named. */
static void named_(gs_status_t st, const char *call, const char *name, const char *number)
{
    char what[256];
    const char *err = gs_last_error();
    snprintf(what, sizeof(what), "%s: GS_ERR_UNSUPPORTED naming '%s'", call, name);
    check_((st == GS_ERR_UNSUPPORTED) && (strstr(err, name) != NULL), what, err);
    snprintf(what, sizeof(what), "%s: the algorithm is not given as '%s'", call, number);
    check_(strstr(err, number) == NULL, what, err);
}

int main(int argc, char **argv)
{
    /* --mpi 0|1: whether this build has the MPI transport (CMake says). */
    const int mpi_built = ((argc == 3) && (strcmp(argv[1], "--mpi") == 0)) ? atoi(argv[2]) : -1;
    gs_comm_t comm = GS_COMM_NULL;
    gs_request_t req = GS_REQUEST_NULL;
    gs_config_t cfg;
    float a[8] = {1, 2, 3, 4, 5, 6, 7, 8}, b[8];
    char first[512];
    gs_status_t st;
    int size = 0;

    gs_config_init(&cfg);
    st = gs_comm_init_env(&comm, &cfg);
    if (st != GS_OK) {
        printf("FAIL: gs_comm_init_env: %s: %s\n", gs_status_name(st), gs_last_error());
        return 1;
    }
    (void)gs_comm_rank(comm, &g_rank);

    /* A failing call (a NULL receive buffer), then successful ones. */
    st = gs_allreduce(comm, a, NULL, 8, GS_DTYPE_F32, GS_OP_SUM);
    check_(st == GS_ERR_INVALID_ARG, "a NULL recvbuf fails with GS_ERR_INVALID_ARG",
           gs_status_name(st));
    snprintf(first, sizeof(first), "%s", gs_last_error());
    check_(first[0] != '\0', "the failure has a sentence", "empty");

    KEPT(gs_allreduce(comm, a, b, 8, GS_DTYPE_F32, GS_OP_SUM));
    KEPT(gs_broadcast(comm, b, 8, GS_DTYPE_F32, 0));
    KEPT(gs_barrier(comm));
    KEPT(gs_iallreduce(comm, a, b, 8, GS_DTYPE_F32, GS_OP_SUM, &req));
    KEPT(gs_wait(&req));
    KEPT(gs_comm_size(comm, &size));
    gs_config_init(&cfg);
    check_(strcmp(gs_last_error(), first) == 0, "gs_last_error() unchanged after gs_config_init",
           gs_last_error());

    /* Forced algorithms the collective lacks: named, not numbered. */
    {
        gs_allreduce_opts_t ao = GS_ALLREDUCE_OPTS_INIT;
        gs_coll_opts_t co = GS_COLL_OPTS_INIT;
        ao.algo = GS_ALGO_CHAIN;
        named_(gs_allreduce_ex(comm, a, b, 8, GS_DTYPE_F32, GS_OP_SUM, &ao),
               "gs_allreduce_ex with GS_ALGO_CHAIN", "chain", "algo 2");
        co.algo = GS_ALGO_RECURSIVE_DOUBLING;
        named_(gs_broadcast_ex(comm, b, 8, GS_DTYPE_F32, 0, &co),
               "gs_broadcast_ex with GS_ALGO_RECURSIVE_DOUBLING", "rd", "algo 5");
    }
    /* The later failure replaced the first sentence; a success keeps it. */
    snprintf(first, sizeof(first), "%s", gs_last_error());
    KEPT(gs_allreduce(comm, a, b, 8, GS_DTYPE_F32, GS_OP_SUM));

    /* 'native' on TCP, which has no native all-reduce: the way out names
     * GS_TRANSPORT=mpi only in a build with the MPI transport. */
    if (mpi_built >= 0) {
        gs_allreduce_opts_t ao = GS_ALLREDUCE_OPTS_INIT;
        const char *err;
        ao.algo = GS_ALGO_NATIVE;
        st = gs_allreduce_ex(comm, a, b, 8, GS_DTYPE_F32, GS_OP_SUM, &ao);
        err = gs_last_error();
        check_(st == GS_ERR_UNSUPPORTED, "forced 'native' on tcp: GS_ERR_UNSUPPORTED",
               gs_status_name(st));
        check_(strstr(err, "GS_ALGO_AUTO") != NULL, "forced 'native' on tcp: says GS_ALGO_AUTO",
               err);
        check_((strstr(err, "GS_TRANSPORT=mpi") != NULL) == (mpi_built == 1),
               mpi_built ? "forced 'native' on tcp: suggests GS_TRANSPORT=mpi (built in)"
                         : "forced 'native' on tcp: no GS_TRANSPORT=mpi (not built in)",
               err);
    }

    st = gs_comm_destroy(comm);
    check_(st == GS_OK, "gs_comm_destroy", gs_status_name(st));
    printf("error_text_check: %d checks, %d failed\n", g_checks, g_failed);
    return g_failed ? 1 : 0;
}
