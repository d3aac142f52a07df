/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The executor: what the worker thread does with a communicator's
 * requests (run a collective, post a point-to-point call and test it until
 * it completes, its deadline passes or the communicator is destroyed), its
 * hooks while idle, and the sticky-error rule (an error of peer,
 * communicator or internal scope fails every later call of the
 * communicator; gs_comm_get_async_error reads it).
 */
#include <stdio.h>
#include <string.h>

#include "api/comm_impl.h"
#include "api/comm_stats.h"
#ifdef GS_WITH_CUDA
#include "algo/sched/algo_dev.h"
#endif
#include "core/clock.h"
#include "core/dtype.h"
#include "core/error.h"


void gs__comm_fail(gs_comm_t comm, gs_status_t status, const char *msg)
{
    pthread_mutex_lock(&comm->err.mu);
    if (atomic_load(&comm->err.status) == GS_OK) {
        snprintf(comm->err.msg, sizeof(comm->err.msg), "%s", msg);
        atomic_store(&comm->err.status, status);
    }
    pthread_mutex_unlock(&comm->err.mu);
}

static int comm_error_is_sticky(gs__coll_kind_t kind, gs_status_t status)
{
    const gs_status_scope_t scope = gs_status_scope(status);

    if ((kind == GS_COLL_SEND || kind == GS_COLL_RECV) &&
        (status == GS_ERR_MISMATCH || status == GS_ERR_TRUNCATED)) {
        return 0; /* the message was consumed whole; the streams are intact */
    }
    return (scope == GS_SCOPE_PEER) || (scope == GS_SCOPE_COMM) || (scope == GS_SCOPE_INTERNAL);
}

/* gs_recv_status (GS_DESC_F_RECV_UPTO): report what arrived (source, tag,
 * count) in d->status when set. A byte length that is not whole elements
 * is GS_ERR_MISMATCH. */
static gs_status_t comm_p2p_status(const gs__coll_desc_t *d, int source, size_t nbytes)
{
    const size_t esize = gs__dtype_size(d->dtype);

    if ((nbytes % esize) != 0) {
        return gs__error_set(GS_ERR_MISMATCH,
                             "gs_recv_status: rank %d sent %zu bytes (tag %u), not a whole "
                             "number of %zu-byte %s elements",
                             source, nbytes, d->tag, esize, gs__dtype_name(d->dtype));
    }
    if (d->status != NULL) {
        d->status->source = source;
        d->status->tag = d->tag;
        d->status->count = nbytes / esize;
    }
    return GS_OK;
}

gs_status_t gs__comm_run_task(gs__task_t *task, void *ctx)
{
    struct gs_request *req = (struct gs_request *)task;
    gs_comm_t comm = (gs_comm_t)ctx;
    gs__coll_desc_t *d = &req->desc;
    const gs_status_t sticky = (gs_status_t)atomic_load(&comm->err.status);
    gs_status_t status;
    uint64_t t0;
    uint64_t t1;

    if (sticky != GS_OK) {
        pthread_mutex_lock(&comm->err.mu);
        gs__error_copy_in(comm->err.msg);
        pthread_mutex_unlock(&comm->err.mu);
        gs__comm_stats_op_done(comm, d, sticky, 0);
        return sticky;
    }
    comm->actx.opname = gs__coll_api_name(d->kind);
    if (((d->kind == GS_COLL_SEND) || (d->kind == GS_COLL_RECV)) && (d->mem == GS_MEM_HOST)) {
        /* Post and leave in flight: the worker tests it from now on. */
        status = gs__p2p_post(&comm->actx, d, &req->p2p);
        if (status == GS_OK) {
            req->p2p_deadline = gs__now_ns() + comm->actx.timeout_ns;
            return GS_INPROGRESS;
        }
        gs__comm_stats_op_done(comm, d, status, 0);
        return status;
    }
    if ((d->kind != GS_COLL_SEND) && (d->kind != GS_COLL_RECV)) {
        comm->actx.seq = comm->coll_seq++; /* device point-to-point (NCCL) takes none */
    }
    /* Time blocked while only point-to-point work was in flight is not this collective's. */
    comm->actx.wait_pending_ns = 0;
    t0 = gs__now_ns();
    status = GS_OK;
    if ((d->kind != GS_COLL_SEND) && (d->kind != GS_COLL_RECV)) {
        gs__algo_op_begin(&comm->actx, d, t0); /* fingerprint and flight recorder */
    }
#ifdef GS_WITH_CUDA
    if (d->mem == GS_MEM_DEVICE) {
        status = gs__comm_dev_ready(comm, d);
    }
#endif
    if (status == GS_OK) {
        status = gs__algo_run(&comm->sel, &comm->actx, d);
    }
#ifdef GS_WITH_CUDA
    if (status == GS_INPROGRESS) {
        /* A non-blocking device call enqueued on its stream: the worker
         * tests its event from now on (gs__comm_test_task). */
        req->p2p_deadline = gs__now_ns() + comm->actx.timeout_ns;
        comm->dev_inflight++;
        if (comm->actx.cur != NULL) { /* the recorder shows it left in flight */
            gs__algo_op_end(&comm->actx, d, GS_INPROGRESS, gs__now_ns());
        }
        return GS_INPROGRESS;
    }
#endif
    if ((status == GS_OK) && (d->kind == GS_COLL_RECV) && (d->flags & GS_DESC_F_RECV_UPTO)) {
        /* Device buffers (NCCL): a named peer and exactly count elements. */
        status = comm_p2p_status(d, d->root, d->count * gs__dtype_size(d->dtype));
    }
    t1 = gs__now_ns();
    if (comm->actx.cur != NULL) {
        gs__algo_op_end(&comm->actx, d, status, t1);
    }
    gs__counter_add(&comm->counters.busy_ns, t1 - t0);
    gs__comm_stats_op_done(comm, d, status, t1 - t0);
    if ((status != GS_OK) && comm_error_is_sticky(d->kind, status)) {
        gs__comm_fail(comm, status, gs__error_get());
    }
    gs__comm_stats_tick(comm, t1);
    return status;
}

