/* SPDX-License-Identifier: Apache-2.0 */
/*
 * What a peer can make a parameter server hold, and the limits on it, as
 * constants and pure arithmetic (no I/O, no allocation; unit-tested). The
 * bounds, per worker and per server (docs/async.md, "Limits"):
 *
 * - Requests waiting for their answer (pushes not yet taken, pulls queued
 *   or parked): at most GS_PS_MAX_INFLIGHT. The client counts its own
 *   requests to each server and refuses the one past the limit with
 *   GS_ERR_NO_RESOURCE before sending anything, so an honest worker never
 *   reaches the server's limit; a worker that does is hostile or broken,
 *   and the server fails with GS_ERR_PROTOCOL naming it.
 * - Push payloads staged ahead by the receive thread (their receive posted
 *   before the server thread reaches them): at most GS_PS_STAGE_OPS pushes
 *   and gs__ps_stage_budget() bytes. Past either, a push is not refused:
 *   it waits in the queue unstaged, and the server thread posts its
 *   receive (and sends its clear-to-send) when it gets to it, so a worker
 *   that pushes faster than the server applies is slowed down, not failed.
 * - Each staging buffer holds what the push header announces, rounded up
 *   (gs__ps_stage_cap()), never a whole shard for a small payload.
 * - BSP pushes of later rounds: GS_PS_BSP_MAX_AHEAD per shard
 *   (ps_consistency.h), kept as received and decoded when applied.
 * - Clock messages: consecutive ones of a worker that wait in the queue
 *   are merged into one (ps_server.c), so they cost one op.
 */
#ifndef GS_PS_LIMITS_H
#define GS_PS_LIMITS_H

#include <stddef.h>

/* Requests of one worker that one server holds unanswered. */
#define GS_PS_MAX_INFLIGHT 65536u

/* Pushes of one worker whose payload receive the receive thread posts ahead. */
#define GS_PS_STAGE_OPS 128u

/* The smallest staging buffer (bytes). */
#define GS_PS_STAGE_MIN ((size_t)64)

/*
 * Capacity of the staging buffer for a payload of @p need bytes of a shard
 * whose largest payload is @p shard_cap bytes: @p shard_cap itself for a
 * payload of at least half of it (the pool then serves every full-size
 * push of the shard), else the power of two at or above @p need (at least
 * GS_PS_STAGE_MIN), so a buffer never holds more than twice what its
 * header announced. @p need above @p shard_cap (never, for a header the
 * server checked) gives @p need.
 */
size_t gs__ps_stage_cap(size_t need, size_t shard_cap);

/*
 * Bytes of payloads the receive thread may stage ahead per worker, for a
 * server whose shards take @p served_wire bytes at most (the sum over its
 * shards of the larger of the values and the codec bound): twice that, so
 * that a worker's next pushes of every key can land while the server
 * applies the current ones, and at least one eager payload.
 */
size_t gs__ps_stage_budget(size_t served_wire);

/*
 * 1 when the receive thread may stage one more push of @p charge bytes
 * (its buffer's capacity) for a worker that has @p ops pushes and
 * @p bytes bytes staged, under @p budget; else 0 (the push waits in the
 * queue unstaged).
 */
int gs__ps_stage_admit(size_t ops, size_t bytes, size_t charge, size_t budget);

#endif /* GS_PS_LIMITS_H */
