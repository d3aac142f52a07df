/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The execution context an algorithm runs in: the transport, the rank,
 * deadlines, scratch memory, which ranks share a host and the route the
 * ring, chain and tree follow, per-peer statistics; and the helpers every
 * algorithm shares: message tags, posting, checking and waiting on requests
 * with a no-progress deadline (algo_ctx.c), hosts and routes
 * (algo_hosts.c). Algorithms run on the communicator's worker thread, one
 * operation at a time, and block (with a deadline) until done.
 *
 * Nothing here chooses or diagnoses: diagnosis (algo/diag) hooks into the
 * waits through ctx->diag, a table of callbacks the communicator sets.
 */
#ifndef GS_ALGO_CTX_CTX_H
#define GS_ALGO_CTX_CTX_H

#include <stddef.h>
#include <stdint.h>

#include "algo/ctx/ctx_desc.h"
#include "gradsync/gradsync.h"
#include "transport/transport.h"


/* Device capabilities of a context (gs__algo_ctx_t.dev_caps). */
#define GS_DEV_CAP_NCCL (1u << 0) /* an NCCL communicator can serve device buffers */
#define GS_DEV_CAP_MPI_CUDA                                                                        \
    (1u << 1) /* the MPI transport takes device buffers (GS_MPI_CUDA_AWARE) */

struct gs__dev; /* a communicator's device resources (CUDA builds: device/dev_stage.h) */

/*
 * Which ranks share a host (algo_hosts.c), from the host ids exchanged at
 * bootstrap. Hosts are numbered in order of their lowest rank; the
 * host-grouped order lists host 0's ranks (ascending), then host 1's, and
 * so on, so that a ring or chain over it crosses between hosts only
 * nhosts times. All zero (nhosts 0, NULL arrays): unknown, which the
 * algorithms treat as the identity order with one rank per host.
 */
typedef struct gs__algo_hosts {
    int nhosts;     /* distinct hosts */
    int local_rank; /* this rank among its host's ranks (ascending rank order) */
    int local_size; /* ranks on this rank's host */
    int min_local;  /* fewest ranks on any host */
    int max_local;  /* most ranks on any host */
    uint64_t *ids;  /* rank -> host id, size entries */
    int *host_of;   /* rank -> host index */
    int *order;     /* position -> rank, host-grouped */
    int *pos;       /* rank -> position in order */
    int *first;     /* host -> its first position in order; nhosts + 1 entries */
} gs__algo_hosts_t;

/*
 * The order in which the ring, chain and tree visit ranks: position p is
 * rank order[p]. NULL order: the identity over all ctx->size ranks. The
 * hierarchical all-reduce points it at a sub-group (the ranks of one host,
 * or one rank per host) to run the ring there; n and pos then describe
 * the sub-group. See gs__route_*() below.
 */
typedef struct gs__algo_route {
    const int *order; /* position -> rank, n entries, or NULL */
    int n;            /* positions */
    int pos;          /* this rank's position */
} gs__algo_route_t;

struct gs__algo_req;
struct gs__algo_ctx;

/*
 * Diagnosis hooks (algo/diag/diag.h has the functions behind them and their
 * contracts). ctx->diag NULL: none, and a timeout says only which peer the
 * wait was on.
 * - mismatch: a receive of the operation in flight met a message from
 *   @p peer whose tag has other check bits; returns GS_ERR_MISMATCH in words;
 * - explain: after a peer failure, a better explanation (GS_ERR_MISMATCH)
 *   or GS_OK (the caller reports the failure as it is);
 * - poll: the operation in flight is blocked for @p stalled_ns; GS_OK when
 *   there is nothing to report;
 * - timeout: GS_ERR_TIMEOUT for the operation in flight, naming it and the
 *   peers it waits on.
 */
typedef struct gs__algo_diag_ops {
    gs_status_t (*mismatch)(struct gs__algo_ctx *ctx, int peer, uint64_t their_tag);
    gs_status_t (*explain)(struct gs__algo_ctx *ctx);
    gs_status_t (*poll)(struct gs__algo_ctx *ctx, uint64_t stalled_ns);
    gs_status_t (*timeout)(struct gs__algo_ctx *ctx, const struct gs__algo_req *waiting_on);
} gs__algo_diag_ops_t;

