/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Diagnosis (algo_diag.c): the flight recorder's view of each operation,
 * and the messages that let ranks explain a mismatch, a failure or a
 * timeout to each other. It hooks into the context's waits through
 * gs__algo_diag_ops (set as ctx->diag by the communicator), never the
 * other way round.
 */
#ifndef GS_ALGO_DIAG_DIAG_H
#define GS_ALGO_DIAG_DIAG_H

#include <stddef.h>
#include <stdint.h>

#include "algo/ctx/ctx.h"


/* The hooks the context's waits call (ctx->diag = &gs__algo_diag_ops). */
extern const gs__algo_diag_ops_t gs__algo_diag_ops;

/* gs__algo_op_begin and _end bracket one collective on the worker: they set
 * ctx->cur and ctx->fp (gs__algo_fingerprint) and record it in ctx->recorder
 * (when set). Pure but for the recorder. */
void gs__algo_op_begin(gs__algo_ctx_t *ctx, const gs__coll_desc_t *d, uint64_t t0_ns);
void gs__algo_op_end(gs__algo_ctx_t *ctx, const gs__coll_desc_t *d, gs_status_t status,
                     uint64_t t1_ns);

/* The flight recorder's callbacks: an operation in words
 * ("allreduce(count=1000, f32, sum)") and an algorithm's name. */
struct gs__recorder_op;
void gs__algo_recorder_describe(const struct gs__recorder_op *op, char *buf, size_t len);
const char *gs__algo_recorder_algo_name(int algo);

/* A receive of the collective in flight from @p peer met a message whose tag
 * @p their_tag has other check bits: tell every rank this rank's call (a
 * REPORT message), take every rank's description of its own call until all
 * have answered or failed (at most 10 s, or the operation's timeout when
 * shorter), and return GS_ERR_MISMATCH naming every call in words and which
 * ranks made it (the raw tag is INFO detail only). */
gs_status_t gs__algo_diag_mismatch(gs__algo_ctx_t *ctx, int peer, uint64_t their_tag);

/* Called while the collective in flight is blocked for @p stalled_ns: take
 * another rank's REPORT or DESCRIBE and join its round (this rank's call to
 * every rank, every rank's taken as in gs__algo_diag_mismatch, then
 * GS_ERR_MISMATCH in words) and, after 200 ms, look for early messages of
 * this operation number (message numbers 0..63, from the peers waited on and
 * from any source) whose fingerprint differs (then as gs__algo_diag_mismatch).
 * Returns GS_OK when there is nothing to report. */
gs_status_t gs__algo_diag_poll(gs__algo_ctx_t *ctx, uint64_t stalled_ns);

/* After a peer failure in the collective in flight: a REPORT or DESCRIBE that
 * arrived before it (or within 100 ms) explains it better (its round joined). Returns GS_ERR_MISMATCH
 * in words when one is there (the last error set), else GS_OK (the caller
 * reports the failure as it is; the last error is restored). */
gs_status_t gs__algo_diag_explain(gs__algo_ctx_t *ctx);

/* Decode a diagnosis message of @p n bytes in a job of @p size ranks and
 * write the sender's call in words into @p words. Returns GS_OK, or
 * GS_ERR_PROTOCOL with the reason in @p why. Pure; the fuzz target's entry. */
gs_status_t gs__algo_diag_decode(const uint8_t *buf, size_t n, int size, char *words, size_t wlen,
                                 char *why, size_t whylen);

/* GS_ERR_TIMEOUT for the collective in flight, naming it (number and words) and
 * every peer it still waits on (the recorder's counters; else @p waiting_on). */
gs_status_t gs__algo_diag_timeout(gs__algo_ctx_t *ctx, const gs__algo_req_t *waiting_on);

#endif /* GS_ALGO_DIAG_DIAG_H */
