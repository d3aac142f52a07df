/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The NCCL engine for device buffers: one NCCL communicator per gradsync
 * communicator, NCCL's own collectives for uncompressed work, grouped
 * ncclSend/ncclRecv for all-to-all and for the compressed device all-reduce,
 * and the polling that turns a dead peer into an error instead of a hung
 * stream. It is not a gs__transport_ops_t (NCCL has no tagged matching): it
 * sits beside the host transport, which carries the unique id at bootstrap.
 *
 * Compiled only when the build has NCCL (GS_WITH_NCCL). This header includes
 * neither nccl.h nor cuda_runtime.h: streams and events are `void *`
 * (cudaStream_t, cudaEvent_t), NCCL enums travel as `int`.
 *
 * Threading: one owner thread (the communicator's worker) makes every call
 * on a handle, except gs__nccl_abort(), which any thread may call. Every
 * NCCL call on a handle is made under the handle's lock, and the
 * communicator is non-blocking (ncclConfig_t.blocking = 0), so no call holds
 * the lock for long and an abort from another thread never frees the NCCL
 * communicator under the owner's feet. Calls that wait (create, split, the
 * enqueue of an operation, destroy) poll with short sleeps and have a
 * deadline; on a timeout they abort the NCCL communicator. Waiting for the
 * GPU work itself is the caller's: it polls an event it recorded together
 * with gs__nccl_poll() and calls gs__nccl_fail() on an error or a timeout
 * (gs__dev_wait_event in the algorithm layer, the one device wait).
 *
 * Current device: create, split, destroy and in-place all-to-all make the
 * handle's device the calling thread's current CUDA device (cudaSetDevice)
 * and leave it so; the caller restores its own (the algorithm layer's
 * device guard, gs__dev_guard_enter/leave, does).
 *
 * Errors: every NCCL and CUDA return code is checked and written into
 * gs_last_error() with NCCL's own name and text; nothing here aborts or
 * exits the process.
 *
 * Implementation: nccl_engine.c (lifetime, bootstrap, groups, polling,
 * abort, scratch), nccl_coll.c (collectives, point-to-point), nccl_map.c
 * (the pure dtype, op and result tables).
 */
#ifndef GS_DEVICE_NCCL_ENGINE_H
#define GS_DEVICE_NCCL_ENGINE_H

#include <stddef.h>
#include <stdint.h>

#include "gradsync/status.h"
#include "gradsync/types.h"

/** Size of NCCL's unique id (ncclUniqueId); checked against nccl.h at build time. */
#define GS_NCCL_ID_BYTES 128

/** Handle to one rank's NCCL communicator and its cached state. */
typedef struct gs__nccl gs__nccl_t;


/* ===================================================================== */
/* Bootstrap and lifetime                                                */
/* ===================================================================== */

/**
 * @brief Load NCCL (libnccl.so.2, with dlopen: libgradsync does not link it;
 * nccl_lib.h) if not loaded yet, setting no error. Every other call here
 * that needs NCCL loads it too, and fails with GS_ERR_NO_RESOURCE and a
 * sentence ("NCCL was not found: ...") when it cannot. Thread-safe.
 * @param[out] why on failure that sentence (may be NULL).
 * @return 1 when NCCL is loaded (now or before), else 0. For
 * GS_CUDA_PATH=auto, which stages device buffers when NCCL is not installed.
 */
int gs__nccl_loadable(char *why, size_t whylen);

/**
 * @brief Version of the NCCL library loaded at run time (loading it if
 * needed), encoded as NCCL_VERSION_CODE (e.g. 22809 for 2.28.9), for logs.
 * 0 when NCCL cannot say or is not installed. Local, thread-safe, needs no
 * GPU.
 */
int gs__nccl_version(void);

