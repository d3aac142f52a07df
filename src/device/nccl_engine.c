/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The NCCL engine's lifetime: unique id, create (ncclCommInitRankConfig,
 * non-blocking, polled to a deadline), split, the lock that lets another
 * thread abort safely, groups, polling of NCCL's asynchronous state, abort
 * and finalize/destroy, and all-to-all's scratch buffer. Waits on CUDA
 * events are the algorithm layer's (gs__dev_wait_event, which polls
 * gs__nccl_poll() and calls gs__nccl_fail()): one poll serves every device
 * wait, with or without NCCL. The operations themselves are in nccl_coll.c, the pure tables in
 * nccl_map.c.
 *
 * Why every call waits the way it does: a non-blocking NCCL communicator
 * answers ncclInProgress while its own threads initialise, connect or
 * enqueue, and must not be used again until ncclCommGetAsyncError says
 * ncclSuccess. So each call that may get ncclInProgress polls that state,
 * sleeping between polls, up to a deadline, and aborts the communicator when
 * the deadline passes: a peer that died during init or a connection can no
 * longer hang the worker thread.
 *
 * NOTE: the price of non-blocking is NCCL's, not ours: NCCL launches every
 * group of a non-blocking communicator (a lone collective is a group of
 * one) from a host thread of its own and answers ncclInProgress until that
 * thread has enqueued the kernels, some microseconds per call. A blocking
 * communicator would avoid it but could hang the worker inside NCCL (a
 * first connection to a dead peer) where no deadline reaches.
 *
 * This file does not choose between NCCL and the host transports (the
 * selector does) and never synchronises a stream.
 */
#include "device/nccl_engine.h"
#include "device/nccl_lib.h"

#include "core/clock.h"
#include "core/error.h"
#include "core/log.h"

#include <cuda_runtime.h>

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* NCCL 2.18: non-blocking communicators (2.14) and ncclCommSplit (2.18). */
#define GS_NCCL_MIN_VERSION 21800
#define GS_NCCL_MIN_TIMEOUT_NS 1000000000ull

struct gs__nccl {
    /* Guards comm: every NCCL call on it, and ncclCommAbort from any thread. */
    pthread_mutex_t lock;
    ncclComm_t comm;    /* NULL once aborted or destroyed */
    atomic_int aborted; /* set (under lock) before comm is aborted */
    int rank;
    int size;
    int device;
    uint64_t timeout_ns; /* waits that take no deadline of their own */
    /* All-to-all's in-place scratch; owner thread only. */
    void *scratch;
    size_t scratch_bytes;
    cudaEvent_t scratch_event; /* recorded where the last use ends */
    int scratch_used;
};

/* The calling thread's open NCCL groups, and the handle whose lock the
 * outermost group holds (taken by its first operation). */
static _Thread_local int tl_group_depth;
static _Thread_local gs__nccl_t *tl_group_nccl;

/* ---------------------------------------------------------------------- */
/* Small helpers                                                           */
/* ---------------------------------------------------------------------- */

static unsigned long long ns_to_ms(uint64_t ns)
{
    return (unsigned long long)(ns / 1000000ull);
}

static void nccl_lock(gs__nccl_t *nccl)
{
    /* The thread whose group holds the lock already owns it. */
    if (tl_group_nccl != nccl) {
        pthread_mutex_lock(&nccl->lock);
    }
}

static void nccl_unlock(gs__nccl_t *nccl)
{
    if (tl_group_nccl != nccl) {
        pthread_mutex_unlock(&nccl->lock);
    }
}

static gs_status_t aborted_status(const gs__nccl_t *nccl)
{
    /* The abort was reported (and logged) when it happened. */
    return gs__error_wrap(GS_ERR_ABORTED, "rank %d: the NCCL communicator was aborted", nccl->rank);
}

/* Abort under the lock if nobody did yet. Keeps this thread's error text:
 * callers abort because of an error they already reported. */
static void abort_quietly(gs__nccl_t *nccl, const char *why)
{
    ncclResult_t ret = ncclSuccess;
    int did = 0;

    nccl_lock(nccl);
    if (!atomic_load(&nccl->aborted)) {
        atomic_store(&nccl->aborted, 1);
        if (nccl->comm != NULL) {
            ret = GS_NCCL(ncclCommAbort)(nccl->comm);
            nccl->comm = NULL;
            did = 1;
        }
    }
    nccl_unlock(nccl);
    if (did) {
        GS_INFO(NET, "rank %d: NCCL communicator aborted (%s)", nccl->rank, why);
    }
    if (ret != ncclSuccess) {
        GS_WARN("rank %d: ncclCommAbort: %s (%s)", nccl->rank, gs__nccl_result_name(ret),
                GS_NCCL(ncclGetErrorString)(ret));
    }
}

