/* SPDX-License-Identifier: Apache-2.0 */
/*
 * rail_run: the driver of the multi-rail TCP lab (tests/net/run_rails.sh,
 * bench/net/bench_rails.sh; docs/design.md "Several rails per peer").
 * Every rank runs a loop of in-place f32 sum all-reduces of --bytes and,
 * after each, reads gs_comm_peer_stats of its ring neighbours, so that a
 * script can follow the busbw and each rail's share, rate and resent bytes
 * across a tc change or a rail that goes down. Ranks start from the launcher
 * variables (RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT, GS_*), as
 * gs_comm_init_env reads them.
 *
 *   rail_run --bytes N [--iters K | --seconds S] [--check] [--report-all]
 *
 * N takes K, M, G (binary). --iters K (default 10 without --seconds): K
 * all-reduces; --seconds S: as many as fit in S seconds (rank 0 decides,
 * every rank follows; with both, whichever ends first). Before each the
 * buffer is filled with small integers that depend on the rank, the
 * iteration and the index, so that every f32 sum is exact; --check compares
 * every element with the exact sum and exits non-zero naming the first
 * wrong one. Each iteration is: a 1-element all-reduce that carries rank
 * 0's go/stop (and lines the ranks up), the timed all-reduce, and a
 * 1-element max of the ranks' times (the time reported is the slowest
 * rank's, as gs-bench reports).
 *
 * Output (stdout, flushed after every iteration), rank 0 only (every rank
 * with --report-all):
 *   START rank R world W bytes N count C
 *   ITER i ms T busbw_MBps B t_ms W        W: CLOCK_REALTIME ms at its end
 *   RAIL peer p rail r if NAME up U bytes X resent Y rate_MBps R share S
 *                                          one per rail to each ring neighbour
 *   SUMMARY iters K median_ms T median_busbw_MBps B
 * and on every rank: RUNNING rank=R t_ms=W after the first iteration, and
 * RESULT rank=R status=NAME iters=K t_ms=W err=TEXT at the end (GS_OK, the
 * failed collective's status, or WRONG for a --check failure).
 * busbw = 2(n-1)/n * bytes / time, MB = 10^6 bytes; rate_MBps is the rail's
 * measured delivery rate, share its part of the last striped message (0..1).
 * Exit status: 0 success, 1 a gradsync error (its text on stderr), 2 usage,
 * 3 wrong results.
 */
#define _POSIX_C_SOURCE 200809L

#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <gradsync/gradsync.h>

#define PATTERN_MOD 61u

typedef struct {
    size_t bytes;
    long iters;
    double seconds;
    int check;
    int report_all;
} opts_t;

static double mono_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static long long wall_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_REALTIME, &ts);
    return (long long)ts.tv_sec * 1000LL + ts.tv_nsec / 1000000L;
}

static void usage(void)
{
    fprintf(stderr, "usage: rail_run --bytes N[K|M|G] [--iters K | --seconds S] [--check] "
                    "[--report-all]\n");
    exit(2);
}

/* A byte count with an optional K, M or G (binary) suffix; 0 when malformed. */
static size_t parse_size(const char *s)
{
    char *end = NULL;
    unsigned long long v = strtoull(s, &end, 10);

    if ((end == s) || (v == 0)) {
        return 0;
    }
    switch (*end) {
    case 'K':
    case 'k':
        v <<= 10;
        end++;
        break;
    case 'M':
    case 'm':
        v <<= 20;
        end++;
        break;
    case 'G':
    case 'g':
        v <<= 30;
        end++;
        break;
    default:
        break;
    }
    return (*end == '\0') ? (size_t)v : 0;
}

static void parse_args(int argc, char **argv, opts_t *o)
{
    int have_iters = 0;

    o->bytes = 0;
    o->iters = 10;
    o->seconds = 0.0;
    o->check = 0;
    o->report_all = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if ((strcmp(a, "--bytes") == 0) && (i + 1 < argc)) {
            o->bytes = parse_size(argv[++i]);
        } else if ((strcmp(a, "--iters") == 0) && (i + 1 < argc)) {
            o->iters = strtol(argv[++i], NULL, 10);
            have_iters = 1;
        } else if ((strcmp(a, "--seconds") == 0) && (i + 1 < argc)) {
            o->seconds = strtod(argv[++i], NULL);
        } else if (strcmp(a, "--check") == 0) {
            o->check = 1;
        } else if (strcmp(a, "--report-all") == 0) {
            o->report_all = 1;
        } else {
            usage();
        }
    }
    if ((o->seconds > 0.0) && !have_iters) {
        o->iters = -1; /* no count limit */
    }
    if ((o->bytes < sizeof(float)) || (have_iters && (o->iters < 1)) || (o->seconds < 0.0) ||
        ((o->iters < 1) && (o->seconds <= 0.0))) {
        usage();
    }
}

