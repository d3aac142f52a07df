/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The transport interface: tagged, non-blocking point-to-point messages
 * between the ranks of one communicator. A transport knows bytes and tags,
 * never dtypes, ops or algorithms. One instance serves one communicator and
 * is driven by that communicator's worker thread only (every slot below is
 * single-threaded unless it says otherwise).
 *
 * Matching rules (every transport implements them the same way):
 * - A receive (peer or GS_ANY_SOURCE, tag) matches the oldest message from
 *   that peer whose (tag & GS_TP_TAG_MATCH_MASK) equals the receive's
 *   (tag & GS_TP_TAG_MATCH_MASK). Messages from one peer with the same tag
 *   match in the order they were sent.
 * - When the masked tags match but the full tags differ (two ranks are
 *   running different collectives), the receive completes with
 *   GS_ERR_MISMATCH and its buffer is not written.
 * - A message longer than the receive buffer completes the receive with
 *   GS_ERR_TRUNCATED and its buffer is not written. A shorter one completes
 *   it with GS_OK and the real length in nbytes.
 * - Messages may arrive before their receive is posted; the transport keeps
 *   them (copying once) until a receive matches. Sends therefore never wait
 *   for the receiver to post.
 * - A peer that closes or resets its connection fails every pending and
 *   later request that involves it with GS_ERR_PEER_FAILED. A transport
 *   that can tell other ranks (TCP: a DOWN frame) does so, and a rank that
 *   learns of a failure, first or second hand, fails every pending and later
 *   receive, whichever peer it names, with a reason naming the failed rank:
 *   the communicator is dead, and every rank should say who killed it.
 *   Recovery tags (GS_TP_TAG_RECOVERY) are the exception: the survivors
 *   agree over the connections that still work (gs_comm_shrink).
 */
#ifndef GS_TRANSPORT_TRANSPORT_H
#define GS_TRANSPORT_TRANSPORT_H

#include <stddef.h>
#include <stdint.h>

#include "core/counters.h"
#include "core/socket.h"
#include "gradsync/gradsync.h"

/* Bits of a tag that select which receive a message matches. The bits
 * outside the mask are a check value: equal masked tags with different check
 * bits mean the ranks disagree (GS_ERR_MISMATCH). */
#define GS_TP_TAG_MATCH_MASK 0x8000ffffffffffffull
/* Tags with this bit are point-to-point user tags (low 32 bits). */
#define GS_TP_TAG_P2P 0x8000000000000000ull
/* Recovery tags (gs_comm_shrink): both bits set (user tags never have bit
 * 47). Recovery traffic outlives a failure: a transport that goes down
 * keeps recovery messages that arrive or are held, and posts and keeps
 * recovery receives; only a failure of the very peer named fails them. */
#define GS_TP_TAG_RECOVERY 0x8000800000000000ull

/* Group-creation tags (gs_comm_create_group): the P2P bit and bit 46,
 * which user tags (32 bits) never have; the caller's tag in the low bits. */
#define GS_TP_TAG_GROUP 0x8000400000000000ull

static inline int gs__tp_tag_is_recovery(uint64_t tag)
{
    return (tag & GS_TP_TAG_RECOVERY) == GS_TP_TAG_RECOVERY;
}

/* Capability bits (gs__transport_ops_t.caps). Callers test a bit
 * (gs__tp_has_cap), never the transport's name. */
/* Moves host buffers. */
#define GS_TP_CAP_HOST_MEM (1u << 0)
/* Moves device buffers itself (no transport does yet). */
#define GS_TP_CAP_DEVICE_MEM (1u << 1)
/* Receives accept GS_ANY_SOURCE. */
#define GS_TP_CAP_ANY_SOURCE (1u << 2)
/* Fills the coll_* slots (the "native" algorithm, algo_native.c). */
#define GS_TP_CAP_NATIVE_COLL (1u << 3)
/* Messages from one peer with one tag match in the order they were sent. */
#define GS_TP_CAP_ORDERED (1u << 4)
/* Stripes one peer's traffic over several sockets (GS_TCP_NSOCKS). */
#define GS_TP_CAP_MULTI_STREAM (1u << 5)
/* Encrypts its connections when asked (GS_TLS, gs__tp_params_t.tls); a
 * transport without it refuses nothing, so the layer above refuses GS_TLS=1. */
#define GS_TP_CAP_TLS (1u << 6)
/* Keeps a liveness clock inside progress (GS_HEARTBEAT_MS): the worker
 * ticks progress while idle, at least every heartbeat interval. */
