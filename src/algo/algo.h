/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The algorithm layer: an operation descriptor, the context an algorithm
 * runs in (a transport, the rank, deadlines, scratch memory), the helpers
 * every algorithm shares (tags, waiting with a deadline) and the entry
 * points of each algorithm. Algorithms run on the communicator's worker
 * thread, one operation at a time, and block (with a deadline) until done.
 * Only algo_select.c chooses how a call runs: the path its bytes take, the
 * scheme (plain or compressed, and which compressed scheme) and the
 * algorithm (gs_algo_plan_t below).
 */
#ifndef GS_ALGO_ALGO_H
#define GS_ALGO_ALGO_H

#include <stddef.h>
#include <stdint.h>

#include "gradsync/gradsync.h"
#include "transport/transport.h"

/*
 * GS_COLL_KIND_MAP(X): X(kind, public gs_coll_type_t value, short name, API
 * function name), one row per operation kind. The enum, the short names
 * (gs__coll_name, logs, statistics) and the API names (error messages) come
 * from it, and each kind's value is the public GS_COLL_TYPE_* of
 * gradsync.h by construction. Rows are only appended.
 */
#define GS_COLL_KIND_MAP(X)                                                                        \
    X(GS_COLL_ALLREDUCE, GS_COLL_TYPE_ALLREDUCE, "allreduce", "gs_allreduce")                      \
    X(GS_COLL_BROADCAST, GS_COLL_TYPE_BROADCAST, "broadcast", "gs_broadcast")                      \
    X(GS_COLL_REDUCE, GS_COLL_TYPE_REDUCE, "reduce", "gs_reduce")                                  \
    X(GS_COLL_ALLGATHER, GS_COLL_TYPE_ALLGATHER, "allgather", "gs_allgather")                      \
    X(GS_COLL_REDUCE_SCATTER, GS_COLL_TYPE_REDUCE_SCATTER, "reduce_scatter", "gs_reduce_scatter")  \
    X(GS_COLL_ALLTOALL, GS_COLL_TYPE_ALLTOALL, "alltoall", "gs_alltoall")                          \
    X(GS_COLL_BARRIER, GS_COLL_TYPE_BARRIER, "barrier", "gs_barrier")                              \
    X(GS_COLL_SEND, GS_COLL_TYPE_SEND, "send", "gs_send")                                          \
    X(GS_COLL_RECV, GS_COLL_TYPE_RECV, "recv", "gs_recv")                                          \
    X(GS_COLL_GATHER, GS_COLL_TYPE_GATHER, "gather", "gs_gather")                                  \
    X(GS_COLL_SCATTER, GS_COLL_TYPE_SCATTER, "scatter", "gs_scatter")                              \
    X(GS_COLL_ALLGATHERV, GS_COLL_TYPE_ALLGATHERV, "allgatherv", "gs_allgatherv")                  \
    X(GS_COLL_ALLTOALLV, GS_COLL_TYPE_ALLTOALLV, "alltoallv", "gs_alltoallv")                      \
    X(GS_COLL_REDUCE_SCATTERV, GS_COLL_TYPE_REDUCE_SCATTERV, "reduce_scatterv",                    \
      "gs_reduce_scatterv")

#define GS_COLL_KIND_ENUM_ROW(_kind, _public, _name, _api) _kind = (int)(_public),

typedef enum gs_coll_kind {
    GS_COLL_KIND_MAP(GS_COLL_KIND_ENUM_ROW) GS_COLL_KIND_COUNT = GS_COLL_TYPE_COUNT
} gs_coll_kind_t;

#undef GS_COLL_KIND_ENUM_ROW

/* 1 for the kinds whose per-rank counts come from arrays (the "v" calls):
 * their count differs between ranks, so it is no part of the tag signature. */
static inline int gs__coll_is_v(gs_coll_kind_t kind)
{
    return (kind == GS_COLL_ALLGATHERV) || (kind == GS_COLL_ALLTOALLV) ||
           (kind == GS_COLL_REDUCE_SCATTERV);
}

/* Where a call's buffers live (set when the call is validated). */
typedef enum gs_mem_kind {
    GS_MEM_HOST = 0,  /* host memory: pageable, pinned or anything the CPU can read */
    GS_MEM_DEVICE = 1 /* CUDA device (or managed) memory */
} gs_mem_kind_t;

