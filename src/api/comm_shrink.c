/* SPDX-License-Identifier: Apache-2.0 */
/*
 * gs_comm_shrink: the survivors of a failure agree on who is gone and form
 * a new communicator without them (NCCL's ncclCommShrink, MPI ULFM's
 * MPI_Comm_shrink). docs/design.md, "Shrinking", has the protocol; in short:
 *
 * 1. Agreement, over the old connections that still work, with recovery
 *    tags (transport.h: they outlive the transport going down). Each rank
 *    starts from the peers its transport saw fail. The coordinator is the
 *    lowest rank not in a rank's dead set. Everyone else sends its view to
 *    it and waits for the final set; the coordinator waits for the view of
 *    every rank it believes alive (a rank that fails or does not answer by
 *    the deadline joins the dead set), takes the union, and sends it back.
 *    A rank whose coordinator fails adds it to its dead set and tries the
 *    next one. A rank that finds itself in the final set was excluded.
 * 2. The survivors renumber densely in old-rank order; each creates the
 *    transport of the new communicator (a comm id derived from the old one
 *    and the split/shrink count) and the coordinator gathers and hands out
 *    the new endpoints, still over the old connections.
 * 3. The new communicator connects as a split child does.
 *
 * Every wait is bounded by GS_TIMEOUT_MS from the call (the agreement and
 * the endpoint exchange together; the connection setup has its own).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/comm_impl.h"
#include "core/clock.h"
#include "core/error.h"
#include "core/log.h"
#include "core/socket.h"

#define SHRINK_VIEW_MAGIC 0x56525347u  /* "GSRV" */
#define SHRINK_FINAL_MAGIC 0x46525347u /* "GSRF" */
#define SHRINK_HDR_LEN 8u
#define SHRINK_ID_SALT 0x736872696e6bull /* "shrink" */

/* Phases in tag bits 32..33; epoch and coordinator in the low 32 bits. */
enum { PH_VIEW = 0, PH_FINAL = 1, PH_ADDR = 2, PH_TABLE = 3 };

static uint64_t shrink_tag(int phase, uint32_t epoch, int coord)
{
    return GS_TP_TAG_RECOVERY | ((uint64_t)phase << 32) | ((uint64_t)(epoch & 0xffu) << 24) |
           ((uint64_t)coord & 0xffffffu);
}

typedef struct shrink_task {
    gs__task_t task; /* first: the worker sees only this */
    gs_comm_t comm;
    uint32_t epoch;
    uint64_t deadline;               /* everything but the new communicator's connection setup */
    uint64_t collect;                /* the coordinator waits for views this long (half the time) */
    uint8_t *dead;                   /* old size entries, 1 = gone */
    uint8_t *msg;                    /* one view message, ours */
    uint8_t *inbox;                  /* one view message per old rank */
    gs_comm_t child;                 /* created in phase 2 */
    char (*addrs)[GS_SOCK_ADDR_MAX]; /* new size entries */
    uint64_t *hosts;
    int coord;
} shrink_task_t;

static size_t view_len(int size)
{
    return SHRINK_HDR_LEN + (size_t)size;
}

static void view_encode(uint8_t *buf, uint32_t magic, int size, const uint8_t *dead)
{
    gs__put_le32(buf, magic);
    gs__put_le32(buf + 4, (uint32_t)size);
    memcpy(buf + SHRINK_HDR_LEN, dead, (size_t)size);
}

/* Bytes from a peer: hostile until checked. */
static gs_status_t view_check(const uint8_t *buf, size_t nbytes, uint32_t magic, int size, int from)
{
    if ((nbytes != view_len(size)) || (gs__get_le32(buf) != magic) ||
        (gs__get_le32(buf + 4) != (uint32_t)size)) {
        return gs__error_set(GS_ERR_PROTOCOL,
                             "gs_comm_shrink: rank %d sent a malformed %s (%zu bytes)", from,
                             magic == SHRINK_VIEW_MAGIC ? "view" : "final set", nbytes);
    }
    for (int i = 0; i < size; i++) {
        if (buf[SHRINK_HDR_LEN + (size_t)i] > 1) {
            return gs__error_set(GS_ERR_PROTOCOL,
                                 "gs_comm_shrink: rank %d sent a dead set with a bad entry", from);
        }
    }
    return GS_OK;
}