#define GS_TP_CAP_HEARTBEAT (1u << 7)
/* Its native collectives can take device buffers when the library
 * underneath is CUDA-aware (the user says so with GS_MPI_CUDA_AWARE=1). */
#define GS_TP_CAP_NATIVE_DEVICE (1u << 8)

#define GS_TP_ADDR_MAX GS_SOCK_ADDR_MAX

/* A transport instance (each transport defines the struct). */
typedef struct gs__tp gs__tp_t;
/* A pending send or receive, owned by the transport until req_release. */
typedef struct gs__tp_req gs__tp_req_t;

/* What every transport is given. A transport's own settings are not
 * here: it reads them from the communicator's configuration, @p cfg
 * (core/config.h, the rows of core/env_table.h), e.g. TCP's sockets per
 * peer, interface, shared memory, heartbeat and TLS (tcp_transport.h). */
typedef struct gs__tp_params {
    int rank;                    /* this rank in the communicator */
    int size;                    /* ranks in the communicator */
    uint64_t job_id;             /* hash of the job, checked in handshakes */
    uint64_t comm_id;            /* communicator id, checked in handshakes */
    const struct gs__cfg *cfg;   /* the resolved configuration; outlives the instance */
    gs__counters_t *counters;    /* where to count bytes and messages; may be NULL */
    const struct gs__auth *auth; /* the job token (core/auth.h), for a transport that
                                  * authenticates its peers itself; NULL or off: none */
    uint64_t max_message_bytes;  /* longest message a peer may announce (GS_MAX_MESSAGE_BYTES);
                                  * 0: GS_MAX_MESSAGE_BYTES_DEFAULT */
} gs__tp_params_t;

/* What a finished request reports. */
typedef struct gs__tp_completion {
    gs_status_t status; /* GS_OK or the error the request failed with */
    size_t nbytes;      /* bytes received (recv) or sent (send) */
    int peer;           /* the sender (recv; resolves GS_ANY_SOURCE) */
    uint64_t tag;       /* the full tag of the message */
} gs__tp_completion_t;