#ifdef GS_WITH_CUDA
/* The test of a non-blocking device call in flight: its event, NCCL's
 * errors, the deadline and a destroy that will not wait for it. */
static gs_status_t comm_dev_test(gs_comm_t comm, struct gs_request *req)
{
    gs__coll_desc_t *d = &req->desc;
    gs_status_t status = gs__dev_test(&comm->actx, d);
    uint64_t now;

    if ((status == GS_INPROGRESS) && atomic_load(&comm->destroying)) {
        gs__dev_forget(&comm->actx, d);
        status = gs__error_set(GS_ERR_ABORTED,
                               "%s: the communicator was destroyed while this device operation "
                               "was pending",
                               gs__coll_api_name(d->kind));
    }
    now = gs__now_ns();
    if ((status == GS_INPROGRESS) && (now >= req->p2p_deadline)) {
        gs__dev_abort(&comm->actx);
        gs__dev_forget(&comm->actx, d);
        status = gs__error_set(GS_ERR_TIMEOUT,
                               "%s: rank %d: the device operation did not finish within %d ms "
                               "(NCCL aborted; destroy the communicator)",
                               gs__coll_api_name(d->kind), comm->rank, comm->cfg.timeout_ms);
    }
    if (status == GS_INPROGRESS) {
        return status;
    }
    if ((status == GS_OK) && (d->kind == GS_COLL_RECV) && (d->flags & GS_DESC_F_RECV_UPTO)) {
        status = comm_p2p_status(d, d->root, d->count * gs__dtype_size(d->dtype));
    }
    comm->dev_inflight--;
    gs__comm_stats_op_done(comm, d, status, now - (req->p2p_deadline - comm->actx.timeout_ns));
    if ((status != GS_OK) && comm_error_is_sticky(d->kind, status)) {
        gs__comm_fail(comm, status, gs__error_get());
    }
    gs__comm_stats_tick(comm, now);
    return status;
}
#endif

