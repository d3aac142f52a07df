/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The point-to-point calls beyond send and receive: receiving with a status
 * (gs_recv_status, gs_irecv_status), probing (gs_probe, gs_iprobe) and
 * groups (gs_group_start, gs_group_end).
 *
 * - A status receive is a gs_recv descriptor with GS_DESC_F_RECV_UPTO and
 *   a status pointer; it takes coll.c's submit paths, so it validates, runs
 *   and joins groups exactly as gs_recv does. The worker fills the status
 *   when it completes (comm_exec.c).
 * - A probe is a task of the communicator's worker, because the worker
 *   thread owns the transport: it polls the transport once and asks the
 *   transport's probe slot about its unexpected messages; gs_probe leaves
 *   the task in flight, where the worker tests it after every completion
 *   and while it drives the transport, until a message is there or the
 *   deadline passes. A probe consumes nothing, so its timeout does not fail
 *   the communicator.
 * - A group is a thread-local nesting depth and list: coll.c's blocking
 *   path hands point-to-point calls made inside a group to gs__group_add(),
 *   which keeps a request; the outermost gs_group_end() submits them all in
 *   call order (each worker posts them without waiting) and then waits for
 *   every one. Device buffers are refused in a group (docs/gpu.md).
 *
 * It does not implement gs_send/gs_recv themselves (coll.c) nor request
 * completion (request.c).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/coll_impl.h"
#include "api/comm_impl.h"
#include "core/clock.h"
#include "core/dtype.h"
#include "core/error.h"

/* ---------------------------------------------------------------------- */
/* Receive with a status                                                  */
/* ---------------------------------------------------------------------- */

static gs__coll_desc_t p2p_status_desc(void *buf, size_t count, gs_dtype_t dtype, int peer,
                                       uint32_t tag, gs_p2p_status_t *status)
{
    gs__coll_desc_t d;

    memset(&d, 0, sizeof(d));
    d.kind = GS_COLL_RECV;
    d.recvbuf = buf;
    d.count = count;
    d.dtype = dtype;
    d.root = peer;
    d.tag = tag;
    d.algo = GS_ALGO_AUTO;
    d.flags = GS_DESC_F_RECV_UPTO;
    d.status = status;
    return d;
}

gs_status_t gs_recv_status(gs_comm_t comm, void *buf, size_t count, gs_dtype_t dtype, int peer,
                           uint32_t tag, gs_p2p_status_t *status)
{
    const gs__coll_desc_t d = p2p_status_desc(buf, count, dtype, peer, tag, status);

    return gs__coll_blocking("gs_recv_status", comm, &d);
}

gs_status_t gs_irecv_status(gs_comm_t comm, void *buf, size_t count, gs_dtype_t dtype, int peer,
                            uint32_t tag, gs_p2p_status_t *status, gs_request_t *req_out)
{
    const gs__coll_desc_t d = p2p_status_desc(buf, count, dtype, peer, tag, status);

    return gs__coll_nonblocking("gs_irecv_status", comm, &d, req_out);
}

/* ---------------------------------------------------------------------- */
/* Probe                                                                  */
/* ---------------------------------------------------------------------- */

typedef struct p2p_probe {
    gs__task_t task; /* first: the worker sees only this */
    const char *fn;
    int peer;
    uint32_t tag;
    int blocking;
    int found;
    uint64_t deadline;
    gs__tp_completion_t comp;
} p2p_probe_t;

/* "rank 3" or "any rank", for messages. */
static const char *p2p_peer_text(int peer, char *buf, size_t len)
{
    if (peer == GS_ANY_SOURCE) {
        snprintf(buf, len, "any rank");
    } else {
        snprintf(buf, len, "rank %d", peer);
    }
    return buf;
}

static gs_status_t p2p_probe_look(p2p_probe_t *p, gs_comm_t comm)
{
    const gs_status_t status =
        gs__tp_probe(&comm->tr, p->peer, GS_TP_TAG_P2P | p->tag, &p->found, &p->comp);
    char who[32];

    if (status != GS_OK) {
        return gs__error_wrap(status, "%s: waiting for a message from %s (tag %u): %s", p->fn,
                              p2p_peer_text(p->peer, who, sizeof(who)), p->tag, gs__error_get());
    }
    return GS_OK;
}

