/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Shared parts of the compressed all-reduce: the two-phase scheme for the
 * quantizers (algo_compressed.c), the sparse paths for top-k and random-k
 * (algo_sparse.c) and the exchange both run (algo_comp_xchg.c). Internal
 * to src/algo.
 */
#ifndef GS_ALGO_SCHED_ALGO_COMP_H
#define GS_ALGO_SCHED_ALGO_COMP_H

#include <stddef.h>
#include <stdint.h>

#include "algo/sched/sched.h"
#include "compress/codec.h"
#include "gradsync/compress.h"

/*
 * The codec of one compressed all-reduce, worked out once at the start of
 * the call and passed down: the configuration resolved and prepared for
 * payloads of up to max_count elements of the tensor's dtype and of f32
 * (the sums). Every slice, chunk and payload of the call is encoded and
 * decoded through it; nothing is resolved, checked or laid out again.
 */
typedef struct gs__comp_plan {
    gs__codec_plan_t in;  /* the tensor's dtype: encodes of the input, decodes of the result */
    gs__codec_plan_t f32; /* f32: decode-accumulates into the sums, encodes of a sum */
    size_t cap;           /* slot bytes: the largest payload, 64-aligned */
    size_t scratch;       /* codec scratch bytes that serve both */
} gs__comp_plan_t;

/* Prepare @p rc (resolved from the call's configuration) for payloads of
 * up to @p max_count elements of @p dtype and of f32. Local, pure.
 * Returns GS_OK or the codec's error naming ctx->opname
 * (GS_ERR_UNSUPPORTED: a sparse codec past 2^32 - 1 elements). */
gs_status_t gs__comp_plan(const gs__algo_ctx_t *ctx, const gs__codec_resolved_t *rc,
                          size_t max_count, gs_dtype_t dtype, gs__comp_plan_t *out);

/* One all-peers exchange of variable-length payloads: slot q of recv
 * (cap bytes each) receives from rank q; rank q is sent slot q of send,
 * or slot `rank` to every peer when send_same_slot is set (all-gather).
 * recv_len[q] gets the received length. reqs holds 2n entries. */
typedef struct gs__comp_xchg {
    const uint8_t *send;
    uint8_t *recv;
    size_t cap;
    const size_t *send_len;
    size_t *recv_len;
    gs__algo_req_t *reqs;
    int send_same_slot;
} gs__comp_xchg_t;

/* Post every receive and send of message @p phase of collective @p d and
 * wait for all of them (deadline renewed on progress). Blocking; on error
 * every request is released. Returns GS_OK or the transport's status
 * (GS_ERR_TIMEOUT, GS_ERR_PROTOCOL for an oversized message, ...). */
gs_status_t gs__comp_exchange(gs__algo_ctx_t *ctx, const gs__coll_desc_t *d, uint32_t phase,
                              const gs__comp_xchg_t *x);

/* GS_COMP_TEST_CORRUPT (only in the test variant, gradsync_testhooks): flip
 * one byte of a payload of @p bytes this rank is about to send, so that the
 * receivers' checks meet a rogue peer. A no-op in the library users get. */
void gs__comp_test_corrupt(const gs__algo_ctx_t *ctx, uint8_t *buf, size_t bytes);

/* The second residual @p ef carries (ef->server): the compressed
 * all-reduce's error feedback of this rank's sum (own_len f32 elements),
 * or the two-hop reduce-scatter's of the host's partial sums it encodes;
 * (re)made when its size or dtype changes; *out is NULL when ef is.
 * Returns GS_OK or GS_ERR_NO_MEMORY. */
gs_status_t gs__comp_server_ef(gs_ef_t ef, size_t own_len, gs_dtype_t dtype, gs_ef_t *out);

/* Run the sparse all-reduce of @p d along plan->scheme (GS_SCHEME_SPARSE_GATHER
 * or GS_SCHEME_SPARSE_SHARED, as gs__algo_plan chose; the shared scheme's
 * dense all-reduce uses plan->inner); d->codec is resolved once, here.
 * Collective, blocking. Returns GS_OK; GS_ERR_PROTOCOL for a malformed
 * payload from a peer or ranks that disagree on the random-k draw;
 * GS_ERR_NO_MEMORY; the transport's errors. */
gs_status_t gs__sparse_allreduce(gs__algo_ctx_t *ctx, const gs__coll_desc_t *d,
                                 const gs__algo_plan_t *plan);

#endif /* GS_ALGO_SCHED_ALGO_COMP_H */
