/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Shared memory for peers on the same host, inside the TCP transport.
 *
 * Setup (at connect, after the handshakes, before any frame): a pair whose
 * HELLO and ACK on socket 0 both carried GS_TCP_HS_F_SHM swaps OFFER
 * records (host id, ring size) on that socket. Equal host ids make the pair
 * local: the lower rank creates a segment (tcp_shm_seg.h) and sends CREATE with
 * its name, or CREATE "not ok" when it could not (too little room in
 * /dev/shm: WARN naming the bytes); the higher rank maps it (and unlinks the
 * name) and answers MAPPED. Both sides reach the same verdict from the same
 * records, so they agree on TCP or shared memory per peer. The phases run
 * in the same order on every rank (send every OFFER, read every OFFER,
 * create, map, confirm), and each read only waits for a record the peer
 * sends before its own first read of a later phase, so no rank can wait on
 * another in a cycle.
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
#include <poll.h>
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

/* How long one poll() waits before the abort flag is looked at again. */
#define SHM_POLL_SLICE_MS 100

/* ---------------------------------------------------------------------- */
/* Setup                                                                  */
/* ---------------------------------------------------------------------- */

/* Move len bytes on peer's socket 0, blocking until the deadline. */
static gs_status_t setup_io(gs__tp_t *tp, int peer, uint8_t *buf, size_t len, bool writing,
                            uint64_t deadline_ns)
{
    int fd = tp->peers[peer].conns[0].fd;
    size_t done = 0;

    while (done < len) {
        struct pollfd pfd = {.fd = fd, .events = writing ? POLLOUT : POLLIN};
        uint64_t now;
        ssize_t n;
        int ms;

        if (writing) {
            n = send(fd, buf + done, len - done, MSG_NOSIGNAL | MSG_DONTWAIT);
        } else {
            n = recv(fd, buf + done, len - done, MSG_DONTWAIT);
        }
        if (n > 0) {
            done += (size_t)n;
            continue;
        }
        if ((n == 0) && !writing) {
            return gs__error_set(GS_ERR_PEER_FAILED,
                                 "tcp: rank %d: rank %d closed the connection while setting up "
                                 "shared memory",
                                 tp->rank, peer);
        }
        if ((n < 0) && (errno != EAGAIN) && (errno != EWOULDBLOCK) && (errno != EINTR)) {
            return gs__error_set(GS_ERR_PEER_FAILED,
                                 "tcp: rank %d: the connection to rank %d failed while setting "
                                 "up shared memory: %s",
                                 tp->rank, peer, strerror(errno));
        }
        if (atomic_load(&tp->aborted)) {
            return gs__error_set(GS_ERR_ABORTED, "tcp: rank %d: connect aborted", tp->rank);
        }
        now = gs__now_ns();
        if (now >= deadline_ns) {
            return gs__error_set(GS_ERR_TIMEOUT,
                                 "tcp: rank %d timed out setting up shared memory with rank %d",
                                 tp->rank, peer);
        }
        ms = (int)((deadline_ns - now) / 1000000u) + 1;
        (void)poll(&pfd, 1, (ms > SHM_POLL_SLICE_MS) ? SHM_POLL_SLICE_MS : ms);
    }
    return GS_OK;
}

static gs_status_t send_rec(gs__tp_t *tp, int peer, const gs__tcp_shm_msg_t *m,
                            uint64_t deadline_ns)
{
    uint8_t buf[GS_TCP_SHM_LEN];

    gs__tcp_shm_encode(m, buf);
    return setup_io(tp, peer, buf, sizeof(buf), true, deadline_ns);
}

