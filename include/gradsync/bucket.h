/* SPDX-License-Identifier: Apache-2.0 */
/**
 * @file
 * gradsync gradient bucketing: overlap the all-reduce of gradients with the
 * backward pass, as PyTorch DDP's Reducer and Horovod's tensor fusion do.
 *
 * A bucketer holds a list of gradient tensors, registered once in forward
 * (layer) order. It groups them into buckets of about @c bucket_bytes,
 * filled in REVERSE registration order (the backward pass produces the
 * last layer's gradients first), with a smaller first bucket so that
 * communication starts early. During each training step the backward hook
 * calls gs_bucketer_ready() for every tensor as its gradient becomes final,
 * from any thread and in any order; a bucket's non-blocking all-reduce
 * (gs_iallreduce_ex) starts once all its tensors are ready AND every bucket
 * before it has started, because every rank must start its collectives in
 * the same order. gs_bucketer_wait() then waits for every bucket and
 * leaves the reduced (summed or averaged) gradient in every tensor.
 *
 * What this header does not do: it does not run the backward pass, hook
 * into a framework, or reduce anything but whole registered tensors.
 * docs/async.md explains the semantics, the defaults and the measured
 * overlap. The parameter server is in gradsync/ps.h.
 *
 * Conventions for every call in this header:
 * - Every call returns gs_status_t; on error gs_last_error() says which
 *   argument, tensor id or bucket is at fault. Output pointers (*_out) are
 *   written only on success. Argument errors (GS_ERR_INVALID_ARG,
 *   GS_ERR_UNSUPPORTED, GS_ERR_INVALID_USAGE) change nothing.
 * - A bucketer is used by one training loop: gs_bucketer_add() and
 *   gs_bucketer_wait() from one thread, gs_bucketer_ready() from any
 *   threads, but every ready() call of a step must return before that
 *   step's gs_bucketer_wait() is called (join the hook threads first).
 * - Every rank creates its bucketer with the same options and registers the
 *   same tensors (count, dtype, host or device memory) in the same order.
 */
#ifndef GRADSYNC_BUCKET_H
#define GRADSYNC_BUCKET_H

#include <stddef.h>
#include <stdint.h>

#include "gradsync/status.h"
#include "gradsync/types.h"

