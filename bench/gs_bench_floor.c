/* SPDX-License-Identifier: Apache-2.0 */
/*
 * gs-bench's memory-traffic floor (gs_bench_floor.h): a two-thread memcpy
 * of buffers larger than the last-level cache, as the cost model's memory
 * term assumes every rank of a host copies at once. Each thread touches its
 * own buffers first (page faults and first-touch placement stay outside the
 * timer), then every repetition starts the threads together at a barrier
 * and ends when the last one is done. gs_bench_floor_setup decides at the
 * start of a run whether there is a floor to measure, and keeps the other
 * ranks out of the way while rank 0 measures it.
 */
#include "gs_bench_floor.h"

#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/llc.h"
#include "tc_clock.h"

#define FLOOR_MAX_THREADS 2
#define FLOOR_MIN_TOTAL ((size_t)64 << 20)  /* copied per repetition, all threads */
#define FLOOR_MIN_THREAD ((size_t)32 << 20) /* copied per repetition, each thread */
#define FLOOR_MAX_TOTAL ((size_t)1 << 30)   /* however large the cache says it is */
#define FLOOR_REPS 7                        /* timed; one warm-up before them */
#define FLOOR_TAG 0x6266u                   /* "bf": rank 0 has measured the rate */

typedef struct floor_thread {
    pthread_barrier_t *start; /* every repetition starts here */
    pthread_barrier_t *done;  /* and ends here */
    unsigned char *src;
    unsigned char *dst;
    size_t bytes;
    double *secs;  /* thread 0: each timed repetition's seconds; NULL for the others */
    unsigned sink; /* a byte of the copy, read so that it cannot be left out */
} floor_thread_t;

static void *floor_copy(void *arg)
{
    floor_thread_t *t = arg;

    memset(t->src, 0x5a, t->bytes);
    memset(t->dst, 0, t->bytes);
    for (int r = -1; r < FLOOR_REPS; r++) { /* r = -1: the warm-up */
        double t0;

        (void)pthread_barrier_wait(t->start);
        t0 = tc_now_s();
        memcpy(t->dst, t->src, t->bytes);
        (void)pthread_barrier_wait(t->done);
        if ((t->secs != NULL) && (r >= 0)) {
            t->secs[r] = tc_now_s() - t0;
        }
        t->sink += t->dst[(size_t)(r + 1) * 4093u % t->bytes];
    }
    return NULL;
}

