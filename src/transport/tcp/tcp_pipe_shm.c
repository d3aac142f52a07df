/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Shared memory for peers on the same host, inside the TCP transport.
 *
 * Setup (when a pair's link is made, tcp_handshake.c): a pair is local when
 * the bootstrap gave both ranks the same host id and both offered shared
 * memory in the HELLO and ACK of socket 0. GS_SHM_MAX_BYTES plans every
 * local pair's ring size from the same table on every rank
 * (gs__tcp_shm_plan). On socket 0, before its first frame, the lower rank
 * creates a segment (tcp_shm_seg.h) and sends CREATE with its name, or
 * CREATE "not ok" when it could not (too little room in /dev/shm: WARN
 * naming the bytes); the higher rank maps it (and unlinks the name) and
 * answers MAPPED. Both sides reach the same verdict from the same records,
 * so they agree on TCP or shared memory per peer.
 *
 * Data path: socket 0's frame stream is written into the tx ring and read
 * from the rx ring (the byte pipe gs__tcp_pipe_shm at the end, tcp_pipe.h,
 * in place of the plain one's sendmsg/recv); frames, matching, partial writes and zero-copy
 * receives are unchanged. Sleep and wake follow tcp_shm_ring.h: before epoll,
 * progress arms the rings' flags; the other side rings a one-byte doorbell
 * on the socket only when a flag was set. The socket's EOF (the peer died
 * or left) is acted on once the ring is drained, so a BYE or DOWN written
 * before it is still read first. Sockets 1.. of a local peer stay plain
 * TCP; they carry only DOWN and BYE, since a local peer's messages are
 * never striped.
 */
#include "transport/tcp/tcp_conn.h"

#include "core/clock.h"
#include "core/error.h"
#include "core/log.h"
#include "core/shm_budget.h"

#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

_Static_assert(GS_TCP_SHM_MIN_RING == GS_SHM_MIN_BYTES, "ring bounds agree");
/* Two macros with the same expansion, compared on purpose: the day one of
 * them changes, this fails to compile. */
/* NOLINTNEXTLINE(misc-redundant-expression) */
_Static_assert(GS_TCP_SHM_MAX_RING == GS_SHM_MAX_BYTES, "ring bounds agree");
_Static_assert(GS_TCP_SHM_NAME_LEN == GS_SHM_NAME_MAX, "segment names fit the record");

/* ---------------------------------------------------------------------- */
/* Setup                                                                  */
/* ---------------------------------------------------------------------- */

static void seg_id(const gs__tp_t *tp, int lo, int hi, uint64_t ring, gs__shm_seg_id_t *id)
{
    memset(id, 0, sizeof(*id));
    id->job_id = tp->job_id;
    id->comm_id = tp->comm_id;
    id->lo = (uint32_t)lo;
    id->hi = (uint32_t)hi;
    id->ring_bytes = ring;
}

gs_status_t gs__tcp_shm_plan(gs__tp_t *tp)
{
    gs__shm_plan_t plan;
    int *lidx;
    int n = 0;

    if (!tp->shm_offer || (tp->hosts == NULL) || (tp->host_id == 0)) {
        return GS_OK;
    }
    lidx = calloc((size_t)tp->size, sizeof(*lidx));
    tp->shm_conns = calloc((size_t)tp->size, sizeof(*tp->shm_conns));
    if ((lidx == NULL) || (tp->shm_conns == NULL)) {
        free(lidx);
        return gs__error_set(GS_ERR_NO_MEMORY, "tcp: out of memory for shared-memory setup");
    }
    /* Number the local ranks (this one and every rank with our host id) in rank order. */
    for (int q = 0; q < tp->size; q++) {
        lidx[q] = ((q == tp->rank) || (tp->hosts[q] == tp->host_id)) ? n++ : -1;
    }
    if (n < 2) {
        free(lidx);
        return GS_OK;
    }
    memset(&plan, 0, sizeof(plan));
    gs__shm_plan(gs__shm_budget(tp->shm_max_auto, tp->shm_max, n, gs__shm_total_bytes()), n,
                 (n == tp->size) ? (uint64_t)n * tp->shm_reserve : 0, tp->shm_bytes,
                 GS_SHM_SEG_OVERHEAD, &plan);
    for (int q = 0; q < tp->size; q++) {
        if ((q != tp->rank) && (lidx[q] >= 0)) {
            const uint64_t r = gs__shm_plan_ring(&plan, n, lidx[tp->rank], lidx[q]);

            tp->peers[q].shm_ring = (r < tp->shm_bytes) ? r : tp->shm_bytes;
        }
    }
    if (lidx[tp->rank] == 0) {
        /* The lowest local rank, before this host's first segment: what
         * killed jobs left behind, and what the budget left out. */
        const int removed = gs__shm_seg_sweep();

        if (removed > 0) {
            GS_WARN("tcp: removed %d shared-memory segment%s of gradsync processes that are gone "
                    "from %s (a rank killed while setting up shared memory leaves one)",
                    removed, (removed == 1) ? "" : "s", GS_SHM_DIR);
        }
        if (plan.pairs == 0) {
            GS_WARN("tcp: GS_SHM_MAX_BYTES%s gives the %d ranks of this host %" PRIu64
                    " bytes of shared memory: too little for the rings of their nearest pairs, so "
                    "all %d pairs talk TCP; %" PRIu64 " bytes would give every pair GS_SHM_BYTES",
                    tp->shm_max_auto ? " (auto)" : "", n, plan.budget, plan.pairs_total, plan.need);
        } else if (plan.pairs < plan.pairs_total) {
            GS_WARN("tcp: GS_SHM_MAX_BYTES%s gives the %d ranks of this host %" PRIu64
                    " bytes of shared memory: %d of their %d pairs (those at most %d apart in "
                    "rank order) get rings of %" PRIu64 " bytes, the other %d talk TCP; %" PRIu64
                    " bytes would give every pair GS_SHM_BYTES",
                    tp->shm_max_auto ? " (auto)" : "", n, plan.budget, plan.pairs, plan.pairs_total,
                    plan.max_dist, plan.ring, plan.pairs_total - plan.pairs, plan.need);
        } else if (plan.ring < tp->shm_bytes) {
            GS_INFO(NET,
                    "tcp: GS_SHM_MAX_BYTES%s gives the %d ranks of this host %" PRIu64
                    " bytes of shared memory: every pair gets rings of %" PRIu64
                    " bytes (GS_SHM_BYTES asks %" PRIu64 ")",
                    tp->shm_max_auto ? " (auto)" : "", n, plan.budget, plan.ring, tp->shm_bytes);
        }
    }
    free(lidx);
    return GS_OK;
}

void gs__tcp_shm_pair_create(gs__tp_t *tp, int peer, uint8_t *rec)
{
    gs__tcp_peer_t *p = &tp->peers[peer];
    gs__tcp_shm_msg_t m = {.kind = GS_TCP_SHM_CREATE};
    char why[GS_TCP_REASON_MAX + 64];
    gs__shm_seg_id_t id;

    p->shm = calloc(1, sizeof(*p->shm));
    if (p->shm == NULL) {
        GS_WARN("tcp: rank %d: out of memory for shared memory with rank %d; the pair talks over "
                "TCP instead",
                tp->rank, peer);
        gs__tcp_shm_encode(&m, rec);
        return;
    }
    seg_id(tp, tp->rank, peer, p->shm_ring, &id);
    if (gs__shm_seg_create(&p->shm->seg, &id, tp->shm_test_free, why, sizeof(why)) == GS_OK) {
        m.ok = true;
        m.ring_bytes = p->shm_ring;
        m.nonce = id.nonce;
        snprintf(m.name, sizeof(m.name), "%s", p->shm->seg.name);
        p->shm->ring_bytes = p->shm_ring;
    } else {
        GS_WARN("tcp: rank %d: no shared memory with rank %d on this host: %s; the pair talks "
                "over TCP instead (give the container a larger /dev/shm, e.g. docker run "
                "--shm-size, lower GS_SHM_BYTES, or set GS_SHM=0)",
                tp->rank, peer, why);
        free(p->shm);
        p->shm = NULL;
    }
    gs__tcp_shm_encode(&m, rec);
}

static gs_status_t rec_decode(int peer, const uint8_t *rec, uint32_t kind, gs__tcp_shm_msg_t *m)
{
    char why[GS_TCP_REASON_MAX];

    if (gs__tcp_shm_decode(rec, GS_TCP_SHM_LEN, m, why, sizeof(why)) != GS_OK) {
        return gs__error_set(GS_ERR_PROTOCOL,
                             "tcp: rank %d sent a bad shared-memory setup record: %s", peer, why);
    }
    if (m->kind != kind) {
        return gs__error_set(GS_ERR_PROTOCOL,
                             "tcp: rank %d sent shared-memory setup record %" PRIu32
                             ", expected %" PRIu32,
                             peer, m->kind, kind);
    }
    return GS_OK;
}

gs_status_t gs__tcp_shm_pair_map(gs__tp_t *tp, int peer, uint8_t *rec, bool *reply)
{
    gs__tcp_peer_t *p = &tp->peers[peer];
    gs__tcp_shm_msg_t m;
    gs__tcp_shm_msg_t ack = {.kind = GS_TCP_SHM_MAPPED};
    char why[GS_TCP_REASON_MAX];
    gs__shm_seg_id_t id;
    gs_status_t status = rec_decode(peer, rec, GS_TCP_SHM_CREATE, &m);

    *reply = false;
    if (status != GS_OK) {
        return status;
    }
    if (!m.ok) {
        GS_INFO(NET, "tcp: rank %d: rank %d could not create shared memory; TCP it is", tp->rank,
                peer);
        return GS_OK; /* it said so already; nothing to confirm */
    }
    *reply = true;
    if ((m.ring_bytes > tp->shm_bytes) || (m.ring_bytes < GS_SHM_MIN_BYTES)) {
        GS_WARN("tcp: rank %d: rank %d made shared-memory rings of %" PRIu64
                " bytes, outside %llu..%" PRIu64 " (this rank's GS_SHM_BYTES); the pair talks "
                "over TCP instead (give every rank the same GS_SHM_BYTES)",
                tp->rank, peer, m.ring_bytes, (unsigned long long)GS_SHM_MIN_BYTES, tp->shm_bytes);
        gs__tcp_shm_encode(&ack, rec);
        return GS_OK;
    }
    p->shm = calloc(1, sizeof(*p->shm));
    if (p->shm == NULL) {
        gs__tcp_shm_encode(&ack, rec);
        return GS_OK; /* "not ok": TCP */
    }
    seg_id(tp, peer, tp->rank, m.ring_bytes, &id);
    id.nonce = m.nonce;
    if (gs__shm_seg_open(&p->shm->seg, m.name, &id, why, sizeof(why)) == GS_OK) {
        ack.ok = true;
        p->shm->ring_bytes = m.ring_bytes;
    } else {
        GS_WARN("tcp: rank %d: cannot map the shared memory of rank %d on this host: %s; the "
                "pair talks over TCP instead",
                tp->rank, peer, why);
        free(p->shm);
        p->shm = NULL;
    }
    gs__tcp_shm_encode(&ack, rec);
    return GS_OK;
}

gs_status_t gs__tcp_shm_pair_mapped(gs__tp_t *tp, int peer, const uint8_t *rec)
{
    gs__tcp_peer_t *p = &tp->peers[peer];
    gs__tcp_shm_msg_t m;
    gs_status_t status = rec_decode(peer, rec, GS_TCP_SHM_MAPPED, &m);

    if (status != GS_OK) {
        return status;
    }
    gs__shm_seg_unlink(&p->shm->seg); /* mapped by both (or given up): the name goes */
    if (!m.ok) {
        GS_INFO(NET, "tcp: rank %d: rank %d could not map our shared memory; TCP", tp->rank, peer);
        gs__shm_seg_close(&p->shm->seg);
        free(p->shm);
        p->shm = NULL;
    }
    return GS_OK;
}

void gs__tcp_shm_link_on(gs__tp_t *tp, int peer)
{
    gs__tcp_peer_t *p = &tp->peers[peer];
    gs__tcp_conn_t *c = &p->conns[0];

    if (p->shm == NULL) {
        return;
    }
    gs__shm_seg_rings(&p->shm->seg, p->shm->ring_bytes, tp->rank < peer, &p->shm->tx, &p->shm->rx);
    c->shm = p->shm;
    c->pipe = &gs__tcp_pipe_shm;
    tp->shm_conns[tp->nshm++] = c;
    GS_INFO(NET, "tcp: rank %d talks to rank %d through shared memory (2 x %" PRIu64 " bytes)",
            tp->rank, peer, p->shm->ring_bytes);
}

void gs__tcp_shm_free(gs__tp_t *tp)
{
    for (int q = 0; (tp->peers != NULL) && (q < tp->size); q++) {
        gs__tcp_peer_t *p = &tp->peers[q];

        if (p->shm != NULL) {
            if (p->conns != NULL) {
                p->conns[0].shm = NULL;
                p->conns[0].pipe = &gs__tcp_pipe_plain;
            }
            gs__shm_seg_close(&p->shm->seg);
            free(p->shm);
            p->shm = NULL;
        }
    }
    free(tp->shm_conns);
    tp->shm_conns = NULL;
    tp->nshm = 0;
}

/* ---------------------------------------------------------------------- */
/* Data path                                                              */
/* ---------------------------------------------------------------------- */

static void ring_corrupt(gs__tp_t *tp, gs__tcp_conn_t *c, const char *which)
{
    gs__tcp_peer_fail(tp, c->peer, GS_ERR_PROTOCOL,
                      "peer %d corrupted the shared-memory ring (%s position out of range)",
                      c->peer, which);
}

/* The shm pipe's writev: gathered bytes into c's tx ring (0: full). */
static ssize_t shm_pipe_writev(gs__tp_t *tp, gs__tcp_conn_t *c, const struct iovec *iov,
                               size_t niov, gs__tcp_pipe_res_t *res)
{
    size_t n = 0;

    (void)res;
    if (gs__shm_ring_writev(&c->shm->tx, iov, niov, &n) != GS_OK) {
        ring_corrupt(tp, c, "read");
        return GS_TCP_PIPE_FAILED;
    }
    return (ssize_t)n; /* 0: GS_TCP_PIPE_AGAIN (the sweep or a doorbell resumes it) */
}

/* The shm pipe's read: from c's rx ring (dst NULL discards). An empty ring
 * after the socket closed is the EOF (or error) the socket reported, acted
 * on only now, so a BYE or DOWN written before it is still read first. */
static ssize_t shm_pipe_read(gs__tp_t *tp, gs__tcp_conn_t *c, void *dst, size_t len,
                             gs__tcp_pipe_res_t *res)
{
    size_t n = 0;

    if (gs__shm_ring_read(&c->shm->rx, dst, len, &n) != GS_OK) {
        ring_corrupt(tp, c, "write");
        return GS_TCP_PIPE_FAILED;
    }
    if (n > 0) {
        return (ssize_t)n;
    }
    if (!c->shm->sock_closed) {
        return GS_TCP_PIPE_AGAIN;
    }
    res->err = c->shm->sock_err;
    return (c->shm->sock_err != 0) ? GS_TCP_PIPE_ERR : GS_TCP_PIPE_EOF;
}

static void ring_doorbell(gs__tp_t *tp, gs__tcp_conn_t *c)
{
    uint8_t b = GS_TCP_SHM_DOORBELL;
    ssize_t n;

    do {
        n = send(c->fd, &b, 1, MSG_NOSIGNAL | MSG_DONTWAIT);
    } while ((n < 0) && (errno == EINTR));
    if ((n < 0) && (errno != EAGAIN) && (errno != EWOULDBLOCK)) {
        /* EAGAIN: doorbells are already queued, the peer will wake. */
        gs__tcp_peer_fail(tp, c->peer, GS_ERR_PEER_FAILED, "%s peer %d",
                          ((errno == EPIPE) || (errno == ECONNRESET)) ? "connection reset by"
                                                                      : "doorbell failed to",
                          c->peer);
    }
}

void gs__tcp_shm_wake_reader(gs__tp_t *tp, gs__tcp_conn_t *c)
{
    if ((c->fd >= 0) && gs__shm_ring_wake_reader(&c->shm->tx)) {
        ring_doorbell(tp, c);
    }
}

void gs__tcp_shm_wake_writer(gs__tp_t *tp, gs__tcp_conn_t *c)
{
    if ((c->fd >= 0) && gs__shm_ring_wake_writer(&c->shm->rx)) {
        ring_doorbell(tp, c);
    }
}

void gs__tcp_shm_drain_doorbell(gs__tp_t *tp, gs__tcp_conn_t *c)
{
    uint8_t buf[64];

    while ((c->fd >= 0) && !c->shm->sock_closed) {
        ssize_t n = recv(c->fd, buf, sizeof(buf), MSG_DONTWAIT);

        if (n > 0) {
            for (ssize_t i = 0; i < n; i++) {
                if (buf[i] != GS_TCP_SHM_DOORBELL) {
                    gs__tcp_peer_fail(tp, c->peer, GS_ERR_PROTOCOL,
                                      "peer %d sent byte 0x%02x on the socket of a "
                                      "shared-memory link (only doorbells belong there)",
                                      c->peer, buf[i]);
                    return;
                }
            }
            if ((size_t)n < sizeof(buf)) {
                return; /* the socket had no more: skip the EAGAIN call */
            }
            continue;
        }
        if ((n < 0) && (errno == EINTR)) {
            continue;
        }
        if ((n < 0) && ((errno == EAGAIN) || (errno == EWOULDBLOCK))) {
            return;
        }
        c->shm->sock_closed = true;
        c->shm->sock_err = (n < 0) ? errno : 0;
    }
}

bool gs__tcp_shm_arm(gs__tp_t *tp)
{
    bool ready = false;

    for (int i = 0; i < tp->nshm; i++) {
        gs__tcp_conn_t *c = tp->shm_conns[i];

        if ((c->fd < 0) || (c->rstate == GS_TCP_RS_PARKED)) {
            continue;
        }
        ready = gs__shm_ring_reader_arm(&c->shm->rx) || ready;
        if (c->sq_head != NULL) {
            ready = gs__shm_ring_writer_arm(&c->shm->tx) || ready;
        }
    }
    return ready;
}

void gs__tcp_shm_disarm(gs__tp_t *tp)
{
    for (int i = 0; i < tp->nshm; i++) {
        if (tp->shm_conns[i]->fd >= 0) {
            gs__shm_ring_reader_disarm(&tp->shm_conns[i]->shm->rx);
            gs__shm_ring_writer_disarm(&tp->shm_conns[i]->shm->tx);
        }
    }
}

void gs__tcp_shm_sweep(gs__tp_t *tp)
{
    for (int i = 0; i < tp->nshm; i++) {
        gs__tcp_conn_t *c = tp->shm_conns[i];
        uint64_t n = 0;

        if ((c->fd >= 0) && (c->rstate != GS_TCP_RS_PARKED) &&
            ((gs__shm_ring_readable(&c->shm->rx, &n) != GS_OK) || (n > 0))) {
            gs__tcp_conn_read_ring(tp, c); /* reports a corrupt ring */
        }
        if ((c->fd >= 0) && (c->sq_head != NULL) &&
            ((gs__shm_ring_writable(&c->shm->tx, &n) != GS_OK) || (n > 0))) {
            gs__tcp_conn_flush(tp, c);
        }
    }
}

/* On a shared-memory link the socket carries only doorbells and the EOF. */
static void shm_pipe_on_readable(gs__tp_t *tp, gs__tcp_conn_t *c)
{
    gs__tcp_shm_drain_doorbell(tp, c);
}

const gs__tcp_pipe_ops_t gs__tcp_pipe_shm = {
    .name = "shm",
    .writev = shm_pipe_writev,
    .read = shm_pipe_read,
    .on_readable = shm_pipe_on_readable,
    .read_done = gs__tcp_shm_wake_writer, /* we may have freed room it waits for */
    .wrote = gs__tcp_shm_wake_reader,
    .poll_out = false,         /* a ring's room is announced by the peer's doorbell */
    .short_read_drains = true, /* a ring holds no more than it gave */
    .exact = true,             /* a ring read is no syscall: headers exactly, payloads in place */
};