static gs_status_t p2p_probe_test(gs__task_t *task, void *ctx)
{
    p2p_probe_t *p = (p2p_probe_t *)task;
    gs_comm_t comm = (gs_comm_t)ctx;
    gs_status_t status = p2p_probe_look(p, comm);
    char who[32];

    if ((status != GS_OK) || p->found) {
        return status;
    }
    if (atomic_load(&comm->destroying)) {
        return gs__error_set(GS_ERR_ABORTED,
                             "%s: the communicator was destroyed while waiting for a message "
                             "from %s (tag %u)",
                             p->fn, p2p_peer_text(p->peer, who, sizeof(who)), p->tag);
    }
    if (gs__now_ns() >= p->deadline) {
        return gs__error_set(GS_ERR_TIMEOUT,
                             "%s: rank %d timed out after %d ms waiting for a message from %s "
                             "(tag %u)",
                             p->fn, comm->rank, comm->cfg.timeout_ms,
                             p2p_peer_text(p->peer, who, sizeof(who)), p->tag);
    }
    return GS_INPROGRESS;
}

static gs_status_t p2p_probe_run(gs__task_t *task, void *ctx)
{
    p2p_probe_t *p = (p2p_probe_t *)task;
    gs_comm_t comm = (gs_comm_t)ctx;
    const gs_status_t sticky = (gs_status_t)atomic_load(&comm->err.status);
    gs_status_t status;

    if (sticky != GS_OK) {
        pthread_mutex_lock(&comm->err.mu);
        gs__error_copy_in(comm->err.msg);
        pthread_mutex_unlock(&comm->err.mu);
        return sticky;
    }
    /* Take in whatever has arrived, without waiting (deadline now). */
    status = gs__tp_progress(&comm->tr, 0);
    if (status != GS_OK) {
        return gs__error_wrap(status, "%s: %s", p->fn, gs__error_get());
    }
    status = p2p_probe_look(p, comm);
    if ((status != GS_OK) || p->found || !p->blocking) {
        return status;
    }
    p->deadline = gs__now_ns() + (uint64_t)comm->cfg.timeout_ms * 1000000ull;
    return GS_INPROGRESS;
}

static gs_status_t p2p_probe(const char *fn, gs_comm_t comm, int peer, uint32_t tag,
                             gs_dtype_t dtype, int blocking, int *flag_out,
                             gs_p2p_status_t *status_out)
{
    p2p_probe_t p;
    gs_status_t status;

    if (comm == NULL) {
        return gs__error_set(GS_ERR_INVALID_ARG, "%s: comm is NULL", fn);
    }
    if ((unsigned)dtype >= GS_DTYPE_COUNT) {
        return gs__error_set(GS_ERR_INVALID_ARG, "%s: unknown dtype %d", fn, (int)dtype);
    }
    if ((peer != GS_ANY_SOURCE) && ((peer < 0) || (peer >= comm->size) || (peer == comm->rank))) {
        return gs__error_set(GS_ERR_INVALID_ARG,
                             "%s: peer %d is not another rank of this communicator of %d (or "
                             "GS_ANY_SOURCE)",
                             fn, peer, comm->size);
    }
    if ((status_out == NULL) || (!blocking && (flag_out == NULL))) {
        return gs__error_set(GS_ERR_INVALID_ARG, "%s: %s is NULL", fn,
                             (status_out == NULL) ? "status" : "flag_out");
    }
    status = (gs_status_t)atomic_load(&comm->err.status);
    if (status != GS_OK) {
        pthread_mutex_lock(&comm->err.mu);
        gs__error_copy_in(comm->err.msg);
        pthread_mutex_unlock(&comm->err.mu);
        return status;
    }
    if (!gs__tp_has_probe(&comm->tr)) {
        return gs__error_set(GS_ERR_UNSUPPORTED, "%s: the %s transport cannot probe", fn,
                             gs__tp_name(&comm->tr));
    }
    memset(&p, 0, sizeof(p));
    p.task.run = p2p_probe_run;
    p.task.test = p2p_probe_test;
    p.fn = fn;
    p.peer = peer;
    p.tag = tag;
    p.blocking = blocking;
    if (blocking) {
        /* Stays in flight on the worker, which drives the transport. */
        status = gs__worker_submit(&comm->worker, &p.task);
        if (status == GS_OK) {
            status = gs__worker_wait(&comm->worker, &p.task);
            if (status != GS_OK) {
                gs__error_copy_in(p.task.errmsg);
            }
        }
    } else {
        status = gs__worker_run_blocking(&comm->worker, &p.task);
    }
    if (status != GS_OK) {
        return status;
    }
    if (flag_out != NULL) {
        *flag_out = p.found;
    }
    if (p.found) {
        status_out->source = p.comp.peer;
        status_out->tag = (uint32_t)p.comp.tag;
        status_out->count = p.comp.nbytes / gs__dtype_size(dtype);
    }
    return GS_OK;
}

