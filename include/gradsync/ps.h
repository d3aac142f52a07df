/* SPDX-License-Identifier: Apache-2.0 */
/**
 * @file
 * gradsync parameter server: keys (named tensors) live on server ranks,
 * workers push gradients and pull parameters without a collective, and
 * the servers apply an update rule (SGD with momentum and weight decay,
 * Adam, or the caller's callback) under BSP, SSP or ASP consistency, as in
 * ps-lite, Petuum and BytePS. It runs on its own duplicates of the
 * communicator given to gs_ps_create(), with a receive thread and a server
 * thread per rank, over whichever transport that communicator uses (TCP,
 * shared memory, MPI). docs/async.md, "Parameter server", has the design.
 *
 * Roles. By default every rank is a worker and the server of a part of the
 * keys (colocated). With opts.servers = S (or GS_PS_SERVERS=S) the last S
 * ranks are servers only and the first n - S ranks workers only; a
 * server-only rank registers the keys and then calls gs_ps_destroy(), which
 * serves until every worker has destroyed its handle.
 *
 * Sharding. A key of at least opts.split_bytes is cut into contiguous,
 * balanced element ranges, one per server, so that no server is a hot spot;
 * a smaller key lives whole on the server with the fewest bytes so far.
 * Every rank computes the same plan from the registration order.
 *
 * Clocks and consistency. Each worker counts its iterations with
 * gs_ps_clock(); a push is tagged with the worker's clock t. A pull at
 * clock t needs round r = t when this worker has already pushed that key
 * in clock t, else r = t - 1 (so both "pull, compute, push, clock" and
 * "push, pull, clock" loops work):
 * - GS_PS_BSP: the pull returns the state after every worker's pushes of
 *   rounds <= r and nothing later. The server sums the workers' gradients
 *   of a round and applies the rule once per round (MXNet's dist_sync).
 * - GS_PS_SSP (staleness s): the pull waits until every worker has pushed
 *   round r - s or moved past it; so no worker reads more than s clocks
 *   ahead of the slowest. Pushes are applied one by one as they arrive.
 * - GS_PS_ASP: no waiting; pushes are applied as they arrive.
 * A worker that does not push a key in some clock (sparse training) counts
 * as done with it once it calls gs_ps_clock(); a worker that destroyed its
 * handle no longer holds anyone back. Under BSP and SSP a key is pushed at
 * most once per clock by a worker. Under BSP a server keeps at most 2
 * pushes of later rounds per worker and shard: a worker that pulls (any
 * key) in every clock never has more, and one that pushes and clocks
 * without pulling gets GS_ERR_INVALID_USAGE for its push of the third
 * round ahead (docs/async.md, "Limits").
 *
 * Errors. A pull that waits more than half the deadline (opts.timeout_ms)
 * for slow workers fails with GS_ERR_TIMEOUT naming them; that failure is
 * not sticky. A rank that dies gives every other rank GS_ERR_PEER_FAILED
 * naming it (from the transport, within milliseconds); from then on every
 * call on the handle returns that error (sticky). A rank that breaks the
 * protocol (a malformed message, a sender field that names another rank,
 * more unanswered requests at a server than its own client allows) fails
 * the handle with GS_ERR_PROTOCOL naming it, also sticky.
 *
 * Conventions for every call in this header: calls return gs_status_t and
 * explain failures in gs_last_error(); *_out pointers are written only on
 * success; collective calls must be made by every rank of the
 * communicator, in the same order, with the same arguments.
 */
#ifndef GRADSYNC_PS_H
#define GRADSYNC_PS_H

#include <stddef.h>
#include <stdint.h>

#include "gradsync/status.h"
#include "gradsync/types.h"

