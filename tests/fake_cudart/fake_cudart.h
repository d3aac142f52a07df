/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The control side of the interposed CUDA runtime and the fake NCCL of the
 * device path's CPU tests (fake_cudart.c, linked ahead of libcudart;
 * fake_nccl.c, a libnccl.so.2 of its own that the library's dlopen finds;
 * built with the tests only, never installed). What the fake
 * runtime does, and the real one's behaviour it stands for:
 *
 * - a last-error slot per host thread: every failing call writes it,
 *   cudaGetLastError() reads and clears it, cudaPeekAtLastError() reads it;
 * - every event answers cudaErrorNotReady (and writes the slot) to the
 *   first query after each record, and cudaSuccess after that; with
 *   gs_fake_rt_set_hang(1) every query answers "not ready" and
 *   cudaStreamSynchronize, cudaEventSynchronize and cudaDeviceSynchronize
 *   block until the hang is lifted: the GPU work never completes;
 * - two devices; a current device per host thread (0 until cudaSetDevice),
 *   and a primary context per device, made by cudaSetDevice (CUDA 12
 *   semantics) or by the first call that needs one on the thread's
 *   current device; cuDevicePrimaryCtxGetState (through
 *   cudaGetDriverEntryPointByVersion) reports them;
 * - "device" memory is host memory: copies and memsets happen at once;
 * - kernel launches (<<< >>> and cudaLaunchKernelEx) are recorded and do
 *   nothing: the kernels' arithmetic is tested elsewhere (test_kernel_*).
 *
 * The fake NCCL serves one rank: init, split, finalize, destroy and abort,
 * groups, collectives as local copies; ncclCommGetAsyncError answers what
 * gs_fake_nccl_set_async_error() set.
 */
#ifndef GS_TESTS_FAKE_CUDART_H
#define GS_TESTS_FAKE_CUDART_H

/* Counted calls (gs_fake_rt_count). */
typedef enum gs_fake_rt_counter {
    GS_FAKE_NOT_READY,      /* cudaEventQuery answers "not ready" */
    GS_FAKE_UNBOUNDED_WAIT, /* cudaStreamSynchronize, cudaEventSynchronize, cudaDeviceSynchronize */
    GS_FAKE_LAUNCH,         /* kernel launches, either way */
    GS_FAKE_SET_DEVICE,     /* cudaSetDevice */
    GS_FAKE_NCCL_COLL,      /* NCCL collectives */
    GS_FAKE_NCCL_ABORT,     /* ncclCommAbort */
    GS_FAKE_LEGACY_MEMSET,  /* cudaMemset, or cudaMemsetAsync on stream 0: ordered after
                               blocking streams only, not after a non-blocking one */
    GS_FAKE_COUNTERS
} gs_fake_rt_counter_t;

/* Counters to 0, no hang, no injected error, no context on any device (the
 * calling threads' current devices stay). */
void gs_fake_rt_reset(void);

/* 1: the GPU work never completes (see above); 0: it does again. */
void gs_fake_rt_set_hang(int on);

/* The next kernel launch fails with @p err (a cudaError_t), once. */
void gs_fake_rt_fail_next_launch(int err);

/* Write @p err into the calling thread's last-error slot, as a failed call
 * of the application's own would. */
void gs_fake_rt_set_last_error(int err);

int gs_fake_rt_count(gs_fake_rt_counter_t which);

/* Count one call (fake_nccl.c's side). */
void gs_fake_rt_bump(gs_fake_rt_counter_t which);

/* 1 when device @p device has a primary context. */
int gs_fake_rt_has_context(int device);

/* What ncclCommGetAsyncError answers from now on (an ncclResult_t; 0 by
 * default). The state lives in fake_cudart.c; fake_nccl.c reads it. */
void gs_fake_nccl_set_async_error(int result);
int gs_fake_nccl_async_error(void);

#endif /* GS_TESTS_FAKE_CUDART_H */
