/* SPDX-License-Identifier: Apache-2.0 */
/*
 * trial_check: the rank program of run_trials.sh (randomised kill -9 trials)
 * and of run_hostile.sh's over-limit case. Ranks are started by hand with
 * RANK/WORLD_SIZE/MASTER_ADDR/MASTER_PORT (not gsrun, which stops every rank
 * when one dies). Public API only. Times are CLOCK_REALTIME milliseconds so
 * the script can compare them across processes.
 *
 *   trial_check loop --coll NAME [--count N] [--victim R --kill-iter K
 *                    --kill-delay-us D] [--max-seconds S]
 *       runs the collective NAME in a loop (allreduce, broadcast, allgather,
 *       reduce_scatter, alltoall, allgatherv, alltoallv, reduce_scatterv,
 *       p2p: an isend/irecv ring, compressed: int8 all-reduce through
 *       gs_allreduce_ex) after one barrier (so that every rank is past its
 *       init before the victim can die). The victim starts a thread that, once iteration K
 *       has begun, waits D microseconds, prints "KILL t_ms=" and raises
 *       SIGKILL: the kill lands at a random point of the collective.
 *       Survivors print "RESULT status= t_ms= named= err=" (named=1 when
 *       gs_last_error() names the victim as "rank V" or "peer V"), then
 *       "DESTROY". Exit 0 when the survivor got an error naming the victim
 *       (or GS_OK with no victim), 1 otherwise.
 *   trial_check hwm [--count N]
 *       init, one f32 all-reduce of N elements; prints "RESULT status= err=
 *       hwm_kb=" with VmHWM (peak RSS) from /proc/self/status afterwards.
 */
#include <gradsync/gradsync.h>
#include <gradsync/compress.h>

#include "fault_util.h"

#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static struct {
    const char *mode;
    const char *coll;
    size_t count;
    int victim;
    long kill_iter;
    long kill_delay_us;
    double max_seconds;
} g_opt = {NULL, "allreduce", 100000, -1, 2, 0, 30.0};

static atomic_long g_iter = -1;

static void *killer(void *arg)
{
    (void)arg;
    while (atomic_load(&g_iter) < g_opt.kill_iter)
        usleep(200);
    if (g_opt.kill_delay_us > 0)
        usleep((useconds_t)g_opt.kill_delay_us);
    printf("KILL rank=%d iter=%ld t_ms=%lld\n", g_opt.victim, (long)atomic_load(&g_iter),
           wall_ms());
    fflush(stdout);
    raise(SIGKILL);
    return NULL;
}

typedef struct bufs {
    float *send, *recv;
    size_t *counts, *displs; /* displs: alltoallv's receive counts */
    size_t n, total;
    int rank, world;
} bufs_t;

