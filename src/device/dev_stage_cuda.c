/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A communicator's device resources (device/dev_stage.h): created on its
 * first device call, grown on demand, freed at destroy.
 */
#include "device/dev_stage.h"

#include <stdlib.h>

#include <cuda_runtime.h>

#include "core/error.h"
#ifdef GS_WITH_NCCL
#include "device/nccl_engine.h"
#endif

gs_status_t gs__dev_create(int device, const char *opname, gs__dev_t **out)
{
    gs__dev_t *dev = calloc(1, sizeof(*dev));
    gs_status_t status;

    if (dev == NULL) {
        return gs__error_set(GS_ERR_NO_MEMORY, "%s: out of memory for the device context", opname);
    }
    dev->device = device;
    status = gs__dev_cuda_status(
        cudaStreamCreateWithFlags((cudaStream_t *)&dev->copy_stream, cudaStreamNonBlocking), opname,
        "cudaStreamCreateWithFlags (staging copies)");
    for (int s = 0; (s < GS_DEV_STAGE_SLOTS) && (status == GS_OK); s++) {
        status = gs__dev_cuda_status(
            cudaEventCreateWithFlags((cudaEvent_t *)&dev->slot_event[s], cudaEventDisableTiming),
            opname, "cudaEventCreateWithFlags");
    }
    if (status == GS_OK) {
        status = gs__dev_cuda_status(
            cudaEventCreateWithFlags((cudaEvent_t *)&dev->stage_event, cudaEventDisableTiming),
            opname, "cudaEventCreateWithFlags");
    }
    *out = dev;
    return status;
}


gs_status_t gs__dev_destroy(gs__dev_t *dev, int abort)
{
    gs_status_t first = GS_OK;
    gs__dev_guard_t guard;

    if (dev == NULL) {
        return GS_OK;
    }
    /* Freed whatever happens; the frees' own errors are of no use to anyone. */
    gs__dev_take_back((cudaError_t)gs__dev_guard_enter(&guard, dev->device));
#ifdef GS_WITH_NCCL
    if (dev->nccl != NULL) {
        if (abort) {
            (void)gs__nccl_abort(dev->nccl);
        }
        first = gs__nccl_destroy(dev->nccl);
    }
#else
    (void)abort;
#endif
    for (int i = 0; i < dev->nevents; i++) {
        gs__dev_take_back(cudaEventDestroy((cudaEvent_t)dev->events[i]));
    }
    free(dev->events);
    for (int s = 0; s < GS_DEV_STAGE_SLOTS; s++) {
        if (dev->slot_event[s] != NULL) {
            gs__dev_take_back(cudaEventDestroy((cudaEvent_t)dev->slot_event[s]));
        }
    }
    if (dev->stage_event != NULL) {
        gs__dev_take_back(cudaEventDestroy((cudaEvent_t)dev->stage_event));
    }
    if (dev->copy_stream != NULL) {
        gs__dev_take_back(cudaStreamDestroy((cudaStream_t)dev->copy_stream));
    }
    if (dev->pinned != NULL) {
        gs__dev_take_back(cudaFreeHost(dev->pinned));
    }
    if (dev->dwork != NULL) {
        gs__dev_take_back(cudaFree(dev->dwork));
    }
    free(dev);
    gs__dev_guard_leave(&guard);
    return first;
}

/* ------------------------------------------------------------------ */
/* Completion events of non-blocking device calls                      */
/* ------------------------------------------------------------------ */

gs_status_t gs__dev_pool_get(gs__dev_t *dev, const char *opname, void **ev_out)
{

    if (dev->nevents > 0) {
        *ev_out = dev->events[--dev->nevents];
        return GS_OK;
    }
    return gs__dev_cuda_status(
        cudaEventCreateWithFlags((cudaEvent_t *)ev_out, cudaEventDisableTiming), opname,
        "cudaEventCreateWithFlags");
}

void gs__dev_pool_put(gs__dev_t *dev, void *ev)
{

    if (ev == NULL) {
        return;
    }
    if (dev->nevents == dev->events_cap) {
        const int cap = (dev->events_cap > 0) ? 2 * dev->events_cap : 8;
        void **grown = realloc(dev->events, (size_t)cap * sizeof(void *));

        if (grown == NULL) {
            gs__dev_take_back(
                cudaEventDestroy((cudaEvent_t)ev)); /* keep going without pooling it */
            return;
        }
        dev->events = grown;
        dev->events_cap = cap;
    }
    dev->events[dev->nevents++] = ev;
}


gs_status_t gs__dev_stage_stream_wait(gs__dev_t *dev, void *stream, const gs__dev_wait_t *w,
                                      const char *what)
{
    const gs_status_t status =
        gs__dev_cuda_status(cudaEventRecord((cudaEvent_t)dev->stage_event, (cudaStream_t)stream),
                            w->opname, "cudaEventRecord (to wait for a stream)");

    return (status == GS_OK) ? gs__dev_poll_event(dev->stage_event, w, what) : status;
}


gs_status_t gs__dev_stage_pinned(gs__dev_t *dev, size_t bytes, const gs__dev_wait_t *w)
{
    void *p = NULL;
    gs_status_t status;

    if (bytes <= dev->pinned_cap) {
        return GS_OK;
    }
    /* The previous buffer may still be read by copies queued before this
     * call: the copy stream must be idle first. */
    status = gs__dev_stage_stream_wait(dev, dev->copy_stream, w,
                                       "the staging copies (before growing the staging buffer)");
    if (status != GS_OK) {
        return status;
    }
    if (dev->pinned != NULL) {
        gs__dev_take_back(cudaFreeHost(dev->pinned));
        dev->pinned = NULL;
        dev->pinned_cap = 0;
    }
    status = gs__dev_cuda_status(cudaHostAlloc(&p, bytes, cudaHostAllocPortable), w->opname,
                                 "cudaHostAlloc (staging buffer)");
    if (status == GS_OK) {
        dev->pinned = p;
        dev->pinned_cap = bytes;
    }
    return status;
}


gs_status_t gs__dev_stage_workspace(gs__dev_t *dev, size_t bytes, void *stream,
                                    const gs__dev_wait_t *w, void **out)
{
    void *p = NULL;
    gs_status_t status;

    if (bytes > dev->dwork_cap) {
        /* Work queued on the caller's stream may still use the old one. */
        status = gs__dev_stage_stream_wait(
            dev, stream, w, "the caller's stream (before growing the device workspace)");
        if (status != GS_OK) {
            return status;
        }
        if (dev->dwork != NULL) {
            gs__dev_take_back(cudaFree(dev->dwork));
            dev->dwork = NULL;
            dev->dwork_cap = 0;
        }
        status =
            gs__dev_cuda_status(cudaMalloc(&p, bytes), w->opname, "cudaMalloc (device workspace)");
        if (status != GS_OK) {
            return status;
        }
        dev->dwork = p;
        dev->dwork_cap = bytes;
    }
    *out = dev->dwork;
    return GS_OK;
}