typedef struct gs__transport_ops {
    const char *name; /* "tcp" */
    size_t abi_size;  /* sizeof(gs__transport_ops_t) it was built against */
    unsigned caps;    /* GS_TP_CAP_* */

    /* Create an instance and start listening. Blocking, short.
     * Returns GS_OK, GS_ERR_SYSTEM (socket calls, named), GS_ERR_INVALID_ARG
     * (no such interface), GS_ERR_NO_MEMORY. */
    gs_status_t (*init)(const gs__tp_params_t *params, gs__tp_t **tp_out);

    /* Write this instance's endpoint ("ip:port" / "[ip6]:port") into buf,
     * NUL-terminated. Returns GS_OK or GS_ERR_INVALID_ARG if len is too small. */
    gs_status_t (*get_address)(gs__tp_t *tp, char *buf, size_t len);

    /* Connect given the endpoints of all ranks (addrs[rank] is ours) and
     * their host ids (@p hosts, may be NULL: unknown, no shared memory):
     * to every peer, or (TCP with GS_CONNECT=lazy) to the neighbours on the
     * ring rank - 1 and rank + 1, the others on first use. Blocking until
     * connected or @p deadline_ns (CLOCK_MONOTONIC). Rejects connections
     * that fail the handshake (magic, version, job, comm, rank, size) with
     * a WARN and keeps waiting for the right ones. Returns GS_OK,
     * GS_ERR_TIMEOUT naming the missing peers, GS_ERR_PEER_FAILED naming a
     * peer that is gone, GS_ERR_SYSTEM, GS_ERR_ABORTED. */
    gs_status_t (*connect)(gs__tp_t *tp, char (*addrs)[GS_TP_ADDR_MAX], const uint64_t *hosts,
                           uint64_t deadline_ns);

    /* Start sending len bytes of buf to peer with tag. Never blocks. buf must
     * stay valid and unchanged until the request completes. Returns GS_OK
     * with *req_out set (the request may already be complete, or already
     * failed), GS_ERR_INVALID_ARG, GS_ERR_NO_MEMORY. */
    gs_status_t (*isend)(gs__tp_t *tp, int peer, uint64_t tag, const void *buf, size_t len,
                         gs__tp_req_t **req_out);

    /* Post a receive of at most len bytes into buf from peer (or
     * GS_ANY_SOURCE) with tag. Never blocks. Returns as isend. */
    gs_status_t (*irecv)(gs__tp_t *tp, int peer, uint64_t tag, void *buf, size_t len,
                         gs__tp_req_t **req_out);

    /* Non-blocking check. Sets *done_out to 1 and fills *comp_out (may be
     * NULL) when the request has finished, with or without error. When it
     * failed, also sets this thread's last error (gs__error_copy_in, no log)
     * to a sentence naming the peer and the cause. Does not progress I/O.
     * Returns GS_OK. */
    gs_status_t (*test)(gs__tp_t *tp, gs__tp_req_t *req, int *done_out,
                        gs__tp_completion_t *comp_out);

    /* Move data: read and write every ready socket, then return as soon as
     * at least one request completed, a peer failed or a message nobody
     * was waiting for started to arrive (so a probe sees it), or at
     * @p deadline_ns. Also the liveness clock (tcp: GS_HEARTBEAT_MS):
     * heartbeats go out and silent peers fail from inside progress, so the
     * layer above must call it at least every heartbeat interval while the
     * instance is idle (the worker does; a call with a past deadline makes
     * one non-blocking pass).
     * Returns GS_OK (also at the deadline), GS_ERR_ABORTED after abort,
     * GS_ERR_SYSTEM for a failure of the poller itself. */
    gs_status_t (*progress)(gs__tp_t *tp, uint64_t deadline_ns);

    /* Free a request. An unfinished receive is cancelled; an unfinished send
     * is cancelled, and if part of it is already on the wire the transport
     * either finishes it from a private copy (TCP, once a failure is known)
     * or closes the connection to that peer (the stream cannot be resumed).
     * Either way the caller's buffer is never touched again. Returns GS_OK. */
    gs_status_t (*req_release)(gs__tp_t *tp, gs__tp_req_t *req);

    /* Thread-safe, any thread: make progress return GS_ERR_ABORTED and every
     * pending and later request fail with GS_ERR_ABORTED. Returns GS_OK. */
    gs_status_t (*abort)(gs__tp_t *tp);

    /* Optional (may be NULL: the communicator can only revoke itself).
     * Thread-safe, any thread, returns at once (gs_comm_revoke): the next
     * progress pass fails every pending and later request but those with
     * recovery tags with GS_ERR_REVOKED, tells the other ranks (TCP: a
     * REVOKE frame, passed on once by each rank that hears it), and every
     * progress call from then on returns GS_ERR_REVOKED after its pass (the
     * recovery waits of shrink and grow go on). A rank told by a peer does
     * the same. Returns GS_OK. */
    gs_status_t (*revoke)(gs__tp_t *tp);

    /* Say goodbye to every peer, close everything and free the instance.
     * Always frees. Returns GS_OK or the first error met. */
    gs_status_t (*finalize)(gs__tp_t *tp);

    /* Optional (may be NULL). Thread-safe, any thread: make a progress call
     * that is sleeping return early (the worker uses it when an operation
     * is submitted while it waits on in-flight point-to-point requests).
     * Without it the worker polls with a short timeout. Returns GS_OK. */
    gs_status_t (*wake)(gs__tp_t *tp);

    /* Optional (may be NULL: the transport cannot probe, and gs_probe()
     * answers GS_ERR_UNSUPPORTED). Non-blocking, worker thread only, does
     * not progress I/O: is there a message from @p peer (or GS_ANY_SOURCE)
     * whose masked tag equals @p tag's that no receive has taken yet? Sets
     * *found_out to 1 and fills comp_out->peer, ->tag (the message's full
     * tag) and ->nbytes (its whole length, even while its payload is still
     * arriving) for the one the same irecv would match now; else 0. A
     * message never leaves this queue on its own, so an irecv from
     * comp_out->peer with that tag, posted next, receives it. Returns GS_OK
     * (also when nothing is there), GS_ERR_INVALID_ARG (bad peer), or the
     * failure an irecv posted now would complete with at once
     * (GS_ERR_PEER_FAILED naming the rank, GS_ERR_ABORTED), checked in the
     * order irecv checks, with this thread's last error set. */
    gs_status_t (*probe)(gs__tp_t *tp, int peer, uint64_t tag, int *found_out,
                         gs__tp_completion_t *comp_out);

    /* Optional (may be NULL: none). After connect: how many peers this
     * rank reaches over shared memory, or will once connected (the cost
     * model prices a job whose every pair does so with its intra-host
     * parameters). Any thread. */
    int (*shm_peers)(gs__tp_t *tp);

    /* Optional (may be NULL: the transport cannot tell, and gs_comm_shrink
     * answers GS_ERR_UNSUPPORTED). Worker thread only: 1 when this instance
     * has seen @p peer fail or leave (itself, or told by another rank), 0
     * while it looks healthy. */
    int (*peer_failed)(gs__tp_t *tp, int peer);

    /* Optional native collectives (NULL when the transport has none; mpi
     * fills them and sets GS_TP_CAP_NATIVE_COLL). Used only for
     * uncompressed work by the "native" algorithm (algo_native.c), with the
     * argument conventions of the public calls (in place when sendbuf ==
     * recvbuf, or is the rank's block of recvbuf for allgather; count is the
     * per-rank block for allgather and reduce_scatter). Collective, worker
     * thread only, blocking until done or @p deadline_ns (a timed-out
     * operation is left to the native library and the communicator must be
     * destroyed). Return GS_OK, GS_ERR_UNSUPPORTED when the native library
     * cannot do this dtype/op/count (the caller falls back to gradsync's own
     * algorithm; every rank decides the same way), GS_ERR_TIMEOUT,
     * GS_ERR_PEER_FAILED, GS_ERR_ABORTED. */
    gs_status_t (*coll_allreduce)(gs__tp_t *tp, const void *sendbuf, void *recvbuf, size_t count,
                                  gs_dtype_t dtype, gs_op_t op, uint64_t deadline_ns);
    gs_status_t (*coll_bcast)(gs__tp_t *tp, void *buf, size_t count, gs_dtype_t dtype, int root,
                              uint64_t deadline_ns);
    gs_status_t (*coll_allgather)(gs__tp_t *tp, const void *sendbuf, void *recvbuf, size_t count,
                                  gs_dtype_t dtype, uint64_t deadline_ns);
    gs_status_t (*coll_reduce_scatter)(gs__tp_t *tp, const void *sendbuf, void *recvbuf,
                                       size_t count, gs_dtype_t dtype, gs_op_t op,
                                       uint64_t deadline_ns);
} gs__transport_ops_t;