/* The pattern: element i of rank r at iteration it, a small integer (0..60). */
static unsigned pattern_base(size_t i, long it)
{
    return (unsigned)(((i % PATTERN_MOD) * 7u + ((size_t)it % PATTERN_MOD) * 5u) % PATTERN_MOD);
}

/* The pattern steps by 7 (mod 61) from one element to the next: no division per element
 * (4 ranks fill and check 256 MiB each on 2 cores between the timed calls). */
static unsigned step7(unsigned v)
{
    v += 7u;
    return (v >= PATTERN_MOD) ? v - PATTERN_MOD : v;
}

static void fill(float *buf, size_t count, int rank, long it)
{
    unsigned v = (pattern_base(0, it) + ((unsigned)rank % PATTERN_MOD) * 13u) % PATTERN_MOD;

    for (size_t i = 0; i < count; i++) {
        buf[i] = (float)v;
        v = step7(v);
    }
}

/* First wrong element after the sum of every rank's pattern, or count when all are right. */
static size_t verify(const float *buf, size_t count, int world, long it, float *expect_out)
{
    float table[PATTERN_MOD];

    for (unsigned m = 0; m < PATTERN_MOD; m++) {
        unsigned long sum = 0;
        for (int r = 0; r < world; r++) {
            sum += (m + ((unsigned)r % PATTERN_MOD) * 13u) % PATTERN_MOD;
        }
        table[m] = (float)sum;
    }
    unsigned m = pattern_base(0, it);
    for (size_t i = 0; i < count; i++) {
        if (buf[i] != table[m]) {
            *expect_out = table[m];
            return i;
        }
        m = step7(m);
    }
    return count;
}

static int cmp_double(const void *a, const void *b)
{
    const double x = *(const double *)a;
    const double y = *(const double *)b;

    return (x > y) - (x < y);
}

/* RAIL lines for the ring neighbours of @p rank. */
static void print_rails(gs_comm_t comm, int rank, int world)
{
    int peers[2];
    int np = 0;

    if (world < 2) {
        return;
    }
    peers[np++] = (rank + 1) % world;
    if ((rank + world - 1) % world != peers[0]) {
        peers[np++] = (rank + world - 1) % world;
    }
    for (int k = 0; k < np; k++) {
        gs_peer_stats_t ps;
        /* As GS_PEER_STATS_INIT: size set, everything else 0. */
        memset(&ps, 0, sizeof(ps));
        ps.size = sizeof(ps);
        if (gs_comm_peer_stats(comm, peers[k], &ps) != GS_OK) {
            printf("RAIL peer %d error %s\n", peers[k], gs_last_error());
            continue;
        }
        for (int r = 0; (r < ps.nrails) && (r < GS_RAILS_MAX); r++) {
            const gs_rail_stats_t *rs = &ps.rails[r];
            char name[sizeof(rs->ifname) + 1];
            memcpy(name, rs->ifname, sizeof(rs->ifname));
            name[sizeof(rs->ifname)] = '\0';
            printf("RAIL peer %d rail %d if %s up %u bytes %" PRIu64 " resent %" PRIu64
                   " rate_MBps %.3f share %.4f\n",
                   peers[k], r, (name[0] != '\0') ? name : "-", (unsigned)rs->up, rs->bytes_sent,
                   rs->bytes_resent, (double)rs->rate_bps / 1e6, (double)rs->share_ppm / 1e6);
        }
    }
}

/* Prints the RESULT line and the error text; returns the exit status for @p st. */
static int fail_collective(gs_comm_t comm, int rank, long it, const char *what, gs_status_t st)
{
    const char *err = gs_last_error();

    printf("RESULT rank=%d status=%s iters=%ld t_ms=%lld err=%s\n", rank, gs_status_name(st), it,
           wall_ms(), err);
    fflush(stdout);
    fprintf(stderr, "rail_run: rank %d: %s of iteration %ld failed: %s: %s\n", rank, what, it,
            gs_status_name(st), err);
    gs_comm_destroy(comm);
    return 1;
}