static gs_status_t recv_rec(gs__tp_t *tp, int peer, uint32_t kind, gs__tcp_shm_msg_t *m,
                            uint64_t deadline_ns)
{
    uint8_t buf[GS_TCP_SHM_LEN];
    char why[GS_TCP_REASON_MAX];
    gs_status_t status = setup_io(tp, peer, buf, sizeof(buf), false, deadline_ns);

    if (status != GS_OK) {
        return status;
    }
    if (gs__tcp_shm_decode(buf, sizeof(buf), m, why, sizeof(why)) != GS_OK) {
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

static void seg_id(const gs__tp_t *tp, int lo, int hi, uint64_t ring, gs__shm_seg_id_t *id)
{
    memset(id, 0, sizeof(*id));
    id->job_id = tp->job_id;
    id->comm_id = tp->comm_id;
    id->lo = (uint32_t)lo;
    id->hi = (uint32_t)hi;
    id->ring_bytes = ring;
}

/* Lower rank: make the segment and tell the peer (ring 0: the budget left the
 * pair to TCP; say so with CREATE "not ok"). */
static gs_status_t setup_create(gs__tp_t *tp, int peer, uint64_t ring, uint64_t deadline_ns)
{
    gs__tcp_peer_t *p = &tp->peers[peer];
    gs__tcp_shm_msg_t m = {.kind = GS_TCP_SHM_CREATE};
    char why[GS_TCP_REASON_MAX + 64];
    gs__shm_seg_id_t id;
    gs_status_t status;

    if (ring == 0) {
        return send_rec(tp, peer, &m, deadline_ns);
    }
    p->shm = calloc(1, sizeof(*p->shm));
    if (p->shm == NULL) {
        return gs__error_set(GS_ERR_NO_MEMORY, "tcp: out of memory for a shared-memory link");
    }
    seg_id(tp, tp->rank, peer, ring, &id);
    status = gs__shm_seg_create(&p->shm->seg, &id, tp->shm_test_free, why, sizeof(why));
    if (status == GS_OK) {
        m.ok = true;
        m.ring_bytes = ring;
        m.nonce = id.nonce;
        snprintf(m.name, sizeof(m.name), "%s", p->shm->seg.name);
        p->shm->ring_bytes = ring;
    } else {
        GS_WARN("tcp: rank %d: no shared memory with rank %d on this host: %s; the pair talks "
                "over TCP instead (give the container a larger /dev/shm, e.g. docker run "
                "--shm-size, lower GS_SHM_BYTES, or set GS_SHM=0)",
                tp->rank, peer, why);
        free(p->shm);
        p->shm = NULL;
    }
    return send_rec(tp, peer, &m, deadline_ns);
}

/* Higher rank: map what the peer made and confirm. */
static gs_status_t setup_map(gs__tp_t *tp, int peer, uint64_t ring, uint64_t deadline_ns)
{
    gs__tcp_peer_t *p = &tp->peers[peer];
    gs__tcp_shm_msg_t m;
    gs__tcp_shm_msg_t ack = {.kind = GS_TCP_SHM_MAPPED};
    char why[GS_TCP_REASON_MAX];
    gs__shm_seg_id_t id;
    gs_status_t status = recv_rec(tp, peer, GS_TCP_SHM_CREATE, &m, deadline_ns);

    if (status != GS_OK) {
        return status;
    }
    if (!m.ok) {
        GS_INFO(NET, "tcp: rank %d: rank %d could not create shared memory; TCP it is", tp->rank,
                peer);
        return GS_OK; /* it said so already; nothing to confirm */
    }
    if ((m.ring_bytes > ring) || (m.ring_bytes < GS_SHM_MIN_BYTES)) {
        return gs__error_set(GS_ERR_PROTOCOL,
                             "tcp: rank %d created shared-memory rings of %" PRIu64
                             " bytes, outside %llu..%" PRIu64 " (the sizes we offered)",
                             peer, m.ring_bytes, (unsigned long long)GS_SHM_MIN_BYTES, ring);
    }
    ring = m.ring_bytes; /* the creator's budget may have made it smaller */
    p->shm = calloc(1, sizeof(*p->shm));
    if (p->shm == NULL) {
        return gs__error_set(GS_ERR_NO_MEMORY, "tcp: out of memory for a shared-memory link");
    }
    seg_id(tp, peer, tp->rank, ring, &id);
    id.nonce = m.nonce;
    status = gs__shm_seg_open(&p->shm->seg, m.name, &id, why, sizeof(why));
    if (status == GS_OK) {
        ack.ok = true;
        p->shm->ring_bytes = ring;
    } else {
        GS_WARN("tcp: rank %d: cannot map the shared memory of rank %d on this host: %s; the "
                "pair talks over TCP instead",
                tp->rank, peer, why);
        free(p->shm);
        p->shm = NULL;
    }
    return send_rec(tp, peer, &ack, deadline_ns);
}

static gs_status_t link_activate(gs__tp_t *tp, int peer, bool creator)
{
    gs__tcp_peer_t *p = &tp->peers[peer];
    gs__tcp_conn_t *c = &p->conns[0];

    gs__shm_seg_rings(&p->shm->seg, p->shm->ring_bytes, creator, &p->shm->tx, &p->shm->rx);
    c->shm = p->shm;
    c->pipe = &gs__tcp_pipe_shm;
    tp->shm_conns[tp->nshm++] = c;
    GS_INFO(NET, "tcp: rank %d talks to rank %d through shared memory (2 x %" PRIu64 " bytes)",
            tp->rank, peer, p->shm->ring_bytes);
    return GS_OK;
}

/*
 * GS_SHM_MAX_BYTES (core/shm_budget.h): number the local ranks (this one and
 * every peer with a ring) in rank order into @p lidx, plan their pair rings
 * and return how many there are. Every local rank plans the same from the
 * same offers; only the creator of a pair applies it (CREATE carries the
 * ring, or "not ok"), so two ranks with different settings still agree. The
 * lowest local rank says once what the budget left out.
 */
static int shm_budget(gs__tp_t *tp, const uint64_t *ring, int *lidx, gs__shm_plan_t *plan)
{
    int n = 0;

    for (int q = 0; q < tp->size; q++) {
        lidx[q] = ((q == tp->rank) || (ring[q] != 0)) ? n++ : -1;
    }
    gs__shm_plan(gs__shm_budget(tp->shm_max_auto, tp->shm_max, n, gs__shm_total_bytes()), n,
                 (n == tp->size) ? (uint64_t)n * tp->shm_reserve : 0, tp->shm_bytes,
                 GS_SHM_SEG_OVERHEAD, plan);
    if (lidx[tp->rank] != 0) {
        return n;
    }
    {
        /* Before this host's first segment: what killed jobs left behind. */
        const int removed = gs__shm_seg_sweep();

        if (removed > 0) {
            GS_WARN("tcp: removed %d shared-memory segment%s of gradsync processes that are gone "
                    "from %s (a rank killed while setting up shared memory leaves one)",
                    removed, (removed == 1) ? "" : "s", GS_SHM_DIR);
        }
    }
    if (plan->pairs == 0) {
        GS_WARN("tcp: GS_SHM_MAX_BYTES%s gives the %d ranks of this host %" PRIu64
                " bytes of shared memory: too little for the rings of their nearest pairs, so all "
                "%d pairs talk TCP; %" PRIu64 " bytes would give every pair GS_SHM_BYTES",
                tp->shm_max_auto ? " (auto)" : "", n, plan->budget, plan->pairs_total, plan->need);
    } else if (plan->pairs < plan->pairs_total) {
        GS_WARN("tcp: GS_SHM_MAX_BYTES%s gives the %d ranks of this host %" PRIu64
                " bytes of shared memory: %d of their %d pairs (those at most %d apart in rank "
                "order) get rings of %" PRIu64 " bytes, the other %d talk TCP; %" PRIu64
                " bytes would give every pair GS_SHM_BYTES",
                tp->shm_max_auto ? " (auto)" : "", n, plan->budget, plan->pairs, plan->pairs_total,
                plan->max_dist, plan->ring, plan->pairs_total - plan->pairs, plan->need);
    } else if (plan->ring < tp->shm_bytes) {
        GS_INFO(NET,
                "tcp: GS_SHM_MAX_BYTES%s gives the %d ranks of this host %" PRIu64
                " bytes of shared memory: every pair gets rings of %" PRIu64
                " bytes (GS_SHM_BYTES asks %" PRIu64 ")",
                tp->shm_max_auto ? " (auto)" : "", n, plan->budget, plan->ring, tp->shm_bytes);
    }
    return n;
}

gs_status_t gs__tcp_shm_setup(gs__tp_t *tp, uint64_t deadline_ns)
{
    gs__tcp_shm_msg_t offer = {.kind = GS_TCP_SHM_OFFER, .ok = true};
    uint64_t *ring = NULL; /* agreed ring size per peer, 0 when not local */
    int *lidx = NULL;      /* index among the local ranks, -1 when not local */
    gs__shm_plan_t plan;
    gs_status_t status = GS_OK;
    int nlocal = 0;
    int ncand = 0;

    for (int q = 0; q < tp->size; q++) {
        ncand += ((q != tp->rank) && tp->shm_offer && tp->peers[q].shm_offered) ? 1 : 0;
    }
    if (ncand == 0) {
        return GS_OK;
    }
    ring = calloc((size_t)tp->size, sizeof(*ring));
    lidx = calloc((size_t)tp->size, sizeof(*lidx));
    tp->shm_conns = calloc((size_t)ncand, sizeof(*tp->shm_conns));
    if ((ring == NULL) || (lidx == NULL) || (tp->shm_conns == NULL)) {
        free(ring);
        free(lidx);
        return gs__error_set(GS_ERR_NO_MEMORY, "tcp: out of memory for shared-memory setup");
    }
    memset(&plan, 0, sizeof(plan));
    offer.host_id = tp->host_id;
    offer.ring_bytes = tp->shm_bytes;
    /* 1: every OFFER out, then every OFFER in. */
    for (int q = 0; (q < tp->size) && (status == GS_OK); q++) {
        if ((q != tp->rank) && tp->peers[q].shm_offered) {
            status = send_rec(tp, q, &offer, deadline_ns);
        }
    }
    for (int q = 0; (q < tp->size) && (status == GS_OK); q++) {
        gs__tcp_shm_msg_t m;

        if ((q == tp->rank) || !tp->peers[q].shm_offered) {
            continue;
        }
        status = recv_rec(tp, q, GS_TCP_SHM_OFFER, &m, deadline_ns);
        if ((status == GS_OK) && m.ok && (m.host_id == tp->host_id)) {
            ring[q] = (m.ring_bytes < tp->shm_bytes) ? m.ring_bytes : tp->shm_bytes;
        } else if (status == GS_OK) {
            GS_INFO(NET, "tcp: rank %d: rank %d runs on another host; TCP", tp->rank, q);
        }
    }
    /* 2: create for the higher local peers, as large as the budget lets. */
    if (status == GS_OK) {
        nlocal = shm_budget(tp, ring, lidx, &plan);
    }
    for (int q = tp->rank + 1; (q < tp->size) && (status == GS_OK); q++) {
        if (ring[q] != 0) {
            const uint64_t r = gs__shm_plan_ring(&plan, nlocal, lidx[tp->rank], lidx[q]);
            status = setup_create(tp, q, (r < ring[q]) ? r : ring[q], deadline_ns);
        }
    }
    /* 3: map what the lower local peers made. */
    for (int q = 0; (q < tp->rank) && (status == GS_OK); q++) {
        if (ring[q] != 0) {
            status = setup_map(tp, q, ring[q], deadline_ns);
            if ((status == GS_OK) && (tp->peers[q].shm != NULL)) {
                status = link_activate(tp, q, false);
            }
        }
    }
    /* 4: the higher peers' confirmations. */
    for (int q = tp->rank + 1; (q < tp->size) && (status == GS_OK); q++) {
        gs__tcp_peer_t *p = &tp->peers[q];
        gs__tcp_shm_msg_t m;

        if ((ring[q] == 0) || (p->shm == NULL)) {
            continue;
        }
        status = recv_rec(tp, q, GS_TCP_SHM_MAPPED, &m, deadline_ns);
        if (status != GS_OK) {
            break;
        }
        gs__shm_seg_unlink(&p->shm->seg); /* mapped by both (or given up): the name goes */
        if (m.ok) {
            status = link_activate(tp, q, true);
        } else {
            GS_INFO(NET, "tcp: rank %d: rank %d could not map our shared memory; TCP", tp->rank, q);
            gs__shm_seg_close(&p->shm->seg);
            free(p->shm);
            p->shm = NULL;
        }
    }
    free(ring);
    free(lidx);
    return status;
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
