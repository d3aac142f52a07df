/* SPDX-License-Identifier: Apache-2.0 */
/*
 * stats_check: traffic statistics through the public API, under gsrun with
 * GS_ALGO=allreduce:ring (run_stats.sh sets it, with GS_STATS_FILE). Checks:
 *
 *   args    gs_comm_stats()/gs_comm_peer_stats() reject NULL, a size field
 *           that no version of the struct has, and peers out of range with
 *           GS_ERR_INVALID_ARG and a sentence naming the problem; outputs
 *           stay unwritten.
 *   ring    K ring all-reduces of N bytes (N a multiple of the world size n):
 *           each rank sends exactly K * 2(n-1)/n * N bytes to its right
 *           neighbour and receives as much from its left one, and exchanges
 *           nothing with anyone else; the all-reduce row counts K calls,
 *           K * N bytes and last_algo "ring"; an all-to-all then records
 *           "direct".
 *   wait    rank 0 sleeps 300 ms before a (direct) all-to-all: every other
 *           rank's wait charged to peer 0 grows by at least 250 ms and more
 *           than its wait on any other peer; wait_ns is the sum over peers.
 *   tick    with GS_STATS_INTERVAL_MS set: a few calls spaced further apart
 *           than the interval, so that periodic lines are due (run_stats.sh
 *           checks them in the file).
 *
 * Prints "N passed, M failed"; exit status 1 when any check failed.
 * usage: gsrun -n N stats_check [--verbose]
 */
#include <gradsync/gradsync.h>

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "check_report.h"

#define RING_ITERS 3
#define RING_COUNT_PER_RANK 3001 /* f32 elements per rank: N = 4 * 3001 * n bytes */
#define DELAY_MS 300
#define DELAY_MIN_MS 250

static int g_size = 1;

static void check(const char *label, int ok, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void check(const char *label, int ok, const char *fmt, ...)
{
    char msg[512];
    va_list ap;

    if (ok) {
        pass(label);
        return;
    }
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    fail(label, "%s", msg);
}

/* A call must fail with GS_ERR_INVALID_ARG and a last error containing @p word. */
static void expect_invalid(const char *label, gs_status_t got, const char *word)
{
    const char *err = gs_last_error();

    check(label, (got == GS_ERR_INVALID_ARG) && (strcasestr(err, word) != NULL),
          "returned %s with '%s', expected GS_ERR_INVALID_ARG mentioning '%s'", gs_status_name(got),
          err, word);
}

static void must(const char *what, gs_status_t status)
{
    if (status != GS_OK) {
        printf("FAIL rank %d %s: %s: %s\n", g_rank, what, gs_status_name(status), gs_last_error());
        fflush(stdout);
        exit(1);
    }
}

static void sleep_ms(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};

    while (nanosleep(&ts, &ts) != 0) {
    }
}

static void read_peers(gs_comm_t comm, gs_peer_stats_t *out)
{
    for (int p = 0; p < g_size; p++) {
        gs_peer_stats_t s = GS_PEER_STATS_INIT;
        must("gs_comm_peer_stats", gs_comm_peer_stats(comm, p, &s));
        out[p] = s;
    }
}