/* An instance and its ops, as held by a communicator. */
typedef struct gs__transport {
    const gs__transport_ops_t *ops;
    gs__tp_t *tp;
} gs__transport_t;

/* Registry (transport.c): look up a built-in transport by name.
 * Returns GS_OK or GS_ERR_INVALID_ARG naming the unknown transport. */
gs_status_t gs__transport_lookup(const char *name, const gs__transport_ops_t **ops_out);

/* Dispatch wrappers, one per slot: callers never touch ops-> directly.
 * Each takes the communicator's gs__transport_t; an optional slot has a
 * gs__tp_has_<slot>() that callers test first. */

/* The transport's name, for messages; "none" before one is chosen. */
static inline const char *gs__tp_name(const gs__transport_t *t)
{
    return (t->ops != NULL) ? t->ops->name : "none";
}

/* 1 when the transport has every capability in @p cap (GS_TP_CAP_*). */
static inline int gs__tp_has_cap(const gs__transport_t *t, unsigned cap)
{
    return (t->ops != NULL) && ((t->ops->caps & cap) == cap);
}

/* Create t->tp (t->ops set by gs__transport_lookup). */
static inline gs_status_t gs__tp_init(gs__transport_t *t, const gs__tp_params_t *params)
{
    return t->ops->init(params, &t->tp);
}

static inline gs_status_t gs__tp_get_address(gs__transport_t *t, char *buf, size_t len)
{
    return t->ops->get_address(t->tp, buf, len);
}

static inline gs_status_t gs__tp_connect(gs__transport_t *t, char (*addrs)[GS_TP_ADDR_MAX],
                                         const uint64_t *hosts, uint64_t deadline_ns)
{
    return t->ops->connect(t->tp, addrs, hosts, deadline_ns);
}

static inline gs_status_t gs__tp_isend(gs__transport_t *t, int peer, uint64_t tag, const void *buf,
                                       size_t len, gs__tp_req_t **req_out)
{
    return t->ops->isend(t->tp, peer, tag, buf, len, req_out);
}

static inline gs_status_t gs__tp_irecv(gs__transport_t *t, int peer, uint64_t tag, void *buf,
                                       size_t len, gs__tp_req_t **req_out)
{
    return t->ops->irecv(t->tp, peer, tag, buf, len, req_out);
}

