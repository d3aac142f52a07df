/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A communicator's device resources (CUDA builds only, dev_stage_cuda.c):
 * the copy stream and events of the staged path, the pinned staging
 * buffer and the device workspace (grown on demand, each only once the
 * work that may still read the old one has passed), the pool of
 * completion events, and the NCCL communicator when there is one. Knows no
 * algorithm: the waits get their deadline and words in a gs__dev_wait_t.
 * Owner thread only (the communicator's worker, or the caller of a
 * blocking call run inline), except where a call says otherwise.
 */
#ifndef GS_DEVICE_DEV_STAGE_H
#define GS_DEVICE_DEV_STAGE_H

#include <stddef.h>
#include <stdint.h>

#include "device/dev_cuda.h"
#include "gradsync/status.h"

/* Pinned host staging buffer and its slices in flight. */
#define GS_DEV_STAGE_SLOTS 2

struct gs__nccl;

typedef struct gs__dev {
    int device;                           /* CUDA device the resources belong to */
    int ready;                            /* setup done (capabilities agreed by every rank) */
    void *copy_stream;                    /* cudaStream_t of the staging copies */
    void *slot_event[GS_DEV_STAGE_SLOTS]; /* D2H of slot s finished */
    void *stage_event; /* the copy stream has caught up with the caller's stream */
    uint8_t *pinned;   /* staging memory (cudaHostAlloc), grown on demand */
    size_t pinned_cap;
    void *dwork; /* device workspace of the compressed path, grown on demand */
    size_t dwork_cap;
    size_t stage_bytes;    /* slice of a pipelined staged call (GS_CUDA_STAGE_BYTES) */
    struct gs__nccl *nccl; /* NULL unless GS_DEV_CAP_NCCL */
    void **events;         /* completion events of non-blocking NCCL calls: a free list */
    int nevents;
    int events_cap;
} gs__dev_t;

/* The resources on @p device (current: the caller's guard made it so):
 * the copy stream and the staging events. *out is set even on failure (a
 * part may have been made), and gs__dev_destroy frees it. Returns GS_OK,
 * GS_ERR_NO_MEMORY or GS_ERR_CUDA naming @p opname. */
gs_status_t gs__dev_create(int device, const char *opname, gs__dev_t **out);

/* Free @p dev (aborting its NCCL communicator first when @p abort), with
 * its device current for the frees. Always frees; returns NCCL's destroy
 * status (GS_OK without one). NULL: nothing. */
gs_status_t gs__dev_destroy(gs__dev_t *dev, int abort);

/* Wait (gs__dev_poll_event) until @p stream (a cudaStream_t) has passed the
 * work queued on it so far: dev->stage_event is recorded there and polled. */
gs_status_t gs__dev_stage_stream_wait(gs__dev_t *dev, void *stream, const gs__dev_wait_t *w,
                                      const char *what);

/* Pinned host memory of at least @p bytes (dev->pinned, grown once the copy
 * stream is idle); device memory of at least @p bytes (*out, grown once
 * @p stream is idle). Return GS_OK, GS_ERR_CUDA, or the wait's error. */
gs_status_t gs__dev_stage_pinned(gs__dev_t *dev, size_t bytes, const gs__dev_wait_t *w);
gs_status_t gs__dev_stage_workspace(gs__dev_t *dev, size_t bytes, void *stream,
                                    const gs__dev_wait_t *w, void **out);

/* A completion event from @p dev's pool (created when the pool is empty;
 * GS_ERR_CUDA naming @p opname), and its return (destroyed when the pool
 * cannot grow). */
gs_status_t gs__dev_pool_get(gs__dev_t *dev, const char *opname, void **ev_out);
void gs__dev_pool_put(gs__dev_t *dev, void *ev);

#endif /* GS_DEVICE_DEV_STAGE_H */
