/* SPDX-License-Identifier: Apache-2.0 */
/**
 * @file
 * gradsync public API: configuration, communicators, collectives,
 * point-to-point, non-blocking requests, counters and errors.
 *
 * Conventions for every call in this header:
 * - Every call returns gs_status_t (GS_OK = 0). On error, gs_last_error()
 *   returns a sentence naming the argument, peer or rank at fault.
 * - Output pointers are named *_out and are written only on success.
 * - Collective calls must be made by every rank of the communicator, in the
 *   same order, with matching counts, dtypes, ops and roots (as with MPI and
 *   NCCL). A mismatch that gradsync detects fails with GS_ERR_MISMATCH.
 * - Communicators are thread-safe: any thread may submit operations, which
 *   run in submission order on the communicator's worker thread.
 * - Once a communicator hits a peer or communicator band error (see
 *   status.h), every later call on it returns that error (sticky).
 * - Every wait has a deadline (GS_TIMEOUT_MS): no call hangs forever.
 */
#ifndef GRADSYNC_GRADSYNC_H
#define GRADSYNC_GRADSYNC_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h> /* FILE, for gs_comm_dump only */

#include "gradsync/status.h"
#include "gradsync/types.h"
#include "gradsync/version.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ===================================================================== */
/* Version and errors                                                    */
/* ===================================================================== */

/** @brief Library version as GS_VERSION_NUMBER of the library that is loaded. */
GS_API unsigned gs_version(void);
/** @brief Library version as "major.minor.patch". Never NULL. */
GS_API const char *gs_version_string(void);

/** @brief One-line description of @p status. Never NULL; unknown codes give "unknown status". */
GS_API const char *gs_strerror(gs_status_t status);
/** @brief The enum name of @p status ("GS_ERR_TIMEOUT"). Never NULL. */
GS_API const char *gs_status_name(gs_status_t status);
/** @brief Which band @p status belongs to (argument, resource, peer, communicator, internal). */
GS_API gs_status_scope_t gs_status_scope(gs_status_t status);
/**
 * @brief The calling thread's description of its most recent error, e.g.
 * "gs_allreduce: peer 3 failed (connection reset by peer) during ring step 2".
 * @note Thread-local; valid until the thread's next failing gradsync call:
 * successful calls leave it as it is (as errno), so it may describe an
 * earlier failure; read it when a call has returned an error. Empty string
 * when no error has happened on this thread. Never NULL.
 */
GS_API const char *gs_last_error(void);

/* ===================================================================== */
/* Configuration                                                         */
/* ===================================================================== */

/**
 * @brief Communicator configuration. Initialise with gs_config_init(), then
 * set the fields you want. Precedence: built-in default < GS_* environment
 * variable < field set here. Numeric fields left at GS_UNSET and strings left
 * NULL take the environment or the default (docs/env.md lists every knob).
 * Strings are copied by gs_comm_init*; they need only live across that call.
 */
typedef struct gs_config {
    size_t size;               /**< sizeof(gs_config_t) the caller was built with */
    unsigned version;          /**< GS_VERSION_NUMBER the caller was built with */
    int rank;                  /**< GS_RANK: this process's rank, 0..world_size-1 */
    int world_size;            /**< GS_WORLD_SIZE: number of ranks */
    int local_rank;            /**< GS_LOCAL_RANK: rank among this host's ranks */
    const char *master_addr;   /**< GS_MASTER_ADDR: host of rank 0's rendezvous */
    int master_port;           /**< GS_MASTER_PORT: port of rank 0's rendezvous */
    int timeout_ms;            /**< GS_TIMEOUT_MS: deadline of every wait */
    const char *transport;     /**< GS_TRANSPORT: "tcp" */
    int tcp_nsocks;            /**< GS_TCP_NSOCKS: sockets per peer */
    const char *socket_ifname; /**< GS_SOCKET_IFNAME: interface to listen on */
    const char *socket_family; /**< GS_SOCKET_FAMILY: "any", "ipv4" or "ipv6" */
    int slice_bytes;           /**< GS_SLICE_BYTES: pipeline slice size */
    const char *algo;          /**< GS_ALGO: "ring" or "allreduce:ring,broadcast:chain" */
    const char *job_id;        /**< GS_JOB_ID: job name checked in every handshake */
    /* Process-wide knobs (GS_ENV_PROC in docs/env.md), appended: a caller
     * built with an older, smaller struct leaves them unset. They let a
     * framework embedding gradsync avoid setenv(). A value set here applies
     * from the gs_comm_init* that receives it on: the log settings (debug*)
     * to the whole process, until another gs_comm_init* sets them again;
     * the others to that communicator and its splits and dups (another
     * gs_comm_init* without them takes the environment or the default).
     * A debug level or subsystem that is not known, or a debug_file that
     * cannot be opened, fails the init with GS_ERR_INVALID_ARG. */
    int shm;                  /**< GS_SHM: 1 shared memory between ranks of a host, 0 TCP only */
    int tcp_spin_us;          /**< GS_TCP_SPIN_US: poll this long before sleeping; -1 auto */
    const char *tune;         /**< GS_TUNE: "auto", "probe" or "off" */
    const char *debug;        /**< GS_DEBUG: "NONE", "VERSION", "WARN", "INFO" or "TRACE" */
    const char *debug_subsys; /**< GS_DEBUG_SUBSYS: "INIT,NET", "^NET" or "ALL" */
    const char *debug_file;   /**< GS_DEBUG_FILE: log file (%h host, %p pid, %r rank) */
    const char *stats_file;   /**< GS_STATS_FILE: statistics file (docs/stats.md) */
    /* Connection authentication (docs/security.md), appended: every rank of
     * the job must have the same token, or none. Applies to the communicator
     * gs_comm_init* creates (its rendezvous and connections) and its splits
     * and dups. The token is copied, never logged. */
    const char *auth_token;      /**< GS_AUTH_TOKEN: the job's shared secret */
    const char *auth_token_file; /**< GS_AUTH_TOKEN_FILE: a file holding it */
    /* Failure detection and abortable init (docs/design.md, "Heartbeats"
     * and "Aborting"), appended. */
    int heartbeat_ms; /**< GS_HEARTBEAT_MS: TCP liveness interval; 0 off */
    /**
     * Optional, not an environment knob: a flag the caller owns. While
     * gs_comm_init* runs, any thread (a framework's watchdog, with an
     * atomic store such as __atomic_store_n(flag, 1, __ATOMIC_RELAXED) or
     * C11's atomic_store on the same object) or a signal handler of the
     * calling thread may set *abort_flag to non-zero; the init then returns
     * GS_ERR_ABORTED, freeing everything it made: within about 10 ms during
     * the connection setup and the steps after it, and within about 100 ms
     * in the rendezvous. Read only during the init (never after it
     * returns); NULL: not abortable. To stop an established
     * communicator use gs_comm_abort().
     */
    volatile int *abort_flag;
    /* TLS on the TCP transport's connections (docs/security.md), appended:
     * every rank of the job must use it, with certificates from one CA. */
    int tls;              /**< GS_TLS: 1 every connection TLS 1.3, 0 plain TCP */
    const char *tls_cert; /**< GS_TLS_CERT: PEM certificate (chain) of this rank */
    const char *tls_key;  /**< GS_TLS_KEY: PEM private key of tls_cert */
    const char *tls_ca;   /**< GS_TLS_CA: PEM CA certificates peers must chain to */
    /* Bootstrap through a key-value store (docs/gsrun.md), appended: when
     * store is set, gs_comm_init_env bootstraps through it (before torchrun's
     * store and the rendezvous). Every rank of a configuration names the same
     * store and epoch; a rank whose epoch is below the highest begun there
     * fails with GS_ERR_MISMATCH. */
    const char *store; /**< GS_STORE: "host:port/prefix" of a TCPStore-protocol store */
    int store_epoch;   /**< GS_STORE_EPOCH: this configuration's epoch, >= 0 */
} gs_config_t;

/** @brief Implementation of gs_config_init(); call that instead. */
GS_API gs_status_t gs_config_init_v(gs_config_t *cfg, unsigned header_version, size_t cfg_size);

/**
 * @brief Set every field of @p cfg to "unset" (defaults and environment
 * apply), recording the header version and struct size so that a library
 * built with a different header can tell.
 * @return GS_OK, GS_ERR_INVALID_ARG when cfg is NULL, GS_ERR_VERSION_MISMATCH
 * when the header's major version differs from the library's.
 */
static inline gs_status_t gs_config_init(gs_config_t *cfg)
{
    return gs_config_init_v(cfg, GS_VERSION_NUMBER, sizeof(gs_config_t));
}

/* ===================================================================== */
/* Communicators                                                         */
/* ===================================================================== */