gs_status_t gs__nccl_cuda_status(int cuda_error, const gs__nccl_t *nccl, const char *call)
{
    const cudaError_t err = (cudaError_t)cuda_error;
    const int rank = (nccl != NULL) ? nccl->rank : -1;

    if (err == cudaSuccess) {
        return GS_OK;
    }
    (void)cudaGetLastError(); /* clear it unless it is sticky */
    return gs__error_set((err == cudaErrorMemoryAllocation) ? GS_ERR_NO_MEMORY : GS_ERR_CUDA,
                         "rank %d: %s failed: %s (%s)", rank, call, cudaGetErrorName(err),
                         cudaGetErrorString(err));
}

/* Is there a GPU, and is @p device (or any, when < 0) one of them? */
static gs_status_t device_check(const char *who, int device)
{
    int count = 0;
    const cudaError_t err = cudaGetDeviceCount(&count);

    if (err != cudaSuccess) {
        (void)cudaGetLastError();
        if ((err == cudaErrorNoDevice) || (err == cudaErrorInsufficientDriver) ||
            (err == cudaErrorStubLibrary) || (err == cudaErrorInitializationError) ||
            (err == cudaErrorDevicesUnavailable) || (err == cudaErrorSystemNotReady) ||
            (err == cudaErrorSystemDriverMismatch) ||
            (err == cudaErrorCompatNotSupportedOnDevice)) {
            return gs__error_set(
                GS_ERR_NO_RESOURCE,
                "%s: no GPU or CUDA driver was found (cudaGetDeviceCount: %s: %s); "
                "NCCL needs a GPU per rank",
                who, cudaGetErrorName(err), cudaGetErrorString(err));
        }
        return gs__error_set(GS_ERR_CUDA, "%s: cudaGetDeviceCount failed: %s (%s)", who,
                             cudaGetErrorName(err), cudaGetErrorString(err));
    }
    if (count < 1) {
        return gs__error_set(GS_ERR_NO_RESOURCE,
                             "%s: no GPU was found (0 CUDA devices visible; check "
                             "CUDA_VISIBLE_DEVICES); NCCL needs a GPU per rank",
                             who);
    }
    if (device >= count) {
        return gs__error_set(GS_ERR_INVALID_ARG,
                             "%s: CUDA device %d does not exist (%d devices visible)", who, device,
                             count);
    }
    return GS_OK;
}

/* NCCL loaded (nccl_lib.c) and new enough: the first step of every call that
 * makes a handle-free start (unique id, create). */
static gs_status_t version_check(const char *who)
{
    const gs_status_t status = gs__nccl_load(who);
    int version;

    if (status != GS_OK) {
        return status;
    }
    version = gs__nccl_version();

    if (version < GS_NCCL_MIN_VERSION) {
        return gs__error_set(GS_ERR_UNSUPPORTED,
                             "%s: the NCCL library loaded is version %d.%d.%d; gradsync needs 2.18 "
                             "or newer",
                             who, version / 10000, (version % 10000) / 100, version % 100);
    }
    return GS_OK;
}

static gs__nccl_t *nccl_alloc(int rank, int size, int device)
{
    gs__nccl_t *nccl = calloc(1, sizeof(*nccl));

    if (nccl == NULL) {
        return NULL;
    }
    if (pthread_mutex_init(&nccl->lock, NULL) != 0) {
        free(nccl);
        return NULL;
    }
    atomic_init(&nccl->aborted, 0);
    nccl->rank = rank;
    nccl->size = size;
    nccl->device = device;
    nccl->timeout_ns = GS_NCCL_MIN_TIMEOUT_NS;
    return nccl;
}

static void nccl_free(gs__nccl_t *nccl)
{
    pthread_mutex_destroy(&nccl->lock);
    free(nccl);
}