/* Internal flags of a descriptor (gs_coll_desc_t.flags), beside the public
 * GS_COLL_F_* bits of gradsync.h (which use the low 16 bits). */
#define GS_DESC_F_BLOCKING (1u << 16)  /* a blocking call: its caller waits for the result */
#define GS_DESC_F_RECV_UPTO (1u << 17) /* recv: at most count elements (gs_recv_status) */

/* What to run. count is the total element count for allreduce, broadcast
 * and reduce, and the per-rank block for allgather, reduce_scatter,
 * alltoall, gather and scatter; for the "v" calls it is this rank's own
 * part (allgatherv: sendcount; alltoallv: the sum of sendcounts;
 * reduce_scatterv: recvcounts[rank]), used for statistics and logs only.
 * root is the root of broadcast/reduce/gather/scatter and the peer of
 * send/recv. The v arrays hold ctx->size entries each and were validated
 * by the API (every block inside its buffer, no overlap in a receive
 * buffer); NULL displacements mean blocks packed in rank order (reduce_scatterv
 * is always packed). A non-blocking call's arrays are copies that live in
 * its request's allocation (freed with it). */
typedef struct gs_coll_desc {
    gs_coll_kind_t kind;
    const void *sendbuf;
    void *recvbuf;
    size_t count;
    gs_dtype_t dtype;
    gs_op_t op;
    int root;
    uint32_t tag;
    gs_algo_t algo;                      /* resolved by gs__algo_select before running */
    const struct gs_codec_config *codec; /* all-reduce: compress with this codec, or NULL */
    struct gs_ef *ef;                    /* all-reduce: error feedback state, or NULL */
    gs_mem_kind_t mem;                   /* where the buffers live (all alike) */
    int device;                          /* GS_MEM_DEVICE: the CUDA device they are on */
    void *stream;                        /* cudaStream_t the call is ordered on (NULL: legacy) */
    unsigned flags;                      /* GS_COLL_F_* | GS_DESC_F_* */
    void *event;                         /* device path: completion event while in flight */
    struct gs_p2p_status *status; /* recv: filled at completion, shorter allowed (gs_recv_status) */
    const size_t *scounts;        /* alltoallv: elements sent to each rank */
    const size_t *sdispls;        /* alltoallv: where each rank's block starts in sendbuf */
    const size_t *rcounts;        /* v calls: elements received from (of) each rank */
    const size_t *rdispls; /* allgatherv, alltoallv: where rank j's block starts in recvbuf */
    size_t scap;           /* alltoallv: sendbuf_count (elements; checked by the API) */
    size_t rcap;           /* allgatherv, alltoallv: recvbuf_count */
} gs_coll_desc_t;

/*
 * How a call runs, decided by gs__algo_plan (algo_select.c) and nowhere
 * else. Each field selects a row of a table there: the path says where
 * the bytes go, the scheme whether and how they are compressed, the
 * algorithm which gradsync algorithm moves them (GS_ALGO_NATIVE on the
 * NCCL path: NCCL's own collectives).
 */
typedef enum gs_path {
    GS_PATH_HOST = 0,     /* host buffers over the communicator's transport */
    GS_PATH_NCCL = 1,     /* device buffers through NCCL, ordered on the caller's stream */
    GS_PATH_STAGED = 2,   /* device buffers staged through pinned host memory, host transport */
    GS_PATH_MPI_CUDA = 3, /* device buffers straight to a CUDA-aware MPI's collectives */
    GS_PATH_COUNT = 4
} gs_path_t;

typedef enum gs_scheme {
    GS_SCHEME_PLAIN = 0,         /* uncompressed */
    GS_SCHEME_TWO_PHASE = 1,     /* quantizers, or a sparsifier too dense: algo_compressed.c */
    GS_SCHEME_SPARSE_GATHER = 2, /* top-k: all-gather of (index, value) payloads (algo_sparse.c) */
    GS_SCHEME_SPARSE_SHARED = 3, /* random-k: shared indices, dense all-reduce of the k values */
    GS_SCHEME_COUNT = 4
} gs_scheme_t;

typedef struct gs_algo_plan {
    gs_path_t path;
    gs_scheme_t scheme;
    gs_algo_t algo;   /* GS_SCHEME_PLAIN: the algorithm; else GS_ALGO_AUTO */
    int device_codec; /* device buffers, two-phase: the codec kernels run on the GPU
                       * (f32 without zstd); else the CPU codecs run on staged copies */
    const char *why;  /* what decided the algorithm: "caller", "GS_ALGO", "cost model", ... */
} gs_algo_plan_t;