gs_status_t gs__comm_test_task(gs__task_t *task, void *ctx)
{
    struct gs_request *req = (struct gs_request *)task;
    gs_comm_t comm = (gs_comm_t)ctx;
    const gs__coll_desc_t *d = &req->desc;
    const size_t expect = (d->kind == GS_COLL_RECV) ? d->count * gs__dtype_size(d->dtype) : 0;
    const int upto = (d->kind == GS_COLL_RECV) && (d->flags & GS_DESC_F_RECV_UPTO);
    gs_status_t status;
    uint64_t now;
    int done = 0;

    comm->actx.opname = upto ? "gs_recv_status" : gs__coll_api_name(d->kind);
#ifdef GS_WITH_CUDA
    if (d->mem == GS_MEM_DEVICE) {
        return comm_dev_test(comm, req);
    }
#endif
    if (upto) {
        /* At most count elements: the transport fails a longer message with
         * GS_ERR_TRUNCATED and reports a shorter one's length. */
        size_t nbytes = 0;

        status = gs__algo_check_len(&comm->actx, &req->p2p, &done, &nbytes);
        if (done && (status == GS_OK)) {
            status = comm_p2p_status(d, req->p2p.peer, nbytes);
        }
    } else {
        status = gs__algo_check(&comm->actx, &req->p2p, expect, &done);
    }
    if (!done && atomic_load(&comm->destroying)) {
        /* Nobody will complete it now: do not hold gs_comm_destroy hostage. */
        gs__algo_release_all(&comm->actx, &req->p2p, 1);
        done = 1;
        status = gs__error_set(GS_ERR_ABORTED,
                               "%s: the communicator was destroyed while this operation (peer "
                               "%d, tag %u) was pending",
                               gs__coll_api_name(d->kind), d->root, d->tag);
    }
    if (!done) {
        char who[32];

        if (gs__now_ns() < req->p2p_deadline) {
            return GS_INPROGRESS;
        }
        gs__algo_release_all(&comm->actx, &req->p2p, 1);
        if (d->root == GS_ANY_SOURCE) {
            snprintf(who, sizeof(who), "any rank");
        } else {
            snprintf(who, sizeof(who), "rank %d", d->root);
        }
        status = gs__error_set(GS_ERR_TIMEOUT,
                               "%s: rank %d timed out after %d ms waiting to %s %s (tag %u)",
                               comm->actx.opname, comm->rank, comm->cfg.timeout_ms,
                               d->kind == GS_COLL_SEND ? "send to" : "receive from", who, d->tag);
    }
    now = gs__now_ns();
    /* The request was posted one timeout before its deadline. */
    gs__comm_stats_op_done(comm, d, status, now - (req->p2p_deadline - comm->actx.timeout_ns));
    if ((status != GS_OK) && comm_error_is_sticky(d->kind, status)) {
        gs__comm_fail(comm, status, gs__error_get());
    }
    gs__comm_stats_tick(comm, now);
    return status;
}

static void comm_worker_idle(void *ctx, uint64_t wait_ns)
{
    gs_comm_t comm = (gs_comm_t)ctx;
    const uint64_t t0 = gs__now_ns();
    uint64_t t1;

    /* A device call's completion raises nothing the transport waits on:
     * while one is in flight, look again every 50 us. */
    if ((comm->dev_inflight > 0) && (wait_ns > 50000u)) {
        wait_ns = 50000u;
    }
    /* Errors surface through the requests' own tests. */
    (void)gs__tp_progress(&comm->tr, t0 + wait_ns);
    /* Only point-to-point work is in flight: the wait is charged to the peer
     * whose request completes next (algo_ctx.c). */
    t1 = gs__now_ns();
    comm->actx.wait_pending_ns += t1 - t0;
    gs__comm_stats_tick(comm, t1);
}

/* The worker's heartbeat tick while it has nothing to do: one non-blocking
 * progress pass (the transport beats and checks its peers' silence). */
static void comm_worker_tick(void *ctx)
{
    gs_comm_t comm = (gs_comm_t)ctx;

    /* An idle rank that hears of a revoke reports it (gs_comm_get_async_error). */
    if (gs__tp_progress(&comm->tr, 0) == GS_ERR_REVOKED) {
        gs__comm_fail(comm, GS_ERR_REVOKED, gs__error_get());
    }
}

static void comm_worker_wake(void *ctx)
{
    gs_comm_t comm = (gs_comm_t)ctx;

    gs__tp_wake(&comm->tr);
}

/* The worker's hooks for @p comm (comm_impl.h). */
void gs__comm_worker_hooks(gs_comm_t comm, gs__worker_hooks_t *hooks)
{
    memset(hooks, 0, sizeof(*hooks));
    hooks->idle = comm_worker_idle;
    hooks->wake = gs__tp_has_wake(&comm->tr) ? comm_worker_wake : NULL;
    if ((comm->cfg.heartbeat_ms > 0) && gs__tp_has_cap(&comm->tr, GS_TP_CAP_HEARTBEAT)) {
        /* A little more often than the transport's quarter-interval clock,
         * so that no tick of it is skipped (docs/design.md, "Heartbeats"). */
        hooks->tick = comm_worker_tick;
        hooks->tick_ns = (uint64_t)comm->cfg.heartbeat_ms * 200000ull;
    }
}

gs_status_t gs_comm_get_async_error(gs_comm_t comm, gs_status_t *error_out)
{
    if ((comm == NULL) || (error_out == NULL)) {
        return gs__error_set(GS_ERR_INVALID_ARG, "gs_comm_get_async_error: %s is NULL",
                             comm == NULL ? "comm" : "error_out");
    }
    *error_out = (gs_status_t)atomic_load(&comm->err.status);
    return GS_OK;
}