/**
 * @brief Create a communicator: rendezvous with the other ranks at
 * master_addr:master_port (rank 0 hosts it), connect to every peer over the
 * configured transport, and start the worker thread.
 * @param[out] comm_out the new communicator handle.
 * @param[in] cfg configuration, or NULL for defaults + environment. Rank and
 * world size must come from cfg or GS_RANK/GS_WORLD_SIZE.
 * @return GS_OK; GS_ERR_INVALID_ARG for a bad config value (named);
 * GS_ERR_TIMEOUT when some rank did not join before the deadline (named);
 * GS_ERR_MISMATCH when ranks disagree on the world size or a rank is taken
 * twice; GS_ERR_SYSTEM for a failed socket call.
 * @note Collective over all world_size processes. Blocking, with deadline.
 */
GS_API gs_status_t gs_comm_init(gs_comm_t *comm_out, const gs_config_t *cfg);

/**
 * @brief As gs_comm_init(), but also reads the launcher conventions people
 * already use when cfg and GS_* leave rank and size unset: torchrun's RANK,
 * WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, MASTER_PORT; Open MPI's
 * OMPI_COMM_WORLD_RANK/SIZE/LOCAL_RANK; PMIx's PMIX_RANK; Slurm's
 * SLURM_PROCID, SLURM_NTASKS, SLURM_LOCALID; MPICH's and Intel MPI's (Hydra)
 * PMI_RANK, PMI_SIZE, MPI_LOCALRANKID. With none of them set, runs as a single
 * rank.
 * @return as gs_comm_init().
 */
GS_API gs_status_t gs_comm_init_env(gs_comm_t *comm_out, const gs_config_t *cfg);

/**
 * @brief Finish every submitted collective, stop the worker, close the
 * transport and free the communicator. Always frees, even after errors.
 * Point-to-point operations still in flight (a gs_irecv nobody will match)
 * are cancelled and complete with GS_ERR_ABORTED; release their requests
 * with gs_wait() or gs_test() as usual, which is allowed after destroy.
 * With GS_STATS_FILE set, appends the communicator's final statistics line
 * (docs/stats.md) once the worker has stopped.
 * @return GS_OK, or the first error met while shutting down.
 * @note Local. Do not use @p comm afterwards.
 */
GS_API gs_status_t gs_comm_destroy(gs_comm_t comm);

/**
 * @brief Abort: every pending and later operation on @p comm completes with
 * GS_ERR_ABORTED, whatever the peers do (dead, stopped, or unreachable).
 *
 * Non-blocking and local: it sets the communicator's sticky error, wakes
 * the worker and returns at once; a blocking call in progress on another
 * thread returns GS_ERR_ABORTED within milliseconds (well under 1 s),
 * non-blocking requests complete with it on their next gs_test()/gs_wait(),
 * in-flight point-to-point transfers are cancelled (their buffers are never
 * touched again), and every later call on @p comm returns it without
 * communicating. gs_comm_get_async_error() reports it. Idempotent.
 * @note Thread-safe: callable from any thread (a framework's watchdog)
 * concurrently with any call on @p comm, including a blocking collective
 * and another gs_comm_abort(). It may also overlap a gs_comm_destroy() in
 * progress on another thread, which it cuts short (destroy waits for
 * queued operations; after an abort they fail at once), but the caller
 * must know the handle is still valid when it calls: never after
 * gs_comm_destroy() returned. Not async-signal-safe. The communicator must still be destroyed;
 * gs_comm_destroy() after an abort skips the goodbye to the peers and
 * returns promptly. To stop a gs_comm_init*() that hangs, use
 * gs_config_t.abort_flag.
 * @return GS_OK or GS_ERR_INVALID_ARG (comm is NULL).
 */
GS_API gs_status_t gs_comm_abort(gs_comm_t comm);

/** @brief This process's rank in @p comm. Local, thread-safe. */
GS_API gs_status_t gs_comm_rank(gs_comm_t comm, int *rank_out);
/** @brief Number of ranks in @p comm. Local, thread-safe. */
GS_API gs_status_t gs_comm_size(gs_comm_t comm, int *size_out);

/**
 * @brief Split @p comm into sub-communicators: ranks that pass the same
 * @p color form one, ordered by (@p key, parent rank). A rank passing a
 * negative color takes part but gets GS_COMM_NULL.
 * @return GS_OK, GS_ERR_INVALID_ARG, or a peer/communicator error of @p comm.
 * @note Collective over @p comm. Blocking.
 */
GS_API gs_status_t gs_comm_split(gs_comm_t comm, int color, int key, gs_comm_t *newcomm_out);

/**
 * @brief Create a communicator of some ranks of @p comm, with only those
 * ranks taking part (MPI_Comm_create_group's contract): the others never
 * call. Frameworks whose non-members do not call (torch.distributed's
 * new_group, a DeviceMesh's subgroups) get every group from the parent's
 * connections, with no second rendezvous.
 * @param comm the parent.
 * @param nranks how many ranks @p ranks lists (1 to the size of @p comm).
 * @param ranks parent ranks in strictly increasing order, this rank among
 *        them; new rank i is ranks[i]. Every member passes the same list.
 * @param tag tells apart creations in flight at once among the same
 *        ranks; members of one group pass the same tag. Independent of
 *        point-to-point tags.
 * @param[out] newcomm_out the new communicator (written only on GS_OK):
 *        the configuration of @p comm, connections of its own.
 * @return GS_OK; GS_ERR_INVALID_ARG (a NULL argument, a list that is
 * unsorted, repeats a rank, names one out of range or leaves this rank
 * out), with nothing sent; the sticky error of a failed @p comm;
 * GS_ERR_TIMEOUT when a member did not take part within GS_TIMEOUT_MS;
 * GS_ERR_PEER_FAILED; GS_ERR_NO_MEMORY.
 * @note Collective over the listed ranks. Blocking; it runs between the
 * operations of @p comm, in the order calls reach it.
 */
GS_API gs_status_t gs_comm_create_group(gs_comm_t comm, int nranks, const int *ranks, uint32_t tag,
                                        gs_comm_t *newcomm_out);

/**
 * @brief Recover from a failure: the surviving ranks of @p comm agree on
 * which ranks are gone and form a new communicator without them (as NCCL's
 * ncclCommShrink and MPI ULFM's MPI_Comm_shrink do).
 *
 * The ranks gone are those any survivor saw fail or leave (its transport's
 * view: a closed or reset connection, a DOWN report, a missed heartbeat),
 * plus those that do not take part within the deadline. The agreement runs
 * over the connections of @p comm that still work, so it is meant for a
 * communicator whose operations failed with GS_ERR_PEER_FAILED (or
 * GS_ERR_TIMEOUT); on a healthy one it returns a copy with every rank. The
 * survivors keep their order: new ranks are dense, in old-rank order. The
 * new communicator has its own connections, the configuration of @p comm
 * and a communicator id derived from it, so nothing of the old one can
 * reach it. @p comm is left as it was (failed): destroy it afterwards.
 * @param[in] comm the failed communicator.
 * @param[out] newcomm_out the new communicator (written only on GS_OK).
 * @return GS_OK; GS_ERR_INVALID_ARG (a NULL argument); GS_ERR_UNSUPPORTED
 * (a transport that cannot tell which peers failed: MPI); GS_ERR_ABORTED
 * (@p comm was aborted); GS_ERR_PEER_FAILED when this rank was declared
 * gone by the others (it answered too late) or a survivor failed during the
 * endpoint exchange (call it again on @p comm); GS_ERR_TIMEOUT when the
 * coordinator (the lowest surviving rank) did not answer within
 * GS_TIMEOUT_MS or the new connections were not made in time;
 * GS_ERR_PROTOCOL for a malformed agreement message; GS_ERR_NO_MEMORY;
 * GS_ERR_SYSTEM.
 * @note Collective over the surviving ranks of @p comm (every one must call
 * it, the ranks gone cannot). Blocking, bounded by GS_TIMEOUT_MS for the
 * agreement and again for the new connections. Thread-safe with respect to
 * other calls on @p comm, which keep failing with its sticky error.
 */
GS_API gs_status_t gs_comm_shrink(gs_comm_t comm, gs_comm_t *newcomm_out);