/**
 * @brief Make the NCCL unique id of a new communicator. Rank 0 calls it; the
 * caller sends the bytes to every other rank over the host transport and
 * each rank passes them to gs__nccl_create(). Local, blocking (brief), any
 * thread.
 * @param[out] id_out GS_NCCL_ID_BYTES bytes, written only on success.
 * @return GS_OK; GS_ERR_INVALID_ARG (id_out NULL); GS_ERR_NO_RESOURCE (no GPU
 *         or no CUDA driver on this machine: NCCL could not be used);
 *         GS_ERR_CUDA (the CUDA runtime failed otherwise); GS_ERR_UNSUPPORTED
 *         (the NCCL library is older than 2.18); or NCCL's error mapped as
 *         by gs__nccl_status().
 */
gs_status_t gs__nccl_unique_id(uint8_t id_out[GS_NCCL_ID_BYTES]);

/**
 * @brief Create this rank's NCCL communicator. Collective: all @p size ranks
 * call it with the same id. Makes @p device the calling thread's current
 * CUDA device, calls ncclCommInitRankConfig with a non-blocking config and
 * polls ncclCommGetAsyncError (sleeping between polls) until the
 * communicator is ready or @p deadline_ns passes.
 * @param[in] id the bytes from gs__nccl_unique_id() on rank 0. They are
 *        opaque to gradsync and parsed by NCCL; they must come from this
 *        job's own rendezvous.
 * @param[in] rank this rank, 0 <= rank < size.
 * @param[in] size number of ranks, >= 1.
 * @param[in] device CUDA device index of this rank, >= 0. NCCL needs one GPU
 *        per rank.
 * @param[in] deadline_ns CLOCK_MONOTONIC deadline (core/clock.h) for the
 *        whole init. The time left at the call (at least one second) also
 *        becomes the handle's operation timeout (gs__nccl_set_timeout()).
 * @param[out] out the new handle, written only on success.
 * @return GS_OK; GS_ERR_INVALID_ARG (id or out NULL, size < 1, rank out of
 *         range, device < 0 or not a visible device); GS_ERR_NO_RESOURCE (no
 *         GPU or CUDA driver found); GS_ERR_CUDA; GS_ERR_NO_MEMORY;
 *         GS_ERR_UNSUPPORTED (NCCL older than 2.18); GS_ERR_INVALID_USAGE
 *         (among others: two ranks on the same GPU, which NCCL refuses; the
 *         sentence says so and points to GS_CUDA_PATH=staged); GS_ERR_TIMEOUT
 *         ("NCCL init" did not finish by the deadline, naming the rank; the
 *         half-made communicator is aborted); GS_ERR_PEER_FAILED,
 *         GS_ERR_SYSTEM, GS_ERR_INTERNAL (NCCL's error, with its text).
 */
gs_status_t gs__nccl_create(const uint8_t id[GS_NCCL_ID_BYTES], int rank, int size, int device,
                            uint64_t deadline_ns, gs__nccl_t **out);

/**
 * @brief Split @p parent with ncclCommSplit (non-blocking config, polled as in
 * gs__nccl_create()). Collective over @p parent: every rank of it calls,
 * ranks with the same @p color form a communicator ordered by @p key (ties
 * by parent rank). Owner thread of @p parent.
 * @param[in] color >= 0, or < 0 for "no new communicator here"
 *        (NCCL_SPLIT_NOCOLOR): the rank still takes part and gets *out NULL.
 * @param[out] out the new handle (inheriting the parent's device and
 *        timeout), or NULL for color < 0; written only on success.
 * @return GS_OK; GS_ERR_INVALID_ARG (parent or out NULL); GS_ERR_ABORTED
 *         (parent aborted); GS_ERR_NO_MEMORY; GS_ERR_TIMEOUT (the split did not
 *         finish by the deadline: the PARENT is aborted too, as the only way
 *         to stop NCCL's split job, so later calls on it return
 *         GS_ERR_ABORTED); or NCCL's error mapped as for gs__nccl_poll().
 */
