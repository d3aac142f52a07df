/* SPDX-License-Identifier: Apache-2.0 */
/*
 * What an operation is: the collective kinds (one X-macro table), the
 * descriptor of one call, and the names and fingerprint derived from them.
 * Pure data; every algorithm layer reads it, none writes it but the API.
 */
#ifndef GS_ALGO_CTX_CTX_DESC_H
#define GS_ALGO_CTX_CTX_DESC_H

#include <stddef.h>
#include <stdint.h>

#include "gradsync/gradsync.h"


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

typedef enum gs__coll_kind {
    GS_COLL_KIND_MAP(GS_COLL_KIND_ENUM_ROW) GS_COLL_KIND_COUNT = GS_COLL_TYPE_COUNT
} gs__coll_kind_t;

#undef GS_COLL_KIND_ENUM_ROW

/* 1 for the kinds whose per-rank counts come from arrays (the "v" calls):
 * their count differs between ranks, so it is no part of the tag signature. */
static inline int gs__coll_is_v(gs__coll_kind_t kind)
{
    return (kind == GS_COLL_ALLGATHERV) || (kind == GS_COLL_ALLTOALLV) ||
           (kind == GS_COLL_REDUCE_SCATTERV);
}

/* Where a call's buffers live (set when the call is validated). */
typedef enum gs__mem_kind {
    GS_MEM_HOST = 0,  /* host memory: pageable, pinned or anything the CPU can read */
    GS_MEM_DEVICE = 1 /* CUDA device (or managed) memory */
} gs__mem_kind_t;

/* Internal flags of a descriptor (gs__coll_desc_t.flags), beside the public
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
typedef struct gs__coll_desc {
    gs__coll_kind_t kind;
    const void *sendbuf;
    void *recvbuf;
    size_t count;
    gs_dtype_t dtype;
    gs_op_t op;
    int root;
    uint32_t tag;
    gs_algo_t algo; /* resolved by gs__algo_select before running */
    int design;     /* GS_ALGO_SHM: how it runs in the host segment (gs__shm_design_t),
                     * resolved with algo */
    const struct gs_codec_config
        *codec;                   /* all-reduce, reduce-scatter(v), all-gather(v): codec, or NULL */
    struct gs_ef *ef;             /* all-reduce, reduce-scatter(v): error feedback, or NULL */
    gs__mem_kind_t mem;           /* where the buffers live (all alike) */
    int device;                   /* GS_MEM_DEVICE: the CUDA device they are on */
    void *stream;                 /* cudaStream_t the call is ordered on (NULL: legacy) */
    unsigned flags;               /* GS_COLL_F_* | GS_DESC_F_* */
    void *event;                  /* device path: completion event while in flight */
    struct gs_p2p_status *status; /* recv: filled at completion, shorter allowed (gs_recv_status) */
    const size_t *scounts;        /* alltoallv: elements sent to each rank */
    const size_t *sdispls;        /* alltoallv: where each rank's block starts in sendbuf */
    const size_t *rcounts;        /* v calls: elements received from (of) each rank */
    const size_t *rdispls; /* allgatherv, alltoallv: where rank j's block starts in recvbuf */
    size_t scap;           /* alltoallv: sendbuf_count (elements; checked by the API) */
    size_t rcap;           /* allgatherv, alltoallv: recvbuf_count */
    uint64_t traffic;      /* set by gs__algo_run: the memory traffic of the chosen design,
                            * bytes summed over the ranks of one host (the cost model's
                            * count); 0 when not known */
} gs__coll_desc_t;

/* Name of a collective kind ("allreduce") and of its API call ("gs_allreduce"),
 * from GS_COLL_KIND_MAP; "unknown" when out of range. */
const char *gs__coll_name(gs__coll_kind_t kind);
const char *gs__coll_api_name(gs__coll_kind_t kind);

/* Name of an algorithm ("ring"), from the public GS_ALGO_MAP; "unknown" when
 * out of range. */
const char *gs__algo_name(gs_algo_t algo);

/* 1 for the kinds that reduce (their op is part of the call) and for the
 * rooted ones (their root is). */
static inline int gs__coll_reduces(int kind)
{
    return (kind == GS_COLL_ALLREDUCE) || (kind == GS_COLL_REDUCE) ||
           (kind == GS_COLL_REDUCE_SCATTER) || (kind == GS_COLL_REDUCE_SCATTERV);
}

static inline int gs__coll_rooted(int kind)
{
    return (kind == GS_COLL_BROADCAST) || (kind == GS_COLL_REDUCE) || (kind == GS_COLL_GATHER) ||
           (kind == GS_COLL_SCATTER) || (kind == GS_COLL_SEND) || (kind == GS_COLL_RECV);
}

/* A call in numbers, as a REPORT or DESCRIBE carries it. */
typedef struct gs__algo_call {
    int known; /* 0: the sender has no record of that operation */
    int kind;
    int dtype;
    int op;
    int root;
    int codec;
    uint64_t count;
    uint16_t fp;
} gs__algo_call_t;

/* *c = what every rank must agree on of @p d (fp left 0). Pure. */
void gs__algo_call_of(const gs__coll_desc_t *d, gs__algo_call_t *c);

/* A 15-bit hash of what every rank must agree on for @p d (kind, dtype, the
 * op of reducing kinds, the count of the non-v kinds, the root of rooted
 * kinds, the codec): the check bits of every tag of the operation
 * (docs/design.md, "Diagnosis"). Pure. */
uint16_t gs__algo_fingerprint(const gs__coll_desc_t *d);

#endif /* GS_ALGO_CTX_CTX_DESC_H */