static void note_local_failures(gs_comm_t comm, uint8_t *dead)
{
    for (int p = 0; p < comm->size; p++) {
        if ((p != comm->rank) && gs__tp_peer_failed(&comm->tr, p)) {
            dead[p] = 1;
        }
    }
}

/* The coordinator's side of the agreement: collect, union, hand out. */
static gs_status_t agree_coordinate(shrink_task_t *s, gs__algo_req_t *reqs, size_t *nbytes,
                                    gs_status_t *st)
{
    gs_comm_t comm = s->comm;
    const int n = comm->size;
    const size_t len = view_len(n);
    gs_status_t status;

    for (int p = 0; p < n; p++) {
        reqs[p].req = NULL;
        if ((p != comm->rank) && !s->dead[p]) {
            status = gs__algo_irecv(&comm->actx, p, shrink_tag(PH_VIEW, s->epoch, comm->rank),
                                    s->inbox + (size_t)p * len, len, &reqs[p]);
            if (status != GS_OK) {
                gs__algo_release_all(&comm->actx, reqs, (size_t)n);
                return status;
            }
        }
    }
    /* Half the time: the members, who wait the whole of it for the final
     * set, then still get it when a rank never answers. */
    status = gs__comm_wait_each(comm, "gs_comm_shrink", reqs, nbytes, st, n, s->collect);
    if (status != GS_OK) {
        return status;
    }
    for (int p = 0; p < n; p++) {
        if ((p == comm->rank) || s->dead[p]) {
            continue;
        }
        if ((st[p] != GS_OK) ||
            (view_check(s->inbox + (size_t)p * len, nbytes[p], SHRINK_VIEW_MAGIC, n, p) != GS_OK)) {
            GS_WARN("gs_comm_shrink: rank %d: rank %d gave no view (%s): counted as gone",
                    comm->rank, p, gs_status_name(st[p]));
            s->dead[p] = 1;
        }
    }
    for (int p = 0; p < n; p++) {
        if ((p == comm->rank) || s->dead[p]) {
            continue;
        }
        for (int q = 0; q < n; q++) {
            s->dead[q] |= s->inbox[(size_t)p * len + SHRINK_HDR_LEN + (size_t)q];
        }
    }
    s->dead[comm->rank] = 0;
    /* Hand out the final set to every rank that sent a view, alive or
     * newly declared gone (a live rank learns it was excluded). */
    view_encode(s->msg, SHRINK_FINAL_MAGIC, n, s->dead);
    for (int p = 0; p < n; p++) {
        reqs[p].req = NULL;
        if ((p != comm->rank) && (st[p] == GS_OK)) {
            (void)gs__algo_isend(&comm->actx, p, shrink_tag(PH_FINAL, s->epoch, comm->rank), s->msg,
                                 len, &reqs[p]);
        }
    }
    return gs__comm_wait_each(comm, "gs_comm_shrink", reqs, nbytes, st, n, s->deadline);
}