/* Read NCCL's asynchronous state of @p nccl into *state_out (under the lock). */
static gs_status_t read_state(gs__nccl_t *nccl, ncclResult_t *state_out)
{
    ncclResult_t ret;
    char what[64];

    nccl_lock(nccl);
    if (atomic_load(&nccl->aborted) || (nccl->comm == NULL)) {
        nccl_unlock(nccl);
        return aborted_status(nccl);
    }
    ret = GS_NCCL(ncclCommGetAsyncError)(nccl->comm, state_out);
    nccl_unlock(nccl);
    if (ret != ncclSuccess) {
        (void)snprintf(what, sizeof(what), "rank %d: ncclCommGetAsyncError", nccl->rank);
        return gs__nccl_status(ret, what);
    }
    return GS_OK;
}

/* Poll until NCCL is done with what it had in progress on @p nccl. On the
 * deadline the communicator is aborted and "<what> did not finish" names
 * the rank. */
static gs_status_t settle(gs__nccl_t *nccl, uint64_t deadline_ns, const char *what)
{
    const uint64_t start = gs__now_ns();
    ncclResult_t state;
    gs_status_t status;
    char text[96];

    for (unsigned polls = 0;; polls++) {
        status = read_state(nccl, &state);
        if (status != GS_OK) {
            return status;
        }
        if (state != ncclInProgress) {
            (void)snprintf(text, sizeof(text), "rank %d: %s", nccl->rank, what);
            return gs__nccl_status_msg(state, 1, text, GS_NCCL(ncclGetLastError)(NULL));
        }
        if (gs__now_ns() >= deadline_ns) {
            status = gs__error_set(GS_ERR_TIMEOUT,
                                   "rank %d of %d: %s did not finish within %llu ms; the NCCL "
                                   "communicator was aborted",
                                   nccl->rank, nccl->size, what,
                                   ns_to_ms((deadline_ns > start) ? deadline_ns - start : 0));
            abort_quietly(nccl, "timeout");
            return status;
        }
        gs__poll_pause(polls);
    }
}

/* ---------------------------------------------------------------------- */
/* Bootstrap and lifetime                                                  */
/* ---------------------------------------------------------------------- */

int gs__nccl_version(void)
{
    int version = 0;

    if (!gs__nccl_loadable(NULL, 0) || (GS_NCCL(ncclGetVersion)(&version) != ncclSuccess)) {
        return 0;
    }
    return version;
}

gs_status_t gs__nccl_unique_id(uint8_t id_out[GS_NCCL_ID_BYTES])
{
    ncclUniqueId uid;
    ncclResult_t ret;
    gs_status_t status;

    if (id_out == NULL) {
        return gs__error_set(GS_ERR_INVALID_ARG, "nccl: unique id: no output buffer");
    }
    status = device_check("nccl: unique id", -1);
    if (status != GS_OK) {
        return status;
    }
    status = version_check("nccl: unique id");
    if (status != GS_OK) {
        return status;
    }
    ret = GS_NCCL(ncclGetUniqueId)(&uid);
    if (ret != ncclSuccess) {
        return gs__nccl_status(ret, "nccl: ncclGetUniqueId");
    }
    memcpy(id_out, &uid, GS_NCCL_ID_BYTES);
    return GS_OK;
}