static int cmp_secs(const void *a, const void *b)
{
    const double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Threads to copy with: min(2, online CPUs). */
static int floor_threads(void)
{
    const long cpus = sysconf(_SC_NPROCESSORS_ONLN);

    return (cpus >= FLOOR_MAX_THREADS) ? FLOOR_MAX_THREADS : 1;
}


/* Bytes each of @p threads copies per repetition: together at least 64 MiB and twice the
 * last-level cache, each at least 32 MiB. */
static size_t floor_thread_bytes(int threads)
{
    const size_t llc = (size_t)gs__llc_bytes();
    size_t total = FLOOR_MIN_TOTAL;
    size_t each;

    if (2 * llc > total) {
        total = (2 * llc < FLOOR_MAX_TOTAL) ? 2 * llc : FLOOR_MAX_TOTAL;
    }
    each = total / (size_t)threads;
    each = (each < FLOOR_MIN_THREAD) ? FLOOR_MIN_THREAD : each;
    return (each + 4095u) / 4096u * 4096u;
}

static void floor_free(floor_thread_t *t, int n)
{
    for (int i = 0; i < n; i++) {
        free(t[i].src);
        free(t[i].dst);
    }
}

/* One helper thread at most: were a second one to fail to start, the first would wait at
 * a barrier forever (pthread_barrier_wait is no cancellation point). */
_Static_assert(FLOOR_MAX_THREADS == 2, "gs_bench_floor_measure starts one helper thread");

gs_status_t gs_bench_floor_measure(gs_bench_floor_t *out)
{
    floor_thread_t t[FLOOR_MAX_THREADS];
    pthread_t helper;
    pthread_barrier_t start, done;
    double secs[FLOOR_REPS];
    const int threads = floor_threads();
    const size_t bytes = floor_thread_bytes(threads);
    gs_status_t status = GS_OK;

    memset(out, 0, sizeof(*out));
    memset(t, 0, sizeof(t));
    for (int i = 0; i < threads; i++) {
        t[i] = (floor_thread_t){.start = &start, .done = &done, .bytes = bytes};
        t[i].src = aligned_alloc(4096, bytes);
        t[i].dst = aligned_alloc(4096, bytes);
        if ((t[i].src == NULL) || (t[i].dst == NULL)) {
            floor_free(t, i + 1);
            return GS_ERR_NO_MEMORY;
        }
    }
    t[0].secs = secs; /* thread 0 is this one */
    if (pthread_barrier_init(&start, NULL, (unsigned)threads) != 0) {
        floor_free(t, threads);
        return GS_ERR_SYSTEM;
    }
    if (pthread_barrier_init(&done, NULL, (unsigned)threads) != 0) {
        (void)pthread_barrier_destroy(&start);
        floor_free(t, threads);
        return GS_ERR_SYSTEM;
    }
    if ((threads > 1) && (pthread_create(&helper, NULL, floor_copy, &t[1]) != 0)) {
        status = GS_ERR_SYSTEM;
    }
    if (status == GS_OK) {
        (void)floor_copy(&t[0]);
        if (threads > 1) {
            (void)pthread_join(helper, NULL);
        }
    }
    (void)pthread_barrier_destroy(&start);
    (void)pthread_barrier_destroy(&done);
    floor_free(t, threads);
    if (status != GS_OK) {
        return status;
    }
    qsort(secs, FLOOR_REPS, sizeof(double), cmp_secs);
    if (secs[FLOOR_REPS / 2] <= 0.0) {
        return GS_ERR_SYSTEM; /* no clock worth the name */
    }
    out->threads = threads;
    out->bytes = bytes;
    out->reps = FLOOR_REPS;
    out->copy_bps = (double)bytes * threads / secs[FLOOR_REPS / 2];
    out->traffic_bps = 2.0 * out->copy_bps;
    return GS_OK;
}

/*
 * The library counts a design's memory traffic only for ranks that all share one host
 * (gs_comm_stats_t.traffic_bytes), and no public call says so otherwise, so one untimed ring
 * all-reduce of one element asks it. The others wait for rank 0 in a blocking receive, which
 * sleeps: a rank waiting in gs_barrier on the host segment yields in a loop, and three such
 * took about a third of a core each from the copy.
 */
gs_status_t gs_bench_floor_setup(gs_comm_t comm, int rank, int nranks, gs_bench_floor_t *out)
{
    gs_allreduce_opts_t opts = GS_ALLREDUCE_OPTS_INIT;
    gs_comm_stats_t st = GS_COMM_STATS_INIT;
    float one = 1.0f;
    uint8_t done = 1;
    gs_status_t status;

    memset(out, 0, sizeof(*out));
    if (nranks < 2) {
        out->why = "one rank";
        return GS_OK;
    }
    opts.algo = GS_ALGO_RING;
    status = gs_allreduce_ex(comm, &one, &one, 1, GS_DTYPE_F32, GS_OP_SUM, &opts);
    if (status == GS_OK) {
        status = gs_comm_stats(comm, &st);
    }
    if (status != GS_OK) {
        return status;
    }
    if (st.traffic_bytes[GS_COLL_TYPE_ALLREDUCE] == 0) {
        out->why = "the ranks do not all share one host's memory: several hosts, or GS_SHM=0";
        return GS_OK;
    }
    if (rank != 0) {
        return gs_recv(comm, &done, 1, GS_DTYPE_U8, 0, FLOOR_TAG);
    }
    {
        const gs_status_t measured = gs_bench_floor_measure(out);

        out->why = (measured == GS_OK) ? NULL : gs_strerror(measured);
    }
    for (int r = 1; (r < nranks) && (status == GS_OK); r++) {
        status = gs_send(comm, &done, 1, GS_DTYPE_U8, r, FLOOR_TAG);
    }
    return status;
}

double gs_bench_floor_frac(const gs_bench_floor_t *fl, uint64_t traffic, double time_us)
{
    if ((traffic == 0) || (fl->traffic_bps <= 0.0) || (time_us <= 0.0)) {
        return -1.0;
    }
    return (double)traffic / fl->traffic_bps / (time_us * 1e-6);
}

void gs_bench_floor_print(const gs_bench_floor_t *fl, FILE *f)
{
    if (fl->copy_bps <= 0.0) {
        fprintf(f, "# memory floor: not measured (%s); the floor column shows -\n",
                (fl->why != NULL) ? fl->why : "no rate");
        return;
    }
    fprintf(f,
            "# memory floor: %s memcpy %.1f GB/s (%.1f GB/s of traffic), measured in this run; "
            "floor = traffic at that rate / time\n",
            (fl->threads > 1) ? "two-thread" : "one-thread", fl->copy_bps / 1e9,
            fl->traffic_bps / 1e9);
}