static inline gs_status_t gs__tp_test(gs__transport_t *t, gs__tp_req_t *req, int *done_out,
                                      gs__tp_completion_t *comp_out)
{
    return t->ops->test(t->tp, req, done_out, comp_out);
}

static inline gs_status_t gs__tp_progress(gs__transport_t *t, uint64_t deadline_ns)
{
    return t->ops->progress(t->tp, deadline_ns);
}

static inline gs_status_t gs__tp_req_release(gs__transport_t *t, gs__tp_req_t *req)
{
    return t->ops->req_release(t->tp, req);
}

/* Any thread (see the slot). */
static inline gs_status_t gs__tp_abort(gs__transport_t *t)
{
    return t->ops->abort(t->tp);
}

static inline int gs__tp_has_revoke(const gs__transport_t *t)
{
    return t->ops->revoke != NULL;
}

/* Any thread (see the slot). */
static inline gs_status_t gs__tp_revoke(gs__transport_t *t)
{
    return t->ops->revoke(t->tp);
}

/* Finalize t->tp and forget it (t->tp becomes NULL). */
static inline gs_status_t gs__tp_finalize(gs__transport_t *t)
{
    gs__tp_t *tp = t->tp;

    t->tp = NULL;
    return t->ops->finalize(tp);
}

static inline int gs__tp_has_wake(const gs__transport_t *t)
{
    return t->ops->wake != NULL;
}

static inline gs_status_t gs__tp_wake(gs__transport_t *t)
{
    return t->ops->wake(t->tp);
}

static inline int gs__tp_has_probe(const gs__transport_t *t)
{
    return t->ops->probe != NULL;
}

static inline gs_status_t gs__tp_probe(gs__transport_t *t, int peer, uint64_t tag, int *found_out,
                                       gs__tp_completion_t *comp_out)
{
    return t->ops->probe(t->tp, peer, tag, found_out, comp_out);
}

static inline int gs__tp_has_shm_peers(const gs__transport_t *t)
{
    return t->ops->shm_peers != NULL;
}

static inline int gs__tp_shm_peers(gs__transport_t *t)
{
    return t->ops->shm_peers(t->tp);
}

static inline int gs__tp_has_peer_failed(const gs__transport_t *t)
{
    return t->ops->peer_failed != NULL;
}

static inline int gs__tp_peer_failed(gs__transport_t *t, int peer)
{
    return t->ops->peer_failed(t->tp, peer);
}

static inline int gs__tp_has_coll_allreduce(const gs__transport_t *t)
{
    return t->ops->coll_allreduce != NULL;
}

static inline gs_status_t gs__tp_coll_allreduce(gs__transport_t *t, const void *sendbuf,
                                                void *recvbuf, size_t count, gs_dtype_t dtype,
                                                gs_op_t op, uint64_t deadline_ns)
{
    return t->ops->coll_allreduce(t->tp, sendbuf, recvbuf, count, dtype, op, deadline_ns);
}

static inline int gs__tp_has_coll_bcast(const gs__transport_t *t)
{
    return t->ops->coll_bcast != NULL;
}

static inline gs_status_t gs__tp_coll_bcast(gs__transport_t *t, void *buf, size_t count,
                                            gs_dtype_t dtype, int root, uint64_t deadline_ns)
{
    return t->ops->coll_bcast(t->tp, buf, count, dtype, root, deadline_ns);
}

static inline int gs__tp_has_coll_allgather(const gs__transport_t *t)
{
    return t->ops->coll_allgather != NULL;
}

static inline gs_status_t gs__tp_coll_allgather(gs__transport_t *t, const void *sendbuf,
                                                void *recvbuf, size_t count, gs_dtype_t dtype,
                                                uint64_t deadline_ns)
{
    return t->ops->coll_allgather(t->tp, sendbuf, recvbuf, count, dtype, deadline_ns);
}

static inline int gs__tp_has_coll_reduce_scatter(const gs__transport_t *t)
{
    return t->ops->coll_reduce_scatter != NULL;
}

static inline gs_status_t gs__tp_coll_reduce_scatter(gs__transport_t *t, const void *sendbuf,
                                                     void *recvbuf, size_t count, gs_dtype_t dtype,
                                                     gs_op_t op, uint64_t deadline_ns)
{
    return t->ops->coll_reduce_scatter(t->tp, sendbuf, recvbuf, count, dtype, op, deadline_ns);
}

#endif /* GS_TRANSPORT_TRANSPORT_H */