/* One operation of the chosen collective. */
static gs_status_t run_one(gs_comm_t comm, bufs_t *b, long it)
{
    const char *c = g_opt.coll;
    const int w = b->world, r = b->rank;
    const size_t n = b->n;

    if (strcmp(c, "allreduce") == 0)
        return gs_allreduce(comm, b->send, b->recv, n, GS_DTYPE_F32, GS_OP_SUM);
    if (strcmp(c, "broadcast") == 0)
        return gs_broadcast(comm, b->recv, n, GS_DTYPE_F32, (int)(it % w));
    if (strcmp(c, "allgather") == 0)
        return gs_allgather(comm, b->send, b->recv, n / (size_t)w, GS_DTYPE_F32);
    if (strcmp(c, "reduce_scatter") == 0)
        return gs_reduce_scatter(comm, b->send, b->recv, n / (size_t)w, GS_DTYPE_F32, GS_OP_SUM);
    if (strcmp(c, "alltoall") == 0)
        return gs_alltoall(comm, b->send, b->recv, n / (size_t)w, GS_DTYPE_F32);
    if (strcmp(c, "allgatherv") == 0)
        return gs_allgatherv(comm, b->send, b->counts[r], b->recv, b->total, b->counts, NULL,
                             GS_DTYPE_F32);
    if (strcmp(c, "alltoallv") == 0) /* r sends counts[j] to j; receives counts[r] from each */
        return gs_alltoallv(comm, b->send, b->total, b->counts, NULL, b->recv, b->total, b->displs,
                            NULL, GS_DTYPE_F32);
    if (strcmp(c, "reduce_scatterv") == 0)
        return gs_reduce_scatterv(comm, b->send, b->recv, b->counts, GS_DTYPE_F32, GS_OP_SUM);
    if (strcmp(c, "p2p") == 0) {
        gs_request_t sr = GS_REQUEST_NULL, rr = GS_REQUEST_NULL;
        gs_status_t st = gs_isend(comm, b->send, n, GS_DTYPE_F32, (r + 1) % w, 7, &sr);
        gs_status_t st2 = gs_irecv(comm, b->recv, n, GS_DTYPE_F32, (r + w - 1) % w, 7, &rr);
        if (st == GS_OK)
            st = gs_wait(&sr);
        if (st2 == GS_OK)
            st2 = gs_wait(&rr);
        else
            return st2;
        if (st != GS_OK) {
            /* keep the first error's sentence: wait for the other quietly */
            return st;
        }
        return st2;
    }
    if (strcmp(c, "compressed") == 0) {
        gs_codec_config_t cc = GS_CODEC_CONFIG_INIT;
        gs_allreduce_opts_t opts = GS_ALLREDUCE_OPTS_INIT;
        cc.kind = GS_CODEC_INT8;
        opts.codec = &cc;
        return gs_allreduce_ex(comm, b->send, b->recv, n, GS_DTYPE_F32, GS_OP_SUM, &opts);
    }
    fprintf(stderr, "trial_check: unknown collective %s\n", c);
    exit(2);
}

static int run_loop(void)
{
    gs_comm_t comm = GS_COMM_NULL;
    gs_status_t st = gs_comm_init_env(&comm, NULL);
    if (st != GS_OK) {
        printf("INIT status=%s err=%s\n", gs_status_name(st), gs_last_error());
        return 1;
    }
    bufs_t b = {0};
    (void)gs_comm_rank(comm, &b.rank);
    (void)gs_comm_size(comm, &b.world);
    b.n = g_opt.count < (size_t)b.world ? (size_t)b.world : g_opt.count;
    b.counts = calloc((size_t)b.world, sizeof(size_t));
    b.displs = calloc((size_t)b.world, sizeof(size_t));
    for (int j = 0; j < b.world; j++) {
        b.counts[j] = b.n / (size_t)b.world + (size_t)j * 7u;
        b.total += b.counts[j];
    }
    /* alltoallv's receive counts: every peer sends this rank counts[rank] elements */
    for (int j = 0; j < b.world; j++)
        b.displs[j] = b.counts[b.rank];
    if (b.displs[0] * (size_t)b.world > b.total)
        b.total = b.displs[0] * (size_t)b.world;
    size_t cap = (b.total > b.n ? b.total : b.n) * (size_t)b.world;
    b.send = calloc(cap, sizeof(float));
    b.recv = calloc(cap, sizeof(float));
    if (!b.send || !b.recv || !b.counts || !b.displs) {
        printf("FAIL rank=%d: out of memory\n", b.rank);
        return 1;
    }
    for (size_t i = 0; i < cap; i++)
        b.send[i] = (float)((i + (size_t)b.rank) % 13);
    printf("READY rank=%d world=%d coll=%s count=%zu t_ms=%lld\n", b.rank, b.world, g_opt.coll, b.n,
           wall_ms());
    fflush(stdout);
    if (b.rank == g_opt.victim) {
        pthread_t t;
        if (pthread_create(&t, NULL, killer, NULL) != 0) {
            printf("FAIL rank=%d: no killer thread\n", b.rank);
            return 1;
        }
    }
    /* Every rank is past gs_comm_init_env before the victim can die: rank 0's init returns
     * while the last ranks still finish its final exchange, and a broadcast rooted at rank 0
     * can complete without them, so a kill at iteration 1 could otherwise land inside a
     * survivor's init, which these trials do not judge. The barrier is part of the trial: a
     * failure in it is the RESULT. */
    double start = tc_now_ms();
    long it = 0;
    st = gs_barrier(comm);
    for (; st == GS_OK && tc_now_ms() - start < g_opt.max_seconds * 1e3; it++) {
        atomic_store(&g_iter, it);
        st = run_one(comm, &b, it);
        if (st != GS_OK)
            break;
    }
    long long t = wall_ms();
    const char *err = st == GS_OK ? "" : gs_last_error();
    int named = g_opt.victim >= 0 && st != GS_OK && names_rank(err, g_opt.victim);
    printf("RESULT rank=%d status=%s iters=%ld t_ms=%lld named=%d err=%s\n", b.rank,
           gs_status_name(st), it, t, named, err);
    fflush(stdout);
    double t2 = tc_now_ms();
    gs_status_t dst = gs_comm_destroy(comm);
    printf("DESTROY rank=%d status=%s ms=%.0f\n", b.rank, gs_status_name(dst), tc_now_ms() - t2);
    free(b.send);
    free(b.recv);
    free(b.counts);
    free(b.displs);
    if (g_opt.victim < 0)
        return st == GS_OK ? 0 : 1;
    return (st != GS_OK && named) ? 0 : 1;
}