typedef struct gs__algo_ctx {
    gs__transport_t *tr;
    int rank;
    int size;
    uint64_t timeout_ns; /* an operation fails after this long without progress */
    size_t slice_bytes;  /* pipeline slice */
    uint32_t seq;        /* sequence number of the collective in flight */
    void *scratch;       /* grown on demand, freed with the context */
    size_t scratch_cap;
    void *outer_buf; /* a schedule's buffer that outlives the nested calls it makes,
                      * which may move scratch: algo_sparse.c's random-k payload,
                      * algo_comp_hier.c's host-grouped copy; grown on demand, freed
                      * with the context */
    size_t outer_cap;
    const char *opname;     /* "gs_allreduce", for error messages */
    int comp_corrupt;       /* GS_COMP_TEST_CORRUPT + 1: 0 (off, as in a zeroed context), or
                            * one more than the byte of every compressed payload this rank
                            * flips before sending it (tests only) */
    gs__algo_hosts_t hosts; /* which ranks share a host (set by the communicator) */
    gs__algo_route_t route; /* ring/chain/tree order: hosts.order, or a sub-group */
    /* Traffic statistics (algo_ctx.c): per-peer counters, ctx->size entries, or NULL; and
     * the time blocked in the transport since the last completion, charged to the peer of
     * the request that completes next. */
    struct gs__peer_counters *peer_ctr;
    uint64_t wait_pending_ns;
    unsigned dev_caps;   /* GS_DEV_CAP_*, agreed at device setup; 0: staging only */
    struct gs__dev *dev; /* streams, staging buffers, NCCL; NULL until a device call */
    /* Diagnosis (algo_diag.c): the flight recorder (or NULL), the collective in flight
     * between gs__algo_op_begin and _end (or NULL), its fingerprint (the check bits of
     * every tag it uses) and when a stalled operation may next scan for early messages. */
    struct gs__recorder *recorder;
    const gs__algo_diag_ops_t *diag; /* diagnosis hooks (algo/diag), or NULL */
    const gs__coll_desc_t *cur;
    uint16_t fp;
    uint64_t diag_scan_ns;
    /* The host segment (ctx_shm.h) of a communicator whose ranks share one host, set up
     * at init by selection (gs__algo_shm_setup); NULL: none. Freed with the context. */
    struct gs__host_seg *shm;
} gs__algo_ctx_t;

/* What a communicator gives its execution context (gs__algo_ctx_init). */
typedef struct gs__algo_ctx_params {
    gs__transport_t *tr;             /* connected; outlives the context */
    const gs__algo_diag_ops_t *diag; /* diagnosis hooks, or NULL */
    int rank;
    int size;
    uint64_t timeout_ns;      /* no-progress deadline of every wait */
    size_t slice_bytes;       /* pipeline slice */
    int comp_corrupt;         /* GS_COMP_TEST_CORRUPT + 1 (0: off) */
    const uint64_t *host_ids; /* rank -> host id, size entries (copied) */
} gs__algo_ctx_params_t;

/* A posted transport request and what it is for. */
typedef struct gs__algo_req {
    gs__tp_req_t *req;
    int peer;
    int is_send;
} gs__algo_req_t;

/* Tag of message number @p idx (< 2^24) of the collective in flight: the
 * sequence number and index select the receive; the operation's fingerprint
 * (ctx->fp inside gs__algo_op_begin/_end, so nested descriptors of one call
 * share it; else @p d's) in the check bits catches ranks that run different
 * collectives or arguments (docs/design.md, "Diagnosis"). */
uint64_t gs__algo_tag(const gs__algo_ctx_t *ctx, const gs__coll_desc_t *d, uint32_t idx);

/*
 * The context's own init and fini. init fills *ctx (zeroed by the caller,
 * or left by a fini) from @p p: which ranks share a host (from the host
 * ids) and the host-grouped route; the operation name is "gs_comm_init"
 * until the first call. Local. Returns GS_OK or GS_ERR_NO_MEMORY (*ctx then
 * holds nothing to free). fini frees the scratch buffers and the host
 * table, and leaves the fields the communicator set apart (the recorder,
 * the counters, the device state, which are theirs). Both owner thread.
 */
gs_status_t gs__algo_ctx_init(gs__algo_ctx_t *ctx, const gs__algo_ctx_params_t *p);
void gs__algo_ctx_fini(gs__algo_ctx_t *ctx);

/* Scratch memory of at least @p bytes, valid until the next call.
 * Returns GS_OK or GS_ERR_NO_MEMORY. */
gs_status_t gs__algo_scratch(gs__algo_ctx_t *ctx, size_t bytes, void **out);

/* The same for any buffer kept in ctx (*buf of *cap bytes, freed with the
 * context): replaced by a larger one only when @p bytes do not fit. */
gs_status_t gs__algo_grow(const gs__algo_ctx_t *ctx, void **buf, size_t *cap, size_t bytes,
                          void **out);

/* Post a send/receive and record it in *r. Returns the transport's status. */
gs_status_t gs__algo_isend(gs__algo_ctx_t *ctx, int peer, uint64_t tag, const void *buf, size_t len,
                           gs__algo_req_t *r);
gs_status_t gs__algo_irecv(gs__algo_ctx_t *ctx, int peer, uint64_t tag, void *buf, size_t len,
                           gs__algo_req_t *r);

/*
 * If r is posted and finished: release it, set r->req to NULL, set *done_out
 * to 1 and return its status (GS_OK or the failure, with the last error set
 * naming the peer). A receive that got fewer than @p expect bytes fails with
 * GS_ERR_MISMATCH. Otherwise *done_out = 0 and GS_OK.
 */
gs_status_t gs__algo_check(gs__algo_ctx_t *ctx, gs__algo_req_t *r, size_t expect, int *done_out);