/**
 * @brief Revoke @p comm: stop new work on it and fail what is pending with
 * GS_ERR_REVOKED on every rank that learns of it (ncclCommRevoke, ULFM's
 * MPI_Comm_revoke), so that gs_comm_shrink(), gs_comm_grow(),
 * gs_comm_split() of a new communicator, or gs_comm_destroy() can follow
 * without waiting on a peer that will never answer.
 *
 * Local and non-blocking, like gs_comm_abort(): it sets this rank's sticky
 * error to GS_ERR_REVOKED and returns at once; the worker then fails every
 * pending operation (a blocking call on another thread returns
 * GS_ERR_REVOKED within milliseconds) and tells the other ranks. Over TCP
 * each rank passes the notice on once over its links, so every rank
 * connected to the revoker, directly or not, fails its pending and later
 * operations with GS_ERR_REVOKED, "rank R revoked the communicator" (a rank
 * that already failed for a peer's death keeps that first error). Unlike an
 * abort the connections stay up: gs_comm_shrink() and gs_comm_grow() run
 * over them. With the MPI transport only this rank learns of it (MPI has no
 * revoke): its transport is aborted.
 * @note Thread-safe: any thread, concurrently with any call on @p comm (a
 * blocked collective included) but gs_comm_destroy(), and idempotent. Not
 * async-signal-safe.
 * @return GS_OK or GS_ERR_INVALID_ARG (comm is NULL).
 */
GS_API gs_status_t gs_comm_revoke(gs_comm_t comm);

/** @brief Bytes of a gs_unique_id_t. */
#define GS_UNIQUE_ID_BYTES 128

/**
 * @brief What new ranks need to join a communicator with gs_comm_grow():
 * the address of rank 0's grow listener, a random id of this grow, the
 * job's identity and whether it needs a token (never the token itself).
 * Opaque bytes: copy them to the new ranks by any means (a file, a
 * key-value store, a command line as hex).
 */
typedef struct gs_unique_id {
    unsigned char bytes[GS_UNIQUE_ID_BYTES]; /**< opaque; docs/wire.md has the layout */
} gs_unique_id_t;

/**
 * @brief Make the id with which new ranks join @p comm (ncclCommGetUniqueId).
 * Call it on rank 0 of @p comm; it starts listening for joining ranks (on
 * the interface of rank 0's own connections, a port of the kernel's
 * choice) and returns at once. Calling it again makes a new id: joiners
 * presenting an older one are refused.
 * @return GS_OK; GS_ERR_INVALID_ARG (NULL argument); GS_ERR_INVALID_USAGE
 * (not rank 0, or a transport that cannot grow: MPI); the sticky error of
 * an aborted communicator; GS_ERR_SYSTEM (the listener).
 * @note Local. Thread-safe with respect to other calls on @p comm.
 */
GS_API gs_status_t gs_comm_get_unique_id(gs_comm_t comm, gs_unique_id_t *id_out);

/**
 * @brief Grow: the ranks of @p comm admit new ranks that arrive with the
 * id of gs_comm_get_unique_id() and form a communicator of @p new_size
 * ranks (ncclCommGrow). Old ranks keep their rank; the new ones are
 * @p comm's size .. @p new_size - 1.
 *
 * - Every rank of @p comm calls it with @p comm, @p new_size, and @p id
 *   (rank 0: required, the id it made; the others may pass NULL), and
 *   @p cfg NULL: the new communicator has @p comm's configuration.
 * - Every new rank calls it with @p comm GS_COMM_NULL, the id, @p new_size
 *   and a configuration as for gs_comm_init() (NULL: the environment),
 *   whose rank (or GS_RANK) is its new rank; the world size, rendezvous
 *   address and job identity come from the id. The job's token
 *   (GS_AUTH_TOKEN), TLS and the other settings are its own, and must
 *   match the job's as for any rank.
 *
 * Rank 0 checks every joiner: a wrong or stale id, another job, a rank out
 * of range or taken twice, a missing or different token are refused with
 * the reason sent to the joiner (which fails with GS_ERR_MISMATCH or
 * GS_ERR_AUTH) and logged at WARN naming its address; the grow goes on
 * waiting for the right ranks. When the joiners are not all there by
 * GS_TIMEOUT_MS, or an old rank fails, every rank's call fails with the
 * same named error (GS_ERR_TIMEOUT naming the missing ranks,
 * GS_ERR_PEER_FAILED naming the dead one) and @p comm is unchanged (a
 * dead rank has failed it already: shrink it and grow again). Works on a
 * revoked communicator (recovery tags) and after gs_comm_shrink().
 * @param comm the communicator to grow, or GS_COMM_NULL on a new rank.
 * @param new_size the size of the new communicator, above @p comm's.
 * @param id the id rank 0 made (may be NULL on old ranks but rank 0).
 * @param cfg a new rank's configuration; NULL on old ranks.
 * @param[out] newcomm_out the new communicator (written only on GS_OK).
 * @return GS_OK; GS_ERR_INVALID_ARG (a NULL or malformed id, a size not
 * above the old one, a new rank out of range, cfg on an old rank);
 * GS_ERR_INVALID_USAGE (rank 0 without an id of its own); GS_ERR_MISMATCH
 * (the ranks disagree on the size, or this joiner's id is stale);
 * GS_ERR_AUTH; GS_ERR_TIMEOUT; GS_ERR_PEER_FAILED; GS_ERR_ABORTED (@p comm
 * aborted, or the joiner's abort_flag); GS_ERR_SYSTEM; GS_ERR_NO_MEMORY.
 * @note Collective over the old ranks and the new ones. Blocking, bounded
 * by GS_TIMEOUT_MS for the admission and again for the connections.
 */
GS_API gs_status_t gs_comm_grow(gs_comm_t comm, int new_size, const gs_unique_id_t *id,
                                const gs_config_t *cfg, gs_comm_t *newcomm_out);

/**
 * @brief A new communicator with the same ranks in the same order and the
 * same configuration as @p comm, whose traffic never matches @p comm's (as
 * MPI_Comm_dup): a library layered on gradsync takes one for itself.
 * @return GS_OK with *newcomm_out set, GS_ERR_INVALID_ARG, GS_ERR_NO_MEMORY,
 * or a peer/communicator error of @p comm.
 * @note Collective over @p comm; blocking with the deadline. It opens new
 * connections (a split with one color), so it costs what a split costs.
 */
GS_API gs_status_t gs_comm_dup(gs_comm_t comm, gs_comm_t *newcomm_out);

/**
 * @brief The sticky error of @p comm: GS_OK while healthy, otherwise the
 * peer or communicator error that failed it.
 */
GS_API gs_status_t gs_comm_get_async_error(gs_comm_t comm, gs_status_t *error_out);

/**
 * @brief Print the flight recorder of @p comm to @p stream: its last
 * GS_TRACE_SIZE collectives (default 64), one line each, with the sequence
 * number, the call in words (collective, count, dtype, op, root, codec),
 * this rank's bytes, the algorithm, the start and end times, the status and,
 * for the operation in flight or one that failed, the peers it still waited
 * on. The same text goes to the log at WARN when the process receives
 * GS_DUMP_SIGNAL (e.g. GS_DUMP_SIGNAL=USR1, then kill -USR1 PID).
 * @param[in] comm The communicator (a handle).
 * @param[in] stream Where to write; flushed before the call returns.
 * @return GS_OK, GS_ERR_INVALID_ARG (NULL @p comm or @p stream), or
 * GS_ERR_SYSTEM when writing failed.
 * @note Local, not collective. Thread-safe: callable from any thread while
 * operations run (it takes the recorder's lock briefly per line) and after
 * the communicator failed; it blocks only on @p stream. It reads @p comm, so
 * it must not race with gs_comm_destroy().
 */
GS_API gs_status_t gs_comm_dump(gs_comm_t comm, FILE *stream);

/** @brief Traffic counters of one communicator. Append-only; size first. */
typedef struct gs_counters {
    size_t size;             /**< set by the caller to sizeof(gs_counters_t) */
    uint64_t bytes_sent;     /**< payload bytes handed to the transport */
    uint64_t bytes_received; /**< payload bytes received */
    uint64_t msgs_sent;      /**< transport messages sent */
    uint64_t msgs_received;  /**< transport messages received */
    uint64_t ops_completed;  /**< operations finished (any status) */
    uint64_t ops_failed;     /**< operations finished with an error */
    uint64_t busy_ns;        /**< time the worker spent running operations */
} gs_counters_t;

/**
 * @brief Read the counters of @p comm into @p counters_out, whose size field
 * the caller sets first; only fields that fit in it are written.
 * @note Local, thread-safe; values are a consistent-enough snapshot.
 */
GS_API gs_status_t gs_comm_counters(gs_comm_t comm, gs_counters_t *counters_out);

/* ===================================================================== */
/* Traffic statistics                                                    */
/* ===================================================================== */
/*
 * Where did the time go? gs_comm_stats() gives the totals of a communicator
 * and, per collective kind, the calls, bytes, busy time and the algorithm
 * that ran last (what the cost model or GS_ALGO chose). gs_comm_peer_stats()
 * gives, per peer, bytes and messages each way and the time this rank spent
 * blocked waiting on that peer: the peer with the most wait time is the
 * slow link (or the slow rank) seen from here. GS_STATS_FILE writes the same
 * numbers as JSON lines at gs_comm_destroy() (and every GS_STATS_INTERVAL_MS);
 * docs/stats.md shows how to read them. Counters only grow: take the
 * difference of two reads to measure an interval. Reading is local,
 * thread-safe and lock-free; values are read one by one, so a read taken
 * while operations run is only approximately consistent across fields.
 */