gs_status_t gs__nccl_split(gs__nccl_t *parent, int color, int key, uint64_t deadline_ns,
                           gs__nccl_t **out);

/**
 * @brief Set how long one call may wait for NCCL on this handle where the call
 * itself takes no deadline: the enqueue of an operation (a non-blocking
 * communicator may answer ncclInProgress, e.g. while it connects to a peer
 * for the first time), the scratch buffer's reuse and destroy's finalize.
 * Local, owner thread.
 * @return GS_OK, GS_ERR_INVALID_ARG (nccl NULL or timeout_ns 0).
 */
gs_status_t gs__nccl_set_timeout(gs__nccl_t *nccl, uint64_t timeout_ns);

/** @brief This rank in the NCCL communicator (-1 for NULL). Any thread. */
int gs__nccl_rank(const gs__nccl_t *nccl);

/** @brief Number of ranks of the NCCL communicator (0 for NULL). Any thread. */
int gs__nccl_size(const gs__nccl_t *nccl);

/** @brief CUDA device of the NCCL communicator (-1 for NULL). Any thread. */
int gs__nccl_device(const gs__nccl_t *nccl);

/**
 * @brief Abort the NCCL communicator (ncclCommAbort): operations still on the
 * GPU quit, NCCL's threads stop and its resources are freed. Safe from any
 * thread, also while the owner thread waits on the handle (its next
 * gs__nccl_poll() returns GS_ERR_ABORTED); blocks until NCCL has torn down. Must not be
 * called by a thread that has a group open on this handle (close it with
 * gs__nccl_group_end() first), nor concurrently with or after
 * gs__nccl_destroy(). The handle stays valid: destroy it as usual.
 * @return GS_OK (aborted now); GS_ERR_ABORTED (it was aborted before, by this
 *         call or by a wait that failed: every later call on the handle
 *         returns it, except destroy); GS_ERR_INVALID_ARG (nccl NULL);
 *         GS_ERR_INVALID_USAGE (called inside an open group on this handle);
 *         or ncclCommAbort's own error (the handle is aborted all the same).
 */
gs_status_t gs__nccl_abort(gs__nccl_t *nccl);

/**
 * @brief Finalize and free. ncclCommFinalize (which flushes every operation
 * already enqueued) is polled up to the handle's timeout; then
 * ncclCommDestroy, or ncclCommAbort when finalize failed or did not finish.
 * An aborted handle is only freed. Always frees, whatever fails on the way,
 * and returns the first error; the one exception is a call from inside an
 * open group (a caller's bug), which changes nothing. Owner thread;
 * collective in the sense that NCCL's finalize completes only once the
 * peers' pending operations complete.
 * @return GS_OK (also for NULL); GS_ERR_TIMEOUT (finalize did not finish; the
 *         communicator was aborted instead); GS_ERR_INVALID_USAGE (inside an
 *         open group; nothing freed); or the first NCCL or CUDA error.
 */
gs_status_t gs__nccl_destroy(gs__nccl_t *nccl);


