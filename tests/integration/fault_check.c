/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fault_check: the rank program that run_fault.sh starts directly (not via
 * gsrun, which would stop the survivors when one rank dies) to check how
 * gradsync behaves when a peer is killed, stopped, never joins, or when
 * garbage arrives on the rendezvous port. Uses the public API only and
 * prints one machine-readable line per event, with CLOCK_REALTIME
 * milliseconds so that the script can compare times across processes:
 *
 *   fault_check init [--expect LIST]
 *       gs_comm_init_env only; prints "INIT rank=R status=S ms=T err=..."
 *   fault_check loop [--count N] [--iters K] [--max-seconds S]
 *                    [--victim R --kill-after K] [--expect LIST]
 *       all-reduce (f32 sum) loop; prints "READY", "RUNNING" after 3
 *       iterations, "KILL" just before the victim raises SIGKILL in the
 *       middle of an all-reduce, then "RESULT", "STICKY" and "DESTROY". An
 *       init that fails prints "INIT" and "RESULT" (accepted with --victim
 *       when its error names the victim: a rank gone before anyone
 *       connected to it fails its ring neighbours' init).
 *
 * LIST is "ok" or a comma list of accepted status names (GS_ERR_TIMEOUT or
 * just TIMEOUT). Exit status 0 when the outcome is accepted, 1 otherwise,
 * 2 for bad arguments. A failure outcome also requires gs_last_error() to
 * name a rank ("rank N" or "peer N"; with --victim, N must be the victim)
 * and the next call to fail (sticky).
 */
#include <gradsync/gradsync.h>

#include "fault_util.h"

#include <math.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static struct {
    const char *mode;
    size_t count;
    long iters;
    double max_seconds;
    int victim;
    long kill_after;
    const char *expect;
} g_opt = {NULL, 16u * 1024u * 1024u, 1000000, 60.0, -1, 3, NULL};

/* True when @p st is accepted by the comma list @p list ("ok" means GS_OK). */
static int status_accepted(gs_status_t st, const char *list)
{
    const char *name = gs_status_name(st);
    const char *shortname = strncmp(name, "GS_ERR_", 7) == 0 ? name + 7 : name;
    char buf[256];
    snprintf(buf, sizeof(buf), "%s", list);
    char *save = NULL;
    for (char *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        if (strcmp(tok, "ok") == 0 && st == GS_OK)
            return 1;
        if (strcmp(tok, name) == 0 || strcmp(tok, shortname) == 0)
            return 1;
    }
    return 0;
}

/* Environment rank, for messages before a communicator exists. */
static int env_rank(void)
{
    const char *s = getenv("GS_RANK");
    if (!s)
        s = getenv("RANK");
    return s ? atoi(s) : -1;
}

static int run_init(void)
{
    const char *expect = g_opt.expect ? g_opt.expect : "ok";
    gs_comm_t comm = GS_COMM_NULL;
    double t0 = tc_now_ms();
    gs_status_t st = gs_comm_init_env(&comm, NULL);
    double ms = tc_now_ms() - t0;
    printf("INIT rank=%d status=%s ms=%.0f err=%s\n", env_rank(), gs_status_name(st), ms,
           st == GS_OK ? "" : gs_last_error());
    int ok = status_accepted(st, expect);
    if (st != GS_OK && gs_last_error()[0] == '\0') {
        printf("FAIL rank=%d: init failed but gs_last_error() is empty\n", env_rank());
        ok = 0;
    }
    if (st == GS_OK)
        (void)gs_comm_destroy(comm);
    return ok ? 0 : 1;
}

/*
 * Victim: start an all-reduce, let it run for a few milliseconds so that
 * the kill lands in the middle of it, then die without any cleanup.
 */
static void die_mid_allreduce(gs_comm_t comm, int rank, const float *send, float *recv)
{
    gs_request_t req = GS_REQUEST_NULL;
    gs_status_t st = gs_iallreduce(comm, send, recv, g_opt.count, GS_DTYPE_F32, GS_OP_SUM, &req);
    double until = tc_now_ms() + 5.0;
    while (st == GS_OK && tc_now_ms() < until && gs_test(&req) == GS_INPROGRESS)
        ;
    printf("KILL rank=%d t_ms=%lld\n", rank, wall_ms());
    fflush(stdout);
    raise(SIGKILL);
}

