/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The host table of a communicator (gs__algo_hosts_t in algo.h): from the
 * 64-bit host id of every rank (exchanged at bootstrap, see core/host.h),
 * the number of hosts, this rank's local rank and size, and the
 * host-grouped order the ring, chain and tree follow.
 *
 * Order: hosts sorted by their lowest rank, each host's ranks ascending.
 * Ranks launched host by host (0,1 on A, 2,3 on B) give the identity, so
 * nothing changes for them; interleaved ranks (0,2 on A, 1,3 on B) give
 * 0 2 1 3, and the ring crosses between hosts twice instead of four times.
 * Sorting makes it O(n log n) for any world size.
 */
#include <stdlib.h>
#include <string.h>

#include "algo/ctx/ctx.h"
#include "core/error.h"

typedef struct hosts_key {
    uint64_t id;
    int rank;
} hosts_key_t;

static int hosts_key_cmp(const void *a, const void *b)
{
    const hosts_key_t *x = (const hosts_key_t *)a;
    const hosts_key_t *y = (const hosts_key_t *)b;

    if (x->id != y->id) {
        return (x->id < y->id) ? -1 : 1;
    }
    return (x->rank > y->rank) - (x->rank < y->rank);
}

/* Groups of equal ids, by the lowest rank in each group. */
static int hosts_group_cmp(const void *a, const void *b)
{
    const hosts_key_t *x = *(const hosts_key_t *const *)a;
    const hosts_key_t *y = *(const hosts_key_t *const *)b;

    return (x->rank > y->rank) - (x->rank < y->rank);
}

gs_status_t gs__algo_hosts_init(gs__algo_hosts_t *h, const uint64_t *ids, int n, int rank)
{
    const size_t un = (size_t)n;
    hosts_key_t *keys = malloc(un * sizeof(*keys));
    hosts_key_t **groups = malloc(un * sizeof(*groups));
    uint64_t *id_copy = malloc(un * sizeof(*id_copy));
    int *ints = malloc((4 * un + 1) * sizeof(int));
    gs__algo_hosts_t t;
    int ngroups = 0;
    int p = 0;

    if ((keys == NULL) || (groups == NULL) || (id_copy == NULL) || (ints == NULL)) {
        free(keys);
        free(groups);
        free(id_copy);
        free(ints);
        return gs__error_set(GS_ERR_NO_MEMORY, "out of memory for the host table of %d ranks", n);
    }
    memcpy(id_copy, ids, un * sizeof(*id_copy));
    for (int r = 0; r < n; r++) {
        keys[r].id = ids[r];
        keys[r].rank = r;
    }
    qsort(keys, un, sizeof(*keys), hosts_key_cmp);
    for (int i = 0; i < n; i++) {
        if ((i == 0) || (keys[i].id != keys[i - 1].id)) {
            groups[ngroups++] = &keys[i]; /* the group's lowest rank comes first */
        }
    }
    qsort(groups, (size_t)ngroups, sizeof(*groups), hosts_group_cmp);

    memset(&t, 0, sizeof(t));
    t.nhosts = ngroups;
    t.ids = id_copy;
    t.host_of = ints;
    t.order = ints + un;
    t.pos = ints + 2 * un;
    t.first = ints + 3 * un;
    t.min_local = n;
    for (int g = 0; g < ngroups; g++) {
        const hosts_key_t *k = groups[g];
        const hosts_key_t *end = keys + n;
        const int start = p;

        t.first[g] = p;
        for (; (k < end) && (k->id == groups[g]->id); k++) {
            t.order[p] = k->rank;
            t.pos[k->rank] = p;
            t.host_of[k->rank] = g;
            if (k->rank == rank) {
                t.local_rank = p - start;
            }
            p++;
        }
        if (p - start < t.min_local) {
            t.min_local = p - start;
        }
        if (p - start > t.max_local) {
            t.max_local = p - start;
        }
    }
    t.first[ngroups] = n;
    t.local_size = t.first[t.host_of[rank] + 1] - t.first[t.host_of[rank]];
    free(keys);
    free(groups);
    *h = t;
    return GS_OK;
}

void gs__algo_hosts_free(gs__algo_hosts_t *h)
{
    free(h->ids);
    free(h->host_of); /* one allocation holds every int array */
    memset(h, 0, sizeof(*h));
}

void gs__algo_route_hosts(gs__algo_ctx_t *ctx)
{
    ctx->route.order = ctx->hosts.order;
    ctx->route.n = ctx->size;
    ctx->route.pos = (ctx->hosts.pos != NULL) ? ctx->hosts.pos[ctx->rank] : ctx->rank;
}

int gs__route_pos_of(const gs__algo_ctx_t *ctx, int rank)
{
    if (ctx->route.order == NULL) {
        return ((rank >= 0) && (rank < ctx->size)) ? rank : -1;
    }
    if ((ctx->route.order == ctx->hosts.order) && (rank >= 0) && (rank < ctx->size)) {
        return ctx->hosts.pos[rank];
    }
    for (int p = 0; p < ctx->route.n; p++) {
        if (ctx->route.order[p] == rank) {
            return p;
        }
    }
    return -1;
}