/* ===================================================================== */
/* Collectives and point-to-point (nccl_coll.c), groups (nccl_engine.c) */
/* ===================================================================== */
/*
 * Common contract: owner thread. Buffers are device memory of the handle's
 * GPU; counts are elements of @p dtype; @p stream is a cudaStream_t (NULL:
 * the default stream). Each call enqueues its work on @p stream and returns
 * without synchronising with the GPU: record an event after it and poll the
 * event together with gs__nccl_poll() (or order later work on the stream). Do not
 * modify or free the buffers until that work is complete. Collective
 * (allreduce .. alltoall): every rank calls them in the same order with
 * matching arguments.
 *
 * In-place rules are NCCL's, as in gradsync.h: all-reduce, reduce and
 * all-to-all when sendbuf == recvbuf; all-gather when
 * sendbuf == recvbuf + rank * count; reduce-scatter when
 * recvbuf == sendbuf + rank * recvcount. count is the per-rank block for
 * all-gather, reduce-scatter and all-to-all. count 0 is a no-op that still
 * checks its arguments; buffers may be NULL only then (and recvbuf of
 * reduce on ranks other than the root).
 *
 * Returns for all of them: GS_OK (enqueued); GS_ERR_INVALID_ARG (NULL
 * handle or buffer, dtype or op unknown, GS_OP_AVG on an integer type,
 * root or peer out of range, a byte count that overflows size_t, send or
 * receive to oneself outside a group); GS_ERR_INVALID_USAGE (operations of
 * two handles in one group); GS_ERR_ABORTED; GS_ERR_TIMEOUT (NCCL kept
 * the enqueue in progress past the handle's timeout; the communicator is
 * aborted); GS_ERR_CUDA (a CUDA call of gradsync's own failed: all-to-all's
 * copy of its own block, or its scratch buffer); GS_ERR_NO_MEMORY (scratch);
 * or NCCL's error (a returned code mapped as by gs__nccl_status(), an
 * asynchronous one met while waiting for the enqueue as by gs__nccl_poll()).
 */

/** @brief ncclAllReduce. */
gs_status_t gs__nccl_allreduce(gs__nccl_t *nccl, const void *sendbuf, void *recvbuf, size_t count,
                               gs_dtype_t dtype, gs_op_t op, void *stream);

/** @brief ncclBroadcast of root's @p buf to every rank's @p buf (in place, like gs_broadcast). */
gs_status_t gs__nccl_broadcast(gs__nccl_t *nccl, void *buf, size_t count, gs_dtype_t dtype,
                               int root, void *stream);

/** @brief ncclReduce into root's @p recvbuf (ignored, may be NULL, on other ranks). */
gs_status_t gs__nccl_reduce(gs__nccl_t *nccl, const void *sendbuf, void *recvbuf, size_t count,
                            gs_dtype_t dtype, gs_op_t op, int root, void *stream);

/** @brief ncclAllGather: @p count elements from each rank, size * count in @p recvbuf. */
gs_status_t gs__nccl_allgather(gs__nccl_t *nccl, const void *sendbuf, void *recvbuf, size_t count,
                               gs_dtype_t dtype, void *stream);

/** @brief ncclReduceScatter: size * recvcount in @p sendbuf; this rank's block in @p recvbuf. */
gs_status_t gs__nccl_reduce_scatter(gs__nccl_t *nccl, const void *sendbuf, void *recvbuf,
                                    size_t recvcount, gs_dtype_t dtype, gs_op_t op, void *stream);

/**
 * @brief All-to-all: block j of @p sendbuf goes to rank j, block i of
 * @p recvbuf comes from rank i (blocks of @p count elements). One group of
 * ncclSend/ncclRecv with every peer; the own block is copied with
 * cudaMemcpyAsync (device to device). In place (sendbuf == recvbuf), the
 * send side is first copied into a scratch buffer cached on the handle
 * (stream-ordered cudaMallocAsync, grown on demand, never freed per call).
 * May be called inside a group, except in place (GS_ERR_INVALID_USAGE: the
 * scratch would be read only when the outer group launches).
 */
gs_status_t gs__nccl_alltoall(gs__nccl_t *nccl, const void *sendbuf, void *recvbuf, size_t count,
                              gs_dtype_t dtype, void *stream);

/**
 * @brief ncclSend of @p count elements to @p peer. Inside a group (the usual
 * use: the compressed device all-reduce sends and receives payload bytes
 * with GS_DTYPE_U8) it only queues the send, and @p peer may be this rank;
 * outside a group it is an operation of its own, matched in order by the
 * peer's gs__nccl_recv().
 */
gs_status_t gs__nccl_send(gs__nccl_t *nccl, const void *buf, size_t count, gs_dtype_t dtype,
                          int peer, void *stream);