#ifdef __cplusplus
extern "C" {
#endif

struct gs_codec_config;

/** @brief Handle to a parameter server instance. GS_PS_NULL when none. */
typedef struct gs_ps *gs_ps_t;
/** @brief Handle to a push or pull in progress. GS_PS_REQUEST_NULL when none. */
typedef struct gs_ps_request *gs_ps_request_t;

/** @brief The null parameter-server handle. */
#define GS_PS_NULL ((gs_ps_t)0)
/** @brief The null parameter-server request handle. */
#define GS_PS_REQUEST_NULL ((gs_ps_request_t)0)

/* ===================================================================== */
/* Options                                                               */
/* ===================================================================== */

/** @brief Consistency model (values are stable). */
typedef enum gs_ps_consistency {
    GS_PS_BSP = 0, /**< bulk synchronous: rounds applied whole */
    GS_PS_SSP = 1, /**< stale synchronous with opts.staleness */
    GS_PS_ASP = 2  /**< asynchronous: no waiting */
} gs_ps_consistency_t;

/** @brief Update rule applied by the servers (values are stable). */
typedef enum gs_ps_rule {
    GS_PS_RULE_SGD = 0,     /**< w -= lr * v, v = momentum * v + (g + weight_decay * w) */
    GS_PS_RULE_ADAM = 1,    /**< Adam (L2 weight decay added to g), bias-corrected */
    GS_PS_RULE_CALLBACK = 2 /**< opts.update_fn */
} gs_ps_rule_t;

/**
 * @brief The caller's update rule (GS_PS_RULE_CALLBACK), run on a server's
 * service thread for one shard: elements [offset, offset + count) of @p key.
 * @param[in] user opts.user.
 * @param[in] key the key being updated.
 * @param[in] offset first element of the shard within the key.
 * @param[in] count elements of the shard.
 * @param[in,out] weights @p count elements of the key's dtype, to update.
 * @param[in] dtype the key's dtype (the type of @p weights).
 * @param[in] grad @p count elements of @p grad_dtype: GS_DTYPE_F64 for f64
 * keys, GS_DTYPE_F32 for the others. Under BSP the sum of every worker's
 * gradient of the round, else one worker's push.
 * @param[in] grad_dtype the type of @p grad.
 * @return GS_OK; an error fails the push (ASP, SSP), or (BSP) the round is
 * skipped and the pulls that wait for it fail with that status; later
 * rounds go on. Either way the shard stays as the callback left it.
 * @note Called by one thread per rank at a time; must not call gs_ps_*.
 */
typedef gs_status_t (*gs_ps_update_fn_t)(void *user, uint64_t key, size_t offset, size_t count,
                                         void *weights, gs_dtype_t dtype, const void *grad,
                                         gs_dtype_t grad_dtype);

/**
 * @brief Options of gs_ps_create(). Initialise with GS_PS_OPTS_INIT; fields
 * left at GS_UNSET (numbers), (double)GS_UNSET (reals) or NULL take the
 * default shown. Fields are only appended: the library reads the fields
 * that fit in @c size. Every rank must pass equal options (checked).
 */
typedef struct gs_ps_opts {
    size_t size;                     /**< sizeof the caller's struct (set by GS_PS_OPTS_INIT) */
    gs_ps_consistency_t consistency; /**< default GS_PS_BSP */
    int staleness;                   /**< SSP bound s >= 0; default 2 (ignored for BSP, ASP) */
    int servers;                     /**< 0: colocated; S in 1..n-1: the last S ranks serve only;
                                          default GS_PS_SERVERS from the environment, else 0 */
    gs_ps_rule_t rule;               /**< default GS_PS_RULE_SGD */
    double lr;                       /**< learning rate, default 0.01 */
    double momentum;                 /**< SGD momentum in [0, 1), default 0 */
    double weight_decay;             /**< L2 weight decay >= 0, default 0 */
    double beta1;                    /**< Adam, in [0, 1), default 0.9 */
    double beta2;                    /**< Adam, in [0, 1), default 0.999 */
    double eps;                      /**< Adam, > 0, default 1e-8 */
    gs_ps_update_fn_t update_fn;     /**< GS_PS_RULE_CALLBACK: the rule */
    void *user;                      /**< passed to update_fn */
    /** Compress pushes with this codec (gradsync/compress.h), or NULL. Copied by
     * gs_ps_create(). The worker keeps one error-feedback residual per key and
     * server when the codec is lossy; the server decodes. */
    const struct gs_codec_config *codec;
    int64_t split_bytes; /**< keys of at least this many bytes are split over every
                                          server; default 1 MiB */
    int timeout_ms;      /**< deadline of the parameter server's waits; default
                                          GS_TIMEOUT_MS (set it when the communicator's deadline
                                          came from gs_config_t.timeout_ms instead) */
} gs_ps_opts_t;

/** @brief Initialiser of gs_ps_opts_t: size set, every knob unset (defaults apply). */
#define GS_PS_OPTS_INIT                                                                            \
    {                                                                                              \
        sizeof(gs_ps_opts_t), GS_PS_BSP, GS_UNSET, GS_UNSET, GS_PS_RULE_SGD, (double)GS_UNSET,     \
            (double)GS_UNSET, (double)GS_UNSET, (double)GS_UNSET, (double)GS_UNSET,                \
            (double)GS_UNSET, NULL, NULL, NULL, (int64_t)GS_UNSET, GS_UNSET                        \
    }

/* ===================================================================== */
/* Lifetime and keys                                                     */
/* ===================================================================== */

/**
 * @brief Create a parameter server over the ranks of @p comm: duplicate the
 * communicator, agree on the options, start the service thread.
 * @param[in] comm the ranks taking part; not used by the parameter server
 * afterwards (it may be used for collectives meanwhile) but must outlive it.
 * @param[in] opts options, or NULL for the defaults.
 * @param[out] ps_out the new handle.
 * @return GS_OK; GS_ERR_INVALID_ARG for a bad option or GS_PS_SERVERS (named),
 * or when ranks passed different options (the first differing rank is
 * named, on every rank); GS_ERR_NO_MEMORY; GS_ERR_SYSTEM (thread); errors of
 * gs_comm_split().
 * @note Collective over @p comm. Blocking, with the communicator's deadline.
 */
GS_API gs_status_t gs_ps_create(gs_comm_t comm, const gs_ps_opts_t *opts, gs_ps_t *ps_out);

/**
 * @brief Register @p key: @p count elements of @p dtype, initialised from
 * rank 0's @p initial_value (zeros when rank 0 passes NULL; other ranks'
 * values are not read and may be NULL).
 * @param[in] ps the parameter-server handle.
 * @param[in] key the key, any 64-bit value not registered before.
 * @param[in] count elements of the tensor; more than 0.
 * @param[in] dtype GS_DTYPE_F32, F64, F16 or BF16 (the update rules are float).
 * @param[in] initial_value rank 0: @p count elements of @p dtype, or NULL.
 * @return GS_OK; GS_ERR_INVALID_ARG for a key registered before, count 0, a
 * non-float dtype, or ranks that passed different key, count or dtype (named
 * on every rank); GS_ERR_NO_MEMORY; the handle's sticky error.
 * @note Collective, blocking. Every rank registers the same keys in the
 * same order (the order decides the placement). Keys may be registered at
 * any time, also after pushes and pulls of other keys.
 */
GS_API gs_status_t gs_ps_register(gs_ps_t ps, uint64_t key, size_t count, gs_dtype_t dtype,
                                  const void *initial_value);

/**
 * @brief Finish this rank's part of the parameter server and free it. Every
 * request still pending is completed first (its handle stays valid: release
 * it with gs_ps_wait() or gs_ps_test() afterwards). A server keeps serving
 * the workers that are still running; the call returns once every rank has
 * called it. Always frees, even after errors.
 * @return GS_OK, or the first error met (a rank that died, a deadline).
 * @note Collective, blocking. Each wait is bounded by the deadline, and the
 * wait for workers still running is kept alive by their heartbeats.
 */
GS_API gs_status_t gs_ps_destroy(gs_ps_t ps);

/* ===================================================================== */
/* Pushes, pulls, clocks                                                 */
/* ===================================================================== */

/**
 * @brief Start sending @p grad (the whole key: @p count elements of
 * @p dtype) to the key's servers and return at once. The request completes
 * when every server has taken the gradient (applied it, or under BSP added
 * it to its round).
 * @return GS_OK with *req_out set; GS_ERR_INVALID_ARG when @p key is not
 * registered or @p count / @p dtype differ from the key's (nothing is
 * sent); GS_ERR_INVALID_USAGE on a server-only rank, or under BSP / SSP for
 * a second push of the key in one clock; GS_ERR_NO_RESOURCE when this
 * worker already has 65536 requests waiting for the answer of one of the
 * key's servers (nothing is sent: wait for some, then retry);
 * GS_ERR_NO_MEMORY; the sticky error.
 * @note Local, non-blocking, thread-safe. Do not modify or free @p grad
 * until gs_ps_wait() or gs_ps_test() reports completion. With a codec the
 * gradient is encoded (and the residual updated) before the call returns.
 */
GS_API gs_status_t gs_ps_push(gs_ps_t ps, uint64_t key, const void *grad, size_t count,
                              gs_dtype_t dtype, gs_ps_request_t *req_out);

/**
 * @brief Start fetching the parameters of @p key into @p out (@p count
 * elements of @p dtype) and return at once; completes once @p out holds
 * the state the consistency model promises (see the top of this header).
 * @return as gs_ps_push(), for an unknown key or a wrong count or dtype too.
 * @note Local, non-blocking, thread-safe. Do not read, modify or free
 * @p out until completion; after a failed pull its contents are undefined.
 */
GS_API gs_status_t gs_ps_pull(gs_ps_t ps, uint64_t key, void *out, size_t count, gs_dtype_t dtype,
                              gs_ps_request_t *req_out);

/**
 * @brief End this worker's iteration: its clock goes from t to t + 1 and
 * every server learns it (so that keys not pushed in clock t stop holding
 * BSP and SSP pulls). Call it after the clock's pushes were started (they
 * need not be complete).
 * @return GS_OK; GS_ERR_INVALID_USAGE on a server-only rank; the sticky error.
 * @note Local, non-blocking.
 */
GS_API gs_status_t gs_ps_clock(gs_ps_t ps);

/**
 * @brief Wait for *req, release it and set it to GS_PS_REQUEST_NULL.
 * @return the operation's status: GS_OK; GS_ERR_TIMEOUT when a pull waited
 * longer than the deadline allows for slow workers (named; not sticky);
 * GS_ERR_PEER_FAILED naming a rank that died; GS_ERR_PROTOCOL when a server
 * could not decode a compressed push; GS_ERR_INVALID_USAGE when a push
 * reached its server after the worker's next gs_ps_clock() (issue a clock's
 * pushes before its clock), or under BSP when it was more than 2 rounds
 * ahead of its shard (pull in every clock); a push refused with
 * GS_ERR_INVALID_USAGE is dropped and does not count as the clock's push of
 * the key; the error a callback returned; GS_OK for
 * GS_PS_REQUEST_NULL; GS_ERR_INVALID_ARG when @p req is NULL.
 * @note Blocking, bounded by the deadline. Also allowed after gs_ps_destroy().
 */
GS_API gs_status_t gs_ps_wait(gs_ps_request_t *req);

/**
 * @brief Check *req without blocking: GS_INPROGRESS while it runs, else as
 * gs_ps_wait() (the request is then released and *req set to NULL).
 */
GS_API gs_status_t gs_ps_test(gs_ps_request_t *req);

/**
 * @brief gs_ps_wait() on each of the @p n requests; every one is released
 * even after a failure.
 * @return GS_OK or the first error in array order.
 */
GS_API gs_status_t gs_ps_waitall(size_t n, gs_ps_request_t *reqs);

/* ===================================================================== */
/* Introspection                                                         */
/* ===================================================================== */

/** @brief What a rank is in a parameter server. Append-only; size first (GS_PS_INFO_INIT). */
typedef struct gs_ps_info {
    size_t size;        /**< set by the caller (GS_PS_INFO_INIT) */
    int rank;           /**< this rank in the communicator */
    int nranks;         /**< ranks in the communicator */
    int worker;         /**< this rank's worker index, or -1 on a server-only rank */
    int nworkers;       /**< number of workers */
    int server;         /**< this rank's server index, or -1 on a worker-only rank */
    int nservers;       /**< number of servers */
    int64_t clock;      /**< this worker's clock (number of gs_ps_clock() calls) */
    size_t nkeys;       /**< keys registered */
    size_t shard_bytes; /**< parameter bytes this rank serves */
    gs_status_t error;  /**< the sticky error, GS_OK while healthy */
} gs_ps_info_t;

/** @brief Initialiser of gs_ps_info_t: size set, everything else 0. */
#define GS_PS_INFO_INIT                                                                            \
    {                                                                                              \
        sizeof(gs_ps_info_t), 0, 0, 0, 0, 0, 0, 0, 0, 0, GS_OK                                     \
    }

/**
 * @brief Read the roles, clock and health of @p ps into @p info_out, whose
 * size field the caller sets first; fields beyond it are not written.
 * @return GS_OK; GS_ERR_INVALID_ARG for NULL pointers or a size smaller than
 * the first version of the struct.
 * @note Local, thread-safe.
 */
GS_API gs_status_t gs_ps_info(gs_ps_t ps, gs_ps_info_t *info_out);

#ifdef __cplusplus
}
#endif

#endif /* GRADSYNC_PS_H */
