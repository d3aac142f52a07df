/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The shared-memory byte ring (contract in tcp_shm_ring.h). Positions read
 * from the other side are checked before use; copies wrap at most once.
 */
#include "transport/tcp/tcp_shm_ring.h"

#include <string.h>

void gs__shm_ring_ctl_init(gs__shm_ring_ctl_t *ctl)
{
    atomic_init(&ctl->head, 0);
    atomic_init(&ctl->tail, 0);
    atomic_init(&ctl->reader_sleeping, 0);
    atomic_init(&ctl->writer_waiting, 0);
}

void gs__shm_ring_attach(gs__shm_ring_t *r, gs__shm_ring_ctl_t *ctl, uint8_t *data, uint64_t size)
{
    r->ctl = ctl;
    r->data = data;
    r->size = size;
    r->pos = 0;
}

gs_status_t gs__shm_ring_writable(const gs__shm_ring_t *r, uint64_t *n_out)
{
    uint64_t head = atomic_load_explicit(&r->ctl->head, memory_order_acquire);
    uint64_t used = r->pos - head; /* a head beyond our tail wraps to a huge value */

    if (used > r->size) {
        return GS_ERR_PROTOCOL;
    }
    *n_out = r->size - used;
    return GS_OK;
}

gs_status_t gs__shm_ring_readable(const gs__shm_ring_t *r, uint64_t *n_out)
{
    uint64_t tail = atomic_load_explicit(&r->ctl->tail, memory_order_acquire);
    uint64_t used = tail - r->pos;

    if (used > r->size) {
        return GS_ERR_PROTOCOL;
    }
    *n_out = used;
    return GS_OK;
}

gs_status_t gs__shm_ring_writev(gs__shm_ring_t *r, const struct iovec *iov, size_t niov,
                                size_t *n_out)
{
    uint64_t room;
    uint64_t pos = r->pos;
    size_t done = 0;
    gs_status_t status = gs__shm_ring_writable(r, &room);

    *n_out = 0;
    if (status != GS_OK) {
        return status;
    }
    for (size_t i = 0; (i < niov) && (room > 0); i++) {
        const uint8_t *src = (const uint8_t *)iov[i].iov_base;
        uint64_t len = (iov[i].iov_len < room) ? iov[i].iov_len : room;

        while (len > 0) {
            uint64_t at = pos % r->size;
            uint64_t run = r->size - at; /* contiguous bytes before the wrap */

            run = (len < run) ? len : run;
            memcpy(r->data + at, src, (size_t)run);
            src += run;
            pos += run;
            len -= run;
            room -= run;
            done += (size_t)run;
        }
    }
    if (done > 0) {
        r->pos = pos;
        /* seq_cst: pairs with reader_arm (see tcp_shm_ring.h). */
        atomic_store_explicit(&r->ctl->tail, pos, memory_order_seq_cst);
    }
    *n_out = done;
    return GS_OK;
}

gs_status_t gs__shm_ring_read(gs__shm_ring_t *r, void *dst, size_t len, size_t *n_out)
{
    uint64_t avail;
    uint64_t pos = r->pos;
    uint8_t *out = (uint8_t *)dst;
    uint64_t want;
    gs_status_t status = gs__shm_ring_readable(r, &avail);

    *n_out = 0;
    if (status != GS_OK) {
        return status;
    }
    want = ((uint64_t)len < avail) ? (uint64_t)len : avail;
    *n_out = (size_t)want;
    while (want > 0) {
        uint64_t at = pos % r->size;
        uint64_t run = r->size - at;

        run = (want < run) ? want : run;
        if (out != NULL) {
            memcpy(out, r->data + at, (size_t)run);
            out += run;
        }
        pos += run;
        want -= run;
    }
    if (pos != r->pos) {
        r->pos = pos;
        atomic_store_explicit(&r->ctl->head, pos, memory_order_seq_cst);
    }
    return GS_OK;
}

bool gs__shm_ring_reader_arm(gs__shm_ring_t *r)
{
    uint64_t tail;

    atomic_store_explicit(&r->ctl->reader_sleeping, 1, memory_order_seq_cst);
    tail = atomic_load_explicit(&r->ctl->tail, memory_order_seq_cst);
    if (tail != r->pos) {
        atomic_store_explicit(&r->ctl->reader_sleeping, 0, memory_order_relaxed);
        return true;
    }
    return false;
}

void gs__shm_ring_reader_disarm(gs__shm_ring_t *r)
{
    if (atomic_load_explicit(&r->ctl->reader_sleeping, memory_order_relaxed) != 0) {
        atomic_store_explicit(&r->ctl->reader_sleeping, 0, memory_order_relaxed);
    }
}

bool gs__shm_ring_wake_reader(gs__shm_ring_t *r)
{
    return (atomic_load_explicit(&r->ctl->reader_sleeping, memory_order_seq_cst) != 0) &&
           (atomic_exchange_explicit(&r->ctl->reader_sleeping, 0, memory_order_seq_cst) != 0);
}

bool gs__shm_ring_writer_arm(gs__shm_ring_t *r)
{
    uint64_t head;

    atomic_store_explicit(&r->ctl->writer_waiting, 1, memory_order_seq_cst);
    head = atomic_load_explicit(&r->ctl->head, memory_order_seq_cst);
    if (r->pos - head != r->size) { /* space, or a corrupt head the next write reports */
        atomic_store_explicit(&r->ctl->writer_waiting, 0, memory_order_relaxed);
        return true;
    }
    return false;
}

void gs__shm_ring_writer_disarm(gs__shm_ring_t *r)
{
    if (atomic_load_explicit(&r->ctl->writer_waiting, memory_order_relaxed) != 0) {
        atomic_store_explicit(&r->ctl->writer_waiting, 0, memory_order_relaxed);
    }
}

bool gs__shm_ring_wake_writer(gs__shm_ring_t *r)
{
    return (atomic_load_explicit(&r->ctl->writer_waiting, memory_order_seq_cst) != 0) &&
           (atomic_exchange_explicit(&r->ctl->writer_waiting, 0, memory_order_seq_cst) != 0);
}