int main(int argc, char **argv)
{
    opts_t o;
    gs_comm_t comm;
    gs_status_t st;
    int rank = 0;
    int world = 1;
    float *buf;
    double *times;
    size_t count;
    long it;
    long cap;
    double t_start;

    parse_args(argc, argv, &o);
    count = o.bytes / sizeof(float);
    st = gs_comm_init_env(&comm, NULL);
    if (st != GS_OK) {
        const char *err = gs_last_error();
        printf("RESULT rank=-1 status=%s iters=0 t_ms=%lld err=%s\n", gs_status_name(st), wall_ms(),
               err);
        fprintf(stderr, "rail_run: init failed: %s: %s\n", gs_status_name(st), err);
        return 1;
    }
    gs_comm_rank(comm, &rank);
    gs_comm_size(comm, &world);
    const int report = o.report_all || (rank == 0);
    cap = (o.iters > 0) ? o.iters : 1000000;
    buf = malloc(count * sizeof(float));
    times = malloc((size_t)cap * sizeof(double));
    if ((buf == NULL) || (times == NULL)) {
        fprintf(stderr, "rail_run: out of memory\n");
        gs_comm_destroy(comm);
        return 1;
    }
    if (report) {
        printf("START rank %d world %d bytes %zu count %zu\n", rank, world, count * sizeof(float),
               count);
        fflush(stdout);
    }
    const double busf = (world > 1) ? 2.0 * (double)(world - 1) / (double)world : 0.0;
    t_start = mono_ms();
    for (it = 0;; it++) {
        int32_t stop = 0;
        if (rank == 0) {
            stop = (it >= cap) || ((o.seconds > 0.0) && (mono_ms() - t_start >= o.seconds * 1e3));
        }
        fill(buf, count, rank, it);
        st = gs_allreduce(comm, &stop, &stop, 1, GS_DTYPE_I32, GS_OP_MAX);
        if (st != GS_OK) {
            const int rc = fail_collective(comm, rank, it, "the go/stop all-reduce", st);
            free(buf);
            free(times);
            return rc;
        }
        if (stop) {
            break;
        }
        const double t0 = mono_ms();
        st = gs_allreduce(comm, buf, buf, count, GS_DTYPE_F32, GS_OP_SUM);
        double ms = mono_ms() - t0;
        if (st != GS_OK) {
            const int rc = fail_collective(comm, rank, it, "the all-reduce", st);
            free(buf);
            free(times);
            return rc;
        }
        st = gs_allreduce(comm, &ms, &ms, 1, GS_DTYPE_F64, GS_OP_MAX);
        if (st != GS_OK) {
            const int rc = fail_collective(comm, rank, it, "the time all-reduce", st);
            free(buf);
            free(times);
            return rc;
        }
        times[it] = ms;
        if (o.check) {
            float want = 0.0f;
            const size_t bad = verify(buf, count, world, it, &want);
            if (bad < count) {
                printf("RESULT rank=%d status=WRONG iters=%ld t_ms=%lld err=element %zu is %g, "
                       "expected %g\n",
                       rank, it, wall_ms(), bad, (double)buf[bad], (double)want);
                fflush(stdout);
                fprintf(stderr, "rail_run: rank %d iteration %ld: element %zu is %g, expected %g\n",
                        rank, it, bad, (double)buf[bad], (double)want);
                gs_comm_destroy(comm);
                free(buf);
                free(times);
                return 3;
            }
        }
        if (report) {
            printf("ITER %ld ms %.3f busbw_MBps %.3f t_ms %lld\n", it, ms,
                   busf * (double)(count * sizeof(float)) / (ms * 1e3), wall_ms());
            print_rails(comm, rank, world);
        }
        if (it == 0) {
            printf("RUNNING rank=%d t_ms=%lld\n", rank, wall_ms());
        }
        fflush(stdout);
    }
    if (report && (it > 0)) {
        qsort(times, (size_t)it, sizeof(double), cmp_double);
        const double med = times[it / 2];
        printf("SUMMARY iters %ld median_ms %.3f median_busbw_MBps %.3f%s\n", it, med,
               busf * (double)(count * sizeof(float)) / (med * 1e3), o.check ? " checked" : "");
    }
    printf("RESULT rank=%d status=GS_OK iters=%ld t_ms=%lld err=\n", rank, it, wall_ms());
    fflush(stdout);
    st = gs_comm_destroy(comm);
    free(buf);
    free(times);
    if (st != GS_OK) {
        fprintf(stderr, "rail_run: rank %d: destroy failed: %s: %s\n", rank, gs_status_name(st),
                gs_last_error());
        return 1;
    }
    return 0;
}