/* Names for logs ("host", "nccl", "staged"; "plain", "two-phase", ...). */
const char *gs__path_name(gs_path_t path);
const char *gs__scheme_name(gs_scheme_t scheme);

/* Device capabilities of a context (gs_algo_ctx_t.dev_caps). */
#define GS_DEV_CAP_NCCL (1u << 0) /* an NCCL communicator can serve device buffers */
#define GS_DEV_CAP_MPI_CUDA                                                                        \
    (1u << 1) /* the MPI transport takes device buffers (GS_MPI_CUDA_AWARE) */

struct gs_algo_dev; /* the device context of a communicator (CUDA builds: algo_dev.h) */

/* The cost model's machine parameters (see algo_select.c): seconds per
 * message (alpha), per byte sent on one link (beta), per byte reduced (gamma). */
typedef struct gs_algo_model {
    double alpha;
    double beta;
    double gamma;
    double cache_bytes; /* last-level cache: unsliced messages beyond it pay a memory pass */
    double intra_alpha; /* alpha and beta between ranks of one host (hierarchical phases) */
    double intra_beta;
    int flat_intra;    /* 1: every rank on one host, every pair on shared memory, so the
                         * flat algorithms pay intra_alpha and intra_beta too (agreed by
                         * every rank at init: gs__algo_model_agree_local) */
    double ring_bytes; /* flat_intra: one shared-memory ring (GS_SHM_BYTES); an unsliced
                         * message that does not fit stalls its sender; 0: no such limit */
} gs_algo_model_t;

/*
 * Which ranks share a host (algo_hosts.c), from the host ids exchanged at
 * bootstrap. Hosts are numbered in order of their lowest rank; the
 * host-grouped order lists host 0's ranks (ascending), then host 1's, and
 * so on, so that a ring or chain over it crosses between hosts only
 * nhosts times. All zero (nhosts 0, NULL arrays): unknown, which the
 * algorithms treat as the identity order with one rank per host.
 */
typedef struct gs_algo_hosts {
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
} gs_algo_hosts_t;

/*
 * The order in which the ring, chain and tree visit ranks: position p is
 * rank order[p]. NULL order: the identity over all ctx->size ranks. The
 * hierarchical all-reduce points it at a sub-group (the ranks of one host,
 * or one rank per host) to run the ring there; n and pos then describe
 * the sub-group. See gs__route_*() below.
 */
typedef struct gs_algo_route {
    const int *order; /* position -> rank, n entries, or NULL */
    int n;            /* positions */
    int pos;          /* this rank's position */
} gs_algo_route_t;

typedef struct gs_algo_ctx {
    gs_transport_t *tr;
    int rank;
    int size;
    uint64_t timeout_ns; /* an operation fails after this long without progress */
    size_t slice_bytes;  /* pipeline slice */
    uint32_t seq;        /* sequence number of the collective in flight */
    void *scratch;       /* grown on demand, freed with the context */
    size_t scratch_cap;
    void *sparse_buf; /* algo_sparse.c's random-k payload (it outlives a nested
                            * all-reduce that may move scratch): grown on demand, freed
                            * with the context */
    size_t sparse_cap;
    const char *opname;    /* "gs_allreduce", for error messages */
    int comp_corrupt;      /* GS_COMP_TEST_CORRUPT + 1: 0 (off, as in a zeroed context), or
                            * one more than the byte of every compressed payload this rank
                            * flips before sending it (tests only) */
    gs_algo_model_t model; /* all zero: the built-in defaults */
    /* size classes whose plan was logged at INFO, per collective and (path, scheme) */
    uint64_t logged[GS_COLL_KIND_COUNT][GS_PATH_COUNT * GS_SCHEME_COUNT];
    gs_algo_hosts_t hosts; /* which ranks share a host (set by the communicator) */
    gs_algo_route_t route; /* ring/chain/tree order: hosts.order, or a sub-group */
    /* Traffic statistics (algo_util.c): per-peer counters, ctx->size entries, or NULL; and
     * the time blocked in the transport since the last completion, charged to the peer of
     * the request that completes next. */
    struct gs__peer_counters *peer_ctr;
    uint64_t wait_pending_ns;
    unsigned dev_caps;       /* GS_DEV_CAP_*, agreed at device setup; 0: staging only */
    struct gs_algo_dev *dev; /* streams, staging buffers, NCCL; NULL until a device call */
    /* Diagnosis (algo_diag.c): the flight recorder (or NULL), the collective in flight
     * between gs__algo_op_begin and _end (or NULL), its fingerprint (the check bits of
     * every tag it uses) and when a stalled operation may next scan for early messages. */
    struct gs__trace *trace;
    const gs_coll_desc_t *cur;
    uint16_t fp;
    uint64_t diag_scan_ns;
} gs_algo_ctx_t;