static void check_args(gs_comm_t comm)
{
    gs_comm_stats_t cs = GS_COMM_STATS_INIT;
    gs_peer_stats_t ps = GS_PEER_STATS_INIT;
    gs_peer_stats_t untouched;

    expect_invalid("stats: NULL comm", gs_comm_stats(GS_COMM_NULL, &cs), "comm is NULL");
    expect_invalid("stats: NULL out", gs_comm_stats(comm, NULL), "stats_out is NULL");
    cs.size = 0;
    expect_invalid("stats: size 0", gs_comm_stats(comm, &cs), "GS_COMM_STATS_INIT");
    cs.size = 24;
    expect_invalid("stats: size too small", gs_comm_stats(comm, &cs), "size is 24");
    cs.size = (size_t)1 << 40;
    expect_invalid("stats: garbage size", gs_comm_stats(comm, &cs), "GS_COMM_STATS_INIT");
    check("stats: size untouched on error", cs.size == ((size_t)1 << 40), "size became %zu",
          cs.size);

    /* A caller built with a larger (future) struct gets this library's size back. */
    {
        unsigned char big[sizeof(gs_comm_stats_t) + 64];
        gs_comm_stats_t *bs = (gs_comm_stats_t *)(void *)big;
        memset(big, 0xab, sizeof(big));
        bs->size = sizeof(big);
        must("gs_comm_stats(larger struct)", gs_comm_stats(comm, bs));
        check("stats: larger struct",
              (bs->size == sizeof(gs_comm_stats_t)) && (bs->nranks == g_size) &&
                  (bs->rank == g_rank) && (big[sizeof(gs_comm_stats_t)] == 0xab),
              "size %zu nranks %d rank %d tail 0x%02x", bs->size, bs->nranks, bs->rank,
              big[sizeof(gs_comm_stats_t)]);
    }

    expect_invalid("peer stats: NULL comm", gs_comm_peer_stats(GS_COMM_NULL, 0, &ps),
                   "comm is NULL");
    expect_invalid("peer stats: NULL out", gs_comm_peer_stats(comm, 0, NULL), "stats_out is NULL");
    ps.peer = 77;
    untouched = ps;
    expect_invalid("peer stats: peer -1", gs_comm_peer_stats(comm, -1, &ps),
                   "peer -1 is out of range");
    expect_invalid("peer stats: peer == size", gs_comm_peer_stats(comm, g_size, &ps),
                   "is out of range");
    check("peer stats: output untouched on error", memcmp(&ps, &untouched, sizeof(ps)) == 0,
          "output was written");
    ps.size = 3;
    expect_invalid("peer stats: bad size", gs_comm_peer_stats(comm, 0, &ps), "GS_PEER_STATS_INIT");
    ps.size = sizeof(ps);
    must("gs_comm_peer_stats(self)", gs_comm_peer_stats(comm, g_rank, &ps));
    check("peer stats: self is empty",
          (ps.peer == g_rank) && (ps.bytes_sent == 0) && (ps.bytes_received == 0) &&
              (ps.msgs_sent == 0) && (ps.send_wait_ns == 0) && (ps.recv_wait_ns == 0),
          "peer %d sent %llu received %llu", ps.peer, (unsigned long long)ps.bytes_sent,
          (unsigned long long)ps.bytes_received);
}

