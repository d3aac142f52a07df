/* SPDX-License-Identifier: Apache-2.0 */
/*
 * gs_comm_split and gs_comm_dup: children of a communicator, bootstrapped
 * over the parent (two all-gathers) and connected as any communicator is
 * (gs__comm_transport_init, gs__comm_start).
 */
#include <stdlib.h>
#include <string.h>

#include "api/comm_impl.h"
#include "core/error.h"
#include "core/log.h"
#include "core/socket.h"

typedef struct split_member {
    int key;
    int parent_rank;
} split_member_t;

static int split_member_cmp(const void *a, const void *b)
{
    const split_member_t *x = (const split_member_t *)a;
    const split_member_t *y = (const split_member_t *)b;

    if (x->key != y->key) {
        return (x->key < y->key) ? -1 : 1;
    }
    return (x->parent_rank < y->parent_rank) ? -1 : (x->parent_rank > y->parent_rank);
}

/*
 * Two all-gathers over the parent: first (color, key) so that every rank
 * knows its group, rank and size; then, once each child transport listens,
 * the transport addresses. Ranks whose transport failed to start publish an
 * empty address, which fails their group's connect quickly instead of
 * letting it wait for the deadline.
 */
static gs_status_t comm_split(const char *fn, gs_comm_t comm, int color, int key,
                              gs_comm_t *newcomm_out)
{
    int32_t mine[2];
    int32_t *ck = NULL;
    char(*all_addrs)[GS_SOCK_ADDR_MAX] = NULL;
    char(*addrs)[GS_SOCK_ADDR_MAX] = NULL;
    uint64_t *hosts = NULL;
    char my_addr[GS_SOCK_ADDR_MAX];
    split_member_t *members = NULL;
    gs_comm_t child = NULL;
    gs_status_t status;
    gs_status_t local = GS_OK;
    uint32_t seq;
    int n = 0;

    if ((comm == NULL) || (newcomm_out == NULL)) {
        return gs__error_set(GS_ERR_INVALID_ARG, "%s: %s is NULL", fn,
                             comm == NULL ? "comm" : "newcomm_out");
    }
    seq = atomic_fetch_add(&comm->split_seq, 1);
    mine[0] = (color < 0) ? -1 : color;
    mine[1] = key;
    ck = malloc((size_t)comm->size * sizeof(mine));
    all_addrs = calloc((size_t)comm->size, GS_SOCK_ADDR_MAX);
    members = malloc((size_t)comm->size * sizeof(*members));
    if ((ck == NULL) || (all_addrs == NULL) || (members == NULL)) {
        status = gs__error_set(GS_ERR_NO_MEMORY, "%s: out of memory", fn);
        goto out; /* the other ranks will fail on their deadline */
    }
    status = gs_allgather(comm, mine, ck, 2, GS_DTYPE_I32);
    if (status != GS_OK) {
        goto out;
    }
    memset(my_addr, 0, sizeof(my_addr));
    if (mine[0] >= 0) {
        for (int r = 0; r < comm->size; r++) {
            if (ck[2 * r] == mine[0]) {
                members[n].key = ck[2 * r + 1];
                members[n].parent_rank = r;
                n++;
            }
        }
        qsort(members, (size_t)n, sizeof(*members), split_member_cmp);
        child = gs__comm_alloc();
        if (child == NULL) {
            local = GS_ERR_NO_MEMORY;
        } else {
            child->cfg = comm->cfg;
            child->sel.policy = comm->sel.policy;
            child->job_id = comm->job_id;
            child->comm_id =
                gs__hash64(&mine[0], sizeof(mine[0]), comm->comm_id ^ ((uint64_t)seq << 32));
            child->size = n;
            for (int i = 0; i < n; i++) {
                if (members[i].parent_rank == comm->rank) {
                    child->rank = i;
                }
            }
            child->cfg.rank = child->rank;
            child->cfg.world_size = n;
            local = gs__comm_transport_init(child);
            if (local == GS_OK) {
                local = gs__tp_get_address(&child->tr, my_addr, sizeof(my_addr));
            }
            if (local != GS_OK) {
                my_addr[0] = '\0';
            }
        }
    }
    /* Everyone takes part in the second exchange, even after a local error. */
    status = gs_allgather(comm, my_addr, all_addrs, GS_SOCK_ADDR_MAX, GS_DTYPE_U8);
#ifdef GS_WITH_CUDA
    /* A parent with NCCL splits its NCCL communicator too (every parent
     * rank takes part, as ncclCommSplit needs). */
    if (status == GS_OK) {
        status = gs__comm_dev_split(comm, (local == GS_OK) ? child : NULL, mine[0], key);
    }
#endif
    if ((status != GS_OK) || (mine[0] < 0)) {
        goto out;
    }
    if (local != GS_OK) {
        status = local;
        goto out;
    }
    addrs = calloc((size_t)n, GS_SOCK_ADDR_MAX);
    hosts = calloc((size_t)n, sizeof(*hosts));
    if ((addrs == NULL) || (hosts == NULL)) {
        status = gs__error_set(GS_ERR_NO_MEMORY, "%s: out of memory", fn);
        goto out;
    }
    for (int i = 0; i < n; i++) {
        /* The parent's host table already knows every member's host. */
        hosts[i] = (comm->actx.hosts.ids != NULL) ? comm->actx.hosts.ids[members[i].parent_rank]
                                                  : (uint64_t)members[i].parent_rank + 1;
        memcpy(addrs[i], all_addrs[members[i].parent_rank], GS_SOCK_ADDR_MAX);
        addrs[i][GS_SOCK_ADDR_MAX - 1] = '\0';
        if (addrs[i][0] == '\0') {
            status = gs__error_set(GS_ERR_PEER_FAILED,
                                   "%s: rank %d (parent rank %d) could not create its endpoint "
                                   "for color %d",
                                   fn, i, members[i].parent_rank, mine[0]);
            goto out;
        }
    }
    status = gs__comm_start(child, addrs, hosts);
out:
    if ((status == GS_OK) && (local == GS_OK) && (child != NULL)) {
        GS_INFO(INIT, "split: color %d rank %d of %d", mine[0], child->rank, child->size);
        *newcomm_out = child;
    } else if (status == GS_OK) {
        *newcomm_out = GS_COMM_NULL; /* color < 0 */
    } else if (child != NULL) {
        gs__comm_free(child); /* and its transport */
    }
    free(ck);
    free(all_addrs);
    free(members);
    free(addrs);
    free(hosts);
    return status;
}

gs_status_t gs_comm_split(gs_comm_t comm, int color, int key, gs_comm_t *newcomm_out)
{
    return comm_split("gs_comm_split", comm, color, key, newcomm_out);
}

/*
 * A split where every rank passes color 0 and its rank as key: the same
 * ranks in the same order, the parent's resolved configuration, and a
 * transport instance of its own (new connections, a comm id derived from
 * the parent's and its split count), so no message of one can match a
 * receive of the other.
 */
gs_status_t gs_comm_dup(gs_comm_t comm, gs_comm_t *newcomm_out)
{
    if ((comm == NULL) || (newcomm_out == NULL)) {
        return gs__error_set(GS_ERR_INVALID_ARG, "gs_comm_dup: %s is NULL",
                             comm == NULL ? "comm" : "newcomm_out");
    }
    return comm_split("gs_comm_dup", comm, 0, comm->rank, newcomm_out);
}
