/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The device paths of the algorithm layer (CUDA builds only): the device
 * context a communicator creates on its first call with device buffers,
 * and the two runners gs__algo_plan can pick for them. algo_dev_cuda.c
 * sets the context up and stages device buffers through pinned host
 * memory; algo_nccl_cuda.c hands plain calls to NCCL. Both run on the
 * communicator's worker thread (or the caller's, for a blocking call run
 * inline), one operation at a time.
 *
 * Three rules every entry here keeps, whichever thread it runs on:
 * - the calling thread's current CUDA device is left as it was found
 *   (gs__dev_guard_enter/leave around everything that needs the
 *   communicator's device);
 * - every wait for the GPU is gs__dev_wait_event (or gs__dev_wait_stream):
 *   a poll with the operation's no-progress deadline (GS_TIMEOUT_MS) and
 *   NCCL's asynchronous errors, never cudaStreamSynchronize;
 * - the runtime's per-thread last-error slot is handed back as found:
 *   an error of ours (a "not ready" answer included) is taken back after
 *   it is read, so that neither a later kernel launch of ours nor the
 *   caller's own cudaGetLastError() sees it.
 */
#ifndef GS_ALGO_SCHED_ALGO_DEV_H
#define GS_ALGO_SCHED_ALGO_DEV_H

#include "algo/sched/sched.h"

#ifdef GS_WITH_CUDA
#include "device/dev_cuda.h"
#include "device/dev_stage.h"
#endif

#ifdef GS_WITH_CUDA

/* What the device layer's waits need of the context: its no-progress
 * timeout, its NCCL communicator (polled for asynchronous errors) and the
 * words of its errors. */
static inline gs__dev_wait_t gs__dev_wait_of(const gs__algo_ctx_t *ctx)
{
    const gs__dev_wait_t w = {.timeout_ns = ctx->timeout_ns,
                              .nccl = (ctx->dev != NULL) ? ctx->dev->nccl : NULL,
                              .opname = ctx->opname,
                              .rank = ctx->rank};

    return w;
}

/* GS_ERR_CUDA naming ctx->opname, @p what and CUDA's words for a
 * cudaError_t other than 0, else GS_OK (gs__dev_cuda_status). */
static inline gs_status_t gs__dev_cuda(const gs__algo_ctx_t *ctx, int err, const char *what)
{
    return gs__dev_cuda_status(err, ctx->opname, what);
}

/* The one device wait with the context's deadline (gs__dev_poll_event):
 * GS_OK; GS_ERR_TIMEOUT after GS_TIMEOUT_MS without the event completing,
 * naming @p what (NCCL, if any, is aborted); GS_ERR_CUDA; NCCL's
 * asynchronous error; GS_ERR_ABORTED. */
static inline gs_status_t gs__dev_wait_event(const gs__algo_ctx_t *ctx, void *ev, const char *what)
{
    const gs__dev_wait_t w = gs__dev_wait_of(ctx);

    return gs__dev_poll_event(ev, &w, what);
}

/* Wait until @p stream has passed the work queued on it so far (what
 * replaces cudaStreamSynchronize; gs__dev_stage_stream_wait). */
static inline gs_status_t gs__dev_wait_stream(const gs__algo_ctx_t *ctx, void *stream,
                                              const char *what)
{
    const gs__dev_wait_t w = gs__dev_wait_of(ctx);

    return gs__dev_stage_stream_wait(ctx->dev, stream, &w, what);
}

/* The context's pinned staging memory of at least @p bytes
 * (ctx->dev->pinned) and device workspace of at least @p bytes (*out):
 * gs__dev_stage_pinned and gs__dev_stage_workspace with its deadline. */
static inline gs_status_t gs__dev_pinned(gs__algo_ctx_t *ctx, size_t bytes)
{
    const gs__dev_wait_t w = gs__dev_wait_of(ctx);

    return gs__dev_stage_pinned(ctx->dev, bytes, &w);
}

static inline gs_status_t gs__dev_workspace(gs__algo_ctx_t *ctx, size_t bytes, void *stream,
                                            void **out)
{
    const gs__dev_wait_t w = gs__dev_wait_of(ctx);

    return gs__dev_stage_workspace(ctx->dev, bytes, stream, &w, out);
}

/* A completion event from the context's pool, and its return. */
static inline gs_status_t gs__dev_event_get(gs__algo_ctx_t *ctx, void **ev_out)
{
    return gs__dev_pool_get(ctx->dev, ctx->opname, ev_out);
}

static inline void gs__dev_event_put(gs__algo_ctx_t *ctx, void *ev)
{
    gs__dev_pool_put(ctx->dev, ev);
}

/* What the communicator asks of the device layer at setup. */
typedef struct gs__algo_dev_params {
    int want_nccl;      /* 0: never (GS_CUDA_PATH=staged), 1: when possible, 2: required */
    int mpi_cuda;       /* 1: the host transport is a CUDA-aware MPI (GS_MPI_CUDA_AWARE) */
    size_t stage_bytes; /* GS_CUDA_STAGE_BYTES */
    uint64_t host_id;   /* this rank's host (core/host.h) */
} gs__algo_dev_params_t;

/*
 * Set up ctx->dev on the first call with device buffers on d->device
 * (collective: every rank calls it on its first device call, which is
 * the same operation everywhere); on later calls only check that
 * d->device is the context's device (@p params may then be NULL). Ranks all-gather (host, GPU UUID); NCCL
 * is used when it is built in, wanted, and no two ranks share a GPU (NCCL
 * refuses that); rank 0 then makes the NCCL id and broadcasts it over the
 * host transport. Sets ctx->dev_caps identically on every rank. Returns
 * GS_OK; GS_ERR_CUDA naming the call; GS_ERR_INVALID_USAGE when NCCL is
 * required but ranks share a GPU; the host exchange's errors.
 */
gs_status_t gs__dev_setup(gs__algo_ctx_t *ctx, const gs__coll_desc_t *d,
                          const gs__algo_dev_params_t *params);

/* Give ctx (a new communicator's, before its first call) a device context
 * on @p device that already has the NCCL communicator @p nccl (from
 * ncclCommSplit of its parent's), set up and agreed: the split did what
 * gs__dev_setup's exchange would. Takes @p nccl (destroys it on failure).
 * Returns GS_OK or GS_ERR_CUDA. */
gs_status_t gs__dev_adopt(gs__algo_ctx_t *ctx, int device, struct gs__nccl *nccl,
                          size_t stage_bytes);

/* Free ctx->dev (aborting NCCL first when @p abort). Always frees. */
gs_status_t gs__dev_free(gs__algo_ctx_t *ctx, int abort);

/* Abort the NCCL communicator of ctx, if any (any thread). */
void gs__dev_abort(gs__algo_ctx_t *ctx);

/* Runners of the device paths (gs__algo_plan's path_table); each makes
 * the context's device current for the call and restores the caller's.
 * The CUDA-aware MPI runner waits for the caller's stream (MPI reads device
 * memory as the host sees it), then hands the buffers to the MPI
 * transport's native collective; the result is there when it returns. */
gs_status_t gs__dev_run_staged(gs__algo_ctx_t *ctx, gs__coll_desc_t *d,
                               const gs__algo_plan_t *plan);
gs_status_t gs__dev_run_mpi(gs__algo_ctx_t *ctx, gs__coll_desc_t *d, const gs__algo_plan_t *plan);
#ifdef GS_WITH_NCCL
/* Enqueue *d on d->stream through NCCL. A blocking call waits for the
 * result (deadline, NCCL's asynchronous errors polled); a stream-ordered
 * one returns GS_OK once enqueued; a non-blocking one records *event_out
 * (via d->event) and returns GS_INPROGRESS for gs__dev_test. */
gs_status_t gs__dev_run_nccl(gs__algo_ctx_t *ctx, gs__coll_desc_t *d, const gs__algo_plan_t *plan);
#endif

/* A non-blocking device call left in flight: GS_INPROGRESS until its
 * event completes, then GS_OK (the event goes back to the pool), or
 * NCCL's error. */
gs_status_t gs__dev_test(gs__algo_ctx_t *ctx, gs__coll_desc_t *d);


/*
 * A compressed call on device buffers with the codec kernels
 * (algo_comp_dev_cuda.c): the two-phase all-reduce, or the block-wise
 * reduce-scatter or all-gather of fixed blocks; f32, no zstd, as
 * gs__algo_plan allows (plan->device_codec). The payloads move with
 * grouped NCCL sends and receives (@p over_nccl) or through pinned host
 * memory over the host transport. Waits for the result. Returns GS_OK,
 * GS_ERR_PROTOCOL for a bad payload (naming the rank), GS_ERR_CUDA, or the
 * exchange's errors.
 */
gs_status_t gs__dev_compressed(gs__algo_ctx_t *ctx, gs__coll_desc_t *d, const gs__algo_plan_t *plan,
                               int over_nccl);


/* The event of a call in flight is released without waiting (destroy). */
void gs__dev_forget(gs__algo_ctx_t *ctx, gs__coll_desc_t *d);

/* Run @p run on *d with the context's device current (gs__dev_enter), and
 * the caller's made current again after it, whatever either returned: the
 * frame of every device path runner. Returns run's status or the guard's. */
gs_status_t gs__dev_run_guarded(gs__algo_ctx_t *ctx, gs__coll_desc_t *d,
                                const gs__algo_plan_t *plan,
                                gs_status_t (*run)(gs__algo_ctx_t *ctx, gs__coll_desc_t *d,
                                                   const gs__algo_plan_t *plan));

/* gs__dev_guard_enter on the context's device, the failure as GS_ERR_CUDA
 * naming ctx->opname (GS_ERR_INTERNAL without a device context). Call
 * gs__dev_guard_leave after it in every case. */
gs_status_t gs__dev_enter(const gs__algo_ctx_t *ctx, gs__dev_guard_t *g);

#endif /* GS_WITH_CUDA */

#endif /* GS_ALGO_SCHED_ALGO_DEV_H */