/* A member's side: send our view to the coordinator, wait for the final set. */
static gs_status_t agree_member(shrink_task_t *s, int coord, int *retry_out)
{
    gs_comm_t comm = s->comm;
    const int n = comm->size;
    const size_t len = view_len(n);
    gs__algo_req_t reqs[2] = {{.req = NULL}, {.req = NULL}};
    size_t nbytes[2];
    gs_status_t st[2];
    gs_status_t status;
    uint8_t *final = s->inbox + (size_t)coord * len;

    *retry_out = 0;
    view_encode(s->msg, SHRINK_VIEW_MAGIC, n, s->dead);
    status = gs__algo_irecv(&comm->actx, coord, shrink_tag(PH_FINAL, s->epoch, coord), final, len,
                            &reqs[0]);
    if (status == GS_OK) {
        status = gs__algo_isend(&comm->actx, coord, shrink_tag(PH_VIEW, s->epoch, coord), s->msg,
                                len, &reqs[1]);
    }
    if (status == GS_OK) {
        status = gs__comm_wait_each(comm, "gs_comm_shrink", reqs, nbytes, st, 2, s->deadline);
    } else {
        gs__algo_release_all(&comm->actx, reqs, 2);
    }
    if (status != GS_OK) {
        return status;
    }
    if ((st[0] == GS_ERR_TIMEOUT) && !gs__tp_peer_failed(&comm->tr, coord)) {
        return gs__error_set(GS_ERR_TIMEOUT,
                             "gs_comm_shrink: rank %d: coordinator rank %d sent no final set "
                             "within %d ms",
                             comm->rank, coord, comm->cfg.timeout_ms);
    }
    if (st[0] != GS_OK) {
        /* The coordinator is gone: the next one in line takes over. */
        GS_WARN("gs_comm_shrink: rank %d: coordinator rank %d failed (%s); trying the next",
                comm->rank, coord, gs_status_name(st[0]));
        s->dead[coord] = 1;
        *retry_out = 1;
        return GS_OK;
    }
    status = view_check(final, nbytes[0], SHRINK_FINAL_MAGIC, n, coord);
    if (status != GS_OK) {
        return status;
    }
    if (final[SHRINK_HDR_LEN + (size_t)comm->rank] != 0) {
        return gs__error_set(GS_ERR_PEER_FAILED,
                             "gs_comm_shrink: rank %d was declared gone by the survivors "
                             "(coordinator rank %d): it did not answer in time",
                             comm->rank, coord);
    }
    memcpy(s->dead, final + SHRINK_HDR_LEN, (size_t)n);
    return GS_OK;
}

/* Phase 2: create the child's transport and exchange endpoints among the
 * survivors (comm_members.c). */
static gs_status_t exchange_endpoints(shrink_task_t *s, gs__algo_req_t *reqs, size_t *nbytes,
                                      gs_status_t *st)
{
    gs__members_t m;

    m.fn = "gs_comm_shrink";
    m.comm = s->comm;
    m.child = s->child;
    m.out = s->dead;
    m.coord = s->coord;
    m.tag_addr = shrink_tag(PH_ADDR, s->epoch, s->coord);
    m.tag_table = shrink_tag(PH_TABLE, s->epoch, s->coord);
    m.deadline = s->deadline;
    m.addrs = s->addrs;
    m.hosts = s->hosts;
    return gs__comm_members_exchange(&m, reqs, nbytes, st);
}

/* Runs on the worker thread (or inline): phases 1 and 2. */
static gs_status_t shrink_run(gs__task_t *task, void *ctx)
{
    shrink_task_t *s = (shrink_task_t *)task;
    gs_comm_t comm = (gs_comm_t)ctx;
    const int n = comm->size;
    gs__algo_req_t *reqs = calloc((size_t)n, sizeof(*reqs));
    size_t *nbytes = calloc((size_t)n, sizeof(*nbytes));
    gs_status_t *st = calloc((size_t)n, sizeof(*st));
    gs_status_t status = GS_OK;
    int members = 0;
    int newrank = 0;

    comm->actx.opname = "gs_comm_shrink"; /* names the call in a request's failure */
    if ((reqs == NULL) || (nbytes == NULL) || (st == NULL)) {
        status = gs__error_set(GS_ERR_NO_MEMORY, "gs_comm_shrink: out of memory");
        goto out;
    }
    note_local_failures(comm, s->dead);
    for (;;) {
        int retry = 0;

        s->coord = 0;
        while (s->dead[s->coord] && (s->coord < n - 1)) {
            s->coord++;
        }
        if (s->coord == comm->rank) {
            status = agree_coordinate(s, reqs, nbytes, st);
            break;
        }
        status = agree_member(s, s->coord, &retry);
        if ((status != GS_OK) || !retry) {
            break;
        }
        note_local_failures(comm, s->dead);
    }
    if (status != GS_OK) {
        goto out;
    }
    for (int p = 0; p < n; p++) {
        if (!s->dead[p]) {
            if (p == comm->rank) {
                newrank = members;
            }
            members++;
        }
    }
    s->child->size = members;
    s->child->rank = newrank;
    s->child->cfg.rank = newrank;
    s->child->cfg.world_size = members;
    s->addrs = calloc((size_t)members, GS_SOCK_ADDR_MAX);
    s->hosts = calloc((size_t)members, sizeof(*s->hosts));
    if ((s->addrs == NULL) || (s->hosts == NULL)) {
        status = gs__error_set(GS_ERR_NO_MEMORY, "gs_comm_shrink: out of memory");
        goto out;
    }
    status = exchange_endpoints(s, reqs, nbytes, st);
out:
    free(reqs);
    free(nbytes);
    free(st);
    return status;
}