/* A posted transport request and what it is for. */
typedef struct gs_algo_req {
    gs_tp_req_t *req;
    int peer;
    int is_send;
} gs_algo_req_t;

/* Tag of message number @p idx (< 2^24) of the collective in flight: the
 * sequence number and index select the receive; the operation's fingerprint
 * (ctx->fp inside gs__algo_op_begin/_end, so nested descriptors of one call
 * share it; else @p d's) in the check bits catches ranks that run different
 * collectives or arguments (docs/design.md, "Diagnosis"). */
uint64_t gs__algo_tag(const gs_algo_ctx_t *ctx, const gs_coll_desc_t *d, uint32_t idx);

/*
 * Diagnosis (algo_diag.c). gs__algo_fingerprint: a 15-bit hash of what every
 * rank must agree on (kind, dtype, the op of reducing kinds, the count of
 * the non-v kinds, the root of rooted kinds, the codec). gs__algo_op_begin
 * and _end bracket one collective on the worker: they set ctx->cur and
 * ctx->fp and record it in ctx->trace (when set). Pure but for the recorder.
 */
uint16_t gs__algo_fingerprint(const gs_coll_desc_t *d);
void gs__algo_op_begin(gs_algo_ctx_t *ctx, const gs_coll_desc_t *d, uint64_t t0_ns);
void gs__algo_op_end(gs_algo_ctx_t *ctx, const gs_coll_desc_t *d, gs_status_t status,
                     uint64_t t1_ns);

/* The flight recorder's callbacks: an operation in words
 * ("allreduce(count=1000, f32, sum)") and an algorithm's name. */
struct gs__trace_op;
void gs__algo_trace_describe(const struct gs__trace_op *op, char *buf, size_t len);
const char *gs__algo_trace_algo_name(int algo);

/* A receive of the collective in flight from @p peer met a message whose tag
 * @p their_tag has other check bits: tell every rank (a REPORT message),
 * wait up to 1 s for @p peer's own description, and return GS_ERR_MISMATCH
 * with both calls in words. */
gs_status_t gs__algo_diag_mismatch(gs_algo_ctx_t *ctx, int peer, uint64_t their_tag);

/* Called while the collective in flight is blocked for @p stalled_ns: take a
 * REPORT of another rank (GS_ERR_MISMATCH in words, after describing this
 * rank's call to the reporter when it blames this rank) and, after 200 ms,
 * look for early messages of this operation number from the peers waited on
 * whose fingerprint differs (then as gs__algo_diag_mismatch). Returns GS_OK
 * when there is nothing to report. */
gs_status_t gs__algo_diag_poll(gs_algo_ctx_t *ctx, uint64_t stalled_ns);

/* After a peer failure in the collective in flight: a REPORT that arrived
 * before it (or within 100 ms) explains it better. Returns GS_ERR_MISMATCH
 * in words when one is there (the last error set), else GS_OK (the caller
 * reports the failure as it is; the last error is restored). */
gs_status_t gs__algo_diag_explain(gs_algo_ctx_t *ctx);

/* Decode a diagnosis message of @p n bytes in a job of @p size ranks and
 * write the sender's call in words into @p words. Returns GS_OK, or
 * GS_ERR_PROTOCOL with the reason in @p why. Pure; the fuzz target's entry. */
gs_status_t gs__algo_diag_decode(const uint8_t *buf, size_t n, int size, char *words, size_t wlen,
                                 char *why, size_t whylen);

/* GS_ERR_TIMEOUT for the collective in flight, naming it (number and words) and
 * every peer it still waits on (the recorder's counters; else @p waiting_on). */
gs_status_t gs__algo_diag_timeout(gs_algo_ctx_t *ctx, const gs_algo_req_t *waiting_on);

