/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A single-producer/single-consumer byte ring in memory shared by two
 * processes: the control block (positions and the two sleep flags, each on
 * its own cache line) and the data area live in a shared-memory segment
 * (tcp_shm_seg.h); each side keeps a private view (gs__shm_ring_t) whose own
 * position it never reads back from shared memory. Pure memory operations,
 * no syscalls, no logging, so the unit tests can drive every edge.
 *
 * Positions are byte counts since the start (64-bit, never wrap in
 * practice); the byte at position p lives at data[p % size]. The producer
 * owns `tail`, the consumer owns `head`. Every value read from the other
 * side is hostile: a position that would put more than `size` or fewer than
 * 0 bytes in the ring is reported as GS_ERR_PROTOCOL and nothing outside
 * [data, data + size) is ever touched.
 *
 * Sleep/wake (the caller carries the doorbell, e.g. one byte on a socket):
 * - A consumer about to sleep calls gs__shm_ring_reader_arm: it sets
 *   reader_sleeping (seq_cst) and re-checks the ring; the producer, after
 *   publishing bytes, calls gs__shm_ring_wake_reader, which loads the flag
 *   (seq_cst) and clears it, telling the caller to ring exactly once. With
 *   both sides seq_cst, either the consumer sees the new bytes or the
 *   producer sees the flag (Dekker), so no wake-up is lost.
 * - The same with writer_waiting for a producer that found the ring full.
 *
 * Not thread-safe: one producer and one consumer, each a single thread.
 */
#ifndef GS_TRANSPORT_TCP_TCP_SHM_RING_H
#define GS_TRANSPORT_TCP_TCP_SHM_RING_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

#include "gradsync/status.h"

#define GS_SHM_CACHELINE 64

_Static_assert(ATOMIC_LLONG_LOCK_FREE == 2, "shared-memory rings need lock-free 64-bit atomics");
_Static_assert(ATOMIC_INT_LOCK_FREE == 2, "shared-memory rings need lock-free 32-bit atomics");

/* The shared control block of one direction (lives in the segment). */
typedef struct gs__shm_ring_ctl {
    _Alignas(GS_SHM_CACHELINE) _Atomic uint64_t head; /* consumer position */
    _Alignas(GS_SHM_CACHELINE) _Atomic uint64_t tail; /* producer position */
    _Alignas(GS_SHM_CACHELINE) _Atomic uint32_t reader_sleeping;
    _Alignas(GS_SHM_CACHELINE) _Atomic uint32_t writer_waiting;
} gs__shm_ring_ctl_t;

/* One side's private view of a ring. */
typedef struct gs__shm_ring {
    gs__shm_ring_ctl_t *ctl;
    uint8_t *data;
    uint64_t size;
    uint64_t pos; /* our own position: tail (producer) or head (consumer) */
} gs__shm_ring_t;

/* Zero a control block (the creator, before the peer maps it). */
void gs__shm_ring_ctl_init(gs__shm_ring_ctl_t *ctl);

/* Point a view at a control block and data area of @p size (> 0) bytes,
 * starting at position 0. */
void gs__shm_ring_attach(gs__shm_ring_t *r, gs__shm_ring_ctl_t *ctl, uint8_t *data, uint64_t size);

/* Producer: bytes free now. Returns GS_OK or GS_ERR_PROTOCOL (the
 * consumer's head is outside [tail - size, tail]). */
gs_status_t gs__shm_ring_writable(const gs__shm_ring_t *r, uint64_t *n_out);

/* Consumer: bytes readable now. Returns GS_OK or GS_ERR_PROTOCOL (the
 * producer's tail is outside [head, head + size]). */
gs_status_t gs__shm_ring_readable(const gs__shm_ring_t *r, uint64_t *n_out);

/* Producer: copy as much of the gathered @p iov[niov] as fits, publish it,
 * and set *n_out to the bytes copied (0 when full). Returns GS_OK or
 * GS_ERR_PROTOCOL (nothing copied). */
gs_status_t gs__shm_ring_writev(gs__shm_ring_t *r, const struct iovec *iov, size_t niov,
                                size_t *n_out);

/* Consumer: copy up to @p len readable bytes to @p dst (NULL: discard
 * them), free their space, and set *n_out (0 when empty). Returns GS_OK or
 * GS_ERR_PROTOCOL (nothing copied). */
gs_status_t gs__shm_ring_read(gs__shm_ring_t *r, void *dst, size_t len, size_t *n_out);

/* Consumer about to sleep: set reader_sleeping, then re-check. Returns true
 * when bytes (or a corrupt tail) are already there; the flag is then
 * cleared and the caller must not sleep. */
bool gs__shm_ring_reader_arm(gs__shm_ring_t *r);
/* Consumer awake again: clear reader_sleeping. */
void gs__shm_ring_reader_disarm(gs__shm_ring_t *r);
/* Producer after publishing: true exactly once per consumer sleep (the
 * caller rings the doorbell). */
bool gs__shm_ring_wake_reader(gs__shm_ring_t *r);

/* Producer with bytes left to write: set writer_waiting, then re-check.
 * Returns true when space (or a corrupt head) is already there; the flag is
 * then cleared and the caller retries instead of waiting. */
bool gs__shm_ring_writer_arm(gs__shm_ring_t *r);
/* Producer awake again: clear writer_waiting. */
void gs__shm_ring_writer_disarm(gs__shm_ring_t *r);
/* Consumer after freeing space: true exactly once per producer wait. */
bool gs__shm_ring_wake_writer(gs__shm_ring_t *r);

#endif /* GS_TRANSPORT_TCP_TCP_SHM_RING_H */
