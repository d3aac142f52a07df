/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Device buffers on the host transports, and the device context of a
 * communicator (CUDA builds only).
 *
 * Setup (gs__dev_setup) runs once per communicator, on its first call
 * with device buffers: every rank all-gathers (host id, GPU UUID, what it
 * wants of NCCL) over the host transport, so that every rank takes the
 * same decision: NCCL serves plain calls when it is built in, wanted, and
 * no two ranks share a GPU (NCCL refuses that); rank 0 then makes the
 * NCCL id and broadcasts it the same way. Everything else is staged.
 *
 * Staged path (gs__dev_run_staged): the caller's stream is ordered first
 * (an event on it, waited for by the communicator's copy stream), then
 * the buffers move through pinned host memory in slices of
 * GS_CUDA_STAGE_BYTES, two slots in turn: the copy of slice k + 1 to the
 * host runs while the host collective of slice k runs, and the copy of
 * slice k back to the device runs while slice k + 1 waits for its own
 * copy. Elementwise collectives (all-reduce, broadcast, reduce, plain)
 * pipeline that way; block-structured ones (all-gather, reduce-scatter,
 * all-to-all) and compressed calls (whose error feedback covers the whole
 * tensor) move as one slice. Every slice runs the algorithm the plan chose
 * for the whole call, the same on every rank, so the ranks' messages still
 * match. The result is ordered before later work on the caller's stream
 * (an event on the copy stream the caller's stream waits for), and the
 * call returns once it is in recvbuf. Every wait polls with a no-progress
 * deadline; nothing here blocks in the CUDA runtime without one.
 * No allocation per call once warm: streams, events and the pinned
 * staging memory (grown on demand) live in the context.
 *
 * The CUDA glue every device file uses (the one device wait, the guard
 * that leaves the caller's current device as it was, the last-error slot)
 * is the device layer's, device/dev_cuda.h; gs__dev_wait_event and
 * gs__dev_cuda here give it the context's deadline and words.
 */
#include "algo/sched/algo_dev.h"

#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cuda_runtime.h>

#include "core/clock.h"
#include "core/dtype.h"
#include "core/error.h"
#include "core/log.h"
#ifdef GS_WITH_NCCL
#include "device/nccl_engine.h"
#endif

#define DEV_ALIGN 256
#define DEV_AGREE_BYTES 32 /* host id (8), GPU UUID (16), NCCL wish (4), CUDA-aware MPI (4) */

static size_t dev_align(size_t x)
{
    return (x + DEV_ALIGN - 1) & ~(size_t)(DEV_ALIGN - 1);
}

gs_status_t gs__dev_enter(const gs__algo_ctx_t *ctx, gs__dev_guard_t *g)
{
    g->changed = 0;
    if (ctx->dev == NULL) {
        return gs__error_set(GS_ERR_INTERNAL, "%s: device call without a device context",
                             ctx->opname);
    }
    return gs__dev_cuda(ctx, gs__dev_guard_enter(g, ctx->dev->device),
                        "cudaSetDevice (the communicator's device)");
}

/* Every rank's record for the agreement: host id, GPU UUID, NCCL wish. */
/* The context's resources on @p device (ctx->dev, freed by gs__dev_free, also
 * after a failure here). */
static gs_status_t dev_create_for(gs__algo_ctx_t *ctx, int device, gs__dev_t **out)
{
    const gs_status_t status = gs__dev_create(device, ctx->opname, out);

    ctx->dev = *out;
    return status;
}

static gs_status_t dev_record(const gs__algo_ctx_t *ctx, int device, uint64_t host_id, int want,
                              int mpi_cuda, uint8_t rec[DEV_AGREE_BYTES])
{
    struct cudaDeviceProp prop;
    const uint32_t w = (uint32_t)want;
    const uint32_t m = (uint32_t)mpi_cuda;
    gs_status_t status =
        gs__dev_cuda(ctx, cudaGetDeviceProperties(&prop, device), "cudaGetDeviceProperties");

    memset(rec, 0, DEV_AGREE_BYTES);
    if (status != GS_OK) {
        return status;
    }
    memcpy(rec, &host_id, sizeof(host_id));
    memcpy(rec + 8, prop.uuid.bytes, 16);
    memcpy(rec + 24, &w, sizeof(w));
    memcpy(rec + 28, &m, sizeof(m));
    return GS_OK;
}

/* A host collective inside the operation in flight (its messages use the
 * operation's sequence number; every rank runs the same ones in the same
 * order, so they match). These are setup messages of a few dozen bytes:
 * the ring all-gather and the binomial broadcast serve them, chosen here
 * once rather than planned (a schedule never calls the planner). */
static gs_status_t dev_host_coll(gs__algo_ctx_t *ctx, gs__coll_kind_t kind, void *sendbuf,
                                 void *recvbuf, size_t count, int root)
{
    const gs__algo_plan_t plan = {.path = GS_PATH_HOST,
                                  .scheme = GS_SCHEME_PLAIN,
                                  .algo =
                                      (kind == GS_COLL_ALLGATHER) ? GS_ALGO_RING : GS_ALGO_BINOMIAL,
                                  .why = "device setup"};
    gs__coll_desc_t sub;

    memset(&sub, 0, sizeof(sub));
    sub.kind = kind;
    sub.sendbuf = sendbuf;
    sub.recvbuf = recvbuf;
    sub.count = count;
    sub.dtype = GS_DTYPE_U8;
    sub.op = GS_OP_SUM;
    sub.root = root;
    sub.algo = plan.algo;
    sub.mem = GS_MEM_HOST;
    return gs__algo_run_host(ctx, &sub, &plan);
}

/* gs__dev_setup's first call, with d->device current. */
static gs_status_t dev_setup(gs__algo_ctx_t *ctx, const gs__coll_desc_t *d,
                             const gs__algo_dev_params_t *params)
{
    gs__dev_t *dev = ctx->dev;
    uint8_t mine[DEV_AGREE_BYTES];
    uint8_t *all = NULL;
    int share = 0, want_all = 1, required = 0, mpi_all = 1;
    int want = params->want_nccl;
#ifdef GS_WITH_NCCL
    int no_nccl = 0;
#endif
    gs_status_t status = GS_OK;

    if (dev == NULL) {
        status = dev_create_for(ctx, d->device, &dev);
        if (dev == NULL) {
            return status;
        }
    }
    dev->stage_bytes = (params->stage_bytes > 0) ? params->stage_bytes : ((size_t)4 << 20);
#ifdef GS_WITH_NCCL
    /* NCCL is loaded on first use (src/device/nccl_lib.c): without it, "when
     * possible" is staged; "required" fails below with the loader's sentence. */
    if ((status == GS_OK) && (want == 1)) {
        char why[GS_ERROR_MSG_MAX];

        if (!gs__nccl_loadable(why, sizeof(why))) {
            GS_INFO(CUDA, "%s: %s", ctx->opname, why);
            want = 0;
            no_nccl = 1;
        }
    }
#endif
    if (status == GS_OK) {
        status = dev_record(ctx, d->device, params->host_id, want, params->mpi_cuda, mine);
    }
    if (status == GS_OK) {
        all = malloc((size_t)ctx->size * DEV_AGREE_BYTES);
        if (all == NULL) {
            status = gs__error_set(GS_ERR_NO_MEMORY, "%s: out of memory", ctx->opname);
        }
    }
    if (status == GS_OK) {
        status = dev_host_coll(ctx, GS_COLL_ALLGATHER, mine, all, DEV_AGREE_BYTES, 0);
    }
    for (int i = 0; (status == GS_OK) && (i < ctx->size); i++) {
        uint32_t w;

        memcpy(&w, all + (size_t)i * DEV_AGREE_BYTES + 24, sizeof(w));
        want_all &= (w > 0);
        {
            uint32_t m;

            memcpy(&m, all + (size_t)i * DEV_AGREE_BYTES + 28, sizeof(m));
            mpi_all &= (m > 0);
        }
        required |= (w == 2);
        for (int j = 0; j < i; j++) {
            if (memcmp(all + (size_t)i * DEV_AGREE_BYTES, all + (size_t)j * DEV_AGREE_BYTES, 24) ==
                0) {
                share = 1;
            }
        }
    }
    free(all);
    if (status != GS_OK) {
        return status;
    }
#ifndef GS_WITH_NCCL
    if (required) {
        return gs__error_set(GS_ERR_UNSUPPORTED,
                             "%s: GS_CUDA_PATH=nccl (or GS_TRANSPORT=nccl) but this gradsync was "
                             "built without NCCL",
                             ctx->opname);
    }
    ctx->dev_caps = mpi_all ? GS_DEV_CAP_MPI_CUDA : 0u;
    GS_INFO(CUDA,
            "device buffers on CUDA device %d: staged through host memory (built without "
            "NCCL%s)",
            dev->device, (share && want_all) ? "; ranks share a GPU too" : "");
#else
    if (required && (share || !want_all)) {
        return gs__error_set(
            GS_ERR_INVALID_USAGE,
            "%s: NCCL is required (GS_CUDA_PATH=nccl or GS_TRANSPORT=nccl) but %s: "
            "NCCL needs one GPU per rank; GS_CUDA_PATH=staged serves ranks that "
            "share a GPU",
            ctx->opname, share ? "two ranks share a GPU" : "some rank set GS_CUDA_PATH=staged");
    }
    ctx->dev_caps = mpi_all ? GS_DEV_CAP_MPI_CUDA : 0u;
    if (want_all && !share) {
        /* The id and, last, whether rank 0 could make one at all. */
        uint8_t msg[GS_NCCL_ID_BYTES + 1];
        gs_status_t idst = GS_OK;
        char idwhy[GS_ERROR_MSG_MAX] = "";

        memset(msg, 0, sizeof(msg));
        if (ctx->rank == 0) {
            idst = gs__nccl_unique_id(msg);
            if (idst != GS_OK) {
                snprintf(idwhy, sizeof(idwhy), "%s", gs__error_get());
            }
            msg[GS_NCCL_ID_BYTES] = (idst == GS_OK);
        }
        /* Every rank takes part in the broadcast, rank 0 even after a
         * failure, so that nobody waits on an id that will not come. */
        status = dev_host_coll(ctx, GS_COLL_BROADCAST, msg, msg, sizeof(msg), 0);
        if ((status == GS_OK) && (idst != GS_OK)) {
            gs__error_copy_in(idwhy); /* rank 0 says why in its own words */
            status = idst;
        } else if ((status == GS_OK) && (msg[GS_NCCL_ID_BYTES] != 1)) {
            status = gs__error_set(GS_ERR_NO_RESOURCE,
                                   "%s: rank 0 could not create the NCCL id (its log says why); "
                                   "GS_CUDA_PATH=staged avoids NCCL",
                                   ctx->opname);
        }
        if (status == GS_OK) {
            status = gs__nccl_create(msg, ctx->rank, ctx->size, dev->device,
                                     gs__now_ns() + ctx->timeout_ns, &dev->nccl);
        }
        if (status != GS_OK) {
            return status;
        }
        ctx->dev_caps |= GS_DEV_CAP_NCCL;
        GS_INFO(CUDA,
                "device buffers on CUDA device %d: NCCL %d for plain calls, staged "
                "otherwise",
                dev->device, gs__nccl_version());
    } else {
        GS_INFO(CUDA, "device buffers on CUDA device %d: staged through host memory (%s)",
                dev->device,
                share     ? "ranks share a GPU, which NCCL refuses"
                : no_nccl ? "libnccl.so.2 (or GS_NCCL_LIBRARY) could not be loaded"
                          : "GS_CUDA_PATH=staged, or no NCCL, on some rank");
    }
#endif
    dev->ready = 1;
    return GS_OK;
}

gs_status_t gs__dev_setup(gs__algo_ctx_t *ctx, const gs__coll_desc_t *d,
                          const gs__algo_dev_params_t *params)
{
    const gs__dev_t *dev = ctx->dev;
    gs__dev_guard_t guard;
    gs_status_t status;

    if ((dev != NULL) && dev->ready) {
        if (d->device != dev->device) {
            return gs__error_set(GS_ERR_INVALID_ARG,
                                 "%s: this communicator's device buffers are on CUDA device %d, "
                                 "this call's on device %d: use one device per communicator "
                                 "(as NCCL does)",
                                 ctx->opname, dev->device, d->device);
        }
        return GS_OK; /* the runner makes the device current for the call */
    }
    status = gs__dev_cuda(ctx, gs__dev_guard_enter(&guard, d->device), "cudaSetDevice");
    if (status == GS_OK) {
        status = dev_setup(ctx, d, params);
    }
    gs__dev_guard_leave(&guard);
    return status;
}

gs_status_t gs__dev_adopt(gs__algo_ctx_t *ctx, int device, struct gs__nccl *nccl,
                          size_t stage_bytes)
{
    gs__dev_t *dev = NULL;
    gs__dev_guard_t guard;
    gs_status_t status = gs__dev_cuda(ctx, gs__dev_guard_enter(&guard, device), "cudaSetDevice");

    if (status == GS_OK) {
        status = dev_create_for(ctx, device, &dev);
    }
#ifdef GS_WITH_NCCL
    if (dev != NULL) {
        dev->nccl = nccl; /* freed with the context from now on */
    } else {
        (void)gs__nccl_destroy(nccl);
    }
#else
    (void)nccl;
#endif
    if ((status != GS_OK) && (dev != NULL)) {
        (void)gs__dev_free(ctx, 1);
    } else if (status == GS_OK) {
        dev->stage_bytes = (stage_bytes > 0) ? stage_bytes : ((size_t)4 << 20);
        dev->ready = 1;
        ctx->dev_caps = (nccl != NULL) ? GS_DEV_CAP_NCCL : 0u;
    }
    gs__dev_guard_leave(&guard);
    return status;
}

void gs__dev_abort(gs__algo_ctx_t *ctx)
{
#ifdef GS_WITH_NCCL
    gs__dev_t *dev = ctx->dev;

    if ((dev != NULL) && (dev->nccl != NULL)) {
        (void)gs__nccl_abort(dev->nccl);
    }
#else
    (void)ctx;
#endif
}

gs_status_t gs__dev_run_guarded(gs__algo_ctx_t *ctx, gs__coll_desc_t *d,
                                const gs__algo_plan_t *plan,
                                gs_status_t (*run)(gs__algo_ctx_t *ctx, gs__coll_desc_t *d,
                                                   const gs__algo_plan_t *plan))
{
    gs__dev_guard_t guard;
    gs_status_t status = gs__dev_enter(ctx, &guard);

    if (status == GS_OK) {
        status = run(ctx, d, plan);
    }
    gs__dev_guard_leave(&guard);
    return status;
}

gs_status_t gs__dev_free(gs__algo_ctx_t *ctx, int abort)
{
    const gs_status_t status = gs__dev_destroy(ctx->dev, abort);

    ctx->dev = NULL;
    ctx->dev_caps = 0;
    return status;
}

/* gs__dev_test with the context's device current. */
static gs_status_t dev_test(gs__algo_ctx_t *ctx, gs__coll_desc_t *d)
{
    const cudaError_t err = (cudaError_t)gs__dev_query_event(d->event);

    if (err == cudaSuccess) {
        gs__dev_event_put(ctx, d->event);
        d->event = NULL;
        return GS_OK;
    }
    if (err != cudaErrorNotReady) {
        gs__dev_forget(ctx, d);
        return gs__dev_cuda(ctx, err, "cudaEventQuery (a non-blocking device call)");
    }
#ifdef GS_WITH_NCCL
    if (ctx->dev->nccl != NULL) {
        const gs_status_t status = gs__nccl_poll(ctx->dev->nccl);

        if ((status != GS_OK) && (status != GS_INPROGRESS)) {
            if (status != GS_ERR_ABORTED) {
                gs__nccl_fail(ctx->dev->nccl, "asynchronous error"); /* as a blocking wait does */
            }
            gs__dev_forget(ctx, d);
            return status;
        }
    }
#endif
    return GS_INPROGRESS;
}

gs_status_t gs__dev_test(gs__algo_ctx_t *ctx, gs__coll_desc_t *d)
{
    gs__dev_guard_t guard;
    gs_status_t status = gs__dev_enter(ctx, &guard);

    if (status == GS_OK) {
        status = dev_test(ctx, d);
    } else {
        gs__dev_forget(ctx, d);
    }
    gs__dev_guard_leave(&guard);
    return status;
}

void gs__dev_forget(gs__algo_ctx_t *ctx, gs__coll_desc_t *d)
{
    (void)ctx;
    if (d->event != NULL) {
        /* The event may still be pending on a stream: destroying it is safe
         * (CUDA releases it once recorded work completes); pooling is not. */
        gs__dev_take_back(cudaEventDestroy((cudaEvent_t)d->event));
        d->event = NULL;
    }
}

/* ------------------------------------------------------------------ */
/* Staged path                                                         */
/* ------------------------------------------------------------------ */

/* Bytes the call reads from sendbuf and writes to recvbuf on this rank. */
static void staged_extent(const gs__algo_ctx_t *ctx, const gs__coll_desc_t *d, size_t *send_out,
                          size_t *recv_out)
{
    const size_t b = d->count * gs__dtype_size(d->dtype);
    const size_t n = (size_t)ctx->size;

    switch (d->kind) {
    case GS_COLL_BROADCAST:
        *send_out = (ctx->rank == d->root) ? b : 0;
        *recv_out = (ctx->rank == d->root) ? 0 : b;
        break;
    case GS_COLL_REDUCE:
        *send_out = b;
        *recv_out = (ctx->rank == d->root) ? b : 0;
        break;
    case GS_COLL_ALLGATHER:
        *send_out = b;
        *recv_out = n * b;
        break;
    case GS_COLL_REDUCE_SCATTER:
        *send_out = n * b;
        *recv_out = b;
        break;
    case GS_COLL_ALLTOALL:
        *send_out = n * b;
        *recv_out = n * b;
        break;
    default:
        *send_out = b;
        *recv_out = b;
        break;
    }
}

/* gs__dev_run_mpi with the context's device current. */
static gs_status_t dev_run_mpi(gs__algo_ctx_t *ctx, gs__coll_desc_t *d, const gs__algo_plan_t *plan)
{
    gs_status_t status;

    if ((d->flags & GS_COLL_F_STREAM_ORDERED) != 0) {
        return gs__error_set(GS_ERR_UNSUPPORTED,
                             "%s: GS_COLL_F_STREAM_ORDERED needs the NCCL path; a CUDA-aware MPI "
                             "call waits for its result",
                             ctx->opname);
    }
    /* MPI reads the buffers once the work queued before the call is done. */
    status = gs__dev_cuda(
        ctx, cudaEventRecord((cudaEvent_t)ctx->dev->stage_event, (cudaStream_t)d->stream),
        "cudaEventRecord (caller's stream)");
    if (status == GS_OK) {
        status = gs__dev_wait_event(ctx, ctx->dev->stage_event, "the caller's stream");
    }
    return (status == GS_OK) ? gs__algo_run_host(ctx, d, plan) : status;
}

gs_status_t gs__dev_run_mpi(gs__algo_ctx_t *ctx, gs__coll_desc_t *d, const gs__algo_plan_t *plan)
{
    return gs__dev_run_guarded(ctx, d, plan, dev_run_mpi);
}

/* gs__dev_run_staged with the context's device current. */
static gs_status_t dev_run_staged(gs__algo_ctx_t *ctx, gs__coll_desc_t *d,
                                  const gs__algo_plan_t *plan)
{
    gs__dev_t *dev = ctx->dev;
    const size_t esize = gs__dtype_size(d->dtype);
    const int in_place = (d->sendbuf == d->recvbuf);
    const int elementwise = (plan->scheme == GS_SCHEME_PLAIN) &&
                            ((d->kind == GS_COLL_ALLREDUCE) || (d->kind == GS_COLL_BROADCAST) ||
                             (d->kind == GS_COLL_REDUCE));
    cudaStream_t user = (cudaStream_t)d->stream;
    cudaStream_t cs;
    size_t send_b, recv_b, slice_elems, nslices, slot_send, slot_recv, slot_bytes;
    gs_status_t status;

    if ((d->kind == GS_COLL_SEND) || (d->kind == GS_COLL_RECV)) {
        return gs__error_set(GS_ERR_UNSUPPORTED,
                             "%s: point-to-point on device buffers needs NCCL (this communicator "
                             "stages device buffers: no NCCL, ranks sharing a GPU, or "
                             "GS_CUDA_PATH=staged)",
                             ctx->opname);
    }
    if (plan->device_codec) {
        return gs__dev_compressed(ctx, d, plan, 0);
    }
    if ((d->flags & GS_COLL_F_STREAM_ORDERED) != 0) {
        return gs__error_set(GS_ERR_UNSUPPORTED,
                             "%s: GS_COLL_F_STREAM_ORDERED needs the NCCL path; this call is "
                             "staged through host memory and waits for its result",
                             ctx->opname);
    }
    if ((dev == NULL) || (esize == 0)) {
        return gs__error_set(GS_ERR_INTERNAL, "%s: staged call without a device context",
                             ctx->opname);
    }
    cs = (cudaStream_t)dev->copy_stream;
    staged_extent(ctx, d, &send_b, &recv_b);
    if (elementwise) {
        slice_elems = dev->stage_bytes / esize;
        slice_elems = (slice_elems > 0) ? slice_elems : 1;
        nslices = (d->count == 0) ? 0 : (d->count - 1) / slice_elems + 1;
    } else {
        slice_elems = d->count;
        nslices = 1;
    }
    if (nslices == 0) {
        return GS_OK; /* count 0: no message in any algorithm */
    }
    /* Per slot: the send part and the recv part, or one part in place
     * (broadcast always: its one buffer is sent at the root, received
     * elsewhere). */
    {
        const size_t sl_send = elementwise ? slice_elems * esize : send_b;
        const size_t sl_recv = elementwise ? slice_elems * esize : recv_b;

        slot_send = in_place ? 0 : dev_align(sl_send);
        slot_recv = dev_align((in_place && (sl_send > sl_recv)) ? sl_send : sl_recv);
        slot_bytes = slot_send + slot_recv;
    }
    status = gs__dev_pinned(ctx, slot_bytes * GS_DEV_STAGE_SLOTS);
    /* The copies follow whatever the caller queued on its stream. */
    if (status == GS_OK) {
        status = gs__dev_cuda(ctx, cudaEventRecord((cudaEvent_t)dev->stage_event, user),
                              "cudaEventRecord (caller's stream)");
    }
    if (status == GS_OK) {
        status = gs__dev_cuda(ctx, cudaStreamWaitEvent(cs, (cudaEvent_t)dev->stage_event, 0),
                              "cudaStreamWaitEvent");
    }
    for (size_t k = 0; (k <= nslices) && (status == GS_OK); k++) {
        /* Step k: start the copy in of slice k, then run slice k - 1. */
        if (k < nslices) {
            const size_t off = k * slice_elems;
            const size_t cnt = elementwise
                                   ? ((d->count - off < slice_elems) ? d->count - off : slice_elems)
                                   : d->count;
            uint8_t *slot = dev->pinned + (k % GS_DEV_STAGE_SLOTS) * slot_bytes;
            const size_t bytes = elementwise ? cnt * esize : send_b;

            if (send_b > 0) { /* in place, the slot's one part takes it */
                status =
                    gs__dev_cuda(ctx,
                                 cudaMemcpyAsync(slot, (const uint8_t *)d->sendbuf + off * esize,
                                                 bytes, cudaMemcpyDeviceToHost, cs),
                                 "cudaMemcpyAsync (device to host)");
            }
            if (status == GS_OK) {
                status = gs__dev_cuda(
                    ctx, cudaEventRecord((cudaEvent_t)dev->slot_event[k % GS_DEV_STAGE_SLOTS], cs),
                    "cudaEventRecord");
            }
        }
        if ((k > 0) && (status == GS_OK)) {
            const size_t j = k - 1;
            const size_t off = j * slice_elems;
            const size_t cnt = elementwise
                                   ? ((d->count - off < slice_elems) ? d->count - off : slice_elems)
                                   : d->count;
            uint8_t *slot = dev->pinned + (j % GS_DEV_STAGE_SLOTS) * slot_bytes;
            uint8_t *hrecv = slot + slot_send; /* == slot in place */
            const size_t rbytes = elementwise ? cnt * esize : recv_b;
            gs__coll_desc_t sub = *d;

            status = gs__dev_wait_event(ctx, (cudaEvent_t)dev->slot_event[j % GS_DEV_STAGE_SLOTS],
                                        "the staging copy to the host");
            if (status == GS_OK) {
                sub.mem = GS_MEM_HOST;
                sub.count = cnt;
                sub.sendbuf = slot;
                sub.recvbuf = hrecv;
                status = gs__algo_run_host(ctx, &sub, plan);
            }
            if ((status == GS_OK) && (recv_b > 0)) {
                status = gs__dev_cuda(ctx,
                                      cudaMemcpyAsync((uint8_t *)d->recvbuf + off * esize, hrecv,
                                                      rbytes, cudaMemcpyHostToDevice, cs),
                                      "cudaMemcpyAsync (host to device)");
            }
        }
    }
    /* The result is ordered before later work on the caller's stream, and
     * the call returns once it is there. */
    if (status == GS_OK) {
        status = gs__dev_cuda(ctx, cudaEventRecord((cudaEvent_t)dev->stage_event, cs),
                              "cudaEventRecord (copy stream)");
    }
    if (status == GS_OK) {
        status = gs__dev_cuda(ctx, cudaStreamWaitEvent(user, (cudaEvent_t)dev->stage_event, 0),
                              "cudaStreamWaitEvent (caller's stream)");
    }
    if (status == GS_OK) {
        status = gs__dev_wait_event(ctx, (cudaEvent_t)dev->stage_event,
                                    "the staging copy back to the device");
    }
    return status;
}

gs_status_t gs__dev_run_staged(gs__algo_ctx_t *ctx, gs__coll_desc_t *d, const gs__algo_plan_t *plan)
{
    return gs__dev_run_guarded(ctx, d, plan, dev_run_staged);
}