static void check_ring(gs_comm_t comm)
{
    const size_t count = (size_t)RING_COUNT_PER_RANK * (size_t)g_size;
    const uint64_t nbytes = (uint64_t)count * sizeof(float);
    const uint64_t want =
        (uint64_t)RING_ITERS * 2u * (uint64_t)(g_size - 1) * nbytes / (uint64_t)g_size;
    const int right = (g_rank + 1) % g_size;
    const int left = (g_rank + g_size - 1) % g_size;
    gs_peer_stats_t *before = calloc((size_t)g_size, sizeof(*before));
    gs_peer_stats_t *after = calloc((size_t)g_size, sizeof(*after));
    gs_comm_stats_t s0 = GS_COMM_STATS_INIT;
    gs_comm_stats_t s1 = GS_COMM_STATS_INIT;
    float *buf = calloc(count, sizeof(float));

    if ((before == NULL) || (after == NULL) || (buf == NULL)) {
        fail("ring", "out of memory");
        exit(1);
    }
    must("gs_barrier", gs_barrier(comm));
    must("gs_comm_stats", gs_comm_stats(comm, &s0));
    read_peers(comm, before);
    for (int k = 0; k < RING_ITERS; k++) {
        must("gs_allreduce", gs_allreduce(comm, buf, buf, count, GS_DTYPE_F32, GS_OP_SUM));
    }
    must("gs_comm_stats", gs_comm_stats(comm, &s1));
    read_peers(comm, after);

    {
        const gs_coll_stats_t *a0 = &s0.coll[GS_COLL_TYPE_ALLREDUCE];
        const gs_coll_stats_t *a1 = &s1.coll[GS_COLL_TYPE_ALLREDUCE];
        check("ring: allreduce calls", a1->ops - a0->ops == RING_ITERS, "%llu calls counted",
              (unsigned long long)(a1->ops - a0->ops));
        check("ring: allreduce bytes", a1->bytes - a0->bytes == RING_ITERS * nbytes,
              "%llu bytes counted, expected %llu", (unsigned long long)(a1->bytes - a0->bytes),
              (unsigned long long)(RING_ITERS * nbytes));
        check("ring: last algo", (g_size == 1) || (a1->last_algo == GS_ALGO_RING),
              "last_algo %d, expected ring (GS_ALGO=allreduce:ring)", (int)a1->last_algo);
        check("ring: busy time", a1->busy_ns > a0->busy_ns, "busy_ns did not grow");
        check("ring: ops_completed", s1.ops_completed - s0.ops_completed == RING_ITERS,
              "ops_completed grew by %llu",
              (unsigned long long)(s1.ops_completed - s0.ops_completed));
        check("ring: identity",
              (s1.rank == g_rank) && (s1.nranks == g_size) && (s1.size == sizeof(gs_comm_stats_t)),
              "rank %d nranks %d size %zu", s1.rank, s1.nranks, s1.size);
    }
    for (int p = 0; (g_size > 1) && (p < g_size); p++) {
        const uint64_t sent = after[p].bytes_sent - before[p].bytes_sent;
        const uint64_t recvd = after[p].bytes_received - before[p].bytes_received;
        const uint64_t msent = after[p].msgs_sent - before[p].msgs_sent;
        char label[64];

        snprintf(label, sizeof(label), "ring: peer %d", p);
        if (g_size == 2) {
            /* left == right: that one peer gets both directions. */
            check(label,
                  (p == g_rank) ? (sent == 0 && recvd == 0) : (sent == want && recvd == want),
                  "sent %llu received %llu, expected %llu each way to/from the neighbour",
                  (unsigned long long)sent, (unsigned long long)recvd, (unsigned long long)want);
            continue;
        }
        check(label,
              (sent == ((p == right) ? want : 0)) && (recvd == ((p == left) ? want : 0)) &&
                  ((p == right) ? (msent > 0) : (msent == 0)) && (after[p].peer == p),
              "sent %llu (%llu msgs) received %llu; expected %llu to the right neighbour %d only "
              "and %llu from the left neighbour %d only",
              (unsigned long long)sent, (unsigned long long)msent, (unsigned long long)recvd,
              (unsigned long long)(p == right ? want : 0), right,
              (unsigned long long)(p == left ? want : 0), left);
    }

    /* Another kind records its own algorithm, and leaves the all-reduce row alone. */
    must("gs_alltoall", gs_alltoall(comm, buf, buf, RING_COUNT_PER_RANK, GS_DTYPE_F32));
    must("gs_comm_stats", gs_comm_stats(comm, &s0));
    check("alltoall: counted",
          (s0.coll[GS_COLL_TYPE_ALLTOALL].ops >= 1) &&
              (s0.coll[GS_COLL_TYPE_ALLREDUCE].ops == s1.coll[GS_COLL_TYPE_ALLREDUCE].ops),
          "alltoall ops %llu", (unsigned long long)s0.coll[GS_COLL_TYPE_ALLTOALL].ops);
    check("alltoall: last algo",
          (g_size == 1) || (s0.coll[GS_COLL_TYPE_ALLTOALL].last_algo == GS_ALGO_DIRECT),
          "last_algo %d", (int)s0.coll[GS_COLL_TYPE_ALLTOALL].last_algo);
    free(before);
    free(after);
    free(buf);
}