static long vm_hwm_kb(void)
{
    char line[256];
    long kb = -1;
    FILE *f = fopen("/proc/self/status", "r");
    if (!f)
        return -1;
    while (fgets(line, sizeof(line), f))
        if (strncmp(line, "VmHWM:", 6) == 0)
            kb = atol(line + 6);
    fclose(f);
    return kb;
}

static int run_hwm(void)
{
    gs_comm_t comm = GS_COMM_NULL;
    long before = vm_hwm_kb();
    gs_status_t st = gs_comm_init_env(&comm, NULL);
    if (st == GS_OK) {
        size_t n = g_opt.count ? g_opt.count : 1;
        float *a = calloc(n, sizeof(float)), *o = calloc(n, sizeof(float));
        st = (a && o) ? gs_allreduce(comm, a, o, n, GS_DTYPE_F32, GS_OP_SUM) : GS_ERR_NO_MEMORY;
        printf("RESULT status=%s hwm_before_kb=%ld hwm_kb=%ld err=%s\n", gs_status_name(st), before,
               vm_hwm_kb(), st == GS_OK ? "" : gs_last_error());
        fflush(stdout);
        free(a);
        free(o);
        (void)gs_comm_destroy(comm);
    } else {
        printf("RESULT status=%s hwm_before_kb=%ld hwm_kb=%ld err=%s\n", gs_status_name(st), before,
               vm_hwm_kb(), gs_last_error());
    }
    return 0;
}

int main(int argc, char **argv)
{
    const fault_opt_t opts[] = {
        {"--coll", FAULT_OPT_STR, &g_opt.coll},
        {"--count", FAULT_OPT_SIZE, &g_opt.count},
        {"--victim", FAULT_OPT_INT, &g_opt.victim},
        {"--kill-iter", FAULT_OPT_LONG, &g_opt.kill_iter},
        {"--kill-delay-us", FAULT_OPT_LONG, &g_opt.kill_delay_us},
        {"--max-seconds", FAULT_OPT_DOUBLE, &g_opt.max_seconds},
    };

    setvbuf(stdout, NULL, _IOLBF, 0);
    if (argc < 2 || (argc % 2) != 0) {
        fprintf(stderr, "usage: trial_check loop|hwm [--coll NAME] [--count N] [--victim R]"
                        " [--kill-iter K] [--kill-delay-us D] [--max-seconds S]\n");
        return 2;
    }
    g_opt.mode = argv[1];
    const char *bad = fault_parse_opts(argc, argv, opts, sizeof(opts) / sizeof(opts[0]));
    if (bad != NULL) {
        fprintf(stderr, "trial_check: unknown option %s\n", bad);
        return 2;
    }
    if (strcmp(g_opt.mode, "loop") == 0)
        return run_loop();
    if (strcmp(g_opt.mode, "hwm") == 0)
        return run_hwm();
    fprintf(stderr, "trial_check: unknown mode %s\n", g_opt.mode);
    return 2;
}