gs_status_t gs_probe(gs_comm_t comm, int peer, uint32_t tag, gs_dtype_t dtype,
                     gs_p2p_status_t *status)
{
    return p2p_probe("gs_probe", comm, peer, tag, dtype, 1, NULL, status);
}

gs_status_t gs_iprobe(gs_comm_t comm, int peer, uint32_t tag, gs_dtype_t dtype, int *flag_out,
                      gs_p2p_status_t *status)
{
    return p2p_probe("gs_iprobe", comm, peer, tag, dtype, 0, flag_out, status);
}

/* ---------------------------------------------------------------------- */
/* Groups                                                                 */
/* ---------------------------------------------------------------------- */

/* This thread's group: nesting depth and the calls remembered, in order. */
static _Thread_local int group_depth;
static _Thread_local struct gs_request **group_ops;
static _Thread_local size_t group_n;
static _Thread_local size_t group_cap;

int gs__group_active(void)
{
    return group_depth > 0;
}

gs_status_t gs__group_add(const char *fn, gs_comm_t comm, const gs__coll_desc_t *d)
{
    struct gs_request *req;

    if (d->mem != GS_MEM_HOST) {
        return gs__error_set(GS_ERR_UNSUPPORTED,
                             "%s: device buffers cannot join a group (gs_group_start): call it "
                             "outside the group, or use gs_isend/gs_irecv and gs_waitall",
                             fn);
    }
    if (group_n == group_cap) {
        const size_t cap = (group_cap == 0) ? 16 : group_cap * 2;
        struct gs_request **ops = realloc(group_ops, cap * sizeof(*ops));

        if (ops == NULL) {
            return gs__error_set(GS_ERR_NO_MEMORY, "%s: out of memory for a group of %zu calls", fn,
                                 cap);
        }
        group_ops = ops;
        group_cap = cap;
    }
    req = calloc(1, sizeof(*req));
    if (req == NULL) {
        return gs__error_set(GS_ERR_NO_MEMORY, "%s: out of memory for a request", fn);
    }
    req->task.run = gs__comm_run_task;
    req->task.test = gs__comm_test_task;
    req->comm = comm;
    req->desc = *d;
    group_ops[group_n++] = req;
    return GS_OK;
}

gs_status_t gs_group_start(void)
{
    if (group_depth == INT32_MAX) {
        return gs__error_set(GS_ERR_INVALID_USAGE, "gs_group_start: groups nested too deeply");
    }
    group_depth++;
    return GS_OK;
}

gs_status_t gs_group_end(void)
{
    struct gs_request **ops = group_ops;
    const size_t n = group_n;
    gs_status_t first = GS_OK;
    char msg[GS_ERROR_MSG_MAX] = "";

    if (group_depth == 0) {
        return gs__error_set(GS_ERR_INVALID_USAGE,
                             "gs_group_end: this thread has no group open (gs_group_start)");
    }
    if (--group_depth > 0) {
        return GS_OK; /* only the outermost end posts */
    }
    group_ops = NULL;
    group_n = 0;
    group_cap = 0;
    /* Post every call before waiting for any: each worker leaves its
     * point-to-point requests in flight, so no order of sends and receives
     * across the ranks can block. */
    for (size_t i = 0; i < n; i++) {
        const gs_status_t status = gs__worker_submit(&ops[i]->comm->worker, &ops[i]->task);

        if (status != GS_OK) {
            ops[i]->task.status = status;
            snprintf(ops[i]->task.errmsg, sizeof(ops[i]->task.errmsg), "%s", gs__error_get());
            atomic_store_explicit(&ops[i]->task.done, 1, memory_order_release);
        }
    }
    for (size_t i = 0; i < n; i++) {
        gs_request_t req = ops[i];
        const gs_status_t status = gs_wait(&req);

        if ((status != GS_OK) && (first == GS_OK)) {
            first = status;
            snprintf(msg, sizeof(msg), "%s", gs__error_get());
        }
    }
    free(ops);
    if (first != GS_OK) {
        gs__error_copy_in(msg);
    }
    return first;
}
