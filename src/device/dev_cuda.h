/* SPDX-License-Identifier: Apache-2.0 */
/*
 * CUDA glue of the device layer (CUDA builds only, dev_cuda.c): what every
 * device file of the library needs of the runtime, and nothing of an
 * algorithm or a communicator.
 */
#ifndef GS_DEVICE_DEV_CUDA_H
#define GS_DEVICE_DEV_CUDA_H

#include <stdint.h>

#include "gradsync/status.h"

struct gs__nccl;

/* Take back a cudaError_t this library met and does not report (a failed
 * free, a failed guard on a path that goes on): clear the thread's
 * last-error slot when it holds @p err. */
void gs__dev_take_back(int err);

/* GS_ERR_CUDA "<opname>: <what> failed: <CUDA's words>" for a cudaError_t
 * other than 0, else GS_OK; the error is taken back from the thread's
 * last-error slot (cleared when the slot holds it; a sticky error stays). */
gs_status_t gs__dev_cuda_status(int err, const char *opname, const char *what);

/* cudaEventQuery of @p ev (a cudaEvent_t), its "not ready" taken back. */
int gs__dev_query_event(void *ev);

/*
 * The caller's current CUDA device, kept across an entry of the device
 * layer. enter makes @p device current on the calling thread when it is not
 * already (cudaGetDevice, then cudaSetDevice) and returns the cudaError_t
 * of that (0 on success); leave restores the device enter found. Call
 * leave once after every enter, whatever enter returned (it does nothing
 * when enter changed nothing). Nested guards are free: the inner one finds
 * its device current already.
 *
 * One exception, as PyTorch's device guard makes it: leave does not go
 * back to a device that has no primary context, i.e. one the process never
 * used (cudaGetDevice says 0 on a thread that has not chosen a device).
 * cudaSetDevice would create a context there, some hundreds of MiB on
 * another rank's GPU, for every worker thread; such a thread keeps
 * @p device current instead. leave never changes the error text and logs
 * a failed restore at WARN.
 */
typedef struct gs__dev_guard {
    int prev;    /* the thread's current device at enter */
    int changed; /* enter made another device current */
} gs__dev_guard_t;

int gs__dev_guard_enter(gs__dev_guard_t *g, int device);
void gs__dev_guard_leave(gs__dev_guard_t *g);

/* What a device wait needs of its caller: the no-progress timeout, the
 * NCCL communicator to poll (or NULL), and the words of its errors. */
typedef struct gs__dev_wait {
    uint64_t timeout_ns;
    struct gs__nccl *nccl;
    const char *opname;
    int rank;
} gs__dev_wait_t;

/*
 * The one device wait: poll @p ev (a cudaEvent_t) until it completes,
 * yielding, then sleeping up to about 128 us between polls (gs__poll_pause).
 * Each poll takes back the "not ready" it may leave in the runtime's
 * last-error slot and, with w->nccl, reads NCCL's asynchronous state (also
 * once the event completed: kernels of a failed communicator end early).
 * Blocking. @p what names what the event marks, for the error text.
 * @return GS_OK; GS_ERR_TIMEOUT after w->timeout_ns (NCCL, if any, is
 *         aborted: its kernels may be what hangs); GS_ERR_CUDA (the query
 *         failed; NCCL aborted); NCCL's asynchronous error (NCCL aborted);
 *         GS_ERR_ABORTED when NCCL was aborted meanwhile.
 */
gs_status_t gs__dev_poll_event(void *ev, const gs__dev_wait_t *w, const char *what);

#endif /* GS_DEVICE_DEV_CUDA_H */
