/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The NCCL path (CUDA and NCCL builds): plain calls on device buffers go
 * to NCCL's own collectives (all-to-all as grouped sends and receives,
 * device/nccl_engine.c), enqueued on the caller's stream. What happens next is
 * the call's semantics (gradsync.h): a blocking call waits for an event
 * recorded after the work (gs__dev_wait_event: NCCL's asynchronous errors
 * and the deadline polled; a dead peer aborts the NCCL communicator and
 * fails the call, never hangs the stream); a non-blocking one hands the
 * event to the request; a stream-ordered one returns once enqueued.
 * gs__algo_plan decided the path; nothing here chooses. The communicator's
 * device is current for the call, the caller's restored after it.
 */
#ifdef GS_WITH_NCCL

#include "algo/sched/algo_dev.h"

#include <stdio.h>

#include <cuda_runtime.h>

#include "core/error.h"
#include "device/nccl_engine.h"

static gs_status_t nccl_enqueue(gs__algo_ctx_t *ctx, const gs__coll_desc_t *d)
{
    struct gs__nccl *nc = ctx->dev->nccl;

    switch (d->kind) {
    case GS_COLL_ALLREDUCE:
        return gs__nccl_allreduce(nc, d->sendbuf, d->recvbuf, d->count, d->dtype, d->op, d->stream);
    case GS_COLL_BROADCAST:
        return gs__nccl_broadcast(nc, d->recvbuf, d->count, d->dtype, d->root, d->stream);
    case GS_COLL_REDUCE:
        return gs__nccl_reduce(nc, d->sendbuf, d->recvbuf, d->count, d->dtype, d->op, d->root,
                               d->stream);
    case GS_COLL_ALLGATHER:
        return gs__nccl_allgather(nc, d->sendbuf, d->recvbuf, d->count, d->dtype, d->stream);
    case GS_COLL_REDUCE_SCATTER:
        return gs__nccl_reduce_scatter(nc, d->sendbuf, d->recvbuf, d->count, d->dtype, d->op,
                                       d->stream);
    case GS_COLL_ALLTOALL:
        return gs__nccl_alltoall(nc, d->sendbuf, d->recvbuf, d->count, d->dtype, d->stream);
    case GS_COLL_SEND:
        return gs__nccl_send(nc, d->sendbuf, d->count, d->dtype, d->root, d->stream);
    case GS_COLL_RECV:
        if (d->root == GS_ANY_SOURCE) {
            return gs__error_set(GS_ERR_UNSUPPORTED,
                                 "%s: GS_ANY_SOURCE is not available for device buffers over "
                                 "NCCL (NCCL receives from a named rank)",
                                 ctx->opname);
        }
        return gs__nccl_recv(nc, d->recvbuf, d->count, d->dtype, d->root, d->stream);
    default:
        return gs__error_set(GS_ERR_INTERNAL, "%s: %s has no NCCL form", ctx->opname,
                             gs__coll_name(d->kind));
    }
}

/* gs__dev_run_nccl with the context's device current. */
static gs_status_t dev_run_nccl(gs__algo_ctx_t *ctx, gs__coll_desc_t *d,
                                const gs__algo_plan_t *plan)
{
    struct gs__nccl *nc = ctx->dev->nccl;
    void *ev = NULL;
    gs_status_t status;
    cudaError_t err;

    if (plan->scheme != GS_SCHEME_PLAIN) {
        return gs__dev_compressed(ctx, d, plan, 1);
    }
    status = nccl_enqueue(ctx, d);
    if (status != GS_OK) {
        return status;
    }
    if ((d->flags & GS_COLL_F_STREAM_ORDERED) != 0) {
        status = gs__nccl_poll(nc);
        return (status == GS_INPROGRESS) ? GS_OK : status;
    }
    status = gs__dev_event_get(ctx, &ev);
    if (status != GS_OK) {
        return status;
    }
    err = cudaEventRecord((cudaEvent_t)ev, (cudaStream_t)d->stream);
    if (err != cudaSuccess) {
        gs__dev_event_put(ctx, ev);
        return gs__dev_cuda(ctx, err, "cudaEventRecord after the NCCL call");
    }
    if ((d->flags & GS_DESC_F_BLOCKING) != 0) {
        char what[64];

        (void)snprintf(what, sizeof(what), "NCCL's %s", gs__coll_name(d->kind));
        status = gs__dev_wait_event(ctx, ev, what);
        if (status == GS_OK) {
            gs__dev_event_put(ctx, ev);
        } else {
            d->event = ev;
            gs__dev_forget(ctx, d);
        }
        return status;
    }
    d->event = ev;
    return GS_INPROGRESS;
}

gs_status_t gs__dev_run_nccl(gs__algo_ctx_t *ctx, gs__coll_desc_t *d, const gs__algo_plan_t *plan)
{
    return gs__dev_run_guarded(ctx, d, plan, dev_run_nccl);
}

#endif /* GS_WITH_NCCL */
