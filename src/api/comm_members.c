/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Children made by some of a communicator's ranks only, over the parent's
 * connections: the endpoint exchange that gs_comm_shrink (the survivors)
 * and gs_comm_create_group (the ranks a caller lists) share, its bounded
 * wait, and gs_comm_create_group itself, MPI_Comm_create_group's
 * counterpart: collective over the members alone, so a framework whose
 * non-members never call (torch.distributed's new_group) still gets its
 * groups from the one rendezvous of the parent.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "api/comm_impl.h"
#include "core/clock.h"
#include "core/error.h"
#include "core/log.h"
#include "core/socket.h"

/* How long one progress call of a wait may block (the deadline is checked between). */
#define MEMBERS_POLL_NS 50000000ull
/* Salt of a group's communicator id (beside the parent's, the tag and the members). */
#define GROUP_ID_SALT 0x67726f7570ull /* "group" */

/*
 * Wait for n requests (entries with no request skipped) until all finished
 * or the deadline. Posting, testing and releasing are the algorithm
 * context's (gs__algo_isend/_irecv, gs__algo_check_len, which releases a
 * finished request, and gs__algo_release_all); the wait is not
 * gs__algo_wait_all's, whose first failure ends it and whose deadline is
 * renewed by each completion: the agreement needs every request's own
 * outcome by one fixed deadline, over a transport that may be down. Fills
 * st[i] with each one's status (GS_ERR_TIMEOUT when it did not finish) and
 * nbytes[i] with what a finished one carried; releases every request.
 * Returns GS_ERR_ABORTED when the transport was aborted, else GS_OK.
 * (Declared in comm_impl.h.)
 */
gs_status_t gs__comm_wait_each(gs_comm_t comm, const char *fn, gs__algo_req_t *reqs, size_t *nbytes,
                               gs_status_t *st, int n, uint64_t deadline)
{
    gs_status_t status = GS_OK;

    for (int i = 0; i < n; i++) {
        st[i] = GS_INPROGRESS;
        nbytes[i] = 0;
    }
    for (;;) {
        int pending = 0;
        uint64_t now;

        for (int i = 0; i < n; i++) {
            int done = 0;

            if (reqs[i].req == NULL) {
                continue;
            }
            st[i] = gs__algo_check_len(&comm->actx, &reqs[i], &done, &nbytes[i]);
            if (!done) {
                st[i] = GS_INPROGRESS;
                pending++;
            }
        }
        if (pending == 0) {
            break;
        }
        now = gs__now_ns();
        if (now >= deadline) {
            for (int i = 0; i < n; i++) {
                if (reqs[i].req != NULL) {
                    st[i] = GS_ERR_TIMEOUT;
                }
            }
            break;
        }
        if (gs__tp_progress(&comm->tr, (deadline - now > MEMBERS_POLL_NS)
                                           ? now + MEMBERS_POLL_NS
                                           : deadline) == GS_ERR_ABORTED) {
            status = gs__error_set(GS_ERR_ABORTED, "%s: the communicator was aborted", fn);
            break;
        }
    }
    gs__algo_release_all(&comm->actx, reqs, (size_t)n);
    return status;
}

/* The members' endpoint exchange (comm_impl.h): the child's transport is
 * created, the coordinator gathers every member's endpoint in new-rank
 * order over the parent's connections and hands the table out. */
gs_status_t gs__comm_members_exchange(const gs__members_t *m, gs__algo_req_t *reqs, size_t *nbytes,
                                      gs_status_t *st)
{
    gs_comm_t comm = m->comm;
    gs_comm_t child = m->child;
    const int n = comm->size;
    const uint64_t tag_addr = m->tag_addr;
    const uint64_t tag_table = m->tag_table;
    const size_t table_len = (size_t)child->size * GS_SOCK_ADDR_MAX;
    char my_addr[GS_SOCK_ADDR_MAX];
    gs_status_t local;
    gs_status_t status;
    int i = 0;

    memset(my_addr, 0, sizeof(my_addr));
    local = gs__comm_transport_init(child);
    if (local == GS_OK) {
        local = gs__tp_get_address(&child->tr, my_addr, sizeof(my_addr));
    }
    if (local != GS_OK) {
        my_addr[0] = '\0'; /* the others fail fast instead of at their deadline */
    }
    for (int p = 0; p < n; p++) {
        reqs[p].req = NULL;
    }
    if (comm->rank == m->coord) {
        /* Gather every member's endpoint in new-rank order, then hand out. */
        for (int p = 0; p < n; p++) {
            if (m->out[p]) {
                continue;
            }
            if (p == comm->rank) {
                memcpy(m->addrs[i], my_addr, GS_SOCK_ADDR_MAX);
            } else {
                status = gs__algo_irecv(&comm->actx, p, tag_addr, m->addrs[i], GS_SOCK_ADDR_MAX,
                                        &reqs[p]);
                if (status != GS_OK) {
                    gs__algo_release_all(&comm->actx, reqs, (size_t)n);
                    return status;
                }
            }
            i++;
        }
        status = gs__comm_wait_each(comm, m->fn, reqs, nbytes, st, n, m->deadline);
        if (status != GS_OK) {
            return status;
        }
        i = 0;
        for (int p = 0; p < n; p++) {
            if (m->out[p]) {
                continue;
            }
            if ((p != comm->rank) && ((st[p] != GS_OK) || (nbytes[p] != GS_SOCK_ADDR_MAX))) {
                m->addrs[i][0] = '\0';
            }
            m->addrs[i][GS_SOCK_ADDR_MAX - 1] = '\0';
            i++;
        }
        for (int p = 0; p < n; p++) {
            if (!m->out[p] && (p != comm->rank)) {
                (void)gs__algo_isend(&comm->actx, p, tag_table, m->addrs, table_len, &reqs[p]);
            }
        }
        status = gs__comm_wait_each(comm, m->fn, reqs, nbytes, st, n, m->deadline);
    } else {
        status = gs__algo_irecv(&comm->actx, m->coord, tag_table, m->addrs, table_len, &reqs[0]);
        if (status == GS_OK) {
            status = gs__algo_isend(&comm->actx, m->coord, tag_addr, my_addr, GS_SOCK_ADDR_MAX,
                                    &reqs[1]);
        }
        if (status == GS_OK) {
            status = gs__comm_wait_each(comm, m->fn, reqs, nbytes, st, 2, m->deadline);
        } else {
            gs__algo_release_all(&comm->actx, reqs, 2);
        }
        if ((status == GS_OK) && ((st[0] != GS_OK) || (nbytes[0] != table_len))) {
            status = gs__error_set((st[0] == GS_ERR_TIMEOUT) ? GS_ERR_TIMEOUT : GS_ERR_PEER_FAILED,
                                   "%s: rank %d: no endpoint table from coordinator "
                                   "rank %d (%s)",
                                   m->fn, comm->rank, m->coord, gs_status_name(st[0]));
        }
    }
    if (status != GS_OK) {
        return status;
    }
    if (local != GS_OK) {
        return gs__error_set(local, "%s: rank %d could not create its endpoint", m->fn, comm->rank);
    }
    i = 0;
    for (int p = 0; p < n; p++) {
        if (m->out[p]) {
            continue;
        }
        m->addrs[i][GS_SOCK_ADDR_MAX - 1] = '\0';
        if (m->addrs[i][0] == '\0') {
            return gs__error_set(GS_ERR_PEER_FAILED,
                                 "%s: rank %d (new rank %d) gave no endpoint for the "
                                 "new communicator",
                                 m->fn, p, i);
        }
        m->hosts[i] = (comm->actx.hosts.ids != NULL) ? comm->actx.hosts.ids[p] : (uint64_t)p + 1;
        i++;
    }
    return GS_OK;
}


/* Tags of gs_comm_create_group: the group class, a phase, the caller's tag. */
static uint64_t group_tag(int phase, uint32_t tag)
{
    return GS_TP_TAG_GROUP | ((uint64_t)(phase & 1) << 32) | (uint64_t)tag;
}

typedef struct group_task {
    gs__task_t task; /* first: the worker sees only this */
    gs__members_t m;
} group_task_t;

/* Runs on the parent's worker thread (or inline). */
static gs_status_t group_run(gs__task_t *task, void *ctx)
{
    group_task_t *g = (group_task_t *)task;
    gs_comm_t comm = (gs_comm_t)ctx;
    const int n = comm->size;
    gs__algo_req_t *reqs = calloc((size_t)n, sizeof(*reqs));
    size_t *nbytes = calloc((size_t)n, sizeof(*nbytes));
    gs_status_t *st = calloc((size_t)n, sizeof(*st));
    gs_status_t status;

    comm->actx.opname = "gs_comm_create_group";
    if ((reqs == NULL) || (nbytes == NULL) || (st == NULL)) {
        status = gs__error_set(GS_ERR_NO_MEMORY, "gs_comm_create_group: out of memory");
    } else {
        status = gs__comm_members_exchange(&g->m, reqs, nbytes, st);
    }
    free(reqs);
    free(nbytes);
    free(st);
    return status;
}

/* The caller's list, checked: sorted, distinct, in range, with this rank. */
static gs_status_t group_check(gs_comm_t comm, int nranks, const int *ranks, int *me_out)
{
    *me_out = -1;
    if ((nranks < 1) || (nranks > comm->size)) {
        return gs__error_set(GS_ERR_INVALID_ARG,
                             "gs_comm_create_group: nranks is %d; give 1 to %d ranks of the "
                             "communicator",
                             nranks, comm->size);
    }
    for (int i = 0; i < nranks; i++) {
        if ((ranks[i] < 0) || (ranks[i] >= comm->size)) {
            return gs__error_set(GS_ERR_INVALID_ARG,
                                 "gs_comm_create_group: ranks[%d] is %d, outside 0..%d", i,
                                 ranks[i], comm->size - 1);
        }
        if ((i > 0) && (ranks[i] <= ranks[i - 1])) {
            return gs__error_set(GS_ERR_INVALID_ARG,
                                 "gs_comm_create_group: ranks must increase strictly (ranks[%d] "
                                 "is %d after %d): list each member once, in rank order",
                                 i, ranks[i], ranks[i - 1]);
        }
        if (ranks[i] == comm->rank) {
            *me_out = i;
        }
    }
    if (*me_out < 0) {
        return gs__error_set(GS_ERR_INVALID_ARG,
                             "gs_comm_create_group: rank %d is not in the list; only the "
                             "members call it",
                             comm->rank);
    }
    return GS_OK;
}

gs_status_t gs_comm_create_group(gs_comm_t comm, int nranks, const int *ranks, uint32_t tag,
                                 gs_comm_t *newcomm_out)
{
    group_task_t g;
    uint8_t *out = NULL;
    gs_comm_t child = NULL;
    uint64_t id;
    gs_status_t status;
    int me;

    if ((comm == NULL) || (ranks == NULL) || (newcomm_out == NULL)) {
        return gs__error_set(GS_ERR_INVALID_ARG, "gs_comm_create_group: %s is NULL",
                             comm == NULL ? "comm" : (ranks == NULL ? "ranks" : "newcomm_out"));
    }
    status = group_check(comm, nranks, ranks, &me);
    if (status != GS_OK) {
        return status;
    }
    if (atomic_load(&comm->err.status) != GS_OK) {
        return gs__error_set(atomic_load(&comm->err.status),
                             "gs_comm_create_group: the communicator has failed (%s): create "
                             "groups from a healthy one, or gs_comm_shrink it first",
                             gs_status_name(atomic_load(&comm->err.status)));
    }
    out = malloc((size_t)comm->size);
    child = gs__comm_alloc();
    memset(&g, 0, sizeof(g));
    g.m.addrs = calloc((size_t)nranks, GS_SOCK_ADDR_MAX);
    g.m.hosts = calloc((size_t)nranks, sizeof(*g.m.hosts));
    if ((out == NULL) || (child == NULL) || (g.m.addrs == NULL) || (g.m.hosts == NULL)) {
        status = gs__error_set(GS_ERR_NO_MEMORY, "gs_comm_create_group: out of memory");
        goto done;
    }
    memset(out, 1, (size_t)comm->size);
    for (int i = 0; i < nranks; i++) {
        out[ranks[i]] = 0;
    }
    /* Every member derives the same id: the parent's, the tag, the members. */
    id = gs__hash64(ranks, (size_t)nranks * sizeof(*ranks), comm->comm_id ^ GROUP_ID_SALT);
    child->cfg = comm->cfg;
    child->sel.policy = comm->sel.policy;
    child->job_id = comm->job_id;
    child->comm_id = gs__hash64(&tag, sizeof(tag), id);
    child->size = nranks;
    child->rank = me;
    child->cfg.rank = me;
    child->cfg.world_size = nranks;
    g.m.fn = "gs_comm_create_group";
    g.m.comm = comm;
    g.m.child = child;
    g.m.out = out;
    g.m.coord = ranks[0];
    g.m.tag_addr = group_tag(0, tag);
    g.m.tag_table = group_tag(1, tag);
    g.m.deadline = gs__deadline_after_ms(comm->cfg.timeout_ms);
    g.task.run = group_run;
    status = gs__worker_run_blocking(&comm->worker, &g.task);
    if (status == GS_OK) {
        status = gs__comm_start(child, g.m.addrs, g.m.hosts);
    }
    if (status == GS_OK) {
        GS_INFO(INIT, "create_group: rank %d -> rank %d of %d (tag %u)", comm->rank, me, nranks,
                tag);
    }
done:
    if (status == GS_OK) {
        *newcomm_out = child;
    } else if (child != NULL) {
        gs__comm_free(child); /* and its transport */
    }
    free(out);
    free(g.m.addrs);
    free(g.m.hosts);
    return status;
}