/** @brief Collective kinds: the indexes of gs_comm_stats_t.coll[]. Values are stable. */
typedef enum gs_coll_type {
    GS_COLL_TYPE_ALLREDUCE = 0,
    GS_COLL_TYPE_BROADCAST = 1,
    GS_COLL_TYPE_REDUCE = 2,
    GS_COLL_TYPE_ALLGATHER = 3,
    GS_COLL_TYPE_REDUCE_SCATTER = 4,
    GS_COLL_TYPE_ALLTOALL = 5,
    GS_COLL_TYPE_BARRIER = 6,
    GS_COLL_TYPE_SEND = 7,
    GS_COLL_TYPE_RECV = 8,
    GS_COLL_TYPE_GATHER = 9,
    GS_COLL_TYPE_SCATTER = 10,
    GS_COLL_TYPE_ALLGATHERV = 11,
    GS_COLL_TYPE_ALLTOALLV = 12,
    GS_COLL_TYPE_REDUCE_SCATTERV = 13,
    GS_COLL_TYPE_COUNT = 14 /**< kinds known to this header (at most GS_STATS_COLL_MAX) */
} gs_coll_type_t;

/**
 * @brief 1 when algorithm @p algo implements collective @p coll, else 0 (also
 * for values out of range). GS_ALGO_AUTO implements every one. Forcing an
 * algorithm that does not (opts->algo, GS_ALGO) fails with GS_ERR_UNSUPPORTED;
 * GS_ALGO_NATIVE also needs, when it runs, a transport with the call
 * (docs/guide/algorithms.md). The same table decides both.
 */
GS_API int gs_algo_implements(gs_coll_type_t coll, gs_algo_t algo);

/** @brief Slots of gs_comm_stats_t.coll[]; fixed, so kinds can be added without an ABI break. */
#define GS_STATS_COLL_MAX 16

/** @brief Statistics of one collective kind (a fixed-layout element of gs_comm_stats_t). */
typedef struct gs_coll_stats {
    uint64_t ops;        /**< calls finished (any status) */
    uint64_t bytes;      /**< sum of count x dtype size over those calls (count as passed) */
    uint64_t busy_ns;    /**< time spent running them */
    gs_algo_t last_algo; /**< algorithm of the latest successful call; GS_ALGO_AUTO when none
                              ran yet, for point-to-point and for the compressed all-reduce */
} gs_coll_stats_t;

/** @brief Statistics of one communicator. Append-only; size first (GS_COMM_STATS_INIT). */
typedef struct gs_comm_stats {
    size_t size;             /**< set by the caller (GS_COMM_STATS_INIT); the library sets it
                                  to the bytes it wrote */
    int rank;                /**< this rank in the communicator */
    int nranks;              /**< ranks in the communicator */
    uint64_t comm_id;        /**< communicator id (equal on every rank of the communicator) */
    uint64_t bytes_sent;     /**< payload bytes sent, counted by the transport */
    uint64_t bytes_received; /**< payload bytes received, counted by the transport */
    uint64_t msgs_sent;      /**< transport messages sent */
    uint64_t msgs_received;  /**< transport messages received */
    uint64_t ops_completed;  /**< operations finished (any status) */
    uint64_t ops_failed;     /**< operations finished with an error */
    uint64_t busy_ns;        /**< time spent running collectives */
    uint64_t wait_ns;        /**< time blocked waiting on peers (sum of gs_peer_stats_t waits) */
    gs_coll_stats_t coll[GS_STATS_COLL_MAX]; /**< per kind, indexed by gs_coll_type_t */
    /** Per kind (indexed by gs_coll_type_t): the memory traffic of the latest successful
     * call, in bytes, summed over the ranks of a communicator whose ranks all share one host:
     * what its design reads and writes in the callers' buffers and in shared memory, as the
     * cost model counts it (a ring all-reduce (5 + 1/n) S per rank, a single-copy one about
     * 3 S). 0 when not known (ranks on several hosts, or a design the model does not count).
     * gs-bench divides it by the memcpy rate it measures to print the fraction of the
     * memory-traffic floor reached. */
    uint64_t traffic_bytes[GS_STATS_COLL_MAX];
} gs_comm_stats_t;

/** @brief Initialiser of gs_comm_stats_t: size set, everything else 0. */
#define GS_COMM_STATS_INIT                                                                         \
    {                                                                                              \
        sizeof(gs_comm_stats_t), 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, {{0, 0, 0, GS_ALGO_AUTO}},       \
        {                                                                                          \
            0                                                                                      \
        }                                                                                          \
    }

/** @brief Most TCP rails a peer's traffic is spread over (GS_SOCKET_IFNAME lists). */
#define GS_RAILS_MAX 4

/** @brief One rail (an interface pair) to a peer: what it carried and how fast. */
typedef struct gs_rail_stats {
    uint64_t bytes_sent;   /**< bytes written on this rail to the peer (frame headers too) */
    uint64_t bytes_resent; /**< of them, sent again after another rail failed */
    uint64_t rate_bps;     /**< measured drain rate, bytes per second (0 until measured) */
    uint32_t share_ppm;    /**< its share of the last striped message, parts per million */
    uint32_t up;           /**< 1 while the rail is up */
    char ifname[16];       /**< the local interface ("" with one rail) */
} gs_rail_stats_t;

/** @brief What this rank exchanged with one peer. Append-only; size first (GS_PEER_STATS_INIT). */
typedef struct gs_peer_stats {
    size_t size;             /**< set by the caller (GS_PEER_STATS_INIT) */
    int peer;                /**< the peer's rank (written by the call) */
    uint64_t bytes_sent;     /**< payload bytes sent to the peer by the algorithms */
    uint64_t bytes_received; /**< payload bytes received from the peer */
    uint64_t msgs_sent;      /**< messages sent to the peer */
    uint64_t msgs_received;  /**< messages received from the peer */
    uint64_t send_wait_ns;   /**< time blocked until a send to the peer finished */
    uint64_t recv_wait_ns;   /**< time blocked until a message from the peer arrived */
    /* Appended for multi-rail TCP (docs/design.md, "Several rails per peer"). */
    int nrails; /**< TCP rails to the peer (0: not connected, or not TCP) */
    gs_rail_stats_t rails[GS_RAILS_MAX]; /**< the first nrails are set */
} gs_peer_stats_t;

/** @brief Initialiser of gs_peer_stats_t: size set, everything else 0. */
#define GS_PEER_STATS_INIT                                                                         \
    {                                                                                              \
        sizeof(gs_peer_stats_t), 0, 0, 0, 0, 0, 0, 0, 0,                                           \
        {                                                                                          \
            {                                                                                      \
                0, 0, 0, 0, 0,                                                                     \
                {                                                                                  \
                    0                                                                              \
                }                                                                                  \
            }                                                                                      \
        }                                                                                          \
    }

/**
 * @brief Read the statistics of @p comm into @p stats_out, whose size field
 * the caller sets first (GS_COMM_STATS_INIT); fields beyond it are not
 * written, and fields this library does not know are zeroed.
 * @return GS_OK; GS_ERR_INVALID_ARG when @p comm or @p stats_out is NULL or
 * stats_out->size is smaller than the first version of the struct or
 * implausibly large (an uninitialised struct).
 * @note Local, thread-safe, lock-free; works on a failed communicator too.
 */
GS_API gs_status_t gs_comm_stats(gs_comm_t comm, gs_comm_stats_t *stats_out);

/**
 * @brief Read what this rank exchanged with @p peer (0 <= peer < size; the
 * calling rank's own entry is all zero) into @p stats_out, whose size field
 * the caller sets first (GS_PEER_STATS_INIT). Counted for every algorithm
 * that runs over gradsync's transports (GS_ALGO_NATIVE collectives of the
 * MPI transport are not broken down by peer). Wait time is the time this
 * rank spent blocked in the transport, charged to the peer whose message or
 * send completion ended the wait; the totals of all peers add up to
 * gs_comm_stats_t.wait_ns.
 * @return GS_OK; GS_ERR_INVALID_ARG when @p comm or @p stats_out is NULL,
 * stats_out->size is wrong (as for gs_comm_stats()) or @p peer is out of range.
 * @note Local, thread-safe, lock-free.
 */
GS_API gs_status_t gs_comm_peer_stats(gs_comm_t comm, int peer, gs_peer_stats_t *stats_out);