/* As gs__algo_check, for receives of any length up to the posted size:
 * also reports the bytes that arrived in *nbytes_out. */
gs_status_t gs__algo_check_len(gs__algo_ctx_t *ctx, gs__algo_req_t *r, int *done_out,
                               size_t *nbytes_out);

/* Block in the transport until something happens or the deadline passes.
 * *deadline is the no-progress deadline; the caller renews it (see
 * gs__algo_renew) whenever a request completes. @p waiting_on names the
 * request to blame on timeout (may be NULL). Returns GS_OK, GS_ERR_TIMEOUT
 * naming the peer, GS_ERR_ABORTED. */
gs_status_t gs__algo_progress(gs__algo_ctx_t *ctx, uint64_t *deadline,
                              const gs__algo_req_t *waiting_on);

/* Push the no-progress deadline out to now + timeout. */
void gs__algo_renew(const gs__algo_ctx_t *ctx, uint64_t *deadline);

/* Wait for every posted request in reqs[0..n) (NULL req entries are skipped),
 * releasing each. Receives must deliver exactly expect[i] bytes (expect may be
 * NULL: any length). On error every other request is released too. */
gs_status_t gs__algo_wait_all(gs__algo_ctx_t *ctx, gs__algo_req_t *reqs, const size_t *expect,
                              size_t n);

/* What a wait does with each receive that finished: @p status is what
 * gs__algo_check_len returned for reqs[i] (*r), @p nbytes what arrived;
 * returns the status to go on with (a failure ends the wait). */
typedef gs_status_t (*gs__algo_recv_done_fn_t)(gs__algo_ctx_t *ctx, const gs__algo_req_t *r,
                                               size_t i, gs_status_t status, size_t nbytes,
                                               const void *arg);

/* Wait for every posted request in reqs[0..n) (NULL req entries are
 * skipped), releasing each, and hand every finished receive to @p on_recv
 * (may be NULL) with @p arg. The deadline is renewed by each completion; on
 * error every other request is released too. Blocking. Returns GS_OK, the
 * first failure (on_recv's, or the transport's: GS_ERR_TIMEOUT naming the
 * peer, GS_ERR_ABORTED, ...). gs__algo_wait_all is this with an exact
 * length check. */
gs_status_t gs__algo_wait_each(gs__algo_ctx_t *ctx, gs__algo_req_t *reqs, size_t n,
                               gs__algo_recv_done_fn_t on_recv, const void *arg);

/* Release every still-posted request (after an error). */
void gs__algo_release_all(gs__algo_ctx_t *ctx, gs__algo_req_t *reqs, size_t n);

/* Send sbytes from sbuf to and receive exactly rbytes into rbuf from @p peer,
 * both as message @p idx, and wait for both. A zero length skips that half
 * (the peer computes the same lengths). Returns GS_OK or the first failure. */
gs_status_t gs__algo_sendrecv(gs__algo_ctx_t *ctx, const gs__coll_desc_t *d, int peer, uint32_t idx,
                              const void *sbuf, size_t sbytes, void *rbuf, size_t rbytes);

/* Balanced split of @p count elements into @p parts: part i starts at
 * *off_out and holds *len_out elements (the first count % parts get one more). */
static inline void gs__algo_split(size_t count, int parts, int i, size_t *off_out, size_t *len_out)
{
    const size_t base = count / (size_t)parts;
    const size_t extra = count % (size_t)parts;
    const size_t ui = (size_t)i;

    *off_out = ui * base + (ui < extra ? ui : extra);
    *len_out = base + (ui < extra ? 1 : 0);
}

/* Ranks taking part in the route, this rank's position, and the rank at
 * position @p p (ctx->route; NULL order means the identity). */
static inline int gs__route_n(const gs__algo_ctx_t *ctx)
{
    return (ctx->route.order != NULL) ? ctx->route.n : ctx->size;
}

static inline int gs__route_pos(const gs__algo_ctx_t *ctx)
{
    return (ctx->route.order != NULL) ? ctx->route.pos : ctx->rank;
}

static inline int gs__route_rank(const gs__algo_ctx_t *ctx, int p)
{
    return (ctx->route.order != NULL) ? ctx->route.order[p] : p;
}

/* Position of @p rank in the route, -1 when it takes no part. */
int gs__route_pos_of(const gs__algo_ctx_t *ctx, int rank);

/*
 * Fill *h from the host id of every rank (ids[0..n)) as seen by @p rank.
 * Allocates; release with gs__algo_hosts_free. Returns GS_OK or
 * GS_ERR_NO_MEMORY (h untouched). Pure otherwise.
 */
gs_status_t gs__algo_hosts_init(gs__algo_hosts_t *h, const uint64_t *ids, int n, int rank);
void gs__algo_hosts_free(gs__algo_hosts_t *h);

/* Point ctx->route at the host-grouped order of ctx->hosts (identity when unknown). */
void gs__algo_route_hosts(gs__algo_ctx_t *ctx);

#endif /* GS_ALGO_CTX_CTX_H */