gs_status_t gs__nccl_create(const uint8_t id[GS_NCCL_ID_BYTES], int rank, int size, int device,
                            uint64_t deadline_ns, gs__nccl_t **out)
{
    const uint64_t start = gs__now_ns();
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    ncclUniqueId uid;
    ncclResult_t ret;
    gs__nccl_t *nccl;
    gs_status_t status;
    char who[48];

    if ((id == NULL) || (out == NULL)) {
        return gs__error_set(GS_ERR_INVALID_ARG, "nccl: create: %s is NULL",
                             (id == NULL) ? "the unique id" : "the output handle");
    }
    if ((size < 1) || (rank < 0) || (rank >= size)) {
        return gs__error_set(GS_ERR_INVALID_ARG, "nccl: create: rank %d of %d is out of range",
                             rank, size);
    }
    if (device < 0) {
        return gs__error_set(GS_ERR_INVALID_ARG, "nccl: create: rank %d: CUDA device %d < 0", rank,
                             device);
    }
    (void)snprintf(who, sizeof(who), "rank %d of %d", rank, size);
    status = device_check(who, device);
    if (status != GS_OK) {
        return status;
    }
    status = version_check(who);
    if (status != GS_OK) {
        return status;
    }
    status = gs__nccl_cuda_status(cudaSetDevice(device), NULL, "cudaSetDevice");
    if (status != GS_OK) {
        return status;
    }
    nccl = nccl_alloc(rank, size, device);
    if (nccl == NULL) {
        return gs__error_set(GS_ERR_NO_MEMORY, "%s: out of memory for the NCCL handle", who);
    }
    if (deadline_ns > start + GS_NCCL_MIN_TIMEOUT_NS) {
        nccl->timeout_ns = deadline_ns - start;
    }

    memcpy(&uid, id, GS_NCCL_ID_BYTES);
    config.blocking = 0;
    ret = GS_NCCL(ncclCommInitRankConfig)(&nccl->comm, size, uid, rank, &config);
    if ((ret != ncclSuccess) && (ret != ncclInProgress)) {
        (void)snprintf(who, sizeof(who), "rank %d of %d: NCCL init", rank, size);
        status = gs__nccl_status(ret, who);
        goto err_abort;
    }
    status = settle(nccl, deadline_ns, "NCCL init");
    if (status != GS_OK) {
        goto err_abort;
    }
    GS_INFO(NET, "rank %d of %d: NCCL %d communicator ready on CUDA device %d in %llu ms", rank,
            size, gs__nccl_version(), device, ns_to_ms(gs__now_ns() - start));
    *out = nccl;
    return GS_OK;

err_abort:
    abort_quietly(nccl, "init failed");
    nccl_free(nccl);
    return status;
}

gs_status_t gs__nccl_split(gs__nccl_t *parent, int color, int key, uint64_t deadline_ns,
                           gs__nccl_t **out)
{
    const uint64_t start = gs__now_ns();
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    ncclResult_t ret;
    gs__nccl_t *child;
    gs_status_t status;
    int rank = -1;
    int size = 0;
    char what[64];

    if ((parent == NULL) || (out == NULL)) {
        return gs__error_set(GS_ERR_INVALID_ARG, "nccl: split: %s is NULL",
                             (parent == NULL) ? "the parent handle" : "the output handle");
    }
    /* NCCL writes the new communicator into child->comm from its own thread
     * when the split ends, also for NCCL_SPLIT_NOCOLOR (NULL): the slot must
     * outlive the job, so it lives in a handle even when none is returned. */
    child = nccl_alloc(-1, 0, parent->device);
    if (child == NULL) {
        return gs__error_set(GS_ERR_NO_MEMORY, "rank %d: out of memory for the NCCL split",
                             parent->rank);
    }
    child->timeout_ns = parent->timeout_ns;
    status = gs__nccl_cuda_status(cudaSetDevice(parent->device), parent, "cudaSetDevice");
    if (status != GS_OK) {
        goto err_free;
    }
    config.blocking = 0;
    nccl_lock(parent);
    if (atomic_load(&parent->aborted) || (parent->comm == NULL)) {
        nccl_unlock(parent);
        status = aborted_status(parent);
        goto err_free;
    }
    ret = GS_NCCL(ncclCommSplit)(parent->comm, (color < 0) ? NCCL_SPLIT_NOCOLOR : color, key,
                                 &child->comm, &config);
    nccl_unlock(parent);
    (void)snprintf(what, sizeof(what), "rank %d: ncclCommSplit", parent->rank);
    status = gs__nccl_status(ret, what);
    if ((status != GS_OK) && (status != GS_INPROGRESS)) {
        /* Should NCCL have launched the job before failing, it would still
         * write child->comm: let it end before the handle is freed. */
        char saved[GS_ERROR_MSG_MAX];

        (void)snprintf(saved, sizeof(saved), "%s", gs__error_get());
        (void)settle(parent, deadline_ns, "NCCL split");
        gs__error_copy_in(saved);
        goto err_abort_child;
    }
    /* The split job runs on the parent: its state says when it is over. */
    status = settle(parent, deadline_ns, "NCCL split");
    if (status != GS_OK) {
        /* On a timeout settle aborted the parent, which ends the job. */
        goto err_abort_child;
    }
    if (child->comm == NULL) {
        nccl_free(child);
        *out = NULL;
        return GS_OK;
    }
    status = settle(child, deadline_ns, "NCCL split (new communicator)");
    if (status != GS_OK) {
        goto err_abort_child;
    }
    if ((GS_NCCL(ncclCommUserRank)(child->comm, &rank) != ncclSuccess) ||
        (GS_NCCL(ncclCommCount)(child->comm, &size) != ncclSuccess) || (rank < 0) ||
        (rank >= size)) {
        status = gs__error_set(GS_ERR_INTERNAL,
                               "rank %d: NCCL split gave a communicator without a valid rank",
                               parent->rank);
        goto err_abort_child;
    }
    child->rank = rank;
    child->size = size;
    GS_INFO(NET, "rank %d: NCCL split color %d key %d: rank %d of %d in %llu ms", parent->rank,
            color, key, rank, size, ns_to_ms(gs__now_ns() - start));
    *out = child;
    return GS_OK;

err_abort_child:
    abort_quietly(child, "split failed");
err_free:
    nccl_free(child);
    return status;
}

