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
#endif

#ifdef GS_WITH_CUDA

/* Pinned host staging buffer and its slices in flight. */
#define GS_DEV_STAGE_SLOTS 2

struct gs_nccl;

typedef struct gs_algo_dev {
    int device;                           /* CUDA device the resources belong to */
    int ready;                            /* setup done (capabilities agreed by every rank) */
    void *copy_stream;                    /* cudaStream_t of the staging copies */
    void *slot_event[GS_DEV_STAGE_SLOTS]; /* D2H of slot s finished */
    void *stage_event; /* the copy stream has caught up with the caller's stream */
    uint8_t *pinned;   /* staging memory (cudaHostAlloc), grown on demand */
    size_t pinned_cap;
    void *dwork; /* device workspace of the compressed path, grown on demand */
    size_t dwork_cap;
    size_t stage_bytes;   /* slice of a pipelined staged call (GS_CUDA_STAGE_BYTES) */
    struct gs_nccl *nccl; /* NULL unless GS_DEV_CAP_NCCL */
    void **events;        /* completion events of non-blocking NCCL calls: a free list */
    int nevents;
    int events_cap;
} gs_algo_dev_t;

/* What the communicator asks of the device layer at setup. */
typedef struct gs_algo_dev_params {
    int want_nccl;      /* 0: never (GS_CUDA_PATH=staged), 1: when possible, 2: required */
    int mpi_cuda;       /* 1: the host transport is a CUDA-aware MPI (GS_MPI_CUDA_AWARE) */
    size_t stage_bytes; /* GS_CUDA_STAGE_BYTES */
    uint64_t host_id;   /* this rank's host (core/host.h) */
} gs_algo_dev_params_t;

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
gs_status_t gs__dev_setup(gs_algo_ctx_t *ctx, const gs_coll_desc_t *d,
                          const gs_algo_dev_params_t *params);

/* Give ctx (a new communicator's, before its first call) a device context
 * on @p device that already has the NCCL communicator @p nccl (from
 * ncclCommSplit of its parent's), set up and agreed: the split did what
 * gs__dev_setup's exchange would. Takes @p nccl (destroys it on failure).
 * Returns GS_OK or GS_ERR_CUDA. */
gs_status_t gs__dev_adopt(gs_algo_ctx_t *ctx, int device, struct gs_nccl *nccl, size_t stage_bytes);

/* Free ctx->dev (aborting NCCL first when @p abort). Always frees. */
gs_status_t gs__dev_free(gs_algo_ctx_t *ctx, int abort);

/* Abort the NCCL communicator of ctx, if any (any thread). */
void gs__dev_abort(gs_algo_ctx_t *ctx);

/* Runners of the device paths (gs__algo_plan's path_table); each makes
 * the context's device current for the call and restores the caller's.
 * The CUDA-aware MPI runner waits for the caller's stream (MPI reads device
 * memory as the host sees it), then hands the buffers to the MPI
 * transport's native collective; the result is there when it returns. */
gs_status_t gs__dev_run_staged(gs_algo_ctx_t *ctx, gs_coll_desc_t *d, const gs_algo_plan_t *plan);
gs_status_t gs__dev_run_mpi(gs_algo_ctx_t *ctx, gs_coll_desc_t *d, const gs_algo_plan_t *plan);
#ifdef GS_WITH_NCCL
/* Enqueue *d on d->stream through NCCL. A blocking call waits for the
 * result (deadline, NCCL's asynchronous errors polled); a stream-ordered
 * one returns GS_OK once enqueued; a non-blocking one records *event_out
 * (via d->event) and returns GS_INPROGRESS for gs__dev_test. */
gs_status_t gs__dev_run_nccl(gs_algo_ctx_t *ctx, gs_coll_desc_t *d, const gs_algo_plan_t *plan);
#endif

/* A non-blocking device call left in flight: GS_INPROGRESS until its
 * event completes, then GS_OK (the event goes back to the pool), or
 * NCCL's error. */