gs_status_t gs_comm_shrink(gs_comm_t comm, gs_comm_t *newcomm_out)
{
    shrink_task_t s;
    gs_status_t status;
    char gone[160];
    size_t used = 0;
    int ngone = 0;

    if ((comm == NULL) || (newcomm_out == NULL)) {
        return gs__error_set(GS_ERR_INVALID_ARG, "gs_comm_shrink: %s is NULL",
                             comm == NULL ? "comm" : "newcomm_out");
    }
    if (!gs__tp_has_peer_failed(&comm->tr)) {
        return gs__error_set(GS_ERR_UNSUPPORTED,
                             "gs_comm_shrink: transport %s cannot tell which peers failed",
                             gs__tp_name(&comm->tr));
    }
    if (atomic_load(&comm->err.status) == GS_ERR_ABORTED) {
        return gs__error_set(GS_ERR_ABORTED, "gs_comm_shrink: the communicator was aborted");
    }
    memset(&s, 0, sizeof(s));
    s.comm = comm;
    s.epoch = atomic_fetch_add(&comm->split_seq, 1);
    s.deadline = gs__deadline_after_ms(comm->cfg.timeout_ms);
    s.collect = gs__deadline_after_ms((comm->cfg.timeout_ms + 1) / 2);
    s.dead = calloc((size_t)comm->size, 1);
    s.msg = calloc(1, view_len(comm->size));
    s.inbox = calloc((size_t)comm->size, view_len(comm->size));
    s.child = gs__comm_alloc();
    if ((s.dead == NULL) || (s.msg == NULL) || (s.inbox == NULL) || (s.child == NULL)) {
        status = gs__error_set(GS_ERR_NO_MEMORY, "gs_comm_shrink: out of memory");
        goto out;
    }
    s.child->cfg = comm->cfg;
    s.child->sel.policy = comm->sel.policy;
    s.child->job_id = comm->job_id;
    s.child->comm_id = gs__hash64(&s.epoch, sizeof(s.epoch), comm->comm_id ^ SHRINK_ID_SALT);
    s.task.run = shrink_run;
    status = gs__worker_run_blocking(&comm->worker, &s.task);
    if (status == GS_OK) {
        for (int p = 0; p < comm->size; p++) {
            if (s.dead[p] && (used + 16 < sizeof(gone))) {
                used += (size_t)snprintf(gone + used, sizeof(gone) - used, "%s%d",
                                         ngone > 0 ? "," : "", p);
                ngone++;
            }
        }
        if (ngone == 0) {
            snprintf(gone, sizeof(gone), "none");
        }
        GS_INFO(INIT, "shrink: rank %d -> rank %d of %d (gone: %s), coordinator rank %d",
                comm->rank, s.child->rank, s.child->size, gone, s.coord);
        status = gs__comm_start(s.child, s.addrs, s.hosts);
    }
out:
    if (status == GS_OK) {
        *newcomm_out = s.child;
    } else if (s.child != NULL) {
        gs__comm_free(s.child); /* and its transport */
    }
    free(s.dead);
    free(s.msg);
    free(s.inbox);
    free(s.addrs);
    free(s.hosts);
    return status;
}