/* ===================================================================== */
/* Blocking collectives                                                  */
/* ===================================================================== */
/*
 * Every call here is collective, blocking (with the communicator deadline)
 * and returns GS_OK; GS_ERR_INVALID_ARG for a NULL buffer with count > 0,
 * an unknown dtype or op, GS_OP_AVG on an integer type, a root out of range
 * or a byte size that overflows; GS_ERR_MISMATCH when ranks called
 * different collectives or counts; GS_ERR_PEER_FAILED or GS_ERR_TIMEOUT
 * naming the rank; GS_ERR_ABORTED after gs_comm_abort(). count 0 is valid.
 */

/** @brief recvbuf = op over all ranks of sendbuf (count elements). In place when sendbuf == recvbuf. */
GS_API gs_status_t gs_allreduce(gs_comm_t comm, const void *sendbuf, void *recvbuf, size_t count,
                                gs_dtype_t dtype, gs_op_t op);

/** @brief Copy root's buf (count elements) to every rank's buf. */
GS_API gs_status_t gs_broadcast(gs_comm_t comm, void *buf, size_t count, gs_dtype_t dtype,
                                int root);

/** @brief root's recvbuf = op over all ranks of sendbuf. recvbuf is ignored on other ranks (may be NULL). */
GS_API gs_status_t gs_reduce(gs_comm_t comm, const void *sendbuf, void *recvbuf, size_t count,
                             gs_dtype_t dtype, gs_op_t op, int root);

/**
 * @brief recvbuf (count*size elements) = concatenation of every rank's
 * sendbuf (count elements) in rank order. In place when
 * sendbuf == recvbuf + rank*count elements.
 */
GS_API gs_status_t gs_allgather(gs_comm_t comm, const void *sendbuf, void *recvbuf, size_t count,
                                gs_dtype_t dtype);

/**
 * @brief recvbuf (recvcount elements) = block @e rank of op over all ranks of
 * sendbuf (recvcount*size elements). In place when
 * recvbuf == sendbuf + rank*recvcount elements.
 */
GS_API gs_status_t gs_reduce_scatter(gs_comm_t comm, const void *sendbuf, void *recvbuf,
                                     size_t recvcount, gs_dtype_t dtype, gs_op_t op);

/**
 * @brief Block j of sendbuf (count elements per block, size blocks) goes to
 * rank j, which stores it as block @e rank of its recvbuf. In place when
 * sendbuf == recvbuf.
 */
GS_API gs_status_t gs_alltoall(gs_comm_t comm, const void *sendbuf, void *recvbuf, size_t count,
                               gs_dtype_t dtype);

/** @brief Return once every rank has entered the barrier. */
GS_API gs_status_t gs_barrier(gs_comm_t comm);

/* ===================================================================== */
/* Rooted and variable-size collectives                                  */
/* ===================================================================== */
/*
 * As the collectives above: collective, blocking with the deadline, the
 * same errors. The per-rank count arrays ("v" calls) hold size elements and
 * are validated completely before any byte moves: a count or displacement
 * of 2^63 or more (a negative number passed through size_t), a byte size
 * that overflows, a block that ends past the buffer's stated capacity, or
 * two blocks of one buffer that overlap, is GS_ERR_INVALID_ARG naming the
 * rank index, and nothing is sent. @p displs may be NULL: blocks are then
 * packed in rank order. Counts must agree across ranks (rank i's
 * recvcounts[j] == rank j's sendcounts[i]); a disagreement found while
 * running is GS_ERR_MISMATCH naming both ranks (at once, not at the
 * deadline; the rank that receives the disagreeing block reports it, and
 * the communicator is then failed, as for any GS_ERR_MISMATCH).
 * @return GS_OK; GS_ERR_INVALID_ARG (the argument and rank index named;
 * also a root out of range, a NULL buffer with a nonzero count, a bitwise
 * op on a float dtype); GS_ERR_UNSUPPORTED for CUDA device buffers (host
 * memory only in this version) or a forced algorithm that does not
 * implement the call; GS_ERR_MISMATCH; GS_ERR_TIMEOUT, GS_ERR_PEER_FAILED
 * and the communicator's sticky error, as for every collective.
 * Algorithms (opts->algo or GS_ALGO): gather and scatter GS_ALGO_BINOMIAL
 * or GS_ALGO_DIRECT (the cost model picks binomial for small blocks),
 * all-gather-v and reduce-scatter-v GS_ALGO_RING, all-to-all-v
 * GS_ALGO_DIRECT.
 */

/**
 * @brief root's recvbuf (count*size elements) = every rank's sendbuf (count
 * elements) in rank order. recvbuf is ignored on other ranks (may be NULL).
 * In place at the root when sendbuf == recvbuf + root*count elements.
 */
GS_API gs_status_t gs_gather(gs_comm_t comm, const void *sendbuf, void *recvbuf, size_t count,
                             gs_dtype_t dtype, int root);

/**
 * @brief Block j of root's sendbuf (count elements per block, size blocks)
 * goes to rank j's recvbuf. sendbuf is ignored on other ranks (may be NULL).
 * In place at the root when recvbuf == sendbuf + root*count elements.
 */
GS_API gs_status_t gs_scatter(gs_comm_t comm, const void *sendbuf, void *recvbuf, size_t count,
                              gs_dtype_t dtype, int root);

/**
 * @brief Every rank's sendbuf (sendcount elements) lands at
 * recvbuf + displs[rank] on every rank; recvbuf holds recvbuf_count
 * elements, and recvcounts[r] must equal rank r's sendcount (this rank's is
 * checked at the call). In place when sendbuf == recvbuf + displs[rank].
 */
GS_API gs_status_t gs_allgatherv(gs_comm_t comm, const void *sendbuf, size_t sendcount,
                                 void *recvbuf, size_t recvbuf_count, const size_t *recvcounts,
                                 const size_t *displs, gs_dtype_t dtype);

/**
 * @brief sendcounts[j] elements at sendbuf + sdispls[j] go to rank j, which
 * stores them at its recvbuf + rdispls[rank]. sendbuf holds sendbuf_count
 * elements, recvbuf recvbuf_count. Not in place (the buffers must not
 * overlap).
 */
GS_API gs_status_t gs_alltoallv(gs_comm_t comm, const void *sendbuf, size_t sendbuf_count,
                                const size_t *sendcounts, const size_t *sdispls, void *recvbuf,
                                size_t recvbuf_count, const size_t *recvcounts,
                                const size_t *rdispls, gs_dtype_t dtype);

/**
 * @brief recvbuf (recvcounts[rank] elements) = block @e rank of op over
 * all ranks of sendbuf, whose blocks are packed in rank order
 * (sum of recvcounts elements). recvcounts must be equal on every rank.
 * recvbuf may overlap sendbuf (in place: recvbuf = sendbuf + the sum of
 * recvcounts[0..rank) elements).
 */
GS_API gs_status_t gs_reduce_scatterv(gs_comm_t comm, const void *sendbuf, void *recvbuf,
                                      const size_t *recvcounts, gs_dtype_t dtype, gs_op_t op);

/** @brief Non-blocking gs_gather(); completes through gs_wait() or gs_test(). */
GS_API gs_status_t gs_igather(gs_comm_t comm, const void *sendbuf, void *recvbuf, size_t count,
                              gs_dtype_t dtype, int root, gs_request_t *req_out);
/** @brief Non-blocking gs_scatter(); completes through gs_wait() or gs_test(). */
GS_API gs_status_t gs_iscatter(gs_comm_t comm, const void *sendbuf, void *recvbuf, size_t count,
                               gs_dtype_t dtype, int root, gs_request_t *req_out);
/* The non-blocking forms: as every gs_i* call (see "Non-blocking
 * operations"). The "v" calls read the count and displacement arrays
 * during the call only (the request keeps a copy, freed when it is
 * released), so the caller may free them at once; the buffers belong to
 * the request until gs_wait() or gs_test() reports completion. */
/** @brief Non-blocking gs_allgatherv(); the count and displacement arrays are copied. */
GS_API gs_status_t gs_iallgatherv(gs_comm_t comm, const void *sendbuf, size_t sendcount,
                                  void *recvbuf, size_t recvbuf_count, const size_t *recvcounts,
                                  const size_t *displs, gs_dtype_t dtype, gs_request_t *req_out);
/** @brief Non-blocking gs_alltoallv(); the count and displacement arrays are copied. */
GS_API gs_status_t gs_ialltoallv(gs_comm_t comm, const void *sendbuf, size_t sendbuf_count,
                                 const size_t *sendcounts, const size_t *sdispls, void *recvbuf,
                                 size_t recvbuf_count, const size_t *recvcounts,
                                 const size_t *rdispls, gs_dtype_t dtype, gs_request_t *req_out);
/** @brief Non-blocking gs_reduce_scatterv(); the count array is copied. */
GS_API gs_status_t gs_ireduce_scatterv(gs_comm_t comm, const void *sendbuf, void *recvbuf,
                                       const size_t *recvcounts, gs_dtype_t dtype, gs_op_t op,
                                       gs_request_t *req_out);

