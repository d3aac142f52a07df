/* SPDX-License-Identifier: Apache-2.0 */
/*
 * CUDA glue of the device layer (CUDA builds only; device/dev_cuda.h): the
 * runtime's last-error slot handed back as found, CUDA errors as statuses,
 * the guard that leaves the caller's current device as it was, and the one
 * device wait (an event polled against a deadline and NCCL's asynchronous
 * errors). Knows no algorithm and no communicator: the waits get their
 * deadline and words from the caller.
 */
#include "device/dev_cuda.h"

#include <pthread.h>
#include <string.h>

#include <cuda_runtime.h>

#include "core/clock.h"
#include "core/error.h"
#include "core/log.h"
#ifdef GS_WITH_NCCL
#include "device/nccl_engine.h"
#endif

/*
 * The runtime keeps one last error per host thread: every call that fails
 * writes it, cudaGetLastError() reads and clears it. A query that answers
 * "not ready" may write cudaErrorNotReady there (PyTorch clears it after
 * each such answer), and it would then be what the next
 * cudaGetLastError() returns: the caller's, or a launch check's. Take back
 * an error this library met, and only that one: the slot is cleared when it
 * holds @p err, so a pending error the caller's own code left stays unless
 * ours replaced it. A sticky error (the context is lost) cannot be
 * cleared, and every later call reports it anyway.
 */
static void dev_take_back(cudaError_t err)
{
    if ((err != cudaSuccess) && (cudaPeekAtLastError() == err)) {
        (void)cudaGetLastError();
    }
}

void gs__dev_take_back(int err)
{
    dev_take_back((cudaError_t)err);
}

/* cudaEventQuery, its "not ready" taken back. The only event query. */
static cudaError_t dev_query(cudaEvent_t ev)
{
    const cudaError_t err = cudaEventQuery(ev);

    if (err == cudaErrorNotReady) {
        dev_take_back(err);
    }
    return err;
}

int gs__dev_query_event(void *ev)
{
    return (int)dev_query((cudaEvent_t)ev);
}

gs_status_t gs__dev_cuda_status(int err_in, const char *opname, const char *what)
{
    const cudaError_t err = (cudaError_t)err_in;

    if (err == cudaSuccess) {
        return GS_OK;
    }
    dev_take_back(err);
    return gs__error_set(GS_ERR_CUDA, "%s: %s failed: %s (%s)", opname, what,
                         cudaGetErrorString(err), cudaGetErrorName(err));
}

/* ------------------------------------------------------------------ */
/* The caller's current device                                         */
/* ------------------------------------------------------------------ */

/* cuDevicePrimaryCtxGetState (CUdevice is the device's ordinal), looked up
 * once through the runtime, so that nothing links the driver. */
typedef int (*dev_ctx_state_fn_t)(int device, unsigned int *flags, int *active);

static pthread_once_t dev_ctx_once = PTHREAD_ONCE_INIT;
static dev_ctx_state_fn_t dev_ctx_state;

static void dev_ctx_lookup(void)
{
    void *fn = NULL;
    enum cudaDriverEntryPointQueryResult found = cudaDriverEntryPointSymbolNotFound;
    cudaError_t err;

#if CUDART_VERSION >= 12050
    err = cudaGetDriverEntryPointByVersion("cuDevicePrimaryCtxGetState", &fn, 12000,
                                           cudaEnableDefault, &found);
#else
    err = cudaGetDriverEntryPoint("cuDevicePrimaryCtxGetState", &fn, cudaEnableDefault, &found);
#endif
    if ((err == cudaSuccess) && (found == cudaDriverEntryPointSuccess) && (fn != NULL)) {
        memcpy(&dev_ctx_state, &fn, sizeof(dev_ctx_state)); /* object to function pointer */
    } else {
        dev_take_back(err);
        GS_INFO(CUDA, "cuDevicePrimaryCtxGetState not found: the device guard restores every "
                      "device");
    }
}

/* Has the process a primary context on @p device (when unknown: yes)? */
static int dev_has_context(int device)
{
    unsigned int flags = 0;
    int active = 1;

    (void)pthread_once(&dev_ctx_once, dev_ctx_lookup);
    if ((dev_ctx_state == NULL) || (dev_ctx_state(device, &flags, &active) != 0)) {
        return 1;
    }
    return active != 0;
}

int gs__dev_guard_enter(gs__dev_guard_t *g, int device)
{
    cudaError_t err;

    g->prev = device;
    g->changed = 0;
    err = cudaGetDevice(&g->prev);
    if ((err == cudaSuccess) && (g->prev != device)) {
        err = cudaSetDevice(device);
        g->changed = (err == cudaSuccess);
    }
    return (int)err;
}

void gs__dev_guard_leave(gs__dev_guard_t *g)
{
    cudaError_t err;

    if (!g->changed) {
        return;
    }
    g->changed = 0;
    if (!dev_has_context(g->prev)) {
        return; /* going back would create a context there (gs__dev_guard_t) */
    }
    err = cudaSetDevice(g->prev);
    if (err != cudaSuccess) {
        dev_take_back(err);
        GS_WARN("could not make CUDA device %d current again: %s (%s)", g->prev,
                cudaGetErrorString(err), cudaGetErrorName(err));
    }
}

/* ------------------------------------------------------------------ */
/* The one device wait                                                 */
/* ------------------------------------------------------------------ */

gs_status_t gs__dev_poll_event(void *ev_in, const gs__dev_wait_t *w, const char *what)
{
    const cudaEvent_t ev = (cudaEvent_t)ev_in;
    const uint64_t deadline = gs__now_ns() + w->timeout_ns;
    struct gs__nccl *nccl = w->nccl;
    gs_status_t status;

    for (unsigned polls = 0;; polls++) {
        const cudaError_t err = dev_query(ev);

        if ((err != cudaSuccess) && (err != cudaErrorNotReady)) {
            status = gs__dev_cuda_status(err, w->opname, what);
#ifdef GS_WITH_NCCL
            gs__nccl_fail(nccl, "CUDA error");
#endif
            return status;
        }
#ifdef GS_WITH_NCCL
        if (nccl != NULL) {
            /* Also when the event is complete: kernels of an aborted or
             * failed communicator end early, so completion proves nothing. */
            status = gs__nccl_poll(nccl);
            if ((status != GS_OK) && (status != GS_INPROGRESS)) {
                if (status != GS_ERR_ABORTED) {
                    gs__nccl_fail(nccl, "asynchronous error");
                }
                return gs__error_wrap(status, "%s: waiting for %s: %s", w->opname, what,
                                      gs__error_get());
            }
        }
#endif
        if (err == cudaSuccess) {
            return GS_OK;
        }
        if (gs__now_ns() >= deadline) {
            status = gs__error_set(
                GS_ERR_TIMEOUT, "%s: rank %d: %s did not finish within %llu ms (GS_TIMEOUT_MS)%s",
                w->opname, w->rank, what, (unsigned long long)(w->timeout_ns / 1000000ull),
                (nccl != NULL)
                    ? "; the NCCL communicator was aborted: a peer may have failed, or other "
                      "work on the stream never ends; destroy the communicator"
                    : ": other work on the stream may never end, or a peer failed; destroy the "
                      "communicator");
#ifdef GS_WITH_NCCL
            gs__nccl_fail(nccl, "timeout");
#endif
            return status;
        }
        gs__poll_pause(polls);
    }
}