/* Scratch memory of at least @p bytes, valid until the next call.
 * Returns GS_OK or GS_ERR_NO_MEMORY. */
gs_status_t gs__algo_scratch(gs_algo_ctx_t *ctx, size_t bytes, void **out);

/* The same for any buffer kept in ctx (*buf of *cap bytes, freed with the
 * context): replaced by a larger one only when @p bytes do not fit. */
gs_status_t gs__algo_grow(const gs_algo_ctx_t *ctx, void **buf, size_t *cap, size_t bytes,
                          void **out);

/* Post a send/receive and record it in *r. Returns the transport's status. */
gs_status_t gs__algo_isend(gs_algo_ctx_t *ctx, int peer, uint64_t tag, const void *buf, size_t len,
                           gs_algo_req_t *r);
gs_status_t gs__algo_irecv(gs_algo_ctx_t *ctx, int peer, uint64_t tag, void *buf, size_t len,
                           gs_algo_req_t *r);

/*
 * If r is posted and finished: release it, set r->req to NULL, set *done_out
 * to 1 and return its status (GS_OK or the failure, with the last error set
 * naming the peer). A receive that got fewer than @p expect bytes fails with
 * GS_ERR_MISMATCH. Otherwise *done_out = 0 and GS_OK.
 */
gs_status_t gs__algo_check(gs_algo_ctx_t *ctx, gs_algo_req_t *r, size_t expect, int *done_out);

/* As gs__algo_check, for receives of any length up to the posted size:
 * also reports the bytes that arrived in *nbytes_out. */
gs_status_t gs__algo_check_len(gs_algo_ctx_t *ctx, gs_algo_req_t *r, int *done_out,
                               size_t *nbytes_out);

/* Block in the transport until something happens or the deadline passes.
 * *deadline is the no-progress deadline; the caller renews it (see
 * gs__algo_renew) whenever a request completes. @p waiting_on names the
 * request to blame on timeout (may be NULL). Returns GS_OK, GS_ERR_TIMEOUT
 * naming the peer, GS_ERR_ABORTED. */
gs_status_t gs__algo_progress(gs_algo_ctx_t *ctx, uint64_t *deadline,
                              const gs_algo_req_t *waiting_on);

/* Push the no-progress deadline out to now + timeout. */
void gs__algo_renew(const gs_algo_ctx_t *ctx, uint64_t *deadline);

/* Wait for every posted request in reqs[0..n) (NULL req entries are skipped),
 * releasing each. Receives must deliver exactly expect[i] bytes (expect may be
 * NULL: any length). On error every other request is released too. */
gs_status_t gs__algo_wait_all(gs_algo_ctx_t *ctx, gs_algo_req_t *reqs, const size_t *expect,
                              size_t n);

/* What a wait does with each receive that finished: @p status is what
 * gs__algo_check_len returned for reqs[i] (*r), @p nbytes what arrived;
 * returns the status to go on with (a failure ends the wait). */
typedef gs_status_t (*gs_algo_recv_done_fn_t)(gs_algo_ctx_t *ctx, const gs_algo_req_t *r, size_t i,
                                              gs_status_t status, size_t nbytes, const void *arg);

/* Wait for every posted request in reqs[0..n) (NULL req entries are
 * skipped), releasing each, and hand every finished receive to @p on_recv
 * (may be NULL) with @p arg. The deadline is renewed by each completion; on
 * error every other request is released too. Blocking. Returns GS_OK, the
 * first failure (on_recv's, or the transport's: GS_ERR_TIMEOUT naming the
 * peer, GS_ERR_ABORTED, ...). gs__algo_wait_all is this with an exact
 * length check. */
gs_status_t gs__algo_wait_each(gs_algo_ctx_t *ctx, gs_algo_req_t *reqs, size_t n,
                               gs_algo_recv_done_fn_t on_recv, const void *arg);

/* Release every still-posted request (after an error). */
void gs__algo_release_all(gs_algo_ctx_t *ctx, gs_algo_req_t *reqs, size_t n);

/* Send sbytes from sbuf to and receive exactly rbytes into rbuf from @p peer,
 * both as message @p idx, and wait for both. A zero length skips that half
 * (the peer computes the same lengths). Returns GS_OK or the first failure. */
