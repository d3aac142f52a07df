/* SPDX-License-Identifier: Apache-2.0 */
/*
 * gs-bench --stats (gs_bench_stats.h): each rank's slowest link, the most
 * waited-on rank, as text or JSON. Moved out of gs_bench.c, which had
 * grown past a screenful of concerns.
 */
#include "gs_bench_stats.h"

#include <inttypes.h>
#include <stdbool.h>
#include <stdlib.h>

/* What each rank contributes: its slowest peer, then its wait on every peer. */
enum {
    ST_PEER,      /* the peer this rank waited on longest, -1 when none */
    ST_RECV_WAIT, /* ns blocked until a message from it arrived */
    ST_SEND_WAIT, /* ns blocked until a send to it finished */
    ST_SENT,      /* bytes sent to it */
    ST_RECEIVED,  /* bytes received from it */
    ST_BUSY,      /* ns this rank spent in collectives */
    ST_WAIT,      /* ns this rank spent blocked on any peer */
    ST_FIXED      /* then one wait (ns) per peer */
};

gs_status_t gs_bench_stats_gather(gs_comm_t comm, int rank, int nranks, int64_t **all_out)
{
    const size_t n = (size_t)nranks;
    const size_t width = ST_FIXED + n;
    int64_t *mine = calloc(width, sizeof(int64_t));
    int64_t *all = calloc(width * n, sizeof(int64_t));
    gs_comm_stats_t cs = GS_COMM_STATS_INIT;
    gs_status_t status = GS_OK;

    if ((mine == NULL) || (all == NULL)) {
        free(mine);
        free(all);
        return GS_ERR_NO_MEMORY;
    }
    mine[ST_PEER] = -1;
    for (int p = 0; (p < nranks) && (status == GS_OK); p++) {
        gs_peer_stats_t ps = GS_PEER_STATS_INIT;

        status = gs_comm_peer_stats(comm, p, &ps);
        mine[ST_FIXED + p] = (int64_t)(ps.recv_wait_ns + ps.send_wait_ns);
        if ((p != rank) &&
            ((mine[ST_PEER] < 0) || (mine[ST_FIXED + p] > mine[ST_FIXED + mine[ST_PEER]]))) {
            mine[ST_PEER] = p;
            mine[ST_RECV_WAIT] = (int64_t)ps.recv_wait_ns;
            mine[ST_SEND_WAIT] = (int64_t)ps.send_wait_ns;
            mine[ST_SENT] = (int64_t)ps.bytes_sent;
            mine[ST_RECEIVED] = (int64_t)ps.bytes_received;
        }
    }
    if (status == GS_OK) {
        status = gs_comm_stats(comm, &cs);
    }
    mine[ST_BUSY] = (int64_t)cs.busy_ns;
    mine[ST_WAIT] = (int64_t)cs.wait_ns;
    if (status == GS_OK) {
        status = gs_allgather(comm, mine, all, width, GS_DTYPE_I64);
    }
    free(mine);
    if (status != GS_OK) {
        free(all);
        return status;
    }
    *all_out = all;
    return GS_OK;
}

/* The rank the others waited on longest in total, and that total (ns). */
static int most_waited_on(int nranks, const int64_t *all, int64_t *total_out)
{
    const size_t width = ST_FIXED + (size_t)nranks;
    int best = -1;
    int64_t best_total = 0;

    for (int p = 0; p < nranks; p++) {
        int64_t total = 0;
        for (int r = 0; r < nranks; r++) {
            total += (r != p) ? all[(size_t)r * width + ST_FIXED + (size_t)p] : 0;
        }
        if ((best < 0) || (total > best_total)) {
            best = p;
            best_total = total;
        }
    }
    *total_out = best_total;
    return best;
}