/** @brief ncclRecv of @p count elements from @p peer; as gs__nccl_send(). */
gs_status_t gs__nccl_recv(gs__nccl_t *nccl, void *buf, size_t count, gs_dtype_t dtype, int peer,
                          void *stream);

/**
 * @brief Open a group (ncclGroupStart) on the calling thread: the operations
 * issued until the matching gs__nccl_group_end() are launched together.
 * Groups nest. All operations of one group must use one handle; the first
 * of them takes the handle's lock, which the outermost group end releases
 * (so an abort from another thread waits for the group to be launched).
 * @return GS_OK, or NCCL's error mapped.
 */
gs_status_t gs__nccl_group_start(void);

/**
 * @brief Close the group the calling thread opened last (ncclGroupEnd). At
 * the outermost level the group is launched and, as for any operation, the
 * call returns once NCCL has enqueued it on the streams (polled up to the
 * handle's timeout). @p nccl is the handle the group's operations used; it
 * may be NULL only when the group held none.
 * @return GS_OK; GS_ERR_INVALID_USAGE (no group open, or @p nccl is not the
 *         handle the group used; the group is closed all the same);
 *         GS_ERR_ABORTED; GS_ERR_TIMEOUT; or NCCL's error mapped as by
 *         gs__nccl_poll().
 */
gs_status_t gs__nccl_group_end(gs__nccl_t *nccl);


/* ===================================================================== */
/* Progress and completion                                               */
/* ===================================================================== */

/**
 * @brief Read the communicator's asynchronous state (ncclCommGetAsyncError)
 * without waiting. Owner thread. Does not abort: a waiter that meets an
 * error calls gs__nccl_fail().
 * @return GS_OK (healthy, nothing being enqueued); GS_INPROGRESS (NCCL is
 *         still initialising or enqueuing); GS_ERR_ABORTED; GS_ERR_INVALID_ARG
 *         (nccl NULL); or the asynchronous error, with NCCL's text in
 *         gs_last_error(): ncclRemoteError and ncclSystemError (a peer process
 *         died or the network failed under a running communicator) give
 *         GS_ERR_PEER_FAILED, ncclInvalidArgument GS_ERR_INVALID_ARG,
 *         ncclInvalidUsage GS_ERR_INVALID_USAGE, ncclUnhandledCudaError
 *         GS_ERR_CUDA, ncclInternalError GS_ERR_INTERNAL.
 */
gs_status_t gs__nccl_poll(gs__nccl_t *nccl);

/**
 * @brief Abort the NCCL communicator because of an error the caller has
 * already reported (a wait that timed out, an asynchronous error, a failed
 * CUDA query): as gs__nccl_abort(), but it keeps this thread's error text,
 * does nothing when the handle is aborted already or NULL, and logs NCCL's
 * own failure to abort instead of returning it. Any thread that has no
 * group open on this handle.
 * @param[in] why a few words for the log ("timeout").
 */
void gs__nccl_fail(gs__nccl_t *nccl, const char *why);


/* ===================================================================== */
/* Pure mapping tables (nccl_map.c); local, thread-safe, need no GPU      */
/* ===================================================================== */

/**
 * @brief The ncclDataType_t of a gradsync dtype: f32, f64, f16, bf16, i8, u8,
 * i32 and i64 all map (bf16 needs NCCL >= 2.10; the build requires 2.18).
 * @param[out] nccl_type_out written only on success.
 * @return GS_OK, GS_ERR_INVALID_ARG (unknown dtype, or nccl_type_out NULL).
 */
gs_status_t gs__nccl_dtype(gs_dtype_t dtype, int *nccl_type_out);

/**
 * @brief The ncclRedOp_t of a gradsync op for @p dtype: SUM, PROD, MIN, MAX,
 * and AVG as ncclAvg (float types only).
 * @param[out] nccl_op_out written only on success.
 * @return GS_OK, GS_ERR_INVALID_ARG (unknown op or dtype, GS_OP_AVG on an
 *         integer dtype, or nccl_op_out NULL), GS_ERR_UNSUPPORTED (the bitwise
 *         ops: NCCL has none).
 */