gs_status_t gs__algo_sendrecv(gs_algo_ctx_t *ctx, const gs_coll_desc_t *d, int peer, uint32_t idx,
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
static inline int gs__route_n(const gs_algo_ctx_t *ctx)
{
    return (ctx->route.order != NULL) ? ctx->route.n : ctx->size;
}

static inline int gs__route_pos(const gs_algo_ctx_t *ctx)
{
    return (ctx->route.order != NULL) ? ctx->route.pos : ctx->rank;
}

static inline int gs__route_rank(const gs_algo_ctx_t *ctx, int p)
{
    return (ctx->route.order != NULL) ? ctx->route.order[p] : p;
}

/* Position of @p rank in the route, -1 when it takes no part. */
int gs__route_pos_of(const gs_algo_ctx_t *ctx, int rank);

/*
 * Fill *h from the host id of every rank (ids[0..n)) as seen by @p rank.
 * Allocates; release with gs__algo_hosts_free. Returns GS_OK or
 * GS_ERR_NO_MEMORY (h untouched). Pure otherwise.
 */
gs_status_t gs__algo_hosts_init(gs_algo_hosts_t *h, const uint64_t *ids, int n, int rank);
void gs__algo_hosts_free(gs_algo_hosts_t *h);

/* Point ctx->route at the host-grouped order of ctx->hosts (identity when unknown). */
void gs__algo_route_hosts(gs_algo_ctx_t *ctx);

/* Model parameters GS_TUNE=probe must leave alone (set explicitly by the user). */
#define GS_PROBE_KEEP_ALPHA (1u << 0)
#define GS_PROBE_KEEP_BETA (1u << 1)
#define GS_PROBE_KEEP_GAMMA (1u << 2)
#define GS_PROBE_KEEP_INTRA_ALPHA (1u << 3)
#define GS_PROBE_KEEP_INTRA_BETA (1u << 4)

/*
 * GS_TUNE=probe (algo_probe.c): time small and large messages to the ring
 * neighbours and a reduction, agree with every rank on the slowest value of
 * each, and write them into ctx->model except those flagged in @p keep.
 * Collective over ctx's ranks; runs before any collective (its tags use a
 * sequence number collectives do not reach). Tens of ms on loopback.
 * Returns GS_OK or the exchange's failure (GS_ERR_TIMEOUT, GS_ERR_PEER_FAILED,
 * GS_ERR_NO_MEMORY).
 */
gs_status_t gs__algo_probe(gs_algo_ctx_t *ctx, unsigned keep);

/*
 * Set ctx->model.flat_intra when every rank says that all its peers are on
 * its host and reached over shared memory (@p local: this rank's view). The
 * ranks agree (a ring of running maxima, like the probe's), so every model
 * stays identical even where one pair fell back to TCP. Then the model
 * knows the ring size (@p ring_bytes per direction of a pair) and its
 * cache shrinks by what the host's n(n-1) rings take of it. Collective over
 * ctx's ranks, before any collective; a few small messages. Returns GS_OK
 * or the exchange's failure.
 */
gs_status_t gs__algo_model_agree_local(gs_algo_ctx_t *ctx, int local, double ring_bytes);

/* Algorithms (each file's header comment states its costs and step tables). */
gs_status_t gs__ring_allreduce(gs_algo_ctx_t *ctx, const gs_coll_desc_t *d);
gs_status_t gs__ring_reduce_scatter(gs_algo_ctx_t *ctx, const gs_coll_desc_t *d);
gs_status_t gs__ring_allgather(gs_algo_ctx_t *ctx, const gs_coll_desc_t *d);
/* The two phases of the ring all-reduce on their own, over ctx->route, for
 * the hierarchical all-reduce. Chunk c is elements [bounds[c], bounds[c+1])
 * of the d->count-element vector (route n + 1 entries; NULL: the balanced
 * split). rs_chunks: position p ends with chunk (p+1) mod n reduced over the
 * route (op as given; AVG is not scaled) in recvbuf; other chunks of
 * recvbuf hold partial sums. ag_chunks: position p holds chunk (p+1) mod n
 * in recvbuf; every position ends with every chunk. */
gs_status_t gs__ring_rs_chunks(gs_algo_ctx_t *ctx, const gs_coll_desc_t *d, const size_t *bounds);
gs_status_t gs__ring_ag_chunks(gs_algo_ctx_t *ctx, const gs_coll_desc_t *d, const size_t *bounds);
gs_status_t gs__chain_broadcast(gs_algo_ctx_t *ctx, const gs_coll_desc_t *d);
gs_status_t gs__chain_reduce(gs_algo_ctx_t *ctx, const gs_coll_desc_t *d);
gs_status_t gs__direct_alltoall(gs_algo_ctx_t *ctx, const gs_coll_desc_t *d);
/* Compressed all-reduce, two-phase scheme (algo_compressed.c): d->codec set,
 * float dtype, SUM or AVG; the sparse schemes are algo_comp.h's. */
gs_status_t gs__compressed_allreduce(gs_algo_ctx_t *ctx, const gs_coll_desc_t *d);
gs_status_t gs__direct_barrier(gs_algo_ctx_t *ctx, const gs_coll_desc_t *d);
gs_status_t gs__p2p_post(gs_algo_ctx_t *ctx, const gs_coll_desc_t *d, gs_algo_req_t *r);
gs_status_t gs__rd_allreduce(gs_algo_ctx_t *ctx, const gs_coll_desc_t *d);
gs_status_t gs__rabenseifner_allreduce(gs_algo_ctx_t *ctx, const gs_coll_desc_t *d);
gs_status_t gs__tree_allreduce(gs_algo_ctx_t *ctx, const gs_coll_desc_t *d);
gs_status_t gs__hier_allreduce(gs_algo_ctx_t *ctx, const gs_coll_desc_t *d);
gs_status_t gs__binomial_broadcast(gs_algo_ctx_t *ctx, const gs_coll_desc_t *d);
gs_status_t gs__binomial_reduce(gs_algo_ctx_t *ctx, const gs_coll_desc_t *d);
gs_status_t gs__p2p_send(gs_algo_ctx_t *ctx, const gs_coll_desc_t *d);
/* The rooted and variable-size collectives (algo_vcoll.c). */
gs_status_t gs__binomial_gather(gs_algo_ctx_t *ctx, const gs_coll_desc_t *d);
gs_status_t gs__direct_gather(gs_algo_ctx_t *ctx, const gs_coll_desc_t *d);
gs_status_t gs__binomial_scatter(gs_algo_ctx_t *ctx, const gs_coll_desc_t *d);
gs_status_t gs__direct_scatter(gs_algo_ctx_t *ctx, const gs_coll_desc_t *d);
gs_status_t gs__direct_alltoallv(gs_algo_ctx_t *ctx, const gs_coll_desc_t *d);
gs_status_t gs__ring_allgatherv(gs_algo_ctx_t *ctx, const gs_coll_desc_t *d);
gs_status_t gs__ring_reduce_scatterv(gs_algo_ctx_t *ctx, const gs_coll_desc_t *d);
gs_status_t gs__p2p_recv(gs_algo_ctx_t *ctx, const gs_coll_desc_t *d);

/* Parsed GS_ALGO: the forced algorithm per collective (GS_ALGO_AUTO = none). */
typedef struct gs_algo_policy {
    gs_algo_t forced[GS_COLL_KIND_COUNT];
} gs_algo_policy_t;

/* Parse "ring" (every collective that has it) or "allreduce:ring,broadcast:chain".
 * Returns GS_OK or GS_ERR_INVALID_ARG naming the bad entry. */
gs_status_t gs__algo_policy_parse(const char *text, gs_algo_policy_t *out);

/*
 * Decide how *d runs (pure but for the INFO line, logged once per
 * collective, plan and size class): the path from the buffers' memory kind
 * and ctx->dev_caps, the scheme from d->codec (a density rule every rank
 * evaluates alike), the algorithm from d->algo set by the caller, then the
 * policy, then the cost model. Returns GS_OK, or GS_ERR_UNSUPPORTED (with
 * text) when a forced algorithm cannot run this collective or no path
 * serves these buffers.
 */
gs_status_t gs__algo_plan(gs_algo_ctx_t *ctx, const gs_algo_policy_t *policy,
                          const gs_coll_desc_t *d, gs_algo_plan_t *plan_out);

/* Plan *d (gs__algo_plan), set d->algo to the plan's algorithm and run it.
 * Returns the run's status or the plan's error. */
gs_status_t gs__algo_run(gs_algo_ctx_t *ctx, const gs_algo_policy_t *policy, gs_coll_desc_t *d);

/* Run *d as @p plan says on the host path (the gradsync algorithms and the
 * compressed schemes over ctx's transport). The staged device path calls
 * it on host copies of the buffers. */
gs_status_t gs__algo_run_host(gs_algo_ctx_t *ctx, gs_coll_desc_t *d, const gs_algo_plan_t *plan);

/*
 * The fold of recursive doubling and Rabenseifner (pattern_rd.h), shared by
 * both. fold_in: the even ranks among the first 2*rem send their vector as
 * message @p idx and get *src_out = NULL (they sit out); their odd partners
 * reduce it into recvbuf (*src_out = recvbuf); every other rank gets
 * *src_out = sendbuf. @p tmp holds count elements. fold_out: the odd ranks
 * send the finished recvbuf back to the even ones as message @p idx.
 */
gs_status_t gs__rd_fold_in(gs_algo_ctx_t *ctx, const gs_coll_desc_t *d, uint32_t idx, void *tmp,
                           const void **src_out);
gs_status_t gs__rd_fold_out(gs_algo_ctx_t *ctx, const gs_coll_desc_t *d, uint32_t idx);

/*
 * The start of recursive doubling and Rabenseifner (algo_rd.c). One rank or
 * count 0: no message; recvbuf gets sendbuf's bytes when out of place and
 * *done_out = 1, nothing is left to do. Otherwise *done_out = 0, *tmp_out is
 * scratch of count elements and gs__rd_fold_in has run as message 0
 * (*src_out as it sets it; the caller ends with gs__rd_fold_out). Returns
 * GS_OK, GS_ERR_NO_MEMORY, or the fold's failure; on a failure the caller
 * returns it at once.
 */
gs_status_t gs__rd_start(gs_algo_ctx_t *ctx, const gs_coll_desc_t *d, void **tmp_out,
                         const void **src_out, int *done_out);

/* Model parameters from the knobs (alpha in microseconds, bandwidths in MB/s). */
void gs__algo_model_init(gs_algo_model_t *m, int alpha_us, int beta_mbps, int gamma_mbps);

/* Predicted seconds of @p algo running @p kind on @p n ranks with @p bytes
 * (the whole vector for allreduce/broadcast/reduce; per rank otherwise) and
 * pipeline slices of @p slice_bytes; a negative value when @p algo does not
 * implement @p kind. A zero model means the built-in defaults. Pure. */
double gs__algo_cost(const gs_algo_model_t *m, gs_coll_kind_t kind, gs_algo_t algo, int n,
                     size_t bytes, size_t slice_bytes);

/* How the ranks sit on hosts, as the cost model sees it. */
typedef struct gs_algo_shape {
    int n;         /* ranks */
    int nhosts;    /* hosts */
    int min_local; /* fewest ranks on a host */
    int max_local; /* most ranks on a host */
} gs_algo_shape_t;

/* Intra-host link parameters (microseconds, MB/s; <= 0: the built-in defaults). */
void gs__algo_model_set_intra(gs_algo_model_t *m, int alpha_us, int beta_mbps);

/* gs__algo_cost and gs__algo_choose for ranks spread over hosts: the flat
 * algorithms pay the model's alpha and beta (the links between hosts), the
 * hierarchical all-reduce pays intra_alpha and intra_beta inside a host and
 * is offered only when some host has several ranks and there are several
 * hosts. gs__algo_cost(n) is the shape {n, n, 1, 1}. Pure. */
double gs__algo_cost_shape(const gs_algo_model_t *m, gs_coll_kind_t kind, gs_algo_t algo,
                           const gs_algo_shape_t *shape, size_t bytes, size_t slice_bytes);
gs_algo_t gs__algo_choose_shape(const gs_algo_model_t *m, gs_coll_kind_t kind,
                                const gs_algo_shape_t *shape, size_t bytes, size_t slice_bytes);

/* The model's choice: the cheapest algorithm that implements @p kind. Pure. */
gs_algo_t gs__algo_choose(const gs_algo_model_t *m, gs_coll_kind_t kind, int n, size_t bytes,
                          size_t slice_bytes);

/* Name of an algorithm ("ring"), "unknown" when out of range. */
const char *gs__algo_name(gs_algo_t algo);

/* 1 when @p algo implements @p kind (GS_ALGO_AUTO always does). */
int gs__algo_offers(gs_coll_kind_t kind, gs_algo_t algo);

/* Name of a collective kind ("allreduce"). */
const char *gs__coll_name(gs_coll_kind_t kind);

#endif /* GS_ALGO_ALGO_H */
