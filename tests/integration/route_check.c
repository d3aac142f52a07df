/* SPDX-License-Identifier: Apache-2.0 */
/*
 * route_check: the ring, the chain and the hierarchical all-reduce follow
 * the host-grouped order. Run under run_hosts.sh with the same host list as
 * its argument (HOSTS: one name per rank, as GS_HOST_ID). From the list it
 * computes the order the library should use (hosts by lowest rank, each
 * host's ranks ascending) and checks, with gs_comm_peer_stats(), which peers
 * each rank actually sent to during one collective:
 *   ring all-reduce, all-gather, reduce-scatter: only the next rank in order;
 *   chain broadcast (GS_ALGO=broadcast:chain): only the next rank in order;
 *   hier all-reduce (hosts of equal size): only the next rank of its own
 *     host, and the rank with its local rank on the next host.
 * It also checks the all-reduce results. Prints one line per violation.
 *   route_check HOSTS
 * Exit 0 when every rank passed, 1 otherwise, 2 for bad arguments.
 */
#include <gradsync/gradsync.h>

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_RANKS 64
#define COUNT 100003

static int g_rank;
static int g_size;
static int g_order[MAX_RANKS];
static int g_pos[MAX_RANKS];
static int g_host[MAX_RANKS];   /* host index (by lowest rank) of each rank */
static int g_local[MAX_RANKS];  /* local rank */
static int g_nlocal[MAX_RANKS]; /* ranks on each host */

#define CHECK(_call)                                                                               \
    do {                                                                                           \
        gs_status_t _s = (_call);                                                                  \
        if (_s != GS_OK) {                                                                         \
            fprintf(stderr, "rank %d: %s failed: %s: %s\n", g_rank, #_call, gs_status_name(_s),    \
                    gs_last_error());                                                              \
            return 1;                                                                              \
        }                                                                                          \
    } while (0)

/* The host-grouped order of the list "a,b,a,b" (as algo_hosts.c builds it). */
static int parse_hosts(const char *list)
{
    char names[MAX_RANKS][32];
    int nhosts = 0;
    int n = 0;
    int p = 0;
    const char *s = list;

    while ((s != NULL) && (n < MAX_RANKS)) {
        const char *end = strchr(s, ',');
        const size_t len = (end != NULL) ? (size_t)(end - s) : strlen(s);
        if ((len == 0) || (len >= sizeof(names[0]))) {
            return -1;
        }
        memcpy(names[n], s, len);
        names[n][len] = '\0';
        g_host[n] = -1;
        for (int r = 0; r < n; r++) {
            if (strcmp(names[r], names[n]) == 0) {
                g_host[n] = g_host[r];
            }
        }
        if (g_host[n] < 0) {
            g_host[n] = nhosts++;
        }
        n++;
        s = (end != NULL) ? end + 1 : NULL;
    }
    for (int h = 0; h < nhosts; h++) {
        g_nlocal[h] = 0;
        for (int r = 0; r < n; r++) {
            if (g_host[r] == h) {
                g_local[r] = g_nlocal[h]++;
                g_pos[r] = p;
                g_order[p++] = r;
            }
        }
    }
    return n;
}

static void read_sent(gs_comm_t comm, uint64_t *sent)
{
    for (int peer = 0; peer < g_size; peer++) {
        gs_peer_stats_t ps = GS_PEER_STATS_INIT;
        sent[peer] = (gs_comm_peer_stats(comm, peer, &ps) == GS_OK) ? ps.bytes_sent : UINT64_MAX;
    }
}

/* Every peer that got bytes between @p before and now must be allowed[peer]. */
static int check_peers(gs_comm_t comm, const uint64_t *before, const int *allowed, const char *what)
{
    uint64_t after[MAX_RANKS];
    int bad = 0;
    int any = 0;

    read_sent(comm, after);
    for (int peer = 0; peer < g_size; peer++) {
        const uint64_t d = after[peer] - before[peer];
        if ((after[peer] == UINT64_MAX) || ((d > 0) && !allowed[peer])) {
            printf("FAIL rank %d: %s sent %llu bytes to rank %d, which is not its neighbour in "
                   "the host-grouped order\n",
                   g_rank, what, (unsigned long long)d, peer);
            bad = 1;
        }
        any |= (d > 0);
    }
    if (!any && (g_size > 1)) {
        printf("FAIL rank %d: %s sent nothing (are peer statistics counted?)\n", g_rank, what);
        bad = 1;
    }
    return bad;
}