static int run_loop(void)
{
    const char *expect =
        g_opt.expect ? g_opt.expect : (g_opt.victim >= 0 ? "PEER_FAILED,TIMEOUT" : "ok");
    gs_comm_t comm = GS_COMM_NULL;
    gs_status_t st = gs_comm_init_env(&comm, NULL);
    if (st != GS_OK) {
        /* A victim gone before anyone connected to it fails its neighbours' init
         * (GS_CONNECT=lazy): accepted when expected and naming it. */
        const char *err = gs_last_error();
        int ok =
            (g_opt.victim >= 0) && status_accepted(st, expect) && names_rank(err, g_opt.victim);

        printf("INIT rank=%d status=%s err=%s\n", env_rank(), gs_status_name(st), err);
        printf("RESULT rank=%d status=%s iters=0 t_ms=%lld err=%s\n", env_rank(),
               gs_status_name(st), wall_ms(), err);
        return ok ? 0 : 1;
    }
    int rank = -1, world = 0;
    (void)gs_comm_rank(comm, &rank);
    (void)gs_comm_size(comm, &world);
    printf("READY rank=%d pid=%ld world=%d t_ms=%lld\n", rank, (long)getpid(), world, wall_ms());
    fflush(stdout);

    size_t n = g_opt.count;
    float *send = malloc((n ? n : 1) * sizeof(float));
    float *recv = malloc((n ? n : 1) * sizeof(float));
    if (!send || !recv) {
        printf("FAIL rank=%d: out of memory\n", rank);
        return 1;
    }
    for (size_t i = 0; i < n; i++)
        send[i] = (float)((i + (size_t)rank) % 17);

    double start = tc_now_ms();
    long it;
    int bad_data = 0;
    st = GS_OK;
    for (it = 0; it < g_opt.iters; it++) {
        if (tc_now_ms() - start > g_opt.max_seconds * 1e3)
            break;
        if (rank == g_opt.victim && it == g_opt.kill_after)
            die_mid_allreduce(comm, rank, send, recv);
        st = gs_allreduce(comm, send, recv, n, GS_DTYPE_F32, GS_OP_SUM);
        if (st != GS_OK)
            break;
        /* Spot-check a few elements: sum over r of (i + r) % 17. */
        for (size_t k = 0; k < 4 && n; k++) {
            size_t i = (k * 7919u + (size_t)it) % n;
            double want = 0;
            for (int r = 0; r < world; r++)
                want += (double)((i + (size_t)r) % 17);
            if (fabs(recv[i] - want) > 1e-3 && !bad_data) {
                printf("FAIL rank=%d iter=%ld: recv[%zu] = %g, expected %g\n", rank, it, i,
                       (double)recv[i], want);
                bad_data = 1;
            }
        }
        if (it == 2) {
            printf("RUNNING rank=%d t_ms=%lld\n", rank, wall_ms());
            fflush(stdout);
        }
    }
    long long t_err = wall_ms();
    const char *err = st == GS_OK ? "" : gs_last_error();
    printf("RESULT rank=%d status=%s iters=%ld t_ms=%lld err=%s\n", rank, gs_status_name(st), it,
           t_err, err);

    int ok = status_accepted(st, expect) && !bad_data;
    if (st != GS_OK) {
        if (!names_rank(err, g_opt.victim)) {
            if (g_opt.victim >= 0)
                printf("FAIL rank=%d: gs_last_error() does not name the killed rank %d: '%s'\n",
                       rank, g_opt.victim, err);
            else
                printf("FAIL rank=%d: gs_last_error() does not name a rank: '%s'\n", rank, err);
            ok = 0;
        }
        /* Sticky: the next call fails at once; the async error is set. */
        double t1 = tc_now_ms();
        gs_status_t next = gs_allreduce(comm, send, recv, 1, GS_DTYPE_F32, GS_OP_SUM);
        double next_ms = tc_now_ms() - t1;
        gs_status_t async = GS_OK;
        (void)gs_comm_get_async_error(comm, &async);
        printf("STICKY rank=%d next=%s next_ms=%.0f async=%s\n", rank, gs_status_name(next),
               next_ms, gs_status_name(async));
        if (next == GS_OK || async == GS_OK || next_ms > 1000.0) {
            printf("FAIL rank=%d: error not sticky (next call %s after %.0f ms, async %s)\n", rank,
                   gs_status_name(next), next_ms, gs_status_name(async));
            ok = 0;
        }
    }
    double t2 = tc_now_ms();
    gs_status_t dst = gs_comm_destroy(comm);
    printf("DESTROY rank=%d status=%s ms=%.0f\n", rank, gs_status_name(dst), tc_now_ms() - t2);
    free(send);
    free(recv);
    return ok ? 0 : 1;
}

static int parse_args(int argc, char **argv)
{
    const fault_opt_t opts[] = {
        {"--count", FAULT_OPT_SIZE, &g_opt.count},
        {"--iters", FAULT_OPT_LONG, &g_opt.iters},
        {"--max-seconds", FAULT_OPT_DOUBLE, &g_opt.max_seconds},
        {"--victim", FAULT_OPT_INT, &g_opt.victim},
        {"--kill-after", FAULT_OPT_LONG, &g_opt.kill_after},
        {"--expect", FAULT_OPT_STR, &g_opt.expect},
    };

    if (argc < 2)
        return -1;
    g_opt.mode = argv[1];
    if (fault_parse_opts(argc, argv, opts, sizeof(opts) / sizeof(opts[0])) != NULL)
        return -1;
    return (argc % 2) == 0 ? 0 : -1;
}

int main(int argc, char **argv)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    if (parse_args(argc, argv) != 0) {
        fprintf(stderr, "usage: fault_check init|loop [--count N] [--iters K] [--max-seconds S]"
                        " [--victim R] [--kill-after K] [--expect ok|STATUS,...]\n");
        return 2;
    }
    if (strcmp(g_opt.mode, "init") == 0)
        return run_init();
    if (strcmp(g_opt.mode, "loop") == 0)
        return run_loop();
    fprintf(stderr, "fault_check: unknown mode %s\n", g_opt.mode);
    return 2;
}