/* ===================================================================== */
/* Options, streams and device buffers                                   */
/* ===================================================================== */
/*
 * Every collective and point-to-point call has an _ex form that takes an
 * options struct (gs_allreduce_opts_t for all-reduce, which adds the codec
 * fields, gs_coll_opts_t for the others); NULL options mean the defaults,
 * and the plain call is the _ex call with NULL.
 *
 * Buffers may be host memory or CUDA device memory. The library asks the
 * CUDA driver where each buffer lives (no flag to set); the buffers of one
 * call must all be of one kind, else the call fails with
 * GS_ERR_INVALID_ARG naming the buffer. A library built without CUDA
 * (gs_info says so) rejects device buffers the same way.
 *
 * opts->stream is a cudaStream_t passed as a pointer (gradsync/cuda.h has
 * typed helpers), NULL for the legacy default stream. It is used only when
 * the buffers are on a device:
 * - the call reads the send buffer after the work already queued on the
 *   stream, and its result is ordered before work queued there later;
 * - a blocking call returns when recvbuf holds the result;
 * - its non-blocking twin enqueues and returns a request, which gs_wait()
 *   or gs_test() complete once the result is there;
 * - with GS_COLL_F_STREAM_ORDERED the call only enqueues its work on the
 *   stream and returns (a non-blocking one returns a request that is
 *   already complete), as NCCL does: the stream orders everything, and the
 *   caller synchronises the stream before reading recvbuf on the host.
 *   Only the NCCL path can do that; on the staged path (no NCCL, or ranks
 *   sharing a GPU) such a call fails with GS_ERR_UNSUPPORTED.
 * The library never synchronises the device beyond what these semantics
 * need, and caches its workspaces (streams, events, pinned staging memory)
 * per communicator: no allocation per call once warm. docs/gpu.md says
 * which path runs when.
 */

/** @brief The call only enqueues on the stream (NCCL's semantics); see above. */
#define GS_COLL_F_STREAM_ORDERED (1u << 0)

/** @brief Options of the _ex collectives. Initialise with GS_COLL_OPTS_INIT; fields are appended only. */
typedef struct gs_coll_opts {
    size_t size;    /**< sizeof the struct the caller was built with (set by the INIT macro) */
    gs_algo_t algo; /**< algorithm; GS_ALGO_AUTO lets the library choose */
    void *stream;   /**< cudaStream_t for device buffers, or NULL (legacy default stream) */
    unsigned flags; /**< GS_COLL_F_* */
    /** Compress with this codec (gradsync/compress.h), or NULL (GS_CODEC_NONE
     * is the same): reduce-scatter, reduce-scatterv, all-gather and
     * all-gatherv only; float dtypes; reduce-scatter with GS_OP_SUM or
     * GS_OP_AVG; algo must be GS_ALGO_AUTO. Every element is encoded once
     * and decoded once (docs/compression.md, "Sharded shapes"); all-gather
     * copies the caller's own block exactly and refuses the sparse codecs.
     * Borrowed for the call (non-blocking: until completion). */
    const struct gs_codec_config *codec;
    /** Reduce-scatter(v) with a codec: error feedback of the send buffer,
     * made with gs_ef_create(elements of sendbuf, dtype), or NULL. Used and
     * updated by the call; do not share one between calls in flight.
     * All-gather takes none. */
    struct gs_ef *ef;
} gs_coll_opts_t;

/** @brief Initialiser of gs_coll_opts_t: size set, GS_ALGO_AUTO, no stream, no flags, no codec. */
#define GS_COLL_OPTS_INIT                                                                          \
    {                                                                                              \
        sizeof(gs_coll_opts_t), GS_ALGO_AUTO, NULL, 0u, NULL, NULL                                 \
    }

/** @brief Options of gs_allreduce_ex(). Initialise with GS_ALLREDUCE_OPTS_INIT; fields are appended only. */
typedef struct gs_allreduce_opts {
    size_t size;    /**< sizeof the struct the caller was built with (set by the INIT macro) */
    gs_algo_t algo; /**< algorithm; GS_ALGO_AUTO lets the library choose */
    /** Compress with this codec (gradsync/compress.h), or NULL. A codec other
     * than GS_CODEC_NONE runs the two-phase compressed all-reduce: float dtypes,
     * GS_OP_SUM or GS_OP_AVG, algo must be GS_ALGO_AUTO. Borrowed for the call
     * (for gs_iallreduce_ex: until completion). */
    const struct gs_codec_config *codec;
    /** Error feedback of this tensor (gs_ef_create(count, dtype)), or NULL to
     * run a lossy codec without feedback. Used and updated by the call; do not
     * share one between calls in flight. */
    struct gs_ef *ef;
    void *stream;   /**< cudaStream_t for device buffers, or NULL (legacy default stream) */
    unsigned flags; /**< GS_COLL_F_* */
} gs_allreduce_opts_t;

/** @brief Initialiser of gs_allreduce_opts_t: size set, GS_ALGO_AUTO, no codec, no error feedback, no stream, no flags. */
#define GS_ALLREDUCE_OPTS_INIT                                                                     \
    {                                                                                              \
        sizeof(gs_allreduce_opts_t), GS_ALGO_AUTO, NULL, NULL, NULL, 0u                            \
    }

/**
 * @brief gs_allreduce() with options (algorithm, codec, error feedback,
 * stream). @p opts may be NULL (defaults). @return as gs_allreduce(), plus
 * GS_ERR_UNSUPPORTED when the forced algorithm cannot run this all-reduce
 * or GS_COLL_F_STREAM_ORDERED is asked where only the staged path serves.
 */
GS_API gs_status_t gs_allreduce_ex(gs_comm_t comm, const void *sendbuf, void *recvbuf, size_t count,
                                   gs_dtype_t dtype, gs_op_t op, const gs_allreduce_opts_t *opts);

/** @brief gs_broadcast() with options (@p opts may be NULL). */
GS_API gs_status_t gs_broadcast_ex(gs_comm_t comm, void *buf, size_t count, gs_dtype_t dtype,
                                   int root, const gs_coll_opts_t *opts);
/** @brief gs_reduce() with options (@p opts may be NULL). */
GS_API gs_status_t gs_reduce_ex(gs_comm_t comm, const void *sendbuf, void *recvbuf, size_t count,
                                gs_dtype_t dtype, gs_op_t op, int root, const gs_coll_opts_t *opts);
/** @brief gs_allgather() with options (@p opts may be NULL). */
GS_API gs_status_t gs_allgather_ex(gs_comm_t comm, const void *sendbuf, void *recvbuf, size_t count,
                                   gs_dtype_t dtype, const gs_coll_opts_t *opts);
/** @brief gs_reduce_scatter() with options (@p opts may be NULL). */
GS_API gs_status_t gs_reduce_scatter_ex(gs_comm_t comm, const void *sendbuf, void *recvbuf,
                                        size_t recvcount, gs_dtype_t dtype, gs_op_t op,
                                        const gs_coll_opts_t *opts);
/** @brief gs_alltoall() with options (@p opts may be NULL). */
GS_API gs_status_t gs_alltoall_ex(gs_comm_t comm, const void *sendbuf, void *recvbuf, size_t count,
                                  gs_dtype_t dtype, const gs_coll_opts_t *opts);

/* Options forms of the rooted and variable-size collectives (NULL: defaults). */
/** @brief gs_gather() with options (@p opts may be NULL). */
GS_API gs_status_t gs_gather_ex(gs_comm_t comm, const void *sendbuf, void *recvbuf, size_t count,
                                gs_dtype_t dtype, int root, const gs_coll_opts_t *opts);
/** @brief gs_scatter() with options (@p opts may be NULL). */
GS_API gs_status_t gs_scatter_ex(gs_comm_t comm, const void *sendbuf, void *recvbuf, size_t count,
                                 gs_dtype_t dtype, int root, const gs_coll_opts_t *opts);
/** @brief gs_allgatherv() with options (@p opts may be NULL). */
GS_API gs_status_t gs_allgatherv_ex(gs_comm_t comm, const void *sendbuf, size_t sendcount,
                                    void *recvbuf, size_t recvbuf_count, const size_t *recvcounts,
                                    const size_t *displs, gs_dtype_t dtype,
                                    const gs_coll_opts_t *opts);
/** @brief gs_alltoallv() with options (@p opts may be NULL). */
GS_API gs_status_t gs_alltoallv_ex(gs_comm_t comm, const void *sendbuf, size_t sendbuf_count,
                                   const size_t *sendcounts, const size_t *sdispls, void *recvbuf,
                                   size_t recvbuf_count, const size_t *recvcounts,
                                   const size_t *rdispls, gs_dtype_t dtype,
                                   const gs_coll_opts_t *opts);