gs_status_t gs__nccl_op(gs_op_t op, gs_dtype_t dtype, int *nccl_op_out);

/** @brief NCCL's name of a result code ("ncclSystemError"), or "unknown NCCL result". */
const char *gs__nccl_result_name(int nccl_result);

/**
 * @brief Map an ncclResult_t returned by an NCCL call to a status and, for an
 * error, write "<what>: <NCCL's name> (<ncclGetErrorString>)" plus NCCL's
 * last error text (ncclGetLastError) into gs_last_error() (logged once).
 * ncclSuccess gives GS_OK and ncclInProgress GS_INPROGRESS, leaving the text
 * alone; ncclUnhandledCudaError GS_ERR_CUDA, ncclSystemError GS_ERR_SYSTEM,
 * ncclInternalError GS_ERR_INTERNAL, ncclInvalidArgument GS_ERR_INVALID_ARG,
 * ncclInvalidUsage GS_ERR_INVALID_USAGE (with a sentence of its own when
 * NCCL found two ranks on one GPU), ncclRemoteError GS_ERR_PEER_FAILED, any
 * other value GS_ERR_INTERNAL.
 */
gs_status_t gs__nccl_status(int nccl_result, const char *what);

/**
 * @brief gs__nccl_status() with NCCL's last error text given by the caller
 * (the unit test's seam). @p async: the code came from
 * ncclCommGetAsyncError on a communicator, where ncclSystemError means a
 * failed peer or link (GS_ERR_PEER_FAILED) rather than a local system call.
 * @p nccl_text may be NULL or empty.
 */
gs_status_t gs__nccl_status_msg(int nccl_result, int async, const char *what,
                                const char *nccl_text);


/* ===================================================================== */
/* Shared by nccl_engine.c and nccl_coll.c only                        */
/* ===================================================================== */

struct ncclComm; /* nccl.h: typedef struct ncclComm *ncclComm_t */

/*
 * Begin an NCCL call on @p nccl: take its lock (outside a group; inside one,
 * the group holds it from its first operation on), fail with GS_ERR_ABORTED
 * when aborted, and give the NCCL communicator. On GS_OK the caller makes
 * its NCCL call and must pass the result to gs__nccl_leave().
 */
gs_status_t gs__nccl_enter(gs__nccl_t *nccl, const char *call, struct ncclComm **comm_out);

/*
 * End the NCCL call begun by gs__nccl_enter(): release the lock (outside a
 * group), then map @p nccl_result. Outside a group an ncclInProgress result
 * is polled until NCCL has enqueued the work (up to the handle's timeout).
 */
gs_status_t gs__nccl_leave(gs__nccl_t *nccl, int nccl_result, const char *call);

/* Nesting depth of the calling thread's open groups (0: none). */
int gs__nccl_group_depth(void);

/*
 * A device scratch buffer of at least @p bytes on the handle's GPU, usable on
 * @p stream (a cudaStream_t) until gs__nccl_scratch_release() is called with
 * the same stream. Grown with cudaFreeAsync/cudaMallocAsync, ordered after
 * the previous use on any stream. GS_OK, GS_ERR_CUDA, GS_ERR_NO_MEMORY.
 */
gs_status_t gs__nccl_scratch_get(gs__nccl_t *nccl, size_t bytes, void *stream, void **scratch_out);

/* Record that the scratch buffer's use ends at this point of @p stream. */
gs_status_t gs__nccl_scratch_release(gs__nccl_t *nccl, void *stream);

/* Map a cudaError_t (as int) of a CUDA call gradsync made itself. */
gs_status_t gs__nccl_cuda_status(int cuda_error, const gs__nccl_t *nccl, const char *call);

#endif /* GS_DEVICE_NCCL_ENGINE_H */