gs_status_t gs__nccl_set_timeout(gs__nccl_t *nccl, uint64_t timeout_ns)
{
    if ((nccl == NULL) || (timeout_ns == 0)) {
        return gs__error_set(GS_ERR_INVALID_ARG, "nccl: set timeout: %s",
                             (nccl == NULL) ? "NULL handle" : "timeout 0");
    }
    nccl->timeout_ns = timeout_ns;
    return GS_OK;
}

int gs__nccl_rank(const gs__nccl_t *nccl)
{
    return (nccl != NULL) ? nccl->rank : -1;
}

int gs__nccl_size(const gs__nccl_t *nccl)
{
    return (nccl != NULL) ? nccl->size : 0;
}

int gs__nccl_device(const gs__nccl_t *nccl)
{
    return (nccl != NULL) ? nccl->device : -1;
}

gs_status_t gs__nccl_abort(gs__nccl_t *nccl)
{
    ncclResult_t ret;
    char what[48];

    if (nccl == NULL) {
        return gs__error_set(GS_ERR_INVALID_ARG, "nccl: abort: NULL handle");
    }
    if (tl_group_nccl == nccl) {
        return gs__error_set(GS_ERR_INVALID_USAGE,
                             "rank %d: NCCL abort inside an open group of the same communicator",
                             nccl->rank);
    }
    pthread_mutex_lock(&nccl->lock);
    if (atomic_load(&nccl->aborted)) {
        pthread_mutex_unlock(&nccl->lock);
        return aborted_status(nccl);
    }
    atomic_store(&nccl->aborted, 1);
    ret = GS_NCCL(ncclCommAbort)(nccl->comm);
    nccl->comm = NULL;
    pthread_mutex_unlock(&nccl->lock);
    GS_INFO(NET, "rank %d: NCCL communicator aborted", nccl->rank);
    (void)snprintf(what, sizeof(what), "rank %d: ncclCommAbort", nccl->rank);
    return gs__nccl_status(ret, what);
}

/* Free the scratch buffer once the work that uses it is over, without
 * blocking the host: a private stream waits for the last use, then frees. */
static gs_status_t scratch_free(gs__nccl_t *nccl)
{
    cudaStream_t stream = NULL;
    gs_status_t status = GS_OK;

    if (nccl->scratch != NULL) {
        status = gs__nccl_cuda_status(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking),
                                      nccl, "cudaStreamCreateWithFlags");
        if ((status == GS_OK) && nccl->scratch_used) {
            status = gs__nccl_cuda_status(cudaStreamWaitEvent(stream, nccl->scratch_event, 0), nccl,
                                          "cudaStreamWaitEvent");
        }
        if (status == GS_OK) {
            status =
                gs__nccl_cuda_status(cudaFreeAsync(nccl->scratch, stream), nccl, "cudaFreeAsync");
        }
        if (stream != NULL) {
            (void)cudaStreamDestroy(stream); /* released once its work is done */
        }
        nccl->scratch = NULL;
        nccl->scratch_bytes = 0;
    }
    if (nccl->scratch_event != NULL) {
        (void)cudaEventDestroy(nccl->scratch_event);
        nccl->scratch_event = NULL;
    }
    return status;
}