/** @brief gs_reduce_scatterv() with options (@p opts may be NULL). */
GS_API gs_status_t gs_reduce_scatterv_ex(gs_comm_t comm, const void *sendbuf, void *recvbuf,
                                         const size_t *recvcounts, gs_dtype_t dtype, gs_op_t op,
                                         const gs_coll_opts_t *opts);

/* ===================================================================== */
/* Point-to-point                                                        */
/* ===================================================================== */

/**
 * @brief Send count elements of buf to rank @p peer with @p tag. Messages
 * between the same pair with the same tag arrive in order.
 * @return GS_OK when the data has left @p buf; GS_ERR_INVALID_ARG when @p peer
 * is out of range or is the calling rank (copy locally instead); errors as
 * for collectives.
 * @note Not collective. Blocking with deadline; never needs the receive to be
 * posted first (the receiver buffers unexpected messages). Point-to-point
 * operations do not wait for each other in the queue: a gs_irecv() posted
 * before a gs_isend() on every rank of a ring completes.
 */
GS_API gs_status_t gs_send(gs_comm_t comm, const void *buf, size_t count, gs_dtype_t dtype,
                           int peer, uint32_t tag);

/**
 * @brief Receive a message from @p peer (or GS_ANY_SOURCE) with @p tag into
 * buf, which holds count elements. The message must be exactly count elements:
 * a larger one is consumed and fails with GS_ERR_TRUNCATED, a shorter one with
 * GS_ERR_MISMATCH.
 */
GS_API gs_status_t gs_recv(gs_comm_t comm, void *buf, size_t count, gs_dtype_t dtype, int peer,
                           uint32_t tag);

/**
 * @brief gs_send() and gs_recv() with options (@p opts may be NULL; its
 * algo must be GS_ALGO_AUTO). Device buffers need the NCCL path, where
 * messages between two ranks match in the order they were sent (NCCL has
 * no tags: @p tag must still agree, it is not checked) and GS_ANY_SOURCE
 * is not available; without NCCL they fail with GS_ERR_UNSUPPORTED. The
 * first call with device buffers on a communicator must be a collective
 * (it sets NCCL up, with every rank): before one, device point-to-point is
 * GS_ERR_INVALID_USAGE. Over NCCL a send waits on the GPU for its receive:
 * a pair that sends to each other on one stream deadlocks that stream, so
 * give the sends and the receives streams of their own.
 */
GS_API gs_status_t gs_send_ex(gs_comm_t comm, const void *buf, size_t count, gs_dtype_t dtype,
                              int peer, uint32_t tag, const gs_coll_opts_t *opts);
/** @brief gs_recv() with options; see gs_send_ex(). */
GS_API gs_status_t gs_recv_ex(gs_comm_t comm, void *buf, size_t count, gs_dtype_t dtype, int peer,
                              uint32_t tag, const gs_coll_opts_t *opts);

/** @brief What a receive or a probe found. */
typedef struct gs_p2p_status {
    int source;   /**< the rank that sent the message (resolves GS_ANY_SOURCE) */
    uint32_t tag; /**< its tag */
    size_t count; /**< its length in elements of the call's dtype */
} gs_p2p_status_t;

/**
 * @brief gs_recv() of at most @p count elements that says who sent what:
 * @p peer may be GS_ANY_SOURCE, a shorter message is GS_OK (status->count
 * says how long; the rest of buf is untouched), a longer one
 * GS_ERR_TRUNCATED (consumed, buf untouched). A message whose byte length
 * is not a whole number of elements is GS_ERR_MISMATCH. @p status may be
 * NULL; it is written only on GS_OK.
 * @return GS_OK, GS_ERR_TRUNCATED, GS_ERR_MISMATCH (neither fails the
 * communicator), GS_ERR_INVALID_ARG, GS_ERR_TIMEOUT, the communicator's
 * errors.
 * @note Blocking with the deadline, local to the pair. Inside a group
 * (gs_group_start()) it returns GS_OK after validating, and @p buf and
 * @p status are written by gs_group_end(). Device buffers (NCCL): @p peer
 * must be a rank and the message exactly @p count elements (NCCL carries
 * no lengths); status is filled from the call.
 */
GS_API gs_status_t gs_recv_status(gs_comm_t comm, void *buf, size_t count, gs_dtype_t dtype,
                                  int peer, uint32_t tag, gs_p2p_status_t *status);

/**
 * @brief Wait (with the deadline) until a message from @p peer (or
 * GS_ANY_SOURCE) with @p tag can be received, without receiving it; fill
 * @p status (count in elements of @p dtype, rounded down). A gs_recv from
 * status->source with that tag then receives it, unless a receive posted
 * earlier (a pending gs_irecv) takes it first.
 * @return GS_OK, GS_ERR_TIMEOUT naming the peer and tag (nothing was
 * consumed, so the communicator is not failed), GS_ERR_INVALID_ARG,
 * GS_ERR_UNSUPPORTED (a transport without probe), GS_ERR_PEER_FAILED when
 * the peer (or, for GS_ANY_SOURCE, a peer) has failed and nothing is held,
 * the communicator's errors.
 * @note Blocking, local. Host traffic only: device (NCCL) messages are
 * never seen. Runs on the communicator's worker like every operation, so
 * it waits behind collectives submitted before it.
 */
GS_API gs_status_t gs_probe(gs_comm_t comm, int peer, uint32_t tag, gs_dtype_t dtype,
                            gs_p2p_status_t *status);

/**
 * @brief gs_probe() without waiting for a message: *flag_out = 1 and
 * @p status filled when such a message has arrived, else *flag_out = 0
 * (@p status untouched).
 * @return as gs_probe(), never GS_ERR_TIMEOUT.
 * @note Local. It takes in what the transport has received first, on the
 * worker (it may wait for an operation running there to finish).
 */
GS_API gs_status_t gs_iprobe(gs_comm_t comm, int peer, uint32_t tag, gs_dtype_t dtype,
                             int *flag_out, gs_p2p_status_t *status);

/**
 * @brief Start a group of point-to-point calls on this thread (as
 * ncclGroupStart and torch's batch_isend_irecv): until the matching
 * gs_group_end(), the blocking gs_send(), gs_send_ex(), gs_recv(),
 * gs_recv_ex() and gs_recv_status() calls (any communicator) validate
 * their arguments and return GS_OK at once without waiting (a bad call
 * returns its error and is not part of the group); gs_group_end() posts
 * them all and waits for every one, so the order of the sends and
 * receives in a group never deadlocks. Groups nest (only the outermost end
 * posts). Non-blocking and collective calls are not affected.
 * @return GS_OK.
 * @note Thread-local. The buffers (and statuses) of the calls must stay
 * valid until gs_group_end() returns. Device buffers cannot join a group:
 * such a call returns GS_ERR_UNSUPPORTED (docs/gpu.md).
 */
GS_API gs_status_t gs_group_start(void);

/**
 * @brief End a group (see gs_group_start()): wait for every call of the
 * group. @return GS_OK, the first error in call order (every call is
 * still waited for), or GS_ERR_INVALID_USAGE without a matching start on
 * this thread.
 * @note Blocking; each call is bounded by its communicator's deadline,
 * counted from this call.
 */
GS_API gs_status_t gs_group_end(void);

/* ===================================================================== */
/* Non-blocking operations                                               */
/* ===================================================================== */
/*
 * Each gs_i* call validates its arguments, queues the operation and returns
 * at once with *req_out set. Do not modify or free the buffers until
 * gs_wait() or gs_test() reports completion. gs_wait() and gs_test() release
 * the request when they return anything but GS_INPROGRESS, and set the handle
 * to GS_REQUEST_NULL. Every rank must start collectives in the same order.
 * Returns GS_OK with *req_out set, GS_ERR_INVALID_ARG, GS_ERR_NO_MEMORY, or
 * the communicator's sticky error.
 */

/** @brief Non-blocking gs_allreduce() (see the section comment above). */
GS_API gs_status_t gs_iallreduce(gs_comm_t comm, const void *sendbuf, void *recvbuf, size_t count,
                                 gs_dtype_t dtype, gs_op_t op, gs_request_t *req_out);
/** @brief Non-blocking gs_allreduce_ex(): codec, error feedback and stream options. */
GS_API gs_status_t gs_iallreduce_ex(gs_comm_t comm, const void *sendbuf, void *recvbuf,
                                    size_t count, gs_dtype_t dtype, gs_op_t op,
                                    const gs_allreduce_opts_t *opts, gs_request_t *req_out);
/** @brief Non-blocking gs_broadcast(). */
GS_API gs_status_t gs_ibroadcast(gs_comm_t comm, void *buf, size_t count, gs_dtype_t dtype,
                                 int root, gs_request_t *req_out);