static void check_wait(gs_comm_t comm)
{
    gs_peer_stats_t *before = calloc((size_t)g_size, sizeof(*before));
    gs_peer_stats_t *after = calloc((size_t)g_size, sizeof(*after));
    float *buf = calloc((size_t)g_size * 16, sizeof(float));
    gs_comm_stats_t cs = GS_COMM_STATS_INIT;
    uint64_t sum = 0;

    if ((before == NULL) || (after == NULL) || (buf == NULL)) {
        fail("wait", "out of memory");
        exit(1);
    }
    must("gs_barrier", gs_barrier(comm));
    read_peers(comm, before);
    if (g_rank == 0) {
        sleep_ms(DELAY_MS);
    }
    must("gs_alltoall", gs_alltoall(comm, buf, buf, 16, GS_DTYPE_F32));
    read_peers(comm, after);
    must("gs_comm_stats", gs_comm_stats(comm, &cs));
    for (int p = 0; p < g_size; p++) {
        sum += after[p].send_wait_ns + after[p].recv_wait_ns;
    }
    check("wait: wait_ns is the sum over peers", cs.wait_ns == sum, "wait_ns %llu, sum %llu",
          (unsigned long long)cs.wait_ns, (unsigned long long)sum);
    if (g_rank != 0) {
        const uint64_t w0 = (after[0].send_wait_ns + after[0].recv_wait_ns) -
                            (before[0].send_wait_ns + before[0].recv_wait_ns);
        check("wait: charged to the late rank", w0 >= (uint64_t)DELAY_MIN_MS * 1000000u,
              "waited %.1f ms on rank 0, which joined %d ms late (expected >= %d ms)",
              (double)w0 / 1e6, DELAY_MS, DELAY_MIN_MS);
        for (int p = 1; p < g_size; p++) {
            if (p == g_rank) {
                continue;
            }
            const uint64_t wp = (after[p].send_wait_ns + after[p].recv_wait_ns) -
                                (before[p].send_wait_ns + before[p].recv_wait_ns);
            check("wait: late rank is the slowest", wp < w0,
                  "waited %.1f ms on peer %d but %.1f ms on the late rank 0", (double)wp / 1e6, p,
                  (double)w0 / 1e6);
        }
    }
    free(before);
    free(after);
    free(buf);
}

static void do_ticks(gs_comm_t comm)
{
    const char *iv = getenv("GS_STATS_INTERVAL_MS");
    const int interval = (iv != NULL) ? atoi(iv) : 0;
    int x = g_rank;

    if ((interval <= 0) || (interval > 1000)) {
        return;
    }
    for (int k = 0; k < 3; k++) {
        sleep_ms(interval + 20);
        must("gs_allreduce", gs_allreduce(comm, &x, &x, 1, GS_DTYPE_I32, GS_OP_MAX));
    }
}

int main(int argc, char **argv)
{
    gs_comm_t comm = GS_COMM_NULL;

    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--verbose") == 0) {
            g_verbose = 1;
        } else {
            fprintf(stderr, "usage: stats_check [--verbose]\n");
            return 2;
        }
    }
    must("gs_comm_init_env", gs_comm_init_env(&comm, NULL));
    must("gs_comm_rank", gs_comm_rank(comm, &g_rank));
    must("gs_comm_size", gs_comm_size(comm, &g_size));

    check_args(comm);
    check_ring(comm);
    if (g_size > 1) {
        check_wait(comm);
    }
    do_ticks(comm);
    must("gs_barrier", gs_barrier(comm));
    must("gs_comm_destroy", gs_comm_destroy(comm));
    printf("rank %d: %ld passed, %ld failed\n", g_rank, g_passed, g_failed);
    return (g_failed == 0) ? 0 : 1;
}