#ifdef __cplusplus
extern "C" {
#endif

struct gs_codec_config;

/* ===================================================================== */
/* Options                                                               */
/* ===================================================================== */

/** @brief Handle to a bucketer. GS_BUCKETER_NULL when none. */
typedef struct gs_bucketer *gs_bucketer_t;

/** @brief The null bucketer handle. */
#define GS_BUCKETER_NULL ((gs_bucketer_t)0)

/**
 * @brief Options of gs_bucketer_create(). Initialise with
 * GS_BUCKETER_OPTS_INIT, then set the fields you want; fields are only
 * appended, and the library reads the ones that fit in @c size.
 */
typedef struct gs_bucketer_opts {
    size_t size; /**< sizeof the struct the caller was built with (INIT macro) */
    /** Bytes per bucket: a bucket is closed as soon as it holds at least this
     * many bytes (DDP's rule, so a bucket may exceed it by its last tensor).
     * GS_UNSET: 25 MiB. 0: every tensor in a bucket of its own. */
    int64_t bucket_bytes;
    /** The same for bucket 0, the first to be reduced. GS_UNSET: 1 MiB. */
    int64_t first_bucket_bytes;
    gs_op_t op;     /**< GS_OP_AVG (the default) or GS_OP_SUM */
    gs_algo_t algo; /**< all-reduce algorithm; GS_ALGO_AUTO (the default): the model chooses */
    /** Compress every bucket with this codec (gradsync/compress.h), or NULL
     * (default: none). Copied by gs_bucketer_create(). Needs float tensors
     * and algo GS_ALGO_AUTO. */
    const struct gs_codec_config *codec;
    /** Error feedback per bucket, the residuals owned by the bucketer: 1 on,
     * 0 off. GS_UNSET: on with a codec other than GS_CODEC_NONE. */
    int error_feedback;
    /** 1: after the first step, regroup the buckets by the order in which
     * rank 0 saw its tensors become ready (DDP's rebuild); 0: keep the
     * reverse registration order. GS_UNSET: 1 for host tensors (device
     * tensors are never regrouped). */
    int rebuild;
    void *stream;   /**< cudaStream_t for device tensors, or NULL (legacy default stream) */
    unsigned flags; /**< reserved, must be 0 */
} gs_bucketer_opts_t;

/** @brief Initialiser of gs_bucketer_opts_t: size set, every knob unset (defaults apply). */
#define GS_BUCKETER_OPTS_INIT                                                                      \
    {                                                                                              \
        sizeof(gs_bucketer_opts_t), GS_UNSET, GS_UNSET, GS_OP_AVG, GS_ALGO_AUTO, NULL, GS_UNSET,   \
            GS_UNSET, NULL, 0u                                                                     \
    }

/* ===================================================================== */
/* Lifetime and registration                                             */
/* ===================================================================== */

/**
 * @brief Create a bucketer that reduces over @p comm.
 * @param[in] comm the communicator; it must outlive the bucketer. The
 * bucketer's all-reduces start at times that depend on when gradients
 * become ready: give it a communicator of its own (gs_comm_split) if this
 * program issues other collectives on @p comm during the backward pass.
 * @param[in] opts options, or NULL for the defaults; borrowed for the call.
 * @param[out] bucketer_out the new handle.
 * @return GS_OK; GS_ERR_INVALID_ARG for a NULL @p comm or @p bucketer_out,
 * a bad opts->size, a negative byte count, an op other than sum or avg,
 * flags other than 0, a bad codec configuration (named) or a codec with an
 * algo other than GS_ALGO_AUTO; GS_ERR_NO_MEMORY; the communicator's sticky
 * error.
 * @note Local (no communication). Not thread-safe against other calls on
 * the new handle until it is returned.
 */
GS_API gs_status_t gs_bucketer_create(gs_comm_t comm, const gs_bucketer_opts_t *opts,
                                      gs_bucketer_t *bucketer_out);

/**
 * @brief Register a gradient tensor of @p count elements of @p dtype at
 * @p ptr; ids are given in registration order from 0. Register in forward
 * (layer) order: buckets are filled from the last id down.
 * @param[in] bucketer the bucketer.
 * @param[in] ptr the gradient buffer (may be NULL when @p count is 0). It
 * must stay valid, and at this address, until gs_bucketer_destroy().
 * Host memory, or CUDA device memory under the restriction below.
 * @param[in] count elements; 0 is allowed (the tensor must still be marked
 * ready every step, and moves no bytes).
 * @param[in] dtype any dtype with op sum; a float dtype with op avg or with
 * a codec. A change of dtype starts a new bucket.
 * @param[out] id_out the tensor's id, for gs_bucketer_ready().
 * @return GS_OK; GS_ERR_INVALID_ARG for a NULL handle or @p id_out, a NULL
 * @p ptr with a nonzero count, an unknown dtype, a dtype the op or the
 * codec cannot reduce, a tensor that overlaps one already registered, a
 * size past 2^50 bytes, or a call after the first gs_bucketer_ready()
 * (registration is closed then: create a new bucketer to change the set);
 * GS_ERR_UNSUPPORTED for device memory that breaks the restriction below;
 * GS_ERR_NO_MEMORY.
 * @note Local. Not thread-safe. Device tensors: the fusion copy would need
 * cudaMemcpyAsync, which the bucketer does not do, so every bucket must be
 * reduced in place. That holds when all tensors are device memory and each
 * starts where the previously registered one ends (one flat gradient
 * buffer, registered in memory order, as DDP's gradient_as_bucket_view
 * gives). Mixing host and device tensors, or a device tensor elsewhere,
 * is GS_ERR_UNSUPPORTED.
 */
GS_API gs_status_t gs_bucketer_add(gs_bucketer_t bucketer, void *ptr, size_t count,
                                   gs_dtype_t dtype, size_t *id_out);

/**
 * @brief Wait for the all-reduces in flight (bounded by the communicator's
 * deadline each), free the fusion buffers, the error-feedback residuals and
 * the bucketer. Always frees, even after errors. Buckets of an unfinished
 * step that were never started are not started.
 * @return GS_OK (also for GS_BUCKETER_NULL), or the first error of an
 * all-reduce that was still in flight.
 * @note Local. Do not use the handle afterwards. Call it before
 * gs_comm_destroy() of the bucketer's communicator.
 */
GS_API gs_status_t gs_bucketer_destroy(gs_bucketer_t bucketer);

/* ===================================================================== */
/* One training step                                                     */
/* ===================================================================== */

/**
 * @brief Mark tensor @p id's gradient final for this step. The first call
 * of the first step closes registration and forms the buckets (allocating
 * the fusion buffers, once). When the tensor completes its bucket, that
 * bucket and every complete bucket after it start their all-reduce in
 * bucket order, on this thread, provided every earlier bucket has started.
 * A tensor of a bucket that is not reduced in place is copied into the
 * bucket's fusion buffer here: do not write it again before
 * gs_bucketer_wait() returns. When it starts buckets, the call also
 * releases the earlier buckets whose all-reduce has finished and copies
 * them back into their tensors, so that those copies overlap the rest of
 * the backward pass instead of adding to gs_bucketer_wait().
 * @return GS_OK; GS_ERR_INVALID_ARG for a NULL handle, an unknown id (none
 * registered, or @p id past the last) or a tensor already marked in this
 * step (named), nothing changed; GS_ERR_UNSUPPORTED (first call only) when
 * a bucket of device tensors would need a copy; GS_ERR_NO_MEMORY (first
 * call only). An all-reduce that fails to start is reported by
 * gs_bucketer_wait(), not here.
 * @note Local. Thread-safe: any thread, any order, concurrently with other
 * gs_bucketer_ready() calls (lock-free but for a short lock when a bucket
 * completes). Never blocks on communication.
 */
GS_API gs_status_t gs_bucketer_ready(gs_bucketer_t bucketer, size_t id);

/**
 * @brief End the step: check that every tensor was marked ready, wait for
 * every bucket's all-reduce in order, copy each fused bucket back into its
 * tensors as soon as it completes (unless gs_bucketer_ready() already
 * did), and reset the per-step state for the
 * next step. At the end of the first step, with rebuild on, rank 0's ready
 * order is broadcast (one gs_broadcast) and every rank regroups the
 * buckets from it alike (stats->rebuilt tells whether the grouping changed;
 * error-feedback residuals then restart from zero).
 * @return GS_OK when every tensor holds the reduced gradient.
 * GS_ERR_INVALID_ARG for a NULL handle, or when some tensors were not
 * marked ready in this step: gs_last_error() names them, nothing changed
 * (the buckets already started stay in flight); mark them and call again,
 * or destroy the bucketer. Otherwise the first error of the step's
 * all-reduces (GS_ERR_TIMEOUT, GS_ERR_PEER_FAILED, ...: a rank that never
 * starts a bucket makes the others fail by the communicator's deadline);
 * the step is over then, and the tensors hold unspecified values.
 * GS_ERR_PROTOCOL when rank 0's broadcast order is not a permutation;
 * GS_ERR_NO_MEMORY when regrouping cannot allocate (the bucketer is then
 * unusable: every later call returns that error).
 * @note Collective over the bucketer's communicator (its all-reduces and
 * the one broadcast). Blocking, bounded by the communicator's deadline.
 * Call it from one thread, after every gs_bucketer_ready() of the step has
 * returned. No allocation after the first step.
 */
GS_API gs_status_t gs_bucketer_wait(gs_bucketer_t bucketer);

/* ===================================================================== */
/* Introspection                                                         */
/* ===================================================================== */

/** @brief Statistics of a bucketer. Append-only; size first (GS_BUCKETER_STATS_INIT). */
typedef struct gs_bucketer_stats {
    size_t size;               /**< set by the caller (INIT macro); then the bytes written */
    uint64_t steps;            /**< steps finished (wait ran every bucket, whatever the status) */
    uint64_t failed_steps;     /**< of which returned an error */
    uint64_t tensors;          /**< tensors registered */
    uint64_t buckets;          /**< buckets of the current grouping (0 before the first step) */
    uint64_t inplace_buckets;  /**< of which reduced in place (their tensors are contiguous) */
    uint64_t bytes;            /**< bytes reduced per step (all tensors) */
    uint64_t fusion_bytes;     /**< bytes of fusion buffers held (the buckets not in place) */
    uint64_t last_exposed_ns;  /**< last step: from the last ready() to wait() returning */
    uint64_t total_exposed_ns; /**< the same, summed over the steps */
    uint64_t last_step_ns;     /**< last step: from the first ready() to wait() returning */
    int rebuilt;               /**< 1 once the buckets were regrouped by the observed ready order */
    int device;                /**< 1 when the tensors are device memory */
} gs_bucketer_stats_t;

/** @brief Initialiser of gs_bucketer_stats_t: size set, everything else 0. */
#define GS_BUCKETER_STATS_INIT                                                                     \
    {                                                                                              \
        sizeof(gs_bucketer_stats_t), 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0                            \
    }

/**
 * @brief Read the statistics into @p stats_out, whose size field the caller
 * sets first (GS_BUCKETER_STATS_INIT); fields beyond it are not written.
 * @return GS_OK; GS_ERR_INVALID_ARG for a NULL pointer or a size smaller
 * than the first version of the struct or implausibly large.
 * @note Local. Call it from the thread that calls gs_bucketer_wait(), not
 * during it.
 */
GS_API gs_status_t gs_bucketer_stats(gs_bucketer_t bucketer, gs_bucketer_stats_t *stats_out);

/** @brief One bucket of the current grouping. Append-only; size first (GS_BUCKET_INFO_INIT). */
typedef struct gs_bucket_info {
    size_t size;      /**< set by the caller (INIT macro) */
    size_t count;     /**< elements of the fused bucket */
    gs_dtype_t dtype; /**< element type of all its tensors */
    size_t ntensors;  /**< tensors in it */
    int inplace;      /**< 1 when reduced in place, 0 through a fusion buffer */
} gs_bucket_info_t;

/** @brief Initialiser of gs_bucket_info_t: size set, everything else 0. */
#define GS_BUCKET_INFO_INIT                                                                        \
    {                                                                                              \
        sizeof(gs_bucket_info_t), 0, GS_DTYPE_F32, 0, 0                                            \
    }

/**
 * @brief Describe bucket @p index (0 is reduced first) of the grouping the
 * current step uses (after the first step's gs_bucketer_wait(), the rebuilt
 * one).
 * @return GS_OK; GS_ERR_INVALID_ARG for a NULL pointer, a bad size or an
 * index past the last bucket; GS_ERR_INVALID_USAGE before the first
 * gs_bucketer_ready() (the buckets do not exist yet).
 * @note Local. Not during gs_bucketer_wait().
 */
GS_API gs_status_t gs_bucketer_bucket_info(gs_bucketer_t bucketer, size_t index,
                                           gs_bucket_info_t *info_out);

/**
 * @brief Where tensor @p id sits in the current grouping: its bucket and its
 * offset, in elements, in that bucket's fused layout. Inside a bucket the
 * tensors lie in ascending id order, whatever order filled the bucket, so
 * the layout is the same on every rank.
 * @return as gs_bucketer_bucket_info(), with GS_ERR_INVALID_ARG for an
 * unknown id.
 * @note Local. Not during gs_bucketer_wait().
 */
GS_API gs_status_t gs_bucketer_locate(gs_bucketer_t bucketer, size_t id, size_t *bucket_out,
                                      size_t *offset_out);

#ifdef __cplusplus
}
#endif

#endif /* GRADSYNC_BUCKET_H */