int main(int argc, char **argv)
{
    gs_allreduce_opts_t ring = GS_ALLREDUCE_OPTS_INIT;
    gs_allreduce_opts_t hier = GS_ALLREDUCE_OPTS_INIT;
    uint64_t before[MAX_RANKS];
    int allowed[MAX_RANKS];
    float *a = NULL;
    float *b = NULL;
    gs_comm_t comm;
    int fails = 0;
    int total = 0;
    int n;
    int next;
    int equal_hosts = 1;

    if (argc != 2) {
        fprintf(stderr, "usage: route_check HOSTS\n");
        return 2;
    }
    n = parse_hosts(argv[1]);
    CHECK(gs_comm_init_env(&comm, NULL));
    CHECK(gs_comm_rank(comm, &g_rank));
    CHECK(gs_comm_size(comm, &g_size));
    if ((n != g_size) || (n > MAX_RANKS)) {
        fprintf(stderr, "rank %d: HOSTS names %d ranks, the world has %d\n", g_rank, n, g_size);
        return 2;
    }
    a = malloc((size_t)COUNT * (size_t)n * sizeof(float));
    b = malloc((size_t)COUNT * (size_t)n * sizeof(float));
    if ((a == NULL) || (b == NULL)) {
        return 1;
    }
    next = g_order[(g_pos[g_rank] + 1) % n];
    memset(allowed, 0, sizeof(allowed));
    allowed[next] = 1;

    for (size_t i = 0; i < COUNT; i++) {
        a[i] = (float)(g_rank + 1);
    }
    ring.algo = GS_ALGO_RING;
    read_sent(comm, before);
    CHECK(gs_allreduce_ex(comm, a, b, COUNT, GS_DTYPE_F32, GS_OP_SUM, &ring));
    fails += check_peers(comm, before, allowed, "ring all-reduce");
    fails += (b[COUNT - 1] != (float)(n * (n + 1) / 2));

    read_sent(comm, before);
    CHECK(gs_allgather(comm, a, b, COUNT, GS_DTYPE_F32));
    fails += check_peers(comm, before, allowed, "ring all-gather");

    read_sent(comm, before);
    CHECK(gs_reduce_scatter(comm, b, a, COUNT, GS_DTYPE_F32, GS_OP_SUM));
    fails += check_peers(comm, before, allowed, "ring reduce-scatter");

    /* Chain broadcast from the rank at position 0: everyone but the last sends. */
    read_sent(comm, before);
    CHECK(gs_broadcast(comm, b, COUNT, GS_DTYPE_F32, g_order[0]));
    if (g_pos[g_rank] != n - 1) {
        fails += check_peers(comm, before, allowed, "chain broadcast");
    }

    for (int r = 0; r < n; r++) {
        equal_hosts &= (g_nlocal[g_host[r]] == g_nlocal[g_host[0]]);
    }
    if (equal_hosts && (g_nlocal[g_host[0]] > 1) && (g_nlocal[g_host[0]] < n)) {
        const int h = g_host[g_rank];
        const int m = g_nlocal[h];
        const int first = g_pos[g_rank] - g_local[g_rank];
        const int next_host = (h + 1) % (n / m);

        memset(allowed, 0, sizeof(allowed));
        allowed[g_order[first + (g_local[g_rank] + 1) % m]] = 1;
        allowed[g_order[next_host * m + g_local[g_rank]]] = 1;
        hier.algo = GS_ALGO_HIERARCHICAL;
        for (size_t i = 0; i < COUNT; i++) {
            a[i] = (float)(g_rank + 1);
        }
        read_sent(comm, before);
        CHECK(gs_allreduce_ex(comm, a, b, COUNT, GS_DTYPE_F32, GS_OP_SUM, &hier));
        fails += check_peers(comm, before, allowed, "hier all-reduce");
        fails += (b[0] != (float)(n * (n + 1) / 2)) || (b[COUNT - 1] != b[0]);
    }

    CHECK(gs_allreduce(comm, &fails, &total, 1, GS_DTYPE_I32, GS_OP_SUM));
    if (g_rank == 0) {
        printf("route_check: %d ranks on hosts %s: %s (%d failures)\n", n, argv[1],
               (total == 0) ? "PASS" : "FAIL", total);
    }
    free(a);
    free(b);
    CHECK(gs_comm_destroy(comm));
    return (total == 0) ? 0 : 1;
}