gs_status_t gs__dev_test(gs_algo_ctx_t *ctx, gs_coll_desc_t *d);

/* GS_ERR_CUDA naming @p what and CUDA's own words for a cudaError_t other than 0, else GS_OK;
 * the error is taken back from the thread's last-error slot (cleared when
 * the slot holds it; a sticky error stays). */
gs_status_t gs__dev_cuda(const gs_algo_ctx_t *ctx, int err, const char *what);

/*
 * The one device wait (device/dev_cuda.h's gs__dev_poll_event with the
 * context's deadline, NCCL and words): poll @p ev (a cudaEvent_t) until it completes,
 * yielding, then sleeping up to about 128 us between polls. Each poll
 * takes back the "not ready" it may leave in the runtime's last-error
 * slot, and when the context has NCCL also reads NCCL's asynchronous state
 * (also once the event completed: kernels of a failed communicator end
 * early). Blocking, owner thread of the context. @p what names what the
 * event marks ("the caller's stream (before growing the device
 * workspace)") for the error text.
 * @return GS_OK; GS_ERR_TIMEOUT when the event has not completed within the
 *         context's no-progress timeout (GS_TIMEOUT_MS), naming @p what and
 *         the time (NCCL, if any, is aborted: its kernels may be what
 *         hangs); GS_ERR_CUDA (the query failed; NCCL aborted); NCCL's
 *         asynchronous error as gs__nccl_poll() maps it (NCCL aborted),
 *         GS_ERR_ABORTED when NCCL was aborted meanwhile.
 */
gs_status_t gs__dev_wait_event(const gs_algo_ctx_t *ctx, void *ev, const char *what);

/* Wait (gs__dev_wait_event) until @p stream (a cudaStream_t) has passed
 * the work queued on it so far: the context's stage event is recorded
 * there and polled. What replaces cudaStreamSynchronize. */
gs_status_t gs__dev_wait_stream(const gs_algo_ctx_t *ctx, void *stream, const char *what);

/* Pinned host memory of at least @p bytes (ctx->dev->pinned, grown once the
 * copy stream is idle); device memory of at least @p bytes (*out, grown
 * once @p stream is idle). Both wait with gs__dev_wait_stream. */
gs_status_t gs__dev_pinned(gs_algo_ctx_t *ctx, size_t bytes);
gs_status_t gs__dev_workspace(gs_algo_ctx_t *ctx, size_t bytes, void *stream, void **out);

/*
 * The two-phase compressed all-reduce on device buffers with the codec
 * kernels (algo_comp_dev_cuda.c): f32, no zstd, as gs__algo_plan allows
 * (plan->device_codec). The payloads move with grouped NCCL sends and
 * receives (@p over_nccl) or through pinned host memory over the host
 * transport. Waits for the result. Returns GS_OK, GS_ERR_PROTOCOL for a
 * bad payload (naming the rank), GS_ERR_CUDA, or the exchange's errors.
 */
gs_status_t gs__dev_comp_allreduce(gs_algo_ctx_t *ctx, gs_coll_desc_t *d,
                                   const gs_algo_plan_t *plan, int over_nccl);

/* A completion event from the context's pool (created when the pool is
 * empty), and its return. Returns GS_OK or GS_ERR_CUDA. */
gs_status_t gs__dev_event_get(gs_algo_ctx_t *ctx, void **ev_out);
void gs__dev_event_put(gs_algo_ctx_t *ctx, void *ev);

/* The event of a call in flight is released without waiting (destroy). */
void gs__dev_forget(gs_algo_ctx_t *ctx, gs_coll_desc_t *d);

/* gs__dev_guard_enter on the context's device, the failure as GS_ERR_CUDA
 * naming ctx->opname (GS_ERR_INTERNAL without a device context). Call
 * gs__dev_guard_leave after it in every case. */
gs_status_t gs__dev_enter(const gs_algo_ctx_t *ctx, gs_dev_guard_t *g);

#endif /* GS_WITH_CUDA */

#endif /* GS_ALGO_SCHED_ALGO_DEV_H */