/** @brief Non-blocking gs_reduce(). */
GS_API gs_status_t gs_ireduce(gs_comm_t comm, const void *sendbuf, void *recvbuf, size_t count,
                              gs_dtype_t dtype, gs_op_t op, int root, gs_request_t *req_out);
/** @brief Non-blocking gs_allgather(). */
GS_API gs_status_t gs_iallgather(gs_comm_t comm, const void *sendbuf, void *recvbuf, size_t count,
                                 gs_dtype_t dtype, gs_request_t *req_out);
/** @brief Non-blocking gs_reduce_scatter(). */
GS_API gs_status_t gs_ireduce_scatter(gs_comm_t comm, const void *sendbuf, void *recvbuf,
                                      size_t recvcount, gs_dtype_t dtype, gs_op_t op,
                                      gs_request_t *req_out);
/** @brief Non-blocking gs_alltoall(). */
GS_API gs_status_t gs_ialltoall(gs_comm_t comm, const void *sendbuf, void *recvbuf, size_t count,
                                gs_dtype_t dtype, gs_request_t *req_out);
/** @brief Non-blocking gs_barrier(): completes once every rank has entered it. */
GS_API gs_status_t gs_ibarrier(gs_comm_t comm, gs_request_t *req_out);
/** @brief Non-blocking gs_send(); does not wait in the collective queue. */
GS_API gs_status_t gs_isend(gs_comm_t comm, const void *buf, size_t count, gs_dtype_t dtype,
                            int peer, uint32_t tag, gs_request_t *req_out);
/** @brief Non-blocking gs_recv(); does not wait in the collective queue. */
GS_API gs_status_t gs_irecv(gs_comm_t comm, void *buf, size_t count, gs_dtype_t dtype, int peer,
                            uint32_t tag, gs_request_t *req_out);

/* The non-blocking twins of the _ex calls (options as above; NULL: defaults). */
/** @brief Non-blocking gs_broadcast_ex(). */
GS_API gs_status_t gs_ibroadcast_ex(gs_comm_t comm, void *buf, size_t count, gs_dtype_t dtype,
                                    int root, const gs_coll_opts_t *opts, gs_request_t *req_out);
/** @brief Non-blocking gs_reduce_ex(). */
GS_API gs_status_t gs_ireduce_ex(gs_comm_t comm, const void *sendbuf, void *recvbuf, size_t count,
                                 gs_dtype_t dtype, gs_op_t op, int root, const gs_coll_opts_t *opts,
                                 gs_request_t *req_out);
/** @brief Non-blocking gs_gather_ex() (options: algorithm, stream, flags). */
GS_API gs_status_t gs_igather_ex(gs_comm_t comm, const void *sendbuf, void *recvbuf, size_t count,
                                 gs_dtype_t dtype, int root, const gs_coll_opts_t *opts,
                                 gs_request_t *req_out);
/** @brief Non-blocking gs_scatter_ex() (options: algorithm, stream, flags). */
GS_API gs_status_t gs_iscatter_ex(gs_comm_t comm, const void *sendbuf, void *recvbuf, size_t count,
                                  gs_dtype_t dtype, int root, const gs_coll_opts_t *opts,
                                  gs_request_t *req_out);
/** @brief Non-blocking gs_alltoallv_ex(); the count and displacement arrays are copied. */
GS_API gs_status_t gs_ialltoallv_ex(gs_comm_t comm, const void *sendbuf, size_t sendbuf_count,
                                    const size_t *sendcounts, const size_t *sdispls, void *recvbuf,
                                    size_t recvbuf_count, const size_t *recvcounts,
                                    const size_t *rdispls, gs_dtype_t dtype,
                                    const gs_coll_opts_t *opts, gs_request_t *req_out);
/** @brief Non-blocking gs_allgatherv_ex(); the count and displacement arrays are copied. */
GS_API gs_status_t gs_iallgatherv_ex(gs_comm_t comm, const void *sendbuf, size_t sendcount,
                                     void *recvbuf, size_t recvbuf_count, const size_t *recvcounts,
                                     const size_t *displs, gs_dtype_t dtype,
                                     const gs_coll_opts_t *opts, gs_request_t *req_out);
/** @brief Non-blocking gs_reduce_scatterv_ex(); the count array is copied. */
GS_API gs_status_t gs_ireduce_scatterv_ex(gs_comm_t comm, const void *sendbuf, void *recvbuf,
                                          const size_t *recvcounts, gs_dtype_t dtype, gs_op_t op,
                                          const gs_coll_opts_t *opts, gs_request_t *req_out);
/** @brief Non-blocking gs_allgather_ex(). */
GS_API gs_status_t gs_iallgather_ex(gs_comm_t comm, const void *sendbuf, void *recvbuf,
                                    size_t count, gs_dtype_t dtype, const gs_coll_opts_t *opts,
                                    gs_request_t *req_out);
/** @brief Non-blocking gs_reduce_scatter_ex(). */
GS_API gs_status_t gs_ireduce_scatter_ex(gs_comm_t comm, const void *sendbuf, void *recvbuf,
                                         size_t recvcount, gs_dtype_t dtype, gs_op_t op,
                                         const gs_coll_opts_t *opts, gs_request_t *req_out);
/** @brief Non-blocking gs_alltoall_ex(). */
GS_API gs_status_t gs_ialltoall_ex(gs_comm_t comm, const void *sendbuf, void *recvbuf, size_t count,
                                   gs_dtype_t dtype, const gs_coll_opts_t *opts,
                                   gs_request_t *req_out);
/** @brief Non-blocking gs_send_ex(). */
GS_API gs_status_t gs_isend_ex(gs_comm_t comm, const void *buf, size_t count, gs_dtype_t dtype,
                               int peer, uint32_t tag, const gs_coll_opts_t *opts,
                               gs_request_t *req_out);
/** @brief Non-blocking gs_recv_ex(). */
GS_API gs_status_t gs_irecv_ex(gs_comm_t comm, void *buf, size_t count, gs_dtype_t dtype, int peer,
                               uint32_t tag, const gs_coll_opts_t *opts, gs_request_t *req_out);

/**
 * @brief Wait for *req to finish, release it and set *req to GS_REQUEST_NULL.
 * @return the operation's status. GS_OK for a GS_REQUEST_NULL handle.
 * GS_ERR_INVALID_ARG when req is NULL.
 * @note Blocking; bounded by the communicator deadline.
 */
GS_API gs_status_t gs_wait(gs_request_t *req);

/**
 * @brief Check *req without blocking. When finished, release it, set *req
 * to GS_REQUEST_NULL and return its status; otherwise return GS_INPROGRESS.
 */
GS_API gs_status_t gs_test(gs_request_t *req);

/**
 * @brief gs_wait() on each of the @p n requests. Every request is waited for
 * and released, even after one fails.
 * @return GS_OK, or the first error in array order.
 */
GS_API gs_status_t gs_waitall(size_t n, gs_request_t *reqs);

/**
 * @brief gs_recv_status() that returns at once with a request. @p status
 * (may be NULL) belongs to the request, like @p buf, until gs_wait() or
 * gs_test() completes it; it is written only when the receive succeeds.
 * @return GS_OK with *req_out set, GS_ERR_INVALID_ARG, the communicator's
 * sticky error.
 */
GS_API gs_status_t gs_irecv_status(gs_comm_t comm, void *buf, size_t count, gs_dtype_t dtype,
                                   int peer, uint32_t tag, gs_p2p_status_t *status,
                                   gs_request_t *req_out);

/**
 * @brief Wait until one of the @p n requests finishes (GS_REQUEST_NULL
 * entries are skipped); release it, set reqs[*index_out] to
 * GS_REQUEST_NULL and return its status (*index_out is set whatever that
 * status is). The requests may belong to different communicators. With no
 * request left, *index_out = -1 and GS_OK. Bounded by the requests'
 * deadlines.
 * @return the finished request's status, or GS_ERR_INVALID_ARG (reqs or
 * index_out NULL) with *index_out untouched.
 * @note Blocking without spinning: it sleeps on the worker's completion
 * signal when all requests share a communicator, else in naps of at most
 * 1 ms.
 */
GS_API gs_status_t gs_waitany(size_t n, gs_request_t *reqs, int *index_out);

/**
 * @brief When every one of the @p n requests has finished, release them
 * all and return as gs_waitall(); otherwise release none and return
 * GS_INPROGRESS. Never blocks. GS_REQUEST_NULL entries count as finished.
 * @return GS_OK, GS_INPROGRESS, the first error in array order,
 * GS_ERR_INVALID_ARG (reqs NULL with n > 0).
 */
GS_API gs_status_t gs_testall(size_t n, gs_request_t *reqs);

#ifdef __cplusplus
}
#endif

#endif /* GRADSYNC_GRADSYNC_H */