gs_status_t gs__nccl_destroy(gs__nccl_t *nccl)
{
    gs_status_t first = GS_OK;
    gs_status_t status;
    ncclResult_t ret;
    char what[48];

    if (nccl == NULL) {
        return GS_OK;
    }
    if (tl_group_depth > 0) {
        /* NCCL would queue the finalize into the open group. */
        return gs__error_set(GS_ERR_INVALID_USAGE,
                             "rank %d: NCCL destroy inside an open group; the handle is kept",
                             nccl->rank);
    }
    (void)cudaSetDevice(nccl->device);
    (void)snprintf(what, sizeof(what), "rank %d: ncclCommFinalize", nccl->rank);
    nccl_lock(nccl);
    ret = atomic_load(&nccl->aborted) ? ncclSuccess : GS_NCCL(ncclCommFinalize)(nccl->comm);
    nccl_unlock(nccl);
    if (!atomic_load(&nccl->aborted)) {
        first = gs__nccl_status(ret, what);
        if ((first == GS_OK) || (first == GS_INPROGRESS)) {
            first = settle(nccl, gs__now_ns() + nccl->timeout_ns, "NCCL finalize");
        }
        if (first == GS_OK) {
            nccl_lock(nccl);
            if (!atomic_load(&nccl->aborted)) {
                atomic_store(&nccl->aborted, 1); /* no abort after this point */
                ret = GS_NCCL(ncclCommDestroy)(nccl->comm);
                nccl->comm = NULL;
            }
            nccl_unlock(nccl);
            (void)snprintf(what, sizeof(what), "rank %d: ncclCommDestroy", nccl->rank);
            first = gs__nccl_status(ret, what);
        } else {
            abort_quietly(nccl, "finalize failed");
        }
    }
    status = scratch_free(nccl);
    if (first == GS_OK) {
        first = status;
    }
    GS_INFO(NET, "rank %d: NCCL communicator destroyed", nccl->rank);
    nccl_free(nccl);
    return first;
}

/* ---------------------------------------------------------------------- */
/* Calls on the communicator, groups                                       */
/* ---------------------------------------------------------------------- */

gs_status_t gs__nccl_enter(gs__nccl_t *nccl, const char *call, struct ncclComm **comm_out)
{
    if (tl_group_depth > 0) {
        if (tl_group_nccl == NULL) {
            pthread_mutex_lock(&nccl->lock);
            tl_group_nccl = nccl;
        } else if (tl_group_nccl != nccl) {
            return gs__error_set(GS_ERR_INVALID_USAGE,
                                 "rank %d: %s: one NCCL group holds operations of one "
                                 "communicator only",
                                 nccl->rank, call);
        }
    } else {
        pthread_mutex_lock(&nccl->lock);
    }
    if (atomic_load(&nccl->aborted) || (nccl->comm == NULL)) {
        if (tl_group_depth == 0) {
            pthread_mutex_unlock(&nccl->lock);
        }
        /* Inside a group the lock stays with the group until its end. */
        return aborted_status(nccl);
    }
    *comm_out = nccl->comm;
    return GS_OK;
}

gs_status_t gs__nccl_leave(gs__nccl_t *nccl, int nccl_result, const char *call)
{
    gs_status_t status;
    char what[96];

    if (tl_group_depth == 0) {
        pthread_mutex_unlock(&nccl->lock);
    }
    if (nccl_result == ncclSuccess) {
        return GS_OK;
    }
    (void)snprintf(what, sizeof(what), "rank %d: %s", nccl->rank, call);
    status = gs__nccl_status(nccl_result, what);
    if (status != GS_INPROGRESS) {
        return status;
    }
    if (tl_group_depth > 0) {
        return GS_OK; /* the group's end waits */
    }
    return settle(nccl, gs__now_ns() + nccl->timeout_ns, call);
}

int gs__nccl_group_depth(void)
{
    return tl_group_depth;
}

gs_status_t gs__nccl_group_start(void)
{
    ncclResult_t ret;
    /* Takes no handle, so it may come first: NCCL must be loaded. */
    const gs_status_t status = gs__nccl_load("nccl: ncclGroupStart");

    if (status != GS_OK) {
        return status;
    }
    ret = GS_NCCL(ncclGroupStart)();
    if (ret != ncclSuccess) {
        return gs__nccl_status(ret, "nccl: ncclGroupStart");
    }
    tl_group_depth++;
    return GS_OK;
}