void gs_bench_stats_text(const int64_t *all, int nranks, FILE *f)
{
    const size_t width = ST_FIXED + (size_t)nranks;
    int worst = -1;
    int64_t worst_wait = -1;
    int64_t waited_total = 0;
    int waited_rank = most_waited_on(nranks, all, &waited_total);

    fprintf(f, "#\n# --stats: time each rank spent blocked waiting on one peer, whole run "
               "(docs/stats.md)\n");
    fprintf(f, "# %5s %5s %10s %10s %10s %7s %12s %12s\n", "rank", "peer", "wait", "recv-wait",
            "send-wait", "of busy", "sent", "received");
    fprintf(f, "# %5s %5s %10s %10s %10s %7s %12s %12s\n", "", "", "(ms)", "(ms)", "(ms)", "",
            "(MB)", "(MB)");
    for (int r = 0; r < nranks; r++) {
        const int64_t *row = &all[(size_t)r * width];
        const double wait = (double)(row[ST_RECV_WAIT] + row[ST_SEND_WAIT]);
        if (row[ST_PEER] < 0) {
            fprintf(f, "# %5d %5s\n", r, "-");
            continue;
        }
        fprintf(f, "# %5d %5d %10.2f %10.2f %10.2f %6.1f%% %12.2f %12.2f\n", r, (int)row[ST_PEER],
                wait / 1e6, (double)row[ST_RECV_WAIT] / 1e6, (double)row[ST_SEND_WAIT] / 1e6,
                row[ST_BUSY] > 0 ? 100.0 * wait / (double)row[ST_BUSY] : 0.0,
                (double)row[ST_SENT] / 1e6, (double)row[ST_RECEIVED] / 1e6);
        if (wait > (double)worst_wait) {
            worst = r;
            worst_wait = row[ST_RECV_WAIT] + row[ST_SEND_WAIT];
        }
    }
    if ((worst < 0) || (waited_rank < 0)) {
        fprintf(f, "# slowest link: none (one rank)\n#\n");
        return;
    }
    {
        const int64_t *row = &all[(size_t)worst * width];
        const bool recv = row[ST_RECV_WAIT] >= row[ST_SEND_WAIT];
        fprintf(f, "# slowest link: rank %d waited %.2f ms on rank %d (mostly %s)\n", worst,
                (double)worst_wait / 1e6, (int)row[ST_PEER],
                recv ? "for its data: that rank or the link into this one is slow"
                     : "for sends to finish: that rank reads slowly or the link is slow");
    }
    fprintf(f,
            "# most waited-on rank: %d (the other ranks waited %.2f ms on it in total; one "
            "rank waited on by all is a straggler, a single pair is a slow link)\n#\n",
            waited_rank, (double)waited_total / 1e6);
}

void gs_bench_stats_json(const int64_t *all, int nranks, FILE *f)
{
    const size_t width = ST_FIXED + (size_t)nranks;
    int64_t waited_total = 0;
    const int waited_rank = most_waited_on(nranks, all, &waited_total);

    fprintf(f,
            ",\n \"stats\": {\"most_waited_on\": %d, \"most_waited_on_ms\": %.3f, "
            "\"slowest_links\": [",
            waited_rank, (double)waited_total / 1e6);
    for (int r = 0; r < nranks; r++) {
        const int64_t *row = &all[(size_t)r * width];
        fprintf(
            f,
            "%s\n  {\"rank\": %d, \"peer\": %d, \"recv_wait_ms\": %.3f, \"send_wait_ms\": %.3f, "
            "\"sent_bytes\": %" PRId64 ", \"received_bytes\": %" PRId64 ", \"busy_ms\": %.3f, "
            "\"wait_ms\": %.3f}",
            r ? "," : "", r, (int)row[ST_PEER], (double)row[ST_RECV_WAIT] / 1e6,
            (double)row[ST_SEND_WAIT] / 1e6, row[ST_SENT], row[ST_RECEIVED],
            (double)row[ST_BUSY] / 1e6, (double)row[ST_WAIT] / 1e6);
    }
    fprintf(f, "\n ]}");
}

void gs_bench_stats_rails(gs_comm_t comm, int rank, int nranks, FILE *f)
{
    bool header = false;

    for (int p = 0; p < nranks; p++) {
        gs_peer_stats_t ps = GS_PEER_STATS_INIT;

        if ((p == rank) || (gs_comm_peer_stats(comm, p, &ps) != GS_OK) || (ps.nrails < 2)) {
            continue;
        }
        if (!header) {
            fprintf(f, "# --stats: rails of rank %d (several per peer: GS_SOCKET_IFNAME)\n", rank);
            fprintf(f, "# %5s %4s %-10s %3s %12s %12s %10s %7s\n", "peer", "rail", "interface",
                    "up", "sent", "resent", "rate", "share");
            fprintf(f, "# %5s %4s %-10s %3s %12s %12s %10s %7s\n", "", "", "", "", "(MB)", "(MB)",
                    "(MB/s)", "");
            header = true;
        }
        for (int k = 0; (k < ps.nrails) && (k < GS_RAILS_MAX); k++) {
            const gs_rail_stats_t *r = &ps.rails[k];

            fprintf(f, "# %5d %4d %-10s %3s %12.2f %12.2f %10.2f %6.1f%%\n", p, k, r->ifname,
                    r->up ? "yes" : "no", (double)r->bytes_sent / 1e6,
                    (double)r->bytes_resent / 1e6, (double)r->rate_bps / 1e6,
                    (double)r->share_ppm / 1e4);
        }
    }
    if (header) {
        fprintf(f, "#\n");
    }
}