gs_status_t gs__nccl_group_end(gs__nccl_t *nccl)
{
    gs__nccl_t *held;
    gs__nccl_t *target;
    ncclResult_t ret;
    gs_status_t status;
    char what[64];

    if (tl_group_depth == 0) {
        return gs__error_set(GS_ERR_INVALID_USAGE, "nccl: group end without an open group");
    }
    /* Launch while the lock is still held: an abort must not free the
     * communicator under ncclGroupEnd. */
    ret = GS_NCCL(ncclGroupEnd)();
    tl_group_depth--;
    held = tl_group_nccl;
    target = (held != NULL) ? held : nccl;
    if (tl_group_depth > 0) {
        return ((ret == ncclSuccess) || (ret == ncclInProgress))
                   ? GS_OK
                   : gs__nccl_status(ret, "nccl: ncclGroupEnd (nested)");
    }
    tl_group_nccl = NULL;
    if (held != NULL) {
        pthread_mutex_unlock(&held->lock);
    }
    (void)snprintf(what, sizeof(what), "rank %d: ncclGroupEnd", gs__nccl_rank(target));
    status = gs__nccl_status(ret, what);
    if ((status == GS_INPROGRESS) && (target != NULL)) {
        status = settle(target, gs__now_ns() + target->timeout_ns, "ncclGroupEnd");
    } else if (status == GS_INPROGRESS) {
        status = GS_OK; /* an empty group has nothing to wait for */
    }
    if ((status == GS_OK) && (held != NULL) && (nccl != held)) {
        return gs__error_set(GS_ERR_INVALID_USAGE,
                             "rank %d: ncclGroupEnd: the group's operations used another NCCL "
                             "communicator than the one given to group end",
                             held->rank);
    }
    return status;
}

/* ---------------------------------------------------------------------- */
/* Progress and completion                                                 */
/* ---------------------------------------------------------------------- */

gs_status_t gs__nccl_poll(gs__nccl_t *nccl)
{
    ncclResult_t state;
    gs_status_t status;
    char what[48];

    if (nccl == NULL) {
        return gs__error_set(GS_ERR_INVALID_ARG, "nccl: poll: NULL handle");
    }
    status = read_state(nccl, &state);
    if (status != GS_OK) {
        return status;
    }
    (void)snprintf(what, sizeof(what), "rank %d: NCCL", nccl->rank);
    return gs__nccl_status_msg(state, 1, what, GS_NCCL(ncclGetLastError)(NULL));
}

void gs__nccl_fail(gs__nccl_t *nccl, const char *why)
{
    if (nccl != NULL) {
        abort_quietly(nccl, why);
    }
}

/* ---------------------------------------------------------------------- */
/* Scratch buffer (all-to-all in place)                                    */
/* ---------------------------------------------------------------------- */

gs_status_t gs__nccl_scratch_get(gs__nccl_t *nccl, size_t bytes, void *stream, void **scratch_out)
{
    const cudaStream_t cstream = (cudaStream_t)stream;
    void *ptr = NULL;
    gs_status_t status;

    if (nccl->scratch_event == NULL) {
        status = gs__nccl_cuda_status(
            cudaEventCreateWithFlags(&nccl->scratch_event, cudaEventDisableTiming), nccl,
            "cudaEventCreateWithFlags");
        if (status != GS_OK) {
            nccl->scratch_event = NULL;
            return status;
        }
    }
    if (nccl->scratch_used) {
        /* The previous use may have been on another stream. */
        status = gs__nccl_cuda_status(cudaStreamWaitEvent(cstream, nccl->scratch_event, 0), nccl,
                                      "cudaStreamWaitEvent");
        if (status != GS_OK) {
            return status;
        }
    }
    if (bytes > nccl->scratch_bytes) {
        if (nccl->scratch != NULL) {
            status =
                gs__nccl_cuda_status(cudaFreeAsync(nccl->scratch, cstream), nccl, "cudaFreeAsync");
            nccl->scratch = NULL;
            nccl->scratch_bytes = 0;
            if (status != GS_OK) {
                return status;
            }
        }
        status = gs__nccl_cuda_status(cudaMallocAsync(&ptr, bytes, cstream), nccl,
                                      "cudaMallocAsync (all-to-all scratch)");
        if (status != GS_OK) {
            return status;
        }
        nccl->scratch = ptr;
        nccl->scratch_bytes = bytes;
    }
    *scratch_out = nccl->scratch;
    return GS_OK;
}

gs_status_t gs__nccl_scratch_release(gs__nccl_t *nccl, void *stream)
{
    gs_status_t status;

    status = gs__nccl_cuda_status(cudaEventRecord(nccl->scratch_event, (cudaStream_t)stream), nccl,
                                  "cudaEventRecord");
    if (status == GS_OK) {
        nccl->scratch_used = 1;
    }
    return status;
}
